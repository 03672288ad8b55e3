/* dqlstm.c — com.microsoft DynamicQuantizeLSTM: onnxruntime's LSTM with
 * 8-bit weights, which its quantize_dynamic (and ours, src/quant/dynamic.c)
 * writes in place of an LSTM.
 *
 * Inputs: X, W [dirs, input, 4H] and R [dirs, H, 4H] (int8 or uint8: the
 * transposes of LSTM's W and R), B, sequence_lens, initial_h, initial_c
 * and P as LSTM's, then W_scale, W_zero_point, R_scale, R_zero_point, each
 * [dirs] (one per direction) or [dirs, 4H] (one per output column). The
 * attributes are LSTM's without layout; hidden_size is required. Everything
 * but the two products is rnn.c's LSTM (rnn_lstm_run_gemm).
 *
 * The products follow onnxruntime's CPU kernel: the float operand (the
 * input sequence up to the longest sequence length, all at once; the hidden
 * state of the whole batch at each step) is quantized to uint8 with its
 * min and max widened to include 0, scale (max - min) / 255 (1 when the
 * range is empty) and zero point round(-min / scale); the sums of
 * (a - za)(w - zw) are one dgemm on doubles, exact for 8-bit operands (the
 * weights minus their zero point are converted once per plan and kept in
 * the node's cache); each is multiplied by a_scale x w_scale of its column. onnxruntime reads one weight zero point per direction (all of a
 * direction's must be equal, and 0 for int8 per column). Where the batch
 * shares a range, rnn.c lines its steps up as onnxruntime does (a reversed
 * entry starts at its own last step; an entry finished a step ago counts as
 * zeros when Y is an output). onnxruntime's recurrent product splits the
 * batch among its threads when batch > 4, or batch >= 2 and H <= 256, each
 * part quantized with its own range: ours is its result with one thread. */
#include <cblas.h>
#include <stdlib.h>
#include <string.h>

#include "ops/nn.h"
#include "ops/op.h"
#include "ops/rnn.h"
#include "ops/shapeutil.h"
#include "util.h"

enum { DQ_X, DQ_W, DQ_R, DQ_WS = 8, DQ_WZ, DQ_RS, DQ_RZ, DQ_NIN };

/* hidden_size and direction of node n with nin inputs, checked */
static int dq_attrs(const Onnx__NodeProto *n, size_t nin, int64_t *hid, char *dir, size_t dirsize)
{
	if (attr_int(n, "hidden_size", -1, hid) < 0 || attr_str(n, "direction", "forward", dir, dirsize) < 0)
		return -1;
	if (*hid <= 0)
		return op_error(n, "attribute hidden_size is required");
	if (node_attr(n, "layout"))
		return op_error(n, "DynamicQuantizeLSTM has no attribute 'layout'");
	if (nin < DQ_NIN)
		return op_error(n, "%zu inputs, expected 12 (X, W, R, B, sequence_lens, initial_h, initial_c, P, W_scale, W_zero_point, R_scale, R_zero_point)",
				nin);
	return 0;
}

/* ---- inference ---- */

static int dqlstm_infer(InferCtx *c)
{
	int64_t hid;
	char dir[32];
	if (dq_attrs(c->node, c->nin, &hid, dir, sizeof dir) < 0)
		return -1;
	for (size_t i = 0; i < DQ_NIN; i++)
		if ((i <= DQ_R || i >= DQ_WS) && infer_need(c, i) < 0)
			return -1;
	const ValueType *x = c->in[DQ_X];
	if (x->elem && x->elem != DT_FLOAT)
		return op_error(c->node, "X is %s, expected float", dtype_name(x->elem));
	if (x->rank >= 0 && x->rank != 3)
		return op_error(c->node, "X must have rank 3, has %d", x->rank);
	Dim seq = {-1, NULL}, batch = {-1, NULL};
	if (x->rank == 3) {
		seq = x->dims[0];
		batch = x->dims[1];
	}
	Dim nd = dim_known(!strcmp(dir, "bidirectional") ? 2 : 1), h = dim_known(hid);
	if (c->nout > 0 && c->out[0]) {
		vt_set_tensor(c->out[0], DT_FLOAT, 4);
		c->out[0]->dims[0] = seq;
		c->out[0]->dims[1] = nd;
		c->out[0]->dims[2] = batch;
		c->out[0]->dims[3] = h;
	}
	for (size_t o = 1; o < c->nout && o < 3; o++)
		if (c->out[o]) {
			vt_set_tensor(c->out[o], DT_FLOAT, 3);
			c->out[o]->dims[0] = nd;
			c->out[o]->dims[1] = batch;
			c->out[o]->dims[2] = h;
		}
	return 0;
}

/* ---- kernel ---- */

/* one weight (W or R) with its quantization parameters */
typedef struct DqWeight {
	const void *data;         /* [dirs, k, ld] */
	int64_t ld;               /* 4H */
	const double *wd;         /* data minus the direction's zero point */
	int is_signed;
	const float *scale;       /* dirs x nscale */
	int64_t nscale;           /* 1 or n */
	int32_t zp[2];            /* per direction */
} DqWeight;

typedef struct Dq {
	DqWeight w, r;
	uint8_t *qa;              /* the quantized operand */
	double *ad;               /* ... minus its zero point */
	double *acc;              /* the sums */
	float *mult;              /* a_scale x weight scale, per column */
} Dq;

/* x[n] to uint8 as onnxruntime's dynamic quantization of an operand */
static void dq_quantize(const float *x, int64_t n, uint8_t *q, float *scale, int32_t *zp)
{
	float mn = 0, mx = 0;
	for (int64_t i = 0; i < n; i++) {
		mn = x[i] < mn ? x[i] : mn;
		mx = x[i] > mx ? x[i] : mx;
	}
	float s = mx == mn ? 1.0f : (mx - mn) / 255.0f;
	float z = 0.0f - mn / s;
	int32_t zi = (int32_t)nn_round_even(z < 0 ? 0 : z > 255 ? 255 : z);
	for (int64_t i = 0; i < n; i++) {
		float v = x[i] / s;
		/* clamp before rounding, as MLAS does (NaN goes to the low end) */
		v = !(v > (float)-zi) ? (float)-zi : v > (float)(255 - zi) ? (float)(255 - zi) : v;
		q[i] = (uint8_t)((int32_t)nn_round_even(v) + zi);
	}
	*scale = s;
	*zp = zi;
}

/* out[m, n] (row stride ldo) = dequantized (a[m, k] * w[k, n]) of direction dir */
static void dq_gemm(Dq *d, const DqWeight *w, int dir, int64_t m, int64_t n, int64_t k, const float *a,
		    float *out, int64_t ldo)
{
	float as;
	int32_t az;
	dq_quantize(a, m * k, d->qa, &as, &az);
	for (int64_t i = 0; i < m * k; i++)
		d->ad[i] = (double)((int32_t)d->qa[i] - az);
	const float *ws = w->scale + dir * w->nscale;
	for (int64_t j = 0; j < n; j++)
		d->mult[j] = as * ws[w->nscale == 1 ? 0 : j];
	cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)m, (int)n, (int)k, 1.0, d->ad, (int)k,
		    w->wd + dir * k * w->ld, (int)w->ld, 0.0, d->acc, (int)n);
	for (int64_t i = 0; i < m; i++)
		for (int64_t j = 0; j < n; j++)
			out[i * ldo + j] = (float)d->acc[i * n + j] * d->mult[j];
}

static void dq_input(const RnnGemm *g, int dir, int64_t rows, int64_t n, int64_t k, const float *x, float *out)
{
	Dq *d = g->p;
	dq_gemm(d, &d->w, dir, rows, n, k, x, out, n);
}

static void dq_recur(const RnnGemm *g, int dir, int64_t batch, int64_t n, int64_t k, const float *h, float *out,
		     int64_t ldo)
{
	Dq *d = g->p;
	dq_gemm(d, &d->r, dir, batch, n, k, h, out, ldo);
}

/* weight input wi with scale input si and zero point zi: [dirs, k, 4H] */
static int dq_weight(RunCtx *c, size_t wi, size_t si, size_t zi, int64_t nd, int64_t k, int64_t gh,
		     DqWeight *w)
{
	static const char *const names[] = {"X", "W", "R", "", "", "", "", "", "W_scale", "W_zero_point",
					    "R_scale", "R_zero_point"};
	const Tensor *t = c->in[wi], *s = c->in[si], *z = c->in[zi];
	char a[128], b[128], b2[128];
	int64_t dw[3] = {nd, k, gh};
	if (t->dtype != DT_INT8 && t->dtype != DT_UINT8)
		return op_error(c->node, "%s is %s, expected int8 or uint8", names[wi], dtype_name(t->dtype));
	if (t->rank != 3 || t->dims[0] != nd || t->dims[1] != k || t->dims[2] != gh)
		return op_error(c->node, "%s has shape %s, expected %s", names[wi],
				shape_str(t->rank, t->dims, a, sizeof a), shape_str(3, dw, b, sizeof b));
	if (s->dtype != DT_FLOAT)
		return op_error(c->node, "%s is %s, expected float", names[si], dtype_name(s->dtype));
	if (!((s->rank == 1 && s->dims[0] == nd) || (s->rank == 2 && s->dims[0] == nd && s->dims[1] == gh))) {
		int64_t d2[2] = {nd, gh};
		return op_error(c->node, "%s has shape %s, expected %s or %s", names[si],
				shape_str(s->rank, s->dims, a, sizeof a), shape_str(1, &nd, b, sizeof b),
				shape_str(2, d2, b2, sizeof b2));
	}
	if (z->dtype != t->dtype)
		return op_error(c->node, "%s is %s, expected %s like %s", names[zi], dtype_name(z->dtype),
				dtype_name(t->dtype), names[wi]);
	if (z->numel != s->numel)
		return op_error(c->node, "%s has %lld elements, %s %lld", names[zi], (long long)z->numel,
				names[si], (long long)s->numel);
	w->data = t->data;
	w->ld = gh;
	w->is_signed = t->dtype == DT_INT8;
	w->scale = s->data;
	w->nscale = s->numel / nd;
	for (int64_t d = 0; d < nd; d++) {
		int32_t *zp = &w->zp[d];
		for (int64_t j = 0; j < w->nscale; j++) {
			int64_t i = d * w->nscale + j;
			int32_t v = w->is_signed ? ((const int8_t *)z->data)[i] : ((const uint8_t *)z->data)[i];
			if (j == 0)
				*zp = v;
			else if (v != *zp)
				return op_error(c->node, "%s differs within direction %lld (%d and %d): onnxruntime reads one zero point per direction",
						names[zi], (long long)d, *zp, v);
		}
		if (w->is_signed && w->nscale > 1 && *zp)
			return op_error(c->node, "%s is %d: int8 weights per column need zero point 0", names[zi],
					*zp);
	}
	return 0;
}

/* The weights minus their zero point as doubles, converted once per plan
 * when constant (kept in the node's cache), else on every run. */
typedef struct DqCache {
	const void *src[2];
	double *wd[2];
} DqCache;

static void dqcache_release(void *p)
{
	DqCache *dc = p;
	for (int i = 0; dc && i < 2; i++)
		free(dc->wd[i]);
	free(dc);
}

static double *dq_convert(const DqWeight *w, const Tensor *t)
{
	double *v = xmalloc(sizeof *v * (size_t)(t->numel ? t->numel : 1));
	int64_t per = t->numel / t->dims[0];
	for (int64_t i = 0; i < t->numel; i++) {
		int32_t x = w->is_signed ? ((const int8_t *)t->data)[i] : ((const uint8_t *)t->data)[i];
		v[i] = (double)(x - w->zp[i / per]);
	}
	return v;
}

/* w->wd for input i (1: W, 2: R) with zero point input zi; *tmp is the
 * caller's to free */
static void dq_weights(RunCtx *c, size_t i, size_t zi, DqWeight *w, double **tmp)
{
	const Tensor *t = c->in[i];
	uint64_t both = ((uint64_t)1 << i) | ((uint64_t)1 << zi);
	*tmp = NULL;
	if (!c->cache || (c->const_in & both) != both) {
		w->wd = *tmp = dq_convert(w, t);
		return;
	}
	DqCache *dc = c->cache->p;
	if (!dc) {
		dc = xcalloc(1, sizeof *dc);
		c->cache->p = dc;
		c->cache->release = dqcache_release;
	}
	/* a plan whose weight data moved converts again */
	if (!dc->wd[i - 1] || dc->src[i - 1] != t->data) {
		if (!dc->wd[i - 1])
			c->cache->bytes += sizeof(double) * (size_t)t->numel;
		free(dc->wd[i - 1]);
		dc->wd[i - 1] = dq_convert(w, t);
		dc->src[i - 1] = t->data;
	}
	w->wd = dc->wd[i - 1];
}

static int dqlstm_run(RunCtx *c)
{
	int64_t hid;
	char dir[32];
	if (dq_attrs(c->node, c->nin, &hid, dir, sizeof dir) < 0)
		return -1;
	for (size_t i = 0; i < DQ_NIN; i++)
		if ((i <= DQ_R || i >= DQ_WS) && run_need(c, i) < 0)
			return -1;
	const Tensor *x = c->in[DQ_X];
	if (x->dtype != DT_FLOAT)
		return op_error(c->node, "X is %s, expected float", dtype_name(x->dtype));
	if (x->rank != 3)
		return op_error(c->node, "X must have rank 3, has %d", x->rank);
	int64_t nd = !strcmp(dir, "bidirectional") ? 2 : 1, seq = x->dims[0], batch = x->dims[1], isz = x->dims[2];
	Dq d = {0};
	if (dq_weight(c, DQ_W, DQ_WS, DQ_WZ, nd, isz, 4 * hid, &d.w) < 0 ||
	    dq_weight(c, DQ_R, DQ_RS, DQ_RZ, nd, hid, 4 * hid, &d.r) < 0)
		return -1;
	double *tw, *tr;
	dq_weights(c, DQ_W, DQ_WZ, &d.w, &tw);
	dq_weights(c, DQ_R, DQ_RZ, &d.r, &tr);
	int64_t na = seq * batch * isz > batch * hid ? seq * batch * isz : batch * hid;
	int64_t nc = seq * batch > batch ? seq * batch : batch;
	d.qa = xmalloc(na > 0 ? (size_t)na : 1);
	d.ad = xmalloc(sizeof *d.ad * (size_t)(na > 0 ? na : 1));
	d.acc = xmalloc(sizeof *d.acc * (size_t)(nc * 4 * hid > 0 ? nc * 4 * hid : 1));
	d.mult = xmalloc(sizeof *d.mult * (size_t)(4 * hid));
	RnnGemm g = {.input = dq_input, .recur = dq_recur, .p = &d};
	int r = rnn_lstm_run_gemm(c, &g);
	free(d.qa);
	free(d.ad);
	free(d.acc);
	free(d.mult);
	free(tw);
	free(tr);
	return r;
}

OPERATOR(com_microsoft, DynamicQuantizeLSTM, 1, dqlstm_infer, dqlstm_run)
