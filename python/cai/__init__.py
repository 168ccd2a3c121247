"""libcai from Python: import any `__cuda_array_interface__` object, validated by every rule of
the spec and synchronized with its producer's stream, as a cai.Array that C functions take
directly. The work is done by libcai's Rust core, in the extension module cai._native."""

try:
    from . import _native
except ImportError as error:  # PyPy, a CPython before 3.10, another platform's build, a subinterpreter
    if str(error).startswith("cai: "):  # the module's own refusal (a subinterpreter) says why
        raise
    if "subinterpreters" in str(error):  # CPython's own refusal, in an isolated subinterpreter
        raise ImportError(
            f"cai: libcai's extension module (cai._native) loads only in the main interpreter ({error})"
        ) from error
    import sys

    raise ImportError(
        f"cai: libcai's extension module cai._native does not load on {sys.implementation.name} "
        f"{sys.version.split()[0]} ({error}); cai needs CPython 3.10 or later on the platform its wheel "
        "was built for"
    ) from error

from ._errors import CaiError, PointerNotCheckedWarning
from ._native import (
    POINTER_CHECK_ALWAYS, POINTER_CHECK_DEFAULT, POINTER_CHECK_NEVER, SYNC_BLOCKING, SYNC_DEFAULT, SYNC_NONE,
    SYNC_STREAM_ORDERED, Array, from_buffer_interface, from_object, ipc_export, ipc_open, release_pending, validate,
)
from . import ctypes_api
# The ctypes struct's canonical name is cai.ctypes_api.CaiArray; cai.CaiArray stays its alias.
from .ctypes_api import CaiArray, lib, library_path

__version__: str = _native.__version__


def get_include() -> str:
    """The folder of libcai's C headers shipped in this package: give it to the compiler (`-I`)
    of an extension, as `numpy.get_include()` is given. cai_python.h is the C API for compiled
    extensions (no library to link: the functions come from this package at import), with
    cai/pybind11.h and cai/nanobind.h its casters for cai::Array; cai.h, cai.hpp and cai_cffi.h
    are libcai's own C and C++ API. Cython's declarations are `cai/capi.pxd`
    (`from cai.capi cimport ...`)."""
    import os

    return os.path.join(os.path.dirname(__file__), "include")


def cffi_cdef() -> str:
    """libcai's declarations in the form cffi's `FFI.cdef` takes (cai_cffi.h), for
    `ffi.dlopen(cai.library_path())`. A cai.Array passes as `ffi.cast("CaiArray *", a.ptr)`."""
    import os

    with open(os.path.join(get_include(), "cai_cffi.h"), encoding="utf-8") as header:
        return header.read()

__all__ = [
    "Array", "CaiArray", "CaiError", "PointerNotCheckedWarning", "from_buffer_interface", "from_object", "validate",
    "release_pending", "ipc_export", "ipc_open",
    "library_path", "lib", "ctypes_api", "get_include", "cffi_cdef",
    "SYNC_DEFAULT", "SYNC_STREAM_ORDERED", "SYNC_BLOCKING", "SYNC_NONE",
    "POINTER_CHECK_DEFAULT", "POINTER_CHECK_ALWAYS", "POINTER_CHECK_NEVER",
]
