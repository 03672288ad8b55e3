#!/bin/sh
# The bundled example (rules/examples.rules, what `make example` builds) builds,
# passes its verify gates, is a no-op the second time, and releases.
. "$(dirname "$0")/lib/common.sh"
mktmp
if [ ! -x "$ROOT/.venv/bin/python" ]; then
	fail "example project" "no .venv (run scripts/venv.sh)"
	exit 0
fi
P=$TMPD/example
mkdir -p "$P"
cp -r "$ROOT/rules" "$ROOT/examples" "$ROOT/README.md" "$P/"
ln -s "$ROOT/.venv" "$P/.venv"
"$QUANTMAKE" -C "$P" all > "$TMPD/log" 2>&1
st=$?
[ $st -eq 0 ] && grep -q 'verify digits-int8' "$TMPD/log" && pass "example builds and passes its gates" || fail "example builds and passes its gates" "status $st: $(tail -20 "$TMPD/log")"
check "int8 model produced" test -s "$P/build/digits-int8/digits-int8.onnx"
check "verify.json produced" test -s "$P/build/digits-int8/verify.json"
"$PY" - "$P/build/digits-int8/digits-int8.onnx" "$P/examples/digits/test.npz" > "$TMPD/acc" 2>&1 <<'PY'
import sys, numpy as np, onnxruntime as ort
s = ort.InferenceSession(sys.argv[1], providers=["CPUExecutionProvider"])
d = np.load(sys.argv[2])
acc = (s.run(None, {"input": d["input"]})[0].argmax(1) == d["labels"]).mean()
print(f"{acc:.4f}")
sys.exit(0 if acc > 0.96 else 1)
PY
[ $? -eq 0 ] && pass "onnxruntime runs the int8 example at $(cat "$TMPD/acc") top-1" || fail "onnxruntime runs the int8 example" "$(cat "$TMPD/acc")"
"$QUANTMAKE" -C "$P" all > "$TMPD/log2" 2>&1
grep -q 'nothing to do' "$TMPD/log2" && pass "second build of the example does nothing" || fail "second build of the example does nothing" "$(cat "$TMPD/log2")"
SOURCE_DATE_EPOCH=0 "$QUANTMAKE" -C "$P" release > "$TMPD/rlog" 2>&1
a=$(ls "$P"/dist/*.tar.gz 2>/dev/null | head -1)
[ -n "$a" ] && "$QUANTMAKE" verify-release "$a" > /dev/null 2>&1 && pass "example release verifies" || fail "example release verifies" "$(cat "$TMPD/rlog")"
"$PY" - "$a" > "$TMPD/mlog" 2>&1 <<'PY'
import json, sys, tarfile
t = tarfile.open(sys.argv[1])
man = json.load(t.extractfile([m for m in t.getmembers() if m.name.endswith("/MANIFEST.json")][0]))
v = man["models"]["digits-int8"]["verify"]
print(json.dumps(v)[:300])
sys.exit(0 if "verify" not in man["models"]["digits"] and v else 1)
PY
[ $? -eq 0 ] && pass "release manifest carries the verify figures" || fail "release manifest carries the verify figures" "$(cat "$TMPD/mlog")"
