/* exclude.c — what auto-exclusion leaves in float for a tensor, and whether
 * a re-quantization changed anything.
 *
 * The noise an activation T's step adds (blame.c) has two sources: the
 * quantized nodes that compute T (weights, inputs read through Q/DQ), and
 * T's own Q/DQ pair, which exists because T's consumers are quantized.
 * Leaving only T's producer in float removes the first; T stays quantized
 * for its consumers. Leaving the consumers in float removes the second,
 * but only if no further quantization of the same values takes its place:
 * a consumer that just moves values (Reshape, Transpose, Slice, MaxPool...)
 * hands them to its own consumers, which quantize them again with the same
 * range. So T's exclusion group is its segment's quantized nodes, and, when
 * T is quantized, its quantized consumers followed through such movers (the
 * only group of a quantized T that a float node or a graph input makes).
 *
 * The signature (verify_qsig) is a canonical text of the values a quantized
 * model computes: every node but Q/DQ pairs and movers is listed with where
 * each of its inputs comes from, a value described up to its quantization,
 * with two rules that hold exactly: quantizing a value again with the
 * parameters it already has changes nothing (its values lie on the grid),
 * and a mover commutes with quantization, Q(M(x)) = M(Q(x)) for the same
 * parameters (it copies or selects values; MaxPool and the max/min
 * reductions select with a monotonic order, which rounding keeps). Two
 * models quantized from the same float model with the same signature
 * compute the same values; the converse
 * does not hold (a Slice narrowing the range gets a new scale), which only
 * costs a round. */
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "onnx/node.h"
#include "strmap.h"
#include "verify/verify.h"

/* ops whose output holds values of their data input (input 0), copied or
 * selected, so that quantizing before or after them is the same; sorted */
static const char *const movers[] = {
	"DepthToSpace", "Expand", "Flatten", "Gather", "GatherElements", "GlobalMaxPool", "Identity", "MaxPool",
	"ReduceMax", "ReduceMin", "Reshape", "Slice", "SpaceToDepth", "Split", "Squeeze", "Tile", "Transpose",
	"Unsqueeze", NULL,
};

static int is_mover(const Onnx__NodeProto *n)
{
	if (n->domain && *n->domain && strcmp(n->domain, "ai.onnx"))
		return 0;
	for (size_t i = 0; movers[i]; i++)
		if (!strcmp(movers[i], n->op_type))
			return 1;
	return 0;
}

static int is_op(const Onnx__NodeProto *n, const char *op)
{
	return n && !strcmp(n->op_type, op);
}

/* name -> producing node, and name -> initializer, of a flat graph */
typedef struct Index {
	const Onnx__GraphProto *g;
	StrMap prod, init, readers;  /* readers: name -> PtrVec * of nodes */
} Index;

static void index_open(Index *x, const Onnx__GraphProto *g)
{
	memset(x, 0, sizeof *x);
	x->g = g;
	for (size_t i = 0; i < g->n_initializer; i++)
		strmap_put(&x->init, g->initializer[i]->name, g->initializer[i]);
	for (size_t i = 0; i < g->n_node; i++) {
		Onnx__NodeProto *n = g->node[i];
		for (size_t k = 0; k < n->n_output; k++)
			if (n->output[k] && *n->output[k])
				strmap_put(&x->prod, n->output[k], n);
		for (size_t k = 0; k < n->n_input; k++) {
			if (!n->input[k] || !*n->input[k])
				continue;
			StrMapEnt *e = strmap_add(&x->readers, n->input[k], NULL);
			if (!e->v.p)
				e->v.p = xcalloc(1, sizeof(PtrVec));
			PtrVec *r = e->v.p;
			if (!r->n || r->v[r->n - 1] != n)
				pv_push(r, n);
		}
	}
}

static void index_close(Index *x)
{
	for (StrMapEnt *e = NULL; (e = strmap_next(&x->readers, e));) {
		pv_free(e->v.p);
		free(e->v.p);
	}
	strmap_free(&x->readers);
	strmap_free(&x->prod);
	strmap_free(&x->init);
}

static const PtrVec *readers(const Index *x, const char *name)
{
	return strmap_get(&x->readers, name);
}

/* the DequantizeLinear output that T's QuantizeLinear feeds, or NULL */
static const char *dq_of(const Index *x, const char *t)
{
	const PtrVec *r = readers(x, t);
	for (size_t i = 0; r && i < r->n; i++) {
		const Onnx__NodeProto *qn = r->v[i];
		if (!is_op(qn, "QuantizeLinear") || !qn->n_output)
			continue;
		const PtrVec *d = readers(x, qn->output[0]);
		for (size_t k = 0; d && k < d->n; k++)
			if (is_op(d->v[k], "DequantizeLinear") && ((Onnx__NodeProto *)d->v[k])->n_output)
				return ((Onnx__NodeProto *)d->v[k])->output[0];
	}
	return NULL;
}

static void push_once(PtrVec *v, const char *name)
{
	for (size_t i = 0; i < v->n; i++)
		if (!strcmp(v->v[i], name))
			return;
	pv_push(v, xstrdup(name));
}

/* the named nodes reading dq (a DequantizeLinear output), and through the
 * movers among them, those reading their outputs' own Q/DQ pairs */
static void consumers(const Index *x, const char *dq, PtrVec *out, int depth)
{
	const PtrVec *r = readers(x, dq);
	for (size_t i = 0; r && i < r->n && depth < 64; i++) {
		const Onnx__NodeProto *n = r->v[i];
		if (!n->name || !*n->name || is_op(n, "QuantizeLinear") || is_op(n, "DequantizeLinear"))
			continue;
		push_once(out, n->name);
		if (!is_mover(n) || !n->n_input || strcmp(n->input[0], dq))
			continue;
		for (size_t k = 0; k < n->n_output; k++) {
			const char *d = n->output[k] && *n->output[k] ? dq_of(x, n->output[k]) : NULL;
			if (d)
				consumers(x, d, out, depth + 1);
		}
	}
}

/* a name that a rule-file list can hold (no blanks or commas) */
static int listable(const char *s)
{
	return *s && !s[strcspn(s, " \t,")];
}

/* the '\n'-separated names of list into out (each once); 0 when one of
 * them cannot be written in quantize.exclude-nodes */
static int push_list(PtrVec *out, const char *list)
{
	int ok = 1;
	for (const char *s = list; s && *s;) {
		const char *nl = strchr(s, '\n');
		char *nm = xstrndup(s, nl ? (size_t)(nl - s) : strlen(s));
		if (listable(nm))
			push_once(out, nm);
		else
			ok = 0;
		free(nm);
		s = nl ? nl + 1 : NULL;
	}
	return ok;
}

static double local_nsr(const ErrStats *e)
{
	if (!e->local_n || e->local_sx2 == 0)
		return -1;
	return e->local_sd2 / e->local_sx2;
}

static int cmp_added(const void *a, const void *b)
{
	const ErrStats *x = *(const ErrStats *const *)a, *y = *(const ErrStats *const *)b;
	double nx = err_added_nsr(x), ny = err_added_nsr(y);
	if (nx != ny)
		return nx > ny ? -1 : 1;
	return strcmp(x->name, y->name);
}

static int cmp_sqnr(const void *a, const void *b)
{
	const ErrStats *x = *(const ErrStats *const *)a, *y = *(const ErrStats *const *)b;
	double sx = err_sqnr(x), sy = err_sqnr(y);
	if (sx != sy)
		return sx < sy ? -1 : 1;
	return strcmp(x->name, y->name);
}

static int is_quantized(const ErrStats *e)
{
	return e->qname && strcmp(e->qname, e->name);
}

/* The candidate of activation e: its segment's quantized nodes S; when e
 * is quantized, S with e's quantized consumers (C), tried after S alone
 * unless e's own quantization is at least half the noise its step adds
 * (or S is empty: a float producer, a graph input). 0: no candidate. */
static int make_cand(const Index *x, const ErrStats *e, VerifyCand *c)
{
	memset(c, 0, sizeof *c);
	PtrVec s = {0}, sc = {0};
	if (!push_list(&s, e->qnodes)) {
		pv_free_all(&s);
		return 0;
	}
	if (is_quantized(e)) {
		for (size_t i = 0; i < s.n; i++)
			pv_push(&sc, xstrdup(s.v[i]));
		PtrVec cons = {0};
		consumers(x, e->qname, &cons, 0);
		int ok = 1;
		for (size_t i = 0; i < cons.n; i++)
			ok = ok && listable(cons.v[i]);
		for (size_t i = 0; ok && i < cons.n; i++)
			push_once(&sc, cons.v[i]);
		pv_free_all(&cons);
		if (!ok || sc.n == s.n)
			pv_free_all(&sc);
	}
	if (!s.n && !sc.n)
		return 0;
	double l = local_nsr(e);
	c->tensor = xstrdup(e->name);
	c->step_nsr = err_added_nsr(e);
	c->local_nsr = l;
	if (sc.n && (!s.n || (l >= 0 && 2 * l >= c->step_nsr))) {
		pv_free_all(&s);
		c->opts[c->nopts++] = sc;
		return 1;
	}
	c->opts[c->nopts++] = s;
	if (sc.n)
		c->opts[c->nopts++] = sc;
	return 1;
}

void verify_exclusions(const VerifyReport *rep, const Model *q, VerifyCand **out, size_t *count)
{
	const Onnx__GraphProto *qg = verify_flat_graph(q->proto->graph);
	Index x;
	index_open(&x, qg);
	/* blamed steps first, most added noise first; then the steps that add
	 * none of their own (their inputs are as noisy), lowest SQNR first */
	const ErrStats **a = xcalloc(rep->nacts + 1, sizeof *a), **b = xcalloc(rep->nacts + 1, sizeof *b);
	size_t na = 0, nb = 0;
	for (size_t i = 0; i < rep->nacts; i++) {
		const ErrStats *e = &rep->acts[i];
		if ((!e->qnodes || !*e->qnodes) && !is_quantized(e))
			continue;
		if (err_added_nsr(e) > 0)
			a[na++] = e;
		else
			b[nb++] = e;
	}
	if (na > 1)
		qsort(a, na, sizeof *a, cmp_added);
	if (nb > 1)
		qsort(b, nb, sizeof *b, cmp_sqnr);
	VerifyCand *v = xcalloc(na + nb + 1, sizeof *v);
	size_t n = 0;
	for (size_t i = 0; i < na + nb; i++)
		n += make_cand(&x, i < na ? a[i] : b[i - na], &v[n]);
	free(a);
	free(b);
	index_close(&x);
	verify_flat_free(qg);
	*out = v;
	*count = n;
}

void verify_cands_free(VerifyCand *v, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(v[i].tensor);
		for (size_t k = 0; k < v[i].nopts; k++)
			pv_free_all(&v[i].opts[k]);
	}
	free(v);
}

/* ---- the signature ---- */

typedef struct Canon {
	char *base;    /* how the value is computed, up to its last quantization */
	char *qp;      /* the parameters of that quantization, or NULL */
} Canon;

typedef struct Sig {
	Index x;
	StrMap memo;   /* name -> Canon * */
	int deep;      /* a chain too deep to follow: the signature is unknown */
} Sig;

/* the contents of a scale or zero point: its initializer's type, dims and
 * values, or its name when it is computed */
static void param_text(const Sig *s, const char *name, StrBuf *sb)
{
	const Onnx__TensorProto *t = name ? strmap_get(&s->x.init, name) : NULL;
	if (!t) {
		sb_printf(sb, "%s", name ? name : "-");
		return;
	}
	XXH3_state_t *st = XXH3_createState();
	XXH3_64bits_reset(st);
	XXH3_64bits_update(st, &t->data_type, sizeof t->data_type);
	XXH3_64bits_update(st, t->dims, t->n_dims * sizeof *t->dims);
	XXH3_64bits_update(st, t->raw_data.data, t->raw_data.len);
	XXH3_64bits_update(st, t->float_data, t->n_float_data * sizeof *t->float_data);
	XXH3_64bits_update(st, t->int32_data, t->n_int32_data * sizeof *t->int32_data);
	XXH3_64bits_update(st, t->int64_data, t->n_int64_data * sizeof *t->int64_data);
	sb_printf(sb, "%016llx", (unsigned long long)XXH3_64bits_digest(st));
	XXH3_freeState(st);
}

/* a Q or DQ node's parameters: scale, zero point, axis, domain */
static char *qparams(const Sig *s, const Onnx__NodeProto *n)
{
	StrBuf sb = {0};
	param_text(s, node_input(n, 1), &sb);
	sb_putc(&sb, '/');
	param_text(s, node_input(n, 2), &sb);
	int64_t axis = 1;
	(void)attr_int(n, "axis", 1, &axis);
	sb_printf(&sb, "/%lld/%s", (long long)axis, n->domain ? n->domain : "");
	return sb_detach(&sb);
}

static Canon *canon(Sig *s, const char *name, int depth);
static unsigned long long attrs_hash(const Onnx__NodeProto *n);

/* a value as one string: Q<p>(base) when quantized */
static char *full(const Canon *c)
{
	return c->qp ? xasprintf("Q<%s>(%s)", c->qp, c->base) : xstrdup(c->base);
}

static char *full_of(Sig *s, const char *name, int depth)
{
	if (!name)
		return xstrdup("-");
	return full(canon(s, name, depth + 1));
}

/* DequantizeLinear d: what it restores, with its parameters applied */
static void canon_dq(Sig *s, const Onnx__NodeProto *d, Canon *c, int depth)
{
	char *p = qparams(s, d);
	const Onnx__NodeProto *qn = d->n_input ? strmap_get(&s->x.prod, d->input[0]) : NULL;
	if (is_op(qn, "QuantizeLinear") && qn->n_input) {
		const Canon *in = canon(s, qn->input[0], depth + 1);
		char *qp = qparams(s, qn);
		if (strcmp(qp, p)) {
			c->base = xasprintf("DQ<%s>(Q<%s>(%s))", p, qp, in->base);
			free(p);
		} else if (in->qp && !strcmp(in->qp, p)) {
			c->base = xstrdup(in->base); /* on the grid already */
			c->qp = p;
		} else {
			c->base = full(in);
			c->qp = p;
		}
		free(qp);
		return;
	}
	char *in = full_of(s, node_input(d, 0), depth);
	c->base = xasprintf("DQ<%s>(%s)", p, in);
	free(in);
	free(p);
}

static Canon *canon(Sig *s, const char *name, int depth)
{
	StrMapEnt *e = strmap_find(&s->memo, name);
	if (e)
		return e->v.p;
	Canon *c = xcalloc(1, sizeof *c);
	const Onnx__NodeProto *n = strmap_get(&s->x.prod, name);
	if (depth >= 256) {
		s->deep = 1;
		n = NULL;
	}
	if (is_op(n, "DequantizeLinear")) {
		canon_dq(s, n, c, depth);
	} else if (is_op(n, "QuantizeLinear") && n->n_input) {
		/* integers a QOperator node reads */
		char *p = qparams(s, n), *in = full_of(s, n->input[0], depth);
		c->base = xasprintf("Q<%s>(%s)", p, in);
		free(p);
		free(in);
	} else if (n && is_mover(n) && n->n_input) {
		const Canon *in = canon(s, n->input[0], depth + 1);
		StrBuf sb = {0};
		size_t k = 0;
		while (k < n->n_output && strcmp(n->output[k], name))
			k++;
		/* MaxPool's indices: ties that rounding makes move them */
		int idx = k > 0 && is_op(n, "MaxPool");
		char *data = idx ? full(in) : xstrdup(in->base);
		sb_printf(&sb, "%s:%s:%llx:%zu(%s", n->op_type, n->name ? n->name : "", attrs_hash(n), k, data);
		free(data);
		for (size_t i = 1; i < n->n_input; i++) {
			char *f = full_of(s, node_input(n, i), depth);
			sb_printf(&sb, ",%s", f);
			free(f);
		}
		sb_putc(&sb, ')');
		c->base = sb_detach(&sb);
		c->qp = in->qp && !idx ? xstrdup(in->qp) : NULL;
	} else {
		c->base = xstrdup(name); /* a graph input, a weight, or a listed node's output */
	}
	strmap_put(&s->memo, name, c);
	return c;
}

/* a hash of n's attributes (subgraphs included) */
static unsigned long long attrs_hash(const Onnx__NodeProto *n)
{
	XXH3_state_t *st = XXH3_createState();
	XXH3_64bits_reset(st);
	for (size_t i = 0; i < n->n_attribute; i++) {
		size_t len = onnx__attribute_proto__get_packed_size(n->attribute[i]);
		uint8_t *buf = xmalloc(len ? len : 1);
		onnx__attribute_proto__pack(n->attribute[i], buf);
		XXH3_64bits_update(st, buf, len);
		free(buf);
	}
	unsigned long long h = XXH3_64bits_digest(st);
	XXH3_freeState(st);
	return h;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

char *verify_qsig(const Model *q)
{
	const Onnx__GraphProto *g = verify_flat_graph(q->proto->graph);
	Sig s = {0};
	index_open(&s.x, g);
	PtrVec lines = {0};
	for (size_t i = 0; i < g->n_node; i++) {
		const Onnx__NodeProto *n = g->node[i];
		if (is_op(n, "QuantizeLinear") || is_op(n, "DequantizeLinear") || is_mover(n))
			continue;
		StrBuf sb = {0};
		sb_printf(&sb, "%s.%s:%s:%llx(", n->domain ? n->domain : "", n->op_type, n->name ? n->name : "",
			  attrs_hash(n));
		for (size_t k = 0; k < n->n_input; k++) {
			char *f = full_of(&s, node_input(n, k), 0);
			sb_printf(&sb, "%s%s", k ? "," : "", f);
			free(f);
		}
		sb_puts(&sb, ")->");
		for (size_t k = 0; k < n->n_output; k++)
			sb_printf(&sb, "%s%s", k ? "," : "", n->output[k]);
		pv_push(&lines, sb_detach(&sb));
	}
	for (size_t i = 0; i < g->n_output; i++) {
		char *f = full_of(&s, g->output[i]->name, 0);
		pv_push(&lines, xasprintf("output %s=%s", g->output[i]->name, f));
		free(f);
	}
	if (lines.n > 1)
		qsort(lines.v, lines.n, sizeof *lines.v, cmp_str);
	StrBuf out = {0};
	for (size_t i = 0; i < lines.n; i++)
		sb_printf(&out, "%s\n", (const char *)lines.v[i]);
	pv_free_all(&lines);
	for (StrMapEnt *e = NULL; (e = strmap_next(&s.memo, e));) {
		Canon *c = e->v.p;
		free(c->base);
		free(c->qp);
		free(c);
	}
	strmap_free(&s.memo);
	index_close(&s.x);
	verify_flat_free(g);
	if (s.deep) {
		sb_release(&out);
		return NULL;
	}
	return out.len ? sb_detach(&out) : xstrdup("");
}
