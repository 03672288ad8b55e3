#!/bin/sh
# Quantization inside subgraphs: a model made with the onnx helper API whose
# If branches hold Conv, Gemm (weight in the main graph) and MatMul and whose
# Loop body holds a MatMul, quantized statically (QDQ per tensor and per
# channel, QOperator) and dynamically. Every result passes onnx.checker,
# runs in onnxruntime, our interpreter matches onnxruntime, the SQNR against the
# float model is above 25 dB on random inputs and quant.json lists the body
# nodes, quantized, by their scope ("if/then/conv_t"); a branch calibration
# never took stays float with that reason; exclude-nodes takes scoped names;
# a name two scopes define gets no statistics; quantize.names = compact
# gives the same outputs. QOperator: each body is a quantized region of its
# own; a Conv/Gemm weight of the main graph read in If branches and a Loop
# body is quantized once in the main graph and read from there.
# silero-vad (Conv and LSTM inside an If; bench/fetch-models.sh, skipped
# when not fetchable) quantizes statically and dynamically, runs in both,
# and its SQNR against the float model is printed.
. "$(dirname "$0")/lib/common.sh"
mktmp
Q=$QUANTMAKE
if ! "$PY" -c 'import onnx, onnxruntime, numpy' 2>/dev/null; then
	fail "subgraph quantize tests" "$PY lacks onnx/onnxruntime (run scripts/venv.sh)"
	exit 0
fi

P=$TMPD/p
mkdir -p "$P/rules" "$P/cal" "$P/then"
"$PY" - "$P" <<'EOF'
import sys, numpy as np, onnx
from onnx import helper as h, TensorProto as T, numpy_helper as nh
P = sys.argv[1]
rng = np.random.default_rng(7)
f = lambda *s: (rng.standard_normal(s) * 0.3).astype(np.float32)
N = h.make_node
vi = lambda n, s=None: h.make_tensor_value_info(n, T.FLOAT, s)
# then: Conv (weights in the branch) -> Relu -> Flatten -> Gemm (weight in the main graph)
then = h.make_graph([
    N("Conv", ["x", "wc_t", "bc_t"], ["c_t"], name="conv_t", pads=[1, 1, 1, 1]),
    N("Relu", ["c_t"], ["r_t"], name="relu_t"),
    N("Flatten", ["r_t"], ["f_t"], name="flat_t"),
    N("Gemm", ["f_t", "wg", "bg"], ["y_t"], name="gemm_t", transB=1)], "then", [], [vi("y_t", [1, 10])],
    [nh.from_array(f(4, 3, 3, 3), "wc_t"), nh.from_array(f(4), "bc_t")])
# else: Conv -> Flatten -> MatMul + Add
other = h.make_graph([
    N("Conv", ["x", "wc_e"], ["c_e"], name="conv_e", pads=[1, 1, 1, 1]),
    N("Flatten", ["c_e"], ["f_e"], name="flat_e"),
    N("MatMul", ["f_e", "wm_e"], ["m_e"], name="mm_e"),
    N("Add", ["m_e", "bm_e"], ["y_e"], name="add_e")], "else", [], [vi("y_e", [1, 10])],
    [nh.from_array(f(4, 3, 3, 3), "wc_e"), nh.from_array(f(256, 10) * 0.2, "wm_e"), nh.from_array(f(10), "bm_e")])
# Loop body: h <- Tanh(MatMul(h, wl) + bl), three times
body = h.make_graph([
    N("Identity", ["cond_in"], ["cond_out"], name="cond_id"),
    N("MatMul", ["h_in", "wl"], ["m_l"], name="mm_l"),
    N("Add", ["m_l", "bl"], ["a_l"], name="add_l"),
    N("Tanh", ["a_l"], ["h_out"], name="tanh_l")], "body",
    [h.make_tensor_value_info("i", T.INT64, []), h.make_tensor_value_info("cond_in", T.BOOL, []), vi("h_in", [1, 10])],
    [h.make_tensor_value_info("cond_out", T.BOOL, []), vi("h_out", [1, 10])],
    [nh.from_array(f(10, 10), "wl"), nh.from_array(f(10), "bl")])
g = h.make_graph([
    N("If", ["c"], ["y"], name="if", then_branch=then, else_branch=other),
    N("Loop", ["trip", "true", "y"], ["z"], name="loop", body=body)], "sub",
    [h.make_tensor_value_info("x", T.FLOAT, [1, 3, 8, 8]), h.make_tensor_value_info("c", T.BOOL, [])],
    [vi("z", [1, 10])],
    [nh.from_array(f(10, 256) * 0.2, "wg"), nh.from_array(f(10), "bg"),
     nh.from_array(np.array(3, np.int64), "trip"), nh.from_array(np.array(True), "true")])
m = h.make_model(g, opset_imports=[h.make_opsetid("", 13)])
m.ir_version = 7
onnx.checker.check_model(m, full_check=True)
onnx.save(m, P + "/sub.onnx")
for k in range(16):
    x = rng.standard_normal((1, 3, 8, 8)).astype(np.float32)
    np.savez(P + "/cal/s%02d.npz" % k, x=x, c=np.array(k % 2 == 0))
    if k % 2 == 0:
        np.savez(P + "/then/s%02d.npz" % k, x=x, c=np.array(True))
for k in range(2):
    np.savez(P + "/test%d.npz" % k, x=rng.standard_normal((1, 3, 8, 8)).astype(np.float32), c=np.array(k == 0))
EOF
cat > "$P/rules/m.rules" <<EOF
[model qdq]
source = sub.onnx
quantize = static
quantize.calibration = cal

[model qdqc : qdq]
quantize.names = compact

[model pc]
source = sub.onnx
quantize = static
quantize.calibration = cal
quantize.per-channel = true

[model dyn]
source = sub.onnx
quantize = dynamic

[model then]
source = sub.onnx
quantize = static
quantize.calibration = then

[model ex]
source = sub.onnx
quantize = static
quantize.calibration = cal
quantize.exclude-nodes = if/then/conv_t mm_e

[model qop]
source = sub.onnx
quantize = static
quantize.calibration = cal
quantize.format = qoperator

[model qopthen : qop]
quantize.calibration = then
EOF
if "$Q" -C "$P" -j2 qdq qdqc pc dyn then ex qop qopthen > "$TMPD/log" 2>&1; then pass "static (QDQ, QOperator), per-channel and dynamic quantization of If and Loop bodies build"
else fail "static (QDQ, QOperator), per-channel and dynamic quantization of If and Loop bodies build" "$(grep quantmake: "$TMPD/log")"; fi

# our interpreter on both branches of each result
for mo in qdq qdqc pc dyn then ex qop qopthen; do
	for k in 0 1; do
		"$Q" run "$P/build/$mo/$mo.onnx" -i "$P/test$k.npz" -o "$TMPD/$mo-$k.npz" >/dev/null 2>"$TMPD/run.err" ||
			fail "quantmake runs $mo (test $k)" "$(tail -2 "$TMPD/run.err")"
	done
done

# check MODEL OP...: checker, onnxruntime = ours, SQNR > 25 dB on both branches,
# the ops appear inside the bodies
check_model() {
	"$PY" - "$P" "$TMPD" "$@" <<'EOF'
import sys, json, numpy as np, onnx, onnxruntime as ort
P, D, mo, ops = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
path = "%s/build/%s/%s.onnx" % (P, mo, mo)
m = onnx.load(path)
onnx.checker.check_model(m, full_check=True)
def body_ops(g, inside):
    r = []
    for n in g.node:
        if inside:
            r.append(n.op_type)
        for a in n.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                r += body_ops(a.g, True)
    return r
have = body_ops(m.graph, False)
for op in ops:
    assert op in have, "no %s inside a body: %s" % (op, sorted(set(have)))
fl = ort.InferenceSession(P + "/sub.onnx", providers=["CPUExecutionProvider"])
qs = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
for k in range(2):
    feed = dict(np.load("%s/test%d.npz" % (P, k)))
    a, b = fl.run(None, feed)[0], qs.run(None, feed)[0]
    ours = np.load("%s/%s-%d.npz" % (D, mo, k))["z"]
    sqnr = 10 * np.log10(np.sum(a.astype(np.float64) ** 2) / max(np.sum((a - b).astype(np.float64) ** 2), 1e-30))
    assert sqnr > 25, "%s branch %d: SQNR %.1f dB" % (mo, k, sqnr)
    assert np.abs(ours - b).max() <= 2e-2 * np.abs(b).max() + 1e-6, "%s: ours vs onnxruntime %g" % (mo, np.abs(ours - b).max())
    print("%s branch %d: SQNR %.1f dB" % (mo, k, sqnr))
EOF
}
for spec in "qdq QuantizeLinear DequantizeLinear Conv Gemm MatMul" "qdqc QuantizeLinear DequantizeLinear Conv Gemm MatMul" "pc DequantizeLinear" "dyn MatMulInteger ConvInteger DynamicQuantizeLinear" \
	"qop QuantizeLinear QLinearConv DequantizeLinear"; do
	set -- $spec
	if check_model "$@" > "$TMPD/chk" 2>&1; then pass "$1: checker, onnxruntime = quantmake, SQNR > 25 dB on both branches ($(tr '\n' ' ' < "$TMPD/chk"))"
	else fail "$1: checker, onnxruntime = quantmake, SQNR > 25 dB on both branches" "$(tail -3 "$TMPD/chk")"; fi
done

# compact names in bodies: the same numbers; the main graph's Gemm weight,
# read only in a branch, is dequantized there under the scope's name
if "$PY" - "$P" <<'EOF'
import sys, numpy as np, onnx, onnxruntime as ort
P = sys.argv[1]
run = lambda mo, k: ort.InferenceSession("%s/build/%s/%s.onnx" % (P, mo, mo), providers=["CPUExecutionProvider"]).run(
    None, dict(np.load("%s/test%d.npz" % (P, k))))[0]
for k in range(2):
    assert np.array_equal(run("qdq", k), run("qdqc", k)), k
m = onnx.load(P + "/build/qdqc/qdqc.onnx")
br = {a.name: a.g for a in m.graph.node[0].attribute}
dq = [n for n in br["then_branch"].node if n.op_type == "DequantizeLinear"]
assert "if/then/wg_dq" in [n.output[0] for n in dq] and "wg_q" in {t.name for t in m.graph.initializer}, [list(n.output) for n in dq]
# a weight of the branch itself keeps its name
assert "wc_t" in [n.output[0] for n in dq], [list(n.output) for n in dq]
EOF
then pass "compact names in bodies: same outputs as onnxruntime's names; outer weights dequantized under the scope's name"
else fail "compact names in bodies: same outputs as onnxruntime's names; outer weights dequantized under the scope's name" "see above"; fi

# quant.json: scoped names, quantized bodies, an untaken branch stays float,
# scoped exclusions
if "$PY" - "$P" <<'EOF'
import sys, json
P = sys.argv[1]
st = lambda mo: {n["name"]: n for n in json.load(open("%s/build/%s/quant.json" % (P, mo)))["nodes"]}
q = st("qdq")
for n in ["if/then/conv_t", "if/then/gemm_t", "if/else/conv_e", "if/else/mm_e", "loop/body/mm_l"]:
    assert q[n]["status"] == "quantized", (n, q.get(n))
assert q["if/then/relu_t"]["status"] == "folded", q["if/then/relu_t"]
d = st("dyn")
for n in ["if/then/conv_t", "if/then/gemm_t", "if/else/conv_e", "if/else/mm_e", "loop/body/mm_l"]:
    assert d[n]["status"] == "quantized", (n, d.get(n))
t = st("then")
assert t["if/then/conv_t"]["status"] == "quantized", t["if/then/conv_t"]
for n in ["if/else/conv_e", "if/else/mm_e"]:
    assert t[n]["status"] == "skipped" and "never ran during calibration" in t[n]["reason"], t[n]
e = st("ex")
for n in ["if/then/conv_t", "if/else/mm_e"]:
    assert e[n]["status"] == "skipped" and "exclude-nodes" in e[n]["reason"], e[n]
assert e["if/else/conv_e"]["status"] == "quantized", e["if/else/conv_e"]
EOF
then pass "quant.json: body nodes by scope, quantized; an untaken branch stays float with the reason; scoped and bare exclusions"
else fail "quant.json: body nodes by scope, quantized; an untaken branch stays float with the reason; scoped and bare exclusions" "see above"; fi

# QOperator in bodies: each body is a region of its own (an outer value
# gets its QuantizeLinear inside, named by the scope); a weight of the main
# graph read in a branch is quantized in the main graph; an untaken branch
# stays float with the reason
if "$PY" - "$P" <<'EOF'
import sys, json, onnx
P = sys.argv[1]
st = lambda mo: {n["name"]: n for n in json.load(open("%s/build/%s/quant.json" % (P, mo)))["nodes"]}
q = st("qop")
for n in ["if/then/conv_t", "if/then/gemm_t", "if/else/conv_e", "if/else/mm_e", "loop/body/mm_l"]:
    assert q[n]["status"] == "quantized", (n, q.get(n))
for n in ["if/then/relu_t", "if/else/add_e", "loop/body/add_l"]:
    assert q[n]["status"] == "folded", (n, q.get(n))
m = onnx.load(P + "/build/qop/qop.onnx")
br = {a.name: a.g for a in m.graph.node[0].attribute}
ops = [n.op_type for n in br["else_branch"].node]
assert ops == ["QuantizeLinear", "QLinearConv", "Flatten", "Reshape", "QLinearConv", "Reshape", "DequantizeLinear"], ops
assert br["then_branch"].node[0].output[0] == "if/then/x_quantized", br["then_branch"].node[0]
t = st("qopthen")
assert t["if/then/conv_t"]["status"] == "quantized", t["if/then/conv_t"]
for n in ["if/else/conv_e", "if/else/mm_e"]:
    assert t[n]["status"] == "skipped" and "never ran during calibration" in t[n]["reason"], t[n]
EOF
then pass "QOperator: body nodes quantized by scope, outer values quantized inside the body, untaken branches float with the reason"
else fail "QOperator: body nodes quantized by scope, outer values quantized inside the body, untaken branches float with the reason" "see above"; fi

# QOperator Conv whose weight and bias are initializers of the main graph,
# read in both If branches and in a Loop body: the weight is quantized once,
# in the main graph, each body's QLinearConv reads it from there (its int32
# bias, which depends on the body's input scale, in the body); the float
# weight goes; onnxruntime and our interpreter run it, SQNR > 25 dB
"$PY" - "$P" <<'EOF'
import sys, numpy as np, onnx
from onnx import helper as h, TensorProto as T, numpy_helper as nh
P = sys.argv[1]
rng = np.random.default_rng(11)
f = lambda *s: (rng.standard_normal(s) * 0.3).astype(np.float32)
N = h.make_node
vi = lambda n, s=None: h.make_tensor_value_info(n, T.FLOAT, s)
br = lambda tag, act: h.make_graph([
    N("Conv", ["x", "wo", "bo"], ["c_" + tag], name="conv_" + tag, pads=[1, 1, 1, 1]),
    N(act, ["c_" + tag], ["y_" + tag], name="act_" + tag)], tag, [], [vi("y_" + tag, [1, 3, 8, 8])])
body = h.make_graph([
    N("Identity", ["cond_in"], ["cond_out"], name="cond_id"),
    N("Conv", ["h_in", "wo", "bo"], ["c_l"], name="conv_l", pads=[1, 1, 1, 1]),
    N("Tanh", ["c_l"], ["h_out"], name="tanh_l")], "body",
    [h.make_tensor_value_info("i", T.INT64, []), h.make_tensor_value_info("cond_in", T.BOOL, []), vi("h_in", [1, 3, 8, 8])],
    [h.make_tensor_value_info("cond_out", T.BOOL, []), vi("h_out", [1, 3, 8, 8])])
g = h.make_graph([
    N("If", ["c"], ["y"], name="if", then_branch=br("t", "Sigmoid"), else_branch=br("e", "Tanh")),
    N("Loop", ["trip", "true", "y"], ["z"], name="loop", body=body)], "outer",
    [h.make_tensor_value_info("x", T.FLOAT, [1, 3, 8, 8]), h.make_tensor_value_info("c", T.BOOL, [])],
    [vi("z", [1, 3, 8, 8])],
    [nh.from_array(f(3, 3, 3, 3), "wo"), nh.from_array(f(3), "bo"),
     nh.from_array(np.array(2, np.int64), "trip"), nh.from_array(np.array(True), "true")])
m = h.make_model(g, opset_imports=[h.make_opsetid("", 13)])
m.ir_version = 7
onnx.checker.check_model(m, full_check=True)
onnx.save(m, P + "/outer.onnx")
EOF
printf '\n[model qopouter]\nsource = outer.onnx\nquantize = static\nquantize.calibration = cal\nquantize.format = qoperator\n' >> "$P/rules/m.rules"
ok=1
"$Q" -C "$P" qopouter > "$TMPD/olog" 2>&1 || ok=0
for k in 0 1; do
	[ $ok = 1 ] && { "$Q" run "$P/build/qopouter/qopouter.onnx" -i "$P/test$k.npz" -o "$TMPD/qopouter-$k.npz" >/dev/null 2>>"$TMPD/olog" || ok=0; }
done
if [ $ok = 1 ] && "$PY" - "$P" "$TMPD" > "$TMPD/ochk" 2>&1 <<'EOF'
import sys, json, numpy as np, onnx, onnxruntime as ort
P, D = sys.argv[1], sys.argv[2]
path = P + "/build/qopouter/qopouter.onnx"
m = onnx.load(path)
onnx.checker.check_model(m, full_check=True)
q = {n["name"]: n for n in json.load(open(P + "/build/qopouter/quant.json"))["nodes"]}
for n in ["if/then/conv_t", "if/else/conv_e", "loop/body/conv_l"]:
    assert q[n]["status"] == "quantized", (n, q[n])
inits = {t.name: t for t in m.graph.initializer}
assert "wo" not in inits and inits["wo_quantized"].data_type == onnx.TensorProto.INT8, sorted(inits)
bodies = [a.g for n in m.graph.node for a in n.attribute if a.type == onnx.AttributeProto.GRAPH]
for b in bodies:
    conv = [n for n in b.node if n.op_type == "QLinearConv"]
    assert len(conv) == 1 and conv[0].input[3] == "wo_quantized", [n.op_type for n in b.node]
    assert "wo_quantized" not in {t.name for t in b.initializer}
    assert conv[0].input[8] in {t.name for t in b.initializer}, conv[0].input  # int32 bias in the body
fl = ort.InferenceSession(P + "/outer.onnx", providers=["CPUExecutionProvider"])
qs = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
for k in range(2):
    feed = dict(np.load("%s/test%d.npz" % (P, k)))
    a, b = fl.run(None, feed)[0], qs.run(None, feed)[0]
    ours = np.load("%s/qopouter-%d.npz" % (D, k))["z"]
    db = lambda y: 10 * np.log10(np.sum(a.astype(np.float64) ** 2) / max(np.sum((a - y).astype(np.float64) ** 2), 1e-30))
    sqnr, theirs = db(ours), db(b)
    # onnxruntime's own QLinearConv kernels on AVX2 without VNNI saturate
    # (the precision setting of tests/lib/sitecustomize.py has no kernel
    # for QOperator nodes in subgraphs): ours computes the model exactly
    assert sqnr > 25, "branch %d: SQNR %.1f dB" % (k, sqnr)
    assert theirs > 20, "branch %d: onnxruntime's SQNR %.1f dB" % (k, theirs)
    flags = open("/proc/cpuinfo").read().split()
    if "avx512_vnni" in flags or "avx_vnni" in flags or "avx2" not in flags:
        assert np.abs(ours - b).max() <= 2e-2 * np.abs(b).max() + 1e-6, "ours vs onnxruntime %g" % np.abs(ours - b).max()
    print("branch %d: SQNR %.1f dB (onnxruntime runs it at %.1f dB)" % (k, sqnr, theirs))
EOF
then pass "QOperator Conv reading an outer weight in If branches and a Loop body: quantized once in the main graph, runs in onnxruntime and ours ($(tr '\n' ' ' < "$TMPD/ochk"))"
else fail "QOperator Conv reading an outer weight in If branches and a Loop body: quantized once in the main graph, runs in onnxruntime and ours" "$(cat "$TMPD/olog" "$TMPD/ochk" 2>/dev/null | grep -v '^\[' | tail -3)"; fi

# the untaken branch really stays float: no Q/DQ in it, still runs
if "$PY" - "$P" <<'EOF'
import sys, numpy as np, onnx, onnxruntime as ort
P = sys.argv[1]
m = onnx.load(P + "/build/then/then.onnx")
onnx.checker.check_model(m, full_check=True)
node = [n for n in m.graph.node if n.op_type == "If"][0]
br = {a.name: a.g for a in node.attribute}
assert not [n for n in br["else_branch"].node if "Linear" in n.op_type], [n.op_type for n in br["else_branch"].node]
assert [n for n in br["then_branch"].node if n.op_type == "DequantizeLinear"]
s = ort.InferenceSession(P + "/build/then/then.onnx", providers=["CPUExecutionProvider"])
s.run(None, dict(np.load(P + "/test1.npz")))
EOF
then pass "a branch calibration never took keeps its float nodes and runs"
else fail "a branch calibration never took keeps its float nodes and runs" "see above"; fi

# bad input: an exclude-nodes name no scope has
printf '\n[model bad]\nsource = sub.onnx\nquantize = dynamic\nquantize.exclude-nodes = if/then/nope\n' >> "$P/rules/m.rules"
expect_err "an unknown scoped exclude-nodes name is one clear error" 1 "quantize.exclude-nodes: the model has no node named 'if/then/nope'" \
	"$Q" -C "$P" bad
[ -e "$P/build/bad/bad.onnx" ] && fail "no model is written for a bad exclude-nodes name" "build/bad/bad.onnx exists"

# a name both branches define (not SSA across scopes): no statistics for it,
# said on the log; the rest still quantizes and runs
"$PY" - "$P" <<'EOF'
import sys, numpy as np, onnx
from onnx import helper as h, TensorProto as T, numpy_helper as nh
P = sys.argv[1]
rng = np.random.default_rng(3)
br = lambda tag: h.make_graph([
    h.make_node("Conv", ["x", "w" + tag], ["t"], name="conv"),
    h.make_node("Sigmoid", ["t"], ["y" + tag], name="sig")], tag, [], [h.make_tensor_value_info("y" + tag, T.FLOAT, None)],
    [nh.from_array(rng.standard_normal((2, 3, 3, 3)).astype(np.float32), "w" + tag)])
g = h.make_graph([h.make_node("If", ["c"], ["z"], name="if", then_branch=br("a"), else_branch=br("b"))], "dup",
    [h.make_tensor_value_info("x", T.FLOAT, [1, 3, 8, 8]), h.make_tensor_value_info("c", T.BOOL, [])],
    [h.make_tensor_value_info("z", T.FLOAT, None)])
m = h.make_model(g, opset_imports=[h.make_opsetid("", 13)])
m.ir_version = 7
onnx.save(m, P + "/dup.onnx")
EOF
printf '\n[model dup]\nsource = dup.onnx\nquantize = static\nquantize.calibration = cal\n' >> "$P/rules/m.rules"
if "$Q" -C "$P" dup > "$TMPD/dlog" 2>&1 && grep -q "1 tensor names are defined in several scopes (first: 't'); they get no statistics" "$TMPD/dlog" &&
	"$PY" - "$P" 2>"$TMPD/err" <<'EOF'
import sys, json, numpy as np, onnxruntime as ort
P = sys.argv[1]
s = ort.InferenceSession(P + "/build/dup/dup.onnx", providers=["CPUExecutionProvider"])
s.run(None, dict(np.load(P + "/test0.npz")))
q = {n["name"]: n for n in json.load(open(P + "/build/dup/quant.json"))["nodes"]}
assert q["if/then/conv"]["status"] == "quantized" and q["if/then/sig"]["status"] == "skipped", q
EOF
then pass "a name two scopes define gets no statistics (said on the log); the model still quantizes and runs"
else fail "a name two scopes define gets no statistics (said on the log); the model still quantizes and runs" "$(cat "$TMPD/dlog" "$TMPD/err" | tail -3)"; fi

# ---- verify compares and blames inside If branches (not Loop bodies) ----
printf '\n[model vq]\nsource = sub.onnx\nquantize = static\nquantize.calibration = cal\nverify.data = cal\nverify.min-sqnr = off\n' >> "$P/rules/m.rules"
if "$Q" -C "$P" vq > "$TMPD/vlog" 2>&1 && "$PY" - "$P/build/vq/verify.json" <<'EOF'
import sys, json
j = json.load(open(sys.argv[1]))
acts = {a["name"] for a in j["activations"]}
cands = " ".join(c if isinstance(c, str) else json.dumps(c) for c in j["exclude_candidates"])
assert {"r_t", "f_e"} <= acts, sorted(acts)          # tensors of both branches
assert not {"m_l", "a_l", "h_out"} & acts, sorted(acts)  # one value per Loop iteration: not paired
assert "conv_t" in cands or "gemm_t" in cands or "conv_e" in cands or "mm_e" in cands, cands
EOF
then pass "verify compares tensors inside If branches and names branch nodes to exclude"
else fail "verify compares tensors inside If branches and names branch nodes to exclude" "$(grep -v '^\[' "$TMPD/vlog" | tail -3)"; fi

# ---- silero-vad: every Conv and the LSTM sit inside an If ----
if ! M=$(sh "$ROOT/bench/fetch-models.sh" 2>/dev/null) || [ ! -f "$M/silero/silero_vad.onnx" ]; then
	skip "silero-vad subgraph quantization" "bench/fetch-models.sh could not fetch the model"
	exit 0
fi
S=$TMPD/s
mkdir -p "$S/rules" "$S/cal"
cp "$M/silero/silero_vad.onnx" "$S/silero.onnx"
# calibration chunks (16 kHz, 512 samples) carry the states the float model
# passes from one chunk to the next
"$PY" - "$S" <<'EOF' 2>/dev/null
import sys, numpy as np, onnxruntime as ort
S = sys.argv[1]
s = ort.InferenceSession(S + "/silero.onnx", providers=["CPUExecutionProvider"])
rng = np.random.default_rng(0)
t = np.arange(512) / 16000.
st = np.zeros((2, 1, 128), np.float32)
for k in range(16):
    x = (0.3 * np.sin(2 * np.pi * (200 + 53 * k) * t) * (k % 3 != 0) + 0.05 * rng.standard_normal(512)).astype(np.float32)[None]
    np.savez(S + "/cal/c%02d.npz" % k, input=x, state=st, sr=np.array(16000, np.int64))
    st = s.run(None, {"input": x, "state": st, "sr": np.array(16000, np.int64)})[1]
x = (0.2 * np.sin(2 * np.pi * 440 * t) + 0.05 * rng.standard_normal(512)).astype(np.float32)[None]
np.savez(S + "/test.npz", input=x, state=st, sr=np.array(16000, np.int64))
EOF
cat > "$S/rules/m.rules" <<EOF
[model ss]
source = silero.onnx
preprocess = default
quantize = static
quantize.calibration = cal

[model sd]
source = silero.onnx
preprocess = default
quantize = dynamic
EOF
if "$Q" -C "$S" -j2 > "$TMPD/slog" 2>&1; then pass "silero-vad quantizes statically and dynamically (bodies)"
else fail "silero-vad quantizes statically and dynamically (bodies)" "$(grep quantmake: "$TMPD/slog")"; fi
for mo in ss sd; do
	"$Q" run "$S/build/$mo/$mo.onnx" -i "$S/test.npz" -o "$TMPD/s-$mo.npz" >/dev/null 2>"$TMPD/run.err" ||
		fail "quantmake runs silero $mo" "$(tail -2 "$TMPD/run.err")"
done
if "$PY" - "$S" "$TMPD" > "$TMPD/schk" 2>&1 <<'EOF'
import sys, json, numpy as np, onnx, onnxruntime as ort
S, D = sys.argv[1], sys.argv[2]
fl = ort.InferenceSession(S + "/silero.onnx", providers=["CPUExecutionProvider"])
feed = dict(np.load(S + "/test.npz"))
for mo, op in [("ss", "Conv"), ("sd", "Conv")]:
    path = "%s/build/%s/%s.onnx" % (S, mo, mo)
    onnx.checker.check_model(onnx.load(path), full_check=True)
    nodes = json.load(open("%s/build/%s/quant.json" % (S, mo)))["nodes"]
    inside = [n for n in nodes if "/" in n["name"] and n["status"] == "quantized" and n["op"] == op]
    assert len(inside) >= 4, (mo, len(inside))
    qs = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    ours = np.load("%s/s-%s.npz" % (D, mo))
    a, b = fl.run(None, feed), qs.run(None, feed)
    for i, name in enumerate(["output", "stateN"]):
        d = np.abs(ours[name] - b[i]).max()
        assert d <= 5e-2 * np.abs(b[i]).max() + 1e-3, "%s %s: ours vs onnxruntime %g" % (mo, name, d)
    # SQNR vs float over 40 chunks, the state carried by the float model
    rng = np.random.default_rng(1)
    t = np.arange(512) / 16000.
    st = np.zeros((2, 1, 128), np.float32)
    sig, err = [0.0, 0.0], [0.0, 0.0]
    for k in range(40):
        x = (0.3 * np.sin(2 * np.pi * (150 + 37 * k) * t) + 0.05 * rng.standard_normal(512)).astype(np.float32)[None]
        f = {"input": x, "state": st, "sr": np.array(16000, np.int64)}
        a, b = fl.run(None, f), qs.run(None, f)
        st = a[1]
        for i in range(2):
            sig[i] += np.sum(a[i].astype(np.float64) ** 2)
            err[i] += np.sum((a[i] - b[i]).astype(np.float64) ** 2)
    db = [10 * np.log10(sig[i] / max(err[i], 1e-30)) for i in range(2)]
    assert db[1] > 0, (mo, db)
    print("silero %s: %d body Convs quantized, SQNR vs float: output %.1f dB, stateN %.1f dB" % (mo, len(inside), db[0], db[1]))
EOF
then pass "silero-vad: checker, onnxruntime = quantmake, body Convs quantized ($(grep silero "$TMPD/schk" | tr '\n' ' '))"
else fail "silero-vad: checker, onnxruntime = quantmake, body Convs quantized" "$(grep -v W:onnxruntime "$TMPD/schk" | tail -3)"; fi
