"""libcai's C API for ctypes users: the structs and functions of include/cai.h (a test compares
them field by field and function by function), loaded from the extension module, which carries
the C API too, so ctypes calls and the extension share one copy of the driver state. Their public
home is cai.ctypes_api; the field annotations are for type checkers (ctypes reads `_fields_`)."""

import ctypes
from ctypes import CFUNCTYPE, POINTER, Structure, c_char, c_char_p, c_int32, c_uint32, c_uint64, c_int64, c_void_p
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ctypes import _Pointer


#: CAI_MAX_NDIM: the most dimensions an array has (numpy's limit).
MAX_NDIM = 64
#: CAI_TYPESTR_CAPACITY: bytes of `CaiArray.typestr`, its NUL included.
TYPESTR_CAPACITY = 32
#: CAI_FIELD_NAME_CAPACITY: bytes of `CaiField.name`, its NUL included.
FIELD_NAME_CAPACITY = 64
#: CAI_ERROR_MESSAGE_CAPACITY: bytes of `CaiError.message`, its NUL included.
ERROR_MESSAGE_CAPACITY = 512


class CaiField(Structure):
    """One named field of a structured dtype (an entry of the interface's `descr`)."""

    name: bytes
    typestr: bytes
    offset: int
    _fields_ = [("name", c_char * FIELD_NAME_CAPACITY), ("typestr", c_char * TYPESTR_CAPACITY), ("offset", c_uint64)]


class CaiDLDataType(Structure):
    """DLPack's `DLDataType`."""

    code: int
    bits: int
    lanes: int
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class CaiArray(Structure):
    """The C description of a device array (`CaiArray` in cai.h): what `cai.Array` holds and
    passes as `CaiArray *`."""

    abi_version: int
    version: int
    owner: int | None
    release: Any
    ndim: int
    readonly: int
    strides_given: int
    descr_count: int
    data: int
    stream: int
    typestr: bytes
    shape: "ctypes.Array[c_int64]"
    strides: "ctypes.Array[c_int64]"
    mask: "_Pointer[CaiArray]"
    descr: "_Pointer[CaiField]"
    memory: int
    stream_kind: int
    byte_offset: int
    dl_dtype: CaiDLDataType
    reserved_half: int
    reserved: "ctypes.Array[c_uint64]"

    def __init__(self, *args: object, **fields: object) -> None:
        try:
            super().__init__(*args, **fields)
        except RuntimeError as error:
            # ctypes reports a wrong value for a pointer field (mask, descr) as a RuntimeError
            # wrapping the TypeError: a wrong type is a TypeError.
            raise TypeError(f"cai.CaiArray's fields: {error}") from None


RELEASE_FN = CFUNCTYPE(None, POINTER(CaiArray))
RELEASE_FN.__doc__ = "The type of `CaiArray.release`: `void (*)(CaiArray *)`."

CaiArray._fields_ = [
    ("abi_version", c_uint32),
    ("version", c_int32),
    ("owner", c_void_p),
    ("release", RELEASE_FN),
    ("ndim", c_int32),
    ("readonly", c_uint32),
    ("strides_given", c_uint32),
    ("descr_count", c_uint32),
    ("data", c_uint64),
    ("stream", c_uint64),
    ("typestr", c_char * TYPESTR_CAPACITY),
    ("shape", c_int64 * MAX_NDIM),
    ("strides", c_int64 * MAX_NDIM),
    ("mask", POINTER(CaiArray)),
    ("descr", POINTER(CaiField)),
    ("memory", c_uint32),
    ("stream_kind", c_uint32),
    ("byte_offset", c_uint64),
    ("dl_dtype", CaiDLDataType),
    ("reserved_half", c_uint32),
    ("reserved", c_uint64 * 1),
]


class CaiError(Structure):
    """What a failed C call reports: `code` (a CAI_ERROR_* status), `driver_result` (the raw
    CUresult or cl_int, 0 otherwise) and `message`. The C struct, not the Python exception
    `cai.CaiError`."""

    code: int
    driver_result: int
    message: bytes
    _fields_ = [("code", c_int32), ("driver_result", c_int32), ("message", c_char * ERROR_MESSAGE_CAPACITY)]


class CaiLayout(Structure):
    """What `cai_layout` computes of an array: its element count, bytes, byte extent from
    `data`, and contiguity."""

    element_count: int
    nbytes: int
    extent_begin: int
    extent_end: int
    c_contiguous: int
    f_contiguous: int
    strides_itemsize_aligned: int
    reserved: "ctypes.Array[c_uint32]"
    _fields_ = [
        ("element_count", c_uint64),
        ("nbytes", c_uint64),
        ("extent_begin", c_int64),
        ("extent_end", c_int64),
        ("c_contiguous", c_uint32),
        ("f_contiguous", c_uint32),
        ("strides_itemsize_aligned", c_uint32),
        ("reserved", c_uint32 * 5),
    ]


class CaiDtype(Structure):
    """A parsed typestr (`cai_typestr_parse`): item size, kind letter and byte order."""

    itemsize: int
    kind: bytes
    byteorder: bytes
    _fields_ = [("itemsize", c_uint64), ("kind", c_char), ("byteorder", c_char)]


class CaiExportOptions(Structure):
    """How `cai_export` writes a producer's array (zeroed: the defaults)."""

    work_streams: "_Pointer[c_uint64]"
    work_stream_count: int
    version: int
    check_pointer: int
    per_thread_default_stream: int
    reserved: "ctypes.Array[c_uint32]"
    _fields_ = [
        ("work_streams", POINTER(c_uint64)),
        ("work_stream_count", c_uint64),
        ("version", c_int32),
        ("check_pointer", c_uint32),
        ("per_thread_default_stream", c_uint32),
        ("reserved", c_uint32 * 5),
    ]


class CaiSyncOptions(Structure):
    """How `cai_sync` orders the consumer after the producer (zeroed: the defaults)."""

    consumer_stream: int
    sync_mode: int
    reserved: "ctypes.Array[c_uint32]"
    _fields_ = [
        ("consumer_stream", c_uint64),
        ("sync_mode", c_int32),
        ("reserved", c_uint32 * 5),
    ]


class CaiImportOptions(Structure):
    """How `cai_import` (and `cai_python_from_object`) accept an array (zeroed: the
    defaults): consumer stream, sync mode, pointer check, writable, native byte order only,
    host memory allowed."""

    consumer_stream: int
    sync_mode: int
    pointer_check: int
    writable: int
    native_only: int
    allow_host: int
    reserved: "ctypes.Array[c_uint32]"
    _fields_ = [
        ("consumer_stream", c_uint64),
        ("sync_mode", c_int32),
        ("pointer_check", c_int32),
        ("writable", c_uint32),
        ("native_only", c_uint32),
        ("allow_host", c_uint32),
        ("reserved", c_uint32 * 5),
    ]


class CaiPointerInfo(Structure):
    """What the driver said of a data pointer (`cai_import`, `cai_pointer_info`); `checked`
    is 0 when the driver was not asked (an empty array, no driver, or the check off)."""

    device_pointer: int
    allocation_base: int
    allocation_size: int
    context: int | None
    device_ordinal: int
    memory_type: int
    is_managed: int
    checked: int
    reserved: "ctypes.Array[c_uint64]"
    _fields_ = [
        ("device_pointer", c_uint64),
        ("allocation_base", c_uint64),
        ("allocation_size", c_uint64),
        ("context", c_void_p),
        ("device_ordinal", c_int32),
        ("memory_type", c_uint32),
        ("is_managed", c_uint32),
        ("checked", c_uint32),
        ("reserved", c_uint64 * 2),
    ]


class CaiDLPackVersion(Structure):
    """DLPack's `DLPackVersion`."""

    major: int
    minor: int
    _fields_ = [("major", c_uint32), ("minor", c_uint32)]


class CaiDLDevice(Structure):
    """DLPack's `DLDevice`: device type (kDLCUDA is 2) and id."""

    device_type: int
    device_id: int
    _fields_ = [("device_type", c_int32), ("device_id", c_int32)]


class CaiDLTensor(Structure):
    """DLPack's `DLTensor`."""

    data: int | None
    device: CaiDLDevice
    ndim: int
    dtype: CaiDLDataType
    shape: "_Pointer[c_int64]"
    strides: "_Pointer[c_int64]"
    byte_offset: int
    _fields_ = [
        ("data", c_void_p),
        ("device", CaiDLDevice),
        ("ndim", c_int32),
        ("dtype", CaiDLDataType),
        ("shape", POINTER(c_int64)),
        ("strides", POINTER(c_int64)),
        ("byte_offset", c_uint64),
    ]


class CaiDLManagedTensorVersioned(Structure):
    """DLPack's `DLManagedTensorVersioned` (`cai_from_dlpack`, `cai_to_dlpack`)."""

    version: CaiDLPackVersion
    manager_ctx: int | None
    deleter: Any
    flags: int
    dl_tensor: CaiDLTensor


CaiDLManagedTensorVersioned._fields_ = [
    ("version", CaiDLPackVersion),
    ("manager_ctx", c_void_p),
    ("deleter", CFUNCTYPE(None, POINTER(CaiDLManagedTensorVersioned))),
    ("flags", c_uint64),
    ("dl_tensor", CaiDLTensor),
]


class CaiDLManagedTensor(Structure):
    """DLPack's legacy `DLManagedTensor` (`cai_from_dlpack_legacy`, `cai_to_dlpack_legacy`)."""

    dl_tensor: CaiDLTensor
    manager_ctx: int | None
    deleter: Any


CaiDLManagedTensor._fields_ = [
    ("dl_tensor", CaiDLTensor),
    ("manager_ctx", c_void_p),
    ("deleter", CFUNCTYPE(None, POINTER(CaiDLManagedTensor))),
]


class CaiDLPackOptions(Structure):
    """How `cai_from_dlpack` takes a tensor (zeroed: the defaults)."""

    allow_host: int
    reserved: "ctypes.Array[c_uint32]"
    _fields_ = [("allow_host", c_uint32), ("reserved", c_uint32 * 7)]


class CaiIpcDescriptor(Structure):
    """A device array as plain bytes another process opens (`cai_ipc_export`, `cai_ipc_open`):
    `bytes(descriptor)` is what is sent, `CaiIpcDescriptor.from_buffer_copy(data)` reads it."""

    magic: int
    version: int
    size: int
    kind: int
    flags: int
    ndim: int
    reserved_head: int
    shape: "ctypes.Array[c_int64]"
    strides: "ctypes.Array[c_int64]"
    typestr: bytes
    dl_dtype: CaiDLDataType
    reserved_half: int
    offset: int
    allocation_size: int
    device_uuid: "ctypes.Array[ctypes.c_uint8]"
    process_token: "ctypes.Array[ctypes.c_uint8]"
    mem_handle: "ctypes.Array[ctypes.c_uint8]"
    event_handle: "ctypes.Array[ctypes.c_uint8]"
    reserved: "ctypes.Array[c_uint64]"
    checksum: int
    _fields_ = [
        ("magic", c_uint64),
        ("version", c_uint32),
        ("size", c_uint32),
        ("kind", c_uint32),
        ("flags", c_uint32),
        ("ndim", c_int32),
        ("reserved_head", c_uint32),
        ("shape", c_int64 * MAX_NDIM),
        ("strides", c_int64 * MAX_NDIM),
        ("typestr", c_char * TYPESTR_CAPACITY),
        ("dl_dtype", CaiDLDataType),
        ("reserved_half", c_uint32),
        ("offset", c_uint64),
        ("allocation_size", c_uint64),
        ("device_uuid", ctypes.c_uint8 * 16),
        ("process_token", ctypes.c_uint8 * 16),
        ("mem_handle", ctypes.c_uint8 * 64),
        ("event_handle", ctypes.c_uint8 * 64),
        ("reserved", c_uint64 * 32),
        ("checksum", c_uint64),
    ]


#: Every function of cai.h as `name: (restype, argtypes)`, in header order (what `lib` sets).
FUNCTIONS: dict[str, tuple[Any, list[Any]]] = {
    "cai_validate": (c_int32, [POINTER(CaiArray), POINTER(CaiError)]),
    "cai_layout": (c_int32, [POINTER(CaiArray), POINTER(CaiLayout), POINTER(CaiError)]),
    "cai_export": (c_int32, [POINTER(CaiArray), POINTER(CaiExportOptions), POINTER(CaiError)]),
    "cai_release": (c_int32, [POINTER(CaiArray), POINTER(CaiError)]),
    "cai_move": (c_int32, [POINTER(CaiArray), POINTER(CaiArray), POINTER(CaiError)]),
    "cai_import": (c_int32, [POINTER(CaiArray), POINTER(CaiImportOptions), POINTER(CaiPointerInfo), POINTER(CaiError)]),
    "cai_sync": (c_int32, [POINTER(CaiArray), POINTER(CaiSyncOptions), POINTER(CaiError)]),
    "cai_pointer_info": (c_int32, [c_uint64, POINTER(CaiPointerInfo), POINTER(CaiError)]),
    "cai_driver_status": (c_int32, [POINTER(c_int32), POINTER(CaiError)]),
    "cai_typestr_parse": (c_int32, [c_char_p, POINTER(CaiDtype), POINTER(CaiError)]),
    "cai_from_dlpack": (c_int32, [POINTER(CaiDLManagedTensorVersioned), POINTER(CaiDLPackOptions), POINTER(CaiArray),
                                  POINTER(CaiError)]),
    "cai_from_dlpack_legacy": (c_int32, [POINTER(CaiDLManagedTensor), POINTER(CaiDLPackOptions), POINTER(CaiArray),
                                         POINTER(CaiError)]),
    "cai_to_dlpack": (c_int32, [POINTER(CaiArray), POINTER(CaiDLDevice), POINTER(POINTER(CaiDLManagedTensorVersioned)),
                                POINTER(CaiError)]),
    "cai_to_dlpack_legacy": (c_int32, [POINTER(CaiArray), POINTER(CaiDLDevice), POINTER(POINTER(CaiDLManagedTensor)),
                                       POINTER(CaiError)]),
    "cai_status_string": (c_char_p, [c_int32]),
    "cai_library_version": (c_char_p, []),
    "cai_release_after": (c_int32, [POINTER(CaiArray), c_uint64, POINTER(CaiError)]),
    "cai_release_pending": (c_int32, [c_int32, POINTER(c_uint64), POINTER(CaiError)]),
    "cai_ipc_export": (c_int32, [POINTER(CaiArray), POINTER(CaiIpcDescriptor), POINTER(CaiError)]),
    "cai_ipc_open": (c_int32, [POINTER(CaiIpcDescriptor), POINTER(CaiImportOptions), POINTER(CaiArray),
                               POINTER(CaiError)]),
}


def library_path() -> str:
    """The shared library holding libcai's C API for ctypes or cffi: the extension module file."""
    from . import _native

    return _native.__file__


def load() -> ctypes.CDLL:
    """A new ctypes handle on libcai's C API (what `lib` is), every function's types set."""
    lib = ctypes.CDLL(library_path())
    for name, (restype, argtypes) in FUNCTIONS.items():
        function = getattr(lib, name)
        function.restype = restype
        function.argtypes = argtypes
    return lib


#: The ctypes handle on libcai's C API (also `cai.lib`).
lib: ctypes.CDLL = load()


# ctypes' type of what `ctypes.byref` returns (not exported under a name of its own).
_BYREF = type(ctypes.byref(ctypes.c_int()))


def address_of(pointer: object) -> int:
    """The address of the CaiArray that `pointer` refers to, for Array.from_c: a CaiArray
    struct, `ctypes.byref(struct)`, a `POINTER(CaiArray)` or a `c_void_p`. Anything else is a
    TypeError: a str, bytes or another pointer type would otherwise be read as an address."""
    if isinstance(pointer, CaiArray):
        return ctypes.addressof(pointer)
    if isinstance(pointer, (_POINTER_TO_ARRAY, c_void_p)):
        return ctypes.cast(pointer, c_void_p).value or 0
    if isinstance(pointer, _BYREF) and isinstance(pointer._obj, CaiArray):
        address = ctypes.cast(pointer, c_void_p).value or 0
        if address != ctypes.addressof(pointer._obj):
            raise ValueError("pointer is ctypes.byref(CaiArray, offset) with an offset other than 0; "
                             "pass ctypes.byref(array) of the struct itself")
        return address
    raise TypeError(
        f"pointer must be a ctypes POINTER(cai.CaiArray), ctypes.byref(cai.CaiArray), a cai.CaiArray, a "
        f"ctypes.c_void_p or an int address, not {type(pointer).__qualname__}")


_POINTER_TO_ARRAY = POINTER(CaiArray)


def as_parameter(address: int) -> object:
    """What ctypes passes for a cai.Array: a `CaiArray*` to the Array's own struct."""
    return ctypes.byref(CaiArray.from_address(address))
