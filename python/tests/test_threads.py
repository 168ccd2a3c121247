"""Threads: imports from many threads while another rewrites the dicts they read, and the GIL
(where there is one) released while an import waits in the driver. Runs on the fake driver (a
test double); on a free-threaded CPython the same tests run with no GIL at all."""

import ast
import ctypes
import os
import signal
import sys
import sysconfig
import threading
import time
import warnings

import numpy
import pytest

import cai
from conftest import DEVICE_BUFFER, KEYWORD_SETS, keyword_producer

FREE_THREADED = bool(sysconfig.get_config_var("Py_GIL_DISABLED"))


def test_the_module_does_not_turn_the_gil_back_on():
    if FREE_THREADED:
        assert not sys._is_gil_enabled(), "importing cai re-enabled the GIL"
    assert cai.from_object is cai._native.from_object


def test_sixteen_threads_import_while_another_rewrites_the_dicts_fake_driver():
    """Every import either fails cleanly or returns a shape and typestr the dict held together
    at some moment; nothing crashes. Bounded: a fixed number of rounds."""
    layouts = [((2, 3), "<f4", (12, 4)), ((6,), "<i4", [4]), ((3, 2), "<u4", None), ((1, 6), "<f4", (24, 4))]
    held = {(shape, typestr) for shape, typestr, _ in layouts}
    dicts = [{"shape": (2, 3), "typestr": "<f4", "data": (DEVICE_BUFFER, False), "version": 3} for _ in range(4)]
    stop = threading.Event()
    problems, counts = [], []

    def rewrite():
        i = 0
        while not stop.is_set():
            shape, typestr, strides = layouts[i % len(layouts)]
            for d in dicts:
                # Keys changed one at a time: a reader may see a mix, which validation refuses
                # or which is itself a held layout.
                d["shape"] = list(shape) if i % 2 else shape
                d["typestr"] = typestr
                d["strides"] = strides
                if i % 7 == 0:
                    d.pop("strides", None)
            i += 1

    def consume():
        ok = failed = 0
        for round_ in range(2000):
            d = dicts[round_ % len(dicts)]
            try:
                a = cai.from_object(d, sync=False, pointer_check=cai.POINTER_CHECK_NEVER)
            except cai.CaiError:
                failed += 1
                continue
            except Exception as error:  # anything else is a bug
                problems.append(repr(error))
                return
            if a.shape not in {s for s, _ in held} or a.typestr not in {t for _, t in held}:
                problems.append((a.shape, a.typestr))
            ok += 1
        counts.append((ok, failed))

    writer = threading.Thread(target=rewrite)
    readers = [threading.Thread(target=consume) for _ in range(16)]
    writer.start()
    for r in readers:
        r.start()
    for r in readers:
        r.join()
    stop.set()
    writer.join()
    assert not problems, problems[:5]
    assert len(counts) == 16 and sum(ok for ok, _ in counts) > 0


def test_sixteen_threads_read_producers_of_each_dlpack_keyword_set_at_once_real_numpy():
    """Sixteen threads read DLPack producer types at once, one per keyword set (all four;
    `stream` and `max_version`; `stream` alone): every read sees the data, and each read asks
    the sets in turn down to the one that answers, whatever the other threads' reads did."""
    values = numpy.arange(6, dtype=numpy.float32)
    for newer_sets, takes in enumerate(KEYWORD_SETS):
        Producer = keyword_producer(values, takes)
        problems = []
        start = threading.Barrier(16)

        def read():
            start.wait()
            for _ in range(200):
                taken = cai.from_object(Producer(), sync=False, allow_host=True)
                if taken.data_ptr != values.ctypes.data or taken.shape != (6,):
                    problems.append((taken.data_ptr, taken.shape))

        threads = [threading.Thread(target=read) for _ in range(16)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert not problems, problems[:5]
        refused = [asked for asked in Producer.asked if set(asked) - set(takes)]
        assert len(refused) == 16 * 200 * newer_sets, (takes, len(refused))
        assert len(Producer.asked) - len(refused) == 16 * 200


def test_a_blocking_import_releases_the_gil_fake_driver(fake):
    """While cuStreamSynchronize waits (250 ms in the fake driver), other Python threads run:
    this thread ticks inside the driver's wait window, which it could not with the GIL held."""
    producer = fake.stream(0)
    desc = {"shape": (4,), "typestr": "<f4", "data": (DEVICE_BUFFER, False), "version": 3, "stream": producer}
    done, outcome = threading.Event(), []

    def consumer():
        fake.begin(0)  # the fake's contexts are per thread
        try:
            outcome.append(cai.from_object(desc))  # no consumer stream: a blocking sync
        finally:
            done.set()

    ticks = []
    fake.lib.fake_cuda_set_sync_delay_ms(250)
    try:
        worker = threading.Thread(target=consumer)
        worker.start()
        while not done.is_set():
            ticks.append(time.monotonic())
        worker.join()
    finally:
        fake.lib.fake_cuda_set_sync_delay_ms(0)
    assert outcome, "the import failed"
    begin, end = ctypes.c_double(), ctypes.c_double()
    fake.lib.fake_cuda_last_sync_window(ctypes.byref(begin), ctypes.byref(end))
    assert end.value - begin.value >= 0.2
    inside = [t for t in ticks if begin.value + 0.05 < t < end.value - 0.05]
    assert inside, "no Python thread ran while the import waited: the GIL was held"


needs_fork = pytest.mark.skipif(not hasattr(os, "fork"), reason="no os.fork on this platform")


def fork_quietly():
    """os.fork(), without the warnings CPython 3.12+ and JAX (where another test imported it)
    give of forking a threaded process: the children here run libcai's and numpy's code only,
    and what a fork does to libcai's part is what these tests look for."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        warnings.filterwarnings("ignore", r"os\.fork\(\) was called", RuntimeWarning)
        return os.fork()


@needs_fork
def test_children_forked_while_other_threads_read_read_at_once_no_driver():
    """os.fork() while other threads are inside libcai (each read of a new type takes the lock of
    the types' facts, full eviction included; DLPack capsules are taken and their deleters run;
    CAI dicts are read): in the child those threads are gone, and a lock one of them held would
    stay held forever. Each child reads arrays of new types at once and exits; the parent waits
    for each with a deadline. Host memory and unchecked dicts only, no driver: a child of a
    process that initialized CUDA cannot use CUDA (docs/robustness.md, "fork")."""
    def new_host_type(number):
        # A class of its own each time: its facts are learned anew, under the lock.
        return type(f"Host{number}", (), {
            "__init__": lambda self, values: setattr(self, "values", values),
            "__dlpack__": lambda self, **kwargs: self.values.__dlpack__(**kwargs),
            "__dlpack_device__": lambda self: (1, 0),
        })

    def read_some(number):
        values = numpy.arange(16.0) + number
        array = cai.from_object(new_host_type(number)(values), allow_host=True)
        assert array.shape == (16,) and array.data_ptr == values.ctypes.data
        assert numpy.from_dlpack(array)[3] == 3.0 + number
        described = {"shape": (4,), "typestr": "<f4", "data": (DEVICE_BUFFER, False), "version": 3}
        read = cai.from_object(described, sync=False, pointer_check=cai.POINTER_CHECK_NEVER)
        assert read.data_ptr == DEVICE_BUFFER

    stop, failures = threading.Event(), []

    def keep_reading(index):
        number = index * 1_000_000
        try:
            while not stop.is_set():
                number += 1
                read_some(number)
        except BaseException as error:  # reported by the test below
            failures.append(error)

    readers = [threading.Thread(target=keep_reading, args=(i + 1,)) for i in range(3)]
    for reader in readers:
        reader.start()
    children, hung, failed = [], [], []
    try:
        for fork_number in range(25):
            time.sleep(0.002)
            pid = fork_quietly()
            if pid == 0:
                code = 1
                try:
                    for number in range(5):
                        read_some(-1 - 10 * fork_number - number)
                    code = 0
                finally:
                    os._exit(code)
            children.append(pid)
        for pid in children:
            deadline = time.monotonic() + 60
            while True:
                done, status = os.waitpid(pid, os.WNOHANG)
                if done:
                    if os.waitstatus_to_exitcode(status) != 0:
                        failed.append(pid)
                    break
                if time.monotonic() > deadline:
                    os.kill(pid, signal.SIGKILL)
                    os.waitpid(pid, 0)
                    hung.append(pid)
                    break
                time.sleep(0.01)
    finally:
        stop.set()
        for reader in readers:
            reader.join()
    assert not failures, failures[0]
    assert not hung, f"{len(hung)} of {len(children)} forked children hung reading (a lock a vanished thread held)"
    assert not failed, f"{len(failed)} of {len(children)} forked children failed to read"


@needs_fork
def test_a_child_forked_after_the_driver_loaded_is_refused_device_work_at_once_fake_driver(fake):
    """CUDA cannot be used in a child forked after its parent initialized it: there, work that
    needs the driver (a sync on the producer's stream) raises CAI_ERROR_NO_DRIVER naming the
    fork and the fix, at once, and work that needs none goes on. Before, the child called into
    the driver state it copied from its parent (c_tests/test_fork.c also forks while another
    thread's load is under way, where the child used to wait forever)."""
    desc = {"shape": (4,), "typestr": "<f4", "data": (DEVICE_BUFFER, False), "version": 3, "stream": fake.stream(0)}
    assert cai.from_object(desc).data_ptr == DEVICE_BUFFER  # the parent's driver, loaded and used
    read, write = os.pipe()
    pid = fork_quietly()
    if pid == 0:
        os.close(read)
        outcome = {}
        try:
            signal.alarm(20)
            try:
                cai.from_object(desc, pointer_check=cai.POINTER_CHECK_NEVER)
                outcome["synced"] = "no error"
            except cai.CaiError as error:
                outcome["synced"] = str(error)
            unchecked = cai.from_object(desc, sync=False, pointer_check=cai.POINTER_CHECK_NEVER)
            outcome["unchecked"] = unchecked.data_ptr == DEVICE_BUFFER
        except BaseException as error:  # reported to the parent
            outcome["raised"] = repr(error)
        finally:
            os.write(write, repr(outcome).encode())
            os._exit(0)
    os.close(write)
    with os.fdopen(read) as pipe:
        reported = pipe.read()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, reported
    outcome = ast.literal_eval(reported)
    assert "raised" not in outcome, outcome
    assert outcome["synced"].startswith("CAI_ERROR_NO_DRIVER: this process was forked"), outcome
    assert "spawn" in outcome["synced"], outcome
    assert outcome["unchecked"] is True, outcome
