#!/bin/sh
# `quantmake run` frees the weights its kernels keep packed (Conv, MatMul;
# InterpOpts.release_consts) and those folded into them (BatchNormalization)
# after their first use; --keep-weights keeps them. Checked here:
# - outputs are the same bytes with and without --keep-weights, and every
#   run of --bench reproduces the first (so runs after the release too), on
#   the benchmark's CNN and transformer and on a model with float16 Conv and
#   MatMul weights, a grouped Conv with a folded normalization, a Conv whose
#   output grid is narrower than a packed tile, a weight shared by two
#   MatMuls, a weight that is also a graph output, a weight read by an If
#   body, a Gemm, and the same model with its weights in external data;
#   and on Gemms with constant B (transB 0 and 1, alpha, beta, C of shape
#   [N], [1] and [1,N]); all match onnxruntime;
# - the Gemms give the same bytes with 1 and 2 threads;
# - the weights figure of --bench drops where weights were released;
# - samples of other batch sizes after the release still run (the packed
#   forms serve every shape);
# - a main-graph weight that If bodies read only through Slice/Concat
#   folded at plan time is freed (silero-vad's LSTM weights), one that a
#   body returns is kept;
# - LSTM and GRU products run on fgemm where the CPU has AVX-512F: the same
#   bytes on 1 and 2 threads, and OpenBLAS is never loaded for them;
# - the memory pattern: the arena of repeated runs stays near the peak
#   live set, bench/interp.sh's memory goal holds where it has room, runs
#   that depart from the pattern (other batch sizes) and a run too long to
#   record (a Loop of 12000 iterations) give onnxruntime's values;
# - equal folded constants (an If's two branches reordering one weight
#   alike) are held once.
. "$(dirname "$0")/lib/common.sh"
mktmp
Q=$QUANTMAKE
if ! "$PY" -c 'import onnx, onnxruntime, numpy' 2>/dev/null; then
	fail "interpreter memory tests" "$PY lacks onnx/onnxruntime (run scripts/venv.sh)"
	exit 0
fi

cat > "$TMPD/mk.py" <<'EOF'
import sys
import numpy as np
import onnx
from onnx import TensorProto as T, helper as h, numpy_helper as nh
D = sys.argv[1]
r = np.random.default_rng(11)
def w(shape, dt=np.float32):
    return (r.standard_normal(shape) / np.sqrt(np.prod(shape[1:]) if len(shape) > 1 else 1)).astype(dt)
inits = [
    nh.from_array(w([16, 3, 3, 3], np.float16), "w16"),      # float16 Conv weights
    nh.from_array(w([32, 4, 3, 3]), "wg"),                   # grouped Conv (group 4)
    nh.from_array(w([32]), "bg"),
    nh.from_array((1 + 0.1 * r.standard_normal(32)).astype(np.float32), "s"),
    nh.from_array((0.1 * r.standard_normal(32)).astype(np.float32), "o"),
    nh.from_array((0.1 * r.standard_normal(32)).astype(np.float32), "m"),
    nh.from_array((1 + 0.1 * r.random(32)).astype(np.float32), "v"),
    nh.from_array(w([24, 32, 3, 3]), "wsmall"),              # 3x3 output: narrower than a tile
    nh.from_array(w([24 * 9, 40]), "wshared"),               # read by two MatMuls
    nh.from_array(w([40, 40]), "wout"),                      # also a graph output
    nh.from_array(w([40, 40]), "wif"),                       # read inside the If body
    nh.from_array(w([40, 40], np.float16), "wh"),            # float16 MatMul weights
    nh.from_array(w([10, 40]), "wgemm"),
    nh.from_array(np.array([-1, 24 * 9], np.int64), "shape"),
    nh.from_array(np.array(True), "cond"),
]
then_g = h.make_graph([h.make_node("MatMul", ["p1", "wif"], ["t"])], "then", [],
                      [h.make_tensor_value_info("t", T.FLOAT, ["N", 40])])
else_g = h.make_graph([h.make_node("Identity", ["p1"], ["e"])], "else", [],
                      [h.make_tensor_value_info("e", T.FLOAT, ["N", 40])])
nodes = [
    h.make_node("Cast", ["x"], ["x16"], to=T.FLOAT16),
    h.make_node("Conv", ["x16", "w16"], ["c16"], pads=[1, 1, 1, 1]),
    h.make_node("Cast", ["c16"], ["c1"], to=T.FLOAT),
    h.make_node("Conv", ["c1", "wg", "bg"], ["c2"], pads=[1, 1, 1, 1], group=4),
    h.make_node("BatchNormalization", ["c2", "s", "o", "m", "v"], ["b2"]),
    h.make_node("Relu", ["b2"], ["r2"]),
    h.make_node("MaxPool", ["r2"], ["p2"], kernel_shape=[4, 4], strides=[4, 4]),
    h.make_node("Conv", ["p2", "wsmall"], ["c3"], pads=[1, 1, 1, 1]),
    h.make_node("Reshape", ["c3", "shape"], ["f"]),
    h.make_node("MatMul", ["f", "wshared"], ["p0"]),
    h.make_node("Relu", ["f"], ["f2"]),
    h.make_node("MatMul", ["f2", "wshared"], ["q0"]),
    h.make_node("Add", ["p0", "q0"], ["p1"]),
    h.make_node("If", ["cond"], ["i1"], then_branch=then_g, else_branch=else_g),
    h.make_node("MatMul", ["i1", "wout"], ["m1"]),
    h.make_node("Cast", ["m1"], ["m16"], to=T.FLOAT16),
    h.make_node("MatMul", ["m16", "wh"], ["h16"]),
    h.make_node("Cast", ["h16"], ["h1"], to=T.FLOAT),
    h.make_node("Gemm", ["h1", "wgemm"], ["y"], transB=1),
]
g = h.make_graph(nodes, "mem", [h.make_tensor_value_info("x", T.FLOAT, ["N", 3, 12, 12])],
                 [h.make_tensor_value_info("y", T.FLOAT, ["N", 10]),
                  h.make_tensor_value_info("wout", T.FLOAT, [40, 40])], inits)
m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)], ir_version=8)
onnx.checker.check_model(m)
onnx.save(m, D + "/mix.onnx")
onnx.save(m, D + "/mixext.onnx", save_as_external_data=True, all_tensors_to_one_file=True,
          location="mixext.data", size_threshold=1024)
for n in (1, 4):
    np.savez(D + "/mix%d.npz" % n, x=r.standard_normal([n, 3, 12, 12]).astype(np.float32))
# Gemms with constant B, packed with beta * C where C is one row
gi = [nh.from_array(w([40, 48]), "g1"), nh.from_array(w([48]), "c1"),
      nh.from_array(w([20, 48]), "g2"), nh.from_array(w([1]), "c2"),
      nh.from_array(w([24, 20]), "g3"), nh.from_array(w([1, 24]), "c3")]
gn = [h.make_node("Gemm", ["x", "g1", "c1"], ["y1"], alpha=0.5, beta=2.0),
      h.make_node("Gemm", ["y1", "g2", "c2"], ["y2"], transB=1),
      h.make_node("Gemm", ["y2", "g3", "c3"], ["y"], transB=1, alpha=1.5, beta=0.7)]
g = h.make_graph(gn, "gemm", [h.make_tensor_value_info("x", T.FLOAT, ["N", 40])],
                 [h.make_tensor_value_info("y", T.FLOAT, ["N", 24])], gi)
m = h.make_model(g, opset_imports=[h.make_opsetid("", 13)], ir_version=8)
onnx.checker.check_model(m)
onnx.save(m, D + "/gemm.onnx")
np.savez(D + "/gemm.npz", x=r.standard_normal([37, 40]).astype(np.float32))
# If bodies reading a 256 KiB main-graph weight only through folded
# Slice/Concat (then) or returning another as it is (else)
wb, wr = w([256, 256]), w([4, 256])
def body(name, nodes, out):
    return h.make_graph(nodes, name, [], [h.make_tensor_value_info(out, T.FLOAT, None)])
sl = lambda o, a, b: [h.make_node("Constant", [], [o + "s"], value=nh.from_array(np.array([a], np.int64))),
                      h.make_node("Constant", [], [o + "e"], value=nh.from_array(np.array([b], np.int64))),
                      h.make_node("Slice", ["wb", o + "s", o + "e"], [o])]
then_g = body("then", sl("lo", 128, 256) + sl("hi", 0, 128) +
              [h.make_node("Concat", ["lo", "hi"], ["cat"], axis=0), h.make_node("MatMul", ["x", "cat"], ["t"])], "t")
else_g = body("else", [h.make_node("Identity", ["wr"], ["e"])], "e")
g = h.make_graph([h.make_node("If", ["c"], ["y"], then_branch=then_g, else_branch=else_g)], "iffold",
                 [h.make_tensor_value_info("x", T.FLOAT, ["N", 256]), h.make_tensor_value_info("c", T.BOOL, [])],
                 [h.make_tensor_value_info("y", T.FLOAT, None)], [nh.from_array(wb, "wb"), nh.from_array(wr, "wr")])
m = h.make_model(g, opset_imports=[h.make_opsetid("", 13)], ir_version=8)
onnx.save(m, D + "/iffold.onnx")
np.savez(D + "/iffold.npz", x=r.standard_normal([3, 256]).astype(np.float32), c=np.array(True))
np.savez(D + "/iffold_else.npz", x=r.standard_normal([3, 256]).astype(np.float32), c=np.array(False))
# LSTM (batch 3 and 1) and GRU with constant weights
for cell, g_ in (("LSTM", 4), ("GRU", 3)):
    hid, isz = 48, 20
    ins = [nh.from_array(w([1, g_ * hid, isz]), "W"), nh.from_array(w([1, g_ * hid, hid]), "R"),
           nh.from_array(w([1, 2 * g_ * hid]), "B")]
    g = h.make_graph([h.make_node(cell, ["x", "W", "R", "B"], ["y", "yh"], hidden_size=hid)], cell.lower(),
                     [h.make_tensor_value_info("x", T.FLOAT, [5, "N", isz])],
                     [h.make_tensor_value_info("y", T.FLOAT, None), h.make_tensor_value_info("yh", T.FLOAT, None)], ins)
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 14)], ir_version=8)
    onnx.save(m, D + "/%s.onnx" % cell.lower())
    for n in (1, 3):
        np.savez(D + "/%s%d.npz" % (cell.lower(), n), x=r.standard_normal([5, n, isz]).astype(np.float32))
EOF
"$PY" "$TMPD/mk.py" "$TMPD" || { fail "interpreter memory models" "mk.py failed"; exit 0; }
"$PY" "$ROOT/bench/interp-models.py" "$TMPD" > /dev/null || { fail "interpreter memory models" "interp-models.py failed"; exit 0; }
for m in cnn transformer; do
	QM_INT_HIGH=4 "$PY" "$ROOT/bench/interp-ort.py" feeds "$TMPD/$m.onnx" 2 "$TMPD/$m.npz" ||
		{ fail "feeds for $m"; exit 0; }
done
cp "$TMPD/mix4.npz" "$TMPD/mix.npz"
cp "$TMPD/mix4.npz" "$TMPD/mixext.npz"

# MODEL: outputs of a released run (and its --bench repeats) equal a kept
# one's bytes and onnxruntime's values; the weights figure drops
cp "$TMPD/iffold.npz" "$TMPD/iffold_then.npz"
for m in cnn transformer mix mixext gemm iffold; do
	if ! "$Q" run "$TMPD/$m.onnx" -i "$TMPD/$m.npz" -o "$TMPD/$m.rel.npz" --bench 3 -q \
		> "$TMPD/$m.rel.out" 2> "$TMPD/$m.rel.err"; then
		fail "$m: released run" "$(head -c 300 "$TMPD/$m.rel.err")"
		continue
	fi
	if ! "$Q" run "$TMPD/$m.onnx" -i "$TMPD/$m.npz" -o "$TMPD/$m.keep.npz" --bench 3 -q --keep-weights \
		> "$TMPD/$m.keep.out" 2> "$TMPD/$m.keep.err"; then
		fail "$m: kept run" "$(head -c 300 "$TMPD/$m.keep.err")"
		continue
	fi
	if cmp -s "$TMPD/$m.rel.npz" "$TMPD/$m.keep.npz"; then
		pass "$m: same bytes with and without released weights (3 more runs each)"
	else
		fail "$m: outputs differ with and without --keep-weights"
	fi
	wr=$(sed -n 's/^memory: weights \([0-9.]*\) MiB.*/\1/p' "$TMPD/$m.rel.out")
	wk=$(sed -n 's/^memory: weights \([0-9.]*\) MiB.*/\1/p' "$TMPD/$m.keep.out")
	if [ -n "$wr" ] && [ -n "$wk" ] && awk -v a="$wr" -v b="$wk" 'BEGIN { exit !(a < b) }'; then
		pass "$m: weights held $wk -> $wr MiB"
	elif ! has_avx512 && { [ "$m" = transformer ] || [ "$m" = gemm ]; } && [ -n "$wr" ] && [ "$wr" = "$wk" ]; then
		# only AVX-512's kernels pack a copy of the weights, which lets
		# the original go; OpenBLAS reads the original itself
		pass "$m: weights held $wk MiB, read in place by OpenBLAS (no AVX-512: nothing packed to release)"
	else
		fail "$m: weights figure did not drop" "released '$wr', kept '$wk' MiB"
	fi
	"$PY" - "$TMPD/$m.onnx" "$TMPD/$m.npz" "$TMPD/$m.rel.npz" > "$TMPD/$m.cmp" 2>&1 <<'EOF'
import sys
import numpy as np
import onnxruntime as ort
s = ort.InferenceSession(sys.argv[1], providers=["CPUExecutionProvider"])
feed = dict(np.load(sys.argv[2]))
got = np.load(sys.argv[3])
for o, want in zip(s.get_outputs(), s.run(None, feed)):
    g = got[o.name]
    if g.shape != want.shape or not np.allclose(g, want, rtol=2e-3, atol=2e-3):
        print("%s: max diff %g" % (o.name, np.max(np.abs(g.astype(np.float64) - want))))
        sys.exit(1)
EOF
	if [ $? -eq 0 ]; then pass "$m: matches onnxruntime"; else fail "$m: onnxruntime differs" "$(tail -3 "$TMPD/$m.cmp")"; fi
done

# the packed Gemms sum in one order whatever the thread count
if "$Q" run "$TMPD/gemm.onnx" -i "$TMPD/gemm.npz" -o "$TMPD/gemm.t1.npz" -t 1 -q 2> "$TMPD/gemm.t.err" &&
   "$Q" run "$TMPD/gemm.onnx" -i "$TMPD/gemm.npz" -o "$TMPD/gemm.t2.npz" -t 2 -q 2>> "$TMPD/gemm.t.err" &&
   cmp -s "$TMPD/gemm.t1.npz" "$TMPD/gemm.t2.npz"; then
	pass "gemm: same bytes with 1 and 2 threads"
else
	fail "gemm: results depend on the thread count" "$(head -c 300 "$TMPD/gemm.t.err")"
fi

# batch 1, then 4, then 1 again in one process: the packed forms serve
# every shape once the originals are gone
mkdir -p "$TMPD/s"
cp "$TMPD/mix1.npz" "$TMPD/s/a.npz"
cp "$TMPD/mix4.npz" "$TMPD/s/b.npz"
cp "$TMPD/mix1.npz" "$TMPD/s/c.npz"
for m in mix mixext; do
	if "$Q" run "$TMPD/$m.onnx" -s "$TMPD/s" > "$TMPD/$m.s.out" 2> "$TMPD/$m.s.err" &&
	   grep -q '^sample 1: y float \[4,10\]' "$TMPD/$m.s.out" && grep -q '^sample 2: y float \[1,10\]' "$TMPD/$m.s.out"; then
		pass "$m: batches 1, 4, 1 after the release"
	else
		fail "$m: batches 1, 4, 1 after the release" "$(head -c 300 "$TMPD/$m.s.err")"
	fi
done

# the If bodies' weights: the folded one's original is gone (only the
# MatMul's packed copy of the folded Concat stays, 0.25 MiB); the else
# branch returns its weight as it is
wr=$(sed -n 's/^memory: weights \([0-9.]*\) MiB.*/\1/p' "$TMPD/iffold.rel.out")
if [ -n "$wr" ] && awk -v a="$wr" 'BEGIN { exit !(a < 0.3) }'; then
	pass "iffold: the weight read only through folded Slice/Concat is freed ($wr MiB held)"
else
	fail "iffold: the weight read only through folded Slice/Concat is freed" "weights '$wr' MiB, expected < 0.3"
fi
if "$Q" run "$TMPD/iffold.onnx" -i "$TMPD/iffold_else.npz" -o "$TMPD/iffold.else.rel.npz" -q 2> "$TMPD/iffold.e.err" &&
   "$Q" run "$TMPD/iffold.onnx" -i "$TMPD/iffold_else.npz" -o "$TMPD/iffold.else.keep.npz" -q --keep-weights \
	2>> "$TMPD/iffold.e.err" && cmp -s "$TMPD/iffold.else.rel.npz" "$TMPD/iffold.else.keep.npz" &&
   "$PY" -c "
import numpy as np, onnx.numpy_helper as nh, onnx, sys
m = onnx.load('$TMPD/iffold.onnx')
w = [nh.to_array(i) for i in m.graph.initializer if i.name == 'wr'][0]
sys.exit(0 if np.array_equal(np.load('$TMPD/iffold.else.rel.npz')['y'], w) else 1)"; then
	pass "iffold: a weight an If body returns is kept"
else
	fail "iffold: a weight an If body returns is kept" "$(head -c 300 "$TMPD/iffold.e.err")"
fi

# LSTM and GRU: fgemm's fixed order of sums on 1 and 2 threads, onnxruntime's
# values, and no OpenBLAS (where the CPU has AVX-512F)
avx512=$(grep -c '^flags.* avx512f' /proc/cpuinfo)
for m in lstm1 lstm3 gru1 gru3; do
	mm=${m%[0-9]}
	if ! "$Q" run "$TMPD/$mm.onnx" -i "$TMPD/$m.npz" -o "$TMPD/$m.t1.npz" -t 1 -q 2> "$TMPD/$m.err" ||
	   ! "$Q" run "$TMPD/$mm.onnx" -i "$TMPD/$m.npz" -o "$TMPD/$m.t2.npz" -t 2 -q 2>> "$TMPD/$m.err"; then
		fail "$m: runs" "$(head -c 300 "$TMPD/$m.err")"
		continue
	fi
	if [ "$avx512" -gt 0 ]; then
		if cmp -s "$TMPD/$m.t1.npz" "$TMPD/$m.t2.npz"; then
			pass "$m: same bytes with 1 and 2 threads"
		else
			fail "$m: results depend on the thread count"
		fi
		if LD_DEBUG=files "$Q" run "$TMPD/$mm.onnx" -i "$TMPD/$m.npz" -t 2 -q 2>&1 | grep -q 'file=libopenblas'; then
			fail "$m: OpenBLAS loaded for a recurrent layer"
		else
			pass "$m: no OpenBLAS loaded"
		fi
	fi
	"$PY" - "$TMPD/$mm.onnx" "$TMPD/$m.npz" "$TMPD/$m.t1.npz" > "$TMPD/$m.cmp" 2>&1 <<'EOF'
import sys
import numpy as np
import onnxruntime as ort
s = ort.InferenceSession(sys.argv[1], providers=["CPUExecutionProvider"])
got = np.load(sys.argv[3])
for o, want in zip(s.get_outputs(), s.run(None, dict(np.load(sys.argv[2])))):
    if got[o.name].shape != want.shape or not np.allclose(got[o.name], want, rtol=1e-5, atol=1e-5):
        print("%s: max diff %g" % (o.name, np.max(np.abs(got[o.name] - want))))
        sys.exit(1)
EOF
	if [ $? -eq 0 ]; then pass "$m: matches onnxruntime"; else fail "$m: onnxruntime differs" "$(tail -3 "$TMPD/$m.cmp")"; fi
done

# The memory pattern (src/exec/interp.c): once runs repeat, tensors and
# kernel scratch come from one arena where those never alive at once share
# bytes. On the benchmark's CNN and transformer at batch 1 and 32, and the
# mix model: the arena ("activation buffers") stays within 1.25 x the peak
# live set (which counts the kernels' scratch); and the goal of
# bench/interp.sh, anonymous RSS over a one-MatMul model's <= weights + 2 x
# peak live, holds for the CNN (batch 1 and 32) and the transformer at
# batch 32, where the CPU runs fgemm (OpenBLAS's buffers are not the
# interpreter's to bound) and the build has no sanitizer (its allocator
# holds more). Not asserted where the model's own structure (nodes,
# names, plans: 0.2-0.3 MiB) is of the order of 2 x peak: the transformer
# at batch 1 (2.28 vs 2.29 MiB here), the mix model.
goal=1
grep -q __asan_init "$Q" && goal=0
grep -q '^flags.* avx512f' /proc/cpuinfo || goal=0
for m in cnn transformer; do
	for b in 1 32; do
		QM_INT_HIGH=4 "$PY" "$ROOT/bench/interp-ort.py" feeds "$TMPD/$m.onnx" $b "$TMPD/$m.b$b.npz" ||
			fail "feeds for $m at batch $b"
	done
done
"$PY" "$ROOT/bench/interp-ort.py" feeds "$TMPD/tiny.onnx" 1 "$TMPD/tiny.b1.npz" || fail "feeds for tiny"
base=$("$Q" run "$TMPD/tiny.onnx" -i "$TMPD/tiny.b1.npz" -t 1 -q --bench 1 2>&1 |
	sed -n 's/^memory: .*, anonymous RSS \([0-9.]*\) MiB.*/\1/p')
cp "$TMPD/mix1.npz" "$TMPD/mix.b1.npz"
cp "$TMPD/mix4.npz" "$TMPD/mix.b4.npz"
for mb in cnn.b1 cnn.b32 transformer.b1 transformer.b32 mix.b1 mix.b4; do
	m=${mb%.*}
	if ! "$Q" run "$TMPD/$m.onnx" -i "$TMPD/$mb.npz" -t 1 -q --bench 10 > "$TMPD/$mb.pat" 2> "$TMPD/$mb.pat.err"; then
		fail "$mb: pattern runs" "$(head -c 300 "$TMPD/$mb.pat.err")"
		continue
	fi
	set -- $(sed -n 's/^memory: weights \([0-9.]*\) MiB, peak live activations \([0-9.]*\) MiB, activation buffers \([0-9.]*\) MiB, anonymous RSS \([0-9.]*\) MiB.*/\1 \2 \3 \4/p' "$TMPD/$mb.pat")
	if [ $# -ne 4 ]; then
		fail "$mb: memory line" "$(grep '^memory' "$TMPD/$mb.pat")"
		continue
	fi
	if awk -v p="$2" -v a="$3" 'BEGIN { exit !(a > 0 && a <= 1.25 * p + 0.01) }'; then
		pass "$mb: activation buffers $3 MiB for a peak of $2 MiB"
	else
		fail "$mb: activation buffers" "$3 MiB for a peak of $2 MiB, expected at most 1.25 x"
	fi
	case $goal.$mb in 1.cnn.b1 | 1.cnn.b32 | 1.transformer.b32) ;; *) continue ;; esac
	if [ -n "$base" ] && awk -v w="$1" -v p="$2" -v r="$4" -v b="$base" 'BEGIN { exit !(r - b <= w + 2 * p) }'; then
		pass "$mb: anonymous RSS $4 - $base MiB <= weights $1 + 2 x peak $2"
	else
		fail "$mb: memory goal" "anonymous RSS $4 - '$base' MiB > weights $1 + 2 x peak $2"
	fi
done

# Runs that depart from the pattern (batches 1, 4, 1, 1, 4, 1, 1 in one
# process: a record, replays, departures that finish on the pool, records
# anew, and after three departures the pool alone) give onnxruntime's
# values: --stats' min, max and mean of the output over all samples
for m in mix cnn; do
	rm -rf "$TMPD/dep" && mkdir -p "$TMPD/dep"
	if [ $m = cnn ]; then
		QM_INT_HIGH=4 "$PY" "$ROOT/bench/interp-ort.py" feeds "$TMPD/cnn.onnx" 4 "$TMPD/cnn.b4.npz" ||
			fail "feeds for cnn at batch 4"
	fi
	i=0
	for b in 1 4 1 1 4 1 1; do
		cp "$TMPD/$m.b$b.npz" "$TMPD/dep/s$i.npz"
		i=$((i + 1))
	done
	if ! "$Q" run "$TMPD/$m.onnx" -s "$TMPD/dep" --stats > "$TMPD/$m.dep.out" 2> "$TMPD/$m.dep.err"; then
		fail "$m: departing runs" "$(head -c 300 "$TMPD/$m.dep.err")"
		continue
	fi
	"$PY" - "$TMPD/$m.onnx" "$TMPD/dep" "$TMPD/$m.dep.out" > "$TMPD/$m.dep.cmp" 2>&1 <<'PYEOF'
import glob, sys
import numpy as np
import onnxruntime as ort
s = ort.InferenceSession(sys.argv[1], providers=["CPUExecutionProvider"])
name = s.get_outputs()[0].name
ys = [s.run([name], dict(np.load(f)))[0].ravel() for f in sorted(glob.glob(sys.argv[2] + "/*.npz"))]
y = np.concatenate(ys).astype(np.float64)
got = [l.split() for l in open(sys.argv[3]) if l.split()[:1] == [name]]
if len(got) != 1:
    sys.exit("no stats line for " + name)
lo, hi, mean = (float(v) for v in got[0][2:5])
want = (y.min(), y.max(), y.mean())
if not np.allclose((lo, hi, mean), want, rtol=1e-3, atol=1e-4):
    sys.exit("%s: min/max/mean %r, onnxruntime %r" % (name, (lo, hi, mean), want))
PYEOF
	if [ $? -eq 0 ]; then
		pass "$m: runs of batches 1, 4, 1, 1, 4, 1, 1 match onnxruntime"
	else
		fail "$m: runs departing from the pattern" "$(tail -2 "$TMPD/$m.dep.cmp")"
	fi
done

# Equal folded constants share their bytes: both branches of an If reorder
# the same main-graph weight alike (as silero-vad's LSTM branches do) and
# read it in place (Add, Sub: nothing packs it). One 0.25 MiB copy is held,
# not two (nor the original, which only folded steps read); each branch
# gives onnxruntime's values, and --bench's repeats the same bytes.
"$PY" - "$TMPD" <<'PYEOF'
import sys
import numpy as np
import onnx
from onnx import TensorProto as T, helper as h, numpy_helper as nh
D = sys.argv[1]
r = np.random.default_rng(5)
def branch(name, op):
    c = lambda n, v: h.make_node("Constant", [], [n], value=nh.from_array(np.array(v, np.int64), n))
    nodes = [c(name + "s0", [0]), c(name + "s1", [128]), c(name + "s2", [256]), c(name + "ax", [0]),
             h.make_node("Slice", ["W", name + "s1", name + "s2", name + "ax"], [name + "hi"]),
             h.make_node("Slice", ["W", name + "s0", name + "s1", name + "ax"], [name + "lo"]),
             h.make_node("Concat", [name + "hi", name + "lo"], [name + "w"], axis=0),
             h.make_node(op, ["x", name + "w"], [name + "y"])]
    return h.make_graph(nodes, name, [], [h.make_tensor_value_info(name + "y", T.FLOAT, [256, 256])])
g = h.make_graph([h.make_node("If", ["c"], ["y"], then_branch=branch("t", "Add"), else_branch=branch("e", "Sub"))],
                 "share", [h.make_tensor_value_info("c", T.BOOL, []), h.make_tensor_value_info("x", T.FLOAT, [256, 256])],
                 [h.make_tensor_value_info("y", T.FLOAT, [256, 256])],
                 [nh.from_array(r.standard_normal((256, 256)).astype(np.float32), "W")])
onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 13)], ir_version=8), D + "/share.onnx")
x = r.standard_normal((256, 256)).astype(np.float32)
np.savez(D + "/share_t.npz", c=np.array(True), x=x)
np.savez(D + "/share_e.npz", c=np.array(False), x=x)
PYEOF
for b in t e; do
	if ! "$Q" run "$TMPD/share.onnx" -i "$TMPD/share_$b.npz" -o "$TMPD/share_$b.out.npz" --bench 3 -q \
		> "$TMPD/share_$b.out" 2> "$TMPD/share_$b.err"; then
		fail "share ($b): run" "$(head -c 300 "$TMPD/share_$b.err")"
		continue
	fi
	w=$(sed -n 's/^memory: weights \([0-9.]*\) MiB.*/\1/p' "$TMPD/share_$b.out")
	if [ -n "$w" ] && awk -v a="$w" 'BEGIN { exit !(a >= 0.24 && a < 0.3) }'; then
		pass "share ($b): equal folded constants held once ($w MiB)"
	else
		fail "share ($b): equal folded constants held once" "weights '$w' MiB, expected 0.25"
	fi
	"$PY" - "$TMPD/share.onnx" "$TMPD/share_$b.npz" "$TMPD/share_$b.out.npz" > "$TMPD/share_$b.cmp" 2>&1 <<'PYEOF'
import sys
import numpy as np
import onnxruntime as ort
s = ort.InferenceSession(sys.argv[1], providers=["CPUExecutionProvider"])
want = s.run(None, dict(np.load(sys.argv[2])))[0]
got = np.load(sys.argv[3])["y"]
sys.exit(0 if np.array_equal(got, want) else "max diff %g" % np.max(np.abs(got - want)))
PYEOF
	if [ $? -eq 0 ]; then pass "share ($b): onnxruntime's values"; else fail "share ($b): values" "$(tail -2 "$TMPD/share_$b.cmp")"; fi
done

# A run taking more blocks than a pattern records (a Loop of 12000
# iterations, two blocks each): the pool alone serves, and the results
# are onnxruntime's on every --bench repeat
"$PY" - "$TMPD" <<'PYEOF'
import sys
import numpy as np
import onnx
from onnx import TensorProto as T, helper as h
D = sys.argv[1]
body = h.make_graph([h.make_node("Identity", ["cin"], ["cout"]), h.make_node("Mul", ["v", "v"], ["sq"]),
                     h.make_node("Sqrt", ["sq"], ["vout"])], "body",
                    [h.make_tensor_value_info("i", T.INT64, []), h.make_tensor_value_info("cin", T.BOOL, []),
                     h.make_tensor_value_info("v", T.FLOAT, [64])],
                    [h.make_tensor_value_info("cout", T.BOOL, []), h.make_tensor_value_info("vout", T.FLOAT, [64])])
g = h.make_graph([h.make_node("Loop", ["n", "c", "x"], ["y"], body=body)], "loop",
                 [h.make_tensor_value_info("n", T.INT64, []), h.make_tensor_value_info("c", T.BOOL, []),
                  h.make_tensor_value_info("x", T.FLOAT, [64])], [h.make_tensor_value_info("y", T.FLOAT, [64])])
onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 13)], ir_version=8), D + "/longloop.onnx")
np.savez(D + "/longloop.npz", n=np.array(12000, np.int64), c=np.array(True),
         x=np.linspace(-2, 2, 64).astype(np.float32))
PYEOF
if "$Q" run "$TMPD/longloop.onnx" -i "$TMPD/longloop.npz" -o "$TMPD/longloop.out.npz" --bench 2 -q \
	> "$TMPD/longloop.out" 2> "$TMPD/longloop.err" &&
   "$PY" -c "
import sys, numpy as np, onnxruntime as ort
s = ort.InferenceSession('$TMPD/longloop.onnx', providers=['CPUExecutionProvider'])
want = s.run(None, dict(np.load('$TMPD/longloop.npz')))[0]
sys.exit(0 if np.array_equal(np.load('$TMPD/longloop.out.npz')['y'], want) else 1)"; then
	pass "a Loop of 12000 iterations runs on the pool (onnxruntime's values, --bench repeats)"
else
	fail "a Loop of 12000 iterations" "$(head -c 300 "$TMPD/longloop.err")"
fi
