/* gelu.h — Gelu computed in one pass over float32 (src/ops/unary.c): the
 * interpreter's fusion of torch's decomposition x * 0.5 * (1 + erf(x /
 * sqrt 2)) (src/exec/interp.c) and the Gelu operators (activation.c). */
#ifndef QM_OPS_GELU_H
#define QM_OPS_GELU_H

#include <stdint.h>

#include "ops/op.h"

/* The float operations of the decomposition, in the graph's order:
 * u = x / d (x * d when mul_d), e = erf(u) + a, then y = (x * e) * h, or
 * (x * h) * e when half_first. Each is one IEEE operation on float32 as
 * the unfused Div/Mul, Erf, Add and Mul kernels compute it, so the result
 * has their bits. */
typedef struct GeluErf {
	float d, a, h;
	int mul_d;
	int half_first;
} GeluErf;

/* y[i] for i < n (y may not overlap x); the same bits on every CPU clone
 * and for any split of [0, n) */
void gelu_erf_f32(const float *x, float *y, int64_t n, const GeluErf *g);

/* The kernel of a fused step: output 0 of c gets the Gelu of c->in[xin]
 * (float32), shaped as x broadcast to at least `rank` axes (the rank of
 * the decomposition's scalar constants). */
int gelu_erf_run(RunCtx *c, size_t xin, int rank, const GeluErf *g);

#endif
