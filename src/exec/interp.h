/* interp.h — the interpreter: plan a model once, run it on many batches.
 *
 * interp_new() plans the main graph and every subgraph (If/Loop/Scan bodies)
 * before anything runs: a topological order, the operator definition of each
 * node (an unsupported operator is an error naming it), the last consumer of
 * every value so its buffer returns to a pool as soon as it is dead, and the
 * initializers, loaded once. Constants are folded in the main graph then,
 * in a subgraph when it first runs (every plan error is reported here all
 * the same). interp_run() then runs any number of batches.
 *
 * Taps see every input of the main graph when a run starts and every tensor
 * a node of the main graph produces, right after it is produced and before
 * it may be freed: calibration reads activations without the interpreter
 * keeping them all alive.
 *
 * The Interp borrows the Model: keep it alive until interp_free(). An Interp
 * runs one batch at a time (not thread-safe); kernels may use opts.threads. */
#ifndef QM_EXEC_INTERP_H
#define QM_EXEC_INTERP_H

#include <stddef.h>

#include "onnx/model.h"
#include "onnx/tensor.h"
#include "ops/op.h"

typedef struct InterpOpts {
	int threads;   /* threads kernels and BLAS may use; 0 means 1 */
	/* called for every main-graph input and node output (NULL: none) */
	void (*tap)(void *ud, const char *name, const Tensor *t);
	void *tap_ud;
	/* plan only: check that every operator is supported, load nothing */
	int check_only;
	/* for callers that will not read the model's initializers again (nor
	 * set a tap): free the bytes of every constant no running step reads
	 * any more, since every reader keeps its own copy (packed weights, a
	 * folded normalization; OpCache.packed). The model's raw_data and
	 * typed fields of those initializers are freed and emptied, so a later
	 * reader gets an error, never other bytes. */
	int release_consts;
} InterpOpts;

/* Plan m; NULL after error() (unsupported operator, cycle, missing value,
 * bad initializer). o may be NULL for defaults. */
Interp *interp_new(Model *m, const InterpOpts *o);
void interp_free(Interp *ip);

/* The model's real inputs (graph inputs that are not initializers) and its
 * outputs, in graph order. */
size_t interp_ninputs(const Interp *ip);
const char *interp_input_name(const Interp *ip, size_t i);
/* declared element type and shape of input i: dims[k] < 0 where symbolic or
 * unknown; *rank = -1 when the rank is not declared */
void interp_input_type(const Interp *ip, size_t i, int *dtype, int *rank, int64_t *dims);
size_t interp_noutputs(const Interp *ip);
const char *interp_output_name(const Interp *ip, size_t i);

/* Run one batch. in[k] is matched to a model input by in[k].name, or by
 * position k when its name is NULL; every input must be given exactly once
 * (inputs that also have an initializer default to it). out[i] receives
 * output i (0 <= i < nout <= interp_noutputs); the caller tensor_free()s
 * them. The inputs are only read. */
int interp_run(Interp *ip, size_t nin, const Tensor *in, size_t nout, Tensor *out);

/* Check in[] as interp_run() would (names, types, shapes, missing inputs)
 * without running anything. */
int interp_check_inputs(Interp *ip, size_t nin, const Tensor *in);

/* Run one sample as read by dataio (samples_next): tensors named after a
 * model input feed it, other named tensors (labels, say) are ignored, and
 * unnamed tensors feed the remaining inputs in order. */
int interp_run_sample(Interp *ip, size_t nin, const Tensor *in, size_t nout, Tensor *out);

/* The threads kernels may use, and a change of them between runs (the
 * results do not depend on it). */
int interp_threads(const Interp *ip);
void interp_set_threads(Interp *ip, int threads);

/* Change the tap between runs (runs refuse a tap with release_consts). */
void interp_set_tap(Interp *ip, void (*tap)(void *ud, const char *name, const Tensor *t), void *ud);

/* Memory figures: bytes of constants held now (initializers, constants
 * folded at plan time and the copies kernels keep in their own layouts;
 * not those release_consts freed), and the highest total of node outputs
 * and kernel scratch (op_scratch) alive at once over all runs so far
 * (buffers freed after their last consumer are not counted). */
void interp_stats(const Interp *ip, size_t *weights, size_t *peak_live);

/* Bytes held for activations between runs: the arena that runs of one
 * shape take their tensors and kernel scratch from, and the free blocks
 * of the pool that serves other runs (see interp.c). */
size_t interp_buffer_bytes(const Interp *ip);

/* "A-7 is not supported"-style check of every node (main graph and
 * subgraphs) without loading initializers: 0 if all are supported, else -1
 * with error() naming the first unsupported operator. */
int interp_check_model(Model *m);

#endif
