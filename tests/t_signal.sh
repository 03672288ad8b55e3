#!/bin/sh
# Signal operators (src/ops/signal.c) against onnxruntime beyond ONNX's own
# node tests (tests/t_run_conformance.sh runs those): DFT-17 and DFT-20
# (axis input, negative axes, real and complex input, dft_length shorter
# and longer than the signal, onesided, inverse, inverse onesided = a real
# signal), STFT (with and without a window, a window shorter than the
# frame, complex input, batch 2, two-sided), the three windows periodic and
# symmetric in float and double, MelWeightMatrix; shapes from
# infer-shapes equal to the outputs'; bad inputs are one error line naming
# the node. Outputs match onnxruntime within 1e-4 of the largest magnitude.
. "$(dirname "$0")/lib/common.sh"
mktmp
Q=$QUANTMAKE
if ! "$PY" -c 'import numpy, onnx, onnxruntime' 2>/dev/null; then
	fail "signal operators" "$PY lacks numpy/onnx/onnxruntime (run scripts/venv.sh)"
	exit 0
fi

"$PY" - "$Q" "$TMPD" <<'EOF'
import subprocess, sys
import numpy as np, onnx, onnxruntime as ort
from onnx import helper as h, TensorProto as TP, numpy_helper as nh
ort.set_default_logger_severity(3)
Q, T = sys.argv[1:]
rng = np.random.default_rng(11)
TYPES = {np.float32: TP.FLOAT, np.float64: TP.DOUBLE, np.int64: TP.INT64, np.int32: TP.INT32}
n_case = [0]

def model(op, feeds, attrs, opset, inputs=None):
    names = inputs if inputs is not None else list(feeds)
    node = h.make_node(op, names, ["y"], name=op.lower(), **attrs)
    ins = [h.make_tensor_value_info(k, TYPES[v.dtype.type], v.shape) for k, v in feeds.items()]
    et = attrs.get("output_datatype", TP.FLOAT) if op.endswith("Window") or op == "MelWeightMatrix" \
        else TYPES[next(iter(feeds.values())).dtype.type]
    g = h.make_graph([node], "sig", ins, [h.make_tensor_value_info("y", et, None)])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", opset)])
    m.ir_version = 8
    return m

def run_qm(m, feeds):
    n_case[0] += 1
    p = "%s/m%d.onnx" % (T, n_case[0])
    onnx.save(m, p)
    args = [Q, "run", p, "-o", p + ".out.npz", "-q"]
    if feeds:  # a model of constants alone takes no inputs
        np.savez(p + ".in.npz", **feeds)
        args += ["-i", p + ".in.npz"]
    r = subprocess.run(args, capture_output=True, text=True)
    return (np.load(p + ".out.npz")["y"], None) if r.returncode == 0 else (None, r.stderr.strip())

def case(name, op, feeds, attrs={}, opset=17, inputs=None, const=()):
    """const: inputs given as initializers, so infer-shapes sees their values"""
    m = model(op, {k: v for k, v in feeds.items() if k not in const}, attrs, opset,
              inputs if inputs is not None else list(feeds))
    for k in const:
        m.graph.initializer.append(nh.from_array(feeds[k], k))
    rf = {k: v for k, v in feeds.items() if k not in const}
    try:
        want = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, rf)[0]
    except Exception as e:
        print("FAIL: %s: onnxruntime: %s" % (name, str(e)[:200]))
        return
    got, err = run_qm(m, rf)
    if got is None:
        print("FAIL: %s: %s" % (name, err))
        return
    tol = 1e-4 * max(1.0, float(np.abs(want).max()))
    ok = got.shape == want.shape and got.dtype == want.dtype and np.allclose(got, want, atol=tol, rtol=0)
    # infer-shapes gives the output's shape when the sizes are constants
    p = "%s/m%d.onnx" % (T, n_case[0])
    r = subprocess.run([Q, "infer-shapes", p, p + ".inf.onnx"], capture_output=True, text=True)
    shape = None
    if r.returncode == 0:
        o = onnx.load(p + ".inf.onnx").graph.output[0].type.tensor_type.shape
        shape = tuple(d.dim_value if d.HasField("dim_value") else None for d in o.dim)
        if const or not any(k in feeds for k in ("dft_length", "size", "frame_length", "frame_step", "num_mel_bins")):
            ok = ok and shape == want.shape
    else:
        ok = False
    print(("PASS: " if ok else "FAIL: ") + name + ("" if ok else ": shape %s/%s inferred %s, max diff %s %s" % (
        got.shape, want.shape, shape, np.abs(got - want).max() if got.shape == want.shape else "-", r.stderr.strip()[:200])))

def bad(name, op, feeds, attrs, pat, opset=17, inputs=None):
    got, err = run_qm(model(op, feeds, attrs, opset, inputs), feeds)
    ok = got is None and pat in (err or "") and "'" in err and len(err.splitlines()) == 1
    print(("PASS: " if ok else "FAIL: ") + name + ("" if ok else ": %r" % err))

f32 = lambda *s: rng.standard_normal(s).astype(np.float32)
i64 = lambda v: np.array(v, np.int64)

# DFT
case("DFT-17 real input along axis 1", "DFT", {"x": f32(2, 12, 3, 1)}, {"axis": 1})
case("DFT-17 complex input along axis 2", "DFT", {"x": f32(2, 5, 7, 2)}, {"axis": 2})
case("DFT-17 onesided, odd length", "DFT", {"x": f32(1, 9, 1)}, {"onesided": 1})
case("DFT-17 dft_length shorter (truncates)", "DFT", {"x": f32(1, 10, 1), "dft_length": i64(6)}, {}, const=("dft_length",))
case("DFT-17 dft_length longer (zero pads), onesided", "DFT", {"x": f32(3, 10, 1), "dft_length": i64(16)},
     {"onesided": 1}, const=("dft_length",))
case("DFT-17 inverse, complex", "DFT", {"x": f32(2, 8, 2)}, {"inverse": 1})
case("DFT-17 inverse of a spectrum round-trips", "DFT", {"x": np.concatenate([f32(1, 6, 1), np.zeros((1, 6, 1), np.float32)], -1)},
     {"inverse": 1})
case("DFT-17 in double", "DFT", {"x": rng.standard_normal((2, 7, 2))}, {"axis": 1})
case("DFT-20 axis input -2 (the last signal axis)", "DFT", {"x": f32(2, 3, 8, 1), "axis": i64(-2)}, {}, opset=20,
     inputs=["x", "", "axis"], const=("axis",))
case("DFT-20 axis input 1, dft_length 5", "DFT", {"x": f32(2, 6, 4, 2), "dft_length": i64(5), "axis": i64(1)}, {},
     opset=20, const=("dft_length", "axis"))
case("DFT-20 default axis", "DFT", {"x": f32(3, 10, 1)}, {}, opset=20)

# STFT
sig = f32(1, 200, 1)
case("STFT frame 32 step 10, no window", "STFT", {"signal": sig, "frame_step": i64(10), "frame_length": i64(32)}, {},
     inputs=["signal", "frame_step", "", "frame_length"], const=("frame_step", "frame_length"))
hann = (0.5 - 0.5 * np.cos(2 * np.pi * np.arange(32) / 32)).astype(np.float32)
case("STFT with a Hann window, batch 2", "STFT", {"signal": f32(2, 160, 1), "frame_step": i64(16), "window": hann}, {},
     const=("frame_step",))
case("STFT two-sided, complex signal", "STFT", {"signal": f32(1, 100, 2), "frame_step": i64(25), "window": hann},
     {"onesided": 0})
bad("STFT with a window other than frame_length long is an error", "STFT",
    {"signal": sig, "frame_step": i64(8), "window": hann, "frame_length": i64(24)}, {}, "window of 32")

# windows
for op in ("HannWindow", "HammingWindow", "BlackmanWindow"):
    for periodic in (1, 0):
        case("%s size 17 periodic=%d" % (op, periodic), op, {"size": i64(17)}, {"periodic": periodic}, const=("size",))
    case("%s in double, size 8" % op, op, {"size": np.array(8, np.int32)}, {"output_datatype": TP.DOUBLE})

# MelWeightMatrix
case("MelWeightMatrix 40 bins of a 512-point DFT at 16 kHz", "MelWeightMatrix",
     {"n": np.array(40, np.int32), "dft": np.array(512, np.int32), "sr": np.array(16000, np.int32),
      "lo": np.array(20, np.float32), "hi": np.array(8000, np.float32)}, {}, const=("n", "dft"))

# bad inputs
bad("DFT axis naming the complex dimension is an error", "DFT", {"x": f32(1, 4, 2)}, {"axis": 2}, "complex dimension")
bad("a one-sided DFT of a complex signal is an error", "DFT", {"x": f32(1, 8, 2)}, {"onesided": 1}, "real input")
bad("DFT of a [.., 3] input is an error", "DFT", {"x": f32(1, 4, 3)}, {"axis": 1}, "1 or 2")
bad("STFT of a signal shorter than a frame is an error", "STFT",
    {"signal": f32(1, 10, 1), "frame_step": i64(4), "frame_length": i64(16)}, {}, "shorter than one frame",
    inputs=["signal", "frame_step", "", "frame_length"])
bad("STFT with frame_step 0 is an error", "STFT", {"signal": f32(1, 40, 1), "frame_step": i64(0)}, {}, "frame_step 0")
bad("a window of negative size is an error", "HannWindow", {"size": i64(-3)}, {}, "negative")
bad("MelWeightMatrix above the Nyquist frequency is an error", "MelWeightMatrix",
    {"n": np.array(8, np.int32), "dft": np.array(64, np.int32), "sr": np.array(8000, np.int32),
     "lo": np.array(0, np.float32), "hi": np.array(6000, np.float32)}, {}, "beyond the spectrogram")
EOF
