"""What a DLPack consumer asks its producer for, and what it does itself afterwards, for every
consumer stream value: on `__dlpack__` producers (a cai.Array behind a wrapper that records its
calls) and on exchange-table producers (python/tests/exchange_producer.c, a test double), over
the fake CUDA driver (a test double), whose streams keep order: a missing sync shows as data the
consumer does not see."""

import ctypes

import pytest

import cai

N = 256


class Producer:
    """A `__dlpack__` producer over a cai.Array, recording the stream it is asked for."""

    def __init__(self, source):
        self.source, self.streams = source, []

    def __dlpack_device__(self):
        return self.source.__dlpack_device__()

    def __dlpack__(self, stream=None, **kwargs):
        self.streams.append(stream)
        return self.source.__dlpack__(stream=stream, **kwargs)


def producer_array(fake, producer_stream):
    """A cai.Array on `producer_stream` over fresh fake memory, which a slow kernel then fills."""
    pointer = fake.alloc(N * 4)
    interface = {"shape": (N,), "typestr": "<u4", "data": (pointer, False), "version": 3,
                 "stream": producer_stream}
    return cai.from_object(interface, sync=False), pointer


def filled_producer(fake, value):
    """A recording producer over an array whose memory a slow kernel on its stream fills with
    `value`; the fake's log starts empty after it."""
    producer_stream = fake.stream()
    source, pointer = producer_array(fake, producer_stream)
    fake.launch_fill(producer_stream, pointer, N, value)
    fake.begin(0)
    return Producer(source), pointer, producer_stream


def host_values(pointer):
    """What the host reads at `pointer` now: the kernel's writes land once a host sync saw them."""
    return set((ctypes.c_uint32 * N).from_address(pointer))


def stream_name(fake, stream):
    """The fake driver's name for a stream in its log."""
    return {1: "legacy", 2: "per-thread"}.get(stream) or fake.stream_name(stream)


def consumer_streams(fake):
    return {"legacy": 1, "per-thread": 2, "handle": fake.stream()}


@pytest.mark.parametrize("name", ["legacy", "per-thread", "handle"])
def test_a_consumer_on_a_stream_asks_the_producer_for_that_stream_and_sees_its_data_fake_driver(fake, name):
    consumer = consumer_streams(fake)[name]
    producer_stream = fake.stream()
    source, pointer = producer_array(fake, producer_stream)
    producer = Producer(source)
    fake.launch_fill(producer_stream, pointer, N, 5)
    cai.from_object(producer, stream=consumer)
    assert producer.streams == [consumer], "never -1 (no sync) for a consumer that wants one"
    assert fake.read(consumer, pointer, N) == {5}, "the consumer's stream is ordered after the kernel"


def test_a_consumer_without_a_stream_asks_for_the_legacy_stream_and_waits_on_the_host_fake_driver(fake):
    producer, pointer, _ = filled_producer(fake, 6)
    cai.from_object(producer)
    assert producer.streams == [None], "DLPack's None: the legacy default stream"
    assert "cuStreamSynchronize legacy" in fake.log(), fake.log()
    assert host_values(pointer) == {6}, "the host read after the import sees the kernel's values"


def test_a_blocking_consumer_waits_on_the_host_for_the_stream_it_asked_for_fake_driver(fake):
    consumer = fake.stream()
    producer, pointer, _ = filled_producer(fake, 7)
    cai.from_object(producer, stream=consumer, sync=cai.SYNC_BLOCKING)
    assert producer.streams == [consumer]
    assert "cuStreamSynchronize %s" % stream_name(fake, consumer) in fake.log()
    assert host_values(pointer) == {7}


def test_a_consumer_that_wants_no_sync_asks_for_none_and_does_none_fake_driver(fake):
    producer, pointer, producer_stream = filled_producer(fake, 8)
    for stream in (None, 1, fake.stream()):
        cai.from_object(producer, stream=stream, sync=False)
    assert producer.streams[0] == producer.streams[1] == producer.streams[2] == -1
    assert fake.calls("cuStream") == [] and fake.calls("cuEvent") == []
    assert fake.read(2, pointer, N) == {0}, "nothing ordered the kernel"
    assert fake.lib.cuStreamSynchronize(ctypes.c_void_p(producer_stream)) == 0


@pytest.fixture(scope="module")
def exchange(request):
    from conftest import ROOT, compile_shared

    lib = ctypes.CDLL(str(compile_shared(ROOT / "python" / "tests" / "exchange_producer.c",
                                         "libexchange_producer_streams.so")))
    lib.producer_exchange_api.restype = ctypes.c_void_p
    lib.producer_set.argtypes = [ctypes.c_uint64, ctypes.c_uint64]

    class TableProducer:
        __c_dlpack_exchange_api__ = lib.producer_exchange_api()

        def __dlpack_device__(self):
            return (2, 0)

        def __dlpack__(self, **kwargs):
            raise AssertionError("the C exchange table should have been used")

    lib.Producer = TableProducer
    return lib


def exchange_producer_on(fake, exchange):
    """The test double's tensors are 4x8 float32 over fresh memory, its work stream a new
    stream on which a slow kernel fills that memory."""
    producer_stream, pointer = fake.stream(), fake.alloc(N * 4)
    exchange.producer_set(pointer, producer_stream)
    return producer_stream, pointer


@pytest.mark.parametrize("name", ["legacy", "per-thread", "handle"])
def test_an_exchange_consumer_on_a_stream_waits_for_the_tables_work_stream_fake_driver(fake, exchange, name):
    consumer = consumer_streams(fake)[name]
    producer_stream, pointer = exchange_producer_on(fake, exchange)
    fake.launch_fill(producer_stream, pointer, 32, 9)
    asks = exchange.producer_stream_asks()
    fake.begin(0)
    a = cai.from_object(exchange.Producer(), stream=consumer)
    assert exchange.producer_stream_asks() == asks + 1, "the table's current_work_stream was asked"
    assert "cuStreamWaitEvent %s" % stream_name(fake, consumer) in fake.log(), fake.log()
    assert a.stream == producer_stream
    values = (ctypes.c_uint32 * 32)()
    assert fake.lib.cuMemcpyDtoHAsync_v2(values, ctypes.c_uint64(pointer), ctypes.c_size_t(128),
                                         ctypes.c_void_p(consumer)) == 0
    assert set(values) == {9}


def test_an_exchange_consumer_without_a_stream_waits_on_the_host_for_the_work_stream_fake_driver(fake, exchange):
    producer_stream, pointer = exchange_producer_on(fake, exchange)
    fake.launch_fill(producer_stream, pointer, 32, 10)
    asks = exchange.producer_stream_asks()
    fake.begin(0)
    cai.from_object(exchange.Producer())
    assert exchange.producer_stream_asks() == asks + 1
    assert "cuStreamSynchronize %s" % stream_name(fake, producer_stream) in fake.log()
    assert set((ctypes.c_uint32 * 32).from_address(pointer)) == {10}


def test_an_exchange_consumer_that_wants_no_sync_asks_for_no_work_stream_fake_driver(fake, exchange):
    producer_stream, pointer = exchange_producer_on(fake, exchange)
    asks = exchange.producer_stream_asks()
    fake.begin(0)
    for stream in (None, 1, fake.stream()):
        cai.from_object(exchange.Producer(), stream=stream, sync=False)
    assert exchange.producer_stream_asks() == asks
    assert fake.calls("cuStream") == [] and fake.calls("cuEvent") == []
