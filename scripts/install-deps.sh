#!/bin/sh
# Installs the Debian packages quantmake builds and tests with. Idempotent:
# packages already present are left alone, and the ones installed are named.
#
#     sh scripts/install-deps.sh [--bench]
#
# --bench adds BENCH_PKGS, which only the scripts in bench/ use (make check
# and make example never pass it): Debian's torch to train the benchmark
# models, the Fashion-MNIST images they are trained and scored on, and
# espeak-ng to speak the sentences silero-vad is calibrated and scored on;
# curl and bc for bench/remote.sh (curl is its peer, bc its arithmetic).
# gdb is for the tests: t_matmul_sparse checks under it which kernel ran;
# nginx too: t_remote runs one (WebDAV PUT) as a remote cache; clang and
# its libFuzzer runtime build the fuzz targets (make fuzz, tests/t_fuzz.sh).
set -e
PKGS="build-essential pkg-config make
libprotobuf-c-dev protobuf-c-compiler libonnx-dev libonnx-testdata
libxxhash-dev xxhash libarchive-dev libminizip-dev zlib1g-dev libgit2-dev libinih-dev nettle-dev
libopenblas-dev libjansson-dev libcurl4-openssl-dev
python3 python3-venv git ninja-build zstd gdb nginx
clang libclang-rt-14-dev"
BENCH_PKGS="python3-torch dataset-fashion-mnist espeak-ng curl bc"
case "$1" in
"") ;;
--bench) PKGS="$PKGS $BENCH_PKGS" ;;
*) echo "install-deps: unknown option '$1' (expected nothing or --bench)" >&2; exit 2 ;;
esac
missing=""
for p in $PKGS; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
		missing="$missing $p"
	fi
done
if [ -z "$missing" ]; then
	echo "install-deps: all Debian packages present"
	exit 0
fi
echo "install-deps: installing:$missing"
SUDO=""
[ "$(id -u)" = 0 ] || SUDO=sudo
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $missing
