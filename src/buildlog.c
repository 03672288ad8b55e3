/* buildlog.c — see buildlog.h.
 *
 * File format, version 1 (text):
 *   quantmake-log 1
 *   a MODEL STAGE KEYHEX TOUCHED NOUTS NDEPS KEYTEXTLEN
 *   o HEX SIZE NAME            NOUTS lines
 *   d HEX PATH                 NDEPS lines
 *   KEYTEXT                    KEYTEXTLEN bytes, then a newline
 * Entries repeat; a file that does not parse is ignored with a warning. */
#include "buildlog.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "strmap.h"
#include "util.h"

struct BuildLog {
	char *path;
	StrMap tab;          /* id -> LogEntry *, keyed by the entry's own id */
	int dirty;
};

static void entry_free(LogEntry *e)
{
	free(e->id);
	action_rec_free(&e->rec);
	free(e);
}

/* the entry of id (malloc'd: the table takes it), a new empty one when
 * there was none (*added) */
static LogEntry *entry_add(BuildLog *l, char *id, int *added)
{
	StrMapEnt *se = strmap_add(&l->tab, id, added);
	if (!*added) {
		free(id);
		return se->v.p;
	}
	LogEntry *e = xcalloc(1, sizeof *e);
	e->id = id;
	se->v.p = e;
	return e;
}

/* free every entry and leave the table empty */
static void entries_free(BuildLog *l)
{
	for (StrMapEnt *se = NULL; (se = strmap_next(&l->tab, se));)
		entry_free(se->v.p);
	strmap_free(&l->tab);
}

static char *mkid(const char *model, const char *stage)
{
	size_t lm = strlen(model), ls = strlen(stage);
	char *id = xmalloc(lm + ls + 2);
	memcpy(id, model, lm);
	id[lm] = '\t';
	memcpy(id + lm + 1, stage, ls + 1);
	return id;
}

LogEntry *buildlog_get(BuildLog *l, const char *model, const char *stage)
{
	char *id = mkid(model, stage);
	LogEntry *e = strmap_get(&l->tab, id);
	free(id);
	return e;
}

LogEntry *buildlog_put(BuildLog *l, const char *model, const char *stage, const ActionRec *rec)
{
	int added;
	LogEntry *e = entry_add(l, mkid(model, stage), &added);
	if (!added) {
		if (hash_eq(e->rec.key, rec->key) && e->rec.nouts == rec->nouts)
			return e;
		action_rec_free(&e->rec);
	}
	action_rec_copy(&e->rec, rec);
	l->dirty = 1;
	return e;
}

void buildlog_drop(BuildLog *l, const char *model, const char *stage)
{
	char *id = mkid(model, stage);
	LogEntry *e = strmap_get(&l->tab, id);
	if (e) {
		strmap_del(&l->tab, id);
		entry_free(e);
		l->dirty = 1;
	}
	free(id);
}

static int parse(BuildLog *l, char *p, char *end)
{
	char *nl = memchr(p, '\n', (size_t)(end - p));
	if (!nl || strncmp(p, "quantmake-log 1\n", 16))
		return -1;
	p = nl + 1;
	while (p < end) {
		nl = memchr(p, '\n', (size_t)(end - p));
		if (!nl)
			return -1;
		*nl = 0;
		/* a MODEL STAGE KEY TOUCHED NOUTS NDEPS KTLEN (split by hand: this
		 * is read on every build) */
		char *f[8];
		int nf = 0;
		for (char *q = p; nf < 8;) {
			f[nf++] = q;
			q = strchr(q, ' ');
			if (!q)
				break;
			*q++ = 0;
		}
		if (nf != 8 || strcmp(f[0], "a"))
			return -1;
		const char *model = f[1], *stage = f[2];
		long long touched = strtoll(f[4], NULL, 10);
		size_t nouts = strtoull(f[5], NULL, 10), ndeps = strtoull(f[6], NULL, 10);
		size_t ktlen = strtoull(f[7], NULL, 10);
		ActionRec r = {0};
		if (strlen(f[3]) != 32 || hash_parse(f[3], &r.key) < 0)
			return -1;
		p = nl + 1;
		r.outs = xcalloc(nouts + 1, sizeof *r.outs);
		r.deps = xcalloc(ndeps + 1, sizeof *r.deps);
		r.stage = xstrdup(stage);
		r.model = xstrdup(model);
		int bad = 0;
		for (size_t i = 0; i < nouts + ndeps && !bad; i++) {
			nl = memchr(p, '\n', (size_t)(end - p));
			if (!nl || nl - p < 36) {
				bad = 1;
				break;
			}
			*nl = 0;
			if (i < nouts) {
				ActionOut *o = &r.outs[r.nouts];
				char *e2;
				if (p[0] != 'o' || hash_parse(p + 2, &o->h) < 0)
					bad = 1;
				else {
					o->size = strtoll(p + 35, &e2, 10);
					if (*e2 != ' ')
						bad = 1;
					else {
						o->name = xstrdup(e2 + 1);
						r.nouts++;
					}
				}
			} else {
				ActionDep *d = &r.deps[r.ndeps];
				if (p[0] != 'd' || hash_parse(p + 2, &d->h) < 0)
					bad = 1;
				else {
					d->path = xstrdup(p + 35);
					r.ndeps++;
				}
			}
			p = nl + 1;
		}
		if (bad || (size_t)(end - p) < ktlen + 1) {
			action_rec_free(&r);
			return -1;
		}
		r.keytext = xstrndup(p, ktlen);
		p += ktlen + 1;
		/* move r into the table (no copy: this runs for every action) */
		int added;
		LogEntry *e = entry_add(l, mkid(model, stage), &added);
		if (!added)
			action_rec_free(&e->rec);
		e->rec = r;
		e->touched = touched;
	}
	return 0;
}

BuildLog *buildlog_open(const char *path)
{
	BuildLog *l = xcalloc(1, sizeof *l);
	l->path = xstrdup(path);
	char *data;
	size_t len;
	if (access(path, F_OK) == 0 && read_file(path, &data, &len) == 0) {
		if (parse(l, data, data + len) < 0) {
			warn("ignoring corrupt build log '%s'", path);
			entries_free(l);
		}
		free(data);
	}
	l->dirty = 0;
	return l;
}

int buildlog_save(BuildLog *l)
{
	if (!l->dirty)
		return 0;
	StrBuf sb = {0};
	char hex[HASH_HEX_LEN];
	sb_puts(&sb, "quantmake-log 1\n");
	for (StrMapEnt *se = NULL; (se = strmap_next(&l->tab, se));) {
		const LogEntry *e = se->v.p;
		const ActionRec *r = &e->rec;
		char *tab = strchr(e->id, '\t');
		sb_printf(&sb, "a %.*s %s %s %lld %zu %zu %zu\n", (int)(tab - e->id), e->id, tab + 1,
			  hash_hex(r->key, hex), (long long)e->touched, r->nouts, r->ndeps, strlen(r->keytext));
		for (size_t j = 0; j < r->nouts; j++)
			sb_printf(&sb, "o %s %lld %s\n", hash_hex(r->outs[j].h, hex), (long long)r->outs[j].size,
				  r->outs[j].name);
		for (size_t j = 0; j < r->ndeps; j++)
			sb_printf(&sb, "d %s %s\n", hash_hex(r->deps[j].h, hex), r->deps[j].path);
		sb_puts(&sb, r->keytext);
		sb_putc(&sb, '\n');
	}
	char *dir = path_dir(l->path);
	int rc = mkdirs(dir);
	free(dir);
	if (rc == 0)
		rc = write_file_atomic(l->path, sb.buf, sb.len);
	sb_release(&sb);
	if (rc == 0)
		l->dirty = 0;
	return rc;
}

void buildlog_close(BuildLog *l)
{
	if (!l)
		return;
	entries_free(l);
	free(l->path);
	free(l);
}
