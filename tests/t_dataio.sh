#!/bin/sh
# Data I/O of the interpreter (src/exec/dataio.c): .npy (v1/v2/v3), .npz
# (stored and deflated), TensorProto .pb, test_data_set directories, globs;
# writers checked by numpy/onnx reading back; bad files give one clear error.
# Uses `quantmake run --dump SPEC... [-o OUT]`, which prints every sample.
ROOT="${ROOT:-$(cd "$(dirname "$0")/.." && pwd)}"
QM="${QUANTMAKE:?QUANTMAKE not set}"
[ -x "$QM" ] || { echo "FAIL: dataio: $QM is not an executable"; exit 1; }
PY="${PY:-$ROOT/.venv/bin/python}"
if ! "$PY" -c 'import numpy, onnx' 2>/dev/null; then
	echo "SKIP: dataio: $PY lacks numpy/onnx (sh scripts/venv.sh)"
	exit 0
fi
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
cd "$T" || exit 1

"$PY" - <<'EOF' || { echo "FAIL: dataio-setup: python could not write the fixtures"; exit 0; }
import numpy as np, os, struct
from numpy.lib import format as F
from onnx import numpy_helper
a = np.arange(12, dtype=np.float32).reshape(3, 4) / 4
np.save("f32.npy", a)
for ver in [(2, 0), (3, 0)]:
    with open("v%d.npy" % ver[0], "wb") as f:
        F.write_array(f, a, version=ver)
np.save("i64.npy", np.array([[1, -2], [3, 4]], dtype=np.int64))
np.save("u8.npy", np.array([1, 2, 250], dtype=np.uint8))
np.save("bool.npy", np.array([True, False, True]))
np.save("f16.npy", np.array([0.5, -1.5], dtype=np.float16))
np.save("f64.npy", np.array([0.25], dtype=np.float64))
np.save("scalar.npy", np.float32(2.5))
np.save("empty.npy", np.zeros((0, 3), dtype=np.float32))
np.save("big.npy", a.astype(">f4"))
np.save("obj.npy", np.array([1, "x"], dtype=object), allow_pickle=True)
np.save("str.npy", np.array(["ab", "c"]))
np.save("fortran.npy", np.asfortranarray(a))
raw = open("f32.npy", "rb").read()
open("trunc.npy", "wb").write(raw[:-5])
open("trail.npy", "wb").write(raw + b"xx")
open("badhdr.npy", "wb").write(raw[:8] + b"\xff\xff" + raw[10:40])
open("magic.npy", "wb").write(b"NOTNUMPY" + raw[8:])
hl = raw[8] | raw[9] << 8
h = raw[10:10 + hl].decode()
for name, shape in [("huge.npy", "(1000000000000, 4)"), ("overflow.npy", "(99999999999, 99999999999)")]:
    h2 = h.replace("(3, 4)", shape)
    h2 = h2.rstrip("\n").rstrip(" ")
    h2 = h2 + " " * (hl - 1 - len(h2)) + "\n"
    open(name, "wb").write(raw[:10] + h2.encode() + raw[10 + hl:])
np.savez("pos.npz", a, np.arange(3, dtype=np.int32))
np.savez_compressed("named.npz", x=a, y=np.arange(3, dtype=np.int32))
open("notzip.npz", "wb").write(b"PK\x03\x04garbage")
t = numpy_helper.from_array(a, "x")
open("t.pb", "wb").write(t.SerializeToString())
open("junk.pb", "wb").write(os.urandom(64))
import onnx
t = onnx.TensorProto(name="x", data_type=1, dims=[10**12], float_data=[1.0, 2.0])
open("hugetyped.pb", "wb").write(t.SerializeToString())
t = onnx.TensorProto(name="y", data_type=7, dims=[5], int64_data=[1, 2, 3, 4, 5])
open("int64typed.pb", "wb").write(t.SerializeToString())
os.makedirs("sets/test_data_set_0"); os.makedirs("sets/test_data_set_1")
for k in range(2):
    open("sets/test_data_set_%d/input_0.pb" % k, "wb").write(
        numpy_helper.from_array(a * (k + 1), "in").SerializeToString())
os.makedirs("emptydir")
EOF

dump() { "$QM" run --dump "$@" > out.txt 2> err.txt; }
expect() { # name pattern file
	if grep -q -- "$2" "$3"; then echo "PASS: $1"; else echo "FAIL: $1: expected '$2', got: $(head -c 300 "$3")"; fi
}
fails() { # name pattern (after a dump): must exit 2 with one error line naming the problem
	rc=$?
	if [ $rc -ne 2 ]; then
		echo "FAIL: $1: exit $rc, expected 2 ($(head -c 200 err.txt))"
	elif [ "$(wc -l < err.txt)" -ne 1 ]; then
		echo "FAIL: $1: expected one error line, got: $(head -c 300 err.txt)"
	else
		expect "$1" "$2" err.txt
	fi
}

dump f32.npy;     expect npy-v1-float "sample 0: - float \[3,4\] sum=16.5" out.txt
dump v2.npy;      expect npy-v2 "float \[3,4\] sum=16.5" out.txt
dump v3.npy;      expect npy-v3 "float \[3,4\] sum=16.5" out.txt
dump i64.npy;     expect npy-int64 "int64 \[2,2\] sum=6" out.txt
dump u8.npy;      expect npy-uint8 "uint8 \[3\] sum=253" out.txt
dump bool.npy;    expect npy-bool "bool \[3\] sum=2" out.txt
dump f16.npy;     expect npy-float16 "float16 \[2\] sum=-1" out.txt
dump f64.npy;     expect npy-float64 "double \[1\] sum=0.25" out.txt
dump scalar.npy;  expect npy-scalar "float \[\] sum=2.5" out.txt
dump empty.npy;   expect npy-empty "float \[0,3\] sum=0" out.txt
dump big.npy;     fails npy-big-endian "big.npy: big-endian"
dump obj.npy;     fails npy-object "obj.npy: object arrays"
dump str.npy;     fails npy-string "str.npy: string arrays"
dump fortran.npy; fails npy-fortran "fortran.npy: fortran_order"
dump trunc.npy;   fails npy-truncated "trunc.npy: .*truncated"
dump trail.npy;   fails npy-trailing "trail.npy: .*trailing bytes"
dump badhdr.npy;  fails npy-bad-header "badhdr.npy: truncated .npy header"
dump magic.npy;   fails npy-bad-magic "magic.npy: not a .npy file"
dump huge.npy;    fails npy-huge-shape "huge.npy: float \[1000000000000,4\] needs 16000000000000 bytes of data, the file has 48 (truncated)"
dump overflow.npy; fails npy-overflow-shape "overflow.npy: shape in .npy header overflows"
dump missing.npy; fails npy-missing "missing.npy"

dump pos.npz
expect npz-positional-0 "sample 0: - float \[3,4\] sum=16.5" out.txt
expect npz-positional-1 "sample 0: - int32 \[3\] sum=3" out.txt
dump named.npz
expect npz-compressed-named-x "sample 0: x float \[3,4\]" out.txt
expect npz-compressed-named-y "sample 0: y int32 \[3\]" out.txt
dump notzip.npz;  fails npz-corrupt "notzip.npz"

dump t.pb;        expect pb-read "sample 0: x float \[3,4\] sum=16.5" out.txt
dump junk.pb;     fails pb-garbage "junk.pb"
dump int64typed.pb; expect pb-typed-int64 "sample 0: y int64 \[5\] sum=15" out.txt
dump hugetyped.pb; fails pb-dims-beyond-data "hugetyped.pb: tensor 'x': its dims need 1000000000000 elements, it holds 2 values"

dump sets
expect testset-dir-0 "sample 0: - float \[3,4\] sum=16.5" out.txt
expect testset-dir-1 "sample 1: - float \[3,4\] sum=33" out.txt
dump sets/test_data_set_1; expect testset-one "sample 0: - float \[3,4\] sum=33" out.txt
dump 'sets/test_data_set_*' 'f[13]*.npy'
if [ "$(grep -c '^sample' out.txt)" -eq 4 ] && grep -q "sample 2: - float16 \[2\]" out.txt &&
	grep -q "sample 3: - float \[3,4\] sum=16.5" out.txt; then
	echo "PASS: samples-glob"
else
	echo "FAIL: samples-glob: $(cat out.txt err.txt | head -c 400)"
fi
dump emptydir;    fails samples-empty-dir "emptydir: no data files"
dump 'nomatch*.npy'; fails samples-glob-nomatch "no data matches"

# writers: read back with numpy / onnx
dump named.npz -o w.npz
dump f16.npy -o w.npy
dump t.pb -o w.pb
dump i64.npy -o w2.npz
"$PY" - <<'EOF' > py.txt 2>&1
import numpy as np, onnx
from onnx import numpy_helper
a = np.arange(12, dtype=np.float32).reshape(3, 4) / 4
z = np.load("w.npz")
print("npz-write", "ok" if sorted(z.files) == ["x", "y"] and np.array_equal(z["x"], a)
      and z["y"].dtype == np.int32 and np.array_equal(z["y"], np.arange(3)) else "bad %s" % z.files)
w = np.load("w.npy")
print("npy-write", "ok" if w.dtype == np.float16 and np.array_equal(w, [0.5, -1.5]) else "bad %r" % w)
t = onnx.TensorProto(); t.ParseFromString(open("w.pb", "rb").read())
print("pb-write", "ok" if t.name == "x" and np.array_equal(numpy_helper.to_array(t), a) else "bad")
z = np.load("w2.npz")
print("npz-write-positional", "ok" if z.files == ["arr_0"] and z["arr_0"].dtype == np.int64 else "bad %s" % z.files)
EOF
for c in npz-write npy-write pb-write npz-write-positional; do
	if grep -q "^$c ok" py.txt; then echo "PASS: $c"; else echo "FAIL: $c: $(grep "^$c" py.txt || head -c 300 py.txt)"; fi
done
# writing is atomic and reproducible: same bytes twice
dump named.npz -o w3.npz
if cmp -s w.npz w3.npz; then echo "PASS: npz-write-reproducible"; else echo "FAIL: npz-write-reproducible: two writes differ"; fi
dump pos.npz -o two.npy
fails npy-write-two "two.npy:"
exit 0
