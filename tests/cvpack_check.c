/* cvpack_check.c — the channel-vector weights of src/ops/cvpack.c on
 * their own (run by tests/t_interp_cvshare.sh, with AddressSanitizer and
 * UBSan when the compiler has them): cv_pack against the documented
 * layout, cv_same against it (the same bytes; one float changed anywhere,
 * a -0 for a +0, another NaN payload, a padding lane not zero), and
 * fgemm_pack_const sharing a pack through cv_same only while the source's
 * bytes are those it was made from. Prints PASS/FAIL lines. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/cvpack.h"
#include "ops/fgemm.h"
#include "util.h"

/* what fgemm.c takes from the rest of quantmake: tests/lib/fgemm_stubs.c, and */
int cpu_avx512f(void)
{
	return 0;
}


static int failed;

static void report(const char *name, int ok, const char *why)
{
	if (ok) {
		printf("PASS: cvpack %s\n", name);
	} else {
		printf("FAIL: cvpack %s: %s\n", name, why);
		failed = 1;
	}
}

static uint32_t rnd_state = 4242;
static float rnd(void)
{
	rnd_state = rnd_state * 1664525u + 1013904223u;
	return (float)(rnd_state >> 8) / (float)(1u << 24) - 0.5f;
}

/* the layout: per group, per kk, the group's mg channels then zeros to a
 * multiple of 16 */
static void want(const float *w, int64_t m, int64_t kc, int64_t groups, float *wt)
{
	int64_t mg = m / groups, mpad = (mg + 15) / 16 * 16;
	memset(wt, 0, sizeof(float) * (size_t)(groups * kc * mpad));
	for (int64_t g = 0; g < groups; g++)
		for (int64_t i = 0; i < mg; i++)
			for (int64_t kk = 0; kk < kc; kk++)
				wt[(g * kc + kk) * mpad + i] = w[(g * mg + i) * kc + kk];
}

static void set_bits(float *f, uint32_t u)
{
	memcpy(f, &u, sizeof u);
}

/* one shape: pack, compare, then every kind of one-float change */
static void check_shape(int64_t m, int64_t kc, int64_t groups)
{
	int64_t mg = m / groups, mpad = (mg + 15) / 16 * 16, nw = m * kc;
	size_t floats = (size_t)(groups * kc * mpad);
	float *w = xmalloc(sizeof(float) * (size_t)nw), *wt = xmalloc(sizeof(float) * floats),
	      *ref = xmalloc(sizeof(float) * floats);
	char name[128], why[160] = "";
	for (int64_t i = 0; i < nw; i++)
		w[i] = rnd();
	w[0] = 0.0f;     /* a +0 to turn into -0 below */
	cv_pack(w, m, kc, groups, wt);
	want(w, m, kc, groups, ref);
	snprintf(name, sizeof name, "m=%lld kc=%lld groups=%lld: layout", (long long)m, (long long)kc,
		 (long long)groups);
	report(name, !memcmp(wt, ref, sizeof(float) * floats), "bytes differ from the documented layout");
	int ok = cv_same(w, m, kc, groups, wt);
	/* one element changed at a time: first, last, middle, each group's
	 * last channel, as -0, as another NaN, as the next float */
	int64_t at[] = {0, nw - 1, nw / 2, (mg - 1) * kc + kc / 2, m > mg ? (2 * mg - 1) * kc : 0};
	for (size_t a = 0; ok && a < sizeof at / sizeof *at; a++)
		for (int kind = 0; ok && kind < 3; kind++) {
			float old = w[at[a]];
			if (kind == 0)
				set_bits(&w[at[a]], old == 0.0f ? 0x80000000u : 0x7fc00000u);
			else if (kind == 1)
				w[at[a]] = nextafterf(old, 1.0f);
			else
				set_bits(&w[at[a]], 0x7fc00001u);
			if (cv_same(w, m, kc, groups, wt)) {
				snprintf(why, sizeof why, "element %lld changed (kind %d) still compares equal",
					 (long long)at[a], kind);
				ok = 0;
			}
			memcpy(&w[at[a]], &old, sizeof old);
		}
	/* two NaNs of other payloads: the bits decide, not the values */
	if (ok) {
		set_bits(&w[nw / 3], 0x7fc00002u);
		cv_pack(w, m, kc, groups, wt);
		set_bits(&w[nw / 3], 0x7fc00003u);
		if (cv_same(w, m, kc, groups, wt)) {
			snprintf(why, sizeof why, "a NaN of another payload compares equal");
			ok = 0;
		}
		set_bits(&w[nw / 3], 0x7fc00002u);
		if (ok && !cv_same(w, m, kc, groups, wt)) {
			snprintf(why, sizeof why, "the same NaN bytes compare different");
			ok = 0;
		}
	}
	/* a padding lane not zero */
	if (ok && mpad > mg) {
		float keep = wt[floats - 1];
		wt[floats - 1] = 1.0f;
		if (cv_same(w, m, kc, groups, wt)) {
			snprintf(why, sizeof why, "a padding lane that is not zero compares equal");
			ok = 0;
		}
		wt[floats - 1] = keep;
	}
	snprintf(name, sizeof name, "m=%lld kc=%lld groups=%lld: cv_same tells every change", (long long)m,
		 (long long)kc, (long long)groups);
	report(name, ok && cv_same(w, m, kc, groups, wt), why[0] ? why : "the packed bytes compare different");
	free(w);
	free(wt);
	free(ref);
}

/* fgemm_pack_const through cv_same: shared while the bytes at the address
 * are the same, a new pack of the new bytes when they changed */
static void check_shared(void)
{
	int64_t m = 40, kc = 27, groups = 2, mg = m / groups, mpad = (mg + 15) / 16 * 16;
	size_t floats = (size_t)(groups * kc * mpad);
	float *w = xmalloc(sizeof(float) * (size_t)(m * kc)), *ref = xmalloc(sizeof(float) * floats);
	for (int64_t i = 0; i < m * kc; i++)
		w[i] = rnd();
	float *p1 = fgemm_pack_const(cv_pack, cv_same, floats, w, m, kc, groups);
	float *p2 = fgemm_pack_const(cv_pack, cv_same, floats, w, m, kc, groups);
	report("fgemm_pack_const: the same bytes at the same address share one pack", p1 == p2,
	       "a second pack was made");
	float keep = w[m * kc - 1];
	w[m * kc - 1] += 1.0f;   /* the last group's last channel */
	float *p3 = fgemm_pack_const(cv_pack, cv_same, floats, w, m, kc, groups);
	want(w, m, kc, groups, ref);
	report("fgemm_pack_const: other bytes at the same address get a pack of their own",
	       p3 != p1 && !memcmp(p3, ref, sizeof(float) * floats), "the pack of the old bytes was taken");
	w[m * kc - 1] = keep;
	want(w, m, kc, groups, ref);
	fgemm_free_packed(p1);
	report("fgemm_pack_const: a pack outlives all but its last user", !memcmp(p2, ref, sizeof(float) * floats),
	       "its bytes changed");
	fgemm_free_packed(p2);
	fgemm_free_packed(p3);
	free(w);
	free(ref);
}

int main(void)
{
	static const int64_t shapes[][3] = {
		{17, 1, 1}, {32, 9, 1}, {40, 27, 2}, {64, 288, 1}, {100, 3, 4}, {128, 387, 1}, {258, 256, 2},
	};
	for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++)
		check_shape(shapes[i][0], shapes[i][1], shapes[i][2]);
	check_shared();
	return failed;
}
