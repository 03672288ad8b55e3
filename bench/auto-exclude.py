#!/usr/bin/env python3
"""verify.auto-exclude, two quantmake binaries side by side:

    .venv/bin/python bench/auto-exclude.py BEFORE AFTER [--models ol,ol2,old,chain,fashion-cnn,magika] [--jobs 1]

For every model, a temporary project is quantized once (calibrate and
quantize cached, verify with no gate), then verify runs again with a gate
plain int8 fails and verify.auto-exclude = N, once per binary: the rounds
measured (and undone), the changes not measured because they quantize the
model as before (AFTER only), the nodes left in float, the final SQNR and
whether the gates pass, and the CPU time (user + sys of the verify run,
children included) and wall time. The models:

- ol, ol2, old: tests/t_verify.sh's digits MLP with an outlier weight in
  fc2 (and fc1: ol2), static per-tensor (dynamic: old); min-sqnr 30
  (and max-top1-drop 1 with labels), N = 3, 4, 2.
- chain: tests/t_verify_exclude.sh's MatMul, Reshape, Transpose, Reshape,
  MatMul with a 60x channel between them; min-sqnr 40, N = 6.
- fashion-cnn: bench/.cache's CNN (bench/quantize.py trains it), 200
  Fashion-MNIST training images to calibrate, 300 test images; min-sqnr 47,
  N = 8.
- magika: magika 1.0.3 (bench/fetch-models.sh) on bench/quantize.py's
  files, 60 to calibrate, 60 to compare; min-sqnr 35, N = 8.
"""
import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT + "/bench")
PY = sys.executable


def digits_ol(d, outliers, mode):
    ex = ROOT + "/examples/digits"
    for f in ("export.py", "calib.npy", "test.npz"):
        shutil.copy(os.path.join(ex, f), d)
    w = dict(np.load(ex + "/weights.npz"))
    for k in outliers:
        w[k] = w[k].copy()
        w[k][0, 0] = np.abs(w[k]).max() * 60
    np.savez(d + "/weights.npz", **w)
    subprocess.run([PY, d + "/export.py", d + "/weights.npz", d + "/m.onnx"], check=True)
    if mode == "dynamic":
        return "quantize = dynamic\n", "verify.data = test.npz\nverify.min-sqnr = 30\n"
    return ("quantize = static\nquantize.per-channel = false\nquantize.calibration = calib.npy\n",
            "verify.data = test.npz\nverify.labels = labels\nverify.min-sqnr = 30\nverify.max-top1-drop = 1\n")


def chain(d):
    src = open(ROOT + "/tests/t_verify_exclude.sh").read()
    code = src[src.index("import sys, numpy"):src.index("\nPY\n")]
    subprocess.run([PY, "-c", code, d], check=True)
    os.rename(d + "/chain.onnx", d + "/m.onnx")
    return ("quantize = static\nquantize.calibration = calib.npy\n",
            "verify.data = test.npz\nverify.min-sqnr = 40\n")


def fashion(d):
    import fashion_mnist
    src = ROOT + "/bench/.cache/fashion-cnn.onnx"
    if fashion_mnist.missing() or not os.path.exists(src):
        return None
    shutil.copy(src, d + "/m.onnx")
    xtr, _ = fashion_mnist.load("train")
    xte, _ = fashion_mnist.load("t10k")
    np.save(d + "/calib.npy", xtr[np.random.default_rng(3).permutation(len(xtr))[:200]])
    np.savez(d + "/test.npz", input=xte[:300])
    return ("quantize = static\nquantize.calibration = calib.npy\n",
            "verify.data = test.npz\nverify.min-sqnr = 47\n")


def magika(d):
    import quantize
    r = subprocess.run(["sh", ROOT + "/bench/fetch-models.sh"], capture_output=True, text=True)
    if r.returncode:
        return None
    shutil.copy(r.stdout.strip() + "/magika/model.onnx", d + "/m.onnx")
    files = quantize.magika_files()
    os.mkdir(d + "/cal")
    for i, f in enumerate(files[0::2][:60]):
        np.savez("%s/cal/%03d.npz" % (d, i), bytes=quantize.magika_features(f))
    np.savez(d + "/test.npz", bytes=np.concatenate([quantize.magika_features(f) for f in files[1::2][:60]]))
    return ("quantize = static\nquantize.calibration = cal/*.npz\n",
            "verify.data = test.npz\nverify.min-sqnr = 35\n")


MODELS = {
    "ol": (lambda d: digits_ol(d, ["w2"], "static"), 3),
    "ol2": (lambda d: digits_ol(d, ["w2", "w1"], "static"), 4),
    "old": (lambda d: digits_ol(d, ["w2"], "dynamic"), 2),
    "chain": (chain, 6),
    "fashion-cnn": (fashion, 8),
    "magika": (magika, 8),
}


def rules(d, quant, verify):
    with open(d + "/rules/m.rules", "w") as f:
        f.write("[model m]\nsource = m.onnx\n" + quant + verify)


JOBS = 1  # quantmake -j (--jobs)


def run(qm, d):
    """(exit status, CPU seconds of quantmake and its children, wall seconds)"""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    r = subprocess.run([qm, "-C", d, "-j%d" % JOBS], capture_output=True, text=True)
    wall = time.monotonic() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    return r.returncode, cpu, wall, r.stdout + r.stderr


def report(d, st):
    """verify.json of the run: a failed one is kept in build/m/failed/"""
    p = os.path.join(d, "build/m/failed/verify/verify.json" if st else "build/m/verify.json")
    return json.load(open(p)) if os.path.exists(p) else None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("before")
    ap.add_argument("after")
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--keep", metavar="DIR", help="build the projects in DIR/MODEL and keep them")
    ap.add_argument("--jobs", type=int, default=1,
                    help="quantmake -j (default 1: one thread, so the CPU column compares work)")
    a = ap.parse_args()
    global JOBS
    JOBS = a.jobs
    print("load average: %.2f %.2f %.2f" % os.getloadavg())
    print("%-12s %-6s %6s %6s %6s %6s %9s %6s %8s %7s" % ("model", "binary", "rounds", "undone", "unmeas",
                                                        "nodes", "SQNR dB", "gates", "CPU s", "wall s"))
    for name in a.models.split(","):
        make, n = MODELS[name]
        with tempfile.TemporaryDirectory(prefix="qm-autoex-") as tmp:
            work = os.path.join(a.keep, name) if a.keep else tmp
            src = work + "/src"
            os.makedirs(src + "/rules")
            got = make(src)
            if not got:
                print("%-12s skipped: model or data not available" % name)
                continue
            quant, verify = got
            for tag, qm in (("before", a.before), ("after", a.after)):
                d = work + "/" + tag
                shutil.copytree(src, d)
                rules(d, quant, "verify.data = " + verify.split("verify.data = ")[1].split("\n")[0] +
                      "\nverify.min-sqnr = off\n")
                st, _, _, out = run(qm, d)
                if st:
                    sys.exit("%s: %s: the plain build failed: %s" % (name, tag, out.strip()[-300:]))
                rules(d, quant, verify + "verify.auto-exclude = %d\n" % n)
                st, cpu, wall, out = run(qm, d)
                r = report(d, st)
                ax = r and r.get("auto_exclude")
                if a.keep:
                    with open(d + "/log", "w") as f:
                        f.write(out)
                if not ax:
                    print("%-12s %-6s no auto-exclusion report (exit %d): %s" % (name, tag, st, out.strip()[-200:]))
                    continue
                rounds = ax["rounds"][1:]
                undone = sum(1 for x in rounds if not x["kept"])
                print("%-12s %-6s %6d %6d %6d %6d %9.2f %6s %8.2f %7.2f" % (
                    name, tag, len(rounds), undone, len(ax.get("unchanged", [])), len(ax["excluded"]),
                    r["outputs"][0]["sqnr_db"], "pass" if r["passed"] else "fail", cpu, wall))
    print("load average: %.2f %.2f %.2f" % os.getloadavg())


if __name__ == "__main__":
    main()
