/* dce.c — the dce and dedup passes (see passes.h).
 *
 * dce: the graph outputs are the roots; a node is live when a live value
 * reads one of its outputs, and a live node keeps its inputs and every name
 * its subgraphs read live. Dead nodes go, and initializers nothing live
 * reads (unless they are graph inputs too: those are part of the model's
 * interface, like every graph input). Live nodes' subgraphs are cleaned the
 * same way with their own outputs as roots.
 *
 * dedup: initializers of the main graph with the same element type, dims
 * and bytes are shared: readers of a later one read the first, and the
 * later one goes. Graph inputs and outputs are never merged. */
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "preprocess/passes.h"

/* ---- a set of strings (borrowed pointers), open addressing ---- */
typedef struct NameSet {
	const char **v;
	size_t cap, n;
} NameSet;

static size_t name_hash(const char *s)
{
	return (size_t)XXH3_64bits(s, strlen(s));
}

static int ns_has(const NameSet *s, const char *name)
{
	if (!s->cap)
		return 0;
	for (size_t i = name_hash(name) & (s->cap - 1);; i = (i + 1) & (s->cap - 1)) {
		if (!s->v[i])
			return 0;
		if (!strcmp(s->v[i], name))
			return 1;
	}
}

/* 1 if added, 0 if present */
static int ns_add(NameSet *s, const char *name)
{
	if (!*name || ns_has(s, name))
		return 0;
	if ((s->n + 1) * 2 > s->cap) {
		NameSet t = {xcalloc(s->cap ? s->cap * 2 : 64, sizeof *t.v), s->cap ? s->cap * 2 : 64, 0};
		for (size_t i = 0; i < s->cap; i++)
			if (s->v[i])
				ns_add(&t, s->v[i]);
		free(s->v);
		*s = t;
	}
	size_t i = name_hash(name) & (s->cap - 1);
	while (s->v[i])
		i = (i + 1) & (s->cap - 1);
	s->v[i] = name;
	s->n++;
	return 1;
}

/* every name read by a node of g or of its nested subgraphs */
static int add_reads(NameSet *s, const Onnx__GraphProto *g)
{
	int added = 0;
	for (size_t i = 0; i < g->n_node; i++) {
		const Onnx__NodeProto *n = g->node[i];
		for (size_t k = 0; k < n->n_input; k++)
			added |= ns_add(s, n->input[k]);
		for (size_t a = 0; a < n->n_attribute; a++) {
			if (n->attribute[a]->g)
				added |= add_reads(s, n->attribute[a]->g);
			for (size_t k = 0; k < n->attribute[a]->n_graphs; k++)
				added |= add_reads(s, n->attribute[a]->graphs[k]);
		}
	}
	return added;
}

int prep_dce(PrepCtx *c, Onnx__GraphProto *g)
{
	NameSet live = {0};
	char *keep = xcalloc(g->n_node ? g->n_node : 1, 1);
	for (size_t i = 0; i < g->n_output; i++)
		ns_add(&live, g->output[i]->name);
	/* reverse sweeps until nothing changes (one for a sorted graph) */
	for (int changed = 1; changed;) {
		changed = 0;
		for (size_t i = g->n_node; i-- > 0;) {
			const Onnx__NodeProto *n = g->node[i];
			if (keep[i])
				continue;
			for (size_t k = 0; k < n->n_output && !keep[i]; k++)
				keep[i] = ns_has(&live, n->output[k]);
			if (!keep[i])
				continue;
			changed = 1;
			for (size_t k = 0; k < n->n_input; k++)
				ns_add(&live, n->input[k]);
			for (size_t a = 0; a < n->n_attribute; a++) {
				if (n->attribute[a]->g)
					add_reads(&live, n->attribute[a]->g);
				for (size_t k = 0; k < n->attribute[a]->n_graphs; k++)
					add_reads(&live, n->attribute[a]->graphs[k]);
			}
		}
	}
	/* the set borrows names of nodes about to be freed: test initializers first */
	char *ikeep = xcalloc(g->n_initializer ? g->n_initializer : 1, 1);
	for (size_t i = 0; i < g->n_initializer; i++) {
		const char *nm = g->initializer[i]->name;
		ikeep[i] = !nm || ns_has(&live, nm) || pg_is_input(g, nm);
	}
	free(live.v);
	size_t j = 0;
	for (size_t i = 0; i < g->n_initializer; i++) {
		if (ikeep[i])
			g->initializer[j++] = g->initializer[i];
		else {
			onnx__tensor_proto__free_unpacked(g->initializer[i], NULL);
			c->stat->changed++;
		}
	}
	g->n_initializer = j;
	j = 0;
	for (size_t i = 0; i < g->n_node; i++) {
		if (keep[i])
			g->node[j++] = g->node[i];
		else {
			onnx__node_proto__free_unpacked(g->node[i], NULL);
			c->stat->changed++;
		}
	}
	g->n_node = j;
	free(keep);
	free(ikeep);
	return pg_each_subgraph(c, g, prep_dce);
}

typedef struct InitKey {
	Onnx__TensorProto *t;
	uint64_t h;
	const void *data;
	size_t len;
	int owned;
} InitKey;

static int same_shape(const Onnx__TensorProto *a, const Onnx__TensorProto *b)
{
	if (a->data_type != b->data_type || a->n_dims != b->n_dims)
		return 0;
	for (size_t i = 0; i < a->n_dims; i++)
		if (a->dims[i] != b->dims[i])
			return 0;
	return 1;
}

int prep_dedup(PrepCtx *c, Onnx__GraphProto *g)
{
	size_t n = g->n_initializer;
	InitKey *k = xcalloc(n ? n : 1, sizeof *k);
	size_t nk = 0;
	int r = 0;
	for (size_t i = 0; i < n && r == 0; i++) {
		Onnx__TensorProto *t = g->initializer[i];
		if (!t->name || pg_is_input(g, t->name) || pg_is_output(g, t->name) || t->data_type == DT_STRING ||
		    t->data_type == DT_UNDEFINED || pg_sub_defines(g, t->name))
			continue;
		InitKey *e = &k[nk];
		if (model_tensor_bytes(c->m, t, &e->data, &e->len, &e->owned) < 0) {
			r = error_prefix("initializer '%s'", t->name);
			break;
		}
		e->t = t;
		e->h = XXH3_64bits(e->data, e->len);
		nk++;
	}
	/* a later duplicate of an earlier kept one: readers switch, it goes */
	char *drop = xcalloc(nk ? nk : 1, 1);
	for (size_t i = 0; i < nk && r == 0; i++)
		for (size_t p = 0; p < i; p++) {
			if (drop[p] || k[p].h != k[i].h || k[p].len != k[i].len || !same_shape(k[p].t, k[i].t) ||
			    memcmp(k[p].data, k[i].data, k[i].len))
				continue;
			pg_rename_uses(g, k[i].t->name, k[p].t->name);
			drop[i] = 1;
			c->stat->changed++;
			break;
		}
	for (size_t i = 0; i < nk; i++)
		if (k[i].owned)
			free((void *)k[i].data);
	size_t j = 0;
	/* k[] follows the initializer order */
	for (size_t i = 0, q = 0; i < g->n_initializer; i++) {
		Onnx__TensorProto *t = g->initializer[i];
		int d = 0;
		if (q < nk && k[q].t == t)
			d = drop[q++];
		if (d)
			onnx__tensor_proto__free_unpacked(t, NULL);
		else
			g->initializer[j++] = t;
	}
	g->n_initializer = j;
	free(drop);
	free(k);
	return r;
}
