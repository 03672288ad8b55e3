/* tensor.h — dense tensors as the interpreter and quantizer see them.
 *
 * Data is little-endian, row-major, packed; 4-bit types two per byte (low
 * nibble first), strings are not supported. A Tensor either owns its data
 * (freed by tensor_free) or borrows it (owned = 0: e.g. an mmap'd initializer). */
#ifndef QM_ONNX_TENSOR_H
#define QM_ONNX_TENSOR_H

#include <stddef.h>
#include <stdint.h>

#include "onnx/model.h"

#define QM_MAX_RANK 12

typedef struct Tensor {
	int dtype;                   /* DT_* */
	int rank;
	int64_t dims[QM_MAX_RANK];
	int64_t numel;
	size_t nbytes;
	void *data;
	int owned;
	char *name;                  /* optional, owned */
} Tensor;

/* Set dtype and shape and allocate zeroed data (frees previous owned data).
 * -1 with error() if rank > QM_MAX_RANK, a dim is negative or sizes overflow. */
int tensor_alloc(Tensor *t, int dtype, int rank, const int64_t *dims);
/* Point t at borrowed memory of the given shape (no copy). */
int tensor_borrow(Tensor *t, int dtype, int rank, const int64_t *dims, void *data);
/* Release owned data and the name; t becomes empty. */
void tensor_free(Tensor *t);
/* Deep copy into dst (dst freed first). */
int tensor_copy(Tensor *dst, const Tensor *src);
/* Build a tensor from an initializer/attribute TensorProto (copies data so
 * the result is aligned and owned). */
int tensor_from_proto(Model *m, const Onnx__TensorProto *p, Tensor *t);
/* New TensorProto (raw_data) from t; name may be NULL. */
Onnx__TensorProto *tensor_to_proto(const Tensor *t, const char *name);
/* Element count for a shape (-1 on overflow). */
int64_t shape_numel(int rank, const int64_t *dims);
/* "[1,3,224,224]" into buf */
const char *shape_str(int rank, const int64_t *dims, char *buf, size_t n);

/* float16 / bfloat16 conversions (round to nearest even) */
float half_to_float(uint16_t h);
uint16_t float_to_half(float f);
float bf16_to_float(uint16_t h);
uint16_t float_to_bf16(float f);

/* Read element i of any numeric tensor as double / int64 (for shape data). */
double tensor_get_f64(const Tensor *t, int64_t i);
int64_t tensor_get_i64(const Tensor *t, int64_t i);

#endif
