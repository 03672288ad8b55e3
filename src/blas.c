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

static void load(void)
{
	static const char *const names[] = {"libopenblas.so.0", "libopenblas.so", "libblas.so.3"};
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

FORWARD(void, openblas_set_num_threads, (int n), (n))
