"""The OpenCL/CUDA Buffer Interface from Python, on a real OpenCL driver (PoCL on the CPU, with
pyopencl): pyopencl arrays taken as they are, kernels writing through imported views, bounds,
contexts and queue order; the seed's interface both ways; the CUDA half over the fake CUDA
driver (a test double)."""

import gc
import weakref

import numpy
import pyopencl as cl
import pyopencl.array as cla
import pytest

import cai

FILL = """
__kernel void fill_view(__global float *buf, long first, long s0, long s1, int n1) {
  long i = get_global_id(0), j = get_global_id(1);
  buf[first + i * s0 + j * s1] = 1000.0f + (float)(i * n1 + j);
}
__kernel void slow_fill(__global int *buf, int n, int value, int spins) {
  volatile int x = 0;
  for (int k = 0; k < spins; k++) x += k;
  for (int k = 0; k < n; k++) buf[k] = value + (x & 0);
}
"""


@pytest.fixture(scope="module")
def opencl():
    context = cl.Context(cl.get_platforms()[0].get_devices())
    program = cl.Program(context, FILL).build()
    return context, {name: cl.Kernel(program, name) for name in ("fill_view", "slow_fill")}


def write_through(view, queue, program):
    """Imports `view` on `queue` and fills it through the imported description only."""
    array = cai.from_buffer_interface(view, queue=queue, writable=True)
    itemsize = 4
    program["fill_view"](
        queue, array.shape, None, array.buffer,
        numpy.int64(array.offset // itemsize), numpy.int64(array.strides[0] // itemsize),
        numpy.int64(array.strides[1] // itemsize), numpy.int32(array.shape[1]),
    )
    queue.finish()
    return array


@pytest.mark.parametrize(
    "index",
    [
        (slice(None), slice(None)),
        (slice(1, None), slice(None, None, 2)),
        (slice(None, None, -1), slice(None)),
        (slice(1, None), slice(None, None, -2)),
        (slice(2, 5), slice(1, 7, 3)),
    ],
)
def test_a_kernel_writes_through_an_imported_pyopencl_view_real_opencl(opencl, index):
    context, program = opencl
    queue = cl.CommandQueue(context)
    host = numpy.full((6, 8), -1.0, dtype=numpy.float32)
    device = cla.to_device(queue, host)
    view = device[index]
    array = write_through(view, queue, program)
    assert array.offset == view.offset and array.strides == view.strides and array.shape == view.shape
    expected = host.copy()
    rows, cols = expected[index].shape
    expected[index] = 1000.0 + numpy.arange(rows * cols, dtype=numpy.float32).reshape(rows, cols)
    numpy.testing.assert_array_equal(device.get(), expected)


def test_a_sub_buffer_bounds_its_views_real_opencl(opencl):
    context, program = opencl
    queue = cl.CommandQueue(context)
    align = context.devices[0].mem_base_addr_align // 8
    parent = cl.Buffer(context, cl.mem_flags.READ_WRITE, 4096)
    cl.enqueue_fill_buffer(queue, parent, numpy.float32(-1), 0, 4096)
    sub = parent.get_sub_region(align, 256)

    class View:  # the seed's interface over the sub-buffer
        buffer, offset, dtype, shape, strides = sub, 16, numpy.dtype("<f4"), (4, 4), (48, 4)

    write_through(View(), queue, program)
    host = numpy.empty(1024, dtype=numpy.float32)
    cl.enqueue_copy(queue, host, parent)
    inside = host[align // 4:align // 4 + 64].reshape(16, 4)
    numpy.testing.assert_array_equal(inside[1:13:3], 1000 + numpy.arange(16, dtype=numpy.float32).reshape(4, 4))
    assert (inside[0] == -1).all() and (host[:align // 4] == -1).all() and (host[align // 4 + 64:] == -1).all()

    View.shape = (6, 4)  # 16 + 5 * 48 + 16 bytes: past the sub-buffer's 256
    with pytest.raises(cai.CaiError, match="CL_MEM_SIZE") as refused:
        cai.from_buffer_interface(View(), queue=queue)
    assert refused.value.status == "CAI_ERROR_OUT_OF_BOUNDS"


def test_views_before_the_buffer_or_of_another_context_are_refused_real_opencl(opencl):
    context, _ = opencl
    queue = cl.CommandQueue(context)
    device = cla.zeros(queue, (4, 4), dtype=numpy.float32)

    class Before:
        buffer, offset, dtype, shape, strides = device.base_data, 0, numpy.dtype("<f4"), (2, 4), (-16, 4)

    with pytest.raises(cai.CaiError, match="outside the buffer's start"):
        cai.from_buffer_interface(Before())
    other = cl.CommandQueue(cl.Context(context.devices))
    with pytest.raises(cai.CaiError, match="context"):
        cai.from_buffer_interface(device, queue=other)


def consumer_copy(opencl, sync):
    """A slow kernel fills a pyopencl array on its own queue; the consumer imports it on a
    second queue (with `sync`) and copies it there. Returns how many values it saw."""
    context, program = opencl
    producer, consumer = cl.CommandQueue(context), cl.CommandQueue(context)
    n = 4096
    source = cla.zeros(producer, n, dtype=numpy.int32)
    producer.finish()
    program["slow_fill"](producer, (1,), None, source.base_data, numpy.int32(n), numpy.int32(42),
                         numpy.int32(20_000_000))
    producer.flush()
    cai.from_buffer_interface(source, queue=consumer, sync=sync)
    copied = cla.empty(consumer, n, dtype=numpy.int32)
    cl.enqueue_copy(consumer, copied.base_data, source.base_data, byte_count=n * 4)
    seen = int((copied.get(queue=consumer) == 42).sum())
    producer.finish()
    return seen


def test_the_consumer_queue_is_ordered_after_the_producers_real_opencl(opencl, capsys):
    assert consumer_copy(opencl, None) == 4096
    assert consumer_copy(opencl, cai.SYNC_BLOCKING) == 4096
    stale = consumer_copy(opencl, False)
    with capsys.disabled():
        print(f"\nOpenCL, no sync: the consumer saw {stale} of 4096 producer values")


def test_the_seed_interface_goes_both_ways_and_release_lets_go_real_opencl(opencl):
    context, _ = opencl
    queue = cl.CommandQueue(context)
    device = cla.zeros(queue, (3, 5), dtype=numpy.float32)[:, 1:]
    first = cai.from_buffer_interface(device)
    again = cai.from_buffer_interface(first)  # a cai.Array is a Buffer Interface object too
    assert again.buffer is device.base_data and again.offset == first.offset == 4
    assert (again.shape, again.strides, again.dtype) == ((3, 4), (20, 4), numpy.float32)

    class Seed:
        def __init__(self):
            self.buffer, self.offset, self.dtype = device.base_data, 0, numpy.dtype("<f4")
            self.shape, self.strides = (4,), None

    seed = Seed()
    alive = weakref.ref(seed)
    array = cai.from_buffer_interface(seed)
    del seed
    gc.collect()
    assert alive() is not None
    array.release()
    array.release()  # twice is fine
    gc.collect()
    assert alive() is None, "release() let go of the producer at once"
    with pytest.raises(ValueError, match="released"):
        array.buffer
    assert array.shape == (4,), "the metadata stays readable"


def test_the_cuda_half_round_trips_fake_driver(fake):
    pointer = fake.alloc(64)

    class CudaSeed:
        buffer, offset, dtype, shape, strides = pointer, 0, numpy.dtype("<i4"), (4, 2), None

    array = cai.from_buffer_interface(CudaSeed())
    assert array.buffer == pointer and array.offset == 0
    interface = array.__cuda_array_interface__
    assert interface["data"] == (pointer, False) and interface["shape"] == (4, 2)
    CudaSeed.offset = 8
    with pytest.raises(cai.CaiError, match="byte_offset is 8 for CUDA memory"):
        cai.from_buffer_interface(CudaSeed())
