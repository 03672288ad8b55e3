/* elem.c — input/output conversion for the elementwise kernels (see elem.h). */
#include "ops/elem.h"

#include <stdlib.h>
#include <string.h>

#include "ops/par.h"
#include "util.h"

int elem_is_half(int dt)
{
	return dt == DT_FLOAT16 || dt == DT_BFLOAT16;
}

int elem_native(int dt)
{
	return elem_is_half(dt) ? DT_FLOAT : dt;
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#include <immintrin.h>
#define HAVE_F16C_PATH 1

/* F16C and AVX, from CPUID leaf 1 (clang 14 knows no
 * __builtin_cpu_supports("f16c")), with the OS saving the AVX state */
static int have_f16c(void)
{
	static int known = -1;
	int k = __atomic_load_n(&known, __ATOMIC_RELAXED);
	if (k >= 0)
		return k;
	unsigned a, b, c, d;
	k = 0;
	if (__get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C) && (c & bit_AVX) && (c & bit_OSXSAVE)) {
		unsigned lo, hi;
		__asm__("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
		k = (lo & 6) == 6; /* XMM and YMM state */
	}
	__atomic_store_n(&known, k, __ATOMIC_RELAXED);
	return k;
}

__attribute__((target("avx,f16c")))
static int64_t h2f_f16c(const uint8_t *s, float *d, int64_t n)
{
	int64_t i = 0;
	for (; i + 8 <= n; i += 8)
		_mm256_storeu_ps(d + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(s + 2 * i))));
	return i;
}

__attribute__((target("avx,f16c")))
static int64_t f2h_f16c(const float *s, uint8_t *d, int64_t n)
{
	int64_t i = 0;
	for (; i + 8 <= n; i += 8)
		_mm_storeu_si128((__m128i *)(d + 2 * i),
				 _mm256_cvtps_ph(_mm256_loadu_ps(s + i), _MM_FROUND_TO_NEAREST_INT));
	return i;
}
#endif

void elem_half_to_float(int dt, const void *src, float *dst, int64_t n)
{
	const uint8_t *s = src;
	int64_t i = 0;
	if (dt == DT_BFLOAT16) {
		for (; i < n; i++) {
			uint16_t h;
			memcpy(&h, s + 2 * i, 2);
			uint32_t u = (uint32_t)h << 16;
			memcpy(&dst[i], &u, 4);
		}
		return;
	}
#ifdef HAVE_F16C_PATH
	if (have_f16c())
		i = h2f_f16c(s, dst, n);
#endif
	for (; i < n; i++) {
		uint16_t h;
		memcpy(&h, s + 2 * i, 2);
		dst[i] = half_to_float(h);
	}
}

void elem_float_to_half(int dt, const float *src, void *dst, int64_t n)
{
	uint8_t *d = dst;
	int64_t i = 0;
	if (dt == DT_BFLOAT16) {
		for (; i < n; i++) {
			uint32_t u;
			memcpy(&u, &src[i], 4);
			/* round to nearest even; NaN stays a quiet NaN */
			uint32_t r = (u + 0x7fffu + ((u >> 16) & 1)) >> 16;
			uint16_t h = (u & 0x7fffffffu) > 0x7f800000u ? (uint16_t)((u >> 16) | 0x40) : (uint16_t)r;
			memcpy(d + 2 * i, &h, 2);
		}
		return;
	}
#ifdef HAVE_F16C_PATH
	if (have_f16c())
		i = f2h_f16c(src, d, n);
#endif
	for (; i < n; i++) {
		uint16_t h = float_to_half(src[i]);
		memcpy(d + 2 * i, &h, 2);
	}
}

/* float32 copy of a float16/bfloat16 tensor */
static int widen(const Tensor *src, Tensor *dst)
{
	if (tensor_alloc(dst, DT_FLOAT, src->rank, src->dims) < 0)
		return -1;
	elem_half_to_float(src->dtype, src->data, dst->data, src->numel);
	return 0;
}

int eio_begin(ElemIO *e, RunCtx *c)
{
	memset(e, 0, sizeof *e);
	e->c = c;
	e->nin = c->nin;
	e->in = xcalloc(c->nin ? c->nin : 1, sizeof *e->in);
	e->tin = xcalloc(c->nin ? c->nin : 1, sizeof *e->tin);
	for (size_t k = 0; k < c->nin; k++) {
		const Tensor *t = c->in[k];
		e->in[k] = t;
		if (!t)
			continue;
		int bits = dtype_bits(t->dtype);
		if (elem_is_half(t->dtype)) {
			if (widen(t, &e->tin[k]) < 0)
				return eio_end(e, -1);
			e->in[k] = &e->tin[k];
		} else if (bits >= 16 && t->data && (uintptr_t)t->data % (unsigned)(bits / 8)) {
			if (tensor_copy(&e->tin[k], t) < 0)
				return eio_end(e, -1);
			e->in[k] = &e->tin[k];
		}
	}
	return 0;
}

int eio_output(ElemIO *e, size_t i, int dt, int rank, const int64_t *dims, Tensor **out)
{
	RunCtx *c = e->c;
	if (op_output(c, i, dt, rank, dims) < 0)
		return -1;
	*out = c->out[i];
	if (!elem_is_half(dt))
		return 0;
	if (i >= EIO_MAXOUT)
		return op_error(c->node, "too many half-precision outputs");
	if (tensor_alloc(&e->tout[i], DT_FLOAT, rank, dims) < 0)
		return -1;
	e->half[i] = dt;
	*out = &e->tout[i];
	return 0;
}

int eio_end(ElemIO *e, int rc)
{
	for (size_t i = 0; i < EIO_MAXOUT; i++) {
		if (!e->half[i])
			continue;
		if (rc == 0) {
			Tensor *y = e->c->out[i];
			elem_float_to_half(e->half[i], e->tout[i].data, y->data, y->numel);
		}
		tensor_free(&e->tout[i]);
		e->half[i] = 0;
	}
	for (size_t k = 0; k < e->nin; k++)
		if (e->tin)
			tensor_free(&e->tin[k]);
	free(e->tin);
	free(e->in);
	e->tin = NULL;
	e->in = NULL;
	return rc;
}

int elem_infer_like(InferCtx *c, size_t out, size_t in, int elem)
{
	if (in >= c->nin || !c->in[in])
		return op_error(c->node, "missing input %zu", in);
	if (out >= c->nout)
		return 0;
	const ValueType *s = c->in[in];
	ValueType *d = c->out[out];
	vt_set_tensor(d, elem, s->rank);
	for (int i = 0; i < s->rank; i++)
		d->dims[i] = s->dims[i];
	return 0;
}

int elem_parallel(int threads, int64_t n, int64_t grain,
		  int (*fn)(void *arg, int64_t lo, int64_t hi), void *arg)
{
	if (grain < 1)
		grain = 1;
	int64_t t = n / grain;
	if (t > threads)
		t = threads;
	if (t <= 1)
		return fn(arg, 0, n);
	return par_run((int)t, n, fn, arg);
}

Tensor elem_slice(const Tensor *t, int64_t lo, int64_t hi)
{
	Tensor v = *t;
	size_t es = (size_t)dtype_bits(t->dtype) / 8;
	v.owned = 0;
	v.name = NULL;
	v.rank = 1;
	v.dims[0] = hi - lo;
	v.numel = hi - lo;
	v.nbytes = (size_t)(hi - lo) * es;
	v.data = (char *)t->data + (size_t)lo * es;
	return v;
}
