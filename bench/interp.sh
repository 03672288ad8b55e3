#!/bin/sh
# Interpreter benchmark: quantmake's interpreter against onnxruntime's CPU
# provider with the same thread count, batch 1 and 32, on the models of
# bench/interp-models.py (CNN, transformer) and the real models of the
# magika and silero-vad wheels. Prints latency (median ms: steadier than
# the mean on a shared machine, where other jobs stretch a few runs), throughput
# (samples/s), the ratio quantmake/onnxruntime (lower is better; goals: <= 2
# at batch 1, <= 1.5 at batch 32), peak RSS of both processes (GNU time) and
# the interpreter's own weights (what it holds after the run: packed copies,
# not the initializers it released) + peak live activations. The memory
# goal (RSS over a one-MatMul run's <= weights + 2 x peak live) is checked
# twice: on the peak RSS, which also counts the code pages of the kernels
# and libraries a model runs (its Conv kernels, say) and the
# moment all initializers are loaded before any is packed, and on the
# anonymous RSS after the timed runs (data only: weights, the activation
# buffers, which hold live tensors and kernel scratch, the model's
# structure and plans). Peak live counts kernel scratch (op_scratch) too.
#
#   sh bench/interp.sh [THREADS]      (default: all CPUs)
#
# QUANTMAKE names the binary (default: a release build in obj/bench);
# RUNS1 / RUNS32 the number of timed runs per batch size.
ROOT="${ROOT:-$(cd "$(dirname "$0")/.." && pwd)}"
PY="${PY:-$ROOT/.venv/bin/python}"
THREADS="${1:-$(nproc)}"
RUNS1="${RUNS1:-200}"
RUNS32="${RUNS32:-20}"
if [ -z "$QUANTMAKE" ]; then
	make -s -C "$ROOT" OBJ=obj/bench obj/bench/quantmake >&2 || exit 1
	QUANTMAKE="$ROOT/obj/bench/quantmake"
fi
"$PY" -c 'import onnxruntime' 2>/dev/null || { echo "bench: onnxruntime missing (sh scripts/venv.sh)" >&2; exit 1; }
TIME=""
[ -x /usr/bin/time ] && TIME="/usr/bin/time -v"
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
ORT="$ROOT/bench/interp-ort.py"

"$PY" "$ROOT/bench/interp-models.py" "$T" || exit 1
models="$T/cnn.onnx $T/transformer.onnx"
if M=$(sh "$ROOT/bench/fetch-models.sh"); then
	models="$models $M/magika/model.onnx $M/silero/silero_vad_16k_op15.onnx"
else
	echo "bench: magika/silero-vad not available (offline?): benchmarking the generated models only" >&2
fi

rss() { sed -n 's/.*Maximum resident set size (kbytes): *//p' "$1"; }

# baseline: the RSS of running a one-MatMul model (binary, libraries). On a
# CPU with AVX-512F neither it nor the four models load OpenBLAS (fgemm does
# their products, LSTM included); elsewhere all of them do
base=0 base_anon=0
if [ -n "$TIME" ]; then
	"$PY" "$ORT" feeds "$T/tiny.onnx" 1 "$T/in.npz" &&
		$TIME "$QUANTMAKE" run "$T/tiny.onnx" -i "$T/in.npz" -t "$THREADS" -q --bench 1 2> "$T/qm.err" > "$T/qm.out" &&
		base=$(rss "$T/qm.err") &&
		base_anon=$(sed -n 's/^memory: .*, anonymous RSS \([0-9.]*\) MiB.*/\1/p' "$T/qm.out")
fi

echo "interpreter vs onnxruntime $("$PY" -c 'import onnxruntime; print(onnxruntime.__version__)'), $THREADS thread(s), $(date -u +%Y-%m-%d)"
printf '%-26s %5s %10s %10s %7s %12s %12s %9s %9s %s\n' model batch qm_ms ort_ms ratio qm_samp/s ort_samp/s qm_rss_MB ort_rss_MB "qm: weights+peak_live, anon MB; rss-base, anon-base <= weights+2*peak?"
for m in $models; do
	n=$(basename "$(dirname "$m")")/$(basename "$m" .onnx)
	n=${n#"$(basename "$T")"/}
	high=4
	case $n in magika*) high=257 ;; esac
	for b in 1 32; do
		runs=$RUNS1
		[ $b -eq 32 ] && runs=$RUNS32
		QM_INT_HIGH=$high "$PY" "$ORT" feeds "$m" $b "$T/in.npz" || continue
		$TIME "$QUANTMAKE" run "$m" -i "$T/in.npz" --bench "$runs" -t "$THREADS" -q > "$T/qm.out" 2> "$T/qm.err" || {
			echo "$n batch $b: quantmake failed: $(grep -v '^\s' "$T/qm.err" | head -1)"; continue; }
		$TIME "$PY" "$ORT" bench "$m" "$T/in.npz" "$runs" "$THREADS" > "$T/ort.out" 2> "$T/ort.err" || {
			echo "$n batch $b: onnxruntime failed: $(tail -1 "$T/ort.err")"; continue; }
		qm=$(sed -n 's/^latency: mean [0-9.]* ms, p50 \([0-9.]*\) ms.*/\1/p' "$T/qm.out")
		mem=$(sed -n 's/^memory: weights \([0-9.]*\) MiB, peak live activations \([0-9.]*\) MiB.*/\1 \2/p' "$T/qm.out")
		anon=$(sed -n 's/^memory: .*, anonymous RSS \([0-9.]*\) MiB.*/\1/p' "$T/qm.out")
		ort=$(cut -d' ' -f2 "$T/ort.out")
		qr=$(rss "$T/qm.err"); orr=$(rss "$T/ort.err")
		awk -v n="$n" -v b=$b -v q="$qm" -v o="$ort" -v qr="${qr:-0}" -v orr="${orr:-0}" -v mem="$mem $anon" -v base="$base" \
		    -v ba="${base_anon:-0}" 'BEGIN {
			split(mem, mm, " ")
			ok = base > 0 ? ((qr - base) / 1024 <= mm[1] + 2 * mm[2] ? "yes" : "no") : "?"
			oka = ba > 0 && mm[3] != "" ? (mm[3] - ba <= mm[1] + 2 * mm[2] ? "yes" : "no") : "?"
			printf "%-26s %5d %10.3f %10.3f %7.2f %12.1f %12.1f %9.1f %9.1f %s+%s, %s; %s, %s\n", n, b, q, o, q / o,
				1000 * b / q, 1000 * b / o, qr / 1024, orr / 1024, mm[1], mm[2], mm[3], ok, oka }'
	done
done
echo "(median latencies; ratio = quantmake / onnxruntime; ort_rss includes the Python interpreter and numpy;"
echo " base = $((base / 1024)) MB, the RSS of running a one-MatMul model, ${base_anon:-?} MiB of it anonymous)"
