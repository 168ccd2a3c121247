"""docs/conformance.md rows 49-50: Python keeps producers alive; C-made arrays are released once."""

import ctypes
import gc
import sys
import weakref

import pytest

import cai
from conftest import DEVICE_BUFFER, ROOT, compile_shared


class Producer:
    def __init__(self, ptr):
        self.__cuda_array_interface__ = {"shape": (4,), "typestr": "<f4", "data": (ptr, False), "version": 3}


def test_row_49_the_producer_lives_as_long_as_the_array(fake):
    producer = Producer(fake.alloc(64))
    alive = weakref.ref(producer)
    array = cai.from_object(producer)
    del producer
    gc.collect()
    assert alive() is not None, "the cai.Array keeps its producer alive"
    assert array.owner is alive()
    del array
    gc.collect()
    assert alive() is None, "and lets go of it afterwards"


def test_mask_producers_live_as_long_as_the_array(fake):
    mask = Producer(DEVICE_BUFFER)
    mask.__cuda_array_interface__["typestr"] = "|b1"
    alive = weakref.ref(mask)
    array = cai.from_object({"shape": (4,), "typestr": "<f4", "data": (DEVICE_BUFFER, False), "version": 3, "mask": mask})
    del mask
    gc.collect()
    assert alive() is not None
    del array
    gc.collect()
    assert alive() is None


@pytest.fixture(scope="module")
def producer_lib():
    lib = ctypes.CDLL(str(compile_shared(ROOT / "python" / "tests" / "c_producer.c", "libc_producer.so")))
    lib.producer_make.argtypes = [ctypes.POINTER(cai.CaiArray), ctypes.c_int64, ctypes.c_uint64]
    return lib


def test_row_50_a_c_made_array_is_released_exactly_once_when_collected(producer_lib, fake):
    before = producer_lib.producer_release_count()
    raw = cai.CaiArray()
    assert producer_lib.producer_make(ctypes.byref(raw), 8, fake.alloc(32)) == 0
    array = cai.Array.from_c(ctypes.byref(raw))
    assert not raw.release, "ownership moved: the C struct can no longer release"
    assert array.shape == (8,) and array.nbytes == 32
    view = cai.from_object(array)  # a cai.Array is itself a producer
    del array
    gc.collect()
    assert producer_lib.producer_release_count() == before, "the view keeps the C array alive"
    del view
    gc.collect()
    assert producer_lib.producer_release_count() == before + 1
    assert cai.lib.cai_release(ctypes.byref(raw), None) == 0
    assert producer_lib.producer_release_count() == before + 1, "never twice"


def test_a_borrowed_c_array_is_never_released(producer_lib):
    before = producer_lib.producer_release_count()
    raw = cai.CaiArray()
    producer_lib.producer_make(ctypes.byref(raw), 4, DEVICE_BUFFER)
    # The field's value as an address: a ctypes object read from the field shares its memory.
    release_address = ctypes.cast(raw.release, ctypes.c_void_p).value
    raw.release = cai._ctypes.RELEASE_FN()
    array = cai.Array.from_c(ctypes.addressof(raw))
    del array
    gc.collect()
    assert producer_lib.producer_release_count() == before
    raw.release = cai._ctypes.RELEASE_FN(release_address)
    cai.lib.cai_release(ctypes.byref(raw), None)
    assert producer_lib.producer_release_count() == before + 1


def test_row_48a_array_re_exports_its_input_in_canonical_form(fake):
    stream = fake.stream()
    source = {"shape": [2, 3], "typestr": "<f4", "data": [DEVICE_BUFFER, True], "version": 3, "strides": (4, 8),
              "stream": stream, "descr": [("", "<f4")]}
    out = cai.from_object(source, sync=False).__cuda_array_interface__
    assert out == {"shape": (2, 3), "typestr": "<f4", "data": (DEVICE_BUFFER, True), "version": 3, "strides": (4, 8),
                   "stream": stream}, "numpy's default descr restates the typestr: not carried"
    old = {"shape": (2, 3), "typestr": "f4", "data": (DEVICE_BUFFER, False), "version": 2, "strides": (12, 4)}
    assert cai.from_object(old, sync=False).__cuda_array_interface__ == {
        "shape": (2, 3), "typestr": "<f4", "data": (DEVICE_BUFFER, False), "version": 3, "strides": None,
        "stream": None}
    for typestr, canonical in [("=i2", "<i2"), ("b1", "|b1"), (">f8", ">f8"), ("<M8[1ns]", "<M8[ns]")]:
        d = {"shape": (0,), "typestr": typestr, "data": (DEVICE_BUFFER, False), "version": 3}
        assert cai.from_object(d).__cuda_array_interface__["typestr"] == canonical
        assert cai.from_object(d).__cuda_array_interface__["data"] == (0, False), "empty: data 0"
    fields = [("x", "<f4"), ("y", "<i4")]
    structured = {"shape": (2,), "typestr": "|V8", "data": (DEVICE_BUFFER, False), "version": 3, "descr": fields}
    assert cai.from_object(structured, sync=False).__cuda_array_interface__["descr"] == fields


def test_export_version_2_when_asked_in_the_environment_no_driver():
    """libcai reads CAI_ARRAY_INTERFACE_EXPORT_VERSION once per process: set before it starts."""
    import os
    import subprocess
    import sys

    code = ("import cai\n"
            "d = {'shape': (4,), 'typestr': '<f4', 'data': (4096, False), 'version': 3, 'stream': 7}\n"
            "out = cai.from_object(d, sync=False).__cuda_array_interface__\n"
            "assert out['version'] == 2 and 'stream' not in out, out\n")
    env = {**os.environ, "CAI_ARRAY_INTERFACE_EXPORT_VERSION": "2", "CAI_CUDA_DRIVER": "/nonexistent/libcuda.so.1"}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_array_passes_to_c_functions_directly(fake):
    array = cai.from_object({"shape": (3,), "typestr": "<f4", "data": (DEVICE_BUFFER, False), "version": 3})
    assert cai.lib.cai_validate(array, None) == 0
    assert cai.lib.cai_validate(ctypes.cast(array.ptr, ctypes.POINTER(cai.CaiArray)), None) == 0


def test_row_66_a_view_of_a_cai_array_names_it_its_owner_and_keeps_it_alive_fake_driver(fake):
    source = cai.from_object(Producer(fake.alloc(64)))
    alive = weakref.ref(source)
    view = cai.from_object(source)
    assert view.owner is source
    del source
    gc.collect()
    assert alive() is not None, "the view keeps the cai.Array it views alive"
    del view
    gc.collect()
    assert alive() is None, "and lets go of it afterwards"


def test_an_array_and_its_producer_in_a_reference_cycle_are_collected_fake_driver(fake):
    """cai.Array's type visits what it keeps (the producer, a mask's producers, a mask view's
    array) for the collector: a producer that holds the array it was read into is collected
    with it, not leaked."""
    producer = Producer(fake.alloc(64))
    producer.array = cai.from_object(producer)
    producer.mask_view_source = cai.from_object(
        {"shape": (4,), "typestr": "<f4", "data": (DEVICE_BUFFER, False), "version": 3,
         "mask": Producer(DEVICE_BUFFER).__cuda_array_interface__ | {"typestr": "|b1"}})
    producer.mask_view = producer.mask_view_source.mask
    alive = [weakref.ref(producer), weakref.ref(producer.array), weakref.ref(producer.mask_view)]
    del producer
    gc.collect()
    assert [each() for each in alive] == [None, None, None]


def test_a_cai_array_is_made_only_by_the_functions_that_read_one():
    """No constructor and no subclass: every cai.Array holds what a reader read."""
    with pytest.raises(TypeError, match="cannot be made directly"):
        cai.Array()
    with pytest.raises(TypeError):
        type("Sub", (cai.Array,), {})
    assert cai.Array.__module__ == "cai" and cai.Array.__qualname__ == "Array"


def test_cai_array_objects_made_again_from_freed_ones_are_whole_fake_driver(fake):
    """A freed cai.Array's memory may make the next one (array/object.rs, `spare`): each made
    that way is tracked by the collector, weakly referenceable anew, holds its own producer,
    and the type's reference count comes back to where it was (each object references its
    type once)."""
    producer = Producer(fake.alloc(64))
    type_references = None
    for _ in range(3):
        arrays = [cai.from_object(producer, pointer_check=cai.POINTER_CHECK_NEVER) for _ in range(40)]
        old = [weakref.ref(each) for each in arrays]
        del arrays
        assert [each() for each in old] == [None] * 40
        # Counted once the first round made whatever the first import keeps for good.
        type_references = type_references or sys.getrefcount(cai.Array)
    producers = [Producer(DEVICE_BUFFER) for _ in range(20)]
    for n, each in enumerate(producers):
        each.__cuda_array_interface__["shape"] = (n + 1,)
    made_again = [cai.from_object(each, pointer_check=cai.POINTER_CHECK_NEVER) for each in producers]
    assert all(gc.is_tracked(each) for each in made_again)
    assert [each.shape for each in made_again] == [(n + 1,) for n in range(20)]
    assert [each.owner for each in made_again] == producers
    references = [weakref.ref(each) for each in made_again]
    cycle = made_again[0]
    holder = Producer(DEVICE_BUFFER)
    holder.array = cai.from_object(holder, pointer_check=cai.POINTER_CHECK_NEVER)
    in_cycle = weakref.ref(holder.array)
    del made_again, cycle, holder
    gc.collect()
    assert [each() for each in references] == [None] * 20
    assert in_cycle() is None, "a made-again object in a reference cycle is collected"
    now = sys.getrefcount(cai.Array)  # outside the assert, whose rewriting holds its operands
    assert now == type_references


# Imports cai in a subinterpreter, before or after the main interpreter does, and reports each
# outcome on a line of its own.
IMPORTS_IN_A_SUBINTERPRETER = r"""
import sys, textwrap
import _testcapi

def main_imports():
    import numpy, cai
    array = cai.from_object(numpy.arange(3.0), allow_host=True, sync=False)
    print("main:", array.shape, flush=True)

in_subinterpreter = textwrap.dedent('''
    try:
        import cai
    except ImportError as error:
        print("sub: ImportError:", error, flush=True)
    else:
        # Where it loaded, its first call waited forever. (No pointer is checked, none read.)
        interface = {"shape": (1,), "typestr": "<f8", "data": (16, False), "version": 3}
        cai.from_object(interface, sync=False, pointer_check=cai.POINTER_CHECK_NEVER)
        print("sub: imported and read", flush=True)
''')
if sys.argv[1] == "main-first":
    main_imports()
if sys.argv[1] == "isolated":  # its own GIL, as CPython 3.13's interpreters module makes them
    import _interpreters
    print("sub:", _interpreters.run_string(_interpreters.create("isolated"), in_subinterpreter), flush=True)
else:  # a legacy one, sharing the main interpreter's GIL (mod_wsgi's)
    print("sub:", _testcapi.run_in_subinterp(in_subinterpreter), flush=True)
main_imports()
"""


@pytest.mark.parametrize("order", ["main-first", "sub-first", "isolated"])
def test_a_subinterpreter_is_refused_the_module_and_the_main_interpreter_keeps_it_no_driver(order):
    """The module's state is one per process, and its threads attach through the PyGILState
    API, which serves the main interpreter alone: imported in a subinterpreter, its first call
    waited forever for the GIL its own thread held. It now refuses to load there, saying why,
    and the main interpreter imports and uses it whichever imported first."""
    _testcapi = pytest.importorskip("_testcapi")
    if not hasattr(_testcapi, "run_in_subinterp"):
        pytest.skip("this CPython's _testcapi has no run_in_subinterp")
    if order == "isolated":
        pytest.importorskip("_interpreters", reason="isolated subinterpreters: CPython 3.13 or later")
    import subprocess

    done = subprocess.run([sys.executable, "-c", IMPORTS_IN_A_SUBINTERPRETER, order],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    refusals = [line for line in lines if line.startswith("sub: ImportError:")]
    assert len(refusals) == 1, lines
    refusal = refusals[0]
    assert "loads only in the main interpreter" in refusal, refusal
    # A legacy one is refused by the module, an isolated one by CPython first (the module does
    # not declare support for a GIL of its own), in words the package keeps.
    why = "does not support loading in subinterpreters" if order == "isolated" else "subinterpreter 1"
    assert why in refusal, refusal
    assert "CPython 3.10 or later" not in refusal, "the package passes the module's reason on as it is"
    assert lines[-1] == "main: (3,)", lines


# Imports the C route's test extensions (single-phase modules, as most compiled extensions
# are) in the main interpreter, then uses them in a legacy subinterpreter, which CPython gives
# a copy of each module's dict: their C API table and offered types are the main
# interpreter's. Reports each outcome on a line of its own.
EXTENSIONS_IN_A_SUBINTERPRETER = r"""
import ctypes, sys, textwrap
import _testcapi
import cai, cai_c_ext, cai_offer_ext

buffer = ctypes.create_string_buffer(64)
image = cai_offer_ext.Image(ctypes.addressof(buffer), 2, 3, host=True)
print("main:", cai_c_ext.view_describe(image, True)[:2], cai.from_object(image, allow_host=True).shape, flush=True)
in_subinterpreter = textwrap.dedent('''
    import ctypes

    def use(cai_c_ext, cai_offer_ext):
        buffer = ctypes.create_string_buffer(64)
        host = cai_offer_ext.Image(ctypes.addressof(buffer), 2, 3, host=True)
        device = cai_offer_ext.Image(ctypes.addressof(buffer), 2, 3)
        interface = {"shape": (2,), "typestr": "<f8", "data": (ctypes.addressof(buffer), False), "version": 3}
        for own in (0, 1, 2):  # the view, the owning import, the view or owning import
            status, out, message, raised = cai_c_ext.entry_outcome(interface, own, 1, 0, 2, 0)
            print("sub entry:", own, status, out == bytes([0xA5]) * len(out), raised, message, flush=True)
        for name, call in [("offered view", lambda: cai_offer_ext.view(host, True)),
                           ("offered interface", lambda: device.__cuda_array_interface__),
                           ("offered dlpack", lambda: type(host.__dlpack__()).__name__)]:
            try:
                print("sub:", name, "returned", call(), flush=True)
            except Exception as error:
                print("sub:", name, "raised", type(error).__name__, error, flush=True)

    try:
        import cai_c_ext, cai_offer_ext
    except ImportError as error:  # a CPython that loads no single-phase module there
        print("sub: import refused:", error, flush=True)
    else:
        use(cai_c_ext, cai_offer_ext)
''')
print("sub:", _testcapi.run_in_subinterp(in_subinterpreter), flush=True)
print("main:", cai_c_ext.view_describe(image, True)[:2], cai.from_object(image, allow_host=True).shape, flush=True)
"""


def test_extensions_used_in_a_subinterpreter_refuse_where_they_waited_forever_no_driver(tmp_path):
    """An extension imported in the main interpreter and used in a legacy subinterpreter calls
    libcai's C API table, and its offered types' methods, from a thread attached to that
    interpreter: where libcai attached (through the PyGILState API, which serves the main
    interpreter alone), the call waited forever for the GIL its own thread held. Such a call
    now refuses: the C API's entries with CAI_ERROR_NOT_SUPPORTED, `out` untouched and a
    RuntimeError that names the subinterpreter and the fix; a method that would attach with
    the RuntimeError; what needs no attaching (an offered `__dlpack__`) still answers, its
    capsule dropped there without waiting. The main interpreter goes on as before."""
    _testcapi = pytest.importorskip("_testcapi")
    if not hasattr(_testcapi, "run_in_subinterp"):
        pytest.skip("this CPython's _testcapi has no run_in_subinterp")
    import os
    import subprocess

    sys.path.insert(0, str(ROOT / "python" / "tests" / "extensions"))
    import build

    build.BUILDERS["c"](tmp_path)
    build.compile_module([build.HERE / "offer_ext.c"], tmp_path / f"cai_offer_ext{build.SUFFIX}", cpp=False)
    env = dict(os.environ, PYTHONPATH=str(tmp_path), CAI_CUDA_DRIVER="/nonexistent/libcuda.so.1")
    done = subprocess.run([sys.executable, "-c", EXTENSIONS_IN_A_SUBINTERPRETER], env=env, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == lines[-1] and lines[0].endswith(" (2, 3)"), lines
    if any(line.startswith("sub: import refused:") for line in lines):
        # The free-threaded build's subinterpreters load no single-phase module: no extension
        # of the main interpreter reaches libcai there.
        assert "does not support loading in subinterpreters" in "\n".join(lines), lines
        pytest.skip("this CPython loads no single-phase module in a subinterpreter: " + lines[1])
    assert lines[-2] == "sub: 0", lines
    entries = [line.split(" ", 6) for line in lines if line.startswith("sub entry:")]
    assert [entry[2] for entry in entries] == ["0", "1", "2"], lines
    names = ["cai_python_view", "cai_python_from_object", "cai_python_view_or_own"]
    for (_, _, _, status, untouched, raised, message), name in zip(entries, names):
        assert int(status) == cai._native.STATUS_CODES["CAI_ERROR_NOT_SUPPORTED"], lines
        assert (untouched, raised) == ("True", "RuntimeError"), lines
        assert message == f"CAI_ERROR_NOT_SUPPORTED: {name} was called from a subinterpreter; libcai serves the " \
                          "main interpreter only", lines
    outcomes = {line.split(" returned ")[0].split(" raised ")[0]: line for line in lines
                if line.startswith("sub: offered")}
    for name in ("sub: offered view", "sub: offered interface"):
        assert "raised RuntimeError" in outcomes[name] and "subinterpreter 1" in outcomes[name], lines
        assert "call it from the main interpreter" in outcomes[name], lines
    assert outcomes["sub: offered dlpack"] == "sub: offered dlpack returned PyCapsule", lines
