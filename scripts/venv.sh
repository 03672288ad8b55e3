#!/bin/sh
# Creates .venv with the PyPI test oracles (onnx, onnxruntime, numpy).
# Idempotent: a venv whose requirements stamp matches is reused.
set -e
cd "$(dirname "$0")/.."
req=scripts/requirements-test.txt
stamp=.venv/.requirements
if [ -x .venv/bin/python ] && cmp -s "$req" "$stamp"; then
	echo "venv: .venv up to date"
	exit 0
fi
echo "venv: creating .venv with $(tr '\n' ' ' < "$req")"
PY=python3
[ -x /usr/bin/python3 ] && PY=/usr/bin/python3
rm -rf .venv
$PY -m venv .venv
.venv/bin/pip install -q --disable-pip-version-check -r "$req"
cp "$req" "$stamp"
