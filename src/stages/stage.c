/* stage.c — the stage table and parameter checks (see stage.h). */
#include "stages/stage.h"

#include <dirent.h>
#include <glob.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "rules/rules.h"

const Stage *const stage_table[] = {
	&stage_export,
	&stage_infer_shapes,
	&stage_preprocess,
	&stage_calibrate,
	&stage_quantize,
	&stage_verify,
	NULL,
};

const Stage *stage_find(const char *name)
{
	for (size_t i = 0; stage_table[i]; i++)
		if (!strcmp(stage_table[i]->name, name))
			return stage_table[i];
	return NULL;
}

const StageParam *stage_param_find(const char *key, const Stage **stage)
{
	for (size_t i = 0; stage_table[i]; i++)
		for (const StageParam *p = stage_table[i]->params; p->key; p++)
			if (!strcmp(p->key, key)) {
				if (stage)
					*stage = stage_table[i];
				return p;
			}
	return NULL;
}

const char *stage_param_value(const Section *sec, const char *key)
{
	const char *v = sec_get(sec, key);
	if (v)
		return v;
	const StageParam *p = stage_param_find(key, NULL);
	return p ? p->dflt : NULL;
}

static int enum_has(const char *values, const char *v)
{
	size_t n = strlen(v);
	for (const char *s = values; s && *s;) {
		const char *e = strchr(s, '|');
		size_t l = e ? (size_t)(e - s) : strlen(s);
		if (l == n && !strncmp(s, v, n))
			return 1;
		s = e ? e + 1 : NULL;
	}
	return 0;
}

int stage_param_check(const StageParam *p, const char *value)
{
	char *end;
	switch (p->kind) {
	case PARAM_ENUM:
		if (!enum_has(p->values, value)) {
			StrBuf sb = {0};
			for (const char *s = p->values; *s; s++)
				sb_puts(&sb, *s == '|' ? ", " : (char[]){*s, 0});
			int r = error("%s = '%s' is not valid: expected one of %s", p->key, value, sb.buf);
			sb_release(&sb);
			return r;
		}
		break;
	case PARAM_INT:
		strtoll(value, &end, 10);
		if (!*value || *end)
			return error("%s = '%s' is not valid: expected an integer", p->key, value);
		break;
	case PARAM_FLOAT:
		strtod(value, &end);
		if (!*value || *end)
			return error("%s = '%s' is not valid: expected a number", p->key, value);
		break;
	case PARAM_BOOL:
		if (strcmp(value, "true") && strcmp(value, "false") && strcmp(value, "yes") &&
		    strcmp(value, "no") && strcmp(value, "on") && strcmp(value, "off"))
			return error("%s = '%s' is not valid: expected true or false", p->key, value);
		break;
	default:
		if (!*value)
			return error("%s is empty", p->key);
		break;
	}
	for (size_t i = 0; stage_table[i]; i++) {
		const Stage *st = stage_table[i];
		for (const StageParam *q = st->params; q->key; q++)
			if (q == p)
				return st->check_param ? st->check_param(p->key, value) : 0;
	}
	return 0;
}

/* the files samples_open() reads from directory rel (project-relative):
 * its regular files and those of its test_data_set_* subdirectories */
static void walk(const char *root, const char *rel, int depth, PtrVec *files, char **bad)
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
		/* the entry's type from the directory where the file system
		 * gives it (a stat per sample was a third of the calls listing
		 * a thousand samples); links and unknown types are followed */
		struct stat st;
		int type = e->d_type == DT_REG ? S_IFREG : e->d_type == DT_DIR ? S_IFDIR : 0;
		if (!type && stat(f, &st) == 0)
			type = (int)(st.st_mode & S_IFMT);
		/* a link (or an entry of unknown type) must lead inside the
		 * project; entries of a directory inside it are */
		if (e->d_type != DT_REG && e->d_type != DT_DIR && type && !path_resolves_inside(root, f)) {
			if (!*bad)
				*bad = xstrdup(r);
			type = 0;
		}
		if (type == S_IFDIR && depth == 0 && !strncmp(e->d_name, "test_data_set", 13))
			walk(root, r, 1, files, bad);
		else if (type == S_IFREG)
			pv_push(files, xstrdup(r));
		free(r);
		free(f);
	}
	closedir(d);
}

int stage_expand_samples(const Section *sec, const char *key, const char *root, const char *empty_hint,
			 PtrVec *files)
{
	const KV *kv = sec_find(sec, key);
	if (!kv)
		return error("%s:%d: model '%s': %s is not set", sec->file, sec->line, sec->name, key);
	PtrVec specs = {0};
	split_words(kv->value, &specs);
	int r = 0;
	size_t skip = strlen(root) + 1;
	for (size_t i = 0; r == 0 && i < specs.n; i++) {
		const char *s = specs.v[i];
		if (path_outside(s)) {
			r = error("%s:%d: model '%s': %s '%s' leaves the project", kv->file, kv->line, sec->name, key, s);
			break;
		}
		size_t before = files->n;
		char *full = path_join(root, s), *bad = NULL;
		glob_t g;
		if (glob(full, 0, NULL, &g) == 0) {
			for (size_t k = 0; !bad && k < g.gl_pathc; k++) {
				struct stat st;
				const char *rel = g.gl_pathv[k] + skip;
				int ok = stat(g.gl_pathv[k], &st) == 0;
				if (ok && !path_resolves_inside(root, g.gl_pathv[k]))
					bad = xstrdup(rel);
				else if (ok && S_ISDIR(st.st_mode))
					walk(root, rel, 0, files, &bad);
				else if (ok && S_ISREG(st.st_mode))
					pv_push(files, xstrdup(rel));
			}
			globfree(&g);
		}
		free(full);
		if (bad) {
			r = error("%s:%d: model '%s': %s: '%s' leads outside the project through a symbolic link",
				  kv->file, kv->line, sec->name, key, bad);
			free(bad);
		} else if (files->n == before)
			r = error("%s:%d: model '%s': %s '%s' matches no file%s", kv->file, kv->line, sec->name, key, s,
				  empty_hint);
	}
	pv_free_all(&specs);
	return r;
}
