/* passes.h — output-preserving graph simplification before quantization.
 *
 * Each pass rewrites a Model in place and counts what it changed; the driver
 * (passes.c) runs the selected passes in the given order, repeating the whole
 * list until a round changes nothing (at most PREP_MAX_ROUNDS rounds), then
 * drops value_info entries of tensors that no longer exist. Passes work on
 * the main graph and recurse into subgraphs (If/Loop/Scan bodies) where noted
 * in their file. No pass ever changes what the model computes beyond float
 * rounding of folded arithmetic.
 *
 * Passes: identity (Identity, inference Dropout, no-op Cast and Slice),
 * shape (Shape and Size of statically shaped tensors; Reshape targets
 * computed up to one entry become constants with -1), fold (constant
 * folding through the operator kernels), fuse-bn (BatchNormalization into
 * Conv, ConvTranspose or Gemm), conv-affine (Mul/Add by per-channel constants into Conv),
 * transpose (consecutive Transposes, identity permutations), matmul-add
 * (MatMul + Add of a bias into Gemm), layernorm and gelu (decomposed
 * LayerNorm and GELU into LayerNormalization and Gelu, fuse_tf.c), dedup (duplicate initializers), cse
 * (nodes computing the same thing), dce (dead nodes, unused initializers).
 * All
 * functions return 0 or -1 after error(). */
#ifndef QM_PREPROCESS_PASSES_H
#define QM_PREPROCESS_PASSES_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "onnx/model.h"
#include "onnx/tensor.h"
#include "strmap.h"
#include "util.h"

#define PREP_MAX_ROUNDS 8
/* default bound on the bytes of one folded output */
#define PREP_FOLD_LIMIT ((size_t)16 << 20)

enum {
	PREP_IDENTITY, PREP_SHAPE, PREP_FOLD, PREP_FUSE_BN, PREP_CONV_AFFINE, PREP_TRANSPOSE,
	PREP_MATMUL_ADD, PREP_LAYERNORM, PREP_GELU, PREP_DEDUP, PREP_CSE, PREP_DCE, PREP_NPASSES
};

typedef struct PrepStat {
	size_t changed;       /* nodes removed or rewritten, initializers shared/dropped */
	size_t skipped;       /* candidates the last round left alone (fold: over the
				 size limit or refused by the kernel; identity: must stay) */
} PrepStat;

typedef struct PrepOpts {
	int passes[PREP_NPASSES]; /* PREP_* in the order to run */
	size_t npasses;
	size_t fold_limit;        /* 0: PREP_FOLD_LIMIT */
	int64_t opset;            /* preprocess.opset: convert to it first (0: keep) */
	FILE *log;                /* skipped folds are reported here (may be NULL) */
} PrepOpts;

typedef struct PrepReport {
	PrepStat stat[PREP_NPASSES];
	size_t rounds;
	size_t nodes_before, nodes_after;   /* main graph and subgraphs */
	size_t inits_before, inits_after;
	int64_t opset_from, opset_to;       /* default-domain opset before/after */
	size_t opset_changed;               /* nodes the opset upgrade rewrote */
} PrepReport;

/* name of pass PREP_* */
const char *prep_pass_name(int pass);
/* Parse "default" or "p1,p2 p3" into o->passes. -1 with error() naming an
 * unknown pass and listing the known ones. */
int prep_parse(const char *spec, PrepOpts *o);
/* Upgrade the opset when o->opset asks (opset.h), then run the passes on m. */
int prep_run(Model *m, const PrepOpts *o, PrepReport *r);

/* a set of names (borrowed pointers; strmap.h); zeroed is empty */
typedef StrMap NameSet;

/* ---- the passes (one graph; each recurses into subgraphs as it can) ---- */
typedef struct PrepCtx {
	Model *m;
	const PrepOpts *o;
	PrepStat *stat;       /* the running pass's counters */
	size_t fresh;         /* counter for new tensor names */
	StrMap names;         /* every name of the model, owned copies, made by the
	                       * first pg_fresh_name() (see there) */
	int have_names;
	PtrVec tried;         /* nodes fold skipped: not retried in later rounds */
	PtrVec scopes;        /* fold: a NameMap of constants (const_init in fold.c) per
	                       * enclosing graph, outermost first, then the folded one */
	struct DedupCache *dedup; /* dedup: hashes of mapped initializers, kept for the run */
	StrMap noted;         /* layernorm, gelu: what the log said already (owned keys),
	                       * so that a later round does not repeat it */
} PrepCtx;

int prep_identity(PrepCtx *c, Onnx__GraphProto *g);
int prep_shape(PrepCtx *c, Onnx__GraphProto *g);
int prep_fold(PrepCtx *c, Onnx__GraphProto *g);
int prep_fuse_bn(PrepCtx *c, Onnx__GraphProto *g);
int prep_conv_affine(PrepCtx *c, Onnx__GraphProto *g);
int prep_transpose(PrepCtx *c, Onnx__GraphProto *g);
int prep_matmul_add(PrepCtx *c, Onnx__GraphProto *g);
int prep_layernorm(PrepCtx *c, Onnx__GraphProto *g);
int prep_gelu(PrepCtx *c, Onnx__GraphProto *g);
int prep_dedup(PrepCtx *c, Onnx__GraphProto *g);
int prep_cse(PrepCtx *c, Onnx__GraphProto *g);
int prep_dce(PrepCtx *c, Onnx__GraphProto *g);
/* free what dedup keeps between rounds */
void prep_dedup_free(PrepCtx *c);

/* ---- helpers shared by the passes (graph.c) ---- */

int nameset_has(const NameSet *s, const char *name);
/* 1 if added, 0 if present or empty */
int nameset_add(NameSet *s, const char *name);
void nameset_free(NameSet *s);

/* a map from names (borrowed pointers) to non-NULL values (strmap.h);
 * zeroed is empty */
typedef StrMap NameMap;

/* the value of name, or NULL */
void *namemap_get(const NameMap *m, const char *name);
/* name's value becomes v, and name (not a copy) its key */
void namemap_put(NameMap *m, const char *name, void *v);
void namemap_free(NameMap *m);

/* number of reads of name by nodes of g, including nested subgraphs */
size_t pg_uses(const Onnx__GraphProto *g, const char *name);
/* is name a graph output of g / a graph input / an initializer of g? */
int pg_is_output(const Onnx__GraphProto *g, const char *name);
int pg_is_input(const Onnx__GraphProto *g, const char *name);
Onnx__TensorProto *pg_init(const Onnx__GraphProto *g, const char *name);
/* index of the node of g producing name, or -1 */
long pg_producer(const Onnx__GraphProto *g, const char *name);
/* does any subgraph nested in g define name (input, initializer, node output)? */
int pg_sub_defines(const Onnx__GraphProto *g, const char *name);
/* replace every read of from by to in g and nested subgraphs */
void pg_rename_uses(Onnx__GraphProto *g, const char *from, const char *to);
/* Remove node i, whose output out is to become the same value as in:
 * readers of out read in instead; when out is a graph output, the producer
 * of in is renamed to out. 1 if done, 0 if impossible (node kept). */
int pg_bypass(Onnx__GraphProto *g, size_t i, const char *in, const char *out);
/* add to s every name a subgraph nested in g (at any depth) defines: its
 * inputs, initializers and node outputs (what pg_sub_defines tests) */
void pg_sub_names(const Onnx__GraphProto *g, NameSet *s);
/* Renames: a NameMap from names (borrowed) to malloc'd names. Every read
 * in g and its nested subgraphs of a name m maps becomes the name it maps
 * to (following chains), in one sweep. */
void pg_apply_renames(Onnx__GraphProto *g, const NameMap *m);
/* the same for the reads of node n */
void pg_rename_node_inputs(Onnx__NodeProto *n, const NameMap *m);
/* free m and the names it maps to */
void pg_renames_free(NameMap *m);
/* free and remove the nodes i of g with gone[i] set, keeping the order */
void pg_drop_nodes(Onnx__GraphProto *g, const char *gone);
/* delete node i (frees it) */
void pg_remove_node(Onnx__GraphProto *g, size_t i);
/* a tensor name not used anywhere in m's main graph or subgraphs */
char *pg_fresh_name(PrepCtx *c, const Onnx__GraphProto *g, const char *base);
/* add an initializer built from t (t is freed) */
void pg_add_init(Onnx__GraphProto *g, const char *name, Tensor *t);
/* t's bytes d, len from model_tensor_bytes are read: freed when owned,
 * their pages given back to the file when they are mapped external data
 * (ext_release), so reading the weights of a big model one by one keeps
 * none of them resident */
void pg_done_bytes(const Onnx__TensorProto *t, const void *d, size_t len, int owned);
/* tensor_from_proto, then pg_done_bytes on the source */
int pg_tensor(Model *m, const Onnx__TensorProto *p, Tensor *t);
/* An index of one graph for a pass that asks about names per node:
 * initializers, graph inputs and outputs, the first annotation with a
 * shape (inputs, value_info, outputs, in that order), producers (name ->
 * node index), reads (nested subgraphs included, and which top-level node
 * reads a name read once) and the names nested subgraphs define. Made once
 * per pass and graph: the pg_* queries search the graph each time, which
 * made passes quadratic (fuse-bn on 2000 Conv + BatchNormalization: 3.8 s).
 * A pass that edits the graph keeps the index true with pgx_node (a node's
 * inputs and outputs leave it before the node changes and join it after)
 * and pgx_add_init, and removes nodes only at its end (pg_drop_nodes), so
 * node indices stay valid. Keys are owned copies: an edit may free the
 * strings it read them from. */
typedef struct PgName {
	int64_t prod;        /* index + 1 of its producer, 0: none */
	int64_t uses;        /* reads, nested subgraphs included */
	int64_t top, topsum; /* top-level reads and the sum of their index + 1 */
} PgName;
typedef struct PgIndex {
	StrMap names;    /* name -> index + 1 into info[] */
	PgName *info;
	size_t ninfo;
	StrMap init;     /* name -> Onnx__TensorProto * */
	StrMap vi;       /* name -> Onnx__ValueInfoProto * with a shape */
	NameSet in, out, sub;
	char **blk;      /* the keys' copies, in blocks freed at once */
	size_t nblk, used;
} PgIndex;
void pgx_build(PgIndex *x, const Onnx__GraphProto *g);
void pgx_free(PgIndex *x);
Onnx__TensorProto *pgx_init(const PgIndex *x, const char *name);
const Onnx__ValueInfoProto *pgx_annotation(const PgIndex *x, const char *name);
int pgx_is_input(const PgIndex *x, const char *name);
int pgx_is_output(const PgIndex *x, const char *name);
int pgx_sub_defines(const PgIndex *x, const char *name);
/* the index of name's producer, or -1 */
long pgx_producer(const PgIndex *x, const char *name);
/* reads of name, nested subgraphs included (pg_uses) */
size_t pgx_uses(const PgIndex *x, const char *name);
/* the index of the top-level node reading name when that is its only
 * read, else -1 */
long pgx_only_reader(const PgIndex *x, const char *name);
/* node i (n) joins the index (add 1) or leaves it (add 0): its reads and,
 * producing nothing else, its outputs */
void pgx_node(PgIndex *x, const Onnx__NodeProto *n, size_t i, int add);
void pgx_add_init(PgIndex *x, Onnx__TensorProto *t);
/* the reads of from become to's (its readers are to be renamed) */
void pgx_move_reads(PgIndex *x, const char *from, const char *to);

/* apply fn to every subgraph of every node of g */
int pg_each_subgraph(PrepCtx *c, Onnx__GraphProto *g, int (*fn)(PrepCtx *, Onnx__GraphProto *));

#endif
