#!/bin/sh
# Releases in temporary git repositories: reproducible archives (two runs,
# two clones, any TZ), contents against MANIFEST.json, stamps in the
# released models (onnxruntime), cache reuse across branches, dirty trees,
# outside git, tampered archives, bad input, all three formats.
. "$(dirname "$0")/lib/common.sh"
mktmp
Q=$QUANTMAKE
M1=$TESTDATA/node/test_relu
M2=$TESTDATA/node/test_abs
export GIT_CONFIG_NOSYSTEM=1 HOME="$TMPD/home"
mkdir -p "$HOME"
git config --global user.name tester
git config --global user.email tester@example.com
git config --global init.defaultBranch main
git config --global advice.detachedHead false
unset SOURCE_DATE_EPOCH
export QUANTMAKE_CACHE=
if ! "$PY" -c 'import onnx, onnxruntime, numpy' 2>/dev/null; then
	fail "release tests" "$PY lacks onnx, onnxruntime or numpy (run scripts/venv.sh)"
	exit 0
fi

runs() { grep -c '^\[[0-9]*/[0-9]*\]' "$1"; }

# newproj DIR: a git project with models relu (source), abs (+ infer-shapes),
# ext (external data), and releases main (tar.gz), z (zip), s (tar.zst)
newproj() {
	rm -rf "$1"
	mkdir -p "$1/rules" "$1/models" "$1/docs"
	cp "$M1/model.onnx" "$1/models/relu.onnx"
	cp "$M2/model.onnx" "$1/models/abs.onnx"
	"$PY" - "$1/models" <<'PY' || return 1
import sys, numpy as np, onnx
from onnx import helper, numpy_helper, TensorProto
d = sys.argv[1]
w = numpy_helper.from_array(np.arange(64 * 32, dtype=np.float32).reshape(64, 32) / 1000, "w")
g = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "ext",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 64])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 32])], [w])
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
m.ir_version = 8
onnx.save(m, d + "/ext.onnx", save_as_external_data=True, location="ext.onnx.data", size_threshold=0)
PY
	echo "release notes" > "$1/README.md"
	printf 'cat\ndog\n' > "$1/docs/labels.txt"
	printf 'build/\ncache/\ndist/\n' > "$1/.gitignore"
	cat > "$1/rules/main.rules" <<'R'
[model relu]
source = models/relu.onnx

[model abs]
source = models/abs.onnx
infer-shapes = merge

[model ext]
source = models/ext.onnx

[release main]
models = relu abs ext abs:export
files = README.md docs/*.txt
format = tar.gz

[release z]
models = relu
files = docs
format = zip
name = {release}-{short}

[release s]
models = ext
format = tar.zst
R
	(cd "$1" && git init -q && git add -A && git commit -qm "first" && git tag v1.0) || return 1
}

P=$TMPD/p
newproj "$P" || { fail "project setup" "could not create the test project"; exit 1; }
C1=$(cd "$P" && git rev-parse HEAD)

# ---- a release, byte-identical on a second run ----
"$Q" -C "$P" release > "$TMPD/r1" 2>&1
st=$?
A=$P/dist/main-v1.0.tar.gz
[ $st -eq 0 ] && [ -f "$A" ] && [ -f "$P/dist/s-v1.0.tar.zst" ] && [ -f "$P/dist/z-$(echo "$C1" | cut -c1-7).zip" ] &&
	pass "release writes every archive, named from the template" || fail "release writes every archive, named from the template" "status $st: $(cat "$TMPD/r1"; ls "$P/dist")"
cp "$A" "$TMPD/a1.tar.gz"
cp "$P"/dist/*.zip "$TMPD/z1.zip"
cp "$P"/dist/*.tar.zst "$TMPD/s1.tar.zst"
sleep 1
rm -rf "$P/dist"
TZ=Pacific/Kiritimati "$Q" -C "$P" release > "$TMPD/r2" 2>&1
cmp -s "$A" "$TMPD/a1.tar.gz" && pass "two runs give a byte-identical tar.gz" || fail "two runs give a byte-identical tar.gz"
cmp -s "$P"/dist/*.zip "$TMPD/z1.zip" && pass "two runs (another TZ) give a byte-identical zip" || fail "two runs (another TZ) give a byte-identical zip"
cmp -s "$P"/dist/*.tar.zst "$TMPD/s1.tar.zst" && pass "two runs give a byte-identical tar.zst" || fail "two runs give a byte-identical tar.zst"
[ "$(runs "$TMPD/r2")" -eq 0 ] && grep -q 'nothing to do' "$TMPD/r2" && pass "second release rebuilds nothing" || fail "second release rebuilds nothing" "$(cat "$TMPD/r2")"
ls -a "$P/dist" | grep -q '\.tmp' && fail "no temporary files left in dist/" "$(ls -a "$P/dist")" || pass "no temporary files left in dist/"

mv "$A" "$TMPD/keep.tar.gz"
"$Q" -C "$P" -n release main > "$TMPD/dn" 2>&1 && grep -qx 'would write dist/main-v1.0.tar.gz' "$TMPD/dn" && [ ! -e "$A" ] &&
	pass "-n release names the archive and writes nothing" || fail "-n release names the archive and writes nothing" "$(cat "$TMPD/dn")"
mv "$TMPD/keep.tar.gz" "$A"

# ---- verify-release on all three formats ----
for f in "$A" "$P"/dist/*.zip "$P"/dist/*.tar.zst; do
	"$Q" verify-release "$f" > "$TMPD/v" 2>&1 && grep -q 'OK: .* files match MANIFEST.json' "$TMPD/v" &&
		pass "verify-release accepts ${f##*.}" || fail "verify-release accepts ${f##*.}" "$(cat "$TMPD/v")"
done

# ---- the archive: contents against the manifest, fixed metadata, stamps ----
cat > "$TMPD/check.py" <<'PY'
import sys, tarfile, zipfile, hashlib, json, io, gzip
import numpy as np, onnx, onnxruntime as ort
from onnx import numpy_helper
path, commit, mtime, relu_dir = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
errs = []
if path.endswith(".zip"):
    z = zipfile.ZipFile(path)
    names = [i.filename.rstrip("/") for i in z.infolist()]
    files = {i.filename: z.read(i) for i in z.infolist() if not i.is_dir()}
else:
    raw = open(path, "rb").read()
    if path.endswith(".gz"):
        if raw[4:8] != b"\0\0\0\0":
            errs.append("gzip header has a timestamp")
        if raw[3] & 0x08:
            errs.append("gzip header has a file name")
    if path.endswith(".zst"):
        import subprocess
        raw = subprocess.run(["zstd", "-dc", path], check=True, capture_output=True).stdout
        t = tarfile.open(fileobj=io.BytesIO(raw))
    else:
        t = tarfile.open(path)
    files = {}
    names = []
    for m in t.getmembers():
        names.append(m.name)
        if m.uid or m.gid or m.uname or m.gname:
            errs.append("owner of %s is %d:%d %r:%r" % (m.name, m.uid, m.gid, m.uname, m.gname))
        if m.mtime != mtime:
            errs.append("mtime of %s is %d, expected %d" % (m.name, m.mtime, mtime))
        if m.pax_headers:
            errs.append("pax header on %s: %r" % (m.name, m.pax_headers))
        if m.isfile():
            files[m.name] = t.extractfile(m).read()
if names != sorted(names):
    errs.append("entries not sorted: %r" % names)
top = names[0].split("/")[0]
man = json.loads(files.pop(top + "/MANIFEST.json"))
listed = {top + "/" + k for k in man["files"]}
if listed != set(files):
    errs.append("manifest lists %r, archive holds %r" % (sorted(listed), sorted(files)))
for k, v in man["files"].items():
    b = files.get(top + "/" + k, b"")
    if len(b) != v["size"] or hashlib.sha256(b).hexdigest() != v["sha256"]:
        errs.append("digest of %s differs from the manifest" % k)
g = man["git"]
if g["commit"] != commit or g["dirty"] is not False or man["quantmake_version"] == "":
    errs.append("git stamp %r" % g)
for label, mo in man["models"].items():
    data = files[top + "/" + mo["file"]]
    m = onnx.load_from_string(data) if not mo["file"].endswith("ext.onnx") else None
    if m is not None:
        onnx.checker.check_model(m)
        props = {p.key: p.value for p in m.metadata_props}
        if props.get("quantmake.git.commit") != commit or props.get("quantmake.git.describe") != g["describe"]:
            errs.append("%s metadata_props %r" % (label, props))
        if len(props) != len(m.metadata_props):
            errs.append("%s has duplicate metadata keys" % label)
    if not mo["opset"] or not mo["inputs"] or not mo["outputs"] or "keys" not in mo["recipe"]:
        errs.append("model %s described incompletely: %r" % (label, mo))
if "relu" in man["models"]:
    s = ort.InferenceSession(files[top + "/relu/relu.onnx"])
    if s.get_modelmeta().custom_metadata_map.get("quantmake.git.commit") != commit:
        errs.append("onnxruntime does not see the commit")
    x = numpy_helper.to_array(onnx.load_tensor(relu_dir + "/test_data_set_0/input_0.pb"))
    y = numpy_helper.to_array(onnx.load_tensor(relu_dir + "/test_data_set_0/output_0.pb"))
    got = s.run(None, {s.get_inputs()[0].name: x})[0]
    if not np.allclose(got, y):
        errs.append("stamped relu computes wrong values")
    if man["models"]["relu"]["inputs"][0]["shape"] != [3, 4, 5]:
        errs.append("relu input shape %r" % man["models"]["relu"]["inputs"])
for e in errs:
    print(e)
sys.exit(1 if errs else 0)
PY
CT=$(cd "$P" && git log -1 --format=%ct)
for f in "$A" "$P"/dist/*.zip "$P"/dist/*.tar.zst; do
	"$PY" "$TMPD/check.py" "$f" "$C1" "$CT" "$M1" > "$TMPD/c" 2>&1 &&
		pass "${f##*.}: contents match the manifest; fixed owners, times, order; stamped models run" ||
		fail "${f##*.}: contents match the manifest; fixed owners, times, order; stamped models run" "$(head -c 600 "$TMPD/c")"
done
tar tzf "$A" | grep -qx 'main-v1.0/ext/ext.onnx.data' && tar tzf "$A" | grep -qx 'main-v1.0/abs/export/abs.onnx' &&
	tar tzf "$A" | grep -qx 'main-v1.0/docs/labels.txt' && pass "external data, stage targets and files are packed" ||
	fail "external data, stage targets and files are packed" "$(tar tzf "$A")"
X=$TMPD/x
mkdir -p "$X" && tar xzf "$A" -C "$X"
"$PY" -c "
import onnxruntime as ort, numpy as np
s = ort.InferenceSession('$X/main-v1.0/ext/ext.onnx')
y = s.run(None, {'x': np.ones((2, 64), np.float32)})[0]
w = np.arange(64 * 32, dtype=np.float32).reshape(64, 32) / 1000
assert np.allclose(y, np.ones((2, 64), np.float32) @ w)
assert s.get_modelmeta().custom_metadata_map['quantmake.git.commit'] == '$C1'
" > "$TMPD/e" 2>&1 && pass "a stamped model with external data runs in onnxruntime" || fail "a stamped model with external data runs in onnxruntime" "$(tail -3 "$TMPD/e")"
cmp -s "$X/main-v1.0/abs/abs.onnx" "$P/build/abs/abs.onnx" && fail "build output is not stamped in place" || pass "build output is not stamped in place"
"$PY" -c "
import onnx,sys
m = onnx.load('$P/build/relu/relu.onnx', load_external_data=False)
sys.exit(1 if any(p.key.startswith('quantmake.') for p in m.metadata_props) else 0)" && pass "build/ and the cache hold unstamped models" || fail "build/ and the cache hold unstamped models"

# ---- SOURCE_DATE_EPOCH sets every mtime ----
cp "$A" "$TMPD/before-epoch.tar.gz"
expect_err "an archive with other bytes is not overwritten without --force" 1 \
	"release 'main': 'dist/main-v1.0.tar.gz' exists with other bytes .*give --force" env SOURCE_DATE_EPOCH=1000000000 "$Q" -C "$P" release main
cmp -s "$A" "$TMPD/before-epoch.tar.gz" && [ -z "$(ls -A "$P/dist" | grep '^\.')" ] &&
	pass "a refused overwrite leaves the archive and no temporary file" || fail "a refused overwrite leaves the archive and no temporary file" "$(ls -A "$P/dist")"
"$Q" -C "$P" release main > "$TMPD/same" 2>&1 && grep -q 'unchanged, the same bytes were there' "$TMPD/same" &&
	pass "the same bytes again: no error, said unchanged" || fail "the same bytes again: no error, said unchanged" "$(cat "$TMPD/same")"
SOURCE_DATE_EPOCH=1000000000 "$Q" -C "$P" release --force main > /dev/null 2>&1
"$PY" -c "
import tarfile,sys
sys.exit(0 if {m.mtime for m in tarfile.open('$A')} == {1000000000} else 1)" && pass "SOURCE_DATE_EPOCH (with --force) sets the mtimes" || fail "SOURCE_DATE_EPOCH (with --force) sets the mtimes"
SOURCE_DATE_EPOCH=soon "$Q" -C "$P" release main > /dev/null 2> "$TMPD/se"
[ $? -eq 2 ] && grep -q "SOURCE_DATE_EPOCH='soon' is not valid" "$TMPD/se" && pass "a bad SOURCE_DATE_EPOCH is refused" || fail "a bad SOURCE_DATE_EPOCH is refused" "$(cat "$TMPD/se")"
"$Q" -C "$P" release main --force > /dev/null 2>&1
cmp -s "$A" "$TMPD/a1.tar.gz" && pass "--force after the release names" || fail "--force after the release names"


# ---- two clones at the same commit: shared cache, and own caches ----
git clone -q "$P" "$TMPD/c1" && git clone -q "$P" "$TMPD/c2" && git clone -q "$P" "$TMPD/c3"
SC=$TMPD/shared-cache
QUANTMAKE_CACHE=$SC "$Q" -C "$TMPD/c1" release main > "$TMPD/k1" 2>&1
QUANTMAKE_CACHE=$SC "$Q" -C "$TMPD/c2" release main > "$TMPD/k2" 2>&1
"$Q" -C "$TMPD/c3" release main > "$TMPD/k3" 2>&1
cmp -s "$TMPD/c1/dist/main-v1.0.tar.gz" "$TMPD/c2/dist/main-v1.0.tar.gz" && cmp -s "$TMPD/c1/dist/main-v1.0.tar.gz" "$A" &&
	pass "two clones sharing a cache give byte-identical archives" || fail "two clones sharing a cache give byte-identical archives" "$(cat "$TMPD/k1" "$TMPD/k2")"
[ "$(runs "$TMPD/k2")" -eq 0 ] && pass "the second clone hits the shared cache" || fail "the second clone hits the shared cache" "$(cat "$TMPD/k2")"
cmp -s "$TMPD/c3/dist/main-v1.0.tar.gz" "$A" && [ "$(runs "$TMPD/k3")" -gt 0 ] &&
	pass "a clone with its own cache builds and gives the same bytes" || fail "a clone with its own cache builds and gives the same bytes" "$(cat "$TMPD/k3")"

# ---- the same commit from a detached checkout and from branch release/v0.1 ----
git clone -q "$P" "$TMPD/c5" && (cd "$TMPD/c5" && git checkout -q --detach v1.0)
git clone -q "$P" "$TMPD/c6" && (cd "$TMPD/c6" && git checkout -q -b release/v0.1)
QUANTMAKE_CACHE=$SC "$Q" -C "$TMPD/c5" release main > "$TMPD/k5" 2>&1
QUANTMAKE_CACHE=$SC "$Q" -C "$TMPD/c6" release main > "$TMPD/k6" 2>&1
cmp -s "$TMPD/c5/dist/main-v1.0.tar.gz" "$A" && pass "a detached checkout (as CI) gives the same bytes as main" ||
	fail "a detached checkout (as CI) gives the same bytes as main" "$(cat "$TMPD/k5"; ls "$TMPD/c5/dist")"
cmp -s "$TMPD/c6/dist/main-v1.0.tar.gz" "$A" && pass "branch release/v0.1 at the same commit gives the same bytes" ||
	fail "branch release/v0.1 at the same commit gives the same bytes" "$(cat "$TMPD/k6"; ls "$TMPD/c6/dist")"
tar xzf "$A" -O main-v1.0/MANIFEST.json | grep -q '"branch"' && fail "no branch name in the manifest" || pass "no branch name in the manifest"

# ---- another branch with the same model inputs: no stage rebuilt ----
(cd "$TMPD/c1" && git checkout -q -b feature && echo "new notes" > README.md && git commit -qam "notes")
C2=$(cd "$TMPD/c1" && git rev-parse HEAD)
QUANTMAKE_CACHE=$SC "$Q" -C "$TMPD/c1" release main > "$TMPD/b1" 2>&1
B=$(ls "$TMPD"/c1/dist/main-v1.0-1-g*.tar.gz 2>/dev/null)
[ -n "$B" ] && [ "$(runs "$TMPD/b1")" -eq 0 ] && grep -q 'nothing to do' "$TMPD/b1" &&
	pass "branch switch: release with no stage rebuilt" || fail "branch switch: release with no stage rebuilt" "$(cat "$TMPD/b1")"
git clone -q -b feature "$TMPD/c1" "$TMPD/c4"
QUANTMAKE_CACHE=$SC "$Q" -C "$TMPD/c4" release main > "$TMPD/b2" 2>&1
[ "$(runs "$TMPD/b2")" -eq 0 ] && cmp -s "$TMPD/c4/dist/$(basename "$B")" "$B" &&
	pass "a fresh clone of the branch hits the cache and matches" || fail "a fresh clone of the branch hits the cache and matches" "$(cat "$TMPD/b2")"
tar xzf "$B" -O "$(basename "$B" .tar.gz)/MANIFEST.json" > "$TMPD/bm.json"
mkdir -p "$TMPD/bx" && tar xzf "$B" -C "$TMPD/bx"
"$PY" -c "
import json, onnx, sys
m = json.load(open('$TMPD/bm.json'))
assert m['git']['commit'] == '$C2' and 'branch' not in m['git'], m['git']
assert m['git']['describe'].startswith('v1.0-1-g'), m['git']
p = {x.key: x.value for x in onnx.load('$TMPD/bx/$(basename "$B" .tar.gz)/relu/relu.onnx').metadata_props}
assert p['quantmake.git.commit'] == '$C2' and 'quantmake.git.branch' not in p, p
" > "$TMPD/bp" 2>&1 && pass "the branch's commit (not its name) is in the manifest and the model" || fail "the branch's commit (not its name) is in the manifest and the model" "$(tail -2 "$TMPD/bp")"

# ---- a dirty tree ----
echo "local edit" >> "$P/README.md"
echo "untracked" > "$P/scratch.txt"
"$Q" -C "$P" release main > "$TMPD/d1" 2>&1
D=$P/dist/main-v1.0-dirty.tar.gz
[ -f "$D" ] && tar xzf "$D" -O main-v1.0-dirty/MANIFEST.json | "$PY" -c "
import json, sys
g = json.load(sys.stdin)['git']
sys.exit(0 if g['dirty'] is True and g['describe'] == 'v1.0-dirty' and g['modified_inputs'] == ['README.md'] else 1)" &&
	pass "a dirty tree is flagged (-dirty, dirty: true, modified inputs)" || fail "a dirty tree is flagged (-dirty, dirty: true, modified inputs)" "$(cat "$TMPD/d1")"
rm -f "$D"
expect_err "--require-clean refuses a dirty tree" 1 "uncommitted changes \(README.md\)" "$Q" -C "$P" release --require-clean main
[ ! -e "$D" ] && pass "--require-clean leaves no archive" || fail "--require-clean leaves no archive"
(cd "$P" && git checkout -q README.md)
"$Q" -C "$P" release --require-clean --require-git main > "$TMPD/d2" 2>&1 && cmp -s "$A" "$TMPD/a1.tar.gz" &&
	pass "untracked files outside the release leave it clean" || fail "untracked files outside the release leave it clean" "$(cat "$TMPD/d2")"

# ---- untracked files that enter a release: a rule file, a `files` glob ----
U=$TMPD/u
newproj "$U" > /dev/null 2>&1
mkdir -p "$U/data" && echo tracked > "$U/data/a.npy"
printf '\n[release d]\nmodels = relu\nfiles = data/*.npy\n' >> "$U/rules/main.rules"
(cd "$U" && git add -A && git commit -qm data)
"$Q" -C "$U" release d > /dev/null 2>&1
DC=$(ls "$U"/dist/d-*.tar.gz)
echo secret > "$U/data/secret_untracked.npy"
expect_err "--require-clean refuses an untracked file a files glob takes, named" 1 \
	"release 'd': git does not track data/secret_untracked.npy, which enters the release: add it to git" "$Q" -C "$U" release --require-clean d
"$Q" -C "$U" release d > "$TMPD/u1" 2>&1
DD=$U/dist/$(basename "$DC" .tar.gz)-dirty.tar.gz
[ -f "$DD" ] && tar xzf "$DD" -O "$(basename "$DD" .tar.gz)/MANIFEST.json" | "$PY" -c "
import json, sys
g = json.load(sys.stdin)['git']
sys.exit(0 if g['dirty'] is True and g['describe'].endswith('-dirty') and g['untracked_inputs'] == ['data/secret_untracked.npy'] else 1)" &&
	grep -q "stamped dirty: git does not track data/secret_untracked.npy" "$TMPD/u1" &&
	pass "an untracked file in the release: stamped dirty, named" || fail "an untracked file in the release: stamped dirty, named" "$(cat "$TMPD/u1"; ls "$U/dist")"
rm "$U/data/secret_untracked.npy"
printf '[model extra]\nsource = models/abs.onnx\n' > "$U/rules/extra.rules"
rm -rf "$U/build"
expect_err "--require-clean refuses an untracked rule file, before building" 1 \
	"release 'main': git does not track rules/extra.rules, which enters the release" "$Q" -C "$U" release --require-clean main
[ ! -e "$U/build/relu" ] && pass "a release refused for an untracked rule file builds nothing" || fail "a release refused for an untracked rule file builds nothing" "$(ls "$U/build")"
"$Q" -C "$U" release main > "$TMPD/u2" 2>&1
ls "$U"/dist/main-v1.0-*-dirty.tar.gz > /dev/null 2>&1 && pass "an untracked rule file makes the release dirty" || fail "an untracked rule file makes the release dirty" "$(cat "$TMPD/u2"; ls "$U/dist")"

# ---- outside git ----
N=$TMPD/nogit
mkdir -p "$N" && (cd "$P" && tar cf - --exclude=.git --exclude=dist --exclude=build --exclude=cache .) | (cd "$N" && tar xf -)
expect_err "outside git: a warning" 0 "warning: .*not in a git repository: stamping the release 'unknown'" "$Q" -C "$N" release main
tar xzf "$N/dist/main-unknown.tar.gz" -O main-unknown/MANIFEST.json 2>/dev/null | grep -q '"commit": "unknown"' &&
	pass "outside git: stamped unknown" || fail "outside git: stamped unknown" "$(ls "$N/dist")"
rm -rf "$N/dist" "$N/build" "$N/cache"
expect_err "outside git: an error under --require-git" 1 "not in a git repository: cannot stamp the release" "$Q" -C "$N" release --require-git main
[ ! -e "$N/dist" ] && [ ! -e "$N/build" ] && pass "--require-git refuses before building: no build, no archive" ||
	fail "--require-git refuses before building: no build, no archive" "$(ls "$N")"

# ---- tampered archives ----
cat > "$TMPD/tamper.py" <<'PY'
import sys, tarfile, io
src, dst, mode = sys.argv[1:4]
t = tarfile.open(src)
out = tarfile.open(dst, "w:gz", format=tarfile.USTAR_FORMAT)
for m in t.getmembers():
    data = t.extractfile(m).read() if m.isfile() else None
    if mode == "change" and m.name.endswith("relu/relu.onnx"):
        data = data[:-1] + bytes([data[-1] ^ 1])
    if mode == "drop" and m.name.endswith("labels.txt"):
        continue
    out.addfile(m, io.BytesIO(data) if data is not None else None)
    if mode == "extra" and m.name.endswith("README.md"):
        e = tarfile.TarInfo(m.name.rsplit("/", 1)[0] + "/evil.sh")
        e.size = 3
        out.addfile(e, io.BytesIO(b"hi\n"))
out.close()
PY
for mode in change drop extra; do "$PY" "$TMPD/tamper.py" "$A" "$TMPD/t-$mode.tar.gz" $mode; done
expect_err "a changed file fails verify-release, named" 1 "mismatch: main-v1.0/relu/relu.onnx" "$Q" verify-release "$TMPD/t-change.tar.gz"
expect_err "a missing file fails verify-release, named" 1 "missing file: main-v1.0/docs/labels.txt" "$Q" verify-release "$TMPD/t-drop.tar.gz"
expect_err "an extra file fails verify-release, named" 1 "extra file: main-v1.0/evil.sh" "$Q" verify-release "$TMPD/t-extra.tar.gz"
"$PY" "$TMPD/tamper.py" "$A" "$TMPD/t-same.tar.gz" none
check "a faithful repack still verifies" "$Q" verify-release "$TMPD/t-same.tar.gz"
echo "not an archive" > "$TMPD/junk.tar.gz"
expect_err "a non-archive fails verify-release" 1 "cannot read archive" "$Q" verify-release "$TMPD/junk.tar.gz"
expect_err "verify-release usage" 2 "usage: quantmake verify-release ARCHIVE" "$Q" verify-release

# ---- re-releasing a released (stamped) model keeps keys unique ----
R=$TMPD/rr
mkdir -p "$R/rules" "$R/models"
cp "$X/main-v1.0/relu/relu.onnx" "$R/models/stamped.onnx"
printf '[model again]\nsource = models/stamped.onnx\n\n[release r]\nmodels = again\n' > "$R/rules/main.rules"
(cd "$R" && git init -q && git add -A && git commit -qm again)
C3=$(cd "$R" && git rev-parse HEAD)
"$Q" -C "$R" release > "$TMPD/rr1" 2>&1
mkdir -p "$TMPD/rrx" && tar xzf "$R"/dist/r-*.tar.gz -C "$TMPD/rrx" 2>/dev/null
"$PY" -c "
import onnx, glob
m = onnx.load(glob.glob('$TMPD/rrx/*/again/again.onnx')[0])
onnx.checker.check_model(m)
keys = [p.key for p in m.metadata_props]
assert len(keys) == len(set(keys)), keys
assert dict((p.key, p.value) for p in m.metadata_props)['quantmake.git.commit'] == '$C3'
" > "$TMPD/rr2" 2>&1 && "$Q" verify-release "$R"/dist/r-*.tar.gz > /dev/null 2>&1 &&
	pass "a re-released model gets the new stamp, keys unique" || fail "a re-released model gets the new stamp, keys unique" "$(cat "$TMPD/rr1"; tail -2 "$TMPD/rr2")"

# ---- bad input: clear errors, exit status, no partial archive ----
B2=$TMPD/bad
newproj "$B2" > /dev/null 2>&1
printf '\n[release g]\nmodels = relu\nfiles = nothing*.txt\n' >> "$B2/rules/main.rules"
expect_err "a files glob matching nothing" 2 "rules/main.rules:[0-9]+: release 'g': files 'nothing\*.txt' matches no file" "$Q" -C "$B2" release g
[ ! -e "$B2/dist" ] || [ -z "$(ls -A "$B2/dist")" ] && pass "no archive after a bad glob" || fail "no archive after a bad glob" "$(ls -a "$B2/dist")"
expect_err "an unknown release name suggests" 2 "unknown release 'mainn' \(did you mean 'main'\?\)" "$Q" -C "$B2" release mainn
printf '\n[release u]\nmodels = relu reluu\n' >> "$B2/rules/main.rules"
expect_err "a release naming an unknown model: file:line" 2 "rules/main.rules:[0-9]+: release 'u' names unknown model 'reluu'" "$Q" -C "$B2" release main
sed -i '/^\[release u\]/,$d' "$B2/rules/main.rules"
printf '\n[release o]\nmodels = relu\nfiles = ../secret.txt\n' >> "$B2/rules/main.rules"
expect_err "a file outside the project" 2 "rules/main.rules:[0-9]+: release 'o': file '../secret.txt' is outside the project" "$Q" -C "$B2" release main
sed -i '/^\[release o\]/,$d' "$B2/rules/main.rules"
ln -s /etc/hostname "$B2/docs/link.txt"
expect_err "a symbolic link leading out of the project" 1 "file 'docs/link.txt' is outside the project" "$Q" -C "$B2" release main
rm "$B2/docs/link.txt"
printf '\n[release t]\nmodels = relu\nname = {release}-{version}\n' >> "$B2/rules/main.rules"
expect_err "an unknown name placeholder" 2 "rules/main.rules:[0-9]+: release 't': name '\{release\}-\{version\}' has an unknown placeholder" "$Q" -C "$B2" release t
sed -i '/^\[release t\]/,$d' "$B2/rules/main.rules"
echo "{}" > "$B2/MANIFEST.json"
printf '\n[release mf]\nmodels = relu\nfiles = MANIFEST.json\n' >> "$B2/rules/main.rules"
expect_err "a file called MANIFEST.json is refused" 2 "rules/main.rules:[0-9]+: release 'mf': a file called MANIFEST.json" "$Q" -C "$B2" release mf
sed -i '/^\[release mf\]/,$d' "$B2/rules/main.rules"
rm -f "$B2/MANIFEST.json"
printf '\n[release d1]\nmodels = relu\nname = same\n\n[release d2]\nmodels = abs\nname = same\n' >> "$B2/rules/main.rules"
expect_err "two releases writing one archive" 2 "release 'd2' would write 'dist/same.tar.gz' again" "$Q" -C "$B2" release d1 d2
sed -i '/^\[release d1\]/,$d' "$B2/rules/main.rules"
# a write that fails half-way (file size limit) and a kill while writing
head -c 16777216 /dev/urandom > "$B2/docs/blob.bin"
"$Q" -C "$B2" release z > /dev/null 2>&1
rm -rf "$B2/dist"
(trap '' XFSZ; ulimit -f 2000; exec "$Q" -C "$B2" release z) > "$TMPD/fz.out" 2> "$TMPD/fz.err"
st=$?
[ $st -eq 1 ] && grep -q "release 'z': cannot write archive 'dist/z-.*.zip'" "$TMPD/fz.err" && [ -z "$(ls -A "$B2/dist")" ] &&
	pass "a write failing half-way leaves no partial archive" || fail "a write failing half-way leaves no partial archive" "status $st: $(cat "$TMPD/fz.err"; ls -la "$B2/dist")"
head -c 67108864 /dev/urandom > "$B2/docs/blob.bin"
"$Q" -C "$B2" release z > /dev/null 2>&1 &
pid=$!
n=0
# kill it once the temporary archive exists, i.e. while writing
while [ $n -lt 200 ] && ! ls -A "$B2/dist" 2>/dev/null | grep -q '\.tmp-'; do sleep 0.05; n=$((n + 1)); done
seen=$(ls -A "$B2/dist" 2>/dev/null)
kill -TERM $pid 2>/dev/null
{ wait $pid; } 2>/dev/null
st=$?
[ $st -eq 143 ] && [ -n "$seen" ] && [ -z "$(ls -A "$B2/dist")" ] && pass "a release killed while writing leaves nothing in dist/" ||
	fail "a release killed while writing leaves nothing in dist/" "status $st, saw '$seen': $(ls -la "$B2/dist")"
rm -f "$B2/docs/blob.bin"
rm -rf "$B2/dist" && echo "a file, not a directory" > "$B2/dist"
expect_err "an unusable dist/" 1 "release 'main': .*dist" "$Q" -C "$B2" release main
rm -f "$B2/dist" && mkdir -p "$B2/dist" && chmod 555 "$B2/dist"
if [ "$(id -u)" != 0 ]; then
	expect_err "an unwritable dist/" 1 "cannot create a file in 'dist/'" "$Q" -C "$B2" release main
	[ -z "$(ls -A "$B2/dist")" ] && pass "no partial archive in an unwritable dist/" || fail "no partial archive in an unwritable dist/"
else
	skip "an unwritable dist/" "running as root, permissions do not stop writes"
fi
chmod 755 "$B2/dist"
expect_err "unknown release option" 2 "unknown option '--frobnicate'" "$Q" -C "$B2" release --frobnicate
printf '[model relu]\nsource = models/relu.onnx\n' > "$B2/rules/main.rules"
expect_err "no release section" 2 "no \[release NAME\] section" "$Q" -C "$B2" release
exit 0
