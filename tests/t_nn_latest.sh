#!/bin/sh
# The neural-network operators (conv, matmul, pooling, normalization,
# resize/pad, quantization, einsum, depth/space) against the node tests that
# the installed onnx package generates (newer opsets than Debian's
# libonnx-testdata): one PASS/FAIL per test, SKIP for refused features.
ROOT="${ROOT:-$(cd "$(dirname "$0")/.." && pwd)}"
. "$ROOT/tests/lib/common.sh"
if ! "$PY" -c 'import onnx.backend.test.case.node' 2>/dev/null; then
	fail nn_latest "the onnx package is not installed in .venv (scripts/venv.sh)"
	exit 0
fi
mktmp
"$PY" "$ROOT/tests/nn_latest_gen.py" "$TMPD/node" 23 > "$TMPD/gen.out" 2> "$TMPD/gen.err" || {
	fail nn_latest_generate "$(tail -n 1 "$TMPD/gen.err")"
	exit 0
}
sed -n 's/^SKIP \([^:]*\): /SKIP: nn_latest\/\1: /p' "$TMPD/gen.out"
ls -d "$TMPD"/node/*/ | sed 's|/$||' > "$TMPD/list"
if [ ! -s "$TMPD/list" ]; then
	fail nn_latest_generate "no test cases were generated"
	exit 0
fi
# shellcheck disable=SC2046
timeout 900 "$QUANTMAKE" run --conformance $(cat "$TMPD/list") > "$TMPD/out" 2> "$TMPD/err"
sed -n 's/^PASS: /PASS: nn_latest\//p; s/^FAIL: /FAIL: nn_latest\//p; s/^UNSUPPORTED: /FAIL: nn_latest\//p' "$TMPD/out"
n=$(grep -cE '^(PASS|FAIL|UNSUPPORTED): ' "$TMPD/out")
if [ "$n" -lt "$(wc -l < "$TMPD/list")" ]; then
	fail nn_latest_run "quantmake stopped after $n of $(wc -l < "$TMPD/list") tests: $(grep -m1 -E 'ERROR|runtime error|Sanitizer' "$TMPD/err" | cut -c1-200)"
fi
exit 0
