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
 * later one goes. Graph inputs and outputs are never merged, nor names a
 * subgraph defines again (shadowing).
 *
 * cse: nodes of the default domain with the same operator, attributes and
 * inputs compute the same thing; readers of a later one read the first's
 * outputs. Never merged: random operators, Dropout, nodes holding
 * subgraphs, nodes producing a graph output. */
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "preprocess/passes.h"

/* every name read by a node of g or of its nested subgraphs */
static int add_reads(NameSet *s, const Onnx__GraphProto *g)
{
	int added = 0;
	for (size_t i = 0; i < g->n_node; i++) {
		const Onnx__NodeProto *n = g->node[i];
		for (size_t k = 0; k < n->n_input; k++)
			added |= nameset_add(s, n->input[k]);
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
		nameset_add(&live, g->output[i]->name);
	/* reverse sweeps until nothing changes (one for a sorted graph) */
	for (int changed = 1; changed;) {
		changed = 0;
		for (size_t i = g->n_node; i-- > 0;) {
			const Onnx__NodeProto *n = g->node[i];
			if (keep[i])
				continue;
			for (size_t k = 0; k < n->n_output && !keep[i]; k++)
				keep[i] = nameset_has(&live, n->output[k]);
			if (!keep[i])
				continue;
			changed = 1;
			for (size_t k = 0; k < n->n_input; k++)
				nameset_add(&live, n->input[k]);
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
		ikeep[i] = !nm || nameset_has(&live, nm) || pg_is_input(g, nm);
	}
	nameset_free(&live);
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

/* renames from -> to (borrowed strings), open addressing */
typedef struct RenameMap {
	const char **from, **to;
	size_t cap;
} RenameMap;

static void rm_put(RenameMap *m, const char *from, const char *to)
{
	size_t i = (size_t)XXH3_64bits(from, strlen(from)) & (m->cap - 1);
	while (m->from[i])
		i = (i + 1) & (m->cap - 1);
	m->from[i] = from;
	m->to[i] = to;
}

static const char *rm_get(const RenameMap *m, const char *from)
{
	for (size_t i = (size_t)XXH3_64bits(from, strlen(from)) & (m->cap - 1); m->from[i]; i = (i + 1) & (m->cap - 1))
		if (!strcmp(m->from[i], from))
			return m->to[i];
	return NULL;
}

/* apply m to every read in g and its nested subgraphs, in one sweep */
static void rm_apply(const RenameMap *m, Onnx__GraphProto *g)
{
	for (size_t i = 0; i < g->n_node; i++) {
		Onnx__NodeProto *n = g->node[i];
		for (size_t k = 0; k < n->n_input; k++) {
			const char *to = *n->input[k] ? rm_get(m, n->input[k]) : NULL;
			if (to) {
				free(n->input[k]);
				n->input[k] = xstrdup(to);
			}
		}
		for (size_t a = 0; a < n->n_attribute; a++) {
			if (n->attribute[a]->g)
				rm_apply(m, n->attribute[a]->g);
			for (size_t k = 0; k < n->attribute[a]->n_graphs; k++)
				rm_apply(m, n->attribute[a]->graphs[k]);
		}
	}
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
	RenameMap map = {0};
	map.cap = 16;
	while (map.cap < nk * 2)
		map.cap *= 2;
	map.from = xcalloc(map.cap, sizeof *map.from);
	map.to = xcalloc(map.cap, sizeof *map.to);
	size_t nmap = 0;
	for (size_t i = 0; i < nk && r == 0; i++)
		for (size_t p = 0; p < i; p++) {
			if (drop[p] || k[p].h != k[i].h || k[p].len != k[i].len || !same_shape(k[p].t, k[i].t) ||
			    memcmp(k[p].data, k[i].data, k[i].len) || pg_sub_defines(g, k[p].t->name))
				continue;
			rm_put(&map, k[i].t->name, k[p].t->name);
			nmap++;
			drop[i] = 1;
			c->stat->changed++;
			break;
		}
	if (nmap)
		rm_apply(&map, g);
	free(map.from);
	free(map.to);
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

/* ---- cse ---- */

static const char *const impure[] = {
	"RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike", "Multinomial", "Bernoulli", "Dropout",
};

/* the identity of what n computes: domain, op, inputs, attributes (bytes);
 * 0 when n must not be merged (subgraphs, random ops, no outputs) */
static int node_key(const Onnx__NodeProto *n, StrBuf *sb)
{
	sb_reset(sb);
	/* other domains may hold state or draw random numbers */
	if (!n->n_output || (n->domain && *n->domain && strcmp(n->domain, "ai.onnx")))
		return 0;
	for (size_t i = 0; i < ARRAY_LEN(impure); i++)
		if (!strcmp(n->op_type, impure[i]))
			return 0;
	sb_puts(sb, n->domain ? n->domain : "");
	sb_putc(sb, 0);
	sb_puts(sb, n->op_type);
	sb_putc(sb, 0);
	sb_printf(sb, "%zu/%zu", n->n_input, n->n_output);
	sb_putc(sb, 0);
	for (size_t k = 0; k < n->n_input; k++) {
		sb_puts(sb, n->input[k]);
		sb_putc(sb, 0);
	}
	for (size_t k = 0; k < n->n_output; k++)
		sb_putc(sb, *n->output[k] ? 1 : 0);
	for (size_t a = 0; a < n->n_attribute; a++) {
		const Onnx__AttributeProto *at = n->attribute[a];
		if (at->g || at->n_graphs)
			return 0;
		size_t len = onnx__attribute_proto__get_packed_size(at);
		sb_grow(sb, len + 32);
		sb_printf(sb, "%zu:", len);
		onnx__attribute_proto__pack(at, (uint8_t *)sb->buf + sb->len);
		sb->len += len;
		sb->buf[sb->len] = 0;
	}
	return 1;
}

typedef struct CseEntry {
	uint64_t h;
	char *key;
	size_t len;
	const Onnx__NodeProto *n;
} CseEntry;

/* merged nodes are marked and dropped at the end; their readers are
 * renamed as the sweep reaches them (their keys need the names) and once
 * more at the end for nested subgraphs */
int prep_cse(PrepCtx *c, Onnx__GraphProto *g)
{
	size_t cap = 64;
	while (cap < g->n_node * 2)
		cap *= 2;
	CseEntry *t = xcalloc(cap, sizeof *t);
	StrBuf sb = {0};
	NameSet sub = {0};
	NameMap ren = {0};
	pg_sub_names(g, &sub);
	char *gone = xcalloc(g->n_node ? g->n_node : 1, 1);
	for (size_t i = 0; i < g->n_node; i++) {
		Onnx__NodeProto *n = g->node[i];
		pg_rename_node_inputs(n, &ren);
		if (!node_key(n, &sb))
			continue;
		uint64_t h = XXH3_64bits(sb.buf, sb.len);
		size_t s = (size_t)h & (cap - 1);
		while (t[s].key && !(t[s].h == h && t[s].len == sb.len && !memcmp(t[s].key, sb.buf, sb.len)))
			s = (s + 1) & (cap - 1);
		if (!t[s].key) {
			t[s] = (CseEntry){h, xmalloc(sb.len + 1), sb.len, n};
			memcpy(t[s].key, sb.buf, sb.len);
			continue;
		}
		/* n computes what t[s].n does: its readers read the first one's outputs */
		const Onnx__NodeProto *first = t[s].n;
		int ok = 1;
		for (size_t k = 0; k < n->n_output && ok; k++)
			if (*n->output[k] && (pg_is_output(g, n->output[k]) || nameset_has(&sub, n->output[k]) ||
					      nameset_has(&sub, first->output[k])))
				ok = 0;
		if (!ok)
			continue;
		for (size_t k = 0; k < n->n_output; k++)
			if (*n->output[k])
				namemap_put(&ren, n->output[k], xstrdup(first->output[k]));
		gone[i] = 1;
		c->stat->changed++;
	}
	pg_apply_renames(g, &ren);
	pg_drop_nodes(g, gone);
	pg_renames_free(&ren);
	nameset_free(&sub);
	free(gone);
	for (size_t s = 0; s < cap; s++)
		free(t[s].key);
	free(t);
	sb_release(&sb);
	return pg_each_subgraph(c, g, prep_cse);
}
