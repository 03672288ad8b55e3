/* graph.c — graph helpers shared by the preprocess passes (see passes.h).
 *
 * Names are compared by string; nested subgraphs see the names of their
 * enclosing graphs, so a rename reaches into them, and a rewrite that a
 * subgraph's own definition of a name could shadow is refused. */
#include <stdlib.h>
#include <string.h>

#include "onnx/extdata.h"
#include "preprocess/passes.h"

/* ---- names: sets and maps over strmap.h ---- */

int nameset_has(const NameSet *s, const char *name)
{
	return strmap_find(s, name) != NULL;
}

int nameset_add(NameSet *s, const char *name)
{
	int added = 0;
	if (*name)
		strmap_add(s, name, &added);
	return added;
}

void nameset_free(NameSet *s)
{
	strmap_free(s);
}

void *namemap_get(const NameMap *m, const char *name)
{
	return strmap_get(m, name);
}

void namemap_put(NameMap *m, const char *name, void *v)
{
	strmap_put(m, name, v);
}

void namemap_free(NameMap *m)
{
	strmap_free(m);
}

static int streq(const char *a, const char *b)
{
	return a && b && !strcmp(a, b);
}

size_t pg_uses(const Onnx__GraphProto *g, const char *name)
{
	size_t n = 0;
	for (size_t i = 0; i < g->n_node; i++) {
		const Onnx__NodeProto *nd = g->node[i];
		for (size_t k = 0; k < nd->n_input; k++)
			if (streq(nd->input[k], name))
				n++;
		for (size_t a = 0; a < nd->n_attribute; a++) {
			const Onnx__AttributeProto *at = nd->attribute[a];
			if (at->g)
				n += pg_uses(at->g, name);
			for (size_t k = 0; k < at->n_graphs; k++)
				n += pg_uses(at->graphs[k], name);
		}
	}
	return n;
}

int pg_is_output(const Onnx__GraphProto *g, const char *name)
{
	for (size_t i = 0; i < g->n_output; i++)
		if (streq(g->output[i]->name, name))
			return 1;
	return 0;
}

int pg_is_input(const Onnx__GraphProto *g, const char *name)
{
	for (size_t i = 0; i < g->n_input; i++)
		if (streq(g->input[i]->name, name))
			return 1;
	return 0;
}

Onnx__TensorProto *pg_init(const Onnx__GraphProto *g, const char *name)
{
	for (size_t i = 0; i < g->n_initializer; i++)
		if (streq(g->initializer[i]->name, name))
			return g->initializer[i];
	return NULL;
}

long pg_producer(const Onnx__GraphProto *g, const char *name)
{
	for (size_t i = 0; i < g->n_node; i++)
		for (size_t k = 0; k < g->node[i]->n_output; k++)
			if (streq(g->node[i]->output[k], name))
				return (long)i;
	return -1;
}

static int graph_defines(const Onnx__GraphProto *g, const char *name)
{
	return pg_is_input(g, name) || pg_init(g, name) || pg_producer(g, name) >= 0 || pg_sub_defines(g, name);
}

int pg_sub_defines(const Onnx__GraphProto *g, const char *name)
{
	for (size_t i = 0; i < g->n_node; i++) {
		const Onnx__NodeProto *nd = g->node[i];
		for (size_t a = 0; a < nd->n_attribute; a++) {
			const Onnx__AttributeProto *at = nd->attribute[a];
			if (at->g && graph_defines(at->g, name))
				return 1;
			for (size_t k = 0; k < at->n_graphs; k++)
				if (graph_defines(at->graphs[k], name))
					return 1;
		}
	}
	return 0;
}

void pg_rename_uses(Onnx__GraphProto *g, const char *from, const char *to)
{
	for (size_t i = 0; i < g->n_node; i++) {
		Onnx__NodeProto *nd = g->node[i];
		for (size_t k = 0; k < nd->n_input; k++)
			if (streq(nd->input[k], from)) {
				free(nd->input[k]);
				nd->input[k] = xstrdup(to);
			}
		for (size_t a = 0; a < nd->n_attribute; a++) {
			Onnx__AttributeProto *at = nd->attribute[a];
			if (at->g)
				pg_rename_uses(at->g, from, to);
			for (size_t k = 0; k < at->n_graphs; k++)
				pg_rename_uses(at->graphs[k], from, to);
		}
	}
}

static void graph_names(const Onnx__GraphProto *g, NameSet *s)
{
	for (size_t i = 0; i < g->n_input; i++)
		if (g->input[i]->name)
			nameset_add(s, g->input[i]->name);
	for (size_t i = 0; i < g->n_initializer; i++)
		if (g->initializer[i]->name)
			nameset_add(s, g->initializer[i]->name);
	for (size_t i = 0; i < g->n_node; i++)
		for (size_t k = 0; k < g->node[i]->n_output; k++)
			nameset_add(s, g->node[i]->output[k]);
	pg_sub_names(g, s);
}

void pg_sub_names(const Onnx__GraphProto *g, NameSet *s)
{
	for (size_t i = 0; i < g->n_node; i++) {
		const Onnx__NodeProto *nd = g->node[i];
		for (size_t a = 0; a < nd->n_attribute; a++) {
			const Onnx__AttributeProto *at = nd->attribute[a];
			if (at->g)
				graph_names(at->g, s);
			for (size_t k = 0; k < at->n_graphs; k++)
				graph_names(at->graphs[k], s);
		}
	}
}

void pg_rename_node_inputs(Onnx__NodeProto *n, const NameMap *m)
{
	for (size_t k = 0; k < n->n_input; k++) {
		const char *to = *n->input[k] ? namemap_get(m, n->input[k]) : NULL;
		if (!to)
			continue;
		/* a chain (a renamed name renamed again later, in an unsorted
		 * graph) ends at its last name; at most m->n steps */
		for (size_t s = 0; s < m->n; s++) {
			const char *t = namemap_get(m, to);
			if (!t)
				break;
			to = t;
		}
		free(n->input[k]);
		n->input[k] = xstrdup(to);
	}
}

void pg_renames_free(NameMap *m)
{
	for (StrMapEnt *e = NULL; (e = strmap_next(m, e));)
		free(e->v.p);
	namemap_free(m);
}

void pg_apply_renames(Onnx__GraphProto *g, const NameMap *m)
{
	if (!m->n)
		return;
	for (size_t i = 0; i < g->n_node; i++) {
		Onnx__NodeProto *nd = g->node[i];
		pg_rename_node_inputs(nd, m);
		for (size_t a = 0; a < nd->n_attribute; a++) {
			Onnx__AttributeProto *at = nd->attribute[a];
			if (at->g)
				pg_apply_renames(at->g, m);
			for (size_t k = 0; k < at->n_graphs; k++)
				pg_apply_renames(at->graphs[k], m);
		}
	}
}

void pg_drop_nodes(Onnx__GraphProto *g, const char *gone)
{
	size_t j = 0;
	for (size_t i = 0; i < g->n_node; i++) {
		if (gone[i])
			onnx__node_proto__free_unpacked(g->node[i], NULL);
		else
			g->node[j++] = g->node[i];
	}
	g->n_node = j;
}

void pg_remove_node(Onnx__GraphProto *g, size_t i)
{
	onnx__node_proto__free_unpacked(g->node[i], NULL);
	memmove(g->node + i, g->node + i + 1, (g->n_node - i - 1) * sizeof *g->node);
	g->n_node--;
}

int pg_bypass(Onnx__GraphProto *g, size_t i, const char *in, const char *out)
{
	if (!in || !*in || !out || !*out || streq(in, out))
		return 0;
	if (pg_sub_defines(g, in) || pg_sub_defines(g, out))
		return 0;
	if (!pg_is_output(g, out)) {
		char *from = xstrdup(out), *to = xstrdup(in);
		pg_remove_node(g, i);
		pg_rename_uses(g, from, to);
		free(from);
		free(to);
		return 1;
	}
	/* out must keep its name: give it to the producer of in */
	if (pg_is_output(g, in) || pg_is_input(g, in) || pg_init(g, in))
		return 0;
	long p = pg_producer(g, in);
	if (p < 0)
		return 0;
	char *from = xstrdup(in), *to = xstrdup(out);
	Onnx__NodeProto *prod = g->node[p];
	pg_remove_node(g, i);
	for (size_t k = 0; k < prod->n_output; k++)
		if (streq(prod->output[k], from)) {
			free(prod->output[k]);
			prod->output[k] = xstrdup(to);
		}
	pg_rename_uses(g, from, to);
	free(from);
	free(to);
	return 1;
}

static void name_add(StrMap *m, const char *name)
{
	int added;
	StrMapEnt *e = name && *name ? strmap_add(m, name, &added) : NULL;
	if (e && added)
		strmap_own_key(e);
}

/* every name graph g and its subgraphs define or read, into m */
static void collect_names(StrMap *m, const Onnx__GraphProto *g)
{
	for (size_t i = 0; i < g->n_input; i++)
		name_add(m, g->input[i]->name);
	for (size_t i = 0; i < g->n_output; i++)
		name_add(m, g->output[i]->name);
	for (size_t i = 0; i < g->n_initializer; i++)
		name_add(m, g->initializer[i]->name);
	for (size_t i = 0; i < g->n_value_info; i++)
		name_add(m, g->value_info[i]->name);
	for (size_t i = 0; i < g->n_node; i++) {
		const Onnx__NodeProto *nd = g->node[i];
		for (size_t k = 0; k < nd->n_input; k++)
			name_add(m, nd->input[k]);
		for (size_t k = 0; k < nd->n_output; k++)
			name_add(m, nd->output[k]);
		for (size_t a = 0; a < nd->n_attribute; a++) {
			if (nd->attribute[a]->g)
				collect_names(m, nd->attribute[a]->g);
			for (size_t k = 0; k < nd->attribute[a]->n_graphs; k++)
				collect_names(m, nd->attribute[a]->graphs[k]);
		}
	}
}

/* BASE_ppN with N from a counter that only grows: such a name can clash
 * only with a name the model had when the first one was made (or one made
 * here before), so one index of the model's names, taken then, answers
 * for the whole run (every graph, since bodies read outer names); a
 * search of the graph per candidate made this quadratic (a 10,000-node
 * model: 1.6 s) */
char *pg_fresh_name(PrepCtx *c, const Onnx__GraphProto *g, const char *base)
{
	(void)g;
	if (!c->have_names) {
		collect_names(&c->names, c->m->proto->graph);
		c->have_names = 1;
	}
	for (;;) {
		char *s = xasprintf("%s_pp%zu", base, c->fresh++);
		if (!strmap_find(&c->names, s)) {
			name_add(&c->names, s);
			return s;
		}
		free(s);
	}
}

void pg_add_init(Onnx__GraphProto *g, const char *name, Tensor *t)
{
	Onnx__TensorProto *p;
	if (t->owned && t->kind == TK_TENSOR && t->nbytes) {
		/* the data moves into the proto (both are malloc'd and freed with
		 * free()): a folded tensor is not copied */
		Tensor view = *t;
		view.nbytes = 0;
		p = tensor_to_proto(&view, name);
		free(p->raw_data.data);
		p->raw_data.data = t->data;
		p->raw_data.len = t->nbytes;
		t->owned = 0;
	} else {
		p = tensor_to_proto(t, name);
	}
	tensor_free(t);
	g->initializer = xreallocarray(g->initializer, g->n_initializer + 1, sizeof *g->initializer);
	g->initializer[g->n_initializer++] = p;
}

int pg_each_subgraph(PrepCtx *c, Onnx__GraphProto *g, int (*fn)(PrepCtx *, Onnx__GraphProto *))
{
	for (size_t i = 0; i < g->n_node; i++) {
		Onnx__NodeProto *nd = g->node[i];
		for (size_t a = 0; a < nd->n_attribute; a++) {
			Onnx__AttributeProto *at = nd->attribute[a];
			if (at->g && fn(c, at->g) < 0)
				return -1;
			for (size_t k = 0; k < at->n_graphs; k++)
				if (fn(c, at->graphs[k]) < 0)
					return -1;
		}
	}
	return 0;
}

void pg_done_bytes(const Onnx__TensorProto *t, const void *d, size_t len, int owned)
{
	if (owned)
		free((void *)d);
	else if (t->has_data_location && t->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL)
		ext_release(d, len);
}

int pg_tensor(Model *m, const Onnx__TensorProto *p, Tensor *t)
{
	if (tensor_from_proto(m, p, t) < 0)
		return -1;
	const void *d;
	size_t len;
	int owned;
	/* the copy is made: the mapped source pages can go (a pointer, nothing read) */
	if (p->has_data_location && p->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL &&
	    t->dtype != DT_STRING && model_tensor_bytes(m, p, &d, &len, &owned) == 0)
		pg_done_bytes(p, d, len, owned);
	return 0;
}

/* ---- PgIndex (see passes.h) ---- */

/* Key copies go into blocks that never move, freed together: an index of
 * a 10,000-node graph makes tens of thousands of them, and a malloc and
 * free each cost more than the lookups. */
enum { PGX_BLOCK = 1 << 16 };

static const char *pgx_copy(PgIndex *x, const char *s, size_t len)
{
	/* the last block is the one being filled */
	if (!x->nblk || (len < PGX_BLOCK && x->used + len + 1 > PGX_BLOCK)) {
		x->blk = xreallocarray(x->blk, x->nblk + 1, sizeof *x->blk);
		x->blk[x->nblk++] = xmalloc(PGX_BLOCK);
		x->used = 0;
	}
	if (len >= PGX_BLOCK) {
		/* a name longer than a block gets one of its own, before the last */
		x->blk = xreallocarray(x->blk, x->nblk + 1, sizeof *x->blk);
		x->blk[x->nblk] = x->blk[x->nblk - 1];
		char *r = x->blk[x->nblk - 1] = xmalloc(len + 1);
		x->nblk++;
		memcpy(r, s, len + 1);
		return r;
	}
	char *r = x->blk[x->nblk - 1] + x->used;
	memcpy(r, s, len + 1);
	x->used += len + 1;
	return r;
}

/* the entry of name in m, added (its key a copy) when absent */
static StrMapEnt *pgx_add(PgIndex *x, StrMap *m, const char *name)
{
	int added;
	StrMapEnt *e = strmap_add(m, name, &added);
	if (added)
		e->key = pgx_copy(x, name, e->len);
	return e;
}

/* name's counters, made when absent */
static PgName *pgx_name(PgIndex *x, const char *name)
{
	StrMapEnt *e = pgx_add(x, &x->names, name);
	if (!e->v.i) {
		x->info = xreallocarray(x->info, x->ninfo + 1, sizeof *x->info);
		memset(&x->info[x->ninfo], 0, sizeof *x->info);
		e->v.i = (int64_t)++x->ninfo;
	}
	return &x->info[e->v.i - 1];
}

static const PgName *pgx_find(const PgIndex *x, const char *name)
{
	const StrMapEnt *e = strmap_find(&x->names, name);
	return e ? &x->info[e->v.i - 1] : NULL;
}

/* reads of a nested subgraph (every input of its nodes, at any depth, as
 * pg_uses counts them) */
static void sub_reads(PgIndex *x, const Onnx__GraphProto *g, int64_t d)
{
	for (size_t i = 0; i < g->n_node; i++) {
		const Onnx__NodeProto *n = g->node[i];
		for (size_t k = 0; k < n->n_input; k++)
			if (*n->input[k])
				pgx_name(x, n->input[k])->uses += d;
		for (size_t a = 0; a < n->n_attribute; a++) {
			if (n->attribute[a]->g)
				sub_reads(x, n->attribute[a]->g, d);
			for (size_t k = 0; k < n->attribute[a]->n_graphs; k++)
				sub_reads(x, n->attribute[a]->graphs[k], d);
		}
	}
}

void pgx_node(PgIndex *x, const Onnx__NodeProto *n, size_t i, int add)
{
	int64_t d = add ? 1 : -1;
	for (size_t k = 0; k < n->n_input; k++)
		if (*n->input[k]) {
			/* the sum of the readers' i + 1 is the reader's when
			 * there is one */
			PgName *p = pgx_name(x, n->input[k]);
			p->uses += d;
			p->top += d;
			p->topsum += d * (int64_t)(i + 1);
		}
	for (size_t a = 0; a < n->n_attribute; a++) {
		if (n->attribute[a]->g)
			sub_reads(x, n->attribute[a]->g, d);
		for (size_t k = 0; k < n->attribute[a]->n_graphs; k++)
			sub_reads(x, n->attribute[a]->graphs[k], d);
	}
	for (size_t k = 0; k < n->n_output; k++) {
		if (!*n->output[k])
			continue;
		PgName *p = pgx_name(x, n->output[k]);
		if (add && !p->prod)
			p->prod = (int64_t)i + 1;
		else if (!add && p->prod == (int64_t)i + 1)
			p->prod = 0;
	}
}

void pgx_add_init(PgIndex *x, Onnx__TensorProto *t)
{
	if (t->name && *t->name) {
		StrMapEnt *e = pgx_add(x, &x->init, t->name);
		if (!e->v.p)
			e->v.p = t;
	}
}

void pgx_build(PgIndex *x, const Onnx__GraphProto *g)
{
	memset(x, 0, sizeof *x);
	strmap_reserve(&x->names, g->n_node + g->n_initializer + g->n_input);
	strmap_reserve(&x->init, g->n_initializer);
	for (size_t i = 0; i < g->n_initializer; i++)
		pgx_add_init(x, g->initializer[i]);
	Onnx__ValueInfoProto **lists[3] = {g->input, g->value_info, g->output};
	size_t lens[3] = {g->n_input, g->n_value_info, g->n_output};
	for (int l = 0; l < 3; l++)
		for (size_t i = 0; i < lens[l]; i++) {
			Onnx__ValueInfoProto *v = lists[l][i];
			if (!v->name || !*v->name)
				continue;
			if (l == 0)
				pgx_add(x, &x->in, v->name);
			if (l == 2)
				pgx_add(x, &x->out, v->name);
			if (v->type && v->type->value_case == ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE && v->type->tensor_type->shape) {
				StrMapEnt *e = pgx_add(x, &x->vi, v->name);
				if (!e->v.p)
					e->v.p = v;
			}
		}
	for (size_t i = 0; i < g->n_node; i++)
		pgx_node(x, g->node[i], i, 1);
	NameSet sub = {0};
	pg_sub_names(g, &sub);
	for (StrMapEnt *e = NULL; (e = strmap_next(&sub, e));)
		pgx_add(x, &x->sub, e->key);
	nameset_free(&sub);
}

void pgx_free(PgIndex *x)
{
	StrMap *m[] = {&x->names, &x->init, &x->vi, &x->in, &x->out, &x->sub};
	for (size_t i = 0; i < ARRAY_LEN(m); i++)
		strmap_free(m[i]);
	for (size_t i = 0; i < x->nblk; i++)
		free(x->blk[i]);
	free(x->blk);
	free(x->info);
	memset(x, 0, sizeof *x);
}

Onnx__TensorProto *pgx_init(const PgIndex *x, const char *name)
{
	return strmap_get(&x->init, name);
}

const Onnx__ValueInfoProto *pgx_annotation(const PgIndex *x, const char *name)
{
	return strmap_get(&x->vi, name);
}

int pgx_is_input(const PgIndex *x, const char *name)
{
	return strmap_find(&x->in, name) != NULL;
}

int pgx_is_output(const PgIndex *x, const char *name)
{
	return strmap_find(&x->out, name) != NULL;
}

int pgx_sub_defines(const PgIndex *x, const char *name)
{
	return strmap_find(&x->sub, name) != NULL;
}

long pgx_producer(const PgIndex *x, const char *name)
{
	const PgName *p = pgx_find(x, name);
	return p ? (long)p->prod - 1 : -1;
}

size_t pgx_uses(const PgIndex *x, const char *name)
{
	const PgName *p = pgx_find(x, name);
	return p && p->uses > 0 ? (size_t)p->uses : 0;
}

long pgx_only_reader(const PgIndex *x, const char *name)
{
	const PgName *p = pgx_find(x, name);
	return p && p->top == 1 && p->uses == 1 ? (long)p->topsum - 1 : -1;
}

void pgx_move_reads(PgIndex *x, const char *from, const char *to)
{
	/* adding a name may move info[]: both exist before either is read */
	pgx_name(x, from);
	PgName *t = pgx_name(x, to), *f = pgx_name(x, from);
	t->uses += f->uses;
	t->top += f->top;
	t->topsum += f->topsum;
	f->uses = f->top = f->topsum = 0;
}
