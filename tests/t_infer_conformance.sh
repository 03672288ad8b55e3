#!/bin/sh
# Conformance of the type/shape inference pass against ONNX's own test data
# (Debian libonnx-testdata): every model of node, pytorch-converted,
# pytorch-operator and simple has its output and value_info annotations
# dropped, is inferred again, and must match what it declared (element type,
# rank, every concrete dim); every concrete dim we infer for an output must
# also be the real one of test_data_set_0/output_K.pb (so a wrong guess where
# the model declares only a symbol fails too). One case per model;
# tests/infer-skip.txt lists models left out, one reason each (an entry
# whose model passes is a failure: stale). The closing cases check the rates: at
# least 98% of the node models and all of the others.
DATA=${INFER_TESTDATA:-/usr/share/libonnx-testdata/data}
SKIPS="$ROOT/tests/infer-skip.txt"
if [ ! -d "$DATA/node" ]; then
	echo "SKIP: infer_conformance: $DATA not found (install libonnx-testdata)"
	exit 0
fi
if [ ! -x "$QUANTMAKE" ]; then
	echo "FAIL: infer_conformance: $QUANTMAKE is not an executable"
	exit 1
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for d in node pytorch-converted pytorch-operator simple; do
	ls "$DATA/$d"/*/model.onnx 2>/dev/null
done > "$tmp/all"
cp "$tmp/all" "$tmp/todo"
: > "$tmp/res"
# One process for many models; should it die (a crash is a failure of the
# model it was on), record that model and go on with the rest.
rounds=0
while [ -s "$tmp/todo" ] && [ $rounds -lt 50 ]; do
	rounds=$((rounds + 1))
	xargs "$QUANTMAKE" infer-shapes --check-against-declared --skip "$SKIPS" \
		< "$tmp/todo" > "$tmp/out" 2> "$tmp/err"
	if ! grep -qE '^(PASS|FAIL|SKIP): ' "$tmp/out"; then
		# nothing ran at all: a broken binary, not one bad model
		echo "FAIL: infer_conformance: $(wc -l < "$tmp/todo") models not checked: $(head -c 300 "$tmp/err")"
		break
	fi
	grep -E '^(PASS|FAIL|SKIP): ' "$tmp/out" >> "$tmp/res"
	# models with no result line yet
	sed -E 's/^[A-Z]+: ([^:]+)(:.*)?$/\1/' "$tmp/res" | sort > "$tmp/done"
	: > "$tmp/next"
	first=
	while read -r m; do
		label=$(echo "$m" | sed -E 's|.*/([^/]+/[^/]+)/model\.onnx$|\1|')
		if ! grep -qxF "$label" "$tmp/done"; then
			if [ -z "$first" ]; then
				first=$label
				why=$(grep -v '^\s*$' "$tmp/err" | grep -m1 -E 'ERROR|runtime error|Sanitizer' || tail -n1 "$tmp/err")
				echo "FAIL: $label: quantmake died: $why" >> "$tmp/res"
			else
				echo "$m" >> "$tmp/next"
			fi
		fi
	done < "$tmp/todo"
	mv "$tmp/next" "$tmp/todo"
done
sed -E 's/^(PASS|FAIL|SKIP): /\1: infer:/' "$tmp/res"
# rates per directory
for d in node pytorch-converted pytorch-operator simple; do
	total=$(grep -c "/$d/" "$tmp/all")
	pass=$(grep -c "^PASS: $d/" "$tmp/res")
	skip=$(grep -c "^SKIP: $d/" "$tmp/res")
	run=$((total - skip))
	rate=$(awk -v p="$pass" -v r="$run" 'BEGIN { printf "%.1f", r ? 100 * p / r : 100 }')
	echo "infer conformance $d: $pass/$run passed ($rate%), $skip skipped"
	if [ "$d" = node ]; then
		goal=98
	else
		goal=100
	fi
	if awk -v p="$pass" -v r="$run" -v g="$goal" 'BEGIN { exit !(r == 0 || 100 * p >= g * r) }'; then
		echo "PASS: infer_conformance_rate_$d"
	else
		echo "FAIL: infer_conformance_rate_$d: $rate% < $goal%"
	fi
done
