#!/bin/sh
# Subgraphs are folded when they first run (interp.c's plan_finish): an If
# branch a model never takes (silero-vad's 8 kHz network beside the 16 kHz
# one) costs no folding, while everything a plan can refuse is still
# refused before anything runs.
# - two branches that each fold 4 MiB of constants from the main graph's
#   initializer (Slice, Concat, Mul): an interpreter that keeps its
#   weights holds the initializer and the folds of the branch taken only
#   (`run --bench 1 --keep-weights`: 8 MiB for one, 12 for the other, not
#   the 16 of both), and both give onnxruntime's values;
# - a Loop whose body takes each branch of an If in turn (bodies finished
#   in the middle of a run, nested) gives onnxruntime's values, with taps
#   (--trace) the bytes of a run without;
# - a branch never taken that holds an unsupported operator, or reads a
#   value nothing defines, is refused when the model is planned, naming
#   it, as before.
. "$(dirname "$0")/lib/common.sh"
mktmp
Q=$QUANTMAKE
if ! "$PY" -c 'import onnx, onnxruntime, numpy' 2>/dev/null; then
	fail "subgraphs folded when they first run" "$PY lacks onnx/onnxruntime/numpy (run scripts/venv.sh)"
	exit 0
fi
cat > "$TMPD/mk.py" <<'PYEOF'
import sys
import numpy as np
import onnx
from onnx import TensorProto as T, helper as h, numpy_helper as nh
D = sys.argv[1]
r = np.random.default_rng(5)
I64 = lambda name, v: nh.from_array(np.array(v, np.int64), name)

def model(name, nodes, inputs, outputs, inits):
    g = h.make_graph(nodes, name, inputs, outputs, inits)
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 13)])
    m.ir_version = 7
    onnx.save(m, "%s/%s.onnx" % (D, name))

def branch(name, order, scale, extra=None):
    """Concat of W's halves in order (4 MiB folded), times scale (4 MiB
    more when not 1), its first matrix times x"""
    n = [h.make_node("Slice", ["W", name + "s%d" % i, name + "e%d" % i, name + "ax"], [name + "h%d" % i])
         for i in range(2)]
    c = [I64(name + "s0", [0]), I64(name + "e0", [32]), I64(name + "s1", [32]), I64(name + "e1", [64]),
         I64(name + "ax", [0]), I64(name + "f0", [0]), I64(name + "f1", [1]), I64(name + "shape", [128, 128])]
    n.append(h.make_node("Concat", [name + "h%d" % i for i in order], [name + "cat"], axis=0))
    last = name + "cat"
    if scale != 1:
        c.append(nh.from_array(np.array(scale, np.float32), name + "k"))
        n.append(h.make_node("Mul", [last, name + "k"], [name + "mul"]))
        last = name + "mul"
    n += [h.make_node("Slice", [last, name + "f0", name + "f1", name + "ax"], [name + "one"]),
          h.make_node("Reshape", [name + "one", name + "shape"], [name + "mat"]),
          h.make_node("MatMul", ["x", name + "mat"], [name + "y"])]
    n += extra or []
    return h.make_graph(n, name, [], [h.make_tensor_value_info(name + "y", T.FLOAT, None)], c)

W = nh.from_array((r.standard_normal((64, 128, 128)) * 0.1).astype(np.float32), "W")
X = h.make_tensor_value_info("x", T.FLOAT, [2, 128])
SEL = h.make_tensor_value_info("sel", T.INT64, [])
Y = h.make_tensor_value_info("y", T.FLOAT, None)
one = I64("one", 1)
model("lazy", [h.make_node("Equal", ["sel", "one"], ["c"]),
               h.make_node("If", ["c"], ["y"], then_branch=branch("t", (1, 0), 1),
                           else_branch=branch("e", (0, 1), 2.0))], [X, SEL], [Y], [W, one])
x = r.standard_normal((2, 128)).astype(np.float32)
for s in (0, 1):
    np.savez("%s/lazy%d.npz" % (D, s), x=x, sel=np.array(s, np.int64))

# a Loop of 4 iterations whose body takes then, else, then, else
two = I64("two", 2)
body = h.make_graph(
    [h.make_node("Mod", ["i", "two"], ["m"]), h.make_node("Equal", ["m", "zero"], ["even"]),
     h.make_node("If", ["even"], ["v"], then_branch=branch("bt", (1, 0), 1),
                 else_branch=branch("be", (0, 1), 0.5)),
     h.make_node("Identity", ["cond"], ["cond_out"])],
    "body", [h.make_tensor_value_info("i", T.INT64, []), h.make_tensor_value_info("cond", T.BOOL, [])],
    [h.make_tensor_value_info("cond_out", T.BOOL, []), h.make_tensor_value_info("v", T.FLOAT, None)],
    [two, I64("zero", 0)])
model("loop", [h.make_node("Loop", ["n", "t"], ["ys"], body=body)], [X], [h.make_tensor_value_info("ys", T.FLOAT, None)],
      [W, I64("n", 4), nh.from_array(np.array(True), "t")])
np.savez("%s/loop.npz" % D, x=x)

# never taken, and still refused when planned
model("unsupported", [h.make_node("Equal", ["sel", "one"], ["c"]),
                      h.make_node("If", ["c"], ["y"], then_branch=branch("t", (1, 0), 1),
                                  else_branch=branch("e", (0, 1), 1, [
                                      h.make_node("NoSuchOp", ["ey"], ["ez"], name="nosuch")]))],
      [X, SEL], [Y], [W, one])
model("undefined", [h.make_node("Equal", ["sel", "one"], ["c"]),
                    h.make_node("If", ["c"], ["y"], then_branch=branch("t", (1, 0), 1),
                                else_branch=branch("e", (0, 1), 1, [
                                    h.make_node("Add", ["ey", "nowhere"], ["ez"], name="reads_nothing")]))],
      [X, SEL], [Y], [W, one])
PYEOF
"$PY" "$TMPD/mk.py" "$TMPD" 2> "$TMPD/mk.err" || { fail "make the models" "$(tail -3 "$TMPD/mk.err")"; exit 0; }

# ort MODEL IN.npz GOT.npz: GOT's outputs are onnxruntime's values
ort() {
	"$PY" -c "
import sys
import numpy as np
import onnxruntime as ort
s = ort.InferenceSession(sys.argv[1], providers=['CPUExecutionProvider'])
feed = dict(np.load(sys.argv[2]))
want = s.run(None, feed)
got = np.load(sys.argv[3])
for o, w in zip(s.get_outputs(), want):
    g = got[o.name]
    assert g.shape == w.shape and np.allclose(g, w, rtol=1e-4, atol=1e-4), (o.name, g.shape, w.shape)
" "$@" 2> "$TMPD/py.err"
}

for s in 1 0; do
	[ $s = 1 ] && want="7.5 8.5" || want="11.5 12.5"
	if "$Q" run "$TMPD/lazy.onnx" -i "$TMPD/lazy$s.npz" --bench 1 --keep-weights > "$TMPD/b$s" 2>&1 &&
		w=$(sed -n 's/^memory: weights \([0-9.]*\) MiB.*/\1/p' "$TMPD/b$s") && [ -n "$w" ] &&
		awk -v w="$w" -v r="$want" 'BEGIN { split(r, a, " "); exit !(w >= a[1] && w <= a[2]) }'; then
		pass "sel=$s: only the branch taken is folded (weights $w MiB)"
	else
		fail "sel=$s: only the branch taken is folded" "weights ${w:-?} MiB, expected $want: $(tail -n 2 "$TMPD/b$s")"
	fi
	if "$Q" run "$TMPD/lazy.onnx" -i "$TMPD/lazy$s.npz" -o "$TMPD/o$s.npz" -q > "$TMPD/r$s" 2>&1 &&
		ort "$TMPD/lazy.onnx" "$TMPD/lazy$s.npz" "$TMPD/o$s.npz"; then
		pass "sel=$s: onnxruntime's values"
	else
		fail "sel=$s: onnxruntime's values" "$(tail -n 1 "$TMPD/r$s" "$TMPD/py.err")"
	fi
done

if "$Q" run "$TMPD/loop.onnx" -i "$TMPD/loop.npz" -o "$TMPD/loop.out.npz" -q > "$TMPD/l" 2>&1 &&
	"$Q" run "$TMPD/loop.onnx" -i "$TMPD/loop.npz" -o "$TMPD/loop.trace.npz" --trace > "$TMPD/lt" 2>&1 &&
	ort "$TMPD/loop.onnx" "$TMPD/loop.npz" "$TMPD/loop.out.npz" &&
	"$PY" -c "
import sys
import numpy as np
a, b = np.load(sys.argv[1]), np.load(sys.argv[2])
assert a['ys'].tobytes() == b['ys'].tobytes()
" "$TMPD/loop.out.npz" "$TMPD/loop.trace.npz" 2> "$TMPD/py.err"; then
	pass "a Loop taking each branch in turn: onnxruntime's values, the same bytes with taps"
else
	fail "a Loop taking each branch in turn: onnxruntime's values, the same bytes with taps" \
		"$(tail -n 1 "$TMPD/l" "$TMPD/lt" "$TMPD/py.err")"
fi

expect_err "a branch never taken with an unsupported operator is refused when planned" 1 \
	"NoSuchOp.*not supported" "$Q" run "$TMPD/unsupported.onnx" -i "$TMPD/lazy1.npz" --keep-weights
expect_err "a branch never taken reading an undefined value is refused when planned" 1 \
	"reads_nothing.*'nowhere'" "$Q" run "$TMPD/undefined.onnx" -i "$TMPD/lazy1.npz" --keep-weights
