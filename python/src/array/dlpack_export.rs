//! `__dlpack__` as every producer of this module answers it (cai.Array and the types offered by
//! `cai_python_offer`): the keyword arguments checked before any work, the consumer's stream
//! ordered after the producer's, and the capsule made of an owning view.

use cai::{CaiArray, CaiDLDevice, CAI_DL_CPU, CAI_STREAM_LEGACY};
use pyo3::exceptions::PyBufferError;
use pyo3::prelude::*;
use pyo3::Borrowed;

use crate::cpython::fastcall::{is_absent_or_bool, is_absent_or_small_int, Signature};
use crate::cpython::PyObject;
use crate::dlpack::{capsule_of, export_arguments_allowed, tensor_of};
use crate::errors::CaiResult;
use crate::options::{consumer_stream, int_pair, plain_int_pair};
use crate::values::scalar;
use cai::binding::dict::Repr;
use cai::binding::dlpack::Keeper;
use cai::binding::rules::Validated;

/// `__dlpack__`'s keyword-only parameters, by the array API standard (cai.Array's and every
/// offered type's).
pub static DLPACK_SIGNATURE: Signature<4> =
    Signature::new("__dlpack__", [c"stream", c"max_version", c"dl_device", c"copy"], 0, 0);

/// `__dlpack__`'s keyword arguments: `stream` as given (borrowed from the call), the pairs
/// read (`int_pair`).
pub struct DlpackArguments<'a, 'py> {
    pub stream: Option<Borrowed<'a, 'py, PyAny>>,
    pub max_version: Option<(u32, u32)>,
    pub dl_device: Option<(i32, i32)>,
    pub copy: Option<bool>,
}

/// `max_version` and `dl_device` as read already (`plain_int_pair`).
pub type ReadPairs = (Option<(u32, u32)>, Option<(i32, i32)>);

/// What the arguments ask once read: the consumer stream to order (None: no sync) and which
/// struct.
pub struct DlpackRequest {
    pub consumer: Option<u64>,
    pub versioned: bool,
}

/// The pairs of a `__dlpack__` call whose arguments are the plain values consumers pass
/// (`stream` an int that fits an i64, `max_version` and `dl_device` exact pairs of exact ints
/// that fit theirs, `copy` a bool, each or None), read once, here; None for any other call,
/// whose body reads them in full. A plain call's body reads nothing that fails.
///
/// # Safety
/// Attached; each slot NULL or a live argument of the call.
pub unsafe fn plain_arguments(slots: &[*mut PyObject; 4]) -> Option<ReadPairs> {
    // SAFETY: the caller's contract: NULL or live arguments, type checks and reads.
    unsafe {
        if !is_absent_or_small_int(slots[0]) || !is_absent_or_bool(slots[3]) {
            return None;
        }
        Some((plain_int_pair(slots[1])?, plain_int_pair(slots[2])?))
    }
}

impl<'a, 'py> DlpackArguments<'a, 'py> {
    /// The arguments of a call whose slots `DLPACK_SIGNATURE` matched: None and absent alike;
    /// `copy` a bool (else a TypeError naming it); the pairs as `read` has them, else read here
    /// (one that is no pair of ints a TypeError naming it, an int out of range a ValueError).
    ///
    /// # Safety
    /// Attached; each slot is NULL or an argument of the call, alive while the result is used.
    pub unsafe fn of_call(
        py: Python<'py>,
        slots: &'a [*mut PyObject; 4],
        read: Option<ReadPairs>,
    ) -> PyResult<Self> {
        // SAFETY: the caller's contract.
        let given =
            |index: usize| unsafe { Borrowed::from_ptr_or_opt(py, slots[index]) }.filter(|v| !v.is_none());
        let copy = match given(3) {
            None => None,
            Some(value) => {
                Some(value.extract::<bool>().map_err(|error| DLPACK_SIGNATURE.argument_error(py, 3, error))?)
            }
        };
        let (max_version, dl_device) = match read {
            Some(pairs) => pairs,
            None => {
                (int_pair(given(1).as_deref(), "max_version")?, int_pair(given(2).as_deref(), "dl_device")?)
            }
        };
        Ok(DlpackArguments { stream: given(0), max_version, dl_device, copy })
    }

    /// The arguments read for the memory on the device `device_of` finds: a copy or another
    /// device is a BufferError. The consumer's stream: None is the legacy default stream, -1
    /// no sync; host memory takes no stream.
    pub fn read(
        &self,
        device_of: impl FnOnce() -> PyResult<CaiDLDevice>,
    ) -> PyResult<(DlpackRequest, CaiDLDevice)> {
        let device = device_of()?;
        export_arguments_allowed(device, self.dl_device, self.copy)?;
        let host = device.device_type == CAI_DL_CPU;
        let consumer = match self.stream.as_deref() {
            Some(s) if s.extract::<i64>().ok() == Some(-1) => None,
            None if host => None,
            None => Some(CAI_STREAM_LEGACY),
            Some(s) if host => {
                return Err(PyBufferError::new_err(format!(
                    "stream must be None for host memory, not {}",
                    Repr(&scalar(s.as_borrowed()))
                )))
            }
            Some(s) => Some(consumer_stream(Some(s))?),
        };
        Ok((
            DlpackRequest { consumer, versioned: self.max_version.is_some_and(|(major, _)| major >= 1) },
            device,
        ))
    }
}

/// The capsule of an owning `view` (`validated`: its validation, when the caller has it) on
/// `device` as `request` asks (the view handed over to the tensor, or released on failure).
pub fn dlpack_capsule(
    py: Python<'_>,
    view: &mut CaiArray,
    validated: Option<&Validated>,
    device: CaiDLDevice,
    request: &DlpackRequest,
) -> CaiResult<Py<PyAny>> {
    let tensor = tensor_of(view, validated, device, request.consumer, request.versioned, Keeper::Array)?;
    capsule_of(py, tensor, request.versioned)
}
