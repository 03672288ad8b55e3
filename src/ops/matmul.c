/* matmul.c — Gemm, MatMul, MatMulInteger and QLinearMatMul: inference and
 * kernels.
 *
 * MatMul broadcasts the batch dimensions numpy-style and promotes 1-D
 * operands; every batch is one fgemm (AVX-512 CPUs) or
 * cblas_sgemm (float32, float16 and bfloat16 through float32) or
 * cblas_dgemm (double) call, and a batched left operand against a plain
 * matrix is folded into a single call. Integer MatMul is a
 * plain loop. Gemm with a constant B (and transA 0) multiplies B packed
 * once for fgemm (from its rows as they lie when transB is 1; one pack for
 * the interpreters of a model side by side: fgemm_pack_b_const), alpha
 * and C applied as the results are stored (both
 * products with a packed B take the rows of A that are one-hot from B's
 * rows, with the same bytes: fgemm_packed_b); other
 * Gemms, and any without AVX-512, run cblas_sgemm. MatMulInteger and QLinearMatMul subtract the zero points into
 * doubles, whose dgemm is exact for 8-bit operands, and requantize. */
#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops/bcast.h"
#include "ops/fgemm.h"
#include "ops/nn.h"
#include "ops/op.h"
#include "ops/shapeutil.h"
#include "util.h"

/* ---- MatMul shapes ---- */

/* inference of matmul(a, b) into out with element type elem */
static int matmul_infer_common(InferCtx *c, size_t ai, size_t bi, int elem)
{
	const ValueType *a = nn_in(c, ai), *b = nn_in(c, bi);
	if (!a || !b)
		return -1;
	ValueType *o = c->out[0];
	vt_set_tensor(o, elem, -1);
	if (a->rank < 0 || b->rank < 0)
		return 0;
	if (a->rank == 0 || b->rank == 0)
		return op_error(c->node, "operands must have rank 1 or more");
	ValueType ab = {0}, bb = {0}, ob = {0};
	ab.rank = a->rank > 2 ? a->rank - 2 : 0;
	bb.rank = b->rank > 2 ? b->rank - 2 : 0;
	for (int i = 0; i < ab.rank; i++)
		ab.dims[i] = a->dims[i];
	for (int i = 0; i < bb.rank; i++)
		bb.dims[i] = b->dims[i];
	if (broadcast_dims(c->node, &ab, &bb, &ob) < 0)
		return -1;
	Dim ka = a->dims[a->rank - 1], kb = b->rank >= 2 ? b->dims[b->rank - 2] : b->dims[0];
	if (ka.v >= 0 && kb.v >= 0 && ka.v != kb.v)
		return op_error(c->node, "inner dimensions differ: %lld vs %lld", (long long)ka.v, (long long)kb.v);
	int r = ob.rank;
	for (int i = 0; i < ob.rank; i++)
		o->dims[i] = ob.dims[i].v >= 0 || ob.dims[i].sym ? ob.dims[i] : nn_dim(c, -1);
	if (a->rank >= 2)
		o->dims[r++] = a->dims[a->rank - 2];
	if (b->rank >= 2)
		o->dims[r++] = b->dims[b->rank - 1];
	o->rank = r;
	return 0;
}

static int matmul_infer(InferCtx *c)
{
	const ValueType *a = nn_in(c, 0);
	return a ? matmul_infer_common(c, 0, 1, a->elem) : -1;
}

static int matmulinteger_infer(InferCtx *c)
{
	return matmul_infer_common(c, 0, 1, DT_INT32);
}

static int qlinearmatmul_infer(InferCtx *c)
{
	const ValueType *a = nn_in(c, 0);
	if (!a)
		return -1;
	int elem = c->nin > 7 && c->in[7] ? c->in[7]->elem : a->elem;
	return matmul_infer_common(c, 0, 3, elem);
}

typedef struct MmShape {
	int rank;
	int64_t dims[QM_MAX_RANK];    /* output shape */
	int64_t M, K, N, nbatch;
	int64_t *aoff, *boff;         /* element offset of each batch's matrices */
} MmShape;

static void mm_free(MmShape *s)
{
	free(s->aoff);
	free(s->boff);
}

static int mm_shape(RunCtx *c, const Tensor *a, const Tensor *b, MmShape *s)
{
	memset(s, 0, sizeof *s);
	if (a->rank == 0 || b->rank == 0)
		return op_error(c->node, "operands must have rank 1 or more");
	int ra = a->rank, rb = b->rank;
	s->M = ra >= 2 ? a->dims[ra - 2] : 1;
	s->K = a->dims[ra - 1];
	int64_t kb = rb >= 2 ? b->dims[rb - 2] : b->dims[0];
	s->N = rb >= 2 ? b->dims[rb - 1] : 1;
	if (s->K != kb) {
		char sa[128], sb[128];
		return op_error(c->node, "cannot multiply %s by %s: inner dimensions %lld and %lld differ",
				shape_str(ra, a->dims, sa, sizeof sa), shape_str(rb, b->dims, sb, sizeof sb),
				(long long)s->K, (long long)kb);
	}
	int na = ra > 2 ? ra - 2 : 0, nb = rb > 2 ? rb - 2 : 0;
	int ranks[2] = {na, nb}, nbd;
	const int64_t *dv[2] = {a->dims, b->dims};
	int64_t bd[QM_MAX_RANK];
	if (bcast_shape(c->node, 2, ranks, dv, &nbd, bd) < 0)
		return -1;
	s->rank = 0;
	s->nbatch = 1;
	for (int i = 0; i < nbd; i++) {
		s->dims[s->rank++] = bd[i];
		s->nbatch *= bd[i];
	}
	if (ra >= 2)
		s->dims[s->rank++] = s->M;
	if (rb >= 2)
		s->dims[s->rank++] = s->N;
	size_t nbt = (size_t)(s->nbatch ? s->nbatch : 1);
	s->aoff = xmalloc(sizeof(int64_t) * nbt);
	s->boff = xmalloc(sizeof(int64_t) * nbt);
	/* batch strides of a and b over the broadcast batch dims */
	int64_t sa[QM_MAX_RANK], sb[QM_MAX_RANK], idx[QM_MAX_RANK] = {0};
	int64_t st = s->M * s->K;
	for (int i = nbd - 1; i >= 0; i--) {
		int ia = i - (nbd - na);
		int64_t d = ia >= 0 ? a->dims[ia] : 1;
		sa[i] = d == 1 ? 0 : st;
		st *= d;
	}
	st = s->K * s->N;
	for (int i = nbd - 1; i >= 0; i--) {
		int ib = i - (nbd - nb);
		int64_t d = ib >= 0 ? b->dims[ib] : 1;
		sb[i] = d == 1 ? 0 : st;
		st *= d;
	}
	for (int64_t t = 0; t < s->nbatch; t++) {
		int64_t oa = 0, ob = 0;
		for (int i = 0; i < nbd; i++) {
			oa += idx[i] * sa[i];
			ob += idx[i] * sb[i];
		}
		s->aoff[t] = oa;
		s->boff[t] = ob;
		for (int i = nbd - 1; i >= 0; i--) {
			if (++idx[i] < bd[i])
				break;
			idx[i] = 0;
		}
	}
	return 0;
}

/* y = a * b over all batches; es 4: float (fgemm where the CPU has
 * AVX-512, else sgemm), 8: double (dgemm); pb: b packed for fgemm (only
 * when every batch multiplies the same b) */
static void mm_gemm(const MmShape *s, const void *a, const void *b, void *y, size_t es, int threads,
		    const FgemmB *pb)
{
	int64_t M = s->M, K = s->K, N = s->N;
	if (s->nbatch == 0 || M == 0 || N == 0)
		return;
	if (K == 0) {
		memset(y, 0, (size_t)(s->nbatch * M * N) * es);
		return;
	}
	int fold = 1;
	for (int64_t t = 0; t < s->nbatch; t++)
		if (s->boff[t] != 0 || s->aoff[t] != t * M * K)
			fold = 0;
	int64_t batches = fold ? 1 : s->nbatch, rows = fold ? s->nbatch * M : M;
	for (int64_t t = 0; t < batches; t++) {
		if (pb)
			fgemm_packed_b(rows, (const float *)a + s->aoff[t], K, pb, (float *)y + t * M * N, N, threads);
		else if (es == 4 && fgemm_available())
			fgemm(rows, N, K, (const float *)a + s->aoff[t], K, (const float *)b + s->boff[t], N, NULL, 0,
			      (float *)y + t * M * N, N, threads);
		else if (es == 4)
			cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)rows, (int)N, (int)K, 1.0f,
				    (const float *)a + s->aoff[t], (int)K, (const float *)b + s->boff[t], (int)N,
				    0.0f, (float *)y + t * M * N, (int)N);
		else
			cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)rows, (int)N, (int)K, 1.0,
				    (const double *)a + s->aoff[t], (int)K, (const double *)b + s->boff[t], (int)N,
				    0.0, (double *)y + t * M * N, (int)N);
	}
}

#define MM_INT(T)                                                                        \
	static void mm_int_##T(const MmShape *s, const void *av, const void *bv, void *yv) \
	{                                                                                  \
		for (int64_t t = 0; t < s->nbatch; t++) {                                  \
			const T *a = (const T *)av + s->aoff[t];                          \
			const T *b = (const T *)bv + s->boff[t];                          \
			T *y = (T *)yv + t * s->M * s->N;                                  \
			for (int64_t i = 0; i < s->M * s->N; i++)                          \
				y[i] = 0;                                                  \
			for (int64_t i = 0; i < s->M; i++)                                 \
				for (int64_t k = 0; k < s->K; k++) {                       \
					T av_ = a[i * s->K + k];                           \
					for (int64_t j = 0; j < s->N; j++)                 \
						y[i * s->N + j] += av_ * b[k * s->N + j];  \
				}                                                          \
		}                                                                          \
	}
MM_INT(int32_t)
MM_INT(int64_t)
MM_INT(uint32_t)
MM_INT(uint64_t)

/* the right operand packed for fgemm, kept in the node's cache */
typedef struct MmCache {
	const void *b;            /* the constant operand's data */
	int64_t K, N;
	FgemmB *pb;
} MmCache;

static void mmcache_release(void *p)
{
	MmCache *mc = p;
	if (mc) {
		fgemm_free_b(mc->pb);
		free(mc);
	}
}

/* whether the node's cache holds b packed for good (OpCache.packed): b's
 * data is then not read, and may be NULL (released by the interpreter) */
static int mm_packed(RunCtx *c, const Tensor *b, const MmShape *s)
{
	const MmCache *mc = c->cache && (c->cache->packed & 2) ? c->cache->p : NULL;
	return mc && (!b->data || mc->b == b->data) && mc->K == s->K && mc->N == s->N;
}

/* b packed once when it is a constant of the plan shared by every batch
 * and fgemm runs; NULL otherwise */
static const FgemmB *mm_cached_b(RunCtx *c, const Tensor *b, const float *bf, const MmShape *s)
{
	if (!c->cache || !(c->const_in & 2) || s->N < 16 || s->K == 0 || s->M == 0 || !fgemm_available())
		return NULL;
	for (int64_t t = 0; t < s->nbatch; t++)
		if (s->boff[t] != 0)
			return NULL;
	MmCache *mc = c->cache->p;
	if (mc && ((b->data && mc->b != b->data) || mc->K != s->K || mc->N != s->N)) {
		mmcache_release(mc);
		c->cache->p = mc = NULL;
		c->cache->packed = 0;
	}
	if (!mc) {
		mc = xcalloc(1, sizeof *mc);
		*mc = (MmCache){b->data, s->K, s->N, fgemm_pack_b_const(s->K, s->N, bf, s->N, 0)};
		c->cache->p = mc;
		c->cache->release = mmcache_release;
		c->cache->bytes = fgemm_packed_b_bytes(s->K, s->N);
		/* one matrix (no batch dimensions above 1): every later product,
		 * whatever a's shape, multiplies this one */
		c->cache->packed = b->numel == s->K * s->N ? 2 : 0;
	}
	return mc->pb;
}

static int matmul_run(RunCtx *c)
{
	const Tensor *a = c->in[0], *b = c->in[1];
	MmShape s;
	if (a->dtype != b->dtype)
		return op_error(c->node, "operands have types %s and %s, expected the same",
				dtype_name(a->dtype), dtype_name(b->dtype));
	if (mm_shape(c, a, b, &s) < 0) {
		mm_free(&s);
		return -1;
	}
	int rc = 0, dt = a->dtype;
	if (dt == DT_INT32 || dt == DT_INT64 || dt == DT_UINT32 || dt == DT_UINT64 || dt == DT_DOUBLE) {
		if (op_output(c, 0, dt, s.rank, s.dims) < 0) {
			rc = -1;
		} else if (dt == DT_DOUBLE) {
			void *ac = xmalloc(a->nbytes + 8), *bc = xmalloc(b->nbytes + 8);
			memcpy(ac, a->data, a->nbytes);
			memcpy(bc, b->data, b->nbytes);
			mm_gemm(&s, ac, bc, c->out[0]->data, 8, c->threads, NULL);
			free(ac);
			free(bc);
		} else if (dt == DT_INT32) {
			mm_int_int32_t(&s, a->data, b->data, c->out[0]->data);
		} else if (dt == DT_INT64) {
			mm_int_int64_t(&s, a->data, b->data, c->out[0]->data);
		} else if (dt == DT_UINT32) {
			mm_int_uint32_t(&s, a->data, b->data, c->out[0]->data);
		} else {
			mm_int_uint64_t(&s, a->data, b->data, c->out[0]->data);
		}
		mm_free(&s);
		return rc;
	}
	if (!nn_is_float(dt)) {
		mm_free(&s);
		return op_unsupported_type(c->node, c->opset, dt);
	}
	float *ta, *tb = NULL, *ty;
	int packed = mm_packed(c, b, &s);
	if (!packed && !b->data) {
		mm_free(&s);
		return op_error(c->node, "weights were released but are needed again");
	}
	const float *af = nn_f32_in(c, a, &ta), *bf = packed ? NULL : nn_f32_in(c, b, &tb);
	float *y = nn_f32_out(c, 0, dt, s.rank, s.dims, &ty);
	if (!y) {
		rc = -1;
	} else {
		mm_gemm(&s, af, bf, y, 4, c->threads, mm_cached_b(c, b, bf, &s));
		nn_f32_done(c->out[0], ty);
	}
	free(ta);
	free(tb);
	mm_free(&s);
	return rc;
}

/* ---- MatMulInteger, QLinearMatMul ---- */

static int is_q8(int dt)
{
	return dt == DT_UINT8 || dt == DT_INT8;
}

static int q8_at(const Tensor *t, int64_t i)
{
	return t->dtype == DT_INT8 ? (int)((const int8_t *)t->data)[i] : (int)((const uint8_t *)t->data)[i];
}

/* t - zp as doubles: zp per-tensor, per row (axis -2, rowwise) or per
 * column (axis -1) of the matrices of t */
static int q8_sub(RunCtx *c, const Tensor *t, const Tensor *zp, int rowwise, const char *what, double **out)
{
	int64_t rows = t->rank >= 2 ? t->dims[t->rank - 2] : 1, cols = t->dims[t->rank - 1];
	int64_t per = rowwise ? rows : cols;
	if (zp) {
		if (zp->dtype != t->dtype)
			return op_error(c->node, "%s has type %s, expected %s", what, dtype_name(zp->dtype),
					dtype_name(t->dtype));
		if (zp->numel != 1 && zp->numel != per)
			return op_error(c->node, "%s has %lld elements, expected 1 or %lld", what,
					(long long)zp->numel, (long long)per);
	}
	double *r = xmalloc(sizeof(double) * (size_t)(t->numel ? t->numel : 1));
	for (int64_t i = 0; i < t->numel; i++) {
		int64_t zi = 0;
		if (zp && zp->numel > 1)
			zi = rowwise ? (i / cols) % rows : i % cols;
		r[i] = (double)(q8_at(t, i) - (zp ? q8_at(zp, zi) : 0));
	}
	*out = r;
	return 0;
}

/* exact integer product of quantized a and b into a malloc'd double array */
static int qmm_acc(RunCtx *c, const Tensor *a, const Tensor *azp, const Tensor *b, const Tensor *bzp,
		   MmShape *s, double **acc)
{
	double *ad = NULL, *bd = NULL;
	*acc = NULL;
	if (!is_q8(a->dtype))
		return op_unsupported_type(c->node, c->opset, a->dtype);
	if (!is_q8(b->dtype))
		return op_unsupported_type(c->node, c->opset, b->dtype);
	if (mm_shape(c, a, b, s) < 0)
		return -1;
	if (q8_sub(c, a, azp, 1, "a_zero_point", &ad) < 0 || q8_sub(c, b, bzp, 0, "b_zero_point", &bd) < 0) {
		free(ad);
		mm_free(s);
		return -1;
	}
	int64_t n = s->nbatch * s->M * s->N;
	*acc = xmalloc(sizeof(double) * (size_t)(n ? n : 1));
	mm_gemm(s, ad, bd, *acc, 8, c->threads, NULL);
	free(ad);
	free(bd);
	return 0;
}

static int matmulinteger_run(RunCtx *c)
{
	MmShape s;
	double *acc;
	if (qmm_acc(c, c->in[0], c->nin > 2 ? c->in[2] : NULL, c->in[1], c->nin > 3 ? c->in[3] : NULL,
		    &s, &acc) < 0)
		return -1;
	int rc = op_output(c, 0, DT_INT32, s.rank, s.dims);
	if (rc == 0) {
		int32_t *y = c->out[0]->data;
		for (int64_t i = 0; i < c->out[0]->numel; i++)
			y[i] = (int32_t)acc[i];
	}
	free(acc);
	mm_free(&s);
	return rc;
}

static int qlinearmatmul_run(RunCtx *c)
{
	if (c->nin < 8)
		return op_error(c->node, "expected 8 inputs, got %zu", c->nin);
	for (size_t i = 0; i < 8; i++)
		if (!c->in[i])
			return op_error(c->node, "input %zu is required", i);
	const Tensor *as = c->in[1], *bs = c->in[4], *ys = c->in[6], *yzp = c->in[7];
	if (!nn_is_float(as->dtype) || !nn_is_float(bs->dtype) || !nn_is_float(ys->dtype))
		return op_error(c->node, "scales must be floating point");
	if (!is_q8(yzp->dtype) || yzp->numel != 1 || ys->numel != 1)
		return op_error(c->node, "y_scale and y_zero_point must be scalars, y_zero_point int8 or uint8");
	MmShape s;
	double *acc;
	if (qmm_acc(c, c->in[0], c->in[2], c->in[3], c->in[5], &s, &acc) < 0)
		return -1;
	if ((as->numel != 1 && as->numel != s.M) || (bs->numel != 1 && bs->numel != s.N)) {
		free(acc);
		mm_free(&s);
		return op_error(c->node, "a_scale must have 1 or %lld elements and b_scale 1 or %lld",
				(long long)s.M, (long long)s.N);
	}
	if (op_output(c, 0, yzp->dtype, s.rank, s.dims) < 0) {
		free(acc);
		mm_free(&s);
		return -1;
	}
	float ysv = (float)tensor_get_f64(ys, 0), zp = (float)tensor_get_i64(yzp, 0);
	int lo = yzp->dtype == DT_INT8 ? -128 : 0, hi = yzp->dtype == DT_INT8 ? 127 : 255;
	for (int64_t i = 0; i < c->out[0]->numel; i++) {
		int64_t col = i % s.N, row = i / s.N % s.M;
		float mul = (float)tensor_get_f64(as, as->numel > 1 ? row : 0) *
			    (float)tensor_get_f64(bs, bs->numel > 1 ? col : 0) / ysv;
		float v = nn_round_even((float)acc[i] * mul) + zp;
		int q = v < lo ? lo : v > hi ? hi : (int)v;
		if (lo < 0)
			((int8_t *)c->out[0]->data)[i] = (int8_t)q;
		else
			((uint8_t *)c->out[0]->data)[i] = (uint8_t)q;
	}
	free(acc);
	mm_free(&s);
	return 0;
}

/* ---- Gemm ---- */

static int gemm_infer(InferCtx *c)
{
	const ValueType *a = nn_in(c, 0), *b = nn_in(c, 1);
	int64_t ta, tb;
	if (!a || !b || attr_int(c->node, "transA", 0, &ta) < 0 || attr_int(c->node, "transB", 0, &tb) < 0)
		return -1;
	ValueType *o = c->out[0];
	vt_set_tensor(o, a->elem, 2);
	if ((a->rank >= 0 && a->rank != 2) || (b->rank >= 0 && b->rank != 2))
		return op_error(c->node, "A and B must be matrices, got ranks %d and %d", a->rank, b->rank);
	o->dims[0] = a->rank == 2 ? a->dims[ta ? 1 : 0] : nn_dim(c, -1);
	o->dims[1] = b->rank == 2 ? b->dims[tb ? 0 : 1] : nn_dim(c, -1);
	return 0;
}

/* B (and beta * C when it is the same for every row) of a Gemm whose B is
 * a constant of the plan, packed for fgemm; kept in the node's cache */
typedef struct GemmCache {
	const void *b, *c;        /* the constant operands' data */
	int64_t K, N;
	FgemmB *pb;
	float *cb;                /* beta * C per column, or NULL */
} GemmCache;

static void gemmcache_release(void *p)
{
	GemmCache *gc = p;
	if (gc) {
		fgemm_free_b(gc->pb);
		free(gc->cb);
		free(gc);
	}
}

/* the node's cache for b of [K, N] (transposed in the graph when tb) and
 * C's per-column terms cf[j * ccs] (cr 0: C does not vary by row; cf NULL
 * when already packed), packed on first use; NULL when the packed product
 * does not apply: OpenBLAS runs */
static const GemmCache *gemm_cached(RunCtx *c, const Tensor *b, const float *bf, int64_t tb, const Tensor *cc,
				    const float *cf, int64_t cr, int64_t ccs, float beta, int64_t K, int64_t N)
{
	if (!c->cache || !(c->const_in & 2) || K == 0 || N == 0 || !fgemm_available())
		return NULL;
	GemmCache *gc = c->cache->p;
	if (gc && (c->cache->packed & 2) && (!b->data || gc->b == b->data) && gc->K == K && gc->N == N &&
	    (!gc->cb || (cc && (!cc->data || gc->c == cc->data))))
		return gc;
	if (!bf)
		return NULL;
	gemmcache_release(gc);
	gc = xcalloc(1, sizeof *gc);
	*gc = (GemmCache){.b = b->data, .c = cc ? cc->data : NULL, .K = K, .N = N};
	/* b is [N, K] when tb: packed from its rows as they lie */
	gc->pb = fgemm_pack_b_const(K, N, bf, tb ? K : N, (int)tb);
	c->cache->p = gc;
	c->cache->release = gemmcache_release;
	c->cache->bytes = fgemm_packed_b_bytes(K, N);
	c->cache->packed = 2;
	/* a constant C of one row (a bias): beta * C kept too */
	if (cc && cf && cr == 0 && (c->const_in & 4)) {
		gc->cb = xmalloc(sizeof(float) * (size_t)N);
		for (int64_t j = 0; j < N; j++)
			gc->cb[j] = beta != 0.0f ? beta * cf[j * ccs] : 0.0f;
		c->cache->bytes += sizeof(float) * (size_t)N;
		c->cache->packed |= 4;
	}
	return gc;
}

static int gemm_run(RunCtx *c)
{
	const Tensor *a = c->in[0], *b = c->in[1], *cc = c->nin > 2 ? c->in[2] : NULL;
	int64_t ta, tb;
	float alpha, beta;
	if (attr_int(c->node, "transA", 0, &ta) < 0 || attr_int(c->node, "transB", 0, &tb) < 0 ||
	    attr_float(c->node, "alpha", 1.0f, &alpha) < 0 || attr_float(c->node, "beta", 1.0f, &beta) < 0)
		return -1;
	if (!nn_is_float(a->dtype))
		return op_unsupported_type(c->node, c->opset, a->dtype);
	if (b->dtype != a->dtype || (cc && cc->dtype != a->dtype))
		return op_error(c->node, "A, B and C must have the same type");
	if (a->rank != 2 || b->rank != 2)
		return op_error(c->node, "A and B must be matrices, got ranks %d and %d", a->rank, b->rank);
	int64_t M = a->dims[ta ? 1 : 0], K = a->dims[ta ? 0 : 1];
	int64_t kb = b->dims[tb ? 1 : 0], N = b->dims[tb ? 0 : 1];
	if (K != kb)
		return op_error(c->node, "inner dimensions differ: %lld vs %lld", (long long)K, (long long)kb);
	int64_t cr = 0, ccs = 0;   /* row and column strides of C */
	if (cc) {
		int64_t cd0 = cc->rank >= 2 ? cc->dims[cc->rank - 2] : 1;
		int64_t cd1 = cc->rank >= 1 ? cc->dims[cc->rank - 1] : 1;
		if (cc->rank > 2 || (cd0 != 1 && cd0 != M) || (cd1 != 1 && cd1 != N)) {
			char sb[128];
			return op_error(c->node, "C of shape %s does not broadcast to [%lld,%lld]",
					shape_str(cc->rank, cc->dims, sb, sizeof sb), (long long)M, (long long)N);
		}
		cr = cd0 == 1 ? 0 : cd1;
		ccs = cd1 == 1 ? 0 : 1;
	}
	/* B (and a one-row C) packed for fgemm when B is a constant and A
	 * is read in place: their data may have been released */
	const GemmCache *gc = !ta ? gemm_cached(c, b, NULL, tb, cc, NULL, cr, ccs, beta, K, N) : NULL;
	int cpacked = gc && gc->cb;
	if ((!gc && !b->data) || (cc && !cpacked && !cc->data))
		return op_error(c->node, "weights were released but are needed again");
	int64_t dims[2] = {M, N};
	float *tA, *tB = NULL, *tC = NULL, *ty;
	const float *af = nn_f32_in(c, a, &tA), *bf = gc ? NULL : nn_f32_in(c, b, &tB), *cf = NULL;
	if (cc && !cpacked)
		cf = nn_f32_in(c, cc, &tC);
	if (!gc && !ta && M)
		gc = gemm_cached(c, b, bf, tb, cc, cf, cr, ccs, beta, K, N);
	cpacked = gc && gc->cb;
	float *y = nn_f32_out(c, 0, a->dtype, 2, dims, &ty);
	if (!y) {
		free(tA);
		free(tB);
		free(tC);
		return -1;
	}
	if (gc) {
		/* y = alpha * (A B) + beta * C, as OpenBLAS's beta 1 on a y
		 * holding beta * C computes it; each sum over K in one order */
		fgemm_packed_b(M, af, K, gc->pb, y, N, c->threads);
		if (alpha != 1.0f || cc)
			for (int64_t i = 0; i < M; i++)
				for (int64_t j = 0; j < N; j++) {
					float t = alpha * y[i * N + j];
					if (cpacked)
						t += gc->cb[j];
					else if (cf && beta != 0.0f)
						t += beta * cf[i * cr + j * ccs];
					y[i * N + j] = t;
				}
	} else {
		for (int64_t i = 0; i < M; i++)
			for (int64_t j = 0; j < N; j++)
				y[i * N + j] = cf && beta != 0.0f ? beta * cf[i * cr + j * ccs] : 0.0f;
		if (M && N && K)
			cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
				    (int)M, (int)N, (int)K, alpha, af, (int)a->dims[1], bf, (int)b->dims[1], 1.0f, y,
				    (int)N);
	}
	nn_f32_done(c->out[0], ty);
	free(tA);
	free(tB);
	free(tC);
	return 0;
}

/* ---- Det ---- */

static int det_infer(InferCtx *c)
{
	const ValueType *x = nn_in(c, 0);
	if (!x)
		return -1;
	ValueType *o = c->out[0];
	vt_set_tensor(o, x->elem, x->rank >= 2 ? x->rank - 2 : -1);
	if (x->rank < 0)
		return 0;
	if (x->rank < 2)
		return op_error(c->node, "input must have rank 2 or more ([..., M, M]), got %d", x->rank);
	Dim a = x->dims[x->rank - 2], b = x->dims[x->rank - 1];
	if (a.v >= 0 && b.v >= 0 && a.v != b.v)
		return op_error(c->node, "matrices must be square, got %lld x %lld", (long long)a.v, (long long)b.v);
	for (int i = 0; i < x->rank - 2; i++)
		o->dims[i] = x->dims[i];
	return 0;
}

/* determinants by LU decomposition with partial pivoting, in double */
static int det_run(RunCtx *c)
{
	const Tensor *x = c->in[0];
	if (!nn_is_float(x->dtype))
		return op_unsupported_type(c->node, c->opset, x->dtype);
	if (x->rank < 2 || x->dims[x->rank - 2] != x->dims[x->rank - 1])
		return op_error(c->node, "input must be square matrices [..., M, M]");
	int64_t n = x->dims[x->rank - 1], count = 1;
	for (int i = 0; i < x->rank - 2; i++)
		count *= x->dims[i];
	float *tx, *ty;
	const float *xf = nn_f32_in(c, x, &tx);
	float *y = xf ? nn_f32_out(c, 0, x->dtype, x->rank - 2, x->dims, &ty) : NULL;
	if (!y) {
		free(tx);
		return -1;
	}
	double *a = xmalloc(sizeof(double) * (size_t)(n > 0 ? n * n : 1));
	for (int64_t t = 0; t < count; t++) {
		for (int64_t i = 0; i < n * n; i++)
			a[i] = xf[t * n * n + i];
		double det = 1;
		for (int64_t k = 0; k < n && det != 0; k++) {
			int64_t p = k;
			for (int64_t i = k + 1; i < n; i++)
				if (fabs(a[i * n + k]) > fabs(a[p * n + k]))
					p = i;
			if (a[p * n + k] == 0) {
				det = 0;
				break;
			}
			if (p != k) {
				for (int64_t j = 0; j < n; j++) {
					double v = a[k * n + j];
					a[k * n + j] = a[p * n + j];
					a[p * n + j] = v;
				}
				det = -det;
			}
			det *= a[k * n + k];
			for (int64_t i = k + 1; i < n; i++) {
				double f = a[i * n + k] / a[k * n + k];
				for (int64_t j = k; j < n; j++)
					a[i * n + j] -= f * a[k * n + j];
			}
		}
		y[t] = (float)det;
	}
	free(a);
	nn_f32_done(c->out[0], ty);
	free(tx);
	return 0;
}

OPERATOR(ai_onnx, Det, 11, det_infer, det_run)
OPERATOR(ai_onnx, Gemm, 1, gemm_infer, gemm_run)
OPERATOR(ai_onnx, MatMul, 1, matmul_infer, matmul_run)
OPERATOR(ai_onnx, MatMulInteger, 10, matmulinteger_infer, matmulinteger_run)
OPERATOR(ai_onnx, QLinearMatMul, 10, qlinearmatmul_infer, qlinearmatmul_run)
