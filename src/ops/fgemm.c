/* fgemm.c — float32 matrix product on AVX-512 (see fgemm.h).
 *
 * Why: Debian's OpenBLAS 0.3.21 does not know AMD Zen 4/5 and runs its
 * Haswell (AVX2) kernel there, at half the rate the CPU can multiply; the
 * convolutions and MatMuls of the interpreter spend most of their time in
 * it. The scheme is the classic blocked one (Goto and van de Geijn): the
 * columns of b go in blocks of NC, the sum in blocks of KC; b is copied into
 * panels of NR columns (per call, or once for a constant operand), and the
 * kernel keeps an MR x NR tile of c in 24 of the 32 vector registers while
 * it streams a strip of MR rows of a (read in place, or packed once for
 * constant weights) and one panel of b from cache; the tile's rows of c
 * are prefetched meanwhile, as a c larger than the cache (1024 x 1024)
 * otherwise stalls each tile's store. Edge tiles are computed
 * in full on zero-padded strips and panels and only their valid part is
 * stored. Every element of c is summed in the same order whatever the
 * split between threads, so results do not depend on the thread count.
 * Packed left operands of 16, 32 or 64 rows go in strips of 8 (16
 * accumulators), which pad fewer rows than strips of 12. For a direct
 * convolution the kernel reads rows of b in place through a table of
 * offsets (fgemm_packed_direct), so no panel is copied, each panel's two
 * 16-column halves from where the output grid has kept columns (padding
 * columns between rows are skipped); each tile's sums are stored and
 * reloaded unchanged from one block of k to the next, one chain per
 * element. Against a packed b, rows of a with one nonzero element (one-hot
 * embeddings) skip the kernel: what its sums give for them is known
 * (onehot_product). Operands packed once are read as they lie: a b held
 * transposed (Gemm's transB = 1) and the rows of a are turned 16 x 16 at
 * a time in registers rather than gathered with a stride (a transposed
 * copy of nn.Linear's 3136 x 128 weights, one cache miss per element, cost
 * 0.6 ms of fashion-cnn's first run, six times the packing), and the
 * finite flag is taken as b is packed. */
#include "ops/fgemm.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "ops/nn.h"
#include "util.h"

#define MR 12
#define MR8 8
#define NR FGEMM_NR
#define KC 256
#define NC 512

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define AVX512 __attribute__((target("avx512f")))
#define HAVE_AVX512 1
#endif

#ifdef HAVE_AVX512
int fgemm_available(void)
{
	static int avail = -1;
	int a = __atomic_load_n(&avail, __ATOMIC_RELAXED);
	if (a < 0) {
		/* QUANTMAKE_GEMM=openblas: OpenBLAS everywhere (to compare, or to
		 * rule this kernel out) */
		const char *e = getenv("QUANTMAKE_GEMM");
		a = cpu_avx512f() && !(e && !strcmp(e, "openblas")) ? 1 : 0;
		__atomic_store_n(&avail, a, __ATOMIC_RELAXED);
	}
	return a;
}
#else
int fgemm_available(void)
{
	return 0;
}
#endif

/* ap[strip][kk][sr] = a[strip * sr + r, kk] for one block of kc columns,
 * rows past m zero (sr: rows per strip, at most 16) */
static void pack_a_block(const float *a, int64_t lda, int64_t m, int64_t kc, int64_t sr, float *ap);

/* rows per strip of a packed left operand: MR, or MR8 where that pads
 * over 5% fewer rows (32 or 64 output channels: 12-row strips compute 36
 * and 72, 8-row ones 32 and 64; the 12-row kernel does more per load, so
 * 128 rows stay in 11 strips of 12) */
static int64_t strip_rows(int64_t m)
{
	return (m + MR8 - 1) / MR8 * MR8 * 20 < (m + MR - 1) / MR * MR * 19 ? MR8 : MR;
}

size_t fgemm_packed_a_bytes(int64_t m, int64_t k)
{
	int64_t sr = strip_rows(m);
	return sizeof(float) * (size_t)((m + sr - 1) / sr * sr * k + 1);
}

FgemmA *fgemm_pack_a(int64_t m, int64_t k, const float *a, int64_t lda)
{
	FgemmA *pa = xcalloc(1, sizeof *pa);
	pa->m = m;
	pa->k = k;
	pa->mr = strip_rows(m);
	pa->mpad = (m + pa->mr - 1) / pa->mr * pa->mr;
	pa->p = xmalloc(fgemm_packed_a_bytes(m, k));
	for (int64_t k0 = 0; k0 < k; k0 += KC)
		pack_a_block(a + k0, lda, m, k - k0 < KC ? k - k0 : KC, pa->mr, pa->p + pa->mpad * k0);
	return pa;
}

static int shared_put(const void *pack);

void fgemm_free_a(FgemmA *pa)
{
	if (pa && (!pa->shared || shared_put(pa))) {
		free(pa->p);
		free(pa);
	}
}

#ifdef HAVE_AVX512
/* the lanes of v holding an infinity or a NaN (all exponent bits set) */
AVX512 static inline __attribute__((always_inline)) __mmask16 nonfinite16(__m512 v)
{
	__m512i e = _mm512_set1_epi32(0x7f800000);
	return _mm512_cmpeq_epi32_mask(_mm512_and_si512(_mm512_castps_si512(v), e), e);
}

/* bp[panel][kk][NR] = b[k0 + kk, j0 + panel * NR + j], columns past n
 * zero; when check, returns whether b holds an infinity or a NaN (else 0):
 * the constant operand's scan rides on its one pack */
AVX512 static inline __attribute__((always_inline)) int pack_b_body(const float *b, int64_t ldb, int64_t n,
								    int64_t kc, float *bp, int check)
{
	__mmask16 bad = 0;
	for (int64_t j0 = 0; j0 < n; j0 += NR, bp += NR * kc) {
		int64_t nr = n - j0 < NR ? n - j0 : NR;
		if (nr == NR) {
			for (int64_t kk = 0; kk < kc; kk++) {
				const float *br = b + kk * ldb + j0;
				__m512 v0 = _mm512_loadu_ps(br), v1 = _mm512_loadu_ps(br + 16);
				if (check)
					bad |= nonfinite16(v0) | nonfinite16(v1);
				_mm512_storeu_ps(bp + kk * NR, v0);
				_mm512_storeu_ps(bp + kk * NR + 16, v1);
			}
			continue;
		}
		/* a last panel of fewer columns: masked loads, zeros past nr */
		__mmask16 m0 = nr >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << nr) - 1);
		__mmask16 m1 = nr <= 16 ? 0 : (__mmask16)((1u << (nr - 16)) - 1);
		for (int64_t kk = 0; kk < kc; kk++) {
			const float *br = b + kk * ldb + j0;
			__m512 v0 = _mm512_maskz_loadu_ps(m0, br), v1 = _mm512_maskz_loadu_ps(m1, br + 16);
			if (check)
				bad |= nonfinite16(v0) | nonfinite16(v1);
			_mm512_storeu_ps(bp + kk * NR, v0);
			_mm512_storeu_ps(bp + kk * NR + 16, v1);
		}
	}
	return bad != 0;
}

AVX512 static void pack_b(const float *b, int64_t ldb, int64_t n, int64_t kc, float *bp)
{
	pack_b_body(b, ldb, n, kc, bp, 0);
}

/* pack_b that also says whether b holds an infinity or a NaN */
AVX512 static int pack_b_check(const float *b, int64_t ldb, int64_t n, int64_t kc, float *bp)
{
	return pack_b_body(b, ldb, n, kc, bp, 1);
}

/* a strip's rows read as they lie, 16 floats of each, turned in
 * registers into 16 columns of the strip */
AVX512 static void pack_a_block(const float *a, int64_t lda, int64_t m, int64_t kc, int64_t sr, float *ap)
{
	__mmask16 out = (__mmask16)((1u << sr) - 1);
	for (int64_t i0 = 0; i0 < m; i0 += sr, ap += sr * kc) {
		int64_t mr = m - i0 < sr ? m - i0 : sr;
		for (int64_t kk = 0; kk < kc; kk += 16) {
			int64_t nk = kc - kk < 16 ? kc - kk : 16;
			__mmask16 in = (__mmask16)((1u << nk) - 1);
			__m512 r[16];
			for (int64_t i = 0; i < 16; i++)
				r[i] = i < mr ? _mm512_maskz_loadu_ps(in, a + (i0 + i) * lda + kk) : _mm512_setzero_ps();
			fgemm_transpose16(r);
			for (int64_t c = 0; c < nk; c++)
				_mm512_mask_storeu_ps(ap + (kk + c) * sr, out, r[c]);
		}
	}
}

/* pack_b of b = bt transposed (b[kk, j] = bt[j * ldbt + kk]), read the
 * way bt lies: per panel, 16 of its rows at a time, 16 floats of each,
 * turned in registers into 16 rows of the panel's half. Returns whether
 * bt holds an infinity or a NaN. */
AVX512 static int pack_bt(const float *bt, int64_t ldbt, int64_t n, int64_t kc, float *bp)
{
	__mmask16 bad = 0;
	for (int64_t j0 = 0; j0 < n; j0 += NR, bp += NR * kc) {
		int64_t nr = n - j0 < NR ? n - j0 : NR;
		for (int64_t kk = 0; kk < kc; kk += 16) {
			int64_t nk = kc - kk < 16 ? kc - kk : 16;
			__mmask16 in = (__mmask16)((1u << nk) - 1);
			for (int64_t h = 0; h < NR; h += 16) {
				__m512 r[16];
				for (int64_t i = 0; i < 16; i++) {
					r[i] = h + i < nr ? _mm512_maskz_loadu_ps(in, bt + (j0 + h + i) * ldbt + kk)
							  : _mm512_setzero_ps();
					bad |= nonfinite16(r[i]);
				}
				fgemm_transpose16(r);
				for (int64_t c = 0; c < nk; c++)
					_mm512_storeu_ps(bp + (kk + c) * NR + h, r[c]);
			}
		}
	}
	return bad != 0;
}

/* the MR x NR tile t (row stride NR) = a strip * bp panel over kc, where
 * element (i, kk) of the strip is ap[i * si + kk * sk]: packed strips have
 * si 1 and sk MR, rows read in place si lda and sk 1 */
AVX512 static inline __attribute__((always_inline)) void
kernel_body(int64_t kc, const float *ap, int64_t si, int64_t sk, const float *bp, float *t)
{
	__m512 c00 = _mm512_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00;
	__m512 c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
	__m512 c60 = c00, c61 = c00, c70 = c00, c71 = c00, c80 = c00, c81 = c00;
	__m512 c90 = c00, c91 = c00, ca0 = c00, ca1 = c00, cb0 = c00, cb1 = c00;
	for (int64_t kk = 0; kk < kc; kk++, ap += sk, bp += NR) {
		__m512 b0 = _mm512_loadu_ps(bp), b1 = _mm512_loadu_ps(bp + 16), x;
#define ROW(i, r0, r1)                                   \
		x = _mm512_set1_ps(ap[(i) * si]);        \
		r0 = _mm512_fmadd_ps(x, b0, r0);         \
		r1 = _mm512_fmadd_ps(x, b1, r1);
		ROW(0, c00, c01) ROW(1, c10, c11) ROW(2, c20, c21) ROW(3, c30, c31)
		ROW(4, c40, c41) ROW(5, c50, c51) ROW(6, c60, c61) ROW(7, c70, c71)
		ROW(8, c80, c81) ROW(9, c90, c91) ROW(10, ca0, ca1) ROW(11, cb0, cb1)
#undef ROW
	}
#define OUT(i, r0, r1)                                           \
	_mm512_storeu_ps(t + (i) * NR, r0);                      \
	_mm512_storeu_ps(t + (i) * NR + 16, r1);
	OUT(0, c00, c01) OUT(1, c10, c11) OUT(2, c20, c21) OUT(3, c30, c31)
	OUT(4, c40, c41) OUT(5, c50, c51) OUT(6, c60, c61) OUT(7, c70, c71)
	OUT(8, c80, c81) OUT(9, c90, c91) OUT(10, ca0, ca1) OUT(11, cb0, cb1)
#undef OUT
}

/* the two layouts as separate functions, so each has constant strides */
AVX512 static void kernel_packed(int64_t kc, const float *ap, const float *bp, float *t)
{
	kernel_body(kc, ap, 1, MR, bp, t);
}

AVX512 static void kernel_rows(int64_t kc, const float *a, int64_t lda, const float *bp, float *t)
{
	kernel_body(kc, a, lda, 1, bp, t);
}

/* kernel_packed on a strip of MR8 rows (16 accumulators) */
AVX512 static void kernel_packed8(int64_t kc, const float *ap, const float *bp, float *t)
{
	__m512 c00 = _mm512_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00;
	__m512 c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
	__m512 c60 = c00, c61 = c00, c70 = c00, c71 = c00;
	for (int64_t kk = 0; kk < kc; kk++, ap += MR8, bp += NR) {
		__m512 b0 = _mm512_loadu_ps(bp), b1 = _mm512_loadu_ps(bp + 16), x;
#define ROW(i, r0, r1)                                   \
		x = _mm512_set1_ps(ap[i]);               \
		r0 = _mm512_fmadd_ps(x, b0, r0);         \
		r1 = _mm512_fmadd_ps(x, b1, r1);
		ROW(0, c00, c01) ROW(1, c10, c11) ROW(2, c20, c21) ROW(3, c30, c31)
		ROW(4, c40, c41) ROW(5, c50, c51) ROW(6, c60, c61) ROW(7, c70, c71)
#undef ROW
	}
#define OUT(i, r0, r1)                                           \
	_mm512_storeu_ps(t + (i) * NR, r0);                      \
	_mm512_storeu_ps(t + (i) * NR + 16, r1);
	OUT(0, c00, c01) OUT(1, c10, c11) OUT(2, c20, c21) OUT(3, c30, c31)
	OUT(4, c40, c41) OUT(5, c50, c51) OUT(6, c60, c61) OUT(7, c70, c71)
#undef OUT
}

/* v clamped to [cl[0], cl[1]] as Clip does: v < lo ? lo : v, then
 * v > hi ? hi : v (NaN passes) */
static inline float clamp1(float v, const float *cl)
{
	v = v < cl[0] ? cl[0] : v;
	return v > cl[1] ? cl[1] : v;
}

/* c (mr x nr of the tile, row stride ldc) = t, or += t when add; then
 * clamped when cl (the last block of k) */
AVX512 static void tile_store(const float *t, int64_t mr, int64_t nr, float *c, int64_t ldc, int add,
				const float *rb, const float *cl)
{
	if (nr == NR) {
		/* max(lo, v) and min(hi, v) return their second operand v on
		 * equality and NaN, as clamp1 does */
		__m512 lo = _mm512_set1_ps(cl ? cl[0] : 0), hi = _mm512_set1_ps(cl ? cl[1] : 0);
		for (int64_t i = 0; i < mr; i++) {
			float *cr = c + i * ldc;
			__m512 v0 = _mm512_loadu_ps(t + i * NR), v1 = _mm512_loadu_ps(t + i * NR + 16);
			if (rb) {
				v0 = _mm512_add_ps(v0, _mm512_set1_ps(rb[i]));
				v1 = _mm512_add_ps(v1, _mm512_set1_ps(rb[i]));
			}
			if (add) {
				v0 = _mm512_add_ps(v0, _mm512_loadu_ps(cr));
				v1 = _mm512_add_ps(v1, _mm512_loadu_ps(cr + 16));
			}
			if (cl) {
				v0 = _mm512_min_ps(hi, _mm512_max_ps(lo, v0));
				v1 = _mm512_min_ps(hi, _mm512_max_ps(lo, v1));
			}
			_mm512_storeu_ps(cr, v0);
			_mm512_storeu_ps(cr + 16, v1);
		}
		return;
	}
	for (int64_t i = 0; i < mr; i++)
		for (int64_t j = 0; j < nr; j++) {
			float v = rb ? t[i * NR + j] + rb[i] : t[i * NR + j];
			v = add ? c[i * ldc + j] + v : v;
			c[i * ldc + j] = cl ? clamp1(v, cl) : v;
		}
}
/* c[i, j] = bias[i] + dot(row i of a, column j of b) for n < 16
 * columns, bt holding b transposed ([n][k]): each row of a is read once
 * from memory, four columns at a time from cache */
AVX512 static void small_rows(int64_t m, int64_t n, int64_t k, const float *a, int64_t lda, const float *bt,
			      const float *bias, float *c, int64_t ldc)
{
	int64_t kv = k / 16 * 16;
	__mmask16 tail = (__mmask16)((1u << (k - kv)) - 1);
	for (int64_t i = 0; i < m; i++) {
		const float *ar = a + i * lda;
		for (int64_t j0 = 0; j0 < n; j0 += 4) {
			int64_t nj = n - j0 < 4 ? n - j0 : 4;
			const float *b0 = bt + j0 * k, *b1 = nj > 1 ? b0 + k : b0;
			const float *b2 = nj > 2 ? b0 + 2 * k : b0, *b3 = nj > 3 ? b0 + 3 * k : b0;
			__m512 s0 = _mm512_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
			for (int64_t kk = 0; kk < kv; kk += 16) {
				__m512 x = _mm512_loadu_ps(ar + kk);
				s0 = _mm512_fmadd_ps(x, _mm512_loadu_ps(b0 + kk), s0);
				s1 = _mm512_fmadd_ps(x, _mm512_loadu_ps(b1 + kk), s1);
				s2 = _mm512_fmadd_ps(x, _mm512_loadu_ps(b2 + kk), s2);
				s3 = _mm512_fmadd_ps(x, _mm512_loadu_ps(b3 + kk), s3);
			}
			if (tail) {
				__m512 x = _mm512_maskz_loadu_ps(tail, ar + kv);
				s0 = _mm512_fmadd_ps(x, _mm512_maskz_loadu_ps(tail, b0 + kv), s0);
				s1 = _mm512_fmadd_ps(x, _mm512_maskz_loadu_ps(tail, b1 + kv), s1);
				s2 = _mm512_fmadd_ps(x, _mm512_maskz_loadu_ps(tail, b2 + kv), s2);
				s3 = _mm512_fmadd_ps(x, _mm512_maskz_loadu_ps(tail, b3 + kv), s3);
			}
			float bv = bias ? bias[i] : 0.0f, v[4];
			v[0] = _mm512_reduce_add_ps(s0);
			v[1] = _mm512_reduce_add_ps(s1);
			v[2] = _mm512_reduce_add_ps(s2);
			v[3] = _mm512_reduce_add_ps(s3);
			for (int64_t j = 0; j < nj; j++)
				c[i * ldc + j0 + j] = v[j] + bv;
		}
	}
}
#else
/* portable versions of the three, for builds without AVX-512 intrinsics
 * (fgemm_available() is 0 there, so they only keep the file complete) */
static void pack_b(const float *b, int64_t ldb, int64_t n, int64_t kc, float *bp)
{
	for (int64_t j0 = 0; j0 < n; j0 += NR, bp += NR * kc) {
		int64_t nr = n - j0 < NR ? n - j0 : NR;
		for (int64_t kk = 0; kk < kc; kk++)
			for (int64_t j = 0; j < NR; j++)
				bp[kk * NR + j] = j < nr ? b[kk * ldb + j0 + j] : 0.0f;
	}
}

static void pack_a_block(const float *a, int64_t lda, int64_t m, int64_t kc, int64_t sr, float *ap)
{
	for (int64_t i0 = 0; i0 < m; i0 += sr, ap += sr * kc) {
		int64_t mr = m - i0 < sr ? m - i0 : sr;
		for (int64_t kk = 0; kk < kc; kk++)
			for (int64_t r = 0; r < sr; r++)
				ap[kk * sr + r] = r < mr ? a[(i0 + r) * lda + kk] : 0.0f;
	}
}

static int pack_b_check(const float *b, int64_t ldb, int64_t n, int64_t kc, float *bp)
{
	int bad = 0;
	pack_b(b, ldb, n, kc, bp);
	for (int64_t kk = 0; kk < kc; kk++)
		for (int64_t j = 0; j < n; j++)
			bad |= !isfinite(b[kk * ldb + j]);
	return bad;
}

static int pack_bt(const float *bt, int64_t ldbt, int64_t n, int64_t kc, float *bp)
{
	int bad = 0;
	for (int64_t j0 = 0; j0 < n; j0 += NR, bp += NR * kc) {
		int64_t nr = n - j0 < NR ? n - j0 : NR;
		for (int64_t kk = 0; kk < kc; kk++)
			for (int64_t j = 0; j < NR; j++) {
				float v = j < nr ? bt[(j0 + j) * ldbt + kk] : 0.0f;
				bad |= !isfinite(v);
				bp[kk * NR + j] = v;
			}
	}
	return bad;
}

static void kernel_body(int64_t kc, const float *ap, int64_t si, int64_t sk, const float *bp, float *t)
{
	memset(t, 0, sizeof(float) * MR * NR);
	for (int64_t kk = 0; kk < kc; kk++)
		for (int i = 0; i < MR; i++)
			for (int j = 0; j < NR; j++)
				t[i * NR + j] += ap[i * si + kk * sk] * bp[kk * NR + j];
}

static void kernel_packed(int64_t kc, const float *ap, const float *bp, float *t)
{
	kernel_body(kc, ap, 1, MR, bp, t);
}

static void kernel_rows(int64_t kc, const float *a, int64_t lda, const float *bp, float *t)
{
	kernel_body(kc, a, lda, 1, bp, t);
}

static void kernel_packed8(int64_t kc, const float *ap, const float *bp, float *t)
{
	memset(t, 0, sizeof(float) * MR * NR);
	for (int64_t kk = 0; kk < kc; kk++)
		for (int i = 0; i < MR8; i++)
			for (int j = 0; j < NR; j++)
				t[i * NR + j] += ap[kk * MR8 + i] * bp[kk * NR + j];
}

static void tile_store(const float *t, int64_t mr, int64_t nr, float *c, int64_t ldc, int add,
		       const float *rb, const float *cl)
{
	for (int64_t i = 0; i < mr; i++)
		for (int64_t j = 0; j < nr; j++) {
			float v = rb ? t[i * NR + j] + rb[i] : t[i * NR + j];
			v = add ? c[i * ldc + j] + v : v;
			c[i * ldc + j] = cl ? v < cl[0] ? cl[0] : v > cl[1] ? cl[1] : v : v;
		}
}
static void small_rows(int64_t m, int64_t n, int64_t k, const float *a, int64_t lda, const float *bt,
		       const float *bias, float *c, int64_t ldc)
{
	for (int64_t i = 0; i < m; i++)
		for (int64_t j = 0; j < n; j++) {
			float acc = 0.0f;
			for (int64_t kk = 0; kk < k; kk++)
				acc += a[i * lda + kk] * bt[j * k + kk];
			c[i * ldc + j] = acc + (bias ? bias[i] : 0.0f);
		}
}
#endif

size_t fgemm_packed_b_bytes(int64_t k, int64_t n)
{
	return sizeof(float) * (size_t)((n + NR - 1) / NR * NR * k + 1);
}

/* b, or bt transposed when trans, packed: per block of NC columns, per
 * block of KC rows, its panels */
static FgemmB *pack_b_whole(int64_t k, int64_t n, const float *b, int64_t ldb, int trans)
{
	FgemmB *pb = xcalloc(1, sizeof *pb);
	int bad = 0;
	pb->k = k;
	pb->n = n;
	pb->p = xmalloc(fgemm_packed_b_bytes(k, n));
	for (int64_t jb = 0; jb < n; jb += NC) {
		int64_t nb = n - jb < NC ? n - jb : NC, npad = (nb + NR - 1) / NR * NR;
		for (int64_t k0 = 0; k0 < k; k0 += KC) {
			int64_t kc = k - k0 < KC ? k - k0 : KC;
			float *d = pb->p + jb * k + npad * k0;
			bad |= trans ? pack_bt(b + jb * ldb + k0, ldb, nb, kc, d)
				     : pack_b_check(b + k0 * ldb + jb, ldb, nb, kc, d);
		}
	}
	pb->finite = !bad;
	return pb;
}

FgemmB *fgemm_pack_b(int64_t k, int64_t n, const float *b, int64_t ldb)
{
	return pack_b_whole(k, n, b, ldb, 0);
}

FgemmB *fgemm_pack_bt(int64_t k, int64_t n, const float *bt, int64_t ldbt)
{
	return pack_b_whole(k, n, bt, ldbt, 1);
}

void fgemm_free_b(FgemmB *pb)
{
	if (pb && (!pb->shared || shared_put(pb))) {
		free(pb->p);
		free(pb);
	}
}

/* ---- packed constants shared between interpreters ----
 *
 * Interpreters of one model side by side (calibration's workers) borrow
 * the same initializer bytes, and each packed them on its first run:
 * fashion-cnn's 3136 x 128 Gemm took 0.08 ms to pack and 0.7 ms more to
 * fault in the pages of the fresh copy. A constant packed through
 * fgemm_pack_*_const while a pack of the same kind, shape and source
 * address is alive takes that one instead, once the source's bytes are
 * seen to give its bytes (packed again a panel or strip at a time into a
 * buffer on the stack and compared: the address is only a hint, as the
 * bytes there may have been freed and others put there since). A pack
 * goes with its last user. */
enum { SH_A, SH_B, SH_BT, SH_FN };

typedef struct Shared {
	int kind;
	FgemmPacker fn;           /* SH_FN: the caller's packer */
	const float *src;
	int64_t rows, cols, ld;
	void *pack;               /* FgemmA (SH_A), FgemmB, or floats (SH_FN) */
	int users;
} Shared;

static pthread_mutex_t sh_lock = PTHREAD_MUTEX_INITIALIZER;
static Shared *sh;
static size_t sh_n, sh_cap;

/* the latest live pack of src as kind, with one user more; NULL when
 * none */
static void *shared_get(int kind, FgemmPacker fn, const float *src, int64_t rows, int64_t cols, int64_t ld)
{
	void *p = NULL;
	pthread_mutex_lock(&sh_lock);
	for (size_t i = sh_n; i-- > 0 && !p;)
		if (sh[i].kind == kind && sh[i].fn == fn && sh[i].src == src && sh[i].rows == rows &&
		    sh[i].cols == cols && sh[i].ld == ld) {
			sh[i].users++;
			p = sh[i].pack;
		}
	pthread_mutex_unlock(&sh_lock);
	return p;
}

static void shared_add(int kind, FgemmPacker fn, const float *src, int64_t rows, int64_t cols, int64_t ld,
		       void *pack)
{
	pthread_mutex_lock(&sh_lock);
	if (sh_n == sh_cap) {
		sh_cap = sh_cap ? 2 * sh_cap : 16;
		sh = xreallocarray(sh, sh_cap, sizeof *sh);
	}
	sh[sh_n++] = (Shared){kind, fn, src, rows, cols, ld, pack, 1};
	pthread_mutex_unlock(&sh_lock);
}

/* one user less of pack; 1 when that was the last (free it) */
static int shared_put(const void *pack)
{
	int last = 1;
	pthread_mutex_lock(&sh_lock);
	for (size_t i = 0; i < sh_n; i++)
		if (sh[i].pack == pack) {
			last = --sh[i].users == 0;
			if (last) /* the others keep their order: latest last */
				memmove(&sh[i], &sh[i + 1], (--sh_n - i) * sizeof *sh);
			break;
		}
	if (!sh_n) {
		free(sh);
		sh = NULL;
		sh_cap = 0;
	}
	pthread_mutex_unlock(&sh_lock);
	return last;
}

/* whether pb holds b's bytes (bt's transposed when trans), packed again
 * a panel at a time */
static int same_b(const FgemmB *pb, const float *b, int64_t ldb, int trans)
{
	float t[NR * KC] __attribute__((aligned(64)));
	int64_t k = pb->k, n = pb->n;
	for (int64_t jb = 0; jb < n; jb += NC) {
		int64_t nb = n - jb < NC ? n - jb : NC, npad = (nb + NR - 1) / NR * NR;
		for (int64_t k0 = 0; k0 < k; k0 += KC) {
			int64_t kc = k - k0 < KC ? k - k0 : KC;
			for (int64_t j0 = 0; j0 < nb; j0 += NR) {
				int64_t nr = nb - j0 < NR ? nb - j0 : NR;
				if (trans)
					pack_bt(b + (jb + j0) * ldb + k0, ldb, nr, kc, t);
				else
					pack_b(b + k0 * ldb + jb + j0, ldb, nr, kc, t);
				if (memcmp(t, pb->p + jb * k + npad * k0 + j0 * kc, sizeof(float) * (size_t)(NR * kc)))
					return 0;
			}
		}
	}
	return 1;
}

/* whether pa holds a's bytes, packed again a strip at a time */
static int same_a(const FgemmA *pa, const float *a, int64_t lda)
{
	float t[MR * KC] __attribute__((aligned(64)));
	for (int64_t k0 = 0; k0 < pa->k; k0 += KC) {
		int64_t kc = pa->k - k0 < KC ? pa->k - k0 : KC;
		for (int64_t i0 = 0; i0 < pa->m; i0 += pa->mr) {
			pack_a_block(a + i0 * lda + k0, lda, pa->m - i0 < pa->mr ? pa->m - i0 : pa->mr, kc, pa->mr, t);
			if (memcmp(t, pa->p + pa->mpad * k0 + i0 * kc, sizeof(float) * (size_t)(pa->mr * kc)))
				return 0;
		}
	}
	return 1;
}

FgemmB *fgemm_pack_b_const(int64_t k, int64_t n, const float *b, int64_t ldb, int trans)
{
	int kind = trans ? SH_BT : SH_B;
	FgemmB *pb = shared_get(kind, NULL, b, k, n, ldb);
	if (pb && same_b(pb, b, ldb, trans))
		return pb;
	fgemm_free_b(pb);
	pb = pack_b_whole(k, n, b, ldb, trans);
	pb->shared = 1;
	shared_add(kind, NULL, b, k, n, ldb, pb);
	return pb;
}

FgemmA *fgemm_pack_a_const(int64_t m, int64_t k, const float *a, int64_t lda)
{
	FgemmA *pa = shared_get(SH_A, NULL, a, m, k, lda);
	if (pa && same_a(pa, a, lda))
		return pa;
	fgemm_free_a(pa);
	pa = fgemm_pack_a(m, k, a, lda);
	pa->shared = 1;
	shared_add(SH_A, NULL, a, m, k, lda, pa);
	return pa;
}

/* a caller's layout: its own comparison reads the source against the
 * live pack (the key tells which pack to compare with, the bytes decide) */
float *fgemm_pack_const(FgemmPacker pack, FgemmPackSame same, size_t floats, const float *src, int64_t rows,
			int64_t cols, int64_t ld)
{
	float *p = shared_get(SH_FN, pack, src, rows, cols, ld);
	if (p && same(src, rows, cols, ld, p))
		return p;
	fgemm_free_packed(p);
	float *q = xmalloc(sizeof(float) * (floats ? floats : 1));
	pack(src, rows, cols, ld, q);
	shared_add(SH_FN, pack, src, rows, cols, ld, q);
	return q;
}

void fgemm_free_packed(float *p)
{
	if (p && shared_put(p))
		free(p);
}

typedef struct Job {
	FgemmFill fill;           /* panels of b from a callback, or NULL */
	void *ctx;
	const FgemmB *pb;         /* packed right operand, or NULL: b */
	const FgemmA *pa;         /* packed left operand, or NULL: */
	const float *a;           /* read in place, rows of stride lda */
	int64_t m, k, lda;
	int64_t n, ldb, ldc;
	const float *b;
	float *c;
	int beta;
	const float *bias;        /* per row of c, or NULL */
	const float *clamp;       /* {lo, hi} applied to the final results, or NULL */
	float *bufs;              /* per piece: panel + edge floats */
	int64_t pieces;
	size_t panel, piece;      /* floats of b's panels, of a piece (see job_sizes) */
} Job;

/* floats of packed panels of b for n columns of depth k: one block of
 * NC columns by KC, or less for a smaller product */
static size_t panel_floats(int64_t n, int64_t k)
{
	int64_t nc = (n + NR - 1) / NR * NR, kc = k < KC ? k : KC;
	return (size_t)((nc < NC ? nc : NC) * kc);
}

/* a piece's buffer: b's panels unless b comes packed, then a last strip
 * of fewer than MR rows of a unless a comes packed */
static void job_sizes(Job *g)
{
	int64_t kc = g->k < KC ? g->k : KC;
	g->panel = g->pb ? 0 : panel_floats(g->n, g->k);
	g->piece = g->panel + (g->pa || g->m % MR == 0 ? 0 : (size_t)(MR * kc));
	if (!g->piece)
		g->piece = 1;
}

/* columns [panel lo, panel hi) of the product, in NR-wide panels; piece
 * ceil(lo * pieces / panels), as nn_parallel splits, picks the buffer */
static void run_cols(void *arg, int64_t plo, int64_t phi)
{
	const Job *g = arg;
	int64_t panels = (g->n + NR - 1) / NR;
	float *buf = g->bufs + (size_t)((plo * g->pieces + panels - 1) / panels) * g->piece;
	float *edge = buf + g->panel;  /* a last strip of fewer than MR rows, zero-padded */
	float t[MR * NR] __attribute__((aligned(64)));
	int64_t sr = g->pa ? g->pa->mr : MR;   /* rows per strip */
	/* column blocks of NC start at multiples of NC (the layout of a
	 * prepacked b); this piece covers columns [lo, hi) of each */
	for (int64_t jb = plo * NR / NC * NC; jb < phi * NR && jb < g->n; jb += NC) {
		int64_t nb = g->n - jb < NC ? g->n - jb : NC, npad = (nb + NR - 1) / NR * NR;
		int64_t lo = jb > plo * NR ? jb : plo * NR, hi = jb + nb < phi * NR ? jb + nb : phi * NR;
		if (hi > g->n)
			hi = g->n;
		for (int64_t k0 = 0; k0 < g->k; k0 += KC) {
			int64_t kc = g->k - k0 < KC ? g->k - k0 : KC;
			int add = k0 > 0 || g->beta;
			/* the panel of column j: bp + (j - j0) * kc */
			const float *bp = buf;
			int64_t j0 = lo;
			if (g->pb) {
				bp = g->pb->p + jb * g->k + npad * k0;
				j0 = jb;
			} else if (g->fill) {
				g->fill(g->ctx, k0, kc, lo, hi - lo, buf);
			} else {
				pack_b(g->b + k0 * g->ldb + lo, g->ldb, hi - lo, kc, buf);
			}
			int64_t mfull = g->pa ? g->m : g->m / MR * MR;
			if (mfull < g->m) {
				for (int64_t r = 0; r < MR; r++)
					for (int64_t kk = 0; kk < kc; kk++)
						edge[r * kc + kk] =
							mfull + r < g->m ? g->a[(mfull + r) * g->lda + k0 + kk] : 0.0f;
			}
			for (int64_t jr = lo; jr < hi; jr += NR) {
				int64_t nr = hi - jr < NR ? hi - jr : NR;
				const float *bj = bp + (jr - j0) * kc;
				for (int64_t ir = 0; ir < g->m; ir += sr) {
					int64_t mr = g->m - ir < sr ? g->m - ir : sr;
					/* the tile of c into L2 while the kernel runs
					 * (into L1 measured no faster: the strip of a and
					 * the panel evict it), for a c too large to stay
					 * cached from one block of k to the next */
					float *ct = g->c + ir * g->ldc + jr;
					for (int64_t r = 0; r < mr; r++) {
						__builtin_prefetch(ct + r * g->ldc, 1, 2);
						__builtin_prefetch(ct + r * g->ldc + nr - 1, 1, 2);
					}
					if (g->pa && sr == MR8)
						kernel_packed8(kc, g->pa->p + g->pa->mpad * k0 + ir * kc, bj, t);
					else if (g->pa)
						kernel_packed(kc, g->pa->p + g->pa->mpad * k0 + ir * kc, bj, t);
					else if (ir < mfull)
						kernel_rows(kc, g->a + ir * g->lda + k0, g->lda, bj, t);
					else
						kernel_rows(kc, edge, kc, bj, t);
					tile_store(t, mr, nr, g->c + ir * g->ldc + jr, g->ldc, add,
						   g->bias && k0 == 0 ? g->bias + ir : NULL,
						   k0 + kc >= g->k ? g->clamp : NULL);
				}
			}
		}
	}
}

/* packing buffers of the calling thread: the running step's scratch in
 * the interpreter (op_scratch), else one of the thread's own, kept between
 * calls so that repeated products do not fault in fresh pages */
static _Thread_local float *tl_buf;
static _Thread_local size_t tl_cap;

static float *pack_buf(size_t floats)
{
	float *p = op_scratch(OP_SCRATCH_FGEMM, sizeof(float) * floats);
	if (p)
		return p;
	if (tl_cap < floats) {
		free(tl_buf);
		tl_buf = xmalloc(sizeof(float) * floats);
		tl_cap = floats;
	}
	return tl_buf;
}

static void run(Job *g, int threads)
{
	if (g->m <= 0 || g->n <= 0)
		return;
	if (g->k <= 0) {
		for (int64_t i = 0; !g->beta && i < g->m; i++)
			memset(g->c + i * g->ldc, 0, sizeof(float) * (size_t)g->n);
		return;
	}
	int64_t panels = (g->n + NR - 1) / NR;
	/* at least 4 MFLOP (some 30 us) a thread: waking a pool worker costs
	 * only about 4 us, but smaller products measured no faster split
	 * (bench/README.md, "One worker pool") */
	if (threads > 1 && 2 * g->m * g->n * g->k < (int64_t)threads * 4000000)
		threads = 1;
	if (threads > panels)
		threads = (int)panels;
	if (threads < 1)
		threads = 1;
	job_sizes(g);
	if (g->bufs) {  /* the caller's buffer: this thread only */
		g->pieces = 1;
		run_cols(g, 0, panels);
		return;
	}
	g->bufs = pack_buf((size_t)threads * g->piece);
	g->pieces = threads;
	nn_parallel(threads, panels, run_cols, g);
}

void fgemm_packed(const FgemmA *a, int64_t n, const float *b, int64_t ldb, const float *bias, int beta, float *c,
		  int64_t ldc, int threads)
{
	Job g = {.pa = a, .m = a->m, .k = a->k, .n = n, .ldb = ldb, .ldc = ldc, .b = b, .c = c, .beta = beta,
		 .bias = bias};
	run(&g, threads);
}

size_t fgemm_buf_floats(int64_t n, int64_t k)
{
	size_t f = panel_floats(n, k);
	return f ? f : 1;
}

void fgemm_packed_fill(const FgemmA *a, int64_t n, FgemmFill fill, void *ctx, const float *bias,
		       const float *clamp, float *c, int64_t ldc, int threads, float *buf)
{
	Job g = {.fill = fill, .ctx = ctx, .pa = a, .m = a->m, .k = a->k, .n = n, .ldc = ldc, .c = c,
		 .bias = bias, .clamp = clamp, .bufs = buf};
	run(&g, threads);
}

/* ---- products whose left operand has one-hot rows ---- */

/* A row of a with one nonzero element a[p] (the others +0 or -0) against
 * a finite b: each kernel sum over a block of k starts from +0, to which
 * fma adds 0 * b = +-0 and leaves it +0 until p, where it becomes
 * fma(a[p], b[p, j], +0), the product rounded once (+0 when exactly zero);
 * the products after p add +-0, leaving it unchanged unless it is -0 (a
 * product too small for a float). With k above KC the blocks are added
 * (c + t), and the +0 of a block without p turns -0 into +0; with one
 * block the result is the sum itself, and a -0 there depends on the signs
 * of the later terms, so such a row is left to the kernel. A row of zeros
 * gives +0. Each element of c is a sum over its own row of a, in an order
 * that does not depend on the other rows, so the rows left to the kernel
 * are gathered and multiplied apart. */

#ifdef HAVE_AVX512
/* onehot_pos of a row with two nonzero elements, or a NaN or infinity */
#define ONEHOT_MORE (-2)

typedef struct Onehot {
	const float *a;
	int64_t lda;
	const FgemmB *b;
	float *c;
	int64_t ldc;
	int64_t first;            /* rows [lo, hi) of a range are first + [lo, hi) */
	uint8_t *left;            /* per row: 1 when left to the kernel */
} Onehot;

/* rows left to the kernel are multiplied in place in runs of at least
 * ONEHOT_RUN (a dense a whose first row is one-hot: one run), else
 * gathered ONEHOT_GATHER at a time (20 strips of MR) */
#define ONEHOT_RUN (4 * MR)
#define ONEHOT_GATHER (20 * MR)
/* rows tried before the others, in the calling thread */
#define ONEHOT_PROBE 256

/* QUANTMAKE_MATMUL_DENSE=1: no one-hot shortcut (to compare the bytes) */
static int onehot_off(void)
{
	static int off = -1;
	int o = __atomic_load_n(&off, __ATOMIC_RELAXED);
	if (o < 0) {
		const char *e = getenv("QUANTMAKE_MATMUL_DENSE");
		o = e && !strcmp(e, "1");
		__atomic_store_n(&off, o, __ATOMIC_RELAXED);
	}
	return o;
}

/* the index of a[0, k)'s only nonzero element, -1 when it has none,
 * ONEHOT_MORE when it has two (found in the first 16 elements of a dense
 * row) or a NaN or infinity */
AVX512 static int64_t onehot_pos(const float *a, int64_t k)
{
	__m512 z = _mm512_setzero_ps();
	int64_t pos = -1;
	for (int64_t kk = 0; kk < k; kk += 16) {
		__mmask16 in = k - kk >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (k - kk)) - 1);
		/* unordered: a NaN counts as nonzero */
		unsigned nz = _mm512_mask_cmp_ps_mask(in, _mm512_maskz_loadu_ps(in, a + kk), z, _CMP_NEQ_UQ);
		if (!nz)
			continue;
		if (pos >= 0 || (nz & (nz - 1)))
			return ONEHOT_MORE;
		pos = kk + __builtin_ctz(nz);
	}
	return pos >= 0 && !isfinite(a[pos]) ? ONEHOT_MORE : pos;
}

/* row c[0, n) = a[pos] * b[pos, :] as the kernel sums it (pos -1: +0);
 * 0, or -1 when a product is -0 and k is one block */
AVX512 static int onehot_row(const FgemmB *b, int64_t pos, float av, float *c)
{
	__m512 z = _mm512_setzero_ps(), x = _mm512_set1_ps(av), neg0 = _mm512_set1_ps(-0.0f);
	int64_t k0 = pos < 0 ? 0 : pos / KC * KC, kc = b->k - k0 < KC ? b->k - k0 : KC;
	int blocks = b->k > KC;
	for (int64_t jb = 0; jb < b->n; jb += NC) {
		int64_t nb = b->n - jb < NC ? b->n - jb : NC, npad = (nb + NR - 1) / NR * NR;
		/* row pos of the block's panels: panel q at bp + q * NR * kc */
		const float *bp = pos < 0 ? NULL : b->p + jb * b->k + npad * k0 + (pos - k0) * NR;
		for (int64_t j = 0; j < nb; j += 16) {
			__mmask16 out = nb - j >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (nb - j)) - 1);
			__m512 v = z;
			if (pos >= 0) {
				/* panels are NR wide, zero-padded: 16 floats always there */
				v = _mm512_fmadd_ps(x, _mm512_loadu_ps(bp + j / NR * NR * kc + j % NR), z);
				if (blocks)
					v = _mm512_add_ps(v, z);
				else if (_mm512_mask_cmpeq_epi32_mask(out, _mm512_castps_si512(v),
								      _mm512_castps_si512(neg0)))
					return -1;
			}
			_mm512_mask_storeu_ps(c + jb + j, out, v);
		}
	}
	return 0;
}

/* rows first + [lo, hi) of c by the shortcut, or marked left */
static void onehot_rows(void *arg, int64_t lo, int64_t hi)
{
	Onehot *g = arg;
	for (int64_t i = g->first + lo; i < g->first + hi; i++) {
		const float *ar = g->a + i * g->lda;
		int64_t pos = onehot_pos(ar, g->b->k);
		g->left[i] = pos == ONEHOT_MORE ||
			     onehot_row(g->b, pos, pos >= 0 ? ar[pos] : 0.0f, g->c + i * g->ldc) < 0;
	}
}

/* rows [i, i + nr) of c by the kernel, read in place */
static void onehot_kernel_run(const Onehot *g, int64_t i, int64_t nr, int threads)
{
	Job j = {.pb = g->b, .a = g->a + i * g->lda, .m = nr, .k = g->b->k, .lda = g->lda, .n = g->b->n,
		 .ldc = g->ldc, .c = g->c + i * g->ldc};
	run(&j, threads);
}

/* the nr rows idx[0, nr) of c by the kernel, gathered in *buf (made on
 * first use: ONEHOT_GATHER rows of k floats, then as many of n) */
static void onehot_kernel_rows(const Onehot *g, const int64_t *idx, int64_t nr, float **buf, int threads)
{
	int64_t k = g->b->k, n = g->b->n;
	if (!*buf)
		*buf = xmalloc(sizeof(float) * (size_t)(ONEHOT_GATHER * (k + n)));
	float *ga = *buf, *gc = ga + ONEHOT_GATHER * k;
	for (int64_t r = 0; r < nr; r++)
		memcpy(ga + r * k, g->a + idx[r] * g->lda, sizeof(float) * (size_t)k);
	Job j = {.pb = g->b, .a = ga, .m = nr, .k = k, .lda = k, .n = n, .ldc = n, .c = gc};
	run(&j, threads);
	for (int64_t r = 0; r < nr; r++)
		memcpy(g->c + idx[r] * g->ldc, gc + r * n, sizeof(float) * (size_t)n);
}

/* c = a * b with the rows that have at most one nonzero element made by
 * the shortcut and the others by the kernel (1), or 0 with c partly
 * written when the first row does not qualify (a dense a, for the scan of
 * a few elements, no worker and no allocation) or half the first
 * ONEHOT_PROBE do not: the whole product is the kernel's. The scan of a
 * row that does not qualify stops at its second nonzero. */
static int onehot_product(int64_t m, const float *a, int64_t lda, const FgemmB *b, float *c, int64_t ldc,
			  int threads)
{
	if (!b->finite || b->k < FGEMM_ONEHOT_K || m <= 0 || b->n <= 0 || onehot_off())
		return 0;
	uint8_t left0;
	Onehot g = {.a = a, .lda = lda, .b = b, .c = c, .ldc = ldc, .left = &left0};
	onehot_rows(&g, 0, 1);
	if (left0 || m == 1)
		return !left0;
	g.left = xmalloc((size_t)m);
	g.left[0] = 0;
	/* the next rows in this thread: when over half of them are left to
	 * the kernel, so is the whole product (the scan of a row that does
	 * not qualify may have to read all of it) */
	int64_t probe = m < ONEHOT_PROBE ? m : ONEHOT_PROBE, nl = 0;
	onehot_rows(&g, 1, probe);
	for (int64_t i = 1; i < probe; i++)
		nl += g.left[i];
	if (2 * nl > probe) {
		free(g.left);
		return 0;
	}
	g.first = probe;
	/* a thread pays for some 64K elements of a scanned */
	nn_parallel(threads > 1 && (m - probe) * b->k < (int64_t)threads * 65536 ? 1 : threads, m - probe, onehot_rows,
		    &g);
	int64_t idx[ONEHOT_GATHER], ni = 0;
	float *buf = NULL;
	for (int64_t i = 1; i < m;) {
		if (!g.left[i]) {
			i++;
			continue;
		}
		int64_t e = i + 1;
		while (e < m && g.left[e])
			e++;
		if (e - i >= ONEHOT_RUN) {
			onehot_kernel_run(&g, i, e - i, threads);
			i = e;
			continue;
		}
		for (; i < e; i++) {
			idx[ni++] = i;
			if (ni == ONEHOT_GATHER) {
				onehot_kernel_rows(&g, idx, ni, &buf, threads);
				ni = 0;
			}
		}
	}
	if (ni)
		onehot_kernel_rows(&g, idx, ni, &buf, threads);
	free(buf);
	free(g.left);
	return 1;
}
#else
static int onehot_product(int64_t m, const float *a, int64_t lda, const FgemmB *b, float *c, int64_t ldc,
			  int threads)
{
	/* portable builds multiply in full (fgemm_available() is 0 there) */
	(void)m, (void)a, (void)lda, (void)b, (void)c, (void)ldc, (void)threads;
	return 0;
}
#endif

void fgemm_packed_b(int64_t m, const float *a, int64_t lda, const FgemmB *b, float *c, int64_t ldc, int threads)
{
	if (onehot_product(m, a, lda, b, c, ldc, threads))
		return;
	Job g = {.pb = b, .a = a, .m = m, .k = b->k, .lda = lda, .n = b->n, .ldc = ldc, .c = c};
	run(&g, threads);
}

/* fgemm for fewer than 16 columns without accumulation: dot products */
static void fgemm_small(int64_t m, int64_t n, int64_t k, const float *a, int64_t lda, const float *b, int64_t ldb,
			const float *bias, float *c, int64_t ldc)
{
	float *bt = pack_buf((size_t)(n * k));
	for (int64_t kk = 0; kk < k; kk++)
		for (int64_t j = 0; j < n; j++)
			bt[j * k + kk] = b[kk * ldb + j];
	small_rows(m, n, k, a, lda, bt, bias, c, ldc);
}

void fgemm(int64_t m, int64_t n, int64_t k, const float *a, int64_t lda, const float *b, int64_t ldb,
	   const float *bias, int beta, float *c, int64_t ldc, int threads)
{
	if (n > 0 && n < 16 && k > 0 && m > 0 && !beta) {
		fgemm_small(m, n, k, a, lda, b, ldb, bias, c, ldc);
		return;
	}
	Job g = {.a = a, .m = m, .k = k, .lda = lda, .n = n, .ldb = ldb, .ldc = ldc, .b = b, .c = c, .beta = beta,
		 .bias = bias};
	run(&g, threads);
}

/* ---- products whose right operand is read in place through row offsets ---- */

typedef struct Direct {
	const FgemmA *pa;
	const float *b;
	const int64_t *off;
	const FgemmDirectPlan *pl;
	const float *bias, *add, *clamp;
	float *c;
	int64_t ldc;
} Direct;

/* A panel's two halves (HALF columns each) start anywhere in the grid:
 * each at the first kept column past the previous half, so the padding
 * columns between output rows are skipped rather than computed (a 16 x 16
 * output on its 18-column grid: 8 panels, not 9) and a 32-wide output row
 * is one panel, stored whole. */
#define HALF (NR / 2)

/* one run of a panel's columns that lands contiguously in c */
typedef struct DSeg {
	int64_t at, dst, len;
} DSeg;

struct FgemmDirectPlan {
	int64_t *hs;              /* each half panel's first grid column */
	int64_t nh;               /* half panels; panel q holds halves 2q, 2q + 1 */
	int64_t *sfirst;          /* panel q's runs: seg[sfirst[q], sfirst[q + 1]) */
	DSeg *seg;
};

/* the first kept grid column at or after p, or mp->n */
static int64_t direct_next(const FgemmMap *mp, int64_t p)
{
	while (p < mp->n) {
		int64_t w = p % mp->wq, h = p / mp->wq % mp->hq, img = w / mp->iw, wi = w % mp->iw;
		if (h >= mp->oh || img >= mp->wq / mp->iw)
			p += mp->wq - w;   /* the next row's first column */
		else if (wi >= mp->ow)
			p += mp->iw - wi;  /* the next image's first column */
		else
			return p;
	}
	return mp->n;
}

/* the first columns of the half panels covering mp's kept columns (*hs,
 * malloc'd); returns their count */
static int64_t direct_halves(const FgemmMap *mp, int64_t **hs)
{
	int64_t cap = 64, nh = 0, *v = xmalloc(sizeof(int64_t) * (size_t)cap);
	for (int64_t p = direct_next(mp, 0); p < mp->n; p = direct_next(mp, p + HALF)) {
		if (nh == cap)
			v = xreallocarray(v, (size_t)(cap *= 2), sizeof(int64_t));
		v[nh++] = p;
	}
	*hs = v;
	return nh;
}


/* appends to seg the runs of the half panel at grid column p0 that map to
 * kept outputs, at tile column at + (column - p0) (at most HALF); returns
 * the new count */
static int64_t direct_segs(const FgemmMap *mp, int64_t p0, int64_t at, DSeg *seg, int64_t ns)
{
	int64_t plane = mp->hq * mp->wq, end = p0 + HALF;
	for (int64_t p = p0; p < end;) {
		int64_t w = p % mp->wq, h = p / mp->wq % mp->hq, d = p / plane;
		int64_t img = w / mp->iw, wi = w % mp->iw;
		if (p >= mp->n)
			break;
		if (h >= mp->oh || img >= mp->wq / mp->iw) {
			p += mp->wq - w;
			continue;
		}
		if (wi >= mp->ow) {
			p += mp->iw - wi;
			continue;
		}
		int64_t len = mp->ow - wi < end - p ? mp->ow - wi : end - p;
		seg[ns++] = (DSeg){at + p - p0, img * mp->istep + (d * mp->oh + h) * mp->ow + wi, len};
		p += len;
	}
	return ns;
}

FgemmDirectPlan *fgemm_direct_plan(const FgemmMap *map)
{
	FgemmDirectPlan *pl = xcalloc(1, sizeof *pl);
	pl->nh = direct_halves(map, &pl->hs);
	int64_t panels = (pl->nh + 1) / 2;
	pl->sfirst = xmalloc(sizeof(int64_t) * (size_t)(panels + 1));
	/* runs are few per half (one, where output rows are 16 wide or more) */
	int64_t ns = 0, cap = 2 * pl->nh + NR;
	pl->seg = xmalloc(sizeof(DSeg) * (size_t)cap);
	for (int64_t q = 0; q < panels; q++) {
		if (cap - ns < NR)
			pl->seg = xreallocarray(pl->seg, (size_t)(cap *= 2), sizeof(DSeg));
		pl->sfirst[q] = ns;
		ns = direct_segs(map, pl->hs[2 * q], 0, pl->seg, ns);
		if (2 * q + 1 < pl->nh)
			ns = direct_segs(map, pl->hs[2 * q + 1], HALF, pl->seg, ns);
	}
	pl->sfirst[panels] = ns;
	return pl;
}

int64_t fgemm_direct_cols(const FgemmDirectPlan *pl)
{
	return (pl->nh + 1) / 2 * NR;
}

void fgemm_direct_plan_free(FgemmDirectPlan *pl)
{
	if (pl) {
		free(pl->hs);
		free(pl->sfirst);
		free(pl->seg);
		free(pl);
	}
}

#ifdef HAVE_AVX512
/* rows of b prefetched this many ahead */
#define DIRECT_PF 8

/* kernel_body with row kk of the panel's halves at b0 + off[kk] and
 * b1 + off[kk] (HALF columns each, read in place) and, when acc, the sums
 * carried on from t: the sum over k stays one chain per element across
 * blocks of k. Rows below pfn are prefetched (the first strip over a
 * block; the others find them in cache). */
AVX512 static void kernel_offs(int64_t kc, const float *ap, const float *b0p, const float *b1p, const int64_t *off,
			       float *t, int acc, int64_t pfn)
{
	__m512 c00, c01, c10, c11, c20, c21, c30, c31, c40, c41, c50, c51;
	__m512 c60, c61, c70, c71, c80, c81, c90, c91, ca0, ca1, cb0, cb1;
#define IN(i, r0, r1)                                                            \
	r0 = acc ? _mm512_loadu_ps(t + (i) * NR) : _mm512_setzero_ps();          \
	r1 = acc ? _mm512_loadu_ps(t + (i) * NR + 16) : _mm512_setzero_ps();
	IN(0, c00, c01) IN(1, c10, c11) IN(2, c20, c21) IN(3, c30, c31)
	IN(4, c40, c41) IN(5, c50, c51) IN(6, c60, c61) IN(7, c70, c71)
	IN(8, c80, c81) IN(9, c90, c91) IN(10, ca0, ca1) IN(11, cb0, cb1)
#undef IN
	for (int64_t kk = 0; kk < kc; kk++, ap += MR) {
		if (kk + DIRECT_PF < pfn) {  /* rows far apart: no hardware prefetch */
			_mm_prefetch((const char *)(b0p + off[kk + DIRECT_PF]), _MM_HINT_T0);
			_mm_prefetch((const char *)(b1p + off[kk + DIRECT_PF] + HALF - 1), _MM_HINT_T0);
		}
		__m512 b0 = _mm512_loadu_ps(b0p + off[kk]), b1 = _mm512_loadu_ps(b1p + off[kk]), x;
#define ROW(i, r0, r1)                                   \
		x = _mm512_set1_ps(ap[i]);               \
		r0 = _mm512_fmadd_ps(x, b0, r0);         \
		r1 = _mm512_fmadd_ps(x, b1, r1);
		ROW(0, c00, c01) ROW(1, c10, c11) ROW(2, c20, c21) ROW(3, c30, c31)
		ROW(4, c40, c41) ROW(5, c50, c51) ROW(6, c60, c61) ROW(7, c70, c71)
		ROW(8, c80, c81) ROW(9, c90, c91) ROW(10, ca0, ca1) ROW(11, cb0, cb1)
#undef ROW
	}
#define OUT(i, r0, r1)                                           \
	_mm512_storeu_ps(t + (i) * NR, r0);                      \
	_mm512_storeu_ps(t + (i) * NR + 16, r1);
	OUT(0, c00, c01) OUT(1, c10, c11) OUT(2, c20, c21) OUT(3, c30, c31)
	OUT(4, c40, c41) OUT(5, c50, c51) OUT(6, c60, c61) OUT(7, c70, c71)
	OUT(8, c80, c81) OUT(9, c90, c91) OUT(10, ca0, ca1) OUT(11, cb0, cb1)
#undef OUT
}

/* d[0, n) = s[0, n) for n <= NR: inline overlapping 16-, 8- and 4-float
 * moves rather than a libc call per run (runs are an output row's width) */
AVX512 static inline __attribute__((always_inline)) void copy_short(float *d, const float *s, int64_t n)
{
	if (n >= 16) {
		_mm512_storeu_ps(d, _mm512_loadu_ps(s));
		if (n > 16)
			_mm512_storeu_ps(d + n - 16, _mm512_loadu_ps(s + n - 16));
	} else if (n >= 8) {
		_mm256_storeu_ps(d, _mm256_loadu_ps(s));
		_mm256_storeu_ps(d + n - 8, _mm256_loadu_ps(s + n - 8));
	} else if (n >= 4) {
		_mm_storeu_ps(d, _mm_loadu_ps(s));
		_mm_storeu_ps(d + n - 4, _mm_loadu_ps(s + n - 4));
	} else {
		for (int64_t j = 0; j < n; j++)
			d[j] = s[j];
	}
}

/* kernel_offs on a strip of MR8 rows */
AVX512 static void kernel_offs8(int64_t kc, const float *ap, const float *b0p, const float *b1p, const int64_t *off,
				float *t, int acc, int64_t pfn)
{
	__m512 c00, c01, c10, c11, c20, c21, c30, c31, c40, c41, c50, c51, c60, c61, c70, c71;
#define IN(i, r0, r1)                                                            \
	r0 = acc ? _mm512_loadu_ps(t + (i) * NR) : _mm512_setzero_ps();          \
	r1 = acc ? _mm512_loadu_ps(t + (i) * NR + 16) : _mm512_setzero_ps();
	IN(0, c00, c01) IN(1, c10, c11) IN(2, c20, c21) IN(3, c30, c31)
	IN(4, c40, c41) IN(5, c50, c51) IN(6, c60, c61) IN(7, c70, c71)
#undef IN
	for (int64_t kk = 0; kk < kc; kk++, ap += MR8) {
		if (kk + DIRECT_PF < pfn) {
			_mm_prefetch((const char *)(b0p + off[kk + DIRECT_PF]), _MM_HINT_T0);
			_mm_prefetch((const char *)(b1p + off[kk + DIRECT_PF] + HALF - 1), _MM_HINT_T0);
		}
		__m512 b0 = _mm512_loadu_ps(b0p + off[kk]), b1 = _mm512_loadu_ps(b1p + off[kk]), x;
#define ROW(i, r0, r1)                                   \
		x = _mm512_set1_ps(ap[i]);               \
		r0 = _mm512_fmadd_ps(x, b0, r0);         \
		r1 = _mm512_fmadd_ps(x, b1, r1);
		ROW(0, c00, c01) ROW(1, c10, c11) ROW(2, c20, c21) ROW(3, c30, c31)
		ROW(4, c40, c41) ROW(5, c50, c51) ROW(6, c60, c61) ROW(7, c70, c71)
#undef ROW
	}
#define OUT(i, r0, r1)                                           \
	_mm512_storeu_ps(t + (i) * NR, r0);                      \
	_mm512_storeu_ps(t + (i) * NR + 16, r1);
	OUT(0, c00, c01) OUT(1, c10, c11) OUT(2, c20, c21) OUT(3, c30, c31)
	OUT(4, c40, c41) OUT(5, c50, c51) OUT(6, c60, c61) OUT(7, c70, c71)
#undef OUT
}

/* rows [0, mr) of tile t plus bias, plus ad (laid out as c, or NULL),
 * clamped, stored through the runs: whole halves straight from the
 * registers, others through t */
AVX512 static void tile_store_segs(float *t, int64_t mr, const DSeg *seg, int64_t ns, float *c, int64_t ldc,
				   const float *rb, const float *ad, const float *cl)
{
	__m512 lo = _mm512_set1_ps(cl ? cl[0] : 0), hi = _mm512_set1_ps(cl ? cl[1] : 0);
	int whole = 1;
	for (int64_t s = 0; s < ns; s++)
		whole &= seg[s].len == HALF && seg[s].at % HALF == 0;
	for (int64_t i = 0; i < mr; i++) {
		float *tr = t + i * NR, *cr = c + i * ldc;
		const float *ar = ad ? ad + i * ldc : NULL;
		__m512 v0 = _mm512_loadu_ps(tr), v1 = _mm512_loadu_ps(tr + 16);
		if (rb) {
			v0 = _mm512_add_ps(v0, _mm512_set1_ps(rb[i]));
			v1 = _mm512_add_ps(v1, _mm512_set1_ps(rb[i]));
		}
		if (whole) {
			for (int64_t s = 0; s < ns; s++) {
				__m512 v = seg[s].at ? v1 : v0;
				if (ar)
					v = _mm512_add_ps(v, _mm512_loadu_ps(ar + seg[s].dst));
				if (cl)   /* as tile_store: v on equality and NaN */
					v = _mm512_min_ps(hi, _mm512_max_ps(lo, v));
				_mm512_storeu_ps(cr + seg[s].dst, v);
			}
			continue;
		}
		if (cl && !ar) {
			v0 = _mm512_min_ps(hi, _mm512_max_ps(lo, v0));
			v1 = _mm512_min_ps(hi, _mm512_max_ps(lo, v1));
		}
		_mm512_storeu_ps(tr, v0);
		_mm512_storeu_ps(tr + 16, v1);
		for (int64_t s = 0; s < ns; s++) {
			if (!ar) {
				copy_short(cr + seg[s].dst, tr + seg[s].at, seg[s].len);
				continue;
			}
			for (int64_t j = 0; j < seg[s].len; j++) {
				float v = tr[seg[s].at + j] + ar[seg[s].dst + j];
				cr[seg[s].dst + j] = cl ? clamp1(v, cl) : v;
			}
		}
	}
}

/* panels per group of direct_cols: one, while the packed weights fit
 * about half of an L2 cache (they are read once per panel); else as many
 * as keep the group's rows of b (k x NR floats each) within that, so each
 * strip of a is read once per group rather than once per panel (magika's
 * 2.6 MB of packed weights did not fit L2) */
#define DIRECT_GROUP_MAX 8
#define DIRECT_GROUP_BYTES (512 * 1024)
/* tiles carried at once, and rows of k per block: a block's rows of b for
 * one panel (DIRECT_KC x NR floats, 16 KiB) stay in the L1 cache while
 * every strip of a runs over them */
#define DIRECT_TILES 16
#define DIRECT_KC 128

/* panels [plo, phi) of a Direct product: per group of panels, per run of
 * strips of a, per block of k, the tile of each strip and panel (its sums
 * carried in tt from block to block: one chain per element) */
AVX512 static void direct_cols(void *arg, int64_t plo, int64_t phi)
{
	const Direct *g = arg;
	const FgemmA *pa = g->pa;
	const FgemmDirectPlan *pl = g->pl;
	float tt[DIRECT_TILES][MR * NR] __attribute__((aligned(64)));
	const DSeg *seg[DIRECT_GROUP_MAX];
	int64_t ns[DIRECT_GROUP_MAX];
	int64_t pg = DIRECT_GROUP_BYTES / (pa->k * NR * (int64_t)sizeof(float));
	if (pa->mpad * pa->k * (int64_t)sizeof(float) <= DIRECT_GROUP_BYTES)
		pg = 1;
	pg = pg < 1 ? 1 : pg > DIRECT_GROUP_MAX ? DIRECT_GROUP_MAX : pg;
	int64_t strips = pa->mpad / pa->mr, sc = DIRECT_TILES / pg;
	for (int64_t g0 = plo; g0 < phi; g0 += pg) {
		int64_t gn = phi - g0 < pg ? phi - g0 : pg, any = 0;
		const float *bh[DIRECT_GROUP_MAX][2];
		for (int64_t q = 0; q < gn; q++) {
			int64_t h0 = 2 * (g0 + q), h1 = h0 + 1 < pl->nh ? h0 + 1 : h0;
			seg[q] = pl->seg + pl->sfirst[g0 + q];
			ns[q] = pl->sfirst[g0 + q + 1] - pl->sfirst[g0 + q];
			bh[q][0] = g->b + pl->hs[h0];
			bh[q][1] = g->b + pl->hs[h1];
			any |= ns[q];
		}
		if (!any)
			continue;
		for (int64_t s0 = 0; s0 < strips; s0 += sc) {
			int64_t s1 = s0 + sc < strips ? s0 + sc : strips;
			for (int64_t k0 = 0; k0 < pa->k; k0 += DIRECT_KC) {
				/* the packed block of KC rows holding k0 */
				int64_t kb = k0 / KC * KC, kcb = pa->k - kb < KC ? pa->k - kb : KC;
				int64_t kc = kb + kcb - k0 < DIRECT_KC ? kb + kcb - k0 : DIRECT_KC;
				for (int64_t st = s0; st < s1; st++) {
					const float *ap = pa->p + pa->mpad * kb + st * pa->mr * kcb + (k0 - kb) * pa->mr;
					for (int64_t q = 0; q < gn; q++) {
						float *t = tt[(st - s0) * gn + q];
						if (ns[q] == 0)
							continue;
						if (pa->mr == MR8)
							kernel_offs8(kc, ap, bh[q][0], bh[q][1], g->off + k0, t, k0 > 0,
								     st == s0 ? kc : 0);
						else
							kernel_offs(kc, ap, bh[q][0], bh[q][1], g->off + k0, t, k0 > 0,
								    st == s0 ? kc : 0);
					}
				}
			}
			for (int64_t st = s0; st < s1; st++) {
				int64_t ir = st * pa->mr, mr = pa->m - ir < pa->mr ? pa->m - ir : pa->mr;
				for (int64_t q = 0; q < gn; q++)
					if (ns[q])
						tile_store_segs(tt[(st - s0) * gn + q], mr, seg[q], ns[q], g->c + ir * g->ldc,
								g->ldc, g->bias ? g->bias + ir : NULL,
								g->add ? g->add + ir * g->ldc : NULL, g->clamp);
			}
		}
	}
}

void fgemm_packed_direct(const FgemmA *a, const float *b, const int64_t *off, const FgemmDirectPlan *pl,
			 const float *bias, const float *add, const float *clamp, float *c, int64_t ldc, int threads)
{
	int64_t panels = (pl->nh + 1) / 2;
	Direct g = {a, b, off, pl, bias, add, clamp, c, ldc};
	if (threads > 1 && 2 * a->m * panels * NR * a->k < (int64_t)threads * 4000000)
		threads = 1;
	nn_parallel(threads, panels, direct_cols, &g);
}
#else
void fgemm_packed_direct(const FgemmA *a, const float *b, const int64_t *off, const FgemmDirectPlan *pl,
			 const float *bias, const float *add, const float *clamp, float *c, int64_t ldc, int threads)
{
	/* portable: fgemm_available() is 0 here, so this only keeps the file
	 * complete; one chain per element like the AVX-512 version */
	(void)threads;
	for (int64_t q = 0; q < (pl->nh + 1) / 2; q++) {
		const DSeg *seg = pl->seg + pl->sfirst[q];
		int64_t ns = pl->sfirst[q + 1] - pl->sfirst[q];
		for (int64_t s = 0; s < ns; s++) {
			int64_t j0 = pl->hs[2 * q + seg[s].at / HALF] - seg[s].at / HALF * HALF;
			for (int64_t i = 0; i < a->m; i++)
				for (int64_t j = 0; j < seg[s].len; j++) {
					float acc = 0.0f;
					for (int64_t kk = 0; kk < a->k; kk++) {
						int64_t kb = kk / KC * KC, kc = a->k - kb < KC ? a->k - kb : KC;
						acc += a->p[a->mpad * kb + i / a->mr * a->mr * kc + (kk - kb) * a->mr +
							    i % a->mr] *
						       b[off[kk] + j0 + seg[s].at + j];
					}
					float v = bias ? acc + bias[i] : acc;
					v = add ? v + add[i * ldc + seg[s].dst + j] : v;
					if (clamp)
						v = v < clamp[0] ? clamp[0] : v > clamp[1] ? clamp[1] : v;
					c[i * ldc + seg[s].dst + j] = v;
				}
		}
	}
}
#endif
