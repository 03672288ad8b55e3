/* report.c — what a VerifyReport says (see verify.h): the gates and the
 * lines of those that fail, verify.json (the failed gates and the rounds of
 * auto-exclusion included), the build-log summary, and the ranked nodes
 * auto-exclusion leaves in float. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "verify/verify.h"

static double acc(uint64_t ok, uint64_t n)
{
	return n ? 100.0 * (double)ok / (double)n : 0;
}

/* a JSON number; infinities (exact match) become null */
static void num(StrBuf *sb, double v)
{
	if (isfinite(v))
		sb_printf(sb, "%.10g", v);
	else
		sb_puts(sb, "null");
}

/* one failed gate as a JSON object (js may be NULL; k: gates before it) */
static void fail_json(StrBuf *js, int k, const char *gate, double measured, double threshold, const char *output)
{
	if (!js)
		return;
	sb_printf(js, "%s{\"gate\": \"%s\", \"measured\": ", k ? ",\n    " : "\n    ", gate);
	num(js, measured);
	sb_puts(js, ", \"threshold\": ");
	num(js, threshold);
	if (output) {
		sb_puts(js, ", \"output\": ");
		sb_json_str(js, output);
	}
	sb_putc(js, '}');
}

/* Every failed gate: one line "verify: MODEL: GATE: measured X, threshold
 * Y" on err and one JSON object in js (either may be NULL); the count */
static int check_gates(const VerifyReport *rep, const VerifyGates *g, const char *model, FILE *err, StrBuf *js)
{
	int nfailed = 0;
	if (!isnan(g->max_top1_drop) && rep->labeled) {
		double ra = acc(rep->ref_correct, rep->nrows), qa = acc(rep->q_correct, rep->nrows);
		if (ra - qa > g->max_top1_drop) {
			if (err)
				fprintf(err, "verify: %s: max-top1-drop: measured %.2f points (%.2f%% -> %.2f%%), threshold %g points\n",
					model, ra - qa, ra, qa, g->max_top1_drop);
			fail_json(js, nfailed++, "max-top1-drop", ra - qa, g->max_top1_drop, NULL);
		}
	}
	for (size_t i = 0; i < rep->nouts; i++) {
		const ErrStats *e = &rep->outs[i];
		double s = err_sqnr(e), c = err_cosine(e);
		if (!isnan(g->min_sqnr) && !(s >= g->min_sqnr)) {
			if (err)
				fprintf(err, "verify: %s: min-sqnr: measured %.2f dB, threshold %g dB (output '%s')\n", model,
					s, g->min_sqnr, e->name);
			fail_json(js, nfailed++, "min-sqnr", s, g->min_sqnr, e->name);
		}
		if (!isnan(g->min_cosine) && !(c >= g->min_cosine)) {
			if (err)
				fprintf(err, "verify: %s: min-cosine: measured %.6f, threshold %g (output '%s')\n", model, c,
					g->min_cosine, e->name);
			fail_json(js, nfailed++, "min-cosine", c, g->min_cosine, e->name);
		}
		if (!isnan(g->max_abs) && !(e->max_abs <= g->max_abs)) {
			if (err)
				fprintf(err, "verify: %s: max-abs: measured %.6g, threshold %g (output '%s')\n", model,
					e->max_abs, g->max_abs, e->name);
			fail_json(js, nfailed++, "max-abs", e->max_abs, g->max_abs, e->name);
		}
	}
	return nfailed;
}

int verify_gates(const VerifyReport *rep, const VerifyGates *g, const char *model, FILE *err)
{
	if (!isnan(g->max_top1_drop) && !rep->labeled)
		return error("verify.max-top1-drop needs labels: set verify.labels");
	return check_gates(rep, g, model, err, NULL);
}

/* SQNR in dB of a noise-to-signal power ratio (+inf for 0) */
static double db_of(double nsr)
{
	return nsr > 0 ? -10 * log10(nsr) : INFINITY;
}

/* a '\n'-separated list as a JSON array */
static void names_json(StrBuf *sb, const char *list)
{
	sb_putc(sb, '[');
	for (const char *s = list; s && *s;) {
		const char *e = strchr(s, '\n');
		size_t l = e ? (size_t)(e - s) : strlen(s);
		char *nm = xstrndup(s, l);
		if (s != list)
			sb_puts(sb, ", ");
		sb_json_str(sb, nm);
		free(nm);
		s = e ? e + 1 : NULL;
	}
	sb_putc(sb, ']');
}

/* activations whose segment holds quantized nodes, most added noise first */
static int cmp_blame(const void *a, const void *b)
{
	const ErrStats *x = *(const ErrStats *const *)a, *y = *(const ErrStats *const *)b;
	double nx = err_added_nsr(x), ny = err_added_nsr(y);
	if (nx > ny)
		return -1;
	if (nx < ny)
		return 1;
	return strcmp(x->name, y->name);
}

static const ErrStats **blamed(const VerifyReport *rep, size_t *count)
{
	const ErrStats **v = xcalloc(rep->nacts + 1, sizeof *v);
	size_t n = 0;
	for (size_t i = 0; i < rep->nacts; i++)
		if (rep->acts[i].qnodes && *rep->acts[i].qnodes && err_added_nsr(&rep->acts[i]) > 0)
			v[n++] = &rep->acts[i];
	if (n > 1)
		qsort(v, n, sizeof *v, cmp_blame);
	*count = n;
	return v;
}

static void stats_json(StrBuf *sb, const ErrStats *e, int layer)
{
	sb_puts(sb, "{\"name\": ");
	sb_json_str(sb, e->name);
	if (layer) {
		sb_puts(sb, ", \"quantized_tensor\": ");
		sb_json_str(sb, e->qname);
	}
	sb_puts(sb, ", \"sqnr_db\": ");
	num(sb, err_sqnr(e));
	if (layer == 1) {
		sb_puts(sb, ", \"local_sqnr_db\": ");
		num(sb, e->local_n ? err_local_sqnr(e) : NAN);
		sb_puts(sb, ", \"input_sqnr_db\": ");
		num(sb, e->nodes ? db_of(e->in_nsr) : NAN);
		sb_puts(sb, ", \"step_sqnr_db\": ");
		num(sb, e->nodes ? db_of(err_added_nsr(e)) : NAN);
		sb_puts(sb, ", \"nodes\": ");
		names_json(sb, e->nodes);
		sb_puts(sb, ", \"quantized_nodes\": ");
		names_json(sb, e->qnodes);
	}
	sb_puts(sb, ", \"cosine\": ");
	num(sb, err_cosine(e));
	sb_puts(sb, ", \"max_abs\": ");
	num(sb, e->max_abs);
	sb_puts(sb, ", \"mean_abs\": ");
	num(sb, err_mean_abs(e));
	sb_printf(sb, ", \"elements\": %llu, \"nonfinite\": %llu}", (unsigned long long)e->n,
		  (unsigned long long)e->nonfinite);
}

static int cmp_worst(const void *a, const void *b)
{
	const ErrStats *x = *(const ErrStats *const *)a, *y = *(const ErrStats *const *)b;
	double sx = err_sqnr(x), sy = err_sqnr(y);
	if (sx < sy)
		return -1;
	if (sx > sy)
		return 1;
	return strcmp(x->name, y->name);
}

/* pointers to e[0..n) sorted worst (lowest SQNR) first */
static const ErrStats **ranked(const ErrStats *e, size_t n)
{
	const ErrStats **v = xcalloc(n + 1, sizeof *v);
	for (size_t i = 0; i < n; i++)
		v[i] = &e[i];
	if (n > 1)
		qsort(v, n, sizeof *v, cmp_worst);
	return v;
}

static void gate_json(StrBuf *sb, const char *name, double v, int *first)
{
	if (isnan(v))
		return;
	sb_printf(sb, "%s\"%s\": ", *first ? "" : ", ", name);
	num(sb, v);
	*first = 0;
}

/* a ' '-separated list as a JSON array */
static void words_json(StrBuf *sb, const char *list)
{
	PtrVec v = {0};
	split_words(list, &v);
	sb_putc(sb, '[');
	for (size_t i = 0; i < v.n; i++) {
		sb_puts(sb, i ? ", " : "");
		sb_json_str(sb, v.v[i]);
	}
	sb_putc(sb, ']');
	pv_free_all(&v);
}

static void str_or_null(StrBuf *sb, const char *s)
{
	if (s)
		sb_json_str(sb, s);
	else
		sb_puts(sb, "null");
}

/* the rounds of auto-exclusion as a JSON member */
static void auto_json(StrBuf *sb, const VerifyAuto *ax)
{
	sb_printf(sb, ",\n  \"auto_exclude\": {\"max_nodes\": %d, \"excluded\": [", ax->max_nodes);
	for (size_t i = ax->nuser; i < ax->excluded.n; i++) {
		sb_puts(sb, i > ax->nuser ? ", " : "");
		sb_json_str(sb, ax->excluded.v[i]);
	}
	sb_puts(sb, "], \"exclude_nodes\": [");
	for (size_t i = 0; i < ax->excluded.n; i++) {
		sb_puts(sb, i ? ", " : "");
		sb_json_str(sb, ax->excluded.v[i]);
	}
	sb_puts(sb, "],\n    \"rounds\": [");
	for (size_t i = 0; i < ax->nrounds; i++) {
		const VerifyRound *r = &ax->rounds[i];
		sb_printf(sb, "%s{\"round\": %zu, \"tensor\": ", i ? ",\n      " : "\n      ", i);
		str_or_null(sb, r->tensor);
		sb_puts(sb, ", \"nodes\": ");
		words_json(sb, r->added ? r->added : "");
		sb_puts(sb, ", \"added\": ");
		str_or_null(sb, r->added);
		sb_puts(sb, ", \"min_sqnr_db\": ");
		num(sb, r->min_sqnr);
		sb_puts(sb, ", \"min_cosine\": ");
		num(sb, r->min_cosine);
		sb_puts(sb, ", \"max_abs\": ");
		num(sb, r->max_abs);
		sb_puts(sb, ", \"top1_drop_points\": ");
		num(sb, r->top1_drop);
		sb_printf(sb, ", \"gates_failed\": %d, \"kept\": %s", r->nfailed,
			  r->added && r->reverted ? "false" : "true");
		if (r->added)
			sb_printf(sb, ", \"from_round\": %zu", r->from);
		sb_putc(sb, '}');
	}
	sb_puts(sb, "\n    ],\n    \"unchanged\": [");
	for (size_t i = 0; i < ax->nsame; i++) {
		sb_puts(sb, i ? ",\n      {\"tensor\": " : "\n      {\"tensor\": ");
		sb_json_str(sb, ax->same[i].tensor);
		sb_puts(sb, ", \"nodes\": ");
		words_json(sb, ax->same[i].nodes);
		sb_printf(sb, ", \"same_as_round\": %zu}", ax->same[i].round);
	}
	sb_puts(sb, ax->nsame ? "\n    ]}" : "]}");
}

void verify_json(const VerifyReport *rep, const VerifyGates *g, const VerifyAuto *ax, const char *model,
		 const char *inputs, StrBuf *sb)
{
	StrBuf fj = {0};
	int nfailed = check_gates(rep, g, model, NULL, &fj);
	sb_puts(sb, "{\n  \"model\": ");
	sb_json_str(sb, model);
	sb_puts(sb, ",\n  \"inputs\": ");
	sb_json_str(sb, inputs);
	sb_printf(sb, ",\n  \"random_inputs\": %s", rep->random ? "true" : "false");
	if (rep->random)
		sb_printf(sb, ",\n  \"seed\": %llu", (unsigned long long)rep->seed);
	sb_printf(sb, ",\n  \"samples\": %llu", (unsigned long long)rep->nsamples);
	sb_puts(sb, ",\n  \"gates\": {");
	int first = 1;
	gate_json(sb, "max_top1_drop", g->max_top1_drop, &first);
	gate_json(sb, "min_sqnr_db", g->min_sqnr, &first);
	gate_json(sb, "min_cosine", g->min_cosine, &first);
	gate_json(sb, "max_abs", g->max_abs, &first);
	sb_printf(sb, "},\n  \"default_gates\": %s", g->defaults ? "true" : "false");
	sb_printf(sb, ",\n  \"gates_failed\": %d,\n  \"passed\": %s", nfailed, nfailed ? "false" : "true");
	sb_printf(sb, ",\n  \"failed_gates\": [%s%s]", fj.len ? fj.buf : "", fj.len ? "\n  " : "");
	sb_release(&fj);
	if (ax)
		auto_json(sb, ax);
	sb_puts(sb, ",\n  \"outputs\": [");
	for (size_t i = 0; i < rep->nouts; i++) {
		sb_puts(sb, i ? ",\n    " : "\n    ");
		stats_json(sb, &rep->outs[i], 0);
	}
	sb_puts(sb, "\n  ]");
	if (rep->labeled) {
		double ra = acc(rep->ref_correct, rep->nrows), qa = acc(rep->q_correct, rep->nrows);
		sb_printf(sb, ",\n  \"top1\": {\"rows\": %llu, \"reference\": ", (unsigned long long)rep->nrows);
		num(sb, ra);
		sb_puts(sb, ", \"quantized\": ");
		num(sb, qa);
		sb_puts(sb, ", \"drop_points\": ");
		num(sb, ra - qa);
		sb_puts(sb, ",\n    \"per_class\": [");
		for (int64_t c = 0; c < rep->nclasses; c++) {
			sb_printf(sb, "%s{\"class\": %lld, \"rows\": %llu, \"reference\": ", c ? ",\n      " : "\n      ",
				  (long long)c, (unsigned long long)rep->class_n[c]);
			num(sb, rep->class_n[c] ? acc(rep->class_ref[c], rep->class_n[c]) : NAN);
			sb_puts(sb, ", \"quantized\": ");
			num(sb, rep->class_n[c] ? acc(rep->class_q[c], rep->class_n[c]) : NAN);
			sb_putc(sb, '}');
		}
		sb_puts(sb, "\n    ]}");
	}
	const ErrStats **v = ranked(rep->acts, rep->nacts);
	sb_puts(sb, ",\n  \"activations\": [");
	for (size_t i = 0; i < rep->nacts; i++) {
		sb_puts(sb, i ? ",\n    " : "\n    ");
		stats_json(sb, v[i], 1);
	}
	sb_puts(sb, rep->nacts ? "\n  ]" : "]");
	free(v);
	size_t nb;
	v = blamed(rep, &nb);
	sb_puts(sb, ",\n  \"exclude_candidates\": [");
	for (size_t i = 0; i < nb; i++) {
		sb_puts(sb, i ? ",\n    {\"nodes\": " : "\n    {\"nodes\": ");
		names_json(sb, v[i]->qnodes);
		sb_puts(sb, ", \"tensor\": ");
		sb_json_str(sb, v[i]->name);
		sb_puts(sb, ", \"step_sqnr_db\": ");
		num(sb, db_of(err_added_nsr(v[i])));
		sb_puts(sb, ", \"sqnr_db\": ");
		num(sb, err_sqnr(v[i]));
		sb_putc(sb, '}');
	}
	sb_puts(sb, nb ? "\n  ]" : "]");
	free(v);
	v = ranked(rep->weights, rep->nweights);
	sb_puts(sb, ",\n  \"weights\": [");
	for (size_t i = 0; i < rep->nweights; i++) {
		sb_puts(sb, i ? ",\n    " : "\n    ");
		stats_json(sb, v[i], 2);
	}
	sb_puts(sb, rep->nweights ? "\n  ]" : "]");
	free(v);
	sb_puts(sb, "\n}\n");
}

static void fmt_db(char *buf, size_t n, double v)
{
	if (isfinite(v))
		snprintf(buf, n, "%.2f dB", v);
	else
		snprintf(buf, n, "%s", v > 0 ? "exact" : "-inf dB");
}

void verify_summary(const VerifyReport *rep, const char *model, FILE *log)
{
	char db[64];
	fprintf(log, "verify: %s: %llu %ssample%s", model, (unsigned long long)rep->nsamples,
		rep->random ? "random " : "", rep->nsamples == 1 ? "" : "s");
	if (rep->nrows_run > rep->nsamples)
		fprintf(log, " (%llu rows)", (unsigned long long)rep->nrows_run);
	if (rep->random_ones)
		fprintf(log, "; random inputs give %s the size 1: real samples in verify.data give figures that hold",
			rep->random_ones);
	fputc('\n', log);
	for (size_t i = 0; i < rep->nouts; i++) {
		const ErrStats *e = &rep->outs[i];
		fmt_db(db, sizeof db, err_sqnr(e));
		fprintf(log, "  output %-20s SQNR %s  cosine %.6f  max-abs %.4g  mean-abs %.4g\n", e->name, db,
			err_cosine(e), e->max_abs, err_mean_abs(e));
	}
	if (rep->labeled)
		fprintf(log, "  top-1 over %llu rows: reference %.2f%%, quantized %.2f%%, drop %.2f points\n",
			(unsigned long long)rep->nrows, acc(rep->ref_correct, rep->nrows),
			acc(rep->q_correct, rep->nrows),
			acc(rep->ref_correct, rep->nrows) - acc(rep->q_correct, rep->nrows));
	const ErrStats **v = ranked(rep->acts, rep->nacts);
	size_t show = rep->nacts < 5 ? rep->nacts : 5;
	if (show)
		fprintf(log, "  worst activations (of %zu compared):\n", rep->nacts);
	for (size_t i = 0; i < show; i++) {
		char ldb[64];
		fmt_db(db, sizeof db, err_sqnr(v[i]));
		fmt_db(ldb, sizeof ldb, err_local_sqnr(v[i]));
		fprintf(log, "    %-24s SQNR %s (own quantization %s)\n", v[i]->name, db, v[i]->local_n ? ldb : "n/a");
	}
	free(v);
	size_t nb;
	v = blamed(rep, &nb);
	if (nb) {
		fprintf(log, "  most noise added (SQNR of the step alone):");
		for (size_t i = 0; i < nb && i < 3; i++) {
			fmt_db(db, sizeof db, db_of(err_added_nsr(v[i])));
			fputs(i ? ", " : " ", log);
			for (const char *c = v[i]->qnodes; *c; c++)
				fputc(*c == '\n' ? '+' : *c, log);
			fprintf(log, " %s (%s)", db, v[i]->name);
		}
		fputc('\n', log);
	}
	free(v);
	v = ranked(rep->weights, rep->nweights);
	show = rep->nweights < 3 ? rep->nweights : 3;
	if (show)
		fprintf(log, "  worst weights (of %zu quantized):\n", rep->nweights);
	for (size_t i = 0; i < show; i++) {
		fmt_db(db, sizeof db, err_sqnr(v[i]));
		fprintf(log, "    %-24s SQNR %s\n", v[i]->name, db);
	}
	free(v);
}

void verify_gates_line(const VerifyGates *g, FILE *log)
{
	int n = 0;
	fputs("  gates:", log);
	if (!isnan(g->min_sqnr))
		fprintf(log, "%s min-sqnr %g dB", n++ ? "," : "", g->min_sqnr);
	if (!isnan(g->max_top1_drop))
		fprintf(log, "%s max-top1-drop %g points", n++ ? "," : "", g->max_top1_drop);
	if (!isnan(g->min_cosine))
		fprintf(log, "%s min-cosine %g", n++ ? "," : "", g->min_cosine);
	if (!isnan(g->max_abs))
		fprintf(log, "%s max-abs %g", n++ ? "," : "", g->max_abs);
	fputs(n ? "" : " none (all off)", log);
	fputs(g->defaults ? " (the defaults: no verify gate is set)\n" : "\n", log);
}

/* the names of v joined by blanks */
static char *joined(const PtrVec *v)
{
	StrBuf sb = {0};
	for (size_t i = 0; i < v->n; i++)
		sb_printf(&sb, "%s%s", i ? " " : "", (const char *)v->v[i]);
	return sb.len ? sb_detach(&sb) : xstrdup("");
}

void verify_round_add(VerifyAuto *ax, const VerifyReport *rep, const VerifyGates *g, const char *tensor,
		      const PtrVec *nodes)
{
	ax->rounds = xreallocarray(ax->rounds, ax->nrounds + 1, sizeof *ax->rounds);
	VerifyRound *r = &ax->rounds[ax->nrounds++];
	*r = (VerifyRound){.tensor = tensor ? xstrdup(tensor) : NULL, .added = nodes ? joined(nodes) : NULL,
			   .min_sqnr = INFINITY, .min_cosine = 1, .top1_drop = NAN};
	for (size_t i = 0; i < rep->nouts; i++) {
		double s = err_sqnr(&rep->outs[i]), c = err_cosine(&rep->outs[i]);
		r->min_sqnr = s < r->min_sqnr ? s : r->min_sqnr;
		r->min_cosine = c < r->min_cosine ? c : r->min_cosine;
		r->max_abs = rep->outs[i].max_abs > r->max_abs ? rep->outs[i].max_abs : r->max_abs;
	}
	if (rep->labeled)
		r->top1_drop = acc(rep->ref_correct, rep->nrows) - acc(rep->q_correct, rep->nrows);
	r->nfailed = check_gates(rep, g, "", NULL, NULL);
}

void verify_round_line(const VerifyAuto *ax, size_t i, const char *model, FILE *log)
{
	const VerifyRound *r = &ax->rounds[i];
	char db[64];
	fmt_db(db, sizeof db, r->min_sqnr);
	fprintf(log, "verify: %s: auto-exclude round %zu: ", model, i);
	if (!r->added)
		fputs("plain quantization", log);
	for (const char *c = r->added; c && *c; c++) {
		if (c == r->added || c[-1] == ' ')
			fputc('+', log); /* +A +B: the nodes left in float */
		fputc(*c, log);
	}
	fprintf(log, ": SQNR %s, cosine %.6f, max-abs %.4g", db, r->min_cosine, r->max_abs);
	if (!isnan(r->top1_drop))
		fprintf(log, ", top-1 drop %.2f points", r->top1_drop);
	if (r->nfailed)
		fprintf(log, ": %d gate%s failed", r->nfailed, r->nfailed > 1 ? "s" : "");
	else
		fputs(": gates pass", log);
	fputs(r->reverted ? ": no better, stays quantized\n" : "\n", log);
}

void verify_auto_free(VerifyAuto *ax)
{
	for (size_t i = 0; i < ax->nrounds; i++) {
		free(ax->rounds[i].tensor);
		free(ax->rounds[i].added);
	}
	free(ax->rounds);
	pv_free_all(&ax->excluded);
	for (size_t i = 0; i < ax->nsame; i++) {
		free(ax->same[i].tensor);
		free(ax->same[i].nodes);
	}
	free(ax->same);
	memset(ax, 0, sizeof *ax);
}
