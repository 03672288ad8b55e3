#!/bin/sh
# The packing of constant right operands for the interpreter's float Gemm
# and MatMul (src/ops/fgemm.c: fgemm_pack_b, and fgemm_pack_bt, which
# reads Gemm's B [N, K] of transB = 1 as it lies instead of transposing it
# first):
# - tests/fgemm_pack_check.c, built here with AddressSanitizer and UBSan
#   when the compiler has them, checks the packers on their own: the
#   packed bytes against the documented layout and the finite flag (an
#   infinity or a NaN first, last or in the middle), for many shapes, and
#   the packs of constants that interpreters side by side share
#   (fgemm_pack_*_const: one pack for the same bytes at the same address,
#   a new one when the bytes there changed, freed with its last user);
# - through `quantmake run`, Gemms with K of 1, 3, 17, 300 and 3136 and N
#   of 1, 10, 33, 128 and 600 (not multiples of the 16 and 32 the packers
#   work in; 300 and 600 span two blocks), without C and with alpha, beta
#   and C of every broadcast shape, B with an infinity or a NaN (first,
#   last, in the middle) against one-hot rows of A (where a wrong finite
#   flag would take a shortcut that loses the NaNs): transB = 1 gives the
#   bytes of the same model with B stored transposed and transB = 0 (the
#   same packed bytes), and of MatMul where it packs too (N of 16 or
#   more, no alpha nor C); 2 threads give the bytes of 1; and the values
#   are onnxruntime's within 1e-5 (1e-5 k / 128 past k = 128) relative to
#   max(1, |value|); NaN and infinity positions equal.
. "$(dirname "$0")/lib/common.sh"
mktmp
Q=$QUANTMAKE

# --- the packers on their own ---
# fgemm.c includes the operator headers, which need the protobuf-c code
# the build generates from the system's onnx.proto
if gen_onnx_pb; then
	# shellcheck disable=SC2046
	c_check fgemm_pack_check -I"$TMPD/gen" $(pkg-config --cflags libprotobuf-c) "$ROOT/src/ops/fgemm.c" "$ROOT/tests/lib/fgemm_stubs.c"
else
	fail "fgemm_pack_check" "cannot generate onnx.pb-c.h: $(head -c 300 "$TMPD/err")"
fi

if ! "$PY" -c 'import onnx, onnxruntime, numpy' 2>/dev/null; then
	fail "Gemm packing through the interpreter" "$PY lacks onnx/onnxruntime/numpy (run scripts/venv.sh)"
	exit 0
fi

# --- through the interpreter ---
cat > "$TMPD/gemm.py" <<'EOF'
"""Writes, runs (quantmake run on 1 and 2 threads) and checks each case:
a group of models that must give the same bytes (Gemm transB = 1, Gemm
with B transposed and transB = 0, MatMul), and onnxruntime's values.
Prints PASS/FAIL lines."""
import os
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto as T, helper as h, numpy_helper as nh

from kernels import ort_mismatch

D, qm = sys.argv[1], sys.argv[2]
r = np.random.default_rng(20261122)


def save(path, node, a, inits):
    g = h.make_graph([node], "g", [h.make_tensor_value_info("a", T.FLOAT, list(a.shape))],
                     [h.make_tensor_value_info("y", T.FLOAT, None)],
                     [nh.from_array(v, k) for k, v in inits.items()])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 13)])
    m.ir_version = 8
    onnx.save(m, path)


def run(path, feed, threads):
    out = "%s.t%d.npz" % (path, threads)
    p = subprocess.run([qm, "run", path, "-i", feed, "-o", out, "-t", str(threads), "-q"],
                       capture_output=True, text=True)
    if p.returncode:
        return None, (p.stderr.strip().splitlines() or ["exit %d" % p.returncode])[-1]
    return np.load(out)["y"], None


def case(name, a, b, c=None, matmul=True, **attrs):
    """Gemm(a, b, c) as transB = 1 (b stored transposed) and transB = 0,
    and MatMul(a, b) when it packs b and no attribute nor c is given"""
    base = os.path.join(D, name)
    feed = base + ".npz"
    np.savez(feed, a=a)
    ins = ["a", "b"] + (["c"] if c is not None else [])
    extra = {"c": c} if c is not None else {}
    models = [("transB=1", h.make_node("Gemm", ins, ["y"], transB=1, **attrs), dict(b=np.ascontiguousarray(b.T), **extra)),
              ("transB=0", h.make_node("Gemm", ins, ["y"], **attrs), dict(b=b, **extra))]
    if matmul and c is None and not attrs and b.shape[1] >= 16:
        models.append(("MatMul", h.make_node("MatMul", ["a", "b"], ["y"]), {"b": b}))
    got = []
    for i, (what, node, inits) in enumerate(models):
        path = "%s.%d.onnx" % (base, i)
        save(path, node, a, inits)
        y1, err = run(path, feed, 1)
        y2, err2 = run(path, feed, 2) if y1 is not None else (None, None)
        if y1 is None or y2 is None:
            print("FAIL: %s: %s runs: %s" % (name, what, err or err2))
            return
        if y1.tobytes() != y2.tobytes():
            print("FAIL: %s: %s gives other bytes on 2 threads than on 1" % (name, what))
            return
        # float32 sums of k products in another order than onnxruntime's
        # (OpenBLAS without AVX-512) differ by up to about k ulps
        bad = ort_mismatch(path, feed, {"y": y1}, 1e-5 * max(1, a.shape[1] / 128))
        if bad:
            print("FAIL: %s: %s: %s" % (name, what, bad))
            return
        got.append((what, y1))
    for what, y in got[1:]:
        if y.shape != got[0][1].shape or y.tobytes() != got[0][1].tobytes():
            n = int(np.sum(y.view(np.uint32) != got[0][1].view(np.uint32))) if y.shape == got[0][1].shape else -1
            print("FAIL: %s: %s differs from %s in %d elements" % (name, what, got[0][0], n))
            return
    print("PASS: %s: %s the same bytes, on 1 and 2 threads, and onnxruntime's values"
          % (name, ", ".join(w for w, _ in got)))


def mat(*shape):
    return r.standard_normal(shape).astype(np.float32)


def onehot(m, k):
    """rows of k with one nonzero (some rows all zero)"""
    a = np.zeros((m, k), np.float32)
    for i in range(m):
        if r.random() < 0.9:
            a[i, r.integers(k)] = [1.0, -2.5, 0.5][r.integers(3)]
    return a


for k in (1, 3, 17, 300, 3136):
    for n in (1, 10, 33, 128, 600):
        if k == 3136 and n == 600:
            continue
        m = 7 if k > 300 else 13
        case("k%d_n%d" % (k, n), mat(m, k), mat(k, n))
        case("k%d_n%d_bias" % (k, n), mat(m, k), mat(k, n), mat(n), alpha=0.5, beta=2.0)
# every shape of C, beta 0 and a negative alpha
for k, n in ((17, 33), (300, 10), (3136, 128)):
    m = 9
    case("k%d_n%d_c_full" % (k, n), mat(m, k), mat(k, n), mat(m, n), alpha=-1.5, beta=0.25)
    case("k%d_n%d_c_col" % (k, n), mat(m, k), mat(k, n), mat(m, 1), beta=3.0)
    case("k%d_n%d_c_scalar" % (k, n), mat(m, k), mat(k, n), mat(1), alpha=2.0)
    case("k%d_n%d_c_row2d" % (k, n), mat(m, k), mat(k, n), mat(1, n))
    case("k%d_n%d_beta0" % (k, n), mat(m, k), mat(k, n), mat(n), beta=0.0)
# an infinity or a NaN in B against one-hot rows of A (K of 64 or more:
# where the shortcut would run if B were finite)
for k, n in ((100, 10), (300, 33), (3136, 128)):
    for vname, v in (("nan", np.nan), ("inf", np.inf), ("ninf", -np.inf)):
        for where, (i, j) in (("first", (0, 0)), ("last", (k - 1, n - 1)), ("middle", (k // 2, n // 2))):
            b = mat(k, n)
            b[i, j] = v
            case("k%d_n%d_%s_%s" % (k, n, vname, where), onehot(40, k), b)
EOF

PYTHONPATH="$ROOT/tests/lib" "$PY" "$TMPD/gemm.py" "$TMPD" "$Q" 2>&1 || fail "Gemm packing cases" "the script failed"
