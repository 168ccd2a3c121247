//! cai.Array's DLPack exchange table, offered to consumers as `__dlpack_c_exchange_api__`, so
//! that torch, tvm-ffi, cai itself and other consumers take a cai.Array's tensor without a
//! Python call; and the table of the types `cai_python_offer` gave the protocols, which takes
//! the tensor of the cai.Array their fill describes. The consumer calls every function of a
//! table attached to the interpreter (DLPack's rule: a failure is a Python exception set); each
//! returns 0, or -1 with the exception set, and never unwinds.
//!
//! Each runs without PyO3's count of the thread (cpython/fastcall.rs's `run_assumed_status`, which
//! raises a failure counted). The audit of their success paths, none of which drops a `Py<T>`
//! or a `PyErr`: the object is borrowed, or owned as a `Bound` let go of at once; a cai.Array's
//! checks (`live`, `begin_export`), its device and its export return their values; an offered
//! type's record is found without a failing lookup, and its fill, validation and export are
//! those of the offered `__dlpack__` (offer/mod.rs); a tensor is handed out raw, a new cai.Array as
//! the new reference it is.

use cai::binding::dlpack::AllowHost;
use cai::{
    CaiDLManagedTensorVersioned, CaiDLPackOptions, CaiDLPackVersion, CaiDLTensor, CAI_DLPACK_MAJOR_VERSION,
    CAI_DLPACK_MINOR_VERSION, CAI_STREAM_LEGACY,
};
use pyo3::prelude::*;

use crate::array::object::ArrayObject;
use crate::array::Array;
use crate::cpython::fastcall::run_assumed_status;
use crate::cpython::{self, c_int, c_void, PyObject};
use crate::described::Read;
use crate::dlpack::{device_of_taken, Taken};
use crate::errors::Failure;
use crate::exchange_api::{ExchangeApi, ExchangeApiHeader, EXCHANGE_API};
use crate::offer::offered::Offered;
use crate::pool::with_fill_array;
use crate::values::TypeOf;

/// cai.Array's table. Its work stream is the legacy default stream (the table is per type, and
/// a cai.Array's producer stream is per array): taking a tensor orders the legacy default
/// stream after the array's own stream (an event, no host wait), so that a consumer that waits
/// for the work stream waits for the array's producer.
pub static CAI_ARRAY_EXCHANGE_API: ExchangeApi = ExchangeApi {
    header: ExchangeApiHeader {
        version: CaiDLPackVersion { major: CAI_DLPACK_MAJOR_VERSION, minor: CAI_DLPACK_MINOR_VERSION },
        prev_version_api: std::ptr::null(),
    },
    managed_tensor_allocator: std::ptr::null(),
    managed_tensor_from_py_object_no_sync: Some(managed_tensor_from_py_object),
    managed_tensor_to_py_object_no_sync: Some(managed_tensor_to_py_object),
    dltensor_from_py_object_no_sync: Some(dltensor_from_py_object),
    current_work_stream: Some(current_work_stream),
};

/// The table of offered types: as cai.Array's, but its tensor is of the cai.Array the
/// object's fill describes, and it has no non-owning DLTensor call (the description lives in
/// no storage that outlasts the call).
pub static OFFERED_EXCHANGE_API: ExchangeApi = ExchangeApi {
    header: ExchangeApiHeader {
        version: CaiDLPackVersion { major: CAI_DLPACK_MAJOR_VERSION, minor: CAI_DLPACK_MINOR_VERSION },
        prev_version_api: std::ptr::null(),
    },
    managed_tensor_allocator: std::ptr::null(),
    managed_tensor_from_py_object_no_sync: Some(offered_managed_tensor_from_py_object),
    managed_tensor_to_py_object_no_sync: Some(managed_tensor_to_py_object),
    dltensor_from_py_object_no_sync: None,
    current_work_stream: Some(current_work_stream),
};

/// The cai.Array a table function was given.
///
/// # Safety
/// `object` is a live PyObject the caller holds.
unsafe fn array_of<'py>(py: Python<'py>, object: *mut c_void) -> PyResult<ArrayObject<'py>> {
    let object = pyo3::Borrowed::from_ptr(py, object.cast::<PyObject>()).to_owned();
    ArrayObject::of(&object).ok_or_else(|| {
        pyo3::exceptions::PyTypeError::new_err(format!(
            "libcai's DLPack exchange table of cai.Array was given a '{}', not a cai.Array",
            TypeOf::new(&object)
        ))
    })
}

unsafe extern "C" fn managed_tensor_from_py_object(
    py_object: *mut c_void,
    out: *mut *mut CaiDLManagedTensorVersioned,
) -> c_int {
    run_assumed_status(|py| {
        // SAFETY: the consumer passes an object it holds.
        let array = unsafe { array_of(py, py_object) }?;
        let device = array.get().dl_device()?;
        let tensor = Array::export_tensor(&array, device, work_stream(device), true)?;
        // SAFETY: the consumer's out-pointer.
        unsafe { *out = tensor.cast() };
        Ok(())
    })
}

/// The record of the offered type of `object`.
fn offered_of(object: &Bound<'_, PyAny>) -> PyResult<&'static Offered> {
    // SAFETY: attached (a Bound exists); the caller holds `object`.
    unsafe { Offered::of_object(object.as_ptr()) }.ok_or_else(|| {
        pyo3::exceptions::PyTypeError::new_err(format!(
            "a '{}' is not an instance of a type offered by cai_python_offer: the offered types' \
             __dlpack_c_exchange_api__ takes only those",
            TypeOf::new(object)
        ))
    })
}

unsafe extern "C" fn offered_managed_tensor_from_py_object(
    py_object: *mut c_void,
    out: *mut *mut CaiDLManagedTensorVersioned,
) -> c_int {
    run_assumed_status(|py| {
        // SAFETY: the consumer passes an object it holds.
        let object = unsafe { pyo3::Borrowed::from_ptr(py, py_object.cast::<PyObject>()) };
        let offered = offered_of(&object)?;
        let tensor = with_fill_array(|array| {
            let described = offered.describe_object(&object, AllowHost::ALLOWED, array)?;
            let device = Offered::device_of(&described, array)?;
            Offered::export_described(&object, array, &described, device, work_stream(device), true)
        })?;
        // SAFETY: the consumer's out-pointer.
        unsafe { *out = tensor.cast() };
        Ok(())
    })
}

unsafe extern "C" fn managed_tensor_to_py_object(
    tensor: *mut CaiDLManagedTensorVersioned,
    out_py_object: *mut *mut c_void,
) -> c_int {
    run_assumed_status(|py| {
        let mut taken = Taken::new();
        let options = CaiDLPackOptions { allow_host: 1, ..Default::default() };
        // Host memory is allowed, so no words to allow it are needed.
        // SAFETY: the consumer hands the tensor over; the core takes it (deleting it on failure).
        unsafe { cai::binding::dlpack::from_dlpack(tensor, &options, &"", taken.array()) }
            .map_err(Failure::Cai)?;
        // SAFETY: taken as a versioned tensor.
        let device = unsafe { device_of_taken(taken.array(), true) };
        let array =
            ArrayObject::of_read(py, Read::borrowing(taken.into_inner(), Some(device), None, None), None)?;
        // SAFETY: the consumer's out-pointer; the new reference is the consumer's.
        unsafe { *out_py_object = array.into_any().into_ptr().cast() };
        Ok(())
    })
}

unsafe extern "C" fn dltensor_from_py_object(py_object: *mut c_void, out: *mut CaiDLTensor) -> c_int {
    run_assumed_status(|py| {
        // SAFETY: the consumer passes an object it holds.
        let array = unsafe { array_of(py, py_object) }?;
        let view = Array::dl_tensor_view(&array)?;
        // SAFETY: the consumer's out-pointer.
        unsafe { *out = view };
        Ok(())
    })
}

/// The stream a tensor taken through a table is ordered before: the legacy default stream (the
/// tables' work stream, see `CAI_ARRAY_EXCHANGE_API`) for device memory; none for host memory,
/// which no stream orders.
fn work_stream(device: cai::CaiDLDevice) -> Option<u64> {
    (device.device_type != cai::CAI_DL_CPU).then_some(CAI_STREAM_LEGACY)
}

/// NULL: the legacy default stream for CUDA memory (see `CAI_ARRAY_EXCHANGE_API`), no stream
/// for host memory.
unsafe extern "C" fn current_work_stream(_device_type: i32, _device_id: i32, out: *mut *mut c_void) -> c_int {
    // SAFETY: the consumer's out-pointer.
    unsafe { *out = std::ptr::null_mut() };
    0
}

/// cai.Array's table as DLPack publishes it on a type: a capsule named "dlpack_exchange_api".
pub fn exchange_api_capsule(py: Python<'_>) -> PyResult<Py<PyAny>> {
    capsule_of(py, &CAI_ARRAY_EXCHANGE_API)
}

/// The table of offered types, as a capsule.
pub fn offered_exchange_api_capsule(py: Python<'_>) -> PyResult<Py<PyAny>> {
    capsule_of(py, &OFFERED_EXCHANGE_API)
}

fn capsule_of(py: Python<'_>, table: &'static ExchangeApi) -> PyResult<Py<PyAny>> {
    Ok(cpython::static_capsule(py, table, EXCHANGE_API)?.unbind())
}
