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
