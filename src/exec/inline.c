/* inline.c — model-local functions expanded into the graphs that call them
 * (see inline.h).
 *
 * Nothing of the model is modified: a node or graph that changes is a
 * shallow copy (its own arrays, the model's strings and tensors) kept in an
 * arena freed at once; one that does not is the model's own. A body's value
 * names are all reserved under the call's prefix before anything of it is
 * expanded, so a nested call's prefix (CALL/inner) can never produce a name
 * its enclosing body already uses. */
#include "exec/inline.h"

#include <stdlib.h>
#include <string.h>

#include "onnx/node.h"
#include "ops/op.h"
#include "strmap.h"
#include "util.h"

/* a node copied from a function body, and that function */
typedef struct Origin {
	const Onnx__NodeProto *node;
	const Onnx__FunctionProto *f;
} Origin;

struct Inlined {
	const Onnx__ModelProto *m;
	Onnx__GraphProto *graph;
	PtrVec mem;               /* arena: every block made here */
	PtrVec unpacked;          /* attribute defaults (protobuf-c messages) */
	Origin *org;              /* sorted by node once complete */
	size_t norg, caporg;
	StrMap taken;               /* every value name of the model or made here */
	StrMap prefixes;            /* parts of taken names before a '/', and call prefixes */
	int whole;                /* the recorded error needs no more context */
};

/* one function call being expanded */
typedef struct Call {
	const struct Call *up;
	const Onnx__FunctionProto *f;
	const Onnx__NodeProto *node;  /* the calling node, in the caller's names */
	const char *prefix;
	PtrVec dflt;                  /* the function's attribute defaults */
} Call;

/* names visible at one graph level of a body: body name → expanded name */
typedef struct Scope {
	const struct Scope *up;
	StrMap names;
} Scope;

static void *amem(Inlined *in, size_t n, size_t sz)
{
	void *p = xcalloc(n ? n : 1, sz);
	pv_push(&in->mem, p);
	return p;
}

static char *astr(Inlined *in, char *s)
{
	pv_push(&in->mem, s);
	return s;
}

/* "domain.name" of f for messages, in buf */
static const char *fname(const Onnx__FunctionProto *f, char *buf, size_t size)
{
	const char *d = f->domain ? f->domain : "";
	snprintf(buf, size, "%s%s%s", d, *d ? "." : "", f->name ? f->name : "");
	return buf;
}

/* ---- names ---- */

static void take(Inlined *in, const char *name)
{
	strmap_add(&in->taken, name, NULL);
	for (const char *p = strchr(name, '/'); p; p = strchr(p + 1, '/')) {
		char *pre = xstrndup(name, (size_t)(p - name));
		if (strmap_find(&in->prefixes, pre))
			free(pre);
		else
			strmap_add(&in->prefixes, astr(in, pre), NULL);
	}
}

static const char *scoped(Inlined *in, const char *prefix, const char *name)
{
	return astr(in, xasprintf("%s/%s", prefix, name));
}

static void take_one(Inlined *in, const char *prefix, const char *name)
{
	if (name && *name)
		take(in, prefix ? scoped(in, prefix, name) : name);
}

static void take_graph(Inlined *in, const Onnx__GraphProto *g, const char *prefix);

/* reserve every value name nodes define (with their subgraphs) */
static void take_nodes(Inlined *in, Onnx__NodeProto *const *nodes, size_t nn, const char *prefix)
{
	for (size_t i = 0; i < nn; i++) {
		const Onnx__NodeProto *n = nodes[i];
		for (size_t k = 0; k < n->n_output; k++)
			take_one(in, prefix, n->output[k]);
		for (size_t a = 0; a < n->n_attribute; a++) {
			if (n->attribute[a]->g)
				take_graph(in, n->attribute[a]->g, prefix);
			for (size_t j = 0; j < n->attribute[a]->n_graphs; j++)
				take_graph(in, n->attribute[a]->graphs[j], prefix);
		}
	}
}

static void take_graph(Inlined *in, const Onnx__GraphProto *g, const char *prefix)
{
	for (size_t i = 0; i < g->n_input; i++)
		take_one(in, prefix, g->input[i]->name);
	for (size_t i = 0; i < g->n_initializer; i++)
		take_one(in, prefix, g->initializer[i]->name);
	take_nodes(in, g->node, g->n_node, prefix);
}

/* CALL, CALL_1, ...: no name of the model is CALL or starts with "CALL/" */
static const char *call_prefix(Inlined *in, const Onnx__NodeProto *n, const Onnx__FunctionProto *f)
{
	const char *base = n->name && *n->name ? n->name : f->name ? f->name : "function";
	char *p = xstrdup(base);
	for (int k = 1; strmap_find(&in->taken, p) || strmap_find(&in->prefixes, p); k++) {
		free(p);
		p = xasprintf("%s_%d", base, k);
	}
	strmap_add(&in->prefixes, astr(in, p), NULL);
	return p;
}

static const char *scope_get(const Scope *sc, const char *name)
{
	for (; sc; sc = sc->up) {
		const char *v = strmap_get(&sc->names, name);
		if (v)
			return v;
	}
	return NULL;
}

/* ---- attributes ---- */

/* the function's attribute defaults (function_attr_defaults()), owned by in */
static int load_defaults(Inlined *in, Call *c)
{
	size_t from = c->dflt.n;
	int r = function_attr_defaults(c->f, &c->dflt);
	for (size_t i = from; i < c->dflt.n; i++)
		pv_push(&in->unpacked, c->dflt.v[i]);
	return r;
}

/* the value of the call's attribute name: the caller's, else the default */
static const Onnx__AttributeProto *call_attr(const Call *c, const char *name)
{
	const Onnx__AttributeProto *a = node_attr(c->node, name);
	for (size_t i = 0; !a && i < c->dflt.n; i++) {
		const Onnx__AttributeProto *d = c->dflt.v[i];
		if (d->name && !strcmp(d->name, name))
			a = d;
	}
	return a;
}

static int is_graph_attr(const Onnx__AttributeProto *a)
{
	return a->type == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH ||
	       a->type == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPHS || a->g || a->n_graphs;
}

static int rewrite_graph(Inlined *in, const Call *call, const Scope *sc, const Onnx__GraphProto *g,
			 const Onnx__GraphProto **out);

/* n's attributes with references resolved (in a body) and subgraphs
 * rewritten; *attrs stays NULL when none changed */
static int rewrite_attrs(Inlined *in, const Call *call, const Scope *sc, const Onnx__NodeProto *n,
			 Onnx__AttributeProto ***attrs, size_t *nattr)
{
	char lb[256], fb[256];
	/* most nodes keep their attributes: the array joins the arena only
	 * when used */
	Onnx__AttributeProto **v = xcalloc(n->n_attribute ? n->n_attribute : 1, sizeof *v);
	size_t k = 0;
	int changed = 0;
	*attrs = NULL;
	for (size_t i = 0; i < n->n_attribute; i++) {
		Onnx__AttributeProto *a = n->attribute[i];
		if (a->ref_attr_name && *a->ref_attr_name) {
			if (!call) {
				free(v);
				return error("node '%s' (%s): attribute '%s' refers to '%s' outside a function",
					     node_label(n, lb, sizeof lb), n->op_type ? n->op_type : "?",
					     a->name ? a->name : "", a->ref_attr_name);
			}
			const Onnx__AttributeProto *act = call_attr(call, a->ref_attr_name);
			changed = 1;
			if (!act)
				continue; /* neither given nor defaulted: dropped */
			const char *bad = is_graph_attr(act) ? "is a graph: not supported"
					  : a->has_type && a->type && act->has_type && act->type != a->type
					  ? "has another type than the reference declares" : NULL;
			if (bad) {
				free(v);
				return error("node '%s' (%s): attribute '%s' refers to attribute '%s' of function '%s', which %s",
					     node_label(n, lb, sizeof lb), n->op_type ? n->op_type : "?",
					     a->name ? a->name : "", a->ref_attr_name, fname(call->f, fb, sizeof fb), bad);
			}
			Onnx__AttributeProto *s = amem(in, 1, sizeof *s);
			*s = *act;
			s->name = a->name;
			s->ref_attr_name = NULL;
			v[k++] = s;
			continue;
		}
		if (!a->g && !a->n_graphs) {
			v[k++] = a;
			continue;
		}
		Onnx__AttributeProto *s = amem(in, 1, sizeof *s);
		*s = *a;
		int same = 1;
		if (a->g) {
			const Onnx__GraphProto *ng;
			if (rewrite_graph(in, call, sc, a->g, &ng) < 0)
				goto bad;
			s->g = (Onnx__GraphProto *)ng;
			same &= ng == a->g;
		}
		if (a->n_graphs) {
			s->graphs = amem(in, a->n_graphs, sizeof *s->graphs);
			for (size_t j = 0; j < a->n_graphs; j++) {
				const Onnx__GraphProto *ng;
				if (rewrite_graph(in, call, sc, a->graphs[j], &ng) < 0)
					goto bad;
				s->graphs[j] = (Onnx__GraphProto *)ng;
				same &= ng == a->graphs[j];
			}
		}
		v[k++] = same ? a : s;
		changed |= !same;
		continue;
bad:
		free(v);
		if (!in->whole)
			error_prefix("node '%s' (%s), attribute '%s'", node_label(n, lb, sizeof lb),
				     n->op_type ? n->op_type : "?", a->name ? a->name : "");
		return -1;
	}
	if (changed) {
		pv_push(&in->mem, v);
		*attrs = v;
		*nattr = k;
	} else {
		free(v);
	}
	return 0;
}

/* ---- nodes and graphs ---- */

static int expand(Inlined *in, const Call *caller, const Onnx__NodeProto *n,
		  const Onnx__FunctionProto *f, PtrVec *out);

static void add_origin(Inlined *in, const Onnx__NodeProto *n, const Onnx__FunctionProto *f)
{
	if (in->norg == in->caporg) {
		in->caporg = in->caporg ? 2 * in->caporg : 64;
		in->org = xreallocarray(in->org, in->caporg, sizeof *in->org);
	}
	in->org[in->norg++] = (Origin){n, f};
}

/* append n to out as the expanded graph has it: renamed (in a body), its
 * subgraphs rewritten, or replaced by the body of the function it calls */
static int rewrite_node(Inlined *in, const Call *call, const Scope *sc, const Onnx__NodeProto *n,
			PtrVec *out, int *changed)
{
	char lb[256], fb[256];
	Onnx__AttributeProto **attrs;
	size_t nattr = 0;
	if (rewrite_attrs(in, call, sc, n, &attrs, &nattr) < 0)
		return -1;
	const Onnx__NodeProto *nn = n;
	if (call || attrs) {
		Onnx__NodeProto *c = amem(in, 1, sizeof *c);
		*c = *n;
		if (attrs) {
			c->attribute = attrs;
			c->n_attribute = nattr;
		}
		if (call) {
			if (n->name && *n->name)
				c->name = (char *)scoped(in, call->prefix, n->name);
			c->input = amem(in, n->n_input, sizeof *c->input);
			for (size_t k = 0; k < n->n_input; k++) {
				const char *nm = n->input[k] && *n->input[k] ? scope_get(sc, n->input[k]) : "";
				if (!nm)
					return error("node '%s' (%s) reads '%s', which is neither an input of function '%s' nor computed in it",
						     node_label(n, lb, sizeof lb), n->op_type ? n->op_type : "?",
						     n->input[k], fname(call->f, fb, sizeof fb));
				c->input[k] = (char *)nm;
			}
			c->output = amem(in, n->n_output, sizeof *c->output);
			for (size_t k = 0; k < n->n_output; k++) {
				const char *nm = n->output[k] && *n->output[k] ? scope_get(sc, n->output[k]) : "";
				c->output[k] = (char *)(nm ? nm : "");
			}
			add_origin(in, c, call->f);
		}
		nn = c;
		*changed = 1;
	}
	const char *dom = nn->domain ? nn->domain : "";
	const Onnx__FunctionProto *f = model_function(in->m, dom, nn->op_type);
	if (f) {
		int64_t opset = function_opset(in->m, call ? call->f : NULL, dom);
		const OpDef *d = opset > 0 ? ops_find(dom, nn->op_type, opset) : NULL;
		if (!d || !d->run) {
			*changed = 1;
			return expand(in, call, nn, f, out);
		}
	}
	pv_push(out, (void *)nn);
	return 0;
}

/* g as the expanded graph has it: *out is g itself when nothing changed
 * (outside functions, without calls) */
static int rewrite_graph(Inlined *in, const Call *call, const Scope *sc, const Onnx__GraphProto *g,
			 const Onnx__GraphProto **out)
{
	Scope sub = {.up = sc};
	PtrVec nodes = {0};
	int changed = call != NULL, r = -1;
	if (call) {
		/* its own values, renamed under the call's prefix */
		for (size_t i = 0; i < g->n_input; i++)
			if (g->input[i]->name && *g->input[i]->name)
				strmap_put(&sub.names, g->input[i]->name,
					   (char *)scoped(in, call->prefix, g->input[i]->name));
		for (size_t i = 0; i < g->n_initializer; i++)
			if (g->initializer[i]->name && *g->initializer[i]->name)
				strmap_put(&sub.names, g->initializer[i]->name,
					   (char *)scoped(in, call->prefix, g->initializer[i]->name));
		for (size_t i = 0; i < g->n_node; i++)
			for (size_t k = 0; k < g->node[i]->n_output; k++)
				if (g->node[i]->output[k] && *g->node[i]->output[k])
					strmap_put(&sub.names, g->node[i]->output[k],
						   (char *)scoped(in, call->prefix, g->node[i]->output[k]));
	}
	for (size_t i = 0; i < g->n_node; i++)
		if (rewrite_node(in, call, call ? &sub : NULL, g->node[i], &nodes, &changed) < 0)
			goto done;
	if (!changed) {
		*out = g;
		r = 0;
		goto done;
	}
	Onnx__GraphProto *ng = amem(in, 1, sizeof *ng);
	*ng = *g;
	ng->n_node = nodes.n;
	ng->node = amem(in, nodes.n, sizeof *ng->node);
	if (nodes.n)
		memcpy(ng->node, nodes.v, nodes.n * sizeof *ng->node);
	if (call) {
		/* value_info and annotations name the body's values: dropped */
		ng->n_value_info = 0;
		ng->value_info = NULL;
		ng->n_quantization_annotation = 0;
		ng->quantization_annotation = NULL;
		ng->input = amem(in, g->n_input, sizeof *ng->input);
		for (size_t i = 0; i < g->n_input; i++) {
			Onnx__ValueInfoProto *v = amem(in, 1, sizeof *v);
			*v = *g->input[i];
			v->name = (char *)scope_get(&sub, v->name ? v->name : "");
			ng->input[i] = v;
		}
		ng->initializer = amem(in, g->n_initializer, sizeof *ng->initializer);
		for (size_t i = 0; i < g->n_initializer; i++) {
			Onnx__TensorProto *t = amem(in, 1, sizeof *t);
			*t = *g->initializer[i];
			t->name = (char *)scope_get(&sub, t->name ? t->name : "");
			ng->initializer[i] = t;
		}
		ng->output = amem(in, g->n_output, sizeof *ng->output);
		for (size_t i = 0; i < g->n_output; i++) {
			Onnx__ValueInfoProto *v = amem(in, 1, sizeof *v);
			*v = *g->output[i];
			const char *nm = scope_get(&sub, v->name ? v->name : "");
			if (!nm) {
				char fb[256];
				error("graph '%s': output '%s' is neither an input of function '%s' nor computed in it",
				      g->name ? g->name : "", v->name ? v->name : "", fname(call->f, fb, sizeof fb));
				goto done;
			}
			v->name = (char *)nm;
			ng->output[i] = v;
		}
	}
	*out = ng;
	r = 0;
done:
	strmap_free(&sub.names);
	pv_free(&nodes);
	return r;
}

/* "A -> B -> A" for a recursion through f */
static void recursion_error(Inlined *in, const Call *caller, const Onnx__NodeProto *n,
			    const Onnx__FunctionProto *f)
{
	char lb[256], fb[256];
	StrBuf sb = {0};
	const Call *root = caller;
	while (root->up)
		root = root->up;
	sb_puts(&sb, fname(f, fb, sizeof fb));
	const Call *chain[64];
	size_t k = 0;
	for (const Call *c = caller; c && k < 64; c = c->up)
		chain[k++] = c;
	while (k--) {
		if (chain[k]->f == f) { /* the path starts at f's first call */
			sb_reset(&sb);
			sb_puts(&sb, fname(f, fb, sizeof fb));
		} else {
			sb_printf(&sb, " -> %s", fname(chain[k]->f, fb, sizeof fb));
		}
	}
	sb_printf(&sb, " -> %s", fname(f, fb, sizeof fb));
	error("node '%s' (%s): function '%s' is recursive (%s, called as '%s'): recursion cannot be inlined",
	      node_label(root->node, lb, sizeof lb), root->node->op_type ? root->node->op_type : "?",
	      fname(f, fb, sizeof fb), sb.buf, n->name && *n->name ? n->name : "?");
	sb_release(&sb);
	in->whole = 1;
}

static Onnx__NodeProto *identity(Inlined *in, const char *prefix, const char *from, const char *to)
{
	Onnx__NodeProto *c = amem(in, 1, sizeof *c);
	onnx__node_proto__init(c);
	c->op_type = (char *)"Identity";
	c->name = (char *)scoped(in, prefix, to);
	c->n_input = c->n_output = 1;
	c->input = amem(in, 1, sizeof *c->input);
	c->output = amem(in, 1, sizeof *c->output);
	c->input[0] = (char *)from;
	c->output[0] = (char *)to;
	return c;
}

/* append the body of f, called by n, to out */
static int expand(Inlined *in, const Call *caller, const Onnx__NodeProto *n,
		  const Onnx__FunctionProto *f, PtrVec *out)
{
	char lb[256], fb[256];
	for (const Call *c = caller; c; c = c->up)
		if (c->f == f) {
			recursion_error(in, caller, n, f);
			return -1;
		}
	if (n->n_input > f->n_input || n->n_output > f->n_output)
		return error("node '%s' (%s): function '%s' has %zu inputs and %zu outputs, the node gives %zu and %zu",
			     node_label(n, lb, sizeof lb), n->op_type, fname(f, fb, sizeof fb), f->n_input,
			     f->n_output, n->n_input, n->n_output);
	Call call = {.up = caller, .f = f, .node = n};
	Scope top = {0};
	StrMap made = {0}, bound = {0};
	PtrVec idents = {0};
	int r = -1;
	call.prefix = call_prefix(in, n, f);
	take_nodes(in, f->node, f->n_node, call.prefix);
	if (load_defaults(in, &call) < 0)
		goto done;
	for (size_t i = 0; i < f->n_input; i++)
		strmap_put(&top.names, f->input[i], i < n->n_input && n->input[i] ? n->input[i] : "");
	for (size_t i = 0; i < f->n_node; i++)
		for (size_t k = 0; k < f->node[i]->n_output; k++) {
			const char *nm = f->node[i]->output[k];
			if (nm && *nm) {
				strmap_put(&top.names, nm, (char *)scoped(in, call.prefix, nm));
				strmap_add(&made, nm, NULL);
			}
		}
	/* the caller's outputs: the body computes each under the caller's
	 * name; one that is an input, or listed twice, is copied */
	for (size_t k = 0; k < n->n_output; k++) {
		const char *act = n->output[k];
		if (!act || !*act)
			continue;
		if (!strmap_find(&top.names, f->output[k])) {
			error("function '%s': output '%s' is neither an input nor computed by its body",
			      fname(f, fb, sizeof fb), f->output[k]);
			goto done;
		}
		if (strmap_find(&made, f->output[k]) && !strmap_find(&bound, f->output[k])) {
			strmap_put(&top.names, f->output[k], (char *)act);
			strmap_add(&bound, f->output[k], NULL);
		} else {
			pv_push(&idents, (void *)(uintptr_t)k);
		}
	}
	for (size_t i = 0; i < f->n_node; i++) {
		int changed = 0;
		if (rewrite_node(in, &call, &top, f->node[i], out, &changed) < 0)
			goto done;
	}
	for (size_t i = 0; i < idents.n; i++) {
		size_t k = (size_t)(uintptr_t)idents.v[i];
		const char *from = strmap_get(&top.names, f->output[k]);
		if (!*from) {
			error("function '%s': output '%s' is one of its inputs, which node '%s' leaves out",
			      fname(f, fb, sizeof fb), f->output[k], node_label(n, lb, sizeof lb));
			goto done;
		}
		pv_push(out, identity(in, call.prefix, from, n->output[k]));
	}
	r = 0;
done:
	if (r < 0 && !in->whole)
		error_prefix("node '%s' (%s): function '%s'", node_label(n, lb, sizeof lb), n->op_type,
			     fname(f, fb, sizeof fb));
	strmap_free(&top.names);
	strmap_free(&made);
	strmap_free(&bound);
	pv_free(&idents);
	pv_free(&call.dflt);
	return r;
}

/* ---- interface ---- */

static int org_cmp(const void *a, const void *b)
{
	uintptr_t x = (uintptr_t)((const Origin *)a)->node, y = (uintptr_t)((const Origin *)b)->node;
	return x < y ? -1 : x > y;
}

int inline_functions(const Onnx__ModelProto *m, Inlined **out)
{
	*out = NULL;
	if (!m->graph || !m->n_functions)
		return 0;
	Inlined *in = xcalloc(1, sizeof *in);
	in->m = m;
	take_graph(in, m->graph, NULL);
	for (size_t i = 0; i < m->graph->n_output; i++)
		take_one(in, NULL, m->graph->output[i]->name);
	const Onnx__GraphProto *g;
	int r = rewrite_graph(in, NULL, NULL, m->graph, &g);
	strmap_free(&in->taken);
	strmap_free(&in->prefixes);
	if (r < 0 || g == m->graph) {
		inlined_free(in);
		return r;
	}
	in->graph = (Onnx__GraphProto *)g;
	qsort(in->org, in->norg, sizeof *in->org, org_cmp);
	*out = in;
	return 0;
}

const Onnx__GraphProto *inlined_graph(const Inlined *in)
{
	return in->graph;
}

int64_t inlined_opset(const Inlined *in, const Onnx__ModelProto *m, const Onnx__NodeProto *n,
		      const char *dom)
{
	const Onnx__FunctionProto *f = NULL;
	if (in && in->norg) {
		Origin key = {n, NULL};
		const Origin *o = bsearch(&key, in->org, in->norg, sizeof *in->org, org_cmp);
		if (o)
			f = o->f;
	}
	return function_opset(m, f, dom);
}

void inlined_free(Inlined *in)
{
	if (!in)
		return;
	pv_free_all(&in->mem);
	for (size_t i = 0; i < in->unpacked.n; i++)
		onnx__attribute_proto__free_unpacked(in->unpacked.v[i], NULL);
	pv_free(&in->unpacked);
	free(in->org);
	strmap_free(&in->taken);
	strmap_free(&in->prefixes);
	free(in);
}
