#!/bin/sh
# Core build behaviour in temporary projects: rule-file errors, inheritance,
# incremental builds, shared caches, concurrency, interruption, corruption.
. "$(dirname "$0")/lib/common.sh"
mktmp
Q=$QUANTMAKE
M1=$TESTDATA/node/test_relu/model.onnx
M2=$TESTDATA/node/test_abs/model.onnx
M3=$TESTDATA/node/test_sigmoid/model.onnx

newproj() { # newproj DIR: a project with models a (source), b (export), c : a
	rm -rf "$1"
	mkdir -p "$1/rules" "$1/models"
	cp "$M1" "$1/models/relu.onnx"
	cp "$M2" "$1/models/abs.onnx"
	cat > "$1/rules/main.rules" <<'R'
[settings]
jobs = 2

[model a]
source = models/relu.onnx

[model b]
export = cp models/abs.onnx "$out"
export.deps = models/abs.onnx

[model c : a]
infer-shapes = merge
R
}

runs() { # number of actions run by the last build log $1
	grep -c '^\[[0-9]*/[0-9]*\]' "$1"
}

# ---- rule-file errors: file:line, exit 2, did-you-mean ----
P=$TMPD/err
newproj "$P"
printf '[model x]\nsource = models/relu.onnx\ninfer-shape = merge\n' > "$P/rules/main.rules"
expect_err "unknown key names file:line and suggests" 2 '^quantmake: rules/main.rules:3: unknown key .infer-shape.*did you mean .infer-shapes' "$Q" -C "$P"
printf '[model x]\nsource = models/relu.onnx\ninfer-shapes = fast\n' > "$P/rules/main.rules"
expect_err "bad value lists what is expected" 2 'rules/main.rules:3: .*merge, strict, off' "$Q" -C "$P"
printf '[modle x]\nsource = m.onnx\n' > "$P/rules/main.rules"
expect_err "unknown section suggests" 2 'rules/main.rules:1: unknown section.*did you mean' "$Q" -C "$P"
printf '[model x]\n\n[model y]\nsource = models/relu.onnx\n' > "$P/rules/main.rules"
expect_err "model without source or export" 2 "rules/main.rules:1: model 'x' needs" "$Q" -C "$P"
printf '[model x]\nsource = models/relu.onnx\nexport = true\n' > "$P/rules/main.rules"
expect_err "source and export together" 2 "rules/main.rules:1: model 'x' has both" "$Q" -C "$P"
printf '[model x : bse]\n[model base]\nsource = models/relu.onnx\n' > "$P/rules/main.rules"
expect_err "unknown base suggests" 2 "rules/main.rules:1: .*unknown model 'bse'.*did you mean 'base'" "$Q" -C "$P"
printf '[model x]\nsource = @y\n[model y]\nsource = @x\n' > "$P/rules/main.rules"
expect_err "dependency cycle is named" 2 'dependency cycle: (x -> y -> x|y -> x -> y)' "$Q" -C "$P"
printf '[model x]\nsource = models/missing.onnx\n' > "$P/rules/main.rules"
expect_err "missing source is named" 2 "rules/main.rules:2: model 'x': source 'models/missing.onnx' does not exist" "$Q" -C "$P"
printf '[model x]\nsource = models/relu.onnx\n[model x]\nsource = models/abs.onnx\n' > "$P/rules/main.rules"
expect_err "duplicate model" 2 "rules/main.rules:3: model 'x' is already defined at rules/main.rules:1" "$Q" -C "$P"
printf '[model x]\nsource = models/relu.onnx\nthis line is wrong\n' > "$P/rules/main.rules"
expect_err "syntax error has a line" 2 'rules/main.rules:3: syntax error' "$Q" -C "$P"
printf '[model x]\nsource = ../outside.onnx\n' > "$P/rules/main.rules"
expect_err "paths outside the project are refused" 2 "leaves the project" "$Q" -C "$P"
newproj "$P"
expect_err "unknown target suggests" 2 "unknown target 'cc:exprt' \\(did you mean 'c'\\?\\)" "$Q" -C "$P" cc:exprt
expect_err "unknown target model suggests" 2 "unknown target 'bb' \(did you mean 'b'\?\)" "$Q" -C "$P" bb
expect_err "unknown stage of a model lists its stages" 2 "model 'a' has no stage 'quantize' \(its stages: export\)" "$Q" -C "$P" a:quantize

# ---- a first build, then nothing ----
P=$TMPD/p
newproj "$P"
"$Q" -C "$P" > "$TMPD/log1" 2>&1
st=$?
[ $st -eq 0 ] && [ "$(runs "$TMPD/log1")" -eq 4 ] && pass "first build runs 4 actions" || fail "first build runs 4 actions" "status $st: $(cat "$TMPD/log1")"
check "outputs materialized" cmp "$P/build/a/a.onnx" "$M1"
check "export output materialized" cmp "$P/build/b/b.onnx" "$M2"
check "inherited model builds" test -f "$P/build/c/c.onnx"
"$Q" -C "$P" > "$TMPD/log2" 2>&1
[ "$(runs "$TMPD/log2")" -eq 0 ] && grep -q 'nothing to do' "$TMPD/log2" && pass "second run does nothing" || fail "second run does nothing" "$(cat "$TMPD/log2")"
touch "$P/models/relu.onnx" "$P/models/abs.onnx"
"$Q" -C "$P" > "$TMPD/log3" 2>&1
[ "$(runs "$TMPD/log3")" -eq 0 ] && pass "touch without change rebuilds nothing" || fail "touch without change rebuilds nothing" "$(cat "$TMPD/log3")"

# ---- a changed parameter reruns only what depends on it ----
sed -i 's/infer-shapes = merge/infer-shapes = strict/' "$P/rules/main.rules"
"$Q" -C "$P" --explain > "$TMPD/log4" 2>&1
[ "$(runs "$TMPD/log4")" -eq 1 ] && grep -q '^\[.*infer-shapes c' "$TMPD/log4" && pass "changed parameter reruns only its stage" || fail "changed parameter reruns only its stage" "$(cat "$TMPD/log4")"
grep -q 'explain infer-shapes c: infer-shapes changed: merge -> strict' "$TMPD/log4" && pass "--explain names the changed parameter, old -> new" || fail "--explain names the changed parameter" "$(cat "$TMPD/log4")"

# ---- changed input reruns the chain; -n prints without building ----
cp "$M3" "$P/models/relu.onnx"
"$Q" -C "$P" -n > "$TMPD/log5" 2>&1
grep -q 'would run export a' "$TMPD/log5" && grep -q 'would run export c' "$TMPD/log5" && ! grep -q 'export b' "$TMPD/log5" && pass "-n says what would run" || fail "-n says what would run" "$(cat "$TMPD/log5")"
check "-n built nothing" cmp "$P/build/a/a.onnx" "$M1"
"$Q" -C "$P" > "$TMPD/log6" 2>&1
check "changed source rebuilt" cmp "$P/build/a/a.onnx" "$M3"
"$Q" -C "$P" b > "$TMPD/log7" 2>&1 && [ "$(runs "$TMPD/log7")" -eq 0 ] && pass "target b up to date" || fail "target b up to date" "$(cat "$TMPD/log7")"
"$Q" -C "$P" -B b > "$TMPD/log8" 2>&1 && [ "$(runs "$TMPD/log8")" -eq 1 ] && pass "-B reruns the target" || fail "-B reruns the target" "$(cat "$TMPD/log8")"
"$Q" -C "$P" c:export > "$TMPD/log9" 2>&1 && test -f "$P/build/c/export/c.onnx" && pass "MODEL:STAGE target materializes the stage" || fail "MODEL:STAGE target materializes the stage" "$(cat "$TMPD/log9")"

# ---- a build file edited by the user is restored, the cache untouched ----
echo garbage > "$P/build/b/b.onnx"
"$Q" -C "$P" > /dev/null 2>&1
check "edited build output restored from the cache" cmp "$P/build/b/b.onnx" "$M2"

# ---- a failing export: exit 1, its stderr shown, nothing cached ----
F=$TMPD/fail
newproj "$F"
cat >> "$F/rules/main.rules" <<'R'

[model bad]
export = echo "exporter exploded" >&2; exit 3
R
"$Q" -C "$F" -k > "$TMPD/flog" 2>&1
st=$?
[ $st -eq 1 ] && grep -q 'exporter exploded' "$TMPD/flog" && grep -q 'failed with exit status 3' "$TMPD/flog" && pass "failing export: exit 1 with its stderr" || fail "failing export: exit 1 with its stderr" "status $st: $(cat "$TMPD/flog")"
check "-k built the others" test -f "$F/build/a/a.onnx"
[ ! -e "$F/build/bad" ] && pass "failed model leaves no output" || fail "failed model leaves no output"
"$Q" -C "$F" -k bad > "$TMPD/flog2" 2>&1
grep -q 'exporter exploded' "$TMPD/flog2" && pass "failure not cached: reruns" || fail "failure not cached: reruns" "$(cat "$TMPD/flog2")"
printf '[model bad]\nexport = echo not-onnx > "$out"\n' > "$F/rules/main.rules"
expect_err "export writing a non-model is an error" 1 "not an ONNX model" "$Q" -C "$F"
printf '[model bad]\nexport = true\n' > "$F/rules/main.rules"
expect_err "export writing nothing is an error" 1 "wrote no file to \\\$out" "$Q" -C "$F"

# ---- $out is absolute: an export command may change directory ----
printf '[model sub]\nexport = mkdir -p sub && cd sub && cp ../models/abs.onnx "$out"\n' > "$F/rules/main.rules"
"$Q" -C "$F" > "$TMPD/sublog" 2>&1 && cmp -s "$F/build/sub/sub.onnx" "$M2" && pass "export command may cd before writing \$out" || fail "export command may cd before writing \$out" "$(cat "$TMPD/sublog")"

# ---- export command text and deps are in the key ----
E=$TMPD/exp
newproj "$E"
"$Q" -C "$E" > /dev/null 2>&1
cp "$M3" "$E/models/abs.onnx"
"$Q" -C "$E" --explain > "$TMPD/elog" 2>&1
grep -q 'explain export b: file models/abs.onnx changed' "$TMPD/elog" && check "changed export dep rebuilds" cmp "$E/build/b/b.onnx" "$M3" || fail "changed export dep rebuilds" "$(cat "$TMPD/elog")"
sed -i 's|export = cp models/abs.onnx "$out"|export = cp models/abs.onnx "$out" \&\& true|' "$E/rules/main.rules"
"$Q" -C "$E" > "$TMPD/elog2" 2>&1
[ "$(runs "$TMPD/elog2")" -eq 1 ] && pass "changed command text rebuilds" || fail "changed command text rebuilds" "$(cat "$TMPD/elog2")"

# ---- two clones sharing QUANTMAKE_CACHE hit each other's entries ----
export QUANTMAKE_CACHE=$TMPD/shared-cache
newproj "$TMPD/clone1"
newproj "$TMPD/clone2"
"$Q" -C "$TMPD/clone1" > /dev/null 2>&1
"$Q" -C "$TMPD/clone2" > "$TMPD/clog" 2>&1
[ "$(runs "$TMPD/clog")" -eq 0 ] && cmp -s "$TMPD/clone2/build/b/b.onnx" "$M2" && pass "second clone hits the shared cache" || fail "second clone hits the shared cache" "$(cat "$TMPD/clog")"
unset QUANTMAKE_CACHE

# ---- switching git branches and back rebuilds nothing ----
if command -v git >/dev/null; then
	G=$TMPD/git
	newproj "$G"
	( cd "$G" && git init -q && git add -A && git -c user.name=t -c user.email=t@t commit -qm one &&
	  git checkout -q -b other && cp "$M3" models/relu.onnx && git -c user.name=t -c user.email=t@t commit -qam two ) >/dev/null 2>&1
	"$Q" -C "$G" > /dev/null 2>&1
	(cd "$G" && git checkout -q -) 
	"$Q" -C "$G" > /dev/null 2>&1
	(cd "$G" && git checkout -q -)
	"$Q" -C "$G" > "$TMPD/glog1" 2>&1
	(cd "$G" && git checkout -q -)
	"$Q" -C "$G" > "$TMPD/glog2" 2>&1
	[ "$(runs "$TMPD/glog1")" -eq 0 ] && [ "$(runs "$TMPD/glog2")" -eq 0 ] && cmp -s "$G/build/a/a.onnx" "$M1" &&
		pass "switching branches and back rebuilds nothing" || fail "switching branches and back rebuilds nothing" "$(cat "$TMPD/glog1" "$TMPD/glog2")"
else
	skip "switching branches and back rebuilds nothing" "git not installed"
fi

# ---- four processes on one cache at once ----
C4=$TMPD/c4
newproj "$C4"
cat >> "$C4/rules/main.rules" <<'R'

[model slow]
export = sleep 1; cp models/relu.onnx "$out"
export.deps = models/relu.onnx
R
for k in 1 2 3 4; do mkdir -p "$TMPD/c4p$k"; cp -r "$C4/rules" "$C4/models" "$TMPD/c4p$k/"; done
export QUANTMAKE_CACHE=$TMPD/c4cache
for k in 1 2 3 4; do "$Q" -C "$TMPD/c4p$k" > "$TMPD/c4log$k" 2>&1 & done
wait
unset QUANTMAKE_CACHE
ok=1
for k in 1 2 3 4; do
	cmp -s "$TMPD/c4p$k/build/slow/slow.onnx" "$M1" && cmp -s "$TMPD/c4p$k/build/b/b.onnx" "$M2" || ok=0
done
total=$(cat "$TMPD"/c4log* | grep -c '^\[.*export slow')
[ $ok -eq 1 ] && pass "four processes on one cache all succeed" || fail "four processes on one cache all succeed" "$(cat "$TMPD"/c4log*)"
# idle work directories stay for the next build (cache/tmp/act-N): empty
[ "$total" -ge 1 ] && [ -z "$(find "$TMPD/c4cache/tmp" ! -type d)" ] && pass "concurrent builds leave no temporaries" || fail "concurrent builds leave no temporaries" "$(find "$TMPD/c4cache/tmp")"

# ---- SIGKILL mid-stage, then rerun ----
K=$TMPD/kill
newproj "$K"
printf '[model slow]\nexport = cp models/relu.onnx "$out.part"; sleep 30; mv "$out.part" "$out"\n' > "$K/rules/main.rules"
setsid "$Q" -C "$K" > /dev/null 2>&1 &
qpid=$!
sleep 1
pkill -KILL -s "$(ps -o sid= -p $qpid | tr -d ' ')" 2>/dev/null
kill -KILL $qpid 2>/dev/null
wait $qpid 2>/dev/null
[ ! -e "$K/build/slow/slow.onnx" ] && [ -z "$(ls "$K/cache/actions" 2>/dev/null)" ] && pass "killed build leaves no output or record" || fail "killed build leaves no output or record"
printf '[model slow]\nexport = cp models/relu.onnx "$out"\n' > "$K/rules/main.rules"
# the killed build's work directory (slow.onnx.part in it) is taken and emptied
"$Q" -C "$K" > /dev/null 2>&1 && cmp -s "$K/build/slow/slow.onnx" "$M1" && [ -z "$(find "$K/cache/tmp" ! -type d)" ] &&
	pass "rerun after SIGKILL ends correct" || fail "rerun after SIGKILL ends correct" "$(find "$K/cache/tmp")"

# ---- an action killed in its work directory: the next one there starts clean ----
# Actions reuse work directories (cache/tmp/act-N): with -j1 both run in the
# same one, and what the killed stage left must not become the next one's
# output or input. A cache from before the single lock file (locks/) works.
W=$TMPD/work
newproj "$W"
cat > "$W/rules/main.rules" <<'R'
[settings]
jobs = 1

[model dies]
export = cp models/relu.onnx "$out"; echo junk > "$outdir/junk.txt"; echo x > "$outdir/../in/stale.onnx"; kill -KILL $PPID; exit 1

[model next]
export = ls "$outdir" "$outdir/../in" > "$out.ls"; cp models/abs.onnx "$out"
R
mkdir -p "$W/cache/locks" && touch "$W/cache/locks/00000000000000000000000000000000"
"$Q" -C "$W" -k > "$TMPD/wlog" 2>&1
st=$?
[ $st -eq 1 ] && grep -q 'dies:export: killed by signal 9' "$TMPD/wlog" && cmp -s "$W/build/next/next.onnx" "$M2" &&
	[ "$(ls "$W/build/next")" = "$(printf 'next.onnx\nnext.onnx.ls')" ] &&
	[ "$(grep -c . "$W/build/next/next.onnx.ls")" -eq 3 ] && ! grep -q 'junk\|stale' "$W/build/next/next.onnx.ls" &&
	[ -z "$(find "$W/cache/tmp" ! -type d)" ] &&
	pass "a killed action's leftovers do not reach the next action in its work directory" ||
	fail "a killed action's leftovers do not reach the next action in its work directory" "status $st: $(cat "$TMPD/wlog" "$W/build/next/next.onnx.ls" 2>&1; find "$W/cache/tmp")"

# ---- Ctrl-C stops children and leaves nothing partial ----
I=$TMPD/int
newproj "$I"
printf '[model slow]\nexport = echo $$ > export.pid; sleep 30; cp models/relu.onnx "$out"\n' > "$I/rules/main.rules"
"$Q" -C "$I" > "$TMPD/ilog" 2>&1 &
qpid=$!
# the export runs once its pid is written (a loaded machine and ASan may
# take a while; up to 30 s)
n=0; while [ $n -lt 300 ] && [ ! -s "$I/export.pid" ]; do sleep 0.1; n=$((n + 1)); done
kill -INT $qpid
wait $qpid
st=$?
sleep 0.2
# the export's shell goes too (a signal is delivered, not awaited: up to 5 s)
n=0; while [ $n -lt 50 ] && [ -s "$I/export.pid" ] && kill -0 "$(cat "$I/export.pid")" 2>/dev/null; do sleep 0.1; n=$((n + 1)); done
[ $st -eq 130 ] && [ -s "$I/export.pid" ] && ! kill -0 "$(cat "$I/export.pid")" 2>/dev/null && [ ! -e "$I/build/slow" ] && pass "SIGINT stops children, exit 130, nothing partial" || fail "SIGINT stops children, exit 130, nothing partial" "status $st $(cat "$TMPD/ilog")"

# ---- a corrupted cache object is detected and rebuilt ----
R=$TMPD/corrupt
newproj "$R"
"$Q" -C "$R" > /dev/null 2>&1
for o in $(find "$R/cache/objects" -type f); do chmod u+w "$o"; printf 'XX' | dd of="$o" bs=1 seek=3 conv=notrunc 2>/dev/null; done
rm -rf "$R/build"
"$Q" -C "$R" > "$TMPD/rlog" 2>&1
st=$?
[ $st -eq 0 ] && grep -q 'corrupt cache object' "$TMPD/rlog" && cmp -s "$R/build/a/a.onnx" "$M1" && cmp -s "$R/build/b/b.onnx" "$M2" && pass "corrupted cache objects are rebuilt" || fail "corrupted cache objects are rebuilt" "status $st: $(cat "$TMPD/rlog")"

# ---- unwritable cache and build directories ----
if [ "$(id -u)" != 0 ]; then
	U=$TMPD/unw
	newproj "$U"
	mkdir -p "$U/ro"; chmod 555 "$U/ro"
	QUANTMAKE_CACHE=$U/ro/cache expect_err "unwritable cache is named" 2 "cache directory '.*ro/cache'" "$Q" -C "$U"
else
	U=$TMPD/unw
	newproj "$U"
	echo x > "$U/notadir"
	QUANTMAKE_CACHE=$U/notadir/cache expect_err "unusable cache is named" 2 "cache directory '.*notadir/cache' is not usable" "$Q" -C "$U"
	printf '[settings]\nbuild-dir = notadir/build\n[model a]\nsource = models/relu.onnx\n' > "$U/rules/main.rules"
	expect_err "unusable build directory is named" 1 "notadir/build" "$Q" -C "$U"
fi

# ---- a failed stage's files are kept for the user, outside the cache ----
F=$TMPD/failproj
mkdir -p "$F/rules"
printf '[model f]\nexport = echo "why it failed" > "$outdir/report.txt"; exit 3\n' > "$F/rules/a.rules"
"$Q" -C "$F" > "$TMPD/flog" 2>&1
st=$?
[ $st -eq 1 ] && grep -q "why it failed" "$F/build/f/failed/export/report.txt" 2>/dev/null && grep -q 'build/f/failed/export/' "$TMPD/flog" &&
	[ -z "$(find "$F/cache/objects" -type f 2>/dev/null)" ] && pass "a failed stage's files are kept in build/MODEL/failed/STAGE/, nothing cached" ||
	fail "a failed stage's files are kept in build/MODEL/failed/STAGE/, nothing cached" "status $st: $(cat "$TMPD/flog")"
printf '[model f]\nexport = cp %s "$out"\n' "$M1" > "$F/rules/a.rules"
"$Q" -C "$F" > "$TMPD/flog2" 2>&1 && [ -f "$F/build/f/f.onnx" ] && [ ! -e "$F/build/f/failed" ] &&
	pass "a successful build removes the stale failed/ directory" || fail "a successful build removes the stale failed/ directory" "$(cat "$TMPD/flog2"; find "$F/build")"

# ---- clean and gc ----
"$Q" -C "$P" clean > /dev/null 2>&1 && [ ! -e "$P/build" ] && [ -d "$P/cache" ] && pass "clean removes build/ and keeps the cache" || fail "clean removes build/ and keeps the cache"
"$Q" -C "$P" > "$TMPD/cl2" 2>&1 && [ "$(runs "$TMPD/cl2")" -eq 0 ] && cmp -s "$P/build/a/a.onnx" "$M3" && pass "after clean, outputs come from the cache" || fail "after clean, outputs come from the cache" "$(cat "$TMPD/cl2")"
"$Q" -C "$P" gc --max-size 0 > "$TMPD/gclog" 2>&1
[ -n "$(find "$P/cache/objects" -type f)" ] && grep -q '^gc: kept .* used in the last 600s' "$TMPD/gclog" && pass "gc keeps what was used within its grace period" || fail "gc keeps what was used within its grace period" "$(cat "$TMPD/gclog")"
"$Q" -C "$P" gc --max-size 0 --grace 0 > "$TMPD/gclog" 2>&1
[ -z "$(find "$P/cache/objects" -type f)" ] && grep -q '^gc: removed' "$TMPD/gclog" && pass "gc --max-size 0 --grace 0 empties the store" || fail "gc --max-size 0 --grace 0 empties the store" "$(cat "$TMPD/gclog")"
# the build log does not stand in for the records gc removed: the actions
# run again, so the cache holds them again, with the same bytes
"$Q" -C "$P" > "$TMPD/gclog1" 2>&1
[ "$(runs "$TMPD/gclog1")" -ge 1 ] && [ -n "$(find "$P/cache/objects" -type f)" ] && cmp -s "$P/build/a/a.onnx" "$M3" && pass "after gc the build fills the cache again" || fail "after gc the build fills the cache again" "$(cat "$TMPD/gclog1")"
rm -rf "$P/build/b"
"$Q" -C "$P" > "$TMPD/gclog2" 2>&1
[ "$(runs "$TMPD/gclog2")" -eq 0 ] && cmp -s "$P/build/b/b.onnx" "$M2" && pass "then a removed output comes from the cache" || fail "then a removed output comes from the cache" "$(cat "$TMPD/gclog2")"
expect_err "gc rejects a bad duration" 2 "invalid duration" "$Q" -C "$P" gc --max-size 1G --grace 5x
expect_err "gc rejects a bad size" 2 "invalid size" "$Q" -C "$P" gc --max-size 12Q
"$Q" -C "$P" graph > "$TMPD/graph" 2>&1 && grep -q '"c:export" -> "c:infer-shapes"' "$TMPD/graph" && pass "graph prints the action graph" || fail "graph prints the action graph"
expect_err "bad -j" 2 "-j expects a number" "$Q" -C "$P" -j 0
expect_err "unknown option" 2 "unknown option '--frobnicate'" "$Q" -C "$P" --frobnicate

# ---- under make -jN, make's jobserver sets how many actions run at once ----
if command -v make >/dev/null; then
	J=$TMPD/js
	mkdir -p "$J/rules"
	for k in 1 2 3 4 5 6; do
		printf '[model m%s]\nexport = echo + >> conc.log; sleep 0.4; echo - >> conc.log; cp %s "$out"\n' "$k" "$M1" >> "$J/rules/a.rules"
	done
	printf 'all:\n\t+%s -C %s\n' "$Q" "$J" > "$J/Makefile"
	maxconc() { awk '/\+/{c++; if (c>m) m=c} /-/{c--} END{print m}' "$J/conc.log"; }
	make -s -C "$J" -j2 > /dev/null 2>&1
	m2=$(maxconc)
	rm -rf "$J/build" "$J/cache" "$J/conc.log"
	make -s -C "$J" -j6 > /dev/null 2>&1
	m6=$(maxconc)
	[ "$m2" -le 2 ] && [ "$m6" -ge 3 ] && pass "make's jobserver limits parallel actions (max $m2 under -j2, $m6 under -j6)" ||
		fail "make's jobserver limits parallel actions" "max $m2 under -j2, $m6 under -j6"
fi

# ---- disk full: no partial object, record or output ----
D=$TMPD/full
mkdir -p "$D/proj/rules" "$D/fs"
if [ -x "$PY" ] && mount -t tmpfs -o size=1M tmpfs "$D/fs" 2>/dev/null; then
	"$PY" -c "
import numpy as np, onnx
from onnx import helper, numpy_helper, TensorProto
w = numpy_helper.from_array(np.arange(600000, dtype=np.float32), 'w')
g = helper.make_graph([helper.make_node('Identity', ['w'], ['y'])], 'g', [],
    [helper.make_tensor_value_info('y', TensorProto.FLOAT, [600000])], [w])
onnx.save(helper.make_model(g), '$D/proj/big.onnx')"
	printf '[model big]\nsource = big.onnx\n' > "$D/proj/rules/a.rules"
	QUANTMAKE_CACHE=$D/fs/cache "$Q" -C "$D/proj" > "$TMPD/dlog" 2>&1
	st=$?
	[ $st -eq 1 ] && grep -q 'No space left on device' "$TMPD/dlog" && [ -z "$(find "$D/fs/cache/objects" "$D/fs/cache/actions" -type f 2>/dev/null)" ] &&
		[ -z "$(find "$D/fs/cache/tmp" ! -type d)" ] && pass "full cache disk: exit 1, nothing stored, no temporaries" ||
		fail "full cache disk: exit 1, nothing stored, no temporaries" "status $st: $(cat "$TMPD/dlog")"
	printf '[settings]\nbuild-dir = %s/fs/build\n[model big]\nsource = big.onnx\n' "$D" > "$D/proj/rules/a.rules"
	"$Q" -C "$D/proj" > "$TMPD/dlog2" 2>&1
	st=$?
	[ $st -eq 1 ] && grep -q 'No space left on device' "$TMPD/dlog2" && [ -z "$(find "$D/fs/build" -name '*.onnx*' 2>/dev/null)" ] &&
		pass "full build disk: exit 1, no partial output" || fail "full build disk: exit 1, no partial output" "status $st: $(cat "$TMPD/dlog2"; find "$D/fs/build")"
	umount "$D/fs"
else
	skip "disk full" "needs root (tmpfs mount) and the Python venv"
fi
