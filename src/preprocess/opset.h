/* opset.h — preprocess.opset: upgrading a model's default-domain opset.
 *
 * Every node of the default domain (main graph and subgraphs) is stepped
 * through the versions its operator's schema went through between the
 * model's opset and the target (opset_table.c, generated from the ONNX
 * schemas). A version that only widened type constraints needs nothing; one
 * that changed attributes, inputs or outputs (OPH_SIG) or deprecated the
 * operator (OPH_DEP) needs an adapter in opset.c, which rewrites the node
 * (attributes into constant inputs, Softmax's 2-D coercion into
 * Flatten/Softmax/Reshape, Upsample into Resize, ...) or refuses with the
 * operator, node and reason. Downgrades are refused. */
#ifndef QM_PREPROCESS_OPSET_H
#define QM_PREPROCESS_OPSET_H

#include <stddef.h>
#include <stdint.h>

#include "infer/infer.h"
#include "onnx/model.h"

enum { OPH_SIG = 1, OPH_DEP = 2 };

typedef struct OpVer {
	uint8_t since, flags;     /* opset of this schema version, OPH_* */
} OpVer;

typedef struct OpHist {
	const char *op;
	uint8_t n;
	OpVer v[16];
} OpHist;

/* sorted by op name (opset_table.c) */
extern const OpHist opset_table[];
extern const size_t opset_table_len;

/* lowest and highest opset preprocess.opset converts to */
#define OPSET_MIN_TARGET 7
#define OPSET_MAX_TARGET INFER_MAX_OPSET

/* Upgrade m's default-domain opset to target (and its ir_version to one that
 * allows it); *changed counts the nodes rewritten. 0, or -1 after error()
 * ("preprocess.opset = N: operator X (node 'n') cannot be converted from
 * opset A: why"); m may then be half-converted and must be dropped. */
int prep_opset(Model *m, int64_t target, size_t *changed);

#endif
