#!/usr/bin/env bash
# Builds libcai with CMake (which drives cargo), installs it into ./_install, and runs the
# host-only demo from there.
set -euo pipefail
cd "$(dirname "$0")/.."
# What the build needs, checked first: one line names every missing tool and its Debian package.
missing=()
for pair in cargo:rustup cc:gcc c++:g++ cmake:cmake; do
  command -v "${pair%%:*}" >/dev/null || missing+=("${pair%%:*} (${pair#*:})")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "missing: ${missing[*]}; Rust 1.88 or later from rustup, CMake 3.19 or later" >&2
  exit 1
fi
prefix="$PWD/_install"
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX="$prefix"
cmake --build build
cmake --install build
echo
"$prefix/bin/cai-examples/demo"
echo
echo "Installed into $prefix: include/cai.h, include/cai.hpp, lib/libcai.so.0.2, lib/libcai.a,"
echo "lib/cmake/cai (find_package(cai)), lib/pkgconfig/cai.pc, bin/cai-examples/."
