"""docs/conformance.md rows driven through the Python binding. Import and sync run against the fake
CUDA driver (a test double) set up in conftest.py; pure rules use cai.validate."""

import ctypes

import pytest

import cai
from conftest import DEVICE_BUFFER


@pytest.fixture(autouse=True)
def current_context(fake):
    """Every test starts with device 0 current and an empty call log."""


def desc(shape=(4,), typestr="<f4", ptr=DEVICE_BUFFER, readonly=False, version=3, **extra):
    d = {"shape": shape, "typestr": typestr, "data": (ptr, readonly), "version": version}
    d.update(extra)
    return d


def rejected(d, status, part=""):
    with pytest.raises(cai.CaiError) as info:
        cai.validate(d)
    assert info.value.status == status, str(info.value)
    assert part in str(info.value), str(info.value)
    assert isinstance(info.value, ValueError)
    return info.value


class Producer:
    def __init__(self, d):
        self.__cuda_array_interface__ = d


def test_row_01_minimal_descriptor_imports_c_contiguous_without_sync(fake):
    array = cai.from_object(Producer(desc(ptr=fake.alloc(64))))
    assert array.is_c_contiguous and array.shape == (4,) and array.nbytes == 16
    assert array.pointer_info["memory_type"] == 2
    assert fake.calls("cuStream") == [] and fake.calls("cuEvent") == []


def test_row_02_missing_version_is_invalid_version():
    d = desc()
    del d["version"]
    rejected(d, "CAI_ERROR_INVALID_VERSION", "required")


def test_row_03_older_versions_use_their_own_rules(fake):
    for version in (0, 1, 2):
        cai.validate(desc(version=version))
    a = cai.from_object(desc(ptr=fake.alloc(64), version=2, stream=fake.stream()))
    assert fake.calls("cuStream") == [], "a v2 stream is ignored"
    assert a.stream is None
    rejected(desc(version=0, mask=desc(typestr="|b1")), "CAI_ERROR_INVALID_MASK", "version 0")


@pytest.mark.parametrize("version", [4, -1, True, "3", 3.0, None])
def test_row_04_bad_versions_are_rejected_naming_the_value(version):
    rejected(desc(version=version), "CAI_ERROR_INVALID_VERSION", repr(version))


def test_row_05_wrong_kinds_of_object_name_their_type():
    class NoInterface:
        pass

    with pytest.raises(TypeError, match="obj must be .* not a 'NoInterface'"):
        cai.from_object(NoInterface())
    with pytest.raises(TypeError, match="obj must be .* not a 'NoInterface'"):
        cai.validate(NoInterface())
    with pytest.raises(TypeError, match="Producer.__cuda_array_interface__ is a 'list', not a dict"):
        cai.validate(Producer([1, 2]))


@pytest.mark.parametrize(
    "data", [(0x10000,), [0x10000, False, 1], 0x10000, (True, False), ("0x10", False), (1.5, False),
             (-8, False), (2**64, False), (0x10000, 0), (0x10000, None)])
def test_row_06_malformed_data_is_invalid_data(data):
    d = desc()
    d["data"] = data
    rejected(d, "CAI_ERROR_INVALID_DATA")


def test_row_07_lists_are_accepted_for_tuples():
    cai.validate({"shape": [2, 3], "typestr": "<f4", "data": [0x10000, False], "version": 3, "strides": [12, 4]})


def test_row_08_unknown_keys_are_ignored():
    cai.validate(desc(future_key=object(), another={"x": 1}))


def test_row_09_zero_d_array():
    a = cai.from_object(desc(shape=(), strides=()), sync=False)
    assert (a.size, a.shape, a.strides, a.nbytes) == (1, (), (), 4)


@pytest.mark.parametrize("shape", [(-1,), (3, -2), (1.5,), ("3",), (True,), None, 3])
def test_row_10_bad_extents_are_invalid_shape(shape):
    rejected(desc(shape=shape), "CAI_ERROR_INVALID_SHAPE")


def test_row_11_too_many_dimensions_name_the_limit():
    rejected(desc(shape=(1,) * 65), "CAI_ERROR_INVALID_SHAPE", "64")


def test_row_12_absent_none_and_explicit_c_strides_are_the_same_and_export_as_none():
    arrays = [cai.from_object(d, sync=False) for d in (desc(shape=(2, 3)), desc(shape=(2, 3), strides=None),
                                                       desc(shape=(2, 3), strides=(12, 4)))]
    for a in arrays:
        assert a.strides == (12, 4) and a.is_c_contiguous
        assert a.__cuda_array_interface__["strides"] is None


def test_row_13_f_order_is_f_contiguous():
    a = cai.from_object(desc(shape=(2, 3), strides=(4, 8)), sync=False)
    assert a.is_f_contiguous and not a.is_c_contiguous
    assert a.__cuda_array_interface__["strides"] == (4, 8)


def test_row_14_every_other_element_is_strided():
    a = cai.from_object(desc(shape=(5,), strides=(8,)), sync=False)
    assert not a.is_c_contiguous and not a.is_f_contiguous


def test_row_15_negative_strides_are_accepted(fake):
    base = fake.alloc(64)
    a = cai.from_object(desc(shape=(4,), strides=(-4,), ptr=base + 12))
    assert a.strides == (-4,)
    with pytest.raises(cai.CaiError, match="OUT_OF_BOUNDS"):
        cai.from_object(desc(shape=(4,), strides=(-4,), ptr=base + 8))


def test_row_16_unaligned_strides_are_accepted():
    cai.validate(desc(shape=(4,), strides=(6,)))


@pytest.mark.parametrize("strides", [(4, 4), (), (1.0,), (True,), "4", 4])
def test_row_17_strides_not_matching_ndim_are_invalid_strides(strides):
    rejected(desc(shape=(4,), strides=strides), "CAI_ERROR_INVALID_STRIDES")


@pytest.mark.parametrize("d", [desc(shape=(2**32, 2**32), typestr="|u1"), desc(shape=(2**64,)),
                               desc(shape=(4,), strides=(2**63,)), desc(shape=(2**62,), typestr="<f8")])
def test_row_18_overflow_is_rejected(d):
    rejected(d, "CAI_ERROR_OVERFLOW")


def test_row_19_size_one_dimensions_carry_any_stride():
    a = cai.from_object(desc(shape=(1, 4, 1), strides=(999, 4, -3)), sync=False)
    assert a.is_c_contiguous and a.is_f_contiguous


def test_row_20_21_zero_size_arrays_export_pointer_0_and_never_query(fake):
    for ptr in (0, 0xDEAD0000):  # 0xDEAD0000 is no allocation: it must not be asked about
        a = cai.from_object(desc(shape=(0, 3), ptr=ptr))
        assert a.__cuda_array_interface__["data"] == (0, False)
        assert a.pointer_info is None
    assert fake.log() == ""


def test_row_22_null_pointer_with_elements_is_invalid_data():
    rejected(desc(ptr=0), "CAI_ERROR_INVALID_DATA", "NULL")


def test_row_23_old_none_pointer_for_zero_size():
    cai.validate(desc(shape=(0,), ptr=None, version=0))
    rejected(desc(shape=(0,), ptr=None, version=3), "CAI_ERROR_INVALID_DATA")
    rejected(desc(shape=(2,), ptr=None, version=0), "CAI_ERROR_INVALID_DATA")


def test_row_24_unregistered_host_memory_is_not_a_device_pointer(fake):
    host = ctypes.create_string_buffer(64)
    with pytest.raises(cai.CaiError) as info:
        cai.from_object(desc(ptr=ctypes.addressof(host)))
    assert info.value.status == "CAI_ERROR_NOT_DEVICE_POINTER"


def test_row_25_managed_memory_is_reported(fake):
    a = cai.from_object(desc(ptr=fake.alloc(64, memory_type=4, flags=1)))
    assert a.pointer_info["is_managed"] == 1


def test_row_26_extent_past_the_allocation_is_out_of_bounds(fake):
    with pytest.raises(cai.CaiError, match="outside its allocation") as info:
        cai.from_object(desc(shape=(17,), ptr=fake.alloc(64)))
    assert info.value.status == "CAI_ERROR_OUT_OF_BOUNDS"


@pytest.mark.parametrize("typestr,itemsize", [("|b1", 1), ("<i8", 8), ("<c16", 16), (">i4", 4), ("<M8[ns]", 8),
                                               ("|S5", 5), ("<U3", 12), ("|V2", 2)])
def test_rows_28_to_30_typestrs_take_numpys_itemsize(typestr, itemsize):
    assert cai.from_object(desc(typestr=typestr), sync=False).itemsize == itemsize


@pytest.mark.parametrize("typestr", ["|O8", "garbage", "", "<f", "|V0", "|S0", " <f4", 4, None, "x" * 40, "<f4\ud800"])
def test_row_31_bad_typestrs_are_invalid_typestr_quoting_them(typestr):
    error = rejected(desc(typestr=typestr), "CAI_ERROR_INVALID_TYPESTR")
    if typestr == "<f4\ud800":
        assert "not valid Unicode" in str(error), str(error)
    elif isinstance(typestr, str) and len(typestr) < 31:
        assert f'"{typestr}"' in str(error) or repr(typestr) in str(error), str(error)


def test_row_32_structured_descr_must_add_up():
    fields = [("x", "<f4"), ("y", "<f4"), ("id", "<i4")]
    a = cai.from_object(desc(typestr="|V12", descr=fields), sync=False)
    assert a.__cuda_array_interface__["descr"] == fields
    rejected(desc(typestr="|V12", descr=fields[:2]), "CAI_ERROR_INVALID_DESCR", "add up to 8")
    rejected(desc(typestr="|V12", descr=[("x", "<f4", (3,))]), "CAI_ERROR_INVALID_DESCR", "subarray")
    rejected(desc(typestr="|V12", descr=[("x", [("a", "<f4")])]), "CAI_ERROR_INVALID_DESCR", "nested")
    error = rejected(desc(typestr="|V12", descr=[("x", "<f")]), "CAI_ERROR_INVALID_DESCR", '"<f"')
    assert str(error).count("CAI_ERROR_") == 1, "one status name, not nested ones"


def test_row_33_numpys_default_descr_is_accepted():
    cai.validate(desc(descr=[("", "<f4")]))


def test_rows_34_35_mask_is_carried_as_a_nested_array():
    cai.validate(desc(mask=None))
    mask = Producer(desc(typestr="|b1"))
    a = cai.from_object(desc(mask=mask), sync=False)
    exported_mask = a.__cuda_array_interface__["mask"]
    assert isinstance(exported_mask, cai.Array) and exported_mask.owner is mask
    rejected(desc(mask=Producer(desc(typestr="|O8"))), "CAI_ERROR_INVALID_MASK", "mask: typestr")
    rejected(desc(mask=42), "CAI_ERROR_INVALID_MASK", "int")


def test_row_36_mask_of_another_shape_is_invalid_mask():
    rejected(desc(shape=(2, 3), mask=desc(shape=(3, 2), typestr="|b1")), "CAI_ERROR_INVALID_MASK", "shape")


def test_rows_37_38_read_only_is_enforced_and_preserved(fake):
    d = desc(ptr=fake.alloc(64), readonly=True)
    with pytest.raises(cai.CaiError) as info:
        cai.from_object(d, writable=True)
    assert info.value.status == "CAI_ERROR_READONLY"
    a = cai.from_object(d)
    assert a.readonly and a.__cuda_array_interface__["data"][1] is True
    assert cai.from_object(a).readonly, "round trip through a cai.Array"


def test_row_39_no_stream_no_sync(fake):
    cai.from_object(desc(ptr=fake.alloc(64), stream=None))
    assert fake.calls("cuStream") == []


@pytest.mark.parametrize("stream", [0, -1, True, False, "7", 7.0, 2**64])
def test_rows_40_41_bad_streams_are_invalid_stream(stream):
    error = rejected(desc(stream=stream), "CAI_ERROR_INVALID_STREAM")
    if stream == 0 and stream is not False:
        assert "disallowed" in str(error)


@pytest.mark.parametrize("stream,name", [(1, "legacy"), (2, "per-thread")])
def test_row_42_default_stream_values(fake, stream, name):
    cai.from_object(desc(ptr=fake.alloc(64), stream=stream))
    assert fake.calls("cuStreamSynchronize") == [f"cuStreamSynchronize {name}"]


def test_row_43_stream_ordered_sync_when_the_consumer_names_its_stream(fake):
    producer, consumer = fake.stream(), fake.stream()
    cai.from_object(desc(ptr=fake.alloc(64), stream=producer), stream=consumer)
    record, wait = fake.calls("cuEventRecord"), fake.calls("cuStreamWaitEvent")
    assert len(record) == 1 and record[0].endswith(fake.stream_name(producer))
    assert len(wait) == 1 and wait[0].startswith(f"cuStreamWaitEvent {fake.stream_name(consumer)} ")
    assert fake.calls("cuStreamSynchronize") == []


def test_row_44_blocking_sync_without_a_consumer_stream(fake):
    producer = fake.stream()
    cai.from_object(desc(ptr=fake.alloc(64), stream=producer))
    assert fake.calls("cuStreamSynchronize") == [f"cuStreamSynchronize {fake.stream_name(producer)}"]
    fake.begin()
    cai.from_object(desc(ptr=fake.alloc(64), stream=producer), stream=fake.stream(), sync=cai.SYNC_BLOCKING)
    assert len(fake.calls("cuStreamSynchronize")) == 1


def test_row_45_sync_false_makes_no_sync_call(fake):
    cai.from_object(desc(ptr=fake.alloc(64), stream=fake.stream()), stream=fake.stream(), sync=False)
    assert fake.calls("cuStream") == [] and fake.calls("cuEvent") == []


def test_slow_kernel_is_seen_only_after_a_sync_fake_driver_ordered_streams(fake):
    """The fake's streams keep order: a consumer reading right after import sees the producer's
    kernel only when libcai ordered it (the CPU twin of the GPU suite's slow-kernel test)."""
    n, pointer = 256, fake.alloc(1024)
    producer, consumer = fake.stream(), fake.stream()
    array = desc(ptr=pointer, shape=(n,), typestr="<u4", stream=producer)
    fake.launch_fill(producer, pointer, n, 7)
    cai.from_object(array, stream=consumer, sync=False)
    assert fake.read(consumer, pointer, n) == {0}, "without a sync the consumer overtakes the kernel"
    assert fake.lib.cuStreamSynchronize(ctypes.c_void_p(producer)) == 0
    for value, options in [(8, {"stream": consumer}), (9, {"stream": consumer, "sync": cai.SYNC_BLOCKING}),
                           (10, {})]:
        fake.launch_fill(producer, pointer, n, value)
        cai.from_object(array, **options)
        assert fake.read(consumer, pointer, n) == {value}, options


def test_consumer_stream_objects_fake_driver(fake):
    """Stream objects of cuda.core, PyTorch and CuPy give their handles; a NULL handle is the
    legacy default stream; a handle out of range is refused like an int."""

    class TorchLike:
        def __init__(self, handle):
            self.cuda_stream = handle

    class CupyLike:
        def __init__(self, handle):
            self.ptr = handle

    class CudaCoreLike:
        def __init__(self, handle):
            self.handle = handle

        def __cuda_stream__(self):
            return (0, self.handle)

    producer, consumer = fake.stream(), fake.stream()
    d = desc(ptr=fake.alloc(64), stream=producer)
    for make in (TorchLike, CupyLike, CudaCoreLike):
        fake.begin()
        cai.from_object(d, stream=make(consumer))
        assert fake.calls("cuStreamWaitEvent") and fake.calls("cuStreamWaitEvent")[0].startswith(
            f"cuStreamWaitEvent {fake.stream_name(consumer)} "), make
        fake.begin()
        cai.from_object(d, stream=make(0))
        assert fake.calls("cuStreamWaitEvent")[0].startswith("cuStreamWaitEvent legacy "), make
        for bad in (-5, 2**64 + 7, 2**200, "7", 1.0):
            with pytest.raises(cai.CaiError, match="INVALID_STREAM"):
                cai.from_object(d, stream=make(bad))


def test_bad_consumer_streams():
    with pytest.raises(cai.CaiError, match="INVALID_STREAM"):
        cai.from_object(desc(), stream=0, sync=False)
    with pytest.raises(TypeError):
        cai.from_object(desc(), stream="s", sync=False)
