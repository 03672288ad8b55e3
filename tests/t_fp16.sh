#!/bin/sh
# quantize = fp16 in temporary projects: the digits MLP (examples/digits),
# the CNN of tests/models and a model with ops that must stay float32
# (Resize, TopK, Range), an If with float subgraphs, Constant,
# ConstantOfShape and Cast, and weights beyond float16's range. Every result
# passes onnx.checker, runs in onnxruntime (CPU) and in our interpreter
# close to the float model; keep-io-types, exclude-nodes, the block list,
# clamping, sizes, quant.json and the verify stage are checked; bad input is
# one clear error. silero-vad (If bodies, LSTM) when bench/fetch-models.sh
# has fetched it.
. "$(dirname "$0")/lib/common.sh"
mktmp
Q=$QUANTMAKE
EX=$ROOT/examples/digits
if ! "$PY" -c 'import onnx, onnxruntime, numpy' 2>/dev/null; then
	fail "fp16 tests" "$PY lacks onnx/onnxruntime (run scripts/venv.sh)"
	exit 0
fi

P=$TMPD/p
mkdir -p "$P/rules"
cp "$EX/export.py" "$EX/weights.npz" "$EX/test.npz" "$P/"
cp "$ROOT/tests/models/cnn.onnx" "$P/"
"$PY" "$P/export.py" "$P/weights.npz" "$P/digits.onnx"
cat > "$P/mkblock.py" <<'EOF'
"""Ops fp16 keeps float32 (Resize, TopK, Range), an If with float bodies,
Constant/ConstantOfShape/Cast, and weights beyond float16's range (1e5,
-7e4) or below its smallest subnormal (3e-9): python mkblock.py OUT.onnx"""
import sys
import numpy as np
import onnx
from onnx import TensorProto as T, helper as h, numpy_helper as nh
r = np.random.default_rng(1)
big = np.full((8,), 0.5, np.float32)
big[0], big[1], big[2] = 1e5, -7e4, 3e-9
inits = [nh.from_array(a, n) for n, a in [
    ("w", (r.standard_normal((8, 8)) * 0.3).astype(np.float32)), ("big", big),
    ("scales", np.array([1, 1, 2, 2], np.float32)), ("k", np.array([3], np.int64)),
    ("limit", np.array(5.5, np.float32)), ("delta", np.array(0.5, np.float32)),
    ("shape4", np.array([1, 1, 2, 4], np.int64))]]
then = h.make_graph([h.make_node("Mul", ["y1", "two"], ["t_out"], name="then_mul")], "then", [],
                    [h.make_tensor_value_info("t_out", T.FLOAT, None)],
                    [nh.from_array(np.array(2, np.float32), "two")])
els = h.make_graph([h.make_node("Neg", ["y1"], ["e_out"], name="else_neg")], "else", [],
                   [h.make_tensor_value_info("e_out", T.FLOAT, None)])
nodes = [
    h.make_node("MatMul", ["x", "w"], ["y0"], name="mm"),
    h.make_node("Add", ["y0", "big"], ["y1"], name="add_big"),
    h.make_node("ReduceSum", ["y1"], ["s"], name="sum", keepdims=0),
    h.make_node("Constant", [], ["zero"], name="zero", value_float=0.0),
    h.make_node("Greater", ["s", "zero"], ["cond"], name="gt"),
    h.make_node("If", ["cond"], ["y2"], name="branch", then_branch=then, else_branch=els),
    h.make_node("Sigmoid", ["y2"], ["y3"], name="sig"),
    h.make_node("Reshape", ["y3", "shape4"], ["img"], name="to_img"),
    h.make_node("Resize", ["img", "", "scales"], ["up"], name="resize", mode="nearest"),
    h.make_node("Relu", ["up"], ["up1"], name="relu"),
    h.make_node("Flatten", ["up1"], ["flat"], name="flat", axis=1),
    h.make_node("TopK", ["flat", "k"], ["top", "idx"], name="topk"),
    h.make_node("Shape", ["x"], ["xs"], name="xshape"),
    h.make_node("ConstantOfShape", ["xs"], ["ones"], name="cos",
                value=nh.from_array(np.array([1.5], np.float32))),
    h.make_node("Cast", ["idx"], ["idxf"], name="idx_float", to=T.FLOAT),
    h.make_node("Range", ["zero", "limit", "delta"], ["rng"], name="range"),
    h.make_node("ReduceSum", ["rng"], ["rs"], name="rsum", keepdims=1),
    h.make_node("Mul", ["ones", "rs"], ["scaled"], name="scale"),
]
g = h.make_graph(nodes, "block", [h.make_tensor_value_info("x", T.FLOAT, [1, 8])],
                 [h.make_tensor_value_info("top", T.FLOAT, [1, 3]),
                  h.make_tensor_value_info("idxf", T.FLOAT, [1, 3]),
                  h.make_tensor_value_info("scaled", T.FLOAT, [1, 8])], inits)
m = h.make_model(g, opset_imports=[h.make_opsetid("", 13)])
m.ir_version = 7
onnx.checker.check_model(m)
onnx.save(m, sys.argv[1])
EOF
"$PY" "$P/mkblock.py" "$P/block.onnx"
# Range written as a Loop whose body adds float deltas (ONNX's expanded test)
cp "$TESTDATA/node/test_range_float_type_positive_delta_expanded/model.onnx" "$P/loop.onnx"
SIL=$ROOT/tests/.cache/models/silero_vad.onnx
[ -f "$SIL" ] && cp "$SIL" "$P/silero.onnx"
cat > "$P/rules/m.rules" <<EOF
[model mlp]
source = digits.onnx
quantize = fp16

[model mlp-io]
source = digits.onnx
quantize = fp16
quantize.keep-io-types = true
verify.data = random
verify.min-sqnr = 40

[model mlp-half-io]
source = digits.onnx
quantize = fp16
verify.data = random
verify.min-sqnr = 40

[model mlp-ex]
source = digits.onnx
quantize = fp16
quantize.exclude-nodes = fc2

[model cnn]
source = cnn.onnx
quantize = fp16
quantize.target = gpu

[model blk]
source = block.onnx
quantize = fp16

[model blk-ex]
source = block.onnx
quantize = fp16
quantize.exclude-nodes = branch

[model loop]
source = loop.onnx
quantize = fp16
EOF
[ -f "$P/silero.onnx" ] && printf '\n[model silero]\nsource = silero.onnx\nquantize = fp16\nquantize.keep-io-types = true\n' >> "$P/rules/m.rules"
"$Q" -C "$P" -j2 > "$TMPD/log1" 2>&1
st=$?
[ $st -eq 0 ] && pass "fp16 builds succeed" || fail "fp16 builds succeed" "status $st: $(grep 'quantmake:' "$TMPD/log1" | head -5)"
B=$P/build

# ---- every model: checker, onnxruntime and our interpreter vs the float model ----
cat > "$TMPD/eval.py" <<'EOF'
import json, subprocess, sys, numpy as np, onnx, onnxruntime as ort
from onnx import numpy_helper as nh
B, P, TMP, Q = sys.argv[1:5]
ort.set_default_logger_severity(3)
rng = np.random.default_rng(0)
digits = np.load(P + "/test.npz")["input"][:64]
cases = {
    "mlp": ("digits.onnx", {"input": digits}),
    "mlp-io": ("digits.onnx", {"input": digits}),
    "mlp-ex": ("digits.onnx", {"input": digits}),
    "cnn": ("cnn.onnx", {"image": rng.standard_normal((8, 1, 16, 16)).astype(np.float32)}),
    "blk": ("block.onnx", {"x": rng.standard_normal((1, 8)).astype(np.float32)}),
    "blk-ex": ("block.onnx", {"x": rng.standard_normal((1, 8)).astype(np.float32)}),
    "loop": ("loop.onnx", {"start": np.array(1, np.float32), "limit": np.array(5, np.float32),
                           "delta": np.array(2, np.float32)}),
    "silero": ("silero.onnx", {"input": (rng.standard_normal((1, 512)) * 0.1).astype(np.float32),
                               "state": np.zeros((2, 1, 128), np.float32), "sr": np.array(16000, np.int64)}),
}
def sqnr(a, b):
    a = a.astype(np.float64); b = b.astype(np.float64)
    e = ((a - b) ** 2).sum()
    return 200.0 if e == 0 else 10 * np.log10((a ** 2).sum() / e)
def say(ok, name, why=""):
    print(("PASS: " if ok else "FAIL: ") + name + ("" if ok else ": " + why))
for name, (src, feed) in cases.items():
    try:
        path = "%s/%s/%s.onnx" % (B, name, name)
        m = onnx.load(path)
    except Exception:
        if name != "silero":
            say(False, name + ": model built", "no " + name)
        continue
    try:
        onnx.checker.check_model(m, full_check=True)
        say(True, name + ": onnx.checker")
    except Exception as e:
        say(False, name + ": onnx.checker", str(e)[:200])
    ref = ort.InferenceSession(P + "/" + src).run(None, feed)
    s = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    f16 = {i.name: (feed[i.name].astype(np.float16) if i.type == "tensor(float16)" else feed[i.name])
           for i in s.get_inputs()}
    got = s.run(None, f16)
    worst = min(sqnr(a, b) for a, b in zip(ref, got))
    # float16 keeps 11 significant bits: about 60 dB on one value, less
    # through a deep network; the block model's If branch and TopK ties
    # follow clamped weights, so it is compared exactly only where defined
    say(worst > 35 or name.startswith("blk"), name + ": onnxruntime matches the float model (%.1f dB)" % worst,
        "SQNR %.1f dB" % worst)
    np.savez(TMP + "/in_%s.npz" % name, **f16)
    out = TMP + "/out_%s.npz" % name
    r = subprocess.run([Q, "run", path, "-i", TMP + "/in_%s.npz" % name, "-o", out], capture_output=True, text=True)
    if r.returncode:
        say(False, name + ": our interpreter runs it", r.stderr.strip()[:300])
        continue
    mine = np.load(out)
    names = [o.name for o in s.get_outputs()]
    w2 = min(sqnr(g.astype(np.float32), mine[n].astype(np.float32)) for g, n in zip(got, names))
    say(w2 > 40, name + ": our interpreter matches onnxruntime on the fp16 model (%.1f dB)" % w2, "SQNR %.1f dB" % w2)
EOF
"$PY" "$TMPD/eval.py" "$B" "$P" "$TMPD" "$Q" 2>&1 | grep -E '^(PASS|FAIL|SKIP):' || fail "eval.py ran"

# ---- model structure: io types, block list, casts, clamping, sizes, quant.json ----
cat > "$TMPD/layout.py" <<'EOF'
import json, sys, numpy as np, onnx
from onnx import numpy_helper as nh
B = sys.argv[1]
def say(ok, name, why=""):
    print(("PASS: " if ok else "FAIL: ") + name + ("" if ok else ": " + why))
def load(n):
    return onnx.load("%s/%s/%s.onnx" % (B, n, n)), json.load(open("%s/%s/quant.json" % (B, n)))
io = lambda m: [v.type.tensor_type.elem_type for v in list(m.graph.input) + list(m.graph.output)]
m, q = load("mlp")
say(io(m) == [10, 10], "io types float16 by default", str(io(m)))
say(all(t.data_type == 10 for t in m.graph.initializer), "weights are float16",
    str([(t.name, t.data_type) for t in m.graph.initializer]))
say(q["nodes_quantized"] == len(q["nodes"]) == 5 and all(n["status"] == "float16" for n in q["nodes"]),
    "quant.json lists every node converted", str(q["nodes"]))
say(q["size_after"] < 0.6 * q["size_before"], "size roughly halved (%d -> %d)" % (q["size_before"], q["size_after"]))
say(q["mode"] == "fp16" and q["keep_io_types"] is False, "quant.json mode and keep_io_types")
m, q = load("mlp-io")
say(io(m) == [1, 1], "keep-io-types keeps float32 inputs and outputs", str(io(m)))
casts = [n for n in m.graph.node if n.op_type == "Cast"]
say(len(casts) == 2 and casts[0].input[0] == "input" and m.graph.node[-1].op_type == "Cast"
    and m.graph.node[-1].output[0] == "logits", "keep-io-types: one Cast in, one Cast out",
    str([(n.input, n.output) for n in casts]))
m, q = load("mlp-ex")
st = {n["name"]: n for n in q["nodes"]}
say(st["fc2"]["status"] == "float32" and "exclude-nodes" in st["fc2"].get("reason", "")
    and st["fc1"]["status"] == "float16", "exclude-nodes keeps the node float32 with the reason", str(st["fc2"]))
w2 = [t for t in m.graph.initializer if t.name == "w2"][0]
say(w2.data_type == 1, "an excluded node's weight stays float32", "w2 type %d" % w2.data_type)
m, q = load("cnn")
say(q["target"] == "gpu" and q["nodes_quantized"] > 0, "target = gpu is allowed with fp16")
m, q = load("blk")
st = {n["name"]: n for n in q["nodes"]}
kept = {k for k, v in st.items() if v["status"] == "float32"}
say(kept == {"resize", "topk", "range"}, "Resize, TopK and Range are kept float32", str(kept))
say(all(st[k].get("reason") for k in kept), "kept nodes carry a reason")
say(st["then_mul"]["status"] == "float16" and st["else_neg"]["status"] == "float16", "If bodies are converted")
prod = {o: n for n in m.graph.node for o in n.output}
nodes = {n.name: n for n in m.graph.node}
rs = nodes["resize"]
say(prod[rs.input[0]].op_type == "Cast" and rs.input[2] == "scales" and
    [t for t in m.graph.initializer if t.name == "scales"][0].data_type == 1,
    "Resize reads a Cast to float32 and its float32 scales", str(list(rs.input)))
src = {}
for n in m.graph.node:
    if n.op_type == "Cast":
        src.setdefault((n.input[0], n.attribute[0].i), []).append(n.name)
say(all(len(v) == 1 for v in src.values()), "one Cast per tensor and type", str(src))
m2, q2 = load("blk-ex")
st2 = {n["name"]: n for n in q2["nodes"]}
say(st2["branch"]["status"] == "float32" and st2["then_mul"]["status"] == "float32"
    and "inside the body" in st2["then_mul"].get("reason", ""), "an excluded If keeps its bodies float32",
    str(st2["then_mul"]))
br = [n for n in m2.graph.node if n.name == "branch"][0]
two = [t for a in br.attribute if a.name == "then_branch" for t in a.g.initializer][0]
sig = [n for n in m2.graph.node if n.name == "sig"][0]
cast = [n for n in m2.graph.node if sig.input[0] in n.output][0]
say(two.data_type == 1 and cast.op_type == "Cast" and cast.input[0] == "y2",
    "its body keeps float32 constants, float16 readers read a Cast", "%d %s" % (two.data_type, cast))
m3, q3 = load("loop")
body = [a.g for n in m3.graph.node if n.op_type == "Loop" for a in n.attribute if a.name == "body"]
vi = [v.type.tensor_type.elem_type for v in list(body[0].value_info) + list(body[0].output)] if body else []
say(10 in vi and 1 not in vi, "a Loop body is converted with its node", str(vi))
say(nodes["idx_float"].attribute[0].i == 10, "Cast to float becomes Cast to float16")
cos = nh.to_array(nodes["cos"].attribute[0].t)
say(cos.dtype == np.float16 and cos[0] == 1.5, "ConstantOfShape value is float16", str(cos.dtype))
big = nh.to_array([t for t in m.graph.initializer if t.name == "big"][0])
say(big.dtype == np.float16 and big[0] == 65504 and big[1] == -65504 and big[2] == np.float16(2 ** -24),
    "out-of-range weights clamped to +-65504, tiny ones raised to 2^-24", str(big[:3]))
say(q["tensors"].get("big") == {"type": "float16", "clamped": 2, "raised": 1}, "quant.json counts clamped values",
    str(q["tensors"]))
EOF
"$PY" "$TMPD/layout.py" "$B" 2>&1 | tee "$TMPD/layout.log" | grep -E '^(PASS|FAIL):' || fail "layout.py ran"

# ---- verify stage on an fp16 model ----
if [ -f "$B/mlp-half-io/verify.json" ] && grep -q '"passed": true' "$B/mlp-half-io/verify.json"; then
	pass "verify feeds float32 samples rounded to float16 to a model with float16 inputs"
else
	fail "verify feeds float32 samples rounded to float16 to a model with float16 inputs" "$(grep -i 'half-io' "$TMPD/log1" | head -5)"
fi
if grep -q "^\[[0-9]*/[0-9]*\] verify mlp-io" "$TMPD/log1" && [ -f "$B/mlp-io/verify.json" ]; then
	pass "verify with random data and min-sqnr passes on an fp16 model"
else
	fail "verify with random data and min-sqnr passes on an fp16 model" "$(grep -i 'verify' "$TMPD/log1" | head -3)"
fi

# ---- bad input ----
B2=$TMPD/b
mkdir -p "$B2/rules"
cp "$B/mlp/mlp.onnx" "$B2/half.onnx"
"$PY" -c "
import onnx
from onnx import TensorProto as T, helper as h
g = h.make_graph([h.make_node('Add', ['a', 'a'], ['b'], name='add')], 'ints',
                 [h.make_tensor_value_info('a', T.INT64, [2])], [h.make_tensor_value_info('b', T.INT64, [2])])
onnx.save(h.make_model(g, opset_imports=[h.make_opsetid('', 13)]), '$B2/ints.onnx')
"
cp "$P/digits.onnx" "$B2/"
bad() { # bad NAME RULES PATTERN
	printf '%s\n' "$2" > "$B2/rules/m.rules"
	rm -rf "$B2/build"
	expect_err "$1" 1 "$3" "$Q" -C "$B2"
	[ -e "$B2/build/x/x.onnx" ] && fail "$1: no model written" || pass "$1: no model written"
}
bad "already float16 model refused" "$(printf '[model x]\nsource = half.onnx\nquantize = fp16')" \
	"no float32 tensors to convert: it is already float16"
bad "model without float refused" "$(printf '[model x]\nsource = ints.onnx\nquantize = fp16')" \
	"no float32 tensors to convert"
bad "unknown exclude-nodes name refused" \
	"$(printf '[model x]\nsource = digits.onnx\nquantize = fp16\nquantize.exclude-nodes = nope')" \
	"exclude-nodes: the model has no node named 'nope'"
bad "every node excluded refused" \
	"$(printf '[model x]\nsource = digits.onnx\nquantize = fp16\nquantize.exclude-ops = MatMul Add Relu')" \
	"no node was converted to float16"
printf '[model x]\nsource = digits.onnx\nquantize = fp16\nquantize.per-channel = true\n' > "$B2/rules/m.rules"
expect_err "per-channel with fp16 refused at file:line (when the rules are read)" 2 "m.rules:4: .*quantize.per-channel is not used by quantize = fp16" \
	"$Q" -C "$B2"

# ---- external weights are converted while the model is saved ----
# (model_defer: a big model never holds all its float16 tensors); the same
# model with inline weights, converted up front, gives the same tensors, and
# quant.json counts the same clamped and raised values
X=$TMPD/x
mkdir -p "$X/rules" "$X/ext"
"$PY" - "$X" <<'EOF'
import sys, numpy as np, onnx
from onnx import helper as h, TensorProto as T, numpy_helper as nh
X = sys.argv[1]
rng = np.random.default_rng(4)
w1 = rng.standard_normal((64, 256)).astype(np.float32)
w1[0, :3] = [1e6, -7e4, 1e-9]   # clamped twice, raised once
w2 = rng.standard_normal((256, 8)).astype(np.float32)
g = h.make_graph([h.make_node("MatMul", ["x", "w1"], ["a"], name="mm1"), h.make_node("Relu", ["a"], ["r"], name="relu"),
                  h.make_node("MatMul", ["r", "w2"], ["y"], name="mm2")], "ext",
                 [h.make_tensor_value_info("x", T.FLOAT, [1, 64])], [h.make_tensor_value_info("y", T.FLOAT, [1, 8])],
                 [nh.from_array(w1, "w1"), nh.from_array(w2, "w2")])
m = h.make_model(g, opset_imports=[h.make_opsetid("", 13)])
m.ir_version = 7
onnx.save(m, X + "/inline.onnx")
onnx.save(m, X + "/ext/m.onnx", save_as_external_data=True, location="m.onnx.data", size_threshold=0)
EOF
printf '[model inl]\nsource = inline.onnx\nquantize = fp16\n\n[model ext]\nsource = ext/m.onnx\nquantize = fp16\n' > "$X/rules/m.rules"
if "$Q" -C "$X" -j2 > "$TMPD/xlog" 2>&1 && "$PY" - "$X/build" <<'EOF'
import sys, json, numpy as np, onnx, onnxruntime as ort
B = sys.argv[1]
a, b = onnx.load(B + "/inl/inl.onnx"), onnx.load(B + "/ext/ext.onnx")
ta = {t.name: t for t in a.graph.initializer}
tb = {t.name: t for t in b.graph.initializer}
assert sorted(ta) == sorted(tb) == ["w1", "w2"], (sorted(ta), sorted(tb))
for k in ta:
    assert ta[k].data_type == tb[k].data_type == onnx.TensorProto.FLOAT16, k
    assert ta[k].raw_data == tb[k].raw_data and len(tb[k].raw_data) > 0, k
qa, qb = (json.load(open(B + "/%s/quant.json" % m))["tensors"] for m in ("inl", "ext"))
assert qa == qb and qb["w1"]["clamped"] == 2 and qb["w1"]["raised"] == 1, (qa, qb)
x = {"x": np.ones((1, 64), np.float16)}
ya = ort.InferenceSession(B + "/inl/inl.onnx", providers=["CPUExecutionProvider"]).run(None, x)[0]
yb = ort.InferenceSession(B + "/ext/ext.onnx", providers=["CPUExecutionProvider"]).run(None, x)[0]
assert np.array_equal(ya, yb)
EOF
then pass "fp16 of external weights (converted while saved) = fp16 of the same weights inline; same clamps in quant.json"
else fail "fp16 of external weights (converted while saved) = fp16 of the same weights inline; same clamps in quant.json" "$(grep -v '^\[' "$TMPD/xlog" | tail -3)"; fi
