#!/usr/bin/env bash
# Instructions per call of libcai's driver paths on the fake CUDA driver (a test double),
# counted by callgrind: a run of CALLS calls minus a run of none, divided by CALLS
# (benches/sync_instructions.rs). The sync cases include the fake driver's own instructions and
# the clearing of its call log (the log-reset row, to subtract); the cuStreamGetCaptureInfo row
# is the fake's own cost of the capture question, per call of it, read from callgrind's
# per-function counts. Needs valgrind.
set -euo pipefail
cd "$(dirname "$0")/.."
calls=${CALLS:-20000}
binary=$(cargo bench --bench sync_instructions --no-run --message-format=json 2>/dev/null |
  grep -o '"executable":"[^"]*sync_instructions[^"]*"' | tail -1 | cut -d'"' -f4)
count() { # case calls
  valgrind --tool=callgrind --callgrind-out-file=/dev/null "$binary" "$1" "$2" 2>&1 |
    sed -n 's/.*Collected : \([0-9]*\).*/\1/p'
}
printf '%-22s %12s\n' case instructions/call
for case in import-no-sync sync-stream-ordered sync-blocking log-reset; do
  none=$(count "$case" 0); many=$(count "$case" "$calls")
  awk -v c="$case" -v a="$none" -v b="$many" -v n="$calls" 'BEGIN { printf "%-22s %12.1f\n", c, (b - a) / n }'
done
# The fake driver's cuStreamGetCaptureInfo_v2, inclusive, per call (two calls per stream-ordered sync).
out=$(mktemp)
valgrind --tool=callgrind --callgrind-out-file="$out" "$binary" sync-stream-ordered "$calls" >/dev/null 2>&1
callgrind_annotate --inclusive=yes "$out" 2>/dev/null | awk -v n="$calls" '/cuStreamGetCaptureInfo_v2/ && !done {
  gsub(",", "", $1); printf "%-22s %12.1f\n", "cuStreamGetCaptureInfo", $1 / (2 * n + 2); done = 1 }'
rm -f "$out"
