/* pool.c — MaxPool, AveragePool, LpPool and their Global forms: inference
 * and kernels.
 *
 * Windows of 1 to 3 spatial dimensions are computed as 3-D ones with leading
 * unit dimensions, one (image, channel) plane at a time, planes spread over
 * threads. Values are pooled in float32 (exact for the 8-bit and float16
 * types MaxPool accepts); MaxPool's optional Indices output counts in the
 * flattened input, row-major or, with storage_order 1, column-major within
 * each plane. */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops/nn.h"
#include "ops/op.h"
#include "ops/shapeutil.h"
#include "util.h"

enum { POOL_MAX, POOL_AVG, POOL_LP };

/* ---- inference ---- */

static int pool_infer(InferCtx *c)
{
	const ValueType *x = nn_in(c, 0);
	if (!x)
		return -1;
	ValueType *o = c->out[0];
	vt_set_tensor(o, x->elem, x->rank);
	if (c->nout > 1 && c->out[1])
		vt_set_tensor(c->out[1], DT_INT64, x->rank);
	if (x->rank < 0)
		return 0;
	if (x->rank < 3)
		return op_error(c->node, "input must have rank 3 or more (N, C, spatial...), got %d", x->rank);
	int nsp = x->rank - 2;
	int64_t in[QM_MAX_RANK];
	for (int i = 0; i < nsp; i++)
		in[i] = x->dims[i + 2].v;
	NnGeom g;
	if (nn_geom(c->node, nsp, in, NULL, 1, &g) < 0)
		return -1;
	o->dims[0] = x->dims[0];
	o->dims[1] = x->dims[1];
	for (int i = 0; i < nsp; i++)
		o->dims[i + 2] = nn_dim(c, g.out[i]);
	if (c->nout > 1 && c->out[1])
		for (int i = 0; i < x->rank; i++)
			c->out[1]->dims[i] = o->dims[i];
	return 0;
}

static int global_pool_infer(InferCtx *c)
{
	const ValueType *x = nn_in(c, 0);
	if (!x)
		return -1;
	ValueType *o = c->out[0];
	vt_set_tensor(o, x->elem, x->rank);
	if (x->rank < 0)
		return 0;
	if (x->rank < 2)
		return op_error(c->node, "input must have rank 2 or more (N, C, spatial...), got %d", x->rank);
	o->dims[0] = x->dims[0];
	o->dims[1] = x->dims[1];
	for (int i = 2; i < x->rank; i++)
		o->dims[i] = (Dim){1, NULL};
	return 0;
}

/* ---- kernels ---- */

typedef struct PoolArgs {
	int kind;
	int64_t in[3], k[3], s[3], d[3], pb[3], pe[3], out[3];
	int64_t isz, osz;
	int count_pad, colmajor;
	float p;
	const float *x;
	float *y;
	int64_t *ind;
} PoolArgs;

static void pool_planes(void *arg, int64_t lo, int64_t hi)
{
	const PoolArgs *a = arg;
	for (int64_t pl = lo; pl < hi; pl++) {
		const float *x = a->x + pl * a->isz;
		float *y = a->y + pl * a->osz;
		int64_t *ind = a->ind ? a->ind + pl * a->osz : NULL;
		for (int64_t od = 0; od < a->out[0]; od++)
		for (int64_t oh = 0; oh < a->out[1]; oh++)
		for (int64_t ow = 0; ow < a->out[2]; ow++) {
			float acc = a->kind == POOL_MAX ? -INFINITY : 0.0f;
			int64_t arg_ = -1, cnt = 0;
			for (int64_t kd = 0; kd < a->k[0]; kd++) {
				int64_t id = od * a->s[0] - a->pb[0] + kd * a->d[0];
				int din = id >= 0 && id < a->in[0];
				int dpad = id >= -a->pb[0] && id < a->in[0] + a->pe[0];
				for (int64_t kh = 0; kh < a->k[1]; kh++) {
					int64_t ih = oh * a->s[1] - a->pb[1] + kh * a->d[1];
					int hin = din && ih >= 0 && ih < a->in[1];
					int hpad = dpad && ih >= -a->pb[1] && ih < a->in[1] + a->pe[1];
					for (int64_t kw = 0; kw < a->k[2]; kw++) {
						int64_t iw = ow * a->s[2] - a->pb[2] + kw * a->d[2];
						if (!hin || iw < 0 || iw >= a->in[2]) {
							if (hpad && iw >= -a->pb[2] && iw < a->in[2] + a->pe[2] && a->count_pad)
								cnt++;
							continue;
						}
						int64_t at = (id * a->in[1] + ih) * a->in[2] + iw;
						float v = x[at];
						cnt++;
						if (a->kind == POOL_MAX) {
							if (v > acc || arg_ < 0) {
								acc = v;
								arg_ = at;
							}
						} else if (a->kind == POOL_AVG) {
							acc += v;
						} else {
							acc += powf(fabsf(v), a->p);
						}
					}
				}
			}
			int64_t o = (od * a->out[1] + oh) * a->out[2] + ow;
			if (a->kind == POOL_MAX) {
				y[o] = acc;
				if (ind) {
					int64_t idx = arg_ < 0 ? 0 : arg_;
					if (a->colmajor) {
						int64_t iw = idx % a->in[2], ih = idx / a->in[2] % a->in[1];
						int64_t id = idx / (a->in[1] * a->in[2]);
						idx = (iw * a->in[1] + ih) * a->in[0] + id;
					}
					ind[o] = pl * a->isz + idx;
				}
			} else if (a->kind == POOL_AVG) {
				y[o] = cnt ? acc / (float)cnt : 0.0f;
			} else {
				y[o] = a->p == 2.0f ? sqrtf(acc) : powf(acc, 1.0f / a->p);
			}
		}
	}
}

/* read x as floats (any numeric type) and allocate output 0 and its float buffer */
static int pool_io(RunCtx *c, const Tensor *x, int rank, const int64_t *dims,
		   const float **xf, float **tx, float **y, float **ty)
{
	*tx = *ty = NULL;
	if (x->dtype == DT_FLOAT && (uintptr_t)x->data % sizeof(float) == 0)
		*xf = x->data;
	else
		*xf = *tx = nn_f32_copy(x);
	if (op_output(c, 0, x->dtype, rank, dims) < 0) {
		free(*tx);
		return -1;
	}
	if (x->dtype == DT_FLOAT)
		*y = c->out[0]->data;
	else
		*y = *ty = xmalloc(sizeof(float) * (size_t)(c->out[0]->numel ? c->out[0]->numel : 1));
	return 0;
}

static void pool_done(RunCtx *c, float *tx, float *ty)
{
	if (ty) {
		nn_f32_store(c->out[0]->dtype, c->out[0]->data, ty, c->out[0]->numel);
		free(ty);
	}
	free(tx);
}

static int pool_type_ok(RunCtx *c, int kind, int dt)
{
	if (nn_is_float(dt) || (kind == POOL_MAX && (dt == DT_INT8 || dt == DT_UINT8)))
		return 0;
	return op_unsupported_type(c->node, c->opset, dt);
}

/* LpPool's p: a float attribute in opset 1, an int since */
static int lp_p(RunCtx *c, float *p)
{
	const Onnx__AttributeProto *at = node_attr(c->node, "p");
	*p = 2.0f;
	if (at && at->has_type && at->type == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT) {
		*p = at->f;
	} else {
		int64_t v;
		if (attr_int(c->node, "p", 2, &v) < 0)
			return -1;
		*p = (float)v;
	}
	if (!(*p > 0.0f))
		return op_error(c->node, "p must be positive, got %g", (double)*p);
	return 0;
}

static int pool_run_kind(RunCtx *c, int kind)
{
	const Tensor *x = c->in[0];
	if (pool_type_ok(c, kind, x->dtype) < 0)
		return -1;
	if (x->rank < 3)
		return op_error(c->node, "input must have rank 3 or more (N, C, spatial...), got %d", x->rank);
	int nsp = x->rank - 2;
	if (nsp > 3)
		return op_error(c->node, "%s-%lld with %d spatial dimensions is not supported (at most 3)",
				c->node->op_type, (long long)c->opset, nsp);
	NnGeom g;
	if (nn_geom(c->node, nsp, x->dims + 2, NULL, 1, &g) < 0)
		return -1;
	PoolArgs a;
	memset(&a, 0, sizeof a);
	a.kind = kind;
	int64_t cip = 0, so = 0;
	if (kind == POOL_AVG && attr_int(c->node, "count_include_pad", 0, &cip) < 0)
		return -1;
	if (kind == POOL_MAX && attr_int(c->node, "storage_order", 0, &so) < 0)
		return -1;
	if (kind == POOL_LP && lp_p(c, &a.p) < 0)
		return -1;
	a.count_pad = (int)cip;
	a.colmajor = (int)so;
	for (int j = 0; j < 3; j++) {
		a.in[j] = a.k[j] = a.s[j] = a.d[j] = a.out[j] = 1;
		a.pb[j] = a.pe[j] = 0;
	}
	for (int i = 0; i < nsp; i++) {
		int j = 3 - nsp + i;
		a.in[j] = g.in[i];
		a.k[j] = g.k[i];
		a.s[j] = g.s[i];
		a.d[j] = g.d[i];
		a.pb[j] = g.pb[i];
		a.pe[j] = g.pe[i];
		a.out[j] = g.out[i];
	}
	a.isz = a.in[0] * a.in[1] * a.in[2];
	a.osz = a.out[0] * a.out[1] * a.out[2];
	int64_t dims[QM_MAX_RANK];
	dims[0] = x->dims[0];
	dims[1] = x->dims[1];
	for (int i = 0; i < nsp; i++)
		dims[i + 2] = g.out[i];
	float *tx, *ty;
	if (pool_io(c, x, x->rank, dims, &a.x, &tx, &a.y, &ty) < 0)
		return -1;
	if (kind == POOL_MAX && c->nout > 1 && c->out[1]) {
		if (op_output(c, 1, DT_INT64, x->rank, dims) < 0) {
			free(tx);
			free(ty);
			return -1;
		}
		a.ind = c->out[1]->data;
	}
	int64_t planes = x->dims[0] * x->dims[1];
	int64_t work = planes * a.osz * a.k[0] * a.k[1] * a.k[2];
	nn_parallel(work >= 65536 ? c->threads : 1, planes, pool_planes, &a);
	pool_done(c, tx, ty);
	return 0;
}

static int maxpool_run(RunCtx *c)
{
	return pool_run_kind(c, POOL_MAX);
}

static int averagepool_run(RunCtx *c)
{
	return pool_run_kind(c, POOL_AVG);
}

static int lppool_run(RunCtx *c)
{
	return pool_run_kind(c, POOL_LP);
}

static int global_run_kind(RunCtx *c, int kind)
{
	const Tensor *x = c->in[0];
	float p = 2.0f;
	if (pool_type_ok(c, kind, x->dtype) < 0)
		return -1;
	if (x->rank < 2)
		return op_error(c->node, "input must have rank 2 or more (N, C, spatial...), got %d", x->rank);
	if (kind == POOL_LP && lp_p(c, &p) < 0)
		return -1;
	int64_t dims[QM_MAX_RANK], isz = 1;
	dims[0] = x->dims[0];
	dims[1] = x->dims[1];
	for (int i = 2; i < x->rank; i++) {
		dims[i] = 1;
		isz *= x->dims[i];
	}
	const float *xf;
	float *tx, *y, *ty;
	if (pool_io(c, x, x->rank, dims, &xf, &tx, &y, &ty) < 0)
		return -1;
	int64_t planes = x->dims[0] * x->dims[1];
	for (int64_t pl = 0; pl < planes; pl++) {
		const float *xp = xf + pl * isz;
		if (kind == POOL_MAX) {
			float m = -INFINITY;
			for (int64_t i = 0; i < isz; i++)
				if (xp[i] > m || i == 0)
					m = xp[i];
			y[pl] = m;
		} else if (kind == POOL_AVG) {
			double s = 0;
			for (int64_t i = 0; i < isz; i++)
				s += xp[i];
			y[pl] = isz ? (float)(s / (double)isz) : 0.0f;
		} else {
			double s = 0;
			for (int64_t i = 0; i < isz; i++)
				s += pow(fabs(xp[i]), (double)p);
			y[pl] = (float)pow(s, 1.0 / (double)p);
		}
	}
	pool_done(c, tx, ty);
	return 0;
}

static int globalmaxpool_run(RunCtx *c)
{
	return global_run_kind(c, POOL_MAX);
}

static int globalaveragepool_run(RunCtx *c)
{
	return global_run_kind(c, POOL_AVG);
}

static int globallppool_run(RunCtx *c)
{
	return global_run_kind(c, POOL_LP);
}

OPERATOR(ai_onnx, AveragePool, 1, pool_infer, averagepool_run)
OPERATOR(ai_onnx, GlobalAveragePool, 1, global_pool_infer, globalaveragepool_run)
OPERATOR(ai_onnx, GlobalLpPool, 1, global_pool_infer, globallppool_run)
OPERATOR(ai_onnx, GlobalMaxPool, 1, global_pool_infer, globalmaxpool_run)
OPERATOR(ai_onnx, LpPool, 1, pool_infer, lppool_run)
OPERATOR(ai_onnx, MaxPool, 1, pool_infer, maxpool_run)
