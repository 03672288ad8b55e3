/* control.c — control flow: If, Loop, Scan.
 *
 * Inference runs the body through infer_subgraph(); Loop's carried values are
 * inferred to a fixpoint (first with the initial shapes, then with the dims
 * that changed generalized), so a body that keeps its shapes keeps them known.
 * Kernels run bodies through run_subgraph() and copy results into outputs
 * allocated with op_output(). If's results and Loop's carried values may be
 * sequences or optionals (Tensors of another kind, see src/onnx/tensor.h):
 * those move into the outputs as they are; Loop's scan outputs and Scan take
 * tensors only. SequenceMap, which runs a body per element, is in
 * sequence.c. */
#include <stdlib.h>
#include <string.h>

#include "ops/op.h"
#include "ops/shapeutil.h"
#include "util.h"

static int need_graph(const Onnx__NodeProto *n, const char *name, const Onnx__GraphProto **g)
{
	if (attr_graph(n, name, g) < 0)
		return -1;
	if (!*g)
		return op_error(n, "attribute '%s' (a graph) is required", name);
	return 0;
}

static ValueType *vt_array(size_t n)
{
	ValueType *v = xcalloc(n ? n : 1, sizeof *v);
	for (size_t i = 0; i < n; i++)
		v[i].rank = -1;
	return v;
}

static void vt_array_free(ValueType *v, size_t n)
{
	for (size_t i = 0; v && i < n; i++)
		vt_clear(&v[i]);
	free(v);
}

/* out gets t with a dimension d inserted at axis (t a tensor type) */
static int vt_insert_dim(const Onnx__NodeProto *n, ValueType *out, const ValueType *t, int64_t axis, Dim d)
{
	vt_clear(out);
	if (t->kind != VT_TENSOR && t->kind != VT_UNKNOWN)
		return op_error(n, "scan outputs must be tensors");
	if (t->rank < 0) {
		vt_set_tensor(out, t->elem, -1);
		return 0;
	}
	if (t->rank + 1 > QM_MAX_RANK)
		return op_error(n, "scan output rank %d exceeds the supported %d", t->rank + 1, QM_MAX_RANK);
	int64_t a;
	if (norm_axis(n, axis, t->rank + 1, &a) < 0)
		return -1;
	vt_set_tensor(out, t->elem, t->rank + 1);
	for (int i = 0, k = 0; i <= t->rank; i++)
		out->dims[i] = i == a ? d : t->dims[k++];
	return 0;
}

/* ---- If ---- */

static int if_infer(InferCtx *c)
{
	const Onnx__GraphProto *gt, *ge;
	if (need_graph(c->node, "then_branch", &gt) < 0 || need_graph(c->node, "else_branch", &ge) < 0)
		return -1;
	const ValueType *cond = c->nin ? c->in[0] : NULL;
	if (!cond)
		return op_error(c->node, "missing input 0 (cond)");
	ValueType *a = vt_array(c->nout), *b = vt_array(c->nout);
	int ret = -1;
	if (gt->n_output != c->nout || ge->n_output != c->nout) {
		op_error(c->node, "branches have %zu and %zu outputs, the node %zu", gt->n_output,
			 ge->n_output, c->nout);
		goto out;
	}
	if (infer_subgraph(c, gt, 0, NULL, c->nout, a) < 0 ||
	    infer_subgraph(c, ge, 0, NULL, c->nout, b) < 0)
		goto out;
	int known = cond->value && cond->value->numel == 1;
	int taken = known && tensor_get_i64(cond->value, 0) != 0;
	for (size_t i = 0; i < c->nout; i++) {
		if (known) {
			if (vt_copy(c->out[i], taken ? &a[i] : &b[i]) < 0)
				goto out;
			continue;
		}
		if (a[i].kind == VT_TENSOR && b[i].kind == VT_TENSOR && a[i].elem && b[i].elem &&
		    a[i].elem != b[i].elem) {
			op_error(c->node, "output %zu is %s in then_branch and %s in else_branch", i,
				 dtype_name(a[i].elem), dtype_name(b[i].elem));
			goto out;
		}
		vt_join(c->out[i], &a[i], &b[i]);
		if (c->out[i]->kind == VT_TENSOR && !c->out[i]->elem)
			c->out[i]->elem = a[i].elem ? a[i].elem : b[i].elem;
	}
	ret = 0;
out:
	vt_array_free(a, c->nout);
	vt_array_free(b, c->nout);
	return ret;
}

/* copy (move) results into the node's outputs */
static int set_outputs(RunCtx *c, size_t first, size_t n, Tensor *res)
{
	for (size_t i = 0; i < n; i++) {
		Tensor *r = &res[i];
		if (r->kind != TK_TENSOR || r->dtype == DT_STRING) { /* containers, strings: moved */
			if (first + i >= c->nout)
				return op_error(c->node, "output %zu requested but the node has %zu outputs",
						first + i, c->nout);
			Tensor *o = c->out[first + i];
			char *name = o->name;
			o->name = NULL;
			tensor_free(o);
			free(r->name);
			*o = *r;
			o->name = name;
			memset(r, 0, sizeof *r);
			continue;
		}
		if (op_output(c, first + i, r->dtype, r->rank, r->dims) < 0)
			return -1;
		if (r->nbytes)
			memcpy(c->out[first + i]->data, r->data, r->nbytes);
	}
	return 0;
}

static void tensors_free(Tensor *t, size_t n)
{
	for (size_t i = 0; t && i < n; i++)
		tensor_free(&t[i]);
	free(t);
}

static int if_run(RunCtx *c)
{
	const Onnx__GraphProto *g;
	if (c->nin < 1 || !c->in[0])
		return op_error(c->node, "missing input 0 (cond)");
	const Tensor *cond = c->in[0];
	if (cond->numel != 1 || !dt_numeric(cond->dtype))
		return op_error(c->node, "cond must hold one bool, has %lld %s elements",
				(long long)cond->numel, dtype_name(cond->dtype));
	int taken = elem_get_i64(cond->dtype, cond->data, 0) != 0;
	if (need_graph(c->node, taken ? "then_branch" : "else_branch", &g) < 0)
		return -1;
	if (g->n_output != c->nout)
		return op_error(c->node, "branch has %zu outputs, the node %zu", g->n_output, c->nout);
	Tensor *res = xcalloc(c->nout ? c->nout : 1, sizeof *res);
	int r = run_subgraph(c, g, 0, NULL, c->nout, res);
	if (r == 0)
		r = set_outputs(c, 0, c->nout, res);
	tensors_free(res, c->nout);
	return r;
}

OPERATOR(ai_onnx, If, 1, if_infer, if_run)

/* ---- Loop ---- */

static int loop_infer(InferCtx *c)
{
	const Onnx__GraphProto *g;
	if (need_graph(c->node, "body", &g) < 0)
		return -1;
	if (c->nin < 2)
		return op_error(c->node, "Loop takes M, cond and the carried values");
	size_t n = c->nin - 2;
	if (c->nout < n)
		return op_error(c->node, "%zu carried values but %zu outputs", n, c->nout);
	size_t k = c->nout - n, nbody = 1 + n + k;
	for (size_t i = 0; i < n; i++)
		if (!c->in[2 + i])
			return op_error(c->node, "carried value %zu is missing", i);
	ValueType *bin = vt_array(2 + n), *bout = vt_array(nbody), *next = vt_array(n);
	const ValueType **pin = xcalloc(2 + n, sizeof *pin);
	int ret = -1;
	vt_set_tensor(&bin[0], DT_INT64, 0);
	vt_set_tensor(&bin[1], DT_BOOL, 0);
	for (size_t i = 0; i < n; i++) {
		if (vt_copy(&bin[2 + i], c->in[2 + i]) < 0)
			goto out;
		/* values change between iterations: keep types, not contents */
		if (bin[2 + i].value) {
			tensor_free(bin[2 + i].value);
			free(bin[2 + i].value);
			bin[2 + i].value = NULL;
		}
		free(bin[2 + i].symval);
		bin[2 + i].symval = NULL;
		bin[2 + i].nsymval = 0;
	}
	for (size_t i = 0; i < 2 + n; i++)
		pin[i] = &bin[i];
	for (int round = 0;; round++) {
		if (infer_subgraph(c, g, 2 + n, pin, nbody, bout) < 0)
			goto out;
		int stable = 1;
		for (size_t i = 0; i < n; i++)
			if (!vt_same(&bin[2 + i], &bout[1 + i]))
				stable = 0;
		if (stable || round == 2)
			break;
		for (size_t i = 0; i < n; i++) {
			vt_join(&next[i], &bin[2 + i], &bout[1 + i]);
			if (!next[i].elem && next[i].kind == VT_TENSOR)
				next[i].elem = bin[2 + i].elem;
			vt_clear(&bin[2 + i]);
			vt_copy(&bin[2 + i], &next[i]);
		}
	}
	for (size_t i = 0; i < n; i++) {
		vt_join(c->out[i], &bin[2 + i], &bout[1 + i]);
		if (c->out[i]->kind == VT_TENSOR && !c->out[i]->elem)
			c->out[i]->elem = bin[2 + i].elem ? bin[2 + i].elem : bout[1 + i].elem;
		if (c->out[i]->kind == VT_UNKNOWN && bout[1 + i].kind != VT_UNKNOWN)
			vt_copy(c->out[i], &bout[1 + i]);
	}
	/* the trip count is M when the loop cannot stop early: M known, cond
	 * absent or true, and the body's cond output a known true */
	Dim trips = infer_fresh_dim(c);
	const ValueType *mv = c->in[0], *cv = c->in[1];
	if (mv && mv->value && mv->value->numel == 1 &&
	    (!cv || (cv->value && cv->value->numel == 1 && tensor_get_i64(cv->value, 0))) &&
	    bout[0].value && bout[0].value->numel == 1 && tensor_get_i64(bout[0].value, 0) &&
	    tensor_get_i64(mv->value, 0) >= 0)
		trips = dim_known(tensor_get_i64(mv->value, 0));
	for (size_t j = 0; j < k; j++)
		if (vt_insert_dim(c->node, c->out[n + j], &bout[1 + n + j], 0, trips) < 0)
			goto out;
	ret = 0;
out:
	vt_array_free(bin, 2 + n);
	vt_array_free(bout, nbody);
	vt_array_free(next, n);
	free(pin);
	return ret;
}

/* A growing stack of per-iteration tensors along a new axis 0. */
typedef struct Stack {
	int dtype, rank;
	int64_t dims[QM_MAX_RANK];
	size_t each;      /* bytes per iteration */
	char *buf;
	int64_t n, cap;
} Stack;

static int stack_push(const Onnx__NodeProto *node, Stack *s, const Tensor *t, size_t j)
{
	if (t->kind != TK_TENSOR || t->dtype == DT_STRING)
		return op_error(node, "scan output %zu is a %s; only numeric tensors can be stacked", j,
				t->kind != TK_TENSOR ? tensor_kind_name(t->kind) : "string tensor");
	if (s->n == 0 && !s->buf) {
		if (t->rank + 1 > QM_MAX_RANK)
			return op_error(node, "scan output %zu: rank %d exceeds the supported %d", j,
					t->rank + 1, QM_MAX_RANK);
		s->dtype = t->dtype;
		s->rank = t->rank;
		memcpy(s->dims, t->dims, sizeof t->dims[0] * (size_t)t->rank);
		s->each = t->nbytes;
	} else if (t->dtype != s->dtype || t->rank != s->rank ||
		   memcmp(t->dims, s->dims, sizeof t->dims[0] * (size_t)t->rank)) {
		char a[128], b[128];
		return op_error(node, "scan output %zu changes from %s %s to %s %s between iterations", j,
				dtype_name(s->dtype), shape_str(s->rank, s->dims, a, sizeof a),
				dtype_name(t->dtype), shape_str(t->rank, t->dims, b, sizeof b));
	}
	if (s->n == s->cap) {
		s->cap = s->cap ? 2 * s->cap : 8;
		s->buf = xreallocarray(s->buf, (size_t)s->cap, s->each ? s->each : 1);
	}
	if (s->each)
		memcpy(s->buf + (size_t)s->n * s->each, t->data, s->each);
	s->n++;
	return 0;
}

/* element type and dims of a graph output as declared (unknown dims -> 0) */
static void declared_type(const Onnx__ValueInfoProto *vi, int *dt, int *rank, int64_t *dims)
{
	*dt = DT_FLOAT;
	*rank = 0;
	const Onnx__TypeProto *tp = vi ? vi->type : NULL;
	if (!tp || tp->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !tp->tensor_type)
		return;
	const Onnx__TypeProto__Tensor *tt = tp->tensor_type;
	if (tt->has_elem_type)
		*dt = tt->elem_type;
	if (tt->shape && tt->shape->n_dim <= QM_MAX_RANK - 1) {
		*rank = (int)tt->shape->n_dim;
		for (size_t i = 0; i < tt->shape->n_dim; i++) {
			const Onnx__TensorShapeProto__Dimension *d = tt->shape->dim[i];
			dims[i] = d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE ?
				  d->dim_value : 0;
		}
	}
}

static int stack_output(RunCtx *c, size_t i, Stack *s, const Onnx__ValueInfoProto *vi)
{
	int64_t dims[QM_MAX_RANK];
	int dt, rank;
	if (!s->buf) {
		declared_type(vi, &dt, &rank, dims);
		memmove(dims + 1, dims, sizeof dims[0] * (size_t)rank);
		dims[0] = 0;
		return op_output(c, i, dt, rank + 1, dims);
	}
	dims[0] = s->n;
	memcpy(dims + 1, s->dims, sizeof dims[0] * (size_t)s->rank);
	if (op_output(c, i, s->dtype, s->rank + 1, dims) < 0)
		return -1;
	if (c->out[i]->nbytes)
		memcpy(c->out[i]->data, s->buf, c->out[i]->nbytes);
	return 0;
}

static int loop_run(RunCtx *c)
{
	const Onnx__GraphProto *g;
	if (need_graph(c->node, "body", &g) < 0)
		return -1;
	if (c->nin < 2)
		return op_error(c->node, "Loop takes M, cond and the carried values");
	size_t n = c->nin - 2;
	if (c->nout < n)
		return op_error(c->node, "%zu carried values but %zu outputs", n, c->nout);
	size_t k = c->nout - n, nbody = 1 + n + k;
	if (g->n_input != 2 + n || g->n_output != nbody)
		return op_error(c->node, "body takes %zu inputs and gives %zu outputs, expected %zu and %zu",
				g->n_input, g->n_output, 2 + n, nbody);
	int64_t m = INT64_MAX;
	int cond = 1;
	if (c->in[0]) {
		if (c->in[0]->numel != 1 || !dt_numeric(c->in[0]->dtype))
			return op_error(c->node, "M must be a scalar");
		m = elem_get_i64(c->in[0]->dtype, c->in[0]->data, 0);
	}
	if (c->in[1]) {
		if (c->in[1]->numel != 1 || !dt_numeric(c->in[1]->dtype))
			return op_error(c->node, "cond must be a scalar");
		cond = elem_get_i64(c->in[1]->dtype, c->in[1]->data, 0) != 0;
	}
	for (size_t i = 0; i < n; i++)
		if (!c->in[2 + i])
			return op_error(c->node, "carried value %zu is missing", i);
	Tensor *carried = xcalloc(n ? n : 1, sizeof *carried);
	Tensor *res = xcalloc(nbody, sizeof *res);
	Stack *st = xcalloc(k ? k : 1, sizeof *st);
	const Tensor **in = xcalloc(2 + n, sizeof *in);
	Tensor *wrap = xcalloc(n ? n : 1, sizeof *wrap);
	Tensor iter = {0}, cnd = {0};
	int ret = -1;
	for (size_t i = 0; i < n; i++)
		if (tensor_copy(&carried[i], c->in[2 + i]) < 0)
			goto out;
	if (tensor_alloc(&iter, DT_INT64, 0, NULL) < 0 || tensor_alloc(&cnd, DT_BOOL, 0, NULL) < 0)
		goto out;
	for (int64_t it = 0; it < m && cond; it++) {
		memcpy(iter.data, &it, 8);
		*(uint8_t *)cnd.data = 1;
		in[0] = &iter;
		in[1] = &cnd;
		for (size_t i = 0; i < n; i++) {
			in[2 + i] = &carried[i];
			/* a value meets a body input declared optional as an optional
			 * holding it (a borrowed view: never freed) */
			const Onnx__TypeProto *tp = g->input[2 + i]->type;
			if (tp && tp->value_case == ONNX__TYPE_PROTO__VALUE_OPTIONAL_TYPE &&
			    carried[i].kind != TK_OPTIONAL) {
				wrap[i] = (Tensor){.kind = TK_OPTIONAL, .dtype = carried[i].dtype,
						   .items = &carried[i], .nitems = 1};
				in[2 + i] = &wrap[i];
			}
		}
		if (run_subgraph(c, g, 2 + n, in, nbody, res) < 0)
			goto out;
		if (res[0].numel != 1 || !dt_numeric(res[0].dtype)) {
			op_error(c->node, "body's cond output must be a scalar");
			goto out;
		}
		cond = elem_get_i64(res[0].dtype, res[0].data, 0) != 0;
		for (size_t i = 0; i < n; i++) {
			tensor_free(&carried[i]);
			carried[i] = res[1 + i];
			memset(&res[1 + i], 0, sizeof res[1 + i]);
		}
		for (size_t j = 0; j < k; j++)
			if (stack_push(c->node, &st[j], &res[1 + n + j], j) < 0)
				goto out;
		for (size_t i = 0; i < nbody; i++)
			tensor_free(&res[i]);
	}
	if (set_outputs(c, 0, n, carried) < 0)
		goto out;
	for (size_t j = 0; j < k; j++)
		if (stack_output(c, n + j, &st[j], g->output[1 + n + j]) < 0)
			goto out;
	ret = 0;
out:
	tensor_free(&iter);
	tensor_free(&cnd);
	for (size_t i = 0; i < nbody; i++)
		tensor_free(&res[i]);
	free(res);
	tensors_free(carried, n);
	for (size_t j = 0; j < k; j++)
		free(st[j].buf);
	free(st);
	free(in);
	free(wrap);
	return ret;
}

OPERATOR(ai_onnx, Loop, 1, loop_infer, loop_run)

/* ---- Scan ---- */

typedef struct ScanAttrs {
	int64_t m;                        /* num_scan_inputs */
	const int64_t *in_dir, *out_dir, *in_axes, *out_axes;
	size_t n_in_dir, n_out_dir, n_in_axes, n_out_axes;
} ScanAttrs;

static int scan_attrs(const Onnx__NodeProto *n, int64_t opset, ScanAttrs *a)
{
	memset(a, 0, sizeof *a);
	if (attr_int(n, "num_scan_inputs", -1, &a->m) < 0)
		return -1;
	if (a->m < 1)
		return op_error(n, "attribute 'num_scan_inputs' is required (>= 1)");
	if (opset < 9) {
		if (attr_ints(n, "directions", &a->in_dir, &a->n_in_dir) < 0)
			return -1;
		return 0;
	}
	if (attr_ints(n, "scan_input_directions", &a->in_dir, &a->n_in_dir) < 0 ||
	    attr_ints(n, "scan_output_directions", &a->out_dir, &a->n_out_dir) < 0 ||
	    attr_ints(n, "scan_input_axes", &a->in_axes, &a->n_in_axes) < 0 ||
	    attr_ints(n, "scan_output_axes", &a->out_axes, &a->n_out_axes) < 0)
		return -1;
	return 0;
}

static int64_t pick(const int64_t *v, size_t n, size_t i)
{
	return v && i < n ? v[i] : 0;
}

static int scan_infer(InferCtx *c)
{
	const Onnx__GraphProto *g;
	ScanAttrs a;
	if (need_graph(c->node, "body", &g) < 0 || scan_attrs(c->node, c->opset, &a) < 0)
		return -1;
	int v8 = c->opset < 9;
	size_t first = v8 ? 1 : 0;   /* opset 8: input 0 is sequence_lens */
	if (c->nin < first + (size_t)a.m)
		return op_error(c->node, "%zu inputs for %lld scan inputs", c->nin, (long long)a.m);
	size_t m = (size_t)a.m, n = c->nin - first - m;
	if (c->nout < n)
		return op_error(c->node, "%zu state values but %zu outputs", n, c->nout);
	size_t k = c->nout - n;
	ValueType *bin = vt_array(n + m), *bout = vt_array(n + k);
	const ValueType **pin = xcalloc(n + m, sizeof *pin);
	int ret = -1;
	Dim batch = {-1, NULL}, len = {-1, NULL};
	for (size_t i = 0; i < n + m; i++) {
		const ValueType *t = c->in[first + i];
		if (!t) {
			op_error(c->node, "input %zu is missing", first + i);
			goto out;
		}
		int64_t axis = 0;
		int strip = i >= n;   /* scan inputs lose the scan axis */
		if (i >= n && !v8)
			axis = pick(a.in_axes, a.n_in_axes, i - n);
		if (v8 || strip) {
			/* opset 8: everything has the batch axis 0; scan inputs then the sequence axis */
			ValueType tmp = {.rank = -1};
			vt_copy(&tmp, t);
			if (tmp.value) {
				tensor_free(tmp.value);
				free(tmp.value);
				tmp.value = NULL;
			}
			free(tmp.symval);
			tmp.symval = NULL;
			tmp.nsymval = 0;
			int drop = v8 ? (strip ? 2 : 1) : 1;
			if (tmp.rank >= 0) {
				if (tmp.rank < drop) {
					vt_clear(&tmp);
					op_error(c->node, "input %zu has rank %d, too small to scan", first + i,
						 t->rank);
					goto out;
				}
				int64_t ax;
				if (norm_axis(c->node, v8 ? 0 : axis, tmp.rank, &ax) < 0) {
					vt_clear(&tmp);
					goto out;
				}
				if (v8) {
					if (batch.v < 0 && !batch.sym)
						batch = tmp.dims[0];
					if (strip && len.v < 0 && !len.sym)
						len = tmp.dims[1];
					memmove(tmp.dims, tmp.dims + drop, sizeof tmp.dims[0] * (size_t)(tmp.rank - drop));
				} else {
					if (len.v < 0 && !len.sym)
						len = tmp.dims[ax];
					memmove(tmp.dims + ax, tmp.dims + ax + 1,
						sizeof tmp.dims[0] * (size_t)(tmp.rank - ax - 1));
				}
				tmp.rank -= drop;
			}
			bin[i] = tmp;
		} else if (vt_copy(&bin[i], t) < 0) {
			goto out;
		}
		pin[i] = &bin[i];
	}
	if (infer_subgraph(c, g, n + m, pin, n + k, bout) < 0)
		goto out;
	for (size_t i = 0; i < n; i++) {
		if (v8) {
			if (vt_insert_dim(c->node, c->out[i], &bout[i], 0, batch) < 0)
				goto out;
		} else if (vt_copy(c->out[i], &bout[i]) < 0) {
			goto out;
		}
	}
	for (size_t j = 0; j < k; j++) {
		if (v8) {
			ValueType tmp = {.rank = -1};
			int r = vt_insert_dim(c->node, &tmp, &bout[n + j], 0, len);
			if (r == 0)
				r = vt_insert_dim(c->node, c->out[n + j], &tmp, 0, batch);
			vt_clear(&tmp);
			if (r < 0)
				goto out;
		} else if (vt_insert_dim(c->node, c->out[n + j], &bout[n + j],
					 pick(a.out_axes, a.n_out_axes, j), len) < 0) {
			goto out;
		}
	}
	ret = 0;
out:
	vt_array_free(bin, n + m);
	vt_array_free(bout, n + k);
	free(pin);
	return ret;
}

/* t = x[..., i, ...] with i taken on axis (t allocated here) */
static int take_slice(const Onnx__NodeProto *node, int64_t opset, const Tensor *x, int axis, int64_t i, Tensor *t)
{
	int64_t dims[QM_MAX_RANK];
	size_t es;
	if (op_elemsize(node, opset, x->dtype, &es) < 0)
		return -1;
	for (int k = 0, o = 0; k < x->rank; k++)
		if (k != axis)
			dims[o++] = x->dims[k];
	if (tensor_alloc(t, x->dtype, x->rank - 1, dims) < 0)
		return -1;
	int64_t outer = shape_numel(axis, x->dims), n = x->dims[axis];
	size_t inner = (size_t)shape_numel(x->rank - axis - 1, x->dims + axis + 1) * es;
	for (int64_t o = 0; o < outer; o++)
		memcpy((char *)t->data + (size_t)o * inner, (const char *)x->data + (size_t)(o * n + i) * inner,
		       inner);
	return 0;
}

/* y[..., i, ...] = t on axis of y (y has len entries there) */
static void put_slice(Tensor *y, int axis, int64_t i, const Tensor *t)
{
	size_t es = (size_t)dtype_bits(y->dtype) / 8;
	int64_t outer = shape_numel(axis, y->dims), n = y->dims[axis];
	size_t inner = (size_t)shape_numel(y->rank - axis - 1, y->dims + axis + 1) * es;
	for (int64_t o = 0; o < outer; o++)
		memcpy((char *)y->data + (size_t)(o * n + i) * inner, (const char *)t->data + (size_t)o * inner,
		       inner);
}

/* One scan over sequence length len: states st[n] (replaced in place by the
 * final states), scan inputs x[m] with axes/directions, scan outputs y[k]
 * allocated here with the scan axis inserted at out axes. */
static int scan_core(RunCtx *c, const Onnx__GraphProto *g, const ScanAttrs *a, int v8, size_t n,
		     Tensor *st, size_t m, const Tensor *const *x, const int *xaxes, int64_t len,
		     size_t k, Tensor *y)
{
	Tensor *slices = xcalloc(m ? m : 1, sizeof *slices);
	Tensor *res = xcalloc(n + k, sizeof *res);
	const Tensor **in = xcalloc(n + m, sizeof *in);
	int ret = -1;
	for (int64_t t = 0; t < len; t++) {
		for (size_t j = 0; j < m; j++) {
			int64_t pos = pick(a->in_dir, a->n_in_dir, j) ? len - 1 - t : t;
			tensor_free(&slices[j]);
			if (take_slice(c->node, c->opset, x[j], xaxes[j], pos, &slices[j]) < 0)
				goto out;
		}
		for (size_t i = 0; i < n; i++)
			in[i] = &st[i];
		for (size_t j = 0; j < m; j++)
			in[n + j] = &slices[j];
		if (run_subgraph(c, g, n + m, in, n + k, res) < 0)
			goto out;
		for (size_t i = 0; i < n; i++) {
			tensor_free(&st[i]);
			st[i] = res[i];
			memset(&res[i], 0, sizeof res[i]);
		}
		for (size_t j = 0; j < k; j++) {
			const Tensor *r = &res[n + j];
			int64_t ax = v8 ? 0 : pick(a->out_axes, a->n_out_axes, j), ax2;
			if (norm_axis(c->node, ax, r->rank + 1, &ax2) < 0)
				goto out;
			size_t es;
			if (op_elemsize(c->node, c->opset, r->dtype, &es) < 0)
				goto out;
			if (t == 0) {
				int64_t dims[QM_MAX_RANK];
				if (r->rank + 1 > QM_MAX_RANK) {
					op_error(c->node, "scan output rank exceeds the supported %d", QM_MAX_RANK);
					goto out;
				}
				for (int q = 0, o = 0; q <= r->rank; q++)
					dims[q] = q == ax2 ? len : r->dims[o++];
				if (tensor_alloc(&y[j], r->dtype, r->rank + 1, dims) < 0)
					goto out;
			} else {
				int ok = r->dtype == y[j].dtype && r->rank + 1 == y[j].rank;
				for (int q = 0, o = 0; ok && q <= r->rank; q++)
					if (q != ax2)
						ok = y[j].dims[q] == r->dims[o++];
				if (!ok) {
					op_error(c->node, "scan output %zu changes shape between iterations", j);
					goto out;
				}
			}
			int64_t pos = !v8 && pick(a->out_dir, a->n_out_dir, j) ? len - 1 - t : t;
			put_slice(&y[j], (int)ax2, pos, r);
		}
		for (size_t i = 0; i < n + k; i++)
			tensor_free(&res[i]);
	}
	if (len == 0)
		for (size_t j = 0; j < k; j++) {
			int dt, rank;
			int64_t dims[QM_MAX_RANK];
			declared_type(g->output[n + j], &dt, &rank, dims);
			memmove(dims + 1, dims, sizeof dims[0] * (size_t)rank);
			dims[0] = 0;
			if (tensor_alloc(&y[j], dt, rank + 1, dims) < 0)
				goto out;
		}
	ret = 0;
out:
	for (size_t j = 0; j < m; j++)
		tensor_free(&slices[j]);
	free(slices);
	for (size_t i = 0; i < n + k; i++)
		tensor_free(&res[i]);
	free(res);
	free(in);
	return ret;
}

static int scan_run(RunCtx *c)
{
	const Onnx__GraphProto *g;
	ScanAttrs a;
	if (need_graph(c->node, "body", &g) < 0 || scan_attrs(c->node, c->opset, &a) < 0)
		return -1;
	int v8 = c->opset < 9;
	size_t first = v8 ? 1 : 0;
	if (c->nin < first + (size_t)a.m)
		return op_error(c->node, "%zu inputs for %lld scan inputs", c->nin, (long long)a.m);
	size_t m = (size_t)a.m, n = c->nin - first - m;
	if (c->nout < n)
		return op_error(c->node, "%zu state values but %zu outputs", n, c->nout);
	size_t k = c->nout - n;
	if (g->n_input != n + m || g->n_output != n + k)
		return op_error(c->node, "body takes %zu inputs and gives %zu outputs, expected %zu and %zu",
				g->n_input, g->n_output, n + m, n + k);
	for (size_t i = 0; i < n + m; i++)
		if (!c->in[first + i])
			return op_error(c->node, "input %zu is missing", first + i);
	Tensor *st = xcalloc(n ? n : 1, sizeof *st), *y = xcalloc(k ? k : 1, sizeof *y);
	int *axes = xcalloc(m, sizeof *axes);
	int ret = -1;
	if (!v8) {
		int64_t len = -1;
		for (size_t j = 0; j < m; j++) {
			const Tensor *x = c->in[n + j];
			int64_t ax;
			if (x->rank < 1) {
				op_error(c->node, "scan input %zu is a scalar", j);
				goto out;
			}
			if (norm_axis(c->node, pick(a.in_axes, a.n_in_axes, j), x->rank, &ax) < 0)
				goto out;
			axes[j] = (int)ax;
			if (len >= 0 && x->dims[ax] != len) {
				op_error(c->node, "scan inputs have sequence lengths %lld and %lld",
					 (long long)len, (long long)x->dims[ax]);
				goto out;
			}
			len = x->dims[ax];
		}
		for (size_t i = 0; i < n; i++)
			if (tensor_copy(&st[i], c->in[i]) < 0)
				goto out;
		if (scan_core(c, g, &a, 0, n, st, m, c->in + n, axes, len, k, y) < 0 ||
		    set_outputs(c, 0, n, st) < 0 || set_outputs(c, n, k, y) < 0)
			goto out;
		ret = 0;
		goto out;
	}
	/* opset 8: batch axis 0 everywhere, sequence axis 1 of scan inputs,
	 * optional sequence_lens per batch entry (shorter sequences are padded
	 * with zeros in the scan outputs) */
	const Tensor *x0 = c->in[first + n];
	if (x0->rank < 2) {
		op_error(c->node, "scan input 0 must have batch and sequence axes");
		goto out;
	}
	int64_t batch = x0->dims[0], maxlen = x0->dims[1];
	Tensor *bst = xcalloc(n ? n : 1, sizeof *bst), *by = xcalloc(k ? k : 1, sizeof *by);
	Tensor *bx = xcalloc(m, sizeof *bx);
	const Tensor **px = xcalloc(m, sizeof *px);
	int r8 = -1;
	for (int64_t b = 0; b < batch; b++) {
		int64_t len = maxlen;
		if (c->in[0]) {
			if (c->in[0]->numel != batch || !dt_numeric(c->in[0]->dtype)) {
				op_error(c->node, "sequence_lens must have one entry per batch");
				goto out8;
			}
			len = elem_get_i64(c->in[0]->dtype, c->in[0]->data, b);
			if (len < 0 || len > maxlen) {
				op_error(c->node, "sequence length %lld is out of range 0..%lld",
					 (long long)len, (long long)maxlen);
				goto out8;
			}
		}
		for (size_t i = 0; i < n; i++) {
			tensor_free(&bst[i]);
			if (c->in[1 + i]->rank < 1 || c->in[1 + i]->dims[0] != batch) {
				op_error(c->node, "state %zu lacks the batch axis of size %lld", i, (long long)batch);
				goto out8;
			}
			if (take_slice(c->node, c->opset, c->in[1 + i], 0, b, &bst[i]) < 0)
				goto out8;
		}
		for (size_t j = 0; j < m; j++) {
			const Tensor *x = c->in[1 + n + j];
			tensor_free(&bx[j]);
			if (x->rank < 2 || x->dims[0] != batch || x->dims[1] != maxlen) {
				op_error(c->node, "scan input %zu must be [batch, sequence, ...]", j);
				goto out8;
			}
			if (take_slice(c->node, c->opset, x, 0, b, &bx[j]) < 0)
				goto out8;
			if (len < maxlen) {
				/* only the first len steps take part */
				bx[j].dims[0] = len;
				bx[j].numel = shape_numel(bx[j].rank, bx[j].dims);
				bx[j].nbytes = dtype_nbytes(bx[j].dtype, bx[j].numel);
			}
			px[j] = &bx[j];
			axes[j] = 0;
		}
		for (size_t j = 0; j < k; j++)
			tensor_free(&by[j]);
		if (scan_core(c, g, &a, 1, n, bst, m, px, axes, len, k, by) < 0)
			goto out8;
		for (size_t i = 0; i < n; i++) {
			if (b == 0) {
				int64_t dims[QM_MAX_RANK];
				dims[0] = batch;
				memcpy(dims + 1, bst[i].dims, sizeof dims[0] * (size_t)bst[i].rank);
				if (tensor_alloc(&st[i], bst[i].dtype, bst[i].rank + 1, dims) < 0)
					goto out8;
			}
			if (bst[i].nbytes * (size_t)batch != st[i].nbytes) {
				op_error(c->node, "state %zu changes shape between batch entries", i);
				goto out8;
			}
			put_slice(&st[i], 0, b, &bst[i]);
		}
		for (size_t j = 0; j < k; j++) {
			/* per batch [len, ...] -> [batch, maxlen, ...], zero padded */
			if (b == 0) {
				int64_t dims[QM_MAX_RANK];
				if (by[j].rank + 1 > QM_MAX_RANK) {
					op_error(c->node, "scan output rank exceeds the supported %d", QM_MAX_RANK);
					goto out8;
				}
				dims[0] = batch;
				memcpy(dims + 1, by[j].dims, sizeof dims[0] * (size_t)by[j].rank);
				dims[1] = maxlen;
				if (tensor_alloc(&y[j], by[j].dtype, by[j].rank + 1, dims) < 0)
					goto out8;
			}
			size_t row = y[j].nbytes / (size_t)(batch ? batch : 1);
			if (by[j].nbytes > row || by[j].dtype != y[j].dtype) {
				op_error(c->node, "scan output %zu changes shape between batch entries", j);
				goto out8;
			}
			memcpy((char *)y[j].data + (size_t)b * row, by[j].data, by[j].nbytes);
		}
	}
	if (batch == 0) {
		op_error(c->node, "empty batch is not supported");
		goto out8;
	}
	if (set_outputs(c, 0, n, st) < 0 || set_outputs(c, n, k, y) < 0)
		goto out8;
	r8 = 0;
out8:
	for (size_t i = 0; i < n; i++)
		tensor_free(&bst[i]);
	for (size_t j = 0; j < k; j++)
		tensor_free(&by[j]);
	for (size_t j = 0; j < m; j++)
		tensor_free(&bx[j]);
	free(bst);
	free(by);
	free(bx);
	free(px);
	ret = r8;
out:
	for (size_t i = 0; i < n; i++)
		tensor_free(&st[i]);
	for (size_t j = 0; j < k; j++)
		tensor_free(&y[j]);
	free(st);
	free(y);
	free(axes);
	return ret;
}

OPERATOR(ai_onnx, Scan, 8, scan_infer, scan_run)
