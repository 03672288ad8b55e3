/* elem.h — helpers shared by the elementwise operator files (unary.c,
 * binary.c, variadic.c, activation.c, reduce.c, softmax.c, cast.c).
 *
 * Kernels are written once per type family with the X-macro lists below and
 * compute in a "native" type: float16, bfloat16 (and, for Cast, the float8
 * and 4-bit types) are converted to float32 on the way in and back on the
 * way out. An ElemIO does that bookkeeping:
 *
 *	ElemIO e;
 *	if (eio_begin(&e, c) < 0)          // e.in[k]: native, aligned views
 *		return -1;
 *	Tensor *y;
 *	if (eio_output(&e, 0, c->in[0]->dtype, rank, dims, &y) < 0)
 *		return eio_end(&e, -1);    // y: float32 when the real type is half
 *	... compute into y from e.in[...] ...
 *	return eio_end(&e, 0);             // narrows y into the real output
 *
 * Type lists call X(DT_CONSTANT, c_type). */
#ifndef QM_OPS_ELEM_H
#define QM_OPS_ELEM_H

#include <stdint.h>

#include "ops/op.h"

#define ELEM_FLOATS(X) X(DT_FLOAT, float) X(DT_DOUBLE, double)
#define ELEM_SINTS(X) X(DT_INT8, int8_t) X(DT_INT16, int16_t) X(DT_INT32, int32_t) \
	X(DT_INT64, int64_t)
#define ELEM_UINTS(X) X(DT_UINT8, uint8_t) X(DT_UINT16, uint16_t) X(DT_UINT32, uint32_t) \
	X(DT_UINT64, uint64_t)
#define ELEM_INTS(X) ELEM_SINTS(X) ELEM_UINTS(X)
#define ELEM_SIGNED(X) ELEM_FLOATS(X) ELEM_SINTS(X)
#define ELEM_NUMERIC(X) ELEM_FLOATS(X) ELEM_INTS(X)

/* Elementwise maps from tensor x to tensor y (same element count), the
 * element bound to v: UN_FLOAT(expr) etc. expand to switch cases. */
#define UN_LOOP(T, TY, expr) { \
	const T *px = x->data; \
	TY *py = y->data; \
	for (int64_t i = 0; i < x->numel; i++) { \
		T v = px[i]; \
		py[i] = (TY)(expr); \
	} \
}
#define UN_FLOAT(expr) \
	case DT_FLOAT: UN_LOOP(float, float, expr) break; \
	case DT_DOUBLE: UN_LOOP(double, double, expr) break;
#define UN_SINT(expr) \
	case DT_INT8: UN_LOOP(int8_t, int8_t, expr) break; \
	case DT_INT16: UN_LOOP(int16_t, int16_t, expr) break; \
	case DT_INT32: UN_LOOP(int32_t, int32_t, expr) break; \
	case DT_INT64: UN_LOOP(int64_t, int64_t, expr) break;
#define UN_UINT(expr) \
	case DT_UINT8: UN_LOOP(uint8_t, uint8_t, expr) break; \
	case DT_UINT16: UN_LOOP(uint16_t, uint16_t, expr) break; \
	case DT_UINT32: UN_LOOP(uint32_t, uint32_t, expr) break; \
	case DT_UINT64: UN_LOOP(uint64_t, uint64_t, expr) break;
/* predicates: float input, bool output */
#define UN_FLOAT_PRED(expr) \
	case DT_FLOAT: UN_LOOP(float, uint8_t, expr) break; \
	case DT_DOUBLE: UN_LOOP(double, uint8_t, expr) break;

#define EIO_MAXOUT 4

typedef struct ElemIO {
	RunCtx *c;
	size_t nin;
	const Tensor **in;        /* nin native views; NULL where absent */
	Tensor *tin;              /* nin temporaries behind the views */
	Tensor tout[EIO_MAXOUT];  /* float32 stand-ins for half outputs */
	int half[EIO_MAXOUT];     /* real output type when it is narrowed, else 0 */
} ElemIO;

/* dt is float16 or bfloat16 (computed in float32) */
int elem_is_half(int dt);
/* the type kernels see for dt: float for float16/bfloat16, else dt */
int elem_native(int dt);
/* Prepare the inputs of c: half types widened to float32, misaligned data
 * copied. -1 on error (nothing to free). */
int eio_begin(ElemIO *e, RunCtx *c);
/* Allocate output i of type dt and shape (rank, dims); *out is the tensor to
 * write: the output itself, or a float32 stand-in when dt is a half type. */
int eio_output(ElemIO *e, size_t i, int dt, int rank, const int64_t *dims, Tensor **out);
/* Narrow stand-ins into the outputs (when rc is 0), free temporaries, return rc. */
int eio_end(ElemIO *e, int rc);

/* Convert src into dst, which is allocated with the target type and src's
 * element count (Cast semantics: saturate selects float8 saturation). */
int cast_into(const Onnx__NodeProto *n, int64_t opset, const Tensor *src, Tensor *dst,
	      int saturate);

/* double to integer without undefined behaviour: NaN gives 0, values beyond
 * the range saturate (Cast then wraps into narrower types, as numpy does) */
static inline int64_t elem_f2i64(double v)
{
	if (v != v)
		return 0;
	if (v >= 9223372036854775807.0)
		return INT64_MAX;
	if (v <= -9223372036854775808.0)
		return INT64_MIN;
	return (int64_t)v;
}
static inline uint64_t elem_f2u64(double v)
{
	if (v != v || v <= -1.0)
		return v <= -1.0 ? (uint64_t)elem_f2i64(v) : 0;
	if (v >= 18446744073709551615.0)
		return UINT64_MAX;
	return (uint64_t)v;
}

/* Infer a tensor output of element type elem with input in's shape. */
int elem_infer_like(InferCtx *c, size_t out, size_t in, int elem);

#endif
