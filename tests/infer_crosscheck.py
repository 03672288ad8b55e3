#!/usr/bin/env python3
"""Compare quantmake's inferred types with onnx's reference inference.

usage: infer_crosscheck.py STRIP IN OUT      drop IN's value_info, save as OUT
       infer_crosscheck.py CHECK LABEL STRIPPED OURS
           run onnx.shape_inference.infer_shapes(STRIPPED, data_prop=True) and
           compare every tensor of every graph with OURS (quantmake's output
           for STRIPPED). Ours must equal the reference or be strictly more
           specific (known where the reference is not, a concrete dim where it
           has a symbol). Prints one "diff ..." line per difference, a summary
           line, and "PASS: crosscheck_LABEL" or "FAIL: crosscheck_LABEL: ...".
"""
import sys

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


def main():
    if sys.argv[1] == "STRIP":
        m = onnx.load(sys.argv[2])
        for _, g in graphs(m.graph):
            del g.value_info[:]
        onnx.save(m, sys.argv[3])
        return
    label, stripped, ours_path = sys.argv[2:5]
    ref = types(shape_inference.infer_shapes(onnx.load(stripped), data_prop=True))
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
    print("crosscheck %s: %d tensors, %d equal, %d more specific than the reference, %d worse" % (
        label, len(set(ref) | set(ours)), same, more, len(diffs)))
    if diffs:
        print("FAIL: crosscheck_%s: %d tensors less specific or different (first: %s)" % (
            label, len(diffs), diffs[0][5:]))
    else:
        print("PASS: crosscheck_%s" % label)


if __name__ == "__main__":
    main()
