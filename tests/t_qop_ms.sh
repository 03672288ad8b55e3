#!/bin/sh
# The com.microsoft QLinear operators (src/ops/qlinear_ms.c) and their
# emission by static QOperator quantization (src/quant/qop.c):
#   - each kernel (QLinearAdd, QLinearMul with and without broadcasting,
#     QLinearGlobalAveragePool, QLinearAveragePool, QLinearConcat,
#     QLinearLeakyRelu, QLinearSigmoid, QLinearSoftmax; uint8 and int8) on
#     random codes, scales and zero points gives onnxruntime's bytes
#     exactly; only QLinearSigmoid may differ by one code (onnxruntime
#     approximates the logistic function). QLinearAdd runs on half a
#     million elements: other orders of the float operations than
#     onnxruntime's differ from it in a few codes per million (a CPU
#     without AVX2, where onnxruntime has another kernel, is allowed one);
#   - bad scales and channels_last are one named error;
#   - a CNN with a residual Add, a squeeze-excite GlobalAveragePool, Sigmoid
#     and Mul, LeakyRelu, AveragePool, a Concat of differing scales and a
#     Softmax quantizes (uint8 and int8 activations) into QLinear operators
#     with one QuantizeLinear at the entry: the model passes onnx.checker,
#     imports com.microsoft 1, runs in onnxruntime, quantmake's interpreter
#     gives onnxruntime's outputs, and its SQNR against the float model is
#     no worse than that of onnxruntime's quantize_static(QOperator) with
#     the same calibration data;
#   - a Relu after QLinearAdd and a Clip after QLinearMul fold into the
#     output range (no float island), as onnxruntime does, uint8 and int8;
#     with symmetric activation ranges (which hold negatives) they stay
#     float with the reason; onnxruntime runs each, quantmake matches it.
. "$(dirname "$0")/lib/common.sh"
mktmp
Q=$QUANTMAKE
if ! "$PY" -c 'import onnx, onnxruntime.quantization, numpy' 2>/dev/null; then
	fail "qlinear tests" "$PY lacks onnx/onnxruntime (run scripts/venv.sh)"
	exit 0
fi

# ---- kernels against onnxruntime on random quantized inputs ----
cat > "$TMPD/kern.py" <<'EOF'
import sys, subprocess, numpy as np, onnx, onnxruntime as ort
from onnx import helper as h, TensorProto as TP, numpy_helper as nh
Q, T, seed = sys.argv[1], sys.argv[2], int(sys.argv[3])
ort.set_default_logger_severity(3)
rng = np.random.default_rng(seed)
# quantmake follows onnxruntime's AVX2 QLinearAdd; its SSE2 kernel rounds differently
AVX2 = " avx2" in open("/proc/cpuinfo").read()
TY = {np.uint8: TP.UINT8, np.int8: TP.INT8}
LIM = {np.uint8: (0, 255), np.int8: (-128, 127)}

def model(op, inputs, attrs, dt, path):
    """inputs named x* are graph inputs, the others initializers"""
    gi, inits, feeds, names = [], [], {}, []
    for n, a in inputs:
        names.append(n)
        if n in feeds or n in [i.name for i in inits]:
            continue
        if n.startswith("x"):
            gi.append(h.make_tensor_value_info(n, TY[dt], a.shape))
            feeds[n] = a
        else:
            inits.append(nh.from_array(a, n))
    node = h.make_node(op, names, ["y"], domain="com.microsoft", name="n0", **attrs)
    g = h.make_graph([node], "g", gi, [h.make_tensor_value_info("y", TY[dt], None)], inits)
    onnx.save(h.make_model(g, ir_version=8, opset_imports=[h.make_opsetid("", 13), h.make_opsetid("com.microsoft", 1)]), path)
    return feeds

def qp(dt, tag):
    lo, hi = LIM[dt]
    return [(tag + "s", np.array(np.float32(rng.uniform(0.002, 0.1)))), (tag + "z", np.array(dt(rng.integers(lo, hi + 1))))]

def data(dt, shape):
    lo, hi = LIM[dt]
    return rng.integers(lo, hi + 1, shape).astype(dt)

def case(name, op, inputs, attrs, dt, tol=0):
    name = "%s-%d" % (name, seed)
    p = "%s/%s.onnx" % (T, name)
    feeds = model(op, inputs, attrs, dt, p)
    want = ort.InferenceSession(p, providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    args = [Q, "run", p, "-o", "%s/%s.npz" % (T, name), "-q"]
    for k, v in feeds.items():
        np.save("%s/%s-%s.npy" % (T, name, k), v)
        args += ["-i", "%s=%s/%s-%s.npy" % (k, T, name, k)]
    r = subprocess.run(args, capture_output=True, text=True)
    if r.returncode:
        print("FAIL: kernel %s: quantmake run: %s" % (name, r.stderr.strip()[-300:]))
        return
    got = np.load("%s/%s.npz" % (T, name))["y"]
    if got.shape != want.shape or got.dtype != want.dtype:
        print("FAIL: kernel %s: %s %s, onnxruntime %s %s" % (name, got.shape, got.dtype, want.shape, want.dtype))
        return
    d = np.abs(got.astype(int) - want.astype(int))
    print(("PASS: " if d.max(initial=0) <= tol else "FAIL: ") + "kernel %s gives onnxruntime's codes "
          "(max diff %d, %d of %d differ%s)" % (name, d.max(initial=0), (d > 0).sum(), d.size,
                                                ", 1 allowed" if tol else ""))

for dt in (np.uint8, np.int8):
    t = dt.__name__
    sm = [("ys", np.array(np.float32(1 / 256))), ("yz", np.array(dt(0 if dt == np.uint8 else -128)))]
    for op in ("QLinearAdd", "QLinearMul"):
        for sa, sb in (((16, 8, 64, 64), (16, 8, 64, 64)), ((4, 8, 32, 32), (1, 8, 1, 1)), ((1, 8, 1, 1), (4, 8, 32, 32)),
                       ((2, 1, 9, 7), (3, 1, 1)), ((5,), ())):
            pa, pb = qp(dt, "a"), qp(dt, "b")
            # an output scale that keeps most results in range (else they only saturate)
            s0, s1 = float(pa[0][1]), float(pb[0][1])
            sc = (s0 + s1 if op == "QLinearAdd" else s0 * s1 * 64) * rng.uniform(0.5, 1.2)
            pc = [("cs", np.array(np.float32(sc))), ("cz", np.array(dt(rng.integers(LIM[dt][0] + 64, LIM[dt][1] - 63))))]
            ins = [("xa", data(dt, sa))] + pa + [("xb", data(dt, sb))] + pb + pc
            case("%s-%s-%s-%s" % (op, t, "x".join(map(str, sa)), "x".join(map(str, sb)) or "scalar"), op, ins, {}, dt,
                 tol=0 if AVX2 or op == "QLinearMul" else 1)
    case("QLinearGlobalAveragePool-" + t, "QLinearGlobalAveragePool",
         [("x", data(dt, (2, 5, 7, 9)))] + qp(dt, "i") + qp(dt, "o"), {}, dt)
    for k, at in enumerate(({"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "strides": [2, 2]},
                            {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "count_include_pad": 1},
                            {"kernel_shape": [2, 2], "strides": [2, 2], "ceil_mode": 1}, {"kernel_shape": [3]})):
        x = data(dt, (2, 4, 11, 10) if len(at["kernel_shape"]) == 2 else (2, 4, 13))
        case("QLinearAveragePool-%s-%d" % (t, k), "QLinearAveragePool", [("x", x)] + qp(dt, "i") + qp(dt, "o"), at, dt)
    case("QLinearLeakyRelu-" + t, "QLinearLeakyRelu", [("x", data(dt, (3, 100)))] + qp(dt, "i") + qp(dt, "o"),
         {"alpha": 0.13}, dt)
    case("QLinearSigmoid-" + t, "QLinearSigmoid", [("x", data(dt, (3, 256)))] + qp(dt, "i") + sm, {}, dt, tol=1)
    y = qp(dt, "y")
    case("QLinearConcat-" + t, "QLinearConcat", y + [("x1", data(dt, (2, 3, 4)))] + qp(dt, "p") +
         [("x2", data(dt, (2, 5, 4)))] + qp(dt, "q") + [("x3", data(dt, (2, 2, 4)))] + y, {"axis": 1}, dt)
    for ax, shape, opset in ((-1, (4, 10), 13), (1, (2, 7, 3), 13), (-1, (3, 300), 13), (1, (2, 3, 5), 11)):
        case("QLinearSoftmax-%s-%d-%d-%d" % (t, ax, shape[-1], opset), "QLinearSoftmax",
             [("x", data(dt, shape))] + qp(dt, "i") + sm, {"axis": ax, "opset": opset}, dt)
    # one element dominates: a probability of 1 saturates to the highest code
    x = np.full((2, 4), LIM[dt][0], dt)
    x[:, 1] = LIM[dt][1]
    case("QLinearSoftmax-%s-saturated" % t, "QLinearSoftmax", [("x", x)] + qp(dt, "i") + sm, {"axis": -1, "opset": 13}, dt)
EOF
for seed in 1 2; do
	"$PY" "$TMPD/kern.py" "$Q" "$TMPD" $seed > "$TMPD/kern.out" 2>&1
	grep -q '^PASS: ' "$TMPD/kern.out" && grep -E '^(PASS|FAIL): ' "$TMPD/kern.out" ||
		fail "kernel tests (seed $seed)" "$(tail -3 "$TMPD/kern.out")"
done

# ---- bad input: one named error ----
"$PY" - "$TMPD" <<'EOF'
import sys, numpy as np, onnx
from onnx import helper as h, TensorProto as TP, numpy_helper as nh
T = sys.argv[1]
f, u = lambda *v: np.array(v if len(v) > 1 else v[0], np.float32), lambda v: np.array(v, np.uint8)
def save(name, op, ins, inits, **attrs):
    node = h.make_node(op, ins, ["y"], domain="com.microsoft", name="n0", **attrs)
    g = h.make_graph([node], "g", [h.make_tensor_value_info("x", TP.UINT8, [1, 2, 3, 3])],
                     [h.make_tensor_value_info("y", TP.UINT8, None)], [nh.from_array(a, n) for n, a in inits.items()])
    onnx.save(h.make_model(g, ir_version=8, opset_imports=[h.make_opsetid("", 13), h.make_opsetid("com.microsoft", 1)]),
              "%s/%s.onnx" % (T, name))
save("bad-scale", "QLinearAdd", ["x", "s2", "z", "x", "s", "z", "s", "z"], {"s2": f(0.1, 0.2), "s": f(0.1), "z": u(3)})
save("bad-zp", "QLinearSigmoid", ["x", "s", "z8", "s", "z"], {"s": f(0.1), "z": u(3), "z8": np.array(3, np.int8)})
save("bad-layout", "QLinearGlobalAveragePool", ["x", "s", "z", "s", "z"], {"s": f(0.1), "z": u(3)}, channels_last=1)
np.save(T + "/xu8.npy", np.arange(18, dtype=np.uint8).reshape(1, 2, 3, 3))
EOF
expect_err "QLinearAdd with a 2-element scale is an error" 1 \
	"node 'n0' \(QLinearAdd\): input 1 \(a scale\) must be one float, got float with 2 elements" \
	"$Q" run "$TMPD/bad-scale.onnx" -i x="$TMPD/xu8.npy"
expect_err "a zero point of another type is an error" 1 \
	"node 'n0' \(QLinearSigmoid\): input 2 \(a zero point\) must be one uint8, got int8" \
	"$Q" run "$TMPD/bad-zp.onnx" -i x="$TMPD/xu8.npy"
expect_err "channels_last pooling is refused by name" 1 "QLinearGlobalAveragePool.*channels_last = 1 is not supported" \
	"$Q" run "$TMPD/bad-layout.onnx" -i x="$TMPD/xu8.npy"

# ---- a CNN quantized into QLinear operators ----
P=$TMPD/p
mkdir -p "$P/rules"
"$PY" - "$P" <<'EOF'
import sys, numpy as np, onnx
from onnx import TensorProto, helper, numpy_helper
r = np.random.default_rng(11)
f = lambda *s: (r.standard_normal(s) * (1.0 / np.sqrt(np.prod(s[1:])))).astype(np.float32)
N = helper.make_node
g = helper.make_graph([
    N("Conv", ["input", "w1", "b1"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
    N("Relu", ["c1"], ["r1"], name="relu1"),
    N("Conv", ["r1", "w2", "b2"], ["c2"], name="conv2", pads=[1, 1, 1, 1]),
    N("Add", ["r1", "c2"], ["res"], name="residual"),
    N("GlobalAveragePool", ["res"], ["gap"], name="squeeze"),
    N("Conv", ["gap", "w3", "b3"], ["ex"], name="excite"),
    N("Sigmoid", ["ex"], ["gate"], name="gate"),
    N("Mul", ["res", "gate"], ["se"], name="scale"),
    N("LeakyRelu", ["se"], ["lr"], name="leaky", alpha=0.1),
    N("AveragePool", ["lr"], ["ap"], name="avgpool", kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
    N("Conv", ["ap", "w4", "b4"], ["c4"], name="branch_a", pads=[1, 1, 1, 1]),
    N("Conv", ["ap", "w5", "b5"], ["c5"], name="branch_b"),
    N("Concat", ["c4", "c5"], ["cat"], name="concat", axis=1),
    N("GlobalAveragePool", ["cat"], ["pool"], name="pool"),
    N("Flatten", ["pool"], ["flat"], name="flatten"),
    N("Gemm", ["flat", "wf", "bf"], ["logits"], name="fc", transB=1),
    N("Softmax", ["logits"], ["prob"], name="softmax", axis=1)], "qms",
    [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["batch", 3, 16, 16])],
    [helper.make_tensor_value_info("prob", TensorProto.FLOAT, ["batch", 6])],
    [numpy_helper.from_array(a, n) for n, a in [
        ("w1", f(8, 3, 3, 3)), ("b1", f(8)), ("w2", f(8, 8, 3, 3)), ("b2", f(8)), ("w3", f(8, 8, 1, 1)),
        ("b3", f(8)), ("w4", f(4, 8, 3, 3)), ("b4", f(4)), ("w5", 3 * f(6, 8, 1, 1)), ("b5", f(6)),
        ("wf", 4 * f(6, 10)), ("bf", f(6))]])
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
m.ir_version = 7
onnx.checker.check_model(m)
onnx.save(m, sys.argv[1] + "/qms.onnx")
x = np.random.default_rng(5)
np.save(sys.argv[1] + "/calib.npy", x.standard_normal((16, 3, 16, 16)).astype(np.float32))
np.save(sys.argv[1] + "/x.npy", x.standard_normal((8, 3, 16, 16)).astype(np.float32))
EOF
cat > "$P/rules/m.rules" <<'EOF'
[model qms]
source = qms.onnx
quantize = static
quantize.calibration = calib.npy
quantize.format = qoperator

[model qms8 : qms]
quantize.activations = int8
EOF
if ! "$Q" -C "$P" qms qms8 > "$TMPD/log" 2>&1; then
	fail "the QLinear CNN quantizes" "$(grep quantmake: "$TMPD/log")"
	exit 0
fi
for m in qms qms8; do
	"$Q" run "$P/build/$m/$m.onnx" -i input="$P/x.npy" -o "$TMPD/out-$m.npz" -q 2>"$TMPD/run.err" ||
		fail "quantmake runs $m" "$(tail -2 "$TMPD/run.err")"
done
"$PY" - "$P" "$TMPD" > "$TMPD/cnn.out" 2>&1 <<'EOF'
import sys, numpy as np, onnx, onnxruntime as ort
from onnxruntime.quantization import quantize_static, QuantFormat, QuantType, CalibrationDataReader
P, T = sys.argv[1:]
ort.set_default_logger_severity(3)
x, calib = np.load(P + "/x.npy"), np.load(P + "/calib.npy")
class Reader(CalibrationDataReader):
    def __init__(self): self.it = iter([{"input": calib}])
    def get_next(self): return next(self.it, None)
run = lambda p: ort.InferenceSession(p, providers=["CPUExecutionProvider"]).run(None, {"input": x})[0]
sqnr = lambda ref, o: float(10 * np.log10((ref ** 2).sum() / max(((ref - o) ** 2).sum(), 1e-30)))
ref = run(P + "/qms.onnx")
body = ["QLinearConv", "QLinearConv", "QLinearAdd", "QLinearGlobalAveragePool", "QLinearConv", "QLinearSigmoid",
        "QLinearMul", "QLinearLeakyRelu", "QLinearAveragePool", "QLinearConv", "QLinearConv", "QLinearConcat",
        "QLinearGlobalAveragePool", "Flatten", "Reshape", "QLinearConv", "Reshape"]
for m, act in (("qms", QuantType.QUInt8), ("qms8", QuantType.QInt8)):
    p = "%s/build/%s/%s.onnx" % (P, m, m)
    mm = onnx.load(p)
    onnx.checker.check_model(mm, full_check=True)
    ops = [n.op_type for n in mm.graph.node]
    imp = {o.domain: o.version for o in mm.opset_import}
    ok = ops == ["QuantizeLinear"] + body + ["QLinearSoftmax", "DequantizeLinear"] and imp.get("com.microsoft") == 1 and all(
        n.domain == ("com.microsoft" if n.op_type.startswith("QLinear") and n.op_type not in
                     ("QLinearConv", "QLinearMatMul") else "") for n in mm.graph.node)
    print(("PASS: " if ok else "FAIL: ") + "%s: QLinear operators in com.microsoft 1, one QuantizeLinear at the entry: %s"
          % (m, ops))
    theirs, ours = run(p), np.load("%s/out-%s.npz" % (T, m))["prob"]
    d = float(np.abs(ours - theirs).max())
    # the same codes, so the same floats (a code of Sigmoid may differ: then 1/256 at most)
    tol = 1 / 256
    print(("PASS: " if d <= tol else "FAIL: ") + "%s: quantmake's interpreter gives onnxruntime's outputs "
          "(max diff %.3g, %d of %d differ)" % (m, d, int((ours != theirs).sum()), ours.size))
    peer = "%s/peer-%s.onnx" % (T, m)
    quantize_static(P + "/qms.onnx", peer, Reader(), quant_format=QuantFormat.QOperator, activation_type=act,
                    weight_type=QuantType.QInt8)
    a, b = sqnr(ref, theirs), sqnr(ref, run(peer))
    print(("PASS: " if a >= b - 1.0 else "FAIL: ") + "%s: SQNR %.1f dB, onnxruntime's QOperator quantizer %.1f dB" % (m, a, b))
EOF
grep -q '^PASS: ' "$TMPD/cnn.out" && grep -E '^(PASS|FAIL): ' "$TMPD/cnn.out" || fail "CNN evaluation" "$(tail -3 "$TMPD/cnn.out")"

# ---- Relu after QLinearAdd, Clip after QLinearMul: folded into the range ----
R=$TMPD/r
mkdir -p "$R/rules"
"$PY" - "$R" <<'EOF'
import sys, numpy as np, onnx
from onnx import TensorProto, helper, numpy_helper
r = np.random.default_rng(12)
f = lambda *s: (r.standard_normal(s) * (1.0 / np.sqrt(np.prod(s[1:])))).astype(np.float32)
N = helper.make_node
g = helper.make_graph([
    N("Conv", ["input", "wa", "ba"], ["a"], name="conv_a", pads=[1, 1, 1, 1]),
    N("Conv", ["input", "wb", "bb"], ["b"], name="conv_b", pads=[1, 1, 1, 1]),
    N("Add", ["a", "b"], ["s"], name="add"),
    N("Relu", ["s"], ["rs"], name="relu"),
    N("Conv", ["rs", "wc", "bc"], ["c"], name="conv_c", pads=[1, 1, 1, 1]),
    N("Mul", ["c", "a"], ["m"], name="mul"),
    N("Clip", ["m", "lo", "hi"], ["k"], name="clip"),
    N("Conv", ["k", "wd", "bd"], ["out"], name="conv_d")], "relu_fold",
    [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["batch", 3, 12, 12])],
    [helper.make_tensor_value_info("out", TensorProto.FLOAT, ["batch", 4, 12, 12])],
    [numpy_helper.from_array(a, n) for n, a in [
        ("wa", f(8, 3, 3, 3)), ("ba", f(8)), ("wb", f(8, 3, 3, 3)), ("bb", f(8)), ("wc", f(8, 8, 3, 3)),
        ("bc", f(8)), ("wd", f(4, 8, 1, 1)), ("bd", f(4)), ("lo", np.array(0, np.float32)),
        ("hi", np.array(0.5, np.float32))]])
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
m.ir_version = 7
onnx.checker.check_model(m)
onnx.save(m, sys.argv[1] + "/rf.onnx")
x = np.random.default_rng(6)
np.save(sys.argv[1] + "/calib.npy", x.standard_normal((16, 3, 12, 12)).astype(np.float32))
np.save(sys.argv[1] + "/x.npy", x.standard_normal((8, 3, 12, 12)).astype(np.float32))
EOF
cat > "$R/rules/m.rules" <<'EOF'
[model rf]
source = rf.onnx
quantize = static
quantize.calibration = calib.npy
quantize.format = qoperator

[model rf8 : rf]
quantize.activations = int8

[model rfsym : rf]
quantize.symmetric-activations = true
EOF
if ! "$Q" -C "$R" rf rf8 rfsym > "$TMPD/rlog" 2>&1; then
	fail "the Add+Relu / Mul+Clip model quantizes" "$(grep quantmake: "$TMPD/rlog")"
	exit 0
fi
for m in rf rf8 rfsym; do
	"$Q" run "$R/build/$m/$m.onnx" -i input="$R/x.npy" -o "$TMPD/out-$m.npz" -q 2>"$TMPD/run.err" ||
		fail "quantmake runs $m" "$(tail -2 "$TMPD/run.err")"
done
"$PY" - "$R" "$TMPD" > "$TMPD/rf.out" 2>&1 <<'EOF'
import sys, json, numpy as np, onnx, onnxruntime as ort
from onnxruntime.quantization import quantize_static, QuantFormat, QuantType, CalibrationDataReader
R, T = sys.argv[1:]
ort.set_default_logger_severity(3)
x, calib = np.load(R + "/x.npy"), np.load(R + "/calib.npy")
class Reader(CalibrationDataReader):
    def __init__(self): self.it = iter([{"input": calib}])
    def get_next(self): return next(self.it, None)
run = lambda p: ort.InferenceSession(p, providers=["CPUExecutionProvider"]).run(None, {"input": x})[0]
sqnr = lambda ref, o: float(10 * np.log10((ref ** 2).sum() / max(((ref - o) ** 2).sum(), 1e-30)))
ref = run(R + "/rf.onnx")
fused = ["QuantizeLinear", "QLinearConv", "QLinearConv", "QLinearAdd", "QLinearConv", "QLinearMul", "QLinearConv",
         "DequantizeLinear"]
for m, act in (("rf", QuantType.QUInt8), ("rf8", QuantType.QInt8), ("rfsym", None)):
    p = "%s/build/%s/%s.onnx" % (R, m, m)
    mm = onnx.load(p)
    onnx.checker.check_model(mm, full_check=True)
    ops = [n.op_type for n in mm.graph.node]
    st = {n["name"]: n for n in json.load(open("%s/build/%s/quant.json" % (R, m)))["nodes"]}
    if m == "rfsym":
        # a symmetric range holds negatives: Relu and Clip must stay
        ok = "Relu" in ops and "Clip" in ops and st["relu"]["status"] == "skipped" and "symmetric" in st["relu"]["reason"]
    else:
        ok = ops == fused and st["relu"]["status"] == st["clip"]["status"] == "folded"
    print(("PASS: " if ok else "FAIL: ") + "%s: Relu after QLinearAdd and Clip after QLinearMul %s: %s"
          % (m, "stay float (symmetric)" if m == "rfsym" else "fold into the range", ops))
    theirs, ours = run(p), np.load("%s/out-%s.npz" % (T, m))["out"]
    d = float(np.abs(ours - theirs).max())
    print(("PASS: " if d <= 1e-5 * np.abs(theirs).max() else "FAIL: ") +
          "%s: quantmake's interpreter gives onnxruntime's outputs (max diff %.3g)" % (m, d))
    if act is not None:
        peer = "%s/peer-rf-%s.onnx" % (T, m)
        quantize_static(R + "/rf.onnx", peer, Reader(), quant_format=QuantFormat.QOperator, activation_type=act,
                        weight_type=QuantType.QInt8)
        a, b = sqnr(ref, theirs), sqnr(ref, run(peer))
        print(("PASS: " if a >= b - 1.0 else "FAIL: ") + "%s: SQNR %.1f dB, onnxruntime's QOperator quantizer %.1f dB "
              "(its ops: %s)" % (m, a, b, [n.op_type for n in onnx.load(peer).graph.node]))
EOF
grep -q '^PASS: ' "$TMPD/rf.out" && ! grep -q '^Traceback' "$TMPD/rf.out" && grep -E '^(PASS|FAIL): ' "$TMPD/rf.out" ||
	fail "Relu/Clip folding evaluation" "$(grep -E '^(PASS|FAIL)' "$TMPD/rf.out"; tail -3 "$TMPD/rf.out")"
