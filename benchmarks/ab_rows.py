"""A/B of two builds of the package, in alternating processes: each process times
`cai.from_object` and its peer on a torch tensor (`tvm_ffi.from_dlpack`), a numpy array
(`numpy.from_dlpack`), a cai.Array (`tvm_ffi.from_dlpack`), a jax CPU array (the faster of
`numpy.from_dlpack` and `tvm_ffi.from_dlpack`) and a producer from before DLPack 1.0 (a Python
`__dlpack__(self, stream=None)` over a numpy array; `numpy.from_dlpack`), best of 9 rounds of
20,000 calls, the peers measured in the same process. The package imported is the first on
`sys.path`: name a copy of the other build's `cai` package directory's parent in PYTHONPATH.

    for i in 1 2 3; do for p in /tmp/a /tmp/b; do
      PYTHONPATH=$p OPENBLAS_NUM_THREADS=1 target/venv/bin/python benchmarks/ab_rows.py $p
    done; done
"""

import sys
import timeit

import jax.numpy as jnp
import numpy
import torch
import tvm_ffi

import cai

tensor = torch.zeros((512, 256), dtype=torch.float32)
array = numpy.zeros((512, 256), dtype=numpy.float32)
cai_array = cai.from_object(array, sync=False, allow_host=True)
jax_array = jnp.zeros((512, 256), dtype=jnp.float32)


class BeforeDLPack1:
    """A producer from before DLPack 1.0: `__dlpack__` takes `stream` alone."""

    def __dlpack_device__(self):
        return array.__dlpack_device__()

    def __dlpack__(self, stream=None):
        return array.__dlpack__(stream=stream)


old_producer = BeforeDLPack1()
never = cai.POINTER_CHECK_NEVER
take = cai.from_object
rows = {
    "cai torch": lambda: take(tensor, sync=False, allow_host=True, pointer_check=never),
    "tvm torch": lambda: tvm_ffi.from_dlpack(tensor),
    "cai numpy": lambda: take(array, sync=False, allow_host=True, pointer_check=never),
    "numpy numpy": lambda: numpy.from_dlpack(array),
    "cai cai.Array": lambda: take(cai_array, sync=False, allow_host=True, pointer_check=never),
    "tvm cai.Array": lambda: tvm_ffi.from_dlpack(cai_array),
    "cai jax": lambda: take(jax_array, sync=False, allow_host=True, pointer_check=never),
    "numpy jax": lambda: numpy.from_dlpack(jax_array),
    "tvm jax": lambda: tvm_ffi.from_dlpack(jax_array),
    "cai pre-1.0": lambda: take(old_producer, sync=False, allow_host=True, pointer_check=never),
    "numpy pre-1.0": lambda: numpy.from_dlpack(old_producer),
}
for call in rows.values():
    for _ in range(2000):
        call()
best = dict.fromkeys(rows, float("inf"))
for _ in range(9):
    for name, call in rows.items():
        best[name] = min(best[name], timeit.timeit(call, number=20000) / 20000 * 1e9)
best["fastest jax"] = min(best["numpy jax"], best["tvm jax"])
ratio = {arg: best[f"cai {arg}"] / best[f"{peer} {arg}"]
         for arg, peer in (("torch", "tvm"), ("numpy", "numpy"), ("cai.Array", "tvm"), ("jax", "fastest"),
                           ("pre-1.0", "numpy"))}
print(sys.argv[1] if len(sys.argv) > 1 else cai.__file__,
      " ".join(f"{name}={ns:.0f}ns" for name, ns in best.items()), "|",
      " ".join(f"{arg} {r:.2f}x" for arg, r in ratio.items()))
