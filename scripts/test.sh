#!/usr/bin/env bash
# Runs every test suite that needs no GPU: Rust (unit, conformance, header freshness, the device
# half against the fake driver), C and C++, Python, the link check, and the packaging suite
# (CMake and pkg-config consumers of an installed copy, examples). The GPU suite is
# scripts/gpu-check.sh.
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== Rust"
cargo test
cargo build --release

echo "== C and C++"
c_tests/run.sh target/release

echo "== libcai.so does not link libcuda"
if readelf -d target/release/libcai.so | grep -i 'NEEDED.*libcuda'; then
  echo "libcai.so links libcuda: the driver must be opened at run time" >&2
  exit 1
fi
echo "link check: 1 passed, 0 failed"

echo "== Python"
export CAI_LIBRARY="$PWD/target/release/libcai.so"
python3 -m pytest -q python/tests
# The package installs with pip from the repository and imports from the install.
site=$(mktemp -d)
python3 -m pip install --quiet --disable-pip-version-check --no-deps --target "$site" ./python
(cd "$site" && PYTHONPATH="$site" python3 -c 'import cai; cai.validate({"shape": (1,), "typestr": "<f4", "data": (8, False), "version": 3}); print("pip install: 1 passed, 0 failed")')
rm -rf "$site"
PYTHONPATH=python python3 examples/python_demo.py

echo "== Packaging: CMake, pkg-config, examples"
bash scripts/test-packaging.sh
