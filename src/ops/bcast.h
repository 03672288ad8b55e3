/* bcast.h — numpy-style (multidirectional) broadcasting at run time.
 *
 * Shapes are right-aligned; a dimension of 1 (or a missing leading one)
 * stretches to the size of the others. bcast_shape() computes the result shape
 * of up to BC_MAXIN inputs, or fails naming the node and both sizes.
 *
 * A BcastIter walks the result in row-major order one contiguous "row" at a
 * time. Adjacent dimensions that broadcast the same way in every input are
 * merged first, so the innermost row is as long as possible: n elements,
 * the output row starts at element out (always row * n, the output being
 * packed), and input k starts at element off[k] and advances by step[k]
 * (1, or 0 where it is broadcast along the row). Offsets are in elements, not
 * bytes, so one iterator serves any element size:
 *
 *	BcastIter it;
 *	const Tensor *in[2] = {a, b};
 *	bcast_begin(&it, y->rank, y->dims, 2, in);
 *	while (bcast_next(&it))
 *		for (int64_t i = 0; i < it.n; i++)
 *			py[it.out + i] = pa[it.off[0] + i * it.step[0]] +
 *					 pb[it.off[1] + i * it.step[1]];
 *
 * bcast_begin_dims() takes plain shapes instead of tensors (Expand's target,
 * shapes from inference). bcast_expand() copies any whole-byte element type
 * from a tensor into a larger, already allocated one (Expand, Where-like
 * selection on bytes). 4-bit types have no element offsets and are refused. */
#ifndef QM_OPS_BCAST_H
#define QM_OPS_BCAST_H

#include <stdint.h>

#include "onnx/tensor.h"

#define BC_MAXIN 4

typedef struct BcastIter {
	int nin;
	int rank;                         /* after merging, >= 1 */
	int64_t dims[QM_MAX_RANK];
	int64_t stride[BC_MAXIN][QM_MAX_RANK];  /* element strides, 0 = broadcast */
	int64_t idx[QM_MAX_RANK];         /* position of the current row */
	int64_t rows, row;                /* number of rows, next row */
	/* the current row */
	int64_t n;                        /* elements in a row */
	int64_t out;                      /* output element offset */
	int64_t off[BC_MAXIN];            /* input element offsets */
	int64_t step[BC_MAXIN];           /* 0 or 1 */
} BcastIter;

/* Result shape of broadcasting nin shapes (ranks[k], dims[k]) into *rank and
 * out (QM_MAX_RANK entries, may be one of the inputs); -1 with op_error on
 * node n (error() if n is NULL) when two sizes differ and neither is 1. */
int bcast_shape(const Onnx__NodeProto *n, int nin, const int *ranks,
		const int64_t *const *dims, int *rank, int64_t *out);
/* bcast_shape() of the shapes of nin tensors */
int bcast_shape_t(const Onnx__NodeProto *n, int nin, const Tensor *const *in,
		  int *rank, int64_t *out);
/* Start iterating output shape (rank, dims) over nin tensors whose shapes
 * broadcast to it (checked earlier with bcast_shape). */
void bcast_begin(BcastIter *it, int rank, const int64_t *dims, int nin,
		 const Tensor *const *in);
/* the same from plain shapes */
void bcast_begin_dims(BcastIter *it, int rank, const int64_t *dims, int nin,
		      const int *ranks, const int64_t *const *dimsv);
/* Advance to the next row; 0 when done (at once for an empty output). */
int bcast_next(BcastIter *it);
/* Fill dst (allocated, dst's shape) with src broadcast to it; src and dst
 * must have the same dtype. -1 with op_error on node n (may be NULL) if the
 * shapes do not broadcast or the type has no byte-addressable elements. */
int bcast_expand(const Onnx__NodeProto *n, const Tensor *src, Tensor *dst);

#endif
