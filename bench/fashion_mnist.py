"""Debian's dataset-fashion-mnist as numpy arrays, for bench/quantize.py (in
.venv) and bench/train-fashion.py (Debian's python3-torch): numpy only."""
import gzip
import os

import numpy as np

DATA = "/usr/share/datasets/fashion-mnist"
FILES = ["%s-%s-idx%d-ubyte.gz" % (s, k, n) for s in ("train", "t10k") for k, n in (("images", 3), ("labels", 1))]


def missing():
    """None, or one line saying which file is missing and how to install it"""
    for f in FILES:
        if not os.path.isfile(os.path.join(DATA, f)):
            return ("Fashion-MNIST: %s not found (Debian package dataset-fashion-mnist; "
                    "install it with: sh scripts/install-deps.sh --bench)" % os.path.join(DATA, f))
    return None


def _idx(name):
    """an idx file (big-endian dimensions, then unsigned bytes) as an array"""
    path = os.path.join(DATA, name)
    with gzip.open(path) as f:
        raw = f.read()
    dims = raw[3]
    shape = [int.from_bytes(raw[4 + 4 * i:8 + 4 * i], "big") for i in range(dims)]
    if raw[:3] != b"\0\0\x08" or len(raw) != 4 + 4 * dims + int(np.prod(shape)):
        raise ValueError("%s: not an idx file of unsigned bytes" % path)
    return np.frombuffer(raw, np.uint8, offset=4 + 4 * dims).reshape(shape)


def load(split):
    """(images [N, 1, 28, 28] float32 in [0, 1], labels int64) of split
    "train" (60,000) or "t10k" (10,000)"""
    x = _idx(split + "-images-idx3-ubyte.gz").astype(np.float32)[:, None] / 255.0
    return x, _idx(split + "-labels-idx1-ubyte.gz").astype(np.int64)
