/* key.c — action keys, --explain and record checks (see action.h).
 *
 * A key hashes the canonical key text: the stage name and version, the
 * model name, the parameters that are part of the key, the content hashes
 * of the input model(s) and of every declared input file, and the tool
 * version — never an absolute path, a time or a git revision, so two
 * clones or branches with the same inputs share every hit. */
#include "build/action.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int key_in_build_dir(const Build *b, const char *path)
{
	const char *bd = b->o->build_dir;
	char *full = bd[0] == '/' ? path_join(b->p->root, path) : NULL;
	const char *p = full ? full : path;
	size_t n = strlen(bd);
	while (n > 1 && bd[n - 1] == '/')
		n--;
	int in = !strncmp(p, bd, n) && (p[n] == '/' || !p[n]);
	free(full);
	return in;
}

int key_declared_lines(Build *b, const Action *a, StrBuf *sb, int ahead)
{
	char hex[HASH_HEX_LEN];
	PtrVec files = {0};
	int r = a->stage->declared_inputs(a->model, b->p->root, &files);
	for (size_t i = 0; r == 0 && ahead && i < files.n; i++)
		r = key_in_build_dir(b, files.v[i]) ? -1 : 0;
	if (r == 0)
		pv_sort_str(&files);
	for (size_t i = 0; r == 0 && i < files.n; i++) {
		Hash h;
		if (i && !strcmp(files.v[i], files.v[i - 1]))
			continue;
		if (statcache_hash(b->sc, files.v[i], &h) < 0) {
			r = -1;
			break;
		}
		sb_puts(sb, "file ");
		sb_puts(sb, hash_hex(h, hex));
		sb_putc(sb, ' ');
		sb_puts(sb, files.v[i]);
		sb_putc(sb, '\n');
	}
	pv_free_all(&files);
	return r;
}

/* "KIND HASH NAME" for each output of src */
static void output_lines(StrBuf *sb, const char *kind, const Action *src)
{
	char hex[HASH_HEX_LEN];
	for (size_t i = 0; i < src->rec.nouts; i++) {
		sb_puts(sb, kind);
		sb_putc(sb, ' ');
		sb_puts(sb, hash_hex(src->rec.outs[i].h, hex));
		sb_putc(sb, ' ');
		sb_puts(sb, src->rec.outs[i].name);
		sb_putc(sb, '\n');
	}
}

int key_make(Build *b, Action *a)
{
	StrBuf sb = {0};
	char num[32];
	sb_puts(&sb, "quantmake-key 1\ntool " QM_VERSION "\nstage ");
	sb_puts(&sb, a->stage->name);
	snprintf(num, sizeof num, " %d\nmodel ", a->stage->version);
	sb_puts(&sb, num);
	sb_puts(&sb, a->model->name);
	sb_putc(&sb, '\n');
	for (const StageParam *p = a->stage->params; p->key; p++) {
		const char *v = stage_param_value(a->model, p->key);
		if (!v || !p->in_key)
			continue;
		sb_puts(&sb, "param ");
		sb_puts(&sb, p->key);
		sb_putc(&sb, '=');
		sb_puts(&sb, v);
		sb_putc(&sb, '\n');
	}
	if (a->stage->key_extra)
		a->stage->key_extra(a->model, &sb);
	if (a->in)
		output_lines(&sb, "input", a->in);
	for (int k = 0; k < NAUX; k++)
		if (a->aux[k])
			output_lines(&sb, aux_kind[k].key, a->aux[k]);
	if (a->stage->declared_inputs) {
		if (a->pre && b->ph_trust) {
			sb_puts(&sb, a->pre);
		} else if (key_declared_lines(b, a, &sb, 0) < 0) {
			sb_release(&sb);
			return -1;
		}
	}
	free(a->keytext);
	a->keytext = sb_detach(&sb);
	a->key = hash_buf(a->keytext, strlen(a->keytext));
	return 0;
}

/* the value of "param KEY=VALUE" line l in text, or NULL (malloc'd) */
static char *param_in(const char *text, const char *l)
{
	const char *eq = strchr(l, '=');
	if (!eq)
		return NULL;
	size_t n = (size_t)(eq - l) + 1;
	for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
		if (!strncmp(p, l, n)) {
			const char *e = strchr(p, '\n');
			return e ? xstrndup(p + n, (size_t)(e - p - (ptrdiff_t)n)) : xstrdup(p + n);
		}
	return NULL;
}

char *key_explain(Build *b, const Action *a)
{
	LogEntry *e = buildlog_get(b->log, a->model->name, a->stage->name);
	if (!e)
		return xstrdup("no previous build of it recorded here");
	const char *old = e->rec.keytext;
	StrBuf sb = {0};
	char *save = NULL;
	/* lines of the new text missing from the old one: changed items */
	char *cur = xstrdup(a->keytext);
	for (char *l = strtok_r(cur, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
		char *needle = xasprintf("\n%s\n", l);
		int found = strstr(old, needle) != NULL || (strncmp(old, l, strlen(l)) == 0);
		free(needle);
		if (found)
			continue;
		const char *sep = sb.len ? "; " : "";
		if (!strncmp(l, "param ", 6)) {
			char *was = param_in(old, l);
			const char *eq = strchr(l, '=');
			if (was && eq)
				sb_printf(&sb, "%s%.*s changed: %s -> %s", sep, (int)(eq - l - 6), l + 6, was, eq + 1);
			else
				sb_printf(&sb, "%s%s set (was its default)", sep, l + 6);
			free(was);
		} else if (!strncmp(l, "file ", 5)) {
			sb_printf(&sb, "%sfile %s changed", sep, l + 5 + 33);
		} else if (!strncmp(l, "input ", 6)) {
			sb_printf(&sb, "%sinput %s changed", sep, l + 6 + 33);
		} else if (!strncmp(l, "tool ", 5)) {
			sb_printf(&sb, "%squantmake's version changed", sep);
		} else {
			sb_printf(&sb, "%s%s changed", sep, l);
		}
	}
	free(cur);
	/* parameters and files that disappeared */
	cur = xstrdup(old);
	for (char *l = strtok_r(cur, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
		if (!strncmp(l, "param ", 6)) {
			char *eq = strchr(l, '=');
			if (!eq)
				continue;
			char *prefix = xstrndup(l, (size_t)(eq - l + 1));
			if (!strstr(a->keytext, prefix))
				sb_printf(&sb, "%s%.*s removed (was %s)", sb.len ? "; " : "", (int)(eq - l - 6), l + 6,
					  eq + 1);
			free(prefix);
		} else if (!strncmp(l, "file ", 5) && strlen(l) > 5 + 33) {
			char *tail = xasprintf(" %s\n", l + 5 + 33);
			if (!strstr(a->keytext, tail))
				sb_printf(&sb, "%sfile %s no longer read", sb.len ? "; " : "", l + 5 + 33);
			free(tail);
		}
	}
	free(cur);
	if (!sb.len)
		sb_puts(&sb, "inputs unchanged, but no cached result (evicted or never stored here)");
	return sb_detach(&sb);
}

int key_record_valid(Build *b, const ActionRec *r, char **why, int check_objects)
{
	for (size_t i = 0; i < r->ndeps; i++) {
		Hash h;
		if (statcache_hash(b->sc, r->deps[i].path, &h) < 0 || !hash_eq(h, r->deps[i].h)) {
			*why = xasprintf("file %s changed", r->deps[i].path);
			return 0;
		}
	}
	return !check_objects || key_outputs_present(b, r, why);
}

int key_outputs_present(Build *b, const ActionRec *r, char **why)
{
	for (size_t i = 0; i < r->nouts; i++) {
		if (!cache_has_object(b->cache, r->outs[i].h)) {
			*why = xasprintf("output %s is missing from the cache", r->outs[i].name);
			return 0;
		}
	}
	return 1;
}
