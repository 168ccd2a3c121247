"""No crash from any argument (issue 38): every public callable of cai, and every method and
property of a cai.Array, called with arguments of every Python type drawn by hypothesis
(any_argument.py), in a subprocess so that a crash fails the test with the seed and the
crashing call instead of killing pytest. A call returns, or raises TypeError, ValueError
(cai.CaiError), BufferError or what the hostile argument itself raised; anything else fails.
CAI_ANY_ARGUMENT_CALLS sets the calls per callable (10,000 here; fewer under valgrind)."""

import ctypes
import os
import pathlib
import random
import subprocess
import sys

import pytest

import cai
from conftest import FAKE_DRIVER, SUMMARY

HERE = pathlib.Path(__file__).resolve().parent


def fuzz_in_subprocess(what, *modules, env=None, calls=None):
    """Runs any_argument.py; on a crash reruns it with the same seed, tracing each call, and
    fails with the last call made. Returns the per-callable lines."""
    calls = calls or int(os.environ.get("CAI_ANY_ARGUMENT_CALLS", "10000"))
    seed = random.randrange(2**32)
    env = {**os.environ, **(env or {}), "CAI_ANY_ARGUMENT_CALLS": str(calls), "CAI_ANY_ARGUMENT_SEED": str(seed)}
    command = [sys.executable, "-X", "faulthandler", str(HERE / "any_argument.py"), what, *modules]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=1800)
    if done.returncode < 0:
        traced = subprocess.run(command, env={**env, "CAI_ANY_ARGUMENT_TRACE": "1"}, capture_output=True, text=True,
                                timeout=3600)
        last = [line for line in traced.stderr.splitlines() if line.startswith("CALL ")][-1:]
        pytest.fail(f"crashed with signal {-done.returncode} (seed {seed}; rerun: CAI_ANY_ARGUMENT_SEED={seed} "
                    f"python {' '.join(command[3:])}); the last call: {last}\n{done.stdout[-3000:]}\n"
                    f"{done.stderr[-5000:]}")
    assert done.returncode == 0, f"seed {seed}\n{done.stdout[-5000:]}\n{done.stderr[-20000:]}"
    lines = [line for line in done.stdout.splitlines() if " calls" in line]
    SUMMARY.extend(lines)
    counted = [line for line in lines if ": " in line and not line.startswith("all:")]
    assert counted and all(int(line.split(": ")[1].split()[0]) >= calls for line in counted), done.stdout
    return counted


def test_every_public_callable_and_array_member_takes_any_argument_without_a_crash_fake_driver():
    counted = fuzz_in_subprocess("cai", env={"CAI_CUDA_DRIVER": str(FAKE_DRIVER)})
    names = {line.split(":")[0] for line in counted}
    for name in ("cai.from_object", "cai.validate", "cai.from_buffer_interface", "cai.Array.from_c",
                 "cai.Array.__dlpack__", "cai.Array.release", "cai.Array.shape (read)",
                 "cai.Array.__cuda_array_interface__ (read)"):
        assert name in names, counted


def crashes_or_raises(code):
    """Runs `code` in a fresh interpreter: (return code, stderr)."""
    done = subprocess.run([sys.executable, "-c", "import cai, ctypes\n" + code], capture_output=True, text=True,
                          env={**os.environ, "CAI_CUDA_DRIVER": str(FAKE_DRIVER)}, timeout=120)
    return done.returncode, done.stderr


@pytest.mark.parametrize("argument", ['b"abc"', '"x"', "3.5", "None", "[1]", "True", "ctypes.c_int(5)",
                                      "ctypes.pointer(ctypes.c_int(5))", "ctypes.byref(ctypes.c_int(5))",
                                      "ctypes.c_char_p(b'abc')", "(ctypes.c_char * 2000)()"])
def test_array_from_c_of_anything_but_a_caiarray_pointer_is_a_type_error_naming_pointer(argument):
    """from_c(b"abc") segfaulted; from_c("x") read and wrote a temporary buffer; from_c(3.5)
    was a ctypes.ArgumentError (each read as an address by ctypes.cast)."""
    code = f"""
try:
    cai.Array.from_c({argument})
except TypeError as error:
    assert "pointer must be a ctypes POINTER(cai.CaiArray)" in str(error), error
    print("TypeError")
else:
    raise SystemExit("no error")
"""
    returncode, stderr = crashes_or_raises(code)
    assert returncode == 0, f"from_c({argument}): exit {returncode}\n{stderr[-2000:]}"


def test_array_from_c_of_an_int_out_of_the_address_range_is_a_value_error_naming_pointer():
    """-1 was read as the address 0xffff...ff (ctypes.cast): a crash, run apart."""
    code = """
for address in (-1, 2**64, -(2**70)):
    try:
        cai.Array.from_c(address)
    except ValueError as error:
        assert "pointer is the int" in str(error) and "no address" in str(error), error
    else:
        raise SystemExit("no error")
"""
    returncode, stderr = crashes_or_raises(code)
    assert returncode == 0, f"exit {returncode}\n{stderr[-2000:]}"


def test_array_from_c_of_a_byref_with_an_offset_is_refused():
    """It was read 8 bytes past the struct's start, run apart."""
    code = """
raw = cai.CaiArray()
try:
    cai.Array.from_c(ctypes.byref(raw, 8))
except ValueError as error:
    assert "offset" in str(error), error
else:
    raise SystemExit("no error")
"""
    returncode, stderr = crashes_or_raises(code)
    assert returncode == 0, f"exit {returncode}\n{stderr[-2000:]}"


def test_array_from_c_of_a_null_pointer_is_a_cai_error():
    for pointer in (ctypes.POINTER(cai.CaiArray)(), ctypes.c_void_p(), 0):
        with pytest.raises(cai.CaiError, match="NULL"):
            cai.Array.from_c(pointer)


@pytest.mark.parametrize("entry", [cai.from_object, cai.validate])
@pytest.mark.parametrize("value", [42, 3.5, "x", b"x", None, [1, 2], object()])
def test_an_object_that_is_no_array_is_a_type_error_naming_obj_and_what_it_takes(entry, value):
    with pytest.raises(TypeError, match=r"^obj must be .*__cuda_array_interface__.*not a '"):
        entry(value)
