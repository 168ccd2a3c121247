#!/usr/bin/env bash
# Runs every test suite that needs no GPU: Rust (unit, conformance, header freshness, the device
# half against the fake driver, and the no-GPU case against NVIDIA's real driver library), C and
# C++, Python (in target/venv, made here), the link check,
# and the packaging suite
# (CMake and pkg-config consumers of an installed copy, examples), the sanitizer and valgrind
# runs, and a short fuzz run of every fuzz target. The GPU suite is scripts/gpu-check.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
suites=0

# What the suites need, checked first: one line says what is missing and how to get it.
missing=()
# Each tool with the Debian package that brings it.
for pair in cargo:rustup cc:gcc c++:g++ cmake:cmake pkg-config:pkg-config clang:clang valgrind:valgrind \
  readelf:binutils nm:binutils python3:python3; do
  command -v "${pair%%:*}" >/dev/null || missing+=("${pair%%:*} (${pair#*:})")
done
python3 -c 'import venv, ensurepip' 2>/dev/null || missing+=("python3 venv")
# `|| true`: without clang the pipeline fails, and the line below must still say so.
clang_major=$(clang --version 2>/dev/null | sed -n 's/.*clang version \([0-9]*\).*/\1/p' | head -n 1 || true)
[ -n "$(find /usr/lib/llvm-"${clang_major:-none}"/lib/clang -name 'libclang_rt.fuzzer-*.a' 2>/dev/null)" ] ||
  missing+=("libFuzzer for clang ${clang_major:-?} (libclang-rt-${clang_major:-N}-dev)")
[ -f /usr/include/CL/cl.h ] || missing+=("the OpenCL headers (opencl-headers, ocl-icd-opencl-dev)")
ls /etc/OpenCL/vendors/*.icd >/dev/null 2>&1 || missing+=("an OpenCL driver (pocl-opencl-icd)")
# The free-threaded leg builds CPython from Debian's source unless given an interpreter (or
# built already); its script says what that build lacks.
for package in $(bash scripts/free-threaded-python.sh --missing); do
  missing+=("$package (for the free-threaded CPython, or set CAI_FREE_THREADED_PYTHON)")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "missing: ${missing[*]}; on Debian, bash .ci/run installs them (it runs this script afterwards)" >&2
  exit 1
fi

# NVIDIA's real driver library, which loads without a GPU, for the real-driver tests in every
# suite: fetched from Debian's archive once (scripts/nvidia-driver.sh). No fetch, no test run.
if ! CAI_REAL_NVIDIA_DRIVER=$(bash scripts/nvidia-driver.sh); then
  echo "could not fetch NVIDIA's driver library with scripts/nvidia-driver.sh; the real-driver tests need it" >&2
  exit 1
fi
export CAI_REAL_NVIDIA_DRIVER

# Each phase says when it starts, so that a long one is never silent about where the time goes.
phase() { echo "== $1 (at $((SECONDS / 60)) min $((SECONDS % 60)) s)"; }
SECONDS=0

# The free-threaded leg's CPython (scripts/free-threaded-python.sh), where it is neither given
# nor kept from an earlier run, is built from the start in the background at the lowest
# priority: its compile (about 5 minutes of both cores on a 2-vCPU machine) fills what the
# phases before its own leave idle (the Python packages' download, the single-threaded pytest
# runs) instead of running alone. Its leg waits for it (by its exit status, written to a file:
# the leg runs in a subshell, which cannot `wait` for its parent's job); its log is printed if
# it fails.
mkdir -p target
free_threaded_log=target/free-threaded-python.log
free_threaded_status=target/free-threaded-python.status
rm -f "$free_threaded_status"
# In a process group of its own (setsid), so that a run that stops early stops make with it.
setsid -w nice -n 19 bash -c 'status=0; bash scripts/free-threaded-python.sh || status=$?; echo "$status" >"$0"' \
  "$free_threaded_status" >target/free-threaded-python.path 2>"$free_threaded_log" </dev/null &
free_threaded_build=$!
trap '[ -z "$free_threaded_build" ] || kill -- -"$free_threaded_build" 2>/dev/null || true' EXIT

phase "Rust: rustfmt, clippy (about 100 s from a cold cache), cargo test"
cargo fmt --all --check
cargo clippy --quiet --workspace --all-targets -- -D warnings
echo "rustfmt and clippy: 2 passed, 0 failed"
cargo test
# The PyO3 helper crate (a member the root package's `cargo test` leaves out): its unit tests
# (the build script's reading of PyO3's configuration) and its documentation's examples.
cargo test -p cai-python
cargo build --release
suites=$((suites + 1))

phase "Rust as a dependency: rustdoc, fresh resolutions and packages, a crate depending on cai, the Rust examples"
RUSTDOCFLAGS="-D warnings" cargo doc --quiet --no-deps -p cai
echo "rustdoc with warnings as errors: 1 passed, 0 failed"
# The crates as a user's build resolves them, not with the repository's lockfiles: the README's
# PyO3 route in a new crate after `cargo update` (PyO3 0.28 and 0.30, editions 2021 and 2024),
# the Rust examples with a fresh lockfile, and cai and cai-python packaged (what cargo would
# upload) and built from their packages (about 35 s with target/dependents warm, 90 s cold).
bash scripts/test-rust-dependents.sh
# The crate's MSRV (Cargo.toml's rust-version), checked with that toolchain: fetched by rustup
# once (a minimal profile); where rustup cannot fetch it, the line says the check did not run.
msrv=$(sed -n 's/^rust-version = "\(.*\)"/\1/p' Cargo.toml)
if rustup toolchain install "$msrv" --profile minimal >/dev/null 2>&1; then
  cargo "+$msrv" check --quiet --locked -p cai --all-targets --target-dir target/msrv
  echo "cai on its MSRV (Rust $msrv): 1 passed, 0 failed"
else
  echo "cai on its MSRV (Rust $msrv): not run, rustup could not install that toolchain"
fi
# A crate depending on cai by path, as a user's would, built where no libcuda is installed and
# run on the fake CUDA driver (a test double): it validates, lays out, imports, and counts the
# releases that Drop runs. Its program is examples/rust_consumer.rs.
fake_driver_dir=$(mktemp -d)
cc -std=c11 -O1 -shared -fPIC -pthread tests/fake_cuda/fake_cuda.c -o "$fake_driver_dir/libfake_cuda.so"
# From outside the repository, so that no cargo configuration of libcai's applies to the build.
(cd "$fake_driver_dir" && cargo build --quiet --locked --manifest-path "$OLDPWD/tests/dependent/Cargo.toml" \
  --target-dir "$OLDPWD/target/dependent")
CAI_CUDA_DRIVER="$fake_driver_dir/libfake_cuda.so" target/dependent/debug/rust_consumer
rm -rf "$fake_driver_dir"
# The OpenCL Buffer Interface from Rust, on the OpenCL driver checked for above (PoCL on CI).
cargo run --quiet --example rust_opencl
suites=$((suites + 1))

phase "C and C++"
c_tests/run.sh target/release
suites=$((suites + 1))

phase "scripts/gpu-check.sh on NVIDIA's real driver without a GPU: no device, exit 77"
gpu_check=0
CAI_CUDA_DRIVER="$CAI_REAL_NVIDIA_DRIVER/libcuda.so.1" bash scripts/gpu-check.sh >target/gpu-check-no-device.log 2>&1 ||
  gpu_check=$?
if [ "$gpu_check" != 77 ] || ! grep -q "no CUDA device" target/gpu-check-no-device.log; then
  cat target/gpu-check-no-device.log >&2
  echo "scripts/gpu-check.sh exited $gpu_check on a driver with no device; 77 and 'no CUDA device' expected" >&2
  exit 1
fi
echo "gpu-check without a device: 1 passed, 0 failed"
suites=$((suites + 1))

phase "libcai.so links no libcuda or libOpenCL and carries no CPython code"
if readelf -d target/release/libcai.so | grep -i 'NEEDED.*\(libcuda\|libOpenCL\)'; then
  echo "libcai.so links libcuda or libOpenCL: both must be opened at run time" >&2
  exit 1
fi
if nm -D --defined-only target/release/libcai.so | awk '{print $NF}' | grep -v '^cai_'; then
  echo "libcai.so exports symbols other than cai_*" >&2
  exit 1
fi
echo "link check: 2 passed, 0 failed"
suites=$((suites + 1))

phase "Python: the GIL suite (lane 1) beside the release wheel and the free-threaded leg (lane 2)"
# A virtual environment with the test tools, and the package installed as a user installs it.
source scripts/python-env.sh
# From another directory, so that the installed package, not python/cai, is what imports.
(cd "$(mktemp -d)" && "$PYTHON" -c 'import cai; cai.validate({"shape": (1,), "typestr": "<f4", "data": (8, False), "version": 3}); print("installed package imports: 1 passed, 0 failed")')

# Each pytest run is one thread: the GIL suite takes one core of a 2-vCPU machine, and the
# rest of the phase the other, in two lanes (scripts/two-lanes.sh). Lane 2: the release wheel
# (scripts/build-wheel.sh, profile-guided), platform-tagged and abi3 (one wheel for CPython 3.10
# and later), linking nothing but the C library, so that auditwheel finds a manylinux policy it
# meets; the files of the fast paths, their consumers and their hostile inputs run again on it,
# installed in a folder of its own (conftest.py checks that they import it); then the
# free-threaded leg. The lanes' lines are printed once both are done, lane 1's first.
gil_suite() {
  echo "== Python: the suite on the installed package"
  "$PYTHON" -m pytest -q python/tests
}
release_wheel_and_free_threaded() {
  echo "== Python: the release wheel"
  local wheels wheel name release_files=()
  wheels=$(mktemp -d)
  bash scripts/build-wheel.sh "$wheels" "$PYTHON"
  wheel=$(ls "$wheels"/*.whl)
  case "$(basename "$wheel")" in
    libcai-*-cp310-abi3-linux_x86_64.whl | libcai-*-cp310-abi3-linux_aarch64.whl) ;;
    *) echo "unexpected wheel tag: $wheel" >&2; return 1 ;;
  esac
  "$PYTHON" -m auditwheel show "$wheel" | tee "$wheels/show"
  grep -q 'consistent with the.*following platform tag: "manylinux_' <(tr '\n' ' ' <"$wheels/show")
  echo "wheel $(basename "$wheel"): 1 passed, 0 failed"
  "$PYTHON" -m pip install --quiet --disable-pip-version-check --no-deps --target "$wheels/site" "$wheel"
  # The wheel users install leaves out the test oracle (python/Cargo.toml's test-oracle), so
  # test_hot_path.py, which compares with it, runs on the suite's build alone.
  "$PYTHON" -c 'import sys; sys.path.insert(0, sys.argv[1]); from cai import _native
assert _native.__file__.startswith(sys.argv[1]), _native.__file__
assert not hasattr(_native, "_from_object_reference"), "the release wheel registers the test oracle"
print("the release wheel has no test oracle: 1 passed, 0 failed")' "$wheels/site"
  for name in any_argument hostile negotiation read_numpy dlpack torch frameworks extensions offer \
    offer_consumers lifetime thread_stress; do
    release_files+=("python/tests/test_$name.py")
  done
  CAI_TESTED_PACKAGE="$wheels/site" PYTHONPATH="$wheels/site" "$PYTHON" -m pytest -q -p no:cacheprovider "${release_files[@]}"
  rm -rf "$wheels"

  echo "== Python, free-threaded (no GIL)"
  while [ ! -s "$free_threaded_status" ]; do sleep 2; done
  if [ "$(cat "$free_threaded_status")" != 0 ]; then
    cat "$free_threaded_log" >&2
    echo "could not get a free-threaded CPython from scripts/free-threaded-python.sh" >&2
    return 1
  fi
  cat "$free_threaded_log"
  CAI_FREE_THREADED_PYTHON=$(cat target/free-threaded-python.path) bash scripts/test-free-threaded.sh
}
# shellcheck source=two-lanes.sh
source scripts/two-lanes.sh
lanes=$(mktemp -d)
two_lanes "$lanes" gil_suite release_wheel_and_free_threaded
rm -rf "$lanes"
wait "$free_threaded_build"
free_threaded_build=
"$PYTHON" examples/python_demo.py
suites=$((suites + 2))

phase "Packaging: CMake, pkg-config, examples"
bash scripts/test-packaging.sh
suites=$((suites + 1))

phase "Sanitizers and valgrind"
bash scripts/test-sanitizers.sh
suites=$((suites + 1))

phase "Fuzzing (short; see fuzz/run.sh for long runs)"
SECONDS_PER_TARGET=${CAI_FUZZ_SECONDS:-20} bash fuzz/run.sh
suites=$((suites + 1))
echo
echo "all phases done in $((SECONDS / 60)) min $((SECONDS % 60)) s"
echo "suites: $suites passed, 0 failed"
