"""A conformance kit for array producers: `check_producer(obj)` reads every protocol `obj`
offers, checks each by its spec and checks that they all describe the same array.

Read: the CAI dict (`__cuda_array_interface__`), DLPack's versioned and legacy capsules
(`__dlpack__`, consumed through libcai as a consumer does) and `__dlpack_device__`, DLPack
1.3's exchange table (`__dlpack_c_exchange_api__`) and libcai's C-level CAI table
(`__cuda_array_interface_c_api__`, docs/c-level-cai.md) on the type, and the OpenCL/CUDA Buffer
Interface. Nothing is synchronized, no pointer is checked with the driver, and device memory
is never read: the kit compares metadata. Host memory is read only to check that a consumer's
tensor still sees the producer's bytes (at most 4 KiB of them).

    import cai.testing
    assert cai.testing.check_producer(my_array) == []
"""

from __future__ import annotations

import ctypes
import gc
import math
import sys
from dataclasses import dataclass
from typing import Any, Callable

from . import _native
from ._errors import CaiError
from ._native import POINTER_CHECK_NEVER, from_object, validate

__all__ = ["Finding", "check_producer", "CAI", "DLPACK", "DLPACK_VERSIONED", "DLPACK_DEVICE", "EXCHANGE",
           "EXCHANGE_VIEW", "C_API_VIEW", "C_API_ACQUIRE", "BUFFER_INTERFACE"]

# The protocols, as findings name them.
CAI = "__cuda_array_interface__"
DLPACK_VERSIONED = "__dlpack__(max_version=(1, 0))"
DLPACK = "__dlpack__()"
DLPACK_DEVICE = "__dlpack_device__"
EXCHANGE = "__dlpack_c_exchange_api__"
EXCHANGE_VIEW = "__dlpack_c_exchange_api__ (dltensor_from_py_object_no_sync)"
C_API_VIEW = "__cuda_array_interface_c_api__ (view)"
C_API_ACQUIRE = "__cuda_array_interface_c_api__ (acquire)"
BUFFER_INTERFACE = "Buffer Interface"

_KEYS = {"shape", "typestr", "data", "version", "strides", "descr", "mask", "stream"}
# DLPack device types whose `__dlpack__` takes a CUDA stream (-1: no sync): CUDA, CUDA managed.
_CUDA_DEVICES = {2, 13}
_HOST_DEVICE = 1  # kDLCPU
_HOST_DEVICES = {1, 3}  # CPU, CUDA pinned host memory
_HOST_BYTES_COMPARED = 4096


@dataclass(frozen=True)
class Finding:
    """One way in which a producer breaks a protocol's rules or its protocols disagree.

    `protocols` names the protocols involved, one entry per value in `values` (an entry is
    "A and B" where several protocols gave that value); `field` is what was checked ("shape",
    "typestr", "deleter"...); `values` are the values seen; `detail` says what the rule is.
    `severity` is "error" for a violation of a spec, or "note" for what a spec allows but
    libcai's canonical form does not write (explicit strides of a C-contiguous array, a v3 dict
    without `stream`), which `check_producer` reports only when asked (`notes=True`).
    `str(finding)` names the protocols, the field and the values:
    "__cuda_array_interface__ vs __dlpack__(): shape (3, 4) vs (4, 3)".
    """

    protocols: tuple[str, ...]
    field: str
    values: tuple[Any, ...]
    detail: str = ""
    severity: str = "error"

    def __str__(self) -> str:
        text = f"{' vs '.join(self.protocols)}: {self.field} {' vs '.join(_show(v) for v in self.values)}"
        if self.detail:
            text += f" ({self.detail})"
        return text if self.severity == "error" else f"note: {text}"


def _show(value: Any) -> str:
    return repr(value) if isinstance(value, str) else str(value)


@dataclass
class _Seen:
    """What one protocol described, for the comparison; None: that protocol does not carry it."""

    protocol: str
    shape: tuple[int, ...] | None = None
    strides: tuple[int | None, ...] | None = None
    typestr: str | None = None
    data: int | None = None
    readonly: bool | None = None
    device: tuple[int, int] | None = None
    stream: int | None = None


class _Kit:
    def __init__(self, obj: Any) -> None:
        self.obj = obj
        self.findings: list[Finding] = []
        self.seen: list[_Seen] = []
        self.host_bytes: bytes | None = None
        self.readonly_versioned = False

    def find(self, protocols: str | tuple[str, ...], field: str, values: Any, detail: str = "",
             severity: str = "error") -> None:
        protocols = (protocols,) if isinstance(protocols, str) else protocols
        values = values if isinstance(values, tuple) and len(protocols) > 1 else (values,)
        self.findings.append(Finding(protocols, field, values, detail, severity))

    def errors_of(self, protocol: str) -> bool:
        return any(f.severity == "error" and protocol in f.protocols for f in self.findings)

    # The CAI dict ---------------------------------------------------------------------------

    def check_interface(self) -> None:
        try:
            interface = self.obj.__cuda_array_interface__
        except AttributeError:
            return  # not offered (host memory, a DLPack-only producer)
        except Exception as error:  # noqa: BLE001 - any other exception is the finding
            self.find(CAI, "access", type(error).__name__, f"only AttributeError says the dict is not offered: {error}")
            return
        if not isinstance(interface, dict):
            self.find(CAI, "type", type(interface).__name__, "the interface is a dict")
            return
        self.check_dict(interface, CAI)
        own_errors = self.errors_of(CAI)
        try:
            validate(interface)
        except CaiError as error:
            if not own_errors:  # a violation the checks above name already is not repeated
                self.find(CAI, "cai.validate", error.status, str(error))
            return
        if own_errors:
            return
        try:
            read = from_object(interface, sync=False, pointer_check=POINTER_CHECK_NEVER, allow_host=True)
        except (CaiError, TypeError, ValueError) as error:
            self.find(CAI, "cai.from_object", type(error).__name__, str(error))
            return
        self.seen.append(_seen_of(read, CAI, stream=read.stream or 0, readonly=True))

    def check_dict(self, d: dict[str, Any], label: str) -> None:
        missing = sorted({"shape", "typestr", "data", "version"} - set(d))
        if missing:
            self.find(label, "keys", tuple(missing) if len(missing) > 1 else missing[0], "required keys missing")
            return
        unknown = sorted(set(d) - _KEYS)
        if unknown:
            self.find(label, "keys", unknown[0] if len(unknown) == 1 else tuple(unknown),
                      "keys the spec does not define", "note")
        version = d["version"]
        if not _is_int(version) or not 0 <= version <= 3:
            self.find(label, "version", version, "an int, 3 for this version of the spec")
            version = 3
        shape = d["shape"]
        if not isinstance(shape, tuple) or not all(_is_int(n) and n >= 0 for n in shape):
            self.find(label, "shape", shape, "a tuple of ints >= 0")
            return
        typestr = d["typestr"]
        itemsize = self.check_typestr(typestr, label)
        data = d["data"]
        if not (isinstance(data, tuple) and len(data) == 2 and _is_int(data[0]) and isinstance(data[1], bool)):
            self.find(label, "data", data, "a tuple (pointer: int, read-only: bool)")
        elif math.prod(shape) == 0 and data[0] != 0:
            self.find(label, "data", data, "a zero-size array's pointer is 0")
        strides = d.get("strides")
        if strides is not None:
            if not (isinstance(strides, tuple) and len(strides) == len(shape) and all(_is_int(s) for s in strides)):
                self.find(label, "strides", strides, f"None or a tuple of {len(shape)} ints")
            elif itemsize is not None and strides == _c_strides(shape, itemsize):
                self.find(label, "strides", strides, "C-contiguous strides given explicitly: the spec allows "
                          "them, None is the canonical form", "note")
        if version >= 3:
            if "stream" not in d:
                self.find(label, "stream", "missing", "v3 gives the stream explicitly, None when no sync is "
                          "needed; a missing stream is read as None", "note")
            else:
                stream = d["stream"]
                if stream is not None and (not _is_int(stream) or stream <= 0 or stream >= 1 << 64):
                    self.find(label, "stream", stream, "None, 1, 2 or a CUstream handle; 0 is disallowed")
        mask = d.get("mask")
        if mask is not None:
            try:
                mask_dict = mask.__cuda_array_interface__
            except Exception as error:  # noqa: BLE001
                self.find(label, "mask", type(mask).__name__, f"None or an object with {CAI}: {error}")
                return
            if isinstance(mask_dict, dict) and mask_dict.get("shape") != shape:
                self.find(label, "mask shape", mask_dict.get("shape"), f"the mask has the array's shape, {shape}")

    def check_typestr(self, typestr: Any, label: str) -> int | None:
        if not isinstance(typestr, str):
            self.find(label, "typestr", typestr, "a str")
            return None
        try:
            import numpy
        except ImportError:
            return None
        try:
            dtype = numpy.dtype(typestr)
        except (TypeError, ValueError) as error:
            self.find(label, "typestr", typestr, f"numpy reads no dtype from it: {error}")
            return None
        if dtype.str != typestr:
            self.find(label, "typestr", typestr, f"spelled as numpy's dtype(t).str, {dtype.str!r}")
        return int(dtype.itemsize)

    # DLPack ---------------------------------------------------------------------------------

    def check_dlpack(self) -> None:
        if not hasattr(self.obj, "__dlpack__"):
            return
        try:
            device = self.obj.__dlpack_device__()
        except Exception as error:  # noqa: BLE001
            self.find(DLPACK_DEVICE, "call", type(error).__name__, f"a DLPack producer has it: {error}")
            device = None
        if device is not None:
            if not (isinstance(device, tuple) and len(device) == 2 and all(_is_int(v) for v in device)):
                self.find(DLPACK_DEVICE, "value", device, "a (device_type, device_id) tuple of ints")
                device = None
            else:
                if device[0] == _HOST_DEVICE and device[1] != 0:
                    self.find(DLPACK_DEVICE, "device id", device, "host memory (kDLCPU) is device 0, as DLPack says")
                self.seen.append(_Seen(DLPACK_DEVICE, device=device))
        stream: dict[str, Any] = {"stream": -1} if device is not None and device[0] in _CUDA_DEVICES else {}
        # A CUDA producer is asked for no sync (-1): the kit orders no work on any stream.
        called = "; called with stream=-1: no synchronization, as the array API standard defines it" if stream else ""
        self.check_capsule(DLPACK_VERSIONED, lambda: self.obj.__dlpack__(max_version=(1, 0), **stream),
                           ("dltensor_versioned", "dltensor"), called)
        self.check_capsule(DLPACK, lambda: self.obj.__dlpack__(**stream), ("dltensor",), called)

    def check_capsule(self, label: str, call: Callable[[], Any], names: tuple[str, ...], called: str = "") -> None:
        before = self.references()
        try:
            capsule = call()
        except TypeError as error:
            if label == DLPACK_VERSIONED:
                self.find(label, "max_version", "TypeError", f"a producer of DLPack 1.0 takes it: {error}", "note")
            else:
                self.find(label, "call", "TypeError", f"{error}{called}")
            return
        except Exception as error:  # noqa: BLE001
            if label == DLPACK and self.readonly_versioned and isinstance(error, (BufferError, ValueError)):
                return  # read-only data has no legacy struct: refusing it is DLPack's rule
            self.find(label, "call", type(error).__name__, f"{error}{called}")
            return
        name = _capsule_name(capsule)
        if name not in names:
            self.find(label, "capsule name", name, " or ".join(repr(n) for n in names))
            del capsule
            self.check_released(label, before, "deleter")
            return
        try:
            got = _native._read_protocol(capsule, "capsule")
            assert got is not None  # a capsule is always read (or refused)
            read, device, _ = got
        except Exception as error:  # noqa: BLE001
            self.find(label, "libcai's read", type(error).__name__, str(error))
            del capsule
            self.check_released(label, before, "deleter")
            return
        used = _capsule_name(capsule)
        if used != "used_" + name:
            self.find(label, "capsule name after use", used, f"'used_{name}'")
        del capsule
        # The consumer holds the tensor alone now: it still describes, and sees, the same data.
        self.seen.append(_seen_of(read, label, device=device, readonly=name == "dltensor_versioned"))
        if name == "dltensor_versioned":
            self.readonly_versioned = bool(read.readonly)
        self.check_host_bytes(read, device, label)
        read.release()
        del read
        self.check_released(label, before, "deleter", "after the consumer released the tensor")
        # A capsule dropped unconsumed releases its tensor too (its destructor runs the deleter).
        before = self.references()
        try:
            unused = call()
        except Exception:  # noqa: BLE001 - reported above already
            return
        del unused
        self.check_released(label, before, "deleter", "after an unconsumed capsule was dropped")

    def references(self) -> int:
        """The producer's reference count, always measured from the same depth (no local names)."""
        return sys.getrefcount(self.obj)

    def check_released(self, label: str, before: int, field: str, when: str = "") -> None:
        after = self.references()
        if after != before:
            gc.collect()  # a cycle through the producer is let go of only by the collector
            after = self.references()
        if any(f.field == field and f.protocols == (label,) for f in self.findings):
            return  # one finding per protocol: the unconsumed capsule repeats the consumed one
        if after > before:
            self.find(label, field, f"{after - before} reference(s) to the producer kept",
                      f"never released {when}".strip())
        elif after < before:
            self.find(label, field, f"{before - after} reference(s) to the producer dropped twice",
                      f"released more than once {when}".strip())

    def remember_host_bytes(self, read: Any, device: tuple[int, int] | None) -> None:
        if self.host_bytes is None and _is_host(read, device):
            span = _span(read)
            if span is not None:
                self.host_bytes = ctypes.string_at(read.data_ptr, span)

    def check_host_bytes(self, read: Any, device: tuple[int, int] | None, label: str) -> None:
        if not _is_host(read, device):
            return
        if self.host_bytes is None:
            self.remember_host_bytes(read, device)
            return
        span = _span(read)
        if span is not None and span == len(self.host_bytes):
            if ctypes.string_at(read.data_ptr, span) != self.host_bytes:
                self.find(label, "data after the capsule was dropped", "bytes differ",
                          "the consumer's tensor keeps the producer's memory alive")

    # The tables on the type -----------------------------------------------------------------

    def check_table(self, attribute: str, capsule_name: str, protocols: tuple[tuple[str, str], ...]) -> None:
        offered = getattr(type(self.obj), attribute, None)
        if offered is None:
            return
        for protocol, label in protocols:
            before = self.references()
            try:
                got = _native._read_protocol(self.obj, protocol)
            except Exception as error:  # noqa: BLE001
                self.find(label, "libcai's read", type(error).__name__, str(error))
                continue
            if got is None:
                if protocol in ("exchange_view",):
                    continue  # optional in DLPack 1.3
                self.find(label, "table", _capsule_name(offered) or type(offered).__name__,
                          f"a capsule named {capsule_name!r} whose table libcai reads (major version 1); a "
                          f"subclass that defines {CAI} itself sets {attribute} = None or offers its own table")
                return
            read, device, owning = got
            wants_owning = protocol in ("c_api_acquire", "exchange")
            if protocol.startswith("c_api") and owning != wants_owning:
                self.find(label, "release", "set" if owning else "NULL",
                          "acquire sets release, view leaves it NULL (docs/c-level-cai.md section 3)")
            if protocol.startswith("c_api"):
                self.check_struct(read, label)
            self.seen.append(_seen_of(read, label, device=device,
                                      readonly=protocol in ("exchange", "c_api_view", "c_api_acquire"),
                                      stream=(read.stream or 0) if protocol.startswith("c_api") else None))
            read.release()
            del read
            self.check_released(label, before, "release" if protocol.startswith("c_api") else "deleter")

    def check_struct(self, read: Any, label: str) -> None:
        """The C-level table's constant fields (docs/c-level-cai.md section 3)."""
        from .ctypes_api import CaiArray

        struct = CaiArray.from_address(read.ptr)
        for field, wanted in (("abi_version", 0), ("version", 3), ("stream_kind", 0), ("byte_offset", 0)):
            value = getattr(struct, field)
            if value != wanted:
                self.find(label, field, value, f"the table writes {wanted}")
        self.check_typestr(read.typestr, label)

    # The Buffer Interface -------------------------------------------------------------------

    def check_buffer_interface(self) -> None:
        if not all(hasattr(self.obj, name) for name in ("buffer", "offset", "dtype", "shape", "strides")):
            return
        try:
            got = _native._read_protocol(self.obj, "buffer_interface")
        except Exception as error:  # noqa: BLE001
            self.find(BUFFER_INTERFACE, "libcai's read", type(error).__name__, str(error))
            return
        if got is not None:
            read = got[0]
            self.seen.append(_seen_of(read, BUFFER_INTERFACE))
            read.release()

    # Agreement ------------------------------------------------------------------------------

    def compare(self) -> None:
        for field in ("shape", "typestr", "strides", "data", "readonly", "device", "stream"):
            if field == "strides" and any(f.field == "shape" for f in self.findings):
                continue  # strides of different shapes differ anyway: the shape is the finding
            groups: dict[Any, list[str]] = {}
            for seen in self.seen:
                value = getattr(seen, field)
                if value is not None:
                    groups.setdefault(value, []).append(seen.protocol)
            if len(groups) > 1:
                self.find(tuple(" and ".join(p) for p in groups.values()), field, tuple(groups))


def check_producer(obj: Any, *, notes: bool = False) -> list[Finding]:
    """Checks every protocol `obj` offers and that they agree; returns the findings, an empty
    list when `obj` conforms. With `notes=True` the list also holds notes: what a spec allows
    but is not its canonical form (see Finding). The object is read, never written; its device
    memory is never read. A host-memory producer without a CAI dict is not a finding."""
    kit = _Kit(obj)
    kit.check_interface()
    kit.check_dlpack()
    kit.check_table("__dlpack_c_exchange_api__", "dlpack_exchange_api",
                    (("exchange", EXCHANGE), ("exchange_view", EXCHANGE_VIEW)))
    kit.check_table("__cuda_array_interface_c_api__", "cuda_array_interface_c_api",
                    (("c_api_view", C_API_VIEW), ("c_api_acquire", C_API_ACQUIRE)))
    kit.check_buffer_interface()
    if not kit.seen and not kit.findings:
        kit.find("any", "protocol", type(obj).__name__,
                 f"a producer offers {CAI}, __dlpack__, a C-level table or the Buffer Interface")
    kit.compare()
    return [f for f in kit.findings if notes or f.severity == "error"]


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _c_strides(shape: tuple[int, ...], itemsize: int) -> tuple[int, ...]:
    strides, step = [], itemsize
    for extent in reversed(shape):
        strides.append(step)
        step *= max(extent, 1)
    return tuple(reversed(strides))


def _seen_of(read: Any, protocol: str, device: tuple[int, int] | None = None, readonly: bool = False,
             stream: int | None = None) -> _Seen:
    """A read array's metadata; strides only where they matter (an extent above 1 of a
    non-empty array), the data pointer only of a non-empty array."""
    shape = tuple(read.shape)
    empty = math.prod(shape) == 0
    strides = None if empty else tuple(s if n > 1 else None for n, s in zip(shape, read.strides))
    return _Seen(protocol, shape=shape, strides=strides, typestr=read.typestr,
                 data=None if empty else read.data_ptr, readonly=bool(read.readonly) if readonly else None,
                 device=device, stream=stream)


def _is_host(read: Any, device: tuple[int, int] | None) -> bool:
    return device is not None and device[0] in _HOST_DEVICES and read.data_ptr != 0


def _span(read: Any) -> int | None:
    """The bytes a C-contiguous host array spans, if at most _HOST_BYTES_COMPARED."""
    if not read.is_c_contiguous or read.nbytes > _HOST_BYTES_COMPARED:
        return None
    return int(read.nbytes)


_GET_NAME = ctypes.pythonapi.PyCapsule_GetName
_GET_NAME.restype = ctypes.c_char_p
_GET_NAME.argtypes = [ctypes.py_object]


def _capsule_name(capsule: Any) -> str | None:
    if type(capsule).__name__ != "PyCapsule":
        return None
    name = _GET_NAME(capsule)
    return None if name is None else name.decode()
