"""Run in a fresh process by test_extensions.py: the test extensions (built against the
installed package only) against cai.from_object, on one named check. Exits non-zero with the
reason on the first mismatch; prints what it compared."""

import ctypes
import gc
import os
import sys
import sysconfig
import threading
import warnings
import weakref

import cai

# torch and JAX are installed, but on the free-threaded leg (scripts/test-free-threaded.sh) and
# in the quick tier (scripts/test-quick.sh sets CAI_TEST_NO_FRAMEWORKS), which install none.
WITH_FRAMEWORKS = not sysconfig.get_config_var("Py_GIL_DISABLED") and not os.environ.get("CAI_TEST_NO_FRAMEWORKS")

EXTENSIONS = ["cai_c_ext", "cai_pybind11_ext", "cai_nanobind_ext", "cai_cython_ext", "cai_pyo3_ext"]
# The modules with a C-style producer and import loops (c_ext.c; the PyO3 module through
# cai-python's Rust API).
PRODUCERS = ["cai_c_ext", "cai_pyo3_ext"]
# The modules built a second time with an init that forgot cai_python_import() (build.py).
NO_IMPORT = EXTENSIONS[:4]


# What cai_c_ext.entry_outcome fills its struct with before the call (0xA5 in every byte), and
# where in the struct's bytes its owner lies.
UNTOUCHED = b"\xa5" * ctypes.sizeof(cai.CaiArray)
OWNER = slice(cai.CaiArray.owner.offset, cai.CaiArray.owner.offset + cai.CaiArray.owner.size)
NO_OWNER = bytes(OWNER.stop - OWNER.start)


def ownerless(outcome):
    """An entry_outcome with the struct's owner zeroed: two owning imports of one object differ
    in it alone (each its own tensor or Array)."""
    status, written, message, kind = outcome
    return status, written[: OWNER.start] + NO_OWNER + written[OWNER.stop :], message, kind


def description(struct):
    """What cai_test_description (description.h) reports, read from a ctypes CaiArray."""
    ndim = struct.ndim
    strides = tuple(struct.strides[:ndim]) if struct.strides_given else None
    descr = [(struct.descr[i].name.decode(), struct.descr[i].typestr.decode(), struct.descr[i].offset)
             for i in range(struct.descr_count)]
    mask = description(struct.mask.contents) if struct.mask else None
    dl_dtype = (struct.dl_dtype.code, struct.dl_dtype.bits, struct.dl_dtype.lanes)
    return (struct.version, ndim, tuple(struct.shape[:ndim]), strides, struct.typestr.decode(), struct.data,
            struct.readonly, struct.stream, struct.memory, descr, mask, dl_dtype)


def complex32(torch):
    """A torch tensor of a type DLPack names and no typestr can (complex of two float16)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch: "ComplexHalf support is experimental"
        return torch.zeros(4, dtype=torch.complex32)


def outcome(take, *args):
    """What taking an object gave: its description, or the exception's type and text."""
    try:
        return take(*args)
    except Exception as raised:
        return (type(raised).__name__, str(raised))


def expected(obj, allow_host=False):
    made = cai.from_object(obj, allow_host=allow_host)
    return description(cai.CaiArray.from_address(made.ptr))


def fake_driver():
    lib = ctypes.CDLL(os.environ["CAI_CUDA_DRIVER"])
    lib.fake_cuda_alloc.restype = ctypes.c_uint64
    lib.fake_cuda_alloc.argtypes = [ctypes.c_uint64, ctypes.c_uint, ctypes.c_int, ctypes.c_uint]
    return lib


def device_memory(nbytes=4096):
    """Memory of the fake driver's device, or an address no driver will be asked about."""
    if os.environ.get("CAI_TEST_DRIVER") == "fake":
        return fake_driver().fake_cuda_alloc(nbytes, 2, 0, 0)
    return 4096


def dicts(data):
    """CAI dicts of every version, as producers write them, over `data`."""
    mask = {"shape": (4, 3), "typestr": "|b1", "data": (data + 1024, True), "version": 2}
    return [
        {"shape": (4, 3), "typestr": "<f4", "data": (data, False), "version": 0},
        {"shape": (4, 3), "typestr": "<f4", "data": (data, True), "version": 1, "mask": mask},
        {"shape": (3, 4), "typestr": "<f8", "data": (data, False), "version": 2, "strides": (8, 24)},
        {"shape": (2,), "typestr": "|V8", "data": (data, False), "version": 2,
         "descr": [("x", "<f4"), ("y", "<i4")]},
        {"shape": (12,), "typestr": "<i8", "data": (data, False), "version": 3, "stream": 1},
        {"shape": (0, 5), "typestr": "<c8", "data": (0, False), "version": 3, "stream": None},
    ]


class Exposes:
    def __init__(self, d):
        self.__cuda_array_interface__ = d


def cannot_borrow(obj):
    """Whether cai_python_view refuses `obj` (cai_python.h): a dict with a mask or named descr
    fields, or a type whose DLPack exchange table lacks the non-owning DLTensor call (a
    `__dlpack__` producer is borrowed: its tensor, its own memory, is deleted at once)."""
    if isinstance(obj, cai.Array):
        return False
    if isinstance(obj, dict):
        d = obj
    else:
        d = vars(obj).get("__cuda_array_interface__") if hasattr(obj, "__dict__") else None
        if d is None:
            kind = type(obj)
            return getattr(kind, "table_lacks_dltensor_call", False)
    return isinstance(d, dict) and (d.get("mask") is not None or any(entry[0] for entry in d.get("descr") or []))


def same_view_everywhere(obj, want, allow_host):
    """cai_python_view sees what cai.from_object makes of `obj`, or refuses it as documented;
    the ArrayView casters (borrowing, else owning for the call) always see it."""
    import cai_c_ext
    import cai_pyo3_ext

    view = outcome(cai_c_ext.view_describe, obj, allow_host)
    assert outcome(cai_pyo3_ext.view_describe, obj, allow_host) == view, obj  # cai_python::view
    # cai_python_view_or_own: what cai.from_object makes, owned where a view cannot hold it
    or_own = outcome(cai_c_ext.view_or_own_describe, obj, allow_host)
    assert or_own == (want if len(want) == 2 else (want, cannot_borrow(obj))), (obj, or_own, want)
    for name in ["cai_pyo3_ext", "cai_cython_ext"]:  # cai_python::view_or_own, Cython's declaration
        assert outcome(__import__(name).view_or_own_describe, obj, allow_host) == or_own, (name, obj)
    if view != want:
        assert cannot_borrow(obj) and view[0] == "CaiError" and "cai_python_from_object" in view[1], (obj, view)
        assert view[1].startswith("CAI_ERROR_INVALID_ARGUMENT: cai_python_view cannot borrow"), view
    if allow_host:
        return 1
    # the ArrayView casters and PyO3's ArrayView argument: borrowed, else owned for the call; a
    # refusal is cai.from_object's, but nanobind's (a caster there raises no error of its own:
    # TypeError) and PyO3's TypeErrors, which PyO3 0.28 prefixes with the argument's name
    for name in ["cai_pybind11_ext", "cai_nanobind_ext", "cai_pyo3_ext"]:
        got = outcome(__import__(name).describe_view, obj)
        if len(want) == 2 and name == "cai_nanobind_ext":
            assert got[0] == "TypeError" and "incompatible function arguments" in got[1], (obj, got)
        elif len(want) == 2 and name == "cai_pyo3_ext" and want[0] == "TypeError":
            assert got in (want, ("TypeError", f"argument 'array': {want[1]}")), (obj, got, want)
        else:
            assert got == want, (name, obj, got, want)
    assert outcome(__import__("cai_cython_ext").describe_view, obj) == view, obj  # cai_python_view
    return 1


def same_everywhere(inputs, allow_host=False):
    """Each extension sees what cai.from_object makes of each input, or fails as it does; so
    does cai_python_view, but for what it documents it cannot borrow."""
    compared = 0
    for obj in inputs:
        want = outcome(expected, obj, allow_host)
        compared += same_view_everywhere(obj, want, allow_host)
        for name in EXTENSIONS:
            module = __import__(name)
            if name == "cai_c_ext":
                got = outcome(module.describe, obj, allow_host)
            elif allow_host:
                got = outcome(module.describe_host, obj)
                if hasattr(module, "describe_any_memory"):  # the cai::HostOrDeviceArray caster
                    assert outcome(module.describe_any_memory, obj) == want, name
            elif name == "cai_nanobind_ext" and len(want) == 2:
                # nanobind's caster cannot raise libcai's error: its from_object does.
                assert outcome(module.describe, obj)[0] == "TypeError"
                got = outcome(module.describe_or_raise, obj)
            else:
                got = outcome(module.describe, obj)
            assert got == want, f"{name} saw {got}, cai.from_object {want}, for {obj!r}"
            compared += 1
    return compared


def check_dicts():
    inputs = dicts(device_memory())
    inputs += [Exposes(d) for d in inputs] + [cai.from_object(inputs[2])]
    return same_everywhere(inputs)


def check_dlpack():
    import numpy

    host = [numpy.arange(12.0).reshape(3, 4), numpy.arange(12, dtype=numpy.int16)[::2]]
    if WITH_FRAMEWORKS:
        import torch  # through its type's exchange table, which the view borrows from

        host += [torch.arange(12.0).reshape(3, 4), torch.arange(12, dtype=torch.int16)[::2]]
        import jax.numpy  # by `__dlpack__` (copy=False for the view), its device asked first

        host += [jax.numpy.arange(12.0).reshape(3, 4), jax.numpy.arange(6, dtype=jax.numpy.int16)]
        import ml_dtypes  # a numpy array of its type, read by numpy's fields

        # The ML types: each route sees the type carried exactly (dl_dtype) beside "<V2"/"|V1"
        ml = [(torch.arange(12.0).to(torch.bfloat16).reshape(3, 4)[:, ::2], (4, 16, 1)),
              (torch.arange(6.0).to(torch.float8_e4m3fn), (10, 8, 1)),
              (jax.numpy.ones((2, 3), dtype=jax.numpy.bfloat16), (4, 16, 1)),
              (numpy.arange(6.0).astype(ml_dtypes.float8_e5m2), (12, 8, 1))]
        for obj, dl_dtype in ml:
            assert expected(obj, allow_host=True)[-1] == dl_dtype, obj
        for name in ["cai_pybind11_ext", "cai_nanobind_ext"]:  # cai::Array::carries
            assert [__import__(name).is_bfloat16(obj) for obj, _ in ml] == [True, False, True, False], name
        host += [obj for obj, _ in ml]
    compared = same_everywhere(host, allow_host=True)
    lib, Offering = exchange_producer()

    class Producer(Offering):
        table_lacks_dltensor_call = True  # what cannot_borrow looks for

        def __dlpack_device__(self):
            return (2, 0)

    class ViewableProducer(Producer):
        __c_dlpack_exchange_api__ = lib.producer_exchange_api_with_dltensor()
        table_lacks_dltensor_call = False

    before = lib.producer_deleted()
    compared += same_everywhere([Producer(), ViewableProducer()])
    gc.collect()
    handed, deleted = lib.producer_handed_out(), lib.producer_deleted()
    assert deleted - before == handed - before, f"{handed - before} tensors taken, {deleted - before} deleted"
    import cai_c_ext

    handed = lib.producer_handed_out()
    want = outcome(expected, ViewableProducer())
    assert outcome(cai_c_ext.view_describe, ViewableProducer()) == want
    assert lib.producer_handed_out() == handed + 1, "the view took no managed tensor (the expectation took one)"
    return compared


def hostile():
    """Objects the Python suite feeds cai.from_object to be refused."""

    class Raises:
        @property
        def __cuda_array_interface__(self):
            raise RuntimeError("the producer's own failure")

    class NotADict:
        __cuda_array_interface__ = [1, 2]

    class LyingDlpack:
        def __dlpack__(self, **kwargs):
            return "not a capsule"

        def __dlpack_device__(self):
            return (2, 0)

    good = {"shape": (4,), "typestr": "<f4", "data": (4096, False), "version": 3}
    return [
        {**good, "shape": (-1,)},
        {**good, "typestr": "<f3"},
        {**good, "data": (0, False)},
        {**good, "stream": 0},
        {**good, "version": 9},
        {**good, "strides": (4, 4)},
        {**good, "shape": (2**70,)},
        {key: value for key, value in good.items() if key != "data"},
        {**good, "mask": {**good, "shape": (5,)}},
        {**good, "descr": [("a", "<f8")]},
        Raises(), NotADict(), LyingDlpack(), 7, "a string", None,
    ]


def check_refusals():
    import cai_c_ext

    compared = 0
    for obj in hostile():
        try:
            cai.from_object(obj)
        except Exception as raised:
            want = raised
        else:
            raise AssertionError(f"cai.from_object took {obj!r}")
        status, message, exception = cai_c_ext.refusal(obj)
        assert type(exception) is type(want) and str(exception) == str(want), (exception, want)
        view_status, view_message, view_exception = cai_c_ext.refusal(obj, view=True)
        if not cannot_borrow(obj):
            assert (view_status, view_message, type(view_exception), str(view_exception)) == (
                status, message, type(exception), str(exception)), obj
        else:  # a mask, or a DLPack producer: refused as cai_python.h says, before it is read
            assert view_message.startswith("CAI_ERROR_INVALID_ARGUMENT: cai_python_view cannot borrow"), view_message
        if isinstance(want, cai.CaiError):
            assert status == want.code and message == str(want), (status, message, want)
        else:
            assert status == cai._native.STATUS_CODES["CAI_ERROR_PYTHON"], status
            assert message == f"CAI_ERROR_PYTHON: {type(want).__name__}: {want}", message
        for name in ["cai_pybind11_ext", "cai_cython_ext", "cai_pyo3_ext"]:
            try:
                __import__(name).describe(obj)
            except Exception as raised:
                if isinstance(want, cai.CaiError):
                    assert type(raised) is type(want) and str(raised) == str(want), (name, raised, want)
                else:
                    assert isinstance(raised, (type(want), TypeError)) and str(want) in str(raised), (name, raised)
            else:
                raise AssertionError(f"{name} took {obj!r}")
        # the views and view-or-own of C, Rust (cai_python::view, view_or_own) and Cython, and the
        # ArrayView casters: the same refusal, or the view's documented one where it cannot borrow
        compared += same_view_everywhere(obj, outcome(expected, obj), False)
    import cai_nanobind_ext

    try:
        cai_nanobind_ext.describe_or_raise({"shape": (-1,), "typestr": "<f4", "data": (8, False), "version": 3})
    except cai.CaiError as raised:
        assert "shape" in str(raised), raised
    else:
        raise AssertionError("nanobind's from_object took a negative extent")
    return compared


def check_refcounts():
    import numpy

    d = {"shape": (4, 3), "typestr": "<f4", "data": (device_memory(), False), "version": 3}
    exposing, host, array = Exposes(d), numpy.arange(6.0), cai.from_object(d)
    inputs = [(d, False), (exposing, False), (host, True), (array, False)]
    baseline = [sys.getrefcount(obj) for obj, _ in inputs]
    for taken, allow_host in inputs:
        for name in PRODUCERS:
            __import__(name).import_many(taken, 100_000, allow_host)
    del taken  # the loop's own reference
    gc.collect()
    after = [sys.getrefcount(obj) for obj, _ in inputs]
    assert after == baseline, f"reference counts {baseline} became {after}"
    # The numpy array is viewed through __dlpack__: a capsule's tensor not deleted would keep a
    # reference to it.
    viewed = [(d, False), (exposing, False), (host, True), (array, False)]
    baseline = [sys.getrefcount(obj) for obj, _ in viewed]
    modules = [__import__(name) for name in PRODUCERS]
    for obj, allow_host in viewed:
        for module in modules:
            module.import_many(obj, 1000, allow_host, True)  # warm: caches filled, types' facts found
    blocks = sys.getallocatedblocks()
    for obj, allow_host in viewed:
        for module in modules:
            module.import_many(obj, 100_000, allow_host, True)
    del obj  # the loop's own reference
    grown = sys.getallocatedblocks() - blocks
    assert grown < 100, f"{grown} blocks more after {len(modules)} x {len(viewed)} x 100000 views"
    assert [sys.getrefcount(obj) for obj, _ in viewed] == baseline, "a view took a reference"
    array.release()  # no export left alive: a leaked view would refuse this
    return len(inputs) + len(viewed)


def check_view_of_dlpack_producers():
    """cai_python_view of a `__dlpack__` producer (conformance row 64): the struct
    cai.from_object makes, the producer asked for its own memory (copy=False: the view deletes
    the tensor before returning, so it must not be a copy), one from before DLPack 1.0 (no
    max_version, no copy) viewed too, and every tensor deleted by the call."""
    import numpy
    import cai_c_ext

    class Recording:
        def __init__(self, array):
            self.array, self.calls = array, []

        def __dlpack_device__(self):
            return self.array.__dlpack_device__()

        def __dlpack__(self, **kwargs):
            self.calls.append(kwargs)
            return self.array.__dlpack__(**kwargs)

    class Legacy(Recording):
        def __dlpack__(self, stream=None):
            self.calls.append({"stream": stream})
            return self.array.__dlpack__(stream=stream)

    compared = 0
    for kind in [Recording, Legacy]:
        for host in [numpy.arange(12.0).reshape(3, 4), numpy.arange(24, dtype=numpy.int16)[::2]]:
            producer = kind(host)
            baseline = sys.getrefcount(host)
            want = outcome(expected, producer, True)
            imported = producer.calls[-1]
            assert imported.get("copy") is None, imported  # an owning import lets the producer choose
            for module in PRODUCERS:
                assert outcome(__import__(module).view_describe, producer, True) == want, (module, kind, host)
                if kind is Recording:
                    assert producer.calls[-1]["copy"] is False, producer.calls[-1]
            assert sys.getrefcount(host) == baseline, "a view kept the producer's tensor"
            compared += 1
    view = outcome(cai_c_ext.view_describe, numpy.arange(3.0), False)  # host memory, not allowed
    assert view[0] == "CaiError" and "CAI_ERROR_HOST_MEMORY" in view[1], view
    return compared + 1


def check_view_writes_out_only_on_success():
    """cai_python_view's two ways of writing `out` agree: straight (every rule checked first,
    the import left nothing to do: no pointer check, nothing to sync, no access rule asked)
    and through a struct of its own (native_only asks a rule of the import, or a pointer check
    is asked) write the same bytes, which describe what cai.from_object makes, the extents past
    the rank left as they were; a refusal, before or after the rules or in the import, leaves
    `out` as it was."""
    import cai_c_ext
    import numpy

    never, check, none = cai.POINTER_CHECK_NEVER, cai.POINTER_CHECK_DEFAULT, cai.SYNC_NONE

    def both_ways(obj, allow_host=True, slow_check=check):
        straight = cai_c_ext.entry_outcome(obj, False, allow_host, 0, never, none)[:2]
        through = cai_c_ext.entry_outcome(obj, False, allow_host, 1, slow_check, none)[:2]
        return straight, through

    def same_both_ways(obj, allow_host=True, slow_check=check):
        straight, through = both_ways(obj, allow_host, slow_check)
        assert straight == through, obj
        assert straight[0] == 0, (obj, straight[0])
        struct = cai.CaiArray.from_buffer_copy(straight[1])
        made = cai.from_object(obj, allow_host=allow_host, sync=False)  # no stream asked, as above
        assert description(struct) == description(cai.CaiArray.from_address(made.ptr)), obj
        rank = struct.ndim
        for extents in (struct.shape, struct.strides):
            assert all(extents[i] == -0x5A5A5A5A5A5A5A5B for i in range(rank, len(extents))), obj
        return 1

    def refused_both_ways(obj, allow_host=True, slow_check=check):
        for status, written in both_ways(obj, allow_host, slow_check):
            assert status != 0 and written == UNTOUCHED, (obj, status)
        return 1

    a = numpy.arange(12.0).reshape(3, 4)
    read_only = a[::-1]
    read_only.flags.writeable = False
    arrays = [a, numpy.arange(12, dtype=numpy.int16)[::2], read_only, numpy.array(3.0), numpy.zeros((0, 3)),
              numpy.asfortranarray(a), numpy.ones(5, dtype=numpy.bool_)]
    compared = sum(same_both_ways(x) for x in arrays)
    compared += refused_both_ways(a, allow_host=False)
    if WITH_FRAMEWORKS:
        import torch

        t = torch.arange(12.0).reshape(3, 4)
        tensors = [t, t.t(), torch.arange(12, dtype=torch.int16)[::2], torch.tensor(3.0), torch.zeros(0, 3),
                   torch.ones(5, dtype=torch.bool)]
        compared += sum(same_both_ways(x) for x in tensors)
        compared += refused_both_ways(t, allow_host=False)
        bf16 = t.to(torch.bfloat16)  # a typestr of opaque bytes, the type carried exactly
        compared += same_both_ways(bf16)
        struct = cai.CaiArray.from_buffer_copy(both_ways(bf16)[0][1])
        assert (struct.typestr, struct.dl_dtype.code, struct.dl_dtype.bits) == (b"<V2", 4, 16)  # kDLBfloat
        compared += refused_both_ways(complex32(torch))  # DLPack has it, no typestr does
    lib, _ = exchange_producer()

    class Producer:
        __c_dlpack_exchange_api__ = lib.producer_exchange_api_with_dltensor()

    lib.producer_set_device_type(1)  # kDLCPU
    try:
        lib.producer_set(0x10000, 0)
        compared += same_both_ways(Producer())
        lib.producer_set(2**64 - 64, 0)  # a 128-byte extent past the end of the address space
        compared += refused_both_ways(Producer())
        lib.producer_set_device_type(2)  # kDLCUDA: memory of the fake driver
        lib.producer_set(device_memory(256), 0)
        compared += same_both_ways(Producer(), allow_host=False)
        lib.producer_set(0x1000, 0)  # memory no driver allocated: the pointer check refuses it
        straight, through = both_ways(Producer(), allow_host=False)
        assert straight[0] == 0 and through[0] != 0 and through[1] == UNTOUCHED, (straight[0], through[0])
        compared += 1
        lib.producer_set(device_memory(256), 0)
        lib.producer_fail_stream(1)  # a sync is wanted and the work stream cannot be had
        for status, written in [cai_c_ext.entry_outcome(Producer(), False, False, 0, never, cai.SYNC_DEFAULT)[:2]]:
            assert status != 0 and written == UNTOUCHED, status
        compared += 1
    finally:
        lib.producer_fail_stream(0)
        lib.producer_set_device_type(2)
        lib.producer_set(device_memory(256), 0)
    return compared


def check_numpy_import_written_straight_is_the_import_through_a_struct():
    """cai_python_from_object of a numpy array read by its fields, written straight (every rule
    checked first, the import left nothing to do) and through a pooled struct (native_only asks
    a rule of the import, or a pointer check is asked): the same bytes, the owner the array
    itself with a reference of the struct's own, let go of by the release; a refusal leaves
    `out` untouched and takes no reference."""
    import cai_c_ext
    import numpy

    never, check, none = cai.POINTER_CHECK_NEVER, cai.POINTER_CHECK_DEFAULT, cai.SYNC_NONE
    a = numpy.arange(12.0).reshape(3, 4)
    read_only = a[::-1]
    read_only.flags.writeable = False
    arrays = [a, numpy.arange(12, dtype=numpy.int16)[::2], read_only, numpy.array(3.0), numpy.zeros((0, 3)),
              numpy.asfortranarray(a), numpy.ones(5, dtype=numpy.bool_)]
    compared = 0
    for x in arrays:
        references = sys.getrefcount(x)
        straight = cai_c_ext.entry_outcome(x, True, True, 0, never, none)
        through = cai_c_ext.entry_outcome(x, True, True, 1, check, none)
        assert straight == through and straight[0] == 0, (x, straight[2:], through[2:])
        assert int.from_bytes(straight[1][OWNER], sys.byteorder) == id(x), "the owner is the array"
        assert sys.getrefcount(x) == references, "the release let go of the struct's reference"
        struct = cai.CaiArray.from_buffer_copy(straight[1])
        made = cai.from_object(x, allow_host=True, sync=False)
        assert description(struct) == description(cai.CaiArray.from_address(made.ptr)), x
        del struct, made
        for status, written, _, _ in (cai_c_ext.entry_outcome(x, True, False, 0, never, none),
                                      cai_c_ext.entry_outcome(x, True, False, 1, check, none)):
            assert status != 0 and written == UNTOUCHED, (x, status)
        assert sys.getrefcount(x) == references, "a refusal took no reference"
        compared += 1
    return compared


def check_dict_import_holds_the_object():
    """cai_python_from_object of a CAI dict (or an object exposing one) with neither a mask nor
    named descr fields: the struct cai.from_object makes, its owner the object itself with a
    reference of the struct's own, let go of by the release (on this thread, or on one that
    never attaches), with and without a pointer check; a dict with a mask or named fields is
    owned by what describes them, not the object (check_dicts compares their structs); the
    object lives as long as the struct, and no longer (a weakref); a refusal is
    cai.from_object's, leaves `out` untouched and takes no reference."""
    import cai_c_ext

    never, check, none = cai.POINTER_CHECK_NEVER, cai.POINTER_CHECK_DEFAULT, cai.SYNC_NONE
    inputs = dicts(device_memory())
    inputs += [Exposes(d) for d in inputs]
    compared = 0
    for x in inputs:
        references = sys.getrefcount(x)
        want = expected(x)
        for pointer_check in (never, check):
            status, written, message, _ = cai_c_ext.entry_outcome(x, True, False, 0, pointer_check, none)
            assert status == 0, (x, message)
            if not cannot_borrow(x):  # (the others' descr and mask went with their release)
                assert description(cai.CaiArray.from_buffer_copy(written)) == want, x
            held_by_object = int.from_bytes(written[OWNER], sys.byteorder) == id(x)
            assert held_by_object != cannot_borrow(x), (x, "the object itself owns it" if held_by_object else "")
            assert sys.getrefcount(x) == references, "the release let go of the struct's reference"
        cai_c_ext.release_on_a_thread(x)
        assert sys.getrefcount(x) == references, "released on a thread that never attaches"
        compared += 1
    # An exposing object lives as long as the struct holding it (handed back to Python as a
    # cai.Array by cai_python_to_object), and is gone as soon as that array is.
    for d in dicts(device_memory()):
        x = Exposes(d)
        alive = weakref.ref(x)
        held = cai_c_ext.hand_back(x)
        del x
        gc.collect()
        assert alive() is not None, "the struct keeps the object"
        del held
        assert alive() is None, "the object outlived the struct holding it"
        compared += 1
    refused = [{"shape": (4,), "typestr": "<f3", "data": (device_memory(), False), "version": 3, "stream": None},
               {"shape": (4,), "typestr": "<f4", "data": (device_memory(), False), "version": 3, "stream": 0}]
    for x in refused + [Exposes(d) for d in refused]:
        references = sys.getrefcount(x)
        status, written, message, kind = cai_c_ext.entry_outcome(x, True, False, 0, never, none)
        raised = outcome(expected, x)
        assert status != 0 and written == UNTOUCHED, (x, status)
        assert (kind.rsplit(".", 1)[-1], message) == raised, (x, kind, message, raised)
        assert sys.getrefcount(x) == references, "a refusal took no reference"
        compared += 1
    return compared


def check_remembered_exchange_entries_give_the_negotiations_outcome():
    """cai_python_view and cai_python_from_object on a type whose DLPack exchange table this
    thread chose last (entry/c_api_table.rs's `exchange_entry`: the entry reads by the table
    without a negotiation) give what the negotiation gives: the same status, bytes (an owning
    struct's tensor address aside), CaiError message and exception; a refusal (by a rule, by the
    import, by the producer's work stream) leaves `out` untouched; every tensor taken is deleted
    once. Each object is read first after a numpy array (this thread then remembers no table),
    then again (the table remembered)."""
    import cai_c_ext
    import numpy

    never, check = cai.POINTER_CHECK_NEVER, cai.POINTER_CHECK_DEFAULT
    none, default = cai.SYNC_NONE, cai.SYNC_DEFAULT
    forget = numpy.zeros(1)

    def masked(outcome, own):
        if own and outcome[0] == 0:
            assert outcome[1][OWNER] != UNTOUCHED[OWNER], "an owning struct without its tensor"
            return ownerless(outcome)
        return outcome

    def both_ways(obj, allow_host=True, native_only=0, pointer_check=never, sync=none):
        outcomes = []
        for own in (False, True):
            options = (allow_host, native_only, pointer_check, sync)
            cai_c_ext.entry_outcome(forget, own, True, 0, never, none)
            negotiated = cai_c_ext.entry_outcome(obj, own, *options)
            remembered = cai_c_ext.entry_outcome(obj, own, *options)
            assert masked(negotiated, own) == masked(remembered, own), (obj, own, options, negotiated[2:])
            if negotiated[0] != 0:
                assert negotiated[1] == UNTOUCHED and negotiated[2] and negotiated[3], (obj, own, negotiated[2:])
            outcomes.append(negotiated[0])
            said.append(negotiated[2])
        return outcomes

    said = []

    compared = 0
    if WITH_FRAMEWORKS:
        import torch

        t = torch.arange(12.0).reshape(3, 4)
        for tensor in [t, t.t(), t[:, ::2], torch.arange(12, dtype=torch.int16)[::2], torch.tensor(3.0),
                       torch.zeros(0, 3), torch.ones(5, dtype=torch.bool)]:
            assert both_ways(tensor) == [0, 0], tensor
            assert both_ways(tensor, native_only=1) == [0, 0], tensor  # the import asked a rule
            compared += 4
        assert both_ways(t, allow_host=False) == [cai._native.STATUS_CODES["CAI_ERROR_HOST_MEMORY"]] * 2
        assert both_ways(t.to(torch.bfloat16)) == [0, 0]  # carried as dl_dtype beside "<V2"
        assert both_ways(complex32(torch))[0] != 0  # no typestr holds it
        compared += 4
    lib, _ = exchange_producer()

    class Producer:
        __c_dlpack_exchange_api__ = lib.producer_exchange_api_with_dltensor()

    handed, deleted = lib.producer_handed_out(), lib.producer_deleted()
    try:
        memory = device_memory(256)
        lib.producer_set(memory, 0)
        assert both_ways(Producer(), allow_host=False) == [0, 0]
        assert both_ways(Producer(), allow_host=False, pointer_check=check) == [0, 0]  # the pointer checked
        # A sync wanted: the producer's work stream (NULL: the legacy stream) synchronized.
        assert both_ways(Producer(), allow_host=False, pointer_check=check, sync=default) == [0, 0], said[-2:]
        lib.producer_fail_stream(1)  # a sync is wanted and the work stream cannot be had
        assert 0 not in both_ways(Producer(), allow_host=False, pointer_check=check, sync=default)
        lib.producer_fail_stream(0)
        lib.producer_set(0x1000, 0)  # memory no driver allocated: the pointer check refuses it
        assert both_ways(Producer(), allow_host=False) == [0, 0]
        assert 0 not in both_ways(Producer(), allow_host=False, pointer_check=check)
        lib.producer_set_device_type(1)  # kDLCPU
        lib.producer_set(2**64 - 64, 0)  # a 128-byte extent past the end of the address space
        assert 0 not in both_ways(Producer())
        lib.producer_set(0x10000, 0)
        assert both_ways(Producer(), allow_host=False) == [cai._native.STATUS_CODES["CAI_ERROR_HOST_MEMORY"]] * 2
        assert both_ways(Producer()) == [0, 0]
        compared += 18
    finally:
        lib.producer_fail_stream(0)
        lib.producer_set_device_type(2)
        lib.producer_set(device_memory(256), 0)
    gc.collect()
    taken = lib.producer_handed_out() - handed
    # Two owning imports per object and options (the views take none), each deleted once.
    assert taken == 2 * 9 and lib.producer_deleted() - deleted == taken, (taken, lib.producer_deleted() - deleted)
    return compared


def check_view_or_own():
    """cai_python_view_or_own through the negotiation and through the table this thread
    remembers for the type: torch tensors and an exchange-table producer with the non-owning
    call are borrowed, cai_python_view's struct byte for byte; a producer whose table lacks that
    call is imported owning, cai_python_from_object's struct (its tensor's address aside), every
    tensor taken deleted once; a refusal is cai_python_from_object's word for word, `out`
    untouched."""
    import cai_c_ext
    import numpy

    never, none = cai.POINTER_CHECK_NEVER, cai.SYNC_NONE
    forget = numpy.zeros(1)

    def outcomes(obj, allow_host):
        """(view, own, view_or_own) outcomes, each negotiated and then remembered."""
        got = []
        for mode in (0, 1, 2):
            cai_c_ext.entry_outcome(forget, 1, True, 0, never, none)  # no table remembered
            negotiated = cai_c_ext.entry_outcome(obj, mode, allow_host, 0, never, none)
            remembered = cai_c_ext.entry_outcome(obj, mode, allow_host, 0, never, none)
            got.append((negotiated, remembered))
        return got

    compared = 0
    borrowed = []
    if WITH_FRAMEWORKS:
        import torch

        t = torch.arange(12.0).reshape(3, 4)
        borrowed += [t, t.t(), torch.arange(12, dtype=torch.int16)[::2], torch.tensor(3.0)]
    lib, Offering = exchange_producer()

    class Viewable:
        __c_dlpack_exchange_api__ = lib.producer_exchange_api_with_dltensor()

    borrowed.append(Viewable())
    for obj in borrowed:
        view, own, or_own = outcomes(obj, True)
        assert or_own == view and view[0][0] == 0 and own[0][0] == 0, (obj, or_own[0][2:], view[0][2:])
        assert or_own[0][1][OWNER] == NO_OWNER, "a borrowed struct has no owner"
        compared += 1
    handed, deleted = lib.producer_handed_out(), lib.producer_deleted()
    view, own, or_own = outcomes(Offering(), False)
    for got, owning in zip(or_own, own):  # negotiated, then remembered
        assert got[0] == 0 and got[1][OWNER] not in (UNTOUCHED[OWNER], NO_OWNER), got[2:]
        assert ownerless(got) == ownerless(owning), (got[2:], owning[2:])
    assert view[0][0] != 0 and "cannot borrow" in view[0][2], view[0][2:]
    gc.collect()
    taken = lib.producer_handed_out() - handed
    assert taken == 4 and lib.producer_deleted() - deleted == taken, (taken, lib.producer_deleted() - deleted)
    compared += 1
    refused = [{"shape": (4,), "typestr": "<f3", "data": (device_memory(), False), "version": 3},
               {"shape": (4,), "typestr": "<f4", "data": (device_memory(), False), "version": 3, "stream": 0},
               dict(dicts(device_memory())[1], typestr="<f3"), object()]
    masked = dicts(device_memory())[1]
    refused.insert(3, dict(masked, mask=dict(masked["mask"], shape=(4,))))  # a mask of another shape
    for x in refused + [Exposes(d) for d in refused[:4]]:
        for allow_host in (False, True):
            (own, _), (or_own, _) = outcomes(x, allow_host)[1:]
            assert own[0] != 0 and or_own == own and or_own[1] == UNTOUCHED, (x, or_own[2:], own[2:])
            compared += 1
    if borrowed[:-1]:
        (own, _), (or_own, _) = outcomes(borrowed[0], False)[1:]
        assert or_own == own and own[0] == cai._native.STATUS_CODES["CAI_ERROR_HOST_MEMORY"], (or_own[2:], own[2:])
        compared += 1
    return compared


def check_producer():
    """A C producer's array (c_ext.c) and a Rust one (a cai::Array through cai_python::to_object)
    handed to Python: released once, also when the last reference dies on another thread; a
    refused one released once too (by its producer in C, by to_object's drop in Rust)."""
    import cai_c_ext

    for module in map(__import__, PRODUCERS):
        made = module.produce(16)
        assert made.shape == (16,) and made.typestr == "<f4"
        assert made.__cuda_array_interface__["shape"] == (16,)
        before = module.released_count()
        died = threading.Thread(target=lambda held: held.clear(), args=([made],))
        del made
        died.start()
        died.join()
        gc.collect()
        assert module.released_count() == before + 1, (module, "released once, on the other thread")
        exception, released = module.produce_invalid()
        assert isinstance(exception, cai.CaiError) and "ndim" in str(exception) and released == 1, exception
        assert module.released_count() == before + 2, (module, "the refused array released once")
    d = {"shape": (2,), "typestr": "<f8", "data": (device_memory(), True), "version": 3}
    for name in EXTENSIONS:
        back = __import__(name).hand_back(d)
        assert isinstance(back, cai.Array) and back.shape == (2,) and back.readonly, (name, back)
    owner = Exposes(d)
    baseline = sys.getrefcount(owner)
    cai_c_ext.release_on_a_thread(owner)
    assert sys.getrefcount(owner) == baseline, "the reference was let go of on the thread"
    assert cai_c_ext.library_version() == cai.__version__
    return 4


class Source:
    """An object an array keeps alive (weakly referable, as a dict is not)."""


def check_keepers():
    """A PyO3 module's array that keeps a Python object, handed to Python: once Python lets go
    of the array (on this thread, or on another), the object is gone before anything calls into
    that module again, with the plain `move || drop(source)` release and with cai_python::keep
    (before cai-python's release attached, the plain one waited in the module's PyO3 pool); and
    an array dropped on a Rust thread with no thread state lets go of it too (cai_python::keep)."""
    import cai_pyo3_ext

    compared = 0
    for helper in (False, True):
        for where in ("this thread", "another thread"):
            source = Source()
            alive = weakref.ref(source)
            made = cai_pyo3_ext.keeping(source, helper)
            del source
            assert alive() is not None, "the array keeps its source"
            if where == "this thread":
                del made
            else:
                died = threading.Thread(target=lambda held: held.clear(), args=([made],))
                del made
                died.start()
                died.join()
                gc.collect()  # free-threaded: merges a reference another thread let go of
            assert alive() is None, f"keep={helper}, dropped on {where}: the source outlived its array"
            compared += 1
    # Dropped on a Rust thread with no Python thread state: cai_python::keep attaches it. The
    # wait wakes to let this thread merge a reference another let go of (free-threaded).
    source = Source()
    gone = threading.Event()
    weakref.finalize(source, gone.set)
    cai_pyo3_ext.drop_on_a_rust_thread(source)
    del source
    for _ in range(600):
        if gone.wait(0.1):
            break
        gc.collect()
    assert gone.is_set(), "an array dropped on a Rust thread kept its source (deferred into PyO3's pool)"
    compared += 1
    # A masked CAI object, which no borrowed struct holds: cai_python::view_or_own and the
    # ArrayView argument own an import of it for the call, and let go of it when the call ends.
    takers = {"view_or_own (owned)": lambda obj: cai_pyo3_ext.view_or_own_describe(obj, False)[1],
              "the ArrayView argument (its mask read)": lambda obj: cai_pyo3_ext.describe_view(obj)[-1] is not None}
    for name, take in takers.items():
        masked = Exposes(dicts(device_memory())[1])
        alive = weakref.ref(masked)
        assert take(masked), f"{name}: not so for the masked object"
        del masked
        assert alive() is None, f"{name}: the masked object outlived the call"
        compared += 1
    return compared


def check_threads():
    """Rust's cai_python::view_or_own and PyO3's ArrayView argument on 6 threads at once, on
    objects whose `__cuda_array_interface__` another thread swaps between a masked dict (owned
    for the call) and its unmasked twin (borrowed): each call sees one of the two as
    cai.from_object does, owned exactly when masked; once done, no reference to either dict or
    object is left behind. With no GIL on the free-threaded leg."""
    import cai_pyo3_ext

    masked = dicts(device_memory())[1]
    plain = {key: value for key, value in masked.items() if key != "mask"}
    swapped = [Exposes(masked) for _ in range(4)]
    holders = swapped + [Exposes(masked), Exposes(plain)]  # the last two never swapped: both ways run
    wants = [(expected(Exposes(masked)), True), (expected(Exposes(plain)), False)]
    counts = [sys.getrefcount(x) for x in [masked, plain, *holders]]
    rounds, stop, errors, owned = 1500, threading.Event(), [], [0] * 6
    sys.setswitchinterval(1e-5)  # with a GIL, swaps between a reader's calls, not only between its bursts

    def swap():
        i = 0
        while not stop.is_set():
            for holder in swapped:
                holder.__cuda_array_interface__ = masked if i % 2 else plain
            i += 1

    def read(index):
        try:
            for round_ in range(rounds):
                holder = holders[(index + round_) % len(holders)]
                got = cai_pyo3_ext.view_or_own_describe(holder, False)
                assert got in wants, got
                owned[index] += got[1]
                assert cai_pyo3_ext.describe_view(holder) in [want for want, _ in wants]
        except BaseException as error:  # re-raised below, on the main thread
            errors.append(error)
        finally:
            if index == 0:
                stop.set()

    swapper = threading.Thread(target=swap)
    readers = [threading.Thread(target=read, args=(index,)) for index in range(len(owned))]
    swapper.start()
    for thread in readers:
        thread.start()
    for thread in readers + [swapper]:
        thread.join()
    if errors:
        raise errors[0]
    assert sum(owned) > 0, "no masked dict was read: view_or_own's owning import did not run"
    for each in swapped:
        each.__cuda_array_interface__ = masked
    del each
    gc.collect()
    assert [sys.getrefcount(x) for x in [masked, plain, *holders]] == counts
    return len(owned) * rounds


def check_release_after_the_interpreter_is_gone():
    """A struct released by the extension after finalization (Py_AtExit): no crash; the
    reference is left, as nothing may touch Python then."""
    import cai_c_ext

    cai_c_ext.keep_until_exit(Exposes({"shape": (2,), "typestr": "<f8", "data": (device_memory(), False),
                                       "version": 3}))
    return 1


def exchange_producer():
    """The exchange-table test double (exchange_producer.c), handing out tensors over device
    memory, and a type offering its table."""
    lib = ctypes.CDLL(os.environ["CAI_TEST_EXCHANGE_PRODUCER"])
    lib.producer_exchange_api.restype = ctypes.c_void_p
    lib.producer_exchange_api_with_dltensor.restype = ctypes.c_void_p
    lib.producer_set.argtypes = [ctypes.c_uint64, ctypes.c_uint64]
    lib.producer_set(device_memory(256), 0)

    class Producer:
        __c_dlpack_exchange_api__ = lib.producer_exchange_api()

    return lib, Producer


def check_exchange_struct_owns_the_tensor():
    """cai_python_from_object on a type read by its DLPack exchange table: the struct owns the
    managed tensor the table gave, deleted by its release (on a thread without the GIL too),
    and keeps no reference to the object (the tensor keeps the data alive)."""
    import cai_c_ext

    lib, Producer = exchange_producer()
    obj = Producer()
    references = sys.getrefcount(obj)
    handed, deleted = lib.producer_handed_out(), lib.producer_deleted()
    cai_c_ext.release_on_a_thread(obj)
    assert (lib.producer_handed_out(), lib.producer_deleted()) == (handed + 1, deleted + 1), "tensor not deleted"
    cai_c_ext.keep_until_exit(obj)  # held until the interpreter is gone
    assert lib.producer_handed_out() == handed + 2 and lib.producer_deleted() == deleted + 1, "held tensor deleted"
    now = sys.getrefcount(obj)
    assert now == references, f"the struct holds a reference to the object ({references} -> {now})"
    return 3


def check_release_of_a_torch_tensor_after_the_interpreter_is_gone():
    """A struct owning torch's managed tensor (its exchange table), released after
    finalization: the release leaves the tensor (a deleter may need the interpreter, which is
    gone); never a crash."""
    import cai_c_ext
    import torch

    cai_c_ext.keep_until_exit(torch.arange(6.0), True)
    return 1


def check_buffer_interface():
    """The table's cai_python_from_buffer_interface, through cai-python's
    `from_buffer_interface` and through Cython's declaration (cai/capi.pxd), sees what
    cai.from_buffer_interface makes of pyopencl arrays on PoCL, and refuses what it refuses."""
    import numpy
    import pyopencl as cl
    import pyopencl.array as cla

    import cai_cython_ext
    import cai_pyo3_ext

    context = cl.Context(cl.get_platforms()[0].get_devices())
    base = cla.to_device(cl.CommandQueue(context), numpy.arange(48, dtype=numpy.int32).reshape(6, 8))
    compared = 0
    for obj in [base, base[1:, ::2], base[2:4], 7, {"shape": (4,)}]:
        want = outcome(lambda o: description(cai.CaiArray.from_address(cai.from_buffer_interface(o).ptr)), obj)
        for reader in (cai_pyo3_ext.describe_buffer_interface, cai_cython_ext.describe_buffer_interface):
            got = outcome(reader, obj)
            assert got == want, f"{reader.__module__} saw {got}, cai.from_buffer_interface {want}"
            compared += 1
    return compared


def check_table_layout():
    """cai-python's table struct (Rust) is the one the package publishes (cai_python.h's): the
    same size, its last member last."""
    import cai_pyo3_ext

    rust_size, table_size, last_offset = cai_pyo3_ext.table_layout()
    assert rust_size == table_size and last_offset == rust_size - ctypes.sizeof(ctypes.c_void_p), (
        rust_size, table_size, last_offset)
    return 1


def check_one_driver():
    """The PyO3 module's own `cai` crate calls (ArrayRef::import with a pointer check,
    ArrayRef::sync stream-ordered) after the package's: one driver state in the process. The
    fake driver's log (this thread's) shows cuInit once and the one event the package's pool
    made, reused; no entry point is resolved a second time."""
    lib = fake_driver()
    lib.fake_cuda_log.restype = ctypes.c_char_p
    lib.fake_cuda_stream_create.restype = ctypes.c_uint64
    lib.fake_cuda_set_device(0)
    import cai_pyo3_ext

    data = lib.fake_cuda_alloc(4096, 2, 0, 0)
    producer, consumer = lib.fake_cuda_stream_create(0), lib.fake_cuda_stream_create(0)
    array = {"shape": (4,), "typestr": "<f4", "data": (data, False), "version": 3, "stream": producer}
    cai.from_object(array, stream=consumer, sync=cai.SYNC_STREAM_ORDERED, pointer_check=cai.POINTER_CHECK_ALWAYS)
    lookups = lib.fake_cuda_proc_address_lookups()
    base, version = cai_pyo3_ext.import_and_sync(array, consumer)
    assert (base, version) == (data, 12040), (base, version, data)  # the fake says CUDA 12.4
    log = lib.fake_cuda_log().decode().splitlines()
    inits = [line for line in log if line.startswith("cuInit")]
    created = [line for line in log if line.startswith("cuEventCreate")]
    recorded = [line for line in log if line.startswith("cuEventRecord")]
    checked = [line for line in log if line.startswith("cuPointerGetAttributes")]
    assert len(inits) == 1, f"cuInit {len(inits)} times: a second driver state\n" + "\n".join(log)
    assert lib.fake_cuda_proc_address_lookups() == lookups, "the extension resolved the driver again"
    # Both syncs recorded an event and both imports checked the pointer: the extension's calls
    # reached the driver, through the package's one pool.
    assert len(recorded) == 2 and len(checked) == 2, "\n".join(log)
    assert len(created) == 1, f"{len(created)} events made: a second event pool\n" + "\n".join(log)
    return 4


def check_other_table_version():
    """cai_python_import refuses a table of another major with an ImportError naming both."""

    class Table(ctypes.Structure):
        _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32), ("size", ctypes.c_uint64)]

    new_capsule = ctypes.pythonapi.PyCapsule_New
    new_capsule.restype = ctypes.py_object
    new_capsule.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
    name = ctypes.create_string_buffer(b"cai._native._C_API")
    refused_tables = 0
    # another major; this major before the offer (minor 2), before cai_python_view_or_own (3),
    # before cai_release_after (4) and before cai_ipc_export (5)
    for major, minor in [(2, 0), (1, 1), (1, 2), (1, 3), (1, 4)]:
        table = Table(major, minor, ctypes.sizeof(Table))
        cai._native._C_API = new_capsule(ctypes.addressof(table), name, None)
        for module in PRODUCERS:  # cai_python.h's import, and cai-python's
            try:
                __import__(module)
            except ImportError as refused:
                assert f"offers C API {major}.{minor}" in str(refused) and "cai_python.h 1.5" in str(refused), refused
                refused_tables += 1
    if refused_tables == 10:
        return 1
    raise AssertionError("an extension imported a table of another major version, or an older minor")


def check_no_import():
    """Modules whose init never called cai_python_import() (C, pybind11, nanobind, Cython):
    the first conversion reads the table, from several threads at once too."""
    d = {"shape": (4,), "typestr": "<f4", "data": (device_memory(), False), "version": 3}
    want = expected(d)
    compared = 0
    for name in NO_IMPORT:
        module = __import__(name + "_no_import")
        seen = []
        threads = [threading.Thread(target=lambda: seen.append(module.describe(d))) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert seen == [want] * 4, (name, seen, want)
        compared += 1
    return compared


def check_no_import_and_no_table():
    """The same modules when the table cannot be read: the conversion raises ImportError."""
    del cai._native._C_API
    compared = 0
    for name in NO_IMPORT:
        module = __import__(name + "_no_import")
        try:
            module.describe({"shape": (4,), "typestr": "<f4", "data": (4096, False), "version": 3})
        except ImportError as raised:
            assert "C API" in str(raised), (name, raised)
        except TypeError as raised:
            # nanobind's caster cannot raise: its own TypeError, with the ImportError cleared.
            assert name == "cai_nanobind_ext", (name, raised)
        else:
            raise AssertionError(f"{name} converted with no table")
        compared += 1
    return compared


if __name__ == "__main__":
    count = globals()["check_" + sys.argv[1]]()
    assert count > 0
    print(f"{sys.argv[1]}: {count} compared")
