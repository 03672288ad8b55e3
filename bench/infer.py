"""Shape inference: `quantmake infer-shapes` against onnx.shape_inference.infer_shapes
(data_prop=True) on the same models, in one run. Whole command for both: load,
infer, save (onnx's in-process, quantmake's as a process, so ours pays its
process start, so a second column times onnx as a process too: what a
build step pays either way). Best of 5.

    .venv/bin/python bench/infer.py [--quantmake ./quantmake]

Models: tests/models (cnn, transformer), the silero-vad and magika models that
tests/t_infer_crosscheck.sh downloads into tests/.cache/models (if present),
and a synthetic 10,000-node model (tests/infer_crosscheck.py SYNTH).
"""
import argparse
import glob
import os
import subprocess
import sys
import tempfile
import time

import onnx

here = os.path.dirname(os.path.abspath(__file__))
root = os.path.dirname(here)
ap = argparse.ArgumentParser()
ap.add_argument("--quantmake", default=os.path.join(root, "quantmake"))
args = ap.parse_args()
qm = os.path.abspath(args.quantmake)


def best(fn, n=5):
    t = []
    for _ in range(n):
        s = time.perf_counter()
        fn()
        t.append(time.perf_counter() - s)
    return min(t)


with tempfile.TemporaryDirectory() as tmp:
    synth = os.path.join(tmp, "synthetic10k.onnx")
    subprocess.run([sys.executable, os.path.join(root, "tests", "infer_crosscheck.py"), "SYNTH", synth],
                   check=True, stdout=subprocess.DEVNULL)
    models = sorted(glob.glob(os.path.join(root, "tests", "models", "*.onnx")))
    models += sorted(glob.glob(os.path.join(root, "tests", ".cache", "models", "*.onnx")))
    models.append(synth)
    print(f"{'model':36s} {'nodes':>6s} {'quantmake':>10s} {'onnx in-proc':>12s} {'ratio':>6s} "
          f"{'onnx process':>12s} {'ratio':>6s}")
    script = ("import sys, onnx\nm = onnx.load(sys.argv[1])\n"
              "onnx.save(onnx.shape_inference.infer_shapes(m, data_prop=True), sys.argv[2])\n")
    for m in models:
        out = os.path.join(tmp, "out.onnx")
        nodes = len(onnx.load(m, load_external_data=False).graph.node)
        ours = best(lambda: subprocess.run([qm, "infer-shapes", m, out], check=True,
                                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))

        def ref():
            model = onnx.load(m)
            onnx.save(onnx.shape_inference.infer_shapes(model, data_prop=True), out)
        theirs = best(ref)
        proc = best(lambda: subprocess.run([sys.executable, "-c", script, m, out], check=True))
        print(f"{os.path.basename(m):36s} {nodes:6d} {ours*1000:8.1f}ms {theirs*1000:10.1f}ms "
              f"{ours/theirs:6.2f} {proc*1000:10.1f}ms {ours/proc:6.2f}")
