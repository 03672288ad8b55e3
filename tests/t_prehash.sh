#!/bin/sh
# Declared inputs hashed ahead (src/build.c, prehash_child): with -j2 a
# child process hashes calibrate's samples beside the stages before it and
# hands the key lines over. The keys must be those of a build that hashes
# them when calibrate is ready (-j1): a build with the other -j is up to
# date. An export command may write a sample after it was hashed ahead:
# then the sample is checked again and the key holds what the command
# left, so the next build is up to date too. An edited sample calibrates
# again.
. "$(dirname "$0")/lib/common.sh"
mktmp
Q=$QUANTMAKE
if ! "$PY" -c 'import onnx, numpy' 2>/dev/null; then
	fail "declared inputs hashed ahead" "$PY lacks onnx/numpy (run scripts/venv.sh)"
	exit 0
fi

cat > "$TMPD/mk.py" <<'EOF'
import os, sys
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
D = sys.argv[1]
r = np.random.default_rng(5)
w = numpy_helper.from_array(r.standard_normal((8, 4)).astype(np.float32), "w")
g = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")], "m",
                      [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 8])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 4])], [w])
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
m.ir_version = 7
onnx.save(m, os.path.join(D, "model.onnx"))
os.makedirs(os.path.join(D, "data"))
os.makedirs(os.path.join(D, "alt"))
for i in range(6):
    np.save(os.path.join(D, "data", "s%d.npy" % i), r.standard_normal((1, 8)).astype(np.float32))
np.save(os.path.join(D, "alt", "s0.npy"), 5 * r.standard_normal((1, 8)).astype(np.float32))
EOF
P=$TMPD/p
mkdir -p "$P/rules"
if ! "$PY" "$TMPD/mk.py" "$P"; then
	fail "declared inputs hashed ahead" "cannot make the model"
	exit 0
fi
printf '[model m]\nsource = model.onnx\nquantize = static\nquantize.calibration = data\n' > "$P/rules/m.rules"

# built: calibrate ran; 1: nothing to do
built() { grep -q "calibrate m" "$1"; }

ok=1
QUANTMAKE_CACHE=$P/cache "$Q" -C "$P" -j2 > "$P/log1" 2>&1 && built "$P/log1" || ok=0
rm -rf "$P/build"
QUANTMAKE_CACHE=$P/cache "$Q" -C "$P" -j1 > "$P/log2" 2>&1 && ! built "$P/log2" || ok=0
rm -rf "$P/build" "$P/cache"
QUANTMAKE_CACHE=$P/cache "$Q" -C "$P" -j1 > "$P/log3" 2>&1 && built "$P/log3" || ok=0
rm -rf "$P/build"
QUANTMAKE_CACHE=$P/cache "$Q" -C "$P" -j2 > "$P/log4" 2>&1 && ! built "$P/log4" || ok=0
if [ $ok = 1 ]; then
	pass "samples hashed ahead (-j2) give the keys of samples hashed in turn (-j1)"
else
	fail "samples hashed ahead (-j2) give the keys of samples hashed in turn (-j1)" \
		"$(tail -n 2 "$P/log1" "$P/log2" "$P/log3" "$P/log4" | tr '\n' ' ')"
fi

# an edited sample calibrates again, then the build is up to date
"$PY" -c 'import numpy as np, sys; np.save(sys.argv[1], np.full((1, 8), 3, np.float32))' "$P/data/s3.npy"
if QUANTMAKE_CACHE=$P/cache "$Q" -C "$P" -j2 > "$P/log5" 2>&1 && built "$P/log5" &&
	QUANTMAKE_CACHE=$P/cache "$Q" -C "$P" -j2 > "$P/log6" 2>&1 && ! built "$P/log6"; then
	pass "an edited sample calibrates again, once"
else
	fail "an edited sample calibrates again, once" "$(tail -n 2 "$P/log5" "$P/log6" | tr '\n' ' ')"
fi

# the export command overwrites a sample a while after the build started
# (the samples are hashed ahead by then): the key must hold the new bytes,
# so the next build (export up to date, the sample as the command left
# it) has nothing to do
E=$TMPD/e
mkdir -p "$E/rules"
cp -r "$P/model.onnx" "$P/data" "$P/alt" "$E/"
cat > "$E/rules/m.rules" <<'EOF'
[model m]
export = sleep 0.3 && cp alt/s0.npy data/s0.npy && cp model.onnx "$out"
export.deps = model.onnx alt/s0.npy
quantize = static
quantize.calibration = data
EOF
if QUANTMAKE_CACHE=$E/cache "$Q" -C "$E" -j2 > "$E/log1" 2>&1 && built "$E/log1" &&
	QUANTMAKE_CACHE=$E/cache "$Q" -C "$E" -j2 > "$E/log2" 2>&1 && ! built "$E/log2"; then
	pass "a sample an export command writes is hashed as the command left it"
else
	fail "a sample an export command writes is hashed as the command left it" \
		"$(tail -n 3 "$E/log1" "$E/log2" | tr '\n' ' ')"
fi

# calibrate starts ahead of its key (start_ahead in src/build.c: its input
# was built in this run, the samples' hashes are not in yet). When the key
# then finds it built (export ran again, with the same bytes), its child
# is stopped and nothing downstream runs; when the key is new, the child
# records its result under that key (a -j1 build is then up to date)
H=$TMPD/h
mkdir -p "$H/rules"
cp -r "$P/model.onnx" "$P/data" "$H/"
mkrules() {
	printf '[model m]\nexport = cp model.onnx "$out" # %s\nexport.deps = model.onnx\nquantize = static\nquantize.calibration = data\n' "$1" > "$H/rules/m.rules"
}
ran() { grep -q "^\[[0-9]*/[0-9]*\] $2 m " "$1"; }
mkrules one
QUANTMAKE_CACHE=$H/cache "$Q" -C "$H" -j2 > "$H/log1" 2>&1
s1=$?
cp "$H/build/m/m.onnx" "$TMPD/h1.onnx" 2>/dev/null
mkrules two
QUANTMAKE_CACHE=$H/cache "$Q" -C "$H" -j2 > "$H/log2" 2>&1
s2=$?
if [ $s1 = 0 ] && [ $s2 = 0 ] && ran "$H/log1" calibrate && ran "$H/log2" export && ! ran "$H/log2" calibrate &&
	! ran "$H/log2" quantize && cmp -s "$TMPD/h1.onnx" "$H/build/m/m.onnx" &&
	! ls "$H"/cache/tmp/act-*/key > /dev/null 2>&1; then
	pass "calibrate started ahead of its key stops when the key finds it built"
else
	fail "calibrate started ahead of its key stops when the key finds it built" \
		"status $s1/$s2: $(cat "$H/log1" "$H/log2" | tr '\n' ' ')"
fi
"$PY" -c 'import numpy as np, sys; np.save(sys.argv[1], np.full((1, 8), -2, np.float32))' "$H/data/s1.npy"
mkrules three
QUANTMAKE_CACHE=$H/cache "$Q" -C "$H" -j2 > "$H/log3" 2>&1
s3=$?
QUANTMAKE_CACHE=$H/cache "$Q" -C "$H" -j1 > "$H/log4" 2>&1
s4=$?
if [ $s3 = 0 ] && [ $s4 = 0 ] && ran "$H/log3" calibrate && ran "$H/log3" quantize && ! ran "$H/log4" calibrate &&
	grep -q "nothing to do" "$H/log4"; then
	pass "calibrate started ahead records its result under the key made meanwhile"
else
	fail "calibrate started ahead records its result under the key made meanwhile" \
		"status $s3/$s4: $(cat "$H/log3" "$H/log4" | tr '\n' ' ')"
fi
