"""`cai.from_object` during CUDA graph capture, on the fake driver (a test double that models
NVIDIA's capture rules): docs/conformance.md rows 91 and 92, the same core as the C tests
(tests/driver_fake_capture.rs). Each import succeeds with the capture still valid, or raises
CAI_ERROR_STREAM_CAPTURING before anything is enqueued."""

import ctypes

import pytest

import cai

GLOBAL, THREAD_LOCAL, RELAXED = 0, 1, 2


def _begin(fake, stream, mode):
    assert fake.lib.cuStreamBeginCapture_v2(ctypes.c_void_p(stream), mode) == 0


def _end(fake, stream):
    graph = ctypes.c_void_p()
    return fake.lib.cuStreamEndCapture(ctypes.c_void_p(stream), ctypes.byref(graph)), bool(graph.value)


def _dict(fake, stream):
    return {"shape": (4,), "typestr": "<f4", "data": (fake.alloc(64), False), "version": 3, "stream": stream}


def _enqueued(fake):
    return fake.calls("cuEventRecord") + fake.calls("cuStreamWaitEvent") + fake.calls("cuStreamSynchronize")


@pytest.mark.parametrize("mode", [GLOBAL, THREAD_LOCAL, RELAXED])
def test_row_91_a_capturing_producer_is_refused_and_the_capture_stays_valid(fake, mode):
    producer, consumer = fake.stream(), fake.stream()
    _begin(fake, producer, mode)
    for stream in (consumer, None):
        with pytest.raises(cai.CaiError) as refused:
            cai.from_object(_dict(fake, producer), stream=stream)
        assert refused.value.status == "CAI_ERROR_STREAM_CAPTURING"
        assert refused.value.code == cai._native.STATUS_CODES["CAI_ERROR_STREAM_CAPTURING"]
        assert f"{producer:#x}" in str(refused.value) and "sync=False" in str(refused.value)
    assert fake.calls("cuStreamGetCaptureInfo") and not _enqueued(fake), fake.log()
    assert _end(fake, producer) == (0, True)


@pytest.mark.parametrize("mode", [GLOBAL, THREAD_LOCAL, RELAXED])
def test_row_91_the_capturing_stream_as_the_consumers_and_sync_off_need_nothing(fake, mode):
    capturing, consumer = fake.stream(), fake.stream()
    _begin(fake, capturing, mode)
    cai.from_object(_dict(fake, capturing), stream=capturing)
    cai.from_object(_dict(fake, capturing), stream=consumer, sync=False)
    assert not fake.calls("cuStreamGetCaptureInfo") and not _enqueued(fake), fake.log()
    assert _end(fake, capturing) == (0, True)


def test_row_92_the_legacy_stream_during_a_capture_is_refused(fake):
    capturing = fake.stream()
    _begin(fake, capturing, GLOBAL)
    with pytest.raises(cai.CaiError) as refused:
        cai.from_object(_dict(fake, 1))
    assert refused.value.status == "CAI_ERROR_STREAM_CAPTURING"
    assert "legacy default stream (1)" in str(refused.value)
    assert not _enqueued(fake), fake.log()
    assert _end(fake, capturing) == (0, True)
