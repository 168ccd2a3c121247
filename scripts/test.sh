#!/usr/bin/env bash
# Runs every test suite that needs no GPU: Rust (unit, conformance, header freshness, the device
# half against the fake driver), C and C++, Python, the link check, and the packaging suite
# (CMake and pkg-config consumers of an installed copy, examples), the sanitizer and valgrind
# runs, and a short fuzz run of every fuzz target. The GPU suite is scripts/gpu-check.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
suites=0

echo "== Rust"
cargo test
cargo build --release
suites=$((suites + 1))

echo "== C and C++"
c_tests/run.sh target/release
suites=$((suites + 1))

echo "== libcai.so does not link libcuda"
if readelf -d target/release/libcai.so | grep -i 'NEEDED.*libcuda'; then
  echo "libcai.so links libcuda: the driver must be opened at run time" >&2
  exit 1
fi
echo "link check: 1 passed, 0 failed"
suites=$((suites + 1))

echo "== Python"
export CAI_LIBRARY="$PWD/target/release/libcai.so"
python3 -m pytest -q python/tests
# The package installs with pip from the repository and imports from the install.
site=$(mktemp -d)
python3 -m pip install --quiet --disable-pip-version-check --no-deps --target "$site" ./python
(cd "$site" && PYTHONPATH="$site" python3 -c 'import cai; cai.validate({"shape": (1,), "typestr": "<f4", "data": (8, False), "version": 3}); print("pip install: 1 passed, 0 failed")')
rm -rf "$site"
PYTHONPATH=python python3 examples/python_demo.py
suites=$((suites + 1))

echo "== Packaging: CMake, pkg-config, examples"
bash scripts/test-packaging.sh
suites=$((suites + 1))

echo "== Sanitizers and valgrind"
bash scripts/test-sanitizers.sh
suites=$((suites + 1))

echo "== Fuzzing (short; see fuzz/run.sh for long runs)"
SECONDS_PER_TARGET=${CAI_FUZZ_SECONDS:-20} bash fuzz/run.sh
suites=$((suites + 1))
echo
echo "suites: $suites passed, 0 failed"
