#!/bin/sh
# Cross-check of the inference pass against onnx.shape_inference.infer_shapes
# (data_prop=True) on real models: the ONNX files shipped in the PyPI wheels
# silero-vad and magika (downloaded once into tests/.cache/, git-ignored) and
# the small CNN and transformer of tests/models (tests/models/make_models.py).
# Each model has its value_info and output types dropped; for every tensor of every graph ours
# must equal the reference or be strictly more specific. Differences are
# listed as "diff ..." lines. A synthetic 10,000-node model (PyTorch's
# Shape/Gather/Unsqueeze/Concat/Reshape pattern) joins them; the summary lines
# carry timings of both (ours under the binary tested, ASan included).
if [ ! -x "$PY" ]; then
	echo "SKIP: crosscheck: $PY missing (sh scripts/venv.sh)"
	exit 0
fi
cache="$ROOT/tests/.cache"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$cache/models"
for pkg in silero-vad magika; do
	if ! ls "$cache/wheels/"$(echo $pkg | tr - _)-*.whl > /dev/null 2>&1; then
		"$PY" -m pip download -q --disable-pip-version-check --no-deps -d "$cache/wheels" "$pkg" \
			> "$tmp/pip.log" 2>&1 || echo "SKIP: crosscheck_$pkg: download failed: $(tail -n1 "$tmp/pip.log")"
	fi
done
for w in "$cache/wheels/"*.whl; do
	[ -e "$w" ] || continue
	case $(basename "$w") in
	magika-*) pre=magika_ ;;
	*) pre= ;;
	esac
	"$PY" - "$w" "$cache/models" "$pre" <<'PYEOF'
import os, sys, zipfile
w, d, pre = sys.argv[1:4]
with zipfile.ZipFile(w) as z:
    for n in z.namelist():
        if n.endswith(".onnx"):
            base = os.path.basename(n) if not pre else pre + n.split("/")[-2] + ".onnx"
            dst = os.path.join(d, base)
            if not os.path.exists(dst):
                with open(dst + ".tmp", "wb") as f:
                    f.write(z.read(n))
                os.rename(dst + ".tmp", dst)
PYEOF
done
if ! "$PY" "$ROOT/tests/infer_crosscheck.py" SYNTH "$tmp/synthetic10k.onnx" 2> "$tmp/err"; then
	echo "FAIL: crosscheck_synthetic10k: cannot make the model: $(tail -n1 "$tmp/err")"
fi
for m in "$cache/models/"*.onnx "$ROOT/tests/models/"*.onnx "$tmp/synthetic10k.onnx"; do
	[ -e "$m" ] || continue
	label=$(basename "$m" .onnx)
	if ! "$PY" "$ROOT/tests/infer_crosscheck.py" STRIP "$m" "$tmp/$label.in.onnx" 2> "$tmp/err"; then
		echo "FAIL: crosscheck_$label: cannot read the model: $(tail -n1 "$tmp/err")"
		continue
	fi
	if ! "$QUANTMAKE" infer-shapes "$tmp/$label.in.onnx" "$tmp/$label.out.onnx" > "$tmp/out" 2> "$tmp/err"; then
		echo "FAIL: crosscheck_$label: infer-shapes failed: $(head -c 300 "$tmp/err")"
		continue
	fi
	OURS_SECONDS=$(sed -n 's/.*inferred in \([0-9.]*\)s$/\1/p' "$tmp/out") \
	"$PY" "$ROOT/tests/infer_crosscheck.py" CHECK "$label" "$tmp/$label.in.onnx" "$tmp/$label.out.onnx" 2> "$tmp/err" ||
		echo "FAIL: crosscheck_$label: comparison failed: $(tail -n1 "$tmp/err")"
done
