#!/bin/sh
# seed.sh TARGET DIR TESTDATA: the first corpus of a fuzz target: ONNX's
# node tests (models, .pb tensors and sequences), the repository's rule
# files, and .npy/.npz/release archives written here with Python's
# standard library (struct, zipfile, tarfile: no numpy needed).
set -eu
t=$1 dir=$2 td=$3
root=$(cd "$(dirname "$0")/.." && pwd)
case $t in
model)
	# the 400 smallest node-test models, and the repository's own
	find "$td/node" -name model.onnx -size -8k | sort | head -400 | while read -r f; do
		cp "$f" "$dir/$(basename "$(dirname "$f")").onnx"
	done
	for f in "$root"/tests/models/*.onnx; do
		[ "$(wc -c < "$f")" -lt 65536 ] && cp "$f" "$dir/" || true
	done
	;;
pb)
	find "$td/node" -path '*test_data_set_0*' -name '*.pb' -size -4k | sort | head -400 | while read -r f; do
		d=$(basename "$(dirname "$(dirname "$f")")")
		cp "$f" "$dir/$d-$(basename "$f")"
	done
	;;
rules)
	n=0
	for f in "$root"/rules/*.rules "$root"/examples/*/rules/*.rules "$root"/README.md; do
		[ -f "$f" ] || continue
		n=$((n + 1))
		cp "$f" "$dir/seed$n.rules"
	done
	;;
npy | npz | archive)
	python3 - "$t" "$dir" <<'PY'
import io, json, struct, sys, tarfile, zipfile
t, d = sys.argv[1:]
def npy(descr, shape, data, version=1):
    h = "{'descr': '%s', 'fortran_order': False, 'shape': %s, }" % (descr, repr(tuple(shape)))
    pre = 10 if version == 1 else 12
    h += " " * (63 - (pre + len(h)) % 64) + "\n"
    n = struct.pack("<H", len(h)) if version == 1 else struct.pack("<I", len(h))
    return b"\x93NUMPY" + bytes([version, 0]) + n + h.encode() + data
arrays = {
    "f4": npy("<f4", (2, 3), struct.pack("<6f", 1, -2, 3.5, 0, 1e30, -1e-30)),
    "i8": npy("<i8", (3,), struct.pack("<3q", 1, -1, 1 << 40)),
    "u1": npy("|u1", (4,), bytes([0, 1, 254, 255])),
    "b1": npy("|b1", (), b"\x01"),
    "f2": npy("<f2", (2,), b"\x00\x3c\x00\xc0"),
    "v2": npy("<f4", (1,), struct.pack("<f", 2), version=2),
    "empty": npy("<f4", (0, 4), b""),
}
if t == "npy":
    for k, v in arrays.items():
        open("%s/%s.npy" % (d, k), "wb").write(v)
elif t == "npz":
    for mode, nm in ((zipfile.ZIP_STORED, "stored"), (zipfile.ZIP_DEFLATED, "deflated")):
        with zipfile.ZipFile("%s/%s.npz" % (d, nm), "w", mode) as z:
            for k, v in arrays.items():
                z.writestr(k + ".npy", v)
    with zipfile.ZipFile(d + "/arr0.npz", "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("arr_0.npy", arrays["f4"])
else:
    body = b"\x08\x07\x12\x04fuzz"
    man = {"archive": "r-v1.tar.gz", "format": "tar.gz", "manifest_version": 1, "release": "r",
           "git": {"describe": "v1"}, "models": {},
           "files": {"m/m.onnx": {"size": len(body), "sha256": "0" * 64, "xxh3_128": "0" * 32}}}
    mj = json.dumps(man, indent=2).encode()
    for fmt in ("w:gz", "w:", "w:xz"):
        ext = {"w:gz": "tar.gz", "w:": "tar", "w:xz": "tar.xz"}[fmt]
        with tarfile.open("%s/r.%s" % (d, ext), fmt) as tf:
            for name, data in (("r-v1/", None), ("r-v1/MANIFEST.json", mj), ("r-v1/m/", None), ("r-v1/m/m.onnx", body)):
                ti = tarfile.TarInfo(name)
                if data is None:
                    ti.type = tarfile.DIRTYPE
                    tf.addfile(ti)
                else:
                    ti.size = len(data)
                    tf.addfile(ti, io.BytesIO(data))
            ti = tarfile.TarInfo("r-v1/m/link"); ti.type = tarfile.SYMTYPE; ti.linkname = "m.onnx"
            tf.addfile(ti)
    with zipfile.ZipFile(d + "/r.zip", "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("r-v1/MANIFEST.json", mj)
        z.writestr("r-v1/m/m.onnx", body)
PY
	;;
*)
	echo "seed: unknown target '$t'" >&2
	exit 2
	;;
esac
