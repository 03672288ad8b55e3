/* dce.c — the dce and dedup passes (see passes.h).
 *
 * dce: the graph outputs are the roots; a node is live when a live value
 * reads one of its outputs, and a live node keeps its inputs and every name
 * its subgraphs read live. Dead nodes go, and initializers nothing live
 * reads (unless they are graph inputs too: those are part of the model's
 * interface, like every graph input). Live nodes' subgraphs are cleaned the
 * same way with their own outputs as roots.
 *
 * dedup: initializers with the same element type, dims and bytes are
 * shared, wherever they are in the model: readers of a later one read the
 * first, and the later one goes. Two of at least DEDUP_SHARE_MIN bytes in
 * different graphs (the two branches of an If that each folded the same
 * outer weight into their own copy) become one in the innermost graph
 * enclosing both, which both bodies see (needs IR 4: initializers that
 * are not graph inputs). Equal bytes are the same constant whatever
 * expression folded them, so they merge too.
 * Graph inputs and outputs are never merged, nor names defined more than
 * once in the model (a subgraph defining a name again shadows it).
 *
 * cse: nodes of the default domain with the same operator, attributes and
 * inputs compute the same thing; readers of a later one read the first's
 * outputs. Never merged: random operators, Dropout, nodes holding
 * subgraphs, nodes producing a graph output. */
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "onnx/extdata.h"
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

/* Bytes of mapped external data are read a window at a time and each
 * window given back to the file once read (ext_release), so comparing
 * initializers keeps at most a window of a weight resident however big
 * the model. Only initializers of the same element type, dims and size are
 * compared, by the hash of their first DEDUP_PREFIX bytes first (weights
 * that differ almost always differ there), then by the hash of all their
 * bytes, then byte by byte. */
#define DEDUP_WINDOW ((size_t)16 << 20)
#define DEDUP_PREFIX ((size_t)64 << 10)
/* Smaller initializers are shared only within one graph: a body's own
 * shape and axis constants are what its passes read (identity's no-op
 * Slice, fuse-bn look in the graph itself), and sharing them saves
 * nothing worth losing that (silero-vad: 6 more nodes when its branches'
 * Slice bounds moved out) */
#define DEDUP_SHARE_MIN ((size_t)1 << 10)

typedef struct InitKey {
	Onnx__TensorProto *t;
	size_t scope;          /* the graph holding it (DScope index) ... */
	size_t dest;           /* ... and the one it ends in (a shared one moves out) */
	uint64_t shape;        /* hash of type, dims and size: groups candidates */
	size_t idx;            /* position among the candidates */
	const void *data;
	size_t len;
	int owned, mapped;
	int have_pre, have_h;
	uint64_t pre, h;
} InitKey;

/* full hashes of mapped bytes by address and size, kept for the whole run:
 * a mapping is never written and stays until the model is freed, so a
 * later round finds the same bytes at the same place. Keys are
 * {address, size} pairs the cache owns; values the hashes. */
typedef struct DedupCache {
	StrMap map;
} DedupCache;

static int dc_get(const DedupCache *dc, const void *p, size_t len, uint64_t *h)
{
	uintptr_t key[2] = {(uintptr_t)p, len};
	const StrMapEnt *e = dc ? strmap_findb(&dc->map, key, sizeof key) : NULL;
	if (e)
		*h = e->v.u;
	return e != NULL;
}

static void dc_put(PrepCtx *c, const void *p, size_t len, uint64_t h)
{
	if (!c->dedup)
		c->dedup = xcalloc(1, sizeof *c->dedup);
	uintptr_t key[2] = {(uintptr_t)p, len};
	int added;
	StrMapEnt *e = strmap_addb(&c->dedup->map, key, sizeof key, &added);
	if (added)
		strmap_own_key(e);
	e->v.u = h;
}

void prep_dedup_free(PrepCtx *c)
{
	if (!c->dedup)
		return;
	strmap_free_keys(&c->dedup->map);
	free(c->dedup);
	c->dedup = NULL;
}

/* n bytes at offset off of e read: give their pages back if mapped */
static void give_back(const InitKey *e, size_t off, size_t n)
{
	if (e->mapped)
		ext_release((const uint8_t *)e->data + off, n);
}

/* hash of e's first n bytes, a window at a time */
static uint64_t hash_bytes(const InitKey *e, size_t n)
{
	XXH3_state_t *st = XXH3_createState();
	if (!st)
		fatalx(1, "out of memory (XXH3 state)");
	XXH3_64bits_reset(st);
	for (size_t o = 0; o < n; o += DEDUP_WINDOW) {
		size_t w = n - o < DEDUP_WINDOW ? n - o : DEDUP_WINDOW;
		XXH3_64bits_update(st, (const uint8_t *)e->data + o, w);
		give_back(e, o, w);
	}
	uint64_t h = XXH3_64bits_digest(st);
	XXH3_freeState(st);
	return h;
}

static uint64_t prefix_hash(InitKey *e)
{
	if (!e->have_pre) {
		e->pre = hash_bytes(e, e->len < DEDUP_PREFIX ? e->len : DEDUP_PREFIX);
		e->have_pre = 1;
		/* the prefix is all of it */
		if (e->len <= DEDUP_PREFIX)
			e->h = e->pre, e->have_h = 1;
	}
	return e->pre;
}

static uint64_t full_hash(PrepCtx *c, InitKey *e)
{
	if (e->have_h)
		return e->h;
	if (!(e->mapped && dc_get(c->dedup, e->data, e->len, &e->h))) {
		e->h = hash_bytes(e, e->len);
		if (e->mapped)
			dc_put(c, e->data, e->len, e->h);
	}
	e->have_h = 1;
	return e->h;
}

/* a's and b's bytes (same size) equal, compared a window at a time */
static int same_bytes(const InitKey *a, const InitKey *b)
{
	for (size_t o = 0; o < a->len; o += DEDUP_WINDOW) {
		size_t w = a->len - o < DEDUP_WINDOW ? a->len - o : DEDUP_WINDOW;
		int d = memcmp((const uint8_t *)a->data + o, (const uint8_t *)b->data + o, w);
		give_back(a, o, w);
		give_back(b, o, w);
		if (d)
			return 0;
	}
	return 1;
}

static int same_shape(const Onnx__TensorProto *a, const Onnx__TensorProto *b)
{
	if (a->data_type != b->data_type || a->n_dims != b->n_dims)
		return 0;
	for (size_t i = 0; i < a->n_dims; i++)
		if (a->dims[i] != b->dims[i])
			return 0;
	return 1;
}

static uint64_t shape_key(const Onnx__TensorProto *t, size_t len)
{
	uint64_t seed = XXH3_64bits(&len, sizeof len) ^ (uint64_t)t->data_type;
	return t->n_dims ? XXH3_64bits_withSeed(t->dims, t->n_dims * sizeof *t->dims, seed) : seed;
}

/* by shape key, then initializer order: groups of candidates, each in order */
static int by_shape(const void *x, const void *y)
{
	const InitKey *const *a = x, *const *b = y;
	if ((*a)->shape != (*b)->shape)
		return (*a)->shape < (*b)->shape ? -1 : 1;
	return (*a)->idx < (*b)->idx ? -1 : (*a)->idx > (*b)->idx;
}

/* by prefix hash, then collection order (within one shape group) */
static int by_prefix(const void *x, const void *y)
{
	const InitKey *const *a = x, *const *b = y;
	if ((*a)->pre != (*b)->pre)
		return (*a)->pre < (*b)->pre ? -1 : 1;
	return (*a)->idx < (*b)->idx ? -1 : (*a)->idx > (*b)->idx;
}

/* a graph of the model: the graph enclosing it (the main graph: none),
 * its depth, and its candidates k[first .. first + n) */
typedef struct DScope {
	Onnx__GraphProto *g;
	size_t parent, depth, first, n;
} DScope;

typedef struct Dedup {
	DScope *s;
	size_t ns;
	InitKey *k;
	size_t nk;
	StrMap defs;           /* name -> how many times the model defines it */
	int hoist;             /* IR >= 4: initializers may move to an enclosing graph */
} Dedup;

static void count_def(StrMap *m, const char *name)
{
	if (name && *name)
		strmap_add(m, name, NULL)->v.i++;
}

/* the definitions of g and its subgraphs: inputs, initializers, node outputs */
static void count_defs(StrMap *m, const Onnx__GraphProto *g)
{
	for (size_t i = 0; i < g->n_input; i++)
		count_def(m, g->input[i]->name);
	for (size_t i = 0; i < g->n_initializer; i++)
		count_def(m, g->initializer[i]->name);
	for (size_t i = 0; i < g->n_node; i++) {
		const Onnx__NodeProto *n = g->node[i];
		for (size_t k = 0; k < n->n_output; k++)
			count_def(m, n->output[k]);
		for (size_t a = 0; a < n->n_attribute; a++) {
			if (n->attribute[a]->g)
				count_defs(m, n->attribute[a]->g);
			for (size_t k = 0; k < n->attribute[a]->n_graphs; k++)
				count_defs(m, n->attribute[a]->graphs[k]);
		}
	}
}

static int collect_graph(PrepCtx *c, Dedup *d, Onnx__GraphProto *g, size_t parent, size_t depth);

/* the subgraphs of g's nodes, in order, as scopes under scope s */
static int collect_subgraphs(PrepCtx *c, Dedup *d, Onnx__GraphProto *g, size_t s, size_t depth)
{
	for (size_t i = 0; i < g->n_node; i++) {
		Onnx__NodeProto *n = g->node[i];
		for (size_t a = 0; a < n->n_attribute; a++) {
			if (n->attribute[a]->g && collect_graph(c, d, n->attribute[a]->g, s, depth + 1) < 0)
				return -1;
			for (size_t k = 0; k < n->attribute[a]->n_graphs; k++)
				if (collect_graph(c, d, n->attribute[a]->graphs[k], s, depth + 1) < 0)
					return -1;
		}
	}
	return 0;
}

/* g's initializers that may be shared become candidates (pointers into the
 * mapping or raw_data: nothing read yet), then its subgraphs' */
static int collect_graph(PrepCtx *c, Dedup *d, Onnx__GraphProto *g, size_t parent, size_t depth)
{
	size_t s = d->ns++;
	d->s = xreallocarray(d->s, d->ns, sizeof *d->s);
	d->s[s] = (DScope){.g = g, .parent = parent, .depth = depth, .first = d->nk};
	d->k = xreallocarray(d->k, d->nk + g->n_initializer + 1, sizeof *d->k);
	for (size_t i = 0; i < g->n_initializer; i++) {
		Onnx__TensorProto *t = g->initializer[i];
		const StrMapEnt *def = t->name ? strmap_find(&d->defs, t->name) : NULL;
		if (!def || def->v.i != 1 || pg_is_input(g, t->name) || pg_is_output(g, t->name) ||
		    t->data_type == DT_STRING || t->data_type == DT_UNDEFINED)
			continue;
		InitKey *e = &d->k[d->nk];
		memset(e, 0, sizeof *e);
		if (model_tensor_bytes(c->m, t, &e->data, &e->len, &e->owned) < 0)
			return error_prefix("initializer '%s'", t->name);
		e->t = t;
		e->scope = e->dest = s;
		e->idx = d->nk;
		e->mapped = !e->owned && e->len && t->has_data_location &&
			    t->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
		e->shape = shape_key(t, e->len);
		d->nk++;
	}
	d->s[s].n = d->nk - d->s[s].first;
	return collect_subgraphs(c, d, g, s, depth);
}

/* the innermost scope enclosing both a and b (either may be it) */
static size_t common_scope(const Dedup *d, size_t a, size_t b)
{
	while (d->s[a].depth > d->s[b].depth)
		a = d->s[a].parent;
	while (d->s[b].depth > d->s[a].depth)
		b = d->s[b].parent;
	while (a != b) {
		a = d->s[a].parent;
		b = d->s[b].parent;
	}
	return a;
}

/* in one group (in collection order): a later duplicate of an earlier
 * kept one maps to it and is marked dropped; the kept one moves out to the
 * scope enclosing both when they are in different graphs */
static void dedup_group(PrepCtx *c, Dedup *d, InitKey **v, size_t n, char *drop, NameMap *map)
{
	for (size_t i = 1; i < n; i++)
		for (size_t p = 0; p < i; p++) {
			InitKey *a = v[p], *b = v[i];
			if (drop[a->idx] || a->len != b->len || !same_shape(a->t, b->t))
				continue;
			size_t to = common_scope(d, a->dest, b->scope);
			int cross = b->scope != a->scope || to != a->scope;
			if ((cross && a->len < DEDUP_SHARE_MIN) || (to != a->scope && !d->hoist) ||
			    prefix_hash(a) != prefix_hash(b) ||
			    full_hash(c, a) != full_hash(c, b) || !same_bytes(a, b))
				continue;
			a->dest = to;
			namemap_put(map, b->t->name, a->t->name);
			drop[b->idx] = 1;
			c->stat->changed++;
			break;
		}
}

/* Model-wide: g is the main graph (the pass does not recurse; it sees
 * every graph at once, so copies in sibling bodies meet). */
int prep_dedup(PrepCtx *c, Onnx__GraphProto *g)
{
	Dedup d = {.hoist = c->m->proto->ir_version >= 4};
	count_defs(&d.defs, g);
	int r = collect_graph(c, &d, g, 0, 0);
	size_t nk = d.nk;
	InitKey *k = d.k;
	char *drop = xcalloc(nk ? nk : 1, 1);
	NameMap map = {0};      /* a dropped initializer's name -> the kept one's */
	InitKey **v = xcalloc(nk ? nk : 1, sizeof *v);
	for (size_t i = 0; i < nk; i++)
		v[i] = &k[i];
	if (r == 0 && nk > 1)
		qsort(v, nk, sizeof *v, by_shape);
	/* groups of one shape, then runs of one prefix hash in them: only
	 * those can be equal, and comparing each pair of a shape shared by
	 * thousands of small tensors (per-channel constants) was quadratic */
	for (size_t s = 0, e; r == 0 && s < nk; s = e) {
		for (e = s + 1; e < nk && v[e]->shape == v[s]->shape;)
			e++;
		if (e - s < 2)
			continue;
		for (size_t i = s; i < e; i++)
			prefix_hash(v[i]);
		qsort(v + s, e - s, sizeof *v, by_prefix);
		for (size_t a = s, b; a < e; a = b) {
			for (b = a + 1; b < e && v[b]->pre == v[a]->pre;)
				b++;
			if (b - a > 1)
				dedup_group(c, &d, v + a, b - a, drop, &map);
		}
	}
	free(v);
	/* names are defined once: one sweep of the model renames every reader */
	if (r == 0)
		pg_apply_renames(g, &map);
	namemap_free(&map);
	for (size_t i = 0; i < nk; i++)
		if (k[i].owned)
			free((void *)k[i].data);
	/* each graph keeps its initializers but the dropped and moved ones
	 * (k[] follows the initializer order, scope by scope) ... */
	for (size_t s = 0; r == 0 && s < d.ns; s++) {
		Onnx__GraphProto *sg = d.s[s].g;
		size_t j = 0, q = d.s[s].first, end = q + d.s[s].n;
		for (size_t i = 0; i < sg->n_initializer; i++) {
			Onnx__TensorProto *t = sg->initializer[i];
			int gone = 0;
			if (q < end && k[q].t == t) {
				gone = drop[q] || k[q].dest != s;
				if (drop[q])
					onnx__tensor_proto__free_unpacked(t, NULL);
				q++;
			}
			if (!gone)
				sg->initializer[j++] = t;
		}
		sg->n_initializer = j;
	}
	/* ... and the moved ones join the graph enclosing their readers */
	for (size_t i = 0; r == 0 && i < nk; i++)
		if (!drop[i] && k[i].dest != k[i].scope) {
			Onnx__GraphProto *dg = d.s[k[i].dest].g;
			dg->initializer = xreallocarray(dg->initializer, dg->n_initializer + 1, sizeof *dg->initializer);
			dg->initializer[dg->n_initializer++] = k[i].t;
		}
	free(drop);
	free(k);
	free(d.s);
	strmap_free(&d.defs);
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

/* merged nodes are marked and dropped at the end; their readers are
 * renamed as the sweep reaches them (their keys need the names) and once
 * more at the end for nested subgraphs */
int prep_cse(PrepCtx *c, Onnx__GraphProto *g)
{
	StrMap seen = {0};      /* node_key() -> the first node with it; keys owned */
	StrBuf sb = {0};
	NameSet sub = {0};
	NameMap ren = {0};
	strmap_reserve(&seen, g->n_node);
	pg_sub_names(g, &sub);
	char *gone = xcalloc(g->n_node ? g->n_node : 1, 1);
	for (size_t i = 0; i < g->n_node; i++) {
		Onnx__NodeProto *n = g->node[i];
		pg_rename_node_inputs(n, &ren);
		if (!node_key(n, &sb))
			continue;
		int added;
		StrMapEnt *e = strmap_addb(&seen, sb.buf, sb.len, &added);
		if (added) {
			strmap_own_key(e);
			e->v.p = n;
			continue;
		}
		/* n computes what the first one does: its readers read its outputs */
		const Onnx__NodeProto *first = e->v.p;
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
	strmap_free_keys(&seen);
	sb_release(&sb);
	return pg_each_subgraph(c, g, prep_cse);
}
