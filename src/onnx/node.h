/* node.h — reading node attributes with type checks.
 *
 * Each getter returns 0 (value or default stored), or -1 with error() naming
 * the node and attribute when the attribute exists with another type. */
#ifndef QM_ONNX_NODE_H
#define QM_ONNX_NODE_H

#include <stddef.h>
#include <stdint.h>

#include "onnx/model.h"
#include "util.h"

/* display name of a node for messages: its name, else "OpType(output0)" */
const char *node_label(const Onnx__NodeProto *n, char *buf, size_t size);
/* the attribute called name, or NULL */
const Onnx__AttributeProto *node_attr(const Onnx__NodeProto *n, const char *name);
/* a new attribute of n called name, of type (ONNX__ATTRIBUTE_PROTO__
 * ATTRIBUTE_TYPE__*), its value for the caller to set */
Onnx__AttributeProto *node_attr_add(Onnx__NodeProto *n, const char *name, int type);
int attr_int(const Onnx__NodeProto *n, const char *name, int64_t dflt, int64_t *out);
int attr_float(const Onnx__NodeProto *n, const char *name, float dflt, float *out);
/* string attribute copied into buf (truncated error if it does not fit) */
int attr_str(const Onnx__NodeProto *n, const char *name, const char *dflt, char *buf, size_t size);
/* *v = NULL, *len = 0 when absent */
int attr_ints(const Onnx__NodeProto *n, const char *name, const int64_t **v, size_t *len);
int attr_floats(const Onnx__NodeProto *n, const char *name, const float **v, size_t *len);
/* *t = NULL when absent */
int attr_tensor(const Onnx__NodeProto *n, const char *name, const Onnx__TensorProto **t);
int attr_graph(const Onnx__NodeProto *n, const char *name, const Onnx__GraphProto **g);
/* input i's name, or NULL when absent (beyond n_input or empty string) */
const char *node_input(const Onnx__NodeProto *n, size_t i);
/* The attribute defaults of model-local function f
 * (FunctionProto.attribute_proto, field 11: newer than this build's
 * onnx.proto, so kept as an unknown field), unpacked and appended to out
 * as Onnx__AttributeProto * (the caller frees them with
 * onnx__attribute_proto__free_unpacked). -1 after error() when one is
 * unreadable (those appended before stay in out). */
int function_attr_defaults(const Onnx__FunctionProto *f, PtrVec *out);
/* whether domains a and b are the same ("", NULL and "ai.onnx" all name
 * the default one) */
int domain_eq(const char *a, const char *b);
/* m's model-local function domain.name, or NULL */
const Onnx__FunctionProto *model_function(const Onnx__ModelProto *m, const char *domain, const char *name);
/* the opset of domain that f (NULL: none) imports, else the model's */
int64_t function_opset(const Onnx__ModelProto *m, const Onnx__FunctionProto *f, const char *domain);

#endif
