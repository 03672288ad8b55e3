/* compare.h — comparing tensors against reference values.
 *
 * Floating-point elements match when |got - want| <= atol + rtol * |want|
 * (numpy.allclose), NaN matches NaN and infinities match themselves;
 * integer and bool elements must be equal. Sequences and optionals match
 * when they are of the same kind and length and their elements match. */
#ifndef QM_EXEC_COMPARE_H
#define QM_EXEC_COMPARE_H

#include <stddef.h>
#include <stdint.h>

#include "onnx/tensor.h"

typedef struct CompareResult {
	int64_t first_bad;    /* flat index of the first mismatch, -1 if none */
	int64_t nbad;         /* number of mismatching elements */
	double max_abs;       /* largest absolute difference (floats) */
	double got, want;     /* values at first_bad */
} CompareResult;

/* 0 when got matches want, 1 when they differ (type, shape or values: why
 * receives one line such as "element 12 [0,3]: got 0.5, expected 0.25"),
 * never -1. */
int tensor_compare(const Tensor *got, const Tensor *want, double rtol, double atol,
		   CompareResult *res, char *why, size_t whysize);

/* whether dt is a floating-point type */
int dtype_is_float(int dt);

#endif
