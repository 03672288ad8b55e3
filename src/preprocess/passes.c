/* passes.c — the preprocess driver: pass names, parsing, rounds (see
 * passes.h). */
#include <stdlib.h>
#include <string.h>

#include "preprocess/opset.h"
#include "preprocess/passes.h"

static const struct {
	const char *name;
	int (*fn)(PrepCtx *, Onnx__GraphProto *);
} passes[PREP_NPASSES] = {
	[PREP_IDENTITY] = {"identity", prep_identity},
	[PREP_SHAPE] = {"shape", prep_shape},
	[PREP_FOLD] = {"fold", prep_fold},
	[PREP_FUSE_BN] = {"fuse-bn", prep_fuse_bn},
	[PREP_CONV_AFFINE] = {"conv-affine", prep_conv_affine},
	[PREP_TRANSPOSE] = {"transpose", prep_transpose},
	[PREP_MATMUL_ADD] = {"matmul-add", prep_matmul_add},
	[PREP_LAYERNORM] = {"layernorm", prep_layernorm},
	[PREP_GELU] = {"gelu", prep_gelu},
	[PREP_DEDUP] = {"dedup", prep_dedup},
	[PREP_CSE] = {"cse", prep_cse},
	[PREP_DCE] = {"dce", prep_dce},
};

const char *prep_pass_name(int pass)
{
	return pass >= 0 && pass < PREP_NPASSES ? passes[pass].name : "?";
}

static int add_pass(PrepOpts *o, int p)
{
	for (size_t i = 0; i < o->npasses; i++)
		if (o->passes[i] == p)
			return error("preprocess: pass '%s' is listed twice", passes[p].name);
	o->passes[o->npasses++] = p;
	return 0;
}

int prep_parse(const char *spec, PrepOpts *o)
{
	o->npasses = 0;
	for (const char *s = spec; *s;) {
		while (*s == ' ' || *s == '\t' || *s == ',')
			s++;
		const char *e = s;
		while (*e && *e != ' ' && *e != '\t' && *e != ',')
			e++;
		size_t l = (size_t)(e - s);
		if (!l)
			break;
		int p = -1;
		for (int i = 0; i < PREP_NPASSES; i++)
			if (strlen(passes[i].name) == l && !strncmp(passes[i].name, s, l))
				p = i;
		if (l == 7 && !strncmp(s, "default", 7)) {
			for (int i = 0; i < PREP_NPASSES; i++)
				if (add_pass(o, i) < 0)
					return -1;
		} else if (p < 0) {
			StrBuf sb = {0};
			for (int i = 0; i < PREP_NPASSES; i++)
				sb_printf(&sb, "%s, ", passes[i].name);
			int r = error("preprocess: unknown pass '%.*s': expected default or a list of %sseparated by commas",
				      (int)l, s, sb.buf);
			sb_release(&sb);
			return r;
		} else if (add_pass(o, p) < 0) {
			return -1;
		}
		s = e;
	}
	if (!o->npasses)
		return error("preprocess: no pass given: expected default or a list of passes");
	return 0;
}

/* drop value_info of names no node or initializer of g defines any more */
static int clean_value_info(PrepCtx *c, Onnx__GraphProto *g)
{
	NameSet def = {0};
	for (size_t i = 0; i < g->n_node; i++)
		for (size_t k = 0; k < g->node[i]->n_output; k++)
			nameset_add(&def, g->node[i]->output[k]);
	for (size_t i = 0; i < g->n_initializer; i++)
		if (g->initializer[i]->name)
			nameset_add(&def, g->initializer[i]->name);
	for (size_t i = 0; i < g->n_input; i++)
		if (g->input[i]->name)
			nameset_add(&def, g->input[i]->name);
	size_t j = 0;
	for (size_t i = 0; i < g->n_value_info; i++) {
		const char *nm = g->value_info[i]->name;
		if (nm && nameset_has(&def, nm))
			g->value_info[j++] = g->value_info[i];
		else
			onnx__value_info_proto__free_unpacked(g->value_info[i], NULL);
	}
	g->n_value_info = j;
	nameset_free(&def);
	return pg_each_subgraph(c, g, clean_value_info);
}

/* nodes of g and of every subgraph (If branches, Loop and Scan bodies) */
static size_t count_nodes(const Onnx__GraphProto *g)
{
	size_t n = g->n_node;
	for (size_t i = 0; i < g->n_node; i++)
		for (size_t k = 0; k < g->node[i]->n_attribute; k++) {
			const Onnx__AttributeProto *a = g->node[i]->attribute[k];
			if (a->g)
				n += count_nodes(a->g);
			for (size_t j = 0; j < a->n_graphs; j++)
				n += count_nodes(a->graphs[j]);
		}
	return n;
}

int prep_run(Model *m, const PrepOpts *o, PrepReport *r)
{
	Onnx__GraphProto *g = m->proto->graph;
	memset(r, 0, sizeof *r);
	if (!g)
		return error("preprocess: the model has no graph");
	r->nodes_before = count_nodes(g);
	r->inits_before = g->n_initializer;
	r->opset_from = r->opset_to = model_opset(m->proto, "");
	if (o->opset && prep_opset(m, o->opset, &r->opset_changed) < 0)
		return -1;
	r->opset_to = model_opset(m->proto, "");
	PrepCtx c = {.m = m, .o = o};
	int rc = 0;
	for (size_t round = 0; round < PREP_MAX_ROUNDS && rc == 0; round++) {
		/* skipped: what the last round left alone */
		size_t before = 0;
		for (int p = 0; p < PREP_NPASSES; p++) {
			before += r->stat[p].changed;
			r->stat[p].skipped = 0;
		}
		for (size_t i = 0; i < o->npasses && rc == 0; i++) {
			c.stat = &r->stat[o->passes[i]];
			rc = passes[o->passes[i]].fn(&c, g);
			if (rc < 0)
				error_prefix("preprocess: %s", passes[o->passes[i]].name);
		}
		r->rounds = round + 1;
		size_t after = 0;
		for (int p = 0; p < PREP_NPASSES; p++)
			after += r->stat[p].changed;
		if (after == before)
			break;
	}
	pv_free(&c.tried);
	pv_free(&c.scopes);
	prep_dedup_free(&c);
	if (rc == 0)
		rc = clean_value_info(&c, g);
	strmap_free_keys(&c.names);
	strmap_free_keys(&c.noted);
	r->nodes_after = count_nodes(g);
	r->inits_after = g->n_initializer;
	return rc;
}
