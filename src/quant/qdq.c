/* qdq.c — static quantization in QDQ form (see quantize.h).
 *
 * The rewrite runs in four steps over each graph, the main graph and the
 * subgraphs of its nodes (If branches, Loop and Scan bodies; one Ctx per
 * graph, whose parent is the enclosing graph's), a body after step 3 of
 * the graph holding it. A body reads outer names: an outer float
 * initializer is quantized once in the graph that holds it and each graph
 * reading it gets its own DequantizeLinear; an outer activation gets a
 * Q/DQ pair at the start of the body (onnxruntime's QDQ transformers want
 * a DequantizeLinear in the graph of the node it feeds), its new names
 * prefixed with the scope ("If_0/then/x_scale"). A body calibration never
 * ran (no statistics) stays float. The steps:
 *   1. choose the nodes to quantize (supported op type, not excluded);
 *   2. fold Relu/Clip into a quantized producer: the producer's output takes
 *      the Relu/Clip output's name (so its calibrated range, which starts at
 *      the clip point) and the Relu/Clip node goes;
 *   3. for every input of a quantized node: a weight (Conv/ConvTranspose/
 *      Gemm/MatMul input 1, an initializer) becomes W_quantized +
 *      DequantizeLinear; 16-bit activation pairs below opset 21 are
 *      com.microsoft nodes; a Conv/ConvTranspose/Gemm bias, and the 1-D constant an Add adds to a quantized
 *      MatMul's output (read by nothing else), becomes int32 with scale =
 *      input scale x weight scale, and that MatMul output is not rounded;
 *      any other float initializer is quantized with the activation type; a
 *      computed float tensor gets one QuantizeLinear/DequantizeLinear pair
 *      with its calibrated range, shared by all quantized consumers;
 *   4. rebuild the node list in topological order: weight DequantizeLinear
 *      nodes first, then graph-input pairs, then each node followed by the
 *      pairs of its outputs. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "onnx/node.h"
#include "quant/internal.h"
#include "quant/range.h"
#include "strmap.h"

/* onnxruntime's QDQ registry, plus the activations and reductions its
 * QOperator registry covers; sorted */
const char *const quant_static_ops[] = {
	"Add", "ArgMax", "AveragePool", "BatchNormalization", "Clip", "Concat", "Conv", "ConvTranspose",
	"CumSum", "DepthToSpace", "Flatten", "Gather", "GatherElements", "Gemm", "GlobalAveragePool",
	"GlobalMaxPool", "HardSigmoid", "InstanceNormalization", "LayerNormalization", "LeakyRelu", "MatMul",
	"MaxPool", "Mul", "Pad", "ReduceMean", "Relu", "Reshape", "Resize", "Sigmoid", "Slice", "Softmax",
	"SpaceToDepth", "Split", "Squeeze", "Tanh", "TopK", "Transpose", "Unsqueeze", "Where", NULL,
};

/* is input i of op quantized as an activation? Every input of Add, Mul,
 * Concat and MatMul, the two values of Where, else input 0 only: indices,
 * shapes and the scale, bias, mean and variance of the normalizations stay
 * float (as ORT's QDQNormalization leaves the statistics; an int32 bias
 * with scale = input x scale means nothing after a normalization) */
static int quant_input(const char *op, size_t i)
{
	if (!strcmp(op, "Where"))
		return i == 1 || i == 2;
	if (!strcmp(op, "Add") || !strcmp(op, "Mul") || !strcmp(op, "Concat") || !strcmp(op, "MatMul"))
		return 1;
	return i == 0;
}

/* ops that only move or select values; sorted */
static const char *const movers[] = {
	"DepthToSpace", "Flatten", "Gather", "GatherElements", "MaxPool", "Pad", "Reshape", "Resize", "Slice",
	"SpaceToDepth", "Split", "Squeeze", "Transpose", "Unsqueeze", NULL,
};

/* is an output of mover n read inside a subgraph of g? onnxruntime's QDQ
 * propagation moves the DequantizeLinear before such a node past it and
 * aborts (1.2x: vector index assertion) when the reader is a subgraph's
 * implicit input, so the node stays float */
static int mover_feeds_subgraph(const Onnx__GraphProto *g, const Onnx__NodeProto *n)
{
	if (!qc_in_list(movers, n->op_type))
		return 0;
	for (size_t k = 0; k < n->n_output; k++)
		if (*n->output[k] && qg_read_in_subgraphs(g, n->output[k]))
			return 1;
	return 0;
}

static int is_weight_op(const char *op)
{
	return !strcmp(op, "Conv") || !strcmp(op, "ConvTranspose") || !strcmp(op, "Gemm") ||
	       !strcmp(op, "MatMul");
}

typedef struct Act {
	char *name;
	char *dq;          /* T_DequantizeLinear_Output (compact: T_dq) */
	char *s, *z, *q;   /* its scale, zero point and QuantizeLinear output */
	char *qn, *dqn;    /* the names of its two nodes */
	QParams p;
	int done;          /* its Q/DQ nodes were placed */
	int flt;           /* stays float (sentinels, no range to tell) */
} Act;

typedef struct Ctx Ctx;
struct Ctx {
	Ctx *parent;             /* the enclosing graph's (NULL: main graph) */
	const char *scope;       /* "If_0/then" (NULL: main graph) */
	size_t *nq;              /* nodes quantized, over all scopes */
	StrBuf *why;             /* up to three reasons nothing was */
	size_t *nwhy;
	Model *m;
	const char *qdomain;     /* domain of 16-bit activation Q/DQ nodes */
	Onnx__GraphProto *g;
	const CalibStats *stats;
	const QuantOpts *o;
	QuantReport *rep;
	Act *acts;
	size_t nacts;
	Onnx__NodeProto **pre;   /* weight/constant DequantizeLinear nodes */
	size_t npre;
	PtrVec biases;           /* float biases replaced by int32 ones */
	struct MatMulOut {       /* quantized MatMuls: output, input scale, weight */
		const Onnx__NodeProto *node;
		float in_scale;
		Ctx *wc;             /* the scope holding the weight */
		size_t w;            /* index into wc->wq */
	} *mm;
	size_t nmm;
	PtrVec wdone;            /* initializers of this scope quantized ... */
	QWeight *wq;             /* ... and their parameters (parallel) */
	PtrVec dqname;           /* weights with a DequantizeLinear here ... */
	PtrVec dqout;            /* ... and its output (parallel) */
	PtrVec bname, bdq;       /* the same for int32 biases made here */
	QtRanges sent;           /* ranges past sentinels, traced before the rewrite */
	QNames *names;           /* every name of the model (compact names) */
	int *next_id;            /* the next number to try for compact names */
};

/* Compact names (quantize.names = compact): a number N no name of the
 * model uses as sN, zN, qN (scale, zero point, QuantizeLinear output) or
 * QN, DQN (node names); the tensor names are reserved from now on (the
 * node names are numbered by N alone, DQN_2 for a second one) */
static int new_id(Ctx *c)
{
	char b[5][32];
	for (;; (*c->next_id)++) {
		int n = *c->next_id, free_all = 1;
		snprintf(b[0], sizeof b[0], "s%d", n);
		snprintf(b[1], sizeof b[1], "z%d", n);
		snprintf(b[2], sizeof b[2], "q%d", n);
		snprintf(b[3], sizeof b[3], "Q%d", n);
		snprintf(b[4], sizeof b[4], "DQ%d", n);
		for (int i = 0; i < 5 && free_all; i++)
			free_all = !qg_name_taken(c->names, b[i]);
		if (!free_all)
			continue;
		for (int i = 0; i < 3; i++)
			qg_name_add(c->names, b[i]);
		return (*c->next_id)++;
	}
}

static int compact(const Ctx *c)
{
	return c->o->names == QNAMES_COMPACT;
}

/* base + suffix, made unique in compact mode (onnxruntime's names stay as
 * they always were) */
static char *gen_name(Ctx *c, const char *base, const char *suffix)
{
	char *s = xasprintf("%s%s", base, suffix);
	if (!compact(c))
		return s;
	char *u = qg_name_fresh(c->names, s);
	free(s);
	return u;
}

/* the scope (c or an enclosing one) whose initializer a read of name in c
 * resolves to, or NULL: a nearer definition hides outer initializers */
static Ctx *init_scope(Ctx *c, const char *name)
{
	for (; c; c = c->parent) {
		if (qg_init(c->g, name))
			return c;
		if (qg_defines(c->g, name))
			return NULL;
	}
	return NULL;
}

static const Onnx__TensorProto *init_of(Ctx *c, const char *name)
{
	Ctx *o = init_scope(c, name);
	return o ? qg_init(o->g, name) : NULL;
}

static Onnx__NodeProto *producer(const Onnx__GraphProto *g, const char *name)
{
	for (size_t i = 0; i < g->n_node; i++)
		for (size_t k = 0; k < g->node[i]->n_output; k++)
			if (!strcmp(g->node[i]->output[k], name))
				return g->node[i];
	return NULL;
}

static Act *act_find(Ctx *c, const char *name)
{
	for (size_t i = 0; i < c->nacts; i++)
		if (!strcmp(c->acts[i].name, name))
			return &c->acts[i];
	return NULL;
}

/* the activation entry of computed tensor name, created from its
 * statistics; NULL without statistics (not a float32 tensor) */
static Act *act_get(Ctx *c, const char *name)
{
	/* an outer value read in a body gets a pair of its own at the start
	 * of the body: onnxruntime wants a DequantizeLinear and the node it
	 * feeds in one graph (its QDQ transformers abort on implicit inputs) */
	Act *a = act_find(c, name);
	if (a)
		return a->flt ? NULL : a;
	const TensorStats *ts = calib_find(c->stats, name);
	if (!ts)
		return NULL;
	float lo = 0, hi = 0;
	StrBuf note = {0};
	/* an outer value's sentinels were traced in the graph defining it */
	Ctx *def = c;
	while (def->parent && !qg_defines(def->g, name))
		def = def->parent;
	int how = qt_act_range(&def->sent, def->g, c->stats, c->o, name, &lo, &hi, &note);
	c->acts = xreallocarray(c->acts, c->nacts + 1, sizeof *c->acts);
	a = &c->acts[c->nacts++];
	memset(a, 0, sizeof *a);
	a->name = xstrdup(name);
	if (how < 0) {
		/* sentinels and no range to tell: its readers take it in float */
		a->flt = a->done = 1;
		qc_report_float(c->rep, name, note.buf);
		sb_release(&note);
		return NULL;
	}
	c->rep->nsentinel += how == 1;
	/* new names start with name, or scope/name for an outer value */
	char *base = !c->scope || qg_defines(c->g, name) ? xstrdup(name) : xasprintf("%s/%s", c->scope, name);
	if (compact(c)) {
		int id = new_id(c);
		a->dq = gen_name(c, base, "_dq");
		a->s = xasprintf("s%d", id);
		a->z = xasprintf("z%d", id);
		a->q = xasprintf("q%d", id);
		a->qn = xasprintf("Q%d", id);
		a->dqn = xasprintf("DQ%d", id);
	} else {
		a->dq = xasprintf("%s_DequantizeLinear_Output", base);
		a->s = xasprintf("%s_scale", base);
		a->z = xasprintf("%s_zero_point", base);
		a->q = xasprintf("%s_QuantizeLinear_Output", base);
		a->qn = xasprintf("%s_QuantizeLinear", base);
		a->dqn = xasprintf("%s_DequantizeLinear", base);
	}
	free(base);
	a->p = qparams_compute(lo, hi, c->o->act_type, c->o->act_symmetric, 0);
	qc_report_tensor(c->rep, name, a->p.dtype, 1, &a->p.scale, &a->p.zero_point, -1);
	qc_report_names(c->rep, a->q, a->s, a->z, a->dq);
	qc_report_extra(c->rep, note.buf);
	sb_release(&note);
	return a;
}

/* 16-bit Q/DQ below opset 21 are onnxruntime's com.microsoft forms */
static void set_domain(Ctx *c, Onnx__NodeProto *n, int dtype)
{
	if ((dtype == DT_INT16 || dtype == DT_UINT16) && c->qdomain) {
		free(n->domain);
		n->domain = xstrdup(c->qdomain);
	}
}

/* the Q/DQ pair of activation a, appended to nodes */
static void place_pair(Ctx *c, Act *a, Onnx__NodeProto ***nodes, size_t *n)
{
	qg_add_scalar_f(c->g, a->s, a->p.scale);
	qc_add_zp(c->g, a->z, a->p.dtype, 0, NULL, &a->p.zero_point, 1);
	const char *qin[] = {a->name, a->s, a->z}, *dqin[] = {a->q, a->s, a->z};
	Onnx__NodeProto *q = qg_node("QuantizeLinear", a->qn, 3, qin, 1, (const char *const *)&a->q);
	Onnx__NodeProto *dq = qg_node("DequantizeLinear", a->dqn, 3, dqin, 1, (const char *const *)&a->dq);
	set_domain(c, q, a->p.dtype);
	set_domain(c, dq, a->p.dtype);
	qg_push(nodes, n, q);
	qg_push(nodes, n, dq);
	a->done = 1;
}

/* the DequantizeLinear node of a weight or bias: base_DequantizeLinear,
 * or compact DQN after its scale sN (DQN_2 for another scope's) */
static void push_dq(Ctx *c, const char *base, const char *qname, const char *sname, const char *zname,
		    const char *out, int axis, int dtype)
{
	char *nm;
	if (compact(c)) {
		char *b = xasprintf("DQ%s", sname + 1);
		nm = qg_name_fresh(c->names, b);
		free(b);
	} else {
		nm = xasprintf("%s_DequantizeLinear", base);
	}
	const char *in[] = {qname, sname, zname};
	Onnx__NodeProto *dq = qg_node("DequantizeLinear", nm, 3, in, 1, &out);
	set_domain(c, dq, dtype);
	if (axis >= 0)
		qg_attr_int(dq, "axis", axis);
	qg_push(&c->pre, &c->npre, dq);
	free(nm);
}

/* the DequantizeLinear output of initializer name, quantized in scope o
 * as o->wq[k], for scope c: one DequantizeLinear per weight and scope (the
 * quantized initializer is shared; the DequantizeLinear sits in the graph
 * of the nodes it feeds) */
static const char *weight_dq(Ctx *c, Ctx *o, size_t k, const char *name)
{
	for (size_t i = 0; i < c->dqname.n; i++)
		if (!strcmp(c->dqname.v[i], name))
			return c->dqout.v[i];
	const QWeight *q = &o->wq[k];
	char *base = c == o ? xstrdup(name) : xasprintf("%s/%s", c->scope, name);
	char *dqout = compact(c) ? gen_name(c, base, "_dq") : xasprintf("%s_DequantizeLinear_Output", base);
	push_dq(c, base, q->qname, q->sname, q->zname, dqout, q->axis, q->dtype);
	pv_push(&c->dqname, xstrdup(name));
	pv_push(&c->dqout, dqout);
	free(base);
	return dqout;
}

/* initializer name of scope o quantized (once) into dtype; its index in
 * o->wq, or -1 */
static long long quant_init(Ctx *o, const char *name, int dtype, int symmetric, int reduce_range, int axis)
{
	for (size_t i = 0; i < o->wdone.n; i++)
		if (!strcmp(o->wdone.v[i], name))
			return (long long)i;
	QWeight q;
	int r;
	const Onnx__TensorProto *w = qg_init(o->g, name);
	if (compact(o)) {
		int id = new_id(o);
		char *qn = gen_name(o, name, "_q"), *sn = xasprintf("s%d", id), *zn = xasprintf("z%d", id);
		r = qc_quant_weight_named(o->m, o->g, w, qn, sn, zn, dtype, symmetric, reduce_range, axis, &q);
		free(qn);
		free(sn);
		free(zn);
	} else {
		r = qc_quant_weight(o->m, o->g, w, dtype, symmetric, reduce_range, axis, &q);
	}
	if (r < 0)
		return -1;
	qc_report_tensor(o->rep, name, dtype, q.nch, q.scales, q.zps, axis);
	qc_report_names(o->rep, q.qname, q.sname, q.zname, NULL);
	o->wq = xreallocarray(o->wq, o->wdone.n + 1, sizeof *o->wq);
	o->wq[o->wdone.n] = q;
	pv_push(&o->wdone, xstrdup(name));
	return (long long)o->wdone.n - 1;
}

/* weight input wi of node n: quantized once, shared by its consumers */
static int quant_weight_input(Ctx *c, Onnx__NodeProto *n, size_t wi, int axis, Ctx **wc, size_t *out)
{
	const char *name = n->input[wi];
	Ctx *o = *wc = init_scope(c, name); /* the weight stays where it lives */
	int wt = c->o->weight_type;
	long long k = quant_init(o, name, wt, wt == DT_INT8, c->o->reduce_range, axis);
	if (k < 0)
		return -1;
	*out = (size_t)k;
	qg_set_input(n, wi, weight_dq(c, o, *out, name));
	return 0;
}

/* int32 bias: scale = input scale x weight scale, zero point 0; 1 when the
 * bias is not 1-D (the caller quantizes it as a constant) */
static int quant_bias(Ctx *c, Onnx__NodeProto *n, size_t bi, float in_scale, const QWeight *w)
{
	const char *name = n->input[bi];
	Ctx *o = init_scope(c, name);
	const Onnx__TensorProto *bp = qg_init(o->g, name);
	Tensor b = {0};
	if (tensor_from_proto(c->m, bp, &b) < 0)
		return -1;
	if (b.dtype != DT_FLOAT || b.rank != 1 || (w->nch > 1 && b.dims[0] != w->nch)) {
		/* a bias of another shape ([1, N] say) is quantized as a constant */
		tensor_free(&b);
		return 1;
	}
	int64_t nch = w->nch, len = b.dims[0];
	float *scales = xmalloc((size_t)nch * sizeof *scales);
	int32_t *zps = xcalloc((size_t)nch, sizeof *zps);
	int32_t *q = xmalloc((size_t)(len ? len : 1) * sizeof *q);
	for (int64_t k = 0; k < nch; k++)
		scales[k] = in_scale * w->scales[k];
	for (int64_t i = 0; i < len; i++) {
		float s = scales[nch > 1 ? i : 0];
		double v = nearbyint((double)((float *)b.data)[i] / s);
		q[i] = (int32_t)(v < -2147483647.0 ? -2147483647.0 : v > 2147483647.0 ? 2147483647.0 : v);
	}
	/* the int32 bias depends on the input scale: it goes in c's scope */
	char *base = c == o ? xstrdup(name) : xasprintf("%s/%s", c->scope, name);
	char *qn, *sn, *zn, *dqout;
	if (compact(c)) {
		int id = new_id(c);
		qn = gen_name(c, base, "_q");
		sn = xasprintf("s%d", id);
		zn = xasprintf("z%d", id);
		dqout = gen_name(c, base, "_dq");
	} else {
		char *b1 = xasprintf("%s_quantized", base), *b2 = xasprintf("%s_scale", base),
		     *b3 = xasprintf("%s_zero_point", base);
		qn = qg_unique_name(c->g, b1);
		sn = qg_unique_name(c->g, b2);
		zn = qg_unique_name(c->g, b3);
		dqout = xasprintf("%s_DequantizeLinear_Output", qn);
		free(b1);
		free(b2);
		free(b3);
	}
	free(base);
	int axis = nch > 1 ? 0 : -1;
	int prank = axis < 0 ? 0 : 1;
	qg_add_values(c->g, qn, DT_INT32, 1, &len, q);
	qg_add_values(c->g, sn, DT_FLOAT, prank, &nch, scales);
	qc_add_zp(c->g, zn, DT_INT32, prank, &nch, zps, nch);
	push_dq(c, qn, qn, sn, zn, dqout, axis, DT_INT32);
	qc_report_tensor(c->rep, name, DT_INT32, nch, scales, zps, axis);
	qc_report_names(c->rep, qn, sn, zn, NULL);
	pv_push(&o->biases, xstrdup(name));
	if (c == o) {
		pv_push(&c->bname, xstrdup(name));
		pv_push(&c->bdq, xstrdup(dqout));
	}
	qg_set_input(n, bi, dqout);
	free(dqout);
	free(qn);
	free(sn);
	free(zn);
	free(scales);
	free(zps);
	free(q);
	tensor_free(&b);
	return 0;
}

/* a float initializer read as an activation (Add's constant, say):
 * quantized with the activation type over its own range */
static int quant_const_input(Ctx *c, Onnx__NodeProto *n, size_t i)
{
	const char *name = n->input[i];
	Ctx *o = init_scope(c, name);
	long long k = quant_init(o, name, c->o->act_type, c->o->act_symmetric, 0, -1);
	if (k < 0)
		return -1;
	qg_set_input(n, i, weight_dq(c, o, (size_t)k, name));
	return 0;
}

static int is_float_init(Ctx *c, const char *name)
{
	const Onnx__TensorProto *t = init_of(c, name);
	return t && t->data_type == DT_FLOAT;
}

/* Add(MatMul output, 1-D bias) where the MatMul was quantized and its
 * output feeds only this Add: the bias becomes int32 with scale = MatMul
 * input scale x weight scale (as Conv and Gemm biases) and the MatMul output
 * stays unrounded. 1 done, 0 not this pattern, -1 error. */
static int matmul_bias(Ctx *c, Onnx__NodeProto *n)
{
	if (strcmp(n->op_type, "Add") || n->n_input != 2)
		return 0;
	for (size_t bi = 0; bi < 2; bi++) {
		const char *x = n->input[1 - bi], *b = n->input[bi];
		const Onnx__TensorProto *bp = init_of(c, b);
		if (!bp || bp->data_type != DT_FLOAT || bp->n_dims != 1 || init_of(c, x) || qg_is_output(c->g, x) ||
		    qg_read_in_subgraphs(c->g, x))
			continue;
		for (size_t k = 0; k < c->nmm; k++) {
			const Onnx__NodeProto *mm = c->mm[k].node;
			if (strcmp(mm->output[0], x))
				continue;
			int only = 1;
			for (size_t i = 0; i < c->g->n_node && only; i++)
				for (size_t j = 0; j < c->g->node[i]->n_input; j++)
					if (c->g->node[i] != n && !strcmp(c->g->node[i]->input[j], x))
						only = 0;
			const QWeight *w = &c->mm[k].wc->wq[c->mm[k].w];
			const Onnx__TensorProto *wp = qg_init(c->mm[k].wc->g, w->qname);
			int64_t ncols = wp && wp->n_dims ? wp->dims[wp->n_dims - 1] : -1;
			if (!only || bp->dims[0] != ncols)
				return 0;
			int r = quant_bias(c, n, bi, c->mm[k].in_scale, w);
			return r < 0 ? -1 : r == 0;
		}
	}
	return 0;
}

/* quantize the inputs of node n; 1 when something was quantized */
static int quant_node(Ctx *c, Onnx__NodeProto *n)
{
	const char *op = n->op_type;
	int mb = matmul_bias(c, n);
	if (mb != 0)
		return mb;
	int any = 0;
	int in0 = 0;        /* input 0 is a quantized activation ... */
	float in0s = 0;     /* ... of this scale (act_get may move c->acts) */
	for (size_t i = 0; i < n->n_input; i++) {
		const char *name = node_input(n, i);
		if (!name || !quant_input(op, i))
			continue;
		if (i == 1 && !strcmp(op, "MatMul") && is_float_init(c, name))
			continue; /* the weight, below */
		if (init_of(c, name)) {
			if (is_float_init(c, name) && !qt_sentinel_const(c->m, init_scope(c, name)->g, name)) {
				if (quant_const_input(c, n, i) < 0)
					return -1;
				any = 1;
			}
			continue;
		}
		Act *a = act_get(c, name);
		if (!a)
			continue;
		if (i == 0) {
			in0 = 1;
			in0s = a->p.scale;
		}
		qg_set_input(n, i, a->dq);
		any = 1;
	}
	if (!is_weight_op(op))
		return any;
	const char *w = node_input(n, 1);
	if (!w || !is_float_init(c, w)) {
		/* Conv/Gemm/MatMul of two activations (MatMul's done above) */
		Act *a = w && strcmp(op, "MatMul") ? act_get(c, w) : NULL;
		if (a) {
			qg_set_input(n, 1, a->dq);
			any = 1;
		}
		return any;
	}
	int axis = -1;
	if (c->o->per_channel == PC_ON || (c->o->per_channel == PC_AUTO && model_opset(c->m->proto, "") >= 13)) {
		int64_t tb = 0;
		if (!strcmp(op, "Conv"))
			axis = 0;
		else if (!strcmp(op, "ConvTranspose"))
			axis = 1;  /* W is [C, M/group, k...]: output channels on axis 1 */
		else if (!strcmp(op, "Gemm")) {
			if (attr_int(n, "transB", 0, &tb) < 0)
				return -1;
			axis = tb ? 0 : 1;
		} else {
			axis = (int)init_of(c, w)->n_dims - 1;
		}
		int pc = qc_per_channel(c->m, c->o, c->rep, init_of(c, w), axis);
		if (pc < 0)
			return -1;
		if (!pc)
			axis = -1;
	}
	Ctx *wc;
	size_t wi;
	if (quant_weight_input(c, n, 1, axis, &wc, &wi) < 0)
		return -1;
	if (!strcmp(op, "MatMul") && in0) {
		c->mm = xreallocarray(c->mm, c->nmm + 1, sizeof *c->mm);
		c->mm[c->nmm++] = (struct MatMulOut){n, in0s, wc, wi};
	}
	const char *b = node_input(n, 2);
	if (b && strcmp(op, "MatMul") && is_float_init(c, b)) {
		int r = in0 ? quant_bias(c, n, 2, in0s, &wc->wq[wi]) : 1;
		if (r < 0 || (r == 1 && quant_const_input(c, n, 2) < 0))
			return -1;
	}
	return 1;
}

static int is_marked(const PtrVec *qn, const Onnx__NodeProto *n)
{
	for (size_t i = 0; i < qn->n; i++)
		if (qn->v[i] == n)
			return 1;
	return 0;
}

/* does mark() add the quantized inputs and the outputs of n to a? 1 if
 * any was new */
static int mark_tensors(StrMap *a, const Onnx__NodeProto *n)
{
	int changed = 0, added;
	for (size_t k = 0; k < n->n_input; k++)
		if (*n->input[k] && quant_input(n->op_type, k)) {
			strmap_add(a, n->input[k], &added);
			changed |= added;
		}
	for (size_t k = 0; k < n->n_output; k++)
		if (*n->output[k]) {
			strmap_add(a, n->output[k], &added);
			changed |= added;
		}
	return changed;
}

static int touches(const StrMap *a, const Onnx__NodeProto *n)
{
	for (size_t k = 0; k < n->n_input; k++)
		if (*n->input[k] && quant_input(n->op_type, k) && strmap_find(a, n->input[k]))
			return 1;
	for (size_t k = 0; k < n->n_output; k++)
		if (*n->output[k] && strmap_find(a, n->output[k]))
			return 1;
	return 0;
}

/* step 1, last part: a node that only moves values (the movers, Concat)
 * is quantized only inside a quantized chain, i.e. when a tensor it reads
 * or writes is read or written by quantized computation, directly or
 * through other such nodes and Relu/Clip (folded in step 2). Elsewhere its
 * Q/DQ pairs would round values no quantized operator reads: silero-vad's
 * LSTM weights reordered by Slice and Concat, its LSTM state carried out
 * through Unsqueeze and Concat to a graph output (8-bit state, clipped to
 * the calibration's range, was most of its error). onnxruntime quantizes
 * such nodes only after a quantized input (Direct8BitOp); here also before
 * a quantized reader, which rounds the same tensor once either way. */
static void prune_movers(Onnx__NodeProto **orig, size_t norig, char **status, char **why, PtrVec *qn)
{
	StrMap a = {0}, inq = {0};
	for (size_t j = 0; j < qn->n; j++)
		strmap_addb(&inq, &qn->v[j], sizeof qn->v[j], NULL);
	char *cand = xcalloc(norig ? norig : 1, 1);
	for (size_t i = 0; i < norig; i++) {
		const Onnx__NodeProto *n = orig[i];
		int mover = qc_in_list(movers, n->op_type) || !strcmp(n->op_type, "Concat");
		if (!strmap_findb(&inq, &orig[i], sizeof orig[i]))
			cand[i] = status[i] ? 0 : 3;  /* 3: a Relu/Clip step 2 may fold */
		else if (mover)
			cand[i] = 1;                   /* 1: a mover not (yet) in a chain */
		else
			mark_tensors(&a, n);           /* computation */
	}
	for (int changed = 1; changed;) {
		changed = 0;
		for (size_t i = 0; i < norig; i++) {
			const Onnx__NodeProto *n = orig[i];
			if (cand[i] == 1 && touches(&a, n)) {
				cand[i] = 2;
				mark_tensors(&a, n);
				changed = 1;
			} else if (cand[i] == 3 && n->n_input && n->n_output &&
				   (strmap_find(&a, n->input[0]) || strmap_find(&a, n->output[0]))) {
				int added;
				strmap_add(&a, n->input[0], &added);
				changed |= added;
				strmap_add(&a, n->output[0], &added);
				changed |= added;
			}
		}
	}
	strmap_free(&inq);
	for (size_t i = 0; i < norig; i++)
		if (cand[i] == 1) {
			status[i] = "skipped";
			why[i] = xasprintf("kept in float: no quantized operator reads or writes what this %s moves",
					   orig[i]->op_type);
			strmap_addb(&inq, &orig[i], sizeof orig[i], NULL);
		}
	size_t k = 0;
	for (size_t j = 0; j < qn->n; j++)
		if (!strmap_findb(&inq, &qn->v[j], sizeof qn->v[j]))
			qn->v[k++] = qn->v[j];
	qn->n = k;
	free(cand);
	strmap_free(&inq);
	strmap_free(&a);
}

/* step 2: fold Relu/Clip r into its quantized producer; the producer, or
 * NULL when r stays */
static Onnx__NodeProto *try_fold(Ctx *c, Onnx__NodeProto *r, const PtrVec *qn)
{
	Onnx__GraphProto *g = c->g;
	const char *x = node_input(r, 0), *y = r->n_output ? r->output[0] : NULL;
	if (!x || !y || qg_is_output(g, x) || qg_is_output(g, y) || !calib_find(c->stats, y) ||
	    qg_read_in_subgraphs(g, x) || qg_read_in_subgraphs(g, y))
		return NULL;
	Onnx__NodeProto *p = producer(g, x);
	if (!p || !is_marked(qn, p))
		return NULL;
	for (size_t i = 0; i < g->n_node; i++) {
		Onnx__NodeProto *n = g->node[i];
		for (size_t k = 0; k < n->n_input; k++) {
			if (n != r && !strcmp(n->input[k], x))
				return NULL; /* x has another consumer */
			if (!strcmp(n->input[k], y) && !is_marked(qn, n))
				return NULL; /* a float consumer would lose the clip */
		}
	}
	for (size_t k = 0; k < p->n_output; k++)
		if (!strcmp(p->output[k], x)) {
			free(p->output[k]);
			p->output[k] = xstrdup(y);
		}
	return p;
}

/* rename every read of from in g's nodes (and their outputs) to to */
static void rename_in(Onnx__GraphProto *g, const char *from, const char *to)
{
	for (size_t i = 0; i < g->n_node; i++) {
		Onnx__NodeProto *n = g->node[i];
		for (size_t k = 0; k < n->n_input; k++)
			if (!strcmp(n->input[k], from))
				qg_set_input(n, k, to);
		for (size_t k = 0; k < n->n_output; k++)
			if (!strcmp(n->output[k], from)) {
				free(n->output[k]);
				n->output[k] = xstrdup(to);
			}
	}
}

/* Compact names: an initializer W of this scope that no node reads in
 * float any more is gone; the DequantizeLinear output that replaced it
 * (W_dq) takes its name, so its consumers read W as before. Bodies read
 * their own DequantizeLinear (named by their scope), never this one. */
static void take_names(Ctx *c, const PtrVec *orig, const PtrVec *dq)
{
	for (size_t i = 0; i < orig->n; i++) {
		const char *w = orig->v[i];
		int first = 1;
		for (size_t k = 0; k < i && first; k++)
			first = strcmp(orig->v[k], w) != 0;
		int held = orig == &c->bname;  /* biases are listed in their own scope only */
		for (size_t k = 0; k < c->wdone.n && !held; k++)
			held = !strcmp(c->wdone.v[k], w);
		if (first && held && !qg_init(c->g, w) && !qg_defines(c->g, w) && !qg_is_output(c->g, w))
			rename_in(c->g, dq->v[i], w);
	}
}

static void ctx_free(Ctx *c)
{
	for (size_t i = 0; i < c->nacts; i++) {
		Act *a = &c->acts[i];
		free(a->name);
		free(a->dq);
		free(a->s);
		free(a->z);
		free(a->q);
		free(a->qn);
		free(a->dqn);
	}
	free(c->acts);
	for (size_t i = 0; i < c->npre; i++)
		onnx__node_proto__free_unpacked(c->pre[i], NULL);
	free(c->pre);
	for (size_t i = 0; i < c->wdone.n; i++) {
		free(c->wdone.v[i]);
		qc_weight_free(&c->wq[i]);
	}
	for (size_t i = 0; i < c->dqname.n; i++) {
		free(c->dqname.v[i]);
		free(c->dqout.v[i]);
	}
	for (size_t i = 0; i < c->bname.n; i++) {
		free(c->bname.v[i]);
		free(c->bdq.v[i]);
	}
	pv_free(&c->dqname);
	pv_free(&c->dqout);
	pv_free(&c->bname);
	pv_free(&c->bdq);
	pv_free(&c->wdone);
	for (size_t i = 0; i < c->biases.n; i++)
		free(c->biases.v[i]);
	pv_free(&c->biases);
	free(c->wq);
	free(c->mm);
	qt_ranges_free(&c->sent);
}

/* note why node n of c's scope stayed float, for "nothing to quantize"
 * (up to three distinct reasons) */
static void note_why(Ctx *c, const char *scope, const Onnx__NodeProto *n, const char *why)
{
	char lab[256];
	if (*c->nwhy >= 3 || strstr(c->why->buf ? c->why->buf : "", why))
		return;
	sb_printf(c->why, "%s'%s%s%s': %s", *c->nwhy ? "; " : "", scope ? scope : "", scope ? "/" : "",
		  node_label(n, lab, sizeof lab), why);
	(*c->nwhy)++;
}

/* every node of g and of its subgraphs stays float for why (noted once:
 * note_why keeps distinct reasons) */
static void report_skipped(Ctx *c, const Onnx__GraphProto *g, const char *scope, const char *why)
{
	qc_report_skipped(c->rep, g, scope, why);
	if (g->n_node)
		note_why(c, scope, g->node[0], why);
}

static int quant_graph(Ctx *c);

/* the bodies of node n (If branches, Loop and Scan bodies), each with a
 * context of its own whose parent is c; a body calibration never ran
 * (a branch never taken) stays float */
static int quant_bodies(Ctx *c, Onnx__NodeProto *n)
{
	int r = 0;
	for (size_t a = 0; a < n->n_attribute && r == 0; a++) {
		Onnx__GraphProto *b = n->attribute[a]->g;
		if (!b)
			continue;
		char *scope = qg_scope(c->scope, n, n->attribute[a]);
		if (!qc_body_ran(c->stats, b)) {
			report_skipped(c, b, scope, "its subgraph never ran during calibration (a branch not taken): no statistics");
		} else {
			Ctx s = {.parent = c, .scope = scope, .nq = c->nq, .why = c->why, .nwhy = c->nwhy, .m = c->m,
				 .qdomain = c->qdomain, .g = b, .stats = c->stats, .o = c->o, .rep = c->rep,
				 .names = c->names, .next_id = c->next_id};
			r = quant_graph(&s);
			ctx_free(&s);
		}
		free(scope);
	}
	return r;
}

/* the four steps over c->g, then (before step 4, which places the Q/DQ
 * pairs bodies asked of this scope) over the subgraphs of its nodes */
static int quant_graph(Ctx *c)
{
	Onnx__GraphProto *g = c->g;
	const QuantOpts *o = c->o;
	size_t norig = g->n_node;
	Onnx__NodeProto **orig = xcalloc(norig ? norig : 1, sizeof *orig);
	char **status = xcalloc(norig ? norig : 1, sizeof *status);
	char **why = xcalloc(norig ? norig : 1, sizeof *why);
	int *removed = xcalloc(norig ? norig : 1, sizeof *removed);
	memcpy(orig, g->node, norig * sizeof *orig);
	PtrVec qn = {0};
	char lab[256];
	int r = 0;
	/* step 1 */
	qt_ranges_init(&c->sent, c->m, g, c->stats, o);
	const char **pattern = quant_float_patterns(g);
	const char **preset = qt_preset_float(g, pattern, o, c->rep);
	for (size_t i = 0; i < norig; i++) {
		Onnx__NodeProto *n = orig[i];
		const char *ex = qc_excluded_in(n, c->scope, o);
		if (!qc_in_list(quant_static_ops, n->op_type)) {
			status[i] = "skipped";
			why[i] = xasprintf("no static quantization for %s", n->op_type);
		} else if (ex) {
			status[i] = "skipped";
			why[i] = xstrdup(ex);
		} else if (pattern[i]) {
			status[i] = "skipped";
			why[i] = xstrdup(pattern[i]);
		} else if (preset && preset[i]) {
			status[i] = "skipped";
			why[i] = xstrdup(preset[i]);
		} else if (mover_feeds_subgraph(g, n)) {
			status[i] = "skipped";
			why[i] = xasprintf("kept in float: its output is read inside a subgraph, where onnxruntime cannot move Q/DQ past a %s",
					   n->op_type);
		} else if (strcmp(n->op_type, "Relu") && strcmp(n->op_type, "Clip")) {
			pv_push(&qn, n);
		}
	}
	free(pattern);
	free(preset);
	prune_movers(orig, norig, status, why, &qn);
	/* step 2 */
	for (size_t i = 0; i < norig; i++) {
		Onnx__NodeProto *n = orig[i];
		if (status[i] || is_marked(&qn, n))
			continue;
		Onnx__NodeProto *p = try_fold(c, n, &qn);
		if (p) {
			status[i] = "folded";
			why[i] = xasprintf("into the output range of '%s'", node_label(p, lab, sizeof lab));
			removed[i] = 1;
		} else {
			status[i] = "skipped";
			why[i] = xstrdup("kept in float: its input is not the sole output of a quantized node, or its output is read in float");
		}
	}
	size_t k = 0;
	for (size_t i = 0; i < norig; i++)
		if (!removed[i])
			g->node[k++] = orig[i];
	g->n_node = k;
	/* step 3 */
	for (size_t i = 0; r == 0 && i < norig; i++) {
		if (status[i])
			continue;
		int q = quant_node(c, orig[i]);
		if (q < 0) {
			r = error_prefix("node '%s%s%s'", c->scope ? c->scope : "", c->scope ? "/" : "",
					 node_label(orig[i], lab, sizeof lab));
		} else if (q == 0) {
			status[i] = "skipped";
			why[i] = xstrdup("no float32 input to quantize");
		} else {
			status[i] = "quantized";
			(*c->nq)++;
		}
	}
	for (size_t i = 0; r == 0 && i < norig; i++) {
		qc_report_node_in(c->rep, c->scope, orig[i], status[i], why[i]);
		if (why[i] && strcmp(status[i], "folded"))
			note_why(c, c->scope, orig[i], why[i]);
	}
	for (size_t i = 0; r == 0 && i < g->n_node; i++)
		r = quant_bodies(c, g->node[i]);
	/* step 4 */
	if (r == 0) {
		Onnx__NodeProto **nodes = NULL;
		size_t nn = 0;
		for (size_t i = 0; i < c->npre; i++)
			qg_push(&nodes, &nn, c->pre[i]);
		c->npre = 0;
		for (size_t i = 0; i < g->n_input; i++) {
			Act *a = act_find(c, g->input[i]->name);
			if (a && !a->done)
				place_pair(c, a, &nodes, &nn);
		}
		for (size_t i = 0; i < c->nacts; i++)
			if (!c->acts[i].done && !producer(g, c->acts[i].name))
				place_pair(c, &c->acts[i], &nodes, &nn); /* an outer value */
		for (size_t i = 0; i < g->n_node; i++) {
			qg_push(&nodes, &nn, g->node[i]);
			for (size_t j = 0; j < g->node[i]->n_output; j++) {
				Act *a = act_find(c, g->node[i]->output[j]);
				if (a && !a->done)
					place_pair(c, a, &nodes, &nn);
			}
		}
		for (size_t i = 0; r == 0 && i < c->nacts; i++)
			if (!c->acts[i].done)
				r = error("tensor '%s' has calibration statistics but no producer in the graph",
					  c->acts[i].name);
		free(g->node);
		g->node = nodes;
		g->n_node = nn;
		for (size_t i = 0; i < c->wdone.n; i++)
			qg_drop_unused_init(g, c->wdone.v[i]);
		for (size_t i = 0; i < c->biases.n; i++)
			qg_drop_unused_init(g, c->biases.v[i]);
		if (compact(c)) {
			take_names(c, &c->dqname, &c->dqout);
			take_names(c, &c->bname, &c->bdq);
		}
	}
	for (size_t i = 0; i < norig; i++) {
		free(why[i]);
		if (removed[i])
			onnx__node_proto__free_unpacked(orig[i], NULL);
	}
	free(orig);
	free(status);
	free(why);
	free(removed);
	pv_free(&qn);
	return r;
}

int quant_static_qdq(Model *m, const CalibStats *stats, const QuantOpts *o, QuantReport *rep)
{
	Onnx__GraphProto *g = m->proto->graph;
	int64_t opset = model_opset(m->proto, "");
	if (qc_check_not_quantized(g) < 0 || qc_check_lists(g, o, quant_static_ops, "static") < 0 ||
	    qr_check(stats, o) < 0)
		return -1;
	if (opset < 10)
		return error("static quantization needs opset >= 10 (QuantizeLinear); the model imports opset %lld",
			     (long long)opset);
	if (o->per_channel == PC_ON && opset < 13)
		return error("quantize.per-channel needs opset >= 13 (DequantizeLinear with axis); the model imports opset %lld",
			     (long long)opset);
	size_t nq = 0, nwhy = 0, norig = g->n_node;
	StrBuf why = {0};
	QNames names = {0};
	int next_id = 1;
	if (o->names == QNAMES_COMPACT)
		qg_names_collect(&names, g);
	Ctx c = {.nq = &nq, .why = &why, .nwhy = &nwhy, .m = m, .g = g, .stats = stats, .o = o, .rep = rep,
		 .names = &names, .next_id = &next_id};
	if ((o->act_type == DT_INT16 || o->act_type == DT_UINT16) && opset < 21) {
		/* ONNX QuantizeLinear takes 16 bits from opset 21; raising the
		 * model's opset would change other operators' semantics */
		c.qdomain = "com.microsoft";
		qg_import(m->proto, c.qdomain, 1);
	}
	int r = quant_graph(&c);
	if (r == 0 && nq == 0)
		r = error("nothing to quantize: none of the %zu nodes could be quantized (%s)", norig,
			  why.len ? why.buf : "the graph has no nodes");
	if (r == 0)
		qg_prune_value_info(g);
	sb_release(&why);
	ctx_free(&c);
	qg_names_free(&names);
	return r;
}
