//! DLPack for Python: `cai.from_object` of a DLPack producer, and `cai.Array.__dlpack__` /
//! `__dlpack_device__`. The capsules follow the DLPack Python protocol: "dltensor_versioned"
//! (or "dltensor" for producers and consumers of the legacy struct), renamed "used_..." by
//! the consumer that takes the tensor; a capsule never taken runs the tensor's deleter when it
//! is collected. Every rule of the mapping is the core's (src/dlpack.rs).

use std::ffi::{c_int, c_void, CStr};
use std::sync::Mutex;

use cai::internal::{
    device_is_cuda_or_allowed_host, device_of, from_dlpack, from_dlpack_legacy, to_dlpack, to_dlpack_legacy,
};
use cai::{
    CaiArray, CaiDLDevice, CaiDLManagedTensorVersioned, CaiDLPackVersion, CaiDlpackOptions,
    CAI_DLPACK_MAJOR_VERSION, CAI_DLPACK_MINOR_VERSION, CAI_DL_CPU, CAI_STREAM_LEGACY,
};
use pyo3::exceptions::{PyBufferError, PyTypeError};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyTuple, PyType};

use crate::errors::{CaiResult, Failure};

const VERSIONED: &CStr = c"dltensor_versioned";
const USED_VERSIONED: &CStr = c"used_dltensor_versioned";
const LEGACY: &CStr = c"dltensor";
const USED_LEGACY: &CStr = c"used_dltensor";
const EXCHANGE_API: &CStr = c"dlpack_exchange_api";

/// The `stream` argument DLPack's `__dlpack__` takes for the consumer's CAI stream value and
/// sync mode: -1 when no sync is wanted, None (the legacy default stream, by DLPack's rule) when
/// the consumer names no stream, else the stream. Host memory takes None.
fn stream_argument<'py>(
    py: Python<'py>,
    device: CaiDLDevice,
    consumer: u64,
    no_sync: bool,
) -> Bound<'py, PyAny> {
    if device.device_type == CAI_DL_CPU || (consumer == 0 && !no_sync) {
        py.None().into_bound(py)
    } else if no_sync {
        (-1i64).into_pyobject(py).unwrap().into_any()
    } else {
        consumer.into_pyobject(py).unwrap().into_any()
    }
}

/// The device `obj.__dlpack_device__()` reports.
fn reported_device(obj: &Bound<'_, PyAny>) -> PyResult<CaiDLDevice> {
    let (device_type, device_id): (i32, i32) =
        obj.call_method0(intern!(obj.py(), "__dlpack_device__"))?.extract().map_err(|_| {
            PyTypeError::new_err("__dlpack_device__() must return a (device_type, device_id) pair of ints")
        })?;
    Ok(CaiDLDevice { device_type, device_id })
}

/// dlpack.h's DLPackExchangeAPIHeader (DLPack 1.3): stable across versions.
#[repr(C)]
struct ExchangeApiHeader {
    version: CaiDLPackVersion,
    prev_version_api: *const ExchangeApiHeader,
}

type FromPyObject = unsafe extern "C" fn(*mut c_void, *mut *mut CaiDLManagedTensorVersioned) -> c_int;
type CurrentWorkStream = unsafe extern "C" fn(i32, i32, *mut *mut c_void) -> c_int;

/// dlpack.h's DLPackExchangeAPI, as far as libcai calls it: a producer's C function table that
/// hands over a tensor without the Python call (and without a sync: the consumer orders its
/// work after the producer's current stream).
#[repr(C)]
struct ExchangeApi {
    header: ExchangeApiHeader,
    managed_tensor_allocator: *const c_void,
    managed_tensor_from_py_object_no_sync: Option<FromPyObject>,
    managed_tensor_to_py_object_no_sync: *const c_void,
    dltensor_from_py_object_no_sync: *const c_void,
    current_work_stream: Option<CurrentWorkStream>,
}

/// The two functions libcai calls from a producer type's exchange table.
#[derive(Clone, Copy)]
pub struct Exchange {
    from_py_object: FromPyObject,
    current_work_stream: CurrentWorkStream,
}

/// Types seen, with their exchange table or None: the table is looked up on the type, once
/// per type (DLPack's rule), and the types are kept alive so that an address is never reused.
static EXCHANGE_BY_TYPE: Mutex<Vec<(Py<PyType>, Option<Exchange>)>> = Mutex::new(Vec::new());
/// Types remembered at most; beyond, lookups are simply not cached.
const EXCHANGE_TYPES_KEPT: usize = 64;

// SAFETY: function pointers into a producer's library, which stays loaded with its type.
unsafe impl Send for Exchange {}

/// The exchange table of `obj`'s type: `__dlpack_c_exchange_api__` (a PyCapsule named
/// "dlpack_exchange_api") or `__c_dlpack_exchange_api__` (an int address), whose header (or a
/// previous version's, down the chain) has DLPack major version 1.
pub fn exchange_api(obj: &Bound<'_, PyAny>) -> PyResult<Option<Exchange>> {
    let py = obj.py();
    let ty = obj.get_type();
    let cached = |cache: &Vec<(Py<PyType>, Option<Exchange>)>| {
        cache.iter().find(|(seen, _)| seen.bind(py).is(&ty)).map(|(_, found)| *found)
    };
    let lock = || EXCHANGE_BY_TYPE.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    if let Some(found) = cached(&lock()) {
        return Ok(found);
    }
    // Looked up with the lock released: an attribute lookup may run Python code.
    let found = lookup_exchange_api(&ty)?;
    let mut cache = lock();
    if cached(&cache).is_none() && cache.len() < EXCHANGE_TYPES_KEPT {
        cache.push((ty.unbind(), found));
    }
    Ok(found)
}

fn lookup_exchange_api(ty: &Bound<'_, PyType>) -> PyResult<Option<Exchange>> {
    let mut table: *const ExchangeApi = std::ptr::null();
    if let Ok(capsule) = ty.getattr("__dlpack_c_exchange_api__") {
        // SAFETY: capsule calls on a live object, the name checked first.
        unsafe {
            if pyo3::ffi::PyCapsule_IsValid(capsule.as_ptr(), EXCHANGE_API.as_ptr()) == 1 {
                table = pyo3::ffi::PyCapsule_GetPointer(capsule.as_ptr(), EXCHANGE_API.as_ptr()).cast();
            }
        }
    } else if let Ok(address) = ty.getattr("__c_dlpack_exchange_api__") {
        table = address.extract::<usize>()? as *const ExchangeApi;
    }
    // SAFETY: the producer publishes a table that lives as long as its type; each header
    // points to the previous version's table or is NULL.
    unsafe {
        let mut header: *const ExchangeApiHeader = table.cast();
        while let Some(current) = header.as_ref() {
            if current.version.major == CAI_DLPACK_MAJOR_VERSION {
                let api = &*header.cast::<ExchangeApi>();
                return Ok(api.managed_tensor_from_py_object_no_sync.zip(api.current_work_stream).map(
                    |(from_py_object, current_work_stream)| Exchange { from_py_object, current_work_stream },
                ));
            }
            header = current.prev_version_api;
        }
    }
    Ok(None)
}

/// Takes the tensor of `obj` through its type's exchange table into `array`; with a sync
/// wanted, the array's stream is the producer's current work stream on the tensor's device,
/// so that the import orders the consumer after it (the table's calls do no sync).
pub fn take_by_exchange(
    obj: &Bound<'_, PyAny>,
    exchange: Exchange,
    no_sync: bool,
    allow_host: bool,
    array: &mut CaiArray,
) -> CaiResult<CaiDLDevice> {
    let mut tensor: *mut CaiDLManagedTensorVersioned = std::ptr::null_mut();
    // SAFETY: the producer's function, given the object it was looked up for.
    if unsafe { (exchange.from_py_object)(obj.as_ptr().cast(), &mut tensor) } != 0 || tensor.is_null() {
        return Err(PyErr::take(obj.py())
            .unwrap_or_else(|| PyTypeError::new_err("the DLPack exchange table gave no tensor"))
            .into());
    }
    let options = CaiDlpackOptions { allow_host: u32::from(allow_host), ..Default::default() };
    // SAFETY: a tensor handed over by the producer; the core takes it.
    unsafe { from_dlpack(tensor, &options, array) }?;
    // SAFETY: taken: the array owns the tensor, which stays valid until its release.
    let device = unsafe { (*tensor).dl_tensor.device };
    if !no_sync && device.device_type != CAI_DL_CPU {
        let mut stream: *mut c_void = std::ptr::null_mut();
        // SAFETY: the producer's function, for the tensor's device.
        if unsafe { (exchange.current_work_stream)(device.device_type, device.device_id, &mut stream) } != 0 {
            return Err(PyErr::take(obj.py())
                .unwrap_or_else(|| PyTypeError::new_err("the DLPack exchange table gave no work stream"))
                .into());
        }
        // The NULL stream is the legacy default stream (CAI's 1), never "no sync" (0).
        array.stream = if stream.is_null() { CAI_STREAM_LEGACY } else { stream as u64 };
    }
    Ok(device)
}

/// Takes the tensor of a DLPack producer: asks for a capsule with the consumer's stream (the
/// producer orders its work before it), marks the capsule used and hands the tensor to the
/// core, which owns it from then on. Returns the array (owning the tensor) and its device.
pub fn take_from_producer(
    obj: &Bound<'_, PyAny>,
    consumer: u64,
    no_sync: bool,
    allow_host: bool,
    array: &mut CaiArray,
) -> CaiResult<CaiDLDevice> {
    let py = obj.py();
    let device = reported_device(obj)?;
    // Refused before the producer does any work for a capsule.
    device_is_cuda_or_allowed_host(device, allow_host)?;
    let kwargs = PyDict::new(py);
    kwargs.set_item(intern!(py, "stream"), stream_argument(py, device, consumer, no_sync))?;
    static MAX_VERSION: PyOnceLock<Py<PyTuple>> = PyOnceLock::new();
    let max_version = MAX_VERSION.get_or_try_init(py, || {
        PyTuple::new(py, [CAI_DLPACK_MAJOR_VERSION, CAI_DLPACK_MINOR_VERSION]).map(Bound::unbind)
    })?;
    kwargs.set_item(intern!(py, "max_version"), max_version.bind(py))?;
    let method = obj.getattr(intern!(py, "__dlpack__"))?;
    let capsule = match method.call((), Some(&kwargs)) {
        Ok(capsule) => capsule,
        // A producer from before DLPack 1.0 takes no max_version.
        Err(e) if e.is_instance_of::<PyTypeError>(py) => {
            kwargs.del_item(intern!(py, "max_version"))?;
            method.call((), Some(&kwargs))?
        }
        Err(e) => return Err(e.into()),
    };
    let options = CaiDlpackOptions { allow_host: u32::from(allow_host), ..Default::default() };
    let capsule_ptr = capsule.as_ptr();
    // SAFETY: capsule calls on a live object; the name is checked before the pointer is taken,
    // and the capsule is renamed "used_..." before the core takes the tensor, so that its
    // destructor leaves the tensor alone from then on.
    let taken = unsafe {
        if pyo3::ffi::PyCapsule_IsValid(capsule_ptr, VERSIONED.as_ptr()) == 1 {
            let tensor = pyo3::ffi::PyCapsule_GetPointer(capsule_ptr, VERSIONED.as_ptr());
            pyo3::ffi::PyCapsule_SetName(capsule_ptr, USED_VERSIONED.as_ptr());
            from_dlpack(tensor.cast(), &options, array)
        } else if pyo3::ffi::PyCapsule_IsValid(capsule_ptr, LEGACY.as_ptr()) == 1 {
            let tensor = pyo3::ffi::PyCapsule_GetPointer(capsule_ptr, LEGACY.as_ptr());
            pyo3::ffi::PyCapsule_SetName(capsule_ptr, USED_LEGACY.as_ptr());
            from_dlpack_legacy(tensor.cast(), &options, array)
        } else {
            return Err(PyTypeError::new_err(
                "__dlpack__() returned no unused \"dltensor_versioned\" or \"dltensor\" capsule",
            )
            .into());
        }
    };
    taken?;
    Ok(device)
}

/// The release of a view handed to a DLPack consumer: drops the reference to the cai.Array
/// that keeps the memory alive (the tensor's deleter may run on any thread).
unsafe extern "C" fn release_python_owner(array: *mut CaiArray) {
    let owner = (*array).owner.cast::<pyo3::ffi::PyObject>();
    Python::attach(|py| drop(Bound::from_owned_ptr(py, owner)));
}

/// Destructor of a capsule made here: a tensor no consumer took is deleted with it.
unsafe extern "C" fn drop_versioned_capsule(capsule: *mut pyo3::ffi::PyObject) {
    if pyo3::ffi::PyCapsule_IsValid(capsule, VERSIONED.as_ptr()) == 1 {
        delete_tensor(pyo3::ffi::PyCapsule_GetPointer(capsule, VERSIONED.as_ptr()), true);
    }
}

unsafe extern "C" fn drop_legacy_capsule(capsule: *mut pyo3::ffi::PyObject) {
    if pyo3::ffi::PyCapsule_IsValid(capsule, LEGACY.as_ptr()) == 1 {
        delete_tensor(pyo3::ffi::PyCapsule_GetPointer(capsule, LEGACY.as_ptr()), false);
    }
}

/// A DLPack capsule over `view` (a copy of a cai.Array's struct whose owner is `keep`), as the
/// versioned struct when `versioned`, else the legacy one.
pub fn capsule_of(
    py: Python<'_>,
    mut view: CaiArray,
    keep: Py<PyAny>,
    device: CaiDLDevice,
    versioned: bool,
) -> CaiResult<Py<PyAny>> {
    view.owner = keep.into_ptr().cast();
    view.release = Some(release_python_owner);
    let made = if versioned {
        to_dlpack(&mut view, Some(device))
            .map(|t| (t.cast::<c_void>(), VERSIONED, drop_versioned_capsule as _))
    } else {
        to_dlpack_legacy(&mut view, Some(device))
            .map(|t| (t.cast::<c_void>(), LEGACY, drop_legacy_capsule as _))
    };
    let (tensor, name, destructor): (*mut c_void, &CStr, pyo3::ffi::PyCapsule_Destructor) = match made {
        Ok(made) => made,
        Err(e) => {
            // SAFETY: the view still owns the reference taken above (the core left it unchanged).
            unsafe { cai::internal::release_array(&mut view) };
            return Err(e.into());
        }
    };
    // SAFETY: a tensor just made, owned by the capsule from here on (its destructor deletes it
    // unless a consumer took it).
    let capsule = unsafe { pyo3::ffi::PyCapsule_New(tensor, name.as_ptr(), Some(destructor)) };
    if capsule.is_null() {
        // SAFETY: the capsule was not made: the tensor is still ours to delete.
        unsafe { delete_tensor(tensor, versioned) };
        return Err(PyErr::fetch(py).into());
    }
    // SAFETY: a new reference from PyCapsule_New.
    Ok(unsafe { Bound::from_owned_ptr(py, capsule) }.unbind())
}

/// Runs a tensor's deleter (the versioned or the legacy struct).
unsafe fn delete_tensor(tensor: *mut c_void, versioned: bool) {
    if versioned {
        cai::internal::discard(tensor.cast());
    } else {
        cai::internal::discard_legacy(tensor.cast());
    }
}

/// The device of an array's memory: the DLPack producer's, or asked of the driver.
pub fn device_of_array(array: &CaiArray, known: Option<CaiDLDevice>) -> CaiResult<CaiDLDevice> {
    match known {
        Some(device) => Ok(device),
        None => device_of(array, None).map_err(|e| {
            Failure::Python(PyBufferError::new_err(format!("the array's device is unknown: {e}")))
        }),
    }
}

/// The checks of `__dlpack__`'s keyword arguments that refuse before any work: no copies, and
/// no device but the array's own.
pub fn export_arguments_allowed(
    device: CaiDLDevice,
    dl_device: Option<(i32, i32)>,
    copy: Option<bool>,
) -> PyResult<()> {
    if copy == Some(true) {
        return Err(PyBufferError::new_err("cai.Array never copies: __dlpack__(copy=True) is refused"));
    }
    if let Some((device_type, device_id)) = dl_device {
        if (device_type, device_id) != (device.device_type, device.device_id) {
            return Err(PyBufferError::new_err(format!(
                "the array is on device ({}, {}); a copy to ({device_type}, {device_id}) was asked for, and cai.Array never copies",
                device.device_type, device.device_id
            )));
        }
    }
    Ok(())
}
