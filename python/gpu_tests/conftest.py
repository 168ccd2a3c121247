"""GPU interop tests: run by scripts/gpu-check.sh on a CUDA machine, with the real driver and
the cai package installed from a prebuilt wheel."""

import ctypes
import importlib
import os
import pathlib
import subprocess
import sys
import tempfile

import pytest

import cai

ROOT = pathlib.Path(__file__).resolve().parents[2]
# The test command's builders and checks (python/tests/extensions), importable from here.
sys.path.insert(0, str(ROOT / "python" / "tests" / "extensions"))
import build  # noqa: E402


def built(name, make):
    """Module `name`, made by `make(folder)` into a new folder that is then importable."""
    out = pathlib.Path(tempfile.mkdtemp())
    make(out)
    sys.path.insert(0, str(out))
    return importlib.import_module(name)


@pytest.fixture(scope="session")
def producer_lib():
    """The C producer of python/tests/c_producer.c: arrays with a counted release callback."""
    out = pathlib.Path(tempfile.mkdtemp()) / "libc_producer.so"
    subprocess.run([os.environ.get("CC", "cc"), "-std=c11", "-shared", "-fPIC", f"-I{ROOT / 'include'}",
                    str(ROOT / "python" / "tests" / "c_producer.c"), "-o", str(out)], check=True)
    lib = ctypes.CDLL(str(out))
    lib.producer_make.argtypes = [ctypes.POINTER(cai.CaiArray), ctypes.c_int64, ctypes.c_uint64]
    return lib


@pytest.fixture(scope="session")
def cupy():
    return pytest.importorskip("cupy")


@pytest.fixture(scope="session")
def offer_ext():
    """python/tests/extensions/offer_ext.c: the C route's offered `Image` (cai_python_offer),
    built against the installed package as the test command builds it."""
    return built("cai_offer_ext", lambda out: build.compile_module(
        [build.HERE / "offer_ext.c"], out / f"cai_offer_ext{build.SUFFIX}", cpp=False))


@pytest.fixture(scope="session")
def c_ext():
    """python/tests/extensions/c_ext.c: a plain C extension calling cai_python.h's table,
    built against the installed package as the test command builds it."""
    return built("cai_c_ext", build.build_c)


@pytest.fixture(scope="session")
def torch():
    return pytest.importorskip("torch")


@pytest.fixture(scope="session")
def extensions(c_ext):
    """The test extensions of python/tests/extensions, all five, importable: C (c_ext), pybind11,
    nanobind and Cython compiled here against the installed package, and the PyO3 one prebuilt
    by scripts/gpu-build.sh (no Rust on the GPU machine), found in $CAI_GPU_EXTENSIONS."""
    import concurrent.futures

    prebuilt = os.environ.get("CAI_GPU_EXTENSIONS")
    if not prebuilt or not (pathlib.Path(prebuilt) / f"cai_pyo3_ext{build.SUFFIX}").exists():
        pytest.skip(f"no prebuilt PyO3 test extension cai_pyo3_ext{build.SUFFIX} in $CAI_GPU_EXTENSIONS "
                    f"({prebuilt}): build it with scripts/gpu-build.sh")
    sys.path.insert(0, prebuilt)

    def compile_three(out):
        with concurrent.futures.ThreadPoolExecutor() as pool:  # each a compiler process
            for done in [pool.submit(build.BUILDERS[name], out) for name in ("pybind11", "nanobind", "cython")]:
                done.result()

    built("cai_cython_ext", compile_three)
    import checks

    for name in checks.EXTENSIONS:
        importlib.import_module(name)
    return checks
