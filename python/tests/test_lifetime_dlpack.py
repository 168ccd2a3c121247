"""DLPack lifetimes at every moment of the interpreter's life, and hostile producers.

- Exports alive at interpreter exit: each case runs in a child process, which must print its
  output and exit 0 (the release of a view attached to a finalizing interpreter and aborted).
- release() while a DLPack export of the array is alive is refused (BufferError, as memoryview
  refuses it), in both orders, so that no consumer reads freed memory.
- Python code that runs inside __dlpack__ (a stream object's) cannot release the array under it.
- Hostile and inconsistent producers are clean errors: a cyclic exchange table, a work stream
  that fails after the take (the tensor is released, not leaked), a device that contradicts the
  tensor's, a negative device id, dtypes DLPack cannot hold, Buffer Interface handles that are
  not ints, and shapes whose __len__ lies.

numpy is the real producer and consumer of host memory; device memory is the fake CUDA
driver's (a test double); python/tests/exchange_producer.c is a test double of a producer's
exchange table."""

import ctypes
import gc
import subprocess
import sys
import textwrap

import numpy
import pytest

import cai

EXIT_CASES = {
    "numpy-view-at-module-level": """
        y = numpy.from_dlpack(a)
    """,
    "unconsumed-capsule": """
        c = a.__dlpack__(max_version=(1, 0))
    """,
    "legacy-capsule": """
        c = a.__dlpack__()
    """,
    "view-and-array-in-a-reference-cycle": """
        y = numpy.from_dlpack(a)
        holder = [y, a]
        holder.append(holder)
        del y, a
    """,
    "cai-consumer-of-cai-producer": """
        b = cai.from_object(a, allow_host=True)
        c = b.__dlpack__(max_version=(1, 0))
    """,
}


@pytest.mark.parametrize("case", sorted(EXIT_CASES))
def test_exports_alive_at_exit_leave_a_clean_exit_real_numpy(case):
    script = "import numpy, cai\na = cai.from_object(numpy.arange(4.0), allow_host=True)\n"
    script += textwrap.dedent(EXIT_CASES[case]) + "print('done')\n"
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert (run.returncode, run.stdout.strip()) == (0, "done"), run.stderr


def test_release_is_refused_while_a_numpy_view_is_alive_then_allowed_real_numpy():
    x = numpy.arange(1 << 19, dtype=numpy.float64)  # 4 MiB: freed memory would be unmapped
    a = cai.from_object(x, allow_host=True)
    del x
    y = numpy.from_dlpack(a)
    with pytest.raises(BufferError, match="1 DLPack export"):
        a.release()
    assert y.sum() == (1 << 19) * ((1 << 19) - 1) / 2, "the producer is still alive"
    del y
    gc.collect()
    a.release()
    with pytest.raises(ValueError, match="released"):
        numpy.from_dlpack(a)


def test_release_is_refused_while_a_capsule_is_unconsumed_or_held_by_another_array_real_numpy():
    a = cai.from_object(numpy.arange(8.0), allow_host=True)
    capsule = a.__dlpack__(max_version=(1, 0))
    b = cai.from_object(a, allow_host=True)
    with pytest.raises(BufferError, match="2 DLPack export"):
        a.release()
    del capsule
    gc.collect()
    with pytest.raises(BufferError, match="1 DLPack export"):
        a.release()
    b.release()  # b's release deletes its tensor, which ends the export of a
    a.release()
    a.release()  # twice is fine


def test_python_code_inside_dlpack_cannot_release_the_array_under_it_fake_driver(fake):
    a = cai.from_object({"shape": (4,), "typestr": "<f4", "data": (fake.alloc(64), False), "version": 3},
                        sync=False)
    stream = fake.stream()

    class ReleasingStream:
        def __cuda_stream__(self):
            a.release()
            return (0, stream)

    with pytest.raises(ValueError, match="released"):
        a.__dlpack__(stream=ReleasingStream(), max_version=(1, 0))


@pytest.fixture(scope="module")
def table():
    from conftest import ROOT, compile_shared

    lib = ctypes.CDLL(str(compile_shared(ROOT / "python" / "tests" / "exchange_producer.c",
                                         "libexchange_producer_hostile.so")))
    lib.producer_exchange_api.restype = ctypes.c_void_p
    lib.producer_cyclic_exchange_api.restype = ctypes.c_void_p
    lib.producer_set.argtypes = [ctypes.c_uint64, ctypes.c_uint64]
    return lib


def table_producer(address, device=(2, 0)):
    class TableProducer:
        __c_dlpack_exchange_api__ = address

        def __dlpack_device__(self):
            return device

        def __dlpack__(self, **kwargs):
            raise AssertionError("the C exchange table should have been used")

    return TableProducer()


def test_an_exchange_table_that_chains_to_itself_is_refused_not_walked_forever_test_double(table):
    with pytest.raises(TypeError, match="prev_version_api"):
        cai.from_object(table_producer(table.producer_cyclic_exchange_api()), sync=False)


def test_an_exchange_table_address_that_is_a_bool_is_refused_test_double():
    with pytest.raises(TypeError, match="must be an int"):
        cai.from_object(table_producer(True), sync=False)


def test_a_tensor_taken_before_the_work_stream_fails_is_released_fake_driver(fake, table):
    table.producer_set(fake.alloc(256), fake.stream())
    table.producer_fail_stream(1)
    try:
        before = table.producer_deleted()
        for _ in range(100):
            with pytest.raises(TypeError, match="no work stream"):
                cai.from_object(table_producer(table.producer_exchange_api()), stream=fake.stream())
        assert table.producer_deleted() == before + 100, "every tensor's deleter ran"
    finally:
        table.producer_fail_stream(0)


class Relabelled:
    """A producer whose __dlpack_device__ says one thing while its tensors say another (asked
    for with the stream the source's own device takes)."""

    def __init__(self, source, device):
        self.source, self.device = source, device

    def __dlpack_device__(self):
        return self.device

    def __dlpack__(self, stream=None, **kwargs):
        own = self.source.__dlpack_device__()[0]
        return self.source.__dlpack__(stream=None if own == 1 else stream, **kwargs)


def test_a_device_that_contradicts_the_tensors_is_refused_real_numpy_and_fake_driver(fake):
    def fresh():
        return type("Relabelled", (Relabelled,), {})

    host = numpy.arange(4.0)
    learned = fresh()
    with pytest.raises(BufferError, match=r"said \(2, 0\) but the tensor is on \(1, 0\)"):
        cai.from_object(learned(host, (2, 0)), allow_host=True, sync=False)
    # Without a consumer stream the device is not asked: the tensor's own is what counts.
    assert cai.from_object(learned(host, (2, 0)), allow_host=True).__dlpack_device__() == (1, 0)
    device = cai.from_object({"shape": (4,), "typestr": "<f4", "data": (fake.alloc(64), False), "version": 3},
                             sync=False)
    asked = fresh()
    with pytest.raises(BufferError, match=r"said \(1, 0\) but the tensor is on \(2, 0\)"):
        cai.from_object(asked(device, (1, 0)), allow_host=True, sync=False)
    with pytest.raises(cai.CaiError, match="device id is -7"):
        cai.from_object(asked(device, (2, -7)), sync=False)
    # Without sync every read asks the device, whatever the type's earlier tensors were.
    with pytest.raises(BufferError, match=r"said \(1, 0\) but the tensor is on \(2, 0\)"):
        cai.from_object(learned(device, (1, 0)), allow_host=True, sync=False)


def test_a_tensor_with_a_negative_device_id_is_refused_test_double(fake, table):
    table.producer_set(fake.alloc(256), 0)
    table.producer_set_device_type(2)
    with pytest.raises(cai.CaiError, match="kDLROCM"):
        table.producer_set_device_type(10)
        cai.from_object(table_producer(table.producer_exchange_api()), sync=False)
    table.producer_set_device_type(2)


def test_dtypes_dlpack_cannot_hold_are_refused_on_export_fake_driver(fake):
    for typestr in ("<c32", "<f16"):
        a = cai.from_object({"shape": (2,), "typestr": typestr, "data": (fake.alloc(64), False), "version": 3},
                            sync=False)
        with pytest.raises(cai.CaiError, match="bytes wide"):
            a.__dlpack__(max_version=(1, 0))
        assert numpy.dtype(typestr).itemsize == int(typestr[2:])


class Seed:
    """An object of the Buffer Interface's shape (its CUDA half: an int buffer, offset 0)."""

    def __init__(self, buffer, shape=(4,), strides=None):
        self.buffer, self.offset, self.dtype, self.shape, self.strides = buffer, 0, numpy.dtype("<f4"), shape, strides


@pytest.mark.parametrize("buffer", [1.5, True, "0x1000", None], ids=["float", "bool", "str", "none"])
def test_a_buffer_interface_pointer_that_is_not_an_int_is_refused(buffer):
    with pytest.raises(TypeError, match="buffer must be an int CUDA pointer"):
        cai.from_buffer_interface(Seed(buffer), sync=False)


class LyingLength:
    def __init__(self, items, length):
        self.items, self.length = items, length

    def __len__(self):
        return self.length

    def __getitem__(self, i):
        return self.items[i]


@pytest.mark.parametrize("length", [1 << 40, 0, -1 + (1 << 62)])
def test_a_buffer_interface_shape_whose_len_lies_is_read_for_what_it_holds(fake, length):
    pointer = fake.alloc(64)
    a = cai.from_buffer_interface(Seed(pointer, shape=LyingLength([2, 2], length)), sync=False)
    assert a.shape == (2, 2)
    with pytest.raises(cai.CaiError, match="strides has more than 64 entries"):
        cai.from_buffer_interface(Seed(pointer, strides=LyingLength(list(range(70)), 2)), sync=False)
    with pytest.raises(TypeError, match="shape must be a sequence of ints"):
        cai.from_buffer_interface(Seed(pointer, shape=(True, 2)), sync=False)
