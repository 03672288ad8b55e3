/* fgemm_stubs.c — what src/ops/fgemm.c takes from the rest of quantmake,
 * for the C checks that build it on their own (tests/fgemm_pack_check.c,
 * tests/cvpack_check.c): allocation that aborts on failure, a thread pool
 * that runs the whole range on the caller, no interpreter scratch (the
 * packers use neither). */
#include <stdint.h>
#include <stdlib.h>

#include "ops/nn.h"
#include "ops/op.h"
#include "util.h"

void *xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);
	if (!p)
		abort();
	return p;
}

void *xcalloc(size_t n, size_t sz)
{
	void *p = calloc(n ? n : 1, sz ? sz : 1);
	if (!p)
		abort();
	return p;
}

void *xreallocarray(void *p, size_t n, size_t sz)
{
	void *q = realloc(p, n && sz ? n * sz : 1);
	if (!q)
		abort();
	return q;
}

void nn_parallel(int threads, int64_t n, void (*fn)(void *arg, int64_t lo, int64_t hi), void *arg)
{
	(void)threads;
	fn(arg, 0, n);
}

void *op_scratch(int slot, size_t bytes)
{
	(void)slot, (void)bytes;
	return NULL;
}
