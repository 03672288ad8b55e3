/* manifest.c — what a release holds: its entries, their digests (size,
 * XXH3-128, SHA-256 of the bytes as they appear in the archive), and the
 * description and stamp of each released model.
 *
 * A stamp is added to a released model cheaply: protobuf merges a message
 * with fields appended to it, so metadata_props entries (field 14) encoded
 * after the model's unchanged bytes read back as extra properties. Only a
 * model that already carries quantmake.* properties (a re-released release)
 * is parsed, changed and serialized again, so keys stay unique. */
#include "release/release.h"

#include <errno.h>
#include <fcntl.h>
#include <nettle/sha2.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "onnx/model.h"
#include "util.h"

Entry *entry_add(EntryList *l, const char *name, int kind, const char *src)
{
	if (l->n == l->cap) {
		l->cap = l->cap ? l->cap * 2 : 16;
		l->v = xreallocarray(l->v, l->cap, sizeof *l->v);
	}
	Entry *e = &l->v[l->n++];
	memset(e, 0, sizeof *e);
	e->name = xstrdup(name);
	e->kind = kind;
	e->src = src ? xstrdup(src) : NULL;
	return e;
}

Entry *entry_find(EntryList *l, const char *name)
{
	for (size_t i = 0; i < l->n; i++)
		if (!strcmp(l->v[i].name, name))
			return &l->v[i];
	return NULL;
}

static int cmpent(const void *a, const void *b)
{
	return strcmp(((const Entry *)a)->name, ((const Entry *)b)->name);
}

void entries_sort(EntryList *l)
{
	if (l->n)
		qsort(l->v, l->n, sizeof *l->v, cmpent);
}

void entries_free(EntryList *l)
{
	for (size_t i = 0; i < l->n; i++) {
		free(l->v[i].name);
		free(l->v[i].src);
		free(l->v[i].data);
		free(l->v[i].tail);
	}
	free(l->v);
	memset(l, 0, sizeof *l);
}

void *sha_begin(void)
{
	struct sha256_ctx *c = xmalloc(sizeof *c);
	sha256_init(c);
	return c;
}

void sha_add(void *st, const void *p, size_t n)
{
	sha256_update(st, n, p);
}

void sha_end(void *st, uint8_t out[32])
{
	sha256_digest(st, SHA256_DIGEST_SIZE, out);
	free(st);
}

char *sha256_hex(const uint8_t sha[32], char out[65])
{
	static const char hx[] = "0123456789abcdef";
	for (int i = 0; i < 32; i++) {
		out[2 * i] = hx[sha[i] >> 4];
		out[2 * i + 1] = hx[sha[i] & 15];
	}
	out[64] = 0;
	return out;
}

/* ---- digests ---- */

enum { CHUNK = 1 << 20 };

static int digest_one(Entry *e, uint8_t *buf)
{
	struct sha256_ctx sha;
	sha256_init(&sha);
	HashState *all = hash_new();
	if (e->data) {
		hash_update(all, e->data, e->datalen);
		sha256_update(&sha, e->datalen, e->data);
		e->size = (int64_t)e->datalen;
		e->xxh = hash_final(all);
		sha256_digest(&sha, SHA256_DIGEST_SIZE, e->sha);
		return 0;
	}
	int fd = open(e->src, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		hash_final(all);
		return error("cannot open '%s':", e->src);
	}
	posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
	HashState *src = e->has_expect && e->tail ? hash_new() : NULL;
	int64_t size = 0;
	for (;;) {
		ssize_t n = read(fd, buf, CHUNK);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			int err = errno;
			close(fd);
			hash_final(all);
			if (src)
				hash_final(src);
			errno = err;
			return error("cannot read '%s':", e->src);
		}
		if (n == 0)
			break;
		hash_update(all, buf, (size_t)n);
		if (src)
			hash_update(src, buf, (size_t)n);
		sha256_update(&sha, (size_t)n, buf);
		size += n;
	}
	close(fd);
	Hash hsrc = {{0}};
	if (src)
		hsrc = hash_final(src);
	if (e->tail) {
		hash_update(all, e->tail, e->taillen);
		sha256_update(&sha, e->taillen, e->tail);
		size += (int64_t)e->taillen;
	}
	e->size = size;
	e->xxh = hash_final(all);
	sha256_digest(&sha, SHA256_DIGEST_SIZE, e->sha);
	if (!e->tail)
		hsrc = e->xxh;
	if (e->has_expect && !hash_eq(hsrc, e->expect)) {
		char a[HASH_HEX_LEN], b[HASH_HEX_LEN];
		return error("'%s' changed since it was built (XXH3 %s, the build recorded %s): run the release again",
			     e->src, hash_hex(hsrc, a), hash_hex(e->expect, b));
	}
	return 0;
}

typedef struct Pool {
	EntryList *l;
	atomic_size_t next;
	atomic_int failed;
	pthread_mutex_t mu;
	char *msg;            /* first error */
} Pool;

static void *worker(void *arg)
{
	Pool *p = arg;
	uint8_t *buf = xmalloc(CHUNK);
	for (;;) {
		size_t i = atomic_fetch_add(&p->next, 1);
		if (i >= p->l->n || atomic_load(&p->failed))
			break;
		Entry *e = &p->l->v[i];
		if (e->kind != ENT_FILE)
			continue;
		if (digest_one(e, buf) < 0) {
			pthread_mutex_lock(&p->mu);
			if (!p->msg)
				p->msg = xstrdup(errmsg());
			pthread_mutex_unlock(&p->mu);
			atomic_store(&p->failed, 1);
		}
	}
	free(buf);
	return NULL;
}

int entries_digest(EntryList *l, int nthreads)
{
	if (nthreads < 1)
		nthreads = 1;
	if ((size_t)nthreads > l->n)
		nthreads = l->n ? (int)l->n : 1;
	Pool p = {.l = l};
	atomic_init(&p.next, 0);
	atomic_init(&p.failed, 0);
	pthread_mutex_init(&p.mu, NULL);
	pthread_t *t = xcalloc((size_t)nthreads, sizeof *t);
	int started = 0;
	for (int i = 1; i < nthreads; i++) {
		if (pthread_create(&t[i], NULL, worker, &p) != 0)
			break;
		started = i;
	}
	worker(&p);
	for (int i = 1; i <= started; i++)
		pthread_join(t[i], NULL);
	free(t);
	pthread_mutex_destroy(&p.mu);
	if (atomic_load(&p.failed)) {
		error("%s", p.msg);
		free(p.msg);
		return -1;
	}
	return 0;
}

/* ---- stamps ---- */

void stamp_props(const Stamp *s, const char *release, StampProps *out)
{
	memset(out, 0, sizeof *out);
	const char *k[] = {"quantmake.git.commit", "quantmake.git.describe", "quantmake.git.dirty",
			   "quantmake.release", "quantmake.version"};
	char *v[] = {xstrdup(s->commit), xstrdup(s->describe),
		     xstrdup(!s->in_git ? "unknown" : s->dirty ? "true" : "false"), xstrdup(release),
		     xstrdup(QM_VERSION)};
	for (size_t i = 0; i < ARRAY_LEN(k); i++) {
		out->key[i] = k[i];
		out->val[i] = v[i];
	}
	out->n = ARRAY_LEN(k);
}

void stamp_props_free(StampProps *p)
{
	for (size_t i = 0; i < p->n; i++)
		free(p->val[i]);
	memset(p, 0, sizeof *p);
}

static void put_varint(StrBuf *sb, uint64_t v)
{
	while (v >= 0x80) {
		sb_putc(sb, (char)(v | 0x80));
		v >>= 7;
	}
	sb_putc(sb, (char)v);
}

/* a length-delimited field: tag, length, bytes */
static void put_bytes(StrBuf *sb, unsigned field, const char *p, size_t n)
{
	put_varint(sb, (uint64_t)field << 3 | 2);
	put_varint(sb, n);
	sb_add(sb, p, n);
}

/* ModelProto.metadata_props (14) entries of StringStringEntryProto
 * {key = 1, value = 2} */
static void encode_props(const StampProps *props, StrBuf *out)
{
	for (size_t i = 0; i < props->n; i++) {
		StrBuf ent = {0};
		put_bytes(&ent, 1, props->key[i], strlen(props->key[i]));
		put_bytes(&ent, 2, props->val[i], strlen(props->val[i]));
		put_bytes(out, 14, ent.buf, ent.len);
		sb_release(&ent);
	}
}

/* ---- model descriptions ---- */

static json_t *type_json(const Onnx__TypeProto *t, json_t **shape)
{
	*shape = NULL;
	if (!t)
		return json_string("unknown");
	switch (t->value_case) {
	case ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE: {
		const Onnx__TypeProto__Tensor *tt = t->tensor_type;
		if (tt->shape) {
			*shape = json_array();
			for (size_t i = 0; i < tt->shape->n_dim; i++) {
				const Onnx__TensorShapeProto__Dimension *d = tt->shape->dim[i];
				if (d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE)
					json_array_append_new(*shape, json_integer(d->dim_value));
				else if (d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM)
					json_array_append_new(*shape, json_string(d->dim_param));
				else
					json_array_append_new(*shape, json_null());
			}
		}
		return json_string(tt->has_elem_type ? dtype_name(tt->elem_type) : "unknown");
	}
	case ONNX__TYPE_PROTO__VALUE_SPARSE_TENSOR_TYPE:
		return json_string("sparse_tensor");
	case ONNX__TYPE_PROTO__VALUE_SEQUENCE_TYPE:
		return json_string("sequence");
	case ONNX__TYPE_PROTO__VALUE_MAP_TYPE:
		return json_string("map");
	case ONNX__TYPE_PROTO__VALUE_OPTIONAL_TYPE:
		return json_string("optional");
	default:
		return json_string("unknown");
	}
}

static json_t *values_json(Onnx__ValueInfoProto **v, size_t n, const Onnx__GraphProto *g, int skip_inits)
{
	json_t *arr = json_array();
	for (size_t i = 0; i < n; i++) {
		int init = 0;
		for (size_t j = 0; skip_inits && j < g->n_initializer; j++)
			if (v[i]->name && g->initializer[j]->name && !strcmp(v[i]->name, g->initializer[j]->name))
				init = 1;
		if (init)
			continue;
		json_t *o = json_object(), *shape;
		json_object_set_new(o, "name", json_string(v[i]->name ? v[i]->name : ""));
		json_object_set_new(o, "type", type_json(v[i]->type, &shape));
		json_object_set_new(o, "shape", shape ? shape : json_null());
		json_array_append_new(arr, o);
	}
	return arr;
}

static int is_stamp_key(const char *k)
{
	return k && !strncmp(k, "quantmake.", 10);
}

int model_describe_stamp(const char *path, const StampProps *props, json_t *obj, Entry *e)
{
	Model *m;
	if (model_load(path, &m) < 0)
		return -1;
	const Onnx__ModelProto *p = m->proto;
	if (!p->graph) {
		model_free(m);
		return error("not an ONNX model: %s: it has no graph", path);
	}
	json_object_set_new(obj, "ir_version", json_integer(p->has_ir_version ? p->ir_version : 0));
	json_object_set_new(obj, "producer", json_string(p->producer_name ? p->producer_name : ""));
	json_t *ops = json_object();
	for (size_t i = 0; i < p->n_opset_import; i++) {
		const Onnx__OperatorSetIdProto *o = p->opset_import[i];
		const char *d = o->domain && *o->domain ? o->domain : "ai.onnx";
		json_object_set_new(ops, d, json_integer(o->version));
	}
	json_object_set_new(obj, "opset", ops);
	json_object_set_new(obj, "inputs", values_json(p->graph->input, p->graph->n_input, p->graph, 1));
	json_object_set_new(obj, "outputs", values_json(p->graph->output, p->graph->n_output, p->graph, 0));
	int restamp = 0;
	for (size_t i = 0; i < p->n_metadata_props; i++)
		if (is_stamp_key(p->metadata_props[i]->key))
			restamp = 1;
	StrBuf tail = {0};
	if (!restamp) {
		encode_props(props, &tail);
		e->taillen = tail.len;
		e->tail = (uint8_t *)sb_detach(&tail);
		model_free(m);
		return 0;
	}
	/* replace the old quantmake.* properties; keep the others in order */
	Onnx__ModelProto *mp = m->proto;
	Onnx__StringStringEntryProto **old = mp->metadata_props;
	size_t nold = mp->n_metadata_props, n = 0;
	Onnx__StringStringEntryProto **nv = xcalloc(nold + props->n, sizeof *nv);
	Onnx__StringStringEntryProto *mine = xcalloc(props->n, sizeof *mine);
	for (size_t i = 0; i < nold; i++)
		if (!is_stamp_key(old[i]->key))
			nv[n++] = old[i];
	for (size_t i = 0; i < props->n; i++) {
		Onnx__StringStringEntryProto init = ONNX__STRING_STRING_ENTRY_PROTO__INIT;
		mine[i] = init;
		mine[i].key = (char *)props->key[i];
		mine[i].value = props->val[i];
		nv[n++] = &mine[i];
	}
	mp->metadata_props = nv;
	mp->n_metadata_props = n;
	uint8_t *data;
	size_t len;
	int r = model_serialize(m, &data, &len);
	mp->metadata_props = old;
	mp->n_metadata_props = nold;
	free(nv);
	free(mine);
	model_free(m);
	if (r < 0)
		return error_prefix("cannot stamp '%s'", path);
	e->data = data;
	e->datalen = len;
	return 0;
}
