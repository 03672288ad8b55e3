/* dropout.c — Dropout for inference: the output is the input and the mask
 * is all true. Training mode with a non-zero ratio draws random numbers
 * nobody could reproduce and is refused by name. */
#include <string.h>

#include "ops/nn.h"
#include "ops/op.h"
#include "ops/shapeutil.h"
#include "util.h"

static int dropout_infer(InferCtx *c)
{
	if (infer_same_as_input(c, 0, 0) < 0)
		return -1;
	if (c->nout > 1 && c->out[1] && infer_same_as_input(c, 1, 0) < 0)
		return -1;
	if (c->nout > 1 && c->out[1] && c->opset >= 10)
		c->out[1]->elem = DT_BOOL;
	return 0;
}

static int dropout_run(RunCtx *c)
{
	const Tensor *x = c->in[0];
	int training = 0;
	if (c->opset >= 12) {
		const Tensor *tr = c->nin > 2 ? c->in[2] : NULL, *rt = c->nin > 1 ? c->in[1] : NULL;
		if (tr && tr->numel > 0 && tensor_get_f64(tr, 0) != 0) {
			double ratio = rt && rt->numel > 0 ? tensor_get_f64(rt, 0) : 0.5;
			if (ratio != 0)
				training = 1;
		}
	} else if (c->opset < 7) {
		int64_t is_test;
		if (attr_int(c->node, "is_test", 0, &is_test) < 0)
			return -1;
		if (!is_test) {
			float ratio;
			if (attr_float(c->node, "ratio", 0.5f, &ratio) < 0)
				return -1;
			training = ratio != 0;
		}
	}
	if (training)
		return op_error(c->node, "Dropout-%lld in training mode (random masks) is not supported",
				(long long)c->opset);
	if (op_output(c, 0, x->dtype, x->rank, x->dims) < 0)
		return -1;
	if (x->nbytes)
		memcpy(c->out[0]->data, x->data, x->nbytes);
	if (c->nout > 1 && c->out[1]) {
		int mdt = c->opset >= 10 ? DT_BOOL : x->dtype;
		if (op_output(c, 1, mdt, x->rank, x->dims) < 0)
			return -1;
		if (mdt == DT_BOOL) {
			memset(c->out[1]->data, 1, c->out[1]->nbytes);
		} else {
			if (!dt_numeric(mdt))
				return op_unsupported_type(c->node, c->opset, mdt);
			for (int64_t i = 0; i < x->numel; i++)
				elem_put_f64(mdt, c->out[1]->data, i, 1.0);
		}
	}
	return 0;
}

OPERATOR(ai_onnx, Dropout, 1, dropout_infer, dropout_run)
