/* fgemm_pack_check.c — the packers of src/ops/fgemm.c on their own (run by
 * tests/t_gemm_pack.sh, with AddressSanitizer and UBSan when the compiler
 * has them): fgemm_pack_b and fgemm_pack_bt (b given transposed, as Gemm's
 * transB = 1 holds it) against the documented panel layout, byte for
 * byte, and their finite flag, for k and n on either side of the panel
 * (32), register (16) and block (256 rows, 512 columns) sizes, with an
 * infinity or a NaN anywhere (in the last rows and columns too); and
 * fgemm_pack_a against its strip layout (rows of stride lda > k); the
 * packs of constants, shared while alive (fgemm_pack_*_const). The
 * thread pool and the interpreter's scratch are replaced by plain stand-ins
 * (the packers use neither). Prints PASS/FAIL/SKIP lines. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/fgemm.h"
#include "util.h"

/* what fgemm.c takes from the rest of quantmake: tests/lib/fgemm_stubs.c, and */
int cpu_avx512f(void)
{
#if defined(__x86_64__) && defined(__GNUC__)
	__builtin_cpu_init();
	return __builtin_cpu_supports("avx512f") ? 1 : 0;
#else
	return 0;
#endif
}


/* the layout fgemm.c packs b [k, n] into (row stride ldb): per block of
 * 512 columns, per block of 256 rows, panels of FGEMM_NR columns,
 * bp[panel][kk][j], columns past n zero */
#define KC 256
#define NC 512
static void want_b(int64_t k, int64_t n, const float *b, int64_t ldb, float *p)
{
	for (int64_t jb = 0; jb < n; jb += NC) {
		int64_t nb = n - jb < NC ? n - jb : NC, npad = (nb + FGEMM_NR - 1) / FGEMM_NR * FGEMM_NR;
		for (int64_t k0 = 0; k0 < k; k0 += KC) {
			int64_t kc = k - k0 < KC ? k - k0 : KC;
			float *bp = p + jb * k + npad * k0;
			for (int64_t j0 = 0; j0 < nb; j0 += FGEMM_NR, bp += FGEMM_NR * kc)
				for (int64_t kk = 0; kk < kc; kk++)
					for (int64_t j = 0; j < FGEMM_NR; j++)
						bp[kk * FGEMM_NR + j] =
							j0 + j < nb ? b[(k0 + kk) * ldb + jb + j0 + j] : 0.0f;
		}
	}
}

static int failed;

static void report(const char *name, int ok, const char *why)
{
	if (ok) {
		printf("PASS: fgemm pack %s\n", name);
	} else {
		printf("FAIL: fgemm pack %s: %s\n", name, why);
		failed = 1;
	}
}

static uint32_t rnd_state = 12345;
static float rnd(void)
{
	rnd_state = rnd_state * 1664525u + 1013904223u;
	return (float)(rnd_state >> 8) / (float)(1u << 24) - 0.5f;
}

/* fgemm_pack_b of b [k, n] (row stride n + pad) and fgemm_pack_bt of its
 * transpose (row stride k + pad), with bad (0: none) at row bk, column bj */
static void check_b(int64_t k, int64_t n, int64_t pad, float bad, int64_t bk, int64_t bj, int *nok, char *why,
		    size_t whylen)
{
	int64_t ldb = n + pad, ldt = k + pad;
	float *b = xmalloc(sizeof(float) * (size_t)(k * ldb)), *bt = xmalloc(sizeof(float) * (size_t)(n * ldt));
	for (int64_t i = 0; i < k * ldb; i++)
		b[i] = rnd();
	/* a NaN in the gaps between rows is not part of b */
	for (int64_t i = 0; i < k && pad; i++)
		b[i * ldb + n] = NAN;
	if (bad != 0.0f)
		b[bk * ldb + bj] = bad;
	for (int64_t i = 0; i < n * ldt; i++)
		bt[i] = NAN;
	for (int64_t kk = 0; kk < k; kk++)
		for (int64_t j = 0; j < n; j++)
			bt[j * ldt + kk] = b[kk * ldb + j];
	size_t bytes = fgemm_packed_b_bytes(k, n) - sizeof(float);   /* the last float is slack */
	float *want = xcalloc(1, bytes + sizeof(float));
	want_b(k, n, b, ldb, want);
	FgemmB *p1 = fgemm_pack_b(k, n, b, ldb), *p2 = fgemm_pack_bt(k, n, bt, ldt);
	int fin = bad == 0.0f;
	if (memcmp(p1->p, want, bytes))
		snprintf(why, whylen, "fgemm_pack_b k=%lld n=%lld: bytes differ from the layout", (long long)k,
			 (long long)n);
	else if (memcmp(p2->p, want, bytes))
		snprintf(why, whylen, "fgemm_pack_bt k=%lld n=%lld: bytes differ from the layout", (long long)k,
			 (long long)n);
	else if (p1->finite != fin || p2->finite != fin)
		snprintf(why, whylen, "k=%lld n=%lld, %s at [%lld, %lld]: finite flags %d and %d, expected %d",
			 (long long)k, (long long)n, bad == 0.0f ? "nothing" : isnan(bad) ? "NaN" : "infinity",
			 (long long)bk, (long long)bj, p1->finite, p2->finite, fin);
	else
		++*nok;
	fgemm_free_b(p1);
	fgemm_free_b(p2);
	free(want);
	free(b);
	free(bt);
}

static void check_a(int64_t m, int64_t k, int *nok, char *why, size_t whylen)
{
	int64_t lda = k + 5;
	float *a = xmalloc(sizeof(float) * (size_t)(m * lda));
	for (int64_t i = 0; i < m * lda; i++)
		a[i] = rnd();
	FgemmA *pa = fgemm_pack_a(m, k, a, lda);
	int ok = pa->m == m && pa->k == k && pa->mpad % pa->mr == 0 && pa->mpad >= m && pa->mpad < m + pa->mr;
	for (int64_t k0 = 0; ok && k0 < k; k0 += KC) {
		int64_t kc = k - k0 < KC ? k - k0 : KC;
		for (int64_t i = 0; i < pa->mpad; i++)
			for (int64_t kk = 0; kk < kc; kk++) {
				float w = i < m ? a[i * lda + k0 + kk] : 0.0f;
				const float *g = pa->p + pa->mpad * k0 + i / pa->mr * pa->mr * kc + kk * pa->mr + i % pa->mr;
				ok &= memcmp(&w, g, sizeof w) == 0;
			}
	}
	if (ok)
		++*nok;
	else
		snprintf(why, whylen, "fgemm_pack_a m=%lld k=%lld: bytes differ from the strip layout", (long long)m,
			 (long long)k);
	fgemm_free_a(pa);
	free(a);
}

/* the packs of constants (fgemm_pack_*_const): shared while alive when
 * made again from the same address and bytes, not when the bytes there
 * changed, nor across kinds; each freed with its last user (AddressSanitizer
 * sees any use after free) */
static void check_shared(void)
{
	int64_t k = 300, n = 300, m = 300;
	float *b = xmalloc(sizeof(float) * (size_t)(k * n)), *want = xcalloc(1, fgemm_packed_b_bytes(k, n));
	for (int64_t i = 0; i < k * n; i++)
		b[i] = rnd();
	FgemmB *p1 = fgemm_pack_b_const(k, n, b, n, 0), *p2 = fgemm_pack_b_const(k, n, b, n, 0);
	FgemmB *t1 = fgemm_pack_b_const(k, n, b, n, 1);
	FgemmA *a1 = fgemm_pack_a_const(m, k, b, n), *a2 = fgemm_pack_a_const(m, k, b, n);
	report("constants: the same bytes at the same address share one pack", p1 == p2 && a1 == a2,
	       "a second pack was made");
	report("constants: b and its transpose are packed apart", t1 != p1 && t1->p != p1->p,
	       "transB's pack was taken for b's");
	b[(k - 1) * n + n - 1] += 1.0f;   /* the last panel's last element */
	FgemmB *p3 = fgemm_pack_b_const(k, n, b, n, 0), *p4 = fgemm_pack_b_const(k, n, b, n, 0);
	FgemmB *t2 = fgemm_pack_b_const(k, n, b, n, 1);
	FgemmA *a3 = fgemm_pack_a_const(m, k, b, n);
	want_b(k, n, b, n, want);
	size_t bytes = fgemm_packed_b_bytes(k, n) - sizeof(float);
	report("constants: other bytes at the same address get a pack of their own",
	       p3 != p1 && t2 != t1 && a3 != a1 && p4 == p3 && !memcmp(p3->p, want, bytes) &&
		       a3->p[a3->mpad * 256 + (m - 1) / a3->mr * a3->mr * (k - 256) + (k - 257) * a3->mr +
			     (m - 1) % a3->mr] == b[(k - 1) * n + n - 1],
	       "the pack of the old bytes was taken");
	fgemm_free_b(p1);
	fgemm_free_b(t1);
	fgemm_free_a(a1);
	/* p2 and a2 are still in use: their bytes must be there */
	b[(k - 1) * n + n - 1] -= 1.0f;
	want_b(k, n, b, n, want);
	report("constants: a pack outlives all but its last user", !memcmp(p2->p, want, bytes), "its bytes changed");
	fgemm_free_b(p2);
	fgemm_free_a(a2);
	fgemm_free_b(p3);
	fgemm_free_b(p4);
	fgemm_free_b(t2);
	fgemm_free_a(a3);
	free(want);
	free(b);
}

int main(void)
{
	if (!fgemm_available()) {
		printf("SKIP: fgemm pack: the CPU has no AVX-512 (fgemm is not used)\n");
		return 0;
	}
	static const int64_t ks[] = {1, 3, 15, 16, 17, 31, 33, 255, 256, 257, 300, 3136};
	static const int64_t ns[] = {1, 10, 15, 16, 17, 31, 32, 33, 128, 511, 512, 513, 600};
	int nk = (int)(sizeof ks / sizeof *ks), nn = (int)(sizeof ns / sizeof *ns), n = 0, nok = 0;
	char why[256] = "";
	for (int i = 0; i < nk; i++)
		for (int j = 0; j < nn; j++) {
			int64_t k = ks[i], c = ns[j];
			check_b(k, c, 0, 0.0f, 0, 0, &nok, why, sizeof why);
			check_b(k, c, 3, 0.0f, 0, 0, &nok, why, sizeof why);
			n += 2;
			/* an infinity or a NaN first, last, or in the middle */
			const int64_t at[3][2] = {{0, 0}, {k - 1, c - 1}, {k / 2, c / 2}};
			for (int t = 0; t < 3; t++) {
				check_b(k, c, t, t == 1 ? -INFINITY : NAN, at[t][0], at[t][1], &nok, why, sizeof why);
				check_b(k, c, 0, t == 1 ? NAN : INFINITY, at[t][0], at[t][1], &nok, why, sizeof why);
				n += 2;
			}
		}
	report("b and bt: the panel layout and the finite flag", nok == n, why);
	static const int64_t ms[] = {1, 5, 8, 11, 12, 13, 16, 24, 32, 33, 64, 100, 128};
	n = nok = 0;
	for (size_t i = 0; i < sizeof ms / sizeof *ms; i++)
		for (int j = 0; j < nk; j++, n++)
			check_a(ms[i], ks[j], &nok, why, sizeof why);
	report("a: the strip layout", nok == n, why);
	check_shared();
	return failed;
}
