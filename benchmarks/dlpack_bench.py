"""DLPack exchange: cai.from_object of framework tensors and numpy arrays, and framework
consumers of a cai.Array, against the peers a user would pick, measured in one run, interleaved.
Each row: the best of REPEATS timings of NUMBER calls, in ns per call (min over repeats is the
least noisy estimate on a shared machine). Host memory (kDLCPU): every producer here runs on the
CPU. Run: target/venv/bin/python benchmarks/dlpack_bench.py (needs numpy, paddlepaddle,
apache-tvm-ffi and jax in the environment; torch is used too when installed)."""

import os
import platform
import timeit
import warnings

warnings.filterwarnings("ignore")
os.environ.setdefault("GLOG_minloglevel", "3")

import numpy  # noqa: E402

import cai  # noqa: E402

NUMBER, REPEATS = 20000, 7


def best(stmt):
    return min(timeit.repeat(stmt, number=NUMBER, repeat=REPEATS)) / NUMBER * 1e9


def rows():
    import paddle
    import tvm_ffi

    x = numpy.arange(12.0).reshape(3, 4)
    p = paddle.to_tensor(x)
    a = cai.from_object(x, allow_host=True)
    yield "cai.from_object(paddle CPU tensor, allow_host=True)", lambda: cai.from_object(p, allow_host=True), \
        "tvm_ffi.from_dlpack(paddle tensor)", lambda: tvm_ffi.from_dlpack(p), 1.0
    try:
        import torch

        t = torch.arange(12.0).reshape(3, 4)
        yield "cai.from_object(torch CPU tensor, allow_host=True)", lambda: cai.from_object(t, allow_host=True), \
            "tvm_ffi.from_dlpack(torch tensor)", lambda: tvm_ffi.from_dlpack(t), 1.0
        yield "tvm_ffi.from_dlpack(cai.Array)", lambda: tvm_ffi.from_dlpack(a), \
            "tvm_ffi.from_dlpack(torch tensor)", lambda: tvm_ffi.from_dlpack(t), 1.0
    except ImportError:
        yield "tvm_ffi.from_dlpack(cai.Array)", lambda: tvm_ffi.from_dlpack(a), \
            "tvm_ffi.from_dlpack(paddle tensor)", lambda: tvm_ffi.from_dlpack(p), 1.0
    yield "cai.from_object(numpy array, allow_host=True)", lambda: cai.from_object(x, allow_host=True), \
        "numpy.from_dlpack(numpy array)", lambda: numpy.from_dlpack(x), 1.2
    yield "numpy.from_dlpack(cai.Array)", lambda: numpy.from_dlpack(a), \
        "numpy.from_dlpack(numpy array)", lambda: numpy.from_dlpack(x), 1.2


def main():
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs; "
          f"numpy {numpy.__version__}, cai {cai.__version__}")
    print("| operation | ns | peer | ns | ratio | goal |")
    print("|---|---|---|---|---|---|")
    for name, ours, peer_name, peer, goal in rows():
        ours(), peer()  # warm: type caches, first loads
        mine, theirs = [], []
        for _ in range(3):  # interleaved
            mine.append(best(ours))
            theirs.append(best(peer))
        m, t = min(mine), min(theirs)
        print(f"| `{name}` | {m:.0f} | `{peer_name}` | {t:.0f} | {m / t:.2f}x | <= {goal}x |")


if __name__ == "__main__":
    main()
