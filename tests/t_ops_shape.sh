#!/bin/sh
# Shape, index, control-flow and recurrent operators beyond libonnx-testdata:
#  - kernels on the element types the node tests leave out (int8 ... double,
#    float16, bool) and attributes of newer opsets (Split num_outputs,
#    scatter reductions max/min), compared exactly with onnx's
#    ReferenceEvaluator through `quantmake run`;
#  - shape-data propagation in `quantmake infer-shapes` (Shape -> Gather ->
#    Unsqueeze -> Concat -> Reshape with symbolic dims, -1 solved by symbol
#    cancellation, Loop fixpoints, sequence lengths);
#  - constant chains folded at plan time as views of their constant's bytes
#    (exec/interp.c's Alias), in If branches too, against onnxruntime;
#  - bad input: one clear error naming the node.
# One case per line: PASS/FAIL/SKIP.
ROOT="${ROOT:-$(cd "$(dirname "$0")/.." && pwd)}"
QUANTMAKE="${QUANTMAKE:-$ROOT/quantmake}"
PY="${PY:-$ROOT/.venv/bin/python}"
if ! "$PY" -c 'import onnx, onnx.reference, numpy' 2>/dev/null; then
	echo "SKIP: ops_shape: onnx with its reference evaluator is not installed (sh scripts/venv.sh)"
	exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp" || exit 1
QUANTMAKE="$QUANTMAKE" "$PY" - <<'EOF'
import os, subprocess
import numpy as np
import onnx
from onnx import helper as h, TensorProto as T, numpy_helper
from onnx.reference import ReferenceEvaluator

qm = os.environ["QUANTMAKE"]
rng = np.random.default_rng(7)
NP2T = {np.dtype(k): v for k, v in [("uint8", T.UINT8), ("int8", T.INT8), ("int16", T.INT16),
        ("uint16", T.UINT16), ("int32", T.INT32), ("int64", T.INT64), ("float16", T.FLOAT16),
        ("float64", T.DOUBLE), ("float32", T.FLOAT), ("bool", T.BOOL)]}


def model(nodes, ins, outs, inits=(), opset=18):
    g = h.make_graph(nodes, "g", ins, outs, initializer=list(inits))
    m = h.make_model(g, opset_imports=[h.make_opsetid("", opset)])
    m.ir_version = 8
    return m


def data(shape, dt):
    dt = np.dtype(dt)
    if dt == np.bool_:
        return rng.integers(0, 2, size=shape).astype(bool)
    if dt.kind == "f":
        return rng.standard_normal(shape).astype(dt)
    info = np.iinfo(dt)
    return rng.integers(max(info.min, -100), min(info.max, 100), size=shape, endpoint=True).astype(dt)


def run_case(name, m, feeds, want=None):
    path = name + ".onnx"
    onnx.save(m, path)
    args = [qm, "run", path, "-o", name + ".npz", "-q"]
    for k, v in feeds.items():
        np.save(name + "_" + k + ".npy", v)
        args += ["-i", k + "=" + name + "_" + k + ".npy"]
    r = subprocess.run(args, capture_output=True, text=True)
    if r.returncode:
        print("FAIL: %s: quantmake run: %s" % (name, r.stderr.strip().splitlines()[-1:] if r.stderr else r.returncode))
        return
    try:
        ref = want if want is not None else ReferenceEvaluator(m).run(None, feeds)
    except Exception as e:
        print("SKIP: %s: the reference evaluator fails: %s" % (name, str(e).splitlines()[0][:100]))
        return
    got = np.load(name + ".npz")
    for o, want in zip(m.graph.output, ref):
        g = got[o.name]
        want = np.asarray(want)
        if g.shape != want.shape or g.dtype != want.dtype:
            print("FAIL: %s: output %s is %s %s, expected %s %s" % (name, o.name, g.dtype, g.shape, want.dtype, want.shape))
            return
        if want.dtype.kind == "f":
            ok = np.array_equal(g, want, equal_nan=True) or np.allclose(g, want, rtol=1e-3, atol=1e-5, equal_nan=True)
        else:
            ok = np.array_equal(g, want)
        if not ok:
            print("FAIL: %s: output %s differs" % (name, o.name))
            return
    print("PASS: " + name)


def vi(n, dt, shape=None):
    return h.make_tensor_value_info(n, dt, shape)


def i64(name, v):
    return numpy_helper.from_array(np.array(v, dtype=np.int64), name)


TYPES = ["uint8", "int8", "int16", "uint16", "int32", "int64", "float16", "float64", "bool"]
for dt in TYPES:
    t = NP2T[np.dtype(dt)]
    x = data((2, 3, 4), dt)
    cases = {
        "transpose": ([h.make_node("Transpose", ["x"], ["y"], perm=[2, 0, 1])], []),
        "gather": ([h.make_node("Gather", ["x", "i"], ["y"], axis=1)], [i64("i", [[2, -1], [0, 0]])]),
        "gather_elements": ([h.make_node("GatherElements", ["x", "i"], ["y"], axis=2)],
                            [i64("i", rng.integers(-4, 4, size=(2, 3, 5)))]),
        "gather_nd_batch": ([h.make_node("GatherND", ["x", "i"], ["y"], batch_dims=1)],
                            [i64("i", [[[1, 3], [2, 0]], [[0, 1], [2, 2]]])]),
        "slice_negstep": ([h.make_node("Slice", ["x", "s", "e", "a", "st"], ["y"])],
                          [i64("s", [-1, 10]), i64("e", [-100, 0]), i64("a", [2, 1]), i64("st", [-2, -1])]),
        "concat": ([h.make_node("Concat", ["x", "x"], ["y"], axis=-1)], []),
        "split18": ([h.make_node("Split", ["x"], ["y", "z"], axis=2, num_outputs=2)], []),
        "split18_uneven": ([h.make_node("Split", ["x"], ["y", "z"], axis=1, num_outputs=2)], []),
        "tile": ([h.make_node("Tile", ["x", "r"], ["y"])], [i64("r", [2, 1, 3])]),
        "expand": ([h.make_node("Expand", ["x", "s"], ["y"])], [i64("s", [2, 1, 3, 4])]),
        "reshape": ([h.make_node("Reshape", ["x", "s"], ["y"])], [i64("s", [0, -1])]),
        "unsqueeze": ([h.make_node("Unsqueeze", ["x", "a"], ["y"])], [i64("a", [-1, 0])]),
        "flatten": ([h.make_node("Flatten", ["x"], ["y"], axis=-1)], []),
        "trilu": ([h.make_node("Trilu", ["x", "k"], ["y"], upper=0)], [i64("k", 1)]),
        "reverse_sequence": ([h.make_node("ReverseSequence", ["x", "l"], ["y"], batch_axis=0, time_axis=1)],
                             [i64("l", [3, 1])]),
        "compress": ([h.make_node("Compress", ["x", "c"], ["y"], axis=2)],
                     [numpy_helper.from_array(np.array([True, False, True]), "c")]),
        "scatter_nd": ([h.make_node("ScatterND", ["x", "i", "u"], ["y"])],
                       [i64("i", [[1, 2], [0, 0]]), numpy_helper.from_array(data((2, 4), dt), "u")]),
        "identity": ([h.make_node("Identity", ["x"], ["y"])], []),
    }
    if dt != "bool":
        cases["topk_smallest"] = ([h.make_node("TopK", ["x", "k"], ["y", "z"], axis=1, largest=0)], [i64("k", [2])])
        cases["topk_largest"] = ([h.make_node("TopK", ["x", "k"], ["y", "z"], axis=-1)], [i64("k", [3])])
        cases["nonzero"] = ([h.make_node("NonZero", ["x"], ["y"])], [])
        cases["eyelike"] = ([h.make_node("EyeLike", ["m"], ["y"], k=-1)],
                            [numpy_helper.from_array(data((3, 4), dt), "m")])
        for red in ("add", "mul", "max", "min"):
            if dt in ("uint8", "int8", "uint16") and red == "mul":
                continue
            cases["scatter_elements_" + red] = (
                [h.make_node("ScatterElements", ["x", "i", "u"], ["y"], axis=1, reduction=red)],
                [i64("i", [[[0, 1, 2, 0]], [[2, 2, 1, 1]]]), numpy_helper.from_array(data((2, 1, 4), dt), "u")])
    for name, (nodes, inits) in cases.items():
        outs = [vi(o, 0) for o in nodes[0].output]
        m = model(nodes, [vi("x", t, [2, 3, 4])], outs, inits)
        run_case("%s_%s" % (name, dt), m, {"x": x})

# Unique (flat: the reference is wrong for flattened rank > 1) and with an axis
for dt in ("int8", "int64", "float64"):
    for srt in (0, 1):
        m = model([h.make_node("Unique", ["x"], ["y", "i", "v", "c"], sorted=srt)], [vi("x", NP2T[np.dtype(dt)], [12])],
                  [vi(o, 0) for o in ("y", "i", "v", "c")])
        run_case("unique_sorted%d_%s" % (srt, dt), m, {"x": (data((12,), dt) // 30).astype(dt)})
m = model([h.make_node("Unique", ["x"], ["y", "i", "v", "c"], axis=1)], [vi("x", T.INT32, [2, 5])],
          [vi(o, 0) for o in ("y", "i", "v", "c")])
run_case("unique_axis_int32", m, {"x": np.array([[1, 0, 1, 2, 0], [3, 1, 3, 0, 1]], dtype=np.int32)})

# OneHot with int32 indices into int8 values, and ConstantOfShape of int64
m = model([h.make_node("OneHot", ["x", "d", "v"], ["y"], axis=1)], [vi("x", T.INT32, [2, 3])], [vi("y", 0)],
          [i64("d", 5), numpy_helper.from_array(np.array([-3, 7], dtype=np.int8), "v")])
run_case("onehot_int8", m, {"x": np.array([[0, 4, -1], [-5, 9, 2]], dtype=np.int32)})
m = model([h.make_node("ConstantOfShape", ["x"], ["y"], value=numpy_helper.from_array(np.array([-7], dtype=np.int64)))],
          [vi("x", T.INT64, [2])], [vi("y", 0)])
run_case("constant_of_shape_int64", m, {"x": np.array([2, 3], dtype=np.int64)})
m = model([h.make_node("Range", ["a", "b", "c"], ["y"])], [vi("a", T.INT64, []), vi("b", T.INT64, []), vi("c", T.INT64, [])], [vi("y", 0)])
run_case("range_int64_negative", m, {"a": np.array(10, dtype=np.int64), "b": np.array(-7, dtype=np.int64),
                                      "c": np.array(-3, dtype=np.int64)})

# Constant in every numeric form (sparse with linear and coordinate indices)
sp_vals = numpy_helper.from_array(np.array([1.5, -2.0, 3.25], dtype=np.float32), "v")
for name, kw in [
        ("constant_value_float", {"value_float": 2.5}),
        ("constant_value_floats", {"value_floats": [1.0, -2.0, 0.5]}),
        ("constant_value_int", {"value_int": -7}),
        ("constant_value_ints", {"value_ints": [3, -1, 9]}),
        ("constant_sparse_linear", {"sparse_value": h.make_sparse_tensor(
            sp_vals, numpy_helper.from_array(np.array([0, 5, 11], np.int64), "i"), [3, 4])}),
        ("constant_sparse_coords", {"sparse_value": h.make_sparse_tensor(
            sp_vals, numpy_helper.from_array(np.array([[0, 1], [2, 0], [1, 3]], np.int64), "i"), [3, 4])})]:
    m = model([h.make_node("Constant", [], ["c"], **kw), h.make_node("Identity", ["c"], ["y"])],
              [vi("x", T.FLOAT, [1])], [vi("y", 0)], opset=13)
    want = None
    if "sparse_value" in kw:
        want = np.zeros([3, 4], np.float32)
        want.flat[[1, 8, 7]] = [1.5, -2.0, 3.25]
        if name.endswith("linear"):
            want = np.zeros([3, 4], np.float32)
            want.flat[[0, 5, 11]] = [1.5, -2.0, 3.25]
        want = [want]
    run_case(name, m, {"x": np.zeros([1], np.float32)}, want)

# recurrent networks against onnxruntime (the reference evaluator lacks
# bidirectional RNNs; onnxruntime lacks layout 1, so a layout-1 model is
# compared with onnxruntime on the equivalent layout-0 model)
try:
    import onnxruntime as ort
except ImportError:
    ort = None


def rnn_case(name, op, extra, G, layout):
    if ort is None:
        print("SKIP: %s: onnxruntime is not installed" % name)
        return
    seq, batch, inp, hid = 5, 3, 4, 6
    X = data((seq, batch, inp), "float32")
    h0 = data((2, batch, hid), "float32")
    c0 = data((2, batch, hid), "float32")
    W = (data((2, G * hid, inp), "float32") * 0.5).astype(np.float32)
    R = (data((2, G * hid, hid), "float32") * 0.5).astype(np.float32)
    B = data((2, 2 * G * hid), "float32")
    P = data((2, 3 * hid), "float32")
    sl = np.array([5, 2, 1], dtype=np.int32)
    def build(lay):
        t = (lambda a: a.transpose(1, 0, 2)) if lay else (lambda a: a)
        ins = ["x", "W", "R", "B", "sl", "h0"]
        inits = [numpy_helper.from_array(W, "W"), numpy_helper.from_array(R, "R"),
                 numpy_helper.from_array(B, "B"), numpy_helper.from_array(sl, "sl"),
                 numpy_helper.from_array(np.ascontiguousarray(t(h0)), "h0")]
        outs = ["y", "yh"]
        if op == "LSTM":
            ins += ["c0", "P"]
            outs += ["yc"]
            inits += [numpy_helper.from_array(np.ascontiguousarray(t(c0)), "c0"), numpy_helper.from_array(P, "P")]
        node = h.make_node(op, ins, outs, hidden_size=hid, direction="bidirectional", layout=lay, **extra)
        xs = list(t(X).shape)
        return model([node], [vi("x", T.FLOAT, xs)], [vi(o, T.FLOAT) for o in outs], inits, opset=14), outs
    ours, outs = build(layout)
    ref_m, _ = build(0)
    onnx.save(ours, name + ".onnx")
    onnx.save(ref_m, name + "_ref.onnx")
    xin = np.ascontiguousarray(X.transpose(1, 0, 2)) if layout else X
    np.save(name + "_x.npy", xin)
    r = subprocess.run([qm, "run", name + ".onnx", "-i", "x=" + name + "_x.npy", "-o", name + ".npz", "-q"],
                       capture_output=True, text=True)
    if r.returncode:
        print("FAIL: %s: quantmake run: %s" % (name, r.stderr.strip()[-200:]))
        return
    so = ort.SessionOptions()
    so.log_severity_level = 3
    ref = ort.InferenceSession(name + "_ref.onnx", so, providers=["CPUExecutionProvider"]).run(None, {"x": X})
    got = np.load(name + ".npz")
    for o, want in zip(outs, ref):
        g = got[o]
        if layout:
            g = g.transpose(1, 2, 0, 3) if o == "y" else g.transpose(1, 0, 2)
        if g.shape != want.shape or not np.allclose(g, want, rtol=1e-3, atol=1e-5):
            print("FAIL: %s: output %s differs from onnxruntime" % (name, o))
            return
    print("PASS: " + name)

for name, op, extra, G, layout in [
        ("rnn_bidi_lens", "RNN", {}, 1, 0),
        ("rnn_relu_layout1", "RNN", {"activations": ["Relu", "Tanh"]}, 1, 1),
        ("gru_bidi_lens", "GRU", {}, 3, 0),
        ("gru_linear_before_reset_layout1", "GRU", {"linear_before_reset": 1}, 3, 1),
        ("lstm_bidi_lens_peephole", "LSTM", {}, 4, 0),
        ("lstm_clip_input_forget_layout1", "LSTM", {"clip": 0.5, "input_forget": 1}, 4, 1),
        ("lstm_hardsigmoid_alpha", "LSTM", {"activations": ["HardSigmoid", "Tanh", "Tanh"] * 2,
                                            "activation_alpha": [0.3, 0.25], "activation_beta": [0.4, 0.6]}, 4, 0)]:
    rnn_case(name, op, extra, G, layout)

# Scan-9 with reverse directions and a non-zero scan axis: reversing the
# input and output axes by hand gives the forward scan
body = h.make_graph([h.make_node("Add", ["s", "xi"], ["s2"]), h.make_node("Identity", ["s2"], ["o"])], "body",
                    [vi("s", T.FLOAT, [2]), vi("xi", T.FLOAT, [2])], [vi("s2", T.FLOAT, [2]), vi("o", T.FLOAT, [2])])
m = model([h.make_node("Scan", ["s0", "x"], ["sf", "ys"], body=body, num_scan_inputs=1,
                       scan_input_axes=[1], scan_input_directions=[1], scan_output_axes=[1],
                       scan_output_directions=[1])],
          [vi("s0", T.FLOAT, [2]), vi("x", T.FLOAT, [2, 5])], [vi("sf", 0), vi("ys", 0)], opset=16)
s0, xs = data((2,), "float32"), data((2, 5), "float32")
onnx.save(m, "scan.onnx")
np.save("scan_s0.npy", s0)
np.save("scan_x.npy", xs)
r = subprocess.run([qm, "run", "scan.onnx", "-i", "s0=scan_s0.npy", "-i", "x=scan_x.npy", "-o", "scan.npz", "-q"],
                   capture_output=True, text=True)
if r.returncode:
    print("FAIL: scan_reverse_axis1: %s" % r.stderr.strip()[-200:])
else:
    got = np.load("scan.npz")
    acc = s0 + np.cumsum(xs[:, ::-1], axis=1).T   # [5, 2] in processing order
    want_ys = acc[::-1].T                          # written in reverse along axis 1
    if np.allclose(got["sf"], acc[-1], 1e-5) and np.allclose(got["ys"], want_ys, 1e-5):
        print("PASS: scan_reverse_axis1")
    else:
        print("FAIL: scan_reverse_axis1: outputs differ")

# constants folded at plan time as views of their input's bytes (Unsqueeze,
# Reshape, Slice, Expand, Identity: exec/interp.c's Alias) and steps folded
# twice with the same inputs (the second a view of the first's result),
# against onnxruntime, with the default run (constants nobody reads any
# more are freed, a view's owner only after it) and --keep-weights
def fold_case(name, m, feeds, keep=(0, 1)):
    if ort is None:
        print("SKIP: %s: onnxruntime is not installed" % name)
        return
    onnx.save(m, name + ".onnx")
    so = ort.SessionOptions()
    so.log_severity_level = 3
    ref = ort.InferenceSession(name + ".onnx", so, providers=["CPUExecutionProvider"]).run(None, feeds)
    for kw in keep:
        args = [qm, "run", name + ".onnx", "-o", name + ".npz", "-q"] + (["--keep-weights"] if kw else [])
        for k, v in feeds.items():
            np.save(name + "_" + k + ".npy", v)
            args += ["-i", k + "=" + name + "_" + k + ".npy"]
        r = subprocess.run(args, capture_output=True, text=True)
        if r.returncode or "Sanitizer" in r.stderr or "runtime error" in r.stderr:
            print("FAIL: %s: quantmake run%s: %s" % (name, " --keep-weights" if kw else "", r.stderr.strip()[-300:]))
            return
        got = np.load(name + ".npz")
        for o, want in zip(m.graph.output, ref):
            if got[o.name].shape != want.shape or not np.array_equal(got[o.name], want):
                print("FAIL: %s: output %s differs from onnxruntime%s" % (name, o.name, " (--keep-weights)" if kw else ""))
                return
    print("PASS: " + name)


def fconst(name, a):
    return h.make_node("Constant", [], [name], value=numpy_helper.from_array(np.asarray(a), name + "_v"))


C = np.arange(96, dtype=np.float32).reshape(2, 12, 4) * 0.25 - 3
x34 = data((3, 4), "float32")
# Constant -> Unsqueeze -> Reshape -> Slice (rows 2..4 of 24: a range at
# byte 32) -> Add
chain = [fconst("c", C), fconst("ax", np.array([0], np.int64)), fconst("sh", np.array([24, 4], np.int64)),
         fconst("st", np.array([2], np.int64)), fconst("en", np.array([5], np.int64)),
         fconst("axs", np.array([0], np.int64)),
         h.make_node("Unsqueeze", ["c", "ax"], ["cu"]), h.make_node("Reshape", ["cu", "sh"], ["cr"]),
         h.make_node("Slice", ["cr", "st", "en", "axs"], ["cs"])]
fold_case("fold_view_chain", model(chain + [h.make_node("Add", ["cs", "x"], ["y"])],
                                   [vi("x", T.FLOAT, [3, 4])], [vi("y", T.FLOAT, [3, 4])]), {"x": x34})

# the same chain with its Reshape and Slice in If branches (the outer
# Unsqueeze's result read from both), each branch slicing another range
def branch(nm, start, op):
    return h.make_graph([fconst(nm + "_sh", np.array([24, 4], np.int64)),
                         fconst(nm + "_st", np.array([start], np.int64)),
                         fconst(nm + "_en", np.array([start + 3], np.int64)),
                         fconst(nm + "_ax", np.array([0], np.int64)),
                         h.make_node("Reshape", ["cu", nm + "_sh"], [nm + "_r"]),
                         h.make_node("Slice", [nm + "_r", nm + "_st", nm + "_en", nm + "_ax"], [nm + "_s"]),
                         h.make_node(op, [nm + "_s", "x"], [nm + "_y"])],
                        nm, [], [vi(nm + "_y", T.FLOAT, [3, 4])])
ifm = model(chain[:2] + [h.make_node("Unsqueeze", ["c", "ax"], ["cu"]),
                         h.make_node("If", ["cond"], ["y"], then_branch=branch("then", 8, "Add"),
                                     else_branch=branch("else", 20, "Mul"))],
            [vi("cond", T.BOOL, []), vi("x", T.FLOAT, [3, 4])], [vi("y", T.FLOAT, [3, 4])])
for cond in (True, False):
    fold_case("fold_view_if_%s" % ("then" if cond else "else"), ifm, {"cond": np.array(cond), "x": x34})

# the viewed initializer is also a graph output (through Identity, itself a
# view) and read twice more: by a Mul that runs and by the folded chain,
# whose view is read twice
W = (np.arange(32, dtype=np.float32).reshape(4, 8) - 7) * 0.5
fold_case("fold_view_source_output_read_twice", model(
    [h.make_node("Identity", ["w"], ["w_out"]), h.make_node("Reshape", ["w", "s84"], ["wr"]),
     h.make_node("Slice", ["wr", "s4", "e8", "a0"], ["ws"]),
     h.make_node("Add", ["ws", "x"], ["y"]), h.make_node("Sub", ["x", "ws"], ["y2"]),
     h.make_node("Mul", ["x48", "w"], ["z"])],
    [vi("x", T.FLOAT, [4, 4]), vi("x48", T.FLOAT, [4, 8])],
    [vi("w_out", T.FLOAT, [4, 8]), vi("y", T.FLOAT, [4, 4]), vi("y2", T.FLOAT, [4, 4]), vi("z", T.FLOAT, [4, 8])],
    [numpy_helper.from_array(W, "w"), i64("s84", [8, 4]), i64("s4", [4]), i64("e8", [8]), i64("a0", [0])]),
    {"x": data((4, 4), "float32"), "x48": data((4, 8), "float32")})

# a one-row view of a 1 MiB table nothing else reads (the run frees the
# table and keeps a copy of the row), a view of most of another (its table
# stays while the view does), and Expand to as many elements
big = data((4096, 64), "float32")
fold_case("fold_view_small_row_of_table", model(
    [h.make_node("Slice", ["tab", "s", "e", "a0"], ["row"]), h.make_node("Add", ["row", "x"], ["y"]),
     h.make_node("Slice", ["tab2", "a0", "e3000", "a0"], ["most"]), h.make_node("Mul", ["most", "k"], ["z"]),
     h.make_node("Expand", ["c34", "s134"], ["ce"]), h.make_node("Mul", ["ce", "x34"], ["u"])],
    [vi("x", T.FLOAT, [1, 64]), vi("k", T.FLOAT, [1]), vi("x34", T.FLOAT, [1, 3, 4])],
    [vi("y", T.FLOAT, [1, 64]), vi("z", T.FLOAT, [3000, 64]), vi("u", T.FLOAT, [1, 3, 4])],
    [numpy_helper.from_array(big, "tab"), numpy_helper.from_array(big[::-1].copy(), "tab2"),
     i64("s", [77]), i64("e", [78]), i64("a0", [0]), i64("e3000", [3000]),
     numpy_helper.from_array(x34, "c34"), i64("s134", [1, 3, 4])]),
    {"x": data((1, 64), "float32"), "k": np.array([0.5], np.float32), "x34": data((1, 3, 4), "float32")})
r = subprocess.run([qm, "run", "fold_view_small_row_of_table.onnx", "-i", "x=fold_view_small_row_of_table_x.npy",
                    "-i", "k=fold_view_small_row_of_table_k.npy", "-i", "x34=fold_view_small_row_of_table_x34.npy",
                    "--bench", "1"], capture_output=True, text=True)
import re
wt = re.search(r"weights ([0-9.]+) MiB", r.stdout + r.stderr)
if not wt or float(wt.group(1)) > 1.1:
    print("FAIL: fold_view_frees_table: %s" % ((r.stdout + r.stderr).strip()[-200:] if not wt else
          "weights %s MiB, expected the 1 MiB table sliced to one row freed (the other kept)" % wt.group(1)))
else:
    print("PASS: fold_view_frees_table")

# the same Slices and Concat (LSTM gates reordered, as torch exports them)
# in both branches of an If: the second branch's are views of the first's
G = data((8, 4), "float32")
def gates(nm, op):
    return h.make_graph([h.make_node("Slice", ["g", "z0", "z4", "z0"], [nm + "_a"]),
                         h.make_node("Slice", ["g", "z4", "z8", "z0"], [nm + "_b"]),
                         h.make_node("Concat", [nm + "_b", nm + "_a"], [nm + "_c"], axis=0),
                         h.make_node("Unsqueeze", [nm + "_c", "z0"], [nm + "_u"]),
                         h.make_node(op, [nm + "_u", "x"], [nm + "_y"])],
                        nm, [], [vi(nm + "_y", T.FLOAT, [1, 8, 4])])
gm = model([h.make_node("If", ["cond"], ["y"], then_branch=gates("t", "Add"), else_branch=gates("e", "Mul"))],
           [vi("cond", T.BOOL, []), vi("x", T.FLOAT, [1, 8, 4])], [vi("y", T.FLOAT, [1, 8, 4])],
           [numpy_helper.from_array(G, "g"), i64("z0", [0]), i64("z4", [4]), i64("z8", [8])])
for cond in (True, False):
    fold_case("fold_again_if_%s" % ("then" if cond else "else"), gm,
              {"cond": np.array(cond), "x": data((1, 8, 4), "float32")})

# ---- inference ----

def infer(name, m):
    onnx.save(m, name + ".onnx")
    r = subprocess.run([qm, "infer-shapes", name + ".onnx", name + "_out.onnx"], capture_output=True, text=True)
    if r.returncode:
        return None, r.stderr.strip()
    o = onnx.load(name + "_out.onnx")
    types = {}
    def walk(g):
        for v in list(g.value_info) + list(g.output):
            types[v.name] = v.type
    walk(o.graph)
    return types, ""


def dims(tp):
    if tp.HasField("sequence_type"):
        tp = tp.sequence_type.elem_type
    if not tp.tensor_type.HasField("shape"):
        return None
    return [d.dim_value if d.HasField("dim_value") else (d.dim_param or "?") for d in tp.tensor_type.shape.dim]


def expect(name, m, want):
    types, err = infer(name, m)
    if types is None:
        print("FAIL: %s: %s" % (name, err))
        return
    for k, v in want.items():
        got = dims(types[k]) if k in types else None
        if got is None or len(got) != len(v) or any(w is not None and w != g for w, g in zip(v, got)):
            print("FAIL: %s: %s is %s, expected %s" % (name, k, got, v))
            return
    print("PASS: " + name)


# PyTorch's dynamic reshape pattern with symbols
nodes = [h.make_node("Shape", ["x"], ["s"]),
         h.make_node("Gather", ["s", "i0"], ["b"], axis=0), h.make_node("Gather", ["s", "i1"], ["t"], axis=0),
         h.make_node("Unsqueeze", ["b", "a0"], ["bu"]), h.make_node("Unsqueeze", ["t", "a0"], ["tu"]),
         h.make_node("Concat", ["bu", "tu", "m1"], ["shp"], axis=0),
         h.make_node("Reshape", ["x", "shp"], ["y"]),
         h.make_node("Slice", ["s", "one", "big"], ["tail"]),
         h.make_node("ConstantOfShape", ["tail"], ["co"]),
         h.make_node("Expand", ["e1", "s"], ["ex"]),
         h.make_node("Size", ["x"], ["n"]),
         h.make_node("Flatten", ["x"], ["f"], axis=2)]
inits = [i64("i0", 0), i64("i1", 1), i64("a0", [0]), i64("m1", [-1]), i64("one", [1]), i64("big", [100]),
         numpy_helper.from_array(np.ones([1], np.float32), "e1")]
m = model(nodes, [vi("x", T.FLOAT, ["batch", "seq", 4, 8])],
          [vi(o, 0) for o in ["y", "co", "ex", "f"]], inits, opset=13)
expect("infer_reshape_symbolic", m, {"y": ["batch", "seq", 32], "co": ["seq", 4, 8],
                                     "ex": ["batch", "seq", 4, 8], "f": [None, 32], "shp": [3]})

# -1 solved by cancelling symbols: [batch, 3, 4] -> [batch, -1]
nodes = [h.make_node("Shape", ["x"], ["s"]), h.make_node("Slice", ["s", "z", "one"], ["b"]),
         h.make_node("Concat", ["b", "m1"], ["shp"], axis=0), h.make_node("Reshape", ["x", "shp"], ["y"]),
         h.make_node("Reshape", ["x", "t2"], ["y2"])]
m = model(nodes, [vi("x", T.FLOAT, ["batch", 3, 4])], [vi("y", 0), vi("y2", 0)],
          [i64("z", [0]), i64("one", [1]), i64("m1", [-1]), i64("t2", [-1, 3, 0])], opset=13)
expect("infer_reshape_cancel", m, {"y": ["batch", 12], "y2": ["batch", 3, 4]})

# split heads and merge them back: [batch, seq, 768] -> [0, 0, 12, 64] -> [0, 0, -1]
m = model([h.make_node("Reshape", ["x", "s1"], ["y"]), h.make_node("Transpose", ["y"], ["t"], perm=[0, 2, 1, 3]),
           h.make_node("Transpose", ["t"], ["u"], perm=[0, 2, 1, 3]), h.make_node("Reshape", ["u", "s2"], ["z"])],
          [vi("x", T.FLOAT, ["batch", "seq", 768])], [vi("z", 0)], [i64("s1", [0, 0, 12, 64]), i64("s2", [0, 0, -1])],
          opset=13)
expect("infer_reshape_heads", m, {"y": ["batch", "seq", 12, 64], "t": ["batch", 12, "seq", 64],
                                  "z": ["batch", "seq", 768]})

# Loop: carried shape stays known, constant trip count gives the scan length
body = h.make_graph([h.make_node("Identity", ["c"], ["co"]), h.make_node("Add", ["v", "one"], ["v2"]),
                     h.make_node("Identity", ["v2"], ["sc"])], "body",
                    [vi("it", T.INT64, []), vi("c", T.BOOL, []), vi("v", T.FLOAT, None)],
                    [vi("co", T.BOOL, None), vi("v2", T.FLOAT, None), vi("sc", T.FLOAT, None)])
m = model([h.make_node("Constant", [], ["M"], value=numpy_helper.from_array(np.array(4, np.int64))),
           h.make_node("Constant", [], ["tr"], value=numpy_helper.from_array(np.array(True))),
           h.make_node("Loop", ["M", "tr", "v0"], ["vf", "scan"], body=body)],
          [vi("v0", T.FLOAT, [2, "n"]), vi("one", T.FLOAT, [1])], [vi("vf", 0), vi("scan", 0)], opset=13)
expect("infer_loop_fixpoint", m, {"vf": [2, "n"], "scan": [None, 2, "n"]})

# sequences: element count tracked through Construct and ConcatFromSequence
m = model([h.make_node("SequenceConstruct", ["a", "a", "a"], ["sq"]),
           h.make_node("ConcatFromSequence", ["sq"], ["y"], axis=0, new_axis=1),
           h.make_node("SequenceEmpty", [], ["e"]), h.make_node("SequenceInsert", ["e", "a"], ["e1"]),
           h.make_node("SequenceAt", ["e1", "z"], ["y1"])],
          [vi("a", T.FLOAT, [2, 5])], [vi("y", 0), vi("y1", 0)], [i64("z", 0)], opset=17)
expect("infer_sequences", m, {"y": [3, 2, 5], "y1": [2, 5]})

# ---- bad input ----

def expect_fail(name, m, pattern, run=None):
    onnx.save(m, name + ".onnx")
    if run is None:
        r = subprocess.run([qm, "infer-shapes", name + ".onnx", name + "_out.onnx"], capture_output=True, text=True)
    else:
        for k, v in run.items():
            np.save(name + "_" + k + ".npy", v)
        args = [qm, "run", name + ".onnx", "-o", name + ".npz", "-q"]
        for k in run:
            args += ["-i", k + "=" + name + "_" + k + ".npy"]
        r = subprocess.run(args, capture_output=True, text=True)
    if r.returncode == 0:
        print("FAIL: %s: succeeded, expected an error" % name)
    elif pattern not in r.stderr or "Sanitizer" in r.stderr or "runtime error" in r.stderr:
        print("FAIL: %s: stderr %r lacks %r" % (name, r.stderr.strip()[-300:], pattern))
    else:
        print("PASS: " + name)

m = model([h.make_node("Reshape", ["x", "s"], ["y"], name="bad_reshape")], [vi("x", T.FLOAT, [2, 3])],
          [vi("y", 0)], [i64("s", [-1, -1])], opset=13)
expect_fail("bad_reshape_two_minus_one", m, "bad_reshape")
m = model([h.make_node("Transpose", ["x"], ["y"], perm=[0, 0], name="bad_perm")], [vi("x", T.FLOAT, [2, 3])],
          [vi("y", 0)], opset=13)
expect_fail("bad_transpose_perm", m, "bad_perm")
m = model([h.make_node("Gather", ["x", "i"], ["y"], name="bad_gather")], [vi("x", T.FLOAT, [2, 3]), vi("i", T.INT64, [1])],
          [vi("y", 0)], opset=13)
expect_fail("bad_gather_index_run", m, "bad_gather", run={"x": data((2, 3), "float32"), "i": np.array([5], np.int64)})
m = model([h.make_node("Slice", ["x", "s", "e", "a", "st"], ["y"], name="bad_slice")], [vi("x", T.FLOAT, [2, 3])],
          [vi("y", 0)], [i64("s", [0]), i64("e", [1]), i64("a", [0]), i64("st", [0])], opset=13)
expect_fail("bad_slice_zero_step", m, "bad_slice")
m = model([h.make_node("Split", ["x"], ["y", "z"], axis=1, name="bad_split")], [vi("x", T.FLOAT, [2, 3])],
          [vi("y", 0), vi("z", 0)], opset=13)
expect_fail("bad_split_uneven", m, "bad_split")
EOF
