"""Benchmarks of the build core against GNU make, ninja and xxhsum, in one run.

    .venv/bin/python bench/core.py [--quantmake ./quantmake] [--big-gib 10]

1. No-op time of `quantmake all` for 10, 100 and 1000 models against GNU make
   and ninja on equivalent build files (the same cp commands), best of 5.
2. Hashing throughput: `quantmake hash` against `xxhsum -H2` on a 1 GiB file
   (page cache warm for both), best of 3.
3. A no-op over BIG GiB of models (external data files) reads none of them:
   quantmake's own counter (QUANTMAKE_STATS) of files read for hashing.
Prints one line per measurement and the ratios; paste the result into
bench/README.md.
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
from onnx import TensorProto, helper

ap = argparse.ArgumentParser()
ap.add_argument("--quantmake", default=os.path.join(os.path.dirname(__file__), "..", "quantmake"))
ap.add_argument("--big-gib", type=int, default=10)
ap.add_argument("--counts", default="10,100,1000")
args = ap.parse_args()
QM = os.path.abspath(args.quantmake)
SEED = "/usr/share/libonnx-testdata/data/node/test_relu/model.onnx"


def best(cmd, cwd, n=5, env=None):
    times = []
    for _ in range(n):
        t = time.perf_counter()
        subprocess.run(cmd, cwd=cwd, check=True, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, env=env)
        times.append(time.perf_counter() - t)
    return min(times)


def noop(n, root):
    d = os.path.join(root, f"noop{n}")
    os.makedirs(os.path.join(d, "src"))
    os.makedirs(os.path.join(d, "rules"))
    rules, mk, nj = [], ["all:"], ["rule cp\n  command = mkdir -p $$(dirname $out) && cp $in $out\n"]
    targets = []
    for i in range(n):
        shutil.copy(SEED, os.path.join(d, "src", f"m{i}.onnx"))
        rules.append(f"[model m{i}]\nexport = cp src/m{i}.onnx \"$out\"\nexport.deps = src/m{i}.onnx\n")
        t = f"out/m{i}/m{i}.onnx"
        targets.append(t)
        mk.append(f"{t}: src/m{i}.onnx\n\tmkdir -p out/m{i} && cp src/m{i}.onnx {t}\n")
        nj.append(f"build {t}: cp src/m{i}.onnx\n")
    mk[0] = "all: " + " ".join(targets) + "\n"
    open(os.path.join(d, "rules", "all.rules"), "w").write("\n".join(rules))
    open(os.path.join(d, "Makefile"), "w").write("\n".join(mk))
    open(os.path.join(d, "build.ninja"), "w").write("\n".join(nj))
    env = dict(os.environ, QUANTMAKE_CACHE=os.path.join(d, "cache"))
    subprocess.run([QM, "-j2", "all"], cwd=d, check=True, stdout=subprocess.DEVNULL, env=env)
    subprocess.run(["make", "-j2"], cwd=d, check=True, stdout=subprocess.DEVNULL)
    subprocess.run(["ninja", "-j2"], cwd=d, check=True, stdout=subprocess.DEVNULL)
    q = best([QM, "all"], d, env=env)
    m = best(["make"], d)
    nn = best(["ninja"], d)
    print(f"no-op {n:5d} models: quantmake {q*1000:8.1f} ms  make {m*1000:8.1f} ms  "
          f"ninja {nn*1000:8.1f} ms  quantmake/ninja {q/nn:5.2f}x  quantmake/make {q/m:5.2f}x")


def hashing(root):
    f = os.path.join(root, "big.bin")
    with open(f, "wb") as fh:
        chunk = np.random.default_rng(0).integers(0, 256, 64 << 20, dtype=np.uint8).tobytes()
        for _ in range(16):
            fh.write(chunk)
    subprocess.run(["cat", f], stdout=subprocess.DEVNULL, check=True)
    x = best(["xxhsum", "-H2", f], root, n=3)
    q = best([QM, "hash", f], root, n=3)
    out_q = subprocess.run([QM, "hash", f], capture_output=True, text=True).stdout.split()[0]
    out_x = subprocess.run(["xxhsum", "-H2", f], capture_output=True, text=True).stdout.split()[0]
    assert out_q == out_x, (out_q, out_x)
    print(f"hash 1 GiB: quantmake {1/q:6.2f} GiB/s  xxhsum -H2 {1/x:6.2f} GiB/s  "
          f"throughput ratio {x/q:5.2f} (digests equal)")
    os.unlink(f)


def big_noop(gib, root):
    d = os.path.join(root, "big")
    os.makedirs(os.path.join(d, "rules"))
    os.makedirs(os.path.join(d, "models"))
    rules = []
    n = 256 << 20  # floats per GiB
    for i in range(gib):
        data = f"m{i}.bin"
        with open(os.path.join(d, "models", data), "wb") as fh:
            fh.truncate(4 * n)
        w = helper.make_tensor_value_info("w", TensorProto.FLOAT, [n])
        t = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[n])
        t.data_location = TensorProto.EXTERNAL
        for k, v in (("location", data), ("offset", "0"), ("length", str(4 * n))):
            e = t.external_data.add()
            e.key, e.value = k, v
        g = helper.make_graph([helper.make_node("Identity", ["w"], ["y"])], "big", [],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [n])], [t])
        del w
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
        open(os.path.join(d, "models", f"m{i}.onnx"), "wb").write(m.SerializeToString())
        rules.append(f"[model m{i}]\nsource = models/m{i}.onnx\n")
    open(os.path.join(d, "rules", "all.rules"), "w").write("\n".join(rules))
    env = dict(os.environ, QUANTMAKE_STATS="1", QUANTMAKE_CACHE=os.path.join(d, "cache"))
    t = time.perf_counter()
    subprocess.run([QM, "-j2", "all"], cwd=d, check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, env=env)
    first = time.perf_counter() - t
    t = time.perf_counter()
    r = subprocess.run([QM, "all"], cwd=d, check=True, capture_output=True, text=True, env=env)
    second = time.perf_counter() - t
    stats = [line for line in r.stderr.splitlines() if "stats:" in line]
    print(f"no-op over {gib} GiB of models: first build {first:.1f} s, no-op {second*1000:.1f} ms, "
          f"{stats[0].split('stats: ')[1] if stats else 'no stats'}")


with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_TMP")) as root:
    print(f"machine: {os.cpu_count()} CPUs; quantmake {subprocess.run([QM, '--version'], capture_output=True, text=True).stdout.strip()}; "
          f"{subprocess.run(['make', '--version'], capture_output=True, text=True).stdout.splitlines()[0]}; "
          f"ninja {subprocess.run(['ninja', '--version'], capture_output=True, text=True).stdout.strip()}")
    for n in map(int, args.counts.split(",")):
        noop(n, root)
    hashing(root)
    if args.big_gib > 0:
        big_noop(args.big_gib, root)
