#!/usr/bin/env bash
# Builds libcai (release) and runs the host-only demo against it.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release
out=target/release/examples-c
mkdir -p "$out"
cc -std=c11 -Wall -Wextra -Werror -pedantic -Iinclude examples/demo.c -o "$out/demo" \
  -Ltarget/release -lcai -Wl,-rpath,"$PWD/target/release"
"$out/demo"
