#!/bin/sh
# Big models with external data: quantmake's stages against the same steps
# done with onnx / onnxruntime's Python tools, wall time and peak RSS each.
#
#   sh bench/bigmodel.sh [--quantmake BIN] [--gib 4] [--dim 8192] [--dir DIR] [--no-peer]
#
# Generates (once, reused) a float model of about --gib GiB of weights in
# external data (bench/bigmodel.py) under DIR (default /tmp/qm-bigmodel),
# then in a fresh project and cache builds it target by target, so each
# invocation runs one stage and /usr/bin/time's peak RSS is that stage's:
#   big:export  big:infer-shapes  big:preprocess  big (quantize = dynamic)
# and again with quantize = fp16 (only quantize runs: earlier stages hit);
# then `quantmake all` (quantize = dynamic) in one invocation, fresh cache.
# "stage" is the action's own time as quantmake logs it; "wall" is the whole
# invocation, materialization of the target into build/ included.
# The peer, each step a fresh Python process on the previous step's output:
#   export        onnx.load + onnx.save(save_as_external_data) elsewhere
#   infer-shapes  onnx.shape_inference.infer_shapes_path
#   preprocess    onnxruntime.quantization.quant_pre_process (external data)
#   dynamic       onnxruntime.quantization.quantize_dynamic(use_external_data_format)
#   fp16          onnx.load + onnxruntime.transformers.float16 + onnx.save
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
QM=$ROOT/quantmake
GIB=4
DIM=8192
DIR=/tmp/qm-bigmodel
PEER=1
while [ $# -gt 0 ]; do
	case $1 in
	--quantmake) QM=$(cd "$(dirname "$2")" && pwd)/$(basename "$2"); shift 2 ;;
	--gib) GIB=$2; shift 2 ;;
	--dim) DIM=$2; shift 2 ;;
	--dir) DIR=$2; shift 2 ;;
	--no-peer) PEER=0; shift ;;
	*) echo "usage: sh bench/bigmodel.sh [--quantmake BIN] [--gib N] [--dim N] [--dir DIR] [--no-peer]" >&2; exit 2 ;;
	esac
done
PY=$ROOT/.venv/bin/python
mkdir -p "$DIR/src"
if [ ! -f "$DIR/src/big.onnx" ] || [ "$(cat "$DIR/src/gib" 2>/dev/null)" != "$GIB $DIM" ]; then
	rm -f "$DIR/src/big.onnx" "$DIR/src/big.onnx.data"
	"$PY" "$ROOT/bench/bigmodel.py" "$DIR/src/big.onnx" --gib "$GIB" --dim "$DIM" || exit 1
	echo "$GIB $DIM" >"$DIR/src/gib"
fi
echo "model: $(du -h --apparent-size "$DIR/src/big.onnx.data" | cut -f1) of external data; load: $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-14s %-10s %9s %9s %10s\n' step tool stage_s wall_s peak_MiB

# run LABEL TOOL CMD...: time one command, print a row (stage time from
# quantmake's "[i/n] STAGE MODEL (Ns)" lines, summed, when there are any)
run() {
	label=$1 tool=$2
	shift 2
	/usr/bin/time -f '%e %M' -o "$DIR/time" "$@" >"$DIR/out" 2>&1
	st=$?
	set -- $(cat "$DIR/time" | tail -1)
	stage=$(sed -n 's/^\[[0-9]*\/[0-9]*\] [^ ]* [^ ]* (\([0-9.]*\)s)$/\1/p' "$DIR/out" |
		awk '{ t += $1; n++ } END { if (n) printf "%.2f", t }')
	if [ "$st" -ne 0 ]; then
		printf '%-14s %-10s failed (exit %s): %s\n' "$label" "$tool" "$st" "$(grep -v '^ ' "$DIR/out" | tail -1 | cut -c1-160)"
		return 1
	fi
	printf '%-14s %-10s %9s %9s %10d\n' "$label" "$tool" "${stage:--}" "$1" $(($2 / 1024))
}

P=$DIR/proj
rm -rf "$P"
mkdir -p "$P/rules" "$P/models"
ln "$DIR/src/big.onnx" "$P/models/big.onnx" 2>/dev/null || cp "$DIR/src/big.onnx" "$P/models/"
ln "$DIR/src/big.onnx.data" "$P/models/big.onnx.data" 2>/dev/null || cp "$DIR/src/big.onnx.data" "$P/models/"
rules() {
	printf '[model big]\nsource = models/big.onnx\npreprocess = default\nquantize = %s\n' "$1" >"$P/rules/big.rules"
}
rules dynamic
run export quantmake "$QM" -C "$P" -j1 big:export
run infer-shapes quantmake "$QM" -C "$P" -j1 big:infer-shapes
run preprocess quantmake "$QM" -C "$P" -j1 big:preprocess
run q-dynamic quantmake "$QM" -C "$P" -j1 big
rules fp16
run q-fp16 quantmake "$QM" -C "$P" -j1 big
run no-op quantmake "$QM" -C "$P" -j1 big
du -sh "$P/cache" | sed 's/^/cache: /'
# the whole chain in one invocation, fresh cache (quantize = dynamic)
rm -rf "$P/cache" "$P/build"
rules dynamic
run all quantmake "$QM" -C "$P" -j1 all
rm -rf "$P"

[ "$PEER" = 1 ] || exit 0
W=$DIR/peer
rm -rf "$W"
mkdir -p "$W/export" "$W/shapes" "$W/pre" "$W/dyn" "$W/fp16"
run export python "$PY" -c "
import onnx, sys
m = onnx.load('$DIR/src/big.onnx')
onnx.save(m, '$W/export/big.onnx', save_as_external_data=True, location='big.onnx.data')"
run infer-shapes python "$PY" -c "
import onnx.shape_inference as si
si.infer_shapes_path('$W/export/big.onnx', '$W/export/shaped.onnx')"
run preprocess python "$PY" -c "
from onnxruntime.quantization.shape_inference import quant_pre_process
quant_pre_process('$W/export/shaped.onnx', '$W/pre/big.onnx', save_as_external_data=True,
                  all_tensors_to_one_file=True, external_data_location='big.onnx.data',
                  skip_symbolic_shape=True)"
if [ -f "$W/pre/big.onnx" ]; then Q=$W/pre/big.onnx; else Q=$W/export/shaped.onnx; fi
run q-dynamic python "$PY" -c "
from onnxruntime.quantization import quantize_dynamic
quantize_dynamic('$Q', '$W/dyn/big.onnx', use_external_data_format=True)"
run q-fp16 python "$PY" -c "
import onnx
from onnxruntime.transformers.float16 import convert_float_to_float16
m = onnx.load('$Q')
m = convert_float_to_float16(m, keep_io_types=True, disable_shape_infer=True)
onnx.save(m, '$W/fp16/big.onnx', save_as_external_data=True, location='big.onnx.data')"
rm -rf "$W"
