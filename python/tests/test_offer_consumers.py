"""Third-party consumers read a type offered through libcai's glue (the C route's `Image` and
`StaticImage` of python/tests/extensions/offer_ext.c, offered by `cai_python_offer`) on a CPU:

- mpi4py over MPICH (PyPI's `mpich` wheel) sends and receives host instances through their
  `__dlpack__` (mpi4py reads a host DLPack producer as a buffer): the bytes arrive, the
  typestr picks the MPI datatype (a typed reduction), and a read-only instance is refused as a
  receive buffer by DLPack's read-only flag. A device instance on the fake CUDA driver (a test
  double whose device memory is host memory) is taken with `__dlpack__(stream=-1)`, which
  orders no stream work.
- numba-cuda parses the `__cuda_array_interface__` of device instances on the fake driver with
  the functions its `from_cuda_array_interface` runs before it touches the driver, and
  `numba.cuda.as_cuda_array` gets the dict and then fails only at driver init (no CUDA driver
  here); the layouts are compared with numpy's view of the same layout. No kernel runs: that
  needs a GPU (python/gpu_tests).

The packages come from python/test-requirements.txt; where one is not installed (the
free-threaded leg installs neither) its tests are skipped, and counted as skipped."""

import ctypes
import dataclasses
import traceback
from typing import Callable, Optional

import numpy as np
import pytest

from conftest import DEVICE_BUFFER



@dataclasses.dataclass(frozen=True)
class OfferedType:
    """An offered type as these tests use it: `make` builds an instance describing the given
    memory, `takes(shape, strides)` says whether the type can describe that layout."""

    name: str
    make: Callable[..., object]
    takes: Callable[[tuple, Optional[tuple]], bool]


def c_route(cls):
    """offer_ext.c's types: 2-D, C-contiguous (their fill sets no strides)."""

    def make(data, shape, typestr, *, strides=None, readonly=False, host=False, stream=None, base=None):
        assert len(shape) == 2 and strides is None, f"{cls.__name__} takes 2-D C-contiguous layouts only"
        return cls(data, *shape, typestr=typestr, stream=stream or 0, readonly=readonly, host=host, base=base)

    return OfferedType(cls.__name__, make, lambda shape, strides: len(shape) == 2 and strides is None)


# The memory of instances whose type keeps no reference to an owner: held for the session.
KEPT = []


def image_route(route, cls):
    """The routes' `Image` (python/tests/extensions/offered_image.h, cython_ext.pyx,
    pyo3_ext): 2-D, with strides. PyO3's keeps `base`; the others keep no owner of memory they
    do not own, so `base` is kept here."""

    def make(data, shape, typestr, *, strides=None, readonly=False, host=False, stream=None, base=None):
        assert len(shape) == 2, f"{route}'s Image takes 2-D layouts only"
        kept = {"base": base} if route == "pyo3" else KEPT.append(base) or {}
        return cls(data, *shape, typestr=typestr, strides=strides, stream=stream or 0, readonly=readonly, host=host,
                   **kept)

    return OfferedType(f"{route}-{cls.__name__}", make, lambda shape, strides: len(shape) == 2)


# Each route's types, by test id: a function of the fixture request (to reach the fixture that
# builds the route's extension).
ROUTES = {
    "c-Image": lambda request: c_route(request.getfixturevalue("offer_ext").Image),
    "c-StaticImage": lambda request: c_route(request.getfixturevalue("offer_ext").StaticImage),
    **{
        f"{route}-Image": (lambda route: lambda request: image_route(
            route, request.getfixturevalue("route_modules")[route].Image))(route)
        for route in ["pybind11", "nanobind", "cython", "pyo3"]
    },
}


@pytest.fixture(params=sorted(ROUTES))
def offered_type(request):
    """A type offered through libcai's glue, as an `OfferedType`. The contract these tests rely
    on: `make(data, shape, typestr, *, strides=None, readonly=False, host=False, stream=None,
    base=None)` returns an instance whose fill describes exactly that array:
      data: the address (an int) of the first element;
      shape: a tuple of ints; typestr: the CAI typestr (native byte order for host memory);
      strides: byte strides, or None for C-contiguous (a type that takes no strides says so
        through `takes`, and is given None only);
      readonly: the read-only flag; host: True for host memory (kDLCPU), else CUDA memory;
      stream: the stream handle its pending work is on, or None for none;
      base: an object the instance keeps alive as long as it lives (the memory's owner).
    `takes(shape, strides)` is False for a layout the type cannot describe; the tests check the
    layouts it takes (and at least one)."""
    return ROUTES[request.param](request)


# (shape, byte strides or None, typestr): layouts every test draws from, as the type takes them.
LAYOUTS = [
    ((3, 4), None, "<f4"),
    ((2, 5), None, "<i2"),
    ((1, 6), None, "<c16"),
    ((6, 1), None, "<u8"),
    ((2, 3), None, "|b1"),
    ((4, 4), None, "<f2"),
    ((2, 3), None, "<c8"),
    ((0, 4), None, "|u1"),
    ((3, 0), None, "<f8"),
    ((2, 3, 4), None, "<i4"),
    ((4, 3), (4, 16), "<f4"),  # F-contiguous
    ((3, 4), (32, 4), "<f4"),  # padded rows: neither C- nor F-contiguous
    ((5,), (16,), "<i4"),  # every fourth element
]
# The CAI carries any byte order; DLPack (host instances) native only.
DEVICE_LAYOUTS = LAYOUTS + [((2, 2), None, ">i4")]


def taken(offered_type, layouts):
    chosen = [layout for layout in layouts if offered_type.takes(layout[0], layout[1])]
    assert chosen, f"{offered_type.name} takes none of the layouts"
    return chosen


def numpy_layout(shape, strides, typestr):
    """numpy's array of that layout, over fresh zeroed memory."""
    dtype = np.dtype(typestr)
    if strides is None:
        extent = int(np.prod(shape)) * dtype.itemsize
    else:
        extent = 0 if 0 in shape else sum((n - 1) * s for n, s in zip(shape, strides)) + dtype.itemsize
    return np.ndarray(shape, dtype, buffer=np.zeros(max(extent, 1), np.uint8), strides=strides)


def contiguous(array):
    return array.flags.c_contiguous or array.flags.f_contiguous


def pattern(shape, strides, typestr, seed):
    """An array of that layout holding distinct values."""
    array = numpy_layout(shape, strides, typestr)
    values = np.arange(seed, seed + array.size).reshape(shape)
    array[...] = values % 2 if array.dtype == np.bool_ else values * 1.5 if array.dtype.kind in "fc" else values
    return array


def host_instance(offered_type, array, **kwargs):
    strides = None if array.flags.c_contiguous else array.strides
    return offered_type.make(array.ctypes.data, array.shape, array.dtype.str, strides=strides, host=True,
                             base=array, **kwargs)


# mpi4py over MPICH.


@pytest.fixture(scope="module")
def mpi():
    MPI = pytest.importorskip("mpi4py.MPI")
    assert MPI.Get_library_version().startswith("MPICH"), MPI.Get_library_version()
    return MPI


def test_mpi4py_over_mpich_sends_and_receives_offered_host_instances(offered_type, mpi):
    """Contiguous layouts travel (offered to offered, offered to numpy, numpy to offered);
    mpi4py refuses a non-contiguous one by its DLPack strides."""
    for shape, strides, typestr in taken(offered_type, LAYOUTS):
        source = pattern(shape, strides, typestr, seed=1)
        sent = host_instance(offered_type, source, readonly=True)
        if not contiguous(source):
            with pytest.raises(BufferError, match="dlpack: buffer is not contiguous"):
                mpi.COMM_SELF.Sendrecv(sent, 0, 0, np.empty(source.nbytes, np.uint8), 0, 0)
            continue
        for to_offered in (True, False):
            received = numpy_layout(shape, strides, typestr)
            into = host_instance(offered_type, received) if to_offered else received
            mpi.COMM_SELF.Sendrecv(sent, 0, 0, into, 0, 0)
            np.testing.assert_array_equal(received, source, err_msg=f"{shape} {strides} {typestr}")
        received = numpy_layout(shape, strides, typestr)
        mpi.COMM_SELF.Sendrecv(source, 0, 0, host_instance(offered_type, received), 0, 0)
        np.testing.assert_array_equal(received, source, err_msg=f"{shape} {strides} {typestr}")


def test_mpi4py_reduces_offered_host_instances_with_the_datatype_their_typestr_names(offered_type, mpi):
    """Reduce_local picks the MPI datatype from the buffer's format, which mpi4py derives from
    the DLPack dtype: a typed sum, wrong if the typestr were read as bytes."""
    for shape, strides, typestr in taken(offered_type, LAYOUTS):
        left, right = pattern(shape, strides, typestr, seed=2), pattern(shape, strides, typestr, seed=5)
        if not contiguous(left):
            continue  # refused, as the test above shows
        expected = left | right if left.dtype == np.bool_ else left + right
        op = mpi.LOR if left.dtype == np.bool_ else mpi.SUM
        op.Reduce_local(host_instance(offered_type, left, readonly=True), host_instance(offered_type, right))
        np.testing.assert_array_equal(right, expected, err_msg=f"{shape} {strides} {typestr}")


def test_mpi4py_refuses_to_write_into_a_read_only_offered_instance_by_the_dlpack_flag(offered_type, mpi):
    """mpi4py asks for DLPack 1.x and reads the capsule's read-only flag: a read-only instance
    is a send buffer, never a receive buffer (BufferError, nothing written)."""
    source = pattern((3, 4), None, "<i4", seed=1)
    target = pattern((3, 4), None, "<i4", seed=50)
    before = target.copy()
    read_only = host_instance(offered_type, target, readonly=True)
    assert mpi.buffer(read_only).readonly
    with pytest.raises(BufferError, match="dlpack: buffer is not writable"):
        mpi.COMM_SELF.Sendrecv(source, 0, 0, read_only, 0, 0)
    with pytest.raises(BufferError, match="dlpack: buffer is not writable"):
        mpi.SUM.Reduce_local(source, read_only)
    np.testing.assert_array_equal(target, before)
    assert not mpi.buffer(host_instance(offered_type, target)).readonly
    mpi.COMM_SELF.Sendrecv(read_only, 0, 0, source, 0, 0)  # as a send buffer it is read
    np.testing.assert_array_equal(source, before)


def test_mpi4py_takes_a_device_instance_by_dlpack_with_no_stream_work_fake_driver(offered_type, mpi, fake):
    """For a non-CPU producer mpi4py calls __dlpack__(stream=-1): the glue orders nothing (no
    event, no sync) and mpi4py gets the device address and size. MPICH here is not CUDA-aware
    and copies from that address, which works only because the fake driver's device memory is
    host memory: the bytes check that mpi4py read the right address and length."""
    values = pattern((4, 6), None, "<u2", seed=3)
    pointer = fake.alloc(values.nbytes)
    ctypes.memmove(pointer, values.ctypes.data, values.nbytes)
    instance = offered_type.make(pointer, values.shape, "<u2", stream=fake.stream())
    fake.begin(0)
    buffer = mpi.buffer(instance)
    assert (buffer.address, buffer.nbytes, buffer.readonly) == (pointer, values.nbytes, False)
    received = np.zeros_like(values)
    mpi.COMM_SELF.Sendrecv(instance, 0, 0, received, 0, 0)
    np.testing.assert_array_equal(received, values)
    log = fake.log()
    assert not any(call in log for call in ("cuEventRecord", "cuStreamWaitEvent", "cuStreamSynchronize")), log


# numba-cuda's consumer side, which runs without a GPU.


@pytest.fixture(scope="module")
def numba_cuda():
    return pytest.importorskip("numba.cuda")


def test_numba_cuda_parses_the_dict_of_offered_device_instances_as_numpy_lays_them_out_fake_driver(
        offered_type, numba_cuda, fake):
    """What numba.cuda.from_cuda_array_interface computes from the dict before it creates the
    device array (prepare_shape_strides_dtype with order "C", memory_size_from_info), and the
    contiguity its dummy array reports, against numpy's array of the same layout."""
    from numba.cuda.api_util import prepare_shape_strides_dtype
    from numba.cuda.cudadrv.driver import memory_size_from_info
    from numba.cuda.cudadrv.dummyarray import Array

    stream = fake.stream()
    for shape, strides, typestr in taken(offered_type, DEVICE_LAYOUTS):
        instance = offered_type.make(DEVICE_BUFFER, shape, typestr, strides=strides, readonly=True, stream=stream)
        assert numba_cuda.is_cuda_array(instance)
        desc = instance.__cuda_array_interface__
        # The v3 export writes data 0 for a zero-size array.
        pointer = 0 if 0 in shape else DEVICE_BUFFER
        assert (desc["data"], desc["stream"]) == ((pointer, True), stream)
        got_shape, got_strides, dtype = prepare_shape_strides_dtype(desc["shape"], desc.get("strides"),
                                                                    desc["typestr"], order="C")
        size = memory_size_from_info(got_shape, got_strides, dtype.itemsize)
        flags = Array.from_desc(0, got_shape, got_strides, dtype.itemsize).flags
        expected = numpy_layout(shape, strides, typestr)
        low, high = np.lib.array_utils.byte_bounds(expected)
        layout = f"{shape} {strides} {typestr}"
        assert (got_shape, dtype) == (expected.shape, expected.dtype), layout
        # A zero-size array's strides address nothing: numba's C strides multiply the zero
        # extent in, numpy's count it as 1.
        if expected.size:
            assert got_strides == expected.strides, layout
        assert size == high - low, layout
        assert (flags["C_CONTIGUOUS"], flags["F_CONTIGUOUS"]) == (
            expected.flags.c_contiguous, expected.flags.f_contiguous), layout


def test_numba_cuda_as_cuda_array_gets_the_dict_and_fails_only_at_driver_init_fake_driver(
        offered_type, numba_cuda, fake):
    """numba-cuda uses its own driver (not libcai's fake one), and this machine has none: the
    dict reaches from_cuda_array_interface, whose context check then fails."""
    from numba.cuda.cudadrv.error import CudaSupportError

    if numba_cuda.is_available():
        pytest.skip("a CUDA driver is present: python/gpu_tests reads real device memory")
    instance = offered_type.make(DEVICE_BUFFER, (2, 3), "<f4", stream=fake.stream())
    with pytest.raises(CudaSupportError, match="driver") as raised:
        numba_cuda.as_cuda_array(instance)
    frames = [frame for frame, _ in traceback.walk_tb(raised.value.__traceback__)]
    # from_cuda_array_interface's context wrapper got the dict as its first argument.
    handed = [frame.f_locals["args"][0] for frame in frames if frame.f_code.co_name == "_require_cuda_context"]
    assert handed == [instance.__cuda_array_interface__]


def test_check_producer_finds_nothing_on_offered_host_and_device_instances_fake_driver(offered_type, fake):
    """cai.testing.check_producer reads every protocol an instance offers (the dict, DLPack's
    capsules and device, both tables) alone and compares them: an instance of every route, in
    host memory and on the fake driver, conforms."""
    import cai.testing

    for shape, strides, typestr in taken(offered_type, LAYOUTS):
        values = numpy_layout(shape, strides, typestr)
        host = offered_type.make(values.ctypes.data, shape, typestr, strides=strides, host=True, base=values)
        assert cai.testing.check_producer(host) == [], (offered_type.name, shape, strides, typestr)
        device = offered_type.make(DEVICE_BUFFER, shape, typestr, strides=strides, readonly=True,
                                   stream=fake.stream())
        findings = cai.testing.check_producer(device)
        assert findings == [], [str(finding) for finding in findings]
