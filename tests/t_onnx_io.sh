#!/bin/sh
# ONNX model I/O through `quantmake convert`: byte-identical round trips of
# every model in ONNX's test data and of hand-made encodings protobuf-c would
# re-encode differently (packed dims, unknown fields, fields newer than the
# system onnx.proto); external data written, moved and read back (checked
# with onnxruntime); a tensor at an offset beyond 2 GiB of a sparse file;
# one-line errors for files that are not models; and failed saves (missing
# directory, file size limit) that leave nothing behind.
DATA=${ONNX_TESTDATA:-/usr/share/libonnx-testdata/data}
Q=$QUANTMAKE
tmp=$(mktemp -d)
trap 'chmod -R u+w "$tmp" 2>/dev/null; rm -rf "$tmp"' EXIT
cd "$tmp" || exit 2

pass() { echo "PASS: $1"; }
fail() { echo "FAIL: $1: $2"; }

# ---- 1. every test-data model round-trips byte for byte ----
# roundtrip LIST TAG: convert each model of LIST unchanged; prints the ones
# that failed or changed (two of these run at once)
roundtrip() {
	while read -r f; do
		rm -f rt$2.onnx
		if ! "$Q" convert "$f" rt$2.onnx 2> err$2; then
			echo "$f (convert failed: $(head -n1 err$2))"
		elif ! cmp -s "$f" rt$2.onnx; then
			echo "$f (bytes differ)"
		fi
	done < "$1"
}
if [ -d "$DATA/node" ]; then
	ls "$DATA"/node/*/model.onnx "$DATA"/pytorch-converted/*/model.onnx \
		"$DATA"/pytorch-operator/*/model.onnx "$DATA"/simple/*/model.onnx > all 2> /dev/null
	awk 'NR % 2 == 0' all > half0
	awk 'NR % 2 == 1' all > half1
	roundtrip half0 0 > bad0 &
	roundtrip half1 1 > bad1
	wait
	cat bad0 bad1 > bad
	for d in node pytorch-converted pytorch-operator simple; do
		n=$(grep -c "/$d/" all)
		b=$(grep "/$d/" bad | sed -E 's|.*/([^/]+)/model\.onnx|\1|' | tr '\n' ' ')
		if [ "$n" -eq 0 ]; then
			fail "roundtrip_$d" "no models found in $DATA/$d"
		elif [ -n "$b" ]; then
			fail "roundtrip_$d" "not byte-identical: $b"
		else
			pass "roundtrip_$d ($n models byte-identical)"
		fi
	done
else
	echo "SKIP: roundtrip_testdata: $DATA not found (install libonnx-testdata)"
fi

if [ ! -x "$PY" ] || ! "$PY" -c 'import onnx, onnxruntime, numpy' 2> /dev/null; then
	echo "SKIP: onnx_io_python: $PY lacks onnx/onnxruntime (run sh scripts/venv.sh)"
	exit 0
fi

# ---- 2. encodings protobuf-c would write differently ----
cat > mk.py << 'EOF'
import sys
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from pbwire import field, varint

def model(nodes, inputs, outputs, inits=(), opset=13, **kw):
    g = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], **kw)
    m.ir_version = 8
    return m

what = sys.argv[1]
if what == "packed":
    # initializer dims in the packed encoding (as proto3 writers emit them),
    # an unknown graph field first, and a duplicated ir_version
    X = helper.make_tensor_value_info("X", TensorProto.FLOAT, [2, 3])
    Y = helper.make_tensor_value_info("Y", TensorProto.FLOAT, [2, 3])
    W = numpy_helper.from_array(np.arange(6, dtype=np.float32).reshape(2, 3), "W")
    m = model([helper.make_node("Add", ["X", "W"], ["Y"])], [X], [Y])
    w = onnx.TensorProto()
    w.CopyFrom(W)
    del w.dims[:]
    init = field(1, 2, varint(2) + varint(3)) + w.SerializeToString()
    rest = onnx.GraphProto()
    rest.CopyFrom(m.graph)
    del rest.node[:]
    nodes = b"".join(field(1, 2, n.SerializeToString()) for n in m.graph.node)
    g = field(99, 0, varint(7)) + nodes + field(5, 2, init) + rest.SerializeToString()
    tail = onnx.ModelProto()
    tail.opset_import.extend(m.opset_import)
    data = field(1, 0, varint(7)) + field(1, 0, varint(8)) + field(7, 2, g) + tail.SerializeToString()
    chk = onnx.ModelProto()
    chk.ParseFromString(data)
    assert list(chk.graph.initializer[0].dims) == [2, 3] and chk.ir_version == 8
    open(sys.argv[2], "wb").write(data)
elif what == "newfields":
    # metadata_props on nodes, tensors, graphs, value_info and functions are
    # newer than Debian's onnx.proto: unknown fields to protobuf-c
    X = helper.make_tensor_value_info("X", TensorProto.FLOAT, ["N", 4])
    Y = helper.make_tensor_value_info("Y", TensorProto.FLOAT, ["N", 4])
    W = numpy_helper.from_array(np.arange(16, dtype=np.float32).reshape(4, 4), "W")
    W.metadata_props.add(key="k", value="v")
    n1 = helper.make_node("MatMul", ["X", "W"], ["T"], name="mm")
    n1.metadata_props.add(key="a", value="b")
    n2 = helper.make_node("Relu", ["T"], ["Y"], name="relu")
    m = model([n1, n2], [X], [Y], [W])
    m.graph.metadata_props.add(key="gk", value="gv")
    m.graph.value_info.append(helper.make_tensor_value_info("T", TensorProto.FLOAT, ["N", 4]))
    m.graph.value_info[0].metadata_props.add(key="vk", value="vv")
    f = helper.make_function("custom", "fn", ["a"], ["b"], [helper.make_node("Relu", ["a"], ["b"])],
                             [helper.make_opsetid("", 13)])
    f.metadata_props.add(key="fk", value="fv")
    m.functions.append(f)
    m.opset_import.append(helper.make_opsetid("custom", 1))
    # float8 and int4 initializers: element types newer than the system proto
    m.graph.initializer.append(helper.make_tensor("f8", TensorProto.FLOAT8E4M3FN, [3], [1.0, 2.0, 0.5]))
    m.graph.initializer.append(helper.make_tensor("i4", TensorProto.INT4, [3], [1, -2, 7]))
    onnx.save(m, sys.argv[2])
elif what == "ext":
    # weights of several sizes, typed fields and raw data, plus a small one
    rng = np.random.default_rng(1)
    X = helper.make_tensor_value_info("X", TensorProto.FLOAT, [2, 64])
    Y = helper.make_tensor_value_info("Y", TensorProto.FLOAT, [2, 16])
    W1 = numpy_helper.from_array(rng.standard_normal((64, 32)).astype(np.float32), "W1")
    B1 = helper.make_tensor("B1", TensorProto.FLOAT, [32], rng.standard_normal(32).astype(np.float32).tolist())
    W2 = numpy_helper.from_array(rng.standard_normal((32, 16)).astype(np.float32), "W2")
    S = numpy_helper.from_array(np.array([0.5], dtype=np.float32), "S")
    nodes = [helper.make_node("MatMul", ["X", "W1"], ["h"]), helper.make_node("Add", ["h", "B1"], ["h2"]),
             helper.make_node("Relu", ["h2"], ["h3"]), helper.make_node("MatMul", ["h3", "W2"], ["h4"]),
             helper.make_node("Mul", ["h4", "S"], ["Y"])]
    onnx.save(model(nodes, [X], [Y], [W1, B1, W2, S]), sys.argv[2])
elif what == "far":
    # one initializer stored 3 GiB into a sparse external file
    off = 3 << 30
    X = helper.make_tensor_value_info("X", TensorProto.FLOAT, [4])
    Y = helper.make_tensor_value_info("Y", TensorProto.FLOAT, [4])
    vals = np.array([1.5, -2.0, 3.25, 8.0], dtype=np.float32)
    W = onnx.TensorProto()
    W.name = "W"
    W.data_type = TensorProto.FLOAT
    W.dims.append(4)
    W.data_location = TensorProto.EXTERNAL
    for k, v in (("location", "far.bin"), ("offset", str(off)), ("length", "16")):
        W.external_data.add(key=k, value=v)
    onnx.save(model([helper.make_node("Add", ["X", "W"], ["Y"])], [X], [Y], [W]), sys.argv[2])
    with open("far.bin", "wb") as fh:
        fh.seek(off - 64)
        fh.write(b"\xff" * 64)   # junk just before: a wrong offset shows
        fh.write(vals.tobytes())
        fh.write(b"\xee" * 64)
EOF

# run MODEL: outputs of onnxruntime on a fixed input, as text
cat > run.py << 'EOF'
import sys
import numpy as np
import onnxruntime as ort
s = ort.InferenceSession(sys.argv[1], providers=["CPUExecutionProvider"])
feeds = {}
for i in s.get_inputs():
    shape = [d if isinstance(d, int) else 1 for d in i.shape]
    feeds[i.name] = np.linspace(-1, 1, int(np.prod(shape)), dtype=np.float32).reshape(shape)
for o in s.run(None, feeds):
    print(o.dtype, o.shape, o.tobytes().hex())
EOF

for what in packed newfields; do
	if ! PYTHONPATH="$ROOT/tests/lib" "$PY" mk.py $what $what.onnx 2> err; then
		fail "roundtrip_$what" "cannot build the model: $(tail -n1 err)"
		continue
	fi
	if "$Q" convert $what.onnx rt.onnx 2> err && cmp -s $what.onnx rt.onnx; then
		pass "roundtrip_$what"
	else
		fail "roundtrip_$what" "convert without options changed the bytes ($(head -n1 err))"
	fi
done
# a changed model is re-encoded (canonically) and still means the same
if [ -f packed.onnx ] && "$Q" convert packed.onnx pk_ext.onnx --external-data pk.bin --threshold 8 2> err &&
	"$Q" convert pk_ext.onnx pk_back.onnx --inline 2>> err &&
	"$PY" -c '
import sys, onnx
a = onnx.load(sys.argv[1]); b = onnx.load(sys.argv[2])
assert a.graph.initializer[0].dims == b.graph.initializer[0].dims
assert a.SerializeToString() == b.SerializeToString(), "models differ"
' packed.onnx pk_back.onnx 2>> err; then
	pass "packed_reencoded_after_change"
else
	fail "packed_reencoded_after_change" "$(tail -n1 err)"
fi

# typed data fields (float8, int4 packed in int32_data) moved to external
# data come out as the same values (checked with the onnx package)
if [ -f newfields.onnx ] && "$Q" convert newfields.onnx nf.onnx --external-data nf.bin --threshold 1 2> err &&
	"$PY" -c '
import sys, onnx
from onnx import numpy_helper as nh
a = onnx.load(sys.argv[1]); b = onnx.load(sys.argv[2])
ext = onnx.load(sys.argv[2], load_external_data=False)
assert all(t.data_location == onnx.TensorProto.EXTERNAL for t in ext.graph.initializer)
for x, y in zip(a.graph.initializer, b.graph.initializer):
    assert x.name == y.name and (nh.to_array(x) == nh.to_array(y)).all(), x.name
assert b.graph.initializer[0].metadata_props[0].key == "k", "unknown field lost"
print(len(a.graph.initializer))
' newfields.onnx nf.onnx > cnt 2>> err && [ "$(cat cnt)" = 3 ]; then
	pass "external_typed_fields_float8_int4"
else
	fail "external_typed_fields_float8_int4" "$(tail -n1 err)"
fi

# ---- 3. external data: out, across directories, back in ----
if PYTHONPATH="$ROOT/tests/lib" "$PY" mk.py ext ext.onnx 2> err && "$PY" run.py ext.onnx > ref.txt 2>> err; then
	if "$Q" convert ext.onnx x.onnx --external-data x.bin --threshold 1K 2> err; then
		# W1 (8 KiB), W2 (2 KiB) go out; B1 (128 B) and S stay inline
		n=$("$PY" -c '
import sys, onnx
m = onnx.load(sys.argv[1], load_external_data=False)
print(" ".join(t.name for t in m.graph.initializer if t.data_location == onnx.TensorProto.EXTERNAL))
' x.onnx)
		if [ "$n" != "W1 W2" ]; then
			fail "external_write" "external tensors are '$n', expected 'W1 W2'"
		elif [ ! -s x.bin ] || ls | grep -q '\.tmp\.'; then
			fail "external_write" "x.bin missing or temporary files left: $(ls | tr '\n' ' ')"
		elif "$PY" run.py x.onnx > out.txt 2> err && cmp -s ref.txt out.txt; then
			pass "external_write (onnxruntime outputs identical)"
		else
			fail "external_write" "onnxruntime outputs differ or failed: $(tail -n1 err)"
		fi
		# the small float_data bias (B1) goes out too at 64 bytes
		if "$Q" convert ext.onnx t64.onnx --external-data t64.bin --threshold 64 2> err &&
			[ "$(stat -c %s t64.bin)" -ge $((8192 + 2048 + 128)) ] &&
			"$PY" run.py t64.onnx > out64.txt 2>> err && cmp -s ref.txt out64.txt; then
			pass "external_typed_float_data"
		else
			fail "external_typed_float_data" "outputs differ or failed: $(tail -n1 err)"
		fi
		mkdir -p other
		if "$Q" convert x.onnx other/y.onnx 2> err && cmp -s x.onnx other/y.onnx &&
			[ -f other/x.bin ] && "$PY" run.py other/y.onnx > out2.txt 2>> err &&
			cmp -s ref.txt out2.txt; then
			pass "external_moved_to_other_dir"
		else
			fail "external_moved_to_other_dir" "model bytes, data file or outputs differ: $(tail -n1 err)"
		fi
		# one file per tensor (onnx's all_tensors_to_one_file=False), in a subdirectory
		mkdir -p many many_out
		if "$PY" -c '
import sys, onnx
m = onnx.load(sys.argv[1])
onnx.save(m, sys.argv[2], save_as_external_data=True, all_tensors_to_one_file=False, size_threshold=64)
' ext.onnx many/m.onnx 2> err && "$Q" convert many/m.onnx many_out/m.onnx 2>> err &&
			cmp -s many/m.onnx many_out/m.onnx && [ "$(ls many_out | wc -l)" -eq "$(ls many | wc -l)" ] &&
			"$PY" run.py many_out/m.onnx > out4.txt 2>> err && cmp -s ref.txt out4.txt; then
			pass "external_many_files_moved ($(ls many_out | wc -l) files)"
		else
			fail "external_many_files_moved" "$(ls many_out | tr '\n' ' ') $(tail -n1 err)"
		fi
		if "$Q" convert other/y.onnx back.onnx --inline 2> err && cmp -s ext.onnx back.onnx; then
			pass "external_inline_restores_original_bytes"
		else
			fail "external_inline_restores_original_bytes" "back.onnx differs from ext.onnx: $(head -n1 err)"
		fi
		# in place, over the file its data is read from (mapped, then replaced)
		cp x.onnx inplace.onnx && cp x.bin inplace.bin
		if "$Q" convert inplace.onnx inplace.onnx --external-data inplace.bin --threshold 4K 2> err &&
			[ "$(stat -c %s inplace.bin)" -lt "$(stat -c %s x.bin)" ] &&
			"$PY" run.py inplace.onnx > out3.txt 2>> err && cmp -s ref.txt out3.txt; then
			pass "external_rewrite_in_place"
		else
			fail "external_rewrite_in_place" "outputs differ or failed: $(tail -n1 err)"
		fi
		# read our external data and inline it with the onnx package's loader too
		if "$PY" -c '
import sys, onnx
from onnx import numpy_helper as nh
a = onnx.load(sys.argv[1]); b = onnx.load(sys.argv[2])
for x, y in zip(a.graph.initializer, b.graph.initializer):
    assert x.name == y.name and (nh.to_array(x) == nh.to_array(y)).all(), x.name
' ext.onnx x.onnx 2> err; then
			pass "external_read_by_onnx"
		else
			fail "external_read_by_onnx" "$(tail -n1 err)"
		fi
		# a damaged external file is a named error, not garbage weights
		head -c 100 x.bin > short.bin
		"$PY" -c '
import sys, onnx
m = onnx.load(sys.argv[1], load_external_data=False)
for t in m.graph.initializer:
    for e in t.external_data:
        if e.key == "location":
            e.value = "short.bin"
onnx.save(m, sys.argv[2])
' x.onnx short.onnx
		"$Q" convert short.onnx sh_in.onnx --inline 2> err
		rc=$?
		if [ $rc -eq 1 ] && grep -q "tensor 'W1'.*short.bin" err && [ ! -e sh_in.onnx ]; then
			pass "external_short_file_error"
		else
			fail "external_short_file_error" "rc=$rc: $(head -n1 err)"
		fi
	else
		fail "external_write" "convert failed: $(head -n1 err)"
	fi
else
	fail "external_write" "cannot build or run the model: $(tail -n1 err)"
fi
# a missing data file: re-saving beside it keeps the reference; moving the
# model elsewhere cannot, and fails naming the tensor and file
if [ -f x.onnx ]; then
	mkdir -p lone lone_out
	cp x.onnx lone/
	"$Q" convert lone/x.onnx lone/x2.onnx 2> err
	rc1=$?
	"$Q" convert lone/x.onnx lone_out/x.onnx 2> err
	rc2=$?
	if [ $rc1 -eq 0 ] && cmp -s lone/x.onnx lone/x2.onnx && [ $rc2 -eq 1 ] &&
		grep -q "tensor 'W1'.*lone/x.bin.*No such file" err && [ -z "$(ls lone_out)" ]; then
		pass "external_missing_file"
	else
		fail "external_missing_file" "rc=$rc1,$rc2: $(cat err); left: $(ls lone_out)"
	fi
fi
# locations that leave the model's directory are refused
for loc in /etc/passwd ../x.bin a/../../x.bin; do
	"$PY" -c '
import sys, onnx
m = onnx.load(sys.argv[1], load_external_data=False)
for e in m.graph.initializer[0].external_data:
    if e.key == "location":
        e.value = sys.argv[3]
onnx.save(m, sys.argv[2])
' x.onnx bad.onnx "$loc" 2> /dev/null
	"$Q" convert bad.onnx bad_in.onnx --inline 2> err
	rc=$?
	if [ $rc -ne 0 ] && grep -q "location '$loc'" err && [ ! -e bad_in.onnx ]; then
		pass "external_location_refused $loc"
	else
		fail "external_location_refused $loc" "rc=$rc: $(head -n1 err)"
	fi
done

# ---- 4. a tensor 3 GiB into a sparse external file ----
if PYTHONPATH="$ROOT/tests/lib" "$PY" mk.py far far.onnx 2> err; then
	"$PY" run.py far.onnx > far_ref.txt 2> err_ort
	if "$Q" convert far.onnx far_in.onnx --inline 2> err && "$PY" -c '
import sys, onnx, numpy as np
from onnx import numpy_helper as nh
w = nh.to_array(onnx.load(sys.argv[1]).graph.initializer[0])
assert (w == np.array([1.5, -2.0, 3.25, 8.0], dtype=np.float32)).all(), w
' far_in.onnx 2>> err; then
		pass "external_offset_3GiB_read"
	else
		fail "external_offset_3GiB_read" "$(tail -n1 err)"
	fi
	if [ -s far_ref.txt ] && "$PY" run.py far_in.onnx > far_out.txt 2> err && cmp -s far_ref.txt far_out.txt; then
		pass "external_offset_3GiB_matches_onnxruntime"
	else
		fail "external_offset_3GiB_matches_onnxruntime" "$(tail -n1 err_ort) $(tail -n1 err)"
	fi
	# moved to another directory: same model bytes, data at the same offset,
	# the file stays sparse (far less than 3 GiB allocated)
	mkdir -p farcopy
	if "$Q" convert far.onnx farcopy/far.onnx 2> err && cmp -s far.onnx farcopy/far.onnx &&
		[ "$(stat -c %s farcopy/far.bin)" -eq $(((3 << 30) + 16)) ] &&
		[ "$(du -k farcopy/far.bin | cut -f1)" -lt 65536 ] &&
		"$PY" run.py farcopy/far.onnx > far_out2.txt 2>> err && cmp -s far_ref.txt far_out2.txt; then
		pass "external_offset_3GiB_moved_sparse"
	else
		fail "external_offset_3GiB_moved_sparse" "$(tail -n1 err)"
	fi
	if "$Q" inspect far.onnx > far.txt 2> err &&
		grep -qxF "  far.bin: 3221225552 bytes (3.0 GiB), 1 tensors" far.txt; then
		pass "external_offset_3GiB_inspect"
	else
		fail "external_offset_3GiB_inspect" "$(grep far.bin far.txt) $(cat err)"
	fi
	rm -rf farcopy far.bin
else
	fail "external_offset_3GiB_read" "cannot build the model: $(tail -n1 err)"
fi

# a model that would be over 2 GiB inline is refused before anything is
# written (the 2.4 GB tensor lives in a sparse file: nothing is read)
if "$PY" - << 'EOF' 2> err; then
import onnx
from onnx import TensorProto, helper
n = 600_000_000
W = onnx.TensorProto(name="W", data_type=TensorProto.FLOAT, dims=[n], data_location=TensorProto.EXTERNAL)
W.external_data.add(key="location", value="huge.bin")
X = helper.make_tensor_value_info("X", TensorProto.FLOAT, [n])
Y = helper.make_tensor_value_info("Y", TensorProto.FLOAT, [n])
m = helper.make_model(helper.make_graph([helper.make_node("Add", ["X", "W"], ["Y"])], "g", [X], [Y], [W]),
                      opset_imports=[helper.make_opsetid("", 13)])
m.ir_version = 8
onnx.save(m, "huge.onnx")
with open("huge.bin", "wb") as f:
    f.truncate(4 * n)
EOF
	"$Q" convert huge.onnx huge_in.onnx --inline 2> err
	rc=$?
	if [ $rc -eq 1 ] && grep -q "over protobuf's 2 GiB limit" err && [ ! -e huge_in.onnx ] &&
		! ls | grep -q '\.tmp\.'; then
		pass "inline_over_2GiB_refused"
	else
		fail "inline_over_2GiB_refused" "rc=$rc: $(cat err)"
	fi
	rm -f huge.bin
else
	fail "inline_over_2GiB_refused" "cannot build the model: $(tail -n1 err)"
fi

# ---- 5. files that are not models ----
f=$DATA/pytorch-converted/test_ConvTranspose2d/model.onnx
[ -f "$f" ] || f=ext.onnx
size=$(stat -c %s "$f")
head -c $((size / 2)) "$f" > truncated.onnx
printf 'this is a text file, not a model\n' > garbage.onnx
"$PY" -c 'import random, sys; random.seed(7); sys.stdout.buffer.write(bytes(random.randrange(256) for _ in range(4096)))' > random.onnx
: > empty.onnx
mkdir -p adir.onnx
for bad in truncated.onnx garbage.onnx random.onnx empty.onnx adir.onnx missing.onnx; do
	"$Q" convert $bad out_$bad > out 2> err
	rc=$?
	if [ $rc -eq 2 ] && [ "$(wc -l < err)" -eq 1 ] && grep -q "^quantmake: not an ONNX model: $bad: " err &&
		[ ! -e out_$bad ]; then
		pass "not_a_model $bad"
	else
		fail "not_a_model $bad" "rc=$rc, stderr: $(head -c 300 err)"
	fi
done

# ---- 6. saves that cannot complete leave nothing behind ----
"$Q" convert ext.onnx nodir/out.onnx 2> err
rc=$?
if [ $rc -eq 1 ] && [ "$(wc -l < err)" -eq 1 ] && grep -q "nodir" err && [ ! -e nodir ]; then
	pass "save_missing_dir"
else
	fail "save_missing_dir" "rc=$rc: $(cat err)"
fi
# an unwritable directory: a chmod'ed one, or /sys when root ignores modes
ro=
if [ "$(id -u)" != 0 ]; then
	mkdir ro && chmod 555 ro && ro=ro
elif [ -d /sys ]; then
	if touch /sys/qm-probe 2> /dev/null; then
		rm -f /sys/qm-probe
	else
		ro=/sys
	fi
fi
if [ -n "$ro" ]; then
	"$Q" convert ext.onnx $ro/out.onnx --external-data out.bin 2> err
	rc=$?
	if [ $rc -eq 1 ] && [ "$(wc -l < err)" -eq 1 ] &&
		grep -q "cannot create a file in '$ro': Permission denied" err &&
		[ ! -e $ro/out.onnx ] && [ ! -e $ro/out.bin ]; then
		pass "save_unwritable_dir"
	else
		fail "save_unwritable_dir" "rc=$rc: $(cat err)"
	fi
else
	echo "SKIP: save_unwritable_dir: no unwritable directory available"
fi
# a write error midway (the file size limit stands in for a full disk):
# the previous output survives untouched and no temporary file remains
mkdir -p lim
printf 'previous\n' > lim/out.onnx
printf 'previous\n' > lim/out.bin
(trap '' XFSZ; ulimit -f 8; exec "$Q" convert ext.onnx lim/out.onnx) 2> err
rc=$?
if [ $rc -eq 1 ] && grep -q "cannot write 'lim/out.onnx': File too large" err &&
	[ "$(cat lim/out.onnx)" = previous ] && [ "$(ls lim | wc -l)" -eq 2 ]; then
	pass "save_write_error_model"
else
	fail "save_write_error_model" "rc=$rc: $(cat err); left: $(ls lim | tr '\n' ' ')"
fi
(trap '' XFSZ; ulimit -f 8; exec "$Q" convert ext.onnx lim/out.onnx --external-data out.bin --threshold 4K) 2> err
rc=$?
if [ $rc -eq 1 ] && grep -q "cannot write 'lim/out.bin': File too large" err &&
	[ "$(cat lim/out.onnx)" = previous ] && [ "$(cat lim/out.bin)" = previous ] &&
	[ "$(ls lim | wc -l)" -eq 2 ]; then
	pass "save_write_error_external"
else
	fail "save_write_error_external" "rc=$rc: $(cat err); left: $(ls lim | tr '\n' ' ')"
fi
# option errors are usage errors
"$Q" convert ext.onnx o.onnx --threshold lots 2> err
rc1=$?
"$Q" convert ext.onnx o.onnx --inline --external-data a.bin 2> err
rc2=$?
"$Q" convert ext.onnx o.onnx --external-data sub/a.bin 2> err
rc3=$?
if [ $rc1 -eq 2 ] && [ $rc2 -eq 2 ] && [ $rc3 -eq 1 ] && grep -q "plain file name" err && [ ! -e o.onnx ]; then
	pass "convert_option_errors"
else
	fail "convert_option_errors" "rc=$rc1,$rc2,$rc3: $(cat err)"
fi
exit 0
