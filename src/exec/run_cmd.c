/* run_cmd.c — `quantmake run`: run a model on inputs, write and compare
 * outputs, measure latency; and the conformance driver behind
 * tests/t_run_conformance.sh.
 *
 *   quantmake run MODEL [-i [NAME=]FILE]... [-d TEST_DATA_SET_DIR]
 *                 [-o OUT.npz|.npy|.pb] [--compare DIR] [--bench N]
 *                 [-t THREADS] [-q] [--trace]
 *   quantmake run MODEL -s SAMPLES... [--stats]   every sample (files, dirs,
 *                                          globs); --stats: each tensor's range
 *   quantmake run --check MODEL...        which models the interpreter supports
 *   quantmake run --dump DATA... [-o OUT] print (and convert) data files
 *   quantmake run --conformance DIR...    ONNX test directories (model.onnx +
 *                                          test_data_set_N/), one line each
 *
 * --trace prints every tensor as it is produced (a tap); --bench N times N
 * more runs and checks that each reproduces the first run's outputs.
 * Without a tap (--trace, --stats) the interpreter frees the bytes of the
 * weights its kernels keep packed (InterpOpts.release_consts): nothing
 * here reads the initializers again. --keep-weights (for tests and
 * measurements) keeps them. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/stat.h>

#include "commands.h"
#include "exec/compare.h"
#include "exec/dataio.h"
#include "exec/interp.h"
#include "onnx/model.h"
#include "strmap.h"
#include "util.h"

/* tolerances of --compare and the conformance driver (--rtol, --atol) */
static double cmp_rtol = 1e-3, cmp_atol = 1e-5;

static void run_usage(FILE *f)
{
	fprintf(f, "usage: quantmake run MODEL [-i [NAME=]FILE]... [-d TEST_DATA_SET_DIR] [-o OUT.npz]\n"
			"                     [--compare DIR [--rtol R] [--atol A]] [--bench N] [-t THREADS] [-q] [--trace]\n"
			"       quantmake run MODEL -s SAMPLES... [--stats]   (files, dirs, globs of .npy/.npz/.pb)\n"
			"       quantmake run --check MODEL...\n");
}

/* compare outputs with DIR/output_K.pb: 0 all match, 1 a mismatch (printed
 * to stderr, or into why), -1 error */
/* the value kind (TK_*) a declared type stands for */
static int vi_kind(const Onnx__ValueInfoProto *vi)
{
	const Onnx__TypeProto *tp = vi ? vi->type : NULL;
	return !tp ? TK_TENSOR : tp->value_case == ONNX__TYPE_PROTO__VALUE_SEQUENCE_TYPE ? TK_SEQUENCE
		: tp->value_case == ONNX__TYPE_PROTO__VALUE_OPTIONAL_TYPE ? TK_OPTIONAL : TK_TENSOR;
}

/* the kinds of vis[0..n) (caller frees) */
static int *vi_kinds(Onnx__ValueInfoProto *const *vis, size_t n)
{
	int *k = xcalloc(n ? n : 1, sizeof *k);
	for (size_t i = 0; i < n; i++)
		k[i] = vi_kind(vis[i]);
	return k;
}

static int compare_dir(Model *m, Interp *ip, const char *dir, const Tensor *out, size_t nout, char *why, size_t whysize)
{
	TensorList want;
	const Onnx__GraphProto *g = m->proto->graph;
	int *kinds = vi_kinds(g->output, g->n_output);
	int e = testset_read_kinds(dir, "output", kinds, g->n_output, &want);
	free(kinds);
	if (e < 0)
		return -1;
	int r = 0;
	if (want.n == 0) {
		r = error("%s: no output_*.pb files", dir);
	} else if (want.n != nout) {
		snprintf(why, whysize, "model has %zu outputs, %s holds %zu", nout, dir, want.n);
		r = 1;
	}
	for (size_t i = 0; r == 0 && i < nout; i++) {
		CompareResult cr;
		char w[512];
		if (out[i].dtype == DT_BFLOAT16 && want.t[i].dtype == DT_UINT16)
			want.t[i].dtype = DT_BFLOAT16; /* see read_testset_inputs */
		if (tensor_compare(&out[i], &want.t[i], cmp_rtol, cmp_atol, &cr, w, sizeof w)) {
			snprintf(why, whysize, "output '%s': %s", interp_output_name(ip, i), w);
			r = 1;
		}
	}
	tl_free(&want);
	return r;
}

/* inputs of a test data set: positional over the model's inputs, or over all
 * graph inputs (old models list initializers as inputs) */
static int read_testset_inputs(Model *m, Interp *ip, const char *dir, TensorList *in)
{
	/* input_K.pb feeds real input K, or graph input K in old models */
	const Onnx__GraphProto *g = m->proto->graph;
	int *kinds = xcalloc(g->n_input ? g->n_input : 1, sizeof *kinds);
	size_t nk = interp_ninputs(ip);
	for (size_t i = 0; i < nk; i++)
		for (size_t j = 0; j < g->n_input; j++)
			if (!strcmp(g->input[j]->name, interp_input_name(ip, i)))
				kinds[i] = vi_kind(g->input[j]);
	int e = testset_read_kinds(dir, "input", kinds, nk, in);
	free(kinds);
	if (e < 0)
		return -1;
	/* ONNX's generator stored bfloat16 data as uint16 before numpy knew
	 * the type: take it as the bfloat16 bits the model declares */
	for (size_t i = 0; i < in->n && i < interp_ninputs(ip); i++) {
		int dt, rank;
		int64_t dims[QM_MAX_RANK];
		interp_input_type(ip, i, &dt, &rank, dims);
		if (dt == DT_BFLOAT16 && in->t[i].dtype == DT_UINT16)
			in->t[i].dtype = DT_BFLOAT16;
	}
	if (in->n != interp_ninputs(ip) && in->n <= g->n_input)
		for (size_t i = 0; i < in->n; i++)
			in->t[i].name = xstrdup(g->input[i]->name);
	return 0;
}

static int cmp_dbl(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static int is_unsupported(const char *msg)
{
	return strstr(msg, "not supported") != NULL;
}

/* list DIR's test_data_set_* subdirectories, sorted */
static void list_sets(const char *dir, PtrVec *sets)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	if (!d)
		return;
	while ((de = readdir(d)))
		if (!strncmp(de->d_name, "test_data_set_", 14))
			pv_push(sets, path_join(dir, de->d_name));
	closedir(d);
	for (size_t i = 1; i < sets->n; i++)
		for (size_t j = i; j > 0 && strcmp(sets->v[j - 1], sets->v[j]) > 0; j--) {
			void *t = sets->v[j];
			sets->v[j] = sets->v[j - 1];
			sets->v[j - 1] = t;
		}
}

/* one conformance test directory: prints PASS/FAIL/UNSUPPORTED and returns
 * 0 pass, 1 fail, 2 unsupported */
static int conform_one(const char *dir, int check_only, int threads)
{
	const char *name = strrchr(dir, '/') ? strrchr(dir, '/') + 1 : dir;
	char *mp = path_join(dir, "model.onnx");
	Model *m = NULL;
	Interp *ip = NULL;
	PtrVec sets = {0};
	int r = 1;
	char why[1024] = "";
	const char *failset = NULL;
	if (model_load_view(mp, &m) < 0) {
		snprintf(why, sizeof why, "%s", errmsg());
		goto out;
	}
	InterpOpts o = {.threads = threads, .check_only = check_only};
	ip = interp_new(m, &o);
	if (!ip) {
		snprintf(why, sizeof why, "%s", errmsg());
		r = is_unsupported(why) ? 2 : 1;
		goto out;
	}
	if (check_only) {
		r = 0;
		goto out;
	}
	list_sets(dir, &sets);
	if (sets.n == 0) {
		snprintf(why, sizeof why, "no test_data_set directories");
		goto out;
	}
	for (size_t s = 0; s < sets.n; s++) {
		TensorList in;
		size_t nout = interp_noutputs(ip);
		Tensor *out = xcalloc(nout ? nout : 1, sizeof *out);
		int e = read_testset_inputs(m, ip, sets.v[s], &in);
		if (e == 0 && interp_run(ip, in.n, in.t, nout, out) < 0)
			e = -1;
		if (e == 0)
			e = compare_dir(m, ip, sets.v[s], out, nout, why, sizeof why);
		if (e < 0)
			snprintf(why, sizeof why, "%s", errmsg());
		if (e != 0) {
			failset = strrchr(sets.v[s], '/') + 1;
			r = is_unsupported(why) ? 2 : 1;
		}
		for (size_t i = 0; i < nout; i++)
			tensor_free(&out[i]);
		free(out);
		tl_free(&in);
		if (e != 0)
			goto report;
	}
	r = 0;
	goto report;
out:
	failset = NULL;
report:
	if (r == 0)
		printf("PASS: %s\n", name);
	else
		printf("%s: %s: %s%s%s\n", r == 2 ? "UNSUPPORTED" : "FAIL", name,
		       failset ? failset : "", failset ? ": " : "", why);
	fflush(stdout);
	for (size_t i = 0; i < sets.n; i++)
		free(sets.v[i]);
	pv_free(&sets);
	interp_free(ip);
	model_free(m);
	free(mp);
	return r;
}

/* write tensors by the extension of path: .npz all, .npy or .pb one */
static int write_tensors(const char *path, const Tensor *ts, size_t n)
{
	size_t l = strlen(path);
	int one = l > 4 && (!strcmp(path + l - 4, ".npy") || !strcmp(path + l - 3, ".pb"));
	if (one && n != 1)
		return error("%s: %zu tensors do not fit in one .npy/.pb file; write an .npz", path, n);
	if (l > 4 && !strcmp(path + l - 4, ".npy"))
		return npy_write(path, &ts[0]);
	if (l > 3 && !strcmp(path + l - 3, ".pb"))
		return pb_write(path, &ts[0], ts[0].name);
	return npz_write(path, ts, n);
}

/* --dump SPEC...: print the samples found (and write the first to -o) */
static int dump_samples(const char *const *specs, size_t n, const char *outpath)
{
	SampleIter *it;
	if (samples_open(specs, n, &it) < 0)
		return -1;
	TensorList l;
	int r, k = 0;
	while ((r = samples_next(it, &l)) > 0) {
		for (size_t i = 0; i < l.n; i++) {
			const Tensor *t = &l.t[i];
			char sb[256];
			double sum = 0;
			for (int64_t j = 0; j < t->numel && dtype_bits(t->dtype) >= 8; j++)
				sum += tensor_get_f64(t, j);
			printf("sample %d: %s %s %s sum=%.6g\n", k, t->name ? t->name : "-",
			       dtype_name(t->dtype), shape_str(t->rank, t->dims, sb, sizeof sb), sum);
		}
		if (k == 0 && outpath && write_tensors(outpath, l.t, l.n) < 0)
			r = -1;
		tl_free(&l);
		if (r < 0)
			break;
		k++;
	}
	samples_close(it);
	return r;
}

/* --trace: one line per tensor a node produces */
/* "float [2,3]", "sequence of 4 float", "optional (empty)" */
static const char *value_str(const Tensor *t, char *buf, size_t size)
{
	char sb[200];
	if (t->kind == TK_SEQUENCE)
		snprintf(buf, size, "sequence of %lld%s%s", (long long)t->nitems, t->dtype ? " " : "",
			 t->dtype ? dtype_name(t->dtype) : "");
	else if (t->kind == TK_OPTIONAL && !t->nitems)
		snprintf(buf, size, "optional (empty)");
	else if (t->kind == TK_OPTIONAL)
		snprintf(buf, size, "optional %s", value_str(&t->items[0], sb, sizeof sb));
	else
		snprintf(buf, size, "%s %s", dtype_name(t->dtype), shape_str(t->rank, t->dims, sb, sizeof sb));
	return buf;
}

static void trace_tap(void *ud, const char *name, const Tensor *t)
{
	char sb[256];
	double sum = 0;
	if (t->kind != TK_TENSOR) {
		fprintf(ud, "tap: %s %s\n", name, value_str(t, sb, sizeof sb));
		return;
	}
	for (int64_t j = 0; j < t->numel && dtype_bits(t->dtype) >= 8; j++)
		sum += tensor_get_f64(t, j);
	fprintf(ud, "tap: %s %s %s sum=%.6g\n", name, dtype_name(t->dtype),
		shape_str(t->rank, t->dims, sb, sizeof sb), sum);
}

/* -s SPEC --stats: per-tensor range over every sample, gathered by a tap
 * the way a min/max calibrator would, without keeping activations */
typedef struct Stat {
	char *name;
	int dtype;
	double min, max, sum;
	int64_t n;
} Stat;

typedef struct Stats {
	Stat *v;
	size_t n, cap;      /* entries in first-seen order */
	StrMap index;       /* name -> position in v */
} Stats;

static void stats_tap(void *ud, const char *name, const Tensor *t)
{
	Stats *st = ud;
	StrMapEnt *se = strmap_find(&st->index, name);
	if (!se) {
		if (st->n == st->cap) {
			st->cap = st->cap ? 2 * st->cap : 64;
			st->v = xreallocarray(st->v, st->cap, sizeof *st->v);
		}
		st->v[st->n] = (Stat){.name = xstrdup(name), .dtype = t->dtype, .min = INFINITY, .max = -INFINITY};
		se = strmap_add(&st->index, st->v[st->n].name, NULL);
		se->v.u = st->n++;
	}
	Stat *e = &st->v[se->v.u];
	if (dtype_bits(t->dtype) < 8)
		return;
	for (int64_t j = 0; j < t->numel; j++) {
		double v = tensor_get_f64(t, j);
		if (v < e->min)
			e->min = v;
		if (v > e->max)
			e->max = v;
		e->sum += v;
	}
	e->n += t->numel;
}

/* run every sample of specs; print the outputs' shapes per sample and, with
 * stats, every tensor's range */
static int run_samples(Interp *ip, const char *const *specs, size_t nspecs, int stats, int quiet)
{
	SampleIter *it;
	Stats st = {0};
	if (samples_open(specs, nspecs, &it) < 0)
		return -1;
	if (stats)
		interp_set_tap(ip, stats_tap, &st);
	size_t nout = interp_noutputs(ip);
	Tensor *out = xcalloc(nout ? nout : 1, sizeof *out);
	TensorList l;
	int r, k = 0;
	while ((r = samples_next(it, &l)) > 0) {
		r = interp_run_sample(ip, l.n, l.t, nout, out);
		tl_free(&l);
		if (r < 0) {
			error_prefix("sample %d", k);
			break;
		}
		for (size_t i = 0; i < nout; i++) {
			char sb[256];
			if (!quiet)
				printf("sample %d: %s %s\n", k, interp_output_name(ip, i), value_str(&out[i], sb, sizeof sb));
			tensor_free(&out[i]);
		}
		k++;
	}
	free(out);
	samples_close(it);
	interp_set_tap(ip, NULL, NULL);
	if (r == 0 && stats) {
		printf("%-40s %-8s %14s %14s %14s\n", "tensor", "type", "min", "max", "mean");
		for (size_t i = 0; i < st.n; i++)
			printf("%-40s %-8s %14.6g %14.6g %14.6g\n", st.v[i].name, dtype_name(st.v[i].dtype),
			       st.v[i].min, st.v[i].max, st.v[i].n ? st.v[i].sum / (double)st.v[i].n : 0.0);
	}
	for (size_t i = 0; i < st.n; i++)
		free(st.v[i].name);
	free(st.v);
	strmap_free(&st.index);
	return r;
}

/* whether a and b hold the same bytes (sequences and optionals: the same
 * elements) */
static int same_value(const Tensor *a, const Tensor *b)
{
	if (a->kind != b->kind || a->dtype != b->dtype || a->nbytes != b->nbytes || a->nitems != b->nitems ||
	    (a->nbytes && memcmp(a->data, b->data, a->nbytes)))
		return 0;
	for (int64_t i = 0; i < a->nitems; i++)
		if (!same_value(&a->items[i], &b->items[i]))
			return 0;
	return 1;
}

/* the process's resident anonymous memory in KiB (RssAnon, Linux): data
 * without the pages of the binary and its libraries, which the kernels a
 * model runs fault in; -1 where unknown */
static long rss_anon_kib(void)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	long kib = -1;
	while (f && fgets(line, sizeof line, f))
		if (!strncmp(line, "RssAnon:", 8))
			kib = strtol(line + 8, NULL, 10);
	if (f)
		fclose(f);
	return kib;
}

static int add_input(const char *arg, TensorList *in)
{
	const char *eq = strchr(arg, '=');
	const char *file = arg;
	char *name = NULL;
	struct stat st;
	/* NAME=FILE, unless the whole argument is an existing file */
	if (eq && stat(arg, &st) < 0) {
		name = xstrndup(arg, (size_t)(eq - arg));
		file = eq + 1;
	}
	TensorList l;
	if (data_read_file(file, &l) < 0) {
		free(name);
		return -1;
	}
	if (name && l.n != 1) {
		tl_free(&l);
		free(name);
		return error("-i %s: NAME=FILE needs a file with one tensor, '%s' holds %zu", arg, file, l.n);
	}
	for (size_t i = 0; i < l.n; i++) {
		if (name) {
			free(l.t[i].name);
			l.t[i].name = name;
		}
		tl_push(in, &l.t[i]);
	}
	free(l.t);
	return 0;
}

int cmd_run(int argc, char **argv)
{
	const char *model = NULL, *dir = NULL, *outpath = NULL, *cmpdir = NULL;
	int bench = 0, threads = 1, check = 0, conformance = 0, quiet = 0, dump = 0, trace = 0, stats = 0;
	int keep = 0;
	TensorList in = {0};
	PtrVec specs = {0};
	PtrVec rest = {0};
	int rc = 2;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		int more = i + 1 < argc;
		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			run_usage(stdout);
			rc = 0;
			goto out;
		} else if ((!strcmp(a, "-i") || !strcmp(a, "--input")) && more) {
			if (add_input(argv[++i], &in) < 0) {
				fprintf(stderr, "%s: %s\n", argv0, errmsg());
				goto out;
			}
		} else if ((!strcmp(a, "-s") || !strcmp(a, "--samples")) && more) {
			pv_push(&specs, argv[++i]);
		} else if (!strcmp(a, "--stats")) {
			stats = 1;
		} else if (!strcmp(a, "-d") && more) {
			dir = argv[++i];
		} else if (!strcmp(a, "-o") && more) {
			outpath = argv[++i];
		} else if (!strcmp(a, "--compare") && more) {
			cmpdir = argv[++i];
		} else if ((!strcmp(a, "--rtol") || !strcmp(a, "--atol")) && more) {
			char *end;
			double v = strtod(argv[++i], &end);
			if (*end || end == argv[i] || !(v >= 0)) {
				fprintf(stderr, "%s: %s needs a non-negative number, got '%s'\n", argv0, a, argv[i]);
				goto out;
			}
			*(a[2] == 'r' ? &cmp_rtol : &cmp_atol) = v;
		} else if (!strcmp(a, "--bench") && more) {
			bench = atoi(argv[++i]);
			if (bench <= 0) {
				fprintf(stderr, "%s: --bench needs a positive count\n", argv0);
				goto out;
			}
		} else if ((!strcmp(a, "-t") || !strcmp(a, "--threads")) && more) {
			threads = atoi(argv[++i]);
			if (threads <= 0) {
				fprintf(stderr, "%s: --threads needs a positive count\n", argv0);
				goto out;
			}
		} else if (!strcmp(a, "-q")) {
			quiet = 1;
		} else if (!strcmp(a, "--check")) {
			check = 1;
		} else if (!strcmp(a, "--trace")) {
			trace = 1;
		} else if (!strcmp(a, "--keep-weights")) {
			keep = 1;
		} else if (!strcmp(a, "--dump")) {
			dump = 1;
		} else if (!strcmp(a, "--conformance")) {
			conformance = 1;
		} else if (a[0] == '-' && a[1]) {
			fprintf(stderr, "%s: run: unknown option '%s' (see quantmake run --help)\n", argv0, a);
			goto out;
		} else {
			pv_push(&rest, (void *)a);
		}
	}
	if (dump) {
		rc = 0;
		if (dump_samples((const char *const *)rest.v, rest.n, outpath) < 0) {
			fprintf(stderr, "%s: %s\n", argv0, errmsg());
			rc = 2;
		}
		goto out;
	}
	if (conformance) {
		int nfail = 0;
		for (size_t i = 0; i < rest.n; i++)
			nfail += conform_one(rest.v[i], check, threads) == 1;
		rc = nfail ? 1 : 0;
		goto out;
	}
	if (check) {
		rc = 0;
		for (size_t i = 0; i < rest.n; i++) {
			Model *m;
			if (model_load_view(rest.v[i], &m) < 0) {
				fprintf(stderr, "%s: %s\n", argv0, errmsg());
				rc = 2;
				continue;
			}
			if (interp_check_model(m) < 0) {
				printf("%s: %s\n", (char *)rest.v[i], errmsg());
				if (rc == 0)
					rc = 1;
			} else {
				printf("%s: supported\n", (char *)rest.v[i]);
			}
			model_free(m);
		}
		if (rest.n == 0)
			run_usage(stderr), rc = 2;
		goto out;
	}
	if (rest.n != 1) {
		run_usage(stderr);
		goto out;
	}
	model = rest.v[0];

	Model *m;
	if (model_load_view(model, &m) < 0) {
		fprintf(stderr, "%s: %s\n", argv0, errmsg());
		goto out;
	}
	InterpOpts o = {.threads = threads, .tap = trace ? trace_tap : NULL, .tap_ud = stdout,
			.release_consts = !trace && !stats && !keep};
	Interp *ip = interp_new(m, &o);
	Tensor *out = NULL;
	size_t nout = 0;
	if (!ip) {
		fprintf(stderr, "%s: %s: %s\n", argv0, model, errmsg());
		rc = 1;
		goto done;
	}
	if (specs.n) {
		if (in.n || dir || outpath || cmpdir || bench) {
			fprintf(stderr, "%s: run: -s cannot be combined with -i, -d, -o, --compare or --bench\n", argv0);
			goto done;
		}
		rc = run_samples(ip, (const char *const *)specs.v, specs.n, stats, quiet) < 0 ? 1 : 0;
		if (rc)
			fprintf(stderr, "%s: %s: %s\n", argv0, model, errmsg());
		goto done;
	}
	if (stats) {
		fprintf(stderr, "%s: run: --stats needs samples (-s SPEC)\n", argv0);
		goto done;
	}
	if (dir) {
		TensorList d;
		if (read_testset_inputs(m, ip, dir, &d) < 0) {
			fprintf(stderr, "%s: %s\n", argv0, errmsg());
			goto done;
		}
		for (size_t i = 0; i < d.n; i++)
			tl_push(&in, &d.t[i]);
		free(d.t);
	}
	nout = interp_noutputs(ip);
	out = xcalloc(nout ? nout : 1, sizeof *out);
	if (interp_check_inputs(ip, in.n, in.t) < 0) {
		fprintf(stderr, "%s: %s: %s\n", argv0, model, errmsg());
		goto done;
	}
	if (interp_run(ip, in.n, in.t, nout, out) < 0) {
		fprintf(stderr, "%s: %s: %s\n", argv0, model, errmsg());
		rc = 1;
		goto done;
	}
	rc = 0;
	if (!quiet)
		for (size_t i = 0; i < nout; i++) {
			char sb[256];
			printf("%s: %s\n", interp_output_name(ip, i), value_str(&out[i], sb, sizeof sb));
		}
	if (outpath) {
		for (size_t i = 0; i < nout; i++) {
			free(out[i].name);
			out[i].name = xstrdup(interp_output_name(ip, i));
		}
		int e = write_tensors(outpath, out, nout);
		if (e < 0) {
			fprintf(stderr, "%s: %s\n", argv0, errmsg());
			rc = 1;
			goto done;
		}
	}
	if (cmpdir) {
		char why[1024];
		int e = compare_dir(m, ip, cmpdir, out, nout, why, sizeof why);
		if (e < 0) {
			fprintf(stderr, "%s: %s\n", argv0, errmsg());
			rc = 2;
			goto done;
		}
		if (e) {
			fprintf(stderr, "%s: mismatch: %s\n", argv0, why);
			rc = 1;
			goto done;
		}
		if (!quiet)
			printf("outputs match %s\n", cmpdir);
	}
	if (bench) {
		double *lat = xmalloc(sizeof *lat * (size_t)bench), sum = 0;
		Tensor *tmp = xcalloc(nout ? nout : 1, sizeof *tmp);
		interp_set_tap(ip, NULL, NULL);
		for (int b = 0; b < bench && rc == 0; b++) {
			double t0 = now_sec();
			if (interp_run(ip, in.n, in.t, nout, tmp) < 0) {
				fprintf(stderr, "%s: %s\n", argv0, errmsg());
				rc = 1;
			}
			lat[b] = now_sec() - t0;
			sum += lat[b];
			/* reused buffers must not change results */
			for (size_t i = 0; i < nout && rc == 0; i++)
				if (!same_value(&tmp[i], &out[i])) {
					fprintf(stderr, "%s: run %d: output '%s' differs from the first run\n",
						argv0, b + 2, interp_output_name(ip, i));
					rc = 1;
				}
			for (size_t i = 0; i < nout; i++)
				tensor_free(&tmp[i]);
		}
		if (rc == 0) {
			qsort(lat, (size_t)bench, sizeof *lat, cmp_dbl);
			double mean = sum / bench;
			size_t wb, pk;
			interp_stats(ip, &wb, &pk);
			printf("latency: mean %.3f ms, p50 %.3f ms, p90 %.3f ms over %d runs (%d threads); %.1f runs/s\n",
			       mean * 1e3, lat[(bench - 1) / 2] * 1e3, lat[(int)ceil(0.9 * bench) - 1] * 1e3,
			       bench, threads, 1.0 / mean);
			long anon = rss_anon_kib();
			printf("memory: weights %.2f MiB, peak live activations %.2f MiB, activation buffers %.2f MiB",
			       wb / 1048576.0, pk / 1048576.0, interp_buffer_bytes(ip) / 1048576.0);
			if (anon >= 0)
				printf(", anonymous RSS %.2f MiB", anon / 1024.0);
			printf("\n");
		}
		free(tmp);
		free(lat);
	}
done:
	if (out)
		for (size_t i = 0; i < nout; i++)
			tensor_free(&out[i]);
	free(out);
	interp_free(ip);
	model_free(m);
out:
	tl_free(&in);
	pv_free(&rest);
	pv_free(&specs);
	return rc;
}
