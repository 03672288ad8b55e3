/* qlinear_ms.c — onnxruntime's com.microsoft QLinear operators on 8-bit
 * tensors: QLinearAdd, QLinearMul, QLinearGlobalAveragePool,
 * QLinearAveragePool, QLinearConcat, QLinearSigmoid, QLinearLeakyRelu and
 * QLinearSoftmax. They are what onnxruntime's (and our) static QOperator
 * quantization emits for these operators, so the interpreter must run them
 * to calibrate, verify and compare such models.
 *
 * Every operator dequantizes, computes and requantizes (round half to even,
 * saturate to int8/uint8), in the order of operations onnxruntime's CPU
 * kernels use, so the results are the same bytes:
 *   - QLinearAdd as its AVX2 kernel: with rA = sA / sC, rB = sB / sC,
 *     y = fma(a, rA, fma(b, rB, zC - (rA zA + rB zB))); an input broadcast
 *     along the innermost run is folded into the constant first;
 *   - QLinearMul: (a - zA)(b - zB) as an integer, times sA sB / sC, plus zC;
 *   - QLinearGlobalAveragePool: the integer sum minus zX n, times
 *     sX / (sY n);
 *   - QLinearAveragePool: the mean of the dequantized window in float,
 *     divided by sY;
 *   - QLinearConcat, QLinearLeakyRelu, QLinearSigmoid: a table of the 256
 *     input codes, quantize(f(dequantize(x))). onnxruntime's Sigmoid is
 *     MLAS's rational approximation of the logistic function, ours is
 *     1 / (1 + exp(-x)): a code near a rounding boundary may differ by one;
 *   - QLinearSoftmax: onnxruntime's table of exp((i - 255 + shift) sX),
 *     rows summed in float, y = round(e floor(1 / sY) / sum) + zY.
 * Scales and zero points are per tensor (one element). channels_last
 * pooling is refused by name. */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops/bcast.h"
#include "ops/nn.h"
#include "ops/op.h"
#include "ops/shapeutil.h"
#include "util.h"

/* ---- quantization parameters and 8-bit elements ---- */

static int q8_type(int dt)
{
	return dt == DT_UINT8 || dt == DT_INT8;
}

static inline int32_t q8_get(int dt, const void *p, int64_t i)
{
	return dt == DT_UINT8 ? ((const uint8_t *)p)[i] : ((const int8_t *)p)[i];
}

static inline int32_t q8_lo(int dt)
{
	return dt == DT_UINT8 ? 0 : -128;
}

static inline int32_t q8_hi(int dt)
{
	return dt == DT_UINT8 ? 255 : 127;
}

static inline void q8_put(int dt, void *p, int64_t i, int32_t v)
{
	v = v < q8_lo(dt) ? q8_lo(dt) : v > q8_hi(dt) ? q8_hi(dt) : v;
	if (dt == DT_UINT8)
		((uint8_t *)p)[i] = (uint8_t)v;
	else
		((int8_t *)p)[i] = (int8_t)v;
}

/* round half to even; |v| beyond int32 saturates (the output clamps it) */
static inline int32_t q8_round(float v)
{
	if (!(v > -2147483520.0f))   /* also NaN, as MLAS's max/min pass it to the low end */
		return INT32_MIN;
	if (v > 2147483520.0f)
		return INT32_MAX;
	return (int32_t)nn_round_even(v);
}

/* rounded value r plus zero point z, saturating at the int32 ends */
static inline int32_t q8_add(int32_t r, int32_t z)
{
	return r < INT32_MIN + 256 ? INT32_MIN : r > INT32_MAX - 256 ? INT32_MAX : r + z;
}

/* the code of float v with scale s and zero point z */
static inline int32_t q8_quant(float v, float s, int32_t z)
{
	return q8_add(q8_round(v / s), z);
}

/* the scale of input si and the zero point of input zi (absent: 0) for data
 * of type dt */
static int qparam(RunCtx *c, size_t si, size_t zi, int dt, float *s, int32_t *z)
{
	const Tensor *st = si < c->nin ? c->in[si] : NULL, *zt = zi < c->nin ? c->in[zi] : NULL;
	if (!st)
		return op_error(c->node, "missing scale input %zu", si);
	if (st->dtype != DT_FLOAT || st->numel != 1)
		return op_error(c->node, "input %zu (a scale) must be one float, got %s with %lld elements", si,
				dtype_name(st->dtype), (long long)st->numel);
	memcpy(s, st->data, sizeof *s);
	if (!(*s > 0.0f) || !isfinite(*s))
		return op_error(c->node, "input %zu (a scale) must be positive and finite, got %g", si, (double)*s);
	*z = 0;
	if (!zt)
		return 0;
	if (zt->dtype != dt || zt->numel != 1)
		return op_error(c->node, "input %zu (a zero point) must be one %s, got %s with %lld elements", zi,
				dtype_name(dt), dtype_name(zt->dtype), (long long)zt->numel);
	*z = q8_get(dt, zt->data, 0);
	return 0;
}

/* data input i: present, int8 or uint8 */
static int qdata(RunCtx *c, size_t i, const Tensor **x)
{
	if (run_need(c, i) < 0)
		return -1;
	*x = c->in[i];
	if (!q8_type((*x)->dtype))
		return op_unsupported_type(c->node, c->opset, (*x)->dtype);
	return 0;
}

static int channels_first(const Onnx__NodeProto *n)
{
	int64_t cl;
	if (attr_int(n, "channels_last", 0, &cl) < 0)
		return -1;
	if (cl)
		return op_error(n, "channels_last = 1 is not supported (NCHW only)");
	return 0;
}

/* ---- inference ---- */

static int same_infer(InferCtx *c)
{
	if (infer_need(c, 0) < 0)
		return -1;
	return infer_same_as_input(c, 0, 0);
}

static int binary_infer(InferCtx *c)
{
	const ValueType *a = nn_in(c, 0), *b = nn_in(c, 3);
	if (!a || !b)
		return -1;
	if (a->elem && b->elem && a->elem != b->elem)
		return op_error(c->node, "inputs A and B have different types: %s and %s", dtype_name(a->elem),
				dtype_name(b->elem));
	vt_set_tensor(c->out[0], a->elem, -1);
	return broadcast_dims(c->node, a, b, c->out[0]);
}

static int gap_infer(InferCtx *c)
{
	const ValueType *x = nn_in(c, 0);
	if (!x || channels_first(c->node) < 0)
		return -1;
	ValueType *o = c->out[0];
	vt_set_tensor(o, x->elem, x->rank);
	if (x->rank < 0)
		return 0;
	if (x->rank < 3)
		return op_error(c->node, "input must have rank 3 or more (N, C, spatial...), got %d", x->rank);
	for (int i = 0; i < x->rank; i++)
		o->dims[i] = i < 2 ? x->dims[i] : (Dim){1, NULL};
	return 0;
}

static int avgpool_infer(InferCtx *c)
{
	const ValueType *x = nn_in(c, 0);
	if (!x || channels_first(c->node) < 0)
		return -1;
	ValueType *o = c->out[0];
	vt_set_tensor(o, x->elem, x->rank);
	if (x->rank < 0)
		return 0;
	if (x->rank < 3 || x->rank - 2 > NN_MAXSP)
		return op_error(c->node, "input must have rank 3 to %d (N, C, spatial...), got %d", NN_MAXSP + 2,
				x->rank);
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
	return 0;
}

/* inputs: Y_scale, Y_zero_point, then (X, X_scale, X_zero_point) triples */
static int concat_infer(InferCtx *c)
{
	int64_t axis;
	if (c->nin < 5 || (c->nin - 2) % 3)
		return op_error(c->node, "expected Y_scale, Y_zero_point and triples (X, scale, zero point), got %zu inputs",
				c->nin);
	if (attr_int(c->node, "axis", 0, &axis) < 0)
		return -1;
	const ValueType *x0 = nn_in(c, 2);
	if (!x0)
		return -1;
	ValueType *o = c->out[0];
	vt_set_tensor(o, x0->elem, x0->rank);
	if (x0->rank < 0)
		return 0;
	int64_t ax;
	if (norm_axis(c->node, axis, x0->rank, &ax) < 0)
		return -1;
	for (int i = 0; i < x0->rank; i++)
		o->dims[i] = x0->dims[i];
	int64_t sum = 0;
	for (size_t k = 2; k < c->nin; k += 3) {
		const ValueType *x = nn_in(c, k);
		if (!x)
			return -1;
		if (x->rank >= 0 && x->rank != x0->rank)
			return op_error(c->node, "input %zu has rank %d, expected %d", k, x->rank, x0->rank);
		if (x->rank < 0 || x->dims[ax].v < 0 || sum < 0)
			sum = -1;
		else
			sum += x->dims[ax].v;
	}
	o->dims[ax] = nn_dim(c, sum);
	return 0;
}

/* ---- QLinearAdd, QLinearMul ---- */

typedef struct Bin {
	int dt;
	float sa, sb, sc;
	int32_t za, zb, zc;
} Bin;

/* one broadcast row of QLinearAdd; sa/sb: input a/b is one value along it */
static void add_row(const Bin *p, const void *a, int64_t ia, int sa, const void *b, int64_t ib, int sb, void *y,
		    int64_t iy, int64_t n)
{
	float ra = p->sa / p->sc, rb = p->sb / p->sc;
	float fixed = (float)p->zc - fmaf(ra, (float)p->za, rb * (float)p->zb);
	if (sa)
		fixed = fmaf((float)q8_get(p->dt, a, ia), ra, fixed);
	if (sb)
		fixed = fmaf((float)q8_get(p->dt, b, ib), rb, fixed);
	for (int64_t i = 0; i < n; i++) {
		float v;
		if (sa)
			v = fmaf((float)q8_get(p->dt, b, ib + i), rb, fixed);
		else if (sb)
			v = fmaf((float)q8_get(p->dt, a, ia + i), ra, fixed);
		else
			v = fmaf((float)q8_get(p->dt, a, ia + i), ra, fmaf((float)q8_get(p->dt, b, ib + i), rb, fixed));
		q8_put(p->dt, y, iy + i, q8_round(v));
	}
}

static void mul_row(const Bin *p, const void *a, int64_t ia, int sa, const void *b, int64_t ib, int sb, void *y,
		    int64_t iy, int64_t n)
{
	float r = p->sa * p->sb / p->sc, zc = (float)p->zc;
	for (int64_t i = 0; i < n; i++) {
		int32_t va = q8_get(p->dt, a, ia + (sa ? 0 : i)) - p->za, vb = q8_get(p->dt, b, ib + (sb ? 0 : i)) - p->zb;
		q8_put(p->dt, y, iy + i, q8_round((float)(va * vb) * r + zc));
	}
}

static int binary_run(RunCtx *c, int mul)
{
	const Tensor *a, *b;
	Bin p;
	if (qdata(c, 0, &a) < 0 || qdata(c, 3, &b) < 0)
		return -1;
	if (a->dtype != b->dtype)
		return op_error(c->node, "inputs A and B have different types: %s and %s", dtype_name(a->dtype),
				dtype_name(b->dtype));
	p.dt = a->dtype;
	if (qparam(c, 1, 2, p.dt, &p.sa, &p.za) < 0 || qparam(c, 4, 5, p.dt, &p.sb, &p.zb) < 0 ||
	    qparam(c, 6, 7, p.dt, &p.sc, &p.zc) < 0)
		return -1;
	const Tensor *in[2] = {a, b};
	int rank;
	int64_t dims[QM_MAX_RANK];
	if (bcast_shape_t(c->node, 2, in, &rank, dims) < 0 || op_output(c, 0, p.dt, rank, dims) < 0)
		return -1;
	BcastIter it;
	bcast_begin(&it, rank, dims, 2, in);
	void *y = c->out[0]->data;
	while (bcast_next(&it)) {
		/* onnxruntime looks at a one-element run of A first */
		int sa = it.step[0] == 0 || it.n == 1, sb = !sa && it.step[1] == 0;
		(mul ? mul_row : add_row)(&p, a->data, it.off[0], sa, b->data, it.off[1], sb, y, it.out, it.n);
	}
	return 0;
}

static int add_run(RunCtx *c)
{
	return binary_run(c, 0);
}

static int mul_run(RunCtx *c)
{
	return binary_run(c, 1);
}

/* ---- QLinearGlobalAveragePool ---- */

static int gap_run(RunCtx *c)
{
	const Tensor *x;
	float sx, sy;
	int32_t zx, zy;
	if (qdata(c, 0, &x) < 0 || channels_first(c->node) < 0)
		return -1;
	if (qparam(c, 1, 2, x->dtype, &sx, &zx) < 0 || qparam(c, 3, 4, x->dtype, &sy, &zy) < 0)
		return -1;
	if (x->rank < 3)
		return op_error(c->node, "input must have rank 3 or more (N, C, spatial...), got %d", x->rank);
	int64_t dims[QM_MAX_RANK], img = 1;
	for (int i = 0; i < x->rank; i++) {
		dims[i] = i < 2 ? x->dims[i] : 1;
		img *= i < 2 ? 1 : x->dims[i];
	}
	if (img <= 0 || img >= (1 << 24))
		return op_error(c->node, "the image has %lld elements, expected 1 to 16777215", (long long)img);
	if (op_output(c, 0, x->dtype, x->rank, dims) < 0)
		return -1;
	float scale = sx / (sy * (float)img);
	int64_t planes = x->dims[0] * x->dims[1];
	for (int64_t p = 0; p < planes; p++) {
		int64_t acc = -(int64_t)zx * img;
		for (int64_t i = 0; i < img; i++)
			acc += q8_get(x->dtype, x->data, p * img + i);
		q8_put(x->dtype, c->out[0]->data, p, q8_add(q8_round((float)acc * scale), zy));
	}
	return 0;
}

/* ---- QLinearAveragePool ---- */

static int avgpool_run(RunCtx *c)
{
	const Tensor *x;
	float sx, sy;
	int32_t zx, zy;
	int64_t cip;
	if (qdata(c, 0, &x) < 0 || channels_first(c->node) < 0 ||
	    attr_int(c->node, "count_include_pad", 0, &cip) < 0)
		return -1;
	if (qparam(c, 1, 2, x->dtype, &sx, &zx) < 0 || qparam(c, 3, 4, x->dtype, &sy, &zy) < 0)
		return -1;
	int nsp = x->rank - 2;
	if (nsp < 1 || nsp > NN_MAXSP)
		return op_error(c->node, "input must have rank 3 to %d (N, C, spatial...), got %d", NN_MAXSP + 2,
				x->rank);
	NnGeom g;
	if (nn_geom(c->node, nsp, x->dims + 2, NULL, 1, &g) < 0)
		return -1;
	/* as three spatial dimensions, the leading ones of size 1 */
	int64_t in[3], k[3], s[3], d[3], pb[3], pe[3], out[3], dims[QM_MAX_RANK] = {x->dims[0], x->dims[1]};
	for (int j = 0; j < 3; j++) {
		int i = j - (3 - nsp);
		in[j] = i < 0 ? 1 : g.in[i];
		k[j] = i < 0 ? 1 : g.k[i];
		s[j] = i < 0 ? 1 : g.s[i];
		d[j] = i < 0 ? 1 : g.d[i];
		pb[j] = i < 0 ? 0 : g.pb[i];
		pe[j] = i < 0 ? 0 : g.pe[i];
		out[j] = i < 0 ? 1 : g.out[i];
		if (i >= 0)
			dims[i + 2] = g.out[i];
	}
	if (op_output(c, 0, x->dtype, x->rank, dims) < 0)
		return -1;
	int64_t isz = in[0] * in[1] * in[2], osz = out[0] * out[1] * out[2], planes = x->dims[0] * x->dims[1];
	float *xf = xmalloc((size_t)(isz ? isz : 1) * sizeof *xf);
	for (int64_t p = 0; p < planes; p++) {
		for (int64_t i = 0; i < isz; i++)
			xf[i] = (float)(q8_get(x->dtype, x->data, p * isz + i) - zx) * sx;
		for (int64_t o = 0; o < osz; o++) {
			int64_t op[3] = {o / (out[1] * out[2]), o / out[2] % out[1], o % out[2]}, n = 0, cnt = 1;
			float sum = 0.0f;
			for (int64_t t = 0; t < k[0] * k[1] * k[2]; t++) {
				int64_t kk[3] = {t / (k[1] * k[2]), t / k[2] % k[1], t % k[2]}, pos[3];
				int inside = 1, padded = 1;
				for (int j = 0; j < 3; j++) {
					pos[j] = op[j] * s[j] - pb[j] + kk[j] * d[j];
					inside &= pos[j] >= 0 && pos[j] < in[j];
					padded &= pos[j] >= -pb[j] && pos[j] < in[j] + pe[j];
				}
				if (inside) {
					sum += xf[(pos[0] * in[1] + pos[1]) * in[2] + pos[2]];
					n++;
				} else if (cip && padded)
					n++;
			}
			cnt = n ? n : 1;
			q8_put(x->dtype, c->out[0]->data, p * osz + o, q8_quant(sum / (float)cnt, sy, zy));
		}
	}
	free(xf);
	return 0;
}

/* ---- table operators: QLinearConcat, QLinearLeakyRelu, QLinearSigmoid ---- */

enum { FN_ID, FN_LEAKY, FN_SIGMOID };

/* table[code - lo] = quantize(f(dequantize(code))) for the 256 codes of dt */
static void lut_build(int dt, float sx, int32_t zx, float sy, int32_t zy, int fn, float alpha, int32_t *table)
{
	for (int32_t v = q8_lo(dt); v <= q8_hi(dt); v++) {
		float f = (float)(v - zx) * sx;
		if (fn == FN_LEAKY)
			f = f >= 0.0f ? f : alpha * f;
		else if (fn == FN_SIGMOID)
			f = 1.0f / (1.0f + expf(-f));
		int32_t q = q8_quant(f, sy, zy);
		table[v - q8_lo(dt)] = q < q8_lo(dt) ? q8_lo(dt) : q > q8_hi(dt) ? q8_hi(dt) : q;
	}
}

static int lut_run(RunCtx *c, int fn)
{
	const Tensor *x;
	float sx, sy, alpha = 0.01f;
	int32_t zx, zy, table[256];
	if (qdata(c, 0, &x) < 0)
		return -1;
	if (qparam(c, 1, 2, x->dtype, &sx, &zx) < 0 || qparam(c, 3, 4, x->dtype, &sy, &zy) < 0)
		return -1;
	if (fn == FN_LEAKY && attr_float(c->node, "alpha", 0.01f, &alpha) < 0)
		return -1;
	if (op_output(c, 0, x->dtype, x->rank, x->dims) < 0)
		return -1;
	lut_build(x->dtype, sx, zx, sy, zy, fn, alpha, table);
	int32_t lo = q8_lo(x->dtype);
	for (int64_t i = 0; i < x->numel; i++)
		q8_put(x->dtype, c->out[0]->data, i, table[q8_get(x->dtype, x->data, i) - lo]);
	return 0;
}

static int leaky_run(RunCtx *c)
{
	return lut_run(c, FN_LEAKY);
}

static int sigmoid_run(RunCtx *c)
{
	return lut_run(c, FN_SIGMOID);
}

static int concat_run(RunCtx *c)
{
	float sy;
	int32_t zy;
	int64_t axis, ax;
	if (c->nin < 5 || (c->nin - 2) % 3)
		return op_error(c->node, "expected Y_scale, Y_zero_point and triples (X, scale, zero point), got %zu inputs",
				c->nin);
	const Tensor *x0;
	if (qdata(c, 2, &x0) < 0 || qparam(c, 0, 1, x0->dtype, &sy, &zy) < 0 || attr_int(c->node, "axis", 0, &axis) < 0 ||
	    norm_axis(c->node, axis, x0->rank, &ax) < 0)
		return -1;
	int dt = x0->dtype;
	int64_t dims[QM_MAX_RANK], outer = 1, inner = 1;
	for (int i = 0; i < x0->rank; i++) {
		dims[i] = x0->dims[i];
		outer *= i < ax ? x0->dims[i] : 1;
		inner *= i > ax ? x0->dims[i] : 1;
	}
	dims[ax] = 0;
	for (size_t k = 2; k < c->nin; k += 3) {
		const Tensor *x;
		if (qdata(c, k, &x) < 0)
			return -1;
		if (x->dtype != dt || x->rank != x0->rank)
			return op_error(c->node, "input %zu is %s of rank %d, expected %s of rank %d", k, dtype_name(x->dtype),
					x->rank, dtype_name(dt), x0->rank);
		for (int i = 0; i < x->rank; i++)
			if (i != ax && x->dims[i] != x0->dims[i])
				return op_error(c->node, "input %zu has dimension %d of %lld, expected %lld", k, i,
						(long long)x->dims[i], (long long)x0->dims[i]);
		dims[ax] += x->dims[ax];
	}
	if (op_output(c, 0, dt, x0->rank, dims) < 0)
		return -1;
	int64_t at = 0, row = dims[ax] * inner;
	for (size_t k = 2; k < c->nin; k += 3) {
		const Tensor *x = c->in[k];
		float sx;
		int32_t zx, table[256];
		if (qparam(c, k + 1, k + 2, dt, &sx, &zx) < 0)
			return -1;
		int same = sx == sy && zx == zy;
		if (!same)
			lut_build(dt, sx, zx, sy, zy, FN_ID, 0.0f, table);
		int64_t len = x->dims[ax] * inner;
		for (int64_t o = 0; o < outer; o++)
			for (int64_t i = 0; i < len; i++) {
				int32_t v = q8_get(dt, x->data, o * len + i);
				q8_put(dt, c->out[0]->data, o * row + at + i, same ? v : table[v - q8_lo(dt)]);
			}
		at += len;
	}
	return 0;
}

/* ---- QLinearSoftmax ---- */

/* onnxruntime's table: e[code] = exp((i - 255 + shift) sX) for i = 0..255,
 * code i (uint8) or i - 128 (int8), shift keeping the row sum finite */
static void softmax_table(float sx, int64_t d, int is_signed, float *e)
{
	double shift = log((double)(FLT_MAX / (float)d));
	shift = (shift - 5.0 > 0.0 ? shift - 5.0 : 0.0) / sx;
	for (int i = 0; i < 256; i++)
		e[(uint8_t)(is_signed ? i - 128 : i)] = (float)exp(((double)i - 255 + shift) * (double)sx);
}

static int softmax_run(RunCtx *c)
{
	const Tensor *x;
	float sx, sy, e[256];
	int32_t zx, zy;
	int64_t axis, opset, ax;
	if (qdata(c, 0, &x) < 0 || qparam(c, 1, 2, x->dtype, &sx, &zx) < 0 || qparam(c, 3, 4, x->dtype, &sy, &zy) < 0)
		return -1;
	if (attr_int(c->node, "opset", -1, &opset) < 0 || attr_int(c->node, "axis", opset < 13 ? 1 : -1, &axis) < 0)
		return -1;
	if (opset < 0)
		return op_error(c->node, "attribute opset is required");
	if (x->rank < 1 || norm_axis(c->node, axis, x->rank, &ax) < 0)
		return x->rank < 1 ? op_error(c->node, "input must have rank 1 or more") : -1;
	int64_t before = 1, d = 1, after = 1;
	for (int i = 0; i < x->rank; i++)
		*(i < ax ? &before : i == ax || opset < 13 ? &d : &after) *= x->dims[i];
	if (op_output(c, 0, x->dtype, x->rank, x->dims) < 0)
		return -1;
	if (x->numel == 0)
		return 0;
	int sg = x->dtype == DT_INT8;
	softmax_table(sx, d, sg, e);
	float ys = floorf(1.0f / sy);
	for (int64_t b = 0; b < before; b++)
		for (int64_t a = 0; a < after; a++) {
			int64_t base = b * d * after + a;
			int32_t mx = q8_lo(x->dtype);
			for (int64_t i = 0; i < d; i++) {
				int32_t v = q8_get(x->dtype, x->data, base + i * after);
				mx = v > mx ? v : mx;
			}
			/* the row's maximum moves to the top of the table */
			int32_t adj = q8_hi(x->dtype) - mx;
			float sum = 0.0f;
			for (int64_t i = 0; i < d; i++)
				sum += e[(uint8_t)(q8_get(x->dtype, x->data, base + i * after) + adj)];
			for (int64_t i = 0; i < d; i++) {
				float t = e[(uint8_t)(q8_get(x->dtype, x->data, base + i * after) + adj)];
				q8_put(x->dtype, c->out[0]->data, base + i * after, q8_add(q8_round(t * ys / sum), zy));
			}
		}
	return 0;
}

OPERATOR(com_microsoft, QLinearAdd, 1, binary_infer, add_run)
OPERATOR(com_microsoft, QLinearAveragePool, 1, avgpool_infer, avgpool_run)
OPERATOR(com_microsoft, QLinearConcat, 1, concat_infer, concat_run)
OPERATOR(com_microsoft, QLinearGlobalAveragePool, 1, gap_infer, gap_run)
OPERATOR(com_microsoft, QLinearLeakyRelu, 1, same_infer, leaky_run)
OPERATOR(com_microsoft, QLinearMul, 1, binary_infer, mul_run)
OPERATOR(com_microsoft, QLinearSigmoid, 1, same_infer, sigmoid_run)
OPERATOR(com_microsoft, QLinearSoftmax, 1, same_infer, softmax_run)
