"""Export the example MLP to ONNX: python export.py WEIGHTS.npz OUT.onnx

Stands in for a project's torch.onnx.export step: deterministic, so the same
weights always give the same bytes (and the build cache can share them).
"""
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

w = np.load(sys.argv[1])
inits = [numpy_helper.from_array(w[k], k) for k in ("w1", "b1", "w2", "b2")]
nodes = [
    helper.make_node("MatMul", ["input", "w1"], ["h0"], name="fc1"),
    helper.make_node("Add", ["h0", "b1"], ["h1"], name="fc1_bias"),
    helper.make_node("Relu", ["h1"], ["h2"], name="relu1"),
    helper.make_node("MatMul", ["h2", "w2"], ["z0"], name="fc2"),
    helper.make_node("Add", ["z0", "b2"], ["logits"], name="fc2_bias"),
]
graph = helper.make_graph(
    nodes, "digits_mlp",
    [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["batch", 64])],
    [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 10])],
    inits)
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)],
                          producer_name="quantmake-example")
model.ir_version = 8
onnx.checker.check_model(model)
onnx.save(model, sys.argv[2])
