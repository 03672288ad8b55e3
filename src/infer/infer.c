/* infer.c — the type and shape inference pass (see infer.h and op.h).
 *
 * One InferState per infer_model() call. Each graph gets a Scope (name ->
 * ValueType) whose parent is the scope of the graph holding the node that
 * owns it, so outer names stay visible in If/Loop/Scan bodies. Results are
 * kept per graph in a GraphMemo (the last visit wins: an operator may infer
 * a body more than once) and written into the model only when the whole
 * pass succeeded. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "infer/infer.h"
#include "onnx/node.h"
#include "strmap.h"
#include "util.h"

/* free a map of names to ValueType * it owns */
static void vtmap_free(StrMap *m)
{
	for (StrMapEnt *e = NULL; (e = strmap_next(m, e));)
		if (e->v.p) {
			vt_clear(e->v.p);
			free(e->v.p);
		}
	strmap_free(m);
}

/* ---- state ---- */

typedef struct Scope {
	struct Scope *parent;
	StrMap names;           /* name -> ValueType * (owned) */
} Scope;

typedef struct GraphMemo {
	const Onnx__GraphProto *g;
	size_t n;               /* node outputs with a name, in node order */
	const char **name;
	const Onnx__NodeProto **node;
	ValueType *vt;
	ValueType *out;         /* g->n_output final output types */
	int in_function;        /* a graph inside a function body: shared by
				 * every call, so nothing call-specific is written */
} GraphMemo;

struct InferState {
	Model *m;
	const Onnx__ModelProto *mp;
	InferOpts o;
	InferReport *r;
	SymTab *syms;
	Scope *scope;           /* innermost scope being inferred */
	PtrVec memos;           /* GraphMemo * */
	int depth;
	/* inside a model-local function: its opsets, and its formal inputs the
	 * caller left out (absent, not undefined) */
	const Onnx__FunctionProto *fn;
	StrMap *fn_absent;
};

static ValueType *vt_new(void)
{
	ValueType *v = xcalloc(1, sizeof *v);
	v->rank = -1;
	return v;
}

static const ValueType *scope_lookup(const Scope *sc, const char *name)
{
	for (; sc; sc = sc->parent) {
		const ValueType *v = strmap_get(&sc->names, name);
		if (v)
			return v;
	}
	return NULL;
}

Dim infer_fresh_dim(InferCtx *c)
{
	Dim d = {-1, NULL};
	if (c && c->st)
		d.sym = sym_fresh(c->st->syms);
	return d;
}

/* give every unknown dim of t a fresh symbol */
static void name_unknowns(InferState *st, ValueType *t)
{
	if (!t)
		return;
	if (t->kind == VT_TENSOR || t->kind == VT_SPARSE) {
		for (int i = 0; i < t->rank; i++)
			if (t->dims[i].v < 0 && !t->dims[i].sym)
				t->dims[i].sym = sym_fresh(st->syms);
	} else
		name_unknowns(st, t->inner);
}

static GraphMemo *memo_get(InferState *st, const Onnx__GraphProto *g)
{
	for (size_t i = 0; i < st->memos.n; i++) {
		GraphMemo *gm = st->memos.v[i];
		if (gm->g == g)
			return gm;
	}
	GraphMemo *gm = xcalloc(1, sizeof *gm);
	gm->g = g;
	gm->in_function = st->fn != NULL;
	pv_push(&st->memos, gm);
	return gm;
}

static void memo_clear(GraphMemo *gm)
{
	for (size_t i = 0; i < gm->n; i++)
		vt_clear(&gm->vt[i]);
	if (gm->out)
		for (size_t i = 0; i < gm->g->n_output; i++)
			vt_clear(&gm->out[i]);
	free(gm->name);
	free(gm->node);
	free(gm->vt);
	free(gm->out);
	gm->name = NULL;
	gm->node = NULL;
	gm->vt = NULL;
	gm->out = NULL;
	gm->n = 0;
}

static const char *graph_name(const Onnx__GraphProto *g)
{
	return g->name && *g->name ? g->name : "(unnamed)";
}

static void report_missing(InferState *st, const char *dom, const Onnx__NodeProto *n,
			   int64_t opset, int has_def)
{
	InferReport *r = st->r;
	for (size_t i = 0; i < r->nmissing; i++) {
		InferMissing *x = &r->missing[i];
		if (!strcmp(x->domain, dom) && !strcmp(x->op, n->op_type) && x->opset == opset) {
			x->count++;
			return;
		}
	}
	char lb[256];
	r->missing = xreallocarray(r->missing, r->nmissing + 1, sizeof *r->missing);
	InferMissing *x = &r->missing[r->nmissing++];
	x->domain = xstrdup(dom);
	x->op = xstrdup(n->op_type);
	x->opset = opset;
	x->node = xstrdup(node_label(n, lb, sizeof lb));
	x->count = 1;
	x->has_def = has_def;
}

/* ---- constant propagation ---- */

static int nondeterministic(const char *op)
{
	static const char *const ops[] = {"Bernoulli", "Multinomial", "RandomNormal",
					  "RandomNormalLike", "RandomUniform", "RandomUniformLike"};
	for (size_t i = 0; i < ARRAY_LEN(ops); i++)
		if (!strcmp(op, ops[i]))
			return 1;
	return 0;
}

static int has_graph_attr(const Onnx__NodeProto *n)
{
	for (size_t i = 0; i < n->n_attribute; i++)
		if (n->attribute[i]->n_graphs || n->attribute[i]->g)
			return 1;
	return 0;
}

/* Run def's kernel when every input of n has a known value and the sizes are
 * small; attach the results to out[]. A kernel that fails only costs the
 * value (counted in the report); a result contradicting the inferred type is
 * an error, since one of the two is wrong. */
static int const_fold(InferState *st, const OpDef *def, const Onnx__NodeProto *n, int64_t opset,
		      const ValueType *const *in, ValueType *out)
{
	size_t nin = n->n_input, nout = n->n_output;
	int64_t limit = st->o.const_limit;
	int need = 0, rc = 0;
	if (limit < 0 || !def->run || !nout)
		return 0;
	for (size_t i = 0; i < nout; i++)
		if (n->output[i] && *n->output[i] && !out[i].value &&
		    (out[i].kind == VT_TENSOR || out[i].kind == VT_UNKNOWN))
			need = 1;
	if (!need || nondeterministic(n->op_type) || has_graph_attr(n))
		return 0;
	int64_t total = 0;
	for (size_t i = 0; i < nin; i++) {
		if (!in[i])
			continue;
		if (in[i]->kind != VT_TENSOR || !in[i]->value)
			return 0;
		total += in[i]->value->numel;
	}
	if (total > limit)
		return 0;
	for (size_t i = 0; i < n->n_attribute; i++) {
		const Onnx__AttributeProto *a = n->attribute[i];
		if (a->t && tensor_proto_numel(a->t) > limit)
			return 0;
		if (a->sparse_tensor || a->n_ints > (size_t)limit || a->n_floats > (size_t)limit)
			return 0;
	}
	const Tensor **tin = xcalloc(nin ? nin : 1, sizeof *tin);
	Tensor *tout = xcalloc(nout, sizeof *tout);
	Tensor **toutp = xcalloc(nout, sizeof *toutp);
	for (size_t i = 0; i < nin; i++)
		tin[i] = in[i] ? in[i]->value : NULL;
	for (size_t i = 0; i < nout; i++)
		toutp[i] = &tout[i];
	/* no output of more than limit elements is kept: none of more bytes
	 * than that many of the widest type is made */
	RunCtx c = {.node = n, .opset = opset, .nin = nin, .nout = nout, .in = tin,
		     .out = toutp, .interp = NULL, .threads = 1, .out_limit = (size_t)limit * 16};
	if (def->run(&c) < 0) {
		/* an output over the limit is not a failure: it is not folded */
		if (!strstr(errmsg(), "over the constant folding limit"))
			st->r->nconstfail++;
		goto done;
	}
	for (size_t i = 0; i < nout; i++) {
		Tensor *t = &tout[i];
		if (!n->output[i] || !*n->output[i] || !t->dtype || t->numel > limit || out[i].value)
			continue;
		if (t->dtype == DT_STRING || (out[i].kind != VT_TENSOR && out[i].kind != VT_UNKNOWN))
			continue;
		ValueType k = {0}, merged = {0};
		vt_set_tensor(&k, t->dtype, t->rank);
		for (int d = 0; d < t->rank; d++)
			k.dims[d].v = t->dims[d];
		merged.rank = -1;
		if (vt_merge(&k, &out[i], &merged) < 0) {
			char lb[256];
			rc = error_prefix("node '%s' (%s): output '%s': constant propagation: kernel "
					  "and inference disagree", node_label(n, lb, sizeof lb),
					  n->op_type, n->output[i]);
			vt_clear(&merged);
			goto done;
		}
		/* the kernel's result is concrete: keep it, with declared symbols gone */
		merged.kind = VT_TENSOR;
		merged.elem = t->dtype;
		merged.rank = t->rank;
		for (int d = 0; d < t->rank; d++)
			merged.dims[d] = (Dim){t->dims[d], NULL};
		merged.value = xcalloc(1, sizeof *merged.value);
		if (t->owned) {
			*merged.value = *t;
			memset(t, 0, sizeof *t);
		} else if (tensor_copy(merged.value, t) < 0) {
			vt_clear(&merged);
			rc = -1;
			goto done;
		}
		vt_clear(&out[i]);
		out[i] = merged;
		st->r->nconst++;
	}
done:
	for (size_t i = 0; i < nout; i++)
		tensor_free(&tout[i]);
	free(tin);
	free(tout);
	free(toutp);
	return rc;
}

/* ---- nodes ---- */

/* "node OP NAME -> TENSOR TYPE [= value] [~ symval]" for --trace */
static void trace_output(FILE *f, const Onnx__NodeProto *n, const char *name, const ValueType *v)
{
	char lb[256], ts[512];
	fprintf(f, "%s %s -> %s %s", n->op_type, node_label(n, lb, sizeof lb), name,
		vt_str(v, ts, sizeof ts));
	if (v->value) {
		fputs(" = [", f);
		for (int64_t i = 0; i < v->value->numel && i < 16; i++)
			fprintf(f, i ? ",%g" : "%g", tensor_get_f64(v->value, i));
		fputs(v->value->numel > 16 ? ",...]" : "]", f);
	}
	if (v->symval) {
		fputs(" ~ [", f);
		for (int64_t i = 0; i < v->nsymval; i++) {
			if (i)
				fputc(',', f);
			if (v->symval[i].v >= 0)
				fprintf(f, "%" PRId64, v->symval[i].v);
			else
				fputs(v->symval[i].sym ? v->symval[i].sym : "?", f);
		}
		fputc(']', f);
	}
	fputc('\n', f);
}

static int check_output(const Onnx__NodeProto *n, size_t i, const ValueType *t)
{
	if (t->kind < VT_UNKNOWN || t->kind > VT_MAP || t->elem < 0 || t->elem >= DT_MAX ||
	    t->rank < -1 || t->rank > QM_MAX_RANK)
		return op_error(n, "inference produced an invalid type for output %zu "
				   "(kind %d, element type %d, rank %d)", i, t->kind, t->elem, t->rank);
	if ((t->kind == VT_SEQUENCE || t->kind == VT_OPTIONAL) && t->inner)
		return check_output(n, i, t->inner);
	return 0;
}

static int infer_graph(InferState *st, const Onnx__GraphProto *g, size_t nin,
		       const ValueType *const *in, int is_main, ValueType *outs, size_t nouts);

/* opset of dom for the node being inferred: the function's own imports
 * inside a model-local function, else the model's */
static int64_t node_opset(const InferState *st, const char *dom)
{
	return function_opset(st->mp, st->fn, dom);
}

static int graph_has_attr_ref(const Onnx__GraphProto *g);

/* does n hold an attribute reference, itself or in a graph nested in it? */
static int node_has_attr_ref(const Onnx__NodeProto *n)
{
	for (size_t j = 0; j < n->n_attribute; j++) {
		const Onnx__AttributeProto *a = n->attribute[j];
		if (a->ref_attr_name && *a->ref_attr_name)
			return 1;
		if (a->g && graph_has_attr_ref(a->g))
			return 1;
		for (size_t k = 0; k < a->n_graphs; k++)
			if (graph_has_attr_ref(a->graphs[k]))
				return 1;
	}
	return 0;
}

static int graph_has_attr_ref(const Onnx__GraphProto *g)
{
	for (size_t i = 0; i < g->n_node; i++)
		if (node_has_attr_ref(g->node[i]))
			return 1;
	return 0;
}

/* A function body bound to one call, as the interpreter expands it
 * (src/exec/inline.c): every node holding an attribute reference, in the
 * body or in a graph nested in it (If/Loop/Scan bodies), is a shallow copy
 * with the caller's attribute, else the function's default, in the
 * reference's place; a reference to neither is dropped, so the operator's
 * own default applies. What holds no reference is the model's own. */
typedef struct Binding {
	const Onnx__NodeProto *call;
	const Onnx__FunctionProto *f;
	PtrVec dflt;            /* function_attr_defaults(), read on first use */
	int loaded;
	PtrVec mem;             /* the copies' blocks */
	PtrVec graphs;          /* the copied graphs: their memos end with the call */
} Binding;

static void *bmem(Binding *b, size_t n, size_t size)
{
	void *p = xcalloc(n ? n : 1, size);
	pv_push(&b->mem, p);
	return p;
}

/* the call's value of attribute name (the caller's, else the default), or
 * NULL in *out */
static int bound_attr(Binding *b, const char *name, const Onnx__AttributeProto **out)
{
	*out = node_attr(b->call, name);
	if (*out)
		return 0;
	if (!b->loaded) {
		b->loaded = 1;
		if (function_attr_defaults(b->f, &b->dflt) < 0)
			return -1;
	}
	for (size_t i = 0; i < b->dflt.n; i++) {
		const Onnx__AttributeProto *d = b->dflt.v[i];
		if (d->name && !strcmp(d->name, name)) {
			*out = d;
			break;
		}
	}
	return 0;
}

static int bind_graph(Binding *b, Onnx__GraphProto *g, Onnx__GraphProto **out);

/* resolve reference a of node n into *out (NULL: dropped) */
static int bind_ref(Binding *b, const Onnx__NodeProto *n, const Onnx__AttributeProto *a,
		    Onnx__AttributeProto **out)
{
	char lb[256];
	const Onnx__AttributeProto *act;
	*out = NULL;
	if (bound_attr(b, a->ref_attr_name, &act) < 0)
		return -1;
	if (!act)
		return 0;
	int graph = act->type == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH ||
		    act->type == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPHS || act->g || act->n_graphs;
	const char *bad = graph ? "is a graph: not supported"
			  : a->has_type && a->type && act->has_type && act->type != a->type
			  ? "has another type than the reference declares" : NULL;
	if (bad)
		return error("node '%s' (%s): attribute '%s' refers to attribute '%s' of function "
			     "'%s%s%s', which %s", node_label(n, lb, sizeof lb), n->op_type,
			     a->name ? a->name : "", a->ref_attr_name, b->f->domain ? b->f->domain : "",
			     b->f->domain && *b->f->domain ? "." : "", b->f->name, bad);
	Onnx__AttributeProto *s = bmem(b, 1, sizeof *s);
	*s = *act;
	s->name = a->name;
	s->ref_attr_name = NULL;
	*out = s;
	return 0;
}

/* n as the call sees it: n itself, or a copy with its references resolved
 * and its graphs holding some bound */
static int bind_node(Binding *b, Onnx__NodeProto *n, Onnx__NodeProto **out)
{
	char lb[256];
	*out = n;
	if (!node_has_attr_ref(n))
		return 0;
	Onnx__AttributeProto **attrs = bmem(b, n->n_attribute, sizeof *attrs);
	size_t k = 0;
	for (size_t j = 0; j < n->n_attribute; j++) {
		Onnx__AttributeProto *a = n->attribute[j], *s = a;
		if (a->ref_attr_name && *a->ref_attr_name) {
			if (bind_ref(b, n, a, &s) < 0)
				return -1;
		} else if (a->g || a->n_graphs) {
			s = bmem(b, 1, sizeof *s);
			*s = *a;
			int r = a->g ? bind_graph(b, a->g, &s->g) : 0;
			if (a->n_graphs)
				s->graphs = bmem(b, a->n_graphs, sizeof *s->graphs);
			for (size_t i = 0; i < a->n_graphs && r == 0; i++)
				r = bind_graph(b, a->graphs[i], &s->graphs[i]);
			if (r < 0)
				return error_prefix("node '%s' (%s), attribute '%s'", node_label(n, lb, sizeof lb),
						    n->op_type, a->name ? a->name : "");
		}
		if (s)
			attrs[k++] = s;
	}
	Onnx__NodeProto *c = bmem(b, 1, sizeof *c);
	*c = *n;
	c->attribute = attrs;
	c->n_attribute = k;
	*out = c;
	return 0;
}

static int bind_graph(Binding *b, Onnx__GraphProto *g, Onnx__GraphProto **out)
{
	*out = g;
	if (!graph_has_attr_ref(g))
		return 0;
	Onnx__GraphProto *c = bmem(b, 1, sizeof *c);
	*c = *g;
	c->node = bmem(b, g->n_node, sizeof *c->node);
	for (size_t i = 0; i < g->n_node; i++)
		if (bind_node(b, g->node[i], &c->node[i]) < 0)
			return -1;
	pv_push(&b->graphs, c);
	*out = c;
	return 0;
}

static void binding_free(Binding *b)
{
	for (size_t i = 0; i < b->dflt.n; i++)
		onnx__attribute_proto__free_unpacked(b->dflt.v[i], NULL);
	pv_free(&b->dflt);
	pv_free_all(&b->mem);
	pv_free(&b->graphs);
}

/* forget the results of graph g, which is about to be freed */
static void memo_drop(InferState *st, const Onnx__GraphProto *g)
{
	for (size_t i = 0; i < st->memos.n; i++) {
		GraphMemo *gm = st->memos.v[i];
		if (gm->g == g) {
			memo_clear(gm);
			free(gm);
			st->memos.v[i] = st->memos.v[--st->memos.n];
			return;
		}
	}
}

/* Infer a call of model-local function f by node n: the body, bound to
 * the call, is inferred as an isolated graph (no outer scope). */
static int infer_function(InferState *st, const Onnx__NodeProto *n, const Onnx__FunctionProto *f,
			  const ValueType *const *in, ValueType *outv)
{
	char lb[256];
	size_t nn = f->n_node;
	Binding b = {.call = n, .f = f};
	Onnx__NodeProto **nodes = xcalloc(nn ? nn : 1, sizeof *nodes);
	Onnx__ValueInfoProto *vin = xcalloc(f->n_input ? f->n_input : 1, sizeof *vin);
	Onnx__ValueInfoProto **pin = xcalloc(f->n_input ? f->n_input : 1, sizeof *pin);
	Onnx__ValueInfoProto *vout = xcalloc(f->n_output ? f->n_output : 1, sizeof *vout);
	Onnx__ValueInfoProto **pout = xcalloc(f->n_output ? f->n_output : 1, sizeof *pout);
	const ValueType **bin = xcalloc(f->n_input ? f->n_input : 1, sizeof *bin);
	StrMap absent = {0};
	int rc = -1, r = -1;
	strmap_reserve(&absent, f->n_input);
	if (st->depth >= 64) {
		op_error(n, "functions nested more than 64 deep");
		goto out;
	}
	/* bind the inputs the caller gave; the rest are absent */
	size_t nbound = 0;
	for (size_t i = 0; i < f->n_input; i++) {
		if (i < n->n_input && n->input[i] && *n->input[i]) {
			onnx__value_info_proto__init(&vin[nbound]);
			vin[nbound].name = f->input[i];
			pin[nbound] = &vin[nbound];
			bin[nbound++] = in[i];
		} else
			strmap_add(&absent, f->input[i], NULL);
	}
	size_t nout = f->n_output < n->n_output ? f->n_output : n->n_output;
	for (size_t i = 0; i < nout; i++) {
		onnx__value_info_proto__init(&vout[i]);
		vout[i].name = f->output[i];
		pout[i] = &vout[i];
	}
	Onnx__GraphProto g;
	onnx__graph_proto__init(&g);
	g.name = f->name;
	g.n_node = nn;
	g.node = nodes;
	g.n_input = nbound;
	g.input = pin;
	g.n_output = nout;
	g.output = pout;
	size_t nb = 0;
	while (nb < nn && bind_node(&b, f->node[nb], &nodes[nb]) == 0)
		nb++;
	if (nb == nn) {
		Scope *saved = st->scope;
		const Onnx__FunctionProto *savedfn = st->fn;
		StrMap *savedabs = st->fn_absent;
		st->scope = NULL;
		st->fn = f;
		st->fn_absent = &absent;
		st->depth++;
		r = infer_graph(st, &g, nbound, bin, 0, outv, nout);
		st->depth--;
		st->scope = saved;
		st->fn = savedfn;
		st->fn_absent = savedabs;
	}
	/* the temporary graphs are gone after this call: forget their results */
	memo_drop(st, &g);
	for (size_t i = 0; i < b.graphs.n; i++)
		memo_drop(st, b.graphs.v[i]);
	if (r < 0) {
		error_prefix("node '%s' (%s): function '%s%s%s'", node_label(n, lb, sizeof lb),
			     n->op_type, f->domain ? f->domain : "", f->domain && *f->domain ? "." : "",
			     f->name);
		goto out;
	}
	rc = 0;
out:
	binding_free(&b);
	strmap_free(&absent);
	free(nodes);
	free(vin);
	free(pin);
	free(vout);
	free(pout);
	free(bin);
	return rc;
}

static int infer_node(InferState *st, const Onnx__NodeProto *n, const StrMap *decl)
{
	char lb[256];
	size_t nin = n->n_input, nout = n->n_output;
	const ValueType **in = xcalloc(nin ? nin : 1, sizeof *in);
	ValueType *outv = xcalloc(nout ? nout : 1, sizeof *outv);
	ValueType **outp = xcalloc(nout ? nout : 1, sizeof *outp);
	int rc = -1;
	for (size_t i = 0; i < nout; i++) {
		outv[i].rank = -1;
		outp[i] = &outv[i];
	}
	if (!n->op_type || !*n->op_type) {
		op_error(n, "node has no op_type");
		goto out;
	}
	for (size_t i = 0; i < nin; i++) {
		const char *nm = node_input(n, i);
		if (!nm)
			continue;
		if (!(in[i] = scope_lookup(st->scope, nm))) {
			if (st->fn_absent && strmap_find(st->fn_absent, nm))
				continue; /* a function input the caller left out */
			op_error(n, "input '%s' refers to no tensor", nm);
			goto out;
		}
	}
	const char *dom = n->domain ? n->domain : "";
	if (!strcmp(dom, "ai.onnx"))
		dom = "";
	int64_t opset = node_opset(st, dom);
	const OpDef *def = opset > 0 ? ops_find(dom, n->op_type, opset) : NULL;
	const Onnx__FunctionProto *fn = def ? NULL : model_function(st->mp, dom, n->op_type);
	if (opset <= 0 && !fn) {
		op_error(n, "domain '%s' is not imported by the model (no opset_import entry)",
			 *dom ? dom : "ai.onnx");
		goto out;
	}
	if (fn) {
		if (infer_function(st, n, fn, in, outv) < 0)
			goto out;
	} else if (def && def->infer) {
		if (!nout) {
			op_error(n, "node has no outputs");
			goto out;
		}
		InferCtx c = {.node = n, .opset = opset, .nin = nin, .nout = nout,
			      .in = in, .out = outp, .st = st};
		if (def->infer(&c) < 0)
			goto out;
		for (size_t i = 0; i < nout; i++)
			if (check_output(n, i, &outv[i]) < 0)
				goto out;
	} else {
		report_missing(st, dom, n, opset, def != NULL);
	}
	if (def && const_fold(st, def, n, opset, in, outv) < 0)
		goto out;
	for (size_t i = 0; i < nout; i++) {
		const char *nm = n->output[i];
		if (!nm || !*nm)
			continue;
		int added;
		StrMapEnt *e = strmap_add(&st->scope->names, nm, &added);
		if (!added) {
			op_error(n, "output '%s' is already defined in this graph "
				    "(by another node, an input or an initializer)", nm);
			goto out;
		}
		/* the scope owns v from here, on failure too (the pass stops) */
		ValueType *v = e->v.p = vt_new();
		if (vt_merge(strmap_get(decl, nm), &outv[i], v) < 0) {
			error_prefix("node '%s' (%s): tensor '%s'", node_label(n, lb, sizeof lb),
				     n->op_type, nm);
			goto out;
		}
		name_unknowns(st, v);
		if (st->o.trace)
			trace_output(st->o.trace, n, nm, v);
	}
	rc = 0;
out:
	for (size_t i = 0; i < nout; i++)
		vt_clear(&outv[i]);
	free(in);
	free(outv);
	free(outp);
	return rc;
}

/* ---- topological order ---- */

/* every name a node of g or of its nested graphs reads */
static void graph_reads(const Onnx__GraphProto *g, PtrVec *names)
{
	for (size_t i = 0; i < g->n_node; i++) {
		const Onnx__NodeProto *n = g->node[i];
		for (size_t j = 0; j < n->n_input; j++)
			if (n->input[j] && *n->input[j])
				pv_push(names, n->input[j]);
		for (size_t j = 0; j < n->n_attribute; j++) {
			const Onnx__AttributeProto *a = n->attribute[j];
			if (a->g)
				graph_reads(a->g, names);
			for (size_t k = 0; k < a->n_graphs; k++)
				graph_reads(a->graphs[k], names);
		}
	}
}

/* names node n depends on: its inputs and what its subgraphs read */
static void node_reads(const Onnx__NodeProto *n, PtrVec *names)
{
	names->n = 0;
	for (size_t j = 0; j < n->n_input; j++)
		if (n->input[j] && *n->input[j])
			pv_push(names, n->input[j]);
	for (size_t j = 0; j < n->n_attribute; j++) {
		const Onnx__AttributeProto *a = n->attribute[j];
		if (a->g)
			graph_reads(a->g, names);
		for (size_t k = 0; k < a->n_graphs; k++)
			graph_reads(a->graphs[k], names);
	}
}

/* Kahn's algorithm over g's nodes; *order gets n_node indices. */
static int topo_order(const Onnx__GraphProto *g, size_t **order)
{
	size_t nn = g->n_node, nedge = 0;
	StrMap prod = {0}, defined = {0};   /* prod: output name -> its node's index */
	StrMapEnt *pe;
	PtrVec names = {0};
	size_t *indeg = xcalloc(nn + 1, sizeof *indeg);
	size_t *start = xcalloc(nn + 2, sizeof *start);
	size_t *edge = NULL, *fill = NULL;
	size_t *ord = xcalloc(nn + 1, sizeof *ord);
	char lb[256], lb2[256];
	int rc = -1;
	strmap_reserve(&prod, nn);
	strmap_reserve(&defined, g->n_input + g->n_initializer);
	/* graph inputs and initializers: defined, produced by no node */
	for (size_t i = 0; i < g->n_input; i++)
		if (g->input[i]->name)
			strmap_add(&defined, g->input[i]->name, NULL);
	for (size_t i = 0; i < g->n_initializer; i++)
		if (g->initializer[i]->name)
			strmap_add(&defined, g->initializer[i]->name, NULL);
	for (size_t i = 0; i < nn; i++) {
		const Onnx__NodeProto *n = g->node[i];
		for (size_t j = 0; j < n->n_output; j++) {
			const char *o = n->output[j];
			if (!o || !*o)
				continue;
			if (strmap_find(&defined, o)) {
				error("graph '%s': node '%s' (%s): output '%s' redefines a graph input or "
				      "initializer", graph_name(g), node_label(n, lb, sizeof lb), n->op_type, o);
				goto out;
			}
			int added;
			pe = strmap_add(&prod, o, &added);
			if (added) {
				pe->v.u = i;
			} else {
				size_t p = (size_t)pe->v.u;
				error("graph '%s': tensor '%s' is produced by two nodes, '%s' (%s) and '%s' (%s)",
				      graph_name(g), o, node_label(g->node[p], lb, sizeof lb),
				      g->node[p]->op_type, node_label(n, lb2, sizeof lb2), n->op_type);
				goto out;
			}
		}
	}
	/* count edges producer -> consumer, then fill them (CSR) */
	for (size_t i = 0; i < nn; i++) {
		node_reads(g->node[i], &names);
		for (size_t k = 0; k < names.n; k++)
			if ((pe = strmap_find(&prod, names.v[k]))) {
				start[pe->v.u + 1]++;
				indeg[i]++;
				nedge++;
			}
	}
	for (size_t i = 0; i < nn; i++)
		start[i + 1] += start[i];
	edge = xcalloc(nedge + 1, sizeof *edge);
	fill = xcalloc(nn + 1, sizeof *fill);
	for (size_t i = 0; i < nn; i++) {
		node_reads(g->node[i], &names);
		for (size_t k = 0; k < names.n; k++)
			if ((pe = strmap_find(&prod, names.v[k])))
				edge[start[pe->v.u] + fill[pe->v.u]++] = i;
	}
	size_t head = 0, tail = 0;
	for (size_t i = 0; i < nn; i++)
		if (!indeg[i])
			ord[tail++] = i;
	while (head < tail) {
		size_t p = ord[head++];
		for (size_t e = start[p]; e < start[p + 1]; e++)
			if (--indeg[edge[e]] == 0)
				ord[tail++] = edge[e];
	}
	if (tail < nn) {
		/* walk back through unfinished producers until a node repeats */
		size_t cur = 0;
		while (!indeg[cur])
			cur++;
		const char *via = "";
		for (size_t step = 0; step <= nn; step++) {
			node_reads(g->node[cur], &names);
			for (size_t k = 0; k < names.n; k++) {
				if ((pe = strmap_find(&prod, names.v[k])) && indeg[pe->v.u]) {
					cur = (size_t)pe->v.u;
					via = names.v[k];
					break;
				}
			}
		}
		error("graph '%s' is not a DAG: node '%s' (%s) is on a cycle through tensor '%s'",
		      graph_name(g), node_label(g->node[cur], lb, sizeof lb), g->node[cur]->op_type, via);
		goto out;
	}
	*order = ord;
	ord = NULL;
	rc = 0;
out:
	strmap_free(&prod);
	strmap_free(&defined);
	pv_free(&names);
	free(indeg);
	free(start);
	free(edge);
	free(fill);
	free(ord);
	return rc;
}

/* ---- graphs ---- */

/* a tensor type from an initializer, with its value when small */
static int init_type(InferState *st, const Onnx__TensorProto *p, ValueType *t, int with_value)
{
	int dt = p->has_data_type ? p->data_type : 0;
	if (dt <= 0 || dt >= DT_MAX)
		return error("initializer '%s': unknown element type %d", p->name ? p->name : "", dt);
	if (p->n_dims > QM_MAX_RANK)
		return error("initializer '%s': rank %zu exceeds the supported maximum %d",
			     p->name ? p->name : "", p->n_dims, QM_MAX_RANK);
	vt_clear(t);
	vt_set_tensor(t, dt, (int)p->n_dims);
	for (size_t i = 0; i < p->n_dims; i++) {
		if (p->dims[i] < 0)
			return error("initializer '%s': dimension %zu is negative", p->name ? p->name : "", i);
		t->dims[i].v = p->dims[i];
	}
	int64_t n = tensor_proto_numel(p);
	if (with_value && st->o.const_limit >= 0 && n >= 0 && n <= st->o.const_limit &&
	    dt != DT_STRING) {
		Tensor *v = xcalloc(1, sizeof *v);
		if (tensor_from_proto(st->m, p, v) < 0) {
			free(v);
			return error_prefix("initializer '%s'", p->name ? p->name : "");
		}
		t->value = v;
	}
	return 0;
}

static int add_inputs(InferState *st, const Onnx__GraphProto *g, size_t nin,
		      const ValueType *const *in, int is_main)
{
	Scope *sc = st->scope;
	for (size_t i = 0; i < g->n_input; i++) {
		const Onnx__ValueInfoProto *vi = g->input[i];
		if (!vi->name || !*vi->name)
			return error("graph '%s': input %zu has no name", graph_name(g), i);
		if (strmap_get(&sc->names, vi->name))
			return error("graph '%s': input '%s' is declared twice", graph_name(g), vi->name);
		ValueType d = {0}, *v = vt_new();
		d.rank = -1;
		char what[512];
		snprintf(what, sizeof what, "graph '%s': input '%s'", graph_name(g), vi->name);
		int r = vt_from_proto(st->syms, vi->type, &d, what);
		if (r == 0 && !is_main && i < nin && in[i]) {
			r = vt_merge(&d, in[i], v);
			if (r < 0)
				error_prefix("%s", what);
		} else if (r == 0)
			r = vt_copy(v, &d);
		vt_clear(&d);
		if (r < 0) {
			vt_clear(v);
			free(v);
			return -1;
		}
		name_unknowns(st, v);
		strmap_put(&sc->names, vi->name, v);
	}
	/* An initializer that is also an input is a default the caller may
	 * override; like onnx's reference inference, its value still feeds
	 * constant propagation, and the input declaration merges with it. */
	for (size_t i = 0; i < g->n_initializer; i++) {
		const Onnx__TensorProto *p = g->initializer[i];
		if (!p->name || !*p->name)
			return error("graph '%s': initializer %zu has no name", graph_name(g), i);
		ValueType *v = strmap_get(&sc->names, p->name), t = {0};
		t.rank = -1;
		if (init_type(st, p, &t, 1) < 0) {
			vt_clear(&t);
			return -1;
		}
		if (v) {
			ValueType merged = {0};
			merged.rank = -1;
			if (vt_merge(v, &t, &merged) < 0) {
				vt_clear(&t);
				vt_clear(&merged);
				return error_prefix("graph '%s': initializer '%s' and its input declaration",
						    graph_name(g), p->name);
			}
			vt_clear(v);
			*v = merged;
			vt_clear(&t);
			continue;
		}
		v = vt_new();
		*v = t;
		strmap_put(&sc->names, p->name, v);
	}
	for (size_t i = 0; i < g->n_sparse_initializer; i++) {
		const Onnx__SparseTensorProto *sp = g->sparse_initializer[i];
		const Onnx__TensorProto *vals = sp->values;
		if (!vals || !vals->name || !*vals->name)
			return error("graph '%s': sparse initializer %zu has no values name", graph_name(g), i);
		if (sp->n_dims > QM_MAX_RANK)
			return error("graph '%s': sparse initializer '%s': rank %zu exceeds %d",
				     graph_name(g), vals->name, sp->n_dims, QM_MAX_RANK);
		if (strmap_get(&sc->names, vals->name))
			continue;
		ValueType *v = vt_new();
		vt_set_tensor(v, vals->has_data_type ? vals->data_type : 0, (int)sp->n_dims);
		for (size_t d = 0; d < sp->n_dims; d++)
			v->dims[d].v = sp->dims[d];
		strmap_put(&sc->names, vals->name, v);
	}
	return 0;
}

/* declared types of g's value_info and outputs, name -> ValueType * */
static int read_declared(InferState *st, const Onnx__GraphProto *g, StrMap *decl)
{
	strmap_reserve(decl, g->n_value_info + g->n_output);
	for (size_t k = 0; k < 2; k++) {
		size_t n = k ? g->n_output : g->n_value_info;
		Onnx__ValueInfoProto **vis = k ? g->output : g->value_info;
		for (size_t i = 0; i < n; i++) {
			const Onnx__ValueInfoProto *vi = vis[i];
			if (!vi->name || !*vi->name || !vi->type)
				continue;
			char what[512];
			snprintf(what, sizeof what, "graph '%s': %s '%s'", graph_name(g),
				 k ? "output" : "value_info", vi->name);
			ValueType *v = vt_new();
			if (vt_from_proto(st->syms, vi->type, v, what) < 0) {
				vt_clear(v);
				free(v);
				return -1;
			}
			ValueType *old = strmap_get(decl, vi->name);
			if (old) {
				ValueType merged = {0};
				merged.rank = -1;
				if (vt_merge(old, v, &merged) < 0) {
					vt_clear(v);
					free(v);
					vt_clear(&merged);
					return error_prefix("%s", what);
				}
				vt_clear(old);
				*old = merged;
				vt_clear(v);
				free(v);
				continue;
			}
			strmap_put(decl, vi->name, v);
		}
	}
	return 0;
}

/* Infer g in a new scope under st->scope. in: the types bound to g's inputs
 * (subgraphs); outs: receives the types of g's outputs (nouts of them). */
static int infer_graph(InferState *st, const Onnx__GraphProto *g, size_t nin,
		       const ValueType *const *in, int is_main, ValueType *outs, size_t nouts)
{
	Scope sc = {st->scope, {0}};
	StrMap decl = {0};
	size_t *order = NULL;
	int rc = -1;
	size_t nnames = g->n_input + g->n_initializer + g->n_sparse_initializer;
	for (size_t i = 0; i < g->n_node; i++)
		nnames += g->node[i]->n_output;
	strmap_reserve(&sc.names, nnames);
	st->scope = &sc;
	if (read_declared(st, g, &decl) < 0 || add_inputs(st, g, nin, in, is_main) < 0)
		goto out;
	if (topo_order(g, &order) < 0)
		goto out;
	for (size_t i = 0; i < g->n_node; i++)
		if (infer_node(st, g->node[order[i]], &decl) < 0)
			goto out;
	GraphMemo *gm = memo_get(st, g);
	memo_clear(gm);
	gm->out = xcalloc(g->n_output ? g->n_output : 1, sizeof *gm->out);
	for (size_t i = 0; i < g->n_output; i++) {
		const Onnx__ValueInfoProto *vo = g->output[i];
		const ValueType *v = vo->name && *vo->name ? scope_lookup(&sc, vo->name) : NULL;
		gm->out[i].rank = -1;
		if (!v) {
			error("graph '%s': output '%s' refers to no tensor", graph_name(g),
			      vo->name ? vo->name : "");
			goto out;
		}
		if (vt_merge(strmap_get(&decl, vo->name), v, &gm->out[i]) < 0) {
			error_prefix("graph '%s': output '%s'", graph_name(g), vo->name);
			goto out;
		}
		if (i < nouts && vt_copy(&outs[i], &gm->out[i]) < 0)
			goto out;
		/* the model keeps types, not values */
		if (gm->out[i].value) {
			tensor_free(gm->out[i].value);
			free(gm->out[i].value);
			gm->out[i].value = NULL;
		}
	}
	for (size_t i = 0; i < g->n_node; i++)
		for (size_t j = 0; j < g->node[i]->n_output; j++)
			gm->n += g->node[i]->output[j] && *g->node[i]->output[j];
	gm->name = xcalloc(gm->n + 1, sizeof *gm->name);
	gm->node = xcalloc(gm->n + 1, sizeof *gm->node);
	gm->vt = xcalloc(gm->n + 1, sizeof *gm->vt);
	size_t k = 0;
	for (size_t i = 0; i < g->n_node; i++)
		for (size_t j = 0; j < g->node[i]->n_output; j++) {
			const char *o = g->node[i]->output[j];
			if (!o || !*o)
				continue;
			ValueType *v = strmap_get(&sc.names, o);
			gm->name[k] = o;
			gm->node[k] = g->node[i];
			gm->vt[k] = *v;   /* move; the scope entry is emptied below */
			memset(v, 0, sizeof *v);
			v->rank = -1;
			if (gm->vt[k].value) {
				tensor_free(gm->vt[k].value);
				free(gm->vt[k].value);
				gm->vt[k].value = NULL;
			}
			free(gm->vt[k].symval);
			gm->vt[k].symval = NULL;
			gm->vt[k].nsymval = 0;
			k++;
		}
	rc = 0;
out:
	st->scope = sc.parent;
	vtmap_free(&sc.names);
	vtmap_free(&decl);
	free(order);
	return rc;
}

int infer_subgraph(InferCtx *c, const Onnx__GraphProto *g, size_t nin,
		   const ValueType *const *in, size_t nout, ValueType *out)
{
	InferState *st = c->st;
	if (!st)
		return op_error(c->node, "subgraph inference called outside the inference pass");
	if (!g)
		return op_error(c->node, "missing subgraph");
	if (nin != g->n_input && !(nin == 0 && g->n_input == 0))
		return op_error(c->node, "subgraph '%s' declares %zu inputs, the operator binds %zu",
				graph_name(g), g->n_input, nin);
	if (nout != g->n_output)
		return op_error(c->node, "subgraph '%s' declares %zu outputs, the operator expects %zu",
				graph_name(g), g->n_output, nout);
	if (st->depth >= 64)
		return op_error(c->node, "subgraphs nested more than 64 deep");
	for (size_t i = 0; i < nout; i++)
		vt_clear(&out[i]);
	Scope *saved = st->scope;
	st->depth++;
	int r = infer_graph(st, g, nin, in, 0, out, nout);
	st->depth--;
	st->scope = saved;
	if (r < 0) {
		char lb[256];
		return error_prefix("node '%s' (%s): subgraph '%s'", node_label(c->node, lb, sizeof lb),
				    c->node->op_type, graph_name(g));
	}
	return 0;
}

/* ---- writing results ---- */

static int is_output(const Onnx__GraphProto *g, const char *name)
{
	for (size_t i = 0; i < g->n_output; i++)
		if (g->output[i]->name && !strcmp(g->output[i]->name, name))
			return 1;
	return 0;
}

static void commit_graph(GraphMemo *gm)
{
	Onnx__GraphProto *g = (Onnx__GraphProto *)gm->g;
	StrMap orig = {0};
	char *used = xcalloc(g->n_value_info + 1, 1);
	strmap_reserve(&orig, g->n_value_info);
	for (size_t i = 0; i < g->n_value_info; i++)
		if (g->value_info[i]->name) {
			int added;
			StrMapEnt *e = strmap_add(&orig, g->value_info[i]->name, &added);
			if (added)
				e->v.u = i;
		}
	Onnx__ValueInfoProto **nv = xcalloc(gm->n + g->n_value_info + 1, sizeof *nv);
	size_t k = 0;
	for (size_t i = 0; i < gm->n; i++) {
		const char *nm = gm->name[i];
		if (gm->vt[i].kind == VT_UNKNOWN || is_output(g, nm))
			continue;
		const StrMapEnt *e = strmap_find(&orig, nm);
		Onnx__ValueInfoProto *vi;
		if (e) {
			/* reuse the annotation (keeps its doc_string), with the merged type */
			used[e->v.u] = 1;
			vi = g->value_info[e->v.u];
			onnx__type_proto__free_unpacked(vi->type, NULL);
		} else {
			vi = xmalloc(sizeof *vi);
			onnx__value_info_proto__init(vi);
			vi->name = xstrdup(nm);
		}
		vi->type = vt_to_proto(&gm->vt[i]);
		nv[k++] = vi;
	}
	for (size_t i = 0; i < g->n_value_info; i++)
		if (!used[i])
			nv[k++] = g->value_info[i];
	free(g->value_info);
	g->value_info = nv;
	g->n_value_info = k;
	strmap_free(&orig);
	free(used);
	for (size_t i = 0; i < g->n_output; i++) {
		Onnx__ValueInfoProto *vo = g->output[i];
		Onnx__TypeProto *tp = vt_to_proto(&gm->out[i]);
		if (!tp)
			continue;
		if (vo->type) {
			if (vo->type->denotation) {
				tp->denotation = vo->type->denotation;
				vo->type->denotation = NULL;
			}
			onnx__type_proto__free_unpacked(vo->type, NULL);
		}
		vo->type = tp;
	}
}

/* Intern every dim_param of the model before inference, so that a fresh
 * "unk__N" never takes a name the model uses somewhere later. */
static void intern_type_params(SymTab *syms, const Onnx__TypeProto *tp)
{
	const Onnx__TensorShapeProto *sh = NULL;
	if (!tp)
		return;
	switch (tp->value_case) {
	case ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE:
		sh = tp->tensor_type ? tp->tensor_type->shape : NULL;
		break;
	case ONNX__TYPE_PROTO__VALUE_SPARSE_TENSOR_TYPE:
		sh = tp->sparse_tensor_type ? tp->sparse_tensor_type->shape : NULL;
		break;
	case ONNX__TYPE_PROTO__VALUE_SEQUENCE_TYPE:
		if (tp->sequence_type)
			intern_type_params(syms, tp->sequence_type->elem_type);
		return;
	case ONNX__TYPE_PROTO__VALUE_OPTIONAL_TYPE:
		if (tp->optional_type)
			intern_type_params(syms, tp->optional_type->elem_type);
		return;
	case ONNX__TYPE_PROTO__VALUE_MAP_TYPE:
		if (tp->map_type)
			intern_type_params(syms, tp->map_type->value_type);
		return;
	default:
		return;
	}
	for (size_t i = 0; sh && i < sh->n_dim; i++)
		if (sh->dim[i] && sh->dim[i]->value_case ==
		    ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM && sh->dim[i]->dim_param &&
		    *sh->dim[i]->dim_param)
			sym_intern(syms, sh->dim[i]->dim_param);
}

static void intern_graph_params(SymTab *syms, const Onnx__GraphProto *g)
{
	for (size_t i = 0; i < g->n_input; i++)
		intern_type_params(syms, g->input[i]->type);
	for (size_t i = 0; i < g->n_output; i++)
		intern_type_params(syms, g->output[i]->type);
	for (size_t i = 0; i < g->n_value_info; i++)
		intern_type_params(syms, g->value_info[i]->type);
	for (size_t i = 0; i < g->n_node; i++)
		for (size_t j = 0; j < g->node[i]->n_attribute; j++) {
			const Onnx__AttributeProto *a = g->node[i]->attribute[j];
			if (a->g)
				intern_graph_params(syms, a->g);
			for (size_t k = 0; k < a->n_graphs; k++)
				intern_graph_params(syms, a->graphs[k]);
		}
}

void infer_report_free(InferReport *r)
{
	if (!r)
		return;
	for (size_t i = 0; i < r->nmissing; i++) {
		free(r->missing[i].domain);
		free(r->missing[i].op);
		free(r->missing[i].node);
	}
	free(r->missing);
	free(r->first_untyped);
	memset(r, 0, sizeof *r);
}

int infer_model(Model *m, const InferOpts *o, InferReport *r)
{
	const Onnx__ModelProto *mp = m->proto;
	InferReport local = {0};
	InferState st = {0};
	int rc = -1;
	if (!mp || !mp->graph)
		return error("model has no graph");
	for (size_t i = 0; i < mp->n_opset_import; i++) {
		const Onnx__OperatorSetIdProto *op = mp->opset_import[i];
		const char *d = op->domain ? op->domain : "";
		if ((!*d || !strcmp(d, "ai.onnx")) && op->version > INFER_MAX_OPSET)
			return error("model imports ai.onnx opset %" PRId64 ", newer than the %d this "
				     "quantmake knows", op->version, INFER_MAX_OPSET);
	}
	if (r)
		infer_report_free(r);
	st.m = m;
	st.mp = mp;
	if (o)
		st.o = *o;
	if (st.o.const_limit == 0)
		st.o.const_limit = INFER_CONST_LIMIT;
	st.r = r ? r : &local;
	st.syms = symtab_new();
	intern_graph_params(st.syms, mp->graph);
	if (infer_graph(&st, mp->graph, 0, NULL, 1, NULL, 0) < 0)
		goto out;
	/* coverage, and the strict-mode check, before anything is written */
	for (size_t i = 0; i < st.memos.n; i++) {
		GraphMemo *gm = st.memos.v[i];
		if (gm->in_function)
			continue;
		for (size_t j = 0; j < gm->n; j++) {
			const ValueType *v = &gm->vt[j];
			st.r->ntensors++;
			if (vt_typed(v))
				st.r->ntyped++;
			else if (!st.r->first_untyped)
				st.r->first_untyped = xstrdup(gm->name[j]);
			if (v->kind == VT_TENSOR && v->rank >= 0)
				st.r->nshaped++;
			if (!vt_typed(v) && st.o.mode == INFER_STRICT) {
				char lb[256];
				error("tensor '%s' (output of node '%s' (%s)) has no inferred type "
				      "and strict mode requires one", gm->name[j],
				      node_label(gm->node[j], lb, sizeof lb), gm->node[j]->op_type);
				goto out;
			}
		}
	}
	for (size_t i = 0; i < st.memos.n; i++) {
		GraphMemo *gm = st.memos.v[i];
		if (!gm->in_function)
			commit_graph(gm);
	}
	rc = 0;
out:
	for (size_t i = 0; i < st.memos.n; i++) {
		memo_clear(st.memos.v[i]);
		free(st.memos.v[i]);
	}
	pv_free(&st.memos);
	symtab_free(st.syms);
	infer_report_free(&local);
	return rc;
}
