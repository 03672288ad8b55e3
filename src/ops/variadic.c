/* variadic.c — Min, Max, Sum and Mean of any number of broadcast inputs.
 *
 * The output (the broadcast of all input shapes) starts as input 0 expanded,
 * then each further input is folded in place with the binary maps of elem.h.
 * Min and Max propagate NaN as numpy's minimum/maximum do; integer sums wrap. */
#include <stdint.h>
#include <string.h>
#include <tgmath.h>

#include "ops/bcast.h"
#include "ops/elem.h"
#include "ops/op.h"
#include "ops/shapeutil.h"

enum { V_MIN, V_MAX, V_SUM, V_MEAN };

/* Y = f(Y, B); -1 when the type is not supported */
ELEM_CLONES static int fold(int op, Tensor *Y, const Tensor *B)
{
	const Tensor *A = Y;
	switch (op) {
	case V_MIN:
		switch (Y->dtype) {
		BIN_FLOAT(isnan(a) || a < b ? a : b)
		BIN_SINT(a < b ? a : b)
		BIN_UINT(a < b ? a : b)
		default: return -1;
		}
		break;
	case V_MAX:
		switch (Y->dtype) {
		BIN_FLOAT(isnan(a) || a > b ? a : b)
		BIN_SINT(a > b ? a : b)
		BIN_UINT(a > b ? a : b)
		default: return -1;
		}
		break;
	case V_SUM:
		switch (Y->dtype) {
		BIN_FLOAT(a + b)
		BIN_SINT((uint64_t)a + (uint64_t)b)
		BIN_UINT((uint64_t)a + (uint64_t)b)
		default: return -1;
		}
		break;
	case V_MEAN:
		switch (Y->dtype) {
		BIN_FLOAT(a + b)
		default: return -1;
		}
		break;
	}
	return 0;
}

static int run_variadic(RunCtx *c, int op)
{
	ElemIO e;
	Tensor *Y;
	int rank = 0;
	int64_t dims[QM_MAX_RANK];
	size_t n = 0;
	for (size_t k = 0; k < c->nin; k++) {
		if (!c->in[k])
			continue;
		if (c->in[k]->dtype != c->in[0]->dtype)
			return op_error(c->node, "input %zu is %s, expected %s like input 0", k,
					dtype_name(c->in[k]->dtype), dtype_name(c->in[0]->dtype));
		n++;
	}
	if (n == 0 || !c->in[0])
		return op_error(c->node, "expected at least one input");
	int dt = c->in[0]->dtype, nt = elem_native(dt);
	int ok = nt == DT_FLOAT || nt == DT_DOUBLE;
	if (op != V_MEAN)
		ok |= (nt >= DT_UINT8 && nt <= DT_INT64) || nt == DT_UINT32 || nt == DT_UINT64;
	if (!ok)
		return op_unsupported_type(c->node, c->opset, dt);
	if (eio_begin(&e, c) < 0)
		return -1;
	for (size_t k = 0; k < e.nin; k++) {
		if (!e.in[k])
			continue;
		int64_t prev[QM_MAX_RANK];
		memcpy(prev, dims, sizeof prev);
		int ranks[2] = {rank, e.in[k]->rank};
		const int64_t *dv[2] = {prev, e.in[k]->dims};
		if (bcast_shape(c->node, 2, ranks, dv, &rank, dims) < 0)
			return eio_end(&e, -1);
	}
	if (eio_output(&e, 0, dt, rank, dims, &Y) < 0 ||
	    bcast_expand(c->node, e.in[0], Y) < 0)
		return eio_end(&e, -1);
	for (size_t k = 1; k < e.nin; k++) {
		if (e.in[k] && fold(op, Y, e.in[k]) < 0)
			return eio_end(&e, op_unsupported_type(c->node, c->opset, dt));
	}
	if (op == V_MEAN) {
		if (Y->dtype == DT_FLOAT) {
			float *p = Y->data;
			for (int64_t i = 0; i < Y->numel; i++)
				p[i] /= (float)n;
		} else {
			double *p = Y->data;
			for (int64_t i = 0; i < Y->numel; i++)
				p[i] /= (double)n;
		}
	}
	return eio_end(&e, 0);
}

static int min_run(RunCtx *c)
{
	return run_variadic(c, V_MIN);
}

static int max_run(RunCtx *c)
{
	return run_variadic(c, V_MAX);
}

static int sum_run(RunCtx *c)
{
	return run_variadic(c, V_SUM);
}

static int mean_run(RunCtx *c)
{
	return run_variadic(c, V_MEAN);
}

static int variadic_infer(InferCtx *c)
{
	ValueType *y = c->out[0];
	int first = 1;
	for (size_t k = 0; k < c->nin; k++) {
		const ValueType *t = c->in[k];
		if (!t)
			continue;
		if (first) {
			vt_set_tensor(y, t->elem, t->rank);
			for (int i = 0; i < t->rank; i++)
				y->dims[i] = t->dims[i];
			first = 0;
			continue;
		}
		if (y->elem && t->elem && y->elem != t->elem)
			return op_error(c->node, "input %zu is %s, expected %s like the others", k,
					dtype_name(t->elem), dtype_name(y->elem));
		if (!y->elem)
			y->elem = t->elem;
		ValueType acc = *y;
		acc.value = NULL;
		acc.symval = NULL;
		acc.inner = NULL;
		if (broadcast_dims(c->node, &acc, t, y) < 0)
			return -1;
	}
	if (first)
		return op_error(c->node, "expected at least one input");
	return 0;
}

OPERATOR(ai_onnx, Min, 1, variadic_infer, min_run)
OPERATOR(ai_onnx, Max, 1, variadic_infer, max_run)
OPERATOR(ai_onnx, Sum, 1, variadic_infer, sum_run)
OPERATOR(ai_onnx, Mean, 1, variadic_infer, mean_run)
