#!/usr/bin/env python3
"""Print the value_info and output types of an ONNX model, one per line:
"vi NAME TYPE" / "out NAME TYPE", subgraphs indented under "subgraph ATTR".
TYPE reads FLOAT[2,N,?], seq(FLOAT[2]), opt(...). Used by the infer tests.

usage: dump_types.py MODEL
"""
import sys

import onnx


def t2s(t):
    if t.HasField("tensor_type"):
        tt = t.tensor_type
        s = onnx.TensorProto.DataType.Name(tt.elem_type) if tt.elem_type else "?"
        if tt.HasField("shape"):
            s += "[" + ",".join(str(d.dim_value) if d.HasField("dim_value") else (d.dim_param or "?")
                                for d in tt.shape.dim) + "]"
        return s
    if t.HasField("sequence_type"):
        return "seq(" + t2s(t.sequence_type.elem_type) + ")"
    if t.HasField("optional_type"):
        return "opt(" + t2s(t.optional_type.elem_type) + ")"
    return "?"


def walk(g, ind=""):
    for v in g.value_info:
        print(ind + "vi", v.name, t2s(v.type))
    for v in g.output:
        print(ind + "out", v.name, t2s(v.type))
    for n in g.node:
        for a in n.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                print(ind + "subgraph", a.name)
                walk(a.g, ind + "  ")


walk(onnx.load(sys.argv[1]).graph)
