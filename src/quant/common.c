/* common.c — checks, weight quantization and report entries shared by the
 * static and dynamic rewrites (see internal.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "exec/inline.h"
#include "infer/infer.h"
#include "onnx/extdata.h"
#include "onnx/node.h"
#include "quant/internal.h"

static const char *const quantized_ops[] = {
	"QuantizeLinear", "DequantizeLinear", "DynamicQuantizeLinear", "MatMulInteger", "ConvInteger",
	"QLinearConv", "QLinearMatMul", "QLinearAdd", "QLinearMul", "QGemm", "DynamicQuantizeMatMul",
	"MatMulIntegerToFloat", "QAttention", "DynamicQuantizeLSTM", "MatMulNBits", "GatherBlockQuantized", NULL,
};

int qc_in_list(const char *const *list, const char *op)
{
	for (size_t i = 0; list[i]; i++)
		if (!strcmp(list[i], op))
			return 1;
	return 0;
}

/* the check below in g and its subgraphs; scope names g (NULL: main) */
static int not_quantized_in(const Onnx__GraphProto *g, const char *scope)
{
	char lab[256];
	int r = 0;
	for (size_t i = 0; i < g->n_node && r == 0; i++) {
		const Onnx__NodeProto *n = g->node[i];
		if (qc_in_list(quantized_ops, n->op_type) || !strncmp(n->op_type, "QLinear", 7))
			return error("the model is already quantized: node '%s%s%s' is a %s; quantize the float model instead",
				     scope ? scope : "", scope ? "/" : "", node_label(n, lab, sizeof lab), n->op_type);
		for (size_t a = 0; a < n->n_attribute && r == 0; a++)
			if (n->attribute[a]->g) {
				char *sub = qg_scope(scope, n, n->attribute[a]);
				r = not_quantized_in(n->attribute[a]->g, sub);
				free(sub);
			}
	}
	return r;
}

int qc_check_not_quantized(const Onnx__GraphProto *g)
{
	return not_quantized_in(g, NULL);
}

/* is name the name of a node of g or of its subgraphs, bare or with its
 * scope ("If_0/then/conv1")? */
static int has_node(const Onnx__GraphProto *g, const char *scope, const char *name)
{
	char lab[256];
	int found = 0;
	for (size_t k = 0; k < g->n_node && !found; k++) {
		const Onnx__NodeProto *n = g->node[k];
		found = n->name && !strcmp(n->name, name);
		if (!found && scope) {
			char *full = xasprintf("%s/%s", scope, node_label(n, lab, sizeof lab));
			found = !strcmp(full, name);
			free(full);
		}
		for (size_t a = 0; a < n->n_attribute && !found; a++)
			if (n->attribute[a]->g) {
				char *sub = qg_scope(scope, n, n->attribute[a]);
				found = has_node(n->attribute[a]->g, sub, name);
				free(sub);
			}
	}
	return found;
}

int qc_check_lists(const Onnx__GraphProto *g, const QuantOpts *o, const char *const *supported,
		   const char *what)
{
	for (size_t i = 0; i < o->ops.n; i++)
		if (!qc_in_list(supported, o->ops.v[i])) {
			StrBuf sb = {0};
			for (size_t k = 0; supported[k]; k++)
				sb_printf(&sb, "%s%s", k ? " " : "", supported[k]);
			int r = error("quantize.ops: %s cannot be quantized by %s quantization (it covers: %s)",
				      (const char *)o->ops.v[i], what, sb.buf);
			sb_release(&sb);
			return r;
		}
	for (size_t i = 0; i < o->exclude_nodes.n; i++) {
		if (!has_node(g, NULL, o->exclude_nodes.v[i]))
			return error("quantize.exclude-nodes: the model has no node named '%s'",
				     (const char *)o->exclude_nodes.v[i]);
	}
	return 0;
}

const char *qc_excluded(const Onnx__NodeProto *n, const QuantOpts *o)
{
	return qc_excluded_in(n, NULL, o);
}

const char *qc_excluded_in(const Onnx__NodeProto *n, const char *scope, const QuantOpts *o)
{
	char lab[256];
	char *full = scope ? xasprintf("%s/%s", scope, node_label(n, lab, sizeof lab)) : NULL;
	int hit = 0;
	for (size_t i = 0; i < o->exclude_nodes.n && !hit; i++)
		hit = (n->name && !strcmp(n->name, o->exclude_nodes.v[i])) ||
		      (full && !strcmp(full, o->exclude_nodes.v[i]));
	free(full);
	if (hit)
		return "excluded by quantize.exclude-nodes";
	for (size_t i = 0; i < o->exclude_ops.n; i++)
		if (!strcmp(n->op_type, o->exclude_ops.v[i]))
			return "excluded by quantize.exclude-ops";
	if (o->ops.n) {
		for (size_t i = 0; i < o->ops.n; i++)
			if (!strcmp(n->op_type, o->ops.v[i]))
				return NULL;
		return "not listed in quantize.ops";
	}
	return NULL;
}

int qc_float_view(Model *m, const Onnx__TensorProto *w, FloatView *v)
{
	memset(v, 0, sizeof *v);
	const char *nm = w->name ? w->name : "";
	int dt = w->has_data_type ? w->data_type : 0;
	if (dt != DT_FLOAT)
		return error("weight '%s' is %s, expected float", nm, dtype_name(dt));
	const void *d;
	size_t len;
	int owned;
	if (model_tensor_bytes(m, w, &d, &len, &owned) < 0)
		return -1;
	v->numel = (int64_t)(len / sizeof(float));
	if (owned || (uintptr_t)d % _Alignof(float)) {
		/* float_data, or raw bytes at an odd offset: an aligned copy */
		v->own = owned ? (void *)d : xmalloc(len ? len : 1);
		if (!owned && len)
			memcpy(v->own, d, len);
		v->x = v->own;
	} else {
		v->x = d;
	}
	if (w->has_data_location && w->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL) {
		v->mapped = d;
		v->len = len;
	}
	return 0;
}

void qc_float_drop(const FloatView *v, int64_t from, int64_t to)
{
	if (v->mapped && to > from)
		ext_release((const float *)v->mapped + from, (size_t)(to - from) * sizeof(float));
}

void qc_float_done(FloatView *v)
{
	free(v->own);
	if (v->mapped)
		ext_release(v->mapped, v->len);
	memset(v, 0, sizeof *v);
}

Onnx__TensorProto *qc_proto_take(Tensor *t, const char *name)
{
	Onnx__TensorProto *p = xmalloc(sizeof *p);
	onnx__tensor_proto__init(p);
	p->name = xstrdup(name);
	p->has_data_type = 1;
	p->data_type = t->dtype;
	p->n_dims = (size_t)t->rank;
	p->dims = xmalloc(sizeof(int64_t) * (size_t)(t->rank ? t->rank : 1));
	if (t->rank)
		memcpy(p->dims, t->dims, sizeof(int64_t) * (size_t)t->rank);
	p->has_raw_data = 1;
	p->raw_data.len = t->nbytes;
	p->raw_data.data = t->data;
	t->data = NULL;
	t->owned = 0;
	tensor_free(t);
	return p;
}

/* Big weights are walked in memory order, in runs of at most RUN values
 * of one channel, and the mapped source is given back every DROP values:
 * a 1 GiB weight never has more than DROP values of it resident. */
enum { RUN = 1 << 16, DROP = 1 << 22 };

#define QC_CLONES QM_CLONES("avx2", "default")
typedef float qc_v8f __attribute__((vector_size(32)));
typedef int32_t qc_v8i __attribute__((vector_size(32)));

/* the first smallest and the first largest of x[0..n), as a scan that
 * keeps the running value unless the next is smaller (larger) finds them:
 * NaNs passed over, +inf and -inf when there is nothing else. Eight lanes
 * at a time, each a scan of its own; a nonzero extreme has one bit
 * pattern wherever it lies, so the lanes agree with the scan; a zero one
 * may be -0 or +0 by which came first: then the scan itself, once. */
QC_CLONES static void run_range(const float *x, int64_t n, float *lo, float *hi)
{
	float l = INFINITY, h = -INFINITY;
	int64_t k = 0;
	if (n >= 32) {
		qc_v8f vl = {0}, vh = {0}, v;
		vl += INFINITY;
		vh -= INFINITY;
		for (; k + 8 <= n; k += 8) {
			memcpy(&v, x + k, sizeof v);
			qc_v8i lt = v < vl, gt = v > vh;
			vl = (qc_v8f)((lt & (qc_v8i)v) | (~lt & (qc_v8i)vl));
			vh = (qc_v8f)((gt & (qc_v8i)v) | (~gt & (qc_v8i)vh));
		}
		for (int j = 0; j < 8; j++) {
			l = vl[j] < l ? vl[j] : l;
			h = vh[j] > h ? vh[j] : h;
		}
	}
	for (; k < n; k++) {
		l = x[k] < l ? x[k] : l;
		h = x[k] > h ? x[k] : h;
	}
	if (n >= 32 && (l == 0 || h == 0)) {
		l = INFINITY;
		h = -INFINITY;
		for (k = 0; k < n; k++) {
			l = x[k] < l ? x[k] : l;
			h = x[k] > h ? x[k] : h;
		}
	}
	*lo = l;
	*hi = h;
}

/* the per-channel minimum and maximum of v as [outer, nch, inner] (each
 * channel's values visited in the same order as a channel-by-channel
 * scan, so NaNs and signed zeros come out the same: a run's extremes,
 * first found, replace the running ones only when smaller or larger) */
static void weight_ranges(const FloatView *v, int64_t outer, int64_t nch, int64_t inner, float *lo,
			  float *hi)
{
	for (int64_t c = 0; c < nch; c++) {
		lo[c] = INFINITY;
		hi[c] = -INFINITY;
	}
	int64_t dropped = 0;
	for (int64_t o = 0; o < outer; o++)
		for (int64_t c = 0; c < nch; c++)
			for (int64_t i = 0; i < inner; i += RUN) {
				int64_t off = (o * nch + c) * inner + i, n = inner - i < RUN ? inner - i : RUN;
				float l, h;
				run_range(v->x + off, n, &l, &h);
				lo[c] = l < lo[c] ? l : lo[c];
				hi[c] = h > hi[c] ? h : hi[c];
				if (off + n - dropped >= DROP) {
					qc_float_drop(v, dropped, off + n);
					dropped = off + n;
				}
			}
	if (!outer || !inner)
		for (int64_t c = 0; c < nch; c++)
			lo[c] = hi[c] = 0;
}

/* fill q's parameters (nch channels, lo and hi each) and the names */
static QParams *weight_params(QWeight *q, const char *const names[3], int64_t nch, int axis, int dtype,
			      int symmetric, int reduce_range, const float *lo, const float *hi)
{
	q->nch = nch;
	q->axis = axis;
	q->dtype = dtype;
	q->scales = xcalloc(nch ? (size_t)nch : 1, sizeof *q->scales);
	q->zps = xcalloc(nch ? (size_t)nch : 1, sizeof *q->zps);
	QParams *par = xcalloc(nch ? (size_t)nch : 1, sizeof *par);
	for (int64_t c = 0; c < nch; c++) {
		par[c] = qparams_compute(lo[c], hi[c], dtype, symmetric, reduce_range);
		q->scales[c] = par[c].scale;
		q->zps[c] = par[c].zero_point;
	}
	q->qname = xstrdup(names[0]);
	q->sname = xstrdup(names[1]);
	q->zname = xstrdup(names[2]);
	return par;
}

/* the quantized tensor's layout and parameters, to write it from its float
 * source now or, deferred, while the model is saved: plain (the source's
 * layout; channel c of [outer, nch, inner]) or transposed (a 2-D [nr, nc]
 * source stored [nc, nr]; one parameter per source row, or per tensor) */
typedef struct WeightFill {
	Model *m;                  /* deferred: the model ... */
	Onnx__TensorProto *src;    /* ... and a copy of the weight's external reference */
	int transposed;
	int64_t outer, nch, inner; /* plain */
	int64_t nr, nc;            /* transposed */
	QParams *par;              /* nch (plain), nr or 1 (transposed) */
	int per_row;               /* transposed: par[row], else par[0] */
	int dtype, qmin, qmax;
} WeightFill;

static void fill_plain(const WeightFill *f, const FloatView *v, void *out)
{
	size_t esz = (size_t)dtype_bits(f->dtype) / 8;
	int64_t dropped = 0;
	for (int64_t o = 0; o < f->outer; o++)
		for (int64_t c = 0; c < f->nch; c++)
			for (int64_t i = 0; i < f->inner; i += RUN) {
				int64_t off = (o * f->nch + c) * f->inner + i, n = f->inner - i < RUN ? f->inner - i : RUN;
				quantize_values(v->x + off, (size_t)n, &f->par[c], f->qmin, f->qmax,
						(char *)out + (size_t)off * esz);
				if (off + n - dropped >= DROP) {
					qc_float_drop(v, dropped, off + n);
					dropped = off + n;
				}
			}
}

/* a block of source rows quantized, then written out as columns: the
 * writes stay within a cache line per output row */
static void fill_transposed(const WeightFill *f, const FloatView *v, void *out)
{
	enum { RB = 64 };
	int64_t nr = f->nr, nc = f->nc;
	size_t esz = (size_t)dtype_bits(f->dtype) / 8;
	uint8_t *tmp = xmalloc((size_t)RB * (size_t)(nc ? nc : 1) * esz), *y = out;
	int64_t dropped = 0;
	for (int64_t r0 = 0; r0 < nr; r0 += RB) {
		int64_t rn = nr - r0 < RB ? nr - r0 : RB;
		for (int64_t r = 0; r < rn; r++)
			quantize_values(v->x + (r0 + r) * nc, (size_t)nc, &f->par[f->per_row ? r0 + r : 0], f->qmin,
					f->qmax, tmp + (size_t)(r * nc) * esz);
		for (int64_t k = 0; k < nc; k++)
			for (int64_t r = 0; r < rn; r++) {
				if (esz == 1)
					y[k * nr + r0 + r] = tmp[r * nc + k];
				else
					memcpy(y + (size_t)(k * nr + r0 + r) * esz, tmp + (size_t)(r * nc + k) * esz, esz);
			}
		if ((r0 + rn) * nc - dropped >= DROP) {
			qc_float_drop(v, dropped, (r0 + rn) * nc);
			dropped = (r0 + rn) * nc;
		}
	}
	free(tmp);
}

static void weight_fill(const WeightFill *f, const FloatView *v, void *out)
{
	if (f->transposed)
		fill_transposed(f, v, out);
	else
		fill_plain(f, v, out);
}

/* TensorFill of a deferred weight: the source read again, where it lies */
static int fill_deferred(void *ud, const Onnx__TensorProto *t, void *out, size_t len)
{
	WeightFill *f = ud;
	FloatView v;
	if (qc_float_view(f->m, f->src, &v) < 0) {
		qc_float_done(&v);
		return error_prefix("quantizing '%s'", t->name ? t->name : "");
	}
	if (len != dtype_nbytes(f->dtype, v.numel)) {
		qc_float_done(&v);
		return error("quantizing '%s': its source '%s' changed size (%lld values) since it was read",
			     t->name ? t->name : "", f->src->name ? f->src->name : "", (long long)v.numel);
	}
	weight_fill(f, &v, out);
	qc_float_done(&v);
	return 0;
}

static void fill_free(void *ud)
{
	WeightFill *f = ud;
	if (f->src)
		onnx__tensor_proto__free_unpacked(f->src, NULL);
	free(f->par);
	free(f);
}

Onnx__TensorProto *qc_proto_copy(const Onnx__TensorProto *t)
{
	size_t len = onnx__tensor_proto__get_packed_size(t);
	uint8_t *buf = xmalloc(len ? len : 1);
	onnx__tensor_proto__pack(t, buf);
	Onnx__TensorProto *c = onnx__tensor_proto__unpack(NULL, len, buf);
	free(buf);
	if (!c)
		fatalx(1, "tensor '%s': a copy of it does not decode", t->name ? t->name : "");
	return c;
}

void qc_add_deferred(Model *m, Onnx__GraphProto *g, const char *name, int dtype, int rank, const int64_t *dims,
		     TensorFill fill, void (*done)(void *ud), void *ud)
{
	Onnx__TensorProto *p = xmalloc(sizeof *p);
	onnx__tensor_proto__init(p);
	p->name = xstrdup(name);
	p->has_data_type = 1;
	p->data_type = dtype;
	p->n_dims = (size_t)rank;
	p->dims = xmalloc(sizeof(int64_t) * (size_t)(rank ? rank : 1));
	int64_t n = 1;
	for (int k = 0; k < rank; k++)
		n *= p->dims[k] = dims[k];
	p->has_raw_data = 1;
	p->raw_data.len = dtype_nbytes(dtype, n);
	p->raw_data.data = NULL;
	g->initializer = xreallocarray(g->initializer, g->n_initializer + 1, sizeof *g->initializer);
	g->initializer[g->n_initializer++] = p;
	model_defer(m, p, fill, done, ud);
}

/* The quantized tensor of w (rank, dims), from v and f, joins g followed by
 * q's scales and zero points: made now, or when defer (w's data external)
 * a model_defer shell made from w again while the model is saved, so a
 * converter never holds its results. v is done with; f->par is taken. */
static int weight_make(Model *m, Onnx__GraphProto *g, const Onnx__TensorProto *w, QWeight *q, WeightFill *f,
		       FloatView *v, int rank, const int64_t *dims, int defer)
{
	if (defer) {
		qc_float_done(v);
		WeightFill *d = xmalloc(sizeof *d);
		*d = *f;
		d->m = m;
		d->src = qc_proto_copy(w);
		qc_add_deferred(m, g, q->qname, q->dtype, rank, dims, fill_deferred, fill_free, d);
	} else {
		Tensor out = {0};
		if (tensor_alloc(&out, q->dtype, rank, dims) < 0) {
			qc_float_done(v);
			free(f->par);
			qc_weight_free(q);
			return -1;
		}
		weight_fill(f, v, out.data);
		qc_float_done(v);
		free(f->par);
		g->initializer = xreallocarray(g->initializer, g->n_initializer + 1, sizeof *g->initializer);
		g->initializer[g->n_initializer++] = qc_proto_take(&out, q->qname);
	}
	int prank = q->axis < 0 ? 0 : 1;
	qg_add_values(g, q->sname, DT_FLOAT, prank, &q->nch, q->scales);
	qc_add_zp(g, q->zname, q->dtype, prank, &q->nch, q->zps, q->nch);
	return 0;
}

static int is_external(const Onnx__TensorProto *t)
{
	return t->has_data_location && t->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
}

/* base_quantized, base_scale, base_zero_point (malloc'd) */
static void default_names(char *names[3], const char *base)
{
	names[0] = xasprintf("%s_quantized", base);
	names[1] = xasprintf("%s_scale", base);
	names[2] = xasprintf("%s_zero_point", base);
}

/* qc_quant_weight_named, its bytes made while the model is saved when defer */
static int quant_plain(Model *m, Onnx__GraphProto *g, const Onnx__TensorProto *w, const char *const names[3],
		       int dtype, int symmetric, int reduce_range, int axis, int defer, QWeight *q)
{
	memset(q, 0, sizeof *q);
	int rank = (int)w->n_dims;
	if (axis >= rank)
		return error("weight '%s' has rank %d: no axis %d for per-channel quantization", w->name, rank,
			     axis);
	FloatView v;
	if (qc_float_view(m, w, &v) < 0) {
		qc_float_done(&v);
		return -1;
	}
	int64_t nch = axis < 0 ? 1 : w->dims[axis], inner = 1;
	for (int k = axis + 1; axis >= 0 && k < rank; k++)
		inner *= w->dims[k];
	if (axis < 0)
		inner = v.numel;
	int64_t outer = nch ? v.numel / (nch * (inner ? inner : 1)) : 0;
	float *lo = xcalloc(nch ? (size_t)nch : 1, sizeof *lo), *hi = xcalloc(nch ? (size_t)nch : 1, sizeof *hi);
	weight_ranges(&v, outer, nch, inner, lo, hi);
	WeightFill f = {.outer = outer, .nch = nch, .inner = inner, .dtype = dtype};
	f.par = weight_params(q, names, nch, axis, dtype, symmetric, reduce_range, lo, hi);
	free(lo);
	free(hi);
	qrange(dtype, symmetric, reduce_range, &f.qmin, &f.qmax);
	return weight_make(m, g, w, q, &f, &v, rank, w->dims, defer);
}

/* qc_quant_weight_transposed, deferred as quant_plain */
static int quant_transposed(Model *m, Onnx__GraphProto *g, const Onnx__TensorProto *w, const char *base,
			    int dtype, int symmetric, int reduce_range, int axis, int defer, QWeight *q)
{
	memset(q, 0, sizeof *q);
	if (w->n_dims != 2 || (axis != -1 && axis != 1))
		return error("weight '%s': a transposed weight must be 2-D, quantized per tensor or along axis 1",
			     w->name);
	FloatView v;
	if (qc_float_view(m, w, &v) < 0) {
		qc_float_done(&v);
		return -1;
	}
	int64_t nr = w->dims[0], nc = w->dims[1], td[2] = {nc, nr};
	/* axis 1 of [K, N] is axis 0 (rows) of the source [N, K] */
	int64_t nch = axis < 0 ? 1 : nr;
	float *lo = xcalloc(nch ? (size_t)nch : 1, sizeof *lo), *hi = xcalloc(nch ? (size_t)nch : 1, sizeof *hi);
	weight_ranges(&v, 1, nch, nch ? v.numel / nch : 0, lo, hi);
	char *nm[3];
	default_names(nm, base);
	WeightFill f = {.transposed = 1, .nr = nr, .nc = nc, .per_row = axis >= 0, .dtype = dtype};
	f.par = weight_params(q, (const char *const *)nm, nch, axis, dtype, symmetric, reduce_range, lo, hi);
	for (int i = 0; i < 3; i++)
		free(nm[i]);
	free(lo);
	free(hi);
	qrange(dtype, symmetric, reduce_range, &f.qmin, &f.qmax);
	return weight_make(m, g, w, q, &f, &v, 2, td, defer);
}

int qc_quant_weight(Model *m, Onnx__GraphProto *g, const Onnx__TensorProto *w, int dtype,
		    int symmetric, int reduce_range, int axis, QWeight *q)
{
	char *nm[3];
	default_names(nm, w->name);
	int r = quant_plain(m, g, w, (const char *const *)nm, dtype, symmetric, reduce_range, axis, 0, q);
	for (int i = 0; i < 3; i++)
		free(nm[i]);
	return r;
}

int qc_quant_weight_named(Model *m, Onnx__GraphProto *g, const Onnx__TensorProto *w, const char *qname,
			  const char *sname, const char *zname, int dtype, int symmetric, int reduce_range,
			  int axis, QWeight *q)
{
	const char *names[3] = {qname, sname, zname};
	return quant_plain(m, g, w, names, dtype, symmetric, reduce_range, axis, 0, q);
}

int qc_quant_weight_transposed(Model *m, Onnx__GraphProto *g, const Onnx__TensorProto *w,
			       const char *base, int dtype, int symmetric, int reduce_range, int axis,
			       QWeight *q)
{
	return quant_transposed(m, g, w, base, dtype, symmetric, reduce_range, axis, 0, q);
}

int qc_quant_weight_at_save(Model *m, Onnx__GraphProto *g, const Onnx__TensorProto *w, int transposed,
			    const char *base, int dtype, int symmetric, int reduce_range, int axis, QWeight *q)
{
	int defer = is_external(w);
	if (transposed)
		return quant_transposed(m, g, w, base, dtype, symmetric, reduce_range, axis, defer, q);
	char *nm[3];
	default_names(nm, base);
	int r = quant_plain(m, g, w, (const char *const *)nm, dtype, symmetric, reduce_range, axis, defer, q);
	for (int i = 0; i < 3; i++)
		free(nm[i]);
	return r;
}

void qc_add_zp(Onnx__GraphProto *g, const char *name, int dtype, int rank, const int64_t *dims,
	       const int32_t *zps, int64_t n)
{
	void *buf = xcalloc(n ? (size_t)n : 1, 4);
	for (int64_t i = 0; i < n; i++) {
		if (dtype == DT_INT8)
			((int8_t *)buf)[i] = (int8_t)zps[i];
		else if (dtype == DT_UINT8)
			((uint8_t *)buf)[i] = (uint8_t)zps[i];
		else if (dtype == DT_INT16)
			((int16_t *)buf)[i] = (int16_t)zps[i];
		else if (dtype == DT_UINT16)
			((uint16_t *)buf)[i] = (uint16_t)zps[i];
		else
			((int32_t *)buf)[i] = zps[i];
	}
	qg_add_values(g, name, dtype, rank, dims, buf);
	free(buf);
}

void qc_weight_free(QWeight *q)
{
	free(q->qname);
	free(q->sname);
	free(q->zname);
	free(q->scales);
	free(q->zps);
	memset(q, 0, sizeof *q);
}

void qc_report_node(QuantReport *rep, const Onnx__NodeProto *n, const char *status, const char *reason)
{
	qc_report_node_in(rep, NULL, n, status, reason);
}

void qc_report_node_in(QuantReport *rep, const char *scope, const Onnx__NodeProto *n, const char *status,
		       const char *reason)
{
	char lab[256];
	StrBuf *sb = &rep->nodes;
	if (sb->len)
		sb_puts(sb, ",\n    ");
	sb_puts(sb, "{\"name\": ");
	/* scope/label joined here, not by xasprintf (two printf passes per
	 * node, for silero-vad's 650) */
	const char *label = node_label(n, lab, sizeof lab);
	size_t ls = scope ? strlen(scope) + 1 : 0, ll = strlen(label);
	char buf[512], *full = ls + ll < sizeof buf ? buf : xmalloc(ls + ll + 1);
	if (ls) {
		memcpy(full, scope, ls - 1);
		full[ls - 1] = '/';
	}
	memcpy(full + ls, label, ll + 1);
	sb_json_str(sb, full);
	if (full != buf)
		free(full);
	sb_puts(sb, ", \"op\": ");
	sb_json_str(sb, n->op_type);
	sb_puts(sb, ", \"status\": ");
	sb_json_str(sb, status);
	if (reason) {
		sb_puts(sb, ", \"reason\": ");
		sb_json_str(sb, reason);
	}
	sb_putc(sb, '}');
	if (!strcmp(status, "quantized"))
		rep->nquantized++;
	else if (!strcmp(status, "folded"))
		rep->nfolded++;
	else
		rep->nskipped++;
}

/* The SQNR pass walks four channels side by side, one lane each (GCC
 * vector extensions, an AVX2 clone chosen where the program loads): every
 * lane is the sequential scan of its own channel, the same IEEE operations
 * in the same order, so the sums are bit for bit those of a channel at a
 * time; only the divisions, which bound the scan, run four at once. No FMA
 * contraction in ISO C mode, in either clone. */
enum { LANES = 4 };
typedef float qc_v4f __attribute__((vector_size(16)));
typedef int32_t qc_v4i __attribute__((vector_size(16)));
typedef double qc_v4d __attribute__((vector_size(32)));

/* nearbyint in the default rounding mode for |y| < 2^52: adding and taking
 * back 1.5 * 2^52 rounds to nearest, ties to even, as nearbyint does,
 * without its libm call per value (x86-64 has no inline rounding
 * instruction before SSE4.1) */
static inline double round_even_d(double y)
{
	return (y + 0x1.8p52) - 0x1.8p52;
}

/* element i of LANES channels, rows inner apart */
static inline qc_v4f lanes_at(const float *p, int64_t inner, int64_t i)
{
	return (qc_v4f){p[i], p[inner + i], p[2 * inner + i], p[3 * inner + i]};
}

/* give back the mapped source up to element end (see weight_ranges) */
static inline void drop_to(const FloatView *fv, int64_t *dropped, int64_t end)
{
	if (end - *dropped >= DROP) {
		qc_float_drop(fv, *dropped, end);
		*dropped = end;
	}
}

/* mx[c] = max(mx[c], |x|) over channel c of [outer, ch, inner] (NaNs
 * passed over: a comparison with NaN is false) */
QC_CLONES static void sqnr_absmax(const FloatView *fv, int64_t outer, int64_t ch, int64_t inner, float *mx)
{
	const float *x = fv->x;
	int64_t dropped = 0;
	const qc_v4i nosign = {0x7fffffff, 0x7fffffff, 0x7fffffff, 0x7fffffff};
	for (int64_t o = 0; o < outer; o++) {
		int64_t c = 0;
		for (; c + LANES <= ch; c += LANES) {
			const float *p = x + (o * ch + c) * inner;
			qc_v4f m;
			memcpy(&m, mx + c, sizeof m);
			for (int64_t i = 0; i < inner; i++) {
				qc_v4f a = (qc_v4f)((qc_v4i)lanes_at(p, inner, i) & nosign);
				qc_v4i gt = a > m;
				m = (qc_v4f)((gt & (qc_v4i)a) | (~gt & (qc_v4i)m));
			}
			memcpy(mx + c, &m, sizeof m);
			drop_to(fv, &dropped, (o * ch + c + LANES) * inner);
		}
		for (; c < ch; c++) {
			const float *p = x + (o * ch + c) * inner;
			float m = mx[c];
			for (int64_t i = 0; i < inner; i++) {
				float a = fabsf(p[i]);
				m = a > m ? a : m;
			}
			mx[c] = m;
			drop_to(fv, &dropped, (o * ch + c + 1) * inner);
		}
	}
}

/* per channel: sig[c] += v * v, et[c] and ec[c] += the squared rounding
 * error of v with the scale st for all, sc[c] for the channel */
QC_CLONES static void sqnr_sums(const FloatView *fv, int64_t outer, int64_t ch, int64_t inner, double st,
				const double *sc, double *sig, double *et, double *ec)
{
	const float *x = fv->x;
	int64_t dropped = 0;
	const qc_v4d k = {0x1.8p52, 0x1.8p52, 0x1.8p52, 0x1.8p52}, vst = {st, st, st, st};
	for (int64_t o = 0; o < outer; o++) {
		int64_t c = 0;
		for (; c + LANES <= ch; c += LANES) {
			const float *p = x + (o * ch + c) * inner;
			qc_v4d vsc, g, a, b;
			memcpy(&vsc, sc + c, sizeof vsc);
			memcpy(&g, sig + c, sizeof g);
			memcpy(&a, et + c, sizeof a);
			memcpy(&b, ec + c, sizeof b);
			for (int64_t i = 0; i < inner; i++) {
				qc_v4d v = __builtin_convertvector(lanes_at(p, inner, i), qc_v4d);
				qc_v4d dt = v - ((v / vst + k) - k) * vst, dc = v - ((v / vsc + k) - k) * vsc;
				g += v * v;
				a += dt * dt;
				b += dc * dc;
			}
			memcpy(sig + c, &g, sizeof g);
			memcpy(et + c, &a, sizeof a);
			memcpy(ec + c, &b, sizeof b);
			drop_to(fv, &dropped, (o * ch + c + LANES) * inner);
		}
		for (; c < ch; c++) {
			const float *p = x + (o * ch + c) * inner;
			/* the sums in registers (through sig, et and ec, which may
			 * alias, each step was a store and a load) */
			double s = sc[c], g = sig[c], a = et[c], b = ec[c];
			for (int64_t i = 0; i < inner; i++) {
				/* |v / s| <= 127: s is 1/127 of a maximum of |v| */
				double v = p[i], dt = v - round_even_d(v / st) * st, dc = v - round_even_d(v / s) * s;
				g += v * v;
				a += dt * dt;
				b += dc * dc;
			}
			sig[c] = g;
			et[c] = a;
			ec[c] = b;
			drop_to(fv, &dropped, (o * ch + c + 1) * inner);
		}
	}
}

/* the mean over channels of 10 log10(sig / err), 999 for no error */
static double mean_db(const double *sig, const double *err, int64_t ch)
{
	double sum = 0;
	int64_t n = 0;
	for (int64_t c = 0; c < ch; c++)
		if (sig[c] > 0) {
			sum += err[c] > 0 ? 10 * log10(sig[c] / err[c]) : 999;
			n++;
		}
	return n ? sum / (double)n : 999;
}

/* The mean over output channels of each channel's SQNR in dB, w's values
 * rounded to 255 symmetric levels with one scale for all (*tensor_db) and
 * with one per channel (its maximum magnitude; *channel_db); channels
 * along the middle dimension of [outer, ch, inner]. Per channel, not over
 * the whole weight: one scale for channels 1000x apart leaves the big
 * ones' energy, and so the whole weight's SQNR, nearly intact while the
 * small ones round to a few levels, and each channel is a feature of its
 * own downstream (silero-vad's re-parameterized convolutions: 2.5-28 dB
 * per channel with one scale, its speech decisions then wrong in 69% of
 * chunks). Both from one read of the weight: the signal sums are the
 * same for both. Mapped pages go back to the file every DROP values read
 * (as weight_ranges): a 1 GiB weight is never all resident. */
static void sym8_sqnr(const FloatView *fv, int64_t outer, int64_t ch, int64_t inner, double *tensor_db,
		      double *channel_db)
{
	float all = 0;
	float *mx = xcalloc((size_t)ch, sizeof *mx);
	double *sc = xcalloc((size_t)ch, sizeof *sc), *sig = xcalloc((size_t)ch, sizeof *sig);
	double *et = xcalloc((size_t)ch, sizeof *et), *ec = xcalloc((size_t)ch, sizeof *ec);
	sqnr_absmax(fv, outer, ch, inner, mx);
	for (int64_t c = 0; c < ch; c++) {
		all = fmaxf(all, mx[c]);
		sc[c] = mx[c] > 0 ? (double)mx[c] / 127 : 1;
	}
	sqnr_sums(fv, outer, ch, inner, all > 0 ? (double)all / 127 : 1, sc, sig, et, ec);
	*tensor_db = mean_db(sig, et, ch);
	*channel_db = mean_db(sig, ec, ch);
	free(mx);
	free(sc);
	free(sig);
	free(et);
	free(ec);
}

int qc_per_channel(Model *m, const QuantOpts *o, QuantReport *rep, const Onnx__TensorProto *w, int axis)
{
	if (o->per_channel != PC_AUTO)
		return o->per_channel == PC_ON && axis >= 0;
	if (axis < 0 || axis >= (int)w->n_dims || w->dims[axis] < 2)
		return 0;
	StrMapEnt *seen = rep && w->name ? strmap_find(&rep->auto_seen, w->name) : NULL;
	if (seen)
		return (int)seen->v.i - 1;
	FloatView v;
	if (qc_float_view(m, w, &v) < 0) {
		qc_float_done(&v);
		return -1;
	}
	int64_t outer = 1, inner = 1, ch = w->dims[axis];
	for (int k = 0; k < axis; k++)
		outer *= w->dims[k];
	for (size_t k = (size_t)axis + 1; k < w->n_dims; k++)
		inner *= w->dims[k];
	double t, c;
	sym8_sqnr(&v, outer, ch, inner, &t, &c);
	qc_float_done(&v);
	int pc = t < PC_AUTO_DB && c > t;
	if (rep) {
		StrBuf *sb = &rep->auto_pc;
		sb_printf(sb, "%s{\"weight\": ", sb->len ? ",\n    " : "");
		sb_json_str(sb, w->name);
		sb_printf(sb, ", \"per_tensor_db\": %.1f, \"per_channel_db\": %.1f, \"per_channel\": %s}", t, c,
			  pc ? "true" : "false");
		rep->nauto_pc += (size_t)pc;
		if (w->name) {
			StrMapEnt *e = strmap_add(&rep->auto_seen, w->name, NULL);
			strmap_own_key(e);
			e->v.i = 1 + pc;
		}
	}
	return pc;
}

void qc_report_tensor(QuantReport *rep, const char *name, int dtype, int64_t n, const float *scales,
		      const int32_t *zps, int axis)
{
	StrBuf *sb = &rep->tensors;
	if (sb->len)
		sb_puts(sb, ",\n    ");
	sb_json_str(sb, name);
	sb_puts(sb, ": {\"type\": ");
	sb_json_str(sb, dtype_name(dtype));
	if (axis >= 0)
		sb_printf(sb, ", \"axis\": %d", axis);
	sb_puts(sb, ", \"scale\": ");
	if (axis >= 0)
		sb_putc(sb, '[');
	for (int64_t i = 0; i < n; i++)
		sb_printf(sb, "%s%.9g", i ? ", " : "", scales[i]);
	if (axis >= 0)
		sb_puts(sb, "]");
	sb_puts(sb, ", \"zero_point\": ");
	if (axis >= 0)
		sb_putc(sb, '[');
	for (int64_t i = 0; i < n; i++)
		sb_printf(sb, "%s%d", i ? ", " : "", (int)zps[i]);
	if (axis >= 0)
		sb_puts(sb, "]");
	sb_putc(sb, '}');
}

void qc_report_extra(QuantReport *rep, const char *members)
{
	StrBuf *sb = &rep->tensors;
	if (!members || !*members || !sb->len || sb->buf[sb->len - 1] != '}')
		return;
	sb->len--; /* reopen the entry */
	sb_puts(sb, ", ");
	sb_puts(sb, members);
	sb_putc(sb, '}');
}

void qc_report_float(QuantReport *rep, const char *name, const char *members)
{
	StrBuf *sb = &rep->tensors;
	if (sb->len)
		sb_puts(sb, ",\n    ");
	sb_json_str(sb, name);
	sb_puts(sb, ": {\"type\": \"float\", ");
	sb_puts(sb, members);
	sb_putc(sb, '}');
}

void qc_report_names(QuantReport *rep, const char *q, const char *s, const char *z, const char *dq)
{
	StrBuf *sb = &rep->tensors;
	const char *key[] = {"quantized", "scale", "zero_point", "dequantized"}, *val[] = {q, s, z, dq};
	if (!sb->len || sb->buf[sb->len - 1] != '}')
		return;
	sb->len--; /* reopen the entry */
	sb_puts(sb, ", \"names\": {");
	for (int i = 0, k = 0; i < 4; i++)
		if (val[i]) {
			sb_printf(sb, "%s\"%s\": ", k++ ? ", " : "", key[i]);
			sb_json_str(sb, val[i]);
		}
	sb_puts(sb, "}}");
}

void quant_report_free(QuantReport *rep)
{
	sb_release(&rep->nodes);
	sb_release(&rep->tensors);
	sb_release(&rep->auto_pc);
	strmap_free_keys(&rep->auto_seen);
}

void qc_report_skipped(QuantReport *rep, const Onnx__GraphProto *g, const char *scope, const char *why)
{
	for (size_t i = 0; i < g->n_node; i++) {
		const Onnx__NodeProto *n = g->node[i];
		qc_report_node_in(rep, scope, n, "skipped", why);
		for (size_t a = 0; a < n->n_attribute; a++)
			if (n->attribute[a]->g) {
				char *sub = qg_scope(scope, n, n->attribute[a]);
				qc_report_skipped(rep, n->attribute[a]->g, sub, why);
				free(sub);
			}
	}
}

int qc_body_ran(const CalibStats *s, const Onnx__GraphProto *g)
{
	for (size_t i = 0; i < g->n_input; i++)
		if (g->input[i]->name && calib_find(s, g->input[i]->name))
			return 1;
	for (size_t i = 0; i < g->n_node; i++)
		for (size_t k = 0; k < g->node[i]->n_output; k++)
			if (calib_find(s, g->node[i]->output[k]))
				return 1;
	return 0;
}

/* Constant nodes holding a float tensor become initializers of their graph
 * (as preprocess's fold pass does): the rewrites find weights among
 * initializers, and exporters that write weights as Constant nodes
 * (silero-vad does, inside its If branches) would otherwise leave every
 * weight in float. Exact; IR 3 models (initializers must also be inputs) and
 * constants that are graph outputs are left as they are. */
static void hoist_constants(Onnx__GraphProto *g)
{
	size_t w = 0;
	for (size_t i = 0; i < g->n_node; i++) {
		Onnx__NodeProto *nd = g->node[i];
		for (size_t a = 0; a < nd->n_attribute; a++)
			if (nd->attribute[a]->g)
				hoist_constants(nd->attribute[a]->g);
		Onnx__TensorProto *t = NULL;
		if (!strcmp(nd->op_type, "Constant") && (!nd->domain || !*nd->domain) && nd->n_output == 1 &&
		    nd->n_attribute == 1 && !strcmp(nd->attribute[0]->name, "value") && nd->attribute[0]->t &&
		    nd->attribute[0]->t->data_type == DT_FLOAT && !qg_is_output(g, nd->output[0]) &&
		    !qg_init(g, nd->output[0]))
			t = nd->attribute[0]->t;
		if (!t) {
			g->node[w++] = nd;
			continue;
		}
		nd->attribute[0]->t = NULL;
		if (t->name && t->name != protobuf_c_empty_string)
			free(t->name);
		t->name = xstrdup(nd->output[0]);
		g->initializer = xreallocarray(g->initializer, g->n_initializer + 1, sizeof *g->initializer);
		g->initializer[g->n_initializer++] = t;
		onnx__node_proto__free_unpacked(nd, NULL);
	}
	g->n_node = w;
}

/* 1 when every opset function f imports is the model's (or one the model
 * does not import, which is then added to the model's imports) */
static int same_opsets(Onnx__ModelProto *mp, const Onnx__FunctionProto *f, int add)
{
	for (size_t i = 0; i < f->n_opset_import; i++) {
		const Onnx__OperatorSetIdProto *op = f->opset_import[i];
		const char *d = op->domain && strcmp(op->domain, "ai.onnx") ? op->domain : "";
		int64_t v = model_opset(mp, d);
		if (v > 0 && v != op->version)
			return 0;
		if (v <= 0 && add) {
			Onnx__OperatorSetIdProto *n = xmalloc(sizeof *n);
			onnx__operator_set_id_proto__init(n);
			n->domain = xstrdup(d);
			n->has_version = 1;
			n->version = op->version;
			mp->opset_import = xreallocarray(mp->opset_import, mp->n_opset_import + 1,
							 sizeof *mp->opset_import);
			mp->opset_import[mp->n_opset_import++] = n;
		}
	}
	return 1;
}

/* see quantize.h */
int quant_expand_functions(Model *m)
{
	Onnx__ModelProto *mp = m->proto;
	if (!mp->graph || !mp->n_functions)
		return 0;
	for (size_t i = 0; i < mp->n_functions; i++)
		if (!same_opsets(mp, mp->functions[i], 0))
			return 0;
	Inlined *in;
	if (inline_functions(mp, &in) < 0)
		return error_prefix("expanding model-local functions");
	if (!in)
		return 0;
	/* a deep copy: the expansion borrows the model's protos */
	const Onnx__GraphProto *g = inlined_graph(in);
	size_t len = onnx__graph_proto__get_packed_size(g);
	uint8_t *buf = xmalloc(len ? len : 1);
	onnx__graph_proto__pack(g, buf);
	Onnx__GraphProto *ng = onnx__graph_proto__unpack(NULL, len, buf);
	free(buf);
	inlined_free(in);
	if (!ng)
		return error("expanding model-local functions: the expanded graph does not encode");
	for (size_t i = 0; i < mp->n_functions; i++)
		(void)same_opsets(mp, mp->functions[i], 1);
	onnx__graph_proto__free_unpacked(mp->graph, NULL);
	mp->graph = ng;
	for (size_t i = 0; i < mp->n_functions; i++)
		onnx__function_proto__free_unpacked(mp->functions[i], NULL);
	free(mp->functions);
	mp->functions = NULL;
	mp->n_functions = 0;
	/* the new tensors need types for the rewrites */
	if (infer_model(m, NULL, NULL) < 0)
		return error_prefix("typing the graph after expanding model-local functions");
	return 1;
}

int quant_model(Model *m, const CalibStats *stats, const QuantOpts *o, QuantReport *rep)
{
	if (quant_expand_functions(m) < 0)
		return -1;
	if (o->mode != QMODE_FP16 && m->proto->graph && m->proto->ir_version >= 4)
		hoist_constants(m->proto->graph);
	switch (o->mode) {
	case QMODE_DYNAMIC:
		return quant_dynamic(m, o, rep);
	case QMODE_FP16:
		return quant_fp16(m, o, rep);
	case QMODE_WEIGHT_ONLY:
		return quant_weight_only(m, o, rep);
	default:
		return o->format == QFMT_QOPERATOR ? quant_static_qoperator(m, stats, o, rep)
						    : quant_static_qdq(m, stats, o, rep);
	}
}
