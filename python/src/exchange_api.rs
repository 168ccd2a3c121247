//! dlpack.h's C exchange table (DLPack 1.3's `DLPackExchangeAPI`), declared field for field:
//! read from a producer's type (python/src/read/exchange.rs) and offered by cai.Array's
//! (python/src/offer/exchange.rs).

use crate::cpython::{c_int, c_void, CStr};
use cai::{CaiDLManagedTensorVersioned, CaiDLPackVersion, CaiDLTensor};

/// dlpack.h's DLPackExchangeAPIHeader: stable across versions.
#[repr(C)]
pub struct ExchangeApiHeader {
    pub version: CaiDLPackVersion,
    pub prev_version_api: *const ExchangeApiHeader,
}

pub type FromPyObject = unsafe extern "C" fn(*mut c_void, *mut *mut CaiDLManagedTensorVersioned) -> c_int;
pub type ToPyObject = unsafe extern "C" fn(*mut CaiDLManagedTensorVersioned, *mut *mut c_void) -> c_int;
pub type DlTensorFromPyObject = unsafe extern "C" fn(*mut c_void, *mut CaiDLTensor) -> c_int;
pub type CurrentWorkStream = unsafe extern "C" fn(i32, i32, *mut *mut c_void) -> c_int;

/// dlpack.h's DLPackExchangeAPI (DLPack 1.3). The allocator is declared as a plain pointer:
/// libcai neither offers nor calls one.
#[repr(C)]
pub struct ExchangeApi {
    pub header: ExchangeApiHeader,
    pub managed_tensor_allocator: *const c_void,
    pub managed_tensor_from_py_object_no_sync: Option<FromPyObject>,
    pub managed_tensor_to_py_object_no_sync: Option<ToPyObject>,
    pub dltensor_from_py_object_no_sync: Option<DlTensorFromPyObject>,
    pub current_work_stream: Option<CurrentWorkStream>,
}

/// The name DLPack gives the capsule holding a table.
pub const EXCHANGE_API: &CStr = c"dlpack_exchange_api";

// SAFETY: the table is immutable, its pointers are NULL or functions of this module.
unsafe impl Sync for ExchangeApi {}
