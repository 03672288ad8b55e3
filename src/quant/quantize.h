/* quantize.h — rewriting a float ONNX model into a quantized one.
 *
 * Static (quant_static_qdq): activations get QuantizeLinear/DequantizeLinear
 * pairs with per-tensor scales from calibration statistics (calib.h); the
 * weights of Conv, Gemm and MatMul become quantized initializers followed by
 * DequantizeLinear (per tensor, or per output channel); the bias of Conv and
 * Gemm (and of MatMul + Add) becomes int32 with scale = input scale x weight
 * scale; Relu and Clip
 * after a quantized node are folded into that node's output range.
 *
 * Dynamic (quant_dynamic): the weights of MatMul, Gemm and Conv are
 * quantized offline; activations are quantized at run time in QOperator
 * form: DynamicQuantizeLinear + MatMulInteger/ConvInteger + Cast + scale
 * multiply (+ bias Add). ConvInteger gets uint8 weights, the only kind
 * onnxruntime executes.
 *
 * Weight-only (quant_weight_only, weightonly.c): blockwise 4/8-bit weights
 * of MatMul, Gemm and embedding Gathers, activations in float, as
 * com.microsoft MatMulNBits/GatherBlockQuantized or opset-21 blockwise
 * DequantizeLinear.
 *
 * Both refuse an already quantized model, check opsets, and record every
 * node (quantized, or skipped with the reason) and every scale and zero
 * point in a QuantReport for quant.json. Returns 0 or -1 after error(). */
#ifndef QM_QUANT_QUANTIZE_H
#define QM_QUANT_QUANTIZE_H

#include <stddef.h>

#include "onnx/model.h"
#include "quant/calib.h"
#include "strmap.h"
#include "util.h"

enum { QMODE_STATIC, QMODE_DYNAMIC, QMODE_FP16, QMODE_WEIGHT_ONLY };
enum { QFMT_QDQ, QFMT_QOPERATOR, QFMT_MATMULNBITS };
/* QuantOpts.wo_algorithm */
enum { WO_RTN, WO_HQQ };
/* names of what static QDQ adds: onnxruntime's (W_quantized, T_scale,
 * T_DequantizeLinear_Output ..., matched by its qdq_loss_debug) or compact
 * (a weight's DequantizeLinear output takes the weight's own name, an
 * activation's T_dq; scales, zero points and the Q/DQ links are numbered) */
enum { QNAMES_ORT, QNAMES_COMPACT };
/* QuantOpts.preset: what stays float on a transformer (transformer.c) */
enum { QPRESET_AUTO, QPRESET_TRANSFORMER, QPRESET_NONE };
enum { QPF_LAYERNORM = 1, QPF_RESIDUAL = 2, QPF_SOFTMAX = 4 };
/* "layernorm residual softmax" (any of them, space or comma separated)
 * into QPF_* bits; -1 with error() naming an unknown word */
int qt_float_parts(const char *list, int *bits);
/* QuantOpts.per_channel */
enum { PC_OFF, PC_ON, PC_AUTO };

typedef struct QuantOpts {
	int mode;                /* QMODE_* */
	int format;              /* QFMT_* (static, dynamic; weight-only: qdq or matmulnbits) */
	int weight_type;         /* DT_INT8 or DT_UINT8 */
	int act_type;            /* DT_UINT8, DT_INT8, DT_UINT16, DT_INT16 (static; 16-bit in QDQ only) */
	int act_symmetric;       /* symmetric activation ranges (static) */
	int per_channel;         /* PC_*: per tensor, per channel, or per weight by its error */
	int reduce_range;
	int method;              /* CALIB_* (static) */
	double percentile;       /* for CALIB_PERCENTILE */
	int bins;                /* histogram bins for percentile/entropy; 0: the statistics' own */
	int target_gpu;          /* quantize.target = gpu */
	int keep_io_types;       /* fp16: graph inputs and outputs stay float32 */
	int names;               /* QNAMES_* (static QDQ) */
	int preset;              /* QPRESET_* (static) */
	int preset_float;        /* QPF_* bits: what the transformer preset keeps float */
	int save_next;           /* the caller saves the model next and runs nothing on it
				    (the quantize stage): fp16 may convert external weights
				    while they are written (model_defer) */
	/* weight-only (weightonly.c): bits of the weights, of lm_head and of
	 * embeddings (0: float), block size, symmetric, WO_*; node_bits:
	 * "NAME=BITS" entries (BITS 4, 8 or float) */
	int wo_bits, wo_lm_head_bits, wo_embed_bits, wo_block, wo_symmetric, wo_algorithm;
	int threads;             /* threads weight-only may use (0: one) */
	PtrVec node_bits;
	/* op types to quantize (none: every supported one), op types and node
	 * names to leave in float; strings borrowed */
	PtrVec ops, exclude_ops, exclude_nodes;
} QuantOpts;

typedef struct QuantReport {
	StrBuf nodes;            /* JSON objects, comma-separated */
	StrBuf tensors;          /* JSON members "name": {...}, comma-separated */
	size_t nquantized, nskipped, nfolded;
	StrBuf auto_pc;          /* per-channel = auto: JSON objects, one per weight decided */
	size_t nauto_pc;         /* weights auto made per channel */
	StrMap auto_seen;        /* weight name -> 1 + its decision */
	size_t preset_graphs;    /* graphs the transformer preset applied to, and what it kept float: */
	size_t preset_ln, preset_residual, preset_softmax, preset_mask;
	size_t nsentinel;        /* activations whose range was taken past sentinels */
} QuantReport;

/* op types the static QDQ rewrite quantizes ("Conv Gemm ...") */
extern const char *const quant_static_ops[];
/* op types the dynamic rewrite quantizes */
extern const char *const quant_dynamic_ops[];

int quant_static_qdq(Model *m, const CalibStats *stats, const QuantOpts *o, QuantReport *rep);
int quant_static_qoperator(Model *m, const CalibStats *stats, const QuantOpts *o, QuantReport *rep);
int quant_dynamic(Model *m, const QuantOpts *o, QuantReport *rep);
/* op types the weight-only rewrite quantizes */
extern const char *const quant_weight_only_ops[];
/* blockwise 4/8-bit weights, float activations (quantize = weight-only),
 * see weightonly.c */
int quant_weight_only(Model *m, const QuantOpts *o, QuantReport *rep);
/* float32 -> float16 (quantize = fp16), see fp16.c */
int quant_fp16(Model *m, const QuantOpts *o, QuantReport *rep);
/* the rewrite o asks for (stats: calibration statistics, static only) */
int quant_model(Model *m, const CalibStats *stats, const QuantOpts *o, QuantReport *rep);

/* Expand the calls of model-local functions into the graph (quant_model()
 * does this first; calibration too, so that statistics carry the names the
 * rewrites look for), by the interpreter's own expansion
 * (src/exec/inline.c): body tensors and nodes are named CALL/name, and the
 * rewrites reach the layers inside (torch exports can hold every layer in
 * functions). When a function imports an opset other than the model's, its
 * nodes would change meaning at the model's opset: the calls stay, and stay
 * float (preprocess.opset converts such bodies first). The expanded model
 * has no functions left and is typed again. 1 if expanded, 0 if there was
 * nothing to expand, -1 after error(). */
int quant_expand_functions(Model *m);
void quant_report_free(QuantReport *rep);

#endif
