#!/usr/bin/env python3
"""Float Conv layers of the calibration benchmarks, one at a time, on one
thread: quantmake beside onnxruntime.

    .venv/bin/python bench/conv_layers.py [--quantmake ./quantmake] [--baseline OTHER_QUANTMAKE]
                                          [--models cnn:2,fashion-cnn:8,digits-cnn:23] [--repeat 3]

Each Conv of a model (bench/quantize.py's synthetic cnn, made here;
fashion-cnn and digits-cnn from bench/.cache, fetched by
bench/fetch-models.sh) becomes a model of its own: the Conv, the Relu
that follows it (quantmake fuses it into the Conv, onnxruntime too) and a
Slice keeping one element, so neither tool times handing back a large
output. Its input is random (absolute values, as after a Relu) at the
layer's shape and the batch given per model (the batch calibration runs
it at: cnn 2, fashion-cnn 8; digits-cnn at 23, a batch that does not
divide into groups of images side by side). Per layer: the median
latency of `quantmake run --bench` (-t 1) and of onnxruntime (1 intra-op
thread, all graph optimizations, bench/interp-ort.py's session), the best
of --repeat medians, as microseconds a sample and GFLOP/s (2 x the
multiply-adds of the layer's output / latency), and quantmake's speed as
a multiple of onnxruntime's. With --baseline, another quantmake binary
(a build from before a change) is timed too, interleaved.
"""
import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper, shape_inference

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


def layers(path, batch):
    """(name, Conv node, its initializers, input shape at batch, MACs per
    sample, whether a Relu reads it) per Conv of the model"""
    m = onnx.load(path)
    inits = {i.name: i for i in m.graph.initializer}
    for i in m.graph.input:
        if i.name not in inits:
            dims = i.type.tensor_type.shape.dim
            dims[0].ClearField("dim_param")
            dims[0].dim_value = batch
    m = shape_inference.infer_shapes(m)
    shapes = {}
    for v in list(m.graph.value_info) + list(m.graph.input) + list(m.graph.output):
        shapes[v.name] = [d.dim_value for d in v.type.tensor_type.shape.dim]
    readers = {}
    for n in m.graph.node:
        for x in n.input:
            readers.setdefault(x, []).append(n)
    out = []
    for k, n in enumerate(n for n in m.graph.node if n.op_type == "Conv"):
        w = numpy_helper.to_array(inits[n.input[1]])
        y = shapes[n.output[0]]
        macs = int(np.prod(y[1:])) * int(np.prod(w.shape[1:]))
        relu = any(r.op_type == "Relu" for r in readers.get(n.output[0], []))
        out.append(("%s/%d" % (os.path.basename(path)[:-5], k), n, [inits[x] for x in n.input[1:] if x in inits],
                    shapes[n.input[0]], macs, relu))
    return out


def layer_model(node, inits, relu, path):
    conv = helper.make_node("Conv", ["x"] + list(node.input[1:]), ["c"], name="conv")
    conv.attribute.extend(node.attribute)
    nodes = [conv]
    last = "c"
    if relu:
        nodes.append(helper.make_node("Relu", ["c"], ["r"], name="relu"))
        last = "r"
    extra = [numpy_helper.from_array(np.array([0, 0], np.int64), "st"),
             numpy_helper.from_array(np.array([1, 1], np.int64), "en")]
    nodes.append(helper.make_node("Slice", [last, "st", "en"], ["y"], name="slice"))
    g = helper.make_graph(nodes, "layer", [helper.make_tensor_value_info("x", TensorProto.FLOAT, None)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], list(inits) + extra)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 7
    onnx.save(m, path)


def qm_p50(qm, model, inp, runs):
    r = subprocess.run([qm, "run", model, "-i", "x=" + inp, "--bench", str(runs), "-t", "1"],
                       capture_output=True, text=True, check=True)
    for line in r.stdout.splitlines():
        if line.startswith("latency:"):
            return float(line.split("p50")[1].split()[0]) * 1e-3
    raise RuntimeError("no latency line from %s: %s" % (qm, r.stdout + r.stderr))


def ort_p50(model, x, runs):
    import time
    from importlib import import_module
    s = import_module("interp-ort").session(model, 1)
    for _ in range(3):
        s.run(None, {"x": x})
    lat = []
    for _ in range(runs):
        t0 = time.perf_counter()
        s.run(None, {"x": x})
        lat.append(time.perf_counter() - t0)
    return float(np.median(lat))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quantmake", default=os.path.join(HERE, "..", "quantmake"))
    ap.add_argument("--baseline")
    ap.add_argument("--models", default="cnn:2,fashion-cnn:8,digits-cnn:23")
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    work = tempfile.mkdtemp(prefix="conv-layers-")
    from quantize import make_cnn
    rng = np.random.default_rng(7)
    tools = [("quantmake", os.path.abspath(a.quantmake))]
    if a.baseline:
        tools.append(("baseline", os.path.abspath(a.baseline)))
    print("%-14s %-22s %5s %9s  %s" % ("layer", "input", "batch", "MMAC/smp",
                                      "  ".join("%s us/smp GFLOP/s" % t for t, _ in tools) +
                                      "  onnxruntime us/smp GFLOP/s  quantmake/ort"))
    for spec in a.models.split(","):
        name, batch = spec.split(":")
        batch = int(batch)
        path = os.path.join(HERE, ".cache", name + ".onnx")
        if name == "cnn":
            path = os.path.join(work, "cnn.onnx")
            make_cnn(path)
        if not os.path.exists(path):
            print("SKIP: %s: %s missing (sh bench/fetch-models.sh)" % (name, path))
            continue
        for lname, node, inits, shape, macs, relu in layers(path, batch):
            mp, xp = os.path.join(work, "layer.onnx"), os.path.join(work, "x.npy")
            layer_model(node, inits, relu, mp)
            x = np.abs(rng.standard_normal(shape)).astype(np.float32)
            np.save(xp, x)
            runs = max(50, int(2e10 / (2 * macs * batch)))  # about 0.2 s at 100 GFLOP/s
            best = {t: float("inf") for t, _ in tools}
            best["ort"] = float("inf")
            for _ in range(a.repeat):
                for t, qm in tools:
                    best[t] = min(best[t], qm_p50(qm, mp, xp, runs))
                best["ort"] = min(best["ort"], ort_p50(mp, x, runs))
            cells = []
            for t in [t for t, _ in tools] + ["ort"]:
                cells.append("%8.2f %7.1f" % (best[t] * 1e6 / batch, 2 * macs * batch / best[t] / 1e9))
            print("%-14s %-22s %5d %9.3f  %s  %6.2fx" % (lname, "x".join(map(str, shape[1:])), batch, macs / 1e6,
                                                   "  ".join(cells), best["ort"] / best["quantmake"]))


if __name__ == "__main__":
    main()
