/* blas.c — OpenBLAS, loaded on first use.
 *
 * OpenBLAS starts its thread pool when it is loaded, which costs more than a
 * whole no-op build of a small project. quantmake therefore does not link it:
 * these definitions of the few CBLAS entry points it uses open Debian's
 * libopenblas with dlopen() on the first call and forward to it. Operators
 * keep including <cblas.h> and calling cblas_* as usual; a CBLAS function
 * used without a forwarder here fails at link time, not at run time. */
#include <cblas.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

static void *lib;
static pthread_once_t once = PTHREAD_ONCE_INIT;
/* threads asked for with openblas_set_num_threads() before the library was
 * loaded (0: none) */
static int want_threads;

static void load(void)
{
	static const char *const names[] = {"libopenblas.so.0", "libopenblas.so", "libblas.so.3"};
	/* OpenBLAS sizes its pool from this variable when it is loaded; an
	 * explicit setting is the user's */
	int n = __atomic_load_n(&want_threads, __ATOMIC_ACQUIRE);
	if (n > 0) {
		/* the interpreter asks for one thread (its results must not
		 * change with a thread count): a user's larger pool would only
		 * spin idle workers, and a set count must win over it */
		char b[16];
		snprintf(b, sizeof b, "%d", n);
		setenv("OPENBLAS_NUM_THREADS", b, 1);
	}
	for (size_t i = 0; i < sizeof names / sizeof *names && !lib; i++)
		lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
	if (!lib) {
		fprintf(stderr, "quantmake: cannot load OpenBLAS (libopenblas.so.0): %s\n", dlerror());
		exit(1);
	}
}

static void *sym(const char *name)
{
	pthread_once(&once, load);
	void *f = dlsym(lib, name);
	if (!f) {
		fprintf(stderr, "quantmake: OpenBLAS lacks %s\n", name);
		exit(1);
	}
	return f;
}

/* every forwarded function returns void */
#define FORWARD(ret, name, params, args)                                         \
	ret name params                                                          \
	{                                                                        \
		static ret(*fn) params;                                          \
		ret(*f) params = __atomic_load_n(&fn, __ATOMIC_ACQUIRE);         \
		if (!f) {                                                        \
			f = (ret(*) params)sym(#name);                           \
			__atomic_store_n(&fn, f, __ATOMIC_RELEASE);              \
		}                                                                \
		f args;                                                          \
	}

FORWARD(void, cblas_sgemm,
	(OPENBLAS_CONST enum CBLAS_ORDER o, OPENBLAS_CONST enum CBLAS_TRANSPOSE ta,
	 OPENBLAS_CONST enum CBLAS_TRANSPOSE tb, OPENBLAS_CONST blasint m, OPENBLAS_CONST blasint n,
	 OPENBLAS_CONST blasint k, OPENBLAS_CONST float alpha, OPENBLAS_CONST float *a,
	 OPENBLAS_CONST blasint lda, OPENBLAS_CONST float *b, OPENBLAS_CONST blasint ldb,
	 OPENBLAS_CONST float beta, float *c, OPENBLAS_CONST blasint ldc),
	(o, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc))

FORWARD(void, cblas_dgemm,
	(OPENBLAS_CONST enum CBLAS_ORDER o, OPENBLAS_CONST enum CBLAS_TRANSPOSE ta,
	 OPENBLAS_CONST enum CBLAS_TRANSPOSE tb, OPENBLAS_CONST blasint m, OPENBLAS_CONST blasint n,
	 OPENBLAS_CONST blasint k, OPENBLAS_CONST double alpha, OPENBLAS_CONST double *a,
	 OPENBLAS_CONST blasint lda, OPENBLAS_CONST double *b, OPENBLAS_CONST blasint ldb,
	 OPENBLAS_CONST double beta, double *c, OPENBLAS_CONST blasint ldc),
	(o, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc))

FORWARD(void, cblas_sgemv,
	(OPENBLAS_CONST enum CBLAS_ORDER o, OPENBLAS_CONST enum CBLAS_TRANSPOSE t, OPENBLAS_CONST blasint m,
	 OPENBLAS_CONST blasint n, OPENBLAS_CONST float alpha, OPENBLAS_CONST float *a,
	 OPENBLAS_CONST blasint lda, OPENBLAS_CONST float *x, OPENBLAS_CONST blasint incx,
	 OPENBLAS_CONST float beta, float *y, OPENBLAS_CONST blasint incy),
	(o, t, m, n, alpha, a, lda, x, incx, beta, y, incy))

/* The interpreter sets the thread count before every run, most of which
 * never reach OpenBLAS (the AVX-512 kernels of src/ops/fgemm.c do the
 * GEMMs where the CPU has them). Until something else loads the library,
 * this only records the count, so that a run loads nothing it does not use
 * and the pool starts at the budget: a pool of every CPU under a budget of
 * one thread left an idle worker spinning on the other core (silero's
 * calibration took 278 instead of 150 ms of CPU time, magika's 723 instead
 * of 591). */
void openblas_set_num_threads(int n)
{
	static void (*fn)(int);
	void (*f)(int) = __atomic_load_n(&fn, __ATOMIC_ACQUIRE);
	if (!f && !__atomic_load_n(&lib, __ATOMIC_ACQUIRE)) {
		__atomic_store_n(&want_threads, n, __ATOMIC_RELEASE);
		if (!__atomic_load_n(&lib, __ATOMIC_ACQUIRE))
			return;
	}
	if (!f) {
		f = (void (*)(int))sym("openblas_set_num_threads");
		__atomic_store_n(&fn, f, __ATOMIC_RELEASE);
	}
	f(n);
}
