"""The cffi declarations shipped in the package (cai.cffi_cdef(), include/cai_cffi.h) are accepted
by cffi's cdef, and the library they declare works through them."""

import cffi

from conftest import ROOT, library_path


def test_cffi_cdef_accepts_the_generated_declarations_and_calls_work():
    import cai

    assert cai.cffi_cdef() == (ROOT / "include" / "cai_cffi.h").read_text(), "the wheel's copy is current"
    ffi = cffi.FFI()
    ffi.cdef(cai.cffi_cdef())
    lib = ffi.dlopen(str(library_path()))
    assert ffi.sizeof("CaiArray") == 1160
    array = ffi.new("CaiArray *")
    array.version = 3
    array.ndim = 2
    array.shape[0], array.shape[1] = 3, 4
    array.typestr = b"<f4"
    array.data = 0x10000
    error = ffi.new("CaiError *")
    assert lib.cai_validate(array, error) == lib.CAI_OK
    layout = ffi.new("CaiLayout *")
    assert lib.cai_layout(array, layout, ffi.NULL) == lib.CAI_OK
    assert (layout.element_count, layout.nbytes, layout.c_contiguous) == (12, 48, 1)
    array.shape[1] = -4
    assert lib.cai_validate(array, error) == lib.CAI_ERROR_INVALID_SHAPE
    assert b"shape[1] is -4" in ffi.string(error.message)
    assert ffi.string(lib.cai_status_string(lib.CAI_ERROR_INVALID_SHAPE)) == b"CAI_ERROR_INVALID_SHAPE"


def test_a_cai_array_passes_to_cffi_by_address_and_shares_the_extensions_library():
    import cai

    ffi = cffi.FFI()
    ffi.cdef(cai.cffi_cdef())
    lib = ffi.dlopen(cai.library_path())
    a = cai.from_object({"shape": (2, 3), "typestr": "<f4", "data": (0x10000, False), "version": 3,
                         "strides": (4, 8)}, sync=False, pointer_check=cai.POINTER_CHECK_NEVER)
    struct = ffi.cast("CaiArray *", a.ptr)
    assert (struct.ndim, struct.shape[1], struct.strides[1], ffi.string(struct.typestr)) == (2, 3, 8, b"<f4")
    layout = ffi.new("CaiLayout *")
    assert lib.cai_layout(struct, layout, ffi.NULL) == lib.CAI_OK
    assert (layout.element_count, layout.f_contiguous) == (6, 1)


def test_the_readmes_ctypes_and_cffi_block_runs(capsys):
    """README.md's ctypes and cffi section, run as written (here, not in test_readme_blocks.py:
    the free-threaded leg has no cffi and leaves this file out)."""
    import re

    readme = (ROOT / "README.md").read_text()
    [code] = re.findall(r"<!-- tested: run by python/tests/test_cffi_declarations.py -->\n```python\n(.*?)```",
                        readme, re.S)
    exec(compile(code, "README.md", "exec"), {})
    assert capsys.readouterr().out == "24\n"
