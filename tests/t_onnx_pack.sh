#!/bin/sh
# src/onnx/pbwrite.c, the encoder model_save, model_serialize and the
# canonical hash use (each message's size computed once), gives protobuf-c's
# bytes: tests/onnx_pack_check.c, built here with AddressSanitizer and UBSan
# when the compiler has them, encodes each message both ways (protobuf-c's
# pack and pack_to_buffer; pbwrite's size, one-piece pack and streamed
# writes) and compares, for
# - random messages of every message type of the system's onnx.proto, and
#   of a proto3 type (unlabeled fields, which pbwrite leaves to protobuf-c)
#   alone and inside a proto2 one;
# - every model and tensor file of ONNX's test data;
# - the bench models and the real models bench/fetch-models.sh keeps in
#   tests/.cache/models (silero-vad, its If-less form, magika), where present;
# - models made here: unknown fields (metadata_props newer than the system's
#   onnx.proto, a field unknown to any), dims encoded packed, external data,
#   If bodies nested three deep with Loop and Scan bodies, sparse
#   initializers, functions and training info; and what quantmake convert
#   and infer-shapes write from them;
# - the files named in ONNX_PACK_EXTRA (space-separated), if set.
. "$(dirname "$0")/lib/common.sh"
mktmp
Q=$QUANTMAKE
mkdir "$TMPD/gen" "$TMPD/lists"

# --- the lists of files ---
if [ -d "$TESTDATA/node" ]; then
	find "$TESTDATA" \( -name '*.onnx' -o -name '*.pb' \) | sort > "$TMPD/lists/testdata.list"
else
	fail "testdata" "$TESTDATA not found (install libonnx-testdata)"
fi
ls "$ROOT"/bench/.cache/*.onnx "$ROOT"/tests/.cache/models/*.onnx "$ROOT"/tests/.cache/models/*/*.onnx \
	2> /dev/null > "$TMPD/lists/real-models.list"
if [ ! -s "$TMPD/lists/real-models.list" ]; then
	rm "$TMPD/lists/real-models.list"
	skip "real-models" "no models in bench/.cache nor tests/.cache/models (bench/fetch-models.sh)"
fi
if [ -n "$ONNX_PACK_EXTRA" ]; then
	for f in $ONNX_PACK_EXTRA; do echo "$f"; done > "$TMPD/lists/extra.list"
fi

if "$PY" -c 'import onnx, numpy' 2> /dev/null; then
	cd "$TMPD" || exit 2
	PYTHONPATH="$ROOT/tests/lib" "$PY" - > mk.err 2>&1 <<'EOF' || fail "made-models" "cannot make the models: $(tail -n 3 mk.err)"
import numpy as np, onnx
from onnx import helper as h, TensorProto as T, numpy_helper as nh
from pbwire import field, varint
rng = np.random.default_rng(7)
f32 = lambda *s: rng.standard_normal(s).astype(np.float32)
vi = lambda n, s: h.make_tensor_value_info(n, T.FLOAT, s)

def model(g, opset=13, **kw):
    m = h.make_model(g, opset_imports=[h.make_opsetid("", opset)], **kw)
    m.ir_version = 8
    return m

# If bodies nested three deep, each with a Constant of its own
def body(name, depth):
    c = h.make_node("Constant", [], [name + "_c"], value=nh.from_array(f32(4, 4), name + "_t"))
    nodes = [c, h.make_node("MatMul", ["x", name + "_c"], [name + "_y"])]
    if depth:
        nodes.append(h.make_node("If", ["cond"], [name + "_z"],
                                 then_branch=body(name + "t", depth - 1), else_branch=body(name + "e", depth - 1)))
        nodes.append(h.make_node("Add", [name + "_y", name + "_z"], [name + "_o"]))
        out = name + "_o"
    else:
        out = name + "_y"
    return h.make_graph(nodes, name, [], [vi(out, None)])
loop_body = h.make_graph(
    [h.make_node("Identity", ["cond_in"], ["cond_out"]), h.make_node("Add", ["v_in", "one"], ["v_out"])],
    "loop", [h.make_tensor_value_info("i", T.INT64, []), h.make_tensor_value_info("cond_in", T.BOOL, []),
             vi("v_in", [4, 4])],
    [h.make_tensor_value_info("cond_out", T.BOOL, []), vi("v_out", [4, 4])],
    [nh.from_array(np.ones((4, 4), np.float32), "one")])
scan_body = h.make_graph([h.make_node("Add", ["s_in", "e"], ["s_out"]), h.make_node("Identity", ["s_out"], ["e_out"])],
                         "scan", [vi("s_in", [4]), vi("e", [4])], [vi("s_out", [4]), vi("e_out", [4])])
nodes = [h.make_node("ReduceSum", ["x"], ["s"], keepdims=0), h.make_node("Greater", ["s", "zero"], ["cond"]),
         h.make_node("If", ["cond"], ["b"], then_branch=body("a", 2), else_branch=body("b", 2)),
         h.make_node("Loop", ["trip", "", "b"], ["l"], body=loop_body),
         h.make_node("Scan", ["zero4", "l"], ["sc", "y"], body=scan_body, num_scan_inputs=1)]
sp = onnx.SparseTensorProto()
sp.values.CopyFrom(nh.from_array(np.array([1.5, -2.0], np.float32), "sp"))
sp.indices.CopyFrom(nh.from_array(np.array([1, 5], np.int64), "sp_idx"))
sp.dims.extend([8])
g = h.make_graph(nodes, "nested", [vi("x", [4, 4])], [vi("y", [4, 4])],
                 [nh.from_array(np.array(0, np.float32), "zero"), nh.from_array(np.zeros(4, np.float32), "zero4"),
                  nh.from_array(np.array(2, np.int64), "trip")], sparse_initializer=[sp], doc_string="d" * 300)
m = model(g, 16)
m.functions.append(h.make_function("custom", "fn", ["a"], ["b"], [h.make_node("Relu", ["a"], ["b"])],
                                   [h.make_opsetid("", 16)], attributes=["alpha"]))
m.opset_import.append(h.make_opsetid("custom", 1))
ti = m.training_info.add()
ti.algorithm.CopyFrom(h.make_graph([h.make_node("Identity", ["zero"], ["z2"])], "alg", [], [vi("z2", [])]))
ti.update_binding.add(key="zero", value="z2")
m.metadata_props.add(key="author", value="t_onnx_pack")
onnx.save(m, "nested.onnx")

# metadata_props on nodes, tensors, graphs and functions: newer than the
# system's onnx.proto, unknown fields to protobuf-c; float8 and int4 data
W = nh.from_array(f32(4, 4), "W")
W.metadata_props.add(key="k", value="v")
n1 = h.make_node("MatMul", ["X", "W"], ["Y"], name="mm")
n1.metadata_props.add(key="a", value="b")
m = model(h.make_graph([n1], "g", [vi("X", ["N", 4])], [vi("Y", ["N", 4])], [W]))
m.graph.metadata_props.add(key="gk", value="gv")
m.graph.initializer.append(h.make_tensor("f8", T.FLOAT8E4M3FN, [3], [1.0, 2.0, 0.5]))
m.graph.initializer.append(h.make_tensor("i4", T.INT4, [3], [1, -2, 7]))
onnx.save(m, "newfields.onnx")

# an unknown field (99) first in the graph and initializer dims packed, as
# proto3 writers put them: protobuf-c keeps the field last and writes the
# dims one by one
m = model(h.make_graph([h.make_node("Add", ["X", "W"], ["Y"])], "g", [vi("X", [2, 3])], [vi("Y", [2, 3])]))
w = nh.from_array(np.arange(6, dtype=np.float32).reshape(2, 3), "W")
del w.dims[:]
init = field(1, 2, varint(2) + varint(3)) + w.SerializeToString()
rest = onnx.GraphProto()
rest.CopyFrom(m.graph)
gb = field(99, 0, varint(7)) + rest.SerializeToString() + field(5, 2, init)
rest = onnx.ModelProto()
rest.CopyFrom(m)
rest.ClearField("graph")
open("odd.onnx", "wb").write(rest.SerializeToString() + field(7, 2, gb))

# weights in external data, typed fields (float_data, int64_data) inline
m = model(h.make_graph([h.make_node("MatMul", ["X", "W1"], ["h"]), h.make_node("Add", ["h", "B"], ["Y"])], "g",
                       [vi("X", [2, 64])], [vi("Y", [2, 32])],
                       [nh.from_array(f32(64, 32), "W1"),
                        h.make_tensor("B", T.FLOAT, [32], f32(32).tolist()),
                        h.make_tensor("I", T.INT64, [3], [-1, 2**40, -2**62])]))
onnx.save(m, "ext.onnx", save_as_external_data=True, location="ext.bin", size_threshold=64)
EOF
	if [ -f ext.onnx ]; then
		: > made.err
		"$Q" convert nested.onnx nested-ext.onnx --external-data nested.bin --threshold 16 2>> made.err
		"$Q" infer-shapes nested.onnx nested-inf.onnx > /dev/null 2>> made.err
		"$Q" convert ext.onnx ext-in.onnx --inline 2>> made.err
		"$Q" convert odd.onnx odd-ext.onnx --external-data odd.bin --threshold 8 2>> made.err
		"$Q" infer-shapes newfields.onnx newfields-inf.onnx > /dev/null 2>> made.err
		ls ./*.onnx | sed "s|^\./|$TMPD/|" > lists/made-models.list
		[ -s made.err ] && fail "made-models" "quantmake: $(head -c 300 made.err)"
	fi
	cd "$ROOT" || exit 2
else
	fail "made-models" "$PY lacks onnx/numpy (run scripts/venv.sh)"
fi

# --- the check, over those lists ---
# the descriptors of every message type, from the header protoc-c writes
if gen_onnx_pb; then
	sed -n 's/^extern const ProtobufCMessageDescriptor \([a-z0-9_]*\);$/\&\1,/p' "$TMPD/gen/onnx.pb-c.h" \
		> "$TMPD/gen/onnx_pack_types.h"
	# proto3 fields (none in onnx.proto), which pbwrite leaves to protobuf-c
	cat > "$TMPD/gen/pack_p3.proto" <<'EOF'
syntax = "proto3";
package qmpack;
message P3 {
  int32 i = 1;
  string s = 2;
  bytes b = 3;
  repeated int64 r = 4;
  P3 child = 5;
  oneof o { sint32 x = 6; string y = 7; }
  double d = 8;
  bool t = 9;
  fixed32 f = 10;
}
EOF
	cat > "$TMPD/gen/pack_mixed.proto" <<'EOF'
syntax = "proto2";
package qmpack;
import "pack_p3.proto";
message Mixed {
  optional P3 one = 1;
  repeated P3 many = 2;
  optional int32 n = 3;
  repeated sint64 z = 4 [packed = true];
}
EOF
	(cd "$TMPD/gen" && protoc-c --c_out=. pack_p3.proto pack_mixed.proto) >> "$TMPD/err" 2>&1 ||
		fail "onnx_pack_check" "cannot compile the proto3 messages: $(head -c 300 "$TMPD/err")"
	ONNX_PACK_LISTS=$(ls "$TMPD"/lists/*.list 2> /dev/null | tr '\n' ':')
	export ONNX_PACK_LISTS
	# shellcheck disable=SC2046
	c_check onnx_pack_check -I"$TMPD/gen" $(pkg-config --cflags libprotobuf-c) "$TMPD/gen/onnx.pb-c.c" \
		"$TMPD/gen/pack_p3.pb-c.c" "$TMPD/gen/pack_mixed.pb-c.c" \
		"$ROOT/src/onnx/pbwrite.c" "$ROOT/src/util.c" $(pkg-config --libs libprotobuf-c)
else
	fail "onnx_pack_check" "cannot generate onnx.pb-c.h: $(head -c 300 "$TMPD/err")"
fi
