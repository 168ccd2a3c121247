"""The native dict reader (src/python.rs) agrees with the Python rules (cai/_convert.py): where
it takes a dict, it writes the same CaiArray bytes; it never takes a dict the rules refuse; and
it leaves unusual but valid dicts to them."""

import ctypes
import random
import threading
import time

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


def test_a_blocking_import_releases_the_gil_fake_driver(fake):
    """While cuStreamSynchronize waits (250 ms in the fake driver), other Python threads run:
    this thread ticks inside the driver's wait window, which it could not with the GIL held."""
    from conftest import DEVICE_BUFFER

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


def test_native_functions_refuse_wrong_arguments_with_typeerror():
    from cai._lib import CaiError, CaiImportOptions, python_import

    desc = {"shape": (4,), "typestr": "<f4", "data": (4096, False), "version": 3}
    struct, error = CaiArray(), CaiError()
    for call in [
        lambda: python_fill(desc),
        lambda: python_fill(desc, struct, None),
        lambda: python_fill(desc, b"x" * ctypes.sizeof(CaiArray)),  # read-only buffer
        lambda: python_fill(desc, ctypes.c_int()),  # wrong size
        lambda: python_fill(desc, 5),  # no buffer at all
        lambda: python_fill(desc=desc, array=struct),
        lambda: python_import(desc, struct, None),
        lambda: python_import(desc, struct, CaiArray(), error),  # options of the wrong type
        lambda: python_import(desc, struct, None, CaiImportOptions()),  # error of the wrong type
    ]:
        with pytest.raises(TypeError):
            call()
    assert bytes(struct) == bytes(CaiArray()), "a refused call wrote nothing"


def test_native_import_returns_the_pointer_info_as_bytes_fake_driver(fake):
    from conftest import DEVICE_BUFFER

    from cai._lib import CaiError, CaiPointerInfo, python_import

    desc = {"shape": (4,), "typestr": "<f4", "data": (DEVICE_BUFFER, False), "version": 3}
    result = python_import(desc, CaiArray(), None, CaiError())
    info = CaiPointerInfo.from_buffer_copy(result)
    assert info.checked == 1 and info.allocation_base == DEVICE_BUFFER and info.memory_type == 2
    assert python_import({"shape": (0,), "typestr": "<f4", "data": (0, False), "version": 3}, CaiArray(), None,
                         CaiError()) == b"", "zero-size: not checked, empty bytes"
    error = CaiError()
    assert python_import(dict(desc, data=(8, False)), CaiArray(), None, error) == 15  # NOT_DEVICE_POINTER
    assert error.code == 15 and b"0x8" in error.message
    assert python_import(dict(desc, descr=[("", "<f4")]), CaiArray(), None, error) == -1
