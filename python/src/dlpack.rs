//! DLPack's Python capsules and tensors, both ways: taking the tensor out of a producer's
//! capsule, and making the tensors and capsules a cai.Array hands out. The capsules follow the DLPack Python protocol: "dltensor_versioned"
//! (or "dltensor" for producers and consumers of the legacy struct), renamed "used_..." by
//! the consumer that takes the tensor; a capsule never taken runs the tensor's deleter when it
//! is collected. Every rule of the mapping is the core's (src/dlpack.rs).

use cai::binding::dlpack::{
    device_of, discard, from_dlpack, from_dlpack_legacy, to_dlpack, to_dlpack_legacy, HostWords, Keeper,
};
use cai::binding::release_array;
use cai::binding::rules::Validated;
use cai::{
    CaiArray, CaiDLDevice, CaiDLManagedTensor, CaiDLManagedTensorVersioned, CaiDLPackOptions, CaiSyncOptions,
    CAI_SYNC_DEFAULT,
};
use pyo3::exceptions::{PyBufferError, PyTypeError};
use pyo3::prelude::*;
use pyo3::sync::critical_section::with_critical_section;

use crate::cpython::{self, c_void, CStr, PyObject};
use crate::errors::{CaiResult, Failure};
use crate::pool::Pooled;

const VERSIONED: &CStr = c"dltensor_versioned";
const USED_VERSIONED: &CStr = c"used_dltensor_versioned";
const LEGACY: &CStr = c"dltensor";
const USED_LEGACY: &CStr = c"used_dltensor";

/// An array that owns a tensor just taken from a producer: released (the tensor's deleter run)
/// if it is dropped before it is handed on, so that no failure after the take leaks the tensor.
pub struct Taken(Option<Pooled>);

impl Taken {
    pub fn new() -> Taken {
        Taken(Some(Pooled::cleared()))
    }

    pub fn into_inner(mut self) -> Pooled {
        self.0.take().expect("present until handed on")
    }

    pub fn array(&mut self) -> &mut CaiArray {
        self.0.as_deref_mut().expect("present until handed on")
    }
}

/// A tensor taken from a producer: the array that owns it, the tensor's device, and what the
/// core validated when it read the tensor (for the import to reuse: no rule runs twice).
pub struct TakenTensor {
    pub taken: Taken,
    pub device: CaiDLDevice,
    pub validated: Validated,
}

impl Drop for Taken {
    fn drop(&mut self) {
        if let Some(mut array) = self.0.take() {
            // SAFETY: the array owns the tensor (its release deletes it); released once, here.
            unsafe { release_array(&mut *array) };
        }
    }
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

/// Takes the tensor out of an unused DLPack capsule into `array` (the core owns it from then
/// on); returns whether it was the versioned struct, and what the core validated of it. The
/// name check, the pointer and the renaming to "used_..." happen in one critical section on
/// the capsule, so that two threads (with or without a GIL) handed the same capsule never both
/// take its tensor.
pub fn take_capsule(
    capsule: &Bound<'_, PyAny>,
    options: &CaiDLPackOptions,
    how_to_allow_host: HostWords,
    array: &mut CaiArray,
) -> CaiResult<(bool, Validated)> {
    let raw = capsule.as_ptr();
    let taken = with_critical_section(capsule, || {
        // SAFETY: a live capsule, locked for the call; the name is checked before the pointer
        // is taken, and the capsule renamed "used_..." before the core takes the tensor, so that
        // its destructor (and any other consumer) leaves the tensor alone from then on.
        unsafe {
            if let Some(tensor) = cpython::take_capsule_pointer(raw, VERSIONED, USED_VERSIONED) {
                Some((tensor, true))
            } else {
                cpython::take_capsule_pointer(raw, LEGACY, USED_LEGACY).map(|tensor| (tensor, false))
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
    let validated = unsafe {
        if versioned {
            from_dlpack(tensor.cast(), options, how_to_allow_host, array)?
        } else {
            from_dlpack_legacy(tensor.cast(), options, how_to_allow_host, array)?
        }
    };
    Ok((versioned, validated))
}

/// Destructor of a capsule made here: a tensor no consumer took is deleted with it.
unsafe extern "C" fn drop_versioned_capsule(capsule: *mut PyObject) {
    // SAFETY: CPython passes the live capsule being freed, attached; a tensor still under its
    // unused name is the capsule's to delete.
    if let Some(tensor) = unsafe { cpython::capsule_pointer(capsule, VERSIONED) } {
        // SAFETY: as above: no consumer took it.
        unsafe { delete_tensor(tensor.as_ptr(), true) };
    }
}

unsafe extern "C" fn drop_legacy_capsule(capsule: *mut PyObject) {
    // SAFETY: as drop_versioned_capsule's.
    if let Some(tensor) = unsafe { cpython::capsule_pointer(capsule, LEGACY) } {
        // SAFETY: as above: no consumer took it.
        unsafe { delete_tensor(tensor.as_ptr(), false) };
    }
}

/// A DLPack tensor of `view` (`validated`: its validation, when the caller has it) keeping
/// alive what `keeper` names (the view itself, an owning struct such as a cai.Array's copy that
/// `Array::own_export` made own an export; or an object, for an offered type's description,
/// which owns nothing), as the versioned struct when `versioned`, else the legacy one, after
/// the consumer's stream (if any) is ordered after the array's. Taken by reference, as the
/// struct is large: on success the tensor owns what the view owned (its release cleared); on
/// every failure the view is released (its export ended) before this returns.
pub fn tensor_of(
    view: &mut CaiArray,
    validated: Option<&Validated>,
    device: CaiDLDevice,
    consumer: Option<u64>,
    versioned: bool,
    keeper: Keeper,
) -> Result<*mut c_void, cai::Error> {
    let ordered = match consumer {
        Some(consumer) => cai::binding::import::sync(
            view,
            &CaiSyncOptions { consumer_stream: consumer, sync_mode: CAI_SYNC_DEFAULT, ..Default::default() },
        ),
        None => Ok(()),
    };
    let made = ordered.and_then(|()| {
        if versioned {
            to_dlpack(view, validated, Some(device), keeper).map(|t| t.cast::<c_void>())
        } else {
            to_dlpack_legacy(view, validated, Some(device), keeper).map(|t| t.cast::<c_void>())
        }
    });
    if made.is_err() {
        // SAFETY: the view still owns its reference (the core left it unchanged).
        unsafe { release_array(view) };
    }
    made
}

/// A DLPack capsule owning `tensor` (from `tensor_of`), named for the versioned struct when
/// `versioned`, else for the legacy one.
pub fn capsule_of(py: Python<'_>, tensor: *mut c_void, versioned: bool) -> CaiResult<Py<PyAny>> {
    let (name, destructor): (&'static CStr, cpython::CapsuleDestructor) =
        if versioned { (VERSIONED, drop_versioned_capsule) } else { (LEGACY, drop_legacy_capsule) };
    // SAFETY: a tensor just made, owned by the capsule from here on (its destructor deletes it
    // once, unless a consumer took it: renamed it).
    let capsule = unsafe { cpython::owning_capsule(py, tensor, name, destructor) };
    match capsule {
        Ok(capsule) => Ok(capsule.unbind()),
        Err(error) => {
            // SAFETY: the capsule was not made: the tensor is still ours to delete.
            unsafe { delete_tensor(tensor, versioned) };
            Err(error.into())
        }
    }
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
