/* qparams.c — scale and zero-point arithmetic (see qparams.h). */
#include "quant/qparams.h"

#include <float.h>
#include <math.h>

#include "onnx/model.h"
#include "util.h"

void qrange(int dtype, int symmetric, int reduce_range, int *qmin, int *qmax)
{
	if (dtype == DT_INT8) {
		if (reduce_range) {
			*qmin = -64;
			*qmax = 64;
		} else {
			*qmin = symmetric ? -127 : -128;
			*qmax = 127;
		}
	} else if (dtype == DT_INT16) {
		*qmin = symmetric ? -32767 : -32768;
		*qmax = 32767;
	} else if (dtype == DT_UINT16) {
		*qmin = 0;
		*qmax = 65535;
	} else {
		*qmin = 0;
		*qmax = reduce_range ? 127 : 255;
	}
}

QParams qparams_compute(float rmin, float rmax, int dtype, int symmetric, int reduce_range)
{
	int qmin, qmax;
	qrange(dtype, symmetric, reduce_range, &qmin, &qmax);
	if (rmin > 0)
		rmin = 0;
	if (rmax < 0)
		rmax = 0;
	if (symmetric) {
		float a = fmaxf(fabsf(rmin), fabsf(rmax));
		rmin = -a;
		rmax = a;
	}
	QParams p = {.dtype = dtype};
	p.scale = (rmax - rmin) / (float)(qmax - qmin);
	if (symmetric)
		p.zero_point = (int32_t)nearbyint((qmax + qmin) / 2.0);
	if (!(p.scale >= FLT_MIN) || !isfinite(p.scale)) {
		p.scale = 1.0f;
		if (!symmetric)
			p.zero_point = 0;
		return p;
	}
	if (!symmetric) {
		double zp = nearbyint((double)qmin - (double)(rmin / p.scale));
		p.zero_point = (int32_t)(zp < qmin ? qmin : zp > qmax ? qmax : zp);
	}
	return p;
}

/* (quantize_values and its helper without trapping math: see there) */
#pragma GCC push_options
#pragma GCC optimize("no-trapping-math")

/* nearbyintf in the default rounding mode (to nearest, ties to even),
 * without libm's call that saves and restores the floating-point
 * environment: below 2^23 adding and taking back 2^23 rounds (the same
 * result for every float, checked exhaustively), above it every float is
 * an integer already. quantize_values spends most of its time here. */
static inline float round_even(float y)
{
	float a = fabsf(y), r = (a + 0x1p23f) - 0x1p23f;
	return copysignf(a < 0x1p23f ? r : a, y);
}

/* One loop per output type, so the type is not tested per value. In
 * float rather than double for 8 and 16 bits: a rounded value below 2^24
 * plus the zero point is exact in both, and anything bigger clamps to the
 * same bound (at most 65535). Written as blocks of 16 so that GCC's -O2
 * (very cheap) vectorizer takes them (the comparisons made selects, which
 * GCC does only without trapping math: no exception flag is ever read
 * here), with an AVX2 clone chosen where the program loads: every value
 * is its own IEEE operations either way (no FMA contraction in ISO C
 * mode), so the bytes are those of one value at a time. */
#define QP_CLONES QM_CLONES("avx2", "default")
#define QUANT_ONE(T, i) {                                                      \
		float q = round_even(x[i] / s) + zp;                           \
		q = q < lo ? lo : q;                                           \
		q = q > hi ? hi : q;                                           \
		((T *)out)[i] = (T)q;                                          \
	}
#define QUANT_LOOP(T) {                                                        \
		size_t i = 0;                                                  \
		for (; i + 16 <= n; i += 16)                                   \
			_Pragma("GCC ivdep")                                   \
			for (int j = 0; j < 16; j++)                           \
				QUANT_ONE(T, i + j)                            \
		for (; i < n; i++)                                             \
			QUANT_ONE(T, i)                                        \
	}

QP_CLONES void quantize_values(const float *x, size_t n, const QParams *p, int qmin, int qmax, void *out)
{
	float s = p->scale, zp = (float)p->zero_point, lo = (float)qmin, hi = (float)qmax;
	if (p->dtype == DT_INT8) {
		QUANT_LOOP(int8_t)
	} else if (p->dtype == DT_UINT8) {
		QUANT_LOOP(uint8_t)
	} else if (p->dtype == DT_INT16) {
		QUANT_LOOP(int16_t)
	} else if (p->dtype == DT_UINT16) {
		QUANT_LOOP(uint16_t)
	} else {
		/* int32: bounds past 2^24 would not survive float; double as ever */
		for (size_t i = 0; i < n; i++) {
			double q = round_even(x[i] / s) + (double)p->zero_point;
			q = q < qmin ? qmin : q > qmax ? qmax : q;
			((int32_t *)out)[i] = (int32_t)q;
		}
	}
}

#pragma GCC pop_options
#undef QUANT_LOOP
#undef QUANT_ONE
