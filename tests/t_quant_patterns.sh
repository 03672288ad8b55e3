#!/bin/sh
# Decomposed normalizations and Gelus stay float in static quantization
# (src/quant/patterns.c): on an MLP with a tanh Gelu as jax2tf writes it, a
# LayerNorm as torch writes it below opset 17 and an erf Gelu as torch
# writes it below opset 20 (tests/models/mkpatterns.py), quant.json gives
# every node inside them the reason, the MatMuls and the LayerNorm's scale
# and shift are quantized, in QDQ and QOperator form; both models run in
# onnxruntime and keep more output SQNR than onnxruntime's quantize_static
# (which rounds every step) on rows of very different scales; a SiLU's Mul
# (no such pattern) is still quantized; magika's model (jax2tf: LayerNorms
# and tanh Gelus; bench/fetch-models.sh, skipped offline), calibrated and
# verified on features of this repository's own files, passes a 15 dB
# output SQNR gate (every step quantized, it keeps about -1 dB).
. "$(dirname "$0")/lib/common.sh"
mktmp
Q=$QUANTMAKE
if ! "$PY" -c 'import onnx, onnxruntime.quantization, numpy' 2>/dev/null; then
	fail "pattern tests" "$PY lacks onnx/onnxruntime (run scripts/venv.sh)"
	exit 0
fi
P=$TMPD/p
mkdir -p "$P/rules"
"$PY" "$ROOT/tests/models/mkpatterns.py" "$P" || { fail "test models" "mkpatterns.py failed"; exit 0; }
cat > "$P/rules/m.rules" <<'R'
[model p]
source = pat.onnx
quantize = static
quantize.calibration = calib/*.npy
verify.data = test.npz
verify.min-sqnr = 20

[model pq : p]
quantize.format = qoperator

[model s]
source = silu.onnx
quantize = static
quantize.calibration = calib/*.npy
R
"$Q" -C "$P" -j2 > "$TMPD/log" 2>&1
st=$?
[ $st -eq 0 ] && pass "build with the patterns in float passes its 20 dB gate" ||
	fail "build with the patterns in float passes its 20 dB gate" "status $st: $(grep -v '^ ' "$TMPD/log" | tail -4)"

"$PY" - "$P" > "$TMPD/out" 2>&1 <<'PY'
import json, sys, numpy as np, onnx, onnxruntime as ort
from onnxruntime.quantization import quantize_static, CalibrationDataReader, QuantFormat, QuantType
ort.set_default_logger_severity(3)
P = sys.argv[1]
gelu = "kept in float: inside a decomposed Gelu"
norm = "kept in float: inside a decomposed normalization"
want = {n: gelu for n in ("gelu1/square", "gelu1/cube", "gelu1/scale_cube", "gelu1/add", "gelu1/scale",
                          "gelu1/tanh", "gelu1/one_plus", "gelu1/half", "gelu1/mul", "gelu2/one_plus",
                          "gelu2/mul", "gelu2/half")}
want.update({n: norm for n in ("ln/mean", "ln/var", "ln/eps")})
def check(name, fmt):
    q = json.load(open("%s/build/%s/quant.json" % (P, name)))
    st = {n["name"]: n for n in q["nodes"]}
    # QOperator has no QLinear form of Tanh or ReduceMean: that reason comes first there
    bad = [n for n, why in want.items() if not st[n].get("reason", "").startswith(why) and
           not (fmt == "qoperator" and st[n].get("reason", "").startswith("no static QOperator quantization"))]
    print(("PASS: %s: the nodes inside the Gelus and the LayerNorm stay float with the reason" % fmt) if not bad
          else "FAIL: %s: reasons: %s" % (fmt, [(n, st[n]) for n in bad]))
    q_ok = [n for n in ("fc1", "fc2", "fc3") if st[n]["status"] == "quantized"]
    print(("PASS: %s: the MatMuls are quantized" % fmt) if len(q_ok) == 3 else "FAIL: %s: MatMuls %s" % (fmt, st))
for name, fmt in (("p", "qdq"), ("pq", "qoperator")):
    check(name, fmt)
q = json.load(open(P + "/build/p/quant.json"))
st = {n["name"]: n["status"] for n in q["nodes"]}
print("PASS: qdq: the LayerNorm's scale and shift are quantized" if st["ln/gamma"] == st["ln/beta"] == "quantized"
      else "FAIL: ln/gamma, ln/beta: %s %s" % (st["ln/gamma"], st["ln/beta"]))
s = json.load(open(P + "/build/s/quant.json"))
ss = {n["name"]: n["status"] for n in s["nodes"]}
print("PASS: a SiLU's Mul is still quantized" if ss["silu/mul"] == "quantized" else "FAIL: silu/mul %s" % ss)

x = np.load(P + "/test.npz")["x"]
ref = ort.InferenceSession(P + "/pat.onnx").run(None, {"x": x})[0]
def sqnr(path):
    y = ort.InferenceSession(path).run(None, {"x": x})[0]
    return 10 * np.log10((ref ** 2).sum() / ((ref - y) ** 2).sum())
class Reader(CalibrationDataReader):
    def __init__(self):
        self.it = iter([{"x": np.load("%s/calib/%03d.npy" % (P, i))} for i in range(200)])
    def get_next(self):
        return next(self.it, None)
quantize_static(P + "/pat.onnx", P + "/ort.onnx", Reader(), quant_format=QuantFormat.QDQ,
                activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8)
peer = sqnr(P + "/ort.onnx")
for name, fmt in (("p", "qdq"), ("pq", "qoperator")):
    onnx.checker.check_model(onnx.load("%s/build/%s/%s.onnx" % (P, name, name)))
    ours = sqnr("%s/build/%s/%s.onnx" % (P, name, name))
    print(("PASS: %s: onnxruntime runs it, SQNR %.1f dB against quantize_static's %.1f dB" % (fmt, ours, peer))
          if ours > peer + 3 else "FAIL: %s: SQNR %.1f dB, quantize_static %.1f dB" % (fmt, ours, peer))
PY
grep -E '^(PASS|FAIL): ' "$TMPD/out"
if grep -q '^Traceback' "$TMPD/out"; then
	fail "pattern checks" "$(grep -v '^\s' "$TMPD/out" | tail -2)"
fi

# ---- magika (bench/fetch-models.sh; skipped offline): jax2tf's LayerNorms
# and tanh Gelus; features of this repository's own files ----
if ! M=$(sh "$ROOT/bench/fetch-models.sh" 2>/dev/null) || [ ! -f "$M/magika/model.onnx" ]; then
	skip "magika static quantization" "bench/fetch-models.sh could not fetch the model"
	exit 0
fi
G=$TMPD/g
mkdir -p "$G/rules" "$G/cal"
cp "$M/magika/model.onnx" "$G/magika.onnx"
"$PY" - "$ROOT" "$G" <<'PY' || fail "magika features" "could not write them"
import os, sys, numpy as np
root, out = sys.argv[1], sys.argv[2]
def features(path):
    # magika 1.0.3's input: the first and last 1024 bytes (whitespace
    # stripped) of the first and last 4096, padded with 256
    with open(path, "rb") as f:
        head = f.read(4096)
        f.seek(max(0, os.path.getsize(path) - 4096))
        tail = f.read(4096)
    beg = list(head.lstrip()[:1024])
    end = list(tail.rstrip()[-1024:]) if tail.rstrip() else []
    return np.array(beg + [256] * (1024 - len(beg)) + [256] * (1024 - len(end)) + end, np.int32)[None]
files = sorted(os.path.join(d, f) for sub in ("src", "tests", "doc", "bench")
               for d, _, fs in os.walk(os.path.join(root, sub)) for f in fs
               if os.path.getsize(os.path.join(d, f)) > 0 and "/.cache" not in d)
for i, f in enumerate(files[0::2][:60]):
    np.savez("%s/cal/%03d.npz" % (out, i), bytes=features(f))
np.savez(out + "/eval.npz", bytes=np.concatenate([features(f) for f in files[1::2][:60]]))
PY
cat > "$G/rules/m.rules" <<'R'
[model m]
source = magika.onnx
quantize = static
quantize.calibration = cal/*.npz
verify.data = eval.npz
verify.min-sqnr = 15
R
"$Q" -C "$G" -j2 > "$TMPD/glog" 2>&1
st=$?
sq=$(sed -n 's/^  output target_label *SQNR \([-0-9.]*\) dB.*/\1/p' "$TMPD/glog" | head -1)
n=$(grep -c 'decomposed' "$G/build/m/quant.json" 2>/dev/null)
[ $st -eq 0 ] && [ "${n:-0}" -ge 30 ] && pass "magika: $n nodes of its LayerNorms and Gelus in float, output SQNR $sq dB (gate 15)" ||
	fail "magika static quantization" "status $st, SQNR ${sq:-?} dB, $n pattern nodes: $(grep -v '^ ' "$TMPD/glog" | tail -3)"
