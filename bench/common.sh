# Shared setup of the shell benchmarks (sourced): ROOT, PY, and QUANTMAKE,
# the binary measured (default: a release build made in obj/bench-release);
# exits when the Python packages the models are made with are missing.
ROOT="${ROOT:-$(cd "$(dirname "$0")/.." && pwd)}"
PY="${PY:-$ROOT/.venv/bin/python}"
if [ -z "$QUANTMAKE" ]; then
	make -s -C "$ROOT" OBJ=obj/bench-release obj/bench-release/quantmake >&2 || exit 1
	QUANTMAKE="$ROOT/obj/bench-release/quantmake"
fi
"$PY" -c 'import onnx, numpy' 2>/dev/null || { echo "bench: onnx/numpy missing (sh scripts/venv.sh)" >&2; exit 1; }
