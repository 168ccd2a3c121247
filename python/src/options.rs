//! The import arguments Python passes (`stream`, `sync`) as the core's options take them.

use cai::binding::dict::{consumer_stream_is_a_handle, stream_object_handle_is_a_handle, Repr, Value};
use cai::{CAI_SYNC_DEFAULT, CAI_SYNC_NONE, CAI_SYNC_STREAM_ORDERED};
use pyo3::exceptions::PyTypeError;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::PyBool;

use crate::errors::CaiResult;
use crate::values::scalar;

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
