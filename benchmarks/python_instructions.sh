#!/usr/bin/env bash
# Instructions per call of cai.from_object, cai.validate and numpy.asarray (the peer) on each
# framework's dict (framework_dicts.py), counted by callgrind: repeatable where wall-clock time
# on a shared machine is not. Each count is a loop of N calls less a loop of N empty calls,
# divided by N.
#   bash scripts/python-env.sh is sourced for the interpreter; needs valgrind.
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-target/venv/bin/python}
n=${N:-5000}
export OPENBLAS_NUM_THREADS=1 PYTHONHASHSEED=0
count() {
  valgrind --tool=callgrind --callgrind-out-file=/dev/null "$python" benchmarks/python_loop.py "$1" "$2" "$n" 2>&1 |
    awk '/refs:/ { gsub(",", "", $NF); print $NF }'
}
empty=$(count empty CuPy)
echo "instructions per call (callgrind, $n calls, less $n empty calls)"
printf "%-18s %10s %12s %8s %10s %8s\n" dict numpy.asarray from_object ratio validate ratio
names=$("$python" -c 'import sys; sys.path.insert(0, "benchmarks"); from framework_dicts import DICTS; print("\n".join(DICTS))')
while read -r name; do
  peer=$(( ($(count numpy "$name") - empty) / n ))
  ours=$(( ($(count from_object "$name") - empty) / n ))
  checked=$(( ($(count validate "$name") - empty) / n ))
  awk -v name="$name" -v p="$peer" -v o="$ours" -v v="$checked" \
    'BEGIN { printf "%-18s %10d %12d %7.2fx %10d %7.2fx\n", name, p, o, o / p, v, v / p }'
done <<<"$names"
