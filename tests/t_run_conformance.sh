#!/bin/sh
# Execution conformance: every ONNX test of libonnx-testdata (node,
# pytorch-converted, pytorch-operator, simple) whose operators the interpreter
# supports runs on each test_data_set_N and must match output_K.pb (relative
# 1e-3, absolute 1e-5 for floats, exact for integers and bool).
#
#   sh tests/t_run_conformance.sh ['test_relu*' ...]   glob filters on test names
#
# Prints PASS/FAIL per test, SKIP for entries of tests/run-skip.txt, then per
# directory the pass rate and the coverage (supported models / all models).
# Without filters the coverage of node tests must reach 95% (CONF_MIN_COVER):
# what remains unsupported is random sampling (Bernoulli, RandomUniformLike,
# training-mode Dropout), training operators and one Resize mode.
# Unsupported tests are listed one per line with CONF_VERBOSE=1.
# QUANTMAKE names the binary (default: a fresh build in obj/conformance);
# CONF_DATA the data root; CONF_DIRS the directories to walk.
ROOT="${ROOT:-$(cd "$(dirname "$0")/.." && pwd)}"
DATA="${CONF_DATA:-/usr/share/libonnx-testdata/data}"
DIRS="${CONF_DIRS:-node pytorch-converted pytorch-operator simple}"
MIN_COVER="${CONF_MIN_COVER:-95}"
SKIPLIST="$ROOT/tests/run-skip.txt"
BATCH=40

if [ -z "$QUANTMAKE" ]; then
	make -s -C "$ROOT" OBJ=obj/conformance obj/conformance/quantmake >&2 || {
		echo "FAIL: conformance: cannot build quantmake"; exit 1; }
	QUANTMAKE="$ROOT/obj/conformance/quantmake"
fi
if [ ! -x "$QUANTMAKE" ]; then
	echo "FAIL: conformance: $QUANTMAKE is not an executable"
	exit 1
fi
if [ ! -d "$DATA" ]; then
	echo "SKIP: conformance: $DATA not found (apt-get install libonnx-testdata)"
	exit 0
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

matches() { # name: does it match a filter (or are there none)?
	[ $# -eq 1 ] && return 0
	n=$1; shift
	for pat in "$@"; do
		# shellcheck disable=SC2254
		case $n in $pat) return 0 ;; esac
	done
	return 1
}

total_fail=0
for d in $DIRS; do
	[ -d "$DATA/$d" ] || continue
	: > "$tmp/list"
	: > "$tmp/res"
	nskip=0
	for t in "$DATA/$d"/*/; do
		t=${t%/}
		name=${t##*/}
		[ -f "$t/model.onnx" ] || continue
		matches "$name" "$@" || continue
		reason=$(awk -v n="$d/$name" -v b="$name" '$1 == n || $1 == b { $1 = ""; sub(/^ +/, ""); print; exit }' "$SKIPLIST" 2>/dev/null)
		if [ -n "$reason" ]; then
			echo "SKIP: $d/$name: $reason"
			nskip=$((nskip + 1))
			continue
		fi
		echo "$t" >> "$tmp/list"
	done
	# run in batches; a crash loses the batch's remaining tests, which are
	# resubmitted after the test that crashed is marked failed
	while [ -s "$tmp/list" ]; do
		head -n $BATCH "$tmp/list" > "$tmp/batch"
		tail -n +$((BATCH + 1)) "$tmp/list" > "$tmp/rest"
		# shellcheck disable=SC2046
		timeout 900 "$QUANTMAKE" run --conformance $(cat "$tmp/batch") > "$tmp/out" 2> "$tmp/err"
		rc=$?
		grep -E '^(PASS|FAIL|UNSUPPORTED): ' "$tmp/out" >> "$tmp/res"
		done_n=$(grep -cE '^(PASS|FAIL|UNSUPPORTED): ' "$tmp/out")
		if [ "$done_n" -lt "$(wc -l < "$tmp/batch")" ]; then
			crashed=$(sed -n "$((done_n + 1))p" "$tmp/batch")
			why=$(grep -m1 -E 'ERROR|runtime error|Sanitizer' "$tmp/err" | cut -c1-200)
			echo "FAIL: ${crashed##*/}: crashed (exit $rc) ${why}" >> "$tmp/res"
			tail -n +$((done_n + 2)) "$tmp/batch" > "$tmp/list"
			cat "$tmp/rest" >> "$tmp/list"
		else
			mv "$tmp/rest" "$tmp/list"
		fi
	done
	sed -n "s|^PASS: |PASS: $d/|p; s|^FAIL: |FAIL: $d/|p" "$tmp/res"
	if [ -n "$CONF_VERBOSE" ]; then
		sed -n "s|^UNSUPPORTED: |  unsupported: $d/|p" "$tmp/res"
	fi
	np=$(grep -c '^PASS: ' "$tmp/res")
	nf=$(grep -c '^FAIL: ' "$tmp/res")
	nu=$(grep -c '^UNSUPPORTED: ' "$tmp/res")
	all=$((np + nf + nu + nskip))
	sup=$((np + nf))
	total_fail=$((total_fail + nf))
	[ $all -eq 0 ] && continue
	echo "$d: $np/$sup supported tests pass ($(( sup ? 100 * np / sup : 100 ))%); coverage $sup/$all models supported ($((100 * sup / all))%), $nskip skipped"
	if [ $# -eq 0 ] && [ "$d" = node ]; then
		if [ $((100 * sup)) -ge $((MIN_COVER * all)) ]; then
			echo "PASS: conformance-coverage-node ($((100 * sup / all))% >= $MIN_COVER%)"
		else
			echo "FAIL: conformance-coverage-node: $sup/$all node tests supported ($((100 * sup / all))%), goal $MIN_COVER%"
		fi
		# the most frequent reasons, to steer the work
		grep '^UNSUPPORTED: ' "$tmp/res" |
			sed -E -n 's/.* ([A-Za-z0-9_.]+)-[0-9]+ is not supported.*/\1/p; t; s/.* \(([A-Za-z0-9_]+)\): .*/\1/p; t; s/.*(string|sequence|optional|map|sparse tensor) (tensors|values) are not supported.*/\1-values/p' |
			sort | uniq -c | sort -rn | head -15 |
			awk 'BEGIN { printf "  unsupported operators (tests):" } { printf " %s(%d)", $2, $1 } END { print "" }'
	fi
done
exit 0
