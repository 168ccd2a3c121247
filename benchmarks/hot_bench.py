"""cai.from_object's hand-matched entry (python/src/entry/from_object.rs) next to the same
import body behind PyO3's argument handling (`cai._native._from_object_reference`, the entry it
replaced), on a torch CPU tensor, a numpy array and a CuPy-style CAI dict, called as users write
it: `cai.from_object(t, sync=False, allow_host=True, pointer_check=cai.POINTER_CHECK_NEVER)`,
and with the same arguments by position. One interleaved run (bench_common.py's timing: best of
ROUNDS rounds of NUMBER calls, ns per call); with --instructions, instructions per call counted
by callgrind in a C loop, less the empty loop. The reference is registered only in the test
suites' builds (python/Cargo.toml's test-oracle feature, which scripts/python-env.sh turns on).

    OPENBLAS_NUM_THREADS=1 target/venv/bin/python benchmarks/hot_bench.py [--instructions]
"""


import bench_common
from bench_common import SHAPE, run_table

bench_common.quiet()

import numpy  # noqa: E402

import cai  # noqa: E402
from cai import _native  # noqa: E402
from framework_dicts import PRODUCERS  # noqa: E402

NEVER = cai.POINTER_CHECK_NEVER
if not hasattr(_native, "_from_object_reference"):
    raise SystemExit("hot_bench.py: this build of cai has no _native._from_object_reference; build it with "
                     "the test-oracle feature: MATURIN_PEP517_ARGS=\"--features test-oracle\" pip install ./python")


def arguments():
    out = {}
    try:
        import torch

        out["torch CPU tensor"] = torch.zeros(SHAPE, dtype=torch.float32)
    except ImportError:
        print("(torch is not installed: no torch row)")
    out["numpy array"] = numpy.zeros(SHAPE, dtype=numpy.float32)
    out["CuPy dict"] = PRODUCERS["CuPy"][0]
    return out


def cells():
    entries = {"from_object": cai.from_object, "PyO3 entry (before)": _native._from_object_reference}
    for argument, x in arguments().items():
        for name, entry in entries.items():
            yield (argument, f"{name}, keywords",
                   lambda x=x, f=entry: f(x, sync=False, allow_host=True, pointer_check=NEVER))
            yield (argument, f"{name}, positions",
                   lambda x=x, f=entry: f(x, None, False, False, NEVER, True))


def main():
    run_table(cells, __file__, 30)


if __name__ == "__main__":
    main()
