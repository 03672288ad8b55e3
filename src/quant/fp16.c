/* fp16.c — float32 to float16 conversion (quantize = fp16).
 *
 * Every float32 tensor of the model becomes float16 — initializers, Constant
 * values, graph inputs and outputs, intermediate tensors, subgraph bodies —
 * except around nodes that must stay float32: op types whose float16 form
 * is wrong, missing from the spec, or refused by onnxruntime even with the
 * Casts it inserts around kernels it lacks (block_list below, checked over
 * ONNX's node tests; plus Scatter* with a reduction, and every operator
 * outside the default ONNX domain: ai.onnx.ml kernels take float32 only,
 * custom ops and model-local functions have no float16 contract we can
 * check), and the nodes the user keeps with quantize.exclude-ops /
 * exclude-nodes (or does not list in quantize.ops). With
 * quantize.keep-io-types the graph inputs and outputs stay float32 too.
 * Outputs whose type the op fixes (LayerNormalization's Mean and
 * InvStdDev) stay float32 in a converted node. Needs opset 6 (Cast's to
 * is a string before).
 *
 * Types are assigned, not guessed: each float tensor gets float16 when the
 * node producing it is converted and float32 when that node is kept (graph
 * inputs per keep-io-types; initializers and Constant outputs float16 when a
 * converted node reads them, else float32, so e.g. Resize scales keep their
 * exact value). A node that reads a tensor of the other type reads it
 * through a Cast; there is one Cast per tensor and type, placed right after
 * the tensor's producer and shared by every consumer, in subgraph bodies
 * too (ONNX names are unique across scopes, so a body reads the Cast of an
 * outer tensor by name). A graph output of the wrong type is renamed at its
 * producer and re-made under its own name by a Cast.
 *
 * Bodies of If/Loop/Scan are converted with their node: when the node is
 * converted its float inputs and outputs are float16, so are the body's
 * formal inputs and outputs, and the body's own nodes follow the same rules;
 * when it is kept, the whole body stays float32.
 *
 * Values: float_to_half rounds to nearest even. Finite values beyond
 * float16's largest finite value 65504 are clamped to +-65504 (counted as
 * "clamped" in quant.json) rather than becoming infinities; infinities and
 * NaN stay what they are. Non-zero values so small that they would round to
 * zero (|v| < 2^-25) become the smallest float16 subnormal of the same sign,
 * 2^-24 (counted as "raised"): like onnxconverter-common, whose min_positive_val
 * 1e-7 does the same, we never turn an epsilon into a zero divisor. Unlike
 * its max_finite_val of 1e4, we do not clamp values in (1e4, 65504]: they
 * are representable, and clamping them would change the model for no
 * reason.
 *
 * Dtype-carrying attributes follow their node: Cast's to, dtype of
 * EyeLike/Random*, output_datatype of the window functions and
 * MelWeightMatrix, ConstantOfShape's value. The type inference pass runs
 * before (every tensor needs a type) and after the rewrite (the result must
 * type-check), so an operator whose float16 form we got wrong is an error
 * naming the node, never a broken model. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "infer/infer.h"
#include "onnx/node.h"
#include "quant/internal.h"
#include "strmap.h"

/* op types kept float32 whatever the user says (below opset until, when
 * set), and why */
static const struct {
	const char *op, *why;
	int64_t until;
} block_list[] = {
	{"Celu", "float32-only in the ONNX spec", 0},
	{"CumSum", "a running sum over a whole axis overflows or drifts in float16", 0},
	{"EyeLike", "onnxruntime has no float16 EyeLike kernel", 0},
	{"IsInf", "float32/float64-only before opset 20", 20},
	{"MeanVarianceNormalization", "its function body adds a float32 epsilon", 0},
	{"MelWeightMatrix", "onnxruntime cannot run its float16 form", 0},
	{"NonMaxSuppression", "its boxes and scores are float32-only in the ONNX spec", 0},
	{"Range", "float16 start/limit/delta can change how many elements it produces", 0},
	{"Resize", "its scales input is float32-only, and float16 roi/scales change the output size", 0},
	{"RoiAlign", "box coordinates need float32 precision (onnxruntime's CPU kernel is float32-only)", 0},
	{"TfIdfVectorizer", "its output is float32-only in the ONNX spec", 0},
	{"TopK", "float16 rounding creates ties that change which indices it returns", 0},
	{"Upsample", "its scales are float32-only", 0},
	/* Min and Max, blocked by onnxconverter-common for old onnxruntime
	 * releases, are converted: the spec allows float16 and onnxruntime
	 * casts around kernels it lacks */
	{NULL, NULL, 0},
};

/* node outputs whose float type comes from an attribute defaulting to float */
static const struct {
	const char *op, *attr;
} dtype_default[] = {
	{"RandomNormal", "dtype"}, {"RandomUniform", "dtype"}, {"HannWindow", "output_datatype"},
	{"HammingWindow", "output_datatype"}, {"BlackmanWindow", "output_datatype"},
	{"MelWeightMatrix", "output_datatype"}, {NULL, NULL},
};

/* outputs from this index on stay float32 in a converted node: their type
 * is fixed by the op, not by its inputs */
static const struct {
	const char *op;
	size_t from;
} f32_outputs[] = {
	{"LayerNormalization", 1},   /* Mean, InvStdDev: U, float32 or bfloat16 */
	{NULL, 0},
};

enum { DEC_NONE, DEC_KEEP, DEC_CONV };
enum { T_UNKNOWN = -1, T_OTHER_FLOAT = -2 };  /* Val.orig besides DT_* */

/* a value of one graph */
typedef struct Val {
	char *name;
	int orig;          /* DT_* of the tensor, T_OTHER_FLOAT for seq/map/optional of float */
	int type;          /* float values: DT_FLOAT or DT_FLOAT16 after the rewrite */
	long prod;         /* producing node index, -1 graph input or initializer */
	int conv_reader;   /* read by a converted node (directly or from a body) */
	char *alt;         /* the same value in the other float type (a Cast output), or NULL */
} Val;

typedef struct GCtx {
	Onnx__GraphProto *g;
	struct GCtx *parent;
	StrMap vals;       /* name -> Val (malloc'd, keyed by its own name) */
	PtrVec *after;     /* nafter = n_node + 1 lists of Casts: [0] at the top, [i + 1] after node i */
	size_t nafter;
	int *dec;          /* per node */
	const char **why;  /* per node, reason for DEC_KEEP */
	int io;            /* type of float graph inputs and outputs */
	int force_keep;    /* inside a kept control-flow node */
	const char *keeper;/* its label */
} GCtx;

typedef struct FCtx {
	Model *m;
	const QuantOpts *o;
	QuantReport *rep;
	int64_t opset;           /* of the default domain */
	size_t nf32, nf16;       /* float32 / float16 tensors seen in the input */
	int64_t clamped, raised;
} FCtx;

static Val *val_find(const GCtx *c, const char *name)
{
	return strmap_get(&c->vals, name);
}

/* the value called name in c or an enclosing scope (*owner: where) */
static Val *val_lookup(GCtx *c, const char *name, GCtx **owner)
{
	for (; c; c = c->parent) {
		Val *v = val_find(c, name);
		if (v) {
			if (owner)
				*owner = c;
			return v;
		}
	}
	return NULL;
}

static Val *val_add(GCtx *c, const char *name, int orig, long prod)
{
	Val *v = val_find(c, name);
	if (v) {
		if (v->orig == T_UNKNOWN)
			v->orig = orig;
		if (prod >= 0)
			v->prod = prod;
		return v;
	}
	v = xcalloc(1, sizeof *v);
	v->name = xstrdup(name);
	v->orig = orig;
	v->type = orig;
	v->prod = prod;
	strmap_add(&c->vals, v->name, NULL)->v.p = v;
	return v;
}

static void gctx_free(GCtx *c)
{
	for (StrMapEnt *e = NULL; (e = strmap_next(&c->vals, e));) {
		Val *v = e->v.p;
		free(v->name);
		free(v->alt);
		free(v);
	}
	strmap_free(&c->vals);
	for (size_t i = 0; i < c->nafter; i++)
		pv_free(&c->after[i]);
	free(c->after);
	free(c->dec);
	free(c->why);
}

/* element type a TypeProto gives a value (T_OTHER_FLOAT, T_UNKNOWN) */
static int type_of(const Onnx__TypeProto *tp)
{
	if (!tp)
		return T_UNKNOWN;
	switch (tp->value_case) {
	case ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE:
		return tp->tensor_type && tp->tensor_type->has_elem_type ? tp->tensor_type->elem_type : T_UNKNOWN;
	case ONNX__TYPE_PROTO__VALUE_SEQUENCE_TYPE:
		return type_of(tp->sequence_type->elem_type) == DT_FLOAT ? T_OTHER_FLOAT : DT_UNDEFINED;
	case ONNX__TYPE_PROTO__VALUE_OPTIONAL_TYPE:
		return type_of(tp->optional_type->elem_type) == DT_FLOAT ? T_OTHER_FLOAT : DT_UNDEFINED;
	case ONNX__TYPE_PROTO__VALUE_MAP_TYPE:
		return type_of(tp->map_type->value_type) == DT_FLOAT ? T_OTHER_FLOAT : DT_UNDEFINED;
	case ONNX__TYPE_PROTO__VALUE_SPARSE_TENSOR_TYPE:
		return tp->sparse_tensor_type->elem_type == DT_FLOAT ? T_OTHER_FLOAT : DT_UNDEFINED;
	default:
		return T_UNKNOWN;
	}
}

static int is_float(const Val *v)
{
	return v && v->orig == DT_FLOAT;
}

/* ---- collecting the values of a graph ---- */

static void count_type(FCtx *f, int t)
{
	f->nf32 += t == DT_FLOAT;
	f->nf16 += t == DT_FLOAT16;
}

static int collect(FCtx *f, GCtx *c)
{
	Onnx__GraphProto *g = c->g;
	if (g->n_sparse_initializer)
		for (size_t i = 0; i < g->n_sparse_initializer; i++)
			if (g->sparse_initializer[i]->values && g->sparse_initializer[i]->values->data_type == DT_FLOAT)
				return error("graph '%s' has a float sparse initializer: quantize = fp16 converts dense "
					     "tensors only", g->name ? g->name : "");
	for (size_t i = 0; i < g->n_initializer; i++) {
		Onnx__TensorProto *t = g->initializer[i];
		val_add(c, t->name, t->data_type, -1);
		count_type(f, t->data_type);
	}
	Onnx__ValueInfoProto **lists[] = {g->input, g->output, g->value_info};
	size_t ns[] = {g->n_input, g->n_output, g->n_value_info};
	for (int l = 0; l < 3; l++)
		for (size_t i = 0; i < ns[l]; i++) {
			int t = type_of(lists[l][i]->type);
			if (!qg_init(g, lists[l][i]->name))
				count_type(f, t);
			val_add(c, lists[l][i]->name, t, -1);
		}
	char lab[256];
	for (size_t i = 0; i < g->n_node; i++) {
		Onnx__NodeProto *n = g->node[i];
		for (size_t k = 0; k < n->n_output; k++) {
			if (!*n->output[k])
				continue;
			Val *v = val_add(c, n->output[k], T_UNKNOWN, (long)i);
			if (v->orig == T_UNKNOWN)
				return error("node '%s': the type of its output '%s' is unknown; quantize = fp16 "
					     "needs every tensor typed (run infer-shapes)",
					     node_label(n, lab, sizeof lab), n->output[k]);
			if (v->orig == T_OTHER_FLOAT)
				return error("node '%s': output '%s' is a sequence, map or optional of float; "
					     "quantize = fp16 converts tensors only",
					     node_label(n, lab, sizeof lab), n->output[k]);
		}
	}
	for (size_t i = 0; i < g->n_input; i++)
		if (val_find(c, g->input[i]->name)->orig == T_OTHER_FLOAT)
			return error("graph input '%s' is a sequence, map or optional of float; quantize = fp16 "
				     "converts tensors only", g->input[i]->name);
	return 0;
}

/* ---- deciding which nodes convert ---- */

static int has_body(const Onnx__NodeProto *n)
{
	for (size_t k = 0; k < n->n_attribute; k++)
		if (n->attribute[k]->g || n->attribute[k]->n_graphs)
			return 1;
	return 0;
}

static int touches_float(GCtx *c, const Onnx__NodeProto *n)
{
	for (size_t k = 0; k < n->n_input; k++)
		if (*n->input[k] && is_float(val_lookup(c, n->input[k], NULL)))
			return 1;
	for (size_t k = 0; k < n->n_output; k++)
		if (*n->output[k] && is_float(val_lookup(c, n->output[k], NULL)))
			return 1;
	return has_body(n);
}

static const char *blocked(const FCtx *f, const Onnx__NodeProto *n)
{
	if (n->domain && *n->domain && strcmp(n->domain, "ai.onnx"))
		return !strcmp(n->domain, "ai.onnx.ml") ? "ai.onnx.ml operators take float32 only"
						       : "operator outside the ONNX domain: its float16 support is unknown";
	for (size_t i = 0; block_list[i].op; i++)
		if (!strcmp(n->op_type, block_list[i].op) && (!block_list[i].until || f->opset < block_list[i].until))
			return block_list[i].why;
	const Onnx__AttributeProto *a = node_attr(n, "reduction");
	if (!strncmp(n->op_type, "Scatter", 7) && a && a->has_s && !(a->s.len == 4 && !memcmp(a->s.data, "none", 4)))
		return "onnxruntime's float16 Scatter kernels have no reduction";
	return NULL;
}

static void decide(FCtx *f, GCtx *c, size_t i)
{
	const Onnx__NodeProto *n = c->g->node[i];
	const char *why = NULL;
	if (!touches_float(c, n)) {
		c->dec[i] = DEC_NONE;
		return;
	}
	if (c->force_keep)
		why = "inside the body of a node kept float32";
	if (!why)
		why = qc_excluded(n, f->o);
	if (!why)
		why = blocked(f, n);
	c->dec[i] = why ? DEC_KEEP : DEC_CONV;
	c->why[i] = why;
}

/* mark the values of c that node n (and the bodies it holds) reads */
static void mark_node_reads(GCtx *c, const Onnx__NodeProto *n)
{
	for (size_t k = 0; k < n->n_input; k++) {
		Val *v = *n->input[k] ? val_find(c, n->input[k]) : NULL;
		if (v)
			v->conv_reader = 1;
	}
	for (size_t k = 0; k < n->n_attribute; k++) {
		const Onnx__AttributeProto *a = n->attribute[k];
		for (size_t i = 0; a->g && i < a->g->n_node; i++)
			mark_node_reads(c, a->g->node[i]);
		for (size_t j = 0; j < a->n_graphs; j++)
			for (size_t i = 0; i < a->graphs[j]->n_node; i++)
				mark_node_reads(c, a->graphs[j]->node[i]);
	}
}

static void mark_readers(GCtx *c)
{
	for (size_t i = 0; i < c->g->n_node; i++) {
		const Onnx__NodeProto *n = c->g->node[i];
		if (c->dec[i] == DEC_CONV)
			mark_node_reads(c, n);
	}
	for (size_t i = 0; i < c->g->n_output; i++)
		if (c->io == DT_FLOAT16) {
			Val *v = val_find(c, c->g->output[i]->name);
			if (v)
				v->conv_reader = 1;
		}
}

/* types of the float values: inputs by io, initializers and Constant
 * outputs by their readers, node outputs by their node */
static void assign_types(GCtx *c)
{
	Onnx__GraphProto *g = c->g;
	for (size_t i = 0; i < g->n_input; i++) {
		Val *v = val_find(c, g->input[i]->name);
		if (is_float(v) && !qg_init(g, v->name))
			v->type = c->io;
	}
	for (size_t i = 0; i < g->n_initializer; i++) {
		Val *v = val_find(c, g->initializer[i]->name);
		if (is_float(v))
			v->type = v->conv_reader && !c->force_keep ? DT_FLOAT16 : DT_FLOAT;
	}
	for (size_t i = 0; i < g->n_node; i++) {
		Onnx__NodeProto *n = g->node[i];
		if (!strcmp(n->op_type, "Constant") && c->dec[i] == DEC_CONV && n->n_output == 1 &&
		    !val_find(c, n->output[0])->conv_reader) {
			c->dec[i] = DEC_KEEP;
			c->why[i] = "its value is read only by float32 nodes";
		}
		size_t f32_from = n->n_output;
		for (size_t k = 0; f32_outputs[k].op; k++)
			if (!strcmp(n->op_type, f32_outputs[k].op))
				f32_from = f32_outputs[k].from;
		for (size_t k = 0; k < n->n_output; k++) {
			Val *v = *n->output[k] ? val_find(c, n->output[k]) : NULL;
			if (is_float(v))
				v->type = c->dec[i] == DEC_CONV && k < f32_from ? DT_FLOAT16 : DT_FLOAT;
		}
	}
}

/* ---- Casts ---- */

static char *fresh_name(GCtx *c, const char *base, const char *suffix)
{
	char *s = xasprintf("%s%s", base, suffix);
	for (int k = 2; val_lookup(c, s, NULL); k++) {
		free(s);
		s = xasprintf("%s%s_%d", base, suffix, k);
	}
	return s;
}

static void add_cast(GCtx *c, long prod, const char *from, const char *to, int type)
{
	char *nm = xasprintf("%s_cast", to);
	Onnx__NodeProto *n = qg_node("Cast", nm, 1, &from, 1, &to);
	qg_attr_int(n, "to", type);
	pv_push(&c->after[prod + 1], n);
	free(nm);
}

/* the name under which c reads value name as type want (a shared Cast is
 * made beside the value's producer the first time) */
static const char *read_as(GCtx *c, const char *name, int want)
{
	GCtx *o;
	Val *v = val_lookup(c, name, &o);
	if (!is_float(v) || v->type == want)
		return name;
	if (v->alt)
		return v->alt;
	char *alt = fresh_name(o, name, want == DT_FLOAT16 ? "_fp16" : "_fp32");
	long prod = v->prod;
	add_cast(o, prod, name, alt, want);
	Val *a = val_add(o, alt, DT_FLOAT, prod);
	a->type = want;
	a->alt = xstrdup(name);
	v->alt = alt;
	return v->alt;
}

static void rename_reads(Onnx__GraphProto *g, const char *from, const char *to)
{
	for (size_t i = 0; i < g->n_node; i++)
		for (size_t k = 0; k < g->node[i]->n_input; k++)
			if (!strcmp(g->node[i]->input[k], from))
				qg_set_input(g->node[i], k, to);
}

/* graph outputs of the wrong type: the producer writes NAME_fp16/_fp32, a
 * Cast makes NAME in the type the graph promises */
static int fix_outputs(GCtx *c)
{
	Onnx__GraphProto *g = c->g;
	for (size_t i = 0; i < g->n_output; i++) {
		const char *y = g->output[i]->name;
		Val *v = val_find(c, y);
		if (!is_float(v) || v->type == c->io)
			continue;
		int have = v->type;
		long prod = v->prod;
		Onnx__TensorProto *init = qg_init(g, y);
		if (prod < 0 && !init)
			return error("graph output '%s' is also a graph input of another type", y);
		char *y2 = fresh_name(c, y, have == DT_FLOAT16 ? "_fp16" : "_fp32");
		rename_reads(g, y, y2);
		if (init) {
			free(init->name);
			init->name = xstrdup(y2);
		} else {
			Onnx__NodeProto *n = g->node[prod];
			for (size_t k = 0; k < n->n_output; k++)
				if (!strcmp(n->output[k], y)) {
					free(n->output[k]);
					n->output[k] = xstrdup(y2);
				}
		}
		add_cast(c, prod, y2, y, c->io);
		Val *a = val_add(c, y2, DT_FLOAT, prod);
		a->type = have;
		a->alt = xstrdup(y);
		v = val_find(c, y);
		v->type = c->io;
		v->alt = y2;
	}
	return 0;
}

/* ---- tensors and attributes ---- */

static void report_tensor(QuantReport *rep, const char *name, int64_t clamped, int64_t raised)
{
	StrBuf *sb = &rep->tensors;
	if (sb->len)
		sb_puts(sb, ",\n    ");
	sb_json_str(sb, name);
	sb_printf(sb, ": {\"type\": \"float16\", \"clamped\": %lld, \"raised\": %lld}", (long long)clamped,
		  (long long)raised);
}

/* the float32 tensor p as float16 into y, clamping into range (see top);
 * its source is read in place (mapped external data too) and given back as
 * converted */
static int to_half(Model *m, const Onnx__TensorProto *p, uint16_t *y, int64_t *clamped, int64_t *raised)
{
	FloatView v;
	if (qc_float_view(m, p, &v) < 0) {
		qc_float_done(&v);
		return -1;
	}
	const float *x = v.x;
	*clamped = *raised = 0;
	for (int64_t i = 0; i < v.numel; i++) {
		float e = x[i];
		if (isfinite(e) && fabsf(e) > 65504.0f) {
			e = e > 0 ? 65504.0f : -65504.0f;
			(*clamped)++;
		}
		uint16_t b = float_to_half(e);
		if ((b & 0x7fff) == 0 && e != 0) {
			b = (uint16_t)((b & 0x8000) | 1);
			(*raised)++;
		}
		y[i] = b;
		if ((i & 0xfffff) == 0xfffff)
			qc_float_drop(&v, i + 1 - 0x100000, i + 1);
	}
	qc_float_done(&v);
	return 0;
}

/* an initializer converted while the model is saved (model_defer) */
typedef struct Pending {
	Model *m;
	Onnx__TensorProto *src;  /* the float32 tensor, its data external */
	QuantReport *rep;
	int counted;             /* its clamps are in the report */
} Pending;

static int pending_fill(void *ud, const Onnx__TensorProto *t, void *out, size_t len)
{
	Pending *pd = ud;
	int64_t clamped, raised;
	if (len != (size_t)tensor_proto_numel(t) * 2 || to_half(pd->m, pd->src, out, &clamped, &raised) < 0)
		return error_prefix("converting '%s' to float16", t->name ? t->name : "");
	if (!pd->counted && (clamped || raised))
		report_tensor(pd->rep, t->name, clamped, raised);
	pd->counted = 1;
	return 0;
}

static void pending_free(void *ud)
{
	Pending *pd = ud;
	onnx__tensor_proto__free_unpacked(pd->src, NULL);
	free(pd);
}

/* float32 TensorProto *pp -> float16, clamping into range (see top). An
 * initializer whose data is external, in a model saved next
 * (QuantOpts.save_next), is converted while it is written (model_defer):
 * a model of external weights never holds more than one converted tensor. */
static int tensor_to_half(FCtx *f, Onnx__TensorProto **pp, const char *what, int init)
{
	Onnx__TensorProto *p = *pp;
	Tensor h = {0};
	if ((int)p->n_dims > QM_MAX_RANK)
		return error("tensor '%s': rank %zu exceeds the supported maximum %d", p->name ? p->name : "",
			     p->n_dims, QM_MAX_RANK);
	int defer = init && f->o->save_next && p->has_data_location &&
		    p->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
	if (defer) {
		int64_t n = tensor_proto_numel(p);
		if (n < 0)
			return error("tensor '%s': invalid dims", p->name ? p->name : "");
		Onnx__TensorProto *q = xmalloc(sizeof *q);
		onnx__tensor_proto__init(q);
		q->name = xstrdup(p->name ? p->name : "");
		q->has_data_type = 1;
		q->data_type = DT_FLOAT16;
		q->n_dims = p->n_dims;
		q->dims = xmalloc(sizeof(int64_t) * (p->n_dims ? p->n_dims : 1));
		if (p->n_dims)
			memcpy(q->dims, p->dims, sizeof(int64_t) * p->n_dims);
		q->has_raw_data = 1;
		q->raw_data.len = (size_t)n * 2;
		q->raw_data.data = NULL;
		if (p->doc_string)
			q->doc_string = xstrdup(p->doc_string);
		Pending *pd = xmalloc(sizeof *pd);
		*pd = (Pending){.m = f->m, .src = p, .rep = f->rep};
		model_defer(f->m, q, pending_fill, pending_free, pd);
		*pp = q;
		return 0;
	}
	int64_t clamped, raised;
	if (tensor_alloc(&h, DT_FLOAT16, (int)p->n_dims, p->dims) < 0 || to_half(f->m, p, h.data, &clamped, &raised) < 0) {
		tensor_free(&h);
		return -1;
	}
	Onnx__TensorProto *q = qc_proto_take(&h, p->name ? p->name : "");
	if (p->doc_string)
		q->doc_string = xstrdup(p->doc_string);
	f->clamped += clamped;
	f->raised += raised;
	if (clamped || raised)
		report_tensor(f->rep, what, clamped, raised);
	onnx__tensor_proto__free_unpacked(p, NULL);  /* what may be its name */
	*pp = q;
	return 0;
}

static Onnx__AttributeProto *attr_mut(Onnx__NodeProto *n, const char *name)
{
	for (size_t k = 0; k < n->n_attribute; k++)
		if (!strcmp(n->attribute[k]->name, name))
			return n->attribute[k];
	return NULL;
}

/* Constant's value_float / value_floats -> a float16 value tensor */
static void constant_floats(Onnx__NodeProto *n)
{
	for (size_t k = 0; k < n->n_attribute; k++) {
		Onnx__AttributeProto *a = n->attribute[k];
		int one = !strcmp(a->name, "value_float"), many = !strcmp(a->name, "value_floats");
		if (!one && !many)
			continue;
		Tensor t = {0};
		int64_t d = (int64_t)a->n_floats;
		if (tensor_alloc(&t, DT_FLOAT, one ? 0 : 1, &d) < 0)
			fatalx(1, "%s", errmsg());
		if (one)
			((float *)t.data)[0] = a->f;
		else
			memcpy(t.data, a->floats, a->n_floats * sizeof(float));
		free(a->name);
		a->name = xstrdup("value");
		a->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR;
		a->has_f = 0;
		free(a->floats);
		a->floats = NULL;
		a->n_floats = 0;
		a->t = tensor_to_proto(&t, NULL);
		tensor_free(&t);
	}
}

/* attributes of a converted node: float tensors to float16, dtypes */
static int convert_attrs(FCtx *f, GCtx *c, Onnx__NodeProto *n)
{
	char lab[256];
	node_label(n, lab, sizeof lab);
	if (!strcmp(n->op_type, "Constant"))
		constant_floats(n);
	if (!strcmp(n->op_type, "ConstantOfShape") && !attr_mut(n, "value") && n->n_output &&
	    is_float(val_find(c, n->output[0]))) {
		/* the default value is a float32 zero */
		Tensor t = {0};
		int64_t one = 1;
		if (tensor_alloc(&t, DT_FLOAT16, 1, &one) < 0)
			return -1;
		Onnx__AttributeProto *a = xmalloc(sizeof *a);
		onnx__attribute_proto__init(a);
		a->name = xstrdup("value");
		a->has_type = 1;
		a->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR;
		a->t = tensor_to_proto(&t, NULL);
		tensor_free(&t);
		qg_attr_move(n, a);
	}
	for (size_t i = 0; dtype_default[i].op; i++)
		if (!strcmp(n->op_type, dtype_default[i].op) && !attr_mut(n, dtype_default[i].attr))
			qg_attr_int(n, dtype_default[i].attr, DT_FLOAT16);
	for (size_t k = 0; k < n->n_attribute; k++) {
		Onnx__AttributeProto *a = n->attribute[k];
		if (a->sparse_tensor && a->sparse_tensor->values && a->sparse_tensor->values->data_type == DT_FLOAT)
			return error("node '%s': attribute %s is a float sparse tensor; quantize = fp16 converts "
				     "dense tensors only", lab, a->name);
		int dt_attr = !strcmp(a->name, "to") || !strcmp(a->name, "dtype") || !strcmp(a->name, "output_datatype");
		if (dt_attr && a->has_i && a->i == DT_FLOAT)
			a->i = DT_FLOAT16;
		char *what = xasprintf("%s.%s", lab, a->name);
		int r = 0;
		if (a->t && a->t->data_type == DT_FLOAT)
			r = tensor_to_half(f, &a->t, what, 0);
		for (size_t j = 0; r == 0 && j < a->n_tensors; j++)
			if (a->tensors[j]->data_type == DT_FLOAT)
				r = tensor_to_half(f, &a->tensors[j], what, 0);
		free(what);
		if (r < 0)
			return -1;
	}
	return 0;
}

/* ---- the rewrite of one graph ---- */

static void report(FCtx *f, const Onnx__NodeProto *n, int dec, const char *why)
{
	if (dec == DEC_CONV) {
		qc_report_node(f->rep, n, "float16", NULL);
		f->rep->nskipped--;
		f->rep->nquantized++;
	} else if (dec == DEC_KEEP) {
		qc_report_node(f->rep, n, "float32", why);
	} else {
		qc_report_node(f->rep, n, "unchanged", "no float tensors");
		f->rep->nskipped--;
	}
}

static void set_vi_types(GCtx *c, Onnx__ValueInfoProto **vi, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		Val *v = val_find(c, vi[i]->name);
		if (is_float(v) && vi[i]->type && vi[i]->type->value_case == ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE)
			vi[i]->type->tensor_type->elem_type = v->type;
	}
}

static void assemble(GCtx *c)
{
	Onnx__GraphProto *g = c->g;
	Onnx__NodeProto **nodes = NULL;
	size_t nn = 0;
	for (size_t i = 0; i < c->nafter; i++) {
		if (i)
			qg_push(&nodes, &nn, g->node[i - 1]);
		for (size_t k = 0; k < c->after[i].n; k++)
			qg_push(&nodes, &nn, c->after[i].v[k]);
		c->after[i].n = 0;
	}
	free(g->node);
	g->node = nodes;
	g->n_node = nn;
}

static int convert_graph(FCtx *f, GCtx *parent, Onnx__GraphProto *g, int io, int force_keep);

static int convert_node(FCtx *f, GCtx *c, size_t i)
{
	Onnx__NodeProto *n = c->g->node[i];
	int want = c->dec[i] == DEC_CONV ? DT_FLOAT16 : DT_FLOAT;
	for (size_t k = 0; k < n->n_input; k++)
		if (*n->input[k]) {
			const char *r = read_as(c, n->input[k], want);
			if (r != n->input[k] && strcmp(r, n->input[k]))
				qg_set_input(n, k, r);
		}
	if (c->dec[i] == DEC_CONV && convert_attrs(f, c, n) < 0)
		return -1;
	report(f, n, c->dec[i], c->why[i]);
	for (size_t k = 0; k < n->n_attribute; k++) {
		Onnx__AttributeProto *a = n->attribute[k];
		if (a->g && convert_graph(f, c, a->g, want, c->dec[i] == DEC_KEEP) < 0)
			return -1;
		for (size_t j = 0; j < a->n_graphs; j++)
			if (convert_graph(f, c, a->graphs[j], want, c->dec[i] == DEC_KEEP) < 0)
				return -1;
	}
	return 0;
}

static int convert_graph(FCtx *f, GCtx *parent, Onnx__GraphProto *g, int io, int force_keep)
{
	GCtx c = {.g = g, .parent = parent, .io = io, .force_keep = force_keep};
	c.nafter = g->n_node + 1;
	c.after = xcalloc(c.nafter, sizeof *c.after);
	c.dec = xcalloc(g->n_node + 1, sizeof *c.dec);
	c.why = xcalloc(g->n_node + 1, sizeof *c.why);
	int r = collect(f, &c);
	for (size_t i = 0; r == 0 && i < g->n_node; i++)
		decide(f, &c, i);
	if (r == 0) {
		mark_readers(&c);
		assign_types(&c);
		r = fix_outputs(&c);
	}
	for (size_t i = 0; r == 0 && i < g->n_node; i++)
		r = convert_node(f, &c, i);
	for (size_t i = 0; r == 0 && i < g->n_initializer; i++) {
		Val *v = val_find(&c, g->initializer[i]->name);
		if (is_float(v) && v->type == DT_FLOAT16)
			r = tensor_to_half(f, &g->initializer[i], g->initializer[i]->name, 1);
	}
	if (r == 0) {
		set_vi_types(&c, g->input, g->n_input);
		set_vi_types(&c, g->output, g->n_output);
		set_vi_types(&c, g->value_info, g->n_value_info);
		assemble(&c);
	} else {
		for (size_t i = 0; i < c.nafter; i++)
			for (size_t k = 0; k < c.after[i].n; k++)
				onnx__node_proto__free_unpacked(c.after[i].v[k], NULL);
	}
	gctx_free(&c);
	return r;
}

/* the nodes of the main graph must exist for exclude-nodes (bodies too) */
static int node_named(const Onnx__GraphProto *g, const char *name)
{
	for (size_t i = 0; i < g->n_node; i++) {
		const Onnx__NodeProto *n = g->node[i];
		if (n->name && !strcmp(n->name, name))
			return 1;
		for (size_t k = 0; k < n->n_attribute; k++) {
			if (n->attribute[k]->g && node_named(n->attribute[k]->g, name))
				return 1;
			for (size_t j = 0; j < n->attribute[k]->n_graphs; j++)
				if (node_named(n->attribute[k]->graphs[j], name))
					return 1;
		}
	}
	return 0;
}

static int check_input(const Onnx__GraphProto *g, const QuantOpts *o)
{
	for (size_t i = 0; i < o->exclude_nodes.n; i++)
		if (!node_named(g, o->exclude_nodes.v[i]))
			return error("quantize.exclude-nodes: the model has no node named '%s'",
				     (const char *)o->exclude_nodes.v[i]);
	return qc_check_not_quantized(g);
}

int quant_fp16(Model *m, const QuantOpts *o, QuantReport *rep)
{
	Onnx__GraphProto *g = m->proto->graph;
	if (!g)
		return error("the model has no graph");
	if (check_input(g, o) < 0)
		return -1;
	if (infer_model(m, NULL, NULL) < 0)
		return error_prefix("quantize = fp16 needs the type of every tensor");
	FCtx f = {.m = m, .o = o, .rep = rep, .opset = model_opset(m->proto, "")};
	if (!f.opset)
		return error("quantize = fp16 needs ai.onnx opset 6 or later: the model imports no ai.onnx opset");
	if (f.opset < 6)
		return error("quantize = fp16 needs ai.onnx opset 6 or later (Cast takes its type as a string "
			     "before): the model imports opset %lld", (long long)f.opset);
	if (convert_graph(&f, NULL, g, o->keep_io_types ? DT_FLOAT : DT_FLOAT16, 0) < 0)
		return -1;
	if (!f.nf32)
		return error(f.nf16 ? "the model has no float32 tensors to convert: it is already float16"
				    : "the model has no float32 tensors to convert to float16");
	if (!rep->nquantized)
		return error("no node was converted to float16: every float node is kept float32 "
			     "(quantize.exclude-ops, exclude-nodes, ops, or operators that need float32)");
	if (infer_model(m, NULL, NULL) < 0)
		return error_prefix("the float16 model does not type-check");
	return 0;
}
