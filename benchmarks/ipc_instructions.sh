#!/usr/bin/env bash
# Instructions per call of cai_ipc_export and cai_ipc_open (with its release) on the fake CUDA
# driver (a test double), each beside the raw driver calls it makes (the floor), counted by
# callgrind: a run of CALLS calls minus a run of none, divided by CALLS, then the fake's call-log
# reset (what every case does per call) subtracted (benches/ipc_instructions.rs). The open's
# descriptor comes from a child process, which runs outside callgrind. Needs valgrind.
set -euo pipefail
cd "$(dirname "$0")/.."
calls=${CALLS:-5000}
binary=$(cargo bench --bench ipc_instructions --no-run --message-format=json 2>/dev/null |
  grep -o '"executable":"[^"]*ipc_instructions[^"]*"' | tail -1 | cut -d'"' -f4)
count() { # case calls
  valgrind --tool=callgrind --callgrind-out-file=/dev/null "$binary" "$1" "$2" 2>&1 |
    sed -n 's/.*Collected : \([0-9]*\).*/\1/p'
}
per_call() { # case
  local none many
  none=$(count "$1" 0); many=$(count "$1" "$calls")
  awk -v a="$none" -v b="$many" -v n="$calls" 'BEGIN { printf "%.1f", (b - a) / n }'
}
reset=$(per_call log-reset)
printf '%-14s %12s\n' case instructions/call
for case in export export-floor open open-floor; do
  awk -v c="$case" -v x="$(per_call "$case")" -v r="$reset" 'BEGIN { printf "%-14s %12.1f\n", c, x - r }'
done
