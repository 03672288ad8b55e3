/* internal.h — pieces shared by the static and dynamic rewrites (qdq.c,
 * dynamic.c), implemented in common.c. Not for use outside src/quant. */
#ifndef QM_QUANT_INTERNAL_H
#define QM_QUANT_INTERNAL_H

#include "quant/graph.h"
#include "quant/qparams.h"
#include "quant/quantize.h"

/* a quantized weight: its initializer names and parameters */
typedef struct QWeight {
	char *qname, *sname, *zname;  /* W_quantized, W_scale, W_zero_point */
	int64_t nch;                  /* 1 per tensor, else channels along axis */
	int axis;                     /* -1 per tensor */
	float *scales;                /* nch */
	int32_t *zps;                 /* nch */
	int dtype;
} QWeight;

/* -1 with error() when the model already holds quantized operators (in
 * the main graph or any subgraph) */
int qc_check_not_quantized(const Onnx__GraphProto *g);
/* -1 with error() when an exclude-nodes name is not a node of the graph or
 * of a subgraph (bare, or "If_0/then/name") or
 * an ops entry is not in supported (what names the mode) */
int qc_check_lists(const Onnx__GraphProto *g, const QuantOpts *o, const char *const *supported,
		   const char *what);
/* NULL when the node may be quantized, else why not (the user excluded it) */
const char *qc_excluded(const Onnx__NodeProto *n, const QuantOpts *o);
/* the same for node n of subgraph scope (qg_scope; NULL: the main graph):
 * an exclude-nodes entry names it bare or as "scope/name" */
const char *qc_excluded_in(const Onnx__NodeProto *n, const char *scope, const QuantOpts *o);
/* is op in the NULL-terminated list? */
int qc_in_list(const char *const *list, const char *op);

/* Quantize float initializer w per tensor (axis < 0) or along axis into
 * dtype; adds the three initializers and fills q. -1 with error() when w is
 * not float or axis is out of range. */
int qc_quant_weight(Model *m, Onnx__GraphProto *g, const Onnx__TensorProto *w, int dtype,
		    int symmetric, int reduce_range, int axis, QWeight *q);
void qc_weight_free(QWeight *q);
/* add n zero points of dtype (8, 16 or 32 bits) as initializer name */
void qc_add_zp(Onnx__GraphProto *g, const char *name, int dtype, int rank, const int64_t *dims,
	       const int32_t *zps, int64_t n);

void qc_report_node(QuantReport *rep, const Onnx__NodeProto *n, const char *status, const char *reason);
/* the same for node n of subgraph scope: named "scope/name" in quant.json */
void qc_report_node_in(QuantReport *rep, const char *scope, const Onnx__NodeProto *n, const char *status,
		       const char *reason);
void qc_report_tensor(QuantReport *rep, const char *name, int dtype, int64_t n, const float *scales,
		      const int32_t *zps, int axis);

#endif
