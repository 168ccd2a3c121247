//! Import, sync, pointer queries and driver status: the functions that use the CUDA driver.

use super::{guard, optional, optional_mut, required, required_mut};
use crate::abi::{CaiArray, CaiError, CaiImportOptions, CaiPointerInfo, CaiSyncOptions};
use crate::dlpack::device_of_taken_tensor;
use crate::import::{import_described, pointer_info, sync};
use crate::status::CaiStatus;

/// Consumer side: validates `array`, refuses writable access to read-only data, checks the
/// data pointer with the driver (device-accessible, whole extent inside its allocation, and
/// for a struct `cai_from_dlpack*` wrote, on the CUDA device its tensor names; by default only
/// where a driver loads, never for zero-size arrays) and synchronizes with the array's stream
/// as `options->sync_mode` says. `options` may be NULL for the defaults.
///
/// `*info` (may be NULL) is written only on success. `error` may be NULL; it is written only
/// on failure. Needs the driver only for a pointer check or a sync; fails with
/// CAI_ERROR_NO_DRIVER when one of those is needed and no driver loads.
///
/// First runs the releases `cai_release_after` queued whose work has completed (with nothing
/// queued: one atomic load, no lock, no driver call); a failed event query met there still runs
/// its release and is dropped, never this call's failure.
///
/// # Safety
/// `array` is NULL or points to a valid `CaiArray` (its `mask` and `descr`, when set, point to what
/// its fields say); `options` is NULL or points to a valid `CaiImportOptions`; `info` is NULL or
/// points to a writable `CaiPointerInfo`; `error` is NULL or points to a writable `CaiError`. The
/// array's `data` and `stream` are the producer's live handles when a check or sync uses them.
#[no_mangle]
pub unsafe extern "C" fn cai_import(
    array: *const CaiArray,
    options: *const CaiImportOptions,
    info: *mut CaiPointerInfo,
    error: *mut CaiError,
) -> CaiStatus {
    guard(error, || {
        let array = required(array, "array")?;
        let options = optional(options).copied().unwrap_or_default();
        // SAFETY: a valid struct (the caller's contract), which owns what its release says.
        let found = import_described(array, None, &options, unsafe { device_of_taken_tensor(array) })?.info;
        if let Some(out) = optional_mut(info) {
            *out = found;
        }
        Ok(())
    })
}

/// Synchronizes with `array`'s stream from `options->consumer_stream` in
/// `options->sync_mode` (NULL: no consumer stream, CAI_SYNC_DEFAULT), without the other import
/// checks. A NULL-stream (`stream` 0, "None") array needs nothing and loads no driver. With no
/// pointer query to name the array's context, the default-stream handles 1 and 2 mean those of
/// the calling thread's current context; `cai_import`, once it has queried the pointer, uses
/// the allocation's. Runs the due releases first, as `cai_import` does.
///
/// # Safety
/// `array` is NULL or points to a valid `CaiArray` (its `mask` and `descr`, when set, point to what
/// its fields say); `options` is NULL or points to a valid `CaiSyncOptions`; `error` is NULL or
/// points to a writable `CaiError`. The array's `stream` is the producer's live handle.
#[no_mangle]
pub unsafe extern "C" fn cai_sync(
    array: *const CaiArray,
    options: *const CaiSyncOptions,
    error: *mut CaiError,
) -> CaiStatus {
    guard(error, || {
        let options = optional(options).copied().unwrap_or_default();
        sync(required(array, "array")?, &options)
    })
}

/// Asks the driver about a data pointer: context, device, memory type, managed, and the
/// allocation holding it. Fails with CAI_ERROR_NOT_DEVICE_POINTER for memory the device
/// cannot reach. `*info` is written only on success.
///
/// # Safety
/// `info` is NULL or points to a writable `CaiPointerInfo`; `error` is NULL or points to a writable
/// `CaiError`.
#[no_mangle]
pub unsafe extern "C" fn cai_pointer_info(
    pointer: u64,
    info: *mut CaiPointerInfo,
    error: *mut CaiError,
) -> CaiStatus {
    guard(error, || {
        let out = required_mut(info, "info")?;
        *out = pointer_info(pointer)?;
        Ok(())
    })
}

/// Loads the driver if it is not loaded yet and reports whether that worked: CAI_OK, or
/// CAI_ERROR_NO_DRIVER with the loader's message. `*version` (may be NULL) receives
/// cuDriverGetVersion's value on success, e.g. 12040.
///
/// # Safety
/// `version` is NULL or points to a writable `i32`; `error` is NULL or points to a writable
/// `CaiError`.
#[no_mangle]
pub unsafe extern "C" fn cai_driver_status(version: *mut i32, error: *mut CaiError) -> CaiStatus {
    guard(error, || {
        let loaded = crate::driver::driver_version()?;
        if let Some(out) = optional_mut(version) {
            *out = loaded;
        }
        Ok(())
    })
}
