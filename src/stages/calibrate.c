/* calibrate.c — the calibrate stage (quantize = static): streams the
 * calibration samples through the interpreter and writes their statistics
 * (src/quant/calib.h) to calibration.stats beside an unchanged copy of the
 * model. Its key holds only the model and the contents of the calibration
 * files, so changing how to quantize (types, format, exclusions, method)
 * reuses the statistics and reruns only the quantize stage. */
#include <dirent.h>
#include <glob.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "quant/calib.h"
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

static void split_words(const char *v, PtrVec *out)
{
	for (const char *s = v; *s;) {
		while (*s == ' ' || *s == '\t' || *s == ',')
			s++;
		const char *e = s;
		while (*e && *e != ' ' && *e != '\t' && *e != ',')
			e++;
		if (e > s)
			pv_push(out, xstrndup(s, (size_t)(e - s)));
		s = e;
	}
}

/* the files samples_open() reads from directory rel (project-relative):
 * its regular files and those of its test_data_set_* subdirectories */
static void walk(const char *root, const char *rel, int depth, PtrVec *files)
{
	char *full = path_join(root, rel);
	DIR *d = opendir(full);
	free(full);
	if (!d)
		return;
	struct dirent *e;
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		char *r = path_join(rel, e->d_name), *f = path_join(root, r);
		struct stat st;
		int ok = stat(f, &st) == 0;
		if (ok && S_ISDIR(st.st_mode) && depth == 0 && !strncmp(e->d_name, "test_data_set", 13))
			walk(root, r, 1, files);
		else if (ok && S_ISREG(st.st_mode))
			pv_push(files, xstrdup(r));
		free(r);
		free(f);
	}
	closedir(d);
}

static int declared_inputs(const Section *sec, const char *root, PtrVec *files)
{
	const char *v = sec_get(sec, "quantize.calibration");
	if (!v) {
		const KV *kv = sec_find(sec, "quantize");
		return error("%s:%d: model '%s': quantize = static needs quantize.calibration (calibration samples)",
			     kv->file, kv->line, sec->name);
	}
	const KV *kv = sec_find(sec, "quantize.calibration");
	PtrVec specs = {0};
	split_words(v, &specs);
	int r = 0;
	size_t skip = strlen(root) + 1;
	for (size_t i = 0; i < specs.n; i++) {
		const char *s = specs.v[i];
		if (r == 0 && (s[0] == '/' || !strncmp(s, "../", 3) || strstr(s, "/../")))
			r = error("%s:%d: model '%s': quantize.calibration '%s' leaves the project", kv->file, kv->line,
				  sec->name, s);
		size_t before = files->n;
		if (r == 0) {
			char *full = path_join(root, s);
			glob_t g;
			if (glob(full, 0, NULL, &g) == 0) {
				for (size_t k = 0; k < g.gl_pathc; k++) {
					struct stat st;
					const char *rel = g.gl_pathv[k] + skip;
					int ok = stat(g.gl_pathv[k], &st) == 0;
					if (ok && S_ISDIR(st.st_mode))
						walk(root, rel, 0, files);
					else if (ok && S_ISREG(st.st_mode))
						pv_push(files, xstrdup(rel));
				}
				globfree(&g);
			}
			free(full);
			if (files->n == before)
				r = error("%s:%d: model '%s': quantize.calibration '%s' matches no file: the calibration set is empty",
					  kv->file, kv->line, sec->name, s);
		}
		free(specs.v[i]);
	}
	pv_free(&specs);
	return r;
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
	int r = model_load(c->input, &m);
	CalibStats *s = NULL;
	if (r == 0) {
		r = calib_collect(m, (const char *const *)specs.v, specs.n, 1, c->log, &s);
		if (r == 0) {
			char *p = path_join(c->outdir, "calibration.stats");
			r = calib_save(s, p);
			free(p);
		}
		/* the model itself passes unchanged (same bytes, one cache object) */
		if (r == 0)
			r = model_save(m, c->output, NULL);
		calib_free(s);
		model_free(m);
	}
	for (size_t i = 0; i < specs.n; i++)
		free(specs.v[i]);
	pv_free(&specs);
	return r;
}

const Stage stage_calibrate = {
	.name = "calibrate",
	.version = 2,
	.params = params,
	.wanted = wanted,
	.declared_inputs = declared_inputs,
	.run = run,
};
