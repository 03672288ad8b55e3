/* rnn.c — recurrent networks: RNN, GRU, LSTM.
 *
 * One kernel serves all three: per direction the input projection of the
 * whole sequence is one product (X * W^T), then each step multiplies the
 * hidden state by R^T and applies the cell's gates (rec_proj: fgemm where
 * the CPU has AVX-512, else OpenBLAS). R is read in place: streaming
 * models such as silero-vad run one step per call, where a transposed copy
 * of R cost more than everything else. Supported: directions
 * forward/reverse/bidirectional, activations with their alpha/beta, clip,
 * sequence_lens (finished batch entries keep their state and emit zeros),
 * initial states, peepholes, input_forget, linear_before_reset and layout.
 * Types float, float16 and double compute in float32, as the other float
 * kernels do (nn.h): constant weights (W, R, B, P) are converted once per
 * plan and kept in the node's cache, the other inputs on every call, and
 * the outputs are converted back; other types are a named error.
 * rnn_lstm_run_gemm() (rnn.h) is the LSTM with both products supplied by
 * the caller, for com.microsoft DynamicQuantizeLSTM (dqlstm.c). */
#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "ops/fgemm.h"
#include "ops/nn.h"
#include "ops/op.h"
#include "ops/rnn.h"
#include "ops/shapeutil.h"
#include "util.h"

enum { CELL_RNN, CELL_GRU, CELL_LSTM };

static int ngates(int cell)
{
	return cell == CELL_RNN ? 1 : cell == CELL_GRU ? 3 : 4;
}

/* ---- activations ---- */

typedef struct Act {
	int kind;
	float alpha, beta;
} Act;

enum { A_SIGMOID, A_TANH, A_RELU, A_AFFINE, A_LEAKYRELU, A_THRESHRELU, A_SCALEDTANH,
       A_HARDSIGMOID, A_ELU, A_SOFTSIGN, A_SOFTPLUS };

static const struct {
	const char *name;
	int kind, nalpha, nbeta;
	float alpha, beta;
} acts[] = {
	{"Sigmoid", A_SIGMOID, 0, 0, 0, 0},
	{"Tanh", A_TANH, 0, 0, 0, 0},
	{"Relu", A_RELU, 0, 0, 0, 0},
	{"Affine", A_AFFINE, 1, 1, 1.0f, 0.0f},
	{"LeakyRelu", A_LEAKYRELU, 1, 0, 0.01f, 0},
	{"ThresholdedRelu", A_THRESHRELU, 1, 0, 1.0f, 0},
	{"ScaledTanh", A_SCALEDTANH, 1, 1, 1.0f, 1.0f},
	{"HardSigmoid", A_HARDSIGMOID, 1, 1, 0.2f, 0.5f},
	{"Elu", A_ELU, 1, 0, 1.0f, 0},
	{"Softsign", A_SOFTSIGN, 0, 0, 0, 0},
	{"Softplus", A_SOFTPLUS, 0, 0, 0, 0},
};

/* tanh through expf, about three times faster than libm's tanhf and within
 * 1e-6 relative of it: a Taylor polynomial near 0, where 1 - e^-2|x| would
 * cancel, and +-1 beyond float's resolution */
static float tanh_f(float x)
{
	float ax = fabsf(x);
	if (ax < 0.0625f) {
		float x2 = x * x;
		return x * (1 + x2 * (-1.0f / 3 + x2 * (2.0f / 15 + x2 * (-17.0f / 315))));
	}
	if (ax > 9.0f)
		return copysignf(1.0f, x);
	float e = expf(-2 * ax);
	return copysignf((1 - e) / (1 + e), x);
}

static float act_apply(const Act *a, float x)
{
	switch (a->kind) {
	case A_SIGMOID: return 1.0f / (1.0f + expf(-x));
	case A_TANH: return tanh_f(x);
	case A_RELU: return x > 0 ? x : 0;
	case A_AFFINE: return a->alpha * x + a->beta;
	case A_LEAKYRELU: return x >= 0 ? x : a->alpha * x;
	case A_THRESHRELU: return x > a->alpha ? x : 0;
	case A_SCALEDTANH: return a->alpha * tanh_f(a->beta * x);
	case A_HARDSIGMOID: {
		float v = a->alpha * x + a->beta;
		return v < 0 ? 0 : v > 1 ? 1 : v;
	}
	case A_ELU: return x >= 0 ? x : a->alpha * (expf(x) - 1);
	case A_SOFTSIGN: return x / (1 + fabsf(x));
	case A_SOFTPLUS: return log1pf(expf(x));
	}
	return x;
}

typedef struct RnnAttrs {
	int cell, ndir, dirs[2];      /* dirs: 0 forward, 1 reverse */
	int64_t hidden, layout, input_forget, lbr;
	float clip;                   /* <= 0: none */
	Act act[2][3];                /* per direction: f, g, h */
} RnnAttrs;

static int rnn_attrs(const Onnx__NodeProto *n, int64_t opset, int cell, RnnAttrs *a)
{
	char dir[32];
	memset(a, 0, sizeof *a);
	a->cell = cell;
	if (attr_int(n, "hidden_size", -1, &a->hidden) < 0 ||
	    attr_str(n, "direction", "forward", dir, sizeof dir) < 0 ||
	    attr_int(n, "layout", 0, &a->layout) < 0 || attr_float(n, "clip", 0, &a->clip) < 0)
		return -1;
	if (cell == CELL_LSTM && attr_int(n, "input_forget", 0, &a->input_forget) < 0)
		return -1;
	if (cell == CELL_GRU && attr_int(n, "linear_before_reset", 0, &a->lbr) < 0)
		return -1;
	if (!strcmp(dir, "forward")) {
		a->ndir = 1;
	} else if (!strcmp(dir, "reverse")) {
		a->ndir = 1;
		a->dirs[0] = 1;
	} else if (!strcmp(dir, "bidirectional")) {
		a->ndir = 2;
		a->dirs[1] = 1;
	} else {
		return op_error(n, "unknown direction '%s'", dir);
	}
	if (a->layout != 0 && a->layout != 1)
		return op_error(n, "layout must be 0 or 1, is %lld", (long long)a->layout);
	if (opset < 14 && a->layout)
		return op_error(n, "attribute 'layout' needs opset 14");
	/* activations */
	int nper = cell == CELL_RNN ? 1 : cell == CELL_GRU ? 2 : 3;
	const Onnx__AttributeProto *aa = node_attr(n, "activations");
	const float *alpha, *beta;
	size_t nalpha, nbeta, ia = 0, ib = 0;
	if (attr_floats(n, "activation_alpha", &alpha, &nalpha) < 0 ||
	    attr_floats(n, "activation_beta", &beta, &nbeta) < 0)
		return -1;
	for (int d = 0; d < a->ndir; d++)
		for (int k = 0; k < nper; k++) {
			const char *nm;
			if (aa && aa->n_strings) {
				/* one list per direction; a bidirectional node given
				 * one list uses it for both (as onnxruntime does) */
				size_t idx = (size_t)(d * nper + k);
				if (aa->n_strings != (size_t)(nper * a->ndir) &&
				    !(a->ndir == 2 && aa->n_strings == (size_t)nper))
					return op_error(n, "activations has %zu entries, expected %d",
							aa->n_strings, nper * a->ndir);
				if (idx >= aa->n_strings)
					idx = (size_t)k;
				char buf[64];
				size_t l = aa->strings[idx].len < sizeof buf - 1 ? aa->strings[idx].len : sizeof buf - 1;
				memcpy(buf, aa->strings[idx].data, l);
				buf[l] = 0;
				nm = buf;
				size_t j;
				for (j = 0; j < ARRAY_LEN(acts); j++)
					if (!strcasecmp(acts[j].name, nm))
						break;
				if (j == ARRAY_LEN(acts))
					return op_error(n, "activation '%s' is not supported", nm);
				Act *x = &a->act[d][k];
				x->kind = acts[j].kind;
				x->alpha = acts[j].alpha;
				x->beta = acts[j].beta;
				if (acts[j].nalpha && alpha && ia < nalpha)
					x->alpha = alpha[ia++];
				if (acts[j].nbeta && beta && ib < nbeta)
					x->beta = beta[ib++];
			} else {
				/* defaults: RNN Tanh; GRU Sigmoid, Tanh; LSTM Sigmoid, Tanh, Tanh */
				a->act[d][k].kind = cell == CELL_RNN ? A_TANH : k == 0 ? A_SIGMOID : A_TANH;
			}
		}
	return 0;
}

/* ---- inference ---- */

static int rnn_infer_cell(InferCtx *c, int cell)
{
	RnnAttrs a;
	if (rnn_attrs(c->node, c->opset, cell, &a) < 0)
		return -1;
	if (c->nin < 3 || !c->in[0] || !c->in[1] || !c->in[2])
		return op_error(c->node, "X, W and R are required");
	const ValueType *x = c->in[0], *w = c->in[1], *r = c->in[2];
	if (x->rank >= 0 && x->rank != 3)
		return op_error(c->node, "X must have rank 3, has %d", x->rank);
	Dim seq = {-1, NULL}, batch = {-1, NULL}, hid = {-1, NULL};
	if (x->rank == 3) {
		seq = x->dims[a.layout ? 1 : 0];
		batch = x->dims[a.layout ? 0 : 1];
	}
	if (a.hidden > 0)
		hid = dim_known(a.hidden);
	else if (r->rank == 3)
		hid = r->dims[2];
	else if (w->rank == 3 && w->dims[1].v >= 0)
		hid = dim_known(w->dims[1].v / ngates(cell));
	Dim nd = dim_known(a.ndir);
	int elem = x->elem;
	if (c->nout > 0) {
		ValueType *y = c->out[0];
		vt_set_tensor(y, elem, 4);
		if (a.layout) {
			y->dims[0] = batch;
			y->dims[1] = seq;
			y->dims[2] = nd;
		} else {
			y->dims[0] = seq;
			y->dims[1] = nd;
			y->dims[2] = batch;
		}
		y->dims[3] = hid;
	}
	for (size_t o = 1; o < c->nout && o < (cell == CELL_LSTM ? 3u : 2u); o++) {
		ValueType *y = c->out[o];
		vt_set_tensor(y, elem, 3);
		y->dims[0] = a.layout ? batch : nd;
		y->dims[1] = a.layout ? nd : batch;
		y->dims[2] = hid;
	}
	return 0;
}

static int rnn_infer(InferCtx *c) { return rnn_infer_cell(c, CELL_RNN); }
static int gru_infer(InferCtx *c) { return rnn_infer_cell(c, CELL_GRU); }
static int lstm_infer(InferCtx *c) { return rnn_infer_cell(c, CELL_LSTM); }

/* ---- kernel ---- */

static float clipf(float v, float c)
{
	if (c > 0)
		return v < -c ? -c : v > c ? c : v;
	return v;
}

/* t has X's type and the given shape */
static int check_in(RunCtx *c, const Tensor *t, int dt, const char *what, int rank, const int64_t *dims)
{
	if (t->dtype != dt)
		return op_error(c->node, "%s is %s, expected %s like X", what, dtype_name(t->dtype), dtype_name(dt));
	int ok = t->rank == rank;
	for (int i = 0; ok && i < rank; i++)
		ok = t->dims[i] == dims[i];
	if (!ok) {
		char a[128], b[128];
		return op_error(c->node, "%s has shape %s, expected %s", what,
				shape_str(t->rank, t->dims, a, sizeof a), shape_str(rank, dims, b, sizeof b));
	}
	return 0;
}

/* Float32 copies of constant inputs that are not float32, by input index,
 * converted on the first run of a plan and kept in the node's cache. */
typedef struct RnnCache {
	const void *src[8];       /* the data each copy was made from */
	float *f[8];
} RnnCache;

static void rnncache_release(void *p)
{
	RnnCache *rc = p;
	for (int i = 0; rc && i < 8; i++)
		free(rc->f[i]);
	free(rc);
}

/* float32 data of input i (NULL when absent): its own data when float32,
 * the cached copy when it is a constant of the plan, else a copy made now
 * in *tmp (the caller frees it) */
static const float *rnn_f32(RunCtx *c, size_t i, float **tmp)
{
	const Tensor *t = i < c->nin ? c->in[i] : NULL;
	*tmp = NULL;
	if (!t)
		return NULL;
	if (t->dtype == DT_FLOAT || i >= 8 || !c->cache || !(c->const_in & ((uint64_t)1 << i)))
		return nn_f32_in(c, t, tmp);
	RnnCache *rc = c->cache->p;
	if (!rc) {
		rc = xcalloc(1, sizeof *rc);
		c->cache->p = rc;
		c->cache->release = rnncache_release;
	}
	if (!rc->f[i] || rc->src[i] != t->data) {
		if (!rc->f[i])
			c->cache->bytes += sizeof(float) * (size_t)t->numel;
		free(rc->f[i]);
		rc->f[i] = nn_f32_copy(t);
		rc->src[i] = t->data;
	}
	return rc->f[i];
}

/* n floats of op_scratch's slot (OP_SCRATCH_KERNEL + k), else malloc'd
 * into *own for the caller to free */
static float *rnn_scratch(int k, size_t n, float **own)
{
	float *p = op_scratch(OP_SCRATCH_KERNEL + k, sizeof(float) * (n ? n : 1));
	return p ? p : (*own = xmalloc(sizeof(float) * (n ? n : 1)));
}

static const Tensor *opt_in(RunCtx *c, size_t i)
{
	return i < c->nin ? c->in[i] : NULL;
}

/* out[rows, n] (row stride ldo) = h[rows, k] (row stride ldh) * R[n, k]^T,
 * R row-major with rows of k. Where the CPU has fgemm (fgemm.h) it computes
 * out^T = R * h^T (h^T and out^T being small copies; none for one row):
 * the sum over k in one order whatever the thread count, and OpenBLAS is
 * never loaded for these products (silero-vad at batch 1 then loads none:
 * its buffer, data and code pages were 0.3 MB of anonymous and over 1 MB
 * of peak RSS). Elsewhere OpenBLAS: sgemv for one row, sgemm for more. */
static void rec_proj(int64_t rows, int64_t n, int64_t k, const float *h, int64_t ldh, const float *R,
		     float *out, int64_t ldo, int threads)
{
	if (fgemm_available() && rows == 1) {
		fgemm(n, 1, k, R, k, h, 1, NULL, 0, out, 1, threads);
	} else if (fgemm_available()) {
		/* the step's scratch (both in one slot), else malloc'd */
		float *own = NULL, *ht = rnn_scratch(1, (size_t)((k + n) * rows), &own);
		float *ot = ht + k * rows;
		for (int64_t r = 0; r < rows; r++)
			for (int64_t kk = 0; kk < k; kk++)
				ht[kk * rows + r] = h[r * ldh + kk];
		fgemm(n, rows, k, R, k, ht, rows, NULL, 0, ot, rows, threads);
		for (int64_t r = 0; r < rows; r++)
			for (int64_t j = 0; j < n; j++)
				out[r * ldo + j] = ot[j * rows + r];
		free(own);
	} else if (rows == 1) {
		cblas_sgemv(CblasRowMajor, CblasNoTrans, (int)n, (int)k, 1.0f, R, (int)k, h, 1, 0.0f, out, 1);
	} else {
		cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)rows, (int)n, (int)k, 1.0f, h,
			    (int)ldh, R, (int)k, 0.0f, out, (int)ldo);
	}
}

/* q: the products of a quantized LSTM (rnn.h), else NULL */
static int rnn_run_cell(RunCtx *c, int cell, const RnnGemm *q)
{
	RnnAttrs a;
	if (rnn_attrs(c->node, c->opset, cell, &a) < 0)
		return -1;
	if (c->nin < 3 || !c->in[0] || !c->in[1] || !c->in[2])
		return op_error(c->node, "X, W and R are required");
	const Tensor *x = c->in[0], *w = c->in[1], *r = c->in[2];
	const Tensor *b = opt_in(c, 3), *sl = opt_in(c, 4), *h0 = opt_in(c, 5);
	const Tensor *c0 = cell == CELL_LSTM ? opt_in(c, 6) : NULL;
	const Tensor *p = cell == CELL_LSTM ? opt_in(c, 7) : NULL;
	if (x->dtype != DT_FLOAT && x->dtype != DT_FLOAT16 && x->dtype != DT_DOUBLE)
		return op_unsupported_type(c->node, c->opset, x->dtype);
	if (x->rank != 3)
		return op_error(c->node, "X must have rank 3, has %d", x->rank);
	int64_t seq = x->dims[a.layout ? 1 : 0], batch = x->dims[a.layout ? 0 : 1], isz = x->dims[2];
	int G = ngates(cell);
	int64_t hid = a.hidden > 0 ? a.hidden : (r->rank == 3 && !q ? r->dims[2] : -1), nd = a.ndir;
	if (hid <= 0)
		return op_error(c->node, "hidden_size is required");
	int64_t dw[3] = {nd, G * hid, isz}, dr[3] = {nd, G * hid, hid}, db[2] = {nd, 2 * G * hid};
	int64_t dh[3] = {a.layout ? batch : nd, a.layout ? nd : batch, hid}, dp[2] = {nd, 3 * hid};
	int dt = x->dtype;
	if ((!q && (check_in(c, w, dt, "W", 3, dw) < 0 || check_in(c, r, dt, "R", 3, dr) < 0)) ||
	    (b && check_in(c, b, dt, "B", 2, db) < 0) || (h0 && check_in(c, h0, dt, "initial_h", 3, dh) < 0) ||
	    (c0 && check_in(c, c0, dt, "initial_c", 3, dh) < 0) || (p && check_in(c, p, dt, "P", 2, dp) < 0))
		return -1;
	if (sl && ((sl->dtype != DT_INT32 && sl->dtype != DT_INT64) || sl->numel != batch))
		return op_error(c->node, "sequence_lens must be int32 [%lld]", (long long)batch);
	int64_t *lens = xmalloc(sizeof *lens * (size_t)(batch ? batch : 1));
	for (int64_t i = 0; i < batch; i++) {
		lens[i] = sl ? tensor_get_i64(sl, i) : seq;
		if (lens[i] < 0 || lens[i] > seq) {
			int64_t l = lens[i];
			free(lens);
			return op_error(c->node, "sequence length %lld is out of range 0..%lld",
					(long long)l, (long long)seq);
		}
	}
	int64_t dy[4];
	if (a.layout) {
		dy[0] = batch; dy[1] = seq; dy[2] = nd; dy[3] = hid;
	} else {
		dy[0] = seq; dy[1] = nd; dy[2] = batch; dy[3] = hid;
	}
	int ret = -1;
	float *xw = NULL, *hr = NULL, *h = NULL, *cs = NULL, *tmp = NULL, *gates = NULL, *st_own = NULL;
	/* float32 views of the inputs (in[i] -> fin[i], copies in ftmp[i]) and
	 * float32 buffers of the outputs (copies in otmp) */
	float *ftmp[8] = {0}, *otmp[3] = {0};
	const float *fin[8] = {0};
	float *Y = NULL, *Yh = NULL, *Yc = NULL;
	for (size_t i = 0; i < 8; i++) /* every type was checked: no error here */
		if (i != 4 && !(q && (i == 1 || i == 2)))
			fin[i] = rnn_f32(c, i, &ftmp[i]);
	if ((c->nout > 0 && !(Y = nn_f32_out(c, 0, dt, 4, dy, &otmp[0]))) ||
	    (c->nout > 1 && !(Yh = nn_f32_out(c, 1, dt, 3, dh, &otmp[1]))) ||
	    (cell == CELL_LSTM && c->nout > 2 && !(Yc = nn_f32_out(c, 2, dt, 3, dh, &otmp[2]))))
		goto out;
	int64_t gh = G * hid, rows = seq * batch, maxlen = 0;
	int yseq = c->node->n_output > 0 && *c->node->output[0];
	for (int64_t i = 0; i < batch; i++)
		maxlen = lens[i] > maxlen ? lens[i] : maxlen;
	/* the states in one zeroed block of the step's scratch (else malloc'd) */
	size_t nst = (size_t)(rows * gh + batch * gh + 3 * batch * hid + gh);
	xw = rnn_scratch(0, nst, &st_own);
	memset(xw, 0, sizeof *xw * nst);
	hr = xw + rows * gh;
	h = hr + batch * gh;
	cs = h + batch * hid;
	tmp = cs + batch * hid;
	gates = tmp + batch * hid;
	const float *X = fin[0];
	for (int di = 0; di < a.ndir; di++) {
		const float *W = q ? NULL : fin[1] + di * gh * isz;
		const float *R = q ? NULL : fin[2] + di * gh * hid;
		const float *Wb = b ? fin[3] + di * 2 * gh : NULL;
		const float *Rb = b ? Wb + gh : NULL;
		const float *P = p ? fin[7] + di * 3 * hid : NULL;
		const Act *f = a.act[di];
		int rev = a.dirs[di];
		/* input projection of every (time, batch) row */
		if (q) {
			memset(xw, 0, sizeof *xw * (size_t)(rows * gh));
			if (maxlen && batch && gh && isz)
				q->input(q, di, maxlen * batch, gh, isz, X, xw);
		} else if (rows && gh && isz)
			rec_proj(rows, gh, isz, X, isz, W, xw, gh, c->threads);
		else
			memset(xw, 0, sizeof *xw * (size_t)(rows * gh));
		for (int64_t bi = 0; bi < batch; bi++)
			for (int64_t k = 0; k < hid; k++) {
				/* initial states: [nd, batch, hid] or [batch, nd, hid] */
				int64_t o = a.layout ? (bi * nd + di) * hid + k : (di * batch + bi) * hid + k;
				h[bi * hid + k] = h0 ? fin[5][o] : 0;
				cs[bi * hid + k] = c0 ? fin[6][o] : 0;
			}
		for (int64_t step = 0; step < seq; step++) {
			int64_t t0 = rev ? seq - 1 - step : step;
			/* recurrent projection; for GRU without linear_before_reset the
			 * h gate's part is computed after the reset gate */
			int64_t ng = cell == CELL_GRU && !a.lbr ? 2 * hid : gh;
			if (batch && hid && q) {
				/* quantized, the batch shares one range: as onnxruntime,
				 * whose state of an entry finished a step ago is read
				 * from Y (zeros) when Y is an output */
				const float *hq = h;
				if (yseq) {
					memcpy(tmp, h, sizeof *tmp * (size_t)(batch * hid));
					for (int64_t bi = 0; bi < batch; bi++)
						if (step > lens[bi])
							memset(tmp + bi * hid, 0, sizeof *tmp * (size_t)hid);
					hq = tmp;
				}
				q->recur(q, di, batch, ng, hid, hq, hr, gh);
			} else if (batch && hid)
				rec_proj(batch, ng, hid, h, hid, R, hr, gh, c->threads);
			else
				memset(hr, 0, sizeof *hr * (size_t)(batch * gh));
			if (cell == CELL_GRU && !a.lbr) {
				/* r = f(...); then (r . H) * Rh^T */
				for (int64_t bi = 0; bi < batch; bi++) {
					const float *xr = xw + (a.layout ? bi * seq + t0 : t0 * batch + bi) * gh;
					for (int64_t k = 0; k < hid; k++) {
						float v = xr[hid + k] + hr[bi * gh + hid + k];
						if (Wb)
							v += Wb[hid + k] + Rb[hid + k];
						float rg = act_apply(&f[0], clipf(v, a.clip));
						tmp[bi * hid + k] = rg * h[bi * hid + k];
					}
				}
				if (batch && hid)
					rec_proj(batch, hid, hid, tmp, hid, R + 2 * hid * hid, hr + 2 * hid, gh,
						 c->threads);
			}
			for (int64_t bi = 0; bi < batch; bi++) {
				float *hb = h + bi * hid, *cb = cs + bi * hid;
				/* quantized and reversed, each entry starts at its own
				 * last step, as onnxruntime's reversed copy of X does, so
				 * a step's shared range covers the same states as its */
				int64_t t = q && rev ? (step < lens[bi] ? lens[bi] - 1 - step : step) : t0;
				int64_t yo = a.layout ? ((bi * seq + t) * nd + di) * hid : ((t * nd + di) * batch + bi) * hid;
				if (t >= lens[bi]) {
					if (Y)
						memset(Y + yo, 0, sizeof *Y * (size_t)hid);
					continue;
				}
				const float *xr = xw + (a.layout ? bi * seq + t : t * batch + bi) * gh;
				const float *rr = hr + bi * gh;
				for (int64_t k = 0; k < gh; k++) {
					gates[k] = xr[k] + rr[k];
					if (Wb)
						gates[k] += Wb[k] + Rb[k];
				}
				if (cell == CELL_RNN) {
					for (int64_t k = 0; k < hid; k++)
						hb[k] = act_apply(&f[0], clipf(gates[k], a.clip));
				} else if (cell == CELL_GRU) {
					for (int64_t k = 0; k < hid; k++) {
						float z = act_apply(&f[0], clipf(gates[k], a.clip));
						float hh;
						if (a.lbr) {
							float rg = act_apply(&f[0], clipf(gates[hid + k], a.clip));
							float v = xr[2 * hid + k] + (Wb ? Wb[2 * hid + k] : 0) +
								  rg * (rr[2 * hid + k] + (Rb ? Rb[2 * hid + k] : 0));
							hh = act_apply(&f[1], clipf(v, a.clip));
						} else {
							hh = act_apply(&f[1], clipf(gates[2 * hid + k], a.clip));
						}
						hb[k] = (1 - z) * hh + z * hb[k];
					}
				} else {
					/* gates i, o, f, c; peepholes i, o, f */
					for (int64_t k = 0; k < hid; k++) {
						float cp = cb[k];
						float vi = gates[k] + (P ? P[k] * cp : 0);
						float vf = gates[2 * hid + k] + (P ? P[2 * hid + k] * cp : 0);
						float ig = act_apply(&f[0], clipf(vi, a.clip));
						float fg = a.input_forget ? 1 - ig : act_apply(&f[0], clipf(vf, a.clip));
						float cg = act_apply(&f[1], clipf(gates[3 * hid + k], a.clip));
						float cn = fg * cp + ig * cg;
						float vo = gates[hid + k] + (P ? P[hid + k] * cn : 0);
						float og = act_apply(&f[0], clipf(vo, a.clip));
						cb[k] = cn;
						hb[k] = og * act_apply(&f[2], cn);
					}
				}
				if (Y)
					memcpy(Y + yo, hb, sizeof *Y * (size_t)hid);
			}
		}
		for (int64_t bi = 0; bi < batch; bi++) {
			int64_t o = a.layout ? (bi * nd + di) * hid : (di * batch + bi) * hid;
			if (Yh)
				memcpy(Yh + o, h + bi * hid, sizeof *h * (size_t)hid);
			if (Yc)
				memcpy(Yc + o, cs + bi * hid, sizeof *cs * (size_t)hid);
		}
	}
	for (size_t i = 0; i < 3; i++)
		if (otmp[i]) {
			nn_f32_done(c->out[i], otmp[i]);
			otmp[i] = NULL;
		}
	ret = 0;
out:
	for (size_t i = 0; i < 8; i++)
		free(ftmp[i]);
	for (size_t i = 0; i < 3; i++)
		free(otmp[i]);
	free(lens);
	free(st_own);
	return ret;
}

static int rnn_run(RunCtx *c) { return rnn_run_cell(c, CELL_RNN, NULL); }
static int gru_run(RunCtx *c) { return rnn_run_cell(c, CELL_GRU, NULL); }
static int lstm_run(RunCtx *c) { return rnn_run_cell(c, CELL_LSTM, NULL); }

int rnn_lstm_run_gemm(RunCtx *c, const RnnGemm *g)
{
	return rnn_run_cell(c, CELL_LSTM, g);
}

OPERATOR(ai_onnx, RNN, 1, rnn_infer, rnn_run)
OPERATOR(ai_onnx, GRU, 1, gru_infer, gru_run)
OPERATOR(ai_onnx, LSTM, 1, lstm_infer, lstm_run)
