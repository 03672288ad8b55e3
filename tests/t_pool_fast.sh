#!/bin/sh
# MaxPool's stride-2 kernel (src/ops/pool.c, maxpool_s2_planes: 16 outputs
# of a row from 32 input columns, a two-source permute per pair of taps,
# -inf at pads and ragged row ends, rows narrower than 16 spilling into
# the next, and into the next plane of the same thread) and GlobalMaxPool's
# 32-lane maximum, on random inputs:
# - against onnxruntime, exactly (a maximum is one of its inputs), on finite
#   values: odd and even widths below and above 16 (7, 14, 28, 33, 64, 65),
#   odd heights, 2x2 and 3x3 windows, pads, ceil_mode, wider kernels, 1-D,
#   uint8, and for comparison cases the kernel does not take (dilations,
#   stride 1, the Indices output);
# - bit for bit against the rule the separable kernel has always followed,
#   written in numpy: per input row the maximum over the taps in order,
#   then over the rows, each from -inf, keeping the running value unless the
#   new one is greater; so NaN is skipped (an all-NaN window gives -inf),
#   and of +0 and -0 the first wins. onnxruntime returns NaN for some
#   windows holding one (depending on where it is), so inputs with NaN,
#   -inf and zeros of both signs are checked against that rule only.
#   GlobalMaxPool's rule: the first value, then each greater one (a NaN
#   first value is the result);
# - 1 and 2 threads give the same bits (sizes above the threading bound).
# The seed is fixed.
. "$(dirname "$0")/lib/common.sh"
if ! "$PY" -c 'import onnx, onnxruntime, numpy' 2>/dev/null; then
	fail pool_fast "onnx and onnxruntime are not installed (sh scripts/venv.sh)"
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

def save(op, x, attrs, outputs=1, elem=T.FLOAT):
    outs = ["y", "ind"][:outputs]
    g = h.make_graph([h.make_node(op, ["x"], outs, **attrs)], "g", [h.make_tensor_value_info("x", elem, x.shape)],
                     [h.make_tensor_value_info(n, elem if n == "y" else T.INT64, None) for n in outs])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 18)])
    m.ir_version = 8
    onnx.save(m, "m.onnx")

def run_ort(x):
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    return ort.InferenceSession("m.onnx", so, providers=["CPUExecutionProvider"]).run(None, {"x": x})

def maxpool_rule(x, shape, attrs):
    """the separable kernel's rule on (N, C, H, W) or (N, C, W); shape: the output's"""
    one_d = x.ndim == 3
    if one_d:
        x, shape = x[:, :, None, :], shape[:2] + (1,) + shape[2:]
    k = list(attrs["kernel_shape"]); s = list(attrs.get("strides", [1] * len(k)))
    p = list(attrs.get("pads", [0] * 2 * len(k)))
    if one_d:
        k, s, p = [1] + k, [1] + s, [0, p[0], 0, p[1]]
    oh, ow = shape[2], shape[3]
    H, W = x.shape[2], x.shape[3]
    width = max((ow - 1) * s[1] + k[1], p[1] + W)
    xp = np.full(x.shape[:3] + (width,), -np.inf, np.float32)
    xp[..., p[1]:p[1] + W] = x
    hm = np.full(x.shape[:3] + (ow,), -np.inf, np.float32)
    for t in range(k[1]):
        v = xp[..., t:t + s[1] * (ow - 1) + 1:s[1]]
        hm = np.where(v > hm, v, hm)
    y = np.full(x.shape[:2] + (oh, ow), -np.inf, np.float32)
    for o in range(oh):
        for r in range(o * s[0] - p[0], o * s[0] - p[0] + k[0]):
            if 0 <= r < H:
                y[:, :, o] = np.where(hm[:, :, r] > y[:, :, o], hm[:, :, r], y[:, :, o])
    return y[:, :, 0] if one_d else y

def globalmax_rule(x):
    f = x.reshape(x.shape[0] * x.shape[1], -1)
    y = np.empty(f.shape[0], np.float32)
    for i, row in enumerate(f):
        m = row[0]
        for v in row[1:]:
            m = v if v > m else m
        y[i] = m
    return y.reshape(x.shape[:2] + (1,) * (x.ndim - 2))

def check(name, op, x, attrs, special=False, outputs=1, elem=T.FLOAT):
    save(op, x, attrs, outputs, elem)
    y1, err = run_qm(x, 1, outputs=("y", "ind"))
    y2, err2 = run_qm(x, 2, outputs=("y", "ind")) if not err else (None, None)
    if err or err2:
        print("FAIL: %s: %s" % (name, err or err2))
        return
    if any(a.tobytes() != b.tobytes() for a, b in zip(y1, y2)):
        print("FAIL: %s: 1 and 2 threads give different bits" % name)
        return
    ref = run_ort(x)
    if y1[0].shape != ref[0].shape:
        print("FAIL: %s: shape %s, onnxruntime %s" % (name, y1[0].shape, ref[0].shape))
        return
    if special:
        want = maxpool_rule(x, ref[0].shape, attrs) if op == "MaxPool" else globalmax_rule(x)
        what = "the kernel's rule"
    else:
        want, what = ref[0], "onnxruntime"
    bad = [i for i in range(len(ref)) if y1[i].tobytes() != (want if i == 0 else ref[i]).tobytes()]
    if bad:
        d = np.nonzero(y1[0].view(np.uint8 if elem != T.FLOAT else np.uint32) !=
                       want.view(np.uint8 if elem != T.FLOAT else np.uint32))
        at = tuple(int(v[0]) for v in d) if d[0].size else "(indices)"
        print("FAIL: %s: at %s got %r, %s %r" % (name, at, y1[0][at] if d[0].size else "",
                                                 what, want[at] if d[0].size else ""))
    else:
        print("PASS: %s" % name)

def special_values(x):
    f = x.reshape(-1)
    n = f.size
    f[rng.integers(0, n, n // 6)] = 0.0
    f[rng.integers(0, n, n // 6)] = -0.0
    f[rng.integers(0, n, n // 10)] = np.nan
    f[rng.integers(0, n, n // 10)] = -np.inf
    f[rng.integers(0, n, n // 50)] = np.inf
    return x

def desc(shape, attrs):
    return "%s %s" % ("x".join(map(str, shape)), " ".join("%s=%s" % kv for kv in sorted(attrs.items())))

S2 = dict(kernel_shape=[2, 2], strides=[2, 2])
cases = [((3, 32, 28, 28), S2),                     # fashion-cnn's first pool, 14 wide
         ((3, 64, 14, 14), S2),                     # its second, 7 wide
         ((2, 3, 15, 15), S2),                      # odd input, a row and a column dropped
         ((2, 3, 15, 15), dict(S2, ceil_mode=1)),   # ceil_mode: a last half window each way
         ((1, 4, 9, 66), S2),                       # 33 wide: two blocks, the last overlapping
         ((1, 4, 8, 128), S2),                      # 64 wide: whole blocks
         ((1, 4, 7, 130), S2),                      # 65 wide
         ((2, 2, 2, 2), S2),                        # 1x1 output
         ((2, 2, 5, 3), S2),                        # 1 wide, 2 high: spills into the next row
         ((2, 32, 64, 64), S2),                     # threaded
         ((1, 20000, 2, 2), S2),                    # threaded, 1x1 planes: spills across planes
         ((1, 3000, 6, 7), S2),                     # threaded, 3x3 planes
         ((1, 3, 57, 57), dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])),
         ((1, 3, 112, 112), dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])),
         ((1, 3, 55, 55), dict(kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1)),
         ((1, 3, 20, 41), dict(kernel_shape=[3, 3], strides=[2, 2], pads=[0, 2, 1, 2])),
         ((1, 2, 17, 45), dict(kernel_shape=[2, 5], strides=[3, 2], pads=[1, 2, 1, 2])),
         ((1, 2, 13, 40), dict(kernel_shape=[1, 4], strides=[1, 2], ceil_mode=1)),
         ((2, 3, 50), dict(kernel_shape=[3], strides=[2], pads=[1, 1])),
         ((2, 3, 33), dict(kernel_shape=[2], strides=[2], ceil_mode=1)),
         ((2, 3, 29), dict(kernel_shape=[4], strides=[2], pads=[3, 0]))]
for shape, attrs in cases:
    x = rng.standard_normal(shape).astype(np.float32)
    check("maxpool %s" % desc(shape, attrs), "MaxPool", x, attrs)
    check("maxpool %s, NaN, +-inf, +-0" % desc(shape, attrs), "MaxPool", special_values(x.copy()), attrs, True)
# paths other than the stride-2 kernel, for comparison
for shape, attrs in (((1, 3, 28, 28), dict(kernel_shape=[2, 2], strides=[2, 2], dilations=[2, 2])),
                     ((1, 3, 14, 14), dict(kernel_shape=[3, 3], strides=[1, 1], pads=[1, 1, 1, 1])),
                     ((1, 3, 6, 10, 10), dict(kernel_shape=[2, 2, 2], strides=[2, 2, 2]))):
    check("maxpool %s" % desc(shape, attrs), "MaxPool", rng.standard_normal(shape).astype(np.float32), attrs)
shape = (1, 3, 28, 28)
check("maxpool %s with Indices" % desc(shape, S2), "MaxPool", rng.standard_normal(shape).astype(np.float32),
      S2, outputs=2)
x = rng.integers(0, 256, (2, 8, 28, 28)).astype(np.uint8)
check("maxpool uint8 %s" % desc(x.shape, S2), "MaxPool", x, S2, elem=T.UINT8)

# GlobalMaxPool: tails around 32 lanes; NaN first, NaN later, zeros of both signs
for n in (1, 7, 31, 32, 33, 100, 784):
    x = rng.standard_normal((2, 24, n)).astype(np.float32)
    check("globalmaxpool 2x24x%d" % n, "GlobalMaxPool", x, {})
    x = -np.abs(x)
    special_values(x)
    x[0, :4, 0] = (np.nan, 0.0, -0.0, -np.inf)
    check("globalmaxpool 2x24x%d, NaN, -inf, +-0" % n, "GlobalMaxPool", x, {}, True)
x = np.zeros((1, 4, 8, 8), np.float32)
x[0, 0, 0, 0] = -0.0
x[0, 1, 3, 5] = -0.0
x[0, 2] = -0.0
x[0, 2, 7, 7] = 0.0
check("globalmaxpool zero planes: the first zero's sign", "GlobalMaxPool", x, {}, True)
x = rng.standard_normal((2, 64, 40, 40)).astype(np.float32)
check("globalmaxpool 2x64x40x40", "GlobalMaxPool", x, {})
EOF
