"""cai.from_object next to numpy.asarray doing the same job on the CPU: reading a 2-D float32
interface dict, validating it and wrapping the memory. Also the cost of passing a cai.Array to a
C function through ctypes. Prints ns per call and the ratio to numpy, measured in one run.

    CAI_LIBRARY=target/release/libcai.so PYTHONPATH=python python3 benchmarks/python_bench.py
"""

import platform
import sys
import timeit

import numpy as np

import cai

host = np.zeros((512, 256), dtype=np.float32)
DESC = {"shape": (512, 256), "typestr": "<f4", "data": (host.ctypes.data, False), "version": 3, "strides": None}


class CudaProducer:
    __cuda_array_interface__ = DESC


class HostProducer:
    __array_interface__ = dict(DESC)


def main():
    number, repeat = 20000, 9
    cuda_producer, host_producer = CudaProducer(), HostProducer()
    array = cai.from_object(cuda_producer)
    rows = [
        ("numpy.asarray(__array_interface__ object)  [peer]", lambda: np.asarray(host_producer)),
        ("cai.from_object(__cuda_array_interface__ object)", lambda: cai.from_object(cuda_producer)),
        ("cai.validate(dict)", lambda: cai.validate(DESC)),
        ("C call through ctypes: cai_validate(cai.Array)", lambda: cai.lib.cai_validate(array, None)),
    ]
    # Rounds interleave the rows, so that a busy spell on a shared machine hits each of them;
    # each row keeps its best round.
    best = [float("inf")] * len(rows)
    for _ in range(repeat):
        for i, (_, call) in enumerate(rows):
            best[i] = min(best[i], timeit.timeit(call, number=number) / number * 1e9)
    peer = best[0]
    print(f"python {platform.python_version()}, numpy {np.__version__}, {platform.machine()}, {platform.processor() or 'cpu'}")
    for (name, _), ns in zip(rows, best):
        print(f"{name:52s} {ns:9.0f} ns   {ns / peer:5.2f}x numpy")
    return 0


if __name__ == "__main__":
    sys.exit(main())
