"""Runs the example module: the first two rows of a 4 x 3 CAI dict, then of that cai.Array."""
import gpu_head

source = {"shape": (4, 3), "typestr": "<f4", "data": (0x7F0000001000, False), "version": 3}
first = gpu_head.head(source, 2)
print(first.typestr, first.shape, hex(first.__cuda_array_interface__["data"][0]))
print(gpu_head.head(first, 1).shape)
