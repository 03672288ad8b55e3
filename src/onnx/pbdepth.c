/* pbdepth.c — nesting limits checked on the wire format (see pbdepth.h).
 *
 * One pass over the bytes with an explicit stack of the messages being
 * read: a length-delimited field whose descriptor says MESSAGE opens a
 * frame that ends where its bytes end; every other field (scalars, bytes,
 * strings, packed arrays, unknown fields, which protobuf-c keeps as bytes
 * and never parses) is skipped by its wire type. Groups are refused, as
 * protobuf-c refuses them. */
#include "onnx/pbdepth.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

typedef struct Frame {
	const ProtobufCMessageDescriptor *d;
	size_t end;
	int graphs, types, values;
} Frame;

/* reads a varint at *pos below end; 0, or -1 when cut short or too long */
static int varint(const uint8_t *b, size_t *pos, size_t end, uint64_t *out)
{
	uint64_t v = 0;
	for (int shift = 0; shift < 70; shift += 7) {
		if (*pos >= end)
			return -1;
		uint8_t c = b[(*pos)++];
		v |= (uint64_t)(c & 0x7f) << (shift < 64 ? shift : 63);
		if (!(c & 0x80)) {
			*out = v;
			return 0;
		}
	}
	return -1;
}

static const ProtobufCFieldDescriptor *field_of(const ProtobufCMessageDescriptor *d, uint64_t id)
{
	for (unsigned i = 0; i < d->n_fields; i++)
		if (d->fields[i].id == id)
			return &d->fields[i];
	return NULL;
}

static int is(const ProtobufCMessageDescriptor *d, const char *short_name)
{
	return d->short_name && !strcmp(d->short_name, short_name);
}

int pb_depth_check(const ProtobufCMessageDescriptor *d, const void *buf, size_t len)
{
	const uint8_t *b = buf;
	Frame *st = xmalloc((PB_MAX_DEPTH + 1) * sizeof *st);
	int n = 1, r = 0;
	st[0] = (Frame){d, len, is(d, "GraphProto"), is(d, "TypeProto"), 0};
	st[0].values = is(d, "SequenceProto") || is(d, "OptionalProto") || is(d, "MapProto");
	size_t pos = 0;
	for (;;) {
		Frame *f = &st[n - 1];
		if (pos == f->end) {
			if (n == 1)
				break;
			n--;
			continue;
		}
		uint64_t tag, v;
		if (varint(b, &pos, f->end, &tag) < 0 || tag >> 3 == 0) {
			r = 1;
			break;
		}
		int wt = (int)(tag & 7);
		if (wt == 0) {
			if (varint(b, &pos, f->end, &v) < 0) {
				r = 1;
				break;
			}
		} else if (wt == 1 || wt == 5) {
			size_t w = wt == 1 ? 8 : 4;
			if (f->end - pos < w) {
				r = 1;
				break;
			}
			pos += w;
		} else if (wt == 2) {
			if (varint(b, &pos, f->end, &v) < 0 || v > f->end - pos) {
				r = 1;
				break;
			}
			const ProtobufCFieldDescriptor *fd = field_of(f->d, tag >> 3);
			if (!fd || fd->type != PROTOBUF_C_TYPE_MESSAGE) {
				pos += (size_t)v;
				continue;
			}
			const ProtobufCMessageDescriptor *sd = fd->descriptor;
			Frame s = {sd, pos + (size_t)v, f->graphs + is(sd, "GraphProto"),
				   f->types + is(sd, "TypeProto"),
				   f->values + (is(sd, "SequenceProto") || is(sd, "OptionalProto") ||
						is(sd, "MapProto"))};
			if (s.graphs - 1 > PB_MAX_GRAPHS) {
				r = error("subgraphs nested more than %d levels deep (the limit of "
					  "graphs inside a node's graph attribute)", PB_MAX_GRAPHS);
				break;
			}
			if (s.types - 1 > PB_MAX_TYPES) {
				r = error("types nested more than %d levels deep (the limit of TypeProto "
					  "inside sequence, optional or map types)", PB_MAX_TYPES);
				break;
			}
			if (s.values - 1 > PB_MAX_VALUES) {
				r = error("values nested more than %d levels deep (the limit of "
					  "sequences, optionals and maps inside each other)", PB_MAX_VALUES);
				break;
			}
			if (n > PB_MAX_DEPTH) {
				r = error("messages nested more than %d levels deep (the limit of "
					  "protobuf nesting)", PB_MAX_DEPTH);
				break;
			}
			st[n++] = s;
		} else {
			r = 1; /* groups (3, 4) and wire types 6, 7 */
			break;
		}
	}
	free(st);
	return r;
}
