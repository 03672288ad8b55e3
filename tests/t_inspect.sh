#!/bin/sh
# `quantmake inspect`: its --json facts checked against the same facts
# computed with the onnx Python package (IR version, opsets, inputs and
# outputs with shapes, node counts including If/Loop/Scan bodies, operator
# histogram, parameter counts and bytes by type, intermediates without
# value_info, external data) over ONNX's pytorch-converted, pytorch-operator
# and simple models, the node models with subgraphs, and a model built here
# whose intermediates lack value_info; then the text form and the errors.
DATA=${ONNX_TESTDATA:-/usr/share/libonnx-testdata/data}
Q=$QUANTMAKE
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp" || exit 2

pass() { echo "PASS: $1"; }
fail() { echo "FAIL: $1: $2"; }

if [ ! -x "$PY" ] || ! "$PY" -c 'import onnx' 2> /dev/null; then
	echo "SKIP: inspect: $PY lacks onnx (run sh scripts/venv.sh)"
	exit 0
fi

cat > mk.py << 'EOF'
# untyped.onnx: symbolic and unknown dims, 7 intermediates of which only 2
# have value_info, Constant nodes of several kinds, int8/float16/float
# initializers, a com.microsoft node, one initializer in external data
import sys
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
X = helper.make_tensor_value_info("X", TensorProto.FLOAT, ["N", 3, None])
Y = helper.make_tensor_value_info("Y", TensorProto.FLOAT, ["N", 3, None])
W = numpy_helper.from_array(np.ones((3, 3), np.float32), "W")
Q8 = numpy_helper.from_array(np.arange(10, dtype=np.int8), "q8")
H = numpy_helper.from_array(np.ones(6, np.float16), "h16")
BIG = numpy_helper.from_array(np.arange(1024, dtype=np.float32), "big")
nodes = [
    helper.make_node("Transpose", ["X"], ["t0"], perm=[0, 2, 1]),
    helper.make_node("MatMul", ["t0", "W"], ["t1"]),
    helper.make_node("Constant", [], ["c0"], value=numpy_helper.from_array(np.full((2, 2), 2, np.float32))),
    helper.make_node("Constant", [], ["c1"], value_floats=[1.0, 2.0, 3.0]),
    helper.make_node("Constant", [], ["c2"], value_int=4),
    helper.make_node("Transpose", ["t1"], ["t2"], perm=[0, 2, 1]),
    helper.make_node("Relu", ["t2"], ["t3"]),
    helper.make_node("Gelu", ["t3"], ["Y"], domain="com.microsoft"),
]
g = helper.make_graph(nodes, "untyped", [X], [Y], [W, Q8, H, BIG])
g.value_info.append(helper.make_tensor_value_info("t0", TensorProto.FLOAT, ["N", None, 3]))
g.value_info.append(helper.make_tensor_value_info("t3", TensorProto.FLOAT, ["N", 3, None]))
m = helper.make_model(g, producer_name="t_inspect", producer_version="1.2",
                      opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)])
m.ir_version = 8
helper.set_model_props(m, {"author": "t_inspect", "license": "MIT"})
onnx.save(m, sys.argv[1], save_as_external_data=True, location="weights.bin", size_threshold=1024)
EOF

# facts.py MODEL JSON: compares quantmake's JSON with the onnx package's view
cat > facts.py << 'EOF'
import json, sys, os
import numpy as np
import onnx
from onnx import AttributeProto as A, helper

def dims(tp):
    t = tp.tensor_type
    if not t.HasField("shape"):
        return None
    return [d.dim_value if d.HasField("dim_value") else (d.dim_param or None) for d in t.shape.dim]

def walk(g, f, depth):
    if depth:
        f["subgraphs"] += 1
    for t in g.initializer:
        add(f, t.data_type, t)
    outs = {o.name for o in g.output}
    typed = {v.name for v in g.value_info if v.HasField("type")}
    for n in g.node:
        f["nodes"] += 1
        if depth:
            f["subgraph_nodes"] += 1
        key = n.op_type if n.domain in ("", "ai.onnx") else n.domain + ":" + n.op_type
        f["ops"][key] = f["ops"].get(key, 0) + 1
        if n.op_type == "Constant" and n.domain in ("", "ai.onnx"):
            for a in n.attribute:
                if a.name == "value":
                    add(f, a.t.data_type, a.t)
                elif a.name == "value_float":
                    addn(f, 1, 1, 4)
                elif a.name == "value_floats":
                    addn(f, 1, len(a.floats), 4 * len(a.floats))
                elif a.name == "value_int":
                    addn(f, 7, 1, 8)
                elif a.name == "value_ints":
                    addn(f, 7, len(a.ints), 8 * len(a.ints))
        for o in n.output:
            if o and o not in outs:
                f["intermediates"] += 1
                if o not in typed:
                    f["untyped"].append(o)
        for a in n.attribute:
            if a.type == A.GRAPH:
                walk(a.g, f, depth + 1)
            elif a.type == A.GRAPHS:
                for sg in a.graphs:
                    walk(sg, f, depth + 1)

def add(f, dt, t):
    n = int(np.prod(t.dims, dtype=np.int64)) if len(t.dims) else 1
    if dt == onnx.TensorProto.STRING:
        b = sum(len(s) for s in t.string_data)
    else:
        b = n * helper.tensor_dtype_to_np_dtype(dt).itemsize
    addn(f, dt, n, b)
    if t.data_location == onnx.TensorProto.EXTERNAL:
        loc = {e.key: e.value for e in t.external_data}["location"]
        f["ext"][loc] = f["ext"].get(loc, 0) + 1

def addn(f, dt, n, b):
    name = helper.tensor_dtype_to_np_dtype(dt).name if dt != onnx.TensorProto.STRING else "string"
    name = {"float32": "float", "float64": "double", "object": "string"}.get(name, name)
    d = f["by_type"].setdefault(name, [0, 0, 0])
    d[0] += n; d[1] += b; d[2] += 1
    f["elements"] += n; f["bytes"] += b; f["tensors"] += 1

def facts(path, js):
    m = onnx.load(path, load_external_data=False)
    q = json.load(open(js))
    f = dict(nodes=0, subgraph_nodes=0, subgraphs=0, ops={}, elements=0, bytes=0, tensors=0,
             by_type={}, intermediates=0, untyped=[], ext={})
    walk(m.graph, f, 0)
    inits = {t.name for t in m.graph.initializer}
    errs = []
    def check(what, got, want):
        if got != want:
            errs.append(f"{what}: quantmake {got!r}, onnx {want!r}"[:300])
    check("ir_version", q["ir_version"], m.ir_version)
    check("producer", q["producer_name"], m.producer_name)
    check("metadata", q["metadata"], {p.key: p.value for p in m.metadata_props})
    check("opsets", [(o["domain"], o["version"]) for o in q["opset_import"]],
          [(o.domain or "ai.onnx", o.version) for o in m.opset_import])
    check("inputs", [(i["name"], i.get("shape")) for i in q["inputs"]],
          [(i.name, dims(i.type)) for i in m.graph.input if i.name not in inits])
    check("outputs", [(o["name"], o.get("shape")) for o in q["outputs"]],
          [(o.name, dims(o.type)) for o in m.graph.output])
    for k in ("nodes", "subgraph_nodes", "subgraphs"):
        check(k, q[k], f[k])
    check("op_types", q["op_types"], f["ops"])
    check("op_types order", list(q["op_types"]), sorted(f["ops"]))
    p = q["parameters"]
    check("parameters", (p["elements"], p["bytes"], p["tensors"]), (f["elements"], f["bytes"], f["tensors"]))
    check("by_type", {k: [v["elements"], v["bytes"], v["tensors"]] for k, v in p["by_type"].items()}, f["by_type"])
    check("intermediates", q["intermediates"]["count"], f["intermediates"])
    check("without_value_info", q["intermediates"]["without_value_info"], len(f["untyped"]))
    check("untyped", q["intermediates"]["untyped"], f["untyped"])
    d = os.path.dirname(path)
    check("external_data", {e["location"]: (e["tensors"], e["size"]) for e in q["external_data"]},
          {k: (v, os.path.getsize(os.path.join(d, k))) for k, v in f["ext"].items()})
    if errs:
        return False, "; ".join(errs)
    return True, f"{f['nodes']} nodes, {len(f['ops'])} op types, {f['elements']} parameters, {len(f['untyped'])} untyped"

# each line of the list: DIR LABEL MODEL JSON; prints "DIR LABEL ok|bad MESSAGE"
for line in open(sys.argv[1]):
    d, label, path, js = line.split()
    try:
        ok, msg = facts(path, js)
    except Exception as e:
        ok, msg = False, f"{type(e).__name__}: {e}"[:300]
    print(d, label, "ok" if ok else "bad", msg)
EOF

if ! "$PY" mk.py untyped.onnx 2> err; then
	fail "inspect_build_model" "$(tail -n1 err)"
	exit 0
fi

# ---- JSON against the onnx package ----
list=untyped.onnx
if [ -d "$DATA/node" ]; then
	list="$list $(ls "$DATA"/pytorch-converted/*/model.onnx "$DATA"/pytorch-operator/*/model.onnx \
		"$DATA"/simple/*/model.onnx "$DATA"/node/test_if*/model.onnx "$DATA"/node/test_loop*/model.onnx \
		"$DATA"/node/test_scan*/model.onnx "$DATA"/node/test_sequence_map*/model.onnx 2> /dev/null)"
fi
: > todo
: > res
i=0
for f in $list; do
	case $f in
	untyped.onnx) dir=untyped label=untyped ;;
	*) dir=$(basename "$(dirname "$(dirname "$f")")"); label=$(basename "$(dirname "$f")") ;;
	esac
	i=$((i + 1))
	if "$Q" inspect "$f" --json > q$i.json 2> err; then
		echo "$dir $label $f q$i.json" >> todo
	else
		echo "$dir $label bad quantmake exited $?: $(head -n1 err)" >> res
	fi
done
"$PY" facts.py todo >> res 2> err || echo "untyped facts.py bad $(tail -n1 err)" >> res
for dir in untyped pytorch-converted pytorch-operator simple node; do
	n=$(grep -c "^$dir " res)
	bad=$(grep "^$dir [^ ]* bad " res | cut -d' ' -f2,4- | head -n5 | tr '\n' '|')
	if [ "$n" -eq 0 ]; then
		if [ $dir = untyped ]; then
			fail "inspect_json_$dir" "not run"
		else
			echo "SKIP: inspect_json_$dir: no models in $DATA/$dir"
		fi
	elif [ -n "$bad" ]; then
		fail "inspect_json_$dir" "$bad"
	elif [ $dir = untyped ]; then
		pass "inspect_json_untyped ($(grep "^untyped " res | cut -d' ' -f4-))"
	else
		pass "inspect_json_$dir ($n models agree with onnx)"
	fi
done
# the JSON is stable: the same bytes twice, keys in a fixed order
"$Q" inspect untyped.onnx --json > a.json 2> /dev/null
"$Q" inspect --json untyped.onnx > b.json 2> /dev/null
keys=$("$PY" -c 'import json,sys; print(",".join(json.load(open(sys.argv[1]))))' a.json 2> /dev/null)
want=path,ir_version,producer_name,producer_version,metadata,opset_import,graph,inputs,outputs,nodes,subgraph_nodes,subgraphs,op_types,parameters,intermediates,functions,external_data
if cmp -s a.json b.json && [ "$keys" = "$want" ]; then
	pass "inspect_json_stable"
else
	fail "inspect_json_stable" "keys: $keys"
fi

# ---- the text form ----
"$Q" inspect untyped.onnx > t.txt 2> err
rc=$?
expect() {
	if grep -qxF "$2" t.txt; then
		pass "inspect_text $1"
	else
		fail "inspect_text $1" "no line '$2' in: $(tr '\n' '|' < t.txt | cut -c1-600)"
	fi
}
if [ $rc -ne 0 ]; then
	fail "inspect_text" "exit $rc: $(cat err)"
else
	expect ir_version "ir_version: 8"
	expect producer "producer: t_inspect 1.2"
	expect opset "opset: ai.onnx 17, com.microsoft 1"
	expect metadata "  license: MIT"
	expect input_symbolic "  X: float[N,3,?]"
	expect nodes "nodes: 8"
	expect op_constant "  Constant: 3"
	expect op_domain "  com.microsoft:Gelu: 1"
	expect params "parameters: 1057 elements, 4190 bytes (4.1 KiB), 7 tensors"
	expect params_int8 "  int8: 10 elements, 10 bytes, 1 tensors"
	expect untyped "intermediates: 7, 5 without value_info (t1, c0, c1, c2, t2)"
	expect external "  weights.bin: 4096 bytes (4.0 KiB), 1 tensors"
	# operators listed most frequent first
	first=$(sed -n '/^operators:/{n;p;}' t.txt)
	if [ "$first" = "  Constant: 3" ]; then
		pass "inspect_text op_order"
	else
		fail "inspect_text op_order" "first operator line is '$first'"
	fi
fi
if [ -d "$DATA/node" ]; then
	"$Q" inspect "$DATA/node/test_loop11/model.onnx" > t.txt 2> err
	expect loop_subgraph "nodes: 10 (9 in 1 subgraph)"
	expect loop_op "  Loop: 1"
fi
# a missing external file is reported, not fatal
mv weights.bin moved.bin
"$Q" inspect untyped.onnx > t.txt 2> err
rc=$?
mv moved.bin weights.bin
if [ $rc -eq 0 ] && grep -qxF "  weights.bin: missing, 1 tensors" t.txt; then
	pass "inspect_external_missing"
else
	fail "inspect_external_missing" "exit $rc: $(grep weights t.txt)"
fi

# a data file too short for the tensors that reference it is flagged
cp weights.bin keep.bin
head -c 1000 keep.bin > weights.bin
"$Q" inspect untyped.onnx > t.txt 2> err
rc=$?
"$Q" inspect untyped.onnx --json > s.json 2>> err
mv keep.bin weights.bin
if [ $rc -eq 0 ] && grep -qxF "  weights.bin: 1000 bytes, 1 tensors, too short for them" t.txt &&
	"$PY" -c 'import json,sys; e = json.load(open(sys.argv[1]))["external_data"][0]; assert (e["size"], e["needed"]) == (1000, 4096), e' s.json 2>> err; then
	pass "inspect_external_short"
else
	fail "inspect_external_short" "exit $rc: $(grep weights t.txt) $(tail -n1 err)"
fi

# ---- errors ----
head -c 300 untyped.onnx > truncated.onnx
printf 'not a model at all\n' > garbage.onnx
mkdir adir
for bad in truncated.onnx garbage.onnx adir missing.onnx; do
	"$Q" inspect $bad > out 2> err
	rc=$?
	if [ $rc -eq 2 ] && [ "$(wc -l < err)" -eq 1 ] && [ ! -s out ] &&
		grep -q "^quantmake: not an ONNX model: $bad: " err; then
		pass "inspect_error $bad"
	else
		fail "inspect_error $bad" "exit $rc: $(cat err)"
	fi
done
"$Q" inspect > out 2> err
rc1=$?
"$Q" inspect untyped.onnx --yaml > out 2> err
rc2=$?
if [ $rc1 -eq 2 ] && [ $rc2 -eq 2 ] && grep -q "unknown option '--yaml'" err; then
	pass "inspect_usage_errors"
else
	fail "inspect_usage_errors" "exit $rc1/$rc2: $(cat err)"
fi
exit 0
