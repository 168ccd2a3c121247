"""A C type offered by cai_python_offer (python/tests/extensions/offer_ext.c: a heap type and a
static type sharing one fill function) gains every producer protocol, read by numpy, torch,
tvm-ffi, cuda.core and libcai itself (through the C-level table, from Python and from C), on
host memory and on the fake CUDA driver's memory (a test double); each fault of a broken fill
is a clear error naming the type and the field, never a crash."""

import ctypes
import gc
import sys
import weakref

import numpy as np
import pytest

import cai
from conftest import (
    DEVICE_BUFFER,
    CapsuleOf,
    EXCHANGE_MANAGED_TENSOR_FROM_PY_OBJECT,
    TorchLikeStream,
    answering_metaclasses,
    delete_managed_tensor,
    diverging_producer,
    exchange_table_entry,
    outcome_of,
    take_and_delete_through_exchange_table,
)


@pytest.fixture
def ext(offer_ext):
    return offer_ext


@pytest.fixture(params=["Image", "StaticImage"])
def kind(request, ext):
    return getattr(ext, request.param)


def host_image(kind, values=None, **kwargs):
    values = np.arange(12, dtype=np.uint8).reshape(3, 4) if values is None else values
    return kind(values.ctypes.data, *values.shape, host=True, base=values, **kwargs), values


def test_host_image_is_read_by_numpy_torch_and_libcai_through_every_protocol(kind):
    image, values = host_image(kind)
    np.testing.assert_array_equal(np.from_dlpack(image), values)
    assert image.__dlpack_device__() == (1, 0)
    taken = cai.from_object(image, allow_host=True)
    assert (taken.data_ptr, taken.shape, taken.typestr) == (values.ctypes.data, (3, 4), "|u1")
    assert taken.__dlpack_device__() == (1, 0)
    # The CAI describes device memory only: a host instance lacks the dict, as a CPU tensor does.
    assert not hasattr(image, "__cuda_array_interface__")
    torch = pytest.importorskip("torch")
    assert torch.equal(torch.from_dlpack(image), torch.from_numpy(values))


def test_host_image_is_read_by_tvm_ffi_and_cuda_core(kind):
    image, values = host_image(kind)
    tvm_ffi = pytest.importorskip("tvm_ffi")
    tensor = tvm_ffi.from_dlpack(image)
    assert (tensor.shape, tensor.data_ptr()) == ((3, 4), values.ctypes.data)
    utils = pytest.importorskip("cuda.core.utils")
    view = utils.StridedMemoryView.from_dlpack(image, stream_ptr=-1)
    assert (view.shape, view.ptr) == ((3, 4), values.ctypes.data)


def test_host_memory_is_refused_without_allow_host_naming_the_type_and_the_fix(kind):
    image, _ = host_image(kind)
    with pytest.raises(cai.CaiError, match=rf"'{kind.__name__}' is host memory.*allow_host=True") as raised:
        cai.from_object(image)
    assert raised.value.status == "CAI_ERROR_HOST_MEMORY"


def test_device_image_offers_the_v3_dict_and_libcai_reads_it_by_the_table_fake_driver(kind, fake):
    stream = fake.stream()
    image = kind(DEVICE_BUFFER, 2, 8, typestr="<f4", stream=stream)
    assert image.__cuda_array_interface__ == {
        "shape": (2, 8), "typestr": "<f4", "data": (DEVICE_BUFFER, False), "version": 3, "strides": None,
        "stream": stream}
    calls = image.calls
    taken = cai.from_object(image, sync=False)
    assert image.calls == calls + 1  # one fill, no dict built
    assert (taken.data_ptr, taken.shape, taken.typestr, taken.stream) == (DEVICE_BUFFER, (2, 8), "<f4", stream)
    assert taken.owner is image


def test_the_dlpack_export_orders_the_producer_stream_before_the_consumers_fake_driver(kind, fake):
    producer = fake.stream()
    consumer = fake.stream()
    image = kind(DEVICE_BUFFER, 4, 4, typestr="<u4", stream=producer)
    fake.begin(0)
    capsule = image.__dlpack__(stream=consumer, max_version=(1, 0))
    assert type(capsule).__name__ == "PyCapsule"
    log = fake.log()
    assert "cuEventRecord" in log and "cuStreamWaitEvent" in log, log


def test_c_consumers_read_the_table_view_and_acquire_fake_driver(kind, ext):
    image = kind(DEVICE_BUFFER, 2, 3, typestr="<i2", stream=1, readonly=True)
    expected = {"data": DEVICE_BUFFER, "shape": (2, 3), "typestr": "<i2", "readonly": 1, "stream": 1}
    assert ext.table_view(image) == {**expected, "owning": False}
    assert ext.table_view(image, acquire=True) == {**expected, "owning": True}
    assert ext.view(image) == {**expected, "owning": False}


def test_a_fill_that_views_another_object_through_cai_python_view_leaves_the_outer_view_whole_fake_driver(ext):
    """A fill that re-enters libcai after writing `out` (here a view of a 4-D strided array of
    another shape and type) leaves the outer view whole: each view reads into a struct of its
    own (a struct shared by the two, as a per-thread scratch struct would be, fails this)."""
    inner = cai.from_object({"shape": (2, 3, 4, 5), "typestr": "<f8", "data": (DEVICE_BUFFER, False), "version": 3,
                             "strides": (960, 320, 80, 8)})
    outer = ext.Image(DEVICE_BUFFER, 6, 7, typestr="<i2", fault=ext.VIEWS_BASE, base=inner)
    expected = {"data": DEVICE_BUFFER, "shape": (6, 7), "typestr": "<i2", "readonly": 0, "stream": 0}
    assert ext.view(outer) == {**expected, "owning": False}
    assert outer.calls == 1
    assert ext.view(inner)["shape"] == (2, 3, 4, 5)  # and the struct given back still serves
    assert ext.view(outer) == {**expected, "owning": False}


def test_a_fill_that_exports_another_offered_object_leaves_the_outer_export_whole_no_driver(kind, ext):
    """A fill that re-enters libcai's export after writing `out` (another offered object's
    `__dlpack__`, of another shape and type) leaves the outer description whole, on every read
    that describes into a struct kept per thread (`__dlpack__`, `__dlpack_device__`, the
    exchange table): the inner export gets a struct of its own (a struct shared by the two, as
    the per-thread one would be if lent twice, fails this)."""
    inner_values = np.arange(20, dtype=np.uint8).reshape(4, 5)
    inner = kind(inner_values.ctypes.data, 4, 5, host=True, base=inner_values)
    values = np.arange(42, dtype=np.int16).reshape(6, 7)
    outer = kind(values.ctypes.data, 6, 7, typestr="<i2", host=True, fault=ext.EXPORTS_BASE, base=inner)
    for _ in range(2):  # and the struct given back still serves
        read = np.from_dlpack(outer)
        assert read.dtype == np.int16 and read.shape == (6, 7)
        np.testing.assert_array_equal(read, values)
        assert outer.__dlpack_device__() == (1, 0)
        out = ctypes.c_void_p()
        assert exchange_table_entry(kind, EXCHANGE_MANAGED_TENSOR_FROM_PY_OBJECT)(outer, ctypes.addressof(out)) == 0
        # The DLTensor at byte 32 of the versioned struct: its ndim at 16, its shape pointer at 24.
        ndim = ctypes.c_int32.from_address(out.value + 48).value
        shape = ctypes.cast(ctypes.c_void_p.from_address(out.value + 56).value, ctypes.POINTER(ctypes.c_int64))
        assert (ndim, shape[0], shape[1]) == (2, 6, 7)
        delete_managed_tensor(out.value)
        np.testing.assert_array_equal(np.from_dlpack(inner), inner_values)
    assert inner.calls == 2 * 3 + 2 and outer.calls == 2 * 3


def test_the_table_refuses_unknown_must_understand_flags_and_objects_of_other_types(kind, ext):
    image = kind(DEVICE_BUFFER, 2, 3)
    with pytest.raises(ValueError, match=r"CAI_ERROR_NOT_SUPPORTED: request flags 0x2"):
        ext.table_view(image, flags=2)
    assert ext.table_view(image, flags=1 << 40)["shape"] == (2, 3)  # may-ignore bits are ignored
    other = ext.Image if kind is ext.StaticImage else ext.StaticImage
    with pytest.raises(ValueError, match=rf"CAI_ERROR_INVALID_ARGUMENT: obj is not a '{other.__name__}'"):
        ext.table_view(image, via=other)


class_with_weakref = {}


def weak_image_type(ext):
    """A subclass of Image, whose instances (unlike the C type's) take weak references."""
    return class_with_weakref.setdefault(ext, type("WeakImage", (ext.Image,), {}))


def test_an_acquired_array_keeps_the_object_alive_until_released(ext):
    image = weak_image_type(ext)(DEVICE_BUFFER, 2, 3)
    alive = weakref.ref(image)
    kept = ext.acquire_kept(image)
    del image
    gc.collect()
    assert alive() is not None
    del kept
    gc.collect()
    assert alive() is None


def test_a_c_import_keeps_the_object_alive_until_released_and_no_longer_fake_driver(ext):
    """The struct cai_python_from_object wrote of an offered type holds the object itself: it
    lives while the struct does, and is gone as soon as the struct is released."""
    image = weak_image_type(ext)(DEVICE_BUFFER, 2, 3)
    alive = weakref.ref(image)
    _, kept = ext.import_kept(image)
    del image
    gc.collect()
    assert alive() is not None
    del kept
    assert alive() is None


def test_a_dlpack_capsule_keeps_the_object_alive_until_its_deleter_runs(ext):
    values = np.arange(6, dtype=np.uint8)
    image = weak_image_type(ext)(values.ctypes.data, 2, 3, host=True, base=values)
    alive = weakref.ref(image)
    taken = np.from_dlpack(image)
    del image
    gc.collect()
    assert alive() is not None
    np.testing.assert_array_equal(taken.ravel(), values)
    del taken
    gc.collect()
    assert alive() is None


def test_an_acquired_struct_and_a_dlpack_tensor_let_go_of_the_object_from_a_thread_without_the_gil(ext):
    """The acquired struct's release and the DLPack tensor's deleter, run by a C consumer's
    thread that never attaches to the interpreter, each let go of their reference to the
    object (attaching themselves): it is gone after both, and nothing crashes."""
    values = np.arange(6, dtype=np.uint8)
    image = weak_image_type(ext)(values.ctypes.data, 2, 3, host=True, base=values)
    alive = weakref.ref(image)
    references = sys.getrefcount(image)
    ext.release_on_a_thread(image)
    assert sys.getrefcount(image) == references
    del image
    gc.collect()
    assert alive() is None


def test_a_cai_array_export_deleted_on_a_thread_without_the_gil_ends_the_export(ext):
    """The deleter of a cai.Array's DLPack tensor, run by a C consumer's thread that never
    attaches to the interpreter, attaches itself: the export ends (release() is allowed again)
    and the array's reference is let go of."""
    values = np.arange(6, dtype=np.uint8)
    array = cai.from_object(values, allow_host=True, sync=False)
    references = sys.getrefcount(array)
    capsule = array.__dlpack__(max_version=(1, 0))
    with pytest.raises(BufferError, match="1 DLPack export"):
        array.release()
    ext.delete_on_a_thread(capsule)
    assert sys.getrefcount(array) == references
    array.release()


def test_subclasses_inherit_and_a_subclass_overriding_the_dict_is_read_by_its_dict(ext):
    """The subclass keeps the inherited tables (C-level and DLPack's exchange table), but a
    class nearer in the MRO defines the dict, so libcai reads the dict."""
    class Child(ext.Image):
        pass

    assert cai.from_object(Child(DEVICE_BUFFER, 5, 1), sync=False).shape == (5, 1)

    class Masked(ext.Image):
        @property
        def __cuda_array_interface__(self):
            return {"shape": (7,), "typestr": "|u1", "data": (DEVICE_BUFFER, False), "version": 3, "stream": None}

    assert cai.from_object(Masked(DEVICE_BUFFER, 5, 1), sync=False).shape == (7,)


def test_a_subclass_whose_metaclass_answers_for_its_mro_or_dict_reads_as_without_it_no_driver(ext):
    """Which class defines the dict, against the one whose table is inherited, is read from the
    classes CPython resolves attributes by: a metaclass's own `__mro__` or `__dict__` (one that
    raises, or gives no classes) is not the type's, so a subclass under it reads as the same
    subclass without it: by the inherited table, or by a nearer dict."""
    values = np.arange(12, dtype=np.uint8)
    interface = {"shape": (12,), "typestr": "|u1", "data": (values.ctypes.data, False), "version": 3}

    def reads(meta):
        child = meta("Child", (ext.Image,), {})
        masked = meta("Masked", (ext.Image,), {"__cuda_array_interface__": property(lambda self: interface)})
        made = [kind(values.ctypes.data, 3, 4, host=True, base=values) for kind in (child, masked)]
        return [cai.from_object(image, sync=False, allow_host=True, pointer_check=cai.POINTER_CHECK_NEVER).shape
                for image in made]

    assert reads(type) == [(3, 4), (12,)]
    for name, meta in answering_metaclasses():
        assert reads(meta) == [(3, 4), (12,)], name


def test_a_subclass_hiding_the_c_level_table_is_still_served_by_the_inherited_exchange_table(ext):
    """docs/c-level-cai.md section 1: a subclass may set __cuda_array_interface_c_api__ = None;
    the DLPack exchange table it still inherits finds the fill by the object's type, not through
    that attribute."""
    class Hidden(ext.Image):
        __cuda_array_interface_c_api__ = None

    values = np.arange(6, dtype=np.uint8)
    image = Hidden(values.ctypes.data, 2, 3, host=True, base=values)
    torch = pytest.importorskip("torch")
    assert torch.equal(torch.from_dlpack(image), torch.from_numpy(values.reshape(2, 3)))
    tvm_ffi = pytest.importorskip("tvm_ffi")
    assert tvm_ffi.from_dlpack(image).data_ptr() == values.ctypes.data


def test_offered_types_read_in_a_row_and_alternating_give_the_first_reads_array(ext):
    """A thread remembers that an offered type's choice is its C-level table (negotiate/type_facts.rs's
    `remembered_choice`) and makes it again for the next object of that type without asking.
    Reads of the two offered types and of three subclasses (one inheriting the table, one whose
    dict is nearer, one hiding the table and read by the inherited exchange table), from Python
    and from C, in a row and alternating, each give what its first read gave."""
    values = np.arange(12, dtype=np.uint8)

    class Child(ext.Image):
        pass

    class Masked(ext.Image):
        @property
        def __cuda_array_interface__(self):
            return {"shape": (12,), "typestr": "|u1", "data": (values.ctypes.data, False), "version": 3,
                    "stream": None}

    class Hidden(ext.Image):
        __cuda_array_interface_c_api__ = None

    objects = [kind(values.ctypes.data, 3, 4, host=True, base=values)
               for kind in (ext.Image, ext.StaticImage, Child, Masked, Hidden)]

    def c_view(obj):
        try:
            return ext.view(obj, allow_host=True)
        except cai.CaiError as refused:  # Hidden's exchange table has no borrowed DLTensor call
            return str(refused)

    def read(obj):
        taken = cai.from_object(obj, sync=False, allow_host=True, pointer_check=cai.POINTER_CHECK_NEVER)
        return (taken.shape, taken.typestr, taken.data_ptr, taken.readonly), c_view(obj)

    firsts = [read(obj) for obj in objects]
    assert [first[0][0] for first in firsts] == [(3, 4), (3, 4), (3, 4), (12,), (3, 4)]
    for obj, first in zip(objects, firsts):
        assert [read(obj) for _ in range(3)] == [first] * 3
    for _ in range(3):
        for obj, first in zip(objects, firsts):
            assert read(obj) == first


def test_the_offered_exchange_table_refuses_an_object_of_no_offered_type(ext):
    """The table is shared by the offered types: called with anything else (as a consumer that
    cached it might), it raises a TypeError naming the object's type."""
    out = ctypes.c_void_p()
    with pytest.raises(TypeError, match=r"a 'list' is not an instance of a type offered by cai_python_offer"):
        exchange_table_entry(ext.Image, EXCHANGE_MANAGED_TENSOR_FROM_PY_OBJECT)([], ctypes.addressof(out))
    assert out.value is None


def test_exchange_table_calls_keep_reference_counts_fake_driver(kind, fake):
    """The offered types' `managed_tensor_from_py_object_no_sync` runs without PyO3's count of
    the thread (DLPack's consumer calls it attached): many tensors taken and deleted, each
    holding the object until its deleter runs, leave the object's count where it was."""
    take_and_delete_through_exchange_table(kind(DEVICE_BUFFER, 4, 4, typestr="<u4", stream=fake.stream()))


def test_offering_a_type_twice_or_one_with_its_own_protocol_is_a_type_error(ext):
    with pytest.raises(TypeError, match=r"'Image' defines __cuda_array_interface__ itself \(or was offered already\)"):
        ext.offer(ext.Image)

    class Own:
        def __dlpack__(self):
            raise AssertionError

    with pytest.raises(TypeError, match=r"'.*Own' defines __dlpack__ itself"):
        ext.offer(Own)


FAULTS = {
    "FAULT_REFUSES": (cai.CaiError, r"CAI_ERROR_INVALID_SHAPE: '.*Image': height is not set yet"),
    "FAULT_RAISES": (RuntimeError, r"the image was closed"),
    "FAULT_NEGATIVE_SHAPE": (cai.CaiError, r"fill function of '.*Image' described an invalid array: .*shape"),
    "FAULT_SETS_RELEASE": (cai.CaiError, r"fill function of '.*Image' set owner or release"),
    "FAULT_SILENT_PYTHON": (SystemError, r"fill function of '.*Image' returned CAI_ERROR_PYTHON without an exception"),
    "FAULT_BAD_DEVICE": (cai.CaiError, r"fill function of '.*Image' set device type 7"),
    "FAULT_SILENT_REFUSAL": (cai.CaiError, r"fill function of '.*Image' returned CAI_ERROR_INVALID_TYPESTR without a message"),
    "FAULT_OPENCL_MEMORY": (cai.CaiError, r"fill function of '.*Image' set memory 1 \(of the array or a mask\)"),
    "FAULT_HOST_DEVICE_ID": (cai.CaiError, r"fill function of '.*Image' set device \(kDLCPU, 5\); host memory is device \(kDLCPU, 0\)"),
    "FAULT_CUDA_DEVICE_ID": (cai.CaiError, r"fill function of '.*Image' set device \(kDLCUDA, -7\); a CUDA ordinal is 0 or more"),
}


@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_a_broken_fill_is_a_clear_error_on_every_protocol_fake_driver(kind, ext, fault):
    error, message = FAULTS[fault]
    image = kind(DEVICE_BUFFER, 2, 3, fault=getattr(ext, fault))
    for read in (lambda: cai.from_object(image, sync=False), lambda: image.__cuda_array_interface__,
                 lambda: image.__dlpack__(), lambda: image.__dlpack_device__(),
                 lambda: np.from_dlpack(image), lambda: ext.view(image)):
        with pytest.raises(error, match=message):
            read()
    # From C the table reports the same refusal as a status with its message, or the exception;
    # so does the DLPack exchange table, which runs without PyO3's count of the thread.
    with pytest.raises((error, ValueError), match=message):
        ext.table_view(image)
    out = ctypes.c_void_p()
    with pytest.raises(error, match=message):
        exchange_table_entry(kind, EXCHANGE_MANAGED_TENSOR_FROM_PY_OBJECT)(image, ctypes.addressof(out))
    assert out.value is None


def test_a_fill_naming_another_device_than_the_pointers_is_refused_where_the_pointer_is_checked_fake_driver(kind, ext):
    image = kind(DEVICE_BUFFER, 2, 3, fault=ext.NAMES_DEVICE_1)  # device 0's memory, said to be device 1's
    contradicted = r"CUDA device 1 .* memory of device 0"
    for read in (lambda: cai.from_object(image), lambda: cai.from_object(image, pointer_check=cai.POINTER_CHECK_ALWAYS),
                 lambda: ext.view(image), lambda: ext.import_kept(image)):
        with pytest.raises(cai.CaiError, match=contradicted) as refused:
            read()
        assert refused.value.status == "CAI_ERROR_NOT_DEVICE_POINTER"
    assert image.__dlpack_device__() == (2, 1), "exported as the fill says: no driver is asked"
    unchecked = cai.from_object(image, sync=False, pointer_check=cai.POINTER_CHECK_NEVER)
    assert unchecked.__dlpack_device__() == (2, 1)
    assert cai.from_object(kind(DEVICE_BUFFER, 2, 3)).__dlpack_device__() == (2, 0), "the driver's, unnamed"


def offered_reads(ext, image):
    """Every read of an offered object that calls its fill, from Python and from C."""
    out = ctypes.c_void_p()
    return (lambda: cai.from_object(image, sync=False), lambda: image.__dlpack__(), lambda: image.__dlpack_device__(),
            lambda: np.from_dlpack(image), lambda: ext.view(image), lambda: ext.table_view(image),
            lambda: exchange_table_entry(type(image), EXCHANGE_MANAGED_TENSOR_FROM_PY_OBJECT)(
                image, ctypes.addressof(out)))


def test_a_refusal_reads_the_message_its_own_fill_wrote_fake_driver(kind, ext):
    """The CaiError a fill is handed is reused per thread, not zeroed per call: a silent refusal
    after one with a message still reads as silent, on every read."""
    loud = kind(DEVICE_BUFFER, 2, 3, fault=ext.FAULT_REFUSES)
    silent = kind(DEVICE_BUFFER, 2, 3, fault=ext.FAULT_SILENT_REFUSAL)
    for read_loud, read_silent in zip(offered_reads(ext, loud), offered_reads(ext, silent)):
        with pytest.raises((cai.CaiError, ValueError), match="height is not set yet"):
            read_loud()
        with pytest.raises((cai.CaiError, ValueError), match="INVALID_TYPESTR without a message"):
            read_silent()


def test_a_fill_that_reads_another_offered_object_keeps_its_own_refusal_fake_driver(kind, ext):
    """A fill that writes its refusal, then views another offered object through libcai (whose
    fill runs meanwhile on the same thread), then refuses: its message is the one reported."""
    base = kind(DEVICE_BUFFER, 4, 5, typestr="<f4", host=True)
    outer = kind(DEVICE_BUFFER, 2, 3, fault=ext.FAULT_REFUSES_AROUND_A_VIEW, base=base)
    for read in offered_reads(ext, outer):
        calls = base.calls
        with pytest.raises((cai.CaiError, ValueError), match="INVALID_SHAPE: '.*Image': the outer image refuses"):
            read()
        assert base.calls == calls + 1


def device_and_host_images(kind, fault):
    """A 2 x 3 read-only `<f4` device image and a 2 x 3 host image over a numpy array it keeps,
    both with `fault`."""
    values = np.arange(6, dtype=np.uint8).reshape(2, 3)
    return [kind(DEVICE_BUFFER, 2, 3, typestr="<f4", readonly=True, fault=fault),
            kind(values.ctypes.data, 2, 3, host=True, base=values, fault=fault)]


@pytest.mark.parametrize("fault", ["FAULT_NONE", *sorted(FAULTS)])
def test_c_entries_on_a_type_whose_table_was_chosen_before_give_the_negotiations_outcome_fake_driver(
    kind, ext, fault
):
    """cai_python_view and cai_python_from_object on an offered type whose C-level table this
    thread chose last (entry/c_api_table.rs's `remembered`: read with no negotiation) give what the
    negotiation gives (the object read first after a numpy array, which this thread then
    remembers with no table): the same struct or the same refusal."""
    forget = np.zeros(1)
    images = device_and_host_images(kind, getattr(ext, fault, 0))
    compared = 0
    for image in images:
        for read in (lambda **k: ext.view(image, **k), lambda **k: ext.import_kept(image, **k)[0]):
            for allow_host in (False, True):
                ext.view(forget, allow_host=True)
                negotiated = outcome_of(lambda: read(allow_host=allow_host))
                remembered = outcome_of(lambda: read(allow_host=allow_host))
                assert negotiated == remembered, (image, allow_host)
                compared += negotiated == remembered
    assert compared == 8


@pytest.mark.parametrize("fault", ["FAULT_NONE", *sorted(FAULTS)])
def test_a_c_import_of_an_offered_type_is_the_python_reads_struct_held_by_the_object_itself_fake_driver(
    kind, ext, fault
):
    """cai_python_from_object of an offered type, negotiated and then on the remembered table:
    the struct of the cai.Array `cai.from_object` makes of it, owned by a reference to the
    object itself (what the glue's acquire holds; no Array made for it), let go of by
    cai_release; a refusal is cai.from_object's, word for word, and takes no reference."""
    forget = np.zeros(1)
    images = device_and_host_images(kind, getattr(ext, fault, 0))
    compared = 0
    for image in images:
        for allow_host in (False, True):
            references = sys.getrefcount(image)
            expected = outcome_of(
                lambda: {**ext.view(cai.from_object(image, sync=False, allow_host=allow_host), allow_host=True),
                         "owning": True})
            ext.view(forget, allow_host=True)
            for way in ("negotiated", "remembered"):
                got, want = outcome_of(lambda: ext.import_kept(image, allow_host=allow_host)[0]), expected
                if not allow_host and image is images[1] and fault == "FAULT_NONE":
                    # The host-memory refusal names the fix in the caller's terms (C's here).
                    assert "set CaiImportOptions.allow_host = 1" in got[1], got
                    got, want = (got[0], got[1].split(": set ")[0]), (want[0], want[1].split(": pass ")[0])
                assert got == want, way
                if isinstance(expected, dict):
                    assert ext.import_owner_is(image, allow_host=allow_host), way
                compared += 1
            assert sys.getrefcount(image) == references
    assert compared == 8


def test_a_fill_that_changes_between_calls_is_described_anew_each_time_fake_driver(ext):
    image = ext.Image(DEVICE_BUFFER, 2, 3, fault=ext.FAULT_CHANGES)
    first = cai.from_object(image, sync=False).shape
    second = cai.from_object(image, sync=False).shape
    assert first[0] + 1 == second[0]


def test_dlpack_lets_go_of_what_it_reads_at_once_plain_arguments_or_not_fake_driver(kind, fake):
    """`__dlpack__` with the plain arguments consumers pass runs without PyO3's count of the
    thread; any other call (a stream object, whose reading looks for `__cuda_stream__` and drops
    the AttributeError, which holds the object) runs counted, so that nothing it drops waits in
    PyO3's pool of deferred drops: the stream object and the image go as soon as the capsules do,
    in either mode, and a failure's exception too."""
    image = kind(DEVICE_BUFFER, 4, 4, typestr="<u4", stream=fake.stream())
    references = sys.getrefcount(image)
    stream = TorchLikeStream(fake.stream())
    alive = weakref.ref(stream)
    capsules = [image.__dlpack__(stream=stream, max_version=(1, 0)) for _ in range(3)]
    capsules.append(image.__dlpack__(stream=fake.stream(), max_version=(1, 0), dl_device=(2, 0), copy=False))
    assert image.__dlpack_device__() == (2, 0)
    # Before any capsule goes: a tensor's deleter attaches, which would empty the pool.
    del stream
    assert alive() is None, "the stream object waits in a pool of deferred drops"
    del capsules
    assert sys.getrefcount(image) == references
    host, _ = host_image(kind)
    refused = TorchLikeStream(7)
    alive = weakref.ref(refused)
    with pytest.raises(BufferError, match="stream must be None for host memory"):
        host.__dlpack__(stream=refused)
    with pytest.raises(BufferError, match="never copies"):
        host.__dlpack__(copy=True, max_version=(1, 0))
    del refused
    assert alive() is None


def test_plain_dlpack_calls_keep_reference_counts_fake_driver(kind, fake):
    """Many plain calls (the mode that runs without PyO3's count of the thread), taking and
    deleting their capsules: the image's, the stream handle's and the pairs' reference counts
    come back where they were."""
    image = kind(DEVICE_BUFFER, 4, 4, typestr="<u4", stream=fake.stream())
    handle, version, device = fake.stream(), (1, 0), (2, 0)
    before = [sys.getrefcount(x) for x in (image, version, device, kind)]
    for _ in range(2000):
        image.__dlpack__(stream=handle, max_version=version, dl_device=device, copy=False)
        image.__dlpack_device__()
    assert [sys.getrefcount(x) for x in (image, version, device, kind)] == before


def test_from_object_lets_go_of_what_reading_a_stream_object_drops_fake_driver(kind, fake):
    """cai.from_object on an offered type runs without PyO3's count of the thread unless its
    `stream` is a stream object, whose reading looks for `__cuda_stream__` and drops the
    AttributeError: such a call runs counted, so that the error is let go of at once, not kept
    in PyO3's pool until PyO3 next counts a thread (here no array is deallocated in between).
    Seen by the count of references to AttributeError, which each kept error holds (an
    immortal type from CPython 3.12 on: the check is the test command's CPython 3.11 run's)."""
    image = kind(DEVICE_BUFFER, 4, 4, typestr="<u4", stream=fake.stream())
    cai.from_object(image, sync=False)  # the type's facts known to this thread
    stream = TorchLikeStream(fake.stream())
    taken = []
    before = sys.getrefcount(AttributeError)
    for _ in range(200):
        # sync=False: a sync would release the GIL around its wait, and PyO3 empties its pool
        # on taking the thread back.
        taken.append(cai.from_object(image, stream=stream, sync=False))
    assert sys.getrefcount(AttributeError) - before < 50, "dropped errors wait in PyO3's pool"
    assert all(array.owner is image for array in taken)


def test_a_c_view_of_an_instance_its_types_mark_did_not_foresee_lets_go_of_what_its_path_dropped_fake_driver(
        ext, fake):
    """cai_python_view runs uncounted on a type whose last read here was its CAI dict. An
    instance of it without the interface is taken by `__dlpack__`, whose retries for a producer
    refusing `max_version` drop its TypeErrors: every error, and what they hold, are let go of
    before the view returns (the entry attaches once after an unaudited path)."""
    Producer, held, watches = diverging_producer(fake.alloc(16))
    for _ in range(2):  # the type's facts found, then read by its dict (marked)
        assert ext.view(Producer(True))["shape"] == (4,)
    assert ext.view(Producer(False), allow_host=True)["shape"] == (4,)
    assert not held, "the property was asked once, __dlpack__ once with each newer keyword set"
    assert [watch() for watch in watches] == [None] * 3


# Any fill: a struct a fill could hand back, most of it valid, with none, one or two fields
# set to a value at or past a rule's edge (offer_ext.c's FILLS_FROM_BASE copies it over the
# struct, its pointers set valid).
def raw_fill_strategy():
    from hypothesis import strategies as st

    from cai._ctypes import CaiArray

    typestrs = [b"|u1", b"<f4", b">f8", b"|b1", b"<c8", b"|V8", b"<M8[ns]", b"<f2", b"<i8", b"=i4"]
    edges = {
        "abi_version": st.sampled_from([1, 2**32 - 1]),  # CAI_ABI_VERSION is 0
        "version": st.sampled_from([-1, 0, 1, 2, 4]),
        "ndim": st.sampled_from([-1, 65, 70]),
        "shape": st.sampled_from([-1, 2**31, 2**62, -(2**63)]),
        "strides": st.sampled_from([0, 1, 3, -4, 2**40, -(2**63), 2**63 - 1]),
        "strides_given": st.just(2),
        "typestr": st.one_of(st.sampled_from([b"|O8", b"<U3", b"|S4", b"", b"x", b"|V12", b"<f3"]),
                             st.binary(min_size=1, max_size=32)),
        "readonly": st.just(2),
        "data": st.sampled_from([0, 2**63, 2**64 - 16]),
        "stream": st.sampled_from([0, 1, 2]),
        "descr_count": st.integers(1, 3),
        "memory": st.sampled_from([1, 5]),
        "stream_kind": st.just(1),
        "byte_offset": st.just(8),
        "reserved": st.just(1),
        "owner": st.just(0x1234),
    }

    @st.composite
    def fill(draw):
        ndim = draw(st.integers(0, 3))
        a = CaiArray()
        a.version, a.ndim, a.data, a.stream = 3, ndim, 0x1000, 0
        a.typestr = draw(st.sampled_from(typestrs))
        a.readonly = draw(st.sampled_from([0, 1]))
        for i in range(ndim):
            a.shape[i] = draw(st.integers(0, 4))
        if draw(st.booleans()):
            a.strides_given = 1
            for i in range(ndim):
                a.strides[i] = draw(st.sampled_from([-8, -4, 0, 4, 8, 16, 64]))
        for field in draw(st.lists(st.sampled_from(sorted(edges)), max_size=2, unique=True)):
            value = draw(edges[field])
            if field in ("shape", "strides"):
                if ndim:
                    getattr(a, field)[draw(st.integers(0, ndim - 1))] = value
                    a.strides_given = a.strides_given or field == "strides"
            elif field == "reserved":
                a.reserved[0] = value
            else:
                setattr(a, field, value)
        control = draw(st.sampled_from([0, 0, 0, 1, 2, 3, 4, 8, 17]))  # offer_ext.c's FILLS_FROM_BASE
        return bytes(a) + bytes([control]), draw(st.booleans())

    return fill()


def reads_of_an_offered_object(ext, image, host):
    """Each protocol's reading of `image`, as (name, function giving what it read, comparably)."""
    def from_object():
        a = cai.from_object(image, sync=False, allow_host=True, pointer_check=cai.POINTER_CHECK_NEVER)
        return a.shape, spelled(a.typestr), a.readonly

    def cai_dict():
        d = image.__cuda_array_interface__
        a = cai.from_object(d, sync=False, pointer_check=cai.POINTER_CHECK_NEVER)
        return a.shape, spelled(a.typestr), a.readonly

    def c_view():
        return summary_of_c_read(ext.view(image, allow_host=True))

    def table_view():
        return summary_of_c_read(ext.table_view(image, allow_host=True))

    def dlpack():
        capsule = image.__dlpack__(max_version=(1, 0))
        a = cai.from_object(CapsuleOf(capsule, image.__dlpack_device__()), sync=False, allow_host=True,
                            pointer_check=cai.POINTER_CHECK_NEVER)
        return a.shape, spelled(a.typestr), a.readonly

    reads = [("cai.from_object", from_object), ("cai_python_view", c_view), ("C-level table", table_view),
             ("__dlpack__", dlpack), ("__dlpack_device__", image.__dlpack_device__)]
    if not host:
        reads.append(("__cuda_array_interface__", cai_dict))
    return reads


def spelled(typestr):
    """One spelling of a dtype (DLPack's side writes `=i4` as `<i4` on this machine)."""
    return np.dtype(typestr).str


def summary_of_c_read(described):
    """What a C reader of offer_ext.c read (its `described` dict), as the readers' outcomes are
    compared: shape, typestr in one spelling, read-only."""
    return described["shape"], spelled(described["typestr"]), described["readonly"] == 1


def test_any_fill_is_one_array_on_every_protocol_or_a_clear_error_naming_the_type_fake_driver(ext):
    from hypothesis import HealthCheck, given, settings

    @settings(max_examples=400, database=None, deadline=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(raw_fill_strategy())
    def check(raw_and_host):
        raw, host = raw_and_host
        for kind in (ext.Image, ext.StaticImage):
            image = kind(DEVICE_BUFFER, 1, 1, host=host, fault=ext.FILLS_FROM_BASE, base=raw)
            outcomes = {}
            for name, read in reads_of_an_offered_object(ext, image, host):
                try:
                    outcomes[name] = ("read", read())
                except (cai.CaiError, TypeError, ValueError, BufferError, OverflowError) as error:
                    outcomes[name] = ("refused", f"{type(error).__name__}: {error}")
            accepted = outcomes["cai.from_object"][0] == "read"
            described = {name: what for name, (verdict, what) in outcomes.items()
                         if verdict == "read" and name != "__dlpack_device__"}
            # One array for every protocol that read it; the dict of what libcai read reads back.
            assert len(set(described.values())) <= 1, outcomes
            assert host or not accepted or outcomes["__cuda_array_interface__"][0] == "read", outcomes
            if not accepted:
                # What libcai refuses to read, no protocol hands out; each refusal names the type.
                assert not described, outcomes
                for verdict, what in outcomes.values():
                    assert kind.__name__ in what, outcomes
    check()


def test_a_hand_written_table_describing_opencl_memory_is_refused_and_what_it_acquired_released_fake_driver(ext):
    """docs/c-level-cai.md section 5: the table's 1.0 carries CUDA memory (host memory on a CPU
    device) only. A table that describes OpenCL memory is refused by every libcai reader of it,
    naming the type and the value, before anything reads the memory (its pointer checked would
    be a cl_mem OpenCL reads through); what its acquire handed out is released."""
    opencl = ext.Foreign(DEVICE_BUFFER, 1)
    never = cai.POINTER_CHECK_NEVER
    reads = (lambda: cai.from_object(opencl, sync=False, pointer_check=never),  # acquire
             lambda: ext.view(opencl),  # view
             lambda: ext.import_kept(opencl))  # acquire, from C
    refusal = r"C-level CAI table of 'Foreign' described memory 1 \(of the array or a mask\); the table's 1\.0"
    for read in reads:
        with pytest.raises(cai.CaiError, match=refusal):
            read()
        assert ext.foreign_outstanding() == 0
    # The same table's CUDA memory is read (the table itself is sound).
    cuda = ext.Foreign(DEVICE_BUFFER, 0)
    taken = cai.from_object(cuda, sync=False)
    assert (taken.shape, taken.typestr, taken.data_ptr) == ((2, 3), "<f4", DEVICE_BUFFER)
    assert ext.foreign_outstanding() == 1
    del taken
    gc.collect()
    assert ext.foreign_outstanding() == 0


def test_any_struct_a_hand_written_table_gives_is_one_array_to_every_reader_or_a_clear_error_fake_driver(ext):
    """docs/c-level-cai.md lets any library write its table by hand, so libcai's readers of it
    (`cai.from_object` and `cai_python_from_object` by `acquire`, `cai_python_view` by `view`,
    each checking the pointer with the fake driver) take whatever struct it hands back as they
    take a dict: one array read by all of them, or a refusal by all, naming the type where the
    table broke a rule (a pointer outside its allocation is the import's finding, as for a dict);
    never a view's release called, and everything an acquire handed out released."""
    from hypothesis import HealthCheck, given, settings

    def from_object(obj):
        a = cai.from_object(obj, sync=False, allow_host=True)
        return a.shape, spelled(a.typestr), a.readonly

    def c_view(obj):
        return summary_of_c_read(ext.view(obj, allow_host=True))

    def c_import(obj):
        described, kept = ext.import_kept(obj, allow_host=True)
        del kept
        return summary_of_c_read(described)

    @settings(max_examples=400, database=None, deadline=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(raw_fill_strategy())
    def check(raw_and_host):
        raw, host = raw_and_host
        foreign = ext.Foreign(DEVICE_BUFFER, raw=raw, host=host)
        outcomes = {}
        for name, read in (("cai.from_object", from_object), ("cai_python_view", c_view),
                           ("cai_python_from_object", c_import)):
            try:
                outcomes[name] = ("read", read(foreign))
            except (cai.CaiError, TypeError, ValueError, BufferError, OverflowError) as error:
                outcomes[name] = ("refused", f"{type(error).__name__}: {error}")
        gc.collect()
        assert ext.foreign_outstanding() == 0, outcomes
        assert ext.foreign_view_releases() == 0, outcomes
        assert len(set(outcomes.values())) == 1 or {v for v, _ in outcomes.values()} == {"refused"}, outcomes
        for verdict, what in outcomes.values():
            assert verdict == "read" or "'Foreign'" in what or "CAI_ERROR_OUT_OF_BOUNDS" in what, outcomes

    check()
