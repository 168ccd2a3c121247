#!/usr/bin/env bash
# Builds libcai and benchmarks/opencl_bench.c against the OpenCL driver installed (PoCL in CI)
# and runs it. Needs the OpenCL headers and loader (ocl-icd-opencl-dev, opencl-headers).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
cc -std=c11 -O2 -Wall -Wextra -Iinclude benchmarks/opencl_bench.c -o "$out/opencl_bench" \
  -Ltarget/release -lcai -Wl,-rpath,"$PWD/target/release" -lOpenCL
"$out/opencl_bench"
