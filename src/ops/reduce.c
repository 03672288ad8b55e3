/* reduce.c — reductions: ReduceSum, ReduceMean, ReduceMax, ReduceMin,
 * ReduceProd, ReduceL1, ReduceL2, ReduceLogSum, ReduceLogSumExp,
 * ReduceSumSquare; ArgMax, ArgMin; CumSum.
 *
 * Reductions walk the input once in memory order with a BcastIter whose one
 * "input" is the accumulator in keepdims shape (stride 0 along reduced
 * axes): a row along a reduced axis folds into one accumulator, a row along a
 * kept axis folds elementwise. Floating-point inputs accumulate in double,
 * signed integers in wrapping int64, unsigned in uint64.
 *
 * Axes come from the attribute 'axes' before ReduceSum-13 / Reduce*-18 and
 * from the optional second input since; an empty list reduces everything
 * unless noop_with_empty_axes is set. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ops/bcast.h"
#include "ops/elem.h"
#include "ops/op.h"
#include "ops/shapeutil.h"
#include "util.h"

enum { R_SUM, R_MEAN, R_MAX, R_MIN, R_PROD, R_L1, R_L2, R_LOGSUM, R_LOGSUMEXP, R_SUMSQ };

/* the opset from which axes is an input */
static int64_t axes_input_since(int op)
{
	return op == R_SUM ? 13 : 18;
}

typedef struct RedSpec {
	int noop;                  /* identity (empty axes, noop_with_empty_axes) */
	int keep;
	int rank;                  /* input rank */
	uint8_t red[QM_MAX_RANK];  /* axis i is reduced */
} RedSpec;

/* Fill s from the axes list for an input of rank r. */
static int red_spec(const Onnx__NodeProto *n, const int64_t *axes, int64_t naxes, int r,
		    int keep, int noop, RedSpec *s)
{
	memset(s, 0, sizeof *s);
	s->keep = keep;
	s->rank = r;
	if (naxes == 0) {
		s->noop = noop;
		for (int i = 0; i < r && !noop; i++)
			s->red[i] = 1;
		return 0;
	}
	for (int64_t k = 0; k < naxes; k++) {
		int64_t a;
		if (norm_axis(n, axes[k], r, &a) < 0)
			return -1;
		s->red[a] = 1;
	}
	return 0;
}

/* Read keepdims, noop_with_empty_axes and the axes (malloc'd into *axes, or
 * NULL); *known = 0 when the axes input exists but its value is not given
 * (inference only: ax is NULL then). */
static int red_attrs(const Onnx__NodeProto *n, int64_t opset, int op, const Tensor *ax,
		     int has_ax_input, int64_t **axes, int64_t *naxes, int *keep, int *noop)
{
	int64_t k, e;
	*axes = NULL;
	*naxes = 0;
	if (attr_int(n, "keepdims", 1, &k) < 0 ||
	    attr_int(n, "noop_with_empty_axes", 0, &e) < 0)
		return -1;
	*keep = k != 0;
	*noop = e != 0;
	if (opset >= axes_input_since(op)) {
		if (has_ax_input && ax)
			return op_tensor_ints(n, ax, "input axes", axes, naxes);
		return 0;
	}
	const int64_t *v;
	size_t len;
	if (attr_ints(n, "axes", &v, &len) < 0)
		return -1;
	if (len) {
		*axes = xmalloc(sizeof **axes * len);
		memcpy(*axes, v, sizeof **axes * len);
		*naxes = (int64_t)len;
	}
	return 0;
}

/* Walk x into acc (keepdims shape rdims), binding v (element), s (its
 * accumulator) and m (the LogSumExp shift of that accumulator). */
#define RED_WALK(T, A, expr) { \
	const T *px = x->data; \
	A *acc = accv; \
	const double *mx = mxv; \
	BcastIter it; \
	const int64_t *rd_ = rdims; \
	bcast_begin_dims(&it, x->rank, x->dims, 1, &x->rank, &rd_); \
	while (bcast_next(&it)) { \
		const T *row = px + it.out; \
		A *pa = acc + it.off[0]; \
		const double *pm = mx + it.off[0]; \
		if (it.step[0]) { \
			for (int64_t i = 0; i < it.n; i++) { \
				A s = pa[i]; \
				T v = row[i]; \
				double m = pm[i]; \
				(void)m; \
				pa[i] = (A)(expr); \
			} \
		} else { \
			A s = pa[0]; \
			double m = pm[0]; \
			(void)m; \
			for (int64_t i = 0; i < it.n; i++) { \
				T v = row[i]; \
				s = (A)(expr); \
			} \
			pa[0] = s; \
		} \
	} \
}
#define RED_F(expr) \
	case DT_FLOAT: RED_WALK(float, double, expr) break; \
	case DT_DOUBLE: RED_WALK(double, double, expr) break;
#define RED_S(expr) \
	case DT_INT8: RED_WALK(int8_t, int64_t, expr) break; \
	case DT_INT16: RED_WALK(int16_t, int64_t, expr) break; \
	case DT_INT32: RED_WALK(int32_t, int64_t, expr) break; \
	case DT_INT64: RED_WALK(int64_t, int64_t, expr) break;
#define RED_U(expr) \
	case DT_UINT8: RED_WALK(uint8_t, uint64_t, expr) break; \
	case DT_UINT16: RED_WALK(uint16_t, uint64_t, expr) break; \
	case DT_UINT32: RED_WALK(uint32_t, uint64_t, expr) break; \
	case DT_UINT64: RED_WALK(uint64_t, uint64_t, expr) break;
/* integer inputs accumulated in double (L2, LogSum, LogSumExp) */
#define RED_ID(expr) \
	case DT_INT8: RED_WALK(int8_t, double, expr) break; \
	case DT_INT16: RED_WALK(int16_t, double, expr) break; \
	case DT_INT32: RED_WALK(int32_t, double, expr) break; \
	case DT_INT64: RED_WALK(int64_t, double, expr) break; \
	case DT_UINT8: RED_WALK(uint8_t, double, expr) break; \
	case DT_UINT16: RED_WALK(uint16_t, double, expr) break; \
	case DT_UINT32: RED_WALK(uint32_t, double, expr) break; \
	case DT_UINT64: RED_WALK(uint64_t, double, expr) break;

#define WRAPS(op) (int64_t)((uint64_t)s op (uint64_t)v)

static int is_float(int dt)
{
	return dt == DT_FLOAT || dt == DT_DOUBLE;
}

static int is_sint(int dt)
{
	return dt == DT_INT8 || dt == DT_INT16 || dt == DT_INT32 || dt == DT_INT64;
}

static int is_uint(int dt)
{
	return dt == DT_UINT8 || dt == DT_UINT16 || dt == DT_UINT32 || dt == DT_UINT64;
}

/* accumulators in double for this op and input type? */
static int acc_double(int op, int dt)
{
	return is_float(dt) || op == R_L2 || op == R_LOGSUM || op == R_LOGSUMEXP;
}

/* one pass of op over x into accv; mxv: LogSumExp shifts (or any valid buffer) */
static int red_walk(int op, const Tensor *x, const int64_t *rdims, void *accv, const double *mxv)
{
	switch (op) {
	case R_SUM: case R_MEAN:
		switch (x->dtype) { RED_F(s + v) RED_S(WRAPS(+)) RED_U(s + v) default: return -1; }
		break;
	case R_SUMSQ:
		switch (x->dtype) {
		RED_F(s + (double)v * v)
		RED_S((int64_t)((uint64_t)s + (uint64_t)v * (uint64_t)v))
		RED_U(s + (uint64_t)v * v)
		default: return -1;
		}
		break;
	case R_L1:
		switch (x->dtype) {
		RED_F(s + fabs((double)v))
		RED_S((int64_t)((uint64_t)s + (v < 0 ? 0 - (uint64_t)v : (uint64_t)v)))
		RED_U(s + v)
		default: return -1;
		}
		break;
	case R_PROD:
		switch (x->dtype) { RED_F(s * v) RED_S(WRAPS(*)) RED_U(s * v) default: return -1; }
		break;
	case R_MAX:
		switch (x->dtype) {
		RED_F(isnan(v) || v > s ? v : s) RED_S(v > s ? v : s) RED_U(v > s ? v : s)
		default: return -1;
		}
		break;
	case R_MIN:
		switch (x->dtype) {
		RED_F(isnan(v) || v < s ? v : s) RED_S(v < s ? v : s) RED_U(v < s ? v : s)
		default: return -1;
		}
		break;
	case R_L2:
		switch (x->dtype) { RED_F(s + (double)v * v) RED_ID(s + (double)v * v) default: return -1; }
		break;
	case R_LOGSUM:
		switch (x->dtype) { RED_F(s + v) RED_ID(s + (double)v) default: return -1; }
		break;
	case R_LOGSUMEXP:
		switch (x->dtype) { RED_F(s + exp(v - m)) RED_ID(s + exp((double)v - m)) default: return -1; }
		break;
	}
	return 0;
}

/* initial accumulator values */
static void red_init(int op, int dt, void *accv, int64_t n)
{
	if (acc_double(op, dt)) {
		double *a = accv, v = op == R_PROD ? 1 : op == R_MAX ? -INFINITY :
				       op == R_MIN ? INFINITY : 0;
		for (int64_t i = 0; i < n; i++)
			a[i] = v;
	} else if (is_sint(dt)) {
		int64_t *a = accv, v = op == R_PROD ? 1 : op == R_MAX ? INT64_MIN :
				       op == R_MIN ? INT64_MAX : 0;
		for (int64_t i = 0; i < n; i++)
			a[i] = v;
	} else {
		uint64_t *a = accv, v = op == R_PROD ? 1 : op == R_MIN ? UINT64_MAX : 0;
		for (int64_t i = 0; i < n; i++)
			a[i] = v;
	}
}

static void store_i(Tensor *y, int64_t i, int64_t v)
{
	switch (y->dtype) {
	case DT_INT8: ((int8_t *)y->data)[i] = (int8_t)v; break;
	case DT_INT16: ((int16_t *)y->data)[i] = (int16_t)v; break;
	case DT_INT32: ((int32_t *)y->data)[i] = (int32_t)v; break;
	case DT_INT64: ((int64_t *)y->data)[i] = v; break;
	case DT_UINT8: ((uint8_t *)y->data)[i] = (uint8_t)v; break;
	case DT_UINT16: ((uint16_t *)y->data)[i] = (uint16_t)v; break;
	case DT_UINT32: ((uint32_t *)y->data)[i] = (uint32_t)v; break;
	case DT_UINT64: ((uint64_t *)y->data)[i] = (uint64_t)v; break;
	}
}

/* accumulators (n of them, count elements each) to the output */
static void red_store(int op, const void *accv, const double *mx, int64_t n, int64_t count, Tensor *y)
{
	if (acc_double(op, y->dtype)) {
		const double *a = accv;
		for (int64_t i = 0; i < n; i++) {
			double v = a[i];
			switch (op) {
			case R_MEAN: v = v / (double)count; break;
			case R_L2: v = sqrt(v); break;
			case R_LOGSUM: v = log(v); break;
			case R_LOGSUMEXP: v = log(v) + mx[i]; break;
			}
			if (y->dtype == DT_FLOAT)
				((float *)y->data)[i] = (float)v;
			else if (y->dtype == DT_DOUBLE)
				((double *)y->data)[i] = v;
			else if (y->dtype == DT_UINT64)
				store_i(y, i, (int64_t)elem_f2u64(v));
			else
				store_i(y, i, elem_f2i64(v));
		}
		return;
	}
	int64_t cnt = count ? count : 1;
	if (is_sint(y->dtype)) {
		const int64_t *a = accv;
		for (int64_t i = 0; i < n; i++)
			store_i(y, i, op == R_MEAN ? a[i] / cnt : a[i]);
	} else {
		const uint64_t *a = accv;
		for (int64_t i = 0; i < n; i++)
			store_i(y, i, (int64_t)(op == R_MEAN ? a[i] / (uint64_t)cnt : a[i]));
	}
}

static int run_reduce(RunCtx *c, int op)
{
	ElemIO e;
	RedSpec s;
	int64_t *axes = NULL, naxes, count = 1;
	int keep, noop, rc = -1;
	int64_t rdims[QM_MAX_RANK], odims[QM_MAX_RANK];
	int orank = 0;
	Tensor *y;
	void *acc = NULL;
	double *mx = NULL;

	if (c->nin < 1 || !c->in[0])
		return op_error(c->node, "missing input 0");
	int dt = c->in[0]->dtype, nt = elem_native(dt);
	/* bool max/min (any/all) run on the bytes as uint8 */
	int as_u8 = dt == DT_BOOL && (op == R_MAX || op == R_MIN);
	if (!is_float(nt) && !is_sint(nt) && !is_uint(nt) && !as_u8)
		return op_unsupported_type(c->node, c->opset, dt);
	if (red_attrs(c->node, c->opset, op, c->nin > 1 ? c->in[1] : NULL, c->nin > 1, &axes,
		      &naxes, &keep, &noop) < 0)
		return -1;
	if (eio_begin(&e, c) < 0) {
		free(axes);
		return -1;
	}
	Tensor xv = *e.in[0], yv;
	if (as_u8)
		xv.dtype = DT_UINT8;
	const Tensor *x = &xv;
	if (red_spec(c->node, axes, naxes, x->rank, keep, noop, &s) < 0)
		goto out;
	if (s.noop) {
		if (eio_output(&e, 0, dt, x->rank, x->dims, &y) < 0)
			goto out;
		memcpy(y->data, x->data, x->nbytes);
		rc = 0;
		goto out;
	}
	for (int i = 0; i < x->rank; i++) {
		rdims[i] = s.red[i] ? 1 : x->dims[i];
		if (s.red[i])
			count *= x->dims[i];
		if (!s.red[i] || keep)
			odims[orank++] = rdims[i];
	}
	if (eio_output(&e, 0, dt, orank, odims, &y) < 0)
		goto out;
	int64_t n = y->numel;
	acc = xcalloc((size_t)(n ? n : 1), 8);
	mx = xcalloc((size_t)(n ? n : 1), sizeof *mx);
	if (op == R_LOGSUMEXP && is_float(x->dtype)) {
		red_init(R_MAX, DT_DOUBLE, mx, n);
		if (red_walk(R_MAX, x, rdims, mx, mx) < 0) {
			rc = op_unsupported_type(c->node, c->opset, dt);
			goto out;
		}
		for (int64_t i = 0; i < n; i++)
			if (isinf(mx[i]))
				mx[i] = 0;
	}
	red_init(op, x->dtype, acc, n);
	if (red_walk(op, x, rdims, acc, mx) < 0) {
		rc = op_unsupported_type(c->node, c->opset, dt);
		goto out;
	}
	yv = *y;
	if (as_u8)
		yv.dtype = DT_UINT8;
	red_store(op, acc, mx, n, count, &yv);
	if (as_u8)  /* the identity of an empty min is 255: true */
		for (int64_t i = 0; i < n; i++)
			((uint8_t *)y->data)[i] = ((uint8_t *)y->data)[i] != 0;
	rc = 0;
out:
	free(acc);
	free(mx);
	free(axes);
	return eio_end(&e, rc);
}

static int reduce_infer(InferCtx *c, int op)
{
	int64_t *axes = NULL, naxes;
	int keep, noop;
	const ValueType *x = c->in[0], *ax = c->nin > 1 ? c->in[1] : NULL;
	ValueType *y = c->out[0];
	RedSpec s;
	if (!x)
		return op_error(c->node, "missing input 0");
	int axes_input = c->opset >= axes_input_since(op) && ax;
	if (red_attrs(c->node, c->opset, op, axes_input ? ax->value : NULL, axes_input, &axes,
		      &naxes, &keep, &noop) < 0)
		return -1;
	if (axes_input && !ax->value && ax->rank == 1 && ax->dims[0].v == 0) {
		axes_input = 0;  /* known to be empty */
		naxes = 0;
	}
	if (axes_input && !ax->value) {
		/* axes computed at run time */
		free(axes);
		if (keep)
			vt_set_tensor(y, x->elem, x->rank);
		else if (x->rank >= 0 && ax->rank == 1 && ax->dims[0].v >= 0 && !noop &&
			 ax->dims[0].v > 0 && ax->dims[0].v <= x->rank)
			vt_set_tensor(y, x->elem, x->rank - (int)ax->dims[0].v);
		else
			vt_set_tensor(y, x->elem, -1);
		return 0;
	}
	if (x->rank < 0) {
		free(axes);
		vt_set_tensor(y, x->elem, naxes == 0 && !noop && !keep ? 0 : -1);
		return 0;
	}
	int rc = red_spec(c->node, axes, naxes, x->rank, keep, noop, &s);
	free(axes);
	if (rc < 0)
		return -1;
	if (s.noop)
		return infer_same_as_input(c, 0, 0);
	int r = 0;
	for (int i = 0; i < x->rank; i++)
		if (!s.red[i] || keep)
			r++;
	vt_set_tensor(y, x->elem, r);
	r = 0;
	for (int i = 0; i < x->rank; i++) {
		if (s.red[i] && keep)
			y->dims[r++] = (Dim){1, NULL};
		else if (!s.red[i])
			y->dims[r++] = x->dims[i];
	}
	return 0;
}

#define REDUCE(name, op) \
static int name##_run(RunCtx *c) { return run_reduce(c, op); } \
static int name##_infer(InferCtx *c) { return reduce_infer(c, op); }
REDUCE(sum, R_SUM)
REDUCE(mean, R_MEAN)
REDUCE(max, R_MAX)
REDUCE(min, R_MIN)
REDUCE(prod, R_PROD)
REDUCE(l1, R_L1)
REDUCE(l2, R_L2)
REDUCE(logsum, R_LOGSUM)
REDUCE(logsumexp, R_LOGSUMEXP)
REDUCE(sumsq, R_SUMSQ)

/* ---- ArgMax / ArgMin ---- */

#define ARG_CASE(DT, T) case DT: { \
	const T *px = x->data; \
	T *best = xmalloc(sizeof *best * (size_t)inner); \
	for (int64_t o = 0; o < outer; o++) { \
		const T *base = px + o * d * inner; \
		int64_t *py = (int64_t *)y->data + o * inner; \
		for (int64_t k = 0; k < inner; k++) { \
			best[k] = base[k]; \
			py[k] = 0; \
		} \
		for (int64_t j = 1; j < d; j++) { \
			const T *r = base + j * inner; \
			for (int64_t k = 0; k < inner; k++) { \
				T v = r[k]; \
				int take = ismax ? (last ? v >= best[k] : v > best[k]) \
						 : (last ? v <= best[k] : v < best[k]); \
				if (take) { \
					best[k] = v; \
					py[k] = j; \
				} \
			} \
		} \
	} \
	free(best); \
} break;

static int run_arg(RunCtx *c, int ismax)
{
	ElemIO e;
	int64_t axis, keep, last;
	if (c->nin < 1 || !c->in[0])
		return op_error(c->node, "missing input 0");
	int dt = c->in[0]->dtype;
	if (attr_int(c->node, "axis", 0, &axis) < 0 || attr_int(c->node, "keepdims", 1, &keep) < 0 ||
	    attr_int(c->node, "select_last_index", 0, &last) < 0)
		return -1;
	if (eio_begin(&e, c) < 0)
		return -1;
	const Tensor *x = e.in[0];
	int64_t a;
	if (norm_axis(c->node, axis, x->rank, &a) < 0)
		return eio_end(&e, -1);
	int64_t outer = 1, inner = 1, d = x->dims[a];
	int64_t odims[QM_MAX_RANK];
	int orank = 0;
	for (int i = 0; i < x->rank; i++) {
		if (i < a)
			outer *= x->dims[i];
		else if (i > a)
			inner *= x->dims[i];
		if (i != a)
			odims[orank++] = x->dims[i];
		else if (keep)
			odims[orank++] = 1;
	}
	if (d == 0 && outer * inner > 0)
		return eio_end(&e, op_error(c->node, "cannot take %s over an empty axis %lld",
				c->node->op_type, (long long)a));
	Tensor *y;
	if (eio_output(&e, 0, DT_INT64, orank, odims, &y) < 0)
		return eio_end(&e, -1);
	if (outer * inner == 0)
		return eio_end(&e, 0);
	switch (x->dtype) {
	ELEM_NUMERIC(ARG_CASE)
	default: return eio_end(&e, op_unsupported_type(c->node, c->opset, dt));
	}
	return eio_end(&e, 0);
}

static int argmax_run(RunCtx *c)
{
	return run_arg(c, 1);
}

static int argmin_run(RunCtx *c)
{
	return run_arg(c, 0);
}

static int arg_infer(InferCtx *c)
{
	int64_t axis, keep;
	const ValueType *x = c->in[0];
	ValueType *y = c->out[0];
	if (!x)
		return op_error(c->node, "missing input 0");
	if (attr_int(c->node, "axis", 0, &axis) < 0 || attr_int(c->node, "keepdims", 1, &keep) < 0)
		return -1;
	if (x->rank < 0) {
		vt_set_tensor(y, DT_INT64, -1);
		return 0;
	}
	int64_t a;
	if (norm_axis(c->node, axis, x->rank, &a) < 0)
		return -1;
	vt_set_tensor(y, DT_INT64, keep ? x->rank : x->rank - 1);
	int r = 0;
	for (int i = 0; i < x->rank; i++) {
		if (i != a)
			y->dims[r++] = x->dims[i];
		else if (keep)
			y->dims[r++] = (Dim){1, NULL};
	}
	return 0;
}

/* ---- CumSum ---- */

#define CUMSUM_CASE(DT, T, A) case DT: { \
	const T *px = x->data; \
	T *py = y->data; \
	for (int64_t o = 0; o < outer; o++) { \
		for (int64_t k = 0; k < inner; k++) { \
			A s = 0; \
			for (int64_t jj = 0; jj < d; jj++) { \
				int64_t j = rev ? d - 1 - jj : jj; \
				int64_t at = (o * d + j) * inner + k; \
				A v = (A)px[at]; \
				if (excl) { \
					py[at] = (T)s; \
					s = (A)(s + v); \
				} else { \
					s = (A)(s + v); \
					py[at] = (T)s; \
				} \
			} \
		} \
	} \
} break;

static int cumsum_run(RunCtx *c)
{
	ElemIO e;
	int64_t excl, rev, *av = NULL, na;
	if (c->nin < 2 || !c->in[0] || !c->in[1])
		return op_error(c->node, "expected inputs x and axis");
	int dt = c->in[0]->dtype;
	if (attr_int(c->node, "exclusive", 0, &excl) < 0 || attr_int(c->node, "reverse", 0, &rev) < 0)
		return -1;
	if (op_tensor_ints(c->node, c->in[1], "input axis", &av, &na) < 0)
		return -1;
	if (na != 1) {
		free(av);
		return op_error(c->node, "input axis has %lld elements, expected one", (long long)na);
	}
	int64_t axis = av[0];
	free(av);
	if (eio_begin(&e, c) < 0)
		return -1;
	const Tensor *x = e.in[0];
	int64_t a;
	if (norm_axis(c->node, axis, x->rank, &a) < 0)
		return eio_end(&e, -1);
	int64_t outer = 1, inner = 1, d = x->dims[a];
	for (int i = 0; i < x->rank; i++) {
		if (i < a)
			outer *= x->dims[i];
		else if (i > a)
			inner *= x->dims[i];
	}
	Tensor *y;
	if (eio_output(&e, 0, dt, x->rank, x->dims, &y) < 0)
		return eio_end(&e, -1);
	switch (x->dtype) {
	CUMSUM_CASE(DT_FLOAT, float, double)
	CUMSUM_CASE(DT_DOUBLE, double, double)
	CUMSUM_CASE(DT_INT8, int8_t, uint64_t)
	CUMSUM_CASE(DT_INT16, int16_t, uint64_t)
	CUMSUM_CASE(DT_INT32, int32_t, uint64_t)
	CUMSUM_CASE(DT_INT64, int64_t, uint64_t)
	CUMSUM_CASE(DT_UINT8, uint8_t, uint64_t)
	CUMSUM_CASE(DT_UINT16, uint16_t, uint64_t)
	CUMSUM_CASE(DT_UINT32, uint32_t, uint64_t)
	CUMSUM_CASE(DT_UINT64, uint64_t, uint64_t)
	default: return eio_end(&e, op_unsupported_type(c->node, c->opset, dt));
	}
	return eio_end(&e, 0);
}

static int cumsum_infer(InferCtx *c)
{
	return infer_same_as_input(c, 0, 0);
}

OPERATOR(ai_onnx, ReduceSum, 1, sum_infer, sum_run)
OPERATOR(ai_onnx, ReduceMean, 1, mean_infer, mean_run)
OPERATOR(ai_onnx, ReduceMax, 1, max_infer, max_run)
OPERATOR(ai_onnx, ReduceMin, 1, min_infer, min_run)
OPERATOR(ai_onnx, ReduceProd, 1, prod_infer, prod_run)
OPERATOR(ai_onnx, ReduceL1, 1, l1_infer, l1_run)
OPERATOR(ai_onnx, ReduceL2, 1, l2_infer, l2_run)
OPERATOR(ai_onnx, ReduceLogSum, 1, logsum_infer, logsum_run)
OPERATOR(ai_onnx, ReduceLogSumExp, 1, logsumexp_infer, logsumexp_run)
OPERATOR(ai_onnx, ReduceSumSquare, 1, sumsq_infer, sumsq_run)
OPERATOR(ai_onnx, ArgMax, 1, arg_infer, argmax_run)
OPERATOR(ai_onnx, ArgMin, 1, arg_infer, argmin_run)
OPERATOR(ai_onnx, CumSum, 11, cumsum_infer, cumsum_run)
