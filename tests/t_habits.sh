#!/bin/sh
# make and ninja habits outside the scheduler, rule files checked when read,
# and defaults (issue 23): build options after `release`, `targets`,
# reserved model names, the project root found upward, model names for run
# and inspect, --help; operator names and impossible key combinations
# refused at file:line before anything runs, errors that say the fix;
# build/ and cache/ ignored by git, the fp16 io-type line, preprocess node
# counts with subgraphs, rows of a stacked sample, the man page's key list.
. "$(dirname "$0")/lib/common.sh"
mktmp
Q=$QUANTMAKE
export QUANTMAKE_CACHE=
if ! "$PY" -c 'import onnx, onnxruntime, numpy' 2>/dev/null; then
	fail "oracles" "$PY lacks onnx, onnxruntime or numpy (run scripts/venv.sh)"
	exit 0
fi
runs() { grep -c '^\[[0-9]*/[0-9]*\]' "$1"; }

# models: mm (MatMul, opset 13, batch n), mm9 (the same in opset 9),
# iff (an If with a node in each branch)
P=$TMPD/p
mkdir -p "$P/rules" "$P/models" "$P/data" "$P/sub/deeper"
"$PY" - "$P" <<'PY' || { fail "models" "cannot make the test models"; exit 0; }
import sys, numpy as np, onnx
from onnx import helper, numpy_helper, TensorProto as T
d = sys.argv[1]
rng = np.random.default_rng(0)
def mm(opset):
    w = numpy_helper.from_array(rng.standard_normal((64, 16)).astype(np.float32), "w")
    g = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "mm",
        [helper.make_tensor_value_info("x", T.FLOAT, ["n", 64])],
        [helper.make_tensor_value_info("y", T.FLOAT, ["n", 16])], [w])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 7
    return m
onnx.save(mm(13), d + "/models/mm.onnx")
onnx.save(mm(9), d + "/models/mm9.onnx")
then = helper.make_graph([helper.make_node("Neg", ["x"], ["t"])], "then", [], [helper.make_tensor_value_info("t", T.FLOAT, [4])])
els = helper.make_graph([helper.make_node("Abs", ["x"], ["e"])], "else", [], [helper.make_tensor_value_info("e", T.FLOAT, [4])])
g = helper.make_graph([helper.make_node("If", ["c"], ["y"], then_branch=then, else_branch=els)], "iff",
    [helper.make_tensor_value_info("c", T.BOOL, []), helper.make_tensor_value_info("x", T.FLOAT, [4])],
    [helper.make_tensor_value_info("y", T.FLOAT, [4])])
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
m.ir_version = 7
onnx.save(m, d + "/models/iff.onnx")
np.save(d + "/data/rows.npy", rng.standard_normal((37, 64)).astype(np.float32))
PY
cat > "$P/rules/main.rules" <<'R'
[model mm]
source = models/mm.onnx

[model dyn]
source = models/mm.onnx
quantize = dynamic
verify.data = data/rows.npy

[model half]
source = models/mm.onnx
quantize = fp16

[model halfio : half]
quantize.keep-io-types = true

[model iff]
source = models/iff.onnx
preprocess = default

[release r]
models = mm
R
(cd "$P" && git init -q && git add -A && git -c user.name=t -c user.email=t@e commit -qm first) ||
	{ fail "git project" "cannot commit"; exit 0; }

# ---- --help: one line per option ----
"$Q" --help > "$TMPD/help"
miss=""
for o in "-C DIR" "-f FILE" "-j N" "-k, --keep-going" "-n, --dry-run" "-B, --always-make" "--explain" "--version"; do
	grep -q -- "^  $o[ ,].*[a-z]" "$TMPD/help" || miss="$miss '$o'"
done
[ -z "$miss" ] && pass "--help says what every option does" || fail "--help says what every option does" "missing:$miss"

# ---- build options after the release subcommand ----
"$Q" -C "$P" release -n > "$TMPD/rn" 2>&1
st=$?
[ $st -eq 0 ] && grep -q '^would write dist/r-' "$TMPD/rn" && [ ! -e "$P/dist" ] &&
	pass "release -n (after the subcommand) names the archive, writes nothing" ||
	fail "release -n (after the subcommand) names the archive, writes nothing" "status $st: $(cat "$TMPD/rn")"
"$Q" release -C "$P" -j 2 -k r > "$TMPD/rj" 2>&1 && ls "$P"/dist/r-*.tar.gz > /dev/null 2>&1 &&
	pass "release -C DIR -j 2 -k (after the subcommand) builds and packs" ||
	fail "release -C DIR -j 2 -k (after the subcommand) builds and packs" "$(cat "$TMPD/rj")"

# ---- .gitignore in build/ and cache/ ----
[ "$(cat "$P/build/.gitignore" 2>/dev/null | grep -v '^#')" = "*" ] && [ "$(cat "$P/cache/.gitignore" 2>/dev/null | grep -v '^#')" = "*" ] &&
	pass "build/ and cache/ get a .gitignore holding *" || fail "build/ and cache/ get a .gitignore holding *" "$(ls -a "$P/build" "$P/cache")"
(cd "$P" && git status --porcelain) > "$TMPD/gs"
if [ ! -d "$P/build" ] || [ ! -d "$P/cache" ]; then fail "git status shows neither build/ nor cache/" "no build/ or cache/ to look at"
elif grep -q 'build\|cache' "$TMPD/gs"; then fail "git status shows neither build/ nor cache/" "$(cat "$TMPD/gs")"
else pass "git status shows neither build/ nor cache/"; fi

# ---- targets ----
"$Q" -C "$P" targets > "$TMPD/t" 2>&1
grep -qx 'all: every model' "$TMPD/t" && grep -qx 'mm: model (build/mm/mm.onnx)' "$TMPD/t" &&
	grep -qx 'dyn:quantize: stage' "$TMPD/t" && grep -qx 'dyn:verify: stage' "$TMPD/t" &&
	grep -qx 'iff:preprocess: stage' "$TMPD/t" && ! grep -q '^mm:quantize' "$TMPD/t" &&
	pass "targets lists all, the models and their MODEL:STAGE targets" ||
	fail "targets lists all, the models and their MODEL:STAGE targets" "$(cat "$TMPD/t")"
ok=0
for tg in $(grep -v '^all:' "$TMPD/t" | sed 's/: .*//'); do
	"$Q" -C "$P" -n "$tg" > /dev/null 2>&1 || { ok=0 bad=$tg; break; }
	ok=$((ok + 1))
done
[ $ok -ge 10 ] && pass "every listed target is buildable ($ok)" || fail "every listed target is buildable" "${bad:-no targets listed}"

# ---- from a subdirectory: the project root upward ----
(cd "$P/sub/deeper" && "$Q" mm) > "$TMPD/sd" 2>&1
st=$?
[ $st -eq 0 ] && grep -q "entering directory '$P'" "$TMPD/sd" && [ ! -e "$P/sub/deeper/build" ] && [ -f "$P/build/mm/mm.onnx" ] &&
	pass "a build from a subdirectory finds the project root" ||
	fail "a build from a subdirectory finds the project root" "status $st: $(cat "$TMPD/sd")"
(cd "$P/build/mm" && "$Q" targets) > "$TMPD/sb" 2>&1 && grep -q '^mm: model' "$TMPD/sb" &&
	pass "targets from inside build/MODEL/" || fail "targets from inside build/MODEL/" "$(cat "$TMPD/sb")"
mkdir -p "$TMPD/empty"
expect_err "outside any project: the rules are missing" 2 "no rules: " sh -c "cd '$TMPD/empty' && exec '$Q'"

# ---- a model name wherever a model path is taken ----
"$Q" -C "$P" dyn half > "$TMPD/b1" 2>&1 || fail "build dyn and half" "$(cat "$TMPD/b1")"
"$PY" -c "import numpy as np; np.save('$TMPD/x.npy', np.ones((2, 64), np.float32))"
(cd "$P/sub" && "$Q" run dyn -i "$TMPD/x.npy" -o "$TMPD/y.npz") > "$TMPD/rn1" 2>&1
st=$?
"$Q" run "$P/build/dyn/dyn.onnx" -i "$TMPD/x.npy" -o "$TMPD/y2.npz" > /dev/null 2>&1
[ $st -eq 0 ] && [ -s "$TMPD/y.npz" ] && cmp -s "$TMPD/y.npz" "$TMPD/y2.npz" &&
	pass "run MODEL-NAME (from a subdirectory) runs build/MODEL/MODEL.onnx" ||
	fail "run MODEL-NAME (from a subdirectory) runs build/MODEL/MODEL.onnx" "status $st: $(cat "$TMPD/rn1")"
"$Q" -C "$P" inspect half > "$TMPD/in" 2>&1 && grep -qi 'float16' "$TMPD/in" &&
	pass "inspect MODEL-NAME reads the built output" || fail "inspect MODEL-NAME reads the built output" "$(head -5 "$TMPD/in")"
(cd "$P/sub" && "$Q" infer-shapes half "$TMPD/half-typed.onnx" && "$Q" convert half "$TMPD/half-conv.onnx" &&
	"$Q" preprocess --opset 17 half "$TMPD/half-pre.onnx") > "$TMPD/ic" 2>&1 && "$PY" -c "
import onnx, sys
for f in ['half-typed', 'half-conv', 'half-pre']:
    m = onnx.load('$TMPD/' + f + '.onnx')
    onnx.checker.check_model(m)
    assert m.graph.input[0].type.tensor_type.elem_type == onnx.TensorProto.FLOAT16, f
assert onnx.load('$TMPD/half-pre.onnx').opset_import[0].version == 17
" >> "$TMPD/ic" 2>&1 && pass "infer-shapes, convert and preprocess take a model name as IN" ||
	fail "infer-shapes, convert and preprocess take a model name as IN" "$(tail -3 "$TMPD/ic")"
expect_err "run of a model not built yet says to build it" 2 "model 'iff' is not built yet .*run 'quantmake iff' first" \
	sh -c "cd '$P' && exec '$Q' run iff"
expect_err "a name that is no model is still read as a file" 2 "nosuch: No such file" sh -c "cd '$P' && exec '$Q' inspect nosuch"

# ---- the fp16 io-type line ----
grep -q "quantize: half: fp16: 1 input and 1 output are float16 now: .*quantize.keep-io-types = true keeps them float32" "$TMPD/b1" &&
	pass "fp16 says the inputs and outputs became float16" || fail "fp16 says the inputs and outputs became float16" "$(grep quantize "$TMPD/b1")"
"$Q" -C "$P" halfio > "$TMPD/b2" 2>&1
grep -q "quantize: halfio: fp16: inputs and outputs stay float32 (quantize.keep-io-types)" "$TMPD/b2" &&
	pass "fp16 with keep-io-types says they stay float32" || fail "fp16 with keep-io-types says they stay float32" "$(cat "$TMPD/b2")"

# ---- rows of a stacked sample ----
grep -q "verify: dyn: 1 sample (37 rows)" "$TMPD/b1" && pass "a sample of 37 rows is reported as rows" ||
	fail "a sample of 37 rows is reported as rows" "$(grep 'verify:' "$TMPD/b1")"

# ---- preprocess node counts include subgraphs ----
"$Q" -C "$P" iff > "$TMPD/b3" 2>&1
grep -q "preprocess: iff: 3 -> 3 nodes" "$TMPD/b3" && pass "preprocess counts the nodes of subgraphs" ||
	fail "preprocess counts the nodes of subgraphs" "$(grep 'nodes' "$TMPD/b3")"

# ---- rule files checked when read ----
E=$TMPD/e
mkdir -p "$E/rules" "$E/models" "$E/calib"
cp "$P/models/mm.onnx" "$P/models/mm9.onnx" "$E/models/"
cp "$P/data/rows.npy" "$E/calib/"
bad() { # bad NAME STATUS PATTERN KEYS...: a model with these keys is refused, nothing runs
	name=$1 want=$2 pat=$3
	shift 3
	printf '[model m]\nsource = models/mm.onnx\n' > "$E/rules/main.rules"
	for k in "$@"; do echo "$k" >> "$E/rules/main.rules"; done
	rm -rf "$E/build"
	expect_err "$name" "$want" "$pat" "$Q" -C "$E"
	[ ! -e "$E/build/.quantmake" ] || fail "$name: nothing runs" "$(ls -R "$E/build" | head)"
}
bad "exclude-ops = conv: not an operator, did you mean Conv" 2 \
	"^quantmake: rules/main.rules:4: model 'm': quantize.exclude-ops: 'conv' is not an operator \(did you mean 'Conv'\?\)" \
	"quantize = dynamic" "quantize.exclude-ops = MatMul conv"
bad "quantize.ops = Cnv: did you mean Conv" 2 "rules/main.rules:4: .*quantize.ops: 'Cnv' is not an operator \(did you mean 'Conv'\?\)" \
	"quantize = dynamic" "quantize.ops = Cnv"
bad "an operator name far from any: says what is expected" 2 "rules/main.rules:4: .*'Frobnicate' is not an operator: expected ONNX operator names" \
	"quantize = dynamic" "quantize.exclude-ops = Frobnicate"
bad "quantize.calibration with dynamic: at read time" 2 "rules/main.rules:4: model 'm': quantize.calibration is only used by quantize = static" \
	"quantize = dynamic" "quantize.calibration = calib/rows.npy"
bad "per-channel with fp16: at read time" 2 "rules/main.rules:4: model 'm': quantize.per-channel is not used by quantize = fp16" \
	"quantize = fp16" "quantize.per-channel = true"
bad "a quantize key without quantize: at read time" 2 "rules/main.rules:3: model 'm' sets quantize.weights but not quantize" \
	"quantize.weights = int8"
printf '[model m]\nsource = models/mm.onnx\nquantize = dynamic\nquantize.exclude-ops = MatMul Gemm QLinearConv\n' > "$E/rules/main.rules"
check "correct operator names (ONNX and com.microsoft) are accepted" "$Q" -C "$E" -n
printf '[model m]\nsource = ../outside.onnx\n' > "$E/rules/main.rules"
expect_err "source leaving the project: file:line" 2 "^quantmake: rules/main.rules:2: model 'm': source '../outside.onnx' leaves the project" "$Q" -C "$E"
printf '[model m]\nsource = models/mm9.onnx\nquantize = dynamic\n' > "$E/rules/main.rules"
expect_err "dynamic on opset 9 says to set preprocess.opset = 13" 1 \
	"rules/main.rules:3: model 'm': quantize = dynamic needs opset >= 11 .* imports opset 9: add preprocess.opset = 13" "$Q" -C "$E"
printf 'preprocess.opset = 13\n' >> "$E/rules/main.rules"
check "... and with preprocess.opset = 13 it builds" "$Q" -C "$E"

# ---- a file of many rows for a fixed batch; random inputs on symbolic spatial dims ----
"$PY" - "$E" <<'PY'
import sys, numpy as np, onnx
from onnx import helper, numpy_helper, TensorProto as T
d = sys.argv[1]
rng = np.random.default_rng(1)
w = numpy_helper.from_array(rng.standard_normal((96, 8)).astype(np.float32), "w")
g = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "fx",
    [helper.make_tensor_value_info("x", T.FLOAT, [1, 16, 96])],
    [helper.make_tensor_value_info("y", T.FLOAT, [1, 16, 8])], [w])
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]); m.ir_version = 7
onnx.save(m, d + "/models/fixed.onnx")
np.save(d + "/calib/many.npy", rng.standard_normal((100, 16, 96)).astype(np.float32))
c = numpy_helper.from_array(rng.standard_normal((4, 3, 3, 3)).astype(np.float32), "c")
g = helper.make_graph([helper.make_node("Conv", ["x", "c"], ["y"])], "cv",
    [helper.make_tensor_value_info("x", T.FLOAT, ["n", 3, "h", "w"])],
    [helper.make_tensor_value_info("y", T.FLOAT, ["n", 4, "h2", "w2"])], [c])
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]); m.ir_version = 7
onnx.save(m, d + "/models/conv.onnx")
PY
printf '[model fx]\nsource = models/fixed.onnx\nquantize = static\nquantize.calibration = calib/many.npy\n' > "$E/rules/main.rules"
expect_err "many rows for a fixed batch: the file named, what to do" 1 \
	"calibration sample 1: input 'x' is float \[100,16,96\], expected float \[1,16,96\] \(in .*calib/many.npy\): the file stacks 100 rows but the model's batch is fixed at 1; save each sample in its own file" "$Q" -C "$E"
printf '[model st]\nsource = models/mm.onnx\nquantize = static\nquantize.calibration = calib/rows.npy\n' > "$E/rules/main.rules"
"$Q" -C "$E" > "$TMPD/st" 2>&1
grep -q "^calibrate: 1 sample (37 rows), " "$TMPD/st" && pass "calibration on one file of 37 rows says so" ||
	fail "calibration on one file of 37 rows says so" "$(grep 'calibrate:' "$TMPD/st")"
printf '[model cv]\nsource = models/conv.onnx\nquantize = dynamic\nverify.data = random\n' > "$E/rules/main.rules"
expect_err "random inputs on symbolic spatial dims: says they are 1, asks for real samples" 1 \
	"verify.data = random gives dimensions 2, 3 of input 'x' the size 1: give real samples in verify.data" "$Q" -C "$E"
printf '[model cv]\nsource = models/mm.onnx\nquantize = dynamic\nverify.data = random\n' > "$E/rules/main.rules"
"$Q" -C "$E" > "$TMPD/rv" 2>&1
grep -q "verify: cv: 16 random samples$" "$TMPD/rv" && pass "random inputs with only a symbolic batch: no note" || fail "random inputs with only a symbolic batch: no note" "$(grep 'verify: cv' "$TMPD/rv")"

# ---- reserved names ----
for n in inspect targets all release; do
	printf '[model ok]\nsource = models/mm.onnx\n\n[model %s]\nsource = models/mm.onnx\n' "$n" > "$E/rules/main.rules"
	expect_err "a model named '$n' is refused at file:line" 2 "^quantmake: rules/main.rules:4: model name '$n' is reserved" "$Q" -C "$E" -n
done

# ---- the man page lists every rule key as quantmake keys does ----
"$Q" keys --man > "$TMPD/keys.man"
sed -n '/^\.\\" BEGIN RULE KEYS/,/^\.\\" END RULE KEYS/p' "$ROOT/doc/quantmake.1" | sed '1d;$d' > "$TMPD/page.man"
[ -s "$TMPD/keys.man" ] && cmp -s "$TMPD/keys.man" "$TMPD/page.man" &&
	pass "the man page's RULE KEYS is quantmake keys --man" ||
	fail "the man page's RULE KEYS is quantmake keys --man" "$(diff "$TMPD/page.man" "$TMPD/keys.man" | head -5)"
n=$(grep -c '^\.TP' "$TMPD/keys.man")
for k in quantize.exclude-ops verify.min-sqnr preprocess.opset cache format infer-shapes; do
	grep -qx "\.B $k" "$TMPD/keys.man" || fail "quantmake keys lists $k" "$n keys"
done
grep -q '^(\[model\], quantize stage; default int8; int8, uint8)' "$TMPD/keys.man" &&
	pass "a key's entry has its section, default and values" || fail "a key's entry has its section, default and values" "$(grep -A2 'quantize.weights' "$TMPD/keys.man")"
exit 0
