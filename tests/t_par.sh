#!/bin/sh
# The kernels' worker pool (src/ops/par.c, behind nn_parallel and
# elem_parallel):
# - tests/par_check.c, built here with AddressSanitizer and UBSan when the
#   compiler has them, checks the pool on its own: the ranges of 0 to 70
#   threads, return codes, nested and concurrent regions (inline), 100,000
#   regions back to back, stop and restart, regions in a forked child and
#   in its parent after the fork;
# - models on every parallel kernel path (Conv: direct on one image and on
#   a batch, implicit GEMM, small outputs batched, im2col in double,
#   depthwise, grouped, strided, dilated, 1-D and 3-D; Gemm and MatMul; MaxPool, AveragePool,
#   GlobalAveragePool; Relu, LeakyRelu, Tanh, Erf, Sigmoid, Softmax) give
#   the same bytes on 2, 3, 4 and 70 threads as on 1, match onnxruntime
#   (numpy for the double Conv), and give the same bytes over 30 runs back
#   to back in one process (--bench checks every run against the first),
#   during which no threads but the pool's 3 workers (and OpenBLAS's) are
#   ever seen: the workers are kept, not started per call;
# - a whole build -j4 of a project whose model comes from an export command
#   (fork/exec) and is calibrated and verified by the interpreter on 4
#   threads gives the bytes of a build -j1.
# make check runs this with the ASan binary, so the pool's workers run under
# AddressSanitizer too.
. "$(dirname "$0")/lib/common.sh"
mktmp
Q=$QUANTMAKE

# --- the pool on its own ---
c_check par_check "$ROOT/src/ops/par.c"

if ! "$PY" -c 'import onnx, onnxruntime, numpy' 2>/dev/null; then
	fail "pool through the interpreter" "$PY lacks onnx/onnxruntime/numpy (run scripts/venv.sh)"
	exit 0
fi

# --- models on the parallel kernel paths ---
cat > "$TMPD/mk.py" <<'EOF'
"""NAME.onnx and NAME.npz (inputs) per case; prints the names."""
import sys
import numpy as np
import onnx
from onnx import TensorProto as T, helper as h, numpy_helper as nh
D = sys.argv[1]
r = np.random.default_rng(11)

def w(*shape, dt=np.float32):
    return (r.standard_normal(shape) * 0.2).astype(dt)

def save(name, nodes, inputs, inits, outputs, dt=T.FLOAT):
    g = h.make_graph(nodes, name,
                     [h.make_tensor_value_info(n, dt, v.shape) for n, v in inputs.items()],
                     [h.make_tensor_value_info(o, dt, None) for o in outputs],
                     [nh.from_array(v, n) for n, v in inits.items()])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, "%s/%s.onnx" % (D, name))
    np.savez("%s/%s.npz" % (D, name), **inputs)
    print(name)

def cnn(name, n):
    # direct Conv (+Relu), pool, strided and dilated Conv, depthwise,
    # grouped, pointwise, 160 channels (too many for the direct Conv: the
    # implicit GEMM), averages, then Gemm and Softmax
    save(name, [
        h.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
        h.make_node("Relu", ["c1"], ["r1"]),
        h.make_node("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2]),
        h.make_node("Conv", ["p1", "w2"], ["c2"], pads=[1, 1, 1, 1], strides=[2, 2]),
        h.make_node("Conv", ["c2", "w3"], ["c3"], pads=[2, 2, 2, 2], dilations=[2, 2]),
        h.make_node("Conv", ["c3", "wd"], ["c4"], pads=[1, 1, 1, 1], group=32),
        h.make_node("Conv", ["c4", "wg"], ["c5"], pads=[1, 1, 1, 1], group=4),
        h.make_node("Conv", ["c5", "wp", "bp"], ["c6"]),
        h.make_node("Conv", ["c6", "w7"], ["c7"], pads=[1, 1, 1, 1]),
        h.make_node("AveragePool", ["c7"], ["a6"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        h.make_node("LeakyRelu", ["a6"], ["l6"], alpha=0.1),
        h.make_node("GlobalAveragePool", ["l6"], ["g6"]),
        h.make_node("Flatten", ["g6"], ["f6"]),
        h.make_node("Gemm", ["f6", "wf", "bf"], ["o"], transB=1),
        h.make_node("Softmax", ["o"], ["y"], axis=-1),
        h.make_node("Tanh", ["c3"], ["t3"]),
    ], {"x": w(n, 8, 64, 64)},
       {"w1": w(32, 8, 3, 3), "b1": w(32), "w2": w(32, 32, 3, 3), "w3": w(32, 32, 3, 3),
        "wd": w(32, 1, 3, 3), "wg": w(64, 8, 3, 3), "wp": w(64, 64, 1, 1), "bp": w(64),
        "w7": w(160, 64, 3, 3), "wf": w(1000, 160), "bf": w(1000)}, ["y", "t3"])

cnn("cnn1", 1)
cnn("cnn6", 6)
# small outputs: several images per product
save("convsmall", [
    h.make_node("Conv", ["x", "w1"], ["c1"]),
    h.make_node("Relu", ["c1"], ["y"]),
], {"x": w(64, 32, 6, 6)}, {"w1": w(48, 32, 3, 3)}, ["y"])
# products and elementwise kernels big enough for 4 threads
save("dense", [
    h.make_node("MatMul", ["x", "w1"], ["m1"]),
    h.make_node("Gemm", ["m1", "w2", "b2"], ["m2"], transB=1),
    h.make_node("Erf", ["m2"], ["e"]),
    h.make_node("Sigmoid", ["m1"], ["s"]),
    h.make_node("Mul", ["e", "s"], ["es"]),
    h.make_node("Tanh", ["es"], ["t"]),
    h.make_node("Relu", ["t"], ["rl"]),
    h.make_node("Softmax", ["rl"], ["y"], axis=-1),
], {"x": w(256, 384)}, {"w1": w(384, 1024), "w2": w(1024, 1024), "b2": w(1024)}, ["y"])
# 1-D and 3-D convolutions, pooling
save("conv13", [
    h.make_node("Conv", ["x", "w1"], ["c1"], pads=[2, 2], strides=[1]),
    h.make_node("MaxPool", ["c1"], ["y1"], kernel_shape=[3], strides=[2]),
], {"x": w(4, 16, 2000)}, {"w1": w(32, 16, 5)}, ["y1"])
save("conv3d", [
    h.make_node("Conv", ["x", "w1"], ["c1"], pads=[1, 1, 1, 1, 1, 1]),
    h.make_node("AveragePool", ["c1"], ["y"], kernel_shape=[2, 2, 2], strides=[2, 2, 2]),
], {"x": w(2, 4, 16, 24, 24)}, {"w1": w(16, 4, 3, 3, 3)}, ["y"])
# double: the im2col path; the reference from numpy
x, w1, b1 = w(2, 16, 48, 48, dt=np.float64), w(32, 16, 3, 3, dt=np.float64), w(32, dt=np.float64)
save("convf64", [
    h.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
    h.make_node("Relu", ["c1"], ["y"]),
], {"x": x}, {"w1": w1, "b1": b1}, ["y"], T.DOUBLE)
xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
c1 = sum(np.einsum("nchw,mc->nmhw", xp[:, :, i:i + 48, j:j + 48], w1[:, :, i, j])
         for i in range(3) for j in range(3))
np.savez("%s/convf64.ref.npz" % D, y=np.maximum(c1 + b1[:, None, None], 0))
EOF
"$PY" "$TMPD/mk.py" "$TMPD" > "$TMPD/cases" 2> "$TMPD/mk.err" || { fail "make models" "$(tail -3 "$TMPD/mk.err")"; exit 0; }

cat > "$TMPD/ort.py" <<'EOF'
"""ort.py MODEL INPUTS OUT: compare OUT (quantmake's) with onnxruntime, or
with MODEL's .ref.npz where there is one (onnxruntime has no double Conv)"""
import os, sys
import numpy as np
import onnxruntime as ort
got = np.load(sys.argv[3])
refp = sys.argv[1][:-len(".onnx")] + ".ref.npz"
if os.path.exists(refp):
    want = dict(np.load(refp))
    outs = [(n, want[n]) for n in want]
else:
    s = ort.InferenceSession(sys.argv[1], providers=["CPUExecutionProvider"])
    outs = [(o.name, v) for o, v in zip(s.get_outputs(), s.run(None, dict(np.load(sys.argv[2]))))]
for name, ref in outs:
    tol = 1e-9 if ref.dtype == np.float64 else 2e-4
    if not np.allclose(got[name], ref, rtol=tol, atol=tol):
        sys.exit("%s: largest difference %g" % (name, np.abs(got[name] - ref).max()))
EOF

while read -r c; do
	m=$TMPD/$c.onnx
	if ! "$Q" run "$m" -i "$TMPD/$c.npz" -o "$TMPD/$c.t1.npz" -t 1 -q > "$TMPD/err" 2>&1; then
		fail "$c: 1 thread" "$(tail -1 "$TMPD/err")"
		continue
	fi
	if "$PY" "$TMPD/ort.py" "$m" "$TMPD/$c.npz" "$TMPD/$c.t1.npz" > "$TMPD/err" 2>&1; then
		pass "$c: matches the reference"
	else
		fail "$c: matches the reference" "$(tail -1 "$TMPD/err")"
	fi
	ok=1 why=
	for t in 2 3 4 70; do
		if ! "$Q" run "$m" -i "$TMPD/$c.npz" -o "$TMPD/$c.t$t.npz" -t $t -q > "$TMPD/err" 2>&1; then
			ok=0 why="$t threads: $(tail -1 "$TMPD/err")"
			break
		fi
		if ! cmp -s "$TMPD/$c.t1.npz" "$TMPD/$c.t$t.npz"; then
			ok=0 why="$t threads give other bytes than 1"
			break
		fi
	done
	[ $ok = 1 ] && pass "$c: same bytes on 1, 2, 3, 4, 70 threads" || fail "$c: same bytes on 1, 2, 3, 4, 70 threads" "$why"
	# 30 runs in one process, each checked against the first; meanwhile
	# the threads of the process are sampled: the pool's are kept, so no
	# more than 7 are ever seen (the caller, 3 workers, and OpenBLAS's 3
	# where a product calls it), where a thread per call would show new ones
	OPENBLAS_NUM_THREADS=4 "$Q" run "$m" -i "$TMPD/$c.npz" -o "$TMPD/$c.b.npz" -t 4 -q --bench 30 \
		> "$TMPD/err" 2>&1 &
	pid=$!
	: > "$TMPD/tids"
	while kill -0 $pid 2>/dev/null; do
		ls "/proc/$pid/task" >> "$TMPD/tids" 2>/dev/null
		sleep 0.01
	done
	seen=$(sort -u "$TMPD/tids" | wc -l)
	if ! wait $pid; then
		fail "$c: 30 runs on 4 threads in one process" "$(tail -1 "$TMPD/err")"
	elif ! cmp -s "$TMPD/$c.t1.npz" "$TMPD/$c.b.npz"; then
		fail "$c: 30 runs on 4 threads in one process" "other bytes than 1 thread"
	elif [ "$seen" -gt 7 ]; then
		fail "$c: 30 runs on 4 threads in one process" "$seen threads seen, expected at most 7"
	else
		pass "$c: 30 runs on 4 threads in one process, threads kept"
	fi
done < "$TMPD/cases"

# --- a build: export command, calibration and verify on 4 threads ---
"$PY" - "$TMPD" <<'EOF' 2> "$TMPD/mk.err" || fail "make project" "$(tail -3 "$TMPD/mk.err")"
import os, shutil, sys
import numpy as np
D = sys.argv[1]
r = np.random.default_rng(5)
for p in ("p1", "p4"):
    os.makedirs("%s/%s/rules" % (D, p))
    os.makedirs("%s/%s/calib" % (D, p))
    shutil.copy("%s/cnn1.onnx" % D, "%s/%s/src.onnx" % (D, p))
    with open("%s/%s/rules/m.rules" % (D, p), "w") as f:
        f.write('[model m]\nexport = cp src.onnx "$out"\nexport.deps = src.onnx\n'
                "quantize = static\nquantize.calibration = calib\n"
                "verify.data = calib/s00*.npy\nverify.min-sqnr = off\n")
    r = np.random.default_rng(5)
    for i in range(40):
        np.save("%s/%s/calib/s%03d.npy" % (D, p, i), (r.standard_normal((1, 8, 64, 64)) * 0.5).astype(np.float32))
EOF
for j in 1 4; do
	QUANTMAKE_CACHE=$TMPD/p$j/cache "$Q" -C "$TMPD/p$j" -j$j > "$TMPD/p$j/log" 2>&1 ||
		fail "build -j$j with an export command" "$(tail -3 "$TMPD/p$j/log")"
done
if [ -f "$TMPD/p1/build/m/m.onnx" ] && [ -f "$TMPD/p4/build/m/m.onnx" ]; then
	grep -q "calibrate: 40 samples" "$TMPD/p4/log" && grep -q "^\[.*verify m" "$TMPD/p4/log" &&
		pass "build -j4: export command, calibrate and verify ran" ||
		fail "build -j4: export command, calibrate and verify ran" "$(cat "$TMPD/p4/log")"
	check "build -j4 gives the bytes of -j1" cmp "$TMPD/p1/build/m/m.onnx" "$TMPD/p4/build/m/m.onnx"
fi
