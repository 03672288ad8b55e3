/* common.c — registry lookup and helpers shared by operators (see op.h). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/op.h"
#include "util.h"

int op_error(const Onnx__NodeProto *n, const char *fmt, ...)
{
	char lb[256], msg[1536];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	return error("node '%s' (%s): %s", node_label(n, lb, sizeof lb),
		     n->op_type ? n->op_type : "?", msg);
}

static int domain_cmp(const char *a, const char *b)
{
	if (!a || !strcmp(a, "ai.onnx"))
		a = "";
	if (!b || !strcmp(b, "ai.onnx"))
		b = "";
	return strcmp(a, b);
}

const OpDef *ops_find(const char *domain, const char *name, int64_t opset)
{
	/* binary search for the first entry with (domain, name) */
	size_t lo = 0, hi = op_registry_len;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		const OpDef *d = op_registry[mid];
		int c = domain_cmp(d->domain, domain);
		if (c == 0)
			c = strcmp(d->name, name);
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	const OpDef *best = NULL;
	for (size_t i = lo; i < op_registry_len; i++) {
		const OpDef *d = op_registry[i];
		if (domain_cmp(d->domain, domain) || strcmp(d->name, name))
			break;
		if (d->since <= opset)
			best = d;
	}
	return best;
}

void vt_clear(ValueType *t)
{
	if (t->inner) {
		vt_clear(t->inner);
		free(t->inner);
	}
	if (t->value) {
		tensor_free(t->value);
		free(t->value);
	}
	free(t->symval);
	memset(t, 0, sizeof *t);
	t->rank = -1;
}

int vt_copy(ValueType *dst, const ValueType *src)
{
	if (dst == src)
		return 0;
	vt_clear(dst);
	*dst = *src;
	dst->inner = NULL;
	dst->value = NULL;
	dst->symval = NULL;
	if (src->inner) {
		dst->inner = xcalloc(1, sizeof *dst->inner);
		dst->inner->rank = -1;
		if (vt_copy(dst->inner, src->inner) < 0)
			return -1;
	}
	if (src->value) {
		dst->value = xcalloc(1, sizeof *dst->value);
		if (tensor_copy(dst->value, src->value) < 0)
			return -1;
	}
	if (src->symval) {
		dst->symval = xmalloc(sizeof(Dim) * (size_t)(src->nsymval ? src->nsymval : 1));
		memcpy(dst->symval, src->symval, sizeof(Dim) * (size_t)src->nsymval);
	}
	return 0;
}

void vt_set_tensor(ValueType *t, int elem, int rank)
{
	t->kind = VT_TENSOR;
	t->elem = elem;
	t->rank = rank;
	for (int i = 0; i < rank && i < QM_MAX_RANK; i++) {
		t->dims[i].v = -1;
		t->dims[i].sym = NULL;
	}
}

int dim_eq(Dim a, Dim b)
{
	if (a.v >= 0 || b.v >= 0)
		return a.v == b.v;
	return a.sym && a.sym == b.sym;
}

int broadcast_dims(const Onnx__NodeProto *n, const ValueType *a, const ValueType *b, ValueType *out)
{
	if (a->rank < 0 || b->rank < 0) {
		out->rank = -1;
		return 0;
	}
	int r = a->rank > b->rank ? a->rank : b->rank;
	out->rank = r;
	for (int i = 0; i < r; i++) {
		int ia = i - (r - a->rank), ib = i - (r - b->rank);
		Dim da = ia >= 0 ? a->dims[ia] : (Dim){1, NULL};
		Dim db = ib >= 0 ? b->dims[ib] : (Dim){1, NULL};
		Dim d;
		if (da.v == 1)
			d = db;
		else if (db.v == 1)
			d = da;
		else if (da.v >= 0 && db.v >= 0) {
			if (da.v != db.v)
				return op_error(n, "cannot broadcast dimension %d: %lld vs %lld", i,
						(long long)da.v, (long long)db.v);
			d = da;
		} else if (da.v >= 0)
			d = da; /* a symbol broadcast against n > 1 must be n */
		else if (db.v >= 0)
			d = db;
		else if (dim_eq(da, db))
			d = da;
		else
			d = (Dim){-1, NULL};
		out->dims[i] = d;
	}
	return 0;
}

int norm_axis(const Onnx__NodeProto *n, int64_t axis, int rank, int64_t *out)
{
	if (axis < -rank || axis >= rank)
		return op_error(n, "axis %lld is out of range for rank %d", (long long)axis, rank);
	*out = axis < 0 ? axis + rank : axis;
	return 0;
}

int infer_same_as_input(InferCtx *c, size_t out, size_t in)
{
	if (in >= c->nin || !c->in[in] || out >= c->nout)
		return op_error(c->node, "missing input %zu", in);
	const ValueType *s = c->in[in];
	ValueType *d = c->out[out];
	vt_set_tensor(d, s->elem, s->rank);
	for (int i = 0; i < s->rank; i++)
		d->dims[i] = s->dims[i];
	return 0;
}

int infer_need(InferCtx *c, size_t i)
{
	if (i >= c->nin || !c->in[i])
		return op_error(c->node, "missing input %zu", i);
	return 0;
}

int run_need(RunCtx *c, size_t i)
{
	if (i >= c->nin || !c->in[i])
		return op_error(c->node, "missing input %zu", i);
	return 0;
}
