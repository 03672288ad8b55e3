#!/bin/sh
# quantize = weight-only (src/quant/weightonly.c) on a small decoder built
# by tests/models/mkdecoder.py (embedding Gather, RMSNorm as ops, causal
# multi-head attention, SwiGLU, a Gemm, a down projection whose K = 176
# does not divide by the block, lm_head), through whole builds:
#   - com.microsoft MatMulNBits (4-bit RTN block 32, asymmetric and
#     symmetric; HQQ; 8-bit) runs in onnxruntime, our interpreter
#     (src/ops/matmulnbits.c) agrees with it, and the logits stay close to
#     the float model's over 8 inputs of 16 tokens: relative L2 error
#     below 0.25 and next-token top-1 agreement of at least 55% for int4
#     RTN (random weights: every layer's error adds up), below 0.03 and
#     80% for int8; HQQ no further from float than RTN;
#   - quantize.format = qdq (opset 21: int4/uint4 weights, DequantizeLinear
#     with block_size) runs in onnxruntime and gives the logits of the
#     MatMulNBits model (the same codes);
#   - lm_head gets 8 bits and the embedding 8-bit GatherBlockQuantized
#     blocks (4 bits asked: packed; qdq format: int8 rows through
#     DequantizeLinear) by default, with the reason in quant.json; the
#     MatMuls of two activations are skipped with theirs; a tied lm_head (MatMul by Transpose(embedding)) reads
#     the table as MatMulNBits's B and the float table goes; a k_proj whose
#     keys are an output after the logits (a KV cache) is no lm_head;
#   - verify (our interpreter on MatMulNBits and GatherBlockQuantized)
#     passes a cosine gate on the weight-only model;
#   - a model with external data keeps it, with the same tensors as the
#     inline model's; -j1 and -j3 builds give the same bytes, and HQQ on
#     3 threads those of 1;
#   - the MatMulNBits kernel on hand-made nodes (float, packed 2/8-bit and
#     absent zero points, bias, 3-D input) matches numpy and onnxruntime;
#   - bad input: a block size (file:line, exit 2), an already quantized
#     model, HQQ with symmetric, node-bits on an activation product, qdq
#     below opset 21, a model with no constant weight, a NaN weight, a
#     weight-only key in another mode: one line, exit 1, nothing in
#     build/.
. "$(dirname "$0")/lib/common.sh"
mktmp
Q=$QUANTMAKE
if ! "$PY" -c 'import onnx, onnxruntime, numpy' 2>/dev/null; then
	fail "weight-only quantization" "$PY lacks onnx/onnxruntime (run scripts/venv.sh)"
	exit 0
fi
X=$TMPD/x
mkdir -p "$X/rules" "$X/m/ext" "$X/ids"
MK="$ROOT/tests/models/mkdecoder.py"
"$PY" "$MK" "$X/m/dec.onnx" &&
	"$PY" "$MK" "$X/m/dec21.onnx" --opset 21 &&
	"$PY" "$MK" "$X/m/tied.onnx" --tied --present --seed 2 &&
	"$PY" "$MK" "$X/m/ext/dec.onnx" --external &&
	"$PY" - "$X" <<'EOF' || { fail "weight-only test models" "generator failed"; exit 0; }
import sys, numpy as np, onnx
from onnx import helper as h, TensorProto as T
X = sys.argv[1]
for i in range(8):
    np.save("%s/ids/s%d.npy" % (X, i), np.random.default_rng(100 + i).integers(0, 256, (1, 16)).astype(np.int64))
# MatMuls of activations only: nothing weight-only can take
g = h.make_graph([h.make_node("MatMul", ["a", "b"], ["c"], name="act_mm")], "noweights",
                 [h.make_tensor_value_info("a", T.FLOAT, [4, 8]), h.make_tensor_value_info("b", T.FLOAT, [8, 4])],
                 [h.make_tensor_value_info("c", T.FLOAT, [4, 4])])
onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 17)]), X + "/m/noweights.onnx")
# a weight holding NaN
w = np.ones((8, 4), np.float32)
w[3, 2] = np.nan
g = h.make_graph([h.make_node("MatMul", ["a", "w"], ["c"], name="mm")], "nan",
                 [h.make_tensor_value_info("a", T.FLOAT, [4, 8])], [h.make_tensor_value_info("c", T.FLOAT, [4, 4])],
                 [onnx.numpy_helper.from_array(w, "w")])
onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 17)]), X + "/m/nan.onnx")
EOF
cat > "$X/rules/m.rules" <<'EOF'
[model rtn]
source = m/dec.onnx
quantize = weight-only

[model hqq : rtn]
quantize.algorithm = hqq

[model sym : rtn]
quantize.symmetric = true

[model b8 : rtn]
quantize.bits = 8

[model n21]
source = m/dec21.onnx
quantize = weight-only
quantize.embedding-bits = float

[model q21 : n21]
quantize.format = qdq

[model q21e : q21]
quantize.embedding-bits = 8

[model e4 : rtn]
quantize.embedding-bits = 4

[model ver : rtn]
verify.data = ids
verify.min-cosine = 0.95

[model tied]
source = m/tied.onnx
quantize = weight-only

[model ext]
source = m/ext/dec.onnx
quantize = weight-only
EOF
cp -r "$X" "$TMPD/y"
if ! "$Q" -C "$X" -j3 > "$TMPD/xlog" 2>&1; then
	fail "weight-only builds" "$(grep -v '^\[' "$TMPD/xlog" | tail -3)"
	exit 0
fi
pass "weight-only builds"

# our interpreter's logits for every model and input
B=$X/build
for m in rtn hqq sym b8 n21 q21 q21e e4 tied ext; do
	for i in 0 1 2 3 4 5 6 7; do
		"$Q" run "$B/$m/$m.onnx" -i "input_ids=$X/ids/s$i.npy" -o "$TMPD/$m-$i.npz" -q > "$TMPD/run.log" 2>&1 ||
			{ fail "interpreter runs $m" "$(tail -2 "$TMPD/run.log")"; break; }
	done
done

"$PY" - "$X" "$TMPD" <<'EOF'
import sys, json, numpy as np, onnx, onnxruntime as ort
X, TMP = sys.argv[1], sys.argv[2]
B = X + "/build"
ids = [np.load("%s/ids/s%d.npy" % (X, i)) for i in range(8)]
def res(name, ok, why=""):
    print(("PASS: %s" % name) if ok else ("FAIL: %s: %s" % (name, why)))
def ortrun(path, opt=False):
    # without graph optimizations: onnxruntime's default session fuses a
    # blockwise DequantizeLinear + MatMul into MatMulNBits with
    # accuracy_level 4 (activations rounded to int8 in the kernel)
    so = ort.SessionOptions()
    so.log_severity_level = 3
    if not opt:
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    s = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    return np.stack([s.run(["logits"], {"input_ids": x})[0] for x in ids])
def mine(m):
    try:
        return np.stack([np.load("%s/%s-%d.npz" % (TMP, m, i))["logits"] for i in range(8)])
    except Exception as e:
        return None
def err(y, f):
    return float(np.linalg.norm(y - f) / np.linalg.norm(f)), float((y.argmax(-1) == f.argmax(-1)).mean())
def qj(m):
    return json.load(open("%s/%s/quant.json" % (B, m)))
def node(m, name):
    return next((n for n in qj(m)["nodes"] if n["name"] == name), {})
flt = ortrun(X + "/m/dec.onnx")
E = {}
for m in ["rtn", "hqq", "sym", "b8", "n21", "q21", "q21e", "e4", "tied", "ext"]:
    p = "%s/%s/%s.onnx" % (B, m, m)
    try:
        y = ortrun(p)
    except Exception as e:
        res("%s runs in onnxruntime" % m, False, str(e)[:200])
        continue
    z = mine(m)
    d = None if z is None else float(np.abs(z - y).max() / np.abs(y).max())
    res("%s: onnxruntime runs it and our interpreter agrees (max diff %s of max |logit|)" % (m, d),
        d is not None and d < 1e-5, "differs by %s" % d)
    E[m] = (y, err(y, ortrun(X + "/m/tied.onnx") if m == "tied" else flt))
    print("  %s: logits relative error %.4f, top-1 agreement %.3f" % (m, E[m][1][0], E[m][1][1]))
mq = onnx.load(B + "/rtn/rtn.onnx")
ops = [n.op_type for n in mq.graph.node]
inits = {i.name: i for i in mq.graph.initializer}
mnb = [n for n in mq.graph.node if n.op_type == "MatMulNBits"]
down = next((n for n in mnb if n.input[1].startswith("layers.0.down.weight")), None)
attr = {a.name: a.i for a in down.attribute} if down else {}
res("rtn: every MatMul and the Gemm with a constant weight is MatMulNBits, domain com.microsoft",
    len(mnb) == 15 and all(n.domain == "com.microsoft" for n in mnb) and "Gemm" not in ops,
    "%d MatMulNBits, ops %s" % (len(mnb), sorted(set(ops))))
res("rtn: K = 176 padded to 6 blocks of 32 (B uint8 [64, 6, 16], 4-bit, zero points packed [64 * 3])",
    down is not None and attr.get("K") == 176 and attr.get("N") == 64 and attr.get("bits") == 4 and
    attr.get("block_size") == 32 and list(inits[down.input[1]].dims) == [64, 6, 16] and
    list(inits[down.input[3]].dims) == [192] and list(inits[down.input[2]].dims) == [384],
    "attrs %s" % attr)
lm = node("rtn", "lm_head")
res("rtn: lm_head at 8 bits with the reason in quant.json",
    lm.get("status") == "quantized" and "8 bits" in lm.get("reason", "") and "lm-head-bits" in lm.get("reason", ""),
    str(lm))
emb = node("rtn", "embed")
gq = next((n for n in mq.graph.node if n.op_type == "GatherBlockQuantized"), None)
ga = {a.name: a.i for a in gq.attribute} if gq else {}
res("rtn: the embedding is GatherBlockQuantized (uint8 [256, 64], 8 bits, block 32), reason in quant.json",
    emb.get("status") == "quantized" and "embedding-bits" in emb.get("reason", "") and "embed.weight" not in inits and
    gq is not None and gq.domain == "com.microsoft" and list(inits[gq.input[0]].dims) == [256, 64] and
    list(inits[gq.input[2]].dims) == [256, 2] and ga.get("bits") == 8 and ga.get("block_size") == 32 and
    ga.get("gather_axis") == 0 and ga.get("quantize_axis") == 1, str(emb))
m4 = onnx.load(B + "/e4/e4.onnx")
i4 = {i.name: i for i in m4.graph.initializer}
g4 = next((n for n in m4.graph.node if n.op_type == "GatherBlockQuantized"), None)
res("e4: a 4-bit embedding: uint8 [256, 32] packed, zero points [256, 1]",
    g4 is not None and list(i4[g4.input[0]].dims) == [256, 32] and list(i4[g4.input[3]].dims) == [256, 1] and
    "e4" in E and E["e4"][1][0] < 0.3, str(g4)[:200])
me = onnx.load(B + "/q21e/q21e.onnx")
ie = {i.name: i for i in me.graph.initializer}
res("q21e: qdq format: the embedding reads int8 rows (DequantizeLinear axis 0) before its Gather",
    node("q21e", "embed").get("status") == "quantized" and ie.get("embed.weight_quantized") is not None and
    ie["embed.weight_quantized"].data_type == onnx.TensorProto.INT8 and "embed.weight" not in ie)
qk = node("rtn", "layers.0.qk")
res("rtn: a MatMul of two activations is skipped with the reason",
    qk.get("status") == "skipped" and "not a constant" in qk.get("reason", ""), str(qk))
if "rtn" in E:
    r, t = E["rtn"][1]
    res("rtn: int4 block 32 logits within 0.25 relative error of float, top-1 agreement >= 0.55 (%.4f, %.3f)" % (r, t),
        r < 0.25 and t >= 0.55)
if "b8" in E:
    r, t = E["b8"][1]
    res("b8: int8 logits within 0.03 relative error, top-1 agreement >= 0.8 (%.4f, %.3f)" % (r, t), r < 0.03 and t >= 0.8)
if "hqq" in E and "rtn" in E:
    hb = sum(v.get("hqq_blocks", 0) for v in qj("hqq")["tensors"].values())
    res("hqq: no further from float than rtn (%.4f <= %.4f), HQQ kept in %d blocks" % (E["hqq"][1][0], E["rtn"][1][0], hb),
        E["hqq"][1][0] <= E["rtn"][1][0] and hb > 0)
if "sym" in E:
    ms = onnx.load(B + "/sym/sym.onnx")
    sn = [n for n in ms.graph.node if n.op_type == "MatMulNBits"]
    res("sym: MatMulNBits without zero points (2^(bits-1) implied), logits within 0.35 (%.4f)" % E["sym"][1][0],
        sn and all(len(n.input) == 3 for n in sn) and E["sym"][1][0] < 0.35)
if "q21" in E and "n21" in E:
    m21 = onnx.load(B + "/q21/q21.onnx")
    dq = [n for n in m21.graph.node if n.op_type == "DequantizeLinear" and any(a.name == "block_size" for a in n.attribute)]
    i21 = {i.name: i.data_type for i in m21.graph.initializer}
    d = float(np.abs(E["q21"][0] - E["n21"][0]).max() / np.abs(E["n21"][0]).max())
    d8 = float(np.abs(ortrun(B + "/q21/q21.onnx", True) - E["n21"][0]).max() / np.abs(E["n21"][0]).max())
    res("q21: onnxruntime's optimized session (int8 activations in its fused kernel) within 5%% (%.3f)" % d8, d8 < 0.05)
    res("q21: qdq format: uint4 weights and zero points (lm_head uint8), DequantizeLinear-21 with block_size, the logits of MatMulNBits (diff %.2g)" % d,
        len(dq) == 15 and sum(i21[n.input[0]] == onnx.TensorProto.UINT4 for n in dq) == 14 and
        i21["lm_head.weight_quantized"] == onnx.TensorProto.UINT8 and d < 1e-5,
        "%d blockwise DequantizeLinear" % len(dq))
if "tied" in E:
    mt = onnx.load(B + "/tied/tied.onnx")
    ti = {i.name for i in mt.graph.initializer}
    lmn = next((n for n in mt.graph.node if n.name.startswith("lm_head")), None)
    res("tied: lm_head reads the embedding table as MatMulNBits's B; the float table and its Transpose go (%.4f)" % E["tied"][1][0],
        lmn is not None and lmn.op_type == "MatMulNBits" and "embed.weight" not in ti and
        not any(n.name == "embed_t" for n in mt.graph.node) and E["tied"][1][0] < 0.25, str(lmn)[:200])
kp = node("tied", "layers.1.k_proj")
res("tied: k_proj, whose keys are an output after the logits (a KV cache), is no lm_head: 4 bits",
    kp.get("status") == "quantized" and "4 bits" in kp.get("reason", "") and "lm_head" not in kp.get("reason", ""), str(kp))
mx = onnx.load(B + "/ext/ext.onnx", load_external_data=False)
nx = sum(1 for i in mx.graph.initializer if i.data_location == onnx.TensorProto.EXTERNAL)
a = {i.name: onnx.numpy_helper.to_array(i) for i in onnx.load(B + "/rtn/rtn.onnx").graph.initializer}
b = {i.name: onnx.numpy_helper.to_array(i) for i in onnx.load(B + "/ext/ext.onnx").graph.initializer}
same = a.keys() == b.keys() and all(a[k].dtype == b[k].dtype and a[k].shape == b[k].shape and a[k].tobytes() == b[k].tobytes() for k in a)
res("ext: external data kept (%d tensors in ext.onnx.data), the same tensors as the inline model's" % nx,
    nx >= 15 and same, "same %s" % same)
vj = json.load(open(B + "/ver/verify.json"))
res("ver: verify runs the weight-only model beside float (cosine %.4f >= 0.95)" % vj["outputs"][0]["cosine"],
    vj["passed"] and vj["samples"] == 8 and vj["outputs"][0]["cosine"] >= 0.95)
sz = qj("rtn")
res("rtn: size %d -> %d bytes (under 30%%)" % (sz["size_before"], sz["size_after"]),
    sz["size_after"] < 0.3 * sz["size_before"])
EOF

# the same bytes with -j1
if "$Q" -C "$TMPD/y" -j1 > "$TMPD/ylog" 2>&1; then
	d=
	for f in rtn/rtn.onnx hqq/hqq.onnx q21/q21.onnx ext/ext.onnx ext/ext.onnx.data; do
		cmp -s "$X/build/$f" "$TMPD/y/build/$f" || d="$d $f"
	done
	if [ -z "$d" ]; then pass "-j1 and -j3 builds give the same bytes"; else fail "-j1 and -j3 builds give the same bytes" "differ:$d"; fi
	# one model alone with -j3: its quantize stage splits rows among 3 threads
	cp "$TMPD/y/build/hqq/hqq.onnx" "$TMPD/hqq-j1.onnx"
	if "$Q" -C "$TMPD/y" -B -j3 hqq > "$TMPD/ylog" 2>&1 && cmp -s "$TMPD/y/build/hqq/hqq.onnx" "$TMPD/hqq-j1.onnx"; then
		pass "hqq on 3 threads gives the bytes of 1"
	else
		fail "hqq on 3 threads gives the bytes of 1" "$(tail -2 "$TMPD/ylog")"
	fi
else
	fail "-j1 build" "$(tail -2 "$TMPD/ylog")"
fi

# the MatMulNBits kernel on what weight-only does not write: float zero
# points, packed 2-bit and 8-bit zero points, none, a bias, a 3-D A,
# K = 40 in blocks of 16; against numpy and onnxruntime
K=$TMPD/k
mkdir -p "$K"
"$PY" - "$K" <<'EOF'
import sys, numpy as np, onnx
from onnx import helper as h, TensorProto as T, numpy_helper as nh
D = sys.argv[1]
rng = np.random.default_rng(3)
K, N, bs = 40, 5, 16
nb = (K + bs - 1) // bs
a = rng.standard_normal((2, 3, K)).astype(np.float32)
np.save(D + "/a.npy", a)
for bits, zk in ((4, "float"), (8, "packed"), (2, "packed"), (4, "none")):
    codes = rng.integers(0, 1 << bits, (N, nb * bs)).astype(np.uint8)
    per = 8 // bits
    B = np.zeros((N, nb * bs // per), np.uint8)
    for j in range(per):
        B |= (codes[:, j::per] << (j * bits)).astype(np.uint8)
    sc = (rng.random((N, nb)) * 0.1 + 0.01).astype(np.float32)
    if zk == "float":
        z = (rng.random((N, nb)) * ((1 << bits) - 1)).astype(np.float32)
        zt = nh.from_array(z.reshape(-1), "z")
    elif zk == "packed":
        zc = rng.integers(0, 1 << bits, (N, nb)).astype(np.uint8)
        zrow = (nb * bits + 7) // 8
        zp = np.zeros((N, zrow), np.uint8)
        for b in range(nb):
            zp[:, b * bits // 8] |= (zc[:, b] << (b * bits % 8)).astype(np.uint8)
        z, zt = zc.astype(np.float32), nh.from_array(zp.reshape(-1), "z")
    else:
        z = np.full((N, nb), float(1 << (bits - 1)), np.float32)
    bias = rng.standard_normal(N).astype(np.float32)
    ins = ["a", "B", "s", "z" if zk != "none" else "", "", "bias"]
    node = h.make_node("MatMulNBits", ins, ["y"], domain="com.microsoft", K=K, N=N, bits=bits, block_size=bs)
    inits = [nh.from_array(B.reshape(N, nb, bs * bits // 8), "B"), nh.from_array(sc.reshape(-1), "s"),
             nh.from_array(bias, "bias")] + ([zt] if zk != "none" else [])
    g = h.make_graph([node], "k", [h.make_tensor_value_info("a", T.FLOAT, [2, 3, K])],
                     [h.make_tensor_value_info("y", T.FLOAT, [2, 3, N])], inits)
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17), h.make_opsetid("com.microsoft", 1)])
    name = "b%d_%s" % (bits, zk)
    onnx.save(m, "%s/%s.onnx" % (D, name))
    W = (codes[:, :K].astype(np.float32) - np.repeat(z, bs, 1)[:, :K]) * np.repeat(sc, bs, 1)[:, :K]
    np.save("%s/%s.ref.npy" % (D, name), a @ W.T + bias)
EOF
for k in b4_float b8_packed b2_packed b4_none; do
	t="MatMulNBits kernel: $k matches numpy and onnxruntime"
	if ! "$Q" run "$K/$k.onnx" -i "a=$K/a.npy" -o "$K/$k.npz" -q > "$TMPD/k.log" 2>&1; then
		fail "$t" "$(tail -1 "$TMPD/k.log")"
		continue
	fi
	"$PY" - "$K" "$k" "$t" <<'EOF'
import sys, numpy as np, onnxruntime as ort
D, k, t = sys.argv[1], sys.argv[2], sys.argv[3]
ref, y = np.load("%s/%s.ref.npy" % (D, k)), np.load("%s/%s.npz" % (D, k))["y"]
o = ort.InferenceSession("%s/%s.onnx" % (D, k), providers=["CPUExecutionProvider"]).run(None, {"a": np.load(D + "/a.npy")})[0]
d, do = float(np.abs(y - ref).max()), float(np.abs(o - ref).max())
print("PASS: %s" % t if d < 1e-4 and do < 1e-4 else "FAIL: %s: ours %g, onnxruntime %g off numpy" % (t, d, do))
EOF
done

# bad input: one line, the right exit, nothing in build/
P=$TMPD/p
mkdir -p "$P/rules" "$P/m"
cp "$X/m/dec.onnx" "$X/m/noweights.onnx" "$X/m/nan.onnx" "$P/m/"
cp "$X/build/rtn/rtn.onnx" "$P/m/q.onnx"
bad() { # NAME STATUS PATTERN RULES
	rm -rf "$P/build"
	printf '%s\n' "$4" > "$P/rules/m.rules"
	expect_err "$1" "$2" "$3" "$Q" -C "$P"
	if ls "$P"/build/*/*.onnx > /dev/null 2>&1; then fail "$1: nothing written" "$(ls "$P"/build/*/*.onnx)"; fi
}
bad "block size 48 refused at file:line" 2 "rules/m.rules:4: .*quantize.block-size = '48' is not valid: expected a power of two from 16 to 256" \
	"[model a]
source = m/dec.onnx
quantize = weight-only
quantize.block-size = 48"
bad "block size 512 refused" 2 "m.rules:4: .*block-size = '512' is not valid" \
	"[model a]
source = m/dec.onnx
quantize = weight-only
quantize.block-size = 512"
bad "a bad node-bits entry refused at file:line" 2 "m.rules:4: .*node-bits entry 'lm_head=3' is not valid: expected NODE=4, NODE=8 or NODE=float" \
	"[model a]
source = m/dec.onnx
quantize = weight-only
quantize.node-bits = lm_head=3"
bad "an already quantized model refused" 1 "the model is already quantized: node .* is a (DequantizeLinear|MatMulNBits|GatherBlockQuantized); quantize the float model instead" \
	"[model a]
source = m/q.onnx
quantize = weight-only"
bad "hqq with symmetric refused" 2 "m.rules:5: .*quantize.symmetric = true does not go with quantize.algorithm = hqq" \
	"[model a]
source = m/dec.onnx
quantize = weight-only
quantize.algorithm = hqq
quantize.symmetric = true"
bad "node-bits on a MatMul of two activations names the node" 1 "node 'layers.0.qk': quantize.node-bits sets 4 bits for it, but it cannot be quantized: its weight \(input 1\) is not a constant" \
	"[model a]
source = m/dec.onnx
quantize = weight-only
quantize.node-bits = layers.0.qk=4"
bad "qdq below opset 21 refused" 1 "quantize.format = qdq needs opset >= 21 .* imports opset 17: set preprocess.opset = 21, or use quantize.format = matmulnbits" \
	"[model a]
source = m/dec.onnx
quantize = weight-only
quantize.format = qdq"
bad "a model with no constant weight is an error, not a copy" 1 "nothing to quantize: the model has no MatMul, Gemm or embedding Gather with a 2-D float initializer weight" \
	"[model a]
source = m/noweights.onnx
quantize = weight-only"
bad "weight-only keys refused in another mode" 2 "m.rules:4: model 'a': quantize.bits is only used by quantize = weight-only" \
	"[model a]
source = m/dec.onnx
quantize = dynamic
quantize.bits = 4"
bad "a weight holding NaN is named" 1 "node 'mm': weight 'w' holds a non-finite value at row 2, column 3 \(as \[N, K\]\); fix the float model" \
	"[model a]
source = m/nan.onnx
quantize = weight-only"
