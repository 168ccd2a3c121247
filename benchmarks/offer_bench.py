"""A type offered by cai_python_offer (python/tests/extensions/offer_ext.c's `Image`, host
memory over a numpy array, 512 x 256 uint8) read by libcai and by the peers, next to the reads
issue 36's goals compare them with, in one interleaved run (bench_common.py's timing: best of
ROUNDS rounds of NUMBER calls, ns per call); with --instructions, instructions per call counted
by callgrind in a C loop, less the empty loop.

    OPENBLAS_NUM_THREADS=1 target/venv/bin/python benchmarks/offer_bench.py [--instructions] [--processes K]

Rows (argument | reader): libcai reading the offered type (through its C-level table) against
tvm_ffi.from_dlpack of a torch tensor; tvm_ffi and numpy reading the offered type against their
reads of a torch tensor and a numpy array; the offered type's `__cuda_array_interface__` (a
device instance: a pointer no driver is asked about) against numpy's `__array_interface__`.
"""

import numpy

import cai
import bench_common
from bench_common import SHAPE, offer_ext, run_table

bench_common.quiet()

NEVER = cai.POINTER_CHECK_NEVER


def cells():
    ext = offer_ext()
    values = numpy.zeros(SHAPE, dtype=numpy.uint8)
    image = ext.Image(values.ctypes.data, *SHAPE, host=True, base=values)
    device_image = ext.Image(0x10000, *SHAPE, typestr="<f4", stream=0)
    twin = numpy.zeros(SHAPE, dtype=numpy.float32)
    yield ("offered Image", "cai.from_object", lambda: cai.from_object(image, sync=False, allow_host=True,
                                                                        pointer_check=NEVER))
    yield ("offered Image", "numpy.from_dlpack", lambda: numpy.from_dlpack(image))
    yield ("numpy array", "numpy.from_dlpack", lambda: numpy.from_dlpack(values))
    yield ("offered Image", "__cuda_array_interface__", lambda: device_image.__cuda_array_interface__)
    yield ("numpy array", "__array_interface__", lambda: twin.__array_interface__)
    try:
        import torch
        import tvm_ffi
    except ImportError:
        print("(torch or tvm_ffi is not installed: no tvm-ffi rows)")
        return
    tensor = torch.zeros(SHAPE, dtype=torch.uint8)
    yield ("offered Image", "tvm_ffi.from_dlpack", lambda: tvm_ffi.from_dlpack(image))
    yield ("torch CPU tensor", "tvm_ffi.from_dlpack", lambda: tvm_ffi.from_dlpack(tensor))
    yield ("torch CPU tensor", "cai.from_object", lambda: cai.from_object(tensor, sync=False, allow_host=True,
                                                                           pointer_check=NEVER))


# Issue 36's goals: each read against the one it is compared with.
GOALS = (
    (("offered Image", "cai.from_object"), ("torch CPU tensor", "tvm_ffi.from_dlpack")),
    (("offered Image", "tvm_ffi.from_dlpack"), ("torch CPU tensor", "tvm_ffi.from_dlpack")),
    (("offered Image", "numpy.from_dlpack"), ("numpy array", "numpy.from_dlpack")),
    (("offered Image", "__cuda_array_interface__"), ("numpy array", "__array_interface__")),
    (("torch CPU tensor", "cai.from_object"), ("torch CPU tensor", "tvm_ffi.from_dlpack")),
)


def main():
    run_table(cells, __file__, 26, GOALS)


if __name__ == "__main__":
    main()
