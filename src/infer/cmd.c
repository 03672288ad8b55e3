/* cmd.c — quantmake infer-shapes: run the inference pass on one model, or
 * check it against the annotations of many (the conformance harness).
 *
 *   quantmake infer-shapes IN OUT [--strict] [--no-const] [--trace]
 *   quantmake infer-shapes --check-against-declared [--skip FILE] MODEL...
 *
 * The check mode prints one line per model, "PASS: LABEL", "FAIL: LABEL:
 * why" or "SKIP: LABEL: reason", where LABEL is "DIR/TEST" for a path
 * ending in DIR/TEST/model.onnx (the layout of ONNX's test data) and the
 * path otherwise. A skip file holds "LABEL reason..." lines ('#' comments);
 * skipped models are still checked, and one that passes is a failure (the
 * entry is stale). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "infer/infer.h"
#include "util.h"

static void usage(void)
{
	fprintf(stderr, "usage: quantmake infer-shapes IN OUT [--strict] [--no-const] [--trace]\n"
			"       quantmake infer-shapes --check-against-declared [--skip FILE] MODEL...\n");
}

/* "DIR/TEST" for ".../DIR/TEST/model.onnx", else the path; malloc'd */
static char *model_label(const char *path)
{
	const char *end = path + strlen(path);
	const char *base = strrchr(path, '/');
	if (!base || strcmp(base + 1, "model.onnx"))
		return xstrdup(path);
	end = base;
	int slashes = 0;
	const char *p = end;
	while (p > path) {
		p--;
		if (*p == '/' && ++slashes == 2) {
			p++;
			break;
		}
	}
	return xstrndup(p, (size_t)(end - p));
}

typedef struct Skip {
	char *label, *reason;
} Skip;

static int read_skips(const char *path, Skip **out, size_t *n)
{
	char *data, *save = NULL;
	size_t len;
	if (read_file(path, &data, &len) < 0)
		return -1;
	int lineno = 0;
	for (char *line = strtok_r(data, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		lineno++;
		line += strspn(line, " \t");
		if (!*line || *line == '#')
			continue;
		size_t k = strcspn(line, " \t");
		char *reason = line + k;
		reason += strspn(reason, " \t");
		if (!*reason) {
			free(data);
			return error("%s: entry '%.*s' has no reason", path, (int)k, line);
		}
		*out = xreallocarray(*out, *n + 1, sizeof **out);
		(*out)[*n].label = xstrndup(line, k);
		(*out)[*n].reason = xstrdup(reason);
		(*n)++;
	}
	free(data);
	return 0;
}

static int check_many(int argc, char **argv, const InferOpts *o)
{
	Skip *skips = NULL;
	size_t nskip = 0;
	int i = 0, fails = 0;
	if (i + 1 < argc && !strcmp(argv[i], "--skip")) {
		if (read_skips(argv[i + 1], &skips, &nskip) < 0) {
			fprintf(stderr, "%s: %s\n", argv0, errmsg());
			return 2;
		}
		i += 2;
	}
	for (; i < argc; i++) {
		char *label = model_label(argv[i]);
		const Skip *sk = NULL;
		for (size_t k = 0; k < nskip; k++)
			if (!strcmp(skips[k].label, label))
				sk = &skips[k];
		Model *m;
		StrBuf why = {0};
		if (model_load(argv[i], &m) < 0) {
			printf("FAIL: %s: %s\n", label, errmsg());
			fails++;
			free(label);
			continue;
		}
		int r = infer_check_declared(m, o, &why);
		if (sk && r == 1) {
			/* a stale entry hides nothing but must not linger */
			printf("FAIL: %s: passes but is listed in the skip file (remove the entry)\n", label);
			fails++;
		} else if (sk)
			printf("SKIP: %s: %s\n", label, sk->reason);
		else if (r == 1)
			printf("PASS: %s\n", label);
		else {
			printf("FAIL: %s: %s%s\n", label, r < 0 ? "inference failed: " : "",
			       why.buf ? why.buf : "");
			fails++;
		}
		fflush(stdout);
		sb_release(&why);
		model_free(m);
		free(label);
	}
	for (size_t k = 0; k < nskip; k++) {
		free(skips[k].label);
		free(skips[k].reason);
	}
	free(skips);
	return fails ? 1 : 0;
}

int cmd_infer_shapes(int argc, char **argv)
{
	InferOpts o = {0};
	const char *in = NULL, *out = NULL;
	int check = 0;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--strict"))
			o.mode = INFER_STRICT;
		else if (!strcmp(argv[i], "--no-const"))
			o.const_limit = -1;
		else if (!strcmp(argv[i], "--trace"))
			o.trace = stderr;
		else if (!strcmp(argv[i], "--check-against-declared"))
			return check_many(argc - i - 1, argv + i + 1, &o);
		else if (argv[i][0] == '-' && argv[i][1]) {
			fprintf(stderr, "%s: infer-shapes: unknown option '%s'\n", argv0, argv[i]);
			usage();
			return 2;
		} else if (!in)
			in = argv[i];
		else if (!out)
			out = argv[i];
		else {
			usage();
			return 2;
		}
	}
	(void)check;
	if (!in || !out) {
		usage();
		return 2;
	}
	Model *m;
	if (model_load(in, &m) < 0) {
		fprintf(stderr, "%s: %s\n", argv0, errmsg());
		return 2;
	}
	InferReport r = {0};
	int rc = 0;
	double t0 = now_sec();
	if (infer_model(m, &o, &r) < 0) {
		fprintf(stderr, "%s: %s: %s\n", argv0, in, errmsg());
		rc = 1;
		goto done;
	}
	for (size_t i = 0; i < r.nmissing; i++) {
		const InferMissing *x = &r.missing[i];
		warn("%s: no shape inference for %s%s%s-%lld (node '%s'%s%zu node%s): its outputs stay "
		     "untyped", in, x->domain, *x->domain ? "." : "", x->op, (long long)x->opset,
		     x->node, ", ", x->count, x->count == 1 ? "" : "s");
	}
	double secs = now_sec() - t0;
	if (model_save(m, out, NULL) < 0) {
		fprintf(stderr, "%s: %s\n", argv0, errmsg());
		rc = 1;
		goto done;
	}
	printf("%s: %zu/%zu tensors typed, %zu with a shape, %zu constant", out, r.ntyped,
	       r.ntensors, r.nshaped, r.nconst);
	if (r.nconstfail)
		printf(", %zu kernels failed during constant propagation", r.nconstfail);
	printf("; inferred in %.4fs\n", secs);
done:
	infer_report_free(&r);
	model_free(m);
	return rc;
}
