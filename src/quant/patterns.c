/* patterns.c — the insides of decomposed normalizations and Gelu stay float.
 *
 * Exporters that predate LayerNormalization and Gelu (tf2onnx, jax2tf,
 * torch below opset 17/20) write them as chains of elementwise nodes, and a
 * static quantizer that rounds every step to 8 bits ruins them: a
 * LayerNorm's squares and their mean lose the small variances (their range
 * is set by the largest), so rows with a small spread get a huge 1/sqrt;
 * Gelu's tanh approximation cubes its input, whose range then swamps the
 * values that matter. magika's model, quantized that way (as onnxruntime's
 * quantize_static does too), keeps -1 dB of output SQNR; with these insides
 * in float, ~25 dB. The nodes found here stay float the way
 * LayerNormalization's and Gelu's insides do in onnxruntime's own fused
 * operators; their inputs and outputs are quantized as any other tensor.
 *
 * Found, in a graph in topological order (nodes of bodies are matched in
 * their own graph):
 *  - a normalization: a Sqrt, a Reciprocal or a Div by a computed value
 *    whose inputs, followed back through elementwise and shape nodes, come
 *    from reductions (ReduceMean/ReduceSum/ReduceSumSquare) of one tensor X
 *    (or of its square, or of X minus something); the region is every node
 *    from X (exclusive) to the node where the normalizer's result meets X
 *    again (x - mean times 1/sigma), inclusive;
 *  - a Gelu: a Tanh or an Erf whose input is computed from a tensor X by
 *    elementwise nodes, and whose output, scaled and shifted by constants,
 *    is multiplied by X; the region is every node from X to that Mul (and a
 *    Mul by a constant right after it), inclusive. */
#include <stdlib.h>
#include <string.h>

#include "quant/internal.h"

enum { MAX_REGION = 96 };

typedef struct Out {
	const char *name;
	long node;
} Out;

typedef struct PG {
	const Onnx__GraphProto *g;
	Out *out;                  /* node outputs, sorted by name */
	size_t nout;
	const char **init;         /* initializers that are not inputs, sorted */
	size_t ninit;
	char *konst;               /* per node: computes a constant */
	const char **why;          /* per node: the region it lies in, or NULL */
} PG;

static int cmp_out(const void *a, const void *b)
{
	return strcmp(((const Out *)a)->name, ((const Out *)b)->name);
}

static long producer(const PG *p, const char *name)
{
	if (!name || !*name)
		return -1;
	Out key = {.name = name};
	const Out *o = p->nout ? bsearch(&key, p->out, p->nout, sizeof *p->out, cmp_out) : NULL;
	return o ? o->node : -1;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static int is_init(const PG *p, const char *name)
{
	return p->ninit && bsearch(&name, p->init, p->ninit, sizeof *p->init, cmp_str);
}

/* a value no input or outer activation changes */
static int is_const(const PG *p, const char *name)
{
	if (!name || !*name)
		return 1;
	long k = producer(p, name);
	return k >= 0 ? p->konst[k] : is_init(p, name);
}

static int op_is(const Onnx__NodeProto *n, const char *const *ops)
{
	for (size_t i = 0; ops[i]; i++)
		if (!strcmp(n->op_type, ops[i]))
			return 1;
	return 0;
}

/* the nodes a region may hold: elementwise arithmetic, reductions, and the
 * shape plumbing exporters put between them */
static const char *const region_ops[] = {
	"Abs", "Add", "Cast", "Div", "Erf", "Expand", "Identity", "Max", "Min", "Mul", "Neg", "Pow",
	"Reciprocal", "ReduceMean", "ReduceSum", "ReduceSumSquare", "Reshape", "Sqrt", "Squeeze", "Sub",
	"Tanh", "Unsqueeze", NULL,
};
static const char *const reductions[] = {"ReduceMean", "ReduceSum", "ReduceSumSquare", NULL};
/* nodes whose inputs after the first are shapes or axes, not values */
static const char *const one_value_in[] = {
	"Expand", "ReduceMean", "ReduceSum", "ReduceSumSquare", "Reshape", "Squeeze", "Unsqueeze", NULL,
};

/* how many leading inputs of n carry values (the rest: shapes, axes) */
static size_t value_inputs(const Onnx__NodeProto *n)
{
	return n->n_input && op_is(n, one_value_in) ? 1 : n->n_input;
}

/* the non-constant input tensor of n other than `not`, if exactly one */
static const char *other_input(const PG *p, const Onnx__NodeProto *n, const char *not)
{
	const char *r = NULL;
	for (size_t i = 0; i < value_inputs(n); i++) {
		const char *t = n->input[i];
		if (is_const(p, t) || (not && !strcmp(t, not)))
			continue;
		if (r && strcmp(r, t))
			return NULL;
		r = t;
	}
	return r;
}

/* Nodes (region_ops) from which `from` is computed, followed back from
 * node `from` and stopping at tensor x (never past its producer), into
 * in[] (per node); the number marked, or -1 past MAX_REGION or on a node
 * outside region_ops that does not compute x. */
static int mark_back(const PG *p, long from, const char *x, char *in)
{
	long stack[MAX_REGION + 1];
	size_t top = 0;
	int count = 0;
	stack[top++] = from;
	in[from] = 1;
	count++;
	while (top) {
		const Onnx__NodeProto *n = p->g->node[stack[--top]];
		for (size_t i = 0; i < value_inputs(n); i++) {
			const char *t = n->input[i];
			if (is_const(p, t) || !strcmp(t, x))
				continue;
			long k = producer(p, t);
			if (k < 0 || !op_is(p->g->node[k], region_ops))
				return -1;   /* reads a tensor other than x: not a closed region */
			if (in[k])
				continue;
			if (++count > MAX_REGION)
				return -1;
			in[k] = 1;
			stack[top++] = k;
		}
	}
	return count;
}

/* whether tensor t is computed from x (through region_ops, within reach) */
static int depends_on(const PG *p, const char *t, const char *x, int depth)
{
	if (!strcmp(t, x))
		return 1;
	long k = producer(p, t);
	if (k < 0 || depth == 0 || p->konst[k] || !op_is(p->g->node[k], region_ops))
		return 0;
	const Onnx__NodeProto *n = p->g->node[k];
	for (size_t i = 0; i < value_inputs(n); i++)
		if (!is_const(p, n->input[i]) && depends_on(p, n->input[i], x, depth - 1))
			return 1;
	return 0;
}

/* x from a reduction's input: a square (Mul(a, a), Pow(a, c)) and a
 * difference (a - mean) are undone */
static const char *reduced_tensor(const PG *p, const char *t)
{
	for (int step = 0; step < 2; step++) {
		long k = producer(p, t);
		if (k < 0)
			return t;
		const Onnx__NodeProto *n = p->g->node[k];
		if (!strcmp(n->op_type, "Mul") && n->n_input == 2 && !strcmp(n->input[0], n->input[1]))
			t = n->input[0];
		else if (!strcmp(n->op_type, "Pow") && n->n_input == 2 && is_const(p, n->input[1]))
			t = n->input[0];
		else if (!strcmp(n->op_type, "Sub") && n->n_input == 2 && !is_const(p, n->input[1]))
			t = n->input[0];
		else
			return t;
	}
	return t;
}

/* the tensor the reductions feeding node `from` reduce, NULL when they
 * reduce different tensors or there are none */
static const char *normalized_tensor(const PG *p, long from)
{
	char *seen = xcalloc(p->g->n_node, 1);
	long stack[MAX_REGION + 1];
	size_t top = 0, visited = 0;
	const char *x = NULL;
	int ok = 1;
	stack[top++] = from;
	seen[from] = 1;
	while (top && ok) {
		const Onnx__NodeProto *n = p->g->node[stack[--top]];
		for (size_t i = 0; i < value_inputs(n) && ok; i++) {
			long k = producer(p, n->input[i]);
			if (k < 0 || p->konst[k] || seen[k])
				continue;
			const Onnx__NodeProto *m = p->g->node[k];
			seen[k] = 1;
			if (op_is(m, reductions)) {
				const char *t = m->n_input ? reduced_tensor(p, m->input[0]) : NULL;
				if (!t || (x && strcmp(x, t)))
					ok = 0;
				x = t;
			} else if (op_is(m, region_ops) && ++visited <= MAX_REGION) {
				stack[top++] = k;
			}
		}
	}
	free(seen);
	return ok ? x : NULL;
}

/* the first node after `from` (following its output forward through
 * region_ops) that also reads a tensor computed from x some other way */
static long meeting_node(const PG *p, long from, const char *x)
{
	const char *t = p->g->node[from]->output[0];
	for (int step = 0; step < 8; step++) {
		long next = -1;
		for (size_t i = (size_t)from + 1; i < p->g->n_node && next < 0; i++) {
			const Onnx__NodeProto *n = p->g->node[i];
			for (size_t k = 0; k < n->n_input; k++)
				if (!strcmp(n->input[k], t) && op_is(n, region_ops))
					next = (long)i;
		}
		if (next < 0)
			return -1;
		const char *o = other_input(p, p->g->node[next], t);
		if (o && depends_on(p, o, x, 12))
			return next;
		if (o)
			return -1;   /* meets something else */
		from = next;
		t = p->g->node[next]->output[0];
	}
	return -1;
}

static void mark_region(PG *p, const char *in, const char *why)
{
	for (size_t i = 0; i < p->g->n_node; i++)
		if (in[i] && !p->why[i])
			p->why[i] = why;
}

static void find_norms(PG *p)
{
	const Onnx__GraphProto *g = p->g;
	char *in = xcalloc(g->n_node, 1);
	for (size_t i = 0; i < g->n_node; i++) {
		const Onnx__NodeProto *n = g->node[i];
		int norm = !strcmp(n->op_type, "Sqrt") || !strcmp(n->op_type, "Reciprocal") ||
			   (!strcmp(n->op_type, "Div") && n->n_input == 2 && !is_const(p, n->input[1]));
		if (!norm || p->konst[i] || p->why[i] || !n->n_output)
			continue;
		const char *x = normalized_tensor(p, (long)i);
		long at = x ? meeting_node(p, (long)i, x) : -1;
		if (!strcmp(n->op_type, "Div") && x && at < 0 && depends_on(p, n->input[0], x, 12))
			at = (long)i;   /* (x - mean) / sigma: the Div is where they meet */
		memset(in, 0, g->n_node);
		if (at >= 0 && mark_back(p, at, x, in) > 0)
			mark_region(p, in, "kept in float: inside a decomposed normalization (8-bit steps lose the small variances)");
	}
	free(in);
}

static void find_gelus(PG *p)
{
	const Onnx__GraphProto *g = p->g;
	char *in = xcalloc(g->n_node, 1);
	for (size_t i = 0; i < g->n_node; i++) {
		const Onnx__NodeProto *n = g->node[i];
		if ((strcmp(n->op_type, "Tanh") && strcmp(n->op_type, "Erf")) || p->konst[i] || p->why[i] ||
		    !n->n_input || !n->n_output)
			continue;
		/* forward from the tanh through constant shifts and scales to a Mul
		 * by a tensor the tanh's input is computed from */
		const char *t = n->output[0], *x = NULL;
		long at = (long)i;
		for (int step = 0; step < 4 && !x; step++) {
			long next = -1;
			for (size_t k = (size_t)at + 1; k < g->n_node && next < 0; k++)
				for (size_t j = 0; j < g->node[k]->n_input; j++)
					if (!strcmp(g->node[k]->input[j], t))
						next = (long)k;
			if (next < 0 || !op_is(g->node[next], region_ops))
				break;
			const char *o = other_input(p, g->node[next], t);
			long ok = o ? producer(p, o) : -1;
			if (o && !strcmp(g->node[next]->op_type, "Mul") && depends_on(p, n->input[0], o, 8))
				x = o;
			else if (ok >= 0 && !strcmp(g->node[next]->op_type, "Mul") && !strcmp(g->node[ok]->op_type, "Mul") &&
				 other_input(p, g->node[ok], NULL) &&
				 depends_on(p, n->input[0], other_input(p, g->node[ok], NULL), 8))
				x = other_input(p, g->node[ok], NULL);   /* (x * 0.5) * (1 + erf) */
			else if (o)
				break;
			at = next;
			t = g->node[next]->output[0];
		}
		memset(in, 0, g->n_node);
		if (!x || mark_back(p, at, x, in) <= 0)
			continue;
		/* x * 0.5 after the product belongs to it too */
		for (size_t k = (size_t)at + 1; k < g->n_node; k++) {
			const Onnx__NodeProto *m = g->node[k];
			if (m->n_input == 2 && !strcmp(m->op_type, "Mul") && other_input(p, m, NULL) &&
			    !strcmp(other_input(p, m, NULL), t) && (is_const(p, m->input[0]) || is_const(p, m->input[1])))
				in[k] = 1;
		}
		mark_region(p, in, "kept in float: inside a decomposed Gelu (8-bit steps of its polynomial lose the small values)");
	}
	free(in);
}

const char **quant_float_patterns(const Onnx__GraphProto *g)
{
	PG p = {.g = g};
	p.why = xcalloc(g->n_node + 1, sizeof *p.why);
	p.konst = xcalloc(g->n_node + 1, 1);
	for (size_t i = 0; i < g->n_node; i++)
		p.nout += g->node[i]->n_output;
	p.out = xcalloc(p.nout + 1, sizeof *p.out);
	size_t k = 0;
	for (size_t i = 0; i < g->n_node; i++)
		for (size_t j = 0; j < g->node[i]->n_output; j++)
			if (g->node[i]->output[j] && *g->node[i]->output[j])
				p.out[k++] = (Out){g->node[i]->output[j], (long)i};
	p.nout = k;
	qsort(p.out, p.nout, sizeof *p.out, cmp_out);
	/* an initializer that is also an input has a default and may be fed */
	const char **inputs = xcalloc(g->n_input + 1, sizeof *inputs);
	for (size_t i = 0; i < g->n_input; i++)
		inputs[i] = g->input[i]->name ? g->input[i]->name : "";
	qsort(inputs, g->n_input, sizeof *inputs, cmp_str);
	p.init = xcalloc(g->n_initializer + 1, sizeof *p.init);
	for (size_t i = 0; i < g->n_initializer; i++) {
		const char *nm = g->initializer[i]->name;
		if (nm && !(g->n_input && bsearch(&nm, inputs, g->n_input, sizeof *inputs, cmp_str)))
			p.init[p.ninit++] = nm;
	}
	qsort(p.init, p.ninit, sizeof *p.init, cmp_str);
	free(inputs);
	/* nodes in topological order: a node computes a constant (here: no
	 * activation's values) when its value inputs are constants, shapes and
	 * axes aside; Shape and Size read shapes only (subgraphs and random
	 * ops aside) */
	for (size_t i = 0; i < g->n_node; i++) {
		const Onnx__NodeProto *n = g->node[i];
		int c = !strncmp(n->op_type, "Random", 6) ? 0 : 1;
		for (size_t a = 0; a < n->n_attribute && c; a++)
			if (n->attribute[a]->g || n->attribute[a]->n_graphs)
				c = 0;
		if (!strcmp(n->op_type, "Shape") || !strcmp(n->op_type, "Size"))
			c = 1;
		else
			for (size_t j = 0; j < value_inputs(n) && c; j++)
				c = is_const(&p, n->input[j]);
		p.konst[i] = (char)c;
	}
	find_norms(&p);
	find_gelus(&p);
	free(p.out);
	free(p.init);
	free(p.konst);
	return p.why;
}
