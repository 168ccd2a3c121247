//! The `extern "C"` surface. Thin by rule: NULL checks, a panic boundary, a status code and
//! the optional error out-parameter; the logic lives in the core modules.

mod array;
mod device;
mod dlpack;
mod dtype;
mod info;
mod release;
// After `release`: cbindgen writes the functions in this order, and cai_python.h's table
// appends each minor's (release_after's in minor 4, ipc's in minor 5).
mod ipc;

pub use array::{cai_export, cai_layout, cai_move, cai_release, cai_validate};
pub use device::{cai_driver_status, cai_import, cai_pointer_info, cai_sync};
pub use dlpack::{cai_from_dlpack, cai_from_dlpack_legacy, cai_to_dlpack, cai_to_dlpack_legacy};
pub use dtype::cai_typestr_parse;
pub use info::{cai_library_version, cai_status_string};
pub use ipc::{cai_ipc_export, cai_ipc_open};
pub use release::{cai_release_after, cai_release_pending};

use std::os::raw::c_char;
use std::panic::{catch_unwind, AssertUnwindSafe};

use crate::abi::{CaiError, CAI_ERROR_MESSAGE_CAPACITY};
use crate::status::{fail, CaiStatus, Error, Result, Status, CAI_OK};

/// Writes `error` into `out` (NULL: nothing), its message cut to fit at a character boundary.
pub(crate) fn write_error(out: *mut CaiError, error: &Error) {
    // SAFETY: the caller passes NULL or a writable CaiError.
    let Some(out) = (unsafe { out.as_mut() }) else { return };
    out.code = error.status.code();
    out.driver_result = error.driver_result;
    let text = format!("{}: {}", error.status.name(), error.message);
    let mut end = text.len().min(CAI_ERROR_MESSAGE_CAPACITY - 1);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    for (slot, &byte) in out.message.iter_mut().zip(&text.as_bytes()[..end]) {
        *slot = byte as c_char;
    }
    out.message[end] = 0;
}

/// Runs `body` behind a panic boundary and turns its outcome into a status code, filling
/// `error` on failure. No panic ever unwinds into C.
pub(crate) fn guard(error: *mut CaiError, body: impl FnOnce() -> Result<()>) -> CaiStatus {
    let failure = match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(())) => return CAI_OK,
        Ok(Err(e)) => e,
        Err(payload) => {
            let what = payload
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".into());
            Error::new(Status::Panic, format!("libcai panicked (a bug; please report it): {what}"))
        }
    };
    write_error(error, &failure);
    failure.status.code()
}

/// Borrows a required pointer argument, or fails naming it.
#[inline]
pub(crate) fn required<'a, T>(ptr: *const T, name: &'static str) -> Result<&'a T> {
    // SAFETY: the caller passes NULL or a valid pointer, as every function's docs require.
    match unsafe { ptr.as_ref() } {
        Some(borrowed) => Ok(borrowed),
        None => fail(Status::NullArgument, move || format!("{name} is NULL")),
    }
}

/// Borrows an optional pointer argument: NULL is None.
pub(crate) fn optional<'a, T>(ptr: *const T) -> Option<&'a T> {
    // SAFETY: the caller passes NULL or a valid pointer, as every function's docs require.
    unsafe { ptr.as_ref() }
}

/// Borrows an optional output argument: NULL is None.
pub(crate) fn optional_mut<'a, T>(ptr: *mut T) -> Option<&'a mut T> {
    // SAFETY: the caller passes NULL or a valid pointer, as every function's docs require.
    unsafe { ptr.as_mut() }
}

/// Borrows a required NUL-terminated string argument, or fails naming it.
pub(crate) fn required_c_str<'a>(ptr: *const c_char, name: &'static str) -> Result<&'a [u8]> {
    required(ptr, name)?;
    // SAFETY: checked non-NULL; the caller promises NUL termination, as the docs require.
    Ok(unsafe { std::ffi::CStr::from_ptr(ptr) }.to_bytes())
}

/// Borrows a required pointer argument mutably, or fails naming it.
#[inline]
pub(crate) fn required_mut<'a, T>(ptr: *mut T, name: &'static str) -> Result<&'a mut T> {
    // SAFETY: as for `required`, and the caller does not alias it during the call.
    match unsafe { ptr.as_mut() } {
        Some(borrowed) => Ok(borrowed),
        None => fail(Status::NullArgument, move || format!("{name} is NULL")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn blank_error() -> CaiError {
        CaiError { code: -1, driver_result: -1, message: [0; CAI_ERROR_MESSAGE_CAPACITY] }
    }

    #[test]
    fn guard_turns_panics_into_cai_error_panic() {
        let mut e = blank_error();
        let status = guard(&mut e, || panic!("boom"));
        assert_eq!(status, Status::Panic.code());
        assert_eq!(e.code, Status::Panic.code());
        assert!(e.message_str().contains("boom"), "{}", e.message_str());
    }

    #[test]
    fn guard_leaves_the_error_untouched_on_success() {
        let mut e = blank_error();
        assert_eq!(guard(&mut e, || Ok(())), CAI_OK);
        assert_eq!(e.code, -1);
        assert_eq!(guard(std::ptr::null_mut(), || Err(Error::new(Status::InvalidShape, "x"))), 4);
    }

    #[test]
    fn long_messages_are_truncated_on_a_char_boundary() {
        let mut e = blank_error();
        guard(&mut e, || Err(Error::new(Status::InvalidTypestr, "\u{3bc}".repeat(600))));
        let text = e.message_str();
        assert!(text.len() < CAI_ERROR_MESSAGE_CAPACITY);
        assert!(text.ends_with('\u{3bc}'));
    }
}
