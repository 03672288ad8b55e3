/* verify.c — the verify stage: runs the float model the quantize stage
 * started from (c->reference) and the quantized model (c->input) on the same
 * samples (src/verify), writes verify.json and quant.json beside the model,
 * prints a summary, and fails the build when a gate fails: one line per
 * failed gate, "verify: MODEL: GATE: measured X, threshold Y". verify.json is
 * written for a failed verify too (the build keeps it for reading).
 *
 * Gates: those the user set (a number, or off); with none set, the defaults
 * min-sqnr 20 dB and, with labels, max-top1-drop 1 point. 20 dB is an error
 * norm of 10% of the signal's: int8 models that keep their accuracy measure
 * 25-40 dB at the output (the digits MLP 37 dB, top-1 -0.25 points), while
 * the outlier-heavy model of tests/t_verify.sh, at 13 dB, loses 4 points.
 * One gate set (a number or off) replaces both defaults.
 *
 * Auto-exclusion (verify.auto-exclude = N): when the gates fail, the float
 * model is quantized again with the quantize stage's own options (and
 * calibration statistics) plus an exclusion, and measured again; one
 * tensor per round, the ranking measured afresh each time (leaving nodes
 * in float changes what the steps after them add), until the gates pass or
 * N nodes are left in float. A round takes the worst-ranked tensor's step
 * out (src/verify/exclude.c): the quantized nodes that compute it, and when
 * the tensor itself goes through a Q/DQ pair, if need be its quantized
 * consumers too (followed through nodes that only move values, which would
 * quantize the same values again), so that the tensor is no longer
 * quantized; then the nodes the others make float anyway are dropped. A
 * change that quantizes the model as before (the same verify_qsig) is not
 * measured: leaving a Transpose between quantized nodes in float only
 * moves its Q/DQ pair. A round that measures no better (fewer failed
 * gates, else a higher lowest output SQNR) is undone: one that makes the
 * output worse is not worth its float. Against one kept model, each tensor
 * is tried once and each set of nodes measured once (a kept round changes
 * the model, and what the steps add, so they may be tried again); at most
 * 2N rounds are undone. A set that would leave nothing quantized is
 * skipped. The output is then the re-quantized model, with its quant.json. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "rules/rules.h"
#include "stages/quantize.h"
#include "stages/stage.h"
#include "verify/verify.h"

#define RANDOM_SAMPLES 16
#define RANDOM_SEED 0
#define DEFAULT_MIN_SQNR 20.0
#define DEFAULT_MAX_TOP1_DROP 1.0
#define MAX_AUTO_EXCLUDE 1000000

static const StageParam params[] = {
	{"verify.data", PARAM_LIST, NULL, NULL, 1,
	 "samples to compare on: .npy/.npz/.pb files, test_data_set directories, directories, globs; or random"},
	{"verify.labels", PARAM_TEXT, NULL, NULL, 1,
	 "top-1 labels: a tensor name inside every sample (e.g. labels) or a .npy/.npz/.pb file"},
	{"verify.max-top1-drop", PARAM_TEXT, NULL, NULL, 1,
	 "gate: largest top-1 accuracy drop, in points, or off"},
	{"verify.min-sqnr", PARAM_TEXT, NULL, NULL, 1, "gate: smallest SQNR of every output, in dB, or off"},
	{"verify.min-cosine", PARAM_TEXT, NULL, NULL, 1, "gate: smallest cosine similarity of every output, or off"},
	{"verify.max-abs", PARAM_TEXT, NULL, NULL, 1, "gate: largest absolute error of every output, or off"},
	{"verify.auto-exclude", PARAM_INT, NULL, "0", 1,
	 "when the gates fail: re-quantize leaving up to N nodes in float, the worst first"},
	{NULL, 0, NULL, NULL, 0, NULL},
};

static int wanted(const Section *sec)
{
	for (size_t i = 0; i < sec->nkv; i++)
		if (!strncmp(sec->kv[i].key, "verify.", 7))
			return 1;
	return 0;
}

static int is_random(const char *v)
{
	return v && !strcmp(v, "random");
}

/* verify.labels names a file (not a tensor) when it has a path or a data
 * file's extension */
static int labels_is_file(const char *v)
{
	size_t n = strlen(v);
	return strchr(v, '/') || (n > 4 && (!strcmp(v + n - 4, ".npy") || !strcmp(v + n - 4, ".npz"))) ||
	       (n > 3 && !strcmp(v + n - 3, ".pb"));
}

static const char *const gate_keys[] = {"verify.max-top1-drop", "verify.min-sqnr", "verify.min-cosine",
					 "verify.max-abs", NULL};

static int check_param(const char *key, const char *value)
{
	char *end;
	long n = strtol(value, NULL, 10);
	if (!strcmp(key, "verify.auto-exclude") && (n < 0 || n > MAX_AUTO_EXCLUDE))
		return error("verify.auto-exclude = '%s' is not valid: expected the most nodes to leave in float (0 to %d)",
			     value, MAX_AUTO_EXCLUDE);
	for (size_t i = 0; gate_keys[i]; i++) {
		if (strcmp(key, gate_keys[i]) || !strcmp(value, "off"))
			continue;
		double v = strtod(value, &end);
		if (!*value || *end || isnan(v))
			return error("%s = '%s' is not valid: expected a number, or off", key, value);
	}
	return 0;
}

/* auto-exclusion re-quantizes: static or dynamic only (fp16 has no
 * quantized nodes to rank) */
static int check_auto_exclude(const Section *sec)
{
	const KV *kv = sec_find(sec, "verify.auto-exclude");
	const char *mode = sec_get(sec, "quantize");
	if (!kv || atoi(kv->value) <= 0 || (mode && strcmp(mode, "fp16")))
		return 0;
	return error("%s:%d: model '%s': verify.auto-exclude needs quantize = static or dynamic (it re-quantizes "
		     "with the worst nodes left in float), not %s%s",
		     kv->file, kv->line, sec->name, mode ? "quantize = " : "a model without quantize", mode ? mode : "");
}

static int declared_inputs(const Section *sec, const char *root, PtrVec *files)
{
	const char *v = sec_get(sec, "verify.data");
	if (!v)
		return error("%s:%d: model '%s': verify needs verify.data = FILES (samples to compare on, or random)",
			     sec->file, sec->line, sec->name);
	if (check_auto_exclude(sec) < 0)
		return -1;
	const KV *kv = sec_find(sec, "verify.data");
	const char *lv = sec_get(sec, "verify.labels");
	if (is_random(v)) {
		if (lv)
			return error("%s:%d: model '%s': verify.labels needs real samples, not verify.data = random",
				     kv->file, kv->line, sec->name);
		return 0;
	}
	int r = stage_expand_samples(sec, "verify.data", root, "", files);
	if (r == 0 && lv && labels_is_file(lv)) {
		const KV *lk = sec_find(sec, "verify.labels");
		char *full = path_join(root, lv);
		struct stat st;
		if (path_outside(lv))
			r = error("%s:%d: model '%s': verify.labels '%s' leaves the project", lk->file, lk->line,
				  sec->name, lv);
		else if (stat(full, &st) != 0 || !S_ISREG(st.st_mode))
			r = error("%s:%d: model '%s': verify.labels file '%s' does not exist", lk->file, lk->line,
				  sec->name, lv);
		else if (!path_resolves_inside(root, full))
			r = error("%s:%d: model '%s': verify.labels '%s' leads outside the project through a "
				  "symbolic link", lk->file, lk->line, sec->name, lv);
		else
			pv_push(files, xstrdup(lv));
		free(full);
	}
	return r;
}

/* the gates: the keys set (a number, or off: no gate), else the defaults */
static void read_gates(const Section *sec, int labels, VerifyGates *g)
{
	double *slot[] = {&g->max_top1_drop, &g->min_sqnr, &g->min_cosine, &g->max_abs};
	int nset = 0;
	memset(g, 0, sizeof *g);
	for (size_t i = 0; gate_keys[i]; i++) {
		const char *v = sec_get(sec, gate_keys[i]);
		*slot[i] = v && strcmp(v, "off") ? strtod(v, NULL) : NAN;
		nset += v != NULL;
	}
	if (nset)
		return;
	g->defaults = 1;
	g->min_sqnr = DEFAULT_MIN_SQNR;
	if (labels)
		g->max_top1_drop = DEFAULT_MAX_TOP1_DROP;
}

/* verify.data and verify.labels into o (paths made absolute in specs and
 * *labels_path, which the caller frees) */
static void read_data(StageCtx *c, const char *data, const char *lv, VerifyOpts *o, PtrVec *specs,
		      char **labels_path)
{
	*o = (VerifyOpts){.threads = c->threads, .random = is_random(data), .nrandom = RANDOM_SAMPLES,
			  .seed = RANDOM_SEED};
	if (!o->random) {
		split_words(data, specs);
		for (size_t i = 0; i < specs->n; i++) {
			char *full = path_join(c->root, specs->v[i]);
			free(specs->v[i]);
			specs->v[i] = full;
		}
		o->specs = (const char *const *)specs->v;
		o->nspecs = specs->n;
	}
	if (lv && labels_is_file(lv))
		o->labels_file = *labels_path = path_join(c->root, lv);
	else
		o->labels_name = lv;
}

/* what auto-exclusion re-quantizes with: the quantize stage's options and
 * statistics, and the report of the last rewrite */
typedef struct Requant {
	QuantOpts o;
	CalibStats *stats;
	QuantReport rep;
	int done;                  /* the output is a re-quantized model */
	long long ref_size;        /* the float model's size on disk */
} Requant;

static int requant_open(StageCtx *c, Requant *rq)
{
	if (quant_opts_read(c->sec, c->model, &rq->o) < 0)
		return -1;
	if (rq->o.mode == QMODE_FP16)
		return error("model '%s': verify.auto-exclude needs quantize = static or dynamic, not fp16", c->model);
	if (rq->o.mode != QMODE_STATIC)
		return 0;
	return calibrate_stats_load(c, "verify.auto-exclude (it re-quantizes)", &rq->stats);
}

static void requant_close(Requant *rq)
{
	quant_report_free(&rq->rep);
	calib_free(rq->stats);
	quant_opts_free(&rq->o);
}

/* a fresh copy of the float model quantized with rq's options (and its
 * report, which the caller frees); an error is the caller's to place */
static int requant(StageCtx *c, Requant *rq, Model **out, QuantReport *qrep)
{
	Model *m = NULL;
	memset(qrep, 0, sizeof *qrep);
	int r = model_load(c->reference, &m);
	if (r < 0)
		error_prefix("reference model");
	else
		rq->ref_size = model_disk_size(m, c->reference);
	if (r == 0)
		r = quant_model(m, rq->stats, &rq->o, qrep);
	if (r < 0) {
		quant_report_free(qrep);
		model_free(m);
		return -1;
	}
	*out = m;
	return 0;
}

static int cmp_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int has_name(const PtrVec *v, const char *name)
{
	for (size_t i = 0; i < v->n; i++)
		if (!strcmp(v->v[i], name))
			return 1;
	return 0;
}

/* whether round a measures better than round b: fewer failed gates, else
 * a higher lowest output SQNR */
static int better(const VerifyRound *a, const VerifyRound *b)
{
	if (a->nfailed != b->nfailed)
		return a->nfailed < b->nfailed;
	return a->min_sqnr > b->min_sqnr;
}

/* the round whose model auto-exclusion holds */
static size_t last_kept(const VerifyAuto *ax)
{
	size_t last = ax->nrounds - 1;
	while (last > 0 && ax->rounds[last].reverted)
		last--;
	return last;
}

/* where the search stands */
typedef struct Search {
	PtrVec tried;              /* "K\ttensor": tried against the model of round K */
	PtrVec measured;           /* "K\tnodes": measured against the model of round K */
	char *sig;                 /* verify_qsig of the last kept model (NULL: unknown) */
	int undone;                /* rounds undone */
} Search;

/* One round's change, found: the tensor, the nodes it leaves in float
 * (pushed on rq's exclude-nodes), the model quantized so, its signature */
typedef struct Change {
	VerifyCand *cand;
	PtrVec nodes;
	Model *m;
	QuantReport qrep;
	char *sig;
} Change;

static void change_free(Change *ch)
{
	pv_free_all(&ch->nodes);
	quant_report_free(&ch->qrep);
	model_free(ch->m);
	free(ch->sig);
	memset(ch, 0, sizeof *ch);
}

static void pop_excludes(Requant *rq, size_t n)
{
	while (n--)
		free(rq->o.exclude_nodes.v[--rq->o.exclude_nodes.n]);
}

/* Drop from ch->nodes (the last entries of rq's exclude-nodes) each node
 * the others make float anyway: the model quantized without it has the
 * same signature (a mover between two float nodes is not quantized, say).
 * The last node first, so consumers go before the producer they follow. */
static void drop_unneeded(StageCtx *c, Requant *rq, Change *ch)
{
	PtrVec *ex = &rq->o.exclude_nodes;
	for (size_t j = ch->nodes.n; ch->sig && ch->nodes.n > 1 && j-- > 0;) {
		size_t at = ex->n - ch->nodes.n + j;
		char *name = ex->v[at];
		memmove(&ex->v[at], &ex->v[at + 1], (ex->n - at - 1) * sizeof *ex->v);
		ex->n--;
		Model *m = NULL;
		QuantReport qrep;
		char *sig = NULL;
		int same = requant(c, rq, &m, &qrep) == 0 && (sig = verify_qsig(m)) && !strcmp(sig, ch->sig);
		if (same) {
			free(name);
			free(ch->nodes.v[j]);
			memmove(&ch->nodes.v[j], &ch->nodes.v[j + 1], (ch->nodes.n - j - 1) * sizeof *ch->nodes.v);
			ch->nodes.n--;
			quant_report_free(&ch->qrep);
			model_free(ch->m);
			ch->qrep = qrep;
			ch->m = m;
		} else {
			pv_push(ex, NULL);
			memmove(&ex->v[at + 1], &ex->v[at], (ex->n - at - 1) * sizeof *ex->v);
			ex->v[at] = name;
			if (m)
				quant_report_free(&qrep);
			model_free(m);
		}
		free(sig);
	}
}

/* Quantize again with ch->nodes left in float as well: 1 when that changes
 * what the model computes (ch->m, ch->qrep, ch->sig set; the nodes stay on
 * rq's exclude-nodes), 0 when it does not (the candidate is noted as such)
 * or the rewrite refuses (nothing would stay quantized) */
static int try_nodes(StageCtx *c, Requant *rq, VerifyAuto *ax, Search *s, Change *ch)
{
	char *list = NULL;
	StrBuf sb = {0};
	for (size_t i = 0; i < ch->nodes.n; i++) {
		pv_push(&rq->o.exclude_nodes, xstrdup(ch->nodes.v[i]));
		sb_printf(&sb, "%s%s", i ? " " : "", (const char *)ch->nodes.v[i]);
	}
	list = sb_detach(&sb);
	if (requant(c, rq, &ch->m, &ch->qrep) < 0) {
		/* the same options quantized the model before: the exclusion
		 * left nothing to quantize */
		fprintf(c->log, "verify: %s: auto-exclude: tensor %s: not leaving %s in float: %s\n", c->model,
			ch->cand->tensor, list, errmsg());
		pop_excludes(rq, ch->nodes.n);
		free(list);
		ch->m = NULL;
		return 0;
	}
	ch->sig = verify_qsig(ch->m);
	if (ch->sig && s->sig && !strcmp(ch->sig, s->sig)) {
		fprintf(c->log, "verify: %s: auto-exclude: tensor %s: leaving %s in float quantizes the model as before: not measured\n",
			c->model, ch->cand->tensor, list);
		ax->same = xreallocarray(ax->same, ax->nsame + 1, sizeof *ax->same);
		ax->same[ax->nsame++] = (struct VerifySame){xstrdup(ch->cand->tensor), list, last_kept(ax)};
		pop_excludes(rq, ch->nodes.n);
		quant_report_free(&ch->qrep);
		model_free(ch->m);
		free(ch->sig);
		ch->m = NULL;
		ch->sig = NULL;
		return 0;
	}
	free(list);
	drop_unneeded(c, rq, ch);
	return 1;
}

/* "K\tnames" for the set of nodes v, sorted, against the model of round K */
static char *group_key(const VerifyAuto *ax, const PtrVec *v)
{
	PtrVec sorted = {0};
	for (size_t i = 0; i < v->n; i++)
		pv_push(&sorted, v->v[i]);
	if (sorted.n > 1)
		qsort(sorted.v, sorted.n, sizeof *sorted.v, cmp_names);
	StrBuf sb = {0};
	sb_printf(&sb, "%zu\t", last_kept(ax));
	for (size_t i = 0; i < sorted.n; i++)
		sb_printf(&sb, "%s%s", i ? " " : "", (const char *)sorted.v[i]);
	pv_free(&sorted);
	return sb_detach(&sb);
}

/* The next round's change: the first candidate tensor not tried against
 * the model held now whose option (the nodes not in float yet, within the N
 * allowed) changes the quantized model into one not measured yet from
 * there. 1 found (ch set; cv is the caller's to free after ch), 0 none
 * left. */
static int next_change(StageCtx *c, Requant *rq, VerifyAuto *ax, Search *s, VerifyCand *cv, size_t nc,
		       Change *ch)
{
	size_t used = ax->excluded.n - ax->nuser;
	for (size_t i = 0; i < nc; i++) {
		char *key = xasprintf("%zu\t%s", last_kept(ax), cv[i].tensor);
		if (has_name(&s->tried, key)) {
			free(key);
			continue;
		}
		pv_push(&s->tried, key);
		for (size_t k = 0; k < cv[i].nopts; k++) {
			memset(ch, 0, sizeof *ch);
			ch->cand = &cv[i];
			for (size_t j = 0; j < cv[i].opts[k].n; j++)
				if (!has_name(&ax->excluded, cv[i].opts[k].v[j]))
					pv_push(&ch->nodes, xstrdup(cv[i].opts[k].v[j]));
			if (ch->nodes.n && used + ch->nodes.n > (size_t)ax->max_nodes) {
				fprintf(c->log, "verify: %s: auto-exclude: tensor %s: would leave %zu more nodes in float, "
						"beyond verify.auto-exclude = %d: not tried\n",
					c->model, cv[i].tensor, ch->nodes.n, ax->max_nodes);
			} else if (ch->nodes.n && try_nodes(c, rq, ax, s, ch)) {
				char *g = group_key(ax, &ch->nodes);
				if (!has_name(&s->measured, g)) {
					pv_push(&s->measured, g);
					return 1;
				}
				free(g); /* another tensor's round measured these nodes */
				pop_excludes(rq, ch->nodes.n);
			}
			change_free(ch);
		}
	}
	return 0;
}

static char *db_text(double nsr)
{
	if (nsr < 0)
		return xstrdup("n/a");
	return nsr > 0 ? xasprintf("SQNR %.2f dB", -10 * log10(nsr)) : xstrdup("exact");
}

/* Measure the change; keep it when it measures better than the last kept
 * round, else undo it. The failed gates of the model kept, or -1. */
static int round_run(StageCtx *c, Model *ref, const VerifyOpts *vo, const VerifyGates *g, Requant *rq,
		     VerifyAuto *ax, Search *s, Change *ch, Model **q, VerifyReport *rep)
{
	VerifyReport nr;
	char *step = db_text(ch->cand->step_nsr), *own = db_text(ch->cand->local_nsr);
	StrBuf sb = {0};
	for (size_t i = 0; i < ch->nodes.n; i++)
		sb_printf(&sb, "%s%s", i ? " " : "", (const char *)ch->nodes.v[i]);
	fprintf(c->log, "verify: %s: auto-exclude round %zu: tensor %s (its step alone: %s; its own Q/DQ: %s): "
			"leaving %s in float\n",
		c->model, ax->nrounds, ch->cand->tensor, step, own, sb.buf);
	free(step);
	free(own);
	sb_release(&sb);
	if (verify_models(ref, ch->m, vo, &nr) < 0)
		return error_prefix("verify.auto-exclude: measuring with %s left in float", (const char *)ch->nodes.v[0]);
	size_t last = last_kept(ax);
	verify_round_add(ax, &nr, g, ch->cand->tensor, &ch->nodes);
	VerifyRound *r = &ax->rounds[ax->nrounds - 1];
	r->from = last;
	if (!better(r, &ax->rounds[last])) {
		r->reverted = 1;
		s->undone++;
		pop_excludes(rq, ch->nodes.n);
		verify_report_free(&nr);
		verify_round_line(ax, ax->nrounds - 1, c->model, c->log);
		return ax->rounds[last].nfailed;
	}
	for (size_t i = 0; i < ch->nodes.n; i++)
		pv_push(&ax->excluded, xstrdup(ch->nodes.v[i]));
	quant_report_free(&rq->rep);
	rq->rep = ch->qrep;
	memset(&ch->qrep, 0, sizeof ch->qrep);
	model_free(*q);
	*q = ch->m;
	ch->m = NULL;
	free(s->sig);
	s->sig = ch->sig;
	ch->sig = NULL;
	verify_report_free(rep);
	*rep = nr;
	rq->done = 1;
	verify_round_line(ax, ax->nrounds - 1, c->model, c->log);
	return r->nfailed;
}

/* Take out the noise of the worst-ranked tensor's step, one tensor per
 * round, until the gates pass or ax->max_nodes are left in float (see the
 * top). nfailed: the failed gates of the plain quantization. Returns the
 * final failed gates, or -1. */
static int auto_exclude(StageCtx *c, Model *ref, const VerifyOpts *vo, const VerifyGates *g, Requant *rq,
			VerifyAuto *ax, Model **q, VerifyReport *rep, int nfailed)
{
	for (size_t i = 0; i < rq->o.exclude_nodes.n; i++)
		pv_push(&ax->excluded, xstrdup(rq->o.exclude_nodes.v[i]));
	ax->nuser = ax->excluded.n;
	verify_round_add(ax, rep, g, NULL, NULL);
	verify_round_line(ax, 0, c->model, c->log);
	Search s = {.sig = verify_qsig(*q)};
	while (nfailed > 0 && ax->excluded.n - ax->nuser < (size_t)ax->max_nodes) {
		VerifyCand *cv;
		size_t nc;
		Change ch = {0};
		verify_exclusions(rep, *q, &cv, &nc);
		if (!next_change(c, rq, ax, &s, cv, nc, &ch)) {
			fprintf(c->log, "verify: %s: auto-exclude: no further quantized node to leave in float\n",
				c->model);
			verify_cands_free(cv, nc);
			break;
		}
		int n = round_run(c, ref, vo, g, rq, ax, &s, &ch, q, rep);
		change_free(&ch);
		verify_cands_free(cv, nc);
		if (n < 0) {
			nfailed = -1;
			break;
		}
		nfailed = n;
		if (s.undone >= 2 * ax->max_nodes) {
			fprintf(c->log, "verify: %s: auto-exclude: %d rounds in float made nothing better: stopping\n",
				c->model, s.undone);
			break;
		}
	}
	pv_free_all(&s.tried);
	pv_free_all(&s.measured);
	free(s.sig);
	return nfailed;
}

/* the exclude-nodes line of what auto-exclusion found */
static char *exclude_line(const VerifyAuto *ax)
{
	StrBuf sb = {0};
	sb_puts(&sb, "quantize.exclude-nodes =");
	for (size_t i = 0; i < ax->excluded.n; i++)
		sb_printf(&sb, " %s", (const char *)ax->excluded.v[i]);
	return sb_detach(&sb);
}

/* the failure after auto-exclusion: the gate lines and what was tried */
static int auto_failed(StageCtx *c, const VerifyAuto *ax, const VerifyReport *rep, const VerifyGates *g,
		       int nfailed)
{
	verify_gates(rep, g, c->model, c->log);
	StrBuf sb = {0};
	for (size_t i = ax->nuser; i < ax->excluded.n; i++)
		sb_printf(&sb, "%s%s", i > ax->nuser ? " " : "", (const char *)ax->excluded.v[i]);
	size_t n = ax->excluded.n - ax->nuser;
	error("model '%s': %d verify gate%s failed with %zu node%s left in float by verify.auto-exclude = %d (%s)",
	      c->model, nfailed, nfailed > 1 ? "s" : "", n, n == 1 ? "" : "s", ax->max_nodes, n ? sb.buf : "none found");
	sb_release(&sb);
	return -1;
}

static int write_json(StageCtx *c, const VerifyReport *rep, const VerifyGates *g, const VerifyAuto *ax,
		      const char *data)
{
	char *inputs = is_random(data) ? xasprintf("random: standard normal, seed %d, %d samples", RANDOM_SEED,
						   RANDOM_SAMPLES)
				       : xstrdup(data);
	StrBuf sb = {0};
	verify_json(rep, g, ax->max_nodes ? ax : NULL, c->model, inputs, &sb);
	char *p = path_join(c->outdir, "verify.json");
	int r = write_file_atomic(p, sb.buf, sb.len);
	free(p);
	sb_release(&sb);
	free(inputs);
	return r;
}

/* the output model and its quant.json: the quantize stage's, or that of
 * the re-quantized model */
static int write_model(StageCtx *c, Model *q, const Requant *rq)
{
	char *qj = path_join(c->outdir, "quant.json");
	int r = model_save(q, c->output, NULL);
	if (r == 0 && rq->done) {
		StrBuf sb = {0};
		quant_json(&sb, c->model, &rq->o, rq->stats, &rq->rep, rq->ref_size, outdir_model_size(c->outdir));
		r = write_file_atomic(qj, sb.buf, sb.len);
		sb_release(&sb);
	} else if (r == 0) {
		char *dir = path_dir(c->input), *src = path_join(dir, "quant.json"), *buf = NULL;
		size_t len;
		if (access(src, F_OK) == 0 && (r = read_file(src, &buf, &len)) == 0)
			r = write_file_atomic(qj, buf, len);
		free(buf);
		free(src);
		free(dir);
	}
	free(qj);
	return r;
}

/* compare, gate, auto-exclude; the failed gates at the end, or -1 */
static int measure(StageCtx *c, Model *ref, Model **q, const VerifyOpts *o, const VerifyGates *g, Requant *rq,
		   VerifyAuto *ax, VerifyReport *rep)
{
	double t0 = now_sec();
	if (verify_models(ref, *q, o, rep) < 0)
		return error_prefix("verify.data");
	verify_summary(rep, c->model, c->log);
	verify_gates_line(g, c->log);
	int nfailed = verify_gates(rep, g, c->model, c->log);
	if (nfailed > 0 && ax->max_nodes > 0) {
		if (requant_open(c, rq) < 0)
			return -1;
		nfailed = auto_exclude(c, ref, o, g, rq, ax, q, rep, nfailed);
		if (nfailed >= 0 && rq->done) {
			fprintf(c->log, "verify: %s: after auto-exclusion:\n", c->model);
			verify_summary(rep, c->model, c->log);
		}
	}
	fprintf(c->log, "verify: %s: %.2f s\n", c->model, now_sec() - t0);
	return nfailed;
}

static int run(StageCtx *c)
{
	const char *data = sec_get(c->sec, "verify.data");
	if (!data)
		return error("model '%s': verify needs verify.data = FILES (samples to compare on, or random)", c->model);
	if (!c->reference)
		return error("model '%s': verify has no reference model (the float model quantize started from)",
			     c->model);
	const char *lv = sec_get(c->sec, "verify.labels");
	VerifyGates g;
	read_gates(c->sec, lv != NULL, &g);
	if (!isnan(g.max_top1_drop) && !lv)
		return error("model '%s': verify.max-top1-drop needs verify.labels (the class of every row)", c->model);
	PtrVec specs = {0};
	VerifyOpts o;
	char *labels_path = NULL;
	read_data(c, data, lv, &o, &specs, &labels_path);
	Model *ref = NULL, *q = NULL;
	VerifyReport rep = {0};
	VerifyAuto ax = {.max_nodes = atoi(stage_param_value(c->sec, "verify.auto-exclude"))};
	Requant rq = {0};
	int r = model_load_view(c->reference, &ref), nfailed = -1;
	if (r < 0)
		error_prefix("reference model");
	if (r == 0 && (r = model_load(c->input, &q)) < 0)
		error_prefix("quantized model");
	if (r == 0 && (nfailed = measure(c, ref, &q, &o, &g, &rq, &ax, &rep)) < 0)
		r = -1;
	/* the report, passed or not (a failed action's directory is kept) */
	if (r == 0)
		r = write_json(c, &rep, &g, &ax, data);
	if (r == 0 && nfailed > 0 && ax.max_nodes > 0)
		r = auto_failed(c, &ax, &rep, &g, nfailed);
	else if (r == 0 && nfailed > 0)
		r = error("model '%s': %d verify gate%s failed", c->model, nfailed, nfailed > 1 ? "s" : "");
	if (r == 0)
		r = write_model(c, q, &rq);
	if (r == 0 && rq.done) {
		char *line = exclude_line(&ax);
		fprintf(c->log, "verify: %s: the gates pass with %zu node%s left in float; to make this permanent, "
				"put in the rules of model '%s': %s\n",
			c->model, ax.excluded.n - ax.nuser, ax.excluded.n - ax.nuser == 1 ? "" : "s", c->model, line);
		free(line);
	}
	requant_close(&rq);
	verify_auto_free(&ax);
	verify_report_free(&rep);
	model_free(q);
	model_free(ref);
	free(labels_path);
	pv_free_all(&specs);
	return r;
}

const Stage stage_verify = {
	.name = "verify",
	.version = 6,
	.params = params,
	.wanted = wanted,
	.declared_inputs = declared_inputs,
	.run = run,
	.reference_of = "quantize",
	.side_of = "calibrate",
	.check_param = check_param,
};
