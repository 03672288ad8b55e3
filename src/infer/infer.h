/* infer.h — the type and shape inference pass over a whole model.
 *
 * infer_model() walks the main graph and every subgraph in topological
 * order, calls each operator's inference function (src/ops, see op.h),
 * infers calls of model-local functions through their bodies (caller's
 * attributes substituted for attribute references), propagates small
 * constant tensors (initializers, Constant nodes, results) through shape
 * computations by running kernels, and writes the result back into the
 * model: complete value_info for every intermediate tensor of every graph,
 * and the types of graph outputs where the model left them out. Nothing is
 * written when the pass fails. Function bodies are never written to: they
 * are shared by calls of different types.
 *
 * Dimension symbols are interned in a SymTab: two dims name the same symbol
 * exactly when their sym pointers are equal. Unknown dims get fresh symbols
 * "unk__N". */
#ifndef QM_INFER_INFER_H
#define QM_INFER_INFER_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "onnx/model.h"
#include "ops/op.h"
#include "util.h"

/* newest ai.onnx opset the pass knows */
#define INFER_MAX_OPSET 23
/* default bound on the elements of constant-propagated tensors */
#define INFER_CONST_LIMIT 4096

enum {
	INFER_MERGE = 0,  /* keep annotations, fill the rest, error on contradiction */
	INFER_STRICT,     /* merge, and error when a tensor stays untyped */
};

typedef struct InferOpts {
	int mode;             /* INFER_MERGE or INFER_STRICT */
	int64_t const_limit;  /* 0: INFER_CONST_LIMIT; < 0: no constant propagation */
	FILE *trace;          /* non-NULL: one line per node output (type, value) */
} InferOpts;

/* an operator the pass could not infer, reported once per (domain, op, opset) */
typedef struct InferMissing {
	char *domain;
	char *op;
	int64_t opset;
	char *node;           /* label of the first node seen */
	size_t count;         /* nodes of this op */
	int has_def;          /* an OpDef exists but its infer is NULL */
} InferMissing;

typedef struct InferReport {
	size_t ntensors;      /* node outputs over all graphs */
	size_t ntyped;        /* ... with a known type (element type for tensors) */
	size_t nshaped;       /* ... tensors whose rank is known */
	size_t nconst;        /* ... with a propagated constant value */
	size_t nconstfail;    /* kernels that failed during constant propagation */
	InferMissing *missing;
	size_t nmissing;
	char *first_untyped;  /* name of one untyped tensor, or NULL */
} InferReport;

/* Infer types and shapes of m in place. o may be NULL (merge mode); r may be
 * NULL. 0, or -1 after error() with one line naming node, tensor and cause. */
int infer_model(Model *m, const InferOpts *o, InferReport *r);
/* free what a report owns and zero it */
void infer_report_free(InferReport *r);

/* ---- dimension symbols (types.c) ---- */

typedef struct SymTab SymTab;
SymTab *symtab_new(void);                    /* empty table */
void symtab_free(SymTab *s);                 /* frees every interned string */
/* the interned copy of name (equal names give equal pointers) */
const char *sym_intern(SymTab *s, const char *name);
/* a symbol "unk__N" not interned before */
const char *sym_fresh(SymTab *s);

/* ---- ValueType <-> TypeProto (types.c) ---- */

/* Read tp into t (t is cleared first; tp may be NULL: unknown type). -1 for
 * an element type or rank this build cannot represent; what names the value
 * for the message. */
int vt_from_proto(SymTab *s, const Onnx__TypeProto *tp, ValueType *t, const char *what);
/* A new TypeProto for t (malloc'd, freed by protobuf-c), or NULL when t's
 * kind is unknown. Unknown dims are written without value or param. */
Onnx__TypeProto *vt_to_proto(const ValueType *t);
/* "float[1,batch,3]", "int64[*]" (rank unknown), "seq(float[2])", "?" */
const char *vt_str(const ValueType *t, char *buf, size_t size);
/* Merge a declared annotation with an inferred type into out (out must be
 * initialized; it is cleared first). The more specific of each part wins;
 * declared symbol names win over inferred ones. -1 with error() describing
 * both types on a contradiction (different kinds, element types, ranks or
 * known dims). */
int vt_merge(const ValueType *declared, const ValueType *inferred, ValueType *out);
/* 1 if inferred satisfies declared: same kind and element type, and every
 * known declared dim known and equal (declared symbols match anything); 0
 * otherwise. */
int vt_satisfies(const ValueType *declared, const ValueType *inferred);
/* 1 if t is typed: kind known, and for tensors the element type known */
int vt_typed(const ValueType *t);

/* ---- the conformance harness (check.c) ---- */

/* Drop m's output and value_info annotations (graph input types stay), run
 * infer_model and compare the result with what m declared; for a model in
 * ONNX's test layout, concrete output dims must also match the real outputs
 * in test_data_set_0. Returns 1 when everything matches, 0 on a mismatch
 * (why says which tensor and both types), -1 when inference failed (why
 * holds the error). */
int infer_check_declared(Model *m, const InferOpts *o, StrBuf *why);

#endif
