#!/bin/sh
# Dynamic quantization of LSTM into com.microsoft DynamicQuantizeLSTM
# (src/quant/dynamic.c) and its interpreter kernel (src/ops/dqlstm.c):
#   - the kernel: LSTMs (forward, reverse, bidirectional; bias, initial
#     states, peepholes, sequence_lens with a batch of three, clip; int8
#     weights per direction and per column) quantized by onnxruntime's
#     quantize_dynamic and run by onnxruntime (one thread) and by quantmake
#     give the same outputs to float rounding;
#   - bad DynamicQuantizeLSTM inputs are one named error;
#   - quantize = dynamic on LSTM models (per tensor and per channel) writes
#     the initializers onnxruntime's quantize_dynamic writes, byte for byte;
#     the model passes onnx.checker, imports com.microsoft 1, runs in
#     onnxruntime, quantmake's interpreter gives onnxruntime's outputs, and
#     the SQNR against the float model is printed beside the peer's;
#   - verify runs such a model on 16 random samples and passes its gate;
#   - GRU stays float with the reason in quant.json, so do an LSTM with
#     layout = 1 and one whose weights are not initializers; an LSTM in an
#     If branch is quantized there;
#   - silero-vad (bench/fetch-models.sh; skipped offline): its four LSTMs
#     (inside If branches, weights folded by preprocess) are quantized and
#     quantmake runs the result as onnxruntime does.
. "$(dirname "$0")/lib/common.sh"
mktmp
Q=$QUANTMAKE
if ! "$PY" -c 'import onnx, onnxruntime.quantization, numpy' 2>/dev/null; then
	fail "LSTM quantization tests" "$PY lacks onnx/onnxruntime (run scripts/venv.sh)"
	exit 0
fi

# the PASS/FAIL lines of a Python check, and a FAIL if it stopped early
report() {
	grep -E '^(PASS|FAIL): ' "$1"
	if grep -q '^Traceback' "$1" || ! grep -q '^PASS: ' "$1"; then
		fail "$2" "$(grep -v '^\s' "$1" | grep -v -E '^(PASS|FAIL|Traceback)' | tail -2)"
	fi
}

# ---- models: float LSTMs and onnxruntime's dynamic quantization of them ----
cat > "$TMPD/lib.py" <<'EOF'
import numpy as np, onnx, onnxruntime as ort
from onnx import helper as h, TensorProto as TP, numpy_helper as nh
ort.set_default_logger_severity(3)

def lstm_model(path, rng, I, H, direction="forward", bias=True, states=False, peep=False, lens=False,
               clip=None, layout=0, extra=(), batch=3, noy=False):
    """an LSTM (plus extra nodes reading its output y) saved at path; feeds for 7 steps"""
    nd = 2 if direction == "bidirectional" else 1
    W = (rng.standard_normal((nd, 4 * H, I)) / np.sqrt(I)).astype(np.float32)
    R = (rng.standard_normal((nd, 4 * H, H)) / np.sqrt(H)).astype(np.float32)
    inits = [nh.from_array(W, "W"), nh.from_array(R, "R")]
    ins, feeds, gi = ["x", "W", "R"], {}, []
    x = rng.standard_normal((batch, 7, I) if layout else (7, batch, I)).astype(np.float32)
    gi.append(h.make_tensor_value_info("x", TP.FLOAT, list(x.shape))); feeds["x"] = x
    def opt(name, arr, init):
        if arr is None:
            ins.append(""); return
        ins.append(name)
        if init:
            inits.append(nh.from_array(arr, name))
        else:
            gi.append(h.make_tensor_value_info(name, TP.FLOAT if arr.dtype == np.float32 else TP.INT32, list(arr.shape)))
            feeds[name] = arr
    opt("B", (rng.standard_normal((nd, 8 * H)) * 0.1).astype(np.float32) if bias else None, True)
    opt("lens", np.array([7, 4, 6][:batch], np.int32) if lens else None, False)
    st = (batch, nd, H) if layout else (nd, batch, H)
    opt("h0", (rng.standard_normal(st) * 0.5).astype(np.float32) if states else None, False)
    opt("c0", (rng.standard_normal(st) * 0.5).astype(np.float32) if states else None, False)
    opt("P", (rng.standard_normal((nd, 3 * H)) * 0.1).astype(np.float32) if peep else None, True)
    while ins[-1] == "":
        ins.pop()
    attrs = {"hidden_size": H, "direction": direction}
    if clip:
        attrs["clip"] = clip
    if layout:
        attrs["layout"] = layout
    outs = (["yh", "yc"] if noy else ["y", "yh", "yc"]) + [n.output[0] for n in extra]
    nodes = [h.make_node("LSTM", ins, ["" if noy else "y", "yh", "yc"], name="lstm", **attrs)] + list(extra)
    g = h.make_graph(nodes, "g", gi, [h.make_tensor_value_info(o, TP.FLOAT, None) for o in outs], inits)
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 14)])
    m.ir_version = 8
    onnx.save(m, path)
    return feeds

def run(path, feeds):
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1   # onnxruntime splits the batch among threads (see dqlstm.c)
    s = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    return dict(zip([o.name for o in s.get_outputs()], s.run(None, feeds)))

def sqnr(a, b):
    return float(10 * np.log10((a.astype(np.float64) ** 2).sum() / max(((a - b).astype(np.float64) ** 2).sum(), 1e-30)))
EOF

# ---- the kernel against onnxruntime ----
"$PY" - "$Q" "$TMPD" > "$TMPD/kern.out" 2>&1 <<'EOF'
import sys, subprocess, numpy as np
sys.path.insert(0, sys.argv[2])
from lib import *
from onnxruntime.quantization import quantize_dynamic, QuantType
Q, T = sys.argv[1:]
rng = np.random.default_rng(7)
cases = [("fwd", dict(I=16, H=8), False, QuantType.QInt8),
         ("fwd-pc", dict(I=16, H=8), True, QuantType.QInt8),
         ("rev-states", dict(I=5, H=40, direction="reverse", states=True), False, QuantType.QInt8),
         ("bi-pc-peep", dict(I=12, H=10, direction="bidirectional", states=True, peep=True), True, QuantType.QInt8),
         ("bi-nobias-clip", dict(I=9, H=6, direction="bidirectional", bias=False, clip=0.8), False, QuantType.QInt8),
         ("lens-batch1", dict(I=8, H=8, lens=True, batch=1), False, QuantType.QInt8),
         ("rev-lens", dict(I=8, H=16, direction="reverse", lens=True), False, QuantType.QInt8),
         ("bi-lens-noy", dict(I=8, H=16, direction="bidirectional", lens=True, noy=True), True, QuantType.QInt8),
         ("bi-lens", dict(I=8, H=16, direction="bidirectional", lens=True, states=True), False, QuantType.QInt8)]
for name, kw, pc, wt in cases:
    f = "%s/k-%s.onnx" % (T, name)
    feeds = lstm_model(f, rng, **kw)
    quantize_dynamic(f, f[:-5] + "-q.onnx", weight_type=wt, per_channel=pc)
    want = run(f[:-5] + "-q.onnx", feeds)
    args = [Q, "run", f[:-5] + "-q.onnx", "-o", "%s/k-%s.npz" % (T, name), "-q"]
    for k, v in feeds.items():
        np.save("%s/k-%s-%s.npy" % (T, name, k), v)
        args += ["-i", "%s=%s/k-%s-%s.npy" % (k, T, name, k)]
    r = subprocess.run(args, capture_output=True, text=True)
    if r.returncode:
        print("FAIL: DynamicQuantizeLSTM %s: quantmake run: %s" % (name, r.stderr.strip()[-300:]))
        continue
    got = np.load("%s/k-%s.npz" % (T, name))
    d = max(float(np.abs(got[k] - want[k]).max()) for k in want)
    print(("PASS: " if d <= 1e-5 else "FAIL: ") + "DynamicQuantizeLSTM %s: quantmake gives onnxruntime's outputs "
          "(max abs diff %.2g)" % (name, d))
EOF
report "$TMPD/kern.out" "DynamicQuantizeLSTM kernel tests"

# ---- bad input: one named error ----
"$PY" - "$TMPD" <<'EOF'
import sys, numpy as np, onnx
from onnx import helper as h, TensorProto as TP, numpy_helper as nh
T = sys.argv[1]
def save(name, wshape, zp):
    W = np.zeros(wshape, np.int8)
    R = np.zeros((1, 4, 16), np.int8)
    inits = [nh.from_array(W, "W"), nh.from_array(R, "R"), nh.from_array(np.full((1, 16), 0.1, np.float32), "ws"),
             nh.from_array(zp, "wz"), nh.from_array(np.full((1,), 0.1, np.float32), "rs"), nh.from_array(np.zeros(1, np.int8), "rz")]
    n = h.make_node("DynamicQuantizeLSTM", ["x", "W", "R", "", "", "", "", "", "ws", "wz", "rs", "rz"], ["y"],
                    name="dq", domain="com.microsoft", hidden_size=4)
    g = h.make_graph([n], "g", [h.make_tensor_value_info("x", TP.FLOAT, [2, 1, 3])],
                     [h.make_tensor_value_info("y", TP.FLOAT, None)], inits)
    onnx.save(h.make_model(g, ir_version=8, opset_imports=[h.make_opsetid("", 14), h.make_opsetid("com.microsoft", 1)]),
              "%s/%s.onnx" % (T, name))
z = np.zeros((1, 16), np.int8)
save("bad-shape", (1, 16, 3), z)
z2 = z.copy(); z2[0, 5] = 3
save("bad-zp", (1, 3, 16), z2)
np.save(T + "/x3.npy", np.ones((2, 1, 3), np.float32))
EOF
expect_err "DynamicQuantizeLSTM with W not transposed is an error" 1 \
	"node 'dq' \(DynamicQuantizeLSTM\): W has shape \[1,16,3\], expected \[1,3,16\]" \
	"$Q" run "$TMPD/bad-shape.onnx" -i x="$TMPD/x3.npy"
expect_err "DynamicQuantizeLSTM with zero points differing in a direction is an error" 1 \
	"node 'dq' \(DynamicQuantizeLSTM\): W_zero_point differs within direction 0 .*one zero point per direction" \
	"$Q" run "$TMPD/bad-zp.onnx" -i x="$TMPD/x3.npy"

# ---- quantize = dynamic on LSTM models ----
P=$TMPD/p
mkdir -p "$P/rules"
"$PY" - "$P" "$TMPD" <<'EOF'
import sys, numpy as np, onnx
sys.path.insert(0, sys.argv[2])
from lib import *
P = sys.argv[1]
rng = np.random.default_rng(3)
feeds = {}
feeds["fwd"] = lstm_model(P + "/fwd.onnx", rng, 16, 32, states=True)
feeds["bi"] = lstm_model(P + "/bi.onnx", rng, 24, 20, direction="bidirectional", peep=True)
# LSTM then GRU then a MatMul head: the GRU stays float
G = h.make_node("GRU", ["y2", "GW", "GR"], ["gy"], name="gru", hidden_size=6)
inits = [nh.from_array((rng.standard_normal((1, 18, 8)) * 0.3).astype(np.float32), "GW"),
         nh.from_array((rng.standard_normal((1, 18, 6)) * 0.3).astype(np.float32), "GR"),
         nh.from_array((rng.standard_normal((6, 5)) * 0.3).astype(np.float32), "FW")]
extra = [h.make_node("Squeeze", ["y", "ax"], ["y2"], name="sq"), G,
         h.make_node("MatMul", ["gy", "FW"], ["head"], name="head")]
feeds["mix"] = lstm_model(P + "/mix.onnx", rng, 10, 8, extra=extra)
m = onnx.load(P + "/mix.onnx")
m.graph.initializer.extend(inits + [nh.from_array(np.array([1], np.int64), "ax")])
onnx.save(m, P + "/mix.onnx")
feeds["lay"] = lstm_model(P + "/lay.onnx", rng, 10, 8, layout=1, extra=[
    h.make_node("MatMul", ["yh", "FW"], ["head"], name="head")])
m = onnx.load(P + "/lay.onnx")
m.graph.initializer.append(nh.from_array((rng.standard_normal((8, 5)) * 0.3).astype(np.float32), "FW"))
onnx.save(m, P + "/lay.onnx")
# an LSTM in each branch of an If: both quantized inside their branch
W = [(rng.standard_normal((1, 32, 6)) * 0.4).astype(np.float32) for _ in range(2)]
R = [(rng.standard_normal((1, 32, 8)) * 0.3).astype(np.float32) for _ in range(2)]
def branch(k):
    n = h.make_node("LSTM", ["x", "W%d" % k, "R%d" % k], ["", "by%d" % k], name="lstm", hidden_size=8)
    return h.make_graph([n], "b%d" % k, [], [h.make_tensor_value_info("by%d" % k, TP.FLOAT, None)],
                        [nh.from_array(W[k], "W%d" % k), nh.from_array(R[k], "R%d" % k)])
g = h.make_graph([h.make_node("If", ["c"], ["o"], name="If_0", then_branch=branch(0), else_branch=branch(1))], "g",
                 [h.make_tensor_value_info("c", TP.BOOL, []), h.make_tensor_value_info("x", TP.FLOAT, [5, 2, 6])],
                 [h.make_tensor_value_info("o", TP.FLOAT, None)])
m = h.make_model(g, opset_imports=[h.make_opsetid("", 14)]); m.ir_version = 8
onnx.save(m, P + "/iff.onnx")
feeds["iff"] = {"c": np.array(True), "x": rng.standard_normal((5, 2, 6)).astype(np.float32)}
for k, f in feeds.items():
    np.savez("%s/%s-in.npz" % (P, k), **f)
EOF
cat > "$P/rules/m.rules" <<'EOF'
[model fwd]
source = fwd.onnx
quantize = dynamic

[model fwdpc : fwd]
quantize.per-channel = true

[model fwdv : fwd]
verify.data = random

[model bi]
source = bi.onnx
quantize = dynamic

[model bipc : bi]
quantize.per-channel = true

[model biu8 : bi]
quantize.weights = uint8

[model mix]
source = mix.onnx
quantize = dynamic

[model lay]
source = lay.onnx
quantize = dynamic

[model iff]
source = iff.onnx
quantize = dynamic
EOF
if ! "$Q" -C "$P" -j2 all > "$TMPD/log" 2>&1; then
	fail "LSTM models quantize dynamically" "$(grep quantmake: "$TMPD/log")"
	exit 0
fi
pass "LSTM models quantize dynamically"
# verify ran the quantized LSTM on 16 samples (one plan: the cached weights)
if grep -q '"passed": true' "$P/build/fwdv/verify.json" 2>/dev/null; then
	pass "verify runs the DynamicQuantizeLSTM model on 16 samples and passes its default gate"
else
	fail "verify runs the DynamicQuantizeLSTM model on 16 samples and passes its default gate" "$(grep -E 'verify|sqnr' "$TMPD/log" | tail -3)"
fi
for m in fwd fwdpc bi bipc biu8 mix lay iff; do
	base=${m%pc}
	base=${base%u8}
	"$Q" run "$P/build/$m/$m.onnx" -i "$P/$base-in.npz" -o "$TMPD/out-$m.npz" -q 2>"$TMPD/run.err" ||
		fail "quantmake runs $m" "$(tail -2 "$TMPD/run.err")"
done
"$PY" - "$P" "$TMPD" > "$TMPD/q.out" 2>&1 <<'EOF'
import sys, json, numpy as np, onnx
sys.path.insert(0, sys.argv[2])
from lib import *
from onnxruntime.quantization import quantize_dynamic, QuantType
P, T = sys.argv[1:]
def nodes(g):
    for n in g.node:
        yield n
        for a in n.attribute:
            if a.g.node:
                yield from nodes(a.g)
def inits(g):
    d = {i.name: nh.to_array(i) for i in g.initializer}
    for n in g.node:
        for a in n.attribute:
            if a.g.node:
                d.update(inits(a.g))
    return d
for m in ("fwd", "fwdpc", "bi", "bipc", "biu8", "mix", "lay", "iff"):
    base = m.replace("pc", "").replace("u8", "")
    p = "%s/build/%s/%s.onnx" % (P, m, m)
    mm = onnx.load(p)
    onnx.checker.check_model(mm, full_check=True)
    ops = [n.op_type for n in nodes(mm.graph)]
    imp = {o.domain: o.version for o in mm.opset_import}
    rep = {n["name"]: n for n in json.load(open("%s/build/%s/quant.json" % (P, m)))["nodes"]}
    if m == "lay":
        # onnxruntime runs no LSTM with layout = 1, float or quantized
        ok = ops == ["LSTM", "DynamicQuantizeLinear", "MatMulInteger", "Cast", "Mul", "Mul"] and \
            rep["lstm"]["status"] == "skipped" and "layout" in rep["lstm"]["reason"]
        print(("PASS: " if ok else "FAIL: ") + "lay: %s; lstm: %s" % (ops, rep["lstm"]["reason"]))
        continue
    feeds = dict(np.load("%s/%s-in.npz" % (P, base)))
    ref, theirs, ours = run("%s/%s.onnx" % (P, base), feeds), run(p, feeds), np.load("%s/out-%s.npz" % (T, m))
    d = max(float(np.abs(ours[k] - theirs[k]).max()) for k in theirs)
    out = "o" if m == "iff" else "head" if m in ("mix", "lay") else "y"
    line = "%s: %s; quantmake = onnxruntime on it (max diff %.2g); SQNR %.1f dB" % (m, ops, d, sqnr(ref[out], theirs[out]))
    ok = d <= 1e-5
    if m in ("fwd", "fwdpc", "bi", "bipc"):
        peer = "%s/peer-%s.onnx" % (T, m)
        quantize_dynamic("%s/%s.onnx" % (P, base), peer, weight_type=QuantType.QInt8, per_channel=m.endswith("pc"))
        a, b = inits(onnx.load(peer).graph), inits(mm.graph)
        same = all(k in b and a[k].dtype == b[k].dtype and np.array_equal(a[k], b[k]) for k in a)
        line += ", onnxruntime quantize_dynamic %.1f dB; its initializers, byte for byte: %s" % (
            sqnr(ref[out], run(peer, feeds)[out]), same)
        ok = ok and same and ops == ["DynamicQuantizeLSTM"]
    if m == "biu8":
        ok = ok and mm.graph.initializer and [i for i in mm.graph.initializer if i.name == "W_quantized"][0].data_type == TP.UINT8
    if m == "mix":
        ok = ok and ops == ["DynamicQuantizeLSTM", "Squeeze", "GRU", "DynamicQuantizeLinear", "MatMulInteger",
                            "Cast", "Mul", "Mul"] and "no quantized GRU" in rep["gru"]["reason"]
        line += "; gru: %s" % rep["gru"]["reason"]
    if m == "iff":
        ok = ok and ops == ["If", "DynamicQuantizeLSTM", "DynamicQuantizeLSTM"] and \
            rep["If_0/then/lstm"]["status"] == rep["If_0/else/lstm"]["status"] == "quantized"
    if ops.count("DynamicQuantizeLSTM"):
        ok = ok and imp.get("com.microsoft") == 1 and rep.get("lstm", rep.get("If_0/then/lstm"))["reason"] == "com.microsoft DynamicQuantizeLSTM"
    print(("PASS: " if ok else "FAIL: ") + line)
EOF
report "$TMPD/q.out" "LSTM quantization evaluation"

# ---- silero-vad: four LSTMs inside If branches ----
if ! M=$(sh "$ROOT/bench/fetch-models.sh" 2>/dev/null) || [ ! -f "$M/silero/silero_vad.onnx" ]; then
	skip "silero-vad LSTM quantization" "bench/fetch-models.sh could not fetch the model"
	exit 0
fi
S=$TMPD/s
mkdir -p "$S/rules"
cp "$M/silero/silero_vad.onnx" "$S/silero.onnx"
cat > "$S/rules/m.rules" <<'EOF'
[model sd]
source = silero.onnx
preprocess = default
quantize = dynamic

[model sdpc : sd]
quantize.per-channel = true
EOF
if ! "$Q" -C "$S" -j2 all sd:preprocess > "$TMPD/slog" 2>&1; then
	fail "silero-vad quantizes its LSTMs" "$(grep quantmake: "$TMPD/slog")"
	exit 0
fi
"$PY" - "$S" > "$TMPD/sfeeds" 2>&1 <<'EOF'
import sys, numpy as np
def silero_signal(n, seed):
    """n chunks of 512 samples at 16 kHz: voiced stretches (a pulse train
    through two resonances, with pitch drift) between noise and silence"""
    r = np.random.default_rng(seed)
    out = []
    while len(out) * 512 < n * 512:
        kind, dur = r.integers(0, 3), int(r.integers(4000, 16000))
        if kind == 0:
            f0 = r.uniform(90, 220) * (1 + 0.1 * np.sin(np.arange(dur) / 3000))
            src = (np.diff(np.floor(np.cumsum(f0 / 16000)), prepend=0) > 0).astype(np.float32)
            sig = np.zeros(dur, np.float32)
            for fr, bw in ((r.uniform(400, 800), 80), (r.uniform(1000, 2200), 120)):
                a = np.exp(-np.pi * bw / 16000)
                b1, b2 = 2 * a * np.cos(2 * np.pi * fr / 16000), -a * a
                y1 = y2 = 0.0
                y = np.empty(dur, np.float32)
                for i in range(dur):
                    y0 = src[i] + b1 * y1 + b2 * y2
                    y[i], y2, y1 = y0, y1, y0
                sig += y
            sig *= 0.3 / max(np.abs(sig).max(), 1e-6)
        elif kind == 1:
            sig = (r.standard_normal(dur) * 0.05).astype(np.float32)
        else:
            sig = (r.standard_normal(dur) * 0.002).astype(np.float32)
        out.append(sig)
    return np.concatenate(out)[:n * 512].astype(np.float32).reshape(n, 1, 512)
np.save(sys.argv[1] + "/chunks.npy", silero_signal(60, 6))
EOF
"$PY" - "$S" "$TMPD" "$Q" > "$TMPD/s.out" 2>&1 <<'EOF'
import sys, json, subprocess, numpy as np, onnx
sys.path.insert(0, sys.argv[2])
from lib import *
S, T, Q = sys.argv[1:]
chunks = np.load(S + "/chunks.npy")
def stream(p):
    so = ort.SessionOptions(); so.intra_op_num_threads = 1
    s = ort.InferenceSession(p, so, providers=["CPUExecutionProvider"])
    st, sr, pr, fs = np.zeros((2, 1, 128), np.float32), np.array(16000, np.int64), [], []
    for c in chunks:
        fs.append({"input": c, "state": st, "sr": sr})
        o, st = s.run(None, fs[-1])
        pr.append(o)
    return np.concatenate(pr), fs
ref, feeds = stream(S + "/build/sd/preprocess/sd.onnx")
for m in ("sd", "sdpc"):
    p = "%s/build/%s/%s.onnx" % (S, m, m)
    onnx.checker.check_model(onnx.load(p), full_check=True)
    rep = json.load(open("%s/build/%s/quant.json" % (S, m)))["nodes"]
    nl = sum(n["op"] == "LSTM" and n["status"] == "quantized" for n in rep)
    q, qf = stream(p)
    worst = 0.0
    for i in (0, 20, 40, 59):
        np.savez("%s/f%d.npz" % (T, i), **qf[i])
        subprocess.run([Q, "run", p, "-i", "%s/f%d.npz" % (T, i), "-o", "%s/o%d.npz" % (T, i), "-q"], check=True)
        got, want = np.load("%s/o%d.npz" % (T, i)), run(p, qf[i])
        worst = max([worst] + [float(np.abs(got[k] - want[k]).max()) for k in want])
    print(("PASS: " if nl == 4 and worst <= 1e-5 else "FAIL: ") + "silero-vad %s: %d LSTMs quantized; quantmake = "
          "onnxruntime on it (max diff %.2g over 4 chunks); speech-probability SQNR vs float %.1f dB over %d chunks"
          % (m, nl, worst, sqnr(ref, q), len(chunks)))
EOF
report "$TMPD/s.out" "silero-vad LSTM evaluation"
