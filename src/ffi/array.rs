//! Validation, layout, export and release of a `CaiArray`.

use super::{guard, optional, required, required_mut};
use crate::abi::{CaiArray, CaiError, CaiExportOptions, CaiLayout};
use crate::export::export;
use crate::status::CaiStatus;

/// Checks `array` against every rule of the CUDA Array Interface that needs no driver
/// (the mask recursively). Pure: never loads or calls the CUDA driver.
///
/// `array` is read only. `error` may be NULL; it is written only on failure.
/// Returns CAI_OK or the CAI_ERROR_* code of the first rule broken.
///
/// # Safety
/// `array` is NULL or points to a valid `CaiArray` (its `mask` and `descr`, when set, point to what
/// its fields say); `error` is NULL or points to a writable `CaiError`.
#[no_mangle]
pub unsafe extern "C" fn cai_validate(array: *const CaiArray, error: *mut CaiError) -> CaiStatus {
    guard(error, || crate::validate::validate(required(array, "array")?).map(drop))
}

/// Validates `array` and reports its element count, byte size, byte extent, contiguity and
/// stride alignment. Pure, like `cai_validate`.
///
/// `*layout` is written only on success. `error` may be NULL; it is written only on failure.
///
/// # Safety
/// `array` is NULL or points to a valid `CaiArray` (its `mask` and `descr`, when set, point to what
/// its fields say); `layout` is NULL or points to a writable `CaiLayout`; `error` is NULL or points
/// to a writable `CaiError`.
#[no_mangle]
pub unsafe extern "C" fn cai_layout(
    array: *const CaiArray,
    layout: *mut CaiLayout,
    error: *mut CaiError,
) -> CaiStatus {
    guard(error, || {
        let computed = crate::validate::layout_of(required(array, "array")?, None)?;
        *required_mut(layout, "layout")? = computed;
        Ok(())
    })
}

/// Producer side: validates `array` and rewrites it in export form (typestr with its byte
/// order, strides cleared when C-contiguous, data 0 when zero-size, version 3 or the one asked
/// for, no stream in version 2). `options` may be NULL for the defaults.
///
/// `*array` is rewritten only on success. `error` may be NULL; it is written only on failure.
///
/// # Safety
/// `array` is NULL or points to a valid `CaiArray` (its `mask` and `descr`, when set, point to what
/// its fields say), which nothing else reads or writes during the call; `options` is NULL or points
/// to a valid `CaiExportOptions` (its `work_streams` holding `work_stream_count` entries); `error`
/// is NULL or points to a writable `CaiError`.
#[no_mangle]
pub unsafe extern "C" fn cai_export(
    array: *mut CaiArray,
    options: *const CaiExportOptions,
    error: *mut CaiError,
) -> CaiStatus {
    guard(error, || {
        let array = required_mut(array, "array")?;
        let options = optional(options).copied().unwrap_or_default();
        export(array, &options).map(drop)
    })
}

/// Calls `array->release(array)` if it is set, then clears it, so that the callback runs
/// exactly once however often this is called, also when calls race on the same array (the
/// callback is taken by an atomic swap). Racing it with any other read or write of the array
/// is the caller's to prevent. A borrowed array (release NULL) is left as is. The mask and
/// descr are the producer's to free in its callback; libcai never frees them.
///
/// # Safety
/// `array` is NULL or points to a valid `CaiArray` (its `mask` and `descr`, when set, point to what
/// its fields say) and is not read or written meanwhile by anything but other `cai_release` calls;
/// its `release` callback, when set, may be called with it. `error` is NULL or points to a writable
/// `CaiError`.
#[no_mangle]
pub unsafe extern "C" fn cai_release(array: *mut CaiArray, error: *mut CaiError) -> CaiStatus {
    guard(error, || {
        required(array, "array")?;
        // SAFETY: a valid CaiArray, checked non-NULL; no reference to it is held here.
        unsafe { crate::abi::release(array) };
        Ok(())
    })
}

/// Moves the array `src` owns into `dst`: a bitwise copy, then `src->release` cleared, so that
/// only `dst` can release it. `dst` must own nothing (its `release` NULL: a zeroed, released or
/// borrowed array) and be another array than `src`, else CAI_ERROR_INVALID_ARGUMENT and
/// nothing is written.
///
/// # Safety
/// `dst` and `src` are each NULL or point to a valid `CaiArray` that nothing else reads or writes
/// during the call; `error` is NULL or points to a writable `CaiError`.
#[no_mangle]
pub unsafe extern "C" fn cai_move(dst: *mut CaiArray, src: *mut CaiArray, error: *mut CaiError) -> CaiStatus {
    guard(error, || {
        required(dst, "dst")?;
        required(src, "src")?;
        // SAFETY: both checked non-NULL; the caller promises valid arrays.
        unsafe { crate::abi::move_array(dst, src) }
    })
}
