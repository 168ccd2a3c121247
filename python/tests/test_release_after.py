"""`cai.Array.release(stream=...)` on the fake CUDA driver (a test double whose slow kernels
take time and whose events complete only once the work before them has): the producer is let
go of after the kernel that still reads its memory, never before and never with a host wait,
and at interpreter exit the pending release runs before finalization. The same core as
tests/driver_fake_release_after.rs; docs/conformance.md rows 93 to 95."""

import ctypes
import gc
import os
import subprocess
import sys
import textwrap
import weakref

import pytest

import cai
from conftest import FAKE_DRIVER


def _clock(fake):
    fake.lib.fake_cuda_now.restype = ctypes.c_double
    fake.lib.fake_cuda_slow_finished_at.restype = ctypes.c_double
    fake.lib.fake_cuda_launch_slow.argtypes = [ctypes.c_uint64, ctypes.c_int]
    return fake.lib


class Producer:
    """A CAI producer that notes, on the fake's clock, when it was let go of."""

    def __init__(self, fake, stream, notes):
        self.__cuda_array_interface__ = {
            "shape": (4,), "typestr": "<f4", "data": (fake.alloc(64), False), "version": 3, "stream": stream,
        }
        self.lib, self.notes = _clock(fake), notes

    def __del__(self):
        self.notes.append(self.lib.fake_cuda_now())


def test_row_93_the_producer_is_let_go_of_only_after_the_slow_kernel_reading_it_fake_driver(fake):
    lib, notes = _clock(fake), []
    stream = fake.stream()
    producer = Producer(fake, None, notes)
    a = cai.from_object(producer, sync=False)
    alive = weakref.ref(producer)
    del producer
    kernel = lib.fake_cuda_launch_slow(stream, -1)  # held until finished below
    a.release(stream=stream)
    with pytest.raises(ValueError, match="released"):
        a.ptr
    del a
    gc.collect()
    assert cai.release_pending() == 1
    assert alive() is not None and notes == [], "the kernel still reads the memory"
    assert not fake.calls("cuEventSynchronize") and not fake.calls("cuStreamSynchronize"), fake.log()
    lib.fake_cuda_finish_slow(kernel)
    assert cai.release_pending() == 0
    assert alive() is None and len(notes) == 1
    assert notes[0] >= lib.fake_cuda_slow_finished_at(kernel) > 0, "after the kernel, on the fake's clock"


def test_row_93_wait_drains_and_a_stream_of_none_releases_at_once_fake_driver(fake):
    lib, notes = _clock(fake), []
    stream = fake.stream()
    # Long enough to outlast what runs before the check below, under valgrind too.
    kernel = lib.fake_cuda_launch_slow(stream, 1500)
    a = cai.from_object(Producer(fake, None, notes), sync=False)
    a.release(stream=stream)
    assert notes == []
    assert cai.release_pending(wait=True) == 0
    assert notes and notes[0] >= lib.fake_cuda_slow_finished_at(kernel) > 0
    b = cai.from_object(Producer(fake, None, notes), sync=False)
    b.release(stream=None)
    assert len(notes) == 2, "released at once"
    b.release(stream=stream)  # released already: nothing to do


def test_row_94_refusals_leave_the_array_as_it_was_fake_driver(fake):
    notes = []
    a = cai.from_object(Producer(fake, None, notes), sync=False)
    with pytest.raises(cai.CaiError) as refused:
        a.release(stream=0xDEAD0000)
    assert refused.value.status == "CAI_ERROR_DRIVER" and "cuStreamGetCtx" in str(refused.value)
    capturing = fake.stream()
    assert fake.lib.cuStreamBeginCapture_v2(ctypes.c_void_p(capturing), 0) == 0
    with pytest.raises(cai.CaiError) as refused:
        a.release(stream=capturing)
    assert refused.value.status == "CAI_ERROR_STREAM_CAPTURING"
    assert "still yours" in str(refused.value)
    assert not fake.calls("cuEventRecord"), fake.log()
    graph = ctypes.c_void_p()
    assert fake.lib.cuStreamEndCapture(ctypes.c_void_p(capturing), ctypes.byref(graph)) == 0
    assert a.ptr and notes == [], "the Array still owns its producer"
    with pytest.raises(TypeError):
        a.release(1)  # `stream` is keyword-only
    a.release()
    assert len(notes) == 1


EXIT_SCRIPT = textwrap.dedent("""
    import ctypes, sys
    import cai
    lib = ctypes.CDLL(sys.argv[1])
    lib.fake_cuda_now.restype = ctypes.c_double
    lib.fake_cuda_slow_finished_at.restype = ctypes.c_double
    lib.fake_cuda_launch_slow.argtypes = [ctypes.c_uint64, ctypes.c_int]
    lib.fake_cuda_set_device(0)
    lib.fake_cuda_alloc.restype = ctypes.c_uint64
    lib.fake_cuda_alloc.argtypes = [ctypes.c_uint64, ctypes.c_uint, ctypes.c_int, ctypes.c_uint]
    lib.fake_cuda_stream_create.restype = ctypes.c_uint64
    stream = lib.fake_cuda_stream_create(0)
    data = lib.fake_cuda_alloc(64, 2, 0, 0)

    class Producer:
        __cuda_array_interface__ = {"shape": (4,), "typestr": "<f4", "data": (data, False), "version": 3}
        def __del__(self):
            late = sys.is_finalizing()
            after = lib.fake_cuda_now() >= lib.fake_cuda_slow_finished_at(kernel) > 0
            sys.stdout.write(f"released finalizing={late} after_kernel={after}\\n")
            sys.stdout.flush()

    kernel = lib.fake_cuda_launch_slow(stream, 200)
    a = cai.from_object(Producer(), sync=False)
    a.release(stream=stream)
    del a
    print("exiting", flush=True)
""")


def test_row_95_at_exit_the_pending_release_runs_before_finalization_fake_driver(tmp_path):
    script = tmp_path / "exit.py"
    script.write_text(EXIT_SCRIPT)
    env = dict(os.environ, CAI_CUDA_DRIVER=str(FAKE_DRIVER))
    run = subprocess.run([sys.executable, str(script), str(FAKE_DRIVER)], capture_output=True, text=True,
                         env=env, timeout=60)
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines() == ["exiting", "released finalizing=False after_kernel=True"], run.stdout
    assert run.stderr == "", run.stderr


def test_row_93_a_later_import_lets_go_of_what_is_due_fake_driver(fake):
    lib, notes = _clock(fake), []
    stream = fake.stream()
    kernel = lib.fake_cuda_launch_slow(stream, -1)
    a = cai.from_object(Producer(fake, None, notes), sync=False)
    a.release(stream=stream)
    del a
    cai.from_object(Producer(fake, None, []), sync=False).release()
    assert notes == [], "the kernel still reads the memory"
    lib.fake_cuda_finish_slow(kernel)
    cai.from_object(Producer(fake, None, []), sync=False).release()
    assert len(notes) == 1, "the import let go of the producer, with no release_pending"
    assert notes[0] >= lib.fake_cuda_slow_finished_at(kernel) > 0
    assert cai.release_pending() == 0
