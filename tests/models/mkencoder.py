"""A BERT-style sentence encoder written as torch.onnx.export writes Hugging
Face's BertModel (eval mode), with realistic random weights, and its data.

    mkencoder.py OUTDIR [--opset 14|17|20] [--gelu erf|tanh] [--mask finfo|10000]
                 [--ln auto|op|decomposed|noeps] [--layers N] [--width W] [--calib N] [--test N]

Writes OUTDIR/enc.onnx, OUTDIR/calib/NNN.npz (one sentence each:
input_ids and attention_mask, [1, 64] int64) and OUTDIR/test.npz (rows of
other sentences, stacked). Torch is not needed: the graph is made node by
node as the exporter writes it, which is what a quantizer meets:

  - the extended attention mask (1 - mask[:, None, None, :]) * finfo.min
    (Unsqueeze, Unsqueeze, Cast, Sub, Mul; --mask 10000: older exports'
    -10000.0), added to the scaled attention scores before Softmax;
  - at opset 14, every LayerNorm decomposed as ReduceMean, Sub, Pow,
    ReduceMean, Add(eps), Sqrt, Div, Mul(gamma), Add(beta); at opset 17 the
    LayerNormalization operator (--ln decomposed: the decomposition at any
    opset, as a hand-written LayerNorm exports; --ln noeps: without its
    epsilon, a pattern recognised only in part);
  - GELU as torch writes it below opset 20: Div(sqrt 2), Erf, Add(1), Mul,
    Mul(0.5); --gelu tanh: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)));
  - nn.Linear on [B, S, K] as MatMul(x, W^T) + Add(bias).

Weights: N(0, 1/sqrt(fan_in)) projections, embeddings N(0, 1), and the
activation outliers trained BERTs have: a few hidden channels whose
LayerNorm gamma and beta are large, so the residual stream and the
LayerNorm outputs carry a few channels tens of times the others.

Tokens: byte-level ids (byte + 3; 0 pad, 1 CLS, 2 SEP) of sentences from
the licences Debian ships in /usr/share/common-licenses, of varied length,
padded to 64 (so the mask matters)."""
import argparse
import glob
import os
import re

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

SEQ = 64


def sentences():
    out = []
    for path in sorted(glob.glob("/usr/share/common-licenses/*")):
        if os.path.isdir(path) or os.path.islink(path):
            continue
        text = open(path, "rb").read().decode("latin-1")
        for s in re.split(r"(?<=[.;:])\s+", re.sub(r"\s+", " ", text)):
            s = s.strip()
            if 20 <= len(s):
                out.append(s.encode("latin-1")[: SEQ - 2])
    return out


def tokens(sents):
    ids = np.zeros((len(sents), SEQ), np.int64)
    mask = np.zeros((len(sents), SEQ), np.int64)
    for i, s in enumerate(sents):
        t = [1] + [b + 3 for b in s] + [2]
        ids[i, : len(t)] = t
        mask[i, : len(t)] = 1
    return ids, mask


class G:
    def __init__(self, rng):
        self.nodes, self.inits, self.rng, self.n = [], [], rng, 0

    def const(self, name, arr):
        self.inits.append(numpy_helper.from_array(np.asarray(arr), name))
        return name

    def op(self, op, ins, name, **attrs):
        self.nodes.append(helper.make_node(op, ins, [name], name=name, **attrs))
        return name

    def linear(self, x, k, n, name, std=None):
        w = self.rng.normal(0, std or 1 / np.sqrt(k), (k, n)).astype(np.float32)
        b = self.rng.normal(0, 0.02, n).astype(np.float32)
        y = self.op("MatMul", [x, self.const(name + ".weight", w)], name + "/MatMul")
        return self.op("Add", [self.const(name + ".bias", b), y], name + "/Add")

    def layernorm(self, x, w, name, opset, outliers, form="auto"):
        gamma = (1 + self.rng.normal(0, 0.1, w)).astype(np.float32)
        beta = self.rng.normal(0, 0.05, w).astype(np.float32)
        for ch, m in outliers:
            gamma[ch] *= m
            beta[ch] = m / 4
        g = self.const(name + ".weight", gamma)
        b = self.const(name + ".bias", beta)
        if form == "op" or (form == "auto" and opset >= 17):
            return self.op("LayerNormalization", [x, g, b], name + "/LayerNormalization", axis=-1, epsilon=1e-12)
        def mean(t, nm):
            if opset >= 18:  # axes became an input
                return self.op("ReduceMean", [t, self.const(nm + "_axes", np.array([-1], np.int64))], nm, keepdims=1)
            return self.op("ReduceMean", [t], nm, axes=[-1], keepdims=1)
        mu = mean(x, name + "/ReduceMean")
        d = self.op("Sub", [x, mu], name + "/Sub")
        sq = self.op("Pow", [d, self.const(name + "/Constant", np.array(2, np.float32))], name + "/Pow")
        var = mean(sq, name + "/ReduceMean_1")
        if form == "noeps":  # recognised in part: no epsilon
            sd = self.op("Sqrt", [var], name + "/Sqrt")
        else:
            ve = self.op("Add", [var, self.const(name + "/Constant_1", np.array(1e-12, np.float32))], name + "/Add")
            sd = self.op("Sqrt", [ve], name + "/Sqrt")
        nrm = self.op("Div", [d, sd], name + "/Div")
        y = self.op("Mul", [nrm, g], name + "/Mul")
        return self.op("Add", [y, b], name + "/Add_1")

    def gelu(self, x, name, form):
        c = lambda n, v: self.const(name + "/" + n, np.array(v, np.float32))
        if form == "erf":
            d = self.op("Div", [x, c("Constant", 1.4142135381698608)], name + "/Div")
            e = self.op("Erf", [d], name + "/Erf")
            a = self.op("Add", [e, c("Constant_1", 1.0)], name + "/Add")
            m = self.op("Mul", [x, a], name + "/Mul")
            return self.op("Mul", [m, c("Constant_2", 0.5)], name + "/Mul_1")
        p = self.op("Pow", [x, c("Constant", 3.0)], name + "/Pow")
        m = self.op("Mul", [p, c("Constant_1", 0.044715)], name + "/Mul")
        a = self.op("Add", [x, m], name + "/Add")
        s = self.op("Mul", [a, c("Constant_2", 0.7978845608028654)], name + "/Mul_1")
        t = self.op("Tanh", [s], name + "/Tanh")
        a1 = self.op("Add", [t, c("Constant_3", 1.0)], name + "/Add_1")
        h = self.op("Mul", [x, c("Constant_4", 0.5)], name + "/Mul_2")
        return self.op("Mul", [h, a1], name + "/Mul_3")


def build(opset, gelu, mask_value, layers, width, ln="auto", seed=0):
    rng = np.random.default_rng(seed)
    heads, ff = width // 64, 4 * width
    g = G(rng)
    outliers = [(int(c), 12.0) for c in rng.choice(width, 3, replace=False)]
    we = g.const("embeddings.word_embeddings.weight", rng.normal(0, 1, (259, width)).astype(np.float32))
    pe = g.const("embeddings.position_embeddings.weight", rng.normal(0, 0.5, (SEQ, width)).astype(np.float32))
    te = g.const("embeddings.token_type_embeddings.weight", rng.normal(0, 0.5, (1, width)).astype(np.float32))
    e = g.op("Gather", [we, "input_ids"], "embeddings/word_embeddings/Gather")
    e = g.op("Add", [e, te], "embeddings/Add")
    e = g.op("Add", [e, pe], "embeddings/Add_1")
    h = g.layernorm(e, width, "embeddings/LayerNorm", opset, outliers, ln)
    # extended attention mask, as BertModel.get_extended_attention_mask
    m = g.op("Unsqueeze", ["attention_mask", g.const("/Constant_axes1", np.array([1], np.int64))], "/Unsqueeze")
    m = g.op("Unsqueeze", [m, g.const("/Constant_axes2", np.array([2], np.int64))], "/Unsqueeze_1")
    m = g.op("Cast", [m], "/Cast", to=TensorProto.FLOAT)
    m = g.op("Sub", [g.const("/Constant", np.array(1.0, np.float32)), m], "/Sub")
    mask = g.op("Mul", [m, g.const("/Constant_1", np.array(mask_value, np.float32))], "/Mul")
    sh_heads = g.const("/Constant_shape_heads", np.array([0, 0, heads, 64], np.int64))
    sh_back = g.const("/Constant_shape_back", np.array([0, 0, width], np.int64))
    for i in range(layers):
        p = "encoder/layer.%d" % i
        a = p + "/attention/self"
        # query and key scaled so that the scores span about +-20, as in trained BERTs
        q = g.linear(h, width, width, a + "/query", std=0.6 / np.sqrt(width))
        k = g.linear(h, width, width, a + "/key", std=0.6 / np.sqrt(width))
        v = g.linear(h, width, width, a + "/value")
        q = g.op("Transpose", [g.op("Reshape", [q, sh_heads], a + "/Reshape")], a + "/Transpose", perm=[0, 2, 1, 3])
        k = g.op("Transpose", [g.op("Reshape", [k, sh_heads], a + "/Reshape_1")], a + "/Transpose_1",
                 perm=[0, 2, 3, 1])
        v = g.op("Transpose", [g.op("Reshape", [v, sh_heads], a + "/Reshape_2")], a + "/Transpose_2",
                 perm=[0, 2, 1, 3])
        s = g.op("MatMul", [q, k], a + "/MatMul")
        s = g.op("Div", [s, g.const(a + "/Constant", np.array(8.0, np.float32))], a + "/Div")
        s = g.op("Add", [s, mask], a + "/Add")
        pr = g.op("Softmax", [s], a + "/Softmax", axis=-1)
        c = g.op("MatMul", [pr, v], a + "/MatMul_1")
        c = g.op("Transpose", [c], a + "/Transpose_3", perm=[0, 2, 1, 3])
        c = g.op("Reshape", [c, sh_back], a + "/Reshape_3")
        o = g.linear(c, width, width, p + "/attention/output/dense")
        o = g.op("Add", [o, h], p + "/attention/output/Add")
        h = g.layernorm(o, width, p + "/attention/output/LayerNorm", opset, outliers, ln)
        f = g.linear(h, width, ff, p + "/intermediate/dense")
        f = g.gelu(f, p + "/intermediate/intermediate_act_fn", gelu)
        f = g.linear(f, ff, width, p + "/output/dense")
        f = g.op("Add", [f, h], p + "/output/Add")
        h = g.layernorm(f, width, p + "/output/LayerNorm", opset, outliers, ln)
    g.nodes.append(helper.make_node("Identity", [h], ["last_hidden_state"], name="output"))
    graph = helper.make_graph(
        g.nodes, "bert",
        [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "seq"]),
         helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", "seq"])],
        [helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT, ["batch", "seq", width])],
        g.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)],
                              producer_name="pytorch", producer_version="1.13.1")
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--opset", type=int, default=14)
    ap.add_argument("--gelu", default="erf", choices=("erf", "tanh"))
    ap.add_argument("--mask", default="finfo", choices=("finfo", "10000"))
    ap.add_argument("--ln", default="auto", choices=("auto", "op", "decomposed", "noeps"),
                    help="auto: LayerNormalization from opset 17, else decomposed; noeps: decomposed without epsilon")
    ap.add_argument("--layers", type=int, default=3)
    ap.add_argument("--width", type=int, default=192)
    ap.add_argument("--calib", type=int, default=64)
    ap.add_argument("--test", type=int, default=96)
    a = ap.parse_args()
    mv = float(np.finfo(np.float32).min) if a.mask == "finfo" else -10000.0
    os.makedirs(a.out + "/calib", exist_ok=True)
    onnx.save(build(a.opset, a.gelu, mv, a.layers, a.width, a.ln), a.out + "/enc.onnx")
    sents = sentences()
    order = np.random.default_rng(1).permutation(len(sents))
    if len(order) < a.calib + a.test:
        raise SystemExit("only %d sentences in /usr/share/common-licenses" % len(order))
    ids, mask = tokens([sents[i] for i in order[: a.calib + a.test]])
    for i in range(a.calib):
        np.savez("%s/calib/%03d.npz" % (a.out, i), input_ids=ids[i: i + 1], attention_mask=mask[i: i + 1])
    np.savez(a.out + "/test.npz", input_ids=ids[a.calib:], attention_mask=mask[a.calib:])


if __name__ == "__main__":
    main()
