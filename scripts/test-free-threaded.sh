#!/usr/bin/env bash
# The free-threaded leg: the Python suite and its thread stress on a CPython built with
# --disable-gil (CAI_FREE_THREADED_PYTHON, else one built from Debian's source by
# scripts/free-threaded-python.sh), in target/venv-ft with the package installed as a user
# installs it. It checks that importing cai leaves the GIL off. Left out there: the pyopencl
# and cffi tests (neither publishes a wheel for free-threaded CPython 3.13); they run in the
# GIL leg. Of python/test-requirements.txt only the packages named below are installed: the
# frameworks (paddle, jax, tvm-ffi, and torch 2.15 and cuda-core 1.2, which publish no 3.13t
# wheel either) are not, so their tests are skipped here.
# The type checkers' runs (mypy, pyright) are left out too: they check a file, not the
# interpreter, and mypy needs ast-serialize, which has no 3.13t wheel; they run in the GIL leg.
set -euo pipefail
cd "$(dirname "$0")/.."

interpreter=$(bash scripts/free-threaded-python.sh)
venv="$PWD/target/venv-ft"
if [ ! -x "$venv/bin/python" ]; then
  "$interpreter" -m venv "$venv"
fi
PYTHON="$venv/bin/python"
"$PYTHON" -m pip install --quiet --disable-pip-version-check --upgrade pip
"$PYTHON" -m pip install --quiet --disable-pip-version-check \
  $(grep -E '^(pytest|hypothesis|numpy|pybind11|nanobind|Cython|maturin)==' python/test-requirements.txt)
echo "free-threaded leg: building the package for $("$PYTHON" -c 'import sys; print(sys.version.split()[0])')t"
# With the test-oracle feature, as scripts/python-env.sh builds it.
MATURIN_PEP517_ARGS="--features test-oracle" "$PYTHON" -m pip install --quiet --disable-pip-version-check \
  --force-reinstall --no-deps ./python

# From another directory, so that the installed package is what imports; -W error turns
# CPython's "the GIL has been enabled" RuntimeWarning into a failure.
(cd "$(mktemp -d)" && "$PYTHON" -W error -c '
import sys, sysconfig
assert sysconfig.get_config_var("Py_GIL_DISABLED"), "not a free-threaded build"
import cai
assert not sys._is_gil_enabled(), "importing cai turned the GIL on"
print("import cai keeps the GIL off: 1 passed, 0 failed")')

"$PYTHON" -m pytest -q python/tests \
  --ignore=python/tests/test_buffer_interface.py \
  --ignore=python/tests/test_cffi_declarations.py \
  --ignore=python/tests/test_header_match.py \
  -k "not test_the_user_file_passes_mypy_strict and not test_the_user_file_passes_pyright_strict"
