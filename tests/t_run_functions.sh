#!/bin/sh
# Model-local functions (ModelProto.functions) in the interpreter: models
# built with the onnx helper API — attribute references given by the caller,
# defaulted (attribute_proto) or neither (dropped), a function calling
# another with a left-out optional input and an unused output, an If inside
# a function (its branches reading the body's values and an attribute
# reference), functions called from If and Loop bodies, a function called
# twice without node names beside a value already named like its prefix, a
# body importing opset 11 in an opset-18 model, and torch's cnn_functions —
# run by `quantmake run` and compared with onnxruntime (rtol 1e-5); value
# names inside calls are CALL/name, unique per call. A whole static build
# (with verify) of a model with a function: the call is expanded and the
# layers inside are quantized (calibrated under the same CALL/name names),
# no function is left, the quantized model runs in onnxruntime and in
# `quantmake run` alike, and verify runs both models. Recursion and calls of functions the model does not define
# are one clear error. infer-shapes types the same calls, attribute
# references in If branches of a body included (onnx's inference agrees),
# and refuses a reference of the wrong type as the interpreter does.
. "$(dirname "$0")/lib/common.sh"
mktmp
Q=$QUANTMAKE
if ! "$PY" -c 'import onnx, onnxruntime, numpy' 2>/dev/null; then
	fail "functions" "$PY lacks onnx/onnxruntime/numpy (sh scripts/venv.sh)"
	exit 0
fi
M=$TMPD/m
mkdir -p "$M"
cat > "$TMPD/gen.py" <<'PYEOF'
import sys, os, numpy as np, onnx
from onnx import helper as h, TensorProto as T, numpy_helper as nh
out = sys.argv[1]
rng = np.random.default_rng(7)
vi = h.make_tensor_value_info
F = onnx.AttributeProto
def model(name, fns, nodes, ins, outs, inits=(), opset=18):
    g = h.make_graph(nodes, name, ins, outs, list(inits))
    m = h.make_model(g, opset_imports=[h.make_opsetid("", opset), h.make_opsetid("local", 1)], functions=fns)
    m.ir_version = 9
    onnx.save(m, os.path.join(out, name + ".onnx"))
def ref(node, attr, target, t):
    node.attribute.append(h.make_attribute_ref(attr, t) if target == attr else _ref(attr, target, t))
    return node
def _ref(attr, target, t):
    a = h.make_attribute_ref(attr, t); a.ref_attr_name = target; return a
# attributes: alpha given by the caller, scale defaulted (attribute_protos),
# beta neither (dropped: LeakyRelu's own 0.01); called twice without node
# names, beside a graph value already named like the first call's prefix
n_scale = h.make_node("Constant", [], ["s"], name="k")
n_scale.attribute.append(_ref("value_float", "scale", F.FLOAT))
n_a = h.make_node("LeakyRelu", ["m"], ["a"], name="lra"); n_a.attribute.append(_ref("alpha", "alpha", F.FLOAT))
n_b = h.make_node("LeakyRelu", ["X"], ["b"], name="lrb"); n_b.attribute.append(_ref("alpha", "beta", F.FLOAT))
attrfn = h.make_function("local", "AttrFn", ["X"], ["Y"], [
    n_scale, h.make_node("Mul", ["X", "s"], ["m"], name="mul"), n_a, n_b,
    h.make_node("Add", ["a", "b"], ["Y"], name="add")],
    [h.make_opsetid("", 18)], attributes=["alpha", "beta"],
    attribute_protos=[h.make_attribute("scale", 2.0)])
model("fn_attr", [attrfn], [
    h.make_node("Neg", ["x"], ["AttrFn/m"], name="neg"),
    h.make_node("AttrFn", ["AttrFn/m"], ["y1"], domain="local", alpha=0.2),
    h.make_node("AttrFn", ["y1"], ["y2"], domain="local", alpha=0.3, scale=-1.5),
], [vi("x", T.FLOAT, [2, 5])], [vi("y1", T.FLOAT, [2, 5]), vi("y2", T.FLOAT, [2, 5])])
# nested: Outer passes its attribute k on to Inner (called twice), Inner
# leaves an optional input out and Outer ignores Inner's second output
n_in = h.make_node("LeakyRelu", ["A"], ["l"], name="leaky"); n_in.attribute.append(_ref("alpha", "alpha", F.FLOAT))
inner = h.make_function("local", "Inner", ["A", "lo", "hi"], ["B", "C"], [
    n_in, h.make_node("Clip", ["l", "lo", "hi"], ["B"], name="clip"),
    h.make_node("Neg", ["A"], ["C"], name="neg")], [h.make_opsetid("", 18)], attributes=["alpha"])
c1 = h.make_node("Inner", ["X", "", "H"], ["i1", ""], domain="local", name="first"); c1.attribute.append(_ref("alpha", "k", F.FLOAT))
c2 = h.make_node("Inner", ["i1", "L", ""], ["i2", "unused"], domain="local", name="second"); c2.attribute.append(_ref("alpha", "k", F.FLOAT))
outer = h.make_function("local", "Outer", ["X", "L", "H"], ["Y"], [
    c1, c2, h.make_node("Sub", ["i2", "i1"], ["Y"], name="sub")],
    [h.make_opsetid("", 18), h.make_opsetid("local", 1)], attributes=["k"])
model("fn_nested", [inner, outer], [
    h.make_node("Outer", ["x", "lo", "hi"], ["y"], domain="local", name="outer", k=0.25),
], [vi("x", T.FLOAT, [3, 4])], [vi("y", T.FLOAT, [3, 4])],
   [nh.from_array(np.array(-0.5, np.float32), "lo"), nh.from_array(np.array(0.7, np.float32), "hi")])
# If inside a function (branches read the function's inputs and body
# values, one uses an attribute reference), and a function called from
# inside an If body and a Loop body of the main graph
then_g = h.make_graph([h.make_node("Mul", ["d", "W"], ["t"], name="then_mul")], "then", [], [vi("t", T.FLOAT, None)])
en = h.make_node("LeakyRelu", ["d"], ["e"], name="else_lr"); en.attribute.append(_ref("alpha", "slope", F.FLOAT))
else_g = h.make_graph([en], "else", [], [vi("e", T.FLOAT, None)])
iffn = h.make_function("local", "IfFn", ["X", "W", "C"], ["Y"], [
    h.make_node("Sub", ["X", "W"], ["d"], name="d"),
    h.make_node("If", ["C"], ["Y"], then_branch=then_g, else_branch=else_g, name="if")],
    [h.make_opsetid("", 18)], attributes=["slope"])
sq = h.make_function("local", "Sq", ["X"], ["Y"], [h.make_node("Mul", ["X", "X"], ["Y"], name="sq")], [h.make_opsetid("", 18)])
ib_then = h.make_graph([h.make_node("Sq", ["x"], ["q"], domain="local", name="in_then")], "ithen", [], [vi("q", T.FLOAT, None)])
ib_else = h.make_graph([h.make_node("Neg", ["x"], ["q2"], name="in_else")], "ielse", [], [vi("q2", T.FLOAT, None)])
loop_body = h.make_graph([
    h.make_node("Identity", ["cond"], ["cond_out"], name="lb_cond"),
    h.make_node("Sq", ["acc"], ["sqacc"], domain="local", name="lb_call"),
    h.make_node("Add", ["sqacc", "x"], ["acc_out"], name="lb_add")], "body",
    [vi("it", T.INT64, []), vi("cond", T.BOOL, []), vi("acc", T.FLOAT, None)],
    [vi("cond_out", T.BOOL, []), vi("acc_out", T.FLOAT, None)])
model("fn_if", [iffn, sq], [
    h.make_node("IfFn", ["x", "w", "c"], ["y1"], domain="local", name="call_t", slope=0.5),
    h.make_node("IfFn", ["x", "w", "nc"], ["y2"], domain="local", name="call_f", slope=0.5),
    h.make_node("Not", ["c"], ["nc"], name="not"),
    h.make_node("If", ["c"], ["y3"], then_branch=ib_then, else_branch=ib_else, name="main_if"),
    h.make_node("Mul", ["x", "tenth"], ["x0"], name="x0"),
    h.make_node("Loop", ["trip", "", "x0"], ["y4"], body=loop_body, name="main_loop"),
], [vi("x", T.FLOAT, [2, 3]), vi("c", T.BOOL, [])],
   [vi("y1", T.FLOAT, [2, 3]), vi("y2", T.FLOAT, [2, 3]), vi("y3", T.FLOAT, [2, 3]), vi("y4", T.FLOAT, [2, 3])],
   [nh.from_array(rng.standard_normal((2, 3)).astype(np.float32), "w"),
    nh.from_array(np.array(3, np.int64), "trip"), nh.from_array(np.array(0.1, np.float32), "tenth")])
# attribute references inside subgraphs of a body that decide shapes:
# Flatten's axis in both branches of an If and in an If nested in its else
# branch; the first call gives ax, the second leaves the default (1)
def flat(x, y, nm):
    n = h.make_node("Flatten", [x], [y], name=nm); n.attribute.append(_ref("axis", "ax", F.INT)); return n
in_then = h.make_graph([flat("X", "it", "in_then")], "in_then", [], [vi("it", T.FLOAT, None)])
in_else = h.make_graph([h.make_node("Neg", ["X"], ["ng"], name="in_neg"), flat("ng", "ie", "in_else")],
                       "in_else", [], [vi("ie", T.FLOAT, None)])
rthen = h.make_graph([flat("X", "t", "then_flat")], "rthen", [], [vi("t", T.FLOAT, None)])
relse = h.make_graph([h.make_node("If", ["D"], ["e"], then_branch=in_then, else_branch=in_else, name="inner_if")],
                     "relse", [], [vi("e", T.FLOAT, None)])
flatif = h.make_function("local", "FlatIf", ["X", "C", "D"], ["Y"], [
    h.make_node("If", ["C"], ["f"], then_branch=rthen, else_branch=relse, name="outer_if"),
    h.make_node("Relu", ["f"], ["Y"], name="relu")],
    [h.make_opsetid("", 18)], attributes=["ax"], attribute_protos=[h.make_attribute("ax", 1)])
model("fn_if_ref", [flatif], [
    h.make_node("FlatIf", ["x", "c", "d"], ["y1"], domain="local", name="given", ax=2),
    h.make_node("FlatIf", ["x", "nc", "d"], ["y2"], domain="local", name="defaulted"),
    h.make_node("Not", ["c"], ["nc"], name="not"),
], [vi("x", T.FLOAT, [2, 3, 4, 5]), vi("c", T.BOOL, []), vi("d", T.BOOL, [])],
   [vi("y1", T.FLOAT, [6, 20]), vi("y2", T.FLOAT, [2, 60])])
# refused: the caller gives an integer where the If branch's reference
# declares a float
bad_else = h.make_graph([en], "else", [], [vi("e", T.FLOAT, None)])
badfn = h.make_function("local", "BadFn", ["X", "W", "C"], ["Y"], [
    h.make_node("Sub", ["X", "W"], ["d"], name="d"),
    h.make_node("If", ["C"], ["Y"], then_branch=then_g, else_branch=bad_else, name="if")],
    [h.make_opsetid("", 18)], attributes=["slope"])
model("fn_badref", [badfn], [h.make_node("BadFn", ["x", "x", "c"], ["y"], domain="local", name="call", slope=2)],
      [vi("x", T.FLOAT, [2]), vi("c", T.BOOL, [])], [vi("y", T.FLOAT, [2])])
# a body at opset 11 in a model at 18: ReduceSum's axes and Split's split
# are attributes there (inputs since 13)
old = h.make_function("local", "Old", ["X"], ["Y", "Z"], [
    h.make_node("ReduceSum", ["X"], ["r"], axes=[1], keepdims=1, name="rsum"),
    h.make_node("Split", ["X"], ["p", "q"], axis=1, split=[1, 3], name="split"),
    h.make_node("Mul", ["q", "r"], ["Y"], name="mul"),
    h.make_node("Identity", ["p"], ["Z"], name="id")], [h.make_opsetid("", 11)])
# the same body at opset 18: onnxruntime runs bodies at the model's opset,
# so this is its reference for fn_old
old18 = h.make_function("local", "Old", ["X"], ["Y", "Z"], [
    h.make_node("Constant", [], ["ax1"], value_ints=[1], name="ax1"),
    h.make_node("Constant", [], ["sp"], value_ints=[1, 3], name="sp"),
    h.make_node("ReduceSum", ["X", "ax1"], ["r"], keepdims=1, name="rsum"),
    h.make_node("Split", ["X", "sp"], ["p", "q"], axis=1, name="split"),
    h.make_node("Mul", ["q", "r"], ["Y"], name="mul"),
    h.make_node("Identity", ["p"], ["Z"], name="id")], [h.make_opsetid("", 18)])
for nm, fn in (("fn_old", old), ("fn_old_ref", old18)):
  model(nm, [fn], [
    h.make_node("Old", ["x"], ["y", "z"], domain="local", name="old"),
    h.make_node("ReduceSum", ["y", "ax"], ["s"], keepdims=0, name="rs18"),
  ], [vi("x", T.FLOAT, [2, 4])], [vi("s", T.FLOAT, [2]), vi("z", T.FLOAT, [2, 1])],
     [nh.from_array(np.array([1], np.int64), "ax")])
# refused: A calls B calls A
ra = h.make_function("local", "RecA", ["X"], ["Y"], [h.make_node("RecB", ["X"], ["Y"], domain="local", name="a_calls_b")],
                     [h.make_opsetid("", 18), h.make_opsetid("local", 1)])
rb = h.make_function("local", "RecB", ["X"], ["Y"], [
    h.make_node("Relu", ["X"], ["r"], name="relu"),
    h.make_node("RecA", ["r"], ["Y"], domain="local", name="b_calls_a")],
    [h.make_opsetid("", 18), h.make_opsetid("local", 1)])
model("fn_rec", [ra, rb], [h.make_node("RecA", ["x"], ["y"], domain="local", name="top")],
      [vi("x", T.FLOAT, [2])], [vi("y", T.FLOAT, [2])])
# refused: a call of a function the model does not define
model("fn_missing", [sq], [h.make_node("Nope", ["x"], ["y"], domain="local", name="nope")],
      [vi("x", T.FLOAT, [2])], [vi("y", T.FLOAT, [2])])
PYEOF
cat > "$TMPD/cmp.py" <<'PYEOF'
import sys, os, subprocess, numpy as np, onnx, onnxruntime as ort
# cmp.py QUANTMAKE MODEL NAME [REFERENCE_MODEL]: outputs of `quantmake run
# MODEL` against onnxruntime's on MODEL (or on an equivalent REFERENCE_MODEL)
qm, path, name = sys.argv[1:4]
refpath = sys.argv[4] if len(sys.argv) > 4 else path
tmp = os.path.dirname(path)
m = onnx.load(path)
inits = {t.name for t in m.graph.initializer}
ins = [i for i in m.graph.input if i.name not in inits]
rng = np.random.default_rng(3)
def fail(why):
    print(f"FAIL: {name}: {why}"); sys.exit(0)
try:
    so = ort.SessionOptions(); so.log_severity_level = 4
    s = ort.InferenceSession(refpath, so, providers=["CPUExecutionProvider"])
except Exception as e:
    fail(f"onnxruntime refuses the model: {str(e)[:200]}")
for trial in range(2):
    feed = {}
    for i in ins:
        tt = i.type.tensor_type
        if tt.elem_type == onnx.TensorProto.BOOL:
            feed[i.name] = np.array(trial == 0)
        else:
            feed[i.name] = rng.standard_normal([d.dim_value for d in tt.shape.dim]).astype(np.float32)
    ref = s.run(None, feed)
    args = [qm, "run", path, "-q", "-o", os.path.join(tmp, "out.npz")]
    for k, (n, a) in enumerate(feed.items()):
        f = os.path.join(tmp, f"in{k}.npy"); np.save(f, a); args += ["-i", f"{n}={f}"]
    r = subprocess.run(args, capture_output=True, text=True)
    if r.returncode:
        fail(f"quantmake run: {r.stderr.strip()[-300:]}")
    z = np.load(os.path.join(tmp, "out.npz"))
    for o, want in zip(m.graph.output, ref):
        got = z[o.name]
        if got.shape != want.shape: fail(f"output {o.name}: shape {got.shape}, onnxruntime {want.shape}")
        if not np.allclose(got, want, rtol=1e-5, atol=1e-6): fail(f"output {o.name}: max diff {np.abs(got - want).max()}")
print(f"PASS: {name}")
PYEOF
if "$PY" "$TMPD/gen.py" "$M"; then
	pass "models with local functions built with the onnx helper API"
else
	fail "models with local functions built with the onnx helper API" "gen.py failed"
fi

# ---- outputs against onnxruntime ----
"$PY" "$TMPD/cmp.py" "$Q" "$M/fn_attr.onnx" "attribute references: given, defaulted, dropped; a function called twice"
"$PY" "$TMPD/cmp.py" "$Q" "$M/fn_nested.onnx" "a function calling another, optional input and output left out"
"$PY" "$TMPD/cmp.py" "$Q" "$M/fn_if.onnx" "an If inside a function; functions called from If and Loop bodies"
"$PY" "$TMPD/cmp.py" "$Q" "$M/fn_old.onnx" "a body at opset 11 in an opset-18 model" "$M/fn_old_ref.onnx"
"$PY" "$TMPD/cmp.py" "$Q" "$M/fn_if_ref.onnx" "attribute references in nested If branches of a body: given and defaulted"
cp "$ROOT/tests/models/cnn_functions.onnx" "$M/"
"$PY" "$TMPD/cmp.py" "$Q" "$M/cnn_functions.onnx" "cnn_functions (torch export with nested functions)"

# ---- shape inference of the same calls, against onnx's ----
# infer-shapes binds each call's attributes, in subgraphs of the body too,
# as the interpreter does: every tensor typed, onnx's inference agrees
# (tests/infer_crosscheck.py), and fn_if_ref's outputs have the shapes its
# axis (given: 2, defaulted: 1) gives, which a dropped reference would not
for nm in fn_attr fn_nested fn_if fn_if_ref; do
	if ! "$PY" "$ROOT/tests/infer_crosscheck.py" STRIP "$M/$nm.onnx" "$TMPD/$nm.in.onnx" 2> "$TMPD/err"; then
		fail "infer-shapes of $nm" "cannot strip: $(tail -n1 "$TMPD/err")"
	elif ! "$Q" infer-shapes "$TMPD/$nm.in.onnx" "$TMPD/$nm.out.onnx" > "$TMPD/out" 2> "$TMPD/err"; then
		fail "infer-shapes of $nm" "$(head -c 300 "$TMPD/err")"
	elif ! grep -Eq ': ([0-9]+)/\1 tensors typed, \1 with a shape' "$TMPD/out"; then
		fail "infer-shapes of $nm types and shapes every tensor" "$(cat "$TMPD/out")"
	else
		pass "infer-shapes of $nm types and shapes every tensor"
		"$PY" "$ROOT/tests/infer_crosscheck.py" CHECK "$nm" "$TMPD/$nm.in.onnx" "$TMPD/$nm.out.onnx" | grep -v '^crosscheck '
	fi
done
"$PY" - "$TMPD/fn_if_ref.out.onnx" <<'PYEOF'
import sys, onnx
name = "infer-shapes: attribute references in If branches of a body decide the calls' shapes"
try:
    m = onnx.load(sys.argv[1])
    got = {o.name: [d.dim_value for d in o.type.tensor_type.shape.dim] for o in m.graph.output}
except Exception as e:
    print(f"FAIL: {name}: {str(e)[:200]}"); sys.exit(0)
print(f"PASS: {name}" if got == {"y1": [6, 20], "y2": [2, 60]} else f"FAIL: {name}: {got}")
PYEOF

# ---- names inside calls ----
"$PY" -c "import numpy as np; np.save('$TMPD/x25.npy', np.ones((2, 5), np.float32)); np.save('$TMPD/x2.npy', np.ones(2, np.float32))"
if "$Q" run "$M/fn_attr.onnx" -i "x=$TMPD/x25.npy" --trace -q -o "$TMPD/o.npz" > "$TMPD/trace" 2>&1; then
	names=$(sed -n 's/^tap: \([^ ]*\) .*/\1/p' "$TMPD/trace" | sort | tr '\n' ' ')
	want="AttrFn/m AttrFn_1/a AttrFn_1/b AttrFn_1/m AttrFn_1/s AttrFn_2/a AttrFn_2/b AttrFn_2/m AttrFn_2/s x y1 y2 "
	[ "$names" = "$want" ] && pass "two unnamed calls get their own prefixes, clear of the graph's names" ||
		fail "two unnamed calls get their own prefixes, clear of the graph's names" "tapped: $names"
	# LeakyRelu's own alpha (0.01) when the reference is neither given nor defaulted
	grep -q '^tap: AttrFn_1/b float \[2,5\] sum=-0.1$' "$TMPD/trace" &&
		pass "an attribute reference with neither value nor default is dropped" ||
		fail "an attribute reference with neither value nor default is dropped" "$(grep AttrFn_1/b "$TMPD/trace")"
else
	fail "two unnamed calls get their own prefixes, clear of the graph's names" "$(tail -2 "$TMPD/trace")"
fi

# ---- refused ----
expect_err "a recursive function is one error naming the cycle" 1 \
	"^quantmake: .*node 'top' \(RecA\): function 'local.RecA' is recursive \(local.RecA -> local.RecB -> local.RecA, called as 'top/a_calls_b/b_calls_a'\): recursion cannot be inlined$" \
	"$Q" run "$M/fn_rec.onnx" -i "x=$TMPD/x2.npy"
[ "$(wc -l < "$TMPD/.stderr")" -eq 1 ] && pass "the recursion error is one line" ||
	fail "the recursion error is one line" "$(cat "$TMPD/.stderr")"
bad="node 'call' \\(BadFn\\): function 'local.BadFn': node 'if' \\(If\\), attribute 'else_branch': node 'else_lr' \\(LeakyRelu\\): attribute 'alpha' refers to attribute 'slope' of function 'local.BadFn', which has another type than the reference declares$"
"$PY" -c "import numpy as np; np.save('$TMPD/c.npy', np.array(False))"
expect_err "a reference in an If branch of a body to an attribute of another type: run refuses it" 1 \
	"^quantmake: .*$bad" "$Q" run "$M/fn_badref.onnx" -i "x=$TMPD/x2.npy" -i "c=$TMPD/c.npy"
expect_err "the same reference: infer-shapes refuses it with the same words" 1 \
	"^quantmake: .*$bad" "$Q" infer-shapes "$M/fn_badref.onnx" "$TMPD/bad.onnx"
[ ! -e "$TMPD/bad.onnx" ] && pass "the refused inference writes nothing" ||
	fail "the refused inference writes nothing" "$TMPD/bad.onnx exists"
expect_err "a call of a function the model does not define is not supported" 1 \
	"local.Nope-1 is not supported \(node 'nope'\)" "$Q" run "$M/fn_missing.onnx" -i "x=$TMPD/x2.npy"

# ---- a whole static build (and verify) of a model with a function ----
P=$TMPD/proj
mkdir -p "$P/rules" "$P/calib"
cat > "$TMPD/mk.py" <<'PYEOF'
import sys, numpy as np, onnx
from onnx import helper as h, TensorProto as T, numpy_helper as nh
rng = np.random.default_rng(5)
vi = h.make_tensor_value_info
F = onnx.AttributeProto
lr = h.make_node("LeakyRelu", ["c"], ["Y"], name="lr")
a = h.make_attribute_ref("alpha", F.FLOAT); lr.attribute.append(a)
block = h.make_function("local", "Block", ["X", "W"], ["Y"], [
    h.make_node("Conv", ["X", "W"], ["c"], pads=[1, 1, 1, 1], name="conv"), lr],
    [h.make_opsetid("", int(sys.argv[3]) if len(sys.argv) > 3 else 17)], attributes=["alpha"])
g = h.make_graph([
    h.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1], name="conv1"),
    h.make_node("Relu", ["c1"], ["r1"], name="relu1"),
    h.make_node("Block", ["r1", "w2"], ["blk"], domain="local", name="block", alpha=0.1),
    h.make_node("Flatten", ["blk"], ["f"], name="flat"),
    h.make_node("MatMul", ["f", "w3"], ["y"], name="fc"),
], "fnq", [vi("x", T.FLOAT, [1, 3, 8, 8])], [vi("y", T.FLOAT, [1, 10])], [
    nh.from_array(rng.standard_normal((4, 3, 3, 3)).astype(np.float32) * 0.3, "w1"),
    nh.from_array(rng.standard_normal(4).astype(np.float32) * 0.1, "b1"),
    nh.from_array(rng.standard_normal((4, 4, 3, 3)).astype(np.float32) * 0.3, "w2"),
    nh.from_array(rng.standard_normal((256, 10)).astype(np.float32) * 0.1, "w3")])
m = h.make_model(g, opset_imports=[h.make_opsetid("", 17), h.make_opsetid("local", 1)], functions=[block])
m.ir_version = 8
if len(sys.argv) == 3:  # a body at another opset than the model's fails the checker
    onnx.checker.check_model(m)
onnx.save(m, sys.argv[1])
for i in range(4):
    np.save(f"{sys.argv[2]}/s{i}.npy", rng.standard_normal((1, 3, 8, 8)).astype(np.float32))
PYEOF
"$PY" "$TMPD/mk.py" "$P/model.onnx" "$P/calib"
printf '[model m]\nsource = model.onnx\nquantize = static\nquantize.calibration = calib\nverify.data = calib\nverify.min-sqnr = 20\n' > "$P/rules/m.rules"
if "$Q" -C "$P" > "$TMPD/logb" 2>&1; then
	pass "static build of a model calling a local function"
else
	fail "static build of a model calling a local function" "$(grep -v '^\[' "$TMPD/logb" | tail -3)"
fi
"$PY" - "$P" <<'PYEOF'
import sys, json, numpy as np, onnx, onnxruntime as ort
P = sys.argv[1]
def say(ok, what, why=""):
    print(f"PASS: {what}" if ok else f"FAIL: {what}: {why}")
try:
    a, b = onnx.load(f"{P}/model.onnx"), onnx.load(f"{P}/build/m/m.onnx")
    q = json.load(open(f"{P}/build/m/quant.json"))
except Exception as e:
    say(False, "the build's model and quant.json", str(e)[:200]); sys.exit(0)
st = {n["name"]: n for n in q["nodes"]}
say(st.get("block/conv", {}).get("status") == "quantized" and "block" not in st,
    "quant.json: the layers inside the call are quantized under CALL/name", str(q["nodes"]))
say(st.get("conv1", {}).get("status") == "quantized" and st.get("fc", {}).get("status") == "quantized",
    "quant.json: the nodes around the call are quantized", str(q["nodes"]))
say(len(b.functions) == 0 and not any(n.domain == "local" for n in b.graph.node)
    and sum(n.op_type == "QuantizeLinear" for n in b.graph.node) >= 3,
    "the quantized model has the call expanded, with no function left", str([n.op_type for n in b.graph.node]))
try:
    onnx.checker.check_model(b, full_check=True)
    say(True, "the expanded quantized model passes onnx.checker")
except Exception as e:
    say(False, "the expanded quantized model passes onnx.checker", str(e)[:200])
x = np.load(f"{P}/calib/s1.npy")
so = ort.SessionOptions(); so.log_severity_level = 4
try:
    fa = ort.InferenceSession(f"{P}/model.onnx", so, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    fb = ort.InferenceSession(f"{P}/build/m/m.onnx", so, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    err = np.abs(fa - fb).max() / np.abs(fa).max()
    say(err < 0.1, "the quantized model runs in onnxruntime, close to the float one", f"relative error {err}")
except Exception as e:
    say(False, "the quantized model runs in onnxruntime, close to the float one", str(e)[:200])
try:
    v = json.load(open(f"{P}/build/m/verify.json"))
    say(v["passed"] and v["samples"] == 4 and v["outputs"][0]["sqnr_db"] > 20,
        "verify runs both models (with the function) in the interpreter", str(v["outputs"]))
except Exception as e:
    say(False, "verify runs both models (with the function) in the interpreter", str(e)[:200])
PYEOF
"$PY" "$TMPD/cmp.py" "$Q" "$P/build/m/m.onnx" "the quantized model with a function: interpreter and onnxruntime agree"

# a body at another opset than the model's (which onnx.checker refuses, and
# onnxruntime; quantmake's interpreter runs it) is not expanded, since its
# nodes would change meaning: the call stays float, the rest is quantized
"$PY" "$TMPD/mk.py" "$P/model.onnx" "$P/calib" 13
if "$Q" -C "$P" > "$TMPD/logc" 2>&1 && "$PY" -c "
import json, onnx, sys
q = {n['name']: n['status'] for n in json.load(open('$P/build/m/quant.json'))['nodes']}
b = onnx.load('$P/build/m/m.onnx')
assert q['block'] == 'skipped' and q['conv1'] == 'quantized' and q['fc'] == 'quantized', q
assert len(b.functions) == 1 and any(n.op_type == 'Block' for n in b.graph.node)
" 2>"$TMPD/err"; then
	pass "a function at another opset than the model's stays a float call"
else
	fail "a function at another opset than the model's stays a float call" "$(tail -1 "$TMPD/err") $(grep -v '^\[' "$TMPD/logc" | tail -2)"
fi
