/* verify.c — the verify stage: runs the float model the quantize stage
 * started from (c->reference) and the quantized model (c->input) on the same
 * samples (src/verify), writes verify.json and quant.json beside the model,
 * prints a summary, and fails the build when a gate fails: one line per
 * failed gate, "verify: MODEL: GATE: measured X, threshold Y". verify.json is
 * written for a failed verify too (the build keeps it for reading).
 *
 * Gates: those the user set (a number, or off); with none set, the defaults
 * min-sqnr 20 dB and, with labels, max-top1-drop 1 point. 20 dB is an error
 * norm of 10% of the signal's: int8 models that keep their accuracy measure
 * 25-40 dB at the output (the digits MLP 37 dB, top-1 -0.25 points), while
 * the outlier-heavy model of tests/t_verify.sh, at 13 dB, loses 4 points.
 * One gate set (a number or off) replaces both defaults.
 *
 * Auto-exclusion (verify.auto-exclude = N): when the gates fail, the float
 * model is quantized again with the quantize stage's own options (and
 * calibration statistics) plus the worst-ranked exclusion candidate, and
 * measured again; one node per round, the ranking measured afresh each time
 * (leaving a node in float changes what the nodes after it add), until the
 * gates pass or N nodes are left in float. A round that measures no better
 * (fewer failed gates, else a higher lowest output SQNR) is undone and its
 * node tried no more: a node whose tensors stay quantized for quantized
 * neighbours changes nothing by itself, and one that makes the output
 * worse is not worth its float; at most 2N rounds are undone. The output
 * is then the re-quantized model, with its quant.json. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "rules/rules.h"
#include "stages/quantize.h"
#include "stages/stage.h"
#include "verify/verify.h"

#define RANDOM_SAMPLES 16
#define RANDOM_SEED 0
#define DEFAULT_MIN_SQNR 20.0
#define DEFAULT_MAX_TOP1_DROP 1.0
#define MAX_AUTO_EXCLUDE 1000000

static const StageParam params[] = {
	{"verify.data", PARAM_LIST, NULL, NULL, 1,
	 "samples to compare on: .npy/.npz/.pb files, test_data_set directories, directories, globs; or random"},
	{"verify.labels", PARAM_TEXT, NULL, NULL, 1,
	 "top-1 labels: a tensor name inside every sample (e.g. labels) or a .npy/.npz/.pb file"},
	{"verify.max-top1-drop", PARAM_TEXT, NULL, NULL, 1,
	 "gate: largest top-1 accuracy drop, in points, or off"},
	{"verify.min-sqnr", PARAM_TEXT, NULL, NULL, 1, "gate: smallest SQNR of every output, in dB, or off"},
	{"verify.min-cosine", PARAM_TEXT, NULL, NULL, 1, "gate: smallest cosine similarity of every output, or off"},
	{"verify.max-abs", PARAM_TEXT, NULL, NULL, 1, "gate: largest absolute error of every output, or off"},
	{"verify.auto-exclude", PARAM_INT, NULL, "0", 1,
	 "when the gates fail: re-quantize leaving up to N nodes in float, the worst first"},
	{NULL, 0, NULL, NULL, 0, NULL},
};

static int wanted(const Section *sec)
{
	for (size_t i = 0; i < sec->nkv; i++)
		if (!strncmp(sec->kv[i].key, "verify.", 7))
			return 1;
	return 0;
}

static int is_random(const char *v)
{
	return v && !strcmp(v, "random");
}

/* verify.labels names a file (not a tensor) when it has a path or a data
 * file's extension */
static int labels_is_file(const char *v)
{
	size_t n = strlen(v);
	return strchr(v, '/') || (n > 4 && (!strcmp(v + n - 4, ".npy") || !strcmp(v + n - 4, ".npz"))) ||
	       (n > 3 && !strcmp(v + n - 3, ".pb"));
}

static const char *const gate_keys[] = {"verify.max-top1-drop", "verify.min-sqnr", "verify.min-cosine",
					 "verify.max-abs", NULL};

static int check_param(const char *key, const char *value)
{
	char *end;
	long n = strtol(value, NULL, 10);
	if (!strcmp(key, "verify.auto-exclude") && (n < 0 || n > MAX_AUTO_EXCLUDE))
		return error("verify.auto-exclude = '%s' is not valid: expected the most nodes to leave in float (0 to %d)",
			     value, MAX_AUTO_EXCLUDE);
	for (size_t i = 0; gate_keys[i]; i++) {
		if (strcmp(key, gate_keys[i]) || !strcmp(value, "off"))
			continue;
		double v = strtod(value, &end);
		if (!*value || *end || isnan(v))
			return error("%s = '%s' is not valid: expected a number, or off", key, value);
	}
	return 0;
}

/* auto-exclusion re-quantizes: static or dynamic only (fp16 has no
 * quantized nodes to rank) */
static int check_auto_exclude(const Section *sec)
{
	const KV *kv = sec_find(sec, "verify.auto-exclude");
	const char *mode = sec_get(sec, "quantize");
	if (!kv || atoi(kv->value) <= 0 || (mode && strcmp(mode, "fp16")))
		return 0;
	return error("%s:%d: model '%s': verify.auto-exclude needs quantize = static or dynamic (it re-quantizes "
		     "with the worst nodes left in float), not %s%s",
		     kv->file, kv->line, sec->name, mode ? "quantize = " : "a model without quantize", mode ? mode : "");
}

static int declared_inputs(const Section *sec, const char *root, PtrVec *files)
{
	const char *v = sec_get(sec, "verify.data");
	if (!v)
		return error("%s:%d: model '%s': verify needs verify.data = FILES (samples to compare on, or random)",
			     sec->file, sec->line, sec->name);
	if (check_auto_exclude(sec) < 0)
		return -1;
	const KV *kv = sec_find(sec, "verify.data");
	const char *lv = sec_get(sec, "verify.labels");
	if (is_random(v)) {
		if (lv)
			return error("%s:%d: model '%s': verify.labels needs real samples, not verify.data = random",
				     kv->file, kv->line, sec->name);
		return 0;
	}
	int r = stage_expand_samples(sec, "verify.data", root, "", files);
	if (r == 0 && lv && labels_is_file(lv)) {
		const KV *lk = sec_find(sec, "verify.labels");
		char *full = path_join(root, lv);
		struct stat st;
		if (path_outside(lv))
			r = error("%s:%d: model '%s': verify.labels '%s' leaves the project", lk->file, lk->line,
				  sec->name, lv);
		else if (stat(full, &st) != 0 || !S_ISREG(st.st_mode))
			r = error("%s:%d: model '%s': verify.labels file '%s' does not exist", lk->file, lk->line,
				  sec->name, lv);
		else
			pv_push(files, xstrdup(lv));
		free(full);
	}
	return r;
}

/* the gates: the keys set (a number, or off: no gate), else the defaults */
static void read_gates(const Section *sec, int labels, VerifyGates *g)
{
	double *slot[] = {&g->max_top1_drop, &g->min_sqnr, &g->min_cosine, &g->max_abs};
	int nset = 0;
	memset(g, 0, sizeof *g);
	for (size_t i = 0; gate_keys[i]; i++) {
		const char *v = sec_get(sec, gate_keys[i]);
		*slot[i] = v && strcmp(v, "off") ? strtod(v, NULL) : NAN;
		nset += v != NULL;
	}
	if (nset)
		return;
	g->defaults = 1;
	g->min_sqnr = DEFAULT_MIN_SQNR;
	if (labels)
		g->max_top1_drop = DEFAULT_MAX_TOP1_DROP;
}

/* verify.data and verify.labels into o (paths made absolute in specs and
 * *labels_path, which the caller frees) */
static void read_data(StageCtx *c, const char *data, const char *lv, VerifyOpts *o, PtrVec *specs,
		      char **labels_path)
{
	*o = (VerifyOpts){.threads = c->threads, .random = is_random(data), .nrandom = RANDOM_SAMPLES,
			  .seed = RANDOM_SEED};
	if (!o->random) {
		split_words(data, specs);
		for (size_t i = 0; i < specs->n; i++) {
			char *full = path_join(c->root, specs->v[i]);
			free(specs->v[i]);
			specs->v[i] = full;
		}
		o->specs = (const char *const *)specs->v;
		o->nspecs = specs->n;
	}
	if (lv && labels_is_file(lv))
		o->labels_file = *labels_path = path_join(c->root, lv);
	else
		o->labels_name = lv;
}

/* what auto-exclusion re-quantizes with: the quantize stage's options and
 * statistics, and the report of the last rewrite */
typedef struct Requant {
	QuantOpts o;
	CalibStats *stats;
	QuantReport rep;
	int done;                  /* the output is a re-quantized model */
	long long ref_size;        /* the float model's size on disk */
} Requant;

static int requant_open(StageCtx *c, Requant *rq)
{
	if (quant_opts_read(c->sec, c->model, &rq->o) < 0)
		return -1;
	if (rq->o.mode == QMODE_FP16)
		return error("model '%s': verify.auto-exclude needs quantize = static or dynamic, not fp16", c->model);
	if (rq->o.mode != QMODE_STATIC)
		return 0;
	char *dir = path_dir(c->reference), *p = path_join(dir, "calibration.stats");
	int r = calib_load(p, &rq->stats);
	if (r < 0)
		error_prefix("verify.auto-exclude re-quantizes with the calibrate stage's statistics");
	free(dir);
	free(p);
	return r;
}

static void requant_close(Requant *rq)
{
	quant_report_free(&rq->rep);
	calib_free(rq->stats);
	quant_opts_free(&rq->o);
}

/* a fresh copy of the float model quantized with rq's options (and its
 * report, which the caller frees) */
static int requant(StageCtx *c, Requant *rq, Model **out, QuantReport *qrep)
{
	Model *m = NULL;
	memset(qrep, 0, sizeof *qrep);
	int r = model_load(c->reference, &m);
	if (r < 0)
		error_prefix("reference model");
	else
		rq->ref_size = model_disk_size(m, c->reference);
	if (r == 0 && (r = quant_model(m, rq->stats, &rq->o, qrep)) < 0)
		error_prefix("verify.auto-exclude: quantizing again");
	if (r < 0) {
		quant_report_free(qrep);
		model_free(m);
		return -1;
	}
	*out = m;
	return 0;
}

/* the first candidate not left in float yet, or NULL */
static const char *next_candidate(const PtrVec *cand, const PtrVec *excluded)
{
	for (size_t i = 0; i < cand->n; i++) {
		size_t k = 0;
		while (k < excluded->n && strcmp(excluded->v[k], cand->v[i]))
			k++;
		if (k == excluded->n)
			return cand->v[i];
	}
	return NULL;
}

/* whether round a measures better than round b: fewer failed gates, else
 * a higher lowest output SQNR */
static int better(const VerifyRound *a, const VerifyRound *b)
{
	if (a->nfailed != b->nfailed)
		return a->nfailed < b->nfailed;
	return a->min_sqnr > b->min_sqnr;
}

/* One round: leave node in float, quantize again, measure; *q and *rep
 * become the new model's, or, when it measures no better than the last
 * kept round, the node goes back to quantized (*reverted set). Failed
 * gates, 0 when the rewrite refuses (the node was the last one quantized:
 * *stop is set, nothing changes), or -1. */
static int round_run(StageCtx *c, Model *ref, const VerifyOpts *vo, const VerifyGates *g, Requant *rq,
		     VerifyAuto *ax, const char *node, Model **q, VerifyReport *rep, int *stop, int *reverted)
{
	Model *m = NULL;
	VerifyReport nr;
	QuantReport qrep;
	*reverted = 0;
	pv_push(&rq->o.exclude_nodes, xstrdup(node));
	if (requant(c, rq, &m, &qrep) < 0) {
		/* the same options quantized the model before: the exclusion
		 * left nothing to quantize */
		fprintf(c->log, "verify: %s: auto-exclude: stopping before %s: %s\n", c->model, node, errmsg());
		free(rq->o.exclude_nodes.v[--rq->o.exclude_nodes.n]);
		*stop = 1;
		return 0;
	}
	if (verify_models(ref, m, vo, &nr) < 0) {
		quant_report_free(&qrep);
		model_free(m);
		return error_prefix("verify.auto-exclude: measuring with %s left in float", node);
	}
	size_t last = ax->nrounds - 1;
	while (last > 0 && ax->rounds[last].reverted)
		last--;
	verify_round_add(ax, &nr, g, node);
	VerifyRound *r = &ax->rounds[ax->nrounds - 1];
	if (!better(r, &ax->rounds[last])) {
		r->reverted = 1;
		free(rq->o.exclude_nodes.v[--rq->o.exclude_nodes.n]);
		quant_report_free(&qrep);
		model_free(m);
		verify_report_free(&nr);
		*reverted = 1;
		verify_round_line(ax, ax->nrounds - 1, c->model, c->log);
		return ax->rounds[last].nfailed;
	}
	pv_push(&ax->excluded, xstrdup(node));
	quant_report_free(&rq->rep);
	rq->rep = qrep;
	model_free(*q);
	*q = m;
	verify_report_free(rep);
	*rep = nr;
	rq->done = 1;
	verify_round_line(ax, ax->nrounds - 1, c->model, c->log);
	return r->nfailed;
}

/* Leave the worst-ranked candidate in float, one per round, until the
 * gates pass or ax->max_nodes are left in float (see the top). nfailed: the
 * failed gates of the plain quantization. Returns the final failed gates,
 * or -1. */
static int auto_exclude(StageCtx *c, Model *ref, const VerifyOpts *vo, const VerifyGates *g, Requant *rq,
			VerifyAuto *ax, Model **q, VerifyReport *rep, int nfailed)
{
	for (size_t i = 0; i < rq->o.exclude_nodes.n; i++)
		pv_push(&ax->excluded, xstrdup(rq->o.exclude_nodes.v[i]));
	ax->nuser = ax->excluded.n;
	verify_round_add(ax, rep, g, NULL);
	verify_round_line(ax, 0, c->model, c->log);
	PtrVec tried = {0};        /* kept and undone nodes */
	for (size_t i = 0; i < ax->excluded.n; i++)
		pv_push(&tried, xstrdup(ax->excluded.v[i]));
	int stop = 0, undone = 0;
	while (nfailed > 0 && !stop && ax->excluded.n - ax->nuser < (size_t)ax->max_nodes) {
		PtrVec cand = {0};
		verify_candidates(rep, &cand);
		const char *node = next_candidate(&cand, &tried);
		if (!node) {
			fprintf(c->log, "verify: %s: auto-exclude: no further quantized node to leave in float\n", c->model);
			stop = 1;
		} else {
			int reverted = 0;
			pv_push(&tried, xstrdup(node));
			int n = round_run(c, ref, vo, g, rq, ax, node, q, rep, &stop, &reverted);
			if (n < 0) {
				pv_free_all(&cand);
				pv_free_all(&tried);
				return -1;
			}
			nfailed = stop ? nfailed : n;
			if (reverted && ++undone >= 2 * ax->max_nodes) {
				fprintf(c->log, "verify: %s: auto-exclude: %d nodes tried in float made nothing better: stopping\n",
					c->model, undone);
				stop = 1;
			}
		}
		pv_free_all(&cand);
	}
	pv_free_all(&tried);
	return nfailed;
}

/* the exclude-nodes line of what auto-exclusion found */
static char *exclude_line(const VerifyAuto *ax)
{
	StrBuf sb = {0};
	sb_puts(&sb, "quantize.exclude-nodes =");
	for (size_t i = 0; i < ax->excluded.n; i++)
		sb_printf(&sb, " %s", (const char *)ax->excluded.v[i]);
	return sb_detach(&sb);
}

/* the failure after auto-exclusion: the gate lines and what was tried */
static int auto_failed(StageCtx *c, const VerifyAuto *ax, const VerifyReport *rep, const VerifyGates *g,
		       int nfailed)
{
	verify_gates(rep, g, c->model, c->log);
	StrBuf sb = {0};
	for (size_t i = ax->nuser; i < ax->excluded.n; i++)
		sb_printf(&sb, "%s%s", i > ax->nuser ? " " : "", (const char *)ax->excluded.v[i]);
	size_t n = ax->excluded.n - ax->nuser;
	error("model '%s': %d verify gate%s failed with %zu node%s left in float by verify.auto-exclude = %d (%s)",
	      c->model, nfailed, nfailed > 1 ? "s" : "", n, n == 1 ? "" : "s", ax->max_nodes, n ? sb.buf : "none found");
	sb_release(&sb);
	return -1;
}

static int write_json(StageCtx *c, const VerifyReport *rep, const VerifyGates *g, const VerifyAuto *ax,
		      const char *data)
{
	char *inputs = is_random(data) ? xasprintf("random: standard normal, seed %d, %d samples", RANDOM_SEED,
						   RANDOM_SAMPLES)
				       : xstrdup(data);
	StrBuf sb = {0};
	verify_json(rep, g, ax->max_nodes ? ax : NULL, c->model, inputs, &sb);
	char *p = path_join(c->outdir, "verify.json");
	int r = write_file_atomic(p, sb.buf, sb.len);
	free(p);
	sb_release(&sb);
	free(inputs);
	return r;
}

/* the output model and its quant.json: the quantize stage's, or that of
 * the re-quantized model */
static int write_model(StageCtx *c, Model *q, const Requant *rq)
{
	char *qj = path_join(c->outdir, "quant.json");
	int r = model_save(q, c->output, NULL);
	if (r == 0 && rq->done) {
		StrBuf sb = {0};
		quant_json(&sb, c->model, &rq->o, rq->stats, &rq->rep, rq->ref_size, outdir_model_size(c->outdir));
		r = write_file_atomic(qj, sb.buf, sb.len);
		sb_release(&sb);
	} else if (r == 0) {
		char *dir = path_dir(c->input), *src = path_join(dir, "quant.json"), *buf = NULL;
		size_t len;
		if (access(src, F_OK) == 0 && (r = read_file(src, &buf, &len)) == 0)
			r = write_file_atomic(qj, buf, len);
		free(buf);
		free(src);
		free(dir);
	}
	free(qj);
	return r;
}

/* compare, gate, auto-exclude; the failed gates at the end, or -1 */
static int measure(StageCtx *c, Model *ref, Model **q, const VerifyOpts *o, const VerifyGates *g, Requant *rq,
		   VerifyAuto *ax, VerifyReport *rep)
{
	double t0 = now_sec();
	if (verify_models(ref, *q, o, rep) < 0)
		return error_prefix("verify.data");
	verify_summary(rep, c->model, c->log);
	verify_gates_line(g, c->log);
	int nfailed = verify_gates(rep, g, c->model, c->log);
	if (nfailed > 0 && ax->max_nodes > 0) {
		if (requant_open(c, rq) < 0)
			return -1;
		nfailed = auto_exclude(c, ref, o, g, rq, ax, q, rep, nfailed);
		if (nfailed >= 0 && rq->done) {
			fprintf(c->log, "verify: %s: after auto-exclusion:\n", c->model);
			verify_summary(rep, c->model, c->log);
		}
	}
	fprintf(c->log, "verify: %s: %.2f s\n", c->model, now_sec() - t0);
	return nfailed;
}

static int run(StageCtx *c)
{
	const char *data = sec_get(c->sec, "verify.data");
	if (!data)
		return error("model '%s': verify needs verify.data = FILES (samples to compare on, or random)", c->model);
	if (!c->reference)
		return error("model '%s': verify has no reference model (the float model quantize started from)",
			     c->model);
	const char *lv = sec_get(c->sec, "verify.labels");
	VerifyGates g;
	read_gates(c->sec, lv != NULL, &g);
	if (!isnan(g.max_top1_drop) && !lv)
		return error("model '%s': verify.max-top1-drop needs verify.labels (the class of every row)", c->model);
	PtrVec specs = {0};
	VerifyOpts o;
	char *labels_path = NULL;
	read_data(c, data, lv, &o, &specs, &labels_path);
	Model *ref = NULL, *q = NULL;
	VerifyReport rep = {0};
	VerifyAuto ax = {.max_nodes = atoi(stage_param_value(c->sec, "verify.auto-exclude"))};
	Requant rq = {0};
	int r = model_load(c->reference, &ref), nfailed = -1;
	if (r < 0)
		error_prefix("reference model");
	if (r == 0 && (r = model_load(c->input, &q)) < 0)
		error_prefix("quantized model");
	if (r == 0 && (nfailed = measure(c, ref, &q, &o, &g, &rq, &ax, &rep)) < 0)
		r = -1;
	/* the report, passed or not (a failed action's directory is kept) */
	if (r == 0)
		r = write_json(c, &rep, &g, &ax, data);
	if (r == 0 && nfailed > 0 && ax.max_nodes > 0)
		r = auto_failed(c, &ax, &rep, &g, nfailed);
	else if (r == 0 && nfailed > 0)
		r = error("model '%s': %d verify gate%s failed", c->model, nfailed, nfailed > 1 ? "s" : "");
	if (r == 0)
		r = write_model(c, q, &rq);
	if (r == 0 && rq.done) {
		char *line = exclude_line(&ax);
		fprintf(c->log, "verify: %s: the gates pass with %zu node%s left in float; to make this permanent, "
				"put in the rules of model '%s': %s\n",
			c->model, ax.excluded.n - ax.nuser, ax.excluded.n - ax.nuser == 1 ? "" : "s", c->model, line);
		free(line);
	}
	requant_close(&rq);
	verify_auto_free(&ax);
	verify_report_free(&rep);
	model_free(q);
	model_free(ref);
	free(labels_path);
	pv_free_all(&specs);
	return r;
}

const Stage stage_verify = {
	.name = "verify",
	.version = 5,
	.params = params,
	.wanted = wanted,
	.declared_inputs = declared_inputs,
	.run = run,
	.reference_of = "quantize",
	.check_param = check_param,
};
