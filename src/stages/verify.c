/* verify.c — the verify stage: runs the float model the quantize stage
 * started from (c->reference) and the quantized model (c->input) on the same
 * samples (src/verify), writes verify.json beside an unchanged copy of the
 * quantized model, prints a summary, and fails the build when a gate fails:
 * one line per failed gate, "verify: MODEL: GATE: measured X, threshold Y". */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "rules/rules.h"
#include "stages/stage.h"
#include "verify/verify.h"

#define RANDOM_SAMPLES 16
#define RANDOM_SEED 0

static const StageParam params[] = {
	{"verify.data", PARAM_LIST, NULL, NULL, 1,
	 "samples to compare on: .npy/.npz/.pb files, test_data_set directories, directories, globs; or random"},
	{"verify.labels", PARAM_TEXT, NULL, NULL, 1,
	 "top-1 labels: a tensor name inside every sample (e.g. labels) or a .npy/.npz/.pb file"},
	{"verify.max-top1-drop", PARAM_FLOAT, NULL, NULL, 1, "gate: largest top-1 accuracy drop, in points"},
	{"verify.min-sqnr", PARAM_FLOAT, NULL, NULL, 1, "gate: smallest SQNR of every output, in dB"},
	{"verify.min-cosine", PARAM_FLOAT, NULL, NULL, 1, "gate: smallest cosine similarity of every output"},
	{"verify.max-abs", PARAM_FLOAT, NULL, NULL, 1, "gate: largest absolute error of every output"},
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

static int declared_inputs(const Section *sec, const char *root, PtrVec *files)
{
	const char *v = sec_get(sec, "verify.data");
	if (!v)
		return error("%s:%d: model '%s': verify needs verify.data = FILES (samples to compare on, or random)",
			     sec->file, sec->line, sec->name);
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
		else
			pv_push(files, xstrdup(lv));
		free(full);
	}
	return r;
}

static double gate(const Section *sec, const char *key)
{
	const char *v = sec_get(sec, key);
	return v ? strtod(v, NULL) : NAN;
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
	VerifyGates g = {
		.max_top1_drop = gate(c->sec, "verify.max-top1-drop"),
		.min_sqnr = gate(c->sec, "verify.min-sqnr"),
		.min_cosine = gate(c->sec, "verify.min-cosine"),
		.max_abs = gate(c->sec, "verify.max-abs"),
	};
	if (!isnan(g.max_top1_drop) && !lv)
		return error("model '%s': verify.max-top1-drop needs verify.labels (the class of every row)", c->model);
	PtrVec specs = {0};
	VerifyOpts o = {.threads = 1, .random = is_random(data), .nrandom = RANDOM_SAMPLES, .seed = RANDOM_SEED};
	char *labels_path = NULL;
	if (!o.random) {
		split_words(data, &specs);
		for (size_t i = 0; i < specs.n; i++) {
			char *full = path_join(c->root, specs.v[i]);
			free(specs.v[i]);
			specs.v[i] = full;
		}
		o.specs = (const char *const *)specs.v;
		o.nspecs = specs.n;
	}
	if (lv && labels_is_file(lv))
		o.labels_file = labels_path = path_join(c->root, lv);
	else
		o.labels_name = lv;
	Model *ref = NULL, *q = NULL;
	VerifyReport rep = {0};
	int r = model_load(c->reference, &ref);
	if (r < 0)
		error_prefix("reference model");
	if (r == 0 && (r = model_load(c->input, &q)) < 0)
		error_prefix("quantized model");
	double t0 = now_sec();
	if (r == 0 && (r = verify_models(ref, q, &o, &rep)) < 0)
		error_prefix("verify.data");
	if (r == 0) {
		verify_summary(&rep, c->model, c->log);
		fprintf(c->log, "verify: %s: %.2f s\n", c->model, now_sec() - t0);
		int nfailed = verify_gates(&rep, &g, c->model, c->log);
		if (nfailed < 0)
			r = -1;
		else if (nfailed > 0)
			r = error("model '%s': %d verify gate%s failed", c->model, nfailed, nfailed > 1 ? "s" : "");
		else {
			char *inputs = o.random ? xasprintf("random: standard normal, seed %d, %d samples", RANDOM_SEED,
							    RANDOM_SAMPLES)
						: xstrdup(data);
			StrBuf sb = {0};
			verify_json(&rep, &g, c->model, inputs, nfailed, &sb);
			char *p = path_join(c->outdir, "verify.json");
			r = write_file_atomic(p, sb.buf, sb.len);
			free(p);
			sb_release(&sb);
			free(inputs);
		}
	}
	/* the quantized model passes unchanged: the chain's artifact */
	if (r == 0)
		r = model_save(q, c->output, NULL);
	verify_report_free(&rep);
	model_free(q);
	model_free(ref);
	free(labels_path);
	pv_free_all(&specs);
	return r;
}

const Stage stage_verify = {
	.name = "verify",
	.version = 3,
	.params = params,
	.wanted = wanted,
	.declared_inputs = declared_inputs,
	.run = run,
	.reference_of = "quantize",
};
