/* quantize.c — the quantize stage: static (QDQ, from the statistics the
 * calibrate stage wrote beside the input model) or dynamic (QOperator)
 * quantization, or float16 conversion, by src/quant, plus quant.json beside the model: sizes, every
 * node quantized or skipped with the reason, scales and zero points. A model
 * that cannot be quantized is an error, never a copy of its input. */
#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "rules/rules.h"
#include "stages/quantize.h"
#include "stages/stage.h"

static const StageParam params[] = {
	{"quantize", PARAM_ENUM, "static|dynamic|fp16", NULL, 1,
	 "static: activations from calibration; dynamic: weights offline, activations at run time; fp16: float16 weights and computation"},
	{"quantize.format", PARAM_ENUM, "qdq|qoperator", NULL, 1,
	 "static: qdq (default) or qoperator (QLinearConv, QLinearMatMul...); dynamic: qoperator only"},
	{"quantize.weights", PARAM_ENUM, "int8|uint8", "int8", 1,
	 "weight type (int8 symmetric -127..127, uint8 asymmetric); ConvInteger always gets uint8"},
	{"quantize.activations", PARAM_ENUM, "uint8|int8|uint16|int16", "uint8", 1,
	 "activation type of static quantization (asymmetric; 16-bit in qdq only)"},
	{"quantize.symmetric-activations", PARAM_BOOL, NULL, "false", 1,
	 "static: symmetric activation ranges (zero point 0 for int8, 128 for uint8)"},
	{"quantize.per-channel", PARAM_ENUM, "auto|true|false|yes|no|on|off", "auto", 1,
	 "one weight scale per output channel (static needs opset >= 13); auto: for a weight whose 8-bit per-tensor values keep under 30 dB of its signal"},
	{"quantize.reduce-range", PARAM_BOOL, NULL, "false", 1,
	 "7-bit weights (for CPUs without VNNI)"},
	{"quantize.method", PARAM_ENUM, "minmax|percentile|entropy", "minmax", 1,
	 "how static quantization picks activation ranges from the calibration statistics"},
	{"quantize.percentile", PARAM_FLOAT, NULL, "99.999", 1,
	 "quantize.method = percentile: the central percentage of values kept"},
	{"quantize.bins", PARAM_INT, NULL, NULL, 1,
	 "quantize.method = percentile or entropy: histogram bins (a power of two up to 2048; default 2048)"},
	{"quantize.ops", PARAM_LIST, NULL, NULL, 1, "op types to quantize (default: every supported one)"},
	{"quantize.exclude-ops", PARAM_LIST, NULL, NULL, 1, "op types left in float (fp16: left in float32)"},
	{"quantize.exclude-nodes", PARAM_LIST, NULL, NULL, 1, "node names left in float (fp16: left in float32)"},
	{"quantize.target", PARAM_ENUM, "cpu|gpu", "cpu", 1,
	 "where the model will run: gpu refuses formats onnxruntime's GPU providers cannot execute"},
	{"quantize.keep-io-types", PARAM_BOOL, NULL, "false", 1,
	 "fp16: graph inputs and outputs stay float32 (Casts at the boundary)"},
	{"quantize.names", PARAM_ENUM, "onnxruntime|compact", "onnxruntime", 1,
	 "static qdq: names of the added tensors and nodes: onnxruntime's (W_quantized, T_DequantizeLinear_Output...) or compact (W, T_dq, numbered scales)"},
	{"quantize.preset", PARAM_ENUM, "auto|transformer|none", "auto", 1,
	 "static: transformer keeps LayerNorms, residual Adds and the Softmax input float; auto: when the graph has a Softmax and a LayerNorm"},
	{"quantize.transformer-float", PARAM_LIST, NULL, "layernorm residual softmax", 1,
	 "what quantize.preset = transformer keeps float: any of layernorm, residual, softmax"},
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

/* the file:line of key for messages ("" when unset) */
static char *where(const Section *sec, const char *key)
{
	const KV *kv = sec_find(sec, key);
	return kv ? xasprintf("%s:%d: ", kv->file, kv->line) : xstrdup("");
}

/* error "FILE:LINE: model 'M': KEY ... " for a key the mode does not use */
static int refuse(const Section *sec, const char *model, const char *key, const char *why)
{
	char *w = where(sec, key);
	error("%smodel '%s': %s %s", w, model, key, why);
	free(w);
	return -1;
}

static int dtype_of(const char *v)
{
	return !strcmp(v, "int8") ? DT_INT8 : !strcmp(v, "uint8") ? DT_UINT8 : !strcmp(v, "int16") ? DT_INT16 : DT_UINT16;
}

int quant_opts_read(const Section *sec, const char *model, QuantOpts *o)
{
	memset(o, 0, sizeof *o);
	const char *mode = sec_get(sec, "quantize");
	if (!mode) {
		const KV *k = NULL;
		for (size_t i = 0; i < sec->nkv && !k; i++)
			if (!strncmp(sec->kv[i].key, "quantize.", 9))
				k = &sec->kv[i];
		return error("%s:%d: model '%s' sets %s but not quantize = static | dynamic | fp16", k->file, k->line,
			     model, k->key);
	}
	o->mode = !strcmp(mode, "dynamic") ? QMODE_DYNAMIC : !strcmp(mode, "fp16") ? QMODE_FP16 : QMODE_STATIC;
	const char *fmt = sec_get(sec, "quantize.format");
	o->format = o->mode == QMODE_DYNAMIC || (fmt && !strcmp(fmt, "qoperator")) ? QFMT_QOPERATOR : QFMT_QDQ;
	if (o->mode == QMODE_DYNAMIC && fmt && strcmp(fmt, "qoperator"))
		return refuse(sec, model, "quantize.format", "= qdq is not available for quantize = dynamic: use qoperator");
	static const char *const static_only[] = {"quantize.calibration", "quantize.activations", "quantize.method",
						  "quantize.percentile", "quantize.bins",
						  "quantize.symmetric-activations", "quantize.preset",
						  "quantize.transformer-float", NULL};
	static const char *const int_only[] = {"quantize.format", "quantize.weights", "quantize.per-channel",
					       "quantize.reduce-range", NULL};
	for (size_t i = 0; o->mode != QMODE_STATIC && static_only[i]; i++)
		if (sec_get(sec, static_only[i]))
			return refuse(sec, model, static_only[i], "is only used by quantize = static");
	for (size_t i = 0; o->mode == QMODE_FP16 && int_only[i]; i++)
		if (sec_get(sec, int_only[i]))
			return refuse(sec, model, int_only[i], "is not used by quantize = fp16");
	if (o->mode != QMODE_FP16 && sec_get(sec, "quantize.keep-io-types"))
		return refuse(sec, model, "quantize.keep-io-types", "is only used by quantize = fp16");
	const char *meth = stage_param_value(sec, "quantize.method");
	o->weight_type = dtype_of(stage_param_value(sec, "quantize.weights"));
	o->act_type = dtype_of(stage_param_value(sec, "quantize.activations"));
	o->act_symmetric = is_true(stage_param_value(sec, "quantize.symmetric-activations"));
	const char *pcv = stage_param_value(sec, "quantize.per-channel");
	o->per_channel = !strcmp(pcv, "auto") ? PC_AUTO : is_true(pcv) ? PC_ON : PC_OFF;
	o->reduce_range = is_true(stage_param_value(sec, "quantize.reduce-range"));
	o->method = !strcmp(meth, "percentile") ? CALIB_PERCENTILE : !strcmp(meth, "entropy") ? CALIB_ENTROPY : CALIB_MINMAX;
	o->percentile = strtod(stage_param_value(sec, "quantize.percentile"), NULL);
	const char *bins = sec_get(sec, "quantize.bins");
	o->bins = bins ? atoi(bins) : 0;
	o->target_gpu = !strcmp(stage_param_value(sec, "quantize.target"), "gpu");
	o->keep_io_types = is_true(stage_param_value(sec, "quantize.keep-io-types"));
	o->names = !strcmp(stage_param_value(sec, "quantize.names"), "compact") ? QNAMES_COMPACT : QNAMES_ORT;
	const char *pre = stage_param_value(sec, "quantize.preset");
	o->preset = !strcmp(pre, "transformer") ? QPRESET_TRANSFORMER : !strcmp(pre, "none") ? QPRESET_NONE : QPRESET_AUTO;
	if (qt_float_parts(stage_param_value(sec, "quantize.transformer-float"), &o->preset_float) < 0) {
		char *why = xasprintf("is not valid: %s", errmsg());
		refuse(sec, model, "quantize.transformer-float", why);
		free(why);
		return -1;
	}
	if ((o->mode != QMODE_STATIC || o->format != QFMT_QDQ) && sec_get(sec, "quantize.names"))
		return refuse(sec, model, "quantize.names", "is only used by quantize = static with quantize.format = qdq");
	if (o->method != CALIB_PERCENTILE && sec_get(sec, "quantize.percentile"))
		return refuse(sec, model, "quantize.percentile", "is only used by quantize.method = percentile");
	if (o->method == CALIB_PERCENTILE && !(o->percentile > 0 && o->percentile <= 100))
		return refuse(sec, model, "quantize.percentile", "is not valid: expected a number in (0, 100]");
	if (o->method == CALIB_MINMAX && bins)
		return refuse(sec, model, "quantize.bins", "is only used by quantize.method = percentile or entropy");
	if (bins && (o->bins < 2 || o->bins > CALIB_BINS || (o->bins & (o->bins - 1))))
		return refuse(sec, model, "quantize.bins", "is not valid: expected a power of two from 2 to 2048");
	if ((o->act_type == DT_INT16 || o->act_type == DT_UINT16) && o->format == QFMT_QOPERATOR)
		return refuse(sec, model, "quantize.activations",
			      "= int16/uint16 needs quantize.format = qdq (QOperator kernels are 8-bit only)");
	if (o->target_gpu && o->mode == QMODE_DYNAMIC)
		return refuse(sec, model, "quantize.target",
			      "= gpu cannot run quantize = dynamic: onnxruntime has no GPU kernels for "
			      "DynamicQuantizeLinear, MatMulInteger and ConvInteger; use quantize = fp16 or quantize = static (qdq)");
	if (o->target_gpu && o->format == QFMT_QOPERATOR)
		return refuse(sec, model, "quantize.target",
			      "= gpu cannot run quantize.format = qoperator: onnxruntime's GPU providers have no "
			      "QLinearConv/QLinearMatMul kernels; use quantize.format = qdq or quantize = fp16");
	split_words(sec_get(sec, "quantize.ops"), &o->ops);
	split_words(sec_get(sec, "quantize.exclude-ops"), &o->exclude_ops);
	split_words(sec_get(sec, "quantize.exclude-nodes"), &o->exclude_nodes);
	return 0;
}

void quant_opts_free(QuantOpts *o)
{
	pv_free_all(&o->ops);
	pv_free_all(&o->exclude_ops);
	pv_free_all(&o->exclude_nodes);
}

static const char *dtype_word(int t)
{
	return t == DT_INT8 ? "int8" : t == DT_UINT8 ? "uint8" : t == DT_INT16 ? "int16" : "uint16";
}

long long model_disk_size(const Model *m, const char *path)
{
	return file_size(path) + (long long)model_external_bytes(m);
}

long long outdir_model_size(const char *outdir)
{
	DIR *d = opendir(outdir);
	if (!d)
		return -1;
	long long n = 0;
	struct dirent *e;
	while ((e = readdir(d))) {
		size_t len = strlen(e->d_name);
		if (e->d_name[0] == '.' || (len > 5 && !strcmp(e->d_name + len - 5, ".json")))
			continue;
		char *p = path_join(outdir, e->d_name);
		long long sz = file_size(p);
		n += sz > 0 ? sz : 0;
		free(p);
	}
	closedir(d);
	return n;
}

void quant_json(StrBuf *sb, const char *model, const QuantOpts *o, const CalibStats *stats,
		const QuantReport *rep, long long before, long long after)
{
	static const char *const modes[] = {"static", "dynamic", "fp16"};
	static const char *const methods[] = {"minmax", "percentile", "entropy"};
	sb_puts(sb, "{\n  \"model\": ");
	sb_json_str(sb, model);
	sb_printf(sb, ",\n  \"mode\": \"%s\"", modes[o->mode]);
	if (o->mode != QMODE_FP16)
		sb_printf(sb, ",\n  \"format\": \"%s\",\n  \"weights\": \"%s\"",
			  o->format == QFMT_QOPERATOR ? "qoperator" : "qdq", dtype_word(o->weight_type));
	if (o->mode == QMODE_STATIC) {
		sb_printf(sb, ",\n  \"activations\": \"%s\",\n  \"symmetric_activations\": %s,\n  \"method\": \"%s\"",
			  dtype_word(o->act_type), o->act_symmetric ? "true" : "false", methods[o->method]);
		if (o->method == CALIB_PERCENTILE)
			sb_printf(sb, ",\n  \"percentile\": %.17g", o->percentile);
		if (o->method != CALIB_MINMAX)
			sb_printf(sb, ",\n  \"bins\": %d", o->bins ? o->bins : CALIB_BINS);
		if (stats)
			sb_printf(sb, ",\n  \"calibration_samples\": %llu", (unsigned long long)stats->nsamples);
		if (o->format == QFMT_QDQ)
			sb_printf(sb, ",\n  \"names\": \"%s\"", o->names == QNAMES_COMPACT ? "compact" : "onnxruntime");
		static const char *const presets[] = {"auto", "transformer", "none"};
		sb_printf(sb, ",\n  \"preset\": {\"asked\": \"%s\", \"applied\": %s", presets[o->preset],
			  rep->preset_graphs ? "true" : "false");
		if (rep->preset_graphs)
			sb_printf(sb, ", \"kept_float\": {\"layernorm\": %zu, \"residual_add\": %zu, \"softmax\": %zu, "
				  "\"mask_add\": %zu}", rep->preset_ln, rep->preset_residual, rep->preset_softmax,
				  rep->preset_mask);
		else if (o->preset != QPRESET_NONE)
			sb_puts(sb, ", \"why\": \"no graph holds a Softmax and a LayerNorm (fused or decomposed)\"");
		sb_printf(sb, "},\n  \"sentinel_ranges\": %zu", rep->nsentinel);
	}
	if (o->mode != QMODE_FP16)
		sb_printf(sb, ",\n  \"per_channel\": %s,\n  \"reduce_range\": %s",
			  o->per_channel == PC_AUTO ? "\"auto\"" : o->per_channel ? "true" : "false",
			  o->reduce_range ? "true" : "false");
	/* the lists (a node per entry) by sb_add: through printf's %s they
	 * were measured, then copied, a character at a time */
	if (rep->auto_pc.len) {
		sb_puts(sb, ",\n  \"per_channel_auto\": [\n    ");
		sb_add(sb, rep->auto_pc.buf, rep->auto_pc.len);
		sb_puts(sb, "\n  ]");
	} else {
		sb_printf(sb, ",\n  \"keep_io_types\": %s", o->keep_io_types ? "true" : "false");
	}
	sb_printf(sb, ",\n  \"target\": \"%s\"", o->target_gpu ? "gpu" : "cpu");
	sb_printf(sb, ",\n  \"size_before\": %lld,\n  \"size_after\": %lld", before, after);
	sb_printf(sb, ",\n  \"nodes_quantized\": %zu,\n  \"nodes_folded\": %zu,\n  \"nodes_skipped\": %zu",
		  rep->nquantized, rep->nfolded, rep->nskipped);
	sb_puts(sb, ",\n  \"nodes\": [\n    ");
	if (rep->nodes.len)
		sb_add(sb, rep->nodes.buf, rep->nodes.len);
	sb_puts(sb, "\n  ]");
	sb_puts(sb, ",\n  \"tensors\": {\n    ");
	if (rep->tensors.len)
		sb_add(sb, rep->tensors.buf, rep->tensors.len);
	sb_puts(sb, "\n  }\n}\n");
}

static int run(StageCtx *c)
{
	QuantOpts o;
	Model *m = NULL;
	CalibStats *stats = NULL;
	QuantReport rep = {0};
	long long before = 0, after = 0;
	int r = quant_opts_read(c->sec, c->model, &o);
	o.save_next = 1;
	/* quantizing changes the model: its save never writes the input's bytes */
	if (r == 0 && (r = model_load_rewrite(c->input, &m)) == 0)
		before = model_disk_size(m, c->input);
	if (r == 0 && o.mode == QMODE_STATIC) {
		r = calibrate_stats_load(c, "static quantization", &stats);
	}
	if (r == 0)
		r = quant_model(m, stats, &o, &rep);
	if (r == 0)
		r = model_save(m, c->output, NULL);
	if (r == 0) {
		StrBuf sb = {0};
		after = outdir_model_size(c->outdir);
		quant_json(&sb, c->model, &o, stats, &rep, before, after);
		char *p = path_join(c->outdir, "quant.json");
		r = write_file_atomic(p, sb.buf, sb.len);
		free(p);
		sb_release(&sb);
		fprintf(c->log, "quantize: %s: %s, %zu nodes quantized, %zu folded, %zu skipped, %lld -> %lld bytes",
			c->model, sec_get(c->sec, "quantize"), rep.nquantized, rep.nfolded, rep.nskipped, before, after);
		if (o.mode == QMODE_STATIC && rep.preset_graphs)
			fprintf(c->log, ", transformer preset (%zu LayerNorms, %zu residual Adds, %zu Softmax inputs float)",
				rep.preset_ln, rep.preset_residual, rep.preset_softmax);
		else if (o.mode == QMODE_STATIC && o.preset == QPRESET_TRANSFORMER)
			fprintf(c->log, ", quantize.preset = transformer changed nothing: no Softmax and LayerNorm in the graph");
		if (rep.nsentinel)
			fprintf(c->log, ", %zu range%s taken past sentinel values", rep.nsentinel, rep.nsentinel > 1 ? "s" : "");
		if (rep.nauto_pc)
			fprintf(c->log, ", %zu weight%s per channel (auto)", rep.nauto_pc, rep.nauto_pc > 1 ? "s" : "");
		fputc('\n', c->log);
	}
	quant_report_free(&rep);
	calib_free(stats);
	model_free(m);
	quant_opts_free(&o);
	return r;
}

const Stage stage_quantize = {
	.name = "quantize",
	.version = 10,  /* 3: com.microsoft QLinear operators; 4: Constant weights hoisted; 5: DynamicQuantizeLSTM; 6: functions expanded;
			   7: decomposed normalizations and Gelus kept float; 8: quantize.names, stale value_info dropped,
			   tensor names in quant.json; 9: data movement quantized only in a quantized chain,
			   quantize.per-channel = auto; 10: sentinel ranges, Softmax outputs over [0, 1],
			   quantize.preset */
	.params = params,
	.wanted = wanted,
	.declared_inputs = NULL,
	.run = run,
	.side_of = "calibrate",
};
