/* calib.c — calibration statistics (see calib.h).
 *
 * Most of the time of a calibration goes into the taps (every element of
 * every float activation of every sample) and the interpreter. A tap scans
 * a tensor once for min, max, zeros and non-finite values, then bins it a
 * chunk at a time: bin indices computed with vector instructions
 * (target_clones), zeros and non-finite values sent in turn to spare bins
 * past the end (no branch), then counted. Zeros (half of a Relu's output)
 * are added at once, as counting them one by one would serialize on one
 * counter; so would runs of another value (Expand's outputs), hence large
 * tensors are counted into four interleaved sub-histograms, of which only
 * the bins between those of the min and max are added up. The outputs of
 * operators that only move elements (Reshape, Transpose, Squeeze...) hold
 * their input's values: their statistics are copied at the end. Tensors
 * computed from constants only hold the same values in every run: their
 * statistics are taken once and multiplied at the end. Without histograms
 * (the minmax method) a tap is the scan alone, and a Relu's output is not
 * read at all when its input's scan in the same run found only finite
 * values: its min and max are the input's raised to 0 (relu_scan; Relu
 * outputs were 44% of the elements fashion-cnn's taps scanned).
 *
 * Samples are stacked into batches when a probe shows the model treats
 * them as one. Each input is stacked along its batch axis, its first
 * symbolic dimension (silero-vad's state [2,?,128] on axis 1); an input
 * without one (silero-vad's sample rate, a scalar; a fixed shape) is
 * shared: fed once, and only samples with the same bytes for it share a
 * batch. The probe holds the first batch of samples: the first REFS run
 * alone (the reference), then the whole batch runs stacked, its
 * statistics apart; every float activation must grow by the number of
 * samples stacked (the batch may move to another axis, as in attention
 * heads, but nothing may be summed or broadcast over it; tensors that are
 * the same every run, and shared float inputs, count once per sample
 * instead), and each output must hold the reference's outputs
 * concatenated along one of its axes (within 1e-4 of their largest
 * magnitude; a BLAS may sum in another order for another batch size).
 * Then the batch's statistics count; else the reference's do and the rest
 * of the batch runs alone, as every sample after it. Afterwards the
 * samples go in units of a batch's worth of consecutive numbers (see
 * "units of work" below): in each, those of the probed shapes and shared
 * inputs run stacked and the others alone, so a sample of another shape
 * makes its unit's batch one smaller, on any number of threads. The batch
 * size is bounded by the activation memory of one sample, so peak memory
 * does not grow with the calibration set (a unit's samples are held, one
 * unit per thread). */
#include "quant/calib.h"

#include <float.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "exec/dataio.h"
#include "exec/interp.h"
#include "onnx/tensor.h"
#include "strmap.h"
#include "util.h"

#pragma GCC optimize("no-trapping-math", "no-math-errno", "vect-cost-model=dynamic")

#define CALIB_CLONES QM_CLONES("arch=x86-64-v3", "default")

enum {
	CHUNK = 1024,           /* elements binned at a time */
	SUBHIST = 4,            /* interleaved sub-histograms */
	SPARE = 16,             /* spare bins past the end, taken in turn */
	MAX_BATCH = 64,         /* samples stacked into one run at most */
	REFS = 4,               /* samples the probe runs alone, its reference */
};
/* live activation bytes a batch may take (the batch size is this over one
 * sample's peak, so memory does not depend on the number of samples) */
#define BATCH_BYTES ((size_t)2 << 20)

typedef struct Shape {
	int rank;               /* -1: not seen */
	int64_t dims[QM_MAX_RANK];
} Shape;

/* a tensor's last scan: its finite min and max, how many values were
 * not finite, and the run it was taken in (Collector.run) */
typedef struct Scan {
	float lo, hi;
	uint64_t bad;
	int64_t n;
	uint64_t run;
} Scan;

typedef struct Collector {
	CalibStats *s;
	int32_t *idx;           /* CHUNK bin indices */
	uint32_t *sub;          /* SUBHIST x (nbins + SPARE) counts, zero
				   between uses (but for the spare bins) */
	/* batching probe: shapes of the first sample's float activations */
	Shape *shape0;
	int probe;              /* 1: recording shape0, 2: checking a batch */
	int64_t rows0, rows;    /* batch-axis size of one sample, of the batch */
	int probe_bad;          /* a checked activation did not fit */
	const char *probe_why;  /* the first one that did not */
	uint64_t nseen[2];      /* float activations seen when recording, checking */
	char *konst;            /* per tensor: made by a node without inputs
				   (Constant), the same in every run */
	char *fixed;            /* per tensor: a deterministic function of
				   constants only (see mark_fixed) */
	uint64_t *fixed_w;      /* its weight summed over the taps so far: its
				   statistics are those of the first tap,
				   multiplied by this at the end */
	uint64_t weight;        /* samples in the current run: a constant
				   counts once per sample, batched or not */
	size_t *alias;          /* per tensor: made by moving the elements of
				   tensor alias[i] (Reshape, Transpose...),
				   so its statistics are a copy; or SIZE_MAX */
	size_t *relu;           /* per tensor: made by a Relu of tensor
				   relu[i], or SIZE_MAX (see relu_scan) */
	Scan *last;             /* per tensor: its last scan */
	uint64_t run;           /* runs begun, counted by run_begins */
} Collector;

static int cmp_stats(const void *a, const void *b)
{
	return strcmp(((const TensorStats *)a)->name, ((const TensorStats *)b)->name);
}

const TensorStats *calib_find(const CalibStats *s, const char *name)
{
	if (s->index) {
		const StrMapEnt *e = strmap_find(s->index, name);
		return e ? &s->t[e->v.u] : NULL;
	}
	TensorStats key = {.name = (char *)name};
	return bsearch(&key, s->t, s->n, sizeof *s->t, cmp_stats);
}

static int finite_bits(float v)
{
	uint32_t u;
	memcpy(&u, &v, 4);
	return (u & 0x7f800000u) != 0x7f800000u;
}

/* min and max of the finite values of x[0..n) (FLT_MAX, -FLT_MAX when there
 * are none) and the number of zeros; returns how many values are not
 * finite. Eight lanes so that the comparisons become vector min and max. */
static CALIB_CLONES int64_t scan(const float *restrict x, int64_t n, float *lo, float *hi, int64_t *zeros)
{
	float l[8], h[8];
	int32_t bad[8], z[8];
	for (int k = 0; k < 8; k++) {
		l[k] = FLT_MAX;
		h[k] = -FLT_MAX;
		bad[k] = z[k] = 0;
	}
	int64_t nbad = 0, nz = 0, i = 0;
	while (i < n) {
		/* flush the 32-bit counters now and then */
		int64_t end = n - i > ((int64_t)1 << 28) ? i + ((int64_t)1 << 28) : n;
		for (; i + 8 <= end; i += 8)
			for (int k = 0; k < 8; k++) {
				float v = x[i + k];
				int f = finite_bits(v);
				float a = f ? v : FLT_MAX, b = f ? v : -FLT_MAX;
				l[k] = a < l[k] ? a : l[k];
				h[k] = b > h[k] ? b : h[k];
				bad[k] += !f;
				z[k] += v == 0;
			}
		for (; i < end; i++) {
			float v = x[i];
			int f = finite_bits(v);
			float a = f ? v : FLT_MAX, b = f ? v : -FLT_MAX;
			l[0] = a < l[0] ? a : l[0];
			h[0] = b > h[0] ? b : h[0];
			bad[0] += !f;
			z[0] += v == 0;
		}
		for (int k = 0; k < 8; k++) {
			nbad += bad[k];
			nz += z[k];
			bad[k] = z[k] = 0;
		}
	}
	for (int k = 1; k < 8; k++) {
		l[0] = l[k] < l[0] ? l[k] : l[0];
		h[0] = h[k] > h[0] ? h[k] : h[0];
	}
	/* -0 and +0 compare equal, so which one won depends on the order: keep +0 */
	*lo = l[0] + 0.0f;
	*hi = h[0] + 0.0f;
	*zeros = nz;
	return nbad;
}

/* scan() in AVX-512 where the CPU has it: 32 values an iteration, the
 * non-finite ones masked out of the min and max (each taken in two
 * registers), the non-finite values and zeros counted with popcounts of
 * the comparison masks; 2.6 times faster than the AVX2 clone of scan().
 * min and max do not depend on the order (zeros leave as +0), so the
 * results are the same. */
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define CALIB_AVX512 __attribute__((target("avx512f,popcnt")))

CALIB_AVX512 static int64_t scan_512(const float *restrict x, int64_t n, float *lo, float *hi, int64_t *zeros)
{
	const __m512i expo = _mm512_set1_epi32(0x7f800000);
	const __m512 zero = _mm512_setzero_ps();
	__m512 l0 = _mm512_set1_ps(FLT_MAX), l1 = l0, h0 = _mm512_set1_ps(-FLT_MAX), h1 = h0;
	int64_t good = 0, nz = 0, i = 0;
	for (; i + 32 <= n; i += 32) {
		__m512 v0 = _mm512_loadu_ps(x + i), v1 = _mm512_loadu_ps(x + i + 16);
		__mmask16 f0 = _mm512_cmpneq_epi32_mask(_mm512_and_si512(_mm512_castps_si512(v0), expo), expo);
		__mmask16 f1 = _mm512_cmpneq_epi32_mask(_mm512_and_si512(_mm512_castps_si512(v1), expo), expo);
		l0 = _mm512_mask_min_ps(l0, f0, v0, l0);
		h0 = _mm512_mask_max_ps(h0, f0, v0, h0);
		l1 = _mm512_mask_min_ps(l1, f1, v1, l1);
		h1 = _mm512_mask_max_ps(h1, f1, v1, h1);
		good += __builtin_popcount((unsigned)f0 | (unsigned)f1 << 16);
		nz += __builtin_popcount((unsigned)_mm512_cmp_ps_mask(v0, zero, _CMP_EQ_OQ) |
					 (unsigned)_mm512_cmp_ps_mask(v1, zero, _CMP_EQ_OQ) << 16);
	}
	int64_t nbad = i - good;
	float l = _mm512_reduce_min_ps(_mm512_min_ps(l0, l1)), h = _mm512_reduce_max_ps(_mm512_max_ps(h0, h1));
	for (; i < n; i++) {
		float v = x[i];
		int f = finite_bits(v);
		float a = f ? v : FLT_MAX, b = f ? v : -FLT_MAX;
		l = a < l ? a : l;
		h = b > h ? b : h;
		nbad += !f;
		nz += v == 0;
	}
	*lo = l + 0.0f;
	*hi = h + 0.0f;
	*zeros = nz;
	return nbad;
}

static int calib_avx512(void)
{
	return cpu_avx512f();
}
#else
static int64_t scan_512(const float *restrict x, int64_t n, float *lo, float *hi, int64_t *zeros)
{
	return scan(x, n, lo, hi, zeros);
}

static int calib_avx512(void)
{
	return 0;
}
#endif

/* idx[i] = the bin of x[i] over [-r, r) with k = nbins / (2 r): half +
 * floor(x k), exact as k is a power of two (a product that underflows to
 * -0 is still put below zero); trash + i % SPARE for zeros and non-finite
 * values (zeros are counted apart). Branch-free and
 * in float so that it vectorizes; k must be a normal float. */
static CALIB_CLONES void bin_index(const float *restrict x, int n, float k, int32_t half,
				   int32_t trash, int32_t *restrict idx)
{
	for (int i = 0; i < n; i++) {
		float v = x[i];
		int32_t f = fabsf(v) <= FLT_MAX && v != 0;
		v = f ? v : 1.0f;
		int32_t b = (int32_t)floorf(v * k);
		b -= (v < 0) & (b >= 0);
		idx[i] = f ? b + half : trash + (i & (SPARE - 1));
	}
}

/* the same one value at a time in double, for any k */
static void bin_index_wide(const float *x, int n, double k, int32_t half, int32_t trash, int32_t *idx)
{
	for (int i = 0; i < n; i++) {
		double t = floor((double)x[i] * k);
		idx[i] = isfinite(x[i]) && x[i] != 0 ? (int32_t)(t < 0 || x[i] >= 0 ? t : -1) + half
						      : trash + (i & (SPARE - 1));
	}
}

/* double t's histogram range until it exceeds magnitude m, merging bins:
 * old bin i is new bin nb/4 + i/2 (exact: floor(floor(y) / 2) = floor(y / 2)).
 * The first range is the smallest power of two above m, so the final range
 * is the smallest power of two above the largest magnitude whatever the
 * order and grouping of the samples. */
static void widen(TensorStats *t, uint32_t nb, double m)
{
	if (m == 0)
		return;
	if (t->range == 0) {
		int e;
		frexp(m, &e);
		t->range = ldexp(1.0, e);
		return;
	}
	while (m >= t->range && !t->hist)
		t->range *= 2;
	while (m >= t->range) {
		uint64_t *h = t->hist;
		uint64_t *n = xcalloc(nb + SPARE, sizeof *n);
		for (uint32_t i = 0; i < nb; i++)
			n[nb / 4 + i / 2] += h[i];
		free(h);
		t->hist = n;
		t->range *= 2;
	}
}

/* the bin of finite v, within one (for bounds) */
static int32_t bin_near(double v, double k, uint32_t nb)
{
	double b = floor(v * k) + nb / 2;
	return b < 0 ? 0 : b >= nb ? (int32_t)nb - 1 : (int32_t)b;
}

/* count the n values of x but zeros into t's histogram, w times (the range
 * covers them; hist[nbins...] are the spare bins); lo and hi are their min,
 * max */
static void hist_add(Collector *c, TensorStats *t, const float *x, int64_t n, uint64_t w, float lo, float hi)
{
	uint32_t nb = c->s->nbins;
	double k = nb / (2 * t->range);
	uint64_t *h = t->hist;
	int32_t blo = bin_near(lo, k, nb), bhi = bin_near(hi, k, nb);
	blo -= blo > 0;
	bhi += bhi < (int32_t)nb - 1;
	int64_t span = bhi - blo + 1;
	int sub = w == 1 && n >= 1024 && n >= 8 * span;
	uint32_t *s = c->sub;
	for (int64_t i = 0; i < n; i += CHUNK) {
		int m = n - i < CHUNK ? (int)(n - i) : CHUNK;
		if (k >= 0x1p-120 && k <= 0x1p120)
			bin_index(x + i, m, (float)k, (int32_t)(nb / 2), (int32_t)nb, c->idx);
		else
			bin_index_wide(x + i, m, k, (int32_t)(nb / 2), (int32_t)nb, c->idx);
		if (!sub) {
			for (int j = 0; j < m; j++)
				h[c->idx[j]] += w;
			continue;
		}
		int j = 0;
		for (; j + SUBHIST <= m; j += SUBHIST)
			for (int q = 0; q < SUBHIST; q++)
				s[q * (nb + SPARE) + (uint32_t)c->idx[j + q]]++;
		for (; j < m; j++)
			s[(uint32_t)c->idx[j]]++;
		/* add up (and clear) before a 32-bit counter could fill */
		if (((i + CHUNK) & (((int64_t)1 << 30) - 1)) == 0 || i + CHUNK >= n)
			for (int q = 0; q < SUBHIST; q++) {
				uint32_t *sq = s + q * (nb + SPARE);
				for (int32_t b = blo; b <= bhi; b++) {
					h[b] += sq[b];
					sq[b] = 0;
				}
			}
	}
}

/* add the n values of x to ts, w times, given their scan: finite min lo,
 * max hi, bad values not finite, zeros (x and zeros are read only with
 * histograms) */
static void stats_note(Collector *c, TensorStats *ts, const float *x, int64_t n, uint64_t w, float lo, float hi,
		       uint64_t bad, int64_t zeros)
{
	uint32_t nb = c->s->nbins;
	uint64_t good = (uint64_t)n - bad;
	ts->nonfinite += bad * w;
	if (!good)
		return;
	if (!ts->hist && nb)
		ts->hist = xcalloc(nb + SPARE, sizeof *ts->hist);
	ts->min = ts->count && ts->min < lo ? ts->min : lo;
	ts->max = ts->count && ts->max > hi ? ts->max : hi;
	ts->count += good * w;
	widen(ts, nb, fmax(-(double)lo, (double)hi));
	if (!nb)
		return; /* min and max only (see calib_collect) */
	ts->hist[nb / 2] += (uint64_t)zeros * w;
	if (ts->range > 0)
		hist_add(c, ts, x, n, w, lo, hi);
}

/* scan the n values of x into *sc and add them to ts, w times */
static void stats_add(Collector *c, TensorStats *ts, const float *x, int64_t n, uint64_t w, Scan *sc)
{
	float lo, hi;
	int64_t zeros;
	uint64_t bad = (uint64_t)(calib_avx512() ? scan_512 : scan)(x, n, &lo, &hi, &zeros);
	*sc = (Scan){.lo = lo, .hi = hi, .bad = bad, .n = n, .run = c->run};
	stats_note(c, ts, x, n, w, lo, hi, bad, zeros);
}

/* the statistics of a Relu's n outputs from its input's scan of this run,
 * without reading them (minmax only: histograms need the values): every
 * value max(0, x) of a finite x, so the min and max are those of the
 * input raised to 0 (+0 as scan gives it). 0 if the input was not scanned
 * in this run or had values that are not finite (a Relu makes -inf 0). */
static int relu_scan(const Collector *c, size_t i, int64_t n, Scan *sc)
{
	size_t j = c->relu[i];
	if (c->s->nbins || j == SIZE_MAX)
		return 0;
	const Scan *in = &c->last[j];
	if (in->run != c->run || in->n != n || in->bad)
		return 0;
	*sc = (Scan){.lo = in->lo > 0 ? in->lo : 0.0f, .hi = in->hi > 0 ? in->hi : 0.0f, .n = n, .run = c->run};
	return 1;
}

/* the probe: record (probe 1) or check (probe 2) activation shapes */
static void probe_tap(Collector *c, TensorStats *ts, const Tensor *t)
{
	Shape *s0 = &c->shape0[ts - c->s->t];
	c->nseen[c->probe - 1]++;
	/* the same tensor every run (a Constant, silero-vad's weights sliced
	 * in an If branch): counted per sample, need not scale */
	if (c->konst[ts - c->s->t] || c->fixed[ts - c->s->t])
		return;
	if (c->probe == 1) {
		s0->rank = t->rank;
		memcpy(s0->dims, t->dims, sizeof s0->dims);
		return;
	}
	/* the batch may have moved to another axis (attention heads): only
	 * the element count must scale with it */
	int64_t n0 = s0->rank >= 0 ? shape_numel(s0->rank, s0->dims) : -1;
	int ok = s0->rank == t->rank && c->rows0 > 0 && n0 >= 0 && t->numel == n0 / c->rows0 * c->rows &&
		 n0 % c->rows0 == 0;
	if (!ok && !c->probe_bad) {
		c->probe_bad = 1;
		c->probe_why = ts->name;
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
	size_t i = (size_t)(ts - c->s->t);
	if (c->probe)
		probe_tap(c, ts, t);
	if (c->alias[i] != SIZE_MAX) {
		c->last[i] = c->last[c->alias[i]]; /* the same values */
		return;
	}
	uint64_t w = c->konst[i] || c->fixed[i] ? c->weight : 1;
	if (!c->fixed[i]) {
		Scan *sc = &c->last[i];
		if (relu_scan(c, i, t->numel, sc))
			stats_note(c, ts, t->data, t->numel, w, sc->lo, sc->hi, 0, 0);
		else
			stats_add(c, ts, t->data, t->numel, w, sc);
		return;
	}
	/* the same values every run (silero's weights are Constant nodes in
	 * an If branch, tapped on every sample): count them once */
	if (!c->fixed_w[i])
		stats_add(c, ts, t->data, t->numel, 1, &c->last[i]);
	c->fixed_w[i] += w;
}

/* a run of the interpreter tapped by c begins: scans of earlier runs are
 * of other values */
static void run_begins(Collector *c)
{
	c->run++;
}

/* ts's statistics counted w times */
static void stats_scale(const CalibStats *s, TensorStats *ts, uint64_t w)
{
	ts->count *= w;
	ts->nonfinite *= w;
	for (uint32_t b = 0; ts->hist && b < s->nbins; b++)
		ts->hist[b] *= w;
}

/* "[batch,64]" from a graph input's declared shape */
static void input_shape_str(const Onnx__ValueInfoProto *vi, StrBuf *sb)
{
	const Onnx__TypeProto__Tensor *tt =
		vi->type && vi->type->value_case == ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE ? vi->type->tensor_type : NULL;
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
 * does, checking element type and shape; by[i] is the tensor feeding
 * input i. */
static int check_sample(Model *m, Interp *ip, const SampleIter *it, uint64_t idx, const TensorList *tl,
			const Tensor **by, int64_t *rows_at)
{
	rows_at[idx] = 1;
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
		int bad = !t;
		if (t && t->dtype != dtype)
			bad = 1;
		if (t && rank >= 0 && t->rank != rank)
			bad = 1;
		for (int k = 0; !bad && rank >= 0 && k < rank; k++)
			if (dims[k] >= 0 && dims[k] != t->dims[k])
				bad = 1;
		if (!bad) {
			by[i] = t;
			if (rows_at[idx] == 1 && rank >= 1 && dims[0] < 0 && t->rank >= 1 && t->dims[0] > 1)
				rows_at[idx] = t->dims[0];
			continue;
		}
		/* (the expected type and shape are spelled out only for an error) */
		StrBuf want = {0};
		sb_printf(&want, "%s ", dtype_name(dtype));
		const Onnx__ValueInfoProto *vi = graph_input(m, name);
		if (vi)
			input_shape_str(vi, &want);
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
		shape_str(t->rank, t->dims, got, sizeof got);
		/* a file of many rows for an input of a fixed batch: the commonest
		 * way to keep calibration data, and one the model cannot take */
		int rows = rank >= 1 && t->dtype == dtype && t->rank == rank && dims[0] > 0 && t->dims[0] > dims[0] &&
			   t->dims[0] % dims[0] == 0;
		for (int k = 1; rows && k < rank; k++)
			rows = dims[k] < 0 || dims[k] == t->dims[k];
		const char *file = samples_path(it, (size_t)idx);
		if (rows)
			error("calibration sample %llu: input '%s' is %s %s, expected %s (in %s): the file stacks %lld rows but the model's batch is fixed at %lld; save each sample in its own file (a directory of .npy files), or export the model with a symbolic batch dimension",
			      (unsigned long long)idx + 1, name, dtype_name(t->dtype), got, want.buf, file ? file : "?",
			      (long long)t->dims[0], (long long)dims[0]);
		else
			error("calibration sample %llu: input '%s' is %s %s, expected %s (in %s)", (unsigned long long)idx + 1,
			      name, dtype_name(t->dtype), got, want.buf, file ? file : "?");
		sb_release(&want);
		return -1;
	}
	return 0;
}

/* can samples be stacked at all: axis[i] gets input i's batch axis, its
 * first symbolic or unknown dimension, or -1 for an input without one (a
 * scalar like silero-vad's sample rate, a fixed shape): that input is
 * shared, fed once to a batch whose samples all hold the same bytes for
 * it. Every input needs a declared rank, none may hold strings (stacked
 * as bytes), and at least one must be stacked. */
static int batchable(Interp *ip, int *axis)
{
	size_t nin = interp_ninputs(ip);
	int stacked = 0;
	for (size_t i = 0; i < nin; i++) {
		int dtype, rank;
		int64_t dims[QM_MAX_RANK];
		interp_input_type(ip, i, &dtype, &rank, dims);
		if (rank < 0 || dtype == DT_STRING)
			return 0;
		axis[i] = -1;
		for (int k = rank - 1; k >= 0; k--)
			axis[i] = dims[k] < 0 ? k : axis[i];
		stacked |= axis[i] >= 0;
	}
	return stacked;
}

/* A sample held for a batch: its tensors, in model input order. */
typedef struct Held {
	TensorList tl;
	const Tensor **by;
} Held;

/* do samples a and b feed every input the same type and shape */
static int same_shape(const Held *a, const Held *b, size_t nin)
{
	for (size_t i = 0; i < nin; i++) {
		const Tensor *x = a->by[i], *y = b->by[i];
		if (x->dtype != y->dtype || x->rank != y->rank ||
		    memcmp(x->dims, y->dims, (size_t)x->rank * sizeof *x->dims))
			return 0;
	}
	return 1;
}

/* the first shared input (axis < 0) a and b (of the same shape) feed other
 * bytes, or -1 */
static int other_shared(const Held *a, const Held *b, size_t nin, const int *axis)
{
	for (size_t i = 0; i < nin; i++)
		if (axis[i] < 0 && a->by[i]->nbytes && memcmp(a->by[i]->data, b->by[i]->data, a->by[i]->nbytes))
			return (int)i;
	return -1;
}

/* elements (or bytes) before axis a of a tensor of dims: the number of
 * blocks a stacked tensor interleaves */
static int64_t outer_of(const int64_t *dims, int a)
{
	int64_t outer = 1;
	for (int k = 0; k < a; k++)
		outer *= dims[k];
	return outer;
}

/* stack the n held samples into in[nin]: input i along axis[i], block
 * after block (for each index before the axis, every sample's block in
 * turn); a shared input once, from the first sample */
static int stack(Interp *ip, const int *axis, const Held *h, size_t n, Tensor *in)
{
	size_t nin = interp_ninputs(ip);
	for (size_t i = 0; i < nin; i++) {
		const Tensor *t0 = h[0].by[i];
		int a = axis[i];
		int64_t dims[QM_MAX_RANK];
		memcpy(dims, t0->dims, sizeof dims);
		if (a >= 0)
			dims[a] = t0->dims[a] * (int64_t)n;
		if (tensor_alloc(&in[i], t0->dtype, t0->rank, dims) < 0)
			return -1;
		in[i].name = xstrdup(interp_input_name(ip, i));
		if (a < 0) {
			if (t0->nbytes)
				memcpy(in[i].data, t0->data, t0->nbytes);
			continue;
		}
		int64_t outer = outer_of(t0->dims, a);
		size_t block = outer > 0 ? t0->nbytes / (size_t)outer : 0;
		char *dst = in[i].data;
		for (int64_t o = 0; block && o < outer; o++)
			for (size_t k = 0; k < n; k++, dst += block)
				memcpy(dst, (const char *)h[k].by[i]->data + (size_t)o * block, block);
	}
	return 0;
}

static void held_free(Held *h)
{
	tl_free(&h->tl);
	free(h->by);
	h->by = NULL;
}

/* run n held samples stacked as one batch; outputs to out (may be NULL) */
static int run_stacked(Interp *ip, const int *axis, const Held *h, size_t n, size_t nout, Tensor *out)
{
	size_t nin = interp_ninputs(ip);
	Tensor *in = xcalloc(nin, sizeof *in);
	int r = stack(ip, axis, h, n, in);
	if (r == 0)
		r = interp_run(ip, nin, in, nout, out);
	for (size_t i = 0; i < nin; i++)
		tensor_free(&in[i]);
	free(in);
	return r;
}

/* the axis along which batch output b holds n (>= 2) single outputs of
 * s0's shape: the one axis n times as long as s0's, all others equal; -1
 * if there is none */
static int output_axis(const Tensor *b, const Tensor *s0, size_t n)
{
	if (b->dtype != s0->dtype || b->rank != s0->rank)
		return -1;
	int a = -1;
	for (int k = 0; k < b->rank; k++) {
		if (b->dims[k] == s0->dims[k])
			continue;
		if (a >= 0 || b->dims[k] != s0->dims[k] * (int64_t)n)
			return -1;
		a = k;
	}
	return a;
}

/* is one sample's output s the k-th of n stacked along axis a of b: the
 * same bytes, or floats within 1e-4 of s's largest magnitude */
static int output_matches(const Tensor *b, int a, const Tensor *s, size_t k, size_t n)
{
	int64_t outer = outer_of(s->dims, a);
	if (outer <= 0 || !s->nbytes)
		return 1;
	size_t block = s->nbytes / (size_t)outer;
	const char *bd = (const char *)b->data + k * block;
	if (s->dtype != DT_FLOAT) {
		for (int64_t o = 0; o < outer; o++)
			if (memcmp(bd + (size_t)o * n * block, (const char *)s->data + (size_t)o * block, block))
				return 0;
		return 1;
	}
	const float *x = s->data;
	float big = 0;
	for (int64_t e = 0; e < s->numel; e++)
		big = fabsf(x[e]) > big ? fabsf(x[e]) : big;
	int64_t inner = s->numel / outer;
	for (int64_t o = 0; o < outer; o++) {
		const float *y = (const float *)(bd + (size_t)o * n * block), *xo = x + o * inner;
		for (int64_t e = 0; e < inner; e++)
			if (!(fabsf(xo[e] - y[e]) <= 1e-4f * big) && memcmp(&xo[e], &y[e], 4))
				return 0;
	}
	return 1;
}

/* do the outputs b of n samples stacked hold the outputs one[k] of the
 * first nref run alone, each output along an axis of its own (silero-vad's
 * state comes back on axis 1) */
static int outputs_match(size_t nout, const Tensor *b, Tensor *const *one, size_t nref, size_t n)
{
	for (size_t o = 0; o < nout; o++) {
		int a = output_axis(&b[o], &one[0][o], n);
		if (a < 0)
			return 0;
		for (size_t k = 0; k < nref; k++) {
			const Tensor *s = &one[k][o];
			if (s->dtype != one[0][o].dtype || s->rank != one[0][o].rank ||
			    memcmp(s->dims, one[0][o].dims, (size_t)s->rank * sizeof *s->dims) ||
			    !output_matches(&b[o], a, s, k, n))
				return 0;
		}
	}
	return 1;
}

enum { ONE_AT_A_TIME, PROBING, BATCHED };

typedef struct Pass {
	Model *m;
	Interp *ip;
	Collector *col;
	FILE *log;
	size_t nin, nout;
	int mode;
	int *axis;              /* per input: the batch axis, -1 if shared */
	size_t bmax;            /* batch size */
	Held held[MAX_BATCH];   /* PROBING: samples held for its batch */
	Tensor *outs[MAX_BATCH];/* PROBING: the outputs of the first nref,
				   which ran alone */
	size_t nheld, nref;
	Collector refcol;       /* PROBING: the statistics of those runs */
	int64_t rows0;          /* PROBING: the first sample's batch rows */
	uint64_t first;         /* number of the first held sample */
	Held ref;               /* BATCHED: the shapes probed (data freed but
				   for the shared inputs') */
	int workers;            /* threads to run units on */
	SampleIter *it;
	struct Crew *crew;      /* the threads running units, once started */
	int64_t *rows_at;       /* per sample: its rows (the first dimension
				   of an input whose batch is open), else 1;
				   set by whichever thread checks the sample,
				   the same value if it is read again */
} Pass;

static void collector_clone(Collector *c, const Collector *main);
static void collector_unclone(Collector *c);
static void collector_merge(Collector *main, Collector *w);
static void crew_speculate(Pass *p);
static void crew_discard(Pass *p);

static void release_held(Pass *p)
{
	for (size_t k = 0; k < p->nheld; k++) {
		held_free(&p->held[k]);
		if (p->outs[k]) {
			for (size_t o = 0; o < p->nout; o++)
				tensor_free(&p->outs[k][o]);
			free(p->outs[k]);
			p->outs[k] = NULL;
		}
	}
	p->nheld = p->nref = 0;
}

/* run sample h (number idx) alone, counted by col; its outputs to out
 * (may be NULL) */
static int run_alone(Pass *p, Collector *col, const Held *h, uint64_t idx, Tensor *out)
{
	interp_set_tap(p->ip, tap, col);
	run_begins(col);
	int r = interp_run_sample(p->ip, h->tl.n, h->tl.t, out ? p->nout : 0, out);
	interp_set_tap(p->ip, tap, p->col);
	if (r == 0)
		return 0;
	for (size_t o = 0; out && o < p->nout; o++)
		tensor_free(&out[o]);
	return error_prefix("calibration sample %llu", (unsigned long long)idx + 1);
}

/* PROBING ends without batches (why says why, NULL: too few samples): the
 * statistics of the samples that ran alone count, the other held samples
 * run alone now, in order */
static int stop_batching(Pass *p, const char *why, const char *what)
{
	if (why && p->log)
		fprintf(p->log, "calibrate: one sample at a time: %s%s%s\n", why, what ? " " : "", what ? what : "");
	p->mode = ONE_AT_A_TIME;
	crew_discard(p);
	collector_merge(p->col, &p->refcol);
	collector_unclone(&p->refcol);
	int r = 0;
	for (size_t k = p->nref; r == 0 && k < p->nheld; k++)
		r = run_alone(p, p->col, &p->held[k], p->first + k, NULL);
	release_held(p);
	return r;
}

/* the batch size: BATCH_BYTES over one sample's live activations and
 * inputs, a multiple of 4 from 8 up. A convolution runs its direct
 * product on images side by side in groups that divide the batch: the
 * digits CNN's 23 (prime) fell back to im2col, 27 us a sample against
 * 18.5 at 20 or 24. */
static size_t batch_size(Pass *p, const Held *h)
{
	size_t weights, live;
	interp_stats(p->ip, &weights, &live);
	for (size_t i = 0; i < p->nin; i++)
		live += h->by[i]->nbytes;
	size_t b = BATCH_BYTES / (live ? live : 1);
	b = b < 1 ? 1 : b > MAX_BATCH ? MAX_BATCH : b;
	return b >= 8 ? b - b % 4 : b;
}

/* "batches of 16 samples (input 'state' stacked on axis 1, 'sr' shared)":
 * the axis and the shared inputs said when not all inputs stack on the
 * first axis */
static void log_batches(const Pass *p)
{
	StrBuf sb = {0};
	for (size_t i = 0; i < p->nin; i++) {
		if (p->axis[i] == 0)
			continue;
		sb_printf(&sb, "%s'%s' ", sb.len ? ", " : "input ", interp_input_name(p->ip, i));
		if (p->axis[i] > 0)
			sb_printf(&sb, "stacked on axis %d", p->axis[i]);
		else
			sb_puts(&sb, "shared");
	}
	fprintf(p->log, "calibrate: batches of %zu samples%s%s%s\n", p->nheld, sb.len ? " (" : "",
		sb.len ? sb.buf : "", sb.len ? ")" : "");
	sb_release(&sb);
}

/* BATCHED: the shapes of the probed samples, and the bytes of their shared
 * inputs, that a sample must have to join a batch */
static void keep_ref(Pass *p)
{
	p->ref.by = xcalloc(p->nin, sizeof *p->ref.by);
	for (size_t i = 0; i < p->nin; i++) {
		const Tensor *h = p->held[0].by[i];
		Tensor *t = xcalloc(1, sizeof *t);
		if (p->axis[i] < 0 && tensor_alloc(t, h->dtype, h->rank, h->dims) == 0 && h->nbytes)
			memcpy(t->data, h->data, h->nbytes);
		t->dtype = h->dtype;
		t->rank = h->rank;
		memcpy(t->dims, h->dims, sizeof t->dims);
		p->ref.by[i] = t;
	}
}

/* may h join a batch of the probed shapes and shared bytes ref (NULL:
 * samples run one at a time) */
static int joins(const Pass *p, const Held *ref, const Held *h)
{
	return ref && same_shape(ref, h, p->nin) && other_shared(ref, h, p->nin, p->axis) < 0;
}

/* do all inputs stack on their first axis (nothing shared) */
static int first_axes(const Pass *p)
{
	for (size_t i = 0; i < p->nin; i++)
		if (p->axis[i] != 0)
			return 0;
	return 1;
}

/* the batch-axis size of the first sample's stacked inputs (they must
 * agree: the probe scales activations by it), or -1 naming in *who the
 * input that disagrees */
static int64_t sample_rows(const Pass *p, const Held *h, const char **who)
{
	int64_t rows = -1;
	for (size_t i = 0; i < p->nin; i++) {
		if (p->axis[i] < 0)
			continue;
		int64_t r = h->by[i]->dims[p->axis[i]];
		if (rows >= 0 && r != rows) {
			*who = interp_input_name(p->ip, i);
			return -1;
		}
		rows = r;
	}
	return rows;
}

/* PROBING, once the batch is held: run it stacked, its statistics apart,
 * and compare. They count if it is a batch (and those of the samples that
 * ran alone do not: those samples are in it), else they do not. */
static int probe_batch(Pass *p)
{
	Collector b;
	collector_clone(&b, p->col);
	b.probe = 2;
	b.rows0 = p->rows0;
	b.rows = p->rows0 * (int64_t)p->nheld;
	b.weight = p->nheld;
	Tensor *out = xcalloc(p->nout ? p->nout : 1, sizeof *out);
	interp_set_tap(p->ip, tap, &b);
	run_begins(&b);
	int r = run_stacked(p->ip, p->axis, p->held, p->nheld, p->nout, out);
	interp_set_tap(p->ip, tap, p->col);
	const char *why = NULL, *what = NULL;
	if (r < 0) {
		why = "stacked samples failed to run:";
		what = errmsg();
	} else if (b.probe_bad || p->refcol.nseen[0] != b.nseen[1]) {
		why = first_axes(p) ? "the first dimension is not a batch dimension: activation"
				    : "the stacked dimensions are not a batch dimension: activation";
		what = b.probe_why ? b.probe_why : "(another set of activations)";
	} else if (!outputs_match(p->nout, out, p->outs, p->nref, p->nheld))
		why = "stacked samples give other outputs than single ones";
	for (size_t o = 0; o < p->nout; o++)
		tensor_free(&out[o]);
	free(out);
	if (why) {
		collector_unclone(&b);
		return stop_batching(p, why, what);
	}
	collector_merge(p->col, &b);
	collector_unclone(&b);
	collector_unclone(&p->refcol);
	if (p->log)
		log_batches(p);
	p->mode = BATCHED;
	if (!p->ref.by)
		keep_ref(p);
	release_held(p);
	return 0;
}

/* PROBING: hold sample h (number idx) for the probe's batch; the first
 * REFS run alone first, their statistics apart, as its reference (the
 * first one decides the batch size and records the activation shapes) */
static int probe_take(Pass *p, Held *h, uint64_t idx)
{
	if (!p->nheld) {
		p->first = idx;
		collector_clone(&p->refcol, p->col);
	}
	size_t k = p->nheld++;
	p->held[k] = *h;
	memset(h, 0, sizeof *h);
	int shaped = k == 0 || same_shape(&p->held[0], &p->held[k], p->nin);
	int other = k > 0 && shaped ? other_shared(&p->held[0], &p->held[k], p->nin, p->axis) : -1;
	int r = 0;
	if (shaped && other < 0 && k < REFS) {
		p->refcol.probe = k == 0;
		p->outs[k] = xcalloc(p->nout ? p->nout : 1, sizeof *p->outs[k]);
		r = run_alone(p, &p->refcol, &p->held[k], idx, p->outs[k]);
		p->refcol.probe = 0;
		p->nref++;
	}
	if (r < 0)
		return -1; /* (calib_collect frees what is held) */
	const char *who = NULL;
	if (k == 0) {
		p->rows0 = sample_rows(p, &p->held[0], &who);
		p->bmax = batch_size(p, &p->held[0]);
	}
	if (who)
		return stop_batching(p, "the stacked inputs disagree on the number of rows: input", who);
	if (p->bmax < 2)
		return stop_batching(p, "one sample's activations fill a batch", NULL);
	if (!shaped)
		return stop_batching(p, "samples of different shapes", NULL);
	if (other >= 0)
		return stop_batching(p, "samples differ in shared input", interp_input_name(p->ip, (size_t)other));
	if (p->nheld == p->bmax)
		return probe_batch(p);
	if (k == 0)
		crew_speculate(p);
	return 0;
}

static int run_units(Pass *p, uint64_t *idx);

/* the probe reads the first samples in order; the units after it */
static int run_pass(Pass *p)
{
	SampleIter *it = p->it;
	uint64_t idx = 0;
	int r = 1;
	Held h = {0};
	while (p->mode == PROBING && (r = samples_next(it, &h.tl)) == 1) {
		h.by = xcalloc(p->nin ? p->nin : 1, sizeof *h.by);
		if (check_sample(p->m, p->ip, it, idx, &h.tl, h.by, p->rows_at) < 0) {
			held_free(&h);
			return -1;
		}
		if (probe_take(p, &h, idx) < 0)
			return -1;
		memset(&h, 0, sizeof h);
		idx++;
	}
	if (r < 0)
		return error_prefix("calibration sample %llu", (unsigned long long)idx + 1);
	/* fewer samples than a batch: probe with those held */
	if (p->mode == PROBING && (p->nheld > 1 ? probe_batch(p) : stop_batching(p, NULL, NULL)) < 0)
		return -1;
	release_held(p);
	if (run_units(p, &idx) < 0)
		return -1;
	p->col->s->nsamples = idx;
	return 0;
}

/* ---- units of work after the probe ----
 *
 * Splitting each operator between threads does not pay for the small
 * operators of a calibration (a 28x28 image's convolution takes tens of
 * microseconds, a wake-up several); running whole batches side by side
 * does. Every thread runs its own interpreter (one thread each) with its
 * own collector. A unit of work is the next range of sample numbers, as
 * many as a batch holds (one when samples run one at a time): a thread
 * claims it under a lock, then reads and checks its samples outside it
 * (reading an .npz took silero-vad a third of its calibration), runs the
 * samples that join the probed batch stacked as one batch and the others
 * alone. So the units, and which samples are stacked together (hence the
 * float results), depend on the sample numbers alone, never on the number
 * of threads: the one-thread loop runs the same units one after another. A
 * sample of another shape than the batch's runs alone and its range's
 * batch is that much smaller (before, the next samples filled it). The
 * collectors' statistics are merged exactly (minima, maxima, counts,
 * histograms over power-of-two ranges: see widen), so the statistics do
 * not depend on the number of threads nor on which thread ran what. A
 * unit runs its samples in order and stops at its first failure, and
 * units are claimed in order, so the failure reported, the lowest-numbered
 * one, is the one the one-thread loop stops at.
 *
 * The other threads (the crew) do not wait for the probe, which runs on
 * the calling thread: they start, and plan their interpreters beside it,
 * as soon as there are surely samples after its batch (more than
 * MAX_BATCH) or the first sample has set the batch size; from then on
 * they run the units after the probe's batch (samples 0 to bmax - 1, the
 * only batch a probe ever accepts) as if the probe will accept it. If it
 * does not, those speculative statistics are thrown away whole and the
 * units start again, one sample each, after the samples the probe ran:
 * either way the runs counted are those of the one-thread loop. (The
 * probe took fashion-cnn 4 ms of 60 with the second core idle, and a
 * second interpreter of silero-vad 1.3 ms more to plan after it.) */

/* bytes the extra interpreters may add together: each has its own copy of
 * the weights and its own activations (a model above this calibrates on
 * one interpreter, its kernels on all threads, so its memory does not
 * double) */
#define WORKER_BYTES ((size_t)256 << 20)

typedef struct Unit {
	Held held[MAX_BATCH];   /* the samples read, in order */
	Held batch[MAX_BATCH];  /* those that join the batch (borrowed) */
	size_t n;               /* samples in the range */
	uint64_t first;         /* number of the first sample */
	const Held *ref;        /* the shapes that join the batch (NULL:
				   none, one sample at a time) */
} Unit;

typedef struct Shared {
	Pass *p;                /* the model, inputs and batch axes */
	SampleIter *it;
	pthread_mutex_t lock;   /* over everything below */
	pthread_cond_t wake;    /* for the crew: units to claim, or leave */
	pthread_cond_t idle;    /* for the probe: a unit done, a thread gone */
	size_t unit;            /* samples a unit ranges over (0: not known
				   yet, the crew waits) */
	const Held *ref;        /* what joins a unit's batch (Unit.ref) */
	int spec;               /* the probe may yet discard the units */
	size_t keep;            /* workers numbered from this leave */
	size_t busy;            /* units running */
	size_t alive;           /* other threads not gone yet */
	size_t ahead;           /* units claimed before the probe decided */
	uint64_t next;          /* number of the next sample to claim */
	int done;               /* no more samples, or a failure */
	uint64_t err_at;        /* the lowest failed sample (UINT64_MAX: none) */
	char *err;
} Shared;

typedef struct Worker {
	Shared *sh;
	size_t num;             /* 0: the calling thread */
	Interp *ip;
	Collector *col;         /* the main collector, or own */
	Collector own;
	pthread_t tid;
	int started;
} Worker;

typedef struct Crew {
	Shared sh;
	Worker *w;
	size_t n;               /* workers, w[0] the calling thread */
	int threads;            /* the main interpreter's kernel threads */
} Crew;

/* record the failure of sample idx (lock held) */
static void fail_at(Shared *sh, uint64_t idx, const char *msg)
{
	sh->done = 1;
	if (idx >= sh->err_at)
		return;
	sh->err_at = idx;
	free(sh->err);
	sh->err = xstrdup(msg);
}

static void fail_unit(Shared *sh, uint64_t idx)
{
	pthread_mutex_lock(&sh->lock);
	fail_at(sh, idx, errmsg());
	pthread_mutex_unlock(&sh->lock);
}

/* claim the next range of samples: 1, or 0 when there is none left for
 * w; waits while the units are not known yet, or speculative and all
 * claimed (the probe may hand them out again) */
static int take_unit(Worker *w, Unit *u)
{
	Shared *sh = w->sh;
	size_t count = samples_count(sh->it);
	int got = 0;
	pthread_mutex_lock(&sh->lock);
	while (w->num < sh->keep) {
		if (sh->unit && !sh->done && sh->next < count) {
			u->first = sh->next;
			u->n = count - sh->next < sh->unit ? count - sh->next : sh->unit;
			u->ref = sh->ref;
			sh->ahead += sh->spec;
			sh->next += u->n;
			sh->busy++;
			got = 1;
			break;
		}
		if (sh->unit && !sh->spec)
			break;
		pthread_cond_wait(&sh->wake, &sh->lock);
	}
	pthread_mutex_unlock(&sh->lock);
	return got;
}

/* a unit is done (w is 0), or worker w is gone */
static void crew_left(Shared *sh, const Worker *w)
{
	pthread_mutex_lock(&sh->lock);
	if (w)
		sh->alive--;
	else
		sh->busy--;
	pthread_cond_broadcast(&sh->idle);
	pthread_mutex_unlock(&sh->lock);
}

/* sample k of u read and checked into u->held[k]; -1 after error() */
static int read_sample(Worker *w, Unit *u, size_t k)
{
	Held *h = &u->held[k];
	uint64_t idx = u->first + k;
	if (samples_read(w->sh->it, idx, &h->tl) < 0)
		return error_prefix("calibration sample %llu", (unsigned long long)idx + 1);
	h->by = xcalloc(w->sh->p->nin ? w->sh->p->nin : 1, sizeof *h->by);
	return check_sample(w->sh->p->m, w->ip, w->sh->it, idx, &h->tl, h->by, w->sh->p->rows_at);
}

/* the joining samples of u (the first nb of its range) stacked as one
 * batch, with the statistics tap */
static int run_batch(Worker *w, Unit *u, size_t nb)
{
	Pass *p = w->sh->p;
	size_t n = 0;
	uint64_t lo = 0, hi = 0;
	for (size_t k = 0; k < nb; k++)
		if (joins(p, u->ref, &u->held[k])) {
			lo = n ? lo : u->first + k;
			hi = u->first + k;
			u->batch[n++] = u->held[k];
		}
	w->col->weight = n;
	run_begins(w->col);
	int r = run_stacked(w->ip, p->axis, u->batch, n, 0, NULL);
	w->col->weight = 1;
	if (r < 0)
		error_prefix("calibration samples %llu-%llu (%zu stacked into one batch)", (unsigned long long)lo + 1,
			     (unsigned long long)hi + 1, n);
	return r;
}

/* read the samples of u, then run them in order: the first that joins
 * the batch runs it (with every other one that joins), the others alone.
 * A sample that cannot be read ends the range there. */
static void run_unit(Worker *w, Unit *u)
{
	Pass *p = w->sh->p;
	size_t nread = 0;
	int bad = 0;
	while (nread < u->n && !bad)
		bad = read_sample(w, u, nread++) < 0;
	char *err = bad ? xstrdup(errmsg()) : NULL;
	size_t ok = nread - (size_t)bad;
	int batched = 0, r = 0;
	for (size_t k = 0; r == 0 && k < ok; k++) {
		uint64_t idx = u->first + k;
		if (!joins(p, u->ref, &u->held[k])) {
			run_begins(w->col);
			r = interp_run_sample(w->ip, u->held[k].tl.n, u->held[k].tl.t, 0, NULL);
			if (r < 0)
				error_prefix("calibration sample %llu", (unsigned long long)idx + 1);
		} else if (!batched++) {
			r = run_batch(w, u, ok);
		}
		if (r < 0)
			fail_unit(w->sh, idx);
	}
	if (r == 0 && err) {
		pthread_mutex_lock(&w->sh->lock);
		fail_at(w->sh, u->first + ok, err);
		pthread_mutex_unlock(&w->sh->lock);
	}
	free(err);
	for (size_t k = 0; k < nread; k++)
		held_free(&u->held[k]);
}

static void *work(void *arg)
{
	Worker *w = arg;
	/* a worker plans its own interpreter, beside the probe and the
	 * others' work (plan time constant folding took silero-vad 7 ms);
	 * one that cannot leaves its share to the others */
	if (!w->ip) {
		InterpOpts o = {.threads = 1, .tap = tap, .tap_ud = w->col};
		w->ip = interp_new(w->sh->p->m, &o);
	}
	Unit *u = xcalloc(1, sizeof *u);
	while (w->ip && take_unit(w, u)) {
		run_unit(w, u);
		crew_left(w->sh, NULL);
	}
	free(u);
	if (w->num)
		crew_left(w->sh, w);
	return NULL;
}

/* a worker's collector: its own statistics (names borrowed from main's)
 * and scratch, main's read-only tables */
static void collector_clone(Collector *c, const Collector *main)
{
	const CalibStats *s = main->s;
	CalibStats *ws = xcalloc(1, sizeof *ws);
	ws->n = s->n;
	ws->nbins = s->nbins;
	ws->index = s->index; /* the same names in the same order */
	ws->t = xcalloc(s->n ? s->n : 1, sizeof *ws->t);
	for (size_t i = 0; i < s->n; i++)
		ws->t[i].name = s->t[i].name;
	*c = (Collector){.s = ws, .weight = 1, .konst = main->konst, .fixed = main->fixed, .alias = main->alias,
			 .relu = main->relu, .shape0 = main->shape0};
	c->last = xcalloc(s->n ? s->n : 1, sizeof *c->last);
	c->fixed_w = xcalloc(s->n ? s->n : 1, sizeof *c->fixed_w);
	c->idx = xmalloc(CHUNK * sizeof *c->idx);
	c->sub = main->sub ? xcalloc(SUBHIST * (s->nbins + SPARE), sizeof *c->sub) : NULL;
}

static void collector_unclone(Collector *c)
{
	if (!c->s)
		return;
	for (size_t i = 0; i < c->s->n; i++)
		free(c->s->t[i].hist);
	free(c->s->t);
	free(c->s);
	free(c->fixed_w);
	free(c->last);
	free(c->idx);
	free(c->sub);
	memset(c, 0, sizeof *c);
}

/* widen t's histogram to range r (a power of two, 0 or at least t's) */
static void widen_to(TensorStats *t, uint32_t nb, double r)
{
	if (r > 0)
		widen(t, nb, r / 2);
}

/* add the statistics of src (taken by another collector) to dst */
static void merge_stats(const CalibStats *s, TensorStats *dst, TensorStats *src)
{
	uint32_t nb = s->nbins;
	dst->nonfinite += src->nonfinite;
	if (!src->count)
		return;
	dst->min = dst->count && dst->min < src->min ? dst->min : src->min;
	dst->max = dst->count && dst->max > src->max ? dst->max : src->max;
	dst->count += src->count;
	double r = fmax(dst->range, src->range);
	widen_to(dst, nb, r);
	widen_to(src, nb, r);
	if (!nb || !src->hist)
		return;
	if (!dst->hist) {
		dst->hist = src->hist;
		src->hist = NULL;
		return;
	}
	for (uint32_t b = 0; b < nb; b++)
		dst->hist[b] += src->hist[b];
}

/* add the statistics w (a clone of main's) took to main's */
static void collector_merge(Collector *main, Collector *w)
{
	const CalibStats *s = main->s;
	for (size_t i = 0; w->s && i < s->n; i++) {
		TensorStats *dst = &s->t[i], *src = &w->s->t[i];
		if (!main->fixed[i]) {
			merge_stats(s, dst, src);
			continue;
		}
		/* the statistics of one run, counted fixed_w times: taken
		 * from w if main has none (a move) */
		if (!main->fixed_w[i] && w->fixed_w[i])
			merge_stats(s, dst, src);
		main->fixed_w[i] += w->fixed_w[i];
	}
}

enum { AHEAD_YES, AHEAD_NO, AHEAD_WAIT };

/* QUANTMAKE_CALIB_AHEAD: 0 keeps the crew from running units before the
 * probe has decided (to compare), wait holds the probe's decision until
 * the crew has run them all (for tests); otherwise they run ahead */
static int ahead(void)
{
	const char *e = getenv("QUANTMAKE_CALIB_AHEAD");
	return !e ? AHEAD_YES : !strcmp(e, "0") ? AHEAD_NO : !strcmp(e, "wait") ? AHEAD_WAIT : AHEAD_YES;
}

/* start the crew of p: up to p->workers threads with the calling one (no
 * more than there are CPUs, nor units left (units, when known), nor
 * interpreters WORKER_BYTES holds, by the activations seen so far); the
 * others wait for units. From now on the main interpreter runs its
 * kernels on one thread if there are others. */
/* n interpreters, no more than units (when known) nor what WORKER_BYTES
 * holds by the activations seen so far */
static size_t crew_fit(const Pass *p, size_t n, size_t units)
{
	size_t weights, live;
	if (units < n)
		n = units ? units : 1;
	interp_stats(p->ip, &weights, &live);
	size_t fit = 1 + WORKER_BYTES / (weights + live + 1);
	return n > fit ? fit : n;
}

static void crew_start(Pass *p, size_t units)
{
	if (p->crew)
		return;
	size_t n = p->workers > 1 ? (size_t)p->workers : 1;
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	if (ncpu > 0 && n > (size_t)ncpu)
		n = (size_t)ncpu;
	n = crew_fit(p, n, units);
	Crew *c = xcalloc(1, sizeof *c);
	c->n = n;
	c->w = xcalloc(n, sizeof *c->w);
	c->sh = (Shared){.p = p, .it = p->it, .keep = n, .err_at = UINT64_MAX};
	pthread_mutex_init(&c->sh.lock, NULL);
	pthread_cond_init(&c->sh.wake, NULL);
	pthread_cond_init(&c->sh.idle, NULL);
	c->w[0] = (Worker){.sh = &c->sh, .ip = p->ip, .col = p->col};
	c->threads = interp_threads(p->ip);
	if (n > 1)
		interp_set_threads(p->ip, 1);
	for (size_t k = 1; k < n; k++) {
		c->w[k].sh = &c->sh;
		c->w[k].num = k;
		c->w[k].col = &c->w[k].own;
		collector_clone(c->w[k].col, p->col);
		c->w[k].started = pthread_create(&c->w[k].tid, NULL, work, &c->w[k]) == 0;
		c->sh.alive += c->w[k].started;
	}
	p->crew = c;
}

/* PROBING, the first sample run: the batch size is known, so the crew
 * (started now if need be) may run the units after the probe's batch,
 * speculatively */
static void crew_speculate(Pass *p)
{
	size_t count = samples_count(p->it);
	if (p->workers < 2 || count <= p->bmax)
		return;
	crew_start(p, SIZE_MAX);
	Shared *sh = &p->crew->sh;
	if (p->crew->n < 2 || ahead() == AHEAD_NO)
		return;
	keep_ref(p);
	pthread_mutex_lock(&sh->lock);
	sh->unit = p->bmax;
	sh->next = p->bmax;
	sh->ref = &p->ref;
	sh->spec = 1;
	pthread_cond_broadcast(&sh->wake);
	pthread_mutex_unlock(&sh->lock);
}

/* QUANTMAKE_CALIB_AHEAD=wait: before the probe decides, the crew runs
 * every unit after its batch (so that tests see both decisions over whole
 * speculative runs, whatever the timing) */
static void crew_hold(Pass *p)
{
	Shared *sh = &p->crew->sh;
	size_t count = samples_count(sh->it);
	if (ahead() != AHEAD_WAIT)
		return;
	pthread_mutex_lock(&sh->lock);
	while (sh->spec && sh->alive && (sh->busy || (sh->next < count && !sh->done)))
		pthread_cond_wait(&sh->idle, &sh->lock);
	if (p->log)
		fprintf(p->log, "calibrate: %zu units ran ahead of the probe\n", sh->ahead);
	pthread_mutex_unlock(&sh->lock);
}

/* the probe found no batch: once the units running are done, throw away
 * everything the crew counted (all of it speculative) and its failures */
static void crew_discard(Pass *p)
{
	Crew *c = p->crew;
	if (!c || !c->sh.spec)
		return;
	Shared *sh = &c->sh;
	crew_hold(p);
	pthread_mutex_lock(&sh->lock);
	sh->unit = 0;
	sh->spec = 0;
	sh->ref = NULL;
	while (sh->busy)
		pthread_cond_wait(&sh->idle, &sh->lock);
	for (size_t k = 1; k < c->n; k++) {
		collector_unclone(&c->w[k].own);
		collector_clone(&c->w[k].own, p->col);
	}
	sh->done = 0;
	sh->err_at = UINT64_MAX;
	free(sh->err);
	sh->err = NULL;
	pthread_mutex_unlock(&sh->lock);
}

/* send the crew home: wait for the threads, merge what they counted (a
 * worker that could not start left its share to the others), restore
 * the main interpreter's threads. -1 after error() if a unit failed and
 * report is set (not when the probe failed, its error stands). */
static int crew_end(Pass *p, int report)
{
	Crew *c = p->crew;
	if (!c)
		return 0;
	if (c->sh.spec) /* the probe failed */
		crew_hold(p);
	pthread_mutex_lock(&c->sh.lock);
	c->sh.keep = 0;
	pthread_cond_broadcast(&c->sh.wake);
	pthread_mutex_unlock(&c->sh.lock);
	for (size_t k = 1; k < c->n; k++) {
		if (c->w[k].started)
			pthread_join(c->w[k].tid, NULL);
		collector_merge(p->col, &c->w[k].own);
		if (c->w[k].ip)
			interp_free(c->w[k].ip);
		collector_unclone(&c->w[k].own);
	}
	interp_set_threads(p->ip, c->threads);
	int r = report && c->sh.err_at != UINT64_MAX ? error("%s", c->sh.err) : 0;
	free(c->sh.err);
	pthread_mutex_destroy(&c->sh.lock);
	pthread_cond_destroy(&c->sh.wake);
	pthread_cond_destroy(&c->sh.idle);
	free(c->w);
	free(c);
	p->crew = NULL;
	return r;
}

/* the samples after the first *idx, in units (see above), on the crew
 * (started now if it is not yet); as many workers as crew_start would
 * start now carry on, the others leave after their unit */
static int run_units(Pass *p, uint64_t *idx)
{
	size_t count = samples_count(p->it), unit = p->mode == BATCHED ? p->bmax : 1;
	size_t units = (count - *idx + unit - 1) / unit;
	crew_start(p, units);
	Crew *c = p->crew;
	Shared *sh = &c->sh;
	size_t nw = crew_fit(p, c->n, units);
	if (sh->spec)
		crew_hold(p);
	pthread_mutex_lock(&sh->lock);
	sh->keep = nw;
	if (!sh->unit) {
		sh->unit = unit;
		sh->next = *idx;
		sh->ref = p->mode == BATCHED ? &p->ref : NULL;
	}
	sh->spec = 0;
	pthread_cond_broadcast(&sh->wake);
	pthread_mutex_unlock(&sh->lock);
	if (nw > 1 && p->log)
		fprintf(p->log, "calibrate: %zu workers side by side\n", nw);
	/* alone, the interpreter keeps its threads for its kernels */
	if (nw < 2)
		interp_set_threads(p->ip, c->threads);
	work(&c->w[0]);
	pthread_mutex_lock(&sh->lock);
	*idx = sh->next;
	pthread_mutex_unlock(&sh->lock);
	return crew_end(p, 1);
}

/* per tensor of s: the tensor whose elements it holds, moved, or SIZE_MAX.
 * Aliases of aliases lead to the first tensor. */
static size_t *find_aliases(const Model *m, const CalibStats *s)
{
	static const char *const movers[] = {"Flatten", "Identity", "Reshape", "Squeeze", "Transpose", "Unsqueeze"};
	const Onnx__GraphProto *g = m->proto->graph;
	size_t *alias = xmalloc((s->n ? s->n : 1) * sizeof *alias);
	for (size_t i = 0; i < s->n; i++)
		alias[i] = SIZE_MAX;
	for (size_t i = 0; i < g->n_node; i++) {
		const Onnx__NodeProto *nd = g->node[i];
		int mover = 0;
		for (size_t k = 0; k < ARRAY_LEN(movers); k++)
			mover |= nd->op_type && !strcmp(nd->op_type, movers[k]);
		if (!mover || (nd->domain && *nd->domain) || nd->n_input < 1 || nd->n_output != 1 || !nd->input[0] ||
		    !nd->output[0])
			continue;
		const TensorStats *in = calib_find(s, nd->input[0]), *out = calib_find(s, nd->output[0]);
		/* an input with an initializer is not tapped: count the output */
		for (size_t k = 0; in && k < g->n_initializer; k++)
			if (g->initializer[k]->name && !strcmp(g->initializer[k]->name, nd->input[0]))
				in = NULL;
		if (in && out && in != out)
			alias[out - s->t] = (size_t)(in - s->t);
	}
	/* follow chains (a cycle cannot occur in a valid graph; stop anyway) */
	for (size_t i = 0; i < s->n; i++)
		for (size_t hops = 0; alias[i] != SIZE_MAX && alias[alias[i]] != SIZE_MAX && hops < s->n; hops++)
			alias[i] = alias[alias[i]];
	for (size_t i = 0; i < s->n; i++)
		if (alias[i] != SIZE_MAX && alias[alias[i]] != SIZE_MAX)
			alias[i] = SIZE_MAX; /* a cycle: count it itself */
	return alias;
}

/* dst's statistics are src's */
static void copy_stats(const CalibStats *s, TensorStats *dst, const TensorStats *src)
{
	dst->count = src->count;
	dst->nonfinite = src->nonfinite;
	dst->min = src->min;
	dst->max = src->max;
	dst->range = src->range;
	free(dst->hist);
	dst->hist = NULL;
	if (src->hist) {
		dst->hist = xmalloc(s->nbins * sizeof *dst->hist);
		memcpy(dst->hist, src->hist, s->nbins * sizeof *dst->hist);
	}
}

/* append the names g defines to v: the inputs of a subgraph (depth > 0)
 * and every node output, in g and the subgraphs of its nodes (If branches,
 * Loop and Scan bodies: the interpreter's tap fires inside them) */
static void scope_names(const Onnx__GraphProto *g, int depth, PtrVec *v)
{
	for (size_t i = 0; depth && i < g->n_input; i++)
		if (g->input[i]->name && *g->input[i]->name)
			pv_push(v, g->input[i]->name);
	for (size_t i = 0; i < g->n_node; i++) {
		const Onnx__NodeProto *n = g->node[i];
		for (size_t k = 0; k < n->n_output; k++)
			if (n->output[k] && *n->output[k])
				pv_push(v, n->output[k]);
		for (size_t a = 0; a < n->n_attribute; a++) {
			if (n->attribute[a]->g)
				scope_names(n->attribute[a]->g, depth + 1, v);
			for (size_t k = 0; k < n->attribute[a]->n_graphs; k++)
				scope_names(n->attribute[a]->graphs[k], depth + 1, v);
		}
	}
}

/* the outputs of nodes without inputs (Constant ...), in every scope: they
 * run once per batch, so they count with the batch's weight */
static void mark_konst(const CalibStats *s, const Onnx__GraphProto *g, char *konst)
{
	for (size_t i = 0; i < g->n_node; i++) {
		const Onnx__NodeProto *n = g->node[i];
		for (size_t k = 0; !n->n_input && k < n->n_output; k++) {
			const TensorStats *ts = n->output[k] ? calib_find(s, n->output[k]) : NULL;
			if (ts)
				konst[ts - s->t] = 1;
		}
		for (size_t a = 0; a < n->n_attribute; a++) {
			if (n->attribute[a]->g)
				mark_konst(s, n->attribute[a]->g, konst);
			for (size_t k = 0; k < n->attribute[a]->n_graphs; k++)
				mark_konst(s, n->attribute[a]->graphs[k], konst);
		}
	}
}

/* operators whose result is not a function of their inputs (as in the
 * interpreter's constant folding) */
static int nondeterministic(const Onnx__NodeProto *n)
{
	static const char *const ops[] = {
		"Bernoulli", "Dropout", "Multinomial", "RandomNormal", "RandomNormalLike",
		"RandomUniform", "RandomUniformLike",
	};
	for (size_t i = 0; i < ARRAY_LEN(ops); i++)
		if (n->op_type && !strcmp(n->op_type, ops[i]))
			return 1;
	return 0;
}

static int cmp_name(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* is input name of a node of g a constant: a fixed tensor, or an
 * initializer of g or an enclosing graph (inits, sorted) that is no graph
 * input (a default the caller may override) and no name of a node output
 * or subgraph input anywhere (shadowing: not trusted) */
static int const_input(const CalibStats *s, const Onnx__GraphProto *g, const PtrVec *inits,
		       const char *fixed, const char *name)
{
	const TensorStats *ts = calib_find(s, name);
	if (ts)
		return fixed[ts - s->t];
	for (size_t i = 0; i < g->n_input; i++)
		if (g->input[i]->name && !strcmp(g->input[i]->name, name))
			return 0;
	return inits->n && bsearch(&name, inits->v, inits->n, sizeof *inits->v, cmp_name) != NULL;
}

/* mark in fixed the outputs of g's nodes (and of its subgraphs' nodes)
 * that are deterministic functions of constants only, the nodes the
 * interpreter may fold: their values are the same in every run. inits
 * holds the initializer names visible from enclosing graphs. Nodes are
 * taken in file order (a node listed before its producer is not marked:
 * a missed constant only costs time). */
static void mark_fixed(const CalibStats *s, const Onnx__GraphProto *g, const PtrVec *outer, char *fixed)
{
	PtrVec inits = {0};
	for (size_t i = 0; outer && i < outer->n; i++)
		pv_push(&inits, outer->v[i]);
	for (size_t i = 0; i < g->n_initializer; i++) {
		const char *name = g->initializer[i]->name;
		int input = 0;
		for (size_t k = 0; name && k < g->n_input; k++)
			input |= g->input[k]->name && !strcmp(g->input[k]->name, name);
		if (name && *name && !input)
			pv_push(&inits, (void *)name);
	}
	if (inits.n > 1)
		qsort(inits.v, inits.n, sizeof *inits.v, cmp_name);
	for (size_t i = 0; i < g->n_node; i++) {
		const Onnx__NodeProto *n = g->node[i];
		int ok = !nondeterministic(n);
		for (size_t a = 0; a < n->n_attribute; a++) {
			if (n->attribute[a]->g) {
				mark_fixed(s, n->attribute[a]->g, &inits, fixed);
				ok = 0;
			}
			for (size_t k = 0; k < n->attribute[a]->n_graphs; k++)
				mark_fixed(s, n->attribute[a]->graphs[k], &inits, fixed);
			ok &= !n->attribute[a]->n_graphs;
		}
		for (size_t k = 0; ok && k < n->n_input; k++)
			ok = !n->input[k] || !*n->input[k] || const_input(s, g, &inits, fixed, n->input[k]);
		for (size_t k = 0; ok && k < n->n_output; k++) {
			const TensorStats *ts = n->output[k] ? calib_find(s, n->output[k]) : NULL;
			if (ts)
				fixed[ts - s->t] = 1;
		}
	}
	pv_free(&inits);
}

/* the names of g's initializers and its subgraphs', to v */
static void init_names(const Onnx__GraphProto *g, PtrVec *v)
{
	for (size_t i = 0; i < g->n_initializer; i++)
		if (g->initializer[i]->name)
			pv_push(v, g->initializer[i]->name);
	for (size_t i = 0; i < g->n_node; i++)
		for (size_t a = 0; a < g->node[i]->n_attribute; a++) {
			const Onnx__AttributeProto *at = g->node[i]->attribute[a];
			if (at->g)
				init_names(at->g, v);
			for (size_t k = 0; k < at->n_graphs; k++)
				init_names(at->graphs[k], v);
		}
}

/* relu[i] = the tensor Relu nodes of g (and its subgraphs) make tensor i
 * from; inits: every initializer name, sorted (a Relu of one is not
 * tapped, and its name may be a node output's elsewhere) */
static void mark_relus(const CalibStats *s, const Onnx__GraphProto *g, const PtrVec *inits, size_t *relu)
{
	for (size_t i = 0; i < g->n_node; i++) {
		const Onnx__NodeProto *n = g->node[i];
		for (size_t a = 0; a < n->n_attribute; a++) {
			if (n->attribute[a]->g)
				mark_relus(s, n->attribute[a]->g, inits, relu);
			for (size_t k = 0; k < n->attribute[a]->n_graphs; k++)
				mark_relus(s, n->attribute[a]->graphs[k], inits, relu);
		}
		int onnx = !n->domain || !*n->domain || !strcmp(n->domain, "ai.onnx");
		if (!n->op_type || strcmp(n->op_type, "Relu") || !onnx || n->n_input != 1 || n->n_output != 1 ||
		    !n->input[0] || !n->output[0])
			continue;
		const TensorStats *in = calib_find(s, n->input[0]), *out = calib_find(s, n->output[0]);
		if (in && out && in != out &&
		    !(inits->n && bsearch(&n->input[0], inits->v, inits->n, sizeof *inits->v, cmp_name)))
			relu[out - s->t] = (size_t)(in - s->t);
	}
}

/* per tensor of s: the tensor a Relu makes it from, or SIZE_MAX */
static size_t *find_relus(const Model *m, const CalibStats *s)
{
	size_t *relu = xmalloc((s->n ? s->n : 1) * sizeof *relu);
	for (size_t i = 0; i < s->n; i++)
		relu[i] = SIZE_MAX;
	PtrVec inits = {0};
	init_names(m->proto->graph, &inits);
	if (inits.n > 1)
		qsort(inits.v, inits.n, sizeof *inits.v, cmp_name);
	mark_relus(s, m->proto->graph, &inits, relu);
	pv_free(&inits);
	return relu;
}

int calib_collect(Model *m, const char *const *specs, size_t nspecs, int threads, int hist, FILE *log,
		  CalibStats **out)
{
	CalibStats *s = xcalloc(1, sizeof *s);
	s->nbins = hist ? CALIB_BINS : 0;
	const Onnx__GraphProto *g = m->proto->graph;
	PtrVec names = {0};
	for (size_t i = 0; i < g->n_input; i++)
		pv_push(&names, g->input[i]->name);
	scope_names(g, 0, &names);
	s->t = xcalloc(names.n ? names.n : 1, sizeof *s->t);
	for (size_t i = 0; i < names.n; i++)
		s->t[i].name = xstrdup(names.v[i]);
	size_t nnames = names.n, nshared = 0;
	const char *shared = NULL;
	pv_free(&names);
	s->n = 0;
	qsort(s->t, nnames, sizeof *s->t, cmp_stats);
	/* a name defined in two scopes (not SSA across subgraphs): the tap
	 * cannot tell the tensors apart, so neither is recorded */
	for (size_t i = 0; i < nnames; i++) {
		size_t j = i;
		while (j + 1 < nnames && !strcmp(s->t[j + 1].name, s->t[i].name))
			j++;
		if (j > i) {
			shared = shared ? shared : s->t[i].name;
			nshared++;
		} else
			s->t[s->n++] = s->t[i];
		for (size_t k = i + (j == i); k <= j; k++)
			if (s->t[k].name != shared)
				free(s->t[k].name);
		i = j;
	}
	if (nshared && log)
		fprintf(log, "calibrate: %zu tensor names are defined in several scopes (first: '%s'); they get no statistics\n",
			nshared, shared);
	free((char *)shared);
	StrMap index = {0};
	strmap_reserve(&index, s->n);
	for (size_t i = 0; i < s->n; i++)
		strmap_add(&index, s->t[i].name, NULL)->v.u = i;
	s->index = &index;
	Collector col = {.s = s, .weight = 1};
	col.konst = xcalloc(s->n ? s->n : 1, 1);
	mark_konst(s, g, col.konst);
	col.fixed = xcalloc(s->n ? s->n : 1, 1);
	col.fixed_w = xcalloc(s->n ? s->n : 1, sizeof *col.fixed_w);
	mark_fixed(s, g, NULL, col.fixed);
	col.idx = xmalloc(CHUNK * sizeof *col.idx);
	col.sub = hist ? xcalloc(SUBHIST * (s->nbins + SPARE), sizeof *col.sub) : NULL;
	col.shape0 = xcalloc(s->n ? s->n : 1, sizeof *col.shape0);
	for (size_t i = 0; i < s->n; i++)
		col.shape0[i].rank = -1;
	col.alias = find_aliases(m, s);
	col.relu = find_relus(m, s);
	col.last = xcalloc(s->n ? s->n : 1, sizeof *col.last);
	InterpOpts o = {.threads = threads, .tap = tap, .tap_ud = &col};
	SampleIter *it = NULL;
	Pass *p = NULL;
	Interp *ip = interp_new(m, &o);
	int r = ip ? 0 : -1;
	if (r == 0)
		r = samples_open(specs, nspecs, &it);
	if (r == 0 && samples_count(it) == 0)
		r = error("the calibration set is empty: quantize.calibration matches no sample");
	double t0 = now_sec();
	uint64_t rows = 0;
	if (r == 0) {
		p = xcalloc(1, sizeof *p);
		*p = (Pass){.m = m, .ip = ip, .col = &col, .log = log, .nin = interp_ninputs(ip),
			    .nout = interp_noutputs(ip), .bmax = 1, .workers = threads, .it = it};
		p->axis = xcalloc(p->nin ? p->nin : 1, sizeof *p->axis);
		p->rows_at = xcalloc(samples_count(it), sizeof *p->rows_at);
		p->mode = batchable(ip, p->axis) ? PROBING : ONE_AT_A_TIME;
		/* a shared float input is tapped once a batch: count it per
		 * sample, as a Constant */
		for (size_t i = 0; p->mode == PROBING && i < p->nin; i++) {
			const TensorStats *ts = calib_find(s, interp_input_name(ip, i));
			if (p->axis[i] < 0 && ts)
				col.konst[ts - s->t] = 1;
		}
		/* with more samples than a batch, the crew plans its
		 * interpreters beside the probe (see run_units) */
		if (samples_count(it) > MAX_BATCH)
			crew_start(p, SIZE_MAX);
		r = run_pass(p);
		crew_end(p, 0); /* (after a failure in the probe) */
		for (uint64_t k = 0; r == 0 && k < s->nsamples; k++)
			rows += (uint64_t)p->rows_at[k];
		release_held(p);
		collector_unclone(&p->refcol);
		for (size_t i = 0; p->ref.by && i < p->nin; i++) {
			tensor_free((Tensor *)p->ref.by[i]);
			free((Tensor *)p->ref.by[i]);
		}
		free(p->ref.by);
		free(p->axis);
		free(p->rows_at);
		free(p);
	}
	for (size_t i = 0; r == 0 && i < s->n; i++)
		if (col.fixed_w[i] > 1)
			stats_scale(s, &s->t[i], col.fixed_w[i]);
	for (size_t i = 0; r == 0 && i < s->n; i++)
		if (col.alias[i] != SIZE_MAX)
			copy_stats(s, &s->t[i], &s->t[col.alias[i]]);
	if (r == 0 && log) {
		fprintf(log, "calibrate: %llu sample%s", (unsigned long long)s->nsamples, s->nsamples == 1 ? "" : "s");
		if (rows > s->nsamples)
			fprintf(log, " (%llu rows)", (unsigned long long)rows);
		fprintf(log, ", %zu tensors, %.2f s\n", s->n, now_sec() - t0);
	}
	if (it)
		samples_close(it);
	if (ip)
		interp_free(ip);
	free(col.idx);
	free(col.sub);
	free(col.shape0);
	free(col.konst);
	free(col.fixed);
	free(col.fixed_w);
	free(col.alias);
	free(col.relu);
	free(col.last);
	s->index = NULL;
	strmap_free(&index);
	if (r < 0) {
		calib_free(s);
		return -1;
	}
	/* keep only the float tensors that were seen */
	size_t k = 0;
	for (size_t i = 0; i < s->n; i++) {
		if (s->t[i].count || s->t[i].nonfinite) {
			if (!s->t[i].hist && s->nbins)
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

/* the error for t when it cannot be given a range, else 0 */
static int check_one(const TensorStats *t, uint64_t nsamples)
{
	if (!t->count && t->nonfinite)
		return error("calibration: tensor '%s' has no finite value (all %llu values seen in %llu samples are "
			     "NaN or infinite): check the calibration data (quantize.calibration)", t->name,
			     (unsigned long long)t->nonfinite, (unsigned long long)nsamples);
	if (t->count && !isfinite(t->max - t->min))
		return error("calibration: tensor '%s' spans [%g, %g], too wide for a finite scale: check the "
			     "calibration data (quantize.calibration)", t->name, (double)t->min, (double)t->max);
	return 0;
}

int calib_check(const CalibStats *s, const Model *m, FILE *log)
{
	const Onnx__GraphProto *g = m->proto->graph;
	for (size_t i = 0; i < g->n_input; i++) {
		const TensorStats *t = g->input[i]->name ? calib_find(s, g->input[i]->name) : NULL;
		if (t && check_one(t, s->nsamples) < 0)
			return -1;
	}
	for (size_t i = 0; i < s->n; i++)
		if (check_one(&s->t[i], s->nsamples) < 0)
			return -1;
	for (size_t i = 0; log && i < s->n; i++) {
		const TensorStats *t = &s->t[i];
		if (t->nonfinite)
			fprintf(log, "calibrate: warning: tensor '%s': %.3g%% of its values (%llu of %llu) are NaN or "
				"infinite; they are left out of its range\n", t->name,
				100.0 * (double)t->nonfinite / ((double)t->nonfinite + (double)t->count),
				(unsigned long long)t->nonfinite, (unsigned long long)(t->nonfinite + t->count));
	}
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
	if (rd.bad || s->nbins > (1u << 20) || n > len / 8) {
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
		t->hist = s->nbins ? xmalloc((size_t)s->nbins * sizeof *t->hist) : NULL;
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
	/* only the bins the values reach, [-e w, e w) with e w just above the
	 * largest magnitude, as onnxruntime's histogram over [-max, max]: the
	 * stored range is a power of two, up to twice that */
	const size_t nq = 128, full = s->nbins;
	double w = 2 * t->range / (double)full, mag = fmax(-(double)t->min, (double)t->max);
	size_t e = (size_t)(mag / w) + 1;
	e = e < nq / 2 ? nq / 2 : e > full / 2 ? full / 2 : e;
	const uint64_t *h = t->hist + full / 2 - e;
	const size_t nb = 2 * e, zero = e;
	double a = (double)e * w;
	double *p = xmalloc(nb * sizeof *p), *q = xmalloc(nb * sizeof *q);
	double best = INFINITY;
	size_t besti = zero;
	for (size_t i = nq / 2; i <= zero; i++) {
		size_t start = zero - i, end = zero + i + 1 < nb ? zero + i + 1 : nb, len = end - start;
		uint64_t left = 0, right = 0;
		for (size_t k = 0; k < start; k++)
			left += h[k];
		for (size_t k = end; k < nb; k++)
			right += h[k];
		for (size_t k = 0; k < len; k++)
			p[k] = (double)h[start + k];
		p[0] += (double)left;
		p[len - 1] += (double)right;
		size_t merged = len / nq;
		for (size_t k = 0; k < len; k++)
			q[k] = 0;
		for (size_t b = 0; b < nq; b++) {
			size_t s0 = b * merged, e0 = b == nq - 1 ? len : s0 + merged;
			double sum = 0, nonzero = 0;
			for (size_t k = s0; k < e0; k++) {
				sum += (double)h[start + k];
				nonzero += h[start + k] != 0;
			}
			for (size_t k = s0; k < e0; k++)
				q[k] = nonzero && h[start + k] ? sum / nonzero : 0;
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
	if (method == CALIB_MINMAX || !t->count || !(t->range > 0) || !s->nbins || !t->hist)
		return; /* (no histograms: qr_check refuses other methods first) */
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
