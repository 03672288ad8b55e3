/* dataio.h — tensors in files: .npy, .npz, ONNX TensorProto .pb and
 * test_data_set_N/ directories, and iteration over samples for calibration.
 *
 * Every reader checks sizes before it copies: a truncated, big-endian,
 * object-typed, fortran-ordered or string .npy is an error naming the file.
 * Writers replace their target atomically (temp file + rename). Tensors read
 * own their (aligned) data; their name is set when the file names them (npz
 * member "x.npy" gives "x", a TensorProto's name) and NULL when the tensor is
 * positional (np.savez's arr_N, input_K.pb of a test data set). */
#ifndef QM_EXEC_DATAIO_H
#define QM_EXEC_DATAIO_H

#include <stddef.h>

#include "onnx/tensor.h"

typedef struct TensorList {
	Tensor *t;
	size_t n, cap;
} TensorList;

/* append a tensor (ownership moves into the list; *t is left empty) */
void tl_push(TensorList *l, Tensor *t);
/* free every tensor and the array */
void tl_free(TensorList *l);

/* .npy from memory; what names the source in messages */
int npy_parse(const void *buf, size_t len, const char *what, Tensor *t);
int npy_read(const char *path, Tensor *t);
/* encode t as .npy (format 1.0) into a malloc'd buffer */
int npy_encode(const Tensor *t, void **buf, size_t *len);
int npy_write(const char *path, const Tensor *t);

/* every member of an .npz archive, in archive order */
int npz_read(const char *path, TensorList *out);
/* ts[i].name names member i ("arr_i" when NULL) */
int npz_write(const char *path, const Tensor *ts, size_t n);

/* tensor_from_proto(), also for empty tensors (numel 0) whose typed data
 * fields are absent */
int tensor_load_proto(Model *m, const Onnx__TensorProto *p, Tensor *t);

/* one serialized ONNX TensorProto (a SequenceProto or OptionalProto is
 * refused, saying so) */
int pb_parse(const void *buf, size_t len, const char *what, Tensor *t);
int pb_read(const char *path, Tensor *t);
int pb_write(const char *path, const Tensor *t, const char *name);

/* PREFIX_0.pb, PREFIX_1.pb, ... of DIR (prefix "input" or "output"), in
 * order, names cleared (positional) */
int testset_read(const char *dir, const char *prefix, TensorList *out);
/* the same, file k holding a value of kind kinds[k] (TK_*: a TensorProto,
 * SequenceProto or OptionalProto; tensors past nkinds) */
int testset_read_kinds(const char *dir, const char *prefix, const int *kinds, size_t nkinds, TensorList *out);

/* one serialized value of the given kind (TK_*); a file of another kind is
 * refused by name. pb_write() writes containers as their protos too. */
int pb_parse_kind(const void *buf, size_t len, const char *what, int kind, Tensor *t);
int pb_read_kind(const char *path, int kind, Tensor *t);

/* any data file by its extension: .npy or .pb gives one tensor, .npz all */
int data_read_file(const char *path, TensorList *out);

/* Samples for calibration and verification. Each spec is a file (.npy,
 * .npz, .pb: one sample), a test_data_set directory (one sample), a
 * directory (each test_data_set_* subdirectory and each data file in it, in
 * name order, is a sample) or a glob of those. */
typedef struct SampleIter SampleIter;
int samples_open(const char *const *specs, size_t nspecs, SampleIter **out);
/* number of samples found */
size_t samples_count(const SampleIter *it);
/* 1 with the next sample in *out (caller tl_free()s), 0 at the end, -1 error */
int samples_next(SampleIter *it, TensorList *out);
/* the same for sample i (0 past the last), leaving the position alone:
 * threads may read samples of one iterator side by side */
int samples_read(const SampleIter *it, size_t i, TensorList *out);
/* the file or directory sample i is read from (NULL past the last) */
const char *samples_path(const SampleIter *it, size_t i);
/* restart from the first sample */
void samples_rewind(SampleIter *it);
void samples_close(SampleIter *it);

#endif
