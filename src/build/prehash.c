/* prehash.c — declared inputs hashed ahead (see action.h).
 *
 * A later stage's declared inputs (calibrate's and verify's data: a
 * thousand .npz files, say) can only enter its key once the stages before
 * it have run, since the key also holds the input model's hash. A child
 * process forked at the start lists and hashes them beside the first
 * stages and hands the stat cache's new entries over a pipe, with each
 * action's key lines. The event loop polls the pipe beside the stages'
 * (it never blocks on it): an action whose key needs the lines waits until
 * the child has ended. If an export command of this build may have written
 * the files meanwhile (a stage whose flag says it writes project files), or
 * they lie in the build directory, the lines are not trusted and the files
 * are stat-ed again: the stat cache then finds the hash of each file that
 * did not change and hashes anew one that did. A process, not a thread:
 * the stages are forked meanwhile, and a fork must not catch another
 * thread holding a lock. Errors are left to key_make, which reports them.
 *
 * The pipe carries: u64 length + the stat cache's new entries
 * (statcache_fresh), then per action: u64 index, u64 length, key lines. */
#include "build/action.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

typedef struct Prehash {
	pid_t pid;
	int fd;                /* the pipe's read end (non-blocking) */
	StrBuf got;            /* what was read so far */
} Prehash;

static void put_u64(StrBuf *sb, uint64_t v)
{
	sb_add(sb, &v, sizeof v);
}

static int wants_prehash(const Action *a)
{
	return a->needed && a->in && a->stage->declared_inputs;
}

static _Noreturn void prehash_child(Build *b, int fd)
{
	StrBuf lists = {0};
	for (size_t i = 0; i < b->nacts; i++) {
		const Action *a = b->acts[i];
		if (!wants_prehash(a))
			continue;
		StrBuf sb = {0};
		if (key_declared_lines(b, a, &sb, 1) == 0) {
			put_u64(&lists, i);
			put_u64(&lists, sb.len);
			sb_add(&lists, sb.buf, sb.len);
		}
		sb_release(&sb);
	}
	size_t len;
	char *sc = statcache_fresh(b->sc, &len);
	StrBuf all = {0};
	put_u64(&all, len);
	sb_add(&all, sc, len);
	sb_add(&all, lists.buf, lists.len);
	if (write_all(fd, all.buf, all.len) < 0)
		_exit(1);
	_exit(0);
}

/* not with -j1 or under make's jobserver, whose budget is one process at a
 * time or not ours */
void prehash_start(Build *b)
{
	if (b->o->jobs < 2 || b->o->jobserver)
		return;
	int any = 0;
	for (size_t i = 0; i < b->nacts && !any; i++)
		any = wants_prehash(b->acts[i]);
	b->ph_trust = 1;
	for (size_t i = 0; i < b->nacts; i++)
		if (b->acts[i]->needed && b->acts[i]->stage->writes_project &&
		    b->acts[i]->stage->writes_project(b->acts[i]->model))
			b->ph_trust = 0;
	int pfd[2];
	if (!any || pipe2(pfd, O_CLOEXEC) < 0)
		return;
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0) {
		close(pfd[0]);
		prehash_child(b, pfd[1]);
	}
	close(pfd[1]);
	if (pid < 0) {
		close(pfd[0]);
		return;
	}
	fcntl(pfd[0], F_SETFL, O_NONBLOCK);
	b->ph = xcalloc(1, sizeof *b->ph);
	b->ph->pid = pid;
	b->ph->fd = pfd[0];
}

int prehash_fd(const Build *b)
{
	return b->ph ? b->ph->fd : -1;
}

int prehash_awaited(const Build *b, const Action *a)
{
	return b->ph && wants_prehash(a);
}

static int get_u64(const char **p, const char *end, uint64_t *v)
{
	if ((size_t)(end - *p) < sizeof *v)
		return -1;
	memcpy(v, *p, sizeof *v);
	*p += sizeof *v;
	return 0;
}

static void take(Build *b, const char *data, size_t len)
{
	const char *p = data, *end = data + len;
	uint64_t n, i;
	if (get_u64(&p, end, &n) < 0 || n > (size_t)(end - p) || statcache_merge(b->sc, p, n) < 0)
		return;
	p += n;
	while (get_u64(&p, end, &i) == 0 && get_u64(&p, end, &n) == 0 && i < b->nacts && n <= (size_t)(end - p)) {
		Action *a = b->acts[i];
		free(a->pre);
		a->pre = xstrndup(p, n);
		p += n;
	}
}

/* reap the child; its lines are taken only if it ended well */
static void reap(Build *b, int use)
{
	Prehash *ph = b->ph;
	close(ph->fd);
	int st;
	while (waitpid(ph->pid, &st, 0) < 0 && errno == EINTR)
		;
	if (use && WIFEXITED(st) && WEXITSTATUS(st) == 0)
		take(b, ph->got.buf, ph->got.len);
	sb_release(&ph->got);
	free(ph);
	b->ph = NULL;
}

int prehash_poll(Build *b)
{
	Prehash *ph = b->ph;
	if (!ph)
		return 0;
	char buf[65536];
	for (;;) {
		ssize_t n = read(ph->fd, buf, sizeof buf);
		if (n > 0) {
			sb_add(&ph->got, buf, (size_t)n);
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return 1;
		break; /* end of file, or an error: the child is done */
	}
	reap(b, 1);
	return 0;
}

void prehash_finish(Build *b, int kill_it)
{
	if (!b->ph)
		return;
	if (kill_it) {
		kill(b->ph->pid, SIGKILL);
		reap(b, 0);
		return;
	}
	fcntl(b->ph->fd, F_SETFL, 0);
	prehash_poll(b);
}
