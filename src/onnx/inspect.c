/* inspect.c — `quantmake inspect MODEL [--json]`: what a model holds.
 *
 * Reports the IR version, opset imports, producer, graph inputs and outputs
 * with their types (symbolic dims by name, unknown ones as ?), an operator
 * histogram over the main graph and every subgraph (If/Loop/Scan bodies),
 * parameters (initializers and Constant node values, by element type), the
 * node outputs that no value_info types (what shape inference left out), and
 * the external data files the model references. Only the model file is read:
 * external data is located and measured, never loaded. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <jansson.h>

#include "commands.h"
#include "onnx/extdata.h"
#include "onnx/model.h"
#include "strmap.h"
#include "util.h"

/* how many untyped intermediate names the text output shows */
#define SHOW_UNTYPED 5

/* add a name (borrowed) to a set; NULL and "" are no names */
static void set_add(StrMap *s, const char *k)
{
	if (k && *k)
		strmap_add(s, k, NULL);
}

/* ---- the summary ---- */

typedef struct OpCount {
	char *key;          /* "Conv", or "domain:Op" outside the default domain */
	size_t n;
} OpCount;

typedef struct DtStat {
	size_t tensors;
	int64_t elems;
	uint64_t bytes;
} DtStat;

typedef struct ExtRef {
	char *location;
	size_t tensors;
	uint64_t bytes;
	uint64_t end;           /* the file size the references need */
} ExtRef;

typedef struct Summary {
	OpCount *ops;
	size_t nops;
	size_t nodes, subnodes, subgraphs;
	DtStat dt[DT_MAX + 1];  /* index DT_MAX collects unknown types */
	size_t ntensors;
	int64_t elems;
	uint64_t bytes;
	size_t intermediates;
	PtrVec untyped;         /* borrowed names */
	ExtRef *ext;
	size_t next;
	size_t bad_ext;         /* tensors whose external_data is malformed */
} Summary;

static int opcount_cmp(const void *a, const void *b)
{
	return strcmp(((const OpCount *)a)->key, ((const OpCount *)b)->key);
}

static void count_op(Summary *s, const Onnx__NodeProto *n)
{
	const char *op = n->op_type ? n->op_type : "?";
	const char *d = n->domain;
	char *key = d && *d && strcmp(d, "ai.onnx") ? xasprintf("%s:%s", d, op) : xstrdup(op);
	for (size_t i = 0; i < s->nops; i++)
		if (!strcmp(s->ops[i].key, key)) {
			s->ops[i].n++;
			free(key);
			return;
		}
	s->ops = xreallocarray(s->ops, s->nops + 1, sizeof *s->ops);
	s->ops[s->nops].key = key;
	s->ops[s->nops++].n = 1;
}

static void add_elems(Summary *s, int dt, int64_t elems, uint64_t bytes)
{
	DtStat *d = &s->dt[dt > 0 && dt < DT_MAX ? dt : DT_MAX];
	d->tensors++;
	d->elems += elems;
	d->bytes += bytes;
	s->ntensors++;
	s->elems += elems;
	s->bytes += bytes;
}

static void add_ext(Summary *s, const Onnx__TensorProto *t, uint64_t bytes)
{
	ExtInfo info;
	if (ext_info(t, &info) < 0) {
		s->bad_ext++;
		return;
	}
	if (info.length >= 0)
		bytes = (uint64_t)info.length;
	uint64_t end = (uint64_t)info.offset + bytes;
	for (size_t i = 0; i < s->next; i++)
		if (!strcmp(s->ext[i].location, info.location)) {
			s->ext[i].tensors++;
			s->ext[i].bytes += bytes;
			if (end > s->ext[i].end)
				s->ext[i].end = end;
			return;
		}
	s->ext = xreallocarray(s->ext, s->next + 1, sizeof *s->ext);
	s->ext[s->next++] = (ExtRef){xstrdup(info.location), 1, bytes, end};
}

static void add_tensor(Summary *s, const Onnx__TensorProto *t)
{
	if (!t)
		return;
	int dt = t->has_data_type ? t->data_type : 0;
	int64_t n = tensor_proto_numel(t);
	if (n < 0)
		n = 0;
	uint64_t bytes = 0;
	if (dt == DT_STRING)
		for (size_t i = 0; i < t->n_string_data; i++)
			bytes += t->string_data[i].len;
	else
		bytes = dtype_nbytes(dt, n);
	add_elems(s, dt, n, bytes);
	if (t->has_data_location && t->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL)
		add_ext(s, t, bytes);
}

/* Constant's value_* attributes other than the tensor ones */
static void add_constant(Summary *s, const Onnx__NodeProto *n)
{
	for (size_t i = 0; i < n->n_attribute; i++) {
		const Onnx__AttributeProto *a = n->attribute[i];
		const char *an = a->name ? a->name : "";
		if (!strcmp(an, "value_float"))
			add_elems(s, DT_FLOAT, 1, 4);
		else if (!strcmp(an, "value_floats"))
			add_elems(s, DT_FLOAT, (int64_t)a->n_floats, 4 * a->n_floats);
		else if (!strcmp(an, "value_int"))
			add_elems(s, DT_INT64, 1, 8);
		else if (!strcmp(an, "value_ints"))
			add_elems(s, DT_INT64, (int64_t)a->n_ints, 8 * a->n_ints);
		else if (!strcmp(an, "value_string"))
			add_elems(s, DT_STRING, 1, a->s.len);
		else if (!strcmp(an, "value_strings")) {
			uint64_t b = 0;
			for (size_t k = 0; k < a->n_strings; k++)
				b += a->strings[k].len;
			add_elems(s, DT_STRING, (int64_t)a->n_strings, b);
		} else if (!strcmp(an, "value"))
			add_tensor(s, a->t);
		else if (!strcmp(an, "sparse_value") && a->sparse_tensor)
			add_tensor(s, a->sparse_tensor->values);
	}
}

static int is_default_domain(const char *d)
{
	return !d || !*d || !strcmp(d, "ai.onnx");
}

static void walk_graph(Summary *s, const Onnx__GraphProto *g, int depth)
{
	if (depth > 0)
		s->subgraphs++;
	for (size_t i = 0; i < g->n_initializer; i++)
		add_tensor(s, g->initializer[i]);
	for (size_t i = 0; i < g->n_sparse_initializer; i++)
		add_tensor(s, g->sparse_initializer[i]->values);
	StrMap outs = {0}, typed = {0};
	for (size_t i = 0; i < g->n_output; i++)
		set_add(&outs, g->output[i]->name);
	for (size_t i = 0; i < g->n_value_info; i++)
		if (g->value_info[i]->type)
			set_add(&typed, g->value_info[i]->name);
	for (size_t i = 0; i < g->n_node; i++) {
		const Onnx__NodeProto *n = g->node[i];
		s->nodes++;
		if (depth > 0)
			s->subnodes++;
		count_op(s, n);
		if (n->op_type && !strcmp(n->op_type, "Constant") && is_default_domain(n->domain))
			add_constant(s, n);
		for (size_t j = 0; j < n->n_output; j++) {
			const char *o = n->output[j];
			if (!o || !*o || strmap_find(&outs, o))
				continue;
			s->intermediates++;
			if (!strmap_find(&typed, o))
				pv_push(&s->untyped, (void *)o);
		}
		for (size_t j = 0; j < n->n_attribute; j++) {
			const Onnx__AttributeProto *a = n->attribute[j];
			if (a->g)
				walk_graph(s, a->g, depth + 1);
			for (size_t k = 0; k < a->n_graphs; k++)
				walk_graph(s, a->graphs[k], depth + 1);
		}
	}
	strmap_free(&outs);
	strmap_free(&typed);
}

static void summary_free(Summary *s)
{
	for (size_t i = 0; i < s->nops; i++)
		free(s->ops[i].key);
	free(s->ops);
	for (size_t i = 0; i < s->next; i++)
		free(s->ext[i].location);
	free(s->ext);
	pv_free(&s->untyped);
}

/* ---- types ---- */

/* a JSON string; bytes that are not UTF-8 become '?' so output stays valid */
static json_t *jstr(const char *s)
{
	json_t *j = json_string(s ? s : "");
	if (j)
		return j;
	char *c = xstrdup(s);
	for (unsigned char *q = (unsigned char *)c; *q; q++)
		if (*q >= 0x80)
			*q = '?';
	j = json_string(c);
	free(c);
	return j;
}

static void shape_text(StrBuf *sb, const Onnx__TensorShapeProto *sh)
{
	if (!sh) {
		sb_puts(sb, "[*]");
		return;
	}
	sb_putc(sb, '[');
	for (size_t i = 0; i < sh->n_dim; i++) {
		const Onnx__TensorShapeProto__Dimension *d = sh->dim[i];
		if (i)
			sb_putc(sb, ',');
		if (d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE)
			sb_printf(sb, "%lld", (long long)d->dim_value);
		else if (d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM &&
			 d->dim_param && *d->dim_param)
			sb_puts(sb, d->dim_param);
		else
			sb_putc(sb, '?');
	}
	sb_putc(sb, ']');
}

static void type_text(StrBuf *sb, const Onnx__TypeProto *tp)
{
	if (!tp) {
		sb_puts(sb, "(no type)");
		return;
	}
	switch (tp->value_case) {
	case ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE:
		sb_puts(sb, tp->tensor_type->has_elem_type ? dtype_name(tp->tensor_type->elem_type) : "?");
		shape_text(sb, tp->tensor_type->shape);
		break;
	case ONNX__TYPE_PROTO__VALUE_SPARSE_TENSOR_TYPE:
		sb_puts(sb, "sparse ");
		sb_puts(sb, tp->sparse_tensor_type->has_elem_type
				    ? dtype_name(tp->sparse_tensor_type->elem_type) : "?");
		shape_text(sb, tp->sparse_tensor_type->shape);
		break;
	case ONNX__TYPE_PROTO__VALUE_SEQUENCE_TYPE:
		sb_puts(sb, "seq(");
		type_text(sb, tp->sequence_type->elem_type);
		sb_putc(sb, ')');
		break;
	case ONNX__TYPE_PROTO__VALUE_OPTIONAL_TYPE:
		sb_puts(sb, "optional(");
		type_text(sb, tp->optional_type->elem_type);
		sb_putc(sb, ')');
		break;
	case ONNX__TYPE_PROTO__VALUE_MAP_TYPE:
		sb_printf(sb, "map(%s,", tp->map_type->has_key_type ? dtype_name(tp->map_type->key_type) : "?");
		type_text(sb, tp->map_type->value_type);
		sb_putc(sb, ')');
		break;
	default:
		sb_puts(sb, "(unknown type)");
		break;
	}
}

static json_t *shape_json(const Onnx__TensorShapeProto *sh)
{
	if (!sh)
		return json_null();
	json_t *a = json_array();
	for (size_t i = 0; i < sh->n_dim; i++) {
		const Onnx__TensorShapeProto__Dimension *d = sh->dim[i];
		if (d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE)
			json_array_append_new(a, json_integer(d->dim_value));
		else if (d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM &&
			 d->dim_param && *d->dim_param)
			json_array_append_new(a, jstr(d->dim_param));
		else
			json_array_append_new(a, json_null());
	}
	return a;
}

static json_t *value_json(const Onnx__ValueInfoProto *v)
{
	json_t *o = json_object();
	StrBuf sb = {0};
	type_text(&sb, v->type);
	json_object_set_new(o, "name", jstr(v->name ? v->name : ""));
	json_object_set_new(o, "type", jstr(sb.buf));
	const Onnx__TypeProto *tp = v->type;
	if (tp && tp->value_case == ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE) {
		json_object_set_new(o, "elem_type", jstr(tp->tensor_type->has_elem_type
			? dtype_name(tp->tensor_type->elem_type) : "?"));
		json_object_set_new(o, "shape", shape_json(tp->tensor_type->shape));
	}
	sb_release(&sb);
	return o;
}

/* ---- output ---- */

static const char *human(uint64_t b, char *buf, size_t n)
{
	static const char *unit[] = {"KiB", "MiB", "GiB", "TiB"};
	if (b < 1024) {
		buf[0] = 0;
		return buf;
	}
	double v = (double)b;
	int u = -1;
	while (v >= 1024 && u < 3) {
		v /= 1024;
		u++;
	}
	snprintf(buf, n, " (%.1f %s)", v, unit[u]);
	return buf;
}

static const char *opset_domain(const char *d)
{
	return d && *d ? d : "ai.onnx";
}

static int by_count(const void *a, const void *b)
{
	const OpCount *x = a, *y = b;
	if (x->n != y->n)
		return x->n > y->n ? -1 : 1;
	return strcmp(x->key, y->key);
}

/* size of DIR/LOC, or -1 when it cannot be read (as loading would not:
 * a symbolic link out of the model's directory) */
static int64_t ext_size(const Model *m, const char *loc)
{
	if (ext_location_check(loc) < 0)
		return -1;
	char *p = path_join(m->dir, loc);
	struct stat st;
	int r = stat(p, &st);
	if (r == 0 && !path_resolves_inside(m->dir, p))
		r = -1;
	free(p);
	return r == 0 && S_ISREG(st.st_mode) ? (int64_t)st.st_size : -1;
}

static const char *dt_label(int i)
{
	return i == DT_MAX ? "unknown" : dtype_name(i);
}

static void print_text(const char *path, const Model *m, Summary *s)
{
	const Onnx__ModelProto *p = m->proto;
	const Onnx__GraphProto *g = p->graph;
	char hb[32];
	printf("model: %s\n", path);
	printf("ir_version: %lld\n", (long long)p->ir_version);
	printf("producer: %s%s%s\n", p->producer_name && *p->producer_name ? p->producer_name : "(none)",
	       p->producer_version && *p->producer_version ? " " : "",
	       p->producer_version ? p->producer_version : "");
	if (p->n_metadata_props) {
		printf("metadata: %zu\n", p->n_metadata_props);
		for (size_t i = 0; i < p->n_metadata_props; i++)
			printf("  %s: %s\n", p->metadata_props[i]->key ? p->metadata_props[i]->key : "",
			       p->metadata_props[i]->value ? p->metadata_props[i]->value : "");
	}
	printf("opset:");
	for (size_t i = 0; i < p->n_opset_import; i++)
		printf("%s %s %lld", i ? "," : "", opset_domain(p->opset_import[i]->domain),
		       (long long)p->opset_import[i]->version);
	printf("%s\n", p->n_opset_import ? "" : " (none)");
	if (g->name && *g->name)
		printf("graph: %s\n", g->name);
	StrMap inits = {0};
	for (size_t i = 0; i < g->n_initializer; i++)
		set_add(&inits, g->initializer[i]->name);
	StrBuf sb = {0};
	size_t nin = 0;
	for (size_t i = 0; i < g->n_input; i++)
		nin += !strmap_find(&inits, g->input[i]->name ? g->input[i]->name : "");
	printf("inputs: %zu\n", nin);
	for (size_t i = 0; i < g->n_input; i++) {
		if (strmap_find(&inits, g->input[i]->name ? g->input[i]->name : ""))
			continue;
		sb_reset(&sb);
		type_text(&sb, g->input[i]->type);
		printf("  %s: %s\n", g->input[i]->name ? g->input[i]->name : "", sb.buf);
	}
	printf("outputs: %zu\n", g->n_output);
	for (size_t i = 0; i < g->n_output; i++) {
		sb_reset(&sb);
		type_text(&sb, g->output[i]->type);
		printf("  %s: %s\n", g->output[i]->name ? g->output[i]->name : "", sb.buf);
	}
	sb_release(&sb);
	strmap_free(&inits);
	printf("nodes: %zu", s->nodes);
	if (s->subgraphs)
		printf(" (%zu in %zu subgraph%s)", s->subnodes, s->subgraphs, s->subgraphs == 1 ? "" : "s");
	printf("\noperators: %zu\n", s->nops);
	OpCount *ops = xreallocarray(NULL, s->nops, sizeof *ops);
	if (s->nops)
		memcpy(ops, s->ops, s->nops * sizeof *ops);
	qsort(ops, s->nops, sizeof *ops, by_count);
	for (size_t i = 0; i < s->nops; i++)
		printf("  %s: %zu\n", ops[i].key, ops[i].n);
	free(ops);
	printf("parameters: %lld elements, %llu bytes%s, %zu tensors\n", (long long)s->elems,
	       (unsigned long long)s->bytes, human(s->bytes, hb, sizeof hb), s->ntensors);
	for (int i = 0; i <= DT_MAX; i++)
		if (s->dt[i].tensors)
			printf("  %s: %lld elements, %llu bytes%s, %zu tensors\n", dt_label(i),
			       (long long)s->dt[i].elems, (unsigned long long)s->dt[i].bytes,
			       human(s->dt[i].bytes, hb, sizeof hb), s->dt[i].tensors);
	printf("intermediates: %zu, %zu without value_info", s->intermediates, s->untyped.n);
	for (size_t i = 0; i < s->untyped.n && i < SHOW_UNTYPED; i++)
		printf("%s%s", i ? ", " : " (", (const char *)s->untyped.v[i]);
	if (s->untyped.n)
		printf("%s)", s->untyped.n > SHOW_UNTYPED ? ", ..." : "");
	printf("\n");
	if (p->n_functions) {
		printf("functions: %zu\n", p->n_functions);
		for (size_t i = 0; i < p->n_functions; i++)
			printf("  %s%s%s: %zu nodes\n",
			       p->functions[i]->domain ? p->functions[i]->domain : "",
			       p->functions[i]->domain && *p->functions[i]->domain ? ":" : "",
			       p->functions[i]->name ? p->functions[i]->name : "", p->functions[i]->n_node);
	}
	if (s->next || s->bad_ext) {
		printf("external data: %zu file%s\n", s->next, s->next == 1 ? "" : "s");
		for (size_t i = 0; i < s->next; i++) {
			int64_t sz = ext_size(m, s->ext[i].location);
			if (sz < 0)
				printf("  %s: missing, %zu tensors\n", s->ext[i].location, s->ext[i].tensors);
			else
				printf("  %s: %lld bytes%s, %zu tensors%s\n", s->ext[i].location, (long long)sz,
				       human((uint64_t)sz, hb, sizeof hb), s->ext[i].tensors,
				       (uint64_t)sz < s->ext[i].end ? ", too short for them" : "");
		}
		if (s->bad_ext)
			printf("  %zu tensors with malformed external_data\n", s->bad_ext);
	}
}

static json_t *summary_json(const char *path, const Model *m, Summary *s)
{
	const Onnx__ModelProto *p = m->proto;
	const Onnx__GraphProto *g = p->graph;
	json_t *o = json_object();
	json_object_set_new(o, "path", jstr(path));
	json_object_set_new(o, "ir_version", json_integer(p->ir_version));
	json_object_set_new(o, "producer_name", jstr(p->producer_name ? p->producer_name : ""));
	json_object_set_new(o, "producer_version",
			    jstr(p->producer_version ? p->producer_version : ""));
	json_t *meta = json_object();
	for (size_t i = 0; i < p->n_metadata_props; i++)
		if (p->metadata_props[i]->key)
			json_object_set_new(meta, p->metadata_props[i]->key,
					    jstr(p->metadata_props[i]->value ? p->metadata_props[i]->value : ""));
	json_object_set_new(o, "metadata", meta);
	json_t *ops = json_array();
	for (size_t i = 0; i < p->n_opset_import; i++) {
		json_t *e = json_object();
		json_object_set_new(e, "domain", jstr(opset_domain(p->opset_import[i]->domain)));
		json_object_set_new(e, "version", json_integer(p->opset_import[i]->version));
		json_array_append_new(ops, e);
	}
	json_object_set_new(o, "opset_import", ops);
	json_object_set_new(o, "graph", jstr(g->name ? g->name : ""));
	StrMap inits = {0};
	for (size_t i = 0; i < g->n_initializer; i++)
		set_add(&inits, g->initializer[i]->name);
	json_t *in = json_array(), *out = json_array();
	for (size_t i = 0; i < g->n_input; i++)
		if (!strmap_find(&inits, g->input[i]->name ? g->input[i]->name : ""))
			json_array_append_new(in, value_json(g->input[i]));
	for (size_t i = 0; i < g->n_output; i++)
		json_array_append_new(out, value_json(g->output[i]));
	strmap_free(&inits);
	json_object_set_new(o, "inputs", in);
	json_object_set_new(o, "outputs", out);
	json_object_set_new(o, "nodes", json_integer((json_int_t)s->nodes));
	json_object_set_new(o, "subgraph_nodes", json_integer((json_int_t)s->subnodes));
	json_object_set_new(o, "subgraphs", json_integer((json_int_t)s->subgraphs));
	qsort(s->ops, s->nops, sizeof *s->ops, opcount_cmp);
	json_t *hist = json_object();
	for (size_t i = 0; i < s->nops; i++)
		json_object_set_new(hist, s->ops[i].key, json_integer((json_int_t)s->ops[i].n));
	json_object_set_new(o, "op_types", hist);
	json_t *par = json_object(), *byt = json_object();
	json_object_set_new(par, "elements", json_integer(s->elems));
	json_object_set_new(par, "bytes", json_integer((json_int_t)s->bytes));
	json_object_set_new(par, "tensors", json_integer((json_int_t)s->ntensors));
	for (int i = 0; i <= DT_MAX; i++) {
		if (!s->dt[i].tensors)
			continue;
		json_t *d = json_object();
		json_object_set_new(d, "elements", json_integer(s->dt[i].elems));
		json_object_set_new(d, "bytes", json_integer((json_int_t)s->dt[i].bytes));
		json_object_set_new(d, "tensors", json_integer((json_int_t)s->dt[i].tensors));
		json_object_set_new(byt, dt_label(i), d);
	}
	json_object_set_new(par, "by_type", byt);
	json_object_set_new(o, "parameters", par);
	json_t *im = json_object(), *names = json_array();
	json_object_set_new(im, "count", json_integer((json_int_t)s->intermediates));
	json_object_set_new(im, "without_value_info", json_integer((json_int_t)s->untyped.n));
	for (size_t i = 0; i < s->untyped.n; i++)
		json_array_append_new(names, jstr((const char *)s->untyped.v[i]));
	json_object_set_new(im, "untyped", names);
	json_object_set_new(o, "intermediates", im);
	json_t *fn = json_array();
	for (size_t i = 0; i < p->n_functions; i++) {
		json_t *e = json_object();
		json_object_set_new(e, "domain", jstr(p->functions[i]->domain ? p->functions[i]->domain : ""));
		json_object_set_new(e, "name", jstr(p->functions[i]->name ? p->functions[i]->name : ""));
		json_object_set_new(e, "nodes", json_integer((json_int_t)p->functions[i]->n_node));
		json_array_append_new(fn, e);
	}
	json_object_set_new(o, "functions", fn);
	json_t *ext = json_array();
	for (size_t i = 0; i < s->next; i++) {
		json_t *e = json_object();
		int64_t sz = ext_size(m, s->ext[i].location);
		json_object_set_new(e, "location", jstr(s->ext[i].location));
		json_object_set_new(e, "size", sz < 0 ? json_null() : json_integer(sz));
		json_object_set_new(e, "tensors", json_integer((json_int_t)s->ext[i].tensors));
		json_object_set_new(e, "bytes", json_integer((json_int_t)s->ext[i].bytes));
		json_object_set_new(e, "needed", json_integer((json_int_t)s->ext[i].end));
		json_array_append_new(ext, e);
	}
	json_object_set_new(o, "external_data", ext);
	return o;
}

static const char inspect_usage[] =
	"usage: quantmake inspect MODEL [--json]\n"
	"Summarize an ONNX model: IR version, opsets, producer, inputs and outputs\n"
	"(symbolic dims by name, unknown ones as ?), operators over all subgraphs,\n"
	"parameters by element type, node outputs without value_info, external data.\n"
	"  --json   the same facts as JSON, keys in a fixed order\n";

int cmd_inspect(int argc, char **argv)
{
	const char *path = NULL;
	int as_json = 0;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--json"))
			as_json = 1;
		else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			fputs(inspect_usage, stdout);
			return 0;
		} else if (argv[i][0] == '-' && argv[i][1]) {
			fprintf(stderr, "%s: inspect: unknown option '%s'\n%s", argv0, argv[i], inspect_usage);
			return 2;
		} else if (!path)
			path = argv[i];
		else {
			fprintf(stderr, "%s: inspect: unexpected argument '%s'\n%s", argv0, argv[i], inspect_usage);
			return 2;
		}
	}
	if (!path) {
		fputs(inspect_usage, stderr);
		return 2;
	}
	Model *m;
	if (model_load(path, &m) < 0) {
		fprintf(stderr, "%s: %s\n", argv0, errmsg());
		return 2;
	}
	Summary s = {0};
	walk_graph(&s, m->proto->graph, 0);
	int r = 0;
	if (as_json) {
		json_t *o = summary_json(path, m, &s);
		char *txt = json_dumps(o, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
		json_decref(o);
		if (!txt) {
			fprintf(stderr, "%s: inspect: cannot format JSON for %s\n", argv0, path);
			r = 1;
		} else {
			printf("%s\n", txt);
			free(txt);
		}
	} else
		print_text(path, m, &s);
	if (fflush(stdout) != 0) {
		fprintf(stderr, "%s: inspect: cannot write output\n", argv0);
		r = 1;
	}
	summary_free(&s);
	model_free(m);
	return r;
}
