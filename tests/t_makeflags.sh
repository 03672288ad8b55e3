#!/bin/sh
# make's habits in the build (issues: CLI habits, make integration): -q
# answers "up to date?" with its status, -s prints one line per action,
# a build with failures ends naming them, the progress counter counts what
# runs, -n says which build/ files would be restored, and under make the
# n/k/s/q letters of MAKEFLAGS and make 4.4's fifo jobserver are honoured.
. "$(dirname "$0")/lib/common.sh"
mktmp
Q=$QUANTMAKE
M1=$TESTDATA/node/test_relu/model.onnx
P=$TMPD/p
mkdir -p "$P/rules" "$P/models"
cp "$M1" "$P/models/relu.onnx"
cat > "$P/rules/m.rules" <<'R'
[model a]
source = models/relu.onnx

[model b]
export = cp models/relu.onnx "$out"; echo exported b
export.deps = models/relu.onnx

[model c : a]
infer-shapes = merge
R

# ---- -q: status only ----
"$Q" -C "$P" -q > "$TMPD/q1" 2>&1
st=$?
[ $st -eq 1 ] && [ ! -s "$TMPD/q1" ] && [ ! -e "$P/build/a" ] && pass "-q on a fresh project: exit 1, nothing printed, nothing built" ||
	fail "-q on a fresh project: exit 1, nothing printed, nothing built" "exit $st: $(cat "$TMPD/q1")"
"$Q" -C "$P" > "$TMPD/b1" 2>&1
n=$(grep -c '^\[[0-9]*/[0-9]*\]' "$TMPD/b1")
last=$(grep '^\[[0-9]*/[0-9]*\]' "$TMPD/b1" | tail -1 | sed 's/^\[\([0-9]*\/[0-9]*\)\].*/\1/')
[ "$last" = "$n/$n" ] && pass "the progress counter ends at [$n/$n] for $n actions run" || fail "the progress counter counts what runs" "last [$last] for $n runs: $(cat "$TMPD/b1")"
"$Q" -C "$P" -q > "$TMPD/q2" 2>&1
st=$?
[ $st -eq 0 ] && [ ! -s "$TMPD/q2" ] && pass "-q when everything is up to date: exit 0, nothing printed" ||
	fail "-q when everything is up to date: exit 0" "exit $st: $(cat "$TMPD/q2")"
# a file of build/ that is not what the store holds (another branch's, or
# edited): -n says it would be restored, -q says not up to date
printf 'x' >> "$P/build/a/a.onnx"
"$Q" -C "$P" -n > "$TMPD/n1" 2>&1
grep -q "^would restore build/a/a.onnx from the cache" "$TMPD/n1" && ! grep -q 'nothing to do' "$TMPD/n1" &&
	pass "-n names a build/ file it would restore" || fail "-n names a build/ file it would restore" "$(cat "$TMPD/n1")"
"$Q" -C "$P" -q > /dev/null 2>&1
[ $? -eq 1 ] && pass "-q with a build/ file to restore: exit 1" || fail "-q with a build/ file to restore: exit 1"
"$Q" -C "$P" > /dev/null 2>&1

# ---- -s: one line per action ----
"$Q" -C "$P" -B -s > "$TMPD/s1" 2>&1
grep -q '^\[.*export b' "$TMPD/s1" && ! grep -q 'exported b' "$TMPD/s1" && ! grep -q '^infer-shapes:' "$TMPD/s1" &&
	pass "-s: one line per action, no stage output" || fail "-s: one line per action, no stage output" "$(cat "$TMPD/s1")"
"$Q" -C "$P" -B > "$TMPD/s2" 2>&1
grep -q 'exported b' "$TMPD/s2" && pass "without -s the stage output is shown" || fail "without -s the stage output is shown" "$(cat "$TMPD/s2")"

# ---- -k: the build ends naming every failed action ----
K=$TMPD/k
mkdir -p "$K/rules" "$K/models"
cp "$M1" "$K/models/relu.onnx"
printf '[model x]\nexport = exit 3\n\n[model y]\nexport = false\n\n[model z]\nsource = models/relu.onnx\n' > "$K/rules/m.rules"
"$Q" -C "$K" -k > "$TMPD/k1" 2>&1
st=$?
tail -1 "$TMPD/k1" | grep -Eq '^quantmake: 2 actions failed: (x:export, y:export|y:export, x:export)$' && [ $st -eq 1 ] && [ -s "$K/build/z/z.onnx" ] &&
	pass "-k with two failures: the other model builds, exit 1, last line names both" ||
	fail "-k with two failures ends naming both" "exit $st: $(tail -3 "$TMPD/k1")"
# and the action that waits on a failed one is counted as not run
printf '[model x]\nexport = exit 3\n\n[model w]\nsource = @x\ninfer-shapes = merge\n' > "$K/rules/m.rules"
"$Q" -C "$K" -k > "$TMPD/k2" 2>&1
grep -q '^quantmake: 1 action failed: x:export$' "$TMPD/k2" && grep -q 'actions\? not run: ' "$TMPD/k2" &&
	pass "a failure's dependents are reported as not run" || fail "a failure's dependents are reported as not run" "$(tail -3 "$TMPD/k2")"

# ---- MAKEFLAGS from make ----
printf 'all:\n\t+%s -C %s\n' "$Q" "$P" > "$TMPD/Makefile"
rm -rf "$P/build"
make -n -f "$TMPD/Makefile" > "$TMPD/m1" 2>&1
grep -Eq '^would (run|restore)' "$TMPD/m1" && [ ! -e "$P/build/a" ] && pass "make -n with a +quantmake recipe: a dry run" ||
	fail "make -n with a +quantmake recipe: a dry run" "$(cat "$TMPD/m1")"
printf '[model x]\nexport = exit 3\n\n[model z]\nsource = models/relu.onnx\n' > "$K/rules/m.rules"
rm -rf "$K/build"
printf 'all:\n\t+%s -C %s\n' "$Q" "$K" > "$TMPD/Makefile2"
make -k -f "$TMPD/Makefile2" > "$TMPD/m2" 2>&1
[ -s "$K/build/z/z.onnx" ] && pass "make -k: quantmake keeps going" || fail "make -k: quantmake keeps going" "$(cat "$TMPD/m2")"
printf 'all:\n\t%s -C %s\n' "$Q" "$P" > "$TMPD/Makefile3"
make -j2 -f "$TMPD/Makefile3" > "$TMPD/m3" 2>&1
grep -q "make's jobserver is not available to this recipe (put '+' before quantmake" "$TMPD/m3" &&
	pass "make -j2 with a recipe without '+': one warning that says what to do" ||
	fail "make -j2 with a recipe without '+': one warning" "$(cat "$TMPD/m3")"

# ---- make 4.4's fifo jobserver: tokens taken and given back ----
mkfifo "$TMPD/js"
exec 7<>"$TMPD/js"
printf 'ab' >&7
rm -rf "$P/build" "$P/cache"
MAKEFLAGS=" -j3 --jobserver-auth=fifo:$TMPD/js" "$Q" -C "$P" > "$TMPD/f1" 2>&1
st=$?
left=$(timeout 2 dd bs=1 count=2 <&7 2>/dev/null | wc -c)
exec 7>&-
[ $st -eq 0 ] && [ -s "$P/build/c/c.onnx" ] && [ "$left" -eq 2 ] &&
	pass "--jobserver-auth=fifo:PATH: builds, and both tokens are back in the fifo" ||
	fail "--jobserver-auth=fifo:PATH" "exit $st, $left tokens back: $(cat "$TMPD/f1")"
