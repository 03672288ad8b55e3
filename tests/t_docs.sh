#!/bin/sh
# The documentation stays true: README's rule-file example is accepted by
# quantmake, every command in `quantmake --help` is in the man page, and the
# man page formats without warnings.
. "$(dirname "$0")/lib/common.sh"
mktmp
P=$TMPD/readme
mkdir -p "$P/rules" "$P/models" "$P/weights"
awk '/^```ini/{f=1; next} /^```/{f=0} f' "$ROOT/README.md" > "$P/rules/models.rules"
cp "$TESTDATA/node/test_relu/model.onnx" "$P/models/silero_vad.onnx"
touch "$P/export.py" "$P/weights/a.pt"; mkdir -p "$P/calib" "$P/data"; touch "$P/calib/a.npy" "$P/data/val.npz" "$P/README.md"
if [ -s "$P/rules/models.rules" ] && QUANTMAKE_CACHE= "$QUANTMAKE" -C "$P" -n > "$TMPD/out" 2>&1; then
	pass "README rule-file example is valid"
else
	fail "README rule-file example is valid" "$(cat "$TMPD/out")"
fi
missing=""
for c in $("$QUANTMAKE" --help | awk '/^  [a-z]/{print $1}'); do
	grep -q "^\.BI\? \"\?$c\b\|^\.B $c\b\|^\.BI \"$c " "$ROOT/doc/quantmake.1" || missing="$missing $c"
done
[ -z "$missing" ] && pass "every command is in the man page" || fail "every command is in the man page" "missing:$missing"
if command -v groff >/dev/null; then
	w=$(groff -man -ww -z "$ROOT/doc/quantmake.1" 2>&1)
	[ -z "$w" ] && pass "man page formats without warnings" || fail "man page formats without warnings" "$w"
else
	skip "man page formats without warnings" "groff not installed"
fi
for f in README.md CONTRIBUTING.md doc/quantmake.1 bench/README.md; do
	check "$f exists" test -s "$ROOT/$f"
done
