"""Many threads on the same objects, bounded by rounds: one DLPack capsule raced by several
consumers, shared arrays exported, re-imported and released from many threads, and importers
racing threads that rewrite the attributes and dicts they read. On a free-threaded CPython
(scripts/test-free-threaded.sh) they run with no GIL at all; under a GIL they still check the
same outcomes. numpy is the real producer and consumer of host memory."""

import os
import sys
import sysconfig
import threading

import numpy
import pytest

import cai
from conftest import DEVICE_BUFFER, numpy_exports_read_only

THREADS = 6
# Tens of microseconds of spinning, far longer than a capsule takes to make.
SPINS_BEFORE_WAITING = 1000
FREE_THREADED = bool(sysconfig.get_config_var("Py_GIL_DISABLED"))


def run_threads(target, count=THREADS):
    """Runs `target(index)` on `count` threads; re-raises the first exception one raised."""
    errors = []

    def guarded(index):
        try:
            target(index)
        except BaseException as error:  # reported to the test below
            errors.append(error)

    threads = [threading.Thread(target=guarded, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]


class Holder:
    """A DLPack producer that hands every consumer the same capsule."""

    def __init__(self, capsule):
        self.capsule = capsule

    def __dlpack_device__(self):
        return (1, 0)

    def __dlpack__(self, **kwargs):
        return self.capsule


@pytest.mark.parametrize("max_version", [(1, 0), None], ids=["versioned", "legacy"])
def test_one_capsule_raced_by_several_consumers_is_taken_exactly_once_real_numpy(max_version):
    """Each round, one thread (in turn) makes a capsule and every thread, spinning until it
    appears, takes it at once: without a per-capsule critical section two threads both see it
    unused, and the tensor is deleted twice. A thread that spins long sleeps until the capsule
    is made: where the threads outnumber the free CPUs (a busy machine), the maker is not
    running, and a spinning wait made each round last a scheduler slice (minutes in all)."""
    # Under a GIL a spinning thread holds it for a switch interval: fewer rounds there.
    rounds, racers = 60000 if FREE_THREADED else 200, max(2, min(4, os.cpu_count() or 2))
    source = cai.from_object(numpy.arange(64.0), allow_host=True)
    holders = [None] * rounds
    taken = [[] for _ in range(rounds)]
    made = threading.Condition()

    def consume(index):
        for round_ in range(rounds):
            if round_ % racers == index:
                holders[round_] = Holder(source.__dlpack__(max_version=max_version))
                with made:
                    made.notify_all()
            spins = 0
            while holders[round_] is None:
                spins += 1
                if spins > SPINS_BEFORE_WAITING:  # the maker is off the CPU: sleep till it makes it
                    with made:
                        made.wait_for(lambda: holders[round_] is not None)
            try:
                array = cai.from_object(holders[round_], allow_host=True)
            except TypeError as error:
                assert "no unused" in str(error), error
                continue
            assert array.data_ptr == source.data_ptr
            taken[round_].append(index)
            array.release()

    run_threads(consume, racers)
    assert all(len(takers) == 1 for takers in taken), [t for t in taken if len(t) != 1][:5]
    del holders
    source.release()  # every export ended: nothing holds the memory any more


def test_shared_arrays_exported_reimported_and_released_from_many_threads_real_numpy():
    n = 1 << 17  # 1 MiB of float64: once freed, unmapped, so a read after free would fault
    expected = float(n * (n - 1) // 2)
    for _ in range(30):
        x = numpy.arange(n, dtype=numpy.float64)
        shared = cai.from_object(x, allow_host=True)
        del x  # from here only `shared` keeps the producer alive

        def use(index):
            for step in range(40):
                try:
                    view = numpy.from_dlpack(shared)
                except ValueError as error:  # released by another thread: refused, never a view
                    assert "released" in str(error), error
                    return
                again = cai.from_object(shared, allow_host=True)
                assert view.sum() == expected and again.data_ptr == view.ctypes.data
                del view
                again.release()
                if (index + step) % 7 == 0:
                    try:
                        shared.release()
                    except BufferError as error:  # another thread's export is alive
                        assert "DLPack export" in str(error), error

        run_threads(use)
        try:
            shared.release()
        except BufferError:
            pytest.fail("every thread let go of its exports, yet release() is refused")


def test_numpy_arrays_read_by_their_fields_from_many_threads_real_numpy():
    """numpy arrays read by numpy's C ABI (read/numpy.rs) and cai.Arrays read as input, both on
    the uncounted path, from many threads at once: every read sees its array's own layout, and
    once every thread let go, each array's reference count is where it was."""
    base = numpy.arange(4 * 6, dtype=numpy.float32).reshape(4, 6)
    arrays = [base, base[:, ::2], base.T, numpy.ones(5, numpy.int16), numpy.zeros((), numpy.complex64)]
    # numpy exports a read-only array only as a versioned DLPack tensor (numpy 2.1 or later).
    arrays[3].flags.writeable = not numpy_exports_read_only()
    arrays.append(cai.from_object(base, sync=False, allow_host=True))
    never = cai.POINTER_CHECK_NEVER
    alone = [cai.from_object(a, sync=False, allow_host=True, pointer_check=never) for a in arrays]
    expected = [(a.shape, a.strides, a.data_ptr, a.readonly) for a in alone]
    del alone
    counts = [sys.getrefcount(a) for a in arrays]

    def read(index):
        for step in range(300):
            which = (index + step) % len(arrays)
            got = cai.from_object(arrays[which], sync=False, allow_host=True, pointer_check=never)
            assert (got.shape, got.strides, got.data_ptr, got.readonly) == expected[which]
            assert got.owner is arrays[which]

    run_threads(read)
    assert [sys.getrefcount(a) for a in arrays] == counts


LAYOUTS = [((2, 3), "<f4"), ((6,), "<i4"), ((3, 2), "<u4")]
HELD_SHAPES = {shape for shape, _ in LAYOUTS}


class RewrittenProducer:
    """An object exposing a CAI dict, which `race_a_rewriter` rewrites."""

    def __init__(self):
        self.__cuda_array_interface__ = {"shape": (2, 3), "typestr": "<f4", "data": (DEVICE_BUFFER, False),
                                         "version": 3}


def race_a_rewriter(producers, consume, masked_rewrites=()):
    """Runs `consume(index)` on THREADS threads while another thread rewrites the producers'
    CAI dicts through LAYOUTS: the attribute replaced whole every third round, else the dict
    rewritten key by key (its shape a list every other round); and each of `masked_rewrites`
    replaced whole each round, masked every other round; until thread 0 is done."""
    stop = threading.Event()

    def rewrite():
        i = 0
        while not stop.is_set():
            shape, typestr = LAYOUTS[i % len(LAYOUTS)]
            for p in masked_rewrites:
                whole = masked_dict(shape, typestr)
                if i % 2:
                    del whole["mask"]
                p.__cuda_array_interface__ = whole
            for p in producers:
                if i % 3 == 0:
                    p.__cuda_array_interface__ = {"shape": shape, "typestr": typestr,
                                                  "data": (DEVICE_BUFFER, False), "version": 3}
                else:
                    p.__cuda_array_interface__["shape"] = list(shape) if i % 2 else shape
                    p.__cuda_array_interface__["typestr"] = typestr
            i += 1

    def consume_then_stop(index):
        try:
            consume(index)
        finally:
            if index == 0:
                stop.set()

    writer = threading.Thread(target=rewrite)
    writer.start()
    try:
        run_threads(consume_then_stop, THREADS)
    finally:
        stop.set()
        writer.join()


def test_importers_race_threads_that_rewrite_attributes_and_dicts_fake_driver():
    producers = [RewrittenProducer() for _ in range(4)]

    def consume(index):
        for round_ in range(3000):
            try:
                a = cai.from_object(producers[(index + round_) % 4], sync=False,
                                    pointer_check=cai.POINTER_CHECK_NEVER)
            except cai.CaiError:
                continue
            assert a.shape in HELD_SHAPES, a.shape
            assert a.__cuda_array_interface__["shape"] == a.shape

    race_a_rewriter(producers, consume)


def test_c_imports_race_threads_that_rewrite_dicts_and_let_go_of_every_reference_fake_driver(offer_ext):
    """`cai_python_from_object` (a C consumer, python/tests/extensions/offer_ext.c) on objects
    whose CAI dicts another thread rewrites, whole and key by key: every struct is of a layout
    that was written and owns what it read, and once every thread let go of its structs, each
    producer's reference count is where it was."""
    producers = [RewrittenProducer() for _ in range(4)]
    counts = [sys.getrefcount(p) for p in producers]

    def consume(index):
        kept = []
        for round_ in range(2000):
            try:
                described, struct = offer_ext.import_kept(producers[(index + round_) % 4])
            except cai.CaiError:  # a list shape, refused as the dict rules say
                continue
            assert described["shape"] in HELD_SHAPES and described["owning"], described
            kept.append(struct)
            if len(kept) > 8:
                del kept[:4]

    race_a_rewriter(producers, consume)
    assert [sys.getrefcount(p) for p in producers] == counts


class AlternatelyMaskedProducer:
    """An object exposing a CAI dict with a mask, which `race_a_rewriter` replaces whole, in turn
    with and without its mask (`masked_rewrites`)."""

    def __init__(self):
        self.__cuda_array_interface__ = masked_dict((2, 3), "<f4")


def masked_dict(shape, typestr):
    mask = {"shape": shape, "typestr": "|b1", "data": (DEVICE_BUFFER, False), "version": 3}
    return {"shape": shape, "typestr": typestr, "data": (DEVICE_BUFFER, False), "version": 3, "mask": mask}


def test_c_views_and_views_or_owns_race_threads_that_rewrite_dicts_fake_driver(offer_ext):
    """`cai_python_view` and `cai_python_view_or_own` (python/tests/extensions/offer_ext.c) on
    objects whose CAI dicts another thread rewrites: plain dicts key by key and whole, and masked
    dicts replaced whole by their unmasked twins and back (and one masked dict left alone). Every
    struct is of a layout that was written; view_or_own borrows a plain dict and owns a masked
    one (released at once), the view refuses a masked one with a CaiError; once every thread is
    done, each producer's reference count is where it was."""
    plain = [RewrittenProducer() for _ in range(2)]
    masked = [AlternatelyMaskedProducer() for _ in range(2)]
    # the last never rewritten: a masked dict read whatever the threads' timing (under a GIL a
    # reader may run all its rounds between two of the rewriter's turns)
    producers = plain + masked + [AlternatelyMaskedProducer()]
    counts = [sys.getrefcount(p) for p in producers]
    owned = [0] * THREADS

    def consume(index):
        for round_ in range(2000):
            obj = producers[(index + round_) % len(producers)]
            try:
                viewed = offer_ext.view(obj) if round_ % 2 else offer_ext.view_or_own(obj)
            except cai.CaiError as refused:  # a list shape, as the dict rules say; a mask, which
                # a view cannot borrow
                assert "shape" in str(refused) or "cannot borrow" in str(refused), refused
                continue
            assert viewed["shape"] in HELD_SHAPES and viewed["data"] == DEVICE_BUFFER, viewed
            owned[index] += viewed["owning"]

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)  # under a GIL, rewrites between a reader's calls too
    try:
        race_a_rewriter(plain, consume, masked)
    finally:
        sys.setswitchinterval(interval)
    assert sum(owned) > 0, "no masked dict was read: view_or_own's owning import did not run"
    assert [sys.getrefcount(p) for p in producers] == counts
