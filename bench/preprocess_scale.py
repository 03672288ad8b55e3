#!/usr/bin/env python3
"""How preprocess scales with graph size: synthetic models of N repeated
blocks that each pass rewrites once per block, so a pass that searches the
graph per candidate shows as quadratic growth. CPU (user + system, wait4)
of `quantmake preprocess IN OUT`, best of --reps, for each binary given,
and whether their outputs are byte-identical (cmp).

    .venv/bin/python bench/preprocess_scale.py [--quantmake BIN ...] [--sizes 500,2000] [--reps 3]

Models (all built with the onnx helper API, opset 13, shapes annotated):
  convbn   N x (Conv + BatchNormalization + Mul and Add by per-channel
           constants + Relu): fuse-bn and conv-affine, one fusion each
  matmul   N x (MatMul by a 2-D weight + Add of a bias + Relu) on [1, 16]:
           matmul-add
  transpose N x (two Transposes composing to a perm, + Relu): transpose
  synth10k tests/infer_crosscheck.py's 10,000-node model (shape chains)
"""
import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto as T, helper as h, numpy_helper as nh

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def save(path, nodes, x_shape, y_shape, inits, y="y"):
    g = h.make_graph(nodes, os.path.basename(path), [h.make_tensor_value_info("x", T.FLOAT, x_shape)],
                     [h.make_tensor_value_info(y, T.FLOAT, y_shape)], inits)
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 13)])
    m.ir_version = 8
    onnx.save(onnx.shape_inference.infer_shapes(m), path)


def convbn(path, n):
    rng = np.random.default_rng(0)
    f = lambda *s: rng.standard_normal(s).astype(np.float32)
    nodes, inits, x = [], [], "x"
    for i in range(n):
        p = "b%d_" % i
        inits += [nh.from_array(f(4, 4, 1, 1), p + "w"), nh.from_array(f(4), p + "s"), nh.from_array(f(4), p + "b"),
                  nh.from_array(f(4), p + "m"), nh.from_array(np.abs(f(4)) + 0.5, p + "v"),
                  nh.from_array(f(4, 1, 1), p + "k"), nh.from_array(f(1, 4, 1, 1), p + "c")]
        nodes += [h.make_node("Conv", [x, p + "w"], [p + "conv"]),
                  h.make_node("BatchNormalization", [p + "conv", p + "s", p + "b", p + "m", p + "v"], [p + "bn"]),
                  h.make_node("Mul", [p + "bn", p + "k"], [p + "mul"]),
                  h.make_node("Add", [p + "mul", p + "c"], [p + "add"]),
                  h.make_node("Relu", [p + "add"], [p + "y" if i < n - 1 else "y"])]
        x = p + "y"
    save(path, nodes, [1, 4, 2, 2], [1, 4, 2, 2], inits)


def matmul(path, n):
    rng = np.random.default_rng(1)
    nodes, inits, x = [], [], "x"
    for i in range(n):
        p = "b%d_" % i
        inits += [nh.from_array(rng.standard_normal((16, 16)).astype(np.float32) * 0.25, p + "w"),
                  nh.from_array(rng.standard_normal(16).astype(np.float32), p + "c")]
        nodes += [h.make_node("MatMul", [x, p + "w"], [p + "mm"]), h.make_node("Add", [p + "mm", p + "c"], [p + "add"]),
                  h.make_node("Relu", [p + "add"], [p + "y" if i < n - 1 else "y"])]
        x = p + "y"
    save(path, nodes, [1, 16], [1, 16], inits)


def transpose(path, n):
    nodes, x = [], "x"
    for i in range(n):
        p = "b%d_" % i
        nodes += [h.make_node("Transpose", [x], [p + "t1"], perm=[0, 2, 1]),
                  h.make_node("Transpose", [p + "t1"], [p + "t2"], perm=[2, 1, 0]),
                  h.make_node("Relu", [p + "t2"], [p + "y" if i < n - 1 else "y"])]
        x = p + "y"
    save(path, nodes, [2, 2, 2], [2, 2, 2], [])


def cpu_run(cmd):
    """user + system seconds of one run of cmd (wait4)"""
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, ru = os.wait4(p.pid, 0)
    err = p.stderr.read().decode()
    p.stderr.close()
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit("failed: %s\n%s" % (" ".join(cmd), err))
    return ru.ru_utime + ru.ru_stime


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quantmake", action="append", help="binary (repeatable; default ./quantmake)")
    ap.add_argument("--sizes", default="500,2000")
    ap.add_argument("--reps", type=int, default=3)
    a = ap.parse_args()
    bins = a.quantmake or [os.path.join(ROOT, "quantmake")]
    tmp = tempfile.mkdtemp(prefix="qm-prepscale-")
    models = []
    for n in (int(s) for s in a.sizes.split(",")):
        for name, fn in (("convbn", convbn), ("matmul", matmul), ("transpose", transpose)):
            path = os.path.join(tmp, "%s%d.onnx" % (name, n))
            fn(path, n)
            models.append(path)
    synth = os.path.join(tmp, "synth10k.onnx")
    subprocess.run([sys.executable, os.path.join(ROOT, "tests/infer_crosscheck.py"), "SYNTH", synth], check=True)
    models.append(synth)
    print("load average %s; CPU ms (user + sys), best of %d" % (open("/proc/loadavg").read().split(" ")[:3], a.reps))
    print("%-18s %6s " % ("model", "nodes") + " ".join("%14s" % os.path.basename(os.path.dirname(b) or b)[-14:] for b in bins)
          + "  same")
    for path in models:
        row, outs = [], []
        for k, b in enumerate(bins):
            out = os.path.join(tmp, "out%d.onnx" % k)
            row.append(min(cpu_run([b, "preprocess", path, out]) for _ in range(a.reps)) * 1000)
            outs.append(open(out, "rb").read())
        same = "yes" if all(o == outs[0] for o in outs) else "NO"
        print("%-18s %6d " % (os.path.basename(path)[:-5], len(onnx.load(path).graph.node))
              + " ".join("%14.1f" % t for t in row) + "  " + same)
    subprocess.run(["rm", "-rf", tmp])


if __name__ == "__main__":
    main()
