#!/usr/bin/env bash
# Instructions per call of cai_validate and of the floor (benches/minimal_validator.c) on the
# arrays of the criterion group "validate vs floor", counted by callgrind: a run of CALLS calls
# minus a run of none, divided by CALLS. Needs valgrind.
set -euo pipefail
cd "$(dirname "$0")/.."
calls=${CALLS:-100000}
binary=$(cargo bench --bench validate_instructions --no-run --message-format=json 2>/dev/null |
  grep -o '"executable":"[^"]*validate_instructions[^"]*"' | tail -1 | cut -d'"' -f4)
count() { # validator case calls
  valgrind --tool=callgrind --callgrind-out-file=/dev/null "$binary" "$1" "$2" "$3" 2>&1 |
    sed -n 's/.*Collected : \([0-9]*\).*/\1/p'
}
printf '%-6s %8s %14s %7s\n' case floor cai_validate ratio
for case in 1-D 3-D 8-D; do
  floor0=$(count floor "$case" 0); floor1=$(count floor "$case" "$calls")
  cai0=$(count cai_validate "$case" 0); cai1=$(count cai_validate "$case" "$calls")
  awk -v c="$case" -v f0="$floor0" -v f1="$floor1" -v a0="$cai0" -v a1="$cai1" -v n="$calls" \
    'BEGIN { f = (f1 - f0) / n; a = (a1 - a0) / n; printf "%-6s %8.1f %14.1f %6.2fx\n", c, f, a, a / f }'
done
