/* unary.c — elementwise math on one tensor: Abs, Neg, Exp, Log, Sqrt,
 * Reciprocal, Floor, Ceil, Round, Sign, the trigonometric and hyperbolic
 * functions, Erf, IsNaN, IsInf, Not, BitwiseNot.
 *
 * Each kernel is one switch over the native types it accepts; the loop is
 * written once (UN_LOOP) and the math is type-generic (<tgmath.h>), so float
 * and double share one expression. float16/bfloat16 are computed in float32
 * (elem.h). */
/* FP exception flags and errno are never read: let GCC if-convert, inline
 * sqrt and vectorize the float loops (-ftrapping-math keeps compares as
 * branches, -fmath-errno keeps sqrt a libm call) */
#pragma GCC optimize("no-trapping-math", "no-math-errno")

#include <stdint.h>
#include <tgmath.h>

#include "ops/elem.h"
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
UNARY(k_erf, UN_F32(qm_erff(v)) UN_F64(erf(v)))
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
