/* tensor.c — dense tensors (see tensor.h). */
#include "onnx/tensor.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

int64_t shape_numel(int rank, const int64_t *dims)
{
	int64_t n = 1;
	for (int i = 0; i < rank; i++) {
		if (dims[i] < 0 || (dims[i] && n > INT64_MAX / dims[i]))
			return -1;
		n *= dims[i];
	}
	return n;
}

const char *shape_str(int rank, const int64_t *dims, char *buf, size_t n)
{
	size_t o = 0;
	o += (size_t)snprintf(buf + o, n > o ? n - o : 0, "[");
	for (int i = 0; i < rank && o < n; i++)
		o += (size_t)snprintf(buf + o, n - o, i ? ",%lld" : "%lld", (long long)dims[i]);
	if (o < n)
		snprintf(buf + o, n - o, "]");
	return buf;
}

static void free_items(Tensor *t);

static int set_shape(Tensor *t, int dtype, int rank, const int64_t *dims)
{
	if (rank < 0 || rank > QM_MAX_RANK)
		return error("tensor rank %d exceeds the supported maximum %d", rank, QM_MAX_RANK);
	int64_t n = shape_numel(rank, dims);
	if (n < 0)
		return error("invalid tensor shape (negative or overflowing dimension)");
	if (dtype_bits(dtype) == 0 && dtype != DT_STRING)
		return error("tensors of type %s are not supported", dtype_name(dtype));
	if (dtype == DT_STRING && n >= INT64_MAX / 8 - 1)
		return error("invalid tensor shape (too many strings)");
	t->dtype = dtype;
	t->rank = rank;
	if (rank)
		memcpy(t->dims, dims, (size_t)rank * sizeof *dims);
	t->numel = n;
	/* strings: the offsets of numel empty strings */
	t->nbytes = dtype == DT_STRING ? (size_t)(n + 1) * 8 : dtype_nbytes(dtype, n);
	return 0;
}

int tensor_alloc(Tensor *t, int dtype, int rank, const int64_t *dims)
{
	free_items(t);
	if (t->owned)
		free(t->data);
	t->data = NULL;
	t->owned = 0;
	if (set_shape(t, dtype, rank, dims) < 0)
		return -1;
	t->data = xcalloc(t->nbytes ? t->nbytes : 1, 1);
	t->owned = 1;
	return 0;
}

int tensor_borrow(Tensor *t, int dtype, int rank, const int64_t *dims, void *data)
{
	free_items(t);
	if (dtype == DT_STRING) /* its size is known only once filled */
		return error("string tensors are built with tensor_set_strings()");
	if (t->owned)
		free(t->data);
	t->data = NULL;
	t->owned = 0;
	if (set_shape(t, dtype, rank, dims) < 0)
		return -1;
	t->data = data;
	return 0;
}

static void free_items(Tensor *t)
{
	for (int64_t i = 0; i < t->nitems; i++)
		tensor_free(&t->items[i]);
	free(t->items);
	t->items = NULL;
	t->nitems = 0;
	t->kind = TK_TENSOR;
}

void tensor_free(Tensor *t)
{
	if (t->owned)
		free(t->data);
	free_items(t);
	free(t->name);
	memset(t, 0, sizeof *t);
}

void tensor_container(Tensor *t, int kind, int elem)
{
	char *name = t->name;
	t->name = NULL;
	tensor_free(t);
	t->name = name;
	t->kind = kind;
	t->dtype = elem;
	t->owned = 1; /* nothing to borrow: the interpreter may move it */
}

int tensor_append(Tensor *t, const Tensor *v)
{
	if (t->kind == TK_OPTIONAL && t->nitems)
		return error("an optional holds one value at most");
	Tensor c = {0};
	if (tensor_copy(&c, v) < 0)
		return -1;
	free(c.name);
	c.name = NULL;
	t->items = xreallocarray(t->items, (size_t)t->nitems + 1, sizeof *t->items);
	t->items[t->nitems++] = c;
	if (!t->dtype)
		t->dtype = v->dtype;
	return 0;
}

const char *tensor_str(const Tensor *t, int64_t i, size_t *len)
{
	const uint8_t *d = t->data;
	uint64_t a, b;
	memcpy(&a, d + 8 * i, 8);
	memcpy(&b, d + 8 * (i + 1), 8);
	*len = (size_t)(b - a);
	return (const char *)d + 8 * (t->numel + 1) + a;
}

int tensor_set_strings(Tensor *t, int rank, const int64_t *dims, const char *const *s, const size_t *len)
{
	if (tensor_alloc(t, DT_STRING, rank, dims) < 0)
		return -1;
	size_t head = t->nbytes, total = 0;
	for (int64_t i = 0; i < t->numel; i++) {
		if (len[i] > SIZE_MAX / 2 - total - head)
			return error("string tensor too large");
		total += len[i];
	}
	uint8_t *d = xmalloc(head + total + 1);
	uint64_t off = 0;
	for (int64_t i = 0; i <= t->numel; i++) {
		memcpy(d + 8 * i, &off, 8);
		if (i < t->numel) {
			if (len[i])
				memcpy(d + head + off, s[i], len[i]);
			off += len[i];
		}
	}
	free(t->data);
	t->data = d;
	t->nbytes = head + total;
	return 0;
}

int tensor_strings_valid(const Tensor *t)
{
	if (t->dtype != DT_STRING || t->numel < 0 || !t->data || t->nbytes < (size_t)(t->numel + 1) * 8)
		return 0;
	uint64_t prev = 0, room = t->nbytes - (size_t)(t->numel + 1) * 8;
	for (int64_t i = 0; i <= t->numel; i++) {
		uint64_t o;
		memcpy(&o, (const uint8_t *)t->data + 8 * i, 8);
		if (o < prev || o > room || (i == 0 && o))
			return 0;
		prev = o;
	}
	return 1;
}

const char *tensor_kind_name(int kind)
{
	return kind == TK_SEQUENCE ? "sequence" : kind == TK_OPTIONAL ? "optional" : "tensor";
}

int tensor_copy(Tensor *dst, const Tensor *src)
{
	if (dst == src)
		return 0;
	if (src->kind != TK_TENSOR) {
		tensor_container(dst, src->kind, src->dtype);
		for (int64_t i = 0; i < src->nitems; i++)
			if (tensor_append(dst, &src->items[i]) < 0)
				return -1;
		dst->dtype = src->dtype;
		return 0;
	}
	if (tensor_alloc(dst, src->dtype, src->rank, src->dims) < 0)
		return -1;
	if (src->dtype == DT_STRING) { /* the block's size is its contents' */
		free(dst->data);
		dst->data = xmalloc(src->nbytes);
		dst->nbytes = src->nbytes;
	}
	if (src->nbytes)
		memcpy(dst->data, src->data, src->nbytes);
	return 0;
}

/* a string tensor's elements are the proto's string_data entries */
static int strings_from_proto(const Onnx__TensorProto *p, Tensor *t)
{
	const char *nm = p->name ? p->name : "";
	memset(t, 0, sizeof *t);
	int64_t n = shape_numel((int)p->n_dims, p->dims);
	if (n < 0 || (uint64_t)n != p->n_string_data)
		return error("tensor '%s': its dims need %lld strings, it holds %zu", nm, (long long)n,
			     p->n_string_data);
	if (p->has_data_location && p->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL)
		return error("tensor '%s': string tensors cannot have external data", nm);
	const char **s = xcalloc(n ? (size_t)n : 1, sizeof *s);
	size_t *len = xcalloc(n ? (size_t)n : 1, sizeof *len);
	for (int64_t i = 0; i < n; i++) {
		s[i] = (const char *)p->string_data[i].data;
		len[i] = p->string_data[i].len;
	}
	int r = tensor_set_strings(t, (int)p->n_dims, p->dims, s, len);
	free(s);
	free(len);
	if (r < 0)
		return error_prefix("tensor '%s'", nm);
	if (p->name)
		t->name = xstrdup(p->name);
	return 0;
}

int tensor_from_proto(Model *m, const Onnx__TensorProto *p, Tensor *t)
{
	const void *data;
	size_t len;
	int owned;
	if ((int)p->n_dims > QM_MAX_RANK)
		return error("tensor '%s': rank %zu exceeds the supported maximum %d",
			     p->name ? p->name : "", p->n_dims, QM_MAX_RANK);
	if (p->has_data_type && p->data_type == DT_STRING)
		return strings_from_proto(p, t);
	if (model_tensor_bytes(m, p, &data, &len, &owned) < 0)
		return -1;
	memset(t, 0, sizeof *t);
	int r = tensor_alloc(t, p->data_type, (int)p->n_dims, p->dims);
	if (r == 0 && len)
		memcpy(t->data, data, len);
	if (owned)
		free((void *)data);
	if (r == 0 && p->name)
		t->name = xstrdup(p->name);
	return r;
}

Onnx__TensorProto *tensor_to_proto(const Tensor *t, const char *name)
{
	Onnx__TensorProto *p = xmalloc(sizeof *p);
	onnx__tensor_proto__init(p);
	p->name = xstrdup(name ? name : (t->name ? t->name : ""));
	p->has_data_type = 1;
	p->data_type = t->dtype;
	p->n_dims = (size_t)t->rank;
	p->dims = xmalloc(sizeof(int64_t) * (size_t)(t->rank ? t->rank : 1));
	if (t->rank)
		memcpy(p->dims, t->dims, sizeof(int64_t) * (size_t)t->rank);
	if (t->dtype == DT_STRING) {
		p->n_string_data = (size_t)t->numel;
		p->string_data = xcalloc(t->numel ? (size_t)t->numel : 1, sizeof *p->string_data);
		for (int64_t i = 0; i < t->numel; i++) {
			size_t len;
			const char *e = tensor_str(t, i, &len);
			p->string_data[i].len = len;
			p->string_data[i].data = xmalloc(len ? len : 1);
			if (len)
				memcpy(p->string_data[i].data, e, len);
		}
		return p;
	}
	p->has_raw_data = 1;
	p->raw_data.len = t->nbytes;
	p->raw_data.data = xmalloc(t->nbytes ? t->nbytes : 1);
	if (t->nbytes)
		memcpy(p->raw_data.data, t->data, t->nbytes);
	return p;
}

float half_to_float(uint16_t h)
{
	uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff, u;
	if (exp == 0) {
		if (man == 0) {
			u = sign;
		} else {
			int e = -1;
			do {
				e++;
				man <<= 1;
			} while (!(man & 0x400));
			u = sign | (uint32_t)(127 - 15 - e) << 23 | (man & 0x3ff) << 13;
		}
	} else if (exp == 31) {
		u = sign | 0x7f800000u | man << 13;
	} else {
		u = sign | (exp + 127 - 15) << 23 | man << 13;
	}
	float f;
	memcpy(&f, &u, 4);
	return f;
}

uint16_t float_to_half(float f)
{
	uint32_t u;
	memcpy(&u, &f, 4);
	uint16_t sign = (uint16_t)((u >> 16) & 0x8000);
	uint32_t exp = (u >> 23) & 0xff, man = u & 0x7fffff;
	if (exp == 0xff)
		return sign | 0x7c00 | (man ? 0x200 : 0);
	int e = (int)exp - 127 + 15;
	if (e >= 31)
		return sign | 0x7c00;
	if (e <= 0) {
		if (e < -10)
			return sign;
		man |= 0x800000;
		int shift = 14 - e;
		uint32_t half = man >> shift, rem = man & ((1u << shift) - 1), mid = 1u << (shift - 1);
		if (rem > mid || (rem == mid && (half & 1)))
			half++;
		return sign | (uint16_t)half;
	}
	uint32_t half = (uint32_t)e << 10 | man >> 13, rem = man & 0x1fff;
	if (rem > 0x1000 || (rem == 0x1000 && (half & 1)))
		half++;
	return sign | (uint16_t)half;
}

float bf16_to_float(uint16_t h)
{
	uint32_t u = (uint32_t)h << 16;
	float f;
	memcpy(&f, &u, 4);
	return f;
}

uint16_t float_to_bf16(float f)
{
	uint32_t u;
	memcpy(&u, &f, 4);
	if (isnan(f))
		return (uint16_t)((u >> 16) | 0x40);
	u += 0x7fff + ((u >> 16) & 1);
	return (uint16_t)(u >> 16);
}

double tensor_get_f64(const Tensor *t, int64_t i)
{
	const uint8_t *d = t->data;
	switch (t->dtype) {
	case DT_FLOAT: { float v; memcpy(&v, d + 4 * i, 4); return v; }
	case DT_DOUBLE: { double v; memcpy(&v, d + 8 * i, 8); return v; }
	case DT_FLOAT16: { uint16_t v; memcpy(&v, d + 2 * i, 2); return half_to_float(v); }
	case DT_BFLOAT16: { uint16_t v; memcpy(&v, d + 2 * i, 2); return bf16_to_float(v); }
	default: return (double)tensor_get_i64(t, i);
	}
}

int64_t tensor_get_i64(const Tensor *t, int64_t i)
{
	const uint8_t *d = t->data;
	switch (t->dtype) {
	case DT_INT64: { int64_t v; memcpy(&v, d + 8 * i, 8); return v; }
	case DT_INT32: { int32_t v; memcpy(&v, d + 4 * i, 4); return v; }
	case DT_INT16: { int16_t v; memcpy(&v, d + 2 * i, 2); return v; }
	case DT_UINT16: { uint16_t v; memcpy(&v, d + 2 * i, 2); return v; }
	case DT_UINT32: { uint32_t v; memcpy(&v, d + 4 * i, 4); return v; }
	case DT_UINT64: { uint64_t v; memcpy(&v, d + 8 * i, 8); return (int64_t)v; }
	case DT_INT8: return (int8_t)d[i];
	case DT_UINT8: case DT_BOOL: return d[i];
	case DT_FLOAT: case DT_DOUBLE: case DT_FLOAT16: case DT_BFLOAT16:
		return (int64_t)tensor_get_f64(t, i);
	default: return 0;
	}
}
