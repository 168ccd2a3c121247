"""A default pointer check that could not run says so: with no CUDA driver (a driver path that
does not exist, in a child process, as the driver is loaded once per process) `cai.from_object`
warns with cai.PointerNotCheckedWarning and leaves `pointer_info` None; a warnings filter makes
that an error; an explicit POINTER_CHECK_NEVER, an empty array and a host tensor taken with
allow_host=True do not warn; POINTER_CHECK_ALWAYS fails with CAI_ERROR_NO_DRIVER. The warning
is issued once a process (a filter that makes it an error raises it on every call). With the
fake driver a checked import does not warn."""

import json
import os
import subprocess
import sys
import warnings

import pytest

import cai

PRELUDE = """
import json, warnings, numpy, cai
def d(shape=(4, 3)):
    return {"shape": shape, "typestr": "<f4", "data": (0x7f0000001000, False), "version": 3}
def outcome(call):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            a = call()
            result = {"ok": True, "pointer_info": None if a.pointer_info is None else "set"}
        except Exception as e:
            result = {"ok": False, "raised": type(e).__name__, "message": str(e)}
    result["warnings"] = [(w.category.__name__, str(w.message), w.filename) for w in caught]
    return result
"""


def run_without_driver(body):
    env = dict(os.environ, CAI_CUDA_DRIVER="/nonexistent/libcuda.so.1")
    run = subprocess.run([sys.executable, "-c", PRELUDE + body], capture_output=True, text=True, env=env,
                         timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
    return json.loads(run.stdout)


def test_a_default_check_without_a_driver_warns_and_leaves_pointer_info_none_no_driver():
    result = run_without_driver("print(json.dumps(outcome(lambda: cai.from_object(d(), sync=False))))")
    assert result["ok"] and result["pointer_info"] is None, result
    [(category, message, filename)] = result["warnings"]
    assert category == "PointerNotCheckedWarning"
    assert message == ("cai.from_object: data pointer 0x7f0000001000 was not checked: no CUDA driver could be "
                       "loaded, or it found no device; pass pointer_check=cai.POINTER_CHECK_ALWAYS to make this an error that says why "
                       "(CAI_ERROR_NO_DRIVER), or pointer_check=cai.POINTER_CHECK_NEVER to skip the check without "
                       "this warning")
    assert filename == "<string>", "the warning points at the caller's line"


def test_the_warning_is_issued_once_a_process_no_driver():
    result = run_without_driver(
        "first = outcome(lambda: cai.from_object(d(), sync=False))\n"
        "later = [outcome(lambda: cai.from_object(d(), sync=False)) for _ in range(3)]\n"
        "print(json.dumps({'first warned once': len(first['warnings']) == 1,\n"
        "                  'later warned': any(each['warnings'] for each in later),\n"
        "                  'later taken': all(each['ok'] for each in later)}))\n"
    )
    # Booleans, not counts: CPython 3.11's json reading a 0 trips valgrind's uninitialised-value
    # check (scripts/test-sanitizers.sh runs this file under it).
    assert result == {"first warned once": True, "later warned": False, "later taken": True}


def test_a_filter_that_makes_the_warning_an_error_raises_on_every_call_no_driver():
    result = run_without_driver(
        "warnings.simplefilter('error', cai.PointerNotCheckedWarning)\n"
        "raised = []\n"
        "for _ in range(3):\n"
        "    try:\n"
        "        cai.from_object(d(), sync=False)\n"
        "        raised.append(False)\n"
        "    except cai.PointerNotCheckedWarning:\n"
        "        raised.append(True)\n"
        "warnings.simplefilter('always', cai.PointerNotCheckedWarning)\n"
        "print(json.dumps([raised, len(outcome(lambda: cai.from_object(d(), sync=False))['warnings'])]))\n"
    )
    assert result == [[True, True, True], 1]


def test_a_warnings_filter_makes_the_unchecked_import_an_error_no_driver():
    result = run_without_driver(
        "warnings.simplefilter('error', cai.PointerNotCheckedWarning)\n"
        "try:\n"
        "    cai.from_object(d(), sync=False)\n"
        "    print(json.dumps('no error'))\n"
        "except cai.PointerNotCheckedWarning as e:\n"
        "    print(json.dumps(['raised', str(e)[:40]]))\n"
    )
    assert result == ["raised", "cai.from_object: data pointer 0x7f000000"]


def test_what_does_not_warn_without_a_driver_and_always_is_an_error_no_driver():
    results = run_without_driver(
        "print(json.dumps({\n"
        "    'never': outcome(lambda: cai.from_object(d(), sync=False, pointer_check=cai.POINTER_CHECK_NEVER)),\n"
        "    'empty': outcome(lambda: cai.from_object(d(shape=(0, 3)), sync=False)),\n"
        "    'host tensor': outcome(lambda: cai.from_object(numpy.arange(3.0), allow_host=True)),\n"
        "    'always': outcome(lambda: cai.from_object(d(), sync=False, pointer_check=cai.POINTER_CHECK_ALWAYS)),\n"
        "}))\n"
    )
    for case in ("never", "empty", "host tensor"):
        assert results[case] == {"ok": True, "pointer_info": None, "warnings": []}, (case, results[case])
    always = results["always"]
    assert always["raised"] == "CaiError" and always["message"].startswith("CAI_ERROR_NO_DRIVER: "), always
    assert always["warnings"] == []


def test_a_checked_import_does_not_warn_fake_driver(fake):
    with warnings.catch_warnings():
        warnings.simplefilter("error", cai.PointerNotCheckedWarning)
        a = cai.from_object({"shape": (4,), "typestr": "<f4", "data": (fake.alloc(16), False), "version": 3})
    assert a.pointer_info is not None


def test_the_warning_is_a_user_warning_exported_by_name():
    assert issubclass(cai.PointerNotCheckedWarning, UserWarning)
    assert "PointerNotCheckedWarning" in cai.__all__


@pytest.mark.parametrize("check", [cai.POINTER_CHECK_DEFAULT, cai.POINTER_CHECK_NEVER])
def test_an_empty_array_is_not_warned_about_fake_driver(check):
    with warnings.catch_warnings():
        warnings.simplefilter("error", cai.PointerNotCheckedWarning)
        cai.from_object({"shape": (0,), "typestr": "<f4", "data": (0, False), "version": 3}, pointer_check=check)
