"""Imports inside CUDA graph capture (`torch.cuda.graph`) on a real GPU: docs/conformance.md rows
91 and 92, docs/policies.md. Each import inside the capture either needs nothing (the capturing
stream as the consumer's), is ordered inside the capture (both streams in it), or is refused
with CAI_ERROR_STREAM_CAPTURING leaving the capture valid; the graph then ends, and replayed
with new inputs gives the right results. Run by scripts/gpu-check.sh."""

import pytest

import cai

N = 1 << 16


def _dict_on(tensor, stream):
    """A v3 CAI dict of a float32 CUDA tensor, its work on `stream` (a CUstream int)."""
    return {"shape": tuple(tensor.shape), "typestr": "<f4", "data": (tensor.data_ptr(), False), "version": 3,
            "stream": stream}


def test_torch_and_cupy_arrays_imported_inside_torch_cuda_graph_capture_replay_correctly(cupy, torch):
    static_in = torch.zeros(N, device="cuda")
    doubled = torch.zeros(N, device="cuda")
    forked = torch.zeros(N, device="cuda")
    joined = torch.zeros(N, device="cuda")
    tripled = cupy.zeros(N, dtype=cupy.float32)
    outside = torch.ones(N, device="cuda")  # made before the capture, on torch's default stream
    side, elsewhere = torch.cuda.Stream(), torch.cuda.Stream()

    # Warm-up before capture, as torch asks: CuPy's kernel compiled, torch's kernels loaded.
    warm = torch.cuda.Stream()
    warm.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(warm):
        doubled.copy_(static_in * 2)
        with cupy.cuda.ExternalStream(warm.cuda_stream):
            cupy.multiply(cupy.asarray(static_in), 3, out=tripled)
    torch.cuda.synchronize()

    graph = torch.cuda.CUDAGraph()
    refusals = []
    with torch.cuda.graph(graph):
        capturing = torch.cuda.current_stream()
        handle = capturing.cuda_stream

        # torch's tensor, its current (capturing) stream as the consumer's: nothing to sync.
        a = cai.from_object(static_in, stream=handle)
        doubled.copy_(torch.from_dlpack(a) * 2)

        # CuPy on the capturing stream: its dict names that stream, the same as the consumer's.
        with cupy.cuda.ExternalStream(handle):
            x = cupy.asarray(static_in)
            b = cai.from_object(x, stream=handle)
            cupy.multiply(cupy.from_dlpack(b), 3, out=tripled)

        # A stream forked into the capture works there; the import orders it before the
        # capturing stream inside the capture, which is also its join: without it the capture's
        # end would fail as unjoined.
        side.wait_stream(capturing)
        with torch.cuda.stream(side):
            forked.copy_(static_in + 1)
        c = cai.from_object(_dict_on(forked, side.cuda_stream), stream=handle)
        joined.copy_(torch.from_dlpack(c) * 10)

        # Refused, the capture left valid: a producer stream outside the capture, and the legacy
        # stream (CuPy's default outside an ExternalStream) while the capture runs.
        for producer in (elsewhere.cuda_stream, 1):
            with pytest.raises(cai.CaiError) as refused:
                cai.from_object(_dict_on(outside, producer), stream=handle)
            refusals.append(refused.value)
        with pytest.raises(cai.CaiError) as refused:
            cai.from_object(cupy.asarray(outside))  # no consumer stream: a host wait on stream 1
        refusals.append(refused.value)
    for refusal in refusals:
        assert refusal.status == "CAI_ERROR_STREAM_CAPTURING", refusal
        assert "the capture is left as it was" in str(refusal), refusal

    for value in (1.0, 5.0):
        static_in.fill_(value)
        graph.replay()
        torch.cuda.synchronize()
        assert bool((doubled == 2 * value).all())
        assert bool((tripled == 3 * value).all())
        assert bool((forked == value + 1).all())
        assert bool((joined == 10 * (value + 1)).all())
