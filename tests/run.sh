#!/bin/sh
# Test runner: runs every tests/t_*.sh (and each built unit test) and prints
# the closing line "N passed, N failed". Each test script prints one line per
# case: "PASS: name", "FAIL: name: why" or "SKIP: name: why".
# QUANTMAKE names the binary under test (default: ./quantmake).
cd "$(dirname "$0")/.." || exit 2
ROOT=$(pwd)
export ROOT
export QUANTMAKE="${QUANTMAKE:-$ROOT/quantmake}"
export PY="$ROOT/.venv/bin/python"
# tests/lib/sitecustomize.py: onnxruntime computes integer models exactly
export PYTHONPATH="$ROOT/tests/lib${PYTHONPATH:+:$PYTHONPATH}"
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
only="$*"
for t in tests/t_*.sh; do
	name=$(basename "$t" .sh)
	if [ -n "$only" ] && ! echo " $only " | grep -q " $name "; then continue; fi
	echo "== $name"
	start=$(date +%s)
	out=$(mktemp)
	sh "$t" > "$out" 2>&1
	rc=$?
	grep -v '^PASS: ' "$out"
	cat "$out" >> "$log"
	if [ $rc -ne 0 ] && ! grep -q '^FAIL: ' "$out"; then
		echo "FAIL: $name: script exited with status $rc" | tee -a "$log"
	fi
	rm -f "$out"
	echo "   ($(( $(date +%s) - start ))s, $(grep -c '^PASS: ' "$log") passed so far)"
done
passed=$(grep -c '^PASS: ' "$log")
failed=$(grep -c '^FAIL: ' "$log")
skipped=$(grep -c '^SKIP: ' "$log")
echo
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
