"""What each DLPack consumer adds to a `__dlpack__` producer's own call, for a producer that is
a short Python function and for one that first reads 256 KB (run by hand; the jax row's
diagnosis in docs/performance.md, "Known misses"). Two Python producers over
one numpy array, 512 x 256 float32: `Light` returns the array's capsule; `Heavy` first scans
256 KB, which leaves the L1 data cache holding other data. Each is read by `cai.from_object` (no sync, host
memory, no pointer check), `numpy.from_dlpack` and `tvm_ffi.from_dlpack`, next to the bare
`__dlpack__` call and its capsule's deletion ("raw"); one interleaved run, the best of ROUNDS
rounds of NUMBER calls, ns per call, each reader's cost over "raw" after the `+`.

    OPENBLAS_NUM_THREADS=1 target/venv/bin/python benchmarks/cold_producer.py
"""

import time

import numpy

import cai

ROUNDS, NUMBER = 9, 5000


class Light:
    def __init__(self, array):
        self.array = array

    def __dlpack__(self, stream=None, max_version=None, dl_device=None, copy=None):
        return self.array.__dlpack__(max_version=max_version)

    def __dlpack_device__(self):
        return (1, 0)  # kDLCPU


class Heavy(Light):
    scanned = bytearray(256 * 1024)

    def __dlpack__(self, stream=None, max_version=None, dl_device=None, copy=None):
        self.scanned.find(b"x")  # reads 256 KB: the L1 caches and part of L2 hold other data after it
        return self.array.__dlpack__(max_version=max_version)


def readers(producer):
    out = {"raw": lambda: producer.__dlpack__(max_version=(1, 3)),
           "cai.from_object": lambda: cai.from_object(producer, sync=False, allow_host=True,
                                                      pointer_check=cai.POINTER_CHECK_NEVER),
           "numpy.from_dlpack": lambda: numpy.from_dlpack(producer)}
    try:
        import tvm_ffi

        out["tvm_ffi.from_dlpack"] = lambda: tvm_ffi.from_dlpack(producer)
    except ImportError:
        pass
    return out


def main():
    array = numpy.zeros((512, 256), dtype=numpy.float32)
    cells = {(kind.__name__, name): call for kind in (Light, Heavy) for name, call in readers(kind(array)).items()}
    best = dict.fromkeys(cells, float("inf"))
    for _ in range(ROUNDS):
        for cell, call in cells.items():
            start = time.perf_counter()
            for _ in range(NUMBER):
                call()
            best[cell] = min(best[cell], (time.perf_counter() - start) / NUMBER * 1e9)
    for kind in ("Light", "Heavy"):
        raw = best[kind, "raw"]
        row = [f"{name} {ns:.0f} (+{ns - raw:.0f})" for (k, name), ns in best.items() if k == kind]
        print(f"{kind:6s} " + "   ".join(row))


if __name__ == "__main__":
    main()
