/* gatherbq.c — onnxruntime's com.microsoft GatherBlockQuantized on uint8
 * data: inference and kernel, for the embeddings weight-only quantization
 * writes (src/quant/weightonly.c).
 *
 *   output[i..., :] = dequantize(data[indices[i...], :])
 *
 * data is uint8 [V, ..., D * bits / 8] holding 2-, 4- or 8-bit codes
 * packed low bits first over the flat element index; gather_axis must be
 * 0 and quantize_axis the last axis (onnxruntime's rule for uint8 data).
 * Element j of a row belongs to block j / block_size; scales have data's
 * rank with the last axis ceil(D / block_size), zero_points (optional)
 * the same with the last axis packed ceil(n_blocks * bits / 8) bytes low
 * bits first; absent, every zero point is 2^(bits-1). A value is
 * (code - zero point) * scale; an index out of [-V, V) gives a row of
 * zeros, as onnxruntime's kernel. int4/uint4 and float8 data are refused
 * by name. */
#include <stdlib.h>
#include <string.h>

#include "ops/nn.h"
#include "ops/op.h"
#include "ops/shapeutil.h"
#include "util.h"

typedef struct GbqAttrs {
	int64_t gaxis, qaxis, block, bits;
} GbqAttrs;

static int gbq_attrs(const Onnx__NodeProto *n, int rank, GbqAttrs *a)
{
	if (attr_int(n, "gather_axis", 0, &a->gaxis) < 0 || attr_int(n, "quantize_axis", 1, &a->qaxis) < 0 ||
	    attr_int(n, "block_size", 128, &a->block) < 0 || attr_int(n, "bits", 4, &a->bits) < 0)
		return -1;
	if (a->bits != 2 && a->bits != 4 && a->bits != 8)
		return op_error(n, "bits = %lld is not supported for uint8 data (2, 4 or 8)", (long long)a->bits);
	if (a->block < 16 || (a->block & (a->block - 1)))
		return op_error(n, "block_size = %lld is not valid: expected a power of two >= 16", (long long)a->block);
	if (rank >= 0) {
		if (norm_axis(n, a->gaxis, rank, &a->gaxis) < 0 || norm_axis(n, a->qaxis, rank, &a->qaxis) < 0)
			return -1;
		if (a->gaxis != 0 || a->qaxis != rank - 1 || rank < 2)
			return op_error(n, "uint8 data needs gather_axis 0 and quantize_axis the last of at least 2 axes");
	}
	return 0;
}

static int gbq_infer(InferCtx *c)
{
	const ValueType *d = nn_in(c, 0), *ix = nn_in(c, 1), *sc = nn_in(c, 2);
	GbqAttrs at;
	if (!d || !ix || !sc || gbq_attrs(c->node, d->rank, &at) < 0)
		return -1;
	if (d->elem && d->elem != DT_UINT8)
		return op_error(c->node, "GatherBlockQuantized on %s data is not supported (uint8 only)", dtype_name(d->elem));
	ValueType *y = c->out[0];
	if (d->rank < 0 || ix->rank < 0) {
		vt_set_tensor(y, sc->elem, -1);
		return 0;
	}
	if (ix->rank + d->rank - 1 > QM_MAX_RANK)
		return op_error(c->node, "output rank %d is too large", ix->rank + d->rank - 1);
	vt_set_tensor(y, sc->elem, ix->rank + d->rank - 1);
	int k = 0;
	for (int i = 0; i < ix->rank; i++)
		y->dims[k++] = ix->dims[i];
	for (int i = 1; i < d->rank; i++)
		y->dims[k++] = d->dims[i];
	Dim *last = &y->dims[k - 1];
	*last = last->v >= 0 ? (Dim){last->v * (8 / at.bits), NULL} : infer_fresh_dim(c);
	return 0;
}

static int gbq_run(RunCtx *c)
{
	if (run_need(c, 0) < 0 || run_need(c, 1) < 0 || run_need(c, 2) < 0)
		return -1;
	const Tensor *d = c->in[0], *ix = c->in[1], *sc = c->in[2], *zp = c->nin > 3 ? c->in[3] : NULL;
	GbqAttrs at;
	if (gbq_attrs(c->node, d->rank, &at) < 0)
		return -1;
	if (d->dtype != DT_UINT8)
		return op_error(c->node, "GatherBlockQuantized on %s data is not supported (uint8 only)", dtype_name(d->dtype));
	if (ix->dtype != DT_INT64 && ix->dtype != DT_INT32)
		return op_unsupported_type(c->node, c->opset, ix->dtype);
	if (!nn_is_float(sc->dtype))
		return op_error(c->node, "scales are %s, expected a floating-point type", dtype_name(sc->dtype));
	int per = 8 / (int)at.bits;
	int64_t V = d->dims[0], Dlast = d->dims[d->rank - 1] * per, rows = d->numel / (d->dims[d->rank - 1] ? d->dims[d->rank - 1] : 1);
	int64_t rowlen = rows / (V ? V : 1) * Dlast;   /* values per gathered slice */
	int64_t nblk = (Dlast + at.block - 1) / at.block, zrow = (nblk * at.bits + 7) / 8;
	if (sc->rank != d->rank || sc->numel != rows * nblk || sc->dims[sc->rank - 1] != nblk)
		return op_error(c->node, "scales must have data's rank with the last axis %lld blocks, got %lld values",
				(long long)nblk, (long long)sc->numel);
	if (zp && (zp->dtype != DT_UINT8 || zp->numel != rows * zrow))
		return op_error(c->node, "zero_points must be uint8 with %lld bytes per row of blocks, got %s [%lld]",
				(long long)zrow, dtype_name(zp->dtype), (long long)zp->numel);
	int64_t dims[QM_MAX_RANK];
	int r = 0;
	for (int i = 0; i < ix->rank; i++)
		dims[r++] = ix->dims[i];
	for (int i = 1; i < d->rank; i++)
		dims[r++] = d->dims[i];
	dims[r - 1] = Dlast;
	float *ty, *s = nn_f32_copy(sc);
	float *y = nn_f32_out(c, 0, sc->dtype, r, dims, &ty);
	if (!y) {
		free(s);
		return -1;
	}
	const uint8_t *dd = d->data, *zd = zp ? zp->data : NULL;
	int mask = (1 << at.bits) - 1;
	int64_t sub = rowlen / (Dlast ? Dlast : 1);   /* rows of Dlast per slice */
	for (int64_t i = 0; i < ix->numel; i++) {
		int64_t v = ix->dtype == DT_INT64 ? ((const int64_t *)ix->data)[i] : ((const int32_t *)ix->data)[i];
		float *o = y + i * rowlen;
		if (v < -V || v >= V) {
			memset(o, 0, sizeof(float) * (size_t)rowlen);
			continue;
		}
		v = v < 0 ? v + V : v;
		for (int64_t q = 0; q < sub; q++) {
			int64_t row = v * sub + q;
			for (int64_t j = 0; j < Dlast; j++) {
				int64_t e = row * Dlast + j, b = j / at.block, bit = e * at.bits;
				int code = (dd[bit / 8] >> (bit % 8)) & mask;
				int z = zd ? (zd[row * zrow + b * at.bits / 8] >> (b * at.bits % 8)) & mask : 1 << (at.bits - 1);
				o[q * Dlast + j] = (float)(code - z) * s[row * nblk + b];
			}
		}
	}
	nn_f32_done(c->out[0], ty);
	free(s);
	return 0;
}

OPERATOR(com_microsoft, GatherBlockQuantized, 1, gbq_infer, gbq_run)
