#!/bin/sh
# quantize = dynamic of weights held in external data: they are quantized
# while the model is saved (model_defer: src/quant/common.c
# qc_quant_weight_at_save, dynamic.c's LSTM weights, written by model_save
# one tensor at a time), so a big model never holds all its int8 results.
# The same model with inline weights, quantized up front, must give the
# same model: MatMul, a weight two MatMuls share, a weight an excluded
# (float) MatMul still reads, Gemm with transB, Conv with a bias and a
# bidirectional LSTM, for int8 and uint8 weights, per tensor and per
# channel, reduce-range once: every initializer (name, type, dims, bytes),
# every node and quant.json's tensors are the same, the external model's
# float leftovers stay external, and onnxruntime gives both models the same
# outputs.
. "$(dirname "$0")/lib/common.sh"
mktmp
Q=$QUANTMAKE
if ! "$PY" -c 'import onnx, onnxruntime, numpy' 2>/dev/null; then
	fail "dynamic quantization of external weights" "$PY lacks onnx/onnxruntime (run scripts/venv.sh)"
	exit 0
fi
X=$TMPD/x
mkdir -p "$X/rules" "$X/ext"
"$PY" - "$X" <<'EOF'
import sys, numpy as np, onnx
from onnx import helper as h, TensorProto as T, numpy_helper as nh
X = sys.argv[1]
rng = np.random.default_rng(7)
def w(*shape):
    return (rng.standard_normal(shape) / np.sqrt(shape[-1])).astype(np.float32)
H = 8
inits = [nh.from_array(a, n) for n, a in [
    ("w1", w(16, 32)), ("shared", w(32, 32)), ("wex", w(32, 32)), ("wg", w(24, 32)), ("bg", w(24)),
    ("wc", w(6, 24, 1)), ("bc", w(6)), ("W", w(2, 4 * H, 6)), ("R", w(2, 4 * H, H)), ("B", w(2, 8 * H)),
    ("shape", np.array([1, 24, 1], np.int64)), ("shape2", np.array([1, 1, 6], np.int64))]]
nodes = [
    h.make_node("MatMul", ["x", "w1"], ["a"], name="mm1"),
    h.make_node("Relu", ["a"], ["r"], name="relu"),
    h.make_node("MatMul", ["r", "shared"], ["s1"], name="sh1"),
    h.make_node("MatMul", ["s1", "shared"], ["s2"], name="sh2"),
    h.make_node("MatMul", ["s2", "wex"], ["e1"], name="keep_float"),
    h.make_node("MatMul", ["e1", "wex"], ["e2"], name="mm_ex"),
    h.make_node("Gemm", ["e2", "wg", "bg"], ["g"], name="gemm", transB=1),
    h.make_node("Reshape", ["g", "shape"], ["c_in"], name="to_conv"),
    h.make_node("Conv", ["c_in", "wc", "bc"], ["c"], name="conv", kernel_shape=[1]),
    h.make_node("Reshape", ["c", "shape2"], ["seq"], name="to_seq"),
    h.make_node("LSTM", ["seq", "W", "R", "B"], ["y", "yh"], name="lstm", hidden_size=H,
                direction="bidirectional"),
]
g = h.make_graph(nodes, "ext", [h.make_tensor_value_info("x", T.FLOAT, [1, 16])],
                 [h.make_tensor_value_info("y", T.FLOAT, [1, 2, 1, H]), h.make_tensor_value_info("yh", T.FLOAT, [2, 1, H])], inits)
m = h.make_model(g, opset_imports=[h.make_opsetid("", 14)])
m.ir_version = 7
onnx.checker.check_model(m)
onnx.save(m, X + "/inline.onnx")
onnx.save(m, X + "/ext/m.onnx", save_as_external_data=True, location="m.onnx.data", size_threshold=64)
EOF
V="int8:false:false int8:true:false uint8:false:false uint8:true:false int8:true:true"
: > "$X/rules/m.rules"
for v in $V; do
	IFS=: read -r wt pc rr <<EOF
$v
EOF
	for src in inline.onnx ext/m.onnx; do
		n=$wt-$pc-$rr-$(echo "$src" | cut -c1-3)
		printf '[model %s]\nsource = %s\nquantize = dynamic\nquantize.weights = %s\nquantize.per-channel = %s\nquantize.reduce-range = %s\nquantize.exclude-nodes = keep_float\n\n' \
			"$n" "$src" "$wt" "$pc" "$rr" >> "$X/rules/m.rules"
	done
done
if ! "$Q" -C "$X" -j2 > "$TMPD/xlog" 2>&1; then
	fail "dynamic quantization of external weights builds" "$(grep -v '^\[' "$TMPD/xlog" | tail -3)"
	exit 0
fi
for v in $V; do
	n=$(echo "$v" | tr : -)
	if "$PY" - "$X/build" "$n" > "$TMPD/py.log" 2>&1 <<'EOF'
import sys, json, numpy as np, onnx, onnxruntime as ort
from onnx import numpy_helper as nh
B, n = sys.argv[1], sys.argv[2]
pa, pb = "%s/%s-inl/%s-inl.onnx" % (B, n, n), "%s/%s-ext/%s-ext.onnx" % (B, n, n)
raw = onnx.load(pb, load_external_data=False)
a, b = onnx.load(pa), onnx.load(pb)
ta = {t.name: t for t in a.graph.initializer}
tb = {t.name: t for t in b.graph.initializer}
assert sorted(ta) == sorted(tb), (sorted(ta), sorted(tb))
for k in ta:
    assert (ta[k].data_type, list(ta[k].dims)) == (tb[k].data_type, list(tb[k].dims)), k
    assert np.array_equal(nh.to_array(ta[k]), nh.to_array(tb[k])), k
q = [k for k in tb if k.endswith("_quantized")]
assert {"w1_quantized", "shared_quantized", "wex_quantized", "wg_transposed_quantized", "wc_quantized",
        "W_quantized", "R_quantized"} <= set(q), q
assert all(tb[k].data_type in (onnx.TensorProto.INT8, onnx.TensorProto.UINT8) for k in q)
# the float weight the excluded node reads, and the LSTM bias, stay external
ext = {t.name for t in raw.graph.initializer if t.data_location == onnx.TensorProto.EXTERNAL}
assert {"wex", "B"} <= ext and not ext & set(q), ext
assert [(x.op_type, list(x.input), list(x.output)) for x in a.graph.node] == \
       [(x.op_type, list(x.input), list(x.output)) for x in b.graph.node]
ja, jb = (json.load(open("%s/%s-%s/quant.json" % (B, n, s))) for s in ("inl", "ext"))
assert ja["tensors"] == jb["tensors"] and ja["nodes"] == jb["nodes"], "quant.json differs"
x = {"x": np.random.default_rng(1).standard_normal((1, 16)).astype(np.float32)}
so = ort.SessionOptions()
so.log_severity_level = 3
ya = ort.InferenceSession(pa, so, providers=["CPUExecutionProvider"]).run(None, x)
yb = ort.InferenceSession(pb, so, providers=["CPUExecutionProvider"]).run(None, x)
assert all(np.array_equal(p, q) for p, q in zip(ya, yb))
EOF
	then pass "dynamic $n: external weights quantized while saved = inline weights quantized up front (initializers, nodes, quant.json, onnxruntime outputs)"
	else fail "dynamic $n: external weights quantized while saved = inline weights quantized up front" "$(tail -3 "$TMPD/py.log")"; fi
done
