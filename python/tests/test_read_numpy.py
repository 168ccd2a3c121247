"""A numpy array is read by numpy's C ABI (python/src/read/numpy.rs), handed to the core as the
DLTensor numpy's `__dlpack__` gives: the oracle is the same array read by its `__dlpack__`
(a proxy with only `__dlpack__` and `__dlpack_device__`), which must give the same Array, field
for field, and the same errors, word for word, for every dtype, layout and flag numpy has, from
Python and from C (`cai_python_view`). Arrays the ABI reader leaves to `__dlpack__` (a dtype or
a stride numpy's export refuses, a DLPack capsule as base) must still be read as before. Host
memory, no driver call (pointer_check NEVER): the session's fake driver is never asked."""

import sys
import tracemalloc
import weakref

import numpy
import pytest

import cai
from conftest import numpy_exports_read_only, public_fields

NEVER = cai.POINTER_CHECK_NEVER
# Before numpy 2.1 (no DLPack 1 versioned export) numpy's C ABI is not read: its arrays take
# `__dlpack__`, which refuses read-only ones (python/src/read/numpy.rs checks the version).
pytestmark = pytest.mark.skipif(
    not numpy_exports_read_only(),
    reason="numpy's C ABI is read for numpy 2.1 or later; python/test-requirements.txt pins one",
)


class ViaDLPack:
    """The oracle's producer: the array read by its own `__dlpack__`, as libcai read every numpy
    array before the ABI reader."""

    def __init__(self, array):
        self.array = array

    def __dlpack__(self, **arguments):
        return self.array.__dlpack__(**arguments)

    def __dlpack_device__(self):
        return self.array.__dlpack_device__()


def arrays():
    """name: a numpy array, each layout, dtype and flag numpy's export reads differently."""
    base = numpy.arange(2 * 3 * 4 * 5, dtype=numpy.float64).reshape(2, 3, 4, 5)
    out = {
        "C-contiguous": base.copy(),
        "Fortran": numpy.asfortranarray(base),
        "strided view": base[:, ::2, 1:, ::-1],
        "negative strides": base[::-1, ::-1],
        "broadcast (zero strides)": numpy.broadcast_to(numpy.arange(3.0), (4, 3)),
        "0-d": numpy.array(3.5),
        "size 0": numpy.zeros((0, 3), numpy.float32),
        # C-contiguous (a dimension of 1 has any stride), which numpy's export then truncates.
        "dimension of 1, odd stride": numpy.lib.stride_tricks.as_strided(numpy.zeros(8, numpy.int16), (1, 2), (5, 2)),
        "read-only": base.copy(),
        "32 dimensions": numpy.zeros((1,) * 31 + (2,), numpy.int16),
        "64 dimensions": numpy.zeros((1,) * 64, numpy.int8),
    }
    out["read-only"].flags.writeable = False
    for dtype in ("?", "i1", "u1", "i2", "u2", "i4", "u4", "i8", "u8", "f2", "f4", "f8", "c8", "c16",
                  numpy.intc, numpy.uintc, numpy.longlong, numpy.ulonglong):
        out[f"dtype {numpy.dtype(dtype).str} ({numpy.dtype(dtype).num})"] = numpy.ones((3, 2), dtype)
    return out


def refused_by_numpy():
    """name: arrays numpy's `__dlpack__` refuses, which the ABI reader leaves to it."""
    return {
        "byte-swapped": numpy.ones(3, numpy.dtype("f4").newbyteorder()),
        "longdouble": numpy.ones(3, numpy.longdouble),
        "clongdouble": numpy.ones(3, numpy.clongdouble),
        "structured": numpy.zeros(3, [("a", "<f4"), ("b", "<i2")]),
        "datetime": numpy.zeros(3, "M8[s]"),
        "bytes": numpy.zeros(3, "S4"),
        "object": numpy.array([None, 1], dtype=object),
        "StringDType (a new-style dtype)": numpy.array(["a", "bc"], dtype=numpy.dtypes.StringDType()),
        "stride not a whole item": numpy.lib.stride_tricks.as_strided(numpy.zeros(4, numpy.int32), (2,), (6,)),
    }


# Among arrays(): read by `__dlpack__` after all.
LEFT_TO_DLPACK = {"dimension of 1, odd stride"}
SKIPPED = {"ptr", "owner", "_as_parameter_", "buffer"}


def fields(array):
    """Every public value of an Array (the owner apart), and the values it holds."""
    out = public_fields(array, SKIPPED)
    out["values"] = numpy.from_dlpack(array).tolist() if array.size else []
    return out


def outcome(call):
    try:
        return ("array", fields(call()))
    except Exception as error:
        return ("raised", type(error).__name__, str(error))


@pytest.mark.parametrize("name", list(arrays()))
@pytest.mark.parametrize("options", [
    {"allow_host": True},
    {"allow_host": True, "writable": True},
    {"allow_host": False},
], ids=["allow_host", "writable", "host refused"])
def test_the_abi_reader_gives_the_dlpack_readers_array_and_errors_fake_driver(name, options):
    array = arrays()[name]
    read = lambda obj: cai.from_object(obj, sync=False, pointer_check=NEVER, **options)  # noqa: E731
    got, expected = outcome(lambda: read(array)), outcome(lambda: read(ViaDLPack(array)))
    assert got == expected
    if got[0] == "array":
        assert read(array).owner is array


def allocations_per_read(obj, reads=200):
    """Blocks of the interpreter's allocators alive per cai.Array read from `obj` (tracemalloc):
    the Array's object, and for a read by numpy's `__dlpack__` the tensor numpy allocated."""
    cai.from_object(obj, sync=False, allow_host=True, pointer_check=NEVER)
    held = [None] * reads
    tracemalloc.start()
    try:
        before = tracemalloc.take_snapshot()
        for index in range(reads):
            held[index] = cai.from_object(obj, sync=False, allow_host=True, pointer_check=NEVER)
        after = tracemalloc.take_snapshot()
    finally:
        tracemalloc.stop()
    return sum(stat.count_diff for stat in after.compare_to(before, "filename")) / reads


@pytest.mark.parametrize("name", list(arrays()))
def test_the_abi_reader_allocates_no_tensor_and_holds_the_array_as_dlpack_did_fake_driver(name):
    """What shows the ABI reader ran: each read keeps one block of the interpreter's allocators
    (the cai.Array), where a read by `__dlpack__` keeps two (numpy's tensor too), as for the
    array whose stride numpy's export truncates (left to it). Both ways a read holds two
    references to the array (its owner, and its struct's or numpy's tensor's), so that numpy's
    in-place resize refuses to move memory a cai.Array views."""
    array = arrays()[name]
    tensors = 1 if name in LEFT_TO_DLPACK else 0
    assert round(allocations_per_read(array)) == 1 + tensors
    assert round(allocations_per_read(ViaDLPack(array))) == 2
    before = sys.getrefcount(array)
    held = cai.from_object(array, sync=False, allow_host=True, pointer_check=NEVER)
    assert sys.getrefcount(array) == before + 2
    del held
    assert sys.getrefcount(array) == before


def test_a_viewed_array_refuses_to_resize_in_place_fake_driver():
    """numpy's resize (refcheck) counts references: with the cai.Array its only other holder,
    `owner.resize` must still refuse, as it does while a DLPack export of it lives."""
    held = cai.from_object(numpy.zeros(4, numpy.float32), sync=False, allow_host=True, pointer_check=NEVER)
    with pytest.raises(ValueError, match="resize"):
        held.owner.resize(1 << 16)
    assert held.shape == (4,)


@pytest.mark.parametrize("name", list(refused_by_numpy()))
def test_arrays_numpy_refuses_are_refused_by_numpy_as_before_fake_driver(name):
    array = refused_by_numpy()[name]
    read = lambda obj: cai.from_object(obj, sync=False, allow_host=True, pointer_check=NEVER)  # noqa: E731
    got, expected = outcome(lambda: read(array)), outcome(lambda: read(ViaDLPack(array)))
    assert got == expected
    assert got[0] == "raised", got


def test_an_array_over_a_dlpack_capsule_is_read_by_its_dlpack_as_before_fake_driver():
    """numpy reports the device of the tensor a capsule base holds: such an array (and a view of
    it, whose base chain ends there) is left to `__dlpack__`, and reads as the oracle does."""
    source = cai.from_object(numpy.arange(6, dtype=numpy.float32), sync=False, allow_host=True)
    over_capsule = numpy.from_dlpack(source)
    for array in (over_capsule, over_capsule[::2]):
        before = sys.getrefcount(array)
        read = cai.from_object(array, sync=False, allow_host=True, pointer_check=NEVER)
        assert sys.getrefcount(array) == before + 2  # owner and numpy's tensor: `__dlpack__`
        oracle = cai.from_object(ViaDLPack(array), sync=False, allow_host=True, pointer_check=NEVER)
        assert fields(read) == fields(oracle)


def test_a_subclass_is_read_by_its_own_protocols_fake_driver():
    """Only numpy's ndarray itself is read by its fields: a subclass may override `__dlpack__`
    or add the CAI, and is asked as any producer is."""
    asked = []

    class Logged(numpy.ndarray):
        def __dlpack__(self, **arguments):
            asked.append(arguments)
            return super().__dlpack__(**arguments)

    array = numpy.arange(4, dtype=numpy.float32).view(Logged)
    read = cai.from_object(array, sync=False, allow_host=True, pointer_check=NEVER)
    assert asked and read.shape == (4,)


@pytest.mark.parametrize("name", [*arrays(), *refused_by_numpy()])
def test_a_c_view_of_a_numpy_array_is_the_dlpack_readers_fake_driver(offer_ext, name):
    """`cai_python_view` reads a numpy array by its fields too, straight into the caller's
    struct, and what they decline by `__dlpack__`: the view (or the refusal) is the oracle's."""
    # (With host memory refused, which refusal a declined array meets first is the negotiation's
    # order for its type, not the reader's: those are viewed with host memory allowed only.)
    usable = name in arrays()
    array = arrays()[name] if usable else refused_by_numpy()[name]
    for allow_host in (True, False) if usable else (True,):
        got = outcome_of_view(lambda: offer_ext.view(array, allow_host=allow_host))
        assert got == outcome_of_view(lambda: offer_ext.view(ViaDLPack(array), allow_host=allow_host))
        assert got[0] == ("view" if allow_host and usable else "raised"), got


@pytest.mark.parametrize("name", list(arrays()))
def test_a_c_import_of_a_numpy_array_is_the_dlpack_readers_fake_driver(offer_ext, name):
    """`cai_python_from_object` reads a numpy array by its fields into a struct that holds a
    reference to it: the struct is the oracle's (its owner and release aside)."""
    array = arrays()[name]
    got, kept = offer_ext.import_kept(array, allow_host=True)
    expected, kept_too = offer_ext.import_kept(ViaDLPack(array), allow_host=True)
    assert got == expected
    del kept, kept_too


def test_a_c_import_holds_the_array_until_released_fake_driver(offer_ext):
    """The struct `cai_python_from_object` wrote holds a reference to the numpy array: its
    in-place resize refuses while the struct is held (as for numpy's own export), and works once
    it is released; released on a thread that never attaches, the reference is let go of too."""
    array = numpy.zeros(8, numpy.float32)
    before = sys.getrefcount(array)
    _, kept = offer_ext.import_kept(array, allow_host=True)
    assert sys.getrefcount(array) > before
    with pytest.raises(ValueError, match="reference"):
        array.resize(16)
    del kept
    assert sys.getrefcount(array) == before
    array.resize(16)
    offer_ext.import_released_on_a_thread(array)
    assert sys.getrefcount(array) == before


def outcome_of_view(call):
    try:
        return ("view", call())
    except Exception as error:
        return ("raised", type(error).__name__, str(error))


def test_an_array_changed_in_place_between_reads_is_read_as_it_is_now_fake_driver():
    """Nothing of an instance is remembered: an array made read-only, given another dtype of
    the same itemsize in place, then reshaped in place, is read as it is at each call, as its
    `__dlpack__` reads it."""
    array = numpy.arange(12, dtype=numpy.float32)
    read = lambda obj: cai.from_object(obj, sync=False, allow_host=True, pointer_check=NEVER)  # noqa: E731
    seen = []
    for change in (lambda: None,
                   lambda: setattr(array.flags, "writeable", False),
                   lambda: setattr(array, "dtype", numpy.int32),
                   lambda: setattr(array, "shape", (3, 4))):
        change()
        got = read(array)
        assert fields(got) == fields(read(ViaDLPack(array)))
        seen.append((got.readonly, got.typestr, got.shape))
        del got
    assert seen == [(False, "<f4", (12,)), (True, "<f4", (12,)), (True, "<i4", (12,)), (True, "<i4", (3, 4))]


def test_the_array_is_let_go_of_as_soon_as_its_cai_array_is_fake_driver():
    """A numpy array read by its fields lives while the cai.Array (or a cai.Array read from it)
    does, and is gone the moment the last of them is: the struct's reference and the owner's
    are both let go of at the deallocation, not at some later call."""
    array = numpy.arange(6, dtype=numpy.float32)
    gone = weakref.ref(array)
    held = cai.from_object(array, sync=False, allow_host=True, pointer_check=NEVER)
    again = cai.from_object(held, sync=False, allow_host=True, pointer_check=NEVER)
    del array
    assert gone() is not None
    del held
    assert gone() is not None, "the cai.Array read from it keeps it"
    del again
    assert gone() is None
