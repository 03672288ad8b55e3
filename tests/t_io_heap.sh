#!/bin/sh
# Huge pages for the build's children (src/heap.c): a forked child's new
# heap memory comes in transparent huge pages without touching what the
# parent allocated (tests/heap_check.c), a build gives the same bytes with
# them as with QUANTMAKE_HUGEPAGES=0 at -j1 and -j3, and its children take
# far fewer page faults with them (a count, not a time).
. "$(dirname "$0")/lib/common.sh"
mktmp
Q=$QUANTMAKE
unset QUANTMAKE_HUGEPAGES

# heap.c alone, without sanitizers: under AddressSanitizer it does nothing
if ${CC:-cc} -std=c11 -D_GNU_SOURCE -O1 -g -Wall -Wextra -Werror -Wno-unused-parameter -Wshadow -Wvla \
	-pthread -I"$ROOT/src" -o "$TMPD/heap_check" "$ROOT/tests/heap_check.c" "$ROOT/src/heap.c" \
	2> "$TMPD/heap_check.err"; then
	out=$("$TMPD/heap_check" 2>&1)
	echo "$out"
	echo "$out" | grep -Eq '^(PASS|FAIL|SKIP): ' || fail "heap_check" "printed no result: $out"
else
	fail "heap_check" "cannot build tests/heap_check.c: $(head -c 300 "$TMPD/heap_check.err")"
fi

if ! "$PY" -c 'import onnx, numpy' 2>/dev/null; then
	skip "builds with huge pages" "$PY lacks onnx/numpy (run scripts/venv.sh)"
	exit 0
fi
# a model with 6 MiB of weights (so each stage copies them out of the file)
cat > "$TMPD/mk.py" <<'PYEOF'
import os, sys
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
D = sys.argv[1]
r = np.random.default_rng(5)
w1 = numpy_helper.from_array(r.standard_normal((256, 2048)).astype(np.float32), "w1")
w2 = numpy_helper.from_array(r.standard_normal((2048, 256)).astype(np.float32), "w2")
w3 = numpy_helper.from_array(r.standard_normal((256, 2048)).astype(np.float32), "w3")
nodes = [helper.make_node("MatMul", ["x", "w1"], ["h"], name="mm1"),
         helper.make_node("Relu", ["h"], ["hr"], name="relu"),
         helper.make_node("MatMul", ["hr", "w2"], ["o"], name="mm2"),
         helper.make_node("MatMul", ["o", "w3"], ["y"], name="mm3")]
g = helper.make_graph(nodes, "m", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 256])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 2048])], [w1, w2, w3])
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
m.ir_version = 7
os.makedirs(D + "/p/rules")
os.makedirs(D + "/p/calib")
onnx.save(m, D + "/p/model.onnx")
for i in range(20):
    np.save("%s/p/calib/s%02d.npy" % (D, i), r.standard_normal((1, 256)).astype(np.float32))
PYEOF
"$PY" "$TMPD/mk.py" "$TMPD" 2>"$TMPD/mk.err" || { fail "make the model" "$(tail -3 "$TMPD/mk.err")"; exit 0; }
printf '[model m]\nsource = model.onnx\nquantize = static\nquantize.calibration = calib\n' > "$TMPD/p/rules/m.rules"

# build LABEL J [ENV...]: a fresh build; its objects and outputs listed
# (objects are named by their hash) in $TMPD/LABEL.list, and its
# children's minor page faults in $TMPD/LABEL.faults
build() {
	label=$1 j=$2
	shift 2
	rm -rf "$TMPD/p/cache" "$TMPD/p/build"
	env "$@" QUANTMAKE_CACHE="$TMPD/p/cache" "$PY" -c '
import resource, subprocess, sys
r = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_minflt)
sys.exit(r.returncode)' "$Q" -C "$TMPD/p" -j"$j" > "$TMPD/$label.faults" || return 1
	(cd "$TMPD/p/cache/objects" && find . -type f | sort &&
		cd "$TMPD/p/build" && find . -type f ! -path './.quantmake/*' | sort | xargs md5sum) > "$TMPD/$label.list"
}

for j in 1 3; do
	if build huge$j $j && build small$j $j QUANTMAKE_HUGEPAGES=0; then
		if cmp -s "$TMPD/huge$j.list" "$TMPD/small$j.list" && [ -s "$TMPD/huge$j.list" ]; then
			pass "a build with -j$j gives the same bytes with huge pages as without"
		else
			fail "a build with -j$j gives the same bytes with huge pages as without" \
				"$(diff "$TMPD/huge$j.list" "$TMPD/small$j.list" | head -4)"
		fi
	else
		fail "a build with -j$j, with and without huge pages" "the build failed"
	fi
done

if grep -q __asan_init "$Q"; then
	skip "huge pages save page faults" "$Q has AddressSanitizer's allocator"
elif grep -q '\[never\]' /sys/kernel/mm/transparent_hugepage/enabled 2>/dev/null ||
	! [ -e /sys/kernel/mm/transparent_hugepage/enabled ]; then
	skip "huge pages save page faults" "transparent huge pages are off on this system"
else
	h=$(cat "$TMPD/huge1.faults") s=$(cat "$TMPD/small1.faults")
	# each stage child copies the 6 MiB of weights: 1500 faults of 4 KiB
	# each, a few with huge pages
	if [ "$h" -gt 0 ] && [ $((h * 10)) -lt $((s * 6)) ]; then
		pass "huge pages save page faults ($h against $s)"
	else
		fail "huge pages save page faults" "$h minor faults with them, $s without"
	fi
fi
