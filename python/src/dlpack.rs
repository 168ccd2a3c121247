//! DLPack for Python: `cai.from_object` of a DLPack producer, and `cai.Array.__dlpack__` /
//! `__dlpack_device__`. The capsules follow the DLPack Python protocol: "dltensor_versioned"
//! (or "dltensor" for producers and consumers of the legacy struct), renamed "used_..." by
//! the consumer that takes the tensor; a capsule never taken runs the tensor's deleter when it
//! is collected. Every rule of the mapping is the core's (src/dlpack.rs).

use std::ffi::{c_void, CStr};
use std::sync::Mutex;

use cai::binding::dlpack::{
    device_is_cuda_or_allowed_host, device_of, discard, from_dlpack, from_dlpack_legacy, to_dlpack,
    to_dlpack_legacy,
};
use cai::binding::import::ProducerOrdering;
use cai::binding::release_array;
use cai::{
    CaiArray, CaiDLDevice, CaiDLManagedTensor, CaiDLManagedTensorVersioned, CaiDLPackOptions, CaiSyncOptions,
    CAI_DLPACK_MAJOR_VERSION, CAI_DLPACK_MINOR_VERSION, CAI_DL_CPU, CAI_STREAM_LEGACY, CAI_STREAM_NONE,
    CAI_SYNC_DEFAULT,
};
use pyo3::exceptions::{PyBufferError, PyTypeError};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::critical_section::with_critical_section;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyInt, PyTuple, PyType};

use crate::array::Array;
use crate::errors::{CaiResult, Failure};
use crate::pool::Pooled;

const VERSIONED: &CStr = c"dltensor_versioned";
const USED_VERSIONED: &CStr = c"used_dltensor_versioned";
const LEGACY: &CStr = c"dltensor";
const USED_LEGACY: &CStr = c"used_dltensor";

/// The `stream` argument of `__dlpack__` for what the consumer needs (the core's
/// `producer_ordering`): -1 when no sync is wanted; None for a consumer without a stream, which
/// is served on the legacy default stream (DLPack's meaning of None); else the consumer's
/// stream (1, 2 or a handle). Host memory always takes None.
fn stream_argument<'py>(
    py: Python<'py>,
    device: CaiDLDevice,
    consumer: u64,
    ordering: ProducerOrdering,
) -> PyResult<Bound<'py, PyAny>> {
    Ok(match ordering {
        _ if device.device_type == CAI_DL_CPU => py.None().into_bound(py),
        ProducerOrdering::NotWanted => (-1i64).into_pyobject(py)?.into_any(),
        ProducerOrdering::OnStream(_) if consumer == CAI_STREAM_NONE => py.None().into_bound(py),
        ProducerOrdering::OnStream(stream) => stream.into_pyobject(py)?.into_any(),
    })
}

/// An array that owns a tensor just taken from a producer: released (the tensor's deleter run)
/// if it is dropped before it is handed on, so that no failure after the take leaks the tensor.
pub struct Taken(Option<Pooled>);

impl Taken {
    pub fn new() -> Taken {
        Taken(Some(Pooled::zeroed()))
    }

    pub fn into_inner(mut self) -> Pooled {
        self.0.take().expect("present until handed on")
    }

    pub fn array(&mut self) -> &mut CaiArray {
        self.0.as_deref_mut().expect("present until handed on")
    }
}

impl Drop for Taken {
    fn drop(&mut self) {
        if let Some(mut array) = self.0.take() {
            // SAFETY: the array owns the tensor (its release deletes it); released once, here.
            unsafe { release_array(&mut *array) };
        }
    }
}

/// After the take: the tensor's own device (read by the core) is what counts; a producer whose
/// `__dlpack_device__` said otherwise is refused rather than believed.
fn devices_agree(reported: CaiDLDevice, actual: CaiDLDevice) -> PyResult<()> {
    if reported == actual {
        Ok(())
    } else {
        Err(PyBufferError::new_err(format!(
            "__dlpack_device__() said ({}, {}) but the tensor is on ({}, {}): the producer contradicts itself",
            reported.device_type, reported.device_id, actual.device_type, actual.device_id
        )))
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

use crate::exchange::{CurrentWorkStream, ExchangeApi, ExchangeApiHeader, FromPyObject, EXCHANGE_API};

/// The two functions libcai calls from a producer type's exchange table.
#[derive(Clone, Copy)]
pub struct Exchange {
    from_py_object: FromPyObject,
    current_work_stream: CurrentWorkStream,
}

/// What libcai needs to know of a producer's type, found once per type.
#[derive(Clone, Copy)]
pub struct TypeFacts {
    /// The type's DLPack exchange table, if it offers one.
    pub exchange: Option<Exchange>,
    /// Whether its instances can have a `__cuda_array_interface__` attribute at all: false for
    /// a type that defines none and whose instances have no `__dict__` and no `__getattr__`
    /// (numpy's ndarray), so that no AttributeError is built and discarded per call.
    pub may_have_interface: bool,
}

/// Types seen, with what was found of them: looked up on the type once per type (DLPack's rule
/// for the table), and the types are kept alive so that an address is never reused.
static FACTS_BY_TYPE: Mutex<Vec<(Py<PyType>, TypeFacts)>> = Mutex::new(Vec::new());
/// Types remembered at most; beyond, lookups are simply not cached.
const TYPES_KEPT: usize = 64;

// SAFETY: function pointers into a producer's library, which stays loaded with its type.
unsafe impl Send for Exchange {}

/// What libcai knows of `obj`'s type. The exchange table is `__dlpack_c_exchange_api__` (a
/// PyCapsule named "dlpack_exchange_api") or `__c_dlpack_exchange_api__` (an int address),
/// whose header (or a previous version's, down the chain) has DLPack major version 1.
pub fn type_facts(obj: &Bound<'_, PyAny>) -> PyResult<TypeFacts> {
    let py = obj.py();
    let ty = obj.get_type();
    let cached = |cache: &Vec<(Py<PyType>, TypeFacts)>| {
        cache.iter().find(|(seen, _)| seen.bind(py).is(&ty)).map(|(_, found)| *found)
    };
    let lock = || FACTS_BY_TYPE.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    if let Some(found) = cached(&lock()) {
        return Ok(found);
    }
    // Looked up with the lock released: an attribute lookup may run Python code.
    let found =
        TypeFacts { exchange: lookup_exchange_api(&ty)?, may_have_interface: may_have_interface(&ty)? };
    let mut cache = lock();
    if cached(&cache).is_none() && cache.len() < TYPES_KEPT {
        cache.push((ty.unbind(), found));
    }
    Ok(found)
}

/// Whether an instance of `ty` can have a `__cuda_array_interface__` attribute: the type (or a
/// base) defines one, or instances can add attributes (an instance `__dict__`, or attribute
/// lookup other than the generic one, such as a `__getattr__`).
fn may_have_interface(ty: &Bound<'_, PyType>) -> PyResult<bool> {
    let py = ty.py();
    if ty.hasattr(intern!(py, "__cuda_array_interface__"))? {
        return Ok(true);
    }
    let dict_offset: isize = ty.getattr(intern!(py, "__dictoffset__"))?.extract()?;
    // SAFETY: a live type; PyType_GetSlot reads static types too since CPython 3.10.
    let getattro = unsafe { pyo3::ffi::PyType_GetSlot(ty.as_type_ptr(), pyo3::ffi::Py_tp_getattro) };
    let generic = pyo3::ffi::PyObject_GenericGetAttr as *mut c_void;
    Ok(dict_offset != 0 || getattro != generic)
}

/// Exchange table headers followed at most: DLPack has one major version so far, so a longer
/// chain is a broken (or cyclic) table.
const EXCHANGE_CHAIN_LIMIT: usize = 16;

fn lookup_exchange_api(ty: &Bound<'_, PyType>) -> PyResult<Option<Exchange>> {
    let py = ty.py();
    let mut table: *const ExchangeApi = std::ptr::null();
    if let Ok(capsule) = ty.getattr(intern!(py, "__dlpack_c_exchange_api__")) {
        // SAFETY: capsule calls on a live object, the name checked first.
        unsafe {
            if pyo3::ffi::PyCapsule_IsValid(capsule.as_ptr(), EXCHANGE_API.as_ptr()) == 1 {
                table = pyo3::ffi::PyCapsule_GetPointer(capsule.as_ptr(), EXCHANGE_API.as_ptr()).cast();
            }
        }
    } else if let Ok(address) = ty.getattr(intern!(py, "__c_dlpack_exchange_api__")) {
        if !address.is_exact_instance_of::<PyInt>() {
            return Err(PyTypeError::new_err(format!(
                "{}.__c_dlpack_exchange_api__ must be an int (the table's address), not {}",
                ty.name()?,
                address.get_type().name()?
            )));
        }
        table = address.extract::<usize>()? as *const ExchangeApi;
    }
    let mut header: *const ExchangeApiHeader = table.cast();
    for _ in 0..EXCHANGE_CHAIN_LIMIT {
        // SAFETY: the producer publishes a table that lives as long as its type; each header
        // points to the previous version's table or is NULL.
        let Some(current) = (unsafe { header.as_ref() }) else { return Ok(None) };
        if current.version.major == CAI_DLPACK_MAJOR_VERSION {
            // SAFETY: a table of major version 1 has DLPackExchangeAPI's layout.
            let api = unsafe { &*header.cast::<ExchangeApi>() };
            return Ok(api.managed_tensor_from_py_object_no_sync.zip(api.current_work_stream).map(
                |(from_py_object, current_work_stream)| Exchange { from_py_object, current_work_stream },
            ));
        }
        header = current.prev_version_api;
    }
    Err(PyTypeError::new_err(format!(
        "{}'s DLPack exchange table chains more than {EXCHANGE_CHAIN_LIMIT} versions through prev_version_api (a cycle?)",
        ty.name()?
    )))
}

/// The tensor's device, read from the tensor an array took (the core checked its version).
///
/// # Safety
/// `array` owns a tensor of the kind `versioned` says, taken by the core's `from_dlpack*`.
pub unsafe fn device_of_taken(array: &CaiArray, versioned: bool) -> CaiDLDevice {
    if versioned {
        (*array.owner.cast::<CaiDLManagedTensorVersioned>()).dl_tensor.device
    } else {
        (*array.owner.cast::<CaiDLManagedTensor>()).dl_tensor.device
    }
}

/// Takes the tensor of `obj` through its type's exchange table. When the consumer wants a sync,
/// the array's stream is the producer's current work stream on the tensor's device, so that
/// the import orders the consumer after it (the table's calls do no sync).
pub fn take_by_exchange(
    obj: &Bound<'_, PyAny>,
    exchange: Exchange,
    ordering: ProducerOrdering,
    allow_host: bool,
) -> CaiResult<(Taken, CaiDLDevice)> {
    let mut tensor: *mut CaiDLManagedTensorVersioned = std::ptr::null_mut();
    // SAFETY: the producer's function, given the object it was looked up for.
    if unsafe { (exchange.from_py_object)(obj.as_ptr().cast(), &mut tensor) } != 0 || tensor.is_null() {
        return Err(PyErr::take(obj.py())
            .unwrap_or_else(|| PyTypeError::new_err("the DLPack exchange table gave no tensor"))
            .into());
    }
    let options = CaiDLPackOptions { allow_host: u32::from(allow_host), ..Default::default() };
    let mut taken = Taken::new();
    // SAFETY: a tensor handed over by the producer; the core takes it (deleting it on failure).
    unsafe { from_dlpack(tensor, &options, taken.array()) }?;
    // SAFETY: taken by from_dlpack, as a versioned tensor.
    let device = unsafe { device_of_taken(taken.array(), true) };
    if ordering != ProducerOrdering::NotWanted && device.device_type != CAI_DL_CPU {
        let mut stream: *mut c_void = std::ptr::null_mut();
        // SAFETY: the producer's function, for the tensor's device.
        if unsafe { (exchange.current_work_stream)(device.device_type, device.device_id, &mut stream) } != 0 {
            // `taken` is dropped: the tensor's deleter runs.
            return Err(PyErr::take(obj.py())
                .unwrap_or_else(|| PyTypeError::new_err("the DLPack exchange table gave no work stream"))
                .into());
        }
        // The NULL stream is the legacy default stream (CAI's 1), never "no sync" (0).
        taken.array().stream = if stream.is_null() { CAI_STREAM_LEGACY } else { stream as u64 };
    }
    Ok((taken, device))
}

/// Takes the tensor of a DLPack producer: asks for a capsule ordered for the consumer (the
/// core's `producer_ordering`), marks the capsule used and hands the tensor to the core, which
/// owns it from then on. The array is on the stream the producer ordered, for the import to
/// finish the sync (nothing more for a consumer on that stream, a host wait for one without).
pub fn take_from_producer(
    obj: &Bound<'_, PyAny>,
    consumer: u64,
    ordering: ProducerOrdering,
    allow_host: bool,
) -> CaiResult<(Taken, CaiDLDevice)> {
    let py = obj.py();
    // A consumer without a stream asks for None whatever the device: then `__dlpack_device__`
    // is not called, and the tensor's own device is checked once taken.
    let reported = match ordering {
        ProducerOrdering::OnStream(_) if consumer == CAI_STREAM_NONE => None,
        _ => Some(reported_device(obj)?),
    };
    let stream = match reported {
        // Refused before the producer does any work for a capsule.
        Some(device) => device_is_cuda_or_allowed_host(device, allow_host)
            .map_err(Failure::Cai)
            .and_then(|()| Ok(stream_argument(py, device, consumer, ordering)?))?,
        None => py.None().into_bound(py),
    };
    let kwargs = PyDict::new(py);
    kwargs.set_item(intern!(py, "stream"), stream)?;
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
    let options = CaiDLPackOptions { allow_host: u32::from(allow_host), ..Default::default() };
    let mut taken = Taken::new();
    let versioned = take_capsule(&capsule, &options, taken.array())?;
    // SAFETY: taken by the core, of the kind `versioned` says.
    let device = unsafe { device_of_taken(taken.array(), versioned) };
    if let Some(reported) = reported {
        devices_agree(reported, device)?;
    }
    if let ProducerOrdering::OnStream(stream) = ordering {
        if device.device_type != CAI_DL_CPU {
            taken.array().stream = stream;
        }
    }
    Ok((taken, device))
}

/// Takes the tensor out of an unused DLPack capsule into `array` (the core owns it from then
/// on); returns whether it was the versioned struct. The name check, the pointer and the
/// renaming to "used_..." happen in one critical section on the capsule, so that two threads
/// (with or without a GIL) handed the same capsule never both take its tensor.
fn take_capsule(
    capsule: &Bound<'_, PyAny>,
    options: &CaiDLPackOptions,
    array: &mut CaiArray,
) -> CaiResult<bool> {
    let raw = capsule.as_ptr();
    let taken = with_critical_section(capsule, || {
        // SAFETY: capsule calls on a live object; the name is checked before the pointer is
        // taken, and the capsule renamed "used_..." before the core takes the tensor, so that
        // its destructor (and any other consumer) leaves the tensor alone from then on.
        unsafe {
            if pyo3::ffi::PyCapsule_IsValid(raw, VERSIONED.as_ptr()) == 1 {
                let tensor = pyo3::ffi::PyCapsule_GetPointer(raw, VERSIONED.as_ptr());
                pyo3::ffi::PyCapsule_SetName(raw, USED_VERSIONED.as_ptr());
                Some((tensor, true))
            } else if pyo3::ffi::PyCapsule_IsValid(raw, LEGACY.as_ptr()) == 1 {
                let tensor = pyo3::ffi::PyCapsule_GetPointer(raw, LEGACY.as_ptr());
                pyo3::ffi::PyCapsule_SetName(raw, USED_LEGACY.as_ptr());
                Some((tensor, false))
            } else {
                None
            }
        }
    });
    let Some((tensor, versioned)) = taken else {
        return Err(PyTypeError::new_err(
            "__dlpack__() returned no unused \"dltensor_versioned\" or \"dltensor\" capsule",
        )
        .into());
    };
    // SAFETY: the tensor of a capsule this thread alone marked used: handed over to the core.
    unsafe {
        if versioned {
            from_dlpack(tensor.cast(), options, array)?;
        } else {
            from_dlpack_legacy(tensor.cast(), options, array)?;
        }
    }
    Ok(versioned)
}

/// The release of a view handed to a DLPack consumer: ends the export it counted on its
/// cai.Array and drops the reference that kept the array alive. A tensor's deleter may run on
/// any thread, and at any moment of the interpreter's life: once the interpreter is finalizing
/// nothing may attach to it, so the reference is then leaked on purpose (the process is ending;
/// CPython's own extensions do the same).
unsafe extern "C" fn release_python_owner(array: *mut CaiArray) {
    let owner = (*array).owner.cast::<pyo3::ffi::PyObject>();
    if pyo3::ffi::Py_IsInitialized() == 0 {
        return;
    }
    Python::attach(|py| {
        let owner = Bound::from_owned_ptr(py, owner);
        if let Ok(exported) = owner.cast::<Array>() {
            exported.get().export_ended();
        }
    });
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

/// A view of `exported`'s struct that owns one export of it: a strong reference to the
/// cai.Array, let go of (and the export ended) by the view's release. Made only by
/// `Array::exported_view`, which counts the export first.
pub fn export_view(exported: &Bound<'_, Array>) -> CaiArray {
    let mut view = *exported.get().array();
    view.owner = exported.clone().into_ptr().cast();
    view.release = Some(release_python_owner);
    view
}

/// A DLPack tensor owning `view` (from `Array::exported_view`), as the versioned struct when
/// `versioned`, else the legacy one, after the consumer's stream (if any) is ordered after the
/// array's. On every failure the view is released (its export ended) before this returns.
pub fn tensor_of(
    mut view: CaiArray,
    device: CaiDLDevice,
    consumer: Option<u64>,
    versioned: bool,
) -> Result<*mut c_void, cai::Error> {
    let ordered = match consumer {
        Some(consumer) => cai::binding::import::sync(
            &view,
            &CaiSyncOptions { consumer_stream: consumer, sync_mode: CAI_SYNC_DEFAULT, ..Default::default() },
        ),
        None => Ok(()),
    };
    let made = ordered.and_then(|()| {
        if versioned {
            to_dlpack(&mut view, Some(device)).map(|t| t.cast::<c_void>())
        } else {
            to_dlpack_legacy(&mut view, Some(device)).map(|t| t.cast::<c_void>())
        }
    });
    if made.is_err() {
        // SAFETY: the view still owns its reference (the core left it unchanged).
        unsafe { release_array(&mut view) };
    }
    made
}

/// A DLPack capsule owning `tensor` (from `tensor_of`), named for the versioned struct when
/// `versioned`, else for the legacy one.
pub fn capsule_of(py: Python<'_>, tensor: *mut c_void, versioned: bool) -> CaiResult<Py<PyAny>> {
    let (name, destructor): (&CStr, pyo3::ffi::PyCapsule_Destructor) =
        if versioned { (VERSIONED, drop_versioned_capsule) } else { (LEGACY, drop_legacy_capsule) };
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
        discard(tensor.cast::<CaiDLManagedTensorVersioned>());
    } else {
        discard(tensor.cast::<CaiDLManagedTensor>());
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
