/* qparams.h — scale and zero-point arithmetic, compatible with onnxruntime's
 * quantization tool (onnxruntime/quantization/quant_utils.py):
 *
 *   - the range [rmin, rmax] is widened to include 0;
 *   - symmetric: rmin = -max(|rmin|, |rmax|), rmax = -rmin, and the zero
 *     point is the middle of the integer range (0 for int8 -127..127, 128
 *     for uint8);
 *   - scale = (rmax - rmin) / (qmax - qmin) in float32; a scale below
 *     FLT_MIN (a constant-zero tensor) becomes 1 with zero point 0 (or the
 *     middle of the range when symmetric);
 *   - zero point = round_half_even(qmin - rmin / scale), clamped;
 *   - q = saturate(round_half_even(x / scale) + zero point).
 *
 * Integer ranges: int8 -128..127 (symmetric: -127..127), uint8 0..255;
 * reduce-range: int8 -64..64, uint8 0..127 (7 bits, for CPUs without VNNI);
 * int16 -32768..32767 (symmetric: -32767..32767), uint16 0..65535
 * (16-bit activations; reduce-range does not apply). */
#ifndef QM_QUANT_QPARAMS_H
#define QM_QUANT_QPARAMS_H

#include <stddef.h>
#include <stdint.h>

typedef struct QParams {
	float scale;
	int32_t zero_point;
	int dtype;    /* DT_INT8, DT_UINT8, DT_INT16, DT_UINT16 or DT_INT32 (bias) */
} QParams;

/* the integer range of dtype (8 or 16 bits) */
void qrange(int dtype, int symmetric, int reduce_range, int *qmin, int *qmax);
/* scale and zero point for values in [rmin, rmax] (see above) */
QParams qparams_compute(float rmin, float rmax, int dtype, int symmetric, int reduce_range);
/* quantize n floats x into out (int8_t, uint8_t, int16_t, uint16_t per
 * p->dtype, int32_t for DT_INT32); qmin/qmax saturate */
void quantize_values(const float *x, size_t n, const QParams *p, int qmin, int qmax, void *out);

#endif
