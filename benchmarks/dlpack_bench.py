"""Per argument: what users really pass (torch, paddle, jax and numpy CPU tensors, a cai.Array,
and the `__cuda_array_interface__` dicts CuPy, PyTorch, Numba and JAX export) taken by
cai.from_object and by the peers a user would pick instead: tvm_ffi.from_dlpack,
numpy.from_dlpack, cuda.core's StridedMemoryView.from_any_interface and .from_dlpack, and for
the dicts numpy.asarray of their CPU twin (framework_dicts.py). No stream ordering on any side
(sync=False, stream_ptr=-1): host memory, every producer here runs on the CPU.

One interleaved run: each round times every cell (NUMBER calls), each cell keeps its best of
ROUNDS rounds, in ns per call. The goal is against the fastest of the peers the goal names,
measured in the same run. With --instructions, every cell is also counted by callgrind in one
child process (instructions per call inside a C loop of calls, less the same loop calling an
empty lambda; benchmarks/extension/loops.c's counted_calls): repeatable where time on a shared
machine is not.

    OPENBLAS_NUM_THREADS=1 target/venv/bin/python benchmarks/dlpack_bench.py [--instructions] [--processes K]

With --processes K the timing runs in K fresh processes: each cell the median of their runs,
each ratio the median of the ratios taken within each run, with its range (processes.py).
"""

import platform
import sys

import bench_common
from bench_common import (NUMBER, ROUNDS, SHAPE, cell_text, count_child, counted, cpu_name, label, timed,
                          timed_runs)

bench_common.quiet()

import numpy  # noqa: E402

import cai  # noqa: E402

import processes  # noqa: E402
from framework_dicts import MASK, PRODUCERS  # noqa: E402
# The peers each goal is against, and the bound on cai.from_object / the fastest of them.
TENSOR_PEERS = ("tvm_ffi.from_dlpack", "numpy.from_dlpack", "SMV.from_any_interface")
GOALS = {"numpy array": (("numpy.from_dlpack",), 1.2), "cai.Array": (TENSOR_PEERS, 0.6)}
DICT_GOALS = ("CuPy", "PyTorch", "Numba", "JAX (read-only)", "4-D strided", "CuPy, built per access")
# numpy has no mask: what the masked dict describes takes it two reads, the data's and the mask's.
MASKED, BOTH_TWINS = "masked", "numpy.asarray (data and mask twins)"


def arguments():
    """name: the object a user passes, for each producer that is installed."""
    out = {}
    try:
        import torch

        out["torch CPU tensor"] = torch.zeros(SHAPE, dtype=torch.float32)
    except ImportError:
        print("(torch is not installed: no torch row)")
    try:
        import paddle

        out["paddle CPU tensor"] = paddle.zeros(list(SHAPE), dtype="float32")
    except ImportError:
        print("(paddle is not installed: no paddle row)")
    try:
        import jax.numpy as jnp

        out["jax CPU array"] = jnp.zeros(SHAPE, dtype=jnp.float32)
    except ImportError:
        print("(jax is not installed: no jax row)")
    x = numpy.zeros(SHAPE, dtype=numpy.float32)
    out["numpy array"] = x
    out["cai.Array"] = cai.from_object(numpy.zeros(SHAPE, dtype=numpy.float32), allow_host=True)
    return out


def peers():
    """name: the call a user writes with that peer, made for an argument (`make(x)` returns it
    as a function of no arguments). Each looks its function up in its module at every call,
    as the `cai.from_object` cell does: a peer bound once to a local (as this script did until
    2026-11-29) skips the module lookups its users pay, which cost a call of a jax array 30-60
    ns once jax's `__dlpack__` has evicted them from the cache (Intel 167 in
    docs/performance.md, 2026-11-29)."""
    out = {"numpy.from_dlpack": lambda x: lambda: numpy.from_dlpack(x)}
    try:
        global tvm_ffi
        import tvm_ffi

        out["tvm_ffi.from_dlpack"] = lambda x: lambda: tvm_ffi.from_dlpack(x)
    except ImportError:
        print("(apache-tvm-ffi is not installed: no tvm_ffi column)")
    try:
        global StridedMemoryView
        from cuda.core.utils import StridedMemoryView

        out["SMV.from_any_interface"] = lambda x: lambda: StridedMemoryView.from_any_interface(x, stream_ptr=-1)
        out["SMV.from_dlpack"] = lambda x: lambda: StridedMemoryView.from_dlpack(x, stream_ptr=-1)
    except ImportError:
        print("(cuda-core is not installed: no StridedMemoryView columns)")
    return out


def cai_call(x):
    """`cai.from_object` of `x` as users write it, made as the peers' calls are (`peers`)."""
    return lambda: cai.from_object(x, allow_host=True, sync=False)


def cells():
    """(argument, column, call) of every cell that runs; a peer that refuses an argument has
    no cell (said once)."""
    columns = peers()
    for argument, x in arguments().items():
        yield argument, "cai.from_object", cai_call(x)
        for column, make in columns.items():
            call = make(x)
            try:
                call()
            except Exception as refused:  # a peer that cannot take this argument: no cell
                print(f"({column} of a {argument}: {type(refused).__name__}: {str(refused)[:90]})")
                continue
            yield argument, column, call
    # The dicts' pointers are fake and no driver loads here: the check is skipped as the issue's
    # kernel launcher skips it, without the PointerNotCheckedWarning it would cost per call.
    for name, (cuda, host) in PRODUCERS.items():
        yield f"{name} dict", "cai.from_object", lambda c=cuda: cai.from_object(
            c, sync=False, pointer_check=cai.POINTER_CHECK_NEVER)
        yield f"{name} dict", "numpy.asarray (twin)", lambda h=host: numpy.asarray(h)
        if name == MASKED:
            yield f"{name} dict", BOTH_TWINS, both_twins(host, MASK[1])


def both_twins(data, mask):
    """numpy's read of a masked array's data and mask, as a user writes it: two calls."""

    def read():
        numpy.asarray(data)
        numpy.asarray(mask)

    return read


def goal_of(argument):
    """(the peers the goal is against, the bound) for an argument, or None."""
    if argument in GOALS:
        return GOALS[argument]
    if argument == f"{MASKED} dict":
        return (BOTH_TWINS,), 1.0
    if argument.endswith(" dict"):
        return (("numpy.asarray (twin)",), 1.0) if argument[:-5] in DICT_GOALS else None
    return TENSOR_PEERS, 1.0


def main():
    if sys.argv[1:2] == ["--count-child"]:
        count_child(sys.argv[2], {(argument, column): call for argument, column, call in cells()})
        return
    table = {(argument, column): call for argument, column, call in cells()}
    if processes.is_child():
        processes.emit({label(key): ns for key, ns in timed(table).items()})
        return
    print(f"machine: {platform.machine()}, {cpu_name()}; Python {platform.python_version()}, numpy {numpy.__version__}, "
          f"cai {cai.__version__}; {versions()}")
    runs = timed_runs(table, __file__)
    times = {key: processes.median_and_range([run[key] for run in runs])[0] for key in table}
    instructions = counted(table, __file__) if "--instructions" in sys.argv else {}
    columns = list(dict.fromkeys(column for _, column in table))
    print("\nns per call (best of %d interleaved rounds of %d calls%s)%s" %
          (ROUNDS, NUMBER, f"; the median of {len(runs)} processes" if len(runs) > 1 else "",
           "; instructions per call (callgrind) after the /" if instructions else ""))
    print("| argument | " + " | ".join(f"`{c}`" for c in columns) + " | vs fastest goal peer | goal |")
    print("|---|" + "---:|" * len(columns) + "---:|---|")
    for argument in dict.fromkeys(argument for argument, _ in table):
        row = [cell_text(times, instructions, (argument, column)) for column in columns]
        goal = goal_of(argument)
        ratio, bound = "", ""
        if goal:
            names, limit = goal
            present = [(argument, name) for name in names if (argument, name) in times]
            if present:
                # Against the fastest goal peer of each process's own run.
                ratios = [run[(argument, "cai.from_object")] / min(run[key] for key in present) for run in runs]
                fastest = min(present, key=times.get)
                ratio = processes.ratio_text(ratios)
                if fastest in instructions:
                    ratio += f" / {instructions[(argument, 'cai.from_object')] / instructions[fastest]:.2f}x"
                ratio += f" ({fastest[1]})"
            bound = f"<= {limit}x"
        print(f"| {argument} | " + " | ".join(row) + f" | {ratio} | {bound} |")
    return 0


def versions():
    found = []
    for module, name in (("torch", "torch"), ("paddle", "paddle"), ("jax", "jax"), ("tvm_ffi", "tvm_ffi"),
                         ("cuda.core", "cuda.core")):
        try:
            found.append(f"{name} {__import__(module, fromlist=['__version__']).__version__}")
        except ImportError:
            pass
    return ", ".join(found)


if __name__ == "__main__":
    sys.exit(main())

