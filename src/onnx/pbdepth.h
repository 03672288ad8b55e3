/* pbdepth.h — how deeply a protobuf message read from a file nests,
 * measured before protobuf-c unpacks it.
 *
 * protobuf-c unpacks a nested message by calling itself, and so do the
 * walkers over what it returns (freeing, encoding, shape inference, the
 * interpreter over If and Loop bodies), so a small file of deeply nested
 * messages (12,000 TypeProto.sequence_type, 3,000 If bodies) overflowed
 * the stack. pb_depth_check reads the wire format without recursion,
 * guided by the same descriptors, and refuses a message past one of the
 * limits below; every message read from a user's file (models, tensors
 * and sequences in .pb files) goes through it first. The limits are
 * documented in doc/quantmake.1 (LIMITS). */
#ifndef QM_ONNX_PBDEPTH_H
#define QM_ONNX_PBDEPTH_H

#include <stddef.h>

#include <protobuf-c/protobuf-c.h>

enum {
	PB_MAX_GRAPHS = 64,   /* graphs inside a graph's nodes (If, Loop, Scan bodies) */
	PB_MAX_TYPES = 256,   /* TypeProto inside TypeProto (sequence, optional, map) */
	PB_MAX_VALUES = 256,  /* SequenceProto, OptionalProto, MapProto inside each other */
	PB_MAX_DEPTH = 1024,  /* messages inside messages, of every kind together */
};

/* 0 when the message of type d encoded in buf[0..len) nests within the
 * limits; -1 with errmsg naming the limit when it does not; 1 when the
 * bytes are not a well-formed encoding (the caller reports that as it
 * reports protobuf-c refusing them). */
int pb_depth_check(const ProtobufCMessageDescriptor *d, const void *buf, size_t len);

#endif
