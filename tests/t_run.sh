#!/bin/sh
# `quantmake run` and the interpreter core (src/exec/): results against
# numpy, bad inputs named precisely, planning errors before anything runs,
# subgraphs with outer-scope values, taps, buffer reuse across runs, and a
# cross-check against onnxruntime on random inputs.
ROOT="${ROOT:-$(cd "$(dirname "$0")/.." && pwd)}"
QM="${QUANTMAKE:?QUANTMAKE not set}"
[ -x "$QM" ] || { echo "FAIL: run: $QM is not an executable"; exit 1; }
PY="${PY:-$ROOT/.venv/bin/python}"
if ! "$PY" -c 'import numpy, onnx' 2>/dev/null; then
	echo "SKIP: run: $PY lacks numpy/onnx (sh scripts/venv.sh)"
	exit 0
fi
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
cd "$T" || exit 1

"$PY" - <<'EOF' || { echo "FAIL: run-setup: python could not build the models"; exit 0; }
import numpy as np, onnx, os
from onnx import helper as h, TensorProto as TP, numpy_helper as nh
def save(g, name, opset=17):
    m = h.make_model(g, opset_imports=[h.make_opsetid("", opset)])
    m.ir_version = 8
    onnx.save(m, name)
W = np.array([1.0, -2.0, 0.5], dtype=np.float32)
# Y = Relu(X + W) * 2, Z = X + W
g = h.make_graph([
    h.make_node("Add", ["X", "W"], ["Z"], name="add"),
    h.make_node("Relu", ["Z"], ["R"], name="relu"),
    h.make_node("Mul", ["R", "two"], ["Y"], name="mul")],
    "g", [h.make_tensor_value_info("X", TP.FLOAT, ["N", 3])],
    [h.make_tensor_value_info("Y", TP.FLOAT, ["N", 3]), h.make_tensor_value_info("Z", TP.FLOAT, ["N", 3])],
    [nh.from_array(W, "W"), nh.from_array(np.array(2, dtype=np.float32), "two")])
save(g, "add.onnx")
x = np.array([[0.5, 1.0, -1.0], [2.0, 3.0, 4.0]], dtype=np.float32)
np.save("x.npy", x)
np.save("x_i64.npy", x.astype(np.int64))
np.save("x_shape.npy", np.zeros((2, 4), np.float32))
np.save("x_rank.npy", np.zeros((3,), np.float32))
os.makedirs("set/test_data_set_0")
open("set/test_data_set_0/input_0.pb", "wb").write(nh.from_array(x, "X").SerializeToString())
open("set/test_data_set_0/output_0.pb", "wb").write(nh.from_array(np.maximum(x + W, 0) * 2, "Y").SerializeToString())
open("set/test_data_set_0/output_1.pb", "wb").write(nh.from_array(x + W, "Z").SerializeToString())
os.makedirs("bad/test_data_set_0")
open("bad/test_data_set_0/input_0.pb", "wb").write(nh.from_array(x, "X").SerializeToString())
y = np.maximum(x + W, 0) * 2
y[1, 2] += 0.01
open("bad/test_data_set_0/output_0.pb", "wb").write(nh.from_array(y, "Y").SerializeToString())
open("bad/test_data_set_0/output_1.pb", "wb").write(nh.from_array(x + W, "Z").SerializeToString())
# initializer shorter than its dims
t = nh.from_array(W, "W"); t.dims[:] = [4]
g2 = h.make_graph([h.make_node("Add", ["X", "W"], ["Y"])], "g2",
    [h.make_tensor_value_info("X", TP.FLOAT, [4])], [h.make_tensor_value_info("Y", TP.FLOAT, [4])], [t])
save(g2, "short_init.onnx")
# unsupported operator, after a supported one: nothing may run
g3 = h.make_graph([h.make_node("Relu", ["X"], ["A"]), h.make_node("NoSuchOp", ["A"], ["Y"], name="weird")], "g3",
    [h.make_tensor_value_info("X", TP.FLOAT, [3])], [h.make_tensor_value_info("Y", TP.FLOAT, [3])])
save(g3, "unsupported.onnx")
# a cycle
g4 = h.make_graph([h.make_node("Add", ["X", "B"], ["A"], name="n1"), h.make_node("Relu", ["A"], ["B"], name="n2"),
    h.make_node("Identity", ["A"], ["Y"])], "g4",
    [h.make_tensor_value_info("X", TP.FLOAT, [3])], [h.make_tensor_value_info("Y", TP.FLOAT, [3])])
save(g4, "cycle.onnx")
# an undefined value
g5 = h.make_graph([h.make_node("Add", ["X", "nowhere"], ["Y"], name="lost")], "g5",
    [h.make_tensor_value_info("X", TP.FLOAT, [3])], [h.make_tensor_value_info("Y", TP.FLOAT, [3])])
save(g5, "undefined.onnx")
# nodes out of order, an output that is an input, an output that is an initializer
g6 = h.make_graph([h.make_node("Relu", ["A"], ["Y"], name="second"), h.make_node("Neg", ["X"], ["A"], name="first")],
    "g6", [h.make_tensor_value_info("X", TP.FLOAT, [3])],
    [h.make_tensor_value_info("Y", TP.FLOAT, [3]), h.make_tensor_value_info("X", TP.FLOAT, [3]),
     h.make_tensor_value_info("W", TP.FLOAT, [3])], [nh.from_array(W, "W")])
save(g6, "unsorted.onnx")
np.save("x3.npy", np.array([1.0, -2.0, 3.0], np.float32))
# If whose branches read outer-scope values (X and W, and C from a node)
then_g = h.make_graph([h.make_node("Add", ["C", "W"], ["t_out"])], "then", [],
    [h.make_tensor_value_info("t_out", TP.FLOAT, [3])])
else_g = h.make_graph([h.make_node("Sub", ["C", "W"], ["e_out"])], "else", [],
    [h.make_tensor_value_info("e_out", TP.FLOAT, [3])])
g7 = h.make_graph([h.make_node("Neg", ["X"], ["C"]),
    h.make_node("If", ["cond"], ["Y"], then_branch=then_g, else_branch=else_g)], "g7",
    [h.make_tensor_value_info("X", TP.FLOAT, [3]), h.make_tensor_value_info("cond", TP.BOOL, [])],
    [h.make_tensor_value_info("Y", TP.FLOAT, [3])], [nh.from_array(W, "W")])
save(g7, "if.onnx")
np.save("true.npy", np.array(True)); np.save("false.npy", np.array(False))
# Loop: 4 iterations of acc = acc * X + W (X and W from the outer scope)
body = h.make_graph([h.make_node("Identity", ["cond_in"], ["cond_out"]),
    h.make_node("Mul", ["acc_in", "X"], ["m"]), h.make_node("Add", ["m", "W"], ["acc_out"])], "body",
    [h.make_tensor_value_info("i", TP.INT64, []), h.make_tensor_value_info("cond_in", TP.BOOL, []),
     h.make_tensor_value_info("acc_in", TP.FLOAT, [3])],
    [h.make_tensor_value_info("cond_out", TP.BOOL, []), h.make_tensor_value_info("acc_out", TP.FLOAT, [3])])
g8 = h.make_graph([h.make_node("Loop", ["trip", "", "acc0"], ["Y"], body=body)], "g8",
    [h.make_tensor_value_info("X", TP.FLOAT, [3])], [h.make_tensor_value_info("Y", TP.FLOAT, [3])],
    [nh.from_array(W, "W"), nh.from_array(np.array(4, np.int64), "trip"),
     nh.from_array(np.ones(3, np.float32), "acc0")])
save(g8, "loop.onnx")
# constant folding: c = Constant, cw = c * W and Y = X + cw; only Add runs
g10 = h.make_graph([h.make_node("Constant", [], ["c"], value=nh.from_array(np.array([3.0], np.float32))),
    h.make_node("Mul", ["c", "W"], ["cw"]), h.make_node("Add", ["X", "cw"], ["Y"])], "g10",
    [h.make_tensor_value_info("X", TP.FLOAT, [3])], [h.make_tensor_value_info("Y", TP.FLOAT, [3]),
     h.make_tensor_value_info("cw", TP.FLOAT, [3])], [nh.from_array(W, "W")])
save(g10, "fold.onnx")
# an unsupported operator inside a Loop body is found before anything runs
badbody = h.make_graph([h.make_node("Identity", ["cond_in"], ["cond_out"]),
    h.make_node("NoSuchOp", ["acc_in"], ["acc_out"], name="deep")], "badbody",
    [h.make_tensor_value_info("i", TP.INT64, []), h.make_tensor_value_info("cond_in", TP.BOOL, []),
     h.make_tensor_value_info("acc_in", TP.FLOAT, [3])],
    [h.make_tensor_value_info("cond_out", TP.BOOL, []), h.make_tensor_value_info("acc_out", TP.FLOAT, [3])])
g11 = h.make_graph([h.make_node("Relu", ["X"], ["R"]), h.make_node("Loop", ["trip", "", "R"], ["Y"], body=badbody, name="outer")],
    "g11", [h.make_tensor_value_info("X", TP.FLOAT, [3])], [h.make_tensor_value_info("Y", TP.FLOAT, [3])],
    [nh.from_array(np.array(2, np.int64), "trip")])
save(g11, "badloop.onnx")
# a longer chain (buffer reuse): 40 alternating Neg/Relu/Add
nodes, prev = [], "X"
for i in range(40):
    op = ["Neg", "Relu", "Add"][i % 3]
    nodes.append(h.make_node(op, [prev, prev] if op == "Add" else [prev], ["v%d" % i]))
    prev = "v%d" % i
g9 = h.make_graph(nodes + [h.make_node("Identity", [prev], ["Y"])], "g9",
    [h.make_tensor_value_info("X", TP.FLOAT, [64, 64])], [h.make_tensor_value_info("Y", TP.FLOAT, [64, 64])])
save(g9, "chain.onnx")
np.save("big.npy", np.random.RandomState(0).randn(64, 64).astype(np.float32))
v = np.random.RandomState(0).randn(64, 64).astype(np.float32)
for i in range(40):
    v = [-v, np.maximum(v, 0), v + v][i % 3]
np.save("chain_expected.npy", v)
EOF

run() { "$QM" run "$@" > out.txt 2> err.txt; }
expect() { # name pattern file
	if grep -q -- "$2" "$3"; then echo "PASS: $1"; else echo "FAIL: $1: expected '$2', got: $(head -c 300 "$3")"; fi
}
fails() { # name code pattern: previous run exited with code and one error line matching
	rc=$?
	if [ $rc -ne "$2" ]; then
		echo "FAIL: $1: exit $rc, expected $2 ($(head -c 200 err.txt))"
	elif [ "$(wc -l < err.txt)" -ne 1 ]; then
		echo "FAIL: $1: expected one error line, got: $(head -c 300 err.txt)"
	else
		expect "$1" "$3" err.txt
	fi
}
pycheck() { # name python-expression-printing-ok
	r=$("$PY" -c "import numpy as np; $2" 2>&1)
	if [ "$r" = ok ]; then echo "PASS: $1"; else echo "FAIL: $1: $r"; fi
}

run add.onnx -i X=x.npy -o out.npz
if [ $? -eq 0 ]; then echo "PASS: run-basic"; else echo "FAIL: run-basic: $(cat err.txt)"; fi
expect run-prints-outputs "^Y: float \[2,3\]" out.txt
pycheck run-output-values "z = np.load('out.npz'); x = np.load('x.npy'); W = np.array([1, -2, .5], np.float32); print('ok' if np.array_equal(z['Y'], np.maximum(x + W, 0) * 2) and np.array_equal(z['Z'], x + W) else 'bad %r' % dict(z))"
run add.onnx -i x.npy -q; [ $? -eq 0 ] && [ ! -s out.txt ] && echo "PASS: run-positional-input" || echo "FAIL: run-positional-input: $(cat err.txt)"
run add.onnx -d set/test_data_set_0 --compare set/test_data_set_0
[ $? -eq 0 ] && expect run-compare-match "outputs match" out.txt || echo "FAIL: run-compare-match: $(cat err.txt)"
run add.onnx -d bad/test_data_set_0 --compare bad/test_data_set_0
fails run-compare-mismatch 1 "mismatch: output 'Y': element 5 \[1,2\]: got 9, expected 9.01"
run add.onnx -d bad/test_data_set_0 --compare bad/test_data_set_0 --rtol 1e-2
[ $? -eq 0 ] && expect run-compare-rtol "outputs match" out.txt || echo "FAIL: run-compare-rtol: $(cat err.txt)"
run add.onnx -d bad/test_data_set_0 --compare bad/test_data_set_0 --atol x; fails run-compare-bad-tol 2 "--atol needs a non-negative number, got 'x'"
run add.onnx -i Xx=x.npy;      fails input-wrong-name 2 "no input 'Xx' (did you mean 'X'?)"
run add.onnx -i X=x_i64.npy;   fails input-wrong-dtype 2 "input 'X': expected float \[N,3\], got int64 \[2,3\]"
run add.onnx -i X=x_shape.npy; fails input-wrong-shape 2 "input 'X': expected float \[N,3\], got float \[2,4\]"
run add.onnx -i X=x_rank.npy;  fails input-wrong-rank 2 "input 'X': expected float \[N,3\], got float \[3\]"
run add.onnx;                  fails input-missing 2 "missing input 'X' (float \[N,3\])"
run add.onnx -i X=x.npy -i X=x.npy; fails input-twice 2 "input 'X' is given twice"
run short_init.onnx -i X=x3.npy; fails initializer-short 1 "initializer 'W'\|tensor 'W'"
run unsupported.onnx -i X=x3.npy --trace
fails unsupported-op 1 "NoSuchOp-17 is not supported (node 'weird')"
if grep -q "^tap:" out.txt; then echo "FAIL: unsupported-before-run: a node ran: $(head -1 out.txt)"; else echo "PASS: unsupported-before-run"; fi
run badloop.onnx -i X=x3.npy --trace
fails unsupported-in-subgraph 1 "node 'outer' (Loop), attribute 'body': NoSuchOp-17 is not supported (node 'deep')"
run cycle.onnx -i X=x3.npy;     fails graph-cycle 1 "cycle through node 'n[12]'"
run undefined.onnx -i X=x3.npy; fails graph-undefined 1 "node 'lost' (Add): input 'nowhere'"
run --check add.onnx unsupported.onnx
[ $? -eq 1 ] && expect check-mode "unsupported.onnx: NoSuchOp-17 is not supported" out.txt || echo "FAIL: check-mode: exit $?"
expect check-mode-supported "add.onnx: supported" out.txt
run unsorted.onnx -i X=x3.npy -o u.npz
pycheck graph-unsorted-and-passthrough "z = np.load('u.npz'); x = np.load('x3.npy'); print('ok' if np.array_equal(z['Y'], np.maximum(-x, 0)) and np.array_equal(z['X'], x) and np.array_equal(z['W'], [1, -2, .5]) else 'bad %r' % dict(z))"
run add.onnx -i X=x.npy --trace
if [ "$(grep -c '^tap:' out.txt)" -eq 4 ] && grep -q '^tap: X float \[2,3\]' out.txt &&
	grep -q '^tap: R float \[2,3\]' out.txt; then
	echo "PASS: taps"; else echo "FAIL: taps: $(cat out.txt err.txt | head -c 300)"; fi
run if.onnx -i X=x3.npy -i cond=true.npy -o t.npz
run if.onnx -i X=x3.npy -i cond=false.npy -o f.npz
pycheck subgraph-if-outer-scope "x = np.load('x3.npy'); W = np.array([1, -2, .5], np.float32); t = np.load('t.npz')['Y']; f = np.load('f.npz')['Y']; print('ok' if np.allclose(t, -x + W) and np.allclose(f, -x - W) else 'bad %r %r' % (t, f))"
run loop.onnx -i X=x3.npy -o l.npz
pycheck subgraph-loop-outer-scope "x = np.load('x3.npy'); W = np.array([1, -2, .5], np.float32); a = np.ones(3, np.float32)
for i in range(4): a = a * x + W
y = np.load('l.npz')['Y']; print('ok' if np.allclose(y, a) else 'bad %r vs %r' % (y, a))"
run fold.onnx -s x3.npy -s x3.npy --trace
if [ $? -eq 0 ] && [ "$(grep -c '^tap: cw float \[3\] sum=-1.5' out.txt)" -eq 2 ] &&
	[ "$(grep -c '^tap: c float \[1\] sum=3' out.txt)" -eq 2 ]; then
	echo "PASS: folded-constants-tapped-every-run"
else
	echo "FAIL: folded-constants-tapped-every-run: $(cat out.txt err.txt | head -c 400)"
fi
run fold.onnx -i X=x3.npy -o fold.npz --bench 3 || echo "FAIL: folded-constants-run: $(cat err.txt)"
pycheck folded-constants-values "z = np.load('fold.npz'); x = np.load('x3.npy'); W = np.array([1, -2, .5], np.float32); print('ok' if np.allclose(z['Y'], x + 3 * W) and np.allclose(z['cw'], 3 * W) else 'bad %r' % dict(z))"
run chain.onnx -i X=big.npy -o c.npz --bench 5
[ $? -eq 0 ] && expect bench-latency "latency: mean .* ms, p50 .* ms, p90 .* ms over 5 runs" out.txt || echo "FAIL: bench-latency: $(cat err.txt)"
# 40 nodes of 16 KiB each: with lifetimes, at most a few are alive at once
pk=$(sed -n 's/^memory: .*peak live activations \([0-9.]*\) MiB/\1/p' out.txt)
if [ -n "$pk" ] && awk -v p="$pk" 'BEGIN { exit !(p <= 0.05) }'; then
	echo "PASS: lifetimes-free-dead-tensors"
else
	echo "FAIL: lifetimes-free-dead-tensors: peak live activations '$pk' MiB, expected <= 0.05 (3 x 16 KiB)"
fi
pycheck buffer-reuse-chain "y = np.load('c.npz')['Y']; e = np.load('chain_expected.npy'); print('ok' if np.array_equal(y, e) else 'bad max diff %g' % abs(y - e).max())"
# same thread count, same bytes: two processes with 2 threads
if [ -f gen/cnn.onnx ] || "$PY" "$ROOT/bench/interp-models.py" gen > py.txt 2>&1; then
	"$PY" -c "import numpy as np; np.save('cnn_x.npy', np.random.RandomState(3).randn(4, 3, 32, 32).astype(np.float32))"
	run gen/cnn.onnx -i cnn_x.npy -t 2 -o d1.npz && run gen/cnn.onnx -i cnn_x.npy -t 2 -o d2.npz
	if cmp -s d1.npz d2.npz; then echo "PASS: deterministic-threads"; else echo "FAIL: deterministic-threads: two runs with -t 2 differ $(cat err.txt)"; fi
else
	echo "FAIL: deterministic-threads: cannot build the CNN: $(tail -1 py.txt)"
fi
# samples: an npz with an extra (label) array, a test data set; taps gather ranges
"$PY" -c "import numpy as np; x = np.load('x.npy'); np.savez('withlabels.npz', X=x * 2, labels=np.arange(2))"
run add.onnx -s withlabels.npz -s set/test_data_set_0 --stats
if [ $? -eq 0 ] && grep -q "^sample 1: Y float \[2,3\]" out.txt; then echo "PASS: samples-run"; else echo "FAIL: samples-run: $(cat out.txt err.txt | head -c 300)"; fi
# the range of Z = X + W over both samples (2X and X), as numpy computes it
"$PY" -c "
import numpy as np
x = np.load('x.npy'); W = np.array([1, -2, .5], np.float32)
z = np.concatenate([(2 * x + W).ravel(), (x + W).ravel()])
print('Z float %.6g %.6g' % (z.min(), z.max()))" > want.txt
got=$(awk '$1 == "Z" { printf "%s %s %s %s\n", $1, $2, $3, $4 }' out.txt)
if [ "$got" = "$(cat want.txt)" ]; then echo "PASS: samples-stats-tap"; else echo "FAIL: samples-stats-tap: got '$got', expected '$(cat want.txt)'"; fi
# a named tensor for the second input, an unnamed one for the first
"$PY" -c "import numpy as np; np.savez('mixed.npz', np.load('x3.npy'), cond=np.array(True))"
run if.onnx -s mixed.npz -s mixed.npz --stats
if [ $? -eq 0 ] && grep -q "^sample 1: Y float \[3\]" out.txt && grep -q "^cond  *bool  *1  *1 " out.txt; then
	echo "PASS: samples-mixed-named-positional"
else
	echo "FAIL: samples-mixed-named-positional: $(cat out.txt err.txt | head -c 400)"
fi
"$PY" -c "import numpy as np; np.savez('nolabels.npz', foo=np.zeros(3))"
run add.onnx -s nolabels.npz; fails samples-no-input 1 "sample 0: the sample names none of the model's inputs (first tensor: 'foo'"
run nosuch.onnx;   fails missing-model 2 "nosuch.onnx"
run add.onnx --bogus; fails bad-option 2 "unknown option '--bogus'"

# cross-check with onnxruntime (within 1e-4 relative) on random inputs: the
# CNN and transformer of bench/interp-models.py, the real models shipped in
# the magika and silero-vad wheels (bench/fetch-models.sh), and a few ONNX
# test models, at batch 1 and 3
if "$PY" -c 'import onnxruntime' 2>/dev/null; then
	D=/usr/share/libonnx-testdata/data
	ORT="$ROOT/bench/interp-ort.py"
	"$PY" "$ROOT/bench/interp-models.py" gen > py.txt 2>&1 || echo "FAIL: ort-models: $(tail -1 py.txt)"
	models="gen/cnn.onnx gen/transformer.onnx $D/pytorch-converted/test_Conv2d_groups/model.onnx
		$D/pytorch-operator/test_operator_maxpool/model.onnx $D/pytorch-converted/test_Embedding/model.onnx
		$D/pytorch-converted/test_Conv3d_dilated/model.onnx"
	if M=$(sh "$ROOT/bench/fetch-models.sh" 2> py.txt); then
		models="$models $M/magika/model.onnx $M/silero/silero_vad.onnx $M/silero/silero_vad_16k_op15.onnx $M/silero/silero_vad_op18_ifless.onnx"
	else
		echo "SKIP: ort-real-models: cannot fetch magika/silero-vad wheels ($(tail -1 py.txt))"
	fi
	: > list.txt
	for m in $models; do
		n=$(basename "$m" .onnx)
		[ "$n" = model ] && n=$(basename "$(dirname "$m")")
		[ -f "$m" ] || { echo "SKIP: ort-$n: $m not found"; continue; }
		high=4
		case $n in magika*) high=257 ;; esac
		echo "$m 1 $T/ort-$n-b1 $high" >> list.txt
		echo "$m 3 $T/ort-$n-b3 $high" >> list.txt
	done
	"$PY" "$ORT" prepare list.txt 2>&1
	# real inputs: the digits example's MLP on its test set, magika on the
	# bytes of a real source file
	"$PY" - "$ROOT" "$T" "${M:-}" <<'EOF' >> list.txt 2> py.txt || echo "FAIL: ort-real-inputs: $(tail -1 py.txt)"
import sys, subprocess, numpy as np
root, t, m = sys.argv[1:4]
subprocess.check_call([sys.executable, root + "/examples/digits/export.py", root + "/examples/digits/weights.npz", t + "/digits.onnx"])
np.savez(t + "/ort-digits-real-in.npz", input=np.load(root + "/examples/digits/test.npz")["input"])
print(t + "/digits.onnx 0 " + t + "/ort-digits-real 0")
if m:
    b = np.frombuffer(open(root + "/src/exec/interp.c", "rb").read()[:4096], np.uint8).astype(np.int32)
    x = np.stack([b[:2048], b[2048:4096]])  # two real 2048-byte windows
    np.savez(t + "/ort-magika-real-in.npz", bytes=x)
    print(m + "/magika/model.onnx 0 " + t + "/ort-magika-real 0")
EOF
	for p in digits-real magika-real; do
		m=$(awk -v p="$T/ort-$p" '$3 == p { print $1 }' list.txt)
		[ -n "$m" ] && { "$PY" "$ORT" run "$m" "$T/ort-$p-in.npz" "$T/ort-$p-ort.npz" 2>&1 || echo "FAIL: ort-$p: onnxruntime failed"; }
	done
	while read -r m b p high; do
		[ -f "$p-in.npz" ] || continue
		run "$m" -i "$p-in.npz" -o "$p-qm.npz" -t 2 || echo "FAIL: ${p##*/}: $(cat err.txt)"
	done < list.txt
	"$PY" "$ORT" check list.txt 1e-4 2>&1
else
	echo "SKIP: ort-crosscheck: onnxruntime not installed"
fi
exit 0
