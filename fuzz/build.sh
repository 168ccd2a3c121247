#!/usr/bin/env bash
# Builds libcai with libFuzzer's coverage instrumentation (stable rustc flags, the `fuzz` cargo
# profile with overflow checks) and links the C harnesses with clang's libFuzzer, ASan and UBSan.
# Output: target/fuzz/bin/fuzz_validate, fuzz_typestr and fuzz_dlpack.
set -euo pipefail
cd "$(dirname "$0")/.."
triple=$(rustc -vV | sed -n 's/^host: //p')
# --target keeps RUSTFLAGS off build scripts, which must not be instrumented.
RUSTFLAGS="-C passes=sancov-module -C llvm-args=-sanitizer-coverage-level=3 \
  -C llvm-args=-sanitizer-coverage-inline-8bit-counters -C llvm-args=-sanitizer-coverage-pc-table \
  -C llvm-args=-sanitizer-coverage-trace-compares" \
  cargo build --quiet --profile fuzz --lib --target "$triple" --target-dir target/fuzz
mkdir -p target/fuzz/bin
for harness in fuzz/fuzz_*.c; do
  name=$(basename "$harness" .c)
  clang -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -Iinclude "$harness" \
    "target/fuzz/$triple/fuzz/libcai.a" -lpthread -ldl -lm -o "target/fuzz/bin/$name"
done
