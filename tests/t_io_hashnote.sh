#!/bin/sh
# A model a stage saves is hashed as it is written, and the cache takes
# that hash instead of reading the file back (hash_note_fd, src/hash.c):
# the notes themselves (tests/hashnote_check.c), and a build whose every
# stored object still hashes to its name — saves of every kind: a model
# re-encoded, one kept as its original bytes (not protobuf-c's encoding),
# one with its weights in an external data file, and fp16's and dynamic
# quantization's of it, whose tensors are made as they are written.
. "$(dirname "$0")/lib/common.sh"
mktmp
Q=$QUANTMAKE

# hash_avx2.c needs -mavx2 (as the Makefile gives it), the rest not
cc_san="-fsanitize=address,undefined -fno-sanitize-recover=all"
echo 'int main(void){return 0;}' > "$TMPD/probe.c"
${CC:-cc} $cc_san -o "$TMPD/probe" "$TMPD/probe.c" 2>/dev/null || cc_san=
# shellcheck disable=SC2086
if ${CC:-cc} -std=c11 -D_GNU_SOURCE -O1 -g $cc_san -mavx2 -Wall -Wextra -Werror -Wno-unused-parameter \
	-c -o "$TMPD/hash_avx2.o" "$ROOT/src/hash_avx2.c" 2> "$TMPD/cc.err"; then
	# shellcheck disable=SC2046
	c_check hashnote_check "$ROOT/src/hash.c" "$ROOT/src/util.c" "$TMPD/hash_avx2.o" \
		$(pkg-config --cflags --libs libxxhash 2>/dev/null || echo -lxxhash)
else
	fail "hashnote_check" "cannot compile src/hash_avx2.c: $(head -c 300 "$TMPD/cc.err")"
fi

if ! "$PY" -c 'import onnx, numpy' 2>/dev/null; then
	fail "stored objects hash to their names" "$PY lacks onnx/numpy (run scripts/venv.sh)"
	exit 0
fi
cat > "$TMPD/mk.py" <<'PYEOF'
import os, sys
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper, shape_inference
D = sys.argv[1]
r = np.random.default_rng(9)
w1 = numpy_helper.from_array(r.standard_normal((64, 96)).astype(np.float32), "w1")
w2 = numpy_helper.from_array(r.standard_normal((96, 32)).astype(np.float32), "w2")
nodes = [helper.make_node("MatMul", ["x", "w1"], ["h"], name="mm1"),
         helper.make_node("Relu", ["h"], ["hr"], name="relu"),
         helper.make_node("MatMul", ["hr", "w2"], ["y"], name="mm2")]
g = helper.make_graph(nodes, "m", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 64])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 32])], [w1, w2])
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
m.ir_version = 7
os.makedirs(D + "/p/rules")
os.makedirs(D + "/p/calib")
onnx.save(m, D + "/p/plain.onnx")
onnx.save(m, D + "/p/ext.onnx", save_as_external_data=True, all_tensors_to_one_file=True,
          location="ext.onnx.data", size_threshold=0)
# not protobuf-c's encoding (ir_version after the graph), typed already:
# infer-shapes saves it as its original bytes
a = onnx.ModelProto()
a.CopyFrom(shape_inference.infer_shapes(m))
a.ClearField("ir_version")
v = onnx.ModelProto()
v.ir_version = 7
open(D + "/p/odd.onnx", "wb").write(a.SerializeToString() + v.SerializeToString())
for i in range(8):
    np.save("%s/p/calib/s%d.npy" % (D, i), r.standard_normal((1, 64)).astype(np.float32))
PYEOF
"$PY" "$TMPD/mk.py" "$TMPD" 2>"$TMPD/mk.err" || { fail "make the models" "$(tail -3 "$TMPD/mk.err")"; exit 0; }
cat > "$TMPD/p/rules/m.rules" <<'EOF2'
[model plain]
source = plain.onnx
quantize = static
quantize.calibration = calib

[model ext]
source = ext.onnx
quantize = static
quantize.calibration = calib

[model odd]
source = odd.onnx
quantize = static
quantize.calibration = calib

[model half]
source = ext.onnx
quantize = fp16

[model dyn]
source = ext.onnx
quantize = dynamic
EOF2
if QUANTMAKE_CACHE="$TMPD/p/cache" "$Q" -C "$TMPD/p" -j2 > "$TMPD/log" 2>&1; then
	bad= n=0
	for f in "$TMPD"/p/cache/objects/*/*; do
		n=$((n + 1))
		got=$("$Q" hash "$f" | awk '{print $1}')
		[ "$got" = "$(basename "$f")" ] || bad="$bad $(basename "$f")=$got"
	done
	if [ -z "$bad" ] && [ "$n" -ge 14 ]; then
		pass "every stored object hashes to its name ($n objects)"
	else
		fail "every stored object hashes to its name" "$n objects;$bad"
	fi
else
	fail "build models saved every way" "$(tail -3 "$TMPD/log")"
fi
