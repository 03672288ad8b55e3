/* resize.c — Resize (opsets 10 to 19) and Upsample: inference and kernels.
 *
 * Interpolation is separable, so the kernel resizes one axis at a time: for
 * every output position of the axis it computes taps (input indices, clamped
 * to the edge, and weights) the way ONNX's reference does — the nearest
 * modes, linear and cubic with optional antialiasing (the kernel stretched
 * by 1/scale when downscaling), exclude_outside, every
 * coordinate_transformation_mode — and then blends rows of the tensor viewed
 * as [outer, axis, inner]. Values are computed in float32; integer outputs
 * are rounded half to even and saturated. Resize-10 and Upsample use the
 * asymmetric mapping with their historical nearest rounding (truncate when
 * upsampling, ceil when downsampling), as onnxruntime does. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops/nn.h"
#include "ops/op.h"
#include "ops/shapeutil.h"
#include "util.h"

enum { RZ_NEAREST, RZ_LINEAR, RZ_CUBIC };
enum { CT_HALF_PIXEL, CT_HALF_PIXEL_SYM, CT_PYTORCH, CT_ALIGN, CT_ASYM, CT_TF_CROP };
enum { NR_PREFER_FLOOR, NR_PREFER_CEIL, NR_FLOOR, NR_CEIL, NR_SIMPLE };
enum { KP_STRETCH, KP_NOT_LARGER, KP_NOT_SMALLER };

typedef struct RzParams {
	int mode, ctm, nearest, policy, exclude, antialias;
	float cubic_a, extrap;
	int naxes;
	int64_t axes[QM_MAX_RANK];
	/* positions of the inputs: -1 when the opset has none */
	int in_roi, in_scales, in_sizes;
} RzParams;

static int lookup(const Onnx__NodeProto *n, const char *attr, const char *val, const char *const *names,
		  int count, int *out)
{
	for (int i = 0; i < count; i++)
		if (!strcmp(val, names[i])) {
			*out = i;
			return 0;
		}
	return op_error(n, "%s '%s' is not supported", attr, val);
}

static int rz_params(const Onnx__NodeProto *n, int64_t opset, int upsample, int rank, RzParams *p)
{
	static const char *const modes[] = {"nearest", "linear", "cubic"};
	static const char *const ctms[] = {"half_pixel", "half_pixel_symmetric", "pytorch_half_pixel",
					   "align_corners", "asymmetric", "tf_crop_and_resize"};
	static const char *const nrs[] = {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"};
	static const char *const kps[] = {"stretch", "not_larger", "not_smaller"};
	char buf[64];
	int64_t v;
	memset(p, 0, sizeof *p);
	p->in_roi = p->in_scales = p->in_sizes = -1;
	if (attr_str(n, "mode", "nearest", buf, sizeof buf) < 0)
		return -1;
	if (!strcmp(buf, "bilinear") || !strcmp(buf, "trilinear"))
		strcpy(buf, "linear");
	if (lookup(n, "mode", buf, modes, upsample || opset < 11 ? 2 : 3, &p->mode) < 0)
		return -1;
	p->naxes = rank;
	for (int i = 0; i < rank && i < QM_MAX_RANK; i++)
		p->axes[i] = i;
	if (upsample || opset < 11) {
		p->ctm = CT_ASYM;
		p->nearest = NR_SIMPLE;
		p->in_scales = upsample && opset < 9 ? -1 : 1;
		return 0;
	}
	p->in_roi = 1;
	p->in_scales = 2;
	p->in_sizes = 3;
	if (attr_str(n, "coordinate_transformation_mode", "half_pixel", buf, sizeof buf) < 0 ||
	    lookup(n, "coordinate_transformation_mode", buf, ctms, 6, &p->ctm) < 0)
		return -1;
	if (p->ctm == CT_HALF_PIXEL_SYM && opset < 19)
		return op_error(n, "coordinate_transformation_mode 'half_pixel_symmetric' needs opset 19");
	if (attr_str(n, "nearest_mode", "round_prefer_floor", buf, sizeof buf) < 0 ||
	    lookup(n, "nearest_mode", buf, nrs, 4, &p->nearest) < 0)
		return -1;
	if (attr_float(n, "cubic_coeff_a", -0.75f, &p->cubic_a) < 0 ||
	    attr_float(n, "extrapolation_value", 0.0f, &p->extrap) < 0 ||
	    attr_int(n, "exclude_outside", 0, &v) < 0)
		return -1;
	p->exclude = v != 0;
	if (opset >= 18) {
		const int64_t *ax;
		size_t nax;
		if (attr_int(n, "antialias", 0, &v) < 0)
			return -1;
		p->antialias = v != 0;
		if (attr_str(n, "keep_aspect_ratio_policy", "stretch", buf, sizeof buf) < 0 ||
		    lookup(n, "keep_aspect_ratio_policy", buf, kps, 3, &p->policy) < 0)
			return -1;
		if (attr_ints(n, "axes", &ax, &nax) < 0)
			return -1;
		if (ax && rank >= 0) {
			int seen[QM_MAX_RANK] = {0};
			p->naxes = (int)nax;
			for (size_t i = 0; i < nax; i++) {
				if (norm_axis(n, ax[i], rank, &p->axes[i]) < 0)
					return -1;
				if (seen[p->axes[i]]++)
					return op_error(n, "axis %lld appears twice in 'axes'", (long long)ax[i]);
			}
		}
	}
	if (p->antialias && p->mode == RZ_NEAREST)
		return op_error(n, "antialias is not defined for mode 'nearest'");
	return 0;
}

/* Output sizes and per-axis scales from sizes (nsz > 0) or scales; in[] are
 * the input dims (-1 unknown: output -1 where it depends on them). */
static int rz_output(const Onnx__NodeProto *n, const RzParams *p, int rank, const int64_t *in,
		     const double *scales, int64_t nsc, const int64_t *sizes, int64_t nsz,
		     int64_t *out, double *scale)
{
	for (int i = 0; i < rank; i++) {
		out[i] = in[i];
		scale[i] = 1.0;
	}
	if (nsz > 0) {
		if (nsz != p->naxes)
			return op_error(n, "sizes has %lld values, expected %d", (long long)nsz, p->naxes);
		for (int i = 0; i < p->naxes; i++)
			if (sizes[i] < 0)
				return op_error(n, "sizes must not be negative, got %lld", (long long)sizes[i]);
		if (p->policy == KP_STRETCH) {
			for (int i = 0; i < p->naxes; i++) {
				int64_t a = p->axes[i];
				out[a] = sizes[i];
				scale[a] = in[a] > 0 ? (double)sizes[i] / (double)in[a] : 1.0;
			}
			return 0;
		}
		double s = p->policy == KP_NOT_LARGER ? INFINITY : -INFINITY;
		for (int i = 0; i < p->naxes; i++) {
			int64_t a = p->axes[i];
			if (in[a] <= 0) {
				for (int j = 0; j < p->naxes; j++)
					out[p->axes[j]] = -1;
				return 0;
			}
			double r = (double)sizes[i] / (double)in[a];
			s = p->policy == KP_NOT_LARGER ? fmin(s, r) : fmax(s, r);
		}
		for (int i = 0; i < p->naxes; i++) {
			int64_t a = p->axes[i];
			scale[a] = s;
			out[a] = (int64_t)(s * (double)in[a] + 0.5);
		}
		return 0;
	}
	if (nsc != p->naxes)
		return op_error(n, "scales has %lld values, expected %d (or give sizes)", (long long)nsc, p->naxes);
	for (int i = 0; i < p->naxes; i++) {
		int64_t a = p->axes[i];
		if (!(scales[i] > 0))
			return op_error(n, "scales must be positive, got %g", scales[i]);
		scale[a] = scales[i];
		out[a] = in[a] < 0 ? (scales[i] == 1.0 ? -2 : -1) : (int64_t)floor(scales[i] * (double)in[a]);
	}
	return 0;
}

/* the contents of a float tensor as doubles (malloc'd) */
static double *to_f64(const Tensor *t)
{
	double *r = xmalloc(sizeof(double) * (size_t)(t->numel ? t->numel : 1));
	for (int64_t i = 0; i < t->numel; i++)
		r[i] = tensor_get_f64(t, i);
	return r;
}

/* scales from the attribute (Upsample-7) */
static int attr_scales(const Onnx__NodeProto *n, double **sc, int64_t *nsc)
{
	const float *f;
	size_t len;
	if (attr_floats(n, "scales", &f, &len) < 0)
		return -1;
	if (!f)
		return op_error(n, "attribute 'scales' is required");
	*sc = xmalloc(sizeof(double) * (len ? len : 1));
	for (size_t i = 0; i < len; i++)
		(*sc)[i] = f[i];
	*nsc = (int64_t)len;
	return 0;
}

/* ---- inference ---- */

static int resize_infer_common(InferCtx *c, int upsample)
{
	const ValueType *x = nn_in(c, 0);
	if (!x)
		return -1;
	ValueType *o = c->out[0];
	vt_set_tensor(o, x->elem, x->rank);
	if (x->rank < 0)
		return 0;
	RzParams p;
	if (rz_params(c->node, c->opset, upsample, x->rank, &p) < 0)
		return -1;
	double *sc = NULL;
	int64_t nsc = 0, nsz = 0, *sz = NULL, in[QM_MAX_RANK], out[QM_MAX_RANK];
	double scale[QM_MAX_RANK];
	int known = 0;
	const Tensor *ts = p.in_scales >= 0 ? nn_value(c, (size_t)p.in_scales) : NULL;
	const Tensor *tz = p.in_sizes >= 0 ? nn_value(c, (size_t)p.in_sizes) : NULL;
	int sz_absent = p.in_sizes < 0 || (size_t)p.in_sizes >= c->nin || !c->in[p.in_sizes] || (tz && tz->numel == 0);
	int sc_absent = p.in_scales < 0 || (size_t)p.in_scales >= c->nin || !c->in[p.in_scales] ||
			(ts && ts->numel == 0);
	if (upsample && c->opset < 9) {
		if (attr_scales(c->node, &sc, &nsc) < 0)
			return -1;
		known = 1;
	} else if (tz && tz->numel > 0) {
		if (op_tensor_ints(c->node, tz, "sizes", &sz, &nsz) < 0)
			return -1;
		known = 1;
	} else if (ts && ts->numel > 0 && sz_absent) {
		sc = to_f64(ts);
		nsc = ts->numel;
		known = 1;
	} else if (sc_absent && sz_absent) {
		return op_error(c->node, "one of scales and sizes is required");
	}
	for (int i = 0; i < x->rank; i++)
		in[i] = x->dims[i].v;
	int rc = 0;
	if (known)
		rc = rz_output(c->node, &p, x->rank, in, sc, nsc, sz, nsz, out, scale);
	else
		for (int i = 0; i < x->rank; i++)
			out[i] = -1;
	if (rc == 0)
		for (int i = 0; i < x->rank; i++) {
			int axis_resized = 0;
			for (int j = 0; j < p.naxes; j++)
				if (p.axes[j] == i)
					axis_resized = 1;
			if (!axis_resized || out[i] == -2)
				o->dims[i] = x->dims[i];
			else
				o->dims[i] = nn_dim(c, out[i]);
		}
	free(sc);
	free(sz);
	return rc;
}

static int resize_infer(InferCtx *c)
{
	return resize_infer_common(c, 0);
}

static int upsample_infer(InferCtx *c)
{
	return resize_infer_common(c, 1);
}

/* ---- kernel ---- */

typedef struct Taps {
	int n;                  /* taps per output position */
	int64_t *idx;           /* [out * n], clamped into the input */
	float *w;               /* [out * n] */
	unsigned char *ext;     /* [out]: use the extrapolation value */
} Taps;

static double cubic_kernel(double x, double A)
{
	x = fabs(x);
	if (x <= 1)
		return ((A + 2) * x - (A + 3)) * x * x + 1;
	if (x < 2)
		return ((A * x - 5 * A) * x + 8 * A) * x - 4 * A;
	return 0;
}

static double source_coord(const RzParams *p, int64_t y, double scale, int64_t in_w, int64_t out_w,
			   double r0, double r1)
{
	double ow = scale * (double)in_w, yy = (double)y;
	switch (p->ctm) {
	case CT_HALF_PIXEL:
		return (yy + 0.5) / scale - 0.5;
	case CT_HALF_PIXEL_SYM: {
		double adj = (double)out_w / ow, off = (double)in_w / 2.0 * (1 - adj);
		return off + (yy + 0.5) / scale - 0.5;
	}
	case CT_PYTORCH:
		return out_w > 1 ? (yy + 0.5) / scale - 0.5 : 0.0;
	case CT_ALIGN:
		return ow == 1 ? 0.0 : yy * (double)(in_w - 1) / (ow - 1);
	case CT_TF_CROP: {
		double x = ow == 1 ? (r1 - r0) * (double)(in_w - 1) / 2
				   : yy * (r1 - r0) * (double)(in_w - 1) / (ow - 1);
		return x + r0 * (double)(in_w - 1);
	}
	default:
		return yy / scale;
	}
}

static void make_taps(const RzParams *p, double scale, int64_t in_w, int64_t out_w, double r0, double r1,
		      Taps *t)
{
	int64_t i0 = 0;
	double sc = 1.0;
	if (p->mode == RZ_NEAREST) {
		t->n = 1;
	} else {
		if (p->antialias && scale < 1.0)
			sc = scale;
		if (p->mode == RZ_LINEAR)
			i0 = p->antialias ? (int64_t)floor(-1.0 / sc) + 1 : 0;
		else
			i0 = p->antialias ? (int64_t)floor(-2.0 / sc) + 1 : -1;
		t->n = (int)(2 - 2 * i0);
	}
	size_t nt = (size_t)(out_w * t->n);
	t->idx = xmalloc(sizeof(int64_t) * (nt ? nt : 1));
	t->w = xmalloc(sizeof(float) * (nt ? nt : 1));
	t->ext = xcalloc((size_t)(out_w ? out_w : 1), 1);
	double *w = xmalloc(sizeof(double) * (size_t)t->n);
	for (int64_t y = 0; y < out_w; y++) {
		int64_t *ix = t->idx + y * t->n;
		float *wt = t->w + y * t->n;
		double x = source_coord(p, y, scale, in_w, out_w, r0, r1);
		if (p->ctm == CT_TF_CROP && (x < 0 || x > (double)(in_w - 1)))
			t->ext[y] = 1;
		if (p->mode == RZ_NEAREST) {
			int64_t f = (int64_t)floor(x), k;
			double r = x - (double)f;
			if (p->nearest == NR_SIMPLE)
				k = scale < 1.0 ? (int64_t)ceil(x) : (int64_t)x;
			else if (r == 0)
				k = f;
			else if (p->nearest == NR_PREFER_FLOOR)
				k = r <= 0.5 ? f : f + 1;
			else if (p->nearest == NR_PREFER_CEIL)
				k = r < 0.5 ? f : f + 1;
			else if (p->nearest == NR_FLOOR)
				k = f;
			else
				k = f + 1;
			ix[0] = k < 0 ? 0 : k >= in_w ? in_w - 1 : k;
			wt[0] = 1.0f;
			continue;
		}
		int64_t f = (int64_t)floor(x);
		double r = x - (double)f, sum = 0;
		if (r == 0) {
			f -= 1;
			r = 1;
		}
		for (int j = 0; j < t->n; j++) {
			double d = sc * ((double)(i0 + j) - r);
			w[j] = p->mode == RZ_LINEAR ? fmax(0.0, 1.0 - fabs(d)) : cubic_kernel(d, p->cubic_a);
			sum += w[j];
		}
		if (p->antialias && sum != 0)
			for (int j = 0; j < t->n; j++)
				w[j] /= sum;
		if (p->exclude) {
			sum = 0;
			for (int j = 0; j < t->n; j++) {
				int64_t k = f + i0 + j;
				if (k < 0 || k >= in_w)
					w[j] = 0;
				sum += w[j];
			}
			if (sum != 0)
				for (int j = 0; j < t->n; j++)
					w[j] /= sum;
		}
		for (int j = 0; j < t->n; j++) {
			int64_t k = f + i0 + j;
			ix[j] = k < 0 ? 0 : k >= in_w ? in_w - 1 : k;
			wt[j] = (float)w[j];
		}
	}
	free(w);
}

static void free_taps(Taps *t)
{
	free(t->idx);
	free(t->w);
	free(t->ext);
}

/* resize axis ax of cur (dims) to out_w into a new buffer */
static float *resize_axis(const RzParams *p, const float *cur, int rank, const int64_t *dims, int ax,
			  int64_t out_w, double scale, double r0, double r1)
{
	int64_t outer = 1, inner = 1, in_w = dims[ax];
	for (int i = 0; i < ax; i++)
		outer *= dims[i];
	for (int i = ax + 1; i < rank; i++)
		inner *= dims[i];
	Taps t;
	make_taps(p, scale, in_w, out_w, r0, r1, &t);
	size_t n = (size_t)(outer * out_w * inner);
	float *nx = xmalloc(sizeof(float) * (n ? n : 1));
	for (int64_t o = 0; o < outer; o++) {
		const float *src = cur + o * in_w * inner;
		for (int64_t y = 0; y < out_w; y++) {
			float *dst = nx + (o * out_w + y) * inner;
			if (t.ext[y]) {
				for (int64_t i = 0; i < inner; i++)
					dst[i] = p->extrap;
				continue;
			}
			const int64_t *ix = t.idx + y * t.n;
			const float *wt = t.w + y * t.n;
			if (inner == 1) {
				float s = 0;
				for (int j = 0; j < t.n; j++)
					s += wt[j] * src[ix[j]];
				dst[0] = s;
				continue;
			}
			if (t.n == 1) {
				memcpy(dst, src + ix[0] * inner, sizeof(float) * (size_t)inner);
				continue;
			}
			for (int64_t i = 0; i < inner; i++)
				dst[i] = 0;
			for (int j = 0; j < t.n; j++) {
				const float *sr = src + ix[j] * inner;
				float wj = wt[j];
				if (wj == 0)
					continue;
				for (int64_t i = 0; i < inner; i++)
					dst[i] += wj * sr[i];
			}
		}
	}
	free_taps(&t);
	return nx;
}

static int resize_run_common(RunCtx *c, int upsample)
{
	const Tensor *x = c->in[0];
	RzParams p;
	if (!dt_numeric(x->dtype) || x->dtype == DT_BOOL)
		return op_unsupported_type(c->node, c->opset, x->dtype);
	if (rz_params(c->node, c->opset, upsample, x->rank, &p) < 0)
		return -1;
	const Tensor *ts = p.in_scales >= 0 && (size_t)p.in_scales < c->nin ? c->in[p.in_scales] : NULL;
	const Tensor *tz = p.in_sizes >= 0 && (size_t)p.in_sizes < c->nin ? c->in[p.in_sizes] : NULL;
	const Tensor *tr = p.in_roi >= 0 && (size_t)p.in_roi < c->nin ? c->in[p.in_roi] : NULL;
	double *sc = NULL, roi[2 * QM_MAX_RANK], scale[QM_MAX_RANK];
	int64_t nsc = 0, nsz = 0, *sz = NULL, out[QM_MAX_RANK];
	if (upsample && c->opset < 9) {
		if (attr_scales(c->node, &sc, &nsc) < 0)
			return -1;
	} else if (tz && tz->numel > 0) {
		if (ts && ts->numel > 0)
			return op_error(c->node, "only one of scales and sizes may be given");
		if (op_tensor_ints(c->node, tz, "sizes", &sz, &nsz) < 0)
			return -1;
	} else if (ts && ts->numel > 0) {
		if (!nn_is_float(ts->dtype))
			return op_error(c->node, "scales must be floating point, got %s", dtype_name(ts->dtype));
		sc = to_f64(ts);
		nsc = ts->numel;
	} else {
		return op_error(c->node, "one of scales and sizes is required");
	}
	for (int i = 0; i < x->rank; i++) {
		roi[i] = 0.0;
		roi[i + x->rank] = 1.0;
	}
	int rc = -1;
	if (p.ctm == CT_TF_CROP && tr && tr->numel > 0) {
		if (tr->numel != 2 * p.naxes) {
			op_error(c->node, "roi has %lld values, expected %d", (long long)tr->numel, 2 * p.naxes);
			goto out;
		}
		for (int i = 0; i < p.naxes; i++) {
			roi[p.axes[i]] = tensor_get_f64(tr, i);
			roi[p.axes[i] + x->rank] = tensor_get_f64(tr, i + p.naxes);
		}
	}
	if (rz_output(c->node, &p, x->rank, x->dims, sc, nsc, sz, nsz, out, scale) < 0)
		goto out;
	if (op_output(c, 0, x->dtype, x->rank, out) < 0)
		goto out;
	float *cur = nn_f32_copy(x);
	int64_t dims[QM_MAX_RANK];
	memcpy(dims, x->dims, sizeof(int64_t) * (size_t)x->rank);
	for (int ax = 0; ax < x->rank; ax++) {
		int crop = p.ctm == CT_TF_CROP && (roi[ax] != 0.0 || roi[ax + x->rank] != 1.0);
		if (out[ax] == dims[ax] && scale[ax] == 1.0 && !crop)
			continue;
		if (dims[ax] == 0 && out[ax] > 0) {
			free(cur);
			op_error(c->node, "cannot resize an empty axis %d to %lld", ax, (long long)out[ax]);
			goto out;
		}
		float *nx = resize_axis(&p, cur, x->rank, dims, ax, out[ax], scale[ax], roi[ax], roi[ax + x->rank]);
		free(cur);
		cur = nx;
		dims[ax] = out[ax];
	}
	Tensor *y = c->out[0];
	if (y->dtype == DT_FLOAT || nn_is_float(y->dtype))
		nn_f32_store(y->dtype, y->data, cur, y->numel);
	else
		for (int64_t i = 0; i < y->numel; i++)
			nn_put_sat(y->dtype, y->data, i, cur[i]);
	free(cur);
	rc = 0;
out:
	free(sc);
	free(sz);
	return rc;
}

static int resize_run(RunCtx *c)
{
	return resize_run_common(c, 0);
}

static int upsample_run(RunCtx *c)
{
	return resize_run_common(c, 1);
}

/* ---- GridSample ---- */

enum { GS_ZEROS, GS_BORDER, GS_REFLECTION };

static int gs_params(const Onnx__NodeProto *n, int64_t opset, int *mode, int *pad, int *align)
{
	static const char *const modes16[] = {"nearest", "bilinear", "bicubic"};
	static const char *const modes20[] = {"nearest", "linear", "cubic"};
	static const char *const pads[] = {"zeros", "border", "reflection"};
	char buf[32];
	int64_t ac;
	if (attr_str(n, "mode", opset >= 20 ? "linear" : "bilinear", buf, sizeof buf) < 0 ||
	    lookup(n, "mode", buf, opset >= 20 ? modes20 : modes16, 3, mode) < 0)
		return -1;
	if (attr_str(n, "padding_mode", "zeros", buf, sizeof buf) < 0 ||
	    lookup(n, "padding_mode", buf, pads, 3, pad) < 0 || attr_int(n, "align_corners", 0, &ac) < 0)
		return -1;
	*align = ac != 0;
	return 0;
}

static int gridsample_infer(InferCtx *c)
{
	const ValueType *x = nn_in(c, 0), *g = nn_in(c, 1);
	if (!x || !g)
		return -1;
	int rank = g->rank >= 0 ? g->rank : x->rank;
	ValueType *o = c->out[0];
	vt_set_tensor(o, x->elem, rank);
	if (rank < 0)
		return 0;
	if (rank < 3)
		return op_error(c->node, "grid must have rank 3 or more, got %d", rank);
	o->dims[0] = x->rank >= 0 ? x->dims[0] : g->dims[0];
	o->dims[1] = x->rank >= 0 ? x->dims[1] : nn_dim(c, -1);
	for (int i = 2; i < rank; i++)
		o->dims[i] = g->rank >= 0 ? g->dims[i - 1] : nn_dim(c, -1);
	return 0;
}

/* reflect x into [lo, hi] as ONNX's reference does */
static double gs_reflect(double x, double lo, double hi)
{
	double rng = hi - lo;
	if (rng <= 0)
		return lo;
	if (x < lo) {
		double dx = lo - x;
		int64_t k = (int64_t)(dx / rng);
		double r = dx - (double)k * rng;
		return k % 2 == 0 ? lo + r : hi - r;
	}
	if (x > hi) {
		double dx = x - hi;
		int64_t k = (int64_t)(dx / rng);
		double r = dx - (double)k * rng;
		return k % 2 == 0 ? hi - r : lo + r;
	}
	return x;
}

/* index i of an axis of size d under the padding mode: -1 reads zero */
static int64_t gs_index(int64_t i, int64_t d, int pad, double lo, double hi)
{
	if (pad == GS_ZEROS)
		return i >= 0 && i < d ? i : -1;
	if (pad == GS_BORDER)
		return i < 0 ? 0 : i >= d ? d - 1 : i;
	int64_t r = (int64_t)gs_reflect((double)i, lo, hi);
	return r < 0 ? 0 : r >= d ? d - 1 : r;
}

static int gridsample_run(RunCtx *c)
{
	const Tensor *x = c->in[0], *g = c->in[1];
	int mode = 0, pad = 0, align = 0;
	if (gs_params(c->node, c->opset, &mode, &pad, &align) < 0)
		return -1;
	if (!nn_is_float(x->dtype))
		return op_unsupported_type(c->node, c->opset, x->dtype);
	if (!nn_is_float(g->dtype))
		return op_error(c->node, "grid has type %s, expected a floating-point type", dtype_name(g->dtype));
	int nsp = x->rank - 2;
	if (nsp < 1 || nsp > 3 || g->rank != x->rank || g->dims[0] != x->dims[0] || g->dims[g->rank - 1] != nsp) {
		char sa[128], sb[128];
		return op_error(c->node, "input %s and grid %s do not match (expected [N, C, D1..Dk] and "
				"[N, H1..Hk, k] with k from 1 to 3)", shape_str(x->rank, x->dims, sa, sizeof sa),
				shape_str(g->rank, g->dims, sb, sizeof sb));
	}
	int64_t dims[QM_MAX_RANK], N = x->dims[0], C = x->dims[1], osz = 1, isz = 1;
	dims[0] = N;
	dims[1] = C;
	for (int i = 0; i < nsp; i++) {
		dims[i + 2] = g->dims[i + 1];
		osz *= dims[i + 2];
		isz *= x->dims[i + 2];
	}
	float *tx, *ty, *gf = nn_f32_copy(g);
	const float *xf = nn_f32_in(c, x, &tx);
	float *y = xf ? nn_f32_out(c, 0, x->dtype, x->rank, dims, &ty) : NULL;
	if (!y) {
		free(tx);
		free(gf);
		return -1;
	}
	const int64_t *sd = x->dims + 2;
	int ntap = mode == 0 ? 1 : mode == 1 ? 2 : 4;
	for (int64_t n = 0; n < N; n++)
		for (int64_t o = 0; o < osz; o++) {
			const float *gp = gf + (n * osz + o) * nsp;
			int64_t idx[3][4];
			double w[3][4];
			for (int i = 0; i < nsp; i++) {
				double d = (double)sd[i], v = gp[nsp - 1 - i];   /* grid holds (x, y, z): reversed */
				double lo = align ? 0.0 : -0.5, hi = align ? d - 1 : d - 0.5;
				v = align ? (v + 1) / 2.0 * (d - 1) : ((v + 1) * d - 1) / 2.0;
				if (mode == 0)
					v = nearbyint(v);
				if (v < lo || v > hi) {
					if (pad == GS_BORDER)
						v = v < 0 ? 0 : v > d - 1 ? d - 1 : v;
					else if (pad == GS_REFLECTION)
						v = gs_reflect(v, lo, hi);
				}
				if (mode == 0) {
					idx[i][0] = gs_index((int64_t)v, sd[i], pad, lo, hi);
					w[i][0] = 1;
					continue;
				}
				double f0 = floor(v), t = v - f0;
				int64_t x0 = (int64_t)f0 - (mode == 2 ? 1 : 0);
				if (mode == 1) {
					w[i][0] = 1 - t;
					w[i][1] = t;
				} else {
					double A = -0.75;
					w[i][0] = ((A * (t + 1) - 5 * A) * (t + 1) + 8 * A) * (t + 1) - 4 * A;
					w[i][1] = ((A + 2) * t - (A + 3)) * t * t + 1;
					w[i][2] = ((A + 2) * (1 - t) - (A + 3)) * (1 - t) * (1 - t) + 1;
					w[i][3] = ((A * (2 - t) - 5 * A) * (2 - t) + 8 * A) * (2 - t) - 4 * A;
				}
				for (int j = 0; j < ntap; j++)
					idx[i][j] = gs_index(x0 + j, sd[i], pad, lo, hi);
			}
			int combos = 1;
			for (int i = 0; i < nsp; i++)
				combos *= ntap;
			for (int64_t ch = 0; ch < C; ch++) {
				const float *xp = xf + (n * C + ch) * isz;
				double acc = 0;
				for (int cb = 0; cb < combos; cb++) {
					int64_t off = 0;
					double wt = 1;
					int r = cb, zero = 0;
					for (int i = nsp - 1; i >= 0; i--) {
						int j = r % ntap;
						r /= ntap;
						if (idx[i][j] < 0)
							zero = 1;
						wt *= w[i][j];
					}
					if (zero || wt == 0)
						continue;
					r = cb;
					int64_t stride = 1;
					for (int i = nsp - 1; i >= 0; i--) {
						off += idx[i][r % ntap] * stride;
						r /= ntap;
						stride *= sd[i];
					}
					acc += wt * xp[off];
				}
				y[(n * C + ch) * osz + o] = (float)acc;
			}
		}
	nn_f32_done(c->out[0], ty);
	free(tx);
	free(gf);
	return 0;
}

OPERATOR(ai_onnx, GridSample, 16, gridsample_infer, gridsample_run)
OPERATOR(ai_onnx, Resize, 10, resize_infer, resize_run)
OPERATOR(ai_onnx, Upsample, 7, upsample_infer, upsample_run)
