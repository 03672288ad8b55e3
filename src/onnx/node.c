/* node.c — node attributes (see node.h). */
#include "onnx/node.h"

#include <stdio.h>
#include <string.h>

#include "onnx/pbdepth.h"
#include "util.h"

const char *node_label(const Onnx__NodeProto *n, char *buf, size_t size)
{
	if (n->name && *n->name)
		snprintf(buf, size, "%s", n->name);
	else
		snprintf(buf, size, "%s(%s)", n->op_type ? n->op_type : "?",
			 n->n_output && n->output[0] ? n->output[0] : "");
	return buf;
}

const Onnx__AttributeProto *node_attr(const Onnx__NodeProto *n, const char *name)
{
	for (size_t i = 0; i < n->n_attribute; i++)
		if (n->attribute[i]->name && !strcmp(n->attribute[i]->name, name))
			return n->attribute[i];
	return NULL;
}

static const char *type_name(int t)
{
	static const char *names[] = {"undefined", "float", "int", "string", "tensor", "graph",
				      "floats", "ints", "strings", "tensors", "graphs",
				      "sparse_tensor", "sparse_tensors", "type_proto", "type_protos"};
	return t >= 0 && t < (int)ARRAY_LEN(names) ? names[t] : "?";
}

static int want(const Onnx__NodeProto *n, const Onnx__AttributeProto *a, int type)
{
	int have = a->has_type ? (int)a->type : 0;
	if (have == type)
		return 0;
	char lb[256];
	return error("node '%s': attribute '%s' has type %s, expected %s",
		     node_label(n, lb, sizeof lb), a->name, type_name(have), type_name(type));
}

int attr_int(const Onnx__NodeProto *n, const char *name, int64_t dflt, int64_t *out)
{
	const Onnx__AttributeProto *a = node_attr(n, name);
	*out = dflt;
	if (!a)
		return 0;
	if (want(n, a, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT) < 0)
		return -1;
	*out = a->i;
	return 0;
}

int attr_float(const Onnx__NodeProto *n, const char *name, float dflt, float *out)
{
	const Onnx__AttributeProto *a = node_attr(n, name);
	*out = dflt;
	if (!a)
		return 0;
	if (want(n, a, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT) < 0)
		return -1;
	*out = a->f;
	return 0;
}

int attr_str(const Onnx__NodeProto *n, const char *name, const char *dflt, char *buf, size_t size)
{
	const Onnx__AttributeProto *a = node_attr(n, name);
	if (!a) {
		snprintf(buf, size, "%s", dflt ? dflt : "");
		return 0;
	}
	if (want(n, a, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING) < 0)
		return -1;
	if (a->s.len >= size) {
		char lb[256];
		return error("node '%s': attribute '%s' is too long (%zu bytes)",
			     node_label(n, lb, sizeof lb), name, a->s.len);
	}
	if (a->s.len)
		memcpy(buf, a->s.data, a->s.len);
	buf[a->s.len] = 0;
	return 0;
}

int attr_ints(const Onnx__NodeProto *n, const char *name, const int64_t **v, size_t *len)
{
	const Onnx__AttributeProto *a = node_attr(n, name);
	*v = NULL;
	*len = 0;
	if (!a)
		return 0;
	if (want(n, a, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS) < 0)
		return -1;
	*v = a->ints;
	*len = a->n_ints;
	return 0;
}

int attr_floats(const Onnx__NodeProto *n, const char *name, const float **v, size_t *len)
{
	const Onnx__AttributeProto *a = node_attr(n, name);
	*v = NULL;
	*len = 0;
	if (!a)
		return 0;
	if (want(n, a, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS) < 0)
		return -1;
	*v = a->floats;
	*len = a->n_floats;
	return 0;
}

int attr_tensor(const Onnx__NodeProto *n, const char *name, const Onnx__TensorProto **t)
{
	const Onnx__AttributeProto *a = node_attr(n, name);
	*t = NULL;
	if (!a)
		return 0;
	if (want(n, a, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR) < 0)
		return -1;
	*t = a->t;
	return 0;
}

int attr_graph(const Onnx__NodeProto *n, const char *name, const Onnx__GraphProto **g)
{
	const Onnx__AttributeProto *a = node_attr(n, name);
	*g = NULL;
	if (!a)
		return 0;
	if (want(n, a, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH) < 0)
		return -1;
	*g = a->g;
	return 0;
}

const char *node_input(const Onnx__NodeProto *n, size_t i)
{
	if (i >= n->n_input || !n->input[i] || !n->input[i][0])
		return NULL;
	return n->input[i];
}

int function_attr_defaults(const Onnx__FunctionProto *f, PtrVec *out)
{
	for (unsigned i = 0; i < f->base.n_unknown_fields; i++) {
		const ProtobufCMessageUnknownField *u = &f->base.unknown_fields[i];
		if (u->tag != 11 || u->wire_type != PROTOBUF_C_WIRE_TYPE_LENGTH_PREFIXED)
			continue;
		/* the payload may still carry its varint length prefix */
		uint64_t len = 0;
		size_t k = 0;
		for (int shift = 0; k < u->len && shift < 64; shift += 7) {
			len |= (uint64_t)(u->data[k] & 0x7f) << shift;
			if (!(u->data[k++] & 0x80))
				break;
		}
		const uint8_t *p = u->data;
		size_t n = u->len;
		if (k + len == u->len) {
			p += k;
			n = (size_t)len;
		}
		int deep = pb_depth_check(&onnx__attribute_proto__descriptor, p, n);
		if (deep < 0)
			return error_prefix("function '%s': attribute default", f->name ? f->name : "");
		Onnx__AttributeProto *a = deep ? NULL : onnx__attribute_proto__unpack(NULL, n, p);
		if (!a)
			return error("function '%s': unreadable attribute default", f->name ? f->name : "");
		pv_push(out, a);
	}
	return 0;
}

int domain_eq(const char *a, const char *b)
{
	if (!a || !strcmp(a, "ai.onnx"))
		a = "";
	if (!b || !strcmp(b, "ai.onnx"))
		b = "";
	return !strcmp(a, b);
}

const Onnx__FunctionProto *model_function(const Onnx__ModelProto *m, const char *domain, const char *name)
{
	for (size_t i = 0; name && i < m->n_functions; i++) {
		const Onnx__FunctionProto *f = m->functions[i];
		if (f->name && !strcmp(f->name, name) && domain_eq(f->domain, domain))
			return f;
	}
	return NULL;
}

int64_t function_opset(const Onnx__ModelProto *m, const Onnx__FunctionProto *f, const char *domain)
{
	for (size_t i = 0; f && i < f->n_opset_import; i++)
		if (domain_eq(f->opset_import[i]->domain, domain))
			return f->opset_import[i]->version;
	return model_opset(m, domain);
}

Onnx__AttributeProto *node_attr_add(Onnx__NodeProto *n, const char *name, int type)
{
	Onnx__AttributeProto *at = xmalloc(sizeof *at);
	onnx__attribute_proto__init(at);
	at->name = xstrdup(name);
	at->has_type = 1;
	at->type = type;
	n->attribute = xreallocarray(n->attribute, n->n_attribute + 1, sizeof *n->attribute);
	n->attribute[n->n_attribute++] = at;
	return at;
}
