#!/usr/bin/env python3
"""onnxruntime side of the interpreter's cross-check and benchmark.

  interp-ort.py feeds MODEL BATCH OUT.npz [SEED]  random inputs, symbolic dims = BATCH
                                                 (first) or 512 (others); ints in
                                                 [0, QM_INT_HIGH or 4), 'sr' = 16000
  interp-ort.py run MODEL IN.npz OUT.npz          ORT outputs
  interp-ort.py bench MODEL IN.npz RUNS THREADS   prints "mean_ms p50_ms"
  interp-ort.py compare GOT.npz WANT.npz RTOL     prints "ok" or what differs
  interp-ort.py prepare LIST                      for each line "MODEL BATCH PREFIX INT_HIGH":
                                                 PREFIX-in.npz and PREFIX-ort.npz; prints
                                                 "SKIP: PREFIX: why" where ORT fails
  interp-ort.py check LIST RTOL                   PASS/FAIL per line, PREFIX-qm.npz against
                                                 PREFIX-ort.npz (lines whose files are missing
                                                 are left out)
"""
import os
import sys
import time

import numpy as np

TYPES = {"tensor(float)": np.float32, "tensor(double)": np.float64, "tensor(float16)": np.float16,
         "tensor(int64)": np.int64, "tensor(int32)": np.int32, "tensor(int8)": np.int8,
         "tensor(uint8)": np.uint8, "tensor(bool)": np.bool_}


def session(model, threads=1):
    import onnxruntime as ort
    o = ort.SessionOptions()
    o.intra_op_num_threads = threads
    o.inter_op_num_threads = 1
    o.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    o.log_severity_level = 3
    return ort.InferenceSession(model, o, providers=["CPUExecutionProvider"])


def feeds(model, batch, out, seed=0):
    s = session(model)
    rs = np.random.RandomState(seed)
    high = int(os.environ.get("QM_INT_HIGH", "4"))
    f = {}
    for i in s.get_inputs():
        shape = []
        for k, d in enumerate(i.shape):
            if isinstance(d, int):
                shape.append(d)
            else:
                shape.append(batch if not any(not isinstance(e, int) for e in i.shape[:k]) else 512)
        dt = TYPES[i.type]
        if i.name == "sr":
            f[i.name] = np.array(16000, dtype=dt).reshape(shape)
        elif np.issubdtype(dt, np.integer):
            f[i.name] = rs.randint(0, high, size=shape).astype(dt)
        elif dt == np.bool_:
            f[i.name] = rs.rand(*shape) > 0.5
        else:
            f[i.name] = rs.randn(*shape).astype(dt)
    np.savez(out, **f)


def run(model, inp, out):
    s = session(model)
    z = np.load(inp)
    r = s.run(None, {k: z[k] for k in z.files})
    np.savez(out, **{o.name: v for o, v in zip(s.get_outputs(), r)})


def bench(model, inp, runs, threads):
    s = session(model, threads)
    z = np.load(inp)
    f = {k: z[k] for k in z.files}
    s.run(None, f)
    lat = []
    for _ in range(runs):
        t = time.perf_counter()
        s.run(None, f)
        lat.append(time.perf_counter() - t)
    lat.sort()
    print("%.3f %.3f" % (1e3 * sum(lat) / len(lat), 1e3 * lat[(len(lat) - 1) // 2]))


def differ(got, want, rtol):
    a, b = np.load(got), np.load(want)
    bad = []
    for k in b.files:
        if k not in a.files:
            bad.append("%s missing" % k)
        elif a[k].shape != b[k].shape:
            bad.append("%s shape %s vs %s" % (k, a[k].shape, b[k].shape))
        elif not np.allclose(a[k], b[k], rtol=rtol, atol=1e-5):
            d = np.abs(a[k].astype(np.float64) - b[k])
            bad.append("%s max abs diff %g at %s" % (k, d.max(), np.unravel_index(d.argmax(), d.shape)))
    return "ok" if not bad else "; ".join(bad)


def compare(got, want, rtol):
    print(differ(got, want, rtol))


def entries(lst):
    with open(lst) as f:
        for line in f:
            if line.strip():
                m, b, prefix, high = line.split()
                yield m, int(b), prefix, high


def prepare(lst):
    for m, b, prefix, high in entries(lst):
        os.environ["QM_INT_HIGH"] = high
        try:
            feeds(m, b, prefix + "-in.npz", b)
            run(m, prefix + "-in.npz", prefix + "-ort.npz")
        except Exception as e:  # ORT rejects some old test models
            print("SKIP: %s: onnxruntime failed: %s" % (os.path.basename(prefix), str(e).splitlines()[-1][:200]))


def check(lst, rtol):
    for m, b, prefix, high in entries(lst):
        if os.path.exists(prefix + "-qm.npz") and os.path.exists(prefix + "-ort.npz"):
            r = differ(prefix + "-qm.npz", prefix + "-ort.npz", rtol)
            name = os.path.basename(prefix)
            print("PASS: %s" % name if r == "ok" else "FAIL: %s: %s" % (name, r))


if __name__ == "__main__":
    c, a = sys.argv[1], sys.argv[2:]
    if c == "feeds":
        feeds(a[0], int(a[1]), a[2], int(a[3]) if len(a) > 3 else 0)
    elif c == "run":
        run(*a)
    elif c == "bench":
        bench(a[0], a[1], int(a[2]), int(a[3]))
    elif c == "compare":
        compare(a[0], a[1], float(a[2]))
    elif c == "prepare":
        prepare(a[0])
    elif c == "check":
        check(a[0], float(a[1]))
    else:
        sys.exit(__doc__)
