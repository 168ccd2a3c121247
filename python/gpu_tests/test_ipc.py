"""Arrays across processes on a real GPU (docs/python.md, "Sharing arrays between processes"):
a torch tensor and a CuPy array, each written by a kernel still pending behind a long sleep
on the exporter's stream, exported with `cai.ipc_export(x, stream=...)` at once and opened in
a spawned process on the same device by `cai.ipc_open(descriptor, stream=...)`; the importer's
kernel must see the write, ordered after the exporter's work by the descriptor's IPC event
alone (the exporter never waits). Run by scripts/gpu-check.sh; skipped where no CUDA device
is seen."""

import concurrent.futures
import multiprocessing
import os

import pytest

import cai
import ipc_gpu_children

N = 1 << 20  # 4 MiB of float32
CYCLES = 500_000_000  # torch.cuda._sleep / the spin kernel: a few hundred milliseconds on any GPU
SPIN = r"""
extern "C" __global__ void spin(long long cycles) {
  long long start = clock64();
  while (clock64() - start < cycles) {}
}
"""


@pytest.fixture(scope="module")
def spawned():
    with concurrent.futures.ProcessPoolExecutor(max_workers=1,
                                                mp_context=multiprocessing.get_context("spawn")) as pool:
        yield pool


@pytest.fixture(scope="module")
def cuda_torch():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch sees no CUDA device")
    return torch


@pytest.fixture(scope="module")
def cuda_cupy():
    cupy = pytest.importorskip("cupy")
    try:
        if cupy.cuda.runtime.getDeviceCount() == 0:
            pytest.skip("CuPy sees no CUDA device")
    except cupy.cuda.runtime.CUDARuntimeError as error:
        pytest.skip(f"CuPy sees no CUDA device ({error})")
    return cupy


def test_a_torch_tensor_opened_in_another_process_is_read_after_the_exporters_pending_write(cuda_torch, spawned):
    torch = cuda_torch
    spawned.submit(os.getpid).result(timeout=120)  # the child is up: its start is not timed against the sleep
    tensor = torch.zeros(N, device="cuda")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        torch.cuda._sleep(CYCLES)
        tensor.fill_(7.0)
    descriptor = cai.ipc_export(tensor, stream=side.cuda_stream)
    assert not side.query(), "the write ended before the export; raise CYCLES"

    pid, total, first = spawned.submit(ipc_gpu_children.torch_sum, descriptor).result(timeout=120)

    assert pid != os.getpid()
    assert (first, total) == (7.0, 7.0 * N), "the importer's kernel ran before the exporter's write"
    side.synchronize()  # the exporter keeps the tensor alive until the importer is done


def test_a_cupy_array_opened_in_another_process_is_read_after_the_exporters_pending_write(cuda_cupy, spawned):
    cupy = cuda_cupy
    spawned.submit(os.getpid).result(timeout=120)
    array = cupy.zeros(N, dtype=cupy.float32)
    spin = cupy.RawKernel(SPIN, "spin")
    stream = cupy.cuda.Stream(non_blocking=True)
    cupy.cuda.get_current_stream().synchronize()
    with stream:
        spin((1,), (1,), (cupy.int64(CYCLES),))
        array.fill(7.0)
    descriptor = cai.ipc_export(array, stream=stream.ptr)
    assert not stream.done, "the write ended before the export; raise CYCLES"

    pid, total, first = spawned.submit(ipc_gpu_children.cupy_sum, descriptor).result(timeout=120)

    assert pid != os.getpid()
    assert (first, total) == (7.0, 7.0 * N), "the importer's kernel ran before the exporter's write"
    stream.synchronize()


def test_a_view_into_a_torch_allocation_arrives_at_its_offset(cuda_torch, spawned):
    torch = cuda_torch
    base = torch.arange(N, device="cuda", dtype=torch.float32)
    view = base[1000:1000 + 4096]  # inside the caching allocator's block: the offset travels
    torch.cuda.synchronize()
    pid, total, first = spawned.submit(ipc_gpu_children.torch_sum, cai.ipc_export(view)).result(timeout=120)
    assert first == 1000.0 and total == float(sum(range(1000, 1000 + 4096)))
