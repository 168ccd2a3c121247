"""docs/conformance.md "Bad input from Python": objects that run code while they are read (keys whose
__eq__ mutates the dict, __index__ that changes the list it sits in, lying __len__, raising
properties, huge ints, mask cycles, huge descrs) give a clean exception or a result the object
really held, never a crash. Pure: no driver is asked (sync=False, pointer_check=NEVER)."""

import gc

import pytest

import cai
from conftest import outcome_of

PTR = 0x10000


def plain(**extra):
    d = {"shape": (2, 3), "typestr": "<f4", "data": (PTR, False), "version": 3}
    d.update(extra)
    return d


def imported(d):
    return cai.from_object(d, sync=False, pointer_check=cai.POINTER_CHECK_NEVER)


class Producer:
    def __init__(self, d):
        self.__cuda_array_interface__ = d


class MutatingKey:
    """A key that collides with "mask" and, when compared, rewrites the dict it sits in."""

    def __init__(self, target, mutate):
        self.target, self.mutate, self.calls = target, mutate, 0

    def __hash__(self):
        return hash("mask")

    def __eq__(self, other):
        self.calls += 1
        self.mutate(self.target)
        gc.collect()
        return False


@pytest.mark.parametrize("mutate", [
    lambda d: d.__setitem__("shape", (6,)),
    lambda d: d.__setitem__("shape", [7, 8, 9]),
    lambda d: d.pop("shape", None),
    lambda d: d.clear(),
    lambda d: d.__setitem__("data", (0, False)),
    lambda d: d.update({"typestr": "<i8", "strides": (24, 8)}),
], ids=["replace-shape", "list-shape", "delete-shape", "clear", "null-data", "typestr-and-strides"])
@pytest.mark.parametrize("entry", [cai.validate, imported], ids=["validate", "from_object"])
def test_a_key_whose_eq_rewrites_the_dict_gives_a_held_result_or_a_clean_error(mutate, entry):
    d = plain()
    held_shapes = {(2, 3), (6,), (7, 8, 9)}
    key = MutatingKey(d, mutate)
    d[key] = "x"
    try:
        result = entry(d)
    except cai.CaiError as error:
        assert error.status.startswith("CAI_ERROR_")
    else:
        assert result is None or result.shape in held_shapes
    assert key.calls > 0, "the lookup ran the key's __eq__"


def test_str_subclass_keys_that_run_code_are_safe():
    class Key(str):
        def __hash__(self):
            return hash("shape")

        def __eq__(self, other):
            d.clear()
            return False

    d = plain()
    d[Key("other")] = 1
    for entry in (cai.validate, imported):
        d.update(plain())
        try:
            result = entry(d)
        except cai.CaiError as error:
            assert error.status in ("CAI_ERROR_INVALID_VERSION", "CAI_ERROR_INVALID_SHAPE",
                                    "CAI_ERROR_INVALID_TYPESTR", "CAI_ERROR_INVALID_DATA"), str(error)
        else:
            assert result is None or result.shape == (2, 3)


class Index:
    """An integer-like object whose __index__ runs code first."""

    def __init__(self, value, effect=lambda: None):
        self.value, self.effect = value, effect

    def __index__(self):
        self.effect()
        gc.collect()
        return self.value


def test_index_that_empties_the_list_it_sits_in_reads_the_list_as_it_was():
    shape = [2, 0, 3]
    shape[1] = Index(4, lambda: shape.clear())
    a = imported(plain(shape=shape))
    assert a.shape == (2, 4, 3)


def test_index_that_rewrites_the_dict_keeps_the_values_read():
    d = plain()
    d["shape"] = (Index(5, lambda: d.update(shape=(1,), typestr="<i2")),)
    a = imported(d)
    assert (a.shape, a.typestr) in {((5,), "<f4"), ((1,), "<i2")}


@pytest.mark.parametrize("key", ["version", "shape", "strides", "data", "stream"])
def test_index_that_raises_is_a_clean_error(key):
    def boom():
        raise RuntimeError("boom")

    values = {"version": Index(3, boom), "shape": (Index(2, boom), 3), "strides": (12, Index(4, boom)),
              "data": (Index(PTR, boom), False), "stream": Index(5, boom)}
    with pytest.raises(cai.CaiError):
        cai.validate(plain(**{key: values[key]}))


def test_numpy_style_integers_are_integers():
    a = imported(plain(shape=(Index(2), Index(3)), version=Index(3), data=(Index(PTR), False)))
    assert a.shape == (2, 3) and a.data_ptr == PTR


def test_lying_len_and_getitem_are_never_used():
    class Lying(list):
        def __len__(self):
            return 10**12

        def __getitem__(self, i):
            raise RuntimeError("never called")

        def __iter__(self):
            raise RuntimeError("never called")

    class LyingTuple(tuple):
        def __len__(self):
            return 10**12

        def __getitem__(self, i):
            return 99

    assert imported(plain(shape=Lying([2, 3]))).shape == (2, 3)
    assert imported(plain(shape=LyingTuple((2, 3)))).shape == (2, 3)


def test_a_raising_interface_property_propagates_its_own_exception():
    class Broken:
        @property
        def __cuda_array_interface__(self):
            raise KeyError("producer failed")

    with pytest.raises(KeyError, match="producer failed"):
        cai.from_object(Broken())


@pytest.mark.parametrize("key,value,status", [
    ("version", 2**200, "CAI_ERROR_INVALID_VERSION"),
    ("shape", (2**200,), "CAI_ERROR_OVERFLOW"),
    ("shape", (-(2**200),), "CAI_ERROR_INVALID_SHAPE"),
    ("shape", (-(2**64),), "CAI_ERROR_INVALID_SHAPE"),
    ("strides", (4, -(2**200)), "CAI_ERROR_OVERFLOW"),
    ("data", (2**200, False), "CAI_ERROR_INVALID_DATA"),
    ("data", (-(2**200), False), "CAI_ERROR_INVALID_DATA"),
    ("stream", 2**200, "CAI_ERROR_INVALID_STREAM"),
])
def test_huge_integers_are_clean_errors(key, value, status):
    with pytest.raises(cai.CaiError) as info:
        cai.validate(plain(**{key: value}))
    assert info.value.status == status, str(info.value)


def test_messages_quote_a_bounded_prefix():
    for d in (plain(typestr="<" + "f" * 10**6), plain(shape=("x" * 10**6,)), plain(version="9" * 10**6),
              plain(descr=[("a" * 10**6, "<f4")])):
        with pytest.raises(cai.CaiError) as info:
            cai.validate(d)
        assert len(str(info.value)) < 400, str(info.value)[:500]


def test_values_whose_repr_raises_are_named_by_type():
    class NoRepr:
        def __repr__(self):
            raise RuntimeError("repr must not be called")

    with pytest.raises(cai.CaiError, match="NoRepr"):
        cai.validate(plain(version=NoRepr()))
    with pytest.raises(cai.CaiError, match="INVALID_MASK.*NoRepr"):
        cai.validate(plain(mask=NoRepr()))


def test_a_mask_that_is_its_own_mask_is_refused():
    producer = Producer(None)
    producer.__cuda_array_interface__ = plain(typestr="|b1", mask=producer)
    with pytest.raises(cai.CaiError, match="INVALID_MASK.*deeper"):
        cai.validate(producer)


def test_mask_chains_are_bounded_before_they_are_read():
    reads = []

    class Chain:
        def __init__(self, depth):
            self.depth = depth

        @property
        def __cuda_array_interface__(self):
            reads.append(self.depth)
            return plain(typestr="|b1", mask=Chain(self.depth + 1))

    with pytest.raises(cai.CaiError, match="INVALID_MASK"):
        cai.validate(Chain(0))
    assert max(reads) == 4, "CAI_MAX_MASK_DEPTH masks are read, the next one is not"

    masks = None
    for _ in range(4):
        masks = Producer(plain(typestr="|b1", mask=masks))
    cai.validate(plain(mask=masks))  # a chain of CAI_MAX_MASK_DEPTH masks is accepted


def test_descrs_are_linear_and_bounded():
    n = 60_000
    names = [f"f{i}" for i in range(n)]
    a = imported(plain(shape=(1,), typestr=f"|V{n}", descr=[(name, "|u1") for name in names]))
    assert len(a.__cuda_array_interface__["descr"]) == n
    with pytest.raises(cai.CaiError, match="repeats"):
        cai.validate(plain(shape=(1,), typestr=f"|V{n}", descr=[(name, "|u1") for name in names[:-1] + ["f0"]]))
    with pytest.raises(cai.CaiError, match="at most 65536"):
        cai.validate(plain(shape=(1,), typestr="|V70000", descr=[("", "|u1")] * 70_000))


def test_descr_entries_that_are_lists_and_titles():
    a = imported(plain(typestr="|V8", descr=[[("title", "x"), "<f4"], ["y", "<f4"]]))
    assert a.__cuda_array_interface__["descr"] == [("x", "<f4"), ("y", "<f4")]


@pytest.mark.parametrize("typestr, entry", [
    ("<f4", ("", "<f4")),                  # numpy's default: the typestr restated
    ("<f4", ("", "<i4")),                  # one unnamed field of another type
    ("<f4", ("x", "<f4")),                 # one named field
    ("<f4", (("title", "x"), "<f4")),      # a (title, name) pair
    ("<f4", (("title", ["x"]), "<f4")),    # a pair holding a list
    ("<f4", ("", ["<f4"])),                # a list for the field's typestr
    ("<f4", ("", "<f4", (2,))),            # a subarray shape
    ("<f4", ("",)),                        # no typestr
    ("|V8", ("x", "<f4")),                 # fewer bytes than the item
])
def test_a_one_entry_descr_reads_as_the_general_reading_does(typestr, entry):
    """A descr of one tuple entry is read straight from the entry; the same entry as a list
    (the general reading, through tuple copies) gives the same array or the same error, the
    descr a list or a tuple."""
    def read(descr):
        d = plain(typestr=typestr, descr=descr)
        return outcome_of(lambda: imported(d).__cuda_array_interface__)

    general = read([list(entry)])
    assert read([entry]) == general
    assert read((entry,)) == general


def test_dict_subclasses_are_read_as_dicts():
    class Sub(dict):
        def __getitem__(self, key):
            raise RuntimeError("not called")

        def get(self, key, default=None):
            raise RuntimeError("not called")

    assert imported(Sub(plain())).shape == (2, 3)


class TupleSub(tuple):
    pass


class ListSub(list):
    pass


class IntSub(int):
    pass


class StrSub(str):
    pass


class DictSub(dict):
    pass


def as_builtin(value):
    """`value` with every subclass of list, tuple, int or str made its base."""
    for base in (bool, int, str):
        if isinstance(value, base):
            return base(value)
    if isinstance(value, (list, tuple)):
        return (list if isinstance(value, list) else tuple)(as_builtin(item) for item in value)
    return value


@pytest.mark.parametrize("key,value", [
    ("shape", TupleSub((2, 3))), ("shape", ListSub([2, 3])),
    ("data", TupleSub((PTR, False))), ("data", ListSub([PTR, False])),
    ("strides", TupleSub((12, 4))), ("strides", ListSub([12, 4])),
    ("descr", ListSub([TupleSub(("", "<f4"))])), ("descr", TupleSub((("", "<f4"),))),
    ("descr", ListSub([ListSub(["", "<f4"])])), ("descr", [TupleSub((TupleSub(("t", "x")), "<f4"))]),
    ("typestr", StrSub("<f4")), ("version", IntSub(3)), ("stream", IntSub(7)),
])
@pytest.mark.parametrize("holder", [lambda d: d, DictSub, Producer, lambda d: Producer(DictSub(d))],
                         ids=["dict", "dict-subclass", "property", "property-dict-subclass"])
def test_subclasses_of_the_builtin_values_are_read_as_their_bases(key, value, holder):
    """The reader tells what a dict holds by exact types first (no call for the type's flags);
    a subclass of list, tuple, int, str or dict anywhere takes the general check and reads as
    its base would."""
    base = {"shape": (2, 3), "data": (PTR, False), "strides": (12, 4), "typestr": "<f4", "version": 3,
            "stream": 7}
    expected = outcome_of(lambda: imported({**base, key: as_builtin(value)}).__cuda_array_interface__)
    assert isinstance(expected, dict), expected
    assert outcome_of(lambda: imported(holder({**base, key: value})).__cuda_array_interface__) == expected


def test_a_dict_subclass_that_is_also_a_dlpack_producer_is_read_as_a_dict():
    """A dict is told by its type's facts once the type is known: the dict still comes first."""
    class Both(dict):
        def __dlpack__(self, **keywords):
            raise AssertionError("not called")

        def __dlpack_device__(self):
            raise AssertionError("not called")

    for _ in range(3):  # the type's facts found, then remembered
        assert imported(Both(plain())).shape == (2, 3)


def test_a_dict_subclass_whose_metaclass_raises_on_lookups_is_read_as_a_dict():
    """A dict comes first, before anything is looked up on its type: a type whose attribute
    lookups raise (its metaclass's) does not keep its dict instances from being read."""
    class Raising(type):
        def __getattribute__(cls, name):
            if name.startswith("__") and name not in ("__mro__", "__dict__", "__name__", "__qualname__"):
                raise RuntimeError(f"the metaclass refuses {name}")
            return super().__getattribute__(name)

    class Hostile(dict, metaclass=Raising):
        pass

    for _ in range(2):
        assert imported(Hostile(plain())).shape == (2, 3)
