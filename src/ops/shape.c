/* shape.c — operators that compute or change shapes and move whole blocks of
 * elements: Shape, Size, Reshape, Flatten, Squeeze, Unsqueeze, Expand, Tile,
 * Transpose, Concat, Split, Slice, Identity, Constant, ConstantOfShape, Range,
 * EyeLike.
 *
 * Kernels are generic over the element size; the inference functions also
 * propagate shape data (ValueType.symval) through the PyTorch export pattern
 * Shape -> Gather -> Unsqueeze -> Concat -> Reshape, so that reshape targets
 * come out concrete or symbolic instead of unknown. */
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "ops/bcast.h"
#include "ops/op.h"
#include "ops/shapeutil.h"
#include "util.h"

/* copy input symval to output when the output is 0-D/1-D shape data */
static void pass_symval(InferCtx *c, const ValueType *in, ValueType *out)
{
	int64_t n;
	if (out->rank != 0 && out->rank != 1)
		return;
	Dim *d = vt_get_symval(in, &n);
	if (!d)
		return;
	if (out->rank == 1 ? out->dims[0].v < 0 || out->dims[0].v == n : n == 1)
		vt_put_symval(out, d, n);
	free(d);
}

/* out = copy of t's data with a new shape; the interpreter may have handed
 * t's own block to the output (t dies here, see exec/interp.c), or made
 * the output a view of t (constant folding), then there is nothing to
 * copy */
static int copy_reshaped(RunCtx *c, const Tensor *t, int rank, const int64_t *dims)
{
	int v = op_output_view(c, 0, t, 0, t->dtype, rank, dims);
	if (v < 0)
		return -1;
	if (c->out[0]->nbytes != t->nbytes)
		return op_error(c->node, "cannot reshape %lld elements into %lld",
				(long long)t->numel, (long long)c->out[0]->numel);
	if (!v && t->nbytes && c->out[0]->data != t->data)
		memcpy(c->out[0]->data, t->data, t->nbytes);
	return 0;
}

/* ---- Shape ---- */

static int shape_bounds(const Onnx__NodeProto *n, int rank, int64_t *start, int64_t *end)
{
	int64_t s, e;
	if (attr_int(n, "start", 0, &s) < 0 || attr_int(n, "end", INT64_MAX, &e) < 0)
		return -1;
	if (s < 0)
		s += rank;
	if (e < 0)
		e += rank;
	s = s < 0 ? 0 : s > rank ? rank : s;
	e = e < 0 ? 0 : e > rank ? rank : e;
	*start = s;
	*end = e < s ? s : e;
	return 0;
}

static int shape_infer(InferCtx *c)
{
	if (infer_need(c, 0) < 0)
		return -1;
	const ValueType *x = c->in[0];
	ValueType *y = c->out[0];
	vt_set_tensor(y, DT_INT64, 1);
	if (x->rank < 0)
		return 0;
	int64_t s, e;
	if (shape_bounds(c->node, x->rank, &s, &e) < 0)
		return -1;
	y->dims[0] = dim_known(e - s);
	Dim d[QM_MAX_RANK];
	for (int64_t i = s; i < e; i++) {
		d[i - s] = x->dims[i];
		/* in shape data a symbol-less entry is a literal: name unknowns */
		if (d[i - s].v < 0 && !d[i - s].sym)
			d[i - s] = infer_fresh_dim(c);
	}
	vt_put_symval(y, d, e - s);
	return 0;
}

static int shape_run(RunCtx *c)
{
	if (run_need(c, 0) < 0)
		return -1;
	const Tensor *x = c->in[0];
	int64_t s, e;
	if (shape_bounds(c->node, x->rank, &s, &e) < 0)
		return -1;
	int64_t n = e - s;
	if (op_output(c, 0, DT_INT64, 1, &n) < 0)
		return -1;
	for (int64_t i = 0; i < n; i++)
		memcpy((char *)c->out[0]->data + 8 * i, &x->dims[s + i], 8);
	return 0;
}

OPERATOR(ai_onnx, Shape, 1, shape_infer, shape_run)

/* ---- Size ---- */

static int size_infer(InferCtx *c)
{
	if (infer_need(c, 0) < 0)
		return -1;
	const ValueType *x = c->in[0];
	ValueType *y = c->out[0];
	vt_set_tensor(y, DT_INT64, 0);
	if (x->rank < 0)
		return 0;
	Dim d = dims_product(x->dims, x->rank);
	if (d.v >= 0 || d.sym)
		vt_put_symval(y, &d, 1);
	return 0;
}

static int size_run(RunCtx *c)
{
	if (run_need(c, 0) < 0 || op_output(c, 0, DT_INT64, 0, NULL) < 0)
		return -1;
	memcpy(c->out[0]->data, &c->in[0]->numel, 8);
	return 0;
}

OPERATOR(ai_onnx, Size, 1, size_infer, size_run)

/* ---- Reshape ---- */

/* Symbolic dim arithmetic for the -1 entry: the input's element count
 * divided by the product of the other output dims, cancelling symbols. */
static Dim reshape_solve(const ValueType *x, const Dim *out, int n, int neg)
{
	Dim unk = {-1, NULL};
	if (x->rank < 0)
		return unk;
	const char *syms[QM_MAX_RANK];
	int nsyms = 0;
	int64_t pin = 1, pout = 1;
	int zero_in = 0;
	for (int i = 0; i < x->rank; i++) {
		Dim d = x->dims[i];
		if (d.v == 0)
			zero_in = 1;
		else if (d.v > 0)
			pin = pin > INT64_MAX / d.v ? -1 : pin * d.v;
		else if (d.sym)
			syms[nsyms++] = d.sym;
		else
			return unk;
		if (pin < 0)
			return unk;
	}
	for (int i = 0; i < n; i++) {
		if (i == neg)
			continue;
		Dim d = out[i];
		if (d.v >= 0) {
			if (d.v == 0)
				return zero_in ? unk : dim_known(0);
			pout = pout > INT64_MAX / d.v ? -1 : pout * d.v;
			if (pout < 0)
				return unk;
		} else if (d.sym) {
			int k;
			for (k = 0; k < nsyms; k++)
				if (syms[k] == d.sym)
					break;
			if (k == nsyms)
				return unk;
			syms[k] = syms[--nsyms];
		} else {
			return unk;
		}
	}
	if (zero_in)
		return dim_known(0);
	if (nsyms == 0)
		return pin % pout ? unk : dim_known(pin / pout);
	if (nsyms == 1 && pin == pout)
		return (Dim){-1, syms[0]};
	return unk;
}

static int reshape_infer(InferCtx *c)
{
	if (infer_need(c, 0) < 0)
		return -1;
	const ValueType *x = c->in[0];
	ValueType *y = c->out[0];
	int64_t allowzero = 0;
	if (c->opset >= 14 && attr_int(c->node, "allowzero", 0, &allowzero) < 0)
		return -1;
	Dim *sh = NULL;
	int64_t n = -1;
	if (c->opset < 5) {
		const int64_t *v;
		size_t len;
		if (attr_ints(c->node, "shape", &v, &len) < 0)
			return -1;
		if (!v)
			return op_error(c->node, "attribute 'shape' is required");
		n = (int64_t)len;
		sh = xmalloc(sizeof *sh * (len ? len : 1));
		for (size_t i = 0; i < len; i++)
			sh[i] = dim_known(v[i]);
	} else {
		if (infer_need(c, 1) < 0)
			return -1;
		sh = vt_get_symval(c->in[1], &n);
		if (!sh) {
			const ValueType *s = c->in[1];
			if (s->rank == 1 && s->dims[0].v >= 0 && s->dims[0].v <= QM_MAX_RANK)
				vt_set_tensor(y, x->elem, (int)s->dims[0].v);
			else
				vt_set_tensor(y, x->elem, -1);
			return 0;
		}
	}
	if (n > QM_MAX_RANK) {
		free(sh);
		return op_error(c->node, "target shape has %lld dims, more than the supported %d",
				(long long)n, QM_MAX_RANK);
	}
	vt_set_tensor(y, x->elem, (int)n);
	/* a target known only as shape data may hold unknown entries (v < 0):
	 * one of them solves like -1 (a valid target leaves no other choice),
	 * several stay unknown */
	int literal = c->opset < 5 || c->in[1]->value != NULL, nneg = 0;
	for (int i = 0; i < n; i++)
		if (!sh[i].sym && sh[i].v < 0)
			nneg++;
	int neg = -1;
	for (int i = 0; i < n; i++) {
		Dim e = sh[i];
		if (e.sym) {
			y->dims[i] = e;
		} else if (e.v < 0 && !literal && (nneg > 1 || e.v != -1)) {
			y->dims[i] = (Dim){-1, NULL};
		} else if (e.v == 0 && !allowzero) {
			if (x->rank >= 0 && i >= x->rank) {
				free(sh);
				return op_error(c->node, "shape entry %d is 0 (copy) but the input has rank %d",
						i, x->rank);
			}
			y->dims[i] = x->rank >= 0 ? x->dims[i] : (Dim){-1, NULL};
		} else if (e.v == -1) {
			if (neg >= 0) {
				free(sh);
				return op_error(c->node, "shape has more than one -1 entry");
			}
			neg = i;
			y->dims[i] = (Dim){-1, NULL};
		} else if (e.v < 0) {
			free(sh);
			return op_error(c->node, "invalid shape entry %lld at %d", (long long)e.v, i);
		} else {
			y->dims[i] = e;
		}
	}
	free(sh);
	if (neg >= 0)
		y->dims[neg] = reshape_solve(x, y->dims, (int)n, neg);
	int64_t din[QM_MAX_RANK], dout[QM_MAX_RANK];
	if (vt_known_dims(x, din) && vt_known_dims(y, dout) &&
	    shape_numel(x->rank, din) != shape_numel(y->rank, dout)) {
		char a[128], b[128];
		return op_error(c->node, "cannot reshape %s into %s", shape_str(x->rank, din, a, sizeof a),
				shape_str(y->rank, dout, b, sizeof b));
	}
	pass_symval(c, x, y);
	return 0;
}

static int reshape_run(RunCtx *c)
{
	if (run_need(c, 0) < 0)
		return -1;
	const Tensor *x = c->in[0];
	int64_t allowzero = 0, *sh = NULL, n;
	if (c->opset >= 14 && attr_int(c->node, "allowzero", 0, &allowzero) < 0)
		return -1;
	if (c->opset < 5) {
		const int64_t *v;
		size_t len;
		if (attr_ints(c->node, "shape", &v, &len) < 0)
			return -1;
		if (!v)
			return op_error(c->node, "attribute 'shape' is required");
		n = (int64_t)len;
		sh = xmalloc(sizeof *sh * (len ? len : 1));
		if (len)
			memcpy(sh, v, sizeof *sh * len);
	} else {
		if (run_need(c, 1) < 0 || op_tensor_ints(c->node, c->in[1], "shape", &sh, &n) < 0)
			return -1;
	}
	int64_t dims[QM_MAX_RANK];
	int neg = -1, ret = -1;
	if (n > QM_MAX_RANK) {
		op_error(c->node, "target shape has %lld dims, more than the supported %d",
			 (long long)n, QM_MAX_RANK);
		goto out;
	}
	int64_t prod = 1;
	for (int i = 0; i < n; i++) {
		int64_t e = sh[i];
		if (e == 0 && !allowzero) {
			if (i >= x->rank) {
				op_error(c->node, "shape entry %d is 0 (copy) but the input has rank %d",
					 i, x->rank);
				goto out;
			}
			e = x->dims[i];
		} else if (e == -1) {
			if (neg >= 0) {
				op_error(c->node, "shape has more than one -1 entry");
				goto out;
			}
			neg = i;
			e = 1;
		} else if (e < 0) {
			op_error(c->node, "invalid shape entry %lld at %d", (long long)e, i);
			goto out;
		}
		dims[i] = e;
		prod = e && prod > INT64_MAX / e ? -1 : prod * e;
		if (prod < 0) {
			op_error(c->node, "target shape overflows");
			goto out;
		}
	}
	if (neg >= 0) {
		if (prod == 0 || x->numel % prod) {
			char a[128];
			op_error(c->node, "cannot reshape %s: -1 does not divide %lld elements",
				 shape_str(x->rank, x->dims, a, sizeof a), (long long)x->numel);
			goto out;
		}
		dims[neg] = x->numel / prod;
	} else if (prod != x->numel) {
		char a[128], b[128];
		op_error(c->node, "cannot reshape %s into %s", shape_str(x->rank, x->dims, a, sizeof a),
			 shape_str((int)n, dims, b, sizeof b));
		goto out;
	}
	ret = copy_reshaped(c, x, (int)n, dims);
out:
	free(sh);
	return ret;
}

OPERATOR(ai_onnx, Reshape, 1, reshape_infer, reshape_run)

/* ---- Flatten ---- */

static int flatten_axis(const Onnx__NodeProto *n, int rank, int64_t *axis)
{
	int64_t a;
	if (attr_int(n, "axis", 1, &a) < 0)
		return -1;
	if (a < -rank || a > rank)
		return op_error(n, "axis %lld is out of range for rank %d", (long long)a, rank);
	*axis = a < 0 ? a + rank : a;
	return 0;
}

static int flatten_infer(InferCtx *c)
{
	if (infer_need(c, 0) < 0)
		return -1;
	const ValueType *x = c->in[0];
	ValueType *y = c->out[0];
	vt_set_tensor(y, x->elem, 2);
	if (x->rank < 0)
		return 0;
	int64_t a;
	if (flatten_axis(c->node, x->rank, &a) < 0)
		return -1;
	y->dims[0] = dims_product(x->dims, (int)a);
	y->dims[1] = dims_product(x->dims + a, x->rank - (int)a);
	return 0;
}

static int flatten_run(RunCtx *c)
{
	if (run_need(c, 0) < 0)
		return -1;
	const Tensor *x = c->in[0];
	int64_t a, d[2];
	if (flatten_axis(c->node, x->rank, &a) < 0)
		return -1;
	d[0] = shape_numel((int)a, x->dims);
	d[1] = shape_numel(x->rank - (int)a, x->dims + a);
	return copy_reshaped(c, x, 2, d);
}

OPERATOR(ai_onnx, Flatten, 1, flatten_infer, flatten_run)

/* ---- Squeeze / Unsqueeze ---- */

/* Squeeze/Unsqueeze axes: the attribute before opset 13, else input 1.
 * given says whether input 1 is present; t is its value (NULL when given
 * but unknown during inference, which sets *known = 0). */
static int read_axes(const Onnx__NodeProto *node, int64_t opset, int given, const Tensor *t,
		     int64_t **axes, int64_t *n, int *known)
{
	*axes = NULL;
	*n = 0;
	*known = 1;
	if (opset < 13) {
		const int64_t *v;
		size_t len;
		if (attr_ints(node, "axes", &v, &len) < 0)
			return -1;
		if (v) {
			*axes = xmalloc(sizeof **axes * len);
			memcpy(*axes, v, sizeof **axes * len);
			*n = (int64_t)len;
		}
		return 0;
	}
	if (!given)
		return 0;
	if (!t) {
		*known = 0;
		return 0;
	}
	return op_tensor_ints(node, t, "axes", axes, n);
}

static int axes_from_infer(InferCtx *c, int64_t **axes, int64_t *n, int *known)
{
	int given = c->nin >= 2 && c->in[1];
	return read_axes(c->node, c->opset, given, given ? c->in[1]->value : NULL, axes, n, known);
}

static int axes_from_run(RunCtx *c, int64_t **axes, int64_t *n)
{
	int given = c->nin >= 2 && c->in[1], known;
	return read_axes(c->node, c->opset, given, given ? c->in[1] : NULL, axes, n, &known);
}

/* mark[] = 1 at normalized axes; -1 on a bad or repeated axis */
static int mark_axes(const Onnx__NodeProto *n, const int64_t *axes, int64_t na, int rank, char *mark)
{
	memset(mark, 0, QM_MAX_RANK);
	for (int64_t i = 0; i < na; i++) {
		int64_t a;
		if (norm_axis(n, axes[i], rank, &a) < 0)
			return -1;
		if (mark[a])
			return op_error(n, "axis %lld is repeated", (long long)axes[i]);
		mark[a] = 1;
	}
	return 0;
}

static int squeeze_infer(InferCtx *c)
{
	if (infer_need(c, 0) < 0)
		return -1;
	const ValueType *x = c->in[0];
	ValueType *y = c->out[0];
	int64_t *axes, na;
	int known;
	if (axes_from_infer(c, &axes, &na, &known) < 0)
		return -1;
	if (!known || x->rank < 0) {
		free(axes);
		vt_set_tensor(y, x->elem, -1);
		return 0;
	}
	char mark[QM_MAX_RANK];
	if (axes) {
		int r = mark_axes(c->node, axes, na, x->rank, mark);
		free(axes);
		if (r < 0)
			return -1;
		for (int i = 0; i < x->rank; i++)
			if (mark[i] && x->dims[i].v >= 0 && x->dims[i].v != 1)
				return op_error(c->node, "cannot squeeze axis %d of size %lld", i,
						(long long)x->dims[i].v);
	} else {
		for (int i = 0; i < x->rank; i++) {
			if (x->dims[i].v < 0) {
				vt_set_tensor(y, x->elem, -1);
				return 0;
			}
			mark[i] = x->dims[i].v == 1;
		}
	}
	int r = 0;
	for (int i = 0; i < x->rank; i++)
		if (!mark[i])
			r++;
	vt_set_tensor(y, x->elem, r);
	r = 0;
	for (int i = 0; i < x->rank; i++)
		if (!mark[i])
			y->dims[r++] = x->dims[i];
	pass_symval(c, x, y);
	return 0;
}

static int squeeze_run(RunCtx *c)
{
	if (run_need(c, 0) < 0)
		return -1;
	const Tensor *x = c->in[0];
	int64_t *axes, na, dims[QM_MAX_RANK];
	char mark[QM_MAX_RANK];
	if (axes_from_run(c, &axes, &na) < 0)
		return -1;
	if (axes) {
		int r = mark_axes(c->node, axes, na, x->rank, mark);
		free(axes);
		if (r < 0)
			return -1;
	} else {
		for (int i = 0; i < x->rank; i++)
			mark[i] = x->dims[i] == 1;
	}
	int r = 0;
	for (int i = 0; i < x->rank; i++) {
		if (!mark[i])
			dims[r++] = x->dims[i];
		else if (x->dims[i] != 1)
			return op_error(c->node, "cannot squeeze axis %d of size %lld", i,
					(long long)x->dims[i]);
	}
	return copy_reshaped(c, x, r, dims);
}

OPERATOR(ai_onnx, Squeeze, 1, squeeze_infer, squeeze_run)

static int unsqueeze_infer(InferCtx *c)
{
	if (infer_need(c, 0) < 0)
		return -1;
	const ValueType *x = c->in[0];
	ValueType *y = c->out[0];
	int64_t *axes, na;
	int known;
	if (axes_from_infer(c, &axes, &na, &known) < 0)
		return -1;
	if (known && !axes)
		return op_error(c->node, "axes are required");
	if (!known || x->rank < 0) {
		const ValueType *a = c->nin > 1 ? c->in[1] : NULL;
		if (x->rank >= 0 && a && a->rank == 1 && a->dims[0].v >= 0 &&
		    x->rank + a->dims[0].v <= QM_MAX_RANK)
			vt_set_tensor(y, x->elem, x->rank + (int)a->dims[0].v);
		else if (x->rank >= 0 && axes && x->rank + na <= QM_MAX_RANK)
			vt_set_tensor(y, x->elem, x->rank + (int)na);
		else
			vt_set_tensor(y, x->elem, -1);
		free(axes);
		return 0;
	}
	if (x->rank + na > QM_MAX_RANK) {
		free(axes);
		return op_error(c->node, "result rank %lld exceeds the supported %d",
				(long long)(x->rank + na), QM_MAX_RANK);
	}
	int r = x->rank + (int)na;
	char mark[QM_MAX_RANK];
	int err = mark_axes(c->node, axes, na, r, mark);
	free(axes);
	if (err < 0)
		return -1;
	vt_set_tensor(y, x->elem, r);
	for (int i = 0, k = 0; i < r; i++)
		y->dims[i] = mark[i] ? dim_known(1) : x->dims[k++];
	pass_symval(c, x, y);
	return 0;
}

static int unsqueeze_run(RunCtx *c)
{
	if (run_need(c, 0) < 0)
		return -1;
	const Tensor *x = c->in[0];
	int64_t *axes, na, dims[QM_MAX_RANK];
	char mark[QM_MAX_RANK];
	if (axes_from_run(c, &axes, &na) < 0)
		return -1;
	if (!axes)
		return op_error(c->node, "axes are required");
	if (x->rank + na > QM_MAX_RANK) {
		free(axes);
		return op_error(c->node, "result rank %lld exceeds the supported %d",
				(long long)(x->rank + na), QM_MAX_RANK);
	}
	int r = x->rank + (int)na;
	int err = mark_axes(c->node, axes, na, r, mark);
	free(axes);
	if (err < 0)
		return -1;
	for (int i = 0, k = 0; i < r; i++)
		dims[i] = mark[i] ? 1 : x->dims[k++];
	return copy_reshaped(c, x, r, dims);
}

OPERATOR(ai_onnx, Unsqueeze, 1, unsqueeze_infer, unsqueeze_run)

/* ---- Expand ---- */

static int expand_infer(InferCtx *c)
{
	if (infer_need(c, 0) < 0 || infer_need(c, 1) < 0)
		return -1;
	const ValueType *x = c->in[0], *s = c->in[1];
	ValueType *y = c->out[0];
	int64_t n;
	Dim *sh = vt_get_symval(s, &n);
	if (!sh) {
		if (x->rank >= 0 && s->rank == 1 && s->dims[0].v >= 0 && s->dims[0].v <= QM_MAX_RANK)
			vt_set_tensor(y, x->elem, x->rank > s->dims[0].v ? x->rank : (int)s->dims[0].v);
		else
			vt_set_tensor(y, x->elem, -1);
		return 0;
	}
	if (n > QM_MAX_RANK) {
		free(sh);
		return op_error(c->node, "shape has %lld dims, more than the supported %d",
				(long long)n, QM_MAX_RANK);
	}
	ValueType t = {.kind = VT_TENSOR, .rank = (int)n};
	for (int i = 0; i < n; i++) {
		if (!sh[i].sym && sh[i].v < 0 && s->value) {
			int64_t v = sh[i].v;
			free(sh);
			return op_error(c->node, "invalid shape entry %lld", (long long)v);
		}
		t.dims[i] = sh[i].sym || sh[i].v >= 0 ? sh[i] : (Dim){-1, NULL};
	}
	free(sh);
	vt_set_tensor(y, x->elem, -1);
	return broadcast_dims(c->node, x, &t, y);
}

static int expand_run(RunCtx *c)
{
	if (run_need(c, 0) < 0 || run_need(c, 1) < 0)
		return -1;
	const Tensor *x = c->in[0];
	int64_t *sh, n, dims[QM_MAX_RANK];
	if (op_tensor_ints(c->node, c->in[1], "shape", &sh, &n) < 0)
		return -1;
	if (n > QM_MAX_RANK) {
		free(sh);
		return op_error(c->node, "shape has %lld dims, more than the supported %d",
				(long long)n, QM_MAX_RANK);
	}
	int ranks[2] = {x->rank, (int)n}, r;
	const int64_t *dv[2] = {x->dims, sh};
	int err = bcast_shape(c->node, 2, ranks, dv, &r, dims);
	free(sh);
	if (err < 0)
		return -1;
	size_t es;
	if (op_elemsize(c->node, c->opset, x->dtype, &es) < 0)
		return -1;
	/* as many elements: the same bytes (a constant's, in place) */
	int v = shape_numel(r, dims) == x->numel ? op_output_view(c, 0, x, 0, x->dtype, r, dims)
						  : op_output(c, 0, x->dtype, r, dims);
	if (v < 0)
		return -1;
	return v ? 0 : bcast_expand(c->node, x, c->out[0]);
}

OPERATOR(ai_onnx, Expand, 8, expand_infer, expand_run)

/* ---- Tile ---- */

static int tile_infer(InferCtx *c)
{
	if (infer_need(c, 0) < 0 || infer_need(c, 1) < 0)
		return -1;
	const ValueType *x = c->in[0];
	ValueType *y = c->out[0];
	vt_set_tensor(y, x->elem, x->rank);
	if (x->rank < 0 || !c->in[1]->value)
		return 0;
	int64_t *rep, n;
	if (op_tensor_ints(c->node, c->in[1]->value, "repeats", &rep, &n) < 0)
		return -1;
	if (n != x->rank) {
		free(rep);
		return op_error(c->node, "repeats has %lld entries, expected the input rank %d",
				(long long)n, x->rank);
	}
	for (int i = 0; i < x->rank; i++) {
		Dim d = x->dims[i];
		if (rep[i] < 0) {
			int64_t v = rep[i];
			free(rep);
			return op_error(c->node, "negative repeat %lld", (long long)v);
		}
		if (rep[i] == 1)
			y->dims[i] = d;
		else if (rep[i] == 0)
			y->dims[i] = dim_known(0);
		else if (d.v >= 0)
			y->dims[i] = dim_known(d.v * rep[i]);
	}
	free(rep);
	return 0;
}

static int tile_run(RunCtx *c)
{
	if (run_need(c, 0) < 0 || run_need(c, 1) < 0)
		return -1;
	const Tensor *x = c->in[0];
	int64_t *rep, n, dims[QM_MAX_RANK];
	size_t es;
	if (op_elemsize(c->node, c->opset, x->dtype, &es) < 0)
		return -1;
	if (op_tensor_ints(c->node, c->in[1], "repeats", &rep, &n) < 0)
		return -1;
	if (n != x->rank) {
		free(rep);
		return op_error(c->node, "repeats has %lld entries, expected the input rank %d",
				(long long)n, x->rank);
	}
	for (int i = 0; i < x->rank; i++) {
		if (rep[i] < 0) {
			int64_t v = rep[i];
			free(rep);
			return op_error(c->node, "negative repeat %lld", (long long)v);
		}
		dims[i] = x->dims[i] * rep[i];
	}
	free(rep);
	if (op_output(c, 0, x->dtype, x->rank, dims) < 0)
		return -1;
	Tensor *y = c->out[0];
	if (y->numel == 0)
		return 0;
	if (x->rank == 0) {
		memcpy(y->data, x->data, es);
		return 0;
	}
	/* for each output row (all axes but the last), copy the input row
	 * repeated along the last axis */
	int r = x->rank;
	int64_t xs[QM_MAX_RANK], idx[QM_MAX_RANK] = {0};
	dims_strides(r, x->dims, xs);
	size_t rowb = (size_t)x->dims[r - 1] * es;
	int64_t reps = dims[r - 1] / x->dims[r - 1];
	char *o = y->data;
	do {
		int64_t off = 0;
		for (int k = 0; k < r - 1; k++)
			off += (idx[k] % x->dims[k]) * xs[k];
		const char *src = (const char *)x->data + (size_t)off * es;
		for (int64_t j = 0; j < reps; j++) {
			memcpy(o, src, rowb);
			o += rowb;
		}
	} while (index_next(idx, dims, r - 1) >= 0);
	return 0;
}

OPERATOR(ai_onnx, Tile, 1, tile_infer, tile_run)

/* ---- Transpose ---- */

static int transpose_perm(const Onnx__NodeProto *n, int rank, int64_t *perm)
{
	const int64_t *p;
	size_t len;
	if (attr_ints(n, "perm", &p, &len) < 0)
		return -1;
	if (!p) {
		for (int i = 0; i < rank; i++)
			perm[i] = rank - 1 - i;
		return 0;
	}
	if ((int64_t)len != rank)
		return op_error(n, "perm has %zu entries, expected the input rank %d", len, rank);
	char seen[QM_MAX_RANK] = {0};
	for (int i = 0; i < rank; i++) {
		int64_t a = p[i] < 0 ? p[i] + rank : p[i];
		if (a < 0 || a >= rank || seen[a])
			return op_error(n, "perm is not a permutation of 0..%d", rank - 1);
		seen[a] = 1;
		perm[i] = a;
	}
	return 0;
}

static int transpose_infer(InferCtx *c)
{
	if (infer_need(c, 0) < 0)
		return -1;
	const ValueType *x = c->in[0];
	ValueType *y = c->out[0];
	if (x->rank < 0) {
		const int64_t *p;
		size_t len;
		if (attr_ints(c->node, "perm", &p, &len) < 0)
			return -1;
		vt_set_tensor(y, x->elem, p && len <= QM_MAX_RANK ? (int)len : -1);
		return 0;
	}
	int64_t perm[QM_MAX_RANK];
	if (transpose_perm(c->node, x->rank, perm) < 0)
		return -1;
	vt_set_tensor(y, x->elem, x->rank);
	for (int i = 0; i < x->rank; i++)
		y->dims[i] = x->dims[perm[i]];
	return 0;
}

/* ---- strided copies (Transpose, Slice) ---- */

/* Drop axes of size 1 and merge neighbours that are contiguous in the
 * source (the outer axis's stride is the inner one's times its size):
 * Slice of whole rows and Transpose of [1, 512, 256, 1] become one memcpy
 * or one 2-D transpose. Returns the merged rank. */
static int merge_axes(int r, const int64_t *dims, const int64_t *st, int64_t *md, int64_t *ms)
{
	int n = 0;
	for (int k = 0; k < r; k++) {
		if (dims[k] == 1)
			continue;
		if (n && ms[n - 1] == st[k] * dims[k]) {
			md[n - 1] *= dims[k];
			ms[n - 1] = st[k];
			continue;
		}
		md[n] = dims[k];
		ms[n] = st[k];
		n++;
	}
	return n;
}

/* An odometer over n axes (sizes d) moving a source and a destination
 * offset by their strides (elements). */
typedef struct Odo {
	int n;
	int64_t d[QM_MAX_RANK], ss[QM_MAX_RANK], ds[QM_MAX_RANK], idx[QM_MAX_RANK];
	int64_t so, doff;
} Odo;

/* advance; 0 once every index has wrapped */
static int odo_next(Odo *o)
{
	for (int k = o->n - 1; k >= 0; k--) {
		if (++o->idx[k] < o->d[k]) {
			o->so += o->ss[k];
			o->doff += o->ds[k];
			return 1;
		}
		o->idx[k] = 0;
		o->so -= o->ss[k] * (o->d[k] - 1);
		o->doff -= o->ds[k] * (o->d[k] - 1);
	}
	return 0;
}

/* n elements of size es from s (stride st elements, may be negative)
 * into packed d; elements move with memcpy of a constant size (one load
 * and store: tensor data need not be aligned) */
static void copy_run(char *d, const char *s, size_t es, int64_t n, int64_t st)
{
	if (st == 1) {
		memcpy(d, s, (size_t)n * es);
		return;
	}
	switch (es) {
#define RUN(E) \
	for (int64_t j = 0; j < n; j++) \
		memcpy(d + j * E, s + (ptrdiff_t)(j * st) * E, E); \
	break;
	case 1: RUN(1)
	case 2: RUN(2)
	case 4: RUN(4)
	case 8: RUN(8)
#undef RUN
	default:
		for (int64_t j = 0; j < n; j++)
			memcpy(d + (size_t)j * es, s + (ptrdiff_t)(j * st) * (ptrdiff_t)es, es);
	}
}

/* dst[i * ldd + j] = src[i + j * lds] for i < rows, j < cols: a 2-D
 * transpose in 32 x 32 blocks, so both sides stay in cache */
static void transpose_2d(char *dst, const char *src, size_t es, int64_t rows, int64_t cols, int64_t ldd,
			 int64_t lds)
{
	enum { B = 32 };
	for (int64_t i0 = 0; i0 < rows; i0 += B) {
		int64_t i1 = i0 + B < rows ? i0 + B : rows;
		for (int64_t j0 = 0; j0 < cols; j0 += B) {
			int64_t j1 = j0 + B < cols ? j0 + B : cols;
			switch (es) {
#define BLOCK(E) \
	for (int64_t i = i0; i < i1; i++) { \
		char *d = dst + (ptrdiff_t)(i * ldd) * E; \
		const char *s = src + (ptrdiff_t)i * E; \
		for (int64_t j = j0; j < j1; j++) \
			memcpy(d + j * E, s + (ptrdiff_t)(j * lds) * E, E); \
	} \
	break;
			case 1: BLOCK(1)
			case 2: BLOCK(2)
			case 4: BLOCK(4)
			case 8: BLOCK(8)
#undef BLOCK
			default:
				for (int64_t i = i0; i < i1; i++)
					for (int64_t j = j0; j < j1; j++)
						memcpy(dst + (ptrdiff_t)(i * ldd + j) * (ptrdiff_t)es,
						       src + (ptrdiff_t)(i + j * lds) * (ptrdiff_t)es, es);
			}
		}
	}
}

/* Strided copy: dst packed in dims, the source element of each destination
 * index at base + sum(index * strides) (elements). After merge_axes, a
 * contiguous innermost axis is copied in runs with memcpy; otherwise, when
 * another axis is contiguous in the source (a transpose), those two axes
 * are copied as blocked 2-D transposes; else element by element. */
static void strided_copy(char *dst, const char *src, size_t es, int r, const int64_t *dims,
			 const int64_t *strides, int64_t base)
{
	if (shape_numel(r, dims) == 0)
		return;
	int64_t md[QM_MAX_RANK], ms[QM_MAX_RANK], dst_st[QM_MAX_RANK];
	int n = merge_axes(r, dims, strides, md, ms);
	src += (size_t)base * es;
	if (n == 0) {
		memcpy(dst, src, es);
		return;
	}
	dst_st[n - 1] = 1;
	for (int k = n - 2; k >= 0; k--)
		dst_st[k] = dst_st[k + 1] * md[k + 1];
	int t = -1; /* an outer axis contiguous in the source */
	for (int k = 0; k < n - 1 && ms[n - 1] != 1; k++)
		if (ms[k] == 1)
			t = k;
	Odo o = {0};
	for (int k = 0; k < n - 1; k++)
		if (k != t) {
			o.d[o.n] = md[k];
			o.ss[o.n] = ms[k];
			o.ds[o.n] = dst_st[k];
			o.n++;
		}
	do {
		char *d = dst + (ptrdiff_t)o.doff * (ptrdiff_t)es;
		const char *s = src + (ptrdiff_t)o.so * (ptrdiff_t)es;
		if (t >= 0)
			transpose_2d(d, s, es, md[t], md[n - 1], dst_st[t], ms[n - 1]);
		else
			copy_run(d, s, es, md[n - 1], ms[n - 1]);
	} while (odo_next(&o));
}

static int transpose_run(RunCtx *c)
{
	if (run_need(c, 0) < 0)
		return -1;
	const Tensor *x = c->in[0];
	int64_t perm[QM_MAX_RANK], dims[QM_MAX_RANK], xs[QM_MAX_RANK], st[QM_MAX_RANK];
	size_t es;
	if (transpose_perm(c->node, x->rank, perm) < 0 ||
	    op_elemsize(c->node, c->opset, x->dtype, &es) < 0)
		return -1;
	dims_strides(x->rank, x->dims, xs);
	for (int i = 0; i < x->rank; i++) {
		dims[i] = x->dims[perm[i]];
		st[i] = xs[perm[i]];
	}
	if (op_output(c, 0, x->dtype, x->rank, dims) < 0)
		return -1;
	strided_copy(c->out[0]->data, x->data, es, x->rank, dims, st, 0);
	return 0;
}

OPERATOR(ai_onnx, Transpose, 1, transpose_infer, transpose_run)

/* ---- Concat ---- */

static int concat_infer(InferCtx *c)
{
	int64_t axis;
	if (attr_int(c->node, "axis", INT64_MIN, &axis) < 0)
		return -1;
	if (axis == INT64_MIN) {
		if (c->opset >= 4)
			return op_error(c->node, "attribute 'axis' is required");
		axis = 1;
	}
	ValueType *y = c->out[0];
	int elem = 0, rank = -1;
	for (size_t i = 0; i < c->nin; i++) {
		const ValueType *t = c->in[i];
		if (!t)
			continue;
		if (t->elem && !elem)
			elem = t->elem;
		if (t->rank >= 0) {
			if (rank >= 0 && t->rank != rank)
				return op_error(c->node, "input %zu has rank %d, input 0 rank %d", i,
						t->rank, rank);
			rank = t->rank;
		}
	}
	vt_set_tensor(y, elem, rank);
	if (rank < 0)
		return 0;
	if (rank == 0)
		return op_error(c->node, "cannot concatenate scalars");
	int64_t a;
	if (norm_axis(c->node, axis, rank, &a) < 0)
		return -1;
	Dim sum = dim_known(0);
	int allrank = 1;
	for (size_t i = 0; i < c->nin; i++) {
		const ValueType *t = c->in[i];
		if (!t)
			continue;
		if (t->rank < 0) {
			allrank = 0;
			continue;
		}
		sum = dim_add(sum, t->dims[a]);
		for (int k = 0; k < rank; k++) {
			if (k == a)
				continue;
			Dim d = t->dims[k];
			if (y->dims[k].v < 0 && !y->dims[k].sym)
				y->dims[k] = d;
			else if (y->dims[k].v >= 0 && d.v >= 0 && d.v != y->dims[k].v)
				return op_error(c->node, "input %zu has size %lld on axis %d, expected %lld",
						i, (long long)d.v, k, (long long)y->dims[k].v);
			else if (y->dims[k].v < 0 && d.v >= 0)
				y->dims[k] = d;
		}
	}
	y->dims[a] = allrank ? sum : (Dim){-1, NULL};
	/* shape data */
	if (rank == 1) {
		Dim *all = NULL;
		int64_t nall = 0;
		for (size_t i = 0; i < c->nin; i++) {
			int64_t n;
			Dim *d = c->in[i] ? vt_get_symval(c->in[i], &n) : NULL;
			if (!d) {
				free(all);
				return 0;
			}
			all = xreallocarray(all, (size_t)(nall + n + 1), sizeof *all);
			memcpy(all + nall, d, sizeof *d * (size_t)n);
			nall += n;
			free(d);
		}
		if (y->dims[0].v < 0 || y->dims[0].v == nall)
			vt_put_symval(y, all, nall);
		free(all);
	}
	return 0;
}

static int concat_run(RunCtx *c)
{
	int64_t axis;
	if (attr_int(c->node, "axis", INT64_MIN, &axis) < 0)
		return -1;
	if (axis == INT64_MIN) {
		if (c->opset >= 4)
			return op_error(c->node, "attribute 'axis' is required");
		axis = 1;
	}
	const Tensor *f = NULL;
	for (size_t i = 0; i < c->nin; i++)
		if (c->in[i]) {
			f = c->in[i];
			break;
		}
	if (!f)
		return op_error(c->node, "no inputs");
	if (f->rank == 0)
		return op_error(c->node, "cannot concatenate scalars");
	int64_t a, dims[QM_MAX_RANK];
	size_t es;
	if (norm_axis(c->node, axis, f->rank, &a) < 0 || op_elemsize(c->node, c->opset, f->dtype, &es) < 0)
		return -1;
	memcpy(dims, f->dims, sizeof dims[0] * (size_t)f->rank);
	dims[a] = 0;
	for (size_t i = 0; i < c->nin; i++) {
		const Tensor *t = c->in[i];
		if (!t)
			continue;
		if (t->dtype != f->dtype)
			return op_error(c->node, "input %zu is %s, input 0 is %s", i, dtype_name(t->dtype),
					dtype_name(f->dtype));
		if (t->rank != f->rank)
			return op_error(c->node, "input %zu has rank %d, expected %d", i, t->rank, f->rank);
		for (int k = 0; k < f->rank; k++)
			if (k != a && t->dims[k] != f->dims[k])
				return op_error(c->node, "input %zu has size %lld on axis %d, expected %lld",
						i, (long long)t->dims[k], k, (long long)f->dims[k]);
		dims[a] += t->dims[a];
	}
	if (op_output(c, 0, f->dtype, f->rank, dims) < 0)
		return -1;
	int64_t outer = shape_numel((int)a, dims), inner = shape_numel(f->rank - (int)a - 1, dims + a + 1);
	size_t orow = (size_t)(dims[a] * inner) * es, off = 0;
	char *o = c->out[0]->data;
	for (size_t i = 0; i < c->nin; i++) {
		const Tensor *t = c->in[i];
		if (!t)
			continue;
		size_t row = (size_t)(t->dims[a] * inner) * es;
		for (int64_t j = 0; j < outer && row; j++)
			memcpy(o + (size_t)j * orow + off, (const char *)t->data + (size_t)j * row, row);
		off += row;
	}
	return 0;
}

OPERATOR(ai_onnx, Concat, 1, concat_infer, concat_run)

/* ---- Split ---- */

/* Sizes of the nout parts of a dimension of size dim (dim < 0: unknown).
 * split: explicit sizes (n entries) or NULL. */
static int split_sizes(const Onnx__NodeProto *node, int64_t opset, const int64_t *split, int64_t n,
		       size_t nout, int64_t dim, int64_t *sizes)
{
	if (split) {
		if ((size_t)n != nout)
			return op_error(node, "split has %lld entries for %zu outputs", (long long)n, nout);
		int64_t s = 0;
		for (int64_t i = 0; i < n; i++) {
			if (split[i] < 0)
				return op_error(node, "negative split size %lld", (long long)split[i]);
			sizes[i] = split[i];
			s += split[i];
		}
		if (dim >= 0 && s != dim)
			return op_error(node, "split sizes add up to %lld, the axis has %lld",
					(long long)s, (long long)dim);
		return 0;
	}
	if (dim < 0) {
		for (size_t i = 0; i < nout; i++)
			sizes[i] = -1;
		return 0;
	}
	int64_t num = (int64_t)nout;
	if (opset >= 18) {
		int64_t k;
		if (attr_int(node, "num_outputs", -1, &k) < 0)
			return -1;
		if (k < 0)
			return op_error(node, "either input 'split' or attribute 'num_outputs' is required");
		if (k != num)
			return op_error(node, "num_outputs is %lld but the node has %zu outputs",
					(long long)k, nout);
		int64_t chunk = (dim + num - 1) / num, left = dim;
		for (int64_t i = 0; i < num; i++) {
			sizes[i] = left < chunk ? left : chunk;
			left -= sizes[i];
		}
		return 0;
	}
	if (dim % num)
		return op_error(node, "axis of size %lld does not split into %zu equal parts",
				(long long)dim, nout);
	for (int64_t i = 0; i < num; i++)
		sizes[i] = dim / num;
	return 0;
}

static int split_attr(const Onnx__NodeProto *n, int64_t opset, int64_t **split, int64_t *len)
{
	const int64_t *v;
	size_t l;
	*split = NULL;
	*len = 0;
	if (opset >= 13)
		return 0;
	if (attr_ints(n, "split", &v, &l) < 0)
		return -1;
	if (v) {
		*split = xmalloc(sizeof **split * (l ? l : 1));
		memcpy(*split, v, sizeof **split * l);
		*len = (int64_t)l;
	}
	return 0;
}

static int split_infer(InferCtx *c)
{
	if (infer_need(c, 0) < 0)
		return -1;
	const ValueType *x = c->in[0];
	int64_t axis, *split = NULL, n = 0;
	if (attr_int(c->node, "axis", 0, &axis) < 0 || split_attr(c->node, c->opset, &split, &n) < 0)
		return -1;
	const ValueType *s = c->nin > 1 ? c->in[1] : NULL;   /* Split-1 and >= 13 */
	if (s && !s->value) {
		for (size_t i = 0; i < c->nout; i++)
			vt_set_tensor(c->out[i], x->elem, x->rank);
		free(split);
		if (x->rank < 0)
			return 0;
		int64_t a;
		if (norm_axis(c->node, axis, x->rank, &a) < 0)
			return -1;
		for (size_t i = 0; i < c->nout; i++) {
			for (int k = 0; k < x->rank; k++)
				c->out[i]->dims[k] = x->dims[k];
			c->out[i]->dims[a] = (Dim){-1, NULL};
		}
		return 0;
	}
	if (s) {
		free(split);
		if (op_tensor_ints(c->node, s->value, "split", &split, &n) < 0)
			return -1;
	}
	int ret = 0;
	for (size_t i = 0; i < c->nout; i++)
		vt_set_tensor(c->out[i], x->elem, x->rank);
	if (x->rank >= 0) {
		int64_t a, *sizes = xmalloc(sizeof *sizes * (c->nout ? c->nout : 1));
		ret = norm_axis(c->node, axis, x->rank, &a);
		if (ret == 0)
			ret = split_sizes(c->node, c->opset, split, n, c->nout, x->dims[a].v, sizes);
		for (size_t i = 0; ret == 0 && i < c->nout; i++) {
			for (int k = 0; k < x->rank; k++)
				c->out[i]->dims[k] = x->dims[k];
			c->out[i]->dims[a] = sizes[i] >= 0 ? dim_known(sizes[i]) : (Dim){-1, NULL};
		}
		free(sizes);
	}
	free(split);
	return ret;
}

static int split_run(RunCtx *c)
{
	if (run_need(c, 0) < 0)
		return -1;
	const Tensor *x = c->in[0];
	int64_t axis, *split = NULL, n = 0, a;
	size_t es;
	if (attr_int(c->node, "axis", 0, &axis) < 0 || split_attr(c->node, c->opset, &split, &n) < 0)
		return -1;
	if (c->nin > 1 && c->in[1]) {
		free(split);
		if (op_tensor_ints(c->node, c->in[1], "split", &split, &n) < 0)
			return -1;
	}
	int64_t *sizes = xmalloc(sizeof *sizes * (c->nout ? c->nout : 1));
	int ret = -1;
	if (x->rank == 0) {
		op_error(c->node, "cannot split a scalar");
		goto out;
	}
	if (norm_axis(c->node, axis, x->rank, &a) < 0 ||
	    op_elemsize(c->node, c->opset, x->dtype, &es) < 0 ||
	    split_sizes(c->node, c->opset, split, n, c->nout, x->dims[a], sizes) < 0)
		goto out;
	int64_t outer = shape_numel((int)a, x->dims);
	int64_t inner = shape_numel(x->rank - (int)a - 1, x->dims + a + 1);
	size_t xrow = (size_t)(x->dims[a] * inner) * es, off = 0;
	for (size_t i = 0; i < c->nout; i++) {
		int64_t dims[QM_MAX_RANK];
		memcpy(dims, x->dims, sizeof dims[0] * (size_t)x->rank);
		dims[a] = sizes[i];
		if (op_output(c, i, x->dtype, x->rank, dims) < 0)
			goto out;
		size_t row = (size_t)(sizes[i] * inner) * es;
		char *o = c->out[i]->data;
		for (int64_t j = 0; j < outer && row; j++)
			memcpy(o + (size_t)j * row, (const char *)x->data + (size_t)j * xrow + off, row);
		off += row;
	}
	ret = 0;
out:
	free(sizes);
	free(split);
	return ret;
}

OPERATOR(ai_onnx, Split, 1, split_infer, split_run)

/* ---- Slice ---- */

/* Clamp start/end of one axis of size dim; *first = first index, *count =
 * number of elements taken. */
static void slice_axis(int64_t dim, int64_t start, int64_t end, int64_t step, int64_t *first,
		       int64_t *count)
{
	if (start < 0)
		start += dim;
	if (end < 0)
		end += dim;
	int64_t n = 0;
	if (step > 0) {
		start = start < 0 ? 0 : start > dim ? dim : start;
		end = end < 0 ? 0 : end > dim ? dim : end;
		if (end > start)
			n = (end - start - 1) / step + 1;
	} else {
		start = start < 0 ? -1 : start > dim - 1 ? dim - 1 : start;
		end = end < -1 ? -1 : end > dim - 1 ? dim - 1 : end;
		if (start > end)
			n = (start - end - 1) / -step + 1;
	}
	*first = start;
	*count = n;
}

typedef struct SliceArgs {
	int64_t *starts, *ends, *axes, *steps;
	int64_t n;
} SliceArgs;

static void slice_args_free(SliceArgs *s)
{
	free(s->starts);
	free(s->ends);
	free(s->axes);
	free(s->steps);
	memset(s, 0, sizeof *s);
}

static int attr_list(const Onnx__NodeProto *n, const char *name, int64_t **out, int64_t *len)
{
	const int64_t *v;
	size_t l;
	*out = NULL;
	*len = 0;
	if (attr_ints(n, name, &v, &l) < 0)
		return -1;
	if (v) {
		*out = xmalloc(sizeof **out * (l ? l : 1));
		memcpy(*out, v, sizeof **out * l);
		*len = (int64_t)l;
	}
	return 0;
}

/* Complete and check the arguments against rank: default axes and steps,
 * normalized axes, no zero step, no repeated axis. */
static int slice_check(const Onnx__NodeProto *node, SliceArgs *s, int64_t nends, int64_t naxes,
		       int64_t nsteps, int rank)
{
	if (!s->starts || !s->ends)
		return op_error(node, "starts and ends are required");
	if (nends != s->n)
		return op_error(node, "starts has %lld entries, ends %lld", (long long)s->n,
				(long long)nends);
	if (!s->axes) {
		if (s->n > rank)
			return op_error(node, "starts has %lld entries for rank %d", (long long)s->n, rank);
		s->axes = xmalloc(sizeof *s->axes * (size_t)(s->n ? s->n : 1));
		for (int64_t i = 0; i < s->n; i++)
			s->axes[i] = i;
	} else if (naxes != s->n) {
		return op_error(node, "axes has %lld entries, starts %lld", (long long)naxes,
				(long long)s->n);
	}
	if (!s->steps) {
		s->steps = xmalloc(sizeof *s->steps * (size_t)(s->n ? s->n : 1));
		for (int64_t i = 0; i < s->n; i++)
			s->steps[i] = 1;
	} else if (nsteps != s->n) {
		return op_error(node, "steps has %lld entries, starts %lld", (long long)nsteps,
				(long long)s->n);
	}
	char seen[QM_MAX_RANK] = {0};
	for (int64_t i = 0; i < s->n; i++) {
		int64_t a;
		if (norm_axis(node, s->axes[i], rank, &a) < 0)
			return -1;
		if (seen[a])
			return op_error(node, "axis %lld is repeated", (long long)s->axes[i]);
		seen[a] = 1;
		s->axes[i] = a;
		if (s->steps[i] == 0)
			return op_error(node, "step of axis %lld is 0", (long long)a);
	}
	return 0;
}

static int slice_infer(InferCtx *c)
{
	if (infer_need(c, 0) < 0)
		return -1;
	const ValueType *x = c->in[0];
	ValueType *y = c->out[0];
	SliceArgs s = {0};
	int64_t nends = 0, naxes = 0, nsteps = 0;
	vt_set_tensor(y, x->elem, x->rank);
	if (x->rank < 0)
		return 0;
	for (int k = 0; k < x->rank; k++)
		y->dims[k] = x->dims[k];
	if (c->opset < 10) {
		if (attr_list(c->node, "starts", &s.starts, &s.n) < 0 ||
		    attr_list(c->node, "ends", &s.ends, &nends) < 0 ||
		    attr_list(c->node, "axes", &s.axes, &naxes) < 0)
			goto fail;
	} else {
		const ValueType *v[4];
		for (size_t i = 1; i < 5; i++)
			v[i - 1] = i < c->nin ? c->in[i] : NULL;
		if (!v[0] || !v[1])
			return op_error(c->node, "starts and ends are required");
		if ((v[2] && !v[2]->value) || (v[3] && !v[3]->value)) {
			/* unknown axes or steps: any axis may change */
			for (int k = 0; k < x->rank; k++)
				y->dims[k] = (Dim){-1, NULL};
			return 0;
		}
		if ((v[2] && op_tensor_ints(c->node, v[2]->value, "axes", &s.axes, &naxes) < 0) ||
		    (v[3] && op_tensor_ints(c->node, v[3]->value, "steps", &s.steps, &nsteps) < 0))
			goto fail;
		if (!v[0]->value || !v[1]->value) {
			/* unknown starts/ends: the sliced axes become unknown */
			int64_t n = v[0]->rank == 1 ? v[0]->dims[0].v : -1;
			if (!s.axes && n < 0) {
				for (int k = 0; k < x->rank; k++)
					y->dims[k] = (Dim){-1, NULL};
			} else if (!s.axes) {
				for (int64_t k = 0; k < n && k < x->rank; k++)
					y->dims[k] = (Dim){-1, NULL};
			} else {
				for (int64_t i = 0; i < naxes; i++) {
					int64_t a;
					if (norm_axis(c->node, s.axes[i], x->rank, &a) < 0)
						goto fail;
					y->dims[a] = (Dim){-1, NULL};
				}
			}
			slice_args_free(&s);
			return 0;
		}
		if (op_tensor_ints(c->node, v[0]->value, "starts", &s.starts, &s.n) < 0 ||
		    op_tensor_ints(c->node, v[1]->value, "ends", &s.ends, &nends) < 0)
			goto fail;
	}
	if (slice_check(c->node, &s, nends, naxes, s.steps ? nsteps : 0, x->rank) < 0)
		goto fail;
	for (int64_t i = 0; i < s.n; i++) {
		int64_t a = s.axes[i], first, cnt;
		Dim d = x->dims[a];
		if (d.v >= 0) {
			slice_axis(d.v, s.starts[i], s.ends[i], s.steps[i], &first, &cnt);
			y->dims[a] = dim_known(cnt);
		} else if ((s.steps[i] == 1 && s.starts[i] == 0 && s.ends[i] >= INT32_MAX) ||
			   (s.steps[i] == -1 && s.starts[i] == -1 && s.ends[i] <= -INT32_MAX)) {
			y->dims[a] = d;   /* the whole axis */
		} else if (s.steps[i] > 0 && s.starts[i] >= 0 && s.ends[i] >= 0 && s.ends[i] <= s.starts[i]) {
			y->dims[a] = dim_known(0);
		} else {
			y->dims[a] = (Dim){-1, NULL};
		}
	}
	/* shape data */
	if (x->rank == 1 && s.n == 1) {
		int64_t n, first, cnt;
		Dim *d = vt_get_symval(x, &n);
		if (d) {
			slice_axis(n, s.starts[0], s.ends[0], s.steps[0], &first, &cnt);
			Dim *o = xmalloc(sizeof *o * (size_t)(cnt ? cnt : 1));
			for (int64_t i = 0; i < cnt; i++)
				o[i] = d[first + i * s.steps[0]];
			if (y->dims[0].v < 0 || y->dims[0].v == cnt)
				vt_put_symval(y, o, cnt);
			free(o);
			free(d);
		}
	}
	slice_args_free(&s);
	return 0;
fail:
	slice_args_free(&s);
	return -1;
}

static int slice_run(RunCtx *c)
{
	if (run_need(c, 0) < 0)
		return -1;
	const Tensor *x = c->in[0];
	SliceArgs s = {0};
	int64_t nends = 0, naxes = 0, nsteps = 0;
	size_t es;
	if (op_elemsize(c->node, c->opset, x->dtype, &es) < 0)
		return -1;
	if (c->opset < 10) {
		if (attr_list(c->node, "starts", &s.starts, &s.n) < 0 ||
		    attr_list(c->node, "ends", &s.ends, &nends) < 0 ||
		    attr_list(c->node, "axes", &s.axes, &naxes) < 0)
			goto fail;
	} else {
		if (c->nin < 3 || !c->in[1] || !c->in[2]) {
			op_error(c->node, "starts and ends are required");
			goto fail;
		}
		if (op_tensor_ints(c->node, c->in[1], "starts", &s.starts, &s.n) < 0 ||
		    op_tensor_ints(c->node, c->in[2], "ends", &s.ends, &nends) < 0 ||
		    (c->nin > 3 && c->in[3] &&
		     op_tensor_ints(c->node, c->in[3], "axes", &s.axes, &naxes) < 0) ||
		    (c->nin > 4 && c->in[4] &&
		     op_tensor_ints(c->node, c->in[4], "steps", &s.steps, &nsteps) < 0))
			goto fail;
	}
	if (slice_check(c->node, &s, nends, naxes, nsteps, x->rank) < 0)
		goto fail;
	int64_t first[QM_MAX_RANK], step[QM_MAX_RANK], dims[QM_MAX_RANK], xs[QM_MAX_RANK];
	for (int k = 0; k < x->rank; k++) {
		first[k] = 0;
		step[k] = 1;
		dims[k] = x->dims[k];
	}
	for (int64_t i = 0; i < s.n; i++) {
		int64_t a = s.axes[i];
		slice_axis(x->dims[a], s.starts[i], s.ends[i], s.steps[i], &first[a], &dims[a]);
		step[a] = s.steps[i];
	}
	slice_args_free(&s);
	dims_strides(x->rank, x->dims, xs);
	int64_t base = 0;
	for (int k = 0; k < x->rank; k++) {
		if (dims[k] > 0)
			base += first[k] * xs[k];
		xs[k] *= step[k];
	}
	/* a contiguous range of x (each axis longer than 1 steps by the
	 * elements after it): a constant's is read in place */
	int64_t run = 1;
	int range = 1;
	for (int k = x->rank; k-- > 0;) {
		if (dims[k] > 1 && xs[k] != run)
			range = 0;
		run *= dims[k];
	}
	int v = range && run > 0 ? op_output_view(c, 0, x, (size_t)base * es, x->dtype, x->rank, dims)
				 : op_output(c, 0, x->dtype, x->rank, dims);
	if (v < 0)
		return -1;
	if (!v)
		strided_copy(c->out[0]->data, x->data, es, x->rank, dims, xs, base);
	return 0;
fail:
	slice_args_free(&s);
	return -1;
}

OPERATOR(ai_onnx, Slice, 1, slice_infer, slice_run)

/* ---- Identity ---- */

static int identity_infer(InferCtx *c)
{
	if (infer_need(c, 0) < 0)
		return -1;
	return vt_copy(c->out[0], c->in[0]);
}

static int identity_run(RunCtx *c)
{
	if (run_need(c, 0) < 0)
		return -1;
	const Tensor *x = c->in[0];
	if (x->kind != TK_TENSOR || x->dtype == DT_STRING) /* containers, strings (onnx/tensor.h) */
		return tensor_copy(c->out[0], x);
	return copy_reshaped(c, x, x->rank, x->dims);
}

OPERATOR(ai_onnx, Identity, 1, identity_infer, identity_run)

/* ---- Constant ---- */

/* The tensor a Constant node produces, built from whichever value_*
 * attribute it carries. */
static int constant_tensor(const Onnx__NodeProto *n, int64_t opset, Tensor *t)
{
	const Onnx__AttributeProto *a = NULL;
	int found = 0;
	for (size_t i = 0; i < n->n_attribute; i++) {
		const char *nm = n->attribute[i]->name;
		if (nm && (!strcmp(nm, "value") || !strncmp(nm, "value_", 6) ||
			   !strcmp(nm, "sparse_value"))) {
			a = n->attribute[i];
			found++;
		}
	}
	if (found != 1)
		return op_error(n, "exactly one value attribute is required, found %d", found);
	memset(t, 0, sizeof *t);
	const char *nm = a->name;
	if (!strcmp(nm, "value")) {
		const Onnx__TensorProto *p;
		if (attr_tensor(n, "value", &p) < 0)
			return -1;
		if (p->has_data_location &&
		    p->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL)
			return op_error(n, "a value attribute with external data is not supported");
		if (p->has_data_type && (p->data_type == DT_STRING || dtype_bits(p->data_type) == 0))
			return op_unsupported_type(n, opset, p->data_type);
		return tensor_from_proto(NULL, p, t);
	}
	if (!strcmp(nm, "value_float")) {
		float v;
		if (attr_float(n, nm, 0, &v) < 0 || tensor_alloc(t, DT_FLOAT, 0, NULL) < 0)
			return -1;
		memcpy(t->data, &v, 4);
		return 0;
	}
	if (!strcmp(nm, "value_int")) {
		int64_t v;
		if (attr_int(n, nm, 0, &v) < 0 || tensor_alloc(t, DT_INT64, 0, NULL) < 0)
			return -1;
		memcpy(t->data, &v, 8);
		return 0;
	}
	if (!strcmp(nm, "value_floats")) {
		const float *v;
		size_t len;
		if (attr_floats(n, nm, &v, &len) < 0)
			return -1;
		int64_t d = (int64_t)len;
		if (tensor_alloc(t, DT_FLOAT, 1, &d) < 0)
			return -1;
		if (len)
			memcpy(t->data, v, 4 * len);
		return 0;
	}
	if (!strcmp(nm, "value_ints")) {
		const int64_t *v;
		size_t len;
		if (attr_ints(n, nm, &v, &len) < 0)
			return -1;
		int64_t d = (int64_t)len;
		if (tensor_alloc(t, DT_INT64, 1, &d) < 0)
			return -1;
		if (len)
			memcpy(t->data, v, 8 * len);
		return 0;
	}
	if (!strcmp(nm, "value_string") || !strcmp(nm, "value_strings"))
		return op_unsupported_type(n, opset, DT_STRING);
	if (!strcmp(nm, "sparse_value")) {
		const Onnx__SparseTensorProto *sp = a->sparse_tensor;
		if (!sp || !sp->values || !sp->indices)
			return op_error(n, "sparse_value lacks values or indices");
		if ((int)sp->n_dims > QM_MAX_RANK)
			return op_error(n, "sparse_value has rank %zu", sp->n_dims);
		Tensor vals = {0}, idx = {0};
		int ret = -1;
		if (tensor_from_proto(NULL, sp->values, &vals) < 0 ||
		    tensor_from_proto(NULL, sp->indices, &idx) < 0)
			goto sparse_out;
		size_t es;
		if (op_elemsize(n, opset, vals.dtype, &es) < 0 ||
		    tensor_alloc(t, vals.dtype, (int)sp->n_dims, sp->dims) < 0)
			goto sparse_out;
		int64_t nnz = vals.numel, r = (int64_t)sp->n_dims, st[QM_MAX_RANK];
		dims_strides((int)r, sp->dims, st);
		int linear = idx.rank == 1;
		if (idx.dtype != DT_INT64 || (linear ? idx.dims[0] != nnz :
				idx.rank != 2 || idx.dims[0] != nnz || idx.dims[1] != r)) {
			op_error(n, "sparse_value indices must be int64 [%lld] or [%lld,%lld]",
				 (long long)nnz, (long long)nnz, (long long)r);
			goto sparse_out;
		}
		for (int64_t i = 0; i < nnz; i++) {
			int64_t off = 0;
			if (linear) {
				off = tensor_get_i64(&idx, i);
			} else {
				for (int64_t k = 0; k < r; k++) {
					int64_t v = tensor_get_i64(&idx, i * r + k);
					if (v < 0 || v >= sp->dims[k]) {
						off = -1;
						break;
					}
					off += v * st[k];
				}
			}
			if (off < 0 || off >= t->numel) {
				op_error(n, "sparse_value index %lld is out of range", (long long)i);
				goto sparse_out;
			}
			memcpy((char *)t->data + (size_t)off * es, (char *)vals.data + (size_t)i * es, es);
		}
		ret = 0;
sparse_out:
		tensor_free(&vals);
		tensor_free(&idx);
		if (ret < 0)
			tensor_free(t);
		return ret;
	}
	return op_error(n, "unknown value attribute '%s'", nm);
}

/* the type a Constant produces, read from its attribute without copying the
 * data (the pass folds small constants into values by running the kernel) */
static int constant_infer(InferCtx *c)
{
	const Onnx__NodeProto *n = c->node;
	ValueType *y = c->out[0];
	const Onnx__AttributeProto *a = NULL;
	int found = 0;
	for (size_t i = 0; i < n->n_attribute; i++) {
		const char *nm = n->attribute[i]->name;
		if (nm && (!strcmp(nm, "value") || !strncmp(nm, "value_", 6) ||
			   !strcmp(nm, "sparse_value"))) {
			a = n->attribute[i];
			found++;
		}
	}
	if (found != 1)
		return op_error(n, "exactly one value attribute is required, found %d", found);
	const char *nm = a->name;
	const Onnx__TensorProto *t = NULL;
	const int64_t *dims = NULL;
	size_t rank = 0;
	int elem;
	if (!strcmp(nm, "value")) {
		if (attr_tensor(n, nm, &t) < 0)
			return -1;
		if (!t)
			return op_error(n, "attribute 'value' holds no tensor");
		elem = t->has_data_type ? t->data_type : 0;
		dims = t->dims;
		rank = t->n_dims;
	} else if (!strcmp(nm, "sparse_value")) {
		if (!a->sparse_tensor || !a->sparse_tensor->values)
			return op_error(n, "sparse_value lacks values");
		t = a->sparse_tensor->values;
		elem = t->has_data_type ? t->data_type : 0;
		dims = a->sparse_tensor->dims;
		rank = a->sparse_tensor->n_dims;
	} else if (!strcmp(nm, "value_float") || !strcmp(nm, "value_int") || !strcmp(nm, "value_string")) {
		elem = nm[6] == 'f' ? DT_FLOAT : nm[6] == 'i' ? DT_INT64 : DT_STRING;
	} else if (!strcmp(nm, "value_floats") || !strcmp(nm, "value_ints") || !strcmp(nm, "value_strings")) {
		elem = nm[6] == 'f' ? DT_FLOAT : nm[6] == 'i' ? DT_INT64 : DT_STRING;
		vt_set_tensor(y, elem, 1);
		y->dims[0] = dim_known((int64_t)(elem == DT_FLOAT ? a->n_floats :
						 elem == DT_INT64 ? a->n_ints : a->n_strings));
		return 0;
	} else {
		return op_error(n, "unknown value attribute '%s'", nm);
	}
	if (rank > QM_MAX_RANK)
		return op_error(n, "%s has rank %zu, more than the supported %d", nm, rank, QM_MAX_RANK);
	if (elem <= 0 || elem >= DT_MAX)
		return op_error(n, "%s has unknown element type %d", nm, elem);
	vt_set_tensor(y, elem, (int)rank);
	for (size_t i = 0; i < rank; i++) {
		if (dims[i] < 0)
			return op_error(n, "%s has a negative dimension", nm);
		y->dims[i] = dim_known(dims[i]);
	}
	return 0;
}

static int constant_run(RunCtx *c)
{
	const Onnx__AttributeProto *a = node_attr(c->node, "value");
	if (a && a->t && c->node->n_attribute == 1) {
		/* the common case, straight from the attribute's bytes: one copy */
		const Onnx__TensorProto *p = a->t;
		const void *data;
		size_t len;
		int owned;
		if (p->has_data_location && p->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL)
			return op_error(c->node, "a value attribute with external data is not supported");
		if (p->has_data_type && p->data_type == DT_STRING) { /* one block (onnx/tensor.h) */
			Tensor t;
			if (tensor_from_proto(NULL, p, &t) < 0)
				return op_error(c->node, "%s", errmsg());
			free(t.name);
			t.name = NULL;
			tensor_free(c->out[0]);
			*c->out[0] = t;
			return 0;
		}
		if (p->has_data_type && dtype_bits(p->data_type) == 0)
			return op_unsupported_type(c->node, c->opset, p->data_type);
		if (p->n_dims > QM_MAX_RANK)
			return op_error(c->node, "value has rank %zu, more than the supported %d", p->n_dims,
					QM_MAX_RANK);
		if (model_tensor_bytes(NULL, p, &data, &len, &owned) < 0)
			return -1;
		int r = op_output(c, 0, p->data_type, (int)p->n_dims, p->dims);
		if (r == 0 && len != c->out[0]->nbytes)
			r = op_error(c->node, "value holds %zu bytes, expected %zu", len, c->out[0]->nbytes);
		if (r == 0 && len)
			memcpy(c->out[0]->data, data, len);
		if (owned)
			free((void *)data);
		return r;
	}
	Tensor t;
	if (constant_tensor(c->node, c->opset, &t) < 0)
		return -1;
	int r = copy_reshaped(c, &t, t.rank, t.dims);
	tensor_free(&t);
	return r;
}

OPERATOR(ai_onnx, Constant, 1, constant_infer, constant_run)

/* ---- ConstantOfShape ---- */

static int cos_value(const Onnx__NodeProto *n, int64_t opset, Tensor *v)
{
	const Onnx__TensorProto *p;
	memset(v, 0, sizeof *v);
	if (attr_tensor(n, "value", &p) < 0)
		return -1;
	if (!p)
		return tensor_alloc(v, DT_FLOAT, 0, NULL);
	if (p->has_data_type && (p->data_type == DT_STRING || dtype_bits(p->data_type) < 8))
		return op_unsupported_type(n, opset, p->data_type);
	if (tensor_from_proto(NULL, p, v) < 0)
		return -1;
	if (v->numel != 1) {
		int64_t k = v->numel;
		tensor_free(v);
		return op_error(n, "value must hold one element, has %lld", (long long)k);
	}
	return 0;
}

static int cos_infer(InferCtx *c)
{
	if (infer_need(c, 0) < 0)
		return -1;
	const Onnx__TensorProto *p;
	if (attr_tensor(c->node, "value", &p) < 0)
		return -1;
	int elem = p ? (p->has_data_type ? p->data_type : 0) : DT_FLOAT;
	ValueType *y = c->out[0];
	const ValueType *s = c->in[0];
	int64_t n;
	Dim *sh = vt_get_symval(s, &n);
	if (!sh) {
		vt_set_tensor(y, elem, s->rank == 1 && s->dims[0].v >= 0 && s->dims[0].v <= QM_MAX_RANK ?
			      (int)s->dims[0].v : -1);
		return 0;
	}
	if (n > QM_MAX_RANK) {
		free(sh);
		return op_error(c->node, "shape has %lld dims, more than the supported %d",
				(long long)n, QM_MAX_RANK);
	}
	vt_set_tensor(y, elem, (int)n);
	for (int i = 0; i < n; i++) {
		if (!sh[i].sym && sh[i].v < 0 && s->value) {
			int64_t v = sh[i].v;
			free(sh);
			return op_error(c->node, "negative dimension %lld", (long long)v);
		}
		y->dims[i] = sh[i].sym || sh[i].v >= 0 ? sh[i] : (Dim){-1, NULL};
	}
	free(sh);
	return 0;
}

static int cos_run(RunCtx *c)
{
	if (run_need(c, 0) < 0)
		return -1;
	int64_t *sh, n;
	Tensor v;
	if (op_tensor_ints(c->node, c->in[0], "shape", &sh, &n) < 0)
		return -1;
	int ret = -1;
	if (cos_value(c->node, c->opset, &v) < 0)
		goto out;
	if (n > QM_MAX_RANK) {
		op_error(c->node, "shape has %lld dims, more than the supported %d", (long long)n,
			 QM_MAX_RANK);
		goto out2;
	}
	for (int64_t i = 0; i < n; i++)
		if (sh[i] < 0) {
			op_error(c->node, "negative dimension %lld", (long long)sh[i]);
			goto out2;
		}
	if (op_output(c, 0, v.dtype, (int)n, sh) < 0)
		goto out2;
	Tensor *y = c->out[0];
	for (int64_t i = 0; i < y->numel; i++)
		memcpy((char *)y->data + (size_t)i * v.nbytes, v.data, v.nbytes);
	ret = 0;
out2:
	tensor_free(&v);
out:
	free(sh);
	return ret;
}

OPERATOR(ai_onnx, ConstantOfShape, 9, cos_infer, cos_run)

/* ---- Range ---- */

static int range_count(const Onnx__NodeProto *n, int dt, double start, double limit, double delta,
		       int64_t *count)
{
	if (delta == 0)
		return op_error(n, "delta is zero");
	double q = ceil((limit - start) / delta);
	if (dt == DT_FLOAT)
		q = ceil((double)((float)limit - (float)start) / (double)(float)delta);
	if (!(q <= 1e12))
		return op_error(n, "range of %g elements is too large", q);
	*count = q < 0 ? 0 : (int64_t)q;
	return 0;
}

static int range_infer(InferCtx *c)
{
	for (size_t i = 0; i < 3; i++)
		if (infer_need(c, i) < 0)
			return -1;
	ValueType *y = c->out[0];
	vt_set_tensor(y, c->in[0]->elem, 1);
	const Tensor *s = c->in[0]->value, *l = c->in[1]->value, *d = c->in[2]->value;
	if (!s || !l || !d || s->numel != 1 || l->numel != 1 || d->numel != 1)
		return 0;
	int64_t n;
	if (dt_float(s->dtype)) {
		if (range_count(c->node, s->dtype == DT_DOUBLE ? DT_DOUBLE : DT_FLOAT, tensor_get_f64(s, 0), tensor_get_f64(l, 0),
				tensor_get_f64(d, 0), &n) < 0)
			return -1;
	} else {
		int64_t a = tensor_get_i64(s, 0), b = tensor_get_i64(l, 0), st = tensor_get_i64(d, 0);
		if (st == 0)
			return op_error(c->node, "delta is zero");
		n = b > a && st > 0 ? (b - a + st - 1) / st : b < a && st < 0 ? (a - b - st - 1) / -st : 0;
	}
	y->dims[0] = dim_known(n);
	return 0;
}

static int range_run(RunCtx *c)
{
	for (size_t i = 0; i < 3; i++)
		if (run_need(c, i) < 0)
			return -1;
	const Tensor *s = c->in[0], *l = c->in[1], *d = c->in[2];
	int dt = s->dtype;
	if (s->numel != 1 || l->numel != 1 || d->numel != 1)
		return op_error(c->node, "start, limit and delta must be scalars");
	if (l->dtype != dt || d->dtype != dt)
		return op_error(c->node, "start, limit and delta must have one type");
	int64_t n;
	switch (dt) {
	case DT_FLOAT: case DT_DOUBLE: case DT_FLOAT16: case DT_BFLOAT16: {
		double a = tensor_get_f64(s, 0), st = tensor_get_f64(d, 0);
		if (range_count(c->node, dt == DT_DOUBLE ? dt : DT_FLOAT, a, tensor_get_f64(l, 0), st, &n) < 0 ||
		    op_output(c, 0, dt, 1, &n) < 0)
			return -1;
		for (int64_t i = 0; i < n; i++)
			elem_put_f64(dt, c->out[0]->data, i, dt == DT_DOUBLE ? a + (double)i * st :
				     (double)((float)a + (float)i * (float)st));
		return 0;
	}
	case DT_INT16: case DT_INT32: case DT_INT64: {
		int64_t a = tensor_get_i64(s, 0), b = tensor_get_i64(l, 0), st = tensor_get_i64(d, 0);
		if (st == 0)
			return op_error(c->node, "delta is zero");
		n = b > a && st > 0 ? (b - a + st - 1) / st : b < a && st < 0 ? (a - b - st - 1) / -st : 0;
		if (op_output(c, 0, dt, 1, &n) < 0)
			return -1;
		for (int64_t i = 0; i < n; i++)
			elem_put_i64(dt, c->out[0]->data, i, a + i * st);
		return 0;
	}
	default:
		return op_unsupported_type(c->node, c->opset, dt);
	}
}

OPERATOR(ai_onnx, Range, 11, range_infer, range_run)

/* ---- EyeLike ---- */

static int eyelike_type(const Onnx__NodeProto *n, int in, int *dt)
{
	int64_t d;
	if (attr_int(n, "dtype", 0, &d) < 0)
		return -1;
	*dt = d ? (int)d : in;
	return 0;
}

static int eyelike_infer(InferCtx *c)
{
	if (infer_need(c, 0) < 0)
		return -1;
	const ValueType *x = c->in[0];
	int dt;
	if (eyelike_type(c->node, x->elem, &dt) < 0)
		return -1;
	if (x->rank >= 0 && x->rank != 2)
		return op_error(c->node, "input must be 2-D, has rank %d", x->rank);
	vt_set_tensor(c->out[0], dt, 2);
	if (x->rank == 2) {
		c->out[0]->dims[0] = x->dims[0];
		c->out[0]->dims[1] = x->dims[1];
	}
	return 0;
}

static int eyelike_run(RunCtx *c)
{
	if (run_need(c, 0) < 0)
		return -1;
	const Tensor *x = c->in[0];
	int dt;
	int64_t k;
	if (eyelike_type(c->node, x->dtype, &dt) < 0 || attr_int(c->node, "k", 0, &k) < 0)
		return -1;
	if (x->rank != 2)
		return op_error(c->node, "input must be 2-D, has rank %d", x->rank);
	if (!dt_numeric(dt))
		return op_unsupported_type(c->node, c->opset, dt);
	if (op_output(c, 0, dt, 2, x->dims) < 0)
		return -1;
	Tensor *y = c->out[0];
	memset(y->data, 0, y->nbytes);
	for (int64_t i = 0; i < x->dims[0]; i++) {
		int64_t j = i + k;
		if (j >= 0 && j < x->dims[1])
			elem_put_i64(dt, y->data, i * x->dims[1] + j, 1);
	}
	return 0;
}

OPERATOR(ai_onnx, EyeLike, 9, eyelike_infer, eyelike_run)
