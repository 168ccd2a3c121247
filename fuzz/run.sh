#!/usr/bin/env bash
# Runs each fuzz target for SECONDS_PER_TARGET seconds (default 20; or the first argument) on a
# copy of its seed corpus, and reports executions per target. Each target is one process on one
# core, so they run two at a time (each still for its whole time), their lines printed in order.
# Long runs: SECONDS_PER_TARGET=3600 fuzz/run.sh, or run a binary directly, e.g.
#   target/fuzz/bin/fuzz_validate -max_total_time=3600 -jobs=2 fuzz/corpus/validate
# A crash leaves crash-* in the working directory: add it to fuzz/corpus/<target>/ and a
# regression test, then fix.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${SECONDS_PER_TARGET:-${1:-20}}
bash fuzz/build.sh
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

libfuzzer() { # TARGET: a libFuzzer harness on a copy of its corpus
  local target=$1 work runs
  work=$(mktemp -d)
  cp fuzz/corpus/"$target"/* "$work/"
  if ! target/fuzz/bin/fuzz_"$target" -max_total_time="$seconds" -rss_limit_mb=2048 -print_final_stats=1 \
      "$work" >"$out/$target.log" 2>&1; then
    tail -40 "$out/$target.log"
    echo "fuzz_$target: 0 passed, 1 failed"
    return 1
  fi
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$out/$target.log")
  echo "fuzz_$target: $runs executions in ${seconds}s, no finding: 1 passed, 0 failed"
  rm -rf "$work"
}

# The Python extension's dict path, with atheris, in the environment scripts/python-env.sh made.
atheris_dict() {
  local runs
  if ! "${PYTHON:-target/venv/bin/python}" fuzz/fuzz_dict.py \
      -max_total_time="$seconds" -print_final_stats=1 >"$out/dict.log" 2>&1; then
    tail -40 "$out/dict.log"
    echo "fuzz_dict: 0 passed, 1 failed"
    return 1
  fi
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$out/dict.log")
  echo "fuzz_dict: $runs executions in ${seconds}s, no finding: 1 passed, 0 failed"
}

# shellcheck source=scripts/two-lanes.sh
source scripts/two-lanes.sh
two_lanes "$out" 'libfuzzer validate && libfuzzer typestr' 'libfuzzer dlpack && atheris_dict'
