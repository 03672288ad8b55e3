"""Quantization against onnxruntime's quantizer, in one run on one machine.

    .venv/bin/python bench/quantize.py [--quantmake ./quantmake] [--samples 100] [--jobs 0] [--keep DIR] [--preprocess] [--repeat 1]
                                       [--models digits,cnn,digits-cnn,digits-vit,fashion-cnn,fashion-vit,
                                                 magika,silero,silero-ifless]

Models:
- digits: the example digits MLP (examples/digits, trained);
- cnn: a synthetic CNN built here with the onnx helper API (3x64x64 input,
  four 3x3 convs with 16/32/64/128 channels, global pooling, a 128x10 Gemm;
  fixed random weights);
- digits-cnn, digits-vit: a CNN and a small transformer trained on
  scikit-learn's 8x8 digits by bench/train-digits.py with Debian's
  python3-torch (cached in bench/.cache);
- fashion-cnn, fashion-vit: a CNN and a small transformer trained on
  Fashion-MNIST (Debian dataset-fashion-mnist: sh scripts/install-deps.sh
  --bench; the bench stops with one line if it is missing) by
  bench/train-fashion.py with Debian's python3-torch (cached in
  bench/.cache); calibrated on training images, scored on the 10,000 test
  images;
- magika, silero, silero-ifless: the models of the PyPI packages magika
  1.0.3 and silero-vad 6.2.3 (bench/fetch-models.sh; silero_vad.onnx, whose
  graph is one If over the sample rate, and silero_vad_op18_ifless.onnx).
For each: static QDQ uint8/int8 from the same calibration set, and dynamic
int8, each tool with its own defaults otherwise (onnxruntime: per tensor;
quantmake: quantize.per-channel = auto). quantmake runs as a whole build
(infer-shapes, calibrate, quantize) in a fresh project and cache with
-j JOBS (default --jobs 0: no -j, so quantmake's default, the CPU count);
onnxruntime runs quantize_static /
quantize_dynamic in a fresh Python process that has imported nothing else
(its thread pools use every core). Wall time, CPU time (user + sys: less
sensitive to other load on the machine than wall time) and peak RSS are
those of the process tree (/usr/bin/time). The static runs are repeated
with 10x the calibration samples to show how memory grows with the
calibration set. Calibration samples are .npz files with one member per
model input, read by both tools.

Fidelity: top-1 on held-out labeled images for the digits and Fashion-MNIST
models (with the SQNR of the logits against float and how often top-1 agrees
with float's); for the others, with no labels, the SQNR of the first output
against the float model's (magika also: how often the top-1 label agrees
with the float model's, over features of files of this machine; silero: 60 s
of sentences spoken by Debian's espeak-ng between silence and noise,
bench/speech.py, run chunk by chunk with its state and 64 samples of
context carried as silero-vad's own wrapper does, also how often the
speech decision at 0.5 agrees with float's; calibrated on other sentences
and voices). A tool that fails on a model is reported with its error
line.
--preprocess runs each tool's graph preprocessing first, timed with the
rest: quantmake's preprocess stage (preprocess = default: constant folding,
identity removal, ...) and onnxruntime's quant_pre_process (onnx shape
inference and onnxruntime's graph optimizer; its symbolic shape inference
is skipped: it needs sympy, which .venv does not have). silero computes
its LSTM weights from Constant nodes (a Slice/Concat gate reordering):
only after folding are they initializers a quantizer can take.
--keep DIR keeps both tools' quantized models (DIR/TAG.quantmake.onnx,
DIR/TAG.ort.onnx) for a tensor-by-tensor comparison.
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
from onnx import TensorProto, helper, numpy_helper

import fashion_mnist
import speech

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PY = sys.executable
MODELS = "digits,cnn,digits-cnn,digits-vit,fashion-cnn,fashion-vit,magika,silero,silero-ifless"


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


def timed(cmd, cwd=None, env=None, log=None):
    """((wall, cpu) seconds, peak RSS MiB, None) of cmd and its children,
    or (None, None, error line) when it fails; log, a list, gets cmd's
    stdout and stderr. The wall time is taken here (GNU time's %e has a
    resolution of 10 ms, more than a small model's whole build); it
    includes starting /usr/bin/time, about 1 ms, for both tools. Dirty
    pages (the calibration sets just written, the last run's outputs) are
    written out first, so the kernel's writeback does not land in either
    tool's time: single builds of 10-30 ms moved by 5-15 ms without it."""
    os.sync()
    t0 = time.monotonic()
    out = subprocess.run(["/usr/bin/time", "-f", "TIME %e %M %U %S"] + cmd, cwd=cwd, env=env,
                         capture_output=True, text=True)
    wall = time.monotonic() - t0
    if log is not None:
        log.append(out.stdout + out.stderr)
    if out.returncode != 0:
        lines = [l for l in (out.stdout + out.stderr).splitlines() if l.strip() and not l.startswith("TIME ")
                 and "Command exited" not in l]
        errs = [l for l in lines if "rror" in l] or lines or ["exit %d" % out.returncode]
        return None, None, errs[-1].strip()[:160]
    line = [l for l in out.stderr.splitlines() if l.startswith("TIME ")][-1].split()
    return (wall, float(line[3]) + float(line[4])), int(line[2]) / 1024.0, None


ORT_SCRIPT = r"""
import sys, glob, numpy as np
from onnxruntime.quantization import (quantize_static, quantize_dynamic, QuantFormat, QuantType,
                                      CalibrationDataReader)
src, dst, mode, act, data, pre = sys.argv[1:7]
if pre == "1":
    from onnxruntime.quantization.shape_inference import quant_pre_process
    quant_pre_process(src, dst + ".pre.onnx", skip_symbolic_shape=True)  # that one needs sympy
    src = dst + ".pre.onnx"
T = {"int8": QuantType.QInt8, "uint8": QuantType.QUInt8}
class R(CalibrationDataReader):
    def __init__(self): self.files = iter(sorted(glob.glob(data + "/*.npz")))
    def get_next(self):
        f = next(self.files, None)
        return None if f is None else dict(np.load(f))
if mode == "static":
    quantize_static(src, dst, R(), quant_format=QuantFormat.QDQ, activation_type=T[act],
                    weight_type=QuantType.QInt8)
else:
    quantize_dynamic(src, dst, weight_type=QuantType.QInt8)
"""


def quantmake(qm, jobs, pre, work, model, mode, act, data, tag, log=None):
    p = os.path.join(work, "qm-" + tag)
    shutil.rmtree(p, ignore_errors=True)
    os.makedirs(p + "/rules")
    shutil.copy(model, p + "/model.onnx")
    os.symlink(data, p + "/calib")
    rules = "[model m]\nsource = model.onnx\n%squantize = %s\n" % ("preprocess = default\n" if pre else "", mode)
    if mode == "static":
        rules += "quantize.calibration = calib\nquantize.activations = %s\n" % act
    open(p + "/rules/m.rules", "w").write(rules)
    env = dict(os.environ, QUANTMAKE_CACHE=p + "/cache")
    t, rss, err = timed([qm, "-C", p] + (["-j%d" % jobs] if jobs else []), env=env, log=log)
    return t, rss, err, p + "/build/m/m.onnx"


def write_calib(dd, gen, n):
    """dd/s00000.npz ... : calibration samples 0 to n-1 of gen; returns dd"""
    os.makedirs(dd)
    for i in range(n):
        np.savez("%s/s%05d.npz" % (dd, i), **gen(i))
    return dd


def peer(work, pre, model, mode, act, data, tag):
    dst = os.path.join(work, "ort-%s.onnx" % tag)
    script = os.path.join(work, "ort_quant.py")
    open(script, "w").write(ORT_SCRIPT)
    t, rss, err = timed([PY, script, model, dst, mode, act, data, "1" if pre else "0"])
    return t, rss, err, dst


def session(path):
    return ort.InferenceSession(path, providers=["CPUExecutionProvider"])


def sqnr(ref, o):
    return 10 * np.log10((ref ** 2).sum() / max(((ref - o) ** 2).sum(), 1e-30))


# ---- models: each gives (onnx path, calibration sample generator, evaluator)
# gen(i) -> {input name: array} for calibration sample i; evaluate(path) ->
# fidelity text


def labeled(x, y, model):
    """top-1 on the labels; for a quantized model also the SQNR of its
    logits against the float model's and how often its top-1 agrees with
    float's (one flipped image is 0.25 points of top-1: the SQNR says
    whether a quantizer is closer to float or was lucky)"""
    def logits(path):
        s = session(path)
        return np.concatenate([s.run(None, {"input": x[i:i + 1000]})[0] for i in range(0, len(x), 1000)])
    ref = logits(model)

    def evaluate(path):
        o = logits(path)
        if path == model:
            return "top-1 %.4f" % (o.argmax(1) == y).mean()
        return "top-1 %.4f, %.1f dB, = float %.4f" % ((o.argmax(1) == y).mean(), sqnr(ref, o),
                                                      (o.argmax(1) == ref.argmax(1)).mean())
    return evaluate


def against_float(model, feeds):
    ref = session(model).run(None, feeds)[0]

    def evaluate(path):
        if path == model:
            return "(reference)"
        return "%.1f dB" % sqnr(ref, session(path).run(None, feeds)[0])
    return evaluate


def digits_data():
    """scikit-learn's digits, split as examples/digits/train.py does"""
    from sklearn.datasets import load_digits
    d = load_digits()
    x = (d.data / 16.0).astype(np.float32)
    y = d.target.astype(np.int64)
    perm = np.random.default_rng(0).permutation(len(x))
    return x[perm][:1400], y[perm][:1400], x[perm][1400:], y[perm][1400:]


def trained(name):
    """bench/.cache/NAME.onnx, trained by bench/train-digits.py or
    bench/train-fashion.py (Debian's python3-torch) if missing"""
    cache = os.path.join(ROOT, "bench/.cache")
    path = os.path.join(cache, name + ".onnx")
    if not os.path.exists(path):
        os.makedirs(cache, exist_ok=True)
        if name.startswith("digits-"):
            xtr, ytr, _, _ = digits_data()
            np.savez(cache + "/digits-train.npz", xtr=xtr, ytr=ytr)
            cmd = [ROOT + "/bench/train-digits.py", cache + "/digits-train.npz", cache]
        else:
            cmd = [ROOT + "/bench/train-fashion.py", cache]
        print("training %s with %s (once; cached in bench/.cache)" % (name, os.path.basename(cmd[0])), file=sys.stderr)
        out = subprocess.run(["/usr/bin/python3"] + cmd, stdout=sys.stderr, stderr=subprocess.PIPE, text=True)
        if out.returncode != 0 or not os.path.exists(path):
            lines = out.stderr.strip().splitlines() or ["exit %d" % out.returncode]
            sys.exit("quantize.py: %s failed: %s" % (os.path.basename(cmd[0]), lines[-1]))
    return path


def magika_features(path):
    """magika 1.0.3's standard_v3_3 input: the first and last 1024 bytes
    (whitespace stripped) of the first and last 4096, padded with 256"""
    with open(path, "rb") as f:
        head = f.read(4096)
        f.seek(max(0, os.path.getsize(path) - 4096))
        tail = f.read(4096)
    beg = list(head.lstrip()[:1024])
    end = list(tail.rstrip()[-1024:]) if tail.rstrip() else []
    v = beg + [256] * (1024 - len(beg)) + [256] * (1024 - len(end)) + end
    return np.array(v, np.int32)[None]


def magika_files():
    files = []
    for d in ("/usr/share/doc", "/usr/bin", "/usr/lib/python3/dist-packages", "/usr/include", "/etc",
              "/usr/share/perl5", "/usr/share/common-licenses"):
        for dp, _, fs in os.walk(d):
            files += [os.path.join(dp, f) for f in fs if os.path.isfile(os.path.join(dp, f))
                      and not os.path.islink(os.path.join(dp, f)) and os.path.getsize(os.path.join(dp, f)) > 0]
    files.sort()
    return files[::max(1, len(files) // 2000)][:2000]


def silero_eval(ref, o):
    """SQNR of the speech probabilities and how often the speech/non-speech
    decision (threshold 0.5, silero-vad's default) agrees with float's"""
    return "%.1f dB, decision = float %.3f" % (sqnr(ref, o), ((o > 0.5) == (ref > 0.5)).mean())


def setup_models(work, names, samples):
    """{name: (model path, gen, evaluate, per-sample note)}"""
    models = {}
    rng = np.random.default_rng(2)
    if ("fashion-cnn" in names or "fashion-vit" in names) and fashion_mnist.missing():
        sys.exit("quantize.py: " + fashion_mnist.missing())
    if ("silero" in names or "silero-ifless" in names) and speech.missing():
        sys.exit("quantize.py: " + speech.missing())
    if "digits" in names:
        path = os.path.join(work, "digits.onnx")
        subprocess.run([PY, ROOT + "/examples/digits/export.py", ROOT + "/examples/digits/weights.npz", path],
                       check=True)
        calib = np.load(ROOT + "/examples/digits/calib.npy")
        test = np.load(ROOT + "/examples/digits/test.npz")
        models["digits"] = (path, lambda i: {"input": calib[i % len(calib)][None]},
                            labeled(test["input"], test["labels"], path))
    if "cnn" in names:
        path = os.path.join(work, "cnn.onnx")
        make_cnn(path)
        xc = rng.standard_normal((32, 3, 64, 64)).astype(np.float32)
        models["cnn"] = (path, lambda i: {"input": np.random.default_rng(100 + i).standard_normal(
            (1, 3, 64, 64)).astype(np.float32)}, against_float(path, {"input": xc}))
    if "digits-cnn" in names or "digits-vit" in names:
        xtr, _, xte, yte = digits_data()
        for name in ("digits-cnn", "digits-vit"):
            if name in names:
                models[name] = (trained(name), lambda i, xtr=xtr: {"input": xtr[i % len(xtr)][None]},
                                labeled(xte, yte, trained(name)))
    if "fashion-cnn" in names or "fashion-vit" in names:
        # calibration: training images in a fixed random order
        xtr, _ = fashion_mnist.load("train")
        xtr = xtr[np.random.default_rng(3).permutation(len(xtr))[:10 * samples]]
        xte, yte = fashion_mnist.load("t10k")
        for name in ("fashion-cnn", "fashion-vit"):
            if name in names:
                models[name] = (trained(name), lambda i, xtr=xtr: {"input": xtr[i % len(xtr)][None]},
                                labeled(xte, yte, trained(name)))
    if "magika" in names or "silero" in names or "silero-ifless" in names:
        d = subprocess.run(["sh", ROOT + "/bench/fetch-models.sh"], capture_output=True, text=True)
        if d.returncode != 0:
            print("magika, silero: bench/fetch-models.sh failed (offline?): %s" % d.stderr.strip()[-200:])
            return models
        d = d.stdout.strip()
    if "magika" in names:
        files = magika_files()
        ev, cal = files[1::2][:300], files[0::2]
        xs = np.concatenate([magika_features(f) for f in ev])
        path = d + "/magika/model.onnx"
        ref = session(path).run(None, {"bytes": xs})[0]

        def evaluate(p, ref=ref, xs=xs, path=path):
            if p == path:
                return "(reference)"
            o = session(p).run(None, {"bytes": xs})[0]
            return "%.1f dB, top-1 = float %.3f" % (sqnr(ref, o), (o.argmax(1) == ref.argmax(1)).mean())
        models["magika"] = (path, lambda i: {"bytes": magika_features(cal[i % len(cal)])}, evaluate)
    for name, file in (("silero", "silero_vad.onnx"), ("silero-ifless", "silero_vad_op18_ifless.onnx")):
        if name not in names:
            continue
        path = d + "/silero/" + file
        # calibration: 32 ms chunks of 60 s of other sentences and voices
        # than the evaluation's, with the state and context the float model
        # carries there, taken 997 chunks apart (mod the count) so that the
        # first N spread over the whole signal
        _, feeds = speech.run(session(path), speech.signal("calib", 60, 5))
        test = speech.signal("eval", 60, 6)
        ref, _ = speech.run(session(path), test)

        def evaluate(p, ref=ref, path=path, test=test):
            if p == path:
                return "(reference: speech in %.2f of chunks)" % (ref > 0.5).mean()
            o, _ = speech.run(session(p), test)
            return silero_eval(ref, o)
        models[name] = (path, lambda i, feeds=feeds: feeds[i * 997 % len(feeds)], evaluate)
    return models


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quantmake", default=os.path.join(ROOT, "quantmake"))
    ap.add_argument("--samples", type=int, default=100)
    ap.add_argument("--jobs", type=int, default=0,
                    help="quantmake -j (default 0: quantmake's own default, the CPU count, as onnxruntime uses every core)")
    ap.add_argument("--keep", help="directory to keep both tools' quantized models in")
    ap.add_argument("--repeat", type=int, default=1,
                    help="run each tool this many times, in turn, and keep each one's fastest run")
    ap.add_argument("--preprocess", action="store_true",
                    help="quantmake's preprocess stage and onnxruntime's quant_pre_process first")
    ap.add_argument("--models", default=MODELS, help="comma-separated, from the default list")
    a = ap.parse_args()
    for name in a.models.split(","):
        if name not in MODELS.split(","):
            sys.exit("quantize.py: --models: unknown model '%s' (expected some of %s)" % (name, MODELS))
    qm = os.path.abspath(a.quantmake)
    ort.set_default_logger_severity(3)
    work = tempfile.mkdtemp(prefix="qmbench-")
    try:
        models = setup_models(work, a.models.split(","), a.samples)
        print("| model | mode | samples | quantmake s | ORT s | speed-up | CPU s quantmake / ORT | quantmake MiB | "
              "ORT MiB | float fidelity | quantmake fidelity | ORT fidelity | size fp32 -> quantmake / ORT |")
        print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
        for name in a.models.split(","):
            if name not in models:
                continue
            model, gen, evaluate = models[name]
            sets = {}
            for mult in (1, 10):
                sets[mult] = write_calib(os.path.join(work, "calib-%s-%d" % (name, mult)), gen, a.samples * mult)
            ffid = evaluate(model)
            for mode, act, mult in (("static", "uint8", 1), ("static", "uint8", 10), ("static", "int8", 1),
                                    ("static", "int8", 10), ("dynamic", "-", 1)):
                tag = "%s-%s-%s-%d" % (name, mode, act, mult)
                # --repeat: both tools in turn, each one's fastest run kept
                best_q = best_p = None
                for _ in range(a.repeat):
                    rq_ = quantmake(qm, a.jobs, a.preprocess, work, model, mode, act, sets[mult], tag)
                    rp_ = peer(work, a.preprocess, model, mode, act, sets[mult], tag)
                    if best_q is None or (rq_[0] and best_q[0] and rq_[0][0] < best_q[0][0]):
                        best_q = rq_
                    if best_p is None or (rp_[0] and best_p[0] and rp_[0][0] < best_p[0][0]):
                        best_p = rp_
                tq, rq, eq, oq = best_q
                tp, rp, ep, op = best_p
                n = a.samples * mult if mode == "static" else 0
                cell = lambda v, e, f: ("failed: " + e) if e else f % v

                def fid(path, err):
                    if err:
                        return "-"
                    try:
                        return evaluate(path)
                    except Exception as e:  # a model the runtime refuses
                        return "runs not in ORT: %s" % str(e).splitlines()[0][:100]
                if a.keep:
                    os.makedirs(a.keep, exist_ok=True)
                    for path, err, who in ((oq, eq, "quantmake"), (op, ep, "ort")):
                        if not err:
                            shutil.copy(path, os.path.join(a.keep, "%s.%s.onnx" % (tag, who)))
                size = "%d -> %s / %s" % (os.path.getsize(model), "-" if eq else os.path.getsize(oq),
                                          "-" if ep else os.path.getsize(op))
                print("| %s | %s %s | %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
                    name, mode, act if mode == "static" else "int8", n, cell(tq and tq[0], eq, "%.3f"),
                    cell(tp and tp[0], ep, "%.3f"), "%.1fx" % (tp[0] / tq[0]) if tq and tp and tq[0] else "-",
                    "%.2f / %.2f" % (tq[1], tp[1]) if tq and tp else "-", "-" if eq else "%.0f" % rq,
                    "-" if ep else "%.0f" % rp, ffid, fid(oq, eq), fid(op, ep), size))
                sys.stdout.flush()
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
