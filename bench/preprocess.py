"""Preprocess: quantmake's `preprocess = default` stage against onnxsim
(onnxsim.simplify, PyPI `onnxsim`, installed into .venv from
bench/requirements.txt when missing) and onnxruntime's ORT_ENABLE_BASIC
optimizer (optimized_model_filepath output) on the same models: total node
count after (subgraphs included), wall time, peak RSS, and whether each
result still gives the original's outputs (onnxruntime, random inputs,
rtol/atol 1e-5).

    .venv/bin/python bench/preprocess.py [--quantmake ./quantmake] [--reps 5]

Times, best of --reps: quantmake's is the preprocess stage alone as its
build log reports it (load, passes, shape inference of the result, fsync'd
save; 10 ms resolution), and the whole `quantmake` build of a one-model
project (process start, infer-shapes, preprocess, cache store) as a second
column; onnxsim's is onnx.load + simplify (include_subgraph=True, no
checking) + onnx.save, ORT's InferenceSession creation with
optimized_model_filepath (load, optimize, save, plus its session setup),
both timed inside a Python process that has already imported them. Peak RSS
is the whole process's (wait4 of a fresh process per run; for the peers
that includes Python and the library, for quantmake its build children).

Models: tests/models (cnn, transformer), the silero-vad and magika models
that bench/fetch-models.sh puts in tests/.cache/models (if present), the
examples/digits MLP, and an opset-9 CNN with unfolded BatchNormalization,
Identity/Dropout and constant subgraphs built here with the onnx helper API.
"""
import argparse
import glob
import json
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


def one(tool, src, dst):
    """child mode: run one peer once, print its time in seconds"""
    if tool == "onnxsim":
        import onnxsim
        t = time.perf_counter()
        try:
            m, _ = onnxsim.simplify(onnx.load(src), check_n=0, include_subgraph=True)
        except Exception:
            # onnxsim 0.8.1 fails on some If bodies: its main-graph-only mode
            t = time.perf_counter()
            m, _ = onnxsim.simplify(onnx.load(src), check_n=0, include_subgraph=False)
            print("main graph only", file=sys.stderr)
        onnx.save(m, dst)
    else:
        so = ort.SessionOptions()
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
        so.optimized_model_filepath = dst
        so.log_severity_level = 4
        t = time.perf_counter()
        ort.InferenceSession(src, so, providers=["CPUExecutionProvider"])
    print(json.dumps({"t": time.perf_counter() - t}))


if len(sys.argv) == 5 and sys.argv[1] == "--one":
    one(*sys.argv[2:])
    sys.exit(0)

ap = argparse.ArgumentParser()
ap.add_argument("--quantmake", default=os.path.join(root, "quantmake"))
ap.add_argument("--reps", type=int, default=5)
args = ap.parse_args()
qm = os.path.abspath(args.quantmake)
tmp = tempfile.mkdtemp(prefix="qm-prep-bench.")
try:
    import onnxsim
except ImportError:
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--only-binary=:all:", "-r",
                    os.path.join(here, "requirements.txt")], check=True)
    import onnxsim


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
fetched = subprocess.run(["sh", os.path.join(here, "fetch-models.sh")], capture_output=True, text=True)
if fetched.returncode == 0:
    d = fetched.stdout.strip()
    models += [os.path.join(d, "magika", "model.onnx")]
    models += [os.path.join(d, "silero", f) for f in ("silero_vad.onnx", "silero_vad_16k_op15.onnx",
                                                       "silero_vad_half.onnx", "silero_vad_op18_ifless.onnx")]
else:
    print("bench/fetch-models.sh failed (offline?): magika and silero-vad left out", file=sys.stderr)
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


def run_rss(argv, env=None):
    """run argv: (exit code, output, wall seconds, peak RSS in MiB). The RSS
    comes from GNU time (/usr/bin/time, Debian package time): ru_maxrss of a
    child forked from this big Python process would count the parent's pages
    it had before exec."""
    rssf = os.path.join(tmp, "rss")
    gtime = os.path.exists("/usr/bin/time")
    cmd = ["/usr/bin/time", "-f", "%M", "-o", rssf] + argv if gtime else argv
    t = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    dt = time.perf_counter() - t
    mb = float("nan")
    if gtime and r.returncode == 0:
        with open(rssf) as f:
            mb = int(f.read().split()[-1]) / 1024
    return r.returncode, r.stdout + r.stderr, dt, mb


def run_quantmake(path):
    name = re.sub(r"[^A-Za-z0-9_]", "_", os.path.basename(path)[:-5])
    p = os.path.join(tmp, "proj-" + name)
    best_stage = best_all = rss = None
    for _ in range(args.reps):
        shutil.rmtree(p, ignore_errors=True)
        os.makedirs(os.path.join(p, "rules"))
        os.makedirs(os.path.join(p, "models"))
        shutil.copy(path, os.path.join(p, "models", name + ".onnx"))
        with open(os.path.join(p, "rules", "m.rules"), "w") as f:
            f.write(f"[model {name}]\nsource = models/{name}.onnx\npreprocess = default\n")
        env = dict(os.environ, QUANTMAKE_CACHE=os.path.join(p, "cache"))
        rc, out, dt, mb = run_rss([qm, "-C", p], env)
        if rc != 0:
            raise SystemExit(f"quantmake failed on {name}: {out.strip()[-300:]}")
        m = re.search(r"\] preprocess \S+ \(([0-9.]+)s\)", out)
        st = float(m.group(1)) if m else float("nan")
        best_stage = st if best_stage is None else min(best_stage, st)
        best_all = dt if best_all is None else min(best_all, dt)
        rss = mb if rss is None else max(rss, mb)
    return os.path.join(p, "build", name, name + ".onnx"), best_stage, best_all, rss


out_note = set()  # models onnxsim simplified without their subgraphs


def run_peer(tool, path):
    out = os.path.join(tmp, tool + "-" + os.path.basename(path))
    best = rss = None
    for _ in range(args.reps):
        rc, txt, _, mb = run_rss([sys.executable, os.path.abspath(__file__), "--one", tool, path, out])
        if rc != 0:
            print(f"{tool} failed on {os.path.basename(path)}: {txt.strip().splitlines()[-1][:200]}", file=sys.stderr)
            return None, float("nan"), float("nan")
        dt = json.loads(txt.strip().splitlines()[-1])["t"]
        if "main graph only" in txt:
            out_note.add(os.path.basename(path))
        best = dt if best is None else min(best, dt)
        rss = mb if rss is None else max(rss, mb)
    return out, best, rss


print(time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "load average %.2f %.2f %.2f" % os.getloadavg(),
      f"onnxruntime {ort.__version__}, onnxsim {onnxsim.__version__}, best of {args.reps}")
print(f"{'model':28} {'nodes':>5} {'qm':>5} {'sim':>5} {'ort':>5} {'qm stage':>8} {'qm build':>8} {'sim':>8} {'ort':>8}"
      f" {'qm MiB':>6} {'sim MiB':>7} {'ort MiB':>7}  same(qm/sim/ort)")
for path in models:
    name = os.path.basename(path)
    if name == "model.onnx":
        name = os.path.basename(os.path.dirname(path)) + ".onnx"
    n0 = count(onnx.load(path).graph)
    qo, qst, qall, qrss = run_quantmake(path)
    so, st, srss = run_peer("onnxsim", path)
    oo, ot, orss = run_peer("ort", path)
    nq = count(onnx.load(qo).graph)
    ns = count(onnx.load(so).graph) if so else -1
    no = count(onnx.load(oo).graph) if oo else -1
    same = "/".join(same_outputs(path, x, name) if x else "fail" for x in (qo, so, oo))
    star = "*" if os.path.basename(path) in out_note else " "
    print(f"{name[:27]:27}{star} {n0:5} {nq:5} {ns:5} {no:5} {qst * 1e3:6.0f}ms {qall * 1e3:6.1f}ms {st * 1e3:6.1f}ms"
          f" {ot * 1e3:6.1f}ms {qrss:6.0f} {srss:7.0f} {orss:7.0f}  {same}", flush=True)
if out_note:
    print("* onnxsim failed with include_subgraph=True; its main-graph-only result is shown")
shutil.rmtree(tmp, ignore_errors=True)
