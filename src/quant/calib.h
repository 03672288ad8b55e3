/* calib.h — calibration statistics: stream samples through the interpreter
 * and record, for every float activation (main-graph inputs and node
 * outputs, and the inputs and node outputs of If/Loop/Scan bodies at any
 * depth, over every execution of the body), its element count, min, max and
 * a histogram. Tensors are keyed by name: ONNX names are unique across
 * scopes; a name some model defines in two scopes gets no statistics (the
 * tap cannot tell the two apart). A branch never taken has none either.
 *
 * One pass over the samples, one model plan. Besides the exact min and max,
 * each tensor gets a histogram of CALIB_BINS bins over a symmetric range
 * [-r, r), r the smallest power of two above the largest magnitude seen
 * (the entropy method then looks only at the bins the values reach, like
 * onnxruntime's histogram over [-max, max]), so percentile and entropy
 * ranges can be chosen later without the samples (statistics for the
 * minmax method skip the histograms, a third of a calibration's time on a
 * conv net: nbins is then 0). r doubles whenever a
 * value falls outside, merging pairs of bins, which is exact: the histogram
 * is the one a second pass over the final [-r, r) would give, whatever the
 * order of the samples and however they are grouped into batches. Memory
 * does not grow with the number of samples: taps update the statistics as
 * each tensor is produced. Non-finite values are counted apart and left out
 * of min, max and histogram.
 *
 * The statistics file (calib_save/calib_load), little-endian:
 *
 *   "QMCALIB2"  magic and version (8 bytes)
 *   u32 ntensors, u32 nbins, u64 nsamples
 *   ntensors times, in name order:
 *     u32 namelen, name bytes (no NUL), u64 count, u64 nonfinite,
 *     f32 min, f32 max, f64 r, u64 hist[nbins]
 * (nbins 0: min and max only, for the minmax method)
 */
#ifndef QM_QUANT_CALIB_H
#define QM_QUANT_CALIB_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "onnx/model.h"

#define CALIB_BINS 2048

typedef struct TensorStats {
	char *name;
	uint64_t count;      /* finite elements seen */
	uint64_t nonfinite;  /* NaN and infinities seen */
	float min, max;      /* over finite elements (0, 0 when count is 0) */
	double range;        /* r: the histogram covers [-r, r] (0: all zeros) */
	uint64_t *hist;      /* nbins counts */
} TensorStats;

typedef struct CalibStats {
	TensorStats *t;      /* sorted by name */
	size_t n;
	uint32_t nbins;      /* CALIB_BINS, or 0: no histograms (hist NULL) */
	uint64_t nsamples;
	const struct StrMap *index; /* while calib_collect runs: name -> index
				       in t (a tap looks up every tensor) */
} CalibStats;

/* Run every sample of specs (see samples_open) through m, the interpreter
 * on threads threads, with histograms when hist is set, samples stacked into batches where the model allows
 * (see calib.c; progress and the batching decision go to log, may be NULL).
 * Each sample must feed every model input with the declared element type
 * and a compatible shape; a mismatch is an error naming the sample, the
 * input and the expected type and shape. An empty set is an error. */
int calib_collect(Model *m, const char *const *specs, size_t nspecs, int threads, int hist, FILE *log,
		  CalibStats **out);
/* Checks that statistics can give every tensor a range: -1 with error()
 * naming the first tensor (model inputs first) that saw no finite value
 * at all, or whose finite values span more than a float can hold (a
 * scale would be infinite); a line on log (may be NULL) for each tensor
 * with some non-finite values, with their share (they are left out of
 * its range). */
int calib_check(const CalibStats *s, const Model *m, FILE *log);
void calib_free(CalibStats *s);
int calib_save(const CalibStats *s, const char *path);
int calib_load(const char *path, CalibStats **out);
/* the statistics of tensor name, or NULL */
const TensorStats *calib_find(const CalibStats *s, const char *name);

enum { CALIB_MINMAX, CALIB_PERCENTILE, CALIB_ENTROPY };
/* the range to quantize tensor t over (statistics without histograms give
 * min/max whatever the method): min/max; the central percentile
 * (e.g. 99.999: (100 - p) / 2 percent cut on each side); or the symmetric
 * threshold minimizing the KL divergence between the histogram and its
 * 128-level quantization (onnxruntime's and TensorRT's entropy method) */
void calib_range(const CalibStats *s, const TensorStats *t, int method, double percentile,
		 float *lo, float *hi);

#endif
