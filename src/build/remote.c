/* remote.c — the remote cache in the scheduler (see action.h; the client
 * is src/remote.h, the entries src/remote_action.h).
 *
 * The event loop never waits for the network. An action's child asks the
 * remote cache on a local miss, before it fetches its inputs: a hit has
 * every output downloaded and verified into the local store and the
 * record written there, and the child ends CHILD_REMOTE without running
 * the stage. After a local build has stored its record, the child uploads
 * the outputs the remote lacks, the record, then the entry (read-write
 * only). A child reports what it did to the parent in its work directory's
 * file "remote", a line each:
 *
 *   hit BLOBS BYTES          served (blobs and bytes downloaded)
 *   up ACTIONS BLOBS BYTES   uploaded (ACTIONS: 1 when the entry went up)
 *   fail CODE WHAT MESSAGE   a REMOTE_E* code; WHAT is lookup or upload
 *
 * The parent adds them up for the summary line. The first failure is one
 * warning line; after a server that does not answer, or three failures,
 * the children it starts from then on do not ask. With -n the parent
 * itself reads the entries and records of the actions that would run (no
 * blob), so the keys after them are known. */
#include "build/action.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "remote_action.h"

enum { MAX_FAILS = 3 };

static char *report_path(const Build *b, const Action *a)
{
	return path_join(b->slots[a->slot], "remote");
}

/* a line to the parent (in the child) */
static void report(const Build *b, const Action *a, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void report(const Build *b, const Action *a, const char *fmt, ...)
{
	StrBuf sb = {0};
	va_list ap;
	va_start(ap, fmt);
	sb_vprintf(&sb, fmt, ap);
	va_end(ap);
	/* one line: a message never breaks the format */
	for (size_t i = 0; i < sb.len; i++)
		if (sb.buf[i] == '\n')
			sb.buf[i] = ' ';
	sb_putc(&sb, '\n');
	char *p = report_path(b, a);
	int fd = open(p, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	if (fd < 0 || write(fd, sb.buf, sb.len) != (ssize_t)sb.len)
		fprintf(stderr, "%s: cannot write '%s': %s\n", argv0, p, strerror(errno));
	if (fd >= 0)
		close(fd);
	free(p);
	sb_release(&sb);
}

int rc_asks(const Build *b)
{
	return b->remote && !b->remote_off;
}

int rc_lookup(Build *b, Action *a, const char *tmpdir)
{
	RemoteAction ra;
	int r = remote_action_get(b->remote, a->keytext, a->key, a->model->name, a->stage->name, &ra);
	if (r == REMOTE_MISSING)
		return r;
	char *why = NULL;
	if (r == REMOTE_FOUND && !key_record_valid(b, &ra.rec, &why, 0)) {
		/* built from other files than this clone holds: a miss */
		free(why);
		remote_action_free(&ra);
		return REMOTE_MISSING;
	}
	if (r == REMOTE_FOUND)
		r = remote_action_fetch(b->remote, b->cache, &ra, tmpdir);
	if (r == REMOTE_FOUND && cache_put_action(b->cache, &ra.rec) < 0)
		r = REMOTE_EFAIL;
	if (r == REMOTE_FOUND) {
		const RemoteStats *st = remote_stats(b->remote);
		report(b, a, "hit %ld %lld", st->blobs_down, (long long)st->bytes_down);
	} else {
		report(b, a, "fail %d lookup %s", r, errmsg());
	}
	remote_action_free(&ra);
	return r;
}

void rc_upload(Build *b, Action *a, const ActionRec *rec)
{
	RemoteStats before = *remote_stats(b->remote);
	int r = remote_action_put(b->remote, b->cache, rec);
	const RemoteStats *st = remote_stats(b->remote);
	report(b, a, "up %d %ld %lld", r == REMOTE_FOUND, st->blobs_up - before.blobs_up,
	       (long long)(st->bytes_up - before.bytes_up));
	if (r != REMOTE_FOUND)
		report(b, a, "fail %d upload %s", r, errmsg());
}

void rc_clear(const Build *b, const Action *a)
{
	if (!b->remote)
		return;
	/* what a killed child left is not this action's */
	char *p = report_path(b, a);
	unlink(p);
	free(p);
}

static void failed(Build *b, int code, const char *what, const char *msg)
{
	if (++b->remote_fails == 1)
		warn("%s: %s", msg, strcmp(what, "upload") ? "building locally" : "not uploaded");
	if (code == REMOTE_EDOWN || b->remote_fails >= MAX_FAILS)
		b->remote_off = 1;
}

void rc_collect(Build *b, const Action *a)
{
	if (!b->remote)
		return;
	char *p = report_path(b, a), *text;
	size_t len;
	if (access(p, F_OK) != 0 || read_file(p, &text, &len) < 0) {
		free(p);
		return;
	}
	unlink(p);
	free(p);
	char *save = NULL;
	for (char *l = strtok_r(text, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
		long n1, n2;
		long long bytes;
		int code, off = 0;
		char what[16];
		if (sscanf(l, "hit %ld %lld", &n1, &bytes) == 2) {
			b->remote_hits++;
			b->remote_down += bytes;
		} else if (sscanf(l, "up %ld %ld %lld", &n1, &n2, &bytes) == 3) {
			b->remote_ups += n1;
			b->remote_up += bytes;
		} else if (sscanf(l, "fail %d %15s %n", &code, what, &off) == 2 && off > 0) {
			failed(b, code, what, l + off);
		}
	}
	free(text);
}

int rc_would_serve(Build *b, Action *a)
{
	if (!rc_asks(b) || b->o->force)
		return 0;
	RemoteAction ra;
	int r = remote_action_get(b->remote, a->keytext, a->key, a->model->name, a->stage->name, &ra);
	char *why = NULL;
	if (r == REMOTE_FOUND && key_record_valid(b, &ra.rec, &why, 0)) {
		if (!b->o->question)
			printf("would fetch %s %s from the remote cache\n", a->stage->name, a->model->name);
		a->rec = ra.rec;
		memset(&ra.rec, 0, sizeof ra.rec);
		remote_action_free(&ra);
		a->have_rec = 1;
		a->remote_hit = 1;
		a->state = A_DONE;
		b->done++;
		b->remote_hits++;
		return 1;
	}
	free(why);
	if (r < 0)
		failed(b, r, "lookup", errmsg());
	remote_action_free(&ra);
	return 0;
}

static void human_size(int64_t n, char buf[32])
{
	if (n < 10000)
		snprintf(buf, 32, "%lld B", (long long)n);
	else if (n < 10000000)
		snprintf(buf, 32, "%.1f kB", (double)n / 1e3);
	else if (n < INT64_C(10000000000))
		snprintf(buf, 32, "%.1f MB", (double)n / 1e6);
	else
		snprintf(buf, 32, "%.1f GB", (double)n / 1e9);
}

void rc_summary(const Build *b)
{
	if (!b->remote)
		return;
	if (b->o->dry_run) {
		if (b->remote_hits)
			printf("%s: remote cache: would serve %ld action%s\n", argv0, b->remote_hits,
			       b->remote_hits == 1 ? "" : "s");
		return;
	}
	if (getenv("QUANTMAKE_STATS"))
		fprintf(stderr, "%s: stats: remote: %ld hits, %ld uploads, %lld bytes down, %lld bytes up, %ld failures\n",
			argv0, b->remote_hits, b->remote_ups, (long long)b->remote_down, (long long)b->remote_up,
			b->remote_fails);
	if (!b->remote_hits && !b->remote_ups && !b->remote_fails)
		return;
	char down[32], up[32];
	human_size(b->remote_down, down);
	human_size(b->remote_up, up);
	printf("%s: remote cache: %ld hits (%s down), %ld uploads (%s up)", argv0, b->remote_hits, down,
	       b->remote_ups, up);
	if (b->remote_fails)
		printf(", %ld failure%s%s", b->remote_fails, b->remote_fails == 1 ? "" : "s",
		       b->remote_off ? " (stopped asking)" : "");
	putchar('\n');
}
