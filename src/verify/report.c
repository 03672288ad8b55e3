/* report.c — gates, verify.json and the build-log summary of a
 * VerifyReport (see verify.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "verify/verify.h"

static double acc(uint64_t ok, uint64_t n)
{
	return n ? 100.0 * (double)ok / (double)n : 0;
}

int verify_gates(const VerifyReport *rep, const VerifyGates *g, const char *model, FILE *err)
{
	int nfailed = 0;
	if (!isnan(g->max_top1_drop)) {
		if (!rep->labeled)
			return error("verify.max-top1-drop needs labels: set verify.labels");
		double drop = acc(rep->ref_correct, rep->nrows) - acc(rep->q_correct, rep->nrows);
		if (drop > g->max_top1_drop) {
			fprintf(err, "verify: %s: max-top1-drop: measured %.2f points (%.2f%% -> %.2f%%), threshold %g points\n",
				model, drop, acc(rep->ref_correct, rep->nrows), acc(rep->q_correct, rep->nrows),
				g->max_top1_drop);
			nfailed++;
		}
	}
	for (size_t i = 0; i < rep->nouts; i++) {
		const ErrStats *e = &rep->outs[i];
		double s = err_sqnr(e), c = err_cosine(e);
		if (!isnan(g->min_sqnr) && !(s >= g->min_sqnr)) {
			fprintf(err, "verify: %s: min-sqnr: measured %.2f dB, threshold %g dB (output '%s')\n", model, s,
				g->min_sqnr, e->name);
			nfailed++;
		}
		if (!isnan(g->min_cosine) && !(c >= g->min_cosine)) {
			fprintf(err, "verify: %s: min-cosine: measured %.6f, threshold %g (output '%s')\n", model, c,
				g->min_cosine, e->name);
			nfailed++;
		}
		if (!isnan(g->max_abs) && !(e->max_abs <= g->max_abs)) {
			fprintf(err, "verify: %s: max-abs: measured %.6g, threshold %g (output '%s')\n", model, e->max_abs,
				g->max_abs, e->name);
			nfailed++;
		}
	}
	return nfailed;
}

/* a JSON number; infinities (exact match) become null */
static void num(StrBuf *sb, double v)
{
	if (isfinite(v))
		sb_printf(sb, "%.10g", v);
	else
		sb_puts(sb, "null");
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

void verify_json(const VerifyReport *rep, const VerifyGates *g, const char *model, const char *inputs,
		 int nfailed, StrBuf *sb)
{
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
	sb_printf(sb, "},\n  \"gates_failed\": %d,\n  \"passed\": %s", nfailed, nfailed ? "false" : "true");
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
	fprintf(log, "verify: %s: %llu %ssamples\n", model, (unsigned long long)rep->nsamples,
		rep->random ? "random " : "");
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
