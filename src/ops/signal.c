/* signal.c — type and shape inference for DFT (TfIdfVectorizer is in
 * string.c).
 *
 * No kernel yet: the interpreter reports DFT as unsupported by name. */
#include "ops/op.h"

/* DFT-17: axis attribute (default 1); DFT-20: axis input (default -2).
 * Output: the input's shape with the last dimension 2 (complex), the signal
 * axis set by dft_length when known, halved plus one when onesided. */
static int dft_infer(InferCtx *c)
{
	if (c->nin < 1 || !c->in[0])
		return op_error(c->node, "missing input");
	const ValueType *x = c->in[0];
	int64_t onesided, axis = c->opset >= 20 ? -2 : 1;
	if (attr_int(c->node, "onesided", 0, &onesided) < 0)
		return -1;
	if (c->opset < 20 && attr_int(c->node, "axis", 1, &axis) < 0)
		return -1;
	if (c->opset >= 20 && c->nin > 2 && c->in[2]) {
		if (!c->in[2]->value) {
			vt_set_tensor(c->out[0], x->elem, x->rank);
			return 0;
		}
		axis = tensor_get_i64(c->in[2]->value, 0);
	}
	vt_set_tensor(c->out[0], x->elem, x->rank);
	if (x->rank < 0)
		return 0;
	if (x->rank < 2)
		return op_error(c->node, "input rank %d is below 2 (signal and complex dimensions)", x->rank);
	if (x->dims[x->rank - 1].v >= 0 && x->dims[x->rank - 1].v != 1 && x->dims[x->rank - 1].v != 2)
		return op_error(c->node, "last dimension is %lld, expected 1 (real) or 2 (complex)",
				(long long)x->dims[x->rank - 1].v);
	int64_t ax;
	/* the axis counts over the signal dims, the trailing complex dim excluded */
	if (norm_axis(c->node, axis < 0 ? axis - 1 : axis, x->rank, &ax) < 0)
		return -1;
	if (ax == x->rank - 1)
		return op_error(c->node, "axis %lld names the complex dimension", (long long)axis);
	for (int i = 0; i < x->rank; i++)
		c->out[0]->dims[i] = x->dims[i];
	c->out[0]->dims[x->rank - 1] = (Dim){2, NULL};
	Dim n = x->dims[ax];
	if (c->nin > 1 && c->in[1]) {
		n = c->in[1]->value ? (Dim){tensor_get_i64(c->in[1]->value, 0), NULL} : infer_fresh_dim(c);
		if (n.v == 0 || n.v < -1)
			return op_error(c->node, "dft_length %lld is not positive", (long long)n.v);
	}
	if (onesided)
		n = n.v >= 0 ? (Dim){n.v / 2 + 1, NULL} : infer_fresh_dim(c);
	c->out[0]->dims[ax] = n;
	return 0;
}

OPERATOR(ai_onnx, DFT, 17, dft_infer, NULL)
