/* nn.h — helpers shared by the neural-network operator files (conv.c,
 * matmul.c, pool.c, norm.c, resize.c, pad.c, quant.c, dropout.c, einsum.c).
 *
 * Float kernels compute in float32: nn_f32_in() gives a float view of any
 * floating-point tensor (the tensor's own data when it is aligned float32,
 * else a converted copy), nn_f32_out() allocates an output and hands back a
 * float buffer that nn_f32_done() converts into the output's type.
 *
 * Window geometry (Conv, pooling) is computed once by nn_geom() from the
 * attributes kernel_shape, strides, dilations, pads, auto_pad and ceil_mode,
 * both for inference (unknown input sizes are -1) and for kernels. */
#ifndef QM_OPS_NN_H
#define QM_OPS_NN_H

#include <stddef.h>
#include <stdint.h>

#include "ops/op.h"

/* at most this many spatial dimensions in window kernels */
#define NN_MAXSP 3

/* dt is float, double, float16 or bfloat16 */
int nn_is_float(int dt);
/* a float32 view of floating-point tensor t: t's own data or a converted
 * copy stored in *tmp (free it); NULL with op_error for other types */
const float *nn_f32_in(RunCtx *c, const Tensor *t, float **tmp);
/* allocate output i (type dt) and return a float32 buffer for it: the
 * output's data when dt is float, else a temporary in *tmp */
float *nn_f32_out(RunCtx *c, size_t i, int dt, int rank, const int64_t *dims, float **tmp);
/* convert tmp (when not NULL) into out's type and free it */
void nn_f32_done(Tensor *out, float *tmp);
/* a float32 copy of any numeric tensor (malloc'd; never NULL) */
float *nn_f32_copy(const Tensor *t);
/* store n floats into dst of type dt (float, double, float16, bfloat16) */
void nn_f32_store(int dt, void *dst, const float *src, int64_t n);

/* floor division and the ceiling of a / b for b > 0 */
int64_t nn_floordiv(int64_t a, int64_t b);
int64_t nn_ceildiv(int64_t a, int64_t b);

typedef struct NnGeom {
	int nsp;                  /* spatial dimensions */
	int64_t in[QM_MAX_RANK];  /* input sizes, -1 if unknown */
	int64_t k[QM_MAX_RANK], s[QM_MAX_RANK], d[QM_MAX_RANK];
	int64_t pb[QM_MAX_RANK], pe[QM_MAX_RANK];  /* pads at begin / end */
	int64_t out[QM_MAX_RANK]; /* output sizes, -1 if unknown */
} NnGeom;

/* Geometry of a window op over nsp spatial dims of sizes in[] (-1 unknown).
 * kernel: the kernel sizes (NULL: read attribute kernel_shape, required);
 * pool: honour ceil_mode. -1 with op_error on bad attributes. */
int nn_geom(const Onnx__NodeProto *n, int nsp, const int64_t *in, const int64_t *kernel,
	    int pool, NnGeom *g);

/* a known dimension, or a fresh symbol when v < 0 */
Dim nn_dim(InferCtx *c, int64_t v);
/* input i of an InferCtx that must be present; op_error when absent */
const ValueType *nn_in(InferCtx *c, size_t i);
/* the known contents of an input's value, or NULL */
const Tensor *nn_value(InferCtx *c, size_t i);

/* Run fn(arg, lo, hi) over [0, n) split into up to threads contiguous
 * pieces, as par_run (ops/par.h) splits them, on the worker pool
 * (threads <= 1 or n <= 1: one call in this thread). */
void nn_parallel(int threads, int64_t n, void (*fn)(void *arg, int64_t lo, int64_t hi), void *arg);

/* round half to even, as QuantizeLinear and the QLinear ops round */
float nn_round_even(float x);
/* value range of an integer type (8 to 64 bits); 0 if dt is not one */
int nn_int_range(int dt, double *lo, double *hi);
/* store v as element i of dt: integers rounded half to even and saturated,
 * floating-point types converted */
void nn_put_sat(int dt, void *base, int64_t i, double v);

#endif
