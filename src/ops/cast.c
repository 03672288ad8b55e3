/* cast.c — Cast and CastLike between all numeric element types.
 *
 * Native types (float, double, the eight integer types, bool) convert in one
 * loop per (source, target) pair generated from two type lists. The others
 * go through a native type: float16, bfloat16 and the four float8 types
 * through float32, int4/uint4 through int8/uint8 (reading) or int64
 * (writing: the low four bits, as integer casts wrap; floats truncate first,
 * as ONNX's reference implementation does).
 *
 * Semantics: float to integer truncates toward zero; NaN becomes 0 and
 * values beyond int64 saturate before wrapping into narrower integers (what
 * numpy does on x86 for in-range values); anything to bool is x != 0;
 * float to float8 rounds to nearest even and, with saturate = 1 (the
 * default), clamps to the largest finite value, else gives inf (e5m2) or NaN.
 * Complex and float4 are refused by name; casts to and from strings are
 * string.c's (string_cast). */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ops/elem.h"
#include "ops/op.h"
#include "ops/shapeutil.h"
#include "ops/string.h"
#include "util.h"

#define CAST_SRC(X) \
	X(DT_FLOAT, float, 1) X(DT_DOUBLE, double, 1) \
	X(DT_INT8, int8_t, 0) X(DT_INT16, int16_t, 0) X(DT_INT32, int32_t, 0) X(DT_INT64, int64_t, 0) \
	X(DT_UINT8, uint8_t, 0) X(DT_UINT16, uint16_t, 0) X(DT_UINT32, uint32_t, 0) \
	X(DT_UINT64, uint64_t, 0) X(DT_BOOL, uint8_t, 0)
#define CAST_DST(X, TS, FS) \
	X(DT_FLOAT, float, 1, TS, FS) X(DT_DOUBLE, double, 1, TS, FS) \
	X(DT_INT8, int8_t, 0, TS, FS) X(DT_INT16, int16_t, 0, TS, FS) \
	X(DT_INT32, int32_t, 0, TS, FS) X(DT_INT64, int64_t, 0, TS, FS) \
	X(DT_UINT8, uint8_t, 0, TS, FS) X(DT_UINT16, uint16_t, 0, TS, FS) \
	X(DT_UINT32, uint32_t, 0, TS, FS) X(DT_UINT64, uint64_t, 0, TS, FS) \
	X(DT_BOOL, uint8_t, 0, TS, FS)

#define CAST_LOOP(TS, TD, expr) { \
	const TS *s_ = src->data; \
	TD *d_ = dst->data; \
	for (int64_t i = 0; i < src->numel; i++) { \
		TS v = s_[i]; \
		d_[i] = (TD)(expr); \
	} \
}
#define CAST_PAIR(DD, TD, FD, TS, FS) case DD: \
	if (DD == DT_BOOL) \
		CAST_LOOP(TS, TD, v != 0) \
	else if (FS && !FD && DD == DT_UINT64) \
		CAST_LOOP(TS, TD, elem_f2u64((double)v)) \
	else if (FS && !FD) \
		CAST_LOOP(TS, TD, elem_f2i64((double)v)) \
	else \
		CAST_LOOP(TS, TD, v) \
	break;
#define CAST_FROM(DS, TS, FS) case DS: \
	switch (dst->dtype) { \
	CAST_DST(CAST_PAIR, TS, FS) \
	default: return -1; \
	} \
	break;

static int is_native(int dt)
{
	switch (dt) {
	case DT_FLOAT: case DT_DOUBLE: case DT_INT8: case DT_INT16: case DT_INT32:
	case DT_INT64: case DT_UINT8: case DT_UINT16: case DT_UINT32: case DT_UINT64:
	case DT_BOOL:
		return 1;
	}
	return 0;
}

static int is_f8(int dt)
{
	return dt == DT_FLOAT8E4M3FN || dt == DT_FLOAT8E4M3FNUZ || dt == DT_FLOAT8E5M2 ||
	       dt == DT_FLOAT8E5M2FNUZ;
}

/* ---- float8 ---- */

static float f8_decode(int dt, uint8_t b)
{
	int s = b >> 7;
	int e4 = dt == DT_FLOAT8E4M3FN || dt == DT_FLOAT8E4M3FNUZ;
	int mbits = e4 ? 3 : 2;
	int e = (b & 0x7f) >> mbits, m = b & ((1 << mbits) - 1);
	int bias = dt == DT_FLOAT8E4M3FN ? 7 : dt == DT_FLOAT8E4M3FNUZ ? 8 :
		   dt == DT_FLOAT8E5M2 ? 15 : 16;
	float v;
	if ((dt == DT_FLOAT8E4M3FNUZ || dt == DT_FLOAT8E5M2FNUZ) && b == 0x80)
		return NAN;
	if (dt == DT_FLOAT8E4M3FN && (b & 0x7f) == 0x7f)
		return NAN;
	if (dt == DT_FLOAT8E5M2 && e == 31)
		return m ? NAN : s ? -INFINITY : INFINITY;
	if (e == 0)
		v = ldexpf((float)m, 1 - bias - mbits);
	else
		v = ldexpf((float)((1 << mbits) + m), e - bias - mbits);
	return s ? -v : v;
}

/* largest finite positive code */
static int f8_maxcode(int dt)
{
	return dt == DT_FLOAT8E4M3FN ? 0x7e : dt == DT_FLOAT8E5M2 ? 0x7b : 0x7f;
}

static uint8_t f8_nan(int dt)
{
	return dt == DT_FLOAT8E4M3FNUZ || dt == DT_FLOAT8E5M2FNUZ ? 0x80 : 0x7f;
}

/* round half to even among the positive codes (val ascending, 0..max) */
static uint8_t f8_encode(int dt, const double *val, float x, int saturate)
{
	int max = f8_maxcode(dt);
	if (isnan(x))
		return f8_nan(dt);
	uint8_t sign = signbit(x) ? 0x80 : 0;
	double a = fabs((double)x);
	int code;
	if (isinf(x) || a > val[max]) {
		double next = val[max] + (val[max] - val[max - 1]);
		double mid = (val[max] + next) / 2;
		if (!isinf(x) && (a < mid || (a == mid && !(max & 1))))
			code = max;
		else if (saturate)
			code = max;
		else if (dt == DT_FLOAT8E5M2)
			return sign | 0x7c;
		else
			return f8_nan(dt);
	} else {
		int lo = 0, hi = max;
		while (lo < hi) {  /* largest code with val <= a */
			int mid = (lo + hi + 1) / 2;
			if (val[mid] <= a)
				lo = mid;
			else
				hi = mid - 1;
		}
		code = lo;
		if (code < max) {
			double dl = a - val[code], dh = val[code + 1] - a;
			if (dh < dl || (dh == dl && (code & 1)))
				code++;
		}
	}
	if (code == 0 && (dt == DT_FLOAT8E4M3FNUZ || dt == DT_FLOAT8E5M2FNUZ))
		return 0;
	return (uint8_t)(sign | code);
}

/* ---- conversions through native types ---- */

/* widen src (a non-native type) into a float32 / int8 / uint8 tensor */
static int widen(const Onnx__NodeProto *n, int64_t opset, const Tensor *src, Tensor *w)
{
	int dt = src->dtype;
	const uint8_t *s = src->data;
	if (dt == DT_INT4 || dt == DT_UINT4) {
		if (tensor_alloc(w, dt == DT_INT4 ? DT_INT8 : DT_UINT8, src->rank, src->dims) < 0)
			return -1;
		uint8_t *d = w->data;
		for (int64_t i = 0; i < src->numel; i++) {
			int v = (s[i / 2] >> (4 * (i & 1))) & 15;
			if (dt == DT_INT4 && v >= 8)
				v -= 16;
			d[i] = (uint8_t)v;
		}
		return 0;
	}
	if (!elem_is_half(dt) && !is_f8(dt))
		return op_unsupported_type(n, opset, dt);
	if (tensor_alloc(w, DT_FLOAT, src->rank, src->dims) < 0)
		return -1;
	float *d = w->data;
	if (elem_is_half(dt)) {
		elem_half_to_float(dt, s, d, src->numel);
		return 0;
	}
	for (int64_t i = 0; i < src->numel; i++)
		d[i] = f8_decode(dt, s[i]);
	return 0;
}

/* the native type a non-native target is computed in */
static int narrow_from(int dt)
{
	if (dt == DT_INT4 || dt == DT_UINT4)
		return DT_INT64;
	if (elem_is_half(dt) || is_f8(dt))
		return DT_FLOAT;
	return 0;
}

/* narrow w (narrow_from(dst) type) into dst */
static void narrow(const Tensor *w, Tensor *dst, int saturate)
{
	int dt = dst->dtype;
	uint8_t *d = dst->data;
	if (dt == DT_INT4 || dt == DT_UINT4) {
		const int64_t *s = w->data;
		memset(d, 0, dst->nbytes);
		for (int64_t i = 0; i < w->numel; i++) {
			unsigned q = (unsigned)((uint64_t)s[i] & 15);
			d[i / 2] |= (uint8_t)(q << (4 * (i & 1)));
		}
		return;
	}
	const float *s = w->data;
	if (is_f8(dt)) {
		double val[128];
		for (int c = 0; c < 128; c++)
			val[c] = f8_decode(dt, (uint8_t)c);
		for (int64_t i = 0; i < w->numel; i++)
			d[i] = f8_encode(dt, val, s[i], saturate);
		return;
	}
	elem_float_to_half(dt, s, d, w->numel);
}

static int cast_native(const Tensor *src, Tensor *dst)
{
	switch (src->dtype) {
	CAST_SRC(CAST_FROM)
	default: return -1;
	}
	return 0;
}

int cast_into(const Onnx__NodeProto *n, int64_t opset, const Tensor *src, Tensor *dst,
	      int saturate)
{
	int rc;
	if (src->numel != dst->numel)
		return op_error(n, "cast of %lld elements into %lld", (long long)src->numel,
				(long long)dst->numel);
	if (src->dtype == dst->dtype) {
		if (dtype_bits(src->dtype) == 0)
			return op_unsupported_type(n, opset, src->dtype);
		memcpy(dst->data, src->data, src->nbytes);
		return 0;
	}
	if (!is_native(src->dtype)) {
		Tensor w = {0};
		rc = widen(n, opset, src, &w);
		if (rc == 0)
			rc = cast_into(n, opset, &w, dst, saturate);
		tensor_free(&w);
		return rc;
	}
	if (!is_native(dst->dtype)) {
		int via = narrow_from(dst->dtype);
		if (!via)
			return op_error(n, "%s-%lld to %s is not supported",
					n->op_type ? n->op_type : "?", (long long)opset,
					dtype_name(dst->dtype));
		Tensor w = {0};
		if (tensor_alloc(&w, via, src->rank, src->dims) < 0)
			return -1;
		rc = cast_native(src, &w);
		if (rc == 0)
			narrow(&w, dst, saturate);
		tensor_free(&w);
		return rc < 0 ? op_unsupported_type(n, opset, src->dtype) : 0;
	}
	if (cast_native(src, dst) < 0)
		return op_unsupported_type(n, opset, src->dtype);
	return 0;
}

static int run_cast(RunCtx *c, int to)
{
	ElemIO e;
	int64_t sat;
	if (to == DT_STRING || (c->nin && c->in[0] && c->in[0]->dtype == DT_STRING))
		return string_cast(c, to); /* ops/string.c */
	if (c->nin < 1 || !c->in[0])
		return op_error(c->node, "missing input 0");
	if (attr_int(c->node, "saturate", 1, &sat) < 0)
		return -1;
	if (to <= 0 || to >= DT_MAX || dtype_bits(to) == 0 || to == DT_FLOAT4E2M1 ||
	    to == DT_COMPLEX64 || to == DT_COMPLEX128)
		return op_error(c->node, "%s-%lld to %s is not supported", c->node->op_type,
				(long long)c->opset, dtype_name(to));
	if (eio_begin(&e, c) < 0)
		return -1;
	const Tensor *x = e.in[0];
	if (op_output(c, 0, to, x->rank, x->dims) < 0)
		return eio_end(&e, -1);
	return eio_end(&e, cast_into(c->node, c->opset, x, c->out[0], (int)sat));
}

/* the 'to' attribute: an element type number, or its name in Cast-1 */
static int cast_to(const Onnx__NodeProto *n, int64_t *to)
{
	const Onnx__AttributeProto *a = node_attr(n, "to");
	if (!a)
		return op_error(n, "missing attribute 'to'");
	if (a->type == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING) {
		char name[32];
		size_t len = a->s.len < sizeof name - 1 ? a->s.len : sizeof name - 1;
		for (size_t i = 0; i < len; i++)
			name[i] = (char)(a->s.data[i] >= 'A' && a->s.data[i] <= 'Z' ?
					 a->s.data[i] - 'A' + 'a' : a->s.data[i]);
		name[len] = 0;
		int dt = dtype_from_name(name);
		if (dt <= 0)
			return op_error(n, "attribute 'to' names an unknown type '%s'", name);
		*to = dt;
		return 0;
	}
	if (attr_int(n, "to", 0, to) < 0)
		return -1;
	if (*to <= 0 || *to >= DT_MAX)
		return op_error(n, "attribute 'to' is %lld, not a tensor element type", (long long)*to);
	return 0;
}

static int cast_run(RunCtx *c)
{
	int64_t to;
	if (cast_to(c->node, &to) < 0)
		return -1;
	return run_cast(c, (int)to);
}

static int castlike_run(RunCtx *c)
{
	if (c->nin < 2 || !c->in[1])
		return op_error(c->node, "missing input target_type");
	return run_cast(c, c->in[1]->dtype);
}

static int infer_cast_to(InferCtx *c, int to)
{
	if (elem_infer_like(c, 0, 0, to) < 0)
		return -1;
	const ValueType *x = c->in[0];
	/* shape data survives int64 <-> int32 round trips (exporters cast shapes
	 * to int32 and back before Expand/Reshape) when every known entry fits */
	int isint = (to == DT_INT64 || to == DT_INT32) && (x->elem == DT_INT64 || x->elem == DT_INT32);
	if (isint && x->symval && !x->value) {
		for (int64_t i = 0; i < x->nsymval; i++)
			if (x->symval[i].v > INT32_MAX)
				return 0;
		vt_put_symval(c->out[0], x->symval, x->nsymval);
	}
	return 0;
}

static int cast_infer(InferCtx *c)
{
	int64_t to;
	if (cast_to(c->node, &to) < 0)
		return -1;
	return infer_cast_to(c, (int)to);
}

static int castlike_infer(InferCtx *c)
{
	if (c->nin < 2 || !c->in[1])
		return op_error(c->node, "missing input target_type");
	return infer_cast_to(c, c->in[1]->elem);
}

OPERATOR(ai_onnx, Cast, 1, cast_infer, cast_run)
OPERATOR(ai_onnx, CastLike, 15, castlike_infer, castlike_run)
