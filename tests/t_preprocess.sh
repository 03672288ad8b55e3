#!/bin/sh
# The preprocess stage in temporary projects: models built with the onnx
# helper API (Conv/Gemm + BatchNormalization, Identity/Dropout chains,
# constant subgraphs, duplicate initializers, Transpose pairs, If branches,
# random ops) and examples/digits go through `quantmake` with
# `preprocess = default`; each result must pass onnx.checker (full check),
# have fewer nodes (or initializers, for dedup), keep its graph inputs and
# outputs, and give onnxruntime's outputs of the original on random inputs
# (rtol 1e-5, atol 1e-5). preprocess.json and the log carry the counts; bad
# pass names and fold limits are errors with file:line.
. "$(dirname "$0")/lib/common.sh"
mktmp
Q=$QUANTMAKE
if ! "$PY" -c 'import onnx, onnxruntime, numpy' 2>/dev/null; then
	skip preprocess "no python oracles in $PY (scripts/venv.sh)"
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

MODELS="convbn identity constant dedup transpose subgraph random shapes cse affine"
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

# ---- bad input ----
E=$TMPD/e
mkdir -p "$E/rules" && cp -r "$P/models" "$E/"
printf '[model x]\nsource = models/dedup.onnx\npreprocess = fold, fodl\n' > "$E/rules/main.rules"
expect_err "unknown pass names file:line and lists the passes" 2 \
	"rules/main.rules:3: model 'x': preprocess: unknown pass 'fodl': expected default or a list of identity, shape, fold, fuse-bn, conv-affine, transpose, matmul-add, dedup, cse, dce" "$Q" -C "$E"
printf '[model x]\nsource = models/dedup.onnx\npreprocess = dce, dce\n' > "$E/rules/main.rules"
expect_err "a pass listed twice" 2 "rules/main.rules:3: .*pass 'dce' is listed twice" "$Q" -C "$E"
printf '[model x]\nsource = models/dedup.onnx\npreprocess.fold-limit = 1M\n' > "$E/rules/main.rules"
expect_err "fold-limit without preprocess" 2 "rules/main.rules:3: model 'x' sets preprocess.fold-limit but not preprocess" "$Q" -C "$E"
printf '[model x]\nsource = models/dedup.onnx\npreprocess = default\npreprocess.fold-limit = lots\n' > "$E/rules/main.rules"
expect_err "bad fold-limit" 2 "rules/main.rules:4: model 'x': preprocess.fold-limit = 'lots' is not valid" "$Q" -C "$E"
