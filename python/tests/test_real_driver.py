"""The Python package on NVIDIA's real libcuda.so.1 (Debian's non-free libcuda1, fetched by
scripts/nvidia-driver.sh) on a machine without a GPU, where cuInit answers CUDA_ERROR_NO_DEVICE.
Each case runs in a fresh interpreter with CAI_CUDA_DRIVER naming that library, as the driver is
loaded once per process. CAI_REAL_NVIDIA_DRIVER names the fetched directory (scripts/test.sh
sets it)."""

import json
import os
import pathlib
import subprocess
import sys

import pytest

REAL_DRIVER_DIR = os.environ.get("CAI_REAL_NVIDIA_DRIVER", "")

pytestmark = pytest.mark.skipif(
    not REAL_DRIVER_DIR,
    reason="CAI_REAL_NVIDIA_DRIVER is not set (scripts/test.sh sets it to what scripts/nvidia-driver.sh fetches)",
)

PRELUDE = """
import json, cai
def outcome(call):
    try:
        call()
        return {"ok": True}
    except cai.CaiError as e:
        return {"ok": False, "status": e.status, "driver_result": e.driver_result, "message": str(e)}
    except BufferError as e:  # what __dlpack__ raises, as the DLPack protocol asks
        return {"ok": False, "status": "BufferError", "message": str(e)}
def array(**extra):
    return dict({"shape": (4, 3), "typestr": "<f4", "data": (0x7f0000001000, False), "version": 3}, **extra)
"""


def run_on_real_driver(body):
    """Runs PRELUDE + body in a fresh interpreter on the real driver; body prints one JSON."""
    library = pathlib.Path(REAL_DRIVER_DIR) / "libcuda.so.1"
    assert library.is_file(), f"CAI_REAL_NVIDIA_DRIVER={REAL_DRIVER_DIR} has no libcuda.so.1"
    env = dict(os.environ, CAI_CUDA_DRIVER=str(library))
    run = subprocess.run([sys.executable, "-c", PRELUDE + body], capture_output=True, text=True, env=env,
                         timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
    return json.loads(run.stdout)


def assert_no_device(call, result):
    assert not result["ok"], (call, result)
    assert result["status"] == "CAI_ERROR_NO_DRIVER", (call, result)
    assert result["driver_result"] == 100, (call, result)
    message = result["message"]
    for part in ("CUDA_ERROR_NO_DEVICE (100)", "found no CUDA device", "sync=False",
                 "pointer_check=cai.POINTER_CHECK_NEVER"):
        assert part in message, (call, part, message)


def test_what_needs_a_device_fails_saying_how_to_go_on_real_nvidia_driver():
    results = run_on_real_driver(
        "print(json.dumps({\n"
        "    'default sync': outcome(lambda: cai.from_object(array(stream=7))),\n"
        "    'pointer check always': outcome(lambda: cai.from_object(array(), sync=False,"
        " pointer_check=cai.POINTER_CHECK_ALWAYS)),\n"
        "}))\n"
    )
    for call, result in results.items():
        assert_no_device(call, result)


def test_imports_without_a_device_succeed_real_nvidia_driver():
    results = run_on_real_driver(
        "print(json.dumps({\n"
        "    'no stream, default check': outcome(lambda: cai.from_object(array())),\n"
        "    'sync=False, default check': outcome(lambda: cai.from_object(array(stream=7), sync=False)),\n"
        "    'sync=False, check never': outcome(lambda: cai.from_object(array(stream=7), sync=False,"
        " pointer_check=cai.POINTER_CHECK_NEVER)),\n"
        "    'unchecked': cai.from_object(array(), sync=False).pointer_info is None,\n"
        "}))\n"
    )
    assert results == {
        "no stream, default check": {"ok": True},
        "sync=False, default check": {"ok": True},
        "sync=False, check never": {"ok": True},
        "unchecked": True,
    }


def test_dlpack_export_asking_the_driver_fails_and_a_host_tensor_is_taken_real_nvidia_driver():
    results = run_on_real_driver(
        "import numpy\n"
        "a = cai.from_object(array(), sync=False)\n"
        "print(json.dumps({\n"
        "    '__dlpack__': outcome(lambda: a.__dlpack__()),\n"
        "    '__dlpack_device__': outcome(lambda: a.__dlpack_device__()),\n"
        "    'numpy tensor taken': outcome(lambda: cai.from_object(numpy.arange(3.0), allow_host=True)),\n"
        "}))\n"
    )
    # The array's device is the driver's to say; DLPack asks for BufferError.
    for call in ("__dlpack__", "__dlpack_device__"):
        result = results[call]
        assert result["status"] == "BufferError", (call, result)
        for part in ("CAI_ERROR_NO_DRIVER", "CUDA_ERROR_NO_DEVICE (100)", "sync=False",
                     "pointer_check=cai.POINTER_CHECK_NEVER"):
            assert part in result["message"], (call, part, result)
    assert results["numpy tensor taken"] == {"ok": True}


def test_a_default_check_without_a_device_warns_real_nvidia_driver():
    results = run_on_real_driver(
        "import warnings\n"
        "with warnings.catch_warnings(record=True) as caught:\n"
        "    warnings.simplefilter('always')\n"
        "    a = cai.from_object(array(), sync=False)\n"
        "print(json.dumps([a.pointer_info is None] + [w.category.__name__ for w in caught]))\n"
    )
    assert results == [True, "PointerNotCheckedWarning"]
