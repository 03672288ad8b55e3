/* build.c — build_run: a build from setup to the last line it prints
 * (see build.h; the scheduler's parts are listed in build/action.h).
 *
 * setup() expands the models into actions and marks what the targets
 * need; the event loop (loop.c) resolves and runs them; the targets'
 * outputs are then materialized into the build directory by copying from
 * the store (never linking: editing build/ cannot corrupt the cache). A
 * corrupt object found there invalidates its action and the loop runs
 * again, at most a few rounds. */
#include "build/action.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Copy the targets' outputs into the build directory. Returns 0, -1 on an
 * I/O error, 1 when a corrupt object invalidated an action (run again). */
/* where a target's outputs go in the build directory (malloc'd) */
static char *target_dir(const Build *b, const Action *a)
{
	return a->last ? path_join(b->o->build_dir, a->model->name)
		       : xasprintf("%s/%s/%s", b->o->build_dir, a->model->name, a->stage->name);
}

/* does the build directory's file dst hold the object's bytes already */
static int in_place(Build *b, const char *dst, Hash want)
{
	Hash h;
	return access(dst, F_OK) == 0 && statcache_hash(b->sc, dst, &h) == 0 && hash_eq(h, want);
}

static int materialize(Build *b)
{
	int again = 0;
	for (size_t i = 0; i < b->nacts; i++) {
		Action *a = b->acts[i];
		if (!a->target || a->state != A_DONE)
			continue;
		char *dir = target_dir(b, a);
		if (a->last) {
			/* the whole chain is built: an earlier failure's leftovers are stale */
			char *failed = path_join(dir, "failed");
			if (access(failed, F_OK) == 0)
				rmtree(failed);
			free(failed);
		}
		for (size_t j = 0; j < a->rec.nouts; j++) {
			const ActionOut *o = &a->rec.outs[j];
			char *dst = path_join(dir, o->name), *dd = path_dir(dst);
			if (in_place(b, dst, o->h)) {
				free(dst);
				free(dd);
				continue;
			}
			if (mkdirs(dd) < 0) {
				free(dst);
				free(dd);
				free(dir);
				return error_prefix("build directory");
			}
			int r = cache_fetch(b->cache, o->h, dst, 0644);
			if (r == CACHE_GONE) {
				fprintf(stderr, "%s: %s; rebuilding %s:%s\n", argv0, errmsg(), a->model->name, a->stage->name);
				a->tries++;
				loop_invalidate(b, a);
				again = 1;
			} else if (r < 0) {
				free(dst);
				free(dd);
				free(dir);
				return -1;
			} else {
				statcache_put(b->sc, dst, o->h);
			}
			free(dst);
			free(dd);
			if (again)
				break;
		}
		free(dir);
	}
	return again;
}

/* -n, -q: the targets' files in the build directory that a build would
 * copy from the store (missing, edited, or another branch's), each named
 * unless quiet; their count */
static size_t would_restore(Build *b, int quiet)
{
	size_t n = 0;
	for (size_t i = 0; i < b->nacts; i++) {
		Action *a = b->acts[i];
		if (!a->target || a->state != A_DONE || !a->have_rec)
			continue;
		char *dir = target_dir(b, a);
		for (size_t j = 0; j < a->rec.nouts; j++) {
			char *dst = path_join(dir, a->rec.outs[j].name);
			if (!in_place(b, dst, a->rec.outs[j].h)) {
				if (!quiet)
					printf("would restore %s from the cache\n", dst);
				n++;
			}
			free(dst);
		}
		free(dir);
	}
	return n;
}

/* the cache epoch the build log was written against */
static int write_epoch(const char *path, const char *epoch)
{
	char *dir = path_dir(path);
	int r = mkdirs(dir);
	free(dir);
	return r < 0 ? -1 : write_file_atomic(path, epoch, strlen(epoch));
}

static int setup(Build *b, Project *p, const BuildOpts *o, int ntargets, char **targets)
{
	memset(b, 0, sizeof *b);
	b->p = p;
	b->o = o;
	if (graph_expand(b) < 0 || graph_mark(b, ntargets, targets) < 0)
		return -1;
	return 0;
}

static void teardown(Build *b)
{
	prehash_finish(b, 1);
	for (size_t i = 0; i < b->nacts; i++) {
		Action *a = b->acts[i];
		if (a->have_rec && !a->borrowed)
			action_rec_free(&a->rec);
		free(a->keytext);
		free(a->why);
		free(a->pre);
		sb_release(&a->log);
		free(a);
	}
	free(b->acts);
	for (size_t i = 0; i < b->nslots; i++)
		free(b->slots[i]);
	free(b->slots);
	free(b->slot_busy);
}

/* make and ninja end a build with failures by naming them all */
static void failed_summary(const Build *b)
{
	StrBuf sb = {0};
	size_t n = 0, skipped = 0;
	for (size_t i = 0; i < b->nacts; i++) {
		const Action *a = b->acts[i];
		if (a->state == A_FAILED) {
			sb_printf(&sb, "%s%s:%s", n ? ", " : "", a->model->name, a->stage->name);
			n++;
		}
		skipped += a->needed && a->state == A_SKIPPED;
	}
	if (n)
		fprintf(stderr, "%s: %zu action%s failed: %s\n", argv0, n, n == 1 ? "" : "s", sb.buf);
	if (n && skipped)
		fprintf(stderr, "%s: %zu action%s not run: %s input failed\n", argv0, skipped, skipped == 1 ? "" : "s",
			skipped == 1 ? "its" : "their");
	sb_release(&sb);
}

int build_run(Project *p, const BuildOpts *o, int ntargets, char **targets)
{
	Build b;
	if (setup(&b, p, o, ntargets, targets) < 0) {
		fprintf(stderr, "%s: %s\n", argv0, errmsg());
		teardown(&b);
		return 2;
	}
	if (o->shards)
		shard_select(&b);
	b.cache = cache_open(o->cache_dir);
	if (!b.cache) {
		fprintf(stderr, "%s: %s\n", argv0, errmsg());
		teardown(&b);
		return 2;
	}
	if (o->remote)
		b.remote = remote_new(o->remote);
	char *scpath = xasprintf("%s/.quantmake/statcache", o->build_dir);
	b.sc = statcache_open(scpath);
	free(scpath);
	char *logpath = xasprintf("%s/.quantmake/log", o->build_dir);
	b.log = buildlog_open(logpath);
	free(logpath);
	/* the log stands in for the cache's records only if it was written
	 * against this cache and nothing was removed from it since */
	char *epath = xasprintf("%s/.quantmake/cache-epoch", o->build_dir), *seen = NULL;
	size_t elen;
	b.log_trusted = read_file(epath, &seen, &elen) == 0 && !strcmp(seen, cache_epoch(b.cache));
	free(seen);
	prehash_start(&b);
	for (size_t i = 0; i < b.nacts; i++)
		b.total += b.acts[i]->needed;
	b.tty = isatty(1) && !o->dry_run && getenv("CI") == NULL;
	if (loop_signals_init() < 0)
		fatalx(1, "%s", errmsg());
	int status = 0;
	for (int round = 0; round < 4; round++) {
		status = loop_run(&b);
		if (status || b.o->dry_run)
			break;
		int m = materialize(&b);
		if (m < 0) {
			fprintf(stderr, "%s: %s\n", argv0, errmsg());
			status = 1;
			break;
		}
		if (m == 0)
			break;
	}
	size_t ran = 0, hits = 0;
	for (size_t i = 0; i < b.nacts; i++) {
		const Action *a = b.acts[i];
		ran += a->state == A_DONE && !a->hit && !a->remote_hit && a->needed;
		hits += a->hit;
	}
	if (status == 0 && b.failed)
		status = 1;
	rc_summary(&b);
	size_t restore = status == 0 && o->dry_run ? would_restore(&b, o->question) : 0;
	if (o->question) {
		/* make -q: nothing printed; 1 when anything would run or be
		 * restored */
		if (status == 0 && (b.done != hits || restore))
			status = 1;
	} else if (status == 0 && !o->dry_run && ran == 0 && !b.remote_hits) {
		printf("%s: nothing to do: %zu actions up to date\n", argv0, hits);
	} else if (status == 0 && o->dry_run && b.done == hits && !restore) {
		printf("%s: nothing to do: %zu actions up to date\n", argv0, hits);
	}
	if (status == 2)
		fprintf(stderr, "%s: %s\n", argv0, errmsg());
	else if (status > 128)
		fprintf(stderr, "%s: interrupted: stopped all actions; nothing partial was stored\n", argv0);
	else if (status == 1 && b.failed)
		failed_summary(&b);
	if (getenv("QUANTMAKE_STATS"))
		fprintf(stderr, "%s: stats: %zu actions run, %zu cache hits, %ld files read for hashing\n",
			argv0, ran, hits, statcache_reads(b.sc));
	prehash_finish(&b, 0);
	if (statcache_save(b.sc) < 0)
		warn("%s", errmsg());
	js_give_all();
	if (buildlog_save(b.log) < 0)
		warn("%s", errmsg());
	else if (!b.log_trusted && !o->dry_run && status < 128 && write_epoch(epath, cache_epoch(b.cache)) < 0)
		warn("%s", errmsg());
	free(epath);
	buildlog_close(b.log);
	statcache_close(b.sc);
	cache_close(b.cache);
	remote_free(b.remote);
	loop_signals_close();
	teardown(&b);
	return status;
}

int build_graph(Project *p, const BuildOpts *o, int ntargets, char **targets)
{
	Build b;
	if (setup(&b, p, o, ntargets, targets) < 0) {
		fprintf(stderr, "%s: %s\n", argv0, errmsg());
		teardown(&b);
		return 2;
	}
	graph_print(&b);
	teardown(&b);
	return 0;
}
