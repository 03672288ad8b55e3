/* string.h — string tensors in the kernels of other families. */
#ifndef QM_OPS_STRING_H
#define QM_OPS_STRING_H

#include "ops/op.h"

/* Cast / CastLike of c->in[0] to type `to` when either side is DT_STRING
 * (the caller checks): numbers print as the shortest decimal that reads
 * back to the same value (numpy's str()), strings parse as C's strtod /
 * strtoll do, whole. */
int string_cast(RunCtx *c, int to);

#endif
