/* shapeutil.h — helpers shared by the shape, index, control-flow and
 * recurrent operators (shape.c, gather.c, index.c, control.c, rnn.c, misc.c).
 *
 * "Shape data" is the contents of a 0-D or 1-D integer tensor that describes
 * a shape (the output of Shape and what Gather/Slice/Concat/Unsqueeze/...
 * make of it). The pass keeps it in ValueType.value when every entry is
 * known and in ValueType.symval when some are symbolic. A symval entry is a
 * known value (v >= 0), a symbol (sym set), or v < 0 without a symbol:
 * unknown, or a literal negative number such as Reshape's -1 (Concat of
 * shape data and a constant [-1]). Only Reshape reads those as -1, which is
 * sound because a single unknown entry of a valid target equals what -1
 * would solve to; everywhere else they are unknown. Shape names unknown
 * input dims with fresh symbols so its data never contains such entries. */
#ifndef QM_OPS_SHAPEUTIL_H
#define QM_OPS_SHAPEUTIL_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "ops/op.h"

/* bytes per element of dt for kernels that move elements; -1 with
 * "OP-N on TYPE is not supported" for strings and 4-bit types */
int op_elemsize(const Onnx__NodeProto *n, int64_t opset, int dt, size_t *es);
/* "OP-N on TYPE is not supported" */
int op_unsupported_type(const Onnx__NodeProto *n, int64_t opset, int dt);

/* Contents of the integer tensor t (int32 or int64, rank 0 or 1) as a
 * malloc'd int64 array of *len entries; what names the input in errors. */
int op_tensor_ints(const Onnx__NodeProto *n, const Tensor *t, const char *what,
		   int64_t **v, int64_t *len);

/* Known contents of a 0-D/1-D integer value (symval, or value converted),
 * malloc'd; NULL when neither is known. */
Dim *vt_get_symval(const ValueType *t, int64_t *n);
/* Record d[0..n) as the contents of the int64 0-D/1-D value t (rank already
 * set); when every entry is a known value >= 0 also sets t->value. */
void vt_put_symval(ValueType *t, const Dim *d, int64_t n);
/* Product of dims: a known value, the symbol when one symbol remains and
 * the rest are 1, unknown otherwise (v = -1, sym = NULL). */
Dim dims_product(const Dim *d, int n);
/* Sum of two dims with the same rules. */
Dim dim_add(Dim a, Dim b);
/* Dim from an int64 shape entry (v >= 0) */
Dim dim_known(int64_t v);
/* true when t is a tensor of known rank whose dims are all known; fills dims */
int vt_known_dims(const ValueType *t, int64_t *dims);

/* The number of elements of a sequence type, when known. ValueType's
 * rank/dims mean nothing for sequences elsewhere (merging, printing and
 * writing types ignore them), so these operators keep the count there: rank
 * 1 and dims[0].v = count when known, rank -1 otherwise. An empty sequence
 * (count 0) constrains no element shape. */
int64_t vt_seq_len(const ValueType *t);
void vt_set_seq_len(ValueType *t, int64_t n);

/* The least common type of a and b into out (out may alias a or b): same
 * kind and element type, dims equal in both (others unknown), containers
 * joined element-wise; an empty sequence constrains nothing. No contents. */
void vt_join(ValueType *out, const ValueType *a, const ValueType *b);
/* a and b are the same type (dims by dim_eq, or both unknown), recursively */
int vt_same(const ValueType *a, const ValueType *b);

/* Read element i of a buffer of type dt as double / int64, and write them.
 * Numeric types and bool only (callers check op_numeric first). */
double elem_get_f64(int dt, const void *base, int64_t i);
int64_t elem_get_i64(int dt, const void *base, int64_t i);
void elem_put_f64(int dt, void *base, int64_t i, double v);
void elem_put_i64(int dt, void *base, int64_t i, int64_t v);
/* dt is a real numeric type (float, integer, bool) elem_get/put handle */
int dt_numeric(int dt);
/* dt is a floating-point type (float, double, float16, bfloat16) */
int dt_float(int dt);

/* Copy one element of es bytes (constant-size fast paths). */
static inline void elem_copy(void *dst, const void *src, size_t es)
{
	switch (es) {
	case 1: memcpy(dst, src, 1); break;
	case 2: memcpy(dst, src, 2); break;
	case 4: memcpy(dst, src, 4); break;
	case 8: memcpy(dst, src, 8); break;
	default: memcpy(dst, src, es); break;
	}
}

/* Element offset bookkeeping: increment the row-major index idx over dims
 * (rank r), returning the innermost axis that was incremented without carry,
 * or -1 when the odometer wrapped around. */
int index_next(int64_t *idx, const int64_t *dims, int r);
/* row-major strides (in elements) of dims */
void dims_strides(int r, const int64_t *dims, int64_t *strides);

#endif
