/* rules.c — reading and checking rule files (see rules.h).
 *
 * libinih parses key = value lines; a line-counting reader in front of it
 * gives every key its line number and sees section headers itself, so that
 * sections without keys still exist and report their line. */
#include "rules/rules.h"

#include <ctype.h>
#include <dirent.h>
#include <ini.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "remote.h"
#include "stages/stage.h"
#include "util.h"

typedef struct Parser {
	Project *p;
	FILE *f;
	const char *file;     /* project-relative name, owned by p->files */
	int line;
	int indented;         /* current line starts with whitespace */
	Section *cur;
	char msg[1024];
	const char *lastkey;
} Parser;

static int perr(Parser *ps, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int perr(Parser *ps, const char *fmt, ...)
{
	if (ps->msg[0])
		return 0;
	va_list ap;
	va_start(ap, fmt);
	int n = snprintf(ps->msg, sizeof ps->msg, "%s:%d: ", ps->file, ps->line);
	vsnprintf(ps->msg + n, sizeof ps->msg - (size_t)n, fmt, ap);
	va_end(ap);
	return 0;
}

const char *closest(const char *word, const char *const *cands, size_t n)
{
	const char *best = NULL;
	int bd = 1000;
	for (size_t i = 0; i < n; i++) {
		int d = edit_distance(word, cands[i]);
		if (d < bd) {
			bd = d;
			best = cands[i];
		}
	}
	size_t len = strlen(word);
	int limit = len <= 4 ? 1 : len <= 8 ? 2 : 3;
	return bd <= limit ? best : NULL;
}

static char *trim(char *s)
{
	while (isspace((unsigned char)*s))
		s++;
	size_t n = strlen(s);
	while (n && isspace((unsigned char)s[n - 1]))
		s[--n] = 0;
	return s;
}

/* a model or release name is a plain path component (build/NAME/,
 * dist/NAME...): not empty, not starting with '.' (".", "..", hidden
 * directories such as build/.quantmake), no '/' */
static int valid_name(const char *s)
{
	if (!*s || *s == '.')
		return 0;
	for (; *s; s++)
		if (!isalnum((unsigned char)*s) && *s != '_' && *s != '-' && *s != '.')
			return 0;
	return 1;
}

Section *project_model(const Project *p, const char *name)
{
	return strmap_get(&p->index, name);
}

/* Called for a "[...]" line: creates the section. */
static void begin_section(Parser *ps, const char *text)
{
	char *buf = xstrdup(text), *s = trim(buf);
	Project *p = ps->p;
	ps->cur = NULL;
	if (!strcmp(s, "settings")) {
		ps->cur = &p->settings;
		if (!p->settings.file) {
			p->settings.file = ps->file;
			p->settings.line = ps->line;
		}
		free(buf);
		return;
	}
	char *sp = s;
	while (*sp && !isspace((unsigned char)*sp))
		sp++;
	char *rest = *sp ? trim(sp + 1) : sp;
	*sp = 0;
	if (!strcmp(s, "model")) {
		char *base = strchr(rest, ':');
		if (base) {
			*base = 0;
			base = trim(base + 1);
		}
		char *name = trim(rest);
		if (!valid_name(name)) {
			perr(ps, "invalid model name '%s' (letters, digits, '_', '-', '.'; not starting with '.')", name);
		} else if (base && !valid_name(base)) {
			perr(ps, "invalid base model name '%s'", base);
		} else {
			Section *old = project_model(p, name);
			if (old) {
				perr(ps, "model '%s' is already defined at %s:%d", name, old->file, old->line);
			} else {
				Section *m = xcalloc(1, sizeof *m);
				m->kind = SEC_MODEL;
				m->name = xstrdup(name);
				m->base = base ? xstrdup(base) : NULL;
				m->file = ps->file;
				m->line = ps->line;
				p->models = xreallocarray(p->models, p->nmodels + 1, sizeof *p->models);
				strmap_put(&p->index, m->name, m);
				p->models[p->nmodels++] = m;
				ps->cur = m;
			}
		}
	} else {
		static const char *const kinds[] = {"settings", "model", "release"};
		const char *near = closest(s, kinds, ARRAY_LEN(kinds));
		if (!strcmp(s, "release")) {
			char *name = trim(rest);
			Section *old = NULL;
			for (size_t i = 0; i < p->nreleases; i++)
				if (!strcmp(p->releases[i]->name, name))
					old = p->releases[i];
			if (!valid_name(name)) {
				perr(ps, "invalid release name '%s' (letters, digits, '_', '-', '.'; not starting with '.')", name);
			} else if (old) {
				perr(ps, "release '%s' is already defined at %s:%d", name, old->file, old->line);
			} else {
				Section *r = xcalloc(1, sizeof *r);
				r->kind = SEC_RELEASE;
				r->name = xstrdup(name);
				r->file = ps->file;
				r->line = ps->line;
				p->releases = xreallocarray(p->releases, p->nreleases + 1, sizeof *p->releases);
				p->releases[p->nreleases++] = r;
				ps->cur = r;
			}
		} else if (near)
			perr(ps, "unknown section '[%s]' (did you mean '[%s ...]'?)", text, near);
		else
			perr(ps, "unknown section '[%s]': expected [settings], [model NAME], [model NAME : BASE] or [release NAME]", text);
	}
	free(buf);
}

/* fgets-style reader that counts lines and sees section headers */
static char *reader(char *str, int num, void *stream)
{
	Parser *ps = stream;
	if (!fgets(str, num, ps->f))
		return NULL;
	ps->line++;
	ps->indented = str[0] == ' ' || str[0] == '\t';
	const char *s = str;
	while (*s == ' ' || *s == '\t')
		s++;
	if (*s == '[' && !ps->indented) {
		char *end = strrchr(s, ']');
		if (end) {
			char *text = xstrndup(s + 1, (size_t)(end - s - 1));
			begin_section(ps, text);
			free(text);
		}
	}
	return str;
}

static void sec_add(Section *s, const char *key, const char *value, const char *file, int line)
{
	if (s->nkv == s->cap) {
		s->cap = s->cap ? s->cap * 2 : 8;
		s->kv = xreallocarray(s->kv, s->cap, sizeof *s->kv);
	}
	s->kv[s->nkv++] = (KV){xstrdup(key), xstrdup(value), file, line};
}

const KV *sec_find(const Section *s, const char *key)
{
	for (size_t i = 0; i < s->nkv; i++)
		if (!strcmp(s->kv[i].key, key))
			return &s->kv[i];
	return NULL;
}

const char *sec_get(const Section *s, const char *key)
{
	const KV *kv = sec_find(s, key);
	return kv ? kv->value : NULL;
}

const RuleKeyDoc rules_settings_doc[] = {
	{"cache", "cache", "the artifact cache directory (QUANTMAKE_CACHE overrides it); one cache may serve every clone and branch"},
	{"jobs", "the number of CPUs", "actions run at once when -j is not given"},
	{"build-dir", "build", "where the outputs of the models are copied (build/MODEL/)"},
	{"remote-cache", NULL, "a remote cache's URL, http or https (Bazel's HTTP cache protocol; QUANTMAKE_REMOTE_CACHE overrides it)"},
	{"remote-cache.mode", "read-write", "read-write, or read-only (never upload)"},
	{"remote-cache.auth-env", NULL, "the environment variable holding an HTTP header 'Name: value' sent to the remote cache"},
	{"remote-cache.timeout", "10", "seconds to connect, and that a transfer may stall, before the remote cache counts as failed"},
	{NULL, NULL, NULL},
};

const RuleKeyDoc rules_release_doc[] = {
	{"models", NULL, "MODEL or MODEL:STAGE targets whose outputs the archive holds (required)"},
	{"files", NULL, "project files, directories and globs packed beside the models"},
	{"format", "tar.gz", "tar.gz, tar.zst or zip"},
	{"name", "{release}-{describe}", "the archive's name: {release}, {describe}, {commit}, {short}"},
	{NULL, NULL, NULL},
};

/* the keys of a doc table into names (at most max); their number */
static size_t doc_names(const RuleKeyDoc *d, const char **names, size_t max)
{
	size_t n = 0;
	for (; d[n].key && n < max; n++)
		names[n] = d[n].key;
	return n;
}

static int handler(void *user, const char *section, const char *name, const char *value)
{
	Parser *ps = user;
	(void)section;
	if (ps->msg[0])
		return 0;
	if (!ps->cur)
		return perr(ps, "key '%s' outside of a [settings], [model NAME] or [release NAME] section", name);
	Section *s = ps->cur;
	KV *old = (KV *)sec_find(s, name);
	if (old && ps->indented && old->line < ps->line) {
		/* continuation line of a multi-line value */
		char *v = xasprintf("%s %s", old->value, value);
		free(old->value);
		old->value = v;
		return 1;
	}
	if (old)
		return perr(ps, "key '%s' is set twice in this section (first at line %d)", name, old->line);
	const char *keys[16];
	if (s->kind == SEC_SETTINGS) {
		size_t i, nk = doc_names(rules_settings_doc, keys, ARRAY_LEN(keys));
		for (i = 0; i < nk; i++)
			if (!strcmp(name, keys[i]))
				break;
		if (i == nk) {
			const char *near = closest(name, keys, nk);
			return near ? perr(ps, "unknown setting '%s' (did you mean '%s'?)", name, near)
				    : perr(ps, "unknown setting '%s': expected cache, jobs, build-dir, remote-cache, "
					       "remote-cache.mode, remote-cache.auth-env or remote-cache.timeout", name);
		}
		if (!strcmp(name, "jobs")) {
			char *end;
			long j = strtol(value, &end, 10);
			if (*end || j < 1 || j > 1024)
				return perr(ps, "jobs must be a number from 1 to 1024, got '%s'", value);
		}
		if (!strcmp(name, "remote-cache") && remote_url_check(value, 0) < 0)
			return perr(ps, "remote-cache: %s", errmsg());
		if (!strcmp(name, "remote-cache.mode") && strcmp(value, "read-write") && strcmp(value, "read-only"))
			return perr(ps, "remote-cache.mode = '%s' is not valid: expected read-write or read-only", value);
		if (!strcmp(name, "remote-cache.timeout")) {
			char *end;
			long t = strtol(value, &end, 10);
			if (!*value || *end || t < 1 || t > 3600)
				return perr(ps, "remote-cache.timeout must be a number of seconds from 1 to 3600, got '%s'",
					    value);
		}
		if (!strcmp(name, "remote-cache.auth-env")) {
			size_t n = 0;
			while (value[n] == '_' || isalnum((unsigned char)value[n]))
				n++;
			if (!n || value[n] || isdigit((unsigned char)value[0]))
				return perr(ps, "remote-cache.auth-env names an environment variable (such as "
						"QUANTMAKE_REMOTE_AUTH), not '%s': the secret itself never goes in a rule file",
					    value);
		}
	} else if (s->kind == SEC_RELEASE) {
		size_t i, nk = doc_names(rules_release_doc, keys, ARRAY_LEN(keys));
		for (i = 0; i < nk; i++)
			if (!strcmp(name, keys[i]))
				break;
		if (i == nk) {
			const char *near = closest(name, keys, nk);
			return near ? perr(ps, "unknown key '%s' in release '%s' (did you mean '%s'?)", name, s->name, near)
				    : perr(ps, "unknown key '%s' in release '%s': expected models, files, format or name",
					   name, s->name);
		}
		if (!strcmp(name, "format") && strcmp(value, "tar.gz") && strcmp(value, "tar.zst") &&
		    strcmp(value, "zip"))
			return perr(ps, "release '%s': format = '%s' is not valid: expected tar.gz, tar.zst or zip",
				    s->name, value);
	} else {
		const Stage *st;
		const StageParam *prm = stage_param_find(name, &st);
		if (!prm) {
			const char *cands[256];
			size_t n = 0;
			for (size_t i = 0; stage_table[i]; i++)
				for (const StageParam *q = stage_table[i]->params; q->key && n < 256; q++)
					cands[n++] = q->key;
			const char *near = closest(name, cands, n);
			return near ? perr(ps, "unknown key '%s' in model '%s' (did you mean '%s'?)", name, s->name, near)
				    : perr(ps, "unknown key '%s' in model '%s'", name, s->name);
		}
		if (stage_param_check(prm, value) < 0)
			return perr(ps, "model '%s': %s", s->name, errmsg());
	}
	sec_add(s, name, value, ps->file, ps->line);
	return 1;
}

static int parse_file(Project *p, const char *path, const char *rel)
{
	FILE *f = fopen(path, "r");
	if (!f)
		return error("cannot open rule file '%s':", rel);
	p->files = xreallocarray(p->files, p->nfiles + 1, sizeof *p->files);
	p->files[p->nfiles++] = xstrdup(rel);
	Parser ps = {.p = p, .f = f, .file = p->files[p->nfiles - 1]};
	ini_allow_inline_comments = 0;
	ini_allow_multiline = 1;
	ini_stop_on_first_error = 1;
	ini_use_stack = 0;
	ini_allow_realloc = 1;
	ini_max_line = 1 << 16;
	int r = ini_parse_stream(reader, &ps, handler, &ps);
	fclose(f);
	if (ps.msg[0])
		return error("%s", ps.msg);
	if (r > 0)
		return error("%s:%d: syntax error: expected '[section]', 'key = value' or a comment", rel, r);
	if (r < 0)
		return error("cannot read rule file '%s'", rel);
	return 0;
}

/* copies into m the keys of its base that m does not set (b resolved) */
static void inherit(Section *m, const Section *b)
{
	for (size_t i = 0; i < b->nkv; i++) {
		const KV *kv = &b->kv[i];
		/* source and export exclude each other: a child setting either
		 * replaces both of the base's */
		int is_src = !strcmp(kv->key, "source") || !strcmp(kv->key, "export");
		if (sec_find(m, kv->key))
			continue;
		if (is_src && (sec_find(m, "source") || sec_find(m, "export")))
			continue;
		sec_add(m, kv->key, kv->value, kv->file, kv->line);
	}
	m->resolved = 1;
}

/* Resolves m's chain of bases without recursion (a chain of 100,000
 * models must not exhaust the stack): walks up to a resolved model or one
 * without a base, then copies keys down the chain. */
static int resolve(Project *p, Section *m)
{
	PtrVec chain = {0};
	Section *c = m;
	int r = 0;
	while (!c->resolved && c->base) {
		if (chain.n > p->nmodels) {
			r = error("%s:%d: inheritance cycle through model '%s'", c->file, c->line, c->name);
			break;
		}
		pv_push(&chain, c);
		Section *b = project_model(p, c->base);
		if (!b) {
			const char **names = xcalloc(p->nmodels, sizeof *names);
			for (size_t i = 0; i < p->nmodels; i++)
				names[i] = p->models[i]->name;
			const char *near = closest(c->base, names, p->nmodels);
			r = near ? error("%s:%d: model '%s' inherits unknown model '%s' (did you mean '%s'?)",
					 c->file, c->line, c->name, c->base, near)
				 : error("%s:%d: model '%s' inherits unknown model '%s'", c->file, c->line,
					 c->name, c->base);
			free(names);
			break;
		}
		c = b;
	}
	if (r == 0) {
		c->resolved = 1;
		for (size_t i = chain.n; i-- > 0;) {
			inherit(chain.v[i], c);
			c = chain.v[i];
		}
	}
	pv_free(&chain);
	return r;
}

/* A release names existing models (MODEL or MODEL:STAGE; stages are
 * checked when the graph is built) and files inside the project. */
static int check_release(Project *p, Section *r)
{
	const KV *models = sec_find(r, "models");
	if (!models)
		return error("%s:%d: release '%s' needs 'models = MODEL...'", r->file, r->line, r->name);
	char *list = xstrdup(models->value), *save = NULL;
	int ret = 0;
	for (char *w = strtok_r(list, " \t,", &save); w && ret == 0; w = strtok_r(NULL, " \t,", &save)) {
		char *colon = strchr(w, ':');
		if (colon)
			*colon = 0;
		if (!project_model(p, w)) {
			const char **names = xcalloc(p->nmodels + 1, sizeof *names);
			for (size_t i = 0; i < p->nmodels; i++)
				names[i] = p->models[i]->name;
			const char *near = closest(w, names, p->nmodels);
			ret = near ? error("%s:%d: release '%s' names unknown model '%s' (did you mean '%s'?)",
					   models->file, models->line, r->name, w, near)
				   : error("%s:%d: release '%s' names unknown model '%s'", models->file,
					   models->line, r->name, w);
			free(names);
		}
	}
	free(list);
	const KV *files = sec_find(r, "files");
	if (ret == 0 && files) {
		list = xstrdup(files->value);
		for (char *w = strtok_r(list, " \t,", &save); w && ret == 0; w = strtok_r(NULL, " \t,", &save))
			if (w[0] == '/' || !strcmp(w, "..") || !strncmp(w, "../", 3) || strstr(w, "/../"))
				ret = error("%s:%d: release '%s': file '%s' is outside the project", files->file,
					    files->line, r->name, w);
		free(list);
	}
	return ret;
}

static int cmpstr(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

int rules_load(const char *root, const char *file, Project **out)
{
	Project *p = xcalloc(1, sizeof *p);
	p->root = xstrdup(root);
	p->settings.kind = SEC_SETTINGS;
	p->settings.name = xstrdup("settings");
	int r = 0;
	if (file) {
		r = parse_file(p, file, file);
	} else {
		char *dir = path_join(root, "rules");
		DIR *d = opendir(dir);
		if (!d) {
			r = error("no rules: '%s/rules/' does not exist (or use -f FILE)", root);
		} else {
			PtrVec names = {0};
			struct dirent *e;
			while ((e = readdir(d))) {
				size_t n = strlen(e->d_name);
				if (n > 6 && !strcmp(e->d_name + n - 6, ".rules"))
					pv_push(&names, xstrdup(e->d_name));
			}
			closedir(d);
			if (names.n > 1)
				qsort(names.v, names.n, sizeof *names.v, cmpstr);
			if (!names.n)
				r = error("no rule files: '%s' holds no *.rules file", dir);
			for (size_t i = 0; i < names.n; i++) {
				if (r == 0) {
					char *full = path_join(dir, names.v[i]);
					char *rel = xasprintf("rules/%s", (char *)names.v[i]);
					r = parse_file(p, full, rel);
					free(full);
					free(rel);
				}
				free(names.v[i]);
			}
			pv_free(&names);
		}
		free(dir);
	}
	for (size_t i = 0; r == 0 && i < p->nmodels; i++)
		r = resolve(p, p->models[i]);
	for (size_t i = 0; r == 0 && i < p->nmodels; i++) {
		Section *m = p->models[i];
		const KV *src = sec_find(m, "source"), *exp = sec_find(m, "export");
		if (src && exp)
			r = error("%s:%d: model '%s' has both source (line %d) and export (line %d): keep one",
				  m->file, m->line, m->name, src->line, exp->line);
		else if (!src && !exp)
			r = error("%s:%d: model '%s' needs 'source = PATH' or 'export = COMMAND'",
				  m->file, m->line, m->name);
	}
	/* combinations of keys that cannot work, before anything runs */
	for (size_t i = 0; r == 0 && i < p->nmodels; i++)
		for (size_t k = 0; r == 0 && stage_table[k]; k++)
			if (stage_table[k]->check_section && stage_table[k]->wanted(p->models[i]))
				r = stage_table[k]->check_section(p->models[i]);
	for (size_t i = 0; r == 0 && i < p->nreleases; i++)
		r = check_release(p, p->releases[i]);
	if (r < 0) {
		project_free(p);
		return -1;
	}
	*out = p;
	return 0;
}

static void sec_free(Section *s)
{
	for (size_t i = 0; i < s->nkv; i++) {
		free(s->kv[i].key);
		free(s->kv[i].value);
	}
	free(s->kv);
	free(s->name);
	free(s->base);
}

void project_free(Project *p)
{
	if (!p)
		return;
	for (size_t i = 0; i < p->nmodels; i++) {
		sec_free(p->models[i]);
		free(p->models[i]);
	}
	free(p->models);
	strmap_free(&p->index);
	for (size_t i = 0; i < p->nreleases; i++) {
		sec_free(p->releases[i]);
		free(p->releases[i]);
	}
	free(p->releases);
	sec_free(&p->settings);
	for (size_t i = 0; i < p->nfiles; i++)
		free(p->files[i]);
	free(p->files);
	free(p->root);
	free(p);
}
