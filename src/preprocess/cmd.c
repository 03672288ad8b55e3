/* cmd.c — quantmake preprocess: the preprocess stage's work on one model,
 * outside a project and its cache (what bench/preprocess.py times against
 * onnx-simplifier and onnxruntime's optimizer on the same file).
 *
 *   quantmake preprocess IN OUT [--passes LIST] [--opset N] [--fold-limit SIZE] [--no-infer]
 *
 * As a build does it: types and shapes inferred first (the infer-shapes
 * stage; --no-infer skips it), the opset upgrade, the passes, inference of
 * the result, an atomic save (temp file, rename). The stage's log lines go to stderr. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "infer/infer.h"
#include "preprocess/opset.h"
#include "preprocess/passes.h"
#include "util.h"

static int usage(void)
{
	fprintf(stderr, "usage: quantmake preprocess IN OUT [--passes default|PASS,...] [--opset N] [--fold-limit SIZE]"
			" [--no-infer]\n");
	return 2;
}

int cmd_preprocess(int argc, char **argv)
{
	const char *in = NULL, *out = NULL, *spec = "default";
	PrepOpts o = {0};
	int infer = 1;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if ((!strcmp(a, "--passes") || !strcmp(a, "--opset") || !strcmp(a, "--fold-limit")) && i + 1 >= argc) {
			fprintf(stderr, "%s: preprocess: %s needs a value\n", argv0, a);
			return usage();
		}
		if (!strcmp(a, "--passes")) {
			spec = argv[++i];
		} else if (!strcmp(a, "--opset")) {
			char *end;
			const char *v = argv[++i];
			long long n = strtoll(v, &end, 10);
			if (end == v || *end || n < OPSET_MIN_TARGET || n > OPSET_MAX_TARGET) {
				fprintf(stderr, "%s: preprocess: --opset '%s' is not valid: expected an opset from %d to %d\n",
					argv0, v, OPSET_MIN_TARGET, OPSET_MAX_TARGET);
				return 2;
			}
			o.opset = n;
		} else if (!strcmp(a, "--fold-limit")) {
			int64_t lim = parse_size(argv[++i]);
			if (lim <= 0) {
				fprintf(stderr, "%s: preprocess: --fold-limit '%s' is not valid: expected a size such as 64K or 16M\n",
					argv0, argv[i]);
				return 2;
			}
			o.fold_limit = (size_t)lim;
		} else if (!strcmp(a, "--no-infer")) {
			infer = 0;
		} else if (a[0] == '-' && a[1]) {
			fprintf(stderr, "%s: preprocess: unknown option '%s'\n", argv0, a);
			return usage();
		} else if (!in) {
			in = a;
		} else if (!out) {
			out = a;
		} else {
			fprintf(stderr, "%s: preprocess: unexpected argument '%s'\n", argv0, a);
			return usage();
		}
	}
	if (!in || !out)
		return usage();
	if (prep_parse(spec, &o) < 0) {
		fprintf(stderr, "%s: %s\n", argv0, errmsg());
		return 2;
	}
	o.log = stderr;
	Model *m;
	if (model_load(in, &m) < 0) {
		fprintf(stderr, "%s: %s\n", argv0, errmsg());
		return 2;
	}
	InferOpts io = {.mode = INFER_MERGE};
	int r = infer ? infer_model(m, &io, NULL) : 0;
	if (r < 0)
		error_prefix("preprocess: shape inference of %s", in);
	int typed = m->proto->graph && m->proto->graph->n_value_info > 0;
	PrepReport rep;
	if (r == 0)
		r = prep_run(m, &o, &rep);
	if (r == 0 && typed && (r = infer_model(m, &io, NULL)) < 0)
		error_prefix("preprocess: shape inference of the simplified model");
	if (r == 0) {
		if (o.opset)
			fprintf(stderr, "preprocess: opset %lld -> %lld, %zu nodes converted\n", (long long)rep.opset_from,
				(long long)rep.opset_to, rep.opset_changed);
		fprintf(stderr, "preprocess: %zu -> %zu nodes, %zu -> %zu initializers in %zu rounds\n", rep.nodes_before,
			rep.nodes_after, rep.inits_before, rep.inits_after, rep.rounds);
		SaveOpts so = {0};
		r = model_save(m, out, &so);
	}
	model_free(m);
	if (r < 0) {
		fprintf(stderr, "%s: %s\n", argv0, errmsg());
		return 1;
	}
	return 0;
}
