"""Preprocess: quantmake's `preprocess = default` against onnxsim
(onnxsim.simplify, PyPI `onnxsim`, installed into .venv from
bench/requirements.txt when missing) and onnxruntime's ORT_ENABLE_BASIC
optimizer (optimized_model_filepath output) on the same models: total node
count after (subgraphs included), wall and CPU time, peak RSS, and whether
each result still gives the original's outputs (onnxruntime, random inputs,
rtol/atol 1e-5).

    .venv/bin/python bench/preprocess.py [--quantmake ./quantmake] [--reps 5]

Times, best of --reps. "qm cmd" is `quantmake preprocess IN OUT`, a new
process each time: read the model, infer shapes, the passes, inference of
the result, an fsync'd save of OUT (the work of the infer-shapes and
preprocess stages on the same input file the peers get). "qm stage" is the
preprocess stage as a build's log reports it (10 ms resolution: the stage
in a forked child plus the build's cache work around it: copying its input
out of the cache, hashing and storing its output, the action record), "qm
build" a whole `quantmake` run of a one-model project (process start,
export, infer-shapes, preprocess, cache). onnxsim's is onnx.load + simplify
(include_subgraph=True, no checking) + onnx.save, ORT's InferenceSession
creation with optimized_model_filepath (load, optimize, save, plus its
session setup; "ort -s" the same without saving), both timed inside a
Python process that has already imported them. CPU is user + system time:
of the quantmake process (wait4), of the Python process over the timed call
(time.process_time). Peak RSS is the whole process's (for the peers that
includes Python and the library).

Models: tests/models (cnn, transformer), the silero-vad and magika models
that bench/fetch-models.sh puts in tests/.cache/models (if present), the
examples/digits MLP, an opset-9 CNN with unfolded BatchNormalization,
Identity/Dropout and constant subgraphs and a graph of long chains, both
built here with the onnx helper API, and two torch.onnx exports (below).
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
        t, c = time.perf_counter(), time.process_time()
        try:
            m, _ = onnxsim.simplify(onnx.load(src), check_n=0, include_subgraph=True)
        except Exception:
            # onnxsim 0.8.1 fails on some If bodies: its main-graph-only mode
            t, c = time.perf_counter(), time.process_time()
            m, _ = onnxsim.simplify(onnx.load(src), check_n=0, include_subgraph=False)
            print("main graph only", file=sys.stderr)
        onnx.save(m, dst)
    else:
        so = ort.SessionOptions()
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
        so.optimized_model_filepath = dst
        so.log_severity_level = 4
        if tool == "ort-nosave":
            so.optimized_model_filepath = ""
        t, c = time.perf_counter(), time.process_time()
        ort.InferenceSession(src, so, providers=["CPUExecutionProvider"])
    print(json.dumps({"t": time.perf_counter() - t, "c": time.process_time() - c}))


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


def chains(path, n=2000):
    """long chains, the cases a pass doing a whole-graph scan per change
    makes quadratic: n Identity nodes between Relus, n duplicate Relus, and
    n constant Adds inside an If body (folded with the enclosing graph's
    names in scope)"""
    vi = h.make_tensor_value_info
    nodes, prev = [], "x"
    for i in range(n):
        nodes += [h.make_node("Identity", [prev], [f"i{i}"]), h.make_node("Relu", [f"i{i}"], [f"r{i}"])]
        prev = f"r{i}"
    nodes += [h.make_node("Relu", [prev], [f"d{i}"]) for i in range(n)]
    nodes.append(h.make_node("Sum", [f"d{i}" for i in range(0, n, 100)], ["s"]))
    body, inits, c = [], [], "c0"
    for i in range(n):
        inits.append(nh.from_array(np.full(4, i % 7, np.float32), f"k{i}"))
        body.append(h.make_node("Add", [c, f"k{i}"], [f"a{i}"]))
        c = f"a{i}"
    body.append(h.make_node("Add", [c, "s"], ["t"]))
    then = h.make_graph(body, "then", [], [vi("t", T.FLOAT, [4])], inits)
    other = h.make_graph([h.make_node("Identity", ["s"], ["e"])], "else", [], [vi("e", T.FLOAT, [4])])
    nodes.append(h.make_node("If", ["b"], ["y"], then_branch=then, else_branch=other))
    g = h.make_graph(nodes, "chains", [vi("x", T.FLOAT, [4]), vi("b", T.BOOL, [])], [vi("y", T.FLOAT, [4])],
                     [nh.from_array(np.ones(4, np.float32), "c0")])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 13)])
    m.ir_version = 7
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
# two models exported by torch.onnx (Debian python3-torch, /usr/bin/python3;
# left out without it): a small ResNet with BatchNormalization and Identity
# left in (do_constant_folding=False, TrainingMode.PRESERVE of an eval
# model) and a 2-layer bidirectional LSTM tagger, both
# with dynamic axes
TORCH_EXPORT = r'''
import sys, torch, torch.nn as nn
torch.manual_seed(0)
out = sys.argv[1]
class Block(nn.Module):
    def __init__(s, ci, co, st):
        super().__init__()
        s.c1 = nn.Conv2d(ci, co, 3, st, 1, bias=False); s.b1 = nn.BatchNorm2d(co)
        s.c2 = nn.Conv2d(co, co, 3, 1, 1, bias=False); s.b2 = nn.BatchNorm2d(co)
        s.sc = nn.Sequential() if st == 1 and ci == co else nn.Sequential(nn.Conv2d(ci, co, 1, st, bias=False), nn.BatchNorm2d(co))
    def forward(s, x):
        return torch.relu(s.b2(s.c2(torch.relu(s.b1(s.c1(x))))) + s.sc(x))
class ResNet(nn.Module):
    def __init__(s):
        super().__init__()
        s.stem = nn.Sequential(nn.Conv2d(3, 16, 3, 1, 1, bias=False), nn.BatchNorm2d(16), nn.ReLU())
        s.layers = nn.Sequential(Block(16, 16, 1), Block(16, 32, 2), Block(32, 64, 2))
        s.fc = nn.Linear(64, 10)
    def forward(s, x):
        x = s.layers(s.stem(x))
        return s.fc(torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1))
class Tagger(nn.Module):
    def __init__(s):
        super().__init__()
        s.emb = nn.Embedding(100, 32); s.lstm = nn.LSTM(32, 48, num_layers=2, bidirectional=True, batch_first=True)
        s.fc = nn.Linear(96, 5)
    def forward(s, x):
        h, _ = s.lstm(s.emb(x))
        return torch.log_softmax(s.fc(h), -1)
r = ResNet().eval()
for m in r.modules():
    if isinstance(m, nn.BatchNorm2d):
        m.running_mean.uniform_(-0.1, 0.1); m.running_var.uniform_(0.5, 1.5); m.weight.data.uniform_(0.5, 1.5)
torch.onnx.export(r, torch.randn(1, 3, 32, 32), f"{out}/resnet_mini_torch.onnx", opset_version=13,
                  input_names=["x"], output_names=["y"], dynamic_axes={"x": {0: "N"}, "y": {0: "N"}},
                  do_constant_folding=False, training=torch.onnx.TrainingMode.PRESERVE)
torch.onnx.export(Tagger().eval(), torch.randint(0, 100, (1, 7)), f"{out}/lstm_tagger_torch.onnx", opset_version=13,
                  input_names=["x"], output_names=["y"], dynamic_axes={"x": {0: "N", 1: "T"}, "y": {0: "N", 1: "T"}})
'''
with open(os.path.join(tmp, "torch_export.py"), "w") as f:
    f.write(TORCH_EXPORT)
te = subprocess.run(["/usr/bin/python3", os.path.join(tmp, "torch_export.py"), tmp], capture_output=True, text=True)
if te.returncode == 0:
    models += [os.path.join(tmp, "resnet_mini_torch.onnx"), os.path.join(tmp, "lstm_tagger_torch.onnx")]
else:
    print("no torch in /usr/bin/python3 (Debian python3-torch): the torch exports are left out", file=sys.stderr)
chains(os.path.join(tmp, "chains2000.onnx"))
models.append(os.path.join(tmp, "chains2000.onnx"))
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
        shp = [d if isinstance(d, int) else 3 if "torch" in name else 1 for d in i.shape]
        if "silero" in name and i.name == "input":
            shp = [1, 512]
        if i.name == "sr":
            f[i.name] = np.array(16000, np.int64)
        elif i.type == "tensor(float)":
            f[i.name] = (rng.standard_normal(shp) * 0.1).astype(np.float32)
        elif i.type == "tensor(float16)":
            f[i.name] = (rng.standard_normal(shp) * 0.1).astype(np.float16)
        elif i.type == "tensor(bool)":
            f[i.name] = np.array(True)
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
    """run argv: (exit code, output, wall seconds, CPU seconds, peak RSS in
    MiB). The RSS comes from GNU time (/usr/bin/time, Debian package time):
    ru_maxrss of a child forked from this big Python process would count the
    parent's pages it had before exec; the CPU time (user + system, the
    process and its children) from wait4, which GNU time adds ~1 ms to."""
    rssf = os.path.join(tmp, "rss")
    outf = os.path.join(tmp, "out")
    gtime = os.path.exists("/usr/bin/time")
    cmd = ["/usr/bin/time", "-f", "%M", "-o", rssf] + argv if gtime else argv
    with open(outf, "w+") as fo:
        t = time.perf_counter()
        p = subprocess.Popen(cmd, stdout=fo, stderr=subprocess.STDOUT, env=env)
        _, status, ru = os.wait4(p.pid, 0)
        dt = time.perf_counter() - t
        p.returncode = os.waitstatus_to_exitcode(status)
        fo.seek(0)
        out = fo.read()
    mb = float("nan")
    if gtime and p.returncode == 0:
        with open(rssf) as f:
            mb = int(f.read().split()[-1]) / 1024
    return p.returncode, out, dt, ru.ru_utime + ru.ru_stime, mb


def run_quantmake(path):
    """the whole build of a one-model project (its preprocess stage's time
    from the log), best of --reps"""
    name = re.sub(r"[^A-Za-z0-9_]", "_", os.path.basename(path)[:-5])
    p = os.path.join(tmp, "proj-" + name)
    best_stage = best_all = None
    for _ in range(args.reps):
        shutil.rmtree(p, ignore_errors=True)
        os.makedirs(os.path.join(p, "rules"))
        os.makedirs(os.path.join(p, "models"))
        shutil.copy(path, os.path.join(p, "models", name + ".onnx"))
        with open(os.path.join(p, "rules", "m.rules"), "w") as f:
            f.write(f"[model {name}]\nsource = models/{name}.onnx\npreprocess = default\n")
        env = dict(os.environ, QUANTMAKE_CACHE=os.path.join(p, "cache"))
        rc, out, dt, _, _ = run_rss([qm, "-C", p], env)
        if rc != 0:
            raise SystemExit(f"quantmake failed on {name}: {out.strip()[-300:]}")
        m = re.search(r"\] preprocess \S+ \(([0-9.]+)s\)", out)
        st = float(m.group(1)) if m else float("nan")
        best_stage = st if best_stage is None else min(best_stage, st)
        best_all = dt if best_all is None else min(best_all, dt)
    return os.path.join(p, "build", name, name + ".onnx"), best_stage, best_all


def run_cmd(path):
    """`quantmake preprocess IN OUT`, a new process each time: load, infer
    shapes, passes, inference of the result, fsync'd save. Best wall and
    CPU of --reps, the largest RSS"""
    out = os.path.join(tmp, "qm-" + os.path.basename(path))
    best = cpu = rss = None
    for _ in range(args.reps):
        rc, txt, dt, c, mb = run_rss([qm, "preprocess", path, out])
        if rc != 0:
            raise SystemExit(f"quantmake preprocess failed on {path}: {txt.strip()[-300:]}")
        best = dt if best is None else min(best, dt)
        cpu = c if cpu is None else min(cpu, c)
        rss = mb if rss is None else max(rss, mb)
    return out, best, cpu, rss


out_note = set()  # models onnxsim simplified without their subgraphs


def run_peer(tool, path):
    out = os.path.join(tmp, tool + "-" + os.path.basename(path))
    best = cpu = rss = None
    for _ in range(args.reps):
        rc, txt, _, _, mb = run_rss([sys.executable, os.path.abspath(__file__), "--one", tool, path, out])
        if rc != 0:
            print(f"{tool} failed on {os.path.basename(path)}: {txt.strip().splitlines()[-1][:200]}", file=sys.stderr)
            return None, float("nan"), float("nan"), float("nan")
        j = json.loads(txt.strip().splitlines()[-1])
        if "main graph only" in txt:
            out_note.add(os.path.basename(path))
        best = j["t"] if best is None else min(best, j["t"])
        cpu = j["c"] if cpu is None else min(cpu, j["c"])
        rss = mb if rss is None else max(rss, mb)
    return out, best, cpu, rss


print(time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "load average %.2f %.2f %.2f" % os.getloadavg(),
      f"onnxruntime {ort.__version__}, onnxsim {onnxsim.__version__}, best of {args.reps}")
print(f"{'':28} {'nodes':^23} {'wall ms':^54} {'CPU ms':^27} {'peak RSS MiB':^20}")
print(f"{'model':28} {'orig':>5} {'qm':>5} {'sim':>5} {'ort':>5} {'qm cmd':>8} {'qm stage':>8} {'qm build':>8}"
      f" {'sim':>8} {'ort':>8} {'ort -s':>8} {'qm cmd':>8} {'sim':>8} {'ort':>8} {'qm':>6} {'sim':>6} {'ort':>6}"
      f"  same(qm/sim/ort)")
for path in models:
    name = os.path.basename(path)
    if name == "model.onnx":
        name = os.path.basename(os.path.dirname(path)) + ".onnx"
    n0 = count(onnx.load(path).graph)
    qo, qt, qc, qrss = run_cmd(path)
    bo, qst, qall = run_quantmake(path)
    so, st, sc, srss = run_peer("onnxsim", path)
    oo, ot, oc, orss = run_peer("ort", path)
    _, ont, _, _ = run_peer("ort-nosave", path)
    nq = count(onnx.load(qo).graph)
    nb = count(onnx.load(bo).graph)
    if nb != nq:
        raise SystemExit(f"{name}: quantmake preprocess left {nq} nodes, the build's stage {nb}")
    ns = count(onnx.load(so).graph) if so else -1
    no = count(onnx.load(oo).graph) if oo else -1
    same = "/".join(same_outputs(path, x, name) if x else "fail" for x in (qo, so, oo))
    star = "*" if os.path.basename(path) in out_note else " "
    print(f"{name[:27]:27}{star} {n0:5} {nq:5} {ns:5} {no:5} {qt * 1e3:8.1f} {qst * 1e3:6.0f}ms {qall * 1e3:8.1f}"
          f" {st * 1e3:8.1f} {ot * 1e3:8.1f} {ont * 1e3:8.1f} {qc * 1e3:8.1f} {sc * 1e3:8.1f} {oc * 1e3:8.1f}"
          f" {qrss:6.0f} {srss:6.0f} {orss:6.0f}  {same}", flush=True)
print("load average at the end %.2f %.2f %.2f" % os.getloadavg())
if out_note:
    print("* onnxsim failed with include_subgraph=True; its main-graph-only result is shown")
shutil.rmtree(tmp, ignore_errors=True)
