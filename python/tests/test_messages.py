"""Error messages end with the fix in the caller's own terms: the keyword to pass, the typestr
to write, one wording for every missing key. numpy is the real producer of host memory; the
no-driver case runs in a child process pointed at a driver path that does not exist."""

import os
import subprocess
import sys

import numpy
import pytest

import cai


def test_host_memory_without_allow_host_names_the_keyword_real_numpy():
    with pytest.raises(cai.CaiError, match=r"pass allow_host=True"):
        cai.from_object(numpy.arange(3.0))


@pytest.mark.parametrize("key", ["shape", "typestr", "data", "version"])
def test_a_missing_required_key_is_named_in_one_wording(key):
    d = {"shape": (2,), "typestr": "<f4", "data": (0x1000, False), "version": 3}
    del d[key]
    with pytest.raises(cai.CaiError, match=f"^CAI_ERROR_[A-Z_]+: {key} is missing; it is a required key$"):
        cai.validate(d)


def test_a_dtype_name_where_a_typestr_belongs_names_the_typestr():
    native = "<" if sys.byteorder == "little" else ">"
    with pytest.raises(cai.CaiError, match=f"write '{native}f4'"):
        cai.validate({"shape": (2,), "typestr": "float32", "data": (0x1000, False), "version": 3})


def test_a_sync_without_a_driver_names_how_to_skip_it_no_driver():
    script = (
        "import cai\n"
        "try:\n"
        "    cai.from_object({'shape': (2,), 'typestr': '<f4', 'data': (4096, False), 'version': 3,"
        " 'stream': 7})\n"
        "except cai.CaiError as e:\n"
        "    print(e.status, e)\n"
    )
    env = dict(os.environ, CAI_CUDA_DRIVER="/nonexistent/libcuda.so.1")
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=60)
    assert run.stdout.startswith("CAI_ERROR_NO_DRIVER"), run.stdout + run.stderr
    assert "pass sync=False" in run.stdout and "POINTER_CHECK_NEVER" in run.stdout


def _dict(**changes):
    d = {"shape": (2, 3), "typestr": "<f4", "data": (0x1000, False), "version": 3}
    d.update(changes)
    return d


def test_a_mask_without_the_interface_is_quoted_by_value():
    with pytest.raises(cai.CaiError, match=r"^CAI_ERROR_INVALID_MASK: mask: 42 has no __cuda_array_interface__; "
                                           r"a mask is None or an object \(or dict\) that has one$"):
        cai.validate(_dict(mask=42))


def test_strides_of_the_wrong_length_are_quoted_with_the_dimensions_expected():
    with pytest.raises(cai.CaiError, match=r"^CAI_ERROR_INVALID_STRIDES: strides \(12,\) has 1 entry but shape has 2 "
                                           r"dimensions; give one stride in bytes per dimension, or None"):
        cai.validate(_dict(strides=(12,)))


def test_a_data_of_three_items_is_quoted_in_full():
    with pytest.raises(cai.CaiError, match=r"^CAI_ERROR_INVALID_DATA: data \(4096, False, 7\) is not a 2-tuple "
                                           r"\(pointer, read-only flag\); it has 3 items$"):
        cai.validate(_dict(data=(4096, False, 7)))


@pytest.mark.parametrize("typestr", [" <f4", "<f4 ", "<f4\n"])
def test_a_typestr_with_a_stray_space_is_told_of_the_space(typestr):
    with pytest.raises(cai.CaiError, match=r"has leading or trailing whitespace; write '<f4'$") as raised:
        cai.validate(_dict(typestr=typestr))
    assert "one-letter" not in str(raised.value)


@pytest.mark.parametrize("stream, shown, why", [(-3, "-3", "is negative"), (0, "0", "is ambiguous"),
                                                (2**64, "<an integer beyond 64 bits>", r"is above 2\*\*64 - 1")])
def test_a_refused_consumer_stream_says_why_and_which_streams_are_valid(stream, shown, why):
    with pytest.raises(cai.CaiError, match=f"^CAI_ERROR_INVALID_STREAM: stream {shown} {why}.*; a consumer stream "
                                           r"is None \(no stream\), 1 \(the legacy default stream\), 2 \(the per-thread "
                                           r"default stream\) or a CUstream handle \(an integer from 3 to 2\*\*64 - 1\)$"):
        cai.from_object(_dict(), stream=stream)


def test_host_memory_refused_to_a_python_caller_names_only_the_keyword_real_numpy():
    with pytest.raises(cai.CaiError, match=r"to take it, pass allow_host=True$"):
        cai.from_object(numpy.arange(3.0))


def test_host_memory_refused_to_a_c_caller_of_cai_python_from_object_names_the_c_field_real_numpy():
    # The capsule's table read through ctypes: its first entry after the version words and
    # the size is cai_python_from_object (include/cai_python.h).
    import ctypes

    from cai import ctypes_api

    get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
    get_pointer.restype, get_pointer.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    table = get_pointer(cai._native._C_API, b"cai._native._C_API")
    from_object_type = ctypes.PYFUNCTYPE(ctypes.c_int32, ctypes.py_object, ctypes.POINTER(ctypes_api.CaiImportOptions),
                                         ctypes.POINTER(ctypes_api.CaiArray), ctypes.POINTER(ctypes_api.CaiError))
    from_object = from_object_type(ctypes.c_void_p.from_address(table + 16).value)
    out, error = ctypes_api.CaiArray(), ctypes_api.CaiError()
    with pytest.raises(cai.CaiError) as raised:
        from_object(numpy.arange(3.0), None, ctypes.byref(out), ctypes.byref(error))
    message = error.message.decode()
    assert message == str(raised.value)
    assert message.endswith("to take it, set CaiImportOptions.allow_host = 1 (from the Rust crate cai-python: "
                            "ImportOptions::new().allow_host(true))"), message
    assert "allow_host=True" not in message and "CaiDLPackOptions" not in message
