/* loop.c — the event loop (see action.h).
 *
 * One poll() over the running actions' output pipes, the prehash's pipe,
 * make's jobserver and a self-pipe for signals. Each turn resolves the
 * pending actions whose inputs are built (a key, then a record: a hit, or
 * a reason to run), starts what the -j budget allows and reaps what ended.
 *
 * Invariants (each turn keeps them; the hang of a forgotten child came
 * from breaking the first):
 * - an action is A_RUNNING exactly while its child is unreaped, and the
 *   number running is counted from the states, never kept apart;
 * - a running action is never reset: if an input it took is rebuilt
 *   meanwhile it is marked stale and resolved again when it ends;
 * - an action that took an invalidated action's outputs is resolved again
 *   too (its key names the old bytes), and so on downstream. */
#include "build/action.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static volatile sig_atomic_t got_signal;
static int sigpipe_r = -1, sigpipe_w = -1;

static void on_signal(int sig)
{
	got_signal = sig;
	if (sigpipe_w >= 0) {
		int e = errno;
		ssize_t r = write(sigpipe_w, "x", 1);
		(void)r;
		errno = e;
	}
}

int loop_signals_init(void)
{
	int pfd[2];
	if (pipe2(pfd, O_CLOEXEC | O_NONBLOCK) < 0)
		return error("cannot create a pipe:");
	sigpipe_r = pfd[0];
	sigpipe_w = pfd[1];
	struct sigaction sa = {.sa_handler = on_signal};
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	return 0;
}

void loop_signals_close(void)
{
	int w = sigpipe_w;
	sigpipe_w = -1;
	if (w >= 0)
		close(w);
	if (sigpipe_r >= 0)
		close(sigpipe_r);
	sigpipe_r = -1;
}

static void remember(Build *b, const Action *a)
{
	if (!b->o->dry_run && a->have_rec)
		buildlog_put(b->log, a->model->name, a->stage->name, &a->rec);
}

static void forget_rec(Action *a)
{
	if (a->have_rec && !a->borrowed)
		action_rec_free(&a->rec);
	a->have_rec = a->borrowed = 0;
}

/* back to pending, to be resolved (keyed) again */
static void reopen(Build *b, Action *a)
{
	forget_rec(a);
	if (a->state == A_DONE && b->done)
		b->done--;
	if (a->state == A_DONE && a->hit && b->hits)
		b->hits--;
	else if (a->state == A_DONE && !a->hit && b->ran)
		b->ran--;
	a->state = A_PENDING;
	a->hit = a->remote_hit = 0;
	free(a->why);
	a->why = NULL;
}

/* the actions that took a's outputs are keyed again; running ones when
 * they end */
static void reopen_downstream(Build *b, const Action *a)
{
	for (size_t i = 0; i < b->nacts; i++) {
		Action *d = b->acts[i];
		if (!action_takes_from(d, a))
			continue;
		if (d->state == A_RUNNING) {
			d->stale = 1;
		} else if (d->state == A_DONE) {
			reopen(b, d);
			reopen_downstream(b, d);
		}
	}
}

void loop_invalidate(Build *b, Action *a)
{
	if (a->state == A_RUNNING || a->state == A_PENDING)
		return; /* being built again already */
	if (a->keytext)
		cache_drop_action(b->cache, a->key);
	buildlog_drop(b->log, a->model->name, a->stage->name);
	reopen(b, a);
	reopen_downstream(b, a);
}

/* Resolve a pending action whose inputs are built: 1 when it needs to
 * run (a->why says why), 0 when resolved from a record, -1 on a planning
 * error (exit 2). */
static int resolve(Build *b, Action *a)
{
	if (key_make(b, a) < 0)
		return -1;
	free(a->why);
	a->why = NULL;
	if (b->o->force && a->tries == 0) {
		a->why = xstrdup("-B given");
		return 1;
	}
	char *why = NULL;
	LogEntry *e = buildlog_get(b->log, a->model->name, a->stage->name);
	if (e && hash_eq(e->rec.key, a->key) && key_record_valid(b, &e->rec, &why, 0) &&
	    b->log_trusted) {
		/* the fast path of a no-op: known from the build log */
		a->rec = e->rec; /* borrowed: the log outlives the build */
		a->borrowed = 1;
		a->have_rec = 1;
		a->hit = 1;
		a->state = A_DONE;
		b->done++;
		b->hits++;
		struct timespec now;
		clock_gettime(CLOCK_REALTIME, &now);
		if (now.tv_sec - e->touched > 3600) {
			cache_touch_action(b->cache, a->key);
			e->touched = now.tv_sec;
			buildlog_put(b->log, a->model->name, a->stage->name, &a->rec)->touched = now.tv_sec;
		}
		return 0;
	}
	free(why);
	why = NULL;
	ActionRec rec;
	if (cache_get_action(b->cache, a->key, &rec) == 1) {
		if (key_record_valid(b, &rec, &why, 1)) {
			a->rec = rec;
			a->have_rec = 1;
			a->hit = 1;
			a->state = A_DONE;
			b->done++;
			b->hits++;
			cache_touch_action(b->cache, a->key);
			remember(b, a);
			return 0;
		}
		action_rec_free(&rec);
		a->why = why;
		return 1;
	}
	a->why = key_explain(b, a);
	return 1;
}

/* the input of a whose object was corrupt or gone, by its child's exit
 * status, or NULL */
static Action *corrupt_input(const Action *a, int code)
{
	if (code == CHILD_CORRUPT_INPUT)
		return a->in;
	if (code >= CHILD_CORRUPT_AUX && code < CHILD_CORRUPT_AUX + NAUX)
		return a->aux[code - CHILD_CORRUPT_AUX];
	return NULL;
}

/* the discovered deps that were not changed after the action started are
 * known to have the recorded hashes */
static void trust_deps(Build *b, const Action *a)
{
	for (size_t i = 0; i < a->rec.ndeps; i++) {
		struct stat st;
		if (stat(a->rec.deps[i].path, &st) == 0 &&
		    (st.st_ctim.tv_sec < a->start_real.tv_sec ||
		     (st.st_ctim.tv_sec == a->start_real.tv_sec && st.st_ctim.tv_nsec < a->start_real.tv_nsec)))
			statcache_put(b->sc, a->rec.deps[i].path, a->rec.deps[i].h);
	}
}

static void fail(Build *b, Action *a, const char *why)
{
	a->state = A_FAILED;
	b->failed = 1;
	fflush(stdout);
	fprintf(stderr, "FAILED: %s %s\n", a->stage->name, a->model->name);
	if (a->log.len)
		fputs(a->log.buf, stderr);
	if (why)
		fprintf(stderr, "%s: %s:%s: %s\n", argv0, a->model->name, a->stage->name, why);
}

/* skip what depends on a failed action, without printing it as failed */
static void skip_downstream(Build *b, const Action *a)
{
	for (size_t i = 0; i < b->nacts; i++) {
		Action *d = b->acts[i];
		if (action_takes_from(d, a) && d->state == A_PENDING) {
			d->state = A_SKIPPED;
			skip_downstream(b, d);
		}
	}
}

static void finish(Build *b, Action *a, int status)
{
	double dt = now_sec() - a->start;
	a->pid = 0;
	b->slot_busy[a->slot] = 0;
	if (a->fd >= 0) {
		close(a->fd);
		a->fd = -1;
	}
	a->state = A_PENDING; /* until decided below: never left running */
	int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
	if (b->tty)
		fputs("\r\033[K", stdout);
	Action *up = WIFEXITED(status) ? corrupt_input(a, code) : NULL;
	rc_collect(b, a);
	if (code == CHILD_BUILT || code == CHILD_FOUND || code == CHILD_REMOTE) {
		char *why = NULL;
		if (cache_get_action(b->cache, a->key, &a->rec) == 1) {
			a->have_rec = 1;
			/* the child hashed the deps (trusted below); a gc beside
			 * the build may have removed the objects since */
			if (!key_outputs_present(b, &a->rec, &why))
				forget_rec(a);
		}
		if (!a->have_rec) {
			/* gone meanwhile (a gc beside this build): run it again */
			if (a->tries++ < 2) {
				free(why);
				free(a->why);
				a->why = xstrdup("its record went missing from the cache while it ran; running it again");
				fputs(a->why, stderr);
				fputc('\n', stderr);
				return;
			}
			fail(b, a, why ? why : "the action ended without a cache record");
			skip_downstream(b, a);
			free(why);
			return;
		}
		free(why);
		a->state = A_DONE;
		a->hit = code == CHILD_FOUND;
		a->remote_hit = code == CHILD_REMOTE;
		b->done++;
		if (a->hit)
			b->hits++;
		else
			b->ran++;
		trust_deps(b, a);
		remember(b, a);
		if (a->stale) {
			/* an input it took was rebuilt meanwhile: key it again */
			a->stale = 0;
			reopen(b, a);
			return;
		}
		if (a->hit)
			printf("%s %s: built meanwhile by another quantmake process\n", a->stage->name, a->model->name);
		else
			printf("[%zu/%zu] %s %s (%s%.2fs)\n", b->ran, b->total - b->hits, a->stage->name,
			       a->model->name, a->remote_hit ? "remote cache, " : "", dt);
		if (a->log.len && !b->o->silent)
			fputs(a->log.buf, stdout);
	} else if (up && a->tries < 2) {
		/* an input object was corrupt or gone: rebuild the action that made
		 * it (unless it is being rebuilt already), then this one */
		fputs(a->log.buf ? a->log.buf : "", stderr);
		if (up->state == A_DONE) {
			fprintf(stderr, "%s: rebuilding %s:%s\n", argv0, up->model->name, up->stage->name);
			up->tries++;
			loop_invalidate(b, up);
		}
		a->stale = 0;
		a->tries++;
		reopen(b, a);
	} else {
		char *why = NULL;
		if (WIFSIGNALED(status))
			why = xasprintf("killed by signal %d", WTERMSIG(status));
		fail(b, a, why);
		skip_downstream(b, a);
		free(why);
	}
	fflush(stdout);
}

static void kill_all(Build *b, int sig)
{
	for (size_t i = 0; i < b->nacts; i++)
		if (b->acts[i]->state == A_RUNNING && b->acts[i]->pid > 0)
			kill(-b->acts[i]->pid, sig);
}

/* -n: the actions taking a's outputs, directly or not, would run too */
static void would_run_downstream(Build *b, const Action *a)
{
	for (size_t j = 0; j < b->nacts; j++) {
		Action *d = b->acts[j];
		if (action_takes_from(d, a) && d->needed && d->state == A_PENDING) {
			d->state = A_SKIPPED;
			if (!b->o->question)
				printf("would run %s %s: its input from %s changes\n", d->stage->name, d->model->name,
				       a->stage->name);
			would_run_downstream(b, d);
		}
	}
}

static size_t count_running(const Build *b)
{
	size_t n = 0;
	for (size_t i = 0; i < b->nacts; i++)
		n += b->acts[i]->state == A_RUNNING;
	return n;
}

/* one pass over the pending actions: resolve and start what is ready.
 * Sets *want_token when an action waits for a jobserver token. 1 when
 * something changed, 0 when not, -1 on a planning error. */
static int start_ready(Build *b, int *want_token)
{
	int progress = 0;
	size_t running = count_running(b);
	for (size_t i = 0; i < b->nacts && !got_signal; i++) {
		Action *a = b->acts[i];
		if (!a->needed || a->state != A_PENDING || !action_inputs_done(a))
			continue;
		if (b->failed && !b->o->keep_going)
			continue;
		if (prehash_awaited(b, a))
			continue; /* its key waits for the prehash's lines */
		if (!a->keytext || !a->why) {
			int r = resolve(b, a);
			if (r < 0)
				return -1;
			if (r == 0) {
				progress = 1;
				continue;
			}
		}
		if (b->o->dry_run && rc_would_serve(b, a)) {
			progress = 1;
			continue;
		}
		if (b->o->dry_run) {
			if (!b->o->question)
				printf("would run %s %s: %s\n", a->stage->name, a->model->name, a->why);
			a->state = A_DONE;
			a->have_rec = 0;
			b->done++;
			/* downstream keys depend on outputs we do not have */
			would_run_downstream(b, a);
			progress = 1;
			continue;
		}
		if (running >= (size_t)b->o->jobs)
			continue;
		if (b->o->jobserver && js_active() && running >= 1 && !js_take()) {
			*want_token = 1;
			continue;
		}
		if (b->o->explain)
			printf("explain %s %s: %s\n", a->stage->name, a->model->name, a->why);
		if (runner_start(b, a) < 0) {
			fail(b, a, errmsg());
			skip_downstream(b, a);
			continue;
		}
		running++;
		progress = 1;
	}
	return progress;
}

static int interrupted(Build *b)
{
	prehash_finish(b, 1);
	kill_all(b, SIGTERM);
	for (size_t i = 0; i < b->nacts; i++) {
		Action *a = b->acts[i];
		if (a->state != A_RUNNING)
			continue;
		int st;
		while (waitpid(a->pid, &st, 0) < 0 && errno == EINTR)
			;
		close(a->fd);
		a->fd = -1;
		a->pid = 0;
		a->state = A_FAILED;
	}
	return 128 + got_signal;
}

int loop_run(Build *b)
{
	for (;;) {
		int want_token = 0;
		int progress = start_ready(b, &want_token);
		if (progress < 0)
			return 2;
		if (got_signal)
			return interrupted(b);
		size_t running = count_running(b);
		if (running == 0 && !b->ph) {
			if (progress)
				continue;
			break;
		}
		if (progress)
			continue; /* resolve what became ready before waiting */
		/* wait for output, exits, the prehash, a token or a signal */
		struct pollfd *pfds = xcalloc(running + 3, sizeof *pfds);
		Action **who = xcalloc(running + 1, sizeof *who);
		size_t n = 0;
		for (size_t i = 0; i < b->nacts; i++)
			if (b->acts[i]->state == A_RUNNING) {
				pfds[n].fd = b->acts[i]->fd;
				pfds[n].events = POLLIN;
				who[n++] = b->acts[i];
			}
		size_t npfd = n;
		pfds[npfd].fd = sigpipe_r;
		pfds[npfd++].events = POLLIN;
		size_t ph_at = npfd;
		if (b->ph) {
			pfds[npfd].fd = prehash_fd(b);
			pfds[npfd++].events = POLLIN;
		}
		if (want_token && running > 0) {
			pfds[npfd].fd = js_fd();
			pfds[npfd++].events = POLLIN;
		}
		int pr = poll(pfds, npfd, -1);
		if (pr < 0 && errno != EINTR) {
			free(pfds);
			free(who);
			return error("poll:"), 2;
		}
		if (pr > 0 && b->ph && (pfds[ph_at].revents & (POLLIN | POLLHUP | POLLERR)))
			prehash_poll(b);
		for (size_t i = 0; pr > 0 && i < n; i++) {
			if (!(pfds[i].revents & (POLLIN | POLLHUP | POLLERR)))
				continue;
			char buf[4096];
			ssize_t got = read(who[i]->fd, buf, sizeof buf);
			if (got > 0) {
				sb_add(&who[i]->log, buf, (size_t)got);
				continue;
			}
			if (got < 0 && errno == EINTR)
				continue;
			int st;
			while (waitpid(who[i]->pid, &st, 0) < 0 && errno == EINTR)
				;
			js_give(); /* the token this job held, if it held one */
			finish(b, who[i], st);
		}
		free(pfds);
		free(who);
	}
	return 0;
}
