/* convert.c — `quantmake convert IN OUT [options]`: re-save a model, moving
 * large tensors to external data or back inline (the user-facing model_save). */
#include <stdio.h>
#include <string.h>

#include "commands.h"
#include "onnx/model.h"
#include "util.h"

static const char convert_usage[] =
	"usage: quantmake convert IN OUT [--external-data NAME] [--threshold BYTES] [--inline]\n"
	"Re-save the ONNX model IN as OUT (written atomically).\n"
	"  (no option)           keep tensors where they are; external data files that\n"
	"                        IN references are rewritten beside OUT when OUT is in\n"
	"                        another directory. An unchanged model is byte-identical.\n"
	"  --external-data NAME  store initializers of at least --threshold bytes in the\n"
	"                        file NAME beside OUT (a plain file name), all other\n"
	"                        tensors inline; needed for models over 2 GiB\n"
	"  --threshold BYTES     size from which a tensor goes to external data\n"
	"                        (default 1024; suffixes K, M, G); alone, it implies\n"
	"                        --external-data OUT.data\n"
	"  --inline              read all external data back into OUT (fails if OUT\n"
	"                        would pass protobuf's 2 GiB limit)\n";

int cmd_convert(int argc, char **argv)
{
	const char *in = NULL, *out = NULL, *name = NULL;
	int64_t threshold = -1;
	int inl = 0;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
			fputs(convert_usage, stdout);
			return 0;
		} else if (!strcmp(a, "--external-data") || !strcmp(a, "--threshold")) {
			if (i + 1 >= argc) {
				fprintf(stderr, "%s: convert: %s needs a value\n%s", argv0, a, convert_usage);
				return 2;
			}
			const char *v = argv[++i];
			if (a[2] == 'e')
				name = v;
			else if ((threshold = parse_size(v)) <= 0) {
				fprintf(stderr, "%s: convert: --threshold '%s' is not a positive size (e.g. 1024, 64K, 1M)\n",
					argv0, v);
				return 2;
			}
		} else if (!strcmp(a, "--inline"))
			inl = 1;
		else if (a[0] == '-' && a[1]) {
			fprintf(stderr, "%s: convert: unknown option '%s'\n%s", argv0, a, convert_usage);
			return 2;
		} else if (!in)
			in = a;
		else if (!out)
			out = a;
		else {
			fprintf(stderr, "%s: convert: unexpected argument '%s'\n%s", argv0, a, convert_usage);
			return 2;
		}
	}
	if (!in || !out) {
		fputs(convert_usage, stderr);
		return 2;
	}
	if (inl && (name || threshold > 0)) {
		fprintf(stderr, "%s: convert: --inline cannot be combined with --external-data or --threshold\n",
			argv0);
		return 2;
	}
	SaveOpts opts = {0};
	if (name || threshold > 0) {
		opts.external_threshold = threshold > 0 ? (size_t)threshold : 1024;
		opts.external_name = name;
	}
	opts.inline_all = inl;
	Model *m;
	if (model_load(in, &m) < 0) {
		fprintf(stderr, "%s: %s\n", argv0, errmsg());
		return 2;
	}
	int r = model_save(m, out, &opts);
	if (r < 0)
		fprintf(stderr, "%s: %s\n", argv0, errmsg());
	model_free(m);
	return r < 0 ? 1 : 0;
}
