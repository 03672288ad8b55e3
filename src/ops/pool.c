/* pool.c — MaxPool, AveragePool, LpPool and their Global forms: inference
 * and kernels.
 *
 * Windows of 1 to 3 spatial dimensions are computed as 3-D ones with leading
 * unit dimensions, one (image, channel) plane at a time, planes spread over
 * threads. Values are pooled in float32 (exact for the 8-bit and float16
 * types MaxPool accepts); MaxPool's optional Indices output counts in the
 * flattened input, row-major or, with storage_order 1, column-major within
 * each plane. */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops/nn.h"
#include "ops/op.h"
#include "ops/shapeutil.h"
#include "util.h"

enum { POOL_MAX, POOL_AVG, POOL_LP };

/* ---- inference ---- */

static int pool_infer(InferCtx *c)
{
	const ValueType *x = nn_in(c, 0);
	if (!x)
		return -1;
	ValueType *o = c->out[0];
	vt_set_tensor(o, x->elem, x->rank);
	if (c->nout > 1 && c->out[1])
		vt_set_tensor(c->out[1], DT_INT64, x->rank);
	if (x->rank < 0)
		return 0;
	if (x->rank < 3)
		return op_error(c->node, "input must have rank 3 or more (N, C, spatial...), got %d", x->rank);
	int nsp = x->rank - 2;
	int64_t in[QM_MAX_RANK];
	for (int i = 0; i < nsp; i++)
		in[i] = x->dims[i + 2].v;
	NnGeom g;
	if (nn_geom(c->node, nsp, in, NULL, 1, &g) < 0)
		return -1;
	o->dims[0] = x->dims[0];
	o->dims[1] = x->dims[1];
	for (int i = 0; i < nsp; i++)
		o->dims[i + 2] = nn_dim(c, g.out[i]);
	if (c->nout > 1 && c->out[1])
		for (int i = 0; i < x->rank; i++)
			c->out[1]->dims[i] = o->dims[i];
	return 0;
}

static int global_pool_infer(InferCtx *c)
{
	const ValueType *x = nn_in(c, 0);
	if (!x)
		return -1;
	ValueType *o = c->out[0];
	vt_set_tensor(o, x->elem, x->rank);
	if (x->rank < 0)
		return 0;
	if (x->rank < 2)
		return op_error(c->node, "input must have rank 2 or more (N, C, spatial...), got %d", x->rank);
	o->dims[0] = x->dims[0];
	o->dims[1] = x->dims[1];
	for (int i = 2; i < x->rank; i++)
		o->dims[i] = (Dim){1, NULL};
	return 0;
}

/* ---- kernels ---- */

typedef struct PoolArgs {
	int kind;
	int64_t in[3], k[3], s[3], d[3], pb[3], pe[3], out[3];
	int64_t isz, osz, planes;
	int count_pad, colmajor;
	float p;
	const float *x;
	float *y;
	int64_t *ind;
} PoolArgs;

static void pool_planes(void *arg, int64_t lo, int64_t hi)
{
	const PoolArgs *a = arg;
	for (int64_t pl = lo; pl < hi; pl++) {
		const float *x = a->x + pl * a->isz;
		float *y = a->y + pl * a->osz;
		int64_t *ind = a->ind ? a->ind + pl * a->osz : NULL;
		for (int64_t od = 0; od < a->out[0]; od++)
		for (int64_t oh = 0; oh < a->out[1]; oh++)
		for (int64_t ow = 0; ow < a->out[2]; ow++) {
			float acc = a->kind == POOL_MAX ? -INFINITY : 0.0f;
			int64_t arg_ = -1, cnt = 0;
			for (int64_t kd = 0; kd < a->k[0]; kd++) {
				int64_t id = od * a->s[0] - a->pb[0] + kd * a->d[0];
				int din = id >= 0 && id < a->in[0];
				int dpad = id >= -a->pb[0] && id < a->in[0] + a->pe[0];
				for (int64_t kh = 0; kh < a->k[1]; kh++) {
					int64_t ih = oh * a->s[1] - a->pb[1] + kh * a->d[1];
					int hin = din && ih >= 0 && ih < a->in[1];
					int hpad = dpad && ih >= -a->pb[1] && ih < a->in[1] + a->pe[1];
					for (int64_t kw = 0; kw < a->k[2]; kw++) {
						int64_t iw = ow * a->s[2] - a->pb[2] + kw * a->d[2];
						if (!hin || iw < 0 || iw >= a->in[2]) {
							if (hpad && iw >= -a->pb[2] && iw < a->in[2] + a->pe[2] && a->count_pad)
								cnt++;
							continue;
						}
						int64_t at = (id * a->in[1] + ih) * a->in[2] + iw;
						float v = x[at];
						cnt++;
						if (a->kind == POOL_MAX) {
							if (v > acc || arg_ < 0) {
								acc = v;
								arg_ = at;
							}
						} else if (a->kind == POOL_AVG) {
							acc += v;
						} else {
							acc += powf(fabsf(v), a->p);
						}
					}
				}
			}
			int64_t o = (od * a->out[1] + oh) * a->out[2] + ow;
			if (a->kind == POOL_MAX) {
				y[o] = acc;
				if (ind) {
					int64_t idx = arg_ < 0 ? 0 : arg_;
					if (a->colmajor) {
						int64_t iw = idx % a->in[2], ih = idx / a->in[2] % a->in[1];
						int64_t id = idx / (a->in[1] * a->in[2]);
						idx = (iw * a->in[1] + ih) * a->in[0] + id;
					}
					ind[o] = pl * a->isz + idx;
				}
			} else if (a->kind == POOL_AVG) {
				y[o] = cnt ? acc / (float)cnt : 0.0f;
			} else {
				y[o] = a->p == 2.0f ? sqrtf(acc) : powf(acc, 1.0f / a->p);
			}
		}
	}
}

/* number of taps k*d + o*s - pb that fall in [lo, hi) */
static int64_t taps_in(int64_t o, int64_t s, int64_t pb, int64_t k, int64_t d, int64_t lo, int64_t hi)
{
	int64_t n = 0;
	for (int64_t j = 0; j < k; j++) {
		int64_t i = o * s - pb + j * d;
		n += i >= lo && i < hi;
	}
	return n;
}

/* Max and average pooling without indices, a row at a time: per kernel
 * column the range of output columns whose input is inside the row is
 * precomputed and strided rows are split into phases, so the inner loops
 * run over contiguous memory without bounds checks. Averages divide by a
 * count that is the product of the per-axis counts. */
static void pool_fast_planes(void *arg, int64_t lo, int64_t hi)
{
	const PoolArgs *a = arg;
	int64_t kw_n = a->k[2], st = a->s[2], inw = a->in[2], ow_n = a->out[2];
	int64_t *olo = xmalloc(sizeof(int64_t) * (size_t)(3 * kw_n + ow_n)), *ohi = olo + kw_n, *off = ohi + kw_n;
	int64_t *cw = off + kw_n;
	for (int64_t kw = 0; kw < kw_n; kw++) {
		int64_t iw0 = kw * a->d[2] - a->pb[2];
		olo[kw] = iw0 >= 0 ? 0 : nn_ceildiv(-iw0, st);
		ohi[kw] = inw - iw0 > 0 ? nn_ceildiv(inw - iw0, st) : 0;
		if (ohi[kw] > ow_n)
			ohi[kw] = ow_n;
		if (olo[kw] > ohi[kw])
			olo[kw] = ohi[kw];
		off[kw] = iw0;
	}
	for (int64_t ow = 0; ow < ow_n; ow++)
		cw[ow] = a->count_pad ? taps_in(ow, st, a->pb[2], kw_n, a->d[2], -a->pb[2], inw + a->pe[2])
				      : taps_in(ow, st, a->pb[2], kw_n, a->d[2], 0, inw);
	int64_t plen = (inw + st - 1) / st;
	float *ph = st > 1 ? xmalloc(sizeof(float) * (size_t)(st * plen + 1)) : NULL;
	int max = a->kind == POOL_MAX;
	for (int64_t pl = lo; pl < hi; pl++) {
		const float *x = a->x + pl * a->isz;
		float *y = a->y + pl * a->osz;
		for (int64_t od = 0; od < a->out[0]; od++)
		for (int64_t oh = 0; oh < a->out[1]; oh++) {
			float *yr = y + (od * a->out[1] + oh) * ow_n;
			for (int64_t ow = 0; ow < ow_n; ow++)
				yr[ow] = max ? -INFINITY : 0.0f;
			int64_t cdh = 0;
			for (int64_t kd = 0; kd < a->k[0]; kd++) {
				int64_t id = od * a->s[0] - a->pb[0] + kd * a->d[0];
				if (id < 0 || id >= a->in[0])
					continue;
				for (int64_t kh = 0; kh < a->k[1]; kh++) {
					int64_t ih = oh * a->s[1] - a->pb[1] + kh * a->d[1];
					if (ih < 0 || ih >= a->in[1])
						continue;
					const float *xr = x + (id * a->in[1] + ih) * inw;
					if (ph)
						for (int64_t p = 0; p < st; p++) {
							float *pp = ph + p * plen;
							for (int64_t j = 0, iw = p; iw < inw; j++, iw += st)
								pp[j] = xr[iw];
						}
					for (int64_t kw = 0; kw < kw_n; kw++) {
						int64_t l = olo[kw], n = ohi[kw] - l;
						if (n <= 0)
							continue;
						int64_t pos = off[kw] + l * st;
						const float *xs = ph ? ph + (pos % st) * plen + pos / st : xr + pos;
						float *yy = yr + l;
						if (max) {
							for (int64_t i = 0; i < n; i++)
								yy[i] = xs[i] > yy[i] ? xs[i] : yy[i];
						} else {
							for (int64_t i = 0; i < n; i++)
								yy[i] += xs[i];
						}
					}
				}
			}
			if (max)
				continue;
			if (a->count_pad)
				cdh = taps_in(od, a->s[0], a->pb[0], a->k[0], a->d[0], -a->pb[0], a->in[0] + a->pe[0]) *
				      taps_in(oh, a->s[1], a->pb[1], a->k[1], a->d[1], -a->pb[1], a->in[1] + a->pe[1]);
			else
				cdh = taps_in(od, a->s[0], a->pb[0], a->k[0], a->d[0], 0, a->in[0]) *
				      taps_in(oh, a->s[1], a->pb[1], a->k[1], a->d[1], 0, a->in[1]);
			for (int64_t ow = 0; ow < ow_n; ow++) {
				int64_t cnt = cdh * cw[ow];
				yr[ow] = cnt ? yr[ow] / (float)cnt : 0.0f;
			}
		}
	}
	free(ph);
	free(olo);
}

/* MaxPool without indices over 1 or 2 spatial axes with unit dilations: the
 * maximum is separable. Per plane, the rows are copied into a plane padded
 * with -inf, each row's kernel-width maxima are taken in registers, then
 * each output row is the maximum of its kernel-height rows of those: k_h +
 * k_w comparisons per output instead of k_h * k_w, and no pass reads back
 * what the previous one has just stored at another offset (a store-forwarding
 * stall per load). Every maximum starts from -inf and keeps the running
 * value where the input is not greater, so NaN inputs are skipped as in
 * pool_fast_planes. 16 lanes at a time (GCC vector extensions), with AVX-512
 * and AVX2 clones chosen where the program loads. */
#define POOL_CLONES QM_CLONES("avx512f", "avx2", "default")
typedef float v16f __attribute__((vector_size(64)));
typedef int32_t v16i __attribute__((vector_size(64)));

/* acc = v > acc ? v : acc, lane by lane */
#define VMAX16(acc, v) do { \
	v16i m_ = (v) > (acc); \
	(acc) = (v16f)((m_ & (v16i)(v)) | (~m_ & (v16i)(acc))); \
} while (0)

POOL_CLONES static void maxpool_sep_planes(void *arg, int64_t lo, int64_t hi)
{
	const PoolArgs *a = arg;
	int64_t inh = a->in[1], inw = a->in[2], oh_n = a->out[1], ow_n = a->out[2];
	int64_t kh_n = a->k[1], kw_n = a->k[2], sh = a->s[1], sw = a->s[2], pw = a->pb[2];
	/* padded rows: input column iw at pw + iw; the last window may reach past pe (ceil_mode) */
	int64_t blen = (ow_n - 1) * sw + kw_n;
	if (blen < pw + inw)
		blen = pw + inw;
	float *pad = xmalloc(sizeof(float) * (size_t)(inh * (blen + ow_n)));
	float *hm = pad + inh * blen;
	for (int64_t i = 0; i < inh * blen; i++)
		pad[i] = -INFINITY;
	v16f ninf = {0};
	ninf -= INFINITY;
	for (int64_t pl = lo; pl < hi; pl++) {
		const float *x = a->x + pl * a->isz;
		float *y = a->y + pl * a->osz;
		for (int64_t ih = 0; ih < inh; ih++)
			memcpy(pad + ih * blen + pw, x + ih * inw, sizeof(float) * (size_t)inw);
		for (int64_t ih = 0; ih < inh; ih++) {
			const float *pr = pad + ih * blen;
			float *hr = hm + ih * ow_n;
			int64_t ow = 0;
			for (; sw == 1 && ow + 16 <= ow_n; ow += 16) {
				v16f acc = ninf, v;
				for (int64_t kw = 0; kw < kw_n; kw++) {
					memcpy(&v, pr + ow + kw, sizeof v);
					VMAX16(acc, v);
				}
				memcpy(hr + ow, &acc, sizeof acc);
			}
			for (; ow < ow_n; ow++) {
				const float *w = pr + ow * sw;
				float m = -INFINITY;
				for (int64_t kw = 0; kw < kw_n; kw++)
					m = w[kw] > m ? w[kw] : m;
				hr[ow] = m;
			}
		}
		for (int64_t oh = 0; oh < oh_n; oh++) {
			int64_t h0 = oh * sh - a->pb[1], h1 = h0 + kh_n;
			h0 = h0 < 0 ? 0 : h0;
			h1 = h1 > inh ? inh : h1;
			float *yr = y + oh * ow_n;
			int64_t ow = 0;
			for (; ow + 16 <= ow_n; ow += 16) {
				v16f acc = ninf, v;
				for (int64_t ih = h0; ih < h1; ih++) {
					memcpy(&v, hm + ih * ow_n + ow, sizeof v);
					VMAX16(acc, v);
				}
				memcpy(yr + ow, &acc, sizeof acc);
			}
			for (; ow < ow_n; ow++) {
				float m = -INFINITY;
				for (int64_t ih = h0; ih < h1; ih++)
					m = hm[ih * ow_n + ow] > m ? hm[ih * ow_n + ow] : m;
				yr[ow] = m;
			}
		}
	}
	free(pad);
}

/* MaxPool as maxpool_sep_planes takes it, with a column stride of 2 (the
 * 2x2 and 3x3 stride-2 pools of CNNs): that kernel's horizontal pass is
 * scalar there, and so is its vertical pass for rows narrower than 16
 * (28 -> 14 -> 7). Here 16 outputs of a row are taken at once from
 * 32 input columns read straight from the plane: tap t of the window is the
 * even (t even) or odd lanes of the 32 columns from 2 ow - pw + t - t % 2,
 * gathered with one two-source permute; columns outside the row (pads,
 * ceil_mode, ragged ends) read as -inf (see load16). The maxima are taken in
 * the same order and with the same rule as maxpool_sep_planes (per input
 * row over the taps, then over the rows, each from -inf, keeping the running
 * value unless the new one is greater: vmaxps), so the results are the same
 * bits, NaN and signed zeros included. AVX-512 only: without it the
 * separable kernel runs. */
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define POOL_AVX512 __attribute__((target("avx512f")))

static int pool_avx512(void)
{
	return cpu_avx512f();
}

/* how to read columns c .. c+15 of a row of w floats, -inf outside it:
 * the lanes m inside the row from off, or (a left pad) an expanding load
 * from the row's start, so that the pointer never leaves the row */
typedef struct Cols16 {
	int64_t off;
	__mmask16 m;
	int expand;
} Cols16;

static Cols16 cols16(int64_t w, int64_t c)
{
	int64_t lo = c < 0 ? -c : 0, hi = w - c < 16 ? w - c : 16;
	Cols16 d = {c < 0 ? 0 : c, 0, c < 0};
	if (lo < hi)
		d.m = (__mmask16)((1u << hi) - (1u << lo));
	else
		d.off = 0;
	return d;
}

/* Masked loads are avoided where the 16 floats lie inside the tensor (end):
 * on AMD Zen 4 one that crosses a page takes a microcode assist (a 3x3
 * stride-2 pool of 96x111x111 ran 2.4 times slower than the scalar kernel
 * with masked loads everywhere); past the row they are other rows' values,
 * replaced by -inf in a register. */
POOL_AVX512 static inline __m512 load16(const float *row, const Cols16 *d, __m512 ninf, const float *end)
{
	if (d->m == 0xffff)
		return _mm512_loadu_ps(row + d->off);
	if (!d->m)
		return ninf;
	if (!d->expand && end - (row + d->off) >= 16)
		return _mm512_mask_mov_ps(ninf, d->m, _mm512_loadu_ps(row + d->off));
	return d->expand ? _mm512_mask_expandloadu_ps(ninf, d->m, row) : _mm512_mask_loadu_ps(ninf, d->m, row + d->off);
}

POOL_AVX512 static void maxpool_s2_planes(void *arg, int64_t lo, int64_t hi)
{
	const PoolArgs *a = arg;
	int64_t inh = a->in[1], inw = a->in[2], oh_n = a->out[1], ow_n = a->out[2];
	int64_t kh_n = a->k[1], kw_n = a->k[2], sh = a->s[1], pw = a->pb[2];
	const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
	const __m512i odd = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
	const __m512 ninf = _mm512_set1_ps(-INFINITY);
	const float *end = a->x + a->planes * a->isz;
	/* per block of 16 outputs (a last partial one overlaps the one before
	 * it) and pair of taps: the two loads, the same for every row */
	int64_t nblk = (ow_n + 15) / 16, npair = (kw_n + 1) / 2;
	int64_t *bo = xmalloc(sizeof *bo * (size_t)nblk);
	Cols16 *ld = xmalloc(sizeof *ld * (size_t)(nblk * npair * 2));
	for (int64_t b = 0; b < nblk; b++) {
		bo[b] = 16 * b + 16 > ow_n && ow_n >= 16 ? ow_n - 16 : 16 * b;
		for (int64_t j = 0; j < npair; j++) {
			ld[(b * npair + j) * 2] = cols16(inw, 2 * bo[b] - pw + 2 * j);
			ld[(b * npair + j) * 2 + 1] = cols16(inw, 2 * bo[b] - pw + 2 * j + 16);
		}
	}
	/* 2x2 windows without pads, each inside the plane (fashion-cnn's):
	 * straight-line code, no loops over rows and taps */
	int k2 = kh_n == 2 && kw_n == 2 && sh == 2 && pw == 0 && a->pb[1] == 0 && 2 * oh_n <= inh;
	for (int64_t pl = lo; k2 && pl < hi; pl++) {
		const float *x = a->x + pl * a->isz;
		float *y = a->y + pl * a->osz;
		for (int64_t b = 0; b < nblk; b++) {
			const Cols16 *d = ld + b * 2;
			for (int64_t oh = 0; oh < oh_n; oh++) {
				const float *r0 = x + 2 * oh * inw, *r1 = r0 + inw;
				__m512 l0 = load16(r0, &d[0], ninf, end), h0 = load16(r0, &d[1], ninf, end);
				__m512 l1 = load16(r1, &d[0], ninf, end), h1 = load16(r1, &d[1], ninf, end);
				__m512 m0 = _mm512_max_ps(_mm512_permutex2var_ps(l0, even, h0), ninf);
				__m512 m1 = _mm512_max_ps(_mm512_permutex2var_ps(l1, even, h1), ninf);
				m0 = _mm512_max_ps(_mm512_permutex2var_ps(l0, odd, h0), m0);
				m1 = _mm512_max_ps(_mm512_permutex2var_ps(l1, odd, h1), m1);
				__m512 acc = _mm512_max_ps(m1, _mm512_max_ps(m0, ninf));
				int64_t o = oh * ow_n + bo[b];
				if (o + 16 <= (hi - pl) * a->osz)
					_mm512_storeu_ps(y + o, acc);
				else
					_mm512_mask_storeu_ps(y + o, (__mmask16)((1u << (a->osz - o)) - 1), acc);
			}
		}
	}
	for (int64_t pl = lo; !k2 && pl < hi; pl++) {
		const float *x = a->x + pl * a->isz;
		float *y = a->y + pl * a->osz;
		for (int64_t oh = 0; oh < oh_n; oh++) {
			int64_t h0 = oh * sh - a->pb[1], h1 = h0 + kh_n;
			h0 = h0 < 0 ? 0 : h0;
			h1 = h1 > inh ? inh : h1;
			for (int64_t b = 0; b < nblk; b++) {
				const Cols16 *d = ld + b * npair * 2;
				__m512 acc = ninf;
				for (int64_t ih = h0; ih < h1; ih++) {
					const float *xr = x + ih * inw;
					__m512 hm = ninf;
					for (int64_t j = 0; j < npair; j++) {
						__m512 l = load16(xr, &d[2 * j], ninf, end);
						__m512 r = load16(xr, &d[2 * j + 1], ninf, end);
						hm = _mm512_max_ps(_mm512_permutex2var_ps(l, even, r), hm);
						if (2 * j + 1 < kw_n)
							hm = _mm512_max_ps(_mm512_permutex2var_ps(l, odd, r), hm);
					}
					acc = _mm512_max_ps(hm, acc);
				}
				/* a row narrower than 16 spills into the next ones,
				 * stored after it, past the plane's end too but not
				 * past this thread's planes (masked stores are slow
				 * on Zen 4 too) */
				int64_t o = oh * ow_n + bo[b];
				if (o + 16 <= (hi - pl) * a->osz)
					_mm512_storeu_ps(y + o, acc);
				else
					_mm512_mask_storeu_ps(y + o, (__mmask16)((1u << (a->osz - o)) - 1), acc);
			}
		}
	}
	free(ld);
	free(bo);
}
#else
static int pool_avx512(void)
{
	return 0;
}

static void maxpool_s2_planes(void *arg, int64_t lo, int64_t hi)
{
	maxpool_sep_planes(arg, lo, hi);
}
#endif

/* read x as floats (any numeric type) and allocate output 0 and its float buffer */
static int pool_io(RunCtx *c, const Tensor *x, int rank, const int64_t *dims,
		   const float **xf, float **tx, float **y, float **ty)
{
	*tx = *ty = NULL;
	if (x->dtype == DT_FLOAT && (uintptr_t)x->data % sizeof(float) == 0)
		*xf = x->data;
	else
		*xf = *tx = nn_f32_copy(x);
	if (op_output(c, 0, x->dtype, rank, dims) < 0) {
		free(*tx);
		return -1;
	}
	if (x->dtype == DT_FLOAT)
		*y = c->out[0]->data;
	else
		*y = *ty = xmalloc(sizeof(float) * (size_t)(c->out[0]->numel ? c->out[0]->numel : 1));
	return 0;
}

static void pool_done(RunCtx *c, float *tx, float *ty)
{
	if (ty) {
		nn_f32_store(c->out[0]->dtype, c->out[0]->data, ty, c->out[0]->numel);
		free(ty);
	}
	free(tx);
}

static int pool_type_ok(RunCtx *c, int kind, int dt)
{
	if (nn_is_float(dt) || (kind == POOL_MAX && (dt == DT_INT8 || dt == DT_UINT8)))
		return 0;
	return op_unsupported_type(c->node, c->opset, dt);
}

/* LpPool's p: a float attribute in opset 1, an int since */
static int lp_p(RunCtx *c, float *p)
{
	const Onnx__AttributeProto *at = node_attr(c->node, "p");
	*p = 2.0f;
	if (at && at->has_type && at->type == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT) {
		*p = at->f;
	} else {
		int64_t v;
		if (attr_int(c->node, "p", 2, &v) < 0)
			return -1;
		*p = (float)v;
	}
	if (!(*p > 0.0f))
		return op_error(c->node, "p must be positive, got %g", (double)*p);
	return 0;
}

static int pool_run_kind(RunCtx *c, int kind)
{
	const Tensor *x = c->in[0];
	if (pool_type_ok(c, kind, x->dtype) < 0)
		return -1;
	if (x->rank < 3)
		return op_error(c->node, "input must have rank 3 or more (N, C, spatial...), got %d", x->rank);
	int nsp = x->rank - 2;
	if (nsp > 3)
		return op_error(c->node, "%s-%lld with %d spatial dimensions is not supported (at most 3)",
				c->node->op_type, (long long)c->opset, nsp);
	NnGeom g;
	if (nn_geom(c->node, nsp, x->dims + 2, NULL, 1, &g) < 0)
		return -1;
	PoolArgs a;
	memset(&a, 0, sizeof a);
	a.kind = kind;
	int64_t cip = 0, so = 0;
	if (kind == POOL_AVG && attr_int(c->node, "count_include_pad", 0, &cip) < 0)
		return -1;
	if (kind == POOL_MAX && attr_int(c->node, "storage_order", 0, &so) < 0)
		return -1;
	if (kind == POOL_LP && lp_p(c, &a.p) < 0)
		return -1;
	a.count_pad = (int)cip;
	a.colmajor = (int)so;
	for (int j = 0; j < 3; j++) {
		a.in[j] = a.k[j] = a.s[j] = a.d[j] = a.out[j] = 1;
		a.pb[j] = a.pe[j] = 0;
	}
	for (int i = 0; i < nsp; i++) {
		int j = 3 - nsp + i;
		a.in[j] = g.in[i];
		a.k[j] = g.k[i];
		a.s[j] = g.s[i];
		a.d[j] = g.d[i];
		a.pb[j] = g.pb[i];
		a.pe[j] = g.pe[i];
		a.out[j] = g.out[i];
	}
	a.isz = a.in[0] * a.in[1] * a.in[2];
	a.osz = a.out[0] * a.out[1] * a.out[2];
	int64_t dims[QM_MAX_RANK];
	dims[0] = x->dims[0];
	dims[1] = x->dims[1];
	for (int i = 0; i < nsp; i++)
		dims[i + 2] = g.out[i];
	float *tx, *ty;
	if (pool_io(c, x, x->rank, dims, &a.x, &tx, &a.y, &ty) < 0)
		return -1;
	if (kind == POOL_MAX && c->nout > 1 && c->out[1]) {
		if (op_output(c, 1, DT_INT64, x->rank, dims) < 0) {
			free(tx);
			free(ty);
			return -1;
		}
		a.ind = c->out[1]->data;
	}
	int64_t planes = x->dims[0] * x->dims[1];
	int64_t work = planes * a.osz * a.k[0] * a.k[1] * a.k[2];
	a.planes = planes;
	int fast = (kind == POOL_MAX && !a.ind) || kind == POOL_AVG;
	void (*fn)(void *, int64_t, int64_t) = fast ? pool_fast_planes : pool_planes;
	if (kind == POOL_MAX && !a.ind && a.in[0] == 1 && a.out[0] == 1 && a.pb[0] == 0 && a.d[1] == 1 &&
	    a.d[2] == 1 && a.out[1] > 0 && a.out[2] > 0)
		fn = a.s[2] == 2 && pool_avx512() ? maxpool_s2_planes : maxpool_sep_planes;
	nn_parallel(work >= 65536 ? c->threads : 1, planes, fn, &a);
	pool_done(c, tx, ty);
	return 0;
}

static int maxpool_run(RunCtx *c)
{
	return pool_run_kind(c, POOL_MAX);
}

static int averagepool_run(RunCtx *c)
{
	return pool_run_kind(c, POOL_AVG);
}

static int lppool_run(RunCtx *c)
{
	return pool_run_kind(c, POOL_LP);
}

/* the sum of x[0, n) in double: eight interleaved sums (one chain of
 * additions was 4 cycles an element, a millisecond on a batch of CNN
 * activations), added pairwise, then the tail; the same order on every
 * CPU and thread count */
typedef double pool_v8d __attribute__((vector_size(64)));
typedef float pool_v8f __attribute__((vector_size(32)));

POOL_CLONES static double sum_f64(const float *x, int64_t n)
{
	pool_v8d s = {0};
	int64_t i = 0;
	for (; i + 8 <= n; i += 8) {
		pool_v8f v;
		memcpy(&v, x + i, sizeof v);
		s += __builtin_convertvector(v, pool_v8d);
	}
	double t = ((s[0] + s[4]) + (s[1] + s[5])) + ((s[2] + s[6]) + (s[3] + s[7]));
	for (; i < n; i++)
		t += x[i];
	return t;
}

/* GlobalMaxPool of one plane: its first value, then each value greater
 * than the running maximum, in order. So a NaN first value is the result,
 * later NaNs are skipped, and of zeros of both signs the first wins. The
 * maximum is taken 32 lanes at a time: the value is the same in any order,
 * only the sign of a zero maximum is looked up in order. */
POOL_CLONES static float max_plane(const float *x, int64_t n)
{
	if (n == 0)
		return -INFINITY;
	if (x[0] != x[0])
		return x[0];
	v16f a0 = {0}, a1, v;
	a0 -= INFINITY;
	a1 = a0;
	int64_t i = 0;
	for (; i + 32 <= n; i += 32) {
		memcpy(&v, x + i, sizeof v);
		VMAX16(a0, v);
		memcpy(&v, x + i + 16, sizeof v);
		VMAX16(a1, v);
	}
	VMAX16(a0, a1);
	float m = -INFINITY;
	for (int k = 0; k < 16; k++)
		m = a0[k] > m ? a0[k] : m;
	for (; i < n; i++)
		m = x[i] > m ? x[i] : m;
	for (i = 0; m == 0 && i < n; i++)
		if (x[i] == 0)
			return x[i];
	return m;
}

static int global_run_kind(RunCtx *c, int kind)
{
	const Tensor *x = c->in[0];
	float p = 2.0f;
	if (pool_type_ok(c, kind, x->dtype) < 0)
		return -1;
	if (x->rank < 2)
		return op_error(c->node, "input must have rank 2 or more (N, C, spatial...), got %d", x->rank);
	if (kind == POOL_LP && lp_p(c, &p) < 0)
		return -1;
	int64_t dims[QM_MAX_RANK], isz = 1;
	dims[0] = x->dims[0];
	dims[1] = x->dims[1];
	for (int i = 2; i < x->rank; i++) {
		dims[i] = 1;
		isz *= x->dims[i];
	}
	const float *xf;
	float *tx, *y, *ty;
	if (pool_io(c, x, x->rank, dims, &xf, &tx, &y, &ty) < 0)
		return -1;
	int64_t planes = x->dims[0] * x->dims[1];
	for (int64_t pl = 0; pl < planes; pl++) {
		const float *xp = xf + pl * isz;
		if (kind == POOL_MAX) {
			y[pl] = max_plane(xp, isz);
		} else if (kind == POOL_AVG) {
			y[pl] = isz ? (float)(sum_f64(xp, isz) / (double)isz) : 0.0f;
		} else {
			double s = 0;
			for (int64_t i = 0; i < isz; i++)
				s += pow(fabs(xp[i]), (double)p);
			y[pl] = (float)pow(s, 1.0 / (double)p);
		}
	}
	pool_done(c, tx, ty);
	return 0;
}

static int globalmaxpool_run(RunCtx *c)
{
	return global_run_kind(c, POOL_MAX);
}

static int globalaveragepool_run(RunCtx *c)
{
	return global_run_kind(c, POOL_AVG);
}

static int globallppool_run(RunCtx *c)
{
	return global_run_kind(c, POOL_LP);
}

/* ---- MaxUnpool ---- */

/* default output sizes of MaxUnpool: (in - 1) * stride + kernel - pads */
static int unpool_sizes(const Onnx__NodeProto *n, int nsp, const int64_t *in, int64_t *out)
{
	int64_t k[QM_MAX_RANK], s[QM_MAX_RANK], p[2 * QM_MAX_RANK];
	const int64_t *v;
	size_t len;
	if (attr_ints(n, "kernel_shape", &v, &len) < 0)
		return -1;
	if (!v || (int)len != nsp)
		return op_error(n, "attribute 'kernel_shape' with %d values is required", nsp);
	memcpy(k, v, sizeof *v * len);
	if (attr_ints(n, "strides", &v, &len) < 0)
		return -1;
	if (v && (int)len != nsp)
		return op_error(n, "attribute 'strides' has %zu values, expected %d", len, nsp);
	for (int i = 0; i < nsp; i++)
		s[i] = v ? v[i] : 1;
	if (attr_ints(n, "pads", &v, &len) < 0)
		return -1;
	if (v && (int)len != 2 * nsp)
		return op_error(n, "attribute 'pads' has %zu values, expected %d", len, 2 * nsp);
	for (int i = 0; i < 2 * nsp; i++)
		p[i] = v ? v[i] : 0;
	for (int i = 0; i < nsp; i++)
		out[i] = in[i] < 0 ? -1 : (in[i] - 1) * s[i] + k[i] - p[i] - p[i + nsp];
	return 0;
}

static int maxunpool_infer(InferCtx *c)
{
	const ValueType *x = nn_in(c, 0);
	if (!x)
		return -1;
	ValueType *o = c->out[0];
	vt_set_tensor(o, x->elem, x->rank);
	if (c->nin > 2 && c->in[2]) {
		const Tensor *os = c->in[2]->value;
		if (!os) {
			if (x->rank >= 0)
				for (int i = 0; i < x->rank; i++)
					o->dims[i] = nn_dim(c, -1);
			return 0;
		}
		int64_t *v, len;
		if (op_tensor_ints(c->node, os, "output_shape", &v, &len) < 0)
			return -1;
		if (len > QM_MAX_RANK || (x->rank >= 0 && len != x->rank)) {
			free(v);
			return op_error(c->node, "output_shape has %lld values for rank %d", (long long)len, x->rank);
		}
		vt_set_tensor(o, x->elem, (int)len);
		for (int64_t i = 0; i < len; i++)
			o->dims[i] = nn_dim(c, v[i]);
		free(v);
		return 0;
	}
	if (x->rank < 0)
		return 0;
	if (x->rank < 3)
		return op_error(c->node, "input must have rank 3 or more (N, C, spatial...), got %d", x->rank);
	int64_t in[QM_MAX_RANK], out[QM_MAX_RANK];
	for (int i = 2; i < x->rank; i++)
		in[i - 2] = x->dims[i].v;
	if (unpool_sizes(c->node, x->rank - 2, in, out) < 0)
		return -1;
	o->dims[0] = x->dims[0];
	o->dims[1] = x->dims[1];
	for (int i = 2; i < x->rank; i++)
		o->dims[i] = nn_dim(c, out[i - 2]);
	return 0;
}

static int maxunpool_run(RunCtx *c)
{
	const Tensor *x = c->in[0], *ind = c->nin > 1 ? c->in[1] : NULL;
	const Tensor *os = c->nin > 2 ? c->in[2] : NULL;
	size_t es;
	int64_t dims[QM_MAX_RANK];
	if (!ind)
		return op_error(c->node, "input I (indices) is required");
	if (op_elemsize(c->node, c->opset, x->dtype, &es) < 0)
		return -1;
	if (ind->dtype != DT_INT64 || ind->numel != x->numel)
		return op_error(c->node, "indices must be int64 with the input's %lld elements", (long long)x->numel);
	if (x->rank < 3)
		return op_error(c->node, "input must have rank 3 or more (N, C, spatial...), got %d", x->rank);
	int64_t inf[QM_MAX_RANK];   /* the shape the indices refer to */
	inf[0] = x->dims[0];
	inf[1] = x->dims[1];
	if (unpool_sizes(c->node, x->rank - 2, x->dims + 2, inf + 2) < 0)
		return -1;
	memcpy(dims, inf, sizeof(int64_t) * (size_t)x->rank);
	if (os) {
		int64_t *v, len;
		if (op_tensor_ints(c->node, os, "output_shape", &v, &len) < 0)
			return -1;
		if (len != x->rank) {
			free(v);
			return op_error(c->node, "output_shape has %lld values for rank %d", (long long)len, x->rank);
		}
		memcpy(dims, v, sizeof *v * (size_t)len);
		free(v);
	}
	int64_t ninf = shape_numel(x->rank, inf);
	if (ninf < 0)
		return op_error(c->node, "invalid unpooled shape");
	if (op_output(c, 0, x->dtype, x->rank, dims) < 0)
		return -1;
	Tensor *y = c->out[0];
	unsigned char *tmp = xcalloc((size_t)(ninf ? ninf : 1), es);
	const int64_t *iv = ind->data;
	for (int64_t j = 0; j < x->numel; j++) {
		if (iv[j] < 0 || iv[j] >= ninf) {
			free(tmp);
			return op_error(c->node, "index %lld is outside the unpooled tensor of %lld elements",
					(long long)iv[j], (long long)ninf);
		}
		memcpy(tmp + (size_t)iv[j] * es, (const char *)x->data + (size_t)j * es, es);
	}
	/* place the unpooled tensor at the start of every axis of the output */
	memset(y->data, 0, y->nbytes);
	int64_t idx[QM_MAX_RANK] = {0}, ist[QM_MAX_RANK], ost[QM_MAX_RANK];
	dims_strides(x->rank, inf, ist);
	dims_strides(x->rank, dims, ost);
	int r = x->rank;
	int64_t run = inf[r - 1] < dims[r - 1] ? inf[r - 1] : dims[r - 1];
	for (int64_t e = 0; e < ninf && run > 0; e += inf[r - 1]) {
		int inside = 1;
		int64_t io = 0, oo = 0;
		for (int i = 0; i < r - 1; i++) {
			if (idx[i] >= dims[i])
				inside = 0;
			io += idx[i] * ist[i];
			oo += idx[i] * ost[i];
		}
		if (inside)
			memcpy((char *)y->data + (size_t)oo * es, tmp + (size_t)io * es, (size_t)run * es);
		for (int i = r - 2; i >= 0; i--) {
			if (++idx[i] < inf[i])
				break;
			idx[i] = 0;
		}
	}
	free(tmp);
	return 0;
}

/* ---- RoiAlign ---- */

static int roialign_infer(InferCtx *c)
{
	const ValueType *x = nn_in(c, 0), *r = nn_in(c, 1);
	int64_t oh, ow;
	if (!x || !r || attr_int(c->node, "output_height", 1, &oh) < 0 ||
	    attr_int(c->node, "output_width", 1, &ow) < 0)
		return -1;
	ValueType *o = c->out[0];
	vt_set_tensor(o, x->elem, 4);
	o->dims[0] = r->rank == 2 ? r->dims[0] : nn_dim(c, -1);
	o->dims[1] = x->rank == 4 ? x->dims[1] : nn_dim(c, -1);
	o->dims[2] = (Dim){oh, NULL};
	o->dims[3] = (Dim){ow, NULL};
	return 0;
}

static int roialign_run(RunCtx *c)
{
	const Tensor *x = c->in[0], *rois = c->nin > 1 ? c->in[1] : NULL, *bi = c->nin > 2 ? c->in[2] : NULL;
	int64_t oh, ow, sr;
	float scale;
	char mode[16], ctm[32];
	if (!rois || !bi)
		return op_error(c->node, "inputs rois and batch_indices are required");
	if (attr_int(c->node, "output_height", 1, &oh) < 0 || attr_int(c->node, "output_width", 1, &ow) < 0 ||
	    attr_int(c->node, "sampling_ratio", 0, &sr) < 0 || attr_float(c->node, "spatial_scale", 1.0f, &scale) < 0 ||
	    attr_str(c->node, "mode", "avg", mode, sizeof mode) < 0 ||
	    attr_str(c->node, "coordinate_transformation_mode", c->opset >= 16 ? "half_pixel" : "output_half_pixel",
		     ctm, sizeof ctm) < 0)
		return -1;
	int avg = !strcmp(mode, "avg"), half = !strcmp(ctm, "half_pixel");
	if (!avg && strcmp(mode, "max"))
		return op_error(c->node, "mode '%s' is not supported (avg or max)", mode);
	if (!half && strcmp(ctm, "output_half_pixel"))
		return op_error(c->node, "coordinate_transformation_mode '%s' is not supported", ctm);
	if (x->rank != 4 || rois->rank != 2 || rois->dims[1] != 4 || bi->rank != 1 || bi->dims[0] != rois->dims[0])
		return op_error(c->node, "expected X [N,C,H,W], rois [R,4] and batch_indices [R]");
	if (oh < 1 || ow < 1)
		return op_error(c->node, "output_height and output_width must be positive");
	int64_t R = rois->dims[0], C = x->dims[1], H = x->dims[2], W = x->dims[3];
	int64_t dims[4] = {R, C, oh, ow};
	float *tx, *ty, *rf = nn_f32_copy(rois);
	const float *xf = nn_f32_in(c, x, &tx);
	float *y = xf ? nn_f32_out(c, 0, x->dtype, 4, dims, &ty) : NULL;
	if (!y) {
		free(tx);
		free(rf);
		return -1;
	}
	int rc = 0;
	for (int64_t r = 0; r < R && rc == 0; r++) {
		int64_t b = tensor_get_i64(bi, r);
		if (b < 0 || b >= x->dims[0]) {
			rc = op_error(c->node, "batch index %lld of roi %lld is out of range", (long long)b, (long long)r);
			break;
		}
		double off = half ? 0.5 : 0.0;
		double sw = rf[r * 4] * scale - off, sh = rf[r * 4 + 1] * scale - off;
		double rw = rf[r * 4 + 2] * scale - off - sw, rh = rf[r * 4 + 3] * scale - off - sh;
		if (!half) {
			rw = rw > 1 ? rw : 1;
			rh = rh > 1 ? rh : 1;
		}
		double bh = rh / (double)oh, bw = rw / (double)ow;
		int64_t gh = sr > 0 ? sr : (int64_t)ceil(rh / (double)oh), gw = sr > 0 ? sr : (int64_t)ceil(rw / (double)ow);
		if (gh < 0)
			gh = 0;
		if (gw < 0)
			gw = 0;
		double cnt = gh * gw > 1 ? (double)(gh * gw) : 1.0;
		for (int64_t ch = 0; ch < C; ch++) {
			const float *xp = xf + (b * C + ch) * H * W;
			for (int64_t ph = 0; ph < oh; ph++)
				for (int64_t pw = 0; pw < ow; pw++) {
					double acc = 0;
					int any = 0;
					for (int64_t iy = 0; iy < gh; iy++) {
						double yy = sh + (double)ph * bh + ((double)iy + 0.5) * bh / (double)gh;
						for (int64_t ix = 0; ix < gw; ix++) {
							double xx = sw + (double)pw * bw + ((double)ix + 0.5) * bw / (double)gw;
							double v1 = 0, v2 = 0, v3 = 0, v4 = 0;
							if (!(yy < -1.0 || yy > (double)H || xx < -1.0 || xx > (double)W)) {
								double yv = yy > 0 ? yy : 0, xv = xx > 0 ? xx : 0;
								int64_t yl = (int64_t)yv, xl = (int64_t)xv, yh, xh;
								if (yl >= H - 1) {
									yh = yl = H - 1;
									yv = (double)yl;
								} else {
									yh = yl + 1;
								}
								if (xl >= W - 1) {
									xh = xl = W - 1;
									xv = (double)xl;
								} else {
									xh = xl + 1;
								}
								double ly = yv - (double)yl, lx = xv - (double)xl, hy = 1 - ly, hx = 1 - lx;
								v1 = hy * hx * xp[yl * W + xl];
								v2 = hy * lx * xp[yl * W + xh];
								v3 = ly * hx * xp[yh * W + xl];
								v4 = ly * lx * xp[yh * W + xh];
							}
							if (avg) {
								acc += v1 + v2 + v3 + v4;
							} else {
								double m = fmax(fmax(v1, v2), fmax(v3, v4));
								acc = any ? fmax(acc, m) : m;
								any = 1;
							}
						}
					}
					y[((r * C + ch) * oh + ph) * ow + pw] = (float)(avg ? acc / cnt : acc);
				}
		}
	}
	if (rc == 0)
		nn_f32_done(c->out[0], ty);
	else
		free(ty);
	free(tx);
	free(rf);
	return rc;
}

OPERATOR(ai_onnx, AveragePool, 1, pool_infer, averagepool_run)
OPERATOR(ai_onnx, GlobalAveragePool, 1, global_pool_infer, globalaveragepool_run)
OPERATOR(ai_onnx, GlobalLpPool, 1, global_pool_infer, globallppool_run)
OPERATOR(ai_onnx, GlobalMaxPool, 1, global_pool_infer, globalmaxpool_run)
OPERATOR(ai_onnx, LpPool, 1, pool_infer, lppool_run)
OPERATOR(ai_onnx, MaxPool, 1, pool_infer, maxpool_run)
OPERATOR(ai_onnx, MaxUnpool, 9, maxunpool_infer, maxunpool_run)
OPERATOR(ai_onnx, RoiAlign, 10, roialign_infer, roialign_run)
