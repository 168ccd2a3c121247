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
