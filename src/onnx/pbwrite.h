/* pbwrite.h — protobuf-c messages encoded with every message's size
 * computed once.
 *
 * protobuf-c writes a nested message's length before its bytes, and finds
 * it by computing the message's size, which computes its children's, and
 * so on; packing the children computes theirs again: each message is sized
 * once per level above it (an ONNX model with If bodies nested three deep
 * sizes its innermost tensors five times). pbw_measure walks a message once,
 * bottom-up, and records every message's size in the order pbw_write and
 * pbw_pack then visit them; they write the bytes in one pass. The encoding
 * is protobuf-c's, byte for byte, driven by the same descriptors: fields in
 * descriptor order, optional fields by their has_ flag or pointer, oneofs
 * by their case, packed repeated fields, unknown fields last (checked
 * against protobuf-c by tests/t_onnx_pack.sh). A message with proto3
 * (unlabeled) fields is left to protobuf-c whole; onnx.proto has none. */
#ifndef QM_ONNX_PBWRITE_H
#define QM_ONNX_PBWRITE_H

#include <stddef.h>
#include <stdint.h>

#include <protobuf-c/protobuf-c.h>

/* the sizes of a message and of every message in it, in visiting order */
typedef struct PbSizes {
	size_t *v;
	size_t n, cap;
} PbSizes;

/* Record the sizes of m and its messages into s (emptied first); returns
 * the size of m's encoding, what protobuf_c_message_get_packed_size
 * returns. m must not change until it is written with s. */
size_t pbw_measure(const ProtobufCMessage *m, PbSizes *s);
void pbw_sizes_free(PbSizes *s);

/* takes the next len bytes of the encoding; 0, or -1 to stop the write */
typedef int (*PbSink)(void *ud, const uint8_t *data, size_t len);

typedef struct PbStream {
	PbSink sink;
	void *ud;
	size_t bufsize;   /* bytes gathered before each call of sink (>= 64) */
	/* a bytes field whose data is NULL or lies in [lo, hi) is handed to
	 * sink as it is, never read here (model_defer's tensors, whose bytes
	 * the sink makes); so is one of bufsize / 4 bytes or more, uncopied */
	const void *lo, *hi;
} PbStream;

/* the in-memory size of one element of a repeated field of type t (what
 * protobuf-c's unpacked arrays hold) */
size_t pbw_elt_size(ProtobufCType t);

/* Encode m, measured into s, through st->sink: 0, or -1 when the sink
 * stopped the write or s does not describe m. */
int pbw_write(const ProtobufCMessage *m, const PbSizes *s, const PbStream *st);
/* Encode m, measured into s as size bytes, into out[0..size): 0, or -1
 * when the encoding does not fill exactly that (s does not describe m). */
int pbw_pack(const ProtobufCMessage *m, const PbSizes *s, uint8_t *out, size_t size);

#endif
