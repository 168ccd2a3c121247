//! `cai.from_object` and `cai.validate` (and `cai_python_from_object`, which runs the same
//! negotiation from C): an object's description read into an Array, then imported by the core.

use cai::binding::dict::{consumer_stream_is_a_handle, stream_object_handle_is_a_handle, Repr, Value};
use cai::binding::import::{import, import_may_wait, producer_ordering};
use cai::binding::rules::{in_mask, mask_depth_is_within_limit, validate};
use cai::binding::Description;
use cai::{
    CaiArray, CaiDLDevice, CaiImportOptions, Error, Status, CAI_DL_CPU, CAI_POINTER_CHECK_DEFAULT,
    CAI_POINTER_CHECK_NEVER, CAI_SYNC_DEFAULT, CAI_SYNC_NONE, CAI_SYNC_STREAM_ORDERED,
};
use pyo3::exceptions::{PyAttributeError, PyTypeError};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict};

use crate::array::Array;
use crate::errors::{CaiResult, Failure};
use crate::pool::Pooled;
use crate::read::{read_dict, scalar, TypeOf};

/// The interface dict of `object` (or `object` itself when it is a dict); None when it has no
/// `__cuda_array_interface__` attribute.
fn interface_of<'py>(object: &Bound<'py, PyAny>) -> PyResult<Option<Bound<'py, PyDict>>> {
    if let Ok(dict) = object.cast::<PyDict>() {
        return Ok(Some(dict.clone()));
    }
    let py = object.py();
    let desc = match object.getattr(intern!(py, "__cuda_array_interface__")) {
        Ok(desc) => desc,
        Err(e) if e.is_instance_of::<PyAttributeError>(py) => return Ok(None),
        Err(e) => return Err(e),
    };
    desc.cast_into::<PyDict>().map(Some).map_err(|e| {
        PyTypeError::new_err(format!(
            "{}.__cuda_array_interface__ is a {}, not a dict",
            TypeOf::new(object),
            TypeOf::new(&e.into_inner())
        ))
    })
}

/// Converts `object`'s interface into an Array (not imported).
fn convert(object: &Bound<'_, PyAny>) -> CaiResult<Array> {
    match interface_of(object)? {
        Some(dict) => convert_dict(object, &dict, 0),
        None => Err(not_an_array(object).into()),
    }
}

fn not_an_array(object: &Bound<'_, PyAny>) -> PyErr {
    PyAttributeError::new_err(format!(
        "'{}' object has no attribute '__cuda_array_interface__' (nor '__dlpack__', which cai.from_object also takes)",
        TypeOf::new(object)
    ))
}

/// Converts `dict`, the interface of `object`, into an Array (not imported).
fn convert_dict(object: &Bound<'_, PyAny>, dict: &Bound<'_, PyDict>, depth: usize) -> CaiResult<Array> {
    let (description, mask_owners) = describe_dict(dict, depth)?;
    Ok(Array::from_description(description, object, mask_owners))
}

/// A dict (whose array is `depth` masks down) read into a complete description (the core
/// wires its descr and mask), and the producers of its masks, the nearest first, whose memory
/// it describes.
fn describe_dict(dict: &Bound<'_, PyDict>, depth: usize) -> CaiResult<(Description<Pooled>, Vec<Py<PyAny>>)> {
    let mut array = Pooled::zeroed();
    let mut fields = Vec::new();
    let (mask, mask_owners) = match read_dict(dict, &mut array, &mut fields)? {
        None => (None, Vec::new()),
        Some(mask) => {
            let (described, mut owners) =
                describe_mask(&mask, depth + 1).map_err(|failure| match failure {
                    Failure::Cai(error) => Failure::Cai(in_mask(error)),
                    other => other,
                })?;
            owners.insert(0, mask.unbind());
            (Some(described), owners)
        }
    };
    Ok((Description::new(array, fields, mask), mask_owners))
}

fn describe_mask(mask: &Bound<'_, PyAny>, depth: usize) -> CaiResult<(Description<Pooled>, Vec<Py<PyAny>>)> {
    mask_depth_is_within_limit(depth)?;
    match interface_of(mask)? {
        Some(dict) => describe_dict(&dict, depth),
        None => Err(Failure::Cai(Error::new(
            Status::InvalidMask,
            format!("mask is a {}, which has no __cuda_array_interface__", TypeOf::new(mask)),
        ))),
    }
}

/// A consumer stream as the import takes it: None, 1, 2, a CUstream int, or a stream object
/// (cuda.core's `__cuda_stream__`, PyTorch's `.cuda_stream`, CuPy's `.ptr`).
pub(crate) fn consumer_stream(stream: Option<&Bound<'_, PyAny>>) -> CaiResult<u64> {
    let Some(stream) = stream else { return Ok(0) };
    let py = stream.py();
    let value = scalar(stream.as_borrowed());
    if matches!(value, Value::Int(_) | Value::UInt(_) | Value::HugeInt(_) | Value::Bool(_)) {
        return Ok(consumer_stream_is_a_handle(&value)?);
    }
    let handle = if stream.hasattr(intern!(py, "__cuda_stream__"))? {
        stream.call_method0(intern!(py, "__cuda_stream__"))?.get_item(1)?
    } else if stream.hasattr(intern!(py, "cuda_stream"))? {
        stream.getattr(intern!(py, "cuda_stream"))?
    } else if stream.hasattr(intern!(py, "ptr"))? {
        stream.getattr(intern!(py, "ptr"))?
    } else {
        return Err(PyTypeError::new_err(format!(
            "stream must be None, an int or a stream object, not {}",
            Repr(&value)
        ))
        .into());
    };
    Ok(stream_object_handle_is_a_handle(&scalar(handle.as_borrowed()))?)
}

pub(crate) fn sync_mode(sync: Option<&Bound<'_, PyAny>>) -> PyResult<i32> {
    match sync {
        None => Ok(CAI_SYNC_DEFAULT),
        Some(flag) if flag.is_instance_of::<PyBool>() => {
            Ok(if flag.is_truthy()? { CAI_SYNC_STREAM_ORDERED } else { CAI_SYNC_NONE })
        }
        Some(mode) => mode.extract::<i32>().map_err(|_| {
            PyTypeError::new_err(format!(
                "sync must be None, True, False or a cai.SYNC_* value, not {}",
                Repr(&scalar(mode.as_borrowed()))
            ))
        }),
    }
}

/// Moves what the import reads to the thread that runs it with the GIL released.
struct Unshared<T>(T);
// SAFETY: the import only reads the struct and the memory it points to, all owned by the
// caller's stack or by objects nothing else can reach until the import returns.
unsafe impl<T> Send for Unshared<T> {}

impl<T> Unshared<T> {
    /// Taken whole, so that a closure captures the wrapper, not the field inside it.
    fn into_inner(self) -> T {
        self.0
    }
}

/// Imports `obj.__cuda_array_interface__` (or a dict): validates it by every rule of the spec,
/// checks the pointer where a driver loads (`pointer_check`: a cai.POINTER_CHECK_* mode),
/// synchronizes with the producer's stream (stream-ordered on `stream` if given, else
/// blocking; `sync=False` skips it), keeps `obj` alive, and returns a cai.Array. Raises
/// cai.CaiError (a ValueError) naming the rule broken. The GIL is released while the import
/// may wait.
///
/// An object without `__cuda_array_interface__` but with `__dlpack__` is taken by DLPack: its
/// producer is passed the consumer's `stream` (-1 when `sync=False`) and orders its work
/// before it; CUDA memory is taken, host memory only with `allow_host=True`.
#[pyfunction]
#[pyo3(signature = (obj, stream=None, sync=None, writable=false, pointer_check=None, allow_host=false))]
pub fn from_object(
    obj: &Bound<'_, PyAny>,
    stream: Option<&Bound<'_, PyAny>>,
    sync: Option<&Bound<'_, PyAny>>,
    writable: bool,
    pointer_check: Option<i32>,
    allow_host: bool,
) -> PyResult<Py<Array>> {
    let options = CaiImportOptions {
        consumer_stream: consumer_stream(stream)?,
        sync_mode: sync_mode(sync)?,
        pointer_check: pointer_check.unwrap_or(CAI_POINTER_CHECK_DEFAULT),
        writable: u32::from(writable),
        allow_host: u32::from(allow_host),
        ..CaiImportOptions::default()
    };
    Py::new(obj.py(), import_object(obj, options)?)
}

/// `cai.from_object`'s negotiation and import, as Python and C (`cai_python_from_object`)
/// both run it: the Array made, not yet a Python object.
pub(crate) fn import_object(obj: &Bound<'_, PyAny>, options: CaiImportOptions) -> CaiResult<Array> {
    let py = obj.py();
    let allow_host = options.allow_host != 0;
    // Cheapest first: a dict; a type's DLPack exchange table (looked up once per type), before
    // a CAI property that may raise (a CPU tensor's does) and cost an exception per call.
    if let Ok(dict) = obj.cast::<PyDict>() {
        let converted = convert_dict(obj, dict, 0)?;
        return finish_import(py, converted, options);
    }
    if let Ok(array) = obj.cast::<Array>() {
        let converted = Array::view_of(array)?;
        if let Some(device) = converted.dlpack_device() {
            cai::binding::dlpack::device_is_cuda_or_allowed_host(device, allow_host)?;
        }
        return finish_import(py, converted, options);
    }
    let ordering = producer_ordering(options.consumer_stream, options.sync_mode);
    let facts = crate::dlpack::type_facts(obj)?;
    if let Some(exchange) = facts.exchange {
        let (taken, device) = crate::dlpack::take_by_exchange(obj, exchange, ordering, allow_host)?;
        return finish_dlpack_import(py, obj, taken, device, options);
    }
    if facts.may_have_interface {
        if let Some(dict) = interface_of(obj)? {
            return finish_import(py, convert_dict(obj, &dict, 0)?, options);
        }
    }
    if !obj.hasattr(intern!(py, "__dlpack__"))? {
        return Err(not_an_array(obj).into());
    }
    let (taken, device) =
        crate::dlpack::take_from_producer(obj, options.consumer_stream, ordering, allow_host)?;
    finish_dlpack_import(py, obj, taken, device, options)
}

/// Imports a tensor taken from `obj` (DLPack) on `device`, keeping `obj` alive.
fn finish_dlpack_import(
    py: Python<'_>,
    obj: &Bound<'_, PyAny>,
    taken: crate::dlpack::Taken,
    device: CaiDLDevice,
    options: CaiImportOptions,
) -> CaiResult<Array> {
    finish_import(py, Array::from_taken(taken, device, Some(obj.clone().unbind())), options)
}

/// Imports an Array made from a producer's description, with the GIL released where the host
/// may wait (a sync the core plans, or the first load of the driver).
pub(crate) fn finish_import(
    py: Python<'_>,
    mut converted: Array,
    mut options: CaiImportOptions,
) -> CaiResult<Array> {
    if converted.dlpack_device().is_some_and(|device| device.device_type == CAI_DL_CPU) {
        // Host memory (taken with allow_host): no CUDA pointer to check.
        options.pointer_check = CAI_POINTER_CHECK_NEVER;
    }
    let array = converted.array();
    let outcome = if import_may_wait(array, &options) {
        let job = Unshared((array as *const CaiArray, &options));
        py.detach(move || {
            let (array, options) = job.into_inner();
            // SAFETY: `array` points into `converted`, alive and unchanged until this returns.
            Unshared(import(unsafe { &*array }, options))
        })
        .into_inner()
    } else {
        import(array, &options)
    };
    converted.set_imported(outcome?);
    Ok(converted)
}

/// Checks a CAI dict (or an object exposing one) by every rule of the spec without touching
/// the driver. Raises cai.CaiError naming the rule broken; returns None.
#[pyfunction(name = "validate")]
pub fn validate_interface(obj: &Bound<'_, PyAny>) -> PyResult<()> {
    let converted = convert(obj)?;
    validate(converted.array()).map_err(Failure::Cai)?;
    Ok(())
}
