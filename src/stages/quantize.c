/* quantize.c — the quantize stage: static (QDQ, from the statistics the
 * calibrate stage wrote beside the input model) or dynamic (QOperator)
 * quantization, or float16 conversion, by src/quant, plus quant.json beside the model: sizes, every
 * node quantized or skipped with the reason, scales and zero points. A model
 * that cannot be quantized is an error, never a copy of its input. */
#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ops/op.h"
#include "preprocess/opset.h"
#include "rules/rules.h"
#include "stages/quantize.h"
#include "stages/stage.h"

static const StageParam params[] = {
	{"quantize", PARAM_ENUM, "static|dynamic|fp16|weight-only", NULL, 1,
	 "static: activations from calibration; dynamic: weights offline, activations at run time; fp16: float16 weights and computation; weight-only: blockwise 4/8-bit weights, float activations (decoders)"},
	{"quantize.format", PARAM_ENUM, "qdq|qoperator|matmulnbits", NULL, 1,
	 "static: qdq (default) or qoperator (QLinearConv, QLinearMatMul...); dynamic: qoperator only; weight-only: matmulnbits (default, com.microsoft MatMulNBits) or qdq (opset-21 blockwise DequantizeLinear)"},
	{"quantize.bits", PARAM_ENUM, "4|8", "4", 1, "weight-only: bits of a weight code"},
	{"quantize.block-size", PARAM_INT, NULL, "32", 1,
	 "weight-only: weights per scale along the reduction axis K (a power of two, 16 to 256)"},
	{"quantize.symmetric", PARAM_BOOL, NULL, "false", 1,
	 "weight-only: symmetric weights (no zero points; scale max|w| / (2^(bits-1) - 1))"},
	{"quantize.algorithm", PARAM_ENUM, "rtn|hqq", "rtn", 1,
	 "weight-only: rtn (round to nearest) or hqq (half-quadratic zero-point optimization; asymmetric only)"},
	{"quantize.lm-head-bits", PARAM_ENUM, "4|8|float", "8", 1,
	 "weight-only: bits of lm_head, the MatMul or Gemm whose output is the logits"},
	{"quantize.embedding-bits", PARAM_ENUM, "4|8|float", "8", 1,
	 "weight-only: an embedding Gather's table: com.microsoft GatherBlockQuantized at 4 or 8 bits (qdq: int8 rows through DequantizeLinear), or float"},
	{"quantize.node-bits", PARAM_LIST, NULL, NULL, 1,
	 "weight-only: NODE=BITS entries (BITS 4, 8 or float) overriding the bits of the named nodes"},
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
	{"quantize.ops", PARAM_LIST, NULL, NULL, 1,
	 "op types to quantize (default: every supported one); ONNX operator names, checked when the rules are read"},
	{"quantize.exclude-ops", PARAM_LIST, NULL, NULL, 1,
	 "op types left in float (fp16: left in float32); ONNX operator names, checked when the rules are read"},
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

/* quantize.block-size and quantize.node-bits when the rule file is read */
static int check_wo_param(const char *key, const char *value)
{
	if (!strcmp(key, "quantize.block-size")) {
		long v = strtol(value, NULL, 10);
		if (v < 16 || v > 256 || (v & (v - 1)))
			return error("quantize.block-size = '%s' is not valid: expected a power of two from 16 to 256", value);
	} else if (!strcmp(key, "quantize.node-bits")) {
		PtrVec w = {0};
		split_words(value, &w);
		int r = 0;
		for (size_t i = 0; i < w.n && r == 0; i++) {
			const char *e = w.v[i], *eq = strrchr(e, '=');
			if (!eq || eq == e || (strcmp(eq + 1, "4") && strcmp(eq + 1, "8") && strcmp(eq + 1, "float")))
				r = error("quantize.node-bits entry '%s' is not valid: expected NODE=4, NODE=8 or NODE=float", e);
		}
		pv_free_all(&w);
		return r;
	}
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

/* is name an operator: ONNX's (every opset) or one the interpreter runs
 * (com.microsoft's QLinear and fused operators)? */
static int known_op(const char *name)
{
	for (size_t i = 0; i < opset_table_len; i++)
		if (!strcmp(opset_table[i].op, name))
			return 1;
	for (size_t i = 0; i < op_registry_len; i++)
		if (!strcmp(op_registry[i]->name, name))
			return 1;
	return 0;
}

/* the operator spelled like name but for case, else the nearest one */
static const char *near_op(const char *name)
{
	const char **cands = xcalloc(opset_table_len + op_registry_len, sizeof *cands);
	size_t n = 0;
	const char *hit = NULL;
	for (size_t i = 0; i < opset_table_len; i++)
		cands[n++] = opset_table[i].op;
	for (size_t i = 0; i < op_registry_len; i++)
		cands[n++] = op_registry[i]->name;
	for (size_t i = 0; i < n && !hit; i++)
		if (!strcasecmp(cands[i], name))
			hit = cands[i];
	if (!hit)
		hit = closest(name, cands, n);
	free(cands);
	return hit;
}

static int check_param(const char *key, const char *value)
{
	if (check_wo_param(key, value) < 0)
		return -1;
	if (strcmp(key, "quantize.ops") && strcmp(key, "quantize.exclude-ops"))
		return 0;
	PtrVec w = {0};
	split_words(value, &w);
	int r = 0;
	for (size_t i = 0; r == 0 && i < w.n; i++) {
		const char *op = w.v[i];
		if (known_op(op))
			continue;
		const char *near = near_op(op);
		r = near ? error("%s: '%s' is not an operator (did you mean '%s'?)", key, op, near)
			 : error("%s: '%s' is not an operator: expected ONNX operator names as in the model (Conv, MatMul, Gemm...)",
				 key, op);
	}
	pv_free_all(&w);
	return r;
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
		return error("%s:%d: model '%s' sets %s but not quantize = static | dynamic | fp16 | weight-only", k->file,
			     k->line, model, k->key);
	}
	o->mode = !strcmp(mode, "dynamic") ? QMODE_DYNAMIC : !strcmp(mode, "fp16") ? QMODE_FP16 :
		  !strcmp(mode, "weight-only") ? QMODE_WEIGHT_ONLY : QMODE_STATIC;
	const char *fmt = sec_get(sec, "quantize.format");
	o->format = o->mode == QMODE_DYNAMIC || (fmt && !strcmp(fmt, "qoperator")) ? QFMT_QOPERATOR : QFMT_QDQ;
	if (o->mode == QMODE_DYNAMIC && fmt && strcmp(fmt, "qoperator"))
		return refuse(sec, model, "quantize.format", "= qdq is not available for quantize = dynamic: use qoperator");
	if (o->mode != QMODE_WEIGHT_ONLY && fmt && !strcmp(fmt, "matmulnbits"))
		return refuse(sec, model, "quantize.format", "= matmulnbits is only used by quantize = weight-only");
	if (o->mode == QMODE_WEIGHT_ONLY) {
		if (fmt && !strcmp(fmt, "qoperator"))
			return refuse(sec, model, "quantize.format",
				      "= qoperator is not available for quantize = weight-only: use matmulnbits or qdq");
		o->format = fmt && !strcmp(fmt, "qdq") ? QFMT_QDQ : QFMT_MATMULNBITS;
		const char *lm = stage_param_value(sec, "quantize.lm-head-bits");
		o->wo_bits = atoi(stage_param_value(sec, "quantize.bits"));
		o->wo_lm_head_bits = !strcmp(lm, "float") ? 0 : atoi(lm);
		const char *eb = stage_param_value(sec, "quantize.embedding-bits");
		o->wo_embed_bits = !strcmp(eb, "float") ? 0 : atoi(eb);
		if (o->format == QFMT_QDQ && o->wo_embed_bits == 4)
			return refuse(sec, model, "quantize.embedding-bits",
				      "= 4 needs quantize.format = matmulnbits (GatherBlockQuantized); qdq embeddings are int8 rows");
		o->wo_block = atoi(stage_param_value(sec, "quantize.block-size"));
		o->wo_symmetric = is_true(stage_param_value(sec, "quantize.symmetric"));
		o->wo_algorithm = !strcmp(stage_param_value(sec, "quantize.algorithm"), "hqq") ? WO_HQQ : WO_RTN;
		if (o->wo_algorithm == WO_HQQ && o->wo_symmetric)
			return refuse(sec, model, "quantize.symmetric",
				      "= true does not go with quantize.algorithm = hqq, which optimizes the zero points: set it to false");
		static const char *const not_wo[] = {"quantize.weights", "quantize.per-channel", "quantize.reduce-range",
						     "quantize.target", NULL};
		for (size_t i = 0; not_wo[i]; i++)
			if (sec_get(sec, not_wo[i]))
				return refuse(sec, model, not_wo[i], "is not used by quantize = weight-only");
	} else {
		static const char *const wo_only[] = {"quantize.bits", "quantize.block-size", "quantize.symmetric",
						      "quantize.algorithm", "quantize.lm-head-bits",
						      "quantize.embedding-bits", "quantize.node-bits", NULL};
		for (size_t i = 0; wo_only[i]; i++)
			if (sec_get(sec, wo_only[i]))
				return refuse(sec, model, wo_only[i], "is only used by quantize = weight-only");
	}
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
	split_words(sec_get(sec, "quantize.node-bits"), &o->node_bits);
	return 0;
}

void quant_opts_free(QuantOpts *o)
{
	pv_free_all(&o->ops);
	pv_free_all(&o->exclude_ops);
	pv_free_all(&o->exclude_nodes);
	pv_free_all(&o->node_bits);
}

/* the keys read together when the rule files are read, so a combination
 * that cannot work stops the build before any stage runs */
static int check_section(const Section *sec)
{
	QuantOpts o;
	int r = quant_opts_read(sec, sec->name, &o);
	if (r == 0)
		quant_opts_free(&o);
	return r;
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
	static const char *const modes[] = {"static", "dynamic", "fp16", "weight-only"};
	static const char *const methods[] = {"minmax", "percentile", "entropy"};
	sb_puts(sb, "{\n  \"model\": ");
	sb_json_str(sb, model);
	sb_printf(sb, ",\n  \"mode\": \"%s\"", modes[o->mode]);
	if (o->mode == QMODE_WEIGHT_ONLY)
		sb_printf(sb, ",\n  \"format\": \"%s\",\n  \"bits\": %d,\n  \"block_size\": %d,\n  \"symmetric\": %s,\n  \"algorithm\": \"%s\",\n  \"lm_head_bits\": %d,\n  \"embedding_bits\": %d",
			  o->format == QFMT_QDQ ? "qdq" : "matmulnbits", o->wo_bits, o->wo_block,
			  o->wo_symmetric ? "true" : "false", o->wo_algorithm == WO_HQQ ? "hqq" : "rtn", o->wo_lm_head_bits,
			  o->wo_embed_bits);
	else if (o->mode != QMODE_FP16)
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
	if (o->mode != QMODE_FP16 && o->mode != QMODE_WEIGHT_ONLY)
		sb_printf(sb, ",\n  \"per_channel\": %s,\n  \"reduce_range\": %s",
			  o->per_channel == PC_AUTO ? "\"auto\"" : o->per_channel ? "true" : "false",
			  o->reduce_range ? "true" : "false");
	/* the lists (a node per entry) by sb_add: through printf's %s they
	 * were measured, then copied, a character at a time */
	if (rep->auto_pc.len) {
		sb_puts(sb, ",\n  \"per_channel_auto\": [\n    ");
		sb_add(sb, rep->auto_pc.buf, rep->auto_pc.len);
		sb_puts(sb, "\n  ]");
	} else if (o->mode != QMODE_WEIGHT_ONLY) {
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

/* graph inputs (initializers aside) and outputs of type t */
static size_t io_of_type(const Onnx__GraphProto *g, int t, size_t *nout)
{
	size_t n = 0;
	*nout = 0;
	for (size_t i = 0; i < g->n_input; i++) {
		const Onnx__ValueInfoProto *v = g->input[i];
		int init = 0;
		for (size_t k = 0; k < g->n_initializer && !init; k++)
			init = !strcmp(g->initializer[k]->name, v->name);
		if (!init && v->type && v->type->tensor_type && v->type->tensor_type->elem_type == t)
			n++;
	}
	for (size_t i = 0; i < g->n_output; i++) {
		const Onnx__ValueInfoProto *v = g->output[i];
		if (v->type && v->type->tensor_type && v->type->tensor_type->elem_type == t)
			(*nout)++;
	}
	return n;
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
	o.threads = c->threads;
	/* quantizing changes the model: its save never writes the input's bytes */
	if (r == 0 && (r = model_load_rewrite(c->input, &m)) == 0)
		before = model_disk_size(m, c->input);
	if (r == 0 && o.mode == QMODE_STATIC) {
		r = calibrate_stats_load(c, "static quantization", &stats);
	}
	int64_t opset = r == 0 ? model_opset(m->proto, "") : 0;
	if (r == 0 && o.mode == QMODE_DYNAMIC && opset < 11) {
		char *w = where(c->sec, "quantize");
		r = error("%smodel '%s': quantize = dynamic needs opset >= 11 (DynamicQuantizeLinear) and the model imports opset %lld: add preprocess.opset = 13 to convert it first",
			  w, c->model, (long long)opset);
		free(w);
	}
	/* weight-only keeps a model with external data so: its quantized
	 * weights (made as they are written) go to the data file too */
	int ext = r == 0 && o.mode == QMODE_WEIGHT_ONLY && model_external_bytes(m) > 0;
	if (r == 0)
		r = quant_model(m, stats, &o, &rep);
	if (r == 0)
		r = model_save(m, c->output, ext ? &(SaveOpts){.external_threshold = 1024} : NULL);
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
		size_t nout, nin = io_of_type(m->proto->graph, DT_FLOAT16, &nout);
		if (o.mode == QMODE_FP16 && o.keep_io_types)
			fprintf(c->log, "quantize: %s: fp16: inputs and outputs stay float32 (quantize.keep-io-types)\n",
				c->model);
		else if (o.mode == QMODE_FP16 && (nin || nout))
			fprintf(c->log, "quantize: %s: fp16: %zu input%s and %zu output%s are float16 now: callers feed and read float16 (quantize.keep-io-types = true keeps them float32)\n",
				c->model, nin, nin == 1 ? "" : "s", nout, nout == 1 ? "" : "s");
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
	.check_param = check_param,
	.check_section = check_section,
};
