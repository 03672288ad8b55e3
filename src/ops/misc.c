/* misc.c — sequence and optional operators, for type inference only.
 *
 * SequenceEmpty, SequenceConstruct, SequenceInsert, SequenceAt, SequenceErase,
 * SequenceLength, ConcatFromSequence, SplitToSequence, SequenceMap, Optional,
 * OptionalHasElement, OptionalGetElement. The interpreter's Tensor cannot
 * hold a sequence or an optional, so these entries have no kernel: a model
 * that runs them gets "X-N is not supported" before anything runs. */
#include <stdlib.h>
#include <string.h>

#include "ops/op.h"
#include "ops/shapeutil.h"
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

OPERATOR(ai_onnx, SequenceEmpty, 11, seq_empty_infer, NULL)
OPERATOR(ai_onnx, SequenceConstruct, 11, seq_construct_infer, NULL)
OPERATOR(ai_onnx, SequenceInsert, 11, seq_insert_infer, NULL)
OPERATOR(ai_onnx, SequenceAt, 11, seq_at_infer, NULL)
OPERATOR(ai_onnx, SequenceErase, 11, seq_erase_infer, NULL)
OPERATOR(ai_onnx, SequenceLength, 11, seq_length_infer, NULL)
OPERATOR(ai_onnx, ConcatFromSequence, 11, concat_from_seq_infer, NULL)
OPERATOR(ai_onnx, SplitToSequence, 11, split_to_seq_infer, NULL)
OPERATOR(ai_onnx, SequenceMap, 17, seq_map_infer, NULL)

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

OPERATOR(ai_onnx, Optional, 15, optional_infer, NULL)
OPERATOR(ai_onnx, OptionalHasElement, 15, optional_has_infer, NULL)
OPERATOR(ai_onnx, OptionalGetElement, 15, optional_get_infer, NULL)
