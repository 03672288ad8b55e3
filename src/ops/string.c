/* string.c — string tensors: StringNormalizer, TfIdfVectorizer (on
 * strings or integers), and Cast to and from strings (for cast.c).
 *
 * A string tensor is one block of offsets and bytes (src/onnx/tensor.h);
 * kernels collect their results as (pointer, length) pairs and build the
 * output with tensor_set_strings(). Case changes map code points with the
 * C library's towlower/towupper in the C.UTF-8 locale, whatever the node's
 * 'locale' says (glibc has no per-language case rules beyond Unicode's
 * simple mappings); text that is not UTF-8 is an error naming the element. */
#include "ops/string.h"

#include <errno.h>
#include <locale.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <wchar.h>
#include <wctype.h>

#include "onnx/node.h"
#include "ops/elem.h"
#include "ops/shapeutil.h"
#include "util.h"

/* A growing list of result strings, built into an output at the end. */
typedef struct StrList {
	char **s;
	size_t *len;
	size_t n, cap;
} StrList;

static void sl_push(StrList *l, char *s, size_t len)
{
	if (l->n == l->cap) {
		l->cap = l->cap ? 2 * l->cap : 16;
		l->s = xreallocarray(l->s, l->cap, sizeof *l->s);
		l->len = xreallocarray(l->len, l->cap, sizeof *l->len);
	}
	l->s[l->n] = s;
	l->len[l->n++] = len;
}

static void sl_free(StrList *l)
{
	for (size_t i = 0; i < l->n; i++)
		free(l->s[i]);
	free(l->s);
	free(l->len);
}

/* output i becomes the strings of l with the given shape */
static int sl_output(RunCtx *c, size_t i, const StrList *l, int rank, const int64_t *dims)
{
	if (i >= c->nout)
		return op_error(c->node, "output %zu requested but the node has %zu outputs", i, c->nout);
	if (tensor_set_strings(c->out[i], rank, dims, (const char *const *)l->s, l->len) < 0)
		return error_prefix("node '%s'", c->node->name ? c->node->name : c->node->op_type);
	return 0;
}

/* ---- case mapping ---- */

/* s (len bytes of UTF-8) with every code point mapped by f (towlower,
 * towupper, or NULL: unchanged) into a new string; NULL if s is not UTF-8 */
static char *map_case(const char *s, size_t len, wint_t (*f)(wint_t), size_t *outlen)
{
	char *o = xmalloc(len * MB_LEN_MAX + 1);
	size_t k = 0;
	mbstate_t in, out;
	memset(&in, 0, sizeof in);
	memset(&out, 0, sizeof out);
	for (size_t i = 0; i < len;) {
		wchar_t w;
		size_t r = mbrtowc(&w, s + i, len - i, &in);
		if (r == (size_t)-1 || r == (size_t)-2) {
			free(o);
			return NULL;
		}
		if (r == 0) /* an embedded NUL */
			r = 1;
		if (f)
			w = (wchar_t)f((wint_t)w);
		size_t m = wcrtomb(o + k, w, &out);
		if (m == (size_t)-1) {
			free(o);
			return NULL;
		}
		k += m;
		i += r;
	}
	*outlen = k;
	return o;
}

/* Runs fn with the C.UTF-8 locale as the thread's (the process keeps its
 * own: main never calls setlocale). */
typedef struct CaseCtx {
	locale_t loc, old;
} CaseCtx;

static int case_begin(RunCtx *c, CaseCtx *cc)
{
	cc->loc = newlocale(LC_CTYPE_MASK, "C.UTF-8", (locale_t)0);
	if (!cc->loc)
		return op_error(c->node, "the C.UTF-8 locale is not available for case mapping");
	cc->old = uselocale(cc->loc);
	return 0;
}

static void case_end(CaseCtx *cc)
{
	uselocale(cc->old);
	freelocale(cc->loc);
}

/* ---- StringNormalizer ---- */

typedef struct NormAttrs {
	wint_t (*change)(wint_t);  /* towlower, towupper or NULL */
	int64_t sensitive;
	Onnx__AttributeProto const *stop;
} NormAttrs;

static int norm_attrs(const Onnx__NodeProto *n, NormAttrs *a)
{
	char act[16];
	if (attr_str(n, "case_change_action", "NONE", act, sizeof act) < 0 ||
	    attr_int(n, "is_case_sensitive", 0, &a->sensitive) < 0)
		return -1;
	if (!strcmp(act, "LOWER"))
		a->change = towlower;
	else if (!strcmp(act, "UPPER"))
		a->change = towupper;
	else if (!strcmp(act, "NONE"))
		a->change = NULL;
	else
		return op_error(n, "case_change_action '%s' is not one of LOWER, UPPER, NONE", act);
	a->stop = node_attr(n, "stopwords");
	if (a->stop && a->stop->type != ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRINGS)
		return op_error(n, "attribute 'stopwords' must be a list of strings");
	return 0;
}

static int strnorm_infer(InferCtx *c)
{
	NormAttrs a;
	if (norm_attrs(c->node, &a) < 0 || infer_need(c, 0) < 0)
		return -1;
	const ValueType *x = c->in[0];
	if (x->elem && x->elem != DT_STRING)
		return op_error(c->node, "input must be a string tensor, is %s", dtype_name(x->elem));
	if (x->rank > 2 || x->rank == 0 || (x->rank == 2 && x->dims[0].v >= 0 && x->dims[0].v != 1))
		return op_error(c->node, "input must have shape [C] or [1, C]");
	vt_set_tensor(c->out[0], DT_STRING, x->rank);
	if (x->rank == 2)
		c->out[0]->dims[0] = dim_known(1);
	return 0;
}

/* whether s matches a stopword (case-folded to lower when insensitive) */
static int is_stopword(const NormAttrs *a, const char *s, size_t len, char **lowstops, size_t *lowlen)
{
	for (size_t k = 0; a->stop && k < a->stop->n_strings; k++) {
		const char *w = a->sensitive ? (const char *)a->stop->strings[k].data : lowstops[k];
		size_t wl = a->sensitive ? a->stop->strings[k].len : lowlen[k];
		if (w && wl == len && !memcmp(w, s, len))
			return 1;
	}
	return 0;
}

static int strnorm_run(RunCtx *c)
{
	NormAttrs a;
	CaseCtx cc = {0};
	if (norm_attrs(c->node, &a) < 0 || run_need(c, 0) < 0)
		return -1;
	const Tensor *x = c->in[0];
	if (x->dtype != DT_STRING)
		return op_error(c->node, "input must be a string tensor, is %s", dtype_name(x->dtype));
	if (x->rank == 0 || x->rank > 2 || (x->rank == 2 && x->dims[0] != 1)) {
		char b[128];
		return op_error(c->node, "input must have shape [C] or [1, C], has %s",
				shape_str(x->rank, x->dims, b, sizeof b));
	}
	if (case_begin(c, &cc) < 0)
		return -1;
	size_t ns = a.stop ? a.stop->n_strings : 0;
	char **lows = xcalloc(ns ? ns : 1, sizeof *lows);
	size_t *lowl = xcalloc(ns ? ns : 1, sizeof *lowl);
	StrList out = {0};
	int r = 0;
	for (size_t k = 0; !a.sensitive && k < ns && r == 0; k++) {
		lows[k] = map_case((const char *)a.stop->strings[k].data, a.stop->strings[k].len, towlower, &lowl[k]);
		if (!lows[k])
			r = op_error(c->node, "stopword %zu is not UTF-8 text", k);
	}
	for (int64_t i = 0; r == 0 && i < x->numel; i++) {
		size_t len, ll = 0;
		const char *s = tensor_str(x, i, &len);
		char *low = a.sensitive ? NULL : map_case(s, len, towlower, &ll);
		if (!a.sensitive && !low) {
			r = op_error(c->node, "element %lld of input '%s' is not UTF-8 text", (long long)i,
				     c->node->input[0]);
			break;
		}
		int drop = a.sensitive ? is_stopword(&a, s, len, lows, lowl) : is_stopword(&a, low, ll, lows, lowl);
		free(low);
		if (drop)
			continue;
		size_t ol;
		char *o = map_case(s, len, a.change, &ol);
		if (!o)
			r = op_error(c->node, "element %lld of input '%s' is not UTF-8 text", (long long)i,
				     c->node->input[0]);
		else
			sl_push(&out, o, ol);
	}
	case_end(&cc);
	if (r == 0 && out.n == 0) /* all dropped: one empty string */
		sl_push(&out, xstrdup(""), 0);
	int64_t dims[2] = {1, (int64_t)out.n};
	if (r == 0)
		r = sl_output(c, 0, &out, x->rank, x->rank == 2 ? dims : dims + 1);
	for (size_t k = 0; k < ns; k++)
		free(lows[k]);
	free(lows);
	free(lowl);
	sl_free(&out);
	return r;
}

OPERATOR(ai_onnx, StringNormalizer, 10, strnorm_infer, strnorm_run)

/* ---- Cast ---- */

/* v as numpy's str() prints it: the fewest significant digits that read
 * back as v (at most `maxp`), positional for 1e-4 <= |v| < 1e16 with at
 * least one fractional digit, else d.ddde+XX */
static size_t format_real(double v, int is_float, char *buf, size_t size)
{
	if (isnan(v))
		return (size_t)snprintf(buf, size, "nan");
	if (isinf(v))
		return (size_t)snprintf(buf, size, v < 0 ? "-inf" : "inf");
	char e[64];
	int maxp = is_float ? 9 : 17;
	for (int p = 1; p <= maxp; p++) {
		snprintf(e, sizeof e, "%.*e", p - 1, v);
		if (is_float ? strtof(e, NULL) == (float)v : strtod(e, NULL) == v)
			break;
	}
	/* e is [-]d[.ddd]e[+-]XX: split into sign, digits, exponent */
	char digits[32];
	size_t nd = 0;
	const char *q = e;
	int neg = *q == '-';
	q += neg;
	for (; *q && *q != 'e'; q++)
		if (*q >= '0' && *q <= '9')
			digits[nd++] = *q;
	int ex = atoi(q + 1);
	while (nd > 1 && digits[nd - 1] == '0')
		nd--;
	digits[nd] = 0;
	double av = fabs(v);
	size_t o = 0;
	if (neg)
		o += (size_t)snprintf(buf + o, size - o, "-");
	if (av != 0 && (av < 1e-4 || av >= 1e16)) {
		o += (size_t)snprintf(buf + o, size - o, "%c", digits[0]);
		if (nd > 1)
			o += (size_t)snprintf(buf + o, size - o, ".%s", digits + 1);
		return o + (size_t)snprintf(buf + o, size - o, "e%c%02d", ex < 0 ? '-' : '+', ex < 0 ? -ex : ex);
	}
	if (av == 0)
		ex = 0;
	if (ex < 0) {
		o += (size_t)snprintf(buf + o, size - o, "0.");
		for (int k = 0; k < -ex - 1; k++)
			o += (size_t)snprintf(buf + o, size - o, "0");
		return o + (size_t)snprintf(buf + o, size - o, "%s", digits);
	}
	for (int k = 0; k <= ex; k++)
		o += (size_t)snprintf(buf + o, size - o, "%c", (size_t)k < nd ? digits[k] : '0');
	o += (size_t)snprintf(buf + o, size - o, ".");
	return o + (size_t)snprintf(buf + o, size - o, "%s", (size_t)ex + 1 < nd ? digits + ex + 1 : "0");
}

static int is_real(int dt)
{
	return dt == DT_FLOAT || dt == DT_DOUBLE || dt == DT_FLOAT16 || dt == DT_BFLOAT16;
}

static int is_int(int dt)
{
	return dt == DT_INT8 || dt == DT_INT16 || dt == DT_INT32 || dt == DT_INT64 || dt == DT_UINT8 ||
	       dt == DT_UINT16 || dt == DT_UINT32 || dt == DT_UINT64;
}

static int to_string(RunCtx *c, const Tensor *x)
{
	if (!is_real(x->dtype) && !is_int(x->dtype))
		return op_error(c->node, "%s to string is not supported", dtype_name(x->dtype));
	StrList l = {0};
	for (int64_t i = 0; i < x->numel; i++) {
		char b[64];
		size_t n;
		if (is_real(x->dtype))
			n = format_real(tensor_get_f64(x, i), x->dtype != DT_DOUBLE, b, sizeof b);
		else if (x->dtype == DT_UINT64)
			n = (size_t)snprintf(b, sizeof b, "%llu", (unsigned long long)tensor_get_i64(x, i));
		else
			n = (size_t)snprintf(b, sizeof b, "%lld", (long long)tensor_get_i64(x, i));
		sl_push(&l, xstrdup(b), n);
	}
	int r = sl_output(c, 0, &l, x->rank, x->dims);
	sl_free(&l);
	return r;
}

static int from_string(RunCtx *c, const Tensor *x, int to)
{
	if (!is_real(to) && !is_int(to))
		return op_error(c->node, "string to %s is not supported", dtype_name(to));
	if (op_output(c, 0, to, x->rank, x->dims) < 0)
		return -1;
	Tensor *y = c->out[0];
	for (int64_t i = 0; i < x->numel; i++) {
		size_t len;
		const char *s = tensor_str(x, i, &len);
		char b[128];
		if (len >= sizeof b || memchr(s, 0, len))
			return op_error(c->node, "element %lld of input '%s' is not a number", (long long)i,
					c->node->input[0]);
		memcpy(b, s, len);
		b[len] = 0;
		char *end;
		errno = 0;
		double d = 0;
		int64_t v = 0;
		if (is_real(to))
			d = to == DT_DOUBLE ? strtod(b, &end) : strtof(b, &end);
		else if (to == DT_UINT64)
			v = (int64_t)strtoull(b, &end, 10);
		else
			v = strtoll(b, &end, 10);
		if (end == b || *end || (is_int(to) && errno == ERANGE))
			return op_error(c->node, "element %lld of input '%s' (\"%s\") is not a %s number", (long long)i,
					c->node->input[0], b, is_real(to) ? "decimal" : "whole");
		if (is_real(to))
			elem_put_f64(to, y->data, i, d);
		else
			elem_put_i64(to, y->data, i, v);
	}
	return 0;
}

int string_cast(RunCtx *c, int to)
{
	if (run_need(c, 0) < 0)
		return -1;
	const Tensor *x = c->in[0];
	if (x->dtype == DT_STRING && to == DT_STRING)
		return tensor_copy(c->out[0], x);
	return to == DT_STRING ? to_string(c, x) : from_string(c, x, to);
}

/* ---- TfIdfVectorizer ----
 *
 * The pool lists n-grams by length: pool[ngram_counts[i] ..
 * ngram_counts[i+1]) holds the (i+1)-grams, item after item; the k-th
 * n-gram of the pool (over all lengths) counts into output column
 * ngram_indexes[k]. Only lengths in [min_gram_length, max_gram_length]
 * count. For each skip distance d in 1..max_skip_count+1, each start s of a
 * row and each length n, the items s, s+d, ..., s+(n-1)d form an n-gram;
 * 1-grams are counted at d = 1 only (ONNX's reference does the same). Items
 * are compared as int64 (strings by their index among the pool's strings,
 * -1 when absent). */

typedef struct Gram {
	const int64_t *items;     /* n items */
	int64_t col;              /* output column */
	int64_t k;                /* order in the pool */
} Gram;

typedef struct TfIdf {
	int64_t minn, maxn, skip, mode, ncols;  /* mode: 1 TF, 2 IDF, 3 TFIDF */
	int64_t *pool;            /* pool items as int64 */
	size_t npool;
	const Onnx__AttributeProto *pstr;  /* pool_strings, or NULL */
	Gram *grams[16];          /* per length n (index n), sorted by items */
	size_t ngrams[16];
	const float *w;
	size_t nw;
} TfIdf;

/* order of n-grams a and b of length *(int *)n (qsort_r) */
static int gram_cmp(const void *a, const void *b, void *n)
{
	const Gram *x = a, *y = b;
	for (int i = 0; i < *(int *)n; i++)
		if (x->items[i] != y->items[i])
			return x->items[i] < y->items[i] ? -1 : 1;
	return 0;
}

/* the n-gram of t equal to key (n items), or NULL */
static const Gram *gram_find(const TfIdf *t, int n, const int64_t *key)
{
	Gram g = {key, 0, 0};
	size_t lo = 0, hi = t->ngrams[n];
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int r = gram_cmp(&g, &t->grams[n][mid], &n);
		if (r == 0)
			return &t->grams[n][mid];
		if (r < 0)
			hi = mid;
		else
			lo = mid + 1;
	}
	return NULL;
}

static void tfidf_free(TfIdf *t)
{
	free(t->pool);
	for (int n = 0; n < 16; n++)
		free(t->grams[n]);
}

/* index of the pool string equal to s (its first occurrence), or -1 */
static int64_t pool_string(const TfIdf *t, const char *s, size_t len)
{
	for (size_t i = 0; i < t->pstr->n_strings; i++)
		if (t->pstr->strings[i].len == len && !memcmp(t->pstr->strings[i].data, s, len))
			return (int64_t)i;
	return -1;
}

static int tfidf_attrs(const Onnx__NodeProto *nd, TfIdf *t)
{
	char mode[8];
	const int64_t *cnt, *idx, *pi;
	size_t ncnt, nidx, npi;
	memset(t, 0, sizeof *t);
	if (attr_int(nd, "min_gram_length", -1, &t->minn) < 0 || attr_int(nd, "max_gram_length", -1, &t->maxn) < 0 ||
	    attr_int(nd, "max_skip_count", -1, &t->skip) < 0 || attr_str(nd, "mode", "", mode, sizeof mode) < 0 ||
	    attr_ints(nd, "ngram_counts", &cnt, &ncnt) < 0 || attr_ints(nd, "ngram_indexes", &idx, &nidx) < 0 ||
	    attr_ints(nd, "pool_int64s", &pi, &npi) < 0 || attr_floats(nd, "weights", &t->w, &t->nw) < 0)
		return -1;
	if (t->minn < 1 || t->maxn < t->minn || t->maxn > 15 || t->skip < 0)
		return op_error(nd, "min_gram_length %lld, max_gram_length %lld, max_skip_count %lld: expected "
				"1 <= min <= max <= 15 and skip >= 0", (long long)t->minn, (long long)t->maxn,
				(long long)t->skip);
	t->mode = !strcmp(mode, "TF") ? 1 : !strcmp(mode, "IDF") ? 2 : !strcmp(mode, "TFIDF") ? 3 : 0;
	if (!t->mode)
		return op_error(nd, "mode '%s' is not one of TF, IDF, TFIDF", mode);
	t->pstr = node_attr(nd, "pool_strings");
	if (t->pstr && t->pstr->type != ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRINGS)
		return op_error(nd, "attribute 'pool_strings' must be a list of strings");
	if (!t->pstr == !npi)
		return op_error(nd, "exactly one of pool_int64s and pool_strings is required");
	t->npool = t->pstr ? t->pstr->n_strings : npi;
	t->pool = xcalloc(t->npool ? t->npool : 1, sizeof *t->pool);
	for (size_t i = 0; i < t->npool; i++)
		t->pool[i] = t->pstr ? pool_string(t, (const char *)t->pstr->strings[i].data, t->pstr->strings[i].len)
				     : pi[i];
	if (!ncnt || !nidx)
		return op_error(nd, "attributes 'ngram_counts' and 'ngram_indexes' are required");
	int64_t k = 0;
	for (size_t i = 0; i < ncnt; i++) {
		int64_t n = (int64_t)i + 1;
		int64_t lo = cnt[i], hi = i + 1 < ncnt ? cnt[i + 1] : (int64_t)t->npool;
		if (lo < 0 || hi < lo || hi > (int64_t)t->npool || (hi - lo) % n)
			return op_error(nd, "ngram_counts[%zu] = %lld does not delimit whole %lld-grams of the pool", i,
					(long long)lo, (long long)n);
		for (int64_t p = lo; p < hi; p += n, k++) {
			if (k >= (int64_t)nidx || idx[k] < 0)
				return op_error(nd, "ngram_indexes has no valid entry for n-gram %lld", (long long)k);
			if (idx[k] >= t->ncols)
				t->ncols = idx[k] + 1;
			if (n < t->minn || n > t->maxn)
				continue;
			t->grams[n] = xreallocarray(t->grams[n], t->ngrams[n] + 1, sizeof *t->grams[n]);
			t->grams[n][t->ngrams[n]++] = (Gram){t->pool + p, idx[k], k};
		}
	}
	if (t->nw && t->nw < (size_t)t->ncols)
		return op_error(nd, "%zu weights for %lld output columns", t->nw, (long long)t->ncols);
	for (int n = 1; n < 16; n++) {
		if (!t->ngrams[n])
			continue;
		qsort_r(t->grams[n], t->ngrams[n], sizeof *t->grams[n], gram_cmp, &n);
		/* an n-gram listed twice counts into the column of its last entry,
		 * as in ONNX's reference */
		size_t m = 0;
		for (size_t i = 0; i < t->ngrams[n]; i++) {
			Gram *g = &t->grams[n][i];
			if (m && !gram_cmp(&t->grams[n][m - 1], g, &n)) {
				if (g->k > t->grams[n][m - 1].k)
					t->grams[n][m - 1] = *g;
			} else {
				t->grams[n][m++] = *g;
			}
		}
		t->ngrams[n] = m;
	}
	return 0;
}

static int tfidf_infer(InferCtx *c)
{
	TfIdf t;
	int r = tfidf_attrs(c->node, &t);
	int64_t cols = t.ncols;
	tfidf_free(&t);
	if (r < 0 || infer_need(c, 0) < 0)
		return -1;
	const ValueType *x = c->in[0];
	if (x->elem && x->elem != DT_INT32 && x->elem != DT_INT64 && x->elem != DT_STRING)
		return op_error(c->node, "input must be int32, int64 or string, is %s", dtype_name(x->elem));
	if (x->rank > 2)
		return op_error(c->node, "input must have shape [C] or [N, C]");
	vt_set_tensor(c->out[0], DT_FLOAT, x->rank < 0 ? -1 : x->rank < 2 ? 1 : 2);
	if (x->rank == 2)
		c->out[0]->dims[0] = x->dims[0];
	if (x->rank >= 0)
		c->out[0]->dims[x->rank == 2] = dim_known(cols);
	return 0;
}

static int tfidf_run(RunCtx *c)
{
	TfIdf t;
	if (tfidf_attrs(c->node, &t) < 0 || run_need(c, 0) < 0) {
		tfidf_free(&t);
		return -1;
	}
	const Tensor *x = c->in[0];
	int r = -1;
	int64_t *items = NULL, *freq = NULL;
	if (x->dtype != DT_INT32 && x->dtype != DT_INT64 && x->dtype != DT_STRING) {
		op_error(c->node, "input must be int32, int64 or string, is %s", dtype_name(x->dtype));
		goto out;
	}
	if ((x->dtype == DT_STRING) != !!t.pstr) {
		op_error(c->node, "a %s input needs %s", dtype_name(x->dtype), t.pstr ? "pool_int64s" : "pool_strings");
		goto out;
	}
	if (x->rank > 2 || (x->rank == 2 && x->dims[0] < 1)) {
		op_error(c->node, "input must have shape [C] or [N, C] with N > 0");
		goto out;
	}
	int64_t rows = x->rank == 2 ? x->dims[0] : 1, cols = x->rank == 0 ? 1 : x->dims[x->rank - 1];
	int64_t ydims[2] = {rows, t.ncols};
	if (op_output(c, 0, DT_FLOAT, x->rank == 2 ? 2 : 1, x->rank == 2 ? ydims : ydims + 1) < 0)
		goto out;
	items = xcalloc(x->numel ? (size_t)x->numel : 1, sizeof *items);
	freq = xcalloc((size_t)(rows * t.ncols) + 1, sizeof *freq);
	for (int64_t i = 0; i < x->numel; i++) {
		size_t len;
		const char *s;
		items[i] = x->dtype == DT_STRING ? (s = tensor_str(x, i, &len), pool_string(&t, s, len))
						 : elem_get_i64(x->dtype, x->data, i);
	}
	for (int64_t row = 0; row < rows; row++) {
		const int64_t *xr = items + row * cols;
		int64_t startn = t.minn;
		for (int64_t d = 1; d <= t.skip + 1 && startn <= t.maxn; d++) {
			int64_t key[16];
			for (int64_t s = 0; s + d * (startn - 1) < cols; s++)
				for (int64_t n = 1; n <= t.maxn && s + d * (n - 1) < cols; n++) {
					key[n - 1] = xr[s + d * (n - 1)];
					if (n < startn || !t.ngrams[n])
						continue;
					const Gram *hit = gram_find(&t, (int)n, key);
					if (hit)
						freq[row * t.ncols + hit->col]++;
				}
			if (startn == 1)
				startn = 2;
		}
	}
	float *y = c->out[0]->data;
	for (int64_t i = 0; i < rows * t.ncols; i++) {
		float w = t.nw ? t.w[i % t.ncols] : 1;
		y[i] = t.mode == 1 ? (float)freq[i] : t.mode == 2 ? (freq[i] > 0 ? w : 0) : w * (float)freq[i];
	}
	r = 0;
out:
	free(items);
	free(freq);
	tfidf_free(&t);
	return r;
}

OPERATOR(ai_onnx, TfIdfVectorizer, 9, tfidf_infer, tfidf_run)
