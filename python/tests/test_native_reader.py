"""The native dict reader (src/python.rs) agrees with the Python rules (cai/_convert.py): where
it takes a dict, it writes the same CaiArray bytes; it never takes a dict the rules refuse; and
it leaves unusual but valid dicts to them."""

import ctypes
import random

import numpy as np
import pytest

import cai
from cai import _convert
from cai._lib import CaiArray, python_fill


def python_rules(desc):
    struct = CaiArray()
    ctypes.memset(ctypes.byref(struct), 0, ctypes.sizeof(struct))
    version = _convert.version_is_known(desc)
    shape = _convert.shape_is_a_sequence_of_extents(desc)
    typestr = _convert.typestr_is_a_string(desc)
    pointer, readonly = _convert.data_is_a_pointer_and_flag(desc, version, shape)
    strides = _convert.strides_match_shape(desc, len(shape))
    stream = _convert.stream_is_none_or_a_handle(desc, version)
    if _convert.descr_lists_named_fields(desc) is not None or _convert.mask_exposes_the_interface(desc, version):
        return None
    struct.version, struct.ndim = version, len(shape)
    struct.shape[: len(shape)] = shape
    if strides is not None:
        struct.strides_given = 1
        struct.strides[: len(strides)] = strides
    struct.typestr, struct.data, struct.readonly, struct.stream = typestr, pointer, readonly, stream
    return bytes(struct)


# key: (valid values, invalid or unusual values)
VALUES = {
    "version": ([3, 2, 1, 0], [4, -1, True, "3", 3.0, np.int64(3)]),
    "shape": ([(4,), [2, 3], (), (0, 5), (1,) * 64], [(-1,), (1.5,), (True,), (2**63,), (2**64,), "4", (1,) * 65,
                                                     (np.int64(4),)]),
    "typestr": (["<f4", "|V12", "<i8", "f4"], ["<f", "", "x" * 40, 4, "f4\0", "\ud800"]),
    "data": ([(0x1000, False), [0x1000, True], (2**64 - 1, False)],
             [(0, False), (True, False), (-1, False), (2**64, False), (0x1000, 0), (0x1000,), None,
              (np.uint64(8), False)]),
    "strides": ([None, (4,), (12, 4), [8]], [(), (4.0,), (2**63,), (-(2**63),)]),
    "stream": ([None, 1, 2, 7], [0, -5, True, 2**64, "1"]),
    "descr": ([None], [[("", "<f4")]]),
    "mask": ([None], []),
}


def generated(n, seed=1234):
    rng = random.Random(seed)
    for _ in range(n):
        desc = {}
        for key, (valid, other) in VALUES.items():
            if rng.random() < 0.97:
                desc[key] = rng.choice(other) if other and rng.random() < 0.05 else rng.choice(valid)
        yield desc


def test_native_reader_takes_only_what_the_python_rules_accept_and_writes_the_same_bytes():
    taken = refused = left = 0
    for desc in generated(20000):
        native = CaiArray()
        took = python_fill(desc, native)
        try:
            expected = python_rules(desc)
        except cai.CaiError:
            assert not took, f"native reader took a dict the rules refuse: {desc!r}"
            refused += 1
            continue
        if took:
            assert expected is not None, f"native reader took a descr/mask dict: {desc!r}"
            assert bytes(native) == expected, f"different CaiArray for {desc!r}"
            taken += 1
        else:
            assert bytes(native) == bytes(CaiArray()), "a dict it leaves alone leaves the struct zeroed"
            left += 1
    assert taken > 500 and refused > 500 and left > 100, (taken, refused, left)


@pytest.mark.parametrize("desc", [
    {"shape": (4,), "typestr": "<f4", "data": (np.uint64(4096), False), "version": 3},  # numpy ints
    {"shape": (4,), "typestr": "<f4", "data": (4096, False), "version": 3, "descr": [("", "<f4")]},
])
def test_valid_but_unusual_dicts_go_to_the_python_rules(desc):
    assert python_fill(desc, CaiArray()) == 0
    cai.validate(desc)


def test_dict_subclasses_and_mappings_go_to_the_python_rules():
    class Sub(dict):
        pass

    desc = Sub(shape=(4,), typestr="<f4", data=(4096, False), version=3)
    assert python_fill(desc, CaiArray()) == 0
    cai.validate(desc)


def test_imports_that_may_block_never_hold_the_gil():
    can = cai._array._cannot_block
    assert can({"stream": None}, None, None)
    assert can({"stream": 7}, None, False)
    assert can({"stream": 7}, 9, None), "stream-ordered onto the consumer's stream: no host wait"
    assert not can({"stream": 7}, None, None), "no consumer stream: blocking"
    assert not can({"stream": 7}, 9, cai.SYNC_BLOCKING)
