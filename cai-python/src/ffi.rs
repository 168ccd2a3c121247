//! include/cai_python.h's table, member for member, as the installed `cai` package publishes
//! it in the capsule `cai._native._C_API`. The package's extension (python/src/capi.rs) fills
//! this very struct, so the Rust side has one definition of the layout.

use std::ffi::{c_char, CStr};

use cai::{
    CaiArray, CaiDLDevice, CaiDLManagedTensor, CaiDLManagedTensorVersioned, CaiDLPackOptions, CaiDtype,
    CaiError, CaiExportOptions, CaiImportOptions, CaiLayout, CaiPointerInfo, CaiStatus, CaiSyncOptions,
};
use pyo3::ffi::PyObject;

/// CAI_PYTHON_API_MAJOR: a table of another major is refused.
pub const CAI_PYTHON_API_MAJOR: u32 = 1;
/// CAI_PYTHON_API_MINOR: the members this crate calls (`cai_python_view` came with minor 1).
pub const CAI_PYTHON_API_MINOR: u32 = 1;
/// CAI_PYTHON_CAPSULE_NAME.
pub const CAI_PYTHON_CAPSULE_NAME: &CStr = c"cai._native._C_API";

/// `cai_python_from_object` and `cai_python_view`.
pub type FromObject =
    unsafe extern "C" fn(*mut PyObject, *const CaiImportOptions, *mut CaiArray, *mut CaiError) -> i32;

/// cai_python.h's `CaiPythonApi`: see the header for each member's contract.
#[repr(C)]
#[allow(missing_docs)]
pub struct CaiPythonApi {
    pub major: u32,
    pub minor: u32,
    pub size: u64,
    pub cai_python_from_object: FromObject,
    pub cai_python_to_object: unsafe extern "C" fn(*mut CaiArray) -> *mut PyObject,
    pub cai_validate: unsafe extern "C" fn(*const CaiArray, *mut CaiError) -> CaiStatus,
    pub cai_layout: unsafe extern "C" fn(*const CaiArray, *mut CaiLayout, *mut CaiError) -> CaiStatus,
    pub cai_export: unsafe extern "C" fn(*mut CaiArray, *const CaiExportOptions, *mut CaiError) -> CaiStatus,
    pub cai_release: unsafe extern "C" fn(*mut CaiArray, *mut CaiError) -> CaiStatus,
    pub cai_move: unsafe extern "C" fn(*mut CaiArray, *mut CaiArray, *mut CaiError) -> CaiStatus,
    pub cai_import: unsafe extern "C" fn(
        *const CaiArray,
        *const CaiImportOptions,
        *mut CaiPointerInfo,
        *mut CaiError,
    ) -> CaiStatus,
    pub cai_sync: unsafe extern "C" fn(*const CaiArray, *const CaiSyncOptions, *mut CaiError) -> CaiStatus,
    pub cai_pointer_info: unsafe extern "C" fn(u64, *mut CaiPointerInfo, *mut CaiError) -> CaiStatus,
    pub cai_driver_status: unsafe extern "C" fn(*mut i32, *mut CaiError) -> CaiStatus,
    pub cai_from_dlpack: unsafe extern "C" fn(
        *mut CaiDLManagedTensorVersioned,
        *const CaiDLPackOptions,
        *mut CaiArray,
        *mut CaiError,
    ) -> CaiStatus,
    pub cai_from_dlpack_legacy: unsafe extern "C" fn(
        *mut CaiDLManagedTensor,
        *const CaiDLPackOptions,
        *mut CaiArray,
        *mut CaiError,
    ) -> CaiStatus,
    pub cai_to_dlpack: unsafe extern "C" fn(
        *mut CaiArray,
        *const CaiDLDevice,
        *mut *mut CaiDLManagedTensorVersioned,
        *mut CaiError,
    ) -> CaiStatus,
    pub cai_to_dlpack_legacy: unsafe extern "C" fn(
        *mut CaiArray,
        *const CaiDLDevice,
        *mut *mut CaiDLManagedTensor,
        *mut CaiError,
    ) -> CaiStatus,
    pub cai_typestr_parse: unsafe extern "C" fn(*const c_char, *mut CaiDtype, *mut CaiError) -> CaiStatus,
    pub cai_status_string: extern "C" fn(CaiStatus) -> *const c_char,
    pub cai_library_version: extern "C" fn() -> *const c_char,
    pub cai_python_view: FromObject,
    pub cai_python_from_buffer_interface: FromObject,
}
