#!/bin/sh
# The vectorized float32 kernels against onnxruntime on random inputs: Erf
# (16-lane polynomial), LayerNormalization (one-pass statistics, 16-lane
# rows), MaxPool (separable rows). Sizes leave tails that are not multiples
# of 16, inputs include large magnitudes and common offsets, Erf gets NaN and
# +-inf (ONNX: erf(+-inf) = +-1, NaN stays NaN), MaxPool +-inf; at 1e30,
# where onnxruntime's float32 squares overflow, LayerNormalization is checked
# against its definition in float64. Each case
# also runs with 1 and 2 threads, which must give the same bits. rtol 1e-5,
# atol 1e-5 (LayerNormalization's outputs are O(1)). The seed is fixed.
. "$(dirname "$0")/lib/common.sh"
if ! "$PY" -c 'import onnx, onnxruntime, numpy' 2>/dev/null; then
	fail kernels_fast "onnx and onnxruntime are not installed (sh scripts/venv.sh)"
	exit 0
fi
mktmp
cd "$TMPD" || exit 1
QUANTMAKE="$QUANTMAKE" PYTHONPATH="$ROOT/tests/lib" "$PY" - <<'EOF'
import numpy as np
import onnx
import onnxruntime as ort
from onnx import helper as h, TensorProto as T

from kernels import qm, rng, run_qm

def check(name, node, x, inits=(), opset=18, expect=None):
    """expect: the reference in float64 where onnxruntime's float32 one overflows"""
    g = h.make_graph([node], "g", [h.make_tensor_value_info("x", T.FLOAT, x.shape)],
                     [h.make_tensor_value_info("y", T.FLOAT, None)],
                     [onnx.numpy_helper.from_array(v, n) for n, v in inits])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", opset)])
    m.ir_version = 8
    onnx.save(m, "m.onnx")
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    ref = ort.InferenceSession("m.onnx", so, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    if expect:
        ref = expect(x.astype(np.float64)).astype(np.float32)
    y1, err = run_qm(x, 1)
    if err:
        print("FAIL: %s: %s" % (name, err))
        return
    y2, err = run_qm(x, 2)
    if err:
        print("FAIL: %s (2 threads): %s" % (name, err))
        return
    if y1.shape != ref.shape:
        print("FAIL: %s: shape %s, onnxruntime %s" % (name, y1.shape, ref.shape))
    elif y1.tobytes() != y2.tobytes():
        print("FAIL: %s: 1 and 2 threads give different bits" % name)
    elif not np.allclose(y1, ref, rtol=1e-5, atol=1e-5, equal_nan=True):
        d = np.abs(y1.astype(np.float64) - ref)
        i = np.unravel_index(np.nanargmax(d), d.shape)
        print("FAIL: %s: at %s got %r, onnxruntime %r" % (name, i, y1[i], ref[i]))
    else:
        print("PASS: %s" % name)

# Erf: every tail length, the whole useful range, huge values, NaN and +-inf
for n in (1, 15, 17, 33, 1000):
    x = (rng.standard_normal(n) * 2.5).astype(np.float32)
    check("erf n=%d" % n, h.make_node("Erf", ["x"], ["y"]), x)
x = np.concatenate([np.linspace(-6, 6, 4001), [0.4999, 0.5, 0.5001, -0.5, 1e-30, -1e-30, 1e-45, 0.0, -0.0,
                    3e38, -3e38, np.inf, -np.inf, np.nan]]).astype(np.float32)
check("erf sweep, tiny, huge, inf, nan", h.make_node("Erf", ["x"], ["y"]), x)

# LayerNormalization: tails, with and without B, large magnitudes and offsets
for rows, inner in ((3, 1), (5, 7), (4, 17), (6, 33), (32, 128), (2, 131)):
    for bias in (True, False):
        x = (rng.standard_normal((rows, inner)) * 3).astype(np.float32)
        s = rng.standard_normal(inner).astype(np.float32)
        inits = [("s", s)] + ([("b", rng.standard_normal(inner).astype(np.float32))] if bias else [])
        node = h.make_node("LayerNormalization", ["x", "s"] + (["b"] if bias else []), ["y"], axis=-1)
        check("layernorm %dx%d%s" % (rows, inner, " B" if bias else ""), node, x, inits)
def layernorm64(x, s, b):
    m = x.mean(-1, keepdims=True)
    return (x - m) / np.sqrt(((x - m) ** 2).mean(-1, keepdims=True) + 1e-5) * s + b
# onnxruntime squares in float32: x^2 overflows at 1e30, so that case takes the float64 definition
for what, x, exact in (("offset 1e2, spread 1", 100 + rng.standard_normal((8, 37)), False),
                       ("magnitude 1e30", rng.standard_normal((8, 37)) * 1e30, True),
                       ("magnitude 1e-30", rng.standard_normal((8, 37)) * 1e-30, False),
                       ("constant rows", np.full((3, 19), 7.5), False)):
    x = x.astype(np.float32)
    s = rng.standard_normal(x.shape[-1]).astype(np.float32)
    b = rng.standard_normal(x.shape[-1]).astype(np.float32)
    check("layernorm %s" % what, h.make_node("LayerNormalization", ["x", "s", "b"], ["y"], axis=-1),
          x, [("s", s), ("b", b)], expect=(lambda v: layernorm64(v, s, b)) if exact else None)
x = rng.standard_normal((2, 3, 5, 7)).astype(np.float32)
check("layernorm axis=1 2x3x5x7", h.make_node("LayerNormalization", ["x", "s", "b"], ["y"], axis=1), x,
      [("s", rng.standard_normal((3, 5, 7)).astype(np.float32)),
       ("b", rng.standard_normal((3, 5, 7)).astype(np.float32))])

# MaxPool: 2-D and 1-D, strides 1 to 3, pads, ceil_mode, odd sizes, +-inf
cases = [((2, 3, 16, 16), dict(kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[1, 1])),
         ((1, 4, 17, 19), dict(kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[1, 1])),
         ((1, 2, 17, 19), dict(kernel_shape=[2, 2], strides=[2, 2])),
         ((1, 2, 17, 19), dict(kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[2, 2])),
         ((1, 2, 17, 19), dict(kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1)),
         ((1, 2, 33, 35), dict(kernel_shape=[5, 4], pads=[2, 1, 2, 2], strides=[1, 3])),
         ((2, 3, 37), dict(kernel_shape=[3], pads=[1, 1], strides=[1])),
         ((2, 3, 37), dict(kernel_shape=[4], strides=[2], ceil_mode=1))]
for shape, attrs in cases:
    x = (rng.standard_normal(shape) * 1e3).astype(np.float32)
    flat = x.reshape(-1)
    flat[rng.integers(0, flat.size, 6)] = np.inf
    flat[rng.integers(0, flat.size, 6)] = -np.inf
    check("maxpool %s %s" % ("x".join(map(str, shape)), " ".join("%s=%s" % kv for kv in sorted(attrs.items()))),
          h.make_node("MaxPool", ["x"], ["y"], **attrs), x)
EOF
