/* tensor.h — dense tensors as the interpreter and quantizer see them.
 *
 * Data is little-endian, row-major, packed; 4-bit types two per byte (low
 * nibble first). A string tensor (DT_STRING) packs its elements into one
 * owned block: numel + 1 uint64 offsets, then the bytes, element i being
 * bytes[off[i], off[i+1]); so it moves and copies as one block, but only
 * string-aware code (tensor_str, tensor_set_strings) reads it, and the
 * interpreter gives it only to operators that take strings. A Tensor either owns its data
 * (freed by tensor_free) or borrows it (owned = 0: e.g. an mmap'd initializer).
 *
 * The same struct carries ONNX's container values, told apart by kind (zero,
 * the default, is a dense tensor, so every zeroed Tensor stays one): a
 * sequence holds nitems owned Tensors in items (each a tensor, or itself a
 * container); an optional holds its element in items[0] (nitems 1) or is
 * empty (nitems 0). A container has no data (nbytes and numel 0, rank 0);
 * its dtype is the element type of the tensors it holds, or 0 when that is
 * unknown (an empty optional of a sequence, say). Kernels that do not
 * expect containers never see one: the interpreter refuses them first. */
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
	int kind;                    /* TK_*: TK_TENSOR unless a container */
	struct Tensor *items;        /* container elements (owned), or NULL */
	int64_t nitems;
} Tensor;

enum { TK_TENSOR = 0, TK_SEQUENCE, TK_OPTIONAL };

/* t (freed first, name kept) becomes an empty container of kind TK_*,
 * whose tensors have element type elem (0: unknown) */
void tensor_container(Tensor *t, int kind, int elem);
/* append a deep copy of v to container t (a sequence, or an empty optional) */
int tensor_append(Tensor *t, const Tensor *v);
/* element i of a DT_STRING tensor (not NUL-terminated), *len bytes */
const char *tensor_str(const Tensor *t, int64_t i, size_t *len);
/* t (data freed first, name kept) becomes a DT_STRING tensor of the given
 * shape whose element i is s[i] (len[i] bytes) */
int tensor_set_strings(Tensor *t, int rank, const int64_t *dims, const char *const *s, const size_t *len);
/* whether t's string block is well formed (offsets within nbytes, in order) */
int tensor_strings_valid(const Tensor *t);
/* "tensor", "sequence", "optional" */
const char *tensor_kind_name(int kind);

/* Set dtype and shape and allocate zeroed data (frees previous owned data).
 * -1 with error() if rank > QM_MAX_RANK, a dim is negative or sizes overflow. */
int tensor_alloc(Tensor *t, int dtype, int rank, const int64_t *dims);
/* (A DT_STRING tensor_alloc() holds numel empty strings.)
 * Point t at borrowed memory of the given shape (no copy; not strings). */
int tensor_borrow(Tensor *t, int dtype, int rank, const int64_t *dims, void *data);
/* Release owned data, container items and the name; t becomes empty. */
void tensor_free(Tensor *t);
/* Deep copy into dst (dst's data freed first, its name kept), containers
 * too. */
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
