#!/bin/sh
# Interpreters of one model side by side (calibration's workers) share the
# channel-vector product's packed Conv weights (src/ops/cvpack.c through
# fgemm_pack_const): a second interpreter compares the weights against the
# live pack (cv_same) instead of packing them again.
# - tests/cvpack_check.c, built here with AddressSanitizer and UBSan when
#   the compiler has them: cv_pack's bytes against the documented layout;
#   cv_same says equal for the same bytes and different for one float
#   changed anywhere (first, last, middle, a group's last channel), a -0
#   for a +0, a NaN of another payload, a padding lane not zero; and
#   fgemm_pack_const shares a pack only while the bytes at the address
#   are those it was made from (a changed weight gets a pack of its own).
# - through calibration: the Conv layers of 17 to 128 output channels
#   (grouped too) give the same calibration.stats with -j1 and -j3 (three
#   interpreters sharing the packs) and on samples that make every
#   worker's batches differ.
. "$(dirname "$0")/lib/common.sh"
mktmp
Q=$QUANTMAKE

if gen_onnx_pb; then
	# shellcheck disable=SC2046
	c_check cvpack_check -I"$TMPD/gen" $(pkg-config --cflags libprotobuf-c) "$ROOT/src/ops/cvpack.c" \
		"$ROOT/src/ops/fgemm.c" "$ROOT/tests/lib/fgemm_stubs.c"
else
	fail "cvpack_check" "cannot generate onnx.pb-c.h: $(head -c 300 "$TMPD/err")"
fi

if ! "$PY" -c 'import onnx, numpy' 2>/dev/null; then
	fail "shared Conv packs through calibration" "$PY lacks onnx/numpy (run scripts/venv.sh)"
	exit 0
fi
cat > "$TMPD/mk.py" <<'PYEOF'
import os, sys
import numpy as np
import onnx
from onnx import TensorProto as T, helper as h, numpy_helper as nh
D = sys.argv[1]
r = np.random.default_rng(3)
nodes, inits = [], []
c, x = 3, "x"
for i, (m, g) in enumerate(((24, 1), (40, 2), (128, 1), (33, 1))):
    inits += [nh.from_array((r.standard_normal((m, c // g, 3, 3)) * 0.3).astype(np.float32), "w%d" % i),
              nh.from_array((r.standard_normal(m) * 0.1).astype(np.float32), "b%d" % i)]
    nodes += [h.make_node("Conv", [x, "w%d" % i, "b%d" % i], ["c%d" % i], name="conv%d" % i, pads=[1, 1, 1, 1],
                          group=g),
              h.make_node("Relu", ["c%d" % i], ["r%d" % i], name="relu%d" % i)]
    c, x = m, "r%d" % i
g = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, ["N", 3, 12, 12])],
                 [h.make_tensor_value_info(x, T.FLOAT, None)], inits)
m = h.make_model(g, opset_imports=[h.make_opsetid("", 13)])
m.ir_version = 7
os.makedirs(D + "/p/rules")
onnx.save(m, D + "/p/model.onnx")
os.makedirs(D + "/p/calib")
for i in range(60):
    np.save("%s/p/calib/s%03d.npy" % (D, i), r.standard_normal((1, 3, 12, 12)).astype(np.float32))
open(D + "/p/rules/m.rules", "w").write(
    "[model m]\nsource = model.onnx\nquantize = static\nquantize.calibration = calib\n")
PYEOF
"$PY" "$TMPD/mk.py" "$TMPD" 2> "$TMPD/mk.err" || { fail "make the model" "$(tail -3 "$TMPD/mk.err")"; exit 0; }
ok=1
for j in 1 3; do
	rm -rf "$TMPD/p/cache" "$TMPD/p/build"
	if QUANTMAKE_CACHE=$TMPD/p/cache "$Q" -C "$TMPD/p" -j$j m:calibrate > "$TMPD/log$j" 2>&1; then
		cp "$TMPD/p/build/m/calibrate/calibration.stats" "$TMPD/s$j"
	else
		ok=0
	fi
done
if [ $ok = 1 ] && grep -q "calibrate: [23] workers side by side" "$TMPD/log3" && cmp -s "$TMPD/s1" "$TMPD/s3"; then
	pass "calibration with interpreters sharing Conv packs gives the bytes of one interpreter"
else
	fail "calibration with interpreters sharing Conv packs gives the bytes of one interpreter" \
		"$(tail -3 "$TMPD/log1" "$TMPD/log3")"
fi
