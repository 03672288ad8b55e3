/* inline.h — model-local functions expanded into the graphs that call them.
 *
 * The interpreter runs graphs, so before planning, every call of a function
 * of ModelProto.functions (in the main graph, in If/Loop bodies, inside other
 * functions) is replaced by a copy of the function's body: each body value
 * is renamed CALL/name (CALL is the calling node's name, made unique against
 * every name of the model), formal inputs and outputs take the caller's
 * names (an input the caller leaves out is an absent optional input),
 * attribute references take the caller's attribute or the function's
 * default (neither: the attribute is dropped, as ONNX says). Nodes copied
 * from a body keep their function's opset_import (inlined_opset()).
 *
 * The result borrows the model's protos (initializers, attributes, types):
 * keep the model alive until inlined_free(). */
#ifndef QM_EXEC_INLINE_H
#define QM_EXEC_INLINE_H

#include <stdint.h>

#include "onnx/model.h"

typedef struct Inlined Inlined;

/* Expand every call of a model-local function in m's graph. *out is NULL
 * (nothing allocated) when the graph calls none; -1 after error() for a
 * recursive function or a malformed call, naming the node and function. */
int inline_functions(const Onnx__ModelProto *m, Inlined **out);
/* the main graph with every call expanded */
const Onnx__GraphProto *inlined_graph(const Inlined *in);
/* opset of domain dom for node n: its function's import when n was copied
 * from a function body that imports dom, else the model's (in may be NULL) */
int64_t inlined_opset(const Inlined *in, const Onnx__ModelProto *m, const Onnx__NodeProto *n,
		      const char *dom);
void inlined_free(Inlined *in);

#endif
