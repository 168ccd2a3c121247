"""The C API for compiled extensions (include/cai_python.h) next to the peers an extension
author would use instead, all measured in one interleaved run (best of 9 rounds per row):

- cai_python_from_object + cai_release in a C loop, on the dicts CuPy, PyTorch, Numba and JAX
  export (benchmarks/framework_dicts.py), next to NumPy's C-level import of the same layout
  (PyArray_FromAny on an object exposing __array_interface__);
- the same on DLPack producers' CPU tensors (paddle, and torch where installed: both offer
  DLPack 1.3's C exchange table), next to the producer's raw dltensor_from_py_object_no_sync
  (the floor for any consumer) and managed_tensor_from_py_object_no_sync + deleter;
- a pybind11 function taking cai::Array, and one taking cai::ArrayView (borrowed), next to the
  same function taking py::array through py::array::ensure of the numpy twin, called from
  Python;
- a nanobind function taking cai::HostOrDeviceArray, and one taking a borrowed view, next to the
  same function taking nanobind's own nb::ndarray<>, on the objects both read (CPU tensors and a
  numpy array), called from Python.

Builds its three modules (benchmarks/extension/) against the installed package first. With
--instructions, the C loops' rows are also counted by callgrind in one child process: a C loop
of one call less the same loop of none, run 2,000 times inside loops.c's counted_calls, per
call (the frameworks import uninstrumented): repeatable where time on a shared machine is not.

    OPENBLAS_NUM_THREADS=1 target/venv/bin/python benchmarks/extension_bench.py [--instructions] [--processes K]

With --processes K the timing runs in K fresh processes, each row reported as the median of
their runs with the range of its ratio (processes.py says why).
"""

import os
import pathlib
import platform
import subprocess
import sys
import tempfile
import timeit

import numpy as np

import cai

from bench_common import HERE, SHAPE, build_loops, callgrind_dumps, cpu_name, offer_ext
import build
import processes
from framework_dicts import MASK, PRODUCERS

ROUNDS, CALLS, COUNTED = 9, 20_000, 2000
MASKED = "masked"  # numpy has no mask: its peer reads the data's twin and the mask's


def build_modules():
    import pybind11

    if os.environ.get("CAI_BENCH_MODULES"):  # a child counting instructions: built already
        sys.path.insert(0, os.environ["CAI_BENCH_MODULES"])
        return
    out = pathlib.Path(tempfile.mkdtemp(prefix="cai-extension-bench-"))
    os.environ["CAI_BENCH_MODULES"] = str(out)
    build_loops(out)
    build.compile_module([HERE / "extension" / "pybind11_calls.cpp"], out / f"cai_bench_pybind11{build.SUFFIX}",
                         cpp=True, extra_includes=[pybind11.get_include()])
    build.build_nanobind(out, source=HERE / "extension" / "nanobind_calls.cpp", name="cai_bench_nanobind")
    sys.path.insert(0, str(out))


def best(rows):
    """Each row's best ns per call over ROUNDS interleaved rounds."""
    times = {name: [] for name, _ in rows}
    for _ in range(ROUNDS):
        for name, run in rows:
            times[name].append(run())
    return {name: min(values) for name, values in times.items()}


def python_call(function, argument):
    return lambda: timeit.timeit(lambda: function(argument), number=CALLS) / CALLS * 1e9


def view_borrows(call):
    """Whether cai_python_view takes the argument: by design it refuses what a borrowed struct
    cannot hold (a mask, named descr fields, a DLPack producer without the non-owning call),
    and such an argument has no view row."""
    try:
        call(1)
        return True
    except cai.CaiError as refused:
        if "cannot borrow" not in str(refused):
            raise
        return False


def c_loop_rows():
    """(name, call(n)) of every C loop row, grouped by argument (the name's part before ":"),
    the peer first in each group. cai_python_view's rows come once the C API has it (API 1.1)."""
    import cai_bench_loops as loops

    view = hasattr(loops, "view_loop")
    for name, (cuda, host) in PRODUCERS.items():
        if name == MASKED:
            # numpy has no mask: what the masked dict describes takes it two imports.
            yield (f"{name}: PyArray_FromAny of the data and mask twins",
                   lambda n, h=host: loops.numpy_loop(h, n) + loops.numpy_loop(MASK[1], n))
        yield f"{name}: PyArray_FromAny", lambda n, h=host: loops.numpy_loop(h, n)
        yield (f"{name}: cai_python_from_object",
               lambda n, c=cuda: loops.cai_loop(c, n, False, cai.SYNC_NONE))
        if view and view_borrows(lambda n, c=cuda: loops.view_loop(c, n, False, cai.SYNC_NONE)):
            yield (f"{name}: cai_python_view",
                   lambda n, c=cuda: loops.view_loop(c, n, False, cai.SYNC_NONE))
    tensors = dlpack_tensors()
    if "torch" in tensors:
        # A type offered by cai_python_offer (offer_bench.py's Image, host memory): libcai reads
        # it through its C-level table, next to torch's raw exchange call on a torch tensor.
        image = offered_image()
        yield ("offered Image: torch's dltensor_from_py_object_no_sync (on a torch tensor)",
               lambda n, t=tensors["torch"]: loops.exchange_loop(t, n, False))
        yield "offered Image: cai_python_view", lambda n, i=image: loops.view_loop(i, n, True, cai.SYNC_DEFAULT)
        yield ("offered Image: cai_python_from_object",
               lambda n, i=image: loops.cai_loop(i, n, True, cai.SYNC_DEFAULT))
    for name, tensor in tensors.items():
        yield (f"{name}: dltensor_from_py_object_no_sync",
               lambda n, t=tensor: loops.exchange_loop(t, n, False))
        yield (f"{name}: managed_tensor_from_py_object_no_sync + deleter",
               lambda n, t=tensor: loops.exchange_loop(t, n, True))
        yield (f"{name}: cai_python_from_object",
               lambda n, t=tensor: loops.cai_loop(t, n, True, cai.SYNC_DEFAULT))
        if view and view_borrows(lambda n, t=tensor: loops.view_loop(t, n, True, cai.SYNC_DEFAULT)):
            yield (f"{name}: cai_python_view",
                   lambda n, t=tensor: loops.view_loop(t, n, True, cai.SYNC_DEFAULT))


def instructions():
    """Each C loop row counted by callgrind in one child process (count_child), per call."""
    out = pathlib.Path(tempfile.mkdtemp(prefix="cai-extension-bench-count-"))
    subprocess.run(
        ["valgrind", "--tool=callgrind", "--instr-atstart=no", "--collect-atstart=no",
         f"--callgrind-out-file={out}/callgrind.out", sys.executable, __file__, "--count-child"],
        check=True, env={**os.environ, "PYTHONHASHSEED": "0"}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    totals = callgrind_dumps(out)
    print(f"\ninstructions per call (callgrind, a C loop of one call less one of none, {COUNTED} times)")
    report({name: (totals[f"row{i}_1"] - totals[f"row{i}_0"]) / COUNTED
            for i, (name, _) in enumerate(c_loop_rows())}, "")


def count_child():
    """Under callgrind: each row's loop of one call and of none, COUNTED times each."""
    import cai_bench_loops as loops

    for i, (_, call) in enumerate(c_loop_rows()):
        for calls in (1, 0):
            for _ in range(100):  # warm: type caches, the interpreter's specializations
                call(calls)
            loops.counted_calls(lambda: call(calls), COUNTED, f"row{i}_{calls}")


def main():
    build_modules()
    if sys.argv[1:2] == ["--count-child"]:
        count_child()
        return
    if processes.is_child():
        processes.emit(timing_tables())
        return
    print(f"machine: {platform.machine()}, {cpu_name()}; Python {platform.python_version()}, numpy {np.__version__}")
    runs = processes.runs(timing_tables, __file__)
    if len(runs) > 1:
        print(f"(each row: the median of {len(runs)} processes' runs; after a ratio, its lowest and highest)")
    for title in runs[0]:
        print("\n" + title)
        report_runs([run[title] for run in runs], " ns")
    if "--instructions" in sys.argv:
        instructions()


def timing_tables():
    """{title: {row: ns per call}} of the three timing tables, each one interleaved run."""
    import cai_bench_pybind11 as calls

    tables = {}
    tables["C loop: cai_python_from_object + cai_release (sync off: the dicts name streams no driver here knows)"
           " vs PyArray_FromAny of the numpy twin; on CPU tensors (allow_host) vs the producer's exchange table"] = \
        best([(name, lambda c=call: c(CALLS)) for name, call in c_loop_rows()])
    rows = []
    for name, (cuda, host) in PRODUCERS.items():
        if name == MASKED:
            data, mask = python_call(calls.take_numpy, host), python_call(calls.take_numpy, MASK[1])
            rows.append((f"{name}: py::array::ensure of the data and mask twins", lambda d=data, m=mask: d() + m()))
        rows.append((f"{name}: py::array::ensure", python_call(calls.take_numpy, host)))
        if "stream" in cuda.__cuda_array_interface__ and cuda.__cuda_array_interface__["stream"] is not None:
            # the caster's default sync needs a driver for a stream handle: options with sync off
            rows.append((f"{name}: cai::pybind11::from_object (sync off)", python_call(calls.take_cai_no_sync, cuda)))
        else:
            rows.append((f"{name}: cai::Array caster", python_call(calls.take_cai, cuda)))
            if view_borrows(lambda n, c=cuda: calls.take_view(c)):
                rows.append((f"{name}: cai::ArrayView caster", python_call(calls.take_view, cuda)))
    tables["pybind11, called from Python: f(cai::Array) vs f(py::handle) with py::array::ensure of the numpy twin"] = \
        best(rows)
    tables["nanobind, called from Python, on objects both read: f(cai::HostOrDeviceArray) and a borrowed view"
           " (cai_python_view, allow_host) vs f(nb::ndarray<>)"] = best(nanobind_rows())
    return tables


def nanobind_rows():
    """(name, timing) of the nanobind functions on each object nanobind's own caster reads too (its
    `__dlpack__` or buffer): the CPU tensors and a numpy array, the ndarray caster first."""
    import cai_bench_nanobind as nbcalls

    objects = {**dlpack_tensors(), "numpy": np.zeros((512, 256), dtype=np.float32)}
    rows = []
    for name, obj in objects.items():
        rows.append((f"{name}: nb::ndarray<> caster", python_call(nbcalls.take_ndarray, obj)))
        rows.append((f"{name}: cai::HostOrDeviceArray caster", python_call(nbcalls.take_cai, obj)))
        rows.append((f"{name}: cai_python_view (allow_host)", python_call(nbcalls.take_view, obj)))
    return rows


def offered_image():
    """The offered Image of offer_bench.py over a 512 x 256 uint8 numpy array (kept by the Image)."""
    values = np.zeros(SHAPE, dtype=np.uint8)
    return offer_ext().Image(values.ctypes.data, *SHAPE, host=True, base=values)


def dlpack_tensors():
    quiet = "--count-child" in sys.argv
    tensors = {}
    try:
        import paddle

        tensors["paddle"] = paddle.zeros([512, 256], dtype="float32")
    except ImportError:
        quiet or print("(paddle is not installed: no paddle row)")
    try:
        import torch

        tensors["torch"] = torch.zeros((512, 256), dtype=torch.float32)
    except ImportError:
        quiet or print("(torch is not installed: no torch row)")
    return tensors


def report(results, unit):
    """Each row and its ratio to the first row of its group (the rows of one argument)."""
    report_runs([results], unit)


def report_runs(runs, unit):
    """`report` of one table timed in several processes (`runs`, one {row: value} each): each
    row's median value, and the median of its ratios, each taken within one process, to the
    first row of its group, with their range."""
    peers = [{} for _ in runs]
    for name in runs[0]:
        group = name.split(":")[0]
        ratios = []
        for peer, run in zip(peers, runs):
            peer.setdefault(group, run[name])
            ratios.append(run[name] / peer[group])
        value = processes.median_and_range([run[name] for run in runs])[0]
        print(f"  {name:<70} {value:8.1f}{unit}  {processes.ratio_text(ratios)}")


if __name__ == "__main__":
    main()
