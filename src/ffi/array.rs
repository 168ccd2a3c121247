//! Validation, layout, export and release of a `CaiArray`.

use super::{guard, optional, required, required_mut, CaiError};
use crate::array::CaiArray;
use crate::export::{export, CaiExportOptions};
use crate::layout::CaiLayout;

/// Checks `array` against every rule of the CUDA Array Interface that needs no driver
/// (the mask recursively). Pure: never loads or calls the CUDA driver.
///
/// `array` is read only. `error` may be NULL; it is written only on failure.
/// Returns CAI_OK or the CAI_ERROR_* code of the first rule broken.
#[no_mangle]
pub extern "C" fn cai_validate(array: *const CaiArray, error: *mut CaiError) -> i32 {
    guard(error, || crate::validate::validate(required(array, "array")?).map(drop))
}

/// Validates `array` and reports its element count, byte size, byte extent, contiguity and
/// stride alignment. Pure, like `cai_validate`.
///
/// `*layout` is written only on success. `error` may be NULL; it is written only on failure.
#[no_mangle]
pub extern "C" fn cai_layout(array: *const CaiArray, layout: *mut CaiLayout, error: *mut CaiError) -> i32 {
    guard(error, || {
        let computed = crate::layout::layout_of(required(array, "array")?)?;
        *required_mut(layout, "layout")? = computed;
        Ok(())
    })
}

/// Producer side: validates `array` and rewrites it in export form (typestr with its byte
/// order, strides cleared when C-contiguous, data 0 when zero-size, version 3 or the one asked
/// for, no stream in version 2). `options` may be NULL for the defaults.
///
/// `*array` is rewritten only on success. `error` may be NULL; it is written only on failure.
#[no_mangle]
pub extern "C" fn cai_export(
    array: *mut CaiArray,
    options: *const CaiExportOptions,
    error: *mut CaiError,
) -> i32 {
    guard(error, || {
        let array = required_mut(array, "array")?;
        let options = optional(options).copied().unwrap_or_default();
        export(array, &options).map(drop)
    })
}

/// Calls `array->release(array)` if it is set, then clears it, so that the callback runs
/// exactly once however often this is called. A borrowed array (release NULL) is left as is.
/// The mask and descr are the producer's to free in its callback; libcai never frees them.
#[no_mangle]
pub extern "C" fn cai_release(array: *mut CaiArray, error: *mut CaiError) -> i32 {
    guard(error, || {
        let array = required_mut(array, "array")?;
        if let Some(release) = array.release.take() {
            // SAFETY: the producer that set `release` promised it may be called with the array.
            unsafe { release(array) };
        }
        Ok(())
    })
}
