"""Calls the example extension with an object exposing __cuda_array_interface__ and with a
numpy array (taken by DLPack)."""

import numpy

import arrays


class Exposes:
    """What CuPy, PyTorch or Numba arrays look like to a consumer. Without a CUDA driver libcai
    validates it and skips the pointer check; with one, `data` must be device memory."""

    __cuda_array_interface__ = {"shape": (2, 3), "typestr": "<f4", "data": (4096, False), "version": 3}


print(arrays.describe(Exposes()))
print(arrays.describe(numpy.zeros((4, 5), dtype=numpy.int16)))
