"""A small CNN over the 8x8 digits (input [batch, 64]) with fixed random weights,
for the quantize and verify tests: python mkcnn_digits.py OUT.onnx [OPSET]"""
import sys
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
r = np.random.default_rng(0)
f = lambda *s: (r.standard_normal(s) * 0.3).astype(np.float32)
inits = [numpy_helper.from_array(a, n) for n, a in [
    ("cw", f(6, 1, 3, 3)), ("cb", f(6)), ("gw", f(10, 96)), ("gb", f(10)),
    ("shape", np.array([-1, 1, 8, 8], np.int64))]]
nodes = [
    helper.make_node("Reshape", ["input", "shape"], ["img"], name="to_image"),
    helper.make_node("Conv", ["img", "cw", "cb"], ["c0"], name="conv", pads=[1, 1, 1, 1],
                     kernel_shape=[3, 3]),
    helper.make_node("Relu", ["c0"], ["c1"], name="relu"),
    helper.make_node("MaxPool", ["c1"], ["p0"], name="pool", kernel_shape=[2, 2], strides=[2, 2]),
    helper.make_node("Flatten", ["p0"], ["f0"], name="flatten"),
    helper.make_node("Gemm", ["f0", "gw", "gb"], ["logits"], name="fc", transB=1),
]
g = helper.make_graph(nodes, "cnn",
                      [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["batch", 64])],
                      [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 10])],
                      inits)
opset = int(sys.argv[2]) if len(sys.argv) > 2 else 13
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
m.ir_version = 10 if opset >= 21 else 7
onnx.checker.check_model(m)
onnx.save(m, sys.argv[1])
