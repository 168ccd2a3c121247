#!/usr/bin/env bash
# Installs libcai into a temporary prefix with CMake, then builds and runs a downstream project
# against it: through find_package (shared and static), through pkg-config, and through the
# build tree. Also runs the installed examples.
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
prefix="$work/prefix"

cmake -S . -B "$work/build" -DCMAKE_INSTALL_PREFIX="$prefix" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$work/build" >/dev/null
cmake --install "$work/build" >/dev/null

echo "== SONAME and symlinks"
readelf -d "$prefix/lib/libcai.so.0.1.0" | grep -q 'Library soname: \[libcai.so.0\]'
[ "$(readlink "$prefix/lib/libcai.so")" = libcai.so.0 ] && [ "$(readlink "$prefix/lib/libcai.so.0")" = libcai.so.0.1.0 ]
echo "packaging soname: 1 passed, 0 failed"

echo "== find_package against the install tree"
cmake -S tests/downstream -B "$work/down" -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$work/down" >/dev/null
"$work/down/downstream_c"
"$work/down/downstream_cpp"
"$work/down/downstream_static"
if readelf -d "$work/down/downstream_static" | grep -q 'NEEDED.*libcai'; then
  echo "downstream_static links libcai dynamically" >&2
  exit 1
fi
echo "static link carries no libcai.so dependency: 1 passed, 0 failed"

echo "== find_package against the build tree"
cmake -S tests/downstream -B "$work/down-build-tree" -Dcai_DIR="$work/build" >/dev/null
cmake --build "$work/down-build-tree" >/dev/null
"$work/down-build-tree/downstream_c"

echo "== pkg-config"
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
cc -std=c11 -Wall -Werror tests/downstream/main.c -o "$work/pc_c" $(pkg-config --cflags --libs cai) \
  -Wl,-rpath,"$prefix/lib"
"$work/pc_c"
cc -std=c11 -Wall -Werror tests/downstream/main.c -o "$work/pc_static" $(pkg-config --cflags cai) \
  "$prefix/lib/libcai.a" $(pkg-config --static --libs-only-l cai | sed 's/-lcai//')
"$work/pc_static"

echo "== installed examples"
"$prefix/bin/cai-examples/producer"
"$prefix/bin/cai-examples/consumer"
"$prefix/bin/cai-examples/consumer_cpp"
"$prefix/bin/cai-examples/demo" >/dev/null
echo "examples: 4 passed, 0 failed"
