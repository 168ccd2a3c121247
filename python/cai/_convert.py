"""From a `__cuda_array_interface__` dict to a CaiArray. The rules about the dict's Python
types live here, one function per rule; the rest are libcai's (cai_validate), so that the C
and Python sides agree on every one."""

import ctypes
import operator

from ._errors import c_message, refuse
from ._lib import FIELD_NAME_CAPACITY, MAX_NDIM, TYPESTR_CAPACITY, CaiDtype, CaiError, CaiField, lib, python_fill

INT64_MAX = (1 << 63) - 1
UINT64_MAX = (1 << 64) - 1


def is_integer(value):
    """An int (or numpy integer), but not a bool: the spec's integers are not True/False."""
    if type(value) is int:
        return True
    if isinstance(value, bool):
        return False
    try:
        operator.index(value)
    except TypeError:
        return False
    return not hasattr(value, "dtype") or value.dtype.kind in "iu"


def utf8(text, status, what):
    """`text` as UTF-8; a str that has none (lone surrogates) is refused with `status`."""
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        refuse(status, f"{what} {text!r} is not valid Unicode")


def version_is_known(desc):
    if "version" not in desc:
        refuse("CAI_ERROR_INVALID_VERSION", "version is missing; it is a required key")
    version = desc["version"]
    if not is_integer(version) or not 0 <= version <= 3:
        refuse("CAI_ERROR_INVALID_VERSION", f"version {version!r} is not a CAI version (0 to 3)")
    return int(version)


def shape_is_a_sequence_of_extents(desc):
    shape = desc.get("shape")
    if not isinstance(shape, (tuple, list)):
        refuse("CAI_ERROR_INVALID_SHAPE", f"shape {shape!r} is not a tuple of integers")
    if len(shape) > MAX_NDIM:
        refuse("CAI_ERROR_INVALID_SHAPE", f"shape has {len(shape)} dimensions; CAI_MAX_NDIM is {MAX_NDIM}")
    for i, extent in enumerate(shape):
        if not is_integer(extent):
            refuse("CAI_ERROR_INVALID_SHAPE", f"shape[{i}] is {extent!r}, not an integer")
        if extent < 0:
            refuse("CAI_ERROR_INVALID_SHAPE", f"shape[{i}] is {extent}; extents must be >= 0")
        if extent > INT64_MAX:
            refuse("CAI_ERROR_OVERFLOW", f"shape[{i}] is {extent}, which does not fit in 64 bits")
    return tuple(int(e) for e in shape)


def typestr_is_a_string(desc):
    typestr = desc.get("typestr")
    if not isinstance(typestr, str):
        refuse("CAI_ERROR_INVALID_TYPESTR", f"typestr {typestr!r} is not a string")
    encoded = utf8(typestr, "CAI_ERROR_INVALID_TYPESTR", "typestr")
    if len(encoded) >= TYPESTR_CAPACITY or b"\0" in encoded:
        refuse("CAI_ERROR_INVALID_TYPESTR", f"typestr {typestr!r} is too long or holds a NUL")
    return encoded


def data_is_a_pointer_and_flag(desc, version, shape):
    data = desc.get("data")
    if not isinstance(data, (tuple, list)) or len(data) != 2:
        refuse("CAI_ERROR_INVALID_DATA", f"data {data!r} is not a 2-tuple (pointer, read-only flag)")
    pointer, readonly = data
    if pointer is None and version <= 1 and 0 in shape:
        pointer = 0  # old Numba exported None for zero-size arrays
    if not is_integer(pointer) or not 0 <= pointer <= UINT64_MAX:
        refuse("CAI_ERROR_INVALID_DATA", f"data pointer {pointer!r} is not an integer address")
    if not isinstance(readonly, bool):
        refuse("CAI_ERROR_INVALID_DATA", f"data read-only flag {readonly!r} is not a bool")
    return int(pointer), readonly


def strides_match_shape(desc, ndim):
    strides = desc.get("strides")
    if strides is None:
        return None
    if not isinstance(strides, (tuple, list)):
        refuse("CAI_ERROR_INVALID_STRIDES", f"strides {strides!r} is neither None nor a tuple of integers")
    if len(strides) != ndim:
        refuse("CAI_ERROR_INVALID_STRIDES", f"strides has {len(strides)} entries but shape has {ndim}")
    for i, stride in enumerate(strides):
        if not is_integer(stride):
            refuse("CAI_ERROR_INVALID_STRIDES", f"strides[{i}] is {stride!r}, not an integer")
        if not -INT64_MAX - 1 <= stride <= INT64_MAX:
            refuse("CAI_ERROR_OVERFLOW", f"strides[{i}] is {stride}, which does not fit in 64 bits")
    return tuple(int(s) for s in strides)


def stream_is_none_or_a_handle(desc, version):
    """0 is disallowed (spec v3); versions before 3 have no stream, and one still there is ignored."""
    stream = desc.get("stream")
    if stream is None or version < 3:
        return 0
    if not is_integer(stream):
        refuse("CAI_ERROR_INVALID_STREAM", f"stream {stream!r} is neither None nor an integer")
    if stream == 0:
        refuse("CAI_ERROR_INVALID_STREAM", "stream 0 is disallowed by the spec; use None, 1 (legacy) or 2 (per-thread)")
    if not 0 < stream <= UINT64_MAX:
        refuse("CAI_ERROR_INVALID_STREAM", f"stream {stream} is not a valid stream handle")
    return int(stream)


def descr_lists_named_fields(desc):
    """numpy's descr: a list of (name, typestr) pairs; titles allowed, nesting and subarrays not."""
    descr = desc.get("descr")
    if descr is None:
        return None
    if not isinstance(descr, (list, tuple)) or not descr:
        refuse("CAI_ERROR_INVALID_DESCR", f"descr {descr!r} is not a non-empty list of (name, typestr) pairs")
    fields = (CaiField * len(descr))()
    offset = 0
    for i, entry in enumerate(descr):
        if not isinstance(entry, (list, tuple)) or len(entry) not in (2, 3):
            refuse("CAI_ERROR_INVALID_DESCR", f"descr[{i}] {entry!r} is not a (name, typestr) pair")
        if len(entry) == 3:
            refuse("CAI_ERROR_INVALID_DESCR", f"descr[{i}] has a subarray shape {entry[2]!r}, which libcai does not support")
        name, typestr = entry
        if isinstance(name, tuple) and len(name) == 2:
            name = name[1]  # (title, name)
        if not isinstance(name, str) or not isinstance(typestr, str):
            refuse("CAI_ERROR_INVALID_DESCR", f"descr[{i}] {entry!r} needs a str name and a str typestr (nested fields are not supported)")
        name_bytes = utf8(name, "CAI_ERROR_INVALID_DESCR", f"descr[{i}] name")
        typestr_bytes = utf8(typestr, "CAI_ERROR_INVALID_DESCR", f"descr[{i}] typestr")
        if len(name_bytes) >= FIELD_NAME_CAPACITY or len(typestr_bytes) >= TYPESTR_CAPACITY:
            refuse("CAI_ERROR_INVALID_DESCR", f"descr[{i}] name or typestr is too long")
        dtype, error = CaiDtype(), CaiError()
        if lib.cai_typestr_parse(typestr_bytes, ctypes.byref(dtype), ctypes.byref(error)) != 0:
            refuse("CAI_ERROR_INVALID_DESCR", f"descr[{i}] ({name!r}): {c_message(error)}")
        fields[i].name = name_bytes
        fields[i].typestr = typestr_bytes
        fields[i].offset = offset
        offset += dtype.itemsize
    return fields


def mask_exposes_the_interface(desc, version):
    mask = desc.get("mask")
    if mask is None:
        return None
    if version == 0:
        refuse("CAI_ERROR_INVALID_MASK", "mask is given but CAI version 0 has no mask (it came in version 1)")
    if not isinstance(mask, dict) and not hasattr(mask, "__cuda_array_interface__"):
        refuse("CAI_ERROR_INVALID_MASK", f"mask is a {type(mask).__name__}, which has no __cuda_array_interface__")
    return mask


def fill(struct, desc, convert_mask):
    """Fills `struct` from `desc`; returns what must stay alive as long as the struct: the
    descr fields and the converted mask (via `convert_mask(mask_object)`).

    libcai's native reader takes the common, plainly valid dict in one call; it leaves anything
    else (and every invalid dict) to the rules above, which decide and word the error."""
    if python_fill(desc, struct):
        return None, None
    return fill_by_rules(struct, desc, convert_mask)


def fill_by_rules(struct, desc, convert_mask):
    """`fill` by the rules above alone, for a dict the native reader has already left to them."""
    version = version_is_known(desc)
    shape = shape_is_a_sequence_of_extents(desc)
    typestr = typestr_is_a_string(desc)
    pointer, readonly = data_is_a_pointer_and_flag(desc, version, shape)
    strides = strides_match_shape(desc, len(shape))
    stream = stream_is_none_or_a_handle(desc, version)
    fields = descr_lists_named_fields(desc)
    mask_object = mask_exposes_the_interface(desc, version)

    struct.version = version
    struct.ndim = len(shape)
    struct.shape[: len(shape)] = shape
    if strides is not None:
        struct.strides_given = 1
        struct.strides[: len(strides)] = strides
    struct.typestr = typestr
    struct.data = pointer
    struct.readonly = readonly
    struct.stream = stream
    mask = None
    if fields is not None:
        struct.descr = ctypes.cast(fields, ctypes.POINTER(CaiField))
        struct.descr_count = len(fields)
    if mask_object is not None:
        mask = convert_mask(mask_object)
        struct.mask = ctypes.pointer(mask._struct)
    return fields, mask
