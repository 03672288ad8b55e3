/* nn.c — helpers of the neural-network operators (see nn.h). */
#include "ops/nn.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops/par.h"
#include "ops/shapeutil.h"
#include "util.h"

int nn_is_float(int dt)
{
	return dt == DT_FLOAT || dt == DT_DOUBLE || dt == DT_FLOAT16 || dt == DT_BFLOAT16;
}

static void load_f32(int dt, const void *src, float *dst, int64_t n)
{
	const unsigned char *p = src;
	switch (dt) {
	case DT_FLOAT:
		memcpy(dst, src, (size_t)n * sizeof(float));
		break;
	case DT_DOUBLE:
		for (int64_t i = 0; i < n; i++) {
			double v;
			memcpy(&v, p + i * 8, 8);
			dst[i] = (float)v;
		}
		break;
	case DT_FLOAT16:
		for (int64_t i = 0; i < n; i++) {
			uint16_t v;
			memcpy(&v, p + i * 2, 2);
			dst[i] = half_to_float(v);
		}
		break;
	case DT_BFLOAT16:
		for (int64_t i = 0; i < n; i++) {
			uint16_t v;
			memcpy(&v, p + i * 2, 2);
			dst[i] = bf16_to_float(v);
		}
		break;
	default:
		for (int64_t i = 0; i < n; i++)
			dst[i] = (float)elem_get_f64(dt, src, i);
		break;
	}
}

void nn_f32_store(int dt, void *dst, const float *src, int64_t n)
{
	unsigned char *p = dst;
	switch (dt) {
	case DT_FLOAT:
		memcpy(dst, src, (size_t)n * sizeof(float));
		break;
	case DT_DOUBLE:
		for (int64_t i = 0; i < n; i++) {
			double v = src[i];
			memcpy(p + i * 8, &v, 8);
		}
		break;
	case DT_FLOAT16:
		for (int64_t i = 0; i < n; i++) {
			uint16_t v = float_to_half(src[i]);
			memcpy(p + i * 2, &v, 2);
		}
		break;
	case DT_BFLOAT16:
		for (int64_t i = 0; i < n; i++) {
			uint16_t v = float_to_bf16(src[i]);
			memcpy(p + i * 2, &v, 2);
		}
		break;
	default:
		for (int64_t i = 0; i < n; i++)
			elem_put_f64(dt, dst, i, src[i]);
		break;
	}
}

const float *nn_f32_in(RunCtx *c, const Tensor *t, float **tmp)
{
	*tmp = NULL;
	if (!nn_is_float(t->dtype)) {
		op_unsupported_type(c->node, c->opset, t->dtype);
		return NULL;
	}
	if (t->dtype == DT_FLOAT && ((uintptr_t)t->data % sizeof(float)) == 0)
		return t->data;
	*tmp = nn_f32_copy(t);
	return *tmp;
}

float *nn_f32_copy(const Tensor *t)
{
	float *r = xmalloc(sizeof(float) * (size_t)(t->numel ? t->numel : 1));
	load_f32(t->dtype, t->data, r, t->numel);
	return r;
}

float *nn_f32_out(RunCtx *c, size_t i, int dt, int rank, const int64_t *dims, float **tmp)
{
	*tmp = NULL;
	if (!nn_is_float(dt)) {
		op_unsupported_type(c->node, c->opset, dt);
		return NULL;
	}
	if (op_output(c, i, dt, rank, dims) < 0)
		return NULL;
	Tensor *o = c->out[i];
	if (dt == DT_FLOAT)
		return o->data;
	*tmp = xmalloc(sizeof(float) * (size_t)(o->numel ? o->numel : 1));
	return *tmp;
}

void nn_f32_done(Tensor *out, float *tmp)
{
	if (!tmp)
		return;
	nn_f32_store(out->dtype, out->data, tmp, out->numel);
	free(tmp);
}

int64_t nn_floordiv(int64_t a, int64_t b)
{
	int64_t q = a / b;
	if ((a % b != 0) && ((a < 0) != (b < 0)))
		q--;
	return q;
}

int64_t nn_ceildiv(int64_t a, int64_t b)
{
	return -nn_floordiv(-a, b);
}

static int get_ints(const Onnx__NodeProto *n, const char *name, int want, int64_t dflt,
		    int64_t *out)
{
	const int64_t *v;
	size_t len;
	if (attr_ints(n, name, &v, &len) < 0)
		return -1;
	if (!v) {
		for (int i = 0; i < want; i++)
			out[i] = dflt;
		return 0;
	}
	if ((int)len != want)
		return op_error(n, "attribute '%s' has %zu values, expected %d", name, len, want);
	memcpy(out, v, sizeof *out * (size_t)want);
	return 0;
}

int nn_geom(const Onnx__NodeProto *n, int nsp, const int64_t *in, const int64_t *kernel,
	    int pool, NnGeom *g)
{
	char ap[32];
	int64_t pads[2 * QM_MAX_RANK], ceil_mode = 0;
	if (nsp < 1 || nsp > QM_MAX_RANK - 2)
		return op_error(n, "expected 1 to %d spatial dimensions, got %d", QM_MAX_RANK - 2, nsp);
	memset(g, 0, sizeof *g);
	g->nsp = nsp;
	for (int i = 0; i < nsp; i++)
		g->in[i] = in[i];
	if (node_attr(n, "kernel_shape") || !kernel) {
		const int64_t *v;
		size_t len;
		if (attr_ints(n, "kernel_shape", &v, &len) < 0)
			return -1;
		if (!v)
			return op_error(n, "attribute 'kernel_shape' is required");
		if ((int)len != nsp)
			return op_error(n, "kernel_shape has %zu values for %d spatial dimensions", len, nsp);
		memcpy(g->k, v, sizeof *v * len);
	} else {
		memcpy(g->k, kernel, sizeof *kernel * (size_t)nsp);
	}
	if (get_ints(n, "strides", nsp, 1, g->s) < 0 || get_ints(n, "dilations", nsp, 1, g->d) < 0 ||
	    get_ints(n, "pads", 2 * nsp, 0, pads) < 0 || attr_str(n, "auto_pad", "NOTSET", ap, sizeof ap) < 0)
		return -1;
	if (pool && attr_int(n, "ceil_mode", 0, &ceil_mode) < 0)
		return -1;
	for (int i = 0; i < nsp; i++) {
		if (g->k[i] < 1 || g->s[i] < 1 || g->d[i] < 1)
			return op_error(n, "kernel_shape, strides and dilations must be positive");
		if (pads[i] < 0 || pads[i + nsp] < 0)
			return op_error(n, "pads must not be negative");
	}
	int same = !strcmp(ap, "SAME_UPPER") || !strcmp(ap, "SAME_LOWER");
	int valid = !strcmp(ap, "VALID");
	if (!same && !valid && strcmp(ap, "NOTSET"))
		return op_error(n, "unknown auto_pad '%s' (expected NOTSET, SAME_UPPER, SAME_LOWER or VALID)", ap);
	for (int i = 0; i < nsp; i++) {
		int64_t ek = (g->k[i] - 1) * g->d[i] + 1;
		if (same) {
			if (in[i] < 0) {
				g->out[i] = -1;
				continue;
			}
			g->out[i] = nn_ceildiv(in[i], g->s[i]);
			int64_t total = (g->out[i] - 1) * g->s[i] + ek - in[i];
			if (total < 0)
				total = 0;
			if (ap[5] == 'U') {
				g->pb[i] = total / 2;
				g->pe[i] = total - total / 2;
			} else {
				g->pe[i] = total / 2;
				g->pb[i] = total - total / 2;
			}
			continue;
		}
		if (!valid) {
			g->pb[i] = pads[i];
			g->pe[i] = pads[i + nsp];
		}
		if (in[i] < 0) {
			g->out[i] = -1;
			continue;
		}
		int64_t span = in[i] + g->pb[i] + g->pe[i] - ek;
		if (span < 0)
			return op_error(n, "kernel extent %lld exceeds padded input size %lld on spatial axis %d",
					(long long)ek, (long long)(in[i] + g->pb[i] + g->pe[i]), i);
		if (ceil_mode) {
			g->out[i] = nn_ceildiv(span, g->s[i]) + 1;
			/* the last window must start inside the input or left padding */
			if ((g->out[i] - 1) * g->s[i] >= in[i] + g->pb[i])
				g->out[i]--;
		} else {
			g->out[i] = span / g->s[i] + 1;
		}
	}
	return 0;
}

Dim nn_dim(InferCtx *c, int64_t v)
{
	if (v >= 0)
		return (Dim){v, NULL};
	return infer_fresh_dim(c);
}

const ValueType *nn_in(InferCtx *c, size_t i)
{
	if (i >= c->nin || !c->in[i]) {
		op_error(c->node, "input %zu is required", i);
		return NULL;
	}
	return c->in[i];
}

const Tensor *nn_value(InferCtx *c, size_t i)
{
	if (i >= c->nin || !c->in[i])
		return NULL;
	return c->in[i]->value;
}

/* nn_parallel's void fn run by par_run */
typedef struct VoidJob {
	void (*fn)(void *arg, int64_t lo, int64_t hi);
	void *arg;
} VoidJob;

static int void_call(void *p, int64_t lo, int64_t hi)
{
	const VoidJob *j = p;
	j->fn(j->arg, lo, hi);
	return 0;
}

void nn_parallel(int threads, int64_t n, void (*fn)(void *arg, int64_t lo, int64_t hi), void *arg)
{
	if (threads <= 1 || n <= 1) {
		if (n > 0)
			fn(arg, 0, n);
		return;
	}
	VoidJob j = {fn, arg};
	par_run(threads, n, void_call, &j);
}

float nn_round_even(float x)
{
	return nearbyintf(x);
}

int nn_int_range(int dt, double *lo, double *hi)
{
	switch (dt) {
	case DT_INT8: *lo = -128; *hi = 127; return 1;
	case DT_UINT8: *lo = 0; *hi = 255; return 1;
	case DT_INT16: *lo = -32768; *hi = 32767; return 1;
	case DT_UINT16: *lo = 0; *hi = 65535; return 1;
	case DT_INT32: *lo = -2147483648.0; *hi = 2147483647.0; return 1;
	case DT_UINT32: *lo = 0; *hi = 4294967295.0; return 1;
	case DT_INT64: *lo = -9223372036854775808.0; *hi = 9223372036854774784.0; return 1;
	case DT_UINT64: *lo = 0; *hi = 18446744073709549568.0; return 1;
	default: return 0;
	}
}

void nn_put_sat(int dt, void *base, int64_t i, double v)
{
	double lo, hi;
	if (!nn_int_range(dt, &lo, &hi)) {
		elem_put_f64(dt, base, i, v);
		return;
	}
	v = isnan(v) ? 0 : nearbyint(v);
	if (v < lo)
		v = lo;
	if (v > hi)
		v = hi;
	if (dt == DT_UINT64) {
		uint64_t x = (uint64_t)v;
		memcpy((char *)base + 8 * i, &x, 8);
	} else {
		elem_put_i64(dt, base, i, (int64_t)v);
	}
}

