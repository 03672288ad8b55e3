/* compare.c — tensor comparison with tolerances (see compare.h). */
#include "exec/compare.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

int dtype_is_float(int dt)
{
	return dt == DT_FLOAT || dt == DT_DOUBLE || dt == DT_FLOAT16 || dt == DT_BFLOAT16;
}

/* "[i,j,k]" of flat index idx in shape */
static void index_str(const Tensor *t, int64_t idx, char *buf, size_t n)
{
	int64_t ix[QM_MAX_RANK];
	for (int k = t->rank - 1; k >= 0; k--) {
		int64_t d = t->dims[k] ? t->dims[k] : 1;
		ix[k] = idx % d;
		idx /= d;
	}
	shape_str(t->rank, ix, buf, n);
}

/* string tensors of the same shape: elements must be equal byte for byte */
static int strings_compare(const Tensor *got, const Tensor *want, CompareResult *res, char *why, size_t whysize)
{
	for (int64_t i = 0; i < got->numel; i++) {
		size_t lg, lw;
		const char *g = tensor_str(got, i, &lg), *w = tensor_str(want, i, &lw);
		if (lg == lw && !memcmp(g, w, lg))
			continue;
		if (res->first_bad < 0) {
			char a[128];
			res->first_bad = i;
			index_str(got, i, a, sizeof a);
			snprintf(why, whysize, "element %lld %s: got \"%.*s\", expected \"%.*s\"", (long long)i, a,
				 (int)(lg < 64 ? lg : 64), g, (int)(lw < 64 ? lw : 64), w);
		}
		res->nbad++;
	}
	if (res->nbad && strlen(why) + 32 < whysize)
		snprintf(why + strlen(why), whysize - strlen(why), " (%lld of %lld differ)", (long long)res->nbad,
			 (long long)got->numel);
	return res->nbad != 0;
}

/* sequences and optionals: same kind and length, elements compared in
 * order (the container's own element type is not compared: an empty one
 * read from a file does not know it) */
static int container_compare(const Tensor *got, const Tensor *want, double rtol, double atol,
			     CompareResult *res, char *why, size_t whysize)
{
	if (got->kind != want->kind) {
		snprintf(why, whysize, "a %s, expected a %s", tensor_kind_name(got->kind), tensor_kind_name(want->kind));
		return 1;
	}
	if (got->nitems != want->nitems) {
		if (got->kind == TK_OPTIONAL)
			snprintf(why, whysize, "optional %s, expected %s", got->nitems ? "has a value" : "is empty",
				 want->nitems ? "a value" : "none");
		else
			snprintf(why, whysize, "sequence of %lld, expected %lld elements", (long long)got->nitems,
				 (long long)want->nitems);
		return 1;
	}
	for (int64_t i = 0; i < got->nitems; i++) {
		char w[384];
		if (tensor_compare(&got->items[i], &want->items[i], rtol, atol, res, w, sizeof w)) {
			snprintf(why, whysize, "%s element %lld: %s", tensor_kind_name(got->kind), (long long)i, w);
			return 1;
		}
	}
	return 0;
}

int tensor_compare(const Tensor *got, const Tensor *want, double rtol, double atol,
		   CompareResult *res, char *why, size_t whysize)
{
	char a[128], b[128];
	memset(res, 0, sizeof *res);
	res->first_bad = -1;
	if (whysize)
		why[0] = 0;
	if (got->kind != TK_TENSOR || want->kind != TK_TENSOR)
		return container_compare(got, want, rtol, atol, res, why, whysize);
	if (got->dtype != want->dtype) {
		snprintf(why, whysize, "type %s, expected %s", dtype_name(got->dtype), dtype_name(want->dtype));
		return 1;
	}
	int same = got->rank == want->rank;
	for (int k = 0; same && k < got->rank; k++)
		same = got->dims[k] == want->dims[k];
	if (!same) {
		snprintf(why, whysize, "shape %s, expected %s", shape_str(got->rank, got->dims, a, sizeof a),
			 shape_str(want->rank, want->dims, b, sizeof b));
		return 1;
	}
	if (got->dtype == DT_STRING)
		return strings_compare(got, want, res, why, whysize);
	int fl = dtype_is_float(got->dtype);
	int bits = dtype_bits(got->dtype);
	for (int64_t i = 0; i < got->numel; i++) {
		int bad;
		double g = 0, w = 0;
		if (fl) {
			g = tensor_get_f64(got, i);
			w = tensor_get_f64(want, i);
			if (isnan(w) || isnan(g))
				bad = isnan(w) != isnan(g);
			else if (isinf(w) || isinf(g))
				bad = g != w;
			else {
				double d = fabs(g - w);
				if (d > res->max_abs)
					res->max_abs = d;
				bad = d > atol + rtol * fabs(w);
			}
		} else if (bits == 4) {
			const uint8_t *pg = got->data, *pw = want->data;
			int sh = (int)(i & 1) * 4;
			g = (pg[i / 2] >> sh) & 15;
			w = (pw[i / 2] >> sh) & 15;
			bad = g != w;
		} else {
			size_t sz = (size_t)bits / 8;
			bad = memcmp((const char *)got->data + (size_t)i * sz,
				     (const char *)want->data + (size_t)i * sz, sz) != 0;
			if (bad) {
				g = (double)tensor_get_i64(got, i);
				w = (double)tensor_get_i64(want, i);
			}
		}
		if (bad) {
			if (res->first_bad < 0) {
				res->first_bad = i;
				res->got = g;
				res->want = w;
			}
			res->nbad++;
		}
	}
	if (res->first_bad < 0)
		return 0;
	index_str(got, res->first_bad, a, sizeof a);
	snprintf(why, whysize, "element %lld %s: got %.9g, expected %.9g (%lld of %lld differ)",
		 (long long)res->first_bad, a, res->got, res->want, (long long)res->nbad,
		 (long long)got->numel);
	return 1;
}
