#!/bin/sh
# model_save of a model with subgraphs (If, Loop, Scan bodies), where
# protobuf-c would size nested messages again at every level (pbwrite sizes
# each once), checked here against the onnx package on a model of 3 MB:
# - unchanged, a canonical model and one protobuf-c encodes otherwise (an
#   unknown field first in its graph) come out byte for byte as they went
#   in (`quantmake convert`), the second through the hash of its encoding;
# - changed (infer-shapes adds value_info; weights moved to external data
#   and back), the output is the onnx package's own encoding of what it
#   reads, the model it describes is the input's (with the shapes), and
#   onnxruntime computes the same outputs from it.
. "$(dirname "$0")/lib/common.sh"
mktmp
Q=$QUANTMAKE
if ! "$PY" -c 'import onnx, onnxruntime, numpy' 2>/dev/null; then
	fail "one-piece model saves" "$PY lacks onnx/onnxruntime (run scripts/venv.sh)"
	exit 0
fi
cd "$TMPD" || exit 2

PYTHONPATH="$ROOT/tests/lib" "$PY" - <<'EOF' || fail "one-piece model saves: the models" "mk failed"
import numpy as np, onnx
from onnx import helper as h, TensorProto as T, numpy_helper as nh
rng = np.random.default_rng(3)
def branch(name, w):
    # a body with a 1 MB weight of its own (a Constant) and a MatMul
    c = h.make_node("Constant", [], [name + "_w"], value=nh.from_array(w, name + "_wt"))
    mm = h.make_node("MatMul", ["x", name + "_w"], [name + "_y"])
    return h.make_graph([c, mm], name, [], [h.make_tensor_value_info(name + "_y", T.FLOAT, None)])
wt = rng.standard_normal((256, 1024)).astype(np.float32)
we = rng.standard_normal((256, 1024)).astype(np.float32)
big = rng.standard_normal((1024, 400)).astype(np.float32)     # 1.6 MB
nodes = [
    h.make_node("ReduceSum", ["x"], ["s"], keepdims=0),
    h.make_node("Greater", ["s", "zero"], ["cond"]),
    h.make_node("If", ["cond"], ["b"], then_branch=branch("then", wt), else_branch=branch("else", we)),
    h.make_node("MatMul", ["b", "big"], ["y"]),
]
# fields of every size between the small and the big: a 2000-byte doc
# string, a 1.5 KB tensor (read by nothing)
g = h.make_graph(nodes, "flat", [h.make_tensor_value_info("x", T.FLOAT, [2, 256])],
                 [h.make_tensor_value_info("y", T.FLOAT, [2, 400])],
                 [nh.from_array(np.array(0, np.float32), "zero"), nh.from_array(big, "big"),
                  nh.from_array(rng.standard_normal(384).astype(np.float32), "mid")],
                 doc_string="d" * 2000)
m = h.make_model(g, opset_imports=[h.make_opsetid("", 13)])
m.ir_version = 7
onnx.checker.check_model(m, full_check=True)
data = m.SerializeToString()
open("canon.onnx", "wb").write(data)
# the same model with an unknown field (99) first in its graph: protobuf-c
# keeps it, last
from pbwire import varint
gb = (varint(99 << 3) + varint(7)) + m.graph.SerializeToString()
rest = onnx.ModelProto()
rest.CopyFrom(m)
rest.ClearField("graph")
odd = rest.SerializeToString() + varint(7 << 3 | 2) + varint(len(gb)) + gb
chk = onnx.ModelProto()
chk.ParseFromString(odd)
assert chk.graph.node[2].op_type == "If"
open("odd.onnx", "wb").write(odd)
np.save("x.npy", rng.standard_normal((2, 256)).astype(np.float32))
EOF

for m in canon odd; do
	if "$Q" convert $m.onnx $m-rt.onnx 2> err && cmp -s $m.onnx $m-rt.onnx; then
		pass "an unchanged $m model with subgraphs comes out byte for byte"
	else
		fail "an unchanged $m model with subgraphs comes out byte for byte" "$(head -c 300 err)"
	fi
done

# changed: shapes added; weights out to external data and back
ok=1
"$Q" infer-shapes odd.onnx inf.onnx > /dev/null 2> err || ok=0
"$Q" convert odd.onnx ext.onnx --external-data ext.bin --threshold 4096 2>> err || ok=0
"$Q" convert ext.onnx back.onnx --inline 2>> err || ok=0
[ $ok -eq 1 ] || fail "changed models with subgraphs are saved" "$(head -c 300 err)"
"$PY" - <<'EOF'
import numpy as np, onnx, onnxruntime as ort
ort.set_default_logger_severity(3)
ok = lambda name, cond, why="": print(("PASS: " if cond else "FAIL: ") + name + ("" if cond else ": " + str(why)))
def canon(path):
    # the onnx package's encoding of what it reads from path
    return onnx.load(path).SerializeToString()
x = np.load("x.npy")
run = lambda p: ort.InferenceSession(p, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
ref = run("canon.onnx")
for path, what in (("inf.onnx", "infer-shapes"), ("back.onnx", "external data and back")):
    data = open(path, "rb").read()
    ok("%s: the saved bytes are the onnx package's encoding of them" % what, canon(path) == data)
    m = onnx.load(path)
    onnx.checker.check_model(m)
    # the model itself is the input's, but for the shapes infer-shapes adds
    a, b = onnx.load("odd.onnx"), onnx.load(path)
    for g in (a.graph, b.graph):
        del g.value_info[:]
        for n in g.node:
            for at in n.attribute:
                if at.HasField("g"):
                    del at.g.value_info[:]
                    del at.g.output[:]
        del g.output[:]
    ok("%s: the same model as went in" % what,
       a.SerializeToString(deterministic=True) == b.SerializeToString(deterministic=True))
    ok("%s: onnxruntime computes the same outputs" % what, np.array_equal(run(path), ref))
m = onnx.load("inf.onnx")
ok("infer-shapes: the If bodies' tensors are typed",
   all(len(at.g.value_info) + len(at.g.output) > 0 for n in m.graph.node for at in n.attribute if at.HasField("g")))
EOF
