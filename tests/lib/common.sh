# Shared helpers for tests/t_*.sh (POSIX sh). Source with: . "$ROOT/tests/lib/common.sh"
: "${ROOT:=$(cd "$(dirname "$0")/.." && pwd)}"
: "${QUANTMAKE:=$ROOT/quantmake}"
: "${PY:=$ROOT/.venv/bin/python}"
TESTDATA=/usr/share/libonnx-testdata/data

pass() { echo "PASS: $1"; }
fail() { echo "FAIL: $1${2:+: $2}"; }
skip() { echo "SKIP: $1: $2"; }

# check NAME COMMAND...: PASS when the command succeeds
check() {
	name=$1
	shift
	if "$@" >/dev/null 2>&1; then pass "$name"; else fail "$name" "$*"; fi
}

# expect_err NAME EXPECTED_STATUS PATTERN COMMAND...: the command exits with
# the status and its stderr matches the grep -E pattern on one line
expect_err() {
	name=$1 want=$2 pat=$3
	shift 3
	"$@" >"$TMPD/.stdout" 2>"$TMPD/.stderr"
	st=$?
	if [ "$st" -ne "$want" ]; then
		fail "$name" "exit $st, expected $want; stderr: $(head -c 300 "$TMPD/.stderr")"
	elif ! grep -Eq -- "$pat" "$TMPD/.stderr"; then
		fail "$name" "stderr does not match '$pat': $(head -c 300 "$TMPD/.stderr")"
	else
		pass "$name"
	fi
}

# does the CPU run AVX-512F? The interpreter's own float kernels
# (src/ops/fgemm.c and the packed convolutions) exist only there; without
# it the products run on OpenBLAS
has_avx512() {
	grep -qw avx512f /proc/cpuinfo 2>/dev/null
}

mktmp() {
	TMPD=$(mktemp -d "${TMPDIR:-/tmp}/qmtest.XXXXXX")
	trap 'rm -rf "$TMPD"' EXIT
}

# gen_onnx_pb: the system's onnx.proto compiled by protoc-c into $TMPD/gen
# (onnx.pb-c.h and .c, as the build generates them); non-zero with the
# reason in $TMPD/err when it cannot be
gen_onnx_pb() {
	mkdir -p "$TMPD/gen" &&
		cp /usr/include/onnx/onnx.proto "$TMPD/gen/" 2> "$TMPD/err" &&
		(cd "$TMPD/gen" && protoc-c --c_out=. onnx.proto) >> "$TMPD/err" 2>&1
}

# c_check NAME ARGS...: build tests/NAME.c with ARGS (more sources and
# flags) under AddressSanitizer and UBSan where the compiler has them,
# warnings as errors, and run it; its PASS/FAIL/SKIP lines are the test's.
# A build failure, a non-zero exit or no result line is a FAIL.
c_check() {
	cc_name=$1
	shift
	cc_san="-fsanitize=address,undefined -fno-sanitize-recover=all"
	echo 'int main(void){return 0;}' > "$TMPD/cc_probe.c"
	${CC:-cc} $cc_san -o "$TMPD/cc_probe" "$TMPD/cc_probe.c" 2>/dev/null || cc_san=
	# shellcheck disable=SC2086
	if ! ${CC:-cc} -std=c11 -D_GNU_SOURCE -O1 -g -Wall -Wextra -Werror -Wno-unused-parameter -Wshadow -Wvla \
		$cc_san -pthread -I"$ROOT/src" -o "$TMPD/$cc_name" "$ROOT/tests/$cc_name.c" "$@" -lm \
		2> "$TMPD/$cc_name.err"; then
		fail "$cc_name" "cannot build tests/$cc_name.c: $(head -c 300 "$TMPD/$cc_name.err")"
		return
	fi
	cc_out=$("$TMPD/$cc_name" 2>&1)
	cc_st=$?
	echo "$cc_out"
	[ $cc_st -eq 0 ] || fail "$cc_name" "exited with status $cc_st"
	echo "$cc_out" | grep -Eq '^(PASS|FAIL|SKIP): ' || fail "$cc_name" "printed no result"
}
