//! The Python binding's entry point (see src/python). Not part of the C API: cbindgen leaves
//! it out of cai.h.

/// For python/cai only, called once through ctypes.PyDLL (the GIL held) with restype
/// py_object: a new reference to the tuple of builtins `(fill, import_dict)`, or NULL (ctypes
/// then raises ValueError and the binding uses its Python rules alone) when no CPython API
/// resolves in this process.
#[no_mangle]
pub extern "C" fn cai_python_functions() -> *mut std::ffi::c_void {
    std::panic::catch_unwind(crate::python::python_functions).unwrap_or(std::ptr::null_mut())
}
