#!/bin/sh
# Two choices the quantizer makes per model, checked end to end in
# onnxruntime:
# - data movement (Slice, Concat, Unsqueeze, Reshape, MaxPool...) is
#   quantized only inside a quantized chain: a mover between quantized
#   operators keeps its Q/DQ pairs; movers that only carry a graph input to
#   a graph output (silero-vad's LSTM state) or reorder constants for a
#   float operator (silero-vad's LSTM weights) stay float, bit-exact, with
#   the reason in quant.json;
# - quantize.per-channel = auto (the default) gives a weight one scale per
#   output channel when 8-bit per-tensor values keep under 30 dB of it (a
#   layer whose channels differ by 1000x in range) and one scale otherwise,
#   each decision in quant.json; false and true force either; auto at
#   opset 12 stays per tensor (true there is an error); dynamic too.
. "$(dirname "$0")/lib/common.sh"
mktmp
Q=$QUANTMAKE
if ! "$PY" -c 'import onnx, onnxruntime, numpy' 2>/dev/null; then
	fail "quantizer choices" "$PY lacks onnx/onnxruntime (run scripts/venv.sh)"
	exit 0
fi

P=$TMPD/p
mkdir -p "$P/rules" "$P/cal"
"$PY" - "$P" <<'EOF'
import sys, numpy as np, onnx
from onnx import helper as h, TensorProto as T, numpy_helper as nh
P = sys.argv[1]
rng = np.random.default_rng(7)
N = h.make_node
# conv weight: channel c scaled by 10^(3c/15), so ranges span 1000x
w1 = (rng.standard_normal((16, 3, 3, 3)) * 0.1).astype(np.float32)
w1 *= (10.0 ** (3 * np.arange(16) / 15)).astype(np.float32)[:, None, None, None] / 100
w2 = (rng.standard_normal((16 * 4 * 4, 10)) * 0.05).astype(np.float32)
k1 = rng.standard_normal((4, 8)).astype(np.float32)
k2 = rng.standard_normal((4, 8)).astype(np.float32)
def model(opset, path):
    nodes = [
        N("Conv", ["x", "w1"], ["c"], name="conv", pads=[1, 1, 1, 1]),
        N("Relu", ["c"], ["r"], name="relu"),
        N("MaxPool", ["r"], ["p"], name="pool", kernel_shape=[2, 2], strides=[2, 2]),
        N("Reshape", ["p", "shape"], ["f"], name="flat"),
        N("MatMul", ["f", "w2"], ["y"], name="fc"),
        # a state carried from input to output through movers only
        N("Unsqueeze", ["s", "ax0"] if opset >= 13 else ["s"], ["su"], name="state_unsq",
          **({} if opset >= 13 else {"axes": [0]})),
        N("Concat", ["su", "su"], ["sn"], name="state_cat", axis=0),
        # constants reordered for a float operator (Sin: not quantized)
        N("Slice", ["k1", "st", "en", "ax1"], ["k1s"], name="w_slice"),
        N("Concat", ["k1s", "k2"], ["kc"], name="w_cat", axis=1),
        N("Sin", ["kc"], ["ks"], name="float_op"),
    ]
    inits = [nh.from_array(w1, "w1"), nh.from_array(w2, "w2"), nh.from_array(np.array([1, -1], np.int64), "shape"),
             nh.from_array(k1, "k1"), nh.from_array(k2, "k2"), nh.from_array(np.array([2], np.int64), "st"),
             nh.from_array(np.array([8], np.int64), "en"), nh.from_array(np.array([1], np.int64), "ax1")]
    if opset >= 13:
        inits.append(nh.from_array(np.array([0], np.int64), "ax0"))
    g = h.make_graph(nodes, "choices", [h.make_tensor_value_info("x", T.FLOAT, [1, 3, 8, 8]),
                                        h.make_tensor_value_info("s", T.FLOAT, [1, 4])],
                     [h.make_tensor_value_info("y", T.FLOAT, [1, 10]), h.make_tensor_value_info("sn", T.FLOAT, [2, 1, 4]),
                      h.make_tensor_value_info("ks", T.FLOAT, [4, 14])], inits)
    m = h.make_model(g, opset_imports=[h.make_opsetid("", opset)])
    m.ir_version = 7
    onnx.checker.check_model(m, full_check=True)
    onnx.save(m, path)
model(13, P + "/m13.onnx")
model(12, P + "/m12.onnx")
for k in range(16):
    np.savez(P + "/cal/s%d.npz" % k, x=rng.standard_normal((1, 3, 8, 8)).astype(np.float32),
             s=rng.standard_normal((1, 4)).astype(np.float32))
np.savez(P + "/test.npz", x=rng.standard_normal((1, 3, 8, 8)).astype(np.float32),
         s=(rng.standard_normal((1, 4)) * 50).astype(np.float32))
EOF
cat > "$P/rules/m.rules" <<EOF
[model auto]
source = m13.onnx
quantize = static
quantize.calibration = cal

[model off]
source = m13.onnx
quantize = static
quantize.calibration = cal
quantize.per-channel = false

[model on]
source = m13.onnx
quantize = static
quantize.calibration = cal
quantize.per-channel = true

[model qop]
source = m13.onnx
quantize = static
quantize.format = qoperator
quantize.calibration = cal

[model o12]
source = m12.onnx
quantize = static
quantize.calibration = cal

[model dyn]
source = m13.onnx
quantize = dynamic
EOF
"$Q" -C "$P" > "$TMPD/log" 2>&1
st=$?
[ $st -eq 0 ] && pass "the six builds succeed" || fail "the six builds succeed" "status $st: $(tail -3 "$TMPD/log")"
grep -q '^quantize: auto: static, .*, 1 weight per channel (auto)$' "$TMPD/log" &&
	pass "the build log counts the weights auto made per channel" ||
	fail "the build log counts the weights auto made per channel" "$(grep '^quantize: auto' "$TMPD/log")"

"$PY" - "$P" > "$TMPD/out" 2>&1 <<'EOF'
import sys, json, numpy as np, onnx, onnxruntime as ort
ort.set_default_logger_severity(3)
P = sys.argv[1]
def q(m): return json.load(open("%s/build/%s/quant.json" % (P, m)))
def node(j, name): return [n for n in j["nodes"] if n["name"] == name][0]
def run(path, feeds): return ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, feeds)
t = dict(np.load(P + "/test.npz"))
ref = run(P + "/m13.onnx", t)
def sqnr(a, b): return 10 * np.log10(np.sum(a ** 2) / np.sum((a - b) ** 2))
ok = lambda name, cond, why="": print(("PASS: " if cond else "FAIL: ") + name + ("" if cond else ": " + str(why)))

a = q("auto")
ok("pool and reshape between quantized operators are quantized",
   node(a, "pool")["status"] == "quantized" and node(a, "flat")["status"] == "quantized",
   [node(a, n) for n in ("pool", "flat")])
why = "no quantized operator reads or writes"
ok("movers that only carry the state to an output stay float, with the reason",
   all(node(a, n)["status"] == "skipped" and why in node(a, n)["reason"] for n in ("state_unsq", "state_cat")),
   [node(a, n) for n in ("state_unsq", "state_cat")])
ok("movers that reorder constants for a float operator stay float, with the reason",
   all(node(a, n)["status"] == "skipped" and why in node(a, n)["reason"] for n in ("w_slice", "w_cat")),
   [node(a, n) for n in ("w_slice", "w_cat")])
m = onnx.load(P + "/build/auto/auto.onnx")
qin = {i for n in m.graph.node if n.op_type == "QuantizeLinear" for i in n.input}
ok("no QuantizeLinear reads the state, the constants or what they become",
   not qin & {"s", "su", "sn", "k1", "k2", "k1s", "kc"}, qin)
out = run(P + "/build/auto/auto.onnx", t)
ok("the state and the float path come out bit-exact in onnxruntime",
   np.array_equal(out[1], ref[1]) and np.array_equal(out[2], ref[2]))

pa = a["per_channel_auto"]
w1 = [d for d in pa if d["weight"] == "w1"]
w2 = [d for d in pa if d["weight"] == "w2"]
ok("auto: the 1000x-spread conv weight goes per channel (its channels under 30 dB with one scale)",
   len(w1) == 1 and w1[0]["per_channel"] is True and w1[0]["per_tensor_db"] < 30 < w1[0]["per_channel_db"], pa)
ok("auto: the plain MatMul weight keeps one scale",
   len(w2) == 1 and w2[0]["per_channel"] is False and w2[0]["per_tensor_db"] >= 30, pa)
ok("auto: quant.json says auto and gives w1 16 scales on axis 0, w2 one",
   a["per_channel"] == "auto" and a["tensors"]["w1"].get("axis") == 0 and len(a["tensors"]["w1"]["scale"]) == 16
   and "axis" not in a["tensors"]["w2"], (a["per_channel"], a["tensors"].get("w1"), a["tensors"].get("w2")))
o = q("off")
ok("false: one scale for every weight, no auto decisions",
   o["per_channel"] is False and "per_channel_auto" not in o and "axis" not in o["tensors"]["w1"], o["tensors"].get("w1"))
n = q("on")
ok("true: both weights per channel", n["per_channel"] is True and n["tensors"]["w1"].get("axis") == 0
   and n["tensors"]["w2"].get("axis") == 1, (n["tensors"].get("w1"), n["tensors"].get("w2")))
cal = [dict(np.load(P + "/cal/s%d.npz" % k)) for k in range(16)]
def model_sqnr(name):
    path = "%s/build/%s/%s.onnx" % (P, name, name)
    r = np.concatenate([run(P + "/m13.onnx", f)[0] for f in cal])
    o = np.concatenate([run(path, f)[0] for f in cal])
    return sqnr(r, o)
s_auto, s_off, s_qop = model_sqnr("auto"), model_sqnr("off"), model_sqnr("qop")
def w1_written(name):
    """mean per-channel SQNR of w1 as the model stores it (int8 x scale)"""
    m = onnx.load("%s/build/%s/%s.onnx" % (P, name, name))
    init = {i.name: onnx.numpy_helper.to_array(i) for i in m.graph.initializer}
    qw = [k for k in init if k.startswith("w1") and init[k].dtype == np.int8][0]
    sc = [k for k in init if k.startswith("w1") and "scale" in k][0]
    w = init[qw].astype(np.float64) * init[sc].reshape(-1, 1, 1, 1) if init[sc].size > 1 else init[qw] * init[sc]
    f = onnx.numpy_helper.to_array([i for i in onnx.load(P + "/m13.onnx").graph.initializer if i.name == "w1"][0])
    e = ((w - f) ** 2).reshape(16, -1).sum(1)
    return np.mean(10 * np.log10((f.astype(np.float64) ** 2).reshape(16, -1).sum(1) / e))
wa, wo = w1_written("auto"), w1_written("off")
ok("auto: the stored w1 keeps its small channels (mean channel SQNR > 10 dB above one scale's)", wa > wo + 10, (wa, wo))
ok("auto: the model is no worse in onnxruntime than one scale per tensor", s_auto >= s_off - 0.1, (s_auto, s_off))
ok("qoperator: auto gives the QLinearConv per-channel weights",
   q("qop")["tensors"]["w1"].get("axis") == 0 and s_qop >= s_off - 0.5, (q("qop")["tensors"].get("w1"), s_qop, s_off))
o12 = q("o12")
ok("opset 12: auto keeps one scale (DequantizeLinear has no axis there)",
   "axis" not in o12["tensors"]["w1"] and "per_channel_auto" not in o12, o12["tensors"].get("w1"))
d = q("dyn")
dw = [x for x in d.get("per_channel_auto", []) if x["weight"] == "w1"]
ok("dynamic: auto gives the ConvInteger weight per-channel scales, and onnxruntime runs it",
   len(dw) == 1 and dw[0]["per_channel"] is True and len(run(P + "/build/dyn/dyn.onnx", t)[0][0]) == 10, d.get("per_channel_auto"))
EOF
cat "$TMPD/out"
grep -q '^PASS: dynamic' "$TMPD/out" || grep -q '^FAIL' "$TMPD/out" || fail "quantizer choices in onnxruntime" "$(tail -3 "$TMPD/out")"

cat >> "$P/rules/m.rules" <<EOF

[model bad]
source = m12.onnx
quantize = static
quantize.calibration = cal
quantize.per-channel = true
EOF
"$Q" -C "$P" bad > "$TMPD/log2" 2>&1
st=$?
[ $st -ne 0 ] && grep -q "quantize.per-channel needs opset >= 13 (DequantizeLinear with axis); the model imports opset 12" "$TMPD/log2" &&
	pass "per-channel = true at opset 12 is an error naming the opset" ||
	fail "per-channel = true at opset 12 is an error naming the opset" "status $st: $(tail -2 "$TMPD/log2")"
printf '[model v]\nsource = m13.onnx\nquantize = static\nquantize.calibration = cal\nquantize.per-channel = sometimes\n' > "$P/rules/m.rules"
"$Q" -C "$P" > "$TMPD/log3" 2>&1
st=$?
[ $st -ne 0 ] && grep -q "quantize.per-channel" "$TMPD/log3" && grep -q "auto" "$TMPD/log3" &&
	pass "a bad per-channel value is an error listing auto" ||
	fail "a bad per-channel value is an error listing auto" "status $st: $(tail -2 "$TMPD/log3")"
