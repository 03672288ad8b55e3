"""Quantization against onnxruntime's quantizer, in one run on one machine.

    .venv/bin/python bench/quantize.py [--quantmake obj/quant/quantmake] [--samples 100]

Models: the example digits MLP (examples/digits, trained) and a synthetic
CNN built here with the onnx helper API (3x64x64 input, four 3x3 convs with
16/32/64/128 channels, global pooling, a 128x10 Gemm; fixed random weights).
For each: static QDQ uint8/int8 (per tensor) from the same calibration set,
and dynamic int8. quantmake runs as a whole build (infer-shapes, calibrate,
quantize) in a fresh project and cache; onnxruntime runs quantize_static /
quantize_dynamic in a fresh Python process that has imported nothing else.
Wall time and peak RSS are those of the process tree (/usr/bin/time).
The static runs are repeated with 10x the calibration samples to show how
memory grows with the calibration set. Fidelity: top-1 on test.npz for the
digits model, SQNR of the outputs against the float model for the CNN.
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PY = sys.executable


def make_cnn(path):
    r = np.random.default_rng(1)
    inits, nodes, prev, cin = [], [], "input", 3
    for i, cout in enumerate((16, 32, 64, 128)):
        w = (r.standard_normal((cout, cin, 3, 3)) * np.sqrt(2.0 / (cin * 9))).astype(np.float32)
        b = (r.standard_normal(cout) * 0.05).astype(np.float32)
        inits += [numpy_helper.from_array(w, "w%d" % i), numpy_helper.from_array(b, "b%d" % i)]
        nodes.append(helper.make_node("Conv", [prev, "w%d" % i, "b%d" % i], ["c%d" % i], name="conv%d" % i,
                                      kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[2, 2] if i else [1, 1]))
        nodes.append(helper.make_node("Relu", ["c%d" % i], ["r%d" % i], name="relu%d" % i))
        prev, cin = "r%d" % i, cout
    nodes.append(helper.make_node("GlobalAveragePool", [prev], ["gap"], name="gap"))
    nodes.append(helper.make_node("Flatten", ["gap"], ["flat"], name="flatten"))
    inits += [numpy_helper.from_array((r.standard_normal((10, 128)) * 0.1).astype(np.float32), "fw"),
              numpy_helper.from_array(np.zeros(10, np.float32), "fb")]
    nodes.append(helper.make_node("Gemm", ["flat", "fw", "fb"], ["logits"], name="fc", transB=1))
    g = helper.make_graph(nodes, "cnn", [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["N", 3, 64, 64])],
                          [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", 10])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 7
    onnx.save(m, path)


def timed(cmd, cwd=None, env=None):
    """(wall seconds, peak RSS MiB) of cmd and its children"""
    out = subprocess.run(["/usr/bin/time", "-f", "TIME %e %M"] + cmd, cwd=cwd, env=env,
                         capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit("failed: %s\n%s" % (" ".join(cmd), out.stderr[-2000:]))
    line = [l for l in out.stderr.splitlines() if l.startswith("TIME ")][-1].split()
    return float(line[1]), int(line[2]) / 1024.0


ORT_SCRIPT = r'''
import sys, glob, numpy as np
from onnxruntime.quantization import (quantize_static, quantize_dynamic, QuantFormat, QuantType,
                                      CalibrationDataReader)
src, dst, mode, act, data = sys.argv[1:6]
T = {"int8": QuantType.QInt8, "uint8": QuantType.QUInt8}
class R(CalibrationDataReader):
    def __init__(self): self.files = iter(sorted(glob.glob(data + "/*.npy")))
    def get_next(self):
        f = next(self.files, None)
        return None if f is None else {"input": np.load(f)}
if mode == "static":
    quantize_static(src, dst, R(), quant_format=QuantFormat.QDQ, activation_type=T[act],
                    weight_type=QuantType.QInt8)
else:
    quantize_dynamic(src, dst, weight_type=QuantType.QInt8)
'''


def quantmake(qm, work, model, mode, act, data, tag):
    p = os.path.join(work, "qm-" + tag)
    shutil.rmtree(p, ignore_errors=True)
    os.makedirs(p + "/rules")
    shutil.copy(model, p + "/model.onnx")
    os.symlink(data, p + "/calib")
    rules = "[model m]\nsource = model.onnx\nquantize = %s\n" % mode
    if mode == "static":
        rules += "quantize.calibration = calib\nquantize.activations = %s\n" % act
    open(p + "/rules/m.rules", "w").write(rules)
    env = dict(os.environ, QUANTMAKE_CACHE=p + "/cache")
    t, rss = timed([qm, "-C", p, "-j1"], env=env)
    return t, rss, p + "/build/m/m.onnx"


def peer(work, model, mode, act, data, tag):
    dst = os.path.join(work, "ort-%s.onnx" % tag)
    script = os.path.join(work, "ort_quant.py")
    open(script, "w").write(ORT_SCRIPT)
    t, rss = timed([PY, script, model, dst, mode, act, data])
    return t, rss, dst


def outputs(path, x):
    s = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    return s.run(None, {"input": x})[0]


def sqnr(ref, o):
    return 10 * np.log10((ref ** 2).sum() / max(((ref - o) ** 2).sum(), 1e-30))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quantmake", default=os.path.join(ROOT, "obj/quant/quantmake"))
    ap.add_argument("--samples", type=int, default=100)
    a = ap.parse_args()
    qm = os.path.abspath(a.quantmake)
    ort.set_default_logger_severity(3)
    work = tempfile.mkdtemp(prefix="qmbench-")
    try:
        digits = os.path.join(work, "digits.onnx")
        subprocess.run([PY, ROOT + "/examples/digits/export.py", ROOT + "/examples/digits/weights.npz", digits],
                       check=True)
        cnn = os.path.join(work, "cnn.onnx")
        make_cnn(cnn)
        rng = np.random.default_rng(2)
        calib = np.load(ROOT + "/examples/digits/calib.npy")
        test = np.load(ROOT + "/examples/digits/test.npz")
        sets = {}
        for name, n, gen in (("digits", a.samples, lambda i: calib[i % len(calib)][None]),
                             ("cnn", a.samples, lambda i: rng.standard_normal((1, 3, 64, 64)).astype(np.float32))):
            for mult in (1, 10):
                d = os.path.join(work, "calib-%s-%d" % (name, mult))
                os.makedirs(d)
                for i in range(n * mult):
                    np.save("%s/s%05d.npy" % (d, i), gen(i))
                sets[name, mult] = d
        xc = rng.standard_normal((32, 3, 64, 64)).astype(np.float32)
        print("| model | mode | samples | quantmake s | ORT s | speed-up | quantmake MiB | ORT MiB | "
              "quantmake fidelity | ORT fidelity | size fp32 -> quantmake / ORT |")
        print("|---|---|---|---|---|---|---|---|---|---|---|")
        for name, model in (("digits", digits), ("cnn", cnn)):
            if name == "digits":
                x, fid = test["input"], lambda o: "top-1 %.4f" % (o.argmax(1) == test["labels"]).mean()
            else:
                ref = outputs(model, xc)
                x, fid = xc, lambda o: "%.1f dB" % sqnr(ref, o)
            for mode, act, mult in (("static", "uint8", 1), ("static", "uint8", 10), ("static", "int8", 1),
                                    ("dynamic", "-", 1)):
                data = sets[name, mult]
                tag = "%s-%s-%s-%d" % (name, mode, act, mult)
                tq, rq, oq = quantmake(qm, work, model, mode, act, data, tag)
                tp, rp, op = peer(work, model, mode, act, data, tag)
                n = a.samples * mult if mode == "static" else 0
                size = "%d -> %d / %d" % (os.path.getsize(model), os.path.getsize(oq), os.path.getsize(op))
                print("| %s | %s %s | %d | %.2f | %.2f | %.1fx | %.0f | %.0f | %s | %s | %s |" % (
                    name, mode, act if mode == "static" else "int8", n, tq, tp, tp / tq, rq, rp,
                    fid(outputs(oq, x)), fid(outputs(op, x)), size))
                sys.stdout.flush()
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
