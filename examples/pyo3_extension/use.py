"""Runs the example module: the first two rows of a 4 x 3 CAI dict, then of that cai.Array;
then the rows of an object, which is let go of as soon as Python lets go of the rows; then an
offered Matrix, read by numpy and cai."""
import weakref

import numpy as np

import cai
import gpu_head

source = {"shape": (4, 3), "typestr": "<f4", "data": (0x7F0000001000, False), "version": 3}
first = gpu_head.head(source, 2)
print(first.typestr, first.shape, hex(first.__cuda_array_interface__["data"][0]))
print(gpu_head.head(first, 1).shape)


class Exposing:
    __cuda_array_interface__ = source


held = Exposing()
alive = weakref.ref(held)
rows = gpu_head.head(held, 3)
del held
print(rows.shape, "keeps its source:", alive() is not None)
del rows
print("source let go of with the rows:", alive() is None)

matrix = gpu_head.Matrix(2, 3)
print(np.from_dlpack(matrix).tolist())
print(cai.from_object(matrix, allow_host=True).shape, cai.from_object(matrix, allow_host=True).typestr)
