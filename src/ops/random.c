/* random.c — type and shape inference for the random-number operators
 * (Bernoulli, RandomUniform, RandomNormal and their *Like forms).
 *
 * They have no kernels: their outputs are random by definition, calibration
 * and verification need deterministic models, and the interpreter reports
 * them as unsupported by name. Inference lets the rest of a graph that
 * contains them (dropout-like training leftovers) still be typed. */
#include "ops/op.h"

/* the dtype attribute, or dflt when absent */
static int attr_dtype(const Onnx__NodeProto *n, int dflt, int *out)
{
	int64_t dt;
	if (attr_int(n, "dtype", dflt, &dt) < 0)
		return -1;
	if (dt <= 0 || dt >= DT_MAX || dtype_bits((int)dt) == 0)
		return op_error(n, "dtype %lld is not a tensor element type", (long long)dt);
	*out = (int)dt;
	return 0;
}

/* Bernoulli, RandomUniformLike, RandomNormalLike: input's shape, dtype
 * attribute or the input's element type */
static int like_infer(InferCtx *c)
{
	if (c->nin < 1 || !c->in[0])
		return op_error(c->node, "missing input");
	const ValueType *x = c->in[0];
	int dt;
	if (attr_dtype(c->node, x->elem, &dt) < 0)
		return -1;
	if (infer_same_as_input(c, 0, 0) < 0)
		return -1;
	c->out[0]->elem = dt;
	return 0;
}

/* RandomUniform, RandomNormal: shape attribute, dtype default float */
static int shape_attr_infer(InferCtx *c)
{
	const int64_t *shape;
	size_t n;
	int dt;
	if (attr_ints(c->node, "shape", &shape, &n) < 0 || attr_dtype(c->node, DT_FLOAT, &dt) < 0)
		return -1;
	if (!shape)
		return op_error(c->node, "missing attribute 'shape'");
	if (n > QM_MAX_RANK)
		return op_error(c->node, "rank %zu exceeds the supported maximum %d", n, QM_MAX_RANK);
	vt_set_tensor(c->out[0], dt, (int)n);
	for (size_t i = 0; i < n; i++) {
		if (shape[i] < 0)
			return op_error(c->node, "shape[%zu] = %lld is negative", i, (long long)shape[i]);
		c->out[0]->dims[i].v = shape[i];
	}
	return 0;
}

OPERATOR(ai_onnx, Bernoulli, 15, like_infer, NULL)
OPERATOR(ai_onnx, RandomUniformLike, 1, like_infer, NULL)
OPERATOR(ai_onnx, RandomNormalLike, 1, like_infer, NULL)
OPERATOR(ai_onnx, RandomUniform, 1, shape_attr_infer, NULL)
OPERATOR(ai_onnx, RandomNormal, 1, shape_attr_infer, NULL)
