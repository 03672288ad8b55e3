/* elem.c — input/output conversion for the elementwise kernels (see elem.h). */
#include "ops/elem.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

int elem_is_half(int dt)
{
	return dt == DT_FLOAT16 || dt == DT_BFLOAT16;
}

int elem_native(int dt)
{
	return elem_is_half(dt) ? DT_FLOAT : dt;
}

/* float32 copy of a float16/bfloat16 tensor */
static int widen(const Tensor *src, Tensor *dst)
{
	if (tensor_alloc(dst, DT_FLOAT, src->rank, src->dims) < 0)
		return -1;
	const uint8_t *s = src->data;
	float *d = dst->data;
	for (int64_t i = 0; i < src->numel; i++) {
		uint16_t h;
		memcpy(&h, s + 2 * i, 2);
		d[i] = src->dtype == DT_FLOAT16 ? half_to_float(h) : bf16_to_float(h);
	}
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
			const float *s = e->tout[i].data;
			uint8_t *d = y->data;
			for (int64_t k = 0; k < y->numel; k++) {
				uint16_t h = e->half[i] == DT_FLOAT16 ? float_to_half(s[k])
								       : float_to_bf16(s[k]);
				memcpy(d + 2 * k, &h, 2);
			}
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

typedef struct ParJob {
	int (*fn)(void *arg, int64_t lo, int64_t hi);
	void *arg;
	int64_t lo, hi;
	int rc;
} ParJob;

static void *par_main(void *p)
{
	ParJob *j = p;
	j->rc = j->fn(j->arg, j->lo, j->hi);
	return NULL;
}

int elem_parallel(int threads, int64_t n, int64_t grain,
		  int (*fn)(void *arg, int64_t lo, int64_t hi), void *arg)
{
	enum { MAXT = 64 };
	ParJob job[MAXT];
	pthread_t tid[MAXT];
	int started[MAXT] = {0};
	if (grain < 1)
		grain = 1;
	int64_t t = n / grain;
	if (t > threads)
		t = threads;
	if (t > MAXT)
		t = MAXT;
	if (t <= 1)
		return fn(arg, 0, n);
	for (int64_t k = 0; k < t; k++) {
		job[k] = (ParJob){fn, arg, n * k / t, n * (k + 1) / t, 0};
		if (k > 0)
			started[k] = pthread_create(&tid[k], NULL, par_main, &job[k]) == 0;
	}
	job[0].rc = fn(arg, job[0].lo, job[0].hi);
	for (int64_t k = 1; k < t; k++) {
		if (started[k])
			pthread_join(tid[k], NULL);
		else  /* no thread to be had: run it here */
			job[k].rc = fn(arg, job[k].lo, job[k].hi);
	}
	for (int64_t k = 0; k < t; k++)
		if (job[k].rc)
			return job[k].rc;
	return 0;
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
