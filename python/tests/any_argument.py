"""Calls every public callable of `cai` (and the compiled extensions' array functions) with
arguments of every Python type, drawn by hypothesis, and checks each call returns or raises a
clean exception: TypeError, ValueError (cai.CaiError is one), BufferError where documented, or
the exception a hostile argument raised itself. Run in a subprocess by test_any_argument.py and
test_extensions.py, so that a crash (a signal) fails the test instead of killing pytest.

Usage: python any_argument.py cai|extensions [MODULE ...]
Environment: CAI_ANY_ARGUMENT_CALLS (calls per callable, default 10000), CAI_ANY_ARGUMENT_SEED
(the hypothesis seed; the run with a seed is repeatable), CAI_ANY_ARGUMENT_TRACE=1 (each call
written to stderr before it is made: the last line before a crash is the crashing call).

A `__len__` answers within what Python itself can hold (it raises OverflowError beyond, not
libcai). Left out on purpose, as documented unsafe: an int given where an address is taken
(`Array.from_c(int)`, a `c_void_p` or `POINTER(CaiArray)` made from one, a type's
`__c_dlpack_exchange_api__` int), capsules under the names that promise a DLPack struct
("dltensor", "dltensor_versioned", "dlpack_exchange_api"), and `cai.lib`'s raw C functions."""

import atexit
import ctypes
import gc
import math
import os
import shutil
import sys
import tempfile
import time

# Hypothesis's own files (its caches) in a folder of this run, not in the checkout: nothing
# left behind, and nothing read back from a previous run.
_storage = tempfile.mkdtemp(prefix="cai-hypothesis-")
atexit.register(shutil.rmtree, _storage, True)
os.environ["HYPOTHESIS_STORAGE_DIRECTORY"] = _storage

from hypothesis import HealthCheck, given, settings  # noqa: E402 (after its storage is set)
from hypothesis import seed as use_seed
from hypothesis import strategies as st

import cai


class Raised(Exception):
    """What the hostile objects raise: their own exception, which may propagate as it is."""


CLEAN = (TypeError, ValueError, BufferError, Raised)
CALLS = int(os.environ.get("CAI_ANY_ARGUMENT_CALLS", "10000"))
SEED = int(os.environ.get("CAI_ANY_ARGUMENT_SEED", "0"))
TRACE = os.environ.get("CAI_ANY_ARGUMENT_TRACE") == "1"
# Finding more than one kind of failure per run (developing a fix): print each new kind, go on.
KEEP_GOING = os.environ.get("CAI_ANY_ARGUMENT_KEEP_GOING") == "1"
BATCH = 20  # calls per hypothesis example: the count reached without 10,000 examples each

# ---- the values ----

INTS = st.one_of(
    st.integers(),
    st.integers(min_value=-(2**200), max_value=2**200),
    st.sampled_from([0, 1, 2, -1, -2, 2**31, 2**32, 2**63 - 1, 2**63, 2**64 - 1, 2**64, -(2**63), -(2**63) - 1,
                     2**1000, -(2**1000), 65, 64, -64]),
)
FLOATS = st.one_of(st.floats(), st.sampled_from([math.nan, math.inf, -math.inf, -0.0, 1e308, 5e-324]))
SCALARS = st.one_of(
    INTS, FLOATS, st.text(max_size=40), st.binary(max_size=40), st.none(), st.booleans(),
    st.complex_numbers(), st.builds(bytearray, st.binary(max_size=8)),
    st.sampled_from(["<f4", "|u1", ">i8", "<c16", "|b1", "<M8[ns]", "V8", "", " <f4", "<f4 ", "f", "<f4\0",
                     "dltensor", "__cuda_array_interface__", b"<f4", Ellipsis, NotImplemented, object(), type,
                     int, cai.Array, cai.CaiArray]),
)


class LyingSequence:
    """A sequence whose `__len__` says one thing (huge, negative, raising) and holds another."""

    def __init__(self, items, length):
        self.items, self.length = list(items), length

    def __len__(self):
        if isinstance(self.length, BaseException):
            raise self.length
        return self.length

    def __getitem__(self, index):
        return self.items[index]

    def __iter__(self):
        return iter(self.items)

    def __repr__(self):
        return f"LyingSequence({self.items!r}, {self.length!r})"

    def _repr_pretty_(self, printer, cycle):
        printer.text(repr(self))


class LyingList(list):
    """A list subclass whose `__len__` lies (the list's own size stays what it holds)."""

    length = 2**62

    def __len__(self):
        return self.length

    def __repr__(self):
        return f"LyingList({list.__repr__(self)}, length={self.length!r})"

    def _repr_pretty_(self, printer, cycle):  # hypothesis's printer, which would ask len()
        printer.text(repr(self))


class Hostile:
    """An object whose every attribute (and the special methods libcai may call) returns what
    it was given or raises."""

    def __init__(self, attributes, index, length, truth):
        object.__setattr__(self, "_attributes", attributes)
        object.__setattr__(self, "_answers", (index, length, truth))

    def _answer(self, which):
        answer = self._answers[which]
        if isinstance(answer, BaseException):
            raise answer
        return answer

    def __getattr__(self, name):
        answer = self._attributes.get(name, self._attributes.get("*", Raised(name)))
        if isinstance(answer, BaseException):
            raise answer
        return answer

    def __index__(self):
        return self._answer(0)

    def __int__(self):
        return self._answer(0)

    def __len__(self):
        return self._answer(1)

    def __bool__(self):
        return self._answer(2)

    def __iter__(self):
        return iter(self._answer(1) if isinstance(self._answer(1), (list, tuple)) else [])

    def __repr__(self):
        return f"Hostile({self._attributes!r}, {self._answers!r})"

    def _repr_pretty_(self, printer, cycle):
        printer.text(repr(self))


def with_class_attributes(attributes):
    """An instance of a new type carrying `attributes` on the type (where the DLPack exchange
    table and special methods are looked up)."""
    return type("Made", (), dict(attributes))()


def raising_property(error):
    def get(self):
        raise error

    return property(get)


def capsule(name):
    """A PyCapsule under `name` pointing at zeroed memory (never a name that promises a struct)."""
    new = ctypes.pythonapi.PyCapsule_New
    new.restype, new.argtypes = ctypes.py_object, [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
    return new(ctypes.addressof(ZEROS), name, None)


ZEROS = (ctypes.c_uint64 * 64)()
# Names a capsule may have here: any but the three that promise a struct to read.
CAPSULE_NAMES = [b"used_dltensor", b"used_dltensor_versioned", b"dltensor_x", b"DLTENSOR", b"",
                 b"dlpack_exchange_api_v0", b"cai._native._C_API_x"]


def random_struct(fields):
    """A cai.CaiArray of random scalar fields, its pointers (owner, release, mask, descr) NULL:
    what a C producer may hand over wrongly without promising memory that is not there."""
    raw = cai.CaiArray()
    for name, value in fields.items():
        try:
            if name == "typestr":
                raw.typestr = value[:31]
            elif name in ("shape", "strides"):
                for i, extent in enumerate(value[:64]):
                    getattr(raw, name)[i] = extent
            else:
                setattr(raw, name, value)
        except (TypeError, ValueError, OverflowError):
            pass
    return raw


U64 = st.integers(min_value=0, max_value=2**64 - 1)
I64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)
STRUCTS = st.builds(random_struct, st.fixed_dictionaries({}, optional={
    "abi_version": st.integers(0, 3), "version": st.integers(-2, 5), "ndim": st.integers(-2, 70),
    "readonly": st.integers(0, 3), "strides_given": st.integers(0, 3), "descr_count": st.integers(0, 3),
    "data": U64, "stream": U64, "typestr": st.one_of(st.sampled_from([b"<f4", b"|u1", b"<M8[ns]", b"f4"]),
                                                      st.binary(max_size=31)),
    "shape": st.lists(I64, max_size=6), "strides": st.lists(I64, max_size=6), "memory": st.integers(0, 3),
    "stream_kind": st.integers(0, 3), "byte_offset": U64}))


def ctypes_values(struct):
    """ctypes objects of every kind, none an address made up from an int."""
    return st.one_of(
        st.builds(ctypes.c_int, st.integers(-(2**31), 2**31 - 1)),
        st.builds(ctypes.c_double, st.floats()),
        st.builds(ctypes.c_uint64, U64),
        st.just(ctypes.c_void_p()),
        st.builds(ctypes.c_char_p, st.binary(max_size=8)),
        st.builds(lambda n: ctypes.pointer(ctypes.c_int(n)), st.integers(0, 9)),
        st.builds(lambda n: ctypes.byref(ctypes.c_int(n)), st.integers(0, 9)),
        st.builds(lambda n: (ctypes.c_ubyte * n)(), st.integers(0, 16)),
        st.builds(lambda: ctypes.POINTER(cai.CaiArray)()),  # NULL
        struct,
        struct.map(ctypes.pointer),
        struct.map(ctypes.byref),
        struct.map(lambda raw: ctypes.c_void_p(ctypes.addressof(raw))),
        struct.map(lambda raw: ctypes.byref(raw, 8)),
        st.just(cai.CaiError), st.just(cai.lib.cai_validate),
    )


class FakeMemory:
    """Device memory of the fake driver, when it is the driver: some arrays point into it."""

    base = 0x10000

    @classmethod
    def set_up(cls):
        path = os.environ.get("CAI_CUDA_DRIVER", "")
        if path.endswith("libfake_cuda.so"):
            lib = ctypes.CDLL(path)
            lib.fake_cuda_alloc.restype = ctypes.c_uint64
            lib.fake_cuda_alloc.argtypes = [ctypes.c_uint64, ctypes.c_uint, ctypes.c_int, ctypes.c_uint]
            cls.base = lib.fake_cuda_alloc(1 << 16, 2, 0, 0)


FakeMemory.set_up()  # before the strategies below take its address


def plausible(values):
    """The values a CAI key takes, right and wrong."""
    extents = st.lists(st.one_of(st.integers(-2, 8), INTS, values), max_size=5)
    return {
        "shape": st.one_of(extents.map(tuple), extents, values),
        "typestr": st.one_of(st.sampled_from(["<f4", "|u1", "<i8", "|b1", ">f8", "<c8", "V12", "<M8[ns]"]), values),
        "data": st.one_of(st.tuples(st.one_of(st.just(FakeMemory.base), st.just(0), INTS), st.booleans()),
                          st.lists(values, max_size=3), values),
        "version": st.one_of(st.integers(0, 4), values),
        "strides": st.one_of(st.none(), extents.map(tuple), values),
        "descr": st.one_of(st.lists(st.tuples(st.text(max_size=3), st.sampled_from(["<f4", "|u1"]))), values),
        "stream": st.one_of(st.none(), st.integers(-2, 3), values),
        "mask": st.one_of(st.none(), values),
    }


def cai_dicts(values):
    return st.fixed_dictionaries({}, optional=plausible(values))


def array_makers():
    """Makers of real cai.Arrays (live or released) from generated descriptions: each call set
    gets an array of its own (a released one stays released)."""

    def made(d, release):
        try:
            array = cai.from_object(d, sync=False, pointer_check=cai.POINTER_CHECK_NEVER)
        except CLEAN:
            array = cai.from_object({"shape": (2, 3), "typestr": "<f4", "data": (FakeMemory.base, False),
                                     "version": 3}, sync=False, pointer_check=cai.POINTER_CHECK_NEVER)
        if release:
            array.release()
        return array

    return st.builds(lambda d, release: lambda: made(d, release), GOOD_DICTS, st.booleans())


# Valid descriptions (device memory of the fake driver where it is the driver).
GOOD_DICTS = st.fixed_dictionaries({
        "shape": st.lists(st.integers(0, 4), max_size=4).map(tuple),
        "typestr": st.sampled_from(["<f4", "|u1", "<i8", "|b1", ">f8", "<c8", "<M8[ns]", "|V3"]),
        "data": st.tuples(st.sampled_from([FakeMemory.base, FakeMemory.base + 64, 0x7000]), st.booleans()),
        "version": st.integers(0, 3),
    }, optional={"stream": st.sampled_from([None, 1, 2]),
                 "descr": st.sampled_from([[("", "<f4")], [("x", "<f4"), ("y", "<i4")]]),
                 "mask": st.just({"shape": (0,), "typestr": "|b1", "data": (0, False), "version": 3})})


def nearly_valid(values):
    """A valid description with one key replaced by any value, or removed."""
    def replaced(d, key, value, remove):
        d = dict(d)
        if remove:
            d.pop(key, None)
        else:
            d[key] = value
        return d

    return st.builds(replaced, GOOD_DICTS, st.sampled_from(list(plausible(values))), values, st.booleans())


def any_value():
    """Every Python type, nested: the argument strategy."""
    struct = st.deferred(lambda: STRUCTS)

    def extend(children):
        return st.one_of(
            st.lists(children, max_size=4),
            st.lists(children, max_size=4).map(tuple),
            st.dictionaries(st.one_of(st.text(max_size=3), st.sampled_from(list(plausible(children)))), children,
                            max_size=4),
            cai_dicts(children),
            nearly_valid(children),
            st.deferred(lambda: GOOD_DICTS),
            st.builds(LyingSequence, st.lists(children, max_size=3),
                      st.one_of(st.sampled_from([2**62, -1, 0, 1000]), st.just(Raised("__len__")))),
            st.builds(lambda items, n: LyingList(items) if n is None else type("L", (LyingList,), {"length": n})(items),
                      st.lists(children, max_size=3), st.sampled_from([None, -1, 0, 2**62])),
            st.builds(Hostile, st.dictionaries(
                st.sampled_from(["*", "__cuda_array_interface__", "__dlpack__", "__dlpack_device__", "shape",
                                 "typestr", "data", "buffer", "offset", "dtype", "strides", "int_ptr", "queue",
                                 "base_data", "__cuda_stream__", "cuda_stream", "ptr"]),
                st.one_of(children, st.just(Raised("attribute")))),
                st.one_of(INTS, st.just(Raised("__index__"))), st.one_of(st.integers(-(2**62), 2**62), st.just(Raised("__len__"))),
                st.one_of(st.booleans(), st.just(Raised("__bool__")), INTS)),
            st.builds(lambda v: with_class_attributes({"__cuda_array_interface__": v}), children),
            st.builds(lambda v: with_class_attributes({"__cuda_array_interface__": raising_property(v)}),
                      st.sampled_from([Raised("cai"), AttributeError("cai")])),
            st.builds(lambda v: with_class_attributes({"__dlpack__": v}), children),
            st.builds(lambda result, device: with_class_attributes({
                "__dlpack__": lambda self, **kw: result, "__dlpack_device__": lambda self: device}),
                st.one_of(children, st.sampled_from(CAPSULE_NAMES).map(capsule)), children),
            st.builds(lambda v: with_class_attributes({"__dlpack_c_exchange_api__": v, "__dlpack__": None}),
                      st.one_of(children, st.sampled_from(CAPSULE_NAMES).map(capsule))),
            st.builds(lambda v: with_class_attributes({"__c_dlpack_exchange_api__": v}),
                      children.filter(lambda v: not isinstance(v, int))),
        )

    leaves = st.one_of(SCALARS, ctypes_values(struct), st.deferred(lambda: ARRAY_MAKERS).map(lambda make: make()),
                       st.sampled_from(CAPSULE_NAMES).map(capsule), numpy_arrays())
    return st.recursive(leaves, extend, max_leaves=6)


def numpy_arrays():
    try:
        import numpy
    except ImportError:
        return st.nothing()
    return st.builds(lambda shape, dtype, step: numpy.zeros(shape, dtype)[..., ::step],
                     st.lists(st.integers(0, 3), min_size=1, max_size=3).map(tuple),
                     st.sampled_from(["f4", "u1", "?", "c8", "M8[ns]", "V3", ">i2"]), st.integers(1, 2))


# Deferred: the name in hypothesis's messages instead of the whole strategy spelt out.
VALUES = st.deferred(lambda: ANY_VALUE)
ANY_VALUE = any_value()
ARRAY_MAKERS = array_makers()

# ---- the calls ----


def describe(value):
    try:
        return repr(value)[:300]
    except BaseException as error:  # noqa: BLE001 (a hostile repr)
        return f"<{type(value).__name__}: repr raised {type(error).__name__}>"


class Tally:
    def __init__(self):
        self.counts = {}

    def call(self, name, function, *args, **kwargs):
        if TRACE:
            print(f"CALL {name} {describe(args)} {describe(kwargs)}", file=sys.stderr, flush=True)
        outcome = self.counts.setdefault(name, {})
        try:
            result = function(*args, **kwargs)
        except CLEAN as error:
            kind = type(error).__name__
        except BaseException as error:
            if KEEP_GOING:
                kind = f"FAILED {type(error).__name__}"
                if kind not in outcome:
                    print(f"{name}: {type(error).__name__}: {str(error)[:200]} on {describe(args)} {describe(kwargs)}",
                          flush=True)
                outcome[kind] = outcome.get(kind, 0) + 1
                return
            raise AssertionError(
                f"{name}(*{describe(args)}, **{describe(kwargs)}) raised {type(error).__name__}: {error}"
            ) from error
        else:
            kind = "returned"
            del result
        outcome[kind] = outcome.get(kind, 0) + 1

    def report(self, name):
        outcome = self.counts.get(name, {})
        total = sum(outcome.values())
        detail = ", ".join(f"{kind} {count}" for kind, count in sorted(outcome.items()))
        print(f"{name}: {total} calls, 0 crashes ({detail})", flush=True)
        return total


TALLY = Tally()


# The keywords any callable here takes, each drawn (or left out) once per call set.
KEYWORDS = ["stream", "sync", "writable", "pointer_check", "allow_host", "queue", "max_version", "dl_device", "copy"]
# cai.CaiArray's fields given as keywords.
FIELDS = ["ndim", "typestr", "data", "shape", "release", "mask"]


POOL = 8  # values drawn per hypothesis example, combined into its BATCH call sets


@st.composite
def call_sets(draw, with_array):
    """BATCH call sets, each what one call of every callable of a group is made of: positional
    values (1 to 3), keywords (up to 3 of them), cai.CaiArray fields (up to 2), and for an
    Array's members a fresh array. Values come from a pool drawn per example and are combined
    per call set by hypothesis too: every callable gets a generated call for a fraction of the
    drawing (the values, recursive and of every type, cost milliseconds each)."""
    pool = draw(st.lists(VALUES, min_size=POOL, max_size=POOL))
    makers = draw(st.lists(ARRAY_MAKERS, min_size=3, max_size=3)) if with_array else []
    pick = st.integers(0, POOL - 1)
    sets = []
    for _ in range(BATCH):
        drawn = {
            "args": [pool[i] for i in draw(st.lists(pick, min_size=1, max_size=3))],
            "kw": {name: pool[draw(pick)] for name in draw(st.sets(st.sampled_from(KEYWORDS), max_size=3))},
            "fields": {name: pool[draw(pick)] for name in draw(st.sets(st.sampled_from(FIELDS), max_size=2))},
        }
        if with_array:
            drawn["array"] = makers[draw(st.integers(0, len(makers) - 1))]()
        sets.append(drawn)
    return sets


def only(kw, names):
    return {name: value for name, value in kw.items() if name in names}


def fuzz(group, callables, with_array):
    """Calls each of `callables` ({name: a function of a call set that makes the call}) CALLS
    times, BATCH call sets per hypothesis example; the seed is fixed so that a failing run
    repeats. Prints each callable's count and outcomes."""

    @use_seed(SEED)
    @settings(max_examples=max(1, math.ceil(CALLS / BATCH)), database=None, deadline=None, derandomize=False,
              suppress_health_check=list(HealthCheck), print_blob=True)
    @given(call_sets(with_array))
    def run(batch):
        for drawn in batch:
            for name, make_call in callables.items():
                make_call(name, drawn)
        gc.collect(0)

    started = time.monotonic()
    while min(sum(TALLY.counts.get(name, {}).values()) for name in callables) < CALLS:
        run()
    for name in callables:
        TALLY.report(name)
    print(f"{group}: {time.monotonic() - started:.1f} s", flush=True)


def first(function, keywords=()):
    """A call of function(first value, **the keywords it takes)."""
    return lambda name, d: TALLY.call(name, function, d["args"][0], **only(d["kw"], keywords))


def rest(function):
    """A call of function(*the other values): none, one or two."""
    return lambda name, d: TALLY.call(name, function, *d["args"][1:])


def from_c(name, d):
    # An int is an address, documented as unsafe: never made up here.
    pointer = d["args"][0]
    if isinstance(pointer, int) and not isinstance(pointer, bool):
        pointer = str(pointer)
    TALLY.call(name, cai.Array.from_c, pointer)


def cai_module_callables():
    """Every public callable of cai (`__all__`) and cai.Array's class methods."""
    callables = {}
    for name in cai.__all__:
        value = getattr(cai, name)
        if name == "lib" or not callable(value):
            continue  # cai.lib is a ctypes CDLL (not callable): its C functions take raw addresses
        if name == "from_object":
            call = first(value, ["stream", "sync", "writable", "pointer_check", "allow_host"])
        elif name == "from_buffer_interface":
            call = first(value, ["queue", "sync", "writable"])
        elif name == "validate":
            call = first(value)
        elif name in ("CaiArray", "CaiError"):
            call = (lambda v: lambda n, d: TALLY.call(n, v, *d["args"], **(d["fields"] if v is cai.CaiArray else {})))(
                value)
        else:
            call = rest(value)
        callables[f"cai.{name}"] = call
    assert {"cai.from_object", "cai.validate", "cai.from_buffer_interface", "cai.Array"} <= set(callables)
    callables["cai.Array.from_c"] = from_c
    return callables


def array_members():
    """Every method (given any values) and property (read) of a cai.Array."""
    members = type(cai.from_object({"shape": (2,), "typestr": "<f4", "data": (FakeMemory.base, False),
                                    "version": 3}, sync=False)).__dict__
    methods = sorted(name for name, member in members.items() if callable(member)
                     and (not name.startswith("__") or name in ("__dlpack__", "__dlpack_device__", "__repr__")))
    properties = sorted(name for name, member in members.items() if not callable(member) and name != "__doc__")
    assert {"release", "__dlpack__", "__dlpack_device__", "from_c"} <= set(methods), methods
    assert {"shape", "typestr", "__cuda_array_interface__", "mask", "pointer_info", "ptr"} <= set(properties)
    callables = {}
    # Properties first: `release` (last) changes what they read.
    for prop in properties:
        callables[f"cai.Array.{prop} (read)"] = (lambda p: lambda n, d: TALLY.call(n, getattr, d["array"], p))(prop)
    for method in methods:
        if method == "from_c":
            continue  # a class method, among the module's callables
        if method == "__dlpack__":
            call = (lambda n, d: TALLY.call(n, d["array"].__dlpack__,
                                            **only(d["kw"], ["stream", "max_version", "dl_device", "copy"])))
        else:
            call = (lambda m: lambda n, d: TALLY.call(n, getattr(d["array"], m), *d["args"][1:]))(method)
        callables[f"cai.Array.{method}"] = call
    callables["cai.Array.release"] = callables.pop("cai.Array.release")
    return callables


def extension_callables(modules):
    """Every function of the test extensions that takes an array, given any values."""
    callables = {}
    for module_name in modules:
        module = __import__(module_name)
        for name in sorted(dir(module)):
            function = getattr(module, name)
            if name.startswith("_") or not callable(function) or name in SKIPPED_EXTENSION_FUNCTIONS:
                continue
            if name == "view_describe":
                # (obj, allow_host): allow_host a bool, True for an even count of values
                call = (lambda f: lambda n, d: TALLY.call(n, f, d["args"][0], len(d["args"]) % 2 == 0))(function)
            else:
                call = first(function)
            callables[f"{module_name}.{name}"] = call
    return callables


# Host memory the offered instances below describe, kept for the run.
OFFERED_MEMORY = []


def offered_callables(modules):
    """The protocols libcai's offer gave each test module's `Image` (the pybind11, nanobind,
    Cython and PyO3 routes'), on a host instance and on one over the fake driver's memory:
    `__dlpack__` given any keywords (and positions, which it refuses), `__dlpack_device__` any
    values, `__cuda_array_interface__` read."""
    callables = {}
    for module_name in modules:
        image_type = getattr(__import__(module_name), "Image", None)
        if image_type is None:
            continue
        memory = (ctypes.c_uint8 * 64)()
        OFFERED_MEMORY.append(memory)
        instances = [image_type(ctypes.addressof(memory), 2, 3, host=True), image_type(FakeMemory.base, 2, 3)]
        prefix = f"{module_name}.Image"
        callables[f"{prefix}.__dlpack__"] = (lambda i: lambda n, d: TALLY.call(
            n, i[len(d["args"]) % 2].__dlpack__, *d["args"][2:],
            **only(d["kw"], ["stream", "max_version", "dl_device", "copy"])))(instances)
        callables[f"{prefix}.__dlpack_device__"] = (lambda i: lambda n, d: TALLY.call(
            n, i[len(d["args"]) % 2].__dlpack_device__, *d["args"][1:]))(instances)
        # (a host instance has none: AttributeError, as `hasattr` expects, hence the default)
        callables[f"{prefix}.__cuda_array_interface__ (read)"] = (lambda i: lambda n, d: TALLY.call(
            n, getattr, i[len(d["args"]) % 2], "__cuda_array_interface__", None))(instances)
    return callables


# The extensions' functions that take no array (producers, counters, the offered types and
# their helpers) or a count to loop over.
SKIPPED_EXTENSION_FUNCTIONS = {"produce", "produce_invalid", "released_count", "table_layout", "import_many",
                               "keep_until_exit", "release_on_a_thread", "delete_on_a_thread", "library_version", "Image", "Constant",
                               "live_images", "offer_again"}


def main():
    what = sys.argv[1]
    started = time.monotonic()
    print(f"seed {SEED}, {CALLS} calls per callable", flush=True)
    if what == "cai":
        fuzz("cai and cai.Array.from_c", cai_module_callables(), with_array=False)
        fuzz("cai.Array's members", array_members(), with_array=True)
    else:
        fuzz("extensions", {**extension_callables(sys.argv[2:]), **offered_callables(sys.argv[2:])},
             with_array=False)
    print(f"all: {sum(sum(c.values()) for c in TALLY.counts.values())} calls in {len(TALLY.counts)} callables, "
          f"0 crashes, {time.monotonic() - started:.1f} s", flush=True)


if __name__ == "__main__":
    main()
