/* einsum.c — Einsum: inference and kernels.
 *
 * The equation is parsed into labels: letters A-Z, a-z (ids 0..51 in ASCII
 * order, which is also the order of implicit outputs) and the dimensions an
 * ellipsis stands for (ids 52.., right-aligned and broadcast across inputs
 * like numpy). Two float32 operands whose labels are each either batch (both
 * inputs and output), M (first and output), N (second and output) or K
 * (both inputs, summed) are transposed into batched matrices and multiplied
 * with cblas_sgemm; anything else (diagonals, sums over one operand, more
 * operands, other types) runs the general loop over every label, which
 * accumulates in double (float types) or int64 (integers). */
#include <cblas.h>
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "ops/nn.h"
#include "ops/op.h"
#include "ops/shapeutil.h"
#include "util.h"

#define EL_ELL 52              /* first ellipsis label id */
#define EL_MAX (EL_ELL + QM_MAX_RANK)
#define EIN_MAXIN 16

typedef struct Eq {
	int nin;
	int nell;                              /* dims the ellipsis stands for */
	int in_n[EIN_MAXIN];
	int in_lab[EIN_MAXIN][QM_MAX_RANK];    /* label of each axis of each input */
	int out_n;
	int out_lab[QM_MAX_RANK];
} Eq;

static int letter_id(char ch)
{
	if (ch >= 'A' && ch <= 'Z')
		return ch - 'A';
	if (ch >= 'a' && ch <= 'z')
		return 26 + ch - 'a';
	return -1;
}

/* parse the equation for inputs of the given ranks (-1 unknown: 1 returned
 * when the ranks are needed and not known) */
static int eq_parse(const Onnx__NodeProto *n, size_t nin, const int *ranks, Eq *e)
{
	char raw[512], s[512];
	if (attr_str(n, "equation", "", raw, sizeof raw) < 0)
		return -1;
	size_t k = 0;
	for (size_t i = 0; raw[i]; i++)
		if (!isspace((unsigned char)raw[i]))
			s[k++] = raw[i];
	s[k] = 0;
	if (!*s)
		return op_error(n, "attribute 'equation' is required");
	memset(e, 0, sizeof *e);
	if (nin > EIN_MAXIN)
		return op_error(n, "Einsum with %zu inputs is not supported (at most %d)", nin, EIN_MAXIN);
	e->nin = (int)nin;
	char *arrow = strstr(s, "->");
	if (arrow)
		*arrow = 0;
	/* first pass: ellipsis ranks */
	int ellr[EIN_MAXIN] = {0}, hasell[EIN_MAXIN] = {0}, count[EL_MAX] = {0};
	const char *p = s;
	for (int t = 0; t < e->nin; t++) {
		int nlet = 0;
		while (*p && *p != ',') {
			if (!strncmp(p, "...", 3)) {
				if (hasell[t]++)
					return op_error(n, "term %d of equation '%s' has two ellipses", t, raw);
				p += 3;
				continue;
			}
			if (letter_id(*p) < 0)
				return op_error(n, "invalid character '%c' in equation '%s'", *p, raw);
			nlet++;
			p++;
		}
		if (t < e->nin - 1) {
			if (*p != ',')
				return op_error(n, "equation '%s' has fewer terms than the %d inputs", raw, e->nin);
			p++;
		}
		if (ranks[t] < 0) {
			if (hasell[t])
				return 1;
		} else if (hasell[t] ? ranks[t] < nlet : ranks[t] != nlet) {
			return op_error(n, "term %d of equation '%s' has %d labels but input %d has rank %d", t, raw,
					nlet, t, ranks[t]);
		}
		if (hasell[t]) {
			ellr[t] = ranks[t] - nlet;
			if (ellr[t] > e->nell)
				e->nell = ellr[t];
		}
		if (nlet + ellr[t] > QM_MAX_RANK)
			return op_error(n, "term %d has too many dimensions", t);
	}
	if (*p)
		return op_error(n, "equation '%s' has more terms than the %d inputs", raw, e->nin);
	/* second pass: labels */
	p = s;
	for (int t = 0; t < e->nin; t++) {
		int a = 0;
		while (*p && *p != ',') {
			if (!strncmp(p, "...", 3)) {
				for (int j = 0; j < ellr[t]; j++)
					e->in_lab[t][a++] = EL_ELL + e->nell - ellr[t] + j;
				p += 3;
				continue;
			}
			int id = letter_id(*p++);
			e->in_lab[t][a++] = id;
			count[id]++;
		}
		e->in_n[t] = a;
		if (*p == ',')
			p++;
	}
	if (arrow) {
		int seen[EL_MAX] = {0}, ell = 0;
		for (p = arrow + 2; *p;) {
			if (!strncmp(p, "...", 3)) {
				if (ell++)
					return op_error(n, "the output of equation '%s' has two ellipses", raw);
				for (int j = 0; j < e->nell; j++)
					e->out_lab[e->out_n++] = EL_ELL + j;
				p += 3;
				continue;
			}
			int id = letter_id(*p);
			if (id < 0)
				return op_error(n, "invalid character '%c' in equation '%s'", *p, raw);
			if (!count[id])
				return op_error(n, "output label '%c' of equation '%s' is not in any input", *p, raw);
			if (seen[id]++)
				return op_error(n, "output label '%c' of equation '%s' appears twice", *p, raw);
			if (e->out_n >= QM_MAX_RANK)
				return op_error(n, "the output of equation '%s' has too many dimensions", raw);
			e->out_lab[e->out_n++] = id;
			p++;
		}
	} else {
		for (int j = 0; j < e->nell; j++)
			e->out_lab[e->out_n++] = EL_ELL + j;
		for (int id = 0; id < EL_ELL; id++)
			if (count[id] == 1) {
				if (e->out_n >= QM_MAX_RANK)
					return op_error(n, "the output of equation '%s' has too many dimensions", raw);
				e->out_lab[e->out_n++] = id;
			}
	}
	return 0;
}

static int einsum_infer(InferCtx *c)
{
	int ranks[EIN_MAXIN];
	Eq e;
	int elem = 0;
	if (c->nin > EIN_MAXIN)
		return op_error(c->node, "Einsum with %zu inputs is not supported (at most %d)", c->nin, EIN_MAXIN);
	for (size_t i = 0; i < c->nin; i++) {
		const ValueType *t = nn_in(c, i);
		if (!t)
			return -1;
		ranks[i] = t->rank;
		if (!elem)
			elem = t->elem;
	}
	int r = eq_parse(c->node, c->nin, ranks, &e);
	ValueType *o = c->out[0];
	vt_set_tensor(o, elem, -1);
	if (r < 0)
		return -1;
	if (r == 1)
		return 0;
	vt_set_tensor(o, elem, e.out_n);
	for (int k = 0; k < e.out_n; k++) {
		Dim d = {-1, NULL};
		int found = 0;
		for (int t = 0; t < e.nin; t++) {
			if (ranks[t] < 0)
				continue;
			for (int a = 0; a < e.in_n[t]; a++) {
				if (e.in_lab[t][a] != e.out_lab[k])
					continue;
				Dim di = c->in[t]->dims[a];
				if (!found || d.v == 1 || (d.v < 0 && !d.sym && (di.v >= 0 || di.sym))) {
					if (!(found && di.v == 1))
						d = di;
				}
				found = 1;
			}
		}
		o->dims[k] = d.v >= 0 || d.sym ? d : nn_dim(c, -1);
	}
	return 0;
}

/* ---- kernels ---- */

typedef struct Lab {
	int64_t size[EL_MAX];
	int64_t stride[EIN_MAXIN][EL_MAX];  /* element stride of each label in each input */
	int used[EL_MAX];
} Lab;

static int lab_fill(RunCtx *c, const Eq *e, Lab *l)
{
	memset(l, 0, sizeof *l);
	for (int i = 0; i < EL_MAX; i++)
		l->size[i] = -1;
	for (int t = 0; t < e->nin; t++) {
		const Tensor *x = c->in[t];
		int64_t st[QM_MAX_RANK];
		dims_strides(x->rank, x->dims, st);
		for (int a = 0; a < e->in_n[t]; a++) {
			int id = e->in_lab[t][a];
			int64_t d = x->dims[a];
			l->used[id] = 1;
			if (l->size[id] < 0 || l->size[id] == 1)
				l->size[id] = d;
			else if (d != l->size[id] && !(d == 1 && id >= EL_ELL))
				return op_error(c->node, "label %d has sizes %lld and %lld", id, (long long)l->size[id],
						(long long)d);
			if (d != 1 || id < EL_ELL)
				l->stride[t][id] += st[a];
		}
	}
	for (int i = 0; i < EL_MAX; i++)
		if (l->size[i] < 0)
			l->size[i] = 1;
	return 0;
}

/* dst[odometer over labs[0..n)] = src[sum idx * stride] */
static void gather_f32(const float *src, int n, const int *labs, const int64_t *size, const int64_t *stride,
		       float *dst)
{
	int64_t idx[EL_MAX] = {0}, total = 1;
	for (int i = 0; i < n; i++)
		total *= size[labs[i]];
	int64_t off = 0;
	for (int64_t k = 0; k < total; k++) {
		dst[k] = src[off];
		for (int i = n - 1; i >= 0; i--) {
			int id = labs[i];
			off += stride[id];
			if (++idx[i] < size[id])
				break;
			off -= stride[id] * size[id];
			idx[i] = 0;
		}
	}
}

/* two float32 operands as batched GEMM; 1 when the equation does not fit */
static int einsum_gemm(RunCtx *c, const Eq *e, const Lab *l, int64_t *odims)
{
	if (e->nin != 2 || c->in[0]->dtype != DT_FLOAT || c->in[1]->dtype != DT_FLOAT)
		return 1;
	int inA[EL_MAX] = {0}, inB[EL_MAX] = {0}, inO[EL_MAX] = {0};
	for (int a = 0; a < e->in_n[0]; a++)
		if (inA[e->in_lab[0][a]]++)
			return 1;
	for (int a = 0; a < e->in_n[1]; a++)
		if (inB[e->in_lab[1][a]]++)
			return 1;
	for (int k = 0; k < e->out_n; k++)
		inO[e->out_lab[k]] = 1;
	int bl[EL_MAX], ml[EL_MAX], nl[EL_MAX], kl[EL_MAX], nb = 0, nm = 0, nn = 0, nk = 0;
	int64_t B = 1, M = 1, N = 1, K = 1;
	for (int id = 0; id < EL_MAX; id++) {
		if (!inA[id] && !inB[id])
			continue;
		/* a broadcast (size-1) ellipsis dim in one operand only: general path */
		if (inA[id] && inB[id] && l->size[id] != 1 &&
		    (l->stride[0][id] == 0 || l->stride[1][id] == 0))
			return 1;
		if (inA[id] && inB[id] && inO[id]) {
			bl[nb++] = id;
			B *= l->size[id];
		} else if (inA[id] && inO[id]) {
			ml[nm++] = id;
			M *= l->size[id];
		} else if (inB[id] && inO[id]) {
			nl[nn++] = id;
			N *= l->size[id];
		} else if (inA[id] && inB[id]) {
			kl[nk++] = id;
			K *= l->size[id];
		} else {
			return 1;
		}
	}
	if (op_output(c, 0, DT_FLOAT, e->out_n, odims) < 0)
		return -1;
	float *y = c->out[0]->data;
	if (c->out[0]->numel == 0)
		return 0;
	float *ta, *tb;
	const float *af = nn_f32_in(c, c->in[0], &ta), *bf = nn_f32_in(c, c->in[1], &tb);
	float *A = xmalloc(sizeof(float) * (size_t)(B * M * K > 0 ? B * M * K : 1));
	float *Bm = xmalloc(sizeof(float) * (size_t)(B * K * N > 0 ? B * K * N : 1));
	float *C = xmalloc(sizeof(float) * (size_t)(B * M * N));
	int la[EL_MAX], lb[EL_MAX], n = 0;
	for (int i = 0; i < nb; i++)
		la[n++] = bl[i];
	for (int i = 0; i < nm; i++)
		la[n++] = ml[i];
	for (int i = 0; i < nk; i++)
		la[n++] = kl[i];
	gather_f32(af, n, la, l->size, l->stride[0], A);
	n = 0;
	for (int i = 0; i < nb; i++)
		lb[n++] = bl[i];
	for (int i = 0; i < nk; i++)
		lb[n++] = kl[i];
	for (int i = 0; i < nn; i++)
		lb[n++] = nl[i];
	gather_f32(bf, n, lb, l->size, l->stride[1], Bm);
	for (int64_t b = 0; b < B; b++) {
		if (K == 0)
			memset(C + b * M * N, 0, sizeof(float) * (size_t)(M * N));
		else
			cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)M, (int)N, (int)K, 1.0f,
				    A + b * M * K, (int)K, Bm + b * K * N, (int)N, 0.0f, C + b * M * N, (int)N);
	}
	/* C is [batch labels, M labels, N labels]: strides per label */
	int64_t cst[EL_MAX] = {0}, s = 1;
	for (int i = nn - 1; i >= 0; i--) {
		cst[nl[i]] = s;
		s *= l->size[nl[i]];
	}
	for (int i = nm - 1; i >= 0; i--) {
		cst[ml[i]] = s;
		s *= l->size[ml[i]];
	}
	for (int i = nb - 1; i >= 0; i--) {
		cst[bl[i]] = s;
		s *= l->size[bl[i]];
	}
	gather_f32(C, e->out_n, e->out_lab, l->size, cst, y);
	free(A);
	free(Bm);
	free(C);
	free(ta);
	free(tb);
	return 0;
}

static int einsum_run(RunCtx *c)
{
	int ranks[EIN_MAXIN];
	Eq e;
	Lab l;
	if (c->nin > EIN_MAXIN)
		return op_error(c->node, "Einsum with %zu inputs is not supported (at most %d)", c->nin, EIN_MAXIN);
	int dt = c->in[0]->dtype;
	for (size_t i = 0; i < c->nin; i++) {
		if (!c->in[i])
			return op_error(c->node, "input %zu is required", i);
		if (c->in[i]->dtype != dt)
			return op_error(c->node, "inputs have types %s and %s, expected the same", dtype_name(dt),
					dtype_name(c->in[i]->dtype));
		ranks[i] = c->in[i]->rank;
	}
	int isint = dt == DT_INT32 || dt == DT_INT64 || dt == DT_UINT32 || dt == DT_UINT64;
	if (!nn_is_float(dt) && !isint)
		return op_unsupported_type(c->node, c->opset, dt);
	if (eq_parse(c->node, c->nin, ranks, &e) != 0 || lab_fill(c, &e, &l) < 0)
		return -1;
	int64_t odims[QM_MAX_RANK];
	int outl[EL_MAX] = {0};
	for (int k = 0; k < e.out_n; k++) {
		odims[k] = l.size[e.out_lab[k]];
		outl[e.out_lab[k]] = 1;
	}
	int r = einsum_gemm(c, &e, &l, odims);
	if (r <= 0)
		return r;
	/* general loop: output labels, then summed labels */
	int sl[EL_MAX], ns = 0;
	for (int id = 0; id < EL_MAX; id++)
		if (l.used[id] && !outl[id])
			sl[ns++] = id;
	if (op_output(c, 0, dt, e.out_n, odims) < 0)
		return -1;
	Tensor *y = c->out[0];
	int64_t nsum = 1;
	for (int i = 0; i < ns; i++)
		nsum *= l.size[sl[i]];
	int64_t oidx[QM_MAX_RANK] = {0};
	for (int64_t o = 0; o < y->numel; o++) {
		int64_t base[EIN_MAXIN] = {0};
		for (int t = 0; t < e.nin; t++)
			for (int k = 0; k < e.out_n; k++)
				base[t] += oidx[k] * l.stride[t][e.out_lab[k]];
		double accf = 0;
		int64_t acci = 0;
		int64_t sidx[EL_MAX] = {0};
		for (int64_t s = 0; s < nsum; s++) {
			double pf = 1;
			int64_t pi = 1;
			for (int t = 0; t < e.nin; t++) {
				int64_t off = base[t];
				for (int i = 0; i < ns; i++)
					off += sidx[i] * l.stride[t][sl[i]];
				if (isint)
					pi *= elem_get_i64(dt, c->in[t]->data, off);
				else
					pf *= elem_get_f64(dt, c->in[t]->data, off);
			}
			accf += pf;
			acci += pi;
			for (int i = ns - 1; i >= 0; i--) {
				if (++sidx[i] < l.size[sl[i]])
					break;
				sidx[i] = 0;
			}
		}
		if (isint)
			elem_put_i64(dt, y->data, o, acci);
		else
			elem_put_f64(dt, y->data, o, accf);
		for (int k = e.out_n - 1; k >= 0; k--) {
			if (++oidx[k] < odims[k])
				break;
			oidx[k] = 0;
		}
	}
	return 0;
}

OPERATOR(ai_onnx, Einsum, 12, einsum_infer, einsum_run)
