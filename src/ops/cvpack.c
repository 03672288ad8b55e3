/* cvpack.c — packing the channel-vector product's weights (see cvpack.h).
 *
 * cv_same reads the source against a live pack instead of packing it
 * again to compare: the second of calibration's interpreters made a whole
 * copy only to throw it away, and faulting in its fresh pages cost more
 * than the packing (silero-vad: cv_pack was 14% of planning and running a
 * sample, 42% of that in page faults). */
#include "ops/cvpack.h"

#include <string.h>

void cv_pack(const float *w, int64_t m, int64_t kc, int64_t groups, float *wt)
{
	int64_t mg = m / groups, mpad = CV_MPAD(mg);
	for (int64_t g = 0; g < groups; g++)
		for (int64_t kk = 0; kk < kc; kk++) {
			float *d = wt + (g * kc + kk) * mpad;
			for (int64_t i = 0; i < mpad; i++)
				d[i] = i < mg ? w[(g * mg + i) * kc + kk] : 0.0f;
		}
}

int cv_same(const float *w, int64_t m, int64_t kc, int64_t groups, const float *wt)
{
	static const float zero = 0.0f;
	int64_t mg = m / groups, mpad = CV_MPAD(mg);
	for (int64_t g = 0; g < groups; g++)
		for (int64_t i = 0; i < mpad; i++) {
			/* a row of w is a column of the pack: sequential reads
			 * of w, the pack's lines reused by the next 15 rows */
			const float *d = wt + g * kc * mpad + i, *s = i < mg ? w + (g * mg + i) * kc : NULL;
			for (int64_t kk = 0; kk < kc; kk++)
				if (memcmp(d + kk * mpad, s ? s + kk : &zero, sizeof(float)))
					return 0;
		}
	return 1;
}
