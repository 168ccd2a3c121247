"""GPU benchmark (part of scripts/gpu-check.sh): libcai's import next to the frameworks' own
consumers on the same objects, and what a pending 10 ms kernel costs each of them.

Per-call host cost (best of 7 runs of N calls, the rows of a table interleaved: each run times
every row once, so that a machine slowing down mid-table slows every row alike):
cai.from_object with its pointer query and no sync; stream-ordered and blocking sync;
cupy.asarray, torch.as_tensor, numba.cuda.as_cuda_array and cuda.core's StridedMemoryView on
the same CuPy array. The same for a torch CUDA tensor
(read through torch's DLPack exchange table) next to torch.from_dlpack, cupy.from_dlpack and
StridedMemoryView. Then, with a 10 ms kernel pending on the producer's stream: how long each
import takes to return. Last, benchmarks/ipc_bench.py's rows: a torch CUDA tensor shared with
another process by cai.ipc_export/ipc_open and by torch.multiprocessing's reduce and rebuild.

    python3 benchmarks/gpu_bench.py   (with the cai package installed; see scripts/gpu-check.sh)
"""

import sys
import time
import timeit

import cupy

import cai

SPIN = r"""
extern "C" __global__ void spin(long long cycles) {
  long long start = clock64();
  while (clock64() - start < cycles) {}
}
"""


class Exposed:
    def __init__(self, desc, keep):
        self.__cuda_array_interface__ = desc
        self.keep = keep


def per_call_us(rows, number=2000, repeat=7):
    """[(name, function)] -> [(name, best us per call)], the rows timed in turn in each run."""
    best = [float("inf")] * len(rows)
    for _ in range(repeat):
        for i, (_, function) in enumerate(rows):
            best[i] = min(best[i], timeit.timeit(function, number=number))
    return [(name, seconds / number * 1e6) for (name, _), seconds in zip(rows, best)]


def print_rows(rows):
    base = rows[0][1]
    for name, us in rows:
        print(f"  {name:44s} {us:8.2f} us   {us / base:6.2f}x libcai")


def peers(x):
    out = {"cupy.asarray": lambda: cupy.asarray(x)}
    try:
        import torch

        out["torch.as_tensor"] = lambda: torch.as_tensor(x, device="cuda")
    except ImportError:
        pass
    try:
        from numba import cuda

        out["numba.cuda.as_cuda_array"] = lambda: cuda.as_cuda_array(x)
    except ImportError:
        pass
    try:
        from cuda.core.utils import StridedMemoryView  # cuda.core 1.x (0.x: cuda.core.experimental.utils)

        out["cuda.core StridedMemoryView"] = lambda: StridedMemoryView.from_any_interface(x, stream_ptr=-1)
    except ImportError:
        pass
    return out


def torch_rows():
    try:
        import torch
    except ImportError:
        print("\n(no torch: its rows are left out)")
        return
    t = torch.zeros((1024, 1024), dtype=torch.float32, device="cuda")
    consumer = torch.cuda.Stream()
    print(f"\nper-call host cost on a torch {torch.__version__} CUDA tensor (us)")
    rows = [("cai.from_object, pointer query, no sync", lambda: cai.from_object(t, sync=False)),
            ("cai.from_object, no pointer query, no sync",
             lambda: cai.from_object(t, sync=False, pointer_check=cai.POINTER_CHECK_NEVER)),
            ("cai.from_object, stream-ordered sync", lambda: cai.from_object(t, stream=consumer)),
            ("  the same, the stream given as an int", lambda: cai.from_object(t, stream=consumer.cuda_stream)),
            ("torch.from_dlpack", lambda: torch.from_dlpack(t)),
            ("cupy.from_dlpack", lambda: cupy.from_dlpack(t))]
    try:
        from cuda.core.utils import StridedMemoryView
    except ImportError:
        StridedMemoryView = None
    if hasattr(StridedMemoryView, "from_dlpack"):
        rows.append(("cuda.core StridedMemoryView.from_dlpack",
                     lambda: StridedMemoryView.from_dlpack(t, stream_ptr=-1)))
    print_rows(per_call_us(rows))


def main():
    device = cupy.cuda.Device()
    props = cupy.cuda.runtime.getDeviceProperties(device.id)
    print(f"device: {props['name'].decode()}, libcai {cai.__version__}")
    x = cupy.zeros((1024, 1024), dtype=cupy.float32)
    producer, consumer = cupy.cuda.Stream(non_blocking=True), cupy.cuda.Stream(non_blocking=True)
    with producer:
        on_producer = Exposed(x.__cuda_array_interface__, x)

    print("\nper-call host cost, nothing pending (us)")
    rows = [("cai.from_object, pointer query, no sync", lambda: cai.from_object(x, sync=False)),
            ("cai.from_object, stream-ordered sync", lambda: cai.from_object(on_producer, stream=consumer)),
            ("cai.from_object, blocking sync", lambda: cai.from_object(on_producer))]
    print_rows(per_call_us(rows + list(peers(x).items())))

    torch_rows()

    kernel = cupy.RawKernel(SPIN, "spin")
    cycles = cupy.int64(device.attributes["ClockRate"] * 10)  # about 10 ms

    def pending(import_function):
        device.synchronize()
        with producer:
            kernel((1,), (1,), (cycles,))
        start = time.perf_counter()
        import_function()
        took = time.perf_counter() - start
        device.synchronize()
        return took * 1e3

    print("\nreturn time with a 10 ms kernel pending on the producer stream (ms)")
    for name, f in [("cai stream-ordered (consumer stream given)", lambda: cai.from_object(on_producer, stream=consumer)),
                    ("cai blocking", lambda: cai.from_object(on_producer)),
                    ("cupy.asarray (syncs as CuPy does)", lambda: cupy.asarray(on_producer))]:
        print(f"  {name:44s} {min(pending(f) for _ in range(5)):8.3f} ms")

    # Arrays across processes: cai.ipc_export/ipc_open next to torch.multiprocessing's
    # reduce_tensor and rebuild (benchmarks/ipc_bench.py, beside this file).
    import ipc_bench

    ipc_bench.main()
    return 0


if __name__ == "__main__":
    sys.exit(main())
