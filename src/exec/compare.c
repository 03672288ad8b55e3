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

int tensor_compare(const Tensor *got, const Tensor *want, double rtol, double atol,
		   CompareResult *res, char *why, size_t whysize)
{
	char a[128], b[128];
	memset(res, 0, sizeof *res);
	res->first_bad = -1;
	if (whysize)
		why[0] = 0;
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
