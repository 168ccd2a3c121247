"""The installed package: it imports from any directory with no environment variable, and where
its extension module cannot load it says so in an ImportError."""

import os
import pathlib
import shutil
import subprocess
import sys

import cai


def run(code, cwd, path=None):
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "CAI_CUDA_DRIVER")}
    if path:
        env["PYTHONPATH"] = str(path)
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True, text=True)


def test_the_installed_package_imports_from_elsewhere_and_carries_its_library(tmp_path):
    done = run("import cai; print(cai.library_path()); print(cai.lib.cai_library_version().decode())", tmp_path)
    assert done.returncode == 0, done.stderr
    library, version = done.stdout.split()
    assert pathlib.Path(library).parent == pathlib.Path(cai.__file__).parent
    assert version == cai.__version__


def test_an_extension_that_cannot_load_is_a_clear_import_error(tmp_path):
    package = tmp_path / "cai"
    shutil.copytree(pathlib.Path(cai.__file__).parent, package, ignore=shutil.ignore_patterns("__pycache__"))
    for built in package.glob("_native*.so"):
        built.write_bytes(b"not a shared library")
    done = run("import cai", tmp_path, path=tmp_path)
    assert done.returncode != 0
    assert "ImportError" in done.stderr and "cai needs CPython 3.10 or later" in done.stderr, done.stderr


def test_the_wheel_carries_the_headers_c_code_builds_against(tmp_path):
    """C code built with only cai.get_include() and the installed package's library (the
    extension module carries the C API), loaded into this process as an extension would be."""
    import ctypes

    from conftest import ROOT

    include = pathlib.Path(cai.get_include())
    for header in ("cai.h", "cai.hpp", "cai_cffi.h", "cai_python.h", "cai/pybind11.h", "cai/nanobind.h"):
        assert (include / header).read_text() == (ROOT / "include" / header).read_text(), header
    source = tmp_path / "checks.c"
    source.write_text(
        '#include <string.h>\n#include "cai.h"\n'
        "int32_t check_floats(int64_t extent) {\n"
        "  CaiArray a = {0};\n"
        "  a.version = 3; a.ndim = 1; a.shape[0] = extent; strcpy(a.typestr, \"<f4\"); a.data = 4096;\n"
        "  CaiError err;\n"
        "  return cai_validate(&a, &err);\n}\n"
    )
    library = pathlib.Path(cai.library_path())
    built = subprocess.run(
        [os.environ.get("CC", "cc"), "-std=c11", "-Wall", "-Werror", "-shared", "-fPIC", str(source),
         f"-I{include}", str(library), "-Wl,--allow-shlib-undefined", f"-Wl,-rpath,{library.parent}",
         "-o", str(tmp_path / "libchecks.so")],
        capture_output=True, text=True)
    assert built.returncode == 0, built.stderr
    checks = ctypes.CDLL(str(tmp_path / "libchecks.so"))
    checks.check_floats.argtypes = [ctypes.c_int64]
    assert checks.check_floats(4) == 0
    assert checks.check_floats(-1) == cai._native.STATUS_CODES["CAI_ERROR_INVALID_SHAPE"]


def test_every_python_block_of_the_package_readme_runs(tmp_path):
    """python/README.md is the package's PyPI page: its examples run as written."""
    import re

    from conftest import ROOT

    blocks = re.findall(r"```python\n(.*?)```", (ROOT / "python" / "README.md").read_text(), re.S)
    assert blocks, "the page shows a Python example"
    for block in blocks:
        done = run(block, tmp_path)
        assert done.returncode == 0, done.stderr
