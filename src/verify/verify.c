/* verify.c — running the reference and the quantized model side by side
 * (see verify.h): samples, labels, outputs and per-layer taps. */
#include "verify/verify.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "exec/compare.h"
#include "exec/dataio.h"
#include "exec/interp.h"
#include "onnx/tensor.h"

/* a quantized-model (or reference) tensor name and what it feeds */
enum { M_REF, M_MATCH, M_PRE, M_WEIGHT };

/* A sample of stacked rows runs FIRST_CHUNK rows first, then as many as
 * keep the reference values held for comparison near STASH_BYTES. */
enum { FIRST_CHUNK = 16 };
#define STASH_BYTES ((size_t)64 << 20)
typedef struct Match {
	const char *name;
	int kind;
	size_t idx;
} Match;

typedef struct Run {
	VerifyReport *rep;
	Model *ref;
	Match *rmap, *qmap;        /* sorted by name */
	size_t nrmap, nqmap;
	Tensor *stash, *pre;       /* per activation: reference value, q's own */
	const Onnx__TensorProto **winit; /* per weight: the reference initializer */
	int first;                 /* the first sample (weights are compared once) */
	int failed;                /* a tap could not read a tensor */
	size_t stash_bytes;        /* values held for comparison by this run */
	/* with two threads or more (see RefThread): the reference model runs
	 * beside the quantized one, and a comparison waits for its value */
	int concurrent;
	pthread_mutex_t mu;        /* over ready, ref_done and the job */
	pthread_cond_t cv;
	char *ready;               /* per activation: stash[i] is filled */
	int ref_done;              /* the reference run ended: nothing more comes */
	int ref_failed;            /* tap_ref could not copy a tensor */
	size_t ref_bytes;          /* values tap_ref held */
} Run;

static int cmp_match(const void *a, const void *b)
{
	return strcmp(((const Match *)a)->name, ((const Match *)b)->name);
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static int has(char **set, size_t n, const char *s)
{
	return n && bsearch(&s, set, n, sizeof *set, cmp_str) != NULL;
}

double err_sqnr(const ErrStats *e)
{
	if (e->sd2 == 0)
		return INFINITY;
	if (e->sx2 == 0)
		return -INFINITY;
	return 10 * log10(e->sx2 / e->sd2);
}

double err_local_sqnr(const ErrStats *e)
{
	if (!e->local_n || e->local_sd2 == 0)
		return INFINITY;
	if (e->local_sx2 == 0)
		return -INFINITY;
	return 10 * log10(e->local_sx2 / e->local_sd2);
}

double err_cosine(const ErrStats *e)
{
	if (e->sx2 == 0 && e->sy2 == 0)
		return 1;
	if (e->sx2 == 0 || e->sy2 == 0)
		return 0;
	return e->sxy / sqrt(e->sx2 * e->sy2);
}

double err_mean_abs(const ErrStats *e)
{
	return e->n ? e->sum_abs / (double)e->n : 0;
}

void err_add(ErrStats *e, const double *x, const double *y, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		double a = x[i], b = y[i];
		if (!isfinite(a) || !isfinite(b)) {
			e->nonfinite++;
			continue;
		}
		double d = a - b, ad = fabs(d);
		e->sx2 += a * a;
		e->sy2 += b * b;
		e->sxy += a * b;
		e->sd2 += d * d;
		e->sum_abs += ad;
		if (ad > e->max_abs)
			e->max_abs = ad;
		e->n++;
	}
}

/* elements [from, from + n) of t as doubles */
static void to_f64(const Tensor *t, int64_t from, size_t n, double *out)
{
	if (t->dtype == DT_FLOAT) {
		const float *f = (const float *)t->data + from;
		for (size_t i = 0; i < n; i++)
			out[i] = f[i];
		return;
	}
	for (size_t i = 0; i < n; i++)
		out[i] = tensor_get_f64(t, from + (int64_t)i);
}

static int same_shape(const Tensor *a, const Tensor *b)
{
	if (a->rank != b->rank)
		return 0;
	for (int k = 0; k < a->rank; k++)
		if (a->dims[k] != b->dims[k])
			return 0;
	return 1;
}

#define CMP_CLONES QM_CLONES("avx512f", "avx2", "default")
typedef double v8d __attribute__((vector_size(64)));
typedef int64_t v8l __attribute__((vector_size(64)));
typedef float v8f __attribute__((vector_size(32)));
typedef int32_t v8i __attribute__((vector_size(32)));

typedef struct Lanes {
	v8d sx2, sy2, sxy, sd2, sab, mx;
	v8l cnt;
} Lanes;

/* eight elements into eight lanes of partial sums */
static inline void lanes_add(Lanes *s, const float *x, const float *y)
{
	const v8l abs_mask = (v8l){0} + INT64_MAX;
	const v8i expo = (v8i){0} + 0x7f800000;
	v8f fx, fy;
	v8i bx, by;
	memcpy(&fx, x, sizeof fx);
	memcpy(&fy, y, sizeof fy);
	memcpy(&bx, x, sizeof bx);
	memcpy(&by, y, sizeof by);
	v8d a = __builtin_convertvector(fx, v8d), b = __builtin_convertvector(fy, v8d);
	/* both finite: all ones (from the float bits: a test on the doubles
	 * was compiled lane by lane, 5x slower) */
	v8l ok = __builtin_convertvector(((bx & expo) != expo) & ((by & expo) != expo), v8l);
	a = (v8d)((v8l)a & ok);
	b = (v8d)((v8l)b & ok);
	v8d d = a - b, ad = (v8d)((v8l)d & abs_mask);
	s->sx2 += a * a;
	s->sy2 += b * b;
	s->sxy += a * b;
	s->sd2 += d * d;
	s->sab += ad;
	v8l gt = ad > s->mx;
	s->mx = (v8d)(((v8l)ad & gt) | ((v8l)s->mx & ~gt));
	s->cnt -= ok;
}

/* err_add for two float arrays, in double: eight partial sums per figure,
 * then the rest in order */
CMP_CLONES static void err_add_f32(ErrStats *e, const float *x, const float *y, size_t n)
{
	Lanes s;
	memset(&s, 0, sizeof s);
	size_t i = 0;
	for (; i + 8 <= n; i += 8)
		lanes_add(&s, x + i, y + i);
	uint64_t counted = 0;
	for (int k = 0; k < 8; k++) {
		e->sx2 += s.sx2[k];
		e->sy2 += s.sy2[k];
		e->sxy += s.sxy[k];
		e->sd2 += s.sd2[k];
		e->sum_abs += s.sab[k];
		if (s.mx[k] > e->max_abs)
			e->max_abs = s.mx[k];
		counted += (uint64_t)s.cnt[k];
	}
	e->n += counted;
	e->nonfinite += i - counted;
	double tx[8], ty[8];
	size_t tail = n - i;
	for (size_t k = 0; k < tail; k++) {
		tx[k] = x[i + k];
		ty[k] = y[i + k];
	}
	err_add(e, tx, ty, tail);
}

/* compare x with y into e (local: into e's local sums); float tensors
 * directly, others through a small conversion buffer */
static void compare_into(ErrStats *e, const Tensor *x, const Tensor *y, int local)
{
	enum { BLOCK = 1024 };
	if (!same_shape(x, y))
		return;
	ErrStats s = {0};
	if (x->dtype == DT_FLOAT && y->dtype == DT_FLOAT)
		err_add_f32(&s, x->data, y->data, (size_t)x->numel);
	else
		for (int64_t i = 0; i < x->numel; i += BLOCK) {
			double bx[BLOCK], by[BLOCK];
			size_t n = (size_t)(x->numel - i < BLOCK ? x->numel - i : BLOCK);
			to_f64(x, i, n, bx);
			to_f64(y, i, n, by);
			err_add(&s, bx, by, n);
		}
	if (local) {
		e->local_sx2 += s.sx2;
		e->local_sd2 += s.sd2;
		e->local_n += s.n;
		return;
	}
	e->n += s.n;
	e->nonfinite += s.nonfinite;
	e->sx2 += s.sx2;
	e->sy2 += s.sy2;
	e->sxy += s.sxy;
	e->sd2 += s.sd2;
	e->sum_abs += s.sum_abs;
	if (s.max_abs > e->max_abs)
		e->max_abs = s.max_abs;
}

static const Match *find(const Match *map, size_t n, const char *name, size_t *count)
{
	Match key = {.name = name};
	const Match *m = n ? bsearch(&key, map, n, sizeof *map, cmp_match) : NULL;
	if (!m) {
		*count = 0;
		return NULL;
	}
	while (m > map && !strcmp(m[-1].name, name))
		m--;
	size_t k = 0;
	while (m + k < map + n && !strcmp(m[k].name, name))
		k++;
	*count = k;
	return m;
}

static void tap_ref(void *ud, const char *name, const Tensor *t)
{
	Run *r = ud;
	size_t n;
	const Match *m = find(r->rmap, r->nrmap, name, &n);
	for (size_t i = 0; i < n; i++) {
		if (!t || !t->data || !dtype_is_float(t->dtype))
			continue;
		if (tensor_copy(&r->stash[m[i].idx], t) < 0)
			r->ref_failed = 1;
		r->ref_bytes += t->nbytes;
		if (r->concurrent) {
			pthread_mutex_lock(&r->mu);
			r->ready[m[i].idx] = 1;
			pthread_cond_broadcast(&r->cv);
			pthread_mutex_unlock(&r->mu);
		}
	}
}

/* concurrent: wait until the reference run has filled stash[k] or ended */
static void await_ref(Run *r, size_t k)
{
	if (!r->concurrent)
		return;
	pthread_mutex_lock(&r->mu);
	while (!r->ready[k] && !r->ref_done)
		pthread_cond_wait(&r->cv, &r->mu);
	pthread_mutex_unlock(&r->mu);
}

static void tap_q(void *ud, const char *name, const Tensor *t)
{
	Run *r = ud;
	size_t n;
	const Match *m = find(r->qmap, r->nqmap, name, &n);
	if (!t || !t->data || !dtype_is_float(t->dtype))
		return;
	for (size_t i = 0; i < n; i++) {
		size_t k = m[i].idx;
		if (m[i].kind == M_PRE) {
			if (tensor_copy(&r->pre[k], t) < 0)
				r->failed = 1;
			r->stash_bytes += t->nbytes;
		} else if (m[i].kind == M_MATCH) {
			ErrStats *e = &r->rep->acts[k];
			await_ref(r, k);
			if (r->stash[k].data)
				compare_into(e, &r->stash[k], t, 0);
			if (r->pre[k].data)
				compare_into(e, &r->pre[k], t, 1);
			tensor_free(&r->stash[k]);
			tensor_free(&r->pre[k]);
		} else if (m[i].kind == M_WEIGHT && r->first) {
			Tensor w = {0};
			if (tensor_from_proto(r->ref, r->winit[k], &w) < 0) {
				r->failed = 1;
				continue;
			}
			compare_into(&r->rep->weights[k], &w, t, 0);
			tensor_free(&w);
		}
	}
}

/* ---- matching tensors of the two models ---- */

static void node_outputs(const Onnx__GraphProto *g, PtrVec *out)
{
	for (size_t i = 0; i < g->n_node; i++)
		for (size_t k = 0; k < g->node[i]->n_output; k++)
			if (g->node[i]->output[k] && *g->node[i]->output[k])
				pv_push(out, g->node[i]->output[k]);
}

/* the op type producing name in g ("" for a graph input, NULL if none) */
static const char *producer(const Onnx__GraphProto *g, const char *name)
{
	for (size_t i = 0; i < g->n_node; i++)
		for (size_t k = 0; k < g->node[i]->n_output; k++)
			if (g->node[i]->output[k] && !strcmp(g->node[i]->output[k], name))
				return g->node[i]->op_type;
	for (size_t i = 0; i < g->n_input; i++)
		if (!strcmp(g->input[i]->name, name))
			return "";
	return NULL;
}

static int same_producer(const Onnx__GraphProto *a, const Onnx__GraphProto *b, const char *name)
{
	const char *x = producer(a, name), *y = producer(b, name);
	return x && y && !strcmp(x, y);
}

/* input 0 -> output 0 of the QuantizeLinear or DequantizeLinear nodes of a
 * graph, sorted by input */
typedef struct Link {
	const char *in, *out;
} Link;

static int cmp_link(const void *a, const void *b)
{
	return strcmp(((const Link *)a)->in, ((const Link *)b)->in);
}

static Link *links(const Onnx__GraphProto *g, const char *op, size_t *count)
{
	Link *v = xcalloc(g->n_node + 1, sizeof *v);
	size_t n = 0;
	for (size_t i = 0; i < g->n_node; i++) {
		const Onnx__NodeProto *d = g->node[i];
		if (!strcmp(d->op_type, op) && d->n_input && d->n_output)
			v[n++] = (Link){d->input[0], d->output[0]};
	}
	if (n > 1)
		qsort(v, n, sizeof *v, cmp_link);
	*count = n;
	return v;
}

static const char *follow(const Link *v, size_t n, const char *in)
{
	Link key = {.in = in};
	const Link *l = n && in ? bsearch(&key, v, n, sizeof *v, cmp_link) : NULL;
	return l ? l->out : NULL;
}

/* the reference initializer a DequantizeLinear d of q restores: its own
 * output's name (compact names), or its output or input without the
 * suffixes quantizers add (W_DequantizeLinear_Output, W_quantized, W_q) */
static const char *weight_of(const Onnx__NodeProto *d, char **rinit, size_t n)
{
	static const char *const sfx[] = {"_DequantizeLinear_Output", "_quantized", "_dq", "_q"};
	const char *cand[] = {d->output[0], d->input[0]};
	for (size_t c = 0; c < 2; c++) {
		if (has(rinit, n, cand[c]))
			return cand[c];
		char *b = xstrdup(cand[c]);
		for (size_t k = 0; k < 4; k++) {
			size_t l = strlen(b), sl = strlen(sfx[k]);
			if (l > sl && !strcmp(b + l - sl, sfx[k])) {
				b[l - sl] = 0;
				char *const *hit = n ? bsearch(&b, rinit, n, sizeof *rinit, cmp_str) : NULL;
				if (hit) {
					free(b);
					return *hit;
				}
			}
		}
		free(b);
	}
	return NULL;
}

static void push_match(Match **map, size_t *n, const char *name, int kind, size_t idx)
{
	*map = xreallocarray(*map, *n + 1, sizeof **map);
	(*map)[(*n)++] = (Match){name, kind, idx};
}

static void plan_layers(Run *r, Model *ref, Model *q)
{
	const Onnx__GraphProto *rg = verify_flat_graph(ref->proto->graph), *qg = verify_flat_graph(q->proto->graph);
	VerifyReport *rep = r->rep;
	PtrVec qset = {0}, rnames = {0}, rinit = {0};
	node_outputs(qg, &qset);
	for (size_t i = 0; i < qg->n_input; i++)
		pv_push(&qset, qg->input[i]->name);
	if (qset.n > 1)
		qsort(qset.v, qset.n, sizeof *qset.v, cmp_str);
	for (size_t i = 0; i < rg->n_initializer; i++)
		pv_push(&rinit, rg->initializer[i]->name);
	if (rinit.n > 1)
		qsort(rinit.v, rinit.n, sizeof *rinit.v, cmp_str);
	for (size_t i = 0; i < rg->n_input; i++)
		if (!has((char **)rinit.v, rinit.n, rg->input[i]->name))
			pv_push(&rnames, rg->input[i]->name);
	node_outputs(rg, &rnames);
	/* T's QDQ pair, found by structure whatever the quantizer named it */
	size_t nql, ndql;
	Link *ql = links(qg, "QuantizeLinear", &nql), *dql = links(qg, "DequantizeLinear", &ndql);
	rep->acts = xcalloc(rnames.n + 1, sizeof *rep->acts);
	for (size_t i = 0; i < rnames.n; i++) {
		const char *t = rnames.v[i];
		const char *dq = follow(dql, ndql, follow(ql, nql, t));
		const char *qn = dq ? dq : has((char **)qset.v, qset.n, t) ? t : NULL;
		if (qn) {
			size_t k = rep->nacts++;
			rep->acts[k].name = xstrdup(t);
			rep->acts[k].qname = xstrdup(qn);
			push_match(&r->rmap, &r->nrmap, rep->acts[k].name, M_REF, k);
			push_match(&r->qmap, &r->nqmap, rep->acts[k].qname, M_MATCH, k);
			/* T's own quantization step, when q computes T as the
			 * reference does (not when a Relu was folded into T's range) */
			if (qn == dq && has((char **)qset.v, qset.n, t) && same_producer(rg, qg, t))
				push_match(&r->qmap, &r->nqmap, rep->acts[k].name, M_PRE, k);
		}
	}
	/* weights: the DequantizeLinear nodes reading an initializer */
	PtrVec qouts = {0};
	node_outputs(qg, &qouts);
	rep->weights = xcalloc(qouts.n + 1, sizeof *rep->weights);
	r->winit = xcalloc(qouts.n + 1, sizeof *r->winit);
	for (size_t i = 0; i < qg->n_node; i++) {
		const Onnx__NodeProto *d = qg->node[i];
		if (strcmp(d->op_type, "DequantizeLinear") || !d->n_input || !d->n_output || !*d->output[0] ||
		    producer(qg, d->input[0]))
			continue;
		const char *base = weight_of(d, (char **)rinit.v, rinit.n);
		for (size_t k = 0; base && k < rg->n_initializer; k++)
			if (!strcmp(rg->initializer[k]->name, base)) {
				size_t w = rep->nweights++;
				rep->weights[w].name = xstrdup(base);
				rep->weights[w].qname = xstrdup(d->output[0]);
				r->winit[w] = rg->initializer[k];
				push_match(&r->qmap, &r->nqmap, rep->weights[w].qname, M_WEIGHT, w);
				break;
			}
	}
	if (r->nrmap > 1)
		qsort(r->rmap, r->nrmap, sizeof *r->rmap, cmp_match);
	if (r->nqmap > 1)
		qsort(r->qmap, r->nqmap, sizeof *r->qmap, cmp_match);
	r->stash = xcalloc(rep->nacts + 1, sizeof *r->stash);
	r->pre = xcalloc(rep->nacts + 1, sizeof *r->pre);
	pv_free(&qset);
	pv_free(&rnames);
	pv_free(&rinit);
	pv_free(&qouts);
	free(ql);
	free(dql);
	verify_flat_free(qg);
	verify_flat_free(rg);
}

/* ---- samples ---- */

/* The samples as the quantized model takes them: a float32 sample of an
 * input the model declares float16 (quantize = fp16 without keep-io-types)
 * is rounded to float16, as a caller feeding that model would. The other
 * tensors are borrowed from in; out->t[k].owned says which were made. */
static int inputs_for(Interp *ip, const TensorList *in, TensorList *out)
{
	out->n = 0;
	for (size_t k = 0; k < in->n; k++) {
		const Tensor *x = &in->t[k];
		Tensor t = *x;
		t.owned = 0;
		for (size_t i = 0; x->dtype == DT_FLOAT && x->name && i < interp_ninputs(ip); i++) {
			int dt, rank;
			int64_t dims[QM_MAX_RANK];
			interp_input_type(ip, i, &dt, &rank, dims);
			if (dt != DT_FLOAT16 || strcmp(interp_input_name(ip, i), x->name))
				continue;
			memset(&t, 0, sizeof t);
			if (tensor_alloc(&t, DT_FLOAT16, x->rank, x->dims) < 0)
				return -1;
			const float *f = x->data;
			uint16_t *h = t.data;
			for (int64_t e = 0; e < x->numel; e++)
				h[e] = float_to_half(f[e]);
			t.name = x->name;
			break;
		}
		if (out->n == out->cap) {
			out->cap = out->cap ? 2 * out->cap : 8;
			out->t = xrealloc(out->t, out->cap * sizeof *out->t);
		}
		out->t[out->n++] = t;
	}
	return 0;
}

static void inputs_release(TensorList *l)
{
	for (size_t k = 0; k < l->n; k++)
		if (l->t[k].owned) {
			l->t[k].name = NULL;   /* borrowed from the sample */
			tensor_free(&l->t[k]);
		}
	l->n = 0;
}

/* Rows of a stacked sample: n > 1 when every model input leaves its first
 * dimension open, the sample's tensor for it matches the declared shape
 * otherwise (else the run says what is wrong, with the shape given), and
 * every tensor of the sample (inputs, labels) has n rows; 0 otherwise (the
 * sample runs whole). */
static int64_t stacked_rows(Interp *ip, const TensorList *tl)
{
	for (size_t i = 0; i < interp_ninputs(ip); i++) {
		int dt, rank;
		int64_t dims[QM_MAX_RANK];
		interp_input_type(ip, i, &dt, &rank, dims);
		if (rank < 1 || dims[0] >= 0)
			return 0;
		const char *nm = interp_input_name(ip, i);
		const Tensor *t = NULL;
		for (size_t k = 0; k < tl->n && !t; k++)
			if (tl->t[k].name && !strcmp(tl->t[k].name, nm))
				t = &tl->t[k];
		if (!t && tl->n == interp_ninputs(ip))
			t = &tl->t[i];
		if (!t || t->rank != rank || t->dtype != dt)
			return 0;
		for (int d = 1; d < rank; d++)
			if (dims[d] >= 0 && dims[d] != t->dims[d])
				return 0;
	}
	int64_t n = 0;
	for (size_t k = 0; k < tl->n; k++) {
		const Tensor *t = &tl->t[k];
		if (t->kind != TK_TENSOR || t->dtype == DT_STRING || t->rank < 1 || (k && t->dims[0] != n))
			return 0;
		n = t->dims[0];
	}
	return n > 1 ? n : 0;
}

/* rows [from, from + count) of every tensor of tl, as views into it */
static void rows_view(const TensorList *tl, int64_t rows, int64_t from, int64_t count, TensorList *out)
{
	out->n = 0;
	for (size_t k = 0; k < tl->n; k++) {
		Tensor v = tl->t[k];
		size_t row_bytes = v.nbytes / (size_t)rows;
		v.data = (char *)v.data + (size_t)from * row_bytes;
		v.dims[0] = count;
		v.numel = v.numel / rows * count;
		v.nbytes = row_bytes * (size_t)count;
		v.owned = 0;
		if (out->n == out->cap) {
			out->cap = out->cap ? 2 * out->cap : 8;
			out->t = xrealloc(out->t, out->cap * sizeof *out->t);
		}
		out->t[out->n++] = v;
	}
}

static uint64_t splitmix(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

/* one random sample: standard normal values for every (float) input,
 * symbolic dimensions set to 1 */
static int random_sample(Interp *ip, uint64_t *state, TensorList *tl)
{
	for (size_t i = 0; i < interp_ninputs(ip); i++) {
		int dt, rank;
		int64_t dims[QM_MAX_RANK];
		interp_input_type(ip, i, &dt, &rank, dims);
		const char *nm = interp_input_name(ip, i);
		if (dt != DT_FLOAT)
			return error("verify.data = random: input '%s' is %s: random inputs are only made for float inputs",
				     nm, dtype_name(dt));
		if (rank < 0)
			return error("verify.data = random: input '%s' has no declared rank", nm);
		for (int k = 0; k < rank; k++)
			if (dims[k] < 0)
				dims[k] = 1;
		Tensor t = {0};
		if (tensor_alloc(&t, DT_FLOAT, rank, dims) < 0)
			return -1;
		float *f = t.data;
		for (int64_t k = 0; k < t.numel; k++) {
			double u1 = ((double)(splitmix(state) >> 11) + 1) / 9007199254740993.0;
			double u2 = (double)(splitmix(state) >> 11) / 9007199254740992.0;
			f[k] = (float)(sqrt(-2 * log(u1)) * cos(2 * M_PI * u2));
		}
		t.name = xstrdup(nm);
		tl_push(tl, &t);
	}
	return 0;
}

/* the symbolic dimensions past the first (the batch) that random inputs
 * give the size 1, in words, or NULL when there are none */
static char *random_ones(Interp *ip)
{
	StrBuf sb = {0};
	for (size_t i = 0; i < interp_ninputs(ip); i++) {
		int dt, rank, n = 0;
		int64_t dims[QM_MAX_RANK];
		interp_input_type(ip, i, &dt, &rank, dims);
		char list[QM_MAX_RANK * 8] = "";
		for (int k = 1; k < rank; k++)
			if (dims[k] < 0)
				snprintf(list + strlen(list), sizeof list - strlen(list), "%s%d", n++ ? ", " : "", k);
		if (n)
			sb_printf(&sb, "%sdimension%s %s of input '%s'", sb.len ? "; " : "", n > 1 ? "s" : "", list,
				  interp_input_name(ip, i));
	}
	return sb.len ? sb_detach(&sb) : NULL;
}

static int is_int_type(int dt)
{
	return dt == DT_INT8 || dt == DT_INT16 || dt == DT_INT32 || dt == DT_INT64 || dt == DT_UINT8 ||
	       dt == DT_UINT16 || dt == DT_UINT32 || dt == DT_UINT64;
}

/* index of the largest of n scores (the first on ties, as numpy.argmax) */
static int64_t argmax(const Tensor *t, int64_t row, int64_t n)
{
	int64_t best = 0;
	double bv = tensor_get_f64(t, row * n);
	for (int64_t k = 1; k < n; k++) {
		double v = tensor_get_f64(t, row * n + k);
		if (v > bv || (isnan(v) && !isnan(bv))) {
			bv = v;
			best = k;
		}
	}
	return best;
}

typedef struct Labels {
	Tensor all;                /* labels_file: every label */
	int64_t pos;
} Labels;

static int count_top1(VerifyReport *rep, const VerifyOpts *o, Labels *lb, uint64_t idx, const TensorList *tl,
		      const char *oname, const Tensor *yr, const Tensor *yq)
{
	char sh[256];
	if (yr->rank < 1 || yr->dims[yr->rank - 1] < 1)
		return error("sample %llu: output '%s' is %s: top-1 needs class scores on its last axis",
			     (unsigned long long)idx + 1, oname, shape_str(yr->rank, yr->dims, sh, sizeof sh));
	int64_t ncls = yr->dims[yr->rank - 1], rows = yr->numel / ncls;
	if (!rep->labeled) {
		rep->labeled = 1;
		rep->nclasses = ncls;
		rep->class_n = xcalloc((size_t)ncls, sizeof *rep->class_n);
		rep->class_ref = xcalloc((size_t)ncls, sizeof *rep->class_ref);
		rep->class_q = xcalloc((size_t)ncls, sizeof *rep->class_q);
	} else if (ncls != rep->nclasses)
		return error("sample %llu: output '%s' has %lld classes, earlier samples had %lld",
			     (unsigned long long)idx + 1, oname, (long long)ncls, (long long)rep->nclasses);
	const Tensor *lt = NULL;
	int64_t off = 0;
	if (o->labels_name) {
		for (size_t k = 0; k < tl->n && !lt; k++)
			if (tl->t[k].name && !strcmp(tl->t[k].name, o->labels_name))
				lt = &tl->t[k];
		if (!lt)
			return error("sample %llu has no tensor '%s' (verify.labels)", (unsigned long long)idx + 1,
				     o->labels_name);
		if (!is_int_type(lt->dtype))
			return error("sample %llu: labels '%s' are %s, expected integer class indices",
				     (unsigned long long)idx + 1, o->labels_name, dtype_name(lt->dtype));
		if (lt->numel != rows)
			return error("sample %llu: labels '%s' hold %lld values, expected %lld (one per row of output '%s' %s)",
				     (unsigned long long)idx + 1, o->labels_name, (long long)lt->numel, (long long)rows,
				     oname, shape_str(yr->rank, yr->dims, sh, sizeof sh));
	} else {
		lt = &lb->all;
		off = lb->pos;
		if (lb->pos + rows > lt->numel)
			return error("labels file '%s' holds %lld labels, fewer than the rows of the samples (sample %llu needs %lld more)",
				     o->labels_file, (long long)lt->numel, (unsigned long long)idx + 1,
				     (long long)(lb->pos + rows - lt->numel));
		lb->pos += rows;
	}
	for (int64_t i = 0; i < rows; i++) {
		int64_t want = tensor_get_i64(lt, off + i);
		if (want < 0 || want >= ncls)
			return error("sample %llu: label %lld of row %lld is not a class of output '%s' (0..%lld)",
				     (unsigned long long)idx + 1, (long long)want, (long long)i + 1, oname,
				     (long long)ncls - 1);
		int ok_r = argmax(yr, i, ncls) == want, ok_q = argmax(yq, i, ncls) == want;
		rep->class_n[want]++;
		rep->class_ref[want] += (uint64_t)ok_r;
		rep->class_q[want] += (uint64_t)ok_q;
		rep->ref_correct += (uint64_t)ok_r;
		rep->q_correct += (uint64_t)ok_q;
		rep->nrows++;
	}
	return 0;
}

static int load_labels(const char *path, Labels *lb)
{
	TensorList tl = {0};
	if (data_read_file(path, &tl) < 0)
		return -1;
	int r = 0;
	if (tl.n != 1)
		r = error("labels file '%s' holds %zu tensors, expected one", path, tl.n);
	else if (!is_int_type(tl.t[0].dtype))
		r = error("labels file '%s' is %s, expected integer class indices", path, dtype_name(tl.t[0].dtype));
	if (r == 0) {
		lb->all = tl.t[0];
		tl.t[0] = (Tensor){0};
	}
	tl_free(&tl);
	return r;
}

/* ---- the reference model on a thread of its own ----
 *
 * With two threads or more, each batch of the reference model runs on a
 * thread of its own while the quantized model runs on the caller's, each
 * with half of the threads. The quantized model's taps compare in the
 * same order as when the runs follow each other (a comparison waits until
 * the reference value is there, see await_ref), so the report is the same
 * bytes on any number of threads; the values held are those the
 * reference run would have held anyway. */
typedef struct RefThread {
	Run *run;                  /* mu and cv guard the fields below */
	Interp *ip;
	pthread_t tid;
	int started, have_job, quit;
	const TensorList *in;      /* the job: a batch ... */
	size_t nout;
	Tensor *out;               /* ... and where its outputs go */
	int rc;
	char err[1024];            /* the error of a failed run */
} RefThread;

static void *ref_main(void *arg)
{
	RefThread *t = arg;
	Run *r = t->run;
	pthread_mutex_lock(&r->mu);
	for (;;) {
		while (!t->have_job && !t->quit)
			pthread_cond_wait(&r->cv, &r->mu);
		if (t->quit)
			break;
		t->have_job = 0;
		pthread_mutex_unlock(&r->mu);
		int rc = interp_run_sample(t->ip, t->in->n, t->in->t, t->nout, t->out);
		if (rc < 0)
			snprintf(t->err, sizeof t->err, "%s", errmsg());
		pthread_mutex_lock(&r->mu);
		t->rc = rc;
		r->ref_done = 1;
		pthread_cond_broadcast(&r->cv);
	}
	pthread_mutex_unlock(&r->mu);
	return NULL;
}

/* start the reference run of in (its outputs to out) */
static void ref_post(RefThread *t, const TensorList *in, size_t nout, Tensor *out)
{
	Run *r = t->run;
	pthread_mutex_lock(&r->mu);
	memset(r->ready, 0, r->rep->nacts + 1);
	r->ref_done = 0;
	t->in = in;
	t->nout = nout;
	t->out = out;
	t->have_job = 1;
	pthread_cond_broadcast(&r->cv);
	pthread_mutex_unlock(&r->mu);
}

/* wait for the reference run posted last; its return code */
static int ref_wait(RefThread *t)
{
	Run *r = t->run;
	pthread_mutex_lock(&r->mu);
	while (!r->ref_done)
		pthread_cond_wait(&r->cv, &r->mu);
	pthread_mutex_unlock(&r->mu);
	return t->rc < 0 ? error("%s", t->err) : 0;
}

static void ref_stop(RefThread *t)
{
	if (!t->started)
		return;
	pthread_mutex_lock(&t->run->mu);
	t->quit = 1;
	pthread_cond_broadcast(&t->run->cv);
	pthread_mutex_unlock(&t->run->mu);
	pthread_join(t->tid, NULL);
	t->started = 0;
}

int verify_models(Model *ref, Model *q, const VerifyOpts *o, VerifyReport *rep)
{
	memset(rep, 0, sizeof *rep);
	rep->random = o->random;
	rep->seed = o->seed;
	Run run = {.rep = rep, .ref = ref, .concurrent = o->threads >= 2,
		   .mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
	int tr = run.concurrent ? o->threads / 2 : o->threads;
	InterpOpts ro = {.threads = tr, .tap = tap_ref, .tap_ud = &run};
	InterpOpts qo = {.threads = o->threads - (run.concurrent ? tr : 0), .tap = tap_q, .tap_ud = &run};
	RefThread rt = {.run = &run};
	Interp *ipr = NULL, *ipq = NULL;
	SampleIter *it = NULL;
	Labels lb = {0};
	size_t *omap = NULL;
	Tensor *yr = NULL, *yq = NULL;
	TensorList tl = {0}, qin = {0}, part = {0};
	int r = 0;
	plan_layers(&run, ref, q);
	if (!(ipr = interp_new(ref, &ro)))
		r = error_prefix("reference model");
	if (r == 0 && !(ipq = interp_new(q, &qo)))
		r = error_prefix("quantized model");
	size_t nout = r == 0 ? interp_noutputs(ipq) : 0, nrout = r == 0 ? interp_noutputs(ipr) : 0;
	if (r == 0) {
		omap = xcalloc(nout + 1, sizeof *omap);
		rep->outs = xcalloc(nout + 1, sizeof *rep->outs);
		for (size_t i = 0; r == 0 && i < nout; i++) {
			const char *nm = interp_output_name(ipq, i);
			size_t k = 0;
			while (k < nrout && strcmp(interp_output_name(ipr, k), nm))
				k++;
			if (k == nrout)
				r = error("output '%s' of the quantized model is not an output of the reference model", nm);
			omap[i] = k;
			rep->outs[i].name = xstrdup(nm);
			rep->nouts++;
		}
		yr = xcalloc(nrout + 1, sizeof *yr);
		yq = xcalloc(nout + 1, sizeof *yq);
	}
	if (r == 0 && run.concurrent) {
		run.ready = xcalloc(rep->nacts + 1, 1);
		rt.ip = ipr;
		rt.started = pthread_create(&rt.tid, NULL, ref_main, &rt) == 0;
		run.concurrent = rt.started; /* else one after the other */
	}
	if (r == 0 && o->labels_file)
		r = load_labels(o->labels_file, &lb);
	if (r == 0 && !o->random) {
		r = samples_open(o->specs, o->nspecs, &it);
		if (r == 0 && samples_count(it) == 0)
			r = error("verify.data matches no sample");
	}
	uint64_t state = o->seed, total = o->random ? o->nrandom : r == 0 ? samples_count(it) : 0;
	for (uint64_t idx = 0; r == 0 && idx < total; idx++) {
		if (o->random)
			r = random_sample(ipr, &state, &tl);
		else if ((r = samples_next(it, &tl)) == 1)
			r = 0;
		else if (r == 0)
			break;
		/* a sample of stacked rows runs a chunk of rows at a time, so the
		 * reference activations held for comparison stay bounded */
		int64_t rows = r == 0 ? stacked_rows(ipr, &tl) : 0, done = 0;
		int64_t chunk = rows > FIRST_CHUNK ? FIRST_CHUNK : rows;
		do {
			if (rows) {
				chunk = chunk < rows - done ? chunk : rows - done;
				rows_view(&tl, rows, done, chunk, &part);
			}
			const TensorList *in = rows ? &part : &tl;
			run.first = idx == 0 && done == 0;
			run.stash_bytes = run.ref_bytes = 0;
			if (r == 0 && run.concurrent) {
				ref_post(&rt, in, nrout, yr);
				int rq = inputs_for(ipq, in, &qin) < 0 || interp_run_sample(ipq, qin.n, qin.t, nout, yq) < 0;
				StrBuf qerr = {0};
				if (rq)
					sb_puts(&qerr, errmsg());
				if (ref_wait(&rt) < 0)
					r = error_prefix("sample %llu, reference model", (unsigned long long)idx + 1);
				else if (rq)
					r = error("sample %llu, quantized model: %s", (unsigned long long)idx + 1, qerr.buf);
				sb_release(&qerr);
			} else {
				if (r == 0 && interp_run_sample(ipr, in->n, in->t, nrout, yr) < 0)
					r = error_prefix("sample %llu, reference model", (unsigned long long)idx + 1);
				if (r == 0 && (inputs_for(ipq, in, &qin) < 0 ||
					       interp_run_sample(ipq, qin.n, qin.t, nout, yq) < 0))
					r = error_prefix("sample %llu, quantized model", (unsigned long long)idx + 1);
			}
			inputs_release(&qin);
			run.stash_bytes += run.ref_bytes;
			run.failed |= run.ref_failed;
			if (r == 0 && run.failed)
				r = error_prefix("sample %llu: comparing intermediate tensors", (unsigned long long)idx + 1);
			for (size_t i = 0; r == 0 && i < nout; i++) {
				const Tensor *x = &yr[omap[i]], *y = &yq[i];
				char a[256], b[256];
				if (!same_shape(x, y))
					r = error("sample %llu: output '%s' is %s in the reference model but %s in the quantized model",
						  (unsigned long long)idx + 1, rep->outs[i].name,
						  shape_str(x->rank, x->dims, a, sizeof a), shape_str(y->rank, y->dims, b, sizeof b));
				else
					compare_into(&rep->outs[i], x, y, 0);
			}
			if (r == 0 && (o->labels_name || o->labels_file) && nout)
				r = count_top1(rep, o, &lb, idx, in, rep->outs[0].name, &yr[omap[0]], &yq[0]);
			for (size_t i = 0; i < nrout; i++)
				tensor_free(&yr[i]);
			for (size_t i = 0; i < nout; i++)
				tensor_free(&yq[i]);
			for (size_t i = 0; i < rep->nacts; i++) {
				tensor_free(&run.stash[i]);
				tensor_free(&run.pre[i]);
			}
			done += chunk;
			/* later chunks: as many rows as keep the held values near STASH_BYTES */
			size_t per_row = run.stash_bytes / (size_t)(chunk ? chunk : 1) + 1;
			chunk = (int64_t)(STASH_BYTES / per_row) > 1 ? (int64_t)(STASH_BYTES / per_row) : 1;
		} while (r == 0 && done < rows);
		tl_free(&tl);
		if (r == 0) {
			rep->nsamples++;
			rep->nrows_run += rows ? (uint64_t)rows : 1;
		}
	}
	if (r == 0 && o->labels_file && lb.pos != lb.all.numel)
		r = error("labels file '%s' holds %lld labels, the samples have %lld rows", o->labels_file,
			  (long long)lb.all.numel, (long long)lb.pos);
	if (o->random && ipr && !rep->random_ones)
		rep->random_ones = random_ones(ipr);
	if (r < 0 && rep->random_ones) {
		char *m = xstrdup(errmsg());
		error("%s (verify.data = random gives %s the size 1: give real samples in verify.data)", m,
		      rep->random_ones);
		free(m);
	}
	ref_stop(&rt);
	free(run.ready);
	pthread_mutex_destroy(&run.mu);
	pthread_cond_destroy(&run.cv);
	tl_free(&tl);
	free(qin.t);
	tensor_free(&lb.all);
	if (it)
		samples_close(it);
	interp_free(ipq);
	interp_free(ipr);
	free(yr);
	free(yq);
	free(omap);
	free(run.rmap);
	free(run.qmap);
	free(run.stash);
	free(run.pre);
	free(run.winit);
	free(part.t);
	/* keep the layers that were compared */
	size_t k = 0;
	for (size_t i = 0; i < rep->nacts; i++) {
		if (rep->acts[i].n)
			rep->acts[k++] = rep->acts[i];
		else {
			free(rep->acts[i].name);
			free(rep->acts[i].qname);
		}
	}
	rep->nacts = k;
	k = 0;
	for (size_t i = 0; i < rep->nweights; i++) {
		if (rep->weights[i].n)
			rep->weights[k++] = rep->weights[i];
		else {
			free(rep->weights[i].name);
			free(rep->weights[i].qname);
		}
	}
	rep->nweights = k;
	if (r < 0)
		verify_report_free(rep);
	else
		verify_blame(rep, ref, q);
	return r;
}

static void free_stats(ErrStats *e, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(e[i].name);
		free(e[i].qname);
		free(e[i].nodes);
		free(e[i].qnodes);
	}
	free(e);
}

void verify_report_free(VerifyReport *rep)
{
	free_stats(rep->outs, rep->nouts);
	free_stats(rep->acts, rep->nacts);
	free_stats(rep->weights, rep->nweights);
	free(rep->class_n);
	free(rep->class_ref);
	free(rep->class_q);
	free(rep->random_ones);
	memset(rep, 0, sizeof *rep);
}
