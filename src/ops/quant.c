/* quant.c — QuantizeLinear, DequantizeLinear and DynamicQuantizeLinear:
 * inference and kernels.
 *
 * Scales and zero points are per tensor (scalars), per axis (1-D along
 * `axis`) or, since opset 21, per block (`block_size` consecutive elements of
 * `axis` share one). Quantization divides in float32, rounds half to even,
 * adds the zero point and saturates, for int8, uint8, int16, uint16, int32
 * and the packed 4-bit int4/uint4 (low nibble first). The four float8
 * types divide and round to the nearest float8 value (saturating unless
 * saturate=0); float4 is refused by name. The com.microsoft forms of
 * QuantizeLinear and DequantizeLinear (16-bit QDQ below opset 21) run on the
 * same kernels. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops/elem.h"
#include "ops/nn.h"
#include "ops/op.h"
#include "ops/shapeutil.h"
#include "util.h"

static int q_int_type(int dt)
{
	return dt == DT_INT8 || dt == DT_UINT8 || dt == DT_INT16 || dt == DT_UINT16 || dt == DT_INT32 ||
	       dt == DT_INT4 || dt == DT_UINT4;
}

/* element i of an integer tensor (4-bit types unpacked) */
static int64_t q_get(int dt, const void *base, int64_t i)
{
	const uint8_t *p = base;
	if (dt == DT_INT4 || dt == DT_UINT4) {
		int v = (p[i >> 1] >> ((i & 1) * 4)) & 0xf;
		return dt == DT_INT4 && v >= 8 ? v - 16 : v;
	}
	return elem_get_i64(dt, base, i);
}

static void q_put(int dt, void *base, int64_t i, int64_t v)
{
	uint8_t *p = base;
	if (dt == DT_INT4 || dt == DT_UINT4) {
		int sh = (int)(i & 1) * 4;
		p[i >> 1] = (uint8_t)((p[i >> 1] & ~(0xf << sh)) | ((v & 0xf) << sh));
		return;
	}
	elem_put_i64(dt, base, i, v);
}

static void q_range(int dt, double *lo, double *hi)
{
	if (dt == DT_INT4) {
		*lo = -8;
		*hi = 7;
	} else if (dt == DT_UINT4) {
		*lo = 0;
		*hi = 15;
	} else {
		nn_int_range(dt, lo, hi);
	}
}

/* ---- float8 (E4M3FN, E4M3FNUZ, E5M2, E5M2FNUZ) ---- */

static int q_f8_type(int dt)
{
	return dt == DT_FLOAT8E4M3FN || dt == DT_FLOAT8E4M3FNUZ || dt == DT_FLOAT8E5M2 || dt == DT_FLOAT8E5M2FNUZ;
}

/* the value of float8 code b of type dt (NaN for the NaN codes) */
static float f8_decode(int dt, uint8_t b)
{
	int e5 = dt == DT_FLOAT8E5M2 || dt == DT_FLOAT8E5M2FNUZ, uz = dt == DT_FLOAT8E4M3FNUZ || dt == DT_FLOAT8E5M2FNUZ;
	int mbits = e5 ? 2 : 3, bias = e5 ? (uz ? 16 : 15) : (uz ? 8 : 7);
	int sign = b >> 7, e = (b >> mbits) & (e5 ? 0x1f : 0xf), m = b & ((1 << mbits) - 1);
	if (uz && b == 0x80)
		return NAN;
	if (!uz && e5 && e == 0x1f)
		return m ? NAN : (sign ? -INFINITY : INFINITY);
	if (!uz && !e5 && e == 0xf && m == 7)
		return NAN;
	float v = e ? ldexpf(1.0f + (float)m / (float)(1 << mbits), e - bias)
		    : ldexpf((float)m / (float)(1 << mbits), 1 - bias);
	return sign ? -v : v;
}

/* float8 code of x: round to nearest, ties to even; out of range saturates
 * to the largest finite value, or becomes NaN (Inf for E5M2) without
 * saturate */
static uint8_t f8_encode(int dt, float x, int saturate)
{
	int e5 = dt == DT_FLOAT8E5M2 || dt == DT_FLOAT8E5M2FNUZ, uz = dt == DT_FLOAT8E4M3FNUZ || dt == DT_FLOAT8E5M2FNUZ;
	uint8_t nan = uz ? 0x80 : 0x7f;
	if (isnan(x))
		return nan;
	uint8_t sign = signbit(x) ? 0x80 : 0;
	float a = fabsf(x);
	/* the largest finite positive code */
	uint8_t maxc = e5 ? (uz ? 0x7f : 0x7b) : (uz ? 0x7f : 0x7e);
	float maxv = f8_decode(dt, maxc);
	if (a > maxv) {
		float below = f8_decode(dt, (uint8_t)(maxc - 1)), bound = maxv + (maxv - below) / 2;
		/* below the midpoint to the next (unrepresentable) step, or on it
		 * with an even largest code: rounds to the largest value */
		if (saturate || a < bound || (a == bound && !(maxc & 1)))
			return (uint8_t)(sign | maxc);
		if (e5 && !uz)
			return (uint8_t)(sign | 0x7c);
		return nan;
	}
	/* binary search for the largest code whose value is <= a */
	int lo = 0, hi = maxc;
	while (lo < hi) {
		int mid = (lo + hi + 1) / 2;
		if (f8_decode(dt, (uint8_t)mid) <= a)
			lo = mid;
		else
			hi = mid - 1;
	}
	uint8_t c = (uint8_t)lo;
	if (c < maxc) {
		float v0 = f8_decode(dt, c), v1 = f8_decode(dt, (uint8_t)(c + 1));
		if (a - v0 > v1 - a || (a - v0 == v1 - a && (c & 1)))
			c++;
	}
	if (c == 0 && uz)
		return 0;   /* no negative zero */
	return (uint8_t)(sign | c);
}

/* Where the scale of each element is: per tensor, per axis or per block. */
typedef struct QLayout {
	int64_t outer, len, inner;   /* x as [outer, len, inner] around axis */
	int kind;                    /* 0 tensor, 1 axis, 2 block */
	int64_t block, nblk;
} QLayout;

static int q_layout(const Onnx__NodeProto *n, int64_t opset, const Tensor *x, const Tensor *scale,
		    const Tensor *zp, QLayout *l)
{
	int64_t axis = 1, block = 0;
	memset(l, 0, sizeof *l);
	if (opset >= 13 && attr_int(n, "axis", 1, &axis) < 0)
		return -1;
	if (opset >= 21 && attr_int(n, "block_size", 0, &block) < 0)
		return -1;
	if (zp) {
		if (zp->numel != scale->numel)
			return op_error(n, "zero point has %lld elements but the scale %lld", (long long)zp->numel,
					(long long)scale->numel);
	}
	l->outer = 1;
	l->len = 1;
	l->inner = 1;
	if (scale->numel == 1 && block == 0 && scale->rank <= 1) {
		l->kind = 0;
		l->inner = x->numel;
		return 0;
	}
	if (norm_axis(n, axis, x->rank, &axis) < 0)
		return -1;
	for (int i = 0; i < x->rank; i++)
		*(i < axis ? &l->outer : i == axis ? &l->len : &l->inner) *= x->dims[i];
	if (block <= 0) {
		if (scale->rank != 1 || scale->numel != l->len)
			return op_error(n, "per-axis scale must be 1-D with %lld elements (axis %lld), got %lld",
					(long long)l->len, (long long)axis, (long long)scale->numel);
		l->kind = 1;
		return 0;
	}
	l->kind = 2;
	l->block = block;
	l->nblk = (l->len + block - 1) / block;
	if (scale->rank != x->rank)
		return op_error(n, "blocked scale must have the input's rank %d, got %d", x->rank, scale->rank);
	for (int i = 0; i < x->rank; i++)
		if (scale->dims[i] != (i == axis ? l->nblk : x->dims[i]))
			return op_error(n, "blocked scale dim %d is %lld, expected %lld", i, (long long)scale->dims[i],
					(long long)(i == axis ? l->nblk : x->dims[i]));
	return 0;
}

/* scale index of element i */
static inline int64_t q_sidx(const QLayout *l, int64_t i)
{
	if (l->kind == 0)
		return 0;
	int64_t in = i % l->inner, k = i / l->inner % l->len;
	if (l->kind == 1)
		return k;
	int64_t o = i / (l->inner * l->len);
	return (o * l->nblk + k / l->block) * l->inner + in;
}

static int q_unsupported(const Onnx__NodeProto *n, int64_t opset, int dt)
{
	return op_unsupported_type(n, opset, dt);
}

/* ---- fast paths: float32 <-> 8/16-bit, per tensor or per axis ---- */

/* round half to even for |v| < 2^22 (the default rounding mode does it);
 * larger values are saturated by the callers anyway */
static inline float round_small(float v)
{
	const float magic = 12582912.0f;   /* 1.5 * 2^23 */
	return v >= 0 ? (v + magic) - magic : (v - magic) + magic;
}

typedef float qv8f __attribute__((vector_size(32)));
typedef int32_t qv8i __attribute__((vector_size(32)));

/* One run of n floats with one scale and zero point: round_small(x / sv) + z
 * clamped into [lo, hi], NaN to 0. Eight lanes: the magnitude is rounded
 * and the sign put back, which is round_small's result (rounding to nearest
 * is symmetric) up to the sign of a zero, which the conversion drops. */
#define QUANT_SPAN(NAME, T)                                                              \
	static inline void NAME(const float *x, T *y, int64_t n, float sv, float z, float lo, \
				float hi)                                                     \
	{                                                                                \
		typedef T vt __attribute__((vector_size(8 * sizeof(T))));                \
		const float magic = 12582912.0f; /* 1.5 * 2^23 */                        \
		int64_t i = 0;                                                           \
		for (; i + 8 <= n; i += 8) {                                             \
			qv8f v;                                                          \
			memcpy(&v, x + i, sizeof v);                                     \
			v = v / sv;                                                      \
			qv8i sign = (qv8i)v & (int32_t)0x80000000;                       \
			qv8f a = (qv8f)((qv8i)v & 0x7fffffff);                           \
			a = (a + magic) - magic;                                         \
			v = (qv8f)((qv8i)a | sign) + z;                                  \
			qv8i m = v < lo;                                                 \
			v = (qv8f)((m & (qv8i)((qv8f){0} + lo)) | (~m & (qv8i)v));       \
			m = v > hi;                                                      \
			v = (qv8f)((m & (qv8i)((qv8f){0} + hi)) | (~m & (qv8i)v));       \
			v = (qv8f)((qv8i)v & (v == v));                                  \
			vt o = __builtin_convertvector(__builtin_convertvector(v, qv8i), vt); \
			memcpy(y + i, &o, sizeof o);                                     \
		}                                                                        \
		for (; i < n; i++) {                                                     \
			float v = round_small(x[i] / sv) + z;                            \
			v = v < lo ? lo : v > hi ? hi : v;                               \
			y[i] = (T)(v == v ? v : 0.0f);                                   \
		}                                                                        \
	}
QUANT_SPAN(quant_span_u8, uint8_t)
QUANT_SPAN(quant_span_i8, int8_t)
QUANT_SPAN(quant_span_u16, uint16_t)
QUANT_SPAN(quant_span_i16, int16_t)

#define QUANT_LOOP(T, SPAN)                                                               \
	for (int64_t o = 0; o < l->outer; o++)                                            \
		for (int64_t k = 0; k < l->len; k++) {                                    \
			int64_t si = l->kind ? k : 0;                                     \
			float sv = sf[si], z = zp ? (float)q_get(zp->dtype, zp->data, si) : 0.0f;  \
			int64_t at = (o * l->len + k) * l->inner;                         \
			SPAN(x + at, (T *)y + at, l->inner, sv, z, lo, hi);               \
		}

/* quantize float32 x to an 8- or 16-bit type; 1 when not applicable
 * (cloned: the loop vectorizes, with the same IEEE operations per element) */
ELEM_CLONES static int quantize_fast(int dt, const QLayout *l, const float *x, const float *sf, const Tensor *zp, void *y)
{
	double dlo, dhi;
	if (l->kind == 2 || !nn_int_range(dt, &dlo, &dhi) || dtype_bits(dt) > 16)
		return 1;
	float lo = (float)dlo, hi = (float)dhi;
	switch (dt) {
	case DT_UINT8: QUANT_LOOP(uint8_t, quant_span_u8) break;
	case DT_INT8: QUANT_LOOP(int8_t, quant_span_i8) break;
	case DT_UINT16: QUANT_LOOP(uint16_t, quant_span_u16) break;
	case DT_INT16: QUANT_LOOP(int16_t, quant_span_i16) break;
	default: return 1;
	}
	return 0;
}

/* W: the width of the subtraction (exact: 8- and 16-bit values and zero
 * points differ by less than 2^17, so int32 does and vectorizes) */
#define DEQUANT_LOOP(T, W)                                                                \
	for (int64_t o = 0; o < l->outer; o++)                                            \
		for (int64_t k = 0; k < l->len; k++) {                                    \
			int64_t si = l->kind ? k : 0;                                     \
			float sv = sf[si];                                                \
			W z = zp ? (W)q_get(zp->dtype, zp->data, si) : 0;                 \
			const T *xp = (const T *)x->data + (o * l->len + k) * l->inner;   \
			float *yp = y + (o * l->len + k) * l->inner;                      \
			int64_t n = l->inner;                                             \
			for (int64_t i = 0; i < n; i++)                                   \
				yp[i] = (float)((W)xp[i] - z) * sv;                       \
		}

/* dequantize 8-, 16- and 32-bit integers to float32; 1 when not applicable */
ELEM_CLONES static int dequantize_fast(const QLayout *l, const Tensor *x, const float *sf, const Tensor *zp, float *y)
{
	if (l->kind == 2 || (uintptr_t)x->data % 4)
		return 1;
	switch (x->dtype) {
	case DT_UINT8: DEQUANT_LOOP(uint8_t, int32_t) break;
	case DT_INT8: DEQUANT_LOOP(int8_t, int32_t) break;
	case DT_UINT16: DEQUANT_LOOP(uint16_t, int32_t) break;
	case DT_INT16: DEQUANT_LOOP(int16_t, int32_t) break;
	case DT_INT32: DEQUANT_LOOP(int32_t, int64_t) break;
	default: return 1;
	}
	return 0;
}

/* ---- QuantizeLinear ---- */

static int quantize_out_type(const Onnx__NodeProto *n, int64_t opset, int zpdt, int *dt)
{
	int64_t od = 0;
	if (opset >= 21 && attr_int(n, "output_dtype", 0, &od) < 0)
		return -1;
	if (zpdt && od && zpdt != od)
		return op_error(n, "output_dtype %s differs from the zero point's type %s", dtype_name((int)od),
				dtype_name(zpdt));
	*dt = zpdt ? zpdt : od ? (int)od : DT_UINT8;
	return 0;
}

static int quantize_infer(InferCtx *c)
{
	int dt;
	const ValueType *zp = c->nin > 2 ? c->in[2] : NULL;
	if (infer_same_as_input(c, 0, 0) < 0)
		return -1;
	if (zp && !zp->elem) {
		c->out[0]->elem = 0;   /* the zero point's type is not known yet */
		return 0;
	}
	if (quantize_out_type(c->node, c->opset, zp ? zp->elem : 0, &dt) < 0)
		return -1;
	c->out[0]->elem = dt;
	return 0;
}

static int quantize_run(RunCtx *c)
{
	const Tensor *x = c->in[0], *sc = c->nin > 1 ? c->in[1] : NULL, *zp = c->nin > 2 ? c->in[2] : NULL;
	int dt;
	QLayout l;
	if (!sc)
		return op_error(c->node, "input y_scale is required");
	if (quantize_out_type(c->node, c->opset, zp ? zp->dtype : 0, &dt) < 0)
		return -1;
	if (!q_int_type(dt) && !q_f8_type(dt))
		return q_unsupported(c->node, c->opset, dt);
	if (!nn_is_float(x->dtype) && x->dtype != DT_INT32)
		return q_unsupported(c->node, c->opset, x->dtype);
	if (!nn_is_float(sc->dtype))
		return op_error(c->node, "y_scale has type %s, expected a floating-point type", dtype_name(sc->dtype));
	if (q_layout(c->node, c->opset, x, sc, zp, &l) < 0)
		return -1;
	if (op_output(c, 0, dt, x->rank, x->dims) < 0)
		return -1;
	double lo, hi;
	/* float32 input read in place; other types converted once */
	float *xcopy = x->dtype == DT_FLOAT ? NULL : nn_f32_copy(x), *sf = nn_f32_copy(sc);
	const float *xf = xcopy ? xcopy : x->data;
	void *y = c->out[0]->data;
	if (q_f8_type(dt)) {
		int64_t sat;
		if (attr_int(c->node, "saturate", 1, &sat) < 0) {
			free(xcopy);
			free(sf);
			return -1;
		}
		for (int64_t i = 0; i < x->numel; i++) {
			int64_t si = q_sidx(&l, i);
			float z = zp ? f8_decode(dt, ((const uint8_t *)zp->data)[si]) : 0.0f;
			((uint8_t *)y)[i] = f8_encode(dt, xf[i] / sf[si] + z, sat != 0);
		}
		free(xcopy);
		free(sf);
		return 0;
	}
	if (quantize_fast(dt, &l, xf, sf, zp, y) == 0) {
		free(xcopy);
		free(sf);
		return 0;
	}
	q_range(dt, &lo, &hi);
	for (int64_t i = 0; i < x->numel; i++) {
		int64_t si = q_sidx(&l, i);
		float z = zp ? (float)q_get(zp->dtype, zp->data, si) : 0.0f;
		float v = nn_round_even(xf[i] / sf[si]) + z;
		double d = isnan(v) ? 0 : v;
		if (d < lo)
			d = lo;
		if (d > hi)
			d = hi;
		q_put(dt, y, i, (int64_t)d);
	}
	free(xcopy);
	free(sf);
	return 0;
}

/* ---- DequantizeLinear ---- */

static int dequantize_out_type(const Onnx__NodeProto *n, int64_t opset, int scdt, int *dt)
{
	int64_t od = 0;
	if (opset >= 23 && attr_int(n, "output_dtype", 0, &od) < 0)
		return -1;
	*dt = od ? (int)od : scdt;
	return 0;
}

static int dequantize_infer(InferCtx *c)
{
	int dt;
	const ValueType *sc = nn_in(c, 1);
	if (!sc || infer_same_as_input(c, 0, 0) < 0 || dequantize_out_type(c->node, c->opset, sc->elem, &dt) < 0)
		return -1;
	c->out[0]->elem = dt;
	return 0;
}

static int dequantize_run(RunCtx *c)
{
	const Tensor *x = c->in[0], *sc = c->nin > 1 ? c->in[1] : NULL, *zp = c->nin > 2 ? c->in[2] : NULL;
	int dt;
	QLayout l;
	if (!sc)
		return op_error(c->node, "input x_scale is required");
	if (!q_int_type(x->dtype) && !q_f8_type(x->dtype))
		return q_unsupported(c->node, c->opset, x->dtype);
	if (zp && zp->dtype != x->dtype)
		return op_error(c->node, "zero point has type %s, expected %s like the input",
				dtype_name(zp->dtype), dtype_name(x->dtype));
	if (!nn_is_float(sc->dtype))
		return op_error(c->node, "x_scale has type %s, expected a floating-point type", dtype_name(sc->dtype));
	if (dequantize_out_type(c->node, c->opset, sc->dtype, &dt) < 0)
		return -1;
	if (q_layout(c->node, c->opset, x, sc, zp, &l) < 0)
		return -1;
	float *ty, *sf = nn_f32_copy(sc);
	float *y = nn_f32_out(c, 0, dt, x->rank, x->dims, &ty);
	if (!y) {
		free(sf);
		return -1;
	}
	int fast = dequantize_fast(&l, x, sf, zp, y) == 0;
	for (int64_t i = 0; !fast && i < x->numel; i++) {
		int64_t si = q_sidx(&l, i);
		if (q_f8_type(x->dtype)) {
			float z = zp ? f8_decode(zp->dtype, ((const uint8_t *)zp->data)[si]) : 0.0f;
			y[i] = (f8_decode(x->dtype, ((const uint8_t *)x->data)[i]) - z) * sf[si];
			continue;
		}
		int64_t z = zp ? q_get(zp->dtype, zp->data, si) : 0;
		y[i] = (float)(q_get(x->dtype, x->data, i) - z) * sf[si];
	}
	nn_f32_done(c->out[0], ty);
	free(sf);
	return 0;
}

/* ---- DynamicQuantizeLinear ---- */

static int dynquant_infer(InferCtx *c)
{
	if (infer_same_as_input(c, 0, 0) < 0)
		return -1;
	c->out[0]->elem = DT_UINT8;
	if (c->nout > 1 && c->out[1])
		vt_set_tensor(c->out[1], DT_FLOAT, 0);
	if (c->nout > 2 && c->out[2])
		vt_set_tensor(c->out[2], DT_UINT8, 0);
	return 0;
}

static int dynquant_run(RunCtx *c)
{
	const Tensor *x = c->in[0];
	if (x->dtype != DT_FLOAT)
		return q_unsupported(c->node, c->opset, x->dtype);
	float *tx;
	const float *xf = nn_f32_in(c, x, &tx);
	float mn = 0, mx = 0;
	for (int64_t i = 0; i < x->numel; i++) {
		if (xf[i] < mn)
			mn = xf[i];
		if (xf[i] > mx)
			mx = xf[i];
	}
	float scale = (mx - mn) / 255.0f;
	float zpf = scale != 0 ? nn_round_even(0.0f - mn / scale) : 0.0f;
	uint8_t zp = (uint8_t)(zpf < 0 ? 0 : zpf > 255 ? 255 : zpf);
	if (op_output(c, 0, DT_UINT8, x->rank, x->dims) < 0 || (c->nout > 1 && c->out[1] && op_output(c, 1, DT_FLOAT, 0, NULL) < 0) ||
	    (c->nout > 2 && c->out[2] && op_output(c, 2, DT_UINT8, 0, NULL) < 0)) {
		free(tx);
		return -1;
	}
	uint8_t *y = c->out[0]->data;
	for (int64_t i = 0; i < x->numel; i++) {
		float v = scale != 0 ? nn_round_even(xf[i] / scale) + (float)zp : (float)zp;
		y[i] = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
	}
	if (c->nout > 1 && c->out[1])
		memcpy(c->out[1]->data, &scale, sizeof scale);
	if (c->nout > 2 && c->out[2])
		*(uint8_t *)c->out[2]->data = zp;
	free(tx);
	return 0;
}

/* ---- com.microsoft QuantizeLinear / DequantizeLinear ----
 * onnxruntime's contrib forms, which its quantizer emits for 16-bit
 * activations in models below opset 21: the attributes and semantics of
 * the ONNX operators at opset 13 (scale, zero point, axis; int8, uint8,
 * int16, uint16, int32). The kernels above run them with that opset. */

#define MS_OPSET 13

/* fn run as the ONNX operator at MS_OPSET */
#define AT_MS_OPSET(name, fn, Ctx)           \
	static int name(Ctx *c)              \
	{                                    \
		int64_t o = c->opset;        \
		c->opset = MS_OPSET;         \
		int r = fn(c);               \
		c->opset = o;                \
		return r;                    \
	}

AT_MS_OPSET(ms_quantize_infer, quantize_infer, InferCtx)
AT_MS_OPSET(ms_quantize_run, quantize_run, RunCtx)
AT_MS_OPSET(ms_dequantize_infer, dequantize_infer, InferCtx)
AT_MS_OPSET(ms_dequantize_run, dequantize_run, RunCtx)

OPERATOR(com_microsoft, DequantizeLinear, 1, ms_dequantize_infer, ms_dequantize_run)
OPERATOR(com_microsoft, QuantizeLinear, 1, ms_quantize_infer, ms_quantize_run)
OPERATOR(ai_onnx, DequantizeLinear, 10, dequantize_infer, dequantize_run)
OPERATOR(ai_onnx, DynamicQuantizeLinear, 11, dynquant_infer, dynquant_run)
OPERATOR(ai_onnx, QuantizeLinear, 10, quantize_infer, quantize_run)
