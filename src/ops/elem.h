/* elem.h — helpers shared by the elementwise operator files (unary.c,
 * binary.c, variadic.c, activation.c, reduce.c, softmax.c, cast.c, loss.c).
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
#include <string.h>

#include "ops/bcast.h"
#include "ops/op.h"
#include "util.h"

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
/* Kernels with float loops get an AVX2 clone chosen when the program loads
 * (GCC function multiversioning), besides the baseline x86-64 one. Both
 * give the same bits: no FMA contraction in ISO C mode, same IEEE ops. */
#define ELEM_CLONES QM_CLONES("avx2", "default")

/* for (i = 0; i < n; i++) body, written as blocks of 16 so that GCC's -O2
 * (very cheap) vectorizer takes the loop; body sees int64_t i. The body must
 * not carry a dependence between iterations (ivdep: element i of the output
 * may only depend on element i of the inputs). */
#define EL_BLOCKED(n, body) { \
	int64_t i_ = 0; \
	for (; i_ + 16 <= (n); i_ += 16) \
		_Pragma("GCC ivdep") \
		for (int j_ = 0; j_ < 16; j_++) { \
			int64_t i = i_ + j_; \
			body \
		} \
	for (int64_t i = i_; i < (n); i++) { \
		body \
	} \
}
#define UN_LOOP(T, TY, expr) { \
	const T *restrict px = x->data; \
	TY *restrict py = y->data; \
	int64_t n_ = x->numel; \
	EL_BLOCKED(n_, T v = px[i]; py[i] = (TY)(expr);) \
}
/* float32 and double separately (float32 with the fast functions below) */
#define UN_F32(expr) case DT_FLOAT: UN_LOOP(float, float, expr) break;
#define UN_F64(expr) case DT_DOUBLE: UN_LOOP(double, double, expr) break;
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

/* Broadcast binary maps Y = f(A, B) over tensors A, B, Y (Y has the
 * broadcast shape; Y may be A itself when A already has that shape), the
 * elements bound to a and b: BIN_FLOAT(expr) etc. expand to switch cases. */
#define BIN_LOOP(TA, TB, TY, expr) { \
	const TA *pa = A->data; \
	const TB *pb = B->data; \
	TY *py = Y->data; \
	const Tensor *ab_[2] = {A, B}; \
	BcastIter it; \
	bcast_begin(&it, Y->rank, Y->dims, 2, ab_); \
	while (bcast_next(&it)) { \
		const TA *ra = pa + it.off[0]; \
		const TB *rb = pb + it.off[1]; \
		TY *ry = py + it.out; \
		int64_t m = it.n; \
		if (it.step[0] && it.step[1]) { \
			EL_BLOCKED(m, TA a = ra[i]; TB b = rb[i]; (void)a; (void)b; \
				   ry[i] = (TY)(expr);) \
		} else if (it.step[0]) { \
			TB b = rb[0]; \
			(void)b; \
			EL_BLOCKED(m, TA a = ra[i]; ry[i] = (TY)(expr);) \
		} else if (it.step[1]) { \
			TA a = ra[0]; \
			(void)a; \
			EL_BLOCKED(m, TB b = rb[i]; (void)b; ry[i] = (TY)(expr);) \
		} else { \
			TA a = ra[0]; \
			TB b = rb[0]; \
			(void)b; \
			TY v_ = (TY)(expr); \
			for (int64_t i = 0; i < m; i++) \
				ry[i] = v_; \
		} \
	} \
}

#define BIN_CASE(DT, T, TY, expr) case DT: BIN_LOOP(T, T, TY, expr) break;
#define BIN_FLOAT(expr) \
	BIN_CASE(DT_FLOAT, float, float, expr) BIN_CASE(DT_DOUBLE, double, double, expr)
#define BIN_SINT(expr) \
	BIN_CASE(DT_INT8, int8_t, int8_t, expr) BIN_CASE(DT_INT16, int16_t, int16_t, expr) \
	BIN_CASE(DT_INT32, int32_t, int32_t, expr) BIN_CASE(DT_INT64, int64_t, int64_t, expr)
#define BIN_UINT(expr) \
	BIN_CASE(DT_UINT8, uint8_t, uint8_t, expr) BIN_CASE(DT_UINT16, uint16_t, uint16_t, expr) \
	BIN_CASE(DT_UINT32, uint32_t, uint32_t, expr) BIN_CASE(DT_UINT64, uint64_t, uint64_t, expr)
#define BIN_BOOL(expr) BIN_CASE(DT_BOOL, uint8_t, uint8_t, expr)
/* comparisons: bool output */
#define CMP_ALL(expr) \
	BIN_CASE(DT_FLOAT, float, uint8_t, expr) BIN_CASE(DT_DOUBLE, double, uint8_t, expr) \
	BIN_CASE(DT_INT8, int8_t, uint8_t, expr) BIN_CASE(DT_INT16, int16_t, uint8_t, expr) \
	BIN_CASE(DT_INT32, int32_t, uint8_t, expr) BIN_CASE(DT_INT64, int64_t, uint8_t, expr) \
	BIN_CASE(DT_UINT8, uint8_t, uint8_t, expr) BIN_CASE(DT_UINT16, uint16_t, uint8_t, expr) \
	BIN_CASE(DT_UINT32, uint32_t, uint8_t, expr) BIN_CASE(DT_UINT64, uint64_t, uint8_t, expr)

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
/* n float16/bfloat16 values (dt) at src, unaligned, to float32 and back
 * (round to nearest even; F16C instructions where the CPU has them) */
void elem_half_to_float(int dt, const void *src, float *dst, int64_t n);
void elem_float_to_half(int dt, const float *src, void *dst, int64_t n);
/* Prepare the inputs of c: half types widened to float32, misaligned data
 * copied. -1 on error (nothing to free). */
int eio_begin(ElemIO *e, RunCtx *c);
/* Allocate output i of type dt and shape (rank, dims); *out is the tensor to
 * write: the output itself, or a float32 stand-in when dt is a half type. */
int eio_output(ElemIO *e, size_t i, int dt, int rank, const int64_t *dims, Tensor **out);
/* Narrow stand-ins into the outputs (when rc is 0), free temporaries, return rc. */
int eio_end(ElemIO *e, int rc);

/* Run fn(arg, lo, hi) over [0, n) split into at most `threads` contiguous
 * ranges of at least `grain` elements, one per thread of the worker pool
 * (ops/par.h; the caller's thread takes the first); returns the first
 * nonzero result of fn, else 0. Ranges are fixed by (n, threads, grain),
 * so results do not depend on timing. */
int elem_parallel(int threads, int64_t n, int64_t grain,
		  int (*fn)(void *arg, int64_t lo, int64_t hi), void *arg);
/* view of elements [lo, hi) of a whole-byte tensor as a 1-D tensor */
Tensor elem_slice(const Tensor *t, int64_t lo, int64_t hi);

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

/* Fast float32 functions for the activation and softmax kernels: branch
 * free, so loops of them vectorize (the files using them compile with
 * -fno-trapping-math, see activation.c). Accuracy: qm_expf about 2 ulp for
 * results above FLT_MIN (arguments clamp to [-87.3, 88]: exp(x) for x > 88
 * is 1.65e38, not inf, so Exp itself keeps libm); qm_tanhf about 1e-6
 * relative; qm_erff 1.5e-7 absolute (Abramowitz-Stegun 7.1.26 above 0.5,
 * its Taylor series below). NaN propagates. */
static inline float qm_bits2f(uint32_t u)
{
	float f;
	memcpy(&f, &u, 4);
	return f;
}

static inline uint32_t qm_f2bits(float f)
{
	uint32_t u;
	memcpy(&u, &f, 4);
	return u;
}

static inline float qm_expf(float x)
{
	const float magic = 12582912.0f;  /* 1.5 * 2^23: adding it rounds to an integer */
	x = x < -87.3f ? -87.3f : x;
	x = x > 88.0f ? 88.0f : x;
	float t = x * 1.44269504088896341f + magic;
	float n = t - magic;
	/* x - n ln 2 in two steps (Cody-Waite) */
	float r = x - n * 0.693145751953125f - n * 1.428606765330187e-06f;
	float p = 1.9875691500e-4f;
	p = p * r + 1.3981999507e-3f;
	p = p * r + 8.3334519073e-3f;
	p = p * r + 4.1665795894e-2f;
	p = p * r + 1.6666665459e-1f;
	p = p * r + 5.0000001201e-1f;
	float y = p * r * r + r + 1.0f;
	/* 2^n from n's bits in t */
	return y * qm_bits2f((qm_f2bits(t) - 0x4B400000u + 127u) << 23);
}

static inline float qm_sigmoidf(float x)
{
	return 1.0f / (1.0f + qm_expf(-x));
}

static inline float qm_tanhf(float x)
{
	float a = qm_bits2f(qm_f2bits(x) & 0x7fffffffu);
	float a2 = a * a;
	float small = a * (1.0f + a2 * (-0.333333333f + a2 * (0.133333333f + a2 * -0.0539682540f)));
	float big = 1.0f - 2.0f / (qm_expf(2.0f * a) + 1.0f);
	float r = a < 0.0625f ? small : big;
	return qm_bits2f(qm_f2bits(r) | (qm_f2bits(x) & 0x80000000u));
}

static inline float qm_erff(float x)
{
	float a = qm_bits2f(qm_f2bits(x) & 0x7fffffffu);
	float a2 = a * a;
	float small = 1.12837916709551257f * a * (1.0f + a2 * (-0.333333333f + a2 * (0.1f +
		      a2 * (-0.0238095238f + a2 * (0.00462962963f + a2 * -0.000757575758f)))));
	float t = 1.0f / (1.0f + 0.3275911f * a);
	float p = ((((1.061405429f * t - 1.453152027f) * t + 1.421413741f) * t - 0.284496736f) * t +
		   0.254829592f) * t;
	float big = 1.0f - p * qm_expf(-a2);
	float r = a < 0.5f ? small : big;
	return qm_bits2f(qm_f2bits(r) | (qm_f2bits(x) & 0x80000000u));
}

/* Infer a tensor output of element type elem with input in's shape. */
int elem_infer_like(InferCtx *c, size_t out, size_t in, int elem);

#endif
