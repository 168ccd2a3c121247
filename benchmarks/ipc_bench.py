"""What sharing an array with another process costs from Python: `cai.ipc_export` here and
`cai.ipc_open` (then `release()`, which closes the handle) in a spawned process, which is the
only place a descriptor opens. Per call, best of 7 runs of N calls, the rows of each side
interleaved as in benchmarks/gpu_bench.py.

On the fake CUDA driver (`CAI_CUDA_DRIVER=libfake_cuda.so`, no GPU): libcai's own cost, the
fake's calls (shared memory mapped and unmapped by the open and the close) included. With a
CUDA device and torch: a torch CUDA tensor's `cai.ipc_export`/`cai.ipc_open` next to
torch.multiprocessing's `reduce_tensor` and the rebuild it returns (what a tensor put on a
torch.multiprocessing queue costs each side), run from benchmarks/gpu_bench.py too.

    python3 benchmarks/ipc_bench.py   (the cai package installed; CAI_CUDA_DRIVER for the fake)
"""

import concurrent.futures
import ctypes
import multiprocessing
import os
import sys
import timeit


def best_us(rows, number, repeat=7):
    """[(name, function)] -> [(name, best us per call)], each run timing every row once."""
    best = [float("inf")] * len(rows)
    for _ in range(repeat):
        for i, (_, function) in enumerate(rows):
            best[i] = min(best[i], timeit.timeit(function, number=number))
    return [(name, seconds / number * 1e6) for (name, _), seconds in zip(rows, best)]


def fake_device():
    """The fake driver's device 0 current on this thread, if the fake is the driver."""
    driver = os.environ.get("CAI_CUDA_DRIVER", "")
    if "fake_cuda" in os.path.basename(driver):
        ctypes.CDLL(driver).fake_cuda_set_device(0)
        return ctypes.CDLL(driver)
    return None


def open_rows(descriptor, torch_args=None, number=100):
    """The importer's side, in the spawned process: open and close `descriptor`, and (with
    `torch_args`, what reduce_tensor returned) torch's rebuild and its drop. 7 x 100 opens: the
    fake driver keeps each mapping it made as an allocation of its own, 1,024 at most."""
    import cai

    fake_device()

    def cai_open():
        cai.ipc_open(descriptor).release()

    rows = [("cai.ipc_open + release", cai_open)]
    if torch_args is not None:
        rebuild, args = torch_args

        def torch_open():
            tensor = rebuild(*args)
            del tensor

        rows.append(("torch rebuild_cuda_tensor + drop", torch_open))
    return best_us(rows, number)


def print_rows(title, rows):
    print(title)
    for name, us in rows:
        print(f"  {name:44s} {us:9.2f} us")


def fake_rows(pool):
    import cai

    lib = fake_device()
    lib.fake_cuda_alloc.restype = ctypes.c_uint64
    lib.fake_cuda_alloc.argtypes = [ctypes.c_uint64, ctypes.c_uint, ctypes.c_int, ctypes.c_uint]
    base = lib.fake_cuda_alloc(1 << 20, 2, 0, 0)
    # On the legacy default stream (1), where cai.ipc_export records its event when given no
    # stream, so that the C call below makes the same driver calls.
    desc = {"shape": (512, 512), "typestr": "<f4", "data": (base, False), "version": 3, "stream": 1}
    array = cai.from_object(desc)
    from cai.ctypes_api import CaiError, CaiIpcDescriptor

    out, error = CaiIpcDescriptor(), CaiError()
    c_export = cai.lib.cai_ipc_export
    print(f"libcai {cai.__version__} on the fake CUDA driver ({os.environ['CAI_CUDA_DRIVER']})")
    print_rows("exporter, per call (us)", best_us([
        ("cai.ipc_export of a cai.Array", lambda: cai.ipc_export(array)),
        ("cai.ipc_export of a CAI dict", lambda: cai.ipc_export(desc)),
        ("  the C cai_ipc_export of its struct, ctypes", lambda: c_export(array, ctypes.byref(out), ctypes.byref(error))),
        ("  for scale: cai.from_object of the dict", lambda: cai.from_object(desc)),
    ], number=500))
    print_rows("importer, another process, per call (us)", pool.submit(open_rows, cai.ipc_export(array)).result())


def torch_rows(pool):
    """The GPU rows (a CUDA device and torch): None where either is missing."""
    try:
        import torch
        from torch.multiprocessing.reductions import reduce_tensor
    except ImportError:
        print("\n(no torch: the IPC rows against torch.multiprocessing are left out)")
        return
    if not torch.cuda.is_available():
        print("\n(no CUDA device: the IPC rows against torch.multiprocessing are left out)")
        return
    import cai

    tensor = torch.zeros((1024, 1024), dtype=torch.float32, device="cuda")
    stream = torch.cuda.current_stream().cuda_stream
    print(f"\nIPC of a torch {torch.__version__} CUDA tensor, exporter per call (us)")
    print_rows("", best_us([
        ("cai.ipc_export (event on the current stream)", lambda: cai.ipc_export(tensor, stream=stream)),
        ("torch reduce_tensor", lambda: reduce_tensor(tensor)),
    ], number=200))
    print_rows("importer, another process, per call (us)",
               pool.submit(open_rows, cai.ipc_export(tensor, stream=stream), reduce_tensor(tensor), 200).result())
    torch.cuda.synchronize()


def main():
    with concurrent.futures.ProcessPoolExecutor(max_workers=1,
                                                mp_context=multiprocessing.get_context("spawn")) as pool:
        if fake_device() is not None:
            fake_rows(pool)
        else:
            torch_rows(pool)
    return 0


if __name__ == "__main__":
    sys.exit(main())
