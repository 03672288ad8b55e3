/* cmd.c — `quantmake release` and `quantmake verify-release`.
 *
 * release: build every model the chosen releases name (build_run), read
 * the git stamp, list each release's entries (the models' output files as
 * the build recorded them in build/.quantmake/log, then the `files`), hash
 * them, write MANIFEST.json and the archive dist/NAME.EXT. The build's
 * cache keys never see the stamp: it is added to the released copies only.
 *
 * Archive layout (below one top directory named like the archive):
 *   MANIFEST.json
 *   MODEL/...            a model's final outputs (MODEL.onnx, side files,
 *                        external data), as in build/MODEL/
 *   MODEL/STAGE/...      the outputs of a MODEL:STAGE target
 *   PATH                 each of `files`, at its project-relative path */
#include <glob.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <dirent.h>
#include <unistd.h>

#include "build.h"
#include "buildlog.h"
#include "commands.h"
#include "release/release.h"
#include "rules/rules.h"
#include "stages/stage.h"
#include "util.h"

typedef struct RelOpts {
	int require_clean, require_git, force;
} RelOpts;

static void free_words(PtrVec *pv)
{
	for (size_t i = 0; i < pv->n; i++)
		free(pv->v[i]);
	pv_free(pv);
}

/* the stage a MODEL or MODEL:STAGE target ends with, or NULL */
static const Stage *target_stage(const Section *m, const char *stage)
{
	const Stage *last = NULL;
	for (size_t i = 0; stage_table[i]; i++) {
		if (!stage_table[i]->wanted(m))
			continue;
		if (stage && !strcmp(stage_table[i]->name, stage))
			return stage_table[i];
		last = stage_table[i];
	}
	return stage ? NULL : last;
}

/* ---- name template ---- */

static int expand_name(const Section *r, const Stamp *s, char **out)
{
	const KV *kv = sec_find(r, "name");
	const char *t = kv ? kv->value : "{release}-{describe}";
	StrBuf sb = {0};
	for (const char *c = t; *c; c++) {
		if (*c != '{') {
			sb_putc(&sb, *c);
			continue;
		}
		const char *end = strchr(c, '}');
		size_t n = end ? (size_t)(end - c - 1) : 0;
		const char *v = NULL;
		if (end && n == 7 && !strncmp(c + 1, "release", n))
			v = r->name;
		else if (end && n == 8 && !strncmp(c + 1, "describe", n))
			v = s->describe;
		else if (end && n == 6 && !strncmp(c + 1, "commit", n))
			v = s->commit;
		else if (end && n == 5 && !strncmp(c + 1, "short", n))
			v = s->shortc;
		if (!v) {
			sb_release(&sb);
			return error("%s:%d: release '%s': name '%s' has an unknown placeholder: expected {release}, {describe}, {commit} or {short}",
				     kv ? kv->file : r->file, kv ? kv->line : r->line, r->name, t);
		}
		sb_puts(&sb, v);
		c = end;
	}
	for (size_t i = 0; i < sb.len; i++)
		if (sb.buf[i] == '/' || sb.buf[i] == ' ' || sb.buf[i] == '\t')
			sb.buf[i] = '-';
	if (!sb.len || sb.buf[0] == '.') {
		sb_release(&sb);
		return error("%s:%d: release '%s': name '%s' gives an empty or hidden file name",
			     kv ? kv->file : r->file, kv ? kv->line : r->line, r->name, t);
	}
	*out = sb_detach(&sb);
	return 0;
}

/* ---- dependencies (for the dirty check) ---- */

static int cmpstrp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* is key among the n sorted strings of v (v may be NULL when n is 0)? */
static int in_sorted(void *const *key, char *const *v, size_t n)
{
	return n && bsearch(key, v, n, sizeof *v, cmpstrp);
}

static void add_dep(PtrVec *deps, const char *path)
{
	for (size_t i = 0; i < deps->n; i++)
		if (!strcmp(deps->v[i], path))
			return;
	pv_push(deps, xstrdup(path));
}

/* files a model's chain up to stage reads: declared inputs, the inputs its
 * actions discovered, recursively through source = @MODEL */
static void model_deps(Project *p, BuildLog *log, const Section *m, const char *stage, PtrVec *deps, int depth)
{
	if (depth > (int)p->nmodels)
		return;
	const char *src = sec_get(m, "source");
	if (src && src[0] == '@') {
		char *name = xstrdup(src + 1), *st = strchr(name, ':');
		if (st)
			*st++ = 0;
		const Section *up = project_model(p, name);
		if (up)
			model_deps(p, log, up, st, deps, depth + 1);
		free(name);
	}
	for (size_t i = 0; stage_table[i]; i++) {
		const Stage *s = stage_table[i];
		if (!s->wanted(m))
			continue;
		if (s->declared_inputs) {
			PtrVec f = {0};
			if (s->declared_inputs(m, p->root, &f) == 0)
				for (size_t j = 0; j < f.n; j++)
					add_dep(deps, f.v[j]);
			free_words(&f);
		}
		LogEntry *e = buildlog_get(log, m->name, s->name);
		for (size_t j = 0; e && j < e->rec.ndeps; j++)
			add_dep(deps, e->rec.deps[j].path);
		if (stage && !strcmp(s->name, stage))
			break;
	}
}

/* ---- recipe ---- */

static json_t *recipe_json(Project *p, const Section *m, const char *stage, int depth)
{
	json_t *o = json_object(), *keys = json_object(), *stages = json_array();
	for (size_t i = 0; i < m->nkv; i++)
		json_object_set_new(keys, m->kv[i].key, json_string(m->kv[i].value));
	for (size_t i = 0; stage_table[i]; i++) {
		const Stage *s = stage_table[i];
		if (!s->wanted(m))
			continue;
		for (const StageParam *q = s->params; q->key; q++) {
			const char *v = stage_param_value(m, q->key);
			if (v && !json_object_get(keys, q->key))
				json_object_set_new(keys, q->key, json_string(v));
		}
		json_t *so = json_object();
		json_object_set_new(so, "name", json_string(s->name));
		json_object_set_new(so, "version", json_integer(s->version));
		json_array_append_new(stages, so);
		if (stage && !strcmp(s->name, stage))
			break;
	}
	json_object_set_new(o, "keys", keys);
	json_object_set_new(o, "stages", stages);
	const char *src = sec_get(m, "source");
	if (src && src[0] == '@' && depth <= (int)p->nmodels) {
		char *name = xstrdup(src + 1), *st = strchr(name, ':');
		if (st)
			*st++ = 0;
		const Section *up = project_model(p, name);
		if (up) {
			json_t *u = recipe_json(p, up, st, depth + 1);
			json_object_set_new(u, "model", json_string(name));
			json_object_set_new(o, "upstream", u);
		}
		free(name);
	}
	return o;
}

/* ---- entries ---- */

static int add_dirs(EntryList *l, const char *name)
{
	char *d = xstrdup(name);
	for (char *s = strrchr(d, '/'); s; s = strrchr(d, '/')) {
		*s = 0;
		Entry *e = entry_find(l, d);
		if (e && e->kind != ENT_DIR) {
			int r = error("'%s' is both a file and a directory of the release", d);
			free(d);
			return r;
		}
		if (!e)
			entry_add(l, d, ENT_DIR, NULL);
	}
	free(d);
	return 0;
}

static int add_file(EntryList *l, const char *name, const char *src, const char *what)
{
	Entry *old = entry_find(l, name);
	if (old && old->src && src && !strcmp(old->src, src))
		return 0;
	if (old)
		return error("%s: '%s' is already in the release (from %s)", what, name,
			     old->src ? old->src : "a directory");
	entry_add(l, name, ENT_FILE, src);
	return 0;
}

/* add every regular file under dir (project-relative), recursively; a
 * symbolic link in it must resolve inside the project root */
static int add_tree(EntryList *l, const char *root, const char *rel, const char *what)
{
	DIR *d = opendir(rel);
	if (!d)
		return error("%s: cannot read directory '%s':", what, rel);
	struct dirent *de;
	int r = 0;
	while (r == 0 && (de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		char *p = path_join(rel, de->d_name);
		struct stat st;
		if (lstat(p, &st) == 0 && S_ISLNK(st.st_mode) && !path_resolves_inside(root, p))
			r = error("%s: '%s' is a symbolic link that leads outside the project", what, p);
		else if (stat(p, &st) < 0)
			r = error("%s: cannot read '%s':", what, p);
		else if (S_ISDIR(st.st_mode))
			r = add_tree(l, root, p, what);
		else if (S_ISREG(st.st_mode))
			r = add_file(l, p, p, what);
		free(p);
	}
	closedir(d);
	return r;
}

/* add the files of the release; 0, -2 when a pattern matches nothing (a
 * rule-input error), -1 on other errors (error() says which) */
static int add_globs(Project *p, const Section *r, EntryList *l, PtrVec *deps)
{
	const KV *kv = sec_find(r, "files");
	if (!kv)
		return 0;
	PtrVec pats = {0};
	split_words(kv->value, &pats);
	int ret = 0;
	char *what = xasprintf("%s:%d: release '%s'", kv->file, kv->line, r->name);
	for (size_t i = 0; ret == 0 && i < pats.n; i++) {
		const char *pat = pats.v[i];
		glob_t g;
		int gr = glob(pat, 0, NULL, &g);
		if (gr == GLOB_NOMATCH) {
			error("%s: files '%s' matches no file", what, pat);
			ret = -2;
			continue;
		}
		if (gr != 0) {
			ret = error("%s: cannot expand files '%s'", what, pat);
			continue;
		}
		for (size_t j = 0; ret == 0 && j < g.gl_pathc; j++) {
			const char *f = g.gl_pathv[j];
			while (f[0] == '.' && f[1] == '/')
				f += 2;
			struct stat st;
			if (!path_resolves_inside(p->root, f))
				ret = error("%s: file '%s' is outside the project", what, f);
			else if (stat(f, &st) < 0)
				ret = error("%s: cannot read '%s':", what, f);
			else if (S_ISDIR(st.st_mode))
				ret = add_tree(l, p->root, f, what);
			else if (S_ISREG(st.st_mode))
				ret = add_file(l, f, f, what);
			else
				ret = error("%s: '%s' is not a regular file or directory", what, f);
		}
		globfree(&g);
	}
	for (size_t i = 0; i < l->n; i++)
		if (l->v[i].kind == ENT_FILE && !l->v[i].has_expect && l->v[i].src)
			add_dep(deps, l->v[i].src);
	free(what);
	free_words(&pats);
	return ret;
}

/* ---- one release ---- */

typedef struct Ctx {
	Project *p;
	const BuildOpts *o;
	BuildLog *log;
	const Stamp *stamp;
	const RelOpts *ro;
	int64_t mtime;
	PtrVec written;       /* archives written by this run */
} Ctx;

/* Every file of the project a release reads: the rule files, each model
 * chain's declared and discovered inputs (as the build log has them) and
 * the files its `files` globs match, project-relative, sorted. 0, -2 for a
 * glob that matches nothing, -1 on other errors. */
static int release_deps(Ctx *c, const Section *r, PtrVec *deps)
{
	for (size_t i = 0; i < c->p->nfiles; i++)
		add_dep(deps, c->p->files[i]);
	PtrVec targets = {0};
	split_words(sec_get(r, "models"), &targets);
	for (size_t i = 0; i < targets.n; i++) {
		char *name = targets.v[i], *stage = strchr(name, ':');
		if (stage)
			*stage++ = 0;
		const Section *m = project_model(c->p, name);
		const Stage *st = m ? target_stage(m, stage) : NULL;
		if (st)
			model_deps(c->p, c->log, m, st->name, deps, 0);
	}
	free_words(&targets);
	EntryList l = {0};
	int ret = add_globs(c->p, r, &l, deps);
	entries_free(&l);
	if (deps->n)
		qsort(deps->v, deps->n, sizeof *deps->v, cmpstrp);
	return ret;
}

/* the inputs of a release that git does not track (sorted, borrowed from
 * deps) */
static void untracked_deps(const Stamp *s, const PtrVec *deps, PtrVec *out)
{
	for (size_t i = 0; i < deps->n; i++)
		if (in_sorted(&deps->v[i], s->untracked, s->nuntracked))
			pv_push(out, deps->v[i]);
}

/* "a, b, c and N more" */
static char *name_some(char *const *v, size_t n)
{
	StrBuf sb = {0};
	for (size_t i = 0; i < n && i < 5; i++)
		sb_printf(&sb, "%s%s", i ? ", " : "", v[i]);
	if (n > 5)
		sb_printf(&sb, " and %zu more", n - 5);
	return sb_detach(&sb);
}

/* the refusal of --require-clean for untracked inputs of release r */
static int refuse_untracked(const Section *r, const PtrVec *unt)
{
	char *names = name_some((char *const *)unt->v, unt->n);
	int ret = error("release '%s': git does not track %s, which %s the release: add %s to git (git add) or drop --require-clean",
			r->name, names, unt->n > 1 ? "enter" : "enters", unt->n > 1 ? "them" : "it");
	free(names);
	return ret;
}

static int add_model(Ctx *c, const Section *r, const char *target, EntryList *l, json_t *models,
		     const StampProps *props)
{
	char *name = xstrdup(target), *stage = strchr(name, ':');
	if (stage)
		*stage++ = 0;
	int ret = -1;
	json_t *mo = NULL;
	const Section *m = project_model(c->p, name);
	const Stage *st = m ? target_stage(m, stage) : NULL;
	if (!st) {
		error("release '%s': '%s' names no model stage", r->name, target);
		goto out;
	}
	LogEntry *le = buildlog_get(c->log, m->name, st->name);
	if (!le || !le->rec.nouts) {
		error("release '%s': the build left no record of %s:%s in %s/.quantmake/log", r->name, m->name,
		      st->name, c->o->build_dir);
		goto out;
	}
	char *prefix = stage ? xasprintf("%s/%s", m->name, stage) : xstrdup(m->name);
	char *mainname = xasprintf("%s.onnx", m->name);
	mo = json_object();
	json_t *files = json_array();
	char hex[HASH_HEX_LEN];
	ret = 0;
	for (size_t i = 0; ret == 0 && i < le->rec.nouts; i++) {
		const ActionOut *ao = &le->rec.outs[i];
		char *ename = path_join(prefix, ao->name);
		char *src = xasprintf("%s/%s", c->o->build_dir, ename);
		ret = add_file(l, ename, src, r->name);
		if (ret == 0) {
			Entry *e = entry_find(l, ename);
			e->expect = ao->h;
			e->has_expect = 1;
			json_array_append_new(files, json_string(ename));
			if (!strcmp(ao->name, "verify.json")) {
				/* the verify figures travel in the manifest too */
				json_error_t je;
				json_t *v = json_load_file(src, 0, &je);
				if (!v)
					ret = error("release '%s': %s: %s (line %d)", r->name, src, je.text, je.line);
				else
					json_object_set_new(mo, "verify", v);
			}
			if (ret == 0 && !strcmp(ao->name, mainname)) {
				json_object_set_new(mo, "file", json_string(ename));
				json_object_set_new(mo, "built_xxh3_128", json_string(hash_hex(ao->h, hex)));
				ret = model_describe_stamp(src, props, mo, e);
			}
		}
		free(ename);
		free(src);
	}
	if (ret == 0 && !json_object_get(mo, "file"))
		ret = error("release '%s': %s:%s produced no %s", r->name, m->name, st->name, mainname);
	free(prefix);
	free(mainname);
	if (ret < 0) {
		json_decref(files);
		goto out;
	}
	json_object_set_new(mo, "files", files);
	json_object_set_new(mo, "model", json_string(m->name));
	json_object_set_new(mo, "stage", json_string(st->name));
	json_object_set_new(mo, "action_key", json_string(hash_hex(le->rec.key, hex)));
	json_object_set_new(mo, "recipe", recipe_json(c->p, m, st->name, 0));
	json_t *sp = json_object();
	for (size_t i = 0; i < props->n; i++)
		json_object_set_new(sp, props->key[i], json_string(props->val[i]));
	json_object_set_new(mo, "metadata_props", sp);
	json_object_set_new(models, target, mo);
	mo = NULL;
out:
	json_decref(mo);
	free(name);
	return ret;
}

static json_t *git_json(const Stamp *s, const PtrVec *deps, const PtrVec *unt)
{
	json_t *g = json_object();
	json_object_set_new(g, "commit", json_string(s->commit));
	json_object_set_new(g, "short", json_string(s->shortc));
	json_object_set_new(g, "describe", json_string(s->describe));
	json_object_set_new(g, "dirty", s->in_git ? json_boolean(s->dirty) : json_null());
	json_object_set_new(g, "commit_time", json_integer(s->commit_time));
	json_t *mod = json_array(), *ut = json_array();
	for (size_t i = 0; i < deps->n; i++)
		if (in_sorted(&deps->v[i], s->modified, s->nmodified))
			json_array_append_new(mod, json_string(deps->v[i]));
	for (size_t i = 0; i < unt->n; i++)
		json_array_append_new(ut, json_string(unt->v[i]));
	json_object_set_new(g, "modified_inputs", mod);
	json_object_set_new(g, "untracked_inputs", ut);
	return g;
}

/* The stamp of one release: the repository's, dirty also when an untracked
 * file enters the release, describe with -dirty then. Free with
 * release_stamp_free (the other fields are borrowed). */
static void release_stamp(const Stamp *s, size_t nuntracked, Stamp *out)
{
	*out = *s;
	out->dirty = s->in_git && (s->dirty || nuntracked);
	out->describe = out->dirty ? xasprintf("%s-dirty", s->describe) : xstrdup(s->describe);
}

static void release_stamp_free(Stamp *rs)
{
	free(rs->describe);
}

/* 0, 1 after an error of the work, 2 after a rule-input error (error()) */
static int do_release(Ctx *c, const Section *r)
{
	char *base = NULL, *path = NULL;
	EntryList l = {0};
	PtrVec deps = {0}, targets = {0}, unt = {0};
	Stamp rs;
	StampProps props = {0};
	json_t *man = json_object(), *models = json_object(), *files = json_object();
	int ret = 1;
	int dr = release_deps(c, r, &deps);
	if (dr < 0) {
		ret = dr == -2 ? 2 : 1;
		release_stamp(c->stamp, 0, &rs);
		goto out;
	}
	untracked_deps(c->stamp, &deps, &unt);
	release_stamp(c->stamp, unt.n, &rs);
	if (unt.n && c->ro->require_clean) {
		refuse_untracked(r, &unt);
		goto out;
	}
	stamp_props(&rs, r->name, &props);
	const char *fmt = sec_get(r, "format") ? sec_get(r, "format") : "tar.gz";
	if (expand_name(r, &rs, &base) < 0) {
		ret = 2;
		goto out;
	}
	path = xasprintf("dist/%s.%s", base, archive_ext(fmt));
	for (size_t i = 0; i < c->written.n; i++)
		if (!strcmp(c->written.v[i], path)) {
			const KV *kv = sec_find(r, "name");
			error("%s:%d: release '%s' would write '%s' again (another release made it): give it its own name",
			      kv ? kv->file : r->file, kv ? kv->line : r->line, r->name, path);
			ret = 2;
			goto out;
		}
	split_words(sec_get(r, "models"), &targets);
	for (size_t i = 0; i < targets.n; i++)
		if (!json_object_get(models, targets.v[i]) && add_model(c, r, targets.v[i], &l, models, &props) < 0)
			goto out;
	PtrVec ignore = {0};
	int gr = add_globs(c->p, r, &l, &ignore);
	free_words(&ignore);
	if (gr != 0) {
		ret = gr == -2 ? 2 : 1;
		goto out;
	}
	if (entry_find(&l, "MANIFEST.json")) {
		const KV *kv = sec_find(r, "files");
		error("%s:%d: release '%s': a file called MANIFEST.json would replace the manifest",
		      kv ? kv->file : r->file, kv ? kv->line : r->line, r->name);
		ret = 2;
		goto out;
	}
	if (entries_digest(&l, ncpus()) < 0) {
		error_prefix("release '%s'", r->name);
		goto out;
	}
	size_t nfiles = l.n;
	for (size_t i = 0; i < nfiles; i++) {
		Entry *e = &l.v[i];
		json_t *fo = json_object();
		char hex[HASH_HEX_LEN], sh[65];
		json_object_set_new(fo, "size", json_integer(e->size));
		json_object_set_new(fo, "xxh3_128", json_string(hash_hex(e->xxh, hex)));
		json_object_set_new(fo, "sha256", json_string(sha256_hex(e->sha, sh)));
		json_object_set_new(files, e->name, fo);
		if (add_dirs(&l, e->name) < 0)
			goto out;
	}
	json_object_set_new(man, "manifest_version", json_integer(1));
	json_object_set_new(man, "release", json_string(r->name));
	char *aname = xasprintf("%s.%s", base, archive_ext(fmt));
	json_object_set_new(man, "archive", json_string(aname));
	free(aname);
	json_object_set_new(man, "format", json_string(fmt));
	json_object_set_new(man, "quantmake_version", json_string(QM_VERSION));
	json_object_set_new(man, "mtime", json_integer(c->mtime));
	json_object_set_new(man, "git", git_json(&rs, &deps, &unt));
	json_object_set_new(man, "files", files);
	files = NULL;
	json_object_set_new(man, "models", models);
	models = NULL;
	char *text = json_dumps(man, JSON_SORT_KEYS | JSON_INDENT(2) | JSON_ENSURE_ASCII);
	if (!text) {
		error("release '%s': cannot encode MANIFEST.json", r->name);
		goto out;
	}
	Entry *me = entry_add(&l, "MANIFEST.json", ENT_FILE, NULL);
	StrBuf sb = {0};
	sb_puts(&sb, text);
	sb_putc(&sb, '\n');
	free(text);
	me->datalen = sb.len;
	me->data = (uint8_t *)sb_detach(&sb);
	me->size = (int64_t)me->datalen;
	entry_add(&l, "", ENT_DIR, NULL);
	entries_sort(&l);
	if (mkdirs("dist") < 0) {
		error_prefix("release '%s'", r->name);
		goto out;
	}
	int same = archive_write_release(path, fmt, base, &l, c->mtime, c->ro->force);
	if (same < 0) {
		error_prefix("release '%s'", r->name);
		goto out;
	}
	int64_t bytes = 0;
	size_t nf = 0;
	for (size_t i = 0; i < l.n; i++)
		if (l.v[i].kind == ENT_FILE) {
			bytes += l.v[i].size;
			nf++;
		}
	struct stat st;
	printf("release %s: %s (%zu files, %lld bytes packed into %lld%s)\n", r->name, path, nf, (long long)bytes,
	       stat(path, &st) == 0 ? (long long)st.st_size : -1LL, same ? "; unchanged, the same bytes were there" : "");
	if (unt.n) {
		char *names = name_some((char *const *)unt.v, unt.n);
		warn("release '%s' is stamped dirty: git does not track %s", r->name, names);
		free(names);
	}
	pv_push(&c->written, xstrdup(path));
	ret = 0;
out:
	if (ret)
		fprintf(stderr, "%s: %s\n", argv0, errmsg());
	json_decref(man);
	json_decref(models);
	json_decref(files);
	stamp_props_free(&props);
	release_stamp_free(&rs);
	entries_free(&l);
	pv_free(&unt);
	free_words(&deps);
	free_words(&targets);
	free(base);
	free(path);
	return ret;
}

static int parse_epoch(int64_t *out)
{
	const char *e = getenv("SOURCE_DATE_EPOCH");
	if (!e || !*e)
		return 0;
	char *end;
	long long v = strtoll(e, &end, 10);
	if (*end || v < 0 || v > 253402300799LL)
		return error("SOURCE_DATE_EPOCH='%s' is not valid: expected seconds since 1970 as a whole number", e);
	*out = v;
	return 1;
}

static int release_usage(void)
{
	fprintf(stderr, "usage: quantmake release [--require-clean] [--require-git] [--force] [-n] [-j N] [-k] [-B] [--explain] [NAME...]\n");
	return 2;
}

int cmd_release(Project *p, const BuildOpts *o, int argc, char **argv)
{
	RelOpts ro = {0};
	PtrVec names = {0};
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--require-clean"))
			ro.require_clean = 1;
		else if (!strcmp(argv[i], "--require-git"))
			ro.require_git = 1;
		else if (!strcmp(argv[i], "--force"))
			ro.force = 1;
		else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
			pv_free(&names);
			return release_usage();
		} else if (argv[i][0] == '-') {
			fprintf(stderr, "%s: release: unknown option '%s'\n", argv0, argv[i]);
			pv_free(&names);
			return release_usage();
		} else
			pv_push(&names, argv[i]);
	}
	if (!p->nreleases) {
		fprintf(stderr, "%s: no [release NAME] section in the rule files\n", argv0);
		pv_free(&names);
		return 2;
	}
	/* the releases to make, in rule-file order */
	const Section **rel = xcalloc(p->nreleases, sizeof *rel);
	size_t nrel = 0;
	for (size_t i = 0; i < names.n; i++) {
		const Section *found = NULL;
		for (size_t j = 0; j < p->nreleases; j++)
			if (!strcmp(p->releases[j]->name, names.v[i]))
				found = p->releases[j];
		if (!found) {
			const char **cands = xcalloc(p->nreleases, sizeof *cands);
			for (size_t j = 0; j < p->nreleases; j++)
				cands[j] = p->releases[j]->name;
			const char *near = closest(names.v[i], cands, p->nreleases);
			fprintf(stderr, "%s: unknown release '%s'%s%s%s\n", argv0, (char *)names.v[i],
				near ? " (did you mean '" : ": expected the name of a [release NAME] section",
				near ? near : "", near ? "'?)" : "");
			free(cands);
			free(rel);
			pv_free(&names);
			return 2;
		}
		int dup = 0;
		for (size_t j = 0; j < nrel; j++)
			dup |= rel[j] == found;
		if (!dup)
			rel[nrel++] = found;
	}
	if (!names.n)
		for (size_t j = 0; j < p->nreleases; j++)
			rel[nrel++] = p->releases[j];
	pv_free(&names);
	int status = 0;
	int64_t mtime = 0;
	int have_epoch = parse_epoch(&mtime);
	if (have_epoch < 0) {
		fprintf(stderr, "%s: %s\n", argv0, errmsg());
		free(rel);
		return 2;
	}
	/* the stamp first: a refused release builds nothing */
	Stamp s;
	char *why = NULL;
	if (stamp_read(p->root, &s, &why) < 0) {
		fprintf(stderr, "%s: %s\n", argv0, errmsg());
		free(rel);
		return 1;
	}
	if (!s.in_git) {
		if (ro.require_git || ro.require_clean) {
			fprintf(stderr, "%s: %s: cannot stamp the release (--require-%s)\n", argv0, why,
				ro.require_git ? "git" : "clean");
			status = 1;
		} else {
			warn("%s: stamping the release 'unknown'", why);
		}
	} else if (s.dirty && ro.require_clean) {
		char *mods = s.nmodified ? name_some(s.modified, s.nmodified) : NULL;
		fprintf(stderr, "%s: the work tree has uncommitted changes (%s): commit them or drop --require-clean\n",
			argv0, mods ? mods : "outside the project");
		free(mods);
		status = 1;
	}
	free(why);
	char *logpath = xasprintf("%s/.quantmake/log", o->build_dir);
	Ctx c = {.p = p, .o = o, .stamp = &s, .ro = &ro};
	/* untracked inputs known before the build (rule files, declared data,
	 * `files`; the inputs the last build discovered): refused before
	 * building; do_release checks again with what this build discovers */
	if (status == 0 && s.in_git && ro.require_clean && s.nuntracked) {
		c.log = buildlog_open(logpath);
		for (size_t i = 0; status == 0 && i < nrel; i++) {
			PtrVec deps = {0}, unt = {0};
			if (release_deps(&c, rel[i], &deps) == 0) {
				untracked_deps(&s, &deps, &unt);
				if (unt.n) {
					refuse_untracked(rel[i], &unt);
					fprintf(stderr, "%s: %s\n", argv0, errmsg());
					status = 1;
				}
			}
			pv_free(&unt);
			free_words(&deps);
		}
		buildlog_close(c.log);
		c.log = NULL;
	}
	if (status != 0) {
		free(logpath);
		stamp_free(&s);
		free(rel);
		return status;
	}
	/* build what the releases need */
	PtrVec targets = {0};
	for (size_t i = 0; i < nrel; i++) {
		PtrVec w = {0};
		split_words(sec_get(rel[i], "models"), &w);
		for (size_t j = 0; j < w.n; j++) {
			int dup = 0;
			for (size_t k = 0; k < targets.n; k++)
				dup |= !strcmp(targets.v[k], w.v[j]);
			if (dup)
				free(w.v[j]);
			else
				pv_push(&targets, w.v[j]);
		}
		pv_free(&w);
	}
	/* the build reports a directory it cannot use */
	(void)(mkdir_ignored(o->build_dir) + mkdir_ignored(o->cache_dir));
	status = build_run(p, o, (int)targets.n, (char **)targets.v);
	free_words(&targets);
	/* the build's signal handlers only serve its own loop */
	signal(SIGINT, SIG_DFL);
	signal(SIGTERM, SIG_DFL);
	signal(SIGHUP, SIG_DFL);
	if (status != 0) {
		free(logpath);
		stamp_free(&s);
		free(rel);
		return status;
	}
	c.log = buildlog_open(logpath);
	free(logpath);
	if (o->dry_run) {
		/* -n: name the archives, write nothing */
		for (size_t i = 0; status == 0 && i < nrel; i++) {
			char *base;
			const char *fmt = sec_get(rel[i], "format") ? sec_get(rel[i], "format") : "tar.gz";
			PtrVec deps = {0}, unt = {0};
			Stamp rs;
			int dr = release_deps(&c, rel[i], &deps);
			untracked_deps(&s, &deps, &unt);
			release_stamp(&s, unt.n, &rs);
			if (dr < 0 || expand_name(rel[i], &rs, &base) < 0) {
				fprintf(stderr, "%s: %s\n", argv0, errmsg());
				status = dr == -1 ? 1 : 2;
			} else {
				printf("would write dist/%s.%s\n", base, archive_ext(fmt));
				free(base);
			}
			release_stamp_free(&rs);
			pv_free(&unt);
			free_words(&deps);
		}
	} else {
		if (!have_epoch)
			mtime = s.commit_time;
		c.mtime = mtime;
		for (size_t i = 0; status == 0 && i < nrel; i++)
			status = do_release(&c, rel[i]);
	}
	free_words(&c.written);
	buildlog_close(c.log);
	stamp_free(&s);
	free(rel);
	return status;
}

/* ---- verify-release ---- */

/* is directory entry name (with or without its trailing '/') the
 * release's top directory (mname's first toplen bytes) or a directory
 * that a file of the manifest lies in? */
static int dir_implied(json_t *files, const char *mname, size_t toplen, const char *name)
{
	size_t n = strlen(name);
	while (n && name[n - 1] == '/')
		n--;
	if (toplen && n == toplen - 1 && !strncmp(name, mname, n))
		return 1;
	if (n <= toplen || strncmp(name, mname, toplen))
		return 0;
	const char *d = name + toplen;
	size_t dn = n - toplen;
	const char *key;
	json_t *val;
	json_object_foreach(files, key, val)
	{
		(void)val;
		if (strlen(key) > dn && !strncmp(key, d, dn) && key[dn] == '/')
			return 1;
	}
	return 0;
}

int cmd_verify_release(int argc, char **argv)
{
	if (argc != 2 || argv[1][0] == '-') {
		fprintf(stderr, "usage: quantmake verify-release ARCHIVE\n");
		return 2;
	}
	const char *path = argv[1];
	ReadEntry *ents;
	size_t n;
	char *text, *mname;
	if (archive_read_all(path, &ents, &n, &text, &mname) < 0) {
		fprintf(stderr, "%s: verify-release: %s\n", argv0, errmsg());
		return 1;
	}
	int status = 0;
	json_t *man = NULL;
	if (!text) {
		fprintf(stderr, "%s: verify-release: %s: no MANIFEST.json in the archive\n", argv0, path);
		status = 1;
		goto out;
	}
	json_error_t je;
	man = json_loads(text, 0, &je);
	json_t *files = man ? json_object_get(man, "files") : NULL;
	if (!json_is_object(files)) {
		fprintf(stderr, "%s: verify-release: %s: %s is not a quantmake manifest%s%s\n", argv0, path, mname,
			man ? "" : ": ", man ? "" : je.text);
		status = 1;
		goto out;
	}
	size_t toplen = strchr(mname, '/') ? (size_t)(strchr(mname, '/') - mname) + 1 : 0;
	int problems = 0;
	const char *key;
	json_t *val;
	char *seen = xcalloc(n + 1, 1);
	json_object_foreach(files, key, val)
	{
		if (!*key || path_outside(key) || key[strlen(key) - 1] == '/') {
			fprintf(stderr, "%s: verify-release: %s: MANIFEST.json lists '%s', not a relative file path "
				"inside the release\n", argv0, path, key);
			problems++;
			continue;
		}
		size_t hit = n;
		for (size_t i = 0; i < n; i++)
			if (!ents[i].kind && strlen(ents[i].name) == toplen + strlen(key) && !strncmp(ents[i].name, mname, toplen) &&
			    !strcmp(ents[i].name + toplen, key)) {
				if (hit < n) {
					fprintf(stderr, "%s: verify-release: %s: duplicate entry: %s\n", argv0, path, ents[i].name);
					problems++;
				}
				hit = i;
				seen[i] = 1;
			}
		if (hit == n) {
			fprintf(stderr, "%s: verify-release: %s: missing file: %.*s%s\n", argv0, path, (int)toplen, mname, key);
			problems++;
			continue;
		}
		const ReadEntry *e = &ents[hit];
		char hex[HASH_HEX_LEN], sh[65];
		json_t *size = json_object_get(val, "size");
		const char *xx = json_string_value(json_object_get(val, "xxh3_128"));
		const char *sha = json_string_value(json_object_get(val, "sha256"));
		const char *bad = NULL;
		if (!json_is_integer(size) || json_integer_value(size) != e->size)
			bad = "size";
		else if (!xx || strcmp(xx, hash_hex(e->xxh, hex)))
			bad = "XXH3-128";
		else if (!sha || strcmp(sha, sha256_hex(e->sha, sh)))
			bad = "SHA-256";
		if (bad) {
			fprintf(stderr, "%s: verify-release: %s: mismatch: %s: its %s differs from MANIFEST.json\n", argv0,
				path, e->name, bad);
			problems++;
		}
	}
	for (size_t i = 0; i < n; i++) {
		if (seen[i] || (!ents[i].kind && !strcmp(ents[i].name, mname)))
			continue;
		if (ents[i].kind && !strcmp(ents[i].kind, "a directory") && dir_implied(files, mname, toplen, ents[i].name))
			continue;
		if (ents[i].kind)
			fprintf(stderr, "%s: verify-release: %s: extra entry: %s is %s (not in MANIFEST.json)\n", argv0,
				path, ents[i].name, ents[i].kind);
		else
			fprintf(stderr, "%s: verify-release: %s: extra file: %s (not in MANIFEST.json)\n", argv0, path,
				ents[i].name);
		problems++;
	}
	free(seen);
	if (problems) {
		fprintf(stderr, "%s: verify-release: %s: %d problem%s\n", argv0, path, problems, problems > 1 ? "s" : "");
		status = 1;
	} else {
		json_t *git = json_object_get(man, "git");
		printf("%s: OK: %zu files match MANIFEST.json (release %s, %s)\n", path, json_object_size(files),
		       json_string_value(json_object_get(man, "release")) ? json_string_value(json_object_get(man, "release")) : "?",
		       json_string_value(json_object_get(git, "describe")) ? json_string_value(json_object_get(git, "describe")) : "?");
	}
out:
	json_decref(man);
	for (size_t i = 0; i < n; i++)
		free(ents[i].name);
	free(ents);
	free(text);
	free(mname);
	return status;
}
