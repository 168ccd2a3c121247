"""Round trips between libcai and the GPU frameworks, on a real GPU (scripts/gpu-check.sh)."""

import ctypes
import gc

import pytest

import cai

SPIN_SOURCE = r"""
extern "C" __global__ void spin_fill(float* out, int n, float value, long long cycles) {
  long long start = clock64();
  while (clock64() - start < cycles) {}
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = value;
}
"""


class Exposed:
    """Holds a CAI dict (taken inside a stream context) and the array it describes."""

    def __init__(self, desc, keep):
        self.__cuda_array_interface__ = desc
        self.keep = keep


def test_cupy_into_libcai_and_back(cupy):
    x = cupy.arange(12, dtype=cupy.float32).reshape(3, 4)
    a = cai.from_object(x)
    assert a.pointer_info["memory_type"] == 2 and a.pointer_info["device_ordinal"] == 0
    assert cai.lib.cai_validate(a, None) == 0
    y = cupy.asarray(a)
    assert y.data.ptr == x.data.ptr and bool((y == x).all())


VIEWS = {"every other row": lambda x: x[::2], "reversed rows": lambda x: x[::-1], "transposed": lambda x: x.T,
         "reversed every other column": lambda x: x[:, ::-2]}


@pytest.mark.parametrize("view", VIEWS)
def test_cupy_strided_views_round_trip(cupy, view):
    v = VIEWS[view](cupy.arange(24, dtype=cupy.float64).reshape(4, 6))
    a = cai.from_object(v)
    assert a.strides == v.strides
    assert bool(cupy.array_equal(cupy.asarray(a), v))


def test_cupy_zero_size_never_queries_the_pointer(cupy):
    a = cai.from_object(cupy.empty((0, 3), dtype=cupy.float32))
    assert a.pointer_info is None and a.__cuda_array_interface__["data"][0] == 0
    assert cupy.asarray(a).shape == (0, 3)


def test_cupy_out_of_bounds_descriptor_is_refused(cupy):
    x = cupy.zeros(16, dtype=cupy.float32)
    desc = dict(x.__cuda_array_interface__, shape=(17,))
    with pytest.raises(cai.CaiError, match="OUT_OF_BOUNDS"):
        cai.from_object(Exposed(desc, x))


def test_torch_round_trip():
    torch = pytest.importorskip("torch")
    t = torch.arange(10, dtype=torch.float32, device="cuda")
    a = cai.from_object(t)
    u = torch.as_tensor(a, device="cuda")
    assert u.data_ptr() == t.data_ptr() and torch.equal(u, t)


def test_numba_round_trip():
    cuda = pytest.importorskip("numba.cuda")
    d = cuda.to_device(list(range(8)))
    a = cai.from_object(d)
    back = cuda.as_cuda_array(a)
    assert back.__cuda_array_interface__["data"][0] == d.__cuda_array_interface__["data"][0]
    assert list(back.copy_to_host()) == list(range(8))


def test_jax_exports_read_only():
    jnp = pytest.importorskip("jax.numpy")
    x = jnp.arange(8, dtype=jnp.float32)
    if not hasattr(x, "__cuda_array_interface__"):
        pytest.skip("this jax build does not expose __cuda_array_interface__")
    a = cai.from_object(x)
    assert a.readonly
    with pytest.raises(cai.CaiError, match="READONLY"):
        cai.from_object(x, writable=True)


def test_cuda_core_strided_memory_view(cupy):
    utils = pytest.importorskip("cuda.core.experimental.utils")
    x = cupy.arange(12, dtype=cupy.int32).reshape(3, 4)[:, ::2]
    view = utils.StridedMemoryView(cai.from_object(x), stream_ptr=-1)
    assert view.ptr == x.data.ptr and tuple(view.shape) == x.shape


def test_c_made_array_consumed_by_the_frameworks(cupy, producer_lib):
    x = cupy.arange(16, dtype=cupy.float32)
    before = producer_lib.producer_release_count()
    raw = cai.CaiArray()
    assert producer_lib.producer_make(ctypes.byref(raw), 16, x.data.ptr) == 0
    a = cai.Array.from_c(ctypes.byref(raw))
    assert bool(cupy.array_equal(cupy.asarray(a), x))
    torch = pytest.importorskip("torch")
    assert torch.equal(torch.as_tensor(a, device="cuda"), torch.arange(16, dtype=torch.float32, device="cuda"))
    cuda = pytest.importorskip("numba.cuda")
    assert list(cuda.as_cuda_array(a).copy_to_host()) == list(range(16))
    del a
    gc.collect()
    assert producer_lib.producer_release_count() == before + 1


def _slow_fill(cupy, out, value, stream):
    kernel = cupy.RawKernel(SPIN_SOURCE, "spin_fill")
    cycles = cupy.cuda.Device().attributes["ClockRate"] * 20  # about 20 ms
    with stream:
        kernel(((out.size + 255) // 256,), (256,), (out, cupy.int32(out.size), cupy.float32(value), cupy.int64(cycles)))
        return out.__cuda_array_interface__  # CuPy exports the current stream


def test_stream_ordered_import_waits_for_a_slow_producer(cupy):
    producer, consumer = cupy.cuda.Stream(non_blocking=True), cupy.cuda.Stream(non_blocking=True)
    out = cupy.zeros(1 << 20, dtype=cupy.float32)
    producer.synchronize()

    desc = _slow_fill(cupy, out, 1.0, producer)
    assert desc["stream"] == producer.ptr
    cai.from_object(Exposed(desc, out), stream=consumer, sync=False)
    with consumer:
        racing = out.copy()
    consumer.synchronize()
    producer.synchronize()
    assert not bool((racing == 1.0).all()), "control: without sync the copy overtakes the kernel"

    out.fill(0)
    cupy.cuda.Device().synchronize()
    desc = _slow_fill(cupy, out, 2.0, producer)
    cai.from_object(Exposed(desc, out), stream=consumer)
    with consumer:
        ordered = out.copy()
    consumer.synchronize()
    assert bool((ordered == 2.0).all())


def test_an_offered_device_image_is_read_by_cupy_and_torch_after_its_producer_stream(cupy, offer_ext):
    """A type offered by cai_python_offer over CuPy memory that a slow kernel is still filling
    on a non-default stream (the fill reports that stream): CuPy and torch take it by DLPack on
    their own streams, and the offer's __dlpack__ orders the producer's stream before theirs
    with an event, so a copy on the consumer's stream sees the kernel's values (not run on a GPU yet:
docs/gpu-results.md). Its v3 dict
    names the producer's stream, and libcai reads it through the C-level table."""
    producer, consumer = cupy.cuda.Stream(non_blocking=True), cupy.cuda.Stream(non_blocking=True)
    out = cupy.zeros(1 << 20, dtype=cupy.float32)
    cupy.cuda.Device().synchronize()
    _slow_fill(cupy, out, 3.0, producer)
    image = offer_ext.Image(out.data.ptr, 1024, 1024, typestr="<f4", stream=producer.ptr, base=out)
    assert image.__cuda_array_interface__["stream"] == producer.ptr
    with consumer:
        taken = cupy.from_dlpack(image)
        copied = taken.copy()
    consumer.synchronize()
    assert bool((copied == 3.0).all())
    assert cai.from_object(image, sync=False).shape == (1024, 1024)

    torch = pytest.importorskip("torch")
    out.fill(0)
    cupy.cuda.Device().synchronize()
    _slow_fill(cupy, out, 4.0, producer)
    # torch on its default stream (the legacy one): its exchange-table read of the offered type
    # orders the legacy default stream after the producer's.
    cloned = torch.from_dlpack(image).clone()
    torch.cuda.synchronize()
    assert bool((cloned == 4.0).all())
