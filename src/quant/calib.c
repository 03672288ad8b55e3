/* calib.c — calibration statistics (see calib.h). */
#include "quant/calib.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "exec/dataio.h"
#include "exec/interp.h"
#include "onnx/tensor.h"
#include "util.h"

typedef struct Collector {
	CalibStats *s;
} Collector;

static int cmp_stats(const void *a, const void *b)
{
	return strcmp(((const TensorStats *)a)->name, ((const TensorStats *)b)->name);
}

const TensorStats *calib_find(const CalibStats *s, const char *name)
{
	TensorStats key = {.name = (char *)name};
	return bsearch(&key, s->t, s->n, sizeof *s->t, cmp_stats);
}

/* double t's histogram range until it covers magnitude m, merging bins */
static void widen(TensorStats *t, uint32_t nb, double m)
{
	while (m > t->range) {
		uint64_t *h = t->hist;
		uint64_t *n = xcalloc(nb, sizeof *n);
		/* old bin i covers [-r + i w, ...) = new bin nb/4 + i/2 of width 2w */
		for (uint32_t i = 0; i < nb; i++)
			n[nb / 4 + i / 2] += h[i];
		free(h);
		t->hist = n;
		t->range *= 2;
	}
}

static void tap(void *ud, const char *name, const Tensor *t)
{
	Collector *c = ud;
	if (t->dtype != DT_FLOAT || !t->numel)
		return;
	TensorStats *ts = (TensorStats *)calib_find(c->s, name);
	if (!ts)
		return;
	const float *x = t->data;
	uint32_t nb = c->s->nbins;
	float lo = INFINITY, hi = -INFINITY;
	uint64_t bad = 0;
	for (int64_t i = 0; i < t->numel; i++) {
		float v = x[i];
		if (!isfinite(v)) {
			bad++;
			continue;
		}
		lo = v < lo ? v : lo;
		hi = v > hi ? v : hi;
	}
	uint64_t good = (uint64_t)t->numel - bad;
	ts->nonfinite += bad;
	if (!good)
		return;
	if (!ts->hist)
		ts->hist = xcalloc(nb, sizeof *ts->hist);
	ts->min = ts->count && ts->min < lo ? ts->min : lo;
	ts->max = ts->count && ts->max > hi ? ts->max : hi;
	ts->count += good;
	double m = fmax(fabs(lo), fabs(hi));
	if (ts->range == 0 && m > 0)
		ts->range = m;
	else
		widen(ts, nb, m);
	if (ts->range == 0) {
		ts->hist[nb / 2] += good;
		return;
	}
	double a = ts->range, k = nb / (2 * a);
	for (int64_t i = 0; i < t->numel; i++) {
		if (!isfinite(x[i]))
			continue;
		int64_t b = (int64_t)((x[i] + a) * k);
		b = b < 0 ? 0 : b >= nb ? nb - 1 : b;
		ts->hist[b]++;
	}
}

/* "[batch,64]" from a graph input's declared shape */
static void input_shape_str(const Onnx__ValueInfoProto *vi, StrBuf *sb)
{
	const Onnx__TypeProto__Tensor *tt = vi->type ? vi->type->tensor_type : NULL;
	if (!tt || !tt->shape) {
		sb_puts(sb, "[any shape]");
		return;
	}
	sb_putc(sb, '[');
	for (size_t k = 0; k < tt->shape->n_dim; k++) {
		const Onnx__TensorShapeProto__Dimension *d = tt->shape->dim[k];
		if (k)
			sb_putc(sb, ',');
		if (d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE)
			sb_printf(sb, "%lld", (long long)d->dim_value);
		else if (d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM && d->dim_param)
			sb_puts(sb, d->dim_param);
		else
			sb_putc(sb, '?');
	}
	sb_putc(sb, ']');
}

static const Onnx__ValueInfoProto *graph_input(const Model *m, const char *name)
{
	const Onnx__GraphProto *g = m->proto->graph;
	for (size_t i = 0; i < g->n_input; i++)
		if (g->input[i]->name && !strcmp(g->input[i]->name, name))
			return g->input[i];
	return NULL;
}

/* Match sample tensors to the model's inputs the way interp_run_sample
 * does, checking element type and shape. */
static int check_sample(Model *m, Interp *ip, uint64_t idx, const TensorList *tl)
{
	size_t nin = interp_ninputs(ip), next_unnamed = 0;
	for (size_t i = 0; i < nin; i++) {
		const char *name = interp_input_name(ip, i);
		int dtype, rank;
		int64_t dims[QM_MAX_RANK];
		interp_input_type(ip, i, &dtype, &rank, dims);
		const Tensor *t = NULL;
		for (size_t k = 0; k < tl->n && !t; k++)
			if (tl->t[k].name && !strcmp(tl->t[k].name, name))
				t = &tl->t[k];
		while (!t && next_unnamed < tl->n) {
			const Tensor *u = &tl->t[next_unnamed++];
			if (!u->name)
				t = u;
		}
		StrBuf want = {0};
		sb_printf(&want, "%s ", dtype_name(dtype));
		const Onnx__ValueInfoProto *vi = graph_input(m, name);
		if (vi)
			input_shape_str(vi, &want);
		int bad = 0;
		char got[256];
		if (!t) {
			StrBuf have = {0};
			for (size_t k = 0; k < tl->n; k++)
				sb_printf(&have, "%s'%s'", k ? ", " : "", tl->t[k].name ? tl->t[k].name : "(unnamed)");
			error("calibration sample %llu: no tensor for model input '%s' (expected %s); the sample has %s",
			      (unsigned long long)idx + 1, name, want.buf, have.len ? have.buf : "no tensors");
			sb_release(&have);
			sb_release(&want);
			return -1;
		}
		if (t->dtype != dtype)
			bad = 1;
		if (rank >= 0 && t->rank != rank)
			bad = 1;
		for (int k = 0; !bad && rank >= 0 && k < rank; k++)
			if (dims[k] >= 0 && dims[k] != t->dims[k])
				bad = 1;
		if (bad) {
			shape_str(t->rank, t->dims, got, sizeof got);
			error("calibration sample %llu: input '%s' is %s %s, expected %s", (unsigned long long)idx + 1,
			      name, dtype_name(t->dtype), got, want.buf);
		}
		sb_release(&want);
		if (bad)
			return -1;
	}
	return 0;
}

static int run_pass(Model *m, Interp *ip, SampleIter *it, Collector *col)
{
	TensorList tl = {0};
	uint64_t idx = 0;
	int r;
	while ((r = samples_next(it, &tl)) == 1) {
		if (check_sample(m, ip, idx, &tl) < 0) {
			tl_free(&tl);
			return -1;
		}
		r = interp_run_sample(ip, tl.n, tl.t, 0, NULL);
		tl_free(&tl);
		if (r < 0)
			return error_prefix("calibration sample %llu", (unsigned long long)idx + 1);
		idx++;
	}
	if (r < 0)
		return -1;
	col->s->nsamples = idx;
	return 0;
}

int calib_collect(Model *m, const char *const *specs, size_t nspecs, int threads, FILE *log,
		  CalibStats **out)
{
	CalibStats *s = xcalloc(1, sizeof *s);
	s->nbins = CALIB_BINS;
	const Onnx__GraphProto *g = m->proto->graph;
	PtrVec names = {0};
	for (size_t i = 0; i < g->n_input; i++)
		pv_push(&names, g->input[i]->name);
	for (size_t i = 0; i < g->n_node; i++)
		for (size_t k = 0; k < g->node[i]->n_output; k++)
			if (g->node[i]->output[k] && *g->node[i]->output[k])
				pv_push(&names, g->node[i]->output[k]);
	s->t = xcalloc(names.n ? names.n : 1, sizeof *s->t);
	for (size_t i = 0; i < names.n; i++)
		s->t[i].name = xstrdup(names.v[i]);
	size_t nnames = names.n;
	pv_free(&names);
	s->n = 0;
	qsort(s->t, nnames, sizeof *s->t, cmp_stats);
	for (size_t i = 0; i < nnames; i++) {
		if (s->n && !strcmp(s->t[s->n - 1].name, s->t[i].name)) {
			free(s->t[i].name);
			continue;
		}
		s->t[s->n++] = s->t[i];
	}
	Collector col = {.s = s};
	InterpOpts o = {.threads = threads, .tap = tap, .tap_ud = &col};
	SampleIter *it = NULL;
	Interp *ip = interp_new(m, &o);
	int r = ip ? 0 : -1;
	if (r == 0)
		r = samples_open(specs, nspecs, &it);
	if (r == 0 && samples_count(it) == 0)
		r = error("the calibration set is empty: quantize.calibration matches no sample");
	double t0 = now_sec();
	if (r == 0)
		r = run_pass(m, ip, it, &col);
	if (r == 0 && log)
		fprintf(log, "calibrate: %llu samples, %zu tensors, %.2f s\n", (unsigned long long)s->nsamples,
			s->n, now_sec() - t0);
	if (it)
		samples_close(it);
	if (ip)
		interp_free(ip);
	if (r < 0) {
		calib_free(s);
		return -1;
	}
	/* keep only the float tensors that were seen */
	size_t k = 0;
	for (size_t i = 0; i < s->n; i++) {
		if (s->t[i].count || s->t[i].nonfinite) {
			if (!s->t[i].hist)
				s->t[i].hist = xcalloc(s->nbins, sizeof *s->t[i].hist);
			s->t[k++] = s->t[i];
		}
		else {
			free(s->t[i].name);
			free(s->t[i].hist);
		}
	}
	s->n = k;
	*out = s;
	return 0;
}

void calib_free(CalibStats *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < s->n; i++) {
		free(s->t[i].name);
		free(s->t[i].hist);
	}
	free(s->t);
	free(s);
}

static void put_u32(StrBuf *sb, uint32_t v)
{
	unsigned char b[4] = {v, v >> 8, v >> 16, v >> 24};
	sb_add(sb, b, 4);
}

static void put_u64(StrBuf *sb, uint64_t v)
{
	put_u32(sb, (uint32_t)v);
	put_u32(sb, (uint32_t)(v >> 32));
}

static void put_f32(StrBuf *sb, float f)
{
	uint32_t v;
	memcpy(&v, &f, 4);
	put_u32(sb, v);
}

int calib_save(const CalibStats *s, const char *path)
{
	StrBuf sb = {0};
	sb_add(&sb, "QMCALIB2", 8);
	put_u32(&sb, (uint32_t)s->n);
	put_u32(&sb, s->nbins);
	put_u64(&sb, s->nsamples);
	for (size_t i = 0; i < s->n; i++) {
		const TensorStats *t = &s->t[i];
		put_u32(&sb, (uint32_t)strlen(t->name));
		sb_puts(&sb, t->name);
		put_u64(&sb, t->count);
		put_u64(&sb, t->nonfinite);
		put_f32(&sb, t->min);
		put_f32(&sb, t->max);
		uint64_t rb;
		memcpy(&rb, &t->range, 8);
		put_u64(&sb, rb);
		for (uint32_t k = 0; k < s->nbins; k++)
			put_u64(&sb, t->hist[k]);
	}
	int r = write_file_atomic(path, sb.buf, sb.len);
	sb_release(&sb);
	return r;
}

typedef struct Reader {
	const unsigned char *p;
	size_t len, off;
	int bad;
} Reader;

static uint32_t get_u32(Reader *r)
{
	if (r->len - r->off < 4) {
		r->bad = 1;
		return 0;
	}
	const unsigned char *b = r->p + r->off;
	r->off += 4;
	return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
}

static uint64_t get_u64(Reader *r)
{
	uint64_t lo = get_u32(r);
	return lo | (uint64_t)get_u32(r) << 32;
}

static float get_f32(Reader *r)
{
	uint32_t v = get_u32(r);
	float f;
	memcpy(&f, &v, 4);
	return f;
}

int calib_load(const char *path, CalibStats **out)
{
	char *data;
	size_t len;
	if (read_file(path, &data, &len) < 0)
		return -1;
	Reader rd = {(const unsigned char *)data, len, 8, 0};
	if (len < 8 || memcmp(data, "QMCALIB2", 8)) {
		free(data);
		return error("%s: not a quantmake calibration statistics file (version 2)", path);
	}
	CalibStats *s = xcalloc(1, sizeof *s);
	uint32_t n = get_u32(&rd);
	s->nbins = get_u32(&rd);
	s->nsamples = get_u64(&rd);
	if (rd.bad || s->nbins == 0 || s->nbins > (1u << 20) || n > len / 8) {
		free(data);
		free(s);
		return error("%s: corrupt calibration statistics header", path);
	}
	s->t = xcalloc(n ? n : 1, sizeof *s->t);
	for (uint32_t i = 0; i < n && !rd.bad; i++) {
		uint32_t nl = get_u32(&rd);
		if (rd.bad || nl > len - rd.off) {
			rd.bad = 1;
			break;
		}
		TensorStats *t = &s->t[s->n++];
		t->name = xstrndup((const char *)rd.p + rd.off, nl);
		rd.off += nl;
		t->count = get_u64(&rd);
		t->nonfinite = get_u64(&rd);
		t->min = get_f32(&rd);
		t->max = get_f32(&rd);
		uint64_t rb = get_u64(&rd);
		memcpy(&t->range, &rb, 8);
		if ((uint64_t)(len - rd.off) < (uint64_t)s->nbins * 8) {
			rd.bad = 1;
			break;
		}
		t->hist = xmalloc((size_t)s->nbins * sizeof *t->hist);
		for (uint32_t k = 0; k < s->nbins; k++)
			t->hist[k] = get_u64(&rd);
	}
	free(data);
	if (rd.bad || rd.off != len) {
		calib_free(s);
		return error("%s: corrupt calibration statistics (truncated or trailing bytes)", path);
	}
	*out = s;
	return 0;
}

/* value at the lower edge of histogram bin b over [-a, a] */
static float bin_edge(double a, uint32_t nbins, uint32_t b)
{
	return (float)(-a + 2 * a * b / nbins);
}

/* ORT's smooth_distribution: move eps mass onto the zero bins; 0 when all
 * bins are zero */
static int smooth(double *p, size_t n)
{
	const double eps = 0.0001;
	size_t nz = 0;
	for (size_t i = 0; i < n; i++)
		nz += p[i] == 0;
	if (nz == n)
		return 0;
	double eps1 = eps * (double)nz / (double)(n - nz);
	for (size_t i = 0; i < n; i++)
		p[i] += p[i] == 0 ? eps : -eps1;
	return 1;
}

static double kl(const double *p, const double *q, size_t n)
{
	double sp = 0, sq = 0, d = 0;
	for (size_t i = 0; i < n; i++) {
		sp += p[i];
		sq += q[i];
	}
	for (size_t i = 0; i < n; i++) {
		double pi = p[i] / sp, qi = q[i] / sq;
		if (pi > 0)
			d += pi * log(pi / qi);
	}
	return d;
}

static void entropy_range(const CalibStats *s, const TensorStats *t, float *lo, float *hi)
{
	const size_t nb = s->nbins, nq = 128, zero = nb / 2;
	double a = t->range;
	double *p = xmalloc(nb * sizeof *p), *q = xmalloc(nb * sizeof *q);
	double best = INFINITY;
	size_t besti = zero;
	for (size_t i = nq / 2; i <= zero; i++) {
		size_t start = zero - i, end = zero + i + 1 < nb ? zero + i + 1 : nb, len = end - start;
		uint64_t left = 0, right = 0;
		for (size_t k = 0; k < start; k++)
			left += t->hist[k];
		for (size_t k = end; k < nb; k++)
			right += t->hist[k];
		for (size_t k = 0; k < len; k++)
			p[k] = (double)t->hist[start + k];
		p[0] += (double)left;
		p[len - 1] += (double)right;
		size_t merged = len / nq;
		for (size_t k = 0; k < len; k++)
			q[k] = 0;
		for (size_t b = 0; b < nq; b++) {
			size_t s0 = b * merged, e0 = b == nq - 1 ? len : s0 + merged;
			double sum = 0, nonzero = 0;
			for (size_t k = s0; k < e0; k++) {
				sum += (double)t->hist[start + k];
				nonzero += t->hist[start + k] != 0;
			}
			for (size_t k = s0; k < e0; k++)
				q[k] = nonzero && t->hist[start + k] ? sum / nonzero : 0;
		}
		double d = smooth(p, len) && smooth(q, len) ? kl(p, q, len) : INFINITY;
		if (d < best) {
			best = d;
			besti = i;
		}
	}
	free(p);
	free(q);
	size_t end = zero + besti + 1 < nb ? zero + besti + 1 : nb;
	*lo = bin_edge(a, (uint32_t)nb, (uint32_t)(zero - besti));
	*hi = end == nb ? (float)a : bin_edge(a, (uint32_t)nb, (uint32_t)end);
}

void calib_range(const CalibStats *s, const TensorStats *t, int method, double percentile,
		 float *lo, float *hi)
{
	*lo = t->min;
	*hi = t->max;
	if (method == CALIB_MINMAX || !t->count || !(t->range > 0))
		return;
	if (method == CALIB_ENTROPY) {
		entropy_range(s, t, lo, hi);
	} else {
		double a = t->range;
		double cut = (100.0 - percentile) / 200.0 * (double)t->count;
		uint64_t acc = 0;
		uint32_t l = 0, h = s->nbins - 1;
		for (uint32_t b = 0; b < s->nbins; b++) {
			acc += t->hist[b];
			if ((double)acc > cut) {
				l = b;
				break;
			}
		}
		acc = 0;
		for (uint32_t b = s->nbins; b-- > 0;) {
			acc += t->hist[b];
			if ((double)acc > cut) {
				h = b;
				break;
			}
		}
		*lo = bin_edge(a, s->nbins, l);
		*hi = h + 1 >= s->nbins ? (float)a : bin_edge(a, s->nbins, h + 1);
	}
	/* never widen beyond what was seen */
	*lo = *lo < t->min ? t->min : *lo;
	*hi = *hi > t->max ? t->max : *hi;
}
