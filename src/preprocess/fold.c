/* fold.c — the fold pass: constant folding (see passes.h).
 *
 * A node of the default domain whose present inputs are all initializers of
 * its graph (not overridable graph inputs) or outputs of nodes folded before
 * it, that has a kernel and holds no subgraph, is run once through its
 * kernel outside the interpreter (RunCtx.interp == NULL); its outputs become
 * initializers and the node goes. Constant nodes become initializers the
 * same way. Never folded: random operators and Dropout, nodes producing a
 * graph output (the output must stay a node output for other tools), and
 * nodes with an output over the size limit or whose kernel refuses the
 * inputs — those are reported on the log and counted as skipped. In
 * subgraphs, initializers of enclosing graphs count as constants unless a
 * nearer graph defines the name otherwise. */
#include <stdlib.h>
#include <string.h>

#include "onnx/node.h"
#include "ops/op.h"
#include "preprocess/passes.h"

static const char *const never[] = {
	"RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike",
	"Multinomial", "Bernoulli", "Dropout",
};

static int has_subgraph(const Onnx__NodeProto *n)
{
	for (size_t a = 0; a < n->n_attribute; a++)
		if (n->attribute[a]->g || n->attribute[a]->n_graphs)
			return 1;
	return 0;
}

/* What a name of a graph in scope is, in the graph's NameMap: its
 * initializer, or not_const for a graph input (it may override an
 * initializer of the same name) or a node output; absent names are looked
 * up in the enclosing graphs. Built once per graph and kept current as
 * nodes fold, so a lookup does not scan the graph. */
static char not_const;

static NameMap *scope_map(const Onnx__GraphProto *g)
{
	NameMap *m = xcalloc(1, sizeof *m);
	for (size_t i = 0; i < g->n_initializer; i++)
		if (g->initializer[i]->name && *g->initializer[i]->name)
			namemap_put(m, g->initializer[i]->name, g->initializer[i]);
	for (size_t i = 0; i < g->n_input; i++)
		if (g->input[i]->name && *g->input[i]->name)
			namemap_put(m, g->input[i]->name, &not_const);
	for (size_t i = 0; i < g->n_node; i++)
		for (size_t k = 0; k < g->node[i]->n_output; k++)
			if (*g->node[i]->output[k])
				namemap_put(m, g->node[i]->output[k], &not_const);
	return m;
}

/* the initializer a read of name in the folded graph resolves to: its own,
 * else, when it does not define name otherwise, the nearest enclosing
 * graph's (c->scopes); NULL when name is no constant there */
static const Onnx__TensorProto *const_init(PrepCtx *c, const char *name)
{
	for (size_t s = c->scopes.n; s-- > 0;) {
		void *v = namemap_get(c->scopes.v[s], name);
		if (v)
			return v == &not_const ? NULL : v;
	}
	return NULL;
}

static int foldable(PrepCtx *c, const Onnx__GraphProto *g, const Onnx__NodeProto *n)
{
	if (n->domain && *n->domain && strcmp(n->domain, "ai.onnx"))
		return 0;
	for (size_t i = 0; i < ARRAY_LEN(never); i++)
		if (!strcmp(n->op_type, never[i]))
			return 0;
	if (has_subgraph(n) || n->n_output == 0)
		return 0;
	for (size_t k = 0; k < n->n_input; k++) {
		const char *in = n->input[k];
		if (!*in)
			continue;
		if (!const_init(c, in))
			return 0;
	}
	for (size_t k = 0; k < n->n_output; k++)
		if (pg_is_output(g, n->output[k]))
			return 0;
	return 1;
}

/* operators whose one output has exactly the bytes of input 0 (same
 * element type and count) */
static const char *const same_size[] = {
	"Identity", "Transpose", "Reshape", "Squeeze", "Unsqueeze", "Flatten", "Neg", "Abs", "Relu", "Sigmoid",
	"Tanh", "Exp", "Log", "Sqrt", "Reciprocal", "Floor", "Ceil", "Round", "Sign", "Erf",
};

/* is n's output known to exceed limit before running it: input 0 of a
 * same_size operator is over it. Such a node (a Transpose of a big weight)
 * is skipped without reading its input, which may be gigabytes of mapped
 * external data; running it would only find the output over the limit. */
static int over_before(PrepCtx *c, const Onnx__NodeProto *n, size_t limit)
{
	int same = 0;
	for (size_t i = 0; i < ARRAY_LEN(same_size) && !same; i++)
		same = !strcmp(n->op_type, same_size[i]);
	if (!same || n->n_input < 1 || !*n->input[0] || n->n_output != 1 || !*n->output[0])
		return 0;
	const Onnx__TensorProto *t = const_init(c, n->input[0]);
	int64_t ne = t ? tensor_proto_numel(t) : -1;
	if (ne < 0 || !t->has_data_type || t->data_type == DT_STRING || t->data_type <= 0 || t->data_type >= DT_MAX ||
	    !dtype_bits(t->data_type))
		return 0;
	return dtype_nbytes(t->data_type, ne) > limit;
}

/* run node n on its constant inputs; 1 folded, 0 skipped (reported), -1 */
static int fold_node(PrepCtx *c, Onnx__GraphProto *g, size_t idx)
{
	Onnx__NodeProto *n = g->node[idx];
	char lb[256];
	const OpDef *d = ops_find("", n->op_type, model_opset(c->m->proto, ""));
	if (!d || !d->run) {
		c->stat->skipped++;
		if (c->o->log)
			fprintf(c->o->log, "preprocess: fold: %s: no kernel for %s, left as it is\n",
				node_label(n, lb, sizeof lb), n->op_type);
		return 0;
	}
	size_t limit = c->o->fold_limit ? c->o->fold_limit : PREP_FOLD_LIMIT;
	if (over_before(c, n, limit)) {
		c->stat->skipped++;
		if (c->o->log)
			fprintf(c->o->log, "preprocess: fold: %s (%s): an output exceeds the fold limit of %zu bytes, left as it is\n",
				node_label(n, lb, sizeof lb), n->op_type, limit);
		return 0;
	}
	size_t nin = n->n_input, nout = n->n_output;
	Tensor *in = xcalloc(nin ? nin : 1, sizeof *in);
	Tensor *out = xcalloc(nout, sizeof *out);
	const Tensor **pin = xcalloc(nin ? nin : 1, sizeof *pin);
	Tensor **pout = xcalloc(nout, sizeof *pout);
	int r = 1;
	for (size_t k = 0; k < nin && r == 1; k++) {
		if (!*n->input[k])
			continue;
		if (pg_tensor(c->m, const_init(c, n->input[k]), &in[k]) < 0)
			r = 0;
		pin[k] = &in[k];
	}
	for (size_t k = 0; k < nout; k++)
		pout[k] = &out[k];
	const char *why = NULL;
	if (r == 1) {
		RunCtx rc = {
			.node = n, .opset = model_opset(c->m->proto, ""), .nin = nin, .nout = nout,
			.in = pin, .out = pout, .interp = NULL, .threads = 1, .out_limit = limit,
		};
		if (d->run(&rc) < 0) {
			r = 0;
			if (strstr(errmsg(), "over the constant folding limit"))
				why = "over";
		}
		for (size_t k = 0; k < nout && r == 1; k++)
			if (*n->output[k] && out[k].nbytes > limit) {
				r = 0;
				why = "over";
			}
	}
	if (r == 1) {
		/* the outputs become initializers, in the scope map too, keyed
		 * by the initializers' names before the node's names are freed */
		NameMap *consts = c->scopes.v[c->scopes.n - 1];
		for (size_t k = 0; k < nout; k++)
			if (*n->output[k]) {
				pg_add_init(g, n->output[k], &out[k]);
				Onnx__TensorProto *p = g->initializer[g->n_initializer - 1];
				namemap_put(consts, p->name, p);
			}
		pg_remove_node(g, idx);
		c->stat->changed++;
	} else {
		c->stat->skipped++;
		if (c->o->log && why)
			fprintf(c->o->log, "preprocess: fold: %s (%s): an output exceeds the fold limit of %zu bytes, left as it is\n",
				node_label(n, lb, sizeof lb), n->op_type, limit);
		else if (c->o->log)
			fprintf(c->o->log, "preprocess: fold: %s (%s): not folded: %s\n", node_label(n, lb, sizeof lb),
				n->op_type, errmsg());
	}
	for (size_t k = 0; k < nin; k++)
		tensor_free(&in[k]);
	for (size_t k = 0; k < nout; k++)
		tensor_free(&out[k]);
	free(in);
	free(out);
	free(pin);
	free(pout);
	return r;
}

int prep_fold(PrepCtx *c, Onnx__GraphProto *g)
{
	NameMap *consts = scope_map(g);
	pv_push(&c->scopes, consts);
	int r = 0;
	for (size_t i = 0; i < g->n_node && r == 0;) {
		int tried = 0;
		for (size_t k = 0; k < c->tried.n && !tried; k++)
			tried = c->tried.v[k] == g->node[i];
		if (tried)
			c->stat->skipped++;
		if (tried || !foldable(c, g, g->node[i])) {
			i++;
			continue;
		}
		r = fold_node(c, g, i);
		if (r == 0)
			pv_push(&c->tried, g->node[i++]);
		r = r < 0 ? -1 : 0;
	}
	/* bodies see this graph's constants */
	if (r == 0)
		r = pg_each_subgraph(c, g, prep_fold);
	c->scopes.n--;
	namemap_free(consts);
	free(consts);
	return r;
}

/* What prep_shape looks up by name, indexed once per graph (a search of
 * the graph per Reshape and per Shape made it quadratic). Keys are the
 * graph's own strings: value info, inputs and initializers are not removed
 * while the index lives, nor are nodes while the producers are used (the
 * Reshape rewrites only add initializers, under fresh names). */
typedef struct ShapeIdx {
	StrMap vi;                /* name -> first ValueInfoProto (inputs, value_info, outputs) */
	StrMap prod;              /* node output -> node index + 1 */
	StrMap init;              /* initializer -> TensorProto */
	StrMap input;             /* graph inputs */
} ShapeIdx;

static void idx_first(StrMap *m, const char *name, void *v)
{
	int added;
	StrMapEnt *e = name && *name ? strmap_add(m, name, &added) : NULL;
	if (e && added)
		e->v.p = v;
}

static void idx_build(ShapeIdx *x, const Onnx__GraphProto *g, int nodes)
{
	memset(x, 0, sizeof *x);
	Onnx__ValueInfoProto **lists[3] = {g->input, g->value_info, g->output};
	size_t lens[3] = {g->n_input, g->n_value_info, g->n_output};
	for (int l = 0; l < 3; l++)
		for (size_t i = 0; i < lens[l]; i++)
			idx_first(&x->vi, lists[l][i]->name, lists[l][i]);
	if (!nodes)
		return;
	for (size_t i = 0; i < g->n_node; i++)
		for (size_t k = 0; k < g->node[i]->n_output; k++)
			idx_first(&x->prod, g->node[i]->output[k], (void *)(uintptr_t)(i + 1));
	for (size_t i = 0; i < g->n_initializer; i++)
		idx_first(&x->init, g->initializer[i]->name, g->initializer[i]);
	for (size_t i = 0; i < g->n_input; i++)
		idx_first(&x->input, g->input[i]->name, NULL);
}

static void idx_free(ShapeIdx *x)
{
	strmap_free(&x->vi);
	strmap_free(&x->prod);
	strmap_free(&x->init);
	strmap_free(&x->input);
}

/* the static dims of name from g's annotations: rank, or -1 when some dim
 * is not a known number (or nothing is declared) */
static int static_dims(const ShapeIdx *x, const char *name, int64_t *dims)
{
	const Onnx__ValueInfoProto *v = strmap_get(&x->vi, name);
	if (!v)
		return -1;
	if (!v->type || v->type->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !v->type->tensor_type->shape ||
	    v->type->tensor_type->shape->n_dim > QM_MAX_RANK)
		return -1;
	const Onnx__TensorShapeProto *s = v->type->tensor_type->shape;
	for (size_t k = 0; k < s->n_dim; k++) {
		if (s->dim[k]->value_case != ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE ||
		    s->dim[k]->dim_value < 0)
			return -1;
		dims[k] = s->dim[k]->dim_value;
	}
	return (int)s->n_dim;
}

/* Shape and Size of a tensor whose dims are all known numbers in the
 * model's annotations (written by infer-shapes) become int64 initializers
 * (and reshape_target() above makes computed Reshape targets constant);
 * fold then takes the Gather/Concat/Reshape chains behind them. */
/* What is known of a 1-D int64 tensor of at most QM_MAX_RANK entries. */
typedef struct PartVec {
	int n;
	int64_t v[QM_MAX_RANK];
	uint8_t known[QM_MAX_RANK];
} PartVec;

/* p: name's entries as far as int64 (or int32, under a Cast) initializers,
 * Concat along axis 0 and Cast to int64 tell; others unknown when the length is annotated. 1, or 0
 * when not even the length is known (or -1 on a read error) */
static int part_vec(PrepCtx *c, const Onnx__GraphProto *g, const ShapeIdx *x, const char *name, PartVec *p,
		    int depth)
{
	const Onnx__TensorProto *t = strmap_get(&x->init, name);
	int64_t dims[QM_MAX_RANK];
	memset(p, 0, sizeof *p);
	if (t && !strmap_find(&x->input, name)) {
		int64_t n = tensor_proto_numel(t);
		if ((t->data_type != DT_INT64 && t->data_type != DT_INT32) || t->n_dims != 1 || n < 0 || n > QM_MAX_RANK)
			return 0;
		Tensor v = {0};
		if (pg_tensor(c->m, t, &v) < 0)
			return -1;
		p->n = (int)n;
		for (int64_t i = 0; i < n; i++)
			p->v[i] = tensor_get_i64(&v, i), p->known[i] = 1;
		tensor_free(&v);
		return 1;
	}
	long pi = (long)(uintptr_t)strmap_get(&x->prod, name) - 1;
	const Onnx__NodeProto *nd = pi >= 0 ? g->node[pi] : NULL;
	int dflt = nd && (!nd->domain || !*nd->domain || !strcmp(nd->domain, "ai.onnx"));
	int64_t v;
	if (dflt && depth < 8 && !strcmp(nd->op_type, "Cast") && nd->n_input == 1 && attr_int(nd, "to", 0, &v) == 0 &&
	    v == DT_INT64)
		return part_vec(c, g, x, nd->input[0], p, depth + 1);
	if (dflt && depth < 8 && !strcmp(nd->op_type, "Concat") && attr_int(nd, "axis", 1, &v) == 0 &&
	    (v == 0 || v == -1)) {
		for (size_t k = 0; k < nd->n_input; k++) {
			PartVec q;
			int r = part_vec(c, g, x, nd->input[k], &q, depth + 1);
			if (r <= 0 || p->n + q.n > QM_MAX_RANK)
				return r < 0 ? -1 : 0;
			memcpy(p->v + p->n, q.v, (size_t)q.n * sizeof *q.v);
			memcpy(p->known + p->n, q.known, (size_t)q.n);
			p->n += q.n;
		}
		return 1;
	}
	if (static_dims(x, name, dims) != 1 || dims[0] > QM_MAX_RANK)
		return 0;
	p->n = (int)dims[0];
	return 1;
}

/* Reshape whose target shape is computed but known up to one entry, the
 * others positive: that entry can only be what -1 infers (the element
 * count over the product of the rest), so the shape becomes a constant
 * with -1 there (what onnx-simplifier does for batch dimensions). 1 if
 * rewritten, 0 if not, -1 */
static int reshape_target(PrepCtx *c, Onnx__GraphProto *g, const ShapeIdx *x, Onnx__NodeProto *n)
{
	if ((n->domain && *n->domain && strcmp(n->domain, "ai.onnx")) || strcmp(n->op_type, "Reshape") ||
	    n->n_input != 2 || model_opset(c->m->proto, "") < 5 || strmap_find(&x->init, n->input[1]))
		return 0;
	PartVec p;
	int r = part_vec(c, g, x, n->input[1], &p, 0);
	if (r <= 0 || p.n == 0)
		return r;
	int unknown = -1;
	for (int i = 0; i < p.n; i++) {
		if (!p.known[i] && unknown >= 0)
			return 0;
		if (!p.known[i])
			unknown = i;
		else if (p.v[i] <= 0)
			return 0;
	}
	Tensor t = {0};
	int64_t len = p.n;
	if (tensor_alloc(&t, DT_INT64, 1, &len) < 0)
		return -1;
	for (int i = 0; i < p.n; i++)
		((int64_t *)t.data)[i] = i == unknown ? -1 : p.v[i];
	char *nm = pg_fresh_name(c, g, n->input[1]);
	pg_add_init(g, nm, &t);
	free(n->input[1]);
	n->input[1] = nm;
	return 1;
}

int prep_shape(PrepCtx *c, Onnx__GraphProto *g)
{
	ShapeIdx x;
	idx_build(&x, g, 1);
	for (size_t i = 0; i < g->n_node; i++) {
		int r = reshape_target(c, g, &x, g->node[i]);
		if (r < 0) {
			idx_free(&x);
			return -1;
		}
		c->stat->changed += (size_t)r;
	}
	/* Shape nodes go below: only the annotations stay indexed */
	idx_free(&x);
	idx_build(&x, g, 0);
	for (size_t i = 0; i < g->n_node;) {
		Onnx__NodeProto *n = g->node[i];
		int is_shape = !strcmp(n->op_type, "Shape"), is_size = !strcmp(n->op_type, "Size");
		int64_t dims[QM_MAX_RANK];
		int rank;
		if ((n->domain && *n->domain && strcmp(n->domain, "ai.onnx")) || (!is_shape && !is_size) ||
		    n->n_output != 1 || !node_input(n, 0) || pg_is_output(g, n->output[0]) ||
		    (rank = static_dims(&x, n->input[0], dims)) < 0) {
			i++;
			continue;
		}
		Tensor t = {0};
		if (is_shape) {
			int64_t start, end;
			if (attr_int(n, "start", 0, &start) < 0 || attr_int(n, "end", rank, &end) < 0) {
				idx_free(&x);
				return -1;
			}
			start = start < 0 ? start + rank : start;
			end = end < 0 ? end + rank : end;
			start = start < 0 ? 0 : start > rank ? rank : start;
			end = end < start ? start : end > rank ? rank : end;
			int64_t len = end - start;
			if (tensor_alloc(&t, DT_INT64, 1, &len) < 0) {
				idx_free(&x);
				return -1;
			}
			memcpy(t.data, dims + start, (size_t)len * sizeof *dims);
		} else {
			int64_t numel = shape_numel(rank, dims);
			if (numel < 0 || tensor_alloc(&t, DT_INT64, 0, NULL) < 0) {
				idx_free(&x);
				return -1;
			}
			memcpy(t.data, &numel, sizeof numel);
		}
		pg_add_init(g, n->output[0], &t);
		pg_remove_node(g, i);
		c->stat->changed++;
	}
	idx_free(&x);
	return pg_each_subgraph(c, g, prep_shape);
}
