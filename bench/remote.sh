#!/bin/sh
# Remote cache benchmark: a build served from a warm remote cache (Debian's
# nginx with WebDAV PUT, on loopback) against the same build from a warm
# local cache, and against curl fetching the same blobs from the same
# server over one connection. quantmake's remote build downloads every
# blob (SHA-256 and XXH3-128 computed as it arrives, size and digests
# checked), stores it in the local cache and copies the outputs into
# build/ (as the warm local build does); curl only writes the files. Prints
# the times, the remote build's throughput as a share of curl's, that of
# its transfer alone (the remote build's time less the local build's;
# goal: 0.9 or more), and whether a no-op build touched the network (it
# must not).
#
#   sh bench/remote.sh [MIB]     (default: 512 MiB of models, in 4 models)
#
# QUANTMAKE names the binary (default: a release build in obj/bench-release).
MIB="${1:-512}"
. "$(dirname "$0")/common.sh"
. "$ROOT/tests/lib/nginx.sh"
for t in curl bc; do
	command -v "$t" > /dev/null || { echo "bench: $t is missing (Debian packages curl, bc)" >&2; exit 1; }
done
T=$(mktemp -d)
cleanup() {
	nginx_stop "$T/nginx"
	rm -rf "$T"
}
trap cleanup EXIT
mkdir -p "$T/nginx"
nginx_start "$T/nginx" || { cat "$T/nginx/start.err" >&2; exit 1; }
URL=http://127.0.0.1:$NGINX_PORT/qm

# Four models of MIB/4 each, normal-distributed float32 weights inline,
# taken as they are (source =): one action each, one big output
mkdir -p "$T/a/rules" "$T/a/models"
"$PY" - "$T/a/models" "$MIB" <<'PY' || exit 1
import sys, numpy as np, onnx
from onnx import helper, numpy_helper, TensorProto
d, mib = sys.argv[1], int(sys.argv[2])
rng = np.random.default_rng(0)
cols = 1024
rows = mib * 2**20 // 4 // (4 * cols)
for i in range(4):
    w = rng.standard_normal((rows, cols), dtype=np.float32)
    g = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, rows])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, cols])],
        [numpy_helper.from_array(w, "w")])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), f"{d}/m{i}.onnx")
PY
for i in 0 1 2 3; do
	printf '[model m%d]\nsource = models/m%d.onnx\n\n' "$i" "$i"
done > "$T/a/rules/models.rules"
cp -r "$T/a" "$T/b"

# wall seconds of a command (its output to $T/out)
timed() {
	s=$(date +%s.%N)
	"$@" > "$T/out" 2>&1 || { cat "$T/out" >&2; exit 1; }
	e=$(date +%s.%N)
	echo "$e - $s" | bc
}
export QUANTMAKE_REMOTE_CACHE=$URL
# fill the remote from clone a
timed "$QUANTMAKE" -C "$T/a" all > /dev/null
grep -q 'uploads' "$T/out" || { echo "bench: nothing was uploaded:" >&2; cat "$T/out" >&2; exit 1; }
bytes=$(du -sb "$T/nginx/root/qm/cas" | cut -f1)

best() { # best of 3 runs of: prepare-command; measured command (a function)
	b=
	for run in 1 2 3; do
		"$1"
		t=$(timed "$2")
		if [ -z "$b" ] || [ "$(echo "$t < $b" | bc)" = 1 ]; then b=$t; fi
	done
	echo "$b"
}
# warm local: clone a's build directory removed, its cache full
local_prep() { rm -rf "$T/a/build"; }
local_run() { QUANTMAKE_REMOTE_CACHE=off "$QUANTMAKE" -C "$T/a" all; }
# warm remote: clone b's build directory and local cache removed
remote_prep() { rm -rf "$T/b/build" "$T/b/cache"; }
remote_run() { "$QUANTMAKE" -C "$T/b" all; }
# curl: every blob of the remote, one process, one connection
ls "$T/nginx/root/qm/cas" > "$T/blobs"
curl_prep() {
	rm -rf "$T/curl"
	mkdir -p "$T/curl"
	while read -r h; do
		printf 'url = "%s/cas/%s"\noutput = "%s/curl/%s"\n' "$URL" "$h" "$T" "$h"
	done < "$T/blobs" > "$T/curl.cfg"
}
curl_run() { curl -sSf -K "$T/curl.cfg"; }

# page cache warm for all three
cat "$T"/nginx/root/qm/cas/* "$T"/a/cache/objects/*/* > /dev/null
tl=$(best local_prep local_run)
tr=$(best remote_prep remote_run)
grep -q 'remote cache: 4 hits' "$T/out" || { echo "bench: the remote build did not hit:" >&2; cat "$T/out" >&2; exit 1; }
tc=$(best curl_prep curl_run)
n0=$(wc -l < "$T/nginx/access.log")
"$QUANTMAKE" -C "$T/b" all > "$T/out" 2>&1
n1=$(wc -l < "$T/nginx/access.log")

mb() { echo "scale=1; $bytes / 1000000 / $1" | bc; }
echo "remote cache on loopback (nginx $("$(command -v nginx || echo /usr/sbin/nginx)" -v 2>&1 | sed 's/.*nginx\///')), $(echo "scale=1; $bytes / 1048576" | bc) MiB in $(wc -l < "$T/blobs") blobs, best of 3:"
printf '  warm local cache   %6.3f s\n' "$tl"
printf '  warm remote cache  %6.3f s  (%s MB/s)   remote / local: %s\n' "$tr" "$(mb "$tr")" "$(echo "scale=2; $tr / $tl" | bc)"
printf '  curl, same blobs   %6.3f s  (%s MB/s)\n' "$tc" "$(mb "$tc")"
printf '  remote build throughput / curl throughput: %s\n' "$(echo "scale=2; $tc / $tr" | bc)"
# the remote build is a transfer plus what the local build does (copying
# the outputs into build/, each hashed): its transfer is the difference
printf '  transfer (remote - local build) / curl: %s (goal >= 0.9)\n' "$(echo "scale=2; $tc / ($tr - $tl)" | bc)"
printf '  no-op build: %s requests to the server (goal 0)\n' "$((n1 - n0))"
