//! The Python binding's fast path (see src/python.rs). Not part of the C API: cbindgen leaves
//! it out of cai.h.

use super::optional_mut;
use crate::array::CaiArray;

/// For python/cai only, called through ctypes.PyDLL (the GIL held): fills `*out` from a
/// `__cuda_array_interface__` dict when it is the common, plainly valid case and returns 1;
/// returns 0 (with `*out` zeroed) when the binding must convert the dict itself. Never raises
/// and never runs Python code.
// `dict` is a PyObject* from ctypes, handed to CPython's own functions; like every pointer
// argument of the C API, its validity is the caller's promise.
#[allow(clippy::not_unsafe_ptr_arg_deref)]
#[no_mangle]
pub extern "C" fn cai_python_fill(dict: *mut std::ffi::c_void, out: *mut CaiArray) -> i32 {
    let Some(out) = optional_mut(out) else { return 0 };
    let filled = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        *out = CaiArray::zeroed();
        // SAFETY: the binding calls this with the GIL held and a live object.
        !dict.is_null() && unsafe { crate::python::fill_from_dict(dict, out) }
    }))
    .unwrap_or(false);
    if !filled {
        *out = CaiArray::zeroed();
    }
    filled.into()
}

/// Returned by `cai_python_import` when the dict needs the binding's Python rules.
pub const CAI_PYTHON_NOT_HANDLED: i32 = -1;

/// For python/cai only, through ctypes.PyDLL (the GIL held): `cai_python_fill` then
/// `cai_import`, in one call. The binding uses it only where the import cannot block (no
/// producer stream, sync off, or stream-ordered onto a consumer stream), so the GIL is never
/// held across a host-side wait. Returns CAI_PYTHON_NOT_HANDLED when the binding must convert
/// the dict itself, else `cai_import`'s status.
#[no_mangle]
pub extern "C" fn cai_python_import(
    dict: *mut std::ffi::c_void,
    out: *mut CaiArray,
    options: *const crate::import::CaiImportOptions,
    info: *mut crate::device::pointer::CaiPointerInfo,
    error: *mut super::CaiError,
) -> i32 {
    if cai_python_fill(dict, out) == 0 {
        return CAI_PYTHON_NOT_HANDLED;
    }
    super::cai_import(out, options, info, error)
}
