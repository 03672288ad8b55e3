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
MIB="${1:-1024}"
. "$(dirname "$0")/common.sh"
for t in /usr/bin/time bc zstd gzip tar git; do
	command -v $t > /dev/null || { echo "bench: $t is missing (Debian packages time, bc, zstd, gzip, tar, git)" >&2; exit 1; }
done
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

# timed CMD: run CMD with sh, leave "wall-seconds cpu-seconds" (user + system
# of every process of it) in $T/t; the machine may be shared, CPU time is the
# steadier figure
timed() {
	/usr/bin/time -f '%e %U %S' -o "$T/t.raw" sh -c "$1" > "$T/cmd.log" 2>&1 || { cat "$T/cmd.log" >&2; exit 1; }
	awk '{ printf "%.2f %.2f\n", $1, $2 + $3 }' "$T/t.raw" > "$T/t"
}
tarcmd="cd '$P/build' && tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -cf - m0 m1 m2 m3"
row() { # row FORMAT WHAT SIZE [REF]: print times (and ratios against REF's)
	read -r w c < "$T/t"
	if [ -n "$4" ]; then
		printf '%-8s %-20s %9s s wall %9s s cpu %12s bytes   ratio wall %s cpu %s\n' "$1" "$2" "$w" "$c" "$3" \
			"$(echo "scale=2; $w / $(echo "$4" | cut -d' ' -f1)" | bc)" "$(echo "scale=2; $c / $(echo "$4" | cut -d' ' -f2)" | bc)"
	else
		printf '%-8s %-20s %9s s wall %9s s cpu %12s bytes\n' "$1" "$2" "$w" "$c" "$3"
	fi
}
# warm the page cache
cat "$P"/build/m*/* > /dev/null
echo "inputs: $(echo "$SIZE / 1048576" | bc) MiB in 4 models (2 with external data), $(nproc) CPUs, load $(cut -d' ' -f1 /proc/loadavg)"
timed "$tarcmd | gzip -n > '$T/ref.tar.gz'"
REF=$(cat "$T/t")
row tar.gz "tar | gzip -n" "$(stat -c %s "$T/ref.tar.gz")"
rm -rf "$P/dist"
timed "'$QUANTMAKE' -C '$P' release big"
"$QUANTMAKE" verify-release "$P"/dist/big-*.tar.gz > /dev/null || { echo "bench: verify-release failed" >&2; exit 1; }
row tar.gz "quantmake release" "$(stat -c %s "$P"/dist/big-*.tar.gz)" "$REF"
timed "$tarcmd | zstd -q -3 -T1 -c > '$T/ref.tar.zst'"
REF=$(cat "$T/t")
row tar.zst "tar | zstd -3 -T1" "$(stat -c %s "$T/ref.tar.zst")"
timed "'$QUANTMAKE' -C '$P' release bigz"
row tar.zst "quantmake release" "$(stat -c %s "$P"/dist/bigz-*.tar.zst)" "$REF"
