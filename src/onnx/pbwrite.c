/* pbwrite.c — protobuf-c messages encoded with every message's size
 * computed once (see pbwrite.h).
 *
 * The encoding follows protobuf-c 1.4's protobuf_c_message_pack case by
 * case, including what protobuf_c_message_get_packed_size and pack agree
 * on beyond the wire format's rules: an int32 or enum below zero takes ten
 * bytes, lengths are written as 32-bit varints, a string or message
 * pointer equal to the field's default value is not written, a NULL
 * message inside a repeated field or a NULL required string is written
 * empty. Sizes are kept in pre-order: pbw_measure reserves a message's slot
 * before measuring its children and fills it after, and the writer takes
 * the slots in the same order, reading a child's size just before the
 * child takes its own. */
#include "onnx/pbwrite.h"

#include <stdlib.h>
#include <string.h>

#include "util.h"

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "pbwrite.c copies fixed-width values and packed arrays as they are in memory: little-endian only"
#endif

/* marks a slot whose message protobuf-c encodes itself (proto3 fields) */
#define PB_WHOLE ((size_t)1 << (sizeof(size_t) * 8 - 1))

/* ---- sizes, as protobuf-c computes them ---- */

static size_t tag_size(uint32_t id)
{
	return id < 1u << 4 ? 1 : id < 1u << 11 ? 2 : id < 1u << 18 ? 3 : id < 1u << 25 ? 4 : 5;
}

static size_t u32_size(uint32_t v)
{
	return v < 1u << 7 ? 1 : v < 1u << 14 ? 2 : v < 1u << 21 ? 3 : v < 1u << 28 ? 4 : 5;
}

static size_t u64_size(uint64_t v)
{
	size_t n = 1;
	while (v >= 0x80) {
		v >>= 7;
		n++;
	}
	return n;
}

static uint32_t zz32(int32_t v)
{
	return v < 0 ? (-(uint32_t)v) * 2 - 1 : (uint32_t)v * 2;
}

static uint64_t zz64(int64_t v)
{
	return v < 0 ? (-(uint64_t)v) * 2 - 1 : (uint64_t)v * 2;
}

/* bytes of one value of a varint or fixed type (not string, bytes, message) */
static inline size_t scalar_size(ProtobufCType t, const void *p)
{
	switch (t) {
	case PROTOBUF_C_TYPE_SINT32:
		return u32_size(zz32(*(const int32_t *)p));
	case PROTOBUF_C_TYPE_ENUM:
	case PROTOBUF_C_TYPE_INT32:
		return *(const int32_t *)p < 0 ? 10 : u32_size((uint32_t)*(const int32_t *)p);
	case PROTOBUF_C_TYPE_UINT32:
		return u32_size(*(const uint32_t *)p);
	case PROTOBUF_C_TYPE_SINT64:
		return u64_size(zz64(*(const int64_t *)p));
	case PROTOBUF_C_TYPE_INT64:
	case PROTOBUF_C_TYPE_UINT64:
		return u64_size(*(const uint64_t *)p);
	case PROTOBUF_C_TYPE_SFIXED32:
	case PROTOBUF_C_TYPE_FIXED32:
	case PROTOBUF_C_TYPE_FLOAT:
		return 4;
	case PROTOBUF_C_TYPE_SFIXED64:
	case PROTOBUF_C_TYPE_FIXED64:
	case PROTOBUF_C_TYPE_DOUBLE:
		return 8;
	case PROTOBUF_C_TYPE_BOOL:
		return 1;
	default:
		return 0;
	}
}

size_t pbw_elt_size(ProtobufCType t)
{
	switch (t) {
	case PROTOBUF_C_TYPE_SINT64:
	case PROTOBUF_C_TYPE_INT64:
	case PROTOBUF_C_TYPE_UINT64:
	case PROTOBUF_C_TYPE_SFIXED64:
	case PROTOBUF_C_TYPE_FIXED64:
	case PROTOBUF_C_TYPE_DOUBLE:
		return 8;
	case PROTOBUF_C_TYPE_BOOL:
		return sizeof(protobuf_c_boolean);
	case PROTOBUF_C_TYPE_STRING:
	case PROTOBUF_C_TYPE_MESSAGE:
		return sizeof(void *);
	case PROTOBUF_C_TYPE_BYTES:
		return sizeof(ProtobufCBinaryData);
	default:
		return 4;
	}
}

static int is_ptr_type(ProtobufCType t)
{
	return t == PROTOBUF_C_TYPE_STRING || t == PROTOBUF_C_TYPE_MESSAGE;
}

/* is a field that is not repeated written? (protobuf-c's rules for
 * required, oneof and optional fields; unlabeled ones never get here) */
static inline int present(const ProtobufCFieldDescriptor *f, const ProtobufCMessage *m)
{
	const char *member = (const char *)m + f->offset;
	const char *q = (const char *)m + f->quantifier_offset;
	if (f->label == PROTOBUF_C_LABEL_REQUIRED)
		return 1;
	if ((f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) && *(const uint32_t *)q != f->id)
		return 0;
	if (is_ptr_type(f->type)) {
		const void *p = *(const void *const *)member;
		return p && p != f->default_value;
	}
	return (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) || *(const protobuf_c_boolean *)q;
}

static size_t measure_msg(const ProtobufCMessage *m, PbSizes *s);

/* bytes of a string, bytes or message value after its tag */
static size_t lp_size(const ProtobufCFieldDescriptor *f, const void *p, PbSizes *s)
{
	size_t n;
	if (f->type == PROTOBUF_C_TYPE_STRING) {
		const char *str = *(const char *const *)p;
		n = str ? strlen(str) : 0;
	} else if (f->type == PROTOBUF_C_TYPE_BYTES) {
		n = ((const ProtobufCBinaryData *)p)->len;
	} else {
		const ProtobufCMessage *sub = *(const ProtobufCMessage *const *)p;
		n = sub ? measure_msg(sub, s) : 0;
	}
	return u32_size((uint32_t)n) + n;
}

static size_t value_size(const ProtobufCFieldDescriptor *f, const void *p, PbSizes *s)
{
	switch (f->type) {
	case PROTOBUF_C_TYPE_STRING:
	case PROTOBUF_C_TYPE_BYTES:
	case PROTOBUF_C_TYPE_MESSAGE:
		return lp_size(f, p, s);
	default:
		return scalar_size(f->type, p);
	}
}

/* payload of a packed repeated field */
static size_t packed_payload(const ProtobufCFieldDescriptor *f, size_t count, const char *a)
{
	size_t w = pbw_elt_size(f->type), n = 0;
	switch (f->type) {
	case PROTOBUF_C_TYPE_SFIXED32:
	case PROTOBUF_C_TYPE_FIXED32:
	case PROTOBUF_C_TYPE_FLOAT:
	case PROTOBUF_C_TYPE_SFIXED64:
	case PROTOBUF_C_TYPE_FIXED64:
	case PROTOBUF_C_TYPE_DOUBLE:
	case PROTOBUF_C_TYPE_BOOL:
		return count * scalar_size(f->type, a);
	default:
		for (size_t i = 0; i < count; i++)
			n += scalar_size(f->type, a + i * w);
		return n;
	}
}

static size_t repeated_size(const ProtobufCFieldDescriptor *f, size_t count, const char *a, PbSizes *s)
{
	if (f->flags & PROTOBUF_C_FIELD_FLAG_PACKED) {
		size_t n = packed_payload(f, count, a);
		return tag_size(f->id) + u32_size((uint32_t)n) + n;
	}
	size_t w = pbw_elt_size(f->type), n = tag_size(f->id) * count;
	for (size_t i = 0; i < count; i++)
		n += value_size(f, a + i * w, s);
	return n;
}

static size_t slot(PbSizes *s)
{
	if (s->n == s->cap) {
		s->cap = s->cap ? 2 * s->cap : 256;
		s->v = xreallocarray(s->v, s->cap, sizeof *s->v);
	}
	return s->n++;
}

static size_t measure_msg(const ProtobufCMessage *m, PbSizes *s)
{
	size_t k = slot(s), n = 0;
	const ProtobufCMessageDescriptor *d = m->descriptor;
	for (unsigned i = 0; i < d->n_fields; i++) {
		const ProtobufCFieldDescriptor *f = &d->fields[i];
		const char *member = (const char *)m + f->offset;
		if (f->label == PROTOBUF_C_LABEL_REPEATED) {
			size_t count = *(const size_t *)((const char *)m + f->quantifier_offset);
			if (count)
				n += repeated_size(f, count, *(const char *const *)member, s);
		} else if (f->label == PROTOBUF_C_LABEL_NONE && !(f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF)) {
			/* proto3: protobuf-c's own rules for what to leave out */
			s->n = k + 1;
			n = protobuf_c_message_get_packed_size(m);
			s->v[k] = n | PB_WHOLE;
			return n;
		} else if (present(f, m)) {
			n += tag_size(f->id) + value_size(f, member, s);
		}
	}
	for (size_t i = 0; i < m->n_unknown_fields; i++)
		n += tag_size(m->unknown_fields[i].tag) + m->unknown_fields[i].len;
	s->v[k] = n;
	return n;
}

size_t pbw_measure(const ProtobufCMessage *m, PbSizes *s)
{
	s->n = 0;
	return measure_msg(m, s);
}

void pbw_sizes_free(PbSizes *s)
{
	free(s->v);
	memset(s, 0, sizeof *s);
}

/* ---- writing ---- */

typedef struct W {
	uint8_t *buf, *p, *end;
	const PbStream *st;   /* NULL: buf is the whole output */
	size_t big;           /* payloads this long go to the sink uncopied */
	const size_t *sz;
	size_t pos, nsz;
	int err;
} W;

static void w_flush(W *w)
{
	if (w->p > w->buf && !w->err && w->st->sink(w->st->ud, w->buf, (size_t)(w->p - w->buf)) < 0)
		w->err = 1;
	w->p = w->buf;
}

/* hand (d, n) to the sink as it is, after what is gathered */
static void w_pass(W *w, const uint8_t *d, size_t n)
{
	w_flush(w);
	if (!w->err && w->st->sink(w->st->ud, d, n) < 0)
		w->err = 1;
}

static void w_put_slow(W *w, const void *d, size_t n)
{
	if (!w->st) {
		w->err = 1;   /* more bytes than measured */
		return;
	}
	w_flush(w);
	if (n > (size_t)(w->end - w->p)) {
		w_pass(w, d, n);
		return;
	}
	memcpy(w->p, d, n);
	w->p += n;
}

static inline void w_put(W *w, const void *d, size_t n)
{
	if (n <= (size_t)(w->end - w->p)) {
		memcpy(w->p, d, n);
		w->p += n;
	} else {
		w_put_slow(w, d, n);
	}
}

/* the bytes of a string, bytes field or packed array */
static void w_data(W *w, const void *d, size_t n)
{
	if (w->st && n >= w->big)
		w_pass(w, d, n);
	else if (n)
		w_put(w, d, n);
}

static size_t put_u64(uint64_t v, uint8_t *o)
{
	size_t k = 0;
	while (v >= 0x80) {
		o[k++] = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	o[k++] = (uint8_t)v;
	return k;
}

static size_t put_tag(uint32_t id, unsigned wt, uint8_t *o)
{
	size_t k = put_u64((uint64_t)id << 3, o);
	o[0] |= (uint8_t)wt;
	return k;
}

static unsigned wire_type(ProtobufCType t)
{
	switch (t) {
	case PROTOBUF_C_TYPE_SFIXED32:
	case PROTOBUF_C_TYPE_FIXED32:
	case PROTOBUF_C_TYPE_FLOAT:
		return PROTOBUF_C_WIRE_TYPE_32BIT;
	case PROTOBUF_C_TYPE_SFIXED64:
	case PROTOBUF_C_TYPE_FIXED64:
	case PROTOBUF_C_TYPE_DOUBLE:
		return PROTOBUF_C_WIRE_TYPE_64BIT;
	case PROTOBUF_C_TYPE_STRING:
	case PROTOBUF_C_TYPE_BYTES:
	case PROTOBUF_C_TYPE_MESSAGE:
		return PROTOBUF_C_WIRE_TYPE_LENGTH_PREFIXED;
	default:
		return PROTOBUF_C_WIRE_TYPE_VARINT;
	}
}

/* one value of a varint or fixed type into o */
static size_t put_scalar(ProtobufCType t, const void *p, uint8_t *o)
{
	switch (t) {
	case PROTOBUF_C_TYPE_SINT32:
		return put_u64(zz32(*(const int32_t *)p), o);
	case PROTOBUF_C_TYPE_ENUM:
	case PROTOBUF_C_TYPE_INT32:
		/* sign-extended: ten bytes below zero */
		return put_u64((uint64_t)(int64_t)*(const int32_t *)p, o);
	case PROTOBUF_C_TYPE_UINT32:
		return put_u64(*(const uint32_t *)p, o);
	case PROTOBUF_C_TYPE_SINT64:
		return put_u64(zz64(*(const int64_t *)p), o);
	case PROTOBUF_C_TYPE_INT64:
	case PROTOBUF_C_TYPE_UINT64:
		return put_u64(*(const uint64_t *)p, o);
	case PROTOBUF_C_TYPE_BOOL:
		o[0] = *(const protobuf_c_boolean *)p ? 1 : 0;
		return 1;
	default: {
		size_t n = scalar_size(t, p);
		memcpy(o, p, n);
		return n;
	}
	}
}

static void write_msg(W *w, const ProtobufCMessage *m);

/* tag and value of one element of field f at p */
static void write_value(W *w, const ProtobufCFieldDescriptor *f, const void *p)
{
	uint8_t s[24];
	size_t k = put_tag(f->id, wire_type(f->type), s);
	const uint8_t *d = NULL;
	size_t n = 0;
	switch (f->type) {
	case PROTOBUF_C_TYPE_STRING:
		d = *(const uint8_t *const *)p;
		n = d ? strlen((const char *)d) : 0;
		break;
	case PROTOBUF_C_TYPE_BYTES:
		d = ((const ProtobufCBinaryData *)p)->data;
		n = ((const ProtobufCBinaryData *)p)->len;
		break;
	case PROTOBUF_C_TYPE_MESSAGE: {
		const ProtobufCMessage *sub = *(const ProtobufCMessage *const *)p;
		if (sub && w->pos >= w->nsz) {
			w->err = 1;
			return;
		}
		n = sub ? w->sz[w->pos] & ~PB_WHOLE : 0;
		k += put_u64((uint32_t)n, s + k);
		w_put(w, s, k);
		if (sub)
			write_msg(w, sub);
		return;
	}
	default:
		k += put_scalar(f->type, p, s + k);
		w_put(w, s, k);
		return;
	}
	k += put_u64((uint32_t)n, s + k);
	w_put(w, s, k);
	if (!n)
		return;
	if (f->type == PROTOBUF_C_TYPE_BYTES && w->st &&
	    (!d || ((uintptr_t)d >= (uintptr_t)w->st->lo && (uintptr_t)d < (uintptr_t)w->st->hi)))
		w_pass(w, d, n);
	else if (!d)
		w->err = 1;   /* bytes to copy from nowhere */
	else
		w_data(w, d, n);
}

static void write_packed(W *w, const ProtobufCFieldDescriptor *f, size_t count, const char *a)
{
	uint8_t s[24];
	size_t n = packed_payload(f, count, a), k = put_tag(f->id, PROTOBUF_C_WIRE_TYPE_LENGTH_PREFIXED, s);
	k += put_u64((uint32_t)n, s + k);
	w_put(w, s, k);
	size_t es = pbw_elt_size(f->type);
	switch (f->type) {
	case PROTOBUF_C_TYPE_SFIXED32:
	case PROTOBUF_C_TYPE_FIXED32:
	case PROTOBUF_C_TYPE_FLOAT:
	case PROTOBUF_C_TYPE_SFIXED64:
	case PROTOBUF_C_TYPE_FIXED64:
	case PROTOBUF_C_TYPE_DOUBLE:
		w_data(w, a, n);
		return;
	default:
		for (size_t i = 0; i < count; i++) {
			k = put_scalar(f->type, a + i * es, s);
			w_put(w, s, k);
		}
	}
}

/* a ProtobufCBuffer over W, for a message protobuf-c encodes itself */
typedef struct WBuf {
	ProtobufCBuffer base;
	W *w;
} WBuf;

static void wbuf_append(ProtobufCBuffer *b, size_t len, const uint8_t *data)
{
	W *w = ((WBuf *)b)->w;
	if (len && !data)
		w->err = 1;
	else
		w_data(w, data, len);
}

static void write_msg(W *w, const ProtobufCMessage *m)
{
	if (w->pos >= w->nsz) {
		w->err = 1;
		return;
	}
	if (w->sz[w->pos++] & PB_WHOLE) {
		WBuf b = {.base = {.append = wbuf_append}, .w = w};
		protobuf_c_message_pack_to_buffer(m, &b.base);
		return;
	}
	const ProtobufCMessageDescriptor *d = m->descriptor;
	for (unsigned i = 0; i < d->n_fields && !w->err; i++) {
		const ProtobufCFieldDescriptor *f = &d->fields[i];
		const char *member = (const char *)m + f->offset;
		if (f->label == PROTOBUF_C_LABEL_REPEATED) {
			size_t count = *(const size_t *)((const char *)m + f->quantifier_offset);
			const char *a = *(const char *const *)member;
			if (!count)
				continue;
			if (f->flags & PROTOBUF_C_FIELD_FLAG_PACKED) {
				write_packed(w, f, count, a);
				continue;
			}
			size_t es = pbw_elt_size(f->type);
			for (size_t j = 0; j < count; j++)
				write_value(w, f, a + j * es);
		} else if (present(f, m)) {
			write_value(w, f, member);
		}
	}
	for (size_t i = 0; i < m->n_unknown_fields; i++) {
		const ProtobufCMessageUnknownField *u = &m->unknown_fields[i];
		uint8_t s[8];
		w_put(w, s, put_tag(u->tag, u->wire_type, s));
		w_data(w, u->data, u->len);
	}
}

int pbw_write(const ProtobufCMessage *m, const PbSizes *s, const PbStream *st)
{
	size_t cap = st->bufsize < 64 ? 64 : st->bufsize;
	W w = {.st = st, .big = cap / 4, .sz = s->v, .nsz = s->n};
	w.buf = w.p = xmalloc(cap);
	w.end = w.buf + cap;
	write_msg(&w, m);
	w_flush(&w);
	free(w.buf);
	return w.err || w.pos != w.nsz ? -1 : 0;
}

int pbw_pack(const ProtobufCMessage *m, const PbSizes *s, uint8_t *out, size_t size)
{
	W w = {.buf = out, .p = out, .end = out + size, .sz = s->v, .nsz = s->n};
	write_msg(&w, m);
	return w.err || w.pos != w.nsz || w.p != w.end ? -1 : 0;
}
