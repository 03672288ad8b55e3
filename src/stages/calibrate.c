/* calibrate.c — the calibrate stage (quantize = static): streams the
 * calibration samples through the interpreter and writes their statistics
 * (src/quant/calib.h; tensors of If/Loop/Scan bodies included) to
 * calibration.stats beside an unchanged copy of the model, with the
 * interpreter on the stage's thread budget (samples are stacked into
 * batches where the model allows, see src/quant/calib.c). Its key holds
 * the model, the contents of the calibration files and whether
 * quantize.method needs histograms (percentile, entropy; minmax does not,
 * and skipping them saves a third of a conv net's calibration), so
 * changing how to quantize (types, format, exclusions, bins, percentile or
 * entropy) reuses the statistics and reruns only the quantize stage, and
 * going from minmax to another method calibrates again. */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "quant/calib.h"
#include "quant/quantize.h"
#include "rules/rules.h"
#include "stages/stage.h"

static const StageParam params[] = {
	{"quantize.calibration", PARAM_LIST, NULL, NULL, 0,
	 "calibration samples (quantize = static): .npy/.npz/.pb files, test_data_set directories, directories, globs"},
	{NULL, 0, NULL, NULL, 0, NULL},
};

static int wanted(const Section *sec)
{
	const char *q = sec_get(sec, "quantize");
	return q && !strcmp(q, "static");
}

static int declared_inputs(const Section *sec, const char *root, PtrVec *files)
{
	if (!sec_get(sec, "quantize.calibration")) {
		const KV *kv = sec_find(sec, "quantize");
		return error("%s:%d: model '%s': quantize = static needs quantize.calibration (calibration samples)",
			     kv->file, kv->line, sec->name);
	}
	return stage_expand_samples(sec, "quantize.calibration", root, ": the calibration set is empty", files);
}

/* do the statistics need histograms: quantize.method is not minmax */
static int needs_hist(const Section *sec)
{
	const char *m = stage_param_value(sec, "quantize.method");
	return m && strcmp(m, "minmax");
}

static void key_extra(const Section *sec, StrBuf *key)
{
	sb_puts(key, needs_hist(sec) ? "histograms yes\n" : "histograms no\n");
}

static int run(StageCtx *c)
{
	const char *v = sec_get(c->sec, "quantize.calibration");
	if (!v)
		return error("model '%s': quantize = static needs quantize.calibration", c->model);
	PtrVec specs = {0};
	split_words(v, &specs);
	for (size_t i = 0; i < specs.n; i++) {
		char *full = path_join(c->root, specs.v[i]);
		free(specs.v[i]);
		specs.v[i] = full;
	}
	Model *m;
	/* saved only when it has external data to carry along */
	int r = model_load_rewrite(c->input, &m);
	CalibStats *s = NULL;
	if (r == 0) {
		/* the model itself passes unchanged (same bytes, one cache object):
		 * a link to the input (a verified object the store recognizes
		 * without reading it again), saved again only when it has external
		 * data to carry along or the link fails. Calibration runs on it
		 * with its functions expanded as the quantizer will expand them, so
		 * the statistics carry the names it looks for */
		if (model_external_bytes(m) || link(c->input, c->output) < 0)
			r = model_save(m, c->output, NULL);
		if (r == 0 && quant_expand_functions(m) < 0)
			r = -1;
		if (r == 0)
			r = calib_collect(m, (const char *const *)specs.v, specs.n, c->threads, needs_hist(c->sec),
				  c->log, &s);
		if (r == 0)
			r = calib_check(s, m, c->log);
		if (r == 0) {
			char *p = path_join(c->outdir, "calibration.stats");
			r = calib_save(s, p);
			free(p);
		}
		calib_free(s);
		model_free(m);
	}
	for (size_t i = 0; i < specs.n; i++)
		free(specs.v[i]);
	pv_free(&specs);
	return r;
}

int calibrate_stats_load(const StageCtx *c, const char *stage_name, CalibStats **out)
{
	*out = NULL;
	if (!c->side)
		return error("model '%s': %s needs the calibrate stage's statistics, and the model has no calibrate stage",
			     c->model, stage_name);
	char *p = path_join(c->side, "calibration.stats");
	int r = calib_load(p, out);
	if (r < 0)
		error_prefix("%s needs the calibrate stage's statistics", stage_name);
	free(p);
	return r;
}

const Stage stage_calibrate = {
	.name = "calibrate",
	.version = 8, /* 4: statistics of subgraph tensors; 5: no histograms for minmax; 6: inside functions;
		       * 7: batches of a multiple of 4 samples; 8: statistics of models like silero-vad
		       * (a batch on another axis than the first, a shared scalar input) come from batches,
		       * and so do those of the probe's first batch (4 samples run alone to check it) */
	.params = params,
	.wanted = wanted,
	.declared_inputs = declared_inputs,
	.run = run,
	.key_extra = key_extra,
	.off_chain = 1,
};
