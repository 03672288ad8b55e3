/* preprocess.c — the preprocess stage: output-preserving graph
 * simplification before quantization (src/preprocess). Writes the
 * simplified model and preprocess.json (what each pass changed) and logs one
 * line per pass. Runs when the model sets `preprocess`; pass names are
 * checked before anything runs (declared_inputs, with the rule's file:line)
 * and again when the stage runs. */
#include <stdlib.h>
#include <string.h>

#include "infer/infer.h"
#include "preprocess/opset.h"
#include "preprocess/passes.h"
#include "rules/rules.h"
#include "stages/stage.h"

static const StageParam params[] = {
	{"preprocess", PARAM_TEXT, NULL, NULL, 1,
	 "default, or passes separated by commas: identity, shape, fold, fuse-bn, conv-affine, transpose, "
	 "matmul-add, layernorm, gelu, dedup, cse, dce"},
	{"preprocess.fold-limit", PARAM_TEXT, NULL, "16M", 1,
	 "largest output (bytes, K/M/G suffixes) constant folding may materialize"},
	{"preprocess.opset", PARAM_INT, NULL, NULL, 1,
	 "upgrade the model's default-domain opset to this one (7 to 23) before the passes"},
	{NULL, 0, NULL, NULL, 0, NULL},
};

/* preprocess.opset's value into *out (may be NULL); -1 with error() */
static int parse_opset(const char *v, int64_t *out)
{
	char *end;
	long long n = strtoll(v, &end, 10);
	if (end == v || *end || n < OPSET_MIN_TARGET || n > OPSET_MAX_TARGET)
		return error("preprocess.opset = '%s' is not valid: expected an opset from %d to %d", v,
			     OPSET_MIN_TARGET, OPSET_MAX_TARGET);
	if (out)
		*out = n;
	return 0;
}

/* pass names, the opset and the fold limit are checked when the rule file is read */
static int check_param(const char *key, const char *value)
{
	if (!strcmp(key, "preprocess")) {
		PrepOpts o = {0};
		return prep_parse(value, &o);
	}
	if (!strcmp(key, "preprocess.opset"))
		return parse_opset(value, NULL);
	if (!strcmp(key, "preprocess.fold-limit") && parse_size(value) <= 0)
		return error("preprocess.fold-limit = '%s' is not valid: expected a size such as 64K or 16M", value);
	return 0;
}

static int wanted(const Section *sec)
{
	for (size_t i = 0; i < sec->nkv; i++)
		if (!strcmp(sec->kv[i].key, "preprocess") || !strncmp(sec->kv[i].key, "preprocess.", 11))
			return 1;
	return 0;
}

/* the model's options, or -1 with error() (where: "file:line: " or "") */
static int options(const Section *sec, const char *model, PrepOpts *o)
{
	const KV *kv = sec_find(sec, "preprocess"), *ok = sec_find(sec, "preprocess.opset");
	if (ok && parse_opset(ok->value, &o->opset) < 0)
		return error_prefix("%s:%d: model '%s'", ok->file, ok->line, model);
	if (!kv && !ok) {
		const char *k = NULL;
		for (size_t i = 0; i < sec->nkv && !k; i++)
			if (!strncmp(sec->kv[i].key, "preprocess.", 11))
				kv = &sec->kv[i], k = kv->key;
		return error("%s:%d: model '%s' sets %s but not preprocess = default | PASS,...", kv->file, kv->line,
			     model, k);
	}
	if (kv && prep_parse(kv->value, o) < 0)
		return error_prefix("%s:%d: model '%s'", kv->file, kv->line, model);
	const KV *lk = sec_find(sec, "preprocess.fold-limit");
	const char *lv = stage_param_value(sec, "preprocess.fold-limit");
	int64_t lim = parse_size(lv);
	if (lim <= 0) {
		if (lk)
			return error("%s:%d: model '%s': preprocess.fold-limit = '%s' is not valid: expected a size such as 64K or 16M",
				     lk->file, lk->line, model, lv);
		return error("model '%s': preprocess.fold-limit = '%s' is not valid", model, lv);
	}
	o->fold_limit = (size_t)lim;
	return 0;
}

static int declared_inputs(const Section *sec, const char *root, PtrVec *files)
{
	PrepOpts o = {0};
	return options(sec, sec->name, &o);
}

static void write_json(StrBuf *sb, const char *model, const PrepReport *r)
{
	sb_puts(sb, "{\n  \"model\": ");
	sb_json_str(sb, model);
	sb_printf(sb, ",\n  \"rounds\": %zu,\n  \"nodes\": {\"before\": %zu, \"after\": %zu},\n", r->rounds,
		  r->nodes_before, r->nodes_after);
	sb_printf(sb, "  \"initializers\": {\"before\": %zu, \"after\": %zu},\n", r->inits_before, r->inits_after);
	sb_printf(sb, "  \"opset\": {\"before\": %lld, \"after\": %lld, \"converted\": %zu},\n  \"passes\": {",
		  (long long)r->opset_from, (long long)r->opset_to, r->opset_changed);
	for (int p = 0; p < PREP_NPASSES; p++)
		sb_printf(sb, "%s\n    \"%s\": {\"changed\": %zu, \"skipped\": %zu}", p ? "," : "", prep_pass_name(p),
			  r->stat[p].changed, r->stat[p].skipped);
	sb_puts(sb, "\n  }\n}\n");
}

static int run(StageCtx *c)
{
	PrepOpts o = {0};
	if (options(c->sec, c->model, &o) < 0)
		return -1;
	o.log = c->log;
	Model *m;
	if (model_load(c->input, &m) < 0)
		return -1;
	int typed = m->proto->graph && m->proto->graph->n_value_info > 0;
	PrepReport rep;
	int r = prep_run(m, &o, &rep);
	if (r == 0 && typed) {
		InferOpts io = {.mode = INFER_MERGE};
		r = infer_model(m, &io, NULL);
		if (r < 0)
			error_prefix("preprocess: shape inference of the simplified model");
	}
	if (r == 0) {
		if (o.opset)
			fprintf(c->log, "preprocess: %s: opset %lld -> %lld, %zu nodes converted\n", c->model,
				(long long)rep.opset_from, (long long)rep.opset_to, rep.opset_changed);
		for (size_t i = 0; i < o.npasses; i++) {
			int p = o.passes[i];
			fprintf(c->log, "preprocess: %s: %s: %zu changed", c->model, prep_pass_name(p), rep.stat[p].changed);
			if (rep.stat[p].skipped)
				fprintf(c->log, ", %zu skipped", rep.stat[p].skipped);
			fputc('\n', c->log);
		}
		fprintf(c->log, "preprocess: %s: %zu -> %zu nodes, %zu -> %zu initializers in %zu rounds\n", c->model,
			rep.nodes_before, rep.nodes_after, rep.inits_before, rep.inits_after, rep.rounds);
		SaveOpts so = {0};
		r = model_save(m, c->output, &so);
	}
	if (r == 0) {
		StrBuf sb = {0};
		write_json(&sb, c->model, &rep);
		char *p = path_join(c->outdir, "preprocess.json");
		r = write_file_atomic(p, sb.buf, sb.len);
		free(p);
		sb_release(&sb);
	}
	model_free(m);
	return r;
}

const Stage stage_preprocess = {
	.name = "preprocess",
	.version = 3,   /* 3: layernorm and gelu passes */
	.params = params,
	.wanted = wanted,
	.declared_inputs = declared_inputs,
	.run = run,
	.check_param = check_param,
};
