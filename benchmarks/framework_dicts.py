"""The `__cuda_array_interface__` dicts the frameworks really export, key for key, and CPU twins
of them: objects exposing the same layout as `__array_interface__` over host memory, which
`numpy.asarray` reads (the peer that does the same job on the CPU).

- CuPy (13/14): version 3, `descr [('', '<f4')]`, `stream` an int (its current stream; 1 for
  the legacy default stream), `strides None` when C-contiguous.
- PyTorch: version 2, no `stream`, `strides None` when contiguous.
- Numba: version 3, `stream` None (default stream) or an int, no `descr`.
- JAX: version 2, read-only (`data[1]` True).
- a 4-D strided view (CuPy's keys, byte strides).
- a masked array (Numba's keys with a `mask` that exposes the interface itself).
- CuPy's again, built at each access by a property, as a CuPy array hands it out (the rows
  above read one dict built once; the twin builds its `__array_interface__` the same way).
"""

import numpy as np

SHAPE = (512, 256)
HOST = np.zeros(SHAPE, dtype=np.float32)
HOST_4D = np.zeros((8, 16, 8, 6), dtype=np.float32)
VIEW_4D = HOST_4D[:, ::2, :, 1:5]
HOST_MASK = np.ones(SHAPE, dtype=np.bool_)
STREAM = 0x55D0C0DE0000  # a CUstream as CuPy exports it; sync=False: no driver is asked


class Producer:
    def __init__(self, cuda=None, host=None):
        if cuda is not None:
            self.__cuda_array_interface__ = cuda
        if host is not None:
            self.__array_interface__ = host


def data(array, readonly=False):
    return (array.ctypes.data, readonly)


MASK_HOST = {"shape": SHAPE, "typestr": "|b1", "data": data(HOST_MASK), "version": 3, "strides": None}
# (the mask as the masked array's dict holds it, its CPU twin for numpy)
MASK = (Producer(cuda={**MASK_HOST, "stream": None}), Producer(host=MASK_HOST))

# name: (cuda dict, host dict with the same layout)
DICTS = {
    "CuPy": {"shape": SHAPE, "typestr": "<f4", "descr": [("", "<f4")], "stream": STREAM, "version": 3,
             "strides": None, "data": data(HOST)},
    "PyTorch": {"typestr": "<f4", "shape": SHAPE, "strides": None, "data": data(HOST), "version": 2},
    "Numba": {"shape": SHAPE, "strides": None, "data": data(HOST), "typestr": "<f4", "stream": None, "version": 3},
    "JAX (read-only)": {"shape": SHAPE, "typestr": "<f4", "data": data(HOST, readonly=True), "version": 2,
                        "strides": None},
    "4-D strided": {"shape": VIEW_4D.shape, "typestr": "<f4", "descr": [("", "<f4")], "stream": STREAM, "version": 3,
                    "strides": VIEW_4D.strides, "data": data(VIEW_4D)},
    "masked": {"shape": SHAPE, "strides": None, "data": data(HOST), "typestr": "<f4", "stream": None, "version": 3,
               "mask": MASK[0]},
}


def host_twin(cuda):
    """The same layout as numpy's `__array_interface__` (numpy ignores `stream` and `mask`)."""
    host = {key: value for key, value in cuda.items() if key not in ("stream", "mask")}
    host["version"] = 3
    return host


PRODUCERS = {name: (Producer(cuda=d), Producer(host=host_twin(d))) for name, d in DICTS.items()}
HOST_ADDRESS = HOST.ctypes.data


class CupyBuilt:
    """CuPy's dict as CuPy hands it out: its ndarray's `__cuda_array_interface__` is a property
    that builds the dict at each access, with a new `data` tuple and a new `descr` list."""

    @property
    def __cuda_array_interface__(self):
        return {"shape": SHAPE, "typestr": "<f4", "descr": [("", "<f4")], "stream": STREAM, "version": 3,
                "strides": None, "data": (HOST_ADDRESS, False)}


class CupyBuiltTwin:
    """Its CPU twin: numpy's `__array_interface__`, built at each access the same way."""

    @property
    def __array_interface__(self):
        return {"shape": SHAPE, "typestr": "<f4", "descr": [("", "<f4")], "version": 3, "strides": None,
                "data": (HOST_ADDRESS, False)}


PRODUCERS["CuPy, built per access"] = (CupyBuilt(), CupyBuiltTwin())
