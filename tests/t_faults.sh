#!/bin/sh
# Faults in the scheduler and the store (issue: hardening): an export whose
# bytes change from run to run after its object or record is damaged (the
# build hung: a child was forgotten); action records checked by their own
# checksum; -B repairs a damaged object and fsck finds the ones no build
# reads; concurrent builds run each action once (the lock is taken before
# the work); gc beside running builds never fails them; a new cache is
# filled even when the build log knows every action.
. "$(dirname "$0")/lib/common.sh"
mktmp
Q=$QUANTMAKE
"$PY" -c 'import onnx, numpy' 2>"$TMPD/pyerr" || { fail "faults" "$PY lacks onnx/numpy: $(cat "$TMPD/pyerr")"; exit 0; }

cat > "$TMPD/mk.py" <<'PYEOF'
import os, sys
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
D = sys.argv[1]
r = np.random.default_rng(5)
w = numpy_helper.from_array(r.standard_normal((8, 6)).astype(np.float32), "w")
g = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["h"], name="mm"),
                       helper.make_node("Relu", ["h"], ["y"], name="relu")], "m",
                      [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 8])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 6])], [w])
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
m.ir_version = 7
onnx.save(m, os.path.join(D, "m.onnx"))
os.makedirs(os.path.join(D, "data"))
for i in range(4):
    np.save(os.path.join(D, "data", "s%d.npy" % i), r.standard_normal((1, 8)).astype(np.float32))
PYEOF

# newproj DIR: model q, exported by a command whose output differs from
# run to run (a doc_string stamped with a fresh random number), quantized
# statically; models r1..r4 are plain sources for the concurrency checks
newproj() {
	rm -rf "$1"
	mkdir -p "$1/rules"
	"$PY" "$TMPD/mk.py" "$1" || return 1
	cat > "$1/stamp.py" <<'PYEOF'
import os, sys, onnx
m = onnx.load("m.onnx")
m.doc_string = os.urandom(8).hex()
onnx.save(m, sys.argv[1])
PYEOF
	cat > "$1/rules/m.rules" <<R
[settings]
jobs = 2

[model q]
export = "$PY" stamp.py "\$out"
export.deps = m.onnx stamp.py
quantize = static
quantize.calibration = data
R
}
objof() { # objof P MODEL STAGE: the object path of the stage's main output
	rec=$(grep -l "^model $2\$" $(find "$1/cache/actions" -type f) | xargs grep -l "^stage $3\$" | head -1)
	h=$(grep '^out ' "$rec" | head -1 | cut -d' ' -f2)
	echo "$1/cache/objects/$(echo "$h" | cut -c1-2)/$h"
}
recof() {
	grep -l "^model $2\$" $(find "$1/cache/actions" -type f) | xargs grep -l "^stage $3\$" | head -1
}
ran() { grep -c '^\[[0-9]*/[0-9]*\] .*([0-9.]*s)$' "$1"; }
# within SECONDS CMD...: runs CMD, killing it after SECONDS (a hang is a
# failure, not a stuck test run); the command's status, 124 on a timeout
within() { timeout -k 5 "$@"; }

P=$TMPD/p
newproj "$P" || { fail "faults: make project" "cannot make the model"; exit 0; }
within 120 "$Q" -C "$P" -j2 all > "$TMPD/b0" 2>&1 || { fail "faults: first build" "$(cat "$TMPD/b0")"; exit 0; }
cp "$P/build/q/q.onnx" "$TMPD/q0.onnx"

# ---- 1. the hang: export's object deleted, build/ removed, -j2 ----
for try in 1 2 3; do
	rm -f "$(objof "$P" q export)"
	rm -rf "$P/build"
	within 120 "$Q" -C "$P" -j2 all > "$TMPD/h$try" 2>&1
	echo $? > "$TMPD/h$try.st"
done
if [ "$(cat "$TMPD/h1.st" "$TMPD/h2.st" "$TMPD/h3.st" | tr -d '\n')" = 000 ] && [ -s "$P/build/q/q.onnx" ]; then
	pass "a changing export whose object was deleted rebuilds with -j2, no hang (3 of 3)"
else
	fail "a changing export whose object was deleted rebuilds with -j2, no hang" "exits $(cat "$TMPD"/h?.st | tr '\n' ' '): $(tail -5 "$TMPD/h1")"
fi
# the deterministic form: the record names an output that is not there
rec=$(recof "$P" q export)
sed -i 's/^out [0-9a-f]\{32\}/out 0123456789abcdef0123456789abcdef/' "$rec"
rm -rf "$P/build"
within 120 "$Q" -C "$P" -j2 all > "$TMPD/h4" 2>&1
st=$?
[ $st -eq 0 ] && [ -s "$P/build/q/q.onnx" ] && pass "an export record naming a missing output: -j2 rebuilds, no hang" ||
	fail "an export record naming a missing output: -j2 rebuilds, no hang" "exit $st: $(tail -5 "$TMPD/h4")"
# every record written names inputs that exist: the quantized model's key
# holds the export that was finally used
qrec=$(recof "$P" q quantize)
inh=$(grep '^input ' "$qrec" | head -1 | cut -d' ' -f2)
[ -n "$inh" ] && [ -e "$P/cache/objects/$(echo "$inh" | cut -c1-2)/$inh" ] &&
	pass "downstream records name the input that was built, not the lost one" ||
	fail "downstream records name the input that was built, not the lost one" "input $inh"

# ---- 7. records carry a checksum ----
P2=$TMPD/p2
newproj "$P2"
sed -i 's/^export = .*/source = m.onnx/; /^export.deps/d' "$P2/rules/m.rules"
within 120 "$Q" -C "$P2" all > "$TMPD/c0" 2>&1
cp "$P2/build/q/q.onnx" "$TMPD/q2.onnx"
n=0 bad=0
for edit in 's/^out \([0-9a-f]*\) \([0-9]*\) q.onnx/out \1 \2 x.onnx/' '/^out /d' 's/^seconds .*/seconds 9.999/' 's/^model q/model r/' flip; do
	rm -rf "$P2/build"
	rec=$(recof "$P2" q quantize)
	cp "$rec" "$TMPD/rec.bak"
	if [ "$edit" = flip ]; then
		"$PY" -c "
import sys
p = sys.argv[1]; b = bytearray(open(p, 'rb').read()); b[len(b) // 2] ^= 0x20; open(p, 'wb').write(b)" "$rec"
	else
		sed -i "$edit" "$rec"
	fi
	within 120 "$Q" -C "$P2" all > "$TMPD/c1" 2>&1
	st=$?
	n=$((n + 1))
	if [ $st -ne 0 ] || ! cmp -s "$P2/build/q/q.onnx" "$TMPD/q2.onnx" || [ -e "$P2/build/q/x.onnx" ] ||
	   ! grep -q "removing corrupt action record" "$TMPD/c1"; then
		bad=$((bad + 1))
		echo "edit $edit: exit $st" >> "$TMPD/cbad"; tail -3 "$TMPD/c1" >> "$TMPD/cbad"
	fi
done
[ $bad -eq 0 ] && pass "an edited or damaged action record is a miss: $n of $n rebuilt to the same bytes" ||
	fail "an edited or damaged action record is a miss" "$bad of $n wrong: $(cat "$TMPD/cbad")"

# ---- 8. -B repairs a damaged object; fsck finds what no build reads ----
obj=$(objof "$P2" q quantize)
chmod u+w "$obj"; printf 'X' | dd of="$obj" bs=1 seek=20 conv=notrunc 2>/dev/null
within 120 "$Q" -C "$P2" -B all > "$TMPD/f0" 2>&1
"$Q" hash "$obj" | grep -q "^$(basename "$obj") " && pass "-B replaces a damaged object of the same name" ||
	fail "-B replaces a damaged object of the same name" "$("$Q" hash "$obj")"
obj=$(objof "$P2" q infer-shapes)
chmod u+w "$obj"; printf 'X' | dd of="$obj" bs=1 seek=20 conv=notrunc 2>/dev/null
rec=$(recof "$P2" q calibrate)
printf 'junk\n' >> "$rec"
"$Q" -C "$P2" fsck > "$TMPD/fsck" 2>&1
st=$?
[ $st -eq 1 ] && [ ! -e "$obj" ] && [ ! -e "$rec" ] && grep -q '1 damaged and removed.*2 damaged or dangling' "$TMPD/fsck" &&
	pass "fsck removes a damaged object, a damaged record and the record naming the lost object, exit 1" ||
	fail "fsck removes damaged objects and records" "exit $st: $(cat "$TMPD/fsck")"
"$Q" -C "$P2" fsck > "$TMPD/fsck2" 2>&1 && grep -q ' 0 damaged and removed.* 0 damaged' "$TMPD/fsck2" &&
	pass "fsck of a sound store: exit 0" || fail "fsck of a sound store: exit 0" "$(cat "$TMPD/fsck2")"
within 120 "$Q" -C "$P2" all > "$TMPD/f3" 2>&1 && cmp -s "$P2/build/q/q.onnx" "$TMPD/q2.onnx" &&
	pass "after fsck the build rebuilds what was removed, same bytes" || fail "after fsck the build rebuilds" "$(tail -3 "$TMPD/f3")"

# ---- 9. concurrent builds on one cache run each action once ----
P3=$TMPD/p3
mkdir -p "$P3/rules" "$P3/models"
cp "$P/m.onnx" "$P3/models/m.onnx"
cp -r "$P/data" "$P3/data"
: > "$P3/rules/m.rules"
for i in 1 2 3 4 5; do
	printf '[model r%s]\nsource = models/m.onnx\npreprocess = default\nquantize = dynamic\nverify.data = random\nverify.min-sqnr = 5\n\n' "$i" >> "$P3/rules/m.rules"
done
for k in 1 2 3 4; do
	rm -rf "$TMPD/clone$k"; mkdir -p "$TMPD/clone$k"
	cp -r "$P3/rules" "$P3/models" "$P3/data" "$TMPD/clone$k/"
done
for k in 1 2 3 4; do
	QUANTMAKE_CACHE=$TMPD/shared within 300 "$Q" -C "$TMPD/clone$k" -j2 all > "$TMPD/cc$k" 2>&1 &
done
wait
total=0
for k in 1 2 3 4; do total=$((total + $(ran "$TMPD/cc$k"))); done
QUANTMAKE_CACHE=$TMPD/solo within 300 "$Q" -C "$TMPD/clone1" -B -j2 all > "$TMPD/solo.log" 2>&1
one=$(ran "$TMPD/solo.log")
same=1
for k in 2 3 4; do cmp -s "$TMPD/clone1/build/r1/r1.onnx" "$TMPD/clone$k/build/r1/r1.onnx" || same=0; done
[ "$total" -eq "$one" ] && [ $same -eq 1 ] && pass "4 concurrent builds on one cache run each of the $one actions once" ||
	fail "4 concurrent builds on one cache run each action once" "$total runs for $one actions, same bytes: $same"

# ---- 6. gc beside running builds never fails them ----
fails=0 builds=0
( i=0; while [ ! -e "$TMPD/stopgc" ] && [ $i -lt 400 ]; do
	QUANTMAKE_CACHE=$TMPD/shared "$Q" -C "$TMPD/clone1" gc --max-size 0 > /dev/null 2>&1
	QUANTMAKE_CACHE=$TMPD/shared "$Q" -C "$TMPD/clone1" gc --max-size 3M > /dev/null 2>&1
	i=$((i + 1)); done ) &
gcpid=$!
for round in 1 2 3; do
	for k in 1 2; do
		( rm -rf "$TMPD/clone$k/build"
		  QUANTMAKE_CACHE=$TMPD/shared within 300 "$Q" -C "$TMPD/clone$k" -B -j2 all > "$TMPD/g$round$k" 2>&1
		  echo $? > "$TMPD/g$round$k.st" ) &
	done
	wait_for=""; sleep 0
	while [ ! -e "$TMPD/g${round}1.st" ] || [ ! -e "$TMPD/g${round}2.st" ]; do sleep 0.2; done
	for k in 1 2; do
		builds=$((builds + 1))
		[ "$(cat "$TMPD/g$round$k.st")" = 0 ] && cmp -s "$TMPD/clone$k/build/r1/r1.onnx" "$TMPD/clone2/build/r1/r1.onnx" || fails=$((fails + 1))
	done
done
touch "$TMPD/stopgc"; wait $gcpid 2>/dev/null
[ $fails -eq 0 ] && pass "gc --max-size 0 in a loop beside builds: $builds of $builds builds pass" ||
	fail "gc in a loop beside builds" "$fails of $builds failed: $(grep -h -i 'fail\|missing' "$TMPD"/g?? | head -5)"

# ---- a build log never stands in for a cache that lacks the record ----
QUANTMAKE_CACHE=$TMPD/newcache within 120 "$Q" -C "$P2" all > "$TMPD/n1" 2>&1
[ "$(ran "$TMPD/n1")" -ge 1 ] && [ -n "$(find "$TMPD/newcache/objects" -type f)" ] &&
	pass "a build pointed at a new, empty cache fills it (the build log does not answer for it)" ||
	fail "a build pointed at a new cache fills it" "$(tail -3 "$TMPD/n1")"

# ---- clean --cache does not remove a shared cache without --force ----
"$Q" -C "$P2" clean --cache > /dev/null 2>&1
[ ! -d "$P2/cache" ] && pass "clean --cache removes the project's own cache" || fail "clean --cache removes the project's own cache"
QUANTMAKE_CACHE=$TMPD/newcache "$Q" -C "$P2" clean --cache > "$TMPD/cl1" 2>&1
st=$?
[ $st -eq 1 ] && [ -d "$TMPD/newcache/objects" ] && grep -q "lies outside this project.*give --force" "$TMPD/cl1" &&
	pass "clean --cache of a cache outside the project: refused, exit 1, says --force" ||
	fail "clean --cache of a cache outside the project is refused" "exit $st: $(cat "$TMPD/cl1")"
QUANTMAKE_CACHE=$TMPD/newcache "$Q" -C "$P2" clean --cache --force > /dev/null 2>&1 && [ ! -e "$TMPD/newcache" ] &&
	pass "clean --cache --force removes it" || fail "clean --cache --force removes it"
