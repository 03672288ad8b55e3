#!/bin/sh
# The verify stage in temporary projects built from examples/digits (a
# trained MLP, static and dynamic int8) and a small CNN: gates pass at
# sensible thresholds and at the defaults, can be switched off, and fail the
# build (exit 1, one line per gate) when set impossibly high, leaving
# verify.json in build/MODEL/failed/verify/; top-1, SQNR, cosine and max-abs equal those computed with
# onnxruntime on the same models and data; the final artifact is the
# quantized model unchanged; per-layer SQNR of activations and weights and
# their ranking equal onnxruntime's qdq_loss_debug; the node verify names
# first is the one worth leaving in float (on the digits model, and on one
# with an outlier-heavy weight where plain int8 fails the gates);
# verify.auto-exclude finds the nodes to leave in float on such models (one
# and two outliers), says so, ships the model the quantize stage makes with
# that exclude-nodes line, costs no calibration, and fails clearly when N is
# too small; a failed gate stops a release; reruns do no work; random inputs are seeded and said
# so; bad labels and bad data are clear errors.
. "$(dirname "$0")/lib/common.sh"
mktmp
Q=$QUANTMAKE
EX=$ROOT/examples/digits
if ! "$PY" -c 'import onnx, onnxruntime, numpy' 2>/dev/null; then
	fail "verify tests" "$PY lacks onnx/onnxruntime (run scripts/venv.sh)"
	exit 0
fi

ran() { # ran LOG STAGE MODEL: succeeds if the log shows that action ran
	grep -q "^\[[0-9]*/[0-9]*\] $2 $3 " "$1"
}

P=$TMPD/p
mkdir -p "$P/rules" "$P/data"
cp "$EX/export.py" "$EX/weights.npz" "$EX/calib.npy" "$EX/test.npz" "$P/"
"$PY" "$P/export.py" "$P/weights.npz" "$P/digits.onnx"
"$PY" "$ROOT/tests/models/mkcnn_digits.py" "$P/cnn.onnx"
# data: the labels apart, bad labels, data of the wrong shape, two samples
"$PY" -c "
import numpy as np
t = np.load('$P/test.npz'); x, y = t['input'], t['labels']
np.save('$P/data/labels.npy', y)
np.save('$P/data/labels_short.npy', y[:-3])
np.savez('$P/data/short.npz', input=x, labels=y[:-1])
np.savez('$P/data/flabels.npz', input=x, labels=y.astype(np.float32))
np.save('$P/data/narrow.npy', x[:, :32])
np.savez('$P/data/x.npz', input=x)
np.savez('$P/data/a.npz', input=x[:200], labels=y[:200])
np.savez('$P/data/b.npz', input=x[200:], labels=y[200:])
"
mkdir -p "$P/data/split" && mv "$P/data/a.npz" "$P/data/b.npz" "$P/data/split/"

cat > "$P/rules/m.rules" <<'EOF'
[model ds]
source = digits.onnx
quantize = static
quantize.calibration = calib.npy
verify.data = test.npz
verify.labels = labels
verify.max-top1-drop = 1.0
verify.min-sqnr = 20
verify.min-cosine = 0.99

[model dd]
source = digits.onnx
quantize = dynamic
verify.data = data/x.npz
verify.labels = data/labels.npy
verify.max-top1-drop = 1.0
verify.min-sqnr = 20

[model cs]
source = cnn.onnx
quantize = static
quantize.calibration = calib.npy
quantize.per-channel = true
verify.data = data/split
verify.labels = labels
verify.min-sqnr = 10
verify.max-abs = 100

[model rnd]
source = digits.onnx
quantize = static
quantize.calibration = calib.npy
verify.data = random
verify.min-cosine = 0.5

[model dflt]
source = digits.onnx
quantize = static
quantize.calibration = calib.npy
verify.data = test.npz
verify.labels = labels
EOF
"$Q" -C "$P" -j4 > "$TMPD/log1" 2>&1
st=$?
[ $st -eq 0 ] && pass "verify passes at sensible gates" || fail "verify passes at sensible gates" "status $st: $(grep -v '^ ' "$TMPD/log1" | head -8)"
for m in ds dd cs rnd dflt; do
	ran "$TMPD/log1" verify $m || fail "verify runs for $m" "$(head -c 300 "$TMPD/log1")"
done
check "verify.json written" test -f "$P/build/ds/verify.json"
grep -q 'top-1 over 397 rows: reference' "$TMPD/log1" && pass "summary on the build log" || fail "summary on the build log" "$(head -c 400 "$TMPD/log1")"

# the chain's final artifact is the quantized model, unchanged
"$Q" -C "$P" ds:quantize dd:quantize > /dev/null 2>&1
check "final artifact is the quantized model (static)" cmp "$P/build/ds/ds.onnx" "$P/build/ds/quantize/ds.onnx"
check "final artifact is the quantized model (dynamic)" cmp "$P/build/dd/dd.onnx" "$P/build/dd/quantize/dd.onnx"
check "quant.json of the final model beside it" cmp "$P/build/ds/quant.json" "$P/build/ds/quantize/quant.json"

# ---- default gates: min-sqnr 20 dB and, with labels, max-top1-drop 1 ----
"$PY" -c "
import json
r = json.load(open('$P/build/dflt/verify.json'))
assert r['default_gates'] is True and r['gates'] == {'max_top1_drop': 1, 'min_sqnr_db': 20}, r['gates']
assert r['passed'] is True and r['failed_gates'] == [], r
assert json.load(open('$P/build/ds/verify.json'))['default_gates'] is False
" 2>"$TMPD/err" && grep -q '^  gates: min-sqnr 20 dB, max-top1-drop 1 points (the defaults' "$TMPD/log1" &&
	pass "a static int8 model passes at the default gates, which are said to be defaults" ||
	fail "a static int8 model passes at the default gates, which are said to be defaults" "$(tail -1 "$TMPD/err") $(grep 'gates:' "$TMPD/log1")"

# ---- our figures against onnxruntime's on the same models and data ----
cat > "$TMPD/oracle.py" <<'EOF'
import json, sys
import numpy as np
import onnxruntime as ort
ort.set_default_logger_severity(3)
B, P = sys.argv[1], sys.argv[2]
def run(path, x):
    s = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    return s.run(None, {"input": x})[0].astype(np.float64)
t = np.load(P + "/test.npz")
x, y = t["input"], t["labels"]
for name, fl in (("ds", "digits"), ("dd", "digits"), ("cs", "cnn")):
    r = json.load(open("%s/%s/verify.json" % (B, name)))
    a = run("%s/%s.onnx" % (P, fl), x)
    b = run("%s/%s/%s.onnx" % (B, name, name), x)
    sqnr = 20 * np.log10(np.linalg.norm(a) / np.linalg.norm(a - b))
    cos = (a * b).sum() / np.sqrt((a * a).sum() * (b * b).sum())
    t1f, t1q = 100 * (a.argmax(1) == y).mean(), 100 * (b.argmax(1) == y).mean()
    o = r["outputs"][0]
    bad = []
    if abs(o["sqnr_db"] - sqnr) > 0.1: bad.append("sqnr %.4f vs ort %.4f" % (o["sqnr_db"], sqnr))
    if abs(o["cosine"] - cos) > 1e-4: bad.append("cosine %.6f vs ort %.6f" % (o["cosine"], cos))
    if abs(o["max_abs"] - np.abs(a - b).max()) > 0.05 * max(1e-3, np.abs(a - b).max()):
        bad.append("max-abs %.5f vs ort %.5f" % (o["max_abs"], np.abs(a - b).max()))
    if abs(r["top1"]["reference"] - t1f) > 0.1: bad.append("float top-1 %.3f vs ort %.3f" % (r["top1"]["reference"], t1f))
    if abs(r["top1"]["quantized"] - t1q) > 0.1: bad.append("quantized top-1 %.3f vs ort %.3f" % (r["top1"]["quantized"], t1q))
    if abs(r["top1"]["drop_points"] - (t1f - t1q)) > 0.1: bad.append("drop")
    if r["samples"] != (2 if name == "cs" else 1): bad.append("samples %d" % r["samples"])
    pc = r["top1"]["per_class"]
    if [c["rows"] for c in pc] != [int((y == k).sum()) for k in range(10)]: bad.append("per-class rows")
    for k in range(10):
        m = y == k
        if abs(pc[k]["quantized"] - 100 * (b.argmax(1)[m] == k).mean()) > 0.1: bad.append("class %d" % k)
    print("%s %s ours: sqnr %.3f dB top-1 %.2f -> %.2f; ort: sqnr %.3f dB top-1 %.2f -> %.2f %s" % (
        "BAD" if bad else "OK", name, o["sqnr_db"], r["top1"]["reference"], r["top1"]["quantized"],
        sqnr, t1f, t1q, "; ".join(bad)))
EOF
"$PY" "$TMPD/oracle.py" "$P/build" "$P" > "$TMPD/oracle.out" 2>&1
for m in ds dd cs; do
	if grep -q "^OK $m " "$TMPD/oracle.out"; then pass "top-1/SQNR equal onnxruntime's ($m)"
	else fail "top-1/SQNR equal onnxruntime's ($m)" "$(grep " $m \|Error" "$TMPD/oracle.out" | head -3)"; fi
done
[ -n "$VERBOSE" ] && cat "$TMPD/oracle.out"

# ---- per-layer figures: weights and activations, worst first ----
"$PY" -c "
import json, sys
r = json.load(open('$P/build/ds/verify.json'))
acts, ws = r['activations'], r['weights']
names = {a['name'] for a in acts}
assert {'input', 'h2', 'logits'} <= names, names
assert {w['name'] for w in ws} >= {'w1', 'w2'}, ws
s = [a['sqnr_db'] for a in acts if a['sqnr_db'] is not None]
assert s == sorted(s), s
assert r['passed'] is True and r['random_inputs'] is False
" 2>"$TMPD/err" && pass "per-layer activations and weights ranked worst first" || fail "per-layer activations and weights ranked worst first" "$(tail -1 "$TMPD/err")"

# ---- per-layer figures against onnxruntime's qdq_loss_debug ----
cat > "$TMPD/layers.py" <<'EOF'
import json, sys
import numpy as np
from onnxruntime.quantization import CalibrationDataReader
from onnxruntime.quantization.qdq_loss_debug import (
    modify_model_output_intermediate_tensors, collect_activations, create_activation_matching,
    compute_activation_error, create_weight_matching, compute_weight_error)
B, P, T, name, fl = sys.argv[1:6]
x = np.load(P + "/test.npz")["input"]
class Reader(CalibrationDataReader):
    def __init__(self): self.d = [{"input": x}]
    def get_next(self): return self.d.pop() if self.d else None
q = "%s/%s/%s.onnx" % (B, name, name)
modify_model_output_intermediate_tensors("%s/%s.onnx" % (P, fl), T + "/f_aug.onnx")
modify_model_output_intermediate_tensors(q, T + "/q_aug.onnx")
err = compute_activation_error(create_activation_matching(
    collect_activations(T + "/q_aug.onnx", Reader()), collect_activations(T + "/f_aug.onnx", Reader())))
werr = compute_weight_error(create_weight_matching("%s/%s.onnx" % (P, fl), q))
r = json.load(open("%s/%s/verify.json" % (B, name)))
ours = {a["name"]: a["sqnr_db"] for a in r["activations"]}
ow = {w["name"]: w["sqnr_db"] for w in r["weights"]}
bad = []
for k, v in err.items():
    if k not in ours or abs(ours[k] - v["xmodel_err"]) > 0.1:
        bad.append("activation %s: ours %s, ort %.3f" % (k, ours.get(k), v["xmodel_err"]))
for k, v in werr.items():
    if k not in ow or abs(ow[k] - v) > 0.1:
        bad.append("weight %s: ours %s, ort %.3f" % (k, ow.get(k), v))
# the worst layers in the same order
# (ties in either order): ORT's figures read in our order never decrease
oa = [err[a["name"]]["xmodel_err"] for a in r["activations"] if a["name"] in err]
if any(b < a - 0.01 for a, b in zip(oa, oa[1:])): bad.append("activation ranking %s" % oa)
wa = [werr[w["name"]] for w in r["weights"] if w["name"] in werr]
if any(b < a - 0.01 for a, b in zip(wa, wa[1:])): bad.append("weight ranking %s" % wa)
if not err or not werr: bad.append("nothing matched")
print("BAD" if bad else "OK", name, len(err), "activations", len(werr), "weights", "; ".join(bad))
EOF
for m in ds:digits cs:cnn; do
	n=${m%%:*} f=${m#*:}
	out=$("$PY" "$TMPD/layers.py" "$P/build" "$P" "$TMPD" "$n" "$f" 2>&1 | grep -v -i warn | tail -1)
	case $out in
	OK*) pass "per-layer SQNR and ranking equal qdq_loss_debug's ($n)" ;;
	*) fail "per-layer SQNR and ranking equal qdq_loss_debug's ($n)" "$out" ;;
	esac
	[ -n "$VERBOSE" ] && echo "$out"
done

"$PY" -c "
import json
c = json.load(open('$P/build/dd/verify.json'))['exclude_candidates']
assert sorted(n for x in c for n in x['nodes']) == ['fc1', 'fc2'], c
" 2>"$TMPD/err" && pass "QOperator nodes are named as exclusion candidates" || fail "QOperator nodes are named as exclusion candidates" "$(tail -1 "$TMPD/err")"

# ---- random inputs: said so, deterministic ----
"$PY" -c "
import json
r = json.load(open('$P/build/rnd/verify.json'))
assert r['random_inputs'] is True and r['samples'] == 16 and 'random' in r['inputs'], r
" 2>"$TMPD/err" && pass "random inputs are reported as random" || fail "random inputs are reported as random" "$(tail -1 "$TMPD/err")"
cp "$P/build/rnd/verify.json" "$TMPD/rnd1.json"
QUANTMAKE_CACHE=$TMPD/cache2 "$Q" -C "$P" -B rnd > "$TMPD/log_rnd" 2>&1
check "random inputs are deterministic" cmp "$TMPD/rnd1.json" "$P/build/rnd/verify.json"

# ---- rerun: no work ----
"$Q" -C "$P" > "$TMPD/log2" 2>&1
st=$?
[ $st -eq 0 ] && ! grep -q '^\[[0-9]*/[0-9]*\] verify' "$TMPD/log2" && pass "rerun does no work" || fail "rerun does no work" "status $st: $(head -c 300 "$TMPD/log2")"

# ---- gates that fail ----
rules() { # rules KEY=VALUE...: model ds with these verify keys
	{
		printf '[model ds]\nsource = digits.onnx\nquantize = static\nquantize.calibration = calib.npy\n'
		for kv in "$@"; do printf '%s\n' "$kv"; done
	} > "$P/rules/m.rules"
}
rules "verify.data = test.npz" "verify.min-sqnr = 200"
expect_err "impossible SQNR gate fails the build" 1 '^verify: ds: min-sqnr: measured [0-9.]+ dB, threshold 200 dB' "$Q" -C "$P"
cp "$TMPD/.stderr" "$TMPD/log_200"
# the report of a failed verify is kept in build/MODEL/failed/verify/
"$PY" -c "
import json, re, sys
r = json.load(open('$P/build/ds/failed/verify/verify.json'))
f = r['failed_gates']
assert r['passed'] is False and r['gates_failed'] == 1 and len(f) == 1, r
assert f[0]['gate'] == 'min-sqnr' and f[0]['threshold'] == 200 and f[0]['output'] == 'logits', f
m = re.search(r'min-sqnr: measured ([0-9.]+) dB', open('$TMPD/log_200').read())
assert abs(float(m.group(1)) - f[0]['measured']) < 0.01, (m.group(1), f)
assert r['outputs'][0]['sqnr_db'] == f[0]['measured'] and r['activations'], r['outputs']
" 2>"$TMPD/err" && test ! -e "$P/build/ds/failed/verify/ds.onnx" &&
	pass "a failed verify leaves verify.json with the failed gates" ||
	fail "a failed verify leaves verify.json with the failed gates" "$(tail -1 "$TMPD/err")"
ran "$TMPD/.stderr" quantize ds && fail "gate change reruns only verify" "$(head -c 300 "$TMPD/.stderr")" || pass "gate change reruns only verify"
printf '\n[release r]\nmodels = ds\n' >> "$P/rules/m.rules"
rm -rf "$P/dist"
expect_err "a failed gate stops the release" 1 '^verify: ds: min-sqnr: measured' "$Q" -C "$P" release
check "no archive after a failed gate" test ! -e "$P/dist"
rules "verify.data = test.npz" "verify.labels = labels" "verify.min-sqnr = off" "verify.max-top1-drop = off"
"$Q" -C "$P" > "$TMPD/log_off" 2>&1
st=$?
[ $st -eq 0 ] && grep -q '^  gates: none (all off)$' "$TMPD/log_off" && "$PY" -c "
import json
r = json.load(open('$P/build/ds/verify.json'))
assert r['gates'] == {} and r['default_gates'] is False and r['passed'] is True, r" 2>"$TMPD/err" &&
	test ! -e "$P/build/ds/failed" &&
	pass "gates switched off explicitly" || fail "gates switched off explicitly" "status $st: $(grep 'gates' "$TMPD/log_off") $(tail -1 "$TMPD/err")"
rules "verify.data = test.npz" "verify.min-sqnr = 20"
printf '\n[release r]\nmodels = ds\n' >> "$P/rules/m.rules"
"$Q" -C "$P" release > "$TMPD/log_rel" 2>&1
tar tzf "$P"/dist/r-*.tar.gz 2>/dev/null | grep -q '/ds/verify.json$' && pass "a release ships verify.json" || fail "a release ships verify.json" "$(tail -3 "$TMPD/log_rel")"
rules "verify.data = test.npz" "verify.labels = labels" "verify.max-top1-drop = -5" "verify.min-cosine = 1.5" "verify.max-abs = 0.0001"
"$Q" -C "$P" > "$TMPD/log3" 2>&1
st=$?
n=$(grep -c '^verify: ds: [a-z0-9-]*: measured .*, threshold ' "$TMPD/log3")
[ $st -eq 1 ] && [ "$n" -eq 3 ] && grep -q '^verify: ds: max-top1-drop: measured [0-9.-]* points.*threshold -5 points' "$TMPD/log3" &&
	grep -q '^verify: ds: min-cosine: measured 0\.[0-9]*, threshold 1.5' "$TMPD/log3" && pass "one line per failed gate" ||
	fail "one line per failed gate" "status $st, $n lines: $(grep '^verify' "$TMPD/log3" | tail -4)"

# ---- the nodes verify names first are the ones worth excluding ----
cand=$("$PY" -c "
import json
c = json.load(open('$P/build/ds/verify.json'))['exclude_candidates']
print(c[0]['nodes'][0], c[-1]['nodes'][0])" 2>/dev/null)
first=${cand% *} last=${cand#* }
sqnr_with() { # sqnr_with NODE: output SQNR with that node left in float
	rules "verify.data = test.npz" "quantize.exclude-nodes = $1"
	"$Q" -C "$P" > /dev/null 2>&1
	"$PY" -c "import json; print(json.load(open('$P/build/ds/verify.json'))['outputs'][0]['sqnr_db'])"
}
base=$("$PY" -c "import json; print(json.load(open('$P/build/ds/verify.json'))['outputs'][0]['sqnr_db'])")
s_first=$(sqnr_with "$first")
s_last=$(sqnr_with "$last")
if [ -n "$first" ] && [ "$first" != "$last" ] && "$PY" -c "import sys; b, f, l = map(float, sys.argv[1:]); sys.exit(not (f > b + 0.5 and f > l + 0.5))" "$base" "$s_first" "$s_last"; then
	pass "excluding the first candidate helps most"
else
	fail "excluding the first candidate helps most" "candidates '$cand': SQNR $base, without $first $s_first, without $last $s_last"
fi

# ---- a layer with an outlier-heavy weight: plain int8 (one scale per
# tensor: quantize.per-channel = auto would give the outlier's channel its
# own scale) fails, verify names the layer first, leaving it in float
# passes ----
O=$TMPD/ol
mkdir -p "$O/rules"
cp "$EX/export.py" "$EX/calib.npy" "$EX/test.npz" "$O/"
"$PY" -c "
import numpy as np
w = dict(np.load('$EX/weights.npz'))
w['w2'] = w['w2'].copy(); w['w2'][0, 0] = np.abs(w['w2']).max() * 60
np.savez('$O/weights.npz', **w)"
"$PY" "$O/export.py" "$O/weights.npz" "$O/ol.onnx"
printf '[model ol]\nsource = ol.onnx\nquantize = static\nquantize.per-channel = false\nquantize.calibration = calib.npy\nverify.data = test.npz\nverify.labels = labels\nverify.min-sqnr = 30\nverify.max-top1-drop = 1\n' > "$O/rules/m.rules"
"$Q" -C "$O" > "$TMPD/log_ol" 2>&1
st=$?
[ $st -eq 1 ] && grep -q '^verify: ol: min-sqnr: measured 1[0-9]\.[0-9]* dB, threshold 30 dB' "$TMPD/log_ol" &&
	grep -q '^verify: ol: max-top1-drop: measured' "$TMPD/log_ol" && pass "an outlier-heavy layer fails the gates" ||
	fail "an outlier-heavy layer fails the gates" "status $st: $(grep '^verify: ol: [a-z]' "$TMPD/log_ol")"
worst=$(sed -n 's/^  most noise added (SQNR of the step alone): \([^ ]*\) .*/\1/p' "$TMPD/log_ol")
[ "$worst" = fc2 ] && pass "the failing summary names the outlier layer first" || fail "the failing summary names the outlier layer first" "named '$worst'"
printf 'quantize.exclude-nodes = %s\n' "$worst" >> "$O/rules/m.rules"
"$Q" -C "$O" > "$TMPD/log_ol2" 2>&1
st=$?
[ $st -eq 0 ] && [ -f "$O/build/ol/verify.json" ] && pass "leaving the named layer in float passes the gates" ||
	fail "leaving the named layer in float passes the gates" "status $st: $(grep '^verify: ol: [a-z]' "$TMPD/log_ol2")"
cp "$O/build/ol/ol.onnx" "$TMPD/ol_fc2.onnx"

# ---- verify.auto-exclude: the same failing rules, verify finds fc2 itself ----
olrules() { # olrules MODEL AUTO-EXCLUDE
	printf '[model %s]\nsource = %s.onnx\nquantize = static\nquantize.per-channel = false\nquantize.calibration = calib.npy\nverify.data = test.npz\nverify.labels = labels\nverify.min-sqnr = 30\nverify.max-top1-drop = 1\nverify.auto-exclude = %s\n' "$1" "$1" "$2" > "$O/rules/m.rules"
}
olrules ol 3
"$Q" -C "$O" > "$TMPD/log_ax" 2>&1
st=$?
[ $st -eq 0 ] && grep -q '^verify: ol: auto-exclude round 0: plain quantization: SQNR 1[0-9.]* dB.*: 2 gates failed$' "$TMPD/log_ax" &&
	grep -q '^verify: ol: auto-exclude round 1: +fc2: SQNR [3-9][0-9.]* dB.*: gates pass$' "$TMPD/log_ax" &&
	! grep -q 'round 2' "$TMPD/log_ax" &&
	grep -q "^verify: ol: the gates pass with 1 node left in float; .* rules of model 'ol': quantize.exclude-nodes = fc2\$" "$TMPD/log_ax" &&
	pass "auto-exclusion leaves the outlier layer in float and says how to keep it" ||
	fail "auto-exclusion leaves the outlier layer in float and says how to keep it" "status $st: $(grep '^verify: ol: [a-z]' "$TMPD/log_ax")"
ran "$TMPD/log_ax" verify ol && ! ran "$TMPD/log_ax" calibrate ol && ! ran "$TMPD/log_ax" quantize ol &&
	pass "auto-exclusion costs no calibration (only verify reruns)" ||
	fail "auto-exclusion costs no calibration (only verify reruns)" "$(grep '^\[' "$TMPD/log_ax")"
"$PY" -c "
import json
r = json.load(open('$O/build/ol/verify.json'))
a = r['auto_exclude']
assert a['max_nodes'] == 3 and a['excluded'] == ['fc2'] and a['exclude_nodes'] == ['fc2'], a
g = [x['gates_failed'] for x in a['rounds']]
assert g == [2, 0] and [x['added'] for x in a['rounds']] == [None, 'fc2'], a['rounds']
assert a['rounds'][0]['min_sqnr_db'] < 20 and a['rounds'][1]['min_sqnr_db'] == r['outputs'][0]['sqnr_db'] >= 30, a
assert r['passed'] is True and r['top1']['drop_points'] <= 1, r['top1']
q = json.load(open('$O/build/ol/quant.json'))
fc2 = [n for n in q['nodes'] if n['name'] == 'fc2'][0]
assert fc2['status'] == 'skipped' and 'exclude' in fc2['reason'], fc2
" 2>"$TMPD/err" && pass "verify.json gives the rounds, quant.json the re-quantized model" ||
	fail "verify.json gives the rounds, quant.json the re-quantized model" "$(tail -1 "$TMPD/err")"
check "the output is the model quantize makes with that exclude-nodes line" cmp "$TMPD/ol_fc2.onnx" "$O/build/ol/ol.onnx"
"$Q" -C "$O" > "$TMPD/log_ax_re" 2>&1
st=$?
[ $st -eq 0 ] && ! grep -q '^\[' "$TMPD/log_ax_re" && pass "an auto-excluded build reruns with no work" ||
	fail "an auto-excluded build reruns with no work" "status $st: $(head -c 300 "$TMPD/log_ax_re")"
"$PY" -c "
import numpy as np, onnxruntime as ort
ort.set_default_logger_severity(3)
x = np.load('$O/test.npz')['input']
s = ort.InferenceSession('$O/build/ol/ol.onnx', providers=['CPUExecutionProvider'])
assert s.run(None, {'input': x})[0].shape == (397, 10)" 2>"$TMPD/err" &&
	pass "the re-quantized model runs in onnxruntime" || fail "the re-quantized model runs in onnxruntime" "$(tail -1 "$TMPD/err")"

# two outlier layers: one node is not enough, two are (the ranking is
# measured again after each round)
"$PY" -c "
import numpy as np
w = dict(np.load('$O/weights.npz'))
w['w1'] = w['w1'].copy(); w['w1'][0, 0] = np.abs(w['w1']).max() * 60
np.savez('$O/weights2.npz', **w)"
"$PY" "$O/export.py" "$O/weights2.npz" "$O/ol2.onnx"
olrules ol2 1
expect_err "auto-exclusion fails clearly when N is too small" 1 "model 'ol2': 2 verify gates failed with 1 node left in float by verify.auto-exclude = 1 \(fc2\)" "$Q" -C "$O"
grep -q '^verify: ol2: auto-exclude round 1: +fc2: .*: 2 gates failed$' "$TMPD/.stderr" &&
	[ "$(grep -c '^verify: ol2: min-sqnr: measured' "$TMPD/.stderr")" -eq 2 ] &&
	[ "$(grep -c '^verify: ol2: max-top1-drop: measured' "$TMPD/.stderr")" -eq 2 ] &&
	pass "a failed auto-exclusion prints what it tried and the gate lines before and after" ||
	fail "a failed auto-exclusion prints what it tried and the gate lines before and after" "$(grep '^verify: ol2: [a-z]' "$TMPD/.stderr")"
"$PY" -c "
import json
r = json.load(open('$O/build/ol2/failed/verify/verify.json'))
assert r['passed'] is False and r['auto_exclude']['excluded'] == ['fc2'] and len(r['auto_exclude']['rounds']) == 2, r
" 2>"$TMPD/err" && pass "the failed report holds the rounds" || fail "the failed report holds the rounds" "$(tail -1 "$TMPD/err")"
olrules ol2 4
"$Q" -C "$O" > "$TMPD/log_ax2" 2>&1
st=$?
[ $st -eq 0 ] && grep -q "^verify: ol2: the gates pass with 2 nodes left in float; .*: quantize.exclude-nodes = fc2 fc1\$" "$TMPD/log_ax2" &&
	grep '^verify: ol2: auto-exclude round [0-9]*: +' "$TMPD/log_ax2" | tail -1 | grep -q ': gates pass$' &&
	[ "$(grep -c '^verify: ol2: auto-exclude round [0-9]*: .*: gates pass$' "$TMPD/log_ax2")" -eq 1 ] &&
	pass "auto-exclusion stops at the first passing round (two nodes)" ||
	fail "auto-exclusion stops at the first passing round (two nodes)" "status $st: $(grep '^verify: ol2: [a-z]' "$TMPD/log_ax2")"
# gates no quantization can meet: auto-exclusion tries the quantized nodes
# in turn, each once, keeping in float only those whose round measures
# better than the last kept one (the others are undone), until nothing is
# left to try or to quantize
olrules ol 12
sed -i 's/^verify.min-sqnr = 30$/verify.min-sqnr = 300/' "$O/rules/m.rules"
expect_err "auto-exclusion tries every quantized node before giving up" 1 "model 'ol': [12] verify gates? failed with [0-9]+ nodes? left in float by verify.auto-exclude = 12" "$Q" -C "$O"
"$PY" -c "
import json
r = json.load(open('$O/build/ol/failed/verify/verify.json'))['auto_exclude']
rounds = r['rounds'][1:]
tried = [(x['from_round'], x['tensor']) for x in rounds] + [(x['same_as_round'], x['tensor']) for x in r['unchanged']]
sets = [(x['from_round'], tuple(sorted(x['nodes']))) for x in rounds]
kept = [n for x in rounds if x['kept'] for n in x['nodes']]
assert len(tried) == len(set(tried)) and len(sets) == len(set(sets)), (tried, sets)
assert kept == r['excluded'] and kept, (kept, r['excluded'])
assert all(x['added'] == ' '.join(x['nodes']) for x in rounds), rounds
last = r['rounds'][0]
for i, x in enumerate(rounds):
    assert r['rounds'][x['from_round']] is last, (i, x)
    better = x['gates_failed'] < last['gates_failed'] or (x['gates_failed'] == last['gates_failed'] and x['min_sqnr_db'] > last['min_sqnr_db'])
    assert better == x['kept'], (x, last)
    if x['kept']:
        last = x
" 2>"$TMPD/err" && grep -q "^verify: ol: auto-exclude: \(stopping before [a-z0-9_]*: .*nothing to quantize\|no further quantized node\|[0-9]* rounds in float made nothing better\)" "$TMPD/.stderr" &&
	pass "auto-exclusion keeps in float only the nodes whose round measures better" ||
	fail "auto-exclusion keeps in float only the nodes whose round measures better" "$(tail -1 "$TMPD/err") $(grep 'auto-exclude: [a-z0-9]' "$TMPD/.stderr")"
printf '[model old]\nsource = ol.onnx\nquantize = dynamic\nverify.data = test.npz\nverify.min-sqnr = 30\nverify.auto-exclude = 2\n' > "$O/rules/m.rules"
"$Q" -C "$O" > "$TMPD/log_ax3" 2>&1
st=$?
[ $st -eq 0 ] && grep -q "^verify: old: auto-exclude round 1: +fc2: .*: gates pass\$" "$TMPD/log_ax3" &&
	"$PY" -c "
import json
q = {n['name']: n['status'] for n in json.load(open('$O/build/old/quant.json'))['nodes']}
assert q['fc1'] == 'quantized' and q['fc2'] == 'skipped', q" 2>"$TMPD/err" &&
	pass "auto-exclusion of a dynamically quantized model" ||
	fail "auto-exclusion of a dynamically quantized model" "status $st: $(grep '^verify: old: [a-z]' "$TMPD/log_ax3") $(tail -1 "$TMPD/err")"

# ---- bad input ----
rules "verify.min-sqnr = 20"
expect_err "no data is a clear error" 2 "model 'ds': verify needs verify.data" "$Q" -C "$P"
rules "verify.data = data/short.npz" "verify.labels = labels"
expect_err "labels of the wrong length" 1 "sample 1: labels 'labels' hold 396 values, expected 397" "$Q" -C "$P"
rules "verify.data = test.npz" "verify.labels = data/labels_short.npy"
expect_err "labels file of the wrong length" 1 "labels file '.*labels_short.npy' holds 394 labels" "$Q" -C "$P"
rules "verify.data = data/flabels.npz" "verify.labels = labels"
expect_err "labels of the wrong type" 1 "labels 'labels' are float, expected integer class indices" "$Q" -C "$P"
rules "verify.data = test.npz" "verify.labels = lables"
expect_err "labels name missing from the data" 1 "sample 1 has no tensor 'lables' \(verify.labels\)" "$Q" -C "$P"
rules "verify.data = data/narrow.npy"
expect_err "data not matching the model's inputs" 1 "sample 1, reference model: input 'input': expected float \[batch,64\], got float \[397,32\]" "$Q" -C "$P"
rules "verify.data = nothing*.npz"
expect_err "data matching no file" 2 "verify.data 'nothing\*.npz' matches no file" "$Q" -C "$P"
rules "verify.data = test.npz" "verify.max-top1-drop = 1"
expect_err "top-1 gate without labels" 1 "verify.max-top1-drop needs verify.labels" "$Q" -C "$P"
rules "verify.data = random" "verify.labels = labels"
expect_err "labels with random data" 2 "verify.labels needs real samples" "$Q" -C "$P"
rules "verify.data = test.npz" "verify.auto-exclude = -1"
expect_err "negative verify.auto-exclude" 2 "m.rules:[0-9]+: model 'ds': verify.auto-exclude = '-1' is not valid: expected the most nodes to leave in float" "$Q" -C "$P"
rules "verify.data = test.npz" "verify.min-sqnr = high"
expect_err "a gate that is not a number" 2 "m.rules:[0-9]+: model 'ds': verify.min-sqnr = 'high' is not valid: expected a number, or off" "$Q" -C "$P"
printf '[model v]\nsource = digits.onnx\nquantize = fp16\nverify.data = test.npz\nverify.auto-exclude = 2\n' > "$P/rules/m.rules"
expect_err "verify.auto-exclude without integer quantization" 2 "m.rules:5: model 'v': verify.auto-exclude needs quantize = static or dynamic .*not quantize = fp16" "$Q" -C "$P"
printf '[model v]\nsource = digits.onnx\nverify.data = test.npz\n' > "$P/rules/m.rules"
expect_err "verify without quantize names what is missing" 2 "stage verify needs a quantize stage" "$Q" -C "$P"

# ---- a sample of stacked rows runs a chunk of rows at a time: the same
# figures as one sample per row (the per-layer sums in another order only) ----
mkdir -p "$P/data/rows"
"$PY" -c "
import numpy as np
t = np.load('$P/test.npz')
for i in range(len(t['labels'])):
    np.savez('$P/data/rows/%03d.npz' % i, input=t['input'][i:i + 1], labels=t['labels'][i:i + 1])
"
rules "verify.data = test.npz" "verify.labels = labels" "verify.min-sqnr = 20"
"$Q" -C "$P" > "$TMPD/log_st" 2>&1 && cp "$P/build/ds/verify.json" "$TMPD/stacked.json"
rules "verify.data = data/rows" "verify.labels = labels" "verify.min-sqnr = 20"
"$Q" -C "$P" > "$TMPD/log_rows" 2>&1 && "$PY" -c "
import json, math
a, b = json.load(open('$TMPD/stacked.json')), json.load(open('$P/build/ds/verify.json'))
assert a['samples'] == 1 and b['samples'] == 397, (a['samples'], b['samples'])
assert a['top1'] == b['top1'], (a['top1'], b['top1'])
# rel_tol 1e-6: without AVX-512 the products run on OpenBLAS, whose
# kernels for one row and for 397 rows round differently (5e-8 seen)
for x, y in zip(a['outputs'], b['outputs']):
    assert math.isclose(x['sqnr_db'], y['sqnr_db'], rel_tol=1e-6), (x, y)
ax = {x['name']: x['sqnr_db'] for x in a['activations']}
bx = {x['name']: x['sqnr_db'] for x in b['activations']}
assert ax.keys() == bx.keys() and len(ax) > 2, (ax, bx)
for k in ax:
    assert math.isclose(ax[k], bx[k], rel_tol=1e-6), (k, ax[k], bx[k])
" 2>"$TMPD/err" && pass "a stacked sample gives the figures of one sample per row" ||
	fail "a stacked sample gives the figures of one sample per row" "$(tail -2 "$TMPD/err") $(grep -v '^ ' "$TMPD/log_rows" | tail -3)"

# ---- the reference model beside the quantized one: with -j2 and -j3 the
# reference runs on a thread of its own, and verify.json is the bytes of
# -j1 (stacked rows in chunks, one sample per row with labels, random
# inputs, the CNN, auto-exclude rounds) ----
cat > "$P/rules/m.rules" <<'EOF2'
[model st]
source = digits.onnx
quantize = static
quantize.calibration = calib.npy
verify.data = test.npz
verify.labels = labels
verify.min-sqnr = 20

[model rw]
source = digits.onnx
quantize = static
quantize.calibration = calib.npy
verify.data = data/rows
verify.labels = labels

[model rnd]
source = digits.onnx
quantize = dynamic
verify.data = random

[model cs]
source = cnn.onnx
quantize = static
quantize.calibration = calib.npy
verify.data = data/split
verify.labels = labels

[model ax]
source = digits.onnx
quantize = static
quantize.calibration = calib.npy
verify.data = test.npz
verify.min-sqnr = 40
verify.auto-exclude = 3
EOF2
for m in st rw rnd cs ax; do
	ok=1
	for j in 1 2 3; do
		rm -rf "$P/build" "$TMPD/cj"
		QUANTMAKE_CACHE=$TMPD/cj "$Q" -C "$P" -j$j "$m" > "$TMPD/log_j$j" 2>&1
		cp "$P/build/$m/verify.json" "$TMPD/$m.j$j.json" 2>/dev/null ||
			cp "$P/build/$m/failed/verify/verify.json" "$TMPD/$m.j$j.json" 2>/dev/null || ok=0
	done
	if [ $ok = 1 ] && cmp -s "$TMPD/$m.j1.json" "$TMPD/$m.j2.json" && cmp -s "$TMPD/$m.j1.json" "$TMPD/$m.j3.json"; then
		pass "verify.json of $m is the same bytes with -j1, -j2 and -j3"
	else
		fail "verify.json of $m is the same bytes with -j1, -j2 and -j3" "$(grep -v '^ ' "$TMPD/log_j2" | tail -3)"
	fi
done
