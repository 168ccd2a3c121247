"""cai.from_object's entry (python/src/entry/from_object.rs: METH_FASTCALL | METH_KEYWORDS on
pyo3-ffi, its arguments matched by hand) against the entry it replaced, the same import body
behind PyO3's argument handling, kept as cai._native._from_object_reference in the test
suites' builds (the test-oracle feature of python/Cargo.toml): the oracle. Same
Array (every field, the same owner) by position and by keyword on every producer installed, the
same errors with the same words, keyword names that are not the interned ones. Fake driver: no
call here asks it (sync=False, pointer_check NEVER, host memory)."""

import gc
import sys
import inspect
import weakref

import numpy
import pytest

import cai
from cai import _native
from conftest import NOT_SHARED_BY_TWO_READS, diverging_producer, public_fields

if not hasattr(_native, "_from_object_reference"):
    pytest.fail("this build of cai has no _native._from_object_reference, the oracle of this file: build it "
                "with the test-oracle feature (MATURIN_PEP517_ARGS=\"--features test-oracle\" pip install ./python, "
                "as scripts/python-env.sh does)", pytrace=False)
REFERENCE = _native._from_object_reference
NEVER = cai.POINTER_CHECK_NEVER
SIGNATURE = "(obj, stream=None, sync=None, writable=False, pointer_check=None, allow_host=False)"


def cai_dict():
    host = numpy.arange(12, dtype=numpy.float32)
    return {"shape": (3, 4), "typestr": "<f4", "data": (host.ctypes.data, False), "version": 3,
            "strides": None, "stream": None}


def producers():
    """name: a function making the argument (skipping where its framework is not installed)."""
    def torch_tensor():
        torch = pytest.importorskip("torch")
        return torch.arange(12, dtype=torch.float32).reshape(3, 4)

    def jax_array():
        jnp = pytest.importorskip("jax.numpy")
        return jnp.arange(12, dtype=jnp.float32).reshape(3, 4)

    def paddle_tensor():
        paddle = pytest.importorskip("paddle")
        return paddle.arange(12, dtype="float32").reshape([3, 4])

    def cai_array():
        return cai.from_object(numpy.arange(12, dtype=numpy.float32).reshape(3, 4), allow_host=True)

    class Exposer:
        def __init__(self):
            self.__cuda_array_interface__ = cai_dict()

    return {
        "CAI dict": cai_dict,
        "object with a CAI dict": Exposer,
        "numpy array": lambda: numpy.arange(12, dtype=numpy.float32).reshape(3, 4),
        "torch tensor": torch_tensor,
        "jax array": jax_array,
        "paddle tensor": paddle_tensor,
        "cai.Array": cai_array,
    }


def fields(array):
    """Every public value of an Array (the struct as Python sees it), the owner by identity."""
    out = public_fields(array, NOT_SHARED_BY_TWO_READS)
    out["owner"] = id(array.owner)
    out["mask"] = array.mask is None
    return out


def calls(entry, obj):
    """The same import, written each way a user can write it."""
    yield "keywords", lambda: entry(obj, sync=False, allow_host=True, pointer_check=NEVER)
    yield "positions", lambda: entry(obj, None, False, False, NEVER, True)
    yield "obj by keyword", lambda: entry(obj=obj, allow_host=True, pointer_check=NEVER, sync=False)
    yield "mixed", lambda: entry(obj, None, sync=False, pointer_check=NEVER, allow_host=True, writable=False)
    names = ["".join(["s", "ync"]), "".join(["allow", "_host"]), "".join(["pointer", "_check"])]
    yield "built names", lambda: entry(obj, **dict(zip(names, [False, True, NEVER])))

    class Name(str):
        pass

    yield "str subclass names", lambda: entry(obj, **{Name("sync"): False, Name("allow_host"): True,
                                                     Name("pointer_check"): NEVER})


@pytest.mark.parametrize("producer", list(producers()))
def test_every_way_of_calling_gives_the_oracles_array_for_every_producer_fake_driver(producer):
    obj = producers()[producer]()
    expected = fields(REFERENCE(obj, sync=False, allow_host=True, pointer_check=NEVER))
    for way, call in calls(cai.from_object, obj):
        got = call()
        assert fields(got) == expected, way
        if not isinstance(obj, dict):
            assert got.owner is obj or got.owner is REFERENCE(obj, None, False, False, NEVER, True).owner, way
    for way, call in calls(REFERENCE, obj):
        assert fields(call()) == expected, way


@pytest.mark.parametrize("producer", list(producers()))
def test_reads_in_a_row_and_between_other_types_give_the_first_reads_array_fake_driver(producer):
    """A thread remembers the type it last read by an audited path and, for a type read by its
    exchange table, that choice (negotiate/type_facts.rs's `remembered_choice`), made again without
    asking for the next object of that type. Reads of one type in a row (the remembered
    choice), and reads alternating with a numpy array's and a dict's (the choice made anew each
    time), give the array its first read gave; so do the other types' reads."""
    obj = producers()[producer]()
    others = [numpy.arange(6, dtype=numpy.float64), cai_dict()]

    def read(argument):
        return fields(cai.from_object(argument, sync=False, allow_host=True, pointer_check=NEVER))

    first = read(obj)
    firsts = [read(other) for other in others]
    assert [read(obj) for _ in range(3)] == [first] * 3
    for _ in range(3):
        for other, expected in zip(others, firsts):
            assert read(other) == expected
            assert read(obj) == first


BAD_CALLS = {
    "no argument": lambda f, a: f(),
    "too many positional": lambda f, a: f(a, None, None, False, None, False, 7),
    "far too many positional": lambda f, a: f(*[a] * 20),
    "unknown keyword": lambda f, a: f(a, foo=1),
    "unknown keyword after known ones": lambda f, a: f(a, sync=False, bar=2),
    "unknown keyword of a built name": lambda f, a: f(a, **{"".join(["sy", "nc_"]): 1}),
    "obj twice": lambda f, a: f(a, obj=a),
    "stream twice": lambda f, a: f(a, None, sync=False, stream=None),
    "allow_host twice": lambda f, a: f(a, None, None, False, None, True, allow_host=True),
    "missing obj, keywords given": lambda f, a: f(stream=None, sync=False),
    "writable not a bool": lambda f, a: f(a, writable=3),
    "writable None": lambda f, a: f(a, writable=None),
    "allow_host not a bool": lambda f, a: f(a, allow_host="x"),
    "allow_host by position not a bool": lambda f, a: f(a, None, None, False, None, 1.5),
    "sync wrong": lambda f, a: f(a, sync="x"),
    "stream wrong": lambda f, a: f(a, stream="x"),
    "pointer_check wrong type": lambda f, a: f(a, pointer_check="x"),
    "pointer_check out of range": lambda f, a: f(a, pointer_check=2**40),
    "writable and sync both wrong": lambda f, a: f(a, sync="x", writable=3),
    "obj no array": lambda f, a: f(object(), sync=False),
    "host refused": lambda f, a: f(a, sync=False),
}


def outcome(call):
    try:
        call()
    except Exception as error:
        cause = error.__cause__
        return type(error), str(error).replace("_from_object_reference", "from_object"), type(cause)
    return None


@pytest.mark.parametrize("case", list(BAD_CALLS))
def test_each_wrong_call_raises_what_the_oracle_raises_word_for_word_fake_driver(case):
    a = numpy.zeros(3, numpy.float32)
    expected = outcome(lambda: BAD_CALLS[case](REFERENCE, a))
    assert expected is not None, "the oracle took it: no wrong call"
    assert outcome(lambda: BAD_CALLS[case](cai.from_object, a)) == expected


def test_the_argument_errors_keep_pyo3s_words_fake_driver():
    # Recorded from the PyO3-generated entry before it was replaced: the words users saw.
    a = numpy.zeros(3, numpy.float32)
    recorded = {
        "no argument": "from_object() missing 1 required positional argument: 'obj'",
        "too many positional": "from_object() takes from 1 to 6 positional arguments but 7 were given",
        "unknown keyword": "from_object() got an unexpected keyword argument 'foo'",
        "obj twice": "from_object() got multiple values for argument 'obj'",
        "stream twice": "from_object() got multiple values for argument 'stream'",
        "writable not a bool": "argument 'writable': 'int' object is not an instance of 'bool'",
        "writable None": "argument 'writable': 'None' is not an instance of 'bool'",
        "allow_host not a bool": "argument 'allow_host': 'str' object is not an instance of 'bool'",
    }
    for case, words in recorded.items():
        assert outcome(lambda: BAD_CALLS[case](cai.from_object, a)) == (TypeError, words, type(None)), case


def test_signature_docstring_and_names_are_the_old_ones():
    assert str(inspect.signature(cai.from_object)) == SIGNATURE
    assert cai.from_object.__text_signature__ == SIGNATURE
    assert cai.from_object.__doc__ == REFERENCE.__doc__.split("\n\n`cai.from_object` is entry/from_object.rs")[0]
    assert cai.from_object.__doc__.startswith("Imports `obj.__cuda_array_interface__`")
    assert (cai.from_object.__name__, cai.from_object.__module__) == ("from_object", "cai._native")


def test_a_numpy_bool_is_taken_for_writable_and_allow_host_as_before_fake_driver():
    a = numpy.zeros(3, numpy.float32)
    got = cai.from_object(a, allow_host=numpy.bool_(True), writable=numpy.bool_(True), sync=False)
    expected = REFERENCE(a, allow_host=numpy.bool_(True), writable=numpy.bool_(True), sync=False)
    assert fields(got) == fields(expected)
    assert got.readonly is False


class Sentinel:
    pass


def test_an_error_dropped_inside_the_call_releases_what_it_held_at_once_fake_driver():
    """A miss the body clears (the stream's `__cuda_stream__` lookup raising AttributeError)
    holds a reference; it must be let go of before the call returns, not wait in PyO3's
    deferred pool for a later entry (the entry runs its body attached in PyO3's count)."""
    held = Sentinel()
    watch = weakref.ref(held)

    box = [held]
    del held

    class Stream:
        def __getattr__(self, name):
            raise AttributeError(name, box.pop() if box else None)

    stream = Stream()
    with pytest.raises(TypeError, match="stream must be None, an int or a stream object"):
        cai.from_object(numpy.zeros(3, numpy.float32), stream=stream, allow_host=True)
    assert not box, "the call never looked the stream's attributes up"
    assert watch() is None


def test_the_array_keeps_its_producer_and_lets_go_of_it_when_dropped_fake_driver():
    obj = numpy.zeros(3, numpy.float32)
    watch = weakref.ref(obj)
    array = cai.from_object(obj, sync=False, allow_host=True, pointer_check=NEVER)
    del obj
    gc.collect()
    assert watch() is not None
    del array
    gc.collect()
    assert watch() is None


def test_a_call_while_the_interpreter_exits_takes_the_array_without_a_crash_fake_driver():
    """A `__del__` run by the interpreter's exit calls cai.from_object (where PyO3 may refuse
    to attach, the entry runs its body all the same)."""
    code = """if True:
        import numpy, cai

        class AtExit:
            def __del__(self):
                a = cai.from_object(numpy.zeros(3, numpy.float32), sync=False, allow_host=True)
                print("took", a.shape, flush=True)

        keep = AtExit()
    """
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "took (3,)" in done.stdout


def assert_reads_keep_counts(obj, watched):
    """2,000 reads of `obj` (from the second on, the entry runs uncounted) leave the reference
    counts of `watched` where they were: nothing waits in PyO3's pool of deferred drops."""
    for _ in range(3):
        cai.from_object(obj, sync=False, allow_host=True, pointer_check=NEVER)
    before = [sys.getrefcount(x) for x in watched]
    for _ in range(2000):
        cai.from_object(obj, sync=False, allow_host=True, pointer_check=NEVER)
    assert [sys.getrefcount(x) for x in watched] == before


def test_dicts_read_without_pyo3s_count_keep_reference_counts_fake_driver(fake):
    """A CAI dict, given itself or by an object's `__cuda_array_interface__`, is read by an
    audited path: from the second call on the entry runs without PyO3's count of the thread.
    2,000 such calls leave the dict's, its values' and the object's reference counts where they
    were (nothing waits in PyO3's pool)."""
    shape, data = (4,), (fake.alloc(16), False)
    interface = {"shape": shape, "typestr": "<f4", "data": data, "version": 3}

    class Producer:
        __cuda_array_interface__ = interface

    producer = Producer()
    for obj in (interface, producer):
        assert_reads_keep_counts(obj, (interface, shape, data, producer))


def test_an_instance_its_types_mark_did_not_foresee_lets_go_of_what_its_path_dropped_fake_driver(fake):
    """The entry runs uncounted on a type whose last read here was its CAI dict. An instance of
    it without the interface (the property raises AttributeError) is taken by `__dlpack__`,
    whose retries for a producer refusing `max_version` drop its TypeErrors: every error, and what
    they hold, are let go of before the call returns, not kept in PyO3's pool for a later
    entry (the entry attaches once after an unaudited path)."""
    Producer, held, watches = diverging_producer(fake.alloc(16))
    for _ in range(2):  # the type's facts found, then read by its dict (marked)
        cai.from_object(Producer(True), sync=False, pointer_check=NEVER)
    taken = cai.from_object(Producer(False), sync=False, allow_host=True)
    assert not held, "the property was asked once, __dlpack__ once with each newer keyword set"
    assert [watch() for watch in watches] == [None] * 3
    assert taken.shape == (4,)


def test_dlpack_producers_read_without_pyo3s_count_let_go_at_once_fake_driver():
    """A type read by `__dlpack__` is audited once its facts are settled: from then on the
    entry runs without PyO3's count of the thread. 2,000 reads of an object with only
    `__dlpack__` and `__dlpack_device__` (over a numpy array), and of the numpy array itself
    (read by its fields: read/numpy.rs), leave both counts where they were; a producer from
    before DLPack 1.0, which refuses `max_version` with a TypeError holding an object, has that
    object let go of before the call returns (the retry clears the error where it is raised,
    not in PyO3's deferred pool), on every call."""
    values = numpy.arange(4, dtype=numpy.float32)

    class DLPackOnly:
        def __dlpack__(self, **arguments):
            return values.__dlpack__(**arguments)

        def __dlpack_device__(self):
            return values.__dlpack_device__()

    proxy = DLPackOnly()
    for obj in (proxy, values):
        assert_reads_keep_counts(obj, (values, proxy))

    watches = []

    class BeforeDLPack1:
        def __dlpack__(self, stream=None, **newer):
            if newer:
                held = Sentinel()
                watches.append(weakref.ref(held))
                raise TypeError("a producer from before DLPack 1.0", held)
            return values.__dlpack__(stream=stream)

        def __dlpack_device__(self):
            return (1, 0)

    producer = BeforeDLPack1()
    for call in range(5):
        taken = cai.from_object(producer, sync=False, allow_host=True, pointer_check=NEVER)
        assert [watch() for watch in watches] == [None] * len(watches), (
            f"call {call}: a TypeError's object outlived the call")
        assert taken.shape == (4,)
    assert len(watches) == 2 * 5, "refused once for each newer keyword set, on every call"


def test_cai_arrays_read_without_pyo3s_count_end_their_exports_fake_driver():
    """A cai.Array given as input is read by an audited path (its struct, one export counted):
    from the second call on the entry runs without PyO3's count of the thread, and the export's
    end runs where the reading Array is dropped, without an attach of its own. 2,000 reads leave
    the source's count where it was; while one read is alive the source refuses release()
    (one export), and once it is gone release() succeeds (every export ended); the released
    source is then refused by the same entry, its count unchanged."""
    source = cai.from_object(numpy.arange(4, dtype=numpy.float32), sync=False, allow_host=True)
    assert_reads_keep_counts(source, (source,))
    before = sys.getrefcount(source)
    alive = cai.from_object(source, sync=False, allow_host=True, pointer_check=NEVER)
    assert alive.owner is source
    with pytest.raises(BufferError, match=r"1 DLPack export\(s\)"):
        source.release()
    del alive
    source.release()
    for _ in range(3):
        with pytest.raises(ValueError, match="was released"):
            cai.from_object(source, sync=False, allow_host=True, pointer_check=NEVER)
    assert sys.getrefcount(source) == before


def test_a_host_cai_array_refused_for_host_memory_ends_its_export_fake_driver():
    """A cai.Array of host memory (taken with allow_host) read without allow_host is refused
    after its export began (the released check first): the refusal ends that export itself, so
    the source's count is back where it was and release() succeeds; both entries refuse it in
    the same words, and a released source is refused as released, not as host memory."""
    source = cai.from_object(numpy.arange(4, dtype=numpy.float32), sync=False, allow_host=True)
    before = sys.getrefcount(source)
    refusals = set()
    for entry in (cai.from_object, REFERENCE):
        for _ in range(3):
            with pytest.raises(cai.CaiError, match="host memory") as refused:
                entry(source, sync=False, pointer_check=NEVER)
            refusals.add(str(refused.value).replace("_from_object_reference", "from_object"))
    assert len(refusals) == 1
    assert sys.getrefcount(source) == before
    source.release()  # no export left alive
    with pytest.raises(ValueError, match="was released"):
        cai.from_object(source, sync=False, pointer_check=NEVER)


def test_an_array_read_after_a_higher_rank_one_describes_only_its_own_fake_driver():
    """Structs are reused without zeroing their extents (cai.h: never read past the rank): a
    1-D array read after a 4-D strided one has its own shape and the one stride numpy gave,
    from Python and from its DLPack export, and so does a cai.Array of it read as input."""
    big = numpy.zeros((2, 6, 4, 5), numpy.float32)[:, ::2]
    small = numpy.arange(3, dtype=numpy.float32)
    for _ in range(3):
        del_me = cai.from_object(big, sync=False, allow_host=True, pointer_check=NEVER)
        assert del_me.strides is not None
        del del_me
        taken = cai.from_object(small, sync=False, allow_host=True, pointer_check=NEVER)
        assert (taken.shape, taken.strides) == ((3,), (4,))
        assert numpy.from_dlpack(taken).tolist() == [0.0, 1.0, 2.0]
        # A cai.Array read as input: its struct copied as far as defined into a reused one.
        big_array = cai.from_object(big, sync=False, allow_host=True, pointer_check=NEVER)
        del_me = cai.from_object(big_array, sync=False, allow_host=True, pointer_check=NEVER)
        del del_me, big_array
        again = cai.from_object(taken, sync=False, allow_host=True, pointer_check=NEVER)
        assert (again.shape, again.strides, again.owner) == ((3,), (4,), taken)
        assert numpy.from_dlpack(again).tolist() == [0.0, 1.0, 2.0]
        del again, taken
