#!/bin/sh
# Size of static QDQ models: quantize.names = compact against onnxruntime's
# naming. A model made with the onnx helper API, with long exporter-style
# tensor names (as jax2tf writes), names the compact scheme would pick
# already taken (s1, z1, q1, a weight's W_q, a tensor's T_dq, a node DQ1),
# a Relu folded away (its value_info goes) and a weight also read by an
# excluded node (its float initializer stays): both namings pass the
# checker, onnxruntime gives bit-identical outputs for them, compact is
# smaller, every name quant.json gives exists in the model, the weights'
# consumers read their own names, and verify pairs the same activations
# and weights under both namings. magika 1.0.3's model (bench/fetch-models.sh;
# skipped when not fetchable): compact <= 27% of the float file.
. "$(dirname "$0")/lib/common.sh"
mktmp
Q=$QUANTMAKE
if ! "$PY" -c 'import onnx, onnxruntime, numpy' 2>/dev/null; then
	fail "quantize size tests" "$PY lacks onnx/onnxruntime (run scripts/venv.sh)"
	exit 0
fi

P=$TMPD/p
mkdir -p "$P/rules" "$P/cal"
"$PY" - "$P" <<'EOF'
import sys, numpy as np, onnx
from onnx import helper as h, TensorProto as T, numpy_helper as nh
P = sys.argv[1]
rng = np.random.default_rng(5)
f = lambda *s: (rng.standard_normal(s) * 0.2).astype(np.float32)
L = lambda s: "jax2tf_model_/pjit_model_/Encoder/Block_0/" + s + ":0"
N = h.make_node
nodes = [
    N("Conv", ["x", L("conv/kernel"), L("conv/bias")], [L("conv/out")], name="conv", pads=[1, 1, 1, 1]),
    N("Relu", [L("conv/out")], [L("relu/out")], name="relu"),
    N("Conv", [L("relu/out"), L("conv2/kernel")], [L("conv2/out")], name="conv2", pads=[1, 1, 1, 1]),
    N("Flatten", [L("conv2/out")], [L("flat/out")], name="flat"),
    N("MatMul", [L("flat/out"), L("dense/kernel")], [L("dense/out")], name="dense"),
    N("Add", [L("dense/out"), "s1"], [L("dense/add")], name="bias_add"),
    # bait: names the compact scheme would give, and a node named DQ1
    N("Identity", [L("dense/add")], [L("dense/add") + "_dq"], name="DQ1"),
    N("MatMul", [L("dense/add") + "_dq", L("head/kernel")], ["q1"], name="head"),
    # the head's weight is also read by a node left in float
    N("MatMul", [L("dense/add"), L("head/kernel")], ["z1"], name="head_float"),
    N("Sub", ["q1", "z1"], ["y"], name="diff"),
]
inits = [nh.from_array(f(16, 3, 3, 3), L("conv/kernel")), nh.from_array(f(16), L("conv/bias")),
         nh.from_array(f(16, 16, 3, 3), L("conv2/kernel")), nh.from_array(f(16 * 64, 64) * 0.2, L("dense/kernel")),
         nh.from_array(f(64), "s1"), nh.from_array(f(64, 10), L("head/kernel")),
         nh.from_array(f(3), L("conv2/kernel") + "_q")]
g = h.make_graph(nodes, "long_names", [h.make_tensor_value_info("x", T.FLOAT, [1, 3, 8, 8])],
                 [h.make_tensor_value_info("y", T.FLOAT, [1, 10])], inits)
m = h.make_model(g, opset_imports=[h.make_opsetid("", 13)])
m.ir_version = 7
onnx.checker.check_model(m, full_check=True)
onnx.save(m, P + "/ln.onnx")
for k in range(8):
    np.savez(P + "/cal/s%d.npz" % k, x=rng.standard_normal((1, 3, 8, 8)).astype(np.float32))
EOF
cat > "$P/rules/m.rules" <<EOF
[model ort]
source = ln.onnx
quantize = static
quantize.calibration = cal
quantize.exclude-nodes = head_float
verify.data = cal
verify.min-sqnr = off

[model cmp : ort]
quantize.names = compact

[model pc : cmp]
quantize.per-channel = true
EOF
if "$Q" -C "$P" -j2 ort cmp pc > "$TMPD/log" 2>&1; then pass "static QDQ builds under both namings (verify included)"
else fail "static QDQ builds under both namings (verify included)" "$(grep -v '^\[' "$TMPD/log" | tail -3)"; fi

if "$PY" - "$P" > "$TMPD/chk" 2>&1 <<'EOF'
import sys, os, json, numpy as np, onnx, onnxruntime as ort
P = sys.argv[1]
L = lambda s: "jax2tf_model_/pjit_model_/Encoder/Block_0/" + s + ":0"
path = lambda mo: "%s/build/%s/%s.onnx" % (P, mo, mo)
feed = dict(np.load(P + "/cal/s3.npz"))
run = lambda mo: ort.InferenceSession(path(mo), providers=["CPUExecutionProvider"]).run(None, feed)[0]
for mo in ["ort", "cmp", "pc"]:
    onnx.checker.check_model(onnx.load(path(mo)), full_check=True)
assert np.array_equal(run("ort"), run("cmp")), "compact names changed the outputs"
so, sc = os.path.getsize(path("ort")), os.path.getsize(path("cmp"))
assert sc < so, (so, sc)
m = onnx.load(path("cmp"))
g = m.graph
init = {t.name: t for t in g.initializer}
outs = {o for n in g.node for o in n.output}
prod = {o: n for n in g.node for o in n.output}
# the bait is untouched: s1 is still the float bias, q1 and z1 still MatMul outputs, one node DQ1
assert prod["s1"].op_type == "DequantizeLinear" and init[prod["s1"].input[0]].data_type == onnx.TensorProto.INT32
assert prod["q1"].op_type == "MatMul" and prod["z1"].op_type == "MatMul", (prod["q1"], prod["z1"])
assert [n.name for n in g.node].count("DQ1") == 1
# a weight read only by quantized nodes: the DequantizeLinear output takes its name
for w in [L("conv/kernel"), L("conv2/kernel"), L("dense/kernel")]:
    assert w not in init and prod[w].op_type == "DequantizeLinear", w
    assert prod[w].input[0] in init and prod[w].input[0] != L("conv2/kernel") + "_q", prod[w].input
# the head's weight keeps a float reader: float initializer kept, its DQ output is W_dq
hk = L("head/kernel")
assert hk in init and prod[hk + "_dq"].op_type == "DequantizeLinear", sorted(outs)
# the folded Relu's input tensor is gone, and so is its value_info
assert L("conv/out") not in outs and L("conv/out") not in {v.name for v in g.value_info}
names = set(init) | outs
for vi in g.value_info:
    assert vi.name in names, vi.name
# quant.json maps every original tensor to names that exist
t = json.load(open(P + "/build/cmp/quant.json"))["tensors"]
assert len(t) >= 8, t.keys()
for k, v in t.items():
    nm = v["names"]
    for role in ("quantized", "scale", "zero_point"):
        assert nm[role] in names, (k, role, nm)
    if "dequantized" in nm:
        dq = prod[nm["dequantized"]]
        assert dq.op_type == "DequantizeLinear" and prod[dq.input[0]].input[0] == k, (k, nm)
j = json.load(open(P + "/build/cmp/quant.json"))
assert j["names"] == "compact" and json.load(open(P + "/build/ort/quant.json"))["names"] == "onnxruntime"
# verify pairs the same tensors under both namings
v = {mo: json.load(open("%s/build/%s/verify.json" % (P, mo))) for mo in ("ort", "cmp")}
acts = {mo: sorted(a["name"] for a in v[mo]["activations"]) for mo in v}
ws = {mo: sorted(a["name"] for a in v[mo]["weights"]) for mo in v}
assert acts["ort"] == acts["cmp"] and len(acts["cmp"]) >= 5, acts
assert ws["ort"] == ws["cmp"] and len(ws["cmp"]) >= 4, ws
cand = {mo: json.dumps(v[mo]["exclude_candidates"]) for mo in v}
assert cand["ort"] == cand["cmp"] and "dense" in cand["cmp"], cand
print("onnxruntime names %d bytes, compact %d bytes" % (so, sc))
EOF
then pass "compact names: checker, outputs bit-identical in onnxruntime, smaller, taken names avoided, weights keep their names, quant.json names exist, verify pairs the same tensors ($(tail -1 "$TMPD/chk"))"
else fail "compact names: checker, outputs bit-identical in onnxruntime, smaller, taken names avoided, weights keep their names, quant.json names exist, verify pairs the same tensors" "$(tail -3 "$TMPD/chk")"; fi

printf '[model dyn]\nsource = ln.onnx\nquantize = dynamic\nquantize.names = compact\n' > "$P/rules/n.rules"
expect_err "quantize.names is refused outside static QDQ (when the rules are read)" 2 "n.rules:4: model 'dyn': quantize.names is only used by quantize = static with quantize.format = qdq" \
	"$Q" -C "$P" dyn
rm "$P/rules/n.rules"

# ---- magika 1.0.3: the weight-heavy model the 27% goal is measured on ----
if ! M=$(sh "$ROOT/bench/fetch-models.sh" 2>/dev/null) || [ ! -f "$M/magika/model.onnx" ]; then
	skip "magika size" "bench/fetch-models.sh could not fetch the model"
	exit 0
fi
G=$TMPD/g
mkdir -p "$G/rules" "$G/cal"
cp "$M/magika/model.onnx" "$G/magika.onnx"
"$PY" - "$G" <<'EOF'
import sys, numpy as np
G = sys.argv[1]
rng = np.random.default_rng(0)
for k in range(8):
    # the first and last 1024 bytes of a file, 256 for padding
    v = np.full((1, 2048), 256, np.int32)
    n = int(rng.integers(64, 1024))
    v[0, :n] = rng.integers(0, 256, n)
    v[0, 2048 - n:] = rng.integers(0, 256, n)
    np.savez(G + "/cal/s%d.npz" % k, bytes=v)
EOF
cat > "$G/rules/m.rules" <<EOF
[model ort]
source = magika.onnx
quantize = static
quantize.calibration = cal

[model cmp : ort]
quantize.names = compact
EOF
if "$Q" -C "$G" -j2 > "$TMPD/glog" 2>&1 && "$PY" - "$G" > "$TMPD/gchk" 2>&1 <<'EOF'
import sys, os, numpy as np, onnx, onnxruntime as ort
G = sys.argv[1]
f = os.path.getsize(G + "/magika.onnx")
path = lambda mo: "%s/build/%s/%s.onnx" % (G, mo, mo)
so, sc = os.path.getsize(path("ort")), os.path.getsize(path("cmp"))
feed = dict(np.load(G + "/cal/s1.npz"))
run = lambda mo: ort.InferenceSession(path(mo), providers=["CPUExecutionProvider"]).run(None, feed)[0]
assert np.array_equal(run("ort"), run("cmp")), "compact names changed the outputs"
onnx.checker.check_model(onnx.load(path("cmp")), full_check=True)
assert sc <= 0.27 * f, "compact: %d bytes, %.2f%% of %d" % (sc, 100.0 * sc / f, f)
print("float %d, onnxruntime names %d (%.1f%%), compact %d (%.1f%%)" % (f, so, 100.0 * so / f, sc, 100.0 * sc / f))
EOF
then pass "magika: compact names <= 27% of the float file, same outputs ($(tail -1 "$TMPD/gchk"))"
else fail "magika: compact names <= 27% of the float file, same outputs" "$(cat "$TMPD/glog" "$TMPD/gchk" 2>/dev/null | tail -3)"; fi
