"""The ctypes declarations in python/cai/_ctypes.py match include/cai.h: every struct field at the
same offset with the same size, and every function with the same argument and result kinds."""

import ctypes
import re

import cffi

import cai._ctypes as declared
from conftest import ROOT

HEADER = (ROOT / "include" / "cai_cffi.h").read_text()
STRUCTS = ["CaiArray", "CaiField", "CaiError", "CaiLayout", "CaiDtype", "CaiExportOptions", "CaiImportOptions",
           "CaiSyncOptions",
           "CaiPointerInfo", "CaiDLPackVersion", "CaiDLDevice", "CaiDLDataType", "CaiDLTensor",
           "CaiDLManagedTensorVersioned", "CaiDLManagedTensor", "CaiDLPackOptions", "CaiIpcDescriptor"]


def header_ffi():
    ffi = cffi.FFI()
    ffi.cdef(HEADER)
    return ffi


def test_every_struct_field_matches_the_header():
    ffi = header_ffi()
    assert set(re.findall(r"typedef struct (\w+)", HEADER)) == set(STRUCTS)
    for name in STRUCTS:
        ours = getattr(declared, name)
        theirs = ffi.typeof(name)
        assert [f for f, _ in ours._fields_] == [f for f, _ in theirs.fields], name
        assert ctypes.sizeof(ours) == ffi.sizeof(name), name
        for field, info in theirs.fields:
            assert getattr(ours, field).offset == info.offset, f"{name}.{field}"
            assert getattr(ours, field).size == ffi.sizeof(info.type), f"{name}.{field}"


def kind(ctype):
    if ctype is None:
        return "void"
    if isinstance(ctype, str):
        return ctype
    if ctype is ctypes.c_char_p:
        return "pointer"
    if hasattr(ctype, "contents") or ctype.__name__.startswith("LP_"):
        return "pointer"
    return f"int{ctypes.sizeof(ctype) * 8}"


def header_kind(t):
    if t.kind == "pointer":
        return "pointer"
    if t.kind == "primitive":
        return f"int{cffi.FFI().sizeof(t.cname) * 8}"
    return t.kind


def test_every_function_matches_the_header():
    ffi = header_ffi()
    names = re.findall(r"\b(cai_\w+)\(", HEADER)
    assert sorted(names) == sorted(declared.FUNCTIONS)
    for name in names:
        restype, argtypes = declared.FUNCTIONS[name]
        theirs = _function_type(ffi, name)
        assert [kind(a) for a in argtypes] == [header_kind(a) for a in theirs.args], name
        assert kind(restype) == header_kind(theirs.result), name


def _function_type(ffi, name):
    lib = ffi.dlopen(str(declared.library_path()))
    return ffi.typeof(getattr(lib, name))


def test_the_python_c_api_table_lists_every_function_of_cai_h_in_one_order():
    """cai_python.h's table, its macros and the Rust table (cai-python/src/ffi.rs, which the
    extension's python/src/entry/c_api_table.rs fills and Rust extensions read) name
    every function of cai.h, member for member in the same order (then the members appended by
    minor versions); capi.pxd's array sizes are cai.h's."""
    functions = re.findall(r"^\w[\w *]*?\b(cai_\w+)\(", (ROOT / "include" / "cai.h").read_text(), re.M)
    python_header = (ROOT / "include" / "cai_python.h").read_text()
    members = re.findall(r"\(\*(cai_\w+)\)\(", python_header)
    macros = re.findall(r"^#define (cai_\w+) \(cai_python_table\(\)->(cai_\w+)\)", python_header, re.M)
    rust = re.findall(r"^    pub (cai_\w+):", (ROOT / "cai-python" / "src" / "ffi.rs").read_text(), re.M)
    assert len(functions) >= 16
    # cai.h's functions that came after the table's minor 3 are appended with minors 4 and 5.
    appended = ["cai_release_after", "cai_release_pending", "cai_ipc_export", "cai_ipc_open"]
    assert functions[-len(appended):] == appended
    assert members == ["cai_python_from_object", "cai_python_to_object", *functions[:-len(appended)],
                       "cai_python_view", "cai_python_from_buffer_interface", "cai_python_offer_to",
                       "cai_python_view_or_own", *appended]
    assert rust == members
    # cai_python_offer_to is called by the header's inline cai_python_offer, which picks its dict.
    assert macros == [(name, name) for name in members if name != "cai_python_offer_to"]
    assert "static inline int cai_python_offer(PyTypeObject *type, CaiPythonFill fill)" in python_header
    pxd = (ROOT / "python" / "cai" / "capi.pxd").read_text()
    sizes = {"CAI_MAX_NDIM": "shape", "CAI_TYPESTR_CAPACITY": "typestr", "CAI_ERROR_MESSAGE_CAPACITY": "message",
             "CAI_FIELD_NAME_CAPACITY": "name"}
    for constant, field in sizes.items():
        value = re.search(rf"#define {constant} (\d+)", HEADER).group(1)
        assert re.search(rf"\b{field}\[{value}\]", pxd), (constant, field)
