"""DLPack both ways: cai.from_object of a DLPack producer and cai.Array.__dlpack__. numpy is the
real producer and consumer here (host memory, so refused unless asked for); device memory comes
from the fake CUDA driver (a test double) and goes through capsules libcai made itself."""

import ctypes
import gc
import sys
import weakref

import numpy
import pytest

import cai
from conftest import (
    ALL_FOUR,
    CapsuleOf,
    EXCHANGE_DLTENSOR_FROM_PY_OBJECT,
    EXCHANGE_MANAGED_TENSOR_FROM_PY_OBJECT,
    KEYWORD_SETS,
    TorchLikeStream,
    exchange_table_entry,
    keyword_producer,
    take_and_delete_through_exchange_table,
)

PyCapsule_GetName = ctypes.pythonapi.PyCapsule_GetName
PyCapsule_GetName.restype = ctypes.c_char_p
PyCapsule_GetName.argtypes = [ctypes.py_object]


def capsule_name(capsule):
    return PyCapsule_GetName(capsule).decode()


class Producer:
    """A DLPack producer that hands out another object's capsules, recording what it was asked."""

    def __init__(self, source, legacy_only=False):
        self.source, self.legacy_only, self.calls = source, legacy_only, []

    def __dlpack_device__(self):
        return self.source.__dlpack_device__()

    def __dlpack__(self, stream=None, **kwargs):
        if self.legacy_only and kwargs:
            raise TypeError("__dlpack__() got an unexpected keyword argument 'max_version'")
        self.calls.append(dict(stream=stream, **kwargs))
        return self.source.__dlpack__(stream=stream, **kwargs)


def device_array(fake, stream=None, **extra):
    interface = {"shape": (4, 8), "typestr": "<f4", "data": (fake.alloc(256), False), "version": 3}
    if stream is not None:
        interface["stream"] = stream
    interface.update(extra)
    return cai.from_object(interface, sync=False)


def test_numpy_host_memory_is_refused_naming_the_device_real_numpy():
    with pytest.raises(cai.CaiError, match=r"kDLCPU \(1\).*allow_host") as refused:
        cai.from_object(numpy.arange(4.0))
    assert refused.value.status == "CAI_ERROR_HOST_MEMORY"


@pytest.mark.parametrize(
    "make",
    [
        lambda: numpy.arange(24, dtype=numpy.float32).reshape(4, 6),
        lambda: numpy.arange(24, dtype=numpy.int16).reshape(4, 6)[:, ::2],
        lambda: numpy.arange(24, dtype=numpy.float64).reshape(4, 6)[::-1],
        lambda: numpy.asfortranarray(numpy.arange(24, dtype=numpy.complex64).reshape(4, 6)),
        lambda: numpy.arange(10, dtype=numpy.uint8)[3:7],
        lambda: numpy.array([True, False, True]),
        lambda: numpy.zeros((0, 3), dtype=numpy.float32),
    ],
)
def test_numpy_arrays_taken_with_allow_host_match_numpy_both_ways_real_numpy(make):
    x = make()
    a = cai.from_object(x, allow_host=True)
    assert a.shape == x.shape and a.strides == x.strides and a.dtype == x.dtype.str
    assert a.__dlpack_device__() == (1, 0)
    if x.size:
        assert a.data_ptr == x.ctypes.data, "byte_offset folded in: the first element's address"
    y = numpy.from_dlpack(a)
    assert y.shape == x.shape and y.dtype == x.dtype and numpy.array_equal(y, x)
    if x.size:
        assert y.ctypes.data == x.ctypes.data, "a view, not a copy"


def test_read_only_flag_carries_both_ways_real_numpy():
    x = numpy.arange(4.0)
    x.flags.writeable = False
    a = cai.from_object(x, allow_host=True)
    assert a.readonly
    with pytest.raises(cai.CaiError, match="read-only"):
        cai.from_object(x, allow_host=True, writable=True)
    y = numpy.from_dlpack(a)
    assert not y.flags.writeable
    with pytest.raises(cai.CaiError, match="legacy DLPack tensor cannot say so"):
        a.__dlpack__()  # no max_version: the legacy struct cannot say read-only


def test_capsules_follow_the_protocol_names_and_are_marked_used(fake):
    a = device_array(fake)
    assert capsule_name(a.__dlpack__()) == "dltensor"
    versioned = a.__dlpack__(max_version=(1, 0))
    assert capsule_name(versioned) == "dltensor_versioned"

    b = cai.from_object(CapsuleOf(versioned, a.__dlpack_device__()))
    assert capsule_name(versioned) == "used_dltensor_versioned"
    assert b.data_ptr == a.data_ptr and b.shape == a.shape and b.typestr == a.typestr
    with pytest.raises(TypeError, match="no unused"):
        cai.from_object(CapsuleOf(versioned, a.__dlpack_device__()))


def test_device_memory_round_trips_through_libcais_own_capsules_fake_driver(fake):
    a = device_array(fake)
    assert a.__dlpack_device__() == (2, 0), "kDLCUDA, device 0, as the driver says"
    producer = Producer(a)
    b = cai.from_object(producer)
    assert producer.calls[0]["max_version"] == (1, 1)
    assert b.data_ptr == a.data_ptr and b.shape == (4, 8) and b.strides == (32, 4)
    assert b.__dlpack_device__() == (2, 0)
    legacy = cai.from_object(Producer(a, legacy_only=True))
    assert legacy.data_ptr == a.data_ptr, "a producer from before max_version gives the legacy struct"


PyCapsule_GetPointer = ctypes.pythonapi.PyCapsule_GetPointer
PyCapsule_GetPointer.restype = ctypes.c_void_p
PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
# DLManagedTensorVersioned: version (8 bytes), manager_ctx, deleter, flags, then dl_tensor's
# data (8 each) and its device: device_type (4), device_id (4).
VERSIONED_DEVICE_ID_OFFSET = 44


def capsule_naming_device(array, device_id):
    """A versioned capsule of `array` whose tensor names CUDA device `device_id`, whatever
    device its memory is on: a producer that says the wrong device."""
    capsule = array.__dlpack__(max_version=(1, 1))
    tensor = PyCapsule_GetPointer(capsule, b"dltensor_versioned")
    ctypes.c_int32.from_address(tensor + VERSIONED_DEVICE_ID_OFFSET).value = device_id
    return capsule


def test_a_tensor_naming_another_device_than_its_pointers_is_refused_fake_driver(fake):
    a = device_array(fake)  # device 0's memory
    honest = CapsuleOf(capsule_naming_device(a, 0), (2, 0))
    assert cai.from_object(honest, pointer_check=cai.POINTER_CHECK_ALWAYS).data_ptr == a.data_ptr
    for check in (cai.POINTER_CHECK_ALWAYS, None):
        lying = CapsuleOf(capsule_naming_device(a, 1), (2, 1))
        with pytest.raises(cai.CaiError, match=r"CUDA device 1 .* memory of device 0") as refused:
            cai.from_object(lying, pointer_check=check)
        assert refused.value.status == "CAI_ERROR_NOT_DEVICE_POINTER"
    on_device_1 = device_array(fake, data=(fake.alloc(256, device=1), False))
    assert cai.from_object(CapsuleOf(capsule_naming_device(on_device_1, 1), (2, 1))).__dlpack_device__() == (2, 1)
    unchecked = CapsuleOf(capsule_naming_device(a, 1), (2, 1))
    b = cai.from_object(unchecked, sync=False, pointer_check=cai.POINTER_CHECK_NEVER)
    assert b.__dlpack_device__() == (2, 1), "no pointer asked: the producer's word is all there is"


def test_the_consumer_stream_is_passed_and_ordered_after_the_producers_fake_driver(fake):
    producer_stream, consumer_stream = fake.stream(), fake.stream()
    a = device_array(fake, stream=producer_stream)
    producer = Producer(a)
    fake.begin(0)
    cai.from_object(producer, stream=consumer_stream)
    assert producer.calls[-1]["stream"] == consumer_stream
    assert "cuStreamWaitEvent %s" % fake.stream_name(consumer_stream) in fake.log()
    cai.from_object(producer, sync=False)
    assert producer.calls[-1]["stream"] == -1, "no sync asked: DLPack's -1"
    cai.from_object(producer)
    assert producer.calls[-1]["stream"] is None, "no consumer stream: DLPack's None (legacy default)"


@pytest.mark.parametrize("takes, capsule", list(zip(KEYWORD_SETS, ["versioned", "versioned", "legacy"])))
def test_dlpack_is_asked_with_all_four_keywords_then_fewer_on_every_read_real_numpy(takes, capsule):
    """`__dlpack__` is asked with the array API standard's four keywords, `dl_device` and
    `copy` at their defaults (None), then, refused with a TypeError, with `stream` and
    `max_version`, then with `stream` alone: on every read, for nothing of a type is learned.
    Each read sees what numpy sees, the versioned struct where the producer can give it
    (read-only carried), the legacy one from a producer from before DLPack 1.0 (a writable
    array)."""
    values = numpy.arange(12, dtype=numpy.float32).reshape(3, 4)
    # numpy refuses a read-only array the legacy struct, which cannot say so.
    values.flags.writeable = capsule == "legacy"
    Producer = keyword_producer(values, takes)
    for read in range(3):
        taken = cai.from_object(Producer(), sync=False, allow_host=True)
        assert numpy.array_equal(numpy.from_dlpack(taken), values) and taken.data_ptr == values.ctypes.data
        assert taken.readonly == (capsule == "versioned"), "read-only carried by the versioned struct"
    tried = KEYWORD_SETS[: KEYWORD_SETS.index(takes) + 1]
    assert [sorted(asked) for asked in Producer.asked] == tried * 3
    assert Producer.asked[0] == {"stream": None, "max_version": (1, 1), "dl_device": None, "copy": None}


def test_a_c_view_asks_dlpack_never_to_copy_with_each_keyword_set_real_numpy(offer_ext):
    """cai_python_view lets go of the tensor it took and keeps its pointer, so it asks for the
    producer's own memory: `copy=False` in both newer keyword sets; a producer that takes
    `max_version` but not `copy` is asked with `stream` alone (a producer from before `copy`
    never copies)."""
    values = numpy.arange(4, dtype=numpy.float32)
    Producer = keyword_producer(values, ALL_FOUR)
    assert offer_ext.view(Producer(), allow_host=True)["data"] == values.ctypes.data
    assert Producer.asked == [{"stream": None, "max_version": (1, 1), "dl_device": None, "copy": False}]
    NoCopyKeyword = keyword_producer(values, ["stream", "max_version"])
    for _ in range(2):
        assert offer_ext.view(NoCopyKeyword(), allow_host=True)["data"] == values.ctypes.data
    assert [sorted(asked) for asked in NoCopyKeyword.asked] == [
        sorted(ALL_FOUR), ["copy", "max_version", "stream"], ["stream"]] * 2
    assert NoCopyKeyword.asked[1]["copy"] is False


def test_a_types_dlpack_keywords_follow_a_method_replaced_between_reads_real_numpy():
    """A type whose `__dlpack__` changes between reads is asked as its method is now: one that
    takes all four keywords, replaced by one from before DLPack 1.0 (refused, then asked with
    fewer), then by one that takes all four again (asked with all four at once)."""
    values = numpy.arange(4, dtype=numpy.int16)
    Producer = keyword_producer(values, ALL_FOUR)
    assert numpy.array_equal(numpy.from_dlpack(cai.from_object(Producer(), allow_host=True)), values)
    older = keyword_producer(values, ["stream"])
    Producer.__dlpack__ = older.__dlpack__
    Producer.asked = older.asked
    assert numpy.array_equal(numpy.from_dlpack(cai.from_object(Producer(), allow_host=True)), values)
    assert [sorted(asked) for asked in older.asked] == KEYWORD_SETS
    newer = keyword_producer(values, ALL_FOUR)
    Producer.__dlpack__, Producer.asked = newer.__dlpack__, newer.asked
    assert numpy.array_equal(numpy.from_dlpack(cai.from_object(Producer(), allow_host=True)), values)
    assert [sorted(asked) for asked in newer.asked] == [sorted(ALL_FOUR)]


def test_an_instance_is_asked_from_all_four_keywords_whatever_the_last_one_answered_real_numpy():
    """A wrapper type whose instances forward `__dlpack__` to different producers: after one
    from before DLPack 1.0 (asked with each set in turn), a read-only numpy array wrapped is
    asked with all four at once and read read-only through the versioned struct; what one
    instance answered decides nothing for the next."""
    writable = numpy.arange(4, dtype=numpy.float32)
    read_only = numpy.arange(6, dtype=numpy.float32)
    read_only.flags.writeable = False

    class Wrapper:
        asked = []

        def __init__(self, inner):
            self.inner = inner

        def __dlpack_device__(self):
            return self.inner.__dlpack_device__()

        def __dlpack__(self, **keywords):
            Wrapper.asked.append(sorted(keywords))
            return self.inner.__dlpack__(**keywords)

    legacy = Wrapper(keyword_producer(writable, ["stream"])())
    assert cai.from_object(legacy, allow_host=True).readonly is False
    assert Wrapper.asked == KEYWORD_SETS
    Wrapper.asked.clear()
    taken = cai.from_object(Wrapper(read_only), allow_host=True)
    assert taken.readonly and taken.data_ptr == read_only.ctypes.data and taken.shape == (6,)
    assert Wrapper.asked == [sorted(ALL_FOUR)]


def test_a_keyboard_interrupt_is_raised_not_taken_for_a_refused_keyword_real_numpy():
    """Only a TypeError makes libcai ask `__dlpack__` again with fewer keywords; a
    KeyboardInterrupt raised by the first call is raised at once, never cleared."""
    values = numpy.arange(4, dtype=numpy.float32)
    Producer = keyword_producer(values, ["stream"])

    def interrupted(self, **keywords):
        Producer.asked.append(sorted(keywords))
        raise KeyboardInterrupt

    Producer.__dlpack__, Producer.asked = interrupted, []
    with pytest.raises(KeyboardInterrupt):
        cai.from_object(Producer(), allow_host=True)
    assert Producer.asked == [sorted(ALL_FOUR)]


def test_a_typeerror_of_every_keyword_set_is_raised_and_the_next_read_starts_from_all_four_real_numpy():
    """A `__dlpack__` that raises TypeError whatever it is asked (a failure of its own, not a
    keyword refused) has its last TypeError raised, each set asked once, and the next read
    asks with all four again."""
    values = numpy.arange(4, dtype=numpy.float32)
    failing = [True]

    class Failing:
        asked = []

        def __dlpack_device__(self):
            return (1, 0)

        def __dlpack__(self, **keywords):
            type(self).asked.append(sorted(keywords))
            if failing[0]:
                raise TypeError("cannot export this dtype")
            return values.__dlpack__(**keywords)

    with pytest.raises(TypeError, match="cannot export this dtype"):
        cai.from_object(Failing(), allow_host=True)
    assert Failing.asked == KEYWORD_SETS
    failing[0], Failing.asked = False, []
    assert cai.from_object(Failing(), allow_host=True).readonly is False
    assert Failing.asked == [sorted(ALL_FOUR)]


def test_the_capsule_keeps_the_array_alive_until_its_tensor_is_deleted_fake_driver(fake):
    a = device_array(fake)
    alive = weakref.ref(a)
    capsule = a.__dlpack__(max_version=(1, 0))
    del a
    gc.collect()
    assert alive() is not None, "the unconsumed capsule holds the array"
    del capsule
    gc.collect()
    assert alive() is None, "collecting the capsule ran the tensor's deleter"

    a = device_array(fake)
    alive = weakref.ref(a)
    b = cai.from_object(Producer(a))
    del a
    gc.collect()
    assert alive() is not None, "the consumer's array holds the tensor, which holds the array"
    del b
    gc.collect()
    assert alive() is None


def test_no_copies_and_no_other_device_fake_driver(fake):
    a = device_array(fake)
    with pytest.raises(BufferError, match="never copies"):
        a.__dlpack__(copy=True)
    with pytest.raises(BufferError, match=r"\(2, 0\).*\(1, 0\)"):
        a.__dlpack__(dl_device=(1, 0))
    assert capsule_name(a.__dlpack__(dl_device=(2, 0), copy=False)) == "dltensor"


def test_what_dlpack_cannot_carry_is_refused_naming_it_fake_driver(fake):
    masked = cai.from_object(
        {
            "shape": (4,),
            "typestr": "<f4",
            "data": (fake.alloc(64), False),
            "version": 3,
            "mask": {"shape": (4,), "typestr": "|b1", "data": (fake.alloc(64), False), "version": 3},
        }
    )
    with pytest.raises(cai.CaiError, match="mask"):
        masked.__dlpack__()
    dates = device_array(fake, typestr="<M8[ns]")
    with pytest.raises(cai.CaiError, match="no DLPack dtype"):
        dates.__dlpack__()
    swapped = device_array(fake, typestr=">f4")
    with pytest.raises(cai.CaiError, match="byte order"):
        swapped.__dlpack__()


@pytest.fixture(scope="module")
def exchange_producer():
    from conftest import ROOT, compile_shared

    lib = ctypes.CDLL(str(compile_shared(ROOT / "python" / "tests" / "exchange_producer.c", "libexchange_producer.so")))
    lib.producer_exchange_api.restype = ctypes.c_void_p
    lib.producer_set.argtypes = [ctypes.c_uint64, ctypes.c_uint64]
    return lib


def test_a_types_c_exchange_table_is_used_instead_of_the_python_call_fake_driver(fake, exchange_producer):
    lib = exchange_producer

    class Producer:
        __c_dlpack_exchange_api__ = lib.producer_exchange_api()

        def __dlpack_device__(self):
            return (2, 0)

        def __dlpack__(self, **kwargs):
            raise AssertionError("the C exchange table should have been used")

    data, producer_stream, consumer_stream = fake.alloc(256), fake.stream(), fake.stream()
    lib.producer_set(data, producer_stream)
    fake.begin(0)
    before = lib.producer_deleted()
    a = cai.from_object(Producer(), stream=consumer_stream)
    assert a.data_ptr == data and a.shape == (4, 8) and a.typestr == "<f4"
    assert lib.producer_stream_asks() >= 1, "no sync in the table's call: the work stream was asked for"
    assert "cuStreamWaitEvent %s" % fake.stream_name(consumer_stream) in fake.log()
    del a
    gc.collect()
    assert lib.producer_deleted() == before + 1, "the tensor's deleter ran once"

    asks = lib.producer_stream_asks()
    b = cai.from_object(Producer(), sync=False)
    assert lib.producer_stream_asks() == asks, "no sync wanted: no work stream asked for"
    del b


def test_the_exchange_table_as_a_capsule_on_the_type_fake_driver(fake, exchange_producer):
    lib = exchange_producer
    new_capsule = ctypes.pythonapi.PyCapsule_New
    new_capsule.restype = ctypes.py_object
    new_capsule.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
    name = ctypes.create_string_buffer(b"dlpack_exchange_api")

    class Producer:
        __dlpack_c_exchange_api__ = new_capsule(lib.producer_exchange_api(), name, None)

        def __dlpack_device__(self):
            return (2, 0)

        def __dlpack__(self, **kwargs):
            raise AssertionError("the C exchange table should have been used")

    Producer.name = name  # the capsule's name must outlive it
    lib.producer_set(fake.alloc(256), 0)
    handed = lib.producer_handed_out()
    a = cai.from_object(Producer(), sync=False)
    assert lib.producer_handed_out() == handed + 1 and a.shape == (4, 8)


class IntPair(tuple):
    pass


class Int(int):
    pass


# (value, what `__dlpack__(max_version=value)` gives: the capsule's name, or the exception and
# the words of its message). An int subclass, a tuple subclass and bool are ints and pairs as
# Python says; anything else is named.
MAX_VERSIONS = [
    ((1, 3), "dltensor_versioned"),
    ((0, 8), "dltensor"),
    (IntPair((1, 0)), "dltensor_versioned"),
    ((Int(1), Int(2)), "dltensor_versioned"),
    ((True, False), "dltensor_versioned"),
    ((2**70, 0), (ValueError, "max_version holds an int out of range: (<2 items>)")),
    ((1, -1), (ValueError, "max_version holds an int out of range: (<2 items>)")),
    ((1, 2**32), (ValueError, "max_version holds an int out of range")),
    ([1, 3], (TypeError, "max_version must be None or a pair of ints, not [<2 items>]")),
    ((1,), (TypeError, "max_version must be None or a pair of ints, not (<1 items>,)")),
    ((1, 2, 3), (TypeError, "max_version must be None or a pair of ints")),
    ((1.0, 3), (TypeError, "max_version must be None or a pair of ints, not (<2 items>)")),
    ((numpy.int64(1), 3), (TypeError, "max_version must be None or a pair of ints")),
    ("13", (TypeError, "max_version must be None or a pair of ints, not '13'")),
]


def pair_outcomes(export):
    """What `export(max_version=value)` gives for each of MAX_VERSIONS, and for `dl_device`
    the same values (a device pair is checked before the device itself)."""
    seen = []
    for value, _ in MAX_VERSIONS:
        try:
            seen.append(capsule_name(export(max_version=value)))
        except (TypeError, ValueError) as e:
            seen.append((type(e), str(e)))
    return seen


@pytest.mark.parametrize("producer", ["cai.Array", "offered"])
def test_max_version_is_read_as_a_pair_of_ints_or_named(producer, offer_ext):
    values = numpy.zeros((2, 3), dtype=numpy.float32)
    if producer == "cai.Array":
        source = cai.from_object(values, allow_host=True)
    else:
        source = offer_ext.Image(values.ctypes.data, 2, 3, host=True, base=values)
    for (value, expected), seen in zip(MAX_VERSIONS, pair_outcomes(source.__dlpack__)):
        if isinstance(expected, str):
            assert seen == expected, value
        else:
            kind, words = expected
            assert seen[0] is kind and words in seen[1], (value, seen)
    with pytest.raises(TypeError, match=r"dl_device must be None or a pair of ints, not \[<2 items>\]"):
        source.__dlpack__(dl_device=[1, 0])
    with pytest.raises(ValueError, match=r"dl_device holds an int out of range: \(<2 items>\)"):
        source.__dlpack__(dl_device=(1, 2**31))
    assert capsule_name(source.__dlpack__(dl_device=(Int(1), 0), max_version=(1, 0))) == "dltensor_versioned"


def test_cai_arrays_exchange_table_keeps_counts_and_refuses_a_released_array():
    """cai.Array's exchange table runs without PyO3's count of the thread (DLPack's consumer
    calls it attached): tensors taken and deleted, and DLTensor views, leave the array's
    reference count where it was and end every export; a released array is refused with a
    Python exception, nothing written."""
    x = numpy.arange(12.0)
    a = cai.from_object(x, allow_host=True)
    take = exchange_table_entry(cai.Array, EXCHANGE_MANAGED_TENSOR_FROM_PY_OBJECT)
    view = exchange_table_entry(cai.Array, EXCHANGE_DLTENSOR_FROM_PY_OBJECT)
    dltensor = (ctypes.c_uint64 * 6)()  # a DLTensor: 48 bytes

    def viewed():
        assert view(a, ctypes.addressof(dltensor)) == 0
        assert dltensor[0] == x.ctypes.data

    take_and_delete_through_exchange_table(a, each=viewed)
    a.release()  # every export ended: release() refuses while one is alive
    out, dltensor = ctypes.c_void_p(), (ctypes.c_uint64 * 6)()
    for entry, written in ((take, out), (view, dltensor)):
        with pytest.raises(ValueError, match=r"the cai.Array was released"):
            entry(a, ctypes.addressof(written))
    assert out.value is None and not any(dltensor)


def test_cai_array_dlpack_keeps_counts_and_lets_go_of_what_it_drops_fake_driver(fake):
    """cai.Array's `__dlpack__` with the plain arguments consumers pass, and its
    `__dlpack_device__`, run without PyO3's count of the thread: many calls leave the counts of
    the array and of the arguments where they were, and every export ends with its capsule. A
    call with a stream object (whose reading drops the AttributeError `__cuda_stream__` raises,
    holding the object) runs counted, so the stream object goes at once."""
    a = device_array(fake, stream=fake.stream())
    handle, version, device = fake.stream(), (1, 0), (2, 0)
    before = [sys.getrefcount(x) for x in (a, version, device)]
    for _ in range(2000):
        a.__dlpack__(stream=handle, max_version=version, dl_device=device, copy=False)
        assert a.__dlpack_device__() == device
    assert [sys.getrefcount(x) for x in (a, version, device)] == before
    stream = TorchLikeStream(fake.stream())
    alive = weakref.ref(stream)
    capsule = a.__dlpack__(stream=stream, max_version=version)
    del stream
    assert alive() is None, "the stream object waits in a pool of deferred drops"
    with pytest.raises(BufferError, match="1 DLPack export"):
        a.release()
    del capsule
    a.release()
