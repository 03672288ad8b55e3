#!/usr/bin/env python3
"""Small hand-built ONNX models for tests/t_infer_pass.sh: bad input (cycles,
dangling names, opsets), modes (merge, strict), symbols, constant
propagation, subgraphs and exotic element types. Written into DIR at test
time (nothing here is committed but this script).

usage: make_cases.py DIR
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper


def model(nodes, inputs, outputs, inits=(), value_info=(), opset=17, extra_opsets=(), ir=8):
    g = h.make_graph(nodes, "g", inputs, outputs, initializer=list(inits), value_info=list(value_info))
    ops = [h.make_opsetid("", opset)] + [h.make_opsetid(d, v) for d, v in extra_opsets]
    m = h.make_model(g, opset_imports=ops)
    m.ir_version = ir
    return m


def vi(name, elem, shape):
    return h.make_tensor_value_info(name, elem, shape)


def out(name):
    """an output without type (to be inferred)"""
    v = onnx.ValueInfoProto()
    v.name = name
    return v


def main():
    d = sys.argv[1]
    os.makedirs(d, exist_ok=True)
    cases = {}
    x = vi("x", T.FLOAT, [2, 3])

    cases["cycle"] = model([h.make_node("Relu", ["b"], ["a"], name="r1"),
                            h.make_node("Relu", ["a"], ["b"], name="r2"),
                            h.make_node("Add", ["x", "a"], ["y"], name="add")],
                           [x], [out("y")])
    cases["dangling"] = model([h.make_node("Add", ["x", "nope"], ["y"], name="add1")], [x], [out("y")])
    cases["opset24"] = model([h.make_node("Relu", ["x"], ["y"], name="r")], [x], [out("y")], opset=24)
    cases["no_domain"] = model([h.make_node("Foo", ["x"], ["y"], name="foo", domain="com.example")],
                               [x], [out("y")])
    cases["custom_op"] = model([h.make_node("Relu", ["x"], ["t"], name="r"),
                                h.make_node("Foo", ["t"], ["u"], name="foo1", domain="com.example"),
                                h.make_node("Foo", ["u"], ["y"], name="foo2", domain="com.example")],
                               [x], [out("y")], extra_opsets=[("com.example", 1)])
    cases["contradiction"] = model([h.make_node("Relu", ["x"], ["t"], name="relu1"),
                                    h.make_node("Neg", ["t"], ["y"], name="neg1")],
                                   [x], [out("y")], value_info=[vi("t", T.FLOAT, [2, 4])])
    cases["redefine"] = model([h.make_node("Relu", ["x"], ["a"], name="r"),
                               h.make_node("Neg", ["a"], ["x"], name="neg")], [x], [out("a")])
    cases["attr_type"] = model([h.make_node("Transpose", ["x"], ["y"], name="tr", perm=1.5)], [x], [out("y")])
    cases["broadcast"] = model([h.make_node("Add", ["x", "z"], ["y"], name="add2")],
                               [x, vi("z", T.FLOAT, [4])], [out("y")])
    cases["twice"] = model([h.make_node("Relu", ["x"], ["t"], name="a"),
                            h.make_node("Neg", ["x"], ["t"], name="b")], [x], [out("t")])
    # chain with symbols, unknown dims and a declared annotation to keep
    xs = h.make_tensor_value_info("x", T.FLOAT, ["N", None, 4])
    cases["symbols"] = model([h.make_node("Relu", ["x"], ["a"], name="relu"),
                              h.make_node("Transpose", ["a"], ["b"], name="tr", perm=[2, 0, 1]),
                              h.make_node("Neg", ["b"], ["y"], name="neg")],
                             [xs], [out("y")], value_info=[vi("a", T.FLOAT, ["N", 5, 4])])
    # the PyTorch export pattern: Shape -> Gather -> Unsqueeze -> Concat -> Reshape
    xi = vi("x", T.FLOAT, [2, 3, 4])
    cases["shape_chain"] = model(
        [h.make_node("Shape", ["x"], ["s"], name="shape"),
         h.make_node("Gather", ["s", "i0"], ["d0"], name="gather", axis=0),
         h.make_node("Unsqueeze", ["d0", "ax0"], ["d0u"], name="unsq"),
         h.make_node("Concat", ["d0u", "m1"], ["newshape"], name="concat", axis=0),
         h.make_node("Reshape", ["x", "newshape"], ["y"], name="reshape")],
        [xi], [out("y")],
        inits=[numpy_helper.from_array(np.array(0, dtype=np.int64), "i0"),
               numpy_helper.from_array(np.array([0], dtype=np.int64), "ax0"),
               numpy_helper.from_array(np.array([-1], dtype=np.int64), "m1")])
    # the same with a symbolic batch: the symbol must survive the chain
    xb = h.make_tensor_value_info("x", T.FLOAT, ["batch", 3, 4])
    cases["shape_chain_sym"] = model(
        [h.make_node("Shape", ["x"], ["s"], name="shape"),
         h.make_node("Gather", ["s", "i0"], ["d0"], name="gather", axis=0),
         h.make_node("Unsqueeze", ["d0", "ax0"], ["d0u"], name="unsq"),
         h.make_node("Concat", ["d0u", "m1"], ["newshape"], name="concat", axis=0),
         h.make_node("Reshape", ["x", "newshape"], ["y"], name="reshape")],
        [xb], [out("y")],
        inits=[numpy_helper.from_array(np.array(0, dtype=np.int64), "i0"),
               numpy_helper.from_array(np.array([0], dtype=np.int64), "ax0"),
               numpy_helper.from_array(np.array([-1], dtype=np.int64), "m1")])
    # an initializer that is also a graph input: its value still feeds
    # constant propagation (as in onnx's reference inference)
    cases["init_input"] = model([h.make_node("Reshape", ["x", "s"], ["y"], name="reshape")],
                                [x, vi("s", T.INT64, [2])], [out("y")],
                                inits=[numpy_helper.from_array(np.array([3, 2], dtype=np.int64), "s")])
    # If with branches reading an outer tensor
    then_g = h.make_graph([h.make_node("Relu", ["t"], ["tb"], name="then_relu")], "then", [],
                          [out("tb")])
    else_g = h.make_graph([h.make_node("Neg", ["t"], ["eb"], name="else_neg")], "else", [],
                          [out("eb")])
    c = vi("c", T.BOOL, [])
    cases["if_outer"] = model([h.make_node("Relu", ["x"], ["t"], name="pre"),
                               h.make_node("If", ["c"], ["y"], name="if1",
                                           then_branch=then_g, else_branch=else_g)],
                              [x, c], [out("y")])
    # Loop body with a loop-carried value and a scan output
    body = h.make_graph([h.make_node("Identity", ["cond_in"], ["cond_out"], name="bid"),
                         h.make_node("Add", ["v_in", "x"], ["v_out"], name="badd"),
                         h.make_node("Relu", ["v_out"], ["scan_out"], name="brelu")],
                        "body", [vi("iter", T.INT64, []), vi("cond_in", T.BOOL, []),
                                 h.make_tensor_value_info("v_in", T.FLOAT, None)],
                        [out("cond_out"), out("v_out"), out("scan_out")])
    cases["loop"] = model([h.make_node("Loop", ["n", "", "x"], ["v", "scans"], name="loop1", body=body)],
                          [x], [out("v"), out("scans")],
                          inits=[numpy_helper.from_array(np.array(3, dtype=np.int64), "n")])
    # exotic element types pass through
    for name, et in [("float8", T.FLOAT8E4M3FN), ("int4", T.INT4), ("bfloat16", T.BFLOAT16)]:
        cases["type_" + name] = model([h.make_node("Identity", ["x"], ["y"], name="id")],
                                      [vi("x", et, [3, 2])], [out("y")], opset=21, ir=10)
    # a sequence through SequenceConstruct / SequenceAt
    cases["sequence"] = model([h.make_node("SequenceConstruct", ["x", "x"], ["s"], name="sc"),
                               h.make_node("SequenceAt", ["s", "i"], ["y"], name="sa")],
                              [x], [out("y")],
                              inits=[numpy_helper.from_array(np.array(1, dtype=np.int64), "i")])
    # a model-local function: attribute references, an input left out,
    # its own opset import
    perm = onnx.AttributeProto()
    perm.name = "perm"
    perm.ref_attr_name = "order"
    perm.type = onnx.AttributeProto.INTS
    fbody = [h.make_node("MatMul", ["X", "W"], ["T"]),
             h.make_node("Clip", ["T", "lo"], ["U"]),
             h.make_node("Transpose", ["U"], ["V"])]
    fbody[2].attribute.append(perm)
    fn = h.make_function("com.local", "LinT", ["X", "W", "lo"], ["V"], fbody,
                         [h.make_opsetid("", 17)], attributes=["order"])
    mf = model([h.make_node("LinT", ["x", "w"], ["y"], name="call", domain="com.local", order=[1, 0, 2])],
               [vi("x", T.FLOAT, [2, 3, 4])], [out("y")], extra_opsets=[("com.local", 1)],
               inits=[numpy_helper.from_array(np.ones((4, 5), dtype=np.float32), "w")])
    mf.functions.append(fn)
    cases["function"] = mf
    # every element type and every kind of type, read and written back: the
    # outputs are the inputs themselves and carry no type in the model
    ins = [vi("t%d" % et, et, [2, "n", None]) for et in range(1, 24)]
    seq = h.make_tensor_sequence_value_info("seq", T.FLOAT, [3, "m"])
    opt = onnx.ValueInfoProto()
    opt.name = "opt"
    opt.type.optional_type.elem_type.CopyFrom(h.make_sequence_type_proto(h.make_tensor_type_proto(T.INT8, [4])))
    mp = onnx.ValueInfoProto()
    mp.name = "map"
    mp.type.map_type.key_type = T.INT64
    mp.type.map_type.value_type.CopyFrom(h.make_tensor_type_proto(T.DOUBLE, []))
    sp = h.make_sparse_tensor_value_info("sp", T.FLOAT16, [5, 6])
    ins += [seq, opt, mp, sp]
    cases["passthrough"] = model([], ins, [out(v.name) for v in ins], opset=21, ir=10)
    # a model naming a dim "unk__0" in a subgraph: fresh symbols must not reuse it
    then_u = h.make_graph([h.make_node("Identity", ["u"], ["tu"], name="then_id")], "then_u", [],
                          [h.make_tensor_value_info("tu", T.FLOAT, ["unk__0"])])
    else_u = h.make_graph([h.make_node("Identity", ["u"], ["eu"], name="else_id")], "else_u", [],
                          [h.make_tensor_value_info("eu", T.FLOAT, ["unk__0"])])
    cases["unk_names"] = model([h.make_node("Relu", ["w"], ["a"], name="relu"),
                                h.make_node("If", ["c"], ["y"], name="if2", then_branch=then_u,
                                            else_branch=else_u)],
                               [h.make_tensor_value_info("w", T.FLOAT, [None]),
                                h.make_tensor_value_info("u", T.FLOAT, [None]), c],
                               [out("a"), out("y")])
    # for the harness itself: one model declaring a wrong output, one right
    cases["declared_wrong"] = model([h.make_node("Relu", ["x"], ["y"], name="r")], [x],
                                    [vi("y", T.FLOAT, [2, 4])])
    cases["declared_right"] = model([h.make_node("Relu", ["x"], ["y"], name="r")], [x],
                                    [vi("y", T.FLOAT, [2, "any"])])
    for k, m in cases.items():
        onnx.save(m, os.path.join(d, k + ".onnx"))


if __name__ == "__main__":
    main()
