"""Compiled extensions through include/cai_python.h: a plain C extension, a pybind11 module, a
nanobind module and a Cython module (python/tests/extensions/), each built against the
installed package only (cai.get_include(), cai/capi.pxd; no libcai on any command line or
library path), and a PyO3 module on the cai-python crate (built by maturin), imported in a fresh process, and compared with cai.from_object on what it takes
and refuses. Pointer checks and syncs run on the fake driver (a test double) or with no driver."""

import os
import pathlib
import subprocess
import sys
import sysconfig

import pytest

from conftest import FAKE_DRIVER, ROOT, compile_shared

EXTENSIONS = ROOT / "python" / "tests" / "extensions"
sys.path.insert(0, str(EXTENSIONS))
import build  # noqa: E402


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    out = tmp_path_factory.mktemp("extensions")
    modules = [builder(out) for builder in build.BUILDERS.values()]
    for builder in build.NO_IMPORT_BUILDERS.values():
        builder(out)
    producer = compile_shared(ROOT / "python" / "tests" / "exchange_producer.c", "libexchange_producer.so")
    return out, modules, producer


def run_check(built, check, driver, first=None):
    """Runs checks.py's `check`; modules in `first` shadow the built ones of the same names."""
    out, _, producer = built
    env = {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "LD_LIBRARY_PATH")}
    env.update(PYTHONPATH=os.pathsep.join(str(path) for path in (first, out) if path), CAI_TEST_EXCHANGE_PRODUCER=str(producer), CAI_TEST_DRIVER=driver,
               CAI_CUDA_DRIVER=str(FAKE_DRIVER) if driver == "fake" else "/nonexistent/libcuda.so.1")
    done = subprocess.run([sys.executable, str(EXTENSIONS / "checks.py"), check], env=env, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_extensions_link_no_libcai_and_leave_no_cai_symbol_undefined(built):
    _, modules, _ = built
    assert len(modules) == 5
    for module in modules:
        needed = subprocess.run(["readelf", "-d", str(module)], capture_output=True, text=True, check=True).stdout
        assert "NEEDED" in needed and "cai" not in needed.replace(module.name, ""), needed
        undefined = subprocess.run(["nm", "-u", str(module)], capture_output=True, text=True, check=True).stdout
        assert not [line for line in undefined.splitlines() if "cai_" in line], undefined


def test_the_pyo3_module_exports_no_c_function_of_its_cai_crate(built):
    """cai-python builds the cai crate without its C API (feature c-api off): the module's own
    copy exports no cai_* function next to the package's."""
    _, modules, _ = built
    (module,) = [module for module in modules if module.name.startswith("cai_pyo3_ext")]
    defined = subprocess.run(["nm", "-D", "--defined-only", str(module)], capture_output=True, text=True,
                             check=True).stdout
    exported = [line.split()[-1] for line in defined.splitlines() if line.split()[-1].startswith("cai_")]
    assert not exported, exported


@pytest.mark.parametrize("driver", ["fake", "none"])
@pytest.mark.parametrize("check", ["dicts", "dlpack", "refusals", "producer"])
def test_every_extension_takes_what_cai_from_object_takes(built, check, driver):
    """On the fake driver, or with none: CAI dicts of versions 0-3 and the objects exposing
    them, a cai.Array, numpy, torch and jax through DLPack (allow_host), an exchange-table
    producer, the hostile objects; a C producer's array handed to Python and released once, on
    another thread too."""
    assert " compared" in run_check(built, check, driver)


def test_every_extensions_array_functions_take_any_argument_without_a_crash_fake_driver(built):
    """The casters (pybind11, nanobind), the Cython declarations, the PyO3 crate and the C API
    given any argument (any_argument.py, in a subprocess), and the protocols each route's offer
    gave its Image: a clean exception, never a crash."""
    from test_any_argument import fuzz_in_subprocess

    out, _, producer = built
    modules = ["cai_c_ext", "cai_pybind11_ext", "cai_nanobind_ext", "cai_cython_ext", "cai_pyo3_ext"]
    counted = fuzz_in_subprocess("extensions", *modules, env={"PYTHONPATH": str(out),
                                                               "CAI_CUDA_DRIVER": str(FAKE_DRIVER)})
    names = {line.split(":")[0] for line in counted}
    for module in modules:
        assert f"{module}.describe" in names, counted
    assert {"cai_pybind11_ext.describe_view", "cai_nanobind_ext.describe_view", "cai_pyo3_ext.describe_view",
            "cai_cython_ext.describe_buffer_interface", "cai_pyo3_ext.view_describe"} <= names, counted
    for module in modules[1:]:  # the offered Image of every route but C's (test_offer.py's)
        assert {f"{module}.Image.__dlpack__", f"{module}.Image.__dlpack_device__"} <= names, counted


def test_reference_counts_return_to_baseline_after_100000_imports_fake_driver(built):
    assert "8 compared" in run_check(built, "refcounts", "fake")


def test_row_76_a_c_view_written_straight_is_the_view_through_a_struct_and_a_refusal_writes_nothing_fake_driver(built):
    """numpy arrays, torch tensors and an exchange-table producer (host and device memory)
    viewed both ways, and refused early, late and in the import."""
    assert " compared" in run_check(built, "view_writes_out_only_on_success", "fake")


def test_row_75_a_c_import_of_a_numpy_array_written_straight_is_the_import_through_a_struct_fake_driver(built):
    """numpy arrays imported from C with nothing left for the import, and with native_only and
    a pointer check: the same struct, the array its owner, references let go of."""
    assert " compared" in run_check(built, "numpy_import_written_straight_is_the_import_through_a_struct", "fake")


def test_a_c_view_or_own_borrows_what_a_view_holds_and_owns_the_rest_as_the_import_does_fake_driver(built):
    """cai_python_view_or_own, negotiated and through a remembered exchange table: the view's
    struct where a view can hold it, the owning import's where not (a table without the
    non-owning call), each tensor deleted once; refusals the import's, word for word (the
    masked and named-field dicts are check_dicts's)."""
    assert " compared" in run_check(built, "view_or_own", "fake")


def test_a_c_import_of_a_cai_dict_holds_the_object_itself_and_lets_go_of_it_fake_driver(built):
    """CAI dicts imported from C, with and without a pointer check: cai.from_object's struct,
    the object its owner (but for a mask or named fields), references let go of, refusals
    word for word."""
    assert " compared" in run_check(built, "dict_import_holds_the_object", "fake")


def test_row_77_an_entry_on_a_type_whose_exchange_table_was_chosen_before_gives_the_negotiations_outcome_fake_driver(
    built,
):
    """Torch tensors and an exchange-table producer, viewed and imported after a numpy array
    (negotiated) and again (the table remembered): same bytes, errors and deleted tensors."""
    assert " compared" in run_check(built, "remembered_exchange_entries_give_the_negotiations_outcome", "fake")


def test_row_64_a_view_of_a_dlpack_producer_asks_for_its_own_memory_and_keeps_no_tensor_fake_driver(built):
    assert "5 compared" in run_check(built, "view_of_dlpack_producers", "fake")


def test_a_pyo3_arrays_keeper_is_released_when_python_lets_go_not_when_the_module_is_next_entered_no_driver(built):
    """Issue 37: the release ran in the package's cai.Array deallocation, unattached as the
    module's PyO3 sees it, so the kept object waited in that PyO3's pool. Also: a masked object
    that cai_python::view_or_own and the ArrayView argument import owning is let go of when the
    call ends."""
    assert "7 compared" in run_check(built, "keepers", "none")


def test_the_pyo3_view_or_own_and_array_view_argument_race_a_thread_that_swaps_masked_dicts_fake_driver(built):
    assert "9000 compared" in run_check(built, "threads", "fake")


def test_a_struct_released_after_the_interpreter_is_gone_does_not_crash_no_driver(built):
    assert "1 compared" in run_check(built, "release_after_the_interpreter_is_gone", "none")


def test_a_struct_of_an_exchange_table_producer_owns_its_managed_tensor_not_the_object_fake_driver(built):
    """cai_python_from_object holds what the table gave, as any DLPack consumer does: no
    cai.Array boxed per import (the struct held the object before)."""
    assert "3 compared" in run_check(built, "exchange_struct_owns_the_tensor", "fake")


def test_a_struct_of_a_torch_tensor_released_after_the_interpreter_is_gone_does_not_crash_real_torch(built):
    pytest.importorskip("torch")
    assert "1 compared" in run_check(built, "release_of_a_torch_tensor_after_the_interpreter_is_gone", "none")


def test_row_63_a_module_that_never_imported_the_table_reads_it_on_first_use_fake_driver(built):
    """C, pybind11, nanobind and Cython modules whose init forgot cai_python_import()
    (crashed on their first conversion before: a NULL table)."""
    assert "4 compared" in run_check(built, "no_import", "fake")


def test_row_63_a_module_that_never_imported_the_table_raises_import_error_without_one_no_driver(built):
    assert "4 compared" in run_check(built, "no_import_and_no_table", "none")


@pytest.fixture(scope="module")
def pyo3_0_30(tmp_path_factory):
    """The PyO3 module's source built on PyO3 0.30 (pyo3_030's lockfile), in its own folder."""
    out = tmp_path_factory.mktemp("pyo3_0_30")
    build.build_pyo3(out, crate=EXTENSIONS / "pyo3_030")
    return out


@pytest.mark.skipif(sys.version_info < (3, 14) and sysconfig.get_config_var("Py_GIL_DISABLED"),
                    reason="PyO3 0.30 builds for free-threaded CPython 3.14t and later only")
@pytest.mark.parametrize("check", ["dicts", "dlpack", "refusals", "producer", "table_layout", "keepers"])
def test_the_pyo3_module_on_pyo3_0_30_takes_what_cai_from_object_takes_fake_driver(built, pyo3_0_30, check):
    """cai-python's range of PyO3 versions at its newest end (the harness's module is on 0.28)."""
    assert " compared" in run_check(built, check, "fake", first=pyo3_0_30)


@pytest.mark.skipif(sysconfig.get_config_var("Py_GIL_DISABLED"),
                    reason="pyopencl has no free-threaded wheel (as test_buffer_interface.py, left out there)")
def test_the_pyo3_and_cython_modules_read_the_buffer_interface_as_cai_from_buffer_interface_does_pocl(built):
    assert "10 compared" in run_check(built, "buffer_interface", "none")


def test_cai_python_crates_table_struct_is_the_packages_no_driver(built):
    assert "1 compared" in run_check(built, "table_layout", "none")


def test_the_pyo3_modules_own_cai_calls_share_the_packages_driver_and_event_pool_fake_driver(built):
    """ArrayRef::import and ArrayRef::sync in the PyO3 module's copy of the cai crate, after the
    package used the driver: cuInit once, no entry point resolved again, one event made."""
    assert "4 compared" in run_check(built, "one_driver", "fake")


def test_a_table_of_another_major_version_is_a_clear_import_error(built):
    assert "1 compared" in run_check(built, "other_table_version", "none")


def test_the_pyo3_example_builds_with_maturin_against_cai_python_no_driver(tmp_path):
    """examples/pyo3_extension, the README's PyO3 section: built by maturin, run by use.py."""
    example = ROOT / "examples" / "pyo3_extension"
    build.build_pyo3(tmp_path, crate=example)
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    env.update(PYTHONPATH=str(tmp_path), CAI_CUDA_DRIVER="/nonexistent/libcuda.so.1")
    done = subprocess.run([sys.executable, str(example / "use.py")], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["<f4 (2, 3) 0x7f0000001000", "(1, 3)", "(3, 3) keeps its source: True",
                                        "source let go of with the rows: True",
                                        "[[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]", "(2, 3) <f4"]


def test_the_pybind11_example_builds_with_cmake_against_the_installed_package(tmp_path):
    """examples/pybind11_extension, as its README section says to build and run it (no driver)."""
    example = ROOT / "examples" / "pybind11_extension"
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    env["PATH"] = f"{pathlib.Path(sys.executable).parent}:{env['PATH']}"
    for command in (["cmake", "-S", str(example), "-B", str(tmp_path), f"-DPython_EXECUTABLE={sys.executable}"],
                    ["cmake", "--build", str(tmp_path)]):
        done = subprocess.run(command, env=env, capture_output=True, text=True)
        assert done.returncode == 0, done.stdout + done.stderr
    env.update(PYTHONPATH=str(tmp_path), CAI_CUDA_DRIVER="/nonexistent/libcuda.so.1")
    done = subprocess.run([sys.executable, str(example / "use.py")], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["<f4 (2, 3), 24 bytes", "<i2 (4, 5), 40 bytes"]
