"""The public Python surface: every public name has a docstring, the ctypes structs a ctypes
user needs are exported under cai.ctypes_api, and a user's file that calls every documented
function and member (python/tests/user_typing/user_file.py) passes mypy --strict and pyright
(strict) against the installed package. The type checkers run in child processes, from a
folder outside the repository so that they find the installed `cai`."""

import ast
import inspect
import pathlib
import shutil
import subprocess
import sys
import types

import pytest

import cai
import cai.ctypes_api

HERE = pathlib.Path(__file__).resolve().parent
USER_FILE = HERE / "user_typing" / "user_file.py"
STUBS = pathlib.Path(cai.__file__).resolve().parent / "_native.pyi"


def array_members():
    """cai.Array's public members: its attributes without a leading underscore, and the
    protocols it implements."""
    protocols = {"__cuda_array_interface__", "__dlpack__", "__dlpack_device__"}
    return sorted(name for name in vars(cai.Array) if not name.startswith("_") or name in protocols)


def test_every_public_name_and_array_member_has_a_docstring():
    undocumented = []
    for module in (cai, cai.ctypes_api):
        for name in module.__all__:
            value = getattr(module, name)
            if isinstance(value, (type, types.FunctionType, types.BuiltinFunctionType, types.ModuleType)):
                if not (value.__doc__ or "").strip():
                    undocumented.append(f"{module.__name__}.{name}")
    for name in array_members():
        if not (inspect.getdoc(vars(cai.Array)[name]) or "").strip():
            undocumented.append(f"cai.Array.{name}")
    assert undocumented == []
    assert len(array_members()) >= 20, array_members()


def test_tracebacks_name_the_exception_and_the_warning_as_the_docs_do():
    """`cai.CaiError` and `cai.PointerNotCheckedWarning`, where they are exported, rather than the
    private module that defines them (cai._errors)."""
    import traceback
    import warnings

    with pytest.raises(cai.CaiError) as caught:
        cai.validate({"shape": (-1,), "typestr": "<f4", "data": (8, False), "version": 3})
    last = traceback.format_exception(caught.value)[-1]
    assert last.startswith("cai.CaiError: CAI_ERROR_INVALID_SHAPE"), last
    for exported in (cai.CaiError, cai.PointerNotCheckedWarning):
        assert f"{exported.__module__}.{exported.__qualname__}" == f"cai.{exported.__name__}"
        assert getattr(cai, exported.__name__) is exported
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        warnings.warn("unchecked", cai.PointerNotCheckedWarning)
    assert repr(seen[0].category) == "<class 'cai.PointerNotCheckedWarning'>"


def test_every_member_of_the_stubs_has_a_docstring():
    tree = ast.parse(STUBS.read_text())
    undocumented = [
        node.name for node in ast.walk(tree)
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and not node.name.startswith("_")
        and not (node.name.startswith("__") and node.name.endswith("__") and node.name not in array_members())
        and ast.get_docstring(node) is None
    ]
    assert undocumented == []


def test_the_ctypes_structs_are_public_under_cai_ctypes_api_and_cai_caiarray_is_its_alias():
    for name in ("CaiArray", "CaiLayout", "CaiError", "CaiImportOptions", "CaiPointerInfo", "CaiDtype",
                 "CaiExportOptions", "CaiSyncOptions", "CaiDLPackOptions", "lib", "library_path"):
        assert name in cai.ctypes_api.__all__, name
    assert cai.CaiArray is cai.ctypes_api.CaiArray
    assert cai.lib is cai.ctypes_api.lib
    # The C struct and the Python exception keep apart: one name in each namespace.
    assert cai.ctypes_api.CaiError is not cai.CaiError and issubclass(cai.CaiError, ValueError)


def test_the_user_file_calls_every_documented_function_and_member():
    source = USER_FILE.read_text()
    missing = [f"cai.{name}" for name in cai.__all__ if name not in source]
    missing += [f"Array.{name}" for name in array_members() if f".{name}" not in source]
    assert missing == []


def run_checker(arguments, cwd):
    return subprocess.run(arguments, capture_output=True, text=True, cwd=cwd, timeout=600)


def test_the_user_file_passes_mypy_strict(tmp_path):
    run = run_checker([sys.executable, "-m", "mypy", "--strict", "--cache-dir", str(tmp_path / "cache"),
                       str(USER_FILE)], tmp_path)
    assert run.returncode == 0 and "Success: no issues found" in run.stdout, run.stdout + run.stderr


def test_the_user_file_passes_pyright_strict(tmp_path):
    if shutil.which("node") is None:
        pytest.skip("pyright runs on node, which this machine lacks")
    pyright = pathlib.Path(sys.executable).with_name("pyright")
    run = run_checker([str(pyright), "--pythonpath", sys.executable, str(USER_FILE)], tmp_path)
    assert run.returncode == 0 and "0 errors" in run.stdout, run.stdout + run.stderr
