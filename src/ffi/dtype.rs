//! Type string parsing.

use std::os::raw::c_char;

use super::{guard, required_c_str, required_mut};
use crate::abi::{CaiDtype, CaiError};
use crate::dtype::parse_typestr;
use crate::status::CaiStatus;

/// Parses a NUL-terminated numpy typestr (e.g. `"<f4"`, `"|V12"`, `"<M8[ns]"`) as numpy would.
///
/// `*dtype` is written only on success. `error` may be NULL; it is written only on failure.
///
/// # Safety
/// `typestr` is NULL or points to a NUL-terminated string; `dtype` is NULL or points to a writable
/// `CaiDtype`; `error` is NULL or points to a writable `CaiError`.
#[no_mangle]
pub unsafe extern "C" fn cai_typestr_parse(
    typestr: *const c_char,
    dtype: *mut CaiDtype,
    error: *mut CaiError,
) -> CaiStatus {
    guard(error, || {
        let bytes = required_c_str(typestr, "typestr")?;
        *required_mut(dtype, "dtype")? = parse_typestr(bytes)?;
        Ok(())
    })
}
