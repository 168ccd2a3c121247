"""docs/conformance.md row 28: on every typestr of the grammar, libcai's parser agrees with
numpy.dtype on accept/reject, itemsize, kind and byte order (sizes of 0 excepted, row 31)."""

import ctypes
import itertools
import sys

import numpy as np
import pytest

CAI_OK = 0
CAI_ERROR_INVALID_TYPESTR = 6


class CaiDtype(ctypes.Structure):
    _fields_ = [("itemsize", ctypes.c_uint64), ("kind", ctypes.c_char), ("byteorder", ctypes.c_char)]


class CaiError(ctypes.Structure):
    _fields_ = [("code", ctypes.c_int32), ("driver_result", ctypes.c_int32), ("message", ctypes.c_char * 512)]


BYTE_ORDERS = ["", "<", ">", "|", "="]
KINDS = list("biufcmMSUVO")
SIZES = ["0", "1", "2", "3", "4", "8", "12", "16", "32", "04", "008", "64", "100",
         "2147483647", "2147483648", "536870911", "536870912", "99999999999999999999"]
UNITS = ["", "[ns]", "[D]", "[25s]", "[1ns]", "[00s]", "[generic]", "[\u03bcs]", "[us]",
         "[Y]", "[W]", "[as]", "[]", "[xs]", "[ ns]", "[-1s]", "[ns"]


def grammar_typestrs():
    for order, kind, size, unit in itertools.product(BYTE_ORDERS, KINDS, SIZES, UNITS):
        if unit and kind not in "mM" and unit not in ("[ns]", "[]"):
            continue  # a handful of units on other kinds is enough to show they are refused
        yield order + kind + size + unit


GARBAGE = ["", "<", "f", "<f", "|O", "O", "float32", "i", "garbage", " <f4", "<f4 ", "<f4\t",
           "!f4", "<i+4", "<f-4", "<f4.0", "<<f4", "<x4", "<F4", "<I4", "4", "[ns]", "<M8[ns]]",
           "<M8[[ns]", "<M8[ns/2]", "<M8ns", "\u00e9f4"]


def numpy_verdict(typestr):
    try:
        dt = np.dtype(typestr)
    except (TypeError, ValueError, OverflowError):
        return None
    if dt.kind == "O" or dt.itemsize == 0 or dt.fields is not None or dt.subdtype is not None:
        return None
    byteorder = dt.byteorder
    if byteorder == "=":
        byteorder = "<" if sys.byteorder == "little" else ">"
    return (dt.itemsize, dt.kind, byteorder)


def libcai_verdict(libcai, typestr):
    out = CaiDtype(itemsize=12345)
    err = CaiError()
    status = libcai.cai_typestr_parse(typestr.encode("utf-8"), ctypes.byref(out), ctypes.byref(err))
    if status != CAI_OK:
        assert status == CAI_ERROR_INVALID_TYPESTR, (typestr, status)
        assert out.itemsize == 12345, "output written on failure"
        return None
    return (out.itemsize, out.kind.decode(), out.byteorder.decode())


def in_grammar_only(typestr):
    # Strings numpy reads that are outside the typestr grammar: one-letter codes and names.
    return typestr not in GARBAGE


def test_parser_agrees_with_numpy_on_generated_typestrs(libcai):
    libcai.cai_typestr_parse.restype = ctypes.c_int32
    cases = list(grammar_typestrs())
    assert len(cases) > 1000
    disagreements = []
    accepted = 0
    for t in cases:
        ours, theirs = libcai_verdict(libcai, t), numpy_verdict(t)
        accepted += ours is not None
        if ours != theirs:
            disagreements.append((t, ours, theirs))
    assert not disagreements, disagreements[:20]
    assert accepted > 200, "the generated list exercises the accepting paths too"


@pytest.mark.parametrize("typestr", GARBAGE)
def test_strings_outside_the_grammar_are_rejected(libcai, typestr):
    err = CaiError()
    status = libcai.cai_typestr_parse(typestr.encode("utf-8"), ctypes.byref(CaiDtype()), ctypes.byref(err))
    assert status == CAI_ERROR_INVALID_TYPESTR
    assert b"INVALID_TYPESTR" in err.message


@pytest.mark.parametrize("typestr", ["|V0", "|S0", "<U0"])
def test_size_zero_is_rejected_though_numpy_accepts_it(libcai, typestr):
    assert np.dtype(typestr).itemsize == 0
    assert libcai_verdict(libcai, typestr) is None


def imported_typestrs(typestr):
    """The typestr of the struct a consumer receives for a dict with `typestr`, as cai.Array.typestr
    and as the struct at cai.Array.ptr hold it; None when libcai refuses the dict."""
    import cai

    d = {"shape": (1,), "typestr": typestr, "data": (4096, False), "version": 3}
    try:
        made = cai.from_object(d, sync=False, pointer_check=cai.POINTER_CHECK_NEVER)
    except cai.CaiError:
        return None
    return made.typestr, cai.CaiArray.from_address(made.ptr).typestr.decode()


@pytest.mark.parametrize("typestr", ["f4", "=f4", "<u1", ">u1", "=u1", "b1", "=i2", ">i2", "c16", "i8", "|f8",
                                     "V16", "m8[ns]", "=M8[25s]"])
def test_row_65_a_dicts_typestr_reaches_the_consumer_as_numpy_spells_it_no_driver(typestr):
    assert imported_typestrs(typestr) == (np.dtype(typestr).str,) * 2


def test_row_65_every_generated_typestr_libcai_imports_reaches_the_consumer_as_numpy_spells_it_no_driver():
    taken = 0
    for typestr in grammar_typestrs():
        seen = imported_typestrs(typestr)
        if seen is not None:
            assert seen == (np.dtype(typestr).str,) * 2, typestr
            taken += 1
    assert taken > 400, taken
