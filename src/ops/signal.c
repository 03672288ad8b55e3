/* signal.c — DFT, STFT, the window functions (Hann, Hamming, Blackman)
 * and MelWeightMatrix, opset 17 on (DFT-20 takes its axis as an input).
 * TfIdfVectorizer is in string.c.
 *
 * Signals are [..., n, 1] (real) or [..., n, 2] (complex) tensors of float
 * or double. A transform is a direct sum in double over a table of
 * e^(-2 pi i k / n), O(n^2) per transform of length n: exact to the
 * output's rounding, which is what ONNX's reference (numpy's FFT) gives to
 * within 1e-6 relative, and quick enough for the frame lengths of audio
 * front ends (a 512-point frame is 262,144 complex products). The windows
 * and the mel matrix are computed in double as ONNX's reference does and
 * rounded once to output_datatype. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops/op.h"
#include "ops/shapeutil.h"
#include "util.h"

/* ---- shared ---- */

/* integer scalar input i (int32 or int64, one element) into *v */
static int scalar_int(RunCtx *c, size_t i, const char *what, int64_t *v)
{
	const Tensor *t = c->in[i];
	if (t->dtype != DT_INT32 && t->dtype != DT_INT64)
		return op_error(c->node, "%s must be int32 or int64, is %s", what, dtype_name(t->dtype));
	if (t->numel != 1)
		return op_error(c->node, "%s must be a scalar, has %lld elements", what, (long long)t->numel);
	*v = tensor_get_i64(t, 0);
	return 0;
}

/* the known value of scalar input i at inference, or -1 */
static int64_t known_int(const InferCtx *c, size_t i)
{
	if (i >= c->nin || !c->in[i] || !c->in[i]->value || c->in[i]->value->numel != 1)
		return -1;
	return tensor_get_i64(c->in[i]->value, 0);
}

/* e^(-2 pi i k / n) for k < n, as cos/sin pairs */
static double *twiddles(int64_t n)
{
	double *w = xmalloc(sizeof *w * 2 * (size_t)(n ? n : 1));
	for (int64_t k = 0; k < n; k++) {
		double a = 2 * M_PI * (double)k / (double)n;
		w[2 * k] = cos(a);
		w[2 * k + 1] = -sin(a);
	}
	return w;
}

/* X[k] = sum_t x[t] e^(-+2 pi i k t / n), k < nout, over the first nin
 * (<= n) values of x (the rest zero); inverse: + and scaled by 1/n */
static void dft1(const double *x, int64_t nin, int64_t n, int64_t nout, int inverse, const double *w, double *y)
{
	for (int64_t k = 0; k < nout; k++) {
		double re = 0, im = 0;
		int64_t idx = 0;
		for (int64_t t = 0; t < nin; t++) {
			double c = w[2 * idx], s = inverse ? -w[2 * idx + 1] : w[2 * idx + 1];
			re += x[2 * t] * c - x[2 * t + 1] * s;
			im += x[2 * t] * s + x[2 * t + 1] * c;
			idx += k;
			if (idx >= n)
				idx %= n;
		}
		y[2 * k] = inverse ? re / (double)n : re;
		y[2 * k + 1] = inverse ? im / (double)n : im;
	}
}

/* the real signal of length n whose one-sided spectrum is X[0..nin) (numpy's
 * irfft: bins past n/2 ignored, the imaginary parts of bin 0 and of the
 * Nyquist bin of an even n dropped) */
static void irdft1(const double *x, int64_t nin, int64_t n, const double *w, double *y)
{
	int64_t half = n / 2;
	for (int64_t t = 0; t < n; t++) {
		double s = nin > 0 ? x[0] : 0;
		int64_t idx = t % n;
		for (int64_t k = 1; k < nin && k <= half; k++, idx = (idx + t) % n) {
			if (2 * k == n) {
				s += x[2 * k] * (t % 2 ? -1 : 1);
				continue;
			}
			/* 2 Re(X_k e^(+2 pi i k t / n)) */
			s += 2 * (x[2 * k] * w[2 * idx] + x[2 * k + 1] * w[2 * idx + 1]);
		}
		y[t] = s / (double)n;
	}
}

/* ---- DFT ---- */

typedef struct DftArgs {
	int64_t axis, n, nout;    /* signal axis, DFT length, output length on it */
	int64_t inverse, onesided;
	int real_out;             /* inverse and onesided: a real signal */
} DftArgs;

/* axis normalized against the input's rank (the complex dimension counted):
 * it must name a signal dimension */
static int dft_axis(const Onnx__NodeProto *node, int64_t axis, int rank, int64_t *out)
{
	if (axis < -rank || axis >= rank)
		return op_error(node, "axis %lld is out of range for rank %d", (long long)axis, rank);
	*out = axis < 0 ? axis + rank : axis;
	if (*out == rank - 1)
		return op_error(node, "axis %lld names the complex dimension, expected a signal axis in [%d, %d]",
				(long long)axis, -rank, rank - 2);
	return 0;
}

/* output length on the axis for a DFT of length n (nin: input length) */
static int64_t dft_nout(int64_t n, int64_t inverse, int64_t onesided)
{
	return onesided && !inverse ? n / 2 + 1 : n;
}

static int dft_infer(InferCtx *c)
{
	if (infer_need(c, 0) < 0)
		return -1;
	const ValueType *x = c->in[0];
	int64_t onesided, inverse, axis = c->opset >= 20 ? -2 : 1;
	if (attr_int(c->node, "onesided", 0, &onesided) < 0 || attr_int(c->node, "inverse", 0, &inverse) < 0)
		return -1;
	if (c->opset < 20 && attr_int(c->node, "axis", 1, &axis) < 0)
		return -1;
	vt_set_tensor(c->out[0], x->elem, x->rank);
	if (c->opset >= 20 && c->nin > 2 && c->in[2]) {
		if (!c->in[2]->value)
			return 0;
		axis = tensor_get_i64(c->in[2]->value, 0);
	}
	if (x->rank < 0)
		return 0;
	if (x->rank < 2)
		return op_error(c->node, "input rank %d is below 2 (signal and complex dimensions)", x->rank);
	if (x->dims[x->rank - 1].v >= 0 && x->dims[x->rank - 1].v != 1 && x->dims[x->rank - 1].v != 2)
		return op_error(c->node, "last dimension is %lld, expected 1 (real) or 2 (complex)",
				(long long)x->dims[x->rank - 1].v);
	int64_t ax;
	if (dft_axis(c->node, axis, x->rank, &ax) < 0)
		return -1;
	for (int i = 0; i < x->rank; i++)
		c->out[0]->dims[i] = x->dims[i];
	if (onesided && !inverse && x->dims[x->rank - 1].v == 2)
		return op_error(c->node, "a one-sided DFT needs real input ([..., 1]), the input is complex");
	c->out[0]->dims[x->rank - 1] = dim_known(inverse && onesided ? 1 : 2);
	int64_t nin = x->dims[ax].v, n = known_int(c, 1);
	if (c->nin > 1 && c->in[1] && n == -1) {
		c->out[0]->dims[ax] = infer_fresh_dim(c);
		return 0;
	}
	if (n == 0 || n < -1)
		return op_error(c->node, "dft_length %lld is not positive", (long long)n);
	if (n < 0)
		n = nin < 0 ? -1 : inverse && onesided ? 2 * (nin - 1) : nin;
	c->out[0]->dims[ax] = n > 0 ? dim_known(dft_nout(n, inverse, onesided)) : infer_fresh_dim(c);
	return 0;
}

static int dft_run(RunCtx *c)
{
	if (run_need(c, 0) < 0)
		return -1;
	const Tensor *x = c->in[0];
	DftArgs a = {.axis = c->opset >= 20 ? -2 : 1};
	if (attr_int(c->node, "onesided", 0, &a.onesided) < 0 || attr_int(c->node, "inverse", 0, &a.inverse) < 0)
		return -1;
	if (c->opset < 20 && attr_int(c->node, "axis", 1, &a.axis) < 0)
		return -1;
	if (c->opset >= 20 && c->nin > 2 && c->in[2] && scalar_int(c, 2, "axis", &a.axis) < 0)
		return -1;
	if (x->dtype != DT_FLOAT && x->dtype != DT_DOUBLE)
		return op_unsupported_type(c->node, c->opset, x->dtype);
	if (x->rank < 2 || (x->dims[x->rank - 1] != 1 && x->dims[x->rank - 1] != 2))
		return op_error(c->node, "input must be [..., signal, 1 or 2], has rank %d", x->rank);
	int64_t ax;
	if (dft_axis(c->node, a.axis, x->rank, &ax) < 0)
		return -1;
	int64_t nin = x->dims[ax], cplx = x->dims[x->rank - 1];
	if (a.onesided && !a.inverse && cplx == 2)
		return op_error(c->node, "a one-sided DFT needs real input ([..., 1]), the input is complex");
	a.n = a.inverse && a.onesided ? 2 * (nin - 1) : nin;
	if (c->nin > 1 && c->in[1] && scalar_int(c, 1, "dft_length", &a.n) < 0)
		return -1;
	if (a.n <= 0)
		return op_error(c->node, "dft_length %lld is not positive", (long long)a.n);
	a.real_out = a.inverse && a.onesided;
	a.nout = dft_nout(a.n, a.inverse, a.onesided);
	int64_t dims[QM_MAX_RANK];
	memcpy(dims, x->dims, sizeof(int64_t) * (size_t)x->rank);
	dims[ax] = a.nout;
	dims[x->rank - 1] = a.real_out ? 1 : 2;
	if (op_output(c, 0, x->dtype, x->rank, dims) < 0)
		return -1;
	int64_t outer = 1, inner = 1;
	for (int64_t i = 0; i < ax; i++)
		outer *= x->dims[i];
	for (int64_t i = ax + 1; i < x->rank - 1; i++)
		inner *= x->dims[i];
	int64_t used = nin < a.n ? nin : a.n;
	double *w = twiddles(a.n);
	double *sig = xmalloc(sizeof *sig * 2 * (size_t)(nin ? nin : 1));
	double *res = xmalloc(sizeof *res * 2 * (size_t)a.nout);
	int64_t ostride = a.real_out ? 1 : 2;
	for (int64_t o = 0; o < outer; o++)
		for (int64_t i = 0; i < inner; i++) {
			for (int64_t t = 0; t < nin; t++) {
				int64_t e = ((o * nin + t) * inner + i) * cplx;
				sig[2 * t] = elem_get_f64(x->dtype, x->data, e);
				sig[2 * t + 1] = cplx == 2 ? elem_get_f64(x->dtype, x->data, e + 1) : 0;
			}
			if (a.real_out)
				irdft1(sig, nin, a.n, w, res);
			else
				dft1(sig, used, a.n, a.nout, (int)a.inverse, w, res);
			for (int64_t k = 0; k < a.nout; k++) {
				int64_t e = ((o * a.nout + k) * inner + i) * ostride;
				elem_put_f64(x->dtype, c->out[0]->data, e, res[a.real_out ? k : 2 * k]);
				if (!a.real_out)
					elem_put_f64(x->dtype, c->out[0]->data, e + 1, res[2 * k + 1]);
			}
		}
	free(w);
	free(sig);
	free(res);
	return 0;
}

OPERATOR(ai_onnx, DFT, 17, dft_infer, dft_run)
OPERATOR(ai_onnx, DFT, 20, dft_infer, dft_run)

/* ---- STFT ---- */

static int stft_infer(InferCtx *c)
{
	if (infer_need(c, 0) < 0 || infer_need(c, 1) < 0)
		return -1;
	const ValueType *x = c->in[0];
	int64_t onesided;
	if (attr_int(c->node, "onesided", 1, &onesided) < 0)
		return -1;
	if (x->rank >= 0 && x->rank != 3)
		return op_error(c->node, "signal must be [batch, length, 1 or 2], has rank %d", x->rank);
	ValueType *y = c->out[0];
	vt_set_tensor(y, x->elem, 4);
	y->dims[3] = dim_known(2);
	if (x->rank == 3)
		y->dims[0] = x->dims[0];
	int64_t step = known_int(c, 1), len = known_int(c, 3), wlen = -1;
	if (c->nin > 2 && c->in[2] && c->in[2]->rank == 1)
		wlen = c->in[2]->dims[0].v;
	if (len < 0 && !(c->nin > 3 && c->in[3]))
		len = wlen >= 0 ? wlen : (x->rank == 3 ? x->dims[1].v : -1);
	y->dims[2] = len > 0 ? dim_known(onesided ? len / 2 + 1 : len) : infer_fresh_dim(c);
	int64_t n = x->rank == 3 ? x->dims[1].v : -1;
	y->dims[1] = step > 0 && len > 0 && n >= len ? dim_known(1 + (n - len) / step) : infer_fresh_dim(c);
	return 0;
}

static int stft_run(RunCtx *c)
{
	if (run_need(c, 0) < 0 || run_need(c, 1) < 0)
		return -1;
	const Tensor *x = c->in[0], *win = c->nin > 2 ? c->in[2] : NULL;
	int64_t onesided, step, flen;
	if (attr_int(c->node, "onesided", 1, &onesided) < 0 || scalar_int(c, 1, "frame_step", &step) < 0)
		return -1;
	if (x->dtype != DT_FLOAT && x->dtype != DT_DOUBLE)
		return op_unsupported_type(c->node, c->opset, x->dtype);
	if (x->rank != 3 || (x->dims[2] != 1 && x->dims[2] != 2))
		return op_error(c->node, "signal must be [batch, length, 1 or 2], has rank %d", x->rank);
	if (win && (win->rank != 1 || win->dtype != x->dtype))
		return op_error(c->node, "window must be 1-D of the signal's type (%s)", dtype_name(x->dtype));
	int64_t wlen = win ? win->dims[0] : -1, n = x->dims[1], cplx = x->dims[2];
	if (c->nin > 3 && c->in[3]) {
		if (scalar_int(c, 3, "frame_length", &flen) < 0)
			return -1;
	} else {
		flen = win ? wlen : n;
	}
	if (wlen < 0)
		wlen = flen;
	if (wlen != flen)
		return op_error(c->node, "a window of %lld values for frames of %lld: expected frame_length values",
				(long long)wlen, (long long)flen);
	if (step <= 0)
		return op_error(c->node, "frame_step %lld is not positive", (long long)step);
	if (flen <= 0 || wlen <= 0)
		return op_error(c->node, "frame length %lld is not positive", (long long)(flen <= 0 ? flen : wlen));
	if (n < flen)
		return op_error(c->node, "signal of %lld samples is shorter than one frame of %lld", (long long)n,
				(long long)flen);
	int64_t frames = 1 + (n - flen) / step, bins = onesided ? flen / 2 + 1 : flen;
	int64_t dims[4] = {x->dims[0], frames, bins, 2};
	if (op_output(c, 0, x->dtype, 4, dims) < 0)
		return -1;
	int64_t used = flen;
	double *w = twiddles(flen);
	double *sig = xcalloc(2 * (size_t)used, sizeof *sig);
	double *res = xmalloc(sizeof *res * 2 * (size_t)bins);
	for (int64_t b = 0; b < x->dims[0]; b++)
		for (int64_t f = 0; f < frames; f++) {
			for (int64_t t = 0; t < used; t++) {
				int64_t s = f * step + t;
				double wt = win ? elem_get_f64(win->dtype, win->data, t) : 1;
				int64_t e = (b * n + s) * cplx;
				sig[2 * t] = s < n ? elem_get_f64(x->dtype, x->data, e) * wt : 0;
				sig[2 * t + 1] = s < n && cplx == 2 ? elem_get_f64(x->dtype, x->data, e + 1) * wt : 0;
			}
			dft1(sig, used, flen, bins, 0, w, res);
			for (int64_t k = 0; k < 2 * bins; k++)
				elem_put_f64(x->dtype, c->out[0]->data, (b * frames + f) * bins * 2 + k, res[k]);
		}
	free(w);
	free(sig);
	free(res);
	return 0;
}

OPERATOR(ai_onnx, STFT, 17, stft_infer, stft_run)

/* ---- HannWindow, HammingWindow, BlackmanWindow ---- */

/* output_datatype attribute: a numeric type (default float) */
static int out_type(const Onnx__NodeProto *node, int64_t opset, int *dt)
{
	int64_t d;
	if (attr_int(node, "output_datatype", DT_FLOAT, &d) < 0)
		return -1;
	*dt = (int)d;
	if (!dt_numeric(*dt))
		return op_unsupported_type(node, opset, *dt);
	return 0;
}

static int window_infer(InferCtx *c)
{
	int dt;
	if (infer_need(c, 0) < 0 || out_type(c->node, c->opset, &dt) < 0)
		return -1;
	vt_set_tensor(c->out[0], dt, 1);
	int64_t n = known_int(c, 0);
	if (n < -1)
		return op_error(c->node, "size %lld is negative", (long long)n);
	c->out[0]->dims[0] = n >= 0 ? dim_known(n) : infer_fresh_dim(c);
	return 0;
}

/* a0 - a1 cos(2 pi k / N) + a2 cos(4 pi k / N), N the size (periodic) or
 * size - 1 (symmetric); a window of one value is 1 */
static int window_run(RunCtx *c, double a0, double a1, double a2)
{
	int dt;
	int64_t n, periodic;
	if (run_need(c, 0) < 0 || out_type(c->node, c->opset, &dt) < 0 || scalar_int(c, 0, "size", &n) < 0 ||
	    attr_int(c->node, "periodic", 1, &periodic) < 0)
		return -1;
	if (n < 0)
		return op_error(c->node, "size %lld is negative", (long long)n);
	if (op_output(c, 0, dt, 1, &n) < 0)
		return -1;
	double den = (double)(periodic ? n : n - 1);
	for (int64_t k = 0; k < n; k++) {
		double v = n == 1 ? 1 : a0 - a1 * cos(2 * M_PI * (double)k / den) + a2 * cos(4 * M_PI * (double)k / den);
		elem_put_f64(dt, c->out[0]->data, k, v);
	}
	return 0;
}

static int hann_run(RunCtx *c)
{
	return window_run(c, 0.5, 0.5, 0);
}

static int hamming_run(RunCtx *c)
{
	return window_run(c, 25.0 / 46.0, 21.0 / 46.0, 0);
}

static int blackman_run(RunCtx *c)
{
	return window_run(c, 0.42, 0.5, 0.08);
}

OPERATOR(ai_onnx, HannWindow, 17, window_infer, hann_run)
OPERATOR(ai_onnx, HammingWindow, 17, window_infer, hamming_run)
OPERATOR(ai_onnx, BlackmanWindow, 17, window_infer, blackman_run)

/* ---- MelWeightMatrix ---- */

static int mel_infer(InferCtx *c)
{
	int dt;
	for (size_t i = 0; i < 5; i++)
		if (infer_need(c, i) < 0)
			return -1;
	if (out_type(c->node, c->opset, &dt) < 0)
		return -1;
	vt_set_tensor(c->out[0], dt, 2);
	int64_t bins = known_int(c, 0), dft = known_int(c, 1);
	c->out[0]->dims[0] = dft > 0 ? dim_known(dft / 2 + 1) : infer_fresh_dim(c);
	c->out[0]->dims[1] = bins > 0 ? dim_known(bins) : infer_fresh_dim(c);
	return 0;
}

static double scalar_f64(const Tensor *t)
{
	return elem_get_f64(t->dtype, t->data, 0);
}

/* triangles between num_mel_bins + 2 points equally spaced in mel
 * (2595 log10(1 + f / 700)) from lower_edge_hertz to upper_edge_hertz,
 * each point the spectrogram bin floor((dft_length + 1) f / sample_rate),
 * as ONNX's reference computes them (its mel step divides the range by
 * num_mel_bins + 2) */
static int mel_run(RunCtx *c)
{
	int dt;
	int64_t nmel, dft, rate;
	for (size_t i = 0; i < 5; i++)
		if (run_need(c, i) < 0)
			return -1;
	if (out_type(c->node, c->opset, &dt) < 0 || scalar_int(c, 0, "num_mel_bins", &nmel) < 0 ||
	    scalar_int(c, 1, "dft_length", &dft) < 0 || scalar_int(c, 2, "sample_rate", &rate) < 0)
		return -1;
	for (size_t i = 3; i < 5; i++)
		if (!dt_float(c->in[i]->dtype) || c->in[i]->numel != 1)
			return op_error(c->node, "%s must be a float scalar", i == 3 ? "lower_edge_hertz" : "upper_edge_hertz");
	double lo = scalar_f64(c->in[3]), hi = scalar_f64(c->in[4]);
	if (nmel <= 0 || dft <= 0 || rate <= 0)
		return op_error(c->node, "num_mel_bins, dft_length and sample_rate must be positive (%lld, %lld, %lld)",
				(long long)nmel, (long long)dft, (long long)rate);
	if (!(lo >= 0 && lo < hi))
		return op_error(c->node, "the band %g-%g Hz is empty or negative", lo, hi);
	int64_t nspec = dft / 2 + 1, dims[2] = {nspec, nmel};
	int64_t *pt = xmalloc(sizeof *pt * (size_t)(nmel + 2));
	double mlo = 2595 * log1p(lo / 700) / log(10), mhi = 2595 * log1p(hi / 700) / log(10);
	double step = (mhi - mlo) / (double)(nmel + 2);
	for (int64_t i = 0; i < nmel + 2; i++) {
		double f = 700 * expm1(((double)i * step + mlo) / 2595 * log(10));
		pt[i] = (int64_t)floor((double)(dft + 1) * f / (double)rate);
		if (pt[i] < 0 || pt[i] >= nspec) {
			free(pt);
			return op_error(c->node, "upper_edge_hertz %g lies beyond the spectrogram's %lld bins at sample rate %lld",
					hi, (long long)nspec, (long long)rate);
		}
	}
	double *m = xcalloc((size_t)(nspec * nmel), sizeof *m);
	for (int64_t i = 0; i < nmel; i++) {
		int64_t l = pt[i], ctr = pt[i + 1], r = pt[i + 2];
		if (ctr == l)
			m[ctr * nmel + i] = 1;
		else
			for (int64_t j = l; j <= ctr; j++)
				m[j * nmel + i] = (double)(j - l) / (double)(ctr - l);
		if (r > ctr)
			for (int64_t j = ctr; j < r; j++)
				m[j * nmel + i] = (double)(r - j) / (double)(r - ctr);
	}
	free(pt);
	int r = op_output(c, 0, dt, 2, dims);
	for (int64_t k = 0; r == 0 && k < nspec * nmel; k++)
		elem_put_f64(dt, c->out[0]->data, k, m[k]);
	free(m);
	return r;
}

OPERATOR(ai_onnx, MelWeightMatrix, 17, mel_infer, mel_run)
