#!/bin/sh
# Float32 Conv through the direct product's layouts (src/ops/conv.c,
# fgemm_packed_direct in src/ops/fgemm.c) against onnxruntime: half panels
# that skip the padding columns between output rows (32-, 16- and 9-wide
# outputs), several small images side by side in one product with shared
# zero columns (8 x 8 outputs at batch 2 to 6, asymmetric pads, dilation),
# strided copies (stride 2 with 16-wide and shorter rows, 1 x 1 stride 2,
# stride 3), groups, 1-D and 3-D, a first layer of 3 channels, a fused Relu
# and Clip. GlobalAveragePool's interleaved sums are checked on the same
# inputs. Each case also runs with 2 threads, which must give the same bits
# as 1. rtol 1e-4, atol 1e-4 (onnxruntime sums in another order). The seed
# is fixed.
. "$(dirname "$0")/lib/common.sh"
if ! "$PY" -c 'import onnx, onnxruntime, numpy' 2>/dev/null; then
	fail conv_layout "onnx and onnxruntime are not installed (sh scripts/venv.sh)"
	exit 0
fi
mktmp
cd "$TMPD" || exit 1
QUANTMAKE="$QUANTMAKE" PYTHONPATH="$ROOT/tests/lib" "$PY" - <<'EOF'
import numpy as np
import onnx
import onnxruntime as ort
from onnx import helper as h, numpy_helper as nh, TensorProto as T

from kernels import qm, rng, run_qm

def model(cin, cout, k, act=None, gap=False, **attrs):
    """Conv (+ Relu or Clip) (+ GlobalAveragePool) on x [N, cin, spatial...]"""
    g = attrs.get("group", 1)
    w = (rng.standard_normal((cout, cin // g) + tuple(k)) / np.sqrt(cin // g * np.prod(k))).astype(np.float32)
    b = (rng.standard_normal(cout) * 0.1).astype(np.float32)
    nodes = [h.make_node("Conv", ["x", "w", "b"], ["c" if act or gap else "y"], kernel_shape=list(k), **attrs)]
    inits = [nh.from_array(w, "w"), nh.from_array(b, "b")]
    last = "c"
    if act == "relu":
        nodes.append(h.make_node("Relu", ["c"], ["a" if gap else "y"]))
        last = "a"
    elif act == "clip":
        inits += [nh.from_array(np.float32(-0.5), "lo"), nh.from_array(np.float32(0.75), "hi")]
        nodes.append(h.make_node("Clip", ["c", "lo", "hi"], ["a" if gap else "y"]))
        last = "a"
    if gap:
        nodes.append(h.make_node("GlobalAveragePool", [last], ["y"]))
    gr = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, None)],
                      [h.make_tensor_value_info("y", T.FLOAT, None)], inits)
    m = h.make_model(gr, opset_imports=[h.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, "m.onnx")

def check(name, x, cin, cout, k, act=None, gap=False, **attrs):
    model(cin, cout, k, act, gap, **attrs)
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    ref = ort.InferenceSession("m.onnx", so, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    y1, err = run_qm(x, 1)
    if err:
        print("FAIL: %s: %s" % (name, err))
        return None
    y2, err = run_qm(x, 2)
    if err:
        print("FAIL: %s (2 threads): %s" % (name, err))
        return None
    if y1.shape != ref.shape:
        print("FAIL: %s: shape %s, onnxruntime %s" % (name, y1.shape, ref.shape))
    elif y1.tobytes() != y2.tobytes():
        print("FAIL: %s: 1 and 2 threads give different bits" % name)
    elif not np.allclose(y1, ref, rtol=1e-4, atol=1e-4):
        d = np.abs(y1.astype(np.float64) - ref)
        i = np.unravel_index(np.argmax(d), d.shape)
        print("FAIL: %s: at %s got %r, onnxruntime %r" % (name, i, y1[i], ref[i]))
    else:
        print("PASS: %s" % name)
        return y1
    return None

def x(*shape):
    return rng.standard_normal(shape).astype(np.float32)

# half panels: whole 32-wide rows, 16-wide rows past 2 padding columns, 9-wide
check("3x3 pad 1, 32x32, 32 channels, relu", x(2, 32, 32, 32), 32, 32, (3, 3), "relu", pads=[1, 1, 1, 1])
check("3x3 pad 1, 16x16, 64 channels", x(3, 64, 16, 16), 64, 64, (3, 3), pads=[1, 1, 1, 1])
check("3x3 pad 1, 9x9, 48 channels, clip", x(2, 16, 9, 9), 16, 48, (3, 3), "clip", pads=[1, 1, 1, 1])
check("3x3 no pad, 7x21 (odd widths)", x(2, 8, 9, 23), 8, 24, (3, 3))
check("first layer: 3 channels, 32x32", x(4, 3, 32, 32), 3, 32, (3, 3), "relu", pads=[1, 1, 1, 1])
# several 8 x 8 images side by side, sharing their zero columns
for n in (2, 4, 6):
    check("3x3 pad 1, 8x8, 128 channels, batch %d" % n, x(n, 128, 8, 8), 128, 128, (3, 3), "relu",
          pads=[1, 1, 1, 1])
check("3x3 asymmetric pads 0,2 / 2,0, 8x8, batch 4", x(4, 32, 8, 8), 32, 64, (3, 3), pads=[0, 2, 2, 0])
check("3x3 dilation 2, pad 2, 8x8, batch 4", x(4, 32, 8, 8), 32, 32, (3, 3), dilations=[2, 2], pads=[2, 2, 2, 2])
check("5x5 pad 2, 6x6, batch 8", x(8, 16, 6, 6), 16, 32, (5, 5), pads=[2, 2, 2, 2])
# strided copies
check("3x3 stride 2, 32x32 (16-wide rows)", x(2, 32, 32, 32), 32, 64, (3, 3), strides=[2, 2], pads=[1, 1, 1, 1])
check("3x3 stride 2, 16x16, batch 4", x(4, 64, 16, 16), 64, 128, (3, 3), "relu", strides=[2, 2], pads=[1, 1, 1, 1])
check("1x1 stride 2, 32x32", x(2, 32, 32, 32), 32, 64, (1, 1), strides=[2, 2])
check("1x1 stride 2, 16x16, batch 4", x(4, 64, 16, 16), 64, 128, (1, 1), strides=[2, 2])
check("3x3 stride 3, 20x20", x(2, 16, 20, 20), 16, 32, (3, 3), strides=[3, 3], pads=[1, 1, 1, 1])
check("3x3 stride 2, 17x17 (odd)", x(3, 16, 17, 17), 16, 32, (3, 3), strides=[2, 2], pads=[1, 1, 1, 1])
# groups, 1-D, 3-D
check("3x3 group 4, 16x16", x(2, 64, 16, 16), 64, 64, (3, 3), group=4, pads=[1, 1, 1, 1])
check("3x3 group 4, 8x8, batch 4", x(4, 64, 8, 8), 64, 64, (3, 3), group=4, pads=[1, 1, 1, 1])
check("1-D k 5 pad 2, length 100", x(3, 16, 100), 16, 32, (5,), pads=[2, 2])
check("3-D 3x3x3 pad 1, 6x8x8", x(2, 8, 6, 8, 8), 8, 16, (3, 3, 3), pads=[1, 1, 1, 1, 1, 1])
# GlobalAveragePool after the convolution: 32x32, 8x8 and an odd 5x7 plane
check("conv + GlobalAveragePool, 32x32", x(2, 32, 32, 32), 32, 32, (3, 3), "relu", True, pads=[1, 1, 1, 1])
check("conv + GlobalAveragePool, 8x8, batch 4", x(4, 64, 8, 8), 64, 64, (3, 3), None, True, pads=[1, 1, 1, 1])
check("conv + GlobalAveragePool, 5x7", x(2, 8, 5, 7), 8, 16, (3, 3), None, True, pads=[1, 1, 1, 1])

check("3x3 pad 1, 8x8, batch 5 (prime)", x(5, 32, 8, 8), 32, 64, (3, 3), "relu", pads=[1, 1, 1, 1])
EOF
