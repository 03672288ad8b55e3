/* par.h — one pool of worker threads for the kernels' parallel loops. */
#ifndef QM_OPS_PAR_H
#define QM_OPS_PAR_H

#include <stdint.h>

/* the most ranges one call splits into (the pool grows to PAR_MAX - 1 workers) */
#define PAR_MAX 64

/* Run fn(arg, lo, hi) over the ranges [n * k / t, n * (k + 1) / t), k < t,
 * where t is threads capped at n and PAR_MAX: range 0 on the calling thread,
 * range k on worker k of one process-wide pool, all at once; returns the
 * first nonzero result in range order, else 0. The ranges depend only on
 * (n, threads), so results do not depend on timing. Workers are started on
 * the first call that needs them and then parked between calls. A call made
 * inside a region (by fn, on a worker or on the caller), while another thread
 * runs one, or for ranges whose worker cannot be started runs those ranges
 * on the calling thread, one after another. Nothing is called when n <= 0. */
int par_run(int threads, int64_t n, int (*fn)(void *arg, int64_t lo, int64_t hi), void *arg);

/* Stop and join the workers (they are started again when next needed);
 * registered with atexit, so that a process ends with no pool threads. Does
 * nothing when called inside a region or while another thread runs one. */
void par_stop(void);

#endif
