/* simplify.c — the identity and transpose passes (see passes.h).
 *
 * identity: an Identity node, a Cast to the element type its input already
 * has (by the graph's annotations), a Slice that takes every element (starts
 * 0, steps 1, ends INT64_MAX or past the known size), or a Dropout in inference (opset >= 7
 * without a training_mode input or with a constant false one; opset < 7 with
 * is_test = 1) whose mask output nobody reads, is removed: its readers read
 * its input.
 * A graph output keeps its name (the input's producer is renamed to it); a
 * graph input passed straight to a graph output keeps its node. An
 * LSTM/GRU/RNN initial state that is all zeros (a ConstantOfShape of 0,
 * maybe sliced or reshaped) is omitted instead: zeros are its default.
 *
 * transpose: Transpose(p2) of Transpose(p1), where nothing else reads the
 * first, becomes one Transpose with perm p1[p2[i]], or nothing when that is
 * the identity; a single Transpose with the identity permutation goes too.
 * Transposes without a perm attribute (reverse the axes, rank unknown here)
 * are left alone. Both passes recurse into subgraphs. */
#include <stdlib.h>
#include <string.h>

#include "onnx/node.h"
#include "preprocess/passes.h"

static int const_false(Model *m, const Onnx__GraphProto *g, const char *name)
{
	const Onnx__TensorProto *t = pg_init(g, name);
	if (!t || pg_is_input(g, name) || t->data_type != DT_BOOL || tensor_proto_numel(t) != 1)
		return 0;
	const void *d;
	size_t len;
	int owned;
	if (model_tensor_bytes(m, t, &d, &len, &owned) < 0)
		return -1;
	int r = len == 1 && ((const uint8_t *)d)[0] == 0;
	pg_done_bytes(t, d, len, owned);
	return r;
}

/* element type of name from g's annotations or initializers, 0 if unknown */
static int known_elem(const Onnx__GraphProto *g, const char *name)
{
	const Onnx__TensorProto *t = pg_init(g, name);
	if (t && !pg_is_input(g, name))
		return t->data_type;
	Onnx__ValueInfoProto **lists[3] = {g->input, g->value_info, g->output};
	size_t lens[3] = {g->n_input, g->n_value_info, g->n_output};
	for (int l = 0; l < 3; l++)
		for (size_t i = 0; i < lens[l]; i++) {
			const Onnx__ValueInfoProto *v = lists[l][i];
			if (v->name && !strcmp(v->name, name) && v->type &&
			    v->type->value_case == ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE &&
			    v->type->tensor_type->has_elem_type)
				return v->type->tensor_type->elem_type;
		}
	return 0;
}

/* the int64/int32 initializer name as int64 values into v (at most 16);
 * count, or -1 when it is no small constant integer vector */
static int const_ints(Model *m, const Onnx__GraphProto *g, const char *name, int64_t *v)
{
	const Onnx__TensorProto *t = name ? pg_init(g, name) : NULL;
	if (!t || pg_is_input(g, name) || (t->data_type != DT_INT64 && t->data_type != DT_INT32) || t->n_dims != 1 ||
	    t->dims[0] > 16)
		return -1;
	Tensor x = {0};
	if (pg_tensor(m, t, &x) < 0)
		return -1;
	for (int64_t i = 0; i < x.numel; i++)
		v[i] = tensor_get_i64(&x, i);
	int n = (int)x.numel;
	tensor_free(&x);
	return n;
}

/* rank and dims of name from g's annotations (dims[k] < 0: not a number) */
static int known_dims(const Onnx__GraphProto *g, const char *name, int64_t *dims)
{
	Onnx__ValueInfoProto **lists[3] = {g->input, g->value_info, g->output};
	size_t lens[3] = {g->n_input, g->n_value_info, g->n_output};
	for (int l = 0; l < 3; l++)
		for (size_t i = 0; i < lens[l]; i++) {
			const Onnx__ValueInfoProto *v = lists[l][i];
			if (!v->name || strcmp(v->name, name) || !v->type ||
			    v->type->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE ||
			    !v->type->tensor_type->shape || v->type->tensor_type->shape->n_dim > QM_MAX_RANK)
				continue;
			const Onnx__TensorShapeProto *sh = v->type->tensor_type->shape;
			for (size_t k = 0; k < sh->n_dim; k++)
				dims[k] = sh->dim[k]->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE
						  ? sh->dim[k]->dim_value : -1;
			return (int)sh->n_dim;
		}
	return -1;
}

/* Slice (opset >= 10) taking every element: each start 0, step 1, end
 * INT64_MAX or at least the axis's known size */
static int slice_is_identity(PrepCtx *c, const Onnx__GraphProto *g, const Onnx__NodeProto *n)
{
	if (model_opset(c->m->proto, "") < 10 || n->n_output != 1)
		return 0;
	int64_t st[16], en[16], ax[16], sp[16], dims[QM_MAX_RANK];
	int ns = const_ints(c->m, g, node_input(n, 1), st), ne = const_ints(c->m, g, node_input(n, 2), en);
	if (ns < 0 || ns != ne)
		return 0;
	int na = node_input(n, 3) ? const_ints(c->m, g, node_input(n, 3), ax) : ns;
	int np = node_input(n, 4) ? const_ints(c->m, g, node_input(n, 4), sp) : ns;
	if (na != ns || np != ns)
		return 0;
	int rank = known_dims(g, n->input[0], dims);
	for (int i = 0; i < ns; i++) {
		if (st[i] != 0 || (node_input(n, 4) && sp[i] != 1))
			return 0;
		if (en[i] == INT64_MAX)
			continue;
		int64_t a = node_input(n, 3) ? ax[i] : i;
		if (rank < 0 || a < -rank || a >= rank)
			return 0;
		a = a < 0 ? a + rank : a;
		if (dims[a] < 0 || en[i] < dims[a])
			return 0;
	}
	return 1;
}

/* 1 if node i of g computes its first input unchanged */
static int is_identity(PrepCtx *c, const Onnx__GraphProto *g, const Onnx__NodeProto *n)
{
	if (n->domain && *n->domain && strcmp(n->domain, "ai.onnx"))
		return 0;
	if (n->n_output < 1 || !node_input(n, 0))
		return 0;
	if (!strcmp(n->op_type, "Identity"))
		return n->n_output == 1;
	if (!strcmp(n->op_type, "Slice"))
		return slice_is_identity(c, g, n);
	if (!strcmp(n->op_type, "Cast")) {
		int64_t to;
		if (attr_int(n, "to", 0, &to) < 0)
			return -1;
		int elem = known_elem(g, n->input[0]);
		return n->n_output == 1 && elem && elem == to && !node_attr(n, "saturate");
	}
	if (strcmp(n->op_type, "Dropout"))
		return 0;
	int64_t opset = model_opset(c->m->proto, "");
	if (n->n_output > 1 && n->output[1] && *n->output[1] &&
	    (pg_uses(g, n->output[1]) || pg_is_output(g, n->output[1])))
		return 0;
	if (opset < 7) {
		int64_t is_test;
		if (attr_int(n, "is_test", 0, &is_test) < 0)
			return -1;
		return is_test != 0;
	}
	const char *tm = node_input(n, 2);
	return tm ? const_false(c->m, g, tm) : 1;
}

/* 1 if every byte of t is zero (0.0, integer 0, false), 0 if not, -1 */
static int zero_bytes(Model *m, const Onnx__TensorProto *t)
{
	const void *d;
	size_t len;
	int owned;
	if (t->data_type == DT_STRING || model_tensor_bytes(m, t, &d, &len, &owned) < 0)
		return 0;
	int z = 1;
	size_t i = 0;
	for (; i < len && z; i++)
		z = ((const uint8_t *)d)[i] == 0;
	pg_done_bytes(t, d, i, owned);
	return z;
}

/* is name all zeros: a zero initializer, a ConstantOfShape of zero (its
 * default), or what a data-movement operator makes of one */
static int all_zeros(PrepCtx *c, const Onnx__GraphProto *g, const char *name, int depth)
{
	static const char *const moves[] = {"Identity", "Reshape", "Expand", "Slice", "Squeeze", "Unsqueeze",
					    "Transpose", "Flatten"};
	const Onnx__TensorProto *t = pg_init(g, name);
	if (t)
		return !pg_is_input(g, name) && zero_bytes(c->m, t);
	long p = depth < 8 ? pg_producer(g, name) : -1;
	const Onnx__NodeProto *n = p >= 0 ? g->node[p] : NULL;
	if (!n || (n->domain && *n->domain && strcmp(n->domain, "ai.onnx")) || n->n_input < 1)
		return 0;
	if (!strcmp(n->op_type, "ConstantOfShape")) {
		const Onnx__AttributeProto *v = node_attr(n, "value");
		return !v || (v->t && zero_bytes(c->m, v->t));
	}
	for (size_t i = 0; i < ARRAY_LEN(moves); i++)
		if (!strcmp(n->op_type, moves[i]))
			return all_zeros(c, g, n->input[0], depth + 1);
	return 0;
}

/* LSTM/GRU/RNN initial states (and LSTM's initial cell) of zeros are what
 * an omitted input means: exporters compute them from the batch size
 * (Shape, Gather, Concat, ConstantOfShape), which dce then drops */
static void rnn_zero_states(PrepCtx *c, Onnx__GraphProto *g)
{
	for (size_t i = 0; i < g->n_node; i++) {
		Onnx__NodeProto *n = g->node[i];
		int lstm = !strcmp(n->op_type, "LSTM");
		if ((n->domain && *n->domain && strcmp(n->domain, "ai.onnx")) ||
		    (!lstm && strcmp(n->op_type, "GRU") && strcmp(n->op_type, "RNN")))
			continue;
		int dropped = 0;
		for (size_t k = 5; k <= (lstm ? 6u : 5u) && k < n->n_input; k++)
			if (*n->input[k] && all_zeros(c, g, n->input[k], 0)) {
				free(n->input[k]);
				n->input[k] = xstrdup("");
				dropped = 1;
			}
		while (n->n_input && !*n->input[n->n_input - 1])
			free(n->input[--n->n_input]);
		c->stat->changed += (size_t)dropped;
	}
}

/* Bypassed nodes are marked and dropped at the end, their readers renamed
 * as the sweep reaches them and once more at the end (nested subgraphs,
 * unsorted graphs): a rename of the whole graph per node would make long
 * chains quadratic. A graph output keeps its name through pg_bypass, on the
 * graph as it stands after the marks so far are applied. */
int prep_identity(PrepCtx *c, Onnx__GraphProto *g)
{
	NameSet sub = {0};
	NameMap ren = {0};
	rnn_zero_states(c, g);
	pg_sub_names(g, &sub);
	char *gone = xcalloc(g->n_node ? g->n_node : 1, 1);
	int rc = 0;
	for (size_t i = 0; i < g->n_node; i++) {
		Onnx__NodeProto *n = g->node[i];
		pg_rename_node_inputs(n, &ren);
		int r = is_identity(c, g, n);
		if (r < 0) {
			rc = -1;
			break;
		}
		if (!r)
			continue;
		const char *in = n->input[0], *out = n->output[0];
		if (!*in || !*out || !strcmp(in, out) || nameset_has(&sub, in) || nameset_has(&sub, out)) {
			c->stat->skipped++;
			continue;
		}
		if (!pg_is_output(g, out)) {
			namemap_put(&ren, out, xstrdup(in));
			gone[i] = 1;
			c->stat->changed++;
			continue;
		}
		size_t before = 0;
		for (size_t k = 0; k < i; k++)
			before += (size_t)gone[k];
		pg_apply_renames(g, &ren);
		pg_drop_nodes(g, gone);
		pg_renames_free(&ren);
		memset(gone, 0, g->n_node ? g->n_node : 1);
		i -= before;
		if (pg_bypass(g, i, n->input[0], n->output[0])) {
			c->stat->changed++;
			i--; /* node i is gone: the next one is at i (unsigned wrap at 0) */
		} else {
			c->stat->skipped++;
		}
	}
	pg_apply_renames(g, &ren);
	pg_drop_nodes(g, gone);
	pg_renames_free(&ren);
	nameset_free(&sub);
	free(gone);
	return rc < 0 ? -1 : pg_each_subgraph(c, g, prep_identity);
}

static int get_perm(const Onnx__NodeProto *n, const int64_t **p, size_t *len)
{
	if (strcmp(n->op_type, "Transpose") || (n->domain && *n->domain && strcmp(n->domain, "ai.onnx")))
		return 0;
	if (attr_ints(n, "perm", p, len) < 0)
		return -1;
	if (!*p || *len == 0 || *len > 64)
		return 0;
	/* a valid permutation only */
	uint64_t seen = 0;
	for (size_t i = 0; i < *len; i++) {
		if ((*p)[i] < 0 || (size_t)(*p)[i] >= *len || (seen >> (*p)[i] & 1))
			return 0;
		seen |= (uint64_t)1 << (*p)[i];
	}
	return 1;
}

static int is_iota(const int64_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != (int64_t)i)
			return 0;
	return 1;
}

/* State of the transpose pass over one graph: an index (pgx_build) kept
 * true as it goes, nodes removed only at the end (gone), readers of a
 * bypassed output renamed as the sweep reaches them and once more at the
 * end: a search, a removal and a rename of the whole graph per Transpose
 * made long chains quadratic. */
typedef struct TrState {
	PgIndex x;
	char *gone;
	NameMap ren;
} TrState;

static void tr_begin(TrState *t, const Onnx__GraphProto *g)
{
	pgx_build(&t->x, g);
	t->gone = xcalloc(g->n_node ? g->n_node : 1, 1);
	memset(&t->ren, 0, sizeof t->ren);
}

/* apply the marks and renames so far; the number of nodes before i that
 * went (so node i is now at i minus that) */
static size_t tr_end(TrState *t, Onnx__GraphProto *g, size_t i)
{
	size_t before = 0;
	for (size_t k = 0; k < i && k < g->n_node; k++)
		before += (size_t)t->gone[k];
	pg_apply_renames(g, &t->ren);
	pg_drop_nodes(g, t->gone);
	pg_renames_free(&t->ren);
	free(t->gone);
	pgx_free(&t->x);
	return before;
}

/* pg_bypass of node *i (n), which must produce out from in: its readers
 * read in. A graph output keeps its name: then pg_bypass itself runs on
 * the graph as it stands with the marks so far applied, and the state
 * starts again (*i moves with the nodes). 1 if done (node *i gone). */
static int tr_bypass(TrState *t, Onnx__GraphProto *g, size_t *i, Onnx__NodeProto *n)
{
	const char *in = n->input[0], *out = n->output[0];
	if (!*in || !*out || !strcmp(in, out) || pgx_sub_defines(&t->x, in) || pgx_sub_defines(&t->x, out))
		return 0;
	if (!pgx_is_output(&t->x, out)) {
		pgx_node(&t->x, n, *i, 0);
		pgx_move_reads(&t->x, out, in);
		namemap_put(&t->ren, out, xstrdup(in));
		t->gone[*i] = 1;
		return 1;
	}
	char *a = xstrdup(in), *b = xstrdup(out);
	*i -= tr_end(t, g, *i);
	int r = pg_bypass(g, *i, a, b);
	free(a);
	free(b);
	tr_begin(t, g);
	if (r)
		/* node *i is gone: the next one is at *i (the caller adds 1;
		 * unsigned wrap at 0) */
		(*i)--;
	return r;
}

int prep_transpose(PrepCtx *c, Onnx__GraphProto *g)
{
	TrState t;
	tr_begin(&t, g);
	int rc = 0;
	for (size_t i = 0; i < g->n_node; i++) {
		if (t.gone[i])
			continue;
		Onnx__NodeProto *n = g->node[i];
		pg_rename_node_inputs(n, &t.ren);
		const int64_t *p2;
		size_t l2;
		int r = get_perm(n, &p2, &l2);
		if (r < 0) {
			rc = -1;
			break;
		}
		if (!r || n->n_input < 1)
			continue;
		if (is_iota(p2, l2)) {
			if (tr_bypass(&t, g, &i, n))
				c->stat->changed++;
			continue;
		}
		long j = pgx_producer(&t.x, n->input[0]);
		const int64_t *p1;
		size_t l1;
		if (j < 0 || (r = get_perm(g->node[j], &p1, &l1)) == 0 || l1 != l2 ||
		    pgx_uses(&t.x, n->input[0]) != 1 || pgx_is_output(&t.x, n->input[0])) {
			if (r < 0) {
				rc = -1;
				break;
			}
			continue;
		}
		/* y = T(T(x, p1), p2): y axis k is x axis p1[p2[k]] */
		int64_t q[64];
		for (size_t k = 0; k < l2; k++)
			q[k] = p1[p2[k]];
		Onnx__NodeProto *first = g->node[j];
		pg_rename_node_inputs(first, &t.ren);
		pgx_node(&t.x, n, i, 0);
		pgx_node(&t.x, first, (size_t)j, 0);
		char *x = xstrdup(first->input[0]);
		free(n->input[0]);
		n->input[0] = x;
		pgx_node(&t.x, n, i, 1);
		t.gone[j] = 1;
		c->stat->changed++;
		if (is_iota(q, l2)) {
			if (tr_bypass(&t, g, &i, n)) {
				c->stat->changed++;
				continue;
			}
		}
		for (size_t a = 0; a < n->n_attribute; a++)
			if (!strcmp(n->attribute[a]->name, "perm"))
				memcpy(n->attribute[a]->ints, q, l2 * sizeof *q);
		/* an identity that could not be bypassed stays as Transpose(iota) */
	}
	tr_end(&t, g, 0);
	return rc < 0 ? -1 : pg_each_subgraph(c, g, prep_transpose);
}
