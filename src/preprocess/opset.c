/* opset.c — preprocess.opset: the default-domain opset upgrade (see
 * opset.h), natively: the ONNX version converter's job without its C++.
 *
 * Each default-domain node is stepped through the schema versions of its
 * operator between the model's opset and the target (opset_table.c). Steps
 * that only widened types need nothing. Steps flagged OPH_SIG/OPH_DEP go
 * through the adapter for (operator, version) in adapters[] below; there is
 * none for a step we do not know how to convert, and the node is refused by
 * name. Adapters turn attributes into constant inputs (new initializers of
 * the node's graph), drop attributes whose only value kept the old meaning,
 * rename deprecated operators and, for Softmax-13, rebuild the old 2-D
 * coercion with Flatten/Reshape when the axis is not the last one. Element
 * types and ranks come from the graph's annotations (infer-shapes); an
 * adapter that needs one that is missing refuses. Subgraphs are converted
 * with their parent node. */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "onnx/node.h"
#include "preprocess/opset.h"
#include "preprocess/passes.h"

typedef struct Conv {
	PrepCtx pc;            /* fresh names */
	int64_t from, to;
	size_t changed;
	int touched;           /* the current node was rewritten */
	size_t after;          /* nodes an adapter inserted after the current one */
	PtrVec scopes;         /* enclosing graphs, for type lookups */
	const char *func;      /* the model-local function being converted, or NULL */
} Conv;

static int hist_cmp(const void *k, const void *e)
{
	return strcmp(k, ((const OpHist *)e)->op);
}

static const OpHist *hist_find(const char *op)
{
	return bsearch(op, opset_table, opset_table_len, sizeof *opset_table, hist_cmp);
}

static int default_domain(const Onnx__NodeProto *n)
{
	return !n->domain || !*n->domain || !strcmp(n->domain, "ai.onnx");
}

static int refuse(Conv *c, const Onnx__NodeProto *n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int refuse(Conv *c, const Onnx__NodeProto *n, const char *fmt, ...)
{
	char why[512], lab[256];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(why, sizeof why, fmt, ap);
	va_end(ap);
	if (c->func)
		return error("preprocess.opset = %lld: model-local function '%s': operator %s (node '%s') cannot be "
			     "converted from opset %lld: %s", (long long)c->to, c->func, n->op_type,
			     node_label(n, lab, sizeof lab), (long long)c->from, why);
	return error("preprocess.opset = %lld: operator %s (node '%s') cannot be converted from opset %lld: %s",
		     (long long)c->to, n->op_type, node_label(n, lab, sizeof lab), (long long)c->from, why);
}

/* ---- attributes ---- */

static void attr_drop(Conv *c, Onnx__NodeProto *n, const char *name)
{
	for (size_t a = 0; a < n->n_attribute; a++)
		if (!strcmp(n->attribute[a]->name, name)) {
			onnx__attribute_proto__free_unpacked(n->attribute[a], NULL);
			memmove(n->attribute + a, n->attribute + a + 1, (n->n_attribute - a - 1) * sizeof *n->attribute);
			n->n_attribute--;
			c->touched = 1;
			return;
		}
}

/* a fresh attribute called name (replacing one of that name) */
static Onnx__AttributeProto *attr_new(Conv *c, Onnx__NodeProto *n, const char *name, int type)
{
	attr_drop(c, n, name);
	c->touched = 1;
	return node_attr_add(n, name, type);
}

static void attr_set_int(Conv *c, Onnx__NodeProto *n, const char *name, int64_t v)
{
	Onnx__AttributeProto *at = attr_new(c, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT);
	at->has_i = 1;
	at->i = v;
}

static void attr_set_str(Conv *c, Onnx__NodeProto *n, const char *name, const char *s)
{
	Onnx__AttributeProto *at = attr_new(c, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING);
	at->has_s = 1;
	at->s.len = strlen(s);
	at->s.data = (uint8_t *)xstrdup(s);
}

/* ---- inputs and initializers ---- */

/* input i of n becomes name (missing inputs before it become "") */
static void input_set(Conv *c, Onnx__NodeProto *n, size_t i, const char *name)
{
	if (i >= n->n_input) {
		n->input = xreallocarray(n->input, i + 1, sizeof *n->input);
		for (size_t k = n->n_input; k <= i; k++)
			n->input[k] = xstrdup("");
		n->n_input = i + 1;
	}
	free(n->input[i]);
	n->input[i] = xstrdup(name);
	c->touched = 1;
}

/* insert name as input i, shifting the later ones */
static void input_insert(Conv *c, Onnx__NodeProto *n, size_t i, const char *name)
{
	input_set(c, n, n->n_input, "");
	free(n->input[n->n_input - 1]);
	memmove(n->input + i + 1, n->input + i, (n->n_input - 1 - i) * sizeof *n->input);
	n->input[i] = xstrdup(name);
}

/* a new initializer of g holding t (freed), named after node output and
 * what; input k of n reads it */
static void init_input(Conv *c, Onnx__GraphProto *g, Onnx__NodeProto *n, size_t k, const char *what, Tensor *t)
{
	char *base = xasprintf("%s_%s", n->n_output ? n->output[0] : n->op_type, what);
	char *nm = pg_fresh_name(&c->pc, g, base);
	pg_add_init(g, nm, t);
	input_set(c, n, k, nm);
	free(nm);
	free(base);
}

/* attribute name of n (ints) as a 1-D int64 input k; 1 if present, 0 if
 * absent, -1 */
static int ints_to_input(Conv *c, Onnx__GraphProto *g, Onnx__NodeProto *n, const char *name, size_t k)
{
	const int64_t *v;
	size_t len;
	if (attr_ints(n, name, &v, &len) < 0)
		return -1;
	if (!node_attr(n, name))
		return 0;
	Tensor t = {0};
	int64_t d = (int64_t)len;
	if (tensor_alloc(&t, DT_INT64, 1, &d) < 0)
		return -1;
	if (len)
		memcpy(t.data, v, len * sizeof *v);
	init_input(c, g, n, k, name, &t);
	attr_drop(c, n, name);
	return 1;
}

/* a scalar of type dt holding v as input k of n; -1 (refused) for a type
 * the attribute's operator version did not allow */
static int scalar_input(Conv *c, Onnx__GraphProto *g, Onnx__NodeProto *n, size_t k, const char *what, int dt, double v)
{
	Tensor t = {0};
	if (dt != DT_FLOAT && dt != DT_DOUBLE && dt != DT_FLOAT16)
		return refuse(c, n, "its input '%s' has type %s, expected float, double or float16 for a '%s' attribute",
			      n->input[0], dt ? dtype_name(dt) : c->func ? "unknown (a function body declares no types)" :
			      "unknown (run infer-shapes first)", what);
	if (tensor_alloc(&t, dt, 0, NULL) < 0)
		return -1;
	if (dt == DT_FLOAT)
		*(float *)t.data = (float)v;
	else if (dt == DT_DOUBLE)
		*(double *)t.data = v;
	else
		*(uint16_t *)t.data = float_to_half((float)v);
	init_input(c, g, n, k, what, &t);
	return 0;
}

/* ---- types and ranks from annotations (g, then enclosing graphs) ---- */

static const Onnx__TypeProto__Tensor *tensor_type(const Onnx__GraphProto *g, const char *name)
{
	Onnx__ValueInfoProto **lists[3] = {g->input, g->value_info, g->output};
	size_t lens[3] = {g->n_input, g->value_info ? g->n_value_info : 0, g->n_output};
	for (int l = 0; l < 3; l++)
		for (size_t i = 0; i < lens[l]; i++) {
			const Onnx__ValueInfoProto *v = lists[l][i];
			if (v->name && !strcmp(v->name, name) && v->type &&
			    v->type->value_case == ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE)
				return v->type->tensor_type;
		}
	return NULL;
}

/* element type of name (0 unknown) */
static int elem_of(Conv *c, const Onnx__GraphProto *g, const char *name)
{
	for (size_t s = c->scopes.n + 1; s-- > 0;) {
		const Onnx__GraphProto *h = s == c->scopes.n ? g : c->scopes.v[s];
		const Onnx__TensorProto *p = pg_init(h, name);
		if (p)
			return p->data_type;
		const Onnx__TypeProto__Tensor *t = tensor_type(h, name);
		if (t && t->elem_type)
			return t->elem_type;
	}
	return 0;
}

/* rank of name (-1 unknown) */
static int rank_of(Conv *c, const Onnx__GraphProto *g, const char *name)
{
	for (size_t s = c->scopes.n + 1; s-- > 0;) {
		const Onnx__GraphProto *h = s == c->scopes.n ? g : c->scopes.v[s];
		const Onnx__TensorProto *p = pg_init(h, name);
		if (p)
			return (int)p->n_dims;
		const Onnx__TypeProto__Tensor *t = tensor_type(h, name);
		if (t && t->shape)
			return (int)t->shape->n_dim;
	}
	return -1;
}

/* is name read by a node (any depth) or a graph output of g? */
static int read_anywhere(const Onnx__GraphProto *g, const char *name)
{
	return *name && (pg_uses(g, name) || pg_is_output(g, name));
}

/* ---- adapters: 0 done, 1 the operator was renamed, -1 refused ---- */

typedef int (*AdaptFn)(Conv *c, Onnx__GraphProto *g, size_t *pos, int ver);

/* the step changed nothing this node relies on: new attributes or optional
 * inputs whose defaults keep the old behaviour, or only attribute defaults
 * that the node sets explicitly (checked by the caller's entry) */
static int keep(Conv *c, Onnx__GraphProto *g, size_t *pos, int ver)
{
	(void)c, (void)g, (void)pos, (void)ver;
	return 0;
}

/* opset 6 dropped the legacy consumed_inputs attribute */
static int no_consumed(Conv *c, Onnx__GraphProto *g, size_t *pos, int ver)
{
	(void)ver;
	attr_drop(c, g->node[*pos], "consumed_inputs");
	return 0;
}

/* Clip-6 and Selu-6 also changed attribute defaults: only nodes that set
 * both attributes keep their meaning */
static int explicit_pair(Conv *c, Onnx__GraphProto *g, size_t *pos, int ver)
{
	Onnx__NodeProto *n = g->node[*pos];
	int clip = !strcmp(n->op_type, "Clip");
	const char *a = clip ? "min" : "alpha", *b = clip ? "max" : "gamma";
	if (!node_attr(n, a) || !node_attr(n, b))
		return refuse(c, n, "the defaults of '%s' and '%s' changed at opset %d; set both explicitly", a, b, ver);
	return no_consumed(c, g, pos, ver);
}

/* a new node of the default domain */
static Onnx__NodeProto *mk_node(const char *op, const char *name, size_t nin, const char *const *in, const char *out)
{
	Onnx__NodeProto *n = xmalloc(sizeof *n);
	onnx__node_proto__init(n);
	n->op_type = xstrdup(op);
	n->name = xstrdup(name);
	n->domain = xstrdup("");
	n->n_input = nin;
	n->input = xcalloc(nin, sizeof *n->input);
	for (size_t i = 0; i < nin; i++)
		n->input[i] = xstrdup(in[i]);
	n->n_output = 1;
	n->output = xcalloc(1, sizeof *n->output);
	n->output[0] = xstrdup(out);
	return n;
}

static void insert_node(Onnx__GraphProto *g, size_t at, Onnx__NodeProto *n)
{
	g->node = xreallocarray(g->node, g->n_node + 1, sizeof *g->node);
	memmove(g->node + at + 1, g->node + at, (g->n_node - at) * sizeof *g->node);
	g->node[at] = n;
	g->n_node++;
}

/* opset 7: numpy broadcasting replaced broadcast/axis. broadcast = 1 without
 * axis aligned trailing dimensions, as numpy does; with an axis that is not
 * rank(A) - rank(B), B goes through Reshape(B, [0 x rank(B), 1 x k]) (0
 * copies a dimension), which appends the k trailing ones numpy needs. */
static int binary7(Conv *c, Onnx__GraphProto *g, size_t *pos, int ver)
{
	(void)ver;
	Onnx__NodeProto *n = g->node[*pos];
	int64_t bc, axis;
	if (attr_int(n, "broadcast", 0, &bc) < 0 || attr_int(n, "axis", 0, &axis) < 0)
		return -1;
	if (bc && node_attr(n, "axis") && n->n_input == 2) {
		int ra = rank_of(c, g, n->input[0]), rb = rank_of(c, g, n->input[1]);
		if (ra < 0 || rb < 0)
			return refuse(c, n, "broadcast = 1 with an axis needs the ranks of its inputs (run infer-shapes first)");
		if (axis < 0)
			axis += ra;
		if (axis < 0 || axis + rb > ra)
			return refuse(c, n, "axis %lld does not fit a %d-D input '%s' into a %d-D one", (long long)axis, rb,
				      n->input[1], ra);
		if (axis + rb != ra) {
			Tensor t = {0};
			int64_t k = ra - axis;
			if (tensor_alloc(&t, DT_INT64, 1, &k) < 0)
				return -1;
			for (int64_t i = rb; i < k; i++)
				((int64_t *)t.data)[i] = 1;
			char *base = xasprintf("%s_reshaped", n->input[1]);
			char *sh = pg_fresh_name(&c->pc, g, base), *out = pg_fresh_name(&c->pc, g, base);
			pg_add_init(g, sh, &t);
			const char *in[2] = {n->input[1], sh};
			insert_node(g, *pos, mk_node("Reshape", out, 2, in, out));
			*pos += 1;
			input_set(c, n, 1, out);
			free(base), free(sh), free(out);
		}
	}
	attr_drop(c, n, "broadcast");
	attr_drop(c, n, "axis");
	return 0;
}

static int gemm7(Conv *c, Onnx__GraphProto *g, size_t *pos, int ver)
{
	(void)ver;
	attr_drop(c, g->node[*pos], "broadcast");
	return 0;
}

/* BatchNormalization: is_test (7) and spatial (9) removed, training_mode and
 * inference-only statistics outputs (14) */
static int bn(Conv *c, Onnx__GraphProto *g, size_t *pos, int ver)
{
	Onnx__NodeProto *n = g->node[*pos];
	int64_t v;
	if (ver == 6)
		return no_consumed(c, g, pos, ver);
	if (ver == 7) {
		attr_drop(c, n, "is_test");
		return 0;
	}
	if (ver == 9) {
		if (attr_int(n, "spatial", 1, &v) < 0)
			return -1;
		if (!v)
			return refuse(c, n, "spatial = 0 (statistics per activation) has no equivalent from opset 9");
		attr_drop(c, n, "spatial");
		return 0;
	}
	for (size_t k = 1; k < n->n_output; k++)
		if (read_anywhere(g, n->output[k]))
			return refuse(c, n, "its statistics output '%s' is read; from opset 14 only training_mode = 1 computes it",
				      n->output[k]);
	for (size_t k = 1; k < n->n_output; k++)
		free(n->output[k]);
	if (n->n_output > 1)
		c->touched = 1;
	n->n_output = n->n_output ? 1 : 0;
	return 0;
}

/* Dropout: is_test removed at 7 (later versions never drop in inference);
 * ratio attribute became an input at 12 */
static int dropout(Conv *c, Onnx__GraphProto *g, size_t *pos, int ver)
{
	Onnx__NodeProto *n = g->node[*pos];
	if (ver == 6)
		return no_consumed(c, g, pos, ver);
	if (ver == 7) {
		int64_t t;
		float r;
		if (attr_int(n, "is_test", 0, &t) < 0 || attr_float(n, "ratio", 0.5f, &r) < 0)
			return -1;
		if (!t && r != 0)
			return refuse(c, n, "is_test = 0 drops values at random (training); from opset 7 Dropout never does in inference");
		attr_drop(c, n, "is_test");
		return 0;
	}
	float r;
	if (!node_attr(n, "ratio"))
		return 0;
	if (attr_float(n, "ratio", 0.5f, &r) < 0)
		return -1;
	Tensor t = {0};
	if (tensor_alloc(&t, DT_FLOAT, 0, NULL) < 0)
		return -1;
	*(float *)t.data = r;
	init_input(c, g, n, 1, "ratio", &t);
	attr_drop(c, n, "ratio");
	return 0;
}

/* Clip-11: min/max attributes became inputs of the input's type */
static int clip11(Conv *c, Onnx__GraphProto *g, size_t *pos, int ver)
{
	(void)ver;
	Onnx__NodeProto *n = g->node[*pos];
	static const char *const names[2] = {"min", "max"};
	int dt = elem_of(c, g, n->input[0]);
	for (size_t k = 0; k < 2; k++) {
		float v;
		if (!node_attr(n, names[k]))
			continue;
		if (attr_float(n, names[k], 0, &v) < 0 || scalar_input(c, g, n, k + 1, names[k], dt, v) < 0)
			return -1;
	}
	attr_drop(c, n, "min");
	attr_drop(c, n, "max");
	return 0;
}

/* Pad: paddings renamed pads (2); pads and value became inputs (11) */
static int pad(Conv *c, Onnx__GraphProto *g, size_t *pos, int ver)
{
	Onnx__NodeProto *n = g->node[*pos];
	if (ver == 2) {
		for (size_t a = 0; a < n->n_attribute; a++)
			if (!strcmp(n->attribute[a]->name, "paddings")) {
				free(n->attribute[a]->name);
				n->attribute[a]->name = xstrdup("pads");
				c->touched = 1;
			}
		return 0;
	}
	if (ver == 18)
		return 0;
	int r = ints_to_input(c, g, n, "pads", 1);
	if (r < 0)
		return -1;
	if (!r)
		return refuse(c, n, "it has no 'pads' attribute");
	float v;
	if (attr_float(n, "value", 0, &v) < 0)
		return -1;
	if (v != 0 && scalar_input(c, g, n, 2, "value", elem_of(c, g, n->input[0]), v) < 0)
		return -1;
	attr_drop(c, n, "value");
	return 0;
}

/* Slice-10: starts, ends, axes attributes became inputs */
static int slice10(Conv *c, Onnx__GraphProto *g, size_t *pos, int ver)
{
	(void)ver;
	Onnx__NodeProto *n = g->node[*pos];
	static const char *const names[3] = {"starts", "ends", "axes"};
	for (size_t k = 0; k < 3; k++) {
		int r = ints_to_input(c, g, n, names[k], k + 1);
		if (r < 0)
			return -1;
		if (!r && k < 2)
			return refuse(c, n, "it has no '%s' attribute", names[k]);
	}
	return 0;
}

/* TopK-10: k became a 1-element input */
static int topk10(Conv *c, Onnx__GraphProto *g, size_t *pos, int ver)
{
	(void)ver;
	Onnx__NodeProto *n = g->node[*pos];
	int64_t k;
	if (!node_attr(n, "k"))
		return refuse(c, n, "it has no 'k' attribute");
	if (attr_int(n, "k", 0, &k) < 0)
		return -1;
	Tensor t = {0};
	int64_t one = 1;
	if (tensor_alloc(&t, DT_INT64, 1, &one) < 0)
		return -1;
	*(int64_t *)t.data = k;
	init_input(c, g, n, 1, "k", &t);
	attr_drop(c, n, "k");
	return 0;
}

/* Split: split attribute became an input (13); num_outputs (18) is needed
 * when the split input is absent */
static int split(Conv *c, Onnx__GraphProto *g, size_t *pos, int ver)
{
	Onnx__NodeProto *n = g->node[*pos];
	if (ver == 13)
		return ints_to_input(c, g, n, "split", 1) < 0 ? -1 : 0;
	if (ver == 18) {
		if (!node_input(n, 1))
			attr_set_int(c, n, "num_outputs", (int64_t)n->n_output);
		return 0;
	}
	return refuse(c, n, "its 'split' input became an attribute at opset 2");
}

/* Squeeze/Unsqueeze-13, ReduceSum-13, other Reduce*-18: axes attribute
 * became an optional input (absent: all axes, as before) */
static int axes_input(Conv *c, Onnx__GraphProto *g, size_t *pos, int ver)
{
	(void)ver;
	return ints_to_input(c, g, g->node[*pos], "axes", 1) < 0 ? -1 : 0;
}

/* Softmax/LogSoftmax/Hardmax-13: the old versions coerced the input to 2-D
 * at axis (default 1) and normalized over the second dimension; the new
 * ones normalize along one axis (default -1). The same when axis is the
 * last dimension; otherwise Flatten(axis) -> op(axis=-1) -> Reshape(Shape). */
static int softmax13(Conv *c, Onnx__GraphProto *g, size_t *pos, int ver)
{
	(void)ver;
	Onnx__NodeProto *n = g->node[*pos];
	int64_t axis;
	if (attr_int(n, "axis", 1, &axis) < 0)
		return -1;
	int r = rank_of(c, g, n->input[0]);
	if (axis == -1 || (r > 0 && axis == r - 1)) {
		attr_set_int(c, n, "axis", -1);
		return 0;
	}
	const char *x = n->input[0];
	char *lab = xstrdup(n->name && *n->name ? n->name : n->output[0]);
	char *fl = pg_fresh_name(&c->pc, g, lab), *sh = pg_fresh_name(&c->pc, g, lab);
	char *y2 = pg_fresh_name(&c->pc, g, lab);
	char *nf = xasprintf("%s_flatten", lab), *ns = xasprintf("%s_shape", lab), *nr = xasprintf("%s_reshape", lab);
	Onnx__NodeProto *f = mk_node("Flatten", nf, 1, &x, fl);
	Onnx__NodeProto *s = mk_node("Shape", ns, 1, &x, sh);
	const char *rin[2] = {y2, sh};
	Onnx__NodeProto *rs = mk_node("Reshape", nr, 2, rin, n->output[0]);
	attr_set_int(c, f, "axis", axis);
	if (c->to >= 14)
		attr_set_int(c, rs, "allowzero", 1);
	input_set(c, n, 0, fl);
	free(n->output[0]);
	n->output[0] = xstrdup(y2);
	attr_set_int(c, n, "axis", -1);
	insert_node(g, *pos + 1, rs);
	insert_node(g, *pos, s);
	insert_node(g, *pos, f);
	*pos += 2;
	c->after++;
	free(lab), free(fl), free(sh), free(y2), free(nf), free(ns), free(nr);
	return 0;
}

/* Concat-4 made axis required (it defaulted to 1) */
static int concat4(Conv *c, Onnx__GraphProto *g, size_t *pos, int ver)
{
	(void)ver;
	if (!node_attr(g->node[*pos], "axis"))
		attr_set_int(c, g->node[*pos], "axis", 1);
	return 0;
}

/* Reshape-5: the shape attribute became an input */
static int reshape5(Conv *c, Onnx__GraphProto *g, size_t *pos, int ver)
{
	Onnx__NodeProto *n = g->node[*pos];
	attr_drop(c, n, "consumed_inputs");
	int r = ints_to_input(c, g, n, "shape", 1);
	if (r == 0)
		return refuse(c, n, "it has no 'shape' attribute at opset %d", ver - 1);
	return r < 0 ? -1 : 0;
}

/* Upsample: scales attribute became an input (9), deprecated for Resize-10
 * with the same inputs and modes (10) */
static int upsample(Conv *c, Onnx__GraphProto *g, size_t *pos, int ver)
{
	Onnx__NodeProto *n = g->node[*pos];
	if (ver == 7)
		return refuse(c, n, "height_scale/width_scale of opset 1 are not converted");
	if (ver == 10) {
		free(n->op_type);
		n->op_type = xstrdup("Resize");
		c->touched = 1;
		return 1;
	}
	const float *v;
	size_t len;
	if (attr_floats(n, "scales", &v, &len) < 0)
		return -1;
	if (!v)
		return refuse(c, n, "it has no 'scales' attribute");
	Tensor t = {0};
	int64_t d = (int64_t)len;
	if (tensor_alloc(&t, DT_FLOAT, 1, &d) < 0)
		return -1;
	memcpy(t.data, v, len * sizeof *v);
	init_input(c, g, n, 1, "scales", &t);
	attr_drop(c, n, "scales");
	return 0;
}

/* Resize-11: roi input (unused outside tf_crop_and_resize) and coordinate
 * modes; Resize-10 mapped output x to input x / scale and took the floor
 * for nearest. Resize-13 dropped tf_half_pixel_for_nn. */
static int resize(Conv *c, Onnx__GraphProto *g, size_t *pos, int ver)
{
	Onnx__NodeProto *n = g->node[*pos];
	if (ver == 13) {
		char mode[64];
		if (attr_str(n, "coordinate_transformation_mode", "half_pixel", mode, sizeof mode) < 0)
			return -1;
		if (!strcmp(mode, "tf_half_pixel_for_nn"))
			return refuse(c, n, "coordinate_transformation_mode tf_half_pixel_for_nn was removed at opset 13");
		return 0;
	}
	if (ver != 11)
		return 0;
	char mode[64];
	if (attr_str(n, "mode", "nearest", mode, sizeof mode) < 0)
		return -1;
	if (c->to >= 13) {
		/* optional from opset 13 */
		input_insert(c, n, 1, "");
	} else {
		Tensor t = {0};
		int64_t zero = 0;
		if (tensor_alloc(&t, DT_FLOAT, 1, &zero) < 0)
			return -1;
		char *base = xasprintf("%s_roi", n->output[0]);
		char *nm = pg_fresh_name(&c->pc, g, base);
		pg_add_init(g, nm, &t);
		input_insert(c, n, 1, nm);
		free(nm);
		free(base);
	}
	attr_set_str(c, n, "coordinate_transformation_mode", "asymmetric");
	if (!strcmp(mode, "nearest"))
		attr_set_str(c, n, "nearest_mode", "floor");
	return 0;
}

/* Scatter-11 is deprecated for ScatterElements-11, the same operator */
static int scatter11(Conv *c, Onnx__GraphProto *g, size_t *pos, int ver)
{
	(void)ver;
	Onnx__NodeProto *n = g->node[*pos];
	free(n->op_type);
	n->op_type = xstrdup("ScatterElements");
	c->touched = 1;
	return 1;
}

/* RoiAlign-16: the new coordinate_transformation_mode defaults to
 * half_pixel; RoiAlign-10 behaved as output_half_pixel */
static int roialign16(Conv *c, Onnx__GraphProto *g, size_t *pos, int ver)
{
	(void)ver;
	attr_set_str(c, g->node[*pos], "coordinate_transformation_mode", "output_half_pixel");
	return 0;
}

/* GRU/LSTM/RNN-7 dropped output_sequence (Y became optional instead) */
static int rnn7(Conv *c, Onnx__GraphProto *g, size_t *pos, int ver)
{
	(void)ver;
	attr_drop(c, g->node[*pos], "output_sequence");
	return 0;
}

/* every flagged (operator, version) step we convert; sorted by operator */
static const struct {
	const char *op;
	uint8_t ver;
	AdaptFn fn;
} adapters[] = {
	{"Abs", 6, no_consumed},
	{"Add", 6, no_consumed}, {"Add", 7, binary7},
	{"And", 7, binary7},
	{"ArgMax", 12, keep}, /* select_last_index = 0: first index, as before */
	{"ArgMin", 12, keep},
	{"AveragePool", 7, keep},  /* count_include_pad = 0: as before */
	{"AveragePool", 10, keep}, /* ceil_mode = 0 */
	{"AveragePool", 19, keep}, /* dilations = 1 */
	{"BatchNormalization", 6, bn}, {"BatchNormalization", 7, bn}, {"BatchNormalization", 9, bn},
	{"BatchNormalization", 14, bn},
	{"Cast", 19, keep},     /* saturate: float8 targets only */
	{"CastLike", 19, keep},
	{"Ceil", 6, no_consumed},
	{"Clip", 6, explicit_pair}, {"Clip", 11, clip11},
	{"Concat", 4, concat4},
	{"Constant", 11, keep}, /* new value_* forms */
	{"Constant", 12, keep},
	{"DepthToSpace", 11, keep}, /* mode = DCR, the old order */
	{"DequantizeLinear", 13, keep}, /* axis = 1 only matters for 1-D scales */
	{"DequantizeLinear", 21, keep}, /* block_size = 0 */
	{"DequantizeLinear", 23, keep}, /* output_dtype = scale's */
	{"Div", 6, no_consumed}, {"Div", 7, binary7},
	{"Dropout", 6, dropout}, {"Dropout", 7, dropout}, {"Dropout", 12, dropout},
	{"Elu", 6, no_consumed},
	{"Equal", 7, binary7},
	{"Exp", 6, no_consumed},
	{"Floor", 6, no_consumed},
	{"GRU", 7, rnn7}, {"GRU", 14, keep}, /* layout = 0 */
	{"GatherND", 12, keep}, /* batch_dims = 0 */
	{"Gemm", 7, gemm7}, {"Gemm", 11, keep}, /* C optional */
	{"Greater", 7, binary7},
	{"Hardmax", 13, softmax13},
	{"HardSigmoid", 6, no_consumed},
	{"InstanceNormalization", 6, no_consumed},
	{"LSTM", 7, rnn7}, {"LSTM", 14, keep},
	{"LeakyRelu", 6, no_consumed},
	{"Less", 7, binary7},
	{"Log", 6, no_consumed},
	{"LogSoftmax", 13, softmax13},
	{"LpPool", 18, keep}, /* ceil_mode = 0, dilations = 1 */
	{"Max", 6, no_consumed},
	{"MaxPool", 8, keep},  /* storage_order = 0, Indices optional */
	{"MaxPool", 10, keep}, /* ceil_mode = 0, dilations = 1 */
	{"Mean", 6, no_consumed},
	{"Min", 6, no_consumed},
	{"Mul", 6, no_consumed}, {"Mul", 7, binary7},
	{"Neg", 6, no_consumed},
	{"OptionalHasElement", 18, keep},
	{"Or", 7, binary7},
	{"PRelu", 6, no_consumed},
	{"Pad", 2, pad}, {"Pad", 11, pad}, {"Pad", 18, pad}, /* 18: axes optional */
	{"Pow", 7, binary7},
	{"QuantizeLinear", 13, keep}, /* axis = 1 only matters for 1-D scales */
	{"QuantizeLinear", 19, keep}, /* saturate: float8 only */
	{"QuantizeLinear", 21, keep}, /* block_size = 0, output_dtype = zero point's */
	{"QuantizeLinear", 23, keep},
	{"RNN", 7, rnn7}, {"RNN", 14, keep},
	{"Reciprocal", 6, no_consumed},
	{"ReduceL1", 18, axes_input}, {"ReduceL2", 18, axes_input},
	{"ReduceLogSum", 18, axes_input}, {"ReduceLogSumExp", 18, axes_input},
	{"ReduceMax", 18, axes_input}, {"ReduceMean", 18, axes_input},
	{"ReduceMin", 18, axes_input}, {"ReduceProd", 18, axes_input},
	{"ReduceSum", 13, axes_input}, {"ReduceSumSquare", 18, axes_input},
	{"Relu", 6, no_consumed},
	{"Reshape", 5, reshape5}, {"Reshape", 14, keep}, /* allowzero = 0 */
	{"Resize", 11, resize}, {"Resize", 13, resize},
	{"Resize", 18, keep}, /* antialias = 0, axes all, keep_aspect_ratio_policy unused without sizes */
	{"RoiAlign", 16, roialign16},
	{"Scatter", 11, scatter11},
	{"ScatterElements", 16, keep}, /* reduction = none */
	{"ScatterND", 16, keep},
	{"Selu", 6, explicit_pair},
	{"Shape", 15, keep}, /* start = 0, end = all */
	{"Sigmoid", 6, no_consumed},
	{"Slice", 10, slice10},
	{"Softmax", 13, softmax13},
	{"Split", 2, split}, {"Split", 13, split}, {"Split", 18, split},
	{"Sqrt", 6, no_consumed},
	{"Squeeze", 13, axes_input},
	{"Sub", 6, no_consumed}, {"Sub", 7, binary7},
	{"Sum", 6, no_consumed},
	{"Tanh", 6, no_consumed},
	{"TopK", 10, topk10}, {"TopK", 11, keep}, /* largest = 1, sorted = 1 */
	{"Unsqueeze", 13, axes_input},
	{"Upsample", 7, upsample}, {"Upsample", 9, upsample}, {"Upsample", 10, upsample},
	{"Xor", 7, binary7},
};

static AdaptFn adapter_find(const char *op, int ver)
{
	for (size_t i = 0; i < sizeof adapters / sizeof *adapters; i++)
		if (adapters[i].ver == ver && !strcmp(adapters[i].op, op))
			return adapters[i].fn;
	return NULL;
}

/* step node *pos from c->from to c->to */
static int convert_node(Conv *c, Onnx__GraphProto *g, size_t *pos)
{
	Onnx__NodeProto *n = g->node[*pos];
	if (!default_domain(n))
		return 0;
	const OpHist *h = hist_find(n->op_type);
	if (!h)
		return refuse(c, n, "it is not an operator of the default ONNX domain");
	if (h->v[0].since > c->from)
		return refuse(c, n, "it does not exist before opset %d", h->v[0].since);
	int at = (int)c->from;
	/* a deprecated version in effect (Upsample-10 at opset 10) is a step
	 * to take too */
	for (size_t i = h->n; i-- > 0;)
		if (h->v[i].since <= c->from) {
			if (h->v[i].flags & OPH_DEP)
				at = h->v[i].since - 1;
			break;
		}
	c->touched = 0;
	for (;;) {
		const OpVer *v = NULL;
		for (size_t i = 0; i < h->n && !v; i++)
			if (h->v[i].since > at && h->v[i].since <= c->to)
				v = &h->v[i];
		if (!v)
			break;
		at = v->since;
		if (!v->flags)
			continue;
		n = g->node[*pos];
		AdaptFn fn = adapter_find(n->op_type, v->since);
		if (!fn)
			return refuse(c, n, "%s at opset %d and quantmake has no adapter for it",
				      v->flags & OPH_DEP ? "it is deprecated" : "its attributes, inputs or outputs changed",
				      v->since);
		/* in a function body, an attribute may be the caller's
		 * (ref_attr_name): its value is not known here */
		for (size_t a = 0; c->func && fn != keep && fn != no_consumed && a < n->n_attribute; a++)
			if (n->attribute[a]->ref_attr_name && *n->attribute[a]->ref_attr_name)
				return refuse(c, n, "its attribute '%s' refers to the function's attribute '%s', whose "
					      "value the step to opset %d needs", n->attribute[a]->name,
					      n->attribute[a]->ref_attr_name, v->since);
		int r = fn(c, g, pos, v->since);
		if (r < 0)
			return -1;
		if (r == 1)
			h = hist_find(g->node[*pos]->op_type);
	}
	c->changed += c->touched;
	return 0;
}

static int convert_graph(Conv *c, Onnx__GraphProto *g)
{
	for (size_t i = 0; i < g->n_node;) {
		size_t pos = i;
		c->after = 0;
		if (convert_node(c, g, &pos) < 0)
			return -1;
		size_t after = c->after;
		Onnx__NodeProto *n = g->node[pos];
		pv_push(&c->scopes, g);
		for (size_t a = 0; a < n->n_attribute; a++) {
			Onnx__AttributeProto *at = n->attribute[a];
			if (at->g && convert_graph(c, at->g) < 0)
				return -1;
			for (size_t k = 0; k < at->n_graphs; k++)
				if (convert_graph(c, at->graphs[k]) < 0)
					return -1;
		}
		c->scopes.n--;
		i = pos + 1 + after;
	}
	return 0;
}

/* the default-domain import of f, or NULL */
static Onnx__OperatorSetIdProto *default_import(const Onnx__FunctionProto *f)
{
	for (size_t k = 0; k < f->n_opset_import; k++) {
		const char *d = f->opset_import[k]->domain;
		if (!d || !*d || !strcmp(d, "ai.onnx"))
			return f->opset_import[k];
	}
	return NULL;
}

/* a name-only value info (the name borrowed) */
static Onnx__ValueInfoProto **name_infos(char **names, size_t n)
{
	Onnx__ValueInfoProto **v = xcalloc(n ? n : 1, sizeof *v);
	for (size_t i = 0; i < n; i++) {
		v[i] = xmalloc(sizeof *v[i]);
		onnx__value_info_proto__init(v[i]);
		v[i]->name = names[i];
	}
	return v;
}

static void free_infos(Onnx__ValueInfoProto **v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(v[i]);
	free(v);
}

/* A model-local function importing the default domain at an older opset:
 * its body goes through the same adapters as a graph whose inputs and
 * outputs are the function's (no types: an adapter that needs one
 * refuses), and the constants an adapter adds, which a function cannot
 * hold as initializers, become Constant nodes at the top of the body. */
static int convert_function(Conv *c, Onnx__FunctionProto *f)
{
	Onnx__OperatorSetIdProto *imp = default_import(f);
	const char *name = f->name ? f->name : "?";
	if (!imp || imp->version == c->to)
		return 0;
	if (imp->version > c->to)
		return error("preprocess.opset = %lld: model-local function '%s' imports opset %lld; downgrades are not "
			     "supported", (long long)c->to, name, (long long)imp->version);
	if (imp->version <= 0)
		return error("preprocess.opset = %lld: model-local function '%s' imports the default domain at opset "
			     "%lld: expected a positive version", (long long)c->to, name, (long long)imp->version);
	Onnx__GraphProto g;
	onnx__graph_proto__init(&g);
	g.name = f->name;
	g.node = f->node;
	g.n_node = f->n_node;
	g.input = name_infos(f->input, f->n_input);
	g.n_input = f->n_input;
	g.output = name_infos(f->output, f->n_output);
	g.n_output = f->n_output;
	int64_t from = c->from;
	c->from = imp->version;
	c->func = name;
	int r = convert_graph(c, &g);
	c->func = NULL;
	c->from = from;
	/* constants first: a Constant node per initializer the adapters added */
	for (size_t i = 0; i < g.n_initializer; i++) {
		Onnx__TensorProto *t = g.initializer[i];
		Onnx__NodeProto *n = mk_node("Constant", t->name, 0, NULL, t->name);
		Onnx__AttributeProto *a = xmalloc(sizeof *a);
		onnx__attribute_proto__init(a);
		a->name = xstrdup("value");
		a->has_type = 1;
		a->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR;
		a->t = t;
		n->attribute = xcalloc(1, sizeof *n->attribute);
		n->attribute[0] = a;
		n->n_attribute = 1;
		insert_node(&g, i, n);
	}
	free(g.initializer);
	f->node = g.node;
	f->n_node = g.n_node;
	free_infos(g.input, g.n_input);
	free_infos(g.output, g.n_output);
	if (r == 0)
		imp->version = c->to;
	return r;
}

/* the IR version that introduced opset v */
static int64_t ir_for(int64_t v)
{
	static const int64_t ir[] = {3, 3, 3, 3, 3, 3, 3, 3, 3, 4, 5, 6, 7, 7, 7, 8, 8, 8, 8, 9, 9, 10, 10, 11};
	return v < (int64_t)(sizeof ir / sizeof *ir) ? ir[v] : 11;
}

int prep_opset(Model *m, int64_t target, size_t *changed)
{
	Onnx__ModelProto *p = m->proto;
	int64_t from = model_opset(p, "");
	*changed = 0;
	if (!p->graph)
		return error("preprocess.opset = %lld: the model has no graph", (long long)target);
	if (from <= 0)
		return error("preprocess.opset = %lld: the model imports no default-domain opset", (long long)target);
	if (target < from)
		return error("preprocess.opset = %lld: the model has opset %lld; downgrades are not supported",
			     (long long)target, (long long)from);
	if (target > OPSET_MAX_TARGET || target < OPSET_MIN_TARGET)
		return error("preprocess.opset = %lld: expected an opset from %d to %d", (long long)target,
			     OPSET_MIN_TARGET, OPSET_MAX_TARGET);
	/* at the model's own opset, functions importing an older one are
	 * still converted */
	Conv c = {.pc = {.m = m}, .from = from, .to = target};
	int r = target == from ? 0 : convert_graph(&c, p->graph);
	for (size_t i = 0; i < p->n_functions && r == 0; i++)
		r = convert_function(&c, p->functions[i]);
	pv_free(&c.scopes);
	if (r < 0)
		return -1;
	for (size_t i = 0; i < p->n_opset_import; i++) {
		const char *d = p->opset_import[i]->domain;
		if (!d || !*d || !strcmp(d, "ai.onnx"))
			p->opset_import[i]->version = target;
	}
	if (!p->has_ir_version || p->ir_version < ir_for(target)) {
		p->has_ir_version = 1;
		p->ir_version = ir_for(target);
	}
	*changed = c.changed;
	return 0;
}
