#!/bin/sh
# Hardening against hostile or broken input (issue 22): deep nesting in
# models and .pb files is refused at a documented limit with the file named,
# and a model at the limit goes through every stage; symbolic links that
# lead outside a model's directory or the project are refused wherever a
# path is read; model names that are not plain path components are a
# rule-file error; verify-release refuses unsafe archives; constant folding
# and .npz members are bounded; calibration data without finite values
# fails and partly non-finite data warns.
. "$(dirname "$0")/lib/common.sh"
mktmp
Q=$QUANTMAKE
if ! "$PY" -c 'import onnx, onnxruntime, numpy' 2>/dev/null; then
	fail "hardening tests" "$PY lacks onnx, onnxruntime or numpy (run scripts/venv.sh)"
	exit 0
fi
MK="$PY $ROOT/tests/models/mkdeep.py"

# ---- deep nesting (item 2) ----
D=$TMPD/deep
mkdir -p "$D"
$MK types 12000 "$D/types12000.onnx" && $MK ifs 3000 "$D/ifs3000.onnx" &&
	$MK types 256 "$D/types256.onnx" && $MK types 257 "$D/types257.onnx" &&
	$MK ifs 64 "$D/ifs64.onnx" && $MK ifs 65 "$D/ifs65.onnx" &&
	mkdir -p "$D/s60000/t" "$D/s256/t" "$D/s257/t" &&
	$MK seq 60000 "$D/s60000/t/input_0.pb" && $MK seq 255 "$D/s256/t/input_0.pb" &&
	$MK seq 257 "$D/s257/t/input_0.pb" && $MK seqmodel 0 "$D/seq.onnx" &&
	$MK seqmodel 255 "$D/seq256.onnx" ||
	fail "make the deep models" "mkdeep.py failed"

expect_err "12,000 nested sequence types: refused, file and limit named" 2 \
	"types12000.onnx: types nested more than 256 levels deep" "$Q" inspect "$D/types12000.onnx"
expect_err "3,000 nested If bodies: refused, file and limit named" 2 \
	"ifs3000.onnx: subgraphs nested more than 64 levels deep" "$Q" inspect "$D/ifs3000.onnx"
expect_err "a .pb SequenceProto 60,000 deep: refused, file and limit named" 2 \
	"s60000/t/input_0.pb: values nested more than 256 levels deep" "$Q" run "$D/seq.onnx" -d "$D/s60000/t"
expect_err "types one past the limit are refused" 2 "types nested more than 256" "$Q" inspect "$D/types257.onnx"
expect_err "subgraphs one past the limit are refused" 2 "subgraphs nested more than 64" "$Q" inspect "$D/ifs65.onnx"
expect_err "sequences one past the limit are refused" 2 "values nested more than 256" \
	"$Q" run "$D/seq.onnx" -d "$D/s257/t"
check "types at the limit: inspect" "$Q" inspect "$D/types256.onnx"
check "types at the limit: infer-shapes" "$Q" infer-shapes "$D/types256.onnx" "$D/t256i.onnx"
check "types at the limit: preprocess" "$Q" preprocess "$D/types256.onnx" "$D/t256p.onnx"
check "sequences at the limit: run" "$Q" run "$D/seq256.onnx" -d "$D/s256/t"
"$PY" -c "
import numpy as np
np.save('$D/x.npy', np.array([1., -2.], np.float32)); np.save('$D/c.npy', np.array(True))" &&
	"$Q" run "$D/ifs64.onnx" -i x="$D/x.npy" -i c="$D/c.npy" -o "$D/o.npz" > /dev/null 2>&1 &&
	"$PY" -c "
import numpy as np
o = np.load('$D/o.npz')['o63']
assert np.allclose(o, np.array([1., -2.]) @ np.array([[0.5, -1.], [2., 0.25]])), o" 2> "$D/err" &&
	pass "64 nested If bodies run to the right values" ||
	fail "64 nested If bodies run to the right values" "$(head -c 300 "$D/err")"

# a whole build at the limit (threads: -j2), and one past it in a build
P=$TMPD/pdeep
mkdir -p "$P/rules" "$P/models" "$P/cal"
cp "$D/ifs64.onnx" "$D/ifs65.onnx" "$P/models/"
"$PY" -c "
import numpy as np
for i in range(4):
    np.savez('$P/cal/s%d.npz' % i, x=np.random.default_rng(i).standard_normal(2).astype(np.float32), c=np.array(i % 2 == 0))"
cat > "$P/rules/main.rules" <<'R'
[model deep]
source = models/ifs64.onnx
preprocess = default
quantize = static
quantize.calibration = cal/*.npz
verify.data = cal/*.npz

[model deepd]
source = models/ifs64.onnx
quantize = dynamic
verify.data = cal/*.npz
R
(cd "$P" && "$Q" -j2 all) > "$TMPD/out" 2>&1 && [ -s "$P/build/deep/deep.onnx" ] && [ -s "$P/build/deepd/deepd.onnx" ] &&
	pass "a build of 64 nested If bodies: preprocess, calibrate, quantize, verify" ||
	fail "a build of 64 nested If bodies: preprocess, calibrate, quantize, verify" "$(tail -c 400 "$TMPD/out")"
printf '\n[model deeper]\nsource = models/ifs65.onnx\n' >> "$P/rules/main.rules"
expect_err "65 nested If bodies in a build: the stage fails with the limit" 1 \
	"subgraphs nested more than 64 levels deep" sh -c "cd '$P' && '$Q' deeper"

# ---- model names (item 4) ----
N=$TMPD/names
mkdir -p "$N/rules" "$N/models"
cp "$TESTDATA/node/test_relu/model.onnx" "$N/models/m.onnx"
for name in .. . .quantmake .hidden; do
	printf '[model ok]\nsource = models/m.onnx\n\n[model %s]\nsource = models/m.onnx\n' "$name" > "$N/rules/main.rules"
	expect_err "model name '$name' is a rule-file error at file:line" 2 \
		"rules/main.rules:4: invalid model name '\\$name'" sh -c "cd '$N' && '$Q' all"
done
printf '[model a/b]\nsource = models/m.onnx\n' > "$N/rules/main.rules"
expect_err "model name with a slash is a rule-file error" 2 "rules/main.rules:1: invalid model name 'a/b'" \
	sh -c "cd '$N' && '$Q' all"
printf '[model ok]\nsource = models/m.onnx\n[model x : ..]\nsource = models/m.onnx\n' > "$N/rules/main.rules"
expect_err "base model name '..' is a rule-file error" 2 "rules/main.rules:3: invalid base model name" \
	sh -c "cd '$N' && '$Q' all"
printf '[release .]\nmodels = ok\n[model ok]\nsource = models/m.onnx\n' > "$N/rules/main.rules"
expect_err "release name '.' is a rule-file error" 2 "rules/main.rules:1: invalid release name" \
	sh -c "cd '$N' && '$Q' all"
[ ! -e "$N/...onnx" ] && [ ! -e "$N/quant.json" ] && [ ! -e "$N/build/.quantmake/.quantmake.onnx" ] &&
	pass "nothing written outside build/<model>" || fail "nothing written outside build/<model>" "$(ls -a "$N")"
printf '[model a.b-c_1]\nsource = models/m.onnx\n' > "$N/rules/main.rules"
check "a name with an inner dot still builds" sh -c "cd '$N' && '$Q' all && test -s build/a.b-c_1/a.b-c_1.onnx"

# ---- symbolic links out of the project (item 3) ----
S=$TMPD/sym
O=$TMPD/outside
mkdir -p "$S/rules" "$S/models" "$S/cal" "$O/caldir" "$S/docs"
"$PY" - "$S" "$O" <<'PY' || fail "make the symlink project" "python failed"
import sys, numpy as np, onnx
from onnx import helper, TensorProto
S, O = sys.argv[1:]
w = np.arange(8, dtype=np.float32).reshape(2, 4)
def model(loc):
    t = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[2, 4])
    t.data_location = TensorProto.EXTERNAL
    for k, v in (("location", loc), ("offset", "0"), ("length", "32")):
        e = t.external_data.add(); e.key = k; e.value = v
    g = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])], [t])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
onnx.save(model("link.bin"), S + "/models/link.onnx")
onnx.save(model("in.bin"), S + "/models/in.onnx")
onnx.save(model("alias.bin"), S + "/models/alias.onnx")
w.tofile(S + "/models/in.bin")
# the secret: bytes outside the project that would pass for the tensor
(w + 100).tofile(O + "/secret.bin")
onnx.save(model("in.bin"), O + "/m.onnx")
w.tofile(O + "/in.bin")
x = np.ones((1, 2), np.float32)
np.save(O + "/x.npy", x); np.save(O + "/caldir/x.npy", x); np.save(S + "/cal/x.npy", x)
PY
ln -s "$O/secret.bin" "$S/models/link.bin"
ln -s in.bin "$S/models/alias.bin"
cat > "$S/rules/main.rules" <<'R'
[model link]
source = models/link.onnx
R
expect_err "external data through a symlink out of the model's directory: refused" 1 \
	"external data location 'link.bin' leads outside the model's directory" sh -c "cd '$S' && '$Q' all"
if grep -rqs "$(printf '\000\000\310B')" "$S/cache/objects" "$S/build" 2>/dev/null; then
	fail "the outside bytes reach neither the cache nor build/" "found in $S"
else
	pass "the outside bytes reach neither the cache nor build/"
fi
"$Q" inspect "$S/models/link.onnx" 2>&1 | grep -q "link.bin: missing" &&
	pass "inspect does not read the outside link" || fail "inspect does not read the outside link"
expect_err "run refuses the outside link too" 1 "leads outside the model's directory" \
	"$Q" run "$S/models/link.onnx" -i "x=$O/x.npy"
cat > "$S/rules/main.rules" <<'R'
[model alias]
source = models/alias.onnx
quantize = dynamic
R
check "external data through a symlink inside the directory still builds" sh -c "cd '$S' && '$Q' all"
ln -s "$O/m.onnx" "$S/models/out.onnx"
printf '[model out]\nsource = models/out.onnx\n' > "$S/rules/main.rules"
expect_err "source through a symlink out of the project: refused at file:line" 2 \
	"rules/main.rules:2: model 'out': source 'models/out.onnx' leads outside the project" sh -c "cd '$S' && '$Q' all"
ln -s "$O/x.npy" "$S/cal/outx.npy"
printf '[model in]\nsource = models/in.onnx\nquantize = static\nquantize.calibration = cal/*.npy\n' > "$S/rules/main.rules"
expect_err "calibration file through a symlink out of the project: refused" 2 \
	"quantize.calibration: 'cal/outx.npy' leads outside the project" sh -c "cd '$S' && '$Q' all"
rm "$S/cal/outx.npy"
ln -s "$O/caldir" "$S/caldir"
printf '[model in]\nsource = models/in.onnx\nquantize = static\nquantize.calibration = caldir\n' > "$S/rules/main.rules"
expect_err "calibration directory through a symlink out of the project: refused" 2 \
	"quantize.calibration: 'caldir' leads outside the project" sh -c "cd '$S' && '$Q' all"
ln -s "$O/x.npy" "$S/cal/zz.npy"
printf '[model in]\nsource = models/in.onnx\nquantize = dynamic\nverify.data = cal\n' > "$S/rules/main.rules"
expect_err "a verify sample linked out of a data directory: refused" 2 \
	"verify.data: 'cal/zz.npy' leads outside the project" sh -c "cd '$S' && '$Q' all"
rm "$S/cal/zz.npy"
ln -s "$O/x.npy" "$S/dep.npy"
printf '[model e]\nexport = cp models/in.onnx models/in.bin "$out_dir"/ && mv "$out_dir"/in.onnx "$out"\nexport.deps = dep.npy\n' > "$S/rules/main.rules"
expect_err "export.deps through a symlink out of the project: refused" 2 \
	"export.deps 'dep.npy' leads outside the project" sh -c "cd '$S' && '$Q' all"
ln -s "$O/secret.bin" "$S/docs/secret.txt"
printf '[model in]\nsource = models/in.onnx\n[release r]\nmodels = in\nfiles = docs\n' > "$S/rules/main.rules"
expect_err "a release directory holding a symlink out of the project: refused" 1 \
	"'docs/secret.txt' is a symbolic link that leads outside the project" sh -c "cd '$S' && '$Q' release r"
printf '[model in]\nsource = models/in.onnx\n[release r]\nmodels = in\nfiles = docs/secret.txt\n' > "$S/rules/main.rules"
expect_err "a release file linked out of the project: refused" 1 "is outside the project" \
	sh -c "cd '$S' && '$Q' release r"

# ---- verify-release refuses unsafe archives (item 5) ----
V=$TMPD/vr
mkdir -p "$V/rules" "$V/models"
cp "$TESTDATA/node/test_relu/model.onnx" "$V/models/relu.onnx"
printf '[model relu]\nsource = models/relu.onnx\n\n[release main]\nmodels = relu\n' > "$V/rules/main.rules"
(cd "$V" && "$Q" release) > "$TMPD/out" 2>&1 && [ -s "$V/dist/main-unknown.tar.gz" ] ||
	fail "make a release to tamper with" "$(tail -c 300 "$TMPD/out")"
check "the untouched release verifies (its directories are implied)" "$Q" verify-release "$V/dist/main-unknown.tar.gz"
# tamper.py GOOD OUT KIND: the good archive with one hostile change
cat > "$TMPD/tamper.py" <<'PY'
import hashlib, io, json, os, subprocess, sys, tarfile, tempfile
good, out, kind, qm = sys.argv[1:]
def xxh3(data):  # quantmake hash: XXH3-128 as xxhsum -H2 prints it
    with tempfile.NamedTemporaryFile() as f:
        f.write(data); f.flush()
        return subprocess.check_output([qm, "hash", f.name]).split()[0].decode()
src = tarfile.open(good)
members = [(m, src.extractfile(m).read() if m.isfile() else None) for m in src.getmembers()]
top = members[0][0].name.rstrip("/")
def entry(name, data=None, **kw):
    ti = tarfile.TarInfo(name)
    for k, v in kw.items():
        setattr(ti, k, v)
    if data is not None:
        ti.size = len(data)
    return ti, data
man_i = next(i for i, (m, _) in enumerate(members) if m.name.endswith("MANIFEST.json"))
man = json.loads(members[man_i][1])
def listed(key, data):
    man["files"][key] = {"size": len(data), "sha256": hashlib.sha256(data).hexdigest(),
                         "xxh3_128": xxh3(data)}
extra = []
evil = b"root:x:0:0:root:/root:/bin/sh\n"
if kind == "dotdot":
    listed("../evil.sh", evil); extra.append(entry(top + "/../evil.sh", evil))
elif kind == "absolute":
    listed("/tmp/evil.sh", evil); extra.append(entry("/tmp/evil.sh", evil))
elif kind == "symlink":
    extra.append(entry(top + "/relu/passwd", type=tarfile.SYMTYPE, linkname="/etc/passwd"))
elif kind == "hardlink":
    extra.append(entry(top + "/relu/passwd", type=tarfile.LNKTYPE, linkname="/etc/passwd"))
elif kind == "device":
    extra.append(entry(top + "/relu/null", type=tarfile.CHRTYPE, devmajor=1, devminor=3))
elif kind == "fifo":
    extra.append(entry(top + "/relu/fifo", type=tarfile.FIFOTYPE))
elif kind == "dir":
    extra.append(entry(top + "/stray/", type=tarfile.DIRTYPE))
elif kind == "twomanifests":
    extra.append(entry(top + "/MANIFEST.json", members[man_i][1]))
members[man_i] = entry(members[man_i][0].name, json.dumps(man).encode())
with tarfile.open(out, "w:gz") as t:
    for ti, data in [(m, d) for m, d in members] + extra:
        t.addfile(ti, io.BytesIO(data) if data is not None else None)
PY
for k in dotdot absolute symlink hardlink device fifo dir twomanifests; do
	"$PY" "$TMPD/tamper.py" "$V/dist/main-unknown.tar.gz" "$TMPD/$k.tar.gz" "$k" "$Q" 2> "$TMPD/err" ||
		fail "tamper $k" "$(tail -c 300 "$TMPD/err")"
done
expect_err "verify-release refuses a '../' entry" 1 "entry 'main-unknown/../evil.sh' is an absolute path or leads through '..'" \
	"$Q" verify-release "$TMPD/dotdot.tar.gz"
expect_err "verify-release refuses an absolute entry" 1 "entry '/tmp/evil.sh' is an absolute path" \
	"$Q" verify-release "$TMPD/absolute.tar.gz"
expect_err "verify-release refuses a symbolic link" 1 "extra entry: main-unknown/relu/passwd is a symbolic link" \
	"$Q" verify-release "$TMPD/symlink.tar.gz"
expect_err "verify-release refuses a hard link" 1 "extra entry: main-unknown/relu/passwd is a hard link" \
	"$Q" verify-release "$TMPD/hardlink.tar.gz"
expect_err "verify-release refuses a device node" 1 "extra entry: main-unknown/relu/null is a device node" \
	"$Q" verify-release "$TMPD/device.tar.gz"
expect_err "verify-release refuses a fifo" 1 "extra entry: main-unknown/relu/fifo is a fifo" \
	"$Q" verify-release "$TMPD/fifo.tar.gz"
expect_err "verify-release refuses a directory the manifest does not imply" 1 \
	"extra entry: main-unknown/stray/ is a directory" "$Q" verify-release "$TMPD/dir.tar.gz"
expect_err "verify-release refuses two MANIFEST.json" 1 "two MANIFEST.json entries" \
	"$Q" verify-release "$TMPD/twomanifests.tar.gz"
# a manifest key that leaves the release, with no entry behind it
"$PY" - "$V/dist/main-unknown.tar.gz" "$TMPD/key.tar.gz" <<'PY'
import io, json, sys, tarfile
src = tarfile.open(sys.argv[1])
with tarfile.open(sys.argv[2], "w:gz") as t:
    for m in src.getmembers():
        d = src.extractfile(m).read() if m.isfile() else None
        if m.name.endswith("MANIFEST.json"):
            j = json.loads(d); j["files"]["../x"] = {"size": 0}; d = json.dumps(j).encode(); m.size = len(d)
        t.addfile(m, io.BytesIO(d) if d is not None else None)
PY
expect_err "verify-release refuses a manifest key through '..'" 1 "MANIFEST.json lists '../x', not a relative file path" \
	"$Q" verify-release "$TMPD/key.tar.gz"
# 80 MiB of manifest, 80 KiB of archive: refused from the declared size
"$PY" - "$TMPD/big.tar.gz" <<'PY'
import io, sys, tarfile
class Spaces(io.RawIOBase):
    def __init__(self, n): self.left = n
    def readable(self): return True
    def readinto(self, b):
        k = min(len(b), self.left); b[:k] = b" " * k; self.left -= k; return k
n = 80 << 20
with tarfile.open(sys.argv[1], "w:gz") as t:
    ti = tarfile.TarInfo("r/MANIFEST.json"); ti.size = n
    t.addfile(ti, io.BufferedReader(Spaces(n), 1 << 20))
PY
expect_err "verify-release refuses a manifest over 64 MiB" 1 "over the limit of 64 MiB for a manifest" \
	"$Q" verify-release "$TMPD/big.tar.gz"

# ---- memory from small files (item 10) ----
# maxrss OUT CMD...: runs CMD, writes "STATUS MAXRSS_KIB" to OUT (the
# child's peak resident memory, from getrusage), its stderr to OUT.err
maxrss() {
	out=$1
	shift
	"$PY" -c '
import resource, subprocess, sys
p = subprocess.run(sys.argv[2:], stdout=subprocess.DEVNULL, stderr=open(sys.argv[1] + ".err", "w"))
print(p.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)' "$out" "$@" > "$out"
}
F=$TMPD/fold
mkdir -p "$F"
"$PY" - "$F" <<'PY'
import sys, numpy as np, onnx
from onnx import helper, numpy_helper, TensorProto
d = sys.argv[1]
s = numpy_helper.from_array(np.array([1 << 29], np.int64), "s")
g = helper.make_graph([helper.make_node("ConstantOfShape", ["s"], ["c"]),
                       helper.make_node("ReduceSum", ["c"], ["y"], keepdims=0)], "g", [],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [s])
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), d + "/cos.onnx")
# a small one that still folds
s = numpy_helper.from_array(np.array([4], np.int64), "s")
g = helper.make_graph([helper.make_node("ConstantOfShape", ["s"], ["c"]), helper.make_node("Add", ["c", "x"], ["y"])],
    "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [s])
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), d + "/small.onnx")
PY
[ "$(wc -c < "$F/cos.onnx")" -lt 300 ] || fail "the ConstantOfShape model is small" "$(wc -c < "$F/cos.onnx") bytes"
maxrss "$F/i" "$Q" infer-shapes "$F/cos.onnx" "$F/cos.i.onnx"
read -r st kib < "$F/i"
[ "$st" = 0 ] && [ "$kib" -lt 204800 ] && "$PY" -c "
import onnx, sys
m = onnx.load('$F/cos.i.onnx')
vi = {v.name: v for v in list(m.graph.value_info) + list(m.graph.output)}
d = [x.dim_value for x in vi['c'].type.tensor_type.shape.dim]
sys.exit(d != [1 << 29])" &&
	pass "infer-shapes of a ConstantOfShape of 2^29 floats: shape inferred, under 200 MiB (${kib} KiB)" ||
	fail "infer-shapes of a ConstantOfShape of 2^29 floats: shape inferred, under 200 MiB" "exit $st, ${kib} KiB: $(head -c 300 "$F/i.err")"
maxrss "$F/p" "$Q" preprocess "$F/cos.onnx" "$F/cos.p.onnx"
read -r st kib < "$F/p"
[ "$st" = 0 ] && [ "$kib" -lt 204800 ] && [ "$(wc -c < "$F/cos.p.onnx")" -lt 100000 ] &&
	pass "preprocess of it: not folded, under 200 MiB (${kib} KiB)" ||
	fail "preprocess of it: not folded, under 200 MiB" "exit $st, ${kib} KiB: $(head -c 300 "$F/p.err")"
"$Q" preprocess "$F/small.onnx" "$F/small.p.onnx" > /dev/null 2>&1 && "$PY" -c "
import onnx, sys
m = onnx.load('$F/small.p.onnx')
sys.exit([n.op_type for n in m.graph.node] != ['Add'] or len(m.graph.initializer) != 1)" &&
	pass "a small ConstantOfShape still folds" || fail "a small ConstantOfShape still folds"

# an .npz member of 256 MiB of zeros (256 KiB deflated) whose .npy header
# says four floats: refused before it is inflated
"$PY" - "$F/bomb.npz" <<'PY'
import io, sys, zipfile, numpy as np
b = io.BytesIO(); np.save(b, np.zeros(4, np.float32)); head = b.getvalue()[:-16]
with zipfile.ZipFile(sys.argv[1], "w", zipfile.ZIP_DEFLATED) as z:
    with z.open("x.npy", "w", force_zip64=True) as f:
        f.write(head)
        chunk = bytes(1 << 20)
        for _ in range(256):
            f.write(chunk)
PY
"$PY" -c "
import numpy as np, onnx
from onnx import helper, TensorProto
g = helper.make_graph([helper.make_node('Relu', ['x'], ['y'])], 'g',
    [helper.make_tensor_value_info('x', TensorProto.FLOAT, [4])], [helper.make_tensor_value_info('y', TensorProto.FLOAT, [4])])
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid('', 13)]), '$F/relu.onnx')"
maxrss "$F/z" "$Q" run "$F/relu.onnx" -i "$F/bomb.npz"
read -r st kib < "$F/z"
[ "$st" != 0 ] && [ "$kib" -lt 102400 ] && grep -q "member 'x.npy'.*needs 16 bytes of data" "$F/z.err" &&
	pass "an .npz bomb member is refused from its header, under 100 MiB (${kib} KiB)" ||
	fail "an .npz bomb member is refused from its header, under 100 MiB" "exit $st, ${kib} KiB: $(head -c 300 "$F/z.err")"
"$PY" -c "
import numpy as np
np.savez_compressed('$F/ok.npz', x=np.array([1, -2, 3, -4], np.float32))" &&
	"$Q" run "$F/relu.onnx" -i "$F/ok.npz" -o "$F/o.npz" > /dev/null 2>&1 &&
	"$PY" -c "
import numpy as np, sys
sys.exit(not np.array_equal(np.load('$F/o.npz')['y'], [1, 0, 3, 0]))" &&
	pass "a deflated .npz member is still read (streamed into its tensor)" ||
	fail "a deflated .npz member is still read (streamed into its tensor)"

# ---- calibration data without finite values (item 11) ----
C=$TMPD/calib
mkdir -p "$C/rules" "$C/models" "$C/nan" "$C/inf" "$C/part" "$C/big"
"$PY" - "$C" <<'PY'
import sys, numpy as np, onnx
from onnx import helper, TensorProto, numpy_helper
d = sys.argv[1]
w = numpy_helper.from_array(np.random.default_rng(0).standard_normal((4, 3)).astype(np.float32), "w")
g = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "g",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3])], [w])
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), d + "/models/m.onnx")
r = np.random.default_rng(1)
for i in range(4):
    np.save(d + "/nan/%d.npy" % i, np.full((1, 4), np.nan, np.float32))
    np.save(d + "/inf/%d.npy" % i, np.full((1, 4), np.inf if i % 2 else -np.inf, np.float32))
    x = r.standard_normal((1, 4)).astype(np.float32)
    if i == 0: x[0, 1] = np.nan
    np.save(d + "/part/%d.npy" % i, x)
    np.save(d + "/big/%d.npy" % i, np.array([[3e38, -3e38, 1, 2]], np.float32))
PY
for k in nan inf part big; do
	printf '[model %s]\nsource = models/m.onnx\nquantize = static\nquantize.calibration = %s\n\n' "$k" "$k"
done > "$C/rules/main.rules"
expect_err "all-NaN calibration data fails, naming the tensor" 1 \
	"calibration: tensor 'x' has no finite value \\(all 16 values seen in 4 samples are NaN or infinite\\)" \
	sh -c "cd '$C' && '$Q' nan"
expect_err "all-infinite calibration data fails, naming the tensor" 1 "calibration: tensor 'x' has no finite value" \
	sh -c "cd '$C' && '$Q' inf"
expect_err "calibration data of +-3e38 fails: no finite scale" 1 "calibration: tensor 'x' spans \\[-3e\\+38, 3e\\+38\\], too wide" \
	sh -c "cd '$C' && '$Q' big"
(cd "$C" && "$Q" part) > "$TMPD/out" 2>&1 && grep -q "warning: tensor 'x': 6.25% of its values (1 of 16) are NaN or infinite" "$TMPD/out" &&
	[ -s "$C/build/part/part.onnx" ] &&
	pass "partly NaN calibration data builds with a warning naming the tensor and the share" ||
	fail "partly NaN calibration data builds with a warning naming the tensor and the share" "$(tail -c 400 "$TMPD/out")"
