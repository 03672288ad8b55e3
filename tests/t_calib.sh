#!/bin/sh
# The calibrate stage's batching (src/quant/calib.c): samples stacked into
# one interpreter run must give the same calibration.stats, byte for byte,
# as one sample at a time. The one-at-a-time reference is the same model
# with its batch dimension fixed to 1, which cannot be batched. A model
# whose first dimension is not a batch (a ReduceSum over it) must fall back
# to one sample at a time; samples of another shape than the probed ones
# run alone; a bad sample in the middle of a batch is still named. Inputs
# batched on another axis than the first, beside shared scalar inputs
# (silero-vad's shape), are stacked too (see 'a batch on another axis').
. "$(dirname "$0")/lib/common.sh"
mktmp
export PYTHONPATH="$ROOT/tests/lib"  # calibstats.py reads calibration.stats
Q=$QUANTMAKE
if ! "$PY" -c 'import onnx, numpy' 2>/dev/null; then
	fail "calibration batching" "$PY lacks onnx/numpy (run scripts/venv.sh)"
	exit 0
fi

# mk.py DIR: models and samples
cat > "$TMPD/mk.py" <<'EOF'
import os, sys
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
D = sys.argv[1]
r = np.random.default_rng(3)

def save(nodes, inits, inp, out, path, batch, opset=13):
    g = helper.make_graph(nodes, "m", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch] + inp)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch] + out)], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 7
    onnx.save(m, path)

# per-element and per-image operators: exact whatever the batch
# (b comes from a Constant node: the same in every run, so it must count
# once per sample, batched or not)
inits = [numpy_helper.from_array(r.standard_normal((1, 3, 1, 1)).astype(np.float32), "s")]
nodes = [helper.make_node("Constant", [], ["b"], name="const", value=numpy_helper.from_array(
             r.standard_normal((1, 3, 1, 1)).astype(np.float32))),
         helper.make_node("Mul", ["x", "s"], ["m"], name="mul"),
         helper.make_node("Add", ["m", "b"], ["a"], name="add"),
         helper.make_node("Relu", ["a"], ["r"], name="relu"),
         helper.make_node("MaxPool", ["r"], ["p"], name="pool", kernel_shape=[2, 2], strides=[2, 2]),
         helper.make_node("Tanh", ["a"], ["t"], name="tanh"),
         helper.make_node("Softmax", ["t"], ["sm"], name="softmax", axis=-1),
         helper.make_node("Transpose", ["sm"], ["smt"], name="transpose", perm=[0, 1, 3, 2]),
         helper.make_node("MaxPool", ["smt"], ["q"], name="pool2", kernel_shape=[2, 2], strides=[2, 2]),
         helper.make_node("Sub", ["p", "q"], ["y"], name="sub")]
for name, batch in (("ew", "N"), ("ew1", 1)):
    os.makedirs("%s/%s/rules" % (D, name))
    save(nodes, inits, [3, 16, 16], [3, 8, 8], "%s/%s/model.onnx" % (D, name), batch)
os.makedirs(D + "/calib")
for i in range(150):
    x = (r.standard_normal((1, 3, 16, 16)) * (1 + i % 7)).astype(np.float32)
    if i == 77:
        x[0, 1, 2, 3] = np.inf  # counted apart, in a batch as alone
    np.save("%s/calib/s%03d.npy" % (D, i), x)
# the first dimension is not a batch: y = x - sum over it
nodes = [helper.make_node("ReduceSum", ["x"], ["s"], name="sum", keepdims=1),
         helper.make_node("Sub", ["x", "s"], ["y"], name="sub")]
for name, batch in (("red", "N"), ("red1", 1)):
    os.makedirs("%s/%s/rules" % (D, name))
    save(nodes, [], [4], [4], "%s/%s/model.onnx" % (D, name), batch, opset=11)
os.makedirs(D + "/rows")
for i in range(100):
    np.save("%s/rows/s%03d.npy" % (D, i), r.standard_normal((1, 4)).astype(np.float32))
# samples of two shapes: batch 1 and batch 2
os.makedirs(D + "/mixed")
for i in range(100):
    np.save("%s/mixed/s%03d.npy" % (D, i), r.standard_normal((1 + (i % 10 == 9), 3, 16, 16)).astype(np.float32))
EOF
"$PY" "$TMPD/mk.py" "$TMPD" 2>"$TMPD/mk.err" || { fail "make models" "$(tail -3 "$TMPD/mk.err")"; exit 0; }

# calib PROJECT DATA [METHOD]: calibrate for quantize.method METHOD (default
# entropy: statistics with histograms), leave the log in PROJECT/log
calib() {
	printf '[model m]\nsource = model.onnx\nquantize = static\nquantize.calibration = %s\nquantize.method = %s\n' \
		"$2" "${3:-entropy}" > "$TMPD/$1/rules/m.rules"
	# a copy: a link out of the project is refused (t_harden)
	rm -rf "${TMPD:?}/$1/$2" && cp -R "$TMPD/$2" "$TMPD/$1/$2"
	QUANTMAKE_CACHE=$TMPD/$1/cache "$Q" -C "$TMPD/$1" -j${JOBS:-1} m:calibrate > "$TMPD/$1/log" 2>&1
}
stats() { echo "$TMPD/$1/build/m/calibrate/calibration.stats"; }
# same_at_j LABEL PROJ DATA REF: calibrating PROJ on DATA with -j2 and -j3
# (on as many workers) gives the bytes of REF, its -j1 statistics
same_at_j() {
	for j in 2 3; do
		rm -rf "$TMPD/$2/cache" "$TMPD/$2/build"
		if JOBS=$j calib "$2" "$3" && grep -q "calibrate: [23] workers side by side" "$TMPD/$2/log" &&
			cmp -s "$(stats "$2")" "$4"; then
			pass "$1 with -j$j gives the bytes of -j1"
		else
			fail "$1 with -j$j gives the bytes of -j1" "$(tail -3 "$TMPD/$2/log")"
		fi
	done
}

if calib ew calib && calib ew1 calib; then
	if grep -q "batches of [0-9]* samples" "$TMPD/ew/log"; then
		pass "samples are stacked when the first dimension is a batch"
	else
		fail "samples are stacked when the first dimension is a batch" "$(grep calibrate: "$TMPD/ew/log")"
	fi
	if grep -q "batches of" "$TMPD/ew1/log"; then
		fail "a fixed batch of 1 runs one sample at a time" "$(grep calibrate: "$TMPD/ew1/log")"
	else
		pass "a fixed batch of 1 runs one sample at a time"
	fi
	check "batched statistics are byte-identical to one-at-a-time ones" cmp "$(stats ew)" "$(stats ew1)"
else
	fail "calibrate the element-wise model" "$(tail -3 "$TMPD/ew/log" "$TMPD/ew1/log")"
fi

if calib red rows && calib red1 rows; then
	if grep -q "one sample at a time: the first dimension is not a batch dimension: activation s" "$TMPD/red/log"
	then
		pass "a model that reduces over the first dimension is not batched"
	else
		fail "a model that reduces over the first dimension is not batched" "$(grep calibrate: "$TMPD/red/log")"
	fi
	check "its statistics are those of one sample at a time" cmp "$(stats red)" "$(stats red1)"
else
	fail "calibrate the reducing model" "$(tail -3 "$TMPD/red/log" "$TMPD/red1/log")"
fi

# mixed shapes: batch-1 samples are stacked, batch-2 ones run alone; every
# element is counted once (checked against the samples themselves)
if calib ew mixed; then
	if "$PY" - "$(stats ew)" "$TMPD/mixed" <<'EOF'
import glob, sys
import numpy as np
from calibstats import read
nb, ns, st = read(sys.argv[1])
got = {k: (s.count, s.lo, s.hi, int(s.hist.sum())) for k, s in st.items()}
xs = np.concatenate([np.load(f) for f in sorted(glob.glob(sys.argv[2] + "/*.npy"))])
cnt, mn, mx, hs = got["x"]
assert ns == 100 and cnt == xs.size and hs == xs.size, (ns, cnt, hs, xs.size)
assert mn == xs.min() and mx == xs.max(), (mn, mx, xs.min(), xs.max())
assert got["y"][0] == xs.size // 4, got["y"]
assert got["smt"] == got["sm"] and got["sm"][0] == xs.size, (got["smt"], got["sm"])  # moved, same values
assert got["b"][0] == 3 * 100 and got["b"][3] == 3 * 100, got["b"]  # the Constant, once per sample
EOF
	then pass "samples of another shape run alone, every element counted once"
	else fail "samples of another shape run alone, every element counted once"
	fi
else
	fail "calibrate mixed shapes" "$(tail -3 "$TMPD/ew/log")"
fi

# minmax statistics: no histograms, the same counts, min, max and ranges
cp "$(stats ew)" "$TMPD/ew.entropy.stats"
if calib ew mixed minmax && "$PY" - "$(stats ew)" "$TMPD/ew.entropy.stats" <<'EOF'
import sys
from calibstats import read
def load(path):
    nb, ns, st = read(path)
    return nb, ns, {k: tuple(s[:5]) for k, s in st.items()}
nb, ns, got = load(sys.argv[1])
nb2, ns2, want = load(sys.argv[2])
assert nb == 0 and nb2 == 2048 and ns == ns2, (nb, nb2, ns, ns2)
assert got == want, [k for k in want if got.get(k) != want[k]]
EOF
then pass "minmax statistics skip the histograms and keep counts, min and max"
else fail "minmax statistics skip the histograms and keep counts, min and max" "$(tail -2 "$TMPD/ew/log")"
fi

# the method enters calibrate's key only as 'histograms or not': minmax ->
# percentile calibrates again, percentile -> entropy only quantizes again
M=$TMPD/meth
mkdir -p "$M/rules"
cp "$TMPD/ew/model.onnx" "$M/"
cp -R "$TMPD/calib" "$M/calib"
meth() {
	printf '[model m]\nsource = model.onnx\nquantize = static\nquantize.calibration = calib\nquantize.method = %s\n' \
		"$1" > "$M/rules/m.rules"
	QUANTMAKE_CACHE=$M/cache "$Q" -C "$M" -j1 > "$M/log.$1" 2>&1
}
if meth minmax && meth percentile && meth entropy; then
	if grep -q "calibrate m" "$M/log.percentile" && ! grep -q "calibrate m" "$M/log.entropy" &&
	   grep -q "quantize m" "$M/log.entropy"; then
		pass "minmax -> percentile calibrates again, percentile -> entropy does not"
	else
		fail "minmax -> percentile calibrates again, percentile -> entropy does not" \
			"$(grep -h '^\[' "$M/log.percentile" "$M/log.entropy" | tr '\n' ' ')"
	fi
else
	fail "minmax -> percentile calibrates again, percentile -> entropy does not" \
		"$(tail -n2 "$M/log.minmax" "$M/log.percentile" "$M/log.entropy" 2>/dev/null)"
fi

# tensors computed from constants only (a Mul of two initializers; in the
# branch of an If, a Constant times an outer initializer) are counted once
# per run that computes them, from statistics taken on the first: the
# same counts, min, max and histogram as every run counted
F=$TMPD/fixed
mkdir -p "$F/rules" "$F/data"
if "$PY" - "$F" <<'EOF'
import sys, numpy as np, onnx
from onnx import helper as h, numpy_helper as nh, TensorProto as T
d = sys.argv[1]
r = np.random.default_rng(5)
A = r.standard_normal(16).astype(np.float32)
B = (r.standard_normal(16) * 3).astype(np.float32)
K = r.standard_normal(16).astype(np.float32)
then = h.make_graph([h.make_node("Constant", [], ["k"], value=nh.from_array(K)),
                     h.make_node("Mul", ["k", "A"], ["ka"])], "then", [],
                    [h.make_tensor_value_info("ka", T.FLOAT, [16])])
els = h.make_graph([h.make_node("Neg", ["A"], ["na"])], "else", [], [h.make_tensor_value_info("na", T.FLOAT, [16])])
g = h.make_graph([h.make_node("Mul", ["A", "B"], ["c"]),
                  h.make_node("Add", ["x", "c"], ["s"]),
                  h.make_node("ReduceSum", ["x"], ["t"], keepdims=0),
                  h.make_node("Greater", ["t", "zero"], ["cond"]),
                  h.make_node("If", ["cond"], ["br"], then_branch=then, else_branch=els),
                  h.make_node("Add", ["s", "br"], ["y"])], "fixed",
                 [h.make_tensor_value_info("x", T.FLOAT, [16])], [h.make_tensor_value_info("y", T.FLOAT, [16])],
                 [nh.from_array(A, "A"), nh.from_array(B, "B"), nh.from_array(np.float32(0), "zero")])
m = h.make_model(g, opset_imports=[h.make_opsetid("", 13)])
m.ir_version = 7
onnx.save(m, d + "/model.onnx")
taken = 0
for i in range(40):
    x = r.standard_normal(16).astype(np.float32)
    taken += x.sum() > 0
    np.save("%s/data/s%02d.npy" % (d, i), x)
np.save(d + "/expect.npy", np.array([taken], np.int64))
np.save(d + "/c.npy", A * B)
np.save(d + "/ka.npy", K * A)
EOF
then
	printf '[model m]\nsource = model.onnx\nquantize = static\nquantize.calibration = data\nquantize.method = entropy\n' \
		> "$F/rules/m.rules"
	if QUANTMAKE_CACHE=$F/cache "$Q" -C "$F" -j1 m:calibrate > "$F/log" 2>&1 &&
	   "$PY" - "$F" <<'EOF'
import sys
import numpy as np
from calibstats import read
d = sys.argv[1]
nb, ns, st = read(d + "/build/m/calibrate/calibration.stats")
got = {k: (s.count, s.lo, s.hi, s.range, s.hist) for k, s in st.items()}
def want(v, runs):
    r = 2.0 ** np.floor(np.log2(np.abs(v).max()) + 1)
    h = np.zeros(nb, np.uint64)
    for x in v.astype(np.float64):
        h[int(np.floor(x * nb / (2 * r))) + nb // 2] += runs
    return v.size * runs, np.float32(v.min()), np.float32(v.max()), r, h
taken = int(np.load(d + "/expect.npy")[0])
assert ns == 40 and 0 < taken < 40, (ns, taken)
for name, runs in (("c", 40), ("ka", taken)):
    w, g = want(np.load(d + "/" + name + ".npy"), runs), got[name]
    assert g[:4] == w[:4], (name, g[:4], w[:4])
    assert (g[4] == w[4]).all(), (name, np.nonzero(g[4] != w[4]))
EOF
	then pass "tensors of constants only are counted once per run, taken or not"
	else fail "tensors of constants only are counted once per run, taken or not" "$(tail -3 "$F/log")"
	fi
else
	fail "tensors of constants only are counted once per run, taken or not" "could not make the model"
fi

# a bad sample in the middle of what would be a batch is named
"$PY" -c "import numpy as np; np.save('$TMPD/calib/s100.npy', np.zeros((1, 3, 16, 16), np.float64))"
rm -rf "$TMPD/ew/cache"
calib ew calib
st=$?
if [ $st -eq 1 ] && grep -q "calibration sample 101: input 'x' is double \[1,3,16,16\], expected float \[N,3,16,16\]" "$TMPD/ew/log"
then
	pass "a bad sample among batched ones is named"
else
	fail "a bad sample among batched ones is named" "exit $st: $(grep -i error "$TMPD/ew/log" | head -2)"
fi

# ---- workers side by side: the same statistics on 2 and 3 threads ----
# After the probe, -jN runs N interpreters, each on the next batch or lone
# sample the shared reader forms; their statistics are merged. Batched,
# one at a time (a fixed batch of 1, a non-batch first dimension), samples
# of two shapes, a Constant counted per sample, an infinity: the bytes of
# -j1 every time.
rm -f "$TMPD/calib/s100.npy"
mkdir "$TMPD/calib3"  # batches of 64: enough of them for 3 workers
for f in "$TMPD"/calib/*.npy; do
	for k in a b c; do cp "$f" "$TMPD/calib3/$k-${f##*/}"; done
done
for spec in "ew calib3" "ew1 calib" "red rows" "ew mixed"; do
	set -- $spec
	rm -rf "$TMPD/$1/cache" "$TMPD/$1/build"
	if ! calib "$1" "$2"; then
		fail "workers: calibrate $1 on $2 with -j1" "$(tail -2 "$TMPD/$1/log")"
		continue
	fi
	cp "$(stats "$1")" "$TMPD/$1.$2.j1"
	same_at_j "workers: $1 on $2" "$1" "$2" "$TMPD/$1.$2.j1"
done
# two bad samples: whichever worker meets one first, the lower is named
"$PY" -c "import numpy as np; [np.save('$TMPD/calib/s%03d.npy' % i, np.zeros((1, 3, 16, 16), np.float64)) for i in (60, 140)]"
rm -rf "$TMPD/ew1/cache" "$TMPD/ew1/build"
JOBS=2 calib ew1 calib
st=$?
if [ $st -eq 1 ] && grep -q "calibration sample 61: input 'x' is double" "$TMPD/ew1/log" &&
	! grep -q "sample 141" "$TMPD/ew1/log" && [ ! -e "$(stats ew1)" ]; then
	pass "workers: the first bad sample is named, nothing is written"
else
	fail "workers: the first bad sample is named, nothing is written" "exit $st: $(grep -i error "$TMPD/ew1/log" | head -2)"
fi

# ---- units run ahead of the probe ----
# With more samples than a batch, the other threads plan their
# interpreters and run the units after the probe's batch while the probe
# still runs, as if it will find a batch. QUANTMAKE_CALIB_AHEAD=wait holds
# the probe's decision until they have run them all. Kept (ew on calib3:
# a batch) or thrown away (red: no batch; mixed: a sample of another shape
# in the probe's batch), the statistics are the bytes of -j1.
for spec in "ew calib3" "red rows" "ew mixed"; do
	set -- $spec
	for j in 2 3; do
		rm -rf "$TMPD/$1/cache" "$TMPD/$1/build"
		if QUANTMAKE_CALIB_AHEAD=wait JOBS=$j calib "$1" "$2" &&
			grep -q "calibrate: [1-9][0-9]* units ran ahead of the probe" "$TMPD/$1/log" &&
			cmp -s "$(stats "$1")" "$TMPD/$1.$2.j1"; then
			pass "ahead: $1 on $2 with -j$j, units run ahead, gives the bytes of -j1"
		else
			fail "ahead: $1 on $2 with -j$j, units run ahead, gives the bytes of -j1" \
				"$(grep "calibrate:" "$TMPD/$1/log" | tr '\n' ' ')"
		fi
	done
done
# a bad sample in the probe's batch and one in a unit run ahead: the
# probe's is named (the unit's failure goes with the units)
mkdir "$TMPD/bad2"
cp "$TMPD"/calib3/a-s0*.npy "$TMPD/bad2/"
"$PY" -c "import numpy as np; [np.save('$TMPD/bad2/a-s%03d.npy' % i, np.zeros((1, 3, 16, 16), np.float64)) for i in (30, 70)]"
rm -rf "$TMPD/ew/cache" "$TMPD/ew/build"
QUANTMAKE_CALIB_AHEAD=wait JOBS=2 calib ew bad2
st=$?
if [ $st = 1 ] && grep -q "calibration sample 31: input 'x' is double" "$TMPD/ew/log" &&
	grep -q "calibrate: [1-9][0-9]* units ran ahead of the probe" "$TMPD/ew/log" && ! grep -q "sample 71" "$TMPD/ew/log"
then
	pass "ahead: a bad sample in the probe is named, not one in a unit run ahead"
else
	fail "ahead: a bad sample in the probe is named, not one in a unit run ahead" \
		"exit $st: $(grep "calibrate:\|rror" "$TMPD/ew/log" | tr '\n' ' ')"
fi
# a model that runs only one sample at a time (a Reshape to [1,4]): the
# units run ahead fail stacked; thrown away with their failure, the
# samples run one at a time and count as on -j1
R=$TMPD/resh
mkdir -p "$R/rules"
if "$PY" - "$R" <<'EOF'
import sys, numpy as np, onnx
from onnx import helper as h, numpy_helper as nh, TensorProto as T
d = sys.argv[1]
g = h.make_graph([h.make_node("Reshape", ["x", "shape"], ["rs"]),
                  h.make_node("Relu", ["rs"], ["y"])], "resh",
                 [h.make_tensor_value_info("x", T.FLOAT, ["N", 4])], [h.make_tensor_value_info("y", T.FLOAT, [1, 4])],
                 [nh.from_array(np.array([1, 4], np.int64), "shape")])
m = h.make_model(g, opset_imports=[h.make_opsetid("", 13)])
m.ir_version = 7
onnx.save(m, d + "/model.onnx")
EOF
then
	for j in 1 2 3; do
		rm -rf "$R/cache" "$R/build"
		JOBS=$j QUANTMAKE_CALIB_AHEAD=wait calib resh rows
		st=$?
		[ $j = 1 ] && cp "$(stats resh)" "$TMPD/resh.j1"
		if [ $st = 0 ] && grep -q "one sample at a time: stacked samples failed to run" "$R/log" &&
			{ [ $j = 1 ] || grep -q "calibrate: [1-9][0-9]* units ran ahead of the probe" "$R/log"; } &&
			cmp -s "$(stats resh)" "$TMPD/resh.j1"; then
			pass "ahead: units that fail stacked are thrown away with their failure (-j$j)"
		else
			fail "ahead: units that fail stacked are thrown away with their failure (-j$j)" \
				"exit $st: $(grep "calibrate:\|rror" "$R/log" | tr '\n' ' ')"
		fi
	done
else
	fail "ahead: make the Reshape model" "$PY failed"
fi

# ---- units: ranges of a batch's size, read outside the lock ----
# After the probe a unit is the next range of sample numbers a batch long:
# its samples that join the batch run stacked, the others alone. Samples of
# another shape at the edges of ranges and inside them: every element is
# counted once and -j1, -j2 and -j3 give the same bytes.
bsz=64  # the batch size of ew (checked below)
mkdir "$TMPD/edges"
"$PY" - "$TMPD/edges" "$bsz" <<'EOF'
import sys, numpy as np
d, b = sys.argv[1], int(sys.argv[2])
r = np.random.default_rng(11)
odd = {2 * b - 1, 2 * b, 2 * b + 5, 3 * b - 1, 3 * b, 4 * b + 2}
for i in range(4 * b + 7):
    np.save("%s/s%04d.npy" % (d, i), (r.standard_normal((1 + (i in odd), 3, 16, 16)) * (1 + i % 5)).astype(np.float32))
EOF
ok=1
for j in 1 2 3; do
	rm -rf "$TMPD/ew/cache" "$TMPD/ew/build"
	if ! JOBS=$j calib ew edges || ! grep -q "batches of $bsz samples" "$TMPD/ew/log" ||
		! "$PY" - "$(stats ew)" "$TMPD/edges" > "$TMPD/edges.out" 2>&1 <<'EOF'
import glob, sys
import numpy as np
from calibstats import read
nb, ns, st = read(sys.argv[1])
got = {k: (s.count, s.lo, s.hi, int(s.hist.sum())) for k, s in st.items()}
files = sorted(glob.glob(sys.argv[2] + "/*.npy"))
xs = np.concatenate([np.load(f) for f in files])
cnt, mn, mx, hs = got["x"]
assert ns == len(files) and cnt == xs.size and hs == xs.size, (ns, cnt, hs, xs.size)
assert mn == xs.min() and mx == xs.max(), (mn, mx, xs.min(), xs.max())
assert got["b"][0] == 3 * len(files), got["b"]
EOF
	then
		ok=0
		fail "units: samples of another shape at range edges, -j$j" "$(tail -2 "$TMPD/ew/log") $(tail -1 "$TMPD/edges.out")"
		continue
	fi
	[ $j = 1 ] && cp "$(stats ew)" "$TMPD/edges.j1"
	if [ $j != 1 ] && ! cmp -s "$(stats ew)" "$TMPD/edges.j1"; then
		ok=0
		fail "units: samples of another shape at range edges, -j$j" "other bytes than -j1"
	fi
done
[ $ok = 1 ] && pass "units: samples of another shape at range edges, every element counted once, the same bytes on -j1/2/3"

# Which samples share a batch is seen in the error of a batch that fails:
# a Gather whose index is out of range in sample 151. The unit of samples
# 129-192 (a batch of 64 after the probe's 64) holds sample 141 of another
# shape, which runs alone: the other 63 are stacked, on every -j.
G=$TMPD/gat
mkdir -p "$G/rules" "$G/data" "$G/bad"
if "$PY" - "$G" <<'EOF'
import sys, numpy as np, onnx
from onnx import helper as h, numpy_helper as nh, TensorProto as T
d = sys.argv[1]
r = np.random.default_rng(13)
g = h.make_graph([h.make_node("Gather", ["tab", "i"], ["g"], axis=0),
                  h.make_node("Squeeze", ["g", "one"], ["gs"]),
                  h.make_node("Add", ["x", "gs"], ["y"])], "gat",
                 [h.make_tensor_value_info("x", T.FLOAT, ["N", 4]), h.make_tensor_value_info("i", T.INT64, ["N", 1])],
                 [h.make_tensor_value_info("y", T.FLOAT, ["N", 4])],
                 [nh.from_array(r.standard_normal((10, 4)).astype(np.float32), "tab"),
                  nh.from_array(np.array([1], np.int64), "one")])
m = h.make_model(g, opset_imports=[h.make_opsetid("", 13)])
m.ir_version = 7
onnx.save(m, d + "/model.onnx")
for i in range(256):
    b = 2 if i == 140 else 1
    idx = np.full((b, 1), 99 if i == 150 else i % 10, np.int64)
    np.savez("%s/data/s%03d.npz" % (d, i), x=r.standard_normal((b, 4)).astype(np.float32), i=idx)
EOF
then
	printf '[model m]\nsource = model.onnx\nquantize = static\nquantize.calibration = data\n' > "$G/rules/m.rules"
	for j in 1 2 3 3wait; do
		rm -rf "$G/cache" "$G/build"
		# 3wait: the units run ahead of the probe (the failing one too)
		QUANTMAKE_CALIB_AHEAD=${j#[0-9]} QUANTMAKE_CACHE=$G/cache "$Q" -C "$G" -j${j%wait} m:calibrate > "$G/log$j" 2>&1
		st=$?
		if [ $st = 1 ] && grep -q "batches of 64 samples" "$G/log$j" &&
			{ [ $j != 3wait ] || grep -q "calibrate: [1-9][0-9]* units ran ahead of the probe" "$G/log$j"; } &&
			grep -q "calibration samples 129-192 (63 stacked into one batch): .*index 99 is out of range" "$G/log$j"; then
			pass "units: the samples of a range that join are stacked, one of another shape runs alone (-j$j)"
		else
			fail "units: the samples of a range that join are stacked, one of another shape runs alone (-j$j)" \
				"exit $st: $(grep -i "error\|calibrate:" "$G/log$j" | tr '\n' ' ')"
		fi
	done
	# unreadable samples in the middle, two in one range and one in the
	# next: the lowest is named on every -j, nothing is written
	cp "$G"/data/*.npz "$G/bad/"
	"$PY" -c "import numpy as np; np.savez('$G/bad/s150.npz', x=np.zeros((1, 4), np.float32), i=np.zeros((1, 1), np.int64))"
	for k in 160 170 250; do head -c 100 "$G/data/s$k.npz" > "$G/bad/s$k.npz"; done
	printf '[model m]\nsource = model.onnx\nquantize = static\nquantize.calibration = bad\n' > "$G/rules/m.rules"
	for j in 1 2 3; do
		rm -rf "$G/cache" "$G/build"
		QUANTMAKE_CACHE=$G/cache "$Q" -C "$G" -j$j m:calibrate > "$G/log$j" 2>&1
		st=$?
		if [ $st = 1 ] && grep -q "calibration sample 161: .*bad/s160.npz: not a valid .npz" "$G/log$j" &&
			! grep -q "sample 171\|sample 251" "$G/log$j" && [ ! -e "$G/build/m/calibrate/calibration.stats" ]; then
			pass "units: the first unreadable sample is named (-j$j)"
		else
			fail "units: the first unreadable sample is named (-j$j)" "exit $st: $(tail -1 "$G/log$j")"
		fi
	done
else
	fail "units: make the Gather model" "$PY failed"
fi

# ---- a Relu's minmax statistics from its input's scan ----
# Without histograms a Relu's output is not read: its min and max are its
# input's raised to 0, when every input value is finite (a Relu makes
# -inf 0, keeps +inf and NaN). Relus of a graph input, of a Flatten (moved
# values), of values at most 0 or all below, of a Relu, and inputs with
# -inf, +inf, NaN and -0: the counts, min and max of the values, on -j1/2/3
# (with histograms, their values are read: every one in a bin).
L=$TMPD/relu
mkdir -p "$L/rules" "$TMPD/reludata"
if "$PY" - "$L" "$TMPD/reludata" <<'EOF'
import sys, numpy as np, onnx
from onnx import helper as h, TensorProto as T
d = sys.argv[1]
g = h.make_graph([h.make_node("Relu", ["x"], ["r1"]),
                  h.make_node("Flatten", ["x"], ["f"], axis=1),
                  h.make_node("Relu", ["f"], ["r2"]),
                  h.make_node("Neg", ["r1"], ["n"]),
                  h.make_node("Relu", ["n"], ["r3"]),
                  h.make_node("Relu", ["r1"], ["r4"]),
                  h.make_node("Add", ["r2", "r3"], ["a"]),
                  h.make_node("Add", ["a", "r4"], ["y"]),
                  h.make_node("Relu", ["z"], ["r5"])], "relu",
                 [h.make_tensor_value_info("x", T.FLOAT, ["N", 8]), h.make_tensor_value_info("z", T.FLOAT, ["N", 4])],
                 [h.make_tensor_value_info("y", T.FLOAT, ["N", 8]), h.make_tensor_value_info("r5", T.FLOAT, ["N", 4])])
m = h.make_model(g, opset_imports=[h.make_opsetid("", 13)])
m.ir_version = 7
onnx.save(m, d + "/model.onnx")
r = np.random.default_rng(17)
for i in range(150):
    x = r.standard_normal((1, 8)).astype(np.float32) + (3 if i % 3 == 0 else 0)
    if i % 11 == 0:
        x = -np.abs(x)
    if i == 70:
        x[0, 1] = -np.inf  # a finite 0 after the Relu
    if i == 90:
        x[0, 2], x[0, 3] = np.inf, np.nan
    if i == 100:
        x[0, 4] = -0.0
    z = -1 - np.abs(r.standard_normal((1, 4))).astype(np.float32)  # all below 0
    np.savez("%s/s%03d.npz" % (sys.argv[2], i), x=x, z=z)
EOF
then
	for j in 1 2 3 entropy; do
		rm -rf "$L/cache" "$L/build"
		meth=minmax
		[ $j = entropy ] && meth=entropy j=1
		if JOBS=$j calib relu reludata $meth && "$PY" - "$(stats relu)" "$TMPD/reludata" > "$L/out" 2>&1 <<'EOF'
import glob, sys
import numpy as np
from calibstats import read
nb, ns, st = read(sys.argv[1])
files = sorted(glob.glob(sys.argv[2] + "/*.npz"))
x = np.concatenate([np.load(f)["x"] for f in files])
z = np.concatenate([np.load(f)["z"] for f in files])
with np.errstate(invalid="ignore"):
    r1 = np.where(x < 0, np.float32(0), x)
    n = -r1
    r3 = np.where(n < 0, np.float32(0), n)
assert ns == 150, ns
r5 = np.zeros_like(z)
for name, v in (("x", x), ("f", x), ("r1", r1), ("r2", r1), ("r4", r1), ("n", n), ("r3", r3), ("z", z), ("r5", r5)):
    fin = v[np.isfinite(v)]
    want = (fin.size, v.size - fin.size, fin.min() + np.float32(0), fin.max() + np.float32(0))
    got = st[name]
    assert (got.count, got.nonfinite, got.lo, got.hi) == want, (name, got[:4], want)
    assert np.signbit(got.lo) == np.signbit(want[2]), (name, got.lo)
    assert nb == 0 or got.hist.sum() == fin.size, (name, got.hist.sum(), fin.size)
EOF
		then
			pass "relu: $meth statistics of Relus are those of their values (-j$j)"
		else
			fail "relu: $meth statistics of Relus are those of their values (-j$j)" "$(tail -1 "$L/out") $(tail -1 "$L/log")"
		fi
	done
else
	fail "relu: make the Relu model" "$PY failed"
fi

# ---- the statistics do not depend on -j (the stage's thread budget) ----
# Convolutions, MatMuls and an LSTM on 1 and on 2 interpreter threads give
# byte-identical calibration.stats, so a cache filled by any build holds the
# bytes every other build would have made.
J=$TMPD/jproj
mkdir -p "$J/rules" "$J/data"
cp "$ROOT/tests/models/cnn.onnx" "$ROOT/tests/models/transformer.onnx" "$J/"
"$PY" - "$J" <<'PYEOF'
import sys, numpy as np, onnx
from onnx import helper as h, numpy_helper as nh, TensorProto as T
d = sys.argv[1]
r = np.random.default_rng(3)
for i in range(6):
    np.save(f"{d}/data/img{i}.npy", r.random((4, 1, 16, 16), dtype=np.float32))
for i in range(6):   # token ids [batch, seq]
    np.save(f"{d}/data/tok{i}.npy", r.integers(0, 10, (2, 8)).astype(np.int64))
H, I, S = 32, 16, 12
W = nh.from_array((r.standard_normal((1, 4 * H, I)) * 0.3).astype(np.float32), "W")
R = nh.from_array((r.standard_normal((1, 4 * H, H)) * 0.3).astype(np.float32), "R")
g = h.make_graph([h.make_node("LSTM", ["x", "W", "R"], ["y"], hidden_size=H),
                  h.make_node("MatMul", ["y", "P"], ["z"])], "lstm",
                 [h.make_tensor_value_info("x", T.FLOAT, [S, 1, I])], [h.make_tensor_value_info("z", T.FLOAT, None)],
                 [W, R, nh.from_array((r.standard_normal((H, 8)) * 0.3).astype(np.float32), "P")])
mm = h.make_model(g, opset_imports=[h.make_opsetid("", 14)])
mm.ir_version = 7
onnx.save(mm, f"{d}/lstm.onnx")
for i in range(6):
    np.save(f"{d}/data/seq{i}.npy", r.standard_normal((S, 1, I)).astype(np.float32))
PYEOF
cat > "$J/rules/a.rules" <<EOF
[model cnn]
source = cnn.onnx
quantize = static
quantize.calibration = data/img*.npy
quantize.method = entropy

[model tr]
source = transformer.onnx
quantize = static
quantize.calibration = data/tok*.npy

[model lstm]
source = lstm.onnx
quantize = static
quantize.calibration = data/seq*.npy
EOF
ok=1
for m in cnn tr lstm; do
	for j in 1 2; do
		QUANTMAKE_CACHE=$J/cache$j "$Q" -C "$J" -j$j "$m:calibrate" > "$J/log$m$j" 2>&1 || ok=0
		cp "$J/build/$m/calibrate/calibration.stats" "$J/$m.$j.stats" 2>/dev/null || ok=0
	done
	if [ $ok = 1 ] && cmp -s "$J/$m.1.stats" "$J/$m.2.stats"; then
		pass "calibration statistics of $m are the same bytes with -j1 and -j2"
	else
		fail "calibration statistics of $m are the same bytes with -j1 and -j2" "$(tail -2 "$J/log${m}2")"
	fi
	ok=1
done

# a calibration directory is listed from its entries' types: regular files
# and links to them are samples; hidden files, a link to a directory and a
# subdirectory that is not test_data_set* are not. The build hashes the
# samples ahead on a thread of its own, beside the stages before calibrate:
# editing a sample behind a link must still calibrate again
W=$TMPD/walk
mkdir -p "$W/rules" "$W/data/extra" "$W/elsewhere"
cp "$TMPD/ew/model.onnx" "$W/"
for i in 0 1 2 3 4; do cp "$TMPD/calib/s00$i.npy" "$W/data/"; done
cp "$TMPD/calib/s005.npy" "$TMPD/calib/s006.npy" "$W/elsewhere/"
ln -s ../elsewhere/s005.npy "$W/data/l5.npy"
ln -s "$W/elsewhere/s006.npy" "$W/data/l6.npy"
ln -s ../elsewhere "$W/data/linkdir"
cp "$TMPD/calib/s007.npy" "$W/data/.hidden.npy"
cp "$TMPD/calib/s008.npy" "$W/data/extra/"
printf '[model m]\nsource = model.onnx\nquantize = static\nquantize.calibration = data\n' > "$W/rules/m.rules"
nsamples() { "$PY" -c 'import sys; from calibstats import read; print(read(sys.argv[1])[1])' "$1"; }
if QUANTMAKE_CACHE=$W/cache "$Q" -C "$W" -j2 m:calibrate > "$W/log1" 2>&1 &&
	[ "$(nsamples "$W/build/m/calibrate/calibration.stats")" = 7 ]; then
	pass "a calibration directory's samples: its files and links to files, nothing else"
else
	fail "a calibration directory's samples: its files and links to files, nothing else" "$(tail -2 "$W/log1")"
fi
cp "$W/build/m/calibrate/calibration.stats" "$W/before.stats"
cp "$TMPD/calib/s009.npy" "$W/elsewhere/s006.npy"
if QUANTMAKE_CACHE=$W/cache "$Q" -C "$W" -j2 m:calibrate > "$W/log2" 2>&1 && grep -q "calibrate m" "$W/log2" &&
	! cmp -s "$W/before.stats" "$W/build/m/calibrate/calibration.stats"; then
	pass "a sample edited behind a link calibrates again"
else
	fail "a sample edited behind a link calibrates again" "$(tail -2 "$W/log2")"
fi

# ---- a batch on another axis, shared inputs (silero-vad's shape) ----
# Inputs x [B,8] (batch on axis 0), h [2,B,6] (on axis 1), sr int64 []
# feeding an Equal and an If, gain float [1]: x and h are stacked along
# their axes, sr and gain fed once per batch (every sample of a batch has
# the same bytes for them). The If's then branch slices a Constant (the
# same tensor every run: counted per sample) and returns the state on axis
# 1. The one-at-a-time reference is the model with every dimension fixed
# (nothing to stack). Variants that cannot batch: gg, a float activation of
# the shared gain alone (does not grow with the batch), and r, a sum over
# h's batch axis.
A=$TMPD/axis
mkdir -p "$A"
if ! "$PY" - "$TMPD" <<'EOF' 2>"$A/mk.err"
import os, sys
import numpy as np
import onnx
from onnx import TensorProto as T, helper as h, numpy_helper as nh
D = sys.argv[1]
r = np.random.default_rng(11)
N, H = 8, 6
W2 = nh.from_array((r.standard_normal((N, H)) * 0.5).astype(np.float32), "W2")
Wfull = nh.from_array((r.standard_normal((2 * N, H)) * 0.5).astype(np.float32))
vi = lambda n: h.make_tensor_value_info(n, T.FLOAT, None)
then = h.make_graph([h.make_node("Constant", [], ["wfull"], value=Wfull),
                     h.make_node("Slice", ["wfull", "zero1", "n1", "zero1"], ["w"]),
                     h.make_node("MatMul", ["x", "w"], ["a"]),
                     h.make_node("ReduceSum", ["h", "zero1"], ["hs"], keepdims=0),
                     h.make_node("Add", ["a", "hs"], ["s"]),
                     h.make_node("Tanh", ["s"], ["z"]),
                     h.make_node("Mul", ["z", "gain"], ["zg"]),
                     h.make_node("Sigmoid", ["s"], ["sg"]),
                     h.make_node("Unsqueeze", ["zg", "zero1"], ["u1"]),
                     h.make_node("Unsqueeze", ["sg", "zero1"], ["u2"]),
                     h.make_node("Concat", ["u1", "u2"], ["t_hn"], axis=0)],
                    "then", [], [vi("zg"), vi("t_hn")])
els = h.make_graph([h.make_node("MatMul", ["x", "W2"], ["a2"]),
                    h.make_node("Relu", ["a2"], ["e"]),
                    h.make_node("Mul", ["e", "gain"], ["em"]),
                    h.make_node("Mul", ["h", "half"], ["e_hn"])],
                   "else", [], [vi("em"), vi("e_hn")])
ints = lambda name, v: nh.from_array(np.array(v, np.int64), name)
def model(path, fixed, variant):
    b = 1 if fixed else "B"
    nodes = [h.make_node("Equal", ["sr", "rate"], ["cond"]),
             h.make_node("If", ["cond"], ["yi", "hn"], then_branch=then, else_branch=els)]
    outs = [vi("y"), vi("hn")]
    if variant == "gg":    # an activation of the shared input alone
        nodes += [h.make_node("Mul", ["gain", "gain"], ["gg"]), h.make_node("Mul", ["yi", "gg"], ["y"])]
    else:
        nodes += [h.make_node("Identity", ["yi"], ["y"])]
    if variant == "red":   # a sum over h's batch axis
        nodes += [h.make_node("ReduceSum", ["h", "one1"], ["r"], keepdims=1), h.make_node("Add", ["h", "r"], ["hr"])]
        outs += [vi("hr")]
    g = h.make_graph(nodes, "axis",
                     [h.make_tensor_value_info("x", T.FLOAT, [b, N]), h.make_tensor_value_info("h", T.FLOAT, [2, b, H]),
                      h.make_tensor_value_info("sr", T.INT64, []), h.make_tensor_value_info("gain", T.FLOAT, [1])],
                     outs, [W2, ints("rate", 16000), ints("zero1", [0]), ints("one1", [1]), ints("n1", [N]),
                            nh.from_array(np.float32(0.5), "half")])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 13)])
    m.ir_version = 7
    os.makedirs(path + "/rules")
    onnx.save(m, path + "/model.onnx")
for name, variant in (("ax", ""), ("gg", "gg"), ("red", "red")):
    model("%s/%s" % (D, name if name != "red" else "axred"), False, variant)
    model("%s/%s1" % (D, name if name != "red" else "axred"), True, variant)
# 400 samples: after a probe of 64, five batches of 64 and one of 16 (for
# 3 workers); axsr: samples 101-110 and 251 at another rate (they run
# alone, the else branch); axsr0: sample 6 at another rate (in the probe)
for data, odd in (("axdata", ()), ("axsr", tuple(range(100, 110)) + (250,)), ("axsr0", (5,))):
    os.makedirs("%s/%s" % (D, data))
    for i in range(400):
        np.savez("%s/%s/s%03d.npz" % (D, data, i),
                 x=(r.standard_normal((1, N)) * (1 + i % 5)).astype(np.float32),
                 h=r.standard_normal((2, 1, H)).astype(np.float32),
                 sr=np.array(8000 if i in odd else 16000, np.int64), gain=np.array([0.75], np.float32))
EOF
then
	fail "axis batching: make models" "$(tail -3 "$A/mk.err")"
else
	# close PROJECT REF: the statistics of the same tensors, the same counts
	# and ranges, min and max within 1e-5 of their magnitude and histograms
	# within 1e-4 of the count (a MatMul of 64 rows may round otherwise)
	cat > "$A/close.py" <<'EOF'
import sys
import numpy as np
from calibstats import read
def load(path):
    nb, ns, st = read(path)
    return ns, {k: (s.count, s.nonfinite, s.range, s.lo, s.hi, s.hist.astype(np.int64)) for k, s in st.items()}
(ns, got), (ns1, want) = load(sys.argv[1]), load(sys.argv[2])
assert ns == ns1 and sorted(got) == sorted(want), (ns, ns1, sorted(set(got) ^ set(want)))
for k, w in want.items():
    g = got[k]
    assert g[:3] == w[:3], (k, g[:3], w[:3])
    big = max(abs(w[3]), abs(w[4]))
    assert abs(g[3] - w[3]) <= 1e-5 * big and abs(g[4] - w[4]) <= 1e-5 * big, (k, g[3:5], w[3:5])
    assert np.abs(g[5] - w[5]).sum() <= 1e-4 * w[0], (k, np.abs(g[5] - w[5]).sum(), w[0])
assert want["w"][0] == 8 * 6 * int(sys.argv[3]), want["w"][:1]  # the sliced Constant, once per sample that took it
EOF
	for spec in "ax axdata 400" "ax axsr 389" "ax axsr0 399"; do
		set -- $spec
		rm -rf "$TMPD/$1/cache" "$TMPD/$1/build" "$TMPD/${1}1/cache" "$TMPD/${1}1/build"
		if ! calib "$1" "$2" || ! calib "${1}1" "$2"; then
			fail "axis batching: calibrate $1 on $2" "$(tail -2 "$TMPD/$1/log" "$TMPD/${1}1/log")"
			continue
		fi
		case $2 in
		axsr0) want="one sample at a time: samples differ in shared input sr" what="a shared input that differs in the probe stops batching" ;;
		*) want="batches of 64 samples (input 'h' stacked on axis 1, 'sr' shared, 'gain' shared)"
		   what="x on axis 0, h on axis 1, sr and gain shared are stacked into batches ($2)" ;;
		esac
		if grep -qF "calibrate: $want" "$TMPD/$1/log" && ! grep -q "batches of" "$TMPD/${1}1/log"; then
			pass "$what"
		else
			fail "$what" "$(grep -h calibrate: "$TMPD/$1/log" "$TMPD/${1}1/log" | tr '\n' ' ')"
		fi
		if "$PY" "$A/close.py" "$(stats "$1")" "$(stats "${1}1")" "$3" > "$A/close.out" 2>&1; then
			pass "axis batching: statistics on $2 are those of one sample at a time"
		else
			fail "axis batching: statistics on $2 are those of one sample at a time" "$(tail -1 "$A/close.out")"
		fi
		[ "$2" = axsr0 ] && continue
		cp "$(stats "$1")" "$A/$2.j1"
		same_at_j "axis batching: $2" "$1" "$2" "$A/$2.j1"
	done
	for spec in "gg gg" "axred r"; do
		set -- $spec
		if calib "$1" axdata && calib "${1}1" axdata &&
			grep -q "calibrate: one sample at a time: the stacked dimensions are not a batch dimension: activation $2\$" \
				"$TMPD/$1/log"; then
			pass "axis batching: activation $2 (not growing with the batch) falls back to one at a time"
		else
			fail "axis batching: activation $2 (not growing with the batch) falls back to one at a time" \
				"$(grep -h calibrate: "$TMPD/$1/log" | tr '\n' ' ')"
		fi
		check "axis batching: $1's statistics are those of the fixed model" cmp "$(stats "$1")" "$(stats "${1}1")"
	done
fi
