/* graph.h — small graph-editing helpers for the quantizer: building nodes,
 * attributes and initializers in protobuf-c messages the Model owns (every
 * string and array is malloc'd, so model_free releases them). */
#ifndef QM_QUANT_GRAPH_H
#define QM_QUANT_GRAPH_H

#include <stddef.h>
#include <stdint.h>

#include "onnx/model.h"
#include "onnx/tensor.h"
#include "util.h"

/* new node; inputs/outputs are copied ("" for an absent optional input) */
Onnx__NodeProto *qg_node(const char *op, const char *name, size_t nin, const char *const *in,
			 size_t nout, const char *const *out);
/* import domain at version into m unless m imports it already */
void qg_import(Onnx__ModelProto *m, const char *domain, int64_t version);
void qg_attr_int(Onnx__NodeProto *n, const char *name, int64_t v);
/* move attribute attr (taken from another node) onto n */
void qg_attr_move(Onnx__NodeProto *n, Onnx__AttributeProto *attr);
/* replace input i of n by name */
void qg_set_input(Onnx__NodeProto *n, size_t i, const char *name);
/* append to a node list */
void qg_push(Onnx__NodeProto ***v, size_t *n, Onnx__NodeProto *node);
/* the initializer called name, or NULL */
Onnx__TensorProto *qg_init(const Onnx__GraphProto *g, const char *name);
/* a name no initializer has: base, else base_2, base_3 ... (malloc'd) */
char *qg_unique_name(const Onnx__GraphProto *g, const char *base);
/* add t (ownership moves) as an initializer called name */
void qg_add_init(Onnx__GraphProto *g, const char *name, Tensor *t);
/* add a float scalar / 1-D float or integer initializer from values */
void qg_add_scalar_f(Onnx__GraphProto *g, const char *name, float v);
void qg_add_values(Onnx__GraphProto *g, const char *name, int dtype, int rank, const int64_t *dims,
		   const void *data);
/* the node of g that writes name, or NULL */
Onnx__NodeProto *qg_producer(const Onnx__GraphProto *g, const char *name);
/* is name a graph output? */
int qg_is_output(const Onnx__GraphProto *g, const char *name);
/* does any node of the main graph read name? (except node skip) */
int qg_has_consumer(const Onnx__GraphProto *g, const char *name, const Onnx__NodeProto *skip);
/* does a node of a subgraph of g's nodes (at any depth) read name? */
int qg_read_in_subgraphs(const Onnx__GraphProto *g, const char *name);
/* does g itself define name (a graph input or a node output)? */
int qg_defines(const Onnx__GraphProto *g, const char *name);
/* the scope of subgraph attribute a of node n in scope outer (NULL: the main
 * graph), for names in reports: "If_0/then", "outer/Loop_3/body"
 * (malloc'd; then_branch and else_branch shorten to then and else) */
char *qg_scope(const char *outer, const Onnx__NodeProto *n, const Onnx__AttributeProto *a);
/* remove initializer name when no node reads it, in g or in any subgraph
 * (If/Loop/Scan bodies see the outer scope), and it is no graph output */
void qg_drop_unused_init(Onnx__GraphProto *g, const char *name);
/* drop the value_info entries of g (and of its subgraphs) naming no tensor
 * the graph or an enclosing one still defines (a node output, graph input
 * or initializer): what a rewrite renamed or removed */
void qg_prune_value_info(Onnx__GraphProto *g);

/* Every name a model uses (tensors, node names) at any depth, so that new
 * names are unique across scopes (a body must not hide an outer name). */
typedef struct QNames {
	void *root;     /* tsearch tree of malloc'd strings */
} QNames;
void qg_names_collect(QNames *s, const Onnx__GraphProto *g);
int qg_name_taken(const QNames *s, const char *name);
/* base when free, else base_2, base_3 ...; taken from now on (malloc'd) */
char *qg_name_fresh(QNames *s, const char *base);
/* mark name as used */
void qg_name_add(QNames *s, const char *name);
void qg_names_free(QNames *s);

#endif
