"""Releasing after a stream on a real GPU (docs/conformance.md row 93, docs/policies.md "Releasing
after a stream"): a torch tensor read by cai.from_object, a slow kernel on a stream that reads it,
the cai.Array released with release(stream=s) and every Python reference dropped; torch's caching
allocator must not hand the tensor's memory to a new tensor before the kernel has ended. Run by
scripts/gpu-check.sh."""

import gc

import pytest

import cai

N = 1 << 20  # 4 MiB of float32: a block of its own in the caching allocator
CYCLES = 200_000_000  # torch.cuda._sleep: a few hundred milliseconds on any GPU


def _busy_reader(torch, tensor, stream):
    """Enqueues on `stream` a long sleep, then a kernel that reads `tensor`; returns its result."""
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        torch.cuda._sleep(CYCLES)
        return tensor * 2


def test_a_tensor_released_after_a_stream_is_not_reused_before_the_kernel_ends(torch):
    side = torch.cuda.Stream()

    # Control: dropped with no release after, the allocator reuses the block at once, so a
    # reuse check can tell the two apart (without it the test below would pass for nothing).
    control = torch.ones(N, device="cuda")
    control_ptr = control.data_ptr()
    read = _busy_reader(torch, control, side)
    del control
    gc.collect()
    again = torch.empty(N, device="cuda")
    reuses = again.data_ptr() == control_ptr
    side.synchronize()
    del again, read
    if not reuses:
        pytest.skip("torch's caching allocator did not reuse a freed block at once; nothing to compare")

    tensor = torch.ones(N, device="cuda")
    ptr = tensor.data_ptr()
    array = cai.from_object(tensor, stream=torch.cuda.current_stream().cuda_stream)
    read = _busy_reader(torch, tensor, side)
    array.release(stream=side.cuda_stream)
    del tensor, array
    gc.collect()
    cai.release_pending()  # a poll while the kernel runs: nothing is due yet

    fresh = torch.empty(N, device="cuda")
    assert fresh.data_ptr() != ptr, "the producer's memory was reused while the kernel still read it"
    assert not side.query(), "the kernel ended before the check; raise CYCLES"

    side.synchronize()
    assert cai.release_pending() == 0, "due once the stream passed the event"
    gc.collect()
    after = torch.empty(N, device="cuda")
    assert after.data_ptr() == ptr, "released once the kernel ended: the block is free again"
    assert torch.equal(read, torch.full((N,), 2.0, device="cuda")), "the kernel read the tensor's values"


def test_a_release_after_a_capturing_stream_is_refused_and_the_array_kept(torch):
    static = torch.ones(N, device="cuda")
    array = cai.from_object(static)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        capturing = torch.cuda.current_stream().cuda_stream
        with pytest.raises(cai.CaiError, match="capturing a CUDA graph") as refused:
            array.release(stream=capturing)
        static.mul_(2)
    assert refused.value.status == "CAI_ERROR_STREAM_CAPTURING"
    graph.replay()
    torch.cuda.synchronize()
    assert array.__cuda_array_interface__["data"][0] == static.data_ptr(), "the Array still holds it"
    assert torch.equal(static, torch.full((N,), 2.0, device="cuda"))
