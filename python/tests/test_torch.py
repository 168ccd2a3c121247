"""PyTorch as a real DLPack producer and consumer, on CPU tensors (kDLCPU host memory, taken with
allow_host=True). As a producer torch offers DLPack 1.3's C exchange table on its type, which
cai.from_object takes instead of calling __dlpack__; as a consumer torch.from_dlpack calls
cai.Array.__dlpack__ (torch reads no consumer-side table).

torch comes from python/test-requirements.txt; where it is not installed (the free-threaded leg
installs it not: no free-threaded wheel) these tests are skipped, and counted as skipped."""

import gc
import weakref

import numpy
import pytest

import cai

torch = pytest.importorskip("torch")
from torch.utils.dlpack import ReadOnlyTensorWrapper  # noqa: E402


def host(x, **options):
    return cai.from_object(x, allow_host=True, **options)


def assert_same_view(a, t):
    """`a` views what torch's own tensor `t` views: shape, byte strides, address, dtype, values."""
    assert a.shape == tuple(t.shape)
    assert a.strides == tuple(s * t.element_size() for s in t.stride())
    if t.numel():
        assert a.data_ptr == t.data_ptr()
    assert a.typestr == t.numpy().dtype.str
    assert not a.readonly
    assert numpy.array_equal(numpy.from_dlpack(a), t.numpy())


def test_a_torch_tensor_is_taken_through_its_exchange_table_real_torch(dlpack_calls):
    calls = dlpack_calls(torch.Tensor)
    assert "dlpack_exchange_api" in repr(torch.Tensor.__dlpack_c_exchange_api__)
    t = torch.arange(12.0).reshape(3, 4)
    a = host(t)
    assert calls == [], "the table was used: no __dlpack__ call"
    assert_same_view(a, t)
    assert a.__dlpack_device__() == (1, 0)
    numpy.from_dlpack(t)  # the control: numpy, which reads no table, calls __dlpack__
    assert len(calls) == 1


@pytest.mark.parametrize(
    "dtype",
    ["float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
     "bool", "complex64", "complex128"],
)
def test_every_torch_dtype_a_typestr_names_is_taken_as_torch_sees_it_real_torch(dtype):
    t = (torch.arange(12) % 3).to(getattr(torch, dtype)).reshape(3, 4)
    assert_same_view(host(t), t)


@pytest.mark.parametrize("dtype, named", [("complex32", "complex32 is not|width numpy does not define")])
@pytest.mark.filterwarnings("ignore:ComplexHalf support is experimental")
def test_torch_dtypes_no_typestr_can_name_are_refused_naming_the_dtype_real_torch(dtype, named):
    with pytest.raises(cai.CaiError, match=named) as refused:
        host(torch.zeros(4, dtype=getattr(torch, dtype)))
    assert refused.value.status == "CAI_ERROR_INVALID_TYPESTR"


@pytest.mark.parametrize(
    "make",
    [
        lambda t: t.t(),  # F-order
        lambda t: t[:, ::2],  # strided
        lambda t: t[1:],  # an offset into the storage
        lambda t: t[0, :1].expand(3, 5),  # stride 0
        lambda t: t.sum(),  # 0-d
        lambda t: t[:0],  # empty
    ],
    ids=["transposed", "strided", "offset", "stride-0", "0-d", "empty"],
)
def test_torch_layouts_are_taken_as_torch_sees_them_real_torch(make):
    t = make(torch.arange(24.0, dtype=torch.float32).reshape(4, 6))
    assert_same_view(host(t), t)


def test_a_read_only_torch_export_stays_read_only_real_torch():
    t = torch.arange(4.0)
    a = host(ReadOnlyTensorWrapper(t))  # torch's const exchange table: the read-only flag set
    assert a.readonly and a.data_ptr == t.data_ptr()
    with pytest.raises(cai.CaiError, match="read-only") as refused:
        host(ReadOnlyTensorWrapper(t), writable=True)
    assert refused.value.status == "CAI_ERROR_READONLY"


def test_a_torch_tensor_is_refused_without_allow_host_naming_the_fix_real_torch():
    with pytest.raises(cai.CaiError, match=r"kDLCPU \(1\).*allow_host=True") as refused:
        cai.from_object(torch.ones(3))
    assert refused.value.status == "CAI_ERROR_HOST_MEMORY"


def test_a_consumer_stream_on_a_torch_cpu_tensor_asks_the_driver_nothing_real_torch_and_fake_driver(fake):
    t = torch.ones(3)
    for stream in (None, 1, 2, fake.stream()):
        fake.begin()
        a = host(t, stream=stream)
        assert fake.log() == "", f"stream {stream}: host memory has no device work to order after"
        assert a.data_ptr == t.data_ptr()


def test_torch_consumes_a_cai_array_sharing_its_memory_real_torch():
    x = numpy.arange(24, dtype=numpy.int32).reshape(4, 6)[:, ::2]
    t = torch.from_dlpack(host(x))
    assert t.data_ptr() == x.ctypes.data and tuple(t.shape) == x.shape
    assert tuple(s * t.element_size() for s in t.stride()) == x.strides and t.dtype == torch.int32
    t[1, 2] = -7  # written through torch, read through numpy's view of the same memory
    assert x[1, 2] == -7
    back = torch.from_dlpack(host(t))  # torch -> cai -> torch: still the same memory
    assert back.data_ptr() == t.data_ptr() and torch.equal(back, t)


def test_torch_asks_a_cai_array_for_host_memory_with_no_stream_real_torch():
    a = host(numpy.arange(4.0))

    class Recording:
        """a, with the arguments of each __dlpack__ call recorded."""

        def __init__(self):
            self.calls = []

        def __dlpack_device__(self):
            return a.__dlpack_device__()

        def __dlpack__(self, **kwargs):
            self.calls.append(kwargs)
            return a.__dlpack__(**kwargs)

    recording = Recording()
    torch.from_dlpack(recording)
    assert recording.calls == [{"max_version": (1, 0)}], "kDLCPU: torch passes no stream"
    # A consumer that does name a stream for host memory is refused: there is none to order.
    with pytest.raises(BufferError, match="stream must be None for host memory, not 1"):
        a.__dlpack__(stream=1, max_version=(1, 0))


def test_a_torch_tensor_keeps_the_cai_array_alive_and_release_waits_for_it_real_torch():
    x = numpy.arange(6.0)
    a = host(x)
    t = torch.from_dlpack(a)
    with pytest.raises(BufferError, match="1 DLPack export"):
        a.release()
    alive = weakref.ref(a)
    del a
    gc.collect()
    assert alive() is not None, "torch's tensor holds the array"
    assert torch.equal(t, torch.arange(6.0, dtype=torch.float64))
    del t
    gc.collect()
    assert alive() is None, "the tensor's deleter let go of the array"
    a = host(x)
    t = torch.from_dlpack(a)
    del t
    gc.collect()
    a.release()  # the export ended with torch's tensor


def test_torchs_table_hands_a_conjugate_or_negative_view_as_stored_so_resolve_it_first_real_torch():
    # What docs/dlpack.md warns of: torch's __dlpack__ refuses a tensor whose conjugate (or
    # negative) bit is set, its exchange table hands out the memory as stored, so the values
    # taken are not torch's; resolved first, they are.
    stored = torch.tensor([1 + 2j, 3 - 1j])
    conjugate = stored.conj()
    with pytest.raises(BufferError, match="conjugate bit"):
        conjugate.__dlpack__()
    assert numpy.array_equal(numpy.from_dlpack(host(conjugate)), stored.numpy())
    assert numpy.array_equal(numpy.from_dlpack(host(conjugate.resolve_conj())), conjugate.resolve_conj().numpy())
    negative = torch.tensor([1.0, 2.0])._neg_view()
    assert numpy.array_equal(numpy.from_dlpack(host(negative)), [1.0, 2.0])
    assert numpy.array_equal(numpy.from_dlpack(host(negative.resolve_neg())), [-1.0, -2.0])
