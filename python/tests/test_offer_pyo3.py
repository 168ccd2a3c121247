"""A PyO3 class offered by the cai-python crate (`cai_python::Offer` and `cai_python::offer`:
python/tests/extensions/pyo3_ext's `Image`, built by maturin) gains every producer protocol, read
by numpy, torch, tvm-ffi, cuda.core and libcai itself (through the C-level table, from Python and
from C: offer_ext.c's consumer functions), on host memory and on the fake CUDA driver's memory (a
test double); a fill that refuses, raises, panics, describes an invalid layout or finds `self`
mutably borrowed is a clear error naming the type and the field, never a crash."""

import gc
import sys
import weakref

import numpy as np
import pytest

import cai
from conftest import DEVICE_BUFFER



@pytest.fixture
def ext(route_modules):
    return route_modules["pyo3"]


@pytest.fixture(scope="module")
def consumer(offer_ext):
    """offer_ext.c: reads any type's C-level table as a C consumer does, and cai_python_view."""
    return offer_ext


def strided_host_image(ext, **kwargs):
    """An Image over columns 1-4 of a 4 x 6 float32 array: rows 24 bytes apart (strides given)."""
    values = np.arange(24, dtype=np.float32).reshape(4, 6)
    columns = values[:, 1:5]
    image = ext.Image(columns.ctypes.data, 4, 4, typestr="<f4", host=True, base=values, strides=(24, 4), **kwargs)
    return image, columns


def test_a_host_image_is_read_alike_by_numpy_torch_tvm_ffi_cuda_core_and_cai(ext):
    image, columns = strided_host_image(ext)
    taken = np.from_dlpack(image)
    np.testing.assert_array_equal(taken, columns)
    assert (taken.ctypes.data, taken.strides, taken.dtype, taken.flags.writeable) == (
        columns.ctypes.data, (24, 4), np.float32, True)
    assert image.__dlpack_device__() == (1, 0)
    array = cai.from_object(image, allow_host=True)
    assert (array.data_ptr, array.shape, array.strides, array.typestr, array.readonly) == (
        columns.ctypes.data, (4, 4), (24, 4), "<f4", False)
    assert array.owner is image
    # The CAI describes device memory only: a host instance lacks the dict, as a CPU tensor does.
    assert not hasattr(image, "__cuda_array_interface__")
    torch = pytest.importorskip("torch")
    tensor = torch.from_dlpack(image)
    assert (tensor.data_ptr(), tensor.stride(), tensor.dtype) == (columns.ctypes.data, (6, 1), torch.float32)
    assert torch.equal(tensor, torch.from_numpy(columns))
    tvm_ffi = pytest.importorskip("tvm_ffi")
    tvm_tensor = tvm_ffi.from_dlpack(image)
    assert (tvm_tensor.shape, tvm_tensor.strides, tvm_tensor.data_ptr(), str(tvm_tensor.dtype)) == (
        (4, 4), (6, 1), columns.ctypes.data, "float32")
    utils = pytest.importorskip("cuda.core.utils")
    view = utils.StridedMemoryView.from_dlpack(image, stream_ptr=-1)
    assert (view.shape, view.strides, view.ptr, view.dtype, view.readonly) == (
        (4, 4), (6, 1), columns.ctypes.data, np.float32, False)


def test_a_readonly_image_is_read_only_to_numpy_cuda_core_and_cai(ext):
    image, columns = strided_host_image(ext, readonly=True)
    assert not np.from_dlpack(image).flags.writeable
    assert cai.from_object(image, allow_host=True).readonly
    utils = pytest.importorskip("cuda.core.utils")
    assert utils.StridedMemoryView.from_dlpack(image, stream_ptr=-1).readonly


def test_host_memory_is_refused_without_allow_host_naming_the_type(ext):
    image, _ = strided_host_image(ext)
    with pytest.raises(cai.CaiError, match=r"'Image' is host memory.*allow_host=True") as raised:
        cai.from_object(image)
    assert raised.value.status == "CAI_ERROR_HOST_MEMORY"


def test_a_device_image_offers_the_v3_dict_with_its_stream_and_cai_reads_it_by_the_table_fake_driver(ext, fake):
    stream = fake.stream()
    image = ext.Image(DEVICE_BUFFER, 2, 8, typestr="<f4", stream=stream)
    assert image.__cuda_array_interface__ == {
        "shape": (2, 8), "typestr": "<f4", "data": (DEVICE_BUFFER, False), "version": 3, "strides": None,
        "stream": stream}
    strided = ext.Image(DEVICE_BUFFER, 2, 3, typestr="<i2", stream=stream, readonly=True, strides=(16, 2))
    assert strided.__cuda_array_interface__ == {
        "shape": (2, 3), "typestr": "<i2", "data": (DEVICE_BUFFER, True), "version": 3, "strides": (16, 2),
        "stream": stream}
    assert image.__dlpack_device__() == (2, 0)
    calls = image.calls
    taken = cai.from_object(image, sync=False)
    assert image.calls == calls + 1  # one fill through the C-level table, no dict built
    assert (taken.data_ptr, taken.shape, taken.typestr, taken.stream) == (DEVICE_BUFFER, (2, 8), "<f4", stream)
    assert taken.owner is image


def test_the_dlpack_export_orders_the_producer_stream_before_the_consumers_fake_driver(ext, fake):
    producer, consumer_stream = fake.stream(), fake.stream()
    image = ext.Image(DEVICE_BUFFER, 4, 4, typestr="<u4", stream=producer)
    fake.begin(0)
    capsule = image.__dlpack__(stream=consumer_stream, max_version=(1, 0))
    assert type(capsule).__name__ == "PyCapsule"
    log = fake.log()
    assert "cuEventRecord" in log and "cuStreamWaitEvent" in log, log


def test_the_type_has_the_c_level_table_and_c_consumers_read_through_it_fake_driver(ext, consumer):
    assert type(ext.Image.__cuda_array_interface_c_api__).__name__ == "PyCapsule"
    assert type(ext.Image.__dlpack_c_exchange_api__).__name__ == "PyCapsule"
    image = ext.Image(DEVICE_BUFFER, 2, 3, typestr="<i2", stream=1, readonly=True)
    expected = {"data": DEVICE_BUFFER, "shape": (2, 3), "typestr": "<i2", "readonly": 1, "stream": 1}
    calls = image.calls
    assert consumer.table_view(image) == {**expected, "owning": False}
    assert consumer.table_view(image, acquire=True) == {**expected, "owning": True}
    assert consumer.view(image) == {**expected, "owning": False}
    assert image.calls == calls + 3


def test_a_python_subclass_inherits_the_protocols_fake_driver(ext):
    class Child(ext.Image):
        pass

    assert cai.from_object(Child(DEVICE_BUFFER, 5, 1), sync=False).shape == (5, 1)


def test_the_instance_lives_while_a_capsule_or_an_array_holds_it_and_is_freed_after_fake_driver(ext, consumer):
    values = np.arange(6, dtype=np.uint8)
    # (what holds it, whether the image is host memory: the C-level table's acquire is asked
    # for device memory)
    for hold, host in ((np.from_dlpack, True), (lambda image: cai.from_object(image, allow_host=True), True),
                       (lambda image: image.__dlpack__(), True), (consumer.acquire_kept, False)):
        data = values.ctypes.data if host else DEVICE_BUFFER
        image = ext.Image(data, 2, 3, host=host, base=values)
        alive = weakref.ref(image)
        held = hold(image)
        del image
        gc.collect()
        assert alive() is not None
        del held
        gc.collect()
        assert alive() is None


PROTOCOLS = {
    "cai.from_object": lambda image, consumer: cai.from_object(image, sync=False),
    "__cuda_array_interface__": lambda image, consumer: image.__cuda_array_interface__,
    "__dlpack__": lambda image, consumer: image.__dlpack__(),
    "__dlpack_device__": lambda image, consumer: image.__dlpack_device__(),
    "numpy.from_dlpack": lambda image, consumer: np.from_dlpack(image),
    "cai_python_view": lambda image, consumer: consumer.view(image),
    # From C the table reports the refusal as a status with its message (ValueError here), or
    # leaves the Python exception set.
    "the C-level table": lambda image, consumer: consumer.table_view(image),
}

FAULTS = {
    "FAULT_REFUSES": (cai.CaiError, r"CAI_ERROR_INVALID_SHAPE: 'Image': height is not set yet"),
    "FAULT_RAISES": (RuntimeError, r"the image was closed"),
    "FAULT_NEGATIVE_SHAPE": (cai.CaiError, r"fill function of 'Image' described an invalid array: .*shape\[0\]"),
    "FAULT_PANICS": (cai.CaiError, r"CAI_ERROR_PANIC: 'Image': its fill panicked: the image's pixels are gone"),
    "FAULT_LONG_TYPESTR": (cai.CaiError, r"CAI_ERROR_INVALID_TYPESTR: 'Image': typestr \"(<f4){20}\" is not"),
    "strides": (cai.CaiError, r"CAI_ERROR_INVALID_STRIDES: 'Image': strides has 3 entries for a shape of 2"),
}


@pytest.mark.parametrize("protocol", sorted(PROTOCOLS))
@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_a_broken_fill_is_a_clear_error_on_every_protocol_fake_driver(ext, consumer, fault, protocol):
    error, message = FAULTS[fault]
    if fault == "strides":
        image = ext.Image(DEVICE_BUFFER, 2, 3, strides=(1, 2, 3))
    else:
        image = ext.Image(DEVICE_BUFFER, 2, 3, fault=getattr(ext, fault))
    if protocol == "the C-level table" and error is cai.CaiError:
        error = ValueError
    with pytest.raises(error, match=message) as raised:
        PROTOCOLS[protocol](image, consumer)
    if fault == "FAULT_RAISES" and sys.version_info >= (3, 11):  # notes: PEP 678
        assert raised.value.__notes__ == ["raised by the fill of 'Image' (cai_python::Offer), describing it for libcai"]
    # The instance is unharmed: a sound one of the same type is still described.
    assert cai.from_object(ext.Image(DEVICE_BUFFER, 2, 3), sync=False).shape == (2, 3)


def test_a_fill_while_self_is_mutably_borrowed_is_a_clear_error_then_works_again_fake_driver(ext):
    image = ext.Image(DEVICE_BUFFER, 2, 3)
    with pytest.raises(cai.CaiError, match=r"CAI_ERROR_INVALID_ARGUMENT: 'Image': self is mutably borrowed") as raised:
        image.while_mutably_borrowed(lambda: cai.from_object(image, sync=False))
    assert raised.value.status == "CAI_ERROR_INVALID_ARGUMENT"
    assert cai.from_object(image, sync=False).shape == (2, 3)


def test_a_frozen_immutable_type_is_offered_through_its_dict_and_stays_immutable(ext):
    """#[pyclass(frozen, immutable_type)]: the attributes written into the type's dict (setting
    them fails on an immutable type, so the module's import would fail), the instance borrowed
    without a borrow flag, its own Vec described."""
    constant = ext.Constant([1, 2, 65535])
    taken = np.from_dlpack(constant)
    np.testing.assert_array_equal(taken, np.array([1, 2, 65535], dtype=np.uint16))
    assert not taken.flags.writeable
    assert "__dlpack__" in vars(ext.Constant) and "__cuda_array_interface_c_api__" in vars(ext.Constant)
    with pytest.raises(TypeError, match="immutable"):
        ext.Constant.__dlpack__ = None
    assert cai.from_object(constant, allow_host=True).shape == (3,)
