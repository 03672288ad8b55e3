/* check.c — conformance harness: strip a model's annotations, infer them
 * again and compare with what the model declared (see infer.h). */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "infer/infer.h"
#include "onnx/pbdepth.h"
#include "util.h"

typedef struct Declared {
	const char *name;   /* borrowed from the model (graph outputs keep theirs) */
	char *owned;        /* value_info names are copied: the entries are freed */
	const Onnx__GraphProto *g;
	int is_output;
	ValueType vt;
} Declared;

/* Record the declared types of g (and of its subgraphs) and drop them:
 * value_info entirely, output types; graph input types stay. */
static int strip_graph(SymTab *syms, Onnx__GraphProto *g, Declared **d, size_t *nd)
{
	for (size_t i = 0; i < g->n_output; i++) {
		Onnx__ValueInfoProto *vo = g->output[i];
		if (!vo->type)
			continue;
		*d = xreallocarray(*d, *nd + 1, sizeof **d);
		Declared *x = &(*d)[(*nd)++];
		memset(x, 0, sizeof *x);
		x->vt.rank = -1;
		x->name = vo->name ? vo->name : "";
		x->g = g;
		x->is_output = 1;
		if (vt_from_proto(syms, vo->type, &x->vt, x->name) < 0)
			return -1;
		onnx__type_proto__free_unpacked(vo->type, NULL);
		vo->type = NULL;
	}
	int rc = 0;
	for (size_t i = 0; i < g->n_value_info; i++) {
		Onnx__ValueInfoProto *vi = g->value_info[i];
		if (vi->type && vi->name && rc == 0) {
			*d = xreallocarray(*d, *nd + 1, sizeof **d);
			Declared *x = &(*d)[(*nd)++];
			memset(x, 0, sizeof *x);
			x->vt.rank = -1;
			x->owned = xstrdup(vi->name);
			x->name = x->owned;
			x->g = g;
			rc = vt_from_proto(syms, vi->type, &x->vt, x->name);
		}
		/* every entry goes, even after an error: the array is dropped below */
		onnx__value_info_proto__free_unpacked(vi, NULL);
	}
	free(g->value_info);
	g->value_info = NULL;
	g->n_value_info = 0;
	if (rc < 0)
		return -1;
	for (size_t i = 0; i < g->n_node; i++) {
		const Onnx__NodeProto *n = g->node[i];
		for (size_t j = 0; j < n->n_attribute; j++) {
			Onnx__AttributeProto *a = n->attribute[j];
			if (a->g && strip_graph(syms, a->g, d, nd) < 0)
				return -1;
			for (size_t k = 0; k < a->n_graphs; k++)
				if (strip_graph(syms, a->graphs[k], d, nd) < 0)
					return -1;
		}
	}
	return 0;
}

static const Onnx__TypeProto *find_type(const Onnx__GraphProto *g, const Declared *x)
{
	if (x->is_output) {
		for (size_t i = 0; i < g->n_output; i++)
			if (g->output[i]->name && !strcmp(g->output[i]->name, x->name))
				return g->output[i]->type;
		return NULL;
	}
	for (size_t i = 0; i < g->n_value_info; i++)
		if (g->value_info[i]->name && !strcmp(g->value_info[i]->name, x->name))
			return g->value_info[i]->type;
	return NULL;
}

static void add_missing(StrBuf *why, const InferReport *r)
{
	for (size_t i = 0; i < r->nmissing; i++)
		sb_printf(why, "%s no shape inference for %s%s%s-%lld", i ? "," : " (",
			  r->missing[i].domain, *r->missing[i].domain ? "." : "", r->missing[i].op,
			  (long long)r->missing[i].opset);
	if (r->nmissing)
		sb_putc(why, ')');
}

/* When m comes from ONNX's test layout (DIR/model.onnx with
 * DIR/test_data_set_0/output_K.pb), the real outputs bound what inference
 * may claim: every concrete inferred dim must be the real one. This catches
 * a wrong concrete dim where the model only declares a symbol. 1 if all
 * agree (or there is no data), 0 with why filled. */
static int check_real_outputs(Model *m, SymTab *syms, StrBuf *why)
{
	const Onnx__GraphProto *g = m->proto->graph;
	if (!m->path || !m->dir)
		return 1;
	for (size_t i = 0; i < g->n_output; i++) {
		char *path = xasprintf("%s/test_data_set_0/output_%zu.pb", m->dir, i);
		char *data;
		size_t len;
		ValueType t = {0};
		t.rank = -1;
		int ok = 1;
		if (access(path, R_OK) != 0 || read_file(path, &data, &len) < 0) {
			free(path);
			continue;
		}
		free(path);
		if (vt_from_proto(syms, g->output[i]->type, &t, "output") == 0 && t.kind == VT_TENSOR) {
			Onnx__TensorProto *tp = pb_depth_check(&onnx__tensor_proto__descriptor, data, len)
				? NULL : onnx__tensor_proto__unpack(NULL, len, (const uint8_t *)data);
			if (tp) {
				int rank_ok = t.rank < 0 || (size_t)t.rank == tp->n_dims;
				for (int d = 0; rank_ok && d < t.rank; d++)
					if (t.dims[d].v >= 0 && t.dims[d].v != tp->dims[d])
						rank_ok = 0;
				/* element types are not compared: older test data stores
				 * bfloat16 outputs as uint16 */
				if (!rank_ok) {
					char a[512];
					sb_printf(why, "output '%s': inferred %s, but the test data has shape [",
						  g->output[i]->name, vt_str(&t, a, sizeof a));
					for (size_t d = 0; d < tp->n_dims; d++)
						sb_printf(why, d ? ",%lld" : "%lld", (long long)tp->dims[d]);
					sb_putc(why, ']');
					ok = 0;
				}
				onnx__tensor_proto__free_unpacked(tp, NULL);
			}
		}
		vt_clear(&t);
		free(data);
		if (!ok)
			return 0;
	}
	return 1;
}

int infer_check_declared(Model *m, const InferOpts *o, StrBuf *why)
{
	SymTab *syms = symtab_new();
	Declared *d = NULL;
	size_t nd = 0;
	InferReport rep = {0};
	int rc = -1;
	if (strip_graph(syms, m->proto->graph, &d, &nd) < 0) {
		sb_printf(why, "%s", errmsg());
		goto out;
	}
	if (infer_model(m, o, &rep) < 0) {
		sb_printf(why, "%s", errmsg());
		goto out;
	}
	rc = 1;
	for (size_t i = 0; i < nd && rc == 1; i++) {
		ValueType got = {0};
		got.rank = -1;
		char a[512], b[512];
		if (vt_from_proto(syms, find_type(d[i].g, &d[i]), &got, d[i].name) < 0) {
			sb_printf(why, "%s", errmsg());
			rc = -1;
		} else if (!vt_satisfies(&d[i].vt, &got)) {
			sb_printf(why, "%s '%s': declared %s, inferred %s", d[i].is_output ? "output" :
				  "value_info", d[i].name, vt_str(&d[i].vt, a, sizeof a),
				  vt_str(&got, b, sizeof b));
			add_missing(why, &rep);
			rc = 0;
		}
		vt_clear(&got);
	}
	if (rc == 1)
		rc = check_real_outputs(m, syms, why);
out:
	for (size_t i = 0; i < nd; i++) {
		vt_clear(&d[i].vt);
		free(d[i].owned);
	}
	free(d);
	infer_report_free(&rep);
	symtab_free(syms);
	return rc;
}
