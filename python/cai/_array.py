"""cai.Array: a validated CaiArray that C functions take directly, keeping alive what it
describes, and itself exposing `__cuda_array_interface__`."""

import ctypes
import functools
import threading
import weakref

from . import _convert
from ._errors import raise_for, refuse
from ._lib import (
    SYNC_DEFAULT, SYNC_NONE, SYNC_STREAM_ORDERED, CaiArray, CaiDtype, CaiImportOptions, CaiLayout, CaiPointerInfo, RELEASE_FN,
    PYTHON_NOT_HANDLED, lib, python_import,
)
from ._lib import CaiError as _CError


def descriptor_of(obj):
    """The interface dict of `obj` (or `obj` itself when it is a dict)."""
    if isinstance(obj, dict):
        return obj
    try:
        desc = obj.__cuda_array_interface__
    except AttributeError:
        raise AttributeError(f"{type(obj).__name__!r} object has no attribute '__cuda_array_interface__'") from None
    if not isinstance(desc, dict):
        raise TypeError(f"{type(obj).__name__}.__cuda_array_interface__ is a {type(desc).__name__}, not a dict")
    return desc


def stream_value(stream):
    """A consumer stream as libcai takes it: None, 1, 2, a CUstream int, or a stream object
    (cuda.core's __cuda_stream__, CuPy's .ptr, PyTorch's .cuda_stream). A stream object whose
    handle is 0 is the legacy default stream."""
    if stream is None:
        return 0
    if _convert.is_integer(stream):
        if stream <= 0 or stream > _convert.UINT64_MAX:
            refuse("CAI_ERROR_INVALID_STREAM", f"stream {stream} is not None, 1, 2 or a stream handle (0 is ambiguous)")
        return int(stream)
    if hasattr(stream, "__cuda_stream__"):
        handle = stream.__cuda_stream__()[1]
    elif hasattr(stream, "cuda_stream"):
        handle = stream.cuda_stream
    elif hasattr(stream, "ptr"):
        handle = stream.ptr
    else:
        raise TypeError(f"stream must be None, an int or a stream object, not {type(stream).__name__}")
    return int(handle) or 1


def sync_mode(sync):
    if sync is None:
        return SYNC_DEFAULT
    if sync is True:
        return SYNC_STREAM_ORDERED
    if sync is False:
        return SYNC_NONE
    if _convert.is_integer(sync) and 0 <= sync <= 3:
        return int(sync)
    raise TypeError(f"sync must be None, True, False or a cai.SYNC_* value, not {sync!r}")


class Array:
    """A validated device array. Pass it to C functions as is (ctypes uses `byref`) or by
    address (`.ptr`). It keeps its source object alive, and exposes the interface itself."""

    # Class-level defaults, so that making an Array writes only what it has.
    _owner = _mask = _fields = _desc = _layout = _pointer_info = _finalizer = None

    def __init__(self):
        raise TypeError("use cai.from_object(obj) or cai.Array.from_c(pointer)")

    @classmethod
    def _new(cls):
        self = object.__new__(cls)
        self._struct = CaiArray()
        return self

    @classmethod
    def _from_descriptor(cls, desc, owner):
        self = cls._new()
        self._owner = owner
        self._desc = desc
        fields, mask = _convert.fill(self._struct, desc, cls._from_mask)
        if fields is not None:
            self._fields = fields
        if mask is not None:
            self._mask = mask
        return self

    @classmethod
    def _from_mask(cls, mask):
        return cls._from_descriptor(descriptor_of(mask), mask)

    @classmethod
    def from_c(cls, pointer):
        """Takes over a CaiArray made in C (a ctypes pointer/byref or an address): its release
        callback runs exactly once, when this Array is garbage-collected. The C struct's
        `release` is cleared, so the C side cannot release it twice; the callback receives
        this Array's copy of the struct."""
        if isinstance(pointer, int):
            source = CaiArray.from_address(pointer)
        elif isinstance(pointer, CaiArray):
            source = pointer
        else:
            source = ctypes.cast(pointer, ctypes.POINTER(CaiArray)).contents
        self = cls._new()
        ctypes.memmove(ctypes.byref(self._struct), ctypes.byref(source), ctypes.sizeof(CaiArray))
        source.release = RELEASE_FN()  # NULL: ownership moved here
        self._finalizer = weakref.finalize(self, _release, self._struct)
        error = _CError()
        raise_for(lib.cai_validate(ctypes.byref(self._struct), ctypes.byref(error)), error)
        if self._struct.mask:
            self._mask = cls._borrowed(self._struct.mask.contents, owner=self)
        return self

    @classmethod
    def _borrowed(cls, struct, owner):
        self = cls._new()
        ctypes.memmove(ctypes.byref(self._struct), ctypes.byref(struct), ctypes.sizeof(CaiArray))
        self._struct.release = RELEASE_FN()  # borrowed: never released from here
        self._owner = owner
        return self

    @functools.cached_property
    def _as_parameter_(self):
        """What ctypes passes for this Array: the struct by reference, made on first use."""
        return ctypes.byref(self._struct)

    @property
    def ptr(self):
        """Address of the CaiArray, valid while this Array lives."""
        return ctypes.addressof(self._struct)

    def _layout_facts(self):
        if self._layout is None:
            layout, error = CaiLayout(), _CError()
            raise_for(lib.cai_layout(ctypes.byref(self._struct), ctypes.byref(layout), ctypes.byref(error)), error)
            self._layout = layout
        return self._layout

    @property
    def shape(self):
        return tuple(self._struct.shape[: self._struct.ndim])

    @property
    def ndim(self):
        return self._struct.ndim

    @property
    def typestr(self):
        return self._struct.typestr.decode("utf-8")

    @property
    def itemsize(self):
        dtype, error = CaiDtype(), _CError()
        raise_for(lib.cai_typestr_parse(self._struct.typestr, ctypes.byref(dtype), ctypes.byref(error)), error)
        return dtype.itemsize

    @property
    def dtype(self):
        """numpy's dtype for the typestr (needs numpy)."""
        import numpy

        return numpy.dtype(self.typestr)

    @property
    def strides(self):
        """Byte strides; C-contiguous ones when the descriptor gave none."""
        if self._struct.strides_given:
            return tuple(self._struct.strides[: self._struct.ndim])
        strides, step = [], self.itemsize
        for extent in reversed(self.shape):
            strides.append(step)
            step *= max(extent, 1)
        return tuple(reversed(strides))

    @property
    def size(self):
        return self._layout_facts().element_count

    @property
    def nbytes(self):
        return self._layout_facts().nbytes

    @property
    def readonly(self):
        return bool(self._struct.readonly)

    @property
    def is_c_contiguous(self):
        return bool(self._layout_facts().c_contiguous)

    @property
    def is_f_contiguous(self):
        return bool(self._layout_facts().f_contiguous)

    @property
    def data_ptr(self):
        return self._struct.data

    @property
    def stream(self):
        """The producer's stream (None, 1, 2 or a handle)."""
        return self._struct.stream or None

    @property
    def pointer_info(self):
        """What the driver said about the data pointer at import, or None if it was not asked."""
        if not self._pointer_info:  # None (not imported) or b"" (not checked)
            return None
        info = CaiPointerInfo.from_buffer_copy(self._pointer_info)
        return {name: getattr(info, name) for name, _ in CaiPointerInfo._fields_ if name != "checked"}

    @property
    def owner(self):
        return self._owner

    @property
    def __cuda_array_interface__(self):
        s = self._struct
        empty = self.size == 0
        desc = {
            "shape": self.shape,
            "typestr": self._desc["typestr"] if self._desc is not None else self.typestr,
            "data": (0 if empty else s.data, bool(s.readonly)),
            "version": s.version,
            "strides": None if not s.strides_given or self.is_c_contiguous else self.strides,
        }
        if s.descr_count:
            desc["descr"] = [
                (s.descr[i].name.decode("utf-8"), s.descr[i].typestr.decode("utf-8")) for i in range(s.descr_count)
            ]
        if self._mask is not None:
            desc["mask"] = self._mask
        if s.version >= 3:
            desc["stream"] = s.stream or None
        return desc

    def __repr__(self):
        return f"cai.Array(shape={self.shape}, typestr={self.typestr!r}, data={self._struct.data:#x}, readonly={self.readonly})"


def _release(struct):
    lib.cai_release(ctypes.byref(struct), None)


_per_thread = threading.local()
_options_cache = {}


def _error_struct():
    """This thread's CaiError: libcai writes it only on failure, and it is read at once."""
    try:
        return _per_thread.error
    except AttributeError:
        _per_thread.error = _CError()
        return _per_thread.error


def _import_options(stream, sync, writable):
    """None for the defaults; else a shared, read-only options struct for this combination."""
    if stream is None and sync is None and not writable:
        return None
    key = (stream_value(stream), sync_mode(sync), bool(writable))
    options = _options_cache.get(key)
    if options is None:
        if len(_options_cache) >= 256:
            _options_cache.clear()
        options = _options_cache[key] = CaiImportOptions(consumer_stream=key[0], sync_mode=key[1], writable=key[2])
    return options


def from_object(obj, stream=None, sync=None, writable=False):
    """Imports `obj.__cuda_array_interface__` (or a dict): validates it by every rule of the
    spec, checks the pointer where a driver loads, synchronizes with the producer's stream
    (stream-ordered on `stream` if given, else blocking; `sync=False` skips it), keeps `obj`
    alive, and returns a cai.Array. Raises cai.CaiError (a ValueError) naming the rule broken."""
    options = None if stream is None and sync is None and not writable else _import_options(stream, sync, writable)
    if obj.__class__ is dict:
        desc = obj
    else:  # descriptor_of(obj), inlined for the common case
        desc = getattr(obj, "__cuda_array_interface__", None)
        if desc.__class__ is not dict:
            desc = descriptor_of(obj)
    array = object.__new__(Array)  # Array._new(), inlined: this is the hot path
    struct = array._struct = CaiArray()
    array._owner = obj
    array._desc = desc
    try:
        error = _per_thread.error
    except AttributeError:
        error = _error_struct()
    # One native call: it reads the dict and imports (releasing the GIL if it may wait).
    result = python_import(desc, struct, options, error)
    if result.__class__ is not bytes:
        if result != PYTHON_NOT_HANDLED:
            raise_for(result, error)
        array._fields, array._mask = _convert.fill_by_rules(struct, desc, Array._from_mask)
        info = CaiPointerInfo()
        status = lib.cai_import(struct, options, info, error)  # releases the GIL
        if status:
            raise_for(status, error)
        result = bytes(info) if info.checked else b""
    array._pointer_info = result
    return array


def validate(obj):
    """Checks a CAI dict (or an object exposing one) by every rule of the spec without touching
    the driver. Raises cai.CaiError naming the rule broken; returns None."""
    array = Array._from_descriptor(descriptor_of(obj), obj)
    error = _error_struct()
    status = lib.cai_validate(array._struct, error)
    if status:
        raise_for(status, error)


__all__ = ["Array", "from_object", "validate"]
