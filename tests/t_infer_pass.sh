#!/bin/sh
# The inference pass on small hand-built models (tests/models/make_cases.py):
# bad input gets one clear line and no output file; merge and strict modes;
# symbols, constant propagation, subgraphs and element types come out right.
if [ ! -x "$PY" ]; then
	echo "SKIP: infer_pass: $PY missing (sh scripts/venv.sh)"
	exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if ! "$PY" "$ROOT/tests/models/make_cases.py" "$tmp" 2> "$tmp/gen.err"; then
	echo "FAIL: infer_pass: cannot make the test models: $(tail -n1 "$tmp/gen.err")"
	exit 1
fi

# bad NAME PATTERN: infer-shapes fails, prints PATTERN on one line, writes nothing
bad() {
	rm -f "$tmp/out.onnx"
	"$QUANTMAKE" infer-shapes "$tmp/$1.onnx" "$tmp/out.onnx" > "$tmp/stdout" 2> "$tmp/stderr"
	rc=$?
	if [ $rc -eq 0 ]; then
		echo "FAIL: infer_bad_$1: exit 0, expected an error"
	elif [ $rc -ge 128 ]; then
		echo "FAIL: infer_bad_$1: crashed (status $rc): $(head -c 300 "$tmp/stderr")"
	elif [ -e "$tmp/out.onnx" ]; then
		echo "FAIL: infer_bad_$1: output written despite the error"
	elif [ "$(wc -l < "$tmp/stderr")" -ne 1 ]; then
		echo "FAIL: infer_bad_$1: expected one line, got: $(head -c 300 "$tmp/stderr")"
	elif ! grep -q -- "$2" "$tmp/stderr"; then
		echo "FAIL: infer_bad_$1: message lacks '$2': $(cat "$tmp/stderr")"
	else
		echo "PASS: infer_bad_$1"
	fi
}
bad cycle "graph 'g' is not a DAG: node 'r[12]' (Relu) is on a cycle"
bad dangling "node 'add1' (Add): input 'nope' refers to no tensor"
bad opset24 "ai.onnx opset 24, newer than the 23"
bad no_domain "node 'foo' (Foo): domain 'com.example' is not imported"
bad contradiction "node 'relu1' (Relu): tensor 't': inferred float\[2,3\] but the model declares float\[2,4\]"
bad twice "tensor 't' is produced by two nodes"
bad attr_type "node 'tr'.*attribute 'perm' has type float, expected ints"
bad broadcast "node 'add2' (Add): .*broadcast"
bad redefine "node 'neg' (Neg): output 'x' redefines a graph input or initializer"

# good NAME [--strict]: infer-shapes succeeds; the types land in $tmp/NAME.types
good() {
	name=$1
	shift
	rm -f "$tmp/out.onnx"
	if ! "$QUANTMAKE" infer-shapes "$tmp/$name.onnx" "$tmp/out.onnx" "$@" > "$tmp/stdout" 2> "$tmp/stderr"; then
		echo "FAIL: infer_$name: $(head -c 300 "$tmp/stderr")"
		return 1
	fi
	if ! "$PY" "$ROOT/tests/models/dump_types.py" "$tmp/out.onnx" > "$tmp/$name.types" 2> "$tmp/dump.err"; then
		echo "FAIL: infer_$name: output is not a readable model: $(tail -n1 "$tmp/dump.err")"
		return 1
	fi
	return 0
}
# expect NAME CASE LINE...: every LINE appears in NAME's types
expect() {
	name=$1 case=$2
	shift 2
	for l in "$@"; do
		if ! grep -qxF -- "$l" "$tmp/$name.types"; then
			echo "FAIL: infer_$case: expected '$l', got: $(tr '\n' ';' < "$tmp/$name.types")"
			return
		fi
	done
	echo "PASS: infer_$case"
}

good symbols && expect symbols symbols "vi a FLOAT[N,5,4]" "vi b FLOAT[4,N,5]" "out y FLOAT[4,N,5]"
good shape_chain && expect shape_chain shape_chain "vi newshape INT64[2]" "out y FLOAT[2,12]"
good shape_chain_sym && expect shape_chain_sym shape_chain_symbolic "out y FLOAT[batch,12]"
good if_outer && expect if_outer if_outer_scope "vi t FLOAT[2,3]" "out y FLOAT[2,3]" \
	"  out tb FLOAT[2,3]" "  out eb FLOAT[2,3]"
good loop && expect loop loop_body "out v FLOAT[2,3]" "  out v_out FLOAT[2,3]" "  out scan_out FLOAT[2,3]"
good sequence && expect sequence sequence_type "vi s seq(FLOAT[2,3])" "out y FLOAT[2,3]"
good init_input && expect init_input initializer_as_input "out y FLOAT[3,2]"
good function && expect function local_function "out y FLOAT[3,2,5]"
good type_float8 && expect type_float8 type_float8 "out y FLOAT8E4M3FN[3,2]"
good type_int4 && expect type_int4 type_int4 "out y INT4[3,2]"
good type_bfloat16 && expect type_bfloat16 type_bfloat16 "out y BFLOAT16[3,2]"

# all element types and kinds survive TypeProto -> ValueType -> TypeProto
if good passthrough; then
	"$PY" - "$tmp/passthrough.onnx" "$tmp/out.onnx" > "$tmp/pt.txt" 2>&1 <<'PYEOF'
import sys, onnx
a, b = onnx.load(sys.argv[1]).graph, onnx.load(sys.argv[2]).graph
ins = {v.name: v.type for v in a.input}
for o in b.output:
    t = ins[o.name]
    # an unnamed dim comes back with a fresh symbol: compare without it
    for x in (t, o.type):
        tt = x.tensor_type if x.HasField("tensor_type") else None
        if tt is not None and len(tt.shape.dim) == 3:
            tt.shape.dim[2].Clear()
    if t != o.type:
        print("mismatch", o.name, t, o.type)
PYEOF
	if [ -s "$tmp/pt.txt" ]; then
		echo "FAIL: infer_type_roundtrip: $(head -c 400 "$tmp/pt.txt" | tr '\n' ' ')"
	else
		echo "PASS: infer_type_roundtrip"
	fi
fi

# unknown dims get fresh names, and the same unknown keeps its name downstream
if good symbols; then
	if grep -q "unk__" "$tmp/symbols.types"; then
		echo "FAIL: infer_declared_symbol_kept: $(tr '\n' ';' < "$tmp/symbols.types")"
	else
		echo "PASS: infer_declared_symbol_kept"
	fi
fi

# fresh names never reuse a dim name the model declares elsewhere
if good unk_names; then
	if grep -qxF "out a FLOAT[unk__0]" "$tmp/unk_names.types" || ! grep -q "^out a FLOAT\[unk__" "$tmp/unk_names.types"; then
		echo "FAIL: infer_fresh_names_unique: $(tr '\n' ';' < "$tmp/unk_names.types")"
	else
		echo "PASS: infer_fresh_names_unique"
	fi
fi

# an op without inference: merge mode warns once per op and keeps going,
# strict mode fails naming the tensor
if good custom_op; then
	n=$(grep -c "no shape inference for com.example.Foo" "$tmp/stderr")
	if [ "$n" -eq 1 ] && grep -q "node 'foo1', 2 nodes" "$tmp/stderr" &&
		grep -qxF "vi t FLOAT[2,3]" "$tmp/custom_op.types"; then
		echo "PASS: infer_missing_op_reported_once"
	else
		echo "FAIL: infer_missing_op_reported_once: $(cat "$tmp/stderr")"
	fi
fi
rm -f "$tmp/out.onnx"
if "$QUANTMAKE" infer-shapes "$tmp/custom_op.onnx" "$tmp/out.onnx" --strict 2> "$tmp/stderr" > /dev/null; then
	echo "FAIL: infer_strict: exit 0 with untyped tensors"
elif [ -e "$tmp/out.onnx" ] || ! grep -q "tensor 'u' (output of node 'foo1' (Foo)) has no inferred type" "$tmp/stderr"; then
	echo "FAIL: infer_strict: $(cat "$tmp/stderr")"
else
	echo "PASS: infer_strict"
fi

# the output passes onnx's checker and re-inferring it changes nothing
if good shape_chain && "$QUANTMAKE" infer-shapes "$tmp/out.onnx" "$tmp/again.onnx" > /dev/null 2>&1 &&
	cmp -s "$tmp/out.onnx" "$tmp/again.onnx"; then
	if "$PY" -c "import onnx, sys; onnx.checker.check_model(onnx.load(sys.argv[1]), full_check=True)" \
		"$tmp/out.onnx" 2> "$tmp/chk.err"; then
		echo "PASS: infer_idempotent_and_valid"
	else
		echo "FAIL: infer_idempotent_and_valid: checker: $(tail -n1 "$tmp/chk.err")"
	fi
else
	echo "FAIL: infer_idempotent_and_valid: second pass differs or failed"
fi

# the conformance harness fails a wrong declaration, passes a right one,
# and flags a skip entry that is no longer needed
printf '# test\n%s/declared_right.onnx no reason needed\n' "$tmp" > "$tmp/skip.txt"
"$QUANTMAKE" infer-shapes --check-against-declared "$tmp/declared_wrong.onnx" "$tmp/declared_right.onnx" \
	> "$tmp/h1" 2>&1
rc1=$?
"$QUANTMAKE" infer-shapes --check-against-declared --skip "$tmp/skip.txt" "$tmp/declared_right.onnx" \
	> "$tmp/h2" 2>&1
if [ $rc1 -eq 1 ] &&
	grep -qF "FAIL: $tmp/declared_wrong.onnx: output 'y': declared float[2,4], inferred float[2,3]" "$tmp/h1" &&
	grep -qxF "PASS: $tmp/declared_right.onnx" "$tmp/h1" &&
	grep -qF "FAIL: $tmp/declared_right.onnx: passes but is listed in the skip file" "$tmp/h2"; then
	echo "PASS: infer_harness_can_fail"
else
	echo "FAIL: infer_harness_can_fail: $(cat "$tmp/h1" "$tmp/h2" | tr '\n' ';')"
fi

# usage errors exit 2
"$QUANTMAKE" infer-shapes > /dev/null 2>&1
rc=$?
"$QUANTMAKE" infer-shapes "$tmp/none.onnx" "$tmp/x.onnx" > /dev/null 2>&1
rc2=$?
if [ $rc -eq 2 ] && [ $rc2 -eq 2 ]; then
	echo "PASS: infer_usage"
else
	echo "FAIL: infer_usage: no arguments gave $rc, missing model gave $rc2 (expected 2)"
fi
