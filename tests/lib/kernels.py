"""Shared by the kernel tests that run one-node models through
`quantmake run` (t_kernels_fast, t_conv_layout, t_pool_fast): the binary,
a fixed random generator, and a runner. The calling test's working
directory is its own temporary directory; the model is m.onnx there.
ort_mismatch is shared by the tests that compare a whole run's outputs
with onnxruntime's (t_interp_gelu, t_matmul_sparse)."""
import os
import subprocess

import numpy as np

qm = os.environ.get("QUANTMAKE")
rng = np.random.default_rng(20261122)


def run_qm(x, threads, outputs=("y",)):
    """m.onnx on x (input "x") with the given thread count: (the outputs
    named in `outputs` that the run wrote, as a list, or output "y" alone
    when outputs is ("y",), None) or (None, the last line of the error)"""
    np.save("x.npy", x)
    r = subprocess.run([qm, "run", "m.onnx", "-i", "x=x.npy", "-o", "y.npz", "-t", str(threads), "-q"],
                       capture_output=True, text=True)
    if r.returncode:
        return None, (r.stderr.strip().splitlines() or ["exit %d" % r.returncode])[-1]
    z = np.load("y.npz")
    if tuple(outputs) == ("y",):
        return z["y"], None
    return [z[k] for k in outputs if k in z], None


def ort_mismatch(model, feed, got, tol):
    """what differs between the outputs got (name -> array) and
    onnxruntime's for model on the inputs of .npz feed, or None: shapes,
    NaN and infinity positions, or a finite value beyond tol relative to
    max(1, |onnxruntime's|)"""
    import onnxruntime as ort
    s = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    for o, g in zip(s.get_outputs(), s.run(None, dict(np.load(feed)))):
        q = got[o.name]
        if q.shape != g.shape or not np.array_equal(np.isnan(q), np.isnan(g)):
            return "%s: shape %s or NaNs differ from onnxruntime's %s" % (o.name, q.shape, g.shape)
        inf = np.isinf(g)
        if not np.array_equal(q[inf], g[inf]) or np.isinf(q[~inf]).any():
            return "%s: infinities differ from onnxruntime's" % o.name
        fin = np.isfinite(g)
        err = np.abs(q[fin].astype(np.float64) - g[fin]) / np.maximum(1, np.abs(g[fin]))
        if err.size and err.max() > tol:
            return "%s: error %g against onnxruntime (tolerance %g)" % (o.name, err.max(), tol)
    return None
