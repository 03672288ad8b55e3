#!/bin/sh
# The one-hot shortcut of the interpreter's float MatMul and Gemm against a
# constant B (src/ops/fgemm.c, fgemm_packed_b): rows of A with at most one
# nonzero element are made from the row of B it picks, the others by the
# blocked kernel. Checked here, on models built with onnx:
# - one-hot A as Equal and Cast make it (magika's first layer) and as an
#   input, with other values than 1 (products that overflow, that are too
#   small for a float, -0 in A and B), zero rows, nonzeros in either block
#   of 256 rows of K, widths that are not a multiple of 32, batch
#   dimensions broadcast against B [1, K, N], a 1-D A, Gemm with alpha,
#   beta, C and transB: the bytes of the full product
#   (QUANTMAKE_MATMUL_DENSE=1), the same on 2 threads, and onnxruntime's
#   values within 1e-5;
# - where the shortcut would not give those bytes it is not taken (B with
#   an infinity or NaN, K below 64, a dense A) or a row is left to the
#   kernel (rows of A with two nonzeros or more: the first, one in the
#   middle or last, 5 rows, 150 or 400 of 1200, runs of them, most of the
#   first 256, all but the first; a NaN or infinity in A, a product that
#   is -0 when K is one block of 256) and the result is still the full
#   product's; under gdb (when installed), the shortcut's rows function
#   and the blocked kernel's are each seen to run or not as expected (the
#   former only on the first 256 rows when over half of them are left).
. "$(dirname "$0")/lib/common.sh"
mktmp
Q=$QUANTMAKE
if ! "$PY" -c 'import onnx, onnxruntime, numpy' 2>/dev/null; then
	fail "one-hot MatMul tests" "$PY lacks onnx/onnxruntime (run scripts/venv.sh)"
	exit 0
fi

cat > "$TMPD/mk.py" <<'EOF'
"""NAME.onnx, NAME.npz (inputs) and NAME.path (what fgemm_packed_b is
expected to run: shortcut, kernel, both, or probe: the shortcut on the
first 256 rows, then the kernel on all) per case"""
import sys
import numpy as np
import onnx
from onnx import TensorProto as T, helper as h, numpy_helper as nh
D = sys.argv[1]
r = np.random.default_rng(11)
def save(name, path, nodes, feed, inits, outs=("y",), opset=13):
    tt = {np.dtype(np.float32): T.FLOAT, np.dtype(np.int32): T.INT32}
    g = h.make_graph(nodes, name, [h.make_tensor_value_info(k, tt[v.dtype], list(v.shape)) for k, v in feed.items()],
                     [h.make_tensor_value_info(o, T.FLOAT, None) for o in outs],
                     [nh.from_array(v, k) for k, v in inits.items()])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", opset)])
    m.ir_version = 8
    onnx.save(m, "%s/%s.onnx" % (D, name))
    np.savez("%s/%s.npz" % (D, name), **feed)
    open("%s/%s.path" % (D, name), "w").write(path)
    print(name)
def bmat(k, n):
    return r.standard_normal((k, n)).astype(np.float32)
def onehot(shape, k, vals=None, zero_rows=0.1):
    """rows of k with one nonzero (from vals, else 1), some rows all zero,
    the zeros of some rows -0"""
    a = np.zeros(shape + (k,), np.float32).reshape(-1, k)
    for i in range(a.shape[0]):
        if r.random() < 0.2:
            a[i] = -0.0
        if r.random() >= zero_rows:
            a[i, r.integers(k)] = 1.0 if vals is None else vals[r.integers(len(vals))]
    return a.reshape(shape + (k,))
def mm(name, path, a, b):
    save(name, path, [h.make_node("MatMul", ["a", "b"], ["y"])], {"a": a}, {"b": b})

# magika's first layer: bytes -> Unsqueeze -> Equal(0..256) -> Cast -> MatMul;
# -1 and 300 match nothing (rows of zeros)
x = r.integers(-1, 258, (2, 700)).astype(np.int32)
x[0, :5] = [-1, 300, 0, 256, 255]
save("equal_cast", "shortcut",
     [h.make_node("Unsqueeze", ["x", "ax"], ["xu"]), h.make_node("Equal", ["xu", "rng"], ["eq"]),
      h.make_node("Cast", ["eq"], ["a"], to=T.FLOAT), h.make_node("MatMul", ["a", "b"], ["y"])],
     {"x": x}, {"ax": np.array([2], np.int64), "rng": np.arange(257, dtype=np.int32), "b": bmat(257, 64)})
# other values: products that overflow (3e38 * |b| > 1), that are too small
# for a float (1e-30 * 1e-20: +-0, of either sign before the blocks are
# added), -0 in b; 80 columns (a last panel of 16)
b = bmat(300, 80)
b[7, :10] = 1e-20
b[7, 10:20] = -1e-20
b[7, 20:30] = -0.0
b[299, :] = -1e-20
vals = [1.0, -2.5, 0.3, 3e38, -3e38, 1e-30, -1e-30, 1e-45, 7.0]
a = onehot((3, 400), 300, vals)
a[0, :6] = 0
a[0, 0, 7], a[0, 1, 7], a[0, 2, 299], a[0, 3, 299], a[0, 4, 7], a[0, 5, 256] = 1e-30, -1e-30, 1e-30, -1e-30, -1.0, -3e38
mm("values_input", "shortcut", a, b)
# batch dimensions broadcast against B [1, K, N]; N 48
mm("batch_bcast", "shortcut", onehot((2, 3, 40), 270, vals), bmat(270, 48)[None])
# a 1-D A: one row
a1 = np.zeros(290, np.float32)
a1[288] = -4.0
mm("vector_a", "shortcut", a1, bmat(290, 33))
# K of one block (100; 64, the threshold): products that are nonzero or
# exactly zero
mm("one_block", "shortcut", onehot((500,), 100, [1.0, -2.0, 0.25]), bmat(100, 64))
mm("k_64", "shortcut", onehot((500,), 64, [1.0, -2.0, 0.25]), bmat(64, 64))
# ... and one that is -0 (too small for a float): left to the kernel
a = onehot((500,), 100, [1.0])
b = bmat(100, 64)
b[3, 5] = -1e-20
a[200, :] = 0
a[200, 3] = 1e-30
mm("one_block_neg0", "both", a, b)
# B with an infinity or a NaN: 0 * inf is NaN in the full product
for nm, v in (("b_inf", np.inf), ("b_nan", np.nan)):
    b = bmat(300, 64)
    b[10, 3] = v
    mm(nm, "kernel", onehot((600,), 300), b)
# rows with two or more nonzeros: the first (a dense row: the whole
# product by the kernel), one in the middle or last, 5 (a strip of fewer
# than 12), 150 of 1200 here and there, 400 of the 944 after the first 256
# (gathered 240 at a time), runs of 100, 47 and 60 (the last), read in
# place from 48 rows on; 150 of the first 256, all but the first (over
# half of the first 256: the whole product by the kernel)
for nm, rows in (("mixed_first", [0]), ("mixed_middle", [517]), ("mixed_last", [1199]),
                 ("mixed_5", [3, 40, 41, 700, 1100]), ("mixed_150", r.choice(1200, 150, replace=False)),
                 ("mixed_400_late", 256 + r.choice(944, 400, replace=False)),
                 ("mixed_runs", list(range(200, 300)) + list(range(400, 447)) + [500] + list(range(1140, 1200))),
                 ("mixed_150_early", 1 + r.choice(255, 150, replace=False)),
                 ("dense_after_first", range(1, 1200))):
    a = onehot((1200,), 300, vals)
    for row in rows:
        a[row, :] = 0
        a[row, r.choice(300, 2 + row % 4, replace=False)] = r.standard_normal(2 + row % 4)
    mm(nm, "probe" if nm in ("mixed_150_early", "dense_after_first") else "both", a, bmat(300, 64))
# NaN or infinity as the only nonzero of a row
for nm, v in (("a_nan", np.nan), ("a_inf", -np.inf)):
    a = onehot((900,), 300)
    a[450, :] = 0
    a[450, 100] = v
    mm(nm, "both", a, bmat(300, 64))
# K below the shortcut's threshold (64): never tried
mm("k_small", "kernel", onehot((2000,), 63), bmat(63, 64))
# an ordinary dense product
mm("dense_a", "both", bmat(600, 300), bmat(300, 64))
# Gemm with a constant B: alpha, C (a bias), beta; transB
c = bmat(1, 40)[0]
save("gemm", "shortcut", [h.make_node("Gemm", ["a", "b", "c"], ["y"], alpha=0.5, beta=2.0)],
     {"a": onehot((500,), 300, vals)}, {"b": bmat(300, 40), "c": c})
save("gemm_transb", "shortcut", [h.make_node("Gemm", ["a", "b"], ["y"], transB=1)],
     {"a": onehot((500,), 300, vals)}, {"b": bmat(40, 300)})
EOF

cat > "$TMPD/cmp.py" <<'EOF'
import sys
import numpy as np
from kernels import ort_mismatch
model, feed, fast, dense, two = sys.argv[1:6]
a, b, t = np.load(fast), np.load(dense), np.load(two)
for k in b:
    if a[k].shape != b[k].shape or a[k].tobytes() != b[k].tobytes():
        n = int(np.sum(a[k].view(np.uint32) != b[k].view(np.uint32))) if a[k].shape == b[k].shape else -1
        print("FAIL: output %s: %d elements differ from the full product's bytes" % (k, n)); sys.exit()
    if a[k].tobytes() != t[k].tobytes():
        print("FAIL: output %s differs between 1 and 2 threads" % k); sys.exit()
# float32 sums of k products in another order than onnxruntime's (OpenBLAS
# without AVX-512) differ by up to about k ulps
k = max(v.shape[-1] for v in np.load(feed).values())
bad = ort_mismatch(model, feed, a, 1e-5 * max(1, k / 128))
print("FAIL: " + bad if bad else "ok")
EOF

cases=$("$PY" "$TMPD/mk.py" "$TMPD") || { fail "one-hot MatMul test models written"; exit 0; }

# hits CASE F1 F2: how often functions F1 and F2 ran, under gdb (one
# thread): "N1 N2"; nothing when gdb could not tell
hits() {
	gdb -q -batch -ex 'set breakpoint pending off' -ex "break $2" -ex "break $3" -ex 'ignore 1 1000000000' \
		-ex 'ignore 2 1000000000' -ex run -ex 'info breakpoints' \
		--args "$Q" run "$TMPD/$1.onnx" -i "$TMPD/$1.npz" -t 1 2>&1 |
		awk '/^[12] +breakpoint +keep/ { b = $1; n[b] = 0 } b && /already hit/ { n[b] = $4 }
		     END { if (b == 2) print n[1] + 0, n[2] + 0 }'
}
havegdb=0
if ! command -v gdb > /dev/null 2>&1; then
	skip "which path each product takes" "gdb is not installed"
elif ! gdb -q -batch -ex run --args /bin/true 2>&1 | grep -q 'exited normally'; then
	skip "which path each product takes" "gdb cannot run a program here (ptrace not allowed?)"
elif ! has_avx512; then
	# the one-hot shortcut is a path of the AVX-512 kernel (fgemm.c);
	# without AVX-512 every product runs on OpenBLAS and the values are
	# still checked below
	skip "which path each product takes" "this CPU lacks AVX-512F, where the kernel under test runs"
else
	havegdb=1
fi

for c in $cases; do
	if ! "$Q" run "$TMPD/$c.onnx" -i "$TMPD/$c.npz" -o "$TMPD/$c.fast.npz" -t 1 > /dev/null 2> "$TMPD/err" ||
		! QUANTMAKE_MATMUL_DENSE=1 "$Q" run "$TMPD/$c.onnx" -i "$TMPD/$c.npz" -o "$TMPD/$c.dense.npz" -t 1 \
			> /dev/null 2> "$TMPD/err" ||
		! "$Q" run "$TMPD/$c.onnx" -i "$TMPD/$c.npz" -o "$TMPD/$c.t2.npz" -t 2 > /dev/null 2> "$TMPD/err"; then
		fail "$c: runs" "$(head -c 300 "$TMPD/err")"
		continue
	fi
	res=$(PYTHONPATH="$ROOT/tests/lib" "$PY" "$TMPD/cmp.py" "$TMPD/$c.onnx" "$TMPD/$c.npz" "$TMPD/$c.fast.npz" "$TMPD/$c.dense.npz" \
		"$TMPD/$c.t2.npz" 2>&1 | tail -1)
	if [ "$res" = ok ]; then
		pass "$c: the full product's bytes, on 1 and 2 threads too, and onnxruntime's values"
	else
		fail "$c" "$res"
	fi
	[ $havegdb = 1 ] || continue
	want=$(cat "$TMPD/$c.path")
	set -- $(hits "$c" onehot_rows run_cols)
	rows=${1:-?} cols=${2:-?} ok=
	case $want in
	shortcut) ok=$([ "$rows" != ? ] && [ "$rows" -gt 0 ] && [ "$cols" = 0 ] && echo 1) ;;
	both) ok=$([ "$rows" != ? ] && [ "$rows" -gt 0 ] && [ "$cols" != ? ] && [ "$cols" -gt 0 ] && echo 1) ;;
	probe) ok=$([ "$rows" = 2 ] && [ "$cols" != ? ] && [ "$cols" -gt 0 ] && echo 1) ;;
	kernel) ok=$([ "$rows" = 0 ] && [ "$cols" != ? ] && [ "$cols" -gt 0 ] && echo 1) ;;
	esac
	if [ "$ok" = 1 ]; then
		pass "$c: $want (shortcut rows function ran $rows times, blocked kernel's $cols)"
	else
		fail "$c: $want" "shortcut rows function ran $rows times, blocked kernel's $cols"
	fi
done
# the switch itself: under QUANTMAKE_MATMUL_DENSE=1 the shortcut is not tried
if [ $havegdb = 1 ]; then
	set -- $(QUANTMAKE_MATMUL_DENSE=1 hits equal_cast onehot_rows run_cols)
	if [ "${1:-?}" = 0 ] && [ "${2:-0}" != 0 ]; then
		pass "QUANTMAKE_MATMUL_DENSE=1: the full product"
	else
		fail "QUANTMAKE_MATMUL_DENSE=1: the full product" "shortcut rows function ran ${1:-?} times"
	fi
fi
