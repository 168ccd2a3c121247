"""The offer of the compiled routes other than C: a pybind11 class offered by
cai::pybind11::offer (include/cai/pybind11.h, a free fill function), a nanobind class by
cai::nanobind::offer (include/cai/nanobind.h, a member fill function) and a Cython cdef class by
cai_python_offer (cai/capi.pxd), each the `Image` of its test extension
(python/tests/extensions/). Every one gains every producer protocol, read alike by numpy, torch,
tvm-ffi, cuda.core and libcai (from Python and, through the C-level table, from C), on host
memory the instance owns and on the fake CUDA driver's memory (a test double); it lives while a
consumer holds it; and each fault of a fill (a refusal, a Python exception, a C++ exception, an
invalid layout) is a clear error naming the type, never a crash."""

import gc
import os
import re
import subprocess
import sys
import weakref

import numpy as np
import pytest

import cai
from conftest import DEVICE_BUFFER, ROOT

sys.path.insert(0, str(ROOT / "python" / "tests" / "extensions"))
import build  # noqa: E402

ROUTES = ["pybind11", "nanobind", "cython"]
CPP_ROUTES = ["pybind11", "nanobind"]


@pytest.fixture
def modules(route_modules, offer_ext):
    """The three routes' test modules, and offer_ext (the C route's), whose functions read any
    object's C-level table as a C consumer does."""
    return route_modules, offer_ext


@pytest.fixture(params=ROUTES)
def ext(request, modules):
    return modules[0][request.param]


@pytest.fixture
def c_consumer(modules):
    return modules[1]


ATTRIBUTES = ["__cuda_array_interface__", "__dlpack__", "__dlpack_device__", "__dlpack_c_exchange_api__",
              "__cuda_array_interface_c_api__"]
HEAP_TYPE, IMMUTABLE_TYPE = 1 << 9, 1 << 8


@pytest.mark.parametrize("route, into_the_dict", [("pybind11", False), ("nanobind", False), ("cython", True)])
def test_each_routes_type_has_every_attribute_in_its_own_dict(modules, route, into_the_dict):
    """pybind11's and nanobind's classes are mutable heap types (the offer sets the attributes);
    a Cython cdef class is a static type, or an immutable one (the offer writes into its dict)."""
    image_type = modules[0][route].Image
    flags = image_type.__flags__
    assert (not flags & HEAP_TYPE or bool(flags & IMMUTABLE_TYPE)) == into_the_dict
    assert [name for name in ATTRIBUTES if name in vars(image_type)] == ATTRIBUTES
    assert type(vars(image_type)["__cuda_array_interface_c_api__"]).__name__ == "PyCapsule"


VALUES = np.arange(12, dtype=np.float32).reshape(3, 4)
# (the image's arguments over VALUES' bytes, what it describes)
LAYOUTS = {
    "c_contiguous": (dict(height=3, width=4, typestr="<f4"), VALUES),
    "transposed_by_strides": (dict(height=4, width=3, typestr="<f4", strides=(4, 16)), VALUES.T),
    "readonly_int16": (dict(height=4, width=6, typestr="<i2", readonly=True), VALUES.view("<i2").reshape(4, 6)),
}


def host_image(ext, layout):
    arguments, expected = LAYOUTS[layout]
    return ext.Image(0, host=True, own=VALUES.tobytes(), **arguments), expected


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_a_host_image_is_read_alike_by_numpy_torch_tvm_ffi_cuda_core_and_libcai(ext, layout):
    image, expected = host_image(ext, layout)
    readonly = LAYOUTS[layout][0].get("readonly", False)
    taken = np.from_dlpack(image)
    np.testing.assert_array_equal(taken, expected)
    assert (taken.strides, taken.dtype.str, taken.flags.writeable) == (expected.strides, expected.dtype.str,
                                                                        not readonly)
    data = taken.ctypes.data
    assert data != expected.ctypes.data  # the image's own copy of the bytes
    array = cai.from_object(image, allow_host=True)
    assert (array.data_ptr, array.shape, array.strides, array.typestr, array.readonly) == (
        data, expected.shape, expected.strides, expected.dtype.str, readonly)
    assert image.__dlpack_device__() == (1, 0)
    assert not hasattr(image, "__cuda_array_interface__")  # the CAI describes device memory only
    itemsize = expected.itemsize
    element_strides = tuple(s // itemsize for s in expected.strides)
    torch = pytest.importorskip("torch")
    tensor = torch.from_dlpack(image)
    assert torch.equal(tensor, torch.from_numpy(expected.copy()))
    assert (tensor.data_ptr(), tensor.stride()) == (data, element_strides)
    tvm_ffi = pytest.importorskip("tvm_ffi")
    tvm_tensor = tvm_ffi.from_dlpack(image)
    assert (tvm_tensor.data_ptr(), tvm_tensor.shape, tvm_tensor.strides, str(tvm_tensor.dtype)) == (
        data, expected.shape, element_strides, str(expected.dtype))
    utils = pytest.importorskip("cuda.core.utils")
    view = utils.StridedMemoryView.from_dlpack(image, stream_ptr=-1)
    assert (view.ptr, view.shape, view.strides, view.dtype, view.readonly) == (
        data, expected.shape, element_strides, expected.dtype, readonly)


def test_a_device_image_offers_the_v3_dict_and_libcai_and_c_consumers_read_its_table_fake_driver(
        ext, c_consumer, fake):
    stream = fake.stream()
    image = ext.Image(DEVICE_BUFFER, 2, 8, typestr="<f4", stream=stream, readonly=True)
    assert image.__cuda_array_interface__ == {
        "shape": (2, 8), "typestr": "<f4", "data": (DEVICE_BUFFER, True), "version": 3, "strides": None,
        "stream": stream}
    assert image.__dlpack_device__() == (2, 0)  # the driver's answer for the pointer
    calls = image.calls
    taken = cai.from_object(image, sync=False)
    assert image.calls == calls + 1
    assert (taken.data_ptr, taken.shape, taken.typestr, taken.stream, taken.readonly) == (
        DEVICE_BUFFER, (2, 8), "<f4", stream, True)
    assert taken.owner is image
    expected = {"data": DEVICE_BUFFER, "shape": (2, 8), "typestr": "<f4", "readonly": 1, "stream": stream}
    assert c_consumer.table_view(image) == {**expected, "owning": False}
    assert c_consumer.table_view(image, acquire=True) == {**expected, "owning": True}
    assert c_consumer.view(image) == {**expected, "owning": False}  # cai_python_view


def test_the_dlpack_export_orders_the_producer_stream_before_the_consumers_fake_driver(ext, fake):
    producer, consumer = fake.stream(), fake.stream()
    image = ext.Image(DEVICE_BUFFER, 4, 4, typestr="<u4", stream=producer)
    fake.begin(0)
    capsule = image.__dlpack__(stream=consumer, max_version=(1, 0))
    assert type(capsule).__name__ == "PyCapsule"
    log = fake.log()
    assert "cuEventRecord" in log and "cuStreamWaitEvent" in log, log


def gone_after(ext, make, keep):
    """Makes an image, lets `keep` take it, drops it: whether it was still alive (weakref, and
    its destructor not run) while the consumer held it, and gone after. Earlier tests' images
    are collected first: a free-threaded build may free them late, which would move the count."""
    gc.collect()
    image = make()
    alive = weakref.ref(image)
    live = ext.live_images()
    kept = keep(image)
    del image
    gc.collect()
    held = alive() is not None and ext.live_images() == live
    kept = None  # noqa: F841 (dropping the consumer's hold)
    gc.collect()
    return held, alive() is None and ext.live_images() == live - 1


@pytest.mark.parametrize("consumer", ["numpy", "capsule", "cai_array", "table_acquire"])
def test_a_consumer_keeps_the_instance_alive_and_lets_it_go_after_fake_driver(ext, c_consumer, consumer):
    """Host images, but for the C consumer's acquire (which asks for device memory): one over
    the fake driver's memory."""
    def keep(image):
        if consumer == "numpy":
            taken = np.from_dlpack(image)
            gc.collect()
            np.testing.assert_array_equal(taken, VALUES)  # the instance's own memory, still there
            return taken
        if consumer == "capsule":
            return image.__dlpack__()  # never consumed: its destructor runs the deleter
        if consumer == "cai_array":
            return cai.from_object(image, allow_host=True)
        return c_consumer.acquire_kept(image)

    if consumer == "table_acquire":
        make = lambda: ext.Image(DEVICE_BUFFER, 2, 3)  # noqa: E731
    else:
        make = lambda: host_image(ext, "c_contiguous")[0]  # noqa: E731
    assert gone_after(ext, make, keep) == (True, True)


def test_a_python_subclass_inherits_the_protocols(ext):
    class Child(ext.Image):
        pass

    image = Child(0, host=True, own=VALUES.tobytes(), height=3, width=4, typestr="<f4")
    np.testing.assert_array_equal(np.from_dlpack(image), VALUES)
    assert cai.from_object(image, allow_host=True).shape == (3, 4)


def test_offering_the_type_twice_is_a_type_error_naming_it(ext):
    with pytest.raises(TypeError, match=r"'Image' defines __cuda_array_interface__ itself \(or was offered already\)"):
        ext.offer_again()


@pytest.mark.parametrize("route", CPP_ROUTES)
def test_an_instance_whose_init_did_not_run_is_refused_not_read_fake_driver(modules, route, c_consumer):
    """pybind11 allocates an uninitialized instance's value without constructing it; the glue
    checks before the fill reads it."""
    image_type = modules[0][route].Image
    image = image_type.__new__(image_type)
    message = r"CAI_ERROR_INVALID_ARGUMENT: 'Image': the object holds no C\+\+ instance \(its __init__ did not run\)"
    for read in (lambda: cai.from_object(image, sync=False), lambda: image.__dlpack__(),
                 lambda: np.from_dlpack(image)):
        with pytest.raises(cai.CaiError, match=message):
            read()
    with pytest.raises(ValueError, match=message):
        c_consumer.table_view(image)


# fault: (routes, exception, message); the exception's exact type is checked (cai.CaiError is a
# ValueError, and the builtin value_error must stay a plain ValueError).
FAULTS = {
    "FAULT_REFUSES": (ROUTES, cai.CaiError, r"CAI_ERROR_INVALID_SHAPE: 'Image': height is not set yet"),
    "FAULT_RAISES": (ROUTES, RuntimeError, r"^the image was closed$"),
    "FAULT_NEGATIVE_SHAPE": (ROUTES, cai.CaiError,
                             r"CAI_ERROR_INVALID_SHAPE: the fill function of 'Image' described an invalid array: "
                             r"shape\[0\] is -3"),
    "FAULT_BUILTIN": (CPP_ROUTES, ValueError, r"^the image is not loaded yet$"),
    "FAULT_THROWS": (CPP_ROUTES, cai.CaiError,
                     r"CAI_ERROR_INVALID_ARGUMENT: 'Image': the fill function threw a C\+\+ exception "
                     r"\(std::runtime_error\): the image was closed"),
    "FAULT_THROWS_CAI": (CPP_ROUTES, cai.CaiError, r"CAI_ERROR_INVALID_TYPESTR: 'Image': typestr is not decided yet"),
    "FAULT_NO_MEMORY": (CPP_ROUTES, MemoryError, r"^$"),
    "FAULT_THROWS_OTHER": (CPP_ROUTES, cai.CaiError,
                           r"CAI_ERROR_INVALID_ARGUMENT: 'Image': the fill function threw a C\+\+ exception that "
                           r"is no std::exception"),
}
FAULT_CASES = [(route, fault) for fault, (routes, _, _) in sorted(FAULTS.items()) for route in routes]


@pytest.mark.parametrize("route, fault", FAULT_CASES)
def test_a_broken_fill_is_a_clear_error_on_every_protocol_fake_driver(modules, c_consumer, route, fault):
    ext = modules[0][route]
    _, error, message = FAULTS[fault]
    image = ext.Image(DEVICE_BUFFER, 2, 3, fault=getattr(ext, fault))
    for read in (lambda: cai.from_object(image, sync=False), lambda: image.__cuda_array_interface__,
                 lambda: image.__dlpack__(), lambda: image.__dlpack_device__(),
                 lambda: np.from_dlpack(image), lambda: c_consumer.view(image)):
        with pytest.raises(error, match=message) as raised:
            read()
        assert type(raised.value) is error
    # From C, the table reports the same refusal as a status with its message (offer_ext raises
    # it as ValueError("STATUS: message")), or leaves the exception set.
    with pytest.raises((error, ValueError), match=message):
        c_consumer.table_view(image)
    # Nothing was left behind: a working image of the same type is read as before.
    assert cai.from_object(ext.Image(DEVICE_BUFFER, 2, 3), sync=False).shape == (2, 3)


README_BLOCKS = re.findall(r"<!-- tested: ([^>]*?) -->\n```(\w+)\n(.*?)```", (ROOT / "README.md").read_text(), re.S)


def readme_block(marker):
    [code] = [code for how, _, code in README_BLOCKS if how.startswith(marker)]
    return code


@pytest.mark.parametrize("route", ROUTES)
def test_the_readmes_offer_example_builds_and_is_read_by_numpy_and_libcai_no_driver(route, tmp_path):
    """README.md's example of each route, built as a user would (against the installed package
    only); the nanobind one is given the pybind11 one's Image, as its comment says."""
    code = readme_block(f"offer example, {dict(pybind11='pybind11', nanobind='nanobind', cython='Cython')[route]}")
    if route == "nanobind":
        [image] = re.findall(r"^struct Image \{$.*?^\};$", readme_block("offer example, pybind11"), re.S | re.M)
        assert "// struct Image as above\n" in code
        code = code.replace("// struct Image as above\n", f"#include <cstring>\n#include <vector>\n\n{image}\n")
    source = tmp_path / ("images.pyx" if route == "cython" else "images.cpp")
    source.write_text(code)
    build.BUILDERS[route](tmp_path, source=source, name="images")
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    env.update(PYTHONPATH=str(tmp_path), CAI_CUDA_DRIVER="/nonexistent/libcuda.so.1")
    done = subprocess.run([sys.executable, "-c", "import cai, images, numpy as np\n"
                           "a = np.from_dlpack(images.Image(2, 3))\n"
                           "b = cai.from_object(images.Image(4, 5), allow_host=True)\n"
                           "print(a.shape, a.dtype, a.sum(), b.shape, b.typestr, b.__dlpack_device__())"],
                          env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    total = 0.0 if route == "cython" else 6.0  # the Cython one's pixels are zeros, the C++ one's ones
    assert done.stdout == f"(2, 3) float32 {total} (4, 5) <f4 (1, 0)\n"
