"""Shared by the kernel tests that run one-node models through
`quantmake run` (t_kernels_fast, t_conv_layout, t_pool_fast): the binary,
a fixed random generator, and a runner. The calling test's working
directory is its own temporary directory; the model is m.onnx there."""
import os
import subprocess

import numpy as np

qm = os.environ["QUANTMAKE"]
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
