#!/usr/bin/env bash
# Memory and undefined-behaviour checks, no GPU needed:
# 1. the C tests (and the fake driver) built with clang's AddressSanitizer, UBSan and
#    LeakSanitizer: zero reports, zero leaks (LSan sees libcai's allocations too);
# 2. the Rust test binaries (the debug ones cargo test built, overflow checks on), which drive
#    the whole C ABI and the fake driver from many threads, under valgrind memcheck with full
#    leak checking;
# 3. the Python tests that run libcai in pytest's own process (the extension installed in
#    scripts/python-env.sh's environment) under valgrind memcheck (CPython's own reports
#    suppressed, see tests/valgrind/known-false-positives.supp), and the calls with any argument
#    (python/tests/any_argument.py, whose pytest run makes them in a child valgrind does not
#    follow) under it directly, 300 per callable.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --quiet --release
lib="$PWD/target/release"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

echo "== C tests under ASan + UBSan + LSan"
san=(-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer -g)
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
clang -std=c11 -shared -fPIC -pthread "${san[@]}" tests/fake_cuda/fake_cuda.c -o "$out/libfake_cuda.so"
clang -std=c11 -shared -fPIC "${san[@]}" tests/fake_opencl/fake_opencl.c -o "$out/libfake_opencl.so"
for test in c_tests/test_*.c; do
  name=$(basename "$test" .c)
  clang -std=c11 -Wall -Wextra -Werror -pedantic "${san[@]}" -Iinclude -Ic_tests "$test" -o "$out/$name" \
    -L"$lib" -lcai -Wl,-rpath,"$lib" -ldl -pthread
  CAI_CUDA_DRIVER="$out/libfake_cuda.so" CAI_OPENCL_LIBRARY="$out/libfake_opencl.so" "$out/$name"
done
clang -std=c11 -Wall -Wextra -Werror -pedantic "${san[@]}" -DTEST_DRIVER='"fake driver"' -Iinclude -Ic_tests \
  c_tests/gpu/test_gpu.c -o "$out/test_gpu" -L"$lib" -lcai -Wl,-rpath,"$lib" -L"$out" -lfake_cuda -Wl,-rpath,"$out"
CAI_CUDA_DRIVER="$out/libfake_cuda.so" "$out/test_gpu"
clang++ -std=c++17 -Wall -Wextra -Werror "${san[@]}" -Iinclude c_tests/header_cpp.cpp -o "$out/header_cpp" \
  -L"$lib" -lcai -Wl,-rpath,"$lib"
"$out/header_cpp"
unset ASAN_OPTIONS UBSAN_OPTIONS

# valgrind runs a process's threads one at a time, on one core: its runs go in two lanes at
# once, one per core of a 2-vCPU machine (lane 1: the Python tests' larger files; lane 2: the
# Rust test binaries, the Python tests' other files and the calls with any argument). Each lane
# stops at its first failure; their lines are printed once both are done, lane 1's first.
python=${PYTHON:-target/venv/bin/python}

rust_binaries() {
  echo "== Rust test binaries under valgrind memcheck"
  local binaries name binary
  binaries=$(cargo test --no-run --message-format=json 2>/dev/null | python3 -c '
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["profile"]["test"]:
        print(m["target"]["name"], m["executable"])')
  while read -r name binary; do
    # Proptest cases are fewer under valgrind; the full count runs in cargo test.
    if PROPTEST_CASES=64 valgrind --quiet --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite \
        "$binary" --test-threads=4 -q >"$out/$name.log" 2>&1; then
      echo "valgrind $name: 1 passed, 0 failed"
    else
      tail -40 "$out/$name.log"
      echo "valgrind $name: 0 passed, 1 failed"
      return 1
    fi
  done <<<"$binaries"
}

# The Python tests under valgrind. Left out here, and run in the plain pytest run:
# test_threads.py and test_thread_stress.py (valgrind runs threads one at a time, and their
# spinning threads take it from seconds to a quarter of an hour) and
# test_buffer_interface.py, test_frameworks.py, test_torch.py, test_element_types.py and
# test_cuda_core.py (PoCL
# compiles its kernels with LLVM inside the process, paddle, jax, torch and cuda.core load
# hundreds of MB of their own code: under valgrind that is their code being checked, for
# minutes, not libcai's); test_hot_path.py for the same reason (it compares the entry's answers
# on paddle, jax and torch tensors: paddle's own code reports a mismatched free under valgrind),
# while the rest of the suite and the any-argument run below call the same entry on every other
# argument; test_offer_consumers.py too (the UCX that PyPI's MPICH bundles branches on
# uninitialised values of its own under valgrind, and numba loads LLVM); and, of
# test_check_producer.py, the runs of the kit on paddle, torch, jax and cuda.core (paddle's
# mismatched free again), the kit itself being run here on every other producer, and every test
# reading with cuda.core (named `..._cuda_core...`: cuda.core's own version module branches on
# an uninitialised value under valgrind), the offered types being read here by the others (by
# name: pytest's node ids are relative to python/, its rootdir, so -k rather than --deselect).
# Also left out, as checking nothing under valgrind: test_extensions.py, whose every check runs
# in a child process (checks.py, the extensions' builds, maturin, CMake) that valgrind does not
# follow (no --trace-children), so that here it only ran again what the plain run runs; for the
# same reason the any-argument test's child (its calls run under valgrind directly below) and
# the type checkers' runs of the user file (mypy and pyright, which read a file). And
# test_ipc.py's Dask test: under valgrind its scheduler's and client's pure-Python start and
# stop take about 50 s (1 s without), while what it asks of libcai in this process (a pickle,
# and its load as the Array itself) the file's other tests check here too.
python_left_out=(
  --ignore=python/tests/test_threads.py --ignore=python/tests/test_thread_stress.py
  --ignore=python/tests/test_buffer_interface.py --ignore=python/tests/test_frameworks.py
  --ignore=python/tests/test_torch.py --ignore=python/tests/test_cuda_core.py
  --ignore=python/tests/test_element_types.py
  --ignore=python/tests/test_hot_path.py --ignore=python/tests/test_offer_consumers.py
  --ignore=python/tests/test_extensions.py
  -k "not test_paddle_cpu_tensors_agree and not test_torch_and_jax_cpu_tensors_conform and not cuda_core \
and not test_every_public_callable_and_array_member_takes_any_argument_without_a_crash_fake_driver \
and not test_the_user_file_passes_mypy_strict and not test_the_user_file_passes_pyright_strict \
and not test_fake_driver_a_cai_array_passed_to_a_dask_task_in_a_local_cluster"
)
# Lane 1: test_offer.py, whose property tests (400 fills, 400 hand-written tables) take about
# as long under valgrind as lane 2's steps together; lane 2 runs every other file (a new one
# too).
python_lane_1=(python/tests/test_offer.py)

python_tests() { # NAME FILE-OR-OPTION...: pytest under valgrind memcheck on these files
  local name=$1
  shift
  echo "== Python tests under valgrind memcheck ($name)"
  if PYTHONMALLOC=malloc valgrind --quiet --error-exitcode=99 --leak-check=no \
      --suppressions=tests/valgrind/known-false-positives.supp "$python" -m pytest -q -p no:cacheprovider \
      "${python_left_out[@]}" "$@" >"$out/python-$name.log" 2>&1; then
    tail -1 "$out/python-$name.log"
    echo "valgrind python tests ($name): 1 passed, 0 failed"
  else
    tail -60 "$out/python-$name.log"
    echo "valgrind python tests ($name): 0 passed, 1 failed"
    return 1
  fi
}

any_argument() {
  echo "== Calls with any argument under valgrind memcheck (300 per callable, fake driver)"
  mkdir -p "$out/plain"
  cc -std=c11 -O1 -shared -fPIC -pthread -Iinclude tests/fake_cuda/fake_cuda.c -o "$out/plain/libfake_cuda.so"
  if CAI_CUDA_DRIVER="$out/plain/libfake_cuda.so" CAI_ANY_ARGUMENT_CALLS=300 PYTHONMALLOC=malloc valgrind --quiet \
      --error-exitcode=99 --leak-check=no --suppressions=tests/valgrind/known-false-positives.supp \
      "$python" python/tests/any_argument.py cai >"$out/any_argument.log" 2>&1; then
    tail -1 "$out/any_argument.log"
    echo "valgrind calls with any argument: 1 passed, 0 failed"
  else
    tail -60 "$out/any_argument.log"
    echo "valgrind calls with any argument: 0 passed, 1 failed"
    return 1
  fi
}

lane_2_ignores=()
for file in "${python_lane_1[@]}"; do
  lane_2_ignores+=("--ignore=$file")
done
# shellcheck source=two-lanes.sh
source scripts/two-lanes.sh
two_lanes "$out" 'python_tests "lane 1 of 2" "${python_lane_1[@]}"' \
  'rust_binaries && python_tests "lane 2 of 2" "${lane_2_ignores[@]}" python/tests && any_argument'
