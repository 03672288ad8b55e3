/* binary.c — elementwise operators on two broadcast tensors: Add, Sub, Mul,
 * Div, Pow, Mod, And, Or, Xor, BitShift, BitwiseAnd/Or/Xor, Equal, Less,
 * Greater, LessOrEqual, GreaterOrEqual, PRelu, and the three-input Where.
 *
 * BIN_LOOP walks the output one broadcast row at a time (bcast.h) with the
 * four stride cases (both contiguous, either one a scalar, both scalars) so
 * the common shapes run as plain vector loops. Integer arithmetic wraps
 * (computed in uint64_t, never signed overflow); integer division by zero is
 * an error naming the node. Inference propagates shape data (symval) through
 * Add/Sub/Mul/Div of 1-D int64 tensors. */
/* FP exception flags and errno are never read: let GCC if-convert, inline
 * sqrt and vectorize the float loops (-ftrapping-math keeps compares as
 * branches, -fmath-errno keeps sqrt a libm call) */
#pragma GCC optimize("no-trapping-math", "no-math-errno")

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <tgmath.h>

#include "ops/bcast.h"
#include "ops/elem.h"
#include "ops/op.h"
#include "ops/shapeutil.h"
#include "util.h"

/* wrapping integer arithmetic */
#define WRAP(op) ((uint64_t)a op (uint64_t)b)

/* 0, -1 when A's type is not supported (not reported), -2 after op_error */
typedef int (*BinKern)(const Onnx__NodeProto *n, const Tensor *A, const Tensor *B, Tensor *Y);

#define BINARY(fn, cases) \
ELEM_CLONES static int fn(const Onnx__NodeProto *n, const Tensor *A, const Tensor *B, Tensor *Y) \
{ \
	switch (A->dtype) { \
	cases \
	default: return -1; \
	} \
	return 0; \
}

BINARY(k_add, BIN_FLOAT(a + b) BIN_SINT(WRAP(+)) BIN_UINT(WRAP(+)))
BINARY(k_sub, BIN_FLOAT(a - b) BIN_SINT(WRAP(-)) BIN_UINT(WRAP(-)))
BINARY(k_mul, BIN_FLOAT(a * b) BIN_SINT(WRAP(*)) BIN_UINT(WRAP(*)))
BINARY(k_and, BIN_BOOL(a && b))
BINARY(k_or, BIN_BOOL(a || b))
BINARY(k_xor, BIN_BOOL(!a != !b))
BINARY(k_bitand, BIN_SINT(a & b) BIN_UINT(a & b))
BINARY(k_bitor, BIN_SINT(a | b) BIN_UINT(a | b))
BINARY(k_bitxor, BIN_SINT(a ^ b) BIN_UINT(a ^ b))
BINARY(k_equal, CMP_ALL(a == b) BIN_CASE(DT_BOOL, uint8_t, uint8_t, a == b))
BINARY(k_less, CMP_ALL(a < b))
BINARY(k_greater, CMP_ALL(a > b))
BINARY(k_less_equal, CMP_ALL(a <= b))
BINARY(k_greater_equal, CMP_ALL(a >= b))
BINARY(k_prelu, BIN_FLOAT(a < 0 ? a * b : a) BIN_SINT(a < 0 ? WRAP(*) : (uint64_t)a)
	BIN_UINT(a))

ELEM_CLONES static int k_div(const Onnx__NodeProto *n, const Tensor *A, const Tensor *B, Tensor *Y)
{
	int zero = 0;
	switch (A->dtype) {
	BIN_FLOAT(a / b)
	BIN_SINT(b == 0 ? (zero = 1, 0) : b == -1 ? 0 - (uint64_t)a : (uint64_t)(a / b))
	BIN_UINT(b == 0 ? (zero = 1, 0) : a / b)
	default: return -1;
	}
	if (zero) {
		op_error(n, "integer division by zero");
		return -2;
	}
	return 0;
}

/* floored modulo (sign of the divisor), as Python and numpy compute it */
static int64_t floor_mod(int64_t a, int64_t b)
{
	if (b == -1)
		return 0;
	int64_t r = a % b;
	if (r != 0 && ((r < 0) != (b < 0)))
		r += b;
	return r;
}

static int k_mod(const Onnx__NodeProto *n, const Tensor *A, const Tensor *B, Tensor *Y)
{
	int64_t fm;
	int zero = 0;
	if (attr_int(n, "fmod", 0, &fm) < 0)
		return -2;
	if (A->dtype == DT_FLOAT || A->dtype == DT_DOUBLE) {
		if (!fm) {
			op_error(n, "fmod must be 1 for floating-point inputs");
			return -2;
		}
		switch (A->dtype) {
		BIN_FLOAT(fmod(a, b))
		}
		return 0;
	}
	if (fm) {
		switch (A->dtype) {
		BIN_SINT(b == 0 ? (zero = 1, 0) : b == -1 ? 0 : a % b)
		BIN_UINT(b == 0 ? (zero = 1, 0) : a % b)
		default: return -1;
		}
	} else {
		switch (A->dtype) {
		BIN_SINT(b == 0 ? (zero = 1, 0) : floor_mod(a, b))
		BIN_UINT(b == 0 ? (zero = 1, 0) : a % b)
		default: return -1;
		}
	}
	if (zero) {
		op_error(n, "integer modulo by zero");
		return -2;
	}
	return 0;
}

static int k_bitshift(const Onnx__NodeProto *n, const Tensor *A, const Tensor *B, Tensor *Y)
{
	char dir[16];
	if (attr_str(n, "direction", "", dir, sizeof dir) < 0)
		return -2;
	int left = !strcmp(dir, "LEFT");
	if (!left && strcmp(dir, "RIGHT")) {
		op_error(n, "attribute 'direction' is '%s', expected LEFT or RIGHT", dir);
		return -2;
	}
	int bits = dtype_bits(A->dtype);
	if (left) {
		switch (A->dtype) {
		BIN_UINT(b >= (uint64_t)bits ? 0 : (uint64_t)a << b)
		default: return -1;
		}
	} else {
		switch (A->dtype) {
		BIN_UINT(b >= (uint64_t)bits ? 0 : a >> b)
		default: return -1;
		}
	}
	return 0;
}

/* integer power with wrapping; negative exponents as the integer part of 1/a^-b */
static int64_t ipow(int64_t a, int64_t b)
{
	if (b < 0)
		return a == 1 ? 1 : a == -1 ? (b & 1 ? -1 : 1) : 0;
	uint64_t r = 1, x = (uint64_t)a;
	while (b) {
		if (b & 1)
			r *= x;
		x *= x;
		b >>= 1;
	}
	return (int64_t)r;
}

/* Pow: B has been converted to A's type (float base), int64 (integer base
 * and exponent) or double (integer base, float exponent) */
static int k_pow(const Onnx__NodeProto *n, const Tensor *A, const Tensor *B, Tensor *Y)
{
	if (B->dtype == A->dtype && B->numel == 1 && (A->dtype == DT_FLOAT || A->dtype == DT_DOUBLE)) {
		/* the exponents of LayerNorm and Gelu decompositions, exactly */
		double e = tensor_get_f64(B, 0);
		if (e == 2) {
			switch (A->dtype) { BIN_FLOAT(a * a) }
			return 0;
		}
		if (e == 3) {
			switch (A->dtype) { BIN_FLOAT(a * a * a) }
			return 0;
		}
		if (e == 1) {
			switch (A->dtype) { BIN_FLOAT(a) }
			return 0;
		}
		if (e == 0.5) {
			switch (A->dtype) { BIN_FLOAT(sqrt(a)) }
			return 0;
		}
	}
	if (B->dtype == A->dtype) {
		switch (A->dtype) {
		BIN_FLOAT(pow(a, b))
		}
	}
	if (B->dtype == DT_INT64) {
		switch (A->dtype) {
		case DT_INT32: BIN_LOOP(int32_t, int64_t, int32_t, ipow(a, b)) return 0;
		case DT_INT64: BIN_LOOP(int64_t, int64_t, int64_t, ipow(a, b)) return 0;
		}
	}
	if (B->dtype == DT_DOUBLE) {
		switch (A->dtype) {
		case DT_INT32: BIN_LOOP(int32_t, double, int32_t, elem_f2i64(pow((double)a, b))) return 0;
		case DT_INT64: BIN_LOOP(int64_t, double, int64_t, elem_f2i64(pow((double)a, b))) return 0;
		}
	}
	if (B->dtype == A->dtype && (A->dtype == DT_FLOAT || A->dtype == DT_DOUBLE))
		return 0;
	return -1;
}

static int binary_check(RunCtx *c, int same_type)
{
	if (c->nin < 2 || !c->in[0] || !c->in[1])
		return op_error(c->node, "expected 2 inputs");
	if (same_type && c->in[0]->dtype != c->in[1]->dtype)
		return op_error(c->node, "inputs have different types: %s and %s",
				dtype_name(c->in[0]->dtype), dtype_name(c->in[1]->dtype));
	return 0;
}

/* Before opset 7, B broadcast only with broadcast = 1, its dimensions
 * aligned at 'axis' of A (default: the trailing ones); PRelu-6 applied a 1-D
 * slope along the channel axis 1. *view becomes B with that numpy-style shape. */
static int legacy_view(RunCtx *c, const Tensor *A, const Tensor *B, Tensor *view)
{
	*view = *B;
	view->owned = 0;
	view->name = NULL;
	if (c->opset >= 7)
		return 0;
	int64_t axis = -1;
	if (!strcmp(c->node->op_type, "PRelu")) {
		if (B->rank == 1 && A->rank >= 2 && B->dims[0] == A->dims[1] && B->dims[0] != 1)
			axis = 1;
	} else {
		int64_t bc;
		if (attr_int(c->node, "broadcast", 0, &bc) < 0 || attr_int(c->node, "axis", -1, &axis) < 0)
			return -1;
		if (!bc) {
			if (A->rank != B->rank || memcmp(A->dims, B->dims, sizeof *A->dims * (size_t)A->rank))
				return op_error(c->node, "inputs have different shapes and broadcast is 0");
			return 0;
		}
		if (axis >= 0 && axis + B->rank > A->rank)
			return op_error(c->node, "axis %lld does not fit input 1 of rank %d into rank %d",
					(long long)axis, B->rank, A->rank);
	}
	if (axis < 0)
		return 0;
	view->rank = A->rank - (int)axis;
	for (int i = B->rank; i < view->rank; i++)
		view->dims[i] = 1;
	return 0;
}

/* run kern on A = e.in[0] and B (e.in[1] unless given) */
static int run_binary_with(RunCtx *c, ElemIO *e, const Tensor *B0, int bool_out, int unidir, BinKern k)
{
	const Tensor *A = e->in[0];
	Tensor Bv;
	if (legacy_view(c, A, B0, &Bv) < 0)
		return -1;
	const Tensor *B = &Bv;
	const Tensor *ab[2] = {A, B};
	int rank;
	int64_t dims[QM_MAX_RANK];
	Tensor *Y;
	int dt = c->in[0]->dtype;
	if (bcast_shape_t(c->node, 2, ab, &rank, dims) < 0)
		return -1;
	if (unidir && (rank != A->rank || memcmp(dims, A->dims, sizeof *dims * (size_t)rank))) {
		char s1[128], s2[128];
		return op_error(c->node, "input 1 of shape %s does not broadcast to input 0's %s",
				shape_str(B->rank, B->dims, s1, sizeof s1),
				shape_str(A->rank, A->dims, s2, sizeof s2));
	}
	if (eio_output(e, 0, bool_out ? DT_BOOL : dt, rank, dims, &Y) < 0)
		return -1;
	int rc = k(c->node, A, B, Y);
	if (rc == -1)
		return op_unsupported_type(c->node, c->opset, dt);
	return rc < 0 ? -1 : 0;
}

static int run_binary(RunCtx *c, int bool_out, int unidir, BinKern k)
{
	ElemIO e;
	if (binary_check(c, 1) < 0 || eio_begin(&e, c) < 0)
		return -1;
	return eio_end(&e, run_binary_with(c, &e, e.in[1], bool_out, unidir, k));
}

#define RUNNER(fn, bool_out, k) static int fn(RunCtx *c) { return run_binary(c, bool_out, 0, k); }
RUNNER(add_run, 0, k_add)
RUNNER(sub_run, 0, k_sub)
RUNNER(mul_run, 0, k_mul)
RUNNER(div_run, 0, k_div)
RUNNER(mod_run, 0, k_mod)
RUNNER(and_run, 0, k_and)
RUNNER(or_run, 0, k_or)
RUNNER(xor_run, 0, k_xor)
RUNNER(bitshift_run, 0, k_bitshift)
RUNNER(bitand_run, 0, k_bitand)
RUNNER(bitor_run, 0, k_bitor)
RUNNER(bitxor_run, 0, k_bitxor)
RUNNER(equal_run, 1, k_equal)
RUNNER(less_run, 1, k_less)
RUNNER(greater_run, 1, k_greater)
RUNNER(less_equal_run, 1, k_less_equal)
RUNNER(greater_equal_run, 1, k_greater_equal)

static int prelu_run(RunCtx *c)
{
	return run_binary(c, 0, 1, k_prelu);
}

static int pow_run(RunCtx *c)
{
	ElemIO e;
	Tensor conv = {0};
	if (binary_check(c, 0) < 0 || eio_begin(&e, c) < 0)
		return -1;
	const Tensor *A = e.in[0], *B = e.in[1];
	int want = A->dtype;
	int aint = A->dtype == DT_INT32 || A->dtype == DT_INT64;
	if (aint) {
		int bfloat = B->dtype == DT_FLOAT || B->dtype == DT_DOUBLE;
		want = bfloat ? DT_DOUBLE : DT_INT64;
	}
	if (B->dtype != want) {
		if (tensor_alloc(&conv, want, B->rank, B->dims) < 0 ||
		    cast_into(c->node, c->opset, B, &conv, 1) < 0) {
			tensor_free(&conv);
			return eio_end(&e, -1);
		}
		B = &conv;
	}
	int rc = run_binary_with(c, &e, B, 0, 0, k_pow);
	tensor_free(&conv);
	return eio_end(&e, rc);
}

/* ---- Where ---- */

#define WHERE_LOOP(T) { \
	const uint8_t *pc = C->data; \
	const T *px = X->data, *pz = Z->data; \
	T *py = Y->data; \
	const Tensor *in3[3] = {C, X, Z}; \
	BcastIter it; \
	bcast_begin(&it, Y->rank, Y->dims, 3, in3); \
	while (bcast_next(&it)) { \
		const uint8_t *rc = pc + it.off[0]; \
		const T *rx = px + it.off[1], *rz = pz + it.off[2]; \
		T *ry = py + it.out; \
		for (int64_t i = 0; i < it.n; i++) \
			ry[i] = rc[i * it.step[0]] ? rx[i * it.step[1]] : rz[i * it.step[2]]; \
	} \
}

static int where_run(RunCtx *c)
{
	ElemIO e;
	if (c->nin < 3 || !c->in[0] || !c->in[1] || !c->in[2])
		return op_error(c->node, "expected 3 inputs");
	if (c->in[0]->dtype != DT_BOOL)
		return op_error(c->node, "condition is %s, expected bool", dtype_name(c->in[0]->dtype));
	if (c->in[1]->dtype != c->in[2]->dtype)
		return op_error(c->node, "inputs X and Y have different types: %s and %s",
				dtype_name(c->in[1]->dtype), dtype_name(c->in[2]->dtype));
	int dt = c->in[1]->dtype;
	if (eio_begin(&e, c) < 0)
		return -1;
	const Tensor *C = e.in[0], *X = e.in[1], *Z = e.in[2];
	int rank;
	int64_t dims[QM_MAX_RANK];
	Tensor *Y;
	if (bcast_shape_t(c->node, 3, e.in, &rank, dims) < 0 ||
	    eio_output(&e, 0, dt, rank, dims, &Y) < 0)
		return eio_end(&e, -1);
	switch (dtype_bits(X->dtype)) {
	case 8: WHERE_LOOP(uint8_t) break;
	case 16: WHERE_LOOP(uint16_t) break;
	case 32: WHERE_LOOP(uint32_t) break;
	case 64: WHERE_LOOP(uint64_t) break;
	default: return eio_end(&e, op_unsupported_type(c->node, c->opset, dt));
	}
	return eio_end(&e, 0);
}

/* ---- inference ---- */

/* element k of a 0-D/1-D int64 value: 1 and *v when known, else 0 and *d */
static int sv_get(const ValueType *t, int64_t k, int64_t *v, Dim *d)
{
	if (t->value) {
		*v = tensor_get_i64(t->value, t->value->numel == 1 ? 0 : k);
		return 1;
	}
	Dim x = t->symval[t->nsymval == 1 ? 0 : k];
	if (x.v >= 0) {
		*v = x.v;
		return 1;
	}
	*d = x;
	return 0;
}

enum { SV_ADD, SV_SUB, SV_MUL, SV_DIV };

/* shape data through integer arithmetic: x+0, x-0, x*1, x/1 keep symbols */
static void binary_symval(InferCtx *c, int op)
{
	const ValueType *a = c->in[0], *b = c->in[1];
	ValueType *y = c->out[0];
	if (a->elem != DT_INT64 || b->elem != DT_INT64 || (a->value && b->value) ||
	    (!a->symval && !b->symval) || y->rank > 1 || y->rank < 0)
		return;
	if ((!a->value && !a->symval) || (!b->value && !b->symval))
		return;
	int64_t na = a->value ? a->value->numel : a->nsymval;
	int64_t nb = b->value ? b->value->numel : b->nsymval;
	if (na != nb && na != 1 && nb != 1)
		return;
	int64_t n = na > nb ? na : nb;
	if (n > 4096 || n == 0)
		return;
	Dim *d = xcalloc((size_t)n, sizeof *d);
	for (int64_t k = 0; k < n; k++) {
		int64_t va = 0, vb = 0;
		Dim da = {-1, NULL}, db = {-1, NULL};
		int ka = sv_get(a, k, &va, &da), kb = sv_get(b, k, &vb, &db);
		Dim r = {-1, NULL};
		if (ka && kb) {
			int64_t v = -1;
			switch (op) {
			case SV_ADD: v = (int64_t)((uint64_t)va + (uint64_t)vb); break;
			case SV_SUB: v = (int64_t)((uint64_t)va - (uint64_t)vb); break;
			case SV_MUL: v = (int64_t)((uint64_t)va * (uint64_t)vb); break;
			case SV_DIV: v = vb > 0 && va >= 0 ? va / vb : -1; break;
			}
			if (v >= 0)
				r.v = v;
		} else if (!ka && kb) {
			if (((op == SV_ADD || op == SV_SUB) && vb == 0) ||
			    ((op == SV_MUL || op == SV_DIV) && vb == 1))
				r = da;
			else if (op == SV_MUL && vb == 0)
				r.v = 0;
		} else if (ka && !kb) {
			if ((op == SV_ADD && va == 0) || (op == SV_MUL && va == 1))
				r = db;
			else if (op == SV_MUL && va == 0)
				r.v = 0;
		}
		d[k] = r;
	}
	vt_put_symval(y, d, n);
	free(d);
}

/* length of known 0-D/1-D int64 contents (value or symval), or -1 */
static int64_t sv_len(const ValueType *t)
{
	if (t->elem != DT_INT64 || t->rank > 1 || t->rank < 0)
		return -1;
	if (t->value)
		return t->value->numel;
	return t->symval ? t->nsymval : -1;
}

/* Equal on shape data: a dimension is never negative, so a symbolic entry
 * differs from a negative constant; a symbol equals itself. The output
 * value is set when every entry is decided. */
static void equal_value(InferCtx *c)
{
	const ValueType *a = c->in[0], *b = c->in[1];
	ValueType *y = c->out[0];
	int64_t na = sv_len(a), nb = sv_len(b);
	if (na < 0 || nb < 0 || (a->value && b->value) || y->value || y->rank > 1 || y->rank < 0 ||
	    (na != nb && na != 1 && nb != 1))
		return;
	int64_t n = na > nb ? na : nb;
	if (y->rank == 0 && n != 1)
		return;
	uint8_t *r = xcalloc((size_t)(n ? n : 1), 1);
	for (int64_t k = 0; k < n; k++) {
		int64_t va = 0, vb = 0;
		Dim da = {-1, NULL}, db = {-1, NULL};
		int ka = sv_get(a, k, &va, &da), kb = sv_get(b, k, &vb, &db);
		if (ka && kb)
			r[k] = va == vb;
		else if ((ka && va < 0) || (kb && vb < 0))
			r[k] = 0;
		else if (!ka && !kb && da.sym && da.sym == db.sym)
			r[k] = 1;
		else {
			free(r);
			return;
		}
	}
	Tensor *v = xcalloc(1, sizeof *v);
	int64_t dims[1] = {n};
	if (tensor_alloc(v, DT_BOOL, y->rank, dims) < 0) {
		free(v);
		free(r);
		return;
	}
	memcpy(v->data, r, (size_t)n);
	free(r);
	y->value = v;
}

/* Where selecting between shape data under a known condition */
static void where_symval(InferCtx *c)
{
	const ValueType *cond = c->in[0], *x = c->in[1], *z = c->in[2];
	ValueType *y = c->out[0];
	int64_t nx = sv_len(x), nz = sv_len(z);
	if (!cond->value || cond->value->dtype != DT_BOOL || cond->value->rank > 1 || nx < 0 ||
	    nz < 0 || (x->value && z->value) || y->rank > 1 || y->rank < 0)
		return;
	int64_t nc = cond->value->numel, n = nc;
	n = nx > n ? nx : n;
	n = nz > n ? nz : n;
	if ((nc != n && nc != 1) || (nx != n && nx != 1) || (nz != n && nz != 1) || n == 0 ||
	    (y->rank == 0 && n != 1))
		return;
	const uint8_t *pc = cond->value->data;
	Dim *d = xcalloc((size_t)n, sizeof *d);
	for (int64_t k = 0; k < n; k++) {
		const ValueType *src = pc[nc == 1 ? 0 : k] ? x : z;
		int64_t v = 0;
		Dim e = {-1, NULL};
		if (sv_get(src, k, &v, &e))
			e = v >= 0 ? (Dim){v, NULL} : (Dim){-1, NULL};
		d[k] = e;
	}
	vt_put_symval(y, d, n);
	free(d);
}

static int infer_bcast(InferCtx *c, int elem_from, int bool_out)
{
	if (c->nin < 2 || !c->in[0] || !c->in[1])
		return op_error(c->node, "expected 2 inputs");
	const ValueType *a = c->in[0], *b = c->in[1];
	ValueType *y = c->out[0];
	int elem = bool_out ? DT_BOOL : c->in[elem_from]->elem;
	if (strcmp(c->node->op_type, "Pow") && a->elem && b->elem && a->elem != b->elem)
		return op_error(c->node, "inputs have different types: %s and %s",
				dtype_name(a->elem), dtype_name(b->elem));
	vt_set_tensor(y, elem, -1);
	if (c->opset < 7) {
		/* legacy broadcasting is unidirectional: A's shape */
		y->rank = a->rank;
		for (int i = 0; i < a->rank; i++)
			y->dims[i] = a->dims[i];
		return 0;
	}
	return broadcast_dims(c->node, a, b, y);
}

static int infer_binary(InferCtx *c)
{
	return infer_bcast(c, 0, 0);
}

static int infer_compare(InferCtx *c)
{
	return infer_bcast(c, 0, 1);
}

static int equal_infer(InferCtx *c)
{
	if (infer_bcast(c, 0, 1) < 0)
		return -1;
	equal_value(c);
	return 0;
}

#define SV_INFER(fn, op) \
static int fn(InferCtx *c) \
{ \
	if (infer_bcast(c, 0, 0) < 0) \
		return -1; \
	binary_symval(c, op); \
	return 0; \
}
SV_INFER(add_infer, SV_ADD)
SV_INFER(sub_infer, SV_SUB)
SV_INFER(mul_infer, SV_MUL)
SV_INFER(div_infer, SV_DIV)

static int prelu_infer(InferCtx *c)
{
	return infer_same_as_input(c, 0, 0);
}

static int where_infer(InferCtx *c)
{
	if (c->nin < 3 || !c->in[0] || !c->in[1] || !c->in[2])
		return op_error(c->node, "expected 3 inputs");
	ValueType t = {0};
	ValueType *y = c->out[0];
	int elem = c->in[1]->elem ? c->in[1]->elem : c->in[2]->elem;
	if (c->in[1]->elem && c->in[2]->elem && c->in[1]->elem != c->in[2]->elem)
		return op_error(c->node, "inputs X and Y have different types: %s and %s",
				dtype_name(c->in[1]->elem), dtype_name(c->in[2]->elem));
	t.rank = -1;
	if (broadcast_dims(c->node, c->in[0], c->in[1], &t) < 0)
		return -1;
	vt_set_tensor(y, elem, -1);
	if (broadcast_dims(c->node, &t, c->in[2], y) < 0)
		return -1;
	where_symval(c);
	return 0;
}

OPERATOR(ai_onnx, Add, 1, add_infer, add_run)
OPERATOR(ai_onnx, Sub, 1, sub_infer, sub_run)
OPERATOR(ai_onnx, Mul, 1, mul_infer, mul_run)
OPERATOR(ai_onnx, Div, 1, div_infer, div_run)
OPERATOR(ai_onnx, Pow, 1, infer_binary, pow_run)
OPERATOR(ai_onnx, Mod, 10, infer_binary, mod_run)
OPERATOR(ai_onnx, And, 1, infer_compare, and_run)
OPERATOR(ai_onnx, Or, 1, infer_compare, or_run)
OPERATOR(ai_onnx, Xor, 1, infer_compare, xor_run)
OPERATOR(ai_onnx, BitShift, 11, infer_binary, bitshift_run)
OPERATOR(ai_onnx, BitwiseAnd, 18, infer_binary, bitand_run)
OPERATOR(ai_onnx, BitwiseOr, 18, infer_binary, bitor_run)
OPERATOR(ai_onnx, BitwiseXor, 18, infer_binary, bitxor_run)
OPERATOR(ai_onnx, Equal, 1, equal_infer, equal_run)
OPERATOR(ai_onnx, Less, 1, infer_compare, less_run)
OPERATOR(ai_onnx, Greater, 1, infer_compare, greater_run)
OPERATOR(ai_onnx, LessOrEqual, 12, infer_compare, less_equal_run)
OPERATOR(ai_onnx, GreaterOrEqual, 12, infer_compare, greater_equal_run)
OPERATOR(ai_onnx, PRelu, 1, prelu_infer, prelu_run)
OPERATOR(ai_onnx, Where, 9, where_infer, where_run)
