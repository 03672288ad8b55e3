#!/bin/sh
# The interpreter's plan-time shortcuts give the results of the plain graph:
# - Conv + Relu/Clip fused (the Conv clamps as it stores results), after a
#   folded BatchNormalization too, on every Conv path (fgemm tiles, small
#   outputs batched, depthwise, pointwise, double, float16), and not fused
#   where the Conv's output has another reader or is a graph output;
# - Conv + Add (+ Relu/Clip) fused where the Add's other input exists when
#   the Conv runs (added as results are stored, or in a pass after; a
#   broadcast operand, float16 and double in full after), not where it is
#   computed later;
# - the direct Conv (padded, stride-phase-split input read in place) on odd
#   sizes, strides, dilations, pads, groups, 1-D/3-D, batches, against
#   onnxruntime, with the same bytes on 1 and 2 threads;
# - Reshape/Squeeze/Unsqueeze/Flatten/Identity taking over their dying
#   input's buffer, but not an input that is read again or is an output;
# - Transpose and Slice as blocked 2-D transposes and contiguous runs, on
#   element sizes 1 to 8, unit axes, negative and large steps;
# - constant folding inside an If body of values computed from the main
#   graph's initializers (silero-vad reorders its LSTM weights so).
# Each model runs without taps (shortcuts on) and with --trace (taps on, so
# every node runs by itself): the two must be the same bytes (to rounding
# where a BatchNormalization is folded), and match numpy or onnxruntime.
. "$(dirname "$0")/lib/common.sh"
mktmp
Q=$QUANTMAKE
if ! "$PY" -c 'import onnx, onnxruntime, numpy' 2>/dev/null; then
	fail "interpreter fusion tests" "$PY lacks onnx/onnxruntime (run scripts/venv.sh)"
	exit 0
fi

cat > "$TMPD/mk.py" <<'EOF'
"""Write NAME.onnx, NAME.npz (inputs) and NAME.ref.npz (expected outputs,
or none when onnxruntime is the reference) per case; print the names."""
import sys
import numpy as np
import onnx
from onnx import TensorProto as T, helper as h, numpy_helper as nh
D = sys.argv[1]
r = np.random.default_rng(7)
ET = {np.float32: T.FLOAT, np.float16: T.FLOAT16, np.float64: T.DOUBLE, np.uint8: T.UINT8,
      np.int64: T.INT64, np.bool_: T.BOOL, np.int16: T.INT16, np.int32: T.INT32}
def save(name, nodes, inputs, outputs, inits, feed, ref=None, opset=13, tol=None):
    g = h.make_graph(nodes, name, [h.make_tensor_value_info(k, ET[v.dtype.type], list(v.shape))
                                   for k, v in inputs.items()],
                     [h.make_tensor_value_info(o, ET[t], None) for o, t in outputs], inits)
    m = h.make_model(g, opset_imports=[h.make_opsetid("", opset)])
    m.ir_version = 7
    onnx.save(m, "%s/%s.onnx" % (D, name))
    np.savez("%s/%s.npz" % (D, name), **feed)
    if ref is not None:
        np.savez("%s/%s.ref.npz" % (D, name), **ref)
    if tol is not None:  # results may differ by rounding (a folded BatchNormalization)
        open("%s/%s.tol" % (D, name), "w").write(str(tol))
    print(name)

def conv(name, act, n=1, c=8, m=16, hw=20, k=3, group=1, dt=np.float32, bn=False, extra_reader=False,
         conv_is_output=False, opset=13, pads=1):
    x = r.standard_normal((n, c, hw, hw)).astype(dt)
    w = (r.standard_normal((m, c // group, k, k)) * 0.3).astype(dt)
    b = (r.standard_normal(m) * 0.5).astype(dt)
    inits = [nh.from_array(w, "w"), nh.from_array(b, "b")]
    nodes = [h.make_node("Conv", ["x", "w", "b"], ["y"], name="conv", group=group, pads=[pads] * 4)]
    y = "y"
    if bn:
        inits += [nh.from_array((r.random(m) + 0.5).astype(dt), "s"), nh.from_array(r.standard_normal(m).astype(dt), "o"),
                  nh.from_array(r.standard_normal(m).astype(dt), "mu"), nh.from_array((r.random(m) + 0.5).astype(dt), "var")]
        nodes.append(h.make_node("BatchNormalization", ["y", "s", "o", "mu", "var"], ["yb"], name="bn"))
        y = "yb"
    if act == "relu":
        nodes.append(h.make_node("Relu", [y], ["z"], name="act"))
    elif act == "clip6":
        nodes.append(h.make_node("Clip", [y], ["z"], name="act", min=-0.5, max=0.75))
    elif act == "clip":
        inits += [nh.from_array(np.array(-0.25, dt), "lo"), nh.from_array(np.array(1.5, dt), "hi")]
        nodes.append(h.make_node("Clip", [y, "lo", "hi"], ["z"], name="act"))
    elif act == "clip_hi":
        inits.append(nh.from_array(np.array(0.5, dt), "hi"))
        nodes.append(h.make_node("Clip", [y, "", "hi"], ["z"], name="act"))
    outs = [("z", dt)]
    if extra_reader:
        nodes.append(h.make_node("Neg", [y], ["other"], name="other"))
        outs.append(("other", dt))
    if conv_is_output:
        outs.append((y, dt))
    ref = None
    if dt == np.float64:  # onnxruntime has no double Conv: numpy's
        xp = np.pad(x, ((0, 0), (0, 0), (pads, pads), (pads, pads)))
        win = np.lib.stride_tricks.sliding_window_view(xp, (k, k), axis=(2, 3))
        ref = {"z": np.maximum(np.einsum("nchwij,mcij->nmhw", win, w) + b[None, :, None, None], 0)}
    save(name, nodes, {"x": x}, outs, inits, {"x": x}, ref, opset=opset, tol=1e-5 if bn or ref else None)

conv("conv_relu", "relu")
conv("conv_relu_batch", "relu", n=5)                 # small outputs, several images per GEMM
conv("conv_relu_small", "relu", n=3, hw=6)           # unfolded several images at a time
conv("conv_relu_pointwise", "relu", k=1, pads=0)
conv("conv_relu_depthwise", "relu", c=8, m=8, group=8)
conv("conv_relu_grouped", "relu", group=2)
conv("conv_bn_relu", "relu", n=2, bn=True)
conv("conv_clip", "clip", n=2)
conv("conv_clip_hi", "clip_hi")
conv("conv_clip6", "clip6", opset=6)
conv("conv_bn_clip6", "clip6", bn=True, opset=9)
conv("conv_relu_double", "relu", dt=np.float64)
conv("conv_relu_half", "relu", dt=np.float16)
conv("conv_relu_two_readers", "relu", extra_reader=True)
conv("conv_relu_conv_output", "relu", bn=True, conv_is_output=True)

# the direct convolution (fgemm reads a padded, stride-phase-split copy of
# each image in place): odd sizes, strides, dilations, asymmetric pads,
# groups, 1-D and 3-D, more than one block of k, no bias, batches
def convd(name, xs, ws, act=None, bias=True, **attrs):
    x = r.standard_normal(xs).astype(np.float32)
    w = (r.standard_normal(ws) / np.sqrt(np.prod(ws[1:]))).astype(np.float32)
    inits, ins = [nh.from_array(w, "w")], ["x", "w"]
    if bias:
        inits.append(nh.from_array((r.standard_normal(ws[0]) * 0.5).astype(np.float32), "b"))
        ins.append("b")
    nodes = [h.make_node("Conv", ins, ["y"], name="conv", **attrs)]
    out = "y"
    if act == "relu":
        nodes.append(h.make_node("Relu", ["y"], ["z"], name="act"))
        out = "z"
    save(name, nodes, {"x": x}, [(out, np.float32)], inits, {"x": x})

convd("direct_odd", (3, 5, 17, 23), (13, 5, 3, 3), "relu", pads=[1, 1, 1, 1])
convd("direct_stride2", (2, 6, 33, 31), (20, 6, 3, 3), strides=[2, 2], pads=[1, 1, 1, 1])
convd("direct_stride3_dilated", (2, 3, 40, 37), (7, 3, 3, 3), "relu", strides=[3, 3], dilations=[2, 2],
      pads=[2, 1, 0, 2])
convd("direct_dilated", (1, 4, 30, 30), (9, 4, 3, 3), dilations=[2, 2], pads=[2, 2, 2, 2])
convd("direct_grouped", (2, 9, 24, 24), (12, 3, 3, 3), "relu", group=3, pads=[1, 1, 1, 1])
convd("direct_1x1_stride2", (2, 8, 32, 32), (16, 8, 1, 1), strides=[2, 2])
convd("direct_pointwise", (2, 8, 16, 16), (16, 8, 1, 1), "relu")
convd("direct_pointwise_odd", (2, 8, 15, 15), (16, 8, 1, 1))
convd("direct_one_image", (1, 32, 40, 40), (48, 32, 3, 3), "relu", pads=[1, 1, 1, 1])  # columns split
convd("direct_deep_nobias", (2, 64, 18, 18), (24, 64, 3, 3), "relu", bias=False, pads=[1, 1, 1, 1])
convd("direct_5x5_asym", (4, 3, 21, 26), (10, 3, 5, 4), pads=[2, 0, 1, 3])
convd("direct_1d", (2, 7, 300), (11, 7, 5), "relu", pads=[2, 2])
convd("direct_1d_stride4", (3, 5, 301), (6, 5, 7), strides=[4], pads=[3, 1])
convd("direct_3d", (2, 4, 6, 30, 30), (5, 4, 3, 3, 3), "relu", pads=[1, 1, 1, 1, 1, 1])

# Conv + Add (+ Relu or Clip): the residual input added as the Conv stores
# its results (direct product), in a pass after (other paths), or in full
# after (a broadcast operand, float16, double); not fused where the other
# input is computed after the Conv
def convadd(name, n=2, c=16, hw=16, k=3, dt=np.float32, act="relu", bn=False, group=1, other="x",
            late=False, opset=13):
    m = c
    x = r.standard_normal((n, c, hw, hw)).astype(dt)
    w = (r.standard_normal((m, c // group, k, k)) / np.sqrt(c // group * k * k)).astype(dt)
    inits = [nh.from_array(w, "w"), nh.from_array((r.standard_normal(m) * 0.5).astype(dt), "b")]
    ins, nodes = {"x": x}, []
    conv = h.make_node("Conv", ["x", "w", "b"], ["y"], name="conv", group=group, pads=[k // 2] * 4)
    if other == "relu":          # a node output computed before the Conv
        nodes.append(h.make_node("Relu", ["x"], ["o"], name="pre"))
    elif other == "bias":        # [1, m, 1, 1], broadcast
        inits.append(nh.from_array((r.standard_normal((1, m, 1, 1))).astype(dt), "ob"))
        nodes.append(h.make_node("Neg", ["ob"], ["o"], name="pre"))
    elif other == "wide":        # [3, m, hw, hw] against a batch of 1: a bigger output
        ins["x2"] = r.standard_normal((3, m, hw, hw)).astype(dt)
        nodes.append(h.make_node("Neg", ["x2"], ["o"], name="pre"))
    o = "x" if other == "x" else "o"
    if late:                     # computed after the Conv: not fused
        nodes.append(conv)
        nodes.append(h.make_node("Neg", ["x"], ["o"], name="post"))
        o = "o"
    else:
        nodes.append(conv)
    y = "y"
    if bn:
        inits += [nh.from_array((r.random(m) + 0.5).astype(dt), "s"), nh.from_array(r.standard_normal(m).astype(dt), "bo"),
                  nh.from_array(r.standard_normal(m).astype(dt), "mu"), nh.from_array((r.random(m) + 0.5).astype(dt), "var")]
        nodes.append(h.make_node("BatchNormalization", ["y", "s", "bo", "mu", "var"], ["yb"], name="bn"))
        y = "yb"
    nodes.append(h.make_node("Add", [o, y], ["a"], name="add"))
    out = "a"
    if act == "relu":
        nodes.append(h.make_node("Relu", ["a"], ["z"], name="act"))
        out = "z"
    elif act == "clip":
        inits += [nh.from_array(np.array(-0.25, dt), "lo"), nh.from_array(np.array(1.5, dt), "hi")]
        nodes.append(h.make_node("Clip", ["a", "lo", "hi"], ["z"], name="act"))
        out = "z"
    ref = None
    if dt == np.float64:  # onnxruntime has no double Conv: numpy's
        p = k // 2
        xp = np.pad(x, ((0, 0), (0, 0), (p, p), (p, p)))
        win = np.lib.stride_tricks.sliding_window_view(xp, (k, k), axis=(2, 3))
        yv = np.einsum("nchwij,mcij->nmhw", win, w) + nh.to_array(inits[1])[None, :, None, None]
        ref = {out: np.maximum(yv + x, 0)}
    save(name, nodes, ins, [(out, dt)], inits, ins, ref, opset=opset, tol=1e-5 if bn or ref is not None else None)

convadd("conv_add_relu")                              # direct product, residual = graph input
convadd("conv_bn_add_relu", bn=True, other="relu")    # folded normalization, residual a node output
convadd("conv_add_clip", act="clip", n=3, hw=8, c=32) # 8 x 8 images side by side
convadd("conv_add", act=None, hw=32, c=8)
convadd("conv_add_small", n=3, hw=4)                  # small outputs: batched, added after
convadd("conv_add_depthwise", group=16)
convadd("conv_add_pointwise", k=1)
convadd("conv_add_late", late=True)                   # other input computed after: not fused
convadd("conv_add_broadcast", other="bias")
convadd("conv_add_wider", n=1, other="wide")
convadd("conv_add_relu_half", dt=np.float16)
convadd("conv_add_relu_double", dt=np.float64)

# Transpose: every permutation of a rank-4 tensor with unit axes, element
# sizes 1 to 8, sizes past the 32 x 32 blocks
import itertools
for dt, shape in [(np.float32, (3, 1, 70, 45)), (np.uint8, (2, 33, 1, 65)), (np.float16, (1, 40, 3, 37)),
                  (np.int64, (5, 1, 34, 9)), (np.bool_, (3, 35, 2, 33))]:
    x = r.standard_normal(shape) > 0 if dt == np.bool_ else (r.standard_normal(shape) * 50).astype(dt)
    nodes, outs, ref = [], [], {}
    for i, p in enumerate(itertools.permutations(range(4))):
        nodes.append(h.make_node("Transpose", ["x"], ["t%d" % i], name="tr%d" % i, perm=list(p)))
        outs.append(("t%d" % i, dt))
        ref["t%d" % i] = np.transpose(x, p)
    save("transpose_%s" % np.dtype(dt).name, nodes, {"x": x}, outs, [], {"x": x}, ref)

# Slice: contiguous rows, inner and outer steps, negative steps, unit axes
x = (r.standard_normal((4, 1, 37, 40)) * 10).astype(np.float32)
specs = [([0, 0, 0, 0], [4, 1, 37, 40], [0, 1, 2, 3], [1, 1, 1, 1]),   # everything
         ([1], [3], [0], [1]),                                          # outer rows
         ([0, 2], [1, 38], [0, 3], [1, 1]),                             # inner part of rows
         ([5], [30], [2], [3]),                                         # a middle axis with a step
         ([39], [-100], [3], [-1]),                                     # inner axis reversed
         ([-1, 36, 1], [-100, -100, 40], [0, 2, 3], [-2, -5, 7]),       # negative and large steps
         ([0], [0], [2], [1])]                                          # empty
nodes, outs, ref, inits = [], [], {}, []
for i, (st, en, ax, sp) in enumerate(specs):
    nm = ["st%d" % i, "en%d" % i, "ax%d" % i, "sp%d" % i]
    for n, v in zip(nm, (st, en, ax, sp)):
        inits.append(nh.from_array(np.array(v, np.int64), n))
    nodes.append(h.make_node("Slice", ["x"] + nm, ["s%d" % i], name="sl%d" % i))
    outs.append(("s%d" % i, np.float32))
    sl = [slice(None)] * 4
    for a, b, c, d in zip(st, en, ax, sp):
        sl[c] = slice(a, b if not (d < 0 and b <= -100) else None, d)
    ref["s%d" % i] = x[tuple(sl)]
save("slice", nodes, {"x": x}, outs, inits, {"x": x}, ref)
xd = (r.standard_normal((3, 50, 41)) * 10).astype(np.float64)
inits = [nh.from_array(np.array(v, np.int64), n) for n, v in
         [("a", [49, 1]), ("b", [-100, 40]), ("c", [1, 2]), ("d", [-3, 2])]]
save("slice_double", [h.make_node("Slice", ["x", "a", "b", "c", "d"], ["y"], name="sl")], {"x": xd},
     [("y", np.float64)], inits, {"x": xd}, {"y": xd[:, 49::-3, 1:40:2]})

# relabelling chains: the dying input's buffer is taken over; a value
# that is read twice or is a graph output keeps its own
x = r.standard_normal((2, 3, 4, 5)).astype(np.float32)
inits = [nh.from_array(np.array([6, 20], np.int64), "shape"), nh.from_array(np.array([0, 3], np.int64), "ax"),
         nh.from_array(np.array([0], np.int64), "ax0")]
nodes = [h.make_node("Relu", ["x"], ["a"], name="relu"),
         h.make_node("Reshape", ["a", "shape"], ["b"], name="reshape"),
         h.make_node("Unsqueeze", ["b", "ax"], ["c"], name="unsq"),
         h.make_node("Squeeze", ["c", "ax0"], ["d"], name="sq"),
         h.make_node("Flatten", ["d"], ["e"], name="flat", axis=2),
         h.make_node("Identity", ["e"], ["f"], name="id"),
         h.make_node("Neg", ["f"], ["g"], name="neg"),
         h.make_node("Reshape", ["g", "shape"], ["k"], name="reshape2"),
         h.make_node("Add", ["g", "g"], ["l"], name="add"),
         h.make_node("Identity", ["b"], ["m"], name="id_of_output")]
a = np.maximum(x, 0)
save("relabel", nodes, {"x": x}, [("k", np.float32), ("l", np.float32), ("b", np.float32), ("m", np.float32)],
     inits, {"x": x}, {"k": -a.reshape(6, 20), "l": -2 * a.reshape(120, 1), "b": a.reshape(6, 20),
                       "m": a.reshape(6, 20)})

# an If body computing from the main graph's initializers: folded at plan
# time (the 64 KiB of weights gain the 64 KiB Concat)
w1 = r.standard_normal((64, 128)).astype(np.float32)
w2 = r.standard_normal((64, 128)).astype(np.float32)
x = r.standard_normal((3, 128)).astype(np.float32)
then = h.make_graph([h.make_node("Concat", ["w1", "w2"], ["wc"], name="cat", axis=0),
                     h.make_node("Transpose", ["wc"], ["wt"], name="tr"),
                     h.make_node("MatMul", ["x", "wt"], ["t_out"], name="mm")], "then", [],
                    [h.make_tensor_value_info("t_out", T.FLOAT, None)])
els = h.make_graph([h.make_node("Neg", ["x"], ["e_out"], name="neg")], "else", [],
                   [h.make_tensor_value_info("e_out", T.FLOAT, None)])
save("if_outer_fold", [h.make_node("If", ["cond"], ["y"], name="if", then_branch=then, else_branch=els)],
     {"x": x, "cond": np.array(True)}, [("y", np.float32)],
     [nh.from_array(w1, "w1"), nh.from_array(w2, "w2")], {"x": x, "cond": np.array(True)}, tol=1e-5)
EOF
cases=$("$PY" "$TMPD/mk.py" "$TMPD") || { fail "fusion test models written"; exit 0; }

cat > "$TMPD/cmp.py" <<'EOF'
import os, sys
import numpy as np
import onnxruntime as ort
model, feed, fused, plain, ref, tolf = sys.argv[1:7]
a, b = np.load(fused), np.load(plain)
def rel(x, y):
    x, y = x.astype(np.float64), y.astype(np.float64)
    return float(np.abs(x - y).max() / (np.abs(y).max() + 1e-30)) if y.size else 0.0
def same(x, y):
    if x.dtype != y.dtype or x.shape != y.shape:
        return False
    if os.path.exists(tolf):
        return rel(x, y) < float(open(tolf).read())
    return x.tobytes() == y.tobytes()
bad = [k for k in b if not same(a[k], b[k])]
if bad:
    print("FAIL: differs from the run with taps in %s" % bad)
    sys.exit()
if os.path.exists(ref):
    want = dict(np.load(ref))
    bad = [k for k in want if not same(a[k], want[k])]
    print("FAIL: differs from numpy in %s" % bad if bad else "ok")
    sys.exit()
s = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
got = s.run(None, dict(np.load(feed)))
worst = 0.0
for o, g in zip(s.get_outputs(), got):
    m = a[o.name].astype(np.float64)
    g = g.astype(np.float64)
    worst = max(worst, float(np.abs(m - g).max() / (np.abs(g).max() + 1e-30)))
tol = 1e-2 if a[s.get_outputs()[0].name].dtype == np.float16 else 1e-5
print("ok" if worst < tol else "FAIL: relative error %g against onnxruntime (tolerance %g)" % (worst, tol))
EOF
for c in $cases; do
	if ! "$Q" run "$TMPD/$c.onnx" -i "$TMPD/$c.npz" -o "$TMPD/$c.fused.npz" > "$TMPD/err" 2>&1 ||
		! "$Q" run "$TMPD/$c.onnx" -i "$TMPD/$c.npz" -o "$TMPD/$c.plain.npz" --trace > "$TMPD/trace" 2> "$TMPD/err"; then
		fail "$c: runs" "$(head -c 300 "$TMPD/err")"
		continue
	fi
	res=$("$PY" "$TMPD/cmp.py" "$TMPD/$c.onnx" "$TMPD/$c.npz" "$TMPD/$c.fused.npz" "$TMPD/$c.plain.npz" \
		"$TMPD/$c.ref.npz" "$TMPD/$c.tol" 2>&1 | tail -1)
	what="same bytes with and without taps"
	[ -e "$TMPD/$c.tol" ] && what="same values (to rounding) with and without taps"
	[ "$res" = ok ] && pass "$c: $what, matches the reference" || fail "$c" "$res"
done

# taps still see the tensors the shortcuts skip
if grep -q '^tap: y float' "$TMPD/trace" 2>/dev/null || "$Q" run "$TMPD/conv_bn_relu.onnx" -i "$TMPD/conv_bn_relu.npz" \
	--trace 2>&1 | grep -q '^tap: yb float'; then
	pass "taps see the Conv and BatchNormalization outputs of a fused chain"
else
	fail "taps see the Conv and BatchNormalization outputs of a fused chain"
fi
# the direct convolution splits one image's columns, or the batch's images,
# between threads: the same bytes on 1 and 2 threads
for c in direct_odd direct_one_image direct_deep_nobias direct_3d direct_1d; do
	for t in 1 2; do
		"$Q" run "$TMPD/$c.onnx" -i "$TMPD/$c.npz" -o "$TMPD/$c.t$t.npz" -t $t > "$TMPD/err" 2>&1 || break
	done
	if cmp -s "$TMPD/$c.t1.npz" "$TMPD/$c.t2.npz"; then
		pass "$c: same bytes on 1 and 2 threads"
	else
		fail "$c: same bytes on 1 and 2 threads" "$(head -c 300 "$TMPD/err")"
	fi
done
# the bench's repeated runs reuse one plan: fused and stolen buffers stay right
for c in conv_bn_relu relabel; do
	"$Q" run "$TMPD/$c.onnx" -i "$TMPD/$c.npz" --bench 3 -q > /dev/null 2> "$TMPD/err" &&
		pass "$c: repeated runs of one plan" || fail "$c: repeated runs of one plan" "$(head -c 300 "$TMPD/err")"
done

# the If body's Concat and Transpose of outer initializers are folded once:
# weights 64 KiB + 64 KiB (Concat) + 64 KiB (Transpose) = 0.19 MiB, plus
# MatMul's packed copy of its now constant operand where fgemm runs; 0.06
# MiB when nothing is folded (--keep-weights: none released)
got=$("$Q" run "$TMPD/if_outer_fold.onnx" -i "$TMPD/if_outer_fold.npz" --bench 2 --keep-weights 2>&1 |
	sed -n 's/^memory: weights \([0-9.]*\) MiB.*/\1/p')
if awk -v g="${got:-0}" 'BEGIN { exit !(g >= 0.18) }'; then
	pass "an If body's computation on outer initializers is folded (weights $got MiB)"
else
	fail "an If body's computation on outer initializers is folded" "weights ${got:-?} MiB, expected at least 0.19"
fi

# the shortcuts happen: Conv -> Relu -> Reshape -> Unsqueeze keeps one
# 256 KiB activation alive (the Conv writes the Relu's output, the
# relabelling steps take it over); without them two are alive at once
"$PY" - "$TMPD" <<'PYEOF'
import sys
import numpy as np
import onnx
from onnx import TensorProto as T, helper as h, numpy_helper as nh
D = sys.argv[1]
r = np.random.default_rng(0)
nodes = [h.make_node("Conv", ["x", "w"], ["y"], pads=[1] * 4), h.make_node("Relu", ["y"], ["z"]),
         h.make_node("Reshape", ["z", "s"], ["a"]), h.make_node("Unsqueeze", ["a", "ax"], ["c"])]
g = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, [1, 8, 64, 64])],
                 [h.make_tensor_value_info("c", T.FLOAT, None)],
                 [nh.from_array(r.standard_normal((16, 8, 3, 3)).astype(np.float32), "w"),
                  nh.from_array(np.array([16, 4096], np.int64), "s"), nh.from_array(np.array([0], np.int64), "ax")])
m = h.make_model(g, opset_imports=[h.make_opsetid("", 13)])
m.ir_version = 7
onnx.save(m, D + "/peak.onnx")
np.savez(D + "/peak.npz", x=r.standard_normal((1, 8, 64, 64)).astype(np.float32))
PYEOF
got=$("$Q" run "$TMPD/peak.onnx" -i "$TMPD/peak.npz" --bench 2 2>&1 | sed -n 's/.*peak live activations \([0-9.]*\) MiB.*/\1/p')
# (the peak counts the Conv's scratch too, its padded input planes: 0.13 MiB)
if awk -v g="${got:-0}" 'BEGIN { exit !(g >= 0.25 && g < 0.5) }'; then
	pass "fused Conv + Relu and relabelling keep one activation alive (peak $got MiB)"
else
	fail "fused Conv + Relu and relabelling keep one activation alive" "peak live ${got:-?} MiB, expected 0.25 plus the Conv's scratch, under 0.5"
fi
