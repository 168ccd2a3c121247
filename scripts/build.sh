#!/usr/bin/env bash
# Builds libcai with CMake (which drives cargo), installs it into ./_install, and runs the
# host-only demo from there.
set -euo pipefail
cd "$(dirname "$0")/.."
# What the build needs, checked first: one line names every missing tool and its Debian package.
# CMake, when missing, comes from PyPI (its `cmake` package) into the build directory.
missing=()
for pair in cargo:rustup cc:gcc c++:g++; do
  command -v "${pair%%:*}" >/dev/null || missing+=("${pair%%:*} (${pair#*:})")
done
cmake_from_pypi="$PWD/build/.cmake-from-pypi"
if ! command -v cmake >/dev/null && [ ! -x "$cmake_from_pypi/bin/cmake" ]; then
  python3 -c 'import venv, ensurepip' 2>/dev/null || missing+=("cmake (cmake; or python3-venv, to fetch CMake from PyPI)")
fi
if [ ${#missing[@]} -gt 0 ]; then
  echo "missing: ${missing[*]}; Rust 1.88 or later from rustup, CMake 3.19 or later" >&2
  exit 1
fi
if ! command -v cmake >/dev/null; then
  if [ ! -x "$cmake_from_pypi/bin/cmake" ]; then
    python3 -m venv "$cmake_from_pypi"
    "$cmake_from_pypi/bin/python" -m pip install --quiet --disable-pip-version-check cmake
  fi
  export PATH="$cmake_from_pypi/bin:$PATH"
  echo "no cmake on PATH: using $(cmake --version | head -n 1) from PyPI, in $cmake_from_pypi"
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
