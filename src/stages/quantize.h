/* quantize.h — the quantize stage's rule keys read into QuantOpts, shared
 * with the verify stage (whose auto-exclusion re-quantizes with the same
 * options), and quant.json. */
#ifndef QM_STAGES_QUANTIZE_H
#define QM_STAGES_QUANTIZE_H

#include "quant/quantize.h"

struct Section;

/* Read and cross-check the model's quantize.* keys (the kind checks were done
 * when the rule file was read): 0, or -1 with error() naming the key and
 * what was expected. o->ops, exclude_ops, exclude_nodes are malloc'd. */
int quant_opts_read(const struct Section *sec, const char *model, QuantOpts *o);
void quant_opts_free(QuantOpts *o);

/* quant.json for a model quantized with o; before and after are the sizes on
 * disk (model file and external data); stats may be NULL (not static) */
void quant_json(StrBuf *sb, const char *model, const QuantOpts *o, const CalibStats *stats,
		const QuantReport *rep, long long before, long long after);

/* a model's size on disk: its file at path plus the external data of m,
 * the model loaded from that file */
long long model_disk_size(const Model *m, const char *path);
/* the size on disk of the model a stage wrote to outdir: every file there
 * but the JSON reports */
long long outdir_model_size(const char *outdir);

#endif
