/* loss.c — NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss.
 *
 * Input [N, C, d1..dk] (scores or log-probabilities), target [N, d1..dk] of
 * class indices, optional weight [C]. Each position contributes
 * -w[t] * input[n, t, d] with w[t] = weight[t] (1 without weights) and
 * w = 0 where t equals ignore_index. reduction 'none' keeps the target's
 * shape, 'sum' adds up, 'mean' divides the sum by the sum of the w.
 * SoftmaxCrossEntropyLoss takes the log-softmax over axis 1 first and can
 * return it as its second output. Computed in double. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops/elem.h"
#include "ops/op.h"
#include "ops/shapeutil.h"
#include "util.h"

enum { RED_NONE, RED_SUM, RED_MEAN };

typedef struct LossArgs {
	int reduction;
	int has_ignore;
	int64_t ignore;
} LossArgs;

static int loss_args(const Onnx__NodeProto *n, LossArgs *a)
{
	char r[16];
	if (attr_str(n, "reduction", "mean", r, sizeof r) < 0)
		return -1;
	if (!strcmp(r, "none"))
		a->reduction = RED_NONE;
	else if (!strcmp(r, "sum"))
		a->reduction = RED_SUM;
	else if (!strcmp(r, "mean"))
		a->reduction = RED_MEAN;
	else
		return op_error(n, "attribute 'reduction' is '%s', expected none, sum or mean", r);
	a->has_ignore = node_attr(n, "ignore_index") != NULL;
	return attr_int(n, "ignore_index", 0, &a->ignore);
}

static void put_f64(Tensor *t, int64_t i, double v)
{
	if (t->dtype == DT_FLOAT)
		((float *)t->data)[i] = (float)v;
	else
		((double *)t->data)[i] = v;
}

/* check shapes; N, C and D (product of d1..dk) */
static int loss_shapes(const Onnx__NodeProto *n, const Tensor *x, const Tensor *t, const Tensor *w,
		       int64_t *N, int64_t *C, int64_t *D)
{
	char s1[128], s2[128];
	if (x->dtype != DT_FLOAT && x->dtype != DT_DOUBLE)
		return -2;
	if (x->rank < 2)
		return op_error(n, "input has rank %d, expected at least 2 ([N, C, ...])", x->rank);
	if (t->dtype != DT_INT32 && t->dtype != DT_INT64)
		return op_error(n, "target is %s, expected int32 or int64", dtype_name(t->dtype));
	int ok = t->rank == x->rank - 1 && t->dims[0] == x->dims[0];
	for (int i = 1; ok && i < t->rank; i++)
		ok = t->dims[i] == x->dims[i + 1];
	if (!ok)
		return op_error(n, "target shape %s does not match input %s without its class axis",
				shape_str(t->rank, t->dims, s1, sizeof s1),
				shape_str(x->rank, x->dims, s2, sizeof s2));
	*N = x->dims[0];
	*C = x->dims[1];
	*D = 1;
	for (int i = 2; i < x->rank; i++)
		*D *= x->dims[i];
	if (w && (w->rank != 1 || w->dims[0] != *C || w->dtype != x->dtype))
		return op_error(n, "weight must be a 1-D tensor of %lld %s values",
				(long long)*C, dtype_name(x->dtype));
	return 0;
}

/* the loss from log-probabilities lp into y (allocated by the caller) */
static int nll(const Onnx__NodeProto *n, const LossArgs *a, const Tensor *lp, const Tensor *t,
	       const Tensor *w, int64_t N, int64_t C, int64_t D, Tensor *y)
{
	double sum = 0, wsum = 0;
	for (int64_t i = 0; i < N; i++) {
		for (int64_t d = 0; d < D; d++) {
			int64_t at = i * D + d;
			int64_t cls = tensor_get_i64(t, at);
			double l = 0, wt = 0;
			if (!(a->has_ignore && cls == a->ignore)) {
				if (cls < 0 || cls >= C)
					return op_error(n, "target %lld at position %lld is not a class in [0, %lld)",
							(long long)cls, (long long)at, (long long)C);
				wt = w ? tensor_get_f64(w, cls) : 1;
				l = -tensor_get_f64(lp, (i * C + cls) * D + d) * wt;
			}
			if (a->reduction == RED_NONE)
				put_f64(y, at, l);
			sum += l;
			wsum += wt;
		}
	}
	if (a->reduction == RED_SUM)
		put_f64(y, 0, sum);
	else if (a->reduction == RED_MEAN)
		put_f64(y, 0, sum / wsum);
	return 0;
}

static int run_loss(RunCtx *c, int softmax)
{
	ElemIO e;
	LossArgs a;
	int64_t N = 0, C = 0, D = 0;
	Tensor *y, *lp = NULL, tmp = {0};
	if (c->nin < 2 || !c->in[0] || !c->in[1])
		return op_error(c->node, "expected inputs %s and %s", softmax ? "scores" : "input",
				softmax ? "labels" : "target");
	int dt = c->in[0]->dtype;
	if (loss_args(c->node, &a) < 0 || eio_begin(&e, c) < 0)
		return -1;
	const Tensor *x = e.in[0], *t = e.in[1], *w = e.nin > 2 ? e.in[2] : NULL;
	int rc = loss_shapes(c->node, x, t, w, &N, &C, &D);
	if (rc == -2)
		return eio_end(&e, op_unsupported_type(c->node, c->opset, dt));
	if (rc < 0)
		return eio_end(&e, -1);
	if (eio_output(&e, 0, dt, a.reduction == RED_NONE ? t->rank : 0, t->dims, &y) < 0)
		return eio_end(&e, -1);
	if (softmax) {
		/* log-softmax over axis 1, into output 1 when wanted */
		if (c->nout > 1 && c->out[1]) {
			if (eio_output(&e, 1, dt, x->rank, x->dims, &lp) < 0)
				return eio_end(&e, -1);
		} else {
			if (tensor_alloc(&tmp, x->dtype, x->rank, x->dims) < 0)
				return eio_end(&e, -1);
			lp = &tmp;
		}
		for (int64_t i = 0; i < N; i++) {
			for (int64_t d = 0; d < D; d++) {
				double mx = -INFINITY, s = 0;
				for (int64_t k = 0; k < C; k++) {
					double v = tensor_get_f64(x, (i * C + k) * D + d);
					mx = v > mx ? v : mx;
				}
				if (isinf(mx))
					mx = 0;
				for (int64_t k = 0; k < C; k++)
					s += exp(tensor_get_f64(x, (i * C + k) * D + d) - mx);
				double lse = log(s) + mx;
				for (int64_t k = 0; k < C; k++) {
					int64_t at = (i * C + k) * D + d;
					put_f64(lp, at, tensor_get_f64(x, at) - lse);
				}
			}
		}
		x = lp;
	}
	rc = nll(c->node, &a, x, t, w, N, C, D, y);
	tensor_free(&tmp);
	return eio_end(&e, rc);
}

static int nll_run(RunCtx *c)
{
	return run_loss(c, 0);
}

static int sce_run(RunCtx *c)
{
	return run_loss(c, 1);
}

static int loss_infer(InferCtx *c)
{
	LossArgs a;
	if (c->nin < 2 || !c->in[0] || !c->in[1])
		return op_error(c->node, "expected 2 inputs");
	if (loss_args(c->node, &a) < 0)
		return -1;
	const ValueType *x = c->in[0];
	if (a.reduction == RED_NONE) {
		if (elem_infer_like(c, 0, 1, x->elem) < 0)
			return -1;
	} else {
		vt_set_tensor(c->out[0], x->elem, 0);
	}
	if (c->nout > 1 && c->out[1])
		return infer_same_as_input(c, 1, 0);
	return 0;
}

OPERATOR(ai_onnx, NegativeLogLikelihoodLoss, 12, loss_infer, nll_run)
OPERATOR(ai_onnx, SoftmaxCrossEntropyLoss, 12, loss_infer, sce_run)
