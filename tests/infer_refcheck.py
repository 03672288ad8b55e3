#!/usr/bin/env python3
"""Run ONNX's reference shape inference the way tests/t_infer_conformance.sh
runs ours: drop the graph's output types and value_info (input types stay),
infer with onnx.shape_inference.infer_shapes(data_prop=True), and report for
each model whether the declared outputs come back (element type and every
concrete dim). Used to find models whose outputs depend on runtime values of
graph inputs, which no static inference can reproduce (tests/infer-skip.txt).

usage: infer_refcheck.py MODEL...   prints "ok LABEL" or "no LABEL why"
"""
import sys

import onnx
from onnx import shape_inference


def label(path):
    parts = path.split("/")
    return "/".join(parts[-3:-1]) if parts[-1] == "model.onnx" else path


def tensor_desc(t):
    if not t.HasField("tensor_type"):
        return None
    tt = t.tensor_type
    dims = None
    if tt.HasField("shape"):
        dims = [d.dim_value if d.HasField("dim_value") else None for d in tt.shape.dim]
    return tt.elem_type, dims


def satisfies(decl, got):
    if decl is None:
        return True
    if got is None:
        return False
    if decl[0] and decl[0] != got[0]:
        return False
    if decl[1] is None:
        return True
    if got[1] is None or len(got[1]) != len(decl[1]):
        return False
    return all(d is None or d == g for d, g in zip(decl[1], got[1]))


def main():
    for path in sys.argv[1:]:
        m = onnx.load(path)
        g = m.graph
        declared = {o.name: tensor_desc(o.type) for o in g.output if o.HasField("type")}
        del g.value_info[:]
        for o in g.output:
            o.ClearField("type")
        try:
            inf = shape_inference.infer_shapes(m, data_prop=True)
        except Exception as e:  # noqa: BLE001 - report any failure
            print("no", label(path), "error:", str(e).splitlines()[0][:150])
            continue
        got = {o.name: tensor_desc(o.type) for o in inf.graph.output if o.HasField("type")}
        bad = [n for n, d in declared.items() if not satisfies(d, got.get(n))]
        if bad:
            print("no", label(path), "output", bad[0], "declared", declared[bad[0]],
                  "reference", got.get(bad[0]))
        else:
            print("ok", label(path))


if __name__ == "__main__":
    main()
