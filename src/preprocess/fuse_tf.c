/* fuse_tf.c — the layernorm and gelu passes: decomposed LayerNorm and
 * GELU, as exporters write them before the operators existed, back into
 * LayerNormalization (opset 17) and Gelu (opset 20) (see passes.h).
 *
 * layernorm, as torch (below opset 17 and for hand-written norms) and
 * tf2onnx write it:
 *     mean = ReduceMean(X, axes = [-1]);  d = Sub(X, mean)
 *     var = ReduceMean(Pow(d, 2) | Mul(d, d), axes = [-1])
 *     n = Div(d, Sqrt(Add(var, eps)))
 *     [y = Mul(n, gamma)] [z = Add(y, beta)]
 * becomes LayerNormalization(X, gamma, beta, axis = -1, epsilon = eps).
 * gamma and beta are 1-D float initializers of the normalized size (no
 * gamma: ones of X's last dimension when it is known); axes [-1] or the
 * last axis of a known rank, as an attribute or (opset 18) a constant
 * input; every tensor inside is read only inside and is no graph output.
 *
 * gelu: x * 0.5 * (1 + Erf(x / sqrt 2)) (Div by sqrt 2 or Mul by its
 * inverse, the 0.5 on either side) becomes Gelu(x); the tanh form
 * 0.5 x (1 + Tanh(sqrt(2/pi) (x + 0.044715 x^3))) becomes Gelu(x,
 * approximate = "tanh"). Constants must match to float rounding.
 *
 * A pattern recognised in part (its mean, centring and reduction found,
 * but no epsilon, another axis, a tensor read outside, gamma of another
 * shape) is left exactly as it is, counted as skipped and named in the
 * log with the reason: never half-fused. Below the opset an operator
 * needs, nothing changes and the log says how many were kept (static
 * quantization keeps their insides float, src/quant/patterns.c). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "onnx/node.h"
#include "preprocess/passes.h"

enum { MAX_NODES = 9 };

/* a pattern found: its nodes, and what the fused node reads and writes */
typedef struct Found {
	long at[MAX_NODES];
	int nn;
	const char *in[3];
	size_t nin;
	const char *out;
	double eps;      /* layernorm */
	int tanh_form;   /* gelu */
} Found;

static int is(const Onnx__NodeProto *n, const char *op)
{
	return n && !strcmp(n->op_type, op) && (!n->domain || !*n->domain || !strcmp(n->domain, "ai.onnx"));
}

static Onnx__NodeProto *prod(const Onnx__GraphProto *g, const PgIndex *x, const char *name)
{
	long k = name ? pgx_producer(x, name) : -1;
	return k >= 0 ? g->node[k] : NULL;
}

/* the one node reading name (at top level, read once), or NULL */
static Onnx__NodeProto *reader(const Onnx__GraphProto *g, const PgIndex *x, const char *name, long *at)
{
	long k = pgx_only_reader(x, name);
	if (at)
		*at = k;
	return k >= 0 && !pgx_is_output(x, name) ? g->node[k] : NULL;
}

/* the single float value of initializer name; 0 when it is not one */
static int scalar(PrepCtx *c, const PgIndex *x, const char *name, double *v)
{
	const Onnx__TensorProto *p = name ? pgx_init(x, name) : NULL;
	if (!p || pgx_is_input(x, name) || p->data_type != DT_FLOAT)
		return 0;
	Tensor t = {0};
	if (pg_tensor(c->m, p, &t) < 0)
		return 0;
	int ok = t.numel == 1;
	if (ok)
		*v = ((const float *)t.data)[0];
	tensor_free(&t);
	return ok;
}

/* the other input of binary n than name, and whether name is there */
static const char *other(const Onnx__NodeProto *n, const char *name)
{
	if (n->n_input != 2)
		return NULL;
	if (!strcmp(n->input[0], name))
		return n->input[1];
	if (!strcmp(n->input[1], name))
		return n->input[0];
	return NULL;
}

static int near(double a, double b)
{
	return fabs(a - b) <= 1e-6 * fabs(b) + 1e-12;
}

/* ReduceMean over the last axis only, keeping it: 1; 0 not */
static int mean_last(PrepCtx *c, const PgIndex *x, const Onnx__NodeProto *n, const char *in)
{
	if (!is(n, "ReduceMean") || !n->n_input || strcmp(n->input[0], in))
		return 0;
	int64_t keep = 1, axes[1] = {0}, nax = 0;
	const Onnx__AttributeProto *a = node_attr(n, "keepdims");
	if (a)
		keep = a->i;
	a = node_attr(n, "axes");
	if (a) {
		nax = (int64_t)a->n_ints;
		if (nax == 1)
			axes[0] = a->ints[0];
	} else if (n->n_input > 1 && *n->input[1]) {
		const Onnx__TensorProto *p = pgx_init(x, n->input[1]);
		Tensor t = {0};
		if (!p || pg_tensor(c->m, p, &t) < 0)
			return 0;
		nax = t.numel;
		if (nax == 1 && t.dtype == DT_INT64)
			axes[0] = ((const int64_t *)t.data)[0];
		else
			nax = 0;
		tensor_free(&t);
	}
	if (!keep || nax != 1)
		return 0;
	if (axes[0] == -1)
		return 1;
	const Onnx__ValueInfoProto *vi = pgx_annotation(x, in);
	return vi && vi->type && vi->type->tensor_type && vi->type->tensor_type->shape &&
	       (int64_t)vi->type->tensor_type->shape->n_dim == axes[0] + 1;
}

/* the last dimension of name when known, else -1 */
static int64_t last_dim(const PgIndex *x, const char *name)
{
	const Onnx__ValueInfoProto *vi = pgx_annotation(x, name);
	const Onnx__TensorShapeProto *s = vi && vi->type && vi->type->tensor_type ? vi->type->tensor_type->shape : NULL;
	if (!s || !s->n_dim || s->dim[s->n_dim - 1]->value_case != ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE)
		return -1;
	return s->dim[s->n_dim - 1]->dim_value;
}

/* a 1-D float initializer of n elements (n < 0: any), its length or -1 */
static int64_t vec_len(const PgIndex *x, const char *name, int64_t n)
{
	const Onnx__TensorProto *p = pgx_init(x, name);
	if (!p || pgx_is_input(x, name) || p->data_type != DT_FLOAT || p->n_dims != 1 || (n >= 0 && p->dims[0] != n))
		return -1;
	return p->dims[0];
}

/* whether the log has not said key yet (and now counts it as said) */
static int first_time(PrepCtx *c, const char *key)
{
	int added;
	StrMapEnt *e = strmap_add(&c->noted, key, &added);
	if (added)
		strmap_own_key(e);
	return added;
}

static void note(PrepCtx *c, const Onnx__NodeProto *n, const char *pass, const char *why)
{
	char lab[256];
	c->stat->skipped++;
	node_label(n, lab, sizeof lab);
	char *key = xasprintf("%s:%s", pass, lab);
	if (c->o->log && first_time(c, key))
		fprintf(c->o->log, "preprocess: %s: '%s' not fused, left as it is: %s\n", pass, lab, why);
	free(key);
}

/* a LayerNorm from ReduceMean node i: its nodes in at[] (the last one's
 * output is the result), eps, gamma and beta; the number of nodes, 0 when
 * i starts none, -1 when it starts one recognised in part (noted) */
static int match_ln(PrepCtx *c, const Onnx__GraphProto *g, const PgIndex *x, size_t i, Found *f)
{
	long *at = f->at;
	double *eps = &f->eps;
	const char *gm0 = NULL, *bt0 = NULL, **gamma = &gm0, **beta = &bt0;
	const Onnx__NodeProto *mean = g->node[i];
	if (!is(mean, "ReduceMean") || mean->n_output != 1 || !mean->n_input)
		return 0;
	const char *X = mean->input[0];
	long k;
	const Onnx__NodeProto *sub = reader(g, x, mean->output[0], &k);
	if (!is(sub, "Sub") || sub->n_input != 2 || strcmp(sub->input[0], X) || strcmp(sub->input[1], mean->output[0]))
		return 0;
	at[0] = (long)i;
	at[1] = k;
	const char *d = sub->output[0];
	/* d's readers: the square and the Div */
	const Onnx__NodeProto *sq = NULL, *div = NULL;
	long ksq = -1, kdiv = -1;
	for (size_t j = 0; j < g->n_node; j++) {
		const Onnx__NodeProto *n = g->node[j];
		for (size_t q = 0; q < n->n_input; q++)
			if (!strcmp(n->input[q], d)) {
				if ((is(n, "Pow") || is(n, "Mul")) && !sq) {
					sq = n;
					ksq = (long)j;
				} else if (is(n, "Div") && q == 0 && !div) {
					div = n;
					kdiv = (long)j;
				}
			}
	}
	if (!sq || !div)
		return 0;
	double two;
	if (is(sq, "Pow") ? !(scalar(c, x, sq->input[1], &two) && two == 2.0)
			  : strcmp(sq->input[0], d) || strcmp(sq->input[1], d))
		return 0;
	long kv;
	const Onnx__NodeProto *var = reader(g, x, sq->output[0], &kv);
	if (!var || !is(var, "ReduceMean") || strcmp(var->input[0], sq->output[0]))
		return 0;
	/* from here on it is a LayerNorm: what does not fit is said */
	if (pgx_uses(x, d) != 2 || pgx_is_output(x, d) || pgx_uses(x, mean->output[0]) != 1 ||
	    pgx_uses(x, sq->output[0]) != 1) {
		note(c, mean, "layernorm", "a tensor inside is read outside it");
		return -1;
	}
	if (!mean_last(c, x, mean, X) || !mean_last(c, x, var, sq->output[0])) {
		note(c, mean, "layernorm", "its means are not over the last axis alone (keepdims 1)");
		return -1;
	}
	long ke, ks;
	const Onnx__NodeProto *add = reader(g, x, var->output[0], &ke);
	const char *e = add && is(add, "Add") ? other(add, var->output[0]) : NULL;
	if (!e || !scalar(c, x, e, eps) || !(*eps >= 0)) {
		note(c, mean, "layernorm", "no epsilon: the variance is not added to one constant before its Sqrt");
		return -1;
	}
	const Onnx__NodeProto *sqrt_ = reader(g, x, add->output[0], &ks);
	if (!is(sqrt_, "Sqrt") || pgx_uses(x, sqrt_->output[0]) != 1 || pgx_is_output(x, sqrt_->output[0]) ||
	    div->n_input != 2 || strcmp(div->input[1], sqrt_->output[0])) {
		note(c, mean, "layernorm", "the centred values are not divided by the Sqrt of the variance alone");
		return -1;
	}
	at[2] = ksq;
	at[3] = kv;
	at[4] = ke;
	at[5] = ks;
	at[6] = kdiv;
	int nn = 7;
	*gamma = *beta = NULL;
	long km, kb;
	const Onnx__NodeProto *mul = reader(g, x, div->output[0], &km);
	const char *gm = mul && is(mul, "Mul") ? other(mul, div->output[0]) : NULL;
	if (gm && pgx_init(x, gm)) {
		if (vec_len(x, gm, -1) < 0) {
			note(c, mean, "layernorm", "its scale is not a 1-D float initializer");
			return -1;
		}
		*gamma = gm;
		at[nn++] = km;
		const Onnx__NodeProto *ad = reader(g, x, mul->output[0], &kb);
		const char *bt = ad && is(ad, "Add") ? other(ad, mul->output[0]) : NULL;
		if (bt && pgx_init(x, bt)) {
			if (vec_len(x, bt, vec_len(x, gm, -1)) < 0) {
				note(c, mean, "layernorm", "its shift is not a 1-D float initializer of its scale's size");
				return -1;
			}
			*beta = bt;
			at[nn++] = kb;
		}
	}
	for (int q = 0; q < nn; q++)
		if (at[q] < (long)i) {
			note(c, mean, "layernorm", "its nodes are not in order after its mean");
			return -1;
		}
	f->in[0] = X;
	f->in[1] = gm0;
	f->in[2] = bt0;
	f->nin = bt0 ? 3 : 2;
	f->out = g->node[at[nn - 1]]->output[0];
	return f->nn = nn;
}

static void drop_inputs(PgIndex *x, Onnx__GraphProto *g, const long *at, int nn, char *gone)
{
	for (int q = 0; q < nn; q++) {
		pgx_node(x, g->node[at[q]], (size_t)at[q], 0);
		gone[at[q]] = 1;
	}
}

/* the last of the pattern's nodes (kept) becomes op(ins) writing out; the
 * others go; its index */
static long replace(PgIndex *x, Onnx__GraphProto *g, const long *at, int nn, char *gone, const char *op,
		    const char *const *ins, size_t nin, const char *out_in)
{
	long last = at[0];
	for (int q = 1; q < nn; q++)
		last = at[q] > last ? at[q] : last;
	char *out = xstrdup(out_in);
	char **in = xcalloc(nin, sizeof *in);
	for (size_t q = 0; q < nin; q++)
		in[q] = xstrdup(ins[q]);
	drop_inputs(x, g, at, nn, gone);
	gone[last] = 0;
	Onnx__NodeProto *n = g->node[last];
	char *name = n->name ? xstrdup(n->name) : NULL;
	onnx__node_proto__free_unpacked(n, NULL);
	n = xmalloc(sizeof *n);
	onnx__node_proto__init(n);
	n->op_type = xstrdup(op);
	n->name = name;
	n->n_input = nin;
	n->input = in;
	n->n_output = 1;
	n->output = xmalloc(sizeof *n->output);
	n->output[0] = out;
	g->node[last] = n;
	pgx_node(x, n, (size_t)last, 1);
	return last;
}

static int count_op(const Onnx__GraphProto *g, const char *op)
{
	int k = 0;
	for (size_t i = 0; i < g->n_node; i++)
		k += is(g->node[i], op);
	return k;
}

/* a LayerNorm without scale gets ones of its input's last dimension;
 * -1 (noted) when that is unknown */
static int ln_prepare(PrepCtx *c, Onnx__GraphProto *g, PgIndex *x, Found *f, char **own)
{
	if (f->in[1])
		return 0;
	int64_t dn = last_dim(x, f->in[0]);
	if (dn <= 0) {
		note(c, g->node[f->at[0]], "layernorm", "no scale and the last dimension of its input is unknown");
		return -1;
	}
	Tensor t = {0};
	tensor_alloc(&t, DT_FLOAT, 1, &dn);
	for (int64_t q = 0; q < dn; q++)
		((float *)t.data)[q] = 1.0f;
	*own = pg_fresh_name(c, g, "LayerNorm_scale");
	pg_add_init(g, *own, &t);
	pgx_add_init(x, g->initializer[g->n_initializer - 1]);
	f->in[1] = *own;
	return 0;
}

static void ln_attrs(Onnx__NodeProto *n, const Found *f)
{
	Onnx__AttributeProto *a = node_attr_add(n, "axis", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT);
	a->has_i = 1;
	a->i = -1;
	a = node_attr_add(n, "epsilon", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT);
	a->has_f = 1;
	a->f = (float)f->eps;
}

/* the constant factor of Mul n by a scalar, or 1/c of Div n by one, on
 * the input t: 1 with *f set */
static int scale_of(PrepCtx *c, const PgIndex *x, const Onnx__NodeProto *n, const char *t, double *f)
{
	const char *o = n->n_input == 2 ? other(n, t) : NULL;
	if (!o || !scalar(c, x, o, f))
		return 0;
	if (is(n, "Mul"))
		return 1;
	if (is(n, "Div") && !strcmp(n->input[0], t) && *f != 0) {
		*f = 1 / *f;
		return 1;
	}
	return 0;
}

/* reader of t that is op (only reader), its index in *k */
static const Onnx__NodeProto *next_op(const Onnx__GraphProto *g, const PgIndex *x, const char *t, const char *op,
				      long *k)
{
	const Onnx__NodeProto *n = reader(g, x, t, k);
	return is(n, op) ? n : NULL;
}

/* the end of x * 0.5 * (1 + inner(x)) from the Add(inner, 1) node a (index
 * ka): nodes appended to at[*nn]; the output name, or NULL */
static const char *gelu_tail(PrepCtx *c, const Onnx__GraphProto *g, const PgIndex *x, const char *X,
			     const Onnx__NodeProto *a, long *at, int *nn)
{
	long k, k2;
	const Onnx__NodeProto *m = reader(g, x, a->output[0], &k);
	if (!is(m, "Mul") || m->n_input != 2)
		return NULL;
	const char *o = other(m, a->output[0]);
	double f;
	if (o && !strcmp(o, X)) {
		/* (x * (1 + inner)) * 0.5 */
		const Onnx__NodeProto *h = next_op(g, x, m->output[0], "Mul", &k2);
		if (!h || !scale_of(c, x, h, m->output[0], &f) || !near(f, 0.5))
			return NULL;
		at[(*nn)++] = k;
		at[(*nn)++] = k2;
		return h->output[0];
	}
	/* (x * 0.5) * (1 + inner) */
	long kh = o ? pgx_producer(x, o) : -1;
	const Onnx__NodeProto *h = kh >= 0 ? g->node[kh] : NULL;
	if (!is(h, "Mul") || !other(h, X) || !scale_of(c, x, h, X, &f) || !near(f, 0.5) || pgx_uses(x, o) != 1)
		return NULL;
	at[(*nn)++] = kh;
	at[(*nn)++] = k;
	return m->output[0];
}

/* a GELU whose Erf or Tanh is node i: its nodes in at[], the result's
 * name in *out, whether it is the tanh form; 0 when none */
static int match_gelu(PrepCtx *c, const Onnx__GraphProto *g, const PgIndex *x, size_t i, Found *fd)
{
	long *at = fd->at;
	const char **out = &fd->out, **X = &fd->in[0];
	int *tanh_form = &fd->tanh_form;
	fd->nin = 1;
	const Onnx__NodeProto *t = g->node[i];
	double f;
	long k;
	*tanh_form = is(t, "Tanh");
	if ((!is(t, "Erf") && !*tanh_form) || t->n_input != 1 || t->n_output != 1)
		return 0;
	int nn = 0;
	const Onnx__NodeProto *s = prod(g, x, t->input[0]);
	if (!s || pgx_uses(x, t->input[0]) != 1)
		return 0;
	at[nn++] = pgx_producer(x, t->input[0]);
	if (!*tanh_form) {
		/* Erf(x / sqrt 2) */
		if (!(is(s, "Div") || is(s, "Mul")) || s->n_input != 2)
			return 0;
		*X = is(s, "Div") || pgx_init(x, s->input[1]) ? s->input[0] : s->input[1];
		if (!scale_of(c, x, s, *X, &f) || !near(f, M_SQRT1_2))
			return 0;
	} else {
		/* Tanh(sqrt(2/pi) * (x + 0.044715 * x^3)) */
		const char *u = s->n_input == 2 && pgx_init(x, s->input[1]) ? s->input[0] : s->n_input == 2 ? s->input[1] : NULL;
		if (!is(s, "Mul") || !u || !scale_of(c, x, s, u, &f) || !near(f, sqrt(2 / M_PI)) || pgx_uses(x, u) != 1)
			return 0;
		const Onnx__NodeProto *ad = prod(g, x, u);
		if (!is(ad, "Add") || ad->n_input != 2)
			return 0;
		at[nn++] = pgx_producer(x, u);
		int found = 0;
		for (int side = 0; side < 2 && !found; side++) {
			const char *xx = ad->input[side], *cube = ad->input[1 - side];
			const Onnx__NodeProto *m = prod(g, x, cube);
			if (!is(m, "Mul") || pgx_uses(x, cube) != 1)
				continue;
			const char *p3 = pgx_init(x, m->input[1]) ? m->input[0] : m->input[1];
			const Onnx__NodeProto *pw = prod(g, x, p3);
			double three;
			if (!scale_of(c, x, m, p3, &f) || !near(f, 0.044715) || !is(pw, "Pow") ||
			    strcmp(pw->input[0], xx) || !scalar(c, x, pw->input[1], &three) || three != 3.0 ||
			    pgx_uses(x, p3) != 1)
				continue;
			at[nn++] = pgx_producer(x, cube);
			at[nn++] = pgx_producer(x, p3);
			*X = xx;
			found = 1;
		}
		if (!found)
			return 0;
	}
	at[nn++] = (long)i;
	const Onnx__NodeProto *a = next_op(g, x, t->output[0], "Add", &k);
	double one;
	if (!a || !other(a, t->output[0]) || !scalar(c, x, other(a, t->output[0]), &one) || one != 1.0)
		return 0;
	at[nn++] = k;
	*out = gelu_tail(c, g, x, *X, a, at, &nn);
	if (!*out)
		return 0;
	for (int q = 0; q < nn - 1; q++)
		if (g->node[at[q]]->n_output != 1 || pgx_is_output(x, g->node[at[q]]->output[0]) ||
		    pgx_uses(x, g->node[at[q]]->output[0]) != 1)
			return 0;
	return fd->nn = nn;
}

static void gelu_attrs(Onnx__NodeProto *n, const Found *f)
{
	if (!f->tanh_form)
		return;
	Onnx__AttributeProto *a = node_attr_add(n, "approximate", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING);
	a->has_s = 1;
	a->s.data = (uint8_t *)xstrdup("tanh");
	a->s.len = 4;
}

/* one kind of fusion */
typedef struct Fusion {
	const char *pass, *what, *op;   /* "layernorm", "LayerNorm", "LayerNormalization" */
	int64_t since;                  /* the opset op needs */
	const char *start[3];           /* op types a match starts from */
	/* nodes found from node i (Found filled), 0 none, -1 recognised in part (noted) */
	int (*match)(PrepCtx *c, const Onnx__GraphProto *g, const PgIndex *x, size_t i, Found *f);
	/* -1 (noted) when it cannot be made after all; *own: a name to free */
	int (*prepare)(PrepCtx *c, Onnx__GraphProto *g, PgIndex *x, Found *f, char **own);
	void (*attrs)(Onnx__NodeProto *n, const Found *f);
} Fusion;

static const Fusion ln_fusion = {"layernorm", "LayerNorm", "LayerNormalization", 17, {"ReduceMean", NULL},
				 match_ln, ln_prepare, ln_attrs};
static const Fusion gelu_fusion = {"gelu", "GELU", "Gelu", 20, {"Erf", "Tanh", NULL}, match_gelu, NULL, gelu_attrs};

static int fuse_pass(PrepCtx *c, Onnx__GraphProto *g, const Fusion *fu, int (*self)(PrepCtx *, Onnx__GraphProto *))
{
	int any = 0;
	for (int k = 0; fu->start[k]; k++)
		any |= count_op(g, fu->start[k]) > 0;
	if (!any)
		return pg_each_subgraph(c, g, self);
	int64_t opset = model_opset(c->m->proto, "");
	PgIndex x;
	pgx_build(&x, g);
	char *gone = xcalloc(g->n_node ? g->n_node : 1, 1);
	size_t kept = 0;
	for (size_t i = 0; i < g->n_node; i++) {
		Found f = {0};
		if (gone[i] || fu->match(c, g, &x, i, &f) <= 0)
			continue;
		int clash = 0;
		for (int q = 0; q < f.nn; q++)
			clash |= gone[f.at[q]];
		if (clash)
			continue;
		if (opset < fu->since) {
			kept++;
			continue;
		}
		char *own = NULL;
		if (fu->prepare && fu->prepare(c, g, &x, &f, &own) < 0)
			continue;
		long last = replace(&x, g, f.at, f.nn, gone, fu->op, f.in, f.nin, f.out);
		fu->attrs(g->node[last], &f);
		free(own);
		c->stat->changed += (size_t)f.nn;
	}
	char *key = xasprintf("%s: kept", fu->pass);
	if (kept && c->o->log && first_time(c, key))
		fprintf(c->o->log, "preprocess: %s: %zu decomposed %s%s kept: opset %lld has no %s (%lld); "
			"static quantization keeps their insides float\n", fu->pass, kept, fu->what, kept > 1 ? "s" : "",
			(long long)opset, fu->op, (long long)fu->since);
	free(key);
	pg_drop_nodes(g, gone);
	free(gone);
	pgx_free(&x);
	return pg_each_subgraph(c, g, self);
}

int prep_layernorm(PrepCtx *c, Onnx__GraphProto *g)
{
	return fuse_pass(c, g, &ln_fusion, prep_layernorm);
}

int prep_gelu(PrepCtx *c, Onnx__GraphProto *g)
{
	return fuse_pass(c, g, &gelu_fusion, prep_gelu);
}
