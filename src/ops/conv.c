/* conv.c — Conv, ConvTranspose, ConvInteger and QLinearConv: inference and
 * kernels.
 *
 * Convolutions of 1 to 3 spatial dimensions are computed as 3-D ones with
 * leading unit dimensions (unit axes are moved to the front, so a [k, 1]
 * kernel on [H, 1] unfolds along H): per image and group the input is
 * unfolded (im2col) into a [C/G * kernel, output] matrix, in tiles of output
 * rows, that one GEMM multiplies by the group's weights; small outputs are
 * unfolded several images side by side so the weights are read once for
 * all of them. Pointwise convolutions (1x1, stride 1, no padding) use the
 * input directly and depthwise ones (one input channel per group) run a
 * direct loop. float32 goes through fgemm on AVX-512 CPUs (weights that are
 * constants of the plan packed once, in the node's cache, one pack for the
 * interpreters of a model side by side (fgemm_pack_a_const); bias added as
 * tiles are stored) and cblas_sgemm elsewhere; double through dgemm. With
 * constant weights on AVX-512 CPUs, a convolution of 17 to 128 output
 * channels a group runs directly with the channels in the vectors
 * (conv_gemm_cv): each image is copied once, padded (and split by stride
 * phase for width strides above 2, see DirectGeom), and its elements are
 * broadcast against packed weights, any batch size, nothing computed past
 * the output. Of the
 * others, one whose output grid wastes few columns runs directly too,
 * output positions in the vectors: each image (small ones several side by
 * side, the batch's last images in a smaller group when it does not
 * divide) is copied the same way and fgemm reads its unfolded rows in
 * place; the rest write fgemm's panels straight from the input
 * (ConvFill). A Relu or Clip the interpreter fused into the node
 * (RunCtx.clamp) is applied as results are stored: in fgemm's tiles, or per
 * GEMM tile while it is in cache; a fused Add (RunCtx.sum, a residual
 * connection) is added before it, in the direct products' tiles or in a
 * pass after the others. The
 * integer convolutions subtract zero points into doubles, whose dgemm is
 * exact for any realistic reduction length (products of 8-bit values summed
 * below 2^53), and requantize from there. */
#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops/bcast.h"
#include "ops/cvpack.h"
#include "ops/fgemm.h"
#include "ops/nn.h"
#include "ops/op.h"
#include "ops/shapeutil.h"
#include "util.h"

/* ---- inference ---- */

/* output of a convolution of input xi with weights wi, element type elem */
static int conv_infer_common(InferCtx *c, size_t xi, size_t wi, int elem)
{
	const ValueType *x = nn_in(c, xi), *w = nn_in(c, wi);
	if (!x || !w)
		return -1;
	int rank = x->rank >= 0 ? x->rank : w->rank;
	ValueType *o = c->out[0];
	vt_set_tensor(o, elem, rank);
	if (rank < 0)
		return 0;
	if (rank < 3)
		return op_error(c->node, "input must have rank 3 or more (N, C, spatial...), got %d", rank);
	if (x->rank >= 0 && w->rank >= 0 && x->rank != w->rank)
		return op_error(c->node, "input has rank %d but weights have rank %d", x->rank, w->rank);
	int nsp = rank - 2;
	int64_t in[QM_MAX_RANK], k[QM_MAX_RANK];
	int kknown = 1;
	for (int i = 0; i < nsp; i++) {
		in[i] = x->rank >= 0 ? x->dims[i + 2].v : -1;
		k[i] = w->rank >= 0 ? w->dims[i + 2].v : -1;
		if (k[i] < 0)
			kknown = 0;
	}
	o->dims[0] = x->rank >= 0 ? x->dims[0] : nn_dim(c, -1);
	o->dims[1] = w->rank >= 0 ? w->dims[0] : nn_dim(c, -1);
	if (!kknown && !node_attr(c->node, "kernel_shape")) {
		for (int i = 0; i < nsp; i++)
			o->dims[i + 2] = nn_dim(c, -1);
		return 0;
	}
	NnGeom g;
	if (nn_geom(c->node, nsp, in, kknown ? k : NULL, 0, &g) < 0)
		return -1;
	for (int i = 0; i < nsp; i++)
		o->dims[i + 2] = nn_dim(c, g.out[i]);
	return 0;
}

static int conv_infer(InferCtx *c)
{
	const ValueType *x = nn_in(c, 0);
	return x ? conv_infer_common(c, 0, 1, x->elem) : -1;
}

static int convinteger_infer(InferCtx *c)
{
	return conv_infer_common(c, 0, 1, DT_INT32);
}

static int qlinearconv_infer(InferCtx *c)
{
	const ValueType *x = nn_in(c, 0);
	if (!x)
		return -1;
	int elem = c->nin > 7 && c->in[7] ? c->in[7]->elem : x->elem;
	return conv_infer_common(c, 0, 3, elem);
}

/* ---- geometry at run time ---- */

typedef struct ConvShape {
	int64_t N, C, M, G;           /* batch, input channels, output channels, groups */
	int64_t in[3], k[3], s[3], d[3], pb[3], out[3];
	int64_t isz, ksz, osz;        /* spatial element counts */
	int threads;
} ConvShape;

/* Fill cs from input x and weights w (Conv layout: w is [M, C/G, k...]). */
static int conv_shape(RunCtx *c, const Tensor *x, const Tensor *w, ConvShape *cs)
{
	int64_t group;
	if (x->rank < 3)
		return op_error(c->node, "input must have rank 3 or more (N, C, spatial...), got %d", x->rank);
	if (w->rank != x->rank)
		return op_error(c->node, "weights have rank %d, expected %d like the input", w->rank, x->rank);
	int nsp = x->rank - 2;
	if (nsp > 3)
		return op_error(c->node, "%s-%lld with %d spatial dimensions is not supported (at most 3)",
				c->node->op_type, (long long)c->opset, nsp);
	if (attr_int(c->node, "group", 1, &group) < 0)
		return -1;
	memset(cs, 0, sizeof *cs);
	cs->N = x->dims[0];
	cs->C = x->dims[1];
	cs->M = w->dims[0];
	cs->G = group;
	if (group < 1 || cs->C % group || cs->M % group || w->dims[1] * group != cs->C)
		return op_error(c->node, "input has %lld channels and weights [%lld, %lld, ...] with group %lld: "
				"expected C = weights dim 1 * group and output channels divisible by group",
				(long long)cs->C, (long long)cs->M, (long long)w->dims[1], (long long)group);
	NnGeom g;
	if (nn_geom(c->node, nsp, x->dims + 2, w->dims + 2, 0, &g) < 0)
		return -1;
	for (int i = 0; i < nsp; i++)
		if (g.k[i] != w->dims[i + 2])
			return op_error(c->node, "kernel_shape does not match the weights' spatial dims");
	for (int j = 0; j < 3; j++) {
		cs->in[j] = cs->k[j] = cs->s[j] = cs->d[j] = cs->out[j] = 1;
		cs->pb[j] = 0;
	}
	for (int i = 0; i < nsp; i++) {
		int j = 3 - nsp + i;
		cs->in[j] = g.in[i];
		cs->k[j] = g.k[i];
		cs->s[j] = g.s[i];
		cs->d[j] = g.d[i];
		cs->pb[j] = g.pb[i];
		cs->out[j] = g.out[i];
	}
	cs->isz = cs->in[0] * cs->in[1] * cs->in[2];
	cs->ksz = cs->k[0] * cs->k[1] * cs->k[2];
	cs->osz = cs->out[0] * cs->out[1] * cs->out[2];
	cs->threads = c->threads;
	return 0;
}

/* Move spatial axes of size 1 (input, kernel and output 1, no padding) to
 * the front: the memory layout is the same, and im2col then copies whole
 * rows (a [N, C, H, 1] input with a [k, 1] kernel unfolds along H, not one
 * element at a time). Call after conv_out_dims. */
static void conv_squeeze_units(ConvShape *cs)
{
	for (int j = 2; j > 0; j--) {
		if (cs->in[j] != 1 || cs->k[j] != 1 || cs->out[j] != 1 || cs->pb[j] != 0)
			continue;
		int u = 0;
		for (int i = 0; i < j; i++)
			u |= cs->in[i] != 1 || cs->k[i] != 1 || cs->out[i] != 1 || cs->pb[i] != 0;
		if (!u)
			break;
		for (int i = j; i > 0; i--) {
			cs->in[i] = cs->in[i - 1];
			cs->k[i] = cs->k[i - 1];
			cs->s[i] = cs->s[i - 1];
			cs->d[i] = cs->d[i - 1];
			cs->pb[i] = cs->pb[i - 1];
			cs->out[i] = cs->out[i - 1];
		}
		cs->in[0] = cs->k[0] = cs->s[0] = cs->d[0] = cs->out[0] = 1;
		cs->pb[0] = 0;
		j++;  /* look at the shifted axis again */
	}
}

static void conv_out_dims(const Tensor *x, const ConvShape *cs, int64_t *dims)
{
	int nsp = x->rank - 2;
	dims[0] = cs->N;
	dims[1] = cs->M;
	for (int i = 0; i < nsp; i++)
		dims[i + 2] = cs->out[3 - nsp + i];
}

static int conv_pointwise(const ConvShape *cs)
{
	return cs->ksz == 1 && cs->s[0] == 1 && cs->s[1] == 1 && cs->s[2] == 1 &&
	       cs->pb[0] == 0 && cs->pb[1] == 0 && cs->pb[2] == 0 && cs->out[0] == cs->in[0] &&
	       cs->out[1] == cs->in[1] && cs->out[2] == cs->in[2];
}

/* ---- im2col for 4- and 8-byte elements ---- */

/* The unfolded input of one image and group, for the output rows
 * [r0, r1) (a row is one (od, oh) pair): [C/G * kernel, (r1 - r0) * out_w].
 * Tiling by rows keeps the matrix in cache between im2col and the GEMM. */
typedef struct Im2col {
	const ConvShape *cs;
	const unsigned char *x;   /* first channel of the group */
	unsigned char *col;       /* column 0 of the tile in the unfolded matrix */
	int64_t r0, r1;
	int64_t ld;               /* elements per row of the unfolded matrix */
} Im2col;

/* Scratch: the running step's (op_scratch) in the interpreter, else the
 * calling thread's own, kept between calls: unfolded tiles of megabytes
 * were otherwise mapped and faulted in afresh on every call. Slots 0, 1
 * and 2 are separate buffers. */
static _Thread_local void *scratch_p[3];
static _Thread_local size_t scratch_n[3];

static void *conv_scratch(int slot, size_t bytes)
{
	void *p = op_scratch(OP_SCRATCH_KERNEL + slot, bytes);
	if (p)
		return p;
	if (scratch_n[slot] < bytes) {
		free(scratch_p[slot]);
		scratch_p[slot] = xmalloc(bytes);
		scratch_n[slot] = bytes;
	}
	return scratch_p[slot];
}

/* copies and clears of unfolded rows: plain memcpy/memset, and on AVX-512
 * CPUs inline 16-float moves, since the rows are short (an output row) and
 * a libc call per row cost as much as the copy */
static inline __attribute__((always_inline)) void copy_std(void *d, const void *s, int64_t n, size_t es)
{
	memcpy(d, s, (size_t)n * es);
}

static inline __attribute__((always_inline)) void zero_std(void *d, int64_t n, size_t es)
{
	memset(d, 0, (size_t)n * es);
}

/* a / b rounded up, for b > 0 */
static inline int64_t ceildiv_pos(int64_t a, int64_t b)
{
	return a >= 0 ? (a + b - 1) / b : -(-a / b);
}

static inline __attribute__((always_inline)) void
im2col_rows(const Im2col *a, int64_t clo, int64_t chi, size_t es,
	    void (*copy)(void *, const void *, int64_t, size_t), void (*zero)(void *, int64_t, size_t))
{
	const ConvShape *cs = a->cs;
	int64_t ow_n = cs->out[2], st = cs->s[2];
	for (int64_t ch = clo; ch < chi; ch++) {
		const unsigned char *xc = a->x + (size_t)(ch * cs->isz) * es;
		int64_t row = ch * cs->ksz;
		for (int64_t kd = 0; kd < cs->k[0]; kd++)
		for (int64_t kh = 0; kh < cs->k[1]; kh++)
		for (int64_t kw = 0; kw < cs->k[2]; kw++, row++) {
			unsigned char *dst = a->col + (size_t)(row * a->ld) * es;
			int64_t iw0 = kw * cs->d[2] - cs->pb[2];
			/* output columns whose input column is inside the image */
			int64_t right = cs->in[2] - iw0;
			int64_t lo = iw0 >= 0 ? 0 : st == 1 ? -iw0 : ceildiv_pos(-iw0, st);
			int64_t hi = right <= 0 ? 0 : st == 1 ? right : ceildiv_pos(right, st);
			if (hi > ow_n)
				hi = ow_n;
			if (lo > hi)
				lo = hi;
			/* (od, oh) of row r, stepped rather than divided per row */
			int64_t od = a->r0 / cs->out[1], oh = a->r0 % cs->out[1] - 1;
			for (int64_t r = a->r0; r < a->r1; r++) {
				if (++oh == cs->out[1]) {
					oh = 0;
					od++;
				}
				int64_t id = od * cs->s[0] - cs->pb[0] + kd * cs->d[0];
				int64_t ih = oh * cs->s[1] - cs->pb[1] + kh * cs->d[1];
				unsigned char *dr = dst + (size_t)((r - a->r0) * ow_n) * es;
				if (id < 0 || id >= cs->in[0] || ih < 0 || ih >= cs->in[1] || lo >= hi) {
					zero(dr, ow_n, es);
					continue;
				}
				const unsigned char *xr = xc + (size_t)((id * cs->in[1] + ih) * cs->in[2]) * es;
				if (lo)
					zero(dr, lo, es);
				if (st == 1) {
					copy(dr + (size_t)lo * es, xr + (size_t)(iw0 + lo) * es, hi - lo, es);
				} else {
					for (int64_t ow = lo; ow < hi; ow++)
						memcpy(dr + (size_t)ow * es, xr + (size_t)(iw0 + ow * st) * es, es);
				}
				if (hi < ow_n)
					zero(dr + (size_t)hi * es, ow_n - hi, es);
			}
		}
	}
}

static void im2col4(void *arg, int64_t lo, int64_t hi)
{
	im2col_rows(arg, lo, hi, 4, copy_std, zero_std);
}

static void im2col8(void *arg, int64_t lo, int64_t hi)
{
	im2col_rows(arg, lo, hi, 8, copy_std, zero_std);
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define AVX512 __attribute__((target("avx512f")))

/* the last partial vector is written by an overlapping full store (16, 8
 * or 4 lanes; single elements below 4): masked stores are slow on AMD Zen 4 */
AVX512 static inline __attribute__((always_inline)) void copy_512(void *d, const void *s, int64_t n, size_t es)
{
	float *df = d;
	const float *sf = s;
	(void)es;
	if (n < 16) {
		if (n >= 8) {
			__m256 a = _mm256_loadu_ps(sf), b = _mm256_loadu_ps(sf + n - 8);
			_mm256_storeu_ps(df, a);
			_mm256_storeu_ps(df + n - 8, b);
		} else if (n >= 4) {
			__m128 a = _mm_loadu_ps(sf), b = _mm_loadu_ps(sf + n - 4);
			_mm_storeu_ps(df, a);
			_mm_storeu_ps(df + n - 4, b);
		} else {
			for (int64_t j = 0; j < n; j++)
				df[j] = sf[j];
		}
		return;
	}
	for (int64_t j = 0; j + 16 <= n; j += 16)
		_mm512_storeu_ps(df + j, _mm512_loadu_ps(sf + j));
	if (n % 16)
		_mm512_storeu_ps(df + n - 16, _mm512_loadu_ps(sf + n - 16));
}

AVX512 static inline __attribute__((always_inline)) void zero_512(void *d, int64_t n, size_t es)
{
	float *df = d;
	(void)es;
	if (n < 16) {
		if (n >= 8) {
			_mm256_storeu_ps(df, _mm256_setzero_ps());
			_mm256_storeu_ps(df + n - 8, _mm256_setzero_ps());
		} else {
			for (int64_t j = 0; j < n; j++)
				df[j] = 0.0f;
		}
		return;
	}
	for (int64_t j = 0; j + 16 <= n; j += 16)
		_mm512_storeu_ps(df + j, _mm512_setzero_ps());
	if (n % 16)
		_mm512_storeu_ps(df + n - 16, _mm512_setzero_ps());
}

AVX512 static void im2col4_512(void *arg, int64_t lo, int64_t hi)
{
	im2col_rows(arg, lo, hi, 4, copy_512, zero_512);
}

/* Implicit im2col: fgemm asks for panels of the unfolded matrix of one
 * image and group (rows: channel and kernel offset, columns: output
 * positions) and they are written straight from the input, so the matrix
 * never exists in memory (see FgemmFill). tab has per row the channel's
 * offset, the kernel offsets in depth, height and width (pads taken off)
 * and the output columns whose input column is inside the row. */
typedef struct ConvFill {
	const ConvShape *cs;
	const float *x;
	const int64_t *tab;       /* 6 per row */
} ConvFill;

/* one segment of a panel: output positions in one output row */
typedef struct Seg {
	int64_t od, oh, ow, len, at;
} Seg;

AVX512 static void conv_fill(void *arg, int64_t k0, int64_t kc, int64_t j0, int64_t nc, float *bp)
{
	const ConvFill *f = arg;
	const ConvShape *cs = f->cs;
	int64_t ow_n = cs->out[2], oh_n = cs->out[1], st = cs->s[2];
	Seg seg[FGEMM_NR];
	for (int64_t p0 = j0; p0 < j0 + nc; p0 += FGEMM_NR) {
		int64_t np = j0 + nc - p0 < FGEMM_NR ? j0 + nc - p0 : FGEMM_NR, ns = 0;
		float *pp = bp + (p0 - j0) * kc;
		for (int64_t p = p0; p < p0 + np; ns++) {
			int64_t r = p / ow_n, ow = p % ow_n, len = ow_n - ow;
			if (len > p0 + np - p)
				len = p0 + np - p;
			seg[ns] = (Seg){r / oh_n, r % oh_n, ow, len, p - p0};
			p += len;
		}
		for (int64_t kk = 0; kk < kc; kk++) {
			const int64_t *t = f->tab + 6 * (k0 + kk);
			const float *xc = f->x + t[0];
			float *d = pp + kk * FGEMM_NR;
			for (int64_t i = 0; i < ns; i++) {
				const Seg *sg = &seg[i];
				float *ds = d + sg->at;
				int64_t id = sg->od * cs->s[0] + t[1], ih = sg->oh * cs->s[1] + t[2];
				int64_t end = sg->ow + sg->len;
				int64_t lo = t[4] > sg->ow ? t[4] : sg->ow, hi = t[5] < end ? t[5] : end;
				if (id < 0 || id >= cs->in[0] || ih < 0 || ih >= cs->in[1] || lo >= hi) {
					zero_512(ds, sg->len, 4);
					continue;
				}
				/* input column of output column ow: base + ow * st */
				int64_t base = (id * cs->in[1] + ih) * cs->in[2] + t[3];
				if (lo > sg->ow)
					zero_512(ds, lo - sg->ow, 4);
				if (st == 1)
					copy_512(ds + (lo - sg->ow), xc + (base + lo), hi - lo, 4);
				else
					for (int64_t ow = lo; ow < hi; ow++)
						ds[ow - sg->ow] = xc[base + ow * st];
				if (hi < end)
					zero_512(ds + (hi - sg->ow), end - hi, 4);
			}
			if (np < FGEMM_NR)
				zero_512(d + np, FGEMM_NR - np, 4);
		}
	}
}

/* the rows of conv_fill's table for a group of cg channels */
static int64_t *conv_fill_table(const ConvShape *cs, int64_t cg)
{
	int64_t *tab = xmalloc(sizeof(int64_t) * 6 * (size_t)(cg * cs->ksz + 1)), *t = tab;
	int64_t st = cs->s[2];
	for (int64_t ch = 0; ch < cg; ch++)
		for (int64_t kd = 0; kd < cs->k[0]; kd++)
		for (int64_t kh = 0; kh < cs->k[1]; kh++)
		for (int64_t kw = 0; kw < cs->k[2]; kw++, t += 6) {
			int64_t iw0 = kw * cs->d[2] - cs->pb[2];
			int64_t lo = iw0 >= 0 ? 0 : ceildiv_pos(-iw0, st);
			int64_t hi = cs->in[2] - iw0 > 0 ? ceildiv_pos(cs->in[2] - iw0, st) : 0;
			if (hi > cs->out[2])
				hi = cs->out[2];
			if (lo > hi)
				lo = hi;
			t[0] = ch * cs->isz;
			t[1] = kd * cs->d[0] - cs->pb[0];
			t[2] = kh * cs->d[1] - cs->pb[1];
			t[3] = iw0;
			t[4] = lo;
			t[5] = hi;
		}
	return tab;
}

typedef struct Implicit {
	const ConvShape *cs;
	const float *x, *bias, *clamp;
	float *y;
	FgemmA **pa;
	const int64_t *tab;
	float *bufs;              /* per thread: piece floats, or NULL */
	int64_t pieces;
	int threads;              /* for fgemm when bufs is NULL */
	size_t piece;             /* fgemm_buf_floats() of one product */
} Implicit;

/* products [lo, hi) of an Implicit (product i: image i / G, group i % G) */
static void implicit_run(void *arg, int64_t lo, int64_t hi)
{
	const Implicit *im = arg;
	const ConvShape *cs = im->cs;
	int64_t cg = cs->C / cs->G, mg = cs->M / cs->G, all = cs->N * cs->G;
	float *buf = im->bufs ? im->bufs + (size_t)((lo * im->pieces + all - 1) / all) * im->piece : NULL;
	for (int64_t i = lo; i < hi; i++) {
		int64_t n = i / cs->G, g = i % cs->G;
		ConvFill f = {cs, im->x + (n * cs->C + g * cg) * cs->isz, im->tab};
		fgemm_packed_fill(im->pa[g], cs->osz, conv_fill, &f, im->bias ? im->bias + g * mg : NULL, im->clamp,
				  im->y + (n * cs->M + g * mg) * cs->osz, cs->osz, im->threads, buf);
	}
}

/* conv_gemm through fgemm with packed weights and the implicit im2col;
 * several images or groups go to the threads whole (one thread start per
 * call rather than per product), one image is split by fgemm */
static void conv_gemm_implicit(const ConvShape *cs, const float *x, const float *bias, const float *clamp, float *y,
			       FgemmA **pa)
{
	int64_t all = cs->N * cs->G;
	int64_t *tab = conv_fill_table(cs, cs->C / cs->G);
	Implicit im = {cs, x, bias, clamp, y, pa, tab, NULL, 1, cs->threads,
		       fgemm_buf_floats(cs->osz, cs->C / cs->G * cs->ksz)};
	int thr = cs->threads < all ? cs->threads : (int)all;
	if (thr > 1) {
		im.bufs = conv_scratch(0, sizeof(float) * im.piece * (size_t)thr);
		im.pieces = thr;
	}
	nn_parallel(thr, all, implicit_run, &im);
	free(tab);
}
#endif

/* ---- direct convolution: the GEMM reads a padded input in place ---- */

/* Rather than unfolding the input, each image (and group) is copied once
 * with its padding into planes of q[0] x q[1] x q[2], one per stride phase
 * that the kernel uses (space-to-depth, so that a strided tap reads
 * consecutive elements): the unfolded row of channel ch and kernel offset
 * (kd, kh, kw) is then that plane read from a fixed offset, and fgemm
 * reads it in place (fgemm_packed_direct). The product runs over the grid
 * q[1] x q[2] per output depth, computing columns past the output's width
 * and height that are never stored: used only where they are few. Small
 * outputs (8 x 8 with a 3 x 3 kernel: 10 x 10 positions for 64 outputs)
 * put nimg images side by side in each plane row, iw columns apart, so
 * only the columns of the horizontal padding are wasted, not the rows
 * past the output's height, and one product covers several images; with
 * stride 1 across, neighbours share their zero columns (an image's right
 * padding is the next one's left: 9 columns per 8 x 8 image, not 10). */
#define DIRECT_MAX_STRIDE 8

typedef struct DirectGeom {
	int64_t q[3], plane;         /* plane extents (one image's) and elements */
	int64_t nimg, iw, w;         /* images side by side, iw columns apart; plane row width */
	int64_t stride;              /* elements from one plane to the next */
	int64_t nph[3];              /* stride phases used per axis */
	int64_t ph[3][DIRECT_MAX_STRIDE]; /* per residue: its phase's index, or -1 */
	int64_t phr[3][DIRECT_MAX_STRIDE]; /* per phase index: its residue */
	int64_t planes;              /* per channel: nph[0] * nph[1] * nph[2] */
	int64_t n;                   /* product columns per nimg images */
	int64_t floats;              /* padded input of nimg images and a group, with slack */
} DirectGeom;

/* the output grid of dg for fgemm_packed_direct */
static FgemmMap conv_direct_map(const ConvShape *cs, const DirectGeom *dg)
{
	return (FgemmMap){dg->n, dg->q[1], dg->w, cs->out[1], cs->out[2], dg->iw, cs->M * cs->osz};
}

/* fill dg for nimg images side by side; 1 when the direct product suits
 * cs: strides up to DIRECT_MAX_STRIDE, at most 30% more columns than outputs, and at most
 * DIRECT_MAX_M output channels per group (the panels ConvFill writes cost
 * little beside many output channels, and fgemm runs faster on them than
 * on rows read in place: magika's 512 took 40% longer directly) */
#define DIRECT_MAX_M 128

/* the layout of dg for nimg images side by side (planes, phases, grid);
 * 0 when a stride is above DIRECT_MAX_STRIDE or the output empty */
static int conv_direct_layout(const ConvShape *cs, int64_t nimg, DirectGeom *dg)
{
	memset(dg, 0, sizeof *dg);
	dg->nimg = nimg;
	dg->planes = 1;
	for (int j = 0; j < 3; j++) {
		if (cs->s[j] > DIRECT_MAX_STRIDE || cs->out[j] < 1)
			return 0;
		dg->q[j] = cs->out[j] + (cs->k[j] - 1) * cs->d[j] / cs->s[j];
		for (int64_t r = 0; r < cs->s[j]; r++)
			dg->ph[j][r] = -1;
		for (int64_t kk = 0; kk < cs->k[j]; kk++) {
			int64_t r = kk * cs->d[j] % cs->s[j];
			if (dg->ph[j][r] < 0) {
				dg->phr[j][dg->nph[j]] = r;
				dg->ph[j][r] = dg->nph[j]++;
			}
		}
		dg->planes *= dg->nph[j];
	}
	/* shared padding: image i + 1's data starts past image i's reads
	 * (iw >= q[2] - pb) and image i's past its data (iw >= in + pb) */
	dg->iw = dg->q[2];
	if (nimg > 1 && cs->s[2] == 1) {
		int64_t iw = cs->in[2] + cs->pb[2] > dg->q[2] - cs->pb[2] ? cs->in[2] + cs->pb[2] : dg->q[2] - cs->pb[2];
		if (iw < dg->q[2] && 2 * iw > dg->q[2])
			dg->iw = iw;
	}
	dg->w = (nimg - 1) * dg->iw + dg->q[2];
	dg->plane = dg->q[0] * dg->q[1] * dg->w;
	/* planes 16 floats past a multiple of 32 apart: the rows fgemm reads
	 * for one panel (one per channel and tap) then fall into different
	 * sets of the L1 cache; magika's 512-float planes (2 KiB apart) put
	 * them all in two sets, and the product ran 40% slower than on panels */
	dg->stride = dg->plane % 32 <= 16 ? dg->plane - dg->plane % 32 + 16 : dg->plane - dg->plane % 32 + 48;
	dg->n = ((cs->out[0] - 1) * dg->q[1] + cs->out[1] - 1) * dg->w + (nimg - 1) * dg->iw + cs->out[2];
	dg->floats = cs->C / cs->G * dg->planes * dg->stride;
	return 1;
}

static int conv_direct_geom_any(const ConvShape *cs, int64_t nimg, int any, DirectGeom *dg)
{
	if (cs->M / cs->G > DIRECT_MAX_M || !conv_direct_layout(cs, nimg, dg))
		return 0;
	FgemmMap map = conv_direct_map(cs, dg);
	FgemmDirectPlan *pl = fgemm_direct_plan(&map);
	int64_t cols = fgemm_direct_cols(pl);
	fgemm_direct_plan_free(pl);
	if (!any && cols * 10 > nimg * cs->osz * 13)
		return 0;
	int64_t cg = cs->C / cs->G;
	/* the last tap's reads end at its offset + n + FGEMM_NR / 2 */
	int64_t last = (cg * dg->planes - 1) * dg->stride;
	int64_t kd = (cs->k[0] - 1) * cs->d[0], kh = (cs->k[1] - 1) * cs->d[1], kw = (cs->k[2] - 1) * cs->d[2];
	last += (kd / cs->s[0] * dg->q[1] + kh / cs->s[1]) * dg->w + kw / cs->s[2] + dg->n + FGEMM_NR / 2;
	dg->floats = last > cg * dg->planes * dg->stride ? last : cg * dg->planes * dg->stride;
	return 1;
}

static int conv_direct_geom(const ConvShape *cs, int64_t nimg, DirectGeom *dg)
{
	return conv_direct_geom_any(cs, nimg, 0, dg);
}

/* per row of the unfolded matrix (channel, kd, kh, kw), its offset in the
 * padded input */
static int64_t *conv_direct_offsets(const ConvShape *cs, const DirectGeom *dg)
{
	int64_t cg = cs->C / cs->G, *off = xmalloc(sizeof(int64_t) * (size_t)(cg * cs->ksz + 1)), *o = off;
	for (int64_t ch = 0; ch < cg; ch++)
		for (int64_t kd = 0; kd < cs->k[0]; kd++)
		for (int64_t kh = 0; kh < cs->k[1]; kh++)
		for (int64_t kw = 0; kw < cs->k[2]; kw++) {
			int64_t td = kd * cs->d[0], th = kh * cs->d[1], tw = kw * cs->d[2];
			int64_t pl = ch * dg->planes + (dg->ph[0][td % cs->s[0]] * dg->nph[1] +
				dg->ph[1][th % cs->s[1]]) * dg->nph[2] + dg->ph[2][tw % cs->s[2]];
			*o++ = pl * dg->stride + (td / cs->s[0] * dg->q[1] + th / cs->s[1]) * dg->w + tw / cs->s[2];
		}
	return off;
}

/* the input channel after x (isz floats), asked for while x is copied
 * (this halved the CNN's padding time) */
static inline __attribute__((always_inline)) void prefetch_plane(const float *x, int64_t isz)
{
	for (int64_t j = 0; j < isz; j += 16)
		__builtin_prefetch(x + isz + j);
}

/* the padded, phase-split planes of cg channels of x (dg->nimg images, each
 * C * isz floats after the previous, one group);
 * rows are short, so copies on AVX-512 CPUs are copy_512's inline moves
 * (a libc call per row cost as much as the copy). The input is read in
 * its own order (the rows of all height phases of a plane row in turn,
 * each row once for all width phases) and the next channel prefetched: it
 * comes from memory, written by the previous step over the whole batch,
 * and a pass per phase over every other row (stride 2) left each load
 * waiting for it. */
static inline __attribute__((always_inline)) void
conv_direct_pad_body(const ConvShape *cs, const DirectGeom *dg, const float *x, float *xq,
		     void (*copy)(void *, const void *, int64_t, size_t), void (*gather2)(float *, const float *, int64_t))
{
	int64_t cg = cs->C / cs->G, q1 = dg->q[1], q2 = dg->q[2], s2 = cs->s[2], wr = dg->w;
	int64_t n1 = dg->nph[1], n2 = dg->nph[2], inw = cs->in[2];
	int64_t lo[DIRECT_MAX_STRIDE], hi[DIRECT_MAX_STRIDE];
	if (cs->s[0] == 1 && cs->s[1] == 1 && s2 == 1) {
		/* one plane per channel: clear everything, then copy the rows
		 * in (short rows made the per-row clearing cost more than the
		 * copy) */
		memset(xq, 0, sizeof(float) * (size_t)dg->floats);
		for (int64_t ch = 0; ch < cg; ch++)
			for (int64_t im = 0; im < dg->nimg; im++) {
				const float *xc = x + im * cs->C * cs->isz + ch * cs->isz;
				float *pl = xq + ch * dg->stride + im * dg->iw + cs->pb[2];
				if (ch + 1 < cg)
					prefetch_plane(xc, cs->isz);
				for (int64_t id = 0; id < cs->in[0]; id++)
					for (int64_t ih = 0; ih < cs->in[1]; ih++)
						copy(pl + ((id + cs->pb[0]) * q1 + ih + cs->pb[1]) * wr,
						     xc + (id * cs->in[1] + ih) * inw, inw, 4);
			}
		return;
	}
	/* per width phase: the columns of the plane whose input column is inside */
	for (int64_t e = 0; e < n2; e++) {
		int64_t rw = dg->phr[2][e];
		int64_t l = ceildiv_pos(cs->pb[2] - rw, s2), h = ceildiv_pos(inw + cs->pb[2] - rw, s2);
		l = l < 0 ? 0 : l > q2 ? q2 : l;
		lo[e] = l;
		hi[e] = h < l ? l : h > q2 ? q2 : h;
	}
	for (int64_t ch = 0; ch < cg; ch++)
		for (int64_t a = 0; a < dg->nph[0]; a++)
		for (int64_t im = 0; im < dg->nimg; im++) {
			int64_t rd = dg->phr[0][a];
			float *pa = xq + ((ch * dg->nph[0] + a) * n1 * n2) * dg->stride + im * dg->iw;
			const float *xc = x + im * cs->C * cs->isz + ch * cs->isz;
			if (ch + 1 < cg && a == 0)
				prefetch_plane(xc, cs->isz);
			for (int64_t qd = 0; qd < dg->q[0]; qd++)
				for (int64_t qh = 0; qh < q1; qh++)
					for (int64_t b = 0; b < n1; b++) {
						int64_t id = qd * cs->s[0] + rd - cs->pb[0];
						int64_t ih = qh * cs->s[1] + dg->phr[1][b] - cs->pb[1];
						int in = id >= 0 && id < cs->in[0] && ih >= 0 && ih < cs->in[1];
						const float *xr = xc + (id * cs->in[1] + ih) * inw;
						for (int64_t e = 0; e < n2; e++) {
							float *row = pa + (b * n2 + e) * dg->stride + (qd * q1 + qh) * wr;
							int64_t l = lo[e], h = hi[e];
							if (!in || l >= h) {
								memset(row, 0, sizeof(float) * (size_t)q2);
								continue;
							}
							int64_t iw = l * s2 + dg->phr[2][e] - cs->pb[2];
							for (int64_t qw = 0; qw < l; qw++)
								row[qw] = 0.0f;
							if (s2 == 1)
								copy(row + l, xr + iw, h - l, 4);
							else if (s2 == 2)
								gather2(row + l, xr + iw, h - l);
							else
								for (int64_t qw = l; qw < h; qw++, iw += s2)
									row[qw] = xr[iw];
							for (int64_t qw = h; qw < q2; qw++)
								row[qw] = 0.0f;
						}
					}
		}
	/* the gaps between planes, read by columns past the grid */
	for (int64_t pl = 0; pl < cg * dg->planes; pl++)
		memset(xq + pl * dg->stride + dg->plane, 0, sizeof(float) * (size_t)(dg->stride - dg->plane));
	/* slack read by the last panels' columns past the grid */
	float *end = xq + cg * dg->planes * dg->stride;
	memset(end, 0, sizeof(float) * (size_t)(dg->floats - (end - xq)));
}

/* d[j] = s[2 * j] for j < n */
static inline __attribute__((always_inline)) void gather2_std(float *d, const float *s, int64_t n)
{
	for (int64_t j = 0; j < n; j++)
		d[j] = s[2 * j];
}

static void conv_direct_pad_std(const ConvShape *cs, const DirectGeom *dg, const float *x, float *xq)
{
	conv_direct_pad_body(cs, dg, x, xq, copy_std, gather2_std);
}

#if defined(__x86_64__) && defined(__GNUC__)
/* gather2_std sixteen at a time: two loads of which only the elements
 * read are loaded (masked), the even ones picked by one permutation */
AVX512 static inline __attribute__((always_inline)) void gather2_512(float *d, const float *s, int64_t n)
{
	const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
	/* sixteen: s[0, 16) and s[15, 31), so nothing past s[30] is read */
	const __m512i even15 = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 17, 19, 21, 23, 25, 27, 29, 31);
	int64_t j = 0;
	for (; j + 16 <= n; j += 16)
		_mm512_storeu_ps(d + j, _mm512_permutex2var_ps(_mm512_loadu_ps(s + 2 * j), even15,
							       _mm512_loadu_ps(s + 2 * j + 15)));
	for (; j < n; j += 16) {
		int64_t m = n - j < 16 ? n - j : 16, e = 2 * m - 1;
		__mmask16 k0 = (__mmask16)(e >= 16 ? 0xffff : (1u << e) - 1);
		__mmask16 k1 = (__mmask16)(e > 16 ? (1u << (e - 16)) - 1 : 0);
		__m512 v = _mm512_permutex2var_ps(_mm512_maskz_loadu_ps(k0, s + 2 * j), even,
						  _mm512_maskz_loadu_ps(k1, s + 2 * j + 16));
		if (m == 16)
			_mm512_storeu_ps(d + j, v);
		else
			_mm512_mask_storeu_ps(d + j, (__mmask16)((1u << m) - 1), v);
	}
}

AVX512 static void conv_direct_pad_512(const ConvShape *cs, const DirectGeom *dg, const float *x, float *xq)
{
	conv_direct_pad_body(cs, dg, x, xq, copy_512, gather2_512);
}
#endif

static void conv_direct_pad(const ConvShape *cs, const DirectGeom *dg, const float *x, float *xq)
{
#if defined(__x86_64__) && defined(__GNUC__)
	if (fgemm_available()) {
		conv_direct_pad_512(cs, dg, x, xq);
		return;
	}
#endif
	conv_direct_pad_std(cs, dg, x, xq);
}

/* fill dg for the direct product of cs, with one image per product where
 * that suits, else with the fewest images side by side (a divisor of N, up
 * to DIRECT_MAX_IMAGES) that give DIRECT_MIN_COLS columns or, short of
 * that, the most that suit; 0 when none does. A batch with no such
 * divisor (a prime above DIRECT_MAX_IMAGES, say) is taken the same way
 * without one: its last images, fewer than dg->nimg, go in a group of
 * their own (conv_gemm_direct), so any batch size runs directly (the
 * digits CNN's 16-channel-like layers at batch 23: 12.7 us a sample
 * through im2col, 4.5 directly, as at batch 24) */
#define DIRECT_MAX_IMAGES 16
#define DIRECT_MIN_COLS 256

static int conv_direct_images(const ConvShape *cs, DirectGeom *dg)
{
	if (conv_direct_geom(cs, 1, dg))
		return 1;
	for (int rest = 0; rest < 2; rest++) {
		int64_t best = 0;
		for (int64_t k = 2; k <= DIRECT_MAX_IMAGES && k <= cs->N; k++) {
			if ((!rest && cs->N % k) || !conv_direct_geom(cs, k, dg))
				continue;
			best = k;
			if (dg->n >= DIRECT_MIN_COLS)
				return 1;
		}
		if (best)
			return conv_direct_geom(cs, best, dg);
	}
	return 0;
}

typedef struct DirectRun {
	const ConvShape *cs;
	const DirectGeom *dg;
	const float *x, *bias, *sum, *clamp;
	float *y;
	FgemmA **pa;
	const int64_t *off;
	const FgemmDirectPlan *pl;
	float *bufs;              /* per piece: dg->floats */
	int64_t pieces;
	int threads;              /* for fgemm (one product at a time) */
} DirectRun;

/* products [lo, hi) (product i: images from (i / G) * nimg, group i % G) */
static void direct_run(void *arg, int64_t lo, int64_t hi)
{
	const DirectRun *r = arg;
	const ConvShape *cs = r->cs;
	int64_t cg = cs->C / cs->G, mg = cs->M / cs->G, all = cs->N / r->dg->nimg * cs->G;
	float *xq = r->bufs + (size_t)((lo * r->pieces + all - 1) / all) * (size_t)r->dg->floats;
	for (int64_t i = lo; i < hi; i++) {
		int64_t n = i / cs->G * r->dg->nimg, g = i % cs->G;
		conv_direct_pad(cs, r->dg, r->x + (n * cs->C + g * cg) * cs->isz, xq);
		fgemm_packed_direct(r->pa[g], xq, r->off, r->pl, r->bias ? r->bias + g * mg : NULL,
				    r->sum ? r->sum + (n * cs->M + g * mg) * cs->osz : NULL, r->clamp,
				    r->y + (n * cs->M + g * mg) * cs->osz, cs->osz, r->threads);
	}
}

/* conv_gemm through fgemm_packed_direct: several products (images, or
 * dg->nimg images side by side, and groups) go to the threads whole, one
 * is split by columns */
static void conv_gemm_direct_group(const ConvShape *cs, const DirectGeom *dg, const float *x, const float *bias,
				   const float *sum, const float *clamp, float *y, FgemmA **pa)
{
	int64_t all = cs->N / dg->nimg * cs->G;
	int thr = cs->threads < all ? cs->threads : (int)all;
	if (thr < 1)
		thr = 1;
	int64_t *off = conv_direct_offsets(cs, dg);
	float *bufs = conv_scratch(2, sizeof(float) * (size_t)dg->floats * (size_t)thr);
	FgemmMap map = conv_direct_map(cs, dg);
	FgemmDirectPlan *pl = fgemm_direct_plan(&map);
	DirectRun r = {cs, dg, x, bias, sum, clamp, y, pa, off, pl, bufs, thr, thr > 1 ? 1 : cs->threads};
	nn_parallel(thr, all, direct_run, &r);
	fgemm_direct_plan_free(pl);
	free(off);
}

/* the batch in groups of dg->nimg images, then the images left over (N
 * not a multiple of nimg) as one group of their own, side by side too
 * (laid out as suits them, or as the first group would be when no
 * layout passes conv_direct_geom's test: one product of a few wasted
 * columns still beats unfolding) */
static void conv_gemm_direct(const ConvShape *cs, const DirectGeom *dg, const float *x, const float *bias,
			     const float *sum, const float *clamp, float *y, FgemmA **pa)
{
	int64_t full = cs->N / dg->nimg * dg->nimg, rest = cs->N - full;
	if (full)
		conv_gemm_direct_group(cs, dg, x, bias, sum, clamp, y, pa);
	if (!rest)
		return;
	ConvShape cr = *cs;
	DirectGeom dr;
	cr.N = rest;
	if (!conv_direct_geom(&cr, rest, &dr))
		conv_direct_geom_any(&cr, rest, 1, &dr);
	conv_gemm_direct_group(&cr, &dr, x + full * cs->C * cs->isz, bias, sum ? sum + full * cs->M * cs->osz : NULL,
			       clamp, y + full * cs->M * cs->osz, pa);
}

#if defined(__x86_64__) && defined(__GNUC__)
/* ---- direct convolution with output channels in the vectors ---- */

/* The direct product above holds output positions in its vectors: a grid
 * row's padding columns are computed and dropped (2 in 16 on a 14-wide
 * output, 8 in 32 on a 28-wide one, whose halves start mid-row and store
 * in pieces), and each tap's row is loaded unaligned again for every
 * strip of 8 or 12 weights. Here a vector holds 16 output channels and
 * the input is broadcast: a tile of P outputs by V vectors of channels
 * (P x V up to 24 accumulators) reads per tap V vectors of weights
 * (packed [tap][channel] per group, zeros past the group's channels) and
 * P elements of the padded planes of DirectGeom (cv_plane_shape) at the
 * tap's offset. The planes are one image's: nothing is computed past the
 * output, so images need not go side by side and any batch size runs
 * here. Sums run over the taps in blocks of up to CV_KB taps, of even
 * sizes (288 taps: 3 x 96, not 128, 128, 32), whose weights stay in L1,
 * carried in a buffer of [position][CV_LD channels] from block to block:
 * one chain per element in the order of the taps, as fgemm_packed_direct
 * computes them, so the bytes are the same as that product's. The buffer
 * is turned 16 x 16 in registers into the output's rows, bias, sum and
 * clamp applied as they are stored (fashion-cnn's second layer: 40.8 ->
 * 35 us a sample at batch 8; its first, of one input channel, 8 -> 4.4:
 * there the stores were the cost). */
#define CV_KB 128               /* 32 KiB of weights for 64 channels */
#define CV_LD 64
#define CV_PX 256               /* positions per buffer: 64 KiB */
#define CV_ACC 24
#define CV_ROWS(V) ((V) <= 2)   /* tiles within one output row (cv_tile) */

/* the tile of P positions (position j's input at xp[j]) by V vectors of
 * channels, over kb taps (weights wp, ws floats per tap); sums in t
 * (position j, vector v at t + j * CV_LD + 16 * v), carried on from it
 * when acc. With 3 or 4 vectors, a pointer per position lets a tile run
 * on past the end of an output row into the next (14 positions a row:
 * tiles of 6, not 5, 5, 4); tiles of 12 positions would keep their
 * pointers on the stack, so with 2 they stay in a row and read xp[0] +
 * j * S (S: the width stride, 1 or 2, in planes not split by phase) */
AVX512 static inline __attribute__((always_inline)) void
cv_tile(int V, int P, int S, int64_t kb, const float *wp, int64_t ws, const float *const *xp, const int64_t *off,
	float *t, int acc)
{
	__m512 a[CV_ACC], w[4];
	const float *x[CV_ACC];
#pragma GCC unroll 24
	for (int j = 0; j < P; j++)
		x[j] = CV_ROWS(V) ? xp[0] + j * S : xp[j];
#pragma GCC unroll 24
	for (int i = 0; i < P * V; i++)
		a[i] = acc ? _mm512_loadu_ps(t + i / V * CV_LD + i % V * 16) : _mm512_setzero_ps();
	for (int64_t kk = 0; kk < kb; kk++, wp += ws) {
		int64_t o = off[kk];
#pragma GCC unroll 4
		for (int v = 0; v < V; v++)
			w[v] = _mm512_loadu_ps(wp + 16 * v);
#pragma GCC unroll 24
		for (int j = 0; j < P; j++) {
			__m512 b = _mm512_set1_ps(x[j][o]);
#pragma GCC unroll 4
			for (int v = 0; v < V; v++)
				a[j * V + v] = _mm512_fmadd_ps(w[v], b, a[j * V + v]);
		}
	}
#pragma GCC unroll 24
	for (int i = 0; i < P * V; i++)
		_mm512_storeu_ps(t + i / V * CV_LD + i % V * 16, a[i]);
}

typedef void (*CvTile)(int64_t kb, const float *wp, int64_t ws, const float *const *xp, const int64_t *off,
		       float *t, int acc);

/* the widest tile per V, 2 to 4 vectors of channels: 24 accumulators
 * (one vector would take a broadcast per multiply-add: a group of 16
 * channels or fewer goes to fgemm_packed_direct) */
static const int cv_pmax[5] = {0, 0, 12, 8, 6};

#define CV_FN(V, P, S)                                                                                 \
	AVX512 static void cv_##V##_##P##_##S(int64_t kb, const float *wp, int64_t ws, const float *const *xp, \
					      const int64_t *off, float *t, int acc)                 \
	{                                                                                              \
		cv_tile(V, P, S, kb, wp, ws, xp, off, t, acc);                                         \
	}
CV_FN(2, 1, 1) CV_FN(2, 2, 1) CV_FN(2, 3, 1) CV_FN(2, 4, 1) CV_FN(2, 5, 1) CV_FN(2, 6, 1)
CV_FN(2, 7, 1) CV_FN(2, 8, 1) CV_FN(2, 9, 1) CV_FN(2, 10, 1) CV_FN(2, 11, 1) CV_FN(2, 12, 1)
CV_FN(2, 1, 2) CV_FN(2, 2, 2) CV_FN(2, 3, 2) CV_FN(2, 4, 2) CV_FN(2, 5, 2) CV_FN(2, 6, 2)
CV_FN(2, 7, 2) CV_FN(2, 8, 2) CV_FN(2, 9, 2) CV_FN(2, 10, 2) CV_FN(2, 11, 2) CV_FN(2, 12, 2)
CV_FN(3, 1, 1) CV_FN(3, 2, 1) CV_FN(3, 3, 1) CV_FN(3, 4, 1) CV_FN(3, 5, 1) CV_FN(3, 6, 1)
CV_FN(3, 7, 1) CV_FN(3, 8, 1)
CV_FN(4, 1, 1) CV_FN(4, 2, 1) CV_FN(4, 3, 1) CV_FN(4, 4, 1) CV_FN(4, 5, 1) CV_FN(4, 6, 1)
#undef CV_FN
/* per V - 2 and P - 1 (two vectors: width stride 1, then 2) */
static const CvTile cv_tiles[4][12] = {
	{cv_2_1_1, cv_2_2_1, cv_2_3_1, cv_2_4_1, cv_2_5_1, cv_2_6_1, cv_2_7_1, cv_2_8_1, cv_2_9_1, cv_2_10_1,
	 cv_2_11_1, cv_2_12_1},
	{cv_3_1_1, cv_3_2_1, cv_3_3_1, cv_3_4_1, cv_3_5_1, cv_3_6_1, cv_3_7_1, cv_3_8_1},
	{cv_4_1_1, cv_4_2_1, cv_4_3_1, cv_4_4_1, cv_4_5_1, cv_4_6_1},
	{cv_2_1_2, cv_2_2_2, cv_2_3_2, cv_2_4_2, cv_2_5_2, cv_2_6_2, cv_2_7_2, cv_2_8_2, cv_2_9_2, cv_2_10_2,
	 cv_2_11_2, cv_2_12_2},
};

typedef struct CvRun {
	const ConvShape *cs;
	const DirectGeom *dg;     /* one image */
	const float *x, *bias, *sum, *clamp;
	float *y;
	const float *wt;          /* per group [kc][mpad] */
	int64_t mpad;
	const int64_t *off;
	float *bufs;              /* per piece: dg->floats of planes, cv_buf_floats of sums */
	int64_t pieces;
	const float *xq;          /* planes of one product split among threads (cv_split) */
	int64_t n, g;
	int64_t st[3];            /* plane elements per output step (the strides; 1 in split planes) */
	const ConvShape *pcs;     /* the shape the planes are laid out for (cv_plane_shape) */
} CvRun;

/* the sums of positions [p0, p0 + np) (at t, CV_LD apart) for the V
 * vectors of channels from m0 turned into the output's rows, with bias,
 * sum and clamp; channels past the group's not stored */
AVX512 static void cv_store(const CvRun *r, int64_t n, int64_t g, int64_t m0, int V, int64_t p0, int64_t np,
			    const float *t)
{
	const ConvShape *cs = r->cs;
	int64_t mg = cs->M / cs->G, osz = cs->osz;
	float *yb = r->y + (n * cs->M + g * mg) * osz + p0;
	const float *sb = r->sum ? r->sum + (n * cs->M + g * mg) * osz + p0 : NULL;
	const float *bb = r->bias ? r->bias + g * mg : NULL, *cl = r->clamp;
	__m512 lo = _mm512_set1_ps(cl ? cl[0] : 0), hi = _mm512_set1_ps(cl ? cl[1] : 0);
	for (int v = 0; v < V; v++) {
		int64_t mb = m0 + 16 * v, me = mg - mb < 16 ? mg - mb : 16;
		for (int64_t q = 0; q < np; q += 16) {
			int64_t nq = np - q < 16 ? np - q : 16;
			__mmask16 k = (__mmask16)(nq == 16 ? 0xffff : (1u << nq) - 1);
			const float *tq = t + q * CV_LD + 16 * v;
			__m512 c[16];
#pragma GCC unroll 16
			for (int i = 0; i < 16; i++)
				c[i] = i < nq ? _mm512_loadu_ps(tq + i * CV_LD) : _mm512_setzero_ps();
			fgemm_transpose16(c);
#pragma GCC unroll 16
			for (int i = 0; i < 16; i++) {
				if (i >= me)
					break;
				int64_t at = (mb + i) * osz + q;
				__m512 e = c[i];
				if (bb)
					e = _mm512_add_ps(e, _mm512_set1_ps(bb[mb + i]));
				if (sb)
					e = _mm512_add_ps(e, _mm512_maskz_loadu_ps(k, sb + at));
				if (cl)   /* as tile_store: e on equality and NaN */
					e = _mm512_min_ps(hi, _mm512_max_ps(lo, e));
				if (nq == 16)
					_mm512_storeu_ps(yb + at, e);
				else
					_mm512_mask_storeu_ps(yb + at, k, e);
			}
		}
	}
}

/* floats of a buffer of sums: CV_PX positions, or one output row if longer */
static size_t cv_buf_floats(const ConvShape *cs)
{
	return (size_t)(cs->out[2] > CV_PX ? cs->out[2] : CV_PX) * CV_LD;
}

/* the shape whose direct layout (one image) holds cs's input: with width
 * strides of 1 or 2, cs at stride 1 over the span of input its outputs
 * read (or the whole padded input, if longer), so the planes are the
 * padded input copied row by row, not split by stride phase: a broadcast
 * reads any element, and splitting took 18% of the synthetic CNN's
 * stride-2 layers; wider strides as they are (split planes, in which a
 * row's tile reads consecutive elements) */
static ConvShape cv_plane_shape(const ConvShape *cs)
{
	ConvShape p = *cs;
	if (cs->s[2] > 2)
		return p;
	for (int j = 0; j < 3; j++) {
		int64_t span = (cs->out[j] - 1) * cs->s[j] + 1, held = cs->in[j] + cs->pb[j] - (cs->k[j] - 1) * cs->d[j];
		p.out[j] = span > held ? span : held;
		p.s[j] = 1;
	}
	return p;
}

/* where the input of output (od, oh, ow) is in the planes, for the tap
 * at offset 0 */
static inline int64_t cv_pos(const CvRun *r, int64_t od, int64_t oh, int64_t ow)
{
	return (od * r->st[0] * r->dg->q[1] + oh * r->st[1]) * r->dg->w + ow * r->st[2];
}

/* output rows [r0, r1) of image n, group g, from its planes xq; t: the
 * buffer of sums (cv_buf_floats) */
static void cv_rows(const CvRun *r, const float *xq, int64_t n, int64_t g, int64_t r0, int64_t r1, float *t)
{
	const ConvShape *cs = r->cs;
	int64_t kc = cs->C / cs->G * cs->ksz, ow = cs->out[2], oh = cs->out[1];
	int64_t chunk = CV_PX / ow > 0 ? CV_PX / ow : 1;
	const float *wg = r->wt + g * kc * r->mpad;
	const float *xp[CV_ACC];
	for (int64_t rc = r0; rc < r1; rc += chunk) {
		int64_t re = rc + chunk < r1 ? rc + chunk : r1, np = (re - rc) * ow;
		/* passes of 2 to 4 vectors of channels: 80 = 48 + 32, not 64 + 16 */
		int64_t nv = r->mpad / 16, npass = (nv + 3) / 4;
		for (int64_t pi = 0, m0 = 0, V; pi < npass; pi++, m0 += 16 * V) {
			V = nv / npass + (pi < nv % npass);
			const CvTile *fn = cv_tiles[V == 2 && r->st[2] == 2 ? 3 : V - 2];
			int pmax = cv_pmax[V];
			int64_t nkb = (kc + CV_KB - 1) / CV_KB;
			for (int64_t kbi = 0, k0 = 0, kb; kbi < nkb; kbi++, k0 += kb) {
				kb = kc / nkb + (kbi < kc % nkb);
				const float *wk = wg + k0 * r->mpad + m0;
				if (CV_ROWS(V)) {
					/* per row, tiles of balanced widths: 32 = 11 + 11 + 10 */
					int64_t nt = (ow + pmax - 1) / pmax;
					for (int64_t row = rc; row < re; row++)
						for (int64_t i = 0, o = 0; i < nt; i++) {
							int64_t p = ow / nt + (i < ow % nt);
							xp[0] = xq + cv_pos(r, row / oh, row % oh, o);
							fn[p - 1](kb, wk, r->mpad, xp, r->off + k0,
								  t + ((row - rc) * ow + o) * CV_LD, k0 > 0);
							o += p;
						}
					continue;
				}
				/* tiles of balanced widths across rows: 196 = 31 x 6 + 2 x 5 */
				int64_t nt = (np + pmax - 1) / pmax;
				for (int64_t i = 0, o = 0; i < nt; i++) {
					int64_t p = np / nt + (i < np % nt);
					for (int64_t j = 0; j < p; j++) {
						int64_t row = rc + (o + j) / ow;
						xp[j] = xq + cv_pos(r, row / oh, row % oh, (o + j) % ow);
					}
					fn[p - 1](kb, wk, r->mpad, xp, r->off + k0, t + o * CV_LD, k0 > 0);
					o += p;
				}
			}
			cv_store(r, n, g, m0, V, rc * ow, np, t);
		}
	}
}

/* products [lo, hi) whole (product i: image i / G, group i % G) */
static void cv_run(void *arg, int64_t lo, int64_t hi)
{
	const CvRun *r = arg;
	const ConvShape *cs = r->cs;
	int64_t all = cs->N * cs->G, cg = cs->C / cs->G;
	size_t piece = (size_t)r->dg->floats + cv_buf_floats(cs);
	float *xq = r->bufs + (size_t)((lo * r->pieces + all - 1) / all) * piece, *t = xq + r->dg->floats;
	for (int64_t i = lo; i < hi; i++) {
		int64_t n = i / cs->G, g = i % cs->G;
		conv_direct_pad(r->pcs, r->dg, r->x + (n * cs->C + g * cg) * cs->isz, xq);
		cv_rows(r, xq, n, g, 0, cs->out[0] * cs->out[1], t);
	}
}

/* output rows [lo, hi) of one product whose planes are made (r->xq) */
static void cv_split(void *arg, int64_t lo, int64_t hi)
{
	const CvRun *r = arg;
	int64_t rows = r->cs->out[0] * r->cs->out[1];
	float *t = r->bufs + (size_t)((lo * r->pieces + rows - 1) / rows) * cv_buf_floats(r->cs);
	cv_rows(r, r->xq, r->n, r->g, lo, hi, t);
}

/* the channel-vector product of cs (dg: one image's layout) with the
 * weights wt packed by cv_pack: several products go to the threads
 * whole, fewer products than threads split by output rows (each output
 * still summed by one thread in one order) */
static void conv_gemm_cv(const ConvShape *cs, const DirectGeom *dg, const float *x, const float *bias,
			 const float *sum, const float *clamp, float *y, const float *wt)
{
	int64_t all = cs->N * cs->G, kc = cs->C / cs->G * cs->ksz, rows = cs->out[0] * cs->out[1];
	int64_t mpad = (cs->M / cs->G + 15) / 16 * 16;
	ConvShape pcs = cv_plane_shape(cs);
	int64_t *off = conv_direct_offsets(&pcs, dg);
	CvRun r = {cs, dg, x, bias, sum, clamp, y, wt, mpad, off, NULL, 1, NULL, 0, 0, {1, 1, 1}, &pcs};
	for (int j = 0; j < 3; j++)
		r.st[j] = pcs.s[j] == cs->s[j] ? 1 : cs->s[j];
	/* a thread's share: at least 4 MFLOP, as fgemm splits */
	int64_t flop = 2 * mpad * kc * cs->osz;
	int thr = cs->threads;
	if (thr > 1 && all * flop < (int64_t)thr * 4000000)
		thr = (int)(all * flop / 4000000) > 1 ? (int)(all * flop / 4000000) : 1;
	if (thr <= all || thr < 2 || rows < 2) {
		thr = thr < all ? thr : (int)all;
		thr = thr < 1 ? 1 : thr;
		r.bufs = conv_scratch(2, sizeof(float) * ((size_t)dg->floats + cv_buf_floats(cs)) * (size_t)thr);
		r.pieces = thr;
		nn_parallel(thr, all, cv_run, &r);
	} else {
		float *xq = conv_scratch(2, sizeof(float) * (size_t)dg->floats);
		thr = rows < thr ? (int)rows : thr;
		r.bufs = conv_scratch(1, sizeof(float) * cv_buf_floats(cs) * (size_t)thr);
		r.pieces = thr;
		r.xq = xq;
		for (int64_t i = 0; i < all; i++) {
			r.n = i / cs->G;
			r.g = i % cs->G;
			conv_direct_pad(&pcs, dg, x + (r.n * cs->C + r.g * (cs->C / cs->G)) * cs->isz, xq);
			nn_parallel(thr, rows, cv_split, &r);
		}
	}
	free(off);
}

/* 1 when cs runs as a channel-vector product (dg: one image's layout):
 * groups of 17 to DIRECT_MAX_M output channels wasting at most a fifth
 * of the vectors' lanes (26 of 32, not 24), not pointwise (one GEMM on
 * the input as it lies) */
static int conv_cv_suits(const ConvShape *cs, DirectGeom *dg)
{
	int64_t mg = cs->M / cs->G, mpad = (mg + 15) / 16 * 16;
	if (!fgemm_available() || mg <= 16 || 4 * (mpad - mg) > mg || mg > DIRECT_MAX_M ||
	    cs->C / cs->G * cs->ksz == 0 || conv_pointwise(cs))
		return 0;
	ConvShape pcs = cv_plane_shape(cs);
	return conv_direct_layout(&pcs, 1, dg);
}
#else
/* without AVX-512 intrinsics there is no channel-vector product (and
 * fgemm_available() is 0: the others run on cblas_sgemm) */
static int conv_cv_suits(const ConvShape *cs, DirectGeom *dg)
{
	(void)cs;
	(void)dg;
	return 0;
}

static void conv_gemm_cv(const ConvShape *cs, const DirectGeom *dg, const float *x, const float *bias,
			 const float *sum, const float *clamp, float *y, const float *wt)
{
	(void)cs, (void)dg, (void)x, (void)bias, (void)sum, (void)clamp, (void)y, (void)wt;
}
#endif

/* the im2col of element size es for this CPU */
static void (*im2col_fn(size_t es))(void *, int64_t, int64_t)
{
#if defined(__x86_64__) && defined(__GNUC__)
	if (es == 4 && fgemm_available())
		return im2col4_512;
#endif
	return es == 4 ? im2col4 : im2col8;
}

/* fewer output columns than this go to fgemm's dot products rather than
 * to its packed weights, which compute whole 32-column panels */
#define FGEMM_MIN_N 16

/* bytes of unfolded input per tile: about half of a typical L2 cache */
#ifndef IM2COL_TILE_BYTES
#define IM2COL_TILE_BYTES (128 * 1024)
#endif

/* outputs smaller than this many columns are unfolded several images at a
 * time, so that one GEMM reads (and OpenBLAS packs) the weights once for
 * all of them rather than once per image */
#ifndef CONV_BATCH_COLS
#define CONV_BATCH_COLS 512
#endif

/* per group, the weights packed for fgemm: NULL unless es is 4 and the CPU
 * has AVX-512; entries are packed on first use */
static FgemmA **packs_new(size_t es, int64_t groups)
{
	return es == 4 && fgemm_available() ? xcalloc((size_t)groups, sizeof(FgemmA *)) : NULL;
}

static void packs_free(FgemmA **pa, int64_t groups)
{
	for (int64_t g = 0; pa && g < groups; g++)
		fgemm_free_a(pa[g]);
	free(pa);
}

/* rows x n floats of y (row stride ld) clamped to cl = {lo, hi} as Clip
 * does (v < lo ? lo : v, then v > hi ? hi : v; NaN passes); cl NULL: none */
static void clamp_rows(float *y, int64_t rows, int64_t n, int64_t ld, const float *cl)
{
	if (!cl)
		return;
	float lo = cl[0], hi = cl[1];
	for (int64_t i = 0; i < rows; i++) {
		float *r = y + i * ld;
		for (int64_t j = 0; j < n; j++) {
			float v = r[j] < lo ? lo : r[j];
			r[j] = v > hi ? hi : v;
		}
	}
}

/* c = a * b + bias[row]: [m, k] by [k, n] (row strides lda, ldb, ldc),
 * float or double (bias: float only, may be NULL); pa (from packs_new, may be NULL) is the slot of
 * a's packed form for fgemm_packed; else fgemm where the CPU has AVX-512,
 * sgemm or dgemm */
static void gemm_es(size_t es, FgemmA **pa, int64_t m, int64_t n, int64_t k, const void *a, int64_t lda,
		    const void *b, int64_t ldb, const float *bias, void *c, int64_t ldc, int threads)
{
	if (pa && (n >= FGEMM_MIN_N || *pa)) { /* once packed, a is not read again */
		if (!*pa)
			*pa = fgemm_pack_a_const(m, k, a, lda);
		fgemm_packed(*pa, n, b, ldb, bias, 0, c, ldc, threads);
	} else if (es == 4 && fgemm_available()) {
		fgemm(m, n, k, a, lda, b, ldb, bias, 0, c, ldc, threads);
	} else if (es == 4) {
		/* start from the bias and let the GEMM accumulate */
		for (int64_t i = 0; bias && i < m; i++)
			for (int64_t j = 0; j < n; j++)
				((float *)c)[i * ldc + j] = bias[i];
		cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)m, (int)n, (int)k, 1.0f, a, (int)lda,
			    b, (int)ldb, bias ? 1.0f : 0.0f, c, (int)ldc);
	} else {
		cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)m, (int)n, (int)k, 1.0, a, (int)lda,
			    b, (int)ldb, 0.0, c, (int)ldc);
	}
}

/* images per unfolded tile: 1, or enough that small outputs fill about
 * CONV_BATCH_COLS columns while the tile stays within 4 tiles' bytes */
static int64_t conv_images_per_tile(const ConvShape *cs, int64_t kc, size_t es)
{
	if (cs->N < 2 || cs->osz == 0 || cs->osz >= CONV_BATCH_COLS / 2)
		return 1;
	int64_t nb = CONV_BATCH_COLS / cs->osz;
	int64_t cap = (int64_t)(4 * IM2COL_TILE_BYTES / es) / (kc * cs->osz);
	if (nb > cap)
		nb = cap;
	if (nb > cs->N)
		nb = cs->N;
	return nb < 2 ? 1 : nb;
}

/* conv_gemm for small outputs: per group, nb images are unfolded side by
 * side into one [kc, nb * osz] matrix, multiplied at once into tmp and
 * scattered to their images with the bias */
static void conv_gemm_batched(const ConvShape *cs, const void *x, const void *w, const float *bias,
			      const float *clamp, void *y, size_t es, int64_t nb, FgemmA **cached)
{
	int64_t cg = cs->C / cs->G, mg = cs->M / cs->G, kc = cg * cs->ksz, osz = cs->osz;
	int64_t rows = cs->out[0] * cs->out[1];
	unsigned char *col = conv_scratch(0, (size_t)(kc * nb * osz) * es);
	unsigned char *tmp = conv_scratch(1, (size_t)(mg * nb * osz) * es);
	FgemmA **pa = cached;
	for (int64_t g = 0; g < cs->G; g++) {
		/* w is NULL once released after packing (OpCache.packed) */
		const unsigned char *wg = w ? (const unsigned char *)w + (size_t)(g * mg * kc) * es : NULL;
		for (int64_t n0 = 0; n0 < cs->N; n0 += nb) {
			int64_t nn = cs->N - n0 < nb ? cs->N - n0 : nb, ld = nn * osz;
			for (int64_t i = 0; i < nn; i++) {
				const unsigned char *xg = (const unsigned char *)x +
					(size_t)(((n0 + i) * cs->C + g * cg) * cs->isz) * es;
				Im2col a = {cs, xg, col + (size_t)(i * osz) * es, 0, rows, ld};
				int thr = kc * osz >= 65536 ? cs->threads : 1;
				nn_parallel(thr, cg, im2col_fn(es), &a);
			}
			gemm_es(es, pa ? pa + g : NULL, mg, ld, kc, wg, kc, col, ld, NULL, tmp, ld, cs->threads);
			for (int64_t i = 0; i < nn; i++)
				for (int64_t m = 0; m < mg; m++) {
					const unsigned char *src = tmp + (size_t)(m * ld + i * osz) * es;
					unsigned char *dst = (unsigned char *)y +
						(size_t)(((n0 + i) * cs->M + g * mg + m) * osz) * es;
					if (es == 4 && bias) {
						float bv = bias[g * mg + m];
						for (int64_t j = 0; j < osz; j++)
							((float *)dst)[j] = ((const float *)src)[j] + bv;
					} else {
						memcpy(dst, src, (size_t)osz * es);
					}
					if (es == 4)
						clamp_rows((float *)dst, 1, osz, osz, clamp);
				}
		}
	}
}

/* 1 when cs runs as a direct product (dg filled; the packed weights,
 * cached, made where missing) */
static int conv_direct_ready(const ConvShape *cs, const void *w, FgemmA **cached, DirectGeom *dg)
{
	int64_t mg = cs->M / cs->G, kc = cs->C / cs->G * cs->ksz;
	if (!cached || cs->osz < FGEMM_MIN_N || kc == 0 || !conv_direct_images(cs, dg))
		return 0;
	for (int64_t g = 0; g < cs->G; g++)
		if (!cached[g])
			cached[g] = fgemm_pack_a_const(mg, kc, (const float *)w + g * mg * kc, kc);
	return 1;
}

/* y[n, m, :] = bias[m] + sum over the group's channels and kernel of w * x;
 * es 4: float with fgemm or sgemm, es 8: double with dgemm (bias and clamp
 * NULL: none; only float has them); clamp: a fused Relu or Clip applied as
 * results are stored (see clamp_rows); cached: the weights packed for
 * fgemm per group, kept by the caller (NULL: packed here when fgemm runs) */
static void conv_gemm(const ConvShape *cs, const void *x, const void *w, const float *bias, const float *clamp,
		      void *y, size_t es, FgemmA **cached)
{
	int64_t cg = cs->C / cs->G, mg = cs->M / cs->G, kc = cg * cs->ksz;
	int64_t ow_n = cs->out[2], rows = cs->out[0] * cs->out[1];
	int pw = conv_pointwise(cs);
	if (kc == 0) {
		memset(y, 0, (size_t)(cs->N * cs->M * cs->osz) * es);
		if (bias)
			for (int64_t i = 0; i < cs->N * cs->M * cs->osz; i++)
				((float *)y)[i] = bias[i / cs->osz % cs->M];
		if (es == 4)
			clamp_rows(y, 1, cs->N * cs->M * cs->osz, 0, clamp);
		return;
	}
	DirectGeom dg;
	if (conv_direct_ready(cs, w, cached, &dg)) {
		conv_gemm_direct(cs, &dg, x, bias, NULL, clamp, y, cached);
		return;
	}
	int64_t nb = conv_images_per_tile(cs, kc, es);
	if (nb > 1) {
		conv_gemm_batched(cs, x, w, bias, clamp, y, es, nb, cached);
		return;
	}
#if defined(__x86_64__) && defined(__GNUC__)
	if (cached && !pw && cs->osz >= FGEMM_MIN_N) {
		for (int64_t g = 0; g < cs->G; g++)
			if (!cached[g])
				cached[g] = fgemm_pack_a_const(mg, kc, (const float *)w + g * mg * kc, kc);
		conv_gemm_implicit(cs, x, bias, clamp, y, cached);
		return;
	}
#endif
	/* output rows per tile: at least one, and at least 64 columns */
	int64_t rpt = (int64_t)(IM2COL_TILE_BYTES / es) / (kc * (ow_n ? ow_n : 1));
	if (rpt * ow_n < 64)
		rpt = ow_n ? (64 + ow_n - 1) / ow_n : 1;
	if (rpt < 1)
		rpt = 1;
	if (rpt > rows || pw)
		rpt = rows;
	void *col = pw ? NULL : conv_scratch(0, (size_t)(kc * rpt * ow_n) * es + 1);
	FgemmA **pa = cached;
	for (int64_t n = 0; n < cs->N; n++) {
		for (int64_t g = 0; g < cs->G; g++) {
			const unsigned char *xg = (const unsigned char *)x + (size_t)((n * cs->C + g * cg) * cs->isz) * es;
			const unsigned char *wg = w ? (const unsigned char *)w + (size_t)(g * mg * kc) * es : NULL;
			unsigned char *yg = (unsigned char *)y + (size_t)((n * cs->M + g * mg) * cs->osz) * es;
			for (int64_t r0 = 0; r0 < rows; r0 += rpt) {
				int64_t r1 = r0 + rpt < rows ? r0 + rpt : rows, T = (r1 - r0) * ow_n;
				const void *b = xg;
				if (!pw) {
					Im2col a = {cs, xg, col, r0, r1, T};
					int thr = kc * T >= 65536 ? cs->threads : 1;
					nn_parallel(thr, cg, im2col_fn(es), &a);
					b = col;
				}
				if (T == 0)
					continue;
				void *yt = yg + (size_t)(r0 * ow_n) * es;
				gemm_es(es, pa ? pa + g : NULL, mg, T, kc, wg, kc, b, T, bias ? bias + g * mg : NULL, yt,
					cs->osz, cs->threads);
				if (es == 4) /* while the tile is in cache */
					clamp_rows(yt, mg, T, cs->osz, clamp);
			}
		}
	}
}

/* n floats of y += sum, then clamped (cl NULL: not) */
static void add_clamp(float *y, const float *sum, int64_t n, const float *cl)
{
	for (int64_t i = 0; i < n; i++) {
		float v = y[i] + sum[i];
		if (cl) {
			v = v < cl[0] ? cl[0] : v;
			v = v > cl[1] ? cl[1] : v;
		}
		y[i] = v;
	}
}

/* conv_gemm on float32 plus sum (laid out as y; NULL: none) before the
 * clamp: added as the direct product stores its tiles, else in a pass
 * after */
static void conv_gemm_sum(const ConvShape *cs, const float *x, const float *w, const float *bias,
			  const float *sum, const float *clamp, float *y, FgemmA **cached)
{
	DirectGeom dg;
	if (sum && conv_direct_ready(cs, w, cached, &dg)) {
		conv_gemm_direct(cs, &dg, x, bias, sum, clamp, y, cached);
		return;
	}
	conv_gemm(cs, x, w, bias, sum ? NULL : clamp, y, 4, cached);
	if (sum)
		add_clamp(y, sum, cs->N * cs->M * cs->osz, clamp);
}

/* ---- depthwise (one input channel per group), float ---- */

typedef struct DwArgs {
	const ConvShape *cs;
	const float *x, *w, *b;
	float *y;
} DwArgs;

#define NN_CLONES QM_CLONES("arch=x86-64-v3", "default")

typedef float nn_v8 __attribute__((vector_size(32)));
typedef float nn_v4 __attribute__((vector_size(16)));

/* Depthwise rows: for every output row the valid taps (kernel row, column)
 * are listed as (input row, offset, weight); interior columns, where every
 * tap is inside the image, accumulate all taps in registers eight columns
 * at a time and store once; the few edge columns check bounds. Strided rows
 * are split into phases first so that every tap reads contiguous memory. */
NN_CLONES static void dw_rows(void *arg, int64_t lo, int64_t hi)
{
	const DwArgs *a = arg;
	const ConvShape *cs = a->cs;
	int64_t mg = cs->M / cs->G, kw_n = cs->k[2], st = cs->s[2], inw = cs->in[2], ow_n = cs->out[2];
	int64_t krows = cs->k[0] * cs->k[1], ntmax = krows * kw_n;
	/* per kernel column: the output columns whose input is inside the row */
	int64_t *olo = xmalloc(sizeof(int64_t) * (size_t)(3 * kw_n + 2 * ntmax));
	int64_t *ohi = olo + kw_n, *off = ohi + kw_n, *toff = off + kw_n, *tkw = toff + ntmax;
	int64_t ilo = 0, ihi = ow_n;
	for (int64_t kw = 0; kw < kw_n; kw++) {
		int64_t iw0 = kw * cs->d[2] - cs->pb[2];
		olo[kw] = iw0 >= 0 ? 0 : nn_ceildiv(-iw0, st);
		ohi[kw] = inw - iw0 > 0 ? nn_ceildiv(inw - iw0, st) : 0;
		if (ohi[kw] > ow_n)
			ohi[kw] = ow_n;
		if (olo[kw] > ohi[kw])
			olo[kw] = ohi[kw];
		off[kw] = iw0;
		if (olo[kw] > ilo)
			ilo = olo[kw];
		if (ohi[kw] < ihi)
			ihi = ohi[kw];
	}
	if (ilo > ihi)
		ilo = ihi = 0;
	const float **tsrc = xmalloc(sizeof(float *) * (size_t)(ntmax ? ntmax : 1));
	float *tw = xmalloc(sizeof(float) * (size_t)(ntmax ? ntmax : 1));
	int64_t plen = (inw + st - 1) / st;
	float *ph = st > 1 ? xmalloc(sizeof(float) * (size_t)(krows * st * plen + 1)) : NULL;
	for (int64_t r = lo; r < hi; r++) {   /* r = n * M + m */
		int64_t n = r / cs->M, m = r % cs->M, g = m / mg;
		const float *xc = a->x + (n * cs->C + g) * cs->isz;
		const float *wk = a->w + m * cs->ksz;
		float *yo = a->y + r * cs->osz;
		float bias = a->b ? a->b[m] : 0.0f;
		for (int64_t od = 0; od < cs->out[0]; od++)
		for (int64_t oh = 0; oh < cs->out[1]; oh++) {
			float *yr = yo + (od * cs->out[1] + oh) * ow_n;
			int64_t nt = 0, nrow = 0;
			for (int64_t kd = 0; kd < cs->k[0]; kd++) {
				int64_t id = od * cs->s[0] - cs->pb[0] + kd * cs->d[0];
				if (id < 0 || id >= cs->in[0])
					continue;
				for (int64_t kh = 0; kh < cs->k[1]; kh++) {
					int64_t ih = oh * cs->s[1] - cs->pb[1] + kh * cs->d[1];
					if (ih < 0 || ih >= cs->in[1])
						continue;
					const float *xr = xc + (id * cs->in[1] + ih) * inw;
					const float *wr = wk + (kd * cs->k[1] + kh) * kw_n;
					float *prow = NULL;
					if (ph) {
						prow = ph + nrow++ * st * plen;
						for (int64_t p = 0; p < st; p++) {
							float *pp = prow + p * plen;
							for (int64_t j = 0, iw = p; iw < inw; j++, iw += st)
								pp[j] = xr[iw];
						}
					}
					for (int64_t kw = 0; kw < kw_n; kw++) {
						if (olo[kw] >= ohi[kw])
							continue;
						/* tsrc[t][toff[t] + ow] is the input of output column ow */
						if (ph) {
							int64_t ph_i = ((off[kw] % st) + st) % st;
							tsrc[nt] = prow + ph_i * plen;
							toff[nt] = nn_floordiv(off[kw], st);
						} else {
							tsrc[nt] = xr;
							toff[nt] = off[kw];
						}
						tw[nt] = wr[kw];
						tkw[nt] = kw;
						nt++;
					}
				}
			}
			/* edge columns */
			for (int64_t ow = 0; ow < ow_n; ow++) {
				if (ow == ilo && ihi > ilo)
					ow = ihi;
				if (ow >= ow_n)
					break;
				float acc = bias;
				for (int64_t t = 0; t < nt; t++)
					if (ow >= olo[tkw[t]] && ow < ohi[tkw[t]])
						acc += tw[t] * tsrc[t][toff[t] + ow];
				yr[ow] = acc;
			}
			/* interior columns: four independent accumulators hide the
			 * latency of the additions, then one, then scalars */
			int64_t ow = ilo;
			for (; ow + 32 <= ihi; ow += 32) {
				nn_v8 a0 = {bias, bias, bias, bias, bias, bias, bias, bias}, a1 = a0, a2 = a0, a3 = a0;
				for (int64_t t = 0; t < nt; t++) {
					const float *sp = tsrc[t] + toff[t] + ow;
					nn_v8 v0, v1, v2, v3, wv = {tw[t], tw[t], tw[t], tw[t], tw[t], tw[t], tw[t], tw[t]};
					memcpy(&v0, sp, sizeof v0);
					memcpy(&v1, sp + 8, sizeof v1);
					memcpy(&v2, sp + 16, sizeof v2);
					memcpy(&v3, sp + 24, sizeof v3);
					a0 += wv * v0;
					a1 += wv * v1;
					a2 += wv * v2;
					a3 += wv * v3;
				}
				memcpy(yr + ow, &a0, sizeof a0);
				memcpy(yr + ow + 8, &a1, sizeof a1);
				memcpy(yr + ow + 16, &a2, sizeof a2);
				memcpy(yr + ow + 24, &a3, sizeof a3);
			}
			for (; ow + 8 <= ihi; ow += 8) {
				nn_v8 acc = {bias, bias, bias, bias, bias, bias, bias, bias};
				for (int64_t t = 0; t < nt; t++) {
					nn_v8 v, wv = {tw[t], tw[t], tw[t], tw[t], tw[t], tw[t], tw[t], tw[t]};
					memcpy(&v, tsrc[t] + toff[t] + ow, sizeof v);
					acc += wv * v;
				}
				memcpy(yr + ow, &acc, sizeof acc);
			}
			for (; ow + 4 <= ihi; ow += 4) {
				nn_v4 acc = {bias, bias, bias, bias};
				for (int64_t t = 0; t < nt; t++) {
					nn_v4 v, wv = {tw[t], tw[t], tw[t], tw[t]};
					memcpy(&v, tsrc[t] + toff[t] + ow, sizeof v);
					acc += wv * v;
				}
				memcpy(yr + ow, &acc, sizeof acc);
			}
			for (; ow < ihi; ow++) {
				float acc = bias;
				for (int64_t t = 0; t < nt; t++)
					acc += tw[t] * tsrc[t][toff[t] + ow];
				yr[ow] = acc;
			}
		}
	}
	free(ph);
	free(tw);
	free(tsrc);
	free(olo);
}

/* ---- Conv ---- */

/* weights packed for fgemm, kept in the node's cache between runs */
typedef struct ConvCache {
	const void *w;            /* the constant weights' data */
	int64_t groups, mg, kc;
	FgemmA **pa;
	float *wt;                /* or packed for the channel-vector product (cv_pack, shared) */
} ConvCache;

static void convcache_release(void *p)
{
	ConvCache *cc = p;
	if (cc) {
		packs_free(cc->pa, cc->groups);
		fgemm_free_packed(cc->wt);
		free(cc);
	}
}

/* the per-group packs of a Conv whose weights are a constant of the plan,
 * made on the first run and reused after; NULL where fgemm does not run or
 * the weights may change (then conv_gemm packs per call) */
static FgemmA **conv_cached_packs(RunCtx *c, const Tensor *w, const ConvShape *cs)
{
	if (!c->cache || !(c->const_in & 2) || !fgemm_available())
		return NULL;
	int64_t mg = cs->M / cs->G, kc = cs->C / cs->G * cs->ksz;
	ConvCache *cc = c->cache->p;
	/* w->data is NULL once the interpreter released the weights */
	if (cc && ((w->data && cc->w != w->data) || cc->groups != cs->G || cc->mg != mg || cc->kc != kc)) {
		convcache_release(cc);
		c->cache->p = cc = NULL;
		c->cache->packed = 0;
	}
	if (!cc) {
		cc = xcalloc(1, sizeof *cc);
		*cc = (ConvCache){w->data, cs->G, mg, kc, packs_new(4, cs->G), NULL};
		c->cache->p = cc;
		c->cache->release = convcache_release;
		c->cache->bytes = 0; /* counted as groups get packed (conv_run) */
	}
	return cc->pa;
}

/* the weights of a Conv whose weights are a constant of the plan packed
 * by cv_pack, made on the first run (the node's cache then holds them,
 * and w is not read again; one pack for the interpreters of a model side
 * by side, fgemm_pack_const); NULL where they may change */
static const float *conv_cached_cv(RunCtx *c, const Tensor *w, const float *wf, const ConvShape *cs)
{
	if (!conv_cached_packs(c, w, cs))
		return NULL;
	ConvCache *cc = c->cache->p;
	if (!cc->wt) {
		size_t floats = (size_t)(cs->G * cc->kc * ((cc->mg + 15) / 16 * 16));
		if (!wf)
			return NULL;
		cc->wt = fgemm_pack_const(cv_pack, cv_same, floats, wf, cs->M, cc->kc, cs->G);
		c->cache->bytes = sizeof(float) * floats;
		c->cache->packed |= 2;
	}
	return cc->wt;
}

static int conv_run_sum(RunCtx *c);

static int conv_run(RunCtx *c)
{
	const Tensor *x = c->in[0], *w = c->in[1], *b = c->nin > 2 ? c->in[2] : NULL;
	ConvShape cs;
	int64_t dims[QM_MAX_RANK];
	if (!nn_is_float(x->dtype))
		return op_unsupported_type(c->node, c->opset, x->dtype);
	if (w->dtype != x->dtype || (b && b->dtype != x->dtype))
		return op_error(c->node, "weights and bias must have the input's type %s", dtype_name(x->dtype));
	if (conv_shape(c, x, w, &cs) < 0)
		return -1;
	if (b && b->numel != cs.M)
		return op_error(c->node, "bias has %lld elements, expected %lld", (long long)b->numel, (long long)cs.M);
	conv_out_dims(x, &cs, dims);
	conv_squeeze_units(&cs);
	/* a fused Add of another shape or type is done in full after */
	const Tensor *sum = c->sum;
	if (sum && (x->dtype != DT_FLOAT || sum->dtype != DT_FLOAT || sum->rank != x->rank ||
		    memcmp(sum->dims, dims, sizeof *dims * (size_t)x->rank)))
		return conv_run_sum(c);
	if (x->dtype == DT_DOUBLE) {
		if (op_output(c, 0, DT_DOUBLE, x->rank, dims) < 0)
			return -1;
		double *xd = xmalloc(x->nbytes + 8), *wd = xmalloc(w->nbytes + 8);
		memcpy(xd, x->data, x->nbytes);
		memcpy(wd, w->data, w->nbytes);
		double *yd = c->out[0]->data;
		if (c->out[0]->numel)
			conv_gemm(&cs, xd, wd, NULL, NULL, yd, 8, NULL);
		if (b)
			for (int64_t n = 0; n < cs.N; n++)
				for (int64_t m = 0; m < cs.M; m++) {
					double bv;
					memcpy(&bv, (const char *)b->data + m * 8, 8);
					for (int64_t i = 0; i < cs.osz; i++)
						yd[(n * cs.M + m) * cs.osz + i] += bv;
				}
		for (int64_t i = 0; c->clamp && i < c->out[0]->numel; i++) {
			double v = yd[i] < c->clamp[0] ? c->clamp[0] : yd[i];
			yd[i] = v > c->clamp[1] ? c->clamp[1] : v;
		}
		free(xd);
		free(wd);
		return 0;
	}
	/* depthwise convolutions read w directly; the others pack it for
	 * fgemm where they can, and once every group is packed w is not read
	 * again (nor converted from float16) */
	int dw = cs.C / cs.G == 1 && cs.M / cs.G <= 4 && cs.G > 1;
	DirectGeom cvg;
	int cv = !dw && shape_numel(x->rank, dims) && conv_cv_suits(&cs, &cvg);
	FgemmA **packs = shape_numel(x->rank, dims) && !dw ? conv_cached_packs(c, w, &cs) : NULL;
	int packed = packs && (c->cache->packed & 2);
	if (!packed && !w->data)
		return op_error(c->node, "weights were released but are needed again");
	float *tx, *tw = NULL, *tb = NULL, *ty;
	const float *xf = nn_f32_in(c, x, &tx), *wf = packed ? NULL : nn_f32_in(c, w, &tw), *bf = NULL;
	const float *wt = cv ? conv_cached_cv(c, w, wf, &cs) : NULL;
	if (b)
		bf = nn_f32_in(c, b, &tb);
	float *y = nn_f32_out(c, 0, x->dtype, x->rank, dims, &ty);
	if (!y) {
		free(tx);
		free(tw);
		free(tb);
		return -1;
	}
	if (c->out[0]->numel == 0) {
		/* nothing to compute */
	} else if (dw) {
		DwArgs a = {&cs, xf, wf, bf, y};
		int thr = cs.N * cs.M * cs.osz * cs.ksz >= 65536 ? c->threads : 1;
		nn_parallel(thr, cs.N * cs.M, dw_rows, &a);
		if (sum)
			add_clamp(y, sum->data, c->out[0]->numel, c->clamp);
		else
			clamp_rows(y, 1, c->out[0]->numel, 0, c->clamp);
	} else if (wt) {
		conv_gemm_cv(&cs, &cvg, xf, bf, sum ? sum->data : NULL, c->clamp, y, wt);
	} else {
		conv_gemm_sum(&cs, xf, wf, bf, sum ? sum->data : NULL, c->clamp, y, packs);
		/* small outputs may run without packing: count what is packed */
		int all = packs != NULL;
		size_t bytes = 0;
		for (int64_t g = 0; packs && g < cs.G; g++) {
			all &= packs[g] != NULL;
			bytes += packs[g] ? fgemm_packed_a_bytes(cs.M / cs.G, cs.C / cs.G * cs.ksz) : 0;
		}
		if (packs)
			c->cache->bytes = bytes;
		if (all)
			c->cache->packed |= 2;
	}
	nn_f32_done(c->out[0], ty);
	free(tx);
	free(tw);
	free(tb);
	return 0;
}

/* conv_run with a fused Add whose other input c->sum is not float32 of
 * the output's shape: the convolution into a temporary, then the Add as
 * its kernel computes it (broadcast; 16-bit floats in float32, double in
 * double), then the clamp */
static int conv_run_sum(RunCtx *c)
{
	Tensor tmp = {0}, *to[1] = {&tmp};
	RunCtx c2 = *c;
	c2.sum = NULL;
	c2.clamp = NULL;
	c2.interp = NULL;   /* tmp from the heap, not the interpreter's pool */
	c2.out = to;
	c2.nout = 1;
	if (conv_run(&c2) < 0) {
		tensor_free(&tmp);
		return -1;
	}
	const Tensor *S = c->sum, *ab[2] = {&tmp, S};
	int rank, r = -1;
	int64_t dims[QM_MAX_RANK];
	if (S->dtype != tmp.dtype) {
		r = op_error(c->node, "the Add fused into it has inputs of types %s and %s", dtype_name(tmp.dtype),
			     dtype_name(S->dtype));
	} else if (bcast_shape_t(c->node, 2, ab, &rank, dims) < 0) {
		r = -1;
	} else if (tmp.dtype == DT_DOUBLE) {
		if (op_output(c, 0, DT_DOUBLE, rank, dims) == 0) {
			const double *pa = tmp.data, *pb = S->data;
			double *py = c->out[0]->data;
			BcastIter it;
			bcast_begin(&it, rank, dims, 2, ab);
			while (bcast_next(&it))
				for (int64_t i = 0; i < it.n; i++) {
					double v = pa[it.off[0] + i * it.step[0]] + pb[it.off[1] + i * it.step[1]];
					if (c->clamp) {
						v = v < c->clamp[0] ? c->clamp[0] : v;
						v = v > c->clamp[1] ? c->clamp[1] : v;
					}
					py[it.out + i] = v;
				}
			r = 0;
		}
	} else {
		float *ta = NULL, *tb = NULL, *ty = NULL;
		const float *pa = nn_f32_in(c, &tmp, &ta), *pb = pa ? nn_f32_in(c, S, &tb) : NULL;
		float *py = pb ? nn_f32_out(c, 0, tmp.dtype, rank, dims, &ty) : NULL;
		if (py) {
			BcastIter it;
			bcast_begin(&it, rank, dims, 2, ab);
			while (bcast_next(&it))
				for (int64_t i = 0; i < it.n; i++)
					py[it.out + i] = pa[it.off[0] + i * it.step[0]] + pb[it.off[1] + i * it.step[1]];
			clamp_rows(py, 1, c->out[0]->numel, 0, c->clamp);
			nn_f32_done(c->out[0], ty);
			r = 0;
		}
		free(ta);
		free(tb);
	}
	tensor_free(&tmp);
	return r;
}

/* ---- ConvTranspose ---- */

typedef struct TConv {
	ConvShape cs;             /* in/out are the op's input/output; k, s, d, pb */
	int64_t pe[3];
} TConv;

static int get_attr_ints(const Onnx__NodeProto *n, const char *name, int want, int64_t dflt,
			 int64_t *out, int *given)
{
	const int64_t *v;
	size_t len;
	if (attr_ints(n, name, &v, &len) < 0)
		return -1;
	if (given)
		*given = v != NULL;
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

/* Output sizes of ConvTranspose over nsp dims from in[] (-1 unknown) and
 * kernel k[]; fills pads too. */
static int tconv_geom(const Onnx__NodeProto *n, int nsp, const int64_t *in, const int64_t *kin,
		      int64_t *k, int64_t *s, int64_t *d, int64_t *pb, int64_t *pe, int64_t *out)
{
	int64_t op[QM_MAX_RANK], pads[2 * QM_MAX_RANK], oshape[QM_MAX_RANK + 2];
	char ap[32];
	const int64_t *osv;
	size_t oslen;
	int kgiven;
	if (get_attr_ints(n, "kernel_shape", nsp, 0, k, &kgiven) < 0)
		return -1;
	if (!kgiven)
		memcpy(k, kin, sizeof *k * (size_t)nsp);
	if (get_attr_ints(n, "strides", nsp, 1, s, NULL) < 0 ||
	    get_attr_ints(n, "dilations", nsp, 1, d, NULL) < 0 ||
	    get_attr_ints(n, "output_padding", nsp, 0, op, NULL) < 0 ||
	    get_attr_ints(n, "pads", 2 * nsp, 0, pads, NULL) < 0 ||
	    attr_ints(n, "output_shape", &osv, &oslen) < 0 ||
	    attr_str(n, "auto_pad", "NOTSET", ap, sizeof ap) < 0)
		return -1;
	if (osv) {
		if ((int)oslen == nsp)
			memcpy(oshape, osv, sizeof *osv * oslen);
		else if ((int)oslen == nsp + 2)
			memcpy(oshape, osv + 2, sizeof *osv * (size_t)nsp);
		else
			return op_error(n, "output_shape has %zu values for %d spatial dimensions", oslen, nsp);
	}
	int upper = !strcmp(ap, "SAME_UPPER"), same = upper || !strcmp(ap, "SAME_LOWER");
	int valid = !strcmp(ap, "VALID");
	if (!same && !valid && strcmp(ap, "NOTSET"))
		return op_error(n, "unknown auto_pad '%s' (expected NOTSET, SAME_UPPER, SAME_LOWER or VALID)", ap);
	for (int i = 0; i < nsp; i++) {
		if (k[i] < 1 || s[i] < 1 || d[i] < 1)
			return op_error(n, "kernel_shape, strides and dilations must be positive");
		int64_t ek = (k[i] - 1) * d[i] + 1;
		if (in[i] < 0 || k[i] < 0) {
			out[i] = osv ? oshape[i] : -1;
			pb[i] = pe[i] = 0;
			continue;
		}
		int64_t full = s[i] * (in[i] - 1) + op[i] + ek;
		if (osv || same) {
			out[i] = osv ? oshape[i] : in[i] * s[i];
			int64_t total = full - out[i];
			if (upper) {
				pb[i] = nn_floordiv(total, 2);
				pe[i] = total - pb[i];
			} else {
				pe[i] = nn_floordiv(total, 2);
				pb[i] = total - pe[i];
			}
		} else {
			pb[i] = valid ? 0 : pads[i];
			pe[i] = valid ? 0 : pads[i + nsp];
			out[i] = full - pb[i] - pe[i];
		}
		if (out[i] < 0)
			return op_error(n, "computed output size %lld on spatial axis %d is negative",
					(long long)out[i], i);
	}
	return 0;
}

static int convtranspose_infer(InferCtx *c)
{
	const ValueType *x = nn_in(c, 0), *w = nn_in(c, 1);
	int64_t group;
	if (!x || !w || attr_int(c->node, "group", 1, &group) < 0)
		return -1;
	int rank = x->rank >= 0 ? x->rank : w->rank;
	ValueType *o = c->out[0];
	vt_set_tensor(o, x->elem, rank);
	if (rank < 0)
		return 0;
	if (rank < 3)
		return op_error(c->node, "input must have rank 3 or more (N, C, spatial...), got %d", rank);
	int nsp = rank - 2;
	int64_t in[QM_MAX_RANK], kin[QM_MAX_RANK], k[QM_MAX_RANK], s[QM_MAX_RANK], d[QM_MAX_RANK];
	int64_t pb[QM_MAX_RANK], pe[QM_MAX_RANK], out[QM_MAX_RANK];
	for (int i = 0; i < nsp; i++) {
		in[i] = x->rank >= 0 ? x->dims[i + 2].v : -1;
		kin[i] = w->rank >= 0 ? w->dims[i + 2].v : -1;
	}
	if (tconv_geom(c->node, nsp, in, kin, k, s, d, pb, pe, out) < 0)
		return -1;
	o->dims[0] = x->rank >= 0 ? x->dims[0] : nn_dim(c, -1);
	o->dims[1] = nn_dim(c, w->rank >= 0 && w->dims[1].v >= 0 ? w->dims[1].v * group : -1);
	for (int i = 0; i < nsp; i++)
		o->dims[i + 2] = nn_dim(c, out[i]);
	return 0;
}

static int convtranspose_run(RunCtx *c)
{
	const Tensor *x = c->in[0], *w = c->in[1], *b = c->nin > 2 ? c->in[2] : NULL;
	int64_t group;
	if (!nn_is_float(x->dtype))
		return op_unsupported_type(c->node, c->opset, x->dtype);
	if (w->dtype != x->dtype || (b && b->dtype != x->dtype))
		return op_error(c->node, "weights and bias must have the input's type %s", dtype_name(x->dtype));
	if (x->rank < 3 || w->rank != x->rank)
		return op_error(c->node, "input and weights must have the same rank >= 3, got %d and %d",
				x->rank, w->rank);
	int nsp = x->rank - 2;
	if (nsp > 3)
		return op_error(c->node, "ConvTranspose-%lld with %d spatial dimensions is not supported (at most 3)",
				(long long)c->opset, nsp);
	if (attr_int(c->node, "group", 1, &group) < 0)
		return -1;
	int64_t C = x->dims[1], N = x->dims[0];
	if (group < 1 || C % group || w->dims[0] != C)
		return op_error(c->node, "weights [%lld, %lld, ...] do not fit %lld input channels with group %lld",
				(long long)w->dims[0], (long long)w->dims[1], (long long)C, (long long)group);
	int64_t mg = w->dims[1], M = mg * group, cg = C / group;
	if (b && b->numel != M)
		return op_error(c->node, "bias has %lld elements, expected %lld", (long long)b->numel, (long long)M);
	int64_t k[QM_MAX_RANK], s[QM_MAX_RANK], d[QM_MAX_RANK], pb[QM_MAX_RANK], pe[QM_MAX_RANK], out[QM_MAX_RANK];
	if (tconv_geom(c->node, nsp, x->dims + 2, w->dims + 2, k, s, d, pb, pe, out) < 0)
		return -1;
	for (int i = 0; i < nsp; i++)
		if (k[i] != w->dims[i + 2])
			return op_error(c->node, "kernel_shape does not match the weights' spatial dims");
	int64_t i3[3] = {1, 1, 1}, k3[3] = {1, 1, 1}, s3[3] = {1, 1, 1}, d3[3] = {1, 1, 1}, p3[3] = {0, 0, 0}, o3[3] = {1, 1, 1};
	for (int i = 0; i < nsp; i++) {
		int j = 3 - nsp + i;
		i3[j] = x->dims[i + 2];
		k3[j] = k[i];
		s3[j] = s[i];
		d3[j] = d[i];
		p3[j] = pb[i];
		o3[j] = out[i];
	}
	int64_t dims[QM_MAX_RANK];
	dims[0] = N;
	dims[1] = M;
	for (int i = 0; i < nsp; i++)
		dims[i + 2] = out[i];
	float *tx, *tw, *tb = NULL, *ty;
	const float *xf = nn_f32_in(c, x, &tx), *wf = nn_f32_in(c, w, &tw), *bf = NULL;
	if (b)
		bf = nn_f32_in(c, b, &tb);
	float *y = nn_f32_out(c, 0, x->dtype, x->rank, dims, &ty);
	if (!y) {
		free(tx);
		free(tw);
		free(tb);
		return -1;
	}
	int64_t isz = i3[0] * i3[1] * i3[2], ksz = k3[0] * k3[1] * k3[2], osz = o3[0] * o3[1] * o3[2];
	int64_t rows = mg * ksz;
	float *col = xmalloc(sizeof(float) * (size_t)(rows * isz > 0 ? rows * isz : 1));
	for (int64_t n = 0; n < N; n++) {
		for (int64_t m = 0; m < M; m++) {
			float bv = bf ? bf[m] : 0.0f, *yr = y + (n * M + m) * osz;
			for (int64_t i = 0; i < osz; i++)
				yr[i] = bv;
		}
		for (int64_t g = 0; g < group && isz && rows; g++) {
			/* col[mg * ksz, isz] = W_g^T * X_g */
			if (cg)
				cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)rows, (int)isz, (int)cg, 1.0f,
					    wf + g * cg * rows, (int)rows, xf + (n * C + g * cg) * isz, (int)isz,
					    0.0f, col, (int)isz);
			else
				memset(col, 0, sizeof(float) * (size_t)(rows * isz));
			/* col2im: scatter-add into the output */
			for (int64_t r = 0; r < rows; r++) {
				int64_t m = r / ksz, kk = r % ksz;
				int64_t kd = kk / (k3[1] * k3[2]), kh = kk / k3[2] % k3[1], kw = kk % k3[2];
				float *yo = y + (n * M + g * mg + m) * osz;
				const float *cr = col + r * isz;
				for (int64_t id = 0; id < i3[0]; id++) {
					int64_t od = id * s3[0] - p3[0] + kd * d3[0];
					if (od < 0 || od >= o3[0])
						continue;
					for (int64_t ih = 0; ih < i3[1]; ih++) {
						int64_t oh = ih * s3[1] - p3[1] + kh * d3[1];
						if (oh < 0 || oh >= o3[1])
							continue;
						const float *ci = cr + (id * i3[1] + ih) * i3[2];
						float *yy = yo + (od * o3[1] + oh) * o3[2];
						for (int64_t iw = 0; iw < i3[2]; iw++) {
							int64_t ow = iw * s3[2] - p3[2] + kw * d3[2];
							if (ow >= 0 && ow < o3[2])
								yy[ow] += ci[iw];
						}
					}
				}
			}
		}
	}
	free(col);
	nn_f32_done(c->out[0], ty);
	free(tx);
	free(tw);
	free(tb);
	return 0;
}

/* ---- ConvInteger, QLinearConv ---- */

/* the zero point of an 8-bit tensor as an int (per-tensor: index 0) */
static int zp_check(RunCtx *c, const Tensor *zp, const Tensor *of, int64_t per, const char *what)
{
	if (!zp)
		return 0;
	if (zp->dtype != of->dtype)
		return op_error(c->node, "%s has type %s, expected %s like its tensor", what,
				dtype_name(zp->dtype), dtype_name(of->dtype));
	if (zp->numel != 1 && zp->numel != per)
		return op_error(c->node, "%s has %lld elements, expected 1%s", what, (long long)zp->numel,
				per > 1 ? " or one per output channel" : "");
	return 0;
}

static int is_q8(int dt)
{
	return dt == DT_UINT8 || dt == DT_INT8;
}

/* x - zp as doubles; zp has 1 or nchan entries over rows of len elements */
static double *q8_to_f64(const Tensor *t, const Tensor *zp, int64_t nchan, int64_t len)
{
	double *r = xmalloc(sizeof(double) * (size_t)(t->numel ? t->numel : 1));
	const uint8_t *p = t->data;
	for (int64_t i = 0; i < t->numel; i++) {
		int64_t zi = zp && zp->numel > 1 ? (i / len) % nchan : 0;
		int z = zp ? (zp->dtype == DT_INT8 ? (int)((const int8_t *)zp->data)[zi] : (int)((const uint8_t *)zp->data)[zi]) : 0;
		int v = t->dtype == DT_INT8 ? (int)(int8_t)p[i] : (int)p[i];
		r[i] = (double)(v - z);
	}
	return r;
}

/* exact integer convolution into acc (N, M, osz doubles); dims filled */
static int qconv_acc(RunCtx *c, const Tensor *x, const Tensor *xzp, const Tensor *w, const Tensor *wzp,
		     ConvShape *cs, int64_t *dims, double **acc)
{
	if (!is_q8(x->dtype))
		return op_unsupported_type(c->node, c->opset, x->dtype);
	if (!is_q8(w->dtype))
		return op_unsupported_type(c->node, c->opset, w->dtype);
	if (conv_shape(c, x, w, cs) < 0)
		return -1;
	if (zp_check(c, xzp, x, 1, "input zero point") < 0 || zp_check(c, wzp, w, cs->M, "weight zero point") < 0)
		return -1;
	conv_out_dims(x, cs, dims);
	int64_t wlen = w->numel / (cs->M ? cs->M : 1);
	double *xd = q8_to_f64(x, xzp, 1, 1), *wd = q8_to_f64(w, wzp, cs->M, wlen ? wlen : 1);
	int64_t n = cs->N * cs->M * cs->osz;
	*acc = xmalloc(sizeof(double) * (size_t)(n ? n : 1));
	if (n)
		conv_gemm(cs, xd, wd, NULL, NULL, *acc, 8, NULL);
	free(xd);
	free(wd);
	return 0;
}

static int convinteger_run(RunCtx *c)
{
	const Tensor *x = c->in[0], *w = c->in[1];
	const Tensor *xzp = c->nin > 2 ? c->in[2] : NULL, *wzp = c->nin > 3 ? c->in[3] : NULL;
	ConvShape cs;
	int64_t dims[QM_MAX_RANK];
	double *acc;
	if (qconv_acc(c, x, xzp, w, wzp, &cs, dims, &acc) < 0)
		return -1;
	if (op_output(c, 0, DT_INT32, x->rank, dims) < 0) {
		free(acc);
		return -1;
	}
	int32_t *y = c->out[0]->data;
	for (int64_t i = 0; i < c->out[0]->numel; i++)
		y[i] = (int32_t)acc[i];
	free(acc);
	return 0;
}

static float scalar_f32(const Tensor *t, int64_t i)
{
	return (float)tensor_get_f64(t, i);
}

static int qlinearconv_run(RunCtx *c)
{
	if (c->nin < 8)
		return op_error(c->node, "expected at least 8 inputs, got %zu", c->nin);
	for (size_t i = 0; i < 8; i++)
		if (!c->in[i])
			return op_error(c->node, "input %zu is required", i);
	const Tensor *x = c->in[0], *xs = c->in[1], *xzp = c->in[2], *w = c->in[3], *ws = c->in[4];
	const Tensor *wzp = c->in[5], *ys = c->in[6], *yzp = c->in[7], *b = c->nin > 8 ? c->in[8] : NULL;
	ConvShape cs;
	int64_t dims[QM_MAX_RANK];
	double *acc;
	if (xs->dtype != DT_FLOAT || ws->dtype != DT_FLOAT || ys->dtype != DT_FLOAT)
		return op_error(c->node, "scales must be float");
	if (!is_q8(yzp->dtype) || yzp->numel != 1 || xs->numel != 1 || ys->numel != 1)
		return op_error(c->node, "x_scale, y_scale and y_zero_point must be scalars, y_zero_point int8 or uint8");
	if (qconv_acc(c, x, xzp, w, wzp, &cs, dims, &acc) < 0)
		return -1;
	if ((ws->numel != 1 && ws->numel != cs.M) || (b && (b->dtype != DT_INT32 || b->numel != cs.M))) {
		free(acc);
		return op_error(c->node, "w_scale must have 1 or %lld elements and B %lld int32 values",
				(long long)cs.M, (long long)cs.M);
	}
	if (op_output(c, 0, yzp->dtype, x->rank, dims) < 0) {
		free(acc);
		return -1;
	}
	float xsv = scalar_f32(xs, 0), ysv = scalar_f32(ys, 0);
	int zp = (int)tensor_get_i64(yzp, 0);
	int lo = yzp->dtype == DT_INT8 ? -128 : 0, hi = yzp->dtype == DT_INT8 ? 127 : 255;
	void *y = c->out[0]->data;
	for (int64_t n = 0; n < cs.N; n++)
		for (int64_t m = 0; m < cs.M; m++) {
			float mul = xsv * scalar_f32(ws, ws->numel > 1 ? m : 0) / ysv;
			double bv = b ? (double)((const int32_t *)b->data)[m] : 0.0;
			for (int64_t i = 0; i < cs.osz; i++) {
				int64_t at = (n * cs.M + m) * cs.osz + i;
				float v = nn_round_even((float)(acc[at] + bv) * mul) + (float)zp;
				int q = v < lo ? lo : v > hi ? hi : (int)v;
				if (lo < 0)
					((int8_t *)y)[at] = (int8_t)q;
				else
					((uint8_t *)y)[at] = (uint8_t)q;
			}
		}
	free(acc);
	return 0;
}

OPERATOR(ai_onnx, Conv, 1, conv_infer, conv_run)
OPERATOR(ai_onnx, ConvInteger, 10, convinteger_infer, convinteger_run)
OPERATOR(ai_onnx, ConvTranspose, 1, convtranspose_infer, convtranspose_run)
OPERATOR(ai_onnx, QLinearConv, 10, qlinearconv_infer, qlinearconv_run)
