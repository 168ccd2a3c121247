#!/usr/bin/env bash
# Builds and runs the C and C++ tests against a built libcai; the device tests run against the
# fake CUDA driver (tests/fake_cuda/fake_cuda.c, a test double; test_fork_opencl.c against the
# fake OpenCL library beside it), the no-GPU case against NVIDIA's real driver library, and the
# OpenCL tests against PoCL.
# Usage: c_tests/run.sh [LIBDIR]   (default: target/release)
set -euo pipefail
cd "$(dirname "$0")/.."
libdir=$(cd "${1:-target/release}" && pwd)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
CC=${CC:-cc}
CXX=${CXX:-c++}
cflags=(-std=c11 -Wall -Wextra -Werror -pedantic -Iinclude -Ic_tests)
link=(-L"$libdir" -lcai -Wl,-rpath,"$libdir")

"$CC" -std=c11 -Wall -Wextra -Werror -shared -fPIC -pthread tests/fake_cuda/fake_cuda.c -o "$out/libfake_cuda.so"
"$CC" -std=c11 -Wall -Wextra -Werror -shared -fPIC tests/fake_opencl/fake_opencl.c -o "$out/libfake_opencl.so"

for test in c_tests/test_*.c; do
  name=$(basename "$test" .c)
  "$CC" "${cflags[@]}" "$test" -o "$out/$name" "${link[@]}" -ldl -pthread
  CAI_CUDA_DRIVER="$out/libfake_cuda.so" CAI_OPENCL_LIBRARY="$out/libfake_opencl.so" "$out/$name"
done

# On NVIDIA's real libcuda.so.1 with no GPU (scripts/nvidia-driver.sh fetches it; scripts/test.sh
# sets CAI_REAL_NVIDIA_DRIVER to it).
if [ -n "${CAI_REAL_NVIDIA_DRIVER:-}" ]; then
  "$CC" "${cflags[@]}" c_tests/real_nvidia/test_real_driver.c -o "$out/test_real_driver" "${link[@]}"
  CAI_CUDA_DRIVER="$CAI_REAL_NVIDIA_DRIVER/libcuda.so.1" "$out/test_real_driver"
else
  echo "c_tests/real_nvidia: skipped: CAI_REAL_NVIDIA_DRIVER is not set (scripts/test.sh sets it)"
fi

# The GPU suite's C part, on the fake driver: its streams keep order, so the slow-kernel checks
# (a missing sync shows as wrong data) run here too.
"$CC" "${cflags[@]}" -DTEST_DRIVER='"fake driver"' c_tests/gpu/test_gpu.c -o "$out/test_gpu" "${link[@]}" \
  -L"$out" -lfake_cuda -Wl,-rpath,"$out"
CAI_CUDA_DRIVER="$out/libfake_cuda.so" "$out/test_gpu"

# The OpenCL half of the Buffer Interface on a real OpenCL driver (PoCL in CI: .ci/run installs
# pocl-opencl-icd and the OpenCL headers).
if [ ! -f /usr/include/CL/cl.h ]; then
  echo "c_tests/opencl: the OpenCL headers are missing (apt-get install ocl-icd-opencl-dev opencl-headers pocl-opencl-icd)" >&2
  exit 1
fi
"$CC" "${cflags[@]}" c_tests/opencl/test_opencl.c -o "$out/test_opencl" "${link[@]}" -lOpenCL
"$out/test_opencl"

"$CXX" -std=c++17 -Wall -Wextra -Werror -pedantic -Iinclude c_tests/header_cpp.cpp -o "$out/header_cpp" "${link[@]}"
"$out/header_cpp"
"$CXX" -std=c++17 -Wall -Wextra -Werror -pedantic -Iinclude c_tests/release_after_cpp.cpp -o "$out/release_after_cpp" \
  "${link[@]}" -ldl
CAI_CUDA_DRIVER="$out/libfake_cuda.so" "$out/release_after_cpp"
