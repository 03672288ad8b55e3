/* types.c — interned dimension symbols, ValueType <-> TypeProto, merging
 * and comparing static types (see infer.h). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "infer/infer.h"
#include "strmap.h"
#include "util.h"

/* interned names: keys are malloc'd copies the table owns */
struct SymTab {
	StrMap names;
	uint64_t next_unk;
};

SymTab *symtab_new(void)
{
	return xcalloc(1, sizeof(SymTab));
}

void symtab_free(SymTab *s)
{
	if (!s)
		return;
	strmap_free_keys(&s->names);
	free(s);
}

const char *sym_intern(SymTab *s, const char *name)
{
	int added;
	StrMapEnt *e = strmap_add(&s->names, name, &added);
	return added ? strmap_own_key(e) : e->key;
}

const char *sym_fresh(SymTab *s)
{
	char buf[32];
	do
		snprintf(buf, sizeof buf, "unk__%" PRIu64, s->next_unk++);
	while (strmap_find(&s->names, buf));
	return sym_intern(s, buf);
}

static int read_shape(SymTab *s, const Onnx__TensorShapeProto *sh, ValueType *t, const char *what)
{
	if (!sh) {
		t->rank = -1;
		return 0;
	}
	if (sh->n_dim > QM_MAX_RANK)
		return error("%s: rank %zu exceeds the supported maximum %d", what, sh->n_dim,
			     QM_MAX_RANK);
	t->rank = (int)sh->n_dim;
	for (size_t i = 0; i < sh->n_dim; i++) {
		const Onnx__TensorShapeProto__Dimension *d = sh->dim[i];
		Dim *o = &t->dims[i];
		o->v = -1;
		o->sym = NULL;
		if (!d)
			continue;
		if (d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE) {
			if (d->dim_value < 0)
				return error("%s: dimension %zu is negative (%" PRId64 ")", what, i,
					     d->dim_value);
			o->v = d->dim_value;
		} else if (d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM &&
			   d->dim_param && *d->dim_param) {
			o->sym = sym_intern(s, d->dim_param);
		}
	}
	return 0;
}

static int check_elem(int32_t e, const char *what)
{
	if (e < 0 || e >= DT_MAX)
		return error("%s: unknown element type %d (expected 1..%d)", what, (int)e, DT_MAX - 1);
	return 0;
}

int vt_from_proto(SymTab *s, const Onnx__TypeProto *tp, ValueType *t, const char *what)
{
	vt_clear(t);
	if (!tp)
		return 0;
	switch (tp->value_case) {
	case ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE: {
		const Onnx__TypeProto__Tensor *tt = tp->tensor_type;
		t->kind = VT_TENSOR;
		if (!tt)
			return 0;
		if (tt->has_elem_type) {
			if (check_elem(tt->elem_type, what) < 0)
				return -1;
			t->elem = tt->elem_type;
		}
		return read_shape(s, tt->shape, t, what);
	}
	case ONNX__TYPE_PROTO__VALUE_SPARSE_TENSOR_TYPE: {
		const Onnx__TypeProto__SparseTensor *tt = tp->sparse_tensor_type;
		t->kind = VT_SPARSE;
		if (!tt)
			return 0;
		if (tt->has_elem_type) {
			if (check_elem(tt->elem_type, what) < 0)
				return -1;
			t->elem = tt->elem_type;
		}
		return read_shape(s, tt->shape, t, what);
	}
	case ONNX__TYPE_PROTO__VALUE_SEQUENCE_TYPE:
	case ONNX__TYPE_PROTO__VALUE_OPTIONAL_TYPE: {
		const Onnx__TypeProto *inner;
		if (tp->value_case == ONNX__TYPE_PROTO__VALUE_SEQUENCE_TYPE) {
			t->kind = VT_SEQUENCE;
			inner = tp->sequence_type ? tp->sequence_type->elem_type : NULL;
		} else {
			t->kind = VT_OPTIONAL;
			inner = tp->optional_type ? tp->optional_type->elem_type : NULL;
		}
		t->inner = xcalloc(1, sizeof *t->inner);
		t->inner->rank = -1;
		return vt_from_proto(s, inner, t->inner, what);
	}
	case ONNX__TYPE_PROTO__VALUE_MAP_TYPE: {
		const Onnx__TypeProto__Map *mt = tp->map_type;
		t->kind = VT_MAP;
		if (!mt)
			return 0;
		if (mt->has_key_type) {
			if (check_elem(mt->key_type, what) < 0)
				return -1;
			t->elem = mt->key_type;
		}
		t->inner = xcalloc(1, sizeof *t->inner);
		t->inner->rank = -1;
		return vt_from_proto(s, mt->value_type, t->inner, what);
	}
	default:
		return 0;
	}
}

static Onnx__TensorShapeProto *shape_to_proto(const ValueType *t)
{
	if (t->rank < 0)
		return NULL;
	Onnx__TensorShapeProto *sh = xmalloc(sizeof *sh);
	onnx__tensor_shape_proto__init(sh);
	sh->n_dim = (size_t)t->rank;
	sh->dim = xcalloc(t->rank ? (size_t)t->rank : 1, sizeof *sh->dim);
	for (int i = 0; i < t->rank; i++) {
		Onnx__TensorShapeProto__Dimension *d = xmalloc(sizeof *d);
		onnx__tensor_shape_proto__dimension__init(d);
		if (t->dims[i].v >= 0) {
			d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
			d->dim_value = t->dims[i].v;
		} else if (t->dims[i].sym) {
			d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
			d->dim_param = xstrdup(t->dims[i].sym);
		}
		sh->dim[i] = d;
	}
	return sh;
}

Onnx__TypeProto *vt_to_proto(const ValueType *t)
{
	if (!t || t->kind == VT_UNKNOWN)
		return NULL;
	Onnx__TypeProto *tp = xmalloc(sizeof *tp);
	onnx__type_proto__init(tp);
	switch (t->kind) {
	case VT_TENSOR: {
		Onnx__TypeProto__Tensor *tt = xmalloc(sizeof *tt);
		onnx__type_proto__tensor__init(tt);
		if (t->elem) {
			tt->has_elem_type = 1;
			tt->elem_type = t->elem;
		}
		tt->shape = shape_to_proto(t);
		tp->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
		tp->tensor_type = tt;
		break;
	}
	case VT_SPARSE: {
		Onnx__TypeProto__SparseTensor *tt = xmalloc(sizeof *tt);
		onnx__type_proto__sparse_tensor__init(tt);
		if (t->elem) {
			tt->has_elem_type = 1;
			tt->elem_type = t->elem;
		}
		tt->shape = shape_to_proto(t);
		tp->value_case = ONNX__TYPE_PROTO__VALUE_SPARSE_TENSOR_TYPE;
		tp->sparse_tensor_type = tt;
		break;
	}
	case VT_SEQUENCE: {
		Onnx__TypeProto__Sequence *sq = xmalloc(sizeof *sq);
		onnx__type_proto__sequence__init(sq);
		sq->elem_type = vt_to_proto(t->inner);
		tp->value_case = ONNX__TYPE_PROTO__VALUE_SEQUENCE_TYPE;
		tp->sequence_type = sq;
		break;
	}
	case VT_OPTIONAL: {
		Onnx__TypeProto__Optional *op = xmalloc(sizeof *op);
		onnx__type_proto__optional__init(op);
		op->elem_type = vt_to_proto(t->inner);
		tp->value_case = ONNX__TYPE_PROTO__VALUE_OPTIONAL_TYPE;
		tp->optional_type = op;
		break;
	}
	case VT_MAP: {
		Onnx__TypeProto__Map *mp = xmalloc(sizeof *mp);
		onnx__type_proto__map__init(mp);
		if (t->elem) {
			mp->has_key_type = 1;
			mp->key_type = t->elem;
		}
		mp->value_type = vt_to_proto(t->inner);
		tp->value_case = ONNX__TYPE_PROTO__VALUE_MAP_TYPE;
		tp->map_type = mp;
		break;
	}
	default:
		free(tp);
		return NULL;
	}
	return tp;
}

static void str_tensor(StrBuf *sb, const ValueType *t)
{
	sb_puts(sb, t->elem ? dtype_name(t->elem) : "?");
	if (t->rank < 0) {
		sb_puts(sb, "[*]");
		return;
	}
	sb_putc(sb, '[');
	for (int i = 0; i < t->rank; i++) {
		if (i)
			sb_putc(sb, ',');
		if (t->dims[i].v >= 0)
			sb_printf(sb, "%" PRId64, t->dims[i].v);
		else if (t->dims[i].sym)
			sb_puts(sb, t->dims[i].sym);
		else
			sb_putc(sb, '?');
	}
	sb_putc(sb, ']');
}

static void str_vt(StrBuf *sb, const ValueType *t)
{
	if (!t) {
		sb_putc(sb, '?');
		return;
	}
	switch (t->kind) {
	case VT_TENSOR:
		str_tensor(sb, t);
		break;
	case VT_SPARSE:
		sb_puts(sb, "sparse(");
		str_tensor(sb, t);
		sb_putc(sb, ')');
		break;
	case VT_SEQUENCE:
	case VT_OPTIONAL:
		sb_puts(sb, t->kind == VT_SEQUENCE ? "seq(" : "optional(");
		str_vt(sb, t->inner);
		sb_putc(sb, ')');
		break;
	case VT_MAP:
		sb_printf(sb, "map(%s,", t->elem ? dtype_name(t->elem) : "?");
		str_vt(sb, t->inner);
		sb_putc(sb, ')');
		break;
	default:
		sb_putc(sb, '?');
	}
}

const char *vt_str(const ValueType *t, char *buf, size_t size)
{
	StrBuf sb = {0};
	str_vt(&sb, t);
	snprintf(buf, size, "%s", sb.buf ? sb.buf : "?");
	sb_release(&sb);
	return buf;
}

/* merge into out (already a copy of the inferred type); 0 or -1 */
static int merge_into(const ValueType *d, ValueType *out)
{
	if (!d || d->kind == VT_UNKNOWN)
		return 0;
	if (out->kind == VT_UNKNOWN) {
		ValueType tmp = {0};
		tmp.rank = -1;
		if (vt_copy(&tmp, d) < 0)
			return -1;
		vt_clear(out);
		*out = tmp;
		return 0;
	}
	if (d->kind != out->kind)
		return -1;
	if (d->elem && out->elem && d->elem != out->elem)
		return -1;
	if (!out->elem)
		out->elem = d->elem;
	if (d->kind == VT_TENSOR || d->kind == VT_SPARSE) {
		if (d->rank >= 0 && out->rank >= 0 && d->rank != out->rank)
			return -1;
		if (out->rank < 0 && d->rank >= 0) {
			out->rank = d->rank;
			for (int i = 0; i < d->rank; i++)
				out->dims[i] = d->dims[i];
			return 0;
		}
		for (int i = 0; i < out->rank && d->rank >= 0; i++) {
			Dim a = d->dims[i], *b = &out->dims[i];
			if (a.v >= 0 && b->v >= 0 && a.v != b->v)
				return -1;
			if (a.v >= 0)
				*b = a;
			else if (b->v < 0 && a.sym)
				b->sym = a.sym;
		}
		return 0;
	}
	if (d->inner) {
		if (!out->inner) {
			out->inner = xcalloc(1, sizeof *out->inner);
			out->inner->rank = -1;
		}
		return merge_into(d->inner, out->inner);
	}
	return 0;
}

int vt_merge(const ValueType *declared, const ValueType *inferred, ValueType *out)
{
	if (vt_copy(out, inferred) < 0)
		return -1;
	if (merge_into(declared, out) < 0) {
		char a[512], b[512];
		return error("inferred %s but the model declares %s", vt_str(inferred, a, sizeof a),
			     vt_str(declared, b, sizeof b));
	}
	/* a value whose shape no longer matches the merged type is dropped */
	if (out->value && (out->kind != VT_TENSOR || out->rank != out->value->rank)) {
		tensor_free(out->value);
		free(out->value);
		out->value = NULL;
	}
	return 0;
}

int vt_satisfies(const ValueType *d, const ValueType *t)
{
	if (!d || d->kind == VT_UNKNOWN)
		return 1;
	if (!t || t->kind != d->kind)
		return 0;
	if (d->elem && t->elem != d->elem)
		return 0;
	if (d->kind == VT_TENSOR || d->kind == VT_SPARSE) {
		if (d->rank < 0)
			return 1;
		if (t->rank != d->rank)
			return 0;
		for (int i = 0; i < d->rank; i++)
			if (d->dims[i].v >= 0 && t->dims[i].v != d->dims[i].v)
				return 0;
		return 1;
	}
	if (d->inner)
		return vt_satisfies(d->inner, t->inner);
	return 1;
}

int vt_typed(const ValueType *t)
{
	if (!t || t->kind == VT_UNKNOWN)
		return 0;
	if (t->kind == VT_TENSOR || t->kind == VT_SPARSE)
		return t->elem != 0;
	if (t->kind == VT_MAP)
		return t->elem != 0 && vt_typed(t->inner);
	return vt_typed(t->inner);
}
