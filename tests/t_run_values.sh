#!/bin/sh
# Non-tensor values in the interpreter: sequences, optionals and string
# tensors. Each case is a small model with a test_data_set whose inputs are
# TensorProto / SequenceProto / OptionalProto files and whose expected
# outputs onnxruntime computed (the numpy-formatted Cast to string follows
# ONNX's own test data instead: onnxruntime prints floats with %g-style
# precision); `quantmake run -d SET --compare SET` must match them. Then bad
# inputs: a file of the wrong kind, positions out of range, an empty optional,
# a sequence fed to a tensor operator, each one error naming what is wrong.
ROOT="${ROOT:-$(cd "$(dirname "$0")/.." && pwd)}"
QM="${QUANTMAKE:?QUANTMAKE not set}"
[ -x "$QM" ] || { echo "FAIL: run_values: $QM is not an executable"; exit 1; }
PY="${PY:-$ROOT/.venv/bin/python}"
if ! "$PY" -c 'import numpy, onnx, onnxruntime' 2>/dev/null; then
	echo "SKIP: run_values: $PY lacks numpy/onnx/onnxruntime (sh scripts/venv.sh)"
	exit 0
fi
T=$(mktemp -d /tmp/qmvalues.XXXXXX)
trap 'rm -rf "$T"' EXIT
cd "$T" || exit 1

QM="$QM" "$PY" - <<'EOF'
import os, subprocess
import numpy as np
import onnx
import onnxruntime as ort
from onnx import helper as h, TensorProto as TP, numpy_helper as nh

qm = os.environ["QM"]
FLOAT_SEQ = h.make_sequence_type_proto(h.make_tensor_type_proto(TP.FLOAT, None))

def model(nodes, inputs, outputs, opset=18):
    g = h.make_graph(nodes, "g", inputs, outputs)
    m = h.make_model(g, opset_imports=[h.make_opsetid("", opset)])
    m.ir_version = 8
    return m

def proto(v, name):
    """a TensorProto / SequenceProto / OptionalProto of a python value"""
    if isinstance(v, list):
        return nh.from_list(v, name)
    if isinstance(v, tuple):  # ("opt", value-or-None, elem_type)
        return nh.from_optional(v[1], name, dtype=v[2])
    return nh.from_array(v, name)

def write_set(d, vals, prefix):
    os.makedirs(d, exist_ok=True)
    for k, v in enumerate(vals):
        with open("%s/%s_%d.pb" % (d, prefix, k), "wb") as f:
            f.write(proto(v, "v%d" % k).SerializeToString())

def ort_values(m, feeds):
    s = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    out = s.run(None, feeds)
    res = []
    for o, vi in zip(out, m.graph.output):
        if vi.type.HasField("optional_type"):
            et = (onnx.OptionalProto.SEQUENCE if vi.type.optional_type.elem_type.HasField("sequence_type")
                  else onnx.OptionalProto.TENSOR)
            res.append(("opt", o, et))
        else:
            res.append(o)
    return res

def case(name, m, feeds, want=None):
    """run m on feeds with quantmake; expected outputs from onnxruntime
    unless given"""
    d = "%s/test_data_set_0" % name
    os.makedirs(d, exist_ok=True)
    onnx.save(m, "%s/model.onnx" % name)
    vals = []
    for vi in m.graph.input:
        v = feeds[vi.name]
        if vi.type.HasField("optional_type"):
            et = (onnx.OptionalProto.SEQUENCE if vi.type.optional_type.elem_type.HasField("sequence_type")
                  else onnx.OptionalProto.TENSOR)
            v = ("opt", v, et)
        vals.append(v)
    write_set(d, vals, "input")
    if want is None:
        try:
            want = ort_values(m, feeds)
        except Exception as e:
            print("FAIL: %s: onnxruntime: %s" % (name, str(e).splitlines()[0][:200]))
            return
    write_set(d, want, "output")
    r = subprocess.run([qm, "run", "%s/model.onnx" % name, "-d", d, "--compare", d, "-q"],
                       capture_output=True, text=True)
    if r.returncode:
        print("FAIL: %s: %s" % (name, (r.stderr.strip().splitlines() or ["exit %d" % r.returncode])[-1][:300]))
    else:
        print("PASS: %s" % name)

rng = np.random.default_rng(7)
a = rng.standard_normal((2, 3)).astype(np.float32)
b = rng.standard_normal((4, 3)).astype(np.float32)
c = rng.standard_normal((1, 3)).astype(np.float32)
vi = h.make_tensor_value_info
svi = lambda n: h.make_value_info(n, FLOAT_SEQ)

# construct, insert (negative position), erase, at, length, concat
m = model([
    h.make_node("SequenceConstruct", ["a", "b"], ["s0"]),
    h.make_node("SequenceInsert", ["s0", "c", "m1"], ["s1"]),
    h.make_node("SequenceErase", ["s1", "zero"], ["s2"]),
    h.make_node("SequenceAt", ["s2", "m1"], ["last"]),
    h.make_node("SequenceLength", ["s1"], ["n"]),
    h.make_node("ConcatFromSequence", ["s1"], ["cat"], axis=0)],
    [vi("a", TP.FLOAT, [2, 3]), vi("b", TP.FLOAT, [4, 3]), vi("c", TP.FLOAT, [1, 3]),
     vi("m1", TP.INT64, []), vi("zero", TP.INT32, [])],
    [svi("s2"), vi("last", TP.FLOAT, None), vi("n", TP.INT64, []), vi("cat", TP.FLOAT, None)])
case("seq_ops", m, {"a": a, "b": b, "c": c, "m1": np.array(-1, np.int64), "zero": np.array(0, np.int32)})

# split: by lengths, by a scalar (uneven last piece), into ones without
# keepdims; concat with new_axis
x = rng.standard_normal((3, 7, 2)).astype(np.float32)
m = model([
    h.make_node("SplitToSequence", ["x", "lens"], ["p"], axis=1),
    h.make_node("SplitToSequence", ["x", "three"], ["q"], axis=-2),
    h.make_node("SplitToSequence", ["x"], ["r"], axis=0, keepdims=0),
    h.make_node("ConcatFromSequence", ["r"], ["stack"], axis=-1, new_axis=1),
    h.make_node("ConcatFromSequence", ["p"], ["back"], axis=1)],
    [vi("x", TP.FLOAT, [3, 7, 2]), vi("lens", TP.INT64, [3]), vi("three", TP.INT64, [])],
    [svi("p"), svi("q"), svi("r"), vi("stack", TP.FLOAT, None), vi("back", TP.FLOAT, None)])
case("split_concat", m, {"x": x, "lens": np.array([2, 0, 5], np.int64), "three": np.array(3, np.int64)})

# a sequence input, SequenceMap with a tensor side input, SequenceEmpty
body = h.make_graph([h.make_node("Add", ["e", "t"], ["o"]), h.make_node("Shape", ["e"], ["sh"])], "body",
                    [vi("e", TP.FLOAT, None), vi("t", TP.FLOAT, [3])],
                    [vi("o", TP.FLOAT, None), vi("sh", TP.INT64, [None])])
m = model([
    h.make_node("SequenceMap", ["s", "t"], ["o", "sh"], body=body),
    h.make_node("SequenceEmpty", [], ["empty"], dtype=TP.FLOAT),
    h.make_node("SequenceLength", ["empty"], ["n0"])],
    [svi("s"), vi("t", TP.FLOAT, [3])],
    [svi("o"), h.make_value_info("sh", h.make_sequence_type_proto(h.make_tensor_type_proto(TP.INT64, None))),
     svi("empty"), vi("n0", TP.INT64, [])])
case("seq_map", m, {"s": [a, b, c], "t": np.array([1, 2, 3], np.float32)})

# optionals: of a tensor, empty from a type, get and has
OPT_T = h.make_optional_type_proto(h.make_tensor_type_proto(TP.FLOAT, None))
m = model([
    h.make_node("Optional", ["x"], ["ox"]),
    h.make_node("Optional", [], ["none"], type=h.make_tensor_type_proto(TP.FLOAT, None)),
    h.make_node("OptionalHasElement", ["ox"], ["has"]),
    h.make_node("OptionalHasElement", ["none"], ["hasnt"]),
    h.make_node("OptionalHasElement", ["in"], ["has_in"]),
    h.make_node("OptionalGetElement", ["ox"], ["y"])],
    [vi("x", TP.FLOAT, [2, 3]), h.make_value_info("in", OPT_T)],
    [vi("has", TP.BOOL, []), vi("hasnt", TP.BOOL, []), vi("has_in", TP.BOOL, []), vi("y", TP.FLOAT, [2, 3]),
     h.make_value_info("none", OPT_T)])
case("optional_ops", m, {"x": a, "in": None})

# strings: StringNormalizer (case-insensitive stopwords, UTF-8 case mapping)
# and Cast both ways
words = np.array([["Straße", "été", "naïve", "", "Monday", "ÉTÉ", "x1"]], dtype=object)
m = model([
    h.make_node("StringNormalizer", ["w"], ["up"], case_change_action="UPPER", is_case_sensitive=0,
                stopwords=["ÉTÉ", "monday"], locale="C.UTF-8"),
    h.make_node("StringNormalizer", ["w"], ["low"], case_change_action="LOWER", is_case_sensitive=1,
                stopwords=["Monday"], locale="C.UTF-8")],
    [vi("w", TP.STRING, [1, 7])], [vi("up", TP.STRING, [1, None]), vi("low", TP.STRING, [1, None])])
case("string_normalizer", m, {"w": words})
nums = np.array(["1.5", "-2", "1e-3", "inf", "nan", "12345678"], dtype=object)
m = model([h.make_node("Cast", ["s"], ["f"], to=TP.FLOAT), h.make_node("Cast", ["s"], ["d"], to=TP.DOUBLE),
           h.make_node("Cast", ["i"], ["si"], to=TP.STRING)],
          [vi("s", TP.STRING, [6]), vi("i", TP.INT64, [3])],
          [vi("f", TP.FLOAT, [6]), vi("d", TP.DOUBLE, [6]), vi("si", TP.STRING, [3])])
case("cast_from_string", m, {"s": nums, "i": np.array([-5, 0, 2**40], np.int64)})
# strings from an initializer and a Constant node (both folded at plan time)
g = h.make_graph([
    h.make_node("StringNormalizer", ["init"], ["low"], case_change_action="LOWER", locale="C.UTF-8"),
    h.make_node("Constant", [], ["k"], value=nh.from_array(np.array(["2.5", "-1"], dtype=object), "k")),
    h.make_node("Cast", ["k"], ["kf"], to=TP.FLOAT),
    h.make_node("Add", ["kf", "x"], ["y"])], "g",
    [vi("x", TP.FLOAT, [2])], [vi("low", TP.STRING, [None]), vi("y", TP.FLOAT, [2])],
    [nh.from_array(np.array(["AbC", "ÀÉ"], dtype=object), "init")])
m = h.make_model(g, opset_imports=[h.make_opsetid("", 18)])
m.ir_version = 8
case("string_constants", m, {"x": np.array([1, 2], np.float32)})
f = np.array([0.039187793, 1e-5, 123456.0, 1e20, -0.0, 3.0, 0.1, np.nan, -np.inf], np.float32)
m = model([h.make_node("Cast", ["f"], ["s"], to=TP.STRING)], [vi("f", TP.FLOAT, [9])], [vi("s", TP.STRING, [9])])
case("cast_to_string", m, {"f": f}, want=[np.array([str(v) for v in f], dtype=object)])

# TfIdfVectorizer: every mode, weights, a string pool, a batch
for mode in ("TF", "IDF", "TFIDF"):
    for kind in ("int", "str"):
        pool = [2, 3, 5, 4, 5, 6, 7, 8, 6, 7]  # unigrams 2 3 5 4, bigrams (5 6) (7 8) (6 7)
        attrs = dict(mode=mode, min_gram_length=1, max_gram_length=2, max_skip_count=2,
                     ngram_counts=[0, 4], ngram_indexes=[0, 1, 2, 3, 4, 5, 6],
                     weights=[0.5, 1, 2, 3, 4, 5, 6])
        xi = np.array([[1, 1, 3, 3, 3, 7], [8, 6, 7, 5, 6, 8]], np.int32)
        if kind == "str":
            attrs["pool_strings"] = ["w%d" % p for p in pool]
            xin, et = np.array([["w%d" % v for v in row] for row in xi], dtype=object), TP.STRING
        else:
            attrs["pool_int64s"] = pool
            xin, et = xi, TP.INT32
        m = model([h.make_node("TfIdfVectorizer", ["x"], ["y"], **attrs)],
                  [vi("x", et, [2, 6])], [vi("y", TP.FLOAT, [2, 7])])
        case("tfidf_%s_%s" % (mode.lower(), kind), m, {"x": xin})

# ---- bad inputs: (name, model, input values, pattern the error must match)
def bad(name, m, vals, pat):
    import re
    d = "%s/test_data_set_0" % name
    os.makedirs(d, exist_ok=True)
    onnx.save(m, "%s/model.onnx" % name)
    write_set(d, vals, "input")
    r = subprocess.run([qm, "run", "%s/model.onnx" % name, "-d", d, "-q"], capture_output=True, text=True)
    lines = r.stderr.strip().splitlines()
    if r.returncode == 0:
        print("FAIL: %s: succeeded" % name)
    elif len(lines) != 1 or not re.search(pat, lines[0]):
        print("FAIL: %s: stderr %r does not match %r" % (name, r.stderr[:300], pat))
    else:
        print("PASS: %s" % name)

relu = model([h.make_node("Relu", ["x"], ["y"])], [vi("x", TP.FLOAT, [2, 3])], [vi("y", TP.FLOAT, [2, 3])])
bad("bad_sequence_for_tensor", relu, [[a]], r"input_0\.pb: holds an ONNX SequenceProto where a tensor is expected")
at = model([h.make_node("SequenceAt", ["s", "i"], ["y"], name="pick")], [svi("s"), vi("i", TP.INT64, [])],
           [vi("y", TP.FLOAT, None)])
bad("bad_tensor_for_sequence", at, [a, np.array(0, np.int64)], r"input_0\.pb: not a serialized ONNX SequenceProto")
bad("bad_sequence_at_range", at, [[a, b], np.array(2, np.int64)],
    r"node 'pick' \(SequenceAt\): position 2 is out of range for a sequence of 2 elements")
ins = model([h.make_node("SequenceInsert", ["s", "x"], ["t"], name="ins")], [svi("s"), vi("x", TP.INT64, [2])],
            [svi("t")])
bad("bad_sequence_insert_type", ins, [[a], np.array([1, 2], np.int64)],
    r"node 'ins' \(SequenceInsert\): cannot put a int64 tensor into a sequence of float")
get = model([h.make_node("OptionalGetElement", ["o"], ["y"], name="get")], [h.make_value_info("o", OPT_T)],
            [vi("y", TP.FLOAT, None)])
bad("bad_optional_empty", get, [("opt", None, onnx.OptionalProto.TENSOR)],
    r"node 'get' \(OptionalGetElement\): optional input 'o' is empty")
bad("bad_tensor_for_optional", get, [a], r"input_0\.pb: not a serialized ONNX OptionalProto")
# a sequence reaching an operator that takes tensors (If passes it through)
thn = h.make_graph([h.make_node("Identity", ["s"], ["r"])], "then", [], [svi("r")])
els = h.make_graph([h.make_node("Identity", ["s"], ["r2"])], "else", [], [svi("r2")])
m = model([h.make_node("If", ["c"], ["v"], then_branch=thn, else_branch=els),
           h.make_node("Relu", ["v"], ["y"], name="relu")],
          [svi("s"), vi("c", TP.BOOL, [])], [vi("y", TP.FLOAT, None)])
bad("bad_sequence_to_tensor_op", m, [[a], np.array(True)],
    r"node 'relu' \(Relu\): input 'v' is a sequence, which this operator does not take")
cat = model([h.make_node("ConcatFromSequence", ["s"], ["y"], axis=0, name="cat")], [svi("s")],
            [vi("y", TP.FLOAT, None)])
bad("bad_concat_shapes", cat, [[a, rng.standard_normal((2, 4)).astype(np.float32)]],
    r"node 'cat' \(ConcatFromSequence\): element 1 is float \[2,4\], element 0 float \[2,3\]")
EOF
