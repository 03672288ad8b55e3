/* index.c — operators that select elements by value or position: TopK,
 * NonZero, Trilu, ReverseSequence, Unique.
 *
 * Comparisons read elements as int64 (integer types, exact) or double
 * (floating types); ties keep the lower index first, so results are
 * deterministic. NaN compares greater than every number. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops/op.h"
#include "ops/shapeutil.h"
#include "util.h"

/* A sort key: one element read exactly. */
typedef struct Key {
	double f;
	int64_t i;
	int64_t pos;
} Key;

static int cmp_val(const Key *a, const Key *b, int isf)
{
	if (isf) {
		int na = isnan(a->f), nb = isnan(b->f);
		if (na || nb)
			return na - nb;
		return (a->f > b->f) - (a->f < b->f);
	}
	return (a->i > b->i) - (a->i < b->i);
}

static int cmp_asc(const void *x, const void *y, void *ud)
{
	const Key *a = x, *b = y;
	int c = cmp_val(a, b, *(int *)ud);
	return c ? c : (a->pos > b->pos) - (a->pos < b->pos);
}

static int cmp_desc(const void *x, const void *y, void *ud)
{
	const Key *a = x, *b = y;
	int c = cmp_val(b, a, *(int *)ud);
	return c ? c : (a->pos > b->pos) - (a->pos < b->pos);
}

static void read_key(int dt, int isf, const void *base, int64_t i, Key *k)
{
	if (isf)
		k->f = elem_get_f64(dt, base, i);
	else
		k->i = elem_get_i64(dt, base, i);
}

/* ---- TopK ---- */

static int topk_k_infer(InferCtx *c, int64_t *k)
{
	*k = -1;
	if (c->opset < 10)
		return attr_int(c->node, "k", -1, k);
	if (infer_need(c, 1) < 0)
		return -1;
	const Tensor *t = c->in[1]->value;
	if (t && t->numel == 1)
		*k = tensor_get_i64(t, 0);
	return 0;
}

static int topk_infer(InferCtx *c)
{
	if (infer_need(c, 0) < 0)
		return -1;
	const ValueType *x = c->in[0];
	int64_t axis, a, k;
	if (attr_int(c->node, "axis", -1, &axis) < 0 || topk_k_infer(c, &k) < 0)
		return -1;
	vt_set_tensor(c->out[0], x->elem, x->rank);
	if (c->nout > 1)
		vt_set_tensor(c->out[1], DT_INT64, x->rank);
	if (x->rank < 0)
		return 0;
	if (norm_axis(c->node, axis, x->rank, &a) < 0)
		return -1;
	Dim dk = k >= 0 ? dim_known(k) : infer_fresh_dim(c);
	if (k >= 0 && x->dims[a].v >= 0 && k > x->dims[a].v)
		return op_error(c->node, "k = %lld exceeds the axis size %lld", (long long)k,
				(long long)x->dims[a].v);
	for (size_t o = 0; o < c->nout && o < 2; o++)
		for (int i = 0; i < x->rank; i++)
			c->out[o]->dims[i] = i == a ? dk : x->dims[i];
	return 0;
}

static int topk_run(RunCtx *c)
{
	if (run_need(c, 0) < 0)
		return -1;
	const Tensor *x = c->in[0];
	int64_t axis, a, k, largest = 1, dims[QM_MAX_RANK];
	size_t es;
	if (attr_int(c->node, "axis", -1, &axis) < 0 || (c->opset >= 11 &&
	    attr_int(c->node, "largest", 1, &largest) < 0))
		return -1;
	if (c->opset < 10) {
		if (attr_int(c->node, "k", -1, &k) < 0)
			return -1;
	} else {
		if (run_need(c, 1) < 0)
			return -1;
		if (c->in[1]->numel != 1 || (c->in[1]->dtype != DT_INT64 && c->in[1]->dtype != DT_INT32))
			return op_error(c->node, "k must be a single int64");
		k = tensor_get_i64(c->in[1], 0);
	}
	if (!dt_numeric(x->dtype) || x->dtype == DT_BOOL)
		return op_unsupported_type(c->node, c->opset, x->dtype);
	if (op_elemsize(c->node, c->opset, x->dtype, &es) < 0)
		return -1;
	if (x->rank == 0)
		return op_error(c->node, "input must have rank >= 1");
	if (norm_axis(c->node, axis, x->rank, &a) < 0)
		return -1;
	int64_t n = x->dims[a];
	if (k < 0 || k > n)
		return op_error(c->node, "k = %lld is out of range for an axis of size %lld",
				(long long)k, (long long)n);
	memcpy(dims, x->dims, sizeof dims[0] * (size_t)x->rank);
	dims[a] = k;
	if (op_output(c, 0, x->dtype, x->rank, dims) < 0 ||
	    (c->nout > 1 && op_output(c, 1, DT_INT64, x->rank, dims) < 0))
		return -1;
	int isf = dt_float(x->dtype);
	int64_t outer = shape_numel((int)a, x->dims), inner = shape_numel(x->rank - (int)a - 1, x->dims + a + 1);
	Key *keys = xmalloc(sizeof *keys * (size_t)(n ? n : 1));
	char *yv = c->out[0]->data;
	char *yi = c->nout > 1 ? c->out[1]->data : NULL;
	for (int64_t o = 0; o < outer; o++)
		for (int64_t in = 0; in < inner; in++) {
			int64_t base = o * n * inner + in;
			for (int64_t j = 0; j < n; j++) {
				read_key(x->dtype, isf, x->data, base + j * inner, &keys[j]);
				keys[j].pos = j;
			}
			qsort_r(keys, (size_t)n, sizeof *keys, largest ? cmp_desc : cmp_asc, &isf);
			for (int64_t j = 0; j < k; j++) {
				int64_t d = o * k * inner + j * inner + in;
				elem_copy(yv + (size_t)d * es,
					  (const char *)x->data + (size_t)(base + keys[j].pos * inner) * es, es);
				if (yi)
					memcpy(yi + 8 * d, &keys[j].pos, 8);
			}
		}
	free(keys);
	return 0;
}

OPERATOR(ai_onnx, TopK, 1, topk_infer, topk_run)

/* ---- NonZero ---- */

static int nonzero_infer(InferCtx *c)
{
	if (infer_need(c, 0) < 0)
		return -1;
	const ValueType *x = c->in[0];
	ValueType *y = c->out[0];
	vt_set_tensor(y, DT_INT64, 2);
	if (x->rank >= 0)
		y->dims[0] = dim_known(x->rank ? x->rank : 1);
	y->dims[1] = infer_fresh_dim(c);
	return 0;
}

static int is_nonzero(int dt, const void *base, int64_t i)
{
	if (dt_float(dt))
		return elem_get_f64(dt, base, i) != 0;
	return elem_get_i64(dt, base, i) != 0;
}

static int nonzero_run(RunCtx *c)
{
	if (run_need(c, 0) < 0)
		return -1;
	const Tensor *x = c->in[0];
	if (!dt_numeric(x->dtype))
		return op_unsupported_type(c->node, c->opset, x->dtype);
	int r = x->rank ? x->rank : 1;
	int64_t cnt = 0, dims[2], idx[QM_MAX_RANK] = {0}, xd[QM_MAX_RANK];
	for (int64_t i = 0; i < x->numel; i++)
		cnt += is_nonzero(x->dtype, x->data, i);
	dims[0] = r;
	dims[1] = cnt;
	if (op_output(c, 0, DT_INT64, 2, dims) < 0)
		return -1;
	if (x->rank)
		memcpy(xd, x->dims, sizeof xd[0] * (size_t)x->rank);
	else
		xd[0] = 1;
	char *o = c->out[0]->data;
	int64_t j = 0;
	for (int64_t i = 0; i < x->numel; i++) {
		if (is_nonzero(x->dtype, x->data, i)) {
			for (int k = 0; k < r; k++)
				memcpy(o + 8 * (size_t)(k * cnt + j), &idx[k], 8);
			j++;
		}
		index_next(idx, xd, r);
	}
	return 0;
}

OPERATOR(ai_onnx, NonZero, 9, nonzero_infer, nonzero_run)

/* ---- Trilu ---- */

static int trilu_infer(InferCtx *c)
{
	if (infer_need(c, 0) < 0)
		return -1;
	if (c->in[0]->rank >= 0 && c->in[0]->rank < 2)
		return op_error(c->node, "input must have rank >= 2, has %d", c->in[0]->rank);
	return infer_same_as_input(c, 0, 0);
}

static int trilu_run(RunCtx *c)
{
	if (run_need(c, 0) < 0)
		return -1;
	const Tensor *x = c->in[0];
	int64_t upper, k = 0;
	size_t es;
	if (attr_int(c->node, "upper", 1, &upper) < 0 || op_elemsize(c->node, c->opset, x->dtype, &es) < 0)
		return -1;
	if (c->nin > 1 && c->in[1]) {
		if (c->in[1]->numel != 1 || (c->in[1]->dtype != DT_INT64 && c->in[1]->dtype != DT_INT32))
			return op_error(c->node, "k must be a single int64");
		k = tensor_get_i64(c->in[1], 0);
	}
	if (x->rank < 2)
		return op_error(c->node, "input must have rank >= 2, has %d", x->rank);
	if (op_output(c, 0, x->dtype, x->rank, x->dims) < 0)
		return -1;
	int64_t rows = x->dims[x->rank - 2], cols = x->dims[x->rank - 1];
	int64_t mats = shape_numel(x->rank - 2, x->dims);
	char *o = c->out[0]->data;
	const char *s = x->data;
	for (int64_t m = 0; m < mats; m++)
		for (int64_t i = 0; i < rows; i++)
			for (int64_t j = 0; j < cols; j++) {
				size_t off = (size_t)((m * rows + i) * cols + j) * es;
				int keep = upper ? j - i >= k : j - i <= k;
				if (keep)
					elem_copy(o + off, s + off, es);
				else
					memset(o + off, 0, es);
			}
	return 0;
}

OPERATOR(ai_onnx, Trilu, 14, trilu_infer, trilu_run)

/* ---- ReverseSequence ---- */

static int revseq_axes(const Onnx__NodeProto *n, int64_t *bax, int64_t *tax)
{
	if (attr_int(n, "batch_axis", 1, bax) < 0 || attr_int(n, "time_axis", 0, tax) < 0)
		return -1;
	if (!((*bax == 0 && *tax == 1) || (*bax == 1 && *tax == 0)))
		return op_error(n, "batch_axis and time_axis must be 0 and 1 in some order, are %lld and %lld",
				(long long)*bax, (long long)*tax);
	return 0;
}

static int revseq_infer(InferCtx *c)
{
	int64_t b, t;
	if (infer_need(c, 0) < 0 || infer_need(c, 1) < 0 || revseq_axes(c->node, &b, &t) < 0)
		return -1;
	if (c->in[0]->rank >= 0 && c->in[0]->rank < 2)
		return op_error(c->node, "input must have rank >= 2, has %d", c->in[0]->rank);
	return infer_same_as_input(c, 0, 0);
}

static int revseq_run(RunCtx *c)
{
	if (run_need(c, 0) < 0 || run_need(c, 1) < 0)
		return -1;
	const Tensor *x = c->in[0], *sl = c->in[1];
	int64_t bax, tax, xs[QM_MAX_RANK], idx[QM_MAX_RANK] = {0};
	size_t es;
	if (revseq_axes(c->node, &bax, &tax) < 0 || op_elemsize(c->node, c->opset, x->dtype, &es) < 0)
		return -1;
	if (x->rank < 2)
		return op_error(c->node, "input must have rank >= 2, has %d", x->rank);
	if ((sl->dtype != DT_INT64 && sl->dtype != DT_INT32) || sl->rank != 1 || sl->numel != x->dims[bax])
		return op_error(c->node, "sequence_lens must be int64 [%lld]", (long long)x->dims[bax]);
	for (int64_t b = 0; b < sl->numel; b++) {
		int64_t l = tensor_get_i64(sl, b);
		if (l < 0 || l > x->dims[tax])
			return op_error(c->node, "sequence length %lld is out of range 0..%lld", (long long)l,
					(long long)x->dims[tax]);
	}
	if (op_output(c, 0, x->dtype, x->rank, x->dims) < 0)
		return -1;
	if (x->numel == 0)
		return 0;
	dims_strides(x->rank, x->dims, xs);
	char *o = c->out[0]->data;
	int64_t i = 0;
	do {
		int64_t l = tensor_get_i64(sl, idx[bax]), t = idx[tax];
		int64_t src = i;
		if (t < l)
			src = i + (l - 1 - 2 * t) * xs[tax];
		elem_copy(o + (size_t)i * es, (const char *)x->data + (size_t)src * es, es);
		i++;
	} while (index_next(idx, x->dims, x->rank) >= 0);
	return 0;
}

OPERATOR(ai_onnx, ReverseSequence, 10, revseq_infer, revseq_run)

/* ---- Unique ---- */

typedef struct UniqCtx {
	const Tensor *x;
	int isf;
	int64_t len, inner, n;   /* items are slices of len elements: [outer, n, inner] */
} UniqCtx;

static int uniq_cmp_items(const UniqCtx *u, int64_t a, int64_t b)
{
	int64_t outer = u->len / u->inner;
	for (int64_t o = 0; o < outer; o++)
		for (int64_t i = 0; i < u->inner; i++) {
			Key ka = {0}, kb = {0};
			read_key(u->x->dtype, u->isf, u->x->data, (o * u->n + a) * u->inner + i, &ka);
			read_key(u->x->dtype, u->isf, u->x->data, (o * u->n + b) * u->inner + i, &kb);
			int c = cmp_val(&ka, &kb, u->isf);
			if (c)
				return c;
		}
	return 0;
}

static int uniq_cmp(const void *x, const void *y, void *ud)
{
	int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;
	int c = uniq_cmp_items(ud, a, b);
	return c ? c : (a > b) - (a < b);
}

static int cmp_first(const void *x, const void *y, void *ud)
{
	const int64_t *first = ud;
	int64_t a = first[*(const int64_t *)x], b = first[*(const int64_t *)y];
	return (a > b) - (a < b);
}

static int unique_infer(InferCtx *c)
{
	if (infer_need(c, 0) < 0)
		return -1;
	const ValueType *x = c->in[0];
	int has_axis = node_attr(c->node, "axis") != NULL;
	int64_t axis, a = 0;
	if (attr_int(c->node, "axis", 0, &axis) < 0)
		return -1;
	Dim u = infer_fresh_dim(c), n = {-1, NULL};
	if (has_axis) {
		vt_set_tensor(c->out[0], x->elem, x->rank);
		if (x->rank >= 0) {
			if (norm_axis(c->node, axis, x->rank, &a) < 0)
				return -1;
			for (int i = 0; i < x->rank; i++)
				c->out[0]->dims[i] = i == a ? u : x->dims[i];
			n = x->dims[a];
		}
	} else {
		vt_set_tensor(c->out[0], x->elem, 1);
		c->out[0]->dims[0] = u;
		if (x->rank >= 0)
			n = dims_product(x->dims, x->rank);
	}
	for (size_t o = 1; o < c->nout && o < 4; o++) {
		vt_set_tensor(c->out[o], DT_INT64, 1);
		c->out[o]->dims[0] = o == 2 ? n : u;
	}
	return 0;
}

static int unique_run(RunCtx *c)
{
	if (run_need(c, 0) < 0)
		return -1;
	const Tensor *x = c->in[0];
	int has_axis = node_attr(c->node, "axis") != NULL;
	int64_t axis, a = 0, sorted;
	size_t es;
	if (attr_int(c->node, "axis", 0, &axis) < 0 || attr_int(c->node, "sorted", 1, &sorted) < 0 ||
	    op_elemsize(c->node, c->opset, x->dtype, &es) < 0)
		return -1;
	if (!dt_numeric(x->dtype))
		return op_unsupported_type(c->node, c->opset, x->dtype);
	UniqCtx u = {.x = x, .isf = dt_float(x->dtype)};
	if (has_axis) {
		if (x->rank == 0)
			return op_error(c->node, "axis given for a scalar input");
		if (norm_axis(c->node, axis, x->rank, &a) < 0)
			return -1;
		u.n = x->dims[a];
		u.inner = shape_numel(x->rank - (int)a - 1, x->dims + a + 1);
		u.len = shape_numel((int)a, x->dims) * u.inner;
	} else {
		u.n = x->numel;
		u.inner = 1;
		u.len = 1;
	}
	int64_t n = u.n;
	int64_t *ord = xmalloc(sizeof *ord * (size_t)(n ? n : 1));
	int64_t *grp = xmalloc(sizeof *grp * (size_t)(n ? n : 1));     /* item -> group */
	int64_t *first = xmalloc(sizeof *first * (size_t)(n ? n : 1)); /* group -> first item */
	int64_t *cnt = xcalloc((size_t)(n ? n : 1), sizeof *cnt);
	int64_t *rank = xmalloc(sizeof *rank * (size_t)(n ? n : 1));   /* group -> output position */
	int64_t *gord = xmalloc(sizeof *gord * (size_t)(n ? n : 1));   /* output position -> group */
	int ret = -1;
	for (int64_t i = 0; i < n; i++)
		ord[i] = i;
	qsort_r(ord, (size_t)n, sizeof *ord, uniq_cmp, &u);
	int64_t ng = 0;
	for (int64_t i = 0; i < n; i++) {
		if (i == 0 || uniq_cmp_items(&u, ord[i - 1], ord[i]))
			first[ng++] = ord[i];
		grp[ord[i]] = ng - 1;
		cnt[ng - 1]++;
	}
	for (int64_t g = 0; g < ng; g++)
		gord[g] = g;
	if (!sorted)
		qsort_r(gord, (size_t)ng, sizeof *gord, cmp_first, first);
	for (int64_t p = 0; p < ng; p++)
		rank[gord[p]] = p;
	int64_t dims[QM_MAX_RANK];
	if (has_axis) {
		memcpy(dims, x->dims, sizeof dims[0] * (size_t)x->rank);
		dims[a] = ng;
		if (op_output(c, 0, x->dtype, x->rank, dims) < 0)
			goto out;
		int64_t outer = u.len / (u.inner ? u.inner : 1);
		size_t row = (size_t)u.inner * es;
		for (int64_t o = 0; o < outer; o++)
			for (int64_t p = 0; p < ng; p++)
				memcpy((char *)c->out[0]->data + (size_t)(o * ng + p) * row,
				       (const char *)x->data + (size_t)(o * n + first[gord[p]]) * row, row);
	} else {
		if (op_output(c, 0, x->dtype, 1, &ng) < 0)
			goto out;
		for (int64_t p = 0; p < ng; p++)
			elem_copy((char *)c->out[0]->data + (size_t)p * es,
				  (const char *)x->data + (size_t)first[gord[p]] * es, es);
	}
	if (c->nout > 1 && c->out[1]) {
		if (op_output(c, 1, DT_INT64, 1, &ng) < 0)
			goto out;
		for (int64_t p = 0; p < ng; p++)
			memcpy((char *)c->out[1]->data + 8 * p, &first[gord[p]], 8);
	}
	if (c->nout > 2 && c->out[2]) {
		if (op_output(c, 2, DT_INT64, 1, &n) < 0)
			goto out;
		for (int64_t i = 0; i < n; i++)
			memcpy((char *)c->out[2]->data + 8 * i, &rank[grp[i]], 8);
	}
	if (c->nout > 3 && c->out[3]) {
		if (op_output(c, 3, DT_INT64, 1, &ng) < 0)
			goto out;
		for (int64_t p = 0; p < ng; p++)
			memcpy((char *)c->out[3]->data + 8 * p, &cnt[gord[p]], 8);
	}
	ret = 0;
out:
	free(ord);
	free(grp);
	free(first);
	free(cnt);
	free(rank);
	free(gord);
	return ret;
}

OPERATOR(ai_onnx, Unique, 11, unique_infer, unique_run)

/* ---- NonMaxSuppression ---- */

static int nms_infer(InferCtx *c)
{
	if (infer_need(c, 0) < 0 || infer_need(c, 1) < 0)
		return -1;
	vt_set_tensor(c->out[0], DT_INT64, 2);
	c->out[0]->dims[0] = infer_fresh_dim(c);
	c->out[0]->dims[1] = dim_known(3);
	return 0;
}

/* corners of box i: [y1, x1, y2, x2] (either order) or [xc, yc, w, h] */
static void nms_corners(const Tensor *b, int64_t i, int center, double *xmin, double *xmax,
			double *ymin, double *ymax)
{
	double v[4];
	for (int k = 0; k < 4; k++)
		v[k] = elem_get_f64(b->dtype, b->data, i * 4 + k);
	if (center) {
		*xmin = v[0] - v[2] / 2;
		*xmax = v[0] + v[2] / 2;
		*ymin = v[1] - v[3] / 2;
		*ymax = v[1] + v[3] / 2;
	} else {
		*xmin = v[1] < v[3] ? v[1] : v[3];
		*xmax = v[1] < v[3] ? v[3] : v[1];
		*ymin = v[0] < v[2] ? v[0] : v[2];
		*ymax = v[0] < v[2] ? v[2] : v[0];
	}
}

/* box a suppresses box b: intersection over union above the threshold */
static int nms_suppress(const Tensor *b, int64_t i, int64_t j, int center, double thr)
{
	double ax0, ax1, ay0, ay1, bx0, bx1, by0, by1;
	nms_corners(b, i, center, &ax0, &ax1, &ay0, &ay1);
	nms_corners(b, j, center, &bx0, &bx1, &by0, &by1);
	double ix0 = ax0 > bx0 ? ax0 : bx0, ix1 = ax1 < bx1 ? ax1 : bx1;
	double iy0 = ay0 > by0 ? ay0 : by0, iy1 = ay1 < by1 ? ay1 : by1;
	if (ix1 <= ix0 || iy1 <= iy0)
		return 0;
	double inter = (ix1 - ix0) * (iy1 - iy0);
	double a1 = (ax1 - ax0) * (ay1 - ay0), a2 = (bx1 - bx0) * (by1 - by0);
	double uni = a1 + a2 - inter;
	if (inter <= 0 || a1 <= 0 || a2 <= 0 || uni <= 0)
		return 0;
	return inter / uni > thr;
}

static int nms_run(RunCtx *c)
{
	if (run_need(c, 0) < 0 || run_need(c, 1) < 0)
		return -1;
	const Tensor *boxes = c->in[0], *scores = c->in[1];
	const Tensor *tmax = c->nin > 2 ? c->in[2] : NULL, *tiou = c->nin > 3 ? c->in[3] : NULL;
	const Tensor *tsc = c->nin > 4 ? c->in[4] : NULL;
	int64_t center;
	if (attr_int(c->node, "center_point_box", 0, &center) < 0)
		return -1;
	if (center != 0 && center != 1)
		return op_error(c->node, "center_point_box must be 0 or 1, is %lld", (long long)center);
	if (!dt_float(boxes->dtype) || !dt_float(scores->dtype))
		return op_unsupported_type(c->node, c->opset, dt_float(boxes->dtype) ? scores->dtype : boxes->dtype);
	if (boxes->rank != 3 || boxes->dims[2] != 4)
		return op_error(c->node, "boxes must be [batch, boxes, 4]");
	int64_t nb = boxes->dims[0], nbox = boxes->dims[1];
	if (scores->rank != 3 || scores->dims[0] != nb || scores->dims[2] != nbox)
		return op_error(c->node, "scores must be [%lld, classes, %lld]", (long long)nb, (long long)nbox);
	int64_t ncls = scores->dims[1], maxout = 0;
	double iou = 0, sthr = 0;
	int has_sthr = 0;
	if (tmax && tmax->numel) {
		if (!dt_numeric(tmax->dtype) || tmax->numel != 1)
			return op_error(c->node, "max_output_boxes_per_class must be one int64");
		maxout = elem_get_i64(tmax->dtype, tmax->data, 0);
	}
	if (tiou && tiou->numel) {
		if (!dt_float(tiou->dtype) || tiou->numel != 1)
			return op_error(c->node, "iou_threshold must be one float");
		iou = elem_get_f64(tiou->dtype, tiou->data, 0);
		if (iou < 0 || iou > 1)
			return op_error(c->node, "iou_threshold must be in [0, 1], is %g", iou);
	}
	if (tsc && tsc->numel) {
		if (!dt_float(tsc->dtype) || tsc->numel != 1)
			return op_error(c->node, "score_threshold must be one float");
		sthr = elem_get_f64(tsc->dtype, tsc->data, 0);
		has_sthr = 1;
	}
	int isf = 1;
	Key *cand = xmalloc(sizeof *cand * (size_t)(nbox ? nbox : 1));
	int64_t *sel = xmalloc(sizeof *sel * (size_t)(nbox ? nbox : 1));
	int64_t *res = NULL, nres = 0, cap = 0;
	for (int64_t b = 0; b < nb; b++) {
		Tensor bb = *boxes;   /* view of batch b's boxes */
		bb.data = (char *)boxes->data + (size_t)(b * nbox * 4) * (size_t)(dtype_bits(boxes->dtype) / 8);
		for (int64_t k = 0; k < ncls; k++) {
			int64_t n = 0, nsel = 0;
			for (int64_t i = 0; i < nbox; i++) {
				double s = elem_get_f64(scores->dtype, scores->data, (b * ncls + k) * nbox + i);
				if (has_sthr && !(s > sthr))
					continue;
				cand[n].f = s;
				cand[n].pos = i;
				n++;
			}
			qsort_r(cand, (size_t)n, sizeof *cand, cmp_desc, &isf);
			for (int64_t q = 0; q < n && nsel < maxout; q++) {
				int keep = 1;
				for (int64_t s = 0; s < nsel && keep; s++)
					if (nms_suppress(&bb, cand[q].pos, sel[s], (int)center, iou))
						keep = 0;
				if (!keep)
					continue;
				sel[nsel++] = cand[q].pos;
				if (nres == cap) {
					cap = cap ? 2 * cap : 64;
					res = xreallocarray(res, (size_t)cap, 3 * sizeof *res);
				}
				res[3 * nres] = b;
				res[3 * nres + 1] = k;
				res[3 * nres + 2] = cand[q].pos;
				nres++;
			}
		}
	}
	free(cand);
	free(sel);
	int64_t dims[2] = {nres, 3};
	int r = op_output(c, 0, DT_INT64, 2, dims);
	if (r == 0 && nres)
		memcpy(c->out[0]->data, res, sizeof *res * (size_t)(3 * nres));
	free(res);
	return r;
}

OPERATOR(ai_onnx, NonMaxSuppression, 10, nms_infer, nms_run)
