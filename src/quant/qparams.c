/* qparams.c — scale and zero-point arithmetic (see qparams.h). */
#include "quant/qparams.h"

#include <float.h>
#include <math.h>

#include "onnx/model.h"

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

void quantize_values(const float *x, size_t n, const QParams *p, int qmin, int qmax, void *out)
{
	for (size_t i = 0; i < n; i++) {
		double q = nearbyintf(x[i] / p->scale) + (double)p->zero_point;
		q = q < qmin ? qmin : q > qmax ? qmax : q;
		if (p->dtype == DT_INT8)
			((int8_t *)out)[i] = (int8_t)q;
		else if (p->dtype == DT_UINT8)
			((uint8_t *)out)[i] = (uint8_t)q;
		else if (p->dtype == DT_INT16)
			((int16_t *)out)[i] = (int16_t)q;
		else if (p->dtype == DT_UINT16)
			((uint16_t *)out)[i] = (uint16_t)q;
		else
			((int32_t *)out)[i] = (int32_t)q;
	}
}
