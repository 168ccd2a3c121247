//! The Python functions of the module: `cai.from_object`, `cai.validate` and
//! `cai.from_buffer_interface`, each a negotiation (or one reader) and an import, wrapped in a
//! cai.Array.

use cai::binding::dlpack::AllowHost;
use cai::binding::import::ProducerOrdering;
use cai::binding::rules::validate;
use std::sync::atomic::{AtomicBool, Ordering};

use cai::binding::import::Imported;
use cai::{
    CaiDLPackOptions, CaiImportOptions, CAI_DL_CPU, CAI_MEMORY_CUDA, CAI_POINTER_CHECK_DEFAULT,
    CAI_POINTER_CHECK_NEVER, CAI_SYNC_NONE,
};
use pyo3::exceptions::PyTypeError;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyType;

use crate::array::object::ArrayObject;
use crate::cpython::CString;
use crate::described::Read;
use crate::dlpack::{device_of_taken, take_capsule, Taken};
use crate::errors::Failure;
use crate::import::{import_read, taken_from, Caller, Hold};
use crate::negotiate::pipeline::{import_object, unexpected_outcome};
use crate::options::{consumer_stream, pointer_check_mode, sync_mode};
use crate::pool::Pooled;
use crate::read::buffer::read_buffer_interface;
use crate::read::c_api::{call_c_api, lookup_c_api, request_of, Called};
use crate::read::dict::{interface_of, read_interface};
use crate::read::exchange::{lookup_exchange_api, take_by_exchange, view_by_exchange};
use crate::values::{scalar, TypeOf};
use cai::binding::dict::Repr;
use pyo3::types::PyBool;

/// Imports `obj.__cuda_array_interface__` (or a dict): validates it by every rule of the spec,
/// checks the pointer where a driver loads (`pointer_check`: a cai.POINTER_CHECK_* mode; where
/// none loads, the default check is skipped with a cai.PointerNotCheckedWarning),
/// synchronizes with the producer's stream (stream-ordered on `stream` if given, else
/// blocking; `sync=False` skips it), keeps `obj` alive, and returns a cai.Array. Raises
/// cai.CaiError (a ValueError) naming the rule broken. The GIL is released while the import
/// may wait.
///
/// An object without `__cuda_array_interface__` but with `__dlpack__` is taken by DLPack: its
/// producer is passed the consumer's `stream` (-1 when `sync=False`) and orders its work
/// before it; CUDA memory is taken, host memory only with `allow_host=True`.
///
/// `cai.from_object` is entry/from_object.rs's entry, which runs this body; registered under
/// this name too (`_native._from_object_reference`) in the test suites' builds (the
/// `test-oracle` feature), its PyO3 argument handling is the oracle the entry's tests compare
/// with.
#[cfg_attr(feature = "test-oracle", pyfunction)]
#[cfg_attr(
    feature = "test-oracle",
    pyo3(name = "_from_object_reference", signature = (obj, stream=None, sync=None, writable=false, pointer_check=None, allow_host=false))
)]
pub fn from_object(
    obj: &Bound<'_, PyAny>,
    stream: Option<&Bound<'_, PyAny>>,
    sync: Option<&Bound<'_, PyAny>>,
    writable: bool,
    pointer_check: Option<&Bound<'_, PyAny>>,
    allow_host: bool,
) -> PyResult<Py<PyAny>> {
    let options = CaiImportOptions {
        consumer_stream: consumer_stream(stream)?,
        sync_mode: sync_mode(sync)?,
        pointer_check: pointer_check_mode(pointer_check)?,
        writable: u32::from(writable),
        allow_host: u32::from(allow_host),
        ..CaiImportOptions::default()
    };
    let mut to_own = None;
    import_object(obj, &options, Caller::Python, Hold::Own(&mut to_own), None)?;
    let Some((read, imported)) = to_own else { return Err(unexpected_outcome("cai.from_object").into()) };
    // One compare on the path with a driver (a non-empty array there is always checked).
    if imported.info.checked == 0 && options.pointer_check == CAI_POINTER_CHECK_DEFAULT {
        warn_if_unchecked(obj.py(), &read, &imported)?;
    }
    Ok(ArrayObject::of_read(obj.py(), read, Some(imported))?.unbind())
}

/// cai.PointerNotCheckedWarning, for a default pointer check skipped because no CUDA driver
/// loads (or cuInit found no device): the array is the producer's word alone. Not for an empty
/// array (nothing to check), nor for a tensor its producer declared host memory (kDLCPU, taken
/// with `allow_host=True`: no device pointer to check), nor for OpenCL memory. Issued once a
/// process: the fact does not change between calls, and the warning's machinery, run even when
/// a filter hides it, cost each unchecked call about twice the import. A filter that makes it
/// an error makes `from_object` raise it, the array released, on every call until one warns.
#[cold]
fn warn_if_unchecked(py: Python<'_>, read: &Read, imported: &Imported) -> PyResult<()> {
    static WARNED: AtomicBool = AtomicBool::new(false);
    if WARNED.load(Ordering::Relaxed) {
        return Ok(());
    }
    let array = read.array();
    let host = read.device.is_some_and(|device| device.device_type == CAI_DL_CPU);
    if imported.validated.element_count == 0 || host || array.memory != CAI_MEMORY_CUDA {
        return Ok(());
    }
    static CATEGORY: PyOnceLock<Py<PyType>> = PyOnceLock::new();
    let category = CATEGORY.import(py, "cai._errors", "PointerNotCheckedWarning")?;
    let message = format!(
        "cai.from_object: data pointer {:#x} was not checked: no CUDA driver could be loaded, or it found no device; pass pointer_check=cai.POINTER_CHECK_ALWAYS to make this an error that says why (CAI_ERROR_NO_DRIVER), or pointer_check=cai.POINTER_CHECK_NEVER to skip the check without this warning",
        array.data
    );
    let message = CString::new(message).unwrap_or_default();
    // Raised (a filter made it an error): not marked, so the next call raises too.
    PyErr::warn(py, category, &message, 1)?;
    WARNED.store(true, Ordering::Relaxed);
    Ok(())
}

/// Checks a CAI dict (or an object exposing one) by every rule of the spec without touching
/// the driver. Raises cai.CaiError naming the rule broken; returns None.
#[pyfunction(name = "validate")]
pub fn validate_interface(obj: &Bound<'_, PyAny>) -> PyResult<()> {
    let Some(dict) = interface_of(obj)? else { return Err(not_an_interface(obj)) };
    let read = read_interface(obj, &dict)?;
    validate(read.description.array()).map_err(Failure::Cai)?;
    Ok(())
}

/// A consumer queue's `int_ptr`: a cl_command_queue handle, an int in 0..2**64.
fn queue_handle(handle: &Bound<'_, PyAny>) -> PyResult<u64> {
    if !handle.is_instance_of::<PyBool>() {
        if let Ok(value) = handle.extract::<u64>() {
            return Ok(value);
        }
    }
    Err(PyTypeError::new_err(format!(
        "queue.int_ptr must be the cl_command_queue handle (an int in 0..2**64), not {}",
        Repr(&scalar(handle.as_borrowed()))
    )))
}

/// validate's refusal of an object with no interface (it reads no DLPack).
fn not_an_interface(object: &Bound<'_, PyAny>) -> PyErr {
    PyTypeError::new_err(format!(
        "obj must be a __cuda_array_interface__ dict or an object with __cuda_array_interface__, not a '{}' \
         (it has no '__cuda_array_interface__')",
        TypeOf::new(object)
    ))
}

/// Imports an object of the OpenCL/CUDA Buffer Interface (or a pyopencl.array.Array): checks
/// it by the same rules as a CAI array, and for OpenCL memory that it lies inside its buffer
/// and, given a consumer `queue` (a pyopencl CommandQueue or its int_ptr), in the queue's
/// context; orders the consumer queue after the producer's (a pyopencl array's `queue`):
/// stream-ordered, blocking, or not at all as `sync` says. Keeps `obj` alive.
#[pyfunction]
#[pyo3(signature = (obj, queue=None, sync=None, writable=false))]
pub fn from_buffer_interface(
    obj: &Bound<'_, PyAny>,
    queue: Option<&Bound<'_, PyAny>>,
    sync: Option<&Bound<'_, PyAny>>,
    writable: bool,
) -> PyResult<Py<PyAny>> {
    let py = obj.py();
    let read = read_buffer_interface(obj)?;
    let consumer = match queue {
        None => 0,
        Some(queue) => match queue.getattr(intern!(py, "int_ptr")) {
            Ok(handle) => queue_handle(&handle)?,
            Err(_) => consumer_stream(Some(queue))?,
        },
    };
    let options = CaiImportOptions {
        consumer_stream: consumer,
        sync_mode: sync_mode(sync)?,
        pointer_check: CAI_POINTER_CHECK_DEFAULT,
        writable: u32::from(writable),
        ..CaiImportOptions::default()
    };
    let imported = import_read(py, &read, &options)?;
    Ok(ArrayObject::of_read(py, read, Some(imported))?.unbind())
}

/// What `_read_protocol` reads an object by: one protocol alone, not the negotiation's choice.
#[derive(Clone, Copy)]
enum Protocol {
    /// The type's C-level CAI table, `view` (borrowed) or `acquire` (owning).
    CApi { owning: bool },
    /// The type's DLPack exchange table: the owning managed tensor, or the borrowed DLTensor.
    Exchange { owning: bool },
    /// A DLPack capsule (the object itself), taken and renamed "used_..." as a consumer does.
    Capsule,
    /// The OpenCL/CUDA Buffer Interface's attributes.
    BufferInterface,
}

/// What `_read_protocol` gives: the array, the DLPack device the protocol reported, and whether
/// what was read owned a release of its own.
type ProtocolRead = (Py<PyAny>, Option<(i32, i32)>, bool);

/// `cai._native._read_protocol(obj, protocol)`, for cai.testing.check_producer: `obj` read by
/// the one protocol named ("c_api_view", "c_api_acquire", "exchange", "exchange_view",
/// "buffer_interface", or "capsule" for a DLPack capsule), imported with no sync, no pointer check and host memory
/// allowed (nothing reaches the driver, no device memory is read). Returns the cai.Array, the
/// DLPack device the protocol reported (None where it reports none) and whether what was read
/// owned a release of its own (an acquired struct, a taken tensor). None when `obj`'s type
/// does not offer the table named.
#[pyfunction]
#[pyo3(name = "_read_protocol")]
pub fn read_protocol(obj: &Bound<'_, PyAny>, protocol: &str) -> PyResult<Option<ProtocolRead>> {
    let py = obj.py();
    let protocol = match protocol {
        "c_api_view" => Protocol::CApi { owning: false },
        "c_api_acquire" => Protocol::CApi { owning: true },
        "exchange" => Protocol::Exchange { owning: true },
        "exchange_view" => Protocol::Exchange { owning: false },
        "capsule" => Protocol::Capsule,
        "buffer_interface" => Protocol::BufferInterface,
        other => {
            return Err(PyTypeError::new_err(format!(
                "protocol must be 'c_api_view', 'c_api_acquire', 'exchange', 'exchange_view', 'capsule' or \
                 'buffer_interface', not {other:?}"
            )))
        }
    };
    let options = CaiImportOptions {
        sync_mode: CAI_SYNC_NONE,
        pointer_check: CAI_POINTER_CHECK_NEVER,
        allow_host: 1,
        ..CaiImportOptions::default()
    };
    let host = AllowHost { allowed: true, how: &"pass allow_host=True" };
    let keep = Some(obj.clone().unbind());
    let read = match protocol {
        Protocol::CApi { owning } => {
            let Some(api) = lookup_c_api(&obj.get_type())? else { return Ok(None) };
            let mut array = Pooled::cleared();
            match call_c_api(api, owning, obj, &request_of(&options), &mut array)? {
                Called::Described(validated) => Read::borrowing(array, None, keep, Some(validated)),
                Called::NotSupported => {
                    return Err(Failure::Cai(cai::Error::new(
                        cai::Status::NotSupported,
                        "the C-level CAI table refused with CAI_ERROR_NOT_SUPPORTED".to_string(),
                    ))
                    .into())
                }
            }
        }
        Protocol::Exchange { owning: true } => {
            let Some(exchange) = lookup_exchange_api(&obj.get_type())? else { return Ok(None) };
            taken_from(obj, take_by_exchange(obj, exchange, ProducerOrdering::NotWanted, host)?)
        }
        Protocol::Exchange { owning: false } => {
            let Some(exchange) = lookup_exchange_api(&obj.get_type())? else { return Ok(None) };
            let Some(dltensor) = exchange.dltensor_from_py_object else { return Ok(None) };
            let view = view_by_exchange(obj, exchange, dltensor, ProducerOrdering::NotWanted, host)?;
            let mut array = Pooled::cleared();
            view.write(&mut array);
            Read::borrowing(array, Some(view.device()), keep, Some(view.validated()))
        }
        Protocol::Capsule => {
            let dl_options = CaiDLPackOptions { allow_host: 1, ..Default::default() };
            let mut taken = Taken::new();
            let (versioned, validated) = take_capsule(obj, &dl_options, host.how, taken.array())?;
            // SAFETY: taken by the core just now, of the kind `versioned` says.
            let device = unsafe { device_of_taken(taken.array(), versioned) };
            // The tensor keeps its memory alive (its deleter lets go of it), not the capsule.
            Read::borrowing(taken.into_inner(), Some(device), None, Some(validated))
        }
        Protocol::BufferInterface => read_buffer_interface(obj)?,
    };
    let owning = read.array().release.is_some();
    let device = read.device.map(|d| (d.device_type, d.device_id));
    let imported = import_read(py, &read, &options)?;
    Ok(Some((ArrayObject::of_read(py, read, Some(imported))?.unbind(), device, owning)))
}
