/* cvpack.h — the weights of conv.c's channel-vector product (conv_gemm_cv)
 * in their packed layout, and the comparison that lets interpreters side
 * by side share one pack (fgemm_pack_const). */
#ifndef QM_OPS_CVPACK_H
#define QM_OPS_CVPACK_H

#include <stdint.h>

/* output channels of a group rounded up to the vectors of 16 */
#define CV_MPAD(mg) (((mg) + 15) / 16 * 16)

/* the weights w ([m, kc]: M, C/G x kernel) of each of groups groups as
 * [groups][kc][CV_MPAD(m / groups)], a group's channels followed by zeros
 * (an FgemmPacker) */
void cv_pack(const float *w, int64_t m, int64_t kc, int64_t groups, float *wt);

/* whether wt holds cv_pack's bytes of w, compared as bits (a NaN's
 * payload, -0) and read only (an FgemmPackSame): 1 if so */
int cv_same(const float *w, int64_t m, int64_t kc, int64_t groups, const float *wt);

#endif
