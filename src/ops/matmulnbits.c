/* matmulnbits.c — onnxruntime's com.microsoft MatMulNBits: inference and
 * kernel, so that calibrate, verify and `quantmake run` take the models
 * weight-only quantization writes (src/quant/weightonly.c).
 *
 *   Y [..., N] = A [..., K] x dequantize(B)^T (+ bias [N])
 *
 * B is uint8 [N, n_blocks, block_size * bits / 8]: row n holds K codes
 * (padded to n_blocks * block_size), packed low bits first; value (n, k) is
 * (code - zero point) * scale with the scale and zero point of block
 * k / block_size of row n. scales hold N * n_blocks floats; zero_points,
 * when present, N * ceil(n_blocks * bits / 8) bytes packed the same way
 * (row by row) or N * n_blocks values of A's type; absent, every zero
 * point is 2^(bits-1). bits 2, 4 or 8; g_idx (a permutation of K) is
 * refused by name, as are prepacked weights.
 *
 * The kernel dequantizes B into a float [K, N] matrix — kept in the node's
 * cache when B, scales and zero points are constants — and multiplies as
 * MatMul does (fgemm on AVX-512 CPUs, else cblas_sgemm), whose sums over K
 * run in the same order for any thread count. */
#include <cblas.h>
#include <stdlib.h>
#include <string.h>

#include "ops/fgemm.h"
#include "ops/nn.h"
#include "ops/shapeutil.h"
#include "ops/op.h"
#include "util.h"

typedef struct NbAttrs {
	int64_t K, N, bits, block, nblk;
} NbAttrs;

static int nb_attrs(const Onnx__NodeProto *n, NbAttrs *a)
{
	if (attr_int(n, "K", -1, &a->K) < 0 || attr_int(n, "N", -1, &a->N) < 0 || attr_int(n, "bits", 4, &a->bits) < 0 ||
	    attr_int(n, "block_size", -1, &a->block) < 0)
		return -1;
	if (a->K <= 0 || a->N <= 0)
		return op_error(n, "attributes K and N are required and positive, got K=%lld N=%lld", (long long)a->K,
				(long long)a->N);
	if (a->bits != 2 && a->bits != 4 && a->bits != 8)
		return op_error(n, "bits = %lld is not supported (2, 4 or 8)", (long long)a->bits);
	if (a->block < 16 || (a->block & (a->block - 1)))
		return op_error(n, "block_size = %lld is not valid: expected a power of two >= 16", (long long)a->block);
	a->nblk = (a->K + a->block - 1) / a->block;
	return 0;
}

static int nb_infer(InferCtx *c)
{
	NbAttrs at;
	const ValueType *a = nn_in(c, 0);
	if (!a || nb_attrs(c->node, &at) < 0)
		return -1;
	if (c->nin > 4 && c->in[4])
		return op_error(c->node, "input g_idx is not supported");
	ValueType *y = c->out[0];
	vt_set_tensor(y, a->elem, a->rank);
	if (a->rank < 1)
		return 0;
	for (int i = 0; i < a->rank - 1; i++)
		y->dims[i] = a->dims[i];
	y->dims[a->rank - 1] = (Dim){at.N, NULL};
	return 0;
}

/* B dequantized as a float [K, N] matrix */
static int nb_dequant(RunCtx *c, const NbAttrs *at, const Tensor *b, const Tensor *sc, const Tensor *zp, float **out)
{
	int64_t K = at->K, N = at->N, nblk = at->nblk, bits = at->bits, blob = at->block * bits / 8;
	if (b->dtype != DT_UINT8 || b->numel != N * nblk * blob)
		return op_error(c->node, "B is %s with %lld elements, expected uint8 [%lld, %lld, %lld]", dtype_name(b->dtype),
				(long long)b->numel, (long long)N, (long long)nblk, (long long)blob);
	if (sc->numel != N * nblk || !nn_is_float(sc->dtype))
		return op_error(c->node, "scales are %s with %lld elements, expected %lld floats", dtype_name(sc->dtype),
				(long long)sc->numel, (long long)(N * nblk));
	int64_t zrow = (nblk * bits + 7) / 8;
	int zfloat = zp && nn_is_float(zp->dtype);
	if (zp && !(zfloat ? zp->numel == N * nblk : zp->dtype == DT_UINT8 && zp->numel == N * zrow))
		return op_error(c->node, "zero_points are %s with %lld elements, expected uint8 [%lld] or %lld of A's type",
				dtype_name(zp->dtype), (long long)zp->numel, (long long)(N * zrow), (long long)(N * nblk));
	float *s = nn_f32_copy(sc), *zf = zfloat ? nn_f32_copy(zp) : NULL;
	float *w = xmalloc(sizeof(float) * (size_t)(K * N > 0 ? K * N : 1));
	const uint8_t *bd = b->data, *zd = zp && !zfloat ? zp->data : NULL;
	int mask = (1 << bits) - 1;
	float dflt = (float)(1 << (bits - 1));
	for (int64_t n = 0; n < N; n++) {
		const uint8_t *row = bd + n * nblk * blob;
		for (int64_t k = 0; k < K; k++) {
			int64_t blk = k / at->block, bit = k * bits;
			float z = zf ? zf[n * nblk + blk] :
				  zd ? (float)((zd[n * zrow + blk * bits / 8] >> (blk * bits % 8)) & mask) : dflt;
			int code = (row[bit / 8] >> (bit % 8)) & mask;
			w[k * N + n] = ((float)code - z) * s[n * nblk + blk];
		}
	}
	free(s);
	free(zf);
	*out = w;
	return 0;
}

typedef struct NbCache {
	const void *b, *s, *z;    /* the constant inputs' data */
	float *w;
} NbCache;

static void nbcache_release(void *p)
{
	NbCache *nc = p;
	if (nc) {
		free(nc->w);
		free(nc);
	}
}

static int nb_run(RunCtx *c)
{
	NbAttrs at;
	if (nb_attrs(c->node, &at) < 0 || run_need(c, 0) < 0 || run_need(c, 1) < 0 || run_need(c, 2) < 0)
		return -1;
	if (c->nin > 4 && c->in[4])
		return op_error(c->node, "input g_idx is not supported");
	const Tensor *a = c->in[0], *b = c->in[1], *sc = c->in[2], *zp = c->nin > 3 ? c->in[3] : NULL;
	const Tensor *bias = c->nin > 5 ? c->in[5] : NULL;
	if (!nn_is_float(a->dtype))
		return op_unsupported_type(c->node, c->opset, a->dtype);
	if (a->rank < 1 || a->dims[a->rank - 1] != at.K)
		return op_error(c->node, "A's last dimension is %lld, expected K = %lld",
				a->rank ? (long long)a->dims[a->rank - 1] : 0LL, (long long)at.K);
	if (bias && bias->numel != at.N)
		return op_error(c->node, "bias has %lld elements, expected N = %lld", (long long)bias->numel, (long long)at.N);
	/* constant B, scales and zero points: dequantized once */
	uint64_t need = 2 | 4 | (zp ? 8 : 0);
	int keep = c->cache && (c->const_in & need) == need;
	NbCache *nc = keep ? c->cache->p : NULL;
	float *w = NULL;
	if (nc && (nc->b != b->data || nc->s != sc->data || nc->z != (zp ? zp->data : NULL))) {
		nbcache_release(nc);
		c->cache->p = nc = NULL;
	}
	if (nc) {
		w = nc->w;
	} else {
		if (nb_dequant(c, &at, b, sc, zp, &w) < 0)
			return -1;
		if (keep) {
			nc = xmalloc(sizeof *nc);
			*nc = (NbCache){b->data, sc->data, zp ? zp->data : NULL, w};
			c->cache->p = nc;
			c->cache->release = nbcache_release;
			c->cache->bytes = sizeof(float) * (size_t)(at.K * at.N);
		}
	}
	int64_t dims[QM_MAX_RANK], M = 1;
	for (int i = 0; i < a->rank - 1; i++)
		M *= dims[i] = a->dims[i];
	dims[a->rank - 1] = at.N;
	float *ta, *ty;
	const float *af = nn_f32_in(c, a, &ta);
	float *y = nn_f32_out(c, 0, a->dtype, a->rank, dims, &ty);
	int rc = 0;
	if (!af || !y) {
		rc = -1;
	} else if (M > 0) {
		if (fgemm_available())
			fgemm(M, at.N, at.K, af, at.K, w, at.N, NULL, 0, y, at.N, c->threads);
		else
			cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)M, (int)at.N, (int)at.K, 1.0f, af,
				    (int)at.K, w, (int)at.N, 0.0f, y, (int)at.N);
		if (bias) {
			float *bf = nn_f32_copy(bias);
			for (int64_t i = 0; i < M; i++)
				for (int64_t j = 0; j < at.N; j++)
					y[i * at.N + j] += bf[j];
			free(bf);
		}
	}
	if (y)
		nn_f32_done(c->out[0], ty);
	free(ta);
	if (!nc)
		free(w);
	return rc;
}

OPERATOR(com_microsoft, MatMulNBits, 1, nb_infer, nb_run)
