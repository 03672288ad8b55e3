/* blame.c — which nodes add the error: every compared activation is traced
 * back through the reference graph to the nearest compared tensors (or
 * weights and uncompared graph inputs); the nodes on the way form its
 * segment, and the noise the segment adds is the activation's
 * noise-to-signal ratio minus that of its worst input (see verify.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "verify/verify.h"

typedef struct Name {
	const char *name;
	size_t idx;
} Name;

static int cmp_name(const void *a, const void *b)
{
	return strcmp(((const Name *)a)->name, ((const Name *)b)->name);
}

static const Name *lookup(const Name *v, size_t n, const char *name)
{
	Name key = {.name = name};
	return n ? bsearch(&key, v, n, sizeof *v, cmp_name) : NULL;
}

static double nsr(const ErrStats *e)
{
	if (e->sd2 == 0)
		return 0;
	if (e->sx2 == 0)
		return INFINITY;
	return e->sd2 / e->sx2;
}

double err_added_nsr(const ErrStats *e)
{
	double d = nsr(e) - e->in_nsr;
	return d > 0 ? d : 0;
}

static const char *node_name(const Onnx__NodeProto *n)
{
	if (n->name && *n->name)
		return n->name;
	return n->n_output && n->output[0] ? n->output[0] : n->op_type;
}

/* nodes of q that read a dequantized tensor (a DequantizeLinear's output,
 * whatever the quantizer named it), by name */
static Name *quantized_nodes(const Onnx__GraphProto *g, size_t *count)
{
	Name *v = xcalloc(g->n_node + 1, sizeof *v), *dq = xcalloc(g->n_node + 1, sizeof *dq);
	size_t n = 0, ndq = 0;
	for (size_t i = 0; i < g->n_node; i++)
		if (!strcmp(g->node[i]->op_type, "DequantizeLinear") && g->node[i]->n_output)
			dq[ndq++] = (Name){g->node[i]->output[0], i};
	if (ndq > 1)
		qsort(dq, ndq, sizeof *dq, cmp_name);
	for (size_t i = 0; i < g->n_node; i++) {
		const Onnx__NodeProto *nd = g->node[i];
		if (!nd->name || !*nd->name || !strcmp(nd->op_type, "QuantizeLinear") ||
		    !strcmp(nd->op_type, "DequantizeLinear"))
			continue;
		int deq = 0;
		for (size_t k = 0; k < nd->n_input && !deq; k++)
			deq = nd->input[k] && *nd->input[k] && lookup(dq, ndq, nd->input[k]);
		if (deq)
			v[n++] = (Name){nd->name, i};
	}
	free(dq);
	if (n > 1)
		qsort(v, n, sizeof *v, cmp_name);
	*count = n;
	return v;
}

/* whether some name of v (sorted) starts with prefix + '_' */
static int has_prefixed(const Name *v, size_t n, const char *prefix)
{
	size_t lo = 0, hi = n, pl = strlen(prefix);
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (strcmp(v[mid].name, prefix) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (; lo < n && !strncmp(v[lo].name, prefix, pl); lo++)
		if (v[lo].name[pl] == '_')
			return 1;
	return 0;
}

/* Which reference nodes the quantized model quantized: a node of the same
 * name reads a dequantized tensor (QDQ), or the node is gone, its outputs
 * come from another op type and nodes named after it replace it
 * (QOperator: fc1 -> fc1_MatMulInteger ... fc1_output_mul). */
static char *mark_quantized(const Onnx__GraphProto *g, const Onnx__GraphProto *qg)
{
	char *qd = xcalloc(g->n_node + 1, 1);
	size_t nq, nall = 0, nprod = 0;
	Name *qn = quantized_nodes(qg, &nq);
	Name *all = xcalloc(qg->n_node + 1, sizeof *all), *prod = NULL;
	for (size_t i = 0; i < qg->n_node; i++) {
		if (qg->node[i]->name && *qg->node[i]->name)
			all[nall++] = (Name){qg->node[i]->name, i};
		for (size_t k = 0; k < qg->node[i]->n_output; k++)
			if (qg->node[i]->output[k] && *qg->node[i]->output[k]) {
				prod = xreallocarray(prod, nprod + 1, sizeof *prod);
				prod[nprod++] = (Name){qg->node[i]->output[k], i};
			}
	}
	if (nall > 1)
		qsort(all, nall, sizeof *all, cmp_name);
	if (nprod > 1)
		qsort(prod, nprod, sizeof *prod, cmp_name);
	for (size_t i = 0; i < g->n_node; i++) {
		const Onnx__NodeProto *n = g->node[i];
		if (!n->name || !*n->name)
			continue;
		if (lookup(qn, nq, n->name)) {
			qd[i] = 1;
			continue;
		}
		if (lookup(all, nall, n->name) || !n->n_output || !n->output[0] || !has_prefixed(all, nall, n->name))
			continue;
		const Name *p = lookup(prod, nprod, n->output[0]);
		if (p && strcmp(qg->node[p->idx]->op_type, n->op_type))
			qd[i] = 1;
	}
	free(prod);
	free(all);
	free(qn);
	return qd;
}

void verify_blame(VerifyReport *rep, const Model *ref, const Model *q)
{
	const Onnx__GraphProto *g = verify_flat_graph(ref->proto->graph);
	const Onnx__GraphProto *qg = verify_flat_graph(q->proto->graph);
	size_t nprod = 0, nact = rep->nacts;
	Name *prod = xcalloc(g->n_node + 1, sizeof *prod), *acts = xcalloc(nact + 1, sizeof *acts);
	for (size_t i = 0; i < g->n_node; i++)
		for (size_t k = 0; k < g->node[i]->n_output; k++)
			if (g->node[i]->output[k] && *g->node[i]->output[k]) {
				prod = xreallocarray(prod, nprod + 1, sizeof *prod);
				prod[nprod++] = (Name){g->node[i]->output[k], i};
			}
	if (nprod > 1)
		qsort(prod, nprod, sizeof *prod, cmp_name);
	for (size_t i = 0; i < nact; i++)
		acts[i] = (Name){rep->acts[i].name, i};
	if (nact > 1)
		qsort(acts, nact, sizeof *acts, cmp_name);
	char *qd = mark_quantized(g, qg);
	char *seen = xcalloc(g->n_node + 1, 1);
	size_t *stack = xcalloc(g->n_node + 1, sizeof *stack);
	for (size_t a = 0; a < nact; a++) {
		ErrStats *e = &rep->acts[a];
		const Name *p = lookup(prod, nprod, e->name);
		e->in_nsr = 0;
		if (!p)
			continue; /* a graph input: no node computes it */
		memset(seen, 0, g->n_node + 1);
		StrBuf nodes = {0}, qnodes = {0};
		size_t sp = 0;
		stack[sp++] = p->idx;
		seen[p->idx] = 1;
		while (sp) {
			size_t ni = stack[--sp];
			const Onnx__NodeProto *nd = g->node[ni];
			const char *nm = node_name(nd);
			sb_printf(&nodes, "%s%s", nodes.len ? "\n" : "", nm);
			if (qd[ni])
				sb_printf(&qnodes, "%s%s", qnodes.len ? "\n" : "", nm);
			for (size_t k = 0; k < nd->n_input; k++) {
				const char *in = nd->input[k];
				if (!in || !*in)
					continue;
				const Name *m = lookup(acts, nact, in);
				if (m) {
					double r = nsr(&rep->acts[m->idx]);
					if (r > e->in_nsr)
						e->in_nsr = r;
					continue;
				}
				const Name *up = lookup(prod, nprod, in);
				if (up && !seen[up->idx]) {
					seen[up->idx] = 1;
					stack[sp++] = up->idx;
				}
			}
		}
		free(e->nodes);
		free(e->qnodes);
		e->nodes = sb_detach(&nodes);
		e->qnodes = sb_detach(&qnodes);
	}
	free(stack);
	free(seen);
	free(qd);
	free(acts);
	free(prod);
	verify_flat_free(qg);
	verify_flat_free(g);
}
