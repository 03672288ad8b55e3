"""Static int8 on BERT-style encoders against onnxruntime's quantize_static,
in one run on one machine.

    .venv/bin/python bench/encoder.py [--quantmake ./quantmake] [--jobs 2] [--samples 100,1000]
                                      [--layers 6] [--width 384] [--keep DIR]

Models (tests/models/mkencoder.py, written node by node as torch.onnx.export
writes Hugging Face's BertModel, random weights with a few outlier
channels; 6 layers of width 384 by default, the size of the issue's
sentence encoder):
- o14: opset 14, mask (1 - mask) * finfo(float32).min, LayerNorm
  decomposed, GELU through Erf;
- o14-10k-tanh: opset 14, mask * -10000, tanh GELU;
- o17: opset 17, LayerNormalization.
Data: byte-level tokens of sentences from /usr/share/common-licenses, 64
tokens with padding (so the mask matters): 300 sentences to score on, and
calibration sets of the first N of the others (--samples), one .npz
per sentence, read by both tools.

Each tool with its defaults: quantmake as a whole build in a fresh project
and cache (infer-shapes, calibrate, quantize; quantize = static, which on
these models applies quantize.preset = transformer), onnxruntime's
quantize_static (QDQ, uint8 activations, int8 weights, MinMax) in a fresh
Python process. Wall time, CPU time and peak RSS of the process tree
(/usr/bin/time, bench/quantize.py's timed()). Fidelity: the cosine between
the float and the quantized model's mean-pooled embeddings (padding left
out), mean and worst over the 300 sentences, both run by onnxruntime.
"""
import argparse
import os
import shutil
import sys
import tempfile

import numpy as np
import onnx
import onnxruntime as ort

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "models"))
import mkencoder  # noqa: E402
from quantize import peer, quantmake  # noqa: E402

MODELS = {
    "o14": dict(opset=14, gelu="erf", mask=float(np.finfo(np.float32).min)),
    "o14-10k-tanh": dict(opset=14, gelu="tanh", mask=-10000.0),
    "o17": dict(opset=17, gelu="erf", mask=float(np.finfo(np.float32).min)),
}
TEST = 300


def cosine(ref_path, path, feeds, m):
    ort.set_default_logger_severity(3)
    pool = lambda p: ((lambda y: (y * m).sum(1) / m.sum(1))(
        ort.InferenceSession(p, providers=["CPUExecutionProvider"]).run(None, feeds)[0]))
    a, b = pool(ref_path), pool(path)
    c = (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)
    return c.mean(), c.min()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quantmake", default=os.path.join(ROOT, "quantmake"))
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--samples", default="100,1000")
    ap.add_argument("--layers", type=int, default=6)
    ap.add_argument("--width", type=int, default=384)
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--keep")
    a = ap.parse_args()
    qm = os.path.abspath(a.quantmake)
    ns = [int(x) for x in a.samples.split(",")]
    work = a.keep or tempfile.mkdtemp(prefix="qm-encoder-")
    os.makedirs(work, exist_ok=True)
    sents = mkencoder.sentences()
    order = np.random.default_rng(1).permutation(len(sents))
    if len(order) < TEST + max(ns):
        sys.exit("only %d sentences in /usr/share/common-licenses: at most --samples %d"
                 % (len(order), len(order) - TEST))
    ids, mask = mkencoder.tokens([sents[i] for i in order[: TEST + max(ns)]])
    feeds = {"input_ids": ids[:TEST], "attention_mask": mask[:TEST]}
    m = mask[:TEST, :, None].astype(np.float32)
    for n in ns:
        d = os.path.join(work, "calib%d" % n)
        if not os.path.isdir(d):
            os.makedirs(d)
            for i in range(n):
                k = TEST + i
                np.savez("%s/s%05d.npz" % (d, i), input_ids=ids[k: k + 1], attention_mask=mask[k: k + 1])
    print("machine: %d CPUs; quantmake -j%d; %d layers, width %d; %d test sentences"
          % (os.cpu_count(), a.jobs, a.layers, a.width, TEST))
    print("%-14s %6s %-9s %8s %8s %7s %7s %8s" % ("model", "calib", "tool", "cos", "worst", "wall s", "cpu s",
                                                    "RSS MiB"))
    for name in a.models.split(","):
        cfg = MODELS[name]
        model = os.path.join(work, name + ".onnx")
        onnx.save(mkencoder.build(cfg["opset"], cfg["gelu"], cfg["mask"], a.layers, a.width), model)
        for n in ns:
            data = os.path.join(work, "calib%d" % n)
            tag = "%s-%d" % (name, n)
            rows = []
            t, rss, err, out = quantmake(qm, a.jobs, False, work, model, "static", "uint8", data, tag)
            rows.append(("quantmake", t, rss, err, out))
            t, rss, err, out = peer(work, False, model, "static", "uint8", data, tag)
            rows.append(("ort", t, rss, err, out))
            for tool, t, rss, err, out in rows:
                if err:
                    print("%-14s %6d %-9s failed: %s" % (name, n, tool, err))
                    continue
                c, w = cosine(model, out, feeds, m)
                print("%-14s %6d %-9s %8.4f %8.4f %7.2f %7.2f %8.0f" % (name, n, tool, c, w, t[0], t[1], rss))
            sys.stdout.flush()
    if not a.keep:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
