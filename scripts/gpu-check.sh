#!/usr/bin/env bash
# The GPU suite: runs on a CUDA machine with no Rust toolchain, from a prebuilt target/release
# holding libcai.so, the Python package's wheel in target/release/wheels and the PyO3 test
# extension and the Rust API's GPU test in target/release/gpu-extensions (build them elsewhere with
# `bash scripts/gpu-build.sh python3.X`, X the GPU machine's CPython, then bring those along).
# Compiles and runs the C device tests on the real driver, then the Python interop tests with
# whichever of CuPy, PyTorch, Numba, JAX and cuda.core are installed, and the Python example.
# Record the outcome, date and device in docs/gpu-results.md. The C tests link libcuda.so.1:
# where the linker does not search its folder (in containers often /usr/local/nvidia/lib64; the
# loader's `ldconfig -p` names it), set LIBRARY_PATH to that folder first.
# Exit status: 0 every suite passed; 77 the CUDA driver loads but finds no device (cuInit:
# CUDA_ERROR_NO_DEVICE, e.g. a container started without its GPU): nothing was run, as
# automake and meson read 77 (skipped); anything else, a suite failed or no driver loads.
set -euo pipefail
cd "$(dirname "$0")/.."
lib=target/release
[ -f "$lib/libcai.so" ] || { echo "no $lib/libcai.so: run cargo build --release first" >&2; exit 1; }
out=${OUT:-$(mktemp -d)}
mkdir -p "$out"

# compile NAME SOURCE [LIBRARY...]: a C program linked against the prebuilt libcai, into $out/NAME.
compile() {
  cc -std=c11 -O2 -Wall -Wextra -Werror -Iinclude -Ic_tests "$2" -o "$out/$1" \
    -L"$lib" -lcai -Wl,-rpath,"$PWD/$lib" "${@:3}"
}

compile driver_probe c_tests/gpu/driver_probe.c
probe=0
"$out/driver_probe" 2>"$out/driver-probe.log" || probe=$?
if [ "$probe" = 77 ]; then
  echo "gpu-check: no CUDA device: the driver loads but cuInit finds none; nothing run (exit 77)"
  cat "$out/driver-probe.log"
  exit 77
elif [ "$probe" != 0 ]; then
  echo "gpu-check: no usable CUDA driver:" >&2
  cat "$out/driver-probe.log" >&2
  exit 1
fi

nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true

# Every suite runs even when one before it fails, so that one run on a lent machine reports all.
failed=()
suite() {
  local name=$1 log=$2
  shift 2
  echo "== $name"
  if ! "$@" 2>&1 | tee "$out/$log"; then
    failed+=("$name")
  fi
}

compile test_gpu c_tests/gpu/test_gpu.c -l:libcuda.so.1
suite "C device tests" gpu-c.log "$out/test_gpu"

if [ -x "$lib/gpu-extensions/gpu_rust" ]; then
  suite "Rust API tests" gpu-rust.log "$lib/gpu-extensions/gpu_rust" --ignored --test-threads=1
else
  echo "== Rust API tests: not run (no prebuilt $lib/gpu-extensions/gpu_rust: scripts/gpu-build.sh builds it)"
fi

site="$out/site"
python3 -m pip install --quiet --no-index --no-deps --target "$site" "$lib"/wheels/libcai-*.whl
export PYTHONPATH="$site"
# The prebuilt PyO3 test extension (python/gpu_tests skips the test that needs it without it).
export CAI_GPU_EXTENSIONS="$PWD/$lib/gpu-extensions"
suite "Python interop tests" gpu-pytest.log python3 -m pytest -q -rs python/gpu_tests \
  --ignore=python/gpu_tests/test_graph_capture.py
# Imports of torch and CuPy arrays inside torch.cuda.graph capture, the graph replayed.
suite "CUDA graph capture" gpu-capture.log python3 -m pytest -q -rs python/gpu_tests/test_graph_capture.py
suite "Python example" gpu-demo.log python3 examples/python_demo.py
suite "GPU benchmark" gpu-bench.log python3 benchmarks/gpu_bench.py
compile gpu_driver_bench benchmarks/gpu_driver_bench.c -l:libcuda.so.1
suite "GPU driver-level benchmark" gpu-driver-bench.log "$out/gpu_driver_bench"

if [ ${#failed[@]} -gt 0 ]; then
  echo "gpu-check: FAILED: ${failed[*]}" >&2
  exit 1
fi
echo "gpu-check: every suite passed"
