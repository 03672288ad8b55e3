"""Models for tests/t_quant_patterns.sh, written to DIR: pat.onnx (an MLP
with a tanh Gelu as jax2tf writes it, a LayerNorm as torch writes it below
opset 17 and an erf Gelu as torch writes it below opset 20), silu.onnx
(x * sigmoid(x) between two MatMuls: no pattern), calibration samples
calib/NNN.npy and test.npz (rows of very different scales, so some rows
have a small spread inside the LayerNorm).

    python mkpatterns.py DIR
"""
import sys, numpy as np, onnx
from onnx import helper as h, TensorProto as TP, numpy_helper as nh
out = sys.argv[1]
r = np.random.default_rng(0)
def W(name, *shape, s=None):
    a = (r.standard_normal(shape) / np.sqrt(shape[0] if s is None else s)).astype(np.float32)
    return nh.from_array(a, name)
def C(name, v):
    return nh.from_array(np.array(v, np.float32), name)
inits = [W("W1", 32, 64), W("b1", 64, s=1), W("W2", 64, 16), W("b2", 16, s=1), W("W3", 16, 10),
         C("c044", 0.044715), C("c079", 0.7978846), C("one", 1.0), C("half", 0.5), C("two", 2.0),
         C("eps", 1e-5), C("sqrt2", 1.4142135), nh.from_array((1 + 0.1 * r.standard_normal(64)).astype(np.float32), "gamma"),
         nh.from_array((0.1 * r.standard_normal(64)).astype(np.float32), "beta")]
N = lambda op, i, o, name, **kw: h.make_node(op, i, o, name=name, **kw)
nodes = [
    N("MatMul", ["x", "W1"], ["m1"], "fc1"), N("Add", ["m1", "b1"], ["h"], "fc1_bias"),
    # Gelu, tanh approximation (jax2tf's order)
    N("Mul", ["h", "h"], ["g_sq"], "gelu1/square"), N("Mul", ["h", "g_sq"], ["g_cube"], "gelu1/cube"),
    N("Mul", ["g_cube", "c044"], ["g_c"], "gelu1/scale_cube"), N("Add", ["h", "g_c"], ["g_in"], "gelu1/add"),
    N("Mul", ["g_in", "c079"], ["g_s"], "gelu1/scale"), N("Tanh", ["g_s"], ["g_t"], "gelu1/tanh"),
    N("Add", ["g_t", "one"], ["g_1"], "gelu1/one_plus"), N("Mul", ["g_1", "half"], ["g_h"], "gelu1/half"),
    N("Mul", ["h", "g_h"], ["y"], "gelu1/mul"),
    # LayerNorm as torch writes it below opset 17
    N("ReduceMean", ["y"], ["mu"], "ln/mean", axes=[-1]), N("Sub", ["y", "mu"], ["dlt"], "ln/center"),
    N("Pow", ["dlt", "two"], ["sq"], "ln/square"), N("ReduceMean", ["sq"], ["var"], "ln/var", axes=[-1]),
    N("Add", ["var", "eps"], ["ve"], "ln/eps"), N("Sqrt", ["ve"], ["sd"], "ln/sqrt"),
    N("Div", ["dlt", "sd"], ["nrm"], "ln/div"), N("Mul", ["nrm", "gamma"], ["n2"], "ln/gamma"),
    N("Add", ["n2", "beta"], ["n3"], "ln/beta"),
    N("MatMul", ["n3", "W2"], ["m2"], "fc2"), N("Add", ["m2", "b2"], ["z"], "fc2_bias"),
    # Gelu with erf, as torch writes it below opset 20
    N("Div", ["z", "sqrt2"], ["e_in"], "gelu2/div"), N("Erf", ["e_in"], ["e"], "gelu2/erf"),
    N("Add", ["e", "one"], ["e1"], "gelu2/one_plus"), N("Mul", ["z", "e1"], ["e2"], "gelu2/mul"),
    N("Mul", ["e2", "half"], ["e3"], "gelu2/half"),
    N("MatMul", ["e3", "W3"], ["logits"], "fc3"),
]
g = h.make_graph(nodes, "patterns", [h.make_tensor_value_info("x", TP.FLOAT, ["batch", 32])],
                 [h.make_tensor_value_info("logits", TP.FLOAT, ["batch", 10])], inits)
m = h.make_model(g, opset_imports=[h.make_opsetid("", 13)])
m.ir_version = 8
onnx.checker.check_model(m)
onnx.save(m, out + "/pat.onnx")
def data(n, seed):
    q = np.random.default_rng(seed)
    # rows of very different scales: some have a small spread after fc1
    return (q.standard_normal((n, 32)) * 10 ** q.uniform(-1.5, 1, (n, 1))).astype(np.float32)
# SiLU: a Mul of two activations that is no Gelu and no normalization
nodes = [N("MatMul", ["x", "W1"], ["m1"], "fc1"), N("Sigmoid", ["m1"], ["s"], "silu/sigmoid"),
         N("Mul", ["m1", "s"], ["y"], "silu/mul"), N("MatMul", ["y", "W2"], ["logits"], "fc2")]
g = h.make_graph(nodes, "silu", [h.make_tensor_value_info("x", TP.FLOAT, ["batch", 32])],
                 [h.make_tensor_value_info("logits", TP.FLOAT, ["batch", 16])], inits[:4])
m = h.make_model(g, opset_imports=[h.make_opsetid("", 13)])
m.ir_version = 8
onnx.checker.check_model(m)
onnx.save(m, out + "/silu.onnx")
import os
os.makedirs(out + "/calib", exist_ok=True)
x = data(200, 1)
for i in range(200):
    np.save(out + "/calib/%03d.npy" % i, x[i:i + 1])
np.savez(out + "/test.npz", x=data(500, 2))
