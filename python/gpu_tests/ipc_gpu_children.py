"""What the spawned processes of python/gpu_tests/test_ipc.py run (a module of its own, so
that a child imports no test module): each opens a descriptor on its framework's current
stream, ordered after the exporter's work by the descriptor's event, and reads the memory
with a kernel of that framework."""

import os


def torch_sum(descriptor):
    """(pid, sum in float64, first value) of the float32 array `descriptor` carries, read by a torch kernel
    on the current stream after `cai.ipc_open` ordered that stream after the exporter's work."""
    import torch

    import cai

    stream = torch.cuda.current_stream()
    array = cai.ipc_open(descriptor, stream=stream.cuda_stream)
    tensor = torch.from_dlpack(array)
    total, first = tensor.double().sum().item(), tensor[0].item()
    del tensor
    array.release()
    return os.getpid(), total, first


def cupy_sum(descriptor):
    """The same with a CuPy kernel on CuPy's current stream."""
    import cupy

    import cai

    stream = cupy.cuda.get_current_stream()
    array = cai.ipc_open(descriptor, stream=stream.ptr)
    view = cupy.asarray(array)
    total, first = float(view.sum(dtype=cupy.float64)), float(view[0])
    del view
    array.release()
    return os.getpid(), total, first
