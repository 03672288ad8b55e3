/* graph.c — graph-editing helpers (see graph.h). */
#include "quant/graph.h"

#include "onnx/node.h"
#include "strmap.h"

#include <search.h>
#include <stdlib.h>
#include <string.h>

Onnx__NodeProto *qg_node(const char *op, const char *name, size_t nin, const char *const *in,
			 size_t nout, const char *const *out)
{
	Onnx__NodeProto *n = xmalloc(sizeof *n);
	onnx__node_proto__init(n);
	n->op_type = xstrdup(op);
	n->name = xstrdup(name);
	n->domain = xstrdup("");
	n->n_input = nin;
	n->input = xcalloc(nin ? nin : 1, sizeof *n->input);
	for (size_t i = 0; i < nin; i++)
		n->input[i] = xstrdup(in[i]);
	n->n_output = nout;
	n->output = xcalloc(nout ? nout : 1, sizeof *n->output);
	for (size_t i = 0; i < nout; i++)
		n->output[i] = xstrdup(out[i]);
	return n;
}

void qg_import(Onnx__ModelProto *m, const char *domain, int64_t version)
{
	for (size_t i = 0; i < m->n_opset_import; i++)
		if (!strcmp(m->opset_import[i]->domain ? m->opset_import[i]->domain : "", domain))
			return;
	Onnx__OperatorSetIdProto *o = xmalloc(sizeof *o);
	onnx__operator_set_id_proto__init(o);
	o->domain = xstrdup(domain);
	o->has_version = 1;
	o->version = version;
	m->opset_import = xreallocarray(m->opset_import, m->n_opset_import + 1, sizeof *m->opset_import);
	m->opset_import[m->n_opset_import++] = o;
}

void qg_attr_move(Onnx__NodeProto *n, Onnx__AttributeProto *attr)
{
	n->attribute = xreallocarray(n->attribute, n->n_attribute + 1, sizeof *n->attribute);
	n->attribute[n->n_attribute++] = attr;
}

void qg_attr_int(Onnx__NodeProto *n, const char *name, int64_t v)
{
	Onnx__AttributeProto *a = node_attr_add(n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT);
	a->has_i = 1;
	a->i = v;
}

void qg_set_input(Onnx__NodeProto *n, size_t i, const char *name)
{
	free(n->input[i]);
	n->input[i] = xstrdup(name);
}

void qg_push(Onnx__NodeProto ***v, size_t *n, Onnx__NodeProto *node)
{
	*v = xreallocarray(*v, *n + 1, sizeof **v);
	(*v)[(*n)++] = node;
}

Onnx__TensorProto *qg_init(const Onnx__GraphProto *g, const char *name)
{
	for (size_t i = 0; i < g->n_initializer; i++)
		if (g->initializer[i]->name && !strcmp(g->initializer[i]->name, name))
			return g->initializer[i];
	return NULL;
}

char *qg_unique_name(const Onnx__GraphProto *g, const char *base)
{
	char *s = xstrdup(base);
	for (int k = 2; qg_init(g, s); k++) {
		free(s);
		s = xasprintf("%s_%d", base, k);
	}
	return s;
}

void qg_add_init(Onnx__GraphProto *g, const char *name, Tensor *t)
{
	Onnx__TensorProto *p = tensor_to_proto(t, name);
	tensor_free(t);
	g->initializer = xreallocarray(g->initializer, g->n_initializer + 1, sizeof *g->initializer);
	g->initializer[g->n_initializer++] = p;
}

void qg_add_values(Onnx__GraphProto *g, const char *name, int dtype, int rank, const int64_t *dims,
		   const void *data)
{
	Tensor t = {0};
	if (tensor_alloc(&t, dtype, rank, dims) < 0)
		fatalx(1, "%s", errmsg());
	memcpy(t.data, data, t.nbytes);
	qg_add_init(g, name, &t);
}

void qg_add_scalar_f(Onnx__GraphProto *g, const char *name, float v)
{
	qg_add_values(g, name, DT_FLOAT, 0, NULL, &v);
}

Onnx__NodeProto *qg_producer(const Onnx__GraphProto *g, const char *name)
{
	for (size_t i = 0; i < g->n_node; i++)
		for (size_t k = 0; k < g->node[i]->n_output; k++)
			if (!strcmp(g->node[i]->output[k], name))
				return g->node[i];
	return NULL;
}

int qg_is_output(const Onnx__GraphProto *g, const char *name)
{
	for (size_t i = 0; i < g->n_output; i++)
		if (g->output[i]->name && !strcmp(g->output[i]->name, name))
			return 1;
	return 0;
}

int qg_has_consumer(const Onnx__GraphProto *g, const char *name, const Onnx__NodeProto *skip)
{
	for (size_t i = 0; i < g->n_node; i++) {
		if (g->node[i] == skip)
			continue;
		for (size_t k = 0; k < g->node[i]->n_input; k++)
			if (!strcmp(g->node[i]->input[k], name))
				return 1;
	}
	return 0;
}

/* does a node of g, or of a subgraph of its nodes at any depth, read name?
 * (a body that defines name itself still counts: a harmless keep) */
static int read_anywhere(const Onnx__GraphProto *g, const char *name)
{
	return qg_has_consumer(g, name, NULL) || qg_read_in_subgraphs(g, name);
}

int qg_read_in_subgraphs(const Onnx__GraphProto *g, const char *name)
{
	for (size_t i = 0; i < g->n_node; i++)
		for (size_t k = 0; k < g->node[i]->n_attribute; k++) {
			const Onnx__AttributeProto *a = g->node[i]->attribute[k];
			if (a->g && read_anywhere(a->g, name))
				return 1;
			for (size_t j = 0; j < a->n_graphs; j++)
				if (read_anywhere(a->graphs[j], name))
					return 1;
		}
	return 0;
}

int qg_defines(const Onnx__GraphProto *g, const char *name)
{
	for (size_t i = 0; i < g->n_input; i++)
		if (g->input[i]->name && !strcmp(g->input[i]->name, name))
			return 1;
	for (size_t i = 0; i < g->n_node; i++)
		for (size_t k = 0; k < g->node[i]->n_output; k++)
			if (!strcmp(g->node[i]->output[k], name))
				return 1;
	return 0;
}

char *qg_scope(const char *outer, const Onnx__NodeProto *n, const Onnx__AttributeProto *a)
{
	char lab[256];
	const char *an = a->name ? a->name : "";
	size_t len = strlen(an);
	int branch = len > 7 && !strcmp(an + len - 7, "_branch");
	return xasprintf("%s%s%s/%.*s", outer ? outer : "", outer ? "/" : "", node_label(n, lab, sizeof lab),
			 (int)(branch ? len - 7 : len), an);
}

void qg_drop_unused_init(Onnx__GraphProto *g, const char *name)
{
	if (read_anywhere(g, name) || qg_is_output(g, name))
		return;
	for (size_t i = 0; i < g->n_initializer; i++)
		if (g->initializer[i]->name && !strcmp(g->initializer[i]->name, name)) {
			onnx__tensor_proto__free_unpacked(g->initializer[i], NULL);
			memmove(g->initializer + i, g->initializer + i + 1,
				(g->n_initializer - i - 1) * sizeof *g->initializer);
			g->n_initializer--;
			break;
		}
	/* an initializer listed among the graph inputs (IR < 4) goes too */
	for (size_t i = 0; i < g->n_input; i++)
		if (g->input[i]->name && !strcmp(g->input[i]->name, name)) {
			onnx__value_info_proto__free_unpacked(g->input[i], NULL);
			memmove(g->input + i, g->input + i + 1, (g->n_input - i - 1) * sizeof *g->input);
			g->n_input--;
			break;
		}
}

/* a graph and the scopes around it; defs: the names g defines (graph
 * inputs, node outputs, initializers), borrowed from g */
typedef struct Scope {
	const Onnx__GraphProto *g;
	const struct Scope *up;
	StrMap defs;
} Scope;

/* is name defined in s or an enclosing scope: node output, graph input or
 * initializer? */
static int defined_in(const Scope *s, const char *name)
{
	for (; s; s = s->up)
		if (strmap_find(&s->defs, name))
			return 1;
	return 0;
}

/* One table of names per scope: looking each value_info up in the lists
 * was quadratic (silero-vad: 700 entries against 700 names). */
static void prune(Onnx__GraphProto *g, const Scope *up)
{
	Scope here = {g, up, {0}};
	for (size_t i = 0; i < g->n_input; i++)
		if (g->input[i]->name)
			strmap_add(&here.defs, g->input[i]->name, NULL);
	for (size_t i = 0; i < g->n_node; i++)
		for (size_t k = 0; k < g->node[i]->n_output; k++)
			strmap_add(&here.defs, g->node[i]->output[k], NULL);
	for (size_t i = 0; i < g->n_initializer; i++)
		if (g->initializer[i]->name)
			strmap_add(&here.defs, g->initializer[i]->name, NULL);
	size_t w = 0;
	for (size_t i = 0; i < g->n_value_info; i++) {
		Onnx__ValueInfoProto *v = g->value_info[i];
		if (v->name && defined_in(&here, v->name))
			g->value_info[w++] = v;
		else
			onnx__value_info_proto__free_unpacked(v, NULL);
	}
	g->n_value_info = w;
	for (size_t i = 0; i < g->n_node; i++)
		for (size_t k = 0; k < g->node[i]->n_attribute; k++) {
			Onnx__AttributeProto *a = g->node[i]->attribute[k];
			if (a->g)
				prune(a->g, &here);
			for (size_t j = 0; j < a->n_graphs; j++)
				prune(a->graphs[j], &here);
		}
	strmap_free(&here.defs);
}

void qg_prune_value_info(Onnx__GraphProto *g)
{
	prune(g, NULL);
}

static int cmp_name(const void *a, const void *b)
{
	return strcmp(a, b);
}

void qg_name_add(QNames *s, const char *name)
{
	if (!name || !*name || tfind(name, &s->root, cmp_name))
		return;
	char *c = xstrdup(name);
	if (!tsearch(c, &s->root, cmp_name))
		fatalx(1, "out of memory");
}

int qg_name_taken(const QNames *s, const char *name)
{
	return tfind(name, (void **)&s->root, cmp_name) != NULL;
}

char *qg_name_fresh(QNames *s, const char *base)
{
	char *n = xstrdup(base);
	for (int k = 2; qg_name_taken(s, n); k++) {
		free(n);
		n = xasprintf("%s_%d", base, k);
	}
	qg_name_add(s, n);
	return n;
}

void qg_names_collect(QNames *s, const Onnx__GraphProto *g)
{
	for (size_t i = 0; i < g->n_input; i++)
		qg_name_add(s, g->input[i]->name);
	for (size_t i = 0; i < g->n_output; i++)
		qg_name_add(s, g->output[i]->name);
	for (size_t i = 0; i < g->n_initializer; i++)
		qg_name_add(s, g->initializer[i]->name);
	for (size_t i = 0; i < g->n_value_info; i++)
		qg_name_add(s, g->value_info[i]->name);
	for (size_t i = 0; i < g->n_node; i++) {
		const Onnx__NodeProto *n = g->node[i];
		qg_name_add(s, n->name);
		for (size_t k = 0; k < n->n_input; k++)
			qg_name_add(s, n->input[k]);
		for (size_t k = 0; k < n->n_output; k++)
			qg_name_add(s, n->output[k]);
		for (size_t k = 0; k < n->n_attribute; k++) {
			const Onnx__AttributeProto *a = n->attribute[k];
			if (a->g)
				qg_names_collect(s, a->g);
			for (size_t j = 0; j < a->n_graphs; j++)
				qg_names_collect(s, a->graphs[j]);
		}
	}
}

void qg_names_free(QNames *s)
{
	tdestroy(s->root, free);
	s->root = NULL;
}
