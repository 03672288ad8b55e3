"""quantize = fp16 against onnxruntime's float16 converter, in one run.

    .venv/bin/python bench/fp16.py [--quantmake obj/release/quantmake] [--keep-io]

Models: the digits MLP (examples/digits), the CNN and the transformer of
tests/models, and the silero-vad and magika models of bench/fetch-models.sh
(skipped when not fetched). quantmake runs as a whole build (infer-shapes,
quantize) in a fresh project and cache; onnxruntime's
onnxruntime.transformers.float16.convert_float_to_float16 (the maintained
fork of onnxconverter-common's converter, with its defaults) runs in-process
on the loaded model, the time of the call alone. Both with keep_io_types
when --keep-io is given. Reported: wall time, output size, and the SQNR of
every output of the float16 model run by onnxruntime (CPU) against the float
model on the same random (or, for digits, held-out) inputs; the worst output
counts. A tool that fails on a model is reported with its error line.
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnx
import onnxruntime as ort
from onnxruntime.transformers.float16 import convert_float_to_float16

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ort.set_default_logger_severity(3)


def models(tmp):
    """(name, path, feed) for every model available here"""
    rng = np.random.default_rng(0)
    ex = os.path.join(ROOT, "examples", "digits")
    digits = os.path.join(tmp, "digits.onnx")
    subprocess.run([sys.executable, os.path.join(ex, "export.py"), os.path.join(ex, "weights.npz"), digits],
                   check=True)
    yield "digits", digits, {"input": np.load(os.path.join(ex, "test.npz"))["input"][:256]}
    yield "cnn", os.path.join(ROOT, "tests", "models", "cnn.onnx"), {
        "image": rng.standard_normal((32, 1, 16, 16)).astype(np.float32)}
    yield "transformer", os.path.join(ROOT, "tests", "models", "transformer.onnx"), {
        "tokens": rng.integers(0, 10, (16, 12)).astype(np.int64)}
    d = subprocess.run(["sh", os.path.join(ROOT, "bench", "fetch-models.sh")], capture_output=True,
                       text=True).stdout.strip().splitlines()
    d = d[-1] if d else ""
    sil, mag = os.path.join(d, "silero_vad.onnx"), os.path.join(d, "magika_standard_v3_3.onnx")
    if os.path.exists(sil):
        yield "silero", sil, {"input": (rng.standard_normal((1, 512)) * 0.1).astype(np.float32),
                              "state": np.zeros((2, 1, 128), np.float32), "sr": np.array(16000, np.int64)}
    if os.path.exists(mag):
        yield "magika", mag, {"bytes": rng.integers(0, 257, (4, 2048)).astype(np.int32)}


def sqnr(a, b):
    a, b = a.astype(np.float64), b.astype(np.float64)
    e = ((a - b) ** 2).sum()
    return float("inf") if e == 0 else 10 * np.log10((a ** 2).sum() / e)


def fidelity(path, src, feed):
    ref = ort.InferenceSession(src, providers=["CPUExecutionProvider"]).run(None, feed)
    s = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    f = {i.name: feed[i.name].astype(np.float16) if i.type == "tensor(float16)" else feed[i.name]
         for i in s.get_inputs()}
    return min(sqnr(a, b) for a, b in zip(ref, s.run(None, f)))


def run_quantmake(qm, tmp, name, src, keep_io):
    p = os.path.join(tmp, "qm-" + name)
    os.makedirs(os.path.join(p, "rules"))
    shutil.copy(src, os.path.join(p, "m.onnx"))
    with open(os.path.join(p, "rules", "m.rules"), "w") as f:
        f.write("[model m]\nsource = m.onnx\nquantize = fp16\n")
        if keep_io:
            f.write("quantize.keep-io-types = true\n")
    t = time.perf_counter()
    r = subprocess.run([qm, "-C", p, "-j1"], capture_output=True, text=True)
    wall = time.perf_counter() - t
    if r.returncode:
        return None, wall, (r.stderr.strip().splitlines() or ["?"])[-1]
    return os.path.join(p, "build", "m", "m.onnx"), wall, None


def run_ort(tmp, name, src, keep_io):
    m = onnx.load(src)
    t = time.perf_counter()
    try:
        h = convert_float_to_float16(m, keep_io_types=keep_io)
    except Exception as e:  # reported, not fatal
        return None, time.perf_counter() - t, str(e).splitlines()[0][:120]
    wall = time.perf_counter() - t
    out = os.path.join(tmp, "ort-%s.onnx" % name)
    onnx.save(h, out)
    return out, wall, None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quantmake", default=os.path.join(ROOT, "quantmake"))
    ap.add_argument("--keep-io", action="store_true")
    a = ap.parse_args()
    qm = os.path.abspath(a.quantmake)
    tmp = tempfile.mkdtemp(prefix="qm-fp16-")
    try:
        print("%-12s %-10s %9s %11s %11s  %s" % ("model", "tool", "time s", "bytes", "SQNR dB", "note"))
        for name, src, feed in models(tmp):
            print("%-12s %-10s %9s %11d %11s" % (name, "float", "", os.path.getsize(src), ""))
            for tool, fn in (("quantmake", lambda: run_quantmake(qm, tmp, name, src, a.keep_io)),
                             ("ort", lambda: run_ort(tmp, name, src, a.keep_io))):
                out, wall, err = fn()
                if err:
                    print("%-12s %-10s %9.3f %11s %11s  failed: %s" % (name, tool, wall, "-", "-", err))
                    continue
                try:
                    q = "%.1f" % fidelity(out, src, feed)
                    note = ""
                except Exception as e:  # a model onnxruntime refuses is a result too
                    q, note = "-", "onnxruntime: " + str(e).splitlines()[0][:100]
                print("%-12s %-10s %9.3f %11d %11s  %s" % (name, tool, wall, os.path.getsize(out), q, note))
    finally:
        shutil.rmtree(tmp)


if __name__ == "__main__":
    main()
