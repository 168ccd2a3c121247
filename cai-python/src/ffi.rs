//! include/cai_python.h's table, member for member, as the installed `cai` package publishes it
//! in the capsule `cai._native._C_API`. The package's extension
//! (python/src/entry/c_api_table.rs) fills this very struct, so the Rust side has one
//! definition of the layout.

use std::ffi::{c_char, CStr};

use cai::{
    CaiArray, CaiDLDevice, CaiDLManagedTensor, CaiDLManagedTensorVersioned, CaiDLPackOptions, CaiDtype,
    CaiError, CaiExportOptions, CaiImportOptions, CaiIpcDescriptor, CaiLayout, CaiPointerInfo, CaiStatus,
    CaiSyncOptions,
};
use pyo3::ffi::{PyObject, PyTypeObject};

/// CAI_PYTHON_API_MAJOR: a table of another major is refused.
pub const CAI_PYTHON_API_MAJOR: u32 = 1;
/// CAI_PYTHON_API_MINOR: the members of [`CaiPythonApi`] (`cai_python_view` came with minor
/// 1, `cai_python_offer_to` with minor 2, `cai_python_view_or_own` with minor 3,
/// `cai_release_after` and `cai_release_pending` with minor 4, `cai_ipc_export` and
/// `cai_ipc_open` with minor 5).
pub const CAI_PYTHON_API_MINOR: u32 = 5;
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
    pub cai_python_offer_to:
        unsafe extern "C" fn(*mut PyTypeObject, Option<CaiPythonFill>, *mut PyObject) -> i32,
    pub cai_python_view_or_own: FromObject,
    pub cai_release_after: unsafe extern "C" fn(*mut CaiArray, u64, *mut CaiError) -> CaiStatus,
    pub cai_release_pending: unsafe extern "C" fn(i32, *mut u64, *mut CaiError) -> CaiStatus,
    pub cai_ipc_export:
        unsafe extern "C" fn(*const CaiArray, *mut CaiIpcDescriptor, *mut CaiError) -> CaiStatus,
    pub cai_ipc_open: unsafe extern "C" fn(
        *const CaiIpcDescriptor,
        *const CaiImportOptions,
        *mut CaiArray,
        *mut CaiError,
    ) -> CaiStatus,
}

/// cai_python.h's `CaiPythonFill`: describes `self` into `out` (constant fields and defaults
/// written already) and, for host memory, sets `device` (preset to CUDA, ordinal -1: found
/// from the pointer).
pub type CaiPythonFill =
    unsafe extern "C" fn(*mut PyObject, *mut CaiArray, *mut CaiDLDevice, *mut CaiError) -> CaiStatus;

/// The C-level CAI (docs/c-level-cai.md): the type attribute holding the table's capsule.
pub const CAI_C_API_ATTRIBUTE: &CStr = c"__cuda_array_interface_c_api__";
/// The capsule's name.
pub const CAI_C_API_CAPSULE_NAME: &CStr = c"cuda_array_interface_c_api";
/// The table's major version this crate reads and writes.
pub const CAI_C_API_MAJOR: u32 = 1;
/// The table's minor version this crate writes.
pub const CAI_C_API_MINOR: u32 = 1;
/// `CaiRequest.flags`: host memory may be described.
pub const CAI_REQUEST_ALLOW_HOST: u64 = 1;
/// The flags a consumer must not set unless the producer understands them (bits 0-31).
pub const CAI_REQUEST_MUST_UNDERSTAND: u64 = 0xffff_ffff;

/// `CaiCApiVersion`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[allow(missing_docs)]
pub struct CaiCApiVersion {
    pub major: u32,
    pub minor: u32,
}

/// `CaiCApiHeader`: the table's version and a table of an older major, or NULL.
#[repr(C)]
#[allow(missing_docs)]
pub struct CaiCApiHeader {
    pub version: CaiCApiVersion,
    pub prev_api: *const CaiCApiHeader,
}

/// `CaiRequest`: what the consumer asks (NULL: all zero).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
#[allow(missing_docs)]
pub struct CaiRequest {
    pub flags: u64,
    pub consumer_stream: u64,
    pub reserved: [u64; 2],
}

/// `view` and `acquire`.
pub type CaiCApiDescribe = unsafe extern "C" fn(
    *const CaiCApi,
    *mut PyObject,
    *const CaiRequest,
    *mut CaiArray,
    *mut CaiError,
) -> CaiStatus;

/// `CaiCApi`, version 1.0.
#[repr(C)]
#[allow(missing_docs)]
pub struct CaiCApi {
    pub header: CaiCApiHeader,
    pub view: Option<CaiCApiDescribe>,
    pub acquire: Option<CaiCApiDescribe>,
    pub current_stream:
        Option<unsafe extern "C" fn(*const CaiCApi, i32, *mut u64, *mut CaiError) -> CaiStatus>,
}

#[cfg(test)]
mod tests {
    use super::CaiPythonApi;

    /// Each member is one pointer after the three header words; the two of minor 4 follow
    /// minor 3's last, and the two of minor 5 are the last, in cai_python.h's order, so a
    /// table of an older minor ends where the next one's members begin.
    #[test]
    fn the_members_of_minors_4_and_5_come_last_in_the_table_as_cai_python_h_orders_them() {
        let word = std::mem::size_of::<usize>();
        let after = std::mem::offset_of!(CaiPythonApi, cai_release_after);
        assert_eq!(after, std::mem::offset_of!(CaiPythonApi, cai_python_view_or_own) + word);
        assert_eq!(std::mem::offset_of!(CaiPythonApi, cai_release_pending), after + word);
        assert_eq!(std::mem::offset_of!(CaiPythonApi, cai_ipc_export), after + 2 * word);
        assert_eq!(std::mem::offset_of!(CaiPythonApi, cai_ipc_open), after + 3 * word);
        assert_eq!(std::mem::size_of::<CaiPythonApi>(), after + 4 * word);
    }
}
