//! The import arguments Python passes (`stream`, `sync`) as the core's options take them.

use cai::binding::dict::{consumer_stream_is_a_handle, stream_object_handle_is_a_handle, Repr, Value};
use cai::{CAI_POINTER_CHECK_DEFAULT, CAI_SYNC_DEFAULT, CAI_SYNC_NONE, CAI_SYNC_STREAM_ORDERED};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyInt};

use crate::cpython::exact_small_int;
use crate::cpython::fastcall::{exact_int_pair, is_absent};
use crate::cpython::PyObject;
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
        // bool has two instances and no subclass: True is the one that is not False.
        Some(flag) if flag.is_instance_of::<PyBool>() => {
            Ok(if flag.is(PyBool::new(flag.py(), true)) { CAI_SYNC_STREAM_ORDERED } else { CAI_SYNC_NONE })
        }
        Some(mode) => mode.extract::<i32>().map_err(|_| {
            PyTypeError::new_err(format!(
                "sync must be None, True, False or a cai.SYNC_* value, not {}",
                Repr(&scalar(mode.as_borrowed()))
            ))
        }),
    }
}

/// `pointer_check`: None (the default) or an int; an int beyond 32 bits is a ValueError naming
/// it (the core refuses the other values it does not know), anything else a TypeError.
pub(crate) fn pointer_check_mode(mode: Option<&Bound<'_, PyAny>>) -> PyResult<i32> {
    let Some(mode) = mode else { return Ok(CAI_POINTER_CHECK_DEFAULT) };
    let refused = |kind: fn(String) -> PyErr| {
        kind(format!(
            "pointer_check must be None or a cai.POINTER_CHECK_* value, not {}",
            Repr(&scalar(mode.as_borrowed()))
        ))
    };
    // SAFETY: attached (a Bound exists) with a live object.
    if let Some(exact) = unsafe { exact_small_int(mode.as_ptr()) } {
        return i32::try_from(exact).map_err(|_| refused(PyValueError::new_err));
    }
    if !mode.is_instance_of::<PyInt>() || mode.is_instance_of::<PyBool>() {
        return Err(refused(PyTypeError::new_err));
    }
    mode.extract::<i32>().map_err(|_| refused(PyValueError::new_err))
}

/// Absent or None (`Some(None)`), or an exact pair of exact ints each fitting `T`; None for
/// anything else, which the full reading (`int_pair`) takes. Recognized with calls that raise
/// nothing (cpython/fastcall.rs's `is_absent`, `exact_int_pair`).
///
/// # Safety
/// Attached; `value` is NULL (not given) or a live object.
pub(crate) unsafe fn plain_int_pair<T: TryFrom<i64>>(value: *mut PyObject) -> Option<Option<(T, T)>> {
    // SAFETY: the caller's contract.
    if unsafe { is_absent(value) } {
        return Some(None);
    }
    // SAFETY: the caller's contract.
    let (first, second) = unsafe { exact_int_pair(value) }?;
    Some(Some((T::try_from(first).ok()?, T::try_from(second).ok()?)))
}

/// A keyword that is a pair of ints (`max_version`, `dl_device`), each fitting `T`: a value
/// that is no such pair is a TypeError naming the keyword, an int that does not fit a
/// ValueError (never the OverflowError of a conversion).
pub(crate) fn int_pair<T: TryFrom<i64>>(
    value: Option<&Bound<'_, PyAny>>,
    name: &str,
) -> PyResult<Option<(T, T)>> {
    let Some(value) = value else { return Ok(None) };
    // SAFETY: attached (a Bound exists) with a live object.
    if let Some(Some(pair)) = unsafe { plain_int_pair(value.as_ptr()) } {
        return Ok(Some(pair));
    }
    let shown = || Repr(&scalar(value.as_borrowed())).to_string();
    let not_a_pair =
        || PyTypeError::new_err(format!("{name} must be None or a pair of ints, not {}", shown()));
    let (first, second) =
        value.extract::<(Bound<'_, PyAny>, Bound<'_, PyAny>)>().map_err(|_| not_a_pair())?;
    let item = |item: &Bound<'_, PyAny>| -> PyResult<T> {
        if !item.is_instance_of::<PyInt>() {
            return Err(not_a_pair());
        }
        item.extract::<i64>()
            .ok()
            .and_then(|wide| T::try_from(wide).ok())
            .ok_or_else(|| PyValueError::new_err(format!("{name} holds an int out of range: {}", shown())))
    };
    Ok(Some((item(&first)?, item(&second)?)))
}
