/* gather.c — indexed reads and writes: Gather, GatherElements, GatherND,
 * Scatter, ScatterElements, ScatterND, Compress, OneHot.
 *
 * Kernels move elements of any whole-byte size; the scatter reductions do
 * arithmetic in int64 for integer types and double for floating types. Every
 * index is range-checked (negative ones count from the end) and an index out
 * of range is an error naming the node. */
#include <stdlib.h>
#include <string.h>

#include "ops/op.h"
#include "ops/shapeutil.h"
#include "util.h"

static int check_index_type(const Onnx__NodeProto *n, const Tensor *t)
{
	if (t->dtype != DT_INT64 && t->dtype != DT_INT32)
		return op_error(n, "indices must be int32 or int64, got %s", dtype_name(t->dtype));
	return 0;
}

/* index i of t normalized against size dim; -1 with op_error when out of range */
static int get_index(const Onnx__NodeProto *n, const Tensor *t, int64_t i, int64_t dim, int64_t *out)
{
	int64_t v = elem_get_i64(t->dtype, t->data, i);
	int64_t w = v < 0 ? v + dim : v;
	*out = w;
	if (w < 0 || w >= dim)
		return op_error(n, "index %lld is out of range for a dimension of size %lld",
				(long long)v, (long long)dim);
	return 0;
}

/* ---- Gather ---- */

static int gather_infer(InferCtx *c)
{
	if (infer_need(c, 0) < 0 || infer_need(c, 1) < 0)
		return -1;
	const ValueType *x = c->in[0], *ind = c->in[1];
	ValueType *y = c->out[0];
	int64_t axis, a;
	if (attr_int(c->node, "axis", 0, &axis) < 0)
		return -1;
	if (x->rank < 0 || ind->rank < 0) {
		vt_set_tensor(y, x->elem, -1);
		return 0;
	}
	if (x->rank == 0)
		return op_error(c->node, "data must have rank >= 1");
	if (norm_axis(c->node, axis, x->rank, &a) < 0)
		return -1;
	int r = x->rank + ind->rank - 1;
	if (r > QM_MAX_RANK)
		return op_error(c->node, "result rank %d exceeds the supported %d", r, QM_MAX_RANK);
	vt_set_tensor(y, x->elem, r);
	int k = 0;
	for (int i = 0; i < a; i++)
		y->dims[k++] = x->dims[i];
	for (int i = 0; i < ind->rank; i++)
		y->dims[k++] = ind->dims[i];
	for (int i = (int)a + 1; i < x->rank; i++)
		y->dims[k++] = x->dims[i];
	/* shape data: Shape(x)[i] */
	int64_t n;
	Dim *d;
	if (x->rank == 1 && r <= 1 && ind->value && (d = vt_get_symval(x, &n))) {
		const Tensor *it = ind->value;
		Dim o[QM_MAX_RANK];
		int ok = it->numel <= QM_MAX_RANK && (it->dtype == DT_INT64 || it->dtype == DT_INT32);
		for (int64_t i = 0; ok && i < it->numel; i++) {
			int64_t j = tensor_get_i64(it, i);
			if (j < 0)
				j += n;
			if (j < 0 || j >= n) {
				free(d);
				return op_error(c->node, "index %lld is out of range for a dimension of size %lld",
						(long long)tensor_get_i64(it, i), (long long)n);
			}
			o[i] = d[j];
		}
		if (ok)
			vt_put_symval(y, o, it->numel);
		free(d);
	}
	return 0;
}

static int gather_run(RunCtx *c)
{
	if (run_need(c, 0) < 0 || run_need(c, 1) < 0)
		return -1;
	const Tensor *x = c->in[0], *ind = c->in[1];
	int64_t axis, a, dims[QM_MAX_RANK];
	size_t es;
	if (attr_int(c->node, "axis", 0, &axis) < 0 || check_index_type(c->node, ind) < 0 ||
	    op_elemsize(c->node, c->opset, x->dtype, &es) < 0)
		return -1;
	if (x->rank == 0)
		return op_error(c->node, "data must have rank >= 1");
	if (norm_axis(c->node, axis, x->rank, &a) < 0)
		return -1;
	int r = x->rank + ind->rank - 1, k = 0;
	if (r > QM_MAX_RANK)
		return op_error(c->node, "result rank %d exceeds the supported %d", r, QM_MAX_RANK);
	for (int i = 0; i < a; i++)
		dims[k++] = x->dims[i];
	for (int i = 0; i < ind->rank; i++)
		dims[k++] = ind->dims[i];
	for (int i = (int)a + 1; i < x->rank; i++)
		dims[k++] = x->dims[i];
	if (op_output(c, 0, x->dtype, r, dims) < 0)
		return -1;
	int64_t outer = shape_numel((int)a, x->dims), n = x->dims[a];
	size_t inner = (size_t)shape_numel(x->rank - (int)a - 1, x->dims + a + 1) * es;
	char *o = c->out[0]->data;
	const char *src = x->data;
	for (int64_t i = 0; i < outer; i++)
		for (int64_t j = 0; j < ind->numel; j++) {
			int64_t v;
			if (get_index(c->node, ind, j, n, &v) < 0)
				return -1;
			memcpy(o, src + ((size_t)i * (size_t)n + (size_t)v) * inner, inner);
			o += inner;
		}
	return 0;
}

OPERATOR(ai_onnx, Gather, 1, gather_infer, gather_run)

/* ---- GatherElements ---- */

static int gather_elements_infer(InferCtx *c)
{
	if (infer_need(c, 0) < 0 || infer_need(c, 1) < 0)
		return -1;
	const ValueType *x = c->in[0], *ind = c->in[1];
	if (x->rank >= 0 && ind->rank >= 0 && x->rank != ind->rank)
		return op_error(c->node, "indices have rank %d, data rank %d", ind->rank, x->rank);
	ValueType *y = c->out[0];
	vt_set_tensor(y, x->elem, ind->rank >= 0 ? ind->rank : x->rank);
	for (int i = 0; i < ind->rank; i++)
		y->dims[i] = ind->dims[i];
	return 0;
}

static int gather_elements_run(RunCtx *c)
{
	if (run_need(c, 0) < 0 || run_need(c, 1) < 0)
		return -1;
	const Tensor *x = c->in[0], *ind = c->in[1];
	int64_t axis, a, xs[QM_MAX_RANK], idx[QM_MAX_RANK] = {0};
	size_t es;
	if (attr_int(c->node, "axis", 0, &axis) < 0 || check_index_type(c->node, ind) < 0 ||
	    op_elemsize(c->node, c->opset, x->dtype, &es) < 0)
		return -1;
	if (x->rank != ind->rank || x->rank == 0)
		return op_error(c->node, "indices have rank %d, data rank %d (expected equal, >= 1)",
				ind->rank, x->rank);
	if (norm_axis(c->node, axis, x->rank, &a) < 0)
		return -1;
	if (op_output(c, 0, x->dtype, ind->rank, ind->dims) < 0)
		return -1;
	if (ind->numel == 0)
		return 0;
	dims_strides(x->rank, x->dims, xs);
	char *o = c->out[0]->data;
	int64_t i = 0;
	do {
		int64_t v, off = 0;
		if (get_index(c->node, ind, i, x->dims[a], &v) < 0)
			return -1;
		for (int k = 0; k < x->rank; k++) {
			int64_t p = k == a ? v : idx[k];
			if (p >= x->dims[k])
				return op_error(c->node, "indices shape exceeds data on axis %d", k);
			off += p * xs[k];
		}
		elem_copy(o + (size_t)i * es, (const char *)x->data + (size_t)off * es, es);
		i++;
	} while (index_next(idx, ind->dims, ind->rank) >= 0);
	return 0;
}

OPERATOR(ai_onnx, GatherElements, 11, gather_elements_infer, gather_elements_run)

/* ---- GatherND ---- */

static int gather_nd_infer(InferCtx *c)
{
	if (infer_need(c, 0) < 0 || infer_need(c, 1) < 0)
		return -1;
	const ValueType *x = c->in[0], *ind = c->in[1];
	ValueType *y = c->out[0];
	int64_t b;
	if (attr_int(c->node, "batch_dims", 0, &b) < 0)
		return -1;
	if (x->rank < 0 || ind->rank < 0 || ind->rank < 1 || ind->dims[ind->rank - 1].v < 0) {
		vt_set_tensor(y, x->elem, -1);
		return 0;
	}
	int64_t k = ind->dims[ind->rank - 1].v;
	if (b < 0 || b >= ind->rank || b >= x->rank || k > x->rank - b)
		return op_error(c->node, "batch_dims %lld and index depth %lld do not fit data rank %d",
				(long long)b, (long long)k, x->rank);
	int r = ind->rank - 1 + x->rank - (int)b - (int)k;
	if (r > QM_MAX_RANK)
		return op_error(c->node, "result rank %d exceeds the supported %d", r, QM_MAX_RANK);
	vt_set_tensor(y, x->elem, r);
	int o = 0;
	for (int i = 0; i < ind->rank - 1; i++)
		y->dims[o++] = ind->dims[i];
	for (int i = (int)(b + k); i < x->rank; i++)
		y->dims[o++] = x->dims[i];
	return 0;
}

static int gather_nd_run(RunCtx *c)
{
	if (run_need(c, 0) < 0 || run_need(c, 1) < 0)
		return -1;
	const Tensor *x = c->in[0], *ind = c->in[1];
	int64_t b, dims[QM_MAX_RANK], xs[QM_MAX_RANK];
	size_t es;
	if (attr_int(c->node, "batch_dims", 0, &b) < 0 || check_index_type(c->node, ind) < 0 ||
	    op_elemsize(c->node, c->opset, x->dtype, &es) < 0)
		return -1;
	if (ind->rank < 1)
		return op_error(c->node, "indices must have rank >= 1");
	int64_t k = ind->dims[ind->rank - 1];
	if (b < 0 || b >= ind->rank || b >= x->rank || k > x->rank - b)
		return op_error(c->node, "batch_dims %lld and index depth %lld do not fit data rank %d",
				(long long)b, (long long)k, x->rank);
	for (int i = 0; i < b; i++)
		if (ind->dims[i] != x->dims[i])
			return op_error(c->node, "batch dimension %d differs: %lld in indices, %lld in data",
					i, (long long)ind->dims[i], (long long)x->dims[i]);
	int r = ind->rank - 1 + x->rank - (int)b - (int)k, o = 0;
	if (r > QM_MAX_RANK)
		return op_error(c->node, "result rank %d exceeds the supported %d", r, QM_MAX_RANK);
	for (int i = 0; i < ind->rank - 1; i++)
		dims[o++] = ind->dims[i];
	for (int i = (int)(b + k); i < x->rank; i++)
		dims[o++] = x->dims[i];
	if (op_output(c, 0, x->dtype, r, dims) < 0)
		return -1;
	dims_strides(x->rank, x->dims, xs);
	int64_t nb = shape_numel((int)b, x->dims);
	int64_t per = shape_numel(ind->rank - 1 - (int)b, ind->dims + b);
	size_t slice = (size_t)shape_numel(x->rank - (int)(b + k), x->dims + b + k) * es;
	int64_t bstride = b ? xs[b - 1] : 0;
	char *out = c->out[0]->data;
	for (int64_t bi = 0; bi < nb; bi++)
		for (int64_t j = 0; j < per; j++) {
			int64_t off = bi * bstride, t = (bi * per + j) * k;
			for (int64_t q = 0; q < k; q++) {
				int64_t v;
				if (get_index(c->node, ind, t + q, x->dims[b + q], &v) < 0)
					return -1;
				off += v * xs[b + q];
			}
			memcpy(out, (const char *)x->data + (size_t)off * es, slice);
			out += slice;
		}
	return 0;
}

OPERATOR(ai_onnx, GatherND, 11, gather_nd_infer, gather_nd_run)

/* ---- scatter ---- */

enum { RED_NONE, RED_ADD, RED_MUL, RED_MAX, RED_MIN };

static int reduction(const Onnx__NodeProto *n, int64_t opset, int *red)
{
	char buf[16];
	if (opset < 16) {
		*red = RED_NONE;
		return 0;
	}
	if (attr_str(n, "reduction", "none", buf, sizeof buf) < 0)
		return -1;
	if (!strcmp(buf, "none"))
		*red = RED_NONE;
	else if (!strcmp(buf, "add"))
		*red = RED_ADD;
	else if (!strcmp(buf, "mul"))
		*red = RED_MUL;
	else if (opset >= 18 && !strcmp(buf, "max"))
		*red = RED_MAX;
	else if (opset >= 18 && !strcmp(buf, "min"))
		*red = RED_MIN;
	else
		return op_error(n, "unknown reduction '%s'", buf);
	return 0;
}

/* y[dst] = reduce(y[dst], u[src]) for one element */
static void scatter_one(int red, int dt, size_t es, char *y, int64_t dst, const char *u, int64_t src)
{
	if (red == RED_NONE) {
		elem_copy(y + (size_t)dst * es, u + (size_t)src * es, es);
	} else if (dt_float(dt)) {
		double a = elem_get_f64(dt, y, dst), b = elem_get_f64(dt, u, src);
		double r = red == RED_ADD ? a + b : red == RED_MUL ? a * b :
			   red == RED_MAX ? (a > b ? a : b) : (a < b ? a : b);
		elem_put_f64(dt, y, dst, r);
	} else {
		int64_t a = elem_get_i64(dt, y, dst), b = elem_get_i64(dt, u, src);
		int64_t r = red == RED_ADD ? (int64_t)((uint64_t)a + (uint64_t)b) :
			    red == RED_MUL ? (int64_t)((uint64_t)a * (uint64_t)b) :
			    red == RED_MAX ? (a > b ? a : b) : (a < b ? a : b);
		if (dt == DT_BOOL && red == RED_ADD)
			r = a || b;
		elem_put_i64(dt, y, dst, r);
	}
}

static int scatter_type(RunCtx *c, int red, int dt, size_t *es)
{
	if (op_elemsize(c->node, c->opset, dt, es) < 0)
		return -1;
	if (red != RED_NONE && (!dt_numeric(dt) || dt == DT_UINT64))
		return op_unsupported_type(c->node, c->opset, dt);
	return 0;
}

static int scatter_elements_run(RunCtx *c)
{
	for (size_t i = 0; i < 3; i++)
		if (run_need(c, i) < 0)
			return -1;
	const Tensor *x = c->in[0], *ind = c->in[1], *u = c->in[2];
	int64_t axis, a, xs[QM_MAX_RANK], idx[QM_MAX_RANK] = {0};
	int red;
	size_t es;
	if (attr_int(c->node, "axis", 0, &axis) < 0 || reduction(c->node, c->opset, &red) < 0 ||
	    check_index_type(c->node, ind) < 0 || scatter_type(c, red, x->dtype, &es) < 0)
		return -1;
	if (x->rank != ind->rank || x->rank == 0)
		return op_error(c->node, "indices have rank %d, data rank %d (expected equal, >= 1)",
				ind->rank, x->rank);
	if (u->dtype != x->dtype || u->rank != ind->rank ||
	    memcmp(u->dims, ind->dims, sizeof u->dims[0] * (size_t)u->rank))
		return op_error(c->node, "updates must have the type of data and the shape of indices");
	if (norm_axis(c->node, axis, x->rank, &a) < 0)
		return -1;
	if (op_output(c, 0, x->dtype, x->rank, x->dims) < 0)
		return -1;
	Tensor *y = c->out[0];
	if (x->nbytes)
		memcpy(y->data, x->data, x->nbytes);
	if (ind->numel == 0)
		return 0;
	dims_strides(x->rank, x->dims, xs);
	int64_t i = 0;
	do {
		int64_t v, off = 0;
		if (get_index(c->node, ind, i, x->dims[a], &v) < 0)
			return -1;
		for (int k = 0; k < x->rank; k++) {
			int64_t p = k == a ? v : idx[k];
			if (p >= x->dims[k])
				return op_error(c->node, "indices shape exceeds data on axis %d", k);
			off += p * xs[k];
		}
		scatter_one(red, x->dtype, es, y->data, off, u->data, i);
		i++;
	} while (index_next(idx, ind->dims, ind->rank) >= 0);
	return 0;
}

static int scatter_infer(InferCtx *c)
{
	for (size_t i = 0; i < 3; i++)
		if (infer_need(c, i) < 0)
			return -1;
	return infer_same_as_input(c, 0, 0);
}

OPERATOR(ai_onnx, Scatter, 9, scatter_infer, scatter_elements_run)
OPERATOR(ai_onnx, ScatterElements, 11, scatter_infer, scatter_elements_run)

static int scatter_nd_run(RunCtx *c)
{
	for (size_t i = 0; i < 3; i++)
		if (run_need(c, i) < 0)
			return -1;
	const Tensor *x = c->in[0], *ind = c->in[1], *u = c->in[2];
	int64_t xs[QM_MAX_RANK];
	int red;
	size_t es;
	if (reduction(c->node, c->opset, &red) < 0 || check_index_type(c->node, ind) < 0 ||
	    scatter_type(c, red, x->dtype, &es) < 0)
		return -1;
	if (ind->rank < 1)
		return op_error(c->node, "indices must have rank >= 1");
	int64_t k = ind->dims[ind->rank - 1];
	if (k > x->rank)
		return op_error(c->node, "index depth %lld exceeds data rank %d", (long long)k, x->rank);
	/* updates: indices.shape[:-1] + data.shape[k:] */
	int ur = ind->rank - 1 + x->rank - (int)k;
	int ok = u->dtype == x->dtype && u->rank == ur;
	for (int i = 0; ok && i < ind->rank - 1; i++)
		ok = u->dims[i] == ind->dims[i];
	for (int i = 0; ok && i < x->rank - k; i++)
		ok = u->dims[ind->rank - 1 + i] == x->dims[k + i];
	if (!ok)
		return op_error(c->node, "updates must have the type of data and shape indices.shape[:-1] + data.shape[%lld:]",
				(long long)k);
	if (op_output(c, 0, x->dtype, x->rank, x->dims) < 0)
		return -1;
	Tensor *y = c->out[0];
	if (x->nbytes)
		memcpy(y->data, x->data, x->nbytes);
	dims_strides(x->rank, x->dims, xs);
	int64_t n = shape_numel(ind->rank - 1, ind->dims);
	int64_t slice = shape_numel(x->rank - (int)k, x->dims + k);
	for (int64_t j = 0; j < n; j++) {
		int64_t off = 0;
		for (int64_t q = 0; q < k; q++) {
			int64_t v;
			if (get_index(c->node, ind, j * k + q, x->dims[q], &v) < 0)
				return -1;
			off += v * xs[q];
		}
		if (red == RED_NONE)
			memcpy((char *)y->data + (size_t)off * es, (const char *)u->data + (size_t)(j * slice) * es,
			       (size_t)slice * es);
		else
			for (int64_t e = 0; e < slice; e++)
				scatter_one(red, x->dtype, es, y->data, off + e, u->data, j * slice + e);
	}
	return 0;
}

OPERATOR(ai_onnx, ScatterND, 11, scatter_infer, scatter_nd_run)

/* ---- Compress ---- */

static int compress_infer(InferCtx *c)
{
	if (infer_need(c, 0) < 0 || infer_need(c, 1) < 0)
		return -1;
	const ValueType *x = c->in[0], *cond = c->in[1];
	ValueType *y = c->out[0];
	int64_t axis;
	int has_axis = node_attr(c->node, "axis") != NULL;
	if (attr_int(c->node, "axis", 0, &axis) < 0)
		return -1;
	Dim cnt = infer_fresh_dim(c);
	if (cond->value) {
		int64_t n = 0;
		for (int64_t i = 0; i < cond->value->numel; i++)
			n += tensor_get_i64(cond->value, i) != 0;
		cnt = dim_known(n);
	}
	if (!has_axis) {
		vt_set_tensor(y, x->elem, 1);
		y->dims[0] = cnt;
		return 0;
	}
	vt_set_tensor(y, x->elem, x->rank);
	if (x->rank < 0)
		return 0;
	int64_t a;
	if (norm_axis(c->node, axis, x->rank, &a) < 0)
		return -1;
	for (int i = 0; i < x->rank; i++)
		y->dims[i] = i == a ? cnt : x->dims[i];
	return 0;
}

static int compress_run(RunCtx *c)
{
	if (run_need(c, 0) < 0 || run_need(c, 1) < 0)
		return -1;
	const Tensor *x = c->in[0], *cond = c->in[1];
	int64_t axis, a, dims[QM_MAX_RANK];
	int has_axis = node_attr(c->node, "axis") != NULL;
	size_t es;
	if (attr_int(c->node, "axis", 0, &axis) < 0 || op_elemsize(c->node, c->opset, x->dtype, &es) < 0)
		return -1;
	if (cond->dtype != DT_BOOL || cond->rank != 1)
		return op_error(c->node, "condition must be a 1-D bool tensor");
	int64_t outer, n, inner;
	if (has_axis) {
		if (norm_axis(c->node, axis, x->rank, &a) < 0)
			return -1;
		outer = shape_numel((int)a, x->dims);
		n = x->dims[a];
		inner = shape_numel(x->rank - (int)a - 1, x->dims + a + 1);
	} else {
		a = 0;
		outer = 1;
		n = x->numel;
		inner = 1;
	}
	if (cond->numel > n)
		return op_error(c->node, "condition has %lld entries for an axis of %lld",
				(long long)cond->numel, (long long)n);
	const uint8_t *cd = cond->data;
	int64_t cnt = 0;
	for (int64_t i = 0; i < cond->numel; i++)
		cnt += cd[i] != 0;
	if (has_axis) {
		memcpy(dims, x->dims, sizeof dims[0] * (size_t)x->rank);
		dims[a] = cnt;
		if (op_output(c, 0, x->dtype, x->rank, dims) < 0)
			return -1;
	} else if (op_output(c, 0, x->dtype, 1, &cnt) < 0) {
		return -1;
	}
	char *o = c->out[0]->data;
	size_t row = (size_t)inner * es;
	for (int64_t i = 0; i < outer; i++)
		for (int64_t j = 0; j < cond->numel; j++)
			if (cd[j]) {
				memcpy(o, (const char *)x->data + ((size_t)(i * n + j)) * row, row);
				o += row;
			}
	return 0;
}

OPERATOR(ai_onnx, Compress, 9, compress_infer, compress_run)

/* ---- OneHot ---- */

static int onehot_infer(InferCtx *c)
{
	for (size_t i = 0; i < 3; i++)
		if (infer_need(c, i) < 0)
			return -1;
	const ValueType *ind = c->in[0], *depth = c->in[1], *vals = c->in[2];
	ValueType *y = c->out[0];
	int64_t axis, a;
	if (attr_int(c->node, "axis", -1, &axis) < 0)
		return -1;
	if (ind->rank < 0) {
		vt_set_tensor(y, vals->elem, -1);
		return 0;
	}
	int r = ind->rank + 1;
	if (r > QM_MAX_RANK)
		return op_error(c->node, "result rank %d exceeds the supported %d", r, QM_MAX_RANK);
	if (norm_axis(c->node, axis, r, &a) < 0)
		return -1;
	vt_set_tensor(y, vals->elem, r);
	for (int i = 0, k = 0; i < r; i++)
		if (i != a)
			y->dims[i] = ind->dims[k++];
	if (depth->value && depth->value->numel == 1) {
		int64_t d = elem_get_i64(depth->value->dtype, depth->value->data, 0);
		if (d < 1)
			return op_error(c->node, "depth must be positive, is %lld", (long long)d);
		y->dims[a] = dim_known(d);
	}
	return 0;
}

static int onehot_run(RunCtx *c)
{
	for (size_t i = 0; i < 3; i++)
		if (run_need(c, i) < 0)
			return -1;
	const Tensor *ind = c->in[0], *depth = c->in[1], *vals = c->in[2];
	int64_t axis, a, dims[QM_MAX_RANK];
	size_t es;
	if (attr_int(c->node, "axis", -1, &axis) < 0 || op_elemsize(c->node, c->opset, vals->dtype, &es) < 0)
		return -1;
	if (!dt_numeric(ind->dtype) || !dt_numeric(depth->dtype))
		return op_unsupported_type(c->node, c->opset, dt_numeric(ind->dtype) ? depth->dtype : ind->dtype);
	if (depth->numel != 1)
		return op_error(c->node, "depth must hold one element");
	if (vals->numel != 2)
		return op_error(c->node, "values must hold two elements [off, on]");
	int r = ind->rank + 1;
	if (r > QM_MAX_RANK)
		return op_error(c->node, "result rank %d exceeds the supported %d", r, QM_MAX_RANK);
	if (norm_axis(c->node, axis, r, &a) < 0)
		return -1;
	int64_t d = elem_get_i64(depth->dtype, depth->data, 0);
	if (d < 1)
		return op_error(c->node, "depth must be positive, is %lld", (long long)d);
	for (int i = 0, k = 0; i < r; i++)
		dims[i] = i == a ? d : ind->dims[k++];
	if (op_output(c, 0, vals->dtype, r, dims) < 0)
		return -1;
	char *o = c->out[0]->data;
	const char *off = vals->data, *on = (const char *)vals->data + es;
	for (int64_t i = 0; i < c->out[0]->numel; i++)
		elem_copy(o + (size_t)i * es, off, es);
	int64_t outer = shape_numel((int)a, dims), inner = shape_numel(r - (int)a - 1, dims + a + 1);
	for (int64_t i = 0; i < outer; i++)
		for (int64_t j = 0; j < inner; j++) {
			int64_t v = elem_get_i64(ind->dtype, ind->data, i * inner + j);
			if (v < 0)
				v += d;
			if (v < 0 || v >= d)
				continue;
			elem_copy(o + (size_t)((i * d + v) * inner + j) * es, on, es);
		}
	return 0;
}

OPERATOR(ai_onnx, OneHot, 9, onehot_infer, onehot_run)
