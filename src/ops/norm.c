/* norm.c — BatchNormalization, LayerNormalization, InstanceNormalization,
 * GroupNormalization, LRN and MeanVarianceNormalization: inference and
 * kernels.
 *
 * Layer, instance and group normalization all normalize contiguous blocks of
 * the input (everything from axis on; one image channel; one group of
 * channels), so they share block_stats(); statistics accumulate in double
 * (one pass, shifted sums).
 * All compute in float32 on float, double, float16 and bfloat16 tensors. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops/nn.h"
#include "ops/op.h"
#include "ops/shapeutil.h"
#include "util.h"

/* The statistics and LayerNormalization's common case are written with GCC
 * vector extensions (16 floats, 8 doubles), cloned for AVX-512 and AVX2 where
 * the program loads: the same IEEE operations in the same order on every
 * path (no FMA contraction in ISO C mode), so every clone, and the scalar
 * tails, give the same bits. */
#define NORM_CLONES QM_CLONES("avx512f", "avx2", "default")
typedef float v8f __attribute__((vector_size(32)));
typedef float v16f __attribute__((vector_size(64)));
typedef double v8d __attribute__((vector_size(64)));

/* mean and 1/sqrt(variance + eps) of x[0..len), in one pass: sums of x - k
 * and (x - k)^2 in double, 8 lanes, shifted by k = x[0] so that a large
 * common offset does not cancel the variance away (x - k is exact in
 * double; the variance is E[(x-k)^2] - E[x-k]^2) */
NORM_CLONES static void block_stats(const float *x, int64_t len, double eps, float *mean, float *inv)
{
	double k = len ? x[0] : 0.0;
	v8d s = {0}, q = {0}, kv = {k, k, k, k, k, k, k, k};
	int64_t i = 0;
	for (; i + 8 <= len; i += 8) {
		v8f f;
		memcpy(&f, x + i, sizeof f);
		v8d d = __builtin_convertvector(f, v8d) - kv;
		s += d;
		q += d * d;
	}
	double st = ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
	double qt = ((q[0] + q[1]) + (q[2] + q[3])) + ((q[4] + q[5]) + (q[6] + q[7]));
	for (; i < len; i++) {
		double d = x[i] - k;
		st += d;
		qt += d * d;
	}
	double ms = len ? st / (double)len : 0.0;
	double v = len ? qt / (double)len - ms * ms : 0.0;
	*mean = (float)(ms + k);
	*inv = (float)(1.0 / sqrt((v > 0 ? v : 0.0) + eps));
}

/* y = (x - m) * inv * s + b for 16 values (b may be NULL); inlined into
 * each clone of layernorm_row (no vector crosses a call) */
static inline __attribute__((always_inline)) void layernorm16(const float *x, const float *s, const float *b,
							      float m, float inv, float *y)
{
	v16f xv, sv, bv, mv = {0}, iv = {0};
	memcpy(&xv, x, sizeof xv);
	memcpy(&sv, s, sizeof sv);
	mv += m;
	iv += inv;
	v16f v = (xv - mv) * iv * sv;
	if (b) {
		memcpy(&bv, b, sizeof bv);
		v = v + bv;
	}
	memcpy(y, &v, sizeof v);
}

/* y = (x - m) * inv * s + b over [0, n) with contiguous s and b (b may be
 * NULL); the tail goes through the same code on zero-padded copies */
NORM_CLONES static void layernorm_row(const float *x, const float *s, const float *b, int64_t n,
				      float m, float inv, float *y)
{
	int64_t i = 0;
	for (; i + 16 <= n; i += 16)
		layernorm16(x + i, s + i, b ? b + i : NULL, m, inv, y + i);
	if (i == n)
		return;
	float tx[16] = {0}, ts[16] = {0}, tb[16] = {0}, ty[16];
	size_t w = sizeof(float) * (size_t)(n - i);
	memcpy(tx, x + i, w);
	memcpy(ts, s + i, w);
	if (b)
		memcpy(tb, b + i, w);
	layernorm16(tx, ts, b ? tb : NULL, m, inv, ty);
	memcpy(y + i, ty, w);
}

/* free up to four float temporaries */
static void free4(float *a, float *b, float *c, float *d)
{
	free(a);
	free(b);
	free(c);
	free(d);
}

/* per-channel parameter p of a normalization must have n elements */
static int want_numel(RunCtx *c, const Tensor *t, int64_t n, const char *what)
{
	if (t->numel != n)
		return op_error(c->node, "%s has %lld elements, expected %lld", what, (long long)t->numel, (long long)n);
	if (!nn_is_float(t->dtype))
		return op_error(c->node, "%s has type %s, expected a floating-point type", what, dtype_name(t->dtype));
	return 0;
}

/* ---- BatchNormalization ---- */

static int batchnorm_infer(InferCtx *c)
{
	if (infer_same_as_input(c, 0, 0) < 0)
		return -1;
	const ValueType *x = c->in[0];
	const ValueType *mean = c->nin > 3 ? c->in[3] : NULL;
	for (size_t i = 1; i < c->nout; i++) {
		if (!c->out[i])
			continue;
		int elem = mean ? mean->elem : x->elem;
		vt_set_tensor(c->out[i], elem, 1);
		c->out[i]->dims[0] = x->rank >= 2 ? x->dims[1] : nn_dim(c, -1);
	}
	return 0;
}

static int batchnorm_run(RunCtx *c)
{
	if (c->nin < 5)
		return op_error(c->node, "expected 5 inputs, got %zu", c->nin);
	for (size_t i = 0; i < 5; i++)
		if (!c->in[i])
			return op_error(c->node, "input %zu is required", i);
	const Tensor *x = c->in[0];
	float eps, momentum;
	int64_t training = 0;
	if (attr_float(c->node, "epsilon", 1e-5f, &eps) < 0 || attr_float(c->node, "momentum", 0.9f, &momentum) < 0)
		return -1;
	if (c->opset >= 14 && attr_int(c->node, "training_mode", 0, &training) < 0)
		return -1;
	int want_stats = 0;
	for (size_t i = 1; i < c->nout; i++)
		if (c->out[i])
			want_stats = 1;
	if (want_stats && !training)
		return op_error(c->node, "BatchNormalization-%lld training outputs (mean, variance) are not supported%s",
				(long long)c->opset, c->opset >= 14 ? " without training_mode=1" : "");
	if (x->rank < 2)
		return op_error(c->node, "input must have rank 2 or more, got %d", x->rank);
	int64_t N = x->dims[0], C = x->dims[1], sp = 1;
	for (int i = 2; i < x->rank; i++)
		sp *= x->dims[i];
	for (size_t i = 1; i < 5; i++)
		if (want_numel(c, c->in[i], C, i == 1 ? "scale" : i == 2 ? "B" : i == 3 ? "mean" : "var") < 0)
			return -1;
	float *tx, *ts, *tb, *tm, *tv, *ty;
	const float *xf = nn_f32_in(c, x, &tx);
	if (!xf)
		return -1;
	const float *sf = nn_f32_in(c, c->in[1], &ts), *bf = nn_f32_in(c, c->in[2], &tb);
	const float *mf = nn_f32_in(c, c->in[3], &tm), *vf = nn_f32_in(c, c->in[4], &tv);
	float *y = nn_f32_out(c, 0, x->dtype, x->rank, x->dims, &ty);
	if (!y) {
		free4(tx, ts, tb, tm);
		free(tv);
		return -1;
	}
	float *bm = xmalloc(sizeof(float) * (size_t)(C ? 2 * C : 1)), *bv = bm + C;
	if (training) {
		for (int64_t ch = 0; ch < C; ch++) {
			double s = 0, q = 0, cnt = (double)(N * sp);
			for (int64_t n = 0; n < N; n++)
				for (int64_t i = 0; i < sp; i++)
					s += xf[(n * C + ch) * sp + i];
			double m = cnt > 0 ? s / cnt : 0;
			for (int64_t n = 0; n < N; n++)
				for (int64_t i = 0; i < sp; i++) {
					double d = xf[(n * C + ch) * sp + i] - m;
					q += d * d;
				}
			bm[ch] = (float)m;
			bv[ch] = (float)(cnt > 0 ? q / cnt : 0);
		}
	} else {
		memcpy(bm, mf, sizeof(float) * (size_t)C);
		memcpy(bv, vf, sizeof(float) * (size_t)C);
	}
	for (int64_t ch = 0; ch < C; ch++) {
		float a = sf[ch] / sqrtf(bv[ch] + eps), b = bf[ch] - bm[ch] * a;
		for (int64_t n = 0; n < N; n++) {
			const float *xp = xf + (n * C + ch) * sp;
			float *yp = y + (n * C + ch) * sp;
			for (int64_t i = 0; i < sp; i++)
				yp[i] = xp[i] * a + b;
		}
	}
	nn_f32_done(c->out[0], ty);
	int rc = 0;
	if (training) {
		/* outputs 1 and 2: running mean and variance */
		for (size_t o = 1; o < 3 && o < c->nout && rc == 0; o++) {
			if (!c->out[o])
				continue;
			const float *run = o == 1 ? mf : vf, *cur = o == 1 ? bm : bv;
			float *tr, *r = nn_f32_out(c, o, c->in[o + 2]->dtype, 1, &C, &tr);
			if (!r) {
				rc = -1;
				break;
			}
			for (int64_t ch = 0; ch < C; ch++)
				r[ch] = run[ch] * momentum + cur[ch] * (1.0f - momentum);
			nn_f32_done(c->out[o], tr);
		}
	}
	free(bm);
	free4(tx, ts, tb, tm);
	free(tv);
	return rc;
}

/* ---- LayerNormalization ---- */

static int layernorm_infer(InferCtx *c)
{
	int64_t axis, stash;
	if (infer_same_as_input(c, 0, 0) < 0 || attr_int(c->node, "axis", -1, &axis) < 0 ||
	    attr_int(c->node, "stash_type", 1, &stash) < 0)
		return -1;
	const ValueType *x = c->in[0];
	int64_t ax = 0;
	if (x->rank >= 0 && norm_axis(c->node, axis, x->rank, &ax) < 0)
		return -1;
	for (size_t i = 1; i < c->nout && i < 3; i++) {
		if (!c->out[i])
			continue;
		vt_set_tensor(c->out[i], (int)stash, x->rank);
		for (int d = 0; d < x->rank; d++)
			c->out[i]->dims[d] = d < ax ? x->dims[d] : (Dim){1, NULL};
	}
	return 0;
}

/* index map of a parameter p broadcast (numpy, right-aligned) to the trailing
 * dims[0..r) of size len: NULL when p has len elements already */
static int param_map(RunCtx *c, const Tensor *p, int r, const int64_t *dims, int64_t len,
		     const char *what, int64_t **map)
{
	*map = NULL;
	if (p->numel == len && p->rank <= r) {
		int same = 1;
		for (int i = 0; i < p->rank; i++)
			if (p->dims[p->rank - 1 - i] != dims[r - 1 - i])
				same = 0;
		if (same)
			return 0;
	}
	if (p->rank > r)
		return op_error(c->node, "%s has rank %d, more than the %d normalized dimensions", what, p->rank, r);
	int64_t st[QM_MAX_RANK];
	int64_t s = 1;
	for (int i = p->rank - 1; i >= 0; i--) {
		int j = r - p->rank + i;
		if (p->dims[i] != 1 && p->dims[i] != dims[j]) {
			char sa[128], sb[128];
			return op_error(c->node, "%s of shape %s does not broadcast to %s", what,
					shape_str(p->rank, p->dims, sa, sizeof sa), shape_str(r, dims, sb, sizeof sb));
		}
		st[i] = p->dims[i] == 1 ? 0 : s;
		s *= p->dims[i];
	}
	int64_t *m = xmalloc(sizeof(int64_t) * (size_t)(len ? len : 1));
	for (int64_t k = 0; k < len; k++) {
		int64_t rem = k, off = 0;
		for (int j = r - 1; j >= 0; j--) {
			int64_t ix = rem % dims[j];
			rem /= dims[j];
			int i = j - (r - p->rank);
			if (i >= 0)
				off += ix * st[i];
		}
		m[k] = off;
	}
	*map = m;
	return 0;
}

static int layernorm_run(RunCtx *c)
{
	const Tensor *x = c->in[0], *sc = c->nin > 1 ? c->in[1] : NULL, *bi = c->nin > 2 ? c->in[2] : NULL;
	int64_t axis, stash;
	float eps;
	if (!sc)
		return op_error(c->node, "input 1 (Scale) is required");
	if (attr_int(c->node, "axis", -1, &axis) < 0 || attr_float(c->node, "epsilon", 1e-5f, &eps) < 0 ||
	    attr_int(c->node, "stash_type", 1, &stash) < 0)
		return -1;
	if (norm_axis(c->node, axis, x->rank, &axis) < 0)
		return -1;
	if (!nn_is_float(sc->dtype) || (bi && !nn_is_float(bi->dtype)))
		return op_error(c->node, "Scale and B must be floating point");
	int64_t outer = 1, inner = 1;
	for (int i = 0; i < x->rank; i++)
		*(i < axis ? &outer : &inner) *= x->dims[i];
	int64_t *smap, *bmap = NULL;
	int r = x->rank - (int)axis;
	if (param_map(c, sc, r, x->dims + axis, inner, "Scale", &smap) < 0 ||
	    (bi && param_map(c, bi, r, x->dims + axis, inner, "B", &bmap) < 0)) {
		free(smap);
		return -1;
	}
	float *tx, *ts, *tb = NULL, *ty, *tm = NULL, *ti = NULL, *mo = NULL, *io = NULL;
	const float *xf = nn_f32_in(c, x, &tx), *sf = nn_f32_in(c, sc, &ts), *bf = NULL;
	if (bi)
		bf = nn_f32_in(c, bi, &tb);
	float *y = xf ? nn_f32_out(c, 0, x->dtype, x->rank, x->dims, &ty) : NULL;
	int64_t sdims[QM_MAX_RANK];
	for (int i = 0; i < x->rank; i++)
		sdims[i] = i < axis ? x->dims[i] : 1;
	int sdt = (int)stash;
	if (y && c->nout > 1 && c->out[1] && !(mo = nn_f32_out(c, 1, sdt, x->rank, sdims, &tm)))
		y = NULL;
	if (y && c->nout > 2 && c->out[2] && !(io = nn_f32_out(c, 2, sdt, x->rank, sdims, &ti)))
		y = NULL;
	if (!y) {
		free4(tx, ts, tb, tm);
		free(smap);
		free(bmap);
		return -1;
	}
	for (int64_t o = 0; o < outer; o++) {
		const float *xp = xf + o * inner;
		float *yp = y + o * inner, m, inv;
		block_stats(xp, inner, eps, &m, &inv);
		if (mo)
			mo[o] = m;
		if (io)
			io[o] = inv;
		if (!smap && !bmap) {
			layernorm_row(xp, sf, bf, inner, m, inv, yp);
			continue;
		}
		for (int64_t i = 0; i < inner; i++) {
			float v = (xp[i] - m) * inv * sf[smap ? smap[i] : i];
			yp[i] = bf ? v + bf[bmap ? bmap[i] : i] : v;
		}
	}
	nn_f32_done(c->out[0], ty);
	if (mo)
		nn_f32_done(c->out[1], tm);
	if (io)
		nn_f32_done(c->out[2], ti);
	free(tx);
	free(ts);
	free(tb);
	free(smap);
	free(bmap);
	return 0;
}

/* ---- InstanceNormalization, GroupNormalization ---- */

static int same_infer(InferCtx *c)
{
	return infer_same_as_input(c, 0, 0);
}

/* normalize x in N * G blocks, scale/bias indexed per channel (pc) or per group */
static int group_norm(RunCtx *c, int64_t G, int perchan, float eps)
{
	const Tensor *x = c->in[0];
	if (c->nin < 3 || !c->in[1] || !c->in[2])
		return op_error(c->node, "inputs scale and B are required");
	const Tensor *sc = c->in[1], *bi = c->in[2];
	if (x->rank < 2)
		return op_error(c->node, "input must have rank 2 or more, got %d", x->rank);
	int64_t N = x->dims[0], C = x->dims[1], sp = 1;
	for (int i = 2; i < x->rank; i++)
		sp *= x->dims[i];
	if (G < 1 || C % G)
		return op_error(c->node, "%lld channels cannot be split into %lld groups", (long long)C, (long long)G);
	int64_t np = perchan ? C : G;
	if (want_numel(c, sc, np, "scale") < 0 || want_numel(c, bi, np, "bias") < 0)
		return -1;
	float *tx, *ts, *tb, *ty;
	const float *xf = nn_f32_in(c, x, &tx);
	if (!xf)
		return -1;
	const float *sf = nn_f32_in(c, sc, &ts), *bf = nn_f32_in(c, bi, &tb);
	float *y = nn_f32_out(c, 0, x->dtype, x->rank, x->dims, &ty);
	if (!y) {
		free4(tx, ts, tb, NULL);
		return -1;
	}
	int64_t cg = C / G, len = cg * sp;
	for (int64_t n = 0; n < N; n++)
		for (int64_t g = 0; g < G; g++) {
			const float *xp = xf + (n * G + g) * len;
			float *yp = y + (n * G + g) * len, m, inv;
			block_stats(xp, len, eps, &m, &inv);
			for (int64_t k = 0; k < cg; k++) {
				int64_t pi = perchan ? g * cg + k : g;
				float a = inv * sf[pi], b = bf[pi] - m * a;
				for (int64_t i = 0; i < sp; i++)
					yp[k * sp + i] = xp[k * sp + i] * a + b;
			}
		}
	nn_f32_done(c->out[0], ty);
	free4(tx, ts, tb, NULL);
	return 0;
}

static int instancenorm_run(RunCtx *c)
{
	float eps;
	if (attr_float(c->node, "epsilon", 1e-5f, &eps) < 0)
		return -1;
	return group_norm(c, c->in[0]->rank >= 2 ? c->in[0]->dims[1] : 1, 1, eps);
}

static int groupnorm_run(RunCtx *c)
{
	float eps;
	int64_t G;
	if (attr_float(c->node, "epsilon", 1e-5f, &eps) < 0 || attr_int(c->node, "num_groups", 0, &G) < 0)
		return -1;
	if (!node_attr(c->node, "num_groups"))
		return op_error(c->node, "attribute 'num_groups' is required");
	int64_t C = c->in[0]->rank >= 2 ? c->in[0]->dims[1] : 0;
	/* opset 18 scales per group, 21 per channel */
	int perchan = c->opset >= 21 || (c->nin > 1 && c->in[1] && c->in[1]->numel == C && C != G);
	return group_norm(c, G, perchan, eps);
}

/* ---- LRN ---- */

static int lrn_run(RunCtx *c)
{
	const Tensor *x = c->in[0];
	float alpha, beta, bias;
	int64_t size;
	if (attr_float(c->node, "alpha", 1e-4f, &alpha) < 0 || attr_float(c->node, "beta", 0.75f, &beta) < 0 ||
	    attr_float(c->node, "bias", 1.0f, &bias) < 0 || attr_int(c->node, "size", 0, &size) < 0)
		return -1;
	if (size < 1)
		return op_error(c->node, "attribute 'size' is required and must be positive");
	if (x->rank < 2)
		return op_error(c->node, "input must have rank 2 or more, got %d", x->rank);
	int64_t N = x->dims[0], C = x->dims[1], sp = 1;
	for (int i = 2; i < x->rank; i++)
		sp *= x->dims[i];
	float *tx, *ty;
	const float *xf = nn_f32_in(c, x, &tx);
	float *y = xf ? nn_f32_out(c, 0, x->dtype, x->rank, x->dims, &ty) : NULL;
	if (!y) {
		free(tx);
		return -1;
	}
	int64_t lo = (size - 1) / 2, hi = size - 1 - lo;
	for (int64_t n = 0; n < N; n++)
		for (int64_t ch = 0; ch < C; ch++)
			for (int64_t i = 0; i < sp; i++) {
				float s = 0;
				for (int64_t k = ch - lo; k <= ch + hi; k++)
					if (k >= 0 && k < C) {
						float v = xf[(n * C + k) * sp + i];
						s += v * v;
					}
				int64_t at = (n * C + ch) * sp + i;
				y[at] = xf[at] / powf(bias + alpha / (float)size * s, beta);
			}
	nn_f32_done(c->out[0], ty);
	free(tx);
	return 0;
}

/* ---- MeanVarianceNormalization ---- */

static int mvn_run(RunCtx *c)
{
	const Tensor *x = c->in[0];
	const int64_t *axv;
	size_t nax;
	int64_t dflt[3] = {0, 2, 3};
	if (attr_ints(c->node, "axes", &axv, &nax) < 0)
		return -1;
	if (!axv) {
		axv = dflt;
		nax = 3;
	}
	int red[QM_MAX_RANK] = {0};
	for (size_t i = 0; i < nax; i++) {
		int64_t a;
		if (norm_axis(c->node, axv[i], x->rank, &a) < 0)
			return -1;
		red[a] = 1;
	}
	/* kept index of each element: row-major over the non-reduced dims */
	int64_t kept = 1;
	for (int i = 0; i < x->rank; i++)
		if (!red[i])
			kept *= x->dims[i];
	float *tx, *ty;
	const float *xf = nn_f32_in(c, x, &tx);
	float *y = xf ? nn_f32_out(c, 0, x->dtype, x->rank, x->dims, &ty) : NULL;
	if (!y) {
		free(tx);
		return -1;
	}
	int64_t *ki = xmalloc(sizeof(int64_t) * (size_t)(x->numel ? x->numel : 1));
	double *sum = xcalloc((size_t)(kept ? kept : 1), sizeof(double));
	double *sq = xcalloc((size_t)(kept ? kept : 1), sizeof(double));
	int64_t idx[QM_MAX_RANK] = {0};
	for (int64_t e = 0; e < x->numel; e++) {
		int64_t k = 0;
		for (int i = 0; i < x->rank; i++)
			if (!red[i])
				k = k * x->dims[i] + idx[i];
		ki[e] = k;
		sum[k] += xf[e];
		for (int i = x->rank - 1; i >= 0; i--) {
			if (++idx[i] < x->dims[i])
				break;
			idx[i] = 0;
		}
	}
	double cnt = kept ? (double)x->numel / (double)kept : 1.0;
	for (int64_t k = 0; k < kept; k++)
		sum[k] /= cnt;
	for (int64_t e = 0; e < x->numel; e++) {
		double d = xf[e] - sum[ki[e]];
		sq[ki[e]] += d * d;
	}
	for (int64_t k = 0; k < kept; k++)
		sq[k] = sqrt(sq[k] / cnt) + 1e-9;
	for (int64_t e = 0; e < x->numel; e++)
		y[e] = (float)((xf[e] - sum[ki[e]]) / sq[ki[e]]);
	nn_f32_done(c->out[0], ty);
	free(ki);
	free(sum);
	free(sq);
	free(tx);
	return 0;
}

OPERATOR(ai_onnx, BatchNormalization, 1, batchnorm_infer, batchnorm_run)
OPERATOR(ai_onnx, GroupNormalization, 18, same_infer, groupnorm_run)
OPERATOR(ai_onnx, InstanceNormalization, 1, same_infer, instancenorm_run)
OPERATOR(ai_onnx, LRN, 1, same_infer, lrn_run)
OPERATOR(ai_onnx, LayerNormalization, 17, layernorm_infer, layernorm_run)
OPERATOR(ai_onnx, MeanVarianceNormalization, 9, same_infer, mvn_run)
