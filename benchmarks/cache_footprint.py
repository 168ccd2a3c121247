"""How much code and data each reader of a DLPack producer touches per call, by library:
instructions and the first-level cache misses of callgrind's cache simulation (instruction
lines, data lines read, data lines written), per call of each reader in a loop of calls.

Wall-clock time tells two readers apart by more than their instruction counts do when one of
them touches more memory per call: on a producer whose `__dlpack__` runs thousands of
instructions of Python (jax's), whatever the reader touches after the call was evicted by
the call, and whatever it touches evicts the producer's in turn. The simulation counts both
effects where a virtual machine exposes no hardware counters: a reader's own misses, and the
misses it causes in the producer's call and in CPython (a row's "python" and "producer" cells
next to the other readers'). Results: docs/performance.md, "Known misses".

    OPENBLAS_NUM_THREADS=1 target/venv/bin/python benchmarks/cache_footprint.py [N]

Each (producer, reader) pair runs in its own process under valgrind's callgrind, N calls (2,000
by default) after as many uncounted ones; the cache sizes are callgrind's defaults for this
machine. Needs valgrind, and builds benchmarks/extension/loops.c (its counted_calls).
"""

import os
import pathlib
import re
import subprocess
import sys
import tempfile

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

EVENTS = ("Ir", "I1mr", "D1mr", "D1mw")
LIBRARIES = (("cai/_native", "libcai"), ("_multiarray_umath", "numpy"), ("tvm_ffi", "tvm-ffi"),
             ("libtvm_ffi", "tvm-ffi"), ("jaxlib", "producer"), ("torch/lib", "producer"),
             ("libpython", "python"), ("libc.so", "libc"), ("ld-linux", "libc"),
             ("libstdc++", "libc"), ("libm.so", "libc"))


def producers():
    """{name: a zero-argument function making the producer}: what is installed of jax and torch."""
    made = {}
    try:
        import jax.numpy as jnp

        made["jax CPU array"] = lambda: jnp.arange(12.0, dtype=jnp.float32).reshape(3, 4)
    except ImportError:
        pass
    try:
        import torch

        made["torch CPU tensor"] = lambda: torch.arange(12.0).reshape(3, 4)
    except ImportError:
        pass
    return made


def readers():
    """{name: function of the object}: libcai as users call it and the peers installed, each
    looking its function up in its module at every call, as users' code does."""
    import numpy as np

    import cai

    made = {
        "cai.from_object": lambda x: cai.from_object(x, sync=False, allow_host=True,
                                                     pointer_check=cai.POINTER_CHECK_NEVER),
        "numpy.from_dlpack": lambda x: np.from_dlpack(x),
    }
    try:
        import tvm_ffi

        made["tvm_ffi.from_dlpack"] = lambda x: tvm_ffi.from_dlpack(x)
    except ImportError:
        pass
    return made


def child(producer, reader, calls, loops_dir):
    """Under callgrind: `calls` reads uncounted, then `calls` counted by counted_calls."""
    sys.path.insert(0, loops_dir)
    import cai_bench_loops as loops

    x = producers()[producer]()
    read = readers()[reader]

    def run():
        for _ in range(calls):
            read(x)

    run()
    loops.counted_calls(run, 1, "counted")


def self_costs(dump):
    """{library: [events...]} of a raw callgrind dump: each function's own cost (not its
    calls'), summed by the object file that holds the function."""
    text = pathlib.Path(dump).read_text(errors="replace")
    names = re.search(r"^events: (.*)$", text, re.M).group(1).split()
    columns = [names.index(e) for e in EVENTS]
    objects, totals = {}, {}
    current, after_call = "?", False
    for line in text.splitlines():
        if line.startswith(("ob=", "cob=")):  # an object file, named at its first mention
            key, _, name = line.partition("=")[2].partition(" ")
            if name:
                objects[key] = name
            if line.startswith("ob="):
                current = objects.get(key, key)
        elif line.startswith("calls="):
            after_call = True
        elif line[:1] and (line[0].isdigit() or line[0] in "+-*"):  # a cost line
            if after_call:  # the inclusive cost of the call just named: the callee's, not ours
                after_call = False
                continue
            values = line.split()[1:]
            library = next((label for key, label in LIBRARIES if key in current), "other")
            row = totals.setdefault(library, [0] * len(EVENTS))
            for i, column in enumerate(columns):
                if column < len(values):
                    row[i] += int(values[column])
    return totals


def measure(producer, reader, calls, loops_dir):
    """{library: [events per call]} of `reader` on `producer`, its dump written in `loops_dir`."""
    dump = pathlib.Path(loops_dir) / f"{abs(hash((producer, reader)))}.out"
    subprocess.run(
        ["valgrind", "--tool=callgrind", "--cache-sim=yes", "--instr-atstart=no", "--collect-atstart=no",
         f"--callgrind-out-file={dump}", sys.executable, __file__, "--child", producer, reader, str(calls),
         loops_dir],
        check=True, capture_output=True, env=dict(os.environ, OPENBLAS_NUM_THREADS="1"))
    counted = next(dump.parent.glob(dump.name + ".*"))  # the dump counted_calls made
    return {lib: [v / calls for v in row] for lib, row in self_costs(counted).items()}


def main():
    if sys.argv[1:2] == ["--child"]:
        child(sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5])
        return
    calls = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
    from bench_common import build_loops, cpu_name

    loops_dir = tempfile.mkdtemp(prefix="cai-cache-footprint-")
    build_loops(pathlib.Path(loops_dir))
    print(f"{cpu_name()}; per call, {calls} calls; callgrind's cache simulation: "
          "instructions / I1 misses / D1 read misses / D1 write misses")
    for producer in producers():
        print(f"\n{producer}")
        rows = {reader: measure(producer, reader, calls, loops_dir) for reader in readers()}
        libraries = sorted({lib for row in rows.values() for lib in row})
        print(f"{'reader':<22}" + "".join(f"{lib:>24}" for lib in libraries + ["total"]))
        for reader, row in rows.items():
            total = [sum(row.get(lib, [0] * 4)[i] for lib in libraries) for i in range(4)]
            cells = [row.get(lib, [0] * 4) for lib in libraries] + [total]
            print(f"{reader:<22}" + "".join(f"{'/'.join(f'{v:.0f}' for v in cell):>24}" for cell in cells))


if __name__ == "__main__":
    main()
