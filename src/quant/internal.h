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
/* per node of g (freed by the caller): why it stays float as part of a
 * decomposed normalization or Gelu (patterns.c), or NULL */
const char **quant_float_patterns(const Onnx__GraphProto *g);
/* Sentinel ranges (transformer.c): every tensor of a graph whose
 * calibrated range reaches sentinel values (mask constants, the float
 * maximum), traced back to the values that carry information before the
 * rewrite changes the graph's inputs */
typedef struct QtRange {
	char *name;
	int how;           /* 1: lo, hi from the informative values; -1: none to tell, stays float */
	float lo, hi;
	char *note;        /* JSON members for quant.json */
} QtRange;
typedef struct QtRanges {
	QtRange *e;
	size_t n;
	StrMap softmax;    /* Softmax outputs (owned keys): quantized over [0, 1] */
} QtRanges;
void qt_ranges_init(QtRanges *r, Model *m, const Onnx__GraphProto *g, const CalibStats *s, const QuantOpts *o);
void qt_ranges_free(QtRanges *r);
/* The range to quantize activation name of graph g over: 0 from
 * calibration (qr_range), 1 from the values that carry information
 * (r), 2 a Softmax output's [0, 1]; -1 when sentinels reach it and no
 * such range can be told (it stays float). note gets the JSON members
 * quant.json shows on the tensor for 1, 2 and -1. */
int qt_act_range(const QtRanges *r, const Onnx__GraphProto *g, const CalibStats *s, const QuantOpts *o,
		 const char *name, float *lo, float *hi, StrBuf *note);
/* is name a float initializer holding a sentinel (magnitude 1e30 or
 * more, an infinity): quantizing it would turn it into another value */
int qt_sentinel_const(Model *m, const Onnx__GraphProto *g, const char *name);
/* per node of g (freed by the caller; NULL: none): why quantize.preset =
 * transformer keeps it float (LayerNorms, residual Adds, the Softmax and
 * its mask Add), given quant_float_patterns' answer; counts go to rep */
const char **qt_preset_float(const Onnx__GraphProto *g, const char **pattern, const QuantOpts *o, QuantReport *rep);
/* is op in the NULL-terminated list? */
int qc_in_list(const char *const *list, const char *op);

/* Quantize float initializer w per tensor (axis < 0) or along axis into
 * dtype; adds the three initializers and fills q. -1 with error() when w is
 * not float or axis is out of range. */
int qc_quant_weight(Model *m, Onnx__GraphProto *g, const Onnx__TensorProto *w, int dtype,
		    int symmetric, int reduce_range, int axis, QWeight *q);
/* the same for a 2-D w [N, K] stored transposed, [K, N] (Gemm's transB),
 * under base's names (base_quantized, base_scale, base_zero_point); axis
 * counts in the transposed shape. The float transpose is never made. */
int qc_quant_weight_transposed(Model *m, Onnx__GraphProto *g, const Onnx__TensorProto *w,
			       const char *base, int dtype, int symmetric, int reduce_range, int axis,
			       QWeight *q);
/* qc_quant_weight under the given initializer names */
int qc_quant_weight_named(Model *m, Onnx__GraphProto *g, const Onnx__TensorProto *w, const char *qname,
			  const char *sname, const char *zname, int dtype, int symmetric, int reduce_range,
			  int axis, QWeight *q);
/* qc_quant_weight (transposed: qc_quant_weight_transposed) under base's
 * names, for a model saved next (QuantOpts.save_next): when w's data is
 * external, the scales and zero points are computed now and the quantized
 * tensor is a model_defer shell whose bytes are made from w, read again,
 * while model_save writes them, so the rewrite never holds its results.
 * The same bytes either way. */
int qc_quant_weight_at_save(Model *m, Onnx__GraphProto *g, const Onnx__TensorProto *w, int transposed,
			    const char *base, int dtype, int symmetric, int reduce_range, int axis, QWeight *q);
/* add to g initializer name (dtype, dims) whose bytes fill(ud) makes while
 * m is saved (model_defer; done(ud) frees ud with the model) */
void qc_add_deferred(Model *m, Onnx__GraphProto *g, const char *name, int dtype, int rank, const int64_t *dims,
		     TensorFill fill, void (*done)(void *ud), void *ud);
/* a deep copy of t (for an external tensor, its reference: no data) */
Onnx__TensorProto *qc_proto_copy(const Onnx__TensorProto *t);
void qc_weight_free(QWeight *q);

/* A float initializer's values read where they lie when they can be (raw
 * data or mapped external data, 4-byte aligned), else from a copy; for
 * converters that read each big weight once. */
typedef struct FloatView {
	const float *x;
	int64_t numel;
	void *own;            /* the copy, or NULL */
	const void *mapped;   /* external bytes to give back when done */
	size_t len;
} FloatView;
/* -1 with error() naming w when it is not float or its data is bad */
int qc_float_view(Model *m, const Onnx__TensorProto *w, FloatView *v);
/* give back the mapped source of elements [from, to) of v, read for the
 * last time (a no-op unless the data is external) */
void qc_float_drop(const FloatView *v, int64_t from, int64_t to);
/* free the copy; the pages of mapped external data go back to the file
 * (ext_release), so converting a big model holds one source tensor */
void qc_float_done(FloatView *v);
/* a new raw_data TensorProto named name that takes over t's owned data
 * (no copy; t is left empty) */
Onnx__TensorProto *qc_proto_take(Tensor *t, const char *name);
/* add n zero points of dtype (8, 16 or 32 bits) as initializer name */
void qc_add_zp(Onnx__GraphProto *g, const char *name, int dtype, int rank, const int64_t *dims,
	       const int32_t *zps, int64_t n);

/* quantize.per-channel: does weight w (its output channels on axis, -1:
 * none) get one scale per channel? Under auto, when with one 8-bit scale
 * its channels keep less than PC_AUTO_DB of their signal on average (the
 * mean of each channel's SQNR) and per-channel scales keep more; each
 * decision goes to rep. 1, 0, or -1 (error) */
#define PC_AUTO_DB 30.0
int qc_per_channel(Model *m, const QuantOpts *o, QuantReport *rep, const Onnx__TensorProto *w, int axis);
void qc_report_node(QuantReport *rep, const Onnx__NodeProto *n, const char *status, const char *reason);
/* the same for node n of subgraph scope: named "scope/name" in quant.json */
void qc_report_node_in(QuantReport *rep, const char *scope, const Onnx__NodeProto *n, const char *status,
		       const char *reason);
/* every node of g and of its subgraphs, in scope, "skipped" for why */
void qc_report_skipped(QuantReport *rep, const Onnx__GraphProto *g, const char *scope, const char *why);
/* whether calibration ran subgraph g (s holds one of its inputs or node
 * outputs): a branch never taken has no statistics */
int qc_body_ran(const CalibStats *s, const Onnx__GraphProto *g);
void qc_report_tensor(QuantReport *rep, const char *name, int dtype, int64_t n, const float *scales,
		      const int32_t *zps, int axis);
/* add JSON members (text: "key": value, ...) to the entry qc_report_tensor
 * just wrote */
void qc_report_extra(QuantReport *rep, const char *members);
/* a tensor entry of an activation left float, with JSON members */
void qc_report_float(QuantReport *rep, const char *name, const char *members);
/* add to the entry qc_report_tensor just wrote the names the rewrite gave
 * its tensor: quantized, scale, zero point and dequantized (NULL: none) */
void qc_report_names(QuantReport *rep, const char *q, const char *s, const char *z, const char *dq);

#endif
