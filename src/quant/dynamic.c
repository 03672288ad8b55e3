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
 * [1, M, 1, ...]. Needs opset >= 11 (DynamicQuantizeLinear).
 *
 * LSTM becomes onnxruntime's com.microsoft DynamicQuantizeLSTM (as its
 * quantize_dynamic writes it; src/ops/dqlstm.c runs it): W [dirs, 4H, I]
 * and R [dirs, 4H, H] are quantized per direction, or per row of 4H with
 * per-channel, and stored transposed ([dirs, I, 4H], [dirs, H, 4H]), with
 * scales and zero points [dirs] or [dirs, 4H]; the kernel quantizes X and
 * the hidden state at run time. Per row the zero point must be one per
 * direction, so uint8 weights are then symmetric (128). GRU and RNN stay
 * float: onnxruntime has no quantized kernel for them.
 *
 * If branches and Loop/Scan bodies are rewritten too, before the node that
 * holds them: a weight of an enclosing graph is quantized once in that
 * graph (both branches share it), the DynamicQuantizeLinear of an outer
 * activation goes in the graph that defines it, and new node and tensor
 * names in a body carry its scope ("If_0/then/fc").
 *
 * In a model saved next (QuantOpts.save_next), weights held in external
 * data get their scales and zero points now and their 8-bit tensors while
 * the model is written (model_defer; qc_quant_weight_at_save, LstmFill):
 * a big model never holds all its quantized weights. */
#include <stdlib.h>
#include <string.h>

#include "onnx/node.h"
#include "quant/internal.h"

const char *const quant_dynamic_ops[] = {"Conv", "Gemm", "LSTM", "MatMul", NULL};

typedef struct DCtx DCtx;
struct DCtx {
	DCtx *parent;              /* the enclosing graph's (NULL: main graph) */
	const char *scope;         /* "If_0/then" (NULL: main graph) */
	size_t *nq;                /* nodes quantized, over all scopes */
	int *ms;                   /* a com.microsoft node was written */
	PtrVec *drop;              /* pairs (graph, name) of float initializers
				    * a rewrite stopped reading, over all scopes */
	Model *m;
	Onnx__GraphProto *g;
	const QuantOpts *o;
	QuantReport *rep;
	Onnx__NodeProto **nodes;   /* the new node list */
	size_t nn;
	PtrVec dql;                /* activations with a DynamicQuantizeLinear */
	PtrVec wkey;               /* weights quantized in this scope ... */
	QWeight *wq;               /* ... and their parameters */
};

/* the scope (c or an enclosing one) whose initializer a read of name in c
 * resolves to, or NULL: a nearer definition hides outer initializers */
static DCtx *init_scope(DCtx *c, const char *name)
{
	for (; c; c = c->parent) {
		if (qg_init(c->g, name))
			return c;
		if (qg_defines(c->g, name))
			return NULL;
	}
	return NULL;
}

/* weight src (an initializer of scope c; transposed: stored as its
 * transpose, named after key), quantized once
 * per key in c: two readers (both branches of an If, say) share it */
static int dyn_weight(DCtx *c, const char *key, const Onnx__TensorProto *src, int transpose, int dtype,
		      int symmetric, int axis, const QWeight **out)
{
	for (size_t i = 0; i < c->wkey.n; i++)
		if (!strcmp(c->wkey.v[i], key)) {
			*out = &c->wq[i];
			return 0;
		}
	QWeight q;
	int rr = c->o->reduce_range, r;
	/* a model saved next gets external weights quantized as they are
	 * written (model_defer): the int8 results are never all held */
	if (c->o->save_next)
		r = qc_quant_weight_at_save(c->m, c->g, src, transpose, transpose ? key : src->name, dtype, symmetric, rr,
					    axis, &q);
	else if (transpose)
		r = qc_quant_weight_transposed(c->m, c->g, src, key, dtype, symmetric, rr, axis, &q);
	else
		r = qc_quant_weight(c->m, c->g, src, dtype, symmetric, rr, axis, &q);
	if (r < 0)
		return -1;
	c->wq = xreallocarray(c->wq, c->wkey.n + 1, sizeof *c->wq);
	c->wq[c->wkey.n] = q;
	*out = &c->wq[c->wkey.n];
	pv_push(&c->wkey, xstrdup(key));
	return 0;
}

/* initializer name of g is no longer read by the rewritten node */
static void dyn_drop(DCtx *c, Onnx__GraphProto *g, const char *name)
{
	pv_push(c->drop, g);
	pv_push(c->drop, xstrdup(name));
}

/* the DynamicQuantizeLinear of activation a (placed before its first use) */
static void dyn_quant(DCtx *c, const char *a, char **q, char **s, char **z)
{
	/* an outer value read in a body is quantized once, in its scope
	 * (whose node list ends just before the node holding the body) */
	for (DCtx *o = c; o; o = o->parent)
		if (qg_defines(o->g, a)) {
			c = o;
			break;
		}
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

/* the base of new names: the node's name, in a body with its scope */
static char *base_name(const DCtx *c, const Onnx__NodeProto *n)
{
	const char *b = n->name && *n->name ? n->name : n->output[0];
	return c->scope ? xasprintf("%s/%s", c->scope, b) : xstrdup(b);
}

/* MatMul or Gemm; 1 done, 0 skipped (*why set), -1 error */
static int dyn_matmul(DCtx *c, Onnx__NodeProto *n, const char **why)
{
	const char *a = node_input(n, 0), *w = node_input(n, 1), *bias = NULL;
	DCtx *wc = w ? init_scope(c, w) : NULL;
	Onnx__TensorProto *wp = wc ? qg_init(wc->g, w) : NULL;
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
	int wt = c->o->weight_type;
	const QWeight *q;
	char *key = xasprintf("%s%s", w, transb ? "_transposed" : "");
	size_t had = wc->wkey.n;
	/* transB: W [N, K] is quantized straight into its transpose [K, N] */
	int pc = qc_per_channel(c->m, c->o, c->rep, wp, transb ? 0 : 1);
	int r = pc < 0 ? -1 : dyn_weight(wc, key, wp, transb, wt, wt == DT_INT8, pc ? 1 : -1, &q);
	free(key);
	if (r < 0)
		return -1;
	if (wc->wkey.n > had)
		qc_report_tensor(c->rep, w, wt, q->nch, q->scales, q->zps, q->axis);
	char *aq, *as, *az;
	dyn_quant(c, a, &aq, &as, &az);
	char *base = base_name(c, n);
	char *yint = xasprintf("%s_output_int32", base), *nm = xasprintf("%s_MatMulInteger", base);
	const char *in[] = {aq, q->qname, az, q->zname};
	qg_push(&c->nodes, &c->nn, qg_node("MatMulInteger", nm, 4, in, 1, (const char *const *)&yint));
	dyn_tail(c, base, yint, as, q->sname, bias, n->output[0]);
	dyn_drop(c, wc->g, w);
	free(aq);
	free(as);
	free(az);
	free(base);
	free(yint);
	free(nm);
	return 1;
}

static int dyn_conv(DCtx *c, Onnx__NodeProto *n, const char **why)
{
	const char *x = node_input(n, 0), *w = node_input(n, 1), *b = node_input(n, 2);
	DCtx *wc = w ? init_scope(c, w) : NULL, *bc = b ? init_scope(c, b) : NULL;
	Onnx__TensorProto *wp = wc ? qg_init(wc->g, w) : NULL, *bp = bc ? qg_init(bc->g, b) : NULL;
	if (!x || !wp || wp->data_type != DT_FLOAT || wp->n_dims < 3) {
		*why = "its weight (input 1) is not a float initializer";
		return 0;
	}
	if (b && (!bp || bp->data_type != DT_FLOAT)) {
		*why = "its bias (input 2) is not a float initializer";
		return 0;
	}
	Tensor bt = {0};
	if (b && tensor_from_proto(c->m, bp, &bt) < 0)
		return -1;
	/* uint8 weights: ConvInteger's only weight type in onnxruntime */
	int pc = qc_per_channel(c->m, c->o, c->rep, wp, 0);
	const QWeight *q;
	size_t had = wc->wkey.n;
	char *key = xasprintf("%s (ConvInteger)", w);
	int r = pc < 0 ? -1 : dyn_weight(wc, key, wp, 0, DT_UINT8, 1, pc ? 0 : -1, &q);
	free(key);
	if (r < 0) {
		tensor_free(&bt);
		return -1;
	}
	if (wc->wkey.n > had)
		qc_report_tensor(c->rep, w, DT_UINT8, q->nch, q->scales, q->zps, q->axis);
	int64_t rank = (int64_t)wp->n_dims;
	char *base = base_name(c, n);
	char *zname = xstrdup(q->zname), *wscale = xstrdup(q->sname), *bname = NULL;
	if (pc) {
		/* every channel's zero point is 128: one scalar for ConvInteger,
		 * scales shaped [1, M, 1, ...] for the product after (made once
		 * per weight, beside it) */
		uint8_t z = (uint8_t)q->zps[0];
		free(zname);
		zname = xasprintf("%s_zero_point_scalar", w);
		if (!qg_init(wc->g, zname))
			qg_add_values(wc->g, zname, DT_UINT8, 0, NULL, &z);
		free(wscale);
		wscale = xasprintf("%s_scale_bcast", w);
		int64_t d[QM_MAX_RANK];
		for (int64_t k = 0; k < rank; k++)
			d[k] = k == 1 ? q->nch : 1;
		if (!qg_init(wc->g, wscale))
			qg_add_values(wc->g, wscale, DT_FLOAT, (int)rank, d, q->scales);
		/* replaced by the scalar zero point and the broadcast scales */
		dyn_drop(c, wc->g, q->sname);
		dyn_drop(c, wc->g, q->zname);
	}
	if (b) {
		int64_t d[QM_MAX_RANK];
		for (int64_t k = 0; k < rank; k++)
			d[k] = k == 1 ? bt.numel : 1;
		bname = xasprintf("%s_bcast", b);
		if (!qg_init(bc->g, bname))
			qg_add_values(bc->g, bname, DT_FLOAT, (int)rank, d, bt.data);
		tensor_free(&bt);
		dyn_drop(c, bc->g, b);
	}
	char *xq, *xs, *xz;
	dyn_quant(c, x, &xq, &xs, &xz);
	char *yint = xasprintf("%s_output_int32", base), *nm = xasprintf("%s_ConvInteger", base);
	const char *in[] = {xq, q->qname, xz, zname};
	Onnx__NodeProto *ci = qg_node("ConvInteger", nm, 4, in, 1, (const char *const *)&yint);
	/* the attributes move over (the float node goes) */
	for (size_t k = 0; k < n->n_attribute; k++)
		qg_attr_move(ci, n->attribute[k]);
	free(n->attribute);
	n->attribute = NULL;
	n->n_attribute = 0;
	qg_push(&c->nodes, &c->nn, ci);
	dyn_tail(c, base, yint, xs, wscale, bname, n->output[0]);
	dyn_drop(c, wc->g, w);
	free(xq);
	free(xs);
	free(xz);
	free(yint);
	free(nm);
	free(base);
	free(zname);
	free(wscale);
	free(bname);
	return 1;
}

/* An LSTM weight W [dirs, 4H, K] quantized in nch groups of len values
 * (a row of 4H, or a direction) and stored transposed per direction:
 * value (d, row, i) goes to (d, i, row) */
typedef struct LstmFill {
	Model *m;                  /* deferred: the model ... */
	Onnx__TensorProto *src;    /* ... and a copy of W's external reference */
	int64_t nch, len, gh, k;
	QParams *par;              /* nch */
	int qmin, qmax;
} LstmFill;

/* the source's pages go back to the file every DROP values read */
enum { DROP = 1 << 22 };

static void lstm_fill(const LstmFill *f, const FloatView *v, uint8_t *out)
{
	int64_t len = f->len, gh = f->gh, k = f->k, dropped = 0;
	uint8_t *tmp = xmalloc(len ? (size_t)len : 1);
	for (int64_t g = 0; g < f->nch; g++) {
		quantize_values(v->x + g * len, (size_t)len, &f->par[g], f->qmin, f->qmax, tmp);
		for (int64_t e = 0; e < len; e++) {
			int64_t flat = g * len + e, d = flat / (gh * k), row = flat / k % gh, i = flat % k;
			out[(d * k + i) * gh + row] = tmp[e];
		}
		if ((g + 1) * len - dropped >= DROP) {
			qc_float_drop(v, dropped, (g + 1) * len);
			dropped = (g + 1) * len;
		}
	}
	free(tmp);
}

/* TensorFill of a deferred LSTM weight: W read again, where it lies */
static int lstm_fill_deferred(void *ud, const Onnx__TensorProto *t, void *out, size_t len)
{
	LstmFill *f = ud;
	FloatView v;
	if (qc_float_view(f->m, f->src, &v) < 0) {
		qc_float_done(&v);
		return error_prefix("quantizing '%s'", t->name);
	}
	if (v.numel != f->nch * f->len || len != (size_t)v.numel) {
		qc_float_done(&v);
		return error("quantizing '%s': its source '%s' changed size (%lld values) since it was read", t->name,
			     f->src->name, (long long)v.numel);
	}
	lstm_fill(f, &v, out);
	qc_float_done(&v);
	return 0;
}

static void lstm_fill_free(void *ud)
{
	LstmFill *f = ud;
	if (f->src)
		onnx__tensor_proto__free_unpacked(f->src, NULL);
	free(f->par);
	free(f);
}

/* LSTM weight wp ([dirs, 4H, K], an initializer of scope c) quantized per
 * direction or per row and stored transposed [dirs, K, 4H] (see the top);
 * once per weight, as dyn_weight. External data of a model saved next is
 * quantized while it is written (model_defer), as dyn_weight's. */
static int dyn_lstm_weight(DCtx *c, const Onnx__TensorProto *wp, const QWeight **out)
{
	char *key = xasprintf("%s (DynamicQuantizeLSTM)", wp->name);
	for (size_t i = 0; i < c->wkey.n; i++)
		if (!strcmp(c->wkey.v[i], key)) {
			free(key);
			*out = &c->wq[i];
			return 0;
		}
	FloatView v;
	if (qc_float_view(c->m, wp, &v) < 0) {
		qc_float_done(&v);
		free(key);
		return -1;
	}
	int pc = qc_per_channel(c->m, c->o, c->rep, wp, 1), dt = c->o->weight_type, sym = dt == DT_INT8 || pc;
	if (pc < 0) {
		qc_float_done(&v);
		free(key);
		return -1;
	}
	int64_t nd = wp->dims[0], gh = wp->dims[1], k = wp->dims[2];
	int64_t nch = pc ? nd * gh : nd, len = pc ? k : gh * k;   /* groups, values per group */
	int64_t qd[3] = {nd, k, gh};
	LstmFill f = {.nch = nch, .len = len, .gh = gh, .k = k};
	f.par = xcalloc(nch ? (size_t)nch : 1, sizeof *f.par);
	qrange(dt, sym, c->o->reduce_range, &f.qmin, &f.qmax);
	QWeight q = {.nch = nch, .axis = pc ? 1 : nd > 1 ? 0 : -1, .dtype = dt};
	q.scales = xcalloc(nch ? (size_t)nch : 1, sizeof *q.scales);
	q.zps = xcalloc(nch ? (size_t)nch : 1, sizeof *q.zps);
	int64_t dropped = 0;
	for (int64_t g = 0; g < nch; g++) {
		const float *x = v.x + g * len;
		float lo = len ? x[0] : 0, hi = lo;
		for (int64_t i = 1; i < len; i++) {
			lo = x[i] < lo ? x[i] : lo;
			hi = x[i] > hi ? x[i] : hi;
		}
		f.par[g] = qparams_compute(lo, hi, dt, sym, c->o->reduce_range);
		q.scales[g] = f.par[g].scale;
		q.zps[g] = f.par[g].zero_point;
		if ((g + 1) * len - dropped >= DROP) {
			qc_float_drop(&v, dropped, (g + 1) * len);
			dropped = (g + 1) * len;
		}
	}
	q.qname = xasprintf("%s_quantized", wp->name);
	q.sname = xasprintf("%s_scale", wp->name);
	q.zname = xasprintf("%s_zero_point", wp->name);
	if (c->o->save_next && wp->has_data_location &&
	    wp->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL) {
		qc_float_done(&v);
		LstmFill *d = xmalloc(sizeof *d);
		*d = f;
		d->m = c->m;
		d->src = qc_proto_copy(wp);
		qc_add_deferred(c->m, c->g, q.qname, dt, 3, qd, lstm_fill_deferred, lstm_fill_free, d);
	} else {
		Tensor qt = {0};
		if (tensor_alloc(&qt, dt, 3, qd) < 0) {
			qc_float_done(&v);
			free(f.par);
			qc_weight_free(&q);
			free(key);
			return -1;
		}
		lstm_fill(&f, &v, qt.data);
		qc_float_done(&v);
		free(f.par);
		qg_add_init(c->g, q.qname, &qt);
	}
	int64_t sd[2] = {nd, gh};
	qg_add_values(c->g, q.sname, DT_FLOAT, pc ? 2 : 1, sd, q.scales);
	qc_add_zp(c->g, q.zname, dt, pc ? 2 : 1, sd, q.zps, nch);
	c->wq = xreallocarray(c->wq, c->wkey.n + 1, sizeof *c->wq);
	c->wq[c->wkey.n] = q;
	*out = &c->wq[c->wkey.n];
	pv_push(&c->wkey, key);
	qc_report_tensor(c->rep, wp->name, dt, q.nch, q.scales, q.zps, q.axis);
	return 0;
}

/* LSTM -> com.microsoft DynamicQuantizeLSTM; 1 done, 0 skipped (*why), -1 */
static int dyn_lstm(DCtx *c, Onnx__NodeProto *n, const char **why)
{
	const char *w = node_input(n, 1), *r = node_input(n, 2);
	DCtx *wc = w ? init_scope(c, w) : NULL, *rc = r ? init_scope(c, r) : NULL;
	Onnx__TensorProto *wp = wc ? qg_init(wc->g, w) : NULL, *rp = rc ? qg_init(rc->g, r) : NULL;
	int64_t layout, hid;
	if (attr_int(n, "layout", 0, &layout) < 0 || attr_int(n, "hidden_size", 0, &hid) < 0)
		return -1;
	if (!node_input(n, 0) || !wp || !rp || wp->data_type != DT_FLOAT || rp->data_type != DT_FLOAT ||
	    wp->n_dims != 3 || rp->n_dims != 3 || rp->dims[0] != wp->dims[0] || rp->dims[1] != wp->dims[1] || rp->dims[1] != 4 * rp->dims[2]) {
		*why = "its W and R (inputs 1 and 2) are not float initializers of shapes [dirs, 4H, I] and [dirs, 4H, H]";
		return 0;
	}
	if (layout) {
		*why = "layout = 1: onnxruntime's DynamicQuantizeLSTM has no layout attribute";
		return 0;
	}
	const QWeight *qw, *qr;
	/* W's entry is looked up again: adding R's may have moved wc->wq */
	if (dyn_lstm_weight(wc, wp, &qw) < 0 || dyn_lstm_weight(rc, rp, &qr) < 0 ||
	    dyn_lstm_weight(wc, wp, &qw) < 0)
		return -1;
	const char *in[12] = {node_input(n, 0), qw->qname, qr->qname, "", "", "", "", "",
			      qw->sname, qw->zname, qr->sname, qr->zname};
	for (size_t i = 3; i < 8; i++)
		in[i] = node_input(n, i) ? node_input(n, i) : "";
	char *base = base_name(c, n), *nm = xasprintf("%s_quant", base);
	Onnx__NodeProto *q = qg_node("DynamicQuantizeLSTM", nm, 12, in, n->n_output,
				     (const char *const *)n->output);
	free(q->domain);
	q->domain = xstrdup("com.microsoft");
	/* the attributes move over but layout (0 here); onnxruntime's kernel
	 * needs hidden_size, which LSTM may leave to R's shape */
	for (size_t k = 0; k < n->n_attribute; k++) {
		if (!strcmp(n->attribute[k]->name, "layout"))
			onnx__attribute_proto__free_unpacked(n->attribute[k], NULL);
		else
			qg_attr_move(q, n->attribute[k]);
	}
	free(n->attribute);
	n->attribute = NULL;
	n->n_attribute = 0;
	if (hid <= 0)
		qg_attr_int(q, "hidden_size", rp->dims[2]);
	qg_push(&c->nodes, &c->nn, q);
	*c->ms = 1;
	dyn_drop(c, wc->g, w);
	dyn_drop(c, rc->g, r);
	free(base);
	free(nm);
	return 1;
}

static void dctx_free(DCtx *c)
{
	for (size_t i = 0; i < c->dql.n; i++)
		free(c->dql.v[i]);
	pv_free(&c->dql);
	for (size_t i = 0; i < c->wkey.n; i++) {
		free(c->wkey.v[i]);
		qc_weight_free(&c->wq[i]);
	}
	pv_free(&c->wkey);
	free(c->wq);
}

static int dyn_graph(DCtx *c);

/* the bodies of node n (If branches, Loop and Scan bodies), each with a
 * context of its own whose parent is c */
static int dyn_bodies(DCtx *c, Onnx__NodeProto *n)
{
	int r = 0;
	for (size_t a = 0; a < n->n_attribute && r == 0; a++) {
		Onnx__GraphProto *b = n->attribute[a]->g;
		if (!b)
			continue;
		char *scope = qg_scope(c->scope, n, n->attribute[a]);
		DCtx s = {.parent = c, .scope = scope, .nq = c->nq, .ms = c->ms, .drop = c->drop, .m = c->m, .g = b,
			  .o = c->o, .rep = c->rep};
		r = dyn_graph(&s);
		dctx_free(&s);
		free(scope);
	}
	return r;
}

/* rewrite c->g; a node holding subgraphs has them rewritten first, so
 * the DynamicQuantizeLinear of an outer value they read lands before it */
static int dyn_graph(DCtx *c)
{
	Onnx__GraphProto *g = c->g;
	const QuantOpts *o = c->o;
	size_t norig = g->n_node;
	Onnx__NodeProto **orig = xcalloc(norig ? norig : 1, sizeof *orig);
	memcpy(orig, g->node, norig * sizeof *orig);
	int *gone = xcalloc(norig ? norig : 1, sizeof *gone);
	int r = 0;
	char lab[256];
	for (size_t i = 0; i < norig && r == 0; i++) {
		Onnx__NodeProto *n = orig[i];
		const char *ex = qc_excluded_in(n, c->scope, o), *why = NULL;
		char *own = NULL;
		int q = 0;
		if (!strcmp(n->op_type, "GRU") || !strcmp(n->op_type, "RNN")) {
			why = "onnxruntime has no quantized GRU or RNN kernel (only com.microsoft DynamicQuantizeLSTM)";
		} else if (!qc_in_list(quant_dynamic_ops, n->op_type)) {
			own = xasprintf("no dynamic quantization for %s", n->op_type);
			why = own;
		} else if (ex) {
			why = ex;
		} else {
			q = !strcmp(n->op_type, "Conv") ? dyn_conv(c, n, &why) :
			    !strcmp(n->op_type, "LSTM") ? dyn_lstm(c, n, &why) : dyn_matmul(c, n, &why);
			if (q < 0)
				r = error_prefix("node '%s%s%s'", c->scope ? c->scope : "", c->scope ? "/" : "",
						 node_label(n, lab, sizeof lab));
		}
		if (q == 1) {
			gone[i] = 1;
			(*c->nq)++;
			qc_report_node_in(c->rep, c->scope, n, "quantized", !strcmp(n->op_type, "Conv") ?
					  "ConvInteger with uint8 weights (the only ConvInteger onnxruntime runs)" :
					  !strcmp(n->op_type, "LSTM") ? "com.microsoft DynamicQuantizeLSTM" : NULL);
		} else if (q == 0) {
			qc_report_node_in(c->rep, c->scope, n, "skipped", why);
			r = dyn_bodies(c, n);
			qg_push(&c->nodes, &c->nn, n);
		}
		free(own);
	}
	if (r == 0) {
		free(g->node);
		g->node = c->nodes;
		g->n_node = c->nn;
		c->nodes = NULL;
		for (size_t i = 0; i < norig; i++)
			if (gone[i])
				onnx__node_proto__free_unpacked(orig[i], NULL);
	} else {
		/* leave the graph as it was: drop only the new nodes */
		for (size_t i = 0; i < c->nn; i++) {
			int old = 0;
			for (size_t k = 0; k < norig && !old; k++)
				old = c->nodes[i] == orig[k];
			if (!old)
				onnx__node_proto__free_unpacked(c->nodes[i], NULL);
		}
		free(c->nodes);
		c->nodes = NULL;
	}
	free(orig);
	free(gone);
	return r;
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
	size_t nq = 0, norig = g->n_node;
	int ms = 0;
	PtrVec drop = {0};
	DCtx c = {.nq = &nq, .ms = &ms, .drop = &drop, .m = m, .g = g, .o = o, .rep = rep};
	int r = dyn_graph(&c);
	if (r == 0 && nq == 0)
		r = error("nothing to quantize: the model has no MatMul, Gemm, Conv or LSTM with float initializer weights that dynamic quantization could take (%zu nodes)",
			  norig);
	if (r == 0 && ms)
		qg_import(m->proto, "com.microsoft", 1);
	/* float weights and biases no node reads any more go, in their scope */
	for (size_t i = 0; i + 1 < drop.n; i += 2) {
		if (r == 0)
			qg_drop_unused_init(drop.v[i], drop.v[i + 1]);
		free(drop.v[i + 1]);
	}
	pv_free(&drop);
	dctx_free(&c);
	return r;
}
