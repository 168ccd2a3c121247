"""cai.from_object next to numpy.asarray doing the same job on the CPU (reading an interface
dict, validating it and wrapping the memory), on the dicts CuPy, PyTorch, Numba and JAX really
export (benchmarks/framework_dicts.py); cai.validate on the same dicts; cai.from_object of a
DLPack producer (numpy) next to numpy.from_dlpack, and numpy.from_dlpack of a cai.Array next to
that of a numpy array; and the ctypes call of a
C function with a cai.Array argument next to the same call with a ctypes struct. Prints ns per
call and the ratio to the peer, every row measured in one interleaved run.

    bash scripts/python-env.sh-made venv:  target/venv/bin/python benchmarks/python_bench.py
"""

import ctypes
import platform
import sys
import timeit

import numpy as np

import cai
from framework_dicts import MASK, PRODUCERS


def rows():
    for name, (cuda, host) in PRODUCERS.items():
        desc = cuda.__cuda_array_interface__
        peer = (lambda h=host: np.asarray(h))
        yield (f"{name}: numpy.asarray", None, peer)
        # sync=False: the dicts name producer streams no driver here knows; the sync itself is
        # measured by the GPU benchmark.
        yield (f"{name}: cai.from_object", 0, lambda c=cuda: cai.from_object(c, sync=False))
        yield (f"{name}: cai.validate", 0, lambda d=desc: cai.validate(d))
        if "mask" in desc:
            # numpy ignores `mask`: the peer above reads one array where cai reads two. The same
            # job in numpy reads the mask's interface as well.
            mask = MASK[1]
            yield (f"{name}: numpy.asarray of data and mask", None,
                   lambda h=host, m=mask: (np.asarray(h), np.asarray(m)))
            yield (f"{name}: cai.from_object", 0, lambda c=cuda: cai.from_object(c, sync=False))
    # DLPack: numpy as the producer (host memory, so allow_host), numpy.from_dlpack as the peer.
    host = np.arange(64 * 128 * 256, dtype=np.float32).reshape(64, 128, 256)[:, ::2]
    yield ("DLPack producer (numpy): numpy.from_dlpack", None, lambda: np.from_dlpack(host))
    yield ("DLPack producer (numpy): cai.from_object", 0, lambda: cai.from_object(host, allow_host=True))
    taken = cai.from_object(host, allow_host=True)
    yield ("DLPack consumer numpy.from_dlpack: of a numpy array", None, lambda: np.from_dlpack(host))
    yield ("DLPack consumer numpy.from_dlpack: of a cai.Array", 0, lambda: np.from_dlpack(taken))
    array = cai.from_object(PRODUCERS["Numba"][0], sync=False)
    struct = cai.CaiArray.from_address(array.ptr)
    yield ("ctypes cai_validate(byref(ctypes struct))", None, lambda: cai.lib.cai_validate(ctypes.byref(struct), None))
    yield ("ctypes cai_validate(cai.Array)", 0, lambda: cai.lib.cai_validate(array, None))


def main():
    number, repeat = 20000, 9
    table = list(rows())
    # Rounds interleave the rows, so that a busy spell on a shared machine hits each of them;
    # each row keeps its best round.
    best = [float("inf")] * len(table)
    for _ in range(repeat):
        for i, (_, _, call) in enumerate(table):
            best[i] = min(best[i], timeit.timeit(call, number=number) / number * 1e9)
    print(f"python {platform.python_version()}, numpy {np.__version__}, cai {cai.__version__}, "
          f"{platform.machine()}, {platform.processor() or 'cpu'}")
    peer = None
    for (name, is_peer, _), ns in zip(table, best):
        if is_peer is None:
            peer = ns
            print(f"{name:48s} {ns:8.0f} ns   [peer]")
        else:
            print(f"{name:48s} {ns:8.0f} ns   {ns / peer:5.2f}x peer")
    return 0


if __name__ == "__main__":
    sys.exit(main())
