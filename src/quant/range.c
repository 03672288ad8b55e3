/* range.c — activation ranges with quantize.bins (see range.h).
 *
 * The stored histogram has s->nbins bins over [-r, r]; bins = s->nbins / f
 * bins over the same [-r, r] are the sums of f neighbours, which is exactly
 * the histogram a calibration with bins bins would have recorded (the edges
 * of the coarse bins are edges of the fine ones). The merged histogram goes
 * into a one-tensor CalibStats so calib_range() chooses as it always does. */
#include "quant/range.h"

#include <stdlib.h>

#include "util.h"

int qr_check(const CalibStats *s, const QuantOpts *o)
{
	if (o->method != CALIB_MINMAX && !s->nbins)
		return error("quantize.method = %s needs histograms, and these calibration statistics have none "
			     "(collected for quantize.method = minmax)",
			     o->method == CALIB_ENTROPY ? "entropy" : "percentile");
	if (!o->bins || o->method == CALIB_MINMAX)
		return 0;
	if (o->bins < 2 || (uint32_t)o->bins > s->nbins || s->nbins % (uint32_t)o->bins)
		return error("quantize.bins = %d: the calibration statistics have %u histogram bins; expected a divisor of %u",
			     o->bins, s->nbins, s->nbins);
	return 0;
}

void qr_range(const CalibStats *s, const TensorStats *t, const QuantOpts *o, float *lo, float *hi)
{
	if (!o->bins || (uint32_t)o->bins == s->nbins || o->method == CALIB_MINMAX) {
		calib_range(s, t, o->method, o->percentile, lo, hi);
		return;
	}
	uint32_t nb = (uint32_t)o->bins, f = s->nbins / nb;
	TensorStats m = *t;
	m.hist = xcalloc(nb, sizeof *m.hist);
	for (uint32_t b = 0; b < s->nbins; b++)
		m.hist[b / f] += t->hist[b];
	CalibStats cs = {.t = &m, .n = 1, .nbins = nb, .nsamples = s->nsamples};
	calib_range(&cs, &m, o->method, o->percentile, lo, hi);
	free(m.hist);
}
