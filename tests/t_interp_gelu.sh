#!/bin/sh
# The interpreter's Gelu fusion (src/exec/interp.c, Gelu; src/ops/unary.c,
# gelu_erf_run): torch's decomposition x * 0.5 * (1 + erf(x / sqrt 2)) runs
# as one pass when no tap watches and nothing else reads its intermediate
# values. Checked here:
# - on models torch exports (nn.GELU at opsets 13 and 17, the
#   x * 0.5 * (...) order written out, x * (1 / sqrt 2) instead of a
#   division, the tanh approximation) and on hand-built graphs (constants on
#   either side, of rank 1 and rank 3, odd sizes, inf/NaN/denormals): the
#   fused run gives the bytes of the unfused one (--trace sets taps, so every
#   node runs by itself), the same bytes on 1 and 2 threads, and matches
#   onnxruntime within 1e-4;
# - the fusion happens (peak live activations: the decomposition's
#   intermediates are never allocated) and does not where an intermediate
#   has another reader or is a graph output, nor while a tap watches (the
#   tap sees the Erf's output);
# - the Gelu operator (opset 20, both approximations) and com.microsoft's
#   Gelu against onnxruntime.
. "$(dirname "$0")/lib/common.sh"
mktmp
Q=$QUANTMAKE
if ! "$PY" -c 'import onnx, onnxruntime, numpy' 2>/dev/null; then
	fail "interpreter Gelu tests" "$PY lacks onnx/onnxruntime (run scripts/venv.sh)"
	exit 0
fi
TORCHPY=/usr/bin/python3

# torch's own exports; rows of 16 floats, 16384 rows: 1 MiB per activation
cat > "$TMPD/torchmk.py" <<'EOF'
import math, sys
import torch
D = sys.argv[1]
torch.manual_seed(3)

class Lin(torch.nn.Module):
    def __init__(s, f):
        super().__init__()
        s.l = torch.nn.Linear(8, 16)
        s.f = f
    def forward(s, x):
        return s.f(s.l(x))

def hf(x):        # the x * 0.5 * (...) order (BERT's gelu)
    return x * 0.5 * (1.0 + torch.erf(x / math.sqrt(2.0)))
def mul(x):       # multiplied by 1 / sqrt 2
    return x * 0.5 * (1.0 + torch.erf(x * 0.7071067811865476))
class ErfOut(torch.nn.Module):   # the Erf's output is also a graph output
    def forward(s, x):
        e = torch.erf(x / math.sqrt(2.0))
        return x * (1.0 + e) * 0.5, e
class DivTwice(torch.nn.Module): # the Div's output has a second reader
    def forward(s, x):
        u = x / math.sqrt(2.0)
        return x * (1.0 + torch.erf(u)) * 0.5 + u

cases = {
    "torch_gelu13": (Lin(torch.nn.GELU()), 13),
    "torch_gelu17": (Lin(torch.nn.GELU()), 17),
    "torch_hf": (Lin(hf), 13),
    "torch_mul": (Lin(mul), 13),
    "torch_tanh": (Lin(torch.nn.GELU(approximate="tanh")), 13),
    "torch_erf_out": (Lin(ErfOut()), 13),
    "torch_div_twice": (Lin(DivTwice()), 13),
}
for name, (m, opset) in cases.items():
    torch.onnx.export(m, torch.randn(2, 8), "%s/%s.onnx" % (D, name), opset_version=opset,
                      input_names=["x"], dynamic_axes={"x": {0: "n"}})
    print(name)
EOF

cat > "$TMPD/mk.py" <<'EOF'
"""hand-built graphs: NAME.onnx and NAME.npz (inputs) per case"""
import sys
import numpy as np
import onnx
from onnx import TensorProto as T, helper as h, numpy_helper as nh
D = sys.argv[1]
r = np.random.default_rng(5)
def save(name, nodes, feed, outs, inits, opsets=(("", 13),)):
    g = h.make_graph(nodes, name, [h.make_tensor_value_info(k, T.FLOAT, list(v.shape)) for k, v in feed.items()],
                     [h.make_tensor_value_info(o, T.FLOAT, None) for o in outs], inits)
    m = h.make_model(g, opset_imports=[h.make_opsetid(d, v) for d, v in opsets])
    m.ir_version = 8
    onnx.save(m, "%s/%s.onnx" % (D, name))
    np.savez("%s/%s.npz" % (D, name), **feed)
    print(name)
def sc(name, v, shape=()):
    return nh.from_array(np.full(shape, v, np.float32), name)
special = np.array([0, -0.0, np.inf, -np.inf, np.nan, 1e-40, -1e-40, 3e38, -3e38, 0.5, -0.5, 0.49999997,
                    5.9, -5.9, 10, -10, 88, -88, 1e-3], np.float32)
x = np.concatenate([special, (r.standard_normal(1000) * 4).astype(np.float32)]).reshape(1, -1)
# constants on the left, of rank 1, (x * h) * e; 1019 elements: a tail of 11
save("left_rank1", [h.make_node("Div", ["x", "c"], ["u"]), h.make_node("Erf", ["u"], ["e"]),
                    h.make_node("Add", ["one", "e"], ["a"]), h.make_node("Mul", ["half", "x"], ["m"]),
                    h.make_node("Mul", ["a", "m"], ["y"])],
     {"x": x}, ["y"], [sc("c", 1.4142135, [1]), sc("one", 1, [1]), sc("half", 0.5, [1])])
# a rank-3 constant makes the output rank 3
save("rank3_const", [h.make_node("Div", ["x", "c"], ["u"]), h.make_node("Erf", ["u"], ["e"]),
                     h.make_node("Add", ["e", "one"], ["a"]), h.make_node("Mul", ["x", "a"], ["m"]),
                     h.make_node("Mul", ["m", "half"], ["y"])],
     {"x": x}, ["y"], [sc("c", 1.4142135), sc("one", 1), sc("half", 0.5, [1, 1, 1])])
# other constants than torch's: the fused pass takes them as they are
save("odd_consts", [h.make_node("Mul", ["x", "c"], ["u"]), h.make_node("Erf", ["u"], ["e"]),
                    h.make_node("Add", ["e", "one"], ["a"]), h.make_node("Mul", ["a", "x"], ["m"]),
                    h.make_node("Mul", ["m", "half"], ["y"])],
     {"x": x[:, :37]}, ["y"], [sc("c", 0.3), sc("one", 2.5), sc("half", -1.5)])
xg = (r.standard_normal((3, 517)) * 4).astype(np.float32)
for mode in ("none", "tanh"):
    save("op_gelu_" + mode, [h.make_node("Gelu", ["x"], ["y"], approximate=mode)], {"x": xg}, ["y"], [],
         opsets=(("", 20),))
save("ms_gelu", [h.make_node("Gelu", ["x"], ["y"], domain="com.microsoft")], {"x": xg}, ["y"], [],
     opsets=(("", 13), ("com.microsoft", 1)))
EOF

cat > "$TMPD/cmp.py" <<'EOF'
import sys
import numpy as np
from kernels import ort_mismatch
model, feed, fused, plain, two = sys.argv[1:6]
a, b, t = np.load(fused), np.load(plain), np.load(two)
# NaN: which operand's NaN (sign, payload) an operation passes on is up to
# the instructions the compiler picked, fused or not: NaN is all we compare
def bits(v):
    v = v.copy()
    v[np.isnan(v)] = np.nan
    return v.tobytes()
for k in b:
    if a[k].shape != b[k].shape or bits(a[k]) != bits(b[k]):
        print("FAIL: output %s differs between the fused and the unfused run" % k); sys.exit()
    if bits(a[k]) != bits(t[k]):
        print("FAIL: output %s differs between 1 and 2 threads" % k); sys.exit()
bad = ort_mismatch(model, feed, a, 1e-4)
print("FAIL: " + bad if bad else "ok")
EOF

# run case $1 (fused, unfused, 2 threads) and compare; prints the fused
# run's peak live activations (MiB) into $TMPD/$1.peak
run_case() {
	c=$1
	if ! "$Q" run "$TMPD/$c.onnx" -i "$TMPD/$c.npz" -o "$TMPD/$c.fused.npz" -t 1 --bench 1 > "$TMPD/$c.bench" 2> "$TMPD/err" ||
		! "$Q" run "$TMPD/$c.onnx" -i "$TMPD/$c.npz" -o "$TMPD/$c.plain.npz" -t 1 --trace > "$TMPD/$c.trace" 2> "$TMPD/err" ||
		! "$Q" run "$TMPD/$c.onnx" -i "$TMPD/$c.npz" -o "$TMPD/$c.t2.npz" -t 2 > /dev/null 2> "$TMPD/err"; then
		fail "$c: runs" "$(head -c 300 "$TMPD/err")"
		return 1
	fi
	sed -n 's/^memory: .*peak live activations \([0-9.]*\) MiB.*/\1/p' "$TMPD/$c.bench" > "$TMPD/$c.peak"
	res=$(PYTHONPATH="$ROOT/tests/lib" "$PY" "$TMPD/cmp.py" "$TMPD/$c.onnx" "$TMPD/$c.npz" "$TMPD/$c.fused.npz" "$TMPD/$c.plain.npz" \
		"$TMPD/$c.t2.npz" 2>&1 | tail -1)
	if [ "$res" = ok ]; then
		pass "$c: fused and unfused the same bytes, 1 and 2 threads too, matches onnxruntime"
	else
		fail "$c" "$res"
		return 1
	fi
}

# peak_is CASE WANT WHAT: the fused run's peak live activations are WANT
# MiB (or above it: WANT given as >N)
peak_is() {
	got=$(cat "$TMPD/$1.peak" 2>/dev/null)
	if [ "$got" = "$2" ] || { [ "${2#>}" != "$2" ] && [ -n "$got" ] &&
			awk -v g="$got" -v w="${2#>}" 'BEGIN { exit !(g > w) }'; }; then
		pass "$1: $3 (peak live activations $got MiB)"
	else
		fail "$1: $3" "peak live activations ${got:-?} MiB, expected $2"
	fi
}

if "$TORCHPY" -c 'import torch' 2>/dev/null; then
	if tcases=$("$TORCHPY" "$TMPD/torchmk.py" "$TMPD" 2> "$TMPD/torch.err"); then
		"$PY" -c "
import numpy as np, sys
x = (np.random.default_rng(9).standard_normal((16384, 8)) * 3).astype(np.float32)
for c in sys.argv[1:]:
    np.savez('$TMPD/%s.npz' % c, x=x)" $tcases
		for c in $tcases; do
			run_case "$c"
		done
		# the Linear's output and the Gelu's, 1 MiB each: nothing else
		for c in torch_gelu13 torch_gelu17 torch_hf torch_mul; do
			peak_is "$c" 2.00 "fused: no intermediate allocated"
		done
		peak_is torch_erf_out '>2.00' "not fused: the Erf's output is a graph output"
		peak_is torch_div_twice '>2.00' "not fused: the Div's output has another reader"
		if grep -q '^tap: /[A-Za-z_/]*Erf_output_0 float' "$TMPD/torch_gelu13.trace"; then
			pass "torch_gelu13: a tap sees the Erf's output (no fusion while taps watch)"
		else
			fail "torch_gelu13: a tap sees the Erf's output (no fusion while taps watch)"
		fi
	else
		fail "torch models exported" "$(tail -1 "$TMPD/torch.err")"
	fi
else
	skip "torch-exported Gelu models" "$TORCHPY lacks torch (Debian's python3-torch)"
fi

cases=$("$PY" "$TMPD/mk.py" "$TMPD") || { fail "Gelu test models written"; exit 0; }
for c in $cases; do
	run_case "$c"
done
