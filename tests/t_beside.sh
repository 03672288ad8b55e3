#!/bin/sh
# calibrate runs beside infer-shapes (src/build.c, expand_model: Stage
# off_chain / annotates / side_of): it takes the exported model, so the two
# stages run at once, and quantize takes the model from infer-shapes and
# the statistics from calibrate as a second input. The graph shows those
# edges; the statistics and the quantized model are those of a build that
# calibrates the inferred model (infer-shapes = off makes export's model
# the input of both); a dry run after new samples lists quantize and
# verify too; a lost statistics object is rebuilt when quantize needs it;
# a failed calibrate stops quantize.
. "$(dirname "$0")/lib/common.sh"
mktmp
Q=$QUANTMAKE
if ! "$PY" -c 'import onnx, numpy' 2>/dev/null; then
	fail "calibrate beside infer-shapes" "$PY lacks onnx/numpy (run scripts/venv.sh)"
	exit 0
fi

cat > "$TMPD/mk.py" <<'EOF'
import os, sys
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
D = sys.argv[1]
r = np.random.default_rng(11)
w = numpy_helper.from_array(r.standard_normal((8, 6)).astype(np.float32), "w")
w2 = numpy_helper.from_array(r.standard_normal((6, 4)).astype(np.float32), "w2")
g = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["h"], name="mm"),
                       helper.make_node("Relu", ["h"], ["hr"], name="relu"),
                       helper.make_node("MatMul", ["hr", "w2"], ["y"], name="mm2")], "m",
                      [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 8])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 4])], [w, w2])
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
m.ir_version = 7
onnx.save(m, os.path.join(D, "model.onnx"))
for d in ("data", "more"):
    os.makedirs(os.path.join(D, d))
for i in range(8):
    np.save(os.path.join(D, "data", "s%d.npy" % i), r.standard_normal((1, 8)).astype(np.float32))
np.save(os.path.join(D, "more", "t0.npy"), 3 * r.standard_normal((1, 8)).astype(np.float32))
EOF
P=$TMPD/p
mkdir -p "$P/rules"
if ! "$PY" "$TMPD/mk.py" "$P"; then
	fail "calibrate beside infer-shapes" "cannot make the model"
	exit 0
fi
# rules CALIBRATION [MORE LINES]
rules() {
	printf '[model m]\nsource = model.onnx\nquantize = static\nquantize.calibration = %s\n%s' "$1" "$2" > "$P/rules/m.rules"
}
edge() { grep -qF "\"m:$1\" -> \"m:$2\"$3;" "$P/graph"; }

# ---- the graph ----
rules data ''
"$Q" -C "$P" graph > "$P/graph" 2>&1
if edge export infer-shapes && edge export calibrate && edge infer-shapes quantize &&
   edge calibrate quantize ' [style=dashed]' && ! edge infer-shapes calibrate && ! edge calibrate quantize ''; then
	pass "graph: calibrate takes export's model, quantize infer-shapes' model and calibrate's statistics"
else
	fail "graph: calibrate takes export's model, quantize infer-shapes' model and calibrate's statistics" "$(cat "$P/graph")"
fi
rules data 'preprocess = default
verify.data = data
'
"$Q" -C "$P" graph > "$P/graph" 2>&1
if edge infer-shapes preprocess && edge preprocess calibrate && edge preprocess quantize &&
   edge calibrate quantize ' [style=dashed]' && edge quantize verify && edge preprocess verify ' [style=dashed]' &&
   edge calibrate verify ' [style=dashed]'; then
	pass "graph: after preprocess, calibrate takes preprocess' model; verify gets the float model and the statistics"
else
	fail "graph: after preprocess, calibrate takes preprocess' model; verify gets the float model and the statistics" "$(cat "$P/graph")"
fi
rules data 'infer-shapes = off
'
"$Q" -C "$P" graph > "$P/graph" 2>&1
if edge export calibrate && edge export quantize && edge calibrate quantize ' [style=dashed]'; then
	pass "graph: without infer-shapes both take export's model"
else
	fail "graph: without infer-shapes both take export's model" "$(cat "$P/graph")"
fi

# ---- the same statistics and model as calibrating the inferred model ----
# infer-shapes = off: calibrate and quantize both take export's model, so
# its statistics are those of the model as exported; with infer-shapes on,
# calibrate must produce the same bytes (it does not read the types)
rules data ''
QUANTMAKE_CACHE=$P/cache "$Q" -C "$P" all m:calibrate > "$P/log1" 2>&1
s1=$?
cp "$P/build/m/calibrate/calibration.stats" "$TMPD/on.stats" 2>/dev/null
rm -rf "$P/build"
rules data 'infer-shapes = off
'
QUANTMAKE_CACHE=$P/cache2 "$Q" -C "$P" all m:calibrate > "$P/log2" 2>&1
s2=$?
if [ $s1 = 0 ] && [ $s2 = 0 ] && cmp -s "$TMPD/on.stats" "$P/build/m/calibrate/calibration.stats" &&
   grep -q "calibrate m" "$P/log2"; then
	pass "statistics of the exported model are those the inferred model would give"
else
	fail "statistics of the exported model are those the inferred model would give" "status $s1/$s2: $(cat "$P/log1" "$P/log2")"
fi
"$PY" - "$P/build/m/m.onnx" <<'EOF' > "$TMPD/ort" 2>&1 && pass "the quantized model runs in onnxruntime" || fail "the quantized model runs in onnxruntime" "$(cat "$TMPD/ort")"
import sys, numpy as np, onnxruntime as ort
s = ort.InferenceSession(sys.argv[1], providers=["CPUExecutionProvider"])
y = s.run(None, {"x": np.ones((2, 8), np.float32)})[0]
assert y.shape == (2, 4), y.shape
EOF

# ---- a dry run after new samples lists the stages that take them ----
rules data 'verify.data = data
'
rm -rf "$P/build"
QUANTMAKE_CACHE=$P/cache "$Q" -C "$P" > "$P/log3" 2>&1
rules 'data more' 'verify.data = data
'
QUANTMAKE_CACHE=$P/cache "$Q" -C "$P" -n > "$P/log4" 2>&1
if grep -q "^would run calibrate m: file .*more/t0.npy" "$P/log4" &&
   grep -q "^would run quantize m: its input from calibrate changes" "$P/log4" &&
   grep -q "^would run verify m: its input from quantize changes" "$P/log4" &&
   ! grep -q "would run infer-shapes\|would run export" "$P/log4"; then
	pass "dry run: new samples rerun calibrate, quantize and verify, not infer-shapes"
else
	fail "dry run: new samples rerun calibrate, quantize and verify, not infer-shapes" "$(cat "$P/log3" "$P/log4")"
fi

# ---- a lost statistics object is rebuilt when quantize needs it ----
QUANTMAKE_CACHE=$P/cache "$Q" -C "$P" all m:calibrate > "$P/log5" 2>&1
for o in $(find "$P/cache/objects" -type f); do
	cmp -s "$o" "$P/build/m/calibrate/calibration.stats" && rm -f "$o"
done
rules 'data more' 'verify.data = data
quantize.exclude-nodes = mm2
'
QUANTMAKE_CACHE=$P/cache "$Q" -C "$P" > "$P/log6" 2>&1
st=$?
cp "$P/build/m/m.onnx" "$TMPD/rebuilt.onnx" 2>/dev/null
rm -rf "$P/build"
QUANTMAKE_CACHE=$P/cache3 "$Q" -C "$P" > "$P/log7" 2>&1
if [ $st = 0 ] && grep -q "rebuilding m:calibrate" "$P/log6" && grep -q "calibrate m" "$P/log6" &&
   grep -q "quantize m" "$P/log6" && cmp -s "$TMPD/rebuilt.onnx" "$P/build/m/m.onnx"; then
	pass "a lost statistics object: quantize rebuilds calibrate and goes on"
else
	fail "a lost statistics object: quantize rebuilds calibrate and goes on" "status $st: $(cat "$P/log6")"
fi

# ---- a failed calibrate stops quantize; infer-shapes still runs ----
rm -rf "$P/build"
np_bad() {
	"$PY" -c 'import numpy as np, sys; np.save(sys.argv[1], np.ones((1, 5), np.float32))' "$1"
}
np_bad "$P/more/t0.npy"
QUANTMAKE_CACHE=$P/cache4 "$Q" -C "$P" -k > "$P/log8" 2>&1
st=$?
if [ $st = 1 ] && grep -q "FAILED: calibrate m" "$P/log8" && ! grep -q "quantize m" "$P/log8" &&
   grep -q "infer-shapes m" "$P/log8" && [ ! -e "$P/build/m/m.onnx" ]; then
	pass "a failed calibrate stops quantize and verify (infer-shapes beside it finishes)"
else
	fail "a failed calibrate stops quantize and verify (infer-shapes beside it finishes)" "status $st: $(cat "$P/log8")"
fi
