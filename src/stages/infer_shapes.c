/* infer_shapes.c — the infer-shapes stage: fills in the type and shape of
 * every tensor with the native pass (src/infer), so later stages and other
 * tools (ORT's quantizer included) never meet an untyped tensor. */
#include <string.h>

#include "infer/infer.h"
#include "rules/rules.h"
#include "stages/stage.h"

static const StageParam params[] = {
	{"infer-shapes", PARAM_ENUM, "merge|strict|off", "merge", 1,
	 "merge: keep annotations, fill the rest; strict: also fail on any untyped tensor; off: skip"},
	{NULL, 0, NULL, NULL, 0, NULL},
};

/* Runs when the user configures it, or when a later native stage needs types
 * (unless the user insists on off). */
static int wanted(const Section *sec)
{
	const char *v = sec_get(sec, "infer-shapes");
	if (v)
		return strcmp(v, "off") != 0;
	for (size_t i = 0; i < sec->nkv; i++) {
		const Stage *st;
		if (stage_param_find(sec->kv[i].key, &st) && st != &stage_export && st != &stage_infer_shapes)
			return 1;
	}
	return 0;
}

static int run(StageCtx *c)
{
	const char *mode = stage_param_value(c->sec, "infer-shapes");
	InferOpts o = {.mode = mode && !strcmp(mode, "strict") ? INFER_STRICT : INFER_MERGE};
	InferReport rep = {0};
	Model *m;
	if (model_load(c->input, &m) < 0)
		return -1;
	int r = infer_model(m, &o, &rep);
	if (r == 0) {
		for (size_t i = 0; i < rep.nmissing; i++)
			fprintf(c->log, "infer-shapes: %s: no shape inference for %s%s%s-%lld (%zu nodes, first '%s'): its outputs stay untyped\n",
				c->model, rep.missing[i].domain && *rep.missing[i].domain ? rep.missing[i].domain : "",
				rep.missing[i].domain && *rep.missing[i].domain ? "." : "", rep.missing[i].op,
				(long long)rep.missing[i].opset, rep.missing[i].count, rep.missing[i].node);
		fprintf(c->log, "infer-shapes: %s: %zu of %zu tensors typed, %zu with known rank\n",
			c->model, rep.ntyped, rep.ntensors, rep.nshaped);
		SaveOpts so = {0};
		r = model_save(m, c->output, &so);
	}
	infer_report_free(&rep);
	model_free(m);
	return r;
}

const Stage stage_infer_shapes = {
	.name = "infer-shapes",
	.version = 1,
	.params = params,
	.wanted = wanted,
	.declared_inputs = NULL,
	.run = run,
	.annotates = 1,
};
