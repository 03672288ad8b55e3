/* par.c — one pool of worker threads for the kernels' parallel loops (see par.h).
 *
 * Starting a thread per kernel call cost more than the work of the small
 * kernels a calibration runs thousands of times, so workers are started once
 * and parked between calls. Each worker has its own futex word, `go`: the
 * caller of a region writes the job, then bumps the `go` of each worker it
 * needs (only those: a 2-thread region never wakes a 64-thread pool) and
 * runs range 0 itself; each worker runs its range and counts `pending` down,
 * and the last one wakes the caller. Waiting workers and callers sleep in
 * the kernel at once, without spinning, so an idle pool uses no CPU; a
 * region costs about 4 us more than its work (bench/README.md).
 *
 * Fork: build.c and the export stage fork, and a child has only the thread
 * that forked. pthread_atfork makes that safe: the prepare handler takes the
 * pool's lock (so no region is half-published across the fork), the child's
 * handler forgets the workers that did not come along (the next region
 * starts new ones), the parent's releases the lock. Exit: par_stop, run by
 * atexit, wakes the workers with `quit` set and joins them, so a process
 * ends with no pool thread running (and LeakSanitizer sees none). */
#include "ops/par.h"

#include <linux/futex.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

typedef struct Slot {
	unsigned go;              /* futex: bumped to hand this worker a region */
	int parked;               /* 1 while the worker is (about to be) asleep on go */
	pthread_t tid;
} __attribute__((aligned(64))) Slot;  /* one cache line per worker */

static struct {
	pthread_mutex_t lock;     /* held by the thread running a region */
	int nworkers;             /* workers started: slot[1 .. nworkers] */
	int quit;                 /* par_stop: workers leave on their next go */
	/* the region: written by its caller before any go is bumped, read by
	 * the workers after, left alone until pending is 0 */
	int (*fn)(void *, int64_t, int64_t);
	void *arg;
	int64_t n;
	int t;
	int rc[PAR_MAX];
	unsigned pending;         /* futex: workers of the region still running */
	int waiting;              /* 1 while the caller is (about to be) asleep on pending */
	Slot slot[PAR_MAX];
} pool = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* set on workers and on a caller inside its region: calls from there run inline */
static _Thread_local int in_region;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void futex_wait(unsigned *w, unsigned v)
{
	syscall(SYS_futex, w, FUTEX_WAIT_PRIVATE, v, NULL, NULL, 0);
}

static void futex_wake(unsigned *w)
{
	syscall(SYS_futex, w, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

/* wait until *w is not v, asleep in the kernel with *parked set (whoever
 * changes *w wakes the waiter when it sees *parked). No spinning first:
 * on a loaded machine a spinning worker took the CPU its caller needed to
 * hand it the next region (see bench/README.md) */
static unsigned wait_change(unsigned *w, unsigned v, int *parked)
{
	unsigned now;
	__atomic_store_n(parked, 1, __ATOMIC_SEQ_CST);
	while ((now = __atomic_load_n(w, __ATOMIC_SEQ_CST)) == v)
		futex_wait(w, v);
	__atomic_store_n(parked, 0, __ATOMIC_RELAXED);
	return now;
}

/* the store that ends a wait_change on w; wakes the waiter if it parked */
static void signal_change(unsigned *w, unsigned v, int *parked)
{
	__atomic_store_n(w, v, __ATOMIC_SEQ_CST);
	if (__atomic_load_n(parked, __ATOMIC_SEQ_CST))
		futex_wake(w);
}

static int64_t range_lo(int64_t n, int t, int k)
{
	return n * k / t;
}

static void *worker_main(void *p)
{
	Slot *s = p;
	int k = (int)(s - pool.slot);
	unsigned seen = 0;  /* go was 0 when the worker started */
	in_region = 1;
	for (;;) {
		seen = wait_change(&s->go, seen, &s->parked);
		if (__atomic_load_n(&pool.quit, __ATOMIC_ACQUIRE))
			return NULL;
		pool.rc[k] = pool.fn(pool.arg, range_lo(pool.n, pool.t, k), range_lo(pool.n, pool.t, k + 1));
		if (__atomic_sub_fetch(&pool.pending, 1, __ATOMIC_SEQ_CST) == 0 &&
		    __atomic_load_n(&pool.waiting, __ATOMIC_SEQ_CST))
			futex_wake(&pool.pending);
	}
}

static void atfork_prepare(void)
{
	pthread_mutex_lock(&pool.lock);
}

static void atfork_parent(void)
{
	pthread_mutex_unlock(&pool.lock);
}

static void atfork_child(void)
{
	/* the workers stayed in the parent */
	for (int k = 0; k < PAR_MAX; k++)
		pool.slot[k] = (Slot){0};
	pool.nworkers = 0;
	pool.pending = 0;
	pool.waiting = 0;
	pthread_mutex_unlock(&pool.lock);
}

static void register_handlers(void)
{
	pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
	atexit(par_stop);
}

/* start workers up to want (slot numbers below PAR_MAX); stops at the
 * first that cannot be started. Workers get every signal blocked: signals
 * are for the threads that expect them. Called with the lock held. */
static void grow(int want)
{
	if (want <= pool.nworkers)
		return;
	pthread_once(&once, register_handlers);
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	while (pool.nworkers < want) {
		Slot *s = &pool.slot[pool.nworkers + 1];
		*s = (Slot){0};
		if (pthread_create(&s->tid, NULL, worker_main, s) != 0)
			break;
		pool.nworkers++;
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
}

static int run_inline(int t, int64_t n, int (*fn)(void *, int64_t, int64_t), void *arg)
{
	int rc = 0;
	for (int k = 0; k < t; k++) {
		int r = fn(arg, range_lo(n, t, k), range_lo(n, t, k + 1));
		if (r && !rc)
			rc = r;
	}
	return rc;
}

int par_run(int threads, int64_t n, int (*fn)(void *arg, int64_t lo, int64_t hi), void *arg)
{
	if (n <= 0)
		return 0;
	int t = threads > PAR_MAX ? PAR_MAX : threads < 1 ? 1 : threads;
	if (t > n)
		t = (int)n;
	if (t == 1)
		return fn(arg, 0, n);
	if (in_region || pthread_mutex_trylock(&pool.lock) != 0)
		return run_inline(t, n, fn, arg);
	in_region = 1;
	grow(t - 1);
	int nw = pool.nworkers < t - 1 ? pool.nworkers : t - 1;
	pool.fn = fn;
	pool.arg = arg;
	pool.n = n;
	pool.t = t;
	__atomic_store_n(&pool.pending, (unsigned)nw, __ATOMIC_SEQ_CST);
	for (int k = 1; k <= nw; k++) {
		Slot *s = &pool.slot[k];
		signal_change(&s->go, s->go + 1, &s->parked);
	}
	pool.rc[0] = fn(arg, range_lo(n, t, 0), range_lo(n, t, 1));
	for (int k = nw + 1; k < t; k++)  /* no worker to be had: run it here */
		pool.rc[k] = fn(arg, range_lo(n, t, k), range_lo(n, t, k + 1));
	unsigned left;
	while ((left = __atomic_load_n(&pool.pending, __ATOMIC_ACQUIRE)) != 0)
		wait_change(&pool.pending, left, &pool.waiting);
	int rc = 0;
	for (int k = 0; k < t && !rc; k++)
		rc = pool.rc[k];
	in_region = 0;
	pthread_mutex_unlock(&pool.lock);
	return rc;
}

void par_stop(void)
{
	if (in_region || pthread_mutex_trylock(&pool.lock) != 0)
		return;
	__atomic_store_n(&pool.quit, 1, __ATOMIC_RELEASE);
	for (int k = 1; k <= pool.nworkers; k++) {
		Slot *s = &pool.slot[k];
		signal_change(&s->go, s->go + 1, &s->parked);
	}
	for (int k = 1; k <= pool.nworkers; k++)
		pthread_join(pool.slot[k].tid, NULL);
	pool.nworkers = 0;
	__atomic_store_n(&pool.quit, 0, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&pool.lock);
}
