/* activation.c — activation functions: Relu, LeakyRelu, Elu, Selu, Celu,
 * Sigmoid, HardSigmoid, HardSwish, Softplus, Softsign, Tanh, Gelu, Mish,
 * ThresholdedRelu, Clip, Shrink; com.microsoft's Gelu.
 *
 * Attributes are read once per run into float parameters; the loops are the
 * UN_* maps of elem.h with type-generic math, so float32 runs the float
 * functions (expf, tanhf, ...) and double the double ones. float16 and
 * bfloat16 are computed in float32. */
/* FP exception flags and errno are never read: let GCC if-convert, inline
 * sqrt and vectorize the float loops (-ftrapping-math keeps compares as
 * branches, -fmath-errno keeps sqrt a libm call) */
#pragma GCC optimize("no-trapping-math", "no-math-errno")

#include <float.h>
#include <stdint.h>
#include <string.h>
#include <tgmath.h>

#include "ops/elem.h"
#include "ops/gelu.h"
#include "ops/op.h"
#include "ops/shapeutil.h"

typedef struct Act {
	float alpha, beta, gamma;
	int mode;
} Act;

/* 0, -1 for an unsupported type (reported by the caller), -2 after op_error */
typedef int (*ActKern)(const Onnx__NodeProto *n, const Act *p, const Tensor *x, Tensor *y);

#define ACT(fn, cases) \
ELEM_CLONES static int fn(const Onnx__NodeProto *n, const Act *p, const Tensor *x, Tensor *y) \
{ \
	switch (x->dtype) { \
	cases \
	default: return -1; \
	} \
	return 0; \
}

/* numerically stable logistic function and log(1 + exp(v)) */
#define SIGMOID(v) ((v) >= 0 ? 1 / (1 + exp(-(v))) : exp(v) / (1 + exp(v)))
#define SOFTPLUS(v) ((v) > 0 ? (v) + log1p(exp(-(v))) : log1p(exp(v)))
/* max(0, min(1, t)) without libm calls, so the loops vectorize; NaN stays NaN */
#define CLAMP01(t) ((t) < 0 ? 0 : (t) > 1 ? 1 : (t))

ACT(k_relu, UN_FLOAT(v < 0 ? 0 : v) UN_SINT(v < 0 ? 0 : v))
ACT(k_leaky_relu, UN_FLOAT(v < 0 ? p->alpha * v : v))
ACT(k_elu, UN_FLOAT(v < 0 ? p->alpha * (exp(v) - 1) : v))
ACT(k_selu, UN_FLOAT(v <= 0 ? p->gamma * (p->alpha * (exp(v) - 1)) : p->gamma * v))
ACT(k_celu, UN_FLOAT(v > 0 ? v : p->alpha * (exp(v / p->alpha) - 1)))
ACT(k_sigmoid, UN_F32(qm_sigmoidf(v)) UN_F64(SIGMOID(v)))
ACT(k_hard_sigmoid, UN_FLOAT(CLAMP01(p->alpha * v + p->beta)))
ACT(k_hard_swish, UN_FLOAT(v * CLAMP01(v / 6 + 0.5f)))
ACT(k_softplus, UN_FLOAT(SOFTPLUS(v)))
ACT(k_softsign, UN_FLOAT(v / (1 + fabs(v))))
ACT(k_tanh, UN_F32(qm_tanhf(v)) UN_F64(tanh(v)))
ACT(k_mish, UN_FLOAT(v * tanh(SOFTPLUS(v))))
ACT(k_thresholded_relu, UN_FLOAT(v > p->alpha ? v : 0))
ACT(k_gelu_erf, UN_F32(0.5f * v * (1 + qm_erff(v * 0.70710678118654752440f)))
	UN_F64(0.5 * v * (1 + erf(v * 0.70710678118654752440))))
ACT(k_gelu_tanh, UN_F32(0.5f * v * (1 + qm_tanhf(0.79788456080286535588f * (v + 0.044715f * v * v * v))))
	UN_F64(0.5 * v * (1 + tanh(0.79788456080286535588 * (v + 0.044715 * v * v * v)))))
ACT(k_shrink, UN_FLOAT(v < -p->alpha ? v + p->beta : v > p->alpha ? v - p->beta : 0)
	UN_SINT(v < -p->alpha ? v + p->beta : v > p->alpha ? v - p->beta : 0)
	UN_UINT(v > p->alpha ? v - p->beta : 0))

typedef struct ActJob {
	ActKern k;
	const Onnx__NodeProto *n;
	const Act *p;
	const Tensor *x;
	Tensor *y;
} ActJob;

static int act_part(void *arg, int64_t lo, int64_t hi)
{
	ActJob *j = arg;
	Tensor xs = elem_slice(j->x, lo, hi), ys = elem_slice(j->y, lo, hi);
	return j->k(j->n, j->p, &xs, &ys);
}

static int run_act(RunCtx *c, ActKern k, const Act *p)
{
	ElemIO e;
	Tensor *y;
	if (c->nin < 1 || !c->in[0])
		return op_error(c->node, "missing input 0");
	int dt = c->in[0]->dtype;
	if (eio_begin(&e, c) < 0)
		return -1;
	const Tensor *x = e.in[0];
	if (eio_output(&e, 0, dt, x->rank, x->dims, &y) < 0)
		return eio_end(&e, -1);
	/* an empty slice first: the type check and its message in this thread */
	ActJob job = {k, c->node, p, x, y};
	int rc = act_part(&job, 0, 0);
	if (rc == 0)
		rc = elem_parallel(c->threads, x->numel, 32768, act_part, &job);
	if (rc == -1)
		return eio_end(&e, op_unsupported_type(c->node, c->opset, dt));
	return eio_end(&e, rc < 0 ? -1 : 0);
}

static int relu_run(RunCtx *c)
{
	Act p = {0};
	return run_act(c, k_relu, &p);
}

static int sigmoid_run(RunCtx *c)
{
	Act p = {0};
	return run_act(c, k_sigmoid, &p);
}

static int tanh_run(RunCtx *c)
{
	Act p = {0};
	return run_act(c, k_tanh, &p);
}

static int softplus_run(RunCtx *c)
{
	Act p = {0};
	return run_act(c, k_softplus, &p);
}

static int softsign_run(RunCtx *c)
{
	Act p = {0};
	return run_act(c, k_softsign, &p);
}

static int hard_swish_run(RunCtx *c)
{
	Act p = {0};
	return run_act(c, k_hard_swish, &p);
}

static int mish_run(RunCtx *c)
{
	Act p = {0};
	return run_act(c, k_mish, &p);
}

/* run k with attribute alpha (default da) and beta (default db, if named) */
static int run_ab(RunCtx *c, ActKern k, const char *a, float da, const char *b, float db)
{
	Act p = {0};
	if (attr_float(c->node, a, da, &p.alpha) < 0 ||
	    (b && attr_float(c->node, b, db, &p.beta) < 0))
		return -1;
	return run_act(c, k, &p);
}

static int leaky_relu_run(RunCtx *c)
{
	return run_ab(c, k_leaky_relu, "alpha", 0.01f, NULL, 0);
}

static int elu_run(RunCtx *c)
{
	return run_ab(c, k_elu, "alpha", 1.0f, NULL, 0);
}

static int celu_run(RunCtx *c)
{
	return run_ab(c, k_celu, "alpha", 1.0f, NULL, 0);
}

static int thresholded_relu_run(RunCtx *c)
{
	return run_ab(c, k_thresholded_relu, "alpha", 1.0f, NULL, 0);
}

static int hard_sigmoid_run(RunCtx *c)
{
	return run_ab(c, k_hard_sigmoid, "alpha", 0.2f, "beta", 0.5f);
}

static int shrink_run(RunCtx *c)
{
	return run_ab(c, k_shrink, "lambd", 0.5f, "bias", 0.0f);
}

static int selu_run(RunCtx *c)
{
	Act p = {0};
	if (attr_float(c->node, "alpha", 1.67326319217681884765625f, &p.alpha) < 0 ||
	    attr_float(c->node, "gamma", 1.05070102214813232421875f, &p.gamma) < 0)
		return -1;
	return run_act(c, k_selu, &p);
}

/* float32 through the one-pass vector code of gelu.h, whose operations
 * are k_gelu_erf's: the same bits, 16 lanes at a time */
static int k_gelu_erf_vec(const Onnx__NodeProto *n, const Act *p, const Tensor *x, Tensor *y)
{
	static const GeluErf g = {.d = 0.70710678118654752440f, .a = 1, .h = 0.5f, .mul_d = 1, .half_first = 1};
	if (x->dtype != DT_FLOAT)
		return k_gelu_erf(n, p, x, y);
	gelu_erf_f32(x->data, y->data, x->numel, &g);
	return 0;
}

static int gelu_run(RunCtx *c)
{
	char mode[16];
	Act p = {0};
	if (attr_str(c->node, "approximate", "none", mode, sizeof mode) < 0)
		return -1;
	if (!strcmp(mode, "none"))
		return run_act(c, k_gelu_erf_vec, &p);
	if (!strcmp(mode, "tanh"))
		return run_act(c, k_gelu_tanh, &p);
	return op_error(c->node, "attribute 'approximate' is '%s', expected none or tanh", mode);
}

/* ---- Clip ---- */

#define CLIP_CASE(DT, T) case DT: { \
	T lo = 0, hi = 0; \
	if (has_lo) \
		memcpy(&lo, plo, sizeof lo); \
	if (has_hi) \
		memcpy(&hi, phi, sizeof hi); \
	const T *px = x->data; \
	T *py = y->data; \
	int64_t n = x->numel; \
	if (has_lo && has_hi) \
		EL_BLOCKED(n, T v = px[i]; v = v < lo ? lo : v; py[i] = v > hi ? hi : v;) \
	else if (has_lo) \
		EL_BLOCKED(n, T v = px[i]; py[i] = v < lo ? lo : v;) \
	else if (has_hi) \
		EL_BLOCKED(n, T v = px[i]; py[i] = v > hi ? hi : v;) \
	else \
		memcpy(py, px, sizeof *px * (size_t)n); \
} break;

static int clip_run(RunCtx *c)
{
	ElemIO e;
	Tensor *y;
	float flo = -FLT_MAX, fhi = FLT_MAX;
	const void *plo = NULL, *phi = NULL;
	if (c->nin < 1 || !c->in[0])
		return op_error(c->node, "missing input 0");
	int dt = c->in[0]->dtype;
	if (c->opset < 11) {
		if (attr_float(c->node, "min", -FLT_MAX, &flo) < 0 ||
		    attr_float(c->node, "max", FLT_MAX, &fhi) < 0)
			return -1;
	}
	if (eio_begin(&e, c) < 0)
		return -1;
	const Tensor *x = e.in[0];
	double dlo = flo, dhi = fhi;
	int has_lo = 1, has_hi = 1;
	if (c->opset < 11) {
		if (x->dtype == DT_FLOAT) {
			plo = &flo;
			phi = &fhi;
		} else if (x->dtype == DT_DOUBLE) {
			plo = &dlo;
			phi = &dhi;
		}
	} else {
		for (size_t k = 1; k < 3; k++) {
			const Tensor *b = k < e.nin ? e.in[k] : NULL;
			if (!b)
				continue;
			if (b->dtype != x->dtype)
				return eio_end(&e, op_error(c->node, "input %s is %s, expected %s",
						k == 1 ? "min" : "max", dtype_name(c->in[k]->dtype),
						dtype_name(dt)));
			if (b->numel != 1)
				return eio_end(&e, op_error(c->node, "input %s has %lld elements, expected a scalar",
						k == 1 ? "min" : "max", (long long)b->numel));
			if (k == 1)
				plo = b->data;
			else
				phi = b->data;
		}
		has_lo = plo != NULL;
		has_hi = phi != NULL;
	}
	if (eio_output(&e, 0, dt, x->rank, x->dims, &y) < 0)
		return eio_end(&e, -1);
	int sw = x->dtype;
	if (c->opset < 11 && sw != DT_FLOAT && sw != DT_DOUBLE)
		sw = -1;
	switch (sw) {
	ELEM_NUMERIC(CLIP_CASE)
	default: return eio_end(&e, op_unsupported_type(c->node, c->opset, dt));
	}
	return eio_end(&e, 0);
}

/* ---- inference ---- */

static int infer_act(InferCtx *c)
{
	return infer_same_as_input(c, 0, 0);
}

OPERATOR(ai_onnx, Relu, 1, infer_act, relu_run)
OPERATOR(ai_onnx, LeakyRelu, 1, infer_act, leaky_relu_run)
OPERATOR(ai_onnx, Elu, 1, infer_act, elu_run)
OPERATOR(ai_onnx, Selu, 1, infer_act, selu_run)
OPERATOR(ai_onnx, Celu, 12, infer_act, celu_run)
OPERATOR(ai_onnx, Sigmoid, 1, infer_act, sigmoid_run)
OPERATOR(ai_onnx, HardSigmoid, 1, infer_act, hard_sigmoid_run)
OPERATOR(ai_onnx, HardSwish, 14, infer_act, hard_swish_run)
OPERATOR(ai_onnx, Softplus, 1, infer_act, softplus_run)
OPERATOR(ai_onnx, Softsign, 1, infer_act, softsign_run)
OPERATOR(ai_onnx, Tanh, 1, infer_act, tanh_run)
OPERATOR(ai_onnx, Gelu, 20, infer_act, gelu_run)
OPERATOR(com_microsoft, Gelu, 1, infer_act, gelu_run) /* onnxruntime's contrib Gelu: the erf form */
OPERATOR(ai_onnx, Mish, 18, infer_act, mish_run)
OPERATOR(ai_onnx, ThresholdedRelu, 10, infer_act, thresholded_relu_run)
OPERATOR(ai_onnx, Clip, 1, infer_act, clip_run)
OPERATOR(ai_onnx, Shrink, 9, infer_act, shrink_run)
