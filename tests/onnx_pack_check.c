/* onnx_pack_check.c — src/onnx/pbwrite.c against protobuf-c, byte for byte
 * (built and run by tests/t_onnx_pack.sh).
 *
 * Every message is encoded by protobuf-c (protobuf_c_message_pack, and
 * pack_to_buffer, which model.c's streamed saves used before) and by pbwrite:
 * pbw_measure's size, pbw_pack into one buffer, and pbw_write streamed
 * through a 64-byte buffer (every flush and uncopied hand-over taken) and
 * through a 64 KiB one with every bytes field handed over as it is (the
 * path of model_defer's tensors). The messages:
 *  - each file named in the lists of ONNX_PACK_LISTS (colon-separated
 *    paths; a list file NAME.list holds one path a line and gives one
 *    result line, NAME): .onnx files as ModelProto, .pb files as
 *    TensorProto (those that are not, sequences and maps, are counted);
 *  - random messages of every message type of onnx.proto (the descriptors
 *    listed in onnx_pack_types.h, which the script writes from the
 *    generated header): every field set or not at random, oneof cases,
 *    negative int32 and enum values (ten bytes), bools other than 0 and 1,
 *    64-bit extremes, strings and bytes past one-byte lengths, NULL
 *    pointers, string defaults, packed arrays whose length needs two bytes,
 *    unknown fields of every wire type and tags past 2^29, nesting four
 *    deep;
 *  - random messages of a proto3 type, alone and inside a proto2 one. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "onnx.pb-c.h"
#include "onnx/pbwrite.h"
#include "pack_mixed.pb-c.h"

static const ProtobufCMessageDescriptor *const types[] = {
#include "onnx_pack_types.h"
};

/* proto3 messages (which pbwrite leaves to protobuf-c whole) alone and
 * inside proto2 ones: pack_mixed.proto and pack_p3.proto, which the
 * script writes */
static const ProtobufCMessageDescriptor *const mixed[] = {
	&qmpack__p3__descriptor, &qmpack__mixed__descriptor,
};

/* ---- growing byte buffer, a PbSink ---- */

typedef struct Bytes {
	uint8_t *p;
	size_t n, cap;
	size_t handed;   /* calls whose data was not the writer's buffer */
	const uint8_t *wbuf_lo, *wbuf_hi;
} Bytes;

static int bytes_sink(void *ud, const uint8_t *data, size_t len)
{
	Bytes *b = ud;
	if (b->n + len > b->cap) {
		b->cap = (b->n + len) * 2;
		b->p = realloc(b->p, b->cap);
		if (!b->p)
			abort();
	}
	if (len)
		memcpy(b->p + b->n, data, len);
	b->n += len;
	b->handed++;
	return 0;
}

static void bytes_append(ProtobufCBuffer *base, size_t len, const uint8_t *data);

typedef struct PcBuf {
	ProtobufCBuffer base;
	Bytes b;
} PcBuf;

static void bytes_append(ProtobufCBuffer *base, size_t len, const uint8_t *data)
{
	bytes_sink(&((PcBuf *)base)->b, data, len);
}

/* first offset where a and b differ */
static size_t first_diff(const uint8_t *a, size_t na, const uint8_t *b, size_t nb)
{
	size_t i = 0;
	while (i < na && i < nb && a[i] == b[i])
		i++;
	return i;
}

static int same(const uint8_t *a, size_t na, const uint8_t *b, size_t nb)
{
	return na == nb && (!na || !memcmp(a, b, na));
}

/* Compare the encodings of m; NULL when equal, else why (static) */
static const char *compare(const ProtobufCMessage *m)
{
	static char why[256];
	size_t n = protobuf_c_message_get_packed_size(m);
	uint8_t *ref = malloc(n ? n : 1);
	if (!ref)
		abort();
	size_t rn = protobuf_c_message_pack(m, ref);
	PcBuf pc = {.base = {.append = bytes_append}};
	protobuf_c_message_pack_to_buffer(m, &pc.base);
	const char *r = NULL;
	PbSizes s = {0};
	size_t mn = pbw_measure(m, &s);
	uint8_t *flat = malloc(mn ? mn : 1);
	if (!flat)
		abort();
	Bytes small = {0}, pass = {0};
	PbStream st1 = {.sink = bytes_sink, .ud = &small, .bufsize = 64};
	PbStream st2 = {.sink = bytes_sink, .ud = &pass, .bufsize = 1 << 16,
			.lo = (const void *)1, .hi = (const void *)UINTPTR_MAX};
	if (rn != n || !same(pc.b.p, pc.b.n, ref, n)) {
		snprintf(why, sizeof why, "protobuf-c's own pack (%zu) and pack_to_buffer (%zu) disagree with its size %zu",
			 rn, pc.b.n, n);
		r = why;
	} else if (mn != n) {
		snprintf(why, sizeof why, "pbw_measure says %zu bytes, protobuf-c %zu", mn, n);
		r = why;
	} else if (pbw_pack(m, &s, flat, mn) < 0 || !same(flat, mn, ref, n)) {
		snprintf(why, sizeof why, "pbw_pack differs from byte %zu of %zu", first_diff(flat, mn, ref, n), n);
		r = why;
	} else if (pbw_write(m, &s, &st1) < 0 || !same(small.p, small.n, ref, n)) {
		snprintf(why, sizeof why, "pbw_write through 64 bytes gave %zu bytes, differing from byte %zu of %zu",
			 small.n, first_diff(small.p, small.n, ref, n), n);
		r = why;
	} else if (pbw_write(m, &s, &st2) < 0 || !same(pass.p, pass.n, ref, n)) {
		snprintf(why, sizeof why, "pbw_write handing bytes fields over gave %zu bytes, differing from byte %zu of %zu",
			 pass.n, first_diff(pass.p, pass.n, ref, n), n);
		r = why;
	}
	free(ref);
	free(flat);
	free(pc.b.p);
	free(small.p);
	free(pass.p);
	pbw_sizes_free(&s);
	return r;
}

/* ---- files ---- */

static uint8_t *read_file(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	uint8_t *p = NULL;
	size_t n = 0, cap = 0, k;
	do {
		if (n == cap) {
			cap = cap ? 2 * cap : 1 << 16;
			p = realloc(p, cap);
			if (!p)
				abort();
		}
		k = fread(p + n, 1, cap - n, f);
		n += k;
	} while (k > 0);
	fclose(f);
	*len = n;
	return p;
}

/* check one file: 1 checked, 0 failed (why says why), 2 left out (a .pb
 * file that is not a TensorProto: the sequences, maps and optionals of
 * onnx-data.proto, which the system's onnx.proto does not have) */
static int check_file(const char *path, char *why, size_t whylen)
{
	size_t len;
	uint8_t *data = read_file(path, &len);
	if (!data) {
		snprintf(why, whylen, "%s: cannot read", path);
		return 0;
	}
	size_t pl = strlen(path);
	int is_pb = pl > 3 && !strcmp(path + pl - 3, ".pb");
	ProtobufCMessage *m = protobuf_c_message_unpack(
		is_pb ? &onnx__tensor_proto__descriptor : &onnx__model_proto__descriptor, NULL, len, data);
	free(data);
	if (!m && is_pb)
		return 2;
	if (!m) {
		snprintf(why, whylen, "%s: protobuf-c cannot unpack it", path);
		return 0;
	}
	const char *r = compare(m);
	if (r)
		snprintf(why, whylen, "%s (%s): %s", path, m->descriptor->name, r);
	protobuf_c_message_free_unpacked(m, NULL);
	return r == NULL;
}

static void check_list(const char *list)
{
	const char *base = strrchr(list, '/') ? strrchr(list, '/') + 1 : list;
	char name[256];
	snprintf(name, sizeof name, "%.*s", (int)(strcspn(base, ".")), base);
	FILE *f = fopen(list, "r");
	if (!f) {
		printf("FAIL: %s: cannot read %s\n", name, list);
		return;
	}
	char line[4096], why[8192] = "", first[8192] = "";
	size_t ok = 0, bad = 0, out = 0;
	while (fgets(line, sizeof line, f)) {
		line[strcspn(line, "\n")] = 0;
		if (!*line)
			continue;
		int r = check_file(line, why, sizeof why);
		if (r == 1) {
			ok++;
		} else if (r == 2) {
			out++;
		} else {
			if (!bad)
				snprintf(first, sizeof first, "%s", why);
			bad++;
		}
	}
	fclose(f);
	if (bad)
		printf("FAIL: %s: %zu of %zu files encode otherwise; first: %s\n", name, bad, ok + bad, first);
	else if (!ok)
		printf("FAIL: %s: no files in %s\n", name, list);
	else
		printf("PASS: %s: %zu files encode as protobuf-c encodes them%s\n", name, ok,
		       out ? " (and .pb files that are not TensorProto were left out)" : "");
}

/* ---- random messages ---- */

static uint64_t rs = 0x9e3779b97f4a7c15u;

static uint64_t rnd(void)
{
	/* xorshift64*: the same messages on every run */
	rs ^= rs >> 12;
	rs ^= rs << 25;
	rs ^= rs >> 27;
	return rs * 0x2545f4914f6cdd1du;
}

static unsigned rn(unsigned n)
{
	return (unsigned)(rnd() % n);
}

/* everything a random message holds, freed together */
typedef struct Arena {
	void **p;
	size_t n, cap;
	size_t msgs;   /* messages made for the current root */
} Arena;

static void *aalloc(Arena *a, size_t n)
{
	if (a->n == a->cap) {
		a->cap = a->cap ? 2 * a->cap : 256;
		a->p = realloc(a->p, a->cap * sizeof *a->p);
		if (!a->p)
			abort();
	}
	void *p = calloc(1, n ? n : 1);
	if (!p)
		abort();
	return a->p[a->n++] = p;
}

static void afree(Arena *a)
{
	for (size_t i = 0; i < a->n; i++)
		free(a->p[i]);
	a->n = 0;
	a->msgs = 0;
}

static ProtobufCMessage *rnd_msg(Arena *a, const ProtobufCMessageDescriptor *d, int depth);

static int32_t rnd_i32(void)
{
	switch (rn(5)) {
	case 0: return -(int32_t)rn(1000) - 1;
	case 1: return (int32_t)rn(100);
	case 2: return rn(2) ? INT32_MIN : INT32_MAX;
	default: return (int32_t)rnd();
	}
}

static uint64_t rnd_u64(void)
{
	switch (rn(4)) {
	case 0: return rn(200);
	case 1: return rn(2) ? UINT64_MAX : (uint64_t)INT64_MIN;
	default: return rnd() >> rn(64);
	}
}

static char *rnd_str(Arena *a)
{
	size_t n = rn(4) == 0 ? 120 + rn(300) : rn(12);
	if (rn(50) == 0)
		n = 20000 + rn(1000);
	char *s = aalloc(a, n + 1);
	for (size_t i = 0; i < n; i++)
		s[i] = (char)('a' + rn(26));
	return s;
}

/* one random value of f's type at p */
static void rnd_value(Arena *a, const ProtobufCFieldDescriptor *f, void *p, int depth, int repeated)
{
	switch (f->type) {
	case PROTOBUF_C_TYPE_INT32:
	case PROTOBUF_C_TYPE_SINT32:
	case PROTOBUF_C_TYPE_SFIXED32:
	case PROTOBUF_C_TYPE_ENUM:
	case PROTOBUF_C_TYPE_UINT32:
	case PROTOBUF_C_TYPE_FIXED32:
	case PROTOBUF_C_TYPE_FLOAT: {
		int32_t v = rnd_i32();
		memcpy(p, &v, 4);
		break;
	}
	case PROTOBUF_C_TYPE_INT64:
	case PROTOBUF_C_TYPE_SINT64:
	case PROTOBUF_C_TYPE_SFIXED64:
	case PROTOBUF_C_TYPE_UINT64:
	case PROTOBUF_C_TYPE_FIXED64:
	case PROTOBUF_C_TYPE_DOUBLE: {
		uint64_t v = rnd_u64();
		memcpy(p, &v, 8);
		break;
	}
	case PROTOBUF_C_TYPE_BOOL:
		*(protobuf_c_boolean *)p = (protobuf_c_boolean)rn(3);
		break;
	case PROTOBUF_C_TYPE_STRING:
		/* NULL only where protobuf-c's size would not strlen it */
		*(char **)p = !repeated && f->label != PROTOBUF_C_LABEL_NONE && rn(6) == 0 ? NULL
			      : !repeated && f->default_value && rn(3) == 0 ? (char *)f->default_value
									   : rnd_str(a);
		break;
	case PROTOBUF_C_TYPE_BYTES: {
		ProtobufCBinaryData *b = p;
		b->len = rn(5) == 0 ? 0 : rn(3) == 0 ? 128 + rn(400) : rn(20);
		if (rn(60) == 0)
			b->len = 20000 + rn(5000);
		b->data = b->len || rn(2) ? aalloc(a, b->len) : NULL;
		for (size_t i = 0; i < b->len; i++)
			b->data[i] = (uint8_t)rnd();
		break;
	}
	case PROTOBUF_C_TYPE_MESSAGE:
		*(ProtobufCMessage **)p = !repeated && rn(5) == 0 ? NULL
					  : rnd_msg(a, f->descriptor, depth + 1);
		break;
	}
}

static void rnd_unknown(Arena *a, ProtobufCMessage *m)
{
	if (rn(4))
		return;
	m->n_unknown_fields = 1 + rn(3);
	m->unknown_fields = aalloc(a, m->n_unknown_fields * sizeof *m->unknown_fields);
	for (size_t i = 0; i < m->n_unknown_fields; i++) {
		ProtobufCMessageUnknownField *u = &m->unknown_fields[i];
		u->tag = rn(5) == 0 ? (1u << 29) + rn(1000) : rn(5) == 0 ? UINT32_MAX : 100 + rn(3000);
		uint8_t buf[600];
		size_t n = 0;
		switch (rn(4)) {
		case 0: {
			uint64_t v = rnd_u64();
			u->wire_type = PROTOBUF_C_WIRE_TYPE_VARINT;
			do {
				buf[n++] = (uint8_t)((v & 0x7f) | (v >= 0x80 ? 0x80 : 0));
				v >>= 7;
			} while (v);
			break;
		}
		case 1:
			u->wire_type = PROTOBUF_C_WIRE_TYPE_32BIT;
			for (; n < 4; n++)
				buf[n] = (uint8_t)rnd();
			break;
		case 2:
			u->wire_type = PROTOBUF_C_WIRE_TYPE_64BIT;
			for (; n < 8; n++)
				buf[n] = (uint8_t)rnd();
			break;
		default: {
			size_t len = rn(3) ? rn(20) : 128 + rn(400);
			u->wire_type = PROTOBUF_C_WIRE_TYPE_LENGTH_PREFIXED;
			buf[n++] = (uint8_t)(len | (len >= 0x80 ? 0x80 : 0));
			if (len >= 0x80)
				buf[n++] = (uint8_t)(len >> 7);
			for (size_t j = 0; j < len; j++)
				buf[n++] = (uint8_t)rnd();
		}
		}
		u->len = n;
		u->data = aalloc(a, n);
		memcpy(u->data, buf, n);
	}
}

static ProtobufCMessage *rnd_msg(Arena *a, const ProtobufCMessageDescriptor *d, int depth)
{
	ProtobufCMessage *m = aalloc(a, d->sizeof_message);
	protobuf_c_message_init(d, m);
	a->msgs++;
	int deeper = depth < 4 && a->msgs < 400;
	for (unsigned i = 0; i < d->n_fields; i++) {
		const ProtobufCFieldDescriptor *f = &d->fields[i];
		char *member = (char *)m + f->offset;
		char *q = (char *)m + f->quantifier_offset;
		if (f->type == PROTOBUF_C_TYPE_MESSAGE && !deeper && f->label != PROTOBUF_C_LABEL_REQUIRED)
			continue;
		if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) {
			/* the first field of its oneof chooses one of them, or none */
			int first = 1;
			for (unsigned j = 0; j < i; j++)
				if ((d->fields[j].flags & PROTOBUF_C_FIELD_FLAG_ONEOF) &&
				    d->fields[j].quantifier_offset == f->quantifier_offset)
					first = 0;
			if (!first)
				continue;
			unsigned k = 0, pick;
			for (unsigned j = i; j < d->n_fields; j++)
				k += (d->fields[j].flags & PROTOBUF_C_FIELD_FLAG_ONEOF) &&
				     d->fields[j].quantifier_offset == f->quantifier_offset;
			pick = rn(k + 1);
			if (pick == k)
				continue;
			for (unsigned j = i; j < d->n_fields; j++) {
				const ProtobufCFieldDescriptor *g = &d->fields[j];
				if (!(g->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) || g->quantifier_offset != f->quantifier_offset)
					continue;
				if (pick-- == 0) {
					if (g->type == PROTOBUF_C_TYPE_MESSAGE && !deeper)
						break;
					*(uint32_t *)q = g->id;
					rnd_value(a, g, (char *)m + g->offset, depth, 0);
					break;
				}
			}
			continue;
		}
		if (f->label == PROTOBUF_C_LABEL_REPEATED) {
			size_t n = rn(3) == 0 ? 0 : rn(4) == 0 ? 30 + rn(300) : 1 + rn(4);
			if (f->type == PROTOBUF_C_TYPE_MESSAGE && n > 3)
				n = 1 + rn(3);
			size_t es = pbw_elt_size(f->type);
			char *arr = aalloc(a, n * es);
			for (size_t j = 0; j < n; j++)
				rnd_value(a, f, arr + j * es, depth, 1);
			*(size_t *)q = n;
			*(char **)member = arr;
			continue;
		}
		if (f->label == PROTOBUF_C_LABEL_OPTIONAL && f->type != PROTOBUF_C_TYPE_STRING &&
		    f->type != PROTOBUF_C_TYPE_MESSAGE)
			*(protobuf_c_boolean *)q = (protobuf_c_boolean)rn(2);
		if (rn(4))
			rnd_value(a, f, member, depth, 0);
	}
	rnd_unknown(a, m);
	return m;
}

static void check_random(const char *what, const ProtobufCMessageDescriptor *const *v, size_t ntypes,
			 unsigned per_type)
{
	Arena a = {0};
	size_t ok = 0, bad = 0;
	char first[512] = "";
	for (size_t t = 0; t < ntypes; t++) {
		for (unsigned i = 0; i < per_type; i++) {
			ProtobufCMessage *m = rnd_msg(&a, v[t], 0);
			const char *r = compare(m);
			if (!r) {
				ok++;
			} else {
				if (!bad)
					snprintf(first, sizeof first, "%s #%u: %s", v[t]->name, i, r);
				bad++;
			}
			afree(&a);
		}
	}
	free(a.p);
	if (bad)
		printf("FAIL: %s: %zu of %zu encode otherwise; first: %s\n", what, bad, ok + bad, first);
	else
		printf("PASS: %s: %zu, of %zu message types, encode as protobuf-c encodes them\n", what, ok, ntypes);
}

int main(void)
{
	check_random("random messages of onnx.proto", types, sizeof types / sizeof *types, 300);
	check_random("random proto3 messages", mixed, sizeof mixed / sizeof *mixed, 300);
	const char *lists = getenv("ONNX_PACK_LISTS");
	if (!lists || !*lists)
		return 0;
	char *dup = strdup(lists), *save = NULL;
	for (char *l = strtok_r(dup, ":", &save); l; l = strtok_r(NULL, ":", &save))
		check_list(l);
	free(dup);
	return 0;
}
