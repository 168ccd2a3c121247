"""cuda.core's StridedMemoryView, both ways, on host memory (kDLCPU, allow_host=True), with no GPU
and no libcuda: cuda.core imports its driver bindings lazily, and a view of host memory asks
the driver nothing. A host cai.Array offers DLPack only (its __cuda_array_interface__ refuses
host memory), so the view reads it through __dlpack__; a view offers DLPack 1.3's C exchange
table on its type, which cai.from_object takes instead of calling the view's __dlpack__.

cuda-core comes from python/test-requirements.txt; where it is not installed (the free-threaded
leg installs it not) these tests are skipped, and counted as skipped."""

import gc

import numpy
import pytest

import cai

StridedMemoryView = pytest.importorskip("cuda.core.utils").StridedMemoryView


def host(x, **options):
    return cai.from_object(x, allow_host=True, **options)


def views_of(a):
    """The views a cuda.core user makes of `a`, with no stream ordering (stream_ptr=-1)."""
    return [StridedMemoryView.from_any_interface(a, stream_ptr=-1), StridedMemoryView.from_dlpack(a, stream_ptr=-1)]


@pytest.mark.parametrize(
    "make",
    [
        lambda: numpy.arange(24, dtype=numpy.float32).reshape(4, 6),
        lambda: numpy.arange(24, dtype=numpy.int16).reshape(4, 6)[:, ::2],
        lambda: numpy.asfortranarray(numpy.arange(24, dtype=numpy.complex128).reshape(4, 6)),
        lambda: numpy.array(2.5),
    ],
    ids=["contiguous", "strided", "F-order", "0-d"],
)
def test_a_strided_memory_view_of_a_cai_array_agrees_with_it_real_cuda_core(make):
    x = make()
    a = host(x)
    for view in views_of(a):
        assert (view.ptr, view.shape, view.dtype) == (a.data_ptr, a.shape, numpy.dtype(a.typestr))
        assert view.strides is None or tuple(s * x.itemsize for s in view.strides) == a.strides
        assert (view.device_id, view.is_device_accessible, view.readonly) == (-1, False, False)
        assert view.exporting_obj is a


def test_a_view_of_a_read_only_cai_array_is_read_only_real_cuda_core():
    x = numpy.arange(4.0)
    x.flags.writeable = False
    assert all(view.readonly for view in views_of(host(x)))


def test_release_waits_for_the_strided_memory_view_real_cuda_core():
    a = host(numpy.arange(8.0))
    view = StridedMemoryView.from_dlpack(a, stream_ptr=-1)
    with pytest.raises(BufferError, match="1 DLPack export"):
        a.release()
    del view
    gc.collect()
    a.release()


def test_a_host_cai_array_offers_no_cuda_array_interface_to_the_view_real_cuda_core():
    with pytest.raises(AttributeError, match="host memory.*use DLPack"):
        StridedMemoryView.from_cuda_array_interface(host(numpy.arange(4.0)), stream_ptr=-1)


def test_a_consumer_stream_for_host_memory_is_refused_real_cuda_core():
    # the view hands its stream_ptr to __dlpack__ as it is; host memory has no stream to order
    with pytest.raises(BufferError, match="stream must be None for host memory, not 1"):
        StridedMemoryView.from_dlpack(host(numpy.arange(4.0)), stream_ptr=1)


def test_cai_takes_a_strided_memory_view_through_its_exchange_table_real_cuda_core():
    assert "dlpack_exchange_api" in repr(StridedMemoryView.__dlpack_c_exchange_api__)
    calls = []

    class Counting(StridedMemoryView):
        """A view whose __dlpack__ calls are counted (the type's table is inherited)."""

        def __dlpack__(self, *args, **kwargs):
            calls.append(kwargs)
            return super().__dlpack__(*args, **kwargs)

    x = numpy.arange(24.0).reshape(4, 6)[::2, 1:]
    view = Counting.from_dlpack(x, stream_ptr=-1)
    a = host(view)
    assert calls == [], "the table was used: no __dlpack__ call"
    assert (a.data_ptr, a.shape, a.strides, a.typestr) == (x.ctypes.data, x.shape, x.strides, "<f8")
    assert numpy.array_equal(numpy.from_dlpack(a), x)
    numpy.from_dlpack(view)  # the control: numpy, which reads no table, calls __dlpack__
    assert len(calls) == 1


def test_a_strided_memory_view_is_refused_without_allow_host_naming_the_fix_real_cuda_core():
    view = StridedMemoryView.from_dlpack(numpy.arange(4.0), stream_ptr=-1)
    with pytest.raises(cai.CaiError, match=r"kDLCPU \(1\).*allow_host=True") as refused:
        cai.from_object(view)
    assert refused.value.status == "CAI_ERROR_HOST_MEMORY"
