#!/bin/sh
# Models with external data (all tensors in a separate data file, forced with
# onnx.save(..., save_as_external_data=True, size_threshold=0)) through every
# stage: export (source = PATH and source = @MODEL), infer-shapes,
# preprocess, quantize dynamic/static/fp16, verify and release. Outputs run
# in onnxruntime and match the float model; a data file a stage keeps is one
# cache object shared by the stages (stored once, never copied); a data file
# mostly replaced by quantize is packed; a second run does nothing; editing
# build/ or corrupting the store is detected and repaired; a build killed
# mid-stage leaves no record, no output and no bad object. A tensor that
# preprocess drops becomes a hole (the others keep their offsets); neither
# `convert` nor export ever links a user's (even read-only) data file.
. "$(dirname "$0")/lib/common.sh"
mktmp
Q=$QUANTMAKE
if ! "$PY" -c 'import onnx, onnxruntime, numpy' 2>/dev/null; then
	fail "external data tests" "$PY lacks onnx/onnxruntime (run scripts/venv.sh)"
	exit 0
fi

P=$TMPD/p
mkdir -p "$P/rules" "$P/models"
"$PY" "$ROOT/bench/bigmodel.py" "$TMPD/gen.onnx" --dim 128 --gib 0.002 --batch 0 2>/dev/null &&
"$PY" - "$TMPD/gen.onnx" "$P/models/m.onnx" "$P" <<'PY' || { fail "make the external-data model" "python failed"; exit 0; }
import sys, numpy as np, onnx
src, dst, proj = sys.argv[1:]
m = onnx.load(src)
onnx.save(m, dst, save_as_external_data=True, all_tensors_to_one_file=True,
          location="m.data", size_threshold=0)
# the same with an unused initializer first in its data file (preprocess
# drops it: the rest keeps its offsets, the dead range becomes a hole)
# bytes no tensor refers to, under the 4 KiB of an alignment gap: a stage
# that keeps the file keeps them too (it takes the file whole)
with open(proj + "/models/m.data", "ab") as f:
    f.write(b"\xaa" * 100)
m = onnx.load(src)
dead = onnx.numpy_helper.from_array(np.full((16384,), 3.0, np.float32), "dead")
m.graph.initializer.insert(0, dead)
onnx.save(m, proj + "/models/d.onnx", save_as_external_data=True, all_tensors_to_one_file=True,
          location="d.data", size_threshold=0)
rng = np.random.default_rng(7)
np.save(proj + "/calib.npy", rng.standard_normal((16, 128)).astype(np.float32))
np.save(proj + "/x.npy", rng.standard_normal((1, 128)).astype(np.float32))
PY
printf 'build/\ncache/\ndist/\n' > "$P/.gitignore"
cat > "$P/rules/main.rules" <<'R'
[model fp]
source = models/m.onnx
preprocess = default

[model copy]
source = @fp

[model dead]
source = models/d.onnx
preprocess = default

[model dyn : fp]
quantize = dynamic
verify.data = random
verify.min-cosine = 0.99

[model st : fp]
quantize = static
quantize.calibration = calib.npy
verify.data = random
verify.min-cosine = 0.9

[model h : fp]
quantize = fp16
verify.data = random
verify.min-cosine = 0.999

[release r]
models = fp dyn st h
format = tar.gz
R
(cd "$P" && git init -q && git add -A && git -c user.name=t -c user.email=t@t commit -qm one) 2>/dev/null

"$Q" -C "$P" -j2 > "$TMPD/log1" 2>&1
st=$?
[ $st -eq 0 ] && pass "external-data model builds through every stage" || fail "external-data model builds through every stage" "status $st: $(grep -v '^ ' "$TMPD/log1" | tail -5)"
for s in "export fp" "infer-shapes fp" "preprocess fp" "export copy" "quantize dyn" "quantize st" "quantize h" "verify dyn" "verify st" "verify h"; do
	grep -q "^\[[0-9]*/[0-9]*\] $s " "$TMPD/log1" || fail "stage $s ran" "$(head -c 300 "$TMPD/log1")"
done

# outputs in onnxruntime against the float model
"$PY" - "$P" > "$TMPD/ort" 2>&1 <<'PY'
import sys, numpy as np, onnxruntime as ort
p = sys.argv[1]
x = np.load(p + "/x.npy")
def run(path, x):
    s = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    return s.run(None, {s.get_inputs()[0].name: x.astype(np.float16) if s.get_inputs()[0].type == "tensor(float16)" else x})[0].astype(np.float32)
ref = run(p + "/models/m.onnx", x)
for name, tol in (("fp", 1e-5), ("copy", 1e-5), ("dead", 1e-5), ("dyn", 2e-2), ("st", 5e-2), ("h", 5e-3)):
    y = run(f"{p}/build/{name}/{name}.onnx", x)
    d = float(np.abs(y - ref).max())
    print(name, "ok" if d <= tol else "bad", d)
PY
for n in fp copy dead dyn st h; do
	grep -q "^$n ok" "$TMPD/ort" && pass "onnxruntime runs $n and matches the float model" || fail "onnxruntime runs $n and matches the float model" "$(grep "^$n \|Error" "$TMPD/ort" | head -3)"
done

# the data file kept by infer-shapes, preprocess and source = @fp is the
# export's object: one object, no copy
datahash() { # STAGE MODEL: hash of the m.data output in the action record
	grep -l "^stage $1\$" "$P"/cache/actions/*/* | xargs grep -l "^model $2\$" | xargs sed -n 's/^out \([0-9a-f]*\) [0-9]* m\.data$/\1/p' | head -1
}
e=$(datahash export fp); i=$(datahash infer-shapes fp); pr=$(datahash preprocess fp); c=$(datahash export copy)
[ -n "$e" ] && [ "$e" = "$i" ] && [ "$e" = "$pr" ] && [ "$e" = "$c" ] && cmp -s "$P/build/fp/m.data" "$P/models/m.data" && pass "stages that keep the weights share one data object" || fail "stages that keep the weights share one data object" "export=$e infer=$i pre=$pr copy=$c"
[ "$(ls "$P"/cache/objects/*/* | while read -r f; do [ "$(wc -c < "$f")" -eq "$(wc -c < "$P/models/m.data")" ] && echo "$f"; done | wc -l)" -eq 1 ] && pass "the float data is stored once" || fail "the float data is stored once" "$(ls -l "$P"/cache/objects/*/*)"
links=$(stat -c %h "$P/build/fp/m.data")
[ "$links" -eq 1 ] && pass "build/ holds copies, not links into the store" || fail "build/ holds copies, not links into the store" "link count $links"
# dynamic: int8 weights inline, the biases left in a packed data file
dsize=$(wc -c < "$P/build/dyn/m.data" 2>/dev/null || echo 0)
[ "$dsize" -gt 0 ] && [ "$dsize" -lt $(($(wc -c < "$P/models/m.data") / 4)) ] && pass "quantize packs the little float data it keeps" || fail "quantize packs the little float data it keeps" "dyn m.data $dsize bytes"

# preprocess dropped the dead tensor: its range is a hole, the rest in place
"$PY" -c "
import sys
a = open('$P/models/d.data', 'rb').read()
b = open('$P/build/dead/d.data', 'rb').read()
sys.exit(0 if len(a) == len(b) and a[:65536] != bytes(65536) and b[:65536] == bytes(65536) and a[65536:] == b[65536:] else 1)
" 2>/dev/null && pass "a dropped tensor leaves a hole, the others keep their offsets" || fail "a dropped tensor leaves a hole, the others keep their offsets" "$(ls -l "$P/build/dead" 2>&1 | tail -2)"

# convert (outside a build) copies a read-only data file, never links it
chmod 0444 "$P/models/m.data"
mkdir -p "$TMPD/conv"
"$Q" convert "$P/models/m.onnx" "$TMPD/conv/m.onnx" > /dev/null 2>&1
[ "$(stat -c %h "$P/models/m.data")" -eq 1 ] && cmp -s "$TMPD/conv/m.data" "$P/models/m.data" && pass "convert copies read-only data, never links" || fail "convert copies read-only data, never links" "link count $(stat -c %h "$P/models/m.data")"
chmod 0644 "$P/models/m.data"

# every object's content matches its name
objs_ok() {
	for f in "$P"/cache/objects/*/*; do
		[ "$("$Q" hash "$f" | cut -d' ' -f1)" = "$(basename "$f")" ] || { echo "bad object $f"; return 1; }
	done
}
objs_ok > "$TMPD/objs" && pass "every cache object matches its hash" || fail "every cache object matches its hash" "$(cat "$TMPD/objs")"

QUANTMAKE_STATS=1 "$Q" -C "$P" > "$TMPD/log2" 2>&1
grep -q "0 actions run" "$TMPD/log2" && ! grep -q '^\[' "$TMPD/log2" && pass "second run does nothing" || fail "second run does nothing" "$(head -c 300 "$TMPD/log2")"

# a user editing build/ changes neither the store nor the next result
cp "$P/build/fp/m.data" "$TMPD/good.data"
printf 'garbage' >> "$P/build/fp/m.data"
"$Q" -C "$P" > "$TMPD/log3" 2>&1
cmp -s "$P/build/fp/m.data" "$TMPD/good.data" && ! grep -q '^\[' "$TMPD/log3" && pass "edited build/ file is restored from the store" || fail "edited build/ file is restored from the store" "$(head -c 300 "$TMPD/log3")"
objs_ok > "$TMPD/objs" && pass "editing build/ leaves the store intact" || fail "editing build/ leaves the store intact" "$(cat "$TMPD/objs")"

# a corrupt data object is found when a stage fetches it, and rebuilt
obj=$(ls "$P"/cache/objects/"$(echo "$e" | cut -c1-2)"/"$e")
chmod u+w "$obj" && printf 'x' | dd of="$obj" bs=1 seek=100 conv=notrunc 2>/dev/null
"$Q" -C "$P" -B fp:infer-shapes > "$TMPD/log4" 2>&1
st=$?
# (-B reruns export, whose output replaces the damaged object of the same
# name before infer-shapes fetches it)
[ $st -eq 0 ] && objs_ok > "$TMPD/objs" && cmp -s "$P/build/fp/infer-shapes/m.data" "$TMPD/good.data" && pass "-B over a corrupt data object rebuilds it and repairs the store" || fail "-B over a corrupt data object rebuilds it and repairs the store" "status $st: $(grep -v '^ ' "$TMPD/log4" | head -5)"

# release: the archive carries the data files and verifies
"$Q" -C "$P" release r > "$TMPD/log5" 2>&1
arc=$(ls "$P"/dist/*.tar.gz 2>/dev/null | head -1)
if [ -n "$arc" ] && "$Q" verify-release "$arc" > /dev/null 2>&1; then
	mkdir -p "$TMPD/rel" && tar -xzf "$arc" -C "$TMPD/rel"
	f=$(find "$TMPD/rel" -name fp.onnx | head -1)
	"$PY" -c "
import sys, numpy as np, onnxruntime as ort
a = ort.InferenceSession('$P/models/m.onnx').run(None, {'x': np.load('$P/x.npy')})[0]
b = ort.InferenceSession('$f').run(None, {'x': np.load('$P/x.npy')})[0]
sys.exit(0 if np.abs(a - b).max() <= 1e-5 else 1)" 2>/dev/null && pass "released external-data model runs in onnxruntime" || fail "released external-data model runs in onnxruntime" "$(ls -R "$TMPD/rel" | head)"
else
	fail "release of external-data models" "$(grep -v '^ ' "$TMPD/log5" | tail -3)"
fi

# a build killed while a stage writes its data file leaves nothing visible
K=$TMPD/k
mkdir -p "$K/rules" "$K/models"
cp "$P/models/m.onnx" "$P/models/m.data" "$K/models/"
printf '[model slow]\nexport = cp models/m.onnx "$out"; head -c 1000 models/m.data > "$outdir/m.data"; sleep 30; cp models/m.data "$outdir/"\nexport.deps = models/m.onnx models/m.data\n' > "$K/rules/main.rules"
setsid "$Q" -C "$K" > /dev/null 2>&1 &
qpid=$!
i=0
while [ $i -lt 100 ] && ! ls "$K"/cache/tmp/act-*/out/m.data > /dev/null 2>&1; do sleep 0.1; i=$((i + 1)); done
# the stage runs in its own process group: kill the whole session
sid=$(ps -o sid= -p "$qpid" | tr -d ' ')
[ -n "$sid" ] && ps -e -o pid=,sid= | awk -v s="$sid" '$2 == s {print $1}' | xargs -r kill -KILL 2>/dev/null
wait $qpid 2>/dev/null
[ ! -e "$K/build/slow" ] && [ -z "$(ls "$K/cache/actions" 2>/dev/null)" ] && [ -z "$(ls "$K/cache/objects" 2>/dev/null)" ] && pass "killed build leaves no record, output or object" || fail "killed build leaves no record, output or object" "$(ls -R "$K/build" "$K/cache/actions" "$K/cache/objects" 2>&1 | head)"
printf '[model slow]\nexport = cp models/m.onnx "$out"; cp models/m.data "$outdir/"\nexport.deps = models/m.onnx models/m.data\n' > "$K/rules/main.rules"
"$Q" -C "$K" > /dev/null 2>&1 && cmp -s "$K/build/slow/m.data" "$K/models/m.data" && pass "rerun after SIGKILL ends correct" || fail "rerun after SIGKILL ends correct"

# a project file is copied into the store, never linked, even read-only
R=$TMPD/ro
mkdir -p "$R/rules" "$R/models"
cp "$P/models/m.onnx" "$P/models/m.data" "$R/models/"
chmod 0444 "$R/models/m.data"
printf '[model fp]\nsource = models/m.onnx\n' > "$R/rules/main.rules"
"$Q" -C "$R" > /dev/null 2>&1
[ "$(stat -c %h "$R/models/m.data")" -eq 1 ] && pass "read-only source data is copied, not linked" || fail "read-only source data is copied, not linked" "link count $(stat -c %h "$R/models/m.data")"
