/* range.h — the range an activation is quantized over: calib_range() on the
 * calibration statistics, after merging the stored histogram into
 * quantize.bins bins when the rule asks for fewer than were recorded. The
 * statistics stay as they are in the cache: only this choice changes, so
 * a new bins value reruns quantize, never calibrate. */
#ifndef QM_QUANT_RANGE_H
#define QM_QUANT_RANGE_H

#include "quant/calib.h"
#include "quant/quantize.h"

/* -1 with error() when o->bins cannot be made from s's histograms (more
 * bins than recorded, or not a divisor of their number) or o->method needs
 * histograms s lacks */
int qr_check(const CalibStats *s, const QuantOpts *o);
/* the range [lo, hi] o's method picks for t (qr_check passed) */
void qr_range(const CalibStats *s, const TensorStats *t, const QuantOpts *o, float *lo, float *hi);

#endif
