/* flat.c — one graph to compare and blame across If branches.
 *
 * The per-layer comparison and the blame walk work on a graph's node list by
 * tensor name. A model whose layers sit inside If branches (silero-vad holds
 * every Conv and its LSTM in one) would show them nothing, so they work on a
 * flat view instead: the nodes of each If branch, recursively, placed before
 * their If node, and the If node given its branches' outputs as extra inputs
 * (what it returns is computed there, so the blame walk goes on into them).
 * Tensor names are unique across scopes in well-formed ONNX, and the
 * interpreter's taps fire for branch tensors under their own names. Loop and
 * Scan bodies stay closed: their tensors take one value per iteration, which
 * a per-sample comparison cannot pair. The view borrows everything from the
 * model but the arrays and the widened copies of If nodes. */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "verify/verify.h"

typedef struct Flat {
	Onnx__GraphProto view;
	PtrVec nodes, inits, owned;   /* owned: widened If copies and their input arrays */
} Flat;

static void flatten(Flat *f, const Onnx__GraphProto *g)
{
	for (size_t i = 0; i < g->n_initializer; i++)
		pv_push(&f->inits, g->initializer[i]);
	for (size_t i = 0; i < g->n_node; i++) {
		Onnx__NodeProto *n = g->node[i];
		if (strcmp(n->op_type, "If") || (n->domain && *n->domain)) {
			pv_push(&f->nodes, n);
			continue;
		}
		size_t extra = 0;
		for (size_t a = 0; a < n->n_attribute; a++)
			if (n->attribute[a]->g) {
				flatten(f, n->attribute[a]->g);
				extra += n->attribute[a]->g->n_output;
			}
		Onnx__NodeProto *w = xmalloc(sizeof *w);
		*w = *n;
		w->input = xcalloc(n->n_input + extra + 1, sizeof *w->input);
		memcpy(w->input, n->input, n->n_input * sizeof *w->input);
		for (size_t a = 0; a < n->n_attribute; a++)
			for (size_t k = 0; n->attribute[a]->g && k < n->attribute[a]->g->n_output; k++)
				w->input[w->n_input++] = n->attribute[a]->g->output[k]->name;
		pv_push(&f->owned, w->input);
		pv_push(&f->owned, w);
		pv_push(&f->nodes, w);
	}
}

const Onnx__GraphProto *verify_flat_graph(const Onnx__GraphProto *g)
{
	Flat *f = xcalloc(1, sizeof *f);
	flatten(f, g);
	f->view = *g;
	f->view.node = (Onnx__NodeProto **)f->nodes.v;
	f->view.n_node = f->nodes.n;
	f->view.initializer = (Onnx__TensorProto **)f->inits.v;
	f->view.n_initializer = f->inits.n;
	return &f->view;
}

void verify_flat_free(const Onnx__GraphProto *view)
{
	if (!view)
		return;
	Flat *f = (Flat *)((char *)view - offsetof(Flat, view));
	pv_free(&f->nodes);
	pv_free(&f->inits);
	pv_free_all(&f->owned);
	free(f);
}
