"""What the spawned processes of python/tests/test_ipc.py run: a module of its own, so that a
child imports neither conftest.py (which would build the fake driver again) nor the tests.
The children find the fake CUDA driver by the CAI_CUDA_DRIVER their parent's environment
gives them, as libcai does."""

import ctypes
import os

import cai


def _current_device():
    """The fake driver's device 0 made this thread's current context, as conftest.py makes it
    in the parent (the fake's contexts are per thread)."""
    ctypes.CDLL(os.environ["CAI_CUDA_DRIVER"]).fake_cuda_set_device(0)


def elements(array):
    """The bytes of each element of `array` (a 1-d or 2-d cai.Array in memory this process
    maps), read at its data pointer with its strides, in row-major order."""
    shape = array.shape if array.ndim == 2 else (1,) + array.shape
    strides = array.strides if array.ndim == 2 else (0,) + array.strides
    out = []
    for i in range(shape[0]):
        for j in range(shape[1]):
            out.append(ctypes.string_at(array.data_ptr + i * strides[0] + j * strides[1], array.itemsize))
    return out


def open_read_write(descriptor, written):
    """Opens `descriptor` here: what the parent sees of the Array (its layout, its elements'
    bytes, its offset inside the allocation the driver reports), then `written` stored at its
    first byte, for the parent to read."""
    _current_device()
    array = cai.ipc_open(descriptor)
    checked = cai.from_object(array, pointer_check=cai.POINTER_CHECK_ALWAYS, sync=False).pointer_info
    seen = {
        "shape": array.shape, "strides": array.strides, "typestr": array.typestr, "readonly": array.readonly,
        "elements": elements(array), "pid": os.getpid(), "address": array.data_ptr,
        "offset": array.data_ptr - checked["allocation_base"], "allocation_size": checked["allocation_size"],
    }
    ctypes.memmove(array.data_ptr, written, len(written))
    array.release()
    return seen


def read_array(array):
    """A cai.Array that arrived pickled: its type, pid and elements' bytes."""
    _current_device()
    return type(array).__name__, os.getpid(), elements(array)


def read_from_queue(inbox, outbox):
    """A `multiprocessing` child: reads the cai.Array put on `inbox`, answers on `outbox`."""
    try:
        outbox.put(read_array(inbox.get(timeout=60)))
    except BaseException as error:  # reported to the parent
        outbox.put(("raised", repr(error)))


def open_refused(descriptor):
    """What `cai.ipc_open(descriptor)` raises here: (type name, status, message)."""
    _current_device()
    try:
        cai.ipc_open(descriptor)
    except cai.CaiError as error:
        return type(error).__name__, error.status, str(error)
    return None


def open_ordered(descriptor, how):
    """Opens `descriptor` (`how`: "blocking", the default host wait; "stream", ordered on a
    stream of this process's, then that stream synchronized; "none", `sync=False`): when the
    open returned and, for "stream", when the stream's synchronize did (time.monotonic, the
    fake driver's clock, which every process on the machine shares)."""
    import time

    _current_device()
    if how == "stream":
        lib = ctypes.CDLL(os.environ["CAI_CUDA_DRIVER"])
        lib.fake_cuda_stream_create.restype = ctypes.c_uint64
        stream = lib.fake_cuda_stream_create(0)
        array = cai.ipc_open(descriptor, stream=stream)
        returned = time.monotonic()
        assert lib.cuStreamSynchronize(ctypes.c_void_p(stream)) == 0
        return returned, time.monotonic()
    array = cai.ipc_open(descriptor, sync=False if how == "none" else None)
    returned = time.monotonic()
    array.release()
    return returned, None
