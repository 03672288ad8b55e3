/* fold.c — the fold pass: constant folding (see passes.h).
 *
 * A node of the default domain whose present inputs are all initializers of
 * its graph (not overridable graph inputs) or outputs of nodes folded before
 * it, that has a kernel and holds no subgraph, is run once through its
 * kernel outside the interpreter (RunCtx.interp == NULL); its outputs become
 * initializers and the node goes. Constant nodes become initializers the
 * same way. Never folded: random operators and Dropout, nodes producing a
 * graph output (the output must stay a node output for other tools), and
 * nodes with an output over the size limit or whose kernel refuses the
 * inputs — those are reported on the log and counted as skipped. Subgraphs
 * fold on their own initializers. */
#include <stdlib.h>
#include <string.h>

#include "onnx/node.h"
#include "ops/op.h"
#include "preprocess/passes.h"

static const char *const never[] = {
	"RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike",
	"Multinomial", "Bernoulli", "Dropout",
};

static int has_subgraph(const Onnx__NodeProto *n)
{
	for (size_t a = 0; a < n->n_attribute; a++)
		if (n->attribute[a]->g || n->attribute[a]->n_graphs)
			return 1;
	return 0;
}

static int foldable(const Onnx__GraphProto *g, const Onnx__NodeProto *n)
{
	if (n->domain && *n->domain && strcmp(n->domain, "ai.onnx"))
		return 0;
	for (size_t i = 0; i < ARRAY_LEN(never); i++)
		if (!strcmp(n->op_type, never[i]))
			return 0;
	if (has_subgraph(n) || n->n_output == 0)
		return 0;
	for (size_t k = 0; k < n->n_input; k++) {
		const char *in = n->input[k];
		if (!*in)
			continue;
		if (!pg_init(g, in) || pg_is_input(g, in))
			return 0;
	}
	for (size_t k = 0; k < n->n_output; k++)
		if (pg_is_output(g, n->output[k]))
			return 0;
	return 1;
}

/* run node n on its constant inputs; 1 folded, 0 skipped (reported), -1 */
static int fold_node(PrepCtx *c, Onnx__GraphProto *g, size_t idx)
{
	Onnx__NodeProto *n = g->node[idx];
	char lb[256];
	const OpDef *d = ops_find("", n->op_type, model_opset(c->m->proto, ""));
	if (!d || !d->run) {
		c->stat->skipped++;
		if (c->o->log)
			fprintf(c->o->log, "preprocess: fold: %s: no kernel for %s, left as it is\n",
				node_label(n, lb, sizeof lb), n->op_type);
		return 0;
	}
	size_t nin = n->n_input, nout = n->n_output;
	Tensor *in = xcalloc(nin ? nin : 1, sizeof *in);
	Tensor *out = xcalloc(nout, sizeof *out);
	const Tensor **pin = xcalloc(nin ? nin : 1, sizeof *pin);
	Tensor **pout = xcalloc(nout, sizeof *pout);
	int r = 1;
	for (size_t k = 0; k < nin && r == 1; k++) {
		if (!*n->input[k])
			continue;
		if (tensor_from_proto(c->m, pg_init(g, n->input[k]), &in[k]) < 0)
			r = 0;
		pin[k] = &in[k];
	}
	for (size_t k = 0; k < nout; k++)
		pout[k] = &out[k];
	const char *why = NULL;
	size_t limit = c->o->fold_limit ? c->o->fold_limit : PREP_FOLD_LIMIT;
	if (r == 1) {
		RunCtx rc = {
			.node = n, .opset = model_opset(c->m->proto, ""), .nin = nin, .nout = nout,
			.in = pin, .out = pout, .interp = NULL, .threads = 1,
		};
		if (d->run(&rc) < 0)
			r = 0;
		for (size_t k = 0; k < nout && r == 1; k++)
			if (*n->output[k] && out[k].nbytes > limit) {
				r = 0;
				why = "over";
			}
	}
	if (r == 1) {
		for (size_t k = 0; k < nout; k++)
			if (*n->output[k])
				pg_add_init(g, n->output[k], &out[k]);
		pg_remove_node(g, idx);
		c->stat->changed++;
	} else {
		c->stat->skipped++;
		if (c->o->log && why)
			fprintf(c->o->log, "preprocess: fold: %s (%s): an output exceeds the fold limit of %zu bytes, left as it is\n",
				node_label(n, lb, sizeof lb), n->op_type, limit);
		else if (c->o->log)
			fprintf(c->o->log, "preprocess: fold: %s (%s): not folded: %s\n", node_label(n, lb, sizeof lb),
				n->op_type, errmsg());
	}
	for (size_t k = 0; k < nin; k++)
		tensor_free(&in[k]);
	for (size_t k = 0; k < nout; k++)
		tensor_free(&out[k]);
	free(in);
	free(out);
	free(pin);
	free(pout);
	return r;
}

int prep_fold(PrepCtx *c, Onnx__GraphProto *g)
{
	for (size_t i = 0; i < g->n_node;) {
		int tried = 0;
		for (size_t k = 0; k < c->tried.n && !tried; k++)
			tried = c->tried.v[k] == g->node[i];
		if (tried)
			c->stat->skipped++;
		if (tried || !foldable(g, g->node[i])) {
			i++;
			continue;
		}
		int r = fold_node(c, g, i);
		if (r < 0)
			return -1;
		if (r == 0)
			pv_push(&c->tried, g->node[i++]);
	}
	return pg_each_subgraph(c, g, prep_fold);
}
