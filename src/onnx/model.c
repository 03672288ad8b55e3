/* model.c — load, save and query ONNX models (see model.h). */
#include "onnx/model.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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

struct ExtMap {
	char *location;
	int fd;
	struct ExtMap *next;
};

int model_parse(const void *data, size_t len, const char *dir, Model **out)
{
	Onnx__ModelProto *p = onnx__model_proto__unpack(NULL, len, data);
	if (!p)
		return error("protobuf parse failed (truncated or not a ModelProto)");
	if (!p->graph) {
		onnx__model_proto__free_unpacked(p, NULL);
		return error("model has no graph");
	}
	if (!p->has_ir_version) {
		onnx__model_proto__free_unpacked(p, NULL);
		return error("model has no ir_version");
	}
	*out = model_wrap(p, dir);
	return 0;
}

int model_load(const char *path, Model **out)
{
	char *data;
	size_t len;
	struct stat st;
	if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
		return error("not an ONNX model: %s: is a directory", path);
	if (read_file(path, &data, &len) < 0)
		return -1;
	char *dir = path_dir(path);
	int r = model_parse(data, len, dir, out);
	free(data);
	free(dir);
	if (r < 0)
		return error_prefix("not an ONNX model: %s", path);
	(*out)->path = xstrdup(path);
	return 0;
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
	for (ExtMap *e = m->ext, *n; e; e = n) {
		n = e->next;
		close(e->fd);
		free(e->location);
		free(e);
	}
	if (m->proto)
		onnx__model_proto__free_unpacked(m->proto, NULL);
	free(m->path);
	free(m->dir);
	free(m);
}

int model_serialize(const Model *m, uint8_t **data, size_t *len)
{
	size_t n = onnx__model_proto__get_packed_size(m->proto);
	uint8_t *buf = xmalloc(n);
	size_t w = onnx__model_proto__pack(m->proto, buf);
	if (w != n) {
		free(buf);
		return error("model serialization wrote %zu of %zu bytes", w, n);
	}
	*data = buf;
	*len = n;
	return 0;
}

int model_save(Model *m, const char *path, const SaveOpts *opts)
{
	(void)opts;
	uint8_t *data;
	size_t len;
	if (model_serialize(m, &data, &len) < 0)
		return -1;
	int r = write_file_atomic(path, data, len);
	free(data);
	return r;
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

static int ext_open(Model *m, const char *location, int *fd)
{
	for (ExtMap *e = m->ext; e; e = e->next)
		if (!strcmp(e->location, location)) {
			*fd = e->fd;
			return 0;
		}
	if (location[0] == '/' || strstr(location, ".."))
		return error("external data location '%s' leaves the model's directory", location);
	char *p = path_join(m->dir, location);
	int f = open(p, O_RDONLY | O_CLOEXEC);
	if (f < 0) {
		error("cannot open external data '%s':", p);
		free(p);
		return -1;
	}
	free(p);
	ExtMap *e = xcalloc(1, sizeof *e);
	e->location = xstrdup(location);
	e->fd = f;
	e->next = m->ext;
	m->ext = e;
	*fd = f;
	return 0;
}

static int read_external(Model *m, const Onnx__TensorProto *t, size_t want, void **out)
{
	const char *loc = NULL;
	int64_t off = 0, len = -1;
	for (size_t i = 0; i < t->n_external_data; i++) {
		const char *k = t->external_data[i]->key, *v = t->external_data[i]->value;
		if (!k || !v)
			continue;
		if (!strcmp(k, "location"))
			loc = v;
		else if (!strcmp(k, "offset"))
			off = strtoll(v, NULL, 10);
		else if (!strcmp(k, "length"))
			len = strtoll(v, NULL, 10);
	}
	if (!loc)
		return error("tensor '%s': external data without location", t->name ? t->name : "");
	if (len >= 0 && (size_t)len != want)
		return error("tensor '%s': external length %lld, expected %zu bytes",
			     t->name ? t->name : "", (long long)len, want);
	int fd = -1;
	if (ext_open(m, loc, &fd) < 0)
		return -1;
	char *buf = xmalloc(want);
	size_t got = 0;
	while (got < want) {
		ssize_t r = pread(fd, buf + got, want - got, off + (off_t)got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			free(buf);
			return error("tensor '%s': external data '%s' is shorter than offset %lld + %zu bytes",
				     t->name ? t->name : "", loc, (long long)off, want);
		}
		got += (size_t)r;
	}
	*out = buf;
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
	size_t want = dtype_nbytes(dt, n);
	*owned = 0;
	*len = want;
	if (t->has_data_location && t->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL) {
		void *buf = NULL;
		if (read_external(m, t, want, &buf) < 0)
			return -1;
		*data = buf;
		*owned = 1;
		return 0;
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
		if (have == want)
			memcpy(buf, t->float_data, want);
		break;
	case DT_DOUBLE:
	case DT_COMPLEX128:
		have = t->n_double_data * 8;
		if (have == want)
			memcpy(buf, t->double_data, want);
		break;
	case DT_INT64:
		have = t->n_int64_data * 8;
		if (have == want)
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
