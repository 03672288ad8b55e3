"""quantize = weight-only against onnxruntime's MatMulNBitsQuantizer, in one run.

    .venv/bin/python bench/weightonly.py [--quantmake ./quantmake] [--shape small|llama-2g|SPEC]
        [--bits 4] [--block 32] [--keep DIR]

The model is a decoder made by tests/models/mkdecoder.py with random weights
and external data, written into a temporary directory (never committed):
small is the test decoder (0.5 MB); llama-2g is Llama-shaped (hidden 2048,
16 heads, ffn 5632, vocab 32000, 8 layers: 2.2 GB of float weights); SPEC is
"vocab,hidden,heads,ffn,layers". Both tools quantize the same MatMuls the
same way: bits and block size as given, asymmetric, round to nearest,
lm_head at the same bits, the embedding and the one Gemm left in float
(onnxruntime's quantizer takes MatMul only). quantmake runs a whole build in
a fresh project and cache (export's copy, infer-shapes, quantize, storing
the result); onnxruntime runs in a process of its own: load the model, run
MatMulNBitsQuantizer, save with external data. Each tool's wall time and
peak RSS (its process tree's, from wait4), the output's size, and the
logits of both quantized models run by onnxruntime (CPU, no graph
optimizations) against the float model on 4 random inputs of 16 tokens:
relative L2 error and next-token top-1 agreement. quantmake's stage times
(from its build log) are printed too: export copies the model into the
cache and infer-shapes links it, costs onnxruntime's in-process call does
not have.

onnxruntime's quantizer imports onnx_ir (which imports sympy); they are
installed with pip --no-deps into the work directory and put on the
PYTHONPATH of its process only, so the shared .venv stays as the tests
expect it (sympy there switches on symbolic shape inference in
onnxruntime's quant_pre_process).
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHAPES = {"small": "256,64,2,176,2", "llama-2g": "32000,2048,16,5632,8"}

ORT_SCRIPT = r'''
import sys, onnx
from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer, DefaultWeightOnlyQuantConfig
src, dst, bits, block = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
m = onnx.load(src)
cfg = DefaultWeightOnlyQuantConfig(block_size=block, is_symmetric=False, accuracy_level=None, bits=bits)
q = MatMulNBitsQuantizer(m, block_size=block, is_symmetric=False, algo_config=cfg)
q.process()
q.model.save_model_to_file(dst, True)
'''


def run_measured(cmd, **kw):
    """wall seconds and peak RSS (MiB) of cmd and its children"""
    t = time.monotonic()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **kw)
    out = p.stdout.read()
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.monotonic() - t
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit("failed: %s\n%s" % (" ".join(cmd), out[-2000:]))
    return wall, ru.ru_maxrss / 1024.0, out


def dir_bytes(d, skip_json=True):
    return sum(os.path.getsize(os.path.join(d, f)) for f in os.listdir(d)
               if not (skip_json and f.endswith(".json")) and os.path.isfile(os.path.join(d, f)))


def logits(path, feeds):
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.log_severity_level = 3
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    s = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    return np.stack([s.run(None, {"input_ids": x})[0] for x in feeds])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quantmake", default=os.path.join(ROOT, "quantmake"))
    ap.add_argument("--shape", default="small")
    ap.add_argument("--bits", type=int, default=4)
    ap.add_argument("--block", type=int, default=32)
    ap.add_argument("--keep", help="work here and keep it (default: a temporary directory)")
    a = ap.parse_args()
    qm = os.path.abspath(a.quantmake)
    vocab, hidden, heads, ffn, layers = (int(x) for x in SHAPES.get(a.shape, a.shape).split(","))
    work = a.keep or tempfile.mkdtemp(prefix="qmwo.")
    os.makedirs(work, exist_ok=True)
    try:
        proj = os.path.join(work, "proj")
        shutil.rmtree(proj, ignore_errors=True)
        os.makedirs(os.path.join(proj, "rules"))
        os.makedirs(os.path.join(proj, "m"))
        src = os.path.join(proj, "m", "dec.onnx")
        t = time.monotonic()
        subprocess.run([sys.executable, os.path.join(ROOT, "tests", "models", "mkdecoder.py"), src, "--vocab",
                        str(vocab), "--hidden", str(hidden), "--heads", str(heads), "--ffn", str(ffn), "--layers",
                        str(layers), "--external"], check=True)
        fbytes = os.path.getsize(src) + os.path.getsize(src + ".data")
        print("model: vocab %d, hidden %d, heads %d, ffn %d, layers %d: %.1f MB of float (made in %.0f s)" %
              (vocab, hidden, heads, ffn, layers, fbytes / 1e6, time.monotonic() - t))
        with open(os.path.join(proj, "rules", "m.rules"), "w") as f:
            f.write("[model q]\nsource = m/dec.onnx\nquantize = weight-only\nquantize.bits = %d\n"
                    "quantize.block-size = %d\nquantize.lm-head-bits = %d\nquantize.embedding-bits = float\n"
                    "quantize.exclude-nodes = layers.0.o_proj\n" % (a.bits, a.block, a.bits))
        env = dict(os.environ, QUANTMAKE_CACHE=os.path.join(proj, "cache"))
        qwall, qrss, qout = run_measured([qm, "-C", proj, "-j2"], env=env)
        stages = re.findall(r"^\[\d+/\d+\] (\S+) q \(([0-9.]+)s\)", qout, re.M)
        qdir = os.path.join(proj, "build", "q")
        qbytes = dir_bytes(qdir)
        odir = os.path.join(work, "ort")
        shutil.rmtree(odir, ignore_errors=True)
        os.makedirs(odir)
        script = os.path.join(work, "ortq.py")
        with open(script, "w") as f:
            f.write(ORT_SCRIPT)
        pylib = os.path.join(work, "pylib")
        if not os.path.isdir(pylib):
            subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", pylib, "onnx-ir",
                            "sympy", "mpmath"], check=True)
        owall, orss, _ = run_measured([sys.executable, script, src, os.path.join(odir, "q.onnx"), str(a.bits),
                                    str(a.block)], env=dict(os.environ, PYTHONPATH=pylib))
        obytes = dir_bytes(odir)
        rng = np.random.default_rng(0)
        feeds = [rng.integers(0, vocab, (1, 16)).astype(np.int64) for _ in range(4)]
        fl = logits(src, feeds)
        res = {}
        for name, path in (("quantmake", os.path.join(qdir, "q.onnx")), ("onnxruntime", os.path.join(odir, "q.onnx"))):
            y = logits(path, feeds)
            res[name] = (float(np.linalg.norm(y - fl) / np.linalg.norm(fl)), float((y.argmax(-1) == fl.argmax(-1)).mean()))
        print("%-12s %9s %10s %12s %10s %8s" % ("tool", "wall s", "peak MiB", "bytes", "rel err", "top-1"))
        for name, wall, rss, nb in (("quantmake", qwall, qrss, qbytes), ("onnxruntime", owall, orss, obytes)):
            print("%-12s %9.2f %10.0f %12d %10.4f %8.3f" % (name, wall, rss, nb, res[name][0], res[name][1]))
        print("quantmake's stages: %s" % ", ".join("%s %s s" % st for st in stages))
        print("ratios quantmake / onnxruntime: wall %.3f, peak RSS %.3f, size %.3f, rel err %.3f" %
              (qwall / owall, qrss / orss, qbytes / obytes, res["quantmake"][0] / res["onnxruntime"][0]))
    finally:
        if not a.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
