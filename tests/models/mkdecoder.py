"""A small decoder-only transformer written with onnx.helper, for weight-only
quantization tests and benchmarks (tests/t_weightonly.sh, bench/weightonly.py).

Token ids [1, T] -> embedding Gather -> layers of (RMSNorm written as
Mul/ReduceMean/Add/Sqrt/Div/Mul, multi-head causal attention with a
constant mask, SwiGLU MLP, residual Adds) -> RMSNorm -> lm_head -> logits
[1, T, V]. The attention output projection of layer 0 is a Gemm (transB,
bias) on [T, H]; with --present each layer's keys, as they leave k_proj
through a Reshape and a Transpose, are outputs too (after the logits, as a
KV cache is); the MLP's down projection has K = ffn, which need not
divide by the quantization block. lm_head is its own weight [H, V], or with
--tied a MatMul by Transpose(embedding). Random weights scaled by
1/sqrt(fan_in), from --seed.

usage: mkdecoder.py OUT.onnx [--vocab V] [--hidden H] [--heads NH]
       [--ffn F] [--layers L] [--seq T] [--opset N] [--tied] [--present]
       [--external] [--seed S]
"""
import argparse

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh


def build(a):
    rng = np.random.default_rng(a.seed)
    V, H, NH, F, L, S = a.vocab, a.hidden, a.heads, a.ffn, a.layers, a.seq
    hd = H // NH
    inits, nodes, present = [], [], []

    def init(name, arr):
        arr = np.ascontiguousarray(arr)
        if a.data is not None and arr.nbytes >= 1024:
            # straight to the data file: a multi-GB model never sits in a
            # protobuf message
            t = onnx.TensorProto()
            t.name = name
            t.dims.extend(arr.shape)
            t.data_type = onnx.helper.np_dtype_to_tensor_dtype(arr.dtype)
            t.data_location = onnx.TensorProto.EXTERNAL
            off = a.data.tell()
            a.data.write(arr.tobytes())
            for k, v in (("location", a.location), ("offset", str(off)), ("length", str(arr.nbytes))):
                e = t.external_data.add()
                e.key, e.value = k, v
            inits.append(t)
        else:
            inits.append(nh.from_array(arr, name))
        return name

    def w(name, k, n):
        return init(name, (rng.standard_normal((k, n)) / np.sqrt(k)).astype(np.float32))

    def node(op, ins, outs, name, **kw):
        nodes.append(h.make_node(op, ins, outs, name=name, **kw))
        return outs[0]

    def rmsnorm(x, p):
        g = init(p + ".g", (1.0 + 0.1 * rng.standard_normal(H)).astype(np.float32))
        sq = node("Mul", [x, x], [p + ".sq"], p + ".sq")
        if a.opset >= 18:
            ax = init(p + ".axes", np.array([-1], np.int64))
            ms = node("ReduceMean", [sq, ax], [p + ".ms"], p + ".mean", keepdims=1)
        else:
            ms = node("ReduceMean", [sq], [p + ".ms"], p + ".mean", axes=[-1], keepdims=1)
        eps = init(p + ".eps", np.array(1e-6, np.float32))
        ad = node("Add", [ms, eps], [p + ".ad"], p + ".add")
        rt = node("Sqrt", [ad], [p + ".rt"], p + ".sqrt")
        dv = node("Div", [x, rt], [p + ".dv"], p + ".div")
        return node("Mul", [dv, g], [p + ".out"], p + ".scale")

    emb = init("embed.weight", (rng.standard_normal((V, H)) * 0.5).astype(np.float32))
    x = node("Gather", [emb, "input_ids"], ["embed.out"], "embed", axis=0)
    mask = np.triu(np.full((S, S), -1e4, np.float32), 1)
    init("causal_mask", mask)
    init("shape_heads", np.array([1, S, NH, hd], np.int64))
    init("shape_model", np.array([1, S, H], np.int64))
    init("shape_rows", np.array([S, H], np.int64))
    init("attn_scale", np.array(1.0 / np.sqrt(hd), np.float32))
    for li in range(L):
        p = "layers.%d" % li
        xn = rmsnorm(x, p + ".norm1")
        q = node("MatMul", [xn, w(p + ".q.weight", H, H)], [p + ".q"], p + ".q_proj")
        k = node("MatMul", [xn, w(p + ".k.weight", H, H)], [p + ".k"], p + ".k_proj")
        v = node("MatMul", [xn, w(p + ".v.weight", H, H)], [p + ".v"], p + ".v_proj")
        qh = node("Reshape", [q, "shape_heads"], [p + ".qh"], p + ".q_heads")
        kh = node("Reshape", [k, "shape_heads"], [p + ".kh"], p + ".k_heads")
        vh = node("Reshape", [v, "shape_heads"], [p + ".vh"], p + ".v_heads")
        qt = node("Transpose", [qh], [p + ".qt"], p + ".q_t", perm=[0, 2, 1, 3])
        kt = node("Transpose", [kh], [p + ".kt"], p + ".k_t", perm=[0, 2, 3, 1])
        vt = node("Transpose", [vh], [p + ".vt"], p + ".v_t", perm=[0, 2, 1, 3])
        if a.present:
            present.append(node("Transpose", [kh], ["present.%d.key" % li], p + ".present_k", perm=[0, 2, 1, 3]))
        sc = node("MatMul", [qt, kt], [p + ".scores"], p + ".qk")
        ss = node("Mul", [sc, "attn_scale"], [p + ".ss"], p + ".scale_scores")
        sm = node("Add", [ss, "causal_mask"], [p + ".masked"], p + ".mask")
        pr = node("Softmax", [sm], [p + ".probs"], p + ".softmax", axis=-1)
        ctx = node("MatMul", [pr, vt], [p + ".ctx"], p + ".pv")
        ct = node("Transpose", [ctx], [p + ".ctx_t"], p + ".ctx_t", perm=[0, 2, 1, 3])
        if li == 0:
            rows = node("Reshape", [ct, "shape_rows"], [p + ".rows"], p + ".to_rows")
            wo = init(p + ".o.weight", (rng.standard_normal((H, H)) / np.sqrt(H)).astype(np.float32))
            bo = init(p + ".o.bias", (0.1 * rng.standard_normal(H)).astype(np.float32))
            og = node("Gemm", [rows, wo, bo], [p + ".og"], p + ".o_proj", transB=1)
            o = node("Reshape", [og, "shape_model"], [p + ".o"], p + ".from_rows")
        else:
            cm = node("Reshape", [ct, "shape_model"], [p + ".cm"], p + ".merge")
            o = node("MatMul", [cm, w(p + ".o.weight", H, H)], [p + ".o"], p + ".o_proj")
        x = node("Add", [x, o], [p + ".res1"], p + ".residual1")
        xn = rmsnorm(x, p + ".norm2")
        g = node("MatMul", [xn, w(p + ".gate.weight", H, F)], [p + ".gate"], p + ".gate_proj")
        u = node("MatMul", [xn, w(p + ".up.weight", H, F)], [p + ".up"], p + ".up_proj")
        sg = node("Sigmoid", [g], [p + ".sig"], p + ".sigmoid")
        si = node("Mul", [g, sg], [p + ".silu"], p + ".silu")
        gu = node("Mul", [si, u], [p + ".gu"], p + ".swiglu")
        dn = node("MatMul", [gu, w(p + ".down.weight", F, H)], [p + ".down"], p + ".down_proj")
        x = node("Add", [x, dn], [p + ".res2"], p + ".residual2")
    xn = rmsnorm(x, "norm")
    if a.tied:
        et = node("Transpose", [emb], ["embed.t"], "embed_t", perm=[1, 0])
        node("MatMul", [xn, et], ["logits"], "lm_head")
    else:
        node("MatMul", [xn, w("lm_head.weight", H, V)], ["logits"], "lm_head")
    g = h.make_graph(nodes, "decoder", [h.make_tensor_value_info("input_ids", T.INT64, [1, S])],
                     [h.make_tensor_value_info("logits", T.FLOAT, [1, S, V])] +
                     [h.make_tensor_value_info(n, T.FLOAT, [1, NH, S, hd]) for n in present], inits)
    m = h.make_model(g, opset_imports=[h.make_opsetid("", a.opset)], producer_name="mkdecoder")
    m.ir_version = 10 if a.opset >= 21 else 8
    return m


def main():
    p = argparse.ArgumentParser()
    p.add_argument("out")
    p.add_argument("--vocab", type=int, default=256)
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--heads", type=int, default=2)
    p.add_argument("--ffn", type=int, default=176)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--seq", type=int, default=16)
    p.add_argument("--opset", type=int, default=17)
    p.add_argument("--tied", action="store_true")
    p.add_argument("--present", action="store_true")
    p.add_argument("--external", action="store_true")
    p.add_argument("--seed", type=int, default=1)
    a = p.parse_args()
    a.data = None
    if a.external:
        a.location = a.out.rsplit("/", 1)[-1] + ".data"
        a.data = open(a.out + ".data", "wb")
    m = build(a)
    if a.data:
        a.data.close()
    onnx.save(m, a.out)
    onnx.checker.check_model(a.out)


if __name__ == "__main__":
    main()
