/* qop.c — static quantization in QOperator form (see quantize.h).
 *
 * One pass over the main graph in its (topological) order. A float tensor
 * with calibration statistics gets a quantized twin (X_quantized, with
 * X_scale and X_zero_point) and these nodes read and write twins:
 *   - Conv becomes QLinearConv: weights per tensor or per output channel,
 *     bias int32 with scale = input scale x weight scale;
 *   - Gemm (transA = 0, constant B, 1-D or absent C) becomes Reshape to
 *     [M, K, 1, 1], a 1x1 QLinearConv, Reshape back to [M, N]. onnxruntime
 *     emits its com.microsoft QGemm: the same integer sums, int32 bias and
 *     requantization, so the same codes (the CNN of tests/t_qop_ms.sh gives
 *     onnxruntime's outputs exactly, 51.0 dB both) for about 130 bytes less
 *     per Gemm (the two Reshapes and their shapes); not worth a contrib
 *     operator where standard ONNX does. QLinearMatMul has no bias input,
 *     so the bias would be added in float after rounding to a range nobody
 *     calibrated (the product before the bias). The 1x1 QLinearConv takes
 *     the same int32 bias (alpha is folded into the weights, beta into the
 *     bias);
 *   - MatMul of a 2-D input and a constant, read only by an Add of a
 *     constant bias (an exported Linear layer), becomes the same 1x1
 *     QLinearConv with that bias in int32: the product is not rounded before
 *     the bias, as in the QDQ form; any other MatMul becomes QLinearMatMul
 *     (weights per tensor: per-column scales are not part of QLinearMatMul
 *     before opset 21);
 *   - MaxPool (opset >= 12), Reshape, Transpose, Flatten (opset >= 9),
 *     Squeeze, Unsqueeze, Slice, Gather, Split, and Concat of twins with
 *     one scale and zero point, whose input is already a twin, run on the
 *     8-bit tensors and pass the scale and zero point on: they only move
 *     values;
 *   - a Relu/Clip that alone reads the output of a converted Conv, Gemm,
 *     MatMul, Add or Mul folds into that output's range, as in the QDQ
 *     form (the activation's calibrated range clamps as it does).
 *   - Add, Mul, GlobalAveragePool, AveragePool, Sigmoid, LeakyRelu,
 *     Softmax and Concat of twins with differing scales, whose data inputs
 *     are already twins (Add and Mul: one of them, the other gets a
 *     QuantizeLinear), become onnxruntime's com.microsoft QLinearAdd,
 *     QLinearMul, QLinearGlobalAveragePool, QLinearAveragePool,
 *     QLinearSigmoid, QLinearLeakyRelu, QLinearSoftmax and QLinearConcat
 *     (src/ops/qlinear_ms.c runs them; the model then imports com.microsoft
 *     version 1), as onnxruntime's QOperator quantizer emits them: the
 *     output gets its own calibrated parameters, Softmax's the fixed scale
 *     1/256 and the lowest code as zero point (0 for uint8, -128 for int8).
 *     AveragePool with dilations stays float (the QLinear form has none),
 *     and so does a GlobalAveragePool whose input and output scales are
 *     more than 256 times apart (onnxruntime refuses to run it).
 * QuantizeLinear makes a twin where a quantized region starts (once per
 * tensor); DequantizeLinear gives the float tensor back, under its own
 * name, where a float node or a graph output reads it, as onnxruntime's
 * QOperator output does.
 *
 * If branches and Loop/Scan bodies are rewritten the same way, each as a
 * graph of its own after the node holding it: twins do not cross a body's
 * boundary (an outer value the body quantizes gets a QuantizeLinear inside
 * it, its twin named by the scope, "If_0/then/x_quantized"; the body's
 * outputs are float). A Conv/Gemm/MatMul weight that is an initializer of
 * an enclosing graph is quantized in that graph, once for all the bodies
 * reading it, and each body's QLinearConv/QLinearMatMul reads it from
 * there (onnxruntime runs outer-scope initializers as constant inputs);
 * its int32 bias, which depends on the body's input scale, lives in the
 * body. A body calibration never ran stays float whole. quant.json names
 * body nodes by scope. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "onnx/node.h"
#include "quant/internal.h"
#include "quant/range.h"

static const char *const qop_ops[] = {
	"Add", "AveragePool", "Clip", "Concat", "Conv", "Flatten", "Gather", "Gemm", "GlobalAveragePool",
	"LeakyRelu", "MatMul", "MaxPool", "Mul", "Relu", "Reshape", "Sigmoid", "Slice", "Softmax", "Split",
	"Squeeze", "Transpose", "Unsqueeze", NULL,
};

typedef struct QVal {
	char *name;        /* the float tensor */
	char *q, *s, *z;   /* its twin and the twin's scale and zero point */
	QParams p;
	int has_float;     /* the float tensor is in the new graph */
} QVal;

typedef struct Ctx {
	Model *m;
	Onnx__GraphProto *g;
	struct Ctx *parent;       /* the enclosing graph's (NULL: main graph) */
	const char *scope;        /* "If_0/then" (NULL: main graph) */
	size_t *nq;               /* nodes quantized, over all scopes */
	int *ms;                  /* a com.microsoft operator was emitted, any scope */
	const CalibStats *stats;
	const QuantOpts *o;
	QuantReport *rep;
	int64_t opset;
	Onnx__NodeProto **orig;   /* the original nodes */
	size_t norig;
	const char **status;      /* per original node: NULL (float), "quantized", "folded" */
	int *kept;                /* per original node: it is in the new list */
	QVal **vals;              /* each malloc'd: pointers stay valid */
	size_t nvals;
	Onnx__NodeProto **out;    /* the new node list */
	size_t nout;
	PtrVec wkeys;             /* weights quantized so far ... */
	QWeight *wq;              /* ... and their parameters */
	int *wkind;               /* ... and how: per-channel 0/1, +8 in the [N, K, 1, 1]
				     layout of Gemm, +2 more when B was transposed */
	struct Range {            /* activation parameters chosen so far (entropy is slow) */
		char *name;
		char *note;           /* quant.json members on where the range came from, or NULL */
		int ok;
		QParams p;
	} *ranges;
	size_t nranges;
	PtrVec replaced;          /* float initializers that may have lost their readers */
	QtRanges sent;            /* ranges past sentinels, traced before the rewrite */
} Ctx;

/* the scope (c or an enclosing one) whose initializer a read of name in c
 * resolves to, or NULL: a nearer definition hides outer initializers */
static Ctx *init_holder(Ctx *c, const char *name)
{
	for (; c && name; c = c->parent) {
		if (qg_init(c->g, name))
			return c;
		if (qg_defines(c->g, name))
			return NULL;
	}
	return NULL;
}

/* the initializer a read of name in c resolves to, or NULL */
static const Onnx__TensorProto *init_of(Ctx *c, const char *name)
{
	Ctx *h = init_holder(c, name);
	return h ? qg_init(h->g, name) : NULL;
}

static QVal *val_find(Ctx *c, const char *name)
{
	for (size_t i = 0; i < c->nvals; i++)
		if (!strcmp(c->vals[i]->name, name))
			return c->vals[i];
	return NULL;
}

/* a new twin of name; with s == NULL its scale and zero point become
 * initializers, else it shares s and z (a type-generic node's output) */
static QVal *val_add(Ctx *c, const char *name, QParams p, int has_float, const char *s, const char *z)
{
	QVal *v = xcalloc(1, sizeof *v);
	c->vals = xreallocarray(c->vals, c->nvals + 1, sizeof *c->vals);
	c->vals[c->nvals++] = v;
	/* a body's twin of an outer value is named by the scope: the outer
	 * graph may have a twin of that name already */
	char *sn = c->scope && !qg_defines(c->g, name) ? xasprintf("%s/%s", c->scope, name) : NULL;
	const char *base = sn ? sn : name;
	char *b = xasprintf("%s_quantized", base);
	v->name = xstrdup(name);
	v->q = qg_unique_name(c->g, b);
	v->p = p;
	v->has_float = has_float;
	free(b);
	if (s) {
		v->s = xstrdup(s);
		v->z = xstrdup(z);
	} else {
		char *bs = xasprintf("%s_scale", base), *bz = xasprintf("%s_zero_point", base);
		v->s = qg_unique_name(c->g, bs);
		v->z = qg_unique_name(c->g, bz);
		qg_add_scalar_f(c->g, v->s, p.scale);
		qc_add_zp(c->g, v->z, p.dtype, 0, NULL, &p.zero_point, 1);
		free(bs);
		free(bz);
	}
	qc_report_tensor(c->rep, base, p.dtype, 1, &p.scale, &p.zero_point, -1);
	for (size_t i = 0; i < c->nranges; i++)
		if (c->ranges[i].note && !strcmp(c->ranges[i].name, name))
			qc_report_extra(c->rep, c->ranges[i].note);
	free(sn);
	return v;
}

/* activation parameters of computed tensor name; 0 without statistics */
static int act_params(Ctx *c, const char *name, QParams *p)
{
	for (size_t i = 0; i < c->nranges; i++)
		if (!strcmp(c->ranges[i].name, name)) {
			*p = c->ranges[i].p;
			return c->ranges[i].ok;
		}
	const TensorStats *ts = qg_init(c->g, name) ? NULL : calib_find(c->stats, name);
	struct Range r = {.name = xstrdup(name), .ok = ts != NULL};
	if (ts) {
		float lo = 0, hi = 0;
		StrBuf note = {0};
		/* an outer value's sentinels were traced in the graph defining it */
		Ctx *def = c;
		while (def->parent && !qg_defines(def->g, name))
			def = def->parent;
		int how = qt_act_range(&def->sent, def->g, c->stats, c->o, name, &lo, &hi, &note);
		if (how < 0) {
			r.ok = 0;   /* sentinels and no range to tell: it stays float */
			qc_report_float(c->rep, name, note.buf);
		}
		c->rep->nsentinel += how == 1;
		r.p = qparams_compute(lo, hi, c->o->act_type, c->o->act_symmetric, 0);
		if (how > 0)
			r.note = sb_detach(&note);
		sb_release(&note);
	}
	c->ranges = xreallocarray(c->ranges, c->nranges + 1, sizeof *c->ranges);
	c->ranges[c->nranges++] = r;
	*p = r.p;
	return r.ok;
}

static int can_twin(Ctx *c, const char *name)
{
	QParams p;
	return name && (val_find(c, name) || act_params(c, name, &p));
}

static void emit(Ctx *c, const char *op, const char *base, const char *suffix, size_t nin,
		 const char *const *in, const char *out)
{
	char *nm = xasprintf("%s_%s", base, suffix);
	qg_push(&c->out, &c->nout, qg_node(op, nm, nin, in, 1, &out));
	free(nm);
}

/* the twin of name (can_twin holds), made here by a QuantizeLinear when the
 * quantized region starts at name */
static QVal *twin(Ctx *c, const char *name)
{
	QVal *v = val_find(c, name);
	if (v)
		return v;
	QParams p;
	act_params(c, name, &p);
	v = val_add(c, name, p, 1, NULL, NULL);
	const char *in[] = {name, v->s, v->z};
	emit(c, "QuantizeLinear", name, "QuantizeLinear", 3, in, v->q);
	return v;
}

/* the float tensor name exists from here on: a DequantizeLinear of its twin */
static void need_float(Ctx *c, const char *name)
{
	QVal *v = val_find(c, name);
	if (!v || v->has_float)
		return;
	const char *in[] = {v->q, v->s, v->z};
	emit(c, "DequantizeLinear", name, "DequantizeLinear", 3, in, name);
	v->has_float = 1;
}

static size_t orig_index(Ctx *c, const Onnx__NodeProto *n)
{
	for (size_t i = 0; i < c->norig; i++)
		if (c->orig[i] == n)
			return i;
	return c->norig;
}

/* the single original node reading name, or NULL */
static Onnx__NodeProto *sole_reader(Ctx *c, const char *name)
{
	Onnx__NodeProto *r = NULL;
	for (size_t i = 0; i < c->norig; i++)
		for (size_t k = 0; k < c->orig[i]->n_input; k++)
			if (!strcmp(c->orig[i]->input[k], name)) {
				if (r && r != c->orig[i])
					return NULL;
				r = c->orig[i];
			}
	return r;
}

/* the output of node n as quantized: its own name, or that of a Relu/Clip
 * folded into it (marked "folded"); 0 without statistics. A symmetric
 * range holds negative values, so it would not clamp as Relu does: the
 * activation then stays (as onnxruntime keeps it) */
static int out_target(Ctx *c, Onnx__NodeProto *n, const char **y, QParams *p)
{
	*y = n->output[0];
	Onnx__NodeProto *r = qg_is_output(c->g, *y) || c->o->act_symmetric ? NULL : sole_reader(c, *y);
	if (r && (!strcmp(r->op_type, "Relu") || !strcmp(r->op_type, "Clip")) && r->n_output == 1 &&
	    !strcmp(r->input[0], *y) && !qc_excluded(r, c->o) && act_params(c, r->output[0], p)) {
		*y = r->output[0];
		c->status[orig_index(c, r)] = "folded";
		return 1;
	}
	return act_params(c, *y, p);
}

/* weight proto w, quantized once per key; kind: see Ctx. 0 with *why when
 * the weight is already quantized another way. A weight of an enclosing
 * graph is quantized there, once for every body reading it: a body's
 * QLinearConv reads the quantized initializer as an outer value (onnxruntime
 * takes it, as it takes outer float weights) */
static int weight(Ctx *c, const char *key, const Onnx__TensorProto *w, int axis, int kind, QWeight **q,
		  const char **why)
{
	Ctx *h = init_holder(c, key);
	if (h)
		c = h;
	for (size_t i = 0; i < c->wkeys.n; i++)
		if (!strcmp(c->wkeys.v[i], key)) {
			*q = &c->wq[i];
			if (c->wkind[i] != kind)
				*why = "its weight is shared with a node that quantizes it another way";
			return c->wkind[i] == kind;
		}
	int wt = c->o->weight_type;
	QWeight r;
	/* uint8 per channel is symmetric too: onnxruntime's QLinearConv wants one zero point */
	if (qc_quant_weight(c->m, c->g, w, wt, wt == DT_INT8 || axis >= 0, c->o->reduce_range, axis, &r) < 0)
		return -1;
	qc_report_tensor(c->rep, key, wt, r.nch, r.scales, r.zps, axis);
	c->wq = xreallocarray(c->wq, c->wkeys.n + 1, sizeof *c->wq);
	c->wkind = xreallocarray(c->wkind, c->wkeys.n + 1, sizeof *c->wkind);
	c->wq[c->wkeys.n] = r;
	c->wkind[c->wkeys.n] = kind;
	*q = &c->wq[c->wkeys.n];
	pv_push(&c->wkeys, xstrdup(key));
	pv_push(&c->replaced, xstrdup(key));
	return 1;
}

/* a float initializer of numel n (n < 0: any), read as a tensor; 0 when not */
static int float_const(Ctx *c, const char *name, int64_t n, Tensor *t)
{
	const Onnx__TensorProto *p = init_of(c, name);
	if (!p || p->data_type != DT_FLOAT)
		return 0;
	if (tensor_from_proto(c->m, p, t) < 0)
		return -1;
	if (n >= 0 && t->numel != n) {
		tensor_free(t);
		return 0;
	}
	return 1;
}

/* int32 bias b (numel M) x beta with scale = xs x weight scale; its name */
static char *bias_q(Ctx *c, const char *name, const Tensor *b, float beta, float xs, const QWeight *w)
{
	int64_t m = b->numel;
	int32_t *q = xmalloc((size_t)(m ? m : 1) * sizeof *q);
	float *sc = xmalloc((size_t)w->nch * sizeof *sc);
	int32_t *zp = xcalloc((size_t)w->nch, sizeof *zp);
	for (int64_t k = 0; k < w->nch; k++)
		sc[k] = xs * w->scales[k];
	for (int64_t i = 0; i < m; i++) {
		double v = nearbyint((double)beta * ((const float *)b->data)[i] / sc[w->nch > 1 ? i : 0]);
		q[i] = (int32_t)(v < -2147483647.0 ? -2147483647.0 : v > 2147483647.0 ? 2147483647.0 : v);
	}
	char *base = xasprintf("%s_quantized", name), *qn = qg_unique_name(c->g, base);
	qg_add_values(c->g, qn, DT_INT32, 1, &m, q);
	qc_report_tensor(c->rep, name, DT_INT32, w->nch, sc, zp, w->nch > 1 ? 0 : -1);
	/* the int32 bias depends on the input scale: it stays in c; the float
	 * one may go from the graph holding it */
	Ctx *h = init_holder(c, name);
	pv_push(&(h ? h : c)->replaced, xstrdup(name));
	free(base);
	free(q);
	free(sc);
	free(zp);
	return qn;
}

/* QLinearConv(x, w, bias) -> y; attributes moved from n (may be NULL) */
static Onnx__NodeProto *qlinearconv(Ctx *c, const char *base, QVal *x, const QWeight *w, const char *bias,
				    QVal *y, const char *yq, Onnx__NodeProto *n)
{
	const char *in[] = {x->q, x->s, x->z, w->qname, w->sname, w->zname, y->s, y->z, bias};
	char *nm = xasprintf("%s_quant", base);
	Onnx__NodeProto *qc = qg_node("QLinearConv", nm, bias ? 9 : 8, in, 1, &yq);
	free(nm);
	for (size_t i = 0; n && i < n->n_attribute; i++)
		qg_attr_move(qc, n->attribute[i]);
	if (n) {
		free(n->attribute);
		n->attribute = NULL;
		n->n_attribute = 0;
	}
	return qc;
}

static const char *base_of(const Onnx__NodeProto *n)
{
	return n->name && *n->name ? n->name : n->output[0];
}

/* Conv -> QLinearConv; 1 done, 0 not (*why), -1 error */
static int do_conv(Ctx *c, Onnx__NodeProto *n, const char **why)
{
	const char *x = node_input(n, 0), *w = node_input(n, 1), *b = node_input(n, 2), *y;
	const Onnx__TensorProto *wp = init_of(c, w);
	QParams yp;
	Tensor bt = {0};
	if (!wp || wp->data_type != DT_FLOAT || wp->n_dims < 3 || !can_twin(c, x))
		return *why = "its weight is not a float initializer or its input has no statistics", 0;
	int rb = b ? float_const(c, b, wp->dims[0], &bt) : 1;
	if (rb <= 0)
		return rb < 0 ? -1 : (*why = "its bias is not a float initializer of one value per channel", 0);
	QWeight *q;
	int pc = qc_per_channel(c->m, c->o, c->rep, wp, 0);
	int r = pc < 0                        ? -1
		: out_target(c, n, &y, &yp) ? weight(c, w, wp, pc ? 0 : -1, pc, &q, why)
					    : (*why = "no calibration statistics for its output", 0);
	if (r <= 0) {
		tensor_free(&bt);
		return r;
	}
	QVal *xv = twin(c, x);
	char *bq = b ? bias_q(c, b, &bt, 1.0f, xv->p.scale, q) : NULL;
	QVal *yv = val_add(c, y, yp, 0, NULL, NULL);
	qg_push(&c->out, &c->nout, qlinearconv(c, base_of(n), xv, q, bq, yv, yv->q, n));
	free(bq);
	tensor_free(&bt);
	return 1;
}

/* the weight of Gemm as [N, K, 1, 1] x alpha, as a proto named name */
static Onnx__TensorProto *gemm_weight(Ctx *c, const Onnx__TensorProto *bp, int64_t tb, float alpha)
{
	Tensor b = {0}, w = {0};
	if (tensor_from_proto(c->m, bp, &b) < 0)
		return NULL;
	int64_t k = tb ? b.dims[1] : b.dims[0], n = tb ? b.dims[0] : b.dims[1];
	int64_t dims[] = {n, k, 1, 1};
	if (tensor_alloc(&w, DT_FLOAT, 4, dims) < 0) {
		tensor_free(&b);
		return NULL;
	}
	const float *s = b.data;
	float *d = w.data;
	for (int64_t i = 0; i < n; i++)
		for (int64_t j = 0; j < k; j++)
			d[i * k + j] = alpha * (tb ? s[i * k + j] : s[j * n + i]);
	Onnx__TensorProto *p = tensor_to_proto(&w, bp->name);
	tensor_free(&b);
	tensor_free(&w);
	return p;
}

static void add_shape(Ctx *c, const char *name, int64_t n, const int64_t *v)
{
	qg_add_values(c->g, name, DT_INT64, 1, &n, v);
}

/* x [M, K] times B (transposed when tb) x alpha plus C x beta (cn: C's
 * name or NULL) as Reshape, 1x1 QLinearConv, Reshape into y; 1, 0 (*why), -1 */
static int conv1x1(Ctx *c, const Onnx__NodeProto *n, const char *x, const Onnx__TensorProto *bp, int64_t tb,
		   float alpha, const char *cn, const Tensor *ct, float beta, const char *y, QParams yp,
		   const char **why)
{
	Onnx__TensorProto *wp = gemm_weight(c, bp, tb, alpha);
	QWeight *q;
	int pc = wp ? qc_per_channel(c->m, c->o, c->rep, wp, 0) : -1;
	int r = pc >= 0 ? weight(c, bp->name, wp, pc ? 0 : -1, 8 + pc + 2 * (int)tb, &q, why) : -1;
	if (wp)
		onnx__tensor_proto__free_unpacked(wp, NULL);
	if (r <= 0)
		return r;
	QVal *xv = twin(c, x);
	char *bq = cn ? bias_q(c, cn, ct, beta, xv->p.scale, q) : NULL;
	QVal *yv = val_add(c, y, yp, 0, NULL, NULL);
	const char *base = base_of(n);
	char *s4 = xasprintf("%s_shape_4d", base), *s2 = xasprintf("%s_shape_2d", base);
	char *n4 = qg_unique_name(c->g, s4), *n2 = qg_unique_name(c->g, s2);
	/* n's own output names the 4-D tensors: unique, and no longer produced */
	char *x4 = xasprintf("%s_conv_input", n->output[0]), *y4 = xasprintf("%s_conv_output", n->output[0]);
	static const int64_t to4[] = {0, 0, 1, 1}, to2[] = {0, 0};
	add_shape(c, n4, 4, to4);
	add_shape(c, n2, 2, to2);
	const char *rin[] = {xv->q, n4}, *rout[] = {y4, n2};
	emit(c, "Reshape", base, "to_4d", 2, rin, x4);
	QVal x4v = *xv;
	x4v.q = x4;
	qg_push(&c->out, &c->nout, qlinearconv(c, base, &x4v, q, bq, yv, y4, NULL));
	emit(c, "Reshape", base, "to_2d", 2, rout, yv->q);
	free(s4);
	free(s2);
	free(n4);
	free(n2);
	free(x4);
	free(y4);
	free(bq);
	return 1;
}

/* Gemm -> Reshape, 1x1 QLinearConv, Reshape (see the top); 1, 0 (*why), -1 */
static int do_gemm(Ctx *c, Onnx__NodeProto *n, const char **why)
{
	const char *x = node_input(n, 0), *bn = node_input(n, 1), *cn = node_input(n, 2), *y;
	const Onnx__TensorProto *bp = init_of(c, bn);
	int64_t ta, tb;
	float alpha, beta;
	if (attr_int(n, "transA", 0, &ta) < 0 || attr_int(n, "transB", 0, &tb) < 0 ||
	    attr_float(n, "alpha", 1.0f, &alpha) < 0 || attr_float(n, "beta", 1.0f, &beta) < 0)
		return -1;
	if (ta || !bp || bp->data_type != DT_FLOAT || bp->n_dims != 2 || !can_twin(c, x))
		return *why = "transA is set, B is not a 2-D float initializer or A has no statistics", 0;
	Tensor ct = {0};
	int rc = cn ? float_const(c, cn, tb ? bp->dims[0] : bp->dims[1], &ct) : 1;
	if (rc <= 0)
		return rc < 0 ? -1 : (*why = "C is not a float initializer of one value per output column", 0);
	QParams yp;
	int r = out_target(c, n, &y, &yp) ? conv1x1(c, n, x, bp, tb, alpha, cn, &ct, beta, y, yp, why)
					   : (*why = "no calibration statistics for its output", 0);
	tensor_free(&ct);
	return r;
}

/* the rank recorded for tensor name (graph input, output, value_info), or -1 */
static int known_rank(const Onnx__GraphProto *g, const char *name)
{
	Onnx__ValueInfoProto **lists[] = {g->input, g->value_info, g->output};
	size_t lens[] = {g->n_input, g->n_value_info, g->n_output};
	for (int l = 0; l < 3; l++)
		for (size_t i = 0; i < lens[l]; i++) {
			const Onnx__ValueInfoProto *vi = lists[l][i];
			if (!vi->name || strcmp(vi->name, name) || !vi->type ||
			    vi->type->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !vi->type->tensor_type->shape)
				continue;
			return (int)vi->type->tensor_type->shape->n_dim;
		}
	return -1;
}

/* MatMul(A [M, K], constant B [K, N]) read only by Add(., constant of N
 * values), as exported Linear layers are: one 1x1 QLinearConv with the
 * constant as its int32 bias, so the product is not rounded before the
 * bias (the Add is marked folded). 1, 0 (not this pattern or *why), -1 */
static int matmul_add(Ctx *c, Onnx__NodeProto *n, const Onnx__TensorProto *bp, const char **why)
{
	const char *a = node_input(n, 0), *y0 = n->output[0], *y;
	Onnx__NodeProto *ad = qg_is_output(c->g, y0) ? NULL : sole_reader(c, y0);
	if (!ad || strcmp(ad->op_type, "Add") || ad->n_input != 2 || ad->n_output != 1 || qc_excluded(ad, c->o) ||
	    bp->n_dims != 2 || known_rank(c->g, a) != 2)
		return 0;
	const char *cn = !strcmp(ad->input[0], y0) ? ad->input[1] : ad->input[0];
	const Onnx__TensorProto *cp = init_of(c, cn);
	if (!strcmp(cn, y0) || !cp || cp->n_dims < 1 || cp->n_dims > 2 || cp->dims[cp->n_dims - 1] != bp->dims[1])
		return 0;
	Tensor ct = {0};
	int rc = float_const(c, cn, bp->dims[1], &ct);
	if (rc <= 0)
		return rc;
	QParams yp;
	int r = 0;
	size_t ai = orig_index(c, ad);
	const char *st = c->status[ai];
	if (out_target(c, ad, &y, &yp)) {
		c->status[ai] = "folded";
		r = conv1x1(c, n, a, bp, 0, 1.0f, cn, &ct, 1.0f, y, yp, why);
		if (r == 0) { /* the Add and what out_target folded after it stay */
			c->status[ai] = st;
			for (size_t i = 0; i < c->norig; i++)
				if (c->status[i] && !strcmp(c->status[i], "folded") && c->orig[i]->n_input &&
				    !strcmp(c->orig[i]->input[0], ad->output[0]))
					c->status[i] = NULL;
		}
	}
	tensor_free(&ct);
	return r;
}

/* MatMul -> QLinearMatMul; 1, 0 (*why), -1 */
static int do_matmul(Ctx *c, Onnx__NodeProto *n, const char **why)
{
	const char *a = node_input(n, 0), *b = node_input(n, 1), *y;
	const Onnx__TensorProto *bp = init_of(c, b);
	int bconst = bp && bp->data_type == DT_FLOAT;
	QParams yp;
	if (!can_twin(c, a) || (!bconst && !can_twin(c, b)))
		return *why = "an input has no statistics and is no float initializer", 0;
	if (bconst) {
		int r = matmul_add(c, n, bp, why);
		if (r != 0)
			return r;
	}
	if (!out_target(c, n, &y, &yp))
		return *why = "no calibration statistics for its output", 0;
	QWeight *q = NULL;
	if (bconst) {
		int r = weight(c, b, bp, -1, 0, &q, why);
		if (r <= 0)
			return r;
	}
	QVal *av = twin(c, a), *bv = bconst ? NULL : twin(c, b);
	QVal *yv = val_add(c, y, yp, 0, NULL, NULL);
	const char *in[] = {av->q, av->s, av->z, q ? q->qname : bv->q, q ? q->sname : bv->s,
			    q ? q->zname : bv->z, yv->s, yv->z};
	char *nm = xasprintf("%s_quant", base_of(n));
	qg_push(&c->out, &c->nout, qg_node("QLinearMatMul", nm, 8, in, 1, (const char *const *)&yv->q));
	free(nm);
	return 1;
}

/* a type-generic node on twins: it runs on the 8-bit tensors, its outputs
 * keep the input's scale and zero point. Its data inputs: every input of
 * Concat (all with the same scale and zero point), else input 0 */
static int do_generic(Ctx *c, Onnx__NodeProto *n, const char **why)
{
	const char *op = n->op_type;
	int concat = !strcmp(op, "Concat");
	QVal *xv = n->n_input ? val_find(c, n->input[0]) : NULL;
	if (!xv)
		return *why = "its input is not quantized (type-generic operators only continue a quantized region)", 0;
	for (size_t i = 1; concat && i < n->n_input; i++) {
		QVal *v = val_find(c, n->input[i]);
		if (!v || v->p.scale != xv->p.scale || v->p.zero_point != xv->p.zero_point || v->p.dtype != xv->p.dtype)
			return *why = "its inputs are not all quantized with one scale and zero point", 0;
	}
	if ((n->n_output != 1 && strcmp(op, "Split")) || (!strcmp(op, "MaxPool") && c->opset < 12) ||
	    (!strcmp(op, "Flatten") && c->opset < 9))
		return *why = "the operator has no 8-bit form at this opset, or a second output", 0;
	for (size_t i = 0; i < (concat ? n->n_input : 1); i++)
		qg_set_input(n, i, val_find(c, n->input[i])->q);
	for (size_t k = 0; k < n->n_output; k++) {
		if (!*n->output[k])
			continue;
		QVal *yv = val_add(c, n->output[k], xv->p, 0, xv->s, xv->z);
		free(n->output[k]);
		n->output[k] = xstrdup(yv->q);
	}
	c->kept[orig_index(c, n)] = 1;
	qg_push(&c->out, &c->nout, n);
	return 1;
}

/* operators with a com.microsoft QLinear form (Concat: of differing scales) */
static const char *const ms_ops[] = {
	"Add", "AveragePool", "GlobalAveragePool", "LeakyRelu", "Mul", "Sigmoid", "Softmax", NULL,
};

/* the data inputs of n are (or, for Add and Mul, can be) twins, one at
 * least already is; 1 when so, else 0 with *why */
static int ms_inputs(Ctx *c, const Onnx__NodeProto *n, size_t nd, int bin, const char **why)
{
	int any = 0;
	if (n->n_output != 1 || n->n_input < nd || (bin && n->n_input != 2))
		return *why = "it has a second output or an unexpected number of inputs", 0;
	for (size_t i = 0; i < nd; i++) {
		const char *x = n->input[i];
		int q = *x && val_find(c, x) != NULL;
		if (!*x || (!q && !(bin && can_twin(c, x))))
			return *why = "an input is not quantized (QLinear operators only continue a quantized region)", 0;
		any |= q;
	}
	if (!any)
		return *why = "no input is quantized yet (QLinear operators only continue a quantized region)", 0;
	return 1;
}

/* 1 when AveragePool n has dilations other than 1 (QLinearAveragePool has none) */
static int dilated(const Onnx__NodeProto *n)
{
	const int64_t *d;
	size_t len = 0;
	if (attr_ints(n, "dilations", &d, &len) < 0)
		return 1;
	for (size_t i = 0; i < len; i++)
		if (d[i] != 1)
			return 1;
	return 0;
}

/* the QLinear node of n on inputs in[nin] writing yq; n's attributes move
 * to it (Softmax: axis and opset, as onnxruntime's kernel wants them) */
static Onnx__NodeProto *ms_node(Ctx *c, Onnx__NodeProto *n, size_t nin, const char *const *in, const char *yq)
{
	char *op = xasprintf("QLinear%s", n->op_type), *nm = xasprintf("%s_quant", base_of(n));
	Onnx__NodeProto *q = qg_node(op, nm, nin, in, 1, &yq);
	free(q->domain);
	q->domain = xstrdup("com.microsoft");
	if (!strcmp(n->op_type, "Softmax")) {
		int64_t axis;
		attr_int(n, "axis", c->opset < 13 ? 1 : -1, &axis);   /* read when checked */
		qg_attr_int(q, "axis", axis);
		qg_attr_int(q, "opset", c->opset);
	} else {
		size_t k = 0;
		for (size_t i = 0; i < n->n_attribute; i++)
			if (!strcmp(n->op_type, "AveragePool") && !strcmp(n->attribute[i]->name, "dilations"))
				n->attribute[k++] = n->attribute[i];   /* all 1: stays with n, freed with it */
			else
				qg_attr_move(q, n->attribute[i]);
		n->n_attribute = k;
	}
	free(op);
	free(nm);
	*c->ms = 1;
	return q;
}

/* Add, Mul, GlobalAveragePool, AveragePool, Sigmoid, LeakyRelu, Softmax,
 * Concat -> their com.microsoft QLinear form (see the top); 1, 0 (*why), -1 */
static int do_ms(Ctx *c, Onnx__NodeProto *n, const char **why)
{
	const char *op = n->op_type;
	int bin = !strcmp(op, "Add") || !strcmp(op, "Mul"), concat = !strcmp(op, "Concat");
	int softmax = !strcmp(op, "Softmax");
	size_t nd = bin ? 2 : concat ? n->n_input : 1;
	int64_t axis;
	if (!ms_inputs(c, n, nd, bin, why))
		return 0;
	if (!strcmp(op, "AveragePool") && dilated(n))
		return *why = "QLinearAveragePool has no dilations", 0;
	if (softmax && attr_int(n, "axis", c->opset < 13 ? 1 : -1, &axis) < 0)
		return -1;
	int dt = c->o->act_type;
	QParams yp = {.scale = 1.0f / 256.0f, .zero_point = dt == DT_INT8 ? -128 : 0, .dtype = dt};
	/* a Relu/Clip reading alone the output of QLinearAdd or QLinearMul
	 * folds into its range, as after QLinearConv */
	const char *y = n->output[0];
	if (!softmax && !(bin ? out_target(c, n, &y, &yp) : act_params(c, y, &yp)))
		return *why = "no calibration statistics for its output", 0;
	/* onnxruntime refuses x_scale / (y_scale x image size) outside [2^-32, 256) */
	float ratio = strcmp(op, "GlobalAveragePool") ? 1.0f : val_find(c, n->input[0])->p.scale / yp.scale;
	if (!(ratio >= 1.0f / 256.0f && ratio < 256.0f))
		return *why = "its input and output scales differ too much for onnxruntime's QLinearGlobalAveragePool", 0;
	QVal **xv = xmalloc(nd * sizeof *xv);
	for (size_t i = 0; i < nd; i++)
		xv[i] = twin(c, n->input[i]);
	QVal *yv = val_add(c, y, yp, 0, NULL, NULL);
	size_t nin = 0;
	const char **in = xmalloc((3 * nd + 2) * sizeof *in);
	if (concat) {
		in[nin++] = yv->s;
		in[nin++] = yv->z;
	}
	for (size_t i = 0; i < nd; i++) {
		in[nin++] = xv[i]->q;
		in[nin++] = xv[i]->s;
		in[nin++] = xv[i]->z;
	}
	if (!concat) {
		in[nin++] = yv->s;
		in[nin++] = yv->z;
	}
	qg_push(&c->out, &c->nout, ms_node(c, n, nin, in, yv->q));
	free(in);
	free(xv);
	return 1;
}

static int has_subgraph(const Onnx__NodeProto *n)
{
	for (size_t k = 0; k < n->n_attribute; k++)
		if (n->attribute[k]->g || n->attribute[k]->n_graphs)
			return 1;
	return 0;
}

/* one original node: converted (1), kept in float (0, *why), -1 error */
static int step(Ctx *c, Onnx__NodeProto *n, const char **why)
{
	const char *op = n->op_type;
	const char **before = xmalloc((c->norig ? c->norig : 1) * sizeof *before);
	memcpy(before, c->status, c->norig * sizeof *before);
	int r = 0;
	if (!strcmp(op, "Conv"))
		r = do_conv(c, n, why);
	else if (!strcmp(op, "Gemm"))
		r = do_gemm(c, n, why);
	else if (!strcmp(op, "MatMul"))
		r = do_matmul(c, n, why);
	else if (!strcmp(op, "Concat")) {
		if ((r = do_generic(c, n, why)) == 0)
			r = do_ms(c, n, why);
	} else if (qc_in_list(ms_ops, op))
		r = do_ms(c, n, why);
	else if (strcmp(op, "Relu") && strcmp(op, "Clip"))
		r = do_generic(c, n, why);
	else if (c->o->act_symmetric)
		*why = "kept in float: a symmetric activation range does not clamp as it does";
	else
		*why = "kept in float: it does not follow a quantized Conv, Gemm, MatMul, Add or Mul as their output's sole reader";
	if (r <= 0) /* a fold tried above is off */
		memcpy(c->status, before, c->norig * sizeof *before);
	free(before);
	return r;
}

static int node_reads(const Onnx__NodeProto *n, const char *name);

/* subgraph g (or one nested in it) reads outer tensor name */
static int graph_reads(const Onnx__GraphProto *g, const char *name)
{
	for (size_t i = 0; i < g->n_output; i++)
		if (!strcmp(g->output[i]->name, name))
			return 1;
	for (size_t i = 0; i < g->n_node; i++)
		if (node_reads(g->node[i], name))
			return 1;
	return 0;
}

/* node n or one of its subgraphs reads name */
static int node_reads(const Onnx__NodeProto *n, const char *name)
{
	for (size_t i = 0; i < n->n_input; i++)
		if (!strcmp(n->input[i], name))
			return 1;
	for (size_t k = 0; k < n->n_attribute; k++) {
		const Onnx__AttributeProto *a = n->attribute[k];
		if (a->g && graph_reads(a->g, name))
			return 1;
		for (size_t j = 0; j < a->n_graphs; j++)
			if (graph_reads(a->graphs[j], name))
				return 1;
	}
	return 0;
}

/* a float node: the float tensors it (or its subgraphs) reads exist before it */
static void keep_float(Ctx *c, Onnx__NodeProto *n)
{
	if (has_subgraph(n))
		for (size_t i = 0; i < c->nvals; i++)
			if (node_reads(n, c->vals[i]->name))
				need_float(c, c->vals[i]->name);
	for (size_t i = 0; i < n->n_input; i++)
		if (*n->input[i])
			need_float(c, n->input[i]);
	c->kept[orig_index(c, n)] = 1;
	qg_push(&c->out, &c->nout, n);
}

static void ctx_free(Ctx *c)
{
	qt_ranges_free(&c->sent);
	for (size_t i = 0; i < c->nvals; i++) {
		free(c->vals[i]->name);
		free(c->vals[i]->q);
		free(c->vals[i]->s);
		free(c->vals[i]->z);
		free(c->vals[i]);
	}
	free(c->vals);
	for (size_t i = 0; i < c->wkeys.n; i++) {
		free(c->wkeys.v[i]);
		qc_weight_free(&c->wq[i]);
	}
	pv_free(&c->wkeys);
	free(c->wq);
	free(c->wkind);
	for (size_t i = 0; i < c->replaced.n; i++)
		free(c->replaced.v[i]);
	pv_free(&c->replaced);
	for (size_t i = 0; i < c->nranges; i++) {
		free(c->ranges[i].name);
		free(c->ranges[i].note);
	}
	free(c->ranges);
	for (size_t i = 0; i < c->nout; i++)
		onnx__node_proto__free_unpacked(c->out[i], NULL);
	free(c->out);
}

static int check_opts(const Onnx__GraphProto *g, int64_t opset, const QuantOpts *o, const CalibStats *s)
{
	if (qc_check_not_quantized(g) < 0 || qc_check_lists(g, o, qop_ops, "static QOperator") < 0 ||
	    qr_check(s, o) < 0)
		return -1;
	if (opset < 10)
		return error("static quantization needs opset >= 10 (QLinearConv, QLinearMatMul); the model imports opset %lld",
			     (long long)opset);
	if (o->act_type != DT_INT8 && o->act_type != DT_UINT8)
		return error("quantize.format = qoperator quantizes activations to int8 or uint8 only; use qdq for 16 bits");
	if (o->act_type == DT_INT8 && o->weight_type == DT_UINT8)
		return error("quantize.format = qoperator with int8 activations needs int8 weights: onnxruntime has no QLinearConv/QLinearMatMul for int8 inputs with uint8 weights");
	return 0;
}

/* "nothing to quantize" naming up to three distinct reasons */
static int nothing_error(Ctx *c, char **why)
{
	StrBuf sb = {0};
	char lab[256];
	size_t shown = 0;
	for (size_t i = 0; i < c->norig && shown < 3; i++) {
		if (!why[i] || strstr(sb.buf ? sb.buf : "", why[i]))
			continue;
		sb_printf(&sb, "%s'%s': %s", shown ? "; " : "", node_label(c->orig[i], lab, sizeof lab), why[i]);
		shown++;
	}
	int r = error("nothing to quantize: none of the %zu nodes could be quantized (%s)", c->norig,
		      sb.len ? sb.buf : "the graph has no nodes");
	sb_release(&sb);
	return r;
}


static int qop_graph(Ctx *c);

/* the If branches and Loop/Scan bodies of float node n, each rewritten as a
 * graph of its own (its own twins; outer values it quantizes get their
 * QuantizeLinear inside it, its outputs are float) */
static int qop_bodies(Ctx *c, Onnx__NodeProto *n)
{
	int r = 0;
	for (size_t a = 0; a < n->n_attribute && r == 0; a++) {
		Onnx__GraphProto *b = n->attribute[a]->g;
		if (!b)
			continue;
		char *scope = qg_scope(c->scope, n, n->attribute[a]);
		if (!qc_body_ran(c->stats, b)) {
			qc_report_skipped(c->rep, b, scope,
				       "its subgraph never ran during calibration (a branch not taken): no statistics");
		} else {
			Ctx s = {.m = c->m, .g = b, .parent = c, .scope = scope, .nq = c->nq, .ms = c->ms,
				 .stats = c->stats, .o = c->o, .rep = c->rep, .opset = c->opset};
			r = qop_graph(&s);
		}
		free(scope);
	}
	return r;
}

/* rewrite c->g (the main graph or a body), report its nodes */
static int qop_graph(Ctx *c)
{
	Onnx__GraphProto *g = c->g;
	const QuantOpts *o = c->o;
	c->norig = g->n_node;
	c->orig = xcalloc(c->norig ? c->norig : 1, sizeof *c->orig);
	memcpy(c->orig, g->node, c->norig * sizeof *c->orig);
	c->status = xcalloc(c->norig ? c->norig : 1, sizeof *c->status);
	c->kept = xcalloc(c->norig ? c->norig : 1, sizeof *c->kept);
	char **why = xcalloc(c->norig ? c->norig : 1, sizeof *why);
	qt_ranges_init(&c->sent, c->m, g, c->stats, o);
	const char **pattern = quant_float_patterns(g);
	const char **preset = qt_preset_float(g, pattern, o, c->rep);
	char lab[256];
	int r = 0;
	for (size_t i = 0; r == 0 && i < c->norig; i++) {
		Onnx__NodeProto *n = c->orig[i];
		const char *ex = qc_excluded_in(n, c->scope, o), *w = NULL;
		if (c->status[i]) /* folded */
			continue;
		if (!qc_in_list(qop_ops, n->op_type))
			why[i] = xasprintf("no static QOperator quantization for %s", n->op_type);
		else if (ex)
			why[i] = xstrdup(ex);
		else if (pattern[i])
			why[i] = xstrdup(pattern[i]);
		else if (preset && preset[i])
			why[i] = xstrdup(preset[i]);
		else if ((r = step(c, n, &w)) < 0)
			r = error_prefix("node '%s%s%s'", c->scope ? c->scope : "", c->scope ? "/" : "",
					 node_label(n, lab, sizeof lab));
		else if (r == 1) {
			c->status[i] = "quantized";
			(*c->nq)++;
			r = 0;
			continue;
		} else
			why[i] = xstrdup(w);
		if (r == 0) {
			keep_float(c, n);
			r = qop_bodies(c, n);
		}
	}
	free(pattern);
	free(preset);
	for (size_t i = 0; r == 0 && i < g->n_output; i++)
		need_float(c, g->output[i]->name);
	if (r == 0 && !c->scope && *c->nq == 0)
		r = nothing_error(c, why);
	if (r == 0) {
		free(g->node);
		g->node = c->out;
		g->n_node = c->nout;
		c->out = NULL;
		c->nout = 0;
		for (size_t i = 0; i < c->replaced.n; i++)
			qg_drop_unused_init(g, c->replaced.v[i]);
	} else {
		/* g->node still owns every original: c->out gives them back */
		size_t k = 0;
		for (size_t i = 0; i < c->nout; i++)
			if (orig_index(c, c->out[i]) == c->norig)
				c->out[k++] = c->out[i];
		c->nout = k;
	}
	for (size_t i = 0; i < c->norig; i++) {
		if (r == 0)
			qc_report_node_in(c->rep, c->scope, c->orig[i], c->status[i] ? c->status[i] : "skipped", why[i]);
		free(why[i]);
		if (r == 0 && !c->kept[i])
			onnx__node_proto__free_unpacked(c->orig[i], NULL);
	}
	free(why);
	free(c->kept);
	free(c->status);
	free(c->orig);
	ctx_free(c);
	return r;
}

int quant_static_qoperator(Model *m, const CalibStats *stats, const QuantOpts *o, QuantReport *rep)
{
	Onnx__GraphProto *g = m->proto->graph;
	int64_t opset = model_opset(m->proto, "");
	if (check_opts(g, opset, o, stats) < 0)
		return -1;
	size_t nq = 0;
	int ms = 0;
	Ctx c = {.m = m, .g = g, .nq = &nq, .ms = &ms, .stats = stats, .o = o, .rep = rep, .opset = opset};
	int r = qop_graph(&c);
	if (r == 0 && ms)
		qg_import(m->proto, "com.microsoft", 1);
	return r;
}
