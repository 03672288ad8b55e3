#!/bin/sh
# The 8-bit weights static quantization writes, and the SQNRs that
# quantize.per-channel = auto decides by, are the documented arithmetic to
# the bit, recomputed here in numpy from the float model:
# - every quantized weight (per tensor and per channel, int8 symmetric and
#   uint8 asymmetric) is clip(round_half_even(w / scale) + zero_point) in
#   float32, with scale and zero point from the weight's (channel's)
#   minimum and maximum as qparams.c states them;
# - quant.json's per_tensor_db and per_channel_db of each auto decision are
#   the mean over channels of 10 log10(sum v^2 / sum (v - round(v / s) s)^2),
#   the sums taken in double in the weight's own order (np.cumsum is
#   sequential), s = max |v| / 127 of the tensor or of the channel, and the
#   decision per channel when under 30 dB with one scale and better with
#   one per channel.
# The weights cover the vectorized paths' edges: channel counts that leave
# a remainder after groups of four, channels one value wide (a MatMul's
# [K, N] weight along N), a channel that is all zeros and non-negative
# ones whose minimum is exactly zero, values exactly halfway between two
# levels (power-of-two scales), ranges 1000x apart, and a 1.6 MB weight.
. "$(dirname "$0")/lib/common.sh"
mktmp
Q=$QUANTMAKE
if ! "$PY" -c 'import onnx, numpy' 2>/dev/null; then
	fail "exact weight quantization" "$PY lacks onnx/numpy (run scripts/venv.sh)"
	exit 0
fi

P=$TMPD/p
mkdir -p "$P/rules" "$P/cal"
"$PY" - "$P" <<'EOF' || fail "exact weight quantization: the model" "mk failed"
import sys, numpy as np, onnx
from onnx import helper as h, TensorProto as T, numpy_helper as nh
P = sys.argv[1]
rng = np.random.default_rng(5)
N = h.make_node
# 13 output channels (a remainder of 1 after groups of 4), ranges 1000x apart
w1 = rng.standard_normal((13, 6, 3, 3)).astype(np.float32)
w1 *= (10.0 ** (3 * np.arange(13) / 12)).astype(np.float32)[:, None, None, None] / 100
w1[2] = np.abs(w1[2])                     # non-negative, minimum exactly 0
w1[2, 0, 0, 0] = 0.0
w1[2, 1, 1, 1] = -0.0
w1[5] = 0.0                               # a channel of zeros
# values on and halfway between the levels of a power-of-two scale
e = np.float32(2.0 ** -7)
k = rng.integers(-127, 127, size=(10, 13, 1, 1)).astype(np.float32)
w2 = (k + rng.integers(0, 2, size=k.shape).astype(np.float32) * 0.5) * e
w2[:, 0] = 127 * e
# [K, N] along N: channels one value wide; 640 x 620 floats, 1.6 MB
w3 = (rng.standard_normal((640, 620)) * 0.05).astype(np.float32)
w3[:, 7] *= 1000
w4 = rng.standard_normal((5, 620)).astype(np.float32)
nodes = [
    N("Conv", ["x", "w1"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
    N("Relu", ["c1"], ["r1"], name="relu1"),
    N("Conv", ["r1", "w2"], ["c2"], name="conv2"),
    N("Relu", ["c2"], ["r2"], name="relu2"),
    N("Reshape", ["r2", "shape"], ["f"], name="flat"),
    N("MatMul", ["f", "w3"], ["m"], name="mm"),
    N("Gemm", ["m", "w4"], ["y"], name="gemm", transB=1),
]
inits = [nh.from_array(w1, "w1"), nh.from_array(w2, "w2"), nh.from_array(w3, "w3"), nh.from_array(w4, "w4"),
         nh.from_array(np.array([1, 640], np.int64), "shape")]
g = h.make_graph(nodes, "exact", [h.make_tensor_value_info("x", T.FLOAT, [1, 6, 8, 8])],
                 [h.make_tensor_value_info("y", T.FLOAT, [1, 5])], inits)
m = h.make_model(g, opset_imports=[h.make_opsetid("", 13)])
m.ir_version = 7
onnx.checker.check_model(m, full_check=True)
onnx.save(m, P + "/m.onnx")
for i in range(4):
    np.savez(P + "/cal/s%d.npz" % i, x=rng.standard_normal((1, 6, 8, 8)).astype(np.float32))
EOF
cat > "$P/rules/m.rules" <<EOF
[model auto]
source = m.onnx
quantize = static
quantize.calibration = cal

[model on]
source = m.onnx
quantize = static
quantize.calibration = cal
quantize.per-channel = true

[model off]
source = m.onnx
quantize = static
quantize.calibration = cal
quantize.per-channel = false

[model u8]
source = m.onnx
quantize = static
quantize.calibration = cal
quantize.weights = uint8
quantize.per-channel = false
EOF
if ! "$Q" -C "$P" > "$TMPD/log" 2>&1; then
	fail "exact weight quantization: the builds" "$(tail -3 "$TMPD/log")"
	exit 0
fi

"$PY" - "$P" <<'EOF'
import sys, json, numpy as np, onnx
from onnx import numpy_helper as nh
P = sys.argv[1]
src = {t.name: nh.to_array(t) for t in onnx.load(P + "/m.onnx").graph.initializer}
ok = lambda name, cond, why="": print(("PASS: " if cond else "FAIL: ") + name + ("" if cond else ": " + str(why)))
f32 = np.float32

def qparams(rmin, rmax, dt):
    # qparams.c in float32: the range takes in 0, symmetric for int8
    qmin, qmax = (-127, 127) if dt == np.int8 else (0, 255)
    rmin, rmax = min(rmin, f32(0)), max(rmax, f32(0))
    if dt == np.int8:
        a = max(abs(rmin), abs(rmax))
        rmin, rmax = -a, a
    s = f32(f32(rmax - rmin) / f32(qmax - qmin))
    if not (s >= np.finfo(np.float32).tiny) or not np.isfinite(s):
        return f32(1), 0 if dt == np.int8 else 0
    if dt == np.int8:
        return s, 0
    zp = np.rint(float(qmin) - float(f32(rmin / s)))
    return s, int(min(max(zp, qmin), qmax))

def reference(w, axis, dt):
    # channels along axis (or one for all), each quantized by its own range
    wm = np.moveaxis(w, axis, 0) if axis is not None else w.reshape(1, -1)
    q = np.empty(wm.shape, dt)
    scales, zps = [], []
    for c in range(wm.shape[0]):
        v = wm[c]
        s, zp = qparams(v.min(), v.max(), dt)
        lo, hi = (-127, 127) if dt == np.int8 else (0, 255)
        q[c] = np.clip(np.rint(v / s) + f32(zp), lo, hi).astype(dt)
        scales.append(s)
        zps.append(zp)
    q = np.moveaxis(q, 0, axis) if axis is not None else q.reshape(w.shape)
    return q, np.array(scales, f32), np.array(zps)

def weights(model):
    m = onnx.load("%s/build/%s/%s.onnx" % (P, model, model))
    init = {t.name: nh.to_array(t) for t in m.graph.initializer}
    out = {}
    for n in m.graph.node:
        if n.op_type == "DequantizeLinear" and n.input[0] in init:
            axis = [a.i for a in n.attribute if a.name == "axis"]
            name = n.input[0][:-len("_quantized")]
            out[name] = (init[n.input[0]], init[n.input[1]], init[n.input[2]],
                         axis[0] if axis and init[n.input[1]].ndim == 1 else None)
    return out

for model, dt in (("auto", np.int8), ("on", np.int8), ("off", np.int8), ("u8", np.uint8)):
    got = weights(model)
    ok("%s: all four weights quantized" % model, sorted(got) == ["w1", "w2", "w3", "w4"], sorted(got))
    for name, (q, s, zp, axis) in sorted(got.items()):
        rq, rs, rzp = reference(src[name], axis, dt)
        same = q.dtype == rq.dtype and q.shape == rq.shape and q.tobytes() == rq.tobytes()
        ok("%s: %s (%s, axis %s) is the reference's bytes" % (model, name, q.dtype, axis), same,
           "%d of %d values differ" % (int((q != rq).sum()), q.size) if q.shape == rq.shape else q.shape)
        ok("%s: %s scales and zero points are the reference's" % (model, name),
           np.array(s, f32).reshape(-1).tobytes() == rs.tobytes() and
           list(np.array(zp).reshape(-1).astype(int)) == [int(z) for z in rzp], (s, rs))

def sqnr_db(w, axis):
    # the channels of [outer, ch, inner] with ch on axis, each summed in
    # the weight's memory order
    outer = int(np.prod(w.shape[:axis])); ch = w.shape[axis]
    x = w.reshape(outer, ch, -1).astype(np.float64)
    mx = np.abs(w.reshape(outer, ch, -1)).max(axis=(0, 2))
    res = []
    for per_channel in (False, True):
        sig = np.zeros(ch); err = np.zeros(ch)
        for c in range(ch):
            m = mx[c] if per_channel else mx.max()
            s = float(m) / 127 if m > 0 else 1.0
            v = x[:, c, :].reshape(-1)
            d = v - np.rint(v / s) * s
            sig[c] = np.cumsum(v * v)[-1]
            err[c] = np.cumsum(d * d)[-1]
        dbs = [10 * np.log10(sig[c] / err[c]) if err[c] > 0 else 999 for c in range(ch) if sig[c] > 0]
        total = 0.0
        for d in dbs:
            total += d
        res.append(total / len(dbs) if dbs else 999)
    return res

j = json.load(open(P + "/build/auto/quant.json"))
auto = {e["weight"]: e for e in j.get("per_channel_auto", [])}
axes = {"w1": 0, "w2": 0, "w3": 1, "w4": 0}
ok("auto: a decision for every weight", sorted(auto) == sorted(axes), sorted(auto))
for name, axis in sorted(axes.items()):
    if name not in auto:
        continue
    t, c = sqnr_db(src[name], axis)
    e = auto[name]
    want = "%.1f %.1f %s" % (t, c, t < 30 and c > t)
    have = "%.1f %.1f %s" % (e["per_tensor_db"], e["per_channel_db"], e["per_channel"])
    ok("auto: %s's SQNRs and decision are the reference's (%s)" % (name, want), want == have, have)
ok("auto: the 1000x-spread weights go per channel, the others not",
   [auto[n]["per_channel"] for n in ("w1", "w2", "w3", "w4")] == [True, False, True, False],
   [(n, auto[n]["per_channel"]) for n in sorted(auto)])
EOF
