/* unary.c — elementwise math on one tensor: Abs, Neg, Exp, Log, Sqrt,
 * Reciprocal, Floor, Ceil, Round, Sign, the trigonometric and hyperbolic
 * functions, Erf, IsNaN, IsInf, Not, BitwiseNot.
 *
 * Each kernel is one switch over the native types it accepts; the loop is
 * written once (UN_LOOP) and the math is type-generic (<tgmath.h>), so float
 * and double share one expression. float16/bfloat16 are computed in float32
 * (elem.h). Erf on float32 is explicit 16-lane vector code (erf_f32), and
 * so is Gelu's one pass (gelu_erf_f32, gelu.h), which shares its polynomial. */
/* FP exception flags and errno are never read: let GCC if-convert, inline
 * sqrt and vectorize the float loops (-ftrapping-math keeps compares as
 * branches, -fmath-errno keeps sqrt a libm call) */
#pragma GCC optimize("no-trapping-math", "no-math-errno")

#include <stdint.h>
#include <string.h>
#include <tgmath.h>

#include "ops/elem.h"
#include "ops/gelu.h"
#include "ops/op.h"
#include "ops/shapeutil.h"

/* a kernel: 0, or -1 when x's type is not supported (nothing reported) */
typedef int (*UnKern)(const Onnx__NodeProto *n, const Tensor *x, Tensor *y);

#define UNARY(fn, cases) \
ELEM_CLONES static int fn(const Onnx__NodeProto *n, const Tensor *x, Tensor *y) \
{ \
	switch (x->dtype) { \
	cases \
	default: return -1; \
	} \
	return 0; \
}

UNARY(k_abs, UN_FLOAT(fabs(v)) UN_SINT(v < 0 ? 0 - (uint64_t)v : (uint64_t)v) UN_UINT(v))
UNARY(k_neg, UN_FLOAT(-v) UN_SINT(0 - (uint64_t)v))
UNARY(k_exp_fast, UN_F32(qm_expf(v)) UN_F64(exp(v)))

/* exp: the vectorized float32 function, then libm where it clamps */
static int k_exp(const Onnx__NodeProto *n, const Tensor *x, Tensor *y)
{
	if (k_exp_fast(n, x, y) < 0)
		return -1;
	if (x->dtype == DT_FLOAT) {
		const float *px = x->data;
		float *py = y->data;
		for (int64_t i = 0; i < x->numel; i++)
			if (px[i] > 88.0f || px[i] < -87.3f)
				py[i] = exp(px[i]);
	}
	return 0;
}
UNARY(k_log, UN_FLOAT(log(v)))
UNARY(k_sqrt, UN_FLOAT(sqrt(v)))
UNARY(k_reciprocal, UN_FLOAT(1 / v))
UNARY(k_floor, UN_FLOAT(floor(v)))
UNARY(k_ceil, UN_FLOAT(ceil(v)))
UNARY(k_round, UN_FLOAT(rint(v)))  /* half to even in the default rounding mode */
UNARY(k_sign, UN_FLOAT(v > 0 ? 1 : v < 0 ? -1 : v) UN_SINT((v > 0) - (v < 0)) UN_UINT(v > 0))
UNARY(k_sin, UN_FLOAT(sin(v)))
UNARY(k_cos, UN_FLOAT(cos(v)))
UNARY(k_tan, UN_FLOAT(tan(v)))
UNARY(k_asin, UN_FLOAT(asin(v)))
UNARY(k_acos, UN_FLOAT(acos(v)))
UNARY(k_atan, UN_FLOAT(atan(v)))
UNARY(k_sinh, UN_FLOAT(sinh(v)))
UNARY(k_cosh, UN_FLOAT(cosh(v)))
UNARY(k_asinh, UN_FLOAT(asinh(v)))
UNARY(k_acosh, UN_FLOAT(acosh(v)))
UNARY(k_atanh, UN_FLOAT(atanh(v)))
UNARY(k_erf64, UN_F64(erf(v)))

/* Erf on float32: qm_erff (elem.h) written with GCC vector extensions, 16
 * lanes, cloned for AVX-512 and AVX2: the same operations in the same order
 * as qm_erff, so every clone and the zero-padded tail give qm_erff's bits.
 * Measured against erf() in double on all 2^32 floats: max error 3.7e-7
 * absolute, 6.2 ulp of the result, at 0.502 (where Abramowitz-Stegun 7.1.26
 * takes over from the series); NaN stays NaN, +-inf give +-1. */
#define ERF_CLONES QM_CLONES("avx512f", "avx2", "default")
typedef float v16f __attribute__((vector_size(64)));
typedef int32_t v16i __attribute__((vector_size(64)));
typedef uint32_t v16u __attribute__((vector_size(64)));

/* m ? a : b lane by lane, m all ones or zero (a comparison's result) */
#define SEL16(m, a, b) ((v16f)(((m) & (v16i)(a)) | (~(m) & (v16i)(b))))

/* (through pointers: vectors passed by value change the ABI per clone) */
static inline __attribute__((always_inline)) void erf16v(const v16f *xp, v16f *out)
{
	v16f xv = *xp, c = {0};
	v16i z = {0}, sign = (v16i)xv & (z + INT32_MIN);
	v16f a = (v16f)((v16i)xv & ~sign);
	v16f a2 = a * a;
	v16f small = (c + 1.12837916709551257f) * a * (1.0f + a2 * (-0.333333333f + a2 * (0.1f +
		     a2 * (-0.0238095238f + a2 * (0.00462962963f + a2 * -0.000757575758f)))));
	v16f t = 1.0f / (1.0f + 0.3275911f * a);
	v16f p = ((((1.061405429f * t - 1.453152027f) * t + 1.421413741f) * t - 0.284496736f) * t +
		  0.254829592f) * t;
	/* qm_expf(-a2) */
	v16f e = -a2;
	e = SEL16(e < -87.3f, c - 87.3f, e);
	e = SEL16(e > 88.0f, c + 88.0f, e);
	const float magic = 12582912.0f;
	v16f et = e * 1.44269504088896341f + magic;
	v16f en = et - magic;
	v16f r = e - en * 0.693145751953125f - en * 1.428606765330187e-06f;
	v16f ep = (c + 1.9875691500e-4f) * r + 1.3981999507e-3f;
	ep = ep * r + 8.3334519073e-3f;
	ep = ep * r + 4.1665795894e-2f;
	ep = ep * r + 1.6666665459e-1f;
	ep = ep * r + 5.0000001201e-1f;
	v16f ey = ep * r * r + r + 1.0f;
	ey = ey * (v16f)(((v16u)et - 0x4B400000u + 127u) << 23);
	v16f big = 1.0f - p * ey;
	v16f res = SEL16(a < 0.5f, small, big);
	*out = (v16f)((v16i)res | sign);
}

static inline __attribute__((always_inline)) void erf16(const float *x, float *y)
{
	v16f xv;
	memcpy(&xv, x, sizeof xv);
	v16f res;
	erf16v(&xv, &res);
	memcpy(y, &res, sizeof res);
}

ERF_CLONES static void erf_f32(const float *x, float *y, int64_t n)
{
	int64_t i = 0;
	for (; i + 16 <= n; i += 16)
		erf16(x + i, y + i);
	if (i == n)
		return;
	float tx[16] = {0}, ty[16];
	memcpy(tx, x + i, sizeof(float) * (size_t)(n - i));
	erf16(tx, ty);
	memcpy(y + i, ty, sizeof(float) * (size_t)(n - i));
}

static int k_erf(const Onnx__NodeProto *n, const Tensor *x, Tensor *y)
{
	if (x->dtype != DT_FLOAT)
		return k_erf64(n, x, y);
	erf_f32(x->data, y->data, x->numel);
	return 0;
}

/* Gelu in one pass (gelu.h): erf16v between the decomposition's other
 * operations, each one vector operation in the graph's order; the loop is
 * made once per order (constant flags), so no lane waits on a branch */
static inline __attribute__((always_inline)) void gelu16(const float *x, float *y, float d, float a, float h,
							 int mul_d, int half_first)
{
	v16f xv, e;
	memcpy(&xv, x, sizeof xv);
	v16f u = mul_d ? xv * d : xv / d;
	erf16v(&u, &e);
	e = e + a;
	v16f r = half_first ? (xv * h) * e : (xv * e) * h;
	memcpy(y, &r, sizeof r);
}

static inline __attribute__((always_inline)) void gelu_loop(const float *x, float *y, int64_t n,
							    const GeluErf *g, int mul_d, int half_first)
{
	float d = g->d, a = g->a, h = g->h;
	int64_t i = 0;
	for (; i + 16 <= n; i += 16)
		gelu16(x + i, y + i, d, a, h, mul_d, half_first);
	if (i == n)
		return;
	float tx[16] = {0}, ty[16];
	memcpy(tx, x + i, sizeof(float) * (size_t)(n - i));
	gelu16(tx, ty, d, a, h, mul_d, half_first);
	memcpy(y + i, ty, sizeof(float) * (size_t)(n - i));
}

ERF_CLONES void gelu_erf_f32(const float *x, float *y, int64_t n, const GeluErf *g)
{
	if (g->mul_d && g->half_first)
		gelu_loop(x, y, n, g, 1, 1);
	else if (g->mul_d)
		gelu_loop(x, y, n, g, 1, 0);
	else if (g->half_first)
		gelu_loop(x, y, n, g, 0, 1);
	else
		gelu_loop(x, y, n, g, 0, 0);
}

typedef struct GeluJob {
	const float *x;
	float *y;
	const GeluErf *g;
} GeluJob;

static int gelu_part(void *arg, int64_t lo, int64_t hi)
{
	GeluJob *j = arg;
	gelu_erf_f32(j->x + lo, j->y + lo, hi - lo, j->g);
	return 0;
}

int gelu_erf_run(RunCtx *c, size_t xin, int rank, const GeluErf *g)
{
	const Tensor *x = xin < c->nin ? c->in[xin] : NULL;
	if (!x)
		return op_error(c->node, "missing input %zu", xin);
	if (x->kind != TK_TENSOR || x->dtype != DT_FLOAT)
		return op_error(c->node, "input %zu is %s, expected float (the type of the Gelu's constants)",
				xin, dtype_name(x->dtype));
	if (!x->data && x->numel)
		return op_error(c->node, "input %zu has no data", xin);
	/* scalar constants of a higher rank add leading unit axes */
	int r = x->rank > rank ? x->rank : rank;
	if (r > QM_MAX_RANK)
		return op_error(c->node, "rank %d exceeds %d", r, QM_MAX_RANK);
	int64_t dims[QM_MAX_RANK];
	for (int k = 0; k < r; k++)
		dims[k] = k < r - x->rank ? 1 : x->dims[k - (r - x->rank)];
	if (op_output(c, 0, DT_FLOAT, r, dims) < 0)
		return -1;
	GeluJob job = {x->data, c->out[0]->data, g};
	return elem_parallel(c->threads, x->numel, 32768, gelu_part, &job);
}

UNARY(k_isnan, UN_FLOAT_PRED(isnan(v)))
UNARY(k_not, case DT_BOOL: UN_LOOP(uint8_t, uint8_t, !v) break;)
UNARY(k_bitwise_not, UN_SINT(~v) UN_UINT(~v))

static int k_isinf(const Onnx__NodeProto *n, const Tensor *x, Tensor *y)
{
	int64_t neg, pos;
	if (attr_int(n, "detect_negative", 1, &neg) < 0 ||
	    attr_int(n, "detect_positive", 1, &pos) < 0)
		return -2;
	switch (x->dtype) {
	UN_FLOAT_PRED(isinf(v) && ((v > 0 && pos) || (v < 0 && neg)))
	default: return -1;
	}
	return 0;
}

typedef struct UnJob {
	UnKern k;
	const Onnx__NodeProto *n;
	const Tensor *x;
	Tensor *y;
} UnJob;

static int unary_part(void *arg, int64_t lo, int64_t hi)
{
	UnJob *j = arg;
	Tensor xs = elem_slice(j->x, lo, hi), ys = elem_slice(j->y, lo, hi);
	return j->k(j->n, &xs, &ys);
}

static int run_unary(RunCtx *c, int bool_out, UnKern k)
{
	ElemIO e;
	Tensor *y;
	if (c->nin < 1 || !c->in[0])
		return op_error(c->node, "missing input 0");
	int dt = c->in[0]->dtype;
	if (eio_begin(&e, c) < 0)
		return -1;
	const Tensor *x = e.in[0];
	if (dtype_bits(x->dtype) < 8)
		return eio_end(&e, op_unsupported_type(c->node, c->opset, dt));
	if (eio_output(&e, 0, bool_out ? DT_BOOL : dt, x->rank, x->dims, &y) < 0)
		return eio_end(&e, -1);
	/* an empty slice first: type and attribute errors reported in this thread */
	UnJob job = {k, c->node, x, y};
	int rc = unary_part(&job, 0, 0);
	if (rc == 0)
		rc = elem_parallel(c->threads, x->numel, 32768, unary_part, &job);
	if (rc == -1)
		return eio_end(&e, op_unsupported_type(c->node, c->opset, dt));
	return eio_end(&e, rc < 0 ? -1 : 0);
}

static int infer_unary(InferCtx *c)
{
	return infer_same_as_input(c, 0, 0);
}

static int infer_pred(InferCtx *c)
{
	return elem_infer_like(c, 0, 0, DT_BOOL);
}

#define RUNNER(fn, bool_out, k) static int fn(RunCtx *c) { return run_unary(c, bool_out, k); }
RUNNER(abs_run, 0, k_abs)
RUNNER(neg_run, 0, k_neg)
RUNNER(exp_run, 0, k_exp)
RUNNER(log_run, 0, k_log)
RUNNER(sqrt_run, 0, k_sqrt)
RUNNER(reciprocal_run, 0, k_reciprocal)
RUNNER(floor_run, 0, k_floor)
RUNNER(ceil_run, 0, k_ceil)
RUNNER(round_run, 0, k_round)
RUNNER(sign_run, 0, k_sign)
RUNNER(sin_run, 0, k_sin)
RUNNER(cos_run, 0, k_cos)
RUNNER(tan_run, 0, k_tan)
RUNNER(asin_run, 0, k_asin)
RUNNER(acos_run, 0, k_acos)
RUNNER(atan_run, 0, k_atan)
RUNNER(sinh_run, 0, k_sinh)
RUNNER(cosh_run, 0, k_cosh)
RUNNER(asinh_run, 0, k_asinh)
RUNNER(acosh_run, 0, k_acosh)
RUNNER(atanh_run, 0, k_atanh)
RUNNER(erf_run, 0, k_erf)
RUNNER(isnan_run, 1, k_isnan)
RUNNER(isinf_run, 1, k_isinf)
RUNNER(not_run, 0, k_not)
RUNNER(bitwise_not_run, 0, k_bitwise_not)

OPERATOR(ai_onnx, Abs, 1, infer_unary, abs_run)
OPERATOR(ai_onnx, Neg, 1, infer_unary, neg_run)
OPERATOR(ai_onnx, Exp, 1, infer_unary, exp_run)
OPERATOR(ai_onnx, Log, 1, infer_unary, log_run)
OPERATOR(ai_onnx, Sqrt, 1, infer_unary, sqrt_run)
OPERATOR(ai_onnx, Reciprocal, 1, infer_unary, reciprocal_run)
OPERATOR(ai_onnx, Floor, 1, infer_unary, floor_run)
OPERATOR(ai_onnx, Ceil, 1, infer_unary, ceil_run)
OPERATOR(ai_onnx, Round, 11, infer_unary, round_run)
OPERATOR(ai_onnx, Sign, 9, infer_unary, sign_run)
OPERATOR(ai_onnx, Sin, 7, infer_unary, sin_run)
OPERATOR(ai_onnx, Cos, 7, infer_unary, cos_run)
OPERATOR(ai_onnx, Tan, 7, infer_unary, tan_run)
OPERATOR(ai_onnx, Asin, 7, infer_unary, asin_run)
OPERATOR(ai_onnx, Acos, 7, infer_unary, acos_run)
OPERATOR(ai_onnx, Atan, 7, infer_unary, atan_run)
OPERATOR(ai_onnx, Sinh, 9, infer_unary, sinh_run)
OPERATOR(ai_onnx, Cosh, 9, infer_unary, cosh_run)
OPERATOR(ai_onnx, Asinh, 9, infer_unary, asinh_run)
OPERATOR(ai_onnx, Acosh, 9, infer_unary, acosh_run)
OPERATOR(ai_onnx, Atanh, 9, infer_unary, atanh_run)
OPERATOR(ai_onnx, Erf, 9, infer_unary, erf_run)
OPERATOR(ai_onnx, IsNaN, 9, infer_pred, isnan_run)
OPERATOR(ai_onnx, IsInf, 10, infer_pred, isinf_run)
OPERATOR(ai_onnx, Not, 1, infer_unary, not_run)
OPERATOR(ai_onnx, BitwiseNot, 18, infer_unary, bitwise_not_run)
