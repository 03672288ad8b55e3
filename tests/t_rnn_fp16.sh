#!/bin/sh
# RNN, GRU and LSTM on float16 and double: the interpreter computes them in
# float32 (constant weights converted once per plan, other inputs on every
# call) and must match onnxruntime on the same cell in float32 with the
# same (rounded) values. Covers both directions, initial states,
# sequence_lens, peepholes, GRU's linear_before_reset, layout 1 (against
# our float32 kernel: onnxruntime lacks it), weights fed
# as inputs instead of initializers, repeated runs of one plan, and a
# mixed-type node refused with one clear line.
. "$(dirname "$0")/lib/common.sh"
mktmp
Q=$QUANTMAKE
if ! "$PY" -c 'import onnx, onnxruntime, numpy' 2>/dev/null; then
	fail "rnn float16 tests" "$PY lacks onnx/onnxruntime (run scripts/venv.sh)"
	exit 0
fi

cat > "$TMPD/mk.py" <<'EOF'
"""Write CASE.onnx (float16 or double), CASE.ref.onnx (float32) and
CASE.npz (inputs) for every case; print the case names."""
import sys
import numpy as np
import onnx
from onnx import TensorProto as T, helper as h, numpy_helper as nh
D = sys.argv[1]
r = np.random.default_rng(3)
G = {"RNN": 1, "GRU": 3, "LSTM": 4}
def case(name, op, dt=np.float16, direction="forward", layout=0, states=False, lens=False, peep=False,
         lbr=None, weights_as_inputs=False, seq=5, batch=3, isz=4, hid=6):
    nd = 2 if direction == "bidirectional" else 1
    g = G[op]
    arr = {"W": r.standard_normal((nd, g * hid, isz)) * 0.4, "R": r.standard_normal((nd, g * hid, hid)) * 0.4,
           "B": r.standard_normal((nd, 2 * g * hid)) * 0.2}
    x = r.standard_normal((batch, seq, isz) if layout else (seq, batch, isz))
    st = (batch, nd, hid) if layout else (nd, batch, hid)
    if states:
        arr["initial_h"] = r.standard_normal(st) * 0.5
        if op == "LSTM":
            arr["initial_c"] = r.standard_normal(st) * 0.5
    if peep:
        arr["P"] = r.standard_normal((nd, 3 * hid)) * 0.3
    names = ["X", "W", "R", "B", "sequence_lens", "initial_h", "initial_c", "P"][:8 if op == "LSTM" else 6]
    sl = np.array([seq, seq - 2, 1][:batch], np.int32) if lens else None
    attrs = {"hidden_size": hid, "direction": direction}
    if layout:
        attrs["layout"] = 1
    if lbr is not None:
        attrs["linear_before_reset"] = lbr
    outs = ["Y", "Y_h", "Y_c"][:3 if op == "LSTM" else 2]
    for ref in (False, True):
        t = np.float32 if ref else dt
        et = {np.float16: T.FLOAT16, np.float32: T.FLOAT, np.float64: T.DOUBLE}[t]
        # both models see the values of the narrower type
        v = {k: a.astype(dt).astype(t) for k, a in arr.items()}
        xv = x.astype(dt).astype(t)
        ins = [h.make_tensor_value_info("X", et, list(xv.shape))]
        feed = {"X": xv}
        inits = []
        for k, a in v.items():
            if weights_as_inputs or k.startswith("initial"):
                ins.append(h.make_tensor_value_info(k, et, list(a.shape)))
                feed[k] = a
            else:
                inits.append(nh.from_array(a, k))
        if sl is not None:
            inits.append(nh.from_array(sl, "sequence_lens"))
        node = h.make_node(op, [n if n in v or n == "X" or (n == "sequence_lens" and lens) else "" for n in names],
                           outs, name=name + "_cell", **attrs)
        gr = h.make_graph([node], name, ins, [h.make_tensor_value_info(o, et, None) for o in outs], inits)
        m = h.make_model(gr, opset_imports=[h.make_opsetid("", 14)])
        m.ir_version = 8
        onnx.save(m, "%s/%s%s.onnx" % (D, name, ".ref" if ref else ""))
        np.savez("%s/%s%s.npz" % (D, name, ".ref" if ref else ""), **feed)
    print(name)
case("lstm", "LSTM")
case("lstm_bidir_states_peep", "LSTM", direction="bidirectional", states=True, peep=True, lens=True)
case("lstm_layout1", "LSTM", layout=1, states=True)
case("lstm_inputs", "LSTM", weights_as_inputs=True, states=True)
case("lstm_double", "LSTM", dt=np.float64, direction="reverse", states=True)
case("gru", "GRU", states=True, lens=True)
case("gru_lbr_bidir", "GRU", lbr=1, direction="bidirectional")
case("rnn_reverse", "RNN", direction="reverse", states=True)
case("rnn_inputs", "RNN", weights_as_inputs=True, dt=np.float64)
EOF
cases=$("$PY" "$TMPD/mk.py" "$TMPD") || { fail "rnn float16 models written"; exit 0; }

cat > "$TMPD/cmp.py" <<'EOF'
import sys
import numpy as np
import onnx
import onnxruntime as ort
ref_model, feed, mine = sys.argv[1:4]
names = [o.name for o in onnx.load(ref_model).graph.output]
if len(sys.argv) > 4:  # reference outputs given (onnxruntime lacks layout 1)
    ref = np.load(sys.argv[4])
    got = [ref[n] for n in names]
else:
    s = ort.InferenceSession(ref_model, providers=["CPUExecutionProvider"])
    got = s.run(None, dict(np.load(feed)))
out = np.load(mine)
worst = 200.0
for n, g in zip(names, got):
    m = out[n].astype(np.float64)
    g = g.astype(np.float64)
    e = ((m - g) ** 2).sum()
    worst = min(worst, 200.0 if e == 0 else 10 * np.log10(max((g ** 2).sum(), 1e-30) / e))
print("%.1f" % worst)
EOF
for c in $cases; do
	"$PY" -c "import numpy as np; d = dict(np.load('$TMPD/$c.ref.npz')); \
		import onnx; m = onnx.load('$TMPD/$c.onnx'); \
		t = {10: np.float16, 11: np.float64}[m.graph.input[0].type.tensor_type.elem_type]; \
		np.savez('$TMPD/$c.in.npz', **{k: v.astype(t) for k, v in d.items()})"
	if ! "$Q" run "$TMPD/$c.onnx" -i "$TMPD/$c.in.npz" -o "$TMPD/$c.out.npz" > "$TMPD/err" 2>&1; then
		fail "$c: our interpreter runs it" "$(head -c 300 "$TMPD/err")"
		continue
	fi
	ref=""
	case $c in *layout1*) # onnxruntime has no layout 1: our float32 path (ONNX's node tests check it)
		"$Q" run "$TMPD/$c.ref.onnx" -i "$TMPD/$c.ref.npz" -o "$TMPD/$c.ref.out.npz" > /dev/null 2>&1 &&
			ref=$TMPD/$c.ref.out.npz ;;
	esac
	db=$("$PY" "$TMPD/cmp.py" "$TMPD/$c.ref.onnx" "$TMPD/$c.ref.npz" "$TMPD/$c.out.npz" $ref 2>&1 | tail -1)
	# float16 outputs keep 11 significant bits (about 60 dB); double ones
	# are computed in float32 (well above 100 dB)
	want=50
	case $c in *double* | rnn_inputs) want=100 ;; esac
	if awk -v d="$db" -v w=$want 'BEGIN { exit !(d > w) }'; then
		pass "$c: matches the float32 cell ($db dB)"
	else
		fail "$c: matches the float32 cell" "SQNR $db dB, expected > $want"
	fi
done

# one plan, many runs: the converted weights are kept and stay right
if "$Q" run "$TMPD/lstm_bidir_states_peep.onnx" -i "$TMPD/lstm_bidir_states_peep.in.npz" --bench 3 -q \
	> "$TMPD/err" 2>&1; then
	pass "repeated runs of one float16 LSTM plan"
else
	fail "repeated runs of one float16 LSTM plan" "$(head -c 300 "$TMPD/err")"
fi

# W float32 with X float16: one clear line naming the node and input
"$PY" - "$TMPD" <<'EOF'
import sys
import numpy as np
import onnx
from onnx import TensorProto as T, helper as h, numpy_helper as nh
D = sys.argv[1]
w = nh.from_array(np.zeros((1, 8, 3), np.float32), "W")
rr = nh.from_array(np.zeros((1, 8, 2), np.float16), "R")
n = h.make_node("LSTM", ["X", "W", "R"], ["Y"], name="mixed", hidden_size=2)
g = h.make_graph([n], "mixed", [h.make_tensor_value_info("X", T.FLOAT16, [1, 1, 3])],
                 [h.make_tensor_value_info("Y", T.FLOAT16, None)], [w, rr])
onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 14)]), D + "/mixed.onnx")
np.savez(D + "/mixed.npz", X=np.zeros((1, 1, 3), np.float16))
EOF
expect_err "LSTM with float32 W and float16 X refused" 1 "node 'mixed'.*W is float, expected float16" \
	"$Q" run "$TMPD/mixed.onnx" -i "$TMPD/mixed.npz" -o "$TMPD/mixed.out.npz"
[ -e "$TMPD/mixed.out.npz" ] && fail "mixed types: no output written" "$TMPD/mixed.out.npz exists" ||
	pass "mixed types: no output written"
