#!/usr/bin/env bash
# Builds the Python package's release wheel with profile-guided optimization: the extension
# built instrumented, trained on benchmarks/pgo_train.py (each argument users pass, from
# Python and C), then built again with the profile, which lays out and weights its code by
# what the training ran. The result is the same code as `pip install ./python`, faster per call
# (docs/performance.md, "The release wheel"); a source install stays a plain build.
#
#   bash scripts/build-wheel.sh OUT_DIR [PYTHON]
#
# PYTHON (default: $PYTHON, else python3) runs pip and the training, and needs numpy and a C
# compiler's Python headers; torch, paddle, jax and tvm-ffi train their paths where installed.
# Needs llvm-profdata of rustc's own LLVM (the raw profiles' format is that version's):
# rustup's llvm-tools component, added here where missing, or LLVM_PROFDATA.
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 1 ] || { echo "usage: bash scripts/build-wheel.sh OUT_DIR [PYTHON]" >&2; exit 2; }
out=$(realpath -m "$1")
python=${2:-${PYTHON:-python3}}

host=$(rustc -vV | sed -n 's/^host: //p')
profdata=${LLVM_PROFDATA:-$(rustc --print sysroot)/lib/rustlib/$host/bin/llvm-profdata}
if [ ! -x "$profdata" ] && [ -z "${LLVM_PROFDATA:-}" ] && command -v rustup >/dev/null; then
  rustup component add llvm-tools >/dev/null || true # where it cannot, the line below says what to do
fi
if [ ! -x "$profdata" ]; then
  echo "build-wheel: no llvm-profdata at $profdata; rustup component add llvm-tools, or set LLVM_PROFDATA to the one of rustc's LLVM ($(rustc -vV | sed -n 's/^LLVM version: //p'))" >&2
  exit 1
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
wheel() { # RUSTFLAGS TARGET_DIR WHEEL_DIR: pip's build of ./python (maturin), with these flags
  RUSTFLAGS="${RUSTFLAGS:+$RUSTFLAGS }$1" CARGO_TARGET_DIR="$PWD/$2" \
    "$python" -m pip wheel --quiet --disable-pip-version-check --no-deps -w "$3" ./python
}

echo "build-wheel: the instrumented build (target/pgo-generate)"
wheel "-Cprofile-generate=$work/profiles" target/pgo-generate "$work/instrumented"
"$python" -m pip install --quiet --disable-pip-version-check --no-deps --target "$work/site" "$work"/instrumented/*.whl
rm -rf "$work/profiles" # what the build's own instrumented build scripts left: the training's alone are wanted

echo "build-wheel: training (benchmarks/pgo_train.py)"
CAI_PGO_PACKAGE="$work/site" PYTHONPATH="$work/site" OPENBLAS_NUM_THREADS=1 "$python" benchmarks/pgo_train.py
ls "$work"/profiles/*.profraw >/dev/null 2>&1 || { echo "build-wheel: the training left no profile" >&2; exit 1; }
"$profdata" merge -o "$work/cai.profdata" "$work/profiles"

echo "build-wheel: the optimized build (target/pgo-use)"
mkdir -p "$out"
wheel "-Cprofile-use=$work/cai.profdata" target/pgo-use "$out"
echo "build-wheel: $(cd "$out" && ls -t ./*.whl | head -n 1)"
