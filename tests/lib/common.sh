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

mktmp() {
	TMPD=$(mktemp -d "${TMPDIR:-/tmp}/qmtest.XXXXXX")
	trap 'rm -rf "$TMPD"' EXIT
}
