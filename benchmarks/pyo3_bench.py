"""Per argument, in a PyO3 extension (benchmarks/pyo3_peers, PyO3 0.29): the argument taken by
cai-python and by the crates a Rust author would pick instead. A torch and a numpy CPU tensor:
`cai_python::view` against dlpark 0.8's `FromPyObject` DLPack tensor (`ManagedBox<
DLManagedTensorVersioned>`). The `__cuda_array_interface__` dicts the frameworks export
(framework_dicts.py), which dlpark cannot read: `cai_python::view` against rust-numpy taking the
dict's numpy twin (the array numpy.asarray makes of its `__array_interface__`), as
`PyReadonlyArrayDyn<f32>` and as `Bound<PyArrayDyn<f32>>`. Each function returns the data pointer;
`baseline` takes the object and returns 0 (PyO3's call alone). No stream ordering, no pointer
check on cai's side: the peers do neither.

One interleaved run, best of ROUNDS rounds, ns per call; with --instructions, every cell also
counted by callgrind inside a C loop of calls, less the loop calling an empty lambda (the
harness of bench_common.py).

    OPENBLAS_NUM_THREADS=1 target/venv/bin/python benchmarks/pyo3_bench.py [--instructions]
"""

import importlib
import pathlib
import platform
import re
import sys
import tempfile

import bench_common
from bench_common import SHAPE, cell_text, count_child, counted, cpu_name, timed

bench_common.quiet()

import numpy  # noqa: E402
import torch  # noqa: E402

import cai  # noqa: E402

from framework_dicts import PRODUCERS  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[1]
CRATE = ROOT / "benchmarks" / "pyo3_peers"
# The dicts a goal is for (as in dlpack_bench.py: the frameworks' own, not the 4-D and masked).
DICT_GOALS = ("CuPy", "PyTorch", "Numba", "JAX (read-only)")
TENSOR_PEERS, DICT_PEERS = ("dlpark_tensor",), ("numpy_array", "numpy_bound")


def build(out_dir):
    """The module built by maturin as python/tests/extensions/build.py builds the PyO3 test one."""
    sys.path.insert(0, str(ROOT / "python" / "tests" / "extensions"))
    from build import build_pyo3

    build_pyo3(out_dir, crate=CRATE)
    sys.path.insert(0, str(out_dir))
    return importlib.import_module("cai_pyo3_peers")


def cells(module):
    """(argument, column, call) of every cell; a function that refuses an argument has no cell
    (said once)."""
    arguments = {"torch CPU tensor": (torch.zeros(SHAPE, dtype=torch.float32), None),
                 "numpy array": (numpy.zeros(SHAPE, dtype=numpy.float32), None)}
    for name, (cuda, host) in PRODUCERS.items():
        arguments[f"{name} dict"] = (cuda, numpy.asarray(host))
    columns = ("baseline", "cai_view", "cai_view_arg", "cai_owned", "dlpark_tensor", "numpy_array", "numpy_bound")
    for argument, (x, twin) in arguments.items():
        for column in columns:
            take = getattr(module, column)
            y = twin if twin is not None and column.startswith("numpy") else x
            call = (lambda y=y, take=take: take(y))
            try:
                call()
            except Exception as refused:
                print(f"({column} of a {argument}: {type(refused).__name__}: {str(refused)[:100]})")
                continue
            yield argument, column, call


def goal_of(argument):
    if argument.endswith(" dict"):
        return DICT_PEERS if argument[:-5] in DICT_GOALS else None
    return TENSOR_PEERS


def locked_versions():
    """The peers' crate versions as the benchmark crate's lockfile pins them."""
    lock = (CRATE / "Cargo.lock").read_text()
    found = re.findall(r'name = "(pyo3|dlpark|numpy)"\nversion = "([^"]+)"', lock)
    return ", ".join(f"{name} {version}" for name, version in found) + " (crates)"


def main():
    if sys.argv[1:2] == ["--count-child"]:
        sys.path.insert(0, sys.argv[3])  # the module the parent built
        module = importlib.import_module("cai_pyo3_peers")
        count_child(sys.argv[2], {(a, c): call for a, c, call in cells(module)})
        return 0
    out_dir = pathlib.Path(tempfile.mkdtemp(prefix="cai-pyo3-bench-"))
    module = build(out_dir)
    print(f"machine: {platform.machine()}, {cpu_name()}; Python {platform.python_version()}, "
          f"numpy {numpy.__version__}, torch {torch.__version__}, cai {cai.__version__}; {locked_versions()}")
    table = {(argument, column): call for argument, column, call in cells(module)}
    times = timed(table)
    instructions = counted(table, __file__, (str(out_dir),)) if "--instructions" in sys.argv else {}
    columns = list(dict.fromkeys(column for _, column in table))
    print("\nns per call (best of interleaved rounds)%s" % ("; instructions per call (callgrind) after the /"
                                                              if instructions else ""))
    print("| argument | " + " | ".join(f"`{c}`" for c in columns) + " | cai vs fastest peer | goal |")
    print("|---|" + "---:|" * len(columns) + "---:|---|")
    for argument in dict.fromkeys(argument for argument, _ in table):
        row = [cell_text(times, instructions, (argument, column)) for column in columns]
        ratio, bound = "", ""
        peers = goal_of(argument)
        present = [(argument, name) for name in peers or () if (argument, name) in times]
        if present:
            fastest = min(present, key=times.get)
            # the view where it can borrow; the owning array where it cannot (a DLPack capsule)
            mine = next((argument, name) for name in ("cai_view", "cai_owned") if (argument, name) in times)
            ratio = f"{times[mine] / times[fastest]:.2f}x"
            if fastest in instructions and mine in instructions:
                ratio += f" / {instructions[mine] / instructions[fastest]:.2f}x"
            ratio += f" (`{mine[1]}` / `{fastest[1]}`)"
            bound = "<= 1.0x"
        print(f"| {argument} | " + " | ".join(row) + f" | {ratio} | {bound} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
