#!/usr/bin/env bash
# Instructions per call of cai.from_object and of numpy.asarray on the same 2-D float32 dict,
# counted by callgrind: repeatable where wall-clock time on a shared machine is not. Each count
# is a loop of N calls minus the same program with no calls, divided by N.
#   bash benchmarks/python_instructions.sh     (after cargo build --release; needs valgrind)
set -euo pipefail
cd "$(dirname "$0")/.."
python=$(python3 -c 'import sys; print(sys.executable)')  # the interpreter, not a pyenv shim
n=${N:-20000}
export CAI_LIBRARY="$PWD/target/release/libcai.so" PYTHONPATH="$PWD/python" OPENBLAS_NUM_THREADS=1 PYTHONHASHSEED=0
count() {
  valgrind --tool=callgrind --callgrind-out-file=/dev/null "$python" benchmarks/python_loop.py "$1" "$2" 2>&1 |
    awk '/refs:/ { gsub(",", "", $NF); print $NF }'
}
per_call() { echo $(( ($(count "$1" "$n") - $(count "$1" 0)) / n )); }
empty=$(per_call empty)
peer=$(( $(per_call numpy) - empty ))
ours=$(( $(per_call cai) - empty ))
echo "instructions per call (callgrind, $n calls, less an empty loop step of $empty)"
echo "numpy.asarray(__array_interface__ object)  [peer]  $peer"
awk -v o="$ours" -v p="$peer" 'BEGIN { printf "cai.from_object(__cuda_array_interface__ object)  %d   %.2fx numpy\n", o, o / p }'
