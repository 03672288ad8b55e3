#!/bin/sh
# Data I/O of the interpreter (src/exec/dataio.c): .npy (v1/v2/v3), .npz
# (stored, deflated, zip64; damaged ones), TensorProto .pb, test_data_set directories, globs;
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
# a header dict longer than most (numpy pads to 64 bytes), keys in double
# quotes, the shape far from the start: a .npy, and the member of an .npz
d = '{"descr": "<f4", "fortran_order": False,' + " " * 900 + '"shape": (3, 4), }'
d = d + " " * (1000 - 1 - len(d)) + "\n"
long = b"\x93NUMPY\x01\x00" + struct.pack("<H", len(d)) + d.encode() + a.tobytes()
open("longhdr.npy", "wb").write(long)
import zipfile
with zipfile.ZipFile("longhdr.npz", "w", zipfile.ZIP_DEFLATED) as z:
    z.writestr("x.npy", long)
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
dump longhdr.npy; expect npy-long-header "sample 0: - float \[3,4\] sum=16.5" out.txt
dump longhdr.npz; expect npz-long-header "sample 0: x float \[3,4\] sum=16.5" out.txt
# a pipe: its size is not known ahead, read to its end
mkfifo fifo.npy && { timeout 20 sh -c 'cat f32.npy > fifo.npy' & }
dump fifo.npy;    expect npy-from-pipe "sample 0: - float \[3,4\] sum=16.5" out.txt
wait

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
# ---- .npz reading: minizip for what numpy writes, libarchive for the rest ----
# (src/exec/dataio.c: npz_read). Stored and deflated members, zip64 local
# headers (numpy writes them always) through minizip; a zip64 central
# directory (numpy's for arrays of 4 GiB or more, made here with
# zipfile's limits lowered), bzip2 and an empty zip through libarchive.
"$PY" - <<'EOF' || { echo "FAIL: npz-setup: python could not write the .npz fixtures"; exit 0; }
import io, struct, zipfile
import numpy as np
a = np.arange(12, dtype=np.float32).reshape(3, 4) / 4
npy = io.BytesIO(); np.save(npy, a); npy = npy.getvalue()
# a deflated member bigger than minizip's 16 KiB buffer, and a small one
big = (np.arange(300000, dtype=np.int32) % 977) - 400
np.savez_compressed("bigdefl.npz", big=big, a=a)
def patch_cd(raw, off, fmt, v):  # a field of the (first) central directory entry
    c = raw.find(b"PK\x01\x02"); raw[c + off:c + off + struct.calcsize(fmt)] = struct.pack(fmt, v)
with zipfile.ZipFile("f64.npz", "w") as z:
    with z.open("x.npy", "w", force_zip64=True) as f:
        f.write(npy)
limit, count = zipfile.ZIP64_LIMIT, zipfile.ZIP_FILECOUNT_LIMIT
zipfile.ZIP64_LIMIT, zipfile.ZIP_FILECOUNT_LIMIT = 16, 1
with zipfile.ZipFile("z64.npz", "w", zipfile.ZIP_DEFLATED) as z:
    z.writestr("x.npy", npy)
    z.writestr("y.npy", npy)
zipfile.ZIP64_LIMIT, zipfile.ZIP_FILECOUNT_LIMIT = limit, count
raw = open("named.npz", "rb").read()
open("trunc.npz", "wb").write(raw[:len(raw) // 2])
raw = bytearray(open("pos.npz", "rb").read())  # np.savez: stored members
nl, xl = struct.unpack("<HH", raw[26:30])
raw[30 + nl + xl + 128 + 5] ^= 0x40  # a byte of arr_0's data
open("crc.npz", "wb").write(raw)
# stored members are taken in place: sizes that disagree, data past the end
# (the first member's local header, at 0, and its central entry agree)
def patch_both(raw, csize, usize):
    raw[18:26] = struct.pack("<II", csize, usize)
    patch_cd(raw, 20, "<Q", csize | usize << 32)
raw = bytearray(open("pos.npz", "rb").read())
patch_both(raw, 100, 176)
open("stsize.npz", "wb").write(raw)
raw = bytearray(open("pos.npz", "rb").read())
patch_both(raw, len(raw) - 40, len(raw) - 40)
open("stpast.npz", "wb").write(raw)
with zipfile.ZipFile("longname.npz", "w") as z:  # a name and an extra field of over 256 bytes
    i = zipfile.ZipInfo("n" * 300 + ".npy"); i.extra = struct.pack("<HH", 0xcafe, 400) + bytes(400)
    z.writestr(i, npy)
with zipfile.ZipFile("dir.npz", "w") as z:
    z.writestr(zipfile.ZipInfo("sub/"), b"")
    z.writestr("x.npy", npy)
with zipfile.ZipFile("link.npz", "w") as z:
    z.writestr("x.npy", npy)
    i = zipfile.ZipInfo("y.npy"); i.create_system = 3; i.external_attr = 0o120777 << 16
    z.writestr(i, b"x.npy")
with zipfile.ZipFile("enc.npz", "w") as z:
    z.writestr("x.npy", npy)
raw = bytearray(open("enc.npz", "rb").read())
raw[6] |= 1; patch_cd(raw, 8, "<H", 1)  # the encryption flag, local and central
open("enc.npz", "wb").write(raw)
with zipfile.ZipFile("bz2.npz", "w", zipfile.ZIP_BZIP2) as z:
    z.writestr("x.npy", npy)
with zipfile.ZipFile("m77.npz", "w") as z:
    z.writestr("x.npy", npy)
raw = bytearray(open("m77.npz", "rb").read())
raw[8:10] = struct.pack("<H", 77); patch_cd(raw, 10, "<H", 77)
open("m77.npz", "wb").write(raw)
with zipfile.ZipFile("bigsize.npz", "w") as z:
    z.writestr("x.npy", npy)
raw = bytearray(open("bigsize.npz", "rb").read())
patch_cd(raw, 24, "<I", 0xfffffff0)  # uncompressed size, central directory only
open("bigsize.npz", "wb").write(raw)
zipfile.ZipFile("noarrays.npz", "w").close()
# 65535 members fill the end record's count (minizip then reads on to the
# end of the directory); 65536 need zip64's end record
b = io.BytesIO(); np.save(b, np.float32(1.0)); one = b.getvalue()
for n in (65535, 65536):
    with zipfile.ZipFile("n%d.npz" % n, "w") as z:
        for i in range(n):
            z.writestr("a%05d.npy" % i, one)
# calibration samples: the same arrays as .npy, stored, deflated, zip64
import os
r = np.random.default_rng(5)
for d in ("c_npy", "c_st", "c_df", "c_64"):
    os.makedirs("proj/" + d)
zipfile.ZIP64_LIMIT = 16
for i in range(40):
    x = (r.standard_normal((1, 8)) * (1 + i % 5)).astype(np.float32)
    np.save("proj/c_npy/s%02d.npy" % i, x)
    np.savez("proj/c_st/s%02d.npz" % i, x=x)
    np.savez_compressed("proj/c_df/s%02d.npz" % i, x=x)
    with zipfile.ZipFile("proj/c_64/s%02d.npz" % i, "w") as z:
        b = io.BytesIO(); np.save(b, x); z.writestr("x.npy", b.getvalue())
zipfile.ZIP64_LIMIT = limit
import onnx
from onnx import TensorProto, helper, numpy_helper
w = numpy_helper.from_array(r.standard_normal((8, 4)).astype(np.float32), "w")
g = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["m"], name="mm"),
                       helper.make_node("Relu", ["m"], ["y"], name="relu")], "g",
                      [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 8])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4])], [w])
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]); m.ir_version = 7
onnx.save(m, "proj/model.onnx")
os.makedirs("proj/rules")
EOF

dump bigdefl.npz -o back.npz
"$PY" - <<'EOF' > py.txt 2>&1
import numpy as np
z, a = np.load("back.npz"), np.arange(12, dtype=np.float32).reshape(3, 4) / 4
big = (np.arange(300000, dtype=np.int32) % 977) - 400
print("ok" if sorted(z.files) == ["a", "big"] and np.array_equal(z["big"], big) and z["big"].dtype == np.int32
      and np.array_equal(z["a"], a) else "bad %s" % z.files)
EOF
if grep -q "^ok" py.txt; then echo "PASS: npz-deflate-large"; else echo "FAIL: npz-deflate-large: $(head -c 300 py.txt err.txt)"; fi
dump f64.npz;     expect npz-zip64-local-headers "sample 0: x float \[3,4\] sum=16.5" out.txt
dump z64.npz
if [ "$(grep -c 'float \[3,4\] sum=16.5' out.txt)" -eq 2 ] && grep -q "sample 0: y float" out.txt; then
	echo "PASS: npz-zip64-central-directory"
else
	echo "FAIL: npz-zip64-central-directory: $(head -c 300 out.txt err.txt)"
fi
dump dir.npz
if [ "$(grep -c '^sample' out.txt)" -eq 1 ] && grep -q "sample 0: x float \[3,4\] sum=16.5" out.txt; then
	echo "PASS: npz-directory-entry-skipped"
else
	echo "FAIL: npz-directory-entry-skipped: $(head -c 300 out.txt err.txt)"
fi
dump longname.npz; expect npz-long-member-name "sample 0: n\{300\} float \[3,4\] sum=16.5" out.txt
dump bz2.npz;     expect npz-bzip2 "sample 0: x float \[3,4\] sum=16.5" out.txt
dump trunc.npz;   fails npz-truncated "trunc.npz: not a valid .npz (zip) file: "
dump crc.npz;     fails npz-stored-crc "crc.npz: member 'arr_0.npy': CRC mismatch, its data is corrupt"
dump stsize.npz;  fails npz-stored-sizes "stsize.npz: member 'arr_0.npy': stored, yet its header says 176 bytes in 100 (damaged zip)"
dump stpast.npz;  fails npz-stored-past-end "stpast.npz: member 'arr_0.npy': its data runs past the end of the file (truncated)"
dump link.npz;    fails npz-symlink "link.npz: member 'y.npy' is a symbolic link, not a regular file"
dump enc.npz;     fails npz-encrypted "enc.npz: member 'x.npy' is encrypted"
dump m77.npz;     fails npz-unknown-method "m77.npz: member 'x.npy': Unsupported ZIP compression method (77"
dump bigsize.npz; fails npz-size-beyond-file "bigsize.npz: member 'x.npy': its header says 4294967280 bytes, more than a [0-9]*-byte file can hold"
dump noarrays.npz; fails npz-empty "noarrays.npz: the archive holds no arrays"
for n in 65535 65536; do
	dump n$n.npz
	if [ "$(grep -c '^sample 0: a[0-9]* float \[\] sum=1$' out.txt)" -eq $n ] && grep -q "a$((n - 1)) float" out.txt; then
		echo "PASS: npz-$n-members"
	else
		echo "FAIL: npz-$n-members: $(grep -c '^sample' out.txt) arrays read: $(head -c 300 err.txt)"
	fi
done

# what numpy writes is read without loading libarchive (a dlopen of
# libxml2, ICU, libstdc++ ... that costs milliseconds); the zip64 central
# directory still loads it
la_loaded() { LD_DEBUG=files "$QM" run --dump "$1" 2>&1 >/dev/null | grep -q 'file=libarchive\.so.*generating link map'; }
if ! la_loaded pos.npz && ! la_loaded named.npz && ! la_loaded bigdefl.npz && la_loaded z64.npz; then
	echo "PASS: npz-read-without-libarchive"
else
	echo "FAIL: npz-read-without-libarchive: libarchive loaded for a stored/deflated .npz, or not for a zip64 one"
fi

# a build calibrates to the same bytes from .npy, stored, deflated and
# zip64 .npz samples; a truncated sample fails the build naming the file
build() { # DATA: calibrate proj on DATA, the log in proj/log.DATA
	printf '[model m]\nsource = model.onnx\nquantize = static\nquantize.calibration = %s\n' "$1" > proj/rules/m.rules
	rm -rf proj/cache proj/build
	QUANTMAKE_CACHE=$T/proj/cache "$QM" -C "$T/proj" m:calibrate > "proj/log.$1" 2>&1
}
if build c_npy && cp proj/build/m/calibrate/calibration.stats stats.npy; then
	for d in c_st c_df c_64; do
		if build $d && cmp -s proj/build/m/calibrate/calibration.stats stats.npy; then
			echo "PASS: npz-calibration-bytes-$d"
		else
			echo "FAIL: npz-calibration-bytes-$d: statistics differ from the .npy samples' ($(tail -2 proj/log.$d))"
		fi
	done
	truncate -s -30 proj/c_df/s07.npz
	build c_df
	st=$?
	if [ $st -eq 1 ] && grep -q "c_df/s07.npz: not a valid .npz (zip) file: " proj/log.c_df &&
		[ ! -e proj/build/m/calibrate/calibration.stats ]; then
		echo "PASS: npz-truncated-sample-fails-build"
	else
		echo "FAIL: npz-truncated-sample-fails-build: exit $st: $(tail -3 proj/log.c_df)"
	fi
else
	echo "FAIL: npz-calibration-bytes: the .npy build failed: $(tail -3 proj/log.c_npy)"
fi
exit 0
