#!/bin/sh
# bench/npz_read.sh DIR [QUANTMAKE]: CPU time to read one calibration
# sample (.npz/.npy) of DIR, quantmake against numpy (np.load with every
# member read: what a calibration data reader for onnxruntime's quantizer
# does). quantmake's figure is `quantmake run --dump DIR` less a run of one
# sample, over the other samples (task-clock, median of 9); numpy's is
# process time inside one interpreter, median of 9 passes over DIR.
ROOT=$(cd "$(dirname "$0")/.." && pwd)
DIR=${1:?usage: bench/npz_read.sh DIR [QUANTMAKE]}
Q=${2:-$ROOT/quantmake}
PY=${PY:-$ROOT/.venv/bin/python}
set -- "$DIR"/*.np[yz]
N=$#
FIRST=$1
med() { sort -n | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }
clock() { # task-clock in ms of one run of the command
	perf stat -x, -e task-clock -o /tmp/npz_read.$$ "$@" > /dev/null 2>&1
	awk -F, '/task-clock/ {print $1}' /tmp/npz_read.$$
}
all=$(for i in 1 2 3 4 5 6 7 8 9; do clock "$Q" run --dump "$DIR"; done | med)
one=$(for i in 1 2 3 4 5 6 7 8 9; do clock "$Q" run --dump "$FIRST"; done | med)
rm -f /tmp/npz_read.$$
qm=$(echo "$all $one $N" | awk '{printf "%.2f", ($1 - $2) * 1000 / ($3 - 1)}')
np=$("$PY" - "$DIR" <<'PYEOF'
import glob, sys, time
import numpy as np
files = sorted(glob.glob(sys.argv[1] + "/*.np[yz]"))
def one(f):
    a = np.load(f)
    return [a[k] for k in a.files] if f.endswith(".npz") else [a]
runs = []
for _ in range(9):
    t = time.process_time()
    for f in files:
        one(f)
    runs.append((time.process_time() - t) * 1e6 / len(files))
print("%.2f" % sorted(runs)[4])
PYEOF
)
echo "$DIR: $N samples; us a sample: quantmake $qm, numpy $np; numpy/quantmake $(echo "$np $qm" | awk '{printf "%.1fx", $1 / $2}') (load $(cut -d' ' -f1 /proc/loadavg))"
