#!/usr/bin/env python3
"""Models for the interpreter's cross-check (tests/t_run.sh) and benchmark
(bench/interp.sh), built with onnx.helper and seeded random weights so every
run makes the same bytes:

  cnn.onnx          a small ResNet-style CNN: Conv/BatchNormalization/Relu,
                    residual Add, MaxPool, strided and grouped Conv,
                    GlobalAveragePool, Flatten, Gemm, Softmax; input [N,3,32,32]
  transformer.onnx  a 2-layer pre-norm transformer encoder: Gather embedding,
                    LayerNormalization, MatMul Q/K/V, Reshape/Transpose heads,
                    scaled Softmax attention, Erf-GELU MLP; input ids [N,32]
  tiny.onnx         one MatMul, for the baseline memory of a run

usage: interp-models.py OUTDIR
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto as TP
from onnx import helper as h
from onnx import numpy_helper as nh

rs = np.random.RandomState(1234)
inits, nodes = [], []


def w(name, shape, scale=None):
    if scale is None:
        fan = int(np.prod(shape[1:])) if len(shape) > 1 else shape[0]
        scale = 1.0 / np.sqrt(max(fan, 1))
    inits.append(nh.from_array((rs.randn(*shape) * scale).astype(np.float32), name))
    return name


def c(name, arr):
    inits.append(nh.from_array(np.asarray(arr), name))
    return name


def n(op, ins, outs=None, **kw):
    outs = outs or ["%s_%d" % (op.lower(), len(nodes))]
    nodes.append(h.make_node(op, ins, outs, name="%s_%d" % (op, len(nodes)), **kw))
    return outs[0]


def conv_bn_relu(x, cin, cout, k, stride=1, group=1, relu=True, tag=""):
    y = n("Conv", [x, w("w" + tag, [cout, cin // group, k, k]), w("b" + tag, [cout], 0.1)],
          kernel_shape=[k, k], strides=[stride, stride], pads=[k // 2] * 4, group=group)
    y = n("BatchNormalization", [y, c("s" + tag, (1 + 0.1 * rs.randn(cout)).astype(np.float32)),
                                 c("o" + tag, (0.1 * rs.randn(cout)).astype(np.float32)),
                                 c("m" + tag, (0.1 * rs.randn(cout)).astype(np.float32)),
                                 c("v" + tag, (1 + 0.1 * rs.rand(cout)).astype(np.float32))])
    return n("Relu", [y]) if relu else y


def save(name, inputs, outputs, outdir):
    g = h.make_graph(nodes, name, inputs, outputs, inits)
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)], producer_name="quantmake-bench")
    m.ir_version = 8
    onnx.checker.check_model(m)
    onnx.save(m, os.path.join(outdir, name + ".onnx"))
    nodes.clear()
    inits.clear()


def cnn(outdir):
    x = conv_bn_relu("x", 3, 32, 3, tag="0")
    for i, (cin, cout, s) in enumerate([(32, 32, 1), (32, 64, 2), (64, 64, 1), (64, 128, 2)]):
        y = conv_bn_relu(x, cin, cout, 3, s, tag="%da" % i)
        y = conv_bn_relu(y, cout, cout, 3, 1, group=4 if i == 2 else 1, relu=False, tag="%db" % i)
        if cin != cout or s != 1:
            x = conv_bn_relu(x, cin, cout, 1, s, relu=False, tag="%ds" % i)
        x = n("Relu", [n("Add", [x, y])])
        if i == 1:
            x = n("MaxPool", [x], kernel_shape=[3, 3], strides=[1, 1], pads=[1, 1, 1, 1])
    x = n("Flatten", [n("GlobalAveragePool", [x])], axis=1)
    x = n("Gemm", [x, w("fc_w", [10, 128]), w("fc_b", [10], 0.1)], transB=1)
    n("Softmax", [x], ["probs"], axis=-1)
    save("cnn", [h.make_tensor_value_info("x", TP.FLOAT, ["N", 3, 32, 32])],
         [h.make_tensor_value_info("probs", TP.FLOAT, ["N", 10])], outdir)


def transformer(outdir, vocab=1000, d=128, heads=4, seq=32, layers=2):
    dh = d // heads
    x = n("Gather", [w("emb", [vocab, d], 0.5), "ids"], axis=0)
    x = n("Add", [x, w("pos", [seq, d], 0.1)])
    shp = c("heads_shape", np.array([0, seq, heads, dh], np.int64))
    back = c("back_shape", np.array([0, seq, d], np.int64))
    scale = c("scale", np.array(1 / np.sqrt(dh), np.float32))
    for l in range(layers):
        t = "%d" % l
        y = n("LayerNormalization", [x, c("ln1g" + t, np.ones(d, np.float32)), c("ln1b" + t, np.zeros(d, np.float32))],
              axis=-1, epsilon=1e-5)
        q, k, v = [n("Transpose", [n("Reshape", [n("Add", [n("MatMul", [y, w(p + t, [d, d])]), w(p + "b" + t, [d], 0.1)]), shp])],
                     perm=[0, 2, 1, 3]) for p in "qkv"]
        a = n("Mul", [n("MatMul", [q, n("Transpose", [k], perm=[0, 1, 3, 2])]), scale])
        a = n("MatMul", [n("Softmax", [a], axis=-1), v])
        a = n("Reshape", [n("Transpose", [a], perm=[0, 2, 1, 3]), back])
        x = n("Add", [x, n("MatMul", [a, w("o" + t, [d, d])])])
        y = n("LayerNormalization", [x, c("ln2g" + t, np.ones(d, np.float32)), c("ln2b" + t, np.zeros(d, np.float32))],
              axis=-1, epsilon=1e-5)
        y = n("Add", [n("MatMul", [y, w("f1" + t, [d, 4 * d])]), w("f1b" + t, [4 * d], 0.1)])
        g = n("Mul", [n("Mul", [y, c("half" + t, np.array(0.5, np.float32))]),
                      n("Add", [n("Erf", [n("Div", [y, c("sqrt2" + t, np.array(np.sqrt(2), np.float32))])]),
                                c("one" + t, np.array(1, np.float32))])])
        x = n("Add", [x, n("MatMul", [g, w("f2" + t, [4 * d, d])])])
    n("ReduceMean", [x], ["pooled"], axes=[1], keepdims=0)
    save("transformer", [h.make_tensor_value_info("ids", TP.INT64, ["N", seq])],
         [h.make_tensor_value_info("pooled", TP.FLOAT, ["N", d])], outdir)


def tiny(outdir):
    """one MatMul: the baseline memory of a process that loaded OpenBLAS"""
    n("MatMul", ["x", w("tw", [4, 4])], ["y"])
    save("tiny", [h.make_tensor_value_info("x", TP.FLOAT, ["N", 4])],
         [h.make_tensor_value_info("y", TP.FLOAT, ["N", 4])], outdir)


if __name__ == "__main__":
    out = sys.argv[1] if len(sys.argv) > 1 else "."
    os.makedirs(out, exist_ok=True)
    cnn(out)
    transformer(out)
    tiny(out)
