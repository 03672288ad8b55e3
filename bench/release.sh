#!/bin/sh
# Release benchmark: `quantmake release` of about 1 GiB of models against
# `tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner | gzip -n`
# over the same files (the build outputs), both with warm page caches.
# quantmake's time includes its no-op build check, reading the git stamp,
# parsing every model, XXH3-128 + SHA-256 of every byte, the manifest and
# stamping; tar + gzip only packs. Prints both times and the ratio
# quantmake/tar+gzip (goal: <= 1), for tar.gz and, for reference, tar.zst.
#
#   sh bench/release.sh [MIB]     (default: 1024 MiB of models)
#
# QUANTMAKE names the binary (default: a release build in obj/bench-release).
ROOT="${ROOT:-$(cd "$(dirname "$0")/.." && pwd)}"
PY="${PY:-$ROOT/.venv/bin/python}"
MIB="${1:-1024}"
if [ -z "$QUANTMAKE" ]; then
	make -s -C "$ROOT" OBJ=obj/bench-release obj/bench-release/quantmake >&2 || exit 1
	QUANTMAKE="$ROOT/obj/bench-release/quantmake"
fi
"$PY" -c 'import onnx, numpy' 2>/dev/null || { echo "bench: onnx/numpy missing (sh scripts/venv.sh)" >&2; exit 1; }
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
P=$T/proj
mkdir -p "$P/rules" "$P/models"

# Four models of MIB/4 each: two with their weights inline, two with
# external data; weights are normal-distributed float32 (gzip saves ~7%,
# as on trained weights).
"$PY" - "$P/models" "$MIB" <<'PY' || exit 1
import sys, numpy as np, onnx
from onnx import helper, numpy_helper, TensorProto
d, mib = sys.argv[1], int(sys.argv[2])
rng = np.random.default_rng(0)
per = mib * 2**20 // 4
for i in range(4):
    cols = 1024
    rows = per // (4 * cols)
    w = rng.standard_normal((rows, cols), dtype=np.float32)
    g = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "m%d" % i,
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", rows])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", cols])],
        [numpy_helper.from_array(w, "w")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    if i % 2:
        onnx.save(m, "%s/m%d.onnx" % (d, i), save_as_external_data=True,
                  location="m%d.onnx.data" % i, size_threshold=0)
    else:
        onnx.save(m, "%s/m%d.onnx" % (d, i))
PY
cat > "$P/rules/main.rules" <<'R'
[model m0]
source = models/m0.onnx
[model m1]
source = models/m1.onnx
[model m2]
source = models/m2.onnx
[model m3]
source = models/m3.onnx

[release big]
models = m0 m1 m2 m3
format = tar.gz

[release bigz]
models = m0 m1 m2 m3
format = tar.zst
R
printf 'build/\ncache/\ndist/\nmodels/\n' > "$P/.gitignore"
(cd "$P" && git init -q && git add -A &&
	git -c user.name=bench -c user.email=bench@example.com commit -qm bench) || exit 1
"$QUANTMAKE" -C "$P" > /dev/null || exit 1
SIZE=$(du -cb "$P"/build/m*/* | tail -1 | cut -f1)

now() { date +%s.%N; }
# the same inputs for tar: the build outputs, in a directory named like the archive's
timed_tar() { # timed_tar COMPRESSOR OUT
	t0=$(now)
	(cd "$P/build" && tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -cf - m0 m1 m2 m3) | $1 > "$2"
	t1=$(now)
	echo "$t1 - $t0" | bc
}
timed_qm() { # timed_qm RELEASE
	rm -rf "$P/dist"
	t0=$(now)
	"$QUANTMAKE" -C "$P" release "$1" > "$T/qm.log" 2>&1 || { cat "$T/qm.log" >&2; exit 1; }
	t1=$(now)
	echo "$t1 - $t0" | bc
}
# warm the page cache
cat "$P"/build/m*/* > /dev/null
echo "inputs: $(echo "$SIZE / 1048576" | bc) MiB in 4 models (2 with external data), $(nproc) CPUs"
TG=$(timed_tar "gzip -n" "$T/ref.tar.gz")
QG=$(timed_qm big)
QGS=$(stat -c %s "$P"/dist/big-*.tar.gz)
"$QUANTMAKE" verify-release "$P"/dist/big-*.tar.gz > /dev/null || { echo "bench: verify-release failed" >&2; exit 1; }
TZ_=$(timed_tar "zstd -q -3 -T1 -c" "$T/ref.tar.zst")
QZ=$(timed_qm bigz)
QZS=$(stat -c %s "$P"/dist/bigz-*.tar.zst)
printf '%-8s %-22s %8s s %12s bytes\n' tar.gz "tar | gzip -n" "$TG" "$(stat -c %s "$T/ref.tar.gz")"
printf '%-8s %-22s %8s s %12s bytes   ratio %s\n' tar.gz "quantmake release" "$QG" "$QGS" "$(echo "scale=2; $QG / $TG" | bc)"
printf '%-8s %-22s %8s s %12s bytes\n' tar.zst "tar | zstd -3 -T1" "$TZ_" "$(stat -c %s "$T/ref.tar.zst")"
printf '%-8s %-22s %8s s %12s bytes   ratio %s\n' tar.zst "quantmake release" "$QZ" "$QZS" "$(echo "scale=2; $QZ / $TZ_" | bc)"
