"""Arguments the release wheel's training (pgo_train.py) never reads, timed against their peers:
whether the profile-guided build is faster only on what it was trained on. Run it once with
each build installed (docs/performance.md, "The release wheel").

    OPENBLAS_NUM_THREADS=1 target/venv/bin/python benchmarks/pgo_untrained.py
"""

import timeit

import numpy as np

import cai

ROUNDS = 9
CALLS = 20_000
NEVER = cai.POINTER_CHECK_NEVER

REVERSED_3D = np.zeros((4, 6, 8), dtype=np.int16)[::-1, :, ::2]
COMPLEX_1D = np.zeros((64,), dtype=np.complex64)
TWIN_VALUES = np.zeros(105, dtype=np.int64)
LAYOUT = {"shape": (3, 5, 7), "typestr": "<i8", "strides": (280, 56, 8)}


class VersionZeroDict:
    """A device array as a version-0 producer exported it (its pointer is never dereferenced)."""

    __cuda_array_interface__ = {**LAYOUT, "data": (0x7F0000001000, False), "version": 0}


class Twin:
    """The same layout over host memory, for numpy.asarray."""

    __array_interface__ = {**LAYOUT, "data": (TWIN_VALUES.ctypes.data, False), "version": 3}


def main():
    f = cai.from_object
    device, twin = VersionZeroDict(), Twin()
    pairs = {
        "reversed 3-D int16": (
            lambda: f(REVERSED_3D, sync=False, allow_host=True, pointer_check=NEVER),
            lambda: np.from_dlpack(REVERSED_3D),
        ),
        "1-D complex64": (
            lambda: f(COMPLEX_1D, sync=False, allow_host=True, pointer_check=NEVER),
            lambda: np.from_dlpack(COMPLEX_1D),
        ),
        "version-0 strided dict": (
            lambda: f(device, sync=False, pointer_check=NEVER),
            lambda: np.asarray(twin),
        ),
    }
    best = {(name, side): float("inf") for name in pairs for side in (0, 1)}
    for _ in range(ROUNDS):
        for name, calls in pairs.items():
            for side, call in enumerate(calls):
                seconds = timeit.timeit(call, number=CALLS)
                best[name, side] = min(best[name, side], seconds / CALLS * 1e9)
    print("ns per call (best of 9 interleaved rounds); cai.from_object, then its peer")
    for name in pairs:
        ours, peer = best[name, 0], best[name, 1]
        print(f"  {name:24} {ours:7.1f} {peer:7.1f}  {ours / peer:.2f}x")


if __name__ == "__main__":
    main()
