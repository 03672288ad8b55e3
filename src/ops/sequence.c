/* sequence.c — sequence and optional values: SequenceEmpty,
 * SequenceConstruct, SequenceInsert, SequenceAt, SequenceErase,
 * SequenceLength, ConcatFromSequence, SplitToSequence, SequenceMap, Optional,
 * OptionalHasElement, OptionalGetElement.
 *
 * At run time a sequence or an optional is a Tensor of kind TK_SEQUENCE or
 * TK_OPTIONAL holding its elements (src/onnx/tensor.h). The interpreter
 * hands containers only to the operators that take them (these, Identity,
 * If and Loop), so every other kernel keeps seeing dense tensors; these
 * kernels check each input's kind themselves. A container output is built
 * in place with tensor_container() and owns copies of its elements. */
#include <stdlib.h>
#include <string.h>

#include "ops/op.h"
#include "ops/shapeutil.h"
#include "onnx/node.h"
#include "util.h"

/* t becomes a container (sequence/optional) of a copy of inner */
static int vt_wrap(ValueType *t, int kind, const ValueType *inner)
{
	vt_clear(t);
	t->kind = kind;
	t->inner = xcalloc(1, sizeof *t->inner);
	t->inner->rank = -1;
	if (!inner)
		return 0;
	if (vt_copy(t->inner, inner) < 0)
		return -1;
	/* contents are not tracked through containers */
	if (t->inner->value) {
		tensor_free(t->inner->value);
		free(t->inner->value);
		t->inner->value = NULL;
	}
	free(t->inner->symval);
	t->inner->symval = NULL;
	t->inner->nsymval = 0;
	return 0;
}

static int want_seq(InferCtx *c, size_t i)
{
	if (infer_need(c, i) < 0)
		return -1;
	if (c->in[i]->kind != VT_SEQUENCE && c->in[i]->kind != VT_UNKNOWN)
		return op_error(c->node, "input %zu must be a sequence", i);
	return 0;
}

/* TypeProto of an attribute into t (dims: values only; dim_param unknown) */
static int vt_from_type(const Onnx__NodeProto *n, const Onnx__TypeProto *tp, ValueType *t)
{
	vt_clear(t);
	if (!tp)
		return 0;
	switch (tp->value_case) {
	case ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE: {
		const Onnx__TypeProto__Tensor *tt = tp->tensor_type;
		int rank = tt && tt->shape ? (int)tt->shape->n_dim : -1;
		if (rank > QM_MAX_RANK)
			return op_error(n, "type has rank %d, more than the supported %d", rank, QM_MAX_RANK);
		vt_set_tensor(t, tt && tt->has_elem_type ? tt->elem_type : 0, rank);
		for (int i = 0; i < rank; i++) {
			const Onnx__TensorShapeProto__Dimension *d = tt->shape->dim[i];
			if (d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE)
				t->dims[i] = dim_known(d->dim_value);
		}
		return 0;
	}
	case ONNX__TYPE_PROTO__VALUE_SEQUENCE_TYPE:
	case ONNX__TYPE_PROTO__VALUE_OPTIONAL_TYPE: {
		int seq = tp->value_case == ONNX__TYPE_PROTO__VALUE_SEQUENCE_TYPE;
		const Onnx__TypeProto *in = seq ? (tp->sequence_type ? tp->sequence_type->elem_type : NULL)
						: (tp->optional_type ? tp->optional_type->elem_type : NULL);
		ValueType inner = {.rank = -1};
		int r = vt_from_type(n, in, &inner);
		if (r == 0)
			r = vt_wrap(t, seq ? VT_SEQUENCE : VT_OPTIONAL, &inner);
		vt_clear(&inner);
		return r;
	}
	default:
		return op_error(n, "type attribute of this kind is not supported");
	}
}

/* ---- sequences ---- */

static int seq_empty_infer(InferCtx *c)
{
	int64_t dt;
	if (attr_int(c->node, "dtype", DT_FLOAT, &dt) < 0)
		return -1;
	ValueType t = {.rank = -1};
	vt_set_tensor(&t, (int)dt, -1);
	if (vt_wrap(c->out[0], VT_SEQUENCE, &t) < 0)
		return -1;
	vt_set_seq_len(c->out[0], 0);
	return 0;
}

static int seq_construct_infer(InferCtx *c)
{
	if (c->nin < 1)
		return op_error(c->node, "at least one input is required");
	ValueType u = {.rank = -1};
	for (size_t i = 0; i < c->nin; i++) {
		if (infer_need(c, i) < 0) {
			vt_clear(&u);
			return -1;
		}
		if (c->in[i]->elem && c->in[0]->elem && c->in[i]->elem != c->in[0]->elem) {
			vt_clear(&u);
			return op_error(c->node, "input %zu is %s, input 0 is %s", i,
					dtype_name(c->in[i]->elem), dtype_name(c->in[0]->elem));
		}
		if (i == 0)
			vt_copy(&u, c->in[0]);
		else
			vt_join(&u, &u, c->in[i]);
	}
	int r = vt_wrap(c->out[0], VT_SEQUENCE, &u);
	vt_clear(&u);
	vt_set_seq_len(c->out[0], (int64_t)c->nin);
	return r;
}

static int seq_insert_infer(InferCtx *c)
{
	if (want_seq(c, 0) < 0 || infer_need(c, 1) < 0)
		return -1;
	const ValueType *s = c->in[0], *t = c->in[1];
	int64_t n = vt_seq_len(s);
	if (s->inner && s->inner->elem && t->elem && s->inner->elem != t->elem)
		return op_error(c->node, "cannot insert %s into a sequence of %s", dtype_name(t->elem),
				dtype_name(s->inner->elem));
	ValueType u = {.rank = -1};
	if (n == 0 || !s->inner)
		vt_copy(&u, t);   /* an empty sequence constrains nothing */
	else
		vt_join(&u, s->inner, t);
	if (!u.elem && u.kind == VT_TENSOR)
		u.elem = s->inner && s->inner->elem ? s->inner->elem : t->elem;
	int r = vt_wrap(c->out[0], VT_SEQUENCE, &u);
	vt_clear(&u);
	vt_set_seq_len(c->out[0], n >= 0 ? n + 1 : -1);
	return r;
}

static int seq_at_infer(InferCtx *c)
{
	if (want_seq(c, 0) < 0 || infer_need(c, 1) < 0)
		return -1;
	const ValueType *s = c->in[0];
	if (!s->inner)
		return 0;
	if (vt_copy(c->out[0], s->inner) < 0)
		return -1;
	if (c->out[0]->kind == VT_UNKNOWN)
		vt_set_tensor(c->out[0], 0, -1);
	return 0;
}

static int seq_erase_infer(InferCtx *c)
{
	if (want_seq(c, 0) < 0)
		return -1;
	int64_t n = vt_seq_len(c->in[0]);
	if (n == 0)
		return op_error(c->node, "cannot erase from an empty sequence");
	if (vt_copy(c->out[0], c->in[0]) < 0)
		return -1;
	vt_set_seq_len(c->out[0], n > 0 ? n - 1 : -1);
	return 0;
}

static int seq_length_infer(InferCtx *c)
{
	if (want_seq(c, 0) < 0)
		return -1;
	vt_set_tensor(c->out[0], DT_INT64, 0);
	int64_t n = vt_seq_len(c->in[0]);
	if (n >= 0) {
		Dim d = dim_known(n);
		vt_put_symval(c->out[0], &d, 1);
	}
	return 0;
}

static int concat_from_seq_infer(InferCtx *c)
{
	if (want_seq(c, 0) < 0)
		return -1;
	int64_t axis, newaxis;
	if (attr_int(c->node, "axis", INT64_MIN, &axis) < 0 || attr_int(c->node, "new_axis", 0, &newaxis) < 0)
		return -1;
	if (axis == INT64_MIN)
		return op_error(c->node, "attribute 'axis' is required");
	const ValueType *in = c->in[0]->inner;
	ValueType *y = c->out[0];
	if (!in || in->rank < 0) {
		vt_set_tensor(y, in ? in->elem : 0, -1);
		return 0;
	}
	int r = in->rank + (newaxis ? 1 : 0);
	if (r > QM_MAX_RANK)
		return op_error(c->node, "result rank %d exceeds the supported %d", r, QM_MAX_RANK);
	int64_t a;
	if (norm_axis(c->node, axis, r, &a) < 0)
		return -1;
	vt_set_tensor(y, in->elem, r);
	int64_t n = vt_seq_len(c->in[0]);
	for (int i = 0, k = 0; i < r; i++) {
		if (i == a) {
			y->dims[i] = (Dim){-1, NULL};
			if (newaxis && n >= 0)
				y->dims[i] = dim_known(n);
			else if (!newaxis && n >= 0 && in->dims[k].v >= 0)
				y->dims[i] = dim_known(n * in->dims[k].v);
			if (!newaxis)
				k++;
		} else {
			y->dims[i] = in->dims[k++];
		}
	}
	return 0;
}

static int split_to_seq_infer(InferCtx *c)
{
	if (infer_need(c, 0) < 0)
		return -1;
	const ValueType *x = c->in[0];
	const ValueType *sp = c->nin > 1 ? c->in[1] : NULL;
	int64_t axis, keep;
	if (attr_int(c->node, "axis", 0, &axis) < 0 || attr_int(c->node, "keepdims", 1, &keep) < 0)
		return -1;
	ValueType e = {.rank = -1};
	if (x->rank < 0) {
		vt_set_tensor(&e, x->elem, -1);
		return vt_wrap(c->out[0], VT_SEQUENCE, &e);
	}
	int64_t a;
	if (norm_axis(c->node, axis, x->rank, &a) < 0)
		return -1;
	Dim d = {-1, NULL};
	int drop = 0;
	if (!sp) {
		d = dim_known(1);
		drop = !keep;
	} else if (sp->value) {
		const Tensor *v = sp->value;
		if (v->rank == 0) {
			int64_t s = tensor_get_i64(v, 0);
			if (x->dims[a].v >= 0 && s > 0 && x->dims[a].v % s == 0)
				d = dim_known(s);
		} else if (v->numel > 0) {
			int64_t s0 = tensor_get_i64(v, 0);
			int same = 1;
			for (int64_t i = 1; i < v->numel; i++)
				same &= tensor_get_i64(v, i) == s0;
			if (same)
				d = dim_known(s0);
		}
	}
	vt_set_tensor(&e, x->elem, x->rank - drop);
	for (int i = 0, k = 0; i < x->rank; i++) {
		if (i == a) {
			if (!drop)
				e.dims[k++] = d;
		} else {
			e.dims[k++] = x->dims[i];
		}
	}
	return vt_wrap(c->out[0], VT_SEQUENCE, &e);
}

static int seq_map_infer(InferCtx *c)
{
	const Onnx__GraphProto *g;
	if (attr_graph(c->node, "body", &g) < 0)
		return -1;
	if (!g)
		return op_error(c->node, "attribute 'body' (a graph) is required");
	if (want_seq(c, 0) < 0)
		return -1;
	ValueType *bin = xcalloc(c->nin ? c->nin : 1, sizeof *bin);
	ValueType *bout = xcalloc(c->nout ? c->nout : 1, sizeof *bout);
	const ValueType **pin = xcalloc(c->nin ? c->nin : 1, sizeof *pin);
	int ret = -1;
	for (size_t i = 0; i < c->nin; i++) {
		bin[i].rank = -1;
		if (infer_need(c, i) < 0)
			goto out;
		const ValueType *t = c->in[i];
		if (t->kind == VT_SEQUENCE) {
			if (t->inner && vt_copy(&bin[i], t->inner) < 0)
				goto out;
		} else if (vt_copy(&bin[i], t) < 0) {
			goto out;
		}
		pin[i] = &bin[i];
	}
	for (size_t i = 0; i < c->nout; i++)
		bout[i].rank = -1;
	if (infer_subgraph(c, g, c->nin, pin, c->nout, bout) < 0)
		goto out;
	for (size_t i = 0; i < c->nout; i++) {
		/* one element per element of the first input */
		if (vt_wrap(c->out[i], VT_SEQUENCE, &bout[i]) < 0)
			goto out;
		vt_set_seq_len(c->out[i], vt_seq_len(c->in[0]));
	}
	ret = 0;
out:
	for (size_t i = 0; i < c->nin; i++)
		vt_clear(&bin[i]);
	for (size_t i = 0; i < c->nout; i++)
		vt_clear(&bout[i]);
	free(bin);
	free(bout);
	free(pin);
	return ret;
}


/* ---- sequence kernels ---- */

/* input i, which must be present and of the given kind */
static const Tensor *in_kind(RunCtx *c, size_t i, int kind)
{
	if (run_need(c, i) < 0)
		return NULL;
	const Tensor *t = c->in[i];
	if (t->kind != kind) {
		op_error(c->node, "input %zu ('%s') is a %s, a %s is expected", i, c->node->input[i],
			 tensor_kind_name(t->kind), tensor_kind_name(kind));
		return NULL;
	}
	return t;
}

/* output i becomes an empty container of the given kind */
static Tensor *container_out(RunCtx *c, size_t i, int kind, int elem)
{
	if (i >= c->nout) {
		op_error(c->node, "output %zu requested but the node has %zu outputs", i, c->nout);
		return NULL;
	}
	tensor_container(c->out[i], kind, elem);
	return c->out[i];
}

/* output i becomes a copy of v (a tensor or a container) */
static int value_out(RunCtx *c, size_t i, const Tensor *v)
{
	if (v->kind != TK_TENSOR) {
		Tensor *o = container_out(c, i, v->kind, v->dtype);
		return o ? tensor_copy(o, v) : -1;
	}
	if (v->dtype == DT_STRING) /* one block, sized by its contents */
		return i < c->nout ? tensor_copy(c->out[i], v) : op_error(c->node, "no output %zu", i);
	if (op_output(c, i, v->dtype, v->rank, v->dims) < 0)
		return -1;
	if (v->nbytes)
		memcpy(c->out[i]->data, v->data, v->nbytes);
	return 0;
}

/* the position input i (a scalar int32/int64), normalized against n
 * (valid: -n <= p < n + extra); absent: dflt */
static int position(RunCtx *c, size_t i, int64_t n, int extra, int64_t dflt, int64_t *out)
{
	*out = dflt;
	if (i >= c->nin || !c->in[i])
		return 0;
	const Tensor *p = c->in[i];
	if (p->kind != TK_TENSOR || p->numel != 1 || (p->dtype != DT_INT32 && p->dtype != DT_INT64))
		return op_error(c->node, "position ('%s') must be one int32 or int64", c->node->input[i]);
	int64_t v = elem_get_i64(p->dtype, p->data, 0);
	if (v < -n || v >= n + extra)
		return op_error(c->node, "position %lld is out of range for a sequence of %lld elements",
				(long long)v, (long long)n);
	*out = v < 0 ? v + n : v;
	return 0;
}

/* the element type a tensor joining sequence s must have (0: any) */
static int check_elem(RunCtx *c, const Tensor *s, const Tensor *t)
{
	if (t->kind != TK_TENSOR)
		return op_error(c->node, "sequence elements must be tensors, got a %s", tensor_kind_name(t->kind));
	if (s->dtype && t->dtype != s->dtype)
		return op_error(c->node, "cannot put a %s tensor into a sequence of %s", dtype_name(t->dtype),
				dtype_name(s->dtype));
	return 0;
}

static int seq_empty_run(RunCtx *c)
{
	int64_t dt;
	if (attr_int(c->node, "dtype", DT_FLOAT, &dt) < 0)
		return -1;
	if (dtype_bits((int)dt) == 0)
		return op_error(c->node, "dtype %lld is not a supported tensor type", (long long)dt);
	return container_out(c, 0, TK_SEQUENCE, (int)dt) ? 0 : -1;
}

static int seq_construct_run(RunCtx *c)
{
	if (c->nin < 1)
		return op_error(c->node, "at least one input is required");
	for (size_t i = 0; i < c->nin; i++)
		if (!in_kind(c, i, TK_TENSOR))
			return -1;
	Tensor *o = container_out(c, 0, TK_SEQUENCE, c->in[0]->dtype);
	for (size_t i = 0; o && i < c->nin; i++)
		if (check_elem(c, o, c->in[i]) < 0 || tensor_append(o, c->in[i]) < 0)
			return -1;
	return o ? 0 : -1;
}

static int seq_insert_run(RunCtx *c)
{
	const Tensor *s = in_kind(c, 0, TK_SEQUENCE);
	const Tensor *t = s ? in_kind(c, 1, TK_TENSOR) : NULL;
	int64_t pos;
	if (!t || check_elem(c, s, t) < 0 || position(c, 2, s->nitems, 1, s->nitems, &pos) < 0)
		return -1;
	Tensor *o = container_out(c, 0, TK_SEQUENCE, s->dtype ? s->dtype : t->dtype);
	for (int64_t i = 0; o && i <= s->nitems; i++)
		if (tensor_append(o, i == pos ? t : &s->items[i < pos ? i : i - 1]) < 0)
			return -1;
	return o ? 0 : -1;
}

static int seq_at_run(RunCtx *c)
{
	const Tensor *s = in_kind(c, 0, TK_SEQUENCE);
	int64_t pos;
	if (!s || run_need(c, 1) < 0 || position(c, 1, s->nitems, 0, 0, &pos) < 0)
		return -1;
	return value_out(c, 0, &s->items[pos]);
}

static int seq_erase_run(RunCtx *c)
{
	const Tensor *s = in_kind(c, 0, TK_SEQUENCE);
	int64_t pos;
	if (!s || position(c, 1, s->nitems, 0, s->nitems - 1, &pos) < 0)
		return -1;
	if (s->nitems == 0)
		return op_error(c->node, "cannot erase from an empty sequence");
	Tensor *o = container_out(c, 0, TK_SEQUENCE, s->dtype);
	for (int64_t i = 0; o && i < s->nitems; i++)
		if (i != pos && tensor_append(o, &s->items[i]) < 0)
			return -1;
	return o ? 0 : -1;
}

static int seq_length_run(RunCtx *c)
{
	const Tensor *s = in_kind(c, 0, TK_SEQUENCE);
	if (!s || op_output(c, 0, DT_INT64, 0, NULL) < 0)
		return -1;
	memcpy(c->out[0]->data, &s->nitems, 8);
	return 0;
}

/* bytes of one element of a tensor type that splits on byte boundaries */
static int elem_bytes(RunCtx *c, int dt, size_t *out)
{
	int bits = dtype_bits(dt);
	if (bits < 8)
		return op_error(c->node, "%s tensors are not supported", dtype_name(dt));
	*out = (size_t)bits / 8;
	return 0;
}

static int64_t prod(const int64_t *d, int from, int to)
{
	int64_t p = 1;
	for (int i = from; i < to; i++)
		p *= d[i];
	return p;
}

static int concat_from_seq_run(RunCtx *c)
{
	const Tensor *s = in_kind(c, 0, TK_SEQUENCE);
	int64_t axis, newaxis, a;
	if (!s || attr_int(c->node, "axis", INT64_MIN, &axis) < 0 || attr_int(c->node, "new_axis", 0, &newaxis) < 0)
		return -1;
	if (axis == INT64_MIN)
		return op_error(c->node, "attribute 'axis' is required");
	if (s->nitems == 0)
		return op_error(c->node, "cannot concatenate an empty sequence");
	const Tensor *e0 = &s->items[0];
	int r = e0->rank + (newaxis ? 1 : 0);
	size_t es = 0;
	if (r > QM_MAX_RANK)
		return op_error(c->node, "result rank %d exceeds the supported %d", r, QM_MAX_RANK);
	if (r == 0)
		return op_error(c->node, "cannot concatenate scalars without new_axis");
	if (norm_axis(c->node, axis, r, &a) < 0 || elem_bytes(c, e0->dtype, &es) < 0)
		return -1;
	int64_t dims[QM_MAX_RANK], total = 0;
	for (int64_t i = 0; i < s->nitems; i++) {
		const Tensor *e = &s->items[i];
		int same = e->kind == TK_TENSOR && e->dtype == e0->dtype && e->rank == e0->rank;
		for (int k = 0; same && k < e->rank; k++)
			same = e->dims[k] == e0->dims[k] || (!newaxis && k == a);
		if (!same) {
			char x[128], y[128];
			return op_error(c->node, "element %lld is %s %s, element 0 %s %s: they cannot be joined on axis %lld",
					(long long)i, dtype_name(e->dtype), shape_str(e->rank, e->dims, x, sizeof x),
					dtype_name(e0->dtype), shape_str(e0->rank, e0->dims, y, sizeof y), (long long)a);
		}
		total += newaxis ? 1 : e->dims[a];
	}
	for (int k = 0; k < r; k++)
		dims[k] = k == a ? total : e0->dims[newaxis && k > a ? k - 1 : k];
	if (op_output(c, 0, e0->dtype, r, dims) < 0)
		return -1;
	/* per outer index, each element's slab along the axis in turn */
	int64_t outer = prod(dims, 0, (int)a);
	size_t inner = (size_t)prod(dims, (int)a + 1, r) * es;
	char *dst = c->out[0]->data;
	for (int64_t o = 0; o < outer; o++)
		for (int64_t i = 0; i < s->nitems; i++) {
			const Tensor *e = &s->items[i];
			size_t slab = inner * (size_t)(newaxis ? 1 : e->dims[a]);
			if (slab)
				memcpy(dst, (const char *)e->data + (size_t)o * slab, slab);
			dst += slab;
		}
	return 0;
}

static int split_to_seq_run(RunCtx *c)
{
	const Tensor *x = in_kind(c, 0, TK_TENSOR);
	int64_t axis, keep, a;
	size_t es = 0;
	if (!x || attr_int(c->node, "axis", 0, &axis) < 0 || attr_int(c->node, "keepdims", 1, &keep) < 0)
		return -1;
	if (x->rank == 0)
		return op_error(c->node, "cannot split a scalar");
	if (norm_axis(c->node, axis, x->rank, &a) < 0 || elem_bytes(c, x->dtype, &es) < 0)
		return -1;
	const Tensor *sp = c->nin > 1 ? c->in[1] : NULL;
	int64_t d = x->dims[a], n, each = 1;
	if (sp && (sp->kind != TK_TENSOR || (sp->dtype != DT_INT32 && sp->dtype != DT_INT64) || sp->rank > 1))
		return op_error(c->node, "split must be an int32 or int64 scalar or 1-D tensor");
	if (!sp) {
		n = d;
	} else if (sp->rank == 0) {
		each = elem_get_i64(sp->dtype, sp->data, 0);
		if (each <= 0)
			return op_error(c->node, "split %lld must be positive", (long long)each);
		n = (d + each - 1) / each;
	} else {
		int64_t sum = 0;
		n = sp->numel;
		for (int64_t i = 0; i < n; i++) {
			int64_t v = elem_get_i64(sp->dtype, sp->data, i);
			if (v < 0)
				return op_error(c->node, "split length %lld is negative", (long long)v);
			sum += v;
		}
		if (sum != d)
			return op_error(c->node, "split lengths add up to %lld, axis %lld has %lld", (long long)sum,
					(long long)a, (long long)d);
	}
	Tensor *o = container_out(c, 0, TK_SEQUENCE, x->dtype);
	if (!o)
		return -1;
	o->items = xcalloc(n ? (size_t)n : 1, sizeof *o->items);
	int64_t outer = prod(x->dims, 0, (int)a);
	size_t inner = (size_t)prod(x->dims, (int)a + 1, x->rank) * es;
	int drop = !sp && !keep;
	for (int64_t i = 0, start = 0; i < n; i++) {
		int64_t len = !sp ? 1 : sp->rank == 0 ? (start + each > d ? d - start : each)
			: elem_get_i64(sp->dtype, sp->data, i);
		int64_t dims[QM_MAX_RANK];
		int r = 0;
		for (int k = 0; k < x->rank; k++)
			if (k != a || !drop)
				dims[r++] = k == a ? len : x->dims[k];
		Tensor *e = &o->items[o->nitems++];
		if (tensor_alloc(e, x->dtype, r, dims) < 0)
			return -1;
		for (int64_t q = 0; q < outer && len; q++)
			memcpy((char *)e->data + (size_t)(q * len) * inner,
			       (const char *)x->data + (size_t)(q * d + start) * inner, (size_t)len * inner);
		start += len;
	}
	return 0;
}

/* the element type a graph output declares for a sequence's tensors (0: none) */
static int declared_seq_elem(const Onnx__ValueInfoProto *vi)
{
	const Onnx__TypeProto *tp = vi ? vi->type : NULL;
	if (tp && tp->value_case == ONNX__TYPE_PROTO__VALUE_SEQUENCE_TYPE && tp->sequence_type)
		tp = tp->sequence_type->elem_type;
	if (tp && tp->value_case == ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE && tp->tensor_type &&
	    tp->tensor_type->has_elem_type)
		return tp->tensor_type->elem_type;
	return 0;
}

/* the body runs once per element of the first input; sequence inputs give
 * it their i-th element, tensor inputs themselves; output j collects the
 * body's output j */
static int seq_map_run(RunCtx *c)
{
	const Onnx__GraphProto *g;
	if (attr_graph(c->node, "body", &g) < 0)
		return -1;
	if (!g)
		return op_error(c->node, "attribute 'body' (a graph) is required");
	const Tensor *s0 = in_kind(c, 0, TK_SEQUENCE);
	if (!s0)
		return -1;
	if (g->n_input != c->nin || g->n_output != c->nout)
		return op_error(c->node, "body takes %zu inputs and gives %zu outputs, the node %zu and %zu",
				g->n_input, g->n_output, c->nin, c->nout);
	for (size_t j = 1; j < c->nin; j++) {
		if (run_need(c, j) < 0)
			return -1;
		const Tensor *t = c->in[j];
		if (t->kind == TK_OPTIONAL)
			return op_error(c->node, "input %zu ('%s') is an optional: a sequence or a tensor is expected",
					j, c->node->input[j]);
		if (t->kind == TK_SEQUENCE && t->nitems != s0->nitems)
			return op_error(c->node, "input %zu ('%s') has %lld elements, input 0 %lld", j,
					c->node->input[j], (long long)t->nitems, (long long)s0->nitems);
	}
	for (size_t j = 0; j < c->nout; j++)
		if (!container_out(c, j, TK_SEQUENCE, declared_seq_elem(g->output[j])))
			return -1;
	const Tensor **in = xcalloc(c->nin, sizeof *in);
	Tensor *res = xcalloc(c->nout ? c->nout : 1, sizeof *res);
	int r = 0;
	for (int64_t i = 0; r == 0 && i < s0->nitems; i++) {
		for (size_t j = 0; j < c->nin; j++)
			in[j] = c->in[j]->kind == TK_SEQUENCE ? &c->in[j]->items[i] : c->in[j];
		r = run_subgraph(c, g, c->nin, in, c->nout, res);
		for (size_t j = 0; r == 0 && j < c->nout; j++)
			if (check_elem(c, c->out[j], &res[j]) < 0 || tensor_append(c->out[j], &res[j]) < 0)
				r = -1;
		for (size_t j = 0; j < c->nout; j++)
			tensor_free(&res[j]);
	}
	free(in);
	free(res);
	return r;
}

OPERATOR(ai_onnx, SequenceEmpty, 11, seq_empty_infer, seq_empty_run)
OPERATOR(ai_onnx, SequenceConstruct, 11, seq_construct_infer, seq_construct_run)
OPERATOR(ai_onnx, SequenceInsert, 11, seq_insert_infer, seq_insert_run)
OPERATOR(ai_onnx, SequenceAt, 11, seq_at_infer, seq_at_run)
OPERATOR(ai_onnx, SequenceErase, 11, seq_erase_infer, seq_erase_run)
OPERATOR(ai_onnx, SequenceLength, 11, seq_length_infer, seq_length_run)
OPERATOR(ai_onnx, ConcatFromSequence, 11, concat_from_seq_infer, concat_from_seq_run)
OPERATOR(ai_onnx, SplitToSequence, 11, split_to_seq_infer, split_to_seq_run)
OPERATOR(ai_onnx, SequenceMap, 17, seq_map_infer, seq_map_run)


/* ---- optionals ---- */

static int optional_infer(InferCtx *c)
{
	const Onnx__AttributeProto *a = node_attr(c->node, "type");
	if (c->nin > 0 && c->in[0])
		return vt_wrap(c->out[0], VT_OPTIONAL, c->in[0]);
	if (!a || !a->tp)
		return op_error(c->node, "attribute 'type' is required without an input");
	ValueType t = {.rank = -1};
	int r = vt_from_type(c->node, a->tp, &t);
	if (r == 0)
		r = vt_wrap(c->out[0], VT_OPTIONAL, &t);
	vt_clear(&t);
	return r;
}

static int optional_has_infer(InferCtx *c)
{
	vt_set_tensor(c->out[0], DT_BOOL, 0);
	return 0;
}

static int optional_get_infer(InferCtx *c)
{
	if (infer_need(c, 0) < 0)
		return -1;
	const ValueType *t = c->in[0];
	if (t->kind == VT_OPTIONAL) {
		if (t->inner && vt_copy(c->out[0], t->inner) < 0)
			return -1;
		return 0;
	}
	if (c->opset < 18 && t->kind != VT_UNKNOWN)
		return op_error(c->node, "input must be an optional before opset 18");
	return vt_copy(c->out[0], t);
}


/* ---- optional kernels ---- */

/* the element type an optional of type tp holds (0: unknown) */
static int type_elem(const Onnx__TypeProto *tp)
{
	while (tp && tp->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE) {
		if (tp->value_case == ONNX__TYPE_PROTO__VALUE_SEQUENCE_TYPE && tp->sequence_type)
			tp = tp->sequence_type->elem_type;
		else if (tp->value_case == ONNX__TYPE_PROTO__VALUE_OPTIONAL_TYPE && tp->optional_type)
			tp = tp->optional_type->elem_type;
		else
			return 0;
	}
	return tp && tp->value_case == ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE && tp->tensor_type && tp->tensor_type->has_elem_type
		       ? tp->tensor_type->elem_type : 0;
}

static int optional_run(RunCtx *c)
{
	const Tensor *x = c->nin > 0 ? c->in[0] : NULL;
	if (x) {
		Tensor *o = container_out(c, 0, TK_OPTIONAL, x->dtype);
		return o && tensor_append(o, x) == 0 ? 0 : -1;
	}
	const Onnx__AttributeProto *a = node_attr(c->node, "type");
	if (!a || !a->tp)
		return op_error(c->node, "attribute 'type' is required without an input");
	return container_out(c, 0, TK_OPTIONAL, type_elem(a->tp)) ? 0 : -1;
}

static int optional_has_run(RunCtx *c)
{
	const Tensor *x = c->nin > 0 ? c->in[0] : NULL;
	if (x && x->kind != TK_OPTIONAL && c->opset < 18)
		return op_error(c->node, "input must be an optional before opset 18, got a %s",
				tensor_kind_name(x->kind));
	if (op_output(c, 0, DT_BOOL, 0, NULL) < 0)
		return -1;
	*(uint8_t *)c->out[0]->data = x && (x->kind != TK_OPTIONAL || x->nitems);
	return 0;
}

static int optional_get_run(RunCtx *c)
{
	if (run_need(c, 0) < 0)
		return -1;
	const Tensor *x = c->in[0];
	if (x->kind != TK_OPTIONAL) {
		if (c->opset < 18)
			return op_error(c->node, "input must be an optional before opset 18, got a %s",
					tensor_kind_name(x->kind));
		return value_out(c, 0, x);
	}
	if (!x->nitems)
		return op_error(c->node, "optional input '%s' is empty", c->node->input[0]);
	return value_out(c, 0, &x->items[0]);
}

OPERATOR(ai_onnx, Optional, 15, optional_infer, optional_run)
OPERATOR(ai_onnx, OptionalHasElement, 15, optional_has_infer, optional_has_run)
OPERATOR(ai_onnx, OptionalGetElement, 15, optional_get_infer, optional_get_run)
