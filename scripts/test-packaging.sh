#!/usr/bin/env bash
# Every way a C or C++ user builds and links libcai:
# - the README's build command, its CMake and its pkg-config blocks (shared and static), run as
#   the README has them
#   (scripts/readme-block.py extracts them), and its C program built by that pkg-config block and
#   run with no driver; the build command again with no cmake on the PATH;
# - the build installed again with `--prefix` given at install time (the usual way) and
#   `--strip`; a downstream project against that install through find_package (shared and
#   static) and pkg-config (shared and static), and against the build tree; the installed
#   examples;
# - a program linked against a plain `cargo build --release` (no install, no symlinks);
# - `cmake --build` picking up an edit to a Rust source.
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
prefix="$work/prefix"
root=$PWD

readme_block() { python3 "$root/scripts/readme-block.py" "$@"; }

echo "== the README's build command, as written: $(readme_block sh 0)"
if ! bash -euo pipefail -c "$(readme_block sh 0)" >"$work/build.log" 2>&1; then
  tail -n 30 "$work/build.log" >&2
  exit 1
fi
grep -q "Installed into" "$work/build.log"
echo "README build command: 1 passed, 0 failed"

echo "== the README's build command with no cmake on the PATH: it fetches CMake from PyPI"
# A PATH of links to every tool on this one but CMake's.
without_cmake="$work/path-without-cmake"
mkdir "$without_cmake"
IFS=: read -ra path_dirs <<<"$PATH"
for dir in "${path_dirs[@]}"; do
  for tool in "$dir"/*; do
    case "$(basename "$tool")" in cmake | ctest | cpack | ccmake) continue ;; esac
    [ -x "$tool" ] && [ ! -e "$without_cmake/$(basename "$tool")" ] && ln -s "$tool" "$without_cmake/"
  done
done
rm -rf build/.cmake-from-pypi # fetched afresh, not found from an earlier run
if ! PATH="$without_cmake" bash -euo pipefail -c "$(readme_block sh 0)" >"$work/build-without-cmake.log" 2>&1; then
  tail -n 30 "$work/build-without-cmake.log" >&2
  exit 1
fi
grep -q "^no cmake on PATH: using cmake version .* from PyPI" "$work/build-without-cmake.log"
grep -q "Installed into" "$work/build-without-cmake.log"
echo "README build command without CMake: 1 passed, 0 failed"
# The same build, installed again with the prefix given only at install time.
cmake --install build --prefix "$prefix" --strip >/dev/null

echo "== SONAME, symlinks, stripped libraries"
readelf -d "$prefix/lib/libcai.so.0.2.0" | grep -q 'Library soname: \[libcai.so.0.2\]'
[ "$(readlink "$prefix/lib/libcai.so")" = libcai.so.0.2 ] && [ "$(readlink "$prefix/lib/libcai.so.0.2")" = libcai.so.0.2.0 ]
if readelf -S "$prefix/lib/libcai.so.0.2.0" | grep -qE '\.(symtab|debug_)'; then
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
# Before 1.0 a minor version is an ABI of its own: asking for the previous minor finds nothing
# (SameMajorVersion would have accepted it).
mkdir "$work/other-minor"
printf 'cmake_minimum_required(VERSION 3.19)\nproject(other LANGUAGES C)\nfind_package(cai 0.%s CONFIG REQUIRED)\n' \
  "$(( $(sed -n 's/^#define CAI_VERSION_MINOR //p' include/cai.h) - 1 ))" >"$work/other-minor/CMakeLists.txt"
if cmake -S "$work/other-minor" -B "$work/other-minor/build" -DCMAKE_PREFIX_PATH="$prefix" >/dev/null 2>&1; then
  echo "find_package(cai) accepted another 0.x minor version" >&2
  exit 1
fi
echo "another 0.x minor is refused by find_package: 1 passed, 0 failed"

echo "== find_package against the build tree"
cmake -S tests/downstream -B "$work/down-build-tree" -Dcai_DIR="$PWD/build" >/dev/null
cmake --build "$work/down-build-tree" >/dev/null
"$work/down-build-tree/downstream_c"

echo "== the README's CMake block, in a project of its own against the install"
mkdir "$work/readme-cmake"
cp tests/downstream/main.c "$work/readme-cmake/app.c"
{
  printf 'cmake_minimum_required(VERSION 3.19)\nproject(readme_app LANGUAGES C)\nadd_executable(app app.c)\n'
  readme_block cmake 0
} >"$work/readme-cmake/CMakeLists.txt"
cmake -S "$work/readme-cmake" -B "$work/readme-cmake/build" -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$work/readme-cmake/build" >/dev/null
"$work/readme-cmake/build/app"

echo "== pkg-config, the prefix given only at install time: the README's block as written"
pkg_config_block=$(readme_block sh 2 | sed "s#<prefix>#$prefix#g; s#app\.c#app.c -o pc_c#")
(cd "$work/readme-cmake" && bash -euo pipefail -c "$pkg_config_block")
"$work/readme-cmake/pc_c"
echo "== the README's C program, built by its pkg-config block and run where no driver loads"
# As a user pastes it into app.c; without a driver the pointer check is skipped, cai_import
# returns CAI_OK with info.checked == 0, and the program says so.
mkdir "$work/readme-program"
python3 "$root/scripts/readme-block.py" --tested "c11 program" >"$work/readme-program/app.c"
(cd "$work/readme-program" && bash -euo pipefail -c "$(readme_block sh 2 | sed "s#<prefix>#$prefix#g")")
if [ "$(CAI_CUDA_DRIVER=/nonexistent/libcuda.so.1 "$work/readme-program/a.out")" != \
  "$(printf '48 bytes\nnot checked: no CUDA driver loaded, or no device')" ]; then
  echo "the README's C program did not print what the README says it prints without a driver" >&2
  exit 1
fi
echo "== pkg-config, static: the README's block as written"
# `pkg-config --static --libs cai` still says -lcai, which links libcai.so while it lies beside
# libcai.a: the README's block names the archive instead.
pkg_config_static_block=$(readme_block sh 3 | sed "s#app\.c#app.c -o pc_static#")
(cd "$work/readme-cmake" && PKG_CONFIG_PATH="$prefix/lib/pkgconfig" bash -euo pipefail -c "$pkg_config_static_block")
"$work/readme-cmake/pc_static"
if readelf -d "$work/readme-cmake/pc_static" | grep -q 'NEEDED.*libcai'; then
  echo "the README's static pkg-config command linked libcai dynamically" >&2
  exit 1
fi
echo "README CMake and pkg-config blocks (shared and static) and its C program: 4 passed, 0 failed"
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
# The OpenCL Buffer Interface consumer, on the OpenCL driver the test command requires (PoCL).
"$prefix/bin/cai-examples/opencl_consumer"
echo "examples: 6 passed, 0 failed"

echo "== a program linked against a plain cargo build"
cargo build --release --quiet
cc -std=c11 -Wall -Werror tests/downstream/main.c -Iinclude -Ltarget/release -lcai \
  -Wl,-rpath,"$PWD/target/release" -o "$work/plain_cargo"
"$work/plain_cargo"

echo "== cmake --build rebuilds after an edit to a Rust source"
built="build/cargo/release/libcai.so"
before=$(stat -c %Y "$built")
sleep 1
touch src/validate.rs
cmake --build build >/dev/null
after=$(stat -c %Y "$built")
if [ "$after" = "$before" ]; then
  echo "cmake --build did not rebuild libcai after src/validate.rs changed" >&2
  exit 1
fi
echo "cmake rebuilds on Rust edits: 1 passed, 0 failed"
