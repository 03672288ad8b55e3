/* model.c — load, save and query ONNX models (see model.h).
 *
 * Loading maps the file and unpacks it with protobuf-c, which copies what it
 * keeps, so the mapping is released at once unless it holds original bytes
 * to keep. (The copies land in huge pages in the build's children, whose
 * whole heap asks for them: src/heap.c.) Saving streams the model into a
 * temporary file beside the target and renames it; external data files
 * are written the same way, before the model that names them. Every
 * encoding here (saves, model_serialize, the canonical hash) is pbwrite's
 * (src/onnx/pbwrite.h): protobuf-c's bytes, but each nested message's size
 * computed once, where protobuf-c computes it again at every level of
 * nesting above it (silero-vad's If bodies: most of a save's work).
 * While saving, tensors that move in or out of external data are modified
 * in place and restored afterwards, so the caller's Model is unchanged.
 *
 * External data that model_save writes holds the tensors in the order the
 * model lists them, each at an offset aligned to 64 bytes (4096 for tensors
 * of 64 KiB or more, so runtimes can map them); gaps are holes. When a model
 * moves to another directory unchanged, each data file it references is
 * rewritten with every referenced range at its old offset, so the model's
 * own bytes stay the same and unreferenced ranges are not copied.
 *
 * Byte fidelity: protobuf-c writes fields in number order, repeated scalars
 * as onnx.proto declares them and unknown fields last. A file encoded
 * otherwise (packed dims from proto3 writers, unknown fields in between) is
 * kept as loaded together with the hash of its protobuf-c encoding; while
 * the model still encodes to that hash it is saved as the original bytes.
 * Finding that out is a pass over the whole encoding at every load (2 ms of
 * silero-vad's export stage); model_load_view skips it for readers that
 * never save what they load (export's check, verify's reference, run), and
 * model_load_rewrite for a model saved only changed (quantize) unless it
 * has external data, whose files a save may keep as they are. */
#include "onnx/model.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <xxhash.h>

#include "hash.h"
#include "onnx/extdata.h"
#include "onnx/pbdepth.h"
#include "onnx/pbwrite.h"
#include "util.h"

static const struct {
	const char *name;
	int bits;
} dtypes[DT_MAX] = {
	[DT_UNDEFINED] = {"undefined", 0}, [DT_FLOAT] = {"float", 32},
	[DT_UINT8] = {"uint8", 8}, [DT_INT8] = {"int8", 8},
	[DT_UINT16] = {"uint16", 16}, [DT_INT16] = {"int16", 16},
	[DT_INT32] = {"int32", 32}, [DT_INT64] = {"int64", 64},
	[DT_STRING] = {"string", 0}, [DT_BOOL] = {"bool", 8},
	[DT_FLOAT16] = {"float16", 16}, [DT_DOUBLE] = {"double", 64},
	[DT_UINT32] = {"uint32", 32}, [DT_UINT64] = {"uint64", 64},
	[DT_COMPLEX64] = {"complex64", 64}, [DT_COMPLEX128] = {"complex128", 128},
	[DT_BFLOAT16] = {"bfloat16", 16}, [DT_FLOAT8E4M3FN] = {"float8e4m3fn", 8},
	[DT_FLOAT8E4M3FNUZ] = {"float8e4m3fnuz", 8}, [DT_FLOAT8E5M2] = {"float8e5m2", 8},
	[DT_FLOAT8E5M2FNUZ] = {"float8e5m2fnuz", 8}, [DT_UINT4] = {"uint4", 4},
	[DT_INT4] = {"int4", 4}, [DT_FLOAT4E2M1] = {"float4e2m1", 4},
};

const char *dtype_name(int dt)
{
	return dt >= 0 && dt < DT_MAX ? dtypes[dt].name : "?";
}

int dtype_from_name(const char *name)
{
	for (int i = 0; i < DT_MAX; i++)
		if (!strcmp(dtypes[i].name, name))
			return i;
	return -1;
}

int dtype_bits(int dt)
{
	return dt >= 0 && dt < DT_MAX ? dtypes[dt].bits : 0;
}

size_t dtype_nbytes(int dt, int64_t n)
{
	int bits = dtype_bits(dt);
	if (n <= 0)
		return 0;
	if (bits == 4)
		return (size_t)(n + 1) / 2;
	return (size_t)n * (size_t)(bits / 8);
}

/* The model as loaded: canon is the hash of protobuf-c's encoding of it
 * (so a save can tell whether the model changed since), when have_canon;
 * data is the encoding as loaded, kept only for models protobuf-c would
 * encode differently (noncanonical), to be saved as they were while
 * unchanged. A canonical model's hash is taken only when the model has
 * external data, the one case a save asks (unchanged(), keep_one): it is
 * the file's own hash then, not another encoding of the model. */
struct ModelOrig {
	const uint8_t *data;
	size_t len;
	void *map;        /* mapping to munmap, or NULL when data is malloc'd */
	int noncanonical;
	int have_canon;
	XXH128_hash_t canon;
};

/* PbSink that hashes the encoding (st, when not NULL) and compares it
 * with ref; pbwrite gathers the small pieces (tags, lengths, names), so
 * the hash and the comparison see a few big ones rather than a call per
 * field */
typedef struct CanonSink {
	XXH3_state_t *st;
	const uint8_t *ref;
	size_t reflen, pos;
	int differs;
} CanonSink;

static int canon_sink(void *ud, const uint8_t *data, size_t len)
{
	CanonSink *b = ud;
	/* a deferred tensor's bytes (model_defer) are not there to hash */
	if (!data)
		return 0;
	if (b->st)
		XXH3_128bits_update(b->st, data, len);
	if (!b->ref || b->differs)
		return 0;
	if (len > b->reflen - b->pos || memcmp(b->ref + b->pos, data, len))
		b->differs = 1;
	else
		b->pos += len;
	/* a comparison alone ends at the first difference */
	return b->differs && !b->st ? -1 : 0;
}

/* Stream p's canonical encoding (measured into s): into *h, the hash of
 * it, when h is not NULL; 1 when it equals ref[0..reflen) (0 when ref is
 * NULL) */
static int canon_pass(const Onnx__ModelProto *p, const PbSizes *s, const uint8_t *ref, size_t reflen,
		      XXH128_hash_t *h)
{
	CanonSink b = {.ref = ref, .reflen = reflen};
	if (h) {
		b.st = XXH3_createState();
		if (!b.st)
			fatalx(1, "out of memory allocating a hash state");
		XXH3_128bits_reset(b.st);
	}
	PbStream st = {.sink = canon_sink, .ud = &b, .bufsize = 4096};
	int r = pbw_write(&p->base, s, &st);
	if (h) {
		*h = XXH3_128bits_digest(b.st);
		XXH3_freeState(b.st);
	}
	return ref && r == 0 && !b.differs && b.pos == reflen;
}

/* hash of p's canonical encoding (measured into s) */
static XXH128_hash_t canon_hash(const Onnx__ModelProto *p, const PbSizes *s)
{
	XXH128_hash_t h;
	canon_pass(p, s, NULL, 0, &h);
	return h;
}

/* p, measured into s as size bytes, encoded in one piece into *buf,
 * malloc'd: 0, or -1 after error() */
static int pack_flat(const Onnx__ModelProto *p, const PbSizes *s, size_t size, uint8_t **buf)
{
	*buf = xmalloc(size ? size : 1);
	if (pbw_pack(&p->base, s, *buf, size) < 0)
		return error("model serialization: the model does not encode to the %zu bytes measured", size);
	return 0;
}

static int has_external(Onnx__ModelProto *p);

static void orig_free(struct ModelOrig *o)
{
	if (!o)
		return;
	if (o->map)
		munmap(o->map, o->len);
	else if (o->data)
		free((void *)o->data);
	free(o);
}

/* the original bytes if the model (measured into s) still encodes as it
 * did when loaded and they differ from its encoding (NULL otherwise: the
 * encoding is what to write) */
static const struct ModelOrig *orig_valid(const Model *m, const PbSizes *s)
{
	/* deferred tensors (model_defer) have no bytes to hash: changed */
	if (!m->orig || !m->orig->noncanonical || m->ndeferred)
		return NULL;
	XXH128_hash_t h = canon_hash(m->proto, s);
	return XXH128_isEqual(h, m->orig->canon) ? m->orig : NULL;
}

/* 1 when m still encodes as it did when loaded (0 for a model built in
 * memory, and for one loaded without external data, which has some now) */
static int unchanged(const Model *m)
{
	if (!m->orig || !m->orig->have_canon)
		return 0;
	PbSizes s = {0};
	pbw_measure(&m->proto->base, &s);
	XXH128_hash_t h = canon_hash(m->proto, &s);
	pbw_sizes_free(&s);
	return XXH128_isEqual(h, m->orig->canon);
}

/* how much of the file a load keeps track of (model_load, model_load_view,
 * model_load_rewrite) */
enum { LOAD_FULL, LOAD_VIEW, LOAD_VIEW_INLINE };

/* Unpack and check; map (when not NULL) is data's mapping, which the model
 * keeps when it needs the original bytes, else it is unmapped. A view
 * keeps nothing of the file: no canonical encoding to compare or hash
 * (LOAD_VIEW_INLINE: unless the model has external data). */
static int parse(const void *data, size_t len, void *map, int view, const char *dir, Model **out)
{
	if (len == 0)
		return error("empty file");
	int deep = pb_depth_check(&onnx__model_proto__descriptor, data, len);
	if (deep < 0) {
		if (map)
			munmap(map, len);
		return -1;
	}
	Onnx__ModelProto *p = deep ? NULL : onnx__model_proto__unpack(NULL, len, data);
	if (!p) {
		if (map)
			munmap(map, len);
		return error("invalid protobuf (truncated, or not a ModelProto)");
	}
	const char *why = NULL;
	if (!p->has_ir_version)
		why = "no ir_version";
	else if (!p->graph)
		why = "no graph";
	else if (p->ir_version >= 3 && p->n_opset_import == 0)
		why = "no opset_import";
	if (why) {
		onnx__model_proto__free_unpacked(p, NULL);
		if (map)
			munmap(map, len);
		return error("%s (truncated, or not a ModelProto)", why);
	}
	if (view == LOAD_VIEW || (view == LOAD_VIEW_INLINE && !has_external(p))) {
		if (map)
			munmap(map, len);
		*out = model_wrap(p, dir);
		return 0;
	}
	/* A size that differs says at once that protobuf-c encodes the model
	 * otherwise; else the encoding is compared with the file as it is
	 * made, without hashing it (see struct ModelOrig). */
	struct ModelOrig *o = xcalloc(1, sizeof *o);
	PbSizes s = {0};
	int same = pbw_measure(&p->base, &s) == len && canon_pass(p, &s, data, len, NULL);
	if (!same) {
		o->canon = canon_hash(p, &s);
		o->have_canon = 1;
	} else if (has_external(p)) {
		o->canon = XXH3_128bits(data, len);
		o->have_canon = 1;
	}
	pbw_sizes_free(&s);
	*out = model_wrap(p, dir);
	(*out)->orig = o;
	if (same) {
		if (map)
			munmap(map, len);
		return 0;
	}
	o->noncanonical = 1;
	o->len = len;
	if (map) {
		o->map = map;
		o->data = map;
	} else {
		uint8_t *copy = xmalloc(len);
		memcpy(copy, data, len);
		o->data = copy;
	}
	return 0;
}

int model_parse(const void *data, size_t len, const char *dir, Model **out)
{
	return parse(data, len, NULL, LOAD_FULL, dir, out);
}

static int load(const char *path, int view, Model **out)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return error("not an ONNX model: %s: %s", path, strerror(errno));
	struct stat st;
	const char *why = NULL;
	if (fstat(fd, &st) < 0)
		why = strerror(errno);
	else if (S_ISDIR(st.st_mode))
		why = "is a directory";
	else if (!S_ISREG(st.st_mode))
		why = "not a regular file";
	else if (st.st_size == 0)
		why = "empty file";
	if (why) {
		error("not an ONNX model: %s: %s", path, why);
		close(fd);
		return -1;
	}
	void *map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	if (map == MAP_FAILED) {
		error("not an ONNX model: %s: cannot map: %s", path, strerror(errno));
		close(fd);
		return -1;
	}
	close(fd);
	char *dir = path_dir(path);
	int r = parse(map, (size_t)st.st_size, map, view, dir, out);
	free(dir);
	if (r < 0)
		return error_prefix("not an ONNX model: %s", path);
	(*out)->path = xstrdup(path);
	return 0;
}

int model_load(const char *path, Model **out)
{
	return load(path, LOAD_FULL, out);
}

int model_load_view(const char *path, Model **out)
{
	return load(path, LOAD_VIEW, out);
}

int model_load_rewrite(const char *path, Model **out)
{
	return load(path, LOAD_VIEW_INLINE, out);
}

Model *model_wrap(Onnx__ModelProto *proto, const char *dir)
{
	Model *m = xcalloc(1, sizeof *m);
	m->proto = proto;
	m->dir = xstrdup(dir ? dir : ".");
	return m;
}

void model_free(Model *m)
{
	if (!m)
		return;
	for (size_t i = 0; i < m->ndeferred; i++)
		if (m->deferred[i].done)
			m->deferred[i].done(m->deferred[i].ud);
	free(m->deferred);
	ext_free(m->ext);
	orig_free(m->orig);
	if (m->proto)
		onnx__model_proto__free_unpacked(m->proto, NULL);
	free(m->path);
	free(m->dir);
	free(m);
}

void model_defer(Model *m, const Onnx__TensorProto *t, TensorFill fill, void (*done)(void *ud), void *ud)
{
	m->deferred = xreallocarray(m->deferred, m->ndeferred + 1, sizeof *m->deferred);
	m->deferred[m->ndeferred++] = (ModelDeferred){t, fill, done, ud};
}

static const ModelDeferred *deferred_of(const Model *m, const Onnx__TensorProto *t)
{
	for (size_t i = 0; i < m->ndeferred; i++)
		if (m->deferred[i].t == t)
			return &m->deferred[i];
	return NULL;
}

int model_serialize(const Model *m, uint8_t **data, size_t *len)
{
	if (m->ndeferred)
		return error("model serialization: %zu tensors are made only when saved", m->ndeferred);
	PbSizes s = {0};
	size_t n = pbw_measure(&m->proto->base, &s);
	const struct ModelOrig *o = orig_valid(m, &s);
	uint8_t *buf = NULL;
	int r = 0;
	if (o) {
		n = o->len;
		buf = xmalloc(n ? n : 1);
		memcpy(buf, o->data, n);
	} else {
		r = pack_flat(m->proto, &s, n, &buf);
	}
	pbw_sizes_free(&s);
	if (r < 0) {
		free(buf);
		return -1;
	}
	*data = buf;
	*len = n;
	return 0;
}

/* ---- saving ---- */

enum { TK_INIT, TK_ATTR, TK_SPARSE };

/* one tensor of the model and, while saving, its original state */
typedef struct TRef {
	Onnx__TensorProto *t;
	int kind;                          /* TK_* */
	int swapped;
	Onnx__TensorProto saved;
	Onnx__StringStringEntryProto ent[3], *entp[3];
	char off[24], len[24];
	void *owned;                       /* bytes to free after saving */
} TRef;

typedef struct TList {
	TRef *v;
	size_t n, cap;
	/* probe: keep no tensor, only note in external whether one lies in
	 * external data (a TRef is 400 bytes: listing silero-vad's 345
	 * tensors to ask that cost 0.17 ms of a 3 ms load, mostly faults) */
	int probe, external;
} TList;

static int is_external(const Onnx__TensorProto *t);

static void tl_add(TList *l, Onnx__TensorProto *t, int kind)
{
	if (!t)
		return;
	if (l->probe) {
		l->external |= is_external(t);
		return;
	}
	if (l->n == l->cap) {
		l->cap = l->cap ? 2 * l->cap : 64;
		l->v = xreallocarray(l->v, l->cap, sizeof *l->v);
	}
	TRef *r = &l->v[l->n++];
	memset(r, 0, sizeof *r);
	r->t = t;
	r->kind = kind;
}

static void collect_graph(TList *l, Onnx__GraphProto *g);

static void collect_nodes(TList *l, Onnx__NodeProto **nodes, size_t n)
{
	for (size_t i = 0; i < n; i++)
		for (size_t j = 0; j < nodes[i]->n_attribute; j++) {
			Onnx__AttributeProto *a = nodes[i]->attribute[j];
			tl_add(l, a->t, TK_ATTR);
			for (size_t k = 0; k < a->n_tensors; k++)
				tl_add(l, a->tensors[k], TK_ATTR);
			if (a->sparse_tensor) {
				tl_add(l, a->sparse_tensor->values, TK_SPARSE);
				tl_add(l, a->sparse_tensor->indices, TK_SPARSE);
			}
			for (size_t k = 0; k < a->n_sparse_tensors; k++) {
				tl_add(l, a->sparse_tensors[k]->values, TK_SPARSE);
				tl_add(l, a->sparse_tensors[k]->indices, TK_SPARSE);
			}
			if (a->g)
				collect_graph(l, a->g);
			for (size_t k = 0; k < a->n_graphs; k++)
				collect_graph(l, a->graphs[k]);
		}
}

static void collect_graph(TList *l, Onnx__GraphProto *g)
{
	if (!g)
		return;
	for (size_t i = 0; i < g->n_initializer; i++)
		tl_add(l, g->initializer[i], TK_INIT);
	for (size_t i = 0; i < g->n_sparse_initializer; i++) {
		tl_add(l, g->sparse_initializer[i]->values, TK_SPARSE);
		tl_add(l, g->sparse_initializer[i]->indices, TK_SPARSE);
	}
	collect_nodes(l, g->node, g->n_node);
}

static void collect_model(TList *l, Onnx__ModelProto *p)
{
	collect_graph(l, p->graph);
	for (size_t i = 0; i < p->n_training_info; i++) {
		collect_graph(l, p->training_info[i]->initialization);
		collect_graph(l, p->training_info[i]->algorithm);
	}
	for (size_t i = 0; i < p->n_functions; i++)
		collect_nodes(l, p->functions[i]->node, p->functions[i]->n_node);
}

static int is_external(const Onnx__TensorProto *t)
{
	return t->has_data_location &&
	       t->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
}

/* make r's tensor carry (data, len) as raw_data until restored */
static void swap_inline(TRef *r, const void *data, size_t len)
{
	Onnx__TensorProto *t = r->t;
	r->saved = *t;
	r->swapped = 1;
	t->n_external_data = 0;
	t->external_data = NULL;
	t->has_data_location = 0;
	t->data_location = ONNX__TENSOR_PROTO__DATA_LOCATION__DEFAULT;
	t->has_raw_data = 1;
	t->raw_data.data = (uint8_t *)data;
	t->raw_data.len = len;
}

/* make r's tensor point at (loc, off, len) until restored */
static void swap_external(TRef *r, const char *loc, uint64_t off, size_t len)
{
	Onnx__TensorProto *t = r->t;
	r->saved = *t;
	r->swapped = 1;
	snprintf(r->off, sizeof r->off, "%llu", (unsigned long long)off);
	snprintf(r->len, sizeof r->len, "%zu", len);
	const char *kv[3][2] = {{"location", loc}, {"offset", r->off}, {"length", r->len}};
	for (int i = 0; i < 3; i++) {
		onnx__string_string_entry_proto__init(&r->ent[i]);
		r->ent[i].key = (char *)kv[i][0];
		r->ent[i].value = (char *)kv[i][1];
		r->entp[i] = &r->ent[i];
	}
	t->n_external_data = 3;
	t->external_data = r->entp;
	t->has_data_location = 1;
	t->data_location = ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
	t->has_raw_data = 0;
	t->raw_data.data = NULL;
	t->raw_data.len = 0;
	t->n_float_data = t->n_int32_data = t->n_int64_data = 0;
	t->n_double_data = t->n_uint64_data = 0;
}

static void restore_all(TList *l)
{
	for (size_t i = 0; i < l->n; i++) {
		TRef *r = &l->v[i];
		if (r->swapped)
			*r->t = r->saved;
		r->swapped = 0;
		free(r->owned);
		r->owned = NULL;
	}
}

/* the deferred tensor whose raw_data model_save pointed at its entry of
 * m->deferred (an address no tensor's bytes can have), or NULL for real
 * bytes: pbwrite hands such a field's data pointer over as it is */
static const ModelDeferred *deferred_marked(const Model *m, const uint8_t *data)
{
	if (!m || !m->ndeferred)
		return NULL;
	uintptr_t p = (uintptr_t)data, a = (uintptr_t)m->deferred;
	if (p < a || p >= a + m->ndeferred * sizeof *m->deferred || (p - a) % sizeof *m->deferred)
		return NULL;
	return &m->deferred[(p - a) / sizeof *m->deferred];
}

/* PbSink that writes to an OutFile, hashing what it writes (so that the
 * cache, storing the file, need not read it back: hash_note_fd) */
typedef struct FileSink {
	OutFile *f;
	const Model *m;   /* whose deferred tensors are made as they are reached */
	HashState *h;
	int failed;       /* after error() */
} FileSink;

static int file_put(FileSink *b, const uint8_t *data, size_t len)
{
	const ModelDeferred *d = deferred_marked(b->m, data);
	if (d) {
		/* made now, written and freed: one such tensor held at a time */
		void *buf = xmalloc(len);
		int r = d->fill(d->ud, d->t, buf, len) < 0 ? -1 : outfile_write(b->f, buf, len);
		if (r == 0)
			hash_update(b->h, buf, len);
		free(buf);
		return r;
	}
	if (!data)
		return error("model serialization: %zu bytes of a tensor are nowhere", len);
	hash_update(b->h, data, len);
	return outfile_write(b->f, data, len);
}

static int file_sink(void *ud, const uint8_t *data, size_t len)
{
	FileSink *b = ud;
	if (file_put(b, data, len) < 0)
		b->failed = 1;
	return b->failed ? -1 : 0;
}

/* p, measured into s, streamed into f in pieces of 64 KiB (each page of
 * the buffer is a fault the first time it is written) and tensors of
 * 16 KiB or more written from where they are */
static int write_model(const Model *m, const Onnx__ModelProto *p, const PbSizes *s, OutFile *f)
{
	FileSink b = {.f = f, .m = m, .h = hash_new()};
	PbStream st = {.sink = file_sink, .ud = &b, .bufsize = 1 << 16};
	if (m->ndeferred) {
		st.lo = m->deferred;
		st.hi = m->deferred + m->ndeferred;
	}
	int r = pbw_write(&p->base, s, &st);
	Hash h = hash_final(b.h);
	if (r < 0 && !b.failed)
		return error("model serialization: '%s' does not encode as measured", f->path);
	if (b.failed)
		return -1;
	hash_note_fd(f->fd, h);
	return 0;
}

/* output data files by location, for the save in progress */
typedef struct OutSet {
	char **loc;
	OutFile *f;
	size_t n;
} OutSet;

static OutFile *outset_get(OutSet *s, const char *dir, const char *loc)
{
	for (size_t i = 0; i < s->n; i++)
		if (!strcmp(s->loc[i], loc))
			return &s->f[i];
	char *path = path_join(dir, loc);
	if (strchr(loc, '/')) {
		char *pd = path_dir(path);
		int r = mkdirs(pd);
		free(pd);
		if (r < 0) {
			free(path);
			return NULL;
		}
	}
	OutFile f = {.fd = -1};
	int r = outfile_open(&f, path);
	free(path);
	if (r < 0)
		return NULL;
	s->loc = xreallocarray(s->loc, s->n + 1, sizeof *s->loc);
	s->f = xreallocarray(s->f, s->n + 1, sizeof *s->f);
	s->loc[s->n] = xstrdup(loc);
	s->f[s->n] = f;
	return &s->f[s->n++];
}

/* take f (committed with the others) as the output for loc */
static void outset_add(OutSet *s, const char *loc, OutFile *f)
{
	s->loc = xreallocarray(s->loc, s->n + 1, sizeof *s->loc);
	s->f = xreallocarray(s->f, s->n + 1, sizeof *s->f);
	s->loc[s->n] = xstrdup(loc);
	s->f[s->n++] = *f;
}

static void outset_free(OutSet *s, int abort)
{
	for (size_t i = 0; i < s->n; i++) {
		if (abort)
			outfile_abort(&s->f[i]);
		free(s->loc[i]);
	}
	free(s->loc);
	free(s->f);
	memset(s, 0, sizeof *s);
}

static int same_dir(const char *a, const char *b)
{
	struct stat sa, sb;
	if (!strcmp(a, b))
		return 1;
	if (stat(a, &sa) < 0 || stat(b, &sb) < 0)
		return 0;
	return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

static size_t align_up(size_t off, size_t len)
{
	size_t a = len >= (1u << 16) ? 4096 : 64;
	return (off + a - 1) / a * a;
}

/* bytes of a tensor that can live in external data, or -1 */
static int64_t ext_eligible(const Onnx__TensorProto *t)
{
	int dt = t->has_data_type ? t->data_type : 0;
	if (dt <= 0 || dt >= DT_MAX || dtype_bits(dt) == 0 || t->segment)
		return -1;
	int64_t n = tensor_proto_numel(t);
	if (n < 0 || n > INT64_MAX / 16)
		return -1;
	return (int64_t)dtype_nbytes(dt, n);
}

enum { SAVE_KEEP, SAVE_INLINE, SAVE_EXTERNAL };

/* source data files opened for copying, by location */
typedef struct SrcSet {
	char **loc, **path;
	int *fd;
	size_t n;
} SrcSet;

static int srcset_fd(SrcSet *s, const char *dir, const char *loc, const char **path)
{
	for (size_t i = 0; i < s->n; i++)
		if (!strcmp(s->loc[i], loc)) {
			*path = s->path[i];
			return s->fd[i];
		}
	char *p = path_join(dir, loc);
	int fd = open(p, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		error("cannot open external data '%s':", p);
		free(p);
		return -1;
	}
	s->loc = xreallocarray(s->loc, s->n + 1, sizeof *s->loc);
	s->path = xreallocarray(s->path, s->n + 1, sizeof *s->path);
	s->fd = xreallocarray(s->fd, s->n + 1, sizeof *s->fd);
	s->loc[s->n] = xstrdup(loc);
	s->path[s->n] = p;
	s->fd[s->n] = fd;
	*path = p;
	return s->fd[s->n++];
}

static void srcset_free(SrcSet *s)
{
	for (size_t i = 0; i < s->n; i++) {
		close(s->fd[i]);
		free(s->loc[i]);
		free(s->path[i]);
	}
	free(s->loc);
	free(s->path);
	free(s->fd);
	memset(s, 0, sizeof *s);
}

/* copy external tensor t's bytes (already checked by model_tensor_bytes)
 * from its file into f at off; 1 when t has no usable location */
static int copy_from_source(Model *m, SrcSet *srcs, const Onnx__TensorProto *t, OutFile *f,
			    uint64_t off)
{
	ExtInfo info;
	if (ext_info(t, &info) < 0 || info.length < 0)
		return 1;
	const char *sp;
	int fd = srcset_fd(srcs, m->dir, info.location, &sp);
	if (fd < 0)
		return -1;
	return ext_copy_range(fd, sp, (uint64_t)info.offset, f->fd, f->path, off, (uint64_t)info.length);
}

/* one referenced range of a data file, and the tensor that refers to it */
typedef struct XRange {
	uint64_t off, len;
	TRef *r;
} XRange;

static int cmp_xrange(const void *a, const void *b)
{
	const XRange *x = a, *y = b;
	if (x->off != y->off)
		return x->off < y->off ? -1 : 1;
	return x->len < y->len ? -1 : x->len > y->len;
}

/* Bring one data file of an unchanged-location model to outdir. How is
 * decided from the model and the file's size alone, so the result is the
 * same on every machine:
 *  - the tensors cover the file but for alignment gaps (under 4 KiB each):
 *    the file as it is, hard-linked when ext_allow_links permits (a stage
 *    that keeps its input's weights writes nothing), else copied whole;
 *  - the model changed since it was loaded and more than half of a file
 *    over 1 MiB is referenced by nothing (quantize replaced most weights):
 *    the referenced tensors only, packed anew, and the model points at
 *    their new offsets;
 *  - otherwise every referenced range at its old offset, gaps as holes, so
 *    an unchanged model's own bytes stay the same.
 * Copies go through copy_file_range: the bytes never pass through this
 * process's memory. */
static int keep_one(Model *m, TList *l, XRange *v, size_t n, const char *loc, const char *outdir,
		    OutSet *os, SrcSet *srcs)
{
	const char *sp;
	int fd = srcset_fd(srcs, m->dir, loc, &sp);
	if (fd < 0)
		return -1;
	struct stat st;
	if (fstat(fd, &st) < 0)
		return error("cannot stat external data '%s':", sp);
	uint64_t size = (uint64_t)st.st_size, covered = 0, end = 0, maxgap = 0;
	qsort(v, n, sizeof *v, cmp_xrange);
	for (size_t i = 0; i < n; i++) {
		if (v[i].off > end && v[i].off - end > maxgap)
			maxgap = v[i].off - end;
		uint64_t e = v[i].off + v[i].len;
		if (e > end) {
			covered += e - (v[i].off > end ? v[i].off : end);
			end = e;
		}
	}
	if (size > end && size - end > maxgap)
		maxgap = size - end;
	if (maxgap < 4096) {
		char *dst = path_join(outdir, loc);
		OutFile f = {.fd = -1};
		int r = ext_linkable(fd) ? outfile_link(&f, dst, sp) : 1;
		if (r == 1 && (r = outfile_open(&f, dst)) == 0)
			r = ext_copy_range(fd, sp, 0, f.fd, dst, 0, size);
		free(dst);
		if (r < 0) {
			outfile_abort(&f);
			return -1;
		}
		outset_add(os, loc, &f);
		return 0;
	}
	OutFile *f = outset_get(os, outdir, loc);
	if (!f)
		return -1;
	if (size > (1u << 20) && size - covered > size / 2 && !unchanged(m)) {
		const char *keep = os->loc[f - os->f];  /* lives until the save ends */
		/* in model order, so the packing follows the model */
		uint64_t off = 0;
		for (size_t i = 0; i < l->n; i++) {
			TRef *r = &l->v[i];
			XRange *x = NULL;
			for (size_t j = 0; j < n && !x; j++)
				if (v[j].r == r)
					x = &v[j];
			if (!x)
				continue;
			off = align_up(off, x->len);
			if (ext_copy_range(fd, sp, x->off, f->fd, f->path, off, x->len) < 0)
				return -1;
			swap_external(r, keep, off, x->len);
			off += x->len;
		}
		return 0;
	}
	for (size_t i = 0; i < n; i++)
		if (ext_copy_range(fd, sp, v[i].off, f->fd, f->path, v[i].off, v[i].len) < 0)
			return -1;
	return 0;
}

/* write the data files of a model saved unchanged into another directory */
static int keep_external(Model *m, TList *l, const char *outdir, OutSet *os, SrcSet *srcs)
{
	XRange *v = xcalloc(l->n + 1, sizeof *v);
	const char **locs = xcalloc(l->n + 1, sizeof *locs);
	size_t nloc = 0;
	int ret = -1;
	for (size_t i = 0; i < l->n; i++) {
		const Onnx__TensorProto *t = l->v[i].t;
		if (!is_external(t))
			continue;
		ExtInfo info;
		const void *data;
		size_t len;
		int owned;
		/* checks the location, the length against the dims and the
		 * range against the file (mapped, not read) */
		if (ext_info(t, &info) < 0 || model_tensor_bytes(m, t, &data, &len, &owned) < 0)
			goto out;
		size_t k = 0;
		while (k < nloc && strcmp(locs[k], info.location))
			k++;
		if (k == nloc)
			locs[nloc++] = info.location;
	}
	for (size_t k = 0; k < nloc; k++) {
		size_t n = 0;
		for (size_t i = 0; i < l->n; i++) {
			ExtInfo info;
			if (!is_external(l->v[i].t) || ext_info(l->v[i].t, &info) < 0 ||
			    strcmp(info.location, locs[k]))
				continue;
			v[n].off = (uint64_t)info.offset;
			v[n].len = dtype_nbytes(l->v[i].t->data_type, tensor_proto_numel(l->v[i].t));
			v[n].r = &l->v[i];
			n++;
		}
		/* locs[k] is borrowed from a tensor that keep_one may swap */
		char *loc = xstrdup(locs[k]);
		int r = keep_one(m, l, v, n, loc, outdir, os, srcs);
		free(loc);
		if (r < 0)
			goto out;
	}
	ret = 0;
out:
	free(v);
	free(locs);
	return ret;
}


/* does a tensor of p lie in external data? */
static int has_external(Onnx__ModelProto *p)
{
	TList l = {.probe = 1};
	collect_model(&l, p);
	return l.external;
}

uint64_t model_external_bytes(const Model *m)
{
	TList l = {0};
	collect_model(&l, m->proto);
	uint64_t n = 0;
	for (size_t i = 0; i < l.n; i++) {
		ExtInfo info;
		if (is_external(l.v[i].t) && ext_info(l.v[i].t, &info) == 0 && info.length > 0)
			n += (uint64_t)info.length;
	}
	free(l.v);
	return n;
}

int model_save(Model *m, const char *path, const SaveOpts *opts)
{
	int mode = SAVE_KEEP;
	if (opts && opts->external_threshold > 0)
		mode = SAVE_EXTERNAL;
	else if (opts && opts->inline_all)
		mode = SAVE_INLINE;
	/* A rewrite that made the model too big for one protobuf message (fp16
	 * or int8 tensors of an external-data model, now inline) goes out with
	 * its tensors of 1 KiB and more in PATH.data, as onnx.save would need
	 * to be told to: a big model is never refused for its size alone. */
	SaveOpts big = {.external_threshold = 1024};
	PbSizes sz = {0};
	size_t size = mode == SAVE_KEEP ? pbw_measure(&m->proto->base, &sz) : 0;
	if (mode == SAVE_KEEP && size > INT32_MAX && !orig_valid(m, &sz)) {
		opts = &big;
		mode = SAVE_EXTERNAL;
	}
	char *outdir = path_dir(path);
	const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
	char *extname = NULL;
	TList l = {0};
	OutSet os = {0};
	SrcSet srcs = {0};
	OutFile mf = {.fd = -1};
	int ret = -1;

	if (!*base) {
		error("cannot save model to '%s': not a file name", path);
		goto out;
	}
	if (mode == SAVE_EXTERNAL) {
		extname = opts->external_name ? xstrdup(opts->external_name)
					      : xasprintf("%s.data", base);
		if (strchr(extname, '/') || !strcmp(extname, ".") || !strcmp(extname, "..") ||
		    !*extname) {
			error("external data name '%s' must be a plain file name (it is stored beside the model)",
			      extname);
			goto out;
		}
		if (!strcmp(extname, base)) {
			error("external data name '%s' is the model's own file name", extname);
			goto out;
		}
	}
	/* the tensors to move, make or bring along: none for a model kept
	 * as it is without deferred or external ones (the list itself cost
	 * silero-vad's saves 0.15 ms of page faults) */
	if (mode != SAVE_KEEP || m->ndeferred || has_external(m->proto))
		collect_model(&l, m->proto);
	if (mode == SAVE_KEEP && !same_dir(outdir, m->dir) && keep_external(m, &l, outdir, &os, &srcs) < 0) {
		error_prefix("cannot save '%s'", path);
		goto out;
	}
	uint64_t extoff = 0;
	OutFile *xf = NULL;
	for (size_t i = 0; i < l.n; i++) {
		TRef *r = &l.v[i];
		Onnx__TensorProto *t = r->t;
		int ext = is_external(t);
		const void *data;
		size_t len;
		int owned;
		/* a deferred tensor is made when it is written: to a data file
		 * here, or inline by write_model, which meets its raw_data
		 * pointed at its entry of m->deferred; either way it is freed
		 * at once */
		const ModelDeferred *d = deferred_of(m, t);
		int def = d != NULL;
		if (mode == SAVE_KEEP && !def)
			continue;
		int64_t nb = ext_eligible(t);
		int out_ext = mode == SAVE_EXTERNAL && nb >= 0 &&
			      (uint64_t)nb >= (uint64_t)opts->external_threshold &&
			      (r->kind == TK_INIT || ext);
		if (!out_ext && !ext && !def)
			continue;
		if (def && !out_ext) {
			swap_inline(r, d, t->raw_data.len);
			continue;
		}
		if (model_tensor_bytes(m, t, &data, &len, &owned) < 0) {
			error_prefix("cannot save '%s'", path);
			goto out;
		}
		if (owned)
			r->owned = (void *)data;
		if (!out_ext) {
			swap_inline(r, data, len);
			continue;
		}
		if (!xf && !(xf = outset_get(&os, outdir, extname)))
			goto out;
		extoff = align_up(extoff, len);
		/* bytes already in a file are copied by the kernel, without
		 * faulting them into this process through the mapping */
		int cr = ext ? copy_from_source(m, &srcs, t, xf, extoff) : 1;
		if (cr < 0 || (cr == 1 && outfile_pwrite(xf, data, len, extoff) < 0)) {
			error_prefix("cannot save '%s'", path);
			goto out;
		}
		swap_external(r, extname, extoff, len);
		extoff += len;
		free(r->owned);
		r->owned = NULL;
	}
	int swapped = 0;
	for (size_t i = 0; i < l.n; i++)
		swapped |= l.v[i].swapped;
	if (swapped || mode != SAVE_KEEP)
		size = pbw_measure(&m->proto->base, &sz);
	const struct ModelOrig *o = swapped ? NULL : orig_valid(m, &sz);
	if (o)
		size = o->len;
	if (size > INT32_MAX) {
		error("cannot save '%s': the model is %zu bytes, over protobuf's 2 GiB limit; store large tensors as external data (quantmake convert --external-data)",
		      path, size);
		goto out;
	}
	if (outfile_open(&mf, path) < 0)
		goto out;
	if (o ? outfile_write(&mf, o->data, o->len) < 0 : write_model(m, m->proto, &sz, &mf) < 0)
		goto out;
	if (o)
		hash_note_fd(mf.fd, hash_buf(o->data, o->len));
	for (size_t i = 0; i < os.n; i++)
		if (outfile_commit(&os.f[i]) < 0)
			goto out;
	if (outfile_commit(&mf) < 0)
		goto out;
	ret = 0;
out:
	restore_all(&l);
	free(l.v);
	pbw_sizes_free(&sz);
	outfile_abort(&mf);
	outset_free(&os, 1);
	srcset_free(&srcs);
	free(extname);
	free(outdir);
	return ret;
}

int64_t model_opset(const Onnx__ModelProto *m, const char *domain)
{
	int dflt = !domain || !*domain || !strcmp(domain, "ai.onnx");
	for (size_t i = 0; i < m->n_opset_import; i++) {
		const char *d = m->opset_import[i]->domain;
		int idflt = !d || !*d || !strcmp(d, "ai.onnx");
		if ((dflt && idflt) || (!dflt && d && !strcmp(d, domain)))
			return m->opset_import[i]->version;
	}
	return 0;
}

int64_t tensor_proto_numel(const Onnx__TensorProto *t)
{
	int64_t n = 1;
	for (size_t i = 0; i < t->n_dims; i++) {
		if (t->dims[i] < 0 || (t->dims[i] && n > INT64_MAX / t->dims[i]))
			return -1;
		n *= t->dims[i];
	}
	return n;
}

static int read_external(Model *m, const Onnx__TensorProto *t, size_t want, const void **out)
{
	const char *name = t->name ? t->name : "";
	ExtInfo info;
	if (ext_info(t, &info) < 0)
		return -1;
	if (info.length >= 0 && (uint64_t)info.length != (uint64_t)want)
		return error("tensor '%s': external data length %lld, expected %zu bytes for its type and dims",
			     name, (long long)info.length, want);
	const uint8_t *base;
	size_t size;
	if (ext_map(&m->ext, m->dir, info.location, &base, &size) < 0)
		return error_prefix("tensor '%s'", name);
	if ((uint64_t)info.offset > size || want > size - (uint64_t)info.offset)
		return error("tensor '%s': external data '%s' has %zu bytes, expected at least offset %lld + %zu",
			     name, info.location, size, (long long)info.offset, want);
	*out = want ? base + info.offset : (const void *)"";
	return 0;
}

int model_tensor_bytes(Model *m, const Onnx__TensorProto *t, const void **data,
		       size_t *len, int *owned)
{
	const char *name = t->name ? t->name : "";
	int dt = t->has_data_type ? t->data_type : 0;
	int64_t n = tensor_proto_numel(t);
	if (n < 0)
		return error("tensor '%s': invalid dims", name);
	if (dt <= 0 || dt >= DT_MAX || dt == DT_STRING || dtype_bits(dt) == 0)
		return error("tensor '%s': unsupported data type %d (%s)", name, dt, dtype_name(dt));
	if (dtype_bits(dt) >= 8 && (uint64_t)n > SIZE_MAX / (uint64_t)(dtype_bits(dt) / 8))
		return error("tensor '%s': %lld %s elements do not fit in memory", name, (long long)n,
			     dtype_name(dt));
	size_t want = dtype_nbytes(dt, n);
	*owned = 0;
	*len = want;
	const ModelDeferred *d = m ? deferred_of(m, t) : NULL;
	if (d) {
		void *buf = xmalloc(want ? want : 1);
		if (d->fill(d->ud, t, buf, want) < 0) {
			free(buf);
			return -1;
		}
		*data = buf;
		*owned = 1;
		return 0;
	}
	if (t->has_data_location && t->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL) {
		return read_external(m, t, want, data);
	}
	if (t->has_raw_data) {
		if (t->raw_data.len != want)
			return error("tensor '%s': raw_data has %zu bytes, expected %zu for %lld %s elements",
				     name, t->raw_data.len, want, (long long)n, dtype_name(dt));
		*data = t->raw_data.data;
		return 0;
	}
	uint8_t *buf = xcalloc(want ? want : 1, 1);
	size_t have = 0;
	int bits = dtype_bits(dt);
	switch (dt) {
	case DT_FLOAT:
	case DT_COMPLEX64:
		have = t->n_float_data * 4;
		if (have == want && want)
			memcpy(buf, t->float_data, want);
		break;
	case DT_DOUBLE:
	case DT_COMPLEX128:
		have = t->n_double_data * 8;
		if (have == want && want)
			memcpy(buf, t->double_data, want);
		break;
	case DT_INT64:
		have = t->n_int64_data * 8;
		if (have == want && want)
			memcpy(buf, t->int64_data, want);
		break;
	case DT_UINT32:
	case DT_UINT64:
		have = t->n_uint64_data * (size_t)(bits / 8);
		if (have == want)
			for (size_t i = 0; i < t->n_uint64_data; i++) {
				if (dt == DT_UINT32) {
					uint32_t v = (uint32_t)t->uint64_data[i];
					memcpy(buf + 4 * i, &v, 4);
				} else
					memcpy(buf + 8 * i, &t->uint64_data[i], 8);
			}
		break;
	default: /* int32_data carries all narrower types, 4-bit ones packed in pairs */
		if (bits == 4) {
			have = t->n_int32_data;
			if (have == want)
				for (size_t i = 0; i < have; i++)
					buf[i] = (uint8_t)t->int32_data[i];
		} else {
			have = t->n_int32_data * (size_t)(bits / 8);
			if (have == want)
				for (size_t i = 0; i < t->n_int32_data; i++) {
					int32_t v = t->int32_data[i];
					if (bits == 8)
						buf[i] = (uint8_t)v;
					else if (bits == 16) {
						uint16_t h = (uint16_t)v;
						memcpy(buf + 2 * i, &h, 2);
					} else
						memcpy(buf + 4 * i, &v, 4);
				}
		}
		break;
	}
	if (have != want) {
		free(buf);
		return error("tensor '%s': holds %zu bytes of data, expected %zu for %lld %s elements",
			     name, have, want, (long long)n, dtype_name(dt));
	}
	*data = buf;
	*owned = 1;
	return 0;
}
