#!/bin/sh
# Randomized checks of the elementwise, reduction and softmax kernels against
# onnx's ReferenceEvaluator: broadcasting between random shapes (ranks 0-5,
# dimensions of 1 and 0), element types from bool to float16, reductions
# over random axes with and without keepdims, softmax over random axes. The
# seed is fixed, so the cases are the same on every run. One case per line.
ROOT="${ROOT:-$(cd "$(dirname "$0")/.." && pwd)}"
QUANTMAKE="${QUANTMAKE:-$ROOT/quantmake}"
PY="${PY:-$ROOT/.venv/bin/python}"
if ! "$PY" -c 'import onnx, onnx.reference, numpy' 2>/dev/null; then
	echo "SKIP: ops_elem: onnx with its reference evaluator is not installed (sh scripts/venv.sh)"
	exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp" || exit 1
QUANTMAKE="$QUANTMAKE" "$PY" - <<'EOF'
import os, subprocess
import numpy as np
import onnx
from onnx import helper as h, TensorProto as T
from onnx.reference import ReferenceEvaluator

qm = os.environ["QUANTMAKE"]
rng = np.random.default_rng(20261122)
NP2T = {np.float32: T.FLOAT, np.float64: T.DOUBLE, np.float16: T.FLOAT16, np.int8: T.INT8,
        np.int16: T.INT16, np.int32: T.INT32, np.int64: T.INT64, np.uint8: T.UINT8,
        np.uint16: T.UINT16, np.uint32: T.UINT32, np.uint64: T.UINT64, np.bool_: T.BOOL}

def shapes(n):
    """n shapes that broadcast together"""
    r = int(rng.integers(0, 6))
    full = [int(rng.choice([1, 2, 3, 4, 5])) for _ in range(r)]
    if r and rng.random() < 0.1:
        full[int(rng.integers(0, r))] = 0
    out = []
    for _ in range(n):
        k = int(rng.integers(0, r + 1))
        s = full[r - k:]
        out.append([d if rng.random() < 0.6 else 1 for d in s])
    return out

def data(shape, dt):
    if dt == np.bool_:
        return rng.random(shape) < 0.5
    if np.issubdtype(dt, np.floating):
        return (rng.standard_normal(shape) * 3).astype(dt)
    info = np.iinfo(dt)
    lo, hi = max(info.min, -100), min(info.max, 100)
    return rng.integers(lo, hi + 1, size=shape).astype(dt)

def check(name, op, inputs, attrs=None, opset=18, extra_init=(), expect=None):
    """run one node; expect computes the reference where the evaluator's is wrong"""
    names = ["x%d" % i for i in range(len(inputs))]
    g = h.make_graph([h.make_node(op, names + [e[0] for e in extra_init], ["y"], **(attrs or {}))], "g",
                     [h.make_tensor_value_info(n, NP2T[a.dtype.type], a.shape) for n, a in zip(names, inputs)],
                     [h.make_tensor_value_info("y", T.UNDEFINED, None)],
                     [onnx.numpy_helper.from_array(v, n) for n, v in extra_init])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", opset)])
    m.ir_version = 8
    try:
        ref = expect(*inputs) if expect else ReferenceEvaluator(m).run(None, dict(zip(names, inputs)))[0]
    except Exception as e:  # the reference refuses: not a case
        return
    onnx.save(m, "m.onnx")
    args = [qm, "run", "m.onnx", "-o", "y.npz", "-q"]
    for n, a in zip(names, inputs):
        np.save(n + ".npy", a)
        args += ["-i", "%s=%s.npy" % (n, n)]
    r = subprocess.run(args, capture_output=True, text=True)
    if r.returncode:
        print("FAIL: %s: %s" % (name, (r.stderr.strip().splitlines() or ["exit %d" % r.returncode])[-1]))
        return
    y = np.load("y.npz")["y"]
    ref = np.asarray(ref)
    if y.shape != ref.shape or y.dtype != ref.dtype:
        print("FAIL: %s: got %s %s, expected %s %s" % (name, y.dtype, y.shape, ref.dtype, ref.shape))
        return
    if np.issubdtype(ref.dtype, np.floating):
        ok = np.allclose(y.astype(np.float64), ref.astype(np.float64), rtol=1e-3, atol=1e-5, equal_nan=True)
    else:
        ok = np.array_equal(y, ref)
    if ok:
        print("PASS: %s" % name)
    else:
        i = np.argmax(np.abs(y.astype(np.float64) - ref.astype(np.float64)).reshape(-1)) if y.size else 0
        print("FAIL: %s: element %d is %r, expected %r" % (name, i, y.reshape(-1)[i], ref.reshape(-1)[i]))

arith = [np.float32, np.float64, np.float16, np.int8, np.int32, np.int64, np.uint8, np.uint64]
for k in range(12):
    for op in ("Add", "Sub", "Mul"):
        dt = arith[int(rng.integers(0, len(arith)))]
        sa, sb = shapes(2)
        check("%s_%s_%d" % (op.lower(), np.dtype(dt).name, k), op, [data(sa, dt), data(sb, dt)])
    dt = [np.float32, np.float64, np.float16][k % 3]
    sa, sb = shapes(2)
    check("div_%s_%d" % (np.dtype(dt).name, k), "Div", [data(sa, dt), data(sb, dt)])
    for op in ("Equal", "Less", "GreaterOrEqual"):
        dt = arith[int(rng.integers(0, len(arith)))]
        sa, sb = shapes(2)
        check("%s_%s_%d" % (op.lower(), np.dtype(dt).name, k), op, [data(sa, dt), data(sb, dt)])
    sc, sa, sb = shapes(3)
    dt = arith[k % len(arith)]
    check("where_%s_%d" % (np.dtype(dt).name, k), "Where", [data(sc, np.bool_), data(sa, dt), data(sb, dt)])
    sa, sb, sc = shapes(3)
    for op in ("Max", "Min", "Sum"):
        dt = arith[int(rng.integers(0, len(arith)))]
        check("%s_%s_%d" % (op.lower(), np.dtype(dt).name, k), op, [data(sa, dt), data(sb, dt), data(sc, dt)])
    sa, sb = shapes(2)
    check("and_%d" % k, "And", [data(sa, np.bool_), data(sb, np.bool_)])
    sa, sb = shapes(2)
    check("pow_float_%d" % k, "Pow", [np.abs(data(sa, np.float32)) + 0.5, data(sb, np.float32) / 3])

alltypes = [np.float32, np.float64, np.float16, np.int8, np.int16, np.int32, np.int64,
            np.uint8, np.uint16, np.uint32, np.uint64, np.bool_]
for src in alltypes:
    for dst in alltypes:
        x = data([int(rng.integers(0, 4)), 3], src)
        if np.issubdtype(src, np.floating) and not np.issubdtype(dst, np.floating) and dst != np.bool_:
            x = np.abs(x)  # negative floats to unsigned are undefined in C and numpy alike
        check("cast_%s_to_%s" % (np.dtype(src).name, np.dtype(dst).name), "Cast", [x],
              {"to": NP2T[dst]})

red = ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
       "ReduceLogSumExp", "ReduceSumSquare"]
for k in range(24):
    op = red[k % len(red)]
    r = int(rng.integers(1, 5))
    shape = [int(rng.integers(1, 5)) for _ in range(r)]
    dt = [np.float32, np.float64, np.int32, np.int64][k % 4]
    if op in ("ReduceL2", "ReduceLogSumExp") and dt in (np.int32, np.int64):
        dt = np.float32
    x = data(shape, dt)
    if op == "ReduceProd" and dt in (np.int32, np.int64):
        x = (x % 3).astype(dt)
    naxes = int(rng.integers(0, r + 1))
    axes = sorted(rng.choice(r, naxes, replace=False).tolist())
    axes = [a - r if rng.random() < 0.3 else a for a in axes]
    keep = int(rng.integers(0, 2))
    init = (("axes", np.array(axes, np.int64)),) if axes else ()
    check("%s_%s_axes%s_keep%d" % (op.lower(), np.dtype(dt).name, "".join(map(str, axes)), keep),
          op, [x], {"keepdims": keep}, extra_init=init)
    a = int(rng.integers(-r, r))
    check("argmax_%d_axis%d_keep%d" % (k, a, keep), "ArgMax", [x], {"axis": a, "keepdims": keep})

for k in range(8):
    r = int(rng.integers(1, 5))
    shape = [int(rng.integers(1, 6)) for _ in range(r)]
    a = int(rng.integers(-r, r))
    for op in ("Softmax", "LogSoftmax", "Hardmax"):
        check("%s_%d_axis%d" % (op.lower(), k, a), op, [data(shape, np.float32)], {"axis": a})
    # before opset 13 the input is coerced to 2-D at axis (the evaluator
    # applies the opset-13 meaning to every version; onnxruntime coerces)
    def coerced(x, a=a):
        a = a + x.ndim if a < 0 else a
        x2 = x.reshape(int(np.prod(x.shape[:a])), -1).astype(np.float64)
        e = np.exp(x2 - x2.max(axis=1, keepdims=True))
        return (e / e.sum(axis=1, keepdims=True)).reshape(x.shape).astype(np.float32)
    check("softmax11_%d_axis%d" % (k, a), "Softmax", [data(shape, np.float32)], {"axis": a}, opset=11,
          expect=coerced)
EOF
