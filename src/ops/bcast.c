/* bcast.c — numpy-style broadcasting at run time (see bcast.h). */
#include "ops/bcast.h"

#include <string.h>

#include "ops/op.h"
#include "util.h"

int bcast_shape(const Onnx__NodeProto *n, int nin, const int *ranks,
		const int64_t *const *dims, int *rank, int64_t *out)
{
	int r = 0;
	for (int k = 0; k < nin; k++) {
		if (ranks[k] < 0 || ranks[k] > QM_MAX_RANK)
			return n ? op_error(n, "input rank %d is not supported", ranks[k])
				 : error("input rank %d is not supported", ranks[k]);
		if (ranks[k] > r)
			r = ranks[k];
	}
	int64_t res[QM_MAX_RANK];  /* out may be one of the inputs */
	for (int i = 0; i < r; i++) {
		int64_t d = 1;
		int from = -1;
		for (int k = 0; k < nin; k++) {
			int j = i - (r - ranks[k]);
			if (j < 0)
				continue;
			int64_t dk = dims[k][j];
			if (dk == 1)
				continue;
			if (d == 1) {
				d = dk;
				from = k;
			} else if (dk != d) {
				if (n)
					return op_error(n, "cannot broadcast input %d and input %d: "
							"dimension %d is %lld vs %lld", from, k, i,
							(long long)d, (long long)dk);
				return error("cannot broadcast shapes: dimension %d is %lld vs %lld",
					     i, (long long)d, (long long)dk);
			}
		}
		res[i] = d;
	}
	if (r)
		memcpy(out, res, sizeof *out * (size_t)r);
	*rank = r;
	return 0;
}

int bcast_shape_t(const Onnx__NodeProto *n, int nin, const Tensor *const *in,
		  int *rank, int64_t *out)
{
	int ranks[BC_MAXIN];
	const int64_t *dims[BC_MAXIN];
	if (nin > BC_MAXIN)
		return n ? op_error(n, "broadcasting more than %d inputs at once", BC_MAXIN)
			 : error("broadcasting more than %d inputs at once", BC_MAXIN);
	for (int k = 0; k < nin; k++) {
		ranks[k] = in[k]->rank;
		dims[k] = in[k]->dims;
	}
	return bcast_shape(n, nin, ranks, dims, rank, out);
}

void bcast_begin_dims(BcastIter *it, int rank, const int64_t *dims, int nin,
		      const int *ranks, const int64_t *const *dimsv)
{
	int64_t full[BC_MAXIN][QM_MAX_RANK];
	int64_t numel = 1;

	memset(it, 0, sizeof *it);
	it->nin = nin;
	/* contiguous strides of each input aligned to the output, 0 where broadcast */
	for (int k = 0; k < nin; k++) {
		int64_t s = 1;
		for (int i = rank - 1; i >= 0; i--) {
			int j = i - (rank - ranks[k]);
			int64_t dk = j >= 0 ? dimsv[k][j] : 1;
			full[k][i] = dk == 1 ? 0 : s;
			s *= dk;
		}
	}
	for (int i = 0; i < rank; i++)
		numel *= dims[i];
	/* drop size-1 dimensions, merge a dimension into the next inner one when
	 * every input strides through both the same way */
	int r = 0;
	for (int i = 0; i < rank; i++) {
		if (dims[i] == 1)
			continue;
		if (r > 0) {
			int ok = 1;
			for (int k = 0; k < nin; k++)
				if (it->stride[k][r - 1] != full[k][i] * dims[i])
					ok = 0;
			if (ok) {
				it->dims[r - 1] *= dims[i];
				for (int k = 0; k < nin; k++)
					it->stride[k][r - 1] = full[k][i];
				continue;
			}
		}
		it->dims[r] = dims[i];
		for (int k = 0; k < nin; k++)
			it->stride[k][r] = full[k][i];
		r++;
	}
	if (r == 0) {
		it->dims[0] = 1;
		r = 1;
	}
	it->rank = r;
	it->n = it->dims[r - 1];
	for (int k = 0; k < nin; k++)
		it->step[k] = it->stride[k][r - 1] ? 1 : 0;
	it->rows = numel == 0 ? 0 : numel / it->n;
	it->row = 0;
}

void bcast_begin(BcastIter *it, int rank, const int64_t *dims, int nin,
		 const Tensor *const *in)
{
	int ranks[BC_MAXIN];
	const int64_t *dimsv[BC_MAXIN];
	for (int k = 0; k < nin && k < BC_MAXIN; k++) {
		ranks[k] = in[k]->rank;
		dimsv[k] = in[k]->dims;
	}
	bcast_begin_dims(it, rank, dims, nin < BC_MAXIN ? nin : BC_MAXIN, ranks, dimsv);
}

int bcast_next(BcastIter *it)
{
	if (it->row >= it->rows)
		return 0;
	if (it->row > 0) {
		/* odometer over the outer dimensions */
		for (int i = it->rank - 2; i >= 0; i--) {
			it->idx[i]++;
			for (int k = 0; k < it->nin; k++)
				it->off[k] += it->stride[k][i];
			if (it->idx[i] < it->dims[i])
				break;
			for (int k = 0; k < it->nin; k++)
				it->off[k] -= it->stride[k][i] * it->dims[i];
			it->idx[i] = 0;
		}
	}
	it->out = it->row * it->n;
	it->row++;
	return 1;
}

int bcast_expand(const Onnx__NodeProto *n, const Tensor *src, Tensor *dst)
{
	int bits = dtype_bits(src->dtype);
	if (src->dtype != dst->dtype || bits < 8 || bits % 8)
		return n ? op_error(n, "cannot broadcast %s into %s", dtype_name(src->dtype),
				    dtype_name(dst->dtype))
			 : error("cannot broadcast %s into %s", dtype_name(src->dtype),
				 dtype_name(dst->dtype));
	int rank;
	int64_t dims[QM_MAX_RANK];
	const Tensor *both[2] = {dst, src};
	if (bcast_shape_t(n, 2, both, &rank, dims) < 0)
		return -1;
	if (rank != dst->rank || memcmp(dims, dst->dims, (size_t)rank * sizeof *dims)) {
		char a[128], b[128];
		return n ? op_error(n, "shape %s does not broadcast to %s",
				    shape_str(src->rank, src->dims, a, sizeof a),
				    shape_str(dst->rank, dst->dims, b, sizeof b))
			 : error("shape %s does not broadcast to %s",
				 shape_str(src->rank, src->dims, a, sizeof a),
				 shape_str(dst->rank, dst->dims, b, sizeof b));
	}
	size_t es = (size_t)bits / 8;
	const uint8_t *s = src->data;
	uint8_t *d = dst->data;
	BcastIter it;
	bcast_begin(&it, dst->rank, dst->dims, 1, &src);
	while (bcast_next(&it)) {
		uint8_t *o = d + (size_t)it.out * es;
		const uint8_t *p = s + (size_t)it.off[0] * es;
		if (it.step[0]) {
			memcpy(o, p, (size_t)it.n * es);
		} else if (es == 4) {
			for (int64_t i = 0; i < it.n; i++)
				memcpy(o + 4 * i, p, 4);
		} else {
			for (int64_t i = 0; i < it.n; i++)
				memcpy(o + (size_t)i * es, p, es);
		}
	}
	return 0;
}
