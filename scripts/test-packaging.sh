#!/usr/bin/env bash
# Every way a C or C++ user builds and links libcai:
# - CMake configured with no prefix, installed with `--prefix` given at install time (the usual
#   way) and `--strip`; a downstream project against that install through find_package (shared
#   and static) and pkg-config (shared and static), and against the build tree; the installed
#   examples;
# - a program linked against a plain `cargo build --release` (no install, no symlinks);
# - `cmake --build` picking up an edit to a Rust source.
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
prefix="$work/prefix"

cmake -S . -B "$work/build" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$work/build" >/dev/null
cmake --install "$work/build" --prefix "$prefix" --strip >/dev/null

echo "== SONAME, symlinks, stripped libraries"
readelf -d "$prefix/lib/libcai.so.0.1.0" | grep -q 'Library soname: \[libcai.so.0\]'
[ "$(readlink "$prefix/lib/libcai.so")" = libcai.so.0 ] && [ "$(readlink "$prefix/lib/libcai.so.0")" = libcai.so.0.1.0 ]
if readelf -S "$prefix/lib/libcai.so.0.1.0" | grep -qE '\.(symtab|debug_)'; then
  echo "--strip left a symbol table or debug info in libcai.so" >&2
  exit 1
fi
if readelf -S "$prefix/lib/libcai.a" 2>/dev/null | grep -q '\.debug_'; then
  echo "--strip left debug info in libcai.a" >&2
  exit 1
fi
echo "packaging soname and strip: 2 passed, 0 failed"

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

echo "== pkg-config, the prefix given only at install time"
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
# The README's line, as written there (the rpath from pkg-config's libdir).
cc -std=c11 -Wall -Werror tests/downstream/main.c -o "$work/pc_c" \
  $(pkg-config --cflags --libs cai) -Wl,-rpath,"$(pkg-config --variable=libdir cai)"
"$work/pc_c"
cc -std=c11 -Wall -Werror tests/downstream/main.c -o "$work/pc_static" $(pkg-config --cflags cai) \
  "$prefix/lib/libcai.a" $(pkg-config --static --libs-only-l cai | sed 's/-lcai//')
"$work/pc_static"
# The same install moved elsewhere still finds itself.
mv "$prefix" "$work/moved"
PKG_CONFIG_PATH="$work/moved/lib/pkgconfig" cc -std=c11 -Wall -Werror tests/downstream/main.c -o "$work/pc_moved" \
  $(PKG_CONFIG_PATH="$work/moved/lib/pkgconfig" pkg-config --cflags --libs cai) -Wl,-rpath,"$work/moved/lib"
"$work/pc_moved"
mv "$work/moved" "$prefix"

echo "== installed examples"
"$prefix/bin/cai-examples/producer"
"$prefix/bin/cai-examples/consumer"
"$prefix/bin/cai-examples/consumer_cpp"
"$prefix/bin/cai-examples/dlpack_consumer"
"$prefix/bin/cai-examples/demo" >/dev/null
echo "examples: 5 passed, 0 failed"

echo "== a program linked against a plain cargo build"
cargo build --release --quiet
cc -std=c11 -Wall -Werror tests/downstream/main.c -Iinclude -Ltarget/release -lcai \
  -Wl,-rpath,"$PWD/target/release" -o "$work/plain_cargo"
"$work/plain_cargo"

echo "== cmake --build rebuilds after an edit to a Rust source"
built="$work/build/cargo/release/libcai.so"
before=$(stat -c %Y "$built")
sleep 1
touch src/validate.rs
cmake --build "$work/build" >/dev/null
after=$(stat -c %Y "$built")
if [ "$after" = "$before" ]; then
  echo "cmake --build did not rebuild libcai after src/validate.rs changed" >&2
  exit 1
fi
echo "cmake rebuilds on Rust edits: 1 passed, 0 failed"
