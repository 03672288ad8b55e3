/* par_check.c — src/ops/par.c, the kernels' worker pool, on its own (run by
 * tests/t_par.sh, with AddressSanitizer and UBSan when the compiler has
 * them): the ranges of every thread count, which thread runs each, return
 * codes, nested and concurrent calls (inline), many regions back to back,
 * growth, par_stop and a restart, and regions in a forked child (which
 * inherits no worker) and in its parent afterwards. Prints PASS/FAIL lines. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ops/par.h"

static int failed;

static void report(const char *name, int ok, const char *why)
{
	if (ok) {
		printf("PASS: par %s\n", name);
	} else {
		printf("FAIL: par %s: %s\n", name, why);
		failed = 1;
	}
}

/* what each range saw: its bounds, the thread that ran it */
typedef struct Seen {
	int64_t lo[PAR_MAX], hi[PAR_MAX];
	pthread_t tid[PAR_MAX];
	int calls;
	int64_t n;
	int t;
	int fail_at;              /* the range whose call returns its number + 1, or -1 */
	int64_t *hits;            /* n counters: each element must be covered once */
} Seen;

static int record(void *arg, int64_t lo, int64_t hi)
{
	Seen *s = arg;
	int k = 0;
	/* the range number from its start, as par.h defines the split */
	while (k < s->t && s->n * k / s->t != lo)
		k++;
	if (k == s->t)
		return 1000;
	s->lo[k] = lo;
	s->hi[k] = hi;
	s->tid[k] = pthread_self();
	__atomic_add_fetch(&s->calls, 1, __ATOMIC_RELAXED);
	for (int64_t i = lo; i < hi; i++)
		s->hits[i]++;
	return k == s->fail_at ? k + 1 : 0;
}

/* par_run(threads, n) against the definition; *why set on a mismatch */
static int check_split(int threads, int64_t n, int fail_at, int want_rc, int want_parallel, char *why, size_t wn)
{
	Seen s;
	memset(&s, 0, sizeof s);
	int t = threads > PAR_MAX ? PAR_MAX : threads < 1 ? 1 : threads;
	if (t > n)
		t = (int)n;
	s.n = n;
	s.t = t;
	s.fail_at = fail_at;
	s.hits = calloc((size_t)n + 1, sizeof *s.hits);
	int rc = par_run(threads, n, record, &s);
	int ok = 1;
	if (rc != want_rc) {
		snprintf(why, wn, "threads %d n %lld: returned %d, expected %d", threads, (long long)n, rc, want_rc);
		ok = 0;
	}
	for (int64_t i = 0; ok && i < n; i++)
		if (s.hits[i] != 1) {
			snprintf(why, wn, "threads %d n %lld: element %lld covered %lld times", threads, (long long)n,
				 (long long)i, (long long)s.hits[i]);
			ok = 0;
		}
	if (ok && s.calls != (n > 0 ? t : 0)) {
		snprintf(why, wn, "threads %d n %lld: %d calls, expected %d", threads, (long long)n, s.calls, t);
		ok = 0;
	}
	for (int k = 0; ok && k < s.calls; k++)
		if (s.lo[k] != n * k / t || s.hi[k] != n * (k + 1) / t) {
			snprintf(why, wn, "threads %d n %lld: range %d is [%lld, %lld)", threads, (long long)n, k,
				 (long long)s.lo[k], (long long)s.hi[k]);
			ok = 0;
		}
	/* range 0 on the caller; with workers, the others each on its own thread */
	if (ok && n > 0 && !pthread_equal(s.tid[0], pthread_self())) {
		snprintf(why, wn, "threads %d n %lld: range 0 not on the caller", threads, (long long)n);
		ok = 0;
	}
	for (int k = 1; ok && want_parallel && k < t; k++)
		for (int j = 0; j < k; j++)
			if (pthread_equal(s.tid[k], s.tid[j])) {
				snprintf(why, wn, "threads %d n %lld: ranges %d and %d on one thread", threads,
					 (long long)n, j, k);
				ok = 0;
				break;
			}
	for (int k = 1; ok && !want_parallel && k < t; k++)
		if (!pthread_equal(s.tid[k], pthread_self())) {
			snprintf(why, wn, "threads %d n %lld: range %d not inline", threads, (long long)n, k);
			ok = 0;
		}
	free(s.hits);
	return ok;
}

static void test_splits(void)
{
	char why[256] = "";
	int ok = 1;
	static const int64_t ns[] = {0, 1, 2, 3, 5, 7, 63, 64, 65, 100, 1000, 4099};
	for (int threads = 0; ok && threads <= 70; threads++)
		for (size_t i = 0; ok && i < sizeof ns / sizeof *ns; i++)
			ok = check_split(threads, ns[i], -1, 0, 1, why, sizeof why);
	report("ranges for 0 to 70 threads", ok, why);
	ok = check_split(4, 100, 2, 3, 1, why, sizeof why) && check_split(4, 100, 0, 1, 1, why, sizeof why) &&
	     check_split(3, 10, 1, 2, 1, why, sizeof why);
	report("first nonzero return in range order", ok, why);
}

/* a region inside a region: runs inline on the thread that asked */
typedef struct Nest {
	int ok;
	char why[256];
} Nest;

static int nested(void *arg, int64_t lo, int64_t hi)
{
	Nest *ns = arg;
	char why[200];
	if (!check_split(4, 37 + lo, -1, 0, 0, why, sizeof why)) {
		__atomic_store_n(&ns->ok, 0, __ATOMIC_RELAXED);
		snprintf(ns->why, sizeof ns->why, "inside range at %lld: %s", (long long)lo, why);
	}
	return 0;
}

static void test_nested(void)
{
	Nest ns = {1, ""};
	par_run(3, 3, nested, &ns);
	report("nested regions run inline", ns.ok, ns.why);
}

/* another thread's region while one runs: inline, not a deadlock */
typedef struct Conc {
	int phase;                /* 1: the main region is running, 2: the other thread is done */
	int ok;
	char why[256];
} Conc;

static void *other_thread(void *arg)
{
	Conc *c = arg;
	while (__atomic_load_n(&c->phase, __ATOMIC_ACQUIRE) < 1)
		;
	c->ok = check_split(4, 50, -1, 0, 0, c->why, sizeof c->why);
	__atomic_store_n(&c->phase, 2, __ATOMIC_RELEASE);
	return NULL;
}

static int hold_region(void *arg, int64_t lo, int64_t hi)
{
	Conc *c = arg;
	if (lo == 0) {
		__atomic_store_n(&c->phase, 1, __ATOMIC_RELEASE);
		while (__atomic_load_n(&c->phase, __ATOMIC_ACQUIRE) < 2)
			usleep(100);
	}
	return 0;
}

static void test_concurrent(void)
{
	Conc c = {0, 0, ""};
	pthread_t t;
	if (pthread_create(&t, NULL, other_thread, &c) != 0) {
		report("a second caller runs inline", 0, "cannot start a thread");
		return;
	}
	par_run(2, 2, hold_region, &c);
	pthread_join(t, NULL);
	report("a second caller runs inline", c.ok, c.why);
}

/* many small regions back to back, as a calibration's kernels */
static int add_range(void *arg, int64_t lo, int64_t hi)
{
	int64_t *sum = arg;
	int64_t s = 0;
	for (int64_t i = lo; i < hi; i++)
		s += i;
	__atomic_add_fetch(sum, s, __ATOMIC_RELAXED);
	return 0;
}

static int back_to_back(int regions)
{
	for (int r = 0; r < regions; r++) {
		int64_t sum = 0, n = 1 + r % 97;
		par_run(2 + r % 3, n, add_range, &sum);
		if (sum != n * (n - 1) / 2)
			return 0;
	}
	return 1;
}

static void test_fork(void)
{
	char why[256] = "";
	/* the parent has live workers when it forks */
	int ok = check_split(4, 1000, -1, 0, 1, why, sizeof why);
	fflush(stdout);
	pid_t pid = fork();
	if (pid == 0) {
		/* the child has none: its regions start their own */
		int cok = check_split(4, 1000, -1, 0, 1, why, sizeof why) && back_to_back(2000);
		fflush(stdout);
		_exit(cok ? 0 : 1);
	}
	int st = 0;
	if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		snprintf(why, sizeof why, "the forked child failed (status %d)", st);
		ok = 0;
	}
	ok = ok && check_split(4, 1000, -1, 0, 1, why, sizeof why);
	report("regions after fork, in the child and the parent", ok, why);
}

int main(void)
{
	test_splits();
	test_nested();
	test_concurrent();
	report("100000 regions back to back", back_to_back(100000), "a sum came out wrong");
	char why[256] = "";
	par_stop();
	int ok = check_split(64, 640, -1, 0, 1, why, sizeof why);
	par_stop();
	report("stop, restart, 64 ranges", ok && check_split(2, 9, -1, 0, 1, why, sizeof why), why);
	test_fork();
	/* the workers are joined by par_stop at exit: LeakSanitizer checks after */
	return failed;
}
