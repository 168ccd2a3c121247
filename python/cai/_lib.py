"""Loads libcai and declares its C API for ctypes, matching include/cai.h (a test compares them
field by field and function by function)."""

import ctypes
import os
import pathlib
from ctypes import CFUNCTYPE, POINTER, Structure, c_char, c_char_p, c_int32, c_uint32, c_uint64, c_int64, c_void_p

MAX_NDIM = 64
TYPESTR_CAPACITY = 32
FIELD_NAME_CAPACITY = 64
ERROR_MESSAGE_CAPACITY = 512

STATUS_NAMES = {
    0: "CAI_OK", 1: "CAI_ERROR_NULL_ARGUMENT", 2: "CAI_ERROR_INVALID_ARGUMENT", 3: "CAI_ERROR_INVALID_VERSION",
    4: "CAI_ERROR_INVALID_SHAPE", 5: "CAI_ERROR_INVALID_STRIDES", 6: "CAI_ERROR_INVALID_TYPESTR",
    7: "CAI_ERROR_INVALID_DATA", 8: "CAI_ERROR_INVALID_STREAM", 9: "CAI_ERROR_INVALID_MASK",
    10: "CAI_ERROR_INVALID_DESCR", 11: "CAI_ERROR_OVERFLOW", 12: "CAI_ERROR_READONLY", 13: "CAI_ERROR_NO_DRIVER",
    14: "CAI_ERROR_DRIVER", 15: "CAI_ERROR_NOT_DEVICE_POINTER", 16: "CAI_ERROR_OUT_OF_BOUNDS", 17: "CAI_ERROR_PANIC",
}
STATUS_CODES = {name: code for code, name in STATUS_NAMES.items()}

SYNC_DEFAULT, SYNC_STREAM_ORDERED, SYNC_BLOCKING, SYNC_NONE = 0, 1, 2, 3
POINTER_CHECK_DEFAULT, POINTER_CHECK_ALWAYS, POINTER_CHECK_NEVER = 0, 1, 2


class CaiField(Structure):
    _fields_ = [("name", c_char * FIELD_NAME_CAPACITY), ("typestr", c_char * TYPESTR_CAPACITY), ("offset", c_uint64)]


class CaiArray(Structure):
    pass


RELEASE_FN = CFUNCTYPE(None, POINTER(CaiArray))

CaiArray._fields_ = [
    ("version", c_int32),
    ("ndim", c_int32),
    ("readonly", c_uint32),
    ("strides_given", c_uint32),
    ("typestr", c_char * TYPESTR_CAPACITY),
    ("data", c_uint64),
    ("stream", c_uint64),
    ("shape", c_int64 * MAX_NDIM),
    ("strides", c_int64 * MAX_NDIM),
    ("mask", POINTER(CaiArray)),
    ("descr", POINTER(CaiField)),
    ("descr_count", c_uint64),
    ("owner", c_void_p),
    ("release", RELEASE_FN),
    ("reserved", c_uint64 * 4),
]


class CaiError(Structure):
    _fields_ = [("code", c_int32), ("cu_result", c_int32), ("message", c_char * ERROR_MESSAGE_CAPACITY)]


class CaiLayout(Structure):
    _fields_ = [
        ("element_count", c_uint64),
        ("nbytes", c_uint64),
        ("extent_begin", c_int64),
        ("extent_end", c_int64),
        ("c_contiguous", c_uint32),
        ("f_contiguous", c_uint32),
        ("strides_itemsize_aligned", c_uint32),
    ]


class CaiDtype(Structure):
    _fields_ = [("itemsize", c_uint64), ("kind", c_char), ("byteorder", c_char)]


class CaiExportOptions(Structure):
    _fields_ = [
        ("work_streams", POINTER(c_uint64)),
        ("work_stream_count", c_uint64),
        ("version", c_int32),
        ("check_pointer", c_uint32),
        ("per_thread_default_stream", c_uint32),
        ("reserved", c_uint32 * 5),
    ]


class CaiImportOptions(Structure):
    _fields_ = [
        ("consumer_stream", c_uint64),
        ("sync_mode", c_int32),
        ("pointer_check", c_int32),
        ("writable", c_uint32),
        ("native_only", c_uint32),
        ("reserved", c_uint32 * 6),
    ]


class CaiPointerInfo(Structure):
    _fields_ = [
        ("device_pointer", c_uint64),
        ("allocation_base", c_uint64),
        ("allocation_size", c_uint64),
        ("context", c_void_p),
        ("device_ordinal", c_int32),
        ("memory_type", c_uint32),
        ("is_managed", c_uint32),
        ("checked", c_uint32),
    ]


# name: (restype, argtypes), in header order.
FUNCTIONS = {
    "cai_validate": (c_int32, [POINTER(CaiArray), POINTER(CaiError)]),
    "cai_layout": (c_int32, [POINTER(CaiArray), POINTER(CaiLayout), POINTER(CaiError)]),
    "cai_export": (c_int32, [POINTER(CaiArray), POINTER(CaiExportOptions), POINTER(CaiError)]),
    "cai_release": (c_int32, [POINTER(CaiArray), POINTER(CaiError)]),
    "cai_import": (c_int32, [POINTER(CaiArray), POINTER(CaiImportOptions), POINTER(CaiPointerInfo), POINTER(CaiError)]),
    "cai_sync": (c_int32, [POINTER(CaiArray), c_uint64, c_int32, POINTER(CaiError)]),
    "cai_pointer_info": (c_int32, [c_uint64, POINTER(CaiPointerInfo), POINTER(CaiError)]),
    "cai_driver_status": (c_int32, [POINTER(c_int32), POINTER(CaiError)]),
    "cai_typestr_parse": (c_int32, [c_char_p, POINTER(CaiDtype), POINTER(CaiError)]),
    "cai_status_string": (c_char_p, [c_int32]),
    "cai_library_version": (c_char_p, []),
}


def library_path():
    """CAI_LIBRARY, else libcai.so next to this package, else the repository's build tree."""
    explicit = os.environ.get("CAI_LIBRARY")
    if explicit:
        return pathlib.Path(explicit)
    here = pathlib.Path(__file__).resolve().parent
    candidates = [here / "libcai.so"]
    repository = here.parents[1]
    candidates += [repository / "target" / profile / "libcai.so" for profile in ("release", "debug")]
    for candidate in candidates:
        if candidate.exists():
            return candidate
    raise OSError(
        "libcai.so not found: set CAI_LIBRARY, put libcai.so next to the cai package, or build the "
        "repository with `cargo build --release`; looked in " + ", ".join(str(c) for c in candidates)
    )


def load():
    path = str(library_path())
    lib = ctypes.CDLL(path)
    for name, (restype, argtypes) in FUNCTIONS.items():
        function = getattr(lib, name)
        function.restype = restype
        function.argtypes = argtypes
    return lib, native_functions(path)


# import_dict's answer when the dict needs the Python rules.
PYTHON_NOT_HANDLED = -1


def native_functions(path):
    """libcai's builtins `fill(desc, struct)` and `import_dict(desc, struct, options, error)`
    (src/python/functions.rs), made with the GIL held, hence PyDLL. Where they cannot
    be made, stand-ins that leave every dict to the Python rules."""
    make = ctypes.PyDLL(path).cai_python_functions
    make.restype, make.argtypes = ctypes.py_object, []
    try:
        return make()
    except ValueError:  # NULL: no CPython API found in this process
        return (lambda desc, struct: False), (lambda desc, struct, options, error: PYTHON_NOT_HANDLED)


lib, (python_fill, python_import) = load()
