//! The reader of a DLPack producer without an exchange table: `__dlpack__` asked for a capsule
//! ordered for the consumer, its tensor taken over by the core.

use cai::binding::dlpack::device_is_cuda_or_allowed_host;
use cai::binding::import::ProducerOrdering;
use cai::{
    CaiDLDevice, CaiDLPackOptions, CAI_DLPACK_MAJOR_VERSION, CAI_DLPACK_MINOR_VERSION, CAI_DL_CPU,
    CAI_STREAM_NONE,
};
use pyo3::exceptions::{PyBufferError, PyTypeError};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyTuple};

use crate::dlpack::{device_of_taken, take_capsule, Taken};
use crate::errors::{CaiResult, Failure};

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
pub fn reported_device(obj: &Bound<'_, PyAny>) -> PyResult<CaiDLDevice> {
    let (device_type, device_id): (i32, i32) =
        obj.call_method0(intern!(obj.py(), "__dlpack_device__"))?.extract().map_err(|_| {
            PyTypeError::new_err("__dlpack_device__() must return a (device_type, device_id) pair of ints")
        })?;
    Ok(CaiDLDevice { device_type, device_id })
}

/// Takes the tensor of a DLPack producer: asks for a capsule ordered for the consumer (the
/// core's `producer_ordering`), marks the capsule used and hands the tensor to the core, which
/// owns it from then on. The array is on the stream the producer ordered, for the import to
/// finish the sync (nothing more for a consumer on that stream, a host wait for one without).
/// `reported` is the device `__dlpack_device__` gave already, if it was asked.
pub fn take_from_producer(
    obj: &Bound<'_, PyAny>,
    consumer: u64,
    ordering: ProducerOrdering,
    allow_host: bool,
    reported: Option<CaiDLDevice>,
) -> CaiResult<(Taken, CaiDLDevice)> {
    let py = obj.py();
    // A consumer without a stream asks for None whatever the device: then `__dlpack_device__`
    // is not called, and the tensor's own device is checked once taken.
    let reported = match (reported, ordering) {
        (Some(device), _) => Some(device),
        (None, ProducerOrdering::OnStream(_)) if consumer == CAI_STREAM_NONE => None,
        (None, _) => Some(reported_device(obj)?),
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
