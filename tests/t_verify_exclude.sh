#!/bin/sh
# verify.auto-exclude takes out one tensor's step per round: on a model
# whose noisiest activation passes through a chain of quantized movers
# (Reshape, Transpose, Reshape) between two MatMuls, round 1 leaves the
# producer and the consumer behind the movers in float together (a node
# alone would only move the Q/DQ pair) and the gates pass; verify.json and
# the log name the tensor and the nodes; the output is the model quantize
# makes with the printed exclude-nodes line and runs in onnxruntime with
# the SQNR verify measured. With gates nothing can meet, no measured round
# reproduces the figures of the model it started from: a change that
# quantizes the model as before is reported as not measured, and
# onnxruntime computes bit for bit the same outputs with and without it.
. "$(dirname "$0")/lib/common.sh"
mktmp
Q=$QUANTMAKE
if ! "$PY" -c 'import onnx, onnxruntime, numpy' 2>/dev/null; then
	fail "auto-exclusion tests" "$PY lacks onnx/onnxruntime (run scripts/venv.sh)"
	exit 0
fi

P=$TMPD/p
mkdir -p "$P/rules"
"$PY" - "$P" <<'PY' || fail "chain model" "could not write it"
import sys, numpy as np, onnx
from onnx import TensorProto, helper, numpy_helper
d = sys.argv[1]
r = np.random.default_rng(2)
f = lambda *s: (r.standard_normal(s) * 0.3).astype(np.float32)
w0 = f(16, 24)
w0[:, 0] *= 60   # activation a: one channel 60 times the others'
w1 = f(24, 10)
inits = [numpy_helper.from_array(a, n) for n, a in [
    ("win", f(16, 16)), ("w0", w0), ("w1", w1),
    ("s3", np.array([-1, 4, 6], np.int64)), ("s2", np.array([-1, 24], np.int64))]]
nodes = [
    helper.make_node("MatMul", ["x", "win"], ["i0"], name="fcin"),
    helper.make_node("Relu", ["i0"], ["i1"], name="relu"),
    helper.make_node("MatMul", ["i1", "w0"], ["a"], name="fc0"),
    helper.make_node("Reshape", ["a", "s3"], ["a3"], name="to3d"),
    helper.make_node("Transpose", ["a3"], ["t"], name="swap", perm=[0, 2, 1]),
    helper.make_node("Reshape", ["t", "s2"], ["u"], name="to2d"),
    helper.make_node("MatMul", ["u", "w1"], ["logits"], name="fc1"),
]
g = helper.make_graph(nodes, "chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 16])],
                      [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 10])], inits)
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
m.ir_version = 7
onnx.checker.check_model(m)
onnx.save(m, d + "/chain.onnx")
x = r.standard_normal((512, 16)).astype(np.float32)
np.save(d + "/calib.npy", x[:256])
np.savez(d + "/test.npz", x=x[256:])
PY
"$PY" "$ROOT/tests/models/mkcnn_digits.py" "$P/cnn.onnx"
cp "$ROOT/examples/digits/calib.npy" "$P/dcalib.npy"
cp "$ROOT/examples/digits/test.npz" "$P/dtest.npz"

rules() { # rules MODEL SOURCE CALIB DATA MIN-SQNR N [EXTRA]
	printf '[model %s]\nsource = %s\nquantize = static\nquantize.calibration = %s\nverify.data = %s\nverify.min-sqnr = %s\nverify.auto-exclude = %s\n%s' \
		"$1" "$2" "$3" "$4" "$5" "$6" "${7:-}" > "$P/rules/m.rules"
}

# ---- one round: the tensor between the movers, producer and consumer ----
rules ch chain.onnx calib.npy test.npz 40 6
"$Q" -C "$P" > "$TMPD/log" 2>&1
st=$?
[ $st -eq 0 ] && grep -q '^verify: ch: auto-exclude round 0: plain quantization: SQNR 3[0-9.]* dB.*: 1 gate failed$' "$TMPD/log" &&
	grep -q '^verify: ch: auto-exclude round 1: tensor a (its step alone: SQNR [0-9.]* dB; its own Q/DQ: SQNR [0-9.]* dB): leaving fc0 .*fc1 in float$' "$TMPD/log" &&
	grep -q '^verify: ch: auto-exclude round 1: +fc0 .*+fc1: SQNR 4[0-9.]* dB.*: gates pass$' "$TMPD/log" &&
	! grep -q 'round 2' "$TMPD/log" &&
	pass "auto-exclusion leaves a tensor's producer and its consumer behind movers in float in one round" ||
	fail "auto-exclusion leaves a tensor's producer and its consumer behind movers in float in one round" "status $st: $(grep '^verify: ch: [a-z]' "$TMPD/log")"
line=$(sed -n "s/^verify: ch: the gates pass with [0-9]* nodes left in float; .* rules of model 'ch': \(quantize.exclude-nodes = .*\)/\1/p" "$TMPD/log")
"$PY" -c "
import json
r = json.load(open('$P/build/ch/verify.json'))
a = r['auto_exclude']
assert r['passed'] is True and len(a['rounds']) == 2, a
r1 = a['rounds'][1]
assert r1['tensor'] == 'a' and r1['kept'] and r1['gates_failed'] == 0, r1
n = set(r1['nodes'])
assert {'fc0', 'fc1'} <= n <= {'fc0', 'to3d', 'swap', 'to2d', 'fc1'}, n
assert a['excluded'] == r1['nodes'] and r1['added'] == ' '.join(r1['nodes']), a
assert '$line' == 'quantize.exclude-nodes = ' + r1['added'], '$line'
q = {x['name']: x['status'] for x in json.load(open('$P/build/ch/quant.json'))['nodes']}
assert q['fcin'] == 'quantized' and q['fc0'] == 'skipped' and q['fc1'] == 'skipped', q
" 2>"$TMPD/err" && pass "verify.json names the tensor and the nodes of the round" ||
	fail "verify.json names the tensor and the nodes of the round" "$(tail -1 "$TMPD/err")"
cp "$P/build/ch/ch.onnx" "$TMPD/auto.onnx"
"$PY" -c "
import json, numpy as np, onnxruntime as ort
ort.set_default_logger_severity(3)
x = np.load('$P/test.npz')['x']
run = lambda p: ort.InferenceSession(p, providers=['CPUExecutionProvider']).run(None, {'x': x})[0]
ref, q = run('$P/chain.onnx'), run('$TMPD/auto.onnx')
sqnr = 10 * np.log10((ref.astype(np.float64) ** 2).sum() / ((ref - q).astype(np.float64) ** 2).sum())
v = json.load(open('$P/build/ch/verify.json'))['outputs'][0]['sqnr_db']
assert q.shape == (256, 10) and sqnr >= 40 and abs(sqnr - v) < 0.5, (sqnr, v)" 2>"$TMPD/err" &&
	pass "the re-quantized model runs in onnxruntime with the SQNR verify measured" ||
	fail "the re-quantized model runs in onnxruntime with the SQNR verify measured" "$(tail -1 "$TMPD/err")"
rules ch chain.onnx calib.npy test.npz 40 0 "$line
"
"$Q" -C "$P" > "$TMPD/log2" 2>&1
st=$?
[ $st -eq 0 ] && cmp -s "$TMPD/auto.onnx" "$P/build/ch/ch.onnx" &&
	pass "the output is the model quantize makes with the printed exclude-nodes line" ||
	fail "the output is the model quantize makes with the printed exclude-nodes line" "status $st, $line"

# ---- gates nothing meets: no measured round repeats its starting model ----
rules cnn cnn.onnx dcalib.npy dtest.npz 300 12
expect_err "auto-exclusion of the CNN with an unreachable gate fails clearly" 1 \
	"model 'cnn': 1 verify gate failed with [0-9]+ nodes? left in float by verify.auto-exclude = 12" "$Q" -C "$P"
cp "$TMPD/.stderr" "$TMPD/log3"
"$PY" -c "
import json
a = json.load(open('$P/build/cnn/failed/verify/verify.json'))['auto_exclude']
rounds, same = a['rounds'], a['unchanged']
tried = [(x['from_round'], x['tensor']) for x in rounds[1:]] + [(x['same_as_round'], x['tensor']) for x in same]
sets = [(x['from_round'], tuple(sorted(x['nodes']))) for x in rounds[1:]]
assert len(tried) == len(set(tried)) and len(sets) == len(set(sets)), (tried, sets)
last = rounds[0]
for x in rounds[1:]:
    assert x['tensor'] and x['nodes'] and rounds[x['from_round']] is last, x
    assert (x['min_sqnr_db'], x['max_abs'], x['min_cosine']) != (last['min_sqnr_db'], last['max_abs'], last['min_cosine']), (x, last)
    if x['kept']:
        last = x
assert [n for x in rounds if x['kept'] for n in x['nodes']] == a['excluded'], a
assert same, 'no candidate was found to change nothing'
print(json.dumps(same))" > "$TMPD/same.json" 2>"$TMPD/err" &&
	pass "no measured round reproduces the model it started from" ||
	fail "no measured round reproduces the model it started from" "$(tail -1 "$TMPD/err") $(grep 'auto-exclude' "$TMPD/log3")"
grep -q "^verify: cnn: auto-exclude: tensor [^ ]*: leaving .* in float quantizes the model as before: not measured$" "$TMPD/log3" &&
	pass "a change that quantizes the model as before is said not to be measured" ||
	fail "a change that quantizes the model as before is said not to be measured" "$(grep 'auto-exclude' "$TMPD/log3")"
# every such change, applied to the nodes kept by then, computes the same
# outputs in onnxruntime (its graph optimizations off: Q/DQ run as written)
"$PY" - "$P" "$TMPD/same.json" > "$TMPD/same.txt" 2>"$TMPD/err" <<'PY'
import json, sys
a = json.load(open(sys.argv[1] + '/build/cnn/failed/verify/verify.json'))['auto_exclude']
for i, s in enumerate(json.load(open(sys.argv[2]))):
    kept = [n for x in a['rounds'][1:s['same_as_round'] + 1] if x['kept'] for n in x['nodes']]
    print(i, ' '.join(kept) or '-', ' '.join(kept + s['nodes']))
PY
ok=$([ -s "$TMPD/same.txt" ] && echo 1)
while read -r i base with; do
	[ "$base" = - ] && base=
	mkdir -p "$P/build/s$i"
	for v in base with; do
		eval "nodes=\$$v"
		rules cnn cnn.onnx dcalib.npy dtest.npz off 0 "${nodes:+quantize.exclude-nodes = $nodes
}"
		"$Q" -C "$P" cnn > "$TMPD/log_s" 2>&1 && cp "$P/build/cnn/cnn.onnx" "$P/build/s$i/$v.onnx" || ok=
	done
	"$PY" -c "
import numpy as np, onnxruntime as ort
ort.set_default_logger_severity(3)
o = ort.SessionOptions()
o.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
x = np.load('$P/dtest.npz')['input']
run = lambda p: ort.InferenceSession(p, o, providers=['CPUExecutionProvider']).run(None, {'input': x})[0]
a, b = run('$P/build/s$i/base.onnx'), run('$P/build/s$i/with.onnx')
assert np.array_equal(a, b), np.abs(a - b).max()" 2>"$TMPD/err" || ok=
done < "$TMPD/same.txt"
[ "$ok" = 1 ] && pass "a change not measured computes the same outputs in onnxruntime" ||
	fail "a change not measured computes the same outputs in onnxruntime" "$(cat "$TMPD/same.txt") $(tail -1 "$TMPD/err") $(tail -2 "$TMPD/log_s")"
