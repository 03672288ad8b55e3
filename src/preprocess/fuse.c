/* fuse.c — the fuse-bn pass: BatchNormalization folded into the Conv,
 * ConvTranspose or Gemm that produces its input (see passes.h).
 *
 * y = (x - mean) * scale / sqrt(var + eps) + B is a per-channel affine map,
 * s = scale / sqrt(var + eps), so Conv(X, W, b) followed by it equals
 * Conv(X, W * s[o], (b - mean) * s + B); ConvTranspose's weight is
 * [C_in, C_out / group, k...], so output channel o = g * (C_out / group) + j
 * scales W[ci, j] for every ci of group g; Gemm(A, Bm, C, alpha, beta)
 * equals Gemm(A, Bm * s[col], (beta * C - mean) * s + B, alpha, beta = 1).
 * Conditions: inference BatchNormalization (training_mode 0, spatial 1,
 * is_test 1 before opset 7, no statistics output read); its parameters, W (or Bm) and any bias are float
 * initializers of the graph that no graph input overrides; the Conv/Gemm
 * output has no other reader and is no graph output; Gemm needs opset >= 7
 * and a bias of shape [], [1], [M], [r, 1] or [r, M]. New weights and bias
 * are new initializers (the old ones go with dce when unused); the
 * arithmetic is done in double and rounded once. Recurses into subgraphs. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "onnx/node.h"
#include "preprocess/passes.h"

static int default_domain(const Onnx__NodeProto *n)
{
	return !n->domain || !*n->domain || !strcmp(n->domain, "ai.onnx");
}

/* the float initializer called name (not a graph input) into t; 1, 0 if it
 * is none, -1 on a read error */
static int load_float(PrepCtx *c, const PgIndex *x, const char *name, Tensor *t)
{
	const Onnx__TensorProto *p = name && *name ? pgx_init(x, name) : NULL;
	if (!p || pgx_is_input(x, name) || p->data_type != DT_FLOAT)
		return 0;
	return pg_tensor(c->m, p, t) < 0 ? -1 : 1;
}

static int bn_inference(PrepCtx *c, const PgIndex *x, const Onnx__NodeProto *bn)
{
	int64_t v;
	if (attr_int(bn, "training_mode", 0, &v) < 0 || v)
		return 0;
	if (attr_int(bn, "spatial", 1, &v) < 0 || !v)
		return 0;
	/* before opset 7, is_test = 0 (the default) means training */
	if (model_opset(c->m->proto, "") < 7 && (attr_int(bn, "is_test", 0, &v) < 0 || !v))
		return 0;
	if (bn->n_input != 5)
		return 0;
	for (size_t k = 1; k < bn->n_output; k++)
		if (*bn->output[k] && (pgx_uses(x, bn->output[k]) || pgx_is_output(x, bn->output[k])))
			return 0;
	return 1;
}

static void set_input(Onnx__NodeProto *n, size_t i, const char *name)
{
	if (i >= n->n_input) {
		n->input = xreallocarray(n->input, i + 1, sizeof *n->input);
		for (size_t k = n->n_input; k <= i; k++)
			n->input[k] = xstrdup("");
		n->n_input = i + 1;
	}
	free(n->input[i]);
	n->input[i] = xstrdup(name);
}

static void set_float_attr(Onnx__NodeProto *n, const char *name, float v)
{
	for (size_t a = 0; a < n->n_attribute; a++)
		if (!strcmp(n->attribute[a]->name, name)) {
			n->attribute[a]->f = v;
			n->attribute[a]->has_f = 1;
			return;
		}
	Onnx__AttributeProto *at = node_attr_add(n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT);
	at->has_f = 1;
	at->f = v;
}

/* fold bn (node bi) into its producer (node pi), marking bn gone; 1
 * done, 0 not applicable, -1 */
static int fuse_one(PrepCtx *c, Onnx__GraphProto *g, PgIndex *x, size_t bi, size_t pi, char *gone)
{
	Onnx__NodeProto *bn = g->node[bi], *p = g->node[pi];
	int is_convt = !strcmp(p->op_type, "ConvTranspose");
	int is_conv = is_convt || !strcmp(p->op_type, "Conv");
	if (!default_domain(p) || (!is_conv && strcmp(p->op_type, "Gemm")) || p->n_output != 1)
		return 0;
	int64_t group = 1;
	if (is_convt && attr_int(p, "group", 1, &group) < 0)
		return -1;
	if (!is_conv && model_opset(c->m->proto, "") < 7)
		return 0;
	Tensor prm[4] = {{0}}, w = {0}, b = {0}, nw = {0}, nb = {0};
	int r = 1;
	float eps;
	int64_t ch = -1;
	if (attr_float(bn, "epsilon", 1e-5f, &eps) < 0)
		r = -1;
	for (size_t k = 0; k < 4 && r == 1; k++) {
		r = load_float(c, x, bn->input[k + 1], &prm[k]);
		if (r == 1 && k == 0)
			ch = prm[0].numel;
		if (r == 1 && (prm[k].rank != 1 || prm[k].numel != ch))
			r = 0;
	}
	if (r == 1)
		r = load_float(c, x, node_input(p, 1), &w);
	int has_bias = node_input(p, 2) != NULL;
	if (r == 1 && has_bias)
		r = load_float(c, x, node_input(p, 2), &b);
	int64_t alpha_trans = 0;
	float beta = 1;
	if (r == 1 && is_convt) {
		if (w.rank < 3 || group < 1 || w.dims[0] % group || w.dims[1] * group != ch ||
		    (has_bias && (b.rank != 1 || b.numel != ch)))
			r = 0;
	} else if (r == 1 && is_conv) {
		if (w.rank < 3 || w.dims[0] != ch || (has_bias && (b.rank != 1 || b.numel != ch)))
			r = 0;
	} else if (r == 1) {
		int64_t ta = 0;
		if (attr_int(p, "transB", 0, &alpha_trans) < 0 || attr_float(p, "beta", 1, &beta) < 0 ||
		    attr_int(p, "transA", 0, &ta) < 0)
			r = -1;
		else if (w.rank != 2 || w.dims[alpha_trans ? 0 : 1] != ch)
			r = 0;
		else if (has_bias && !(b.rank == 0 || (b.rank == 1 && (b.dims[0] == 1 || b.dims[0] == ch)) ||
				       (b.rank == 2 && (b.dims[1] == 1 || b.dims[1] == ch))))
			r = 0;
	}
	if (r != 1)
		goto out;
	double *s = xcalloc((size_t)ch, sizeof *s);
	const float *scale = prm[0].data, *bb = prm[1].data, *mean = prm[2].data, *var = prm[3].data;
	for (int64_t k = 0; k < ch; k++)
		s[k] = (double)scale[k] / sqrt((double)var[k] + (double)eps);
	/* weights */
	if (tensor_alloc(&nw, DT_FLOAT, w.rank, w.dims) < 0) {
		free(s);
		r = -1;
		goto out;
	}
	const float *wd = w.data;
	float *nwd = nw.data;
	if (is_convt) {
		/* W[ci, j, k...]: output channel (ci / (C_in / group)) * (C_out / group) + j */
		int64_t cpg = w.dims[1], k = w.numel / (w.dims[0] * cpg), ipg = w.dims[0] / group;
		for (int64_t i = 0; i < w.numel; i++) {
			int64_t ci = i / (cpg * k), j = i / k % cpg;
			nwd[i] = (float)(wd[i] * s[ci / ipg * cpg + j]);
		}
	} else if (is_conv) {
		int64_t per = w.numel / ch;
		for (int64_t i = 0; i < w.numel; i++)
			nwd[i] = (float)(wd[i] * s[i / per]);
	} else {
		for (int64_t i = 0; i < w.numel; i++)
			nwd[i] = (float)(wd[i] * s[alpha_trans ? i / w.dims[1] : i % w.dims[1]]);
	}
	/* bias: rows x ch */
	int64_t rows = has_bias && !is_conv && b.rank == 2 ? b.dims[0] : 1;
	int64_t bd[2] = {rows, ch};
	int brank = rows > 1 || (has_bias && !is_conv && b.rank == 2) ? 2 : 1;
	if (tensor_alloc(&nb, DT_FLOAT, brank, brank == 2 ? bd : bd + 1) < 0) {
		free(s);
		r = -1;
		goto out;
	}
	float *nbd = nb.data;
	for (int64_t i = 0; i < rows; i++)
		for (int64_t k = 0; k < ch; k++) {
			double cv = 0;
			if (has_bias) {
				const float *bv = b.data;
				if (is_conv)
					cv = bv[k];
				else if (b.rank == 0 || (b.rank == 1 && b.dims[0] == 1))
					cv = bv[0];
				else if (b.rank == 1)
					cv = bv[k];
				else
					cv = bv[i * b.dims[1] + (b.dims[1] == 1 ? 0 : k)];
				if (!is_conv)
					cv *= beta;
			}
			nbd[i * ch + k] = (float)((cv - mean[k]) * s[k] + bb[k]);
		}
	free(s);
	char *wn = pg_fresh_name(c, g, p->input[1]);
	char *bname = pg_fresh_name(c, g, has_bias ? p->input[2] : p->input[1]);
	pg_add_init(g, wn, &nw);
	pgx_add_init(x, g->initializer[g->n_initializer - 1]);
	pg_add_init(g, bname, &nb);
	pgx_add_init(x, g->initializer[g->n_initializer - 1]);
	pgx_node(x, bn, bi, 0);
	pgx_node(x, p, pi, 0);
	set_input(p, 1, wn);
	set_input(p, 2, bname);
	if (!is_conv)
		set_float_attr(p, "beta", 1);
	free(wn);
	free(bname);
	free(p->output[0]);
	p->output[0] = xstrdup(bn->output[0]);
	pgx_node(x, p, pi, 1);
	gone[bi] = 1;
	c->stat->changed++;
out:
	for (size_t k = 0; k < 4; k++)
		tensor_free(&prm[k]);
	tensor_free(&w);
	tensor_free(&b);
	tensor_free(&nw);
	tensor_free(&nb);
	return r;
}

/* does g itself hold a node of op? (a pass with nothing to do in g builds
 * no index of it) */
static int has_op(const Onnx__GraphProto *g, const char *op)
{
	for (size_t i = 0; i < g->n_node; i++)
		if (!strcmp(g->node[i]->op_type, op))
			return 1;
	return 0;
}

/* Nodes fused away are marked and dropped at the end, so the index's node
 * numbers stay valid (pgx_build) */
int prep_fuse_bn(PrepCtx *c, Onnx__GraphProto *g)
{
	if (!has_op(g, "BatchNormalization"))
		return pg_each_subgraph(c, g, prep_fuse_bn);
	PgIndex x;
	pgx_build(&x, g);
	char *gone = xcalloc(g->n_node ? g->n_node : 1, 1);
	int r = 0;
	for (size_t i = 0; i < g->n_node && r >= 0; i++) {
		Onnx__NodeProto *bn = g->node[i];
		if (gone[i] || strcmp(bn->op_type, "BatchNormalization") || !default_domain(bn) ||
		    !bn_inference(c, &x, bn) || !node_input(bn, 0))
			continue;
		const char *in = bn->input[0];
		long p = pgx_producer(&x, in);
		if (p < 0 || pgx_uses(&x, in) != 1 || pgx_is_output(&x, in) || pgx_sub_defines(&x, bn->output[0]))
			continue;
		r = fuse_one(c, g, &x, i, (size_t)p, gone);
	}
	pg_drop_nodes(g, gone);
	free(gone);
	pgx_free(&x);
	return r < 0 ? -1 : pg_each_subgraph(c, g, prep_fuse_bn);
}

/* rank of name from g's type annotations (inputs, value_info, outputs), -1 */
static int known_rank(const PgIndex *x, const char *name)
{
	const Onnx__ValueInfoProto *v = pgx_annotation(x, name);
	return v ? (int)v->type->tensor_type->shape->n_dim : -1;
}

/* the float initializer called name: its rank and dims (up to 2), or 0 */
static int init_shape(const PgIndex *x, const char *name, int *rank, int64_t *dims)
{
	const Onnx__TensorProto *t = pgx_init(x, name);
	if (!t || pgx_is_input(x, name) || t->data_type != DT_FLOAT || t->n_dims > 2)
		return 0;
	*rank = (int)t->n_dims;
	for (size_t i = 0; i < t->n_dims; i++)
		dims[i] = t->dims[i];
	return 1;
}

/* MatMul(A, W) + C, A of rank 2, W a [K, N] float initializer, C a float
 * initializer of shape [], [1], [N], [1, 1] or [1, N]: Gemm(A, W, C), which
 * computes the same sum of products plus the bias. Needs opset >= 7. */
int prep_matmul_add(PrepCtx *c, Onnx__GraphProto *g)
{
	if (model_opset(c->m->proto, "") < 7)
		return 0;
	if (!has_op(g, "MatMul"))
		return pg_each_subgraph(c, g, prep_matmul_add);
	PgIndex x;
	pgx_build(&x, g);
	char *gone = xcalloc(g->n_node ? g->n_node : 1, 1);
	for (size_t i = 0; i < g->n_node; i++) {
		Onnx__NodeProto *mm = g->node[i];
		if (gone[i] || strcmp(mm->op_type, "MatMul") || !default_domain(mm) || mm->n_input != 2 ||
		    mm->n_output != 1)
			continue;
		int wr, cr;
		int64_t wd[2], cd[2];
		const char *y = mm->output[0];
		if (!init_shape(&x, mm->input[1], &wr, wd) || wr != 2 || known_rank(&x, mm->input[0]) != 2 ||
		    pgx_uses(&x, y) != 1 || pgx_is_output(&x, y))
			continue;
		/* y's one reader, when it is a later node of g */
		long ai = pgx_only_reader(&x, y);
		Onnx__NodeProto *add = ai > (long)i ? g->node[ai] : NULL;
		if (!add || strcmp(add->op_type, "Add") || !default_domain(add) || add->n_input != 2 ||
		    !strcmp(add->input[0], add->input[1]))
			continue;
		const char *bias = !strcmp(add->input[0], y) ? add->input[1] : add->input[0];
		if (!init_shape(&x, bias, &cr, cd))
			continue;
		int64_t last = cr ? cd[cr - 1] : 1;
		if ((last != 1 && last != wd[1]) || (cr == 2 && cd[0] != 1))
			continue;
		if (pgx_sub_defines(&x, add->output[0]))
			continue;
		char *b = xstrdup(bias), *out = xstrdup(add->output[0]);
		pgx_node(&x, add, (size_t)ai, 0);
		pgx_node(&x, mm, i, 0);
		gone[ai] = 1;
		free(mm->op_type);
		mm->op_type = xstrdup("Gemm");
		mm->input = xreallocarray(mm->input, 3, sizeof *mm->input);
		mm->input[2] = b;
		mm->n_input = 3;
		free(mm->output[0]);
		mm->output[0] = out;
		pgx_node(&x, mm, i, 1);
		c->stat->changed++;
	}
	pg_drop_nodes(g, gone);
	free(gone);
	pgx_free(&x);
	return pg_each_subgraph(c, g, prep_matmul_add);
}

/* per-channel values of k for a Conv output of wrank dims and m channels:
 * k holds one value, or m values laid out along the channel axis ([m, 1..]
 * of rank wrank - 1, or [1, m, 1..] of rank wrank): 1, else 0 */
static int per_channel(const Tensor *k, int wrank, int64_t m)
{
	if (k->numel == 1)
		return k->rank <= wrank;
	if (k->numel != m)
		return 0;
	int ch = k->rank == wrank ? 1 : k->rank == wrank - 1 ? 0 : -1;
	if (ch < 0 || (ch == 1 && k->dims[0] != 1))
		return 0;
	return k->dims[ch] == m;
}

/* Conv(X, W, b) followed by Mul or Add of a per-channel float initializer:
 * W and b scaled (Mul) or b shifted (Add), the Mul/Add goes (marked, and
 * dropped at the end, as in fuse-bn). */
int prep_conv_affine(PrepCtx *c, Onnx__GraphProto *g)
{
	if (!has_op(g, "Conv"))
		return pg_each_subgraph(c, g, prep_conv_affine);
	PgIndex x;
	pgx_build(&x, g);
	char *gone = xcalloc(g->n_node ? g->n_node : 1, 1);
	int r = 0;
	for (size_t i = 0; i < g->n_node && r >= 0; i++) {
		Onnx__NodeProto *op = g->node[i];
		int mul = !strcmp(op->op_type, "Mul");
		if (gone[i] || (!mul && strcmp(op->op_type, "Add")) || !default_domain(op) || op->n_input != 2 ||
		    op->n_output != 1)
			continue;
		int side = -1;
		long p = -1;
		for (int s = 0; s < 2 && side < 0; s++) {
			long q = pgx_producer(&x, op->input[s]);
			if (q >= 0 && !strcmp(g->node[q]->op_type, "Conv") && default_domain(g->node[q]) &&
			    g->node[q]->n_output == 1 && pgx_uses(&x, op->input[s]) == 1 &&
			    !pgx_is_output(&x, op->input[s]))
				side = s, p = q;
		}
		if (side < 0 || pgx_sub_defines(&x, op->output[0]))
			continue;
		Onnx__NodeProto *conv = g->node[p];
		Tensor k = {0}, w = {0}, b = {0}, nw = {0}, nb = {0};
		int has_bias = node_input(conv, 2) != NULL;
		r = load_float(c, &x, op->input[1 - side], &k);
		if (r == 1)
			r = load_float(c, &x, node_input(conv, 1), &w);
		if (r == 1 && has_bias)
			r = load_float(c, &x, node_input(conv, 2), &b);
		int64_t m = w.rank >= 3 ? w.dims[0] : -1;
		if (r == 1 && (m < 0 || !per_channel(&k, w.rank, m) || (has_bias && (b.rank != 1 || b.numel != m))))
			r = 0;
		if (r == 1 && (tensor_alloc(&nb, DT_FLOAT, 1, &m) < 0 || (mul && tensor_alloc(&nw, DT_FLOAT, w.rank, w.dims) < 0)))
			r = -1;
		if (r == 1) {
			const float *kd = k.data, *wd = w.data, *bd = b.data;
			float *nbd = nb.data, *nwd = nw.data;
			int64_t per = w.numel / m;
			for (int64_t o = 0; o < m; o++) {
				float kv = kd[k.numel == 1 ? 0 : o], bv = has_bias ? bd[o] : 0;
				nbd[o] = mul ? bv * kv : bv + kv;
				for (int64_t e = 0; mul && e < per; e++)
					nwd[o * per + e] = wd[o * per + e] * kv;
			}
			pgx_node(&x, op, i, 0);
			pgx_node(&x, conv, (size_t)p, 0);
			if (mul) {
				char *wn = pg_fresh_name(c, g, conv->input[1]);
				pg_add_init(g, wn, &nw);
				pgx_add_init(&x, g->initializer[g->n_initializer - 1]);
				set_input(conv, 1, wn);
				free(wn);
			}
			char *bn = pg_fresh_name(c, g, has_bias ? conv->input[2] : conv->input[1]);
			pg_add_init(g, bn, &nb);
			pgx_add_init(&x, g->initializer[g->n_initializer - 1]);
			set_input(conv, 2, bn);
			free(bn);
			free(conv->output[0]);
			conv->output[0] = xstrdup(op->output[0]);
			pgx_node(&x, conv, (size_t)p, 1);
			gone[i] = 1;
			c->stat->changed++;
		}
		tensor_free(&k);
		tensor_free(&w);
		tensor_free(&b);
		tensor_free(&nw);
		tensor_free(&nb);
	}
	pg_drop_nodes(g, gone);
	free(gone);
	pgx_free(&x);
	return r < 0 ? -1 : pg_each_subgraph(c, g, prep_conv_affine);
}
