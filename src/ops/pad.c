/* pad.c — Pad (attribute pads before opset 11, inputs pads / constant_value
 * / axes since; modes constant, reflect, edge and wrap): inference and
 * kernel.
 *
 * Every output axis gets a map from output to input index (-1 where the
 * constant goes), so one loop serves all modes and negative pads (cropping);
 * elements are moved by size, so any byte-sized element type works. */
#include <stdlib.h>
#include <string.h>

#include "ops/nn.h"
#include "ops/op.h"
#include "ops/shapeutil.h"
#include "util.h"

enum { PAD_CONSTANT, PAD_REFLECT, PAD_EDGE, PAD_WRAP };

static int pad_mode(const Onnx__NodeProto *n, int64_t opset, int *mode)
{
	char m[32];
	if (attr_str(n, "mode", "constant", m, sizeof m) < 0)
		return -1;
	if (!strcmp(m, "constant"))
		*mode = PAD_CONSTANT;
	else if (!strcmp(m, "reflect"))
		*mode = PAD_REFLECT;
	else if (!strcmp(m, "edge"))
		*mode = PAD_EDGE;
	else if (!strcmp(m, "wrap") && opset >= 19)
		*mode = PAD_WRAP;
	else
		return op_error(n, "mode '%s' is not supported (constant, reflect, edge%s)", m,
				opset >= 19 ? ", wrap" : "");
	return 0;
}

/* Full pads (2 * rank: begins then ends) from the attribute (opset < 11) or
 * from the pads and axes tensors; tp NULL means unknown (returns 1). */
static int pad_amounts(const Onnx__NodeProto *n, int64_t opset, int rank, const Tensor *tp,
		       const Tensor *ta, int64_t *pads)
{
	memset(pads, 0, sizeof(int64_t) * 2 * (size_t)rank);
	if (opset < 11) {
		const int64_t *v;
		size_t len;
		if (attr_ints(n, opset < 2 ? "paddings" : "pads", &v, &len) < 0)
			return -1;
		if (!v)
			return op_error(n, "attribute 'pads' is required");
		if ((int)len != 2 * rank)
			return op_error(n, "pads has %zu values, expected %d for rank %d", len, 2 * rank, rank);
		memcpy(pads, v, sizeof(int64_t) * len);
		return 0;
	}
	if (!tp)
		return 1;
	int64_t *pv, np, *av = NULL, na = rank, axes[QM_MAX_RANK];
	if (op_tensor_ints(n, tp, "pads", &pv, &np) < 0)
		return -1;
	for (int i = 0; i < rank; i++)
		axes[i] = i;
	if (ta) {
		if (op_tensor_ints(n, ta, "axes", &av, &na) < 0) {
			free(pv);
			return -1;
		}
		if (na > rank) {
			free(pv);
			free(av);
			return op_error(n, "axes has %lld values for rank %d", (long long)na, rank);
		}
		for (int64_t i = 0; i < na; i++)
			if (norm_axis(n, av[i], rank, &axes[i]) < 0) {
				free(pv);
				free(av);
				return -1;
			}
		free(av);
	}
	if (np != 2 * na) {
		free(pv);
		return op_error(n, "pads has %lld values, expected %lld", (long long)np, (long long)(2 * na));
	}
	for (int64_t i = 0; i < na; i++) {
		pads[axes[i]] = pv[i];
		pads[axes[i] + rank] = pv[i + na];
	}
	free(pv);
	return 0;
}

static int pad_infer(InferCtx *c)
{
	const ValueType *x = nn_in(c, 0);
	if (!x)
		return -1;
	ValueType *o = c->out[0];
	vt_set_tensor(o, x->elem, x->rank);
	if (x->rank < 0)
		return 0;
	int64_t pads[2 * QM_MAX_RANK];
	const Tensor *tp = c->opset >= 11 ? nn_value(c, 1) : NULL;
	const Tensor *ta = c->opset >= 18 ? nn_value(c, 3) : NULL;
	if (c->opset >= 18 && c->nin > 3 && c->in[3] && !ta)
		tp = NULL;   /* axes not known: which dims change is not known */
	int r = pad_amounts(c->node, c->opset, x->rank, tp, ta, pads);
	if (r < 0)
		return -1;
	for (int i = 0; i < x->rank; i++) {
		if (r == 1) {
			o->dims[i] = nn_dim(c, -1);
			continue;
		}
		int64_t add = pads[i] + pads[i + x->rank];
		if (add == 0)
			o->dims[i] = x->dims[i];
		else if (x->dims[i].v >= 0) {
			if (x->dims[i].v + add < 0)
				return op_error(c->node, "pads shrink axis %d of size %lld below zero", i,
						(long long)x->dims[i].v);
			o->dims[i] = (Dim){x->dims[i].v + add, NULL};
		} else {
			o->dims[i] = nn_dim(c, -1);
		}
	}
	return 0;
}

static int pad_run(RunCtx *c)
{
	const Tensor *x = c->in[0];
	size_t es;
	int mode = PAD_CONSTANT, rank = x->rank;
	int64_t pads[2 * QM_MAX_RANK], dims[QM_MAX_RANK];
	if (op_elemsize(c->node, c->opset, x->dtype, &es) < 0 || pad_mode(c->node, c->opset, &mode) < 0)
		return -1;
	if (c->opset >= 11 && (c->nin < 2 || !c->in[1]))
		return op_error(c->node, "input 'pads' is required");
	const Tensor *tp = c->opset >= 11 ? c->in[1] : NULL;
	const Tensor *ta = c->opset >= 18 && c->nin > 3 ? c->in[3] : NULL;
	if (pad_amounts(c->node, c->opset, rank, tp, ta, pads) < 0)
		return -1;
	/* the constant as one element of x's type */
	unsigned char cval[16] = {0};
	if (mode == PAD_CONSTANT) {
		const Tensor *tv = c->opset >= 11 && c->nin > 2 ? c->in[2] : NULL;
		if (tv && tv->numel > 0) {
			if (tv->dtype != x->dtype)
				return op_error(c->node, "constant_value has type %s, expected %s",
						dtype_name(tv->dtype), dtype_name(x->dtype));
			memcpy(cval, tv->data, es);
		} else if (c->opset < 11) {
			float v;
			if (attr_float(c->node, "value", 0.0f, &v) < 0)
				return -1;
			if (!dt_numeric(x->dtype))
				return op_unsupported_type(c->node, c->opset, x->dtype);
			elem_put_f64(x->dtype, cval, 0, v);
		}
	}
	for (int i = 0; i < rank; i++) {
		dims[i] = x->dims[i] + pads[i] + pads[i + rank];
		if (dims[i] < 0)
			return op_error(c->node, "pads shrink axis %d of size %lld below zero", i, (long long)x->dims[i]);
		if (mode != PAD_CONSTANT && x->dims[i] == 0 && dims[i] > 0)
			return op_error(c->node, "cannot pad empty axis %d in this mode", i);
	}
	if (op_output(c, 0, x->dtype, rank, dims) < 0)
		return -1;
	Tensor *y = c->out[0];
	if (y->numel == 0)
		return 0;
	if (rank == 0) {
		memcpy(y->data, x->data, es);
		return 0;
	}
	/* per-axis maps from output to input index */
	int64_t total = 0, off[QM_MAX_RANK];
	for (int i = 0; i < rank; i++) {
		off[i] = total;
		total += dims[i];
	}
	int64_t *map = xmalloc(sizeof(int64_t) * (size_t)(total ? total : 1));
	for (int i = 0; i < rank; i++) {
		int64_t n = x->dims[i];
		for (int64_t o = 0; o < dims[i]; o++) {
			int64_t j = o - pads[i];
			if (j < 0 || j >= n) {
				switch (mode) {
				case PAD_CONSTANT:
					j = -1;
					break;
				case PAD_EDGE:
					j = j < 0 ? 0 : n - 1;
					break;
				case PAD_WRAP:
					j = ((j % n) + n) % n;
					break;
				default:
					if (n == 1) {
						j = 0;
						break;
					}
					while (j < 0 || j >= n)
						j = j < 0 ? -j : 2 * (n - 1) - j;
					break;
				}
			}
			map[off[i] + o] = j;
		}
	}
	int64_t xs[QM_MAX_RANK], idx[QM_MAX_RANK] = {0};
	dims_strides(rank, x->dims, xs);
	int64_t last = dims[rank - 1], rows = y->numel / last;
	const int64_t *lm = map + off[rank - 1];
	unsigned char *yp = y->data;
	const unsigned char *xp = x->data;
	for (int64_t r = 0; r < rows; r++) {
		int64_t base = 0;
		int fill = 0;
		for (int i = 0; i < rank - 1; i++) {
			int64_t j = map[off[i] + idx[i]];
			if (j < 0)
				fill = 1;
			else
				base += j * xs[i];
		}
		unsigned char *dst = yp + (size_t)(r * last) * es;
		for (int64_t k = 0; k < last; k++) {
			int64_t j = lm[k];
			elem_copy(dst + (size_t)k * es, fill || j < 0 ? cval : xp + (size_t)(base + j) * es, es);
		}
		for (int i = rank - 2; i >= 0; i--) {
			if (++idx[i] < dims[i])
				break;
			idx[i] = 0;
		}
	}
	free(map);
	return 0;
}

OPERATOR(ai_onnx, Pad, 1, pad_infer, pad_run)
