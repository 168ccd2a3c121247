"""libcai from Python. With a GPU and CuPy or PyTorch, hands a framework array to libcai and back;
without one, tours host-only descriptors (validation, layout, errors) and says so.

    pip install ./python && python3 examples/python_demo.py
"""

import cai


def gpu_arrays():
    """A framework array on the GPU, if a framework and a GPU are here."""
    try:
        import cupy

        if cupy.cuda.runtime.getDeviceCount() > 0:
            return "CuPy", cupy.arange(12, dtype=cupy.float32).reshape(3, 4)
    except Exception:
        pass
    try:
        import torch

        if torch.cuda.is_available():
            return "PyTorch", torch.arange(12, dtype=torch.float32, device="cuda").reshape(3, 4)
    except Exception:
        pass
    return None, None


def gpu_tour(name, x):
    a = cai.from_object(x)
    info = a.pointer_info
    print(f"{name} array imported: shape {a.shape}, typestr {a.typestr}, device {info['device_ordinal']}, "
          f"allocation of {info['allocation_size']} bytes")
    print(f"a C function can take it as is: cai_validate -> {cai.lib.cai_validate(a, None)}")
    flipped = cai.from_object(x[::-1])
    print(f"x[::-1]: strides {flipped.strides}, C-contiguous {flipped.is_c_contiguous}")


def host_tour():
    print("no GPU framework found: host-only tour of descriptors")
    desc = {"shape": (3, 4), "typestr": "<f4", "data": (0x7F0000000000, False), "version": 3}
    a = cai.from_object(desc, sync=False)
    print(f"  3x4 float32: {a.nbytes} bytes, strides {a.strides}, C-contiguous {a.is_c_contiguous}, "
          f"pointer checked: {a.pointer_info is not None}")
    for broken in ({**desc, "stream": 0}, {**desc, "typestr": "|O8"}, {**desc, "shape": (3, -4)}):
        try:
            cai.validate(broken)
        except cai.CaiError as e:
            print(f"  rejected: {e}")


if __name__ == "__main__":
    print(f"libcai {cai.__version__} at {cai.library_path()}")
    name, x = gpu_arrays()
    gpu_tour(name, x) if x is not None else host_tour()
