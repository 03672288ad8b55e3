/* dynamic.c — dynamic quantization in QOperator form (see quantize.h).
 *
 * For Y = MatMul(A, W) with W a 2-D float initializer [K, N]:
 *
 *   A_quantized, A_scale, A_zero_point = DynamicQuantizeLinear(A)   (shared)
 *   Y_int32 = MatMulInteger(A_quantized, W_quantized, A_zero_point, W_zero_point)
 *   Y_float = Cast(Y_int32, to=float)
 *   Y_scale = Mul(A_scale, W_scale)          (W_scale: scalar or [N])
 *   Y       = Mul(Y_float, Y_scale)
 *
 * Gemm (transA = 0, alpha = beta = 1) does the same with W transposed
 * offline when transB = 1, then adds C. Conv uses ConvInteger with uint8
 * weights (the ConvInteger every onnxruntime release runs; older ones have
 * no int8 kernel); per channel they are
 * symmetric, so every channel shares the zero point 128 that ConvInteger
 * takes as a scalar (per tensor too, which measured no worse than
 * asymmetric uint8), and the per-channel scale is applied after, as
 * [1, M, 1, ...]. Needs opset >= 11 (DynamicQuantizeLinear). */
#include <stdlib.h>
#include <string.h>

#include "onnx/node.h"
#include "quant/internal.h"

const char *const quant_dynamic_ops[] = {"Conv", "Gemm", "MatMul", NULL};

typedef struct DCtx {
	Model *m;
	Onnx__GraphProto *g;
	const QuantOpts *o;
	QuantReport *rep;
	Onnx__NodeProto **nodes;   /* the new node list */
	size_t nn;
	PtrVec dql;                /* activations with a DynamicQuantizeLinear */
} DCtx;

/* the DynamicQuantizeLinear of activation a (placed before its first use) */
static void dyn_quant(DCtx *c, const char *a, char **q, char **s, char **z)
{
	*q = xasprintf("%s_quantized", a);
	*s = xasprintf("%s_scale", a);
	*z = xasprintf("%s_zero_point", a);
	for (size_t i = 0; i < c->dql.n; i++)
		if (!strcmp(c->dql.v[i], a))
			return;
	pv_push(&c->dql, xstrdup(a));
	char *nm = xasprintf("%s_DynamicQuantizeLinear", a);
	const char *out[] = {*q, *s, *z};
	qg_push(&c->nodes, &c->nn, qg_node("DynamicQuantizeLinear", nm, 1, &a, 3, out));
	free(nm);
}

/* Cast + scale Mul (+ bias Add) after an integer node whose int32 output
 * is yint; the last node writes y */
static void dyn_tail(DCtx *c, const char *base, const char *yint, const char *ascale, const char *wscale,
		     const char *bias, const char *y)
{
	char *yf = xasprintf("%s_output_float", base), *ys = xasprintf("%s_scale_product", base);
	char *ym = bias ? xasprintf("%s_output_scaled", base) : xstrdup(y);
	char *n1 = xasprintf("%s_cast", base), *n2 = xasprintf("%s_scale_mul", base);
	char *n3 = xasprintf("%s_output_mul", base), *n4 = xasprintf("%s_bias_add", base);
	Onnx__NodeProto *cast = qg_node("Cast", n1, 1, &yint, 1, (const char *const *)&yf);
	qg_attr_int(cast, "to", DT_FLOAT);
	qg_push(&c->nodes, &c->nn, cast);
	const char *sin[] = {ascale, wscale}, *min[] = {yf, ys};
	qg_push(&c->nodes, &c->nn, qg_node("Mul", n2, 2, sin, 1, (const char *const *)&ys));
	qg_push(&c->nodes, &c->nn, qg_node("Mul", n3, 2, min, 1, (const char *const *)&ym));
	if (bias) {
		const char *ain[] = {ym, bias};
		qg_push(&c->nodes, &c->nn, qg_node("Add", n4, 2, ain, 1, &y));
	}
	free(yf);
	free(ys);
	free(ym);
	free(n1);
	free(n2);
	free(n3);
	free(n4);
}

static char *base_name(const Onnx__NodeProto *n)
{
	return xstrdup(n->name && *n->name ? n->name : n->output[0]);
}

/* MatMul or Gemm; 1 done, 0 skipped (*why set), -1 error */
static int dyn_matmul(DCtx *c, Onnx__NodeProto *n, const char **why)
{
	const char *a = node_input(n, 0), *w = node_input(n, 1), *bias = NULL;
	Onnx__TensorProto *wp = w ? qg_init(c->g, w) : NULL;
	if (!a || !wp || wp->data_type != DT_FLOAT || wp->n_dims != 2) {
		*why = "its weight (input 1) is not a 2-D float initializer";
		return 0;
	}
	int transb = 0;
	if (!strcmp(n->op_type, "Gemm")) {
		int64_t ta, tb;
		float alpha, beta;
		if (attr_int(n, "transA", 0, &ta) < 0 || attr_int(n, "transB", 0, &tb) < 0 ||
		    attr_float(n, "alpha", 1, &alpha) < 0 || attr_float(n, "beta", 1, &beta) < 0)
			return -1;
		if (ta || alpha != 1 || (node_input(n, 2) && beta != 1)) {
			*why = "Gemm with transA, alpha or beta other than 0, 1, 1";
			return 0;
		}
		transb = (int)tb;
		bias = node_input(n, 2);
	}
	Onnx__TensorProto *src = wp;
	Onnx__TensorProto *tmp = NULL;
	if (transb) {
		/* W^T as a temporary initializer proto [K, N] */
		Tensor t = {0}, tt = {0};
		if (tensor_from_proto(c->m, wp, &t) < 0)
			return -1;
		int64_t d[2] = {t.dims[1], t.dims[0]};
		if (tensor_alloc(&tt, DT_FLOAT, 2, d) < 0) {
			tensor_free(&t);
			return -1;
		}
		for (int64_t i = 0; i < t.dims[0]; i++)
			for (int64_t j = 0; j < t.dims[1]; j++)
				((float *)tt.data)[j * d[1] + i] = ((float *)t.data)[i * t.dims[1] + j];
		char *tn = xasprintf("%s_transposed", w);
		tmp = tensor_to_proto(&tt, tn);
		free(tn);
		tensor_free(&t);
		tensor_free(&tt);
		src = tmp;
	}
	int wt = c->o->weight_type;
	QWeight q;
	int r = qc_quant_weight(c->m, c->g, src, wt, wt == DT_INT8, c->o->reduce_range, c->o->per_channel ? 1 : -1, &q);
	if (tmp)
		onnx__tensor_proto__free_unpacked(tmp, NULL);
	if (r < 0)
		return -1;
	qc_report_tensor(c->rep, w, wt, q.nch, q.scales, q.zps, q.axis);
	char *aq, *as, *az;
	dyn_quant(c, a, &aq, &as, &az);
	char *base = base_name(n);
	char *yint = xasprintf("%s_output_int32", base), *nm = xasprintf("%s_MatMulInteger", base);
	const char *in[] = {aq, q.qname, az, q.zname};
	qg_push(&c->nodes, &c->nn, qg_node("MatMulInteger", nm, 4, in, 1, (const char *const *)&yint));
	dyn_tail(c, base, yint, as, q.sname, bias, n->output[0]);
	free(aq);
	free(as);
	free(az);
	free(base);
	free(yint);
	free(nm);
	qc_weight_free(&q);
	return 1;
}

static int dyn_conv(DCtx *c, Onnx__NodeProto *n, const char **why)
{
	const char *x = node_input(n, 0), *w = node_input(n, 1), *b = node_input(n, 2);
	Onnx__TensorProto *wp = w ? qg_init(c->g, w) : NULL;
	if (!x || !wp || wp->data_type != DT_FLOAT || wp->n_dims < 3) {
		*why = "its weight (input 1) is not a float initializer";
		return 0;
	}
	if (b && (!qg_init(c->g, b) || qg_init(c->g, b)->data_type != DT_FLOAT)) {
		*why = "its bias (input 2) is not a float initializer";
		return 0;
	}
	/* uint8 weights: ConvInteger's only weight type in onnxruntime */
	int pc = c->o->per_channel;
	QWeight q;
	if (qc_quant_weight(c->m, c->g, wp, DT_UINT8, 1, c->o->reduce_range, pc ? 0 : -1, &q) < 0)
		return -1;
	qc_report_tensor(c->rep, w, DT_UINT8, q.nch, q.scales, q.zps, q.axis);
	int64_t rank = (int64_t)wp->n_dims;
	char *base = base_name(n);
	const char *zname = q.zname;
	char *zscalar = NULL, *wscale = xstrdup(q.sname), *bname = NULL;
	if (pc) {
		/* every channel's zero point is 128: one scalar for ConvInteger,
		 * scales shaped [1, M, 1, ...] for the product after */
		uint8_t z = (uint8_t)q.zps[0];
		zscalar = xasprintf("%s_zero_point_scalar", w);
		qg_add_values(c->g, zscalar, DT_UINT8, 0, NULL, &z);
		zname = zscalar;
		free(wscale);
		wscale = xasprintf("%s_scale_bcast", w);
		int64_t d[QM_MAX_RANK];
		for (int64_t k = 0; k < rank; k++)
			d[k] = k == 1 ? q.nch : 1;
		qg_add_values(c->g, wscale, DT_FLOAT, (int)rank, d, q.scales);
	}
	if (b) {
		Tensor bt = {0};
		if (tensor_from_proto(c->m, qg_init(c->g, b), &bt) < 0) {
			qc_weight_free(&q);
			free(base);
			free(zscalar);
			free(wscale);
			return -1;
		}
		int64_t d[QM_MAX_RANK];
		for (int64_t k = 0; k < rank; k++)
			d[k] = k == 1 ? bt.numel : 1;
		bname = xasprintf("%s_bcast", b);
		qg_add_values(c->g, bname, DT_FLOAT, (int)rank, d, bt.data);
		tensor_free(&bt);
	}
	char *xq, *xs, *xz;
	dyn_quant(c, x, &xq, &xs, &xz);
	char *yint = xasprintf("%s_output_int32", base), *nm = xasprintf("%s_ConvInteger", base);
	const char *in[] = {xq, q.qname, xz, zname};
	Onnx__NodeProto *ci = qg_node("ConvInteger", nm, 4, in, 1, (const char *const *)&yint);
	/* the attributes move over (the float node goes) */
	for (size_t k = 0; k < n->n_attribute; k++)
		qg_attr_move(ci, n->attribute[k]);
	free(n->attribute);
	n->attribute = NULL;
	n->n_attribute = 0;
	qg_push(&c->nodes, &c->nn, ci);
	dyn_tail(c, base, yint, xs, wscale, bname, n->output[0]);
	if (pc) {
		/* replaced by the scalar zero point and the broadcast scales */
		qg_drop_unused_init(c->g, q.sname);
		qg_drop_unused_init(c->g, q.zname);
	}
	free(xq);
	free(xs);
	free(xz);
	free(yint);
	free(nm);
	free(base);
	free(zscalar);
	free(wscale);
	free(bname);
	qc_weight_free(&q);
	return 1;
}

int quant_dynamic(Model *m, const QuantOpts *o, QuantReport *rep)
{
	Onnx__GraphProto *g = m->proto->graph;
	int64_t opset = model_opset(m->proto, "");
	if (qc_check_not_quantized(g) < 0 || qc_check_lists(g, o, quant_dynamic_ops, "dynamic") < 0)
		return -1;
	if (opset < 11)
		return error("dynamic quantization needs opset >= 11 (DynamicQuantizeLinear); the model imports opset %lld",
			     (long long)opset);
	DCtx c = {.m = m, .g = g, .o = o, .rep = rep};
	size_t norig = g->n_node, nq = 0;
	Onnx__NodeProto **orig = xcalloc(norig ? norig : 1, sizeof *orig);
	memcpy(orig, g->node, norig * sizeof *orig);
	int *gone = xcalloc(norig ? norig : 1, sizeof *gone);
	int r = 0;
	char lab[256];
	for (size_t i = 0; i < norig && r == 0; i++) {
		Onnx__NodeProto *n = orig[i];
		const char *ex = qc_excluded(n, o), *why = NULL;
		char *own = NULL;
		int q = 0;
		if (!qc_in_list(quant_dynamic_ops, n->op_type)) {
			own = xasprintf("no dynamic quantization for %s", n->op_type);
			why = own;
		} else if (ex) {
			why = ex;
		} else {
			q = !strcmp(n->op_type, "Conv") ? dyn_conv(&c, n, &why) : dyn_matmul(&c, n, &why);
			if (q < 0)
				r = error_prefix("node '%s'", node_label(n, lab, sizeof lab));
		}
		if (q == 1) {
			gone[i] = 1;
			nq++;
			qc_report_node(rep, n, "quantized", !strcmp(n->op_type, "Conv") ?
				       "ConvInteger with uint8 weights (the only ConvInteger onnxruntime runs)" : NULL);
		} else if (q == 0) {
			qg_push(&c.nodes, &c.nn, n);
			qc_report_node(rep, n, "skipped", why);
		}
		free(own);
	}
	if (r == 0 && nq == 0)
		r = error("nothing to quantize: the model has no MatMul, Gemm or Conv with a float initializer weight that dynamic quantization could take (%zu nodes)",
			  norig);
	if (r == 0) {
		free(g->node);
		g->node = c.nodes;
		g->n_node = c.nn;
		c.nodes = NULL;
		for (size_t i = 0; i < norig; i++)
			if (gone[i]) {
				char *w = xstrdup(orig[i]->input[1]);
				char *b = node_input(orig[i], 2) ? xstrdup(orig[i]->input[2]) : NULL;
				onnx__node_proto__free_unpacked(orig[i], NULL);
				qg_drop_unused_init(g, w);
				if (b && !qg_has_consumer(g, b, NULL))
					qg_drop_unused_init(g, b);
				free(w);
				free(b);
			}
	} else {
		/* leave the graph as it was: drop only the new nodes */
		for (size_t i = 0; i < c.nn; i++) {
			int old = 0;
			for (size_t k = 0; k < norig && !old; k++)
				old = c.nodes[i] == orig[k];
			if (!old)
				onnx__node_proto__free_unpacked(c.nodes[i], NULL);
		}
		free(c.nodes);
	}
	for (size_t i = 0; i < c.dql.n; i++)
		free(c.dql.v[i]);
	pv_free(&c.dql);
	free(orig);
	free(gone);
	return r;
}
