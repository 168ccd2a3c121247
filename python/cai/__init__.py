"""libcai from Python: import any `__cuda_array_interface__` object, validated by every rule of
the spec and synchronized with its producer's stream, as a cai.Array that C functions take
directly. Pure Python over libcai's C API (ctypes); no compiler needed."""

from ._array import Array, from_object, validate
from ._errors import CaiError
from ._lib import (
    POINTER_CHECK_ALWAYS, POINTER_CHECK_DEFAULT, POINTER_CHECK_NEVER, SYNC_BLOCKING, SYNC_DEFAULT, SYNC_NONE,
    SYNC_STREAM_ORDERED, CaiArray, library_path, lib,
)

__version__ = lib.cai_library_version().decode()

__all__ = [
    "Array", "CaiArray", "CaiError", "from_object", "validate", "library_path", "lib",
    "SYNC_DEFAULT", "SYNC_STREAM_ORDERED", "SYNC_BLOCKING", "SYNC_NONE",
    "POINTER_CHECK_DEFAULT", "POINTER_CHECK_ALWAYS", "POINTER_CHECK_NEVER",
]
