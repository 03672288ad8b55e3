/* weightonly.c — weight-only blockwise quantization (quantize =
 * weight-only), for transformer decoders: weights become 4- or 8-bit codes
 * in blocks of block_size values along the reduction axis K, each block
 * with its own scale and (asymmetric) zero point; activations stay float.
 *
 * A weight W is read as N rows of K values: MatMul's B [K, N], Gemm's B
 * ([K, N], or [N, K] with transB), or a Transpose of a 2-D initializer
 * E [N, K] (a decoder whose lm_head reads the embedding table it shares
 * with the token Gather). Block b of row n is the values k in
 * [b * block, min(K, (b + 1) * block)); dequantized, a value is
 * (code - zero point) * scale.
 *
 *   rtn, asymmetric: lo = min(0, min x), hi = max(0, max x),
 *       scale = (hi - lo) / (2^bits - 1), zero point = round(-lo / scale)
 *   rtn, symmetric:  scale = max |x| / (2^(bits-1) - 1), zero point
 *       2^(bits-1) (the codes are then signed values plus 2^(bits-1))
 *   hqq: HQQ's half-quadratic optimization of the zero point (shrinkage of
 *       the error under an l_p norm, p = 0.7, beta 10 growing by 1.01, up
 *       to 20 rounds while the mean absolute error falls), from the
 *       block's own min and max; the zero point is then rounded to an
 *       integer (both formats store integer zero points) and the scale
 *       refit by least squares to the codes, twice. A block keeps rtn's
 *       parameters where they reconstruct it with a smaller squared error
 *       (quant.json counts the blocks that kept HQQ's).
 *
 * A code is clamp(round_half_even(x / scale) + zero point, 0, 2^bits - 1).
 * Every block is computed alone (rows split among QuantOpts.threads), so
 * the bytes never depend on a thread count.
 *
 * Formats:
 *   matmulnbits: the MatMul (or Gemm) becomes com.microsoft MatMulNBits
 *       (A, B uint8 [N, n_blocks, block * bits / 8] with codes packed low
 *       bits first, scales float [N * n_blocks], zero_points uint8
 *       [N * ceil(n_blocks * bits / 8)] packed the same way; absent when
 *       symmetric, where the kernel's default 2^(bits-1) holds), attributes
 *       K, N, bits, block_size. A K that does not divide by the block is
 *       padded with codes equal to the block's zero point (the value 0).
 *       Gemm's alpha becomes a Mul and its C (beta 1) an Add after it.
 *   qdq: the weight becomes int4/int8 (symmetric, no zero point) or
 *       uint4/uint8 with zero points, in its own shape, read by an
 *       opset-21 DequantizeLinear with axis K and block_size feeding the
 *       unchanged MatMul, Gemm or Transpose; needs a model at opset >= 21.
 *
 * lm_head (a MatMul or Gemm whose output reaches the graph's first output
 * through Add, Reshape, Cast and the like) gets quantize.lm-head-bits (8 by
 * default: a 4-bit lm_head makes decoders repeat themselves); an embedding
 * Gather of a 2-D float initializer gets quantize.embedding-bits: with
 * matmulnbits it becomes com.microsoft GatherBlockQuantized (uint8 codes
 * [V, H * bits / 8] packed over the flat index, scales and packed zero
 * points [V, ...] as MatMulNBits's, blocks along H; src/ops/gatherbq.c
 * runs it), with qdq DequantizeLinear (int8, one symmetric scale per row,
 * opset >= 13) + Gather. quantize.node-bits sets a node's bits by name;
 * 0 bits means float. Only the main graph is rewritten.
 *
 * Weights held in external data (a model saved next) get their scales and
 * zero points now, reading the weight once, and their codes while the
 * model is written (model_defer): a big model never holds its results. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "onnx/node.h"
#include "ops/par.h"
#include "quant/internal.h"

const char *const quant_weight_only_ops[] = {"Gather", "Gemm", "MatMul", NULL};

/* HQQ's settings (as the HQQ paper and onnxruntime's HQQ quantizer) */
#define HQQ_P 0.7f
#define HQQ_BETA 10.0f
#define HQQ_KAPPA 1.01f
#define HQQ_ITERS 20

/* a weight's blockwise parameters */
typedef struct WoParams {
	int64_t N, K, nblk;
	int bits, block;
	int nk;                   /* stored [N, K] (else [K, N]) */
	float *scales;            /* [N, nblk] */
	uint8_t *zps;             /* [N, nblk]: codes 0 .. 2^bits - 1 */
	int64_t hqq_kept;         /* blocks that kept HQQ's parameters */
} WoParams;

static void params_free(WoParams *p)
{
	if (p) {
		free(p->scales);
		free(p->zps);
		free(p);
	}
}

/* v rounded to the nearest integer, ties to even: nearbyintf's result in
 * the default rounding mode, without its call (adding 2^23 leaves no
 * fraction bits, so the hardware rounds the sum) */
static inline float round_even(float v)
{
	float c = copysignf(0x1p23f, v);
	return fabsf(v) < 0x1p23f ? (v + c) - c : v;
}

static inline int wo_code(float x, float s, int z, int qmax)
{
	float v = round_even(x / s) + (float)z;
	return v < 0 ? 0 : v > (float)qmax ? qmax : (int)v;
}

/* squared error of x[0, L) quantized with (s, z) */
static double block_err(const float *x, int64_t L, float s, int z, int qmax)
{
	double e = 0;
	for (int64_t i = 0; i < L; i++) {
		double d = (double)x[i] - (double)((float)(wo_code(x[i], s, z, qmax) - z) * s);
		e += d * d;
	}
	return e;
}

static void rtn_block(const float *x, int64_t L, int bits, int sym, float *s, int *z)
{
	int qmax = (1 << bits) - 1;
	if (sym) {
		float a = 0;
		for (int64_t i = 0; i < L; i++)
			a = fabsf(x[i]) > a ? fabsf(x[i]) : a;
		int h = 1 << (bits - 1);
		*s = a > 0 ? a / (float)(h - 1) : 1.0f;
		*z = h;
		return;
	}
	float lo = 0, hi = 0;
	for (int64_t i = 0; i < L; i++) {
		lo = x[i] < lo ? x[i] : lo;
		hi = x[i] > hi ? x[i] : hi;
	}
	if (!(hi > lo)) {
		*s = 1.0f;
		*z = 0;
		return;
	}
	*s = (hi - lo) / (float)qmax;
	float zf = round_even(-lo / *s);
	*z = zf < 0 ? 0 : zf > (float)qmax ? qmax : (int)zf;
}

/* the scale that fits x best to the codes of (s, z) in least squares */
static float refit_scale(const float *x, int64_t L, float s, int z, int qmax)
{
	double num = 0, den = 0;
	for (int64_t i = 0; i < L; i++) {
		double q = wo_code(x[i], s, z, qmax) - z;
		num += (double)x[i] * q;
		den += q * q;
	}
	return den > 0 && num > 0 ? (float)(num / den) : s;
}

/* HQQ (asymmetric); 1 when its parameters beat rtn's (given in s, z) */
static int hqq_block(const float *x, int64_t L, int bits, float *s, int *z)
{
	int qmax = (1 << bits) - 1;
	float lo = x[0], hi = x[0];
	for (int64_t i = 1; i < L; i++) {
		lo = x[i] < lo ? x[i] : lo;
		hi = x[i] > hi ? x[i] : hi;
	}
	if (!(hi > lo))
		return 0;
	float inv = (float)qmax / (hi - lo), zero = -lo * inv, best_zero = zero, beta = HQQ_BETA;
	double best = INFINITY;
	for (int it = 0; it < HQQ_ITERS; it++) {
		double err = 0, acc = 0;
		for (int64_t i = 0; i < L; i++) {
			float q = round_even(x[i] * inv + zero);
			q = q < 0 ? 0 : q > (float)qmax ? (float)qmax : q;
			float e = x[i] - (q - zero) / inv, a = fabsf(e), we = 0;
			if (a > 0) {
				float sh = a - powf(a, HQQ_P - 1.0f) / beta;
				we = sh > 0 ? copysignf(sh, e) : 0;
			}
			err += a;
			acc += (double)(q - (x[i] - we) * inv);
		}
		err /= (double)L;
		if (!(err < best))
			break;
		best = err;
		best_zero = zero;
		zero = (float)(acc / (double)L);
		beta *= HQQ_KAPPA;
	}
	float hs = 1.0f / inv, zr = round_even(best_zero);
	int hz = zr < 0 ? 0 : zr > (float)qmax ? qmax : (int)zr;
	for (int r = 0; r < 2; r++)
		hs = refit_scale(x, L, hs, hz, qmax);
	if (block_err(x, L, hs, hz, qmax) < block_err(x, L, *s, *z, qmax)) {
		*s = hs;
		*z = hz;
		return 1;
	}
	return 0;
}

/* the parameters of row n's blocks, its K values in row; the number of
 * blocks that kept HQQ's */
static int64_t row_params(WoParams *p, int64_t n, const float *row, int sym, int hqq)
{
	int64_t kept = 0;
	for (int64_t b = 0; b < p->nblk; b++) {
		int64_t k0 = b * p->block, L = p->K - k0 < p->block ? p->K - k0 : p->block;
		float s;
		int z;
		rtn_block(row + k0, L, p->bits, sym, &s, &z);
		if (hqq && hqq_block(row + k0, L, p->bits, &s, &z))
			kept++;
		p->scales[n * p->nblk + b] = s;
		p->zps[n * p->nblk + b] = (uint8_t)z;
	}
	return kept;
}

/* the source's pages go back to the file every DROP values read */
enum { DROP = 1 << 22 };
/* columns of a [K, N] weight gathered at a time */
enum { TN = 64 };

/* Rows [lo, hi) of the weight, K values each, handed to fn(ctx, n, row) in
 * order of n: read where they lie ([N, K]; their pages dropped as they are
 * passed) or gathered by tiles of TN columns ([K, N]; lo a multiple of TN) */
typedef void (*RowFn)(void *ctx, int64_t n, const float *row);

static void each_row(const WoParams *p, const FloatView *v, int64_t lo, int64_t hi, RowFn fn, void *ctx)
{
	int64_t N = p->N, K = p->K, dropped = lo * K;
	if (p->nk) {
		for (int64_t n = lo; n < hi; n++) {
			fn(ctx, n, v->x + n * K);
			if ((n + 1) * K - dropped >= DROP) {
				qc_float_drop(v, dropped, (n + 1) * K);
				dropped = (n + 1) * K;
			}
		}
		return;
	}
	float *t = xmalloc(sizeof(float) * (size_t)(K ? K : 1) * TN);
	for (int64_t n0 = lo; n0 < hi; n0 += TN) {
		int64_t nn = hi - n0 < TN ? hi - n0 : TN;
		/* by squares of 16 rows: reads and writes stay in L1 */
		for (int64_t k0 = 0; k0 < K; k0 += 16) {
			int64_t k1 = K - k0 < 16 ? K : k0 + 16;
			for (int64_t j = 0; j < nn; j++)
				for (int64_t k = k0; k < k1; k++)
					t[j * K + k] = v->x[k * N + n0 + j];
		}
		for (int64_t j = 0; j < nn; j++)
			fn(ctx, n0 + j, t + j * K);
	}
	(void)N;
	free(t);
}

/* the parameter pass: every row's blocks, rows split among threads (each
 * row computed alone: the same bytes for any count) */
typedef struct ParCtx {
	WoParams *p;
	const FloatView *v;
	int sym, hqq;
	int64_t *info;            /* per row: blocks that kept HQQ's, or -1 - k
				     for a non-finite value at k */
} ParCtx;

static void par_row(void *ctx, int64_t n, const float *row)
{
	ParCtx *c = ctx;
	for (int64_t k = 0; k < c->p->K; k++)
		if (!isfinite(row[k])) {
			c->info[n] = -1 - k;
			return;
		}
	c->info[n] = row_params(c->p, n, row, c->sym, c->hqq);
}

static int par_range(void *arg, int64_t lo, int64_t hi)
{
	ParCtx *c = arg;
	/* units: rows ([N, K]) or tiles of TN columns ([K, N]) */
	int64_t u = c->p->nk ? 1 : TN, n1 = hi * u < c->p->N ? hi * u : c->p->N;
	each_row(c->p, c->v, lo * u, n1, par_row, c);
	return 0;
}

/* the codes of the weight, made now or while the model is saved */
/* OUT_ROW: OUT_QDQ with one scale per row (axis 0); OUT_GBQ: an embedding
 * for GatherBlockQuantized, uint8 [N, K * bits / 8] codes packed low bits
 * first over the flat index (OUT_QDQ's order, unsigned) */
enum { OUT_NBITS, OUT_QDQ, OUT_ROW, OUT_GBQ };
typedef struct WoFill {
	Model *m;                 /* deferred: the model and ... */
	Onnx__TensorProto *src;   /* ... a copy of the source's reference */
	WoParams *p;
	int kind;                 /* OUT_* */
	int sign;                 /* OUT_QDQ: codes stored minus 2^(bits-1) */
	uint8_t *out;
} WoFill;

static void fill_row(void *ctx, int64_t n, const float *row)
{
	WoFill *f = ctx;
	const WoParams *p = f->p;
	int qmax = (1 << p->bits) - 1, bits = p->bits, h = 1 << (bits - 1);
	if (f->kind == OUT_NBITS) {
		/* row n of B: n_blocks blobs, the padding at the block's zero point */
		int64_t rowlen = p->nblk * p->block;
		uint8_t *o = f->out + (size_t)(n * rowlen * bits / 8);
		memset(o, 0, (size_t)(rowlen * bits / 8));
		for (int64_t b = 0, k = 0; b < p->nblk; b++) {
			float s = p->scales[n * p->nblk + b];
			int z = p->zps[n * p->nblk + b];
			for (int64_t e = k + p->block; k < e; k++) {
				int c = k < p->K ? wo_code(row[k], s, z, qmax) : z;
				o[k * bits / 8] |= (uint8_t)(c << (k * bits % 8));
			}
		}
		return;
	}
	/* the weight's own layout: element (n, k) at n * K + k ([N, K]) or
	 * k * N + n ([K, N]); 4-bit values low nibble first */
	for (int64_t b = 0, k = 0; b < p->nblk; b++) {
		float s = p->scales[n * p->nblk + b];
		int z = p->zps[n * p->nblk + b];
		for (int64_t e = k + p->block < p->K ? k + p->block : p->K; k < e; k++) {
			int c = wo_code(row[k], s, z, qmax) - (f->sign ? h : 0);
			int64_t i = p->nk ? n * p->K + k : k * p->N + n;
			if (bits == 8)
				f->out[i] = (uint8_t)c;
			else
				f->out[i >> 1] |= (uint8_t)((c & 0xf) << ((i & 1) * 4));
		}
	}
}

static size_t fill_bytes(const WoFill *f)
{
	const WoParams *p = f->p;
	if (f->kind == OUT_NBITS)
		return (size_t)(p->N * p->nblk * p->block * p->bits / 8);
	if (f->kind == OUT_GBQ)
		return (size_t)(p->N * p->K * p->bits / 8);
	return (size_t)((p->N * p->K * p->bits + 7) / 8);
}

static int fill_from(WoFill *f, Model *m, const Onnx__TensorProto *src, void *out, size_t len)
{
	FloatView v;
	if (qc_float_view(m, src, &v) < 0) {
		qc_float_done(&v);
		return -1;
	}
	if (v.numel != f->p->N * f->p->K || len != fill_bytes(f)) {
		qc_float_done(&v);
		return error("weight '%s' changed size (%lld values) since it was read", src->name ? src->name : "",
			     (long long)v.numel);
	}
	memset(out, 0, len);
	f->out = out;
	each_row(f->p, &v, 0, f->p->N, fill_row, f);
	qc_float_done(&v);
	return 0;
}

static int fill_deferred(void *ud, const Onnx__TensorProto *t, void *out, size_t len)
{
	WoFill *f = ud;
	if (fill_from(f, f->m, f->src, out, len) < 0)
		return error_prefix("quantizing '%s'", t->name ? t->name : "");
	return 0;
}

static void fill_free(void *ud)
{
	WoFill *f = ud;
	if (f->src)
		onnx__tensor_proto__free_unpacked(f->src, NULL);
	params_free(f->p);
	free(f);
}

static int is_external(const Onnx__TensorProto *t)
{
	return t->has_data_location && t->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
}

/* ---- the rewrite ---- */

/* a weight quantized once per (source, layout, bits, format) */
typedef struct WoWeight {
	char *key;
	char *q, *s, *z;          /* initializer names (z NULL: none) */
	char *dq;                 /* OUT_QDQ: the DequantizeLinear's output */
	int64_t N, K;
	int bits;
} WoWeight;

typedef struct WoCtx {
	Model *m;
	Onnx__GraphProto *g;
	const QuantOpts *o;
	QuantReport *rep;
	QNames names;
	Onnx__NodeProto **nodes;  /* the new node list */
	size_t nn;
	WoWeight *w;
	size_t nw;
	PtrVec drop;              /* initializers (and Transpose outputs) that may be unread now */
	int ms;                   /* a com.microsoft node was written */
	int64_t opset;
} WoCtx;

/* does name reach the graph's first output (a decoder's logits, before
 * its KV cache) through nodes that only move, cast or add to it (an
 * lm_head's bias)? */
static int reaches_output(const Onnx__GraphProto *g, const char *name, int depth)
{
	static const char *const pass[] = {"Add", "Reshape", "Identity", "Cast", "Squeeze", "Unsqueeze",
					   "Flatten", "Transpose", NULL};
	if (g->n_output && g->output[0]->name && !strcmp(g->output[0]->name, name))
		return 1;
	if (depth > 4)
		return 0;
	for (size_t i = 0; i < g->n_node; i++) {
		const Onnx__NodeProto *n = g->node[i];
		if (!qc_in_list(pass, n->op_type) || !n->n_output)
			continue;
		for (size_t k = 0; k < n->n_input; k++)
			if (!strcmp(n->input[k], name) && reaches_output(g, n->output[0], depth + 1))
				return 1;
	}
	return 0;
}

/* bits from quantize.node-bits for node n: -1 when it names none */
static int node_bits(const QuantOpts *o, const Onnx__NodeProto *n)
{
	for (size_t i = 0; i < o->node_bits.n; i++) {
		const char *e = o->node_bits.v[i], *eq = strrchr(e, '=');
		if (n->name && eq && (size_t)(eq - e) == strlen(n->name) && !strncmp(e, n->name, (size_t)(eq - e)))
			return !strcmp(eq + 1, "float") ? 0 : atoi(eq + 1);
	}
	return -1;
}

/* every quantize.node-bits entry names a node of g */
static int check_node_bits(const Onnx__GraphProto *g, const QuantOpts *o)
{
	for (size_t i = 0; i < o->node_bits.n; i++) {
		const char *e = o->node_bits.v[i], *eq = strrchr(e, '=');
		size_t len = eq ? (size_t)(eq - e) : strlen(e);
		int found = 0;
		for (size_t k = 0; k < g->n_node && !found; k++)
			found = g->node[k]->name && strlen(g->node[k]->name) == len && !strncmp(g->node[k]->name, e, len);
		if (!found)
			return error("quantize.node-bits names '%.*s', which is no node of the model's main graph", (int)len,
				     e);
	}
	return 0;
}

/* Quantize src (an initializer of the main graph) read as N rows of K
 * (nk: stored [N, K]) once per key; *out the entry */
static int wo_weight(WoCtx *c, const Onnx__TensorProto *src, int nk, int bits, int block, int sym, int kind,
		     const WoWeight **out)
{
	const char *sn = src->name;
	char *key = xasprintf("%s|%d|%d|%d|%d", sn, nk, bits, block, kind);
	for (size_t i = 0; i < c->nw; i++)
		if (!strcmp(c->w[i].key, key)) {
			free(key);
			*out = &c->w[i];
			return 0;
		}
	WoParams *p = xcalloc(1, sizeof *p);
	int64_t d0 = src->dims[0], d1 = src->dims[1];
	p->nk = nk;
	p->N = nk ? d0 : d1;
	p->K = nk ? d1 : d0;
	p->bits = bits;
	p->block = block;
	p->nblk = (p->K + block - 1) / block;
	p->scales = xmalloc(sizeof(float) * (size_t)(p->N * p->nblk > 0 ? p->N * p->nblk : 1));
	p->zps = xmalloc((size_t)(p->N * p->nblk > 0 ? p->N * p->nblk : 1));
	FloatView v;
	if (qc_float_view(c->m, src, &v) < 0 || v.numel != p->N * p->K) {
		int r = v.x ? error("weight '%s' holds %lld values, expected %lld", sn, (long long)v.numel,
				    (long long)(p->N * p->K)) : -1;
		qc_float_done(&v);
		params_free(p);
		free(key);
		return r;
	}
	ParCtx pc = {p, &v, sym, c->o->wo_algorithm == WO_HQQ && !sym, xcalloc((size_t)p->N, sizeof(int64_t))};
	par_run(c->o->threads > 1 ? c->o->threads : 1, p->nk ? p->N : (p->N + TN - 1) / TN, par_range, &pc);
	qc_float_done(&v);
	for (int64_t n = 0; n < p->N; n++) {
		if (pc.info[n] < 0) {
			int64_t k = -1 - pc.info[n];
			free(pc.info);
			params_free(p);
			free(key);
			return error("weight '%s' holds a non-finite value at row %lld, column %lld (as [N, K]); fix the float model",
				     sn, (long long)n, (long long)k);
		}
		p->hqq_kept += pc.info[n];
	}
	free(pc.info);

	WoWeight w = {.key = key, .N = p->N, .K = p->K, .bits = bits};
	char *base;
	if (kind == OUT_NBITS || kind == OUT_GBQ) {
		/* GatherBlockQuantized's scales and zero points keep the data's rank */
		int gbq = kind == OUT_GBQ;
		base = xasprintf("%s_Q%d", sn, bits);
		w.q = qg_name_fresh(&c->names, base);
		free(base);
		base = xasprintf("%s_scales", sn);
		w.s = qg_name_fresh(&c->names, base);
		free(base);
		int64_t ns = p->N * p->nblk, sd[2] = {p->N, p->nblk};
		qg_add_values(c->g, w.s, DT_FLOAT, gbq ? 2 : 1, gbq ? sd : &ns, p->scales);
		if (!sym) {
			/* per row n, ceil(n_blocks * bits / 8) bytes, low bits first */
			int64_t zrow = (p->nblk * bits + 7) / 8, nz = p->N * zrow, zd[2] = {p->N, zrow};
			uint8_t *zb = xcalloc((size_t)(nz ? nz : 1), 1);
			for (int64_t n = 0; n < p->N; n++)
				for (int64_t b = 0; b < p->nblk; b++)
					zb[n * zrow + b * bits / 8] |=
						(uint8_t)(p->zps[n * p->nblk + b] << (b * bits % 8));
			base = xasprintf("%s_zero_points", sn);
			w.z = qg_name_fresh(&c->names, base);
			free(base);
			qg_add_values(c->g, w.z, DT_UINT8, gbq ? 2 : 1, gbq ? zd : &nz, zb);
			free(zb);
		}
	} else {
		base = xasprintf("%s_quantized", sn);
		w.q = qg_name_fresh(&c->names, base);
		free(base);
		base = xasprintf("%s_scale", sn);
		w.s = qg_name_fresh(&c->names, base);
		free(base);
		base = xasprintf("%s_dequantized", sn);
		w.dq = qg_name_fresh(&c->names, base);
		free(base);
		/* scales in the weight's shape with axis K cut to n_blocks */
		int64_t sd[2] = {nk ? p->N : p->nblk, nk ? p->nblk : p->N}, ns = p->N * p->nblk;
		float *sc = xmalloc(sizeof(float) * (size_t)(ns ? ns : 1));
		uint8_t *zc = xcalloc((size_t)(ns ? ns : 1), 1);
		for (int64_t n = 0; n < p->N; n++)
			for (int64_t b = 0; b < p->nblk; b++) {
				int64_t i = nk ? n * p->nblk + b : b * p->N + n;
				sc[i] = p->scales[n * p->nblk + b];
				if (bits == 8)
					zc[i] = p->zps[n * p->nblk + b];
				else
					zc[i >> 1] |= (uint8_t)(p->zps[n * p->nblk + b] << ((i & 1) * 4));
			}
		/* a per-row weight (one block a row: embeddings) is per axis */
		int perrow = kind == OUT_ROW;
		qg_add_values(c->g, w.s, DT_FLOAT, perrow ? 1 : 2, sd, sc);
		if (!sym) {
			base = xasprintf("%s_zero_point", sn);
			w.z = qg_name_fresh(&c->names, base);
			free(base);
			qg_add_values(c->g, w.z, bits == 8 ? DT_UINT8 : DT_UINT4, perrow ? 1 : 2, sd, zc);
		}
		free(sc);
		free(zc);
		const char *in[] = {w.q, w.s, w.z};
		base = xasprintf("%s_DequantizeLinear", sn);
		char *nm = qg_name_fresh(&c->names, base);
		free(base);
		Onnx__NodeProto *dq = qg_node("DequantizeLinear", nm, w.z ? 3 : 2, in, 1, (const char *const *)&w.dq);
		free(nm);
		qg_attr_int(dq, "axis", nk ? (perrow ? 0 : 1) : 0);
		if (!perrow)
			qg_attr_int(dq, "block_size", block);
		/* its inputs are initializers: it may run first */
		qg_push(&c->nodes, &c->nn, dq);
	}
	int qdt = kind == OUT_NBITS || kind == OUT_GBQ ? DT_UINT8 : bits == 8 ? (sym ? DT_INT8 : DT_UINT8) : (sym ? DT_INT4 : DT_UINT4);
	/* quant.json: what the weight became (its scales are too many to list) */
	StrBuf *sb = &c->rep->tensors;
	if (sb->len)
		sb_puts(sb, ",\n    ");
	sb_json_str(sb, w.q);
	sb_puts(sb, ": {\"source\": ");
	sb_json_str(sb, sn);
	sb_printf(sb, ", \"type\": \"%s\", \"bits\": %d, \"block_size\": %d, \"symmetric\": %s, \"N\": %lld, \"K\": %lld, \"blocks\": %lld",
		  dtype_name(qdt), bits, block, sym ? "true" : "false", (long long)p->N, (long long)p->K,
		  (long long)(p->N * p->nblk));
	if (pc.hqq)
		sb_printf(sb, ", \"hqq_blocks\": %lld", (long long)p->hqq_kept);
	sb_puts(sb, ", \"names\": {\"scale\": ");
	sb_json_str(sb, w.s);
	if (w.z) {
		sb_puts(sb, ", \"zero_point\": ");
		sb_json_str(sb, w.z);
	}
	if (w.dq) {
		sb_puts(sb, ", \"dequantized\": ");
		sb_json_str(sb, w.dq);
	}
	sb_puts(sb, "}}");

	WoFill *f = xcalloc(1, sizeof *f);
	*f = (WoFill){.p = p, .kind = kind, .sign = (kind == OUT_QDQ || kind == OUT_ROW) && sym};
	int64_t qd[3];
	int qr;
	if (kind == OUT_NBITS) {
		qd[0] = p->N;
		qd[1] = p->nblk;
		qd[2] = (int64_t)block * bits / 8;
		qr = 3;
	} else {
		qd[0] = src->dims[0];
		qd[1] = kind == OUT_GBQ ? src->dims[1] * bits / 8 : src->dims[1];
		qr = 2;
	}
	int r = 0;
	if (c->o->save_next && is_external(src)) {
		f->m = c->m;
		f->src = qc_proto_copy(src);
		qc_add_deferred(c->m, c->g, w.q, qdt, qr, qd, fill_deferred, fill_free, f);
	} else {
		Tensor t = {0};
		if (tensor_alloc(&t, qdt, qr, qd) < 0 || fill_from(f, c->m, src, t.data, t.nbytes) < 0) {
			r = -1;
			tensor_free(&t);
		} else {
			c->g->initializer = xreallocarray(c->g->initializer, c->g->n_initializer + 1,
							  sizeof *c->g->initializer);
			c->g->initializer[c->g->n_initializer++] = qc_proto_take(&t, w.q);
		}
		fill_free(f);
	}
	if (r < 0) {
		free(w.key);
		free(w.q);
		free(w.s);
		free(w.z);
		free(w.dq);
		return -1;
	}
	c->w = xreallocarray(c->w, c->nw + 1, sizeof *c->w);
	c->w[c->nw] = w;
	*out = &c->w[c->nw++];
	pv_push(&c->drop, xstrdup(sn));
	return 0;
}

static char *fresh(WoCtx *c, const char *base, const char *suffix)
{
	char *b = xasprintf("%s%s", base, suffix), *r = qg_name_fresh(&c->names, b);
	free(b);
	return r;
}

/* MatMul or Gemm: 1 quantized, 0 skipped (*why set), -1 error */
static int wo_matmul(WoCtx *c, Onnx__NodeProto *n, int bits, const char **why, int *gone)
{
	const QuantOpts *o = c->o;
	int gemm = !strcmp(n->op_type, "Gemm");
	const char *a = node_input(n, 0), *b = node_input(n, 1), *cc = gemm ? node_input(n, 2) : NULL;
	int64_t ta = 0, tb = 0;
	float alpha = 1, beta = 1;
	if (gemm && (attr_int(n, "transA", 0, &ta) < 0 || attr_int(n, "transB", 0, &tb) < 0 ||
		     attr_float(n, "alpha", 1, &alpha) < 0 || attr_float(n, "beta", 1, &beta) < 0))
		return -1;
	Onnx__TensorProto *w = b ? qg_init(c->g, b) : NULL;
	Onnx__NodeProto *tr = NULL;
	int nk = (int)tb;
	if (!w && b && (tr = qg_producer(c->g, b)) && !strcmp(tr->op_type, "Transpose") && tr->n_input == 1 &&
	    (w = qg_init(c->g, tr->input[0]))) {
		/* B = Transpose(E): E [N, K] read as it lies (a tied lm_head) */
		const int64_t *perm;
		size_t np = 0;
		if (attr_ints(tr, "perm", &perm, &np) < 0)
			return -1;
		if (np && !(np == 2 && perm[0] == 1 && perm[1] == 0)) {
			*why = "its weight is a Transpose of an initializer with a perm other than [1, 0]";
			return 0;
		}
		nk = !nk;
	}
	if (!a || !w) {
		*why = "its weight (input 1) is not a constant (a product of two activations)";
		return 0;
	}
	if (w->data_type != DT_FLOAT || w->n_dims != 2 || w->dims[0] <= 0 || w->dims[1] <= 0) {
		*why = "its weight (input 1) is not a non-empty 2-D float initializer";
		return 0;
	}
	if (gemm && ta) {
		*why = "Gemm with transA = 1";
		return 0;
	}
	if (gemm && cc && beta != 1 && o->format == QFMT_MATMULNBITS) {
		*why = "Gemm with beta other than 1";
		return 0;
	}
	const WoWeight *q;
	int sym = o->wo_symmetric, block = o->wo_block;
	if (o->format == QFMT_QDQ) {
		if (wo_weight(c, w, nk, bits, block, sym, OUT_QDQ, &q) < 0)
			return -1;
		if (tr) {
			char *nm = fresh(c, tr->name && *tr->name ? tr->name : q->dq, "_dequantized");
			char *out = fresh(c, q->dq, "_transposed");
			Onnx__NodeProto *t = qg_node("Transpose", nm, 1, (const char *const *)&q->dq, 1,
						     (const char *const *)&out);
			qg_push(&c->nodes, &c->nn, t);
			qg_set_input(n, 1, out);
			pv_push(&c->drop, xstrdup(b));
			free(nm);
			free(out);
		} else {
			qg_set_input(n, 1, q->dq);
		}
		qg_push(&c->nodes, &c->nn, n);
		return 1;
	}
	if (wo_weight(c, w, nk, bits, block, sym, OUT_NBITS, &q) < 0)
		return -1;
	if (tr)
		pv_push(&c->drop, xstrdup(b));
	const char *base = n->name && *n->name ? n->name : n->output[0];
	char *y = cc || alpha != 1 ? fresh(c, base, "_MatMulNBits_output") : xstrdup(n->output[0]);
	char *nm = fresh(c, base, "_Q");
	const char *in[] = {a, q->q, q->s, q->z};
	Onnx__NodeProto *mm = qg_node("MatMulNBits", nm, q->z ? 4 : 3, in, 1, (const char *const *)&y);
	free(mm->domain);
	mm->domain = xstrdup("com.microsoft");
	qg_attr_int(mm, "K", q->K);
	qg_attr_int(mm, "N", q->N);
	qg_attr_int(mm, "bits", bits);
	qg_attr_int(mm, "block_size", block);
	qg_push(&c->nodes, &c->nn, mm);
	c->ms = 1;
	free(nm);
	if (alpha != 1) {
		char *an = fresh(c, base, "_alpha"), *mn = fresh(c, base, "_alpha_mul");
		char *ym = cc ? fresh(c, base, "_alpha_output") : xstrdup(n->output[0]);
		qg_add_scalar_f(c->g, an, alpha);
		const char *min[] = {y, an};
		qg_push(&c->nodes, &c->nn, qg_node("Mul", mn, 2, min, 1, (const char *const *)&ym));
		free(y);
		y = ym;
		free(an);
		free(mn);
	}
	if (cc) {
		char *an = fresh(c, base, "_bias_add");
		const char *ain[] = {y, cc};
		qg_push(&c->nodes, &c->nn, qg_node("Add", an, 2, ain, 1, (const char *const *)&n->output[0]));
		free(an);
	}
	free(y);
	*gone = 1;
	return 1;
}

/* an embedding Gather of a 2-D float initializer: GatherBlockQuantized
 * (matmulnbits), or per-row int8 through DequantizeLinear (qdq) */
static int wo_gather(WoCtx *c, Onnx__NodeProto *n, int bits, const char **why, int *gone)
{
	const char *d = node_input(n, 0);
	Onnx__TensorProto *w = d ? qg_init(c->g, d) : NULL;
	int64_t axis = 0;
	if (attr_int(n, "axis", 0, &axis) < 0)
		return -1;
	if (!w || w->data_type != DT_FLOAT || w->n_dims != 2 || w->dims[0] <= 0 || w->dims[1] <= 0 || axis != 0) {
		*why = "not an embedding: its data (input 0) is not a 2-D float initializer gathered on axis 0";
		return 0;
	}
	const WoWeight *q;
	const char *ix = node_input(n, 1);
	if (c->o->format == QFMT_MATMULNBITS) {
		/* com.microsoft GatherBlockQuantized: rows stay packed at run time */
		if (w->dims[1] * bits % 8) {
			*why = "GatherBlockQuantized needs rows of a whole number of bytes: an even width for 4 bits";
			return 0;
		}
		if (!ix || wo_weight(c, w, 1, bits, c->o->wo_block, c->o->wo_symmetric, OUT_GBQ, &q) < 0)
			return ix ? -1 : error("Gather without indices");
		const char *in[] = {q->q, ix, q->s, q->z};
		char *nm = fresh(c, n->name && *n->name ? n->name : n->output[0], "_Q");
		Onnx__NodeProto *gq = qg_node("GatherBlockQuantized", nm, q->z ? 4 : 3, in, 1,
					      (const char *const *)&n->output[0]);
		free(nm);
		free(gq->domain);
		gq->domain = xstrdup("com.microsoft");
		qg_attr_int(gq, "gather_axis", 0);
		qg_attr_int(gq, "quantize_axis", 1);
		qg_attr_int(gq, "block_size", c->o->wo_block);
		qg_attr_int(gq, "bits", bits);
		qg_push(&c->nodes, &c->nn, gq);
		c->ms = 1;
		*gone = 1;
		return 1;
	}
	if (bits != 8)
		return error("an embedding Gather in quantize.format = qdq takes 8 bits (one int8 scale per row) or float, not %d",
			     bits);
	if (c->opset < 13) {
		*why = "an 8-bit embedding needs opset >= 13 (per-axis DequantizeLinear)";
		return 0;
	}
	if (wo_weight(c, w, 1, 8, (int)w->dims[1], 1, OUT_ROW, &q) < 0)
		return -1;
	qg_set_input(n, 0, q->dq);
	qg_push(&c->nodes, &c->nn, n);
	return 1;
}

/* the bits node n gets, and why (static text, or *own) */
static int bits_for(WoCtx *c, const Onnx__NodeProto *n, const char **src)
{
	int nb = node_bits(c->o, n);
	if (nb >= 0) {
		*src = "quantize.node-bits";
		return nb;
	}
	if (!strcmp(n->op_type, "Gather")) {
		*src = "an embedding: quantize.embedding-bits";
		return c->o->wo_embed_bits;
	}
	if (n->n_output && reaches_output(c->g, n->output[0], 0)) {
		*src = "lm_head (its output is the model's first output, the logits): quantize.lm-head-bits, 8 by default since a 4-bit lm_head makes decoders repeat themselves";
		return c->o->wo_lm_head_bits;
	}
	*src = NULL;
	return c->o->wo_bits;
}

static void ctx_free(WoCtx *c)
{
	for (size_t i = 0; i < c->nw; i++) {
		free(c->w[i].key);
		free(c->w[i].q);
		free(c->w[i].s);
		free(c->w[i].z);
		free(c->w[i].dq);
	}
	free(c->w);
	pv_free_all(&c->drop);
	qg_names_free(&c->names);
}

/* remove Transpose nodes whose outputs were named in drop and are read no more */
static void drop_transposes(WoCtx *c)
{
	Onnx__GraphProto *g = c->g;
	for (size_t i = 0; i < c->drop.n; i++) {
		const char *nm = c->drop.v[i];
		if (qg_init(g, nm) || qg_has_consumer(g, nm, NULL) || qg_is_output(g, nm) || qg_read_in_subgraphs(g, nm))
			continue;
		for (size_t k = 0; k < g->n_node; k++)
			if (!strcmp(g->node[k]->op_type, "Transpose") && g->node[k]->n_output == 1 &&
			    !strcmp(g->node[k]->output[0], nm)) {
				char *src = xstrdup(g->node[k]->input[0]);
				onnx__node_proto__free_unpacked(g->node[k], NULL);
				memmove(g->node + k, g->node + k + 1, (g->n_node - k - 1) * sizeof *g->node);
				g->n_node--;
				qg_drop_unused_init(g, src);
				free(src);
				break;
			}
	}
}

int quant_weight_only(Model *m, const QuantOpts *o, QuantReport *rep)
{
	Onnx__GraphProto *g = m->proto->graph;
	if (qc_check_not_quantized(g) < 0 || qc_check_lists(g, o, quant_weight_only_ops, "weight-only") < 0 ||
	    check_node_bits(g, o) < 0)
		return -1;
	WoCtx c = {.m = m, .g = g, .o = o, .rep = rep, .opset = model_opset(m->proto, "")};
	if (o->format == QFMT_QDQ && c.opset < 21)
		return error("quantize.format = qdq needs opset >= 21 (DequantizeLinear with block_size and int4); the model imports opset %lld: set preprocess.opset = 21, or use quantize.format = matmulnbits",
			     (long long)c.opset);
	qg_names_collect(&c.names, g);
	size_t norig = g->n_node, nq = 0;
	Onnx__NodeProto **orig = xcalloc(norig ? norig : 1, sizeof *orig);
	memcpy(orig, g->node, norig * sizeof *orig);
	int *gone = xcalloc(norig ? norig : 1, sizeof *gone);
	int r = 0;
	char lab[256];
	for (size_t i = 0; i < norig && r == 0; i++) {
		Onnx__NodeProto *n = orig[i];
		const char *ex = qc_excluded(n, o), *why = NULL, *bsrc = NULL;
		int q = 0, bits = 0;
		char *own = NULL;
		for (size_t a = 0; a < n->n_attribute; a++) {
			const Onnx__AttributeProto *at = n->attribute[a];
			const Onnx__GraphProto *body = at->g ? at->g : NULL;
			if (!body)
				continue;
			char *scope = qg_scope(NULL, n, at);
			qc_report_skipped(rep, body, scope, "weight-only quantization rewrites the main graph only");
			free(scope);
		}
		if (!qc_in_list(quant_weight_only_ops, n->op_type)) {
			own = xasprintf("weight-only quantization takes the weights of MatMul, Gemm and embedding Gather, not %s",
					n->op_type);
			why = own;
		} else if (ex) {
			why = ex;
		} else if ((bits = bits_for(&c, n, &bsrc)) == 0) {
			own = xasprintf("left in float by %s", bsrc);
			why = own;
		} else {
			q = !strcmp(n->op_type, "Gather") ? wo_gather(&c, n, bits, &why, &gone[i]) : wo_matmul(&c, n, bits, &why, &gone[i]);
			if (q == 0 && node_bits(o, n) > 0)
				q = error("quantize.node-bits sets %d bits for it, but it cannot be quantized: %s", bits, why);
			if (q < 0)
				r = error_prefix("node '%s'", node_label(n, lab, sizeof lab));
		}
		if (q == 1) {
			nq++;
			char *reason = !strcmp(n->op_type, "Gather") && o->format == QFMT_MATMULNBITS
				? xasprintf("com.microsoft GatherBlockQuantized, %d bits, block %d; %s", bits, o->wo_block, bsrc)
				: !strcmp(n->op_type, "Gather")
				? xasprintf("DequantizeLinear (int8, a scale per row) + Gather; %s", bsrc)
				: xasprintf("%s, %d bits, block %d%s%s",
					    o->format == QFMT_QDQ ? "blockwise DequantizeLinear" : "com.microsoft MatMulNBits",
					    bits, o->wo_block, bsrc ? "; " : "", bsrc ? bsrc : "");
			qc_report_node(rep, n, "quantized", reason);
			free(reason);
		} else if (q == 0) {
			qc_report_node(rep, n, "skipped", why);
			qg_push(&c.nodes, &c.nn, n);
		}
		free(own);
	}
	if (r == 0 && nq == 0)
		r = error("nothing to quantize: the model has no MatMul, Gemm or embedding Gather with a 2-D float initializer weight (%zu nodes)",
			  norig);
	if (r == 0) {
		free(g->node);
		g->node = c.nodes;
		g->n_node = c.nn;
		c.nodes = NULL;
		for (size_t i = 0; i < norig; i++)
			if (gone[i])
				onnx__node_proto__free_unpacked(orig[i], NULL);
		if (c.ms)
			qg_import(m->proto, "com.microsoft", 1);
		drop_transposes(&c);
		for (size_t i = 0; i < c.drop.n; i++)
			qg_drop_unused_init(g, c.drop.v[i]);
		qg_prune_value_info(g);
	} else {
		for (size_t i = 0; i < c.nn; i++) {
			int old = 0;
			for (size_t k = 0; k < norig && !old; k++)
				old = c.nodes[i] == orig[k];
			if (!old)
				onnx__node_proto__free_unpacked(c.nodes[i], NULL);
		}
		free(c.nodes);
	}
	free(orig);
	free(gone);
	ctx_free(&c);
	return r;
}
