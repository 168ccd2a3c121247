"""Arrays across processes from Python (docs/python.md, "Sharing arrays between processes";
docs/conformance.md, "Other processes"), on the fake CUDA driver, whose device memory is
shared memory another process maps (tests/fake_cuda/fake_cuda.c): `cai.ipc_export` here and
`cai.ipc_open` in a spawned process, the bytes seen and written both ways, a strided view at
its offset inside a larger allocation, the importer ordered after the exporter's pending work,
a cai.Array pickled through a `multiprocessing` queue, a `ProcessPoolExecutor` and Dask's
`LocalCluster`, and every refusal from Python. The children
run python/tests/ipc_children.py and get the fake driver by CAI_CUDA_DRIVER, which conftest.py
sets in this process's environment before any child starts."""

import concurrent.futures
import copy
import ctypes
import gc
import multiprocessing
import os
import pickle
import time

import numpy
import pytest

import cai
import ipc_children

SPAWN = multiprocessing.get_context("spawn")


@pytest.fixture(scope="module")
def spawned():
    """One spawned worker process for the module's tests (a spawn costs about half a second)."""
    with concurrent.futures.ProcessPoolExecutor(max_workers=1, mp_context=SPAWN) as pool:
        yield pool


def filled(fake, nbytes, memory_type=2, flags=0):
    """A fake device allocation of `nbytes`, byte i holding i % 251."""
    base = fake.alloc(nbytes, memory_type, 0, flags)
    pattern = bytes(i % 251 for i in range(nbytes))
    ctypes.memmove(base, pattern, nbytes)
    return base, pattern


class Exposed:
    """A CAI producer over `desc`."""

    def __init__(self, desc):
        self.__cuda_array_interface__ = desc


def test_fake_driver_export_here_open_in_a_spawned_process_bytes_both_ways(fake, spawned):
    base, pattern = filled(fake, 256)
    producer = Exposed({"shape": (64,), "typestr": "<u4", "data": (base, False), "version": 3})
    descriptor = cai.ipc_export(producer)
    assert type(descriptor) is bytes and len(descriptor) == 1536

    seen = spawned.submit(ipc_children.open_read_write, descriptor, b"written by the child").result(timeout=120)

    assert seen["pid"] != os.getpid()
    assert seen["shape"] == (64,) and seen["strides"] == (4,) and seen["typestr"] == "<u4"
    assert seen["readonly"] is False
    assert b"".join(seen["elements"]) == pattern, "the child reads the bytes this process wrote"
    assert seen["offset"] == 0 and seen["allocation_size"] == 256
    assert ctypes.string_at(base, 20) == b"written by the child", "this process reads the child's write"
    assert ctypes.string_at(base + 20, 236) == pattern[20:]


def test_fake_driver_a_strided_view_inside_a_larger_allocation_arrives_at_its_offset(fake, spawned):
    base, pattern = filled(fake, 4096)
    # Rows 64 bytes apart, every other float32 of each, from byte 1024 of the allocation, and
    # read-only: the layout, the offset and the flag all travel.
    desc = {"shape": (4, 3), "typestr": "<f4", "data": (base + 1024, True), "strides": (64, 8), "version": 3}
    here = cai.from_object(Exposed(desc))
    descriptor = cai.ipc_export(here)

    seen = spawned.submit(ipc_children.open_read_write, descriptor, b"").result(timeout=120)

    assert seen["shape"] == (4, 3) and seen["strides"] == (64, 8) and seen["readonly"] is True
    assert seen["offset"] == 1024 and seen["allocation_size"] == 4096
    assert seen["elements"] == ipc_children.elements(here)
    assert seen["elements"][4] == pattern[1024 + 64 + 8:1024 + 64 + 12]


@pytest.mark.parametrize("how", ["blocking", "stream", "none"])
def test_fake_driver_the_importer_is_ordered_after_the_exporters_pending_work_by_the_event(fake, spawned, how):
    """A slow kernel held on the producer's stream when the array is exported (the default
    export: the legacy default stream ordered after the producer's, the event recorded there):
    the importer's host wait returns only after the kernel finished; a stream-ordered open
    returns at once and its stream's work waits for the kernel; `sync=False` waits for
    nothing (the control: without the event every open would return at once)."""
    fake.lib.fake_cuda_slow_finished_at.restype = ctypes.c_double
    spawned.submit(os.getpid).result(timeout=120)  # the worker is up before the kernel is held
    base, _ = filled(fake, 64)
    stream = fake.stream(0)
    kernel = fake.lib.fake_cuda_launch_slow(ctypes.c_uint64(stream), -1)
    assert kernel >= 0
    producer = Exposed({"shape": (16,), "typestr": "<f4", "data": (base, False), "version": 3, "stream": stream})
    descriptor = cai.ipc_export(producer)
    opened = spawned.submit(ipc_children.open_ordered, descriptor, how)
    try:
        time.sleep(0.3)
    finally:
        fake.lib.fake_cuda_finish_slow(kernel)
    returned, synced = opened.result(timeout=120)
    finished = fake.lib.fake_cuda_slow_finished_at(kernel)
    assert finished > 0
    if how == "blocking":
        assert returned >= finished, "the open returned before the exporter's kernel finished"
    elif how == "stream":
        assert returned < finished <= synced, (returned, finished, synced)
    else:
        assert returned < finished


def test_fake_driver_a_cai_array_pickles_through_a_multiprocessing_queue_spawn(fake):
    base, pattern = filled(fake, 64)
    array = cai.from_object(Exposed({"shape": (16,), "typestr": "<i4", "data": (base, False), "version": 3}))
    inbox, outbox = SPAWN.Queue(), SPAWN.Queue()
    child = SPAWN.Process(target=ipc_children.read_from_queue, args=(inbox, outbox))
    child.start()
    try:
        inbox.put(array)
        answer = outbox.get(timeout=120)
    finally:
        child.join(timeout=60)
    assert answer[0] == "Array", answer
    assert answer[1] == child.pid and b"".join(answer[2]) == pattern
    assert child.exitcode == 0


def test_fake_driver_a_cai_array_pickles_to_a_process_pool_executor_spawn(fake, spawned):
    base, pattern = filled(fake, 128)
    array = cai.from_object(Exposed({"shape": (2, 16), "typestr": "<f4", "data": (base, False), "version": 3}))
    name, pid, seen = spawned.submit(ipc_children.read_array, array).result(timeout=120)
    assert name == "Array" and pid != os.getpid()
    assert b"".join(seen) == pattern


def test_fake_driver_a_cai_array_passed_to_a_dask_task_in_a_local_cluster(fake):
    distributed = pytest.importorskip("distributed")
    base, pattern = filled(fake, 96)
    array = cai.from_object(Exposed({"shape": (24,), "typestr": "<u4", "data": (base, False), "version": 3}))
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None,
                                  silence_logs=40) as cluster, distributed.Client(cluster) as client:
        name, pid, seen = client.submit(ipc_children.read_array, array, pure=False).result(timeout=120)
    assert name == "Array" and pid != os.getpid()
    assert b"".join(seen) == pattern


def test_fake_driver_a_pickle_loaded_in_its_own_process_is_the_array_itself_while_it_lives(fake):
    """The driver opens no IPC handle in the process that made it: there a pickled cai.Array
    loads as the Array itself while it is alive (`copy.copy`, `pickle.loads`, Dask's
    scheduler in the client's process), and once it was collected the load is refused by
    name, as `cai.ipc_open` of a descriptor of this process always is."""
    base, _ = filled(fake, 16)
    array = cai.from_object(Exposed({"shape": (4,), "typestr": "<f4", "data": (base, False), "version": 3}))
    pickled = pickle.dumps(array)
    assert pickle.loads(pickled) is array
    assert copy.copy(array) is array
    with pytest.raises(cai.CaiError, match="exported by this very process") as refused:
        cai.ipc_open(cai.ipc_export(array))
    assert refused.value.status == "CAI_ERROR_IPC_DESCRIPTOR"
    del array
    gc.collect()
    with pytest.raises(cai.CaiError, match="exported by this very process") as refused:
        pickle.loads(pickled)
    assert refused.value.status == "CAI_ERROR_IPC_DESCRIPTOR"
    assert any("while unpickling a cai.Array" in note for note in refused.value.__notes__)


def test_fake_driver_deepcopy_of_an_array_is_refused_not_an_alias(fake):
    """copy.deepcopy would give the same view (a pickle loads as the Array itself here), so a
    write through the "copy" would change the original: it raises TypeError naming the fix,
    for device and host memory alike, and inside a container too."""
    base, _ = filled(fake, 16)
    device = cai.from_object(Exposed({"shape": (4,), "typestr": "<f4", "data": (base, False), "version": 3}))
    host = cai.from_object(numpy.zeros(4, dtype=numpy.float32), allow_host=True)
    for array, memory in ((device, "device memory"), (host, "host memory")):
        with pytest.raises(TypeError, match=f"copy.deepcopy of a cai.Array: it is a view of {memory}"):
            copy.deepcopy(array)
        with pytest.raises(TypeError, match="copy the memory with its producer"):
            copy.deepcopy({"weights": [array]})


def test_fake_driver_host_memory_is_refused_for_export_and_pickling_by_name(fake):
    host = numpy.arange(4, dtype=numpy.float32)
    with pytest.raises(cai.CaiError) as refused:
        cai.ipc_export(host)
    assert refused.value.status == "CAI_ERROR_NOT_SHAREABLE", refused.value
    host_array = cai.from_object(host, allow_host=True)
    with pytest.raises(cai.CaiError) as refused:
        pickle.dumps(host_array)
    assert refused.value.status == "CAI_ERROR_NOT_SHAREABLE", refused.value
    assert any("numpy.from_dlpack" in note for note in refused.value.__notes__)
    # The fake driver's pinned host memory and managed memory: known to the driver, not shareable.
    for memory_type, flags in ((1, 0), (2, 1)):
        base, _ = filled(fake, 16, memory_type, flags)
        desc = {"shape": (4,), "typestr": "<f4", "data": (base, False), "version": 3}
        with pytest.raises(cai.CaiError) as refused:
            cai.ipc_export(Exposed(desc))
        assert refused.value.status == "CAI_ERROR_NOT_SHAREABLE", (memory_type, flags, refused.value)


def test_fake_driver_a_descriptor_of_a_device_the_importer_lacks_is_refused_by_name(fake, monkeypatch):
    """Devices are found by UUID: a child whose fake devices have other UUIDs (another
    FAKE_CUDA_UUID_SEED, as another machine's or a CUDA_VISIBLE_DEVICES that hides the device)
    refuses the descriptor, naming the device and the ones it has."""
    base, _ = filled(fake, 16)
    descriptor = cai.ipc_export(Exposed({"shape": (4,), "typestr": "<f4", "data": (base, False), "version": 3}))
    monkeypatch.setenv("FAKE_CUDA_UUID_SEED", "7")  # read by the child's fake driver when it loads
    with concurrent.futures.ProcessPoolExecutor(max_workers=1, mp_context=SPAWN) as other:
        name, status, message = other.submit(ipc_children.open_refused, descriptor).result(timeout=120)
    assert (name, status) == ("CaiError", "CAI_ERROR_NOT_SHAREABLE"), message
    assert "is not one of this process's 2 devices" in message and "CUDA_VISIBLE_DEVICES" in message, message


def test_fake_driver_corrupt_short_long_and_non_bytes_descriptors_are_refused_by_name(fake, spawned):
    base, _ = filled(fake, 16)
    descriptor = cai.ipc_export(Exposed({"shape": (4,), "typestr": "<f4", "data": (base, False), "version": 3}))
    corrupt = bytearray(descriptor)
    corrupt[32] ^= 1  # the first extent: the checksum no longer matches
    for bad, words in ((bytes(corrupt), "checksum"), (descriptor[:-1], "is 1535 bytes"),
                       (descriptor + b"\0", "is 1537 bytes"), (b"", "is 0 bytes")):
        name, status, message = spawned.submit(ipc_children.open_refused, bad).result(timeout=120)
        assert (name, status) == ("CaiError", "CAI_ERROR_IPC_DESCRIPTOR"), message
        assert words in message, message
    # A bytearray of the right bytes is taken as bytes are.
    assert spawned.submit(ipc_children.open_refused, bytearray(descriptor)).result(timeout=120) is None
    for not_bytes in ("descriptor", 1536, memoryview(descriptor).tolist()):
        with pytest.raises(TypeError, match="descriptor must be the bytes cai.ipc_export returned"):
            cai.ipc_open(not_bytes)
