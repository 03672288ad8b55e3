/* op.h — the operator interface: type/shape inference and kernels.
 *
 * Everything about one ONNX operator lives in src/ops/<family>.c or
 * src/ops/<op>.c: its inference function and its kernel, registered with one
 * OPERATOR(...) line at file scope, for example
 *
 *     OPERATOR(ai_onnx, Relu, 6, relu_infer, relu_run)
 *
 * tools/gen-registry.sh collects those lines into one table sorted by
 * (domain, name, since); ops_find() picks the entry with the greatest `since`
 * not above the model's opset for that domain. An entry may leave infer or run
 * NULL only while that half does not exist; the pass and the interpreter then
 * report "no shape inference for X-N" / "X-N is not supported" by name.
 *
 * Both callbacks return 0, or -1 after op_error()/error(): never abort, never
 * guess a type, never read beyond a tensor's nbytes. */
#ifndef QM_OPS_OP_H
#define QM_OPS_OP_H

#include <stddef.h>
#include <stdint.h>

#include "onnx/model.h"
#include "onnx/node.h"
#include "onnx/tensor.h"

/* ---- static types, for inference ---- */

/* One dimension: v >= 0 is known; v < 0 is symbolic (sym names it, interned
 * by the pass, so symbols compare by pointer) or unknown (sym == NULL). */
typedef struct Dim {
	int64_t v;
	const char *sym;
} Dim;

enum { VT_UNKNOWN = 0, VT_TENSOR, VT_SEQUENCE, VT_OPTIONAL, VT_SPARSE, VT_MAP };

typedef struct ValueType {
	int kind;                 /* VT_* */
	int elem;                 /* DT_* of a tensor, 0 if unknown */
	int rank;                 /* -1 if the rank is unknown */
	Dim dims[QM_MAX_RANK];
	struct ValueType *inner;  /* element of a sequence / optional (owned) */
	/* Known contents, for constant propagation of shape computations:
	 * value is a complete small tensor; symval the contents of a 1-D int64
	 * tensor where some entries are symbolic (Shape of a symbolic input). */
	Tensor *value;            /* owned, or NULL */
	Dim *symval;              /* owned, nsymval entries, or NULL */
	int64_t nsymval;
} ValueType;

typedef struct InferState InferState;  /* the pass's, opaque to operators */

typedef struct InferCtx {
	const Onnx__NodeProto *node;
	int64_t opset;            /* opset of the node's domain in this model */
	size_t nin, nout;         /* node's input / output counts */
	const ValueType *const *in;  /* NULL entry: input absent (optional) */
	ValueType *const *out;    /* zeroed (kind VT_UNKNOWN, rank -1); fill in */
	InferState *st;
} InferCtx;

/* error prefixed with the node's label and op type; returns -1 */
int op_error(const Onnx__NodeProto *n, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* a fresh unknown-but-named dimension ("unk__N") from the pass */
Dim infer_fresh_dim(InferCtx *c);
/* infer a subgraph (If/Loop/Scan body) with the given input types, outer
 * scope visible; outputs receive the body's output types (caller frees with
 * vt_clear) */
int infer_subgraph(InferCtx *c, const Onnx__GraphProto *g, size_t nin,
		   const ValueType *const *in, size_t nout, ValueType *out);

/* ValueType helpers (ops/common.c) */
void vt_clear(ValueType *t);                           /* free owned parts, reset */
int vt_copy(ValueType *dst, const ValueType *src);      /* deep copy */
void vt_set_tensor(ValueType *t, int elem, int rank);   /* kind tensor, dims unknown */
int dim_eq(Dim a, Dim b);                               /* same known value or same symbol */
/* numpy-style broadcast of a and b's shapes into out (rank/dims); -1 on a
 * definite mismatch */
int broadcast_dims(const Onnx__NodeProto *n, const ValueType *a, const ValueType *b, ValueType *out);
/* normalize a possibly negative axis against rank; -1 with op_error if out of range */
int norm_axis(const Onnx__NodeProto *n, int64_t axis, int rank, int64_t *out);
/* 0 when input i is present, else -1 with op_error "missing input i" */
int infer_need(InferCtx *c, size_t i);
/* output i is a tensor with input j's elem type and shape (unary ops) */
int infer_same_as_input(InferCtx *c, size_t out, size_t in);

/* ---- kernels ---- */

typedef struct Interp Interp;  /* the interpreter's, opaque to operators */

/* Memory a kernel keeps between runs of one node of a plan: what it
 * derives from constant inputs, such as packed weights. The interpreter
 * calls release(p) when the plan is freed. */
typedef struct OpCache {
	void *p;
	void (*release)(void *p);
	size_t bytes;             /* memory held in p, counted as weights */
	/* bit i: the kernel keeps constant input i in p for good and will not
	 * read that input's data again, whatever the shapes of its other
	 * inputs; the interpreter may then free it (InterpOpts.release_consts),
	 * after which RunCtx.in[i] keeps its type and shape with data NULL.
	 * Cleared when p is dropped. */
	uint64_t packed;
} OpCache;

typedef struct RunCtx {
	const Onnx__NodeProto *node;
	int64_t opset;
	size_t nin, nout;
	const Tensor *const *in;  /* NULL entry: input absent (optional) */
	Tensor *const *out;       /* empty; allocate with op_output() */
	Interp *interp;
	int threads;              /* threads the kernel may use */
	OpCache *cache;           /* NULL: none (outside the interpreter) */
	uint64_t const_in;        /* bit i: input i holds the same data every run */
	/* NULL, or {lo, hi}: the interpreter fused a Relu or Clip into this
	 * node (Conv only), whose output 0 must hold v < lo ? lo : v, then
	 * v > hi ? hi : v, as Clip computes (NaN passes) */
	const float *clamp;
	/* NULL, or the other input of an Add (opset 7 or later) the
	 * interpreter fused into this node (Conv only): output 0 must hold
	 * Add's output, the node's result + sum, clamped as above after the
	 * addition */
	const Tensor *sum;
	/* non-zero (constant folding, interp NULL): op_output refuses an
	 * output of more bytes than this before allocating it, so a small
	 * model (ConstantOfShape of 2^29) cannot make folding allocate
	 * gigabytes */
	size_t out_limit;
} RunCtx;

/* Allocate output i with the given type and shape. Contents are
 * unspecified: the kernel writes every element. */
int op_output(RunCtx *c, size_t i, int dtype, int rank, const int64_t *dims);
/* Output i as bytes [off, off + its size) of src, one of c->in, read in
 * place where the caller allows it (the interpreter folding constants at
 * plan time): 1 when it does (the kernel writes nothing), 0 when the
 * output was allocated as op_output() does (the kernel fills it), -1
 * after op_error(). */
int op_output_view(RunCtx *c, size_t i, const Tensor *src, size_t off, int dtype, int rank,
		   const int64_t *dims);
/* 0 when input i is present, else -1 with op_error "missing input i" */
int run_need(RunCtx *c, size_t i);
/* Scratch memory of the running kernel: slot's buffer (a kernel and what
 * it calls use up to OP_SCRATCH_SLOTS at once: fgemm's packing buffer and
 * three of the kernel's own: conv.c's unfolded tiles and padded planes,
 * rnn.c's states), at least bytes long, valid until the kernel returns or
 * asks the slot for more (its contents are then lost). In the
 * interpreter's thread while a step runs, it comes from the interpreter's
 * buffers and counts among the live activations (interp_stats); elsewhere
 * (other threads, constant folding, shape inference) it is NULL and the
 * caller uses a buffer of its own. */
enum { OP_SCRATCH_FGEMM, OP_SCRATCH_KERNEL, OP_SCRATCH_SLOTS = OP_SCRATCH_KERNEL + 3 };
void *op_scratch(int slot, size_t bytes);
/* Run a subgraph (If/Loop/Scan body) on the given inputs with the outer
 * scope visible; outputs are allocated by the callee (caller tensor_free()s). */
int run_subgraph(RunCtx *c, const Onnx__GraphProto *g, size_t nin,
		 const Tensor *const *in, size_t nout, Tensor *out);

/* ---- registry ---- */

typedef struct OpDef {
	const char *domain;       /* "" for ai.onnx */
	const char *name;
	int since;
	int (*infer)(InferCtx *c);
	int (*run)(RunCtx *c);
} OpDef;

#define OPDOMAIN_ai_onnx ""
#define OPDOMAIN_ai_onnx_ml "ai.onnx.ml"
#define OPDOMAIN_com_microsoft "com.microsoft"
#define OPERATOR(dom, nm, since_, inf, run_) \
	const OpDef opdef_##dom##_##nm##_##since_ = {OPDOMAIN_##dom, #nm, since_, inf, run_};

extern const OpDef *const op_registry[];
extern const size_t op_registry_len;

/* The definition for (domain, name) in effect at opset, or NULL. */
const OpDef *ops_find(const char *domain, const char *name, int64_t opset);

#endif
