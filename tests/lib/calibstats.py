"""calibration.stats as src/quant/calib.c's calib_save writes it, read for
the tests: a 24-byte header (magic QMCALIB2, u32 tensors, u32 bins, u64
samples), then per tensor a u32 name length and the name, u64 count, u64
non-finite values, f32 min, f32 max, f64 range and the bins' u64 counts
(none for minmax statistics)."""
import struct
from collections import namedtuple

import numpy as np

Stats = namedtuple("Stats", "count nonfinite lo hi range hist")


def read(path):
    """(bins, samples, {tensor name: Stats}); the file must end where its
    last tensor does"""
    b = open(path, "rb").read()
    assert b[:8] == b"QMCALIB2", (path, b[:8])
    n, nb, ns = struct.unpack_from("<IIQ", b, 8)
    o, got = 24, {}
    for _ in range(n):
        l, = struct.unpack_from("<I", b, o)
        name = b[o + 4:o + 4 + l].decode()
        o += 4 + l
        cnt, nf, lo, hi, r = struct.unpack_from("<QQffd", b, o)
        o += 32
        got[name] = Stats(cnt, nf, lo, hi, r, np.frombuffer(b, "<u8", nb, o))
        o += 8 * nb
    assert o == len(b), (path, o, len(b))
    return nb, ns, got
