/* model.h — ONNX models in memory: load, save, external data, lookups.
 *
 * A Model wraps the protobuf-c message generated from the system's onnx.proto
 * (generated into the object directory, never committed). Fields that onnx.proto of the
 * build machine does not know are kept by protobuf-c as unknown fields and
 * written back unchanged, so an unmodified model round-trips byte for byte.
 * All functions return 0 or -1 after error() (see util.h). */
#ifndef QM_ONNX_MODEL_H
#define QM_ONNX_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "onnx.pb-c.h"

/* Element types newer than some onnx.proto versions; the wire value is an
 * int32 so they pass through protobuf-c regardless. */
enum {
	DT_UNDEFINED = 0, DT_FLOAT = 1, DT_UINT8 = 2, DT_INT8 = 3, DT_UINT16 = 4,
	DT_INT16 = 5, DT_INT32 = 6, DT_INT64 = 7, DT_STRING = 8, DT_BOOL = 9,
	DT_FLOAT16 = 10, DT_DOUBLE = 11, DT_UINT32 = 12, DT_UINT64 = 13,
	DT_COMPLEX64 = 14, DT_COMPLEX128 = 15, DT_BFLOAT16 = 16,
	DT_FLOAT8E4M3FN = 17, DT_FLOAT8E4M3FNUZ = 18, DT_FLOAT8E5M2 = 19,
	DT_FLOAT8E5M2FNUZ = 20, DT_UINT4 = 21, DT_INT4 = 22, DT_FLOAT4E2M1 = 23,
	DT_MAX = 24
};

/* lower-case ONNX name of an element type ("float", "int8", ...), or "?" */
const char *dtype_name(int dt);
/* type from its name as dtype_name() prints it; -1 if unknown */
int dtype_from_name(const char *name);
/* size in bits of one element (4 for int4), 0 for string/undefined */
int dtype_bits(int dt);
/* bytes needed for n elements of dt (rounded up for 4-bit types) */
size_t dtype_nbytes(int dt, int64_t n);

typedef struct ExtMap ExtMap;

/* A tensor whose bytes are made when they are needed instead of held (see
 * model_defer): fill writes its len bytes into out; 0 or -1 after error() */
typedef int (*TensorFill)(void *ud, const Onnx__TensorProto *t, void *out, size_t len);
typedef struct ModelDeferred {
	const Onnx__TensorProto *t;
	TensorFill fill;
	void (*done)(void *ud);   /* frees ud with the model (may be NULL) */
	void *ud;
} ModelDeferred;

typedef struct Model {
	Onnx__ModelProto *proto;
	char *path;       /* as given to model_load, or NULL */
	char *dir;        /* directory that external data locations are relative to */
	ExtMap *ext;      /* mapped external data files */
	/* the bytes as loaded, kept only when protobuf-c would encode them
	 * differently (packed repeated fields, unknown fields out of order);
	 * saved as they were while the model is unchanged (model.c) */
	struct ModelOrig *orig;
	ModelDeferred *deferred;  /* see model_defer */
	size_t ndeferred;
} Model;

/* Load PATH. Errors read "not an ONNX model: PATH: reason". */
int model_load(const char *path, Model **out);
/* Load PATH to read it, not to save it: without model_load's check of how
 * protobuf-c would encode it (a compare or hash of the whole encoding), so
 * a save of it writes protobuf-c's encoding, not the file's bytes, and
 * copies its external data. */
int model_load_view(const char *path, Model **out);
/* Load PATH for a save that never writes its bytes back unchanged (the
 * model is changed first, or saved only when it has external data): as
 * model_load_view, but as model_load when it has external data, whose
 * files a save may keep as they are. */
int model_load_rewrite(const char *path, Model **out);
/* Parse an in-memory serialized model; dir resolves external data. */
int model_parse(const void *data, size_t len, const char *dir, Model **out);
/* Wrap a proto built in memory (takes ownership). */
Model *model_wrap(Onnx__ModelProto *proto, const char *dir);
void model_free(Model *m);

typedef struct SaveOpts {
	/* move tensors of at least this many bytes to external data (0: never) */
	size_t external_threshold;
	/* file name of the external data, relative to the model's directory */
	const char *external_name;
	/* with external_threshold 0: read every external tensor back into the
	 * model itself (fails when the result passes protobuf's 2 GiB limit) */
	int inline_all;
} SaveOpts;
/* Serialize to PATH atomically (temp + rename). External data referenced by
 * the model is rewritten beside PATH when opts asks for it, or when it was
 * external in the source and PATH is in another directory: then a data file
 * the model still covers is copied whole (hard-linked when
 * ext_allow_links permits), one a changed model uses less than half of is
 * packed anew, else its referenced ranges keep their offsets; bytes are
 * copied file to file (copy_file_range), not through memory. opts may be
 * NULL.
 * An unchanged model is written byte for byte as it was loaded. A result over
 * protobuf's 2 GiB limit is refused with inline_all; otherwise (opts NULL or
 * keeping) its tensors of 1 KiB and more go to PATH.data. m is left as
 * it was: tensors moved in or out while saving are restored afterwards. */
int model_save(Model *m, const char *path, const SaveOpts *opts);
/* bytes of m's tensors stored as external data (what a model's size on disk
 * adds to its .onnx file) */
uint64_t model_external_bytes(const Model *m);
/* Make t, an initializer of m whose type and dims are set, raw_data.len its
 * size in bytes and raw_data.data NULL, a tensor whose bytes fill makes
 * whenever they are read: model_tensor_bytes gives them (owned) and
 * model_save writes them one tensor at a time, so a converter (quantize =
 * fp16) never holds all its results. Only for a model that goes to
 * model_save next: code reading raw_data itself (the interpreter) would see
 * none. done(ud) runs at model_free. */
void model_defer(Model *m, const Onnx__TensorProto *t, TensorFill fill, void (*done)(void *ud), void *ud);
/* Serialize into a malloc'd buffer (no external data handling). */
int model_serialize(const Model *m, uint8_t **data, size_t *len);

/* Opset version imported for DOMAIN ("" or "ai.onnx" = default), or 0. */
int64_t model_opset(const Onnx__ModelProto *m, const char *domain);

/* Bytes of an initializer or attribute tensor in little-endian raw form,
 * whether stored as raw_data, typed fields or external data. *owned is set
 * when the caller must free(*data); otherwise *data stays valid until
 * model_free (external data is mapped, not copied). Checks the length
 * against the dims. */
int model_tensor_bytes(Model *m, const Onnx__TensorProto *t, const void **data,
		       size_t *len, int *owned);
/* Number of elements implied by t->dims (-1 on overflow/negative). */
int64_t tensor_proto_numel(const Onnx__TensorProto *t);

#endif
