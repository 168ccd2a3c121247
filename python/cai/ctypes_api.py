"""libcai's C API for ctypes: the structs of include/cai.h under their C names, and `lib`, a
ctypes handle on the functions of cai.h with their argument and result types set.

    import ctypes, cai
    from cai.ctypes_api import CaiError, CaiLayout, lib

    a = cai.from_object(producer)
    layout, error = CaiLayout(), CaiError()
    if lib.cai_layout(a, ctypes.byref(layout), ctypes.byref(error)) != 0:
        raise RuntimeError(error.message.decode())

A `cai.Array` passes wherever a `CaiArray *` is taken. The functions live in the extension
module, which carries the C API too, so ctypes calls and `cai.from_object` share one copy of
the driver state. `CaiError` here is the C struct a call fills; the exception libcai raises in
Python is `cai.CaiError`. (A test compares every struct field by field and every function with
the header.)"""

from ._ctypes import (
    MAX_NDIM,
    TYPESTR_CAPACITY,
    FIELD_NAME_CAPACITY,
    ERROR_MESSAGE_CAPACITY,
    RELEASE_FN,
    CaiArray,
    CaiField,
    CaiError,
    CaiLayout,
    CaiDtype,
    CaiExportOptions,
    CaiSyncOptions,
    CaiImportOptions,
    CaiPointerInfo,
    CaiDLPackVersion,
    CaiDLDevice,
    CaiDLDataType,
    CaiDLTensor,
    CaiDLManagedTensorVersioned,
    CaiDLManagedTensor,
    CaiDLPackOptions,
    CaiIpcDescriptor,
    FUNCTIONS,
    library_path,
    lib,
)

__all__ = [
    "MAX_NDIM", "TYPESTR_CAPACITY", "FIELD_NAME_CAPACITY", "ERROR_MESSAGE_CAPACITY", "RELEASE_FN",
    "CaiArray", "CaiField", "CaiError", "CaiLayout", "CaiDtype", "CaiExportOptions", "CaiSyncOptions",
    "CaiImportOptions", "CaiPointerInfo", "CaiDLPackVersion", "CaiDLDevice", "CaiDLDataType", "CaiDLTensor",
    "CaiDLManagedTensorVersioned", "CaiDLManagedTensor", "CaiDLPackOptions", "CaiIpcDescriptor", "FUNCTIONS", "library_path",
    "lib",
]
