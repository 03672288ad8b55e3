/* softmax.c — Softmax, LogSoftmax and Hardmax.
 *
 * Before opset 13 the input is coerced to 2-D at 'axis' (default 1): the
 * operation runs over the flattened trailing dimensions dims[axis:]. From
 * opset 13 it runs over the single axis 'axis' (default -1). Both are one
 * kernel over (outer, d, inner) blocks; inner is 1 for the common last-axis
 * case, a contiguous row. Rows are shifted by their maximum for stability. */
/* FP exception flags are never read: let GCC vectorize the float loops */
#pragma GCC optimize("no-trapping-math", "no-math-errno")

#include <stdint.h>
#include <stdlib.h>
#include <tgmath.h>

#include "ops/elem.h"
#include "ops/op.h"
#include "ops/shapeutil.h"
#include "util.h"

enum { SM_SOFTMAX, SM_LOGSOFTMAX, SM_HARDMAX };

/* exp in the row's type: the fast float32 one for float */
#define SM_EXP(v) _Generic((v), float: qm_expf((float)(v)), default: exp((double)(v)))

/* softmax / log-softmax of one contiguous row: maximum and sum kept in 16
 * lanes so the loops vectorize (a fixed order: deterministic) */
#define SOFTMAX_CONTIG(T) { \
	const T *restrict rr = r; \
	T *restrict ww = w; \
	T l16[16]; \
	int64_t k_ = 0; \
	for (int j = 0; j < 16; j++) \
		l16[j] = rr[0]; \
	for (; k_ + 16 <= d; k_ += 16) \
		for (int j = 0; j < 16; j++) \
			l16[j] = rr[k_ + j] > l16[j] ? rr[k_ + j] : l16[j]; \
	T cm = l16[0]; \
	for (int j = 1; j < 16; j++) \
		cm = l16[j] > cm ? l16[j] : cm; \
	for (; k_ < d; k_++) \
		cm = rr[k_] > cm ? rr[k_] : cm; \
	if (isinf(cm)) \
		cm = 0; \
	EL_BLOCKED(d, ww[i] = SM_EXP(rr[i] - cm);) \
	for (int j = 0; j < 16; j++) \
		l16[j] = 0; \
	for (k_ = 0; k_ + 16 <= d; k_ += 16) \
		for (int j = 0; j < 16; j++) \
			l16[j] += ww[k_ + j]; \
	/* a tree of depth 4, not a chain of 16 dependent adds */ \
	double sum = (((l16[0] + l16[8]) + (l16[4] + l16[12])) + ((l16[2] + l16[10]) + (l16[6] + l16[14]))) + \
		     (((l16[1] + l16[9]) + (l16[5] + l16[13])) + ((l16[3] + l16[11]) + (l16[7] + l16[15]))); \
	for (; k_ < d; k_++) \
		sum += ww[k_]; \
	if (op == SM_SOFTMAX) { \
		T inv = (T)(1 / sum); \
		EL_BLOCKED(d, ww[i] *= inv;) \
	} else { \
		T lse = (T)(log(sum) + cm); \
		EL_BLOCKED(d, ww[i] = rr[i] - lse;) \
	} \
}

/* one row of d elements, stride inner, from r into w */
#define SOFTMAX_ROW(T) { \
	if (op != SM_HARDMAX && inner == 1) \
		SOFTMAX_CONTIG(T) \
	else { \
		T mx = r[0]; \
		int64_t arg = 0; \
		for (int64_t j = 1; j < d; j++) \
			if (r[j * inner] > mx) { \
				mx = r[j * inner]; \
				arg = j; \
			} \
		if (op == SM_HARDMAX) { \
			for (int64_t j = 0; j < d; j++) \
				w[j * inner] = j == arg; \
		} else { \
			if (isinf(mx)) \
				mx = 0; \
			for (int64_t j = 0; j < d; j++) \
				w[j * inner] = SM_EXP(r[j * inner] - mx); \
			double sum = 0; \
			for (int64_t j = 0; j < d; j++) \
				sum += w[j * inner]; \
			if (op == SM_SOFTMAX) { \
				T inv = (T)(1 / sum); \
				for (int64_t j = 0; j < d; j++) \
					w[j * inner] *= inv; \
			} else { \
				T lse = (T)(log(sum) + mx); \
				for (int64_t j = 0; j < d; j++) \
					w[j * inner] = r[j * inner] - lse; \
			} \
		} \
	} \
}

/* softmax / log-softmax of a block [d][inner] along d, all inner columns
 * at once so every loop runs over contiguous memory; mxs and sums hold
 * inner values each */
#define SOFTMAX_COLS(T) { \
	const T *rb = px + o * d * inner; \
	T *wb = py + o * d * inner; \
	T *restrict cmx = mxs; \
	T *restrict csum = sums; \
	for (int64_t k = 0; k < inner; k++) \
		cmx[k] = rb[k]; \
	for (int64_t j = 1; j < d; j++) { \
		const T *restrict rj = rb + j * inner; \
		EL_BLOCKED(inner, cmx[i] = rj[i] > cmx[i] ? rj[i] : cmx[i];) \
	} \
	for (int64_t k = 0; k < inner; k++) { \
		if (isinf(cmx[k])) \
			cmx[k] = 0; \
		csum[k] = 0; \
	} \
	for (int64_t j = 0; j < d; j++) { \
		const T *restrict rj = rb + j * inner; \
		T *restrict wj = wb + j * inner; \
		EL_BLOCKED(inner, wj[i] = SM_EXP(rj[i] - cmx[i]); csum[i] += wj[i];) \
	} \
	if (op == SM_SOFTMAX) { \
		for (int64_t k = 0; k < inner; k++) \
			csum[k] = 1 / csum[k]; \
		for (int64_t j = 0; j < d; j++) { \
			T *restrict wj = wb + j * inner; \
			EL_BLOCKED(inner, wj[i] *= csum[i];) \
		} \
	} else { \
		for (int64_t k = 0; k < inner; k++) \
			csum[k] = log(csum[k]) + cmx[k]; \
		for (int64_t j = 0; j < d; j++) { \
			const T *restrict rj = rb + j * inner; \
			T *restrict wj = wb + j * inner; \
			EL_BLOCKED(inner, wj[i] = rj[i] - csum[i];) \
		} \
	} \
}

#define SOFTMAX_CASE(DT, T) case DT: { \
	const T *px = x->data; \
	T *py = y->data; \
	T *mxs = NULL, *sums = NULL; \
	if (inner > 1 && op != SM_HARDMAX) { \
		mxs = xmalloc(sizeof *mxs * (size_t)inner); \
		sums = xmalloc(sizeof *sums * (size_t)inner); \
	} \
	for (int64_t o = lo; o < hi; o++) { \
		if (mxs) { \
			SOFTMAX_COLS(T) \
			continue; \
		} \
		for (int64_t k = 0; k < inner; k++) { \
			const T *r = px + o * d * inner + k; \
			T *w = py + o * d * inner + k; \
			SOFTMAX_ROW(T) \
		} \
	} \
	free(mxs); \
	free(sums); \
} break;

typedef struct SmJob {
	int op;
	const Tensor *x;
	Tensor *y;
	int64_t d, inner;
} SmJob;

/* outer blocks [lo, hi); -1 for an unsupported type */
ELEM_CLONES static int softmax_part(void *p, int64_t lo, int64_t hi)
{
	SmJob *sj = p;
	const Tensor *x = sj->x;
	Tensor *y = sj->y;
	int op = sj->op;
	int64_t d = sj->d, inner = sj->inner;
	switch (x->dtype) {
	ELEM_FLOATS(SOFTMAX_CASE)
	default: return -1;
	}
	return 0;
}

static int run_softmax(RunCtx *c, int op)
{
	ElemIO e;
	int64_t axis;
	if (c->nin < 1 || !c->in[0])
		return op_error(c->node, "missing input 0");
	int dt = c->in[0]->dtype;
	if (attr_int(c->node, "axis", c->opset < 13 ? 1 : -1, &axis) < 0)
		return -1;
	if (eio_begin(&e, c) < 0)
		return -1;
	const Tensor *x = e.in[0];
	int64_t a = 0, outer = 1, d = 1, inner = 1;
	if (x->rank > 0 || c->opset >= 13) {
		if (norm_axis(c->node, axis, x->rank, &a) < 0)
			return eio_end(&e, -1);
	}
	for (int i = 0; i < x->rank; i++) {
		if (i < a)
			outer *= x->dims[i];
		else if (i == a || c->opset < 13)
			d *= x->dims[i];
		else
			inner *= x->dims[i];
	}
	if (x->dtype != DT_FLOAT && x->dtype != DT_DOUBLE)
		return eio_end(&e, op_unsupported_type(c->node, c->opset, dt));
	Tensor *y;
	if (eio_output(&e, 0, dt, x->rank, x->dims, &y) < 0)
		return eio_end(&e, -1);
	if (d == 0 || outer == 0 || inner == 0)
		return eio_end(&e, 0);
	SmJob job = {op, x, y, d, inner};
	int64_t grain = 32768 / (d * inner) + 1;
	if (elem_parallel(c->threads, outer, grain, softmax_part, &job) < 0)
		return eio_end(&e, op_unsupported_type(c->node, c->opset, dt));
	return eio_end(&e, 0);
}

static int softmax_run(RunCtx *c)
{
	return run_softmax(c, SM_SOFTMAX);
}

static int logsoftmax_run(RunCtx *c)
{
	return run_softmax(c, SM_LOGSOFTMAX);
}

static int hardmax_run(RunCtx *c)
{
	return run_softmax(c, SM_HARDMAX);
}

static int softmax_infer(InferCtx *c)
{
	int64_t axis, a;
	if (infer_same_as_input(c, 0, 0) < 0)
		return -1;
	if (attr_int(c->node, "axis", c->opset < 13 ? 1 : -1, &axis) < 0)
		return -1;
	if (c->in[0]->rank > 0 && norm_axis(c->node, axis, c->in[0]->rank, &a) < 0)
		return -1;
	return 0;
}

OPERATOR(ai_onnx, Softmax, 1, softmax_infer, softmax_run)
OPERATOR(ai_onnx, LogSoftmax, 1, softmax_infer, logsoftmax_run)
OPERATOR(ai_onnx, Hardmax, 1, softmax_infer, hardmax_run)
