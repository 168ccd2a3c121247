"""The workload the release wheel's profile-guided build is trained on (scripts/build-wheel.sh).

Each argument users pass, taken the ways users take it: `cai.from_object` on numpy arrays,
`cai.Array`s, the CAI dicts frameworks export, torch, paddle and jax tensors (those installed)
and an offered type; the C API's view and owning import in a C loop (benchmarks/extension/
loops.c); and the offered type's and `cai.Array`'s exports read by numpy, torch and tvm-ffi.
The compiler lays out and weights the extension's code by the counts this run leaves; what
no call here reaches (refusals, rare layouts) is laid out as cold code, never left out.

Run by scripts/build-wheel.sh with the instrumented package first on sys.path; it times
nothing and checks only that it imported that package (CAI_PGO_PACKAGE).
"""

import os
import pathlib
import sys
import tempfile

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import bench_common  # noqa: E402
from bench_common import build_loops, offer_ext  # noqa: E402

bench_common.quiet()

import numpy as np  # noqa: E402

import cai  # noqa: E402
from framework_dicts import PRODUCERS  # noqa: E402

CALLS = 20_000
NEVER = cai.POINTER_CHECK_NEVER


def optional_tensors():
    """The framework tensors of the installed frameworks (each optional), 512 x 256 float32."""
    tensors = {}
    try:
        import torch

        tensors["torch"] = torch.zeros((512, 256), dtype=torch.float32)
    except ImportError:
        pass
    try:
        import paddle

        tensors["paddle"] = paddle.zeros([512, 256], dtype="float32")
    except ImportError:
        pass
    try:
        import jax.numpy as jnp

        tensors["jax"] = jnp.zeros((512, 256), dtype=jnp.float32)
    except ImportError:
        pass
    return tensors


def python_reads(arguments):
    """`cai.from_object` as a kernel launcher calls it, keywords and positions."""
    f = cai.from_object
    for argument, allow_host in arguments:
        for _ in range(CALLS):
            f(argument, sync=False, allow_host=allow_host, pointer_check=NEVER)
        for _ in range(CALLS // 4):
            f(argument, None, False, False, NEVER, allow_host)


def c_reads(loops, arguments):
    """The C API's borrowed view and owning import (with release), where each takes the argument:
    a view refuses what a borrowed struct cannot hold (a mask), found by one call, so that no
    refusal is trained as the common path."""
    for argument, allow_host in arguments:
        for loop in (loops.view_loop, loops.cai_loop):
            try:
                loop(argument, 1, allow_host, cai.SYNC_NONE)
            except cai.CaiError:
                continue
            loop(argument, CALLS, allow_host, cai.SYNC_NONE)


def peer_reads(exporters):
    """The exports of libcai's own types, read by the peers installed."""
    readers = [np.from_dlpack]
    try:
        import torch

        readers.append(torch.from_dlpack)
    except ImportError:
        pass
    try:
        import tvm_ffi

        readers.append(tvm_ffi.from_dlpack)
    except ImportError:
        pass
    for exporter in exporters:
        for read in readers:
            for _ in range(CALLS):
                read(exporter)


def main():
    expected = os.environ.get("CAI_PGO_PACKAGE")
    if expected and not cai.__file__.startswith(expected):
        sys.exit(f"pgo_train: imported cai from {cai.__file__}, not the instrumented build in {expected}")
    with tempfile.TemporaryDirectory(prefix="cai-pgo-train-") as loops_dir:
        build_loops(pathlib.Path(loops_dir))
        sys.path.insert(0, loops_dir)
        import cai_bench_loops as loops  # loaded: the file may go with its folder

    host = np.zeros((512, 256), dtype=np.float32)
    pixels = np.zeros((512, 256), dtype=np.uint8)
    offered = offer_ext()
    image = offered.Image(pixels.ctypes.data, 512, 256, host=True, base=pixels)
    device_image = offered.Image(0x10000, 512, 256, typestr="<f4", stream=0)
    arguments = [
        (host, True),
        (np.zeros(4096, dtype=np.uint8), True),
        (host[::2, 1:], True),
        (cai.from_object(host, allow_host=True), True),
        (image, True),
        (device_image, False),
    ]
    arguments += [(cuda, False) for cuda, _ in PRODUCERS.values()]
    arguments += [(tensor, True) for tensor in optional_tensors().values()]
    python_reads(arguments)
    c_reads(loops, arguments)
    peer_reads([image, cai.from_object(host, allow_host=True)])
    for _ in range(CALLS):
        device_image.__cuda_array_interface__
    print(f"pgo_train: {len(arguments)} arguments read from Python and C, {CALLS} calls each")


if __name__ == "__main__":
    main()
