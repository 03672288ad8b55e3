#!/bin/sh
# The preprocess stage in temporary projects: models built with the onnx
# helper API (Conv/Gemm + BatchNormalization, Identity/Dropout chains,
# constant subgraphs, duplicate initializers, Transpose pairs, If branches,
# random ops, LSTM/GRU zero initial states) and examples/digits go through
# `quantmake` with `preprocess = default`; each result must pass
# onnx.checker (full check), have fewer nodes (or initializers, for dedup),
# keep its graph inputs and outputs, and give onnxruntime's outputs of the
# original on random inputs (rtol 1e-5, atol 1e-5); `quantmake preprocess
# IN OUT` writes the same bytes as the stage. preprocess.json and the log
# carry the counts; bad pass names and fold limits are errors with
# file:line. preprocess.opset
# upgrades old-opset models (libonnx-testdata and built here) to 13 and 17
# with outputs equal in our interpreter and onnxruntime, converts the bodies
# of model-local functions, and refuses what it cannot convert by function,
# operator and node.
. "$(dirname "$0")/lib/common.sh"
mktmp
Q=$QUANTMAKE
if ! "$PY" -c 'import onnx, onnxruntime, numpy' 2>/dev/null; then
	fail preprocess "no python oracles in $PY (scripts/venv.sh)"
	exit 0
fi
P=$TMPD/p
mkdir -p "$P/rules" "$P/models"
cp -r "$ROOT/examples/digits" "$P/digits"

# ---- the models ----
cat > "$TMPD/gen.py" <<'EOF'
import sys, numpy as np, onnx
from onnx import helper as h, TensorProto as T, numpy_helper as nh
out = sys.argv[1]
rng = np.random.default_rng(0)
def f(*s): return rng.standard_normal(s).astype(np.float32)
def init(name, a): return nh.from_array(np.asarray(a), name)
def save(name, nodes, ins, outs, inits, opset=13):
    g = h.make_graph(nodes, name, ins, outs, inits)
    m = h.make_model(g, opset_imports=[h.make_opsetid("", opset)])
    m.ir_version = 8
    onnx.checker.check_model(m, full_check=True)
    onnx.save(m, f"{out}/{name}.onnx")
vi = h.make_tensor_value_info
def bn(prefix, c, x, y, eps=1e-5):
    return [h.make_node("BatchNormalization", [x, prefix+"s", prefix+"b", prefix+"m", prefix+"v"], [y], epsilon=eps)], [
        init(prefix+"s", f(c)), init(prefix+"b", f(c)), init(prefix+"m", f(c)),
        init(prefix+"v", (rng.random(c) + 0.5).astype(np.float32))]
# Conv+BN (with and without bias, grouped), Gemm+BN (2-D bias and none)
n, i = [], [init("w1", f(8, 3, 3, 3)), init("cb1", f(8)), init("w2", f(8, 4, 3, 3)), init("gw", f(10, 8)), init("gc", f(1, 10)), init("gw2", f(10, 10))]
n.append(h.make_node("Conv", ["x", "w1", "cb1"], ["c1"], pads=[1, 1, 1, 1]))
a, b = bn("bn1", 8, "c1", "y1"); n += a; i += b
n.append(h.make_node("Relu", ["y1"], ["r1"]))
n.append(h.make_node("Conv", ["r1", "w2"], ["c2"], group=2))
a, b = bn("bn2", 8, "c2", "y2", 1e-3); n += a; i += b
n.append(h.make_node("GlobalAveragePool", ["y2"], ["p"]))
n.append(h.make_node("Flatten", ["p"], ["fl"]))
n.append(h.make_node("Gemm", ["fl", "gw", "gc"], ["g1"], transB=1, beta=0.5))
a, b = bn("bn3", 10, "g1", "y3"); n += a; i += b
n.append(h.make_node("Gemm", ["y3", "gw2"], ["g2"]))
a, b = bn("bn4", 10, "g2", "out"); n += a; i += b
save("convbn", n, [vi("x", T.FLOAT, ["N", 3, 8, 8])], [vi("out", T.FLOAT, ["N", 10])], i)
# Identity / Dropout chains, graph output through Identity, Dropout with training_mode false
n = [h.make_node("Identity", ["x"], ["a"]), h.make_node("Dropout", ["a"], ["b"]),
     h.make_node("Relu", ["b"], ["c"]), h.make_node("Dropout", ["c", "ratio", "tm"], ["d", "mask"]),
     h.make_node("Identity", ["d"], ["e"]), h.make_node("Sigmoid", ["e"], ["f"]),
     h.make_node("Identity", ["f"], ["y"]), h.make_node("Identity", ["c"], ["y2"]),
     h.make_node("Identity", ["x"], ["y3"]),
     h.make_node("Slice", ["x", "z", "big", "one"], ["s1"]), h.make_node("Slice", ["s1", "z", "five", "one", "one"], ["s2"]),
     h.make_node("Slice", ["s2", "z", "three", "one"], ["y4"])]
save("identity", n, [vi("x", T.FLOAT, [2, 5])], [vi("y", T.FLOAT, [2, 5]), vi("y2", T.FLOAT, [2, 5]), vi("y3", T.FLOAT, [2, 5]), vi("y4", T.FLOAT, [2, 3])],
     [init("ratio", np.float32(0.5)), init("tm", np.bool_(False)), init("z", np.array([0], np.int64)),
      init("big", np.array([2**63 - 1], np.int64)), init("one", np.array([1], np.int64)),
      init("five", np.array([5], np.int64)), init("three", np.array([3], np.int64))])
# constant subgraphs: Constant, arithmetic on initializers, shape chain, dead branch, unused initializer
n = [h.make_node("Constant", [], ["k"], value=nh.from_array(f(4, 6), "k")),
     h.make_node("Transpose", ["wt"], ["wT"], perm=[1, 0]),
     h.make_node("Mul", ["k", "two"], ["k2"]), h.make_node("Add", ["k2", "wT"], ["w"]),
     h.make_node("Concat", ["s0", "s1"], ["shape"], axis=0),
     h.make_node("MatMul", ["x", "w"], ["m"]), h.make_node("Reshape", ["m", "shape"], ["r"]),
     h.make_node("Sqrt", ["two"], ["dead1"]), h.make_node("Exp", ["x"], ["dead2"]),
     h.make_node("Softmax", ["r"], ["y"], axis=-1)]
save("constant", n, [vi("x", T.FLOAT, [3, 4])], [vi("y", T.FLOAT, [3, 2, 3])],
     [init("wt", f(6, 4)), init("two", np.float32(2)), init("s0", np.array([3], np.int64)), init("s1", np.array([2, 3], np.int64)), init("unused", f(100))])
# duplicate initializers
c = f(4)
n = [h.make_node("Add", ["x", "c1"], ["a"]), h.make_node("Mul", ["a", "c2"], ["b"]),
     h.make_node("Add", ["b", "c3"], ["c"]), h.make_node("Sub", ["c", "d1"], ["y"])]
save("dedup", n, [vi("x", T.FLOAT, [2, 4])], [vi("y", T.FLOAT, [2, 4])],
     [init("c1", c), init("c2", c.copy()), init("c3", c.copy()), init("d1", c.reshape(1, 4))])
# Transpose pairs: identity pair, composed pair, identity perm, one with a second reader
n = [h.make_node("Transpose", ["x"], ["t1"], perm=[0, 2, 1, 3]), h.make_node("Transpose", ["t1"], ["t2"], perm=[0, 2, 1, 3]),
     h.make_node("Relu", ["t2"], ["r"]),
     h.make_node("Transpose", ["r"], ["t3"], perm=[0, 2, 3, 1]), h.make_node("Transpose", ["t3"], ["t4"], perm=[1, 0, 2, 3]),
     h.make_node("Transpose", ["t4"], ["t5"], perm=[0, 1, 2, 3]), h.make_node("Sigmoid", ["t5"], ["y"]),
     h.make_node("Transpose", ["x"], ["u1"], perm=[3, 2, 1, 0]), h.make_node("Transpose", ["u1"], ["u2"], perm=[3, 2, 1, 0]),
     h.make_node("Neg", ["u1"], ["y2"]), h.make_node("Add", ["u2", "x"], ["y3"])]
save("transpose", n, [vi("x", T.FLOAT, [2, 3, 4, 5])], [vi("y", T.FLOAT, [4, 2, 5, 3]), vi("y2", T.FLOAT, [5, 4, 3, 2]), vi("y3", T.FLOAT, [2, 3, 4, 5])], [])
# subgraphs: If whose branches hold Identity chains and constant arithmetic
then_g = h.make_graph([h.make_node("Identity", ["x"], ["ti"]), h.make_node("Add", ["k1", "ko"], ["kk"]),
                       h.make_node("Mul", ["ti", "kk"], ["tout"])], "then", [], [vi("tout", T.FLOAT, [3])], [init("k1", np.float32(1.5))])
else_g = h.make_graph([h.make_node("Identity", ["x"], ["ei"]), h.make_node("Neg", ["ei"], ["eout0"]), h.make_node("Identity", ["eout0"], ["eout"])],
                      "else", [], [vi("eout", T.FLOAT, [3])], [])
n = [h.make_node("Identity", ["cond"], ["c"]), h.make_node("If", ["c"], ["y"], then_branch=then_g, else_branch=else_g)]
save("subgraph", n, [vi("x", T.FLOAT, [3]), vi("cond", T.BOOL, [])], [vi("y", T.FLOAT, [3])], [init("ko", np.float32(0.25))])
# never folded: a random op (its output is not constant) and a training-mode Dropout
n = [h.make_node("RandomUniform", [], ["r"], shape=[2, 3], seed=1.0), h.make_node("Mul", ["r", "zero"], ["rz"]),
     h.make_node("Identity", ["rz"], ["rzi"]), h.make_node("Add", ["x", "rzi"], ["a"]),
     h.make_node("Dropout", ["a", "ratio0", "tm1"], ["y"])]
save("random", n, [vi("x", T.FLOAT, [2, 3])], [vi("y", T.FLOAT, [2, 3])],
     [init("zero", np.float32(0)), init("ratio0", np.float32(0)), init("tm1", np.bool_(True))])
# shape chains of a statically shaped tensor: Shape/Size -> Gather/Concat -> Reshape
n = [h.make_node("Shape", ["x"], ["s"]), h.make_node("Gather", ["s", "i0"], ["d0"], axis=0),
     h.make_node("Unsqueeze", ["d0", "ax"], ["d0u"]), h.make_node("Concat", ["d0u", "m1"], ["ns"], axis=0),
     h.make_node("Reshape", ["x", "ns"], ["r"]), h.make_node("Size", ["x"], ["sz"]),
     h.make_node("Cast", ["sz"], ["szf"], to=T.FLOAT), h.make_node("Div", ["r", "szf"], ["y"]),
     h.make_node("Shape", ["x"], ["s2"], start=1), h.make_node("Concat", ["m1", "s2"], ["ns2"], axis=0),
     h.make_node("Reshape", ["x", "ns2"], ["y2"], allowzero=0)]
save("shapes", n, [vi("x", T.FLOAT, [2, 3, 4])], [vi("y", T.FLOAT, [2, 12]), vi("y2", T.FLOAT, [2, 3, 4])],
     [init("i0", np.array(0, np.int64)), init("ax", np.array([0], np.int64)), init("m1", np.array([-1], np.int64))], opset=15)
# common subexpressions (symbolic shapes, so Shape stays) and a no-op Cast
n = [h.make_node("Relu", ["x"], ["a"]), h.make_node("Relu", ["x"], ["b"]), h.make_node("Add", ["a", "b"], ["c"]),
     h.make_node("Shape", ["x"], ["s1"]), h.make_node("Shape", ["x"], ["s2"]),
     h.make_node("Gather", ["s1", "i1"], ["g1"], axis=0), h.make_node("Gather", ["s2", "i1"], ["g2"], axis=0),
     h.make_node("Reshape", ["c", "g1"], ["r"]), h.make_node("Cast", ["r"], ["y"], to=T.FLOAT),
     h.make_node("Reshape", ["c", "g2"], ["y3"]), h.make_node("Transpose", ["x"], ["t1"], perm=[1, 0]),
     h.make_node("Transpose", ["x"], ["t2"], perm=[0, 1]), h.make_node("Sub", ["t1", "t1"], ["y2"])]
save("cse", n, [vi("x", T.FLOAT, ["N", "M"])], [vi("y", T.FLOAT, ["M", "N"]), vi("y2", T.FLOAT, ["M", "N"]), vi("y3", T.FLOAT, ["M", "N"])],
     [init("i1", np.array([1, 0], np.int64))], opset=13)
# Conv followed by Mul/Add of per-channel and scalar constants; a full-shape Add stays
n = [h.make_node("Conv", ["x", "aw1"], ["c1"], pads=[1, 1, 1, 1]), h.make_node("Mul", ["c1", "k1"], ["m1"]),
     h.make_node("Add", ["kb1", "m1"], ["a1"]), h.make_node("Relu", ["a1"], ["r1"]),
     h.make_node("Conv", ["r1", "aw2", "ab2"], ["c2"]), h.make_node("Mul", ["c2", "two"], ["m2"]),
     h.make_node("Add", ["m2", "half"], ["a2"]), h.make_node("Add", ["a2", "full"], ["y"])]
save("affine", n, [vi("x", T.FLOAT, ["N", 3, 6, 6])], [vi("y", T.FLOAT, ["N", 4, 4, 4])],
     [init("aw1", f(4, 3, 3, 3)), init("k1", f(4, 1, 1)), init("kb1", f(1, 4, 1, 1)), init("aw2", f(4, 4, 3, 3)),
      init("ab2", f(4)), init("two", np.float32(2)), init("half", np.array([0.5], np.float32)), init("full", f(4, 4, 4))])
# computed Reshape targets known up to one entry (symbolic batch): constant with -1
n = [h.make_node("Shape", ["x"], ["s"]), h.make_node("Gather", ["s", "i0"], ["d0"], axis=0),
     h.make_node("Unsqueeze", ["d0", "ax"], ["d0u"]), h.make_node("Concat", ["d0u", "k"], ["ns"], axis=0),
     h.make_node("Reshape", ["x", "ns"], ["y"]),
     h.make_node("Gather", ["s", "i1"], ["d1"], axis=0), h.make_node("Unsqueeze", ["d1", "ax"], ["d1u"]),
     h.make_node("Concat", ["d0u", "d1u", "m1"], ["ns2"], axis=0), h.make_node("Reshape", ["x", "ns2"], ["y2"])]
save("reshape", n, [vi("x", T.FLOAT, ["N", 4, 6])], [vi("y", T.FLOAT, ["N", 8, 3]), vi("y2", T.FLOAT, ["N", 4, 6])],
     [init("i0", np.array(0, np.int64)), init("i1", np.array(1, np.int64)), init("ax", np.array([0], np.int64)),
      init("k", np.array([8, 3], np.int64)), init("m1", np.array([-1], np.int64))], opset=13)
# LSTM and GRU initial states of zeros computed from the batch size, as
# torch exports them (ConstantOfShape, one of them sliced): omitted
shape = [h.make_node("Shape", ["x"], ["sh"]), h.make_node("Gather", ["sh", "one_s"], ["nb"], axis=0),
         h.make_node("Unsqueeze", ["nb", "zero"], ["nb1"]), h.make_node("Concat", ["two", "nb1", "five"], ["st"], axis=0),
         h.make_node("ConstantOfShape", ["st"], ["z"], value=nh.from_array(np.zeros(1, np.float32))),
         h.make_node("Slice", ["z", "zero", "one", "zero"], ["z1"]),
         h.make_node("ConstantOfShape", ["st"], ["zc"])]
n = shape + [h.make_node("LSTM", ["x", "lw", "lr", "lb", "", "z", "zc"], ["ly"], hidden_size=5, direction="bidirectional"),
             h.make_node("GRU", ["x", "gw", "gr", "", "", "z1"], ["gy"], hidden_size=5)]
save("rnnzero", n, [vi("x", T.FLOAT, [3, "N", 4])], [vi("ly", T.FLOAT, [3, 2, "N", 5]), vi("gy", T.FLOAT, [3, 1, "N", 5])],
     [init("one", np.array([1], np.int64)), init("zero", np.array([0], np.int64)), init("two", np.array([2], np.int64)),
      init("one_s", np.array(1, np.int64)),
      init("five", np.array([5], np.int64)), init("lw", f(2, 20, 4)), init("lr", f(2, 20, 5)), init("lb", f(2, 40)),
      init("gw", f(1, 15, 4)), init("gr", f(1, 15, 5))])
EOF
cat > "$TMPD/check.py" <<'EOF'
import sys, json, numpy as np, onnx, onnxruntime as ort
orig, new, name = sys.argv[1], sys.argv[2], sys.argv[3]
forbid = sys.argv[4].split(",") if len(sys.argv) > 4 and sys.argv[4] else []
def fail(why):
    print(f"FAIL: {name}: {why}"); sys.exit(0)
mo, mn = onnx.load(orig), onnx.load(new)
try:
    onnx.checker.check_model(mn, full_check=True)
except Exception as e:
    fail(f"onnx.checker: {str(e).splitlines()[0]}")
def count(g):
    n = 0
    for nd in g.node:
        n += 1
        for a in nd.attribute:
            if a.g.node: n += count(a.g)
            for sg in a.graphs: n += count(sg)
    return n
no, nn = count(mo.graph), count(mn.graph)
if len(sys.argv) > 5 and sys.argv[5] == "inits":
    io, inn = len(mo.graph.initializer), len(mn.graph.initializer)
    if inn >= io: fail(f"{inn} initializers after, {io} before: expected fewer")
elif nn >= no: fail(f"{nn} nodes after, {no} before: expected fewer")
ops = {nd.op_type for nd in mn.graph.node}
for op in forbid:
    if op in ops: fail(f"{op} still present")
if [o.name for o in mo.graph.output] != [o.name for o in mn.graph.output]: fail("graph outputs renamed")
if [i.name for i in mo.graph.input if i.name not in {t.name for t in mo.graph.initializer}] != [i.name for i in mn.graph.input if i.name not in {t.name for t in mn.graph.initializer}]:
    fail("graph inputs changed")
so = ort.SessionOptions(); so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
so.log_severity_level = 3
so_ = ort.InferenceSession(orig, so, providers=["CPUExecutionProvider"])
sn = ort.InferenceSession(new, so, providers=["CPUExecutionProvider"])
rng = np.random.default_rng(1)
types = {"tensor(float)": np.float32, "tensor(bool)": np.bool_, "tensor(int64)": np.int64}
for trial in range(3):
    feed = {}
    for i in so_.get_inputs():
        shp = [d if isinstance(d, int) else 2 for d in i.shape]
        t = types[i.type]
        feed[i.name] = (rng.random(shp) < 0.5 if t is np.bool_ else rng.standard_normal(shp).astype(t))
        if t is np.bool_: feed[i.name] = np.array(trial % 2 == 0) if shp == [] else feed[i.name]
    a = so_.run(None, feed); b = sn.run(None, feed)
    for x, y, o in zip(a, b, so_.get_outputs()):
        if x.shape != y.shape: fail(f"output {o.name}: shape {y.shape} vs {x.shape}")
        if not np.allclose(y, x, rtol=1e-5, atol=1e-5): fail(f"output {o.name}: max diff {np.abs(x - y).max()}")
print(f"PASS: {name} ({no} -> {nn} nodes, outputs equal)")
EOF
"$PY" "$TMPD/gen.py" "$P/models" || { fail "generate models" "gen.py failed"; exit 1; }

MODELS="convbn identity constant dedup transpose subgraph random shapes cse affine reshape rnnzero"
for m in $MODELS; do
	printf '[model %s]\nsource = models/%s.onnx\npreprocess = default\n\n' "$m" "$m"
done > "$P/rules/main.rules"
cat >> "$P/rules/main.rules" <<EOF
[model digits]
export = $PY digits/export.py digits/weights.npz "\$out"
export.deps = digits/export.py digits/weights.npz
preprocess = default
EOF

if "$Q" -C "$P" > "$TMPD/log" 2>&1; then
	pass "build with preprocess = default"
else
	fail "build with preprocess = default" "$(tail -3 "$TMPD/log")"
fi
"$Q" -C "$P" digits:export > /dev/null 2>&1

# ---- outputs equal, checker, fewer nodes, ops gone ----
ck() { # ck MODEL ORIGINAL FORBIDDEN-OPS [inits]
	if [ -f "$P/build/$1/$1.onnx" ]; then
		"$PY" "$TMPD/check.py" "$2" "$P/build/$1/$1.onnx" "${P##*/}/$1: outputs, checker, size" "$3" $4 2>&1 | tail -1
	else
		fail "$1: outputs, checker, size" "no build/$1/$1.onnx"
	fi
}
ck convbn "$P/models/convbn.onnx" BatchNormalization
ck identity "$P/models/identity.onnx" Dropout
ck constant "$P/models/constant.onnx" Constant,Concat,Transpose,Sqrt,Exp,Mul
ck dedup "$P/models/dedup.onnx" "" inits
ck transpose "$P/models/transpose.onnx" ""
ck subgraph "$P/models/subgraph.onnx" Identity
ck digits "$P/build/digits/export/digits.onnx" MatMul,Add
ck shapes "$P/models/shapes.onnx" Shape,Size,Gather,Concat,Cast,Unsqueeze
ck cse "$P/models/cse.onnx" Cast
ck affine "$P/models/affine.onnx" Mul
ck reshape "$P/models/reshape.onnx" ""
ck rnnzero "$P/models/rnnzero.onnx" ConstantOfShape,Shape,Slice

# quantmake preprocess IN OUT: the stage's work outside a project (shapes
# inferred first, as the infer-shapes stage does) writes the same bytes
same=1
for m in $MODELS; do
	"$Q" preprocess "$P/models/$m.onnx" "$TMPD/cmd-$m.onnx" 2>"$TMPD/cmdlog" &&
		cmp -s "$TMPD/cmd-$m.onnx" "$P/build/$m/$m.onnx" || { same=0; break; }
done
[ $same = 1 ] && pass "quantmake preprocess IN OUT writes what the stage writes" ||
	fail "quantmake preprocess IN OUT writes what the stage writes" "$m: $(tail -2 "$TMPD/cmdlog")"
expect_err "quantmake preprocess: unknown pass" 2 "preprocess: unknown pass 'fodl'" \
	"$Q" preprocess "$P/models/convbn.onnx" "$TMPD/x.onnx" --passes fodl
expect_err "quantmake preprocess: a missing model" 2 "not an ONNX model: $TMPD/none.onnx: No such file" \
	"$Q" preprocess "$TMPD/none.onnx" "$TMPD/x.onnx"

# random ops and training-mode Dropout are never folded or removed
if "$PY" -c '
import sys, onnx
m = onnx.load(sys.argv[1]); ops = [n.op_type for n in m.graph.node]
sys.exit(0 if "RandomUniform" in ops and "Dropout" in ops and "Identity" not in ops else 1)' "$P/build/random/random.onnx" 2>/dev/null; then
	pass "random op and training Dropout are kept"
else
	fail "random op and training Dropout are kept" "$(cat "$P/build/random/preprocess.json" 2>/dev/null | tr -d '\n ')"
fi

# ---- counts in preprocess.json and the log ----
counts() { # counts MODEL PASS CHANGED SKIPPED
	"$PY" -c '
import json, sys
j = json.load(open(sys.argv[1]))
p = j["passes"][sys.argv[2]]
ok = p["changed"] == int(sys.argv[3]) and p["skipped"] == int(sys.argv[4]) and j["nodes"]["after"] < j["nodes"]["before"] + (sys.argv[2] == "dedup")
print("PASS: %s" % sys.argv[5] if ok else "FAIL: %s: %s" % (sys.argv[5], json.dumps(j["passes"][sys.argv[2]])))' \
		"$P/build/$1/preprocess.json" "$2" "$3" "$4" "preprocess.json of $1: $2 $3 changed, $4 skipped" 2>&1 | tail -1
}
counts convbn fuse-bn 4 0
counts identity identity 8 1
counts constant fold 6 0
counts dedup dedup 2 0
counts transpose transpose 4 0
counts subgraph identity 4 0
counts subgraph fold 1 0
counts digits matmul-add 2 0
counts shapes shape 3 0
counts cse cse 3 0
counts cse identity 1 0
counts affine conv-affine 4 0
counts reshape shape 1 0
if grep -q '^preprocess: convbn: fuse-bn: 4 changed$' "$TMPD/log" &&
   grep -q '^preprocess: convbn: 11 -> 7 nodes' "$TMPD/log"; then
	pass "one log line per pass and a summary"
else
	fail "one log line per pass and a summary" "$(grep '^preprocess: convbn' "$TMPD/log" | head -3)"
fi

# ---- same inputs, same bytes (a fresh clone with its own cache) ----
P2=$TMPD/p2
mkdir -p "$P2" && cp -r "$P/rules" "$P/models" "$P/digits" "$P2/"
"$Q" -C "$P2" > /dev/null 2>&1
same=1
for m in $MODELS digits; do
	cmp -s "$P/build/$m/$m.onnx" "$P2/build/$m/$m.onnx" || same=0
	cmp -s "$P/build/$m/preprocess.json" "$P2/build/$m/preprocess.json" || same=0
done
[ $same = 1 ] && pass "deterministic output bytes" || fail "deterministic output bytes" "a rebuild in another clone differs"

# ---- single passes, fold limit ----
P3=$TMPD/p3
mkdir -p "$P3/rules" && cp -r "$P/models" "$P3/"
cat > "$P3/rules/main.rules" <<'EOF'
[model bnonly]
source = models/convbn.onnx
preprocess = fuse-bn

[model limited]
source = models/constant.onnx
preprocess = fold, dce
preprocess.fold-limit = 64
EOF
if "$Q" -C "$P3" > "$TMPD/log3" 2>&1; then
	pass "build with single passes and a fold limit"
else
	fail "build with single passes and a fold limit" "$(tail -3 "$TMPD/log3")"
fi
if "$PY" -c '
import json, sys, onnx
j = json.load(open(sys.argv[1])); m = onnx.load(sys.argv[2])
ops = [n.op_type for n in m.graph.node]
# the 4x6 float results (96 bytes) stay unfolded
sys.exit(0 if j["passes"]["fold"]["skipped"] > 0 and "Add" in ops else 1)' "$P3/build/limited/preprocess.json" "$P3/build/limited/limited.onnx" 2>/dev/null &&
   grep -q 'exceeds the fold limit of 64 bytes' "$TMPD/log3"; then
	pass "folds over preprocess.fold-limit are skipped and reported"
else
	fail "folds over preprocess.fold-limit are skipped and reported" "$(grep fold "$TMPD/log3" | head -3)"
fi
ck_in() { P_SAVE=$P; P=$P3; ck "$@"; P=$P_SAVE; }
ck_in limited "$P/models/constant.onnx" ""
if "$PY" -c '
import json, sys, onnx
j = json.load(open(sys.argv[1])); m = onnx.load(sys.argv[2])
inits = len(m.graph.initializer)
sys.exit(0 if j["passes"]["fuse-bn"]["changed"] == 4 and j["passes"]["dce"]["changed"] == 0 and inits == 30 else 1)' \
	"$P3/build/bnonly/preprocess.json" "$P3/build/bnonly/bnonly.onnx" 2>/dev/null; then
	pass "only the listed passes run"
else
	fail "only the listed passes run" "$(tr -d '\n ' < "$P3/build/bnonly/preprocess.json")"
fi
ck_in bnonly "$P/models/convbn.onnx" BatchNormalization

# ---- a model with external data ----
X=$TMPD/x
mkdir -p "$X/rules" "$X/models"
"$PY" -c '
import onnx, sys
onnx.save(onnx.load(sys.argv[1]), sys.argv[2], save_as_external_data=True, all_tensors_to_one_file=True,
          location="convbn.data", size_threshold=0)' "$P/models/convbn.onnx" "$X/models/convbn.onnx"
printf '[model convbn]\nsource = models/convbn.onnx\npreprocess = default\n' > "$X/rules/main.rules"
if "$Q" -C "$X" > "$TMPD/logx" 2>&1; then
	P_SAVE=$P; P=$X; ck convbn "$X/models/convbn.onnx" BatchNormalization; P=$P_SAVE
else
	fail "convbn with external data" "$(tail -3 "$TMPD/logx")"
fi

# ---- dedup on external data: only equal bytes merge (same first 64 KiB
# but a different last value, same bytes in other dims stay apart) ----
XD=$TMPD/xd
mkdir -p "$XD/rules" "$XD/models"
"$PY" - "$XD/models/dupx.onnx" <<'EOF'
import sys
import numpy as np
import onnx
from onnx import TensorProto as T, helper as h
w1 = np.random.default_rng(5).standard_normal((256, 300)).astype(np.float32)
w3 = w1.copy(); w3[-1, -1] += 1
b = np.linspace(-1, 1, 300, dtype=np.float32)
inits = [h.make_tensor(k, T.FLOAT, v.shape, v.tobytes(), raw=True) for k, v in
         (("w1", w1), ("w2", w1.copy()), ("w3", w3), ("w4", w1.reshape(300, 256)), ("b1", b), ("b2", b.copy()))]
n = [h.make_node("MatMul", ["x", "w1"], ["m1"]), h.make_node("Add", ["m1", "b1"], ["y1"]),
     h.make_node("MatMul", ["x", "w2"], ["m2"]), h.make_node("Add", ["m2", "b2"], ["y2"]),
     h.make_node("MatMul", ["x", "w3"], ["y3"]), h.make_node("MatMul", ["x2", "w4"], ["y4"])]
g = h.make_graph(n, "dupx", [h.make_tensor_value_info("x", T.FLOAT, [1, 256]), h.make_tensor_value_info("x2", T.FLOAT, [1, 300])],
                 [h.make_tensor_value_info(f"y{i}", T.FLOAT, [1, 300 if i < 4 else 256]) for i in range(1, 5)], inits)
m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
onnx.save(m, sys.argv[1], save_as_external_data=True, all_tensors_to_one_file=True, location="dupx.data", size_threshold=0)
EOF
printf '[model dupx]\nsource = models/dupx.onnx\npreprocess = default\n' > "$XD/rules/main.rules"
if "$Q" -C "$XD" > "$TMPD/logxd" 2>&1; then
	P_SAVE=$P; P=$XD; ck dupx "$XD/models/dupx.onnx" "" inits; P=$P_SAVE
	if "$PY" -c '
import json, sys, onnx
j = json.load(open(sys.argv[1]))
names = sorted(i.name for i in onnx.load(sys.argv[2], load_external_data=False).graph.initializer)
sys.exit(0 if j["passes"]["dedup"]["changed"] == 2 and names == ["b1", "w1", "w3", "w4"] else 1)' \
		"$XD/build/dupx/preprocess.json" "$XD/build/dupx/dupx.onnx" 2>/dev/null; then
		pass "dedup on external data merges exactly the equal initializers"
	else
		fail "dedup on external data merges exactly the equal initializers" "$(tr -d '\n ' < "$XD/build/dupx/preprocess.json")"
	fi
else
	fail "dedup on external data" "$(tail -3 "$TMPD/logxd")"
fi

# ---- dedup across bodies: the two branches of an If fold the same outer
# weight (Transpose of W; 2V as Mul(V, 2) in one, Add(V, V) in the other:
# equal bytes from different expressions are the same constant and merge
# too); each fold lands in its branch, dedup keeps one copy in the graph
# enclosing both (here the main graph) and both branches read it; a copy
# within one body merges there, a small one (under 1 KiB) in another body
# stays; outputs unchanged for either branch ----
SF=$TMPD/sf
mkdir -p "$SF/rules" "$SF/models"
"$PY" - "$SF/models/sharedfold.onnx" <<'EOF2'
import sys, numpy as np, onnx
from onnx import TensorProto as T, helper as h, numpy_helper as nh
rng = np.random.default_rng(3)
W, V = rng.standard_normal((32, 64)).astype(np.float32), rng.standard_normal((16, 32)).astype(np.float32)
vi = h.make_tensor_value_info
def branch(name, double, extra):
    nodes = [h.make_node("Transpose", ["W"], [name + "_wt"], perm=[1, 0]),
             h.make_node("MatMul", ["x", name + "_wt"], [name + "_m"]), double,
             h.make_node("Add", [name + "_m", name + "_v2"], [name + "_a"])] + extra
    return h.make_graph(nodes, name, [], [vi(name + "_y", T.FLOAT, [16, 32])])
then_g = branch("then", h.make_node("Mul", ["V", "two"], ["then_v2"]),
                [h.make_node("Relu", ["then_a"], ["then_r"]), h.make_node("Mul", ["then_r", "k0"], ["then_y"])])
then_g.initializer.extend([nh.from_array(np.full(32, 0.5, np.float32), "k0")])
# the else branch holds the same small constant twice: merged in the branch;
# under 1 KiB, the then branch's equal one (k0) stays its own
else_g = branch("else", h.make_node("Add", ["V", "V"], ["else_v2"]),
                [h.make_node("Mul", ["else_a", "k1"], ["else_b"]), h.make_node("Add", ["else_b", "k2"], ["else_y"])])
else_g.initializer.extend([nh.from_array(np.full(32, 0.5, np.float32), "k1"), nh.from_array(np.full(32, 0.5, np.float32), "k2")])
g = h.make_graph([h.make_node("If", ["c"], ["y"], then_branch=then_g, else_branch=else_g)], "sharedfold",
                 [vi("x", T.FLOAT, [16, 64]), vi("c", T.BOOL, [])], [vi("y", T.FLOAT, [16, 32])],
                 [nh.from_array(W, "W"), nh.from_array(V, "V"), nh.from_array(np.float32(2), "two")])
m = h.make_model(g, opset_imports=[h.make_opsetid("", 13)])
m.ir_version = 8
onnx.checker.check_model(m, full_check=True)
onnx.save(m, sys.argv[1])
EOF2
printf '[model sharedfold]\nsource = models/sharedfold.onnx\npreprocess = default\n' > "$SF/rules/main.rules"
if "$Q" -C "$SF" > "$TMPD/logsf" 2>&1; then
	P_SAVE=$P; P=$SF; ck sharedfold "$SF/models/sharedfold.onnx" "" inits; P=$P_SAVE
	if "$PY" - "$SF/build/sharedfold/sharedfold.onnx" "$SF/models/sharedfold.onnx" > "$TMPD/sf.out" 2>&1 <<'EOF2'
import sys, numpy as np, onnx
from onnx import numpy_helper as nh
m, o = onnx.load(sys.argv[1]), onnx.load(sys.argv[2])
W, V = (nh.to_array(t) for t in o.graph.initializer[:2])
main = {t.name: nh.to_array(t) for t in m.graph.initializer}
ifn = m.graph.node[0]
br = {a.name: a.g for a in ifn.attribute}
wt = [k for k, v in main.items() if v.shape == (64, 32) and np.array_equal(v, W.T)]
v2 = [k for k, v in main.items() if v.shape == (16, 32) and np.array_equal(v, 2 * V)]
assert len(main) == 2 and len(wt) == 1 and len(v2) == 1, sorted((k, v.shape) for k, v in main.items())
assert [t.name for t in br["then_branch"].initializer] == ["k0"], [t.name for t in br["then_branch"].initializer]
assert [t.name for t in br["else_branch"].initializer] == ["k1"], [t.name for t in br["else_branch"].initializer]
for b in br.values():
    reads = {i for n in b.node for i in n.input}
    assert wt[0] in reads and v2[0] in reads, (b.name, reads)
EOF2
	then pass "dedup: the If branches' equal folds are one initializer of the enclosing graph, read by both"
	else fail "dedup: the If branches' equal folds are one initializer of the enclosing graph, read by both" "$(tail -1 "$TMPD/sf.out")"; fi
else
	fail "dedup across If branches" "$(tail -3 "$TMPD/logsf")"
fi

# silero-vad (bench/fetch-models.sh; skipped offline): its two LSTMs in the
# branches of an inner If read the same outer weights, reordered by
# Slice/Concat; folded, they were two copies (2.3 -> 3.3 MB), now one, and
# onnxruntime gives the same speech probabilities and states
if ! SM=$(sh "$ROOT/bench/fetch-models.sh" 2>/dev/null) || [ ! -f "$SM/silero/silero_vad.onnx" ]; then
	skip "silero-vad preprocess" "bench/fetch-models.sh could not fetch the model"
else
	SV=$TMPD/sv
	mkdir -p "$SV/rules"
	cp "$SM/silero/silero_vad.onnx" "$SV/silero.onnx"
	printf '[model sv]\nsource = silero.onnx\npreprocess = default\n' > "$SV/rules/main.rules"
	if "$Q" -C "$SV" sv:preprocess > "$TMPD/logsv" 2>&1 && "$PY" - "$SV/silero.onnx" "$SV/build/sv/sv.onnx" > "$TMPD/sv.out" 2>&1 <<'EOF2'
import os, sys, numpy as np, onnxruntime as ort
a, b = sys.argv[1:]
so = ort.SessionOptions(); so.log_severity_level = 3
sa, sb = (ort.InferenceSession(p, so, providers=["CPUExecutionProvider"]) for p in (a, b))
rng = np.random.default_rng(0)
for sr, n in ((16000, 576), (8000, 288)):
    st_a = st_b = np.zeros((2, 1, 128), np.float32)
    for i in range(10):
        x = (rng.standard_normal((1, n)) * 0.1).astype(np.float32)
        pa, st_a = sa.run(None, {"input": x, "state": st_a, "sr": np.array(sr, np.int64)})
        pb, st_b = sb.run(None, {"input": x, "state": st_b, "sr": np.array(sr, np.int64)})
        assert np.allclose(pa, pb, rtol=1e-5, atol=1e-6) and np.allclose(st_a, st_b, rtol=1e-5, atol=1e-6), (sr, i)
sa_, sb_ = os.path.getsize(a), os.path.getsize(b)
assert sb_ < sa_, (sa_, sb_)
print("silero %d -> %d bytes" % (sa_, sb_))
EOF2
	then pass "silero-vad preprocess: shared LSTM weights folded once ($(tail -1 "$TMPD/sv.out")), outputs equal in onnxruntime"
	else fail "silero-vad preprocess: shared LSTM weights folded once" "$(tail -1 "$TMPD/sv.out") $(grep quantmake: "$TMPD/logsv" | tail -1)"; fi
fi

# ---- bad input ----
E=$TMPD/e
mkdir -p "$E/rules" && cp -r "$P/models" "$E/"
printf '[model x]\nsource = models/dedup.onnx\npreprocess = fold, fodl\n' > "$E/rules/main.rules"
expect_err "unknown pass names file:line and lists the passes" 2 \
	"rules/main.rules:3: model 'x': preprocess: unknown pass 'fodl': expected default or a list of identity, shape, fold, fuse-bn, conv-affine, transpose, matmul-add, layernorm, gelu, dedup, cse, dce" "$Q" -C "$E"
printf '[model x]\nsource = models/dedup.onnx\npreprocess = dce, dce\n' > "$E/rules/main.rules"
expect_err "a pass listed twice" 2 "rules/main.rules:3: .*pass 'dce' is listed twice" "$Q" -C "$E"
printf '[model x]\nsource = models/dedup.onnx\npreprocess.fold-limit = 1M\n' > "$E/rules/main.rules"
expect_err "fold-limit without preprocess" 2 "rules/main.rules:3: model 'x' sets preprocess.fold-limit but not preprocess" "$Q" -C "$E"
printf '[model x]\nsource = models/dedup.onnx\npreprocess = default\npreprocess.fold-limit = lots\n' > "$E/rules/main.rules"
expect_err "bad fold-limit" 2 "rules/main.rules:4: model 'x': preprocess.fold-limit = 'lots' is not valid" "$Q" -C "$E"

# ---- preprocess.opset: upgrades of old-opset models ----
# libonnx-testdata models exported at opsets 6, 9 and 11 (BatchNormalization,
# Pad, Clip, Split, Squeeze/Unsqueeze, Reduce*, (Log)Softmax, TopK, Dropout,
# Upsample, Slice, Concat, Add with broadcast) and models built here at
# opsets 6, 9, 10 and 11 (Softmax/LogSoftmax/Hardmax on inner axes, Upsample
# and Resize-10 linear, attributes turned inputs, subgraphs, an opset-9 CNN
# with unfolded BatchNormalization after Conv and ConvTranspose) go to opsets
# 13 and 17. Each result must pass onnx.checker (full), import the target
# opset, and give the original's outputs: in our interpreter, and in
# onnxruntime (against onnxruntime on the original where it loads opsets
# below 7 it does not, against our interpreter), rtol 1e-5.
O=$TMPD/o
mkdir -p "$O/rules" "$O/models"
cat > "$TMPD/gen_old.py" <<'EOF'
import sys, numpy as np, onnx
from onnx import helper as h, TensorProto as T, numpy_helper as nh
out = sys.argv[1]
rng = np.random.default_rng(0)
def f(*s): return rng.standard_normal(s).astype(np.float32)
def init(name, a): return nh.from_array(np.asarray(a), name)
vi = h.make_tensor_value_info
def save(name, nodes, ins, outs, inits, opset, check=True):
    if opset < 9:   # IR 3: initializers are graph inputs too
        ins = ins + [vi(t.name, t.data_type, list(t.dims)) for t in inits]
    g = h.make_graph(nodes, name, ins, outs, inits)
    m = h.make_model(g, opset_imports=[h.make_opsetid("", opset)])
    m.ir_version = {6: 3, 9: 4, 10: 5, 11: 6}[opset]
    m = onnx.shape_inference.infer_shapes(m)   # types of the outputs declared without
    if check:
        onnx.checker.check_model(m, full_check=True)
    onnx.save(m, f"{out}/{name}.onnx")
def bnp(p, c):
    return [init(p + "s", (rng.random(c) + 0.5).astype(np.float32)), init(p + "b", f(c)), init(p + "m", f(c)),
            init(p + "v", (rng.random(c) + 0.5).astype(np.float32))]
def bn(p, x, y, **kw):
    return h.make_node("BatchNormalization", [x, p + "s", p + "b", p + "m", p + "v"], [y], **kw)
# an opset-9 CNN as old exporters leave it
n = [h.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]), bn("n1", "c1", "a1"),
     h.make_node("Relu", ["a1"], ["r1"]),
     h.make_node("ConvTranspose", ["r1", "w2"], ["c2"], strides=[2, 2], group=2), bn("n2", "c2", "a2", epsilon=1e-3, momentum=0.8),
     h.make_node("Relu", ["a2"], ["r2"]), h.make_node("Dropout", ["r2"], ["d2"], ratio=0.3),
     h.make_node("MaxPool", ["d2"], ["p2"], kernel_shape=[2, 2], strides=[2, 2]),
     h.make_node("Upsample", ["p2", "us"], ["u2"], mode="nearest"),
     h.make_node("GlobalAveragePool", ["u2"], ["g"]), h.make_node("Flatten", ["g"], ["fl"]),
     h.make_node("Gemm", ["fl", "gw", "gb"], ["gm"], transB=1), h.make_node("Softmax", ["gm"], ["y"])]
save("cnn9", n, [vi("x", T.FLOAT, ["N", 3, 8, 8])], [vi("y", T.FLOAT, ["N", 10])],
     [init("w1", f(8, 3, 3, 3) * 0.3), init("b1", f(8)), init("w2", f(8, 3, 2, 2) * 0.3), init("us", np.array([1, 1, 2, 2], np.float32)),
      init("gw", f(10, 6)), init("gb", f(10))] + bnp("n1", 8) + bnp("n2", 6), 9)
# opset 9 operators whose attributes became inputs or whose semantics moved
n = [h.make_node("Pad", ["x"], ["pd"], pads=[0, 0, 1, 1, 0, 0, 1, 1], value=0.5),
     h.make_node("Clip", ["pd"], ["cl"], min=-0.5),
     h.make_node("Slice", ["cl"], ["sl"], starts=[1, 1], ends=[5, 1000], axes=[2, 3]),
     h.make_node("ReduceMean", ["sl"], ["rm"], axes=[3]), h.make_node("Squeeze", ["rm"], ["sq"], axes=[3]),
     h.make_node("Unsqueeze", ["sq"], ["us"], axes=[0]), h.make_node("Split", ["us"], ["s1", "s2"], axis=3, split=[1, 3]),
     h.make_node("ReduceSum", ["s2"], ["rs"], axes=[3], keepdims=0), h.make_node("Dropout", ["s1"], ["dp"], ratio=0.2),
     h.make_node("Softmax", ["us"], ["sm"], axis=2), h.make_node("LogSoftmax", ["sq"], ["ls"]),
     h.make_node("Hardmax", ["sq"], ["hm"], axis=0), h.make_node("TopK", ["sq"], ["tv", "ti"], k=2),
     h.make_node("ReduceMax", ["x"], ["rx"], axes=[1, 2]), h.make_node("ReduceL2", ["x"], ["rl"]),
     h.make_node("Upsample", ["x", "sc"], ["ul"], mode="linear")]
save("ops9", n, [vi("x", T.FLOAT, [2, 3, 4, 5])],
     [vi(k, T.FLOAT, None) for k in ("sl", "rs", "dp", "sm", "ls", "hm", "tv", "rx", "rl", "ul")] + [vi("ti", T.INT64, None)],
     [init("sc", np.array([1, 1, 2, 3], np.float32))], 9)
# Resize-10, linear and nearest with a fractional scale
n = [h.make_node("Resize", ["x", "s1"], ["y1"], mode="linear"), h.make_node("Resize", ["x", "s2"], ["y2"])]
save("resize10", n, [vi("x", T.FLOAT, [1, 2, 4, 6])], [vi("y1", T.FLOAT, None), vi("y2", T.FLOAT, None)],
     [init("s1", np.array([1, 1, 2, 1.5], np.float32)), init("s2", np.array([1, 1, 1.5, 0.5], np.float32))], 10)
# opset 11: subgraphs, equal Split, Clip with inputs already, Softmax on an unknown rank
then_g = h.make_graph([h.make_node("Unsqueeze", ["x"], ["t"], axes=[0]), h.make_node("Softmax", ["t"], ["tt"], axis=1)],
                      "then", [], [vi("tt", T.FLOAT, None)])
else_g = h.make_graph([h.make_node("Neg", ["x"], ["e0"]), h.make_node("Unsqueeze", ["e0"], ["e1"], axes=[-1]),
                       h.make_node("ReduceSum", ["e1"], ["e"], axes=[0, 1], keepdims=1)], "else", [], [vi("e", T.FLOAT, None)])
n = [h.make_node("If", ["c"], ["y"], then_branch=then_g, else_branch=else_g),
     h.make_node("Split", ["x"], ["p", "q"], axis=1), h.make_node("Add", ["p", "q"], ["y2"]),
     h.make_node("LogSoftmax", ["x"], ["y3"], axis=0)]
save("sub11", n, [vi("x", T.FLOAT, [3, 4]), vi("c", T.BOOL, [])],
     [vi("y", T.FLOAT, None), vi("y2", T.FLOAT, [3, 2]), vi("y3", T.FLOAT, [3, 4])], [], 11)
# Upsample at opset 10, where it is deprecated (the checker refuses it; exporters wrote it)
save("up10", [h.make_node("Upsample", ["x", "s"], ["y"])], [vi("x", T.FLOAT, [1, 2, 3, 4])], [vi("y", T.FLOAT, [1, 2, 6, 8])],
     [init("s", np.array([1, 1, 2, 2], np.float32))], 10, check=False)
# opset 6: broadcast = 1 with and without axis, BatchNormalization with is_test
n = [h.make_node("Add", ["x", "b"], ["a"], broadcast=1, axis=1), h.make_node("Mul", ["a", "k"], ["m"], broadcast=1),
     bn("n", "m", "y", is_test=1)]
save("bcast6", n, [vi("x", T.FLOAT, [2, 3, 4, 5])], [vi("y", T.FLOAT, [2, 3, 4, 5])],
     [init("b", f(3)), init("k", f(4, 5))] + bnp("n", 3), 6)
EOF
cat > "$TMPD/opcheck.py" <<'EOF'
import sys, os, subprocess, numpy as np, onnx, onnxruntime as ort
from onnx import numpy_helper as nh
# opcheck.py QUANTMAKE ORIGINAL CONVERTED TARGET DATADIR|- NAME [FORBIDDEN-OPS]
qm, orig, new, target, data, name = sys.argv[1:7]
forbid = sys.argv[7].split(",") if len(sys.argv) > 7 else []
def fail(why):
    print(f"FAIL: {name}: {why}"); sys.exit(0)
if not os.path.exists(new): fail(f"{new} was not built")
mn = onnx.load(new)
try:
    onnx.checker.check_model(mn, full_check=True)
except Exception as e:
    fail(f"onnx.checker: {str(e).splitlines()[0]}")
op = [o.version for o in mn.opset_import if o.domain in ("", "ai.onnx")]
if op != [int(target)]: fail(f"opset {op}, expected {target}")
for o in forbid:
    if o in {n.op_type for n in mn.graph.node}: fail(f"{o} still present")
mo = onnx.load(orig)
inits = {t.name for t in mo.graph.initializer}
ins = [i for i in mo.graph.input if i.name not in inits]
tmp = os.path.dirname(new)
rng = np.random.default_rng(3)
def feeds():
    if data != "-":
        yield {i.name: nh.to_array(onnx.load_tensor(os.path.join(data, f"input_{k}.pb"))) for k, i in enumerate(ins)}
        return
    for trial in range(2):
        f = {}
        for i in ins:
            shp = [d.dim_value if d.HasField("dim_value") else 2 for d in i.type.tensor_type.shape.dim]
            f[i.name] = np.array(trial == 0) if i.type.tensor_type.elem_type == onnx.TensorProto.BOOL else rng.standard_normal(shp).astype(np.float32)
        yield f
def interp(model, out, feed):
    args = [qm, "run", model, "-q", "-o", out]
    for k, (n, a) in enumerate(feed.items()):
        np.save(os.path.join(tmp, f"in{k}.npy"), a)
        args += ["-i", f"{n}={os.path.join(tmp, f'in{k}.npy')}"]
    r = subprocess.run(args, capture_output=True, text=True)
    if r.returncode: fail(f"quantmake run {os.path.basename(model)}: {r.stderr.strip()[-200:]}")
    z = np.load(out)
    return [z[o.name] for o in onnx.load(model).graph.output]
def close(x, y, what):
    for o, p, q in zip(mo.graph.output, x, y):
        p, q = np.asarray(p), np.asarray(q)
        if p.shape != q.shape: fail(f"{what}: output {o.name}: shape {q.shape} vs {p.shape}")
        if not np.allclose(q.astype(np.float64), p.astype(np.float64), rtol=1e-5, atol=1e-6):
            fail(f"{what}: output {o.name}: max diff {np.abs(q.astype(np.float64) - p).max()}")
so = ort.SessionOptions(); so.log_severity_level = 4
so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
sn = ort.InferenceSession(new, so, providers=["CPUExecutionProvider"])
try:
    so_ = ort.InferenceSession(orig, so, providers=["CPUExecutionProvider"])
except Exception:
    so_ = None   # onnxruntime does not load opsets below 7
for feed in feeds():
    a = interp(orig, os.path.join(tmp, "a.npz"), feed)
    close(a, interp(new, os.path.join(tmp, "b.npz"), feed), "interpreter, converted vs original")
    close(so_.run(None, feed) if so_ else a, sn.run(None, feed),
          "onnxruntime, converted vs " + ("onnxruntime" if so_ else "interpreter") + " on the original")
print(f"PASS: {name}: checker, opset {target}, outputs equal (interpreter, onnxruntime)")
EOF
if "$PY" "$TMPD/gen_old.py" "$O/models"; then
	pass "old-opset models built with the onnx helper API"
else
	fail "old-opset models built with the onnx helper API" "gen_old.py failed"
fi
OLD="node/test_upsample_nearest node/test_scatter_with_axis node/test_top_k node/test_unsqueeze_axis_3 node/test_dropout_default_old
pytorch-converted/test_BatchNorm2d_eval pytorch-converted/test_BatchNorm1d_3d_input_eval pytorch-converted/test_GLU
pytorch-converted/test_LogSoftmax pytorch-converted/test_softmax_functional_dim3 pytorch-converted/test_Softmin
pytorch-converted/test_ZeroPad2d pytorch-converted/test_ReflectionPad2d pytorch-converted/test_AvgPool1d
pytorch-converted/test_PixelShuffle pytorch-operator/test_operator_add_broadcast pytorch-operator/test_operator_chunk
pytorch-operator/test_operator_clip pytorch-operator/test_operator_index pytorch-operator/test_operator_reduced_mean
pytorch-operator/test_operator_reduced_sum_keepdim pytorch-operator/test_operator_pad pytorch-operator/test_operator_concat2
pytorch-operator/test_operator_repeat_dim_overflow pytorch-operator/test_operator_addmm"
: > "$O/rules/main.rules"
for t in $OLD; do
	n=${t##*/}
	cp "$TESTDATA/$t/model.onnx" "$O/models/$n.onnx" 2>/dev/null || continue
	for v in 13 17; do
		printf '[model %s_%s]\nsource = models/%s.onnx\npreprocess.opset = %s\n\n' "$n" "$v" "$n" "$v"
	done >> "$O/rules/main.rules"
done
for n in cnn9 ops9 resize10 sub11 bcast6 up10; do
	for v in 13 17; do
		printf '[model %s_%s]\nsource = models/%s.onnx\npreprocess.opset = %s\n\n' "$n" "$v" "$n" "$v"
	done >> "$O/rules/main.rules"
done
# the opset-9 CNN also through every pass, then static per-channel QDQ
"$PY" -c "import numpy as np; np.save('$O/calib.npy', np.random.default_rng(5).standard_normal((16, 3, 8, 8)).astype(np.float32))"
cat >> "$O/rules/main.rules" <<'EOF'
[model cnn9_all]
source = models/cnn9.onnx
preprocess = default
preprocess.opset = 13

[model cnn9_q]
source = @cnn9_all
quantize = static
quantize.per-channel = true
quantize.calibration = calib.npy
EOF
if "$Q" -C "$O" -k > "$TMPD/logo" 2>&1; then
	pass "build with preprocess.opset = 13 and 17"
else
	fail "build with preprocess.opset = 13 and 17" "$(grep -v '^\[' "$TMPD/logo" | tail -3)"
fi
for t in $OLD; do
	n=${t##*/}
	[ -f "$O/models/$n.onnx" ] || { skip "opset upgrade of $n" "not in $TESTDATA"; continue; }
	for v in 13 17; do
		"$PY" "$TMPD/opcheck.py" "$Q" "$O/models/$n.onnx" "$O/build/${n}_$v/${n}_$v.onnx" $v \
			"$TESTDATA/$t/test_data_set_0" "opset upgrade of $n to $v" 2>&1 | tail -1
	done
done
for n in cnn9 ops9 resize10 sub11 bcast6 up10; do
	for v in 13 17; do
		"$PY" "$TMPD/opcheck.py" "$Q" "$O/models/$n.onnx" "$O/build/${n}_$v/${n}_$v.onnx" $v - \
			"opset upgrade of $n to $v" Upsample 2>&1 | tail -1
	done
done
"$PY" "$TMPD/opcheck.py" "$Q" "$O/models/cnn9.onnx" "$O/build/cnn9_all/cnn9_all.onnx" 13 - \
	"opset-9 CNN upgraded and simplified" BatchNormalization,Dropout,Upsample 2>&1 | tail -1
if "$PY" -c '
import sys, json, onnx
m = onnx.load(sys.argv[1]); ops = [n.op_type for n in m.graph.node]
j = json.load(open(sys.argv[2]))
axes = [a.i for n in m.graph.node if n.op_type == "DequantizeLinear" for a in n.attribute if a.name == "axis"]
sys.exit(0 if "QuantizeLinear" in ops and axes and j["opset"] == {"before": 9, "after": 13, "converted": 3}
         and j["passes"]["fuse-bn"]["changed"] == 2 else 1)' "$O/build/cnn9_q/cnn9_q.onnx" "$O/build/cnn9_all/preprocess.json" 2>/dev/null; then
	pass "static per-channel QDQ of the upgraded opset-9 CNN"
else
	fail "static per-channel QDQ of the upgraded opset-9 CNN" "$(grep -i 'error\|cnn9' "$TMPD/logo" | grep -v '^\[' | tail -2)"
fi
grep -q '^preprocess: ops9_13: opset 9 -> 13, [0-9]* nodes converted$' "$TMPD/logo" &&
	pass "the log reports the opset upgrade" || fail "the log reports the opset upgrade" "$(grep 'ops9_13' "$TMPD/logo" | head -2)"

# ---- preprocess.opset: model-local functions ----
# Functions importing the default domain at opset 9 or 11 (attributes turned
# inputs, Softmax-13's rewrite into several nodes, a function calling
# another, an If body in a function; cnn_functions, exported by torch at
# opset 15) go to 13 and 17: the model and every function must import the
# target, pass onnx.checker (full: it checks each body against the target's
# schemas) and give the original's outputs in onnxruntime and in ours
# (`quantmake run` on the models as they are, functions and all).
F=$TMPD/fn
mkdir -p "$F/rules" "$F/models"
cat > "$TMPD/gen_fn.py" <<'EOF'
import sys, numpy as np, onnx
from onnx import helper as h, TensorProto as T, numpy_helper as nh
out = sys.argv[1]
rng = np.random.default_rng(1)
vi = h.make_tensor_value_info
def model(name, fn, opset, nodes, ins, outs, inits=(), check=True):
    g = h.make_graph(nodes, name, ins, outs, list(inits))
    m = h.make_model(g, opset_imports=[h.make_opsetid("", opset), h.make_opsetid("local", 1)], functions=fn)
    m.ir_version = 8
    if check:
        onnx.checker.check_model(m, full_check=True)
    onnx.save(m, f"{out}/{name}.onnx")
# opset 9: attributes that became inputs (Unsqueeze/Squeeze axes, Slice,
# ReduceSum axes, Split split, TopK k) inside a function called twice
blk9 = h.make_function("local", "Block9", ["X", "W"], ["Y"], [
    h.make_node("Unsqueeze", ["X"], ["u"], axes=[0], name="unsq"),
    h.make_node("ReduceSum", ["u"], ["r"], axes=[0], keepdims=0, name="rsum"),
    h.make_node("Slice", ["r"], ["s"], starts=[0], ends=[6], axes=[1], name="slice"),
    h.make_node("Add", ["s", "W"], ["a"], name="add"),
    h.make_node("Split", ["a"], ["p", "q"], axis=1, split=[2, 4], name="split"),
    h.make_node("TopK", ["q"], ["tv", "ti"], axis=1, k=2, name="topk"),
    h.make_node("Concat", ["p", "tv"], ["c"], axis=1, name="cat"),
    h.make_node("Relu", ["c"], ["Y"], name="relu"),
], [h.make_opsetid("", 9)])
model("fn9", [blk9], 9, [
    h.make_node("Block9", ["x", "w"], ["h"], domain="local", name="call1"),
    h.make_node("Mul", ["h", "h"], ["sq"], name="sq"),
    h.make_node("Concat", ["h", "sq"], ["hh"], axis=1, name="cat"),
    h.make_node("Block9", ["hh", "w2"], ["y"], domain="local", name="call2"),
], [vi("x", T.FLOAT, [2, 8])], [vi("y", T.FLOAT, [2, 4])],
    [nh.from_array(rng.standard_normal((2, 6)).astype(np.float32), "w"),
     nh.from_array(rng.standard_normal((2, 6)).astype(np.float32), "w2")])
# opset 11 (ReduceSum-13 and Squeeze/Unsqueeze-13 axes, Split-13), a
# function using another, an If body inside a function
inner = h.make_function("local", "Inner", ["A"], ["B"], [
    h.make_node("Unsqueeze", ["A"], ["ua"], axes=[2], name="in_unsq"),
    h.make_node("ReduceSum", ["ua"], ["B"], axes=[2], keepdims=0, name="in_rsum"),
], [h.make_opsetid("", 11)])
then_g = h.make_graph([h.make_node("Squeeze", ["e"], ["t"], axes=[0], name="then_sq")], "then", [],
                      [vi("t", T.FLOAT, None)])
else_g = h.make_graph([h.make_node("ReduceMax", ["e"], ["t2"], axes=[0], keepdims=0, name="else_max")], "else", [],
                      [vi("t2", T.FLOAT, None)])
outer = h.make_function("local", "Outer", ["X", "C"], ["Y"], [
    h.make_node("Inner", ["X"], ["i"], domain="local", name="call_inner"),
    h.make_node("Unsqueeze", ["i"], ["e"], axes=[0], name="out_unsq"),
    h.make_node("If", ["C"], ["f"], then_branch=then_g, else_branch=else_g, name="if"),
    h.make_node("Split", ["f"], ["y1", "y2"], axis=1, split=[3, 5], name="out_split"),
    h.make_node("Concat", ["y2", "y1"], ["Y"], axis=1, name="out_cat"),
], [h.make_opsetid("", 11), h.make_opsetid("local", 1)])
model("fn11", [inner, outer], 11, [
    h.make_node("Outer", ["x", "c"], ["y"], domain="local", name="call"),
], [vi("x", T.FLOAT, [2, 8]), vi("c", T.BOOL, [])], [vi("y", T.FLOAT, [2, 8])])
# refused: a step that needs an attribute the caller gives (ref_attr_name)
ax = h.make_attribute_ref("axes", onnx.AttributeProto.INTS)
ref = h.make_function("local", "RefAxes", ["X"], ["Y"], [
    h.make_node("Unsqueeze", ["X"], ["u"], name="ref_unsq"),
    h.make_node("Relu", ["u"], ["Y"], name="ref_relu"),
], [h.make_opsetid("", 11)], attributes=["axes"])
ref.node[0].attribute.append(ax)
model("fnref", [ref], 11, [h.make_node("RefAxes", ["x"], ["y"], domain="local", name="call", axes=[0])],
      [vi("x", T.FLOAT, [2, 3])], [vi("y", T.FLOAT, [1, 2, 3])])
# refused: Softmax-13 on an axis that is not the last needs the input's rank,
# which a function body does not declare
soft = h.make_function("local", "Soft", ["X"], ["Y"], [h.make_node("Softmax", ["X"], ["Y"], axis=1, name="fsoft")],
                       [h.make_opsetid("", 11)])
model("fnsoft", [soft], 11, [h.make_node("Soft", ["x"], ["y"], domain="local", name="call")],
      [vi("x", T.FLOAT, [2, 3, 4])], [vi("y", T.FLOAT, [2, 3, 4])])
# refused: Clip-11 turns min/max into inputs of the input's type, which a
# function body does not declare
clamp = h.make_function("local", "Clamp", ["X"], ["Y"], [h.make_node("Clip", ["X"], ["Y"], min=0.0, max=1.0, name="fclip")],
                        [h.make_opsetid("", 9)])
model("fnclip", [clamp], 9, [h.make_node("Clamp", ["x"], ["y"], domain="local", name="call")],
      [vi("x", T.FLOAT, [2, 3])], [vi("y", T.FLOAT, [2, 3])])
EOF
cat > "$TMPD/fncheck.py" <<'EOF'
import sys, os, subprocess, numpy as np, onnx, onnxruntime as ort
# fncheck.py QUANTMAKE ORIGINAL CONVERTED TARGET NAME
qm, orig, new, target, name = sys.argv[1:6]
def fail(why):
    print(f"FAIL: {name}: {why}"); sys.exit(0)
if not os.path.exists(new): fail(f"{new} was not built")
mo, mn = onnx.load(orig), onnx.load(new)
try:
    onnx.checker.check_model(mn, full_check=True)
except Exception as e:
    fail(f"onnx.checker: {str(e).splitlines()[0]}")
dflt = lambda imps: [o.version for o in imps if o.domain in ("", "ai.onnx")]
if dflt(mn.opset_import) != [int(target)]: fail(f"model opset {dflt(mn.opset_import)}, expected {target}")
for f in mn.functions:
    if dflt(f.opset_import) != [int(target)]: fail(f"function {f.name}: opset {dflt(f.opset_import)}, expected {target}")
if len(mn.functions) != len(mo.functions): fail("functions were dropped")
tmp = os.path.dirname(new)
rng = np.random.default_rng(4)
ins = [i for i in mo.graph.input if i.name not in {t.name for t in mo.graph.initializer}]
def feeds():
    for trial in range(2):
        yield {i.name: np.array(trial == 0) if i.type.tensor_type.elem_type == onnx.TensorProto.BOOL else
               rng.standard_normal([d.dim_value if d.HasField("dim_value") else 2 for d in i.type.tensor_type.shape.dim]).astype(np.float32) for i in ins}
def interp(model, out, feed):
    args = [qm, "run", model, "-q", "-o", out]
    for k, (n, a) in enumerate(feed.items()):
        np.save(os.path.join(tmp, f"in{k}.npy"), a)
        args += ["-i", f"{n}={os.path.join(tmp, f'in{k}.npy')}"]
    r = subprocess.run(args, capture_output=True, text=True)
    if r.returncode: fail(f"quantmake run {os.path.basename(model)}: {r.stderr.strip()[-200:]}")
    z = np.load(out)
    return [z[o.name] for o in mo.graph.output]
def close(x, y, what):
    for o, p, q in zip(mo.graph.output, x, y):
        p, q = np.asarray(p, np.float64), np.asarray(q, np.float64)
        if p.shape != q.shape: fail(f"{what}: output {o.name}: shape {q.shape} vs {p.shape}")
        if not np.allclose(q, p, rtol=1e-5, atol=1e-6): fail(f"{what}: output {o.name}: max diff {np.abs(q - p).max()}")
so = ort.SessionOptions(); so.log_severity_level = 4
so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
sa = ort.InferenceSession(orig, so, providers=["CPUExecutionProvider"])
sb = ort.InferenceSession(new, so, providers=["CPUExecutionProvider"])
for feed in feeds():
    a = sa.run(None, feed)
    close(a, sb.run(None, feed), "onnxruntime, converted vs original")
    ia = interp(orig, os.path.join(tmp, "a.npz"), feed)
    close(a, ia, "interpreter vs onnxruntime on the original")
    close(ia, interp(new, os.path.join(tmp, "b.npz"), feed), "interpreter, converted vs original")
print(f"PASS: {name}: checker, opset {target} in the model and its functions, outputs equal (onnxruntime, interpreter)")
EOF
if "$PY" "$TMPD/gen_fn.py" "$F/models"; then
	pass "models with local functions built with the onnx helper API"
else
	fail "models with local functions built with the onnx helper API" "gen_fn.py failed"
fi
cp "$ROOT/tests/models/cnn_functions.onnx" "$F/models/"
for m in fn9:13 fn9:17 fn11:13 fn11:17 fnsoft:13 fnsoft:17 cnn_functions:17; do
	printf '[model %s_%s]\nsource = models/%s.onnx\npreprocess.opset = %s\n\n' "${m%:*}" "${m#*:}" "${m%:*}" "${m#*:}"
done > "$F/rules/main.rules"
if "$Q" -C "$F" -k > "$TMPD/logf" 2>&1; then
	pass "build with preprocess.opset on models with local functions"
else
	fail "build with preprocess.opset on models with local functions" "$(grep -v '^\[' "$TMPD/logf" | tail -3)"
fi
for m in fn9:13 fn9:17 fn11:13 fn11:17 fnsoft:13 fnsoft:17 cnn_functions:17; do
	n=${m%:*} v=${m#*:}
	"$PY" "$TMPD/fncheck.py" "$Q" "$F/models/$n.onnx" "$F/build/${n}_$v/${n}_$v.onnx" $v \
		"opset upgrade of $n (local functions) to $v" 2>&1 | tail -1
done
grep -q '^preprocess: fn9_13: opset 9 -> 13, 5 nodes converted$' "$TMPD/logf" &&
	pass "function body nodes are counted as converted" ||
	fail "function body nodes are counted as converted" "$(grep 'fn9_13' "$TMPD/logf" | head -2)"

# ---- preprocess.opset: what cannot be converted ----
cp "$P/models/convbn.onnx" "$E/models/"
cp "$TESTDATA/node/test_resize_downsample_sizes_nearest_tf_half_pixel_for_nn/model.onnx" "$E/models/tfnn.onnx"
cp "$TESTDATA/node/test_scan_sum/model.onnx" "$E/models/scan8.onnx"
printf '[model x]\nsource = models/convbn.onnx\npreprocess.opset = 11\n' > "$E/rules/main.rules"
expect_err "preprocess.opset refuses downgrades" 1 \
	"preprocess.opset = 11: the model has opset 13; downgrades are not supported" "$Q" -C "$E"
printf '[model x]\nsource = models/tfnn.onnx\ninfer-shapes = off\npreprocess.opset = 13\n' > "$E/rules/main.rules"
expect_err "preprocess.opset names the operator it cannot convert" 1 \
	"preprocess.opset = 13: operator Resize \\(node '.*'\\) cannot be converted from opset 11: coordinate_transformation_mode tf_half_pixel_for_nn was removed at opset 13" "$Q" -C "$E"
printf '[model x]\nsource = models/scan8.onnx\npreprocess.opset = 11\n' > "$E/rules/main.rules"
expect_err "preprocess.opset refuses a step it has no adapter for" 1 \
	"preprocess.opset = 11: operator Scan \\(node '.*'\\) cannot be converted from opset 8: its attributes, inputs or outputs changed at opset 9 and quantmake has no adapter for it" "$Q" -C "$E"
cp "$F/models/fnref.onnx" "$F/models/fnclip.onnx" "$E/models/"
printf '[model x]\nsource = models/fnref.onnx\npreprocess.opset = 13\n' > "$E/rules/main.rules"
expect_err "preprocess.opset names the function, node and operator it cannot convert (caller's attribute)" 1 \
	"preprocess.opset = 13: model-local function 'RefAxes': operator Unsqueeze \\(node 'ref_unsq'\\) cannot be converted from opset 11: its attribute 'axes' refers to the function's attribute 'axes', whose value the step to opset 13 needs" "$Q" -C "$E"
[ ! -e "$E/build/x/x.onnx" ] && pass "nothing written for a refused function" || fail "nothing written for a refused function" "$E/build/x/x.onnx exists"
printf '[model x]\nsource = models/fnclip.onnx\npreprocess.opset = 17\n' > "$E/rules/main.rules"
expect_err "preprocess.opset names the function, node and operator it cannot convert (type)" 1 \
	"preprocess.opset = 17: model-local function 'Clamp': operator Clip \\(node 'fclip'\\) cannot be converted from opset 9: its input 'X' has type unknown \\(a function body declares no types\\), expected float, double or float16 for a 'min' attribute" "$Q" -C "$E"
[ ! -e "$E/build/x/x.onnx" ] && pass "nothing written for a refused upgrade" || fail "nothing written for a refused upgrade" "$E/build/x/x.onnx exists"
printf '[model x]\nsource = models/convbn.onnx\npreprocess.opset = 99\n' > "$E/rules/main.rules"
expect_err "preprocess.opset out of range is a rule error" 2 \
	"rules/main.rules:3: .*preprocess.opset = '99' is not valid: expected an opset from 7 to 23" "$Q" -C "$E"

# ---- static quantization of a BatchNorm CNN is more accurate after preprocess ----
# Trained convolutions leave per-channel output scales that the following
# BatchNormalization normalizes away; quantizing that unnormalized output with
# one scale per tensor loses the small channels. Folded into the convolution
# the normalization happens before any rounding.
A=$TMPD/bnacc
mkdir -p "$A/rules"
cat > "$A/mk.py" <<'PYEOF'
import sys
import numpy as np, onnx
from onnx import helper as h, numpy_helper as nh, TensorProto as T
d = sys.argv[1]
rng = np.random.default_rng(0)
def f(*s): return rng.standard_normal(s).astype(np.float32)
def init(n, a): return nh.from_array(np.asarray(a, np.float32), n)
inits, nodes, x, c = [], [], "x", 3
for i, co in enumerate([16, 32, 32]):
    sd = 10 ** rng.uniform(-1.5, 1.5, co)
    inits += [init(f"w{i}", f(co, c, 3, 3) * 0.3 * sd[:, None, None, None]), init(f"b{i}", f(co) * 0.1),
              init(f"s{i}", rng.random(co) * 1.5 + 0.2), init(f"bb{i}", f(co)), init(f"m{i}", f(co) * sd),
              init(f"v{i}", (sd * 2) ** 2)]
    nodes += [h.make_node("Conv", [x, f"w{i}", f"b{i}"], [f"c{i}"], pads=[1, 1, 1, 1]),
              h.make_node("BatchNormalization", [f"c{i}", f"s{i}", f"bb{i}", f"m{i}", f"v{i}"], [f"n{i}"]),
              h.make_node("Relu", [f"n{i}"], [f"r{i}"])]
    x, c = f"r{i}", co
nodes += [h.make_node("GlobalAveragePool", [x], ["g"]), h.make_node("Flatten", ["g"], ["fl"]),
          h.make_node("Gemm", ["fl", "gw", "gb"], ["y"], transB=1)]
inits += [init("gw", f(10, c)), init("gb", f(10))]
g = h.make_graph(nodes, "bncnn", [h.make_tensor_value_info("x", T.FLOAT, ["N", 3, 16, 16])],
                 [h.make_tensor_value_info("y", T.FLOAT, ["N", 10])], inits)
m = h.make_model(g, opset_imports=[h.make_opsetid("", 13)])
m.ir_version = 7
onnx.checker.check_model(m)
onnx.save(m, f"{d}/bn.onnx")
np.save(f"{d}/calib.npy", rng.standard_normal((32, 3, 16, 16)).astype(np.float32))
np.save(f"{d}/held.npy", rng.standard_normal((64, 3, 16, 16)).astype(np.float32))
PYEOF
"$PY" "$A/mk.py" "$A"
cat > "$A/rules/a.rules" <<'EOF'
[model raw]
source = bn.onnx
quantize = static
quantize.per-channel = true
quantize.calibration = calib.npy
verify.data = held.npy
verify.min-sqnr = off

[model pre : raw]
preprocess = default
EOF
"$Q" -C "$A" > "$TMPD/bnlog" 2>&1
sq() { "$PY" -c 'import json, sys; print(json.load(open(sys.argv[1]))["outputs"][0]["sqnr_db"])' "$1" 2>/dev/null; }
s_raw=$(sq "$A/build/raw/verify.json")
s_pre=$(sq "$A/build/pre/verify.json")
if [ -n "$s_raw" ] && [ -n "$s_pre" ] && "$PY" -c "import sys; sys.exit(0 if $s_pre > $s_raw + 6 else 1)"; then
	pass "static int8 of a BatchNorm CNN is more accurate after preprocess (SQNR $s_pre dB against $s_raw dB)"
else
	fail "static int8 of a BatchNorm CNN is more accurate after preprocess" "with: ${s_pre:-none} dB, without: ${s_raw:-none} dB; $(grep -v '^\[' "$TMPD/bnlog" | tail -3)"
fi
