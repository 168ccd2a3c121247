//! Status names and the library version.

use std::os::raw::c_char;

use crate::status::{CaiStatus, Status, CAI_OK};

/// The name of a status code ("CAI_OK", "CAI_ERROR_INVALID_SHAPE", ...), or
/// "CAI_ERROR_UNKNOWN" for a code libcai does not define. Static storage: never free it.
#[no_mangle]
pub extern "C" fn cai_status_string(status: CaiStatus) -> *const c_char {
    let name = match Status::from_code(status) {
        Some(s) => s.name_with_nul(),
        None if status == CAI_OK => "CAI_OK\0",
        None => "CAI_ERROR_UNKNOWN\0",
    };
    name.as_ptr().cast()
}

/// libcai's version as "MAJOR.MINOR.PATCH". Static storage: never free it.
#[no_mangle]
pub extern "C" fn cai_library_version() -> *const c_char {
    concat!(env!("CARGO_PKG_VERSION"), "\0").as_ptr().cast()
}
