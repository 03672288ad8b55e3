/* quantize.c — the quantize stage: static (QDQ, from the statistics the
 * calibrate stage wrote beside the input model) or dynamic (QOperator)
 * quantization by src/quant, plus quant.json beside the model: sizes, every
 * node quantized or skipped with the reason, scales and zero points. A model
 * that cannot be quantized is an error, never a copy of its input. */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "quant/quantize.h"
#include "rules/rules.h"
#include "stages/stage.h"

static const StageParam params[] = {
	{"quantize", PARAM_ENUM, "static|dynamic", NULL, 1,
	 "static: activations from calibration (QDQ); dynamic: weights offline, activations at run time (QOperator)"},
	{"quantize.format", PARAM_ENUM, "qdq|qoperator", NULL, 1,
	 "qdq (static's only and default format) or qoperator (dynamic's only and default format)"},
	{"quantize.weights", PARAM_ENUM, "int8|uint8", "int8", 1,
	 "weight type (int8 symmetric -127..127, uint8 asymmetric); ConvInteger always gets uint8"},
	{"quantize.activations", PARAM_ENUM, "uint8|int8", "uint8", 1,
	 "activation type of static quantization (asymmetric)"},
	{"quantize.symmetric-activations", PARAM_BOOL, NULL, "false", 1,
	 "static: symmetric activation ranges (zero point 0 for int8, 128 for uint8)"},
	{"quantize.per-channel", PARAM_BOOL, NULL, "false", 1,
	 "one weight scale per output channel (static needs opset >= 13)"},
	{"quantize.reduce-range", PARAM_BOOL, NULL, "false", 1,
	 "7-bit weights (for CPUs without VNNI)"},
	{"quantize.method", PARAM_ENUM, "minmax|percentile|entropy", "minmax", 1,
	 "how static quantization picks activation ranges from the calibration statistics"},
	{"quantize.percentile", PARAM_FLOAT, NULL, "99.999", 1,
	 "quantize.method = percentile: the central percentage of values kept"},
	{"quantize.ops", PARAM_LIST, NULL, NULL, 1, "op types to quantize (default: every supported one)"},
	{"quantize.exclude-ops", PARAM_LIST, NULL, NULL, 1, "op types left in float"},
	{"quantize.exclude-nodes", PARAM_LIST, NULL, NULL, 1, "node names left in float"},
	{NULL, 0, NULL, NULL, 0, NULL},
};

/* any quantize key: run (and refuse quantize.* without quantize) */
static int wanted(const Section *sec)
{
	for (size_t i = 0; i < sec->nkv; i++)
		if (!strcmp(sec->kv[i].key, "quantize") || !strncmp(sec->kv[i].key, "quantize.", 9))
			return 1;
	return 0;
}

static int is_true(const char *v)
{
	return v && (!strcmp(v, "true") || !strcmp(v, "yes") || !strcmp(v, "on"));
}

static long long file_size(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0 ? (long long)st.st_size : -1;
}

static void free_words(PtrVec *v)
{
	for (size_t i = 0; i < v->n; i++)
		free(v->v[i]);
	pv_free(v);
}

static int run(StageCtx *c)
{
	const char *mode = sec_get(c->sec, "quantize");
	if (!mode) {
		const char *k = NULL;
		for (size_t i = 0; i < c->sec->nkv && !k; i++)
			if (!strncmp(c->sec->kv[i].key, "quantize.", 9))
				k = c->sec->kv[i].key;
		return error("model '%s' sets %s but not quantize = static | dynamic", c->model, k);
	}
	int dynamic = !strcmp(mode, "dynamic");
	const char *fmt = sec_get(c->sec, "quantize.format");
	if (fmt && !dynamic && strcmp(fmt, "qdq"))
		return error("model '%s': quantize.format = %s is not implemented for quantize = static: use qdq",
			     c->model, fmt);
	if (fmt && dynamic && strcmp(fmt, "qoperator"))
		return error("model '%s': quantize.format = %s is not implemented for quantize = dynamic: use qoperator",
			     c->model, fmt);
	static const char *const static_only[] = {"quantize.calibration", "quantize.activations", "quantize.method",
						  "quantize.percentile", "quantize.symmetric-activations", NULL};
	for (size_t i = 0; dynamic && static_only[i]; i++)
		if (sec_get(c->sec, static_only[i]))
			return error("model '%s': %s is only used by quantize = static", c->model, static_only[i]);
	const char *meth = stage_param_value(c->sec, "quantize.method");
	QuantOpts o = {
		.weight_type = !strcmp(stage_param_value(c->sec, "quantize.weights"), "uint8") ? DT_UINT8 : DT_INT8,
		.act_type = !strcmp(stage_param_value(c->sec, "quantize.activations"), "int8") ? DT_INT8 : DT_UINT8,
		.act_symmetric = is_true(stage_param_value(c->sec, "quantize.symmetric-activations")),
		.per_channel = is_true(stage_param_value(c->sec, "quantize.per-channel")),
		.reduce_range = is_true(stage_param_value(c->sec, "quantize.reduce-range")),
		.method = !strcmp(meth, "percentile") ? CALIB_PERCENTILE : !strcmp(meth, "entropy") ? CALIB_ENTROPY
											 : CALIB_MINMAX,
		.percentile = strtod(stage_param_value(c->sec, "quantize.percentile"), NULL),
	};
	if (o.method != CALIB_PERCENTILE && sec_get(c->sec, "quantize.percentile"))
		return error("model '%s': quantize.percentile is only used by quantize.method = percentile", c->model);
	if (o.method == CALIB_PERCENTILE && !(o.percentile > 0 && o.percentile <= 100))
		return error("model '%s': quantize.percentile = %g is not valid: expected a number in (0, 100]", c->model,
			     o.percentile);
	split_words(sec_get(c->sec, "quantize.ops"), &o.ops);
	split_words(sec_get(c->sec, "quantize.exclude-ops"), &o.exclude_ops);
	split_words(sec_get(c->sec, "quantize.exclude-nodes"), &o.exclude_nodes);
	Model *m = NULL;
	CalibStats *stats = NULL;
	QuantReport rep = {0};
	int r = model_load(c->input, &m);
	if (r == 0 && !dynamic) {
		char *dir = path_dir(c->input), *p = path_join(dir, "calibration.stats");
		r = calib_load(p, &stats);
		if (r < 0)
			error_prefix("static quantization needs the calibrate stage's statistics");
		free(dir);
		free(p);
	}
	if (r == 0)
		r = dynamic ? quant_dynamic(m, &o, &rep) : quant_static_qdq(m, stats, &o, &rep);
	if (r == 0)
		r = model_save(m, c->output, NULL);
	if (r == 0) {
		StrBuf sb = {0};
		sb_puts(&sb, "{\n  \"model\": ");
		sb_json_str(&sb, c->model);
		sb_printf(&sb, ",\n  \"mode\": \"%s\",\n  \"format\": \"%s\"", mode, dynamic ? "qoperator" : "qdq");
		sb_printf(&sb, ",\n  \"weights\": \"%s\"", o.weight_type == DT_INT8 ? "int8" : "uint8");
		if (!dynamic) {
			sb_printf(&sb, ",\n  \"activations\": \"%s\",\n  \"symmetric_activations\": %s,\n  \"method\": \"%s\"",
				  o.act_type == DT_INT8 ? "int8" : "uint8", o.act_symmetric ? "true" : "false", meth);
			if (o.method == CALIB_PERCENTILE)
				sb_printf(&sb, ",\n  \"percentile\": %.17g", o.percentile);
			sb_printf(&sb, ",\n  \"calibration_samples\": %llu", (unsigned long long)stats->nsamples);
		}
		sb_printf(&sb, ",\n  \"per_channel\": %s,\n  \"reduce_range\": %s", o.per_channel ? "true" : "false",
			  o.reduce_range ? "true" : "false");
		long long before = file_size(c->input), after = file_size(c->output);
		sb_printf(&sb, ",\n  \"size_before\": %lld,\n  \"size_after\": %lld", before, after);
		sb_printf(&sb, ",\n  \"nodes_quantized\": %zu,\n  \"nodes_folded\": %zu,\n  \"nodes_skipped\": %zu",
			  rep.nquantized, rep.nfolded, rep.nskipped);
		sb_printf(&sb, ",\n  \"nodes\": [\n    %s\n  ]", rep.nodes.len ? rep.nodes.buf : "");
		sb_printf(&sb, ",\n  \"tensors\": {\n    %s\n  }\n}\n", rep.tensors.len ? rep.tensors.buf : "");
		char *p = path_join(c->outdir, "quant.json");
		r = write_file_atomic(p, sb.buf, sb.len);
		free(p);
		sb_release(&sb);
		fprintf(c->log, "quantize: %s: %s, %zu nodes quantized, %zu folded, %zu skipped, %lld -> %lld bytes\n",
			c->model, mode, rep.nquantized, rep.nfolded, rep.nskipped, before, after);
	}
	quant_report_free(&rep);
	calib_free(stats);
	model_free(m);
	free_words(&o.ops);
	free_words(&o.exclude_ops);
	free_words(&o.exclude_nodes);
	return r;
}

const Stage stage_quantize = {
	.name = "quantize",
	.version = 1,
	.params = params,
	.wanted = wanted,
	.declared_inputs = NULL,
	.run = run,
};
