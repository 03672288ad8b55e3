/* fgemm.h — float32 matrix product for CPUs with AVX-512 (see fgemm.c).
 *
 * Debian's OpenBLAS 0.3.21 runs its AVX2 kernel on AMD Zen 4/5, whose
 * 512-bit units then idle; fgemm() uses them. Callers check
 * fgemm_available() and use cblas_sgemm otherwise. */
#ifndef QM_OPS_FGEMM_H
#define QM_OPS_FGEMM_H

#include <stddef.h>
#include <stdint.h>

/* the CPU runs AVX-512F (checked once) */
int fgemm_available(void);

/* c[m, n] = a[m, k] * b[k, n] + bias[m] + (beta ? c : 0), all row-major
 * with row strides lda, ldb, ldc; bias (one per row) may be NULL; beta is 0
 * or 1. The sum over k runs in the same order whatever threads is (threads
 * > 1 splits the columns), so results do not depend on the thread count.
 * Fewer than 16 columns are dot products of rows of a with columns of b.
 * Only when fgemm_available(). */
void fgemm(int64_t m, int64_t n, int64_t k, const float *a, int64_t lda, const float *b, int64_t ldb,
	   const float *bias, int beta, float *c, int64_t ldc, int threads);

/* a packed once, for several products with the same left operand */
typedef struct FgemmA {
	int64_t m, k, mpad;
	int64_t mr;               /* rows per packed strip */
	float *p;
	int shared;               /* made by fgemm_pack_a_const */
} FgemmA;

FgemmA *fgemm_pack_a(int64_t m, int64_t k, const float *a, int64_t lda);
/* fgemm_pack_a of a constant: while another pack of the same bytes made
 * by this function from the same address is alive (an interpreter of the
 * same model beside this one: calibration's workers), that one, else a new
 * one; either is read-only and freed by fgemm_free_a, the last user's call
 * freeing it */
FgemmA *fgemm_pack_a_const(int64_t m, int64_t k, const float *a, int64_t lda);
/* A constant packed in a layout of the caller's (conv.c's channel-vector
 * weights): the floats floats pack(src, rows, cols, ld, dst) writes, shared
 * between interpreters as fgemm_pack_a_const's packs are (while a pack of
 * the same packer, src, rows, cols and ld is alive and same(src, rows,
 * cols, ld, pack) says that the packer would make its bytes from src, that
 * one); read-only, freed by fgemm_free_packed, the last user's call
 * freeing it. same compares without writing anything: a fresh pack to
 * compare with cost its page faults per interpreter. */
typedef void (*FgemmPacker)(const float *src, int64_t rows, int64_t cols, int64_t ld, float *dst);
typedef int (*FgemmPackSame)(const float *src, int64_t rows, int64_t cols, int64_t ld, const float *packed);
float *fgemm_pack_const(FgemmPacker pack, FgemmPackSame same, size_t floats, const float *src, int64_t rows,
			int64_t cols, int64_t ld);
void fgemm_free_packed(float *p);
/* bytes of a packed [m, k] left operand */
size_t fgemm_packed_a_bytes(int64_t m, int64_t k);
void fgemm_free_a(FgemmA *pa);
/* fgemm() with a packed left operand */
void fgemm_packed(const FgemmA *a, int64_t n, const float *b, int64_t ldb, const float *bias, int beta, float *c,
		  int64_t ldc, int threads);

/* Panels of b made on demand (an implicit im2col, say): write rows
 * [k0, k0 + kc) and columns [j0, j0 + nc) of b to bp as FGEMM_NR-column
 * panels, bp[(j - j0) / FGEMM_NR][k - k0][(j - j0) % FGEMM_NR], the columns
 * of the last panel past nc zero. Called from several threads at once. */
#define FGEMM_NR 32
typedef void (*FgemmFill)(void *ctx, int64_t k0, int64_t kc, int64_t j0, int64_t nc, float *bp);
/* c[m, n] = a * b + bias[m] (bias may be NULL) with b from fill, each
 * result clamped as it is stored when clamp ({lo, hi}: v < lo ? lo : v,
 * then v > hi ? hi : v, as Clip does; NULL: none); buf: fgemm_buf_floats(n,
 * a->k) floats of scratch for a call that stays in this thread (for
 * callers that run their own threads), or NULL: fgemm's own (op_scratch()
 * or the calling thread's), and up to threads threads */
void fgemm_packed_fill(const FgemmA *a, int64_t n, FgemmFill fill, void *ctx, const float *bias,
		       const float *clamp, float *c, int64_t ldc, int threads, float *buf);
size_t fgemm_buf_floats(int64_t n, int64_t k);

/* The right operand read in place: row kk of b is b + off[kk] (a padded,
 * phase-split input image: a direct convolution), its n columns the
 * positions p = (d * hq + h) * wq + w of an output grid. A grid row holds
 * wq / iw images side by side, iw columns apart: column w is image w / iw,
 * column w % iw of it. Only columns w % iw < ow of images w / iw < wq / iw
 * in rows h < oh are kept, stored to c column
 * (w / iw) * istep + (d * oh + h) * ow + w % iw. Reads run up to
 * off[kk] + n + FGEMM_NR / 2. */
typedef struct FgemmMap {
	int64_t n, hq, wq, oh, ow;
	int64_t iw, istep;        /* one image: iw = wq (istep unused) */
} FgemmMap;
/* The panels of a direct product over map: made once for all the
 * products with the same grid (the images of a batch). Each panel is two
 * halves of FGEMM_NR / 2 grid columns, each starting at the first kept
 * column past the previous half, so padding columns between output rows
 * are mostly skipped. */
typedef struct FgemmDirectPlan FgemmDirectPlan;
FgemmDirectPlan *fgemm_direct_plan(const FgemmMap *map);
void fgemm_direct_plan_free(FgemmDirectPlan *pl);
/* columns the plan computes (kept ones and the padding it cannot skip):
 * to judge whether a direct product is worth it */
int64_t fgemm_direct_cols(const FgemmDirectPlan *pl);
/* c = a * b + bias[m] (bias may be NULL) + add (laid out as c; may be
 * NULL), clamped as fgemm_packed_fill does after the additions; each sum
 * over k runs in one fixed order whatever threads is */
void fgemm_packed_direct(const FgemmA *a, const float *b, const int64_t *off, const FgemmDirectPlan *pl,
			 const float *bias, const float *add, const float *clamp, float *c, int64_t ldc, int threads);

/* b packed once, for several products with the same right operand */
typedef struct FgemmB {
	int64_t k, n;
	int finite;               /* no infinity or NaN in b (a one-hot product may skip the zeros) */
	float *p;
	int shared;               /* made by fgemm_pack_b_const */
} FgemmB;

FgemmB *fgemm_pack_b(int64_t k, int64_t n, const float *b, int64_t ldb);
/* fgemm_pack_b of the transpose of bt ([n, k], row stride ldbt), read in
 * place: the same packed bytes and finite flag, without a transposed copy
 * (Gemm's transB = 1, nn.Linear's weights) */
FgemmB *fgemm_pack_bt(int64_t k, int64_t n, const float *bt, int64_t ldbt);
/* fgemm_pack_b (trans 0) or fgemm_pack_bt (trans 1, b being bt) of a
 * constant, shared as fgemm_pack_a_const's are */
FgemmB *fgemm_pack_b_const(int64_t k, int64_t n, const float *b, int64_t ldb, int trans);
/* bytes of a packed [k, n] right operand */
size_t fgemm_packed_b_bytes(int64_t k, int64_t n);
void fgemm_free_b(FgemmB *pb);
/* c[m, n] = a[m, k] * b (no bias, no accumulation). When b is finite and
 * k at least FGEMM_ONEHOT_K, the rows of a with at most one nonzero
 * element, a finite one (one-hot rows: an embedding written as Equal, Cast
 * and MatMul), are made from the row of b it picks, with the bytes the
 * blocked product gives, unless the first row of a, or over half of the
 * first 256, are not among them; QUANTMAKE_MATMUL_DENSE=1 always
 * multiplies in full (to compare). */
#define FGEMM_ONEHOT_K 64
void fgemm_packed_b(int64_t m, const float *a, int64_t lda, const FgemmB *b, float *c, int64_t ldc, int threads);

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

/* r[0, 16) transposed in registers: afterwards r[c] holds what was
 * column c (lane i of r[c] = lane c of the old r[i]); for AVX-512
 * functions (fgemm's packers, conv.c's channel-vector product) */
#define TR_PS(x) _mm512_castpd_ps(x)
#define TR_PD(x) _mm512_castps_pd(x)
__attribute__((target("avx512f"))) static inline __attribute__((always_inline)) void fgemm_transpose16(__m512 *r)
{
	__m512 t[16], u[16];
#pragma GCC unroll 16
	for (int i = 0; i < 16; i += 2) {
		t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
		t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
	}
#pragma GCC unroll 16
	for (int i = 0; i < 16; i += 4) {
		u[i] = TR_PS(_mm512_unpacklo_pd(TR_PD(t[i]), TR_PD(t[i + 2])));
		u[i + 1] = TR_PS(_mm512_unpackhi_pd(TR_PD(t[i]), TR_PD(t[i + 2])));
		u[i + 2] = TR_PS(_mm512_unpacklo_pd(TR_PD(t[i + 1]), TR_PD(t[i + 3])));
		u[i + 3] = TR_PS(_mm512_unpackhi_pd(TR_PD(t[i + 1]), TR_PD(t[i + 3])));
	}
#pragma GCC unroll 16
	for (int i = 0; i < 4; i++) {
		t[i] = _mm512_shuffle_f32x4(u[i], u[i + 4], 0x88);
		t[i + 4] = _mm512_shuffle_f32x4(u[i], u[i + 4], 0xdd);
		t[i + 8] = _mm512_shuffle_f32x4(u[i + 8], u[i + 12], 0x88);
		t[i + 12] = _mm512_shuffle_f32x4(u[i + 8], u[i + 12], 0xdd);
	}
#pragma GCC unroll 16
	for (int i = 0; i < 8; i++) {
		r[i] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0x88);
		r[i + 8] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0xdd);
	}
}
#undef TR_PS
#undef TR_PD
#endif

#endif
