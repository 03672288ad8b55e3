#!/usr/bin/env python3
"""The interpreter's one-hot MatMul shortcut (src/ops/fgemm.c,
fgemm_packed_b) against its full product (QUANTMAKE_MATMUL_DENSE=1) and
onnxruntime, one thread each.

  .venv/bin/python bench/matmul_onehot.py [--quantmake ./quantmake] [--runs 200]
                                          [--magika MODEL.onnx SAMPLE.npz]

Models, built here: magika's first layer (bytes -> Unsqueeze -> Equal with
0..256 -> Cast -> MatMul [257, 64]) for 1 and 16 samples of 2048 bytes; a
one-hot input A [8192, 257] against [257, 64]; the same with 10% and 60%
of the rows two-hot; a dense A. --magika adds a whole model and sample (its
input named in the .npz). Prints p50 latencies (ms) and the ratios; the
outputs of the shortcut and the full product are compared byte for byte.
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto as T, helper as h, numpy_helper as nh


def save(d, name, nodes, feed, inits):
    tt = {np.dtype(np.float32): T.FLOAT, np.dtype(np.int32): T.INT32}
    g = h.make_graph(nodes, name, [h.make_tensor_value_info(k, tt[v.dtype], list(v.shape)) for k, v in feed.items()],
                     [h.make_tensor_value_info("y", T.FLOAT, None)], [nh.from_array(v, k) for k, v in inits.items()])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 13)])
    m.ir_version = 8
    onnx.save(m, os.path.join(d, name + ".onnx"))
    np.savez(os.path.join(d, name + ".npz"), **feed)
    return name


def models(d):
    r = np.random.default_rng(1)
    b = r.standard_normal((257, 64)).astype(np.float32)
    out = []
    for n in (1, 16):
        out.append(save(d, "magika_layer_x%d" % n,
                        [h.make_node("Unsqueeze", ["x", "ax"], ["xu"]), h.make_node("Equal", ["xu", "rng"], ["eq"]),
                         h.make_node("Cast", ["eq"], ["a"], to=T.FLOAT), h.make_node("MatMul", ["a", "b"], ["y"])],
                        {"x": r.integers(0, 257, (n, 2048)).astype(np.int32)},
                        {"ax": np.array([2], np.int64), "rng": np.arange(257, dtype=np.int32), "b": b}))
    m = 8192
    for frac in (0, 10, 60):
        a = np.zeros((m, 257), np.float32)
        a[np.arange(m), r.integers(0, 257, m)] = 1
        rows = r.choice(m, m * frac // 100, replace=False)
        a[rows, (r.integers(0, 256, len(rows)) + 1 + a[rows].argmax(1)) % 257] = 0.5
        out.append(save(d, "onehot_%dpct_twohot" % frac, [h.make_node("MatMul", ["a", "b"], ["y"])], {"a": a}, {"b": b}))
    out.append(save(d, "dense", [h.make_node("MatMul", ["a", "b"], ["y"])],
                    {"a": r.standard_normal((m, 257)).astype(np.float32)}, {"b": b}))
    return out


def qm(exe, model, feed, runs, dense, out=None):
    env = dict(os.environ)
    env.pop("QUANTMAKE_MATMUL_DENSE", None)
    if dense:
        env["QUANTMAKE_MATMUL_DENSE"] = "1"
    cmd = [exe, "run", model, "-i", feed, "--bench", str(runs), "-t", "1"] + (["-o", out] if out else [])
    p = subprocess.run(cmd, env=env, capture_output=True, text=True)
    m = re.search(r"p50 ([0-9.]+) ms", p.stdout + p.stderr)
    if p.returncode or not m:
        sys.exit("%s failed: %s" % (" ".join(cmd), (p.stderr or p.stdout)[-300:]))
    return float(m.group(1))


def ort_p50(model, feed, runs):
    o = ort.SessionOptions()
    o.intra_op_num_threads = 1
    o.inter_op_num_threads = 1
    o.log_severity_level = 3
    s = ort.InferenceSession(model, o, providers=["CPUExecutionProvider"])
    f = dict(np.load(feed))
    for _ in range(10):
        s.run(None, f)
    ts = []
    for _ in range(runs):
        t = time.perf_counter()
        s.run(None, f)
        ts.append(time.perf_counter() - t)
    return 1000 * sorted(ts)[len(ts) // 2]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quantmake", default="./quantmake")
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--magika", nargs=2, metavar=("MODEL", "SAMPLE"))
    a = ap.parse_args()
    exe = os.path.abspath(a.quantmake)
    with tempfile.TemporaryDirectory() as d:
        cases = [(n, os.path.join(d, n + ".onnx"), os.path.join(d, n + ".npz")) for n in models(d)]
        if a.magika:
            cases.append(("magika (whole model)", a.magika[0], a.magika[1]))
        print("load average %.2f" % os.getloadavg()[0])
        print("%-24s %9s %9s %9s %10s %10s  %s" % ("case", "shortcut", "full", "ort", "full/short", "ort/short",
                                                 "bytes"))
        for name, model, feed in cases:
            fo, do = os.path.join(d, "f.npz"), os.path.join(d, "d.npz")
            qm(exe, model, feed, 1, False, fo)
            qm(exe, model, feed, 1, True, do)
            same = "same" if open(fo, "rb").read() == open(do, "rb").read() else "DIFFER"
            s = qm(exe, model, feed, a.runs, False)
            f = qm(exe, model, feed, a.runs, True)
            o = ort_p50(model, feed, a.runs)
            print("%-24s %9.3f %9.3f %9.3f %10.2f %10.2f  %s" % (name, s, f, o, f / s, o / s, same))


if __name__ == "__main__":
    main()
