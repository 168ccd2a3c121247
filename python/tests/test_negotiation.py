"""docs/conformance.md row 67: the protocol chosen by what the type is, never by what earlier
instances of it did. An object whose `__cuda_array_interface__` raises while it offers
`__dlpack__` is taken by DLPack, on every read; jax's arrays, known by their type, are asked
their device first, so that a host one never pays for its raising interface."""

import numpy
import pytest

import cai
from conftest import answering_metaclasses


class JaxLike:
    """Like a jax array: the interface on a device instance only (with a mask here, which only
    the interface can say), DLPack on every instance. Counts the property's calls."""

    interface_calls = 0
    device_calls = 0

    def __init__(self, host=None, interface=None):
        self.host, self.interface = host, interface

    @property
    def __cuda_array_interface__(self):
        type(self).interface_calls += 1
        if self.interface is None:
            raise AttributeError("a CPU array has no __cuda_array_interface__")
        return self.interface

    def __dlpack__(self, **kwargs):
        if self.host is None:
            raise BufferError("this test's device instances answer by the interface only")
        return self.host.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        type(self).device_calls += 1
        return (1, 0) if self.host is not None else (2, 0)


def fresh_type():
    """A new JaxLike type per test, with counts of its own."""
    return type("JaxLike", (JaxLike,), {"interface_calls": 0, "device_calls": 0})


def test_row_67_host_instances_whose_interface_raises_are_taken_by_dlpack_on_every_read_fake_driver(fake):
    kind = fresh_type()
    hosts = [numpy.arange(4.0) + i for i in range(5)]
    for host in hosts:
        made = cai.from_object(kind(host=host), allow_host=True)
        assert made.data_ptr == host.ctypes.data and made.shape == (4,)
    assert kind.interface_calls == 5, "the interface is asked of every instance: nothing is learned"


def test_row_67_an_instance_is_read_as_a_fresh_types_would_be_whatever_its_type_read_before_fake_driver(fake):
    """The answer for an instance depends on the instance and its type as they are, never on
    what earlier instances did: after host instances whose interface raised, an instance with
    both an interface and a host tensor is read by its interface, as on a type never read, with
    every option (no sync, a consumer stream, a view)."""
    data = fake.alloc(64)
    mask = {"shape": (4,), "typestr": "|b1", "data": (data + 32, False), "version": 3}
    interface = {"shape": (4,), "typestr": "<f4", "data": (data, False), "version": 3, "mask": mask}
    for options in [{"sync": False}, {}, {"stream": 7}]:
        used = fresh_type()
        for _ in range(3):
            cai.from_object(used(host=numpy.arange(4.0)), allow_host=True, **options)
        both = dict(host=numpy.arange(4.0), interface=interface)
        made, expected = (cai.from_object(kind(**both), allow_host=True, **options) for kind in (used, fresh_type()))
        assert made.data_ptr == expected.data_ptr == data, options
        assert made.mask is not None and made.mask.data_ptr == data + 32, options


def test_row_67_a_device_instance_is_read_by_its_interface_fake_driver(fake):
    kind = fresh_type()
    cai.from_object(kind(host=numpy.arange(4.0)), allow_host=True)
    data = fake.alloc(64)
    mask = {"shape": (4,), "typestr": "|b1", "data": (data + 32, False), "version": 3}
    interface = {"shape": (4,), "typestr": "<f4", "data": (data, False), "version": 3, "mask": mask}
    made = cai.from_object(kind(interface=interface))
    assert made.data_ptr == data and made.mask is not None and made.mask.data_ptr == data + 32


def test_row_67_a_host_instance_without_allow_host_is_refused_fake_driver(fake):
    kind = fresh_type()
    cai.from_object(kind(host=numpy.arange(4.0)), allow_host=True)
    with pytest.raises(cai.CaiError, match="allow_host=True") as refused:
        cai.from_object(kind(host=numpy.arange(4.0)))
    assert refused.value.status == "CAI_ERROR_HOST_MEMORY"


class Wraps:
    """A DLPack producer over a numpy array or a cai.Array, with no instance dict (as numpy's
    arrays: no instance can have `__cuda_array_interface__`); counts its `__dlpack_device__`
    calls."""

    __slots__ = ("inner",)
    device_calls = 0

    def __init__(self, inner):
        self.inner = inner

    def __dlpack__(self, **kwargs):
        return self.inner.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        type(self).device_calls += 1
        return self.inner.__dlpack_device__()


def test_a_dlpack_producer_is_asked_its_device_on_every_read_without_sync_fake_driver(fake):
    """Without sync, `__dlpack__`'s stream argument depends on the device (-1 for a device,
    None for the host), so every read asks it: what a type's earlier tensors were decides
    nothing."""
    kind = type("Wraps", (Wraps,), {"device_calls": 0, "__slots__": ()})
    for i in range(4):
        host = numpy.arange(4.0) + i
        assert cai.from_object(kind(host), sync=False, allow_host=True).data_ptr == host.ctypes.data
    assert kind.device_calls == 4
    device = cai.from_object({"shape": (4,), "typestr": "<f4", "data": (fake.alloc(64), False), "version": 3})
    made = cai.from_object(kind(device), sync=False)
    assert made.data_ptr == device.data_ptr and made.__dlpack_device__() == (2, 0)


def test_a_class_given_the_interface_after_libcai_first_read_it_is_read_by_it_from_python_and_c_fake_driver(
        fake, offer_ext):
    """What libcai finds of a type is kept per type, but a class Python can still change (one not
    flagged immutable, as every class a `class` statement makes) is never taken to lack
    `__cuda_array_interface__`. Given the property after libcai first saw it, a slotted class is
    read by it: one that offered nothing, refused before, from Python and from C; one read by
    `__dlpack__` before, by the interface now, with the mask only the interface can say."""
    data = fake.alloc(64)
    mask = {"shape": (4,), "typestr": "|b1", "data": (data + 32, False), "version": 3}
    interface = {"shape": (4,), "typestr": "<f4", "data": (data, False), "version": 3}

    class Bare:
        __slots__ = ()

    with pytest.raises(TypeError, match="has neither"):
        cai.from_object(Bare(), sync=False)
    with pytest.raises(TypeError, match="has neither"):
        offer_ext.view(Bare())
    Bare.__cuda_array_interface__ = property(lambda self: interface)
    assert cai.from_object(Bare(), sync=False).data_ptr == data
    assert offer_ext.view(Bare())["data"] == data

    kind = type("Wraps", (Wraps,), {"device_calls": 0, "__slots__": ()})
    device = cai.from_object(interface)
    assert cai.from_object(kind(device), sync=False).mask is None
    kind.__cuda_array_interface__ = property(lambda self: dict(interface, mask=mask))
    made = cai.from_object(kind(device), sync=False)
    assert made.mask is not None and made.mask.data_ptr == data + 32


def test_a_class_that_loses_dlpack_after_libcai_read_it_is_refused_as_one_without_it_no_driver():
    """Whether a type has `__dlpack__` is kept per type too: once its class loses the method (and
    `__dlpack_device__` with it), an instance is refused as an object with neither protocol,
    the refusal a type found without them gets, never with an AttributeError or the word that
    it has `__dlpack__`; given the method again, it is read by it."""
    methods = {name: getattr(Wraps, name) for name in ("__init__", "__dlpack__", "__dlpack_device__")}
    refused = "it has neither '__cuda_array_interface__' nor '__dlpack__'"
    for instance_dict in [False, True]:
        kind = type("Wraps", (), {**methods, "device_calls": 0, **({} if instance_dict else {"__slots__": ("inner",)})})
        host = numpy.arange(4.0)
        for _ in range(2):
            assert cai.from_object(kind(host), sync=False, allow_host=True).data_ptr == host.ctypes.data
        del kind.__dlpack__
        for _ in range(2):
            with pytest.raises(TypeError, match=refused):
                cai.from_object(kind(host), sync=False, allow_host=True)
        del kind.__dlpack_device__
        with pytest.raises(TypeError, match=refused):
            cai.from_object(kind(host), sync=False, allow_host=True)
        kind.__dlpack__, kind.__dlpack_device__ = methods["__dlpack__"], methods["__dlpack_device__"]
        assert cai.from_object(kind(host), sync=False, allow_host=True).data_ptr == host.ctypes.data


def test_a_type_whose_metaclass_hides_its_mro_is_read_as_a_changeable_class_no_driver():
    """Whether a type's classes can change is read from the MRO CPython keeps, not from a
    metaclass's own `__mro__` or `__dict__` (one that raises, or gives no classes): a class
    statement's class is changeable (asked for the interface), and neither a panic nor the
    metaclass's error comes out of a read."""
    host = numpy.arange(4.0)
    interface = {"shape": (2,), "typestr": "<f8", "data": (host.ctypes.data, False), "version": 3}
    for _, meta in answering_metaclasses():
        producer = meta("Producer", (), {"__slots__": (), "__dlpack__": lambda self, **kw: host.__dlpack__(**kw),
                                         "__dlpack_device__": lambda self: host.__dlpack_device__()})
        assert cai.from_object(producer(), sync=False, allow_host=True).data_ptr == host.ctypes.data
        bare = meta("Bare", (), {"__slots__": ()})
        with pytest.raises(TypeError, match="it has neither"):
            cai.from_object(bare(), sync=False, allow_host=True)
        bare.__cuda_array_interface__ = property(lambda self: interface)
        made = cai.from_object(bare(), sync=False, allow_host=True, pointer_check=cai.POINTER_CHECK_NEVER)
        assert made.shape == (2,) and made.data_ptr == host.ctypes.data


def test_a_refusal_names_the_class_by_its_own_name_whatever_its_metaclass_answers_no_driver():
    """A message names a type by the name CPython keeps for it: a metaclass's own `__name__`,
    `__mro__` or `__dict__` (raising, or giving no str) neither renames it nor replaces the
    refusal with the metaclass's error."""
    for _, meta in answering_metaclasses():
        bare = meta("Bare", (), {})
        with pytest.raises(TypeError, match="not a 'Bare' \\(it has neither"):
            cai.from_object(bare(), sync=False, allow_host=True)
        wrong = meta("Wrong", (), {"__c_dlpack_exchange_api__": "0x10", "__dlpack__": lambda self, **kw: None})
        with pytest.raises(TypeError, match=r"^Wrong.__c_dlpack_exchange_api__ must be an int .*, not str$"):
            cai.from_object(wrong(), sync=False, allow_host=True)


def test_any_changes_to_a_class_between_reads_read_as_a_class_made_as_it_is_now_no_driver():
    """What libcai keeps per type against what Python lets a class become. A class is changed
    at random between reads (its interface given, raising or taken away; `__dlpack__` given with
    either signature, with `__dlpack_device__`, or taken away; with or without `__slots__`, under
    a metaclass that hides its MRO or none) and read after each change; a class made fresh in
    the same state is read once beside it. Every protocol describes the same host array, so
    whichever route what libcai learned of the changed class takes, both reads give the same
    answer: the same array, or the same refusal, word for word."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    values = numpy.arange(8, dtype=numpy.float32)
    interface = {"shape": (8,), "typestr": "<f4", "data": (values.ctypes.data, False), "version": 3}

    def raising(self):
        raise AttributeError("no interface on this instance")

    interfaces = {"none": None, "valid": property(lambda self: interface), "raising": property(raising)}
    dlpacks = {"none": None, "keywords": lambda self, **kw: values.__dlpack__(**kw),
               "stream only": lambda self, stream=None: values.__dlpack__(stream=stream)}
    hiding = answering_metaclasses()[0][1]

    def attributes(state):
        interface_kind, dlpack_kind = state
        dlpack = dlpacks[dlpack_kind]
        return {"__cuda_array_interface__": interfaces[interface_kind], "__dlpack__": dlpack,
                "__dlpack_device__": dlpack and (lambda self: values.__dlpack_device__())}

    def outcome(kind):
        try:
            made = cai.from_object(kind(), sync=False, allow_host=True, pointer_check=cai.POINTER_CHECK_NEVER)
        except Exception as error:  # noqa: BLE001 (the refusal itself is compared)
            return type(error).__name__, str(error)
        return made.shape, made.typestr, made.data_ptr == values.ctypes.data, made.readonly

    states = st.tuples(st.sampled_from(sorted(interfaces)), st.sampled_from(sorted(dlpacks)))

    @settings(max_examples=150, database=None, deadline=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(st.booleans(), st.booleans(), st.lists(states, min_size=1, max_size=6))
    def check(slots, hides_mro, changes):
        meta = hiding if hides_mro else type
        namespace = {"__slots__": ()} if slots else {}
        changed = meta("K", (), dict(namespace))
        for state in changes:
            for name, value in attributes(state).items():
                if value is not None:
                    setattr(changed, name, value)
                elif name in changed.__dict__:
                    delattr(changed, name)
            fresh = meta("K", (), {**namespace, **{n: v for n, v in attributes(state).items() if v is not None}})
            assert outcome(changed) == outcome(fresh), (slots, hides_mro, changes, state)

    check()
