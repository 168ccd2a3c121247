#!/usr/bin/env bash
# Builds, on a machine with Rust, what scripts/gpu-check.sh runs from on a GPU machine that has
# none: target/release/libcai.so, the Python package's release wheel (target/release/wheels), and in
# target/release/gpu-extensions the PyO3 test extension for the GPU machine's CPython (the C,
# pybind11, nanobind and Cython ones are compiled there) and the Rust API's GPU test
# (tests/gpu_rust.rs, built here: no Rust there). Bring those three along.
# Usage: bash scripts/gpu-build.sh [PYTHON]   PYTHON: an interpreter here of the GPU machine's
# CPython minor version (default python3), for the PyO3 module, which is built for one version.
# Needs target/venv (bash scripts/test.sh or scripts/python-env.sh make it) for maturin.
set -euo pipefail
cd "$(dirname "$0")/.."
python=${1:-python3}
venv_python=target/venv/bin/python
[ -x "$venv_python" ] || { echo "no $venv_python: run scripts/python-env.sh first" >&2; exit 1; }
cargo build --release
rm -rf target/release/wheels target/release/gpu-extensions
# The release wheel, built as scripts/build-wheel.sh builds it (profile-guided): the GPU
# benchmark then times what users install.
bash scripts/build-wheel.sh target/release/wheels "$venv_python"
wheels=$(mktemp -d)
CARGO_TARGET_DIR=target/pyo3 "$venv_python" -m maturin build --release --quiet \
  --manifest-path python/tests/extensions/pyo3_ext/Cargo.toml --interpreter "$(command -v "$python")" --out "$wheels"
"$venv_python" - "$wheels"/cai_pyo3_ext-*.whl target/release/gpu-extensions <<'PY'
import pathlib, sys, zipfile
wheel, out = sys.argv[1], pathlib.Path(sys.argv[2])
out.mkdir(parents=True)
with zipfile.ZipFile(wheel) as archive:
    for member in (name for name in archive.namelist() if name.endswith(".so")):
        (out / pathlib.PurePosixPath(member).name).write_bytes(archive.read(member))
PY
rm -rf "$wheels"
built=$(cargo test --release --test gpu_rust --no-run 2>&1 | sed -n 's/.*Executable .*(\(.*gpu_rust-[0-9a-f]*\)).*/\1/p')
[ -x "$built" ] || { echo "gpu-build: the Rust GPU test did not build" >&2; exit 1; }
cp "$built" target/release/gpu-extensions/gpu_rust
ls target/release/libcai.so target/release/wheels/* target/release/gpu-extensions/*
