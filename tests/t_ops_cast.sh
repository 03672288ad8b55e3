#!/bin/sh
# Cast to the types libonnx-testdata has no tests for (the four float8 types
# with saturate on and off, int4, uint4; float16 and bfloat16 for company):
# float32 -> TYPE -> float32 through quantmake run, compared bit for bit with
# onnx's ReferenceEvaluator on values around every range limit, tie and
# subnormal. One case per (type, saturate).
ROOT="${ROOT:-$(cd "$(dirname "$0")/.." && pwd)}"
QUANTMAKE="${QUANTMAKE:-$ROOT/quantmake}"
PY="${PY:-$ROOT/.venv/bin/python}"
if ! "$PY" -c 'import onnx, onnx.reference, numpy' 2>/dev/null; then
	echo "SKIP: ops_cast: onnx with its reference evaluator is not installed (sh scripts/venv.sh)"
	exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp" || exit 1
QUANTMAKE="$QUANTMAKE" "$PY" - <<'EOF'
import os, subprocess
import numpy as np
import onnx
from onnx import helper as h, TensorProto as T
from onnx.reference import ReferenceEvaluator

qm = os.environ["QUANTMAKE"]
x = np.concatenate([np.linspace(-600, 600, 4001), np.linspace(-1, 1, 2001),
                    np.linspace(-0.02, 0.02, 2001),
                    [np.nan, 0.0, -0.0, 448, 464, 465, 480, 240, 248, 57344, 61440,
                     61441, 1e-9, -1e-9, 7.5, 8.5, -8.5, 15.5]]).astype(np.float32)
np.save("x.npy", x)
cases = [(t, s) for t in ("FLOAT8E4M3FN", "FLOAT8E4M3FNUZ", "FLOAT8E5M2", "FLOAT8E5M2FNUZ")
         for s in (1, 0)] + [(t, 1) for t in ("INT4", "UINT4", "FLOAT16", "BFLOAT16")]
for to, sat in cases:
    name = "cast_%s_saturate%d" % (to.lower(), sat)
    kw = {"saturate": sat} if to.startswith("FLOAT8") else {}
    g = h.make_graph([h.make_node("Cast", ["X"], ["C"], to=getattr(T, to), **kw),
                      h.make_node("Cast", ["C"], ["Y"], to=T.FLOAT)], "g",
                     [h.make_tensor_value_info("X", T.FLOAT, [x.size])],
                     [h.make_tensor_value_info("Y", T.FLOAT, [x.size])])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 21)])
    m.ir_version = 10
    onnx.save(m, "m.onnx")
    ref = ReferenceEvaluator(m).run(None, {"X": x})[0]
    r = subprocess.run([qm, "run", "m.onnx", "-i", "X=x.npy", "-o", "y.npz", "-q"],
                       capture_output=True, text=True)
    if r.returncode:
        print("FAIL: %s: quantmake run: %s" % (name, r.stderr.strip().splitlines()[-1:]))
        continue
    y = np.load("y.npz")["Y"]
    same = (y == ref) | (np.isnan(y) & np.isnan(ref))
    bad = np.where(~same)[0]
    if len(bad):
        i = bad[0]
        print("FAIL: %s: %d of %d differ, first %r -> %r, expected %r"
              % (name, len(bad), x.size, float(x[i]), float(y[i]), float(ref[i])))
    else:
        print("PASS: %s" % name)
EOF
