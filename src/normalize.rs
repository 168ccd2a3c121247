//! The export form of a descriptor: what a producer writes, in the one spelling consumers
//! expect (spec v2+: strides None when C-contiguous, data 0 when zero-size).

use crate::abi::{CaiArray, CAI_STREAM_NONE};
use crate::dtype::{canonical_typestr, typestr_in_buffer};
use crate::element_type::{typestr_of, SubByte};
use crate::layout::is_c_contiguous;
use crate::status::{Error, Result, Status};
use crate::validate::{validate, Validated};

/// Version written when the caller does not choose one.
pub const CAI_EXPORT_VERSION_DEFAULT: i32 = 3;

/// The version an export writes: the one asked for (2 or 3), else the environment's
/// (CAI_ARRAY_INTERFACE_EXPORT_VERSION, read once: src/config.rs), else 3.
pub fn export_version(requested: i32) -> Result<i32> {
    match requested {
        0 => Ok(crate::config::export_version_from_environment()?.unwrap_or(CAI_EXPORT_VERSION_DEFAULT)),
        2 | 3 => Ok(requested),
        other => Err(Error::new(Status::InvalidArgument, format!("export version {other} is not 2 or 3"))),
    }
}

/// Rewrites `array` in export form for `version` (2 or 3): typestr spelled as numpy's
/// `dtype.str`, strides dropped when C-contiguous, data 0 when zero-size, unused shape/stride
/// slots zeroed, and no stream in version 2. `validated` is what validating `array` found, where
/// the caller has it (else it is validated here); the answer is returned. On error `array` is
/// unchanged.
pub fn normalize_for_export(
    array: &mut CaiArray,
    version: i32,
    validated: Option<&Validated>,
) -> Result<Validated> {
    let validated = &match validated {
        Some(validated) => *validated,
        None => validate(array)?,
    };
    debug_assert!(version == 2 || version == 3);
    let canonical = canonical_typestr(typestr_in_buffer(&array.typestr, "typestr")?)?;
    // A carried DLPack type exports the typestr it travels with ("<V2" for bfloat16, as torch
    // and ml_dtypes write it), where numpy's spelling would drop the byte order ("|V2").
    let carried =
        (!array.dl_dtype.is_absent()).then(|| typestr_of(array.dl_dtype, SubByte::Padded)).transpose()?;
    let ndim = array.ndim as usize;
    if array.strides_given == 1
        && is_c_contiguous(&array.shape[..ndim], &array.strides[..ndim], validated.dtype.itemsize)
    {
        array.strides_given = 0;
    }
    if array.strides_given == 0 {
        array.strides.fill(0);
    }
    array.shape[ndim..].fill(0);
    array.strides[ndim..].fill(0);
    match carried {
        Some(typed) => {
            array.set_typestr(std::str::from_utf8(typed.as_bytes()).expect("typestrs made are ASCII"))
        }
        None => array.set_typestr(canonical.as_str()),
    };
    if validated.element_count == 0 {
        array.data = 0;
    }
    array.version = version;
    if version < 3 {
        array.stream = CAI_STREAM_NONE;
    }
    Ok(*validated)
}
