#!/usr/bin/env python3
"""Compare quantmake's inferred types with onnx's reference inference.

usage: infer_crosscheck.py SYNTH OUT         write a synthetic 10,000-node model
       infer_crosscheck.py STRIP IN OUT      drop IN's value_info and output
                                               types (all graphs), save as OUT
       infer_crosscheck.py CHECK LABEL STRIPPED OURS
           run onnx.shape_inference.infer_shapes(STRIPPED, data_prop=True) and
           compare every tensor of every graph with OURS (quantmake's output
           for STRIPPED). Ours must equal the reference or be strictly more
           specific (known where the reference is not, a concrete dim where it
           has a symbol). Prints one "diff ..." line per difference, a summary
           line, and "PASS: crosscheck_LABEL" or "FAIL: crosscheck_LABEL: ...".
           OURS_SECONDS in the environment adds timings to the summary.
"""
import os
import sys
import time

import onnx
from onnx import shape_inference


def graphs(g, path="main"):
    """(path, graph) of g and all nested subgraphs"""
    yield path, g
    for i, n in enumerate(g.node):
        for a in n.attribute:
            subs = [a.g] if a.type == onnx.AttributeProto.GRAPH else list(a.graphs)
            for k, s in enumerate(subs):
                yield from graphs(s, "%s/%s:%s%s" % (path, n.name or i, a.name, "" if len(subs) == 1 else k))


def types(m):
    out = {}
    for path, g in graphs(m.graph):
        for v in list(g.value_info) + list(g.output):
            if v.HasField("type"):
                out[(path, v.name)] = v.type
    return out


def desc(t):
    """(kind, elem, dims or None, inner) with dims as int or None (symbolic)"""
    if t is None:
        return None
    k = t.WhichOneof("value")
    if k in ("tensor_type", "sparse_tensor_type"):
        tt = getattr(t, k)
        dims = None
        if tt.HasField("shape"):
            dims = [d.dim_value if d.HasField("dim_value") else None for d in tt.shape.dim]
        return (k, tt.elem_type, dims, None)
    if k == "sequence_type":
        return (k, 0, None, desc(t.sequence_type.elem_type) if t.sequence_type.HasField("elem_type") else None)
    if k == "optional_type":
        return (k, 0, None, desc(t.optional_type.elem_type) if t.optional_type.HasField("elem_type") else None)
    if k == "map_type":
        return (k, t.map_type.key_type, None, desc(t.map_type.value_type))
    return None


def fmt(d):
    if d is None:
        return "?"
    k, e, dims, inner = d
    if k in ("tensor_type", "sparse_tensor_type"):
        s = onnx.TensorProto.DataType.Name(e) if e else "?"
        return s + ("[*]" if dims is None else "[" + ",".join("?" if x is None else str(x) for x in dims) + "]")
    return "%s(%s)" % (k.split("_")[0], fmt(inner))


def compare(ref, ours):
    """'' if ours equals or refines ref, else why; and whether ours is strictly more specific"""
    if ref is None:
        return "", ours is not None
    if ours is None:
        return "reference has a type, ours none", False
    if ref[0] != ours[0]:
        return "different kinds", False
    if ref[1] and ref[1] != ours[1]:
        return "different element types", False
    more = bool(ours[1] and not ref[1])
    if ref[0] in ("tensor_type", "sparse_tensor_type"):
        if ref[2] is None:
            return "", more or ours[2] is not None
        if ours[2] is None:
            return "reference knows the rank, ours not", False
        if len(ref[2]) != len(ours[2]):
            return "different ranks", False
        for r, o in zip(ref[2], ours[2]):
            if r is not None and o is None:
                return "reference has a concrete dim where ours has a symbol", False
            if r is not None and r != o:
                return "different dims", False
            if r is None and o is not None:
                more = True
        return "", more
    why, m = compare(ref[3], ours[3])
    return why, more or m


def synth(path, blocks=1000):
    """10 nodes a block: the PyTorch reshape pattern (Shape, Gather,
    Unsqueeze, Concat, Reshape) around elementwise ops, symbolic batch"""
    import numpy as np
    from onnx import TensorProto as T
    from onnx import helper as h
    from onnx import numpy_helper
    inits = [numpy_helper.from_array(np.array(0, np.int64), "i0"),
             numpy_helper.from_array(np.array([0], np.int64), "ax0"),
             numpy_helper.from_array(np.array([-1], np.int64), "m1"),
             numpy_helper.from_array(np.array([4, 16], np.int64), "k416")]
    nodes, prev = [], "x"
    for i in range(blocks):
        inits.append(numpy_helper.from_array(np.full((64,), 0.5, np.float32), "b%d" % i))
        nodes += [h.make_node("Add", [prev, "b%d" % i], ["a%d" % i]),
                  h.make_node("Relu", ["a%d" % i], ["r%d" % i]),
                  h.make_node("Shape", ["r%d" % i], ["s%d" % i]),
                  h.make_node("Gather", ["s%d" % i, "i0"], ["g%d" % i], axis=0),
                  h.make_node("Unsqueeze", ["g%d" % i, "ax0"], ["u%d" % i]),
                  h.make_node("Concat", ["u%d" % i, "k416"], ["c%d" % i], axis=0),
                  h.make_node("Reshape", ["r%d" % i, "c%d" % i], ["p%d" % i]),
                  h.make_node("Mul", ["p%d" % i, "p%d" % i], ["q%d" % i]),
                  h.make_node("Concat", ["u%d" % i, "m1"], ["d%d" % i], axis=0),
                  h.make_node("Reshape", ["q%d" % i, "d%d" % i], ["y%d" % i])]
        prev = "y%d" % i
    g = h.make_graph(nodes, "synthetic", [h.make_tensor_value_info("x", T.FLOAT, ["batch", 64])],
                     [h.make_tensor_value_info(prev, T.FLOAT, None)], initializer=inits)
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 17)]), path)


def main():
    if sys.argv[1] == "SYNTH":
        synth(sys.argv[2])
        return
    if sys.argv[1] == "STRIP":
        m = onnx.load(sys.argv[2])
        for _, g in graphs(m.graph):
            del g.value_info[:]
            for o in g.output:
                o.ClearField("type")
        onnx.save(m, sys.argv[3])
        return
    label, stripped, ours_path = sys.argv[2:5]
    model = onnx.load(stripped)
    t0 = time.perf_counter()
    ref = types(shape_inference.infer_shapes(model, data_prop=True))
    ref_seconds = time.perf_counter() - t0
    ours = types(onnx.load(ours_path))
    diffs, more, same = [], 0, 0
    for key in sorted(set(ref) | set(ours)):
        why, m = compare(desc(ref.get(key)), desc(ours.get(key)))
        if why:
            diffs.append("diff %s: %s tensor '%s': reference %s, ours %s (%s)" % (
                label, key[0], key[1], fmt(desc(ref.get(key))), fmt(desc(ours.get(key))), why))
        elif m:
            more += 1
        else:
            same += 1
    for d in diffs:
        print(d)
    timing = ""
    if os.environ.get("OURS_SECONDS"):
        timing = "; inference time ours %ss, reference %.3fs" % (
            os.environ["OURS_SECONDS"], ref_seconds)
    print("crosscheck %s: %d tensors, %d equal, %d more specific than the reference, %d worse%s" % (
        label, len(set(ref) | set(ours)), same, more, len(diffs), timing))
    if diffs:
        print("FAIL: crosscheck_%s: %d tensors less specific or different (first: %s)" % (
            label, len(diffs), diffs[0][5:]))
    else:
        print("PASS: crosscheck_%s" % label)


if __name__ == "__main__":
    main()
