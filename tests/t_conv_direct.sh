#!/bin/sh
# Float32 Conv through its two direct products (src/ops/conv.c) against
# onnxruntime, at batch sizes that do not divide evenly.
# The channel-vector product (conv_gemm_cv: 17 to 128 output channels a
# group, one image at a time): tiles within an output row (two vectors of
# channels: 32 or 26 channels, the lanes past 26 unused), tiles that run
# on past a row's end (three or four vectors: 40, 48, 64, 80 = 48 + 32,
# 100 = 64 + 48 channels), several blocks of taps (576 taps), a row longer
# than the buffer of sums (1-D, 300 outputs), one image split by rows
# among threads, strides 2 (planes not split by phase, tiles within a row
# stepping by 2 or across rows), unequal strides, stride 3 (split planes),
# dilation, asymmetric pads, groups, 3-D, 5 input channels, a fused Add
# (residual) and Clip.
# fgemm_packed_direct with images side by side (16 or fewer output
# channels a group, small outputs): batches of 3 and 5 (one group), and of
# 17, 19 and 23 (no divisor up to 16) whose last images make a group of
# their own, with a fused Add and with groups.
# Each case also runs with 2 and 3 threads, which must give the same bits
# as 1. rtol 1e-4, atol 1e-4 (onnxruntime sums in another order). The seed
# is fixed.
. "$(dirname "$0")/lib/common.sh"
if ! "$PY" -c 'import onnx, onnxruntime, numpy' 2>/dev/null; then
	fail conv_direct "onnx and onnxruntime are not installed (sh scripts/venv.sh)"
	exit 0
fi
mktmp
cd "$TMPD" || exit 1
QUANTMAKE="$QUANTMAKE" PYTHONPATH="$ROOT/tests/lib" "$PY" - <<'EOF'
import numpy as np
import onnx
import onnxruntime as ort
from onnx import helper as h, numpy_helper as nh, TensorProto as T

from kernels import rng, run_qm

def model(x, cout, k, act=None, add=False, **attrs):
    """Conv (+ Add of a constant of the output's shape) (+ Relu or Clip)
    on x; the Add and the activation are fused into the Conv"""
    cin, g = x.shape[1], attrs.get("group", 1)
    w = (rng.standard_normal((cout, cin // g) + tuple(k)) / np.sqrt(cin // g * np.prod(k))).astype(np.float32)
    b = (rng.standard_normal(cout) * 0.1).astype(np.float32)
    nodes = [h.make_node("Conv", ["x", "w", "b"], ["c"], kernel_shape=list(k), **attrs)]
    inits = [nh.from_array(w, "w"), nh.from_array(b, "b")]
    last = "c"
    if add:
        so = ort.SessionOptions()
        g0 = h.make_graph(list(nodes), "g0", [h.make_tensor_value_info("x", T.FLOAT, None)],
                          [h.make_tensor_value_info("c", T.FLOAT, None)], inits)
        m0 = h.make_model(g0, opset_imports=[h.make_opsetid("", 17)])
        m0.ir_version = 8
        shape = ort.InferenceSession(m0.SerializeToString(), so,
                                     providers=["CPUExecutionProvider"]).run(None, {"x": x})[0].shape
        inits.append(nh.from_array(rng.standard_normal(shape).astype(np.float32), "s"))
        nodes.append(h.make_node("Add", ["c", "s"], ["a"]))
        last = "a"
    if act == "relu":
        nodes.append(h.make_node("Relu", [last], ["y"]))
    elif act == "clip":
        inits += [nh.from_array(np.float32(-0.5), "lo"), nh.from_array(np.float32(0.75), "hi")]
        nodes.append(h.make_node("Clip", [last, "lo", "hi"], ["y"]))
    else:
        nodes.append(h.make_node("Identity", [last], ["y"]))
    gr = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, None)],
                      [h.make_tensor_value_info("y", T.FLOAT, None)], inits)
    m = h.make_model(gr, opset_imports=[h.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, "m.onnx")

def check(name, x, cout, k, act=None, add=False, **attrs):
    model(x, cout, k, act, add, **attrs)
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    ref = ort.InferenceSession("m.onnx", so, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    ys = []
    for t in (1, 2, 3):
        y, err = run_qm(x, t)
        if err:
            print("FAIL: %s (%d threads): %s" % (name, t, err))
            return
        ys.append(y)
    if ys[0].shape != ref.shape:
        print("FAIL: %s: shape %s, onnxruntime %s" % (name, ys[0].shape, ref.shape))
    elif ys[0].tobytes() != ys[1].tobytes() or ys[0].tobytes() != ys[2].tobytes():
        print("FAIL: %s: 1, 2 and 3 threads give different bits" % name)
    elif not np.allclose(ys[0], ref, rtol=1e-4, atol=1e-4):
        d = np.abs(ys[0].astype(np.float64) - ref)
        i = np.unravel_index(np.argmax(d), d.shape)
        print("FAIL: %s: at %s got %r, onnxruntime %r" % (name, i, ys[0][i], ref[i]))
    else:
        print("PASS: %s" % name)

def x(*shape):
    return rng.standard_normal(shape).astype(np.float32)

p1 = dict(pads=[1, 1, 1, 1])
# channel-vector product, tiles within a row (two vectors of channels)
check("cv: 1->32 3x3 pad 1, 28x28 (28 = 10 + 9 + 9), batch 3, relu", x(3, 1, 28, 28), 32, (3, 3), "relu", **p1)
check("cv: 16->32 3x3 pad 1, 64x64, batch 1 (split by rows)", x(1, 16, 64, 64), 32, (3, 3), "relu", **p1)
check("cv: 26 output channels (6 lanes unused), 9x11, batch 2", x(2, 8, 9, 11), 26, (3, 3), **p1)
check("cv: 1-D k 5 pad 2, 300 outputs a row (longer than the sums' buffer)", x(2, 4, 300), 32, (5,), pads=[2, 2])
# tiles across rows (three or four vectors)
check("cv: 32->64 3x3 pad 1, 14x14, batch 5, relu", x(5, 32, 14, 14), 64, (3, 3), "relu", **p1)
check("cv: 40 output channels (8 lanes unused), 7x7, batch 3", x(3, 16, 7, 7), 40, (3, 3), **p1)
check("cv: 48 output channels, 5 input channels, 5x5 on 7x9, batch 2", x(2, 5, 7, 9), 48, (5, 5), pads=[2, 2, 2, 2])
check("cv: 80 output channels (48 + 32), 10x10, batch 3", x(3, 24, 10, 10), 80, (3, 3), "relu", **p1)
check("cv: 100 output channels (64 + 48, 12 lanes unused), 6x6, batch 2", x(2, 20, 6, 6), 100, (3, 3), **p1)
check("cv: 64->128 3x3 stride 2, 16x16 -> 8x8 (576 taps), batch 3", x(3, 64, 16, 16), 128, (3, 3), "relu",
      strides=[2, 2], **p1)
check("cv: stride 2 on 15x15, 48 channels, batch 1", x(1, 16, 15, 15), 48, (3, 3), strides=[2, 2], **p1)
check("cv: stride 2, 32 channels, 33x33 -> 17x17 (tiles of 9 + 8), batch 3", x(3, 16, 33, 33), 32, (3, 3), "relu",
      strides=[2, 2], **p1)
check("cv: strides 2, 1, 40 channels, batch 2", x(2, 8, 12, 13), 40, (3, 3), strides=[2, 1], **p1)
check("cv: strides 1, 2, 32 channels, 66-wide input, batch 2", x(2, 8, 5, 66), 32, (3, 3), strides=[1, 2], **p1)
check("cv: stride 2, no padding, 3x3 on 66x66 (input past the last tap)", x(2, 4, 66, 66), 40, (3, 3),
      strides=[2, 2])
check("cv: stride 3, 32 channels (phase-split planes), 20x20, batch 2", x(2, 8, 20, 20), 32, (3, 3),
      strides=[3, 3], **p1)
check("cv: stride 3, dilation 2, pads 0,2 / 1,0, batch 2", x(2, 8, 20, 17), 64, (3, 3), strides=[3, 3],
      dilations=[2, 2], pads=[0, 1, 2, 0])
check("cv: group 2 (64 channels a group), 12x12, batch 3", x(3, 32, 12, 12), 128, (3, 3), group=2, **p1)
check("cv: 3-D 3x3x3 pad 1, 4x6x6, 32 channels, batch 3", x(3, 8, 4, 6, 6), 32, (3, 3, 3), pads=[1] * 6)
check("cv: fused Add and Relu, 14x14, batch 3", x(3, 32, 14, 14), 64, (3, 3), "relu", True, **p1)
check("cv: fused Add, two vectors, 28x28, batch 1", x(1, 8, 28, 28), 32, (3, 3), None, True, **p1)
check("cv: fused Clip, 9x9, batch 3", x(3, 16, 9, 9), 48, (3, 3), "clip", **p1)
# fgemm_packed_direct, images side by side with a last group of the rest
for n in (3, 5, 17, 23):
    check("direct: 32->16 3x3 pad 1, 8x8, batch %d" % n, x(n, 32, 8, 8), 16, (3, 3), "relu", **p1)
check("direct: 16->8 3x3 pad 1, 6x6, batch 19", x(19, 16, 6, 6), 8, (3, 3), **p1)
check("direct: fused Add, 8x8, batch 17", x(17, 32, 8, 8), 16, (3, 3), "relu", True, **p1)
check("direct: group 4 (16 channels a group), 8x8, batch 19", x(19, 64, 8, 8), 64, (3, 3), group=4, **p1)
EOF
