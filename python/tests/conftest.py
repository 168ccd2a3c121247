"""Test setup: the installed `cai` package (scripts/test.sh installs it into a virtual
environment, as a user would) and the fake CUDA driver (tests/fake_cuda/fake_cuda.c, a test
double) as the driver for the whole session."""

import ctypes
import sys
import os
import pathlib
import subprocess
import tempfile

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]

_build_dir = pathlib.Path(tempfile.mkdtemp(prefix="cai-pytest-"))


def compile_shared(source, name):
    """Compiles a C file into a shared library in this session's build directory."""
    out = _build_dir / name
    subprocess.run(
        [os.environ.get("CC", "cc"), "-std=c11", "-O1", "-Wall", "-Wextra", "-Werror", "-shared", "-fPIC",
         "-pthread", f"-I{ROOT / 'include'}", str(source), "-o", str(out)],
        check=True,
    )
    return out


# scripts/test.sh runs the fast paths' files again on the release wheel, installed in a folder
# of its own that PYTHONPATH puts first: those runs must import that package, not another.
if os.environ.get("CAI_TESTED_PACKAGE"):
    import cai as _cai

    _expected = pathlib.Path(os.environ["CAI_TESTED_PACKAGE"]).resolve()
    if not pathlib.Path(_cai.__file__).resolve().is_relative_to(_expected):
        raise RuntimeError(f"the tests import cai from {_cai.__file__}, not from CAI_TESTED_PACKAGE={_expected}")

FAKE_DRIVER = compile_shared(ROOT / "tests" / "fake_cuda" / "fake_cuda.c", "libfake_cuda.so")
os.environ["CAI_CUDA_DRIVER"] = str(FAKE_DRIVER)


def library_path():
    import cai

    return cai.library_path()


class FakeDriver:
    """The fake driver's controls; its log and injected failures are per thread."""

    def __init__(self, path):
        self.lib = ctypes.CDLL(str(path))
        self.lib.fake_cuda_alloc.restype = ctypes.c_uint64
        self.lib.fake_cuda_alloc.argtypes = [ctypes.c_uint64, ctypes.c_uint, ctypes.c_int, ctypes.c_uint]
        self.lib.fake_cuda_stream_create.restype = ctypes.c_uint64
        self.lib.fake_cuda_log.restype = ctypes.c_char_p

    def begin(self, device=0):
        self.lib.fake_cuda_set_device(device)
        self.lib.fake_cuda_log_clear()

    def alloc(self, nbytes, memory_type=2, device=0, flags=0):
        return self.lib.fake_cuda_alloc(nbytes, memory_type, device, flags)

    def stream(self, device=0):
        return self.lib.fake_cuda_stream_create(device)

    def stream_name(self, handle):
        return "S%d" % ctypes.c_int.from_address(handle).value

    def log(self):
        return self.lib.fake_cuda_log().decode()

    def launch_fill(self, stream, pointer, n, value):
        """The fake's slow kernel on `stream`: pointer[0..n) = value (uint32), seen only by
        work ordered after it."""
        module, function = ctypes.c_void_p(), ctypes.c_void_p()
        assert self.lib.cuModuleLoadData(ctypes.byref(module), b"") == 0
        assert self.lib.cuModuleGetFunction(ctypes.byref(function), module, b"spin_then_fill") == 0
        args = [ctypes.c_uint64(pointer), ctypes.c_uint32(n), ctypes.c_uint32(value), ctypes.c_uint64(0)]
        params = (ctypes.c_void_p * 4)(*[ctypes.cast(ctypes.byref(a), ctypes.c_void_p) for a in args])
        assert self.lib.cuLaunchKernel(function, 1, 1, 1, 1, 1, 1, 0, ctypes.c_void_p(stream), params, None) == 0

    def read(self, stream, pointer, n):
        """The uint32 values a copy on `stream` reads: what that stream is ordered after."""
        host = (ctypes.c_uint32 * n)()
        assert self.lib.cuMemcpyDtoHAsync_v2(host, ctypes.c_uint64(pointer), ctypes.c_size_t(n * 4),
                                             ctypes.c_void_p(stream)) == 0
        return set(host)

    def calls(self, prefix):
        return [line for line in self.log().splitlines() if line.startswith(prefix)]


FAKE = FakeDriver(FAKE_DRIVER)
FAKE.begin(0)
# One fake device allocation that descriptors in the tests point into.
DEVICE_BUFFER = FAKE.alloc(1 << 20)


@pytest.fixture
def fake():
    FAKE.begin(0)
    return FAKE


@pytest.fixture(scope="session")
def libcai():
    return ctypes.CDLL(str(library_path()))


@pytest.fixture
def dlpack_calls(monkeypatch):
    """`dlpack_calls(cls)` counts the calls of `cls.__dlpack__` until the test ends: the list it
    returns gets each call's keyword arguments. A producer taken through its type's exchange
    table adds nothing to it; numpy.from_dlpack, which reads no table, is the control."""

    def count(cls):
        original, calls = cls.__dlpack__, []

        def counting(self, *args, **kwargs):
            calls.append(kwargs)
            return original(self, *args, **kwargs)

        monkeypatch.setattr(cls, "__dlpack__", counting)
        return calls

    return count


# Lines a test wants shown after the run even when it passes (the property-based suite's calls
# per callable): pytest -q shows no passing test's output.
SUMMARY = []


def pytest_terminal_summary(terminalreporter):
    if SUMMARY:
        terminalreporter.section("calls with any argument (hypothesis)")
        for line in SUMMARY:
            terminalreporter.write_line(line)


@pytest.fixture(scope="session")
def offer_ext(tmp_path_factory):
    """python/tests/extensions/offer_ext.c, built once against the installed package: the C
    route's offered types (`Image`, a heap type, and `StaticImage`) and the functions that read
    any object's C-level table as a C consumer does."""
    import importlib

    sys.path.insert(0, str(ROOT / "python" / "tests" / "extensions"))
    import build

    out = tmp_path_factory.mktemp("offer_ext")
    build.compile_module([build.HERE / "offer_ext.c"], out / f"cai_offer_ext{build.SUFFIX}", cpp=False)
    sys.path.insert(0, str(out))
    try:
        return importlib.import_module("cai_offer_ext")
    finally:
        sys.path.remove(str(out))


@pytest.fixture(scope="session")
def route_modules(tmp_path_factory):
    """The pybind11, nanobind, Cython and PyO3 test modules (python/tests/extensions), built once
    against the installed package, by route; each has an `Image` its route's offer gave every
    producer protocol."""
    import importlib

    sys.path.insert(0, str(ROOT / "python" / "tests" / "extensions"))
    import build

    out = tmp_path_factory.mktemp("route_modules")
    routes = ["pybind11", "nanobind", "cython", "pyo3"]
    for route in routes:
        build.BUILDERS[route](out)
    sys.path.insert(0, str(out))
    try:
        return {route: importlib.import_module(f"cai_{route}_ext") for route in routes}
    finally:
        sys.path.remove(str(out))


class _Held:
    """What a dropped error holds, watched by a weak reference."""


def diverging_producer(device):
    """(Producer, held, watches): a producer type whose instances either expose a CAI dict of
    4 float32 at `device` (`Producer(True)`) or lack it, the property raising AttributeError,
    and are taken by a `__dlpack__` from before DLPack 1.0 that refuses `max_version` with a
    TypeError (`Producer(False)`, host memory), once for each of the two newer keyword sets a
    consumer asks with first. Each of the three errors holds an object popped from `held`;
    `watches` are weak references to them, to see that all are let go of."""
    import weakref

    import numpy

    held = [_Held(), _Held(), _Held()]
    watches = [weakref.ref(each) for each in held]
    values = numpy.arange(4, dtype=numpy.float32)

    class Producer:
        def __init__(self, with_interface):
            self.with_interface = with_interface

        @property
        def __cuda_array_interface__(self):
            if self.with_interface:
                return {"shape": (4,), "typestr": "<f4", "data": (device, False), "version": 3}
            raise AttributeError("host memory", held.pop())

        def __dlpack__(self, stream=None, **newer):
            if newer:
                raise TypeError("a producer from before DLPack 1.0", held.pop())
            return values.__dlpack__(stream=stream)

        def __dlpack_device__(self):
            return (1, 0)

    return Producer, held, watches


def keyword_producer(values, takes):
    """A DLPack producer type over the numpy array `values` whose `__dlpack__` takes only the
    keywords in `takes` (a TypeError for any other, as Python's own for an unexpected keyword),
    recording the keywords of every call, refused or not, in the type's `asked`."""

    class KeywordProducer:
        asked = []

        def __dlpack_device__(self):
            return values.__dlpack_device__()

        def __dlpack__(self, **keywords):
            type(self).asked.append(keywords)
            unexpected = sorted(set(keywords) - set(takes))
            if unexpected:
                raise TypeError(f"__dlpack__() got an unexpected keyword argument '{unexpected[0]}'")
            return values.__dlpack__(**keywords)

    return KeywordProducer


# The keywords of the array API standard's `__dlpack__`, all of which libcai asks with first.
ALL_FOUR = ["stream", "max_version", "dl_device", "copy"]
# The keyword sets libcai asks `__dlpack__` with, in turn after each TypeError (each sorted, as
# the tests compare them): all four, `stream` and `max_version`, `stream` alone.
KEYWORD_SETS = [sorted(ALL_FOUR), ["max_version", "stream"], ["stream"]]


def answering_metaclasses():
    """Metaclasses that define `__mro__`, `__dict__` or `__name__` for their classes (a property
    that raises, or gives no classes, no str), whose word libcai must not take for what a class
    is or is called: (the name it defines, the metaclass)."""
    answers = [("__mro__", lambda cls: 1 / 0), ("__mro__", lambda cls: (1, 2)), ("__mro__", lambda cls: None),
               ("__dict__", lambda cls: 1 / 0), ("__name__", lambda cls: 1 / 0), ("__name__", lambda cls: 42)]
    return [(name, type("Meta", (type,), {name: property(answer)})) for name, answer in answers]


# DLPack 1.3's exchange table: a {version, prev_version_api} header (16 bytes), then
# managed_tensor_allocator, managed_tensor_from_py_object_no_sync,
# managed_tensor_to_py_object_no_sync, dltensor_from_py_object_no_sync, current_work_stream.
EXCHANGE_MANAGED_TENSOR_FROM_PY_OBJECT = 24
EXCHANGE_DLTENSOR_FROM_PY_OBJECT = 40


def exchange_table_entry(type_, offset):
    """The function at `offset` of `type_`'s DLPack exchange table, called from Python as a
    consumer calls it: attached (PYFUNCTYPE), its exception raised. Both entries above take
    (object, out pointer) and return an int."""
    get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
    get_pointer.restype, get_pointer.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    table = get_pointer(type_.__dlpack_c_exchange_api__, b"dlpack_exchange_api")
    entry = ctypes.c_void_p.from_address(table + offset).value
    return ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.c_void_p)(entry)


def delete_managed_tensor(address):
    """Runs the deleter of the DLManagedTensorVersioned at `address` ({version (8 bytes),
    manager_ctx, deleter, ...})."""
    deleter = ctypes.c_void_p.from_address(address + 16).value
    ctypes.CFUNCTYPE(None, ctypes.c_void_p)(deleter)(address)


def take_and_delete_through_exchange_table(obj, times=500, each=None):
    """Takes `times` tensors of `obj` through its type's `managed_tensor_from_py_object_no_sync`
    and deletes each (calling `each()` after each, if given): a tensor holds the object until
    its deleter runs, and the object's count comes back where it was."""
    take = exchange_table_entry(type(obj), EXCHANGE_MANAGED_TENSOR_FROM_PY_OBJECT)
    before = sys.getrefcount(obj)
    out = ctypes.c_void_p()
    for _ in range(times):
        assert take(obj, ctypes.addressof(out)) == 0
        assert sys.getrefcount(obj) == before + 1
        delete_managed_tensor(out.value)
        if each is not None:
            each()
    assert sys.getrefcount(obj) == before


class CapsuleOf:
    """A DLPack producer whose `__dlpack__`, asked with any keywords, hands back a capsule made
    already (the consumer takes it once), on `device`."""

    def __init__(self, capsule, device):
        self.capsule, self.device = capsule, device

    def __dlpack__(self, **_):
        return self.capsule

    def __dlpack_device__(self):
        return self.device


def outcome_of(read):
    """What `read()` gave: its value, or the exception's type and words."""
    try:
        return read()
    except Exception as error:
        return type(error), str(error)


def numpy_exports_read_only():
    """Whether the installed numpy exports a read-only array by DLPack (its versioned struct,
    numpy 2.1 and later), which is also when libcai reads numpy arrays by numpy's C ABI."""
    import numpy

    return tuple(int(part) for part in numpy.__version__.split(".")[:2]) >= (2, 1)


# What two reads of one array need not share: the struct's address; the owner, the mask and
# the objects made of the array are compared apart, by identity or by their own fields.
NOT_SHARED_BY_TWO_READS = frozenset({"ptr", "buffer", "mask", "owner", "_as_parameter_"})


def public_fields(array, skipped):
    """Every public value of a cai.Array but those named in `skipped` (the struct as Python sees
    it, methods left out), an attribute that raises as what it raised, and its
    `__dlpack_device__`: what two reads of one array must agree on."""
    out = {}
    for name in dir(array):
        if name.startswith("__") and name != "__cuda_array_interface__" or name in skipped:
            continue
        try:
            value = getattr(array, name)
        except Exception as error:  # an attribute absent for this memory: the same on both sides
            value = ("raised", type(error).__name__, str(error))
        if not callable(value):
            out[name] = value
    try:
        out["__dlpack_device__"] = array.__dlpack_device__()
    except Exception as error:  # unknown for memory no driver knows: the same on both sides
        out["__dlpack_device__"] = ("raised", type(error).__name__, str(error))
    return out


class TorchLikeStream:
    """A stream object as PyTorch's: the handle under `cuda_stream`, no `__cuda_stream__`."""

    def __init__(self, handle):
        self.cuda_stream = handle
