/* depthspace.c — DepthToSpace (DCR and CRD) and SpaceToDepth: inference and
 * kernels. Pure element moves, so every byte-sized element type works. */
#include <string.h>

#include "ops/nn.h"
#include "ops/op.h"
#include "ops/shapeutil.h"
#include "util.h"

static int get_block(const Onnx__NodeProto *n, int64_t *b)
{
	if (attr_int(n, "blocksize", 0, b) < 0)
		return -1;
	if (*b < 1)
		return op_error(n, "attribute 'blocksize' is required and must be positive");
	return 0;
}

static int get_crd(const Onnx__NodeProto *n, int *crd)
{
	char m[16];
	if (attr_str(n, "mode", "DCR", m, sizeof m) < 0)
		return -1;
	if (strcmp(m, "DCR") && strcmp(m, "CRD"))
		return op_error(n, "mode '%s' is not supported (DCR or CRD)", m);
	*crd = !strcmp(m, "CRD");
	return 0;
}

static Dim dim_scale(InferCtx *c, Dim d, int64_t mul, int64_t div)
{
	if (d.v < 0)
		return nn_dim(c, -1);
	return (Dim){d.v * mul / div, NULL};
}

static int space_infer(InferCtx *c, int to_space)
{
	const ValueType *x = nn_in(c, 0);
	int64_t b;
	if (!x || get_block(c->node, &b) < 0)
		return -1;
	ValueType *o = c->out[0];
	vt_set_tensor(o, x->elem, x->rank);
	if (x->rank < 0)
		return 0;
	if (x->rank != 4)
		return op_error(c->node, "input must have rank 4, got %d", x->rank);
	o->dims[0] = x->dims[0];
	if (to_space) {
		if (x->dims[1].v >= 0 && x->dims[1].v % (b * b))
			return op_error(c->node, "%lld channels are not divisible by blocksize^2 = %lld",
					(long long)x->dims[1].v, (long long)(b * b));
		o->dims[1] = dim_scale(c, x->dims[1], 1, b * b);
		o->dims[2] = dim_scale(c, x->dims[2], b, 1);
		o->dims[3] = dim_scale(c, x->dims[3], b, 1);
	} else {
		for (int i = 2; i < 4; i++)
			if (x->dims[i].v >= 0 && x->dims[i].v % b)
				return op_error(c->node, "spatial size %lld is not divisible by blocksize %lld",
						(long long)x->dims[i].v, (long long)b);
		o->dims[1] = dim_scale(c, x->dims[1], b * b, 1);
		o->dims[2] = dim_scale(c, x->dims[2], 1, b);
		o->dims[3] = dim_scale(c, x->dims[3], 1, b);
	}
	return 0;
}

static int depthtospace_infer(InferCtx *c)
{
	return space_infer(c, 1);
}

static int spacetodepth_infer(InferCtx *c)
{
	return space_infer(c, 0);
}

/* move between space layout [N, C, H*b, W*b] and depth layout
 * [N, C*b*b, H, W]; channel of (c, i, j) is (i*b+j)*C + c (DCR) or
 * c*b*b + i*b + j (CRD) */
static int space_run(RunCtx *c, int to_space)
{
	const Tensor *x = c->in[0];
	int64_t b;
	int crd = 0;
	size_t es;
	if (op_elemsize(c->node, c->opset, x->dtype, &es) < 0 || get_block(c->node, &b) < 0)
		return -1;
	if (get_crd(c->node, &crd) < 0)
		return -1;
	if (x->rank != 4)
		return op_error(c->node, "input must have rank 4, got %d", x->rank);
	int64_t N = x->dims[0], C, H, W, dims[4];
	if (to_space) {
		if (x->dims[1] % (b * b))
			return op_error(c->node, "%lld channels are not divisible by blocksize^2 = %lld",
					(long long)x->dims[1], (long long)(b * b));
		C = x->dims[1] / (b * b);
		H = x->dims[2];
		W = x->dims[3];
		dims[0] = N; dims[1] = C; dims[2] = H * b; dims[3] = W * b;
	} else {
		if (x->dims[2] % b || x->dims[3] % b)
			return op_error(c->node, "spatial sizes %lld x %lld are not divisible by blocksize %lld",
					(long long)x->dims[2], (long long)x->dims[3], (long long)b);
		C = x->dims[1];
		H = x->dims[2] / b;
		W = x->dims[3] / b;
		dims[0] = N; dims[1] = C * b * b; dims[2] = H; dims[3] = W;
	}
	if (op_output(c, 0, x->dtype, 4, dims) < 0)
		return -1;
	const unsigned char *xp = x->data;
	unsigned char *yp = c->out[0]->data;
	for (int64_t n = 0; n < N; n++)
		for (int64_t ch = 0; ch < C; ch++)
			for (int64_t i = 0; i < b; i++)
				for (int64_t j = 0; j < b; j++) {
					int64_t dc = crd ? ch * b * b + i * b + j : (i * b + j) * C + ch;
					for (int64_t h = 0; h < H; h++)
						for (int64_t w = 0; w < W; w++) {
							int64_t di = ((n * C * b * b + dc) * H + h) * W + w;
							int64_t si = ((n * C + ch) * H * b + h * b + i) * W * b + w * b + j;
							if (to_space)
								elem_copy(yp + (size_t)si * es, xp + (size_t)di * es, es);
							else
								elem_copy(yp + (size_t)di * es, xp + (size_t)si * es, es);
						}
				}
	return 0;
}

static int depthtospace_run(RunCtx *c)
{
	return space_run(c, 1);
}

static int spacetodepth_run(RunCtx *c)
{
	return space_run(c, 0);
}

OPERATOR(ai_onnx, DepthToSpace, 1, depthtospace_infer, depthtospace_run)
OPERATOR(ai_onnx, SpaceToDepth, 1, spacetodepth_infer, spacetodepth_run)
