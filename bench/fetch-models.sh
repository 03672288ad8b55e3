#!/bin/sh
# Fetches real models shipped inside PyPI wheels (magika, silero-vad) into
# tests/.cache/models (git-ignored) with `pip download --no-deps`, without
# installing the packages. Prints the directory; exit 1 if unavailable
# (offline). Idempotent: an existing copy is reused.
ROOT="${ROOT:-$(cd "$(dirname "$0")/.." && pwd)}"
PIP="${PIP:-$ROOT/.venv/bin/pip}"
D="$ROOT/tests/.cache/models"
if [ ! -f "$D/magika/model.onnx" ] || [ ! -f "$D/silero/silero_vad.onnx" ]; then
	mkdir -p "$D/wheels" "$D/magika" "$D/silero" || exit 1
	"$PIP" download -q --no-deps --disable-pip-version-check -d "$D/wheels" magika==1.0.3 silero-vad==6.2.3 >&2 || exit 1
	t=$(mktemp -d)
	(cd "$t" && unzip -q -o "$D"/wheels/magika-*.whl 'magika/models/standard_v3_3/*' &&
		unzip -q -o "$D"/wheels/silero_vad-*.whl 'silero_vad/data/*.onnx') >&2 || { rm -rf "$t"; exit 1; }
	cp "$t"/magika/models/standard_v3_3/model.onnx "$D/magika/model.onnx.tmp" &&
		mv "$D/magika/model.onnx.tmp" "$D/magika/model.onnx"
	for f in "$t"/silero_vad/data/*.onnx; do
		cp "$f" "$D/silero/$(basename "$f").tmp" && mv "$D/silero/$(basename "$f").tmp" "$D/silero/$(basename "$f")"
	done
	rm -rf "$t"
fi
echo "$D"
