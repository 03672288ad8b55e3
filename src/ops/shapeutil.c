/* shapeutil.c — helpers of the shape, index and control operators (see shapeutil.h). */
#include "ops/shapeutil.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

int op_unsupported_type(const Onnx__NodeProto *n, int64_t opset, int dt)
{
	/* name the operator version in effect, as the registry knows it */
	const OpDef *d = n->op_type ? ops_find(n->domain, n->op_type, opset) : NULL;
	return op_error(n, "%s-%lld on %s is not supported", n->op_type ? n->op_type : "?",
			(long long)(d ? d->since : opset), dtype_name(dt));
}

int op_elemsize(const Onnx__NodeProto *n, int64_t opset, int dt, size_t *es)
{
	int bits = dtype_bits(dt);
	if (bits < 8 || bits % 8)
		return op_unsupported_type(n, opset, dt);
	*es = (size_t)bits / 8;
	return 0;
}

int op_tensor_ints(const Onnx__NodeProto *n, const Tensor *t, const char *what,
		   int64_t **v, int64_t *len)
{
	if (t->dtype != DT_INT64 && t->dtype != DT_INT32)
		return op_error(n, "%s must be int64 or int32, got %s", what, dtype_name(t->dtype));
	if (t->rank > 1)
		return op_error(n, "%s must be a scalar or 1-D tensor, got rank %d", what, t->rank);
	int64_t *r = xmalloc(sizeof *r * (size_t)(t->numel ? t->numel : 1));
	for (int64_t i = 0; i < t->numel; i++)
		r[i] = tensor_get_i64(t, i);
	*v = r;
	*len = t->numel;
	return 0;
}

static int dt_integer(int dt)
{
	switch (dt) {
	case DT_INT8: case DT_UINT8: case DT_INT16: case DT_UINT16: case DT_INT32:
	case DT_UINT32: case DT_INT64: case DT_UINT64:
		return 1;
	}
	return 0;
}

Dim *vt_get_symval(const ValueType *t, int64_t *n)
{
	if (!t)
		return NULL;
	if (t->symval) {
		Dim *d = xmalloc(sizeof *d * (size_t)(t->nsymval ? t->nsymval : 1));
		memcpy(d, t->symval, sizeof *d * (size_t)t->nsymval);
		*n = t->nsymval;
		return d;
	}
	const Tensor *v = t->value;
	if (!v || v->rank > 1 || !dt_integer(v->dtype))
		return NULL;
	Dim *d = xmalloc(sizeof *d * (size_t)(v->numel ? v->numel : 1));
	for (int64_t i = 0; i < v->numel; i++) {
		int64_t x = tensor_get_i64(v, i);
		/* negative entries (-1 in a Reshape target) stay literal values */
		d[i] = (Dim){x, NULL};
	}
	*n = v->numel;
	return d;
}

void vt_put_symval(ValueType *t, const Dim *d, int64_t n)
{
	free(t->symval);
	t->symval = xmalloc(sizeof *d * (size_t)(n ? n : 1));
	memcpy(t->symval, d, sizeof *d * (size_t)n);
	t->nsymval = n;
	int known = 1;
	for (int64_t i = 0; i < n; i++)
		if (d[i].v < 0 || d[i].sym)
			known = 0;
	int dt = t->elem;
	if (!known || t->value || (t->rank != 0 && t->rank != 1) || (t->rank == 0 && n != 1) ||
	    (dt != DT_INT64 && dt != DT_INT32))
		return;
	Tensor *v = xcalloc(1, sizeof *v);
	int64_t dims[1] = {n};
	if (tensor_alloc(v, dt, t->rank, dims) < 0) {
		free(v);
		return;
	}
	for (int64_t i = 0; i < n; i++)
		elem_put_i64(dt, v->data, i, d[i].v);
	t->value = v;
}

Dim dim_known(int64_t v)
{
	return (Dim){v, NULL};
}

Dim dims_product(const Dim *d, int n)
{
	int64_t p = 1;
	const char *sym = NULL;
	int nsym = 0, unknown = 0;
	for (int i = 0; i < n; i++) {
		if (d[i].v == 0)
			return dim_known(0);
		if (d[i].v > 0) {
			if (p > INT64_MAX / d[i].v)
				unknown = 1;
			else
				p *= d[i].v;
		} else if (d[i].sym) {
			sym = d[i].sym;
			nsym++;
		} else {
			unknown = 1;
		}
	}
	if (unknown || nsym > 1 || (nsym == 1 && p != 1))
		return (Dim){-1, NULL};
	if (nsym == 1)
		return (Dim){-1, sym};
	return dim_known(p);
}

Dim dim_add(Dim a, Dim b)
{
	if (a.v >= 0 && b.v >= 0)
		return dim_known(a.v + b.v);
	if (a.v == 0)
		return b;
	if (b.v == 0)
		return a;
	return (Dim){-1, NULL};
}

int vt_known_dims(const ValueType *t, int64_t *dims)
{
	if (!t || t->kind != VT_TENSOR || t->rank < 0)
		return 0;
	for (int i = 0; i < t->rank; i++) {
		if (t->dims[i].v < 0)
			return 0;
		dims[i] = t->dims[i].v;
	}
	return 1;
}

int dt_numeric(int dt)
{
	return dt_integer(dt) || dt_float(dt) || dt == DT_BOOL;
}

int dt_float(int dt)
{
	return dt == DT_FLOAT || dt == DT_DOUBLE || dt == DT_FLOAT16 || dt == DT_BFLOAT16;
}

double elem_get_f64(int dt, const void *base, int64_t i)
{
	const uint8_t *p = base;
	switch (dt) {
	case DT_FLOAT: { float v; memcpy(&v, p + 4 * i, 4); return v; }
	case DT_DOUBLE: { double v; memcpy(&v, p + 8 * i, 8); return v; }
	case DT_FLOAT16: { uint16_t v; memcpy(&v, p + 2 * i, 2); return half_to_float(v); }
	case DT_BFLOAT16: { uint16_t v; memcpy(&v, p + 2 * i, 2); return bf16_to_float(v); }
	case DT_UINT64: { uint64_t v; memcpy(&v, p + 8 * i, 8); return (double)v; }
	default: return (double)elem_get_i64(dt, base, i);
	}
}

int64_t elem_get_i64(int dt, const void *base, int64_t i)
{
	const uint8_t *p = base;
	switch (dt) {
	case DT_INT64: { int64_t v; memcpy(&v, p + 8 * i, 8); return v; }
	case DT_UINT64: { uint64_t v; memcpy(&v, p + 8 * i, 8); return (int64_t)v; }
	case DT_INT32: { int32_t v; memcpy(&v, p + 4 * i, 4); return v; }
	case DT_UINT32: { uint32_t v; memcpy(&v, p + 4 * i, 4); return v; }
	case DT_INT16: { int16_t v; memcpy(&v, p + 2 * i, 2); return v; }
	case DT_UINT16: { uint16_t v; memcpy(&v, p + 2 * i, 2); return v; }
	case DT_INT8: return (int8_t)p[i];
	case DT_UINT8: return p[i];
	case DT_BOOL: return p[i] != 0;
	case DT_FLOAT: case DT_DOUBLE: case DT_FLOAT16: case DT_BFLOAT16: {
		double d = elem_get_f64(dt, base, i);
		if (isnan(d))
			return 0;
		if (d >= 9.2e18)
			return INT64_MAX;
		if (d <= -9.2e18)
			return INT64_MIN;
		return (int64_t)d;
	}
	default: return 0;
	}
}

void elem_put_i64(int dt, void *base, int64_t i, int64_t v)
{
	uint8_t *p = base;
	switch (dt) {
	case DT_INT64: case DT_UINT64: memcpy(p + 8 * i, &v, 8); break;
	case DT_INT32: case DT_UINT32: { uint32_t x = (uint32_t)v; memcpy(p + 4 * i, &x, 4); break; }
	case DT_INT16: case DT_UINT16: { uint16_t x = (uint16_t)v; memcpy(p + 2 * i, &x, 2); break; }
	case DT_INT8: case DT_UINT8: p[i] = (uint8_t)v; break;
	case DT_BOOL: p[i] = v != 0; break;
	default: elem_put_f64(dt, base, i, (double)v); break;
	}
}

void elem_put_f64(int dt, void *base, int64_t i, double v)
{
	uint8_t *p = base;
	switch (dt) {
	case DT_FLOAT: { float x = (float)v; memcpy(p + 4 * i, &x, 4); break; }
	case DT_DOUBLE: memcpy(p + 8 * i, &v, 8); break;
	case DT_FLOAT16: { uint16_t x = float_to_half((float)v); memcpy(p + 2 * i, &x, 2); break; }
	case DT_BFLOAT16: { uint16_t x = float_to_bf16((float)v); memcpy(p + 2 * i, &x, 2); break; }
	case DT_BOOL: p[i] = v != 0; break;
	case DT_UINT64: { uint64_t x = v <= 0 ? 0 : (uint64_t)v; memcpy(p + 8 * i, &x, 8); break; }
	default: {
		int64_t x = 0;
		if (!isnan(v))
			x = v >= 9.2e18 ? INT64_MAX : v <= -9.2e18 ? INT64_MIN : (int64_t)v;
		elem_put_i64(dt, base, i, x);
		break;
	}
	}
}

int index_next(int64_t *idx, const int64_t *dims, int r)
{
	for (int k = r - 1; k >= 0; k--) {
		if (++idx[k] < dims[k])
			return k;
		idx[k] = 0;
	}
	return -1;
}

void dims_strides(int r, const int64_t *dims, int64_t *strides)
{
	int64_t s = 1;
	for (int k = r - 1; k >= 0; k--) {
		strides[k] = s;
		s *= dims[k];
	}
}

int64_t vt_seq_len(const ValueType *t)
{
	if (!t || t->kind != VT_SEQUENCE || t->rank != 1 || t->dims[0].v < 0 || t->dims[0].sym)
		return -1;
	return t->dims[0].v;
}

void vt_set_seq_len(ValueType *t, int64_t n)
{
	if (n < 0) {
		t->rank = -1;
		return;
	}
	t->rank = 1;
	t->dims[0] = dim_known(n);
}

static void strip_contents(ValueType *t)
{
	if (t->value) {
		tensor_free(t->value);
		free(t->value);
		t->value = NULL;
	}
	free(t->symval);
	t->symval = NULL;
	t->nsymval = 0;
	if (t->inner)
		strip_contents(t->inner);
}

static void join_into(ValueType *r, const ValueType *a, const ValueType *b)
{
	if (a->kind == VT_UNKNOWN || a->kind != b->kind)
		return;
	r->kind = a->kind;
	r->elem = a->elem == b->elem ? a->elem : 0;
	if (a->kind == VT_TENSOR || a->kind == VT_SPARSE) {
		r->rank = a->rank == b->rank ? a->rank : -1;
		for (int i = 0; i < r->rank; i++)
			r->dims[i] = dim_eq(a->dims[i], b->dims[i]) ? a->dims[i] : (Dim){-1, NULL};
		return;
	}
	int64_t la = vt_seq_len(a), lb = vt_seq_len(b);
	if (a->kind == VT_SEQUENCE)
		vt_set_seq_len(r, la == lb ? la : -1);
	if (!a->inner && !b->inner)
		return;
	r->inner = xcalloc(1, sizeof *r->inner);
	r->inner->rank = -1;
	const ValueType *only = NULL;
	if (a->kind == VT_SEQUENCE && la == 0)
		only = b->inner;
	else if (a->kind == VT_SEQUENCE && lb == 0)
		only = a->inner;
	if (only) {
		vt_copy(r->inner, only);
		strip_contents(r->inner);
	} else if (a->inner && b->inner) {
		join_into(r->inner, a->inner, b->inner);
	}
}

void vt_join(ValueType *out, const ValueType *a, const ValueType *b)
{
	ValueType r = {.rank = -1};
	join_into(&r, a, b);
	vt_clear(out);
	*out = r;
}

int vt_same(const ValueType *a, const ValueType *b)
{
	if (!a || !b)
		return a == b;
	if (a->kind != b->kind || a->elem != b->elem || a->rank != b->rank)
		return 0;
	for (int i = 0; i < a->rank; i++)
		if (!dim_eq(a->dims[i], b->dims[i]) && !(a->dims[i].v < 0 && !a->dims[i].sym &&
							  b->dims[i].v < 0 && !b->dims[i].sym))
			return 0;
	if (!a->inner || !b->inner)
		return !a->inner == !b->inner;
	return vt_same(a->inner, b->inner);
}
