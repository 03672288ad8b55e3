"""Preprocess: quantmake's `preprocess = default` stage against onnxruntime's
ORT_ENABLE_BASIC optimizer (optimized_model_filepath output) on the same
models: total node count after (subgraphs included), wall time, and whether
the result still gives the original's outputs (onnxruntime, random inputs,
rtol/atol 1e-5).

    .venv/bin/python bench/preprocess.py [--quantmake ./quantmake]

Times, best of 5: quantmake's is the preprocess stage alone as its build log
reports it (load, passes, shape inference of the result, fsync'd save; 10 ms
resolution), and the whole `quantmake` build of a one-model project (process
start, infer-shapes, preprocess, cache store) as a second column; ORT's is
InferenceSession creation with optimized_model_filepath in a warm Python
process (load, optimize, save, plus its session setup).

Models: tests/models (cnn, transformer), the silero-vad and magika models
that bench/fetch-models.sh puts in tests/.cache/models (if present), the
examples/digits MLP, and an opset-9 CNN with unfolded BatchNormalization,
Identity/Dropout and constant subgraphs built here with the onnx helper API.
"""
import argparse
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto as T, helper as h, numpy_helper as nh

here = os.path.dirname(os.path.abspath(__file__))
root = os.path.dirname(here)
ap = argparse.ArgumentParser()
ap.add_argument("--quantmake", default=os.path.join(root, "quantmake"))
args = ap.parse_args()
qm = os.path.abspath(args.quantmake)
tmp = tempfile.mkdtemp(prefix="qm-prep-bench.")


def bn_cnn(path, layers=8, ch=32):
    """opset 9 CNN as an old exporter leaves it: Conv, BatchNormalization,
    Relu, Dropout, Identity, a constant reshape target."""
    rng = np.random.default_rng(0)
    nodes, inits, x, c = [], [], "x", 3
    for i in range(layers):
        w = nh.from_array((rng.standard_normal((ch, c, 3, 3)) / np.sqrt(9 * c)).astype(np.float32), f"w{i}")
        inits.append(w)
        nodes.append(h.make_node("Conv", [x, f"w{i}"], [f"c{i}"], pads=[1, 1, 1, 1]))
        for k, v in (("s", rng.random(ch) + 0.5), ("b", rng.standard_normal(ch) * 0.1),
                     ("m", rng.standard_normal(ch) * 0.1), ("v", rng.random(ch) + 0.5)):
            inits.append(nh.from_array(v.astype(np.float32), f"bn{i}{k}"))
        nodes.append(h.make_node("BatchNormalization", [f"c{i}", f"bn{i}s", f"bn{i}b", f"bn{i}m", f"bn{i}v"], [f"n{i}"]))
        nodes.append(h.make_node("Relu", [f"n{i}"], [f"r{i}"]))
        nodes.append(h.make_node("Identity", [f"r{i}"], [f"d{i}"]))
        x, c = f"d{i}", ch
    nodes.append(h.make_node("Constant", [], ["shape"], value=nh.from_array(np.array([1, -1], np.int64))))
    nodes.append(h.make_node("Reshape", [x, "shape"], ["flat"]))
    nodes.append(h.make_node("Dropout", ["flat"], ["y"]))
    g = h.make_graph(nodes, "bn_cnn", [h.make_tensor_value_info("x", T.FLOAT, [1, 3, 16, 16])],
                     [h.make_tensor_value_info("y", T.FLOAT, [1, ch * 256])], inits)
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 9)])
    m.ir_version = 4
    onnx.checker.check_model(m)
    onnx.save(m, path)


models = sorted(glob.glob(os.path.join(root, "tests/models/*.onnx")))
models += sorted(glob.glob(os.path.join(root, "tests/.cache/models/*.onnx")))
bn_cnn(os.path.join(tmp, "bn_cnn_opset9.onnx"))
models.append(os.path.join(tmp, "bn_cnn_opset9.onnx"))
digits = os.path.join(tmp, "digits.onnx")
subprocess.run([sys.executable, os.path.join(root, "examples/digits/export.py"),
                os.path.join(root, "examples/digits/weights.npz"), digits], check=True)
models.append(digits)


def count(g):
    n = 0
    for nd in g.node:
        n += 1
        for a in nd.attribute:
            if a.HasField("g"):
                n += count(a.g)
            for s in a.graphs:
                n += count(s)
    return n


def feed_for(sess, name):
    rng = np.random.default_rng(0)
    f = {}
    for i in sess.get_inputs():
        shp = [d if isinstance(d, int) else 1 for d in i.shape]
        if "silero" in name and i.name == "input":
            shp = [1, 512]
        if i.name == "sr":
            f[i.name] = np.array(16000, np.int64)
        elif i.type == "tensor(float)":
            f[i.name] = (rng.standard_normal(shp) * 0.1).astype(np.float32)
        elif i.type == "tensor(float16)":
            f[i.name] = (rng.standard_normal(shp) * 0.1).astype(np.float16)
        elif i.type == "tensor(int64)":
            f[i.name] = rng.integers(0, 8, shp).astype(np.int64)
        elif i.type == "tensor(int32)":
            f[i.name] = rng.integers(0, 8, shp).astype(np.int32)
        else:
            return None
    return f


def same_outputs(orig, new, name):
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.log_severity_level = 4
    a = ort.InferenceSession(orig, so)
    b = ort.InferenceSession(new, so)
    f = feed_for(a, name)
    if f is None:
        return "-"
    try:
        x = a.run(None, f)
    except Exception:
        return "-"
    y = b.run(None, f)
    ok = all(np.asarray(p).shape == np.asarray(q).shape and
             np.allclose(np.asarray(p, np.float64), np.asarray(q, np.float64), rtol=1e-5, atol=1e-5)
             for p, q in zip(x, y))
    return "yes" if ok else "NO"


def run_quantmake(path):
    name = re.sub(r"[^A-Za-z0-9_]", "_", os.path.basename(path)[:-5])
    p = os.path.join(tmp, "proj-" + name)
    best_stage = best_all = None
    for _ in range(5):
        shutil.rmtree(p, ignore_errors=True)
        os.makedirs(os.path.join(p, "rules"))
        os.makedirs(os.path.join(p, "models"))
        shutil.copy(path, os.path.join(p, "models", name + ".onnx"))
        with open(os.path.join(p, "rules", "m.rules"), "w") as f:
            f.write(f"[model {name}]\nsource = models/{name}.onnx\npreprocess = default\n")
        env = dict(os.environ, QUANTMAKE_CACHE=os.path.join(p, "cache"))
        t = time.perf_counter()
        r = subprocess.run([qm, "-C", p], capture_output=True, text=True, env=env)
        dt = time.perf_counter() - t
        if r.returncode != 0:
            raise SystemExit(f"quantmake failed on {name}: {r.stderr.strip()[-300:]}")
        m = re.search(r"\] preprocess \S+ \(([0-9.]+)s\)", r.stdout + r.stderr)
        st = float(m.group(1)) if m else float("nan")
        best_stage = st if best_stage is None else min(best_stage, st)
        best_all = dt if best_all is None else min(best_all, dt)
    return os.path.join(p, "build", name, name + ".onnx"), best_stage, best_all


def run_ort(path):
    out = os.path.join(tmp, "ort-" + os.path.basename(path))
    best = None
    for _ in range(5):
        so = ort.SessionOptions()
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
        so.optimized_model_filepath = out
        so.log_severity_level = 4
        t = time.perf_counter()
        ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
        dt = time.perf_counter() - t
        best = dt if best is None else min(best, dt)
    return out, best


print(f"{'model':32} {'nodes':>6} {'qm':>6} {'ort':>6} {'qm stage':>9} {'qm build':>9} {'ort':>8}  same(qm/ort)")
for path in models:
    name = os.path.basename(path)
    n0 = count(onnx.load(path).graph)
    qo, qst, qall = run_quantmake(path)
    oo, ot = run_ort(path)
    nq, no = count(onnx.load(qo).graph), count(onnx.load(oo).graph)
    print(f"{name:32} {n0:6} {nq:6} {no:6} {qst * 1e3:7.0f}ms {qall * 1e3:7.1f}ms {ot * 1e3:6.1f}ms  "
          f"{same_outputs(path, qo, name)}/{same_outputs(path, oo, name)}", flush=True)
shutil.rmtree(tmp, ignore_errors=True)
