"""GPU benchmark for an A/B of two builds of the package (run by hand, not by gpu-check.sh):
`cai.from_object` of a CuPy array, 1024 x 1024 float32, with no sync, split into its parts:
CuPy's own `__cuda_array_interface__` property (which builds the dict at each access), the
import of that dict already built, and each with and without the pointer check; cuda.core's
`StridedMemoryView.from_any_interface` on the same array as a peer that neither build changes.
Best of 7 runs of 5,000 calls, in us. Install each build in its own folder and alternate:

    for i in 1 2 3; do for v in old new; do PYTHONPATH=/tmp/$v python3 benchmarks/gpu_cupy_rows.py $v; done; done
"""

import sys
import timeit

import cupy

import cai

x = cupy.zeros((1024, 1024), dtype=cupy.float32)
desc = x.__cuda_array_interface__
never = cai.POINTER_CHECK_NEVER
rows = {"object": lambda: cai.from_object(x, sync=False),
        "object, no pointer check": lambda: cai.from_object(x, sync=False, pointer_check=never),
        "property": lambda: x.__cuda_array_interface__,
        "dict": lambda: cai.from_object(desc, sync=False),
        "dict, no pointer check": lambda: cai.from_object(desc, sync=False, pointer_check=never)}
try:
    from cuda.core.utils import StridedMemoryView  # cuda.core 1.x (0.x: cuda.core.experimental.utils)

    rows["cuda.core"] = lambda: StridedMemoryView.from_any_interface(x, stream_ptr=-1)
except ImportError:
    pass
for call in rows.values():
    call()
print(sys.argv[1] if len(sys.argv) > 1 else "", "  ".join(
    f"{name}: {min(timeit.repeat(call, number=5000, repeat=7)) / 5000 * 1e6:.3f}" for name, call in rows.items()))
cupy.cuda.runtime.deviceSynchronize()
