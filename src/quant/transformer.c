/* transformer.c — what static quantization does differently on transformer
 * encoders: ranges that survive sentinel values, and the parts of an
 * encoder layer that stay float (see internal.h).
 *
 * Sentinels. Exporters write an attention mask as an additive bias:
 * Hugging Face's (1 - mask) * finfo(float32).min, older ones -10000, some
 * -inf. The tensor scores + mask then holds the scores where tokens are
 * real and about -3.4e38 where they are padding; its calibrated range
 * reaches -3.4e38, and one 8-bit scale over it (1.3e36) rounds every score
 * to the same value. A tensor whose range reaches SENTINEL_MAG is traced
 * back to where the sentinel came in: an Add or Sub of which exactly one
 * input reaches it (a constant or a calibrated tensor) takes the range of
 * the other input, the values that carry information (a mask's other
 * values are 0); a Where takes its branch that does not reach it; nodes
 * that only move values (Reshape, Transpose, ...) take their input's. The
 * sentinel then saturates at the end of that range. A tensor whose
 * sentinel cannot be traced so (a graph input, say) is not quantized: its
 * readers take it in float. Either way quant.json says so on the tensor
 * ("sentinel"). Infinities never enter a range (calibration leaves them
 * out).
 *
 * Softmax outputs are quantized over their known range [0, 1].
 *
 * The transformer preset (quantize.preset = transformer, or auto when the
 * graph holds a Softmax and a LayerNorm, fused or decomposed) keeps float
 * what 8 bits ruin in an encoder layer, as NNCF's and AMD Quark's
 * transformer presets do: LayerNormalization nodes and the scale and
 * shift after a decomposed one (whose insides patterns.c keeps float
 * anyway), the residual Adds that feed a LayerNorm (the residual stream
 * carries the activation outliers), the Softmax and the Add or Sub that
 * puts the mask on the scores (the Softmax input: its sentinels would
 * saturate to a real score). The matrix products, the Gelu's input and
 * output and the Softmax output stay quantized. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "quant/internal.h"
#include "quant/range.h"
#include "strmap.h"

#define SENTINEL_MAG 1e30f   /* the float maximum, finfo(float32).min */
#define MASK_MAG 1e3f        /* a mask's constant: -10000, -1e9 ... */
enum { TRACE_DEPTH = 16 };

/* one graph's sentinel tracing */
typedef struct Tr {
	Model *m;
	const Onnx__GraphProto *g;
	const CalibStats *s;
	const QuantOpts *o;
	StrMap prod;   /* node output -> node index + 1 */
	StrMap memo;   /* tensor -> 2 + reaches() */
} Tr;

static const Onnx__NodeProto *tr_producer(const Tr *t, const char *name)
{
	StrMapEnt *e = strmap_find(&t->prod, name);
	return e ? t->g->node[e->v.i - 1] : NULL;
}

static int is_op(const Onnx__NodeProto *n, const char *op)
{
	return n && !strcmp(n->op_type, op);
}

static float mag(float lo, float hi)
{
	return fmaxf(fabsf(lo), fabsf(hi));
}

/* the finite min and max of a float initializer (a non-finite value
 * makes lo -inf); -1 when it is not one */
static int const_range(const Tr *t, const char *name, float *lo, float *hi)
{
	const Onnx__TensorProto *p = qg_init(t->g, name);
	if (!p || p->data_type != DT_FLOAT)
		return -1;
	Tensor v = {0};
	if (tensor_from_proto(t->m, p, &v) < 0)
		return -1;   /* reported where the weight is read */
	const float *x = v.data;
	int first = 1;
	*lo = *hi = 0;
	for (int64_t i = 0; i < v.numel; i++)
		if (isfinite(x[i])) {
			*lo = first || x[i] < *lo ? x[i] : *lo;
			*hi = first || x[i] > *hi ? x[i] : *hi;
			first = 0;
		}
	for (int64_t i = 0; i < v.numel; i++)
		if (!isfinite(x[i]))
			*lo = -INFINITY;
	tensor_free(&v);
	return 0;
}

/* is tensor name computed from constants and integer graph inputs alone
 * (an attention mask made from the model's mask input) */
static int data_free(const Tr *t, const char *name, int depth)
{
	if (!*name || qg_init(t->g, name))
		return 1;
	for (size_t i = 0; i < t->g->n_input; i++)
		if (!strcmp(t->g->input[i]->name, name)) {
			const Onnx__TypeProto *ty = t->g->input[i]->type;
			return ty && ty->tensor_type && ty->tensor_type->elem_type != DT_FLOAT &&
			       ty->tensor_type->elem_type != DT_FLOAT16 && ty->tensor_type->elem_type != DT_DOUBLE &&
			       ty->tensor_type->elem_type != DT_BFLOAT16;
		}
	const Onnx__NodeProto *p = tr_producer(t, name);
	if (!p || depth == 0 || !strncmp(p->op_type, "Random", 6))
		return 0;
	for (size_t i = 0; i < p->n_attribute; i++)
		if (p->attribute[i]->g || p->attribute[i]->n_graphs)
			return 0;
	for (size_t i = 0; i < p->n_input; i++)
		if (!data_free(t, p->input[i], depth - 1))
			return 0;
	return 1;
}

int qt_sentinel_const(Model *m, const Onnx__GraphProto *g, const char *name)
{
	Tr t = {.m = m, .g = g};
	float lo, hi;
	return const_range(&t, name, &lo, &hi) == 0 && !(mag(lo, hi) < SENTINEL_MAG);
}

/* nodes whose output holds input 0's values, moved or selected */
static const char *const movers[] = {
	"Expand", "Flatten", "Gather", "Identity", "Reshape", "Slice", "Squeeze", "Transpose", "Unsqueeze", NULL,
};

/* the value inputs of a node sentinels pass through (Add, Sub, Where):
 * the first of two at *a, 0 when it is none of these */
static int two_values(const Onnx__NodeProto *p, size_t *a)
{
	*a = is_op(p, "Where") ? 1 : 0;
	return (is_op(p, "Add") || is_op(p, "Sub") || is_op(p, "Where")) && p->n_input >= *a + 2;
}

/* whether tensor name holds sentinel values: its calibrated (or constant)
 * magnitude reaches SENTINEL_MAG; or it is a mask (computed from integer
 * inputs and constants alone) reaching MASK_MAG; or it adds such a tensor
 * to one that holds none, or moves one. 1 yes, 0 no, -1 unknown (no
 * statistics, not a float constant) */
static int reaches(Tr *t, const char *name, int depth)
{
	StrMapEnt *e = strmap_find(&t->memo, name);
	if (e)
		return (int)e->v.i - 2;
	const TensorStats *ts = calib_find(t->s, name);
	float lo, hi;
	int r = -1;
	if (ts)
		r = mag(ts->min, ts->max) >= SENTINEL_MAG ||
		    (mag(ts->min, ts->max) >= MASK_MAG && data_free(t, name, TRACE_DEPTH));
	else if (const_range(t, name, &lo, &hi) == 0)
		r = !(mag(lo, hi) < SENTINEL_MAG);
	const Onnx__NodeProto *p = r == 0 && depth > 0 ? tr_producer(t, name) : NULL;
	size_t a;
	if (p && two_values(p, &a)) {
		int ra = reaches(t, p->input[a], depth - 1), rb = reaches(t, p->input[a + 1], depth - 1);
		r = ra + rb == 1 && ra >= 0 && rb >= 0;
	} else if (p && qc_in_list(movers, p->op_type) && p->n_input) {
		r = reaches(t, p->input[0], depth - 1) == 1;
	}
	strmap_add(&t->memo, name, NULL)->v.i = r + 2;
	return r;
}

/* the range of the values of name that carry information: 0 (from: the
 * tensor it was taken from), -1 when there is none to be told */
static int informative(Tr *t, const char *name, int depth, float *lo, float *hi, const char **from)
{
	int r = reaches(t, name, TRACE_DEPTH);
	if (r == 0) {
		const TensorStats *ts = calib_find(t->s, name);
		if (ts)
			qr_range(t->s, ts, t->o, lo, hi);
		else
			const_range(t, name, lo, hi);
		*from = name;
		return 0;
	}
	const Onnx__NodeProto *p = r < 0 || depth == 0 ? NULL : tr_producer(t, name);
	size_t a;
	if (p && two_values(p, &a)) {
		int ra = reaches(t, p->input[a], TRACE_DEPTH), rb = reaches(t, p->input[a + 1], TRACE_DEPTH);
		if (ra < 0 || rb < 0 || ra == rb)
			return -1;
		size_t k = ra ? a + 1 : a;
		if (informative(t, p->input[k], depth - 1, lo, hi, from) < 0)
			return -1;
		if (is_op(p, "Sub") && k == 1) {   /* 0 - b */
			float x = *lo;
			*lo = -*hi;
			*hi = -x;
		}
		return 0;
	}
	if (p && qc_in_list(movers, p->op_type) && p->n_input)
		return informative(t, p->input[0], depth - 1, lo, hi, from);
	return -1;
}

/* the range of sentinel tensor name and its note: -1 or 1 (see
 * qt_act_range) */
static int trace(Tr *t, const char *name, float *lo, float *hi, StrBuf *note)
{
	const TensorStats *ts = calib_find(t->s, name);
	const char *from = NULL;
	sb_printf(note, "\"sentinel\": {\"calibrated\": [%.9g, %.9g]", ts->min, ts->max);
	if (informative(t, name, TRACE_DEPTH, lo, hi, &from) < 0) {
		if (data_free(t, name, TRACE_DEPTH))
			sb_puts(note, ", \"kept_float\": \"an additive mask (computed from integer inputs and constants "
				      "alone, holding the mask constant): its readers take it in float\"}");
		else
			sb_puts(note, ", \"kept_float\": \"its range reaches sentinel values (a mask constant, the float "
				      "maximum) and the values that carry information could not be told apart: its "
				      "readers take it in float\"}");
		return -1;
	}
	double before = (double)ts->max - (double)ts->min, after = (double)*hi - (double)*lo;
	sb_printf(note, ", \"range\": [%.9g, %.9g], \"range_from\": ", *lo, *hi);
	sb_json_str(note, from);
	sb_printf(note, ", \"shrunk_by\": %.3g}", after > 0 ? before / after : INFINITY);
	return 1;
}

static void trace_add(QtRanges *r, Tr *t, const char *name)
{
	if (!name || !*name || !calib_find(t->s, name) || reaches(t, name, TRACE_DEPTH) != 1)
		return;
	for (size_t i = 0; i < r->n; i++)
		if (!strcmp(r->e[i].name, name))
			return;
	r->e = xreallocarray(r->e, r->n + 1, sizeof *r->e);
	QtRange *e = &r->e[r->n++];
	StrBuf note = {0};
	e->name = xstrdup(name);
	e->how = trace(t, name, &e->lo, &e->hi, &note);
	e->note = sb_detach(&note);
}

void qt_ranges_init(QtRanges *r, Model *m, const Onnx__GraphProto *g, const CalibStats *s, const QuantOpts *o)
{
	memset(r, 0, sizeof *r);
	Tr t = {.m = m, .g = g, .s = s, .o = o};
	int added;
	for (size_t i = 0; i < g->n_node; i++)
		for (size_t k = 0; k < g->node[i]->n_output; k++)
			if (*g->node[i]->output[k]) {
				strmap_add(&t.prod, g->node[i]->output[k], NULL)->v.i = (int64_t)i + 1;
				if (is_op(g->node[i], "Softmax") && k == 0 &&
				    (strmap_add(&r->softmax, g->node[i]->output[k], &added), added))
					strmap_own_key(strmap_find(&r->softmax, g->node[i]->output[k]));
			}
	for (size_t i = 0; i < g->n_input; i++)
		trace_add(r, &t, g->input[i]->name);
	for (size_t i = 0; i < g->n_node; i++)
		for (size_t k = 0; k < g->node[i]->n_output; k++)
			trace_add(r, &t, g->node[i]->output[k]);
	strmap_free(&t.prod);
	strmap_free(&t.memo);
}

void qt_ranges_free(QtRanges *r)
{
	for (size_t i = 0; i < r->n; i++) {
		free(r->e[i].name);
		free(r->e[i].note);
	}
	free(r->e);
	strmap_free_keys(&r->softmax);
	memset(r, 0, sizeof *r);
}

int qt_act_range(const QtRanges *r, const Onnx__GraphProto *g, const CalibStats *s, const QuantOpts *o,
		 const char *name, float *lo, float *hi, StrBuf *note)
{
	const TensorStats *t = calib_find(s, name);
	if (strmap_find(&r->softmax, name)) {
		*lo = 0;
		*hi = 1;
		sb_puts(note, "\"range\": [0, 1], \"range_from\": \"Softmax output\"");
		return 2;
	}
	for (size_t i = 0; i < r->n; i++)
		if (!strcmp(r->e[i].name, name)) {
			*lo = r->e[i].lo;
			*hi = r->e[i].hi;
			sb_puts(note, r->e[i].note);
			return r->e[i].how;
		}
	if (t)
		qr_range(s, t, o, lo, hi);
	return 0;
}

/* ---- the preset ---- */

static int is_norm_region(const char *why)
{
	return why && strstr(why, "decomposed normalization");
}

/* what the preset asks about names, made in one pass over the graph */
typedef struct Pg {
	const Onnx__GraphProto *g;
	const char **pattern;
	StrMap prod;   /* node output -> node index + 1 */
	StrMap read;   /* tensor -> READ_* bits */
} Pg;
enum { READ_SOFTMAX = 1, READ_NORM = 2 };

static const Onnx__NodeProto *pg_prod(const Pg *p, const char *name, size_t *at)
{
	StrMapEnt *e = strmap_find(&p->prod, name);
	if (!e)
		return NULL;
	if (at)
		*at = (size_t)e->v.i - 1;
	return p->g->node[e->v.i - 1];
}

static int is_const_in(const Onnx__GraphProto *g, const char *name)
{
	return qg_init(g, name) != NULL;
}

/* does a node of the normalization region write tensor t */
static int from_norm_region(const Pg *p, const char *t)
{
	size_t at;
	return pg_prod(p, t, &at) && is_norm_region(p->pattern[at]);
}

/* the non-constant input of binary n whose other input is a constant */
static const char *with_const(const Onnx__GraphProto *g, const Onnx__NodeProto *n)
{
	if (n->n_input != 2)
		return NULL;
	if (is_const_in(g, n->input[1]) && !is_const_in(g, n->input[0]))
		return n->input[0];
	if (is_const_in(g, n->input[0]) && !is_const_in(g, n->input[1]))
		return n->input[1];
	return NULL;
}

static int read_as(const Pg *p, const Onnx__NodeProto *n, int bit)
{
	StrMapEnt *e = n->n_output ? strmap_find(&p->read, n->output[0]) : NULL;
	return e && (e->v.i & bit);
}

int qt_float_parts(const char *list, int *bits)
{
	static const char *const word[] = {"layernorm", "residual", "softmax"};
	PtrVec w = {0};
	split_words(list, &w);
	*bits = 0;
	for (size_t i = 0; i < w.n; i++) {
		int b = 0;
		for (int k = 0; k < 3; k++)
			if (!strcmp(w.v[i], word[k]))
				b = 1 << k;
		if (!b) {
			error("'%s' is not one of layernorm, residual, softmax", (const char *)w.v[i]);
			pv_free_all(&w);
			return -1;
		}
		*bits |= b;
	}
	pv_free_all(&w);
	return 0;
}

/* why the preset keeps node i float, or NULL; counts in rep */
static const char *preset_why(const Pg *p, size_t i, QuantReport *rep, int parts)
{
	const Onnx__GraphProto *g = p->g;
	const Onnx__NodeProto *n = g->node[i], *m;
	const char *x;
	if (is_op(n, "LayerNormalization") && (parts & QPF_LAYERNORM)) {
		rep->preset_ln++;
		return "kept in float: a LayerNormalization (quantize.preset = transformer)";
	}
	if (is_op(n, "Softmax") && (parts & QPF_SOFTMAX)) {
		rep->preset_softmax++;
		return "kept in float: the Softmax input, attention scores and mask (quantize.preset = transformer; "
		       "its output is quantized over [0, 1])";
	}
	if ((is_op(n, "Add") || is_op(n, "Sub")) && read_as(p, n, READ_SOFTMAX) && (parts & QPF_SOFTMAX)) {
		rep->preset_mask++;
		return "kept in float: it puts the attention mask on the scores a Softmax reads (quantize.preset = transformer)";
	}
	if ((parts & QPF_LAYERNORM) && is_op(n, "Mul") && (x = with_const(g, n)) && from_norm_region(p, x)) {
		rep->preset_ln++;
		return "kept in float: the scale of a decomposed LayerNorm (quantize.preset = transformer)";
	}
	if ((parts & QPF_LAYERNORM) && is_op(n, "Add") && (x = with_const(g, n)) &&
	    is_op(m = pg_prod(p, x, NULL), "Mul") && with_const(g, m) && from_norm_region(p, with_const(g, m)))
		return "kept in float: the shift of a decomposed LayerNorm (quantize.preset = transformer)";
	if ((parts & QPF_RESIDUAL) && is_op(n, "Add") && n->n_input == 2 && !is_const_in(g, n->input[0]) &&
	    !is_const_in(g, n->input[1]) && read_as(p, n, READ_NORM)) {
		rep->preset_residual++;
		return "kept in float: a residual Add feeding a LayerNorm (quantize.preset = transformer)";
	}
	return NULL;
}

const char **qt_preset_float(const Onnx__GraphProto *g, const char **pattern, const QuantOpts *o, QuantReport *rep)
{
	size_t nsoft = 0, nln = 0;
	for (size_t i = 0; i < g->n_node; i++) {
		nsoft += is_op(g->node[i], "Softmax");
		nln += is_op(g->node[i], "LayerNormalization") || (is_op(g->node[i], "ReduceMean") && is_norm_region(pattern[i]));
	}
	if (o->preset == QPRESET_NONE || !nsoft || !nln)
		return NULL;
	rep->preset_graphs++;
	Pg p = {.g = g, .pattern = pattern};
	for (size_t i = 0; i < g->n_node; i++) {
		const Onnx__NodeProto *n = g->node[i];
		for (size_t k = 0; k < n->n_output; k++)
			if (*n->output[k])
				strmap_add(&p.prod, n->output[k], NULL)->v.i = (int64_t)i + 1;
		for (size_t k = 0; k < n->n_input; k++) {
			int bit = (is_op(n, "Softmax") && k == 0 ? READ_SOFTMAX : 0) |
				  ((is_op(n, "LayerNormalization") && k == 0) || is_norm_region(pattern[i]) ? READ_NORM : 0);
			if (bit && *n->input[k])
				strmap_add(&p.read, n->input[k], NULL)->v.i |= bit;
		}
	}
	const char **why = xcalloc(g->n_node + 1, sizeof *why);
	for (size_t i = 0; i < g->n_node; i++)
		if (!pattern[i])
			why[i] = preset_why(&p, i, rep, o->preset_float);
	strmap_free(&p.prod);
	strmap_free(&p.read);
	return why;
}
