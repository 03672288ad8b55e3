#!/bin/sh
# The calibration taps' scan (src/quant/calib.c: scan_512 where the CPU has
# AVX-512, scan otherwise): per tensor the count of finite values, of
# non-finite ones, their min and max, and (entropy) a histogram whose bins
# add up to the finite count. Checked against numpy on tensors with NaN,
# +-inf, zeros of both signs and lengths around the 32-value step (1, 31,
# 32, 33, 1013), with both methods (minmax: no histograms). The tensors are
# a model input, a Relu of it (half zeros) and a Neg (min and max swap).
. "$(dirname "$0")/lib/common.sh"
mktmp
export PYTHONPATH="$ROOT/tests/lib"  # calibstats.py reads calibration.stats
Q=$QUANTMAKE
if ! "$PY" -c 'import onnx, numpy' 2>/dev/null; then
	fail "calibration scan" "$PY lacks onnx/numpy (run scripts/venv.sh)"
	exit 0
fi

cat > "$TMPD/mk.py" <<'EOF'
import os, sys
import numpy as np
import onnx
from onnx import TensorProto as T, helper as h
D = sys.argv[1]
r = np.random.default_rng(11)
g = h.make_graph([h.make_node("Relu", ["x"], ["y"], name="relu"), h.make_node("Neg", ["x"], ["z"], name="neg")],
                 "m", [h.make_tensor_value_info("x", T.FLOAT, ["N", "L"])],
                 [h.make_tensor_value_info("y", T.FLOAT, ["N", "L"]), h.make_tensor_value_info("z", T.FLOAT, ["N", "L"])])
m = h.make_model(g, opset_imports=[h.make_opsetid("", 13)])
m.ir_version = 7
os.makedirs(D + "/p/rules")
onnx.save(m, D + "/p/model.onnx")
os.makedirs(D + "/calib")
k = 0
for n in (1, 31, 32, 33, 1013):
    for rep in range(3):
        x = (r.standard_normal((1, n)) * (1 + 100 * rep)).astype(np.float32)
        f = x.reshape(-1)
        for v, frac in ((0.0, 5), (-0.0, 7), (np.nan, 11), (np.inf, 13), (-np.inf, 17)):
            f[r.integers(0, n, max(1, n // frac))] = v
        if n == 1 and rep == 0:
            f[0] = 2.5
        np.save("%s/calib/s%03d.npy" % (D, k), x)
        k += 1
EOF
"$PY" "$TMPD/mk.py" "$TMPD" 2>"$TMPD/mk.err" || { fail "make the model and samples" "$(tail -3 "$TMPD/mk.err")"; exit 0; }

cat > "$TMPD/check.py" <<'EOF'
import glob, sys
import numpy as np
from calibstats import read
nb, ns, st = read(sys.argv[1])
got = {k: (s.count, s.nonfinite, s.lo, s.hi, s.hist) for k, s in st.items()}
xs = np.concatenate([np.load(f).reshape(-1) for f in sorted(glob.glob(sys.argv[2] + "/*.npy"))])
with np.errstate(invalid="ignore"):
    want = {"x": xs, "y": np.where(np.isnan(xs), xs, np.maximum(xs, 0)), "z": -xs}
bad = []
for name, v in want.items():
    fin = v[np.isfinite(v)]
    cnt, nf, mn, mx, hist = got[name]
    exp = (fin.size, v.size - fin.size, float(fin.min()) + 0.0, float(fin.max()) + 0.0)
    if (cnt, nf, mn, mx) != exp:
        bad.append("%s: count, non-finite, min, max %s, numpy %s" % (name, (cnt, nf, mn, mx), exp))
    if nb and int(hist.sum()) != fin.size:
        bad.append("%s: histogram holds %d values, %d finite" % (name, int(hist.sum()), fin.size))
    if nb and int(hist[nb // 2]) < int((fin == 0).sum()):
        bad.append("%s: %d zeros, the zero bin holds %d" % (name, int((fin == 0).sum()), int(hist[nb // 2])))
print("; ".join(bad))
sys.exit(1 if bad else 0)
EOF

for method in minmax entropy; do
	printf '[model m]\nsource = model.onnx\nquantize = static\nquantize.calibration = calib\nquantize.method = %s\n' \
		"$method" > "$TMPD/p/rules/m.rules"
	rm -rf "$TMPD/p/calib" && cp -R "$TMPD/calib" "$TMPD/p/calib" # (a link out of the project is refused)
	rm -rf "$TMPD/p/build" "$TMPD/p/cache"
	if ! QUANTMAKE_CACHE=$TMPD/p/cache "$Q" -C "$TMPD/p" -j1 m:calibrate > "$TMPD/log" 2>&1; then
		fail "calibrate ($method)" "$(tail -2 "$TMPD/log")"
		continue
	fi
	if out=$("$PY" "$TMPD/check.py" "$TMPD/p/build/m/calibrate/calibration.stats" "$TMPD/calib" 2>&1); then
		pass "$method statistics with NaN, +-inf, +-0 and ragged lengths match numpy"
	else
		fail "$method statistics with NaN, +-inf, +-0 and ragged lengths match numpy" "$out"
	fi
done
