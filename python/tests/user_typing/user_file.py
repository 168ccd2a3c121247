# pyright: strict
"""A user's program that calls every documented function and member of `cai` with the types
the documentation gives: python/tests/test_public_surface.py type-checks it with mypy --strict
and pyright (strict) against the installed package. It is checked, never run."""

import ctypes
import warnings
from typing import Any

import cai
import cai.testing
from cai.ctypes_api import (
    CaiArray,
    CaiDLPackOptions,
    CaiDtype,
    CaiError,
    CaiExportOptions,
    CaiImportOptions,
    CaiLayout,
    CaiPointerInfo,
    CaiSyncOptions,
    lib,
)


def describe(a: cai.Array) -> str:
    shape: tuple[int, ...] = a.shape
    strides: tuple[int, ...] = a.strides
    ndim: int = a.ndim
    size: int = a.size
    nbytes: int = a.nbytes
    itemsize: int = a.itemsize
    typestr: str = a.typestr
    element_type: str | None = a.element_type
    readonly: bool = a.readonly
    contiguous: bool = a.is_c_contiguous or a.is_f_contiguous
    data: int = a.data_ptr
    ptr: int = a.ptr
    stream: int | None = a.stream
    info: dict[str, int] | None = a.pointer_info
    checked = "unchecked" if info is None else hex(info["allocation_base"])
    mask: cai.Array | None = a.mask
    interface: dict[str, Any] = a.__cuda_array_interface__
    device: tuple[int, int] = a.__dlpack_device__()
    offset: int = a.offset
    return (f"{shape} {strides} {ndim} {size} {nbytes} {itemsize} {typestr} {element_type} {readonly} {contiguous} {data:#x} "
            f"{ptr} {stream} {checked} {mask is None} {sorted(interface)} {device} {offset} {a.owner} {a.buffer}"
            f" {a.dtype} {a.__dlpack__(stream=None, max_version=(1, 1))}")


def use(producer: object, host: object, buffer_producer: object) -> None:
    a: cai.Array = cai.from_object(producer, stream=1, sync=False, writable=False,
                                   pointer_check=cai.POINTER_CHECK_DEFAULT, allow_host=False)
    print(describe(a))
    cai.from_object(host, allow_host=True, pointer_check=cai.POINTER_CHECK_NEVER, sync=cai.SYNC_NONE)
    cai.from_object(producer, sync=cai.SYNC_STREAM_ORDERED, pointer_check=cai.POINTER_CHECK_ALWAYS)
    cai.from_object(producer, sync=cai.SYNC_BLOCKING)
    cai.from_object(producer, sync=cai.SYNC_DEFAULT)
    b: cai.Array = cai.from_buffer_interface(buffer_producer, queue=None, sync=True, writable=True)
    b.release()
    a.release(stream=2)
    still_pending: int = cai.release_pending(wait=True)
    descriptor: bytes = cai.ipc_export(producer, stream=None)
    opened: cai.Array = cai.ipc_open(descriptor, stream=1, sync=cai.SYNC_DEFAULT)
    print(opened.shape, opened.__reduce__())
    print(still_pending)
    try:
        cai.validate({"shape": (3,), "typestr": "<f4", "data": (0x1000, False), "version": 3, "stream": 0})
    except cai.CaiError as e:
        status: str = e.status
        code: int = e.code
        driver_result: int = e.driver_result
        print(status, code, driver_result, e)
    with warnings.catch_warnings():
        warnings.simplefilter("error", cai.PointerNotCheckedWarning)
        cai.from_object(producer)

    # The producer conformance kit: findings, an empty list when the producer conforms.
    findings: list[cai.testing.Finding] = cai.testing.check_producer(producer, notes=True)
    for finding in findings:
        protocols: tuple[str, ...] = finding.protocols
        values: tuple[Any, ...] = finding.values
        print(protocols, finding.field, values, finding.detail, finding.severity, str(finding))

    include: str = cai.get_include()
    cdef: str = cai.cffi_cdef()
    path: str = cai.library_path()
    version: str = cai.__version__
    print(include, len(cdef), path, version)

    # ctypes: the structs under cai.ctypes_api, a cai.Array passed as CaiArray*.
    layout, error = CaiLayout(), CaiError()
    if lib.cai_layout(a, ctypes.byref(layout), ctypes.byref(error)) != 0:
        raise RuntimeError(error.message.decode())
    nbytes: int = layout.nbytes
    c_contiguous: bool = layout.c_contiguous == 1
    options = CaiImportOptions(allow_host=1)
    pointer = CaiPointerInfo()
    raw = CaiArray.from_address(a.ptr)
    status_code: int = cai.lib.cai_import(ctypes.byref(raw), ctypes.byref(options), ctypes.byref(pointer), None)
    checked: int = pointer.checked
    dtype = CaiDtype()
    lib.cai_typestr_parse(b"<f4", ctypes.byref(dtype), None)
    itemsize: int = dtype.itemsize
    print(nbytes, c_contiguous, status_code, checked, itemsize, raw.typestr.decode(), raw.shape[0],
          CaiExportOptions(), CaiSyncOptions(), CaiDLPackOptions())
    legacy: type[cai.ctypes_api.CaiArray] = cai.CaiArray
    taken: cai.Array = cai.Array.from_c(ctypes.byref(legacy()))
    print(taken)
