//! Consumer side: accept a descriptor for use: validate it, check its pointer with the driver,
//! and synchronize with the producer's stream.

use crate::array::CaiArray;
use crate::device::pointer::{extent_within_allocation, pointer_info, CaiPointerInfo};
use crate::device::sync::{sync_if_needed, sync_mode_is_known};
use crate::driver::{driver, driver_available};
use crate::status::{Error, Result, Status};
use crate::validate::{option_is_a_flag, reserved_are_zero, stream_for_version, validate, Validated};

/// Check the pointer when a driver can be loaded; skip it quietly when none can.
pub const CAI_POINTER_CHECK_DEFAULT: i32 = 0;
/// Always check the pointer; fail with CAI_ERROR_NO_DRIVER when no driver can be loaded.
pub const CAI_POINTER_CHECK_ALWAYS: i32 = 1;
/// Never ask the driver about the pointer.
pub const CAI_POINTER_CHECK_NEVER: i32 = 2;

/// How `cai_import` accepts an array. Zero-initialized means the defaults.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct CaiImportOptions {
    /// The consumer's stream, as a CAI stream value (0: none, 1 legacy, 2 per-thread, else a CUstream).
    pub consumer_stream: u64,
    /// One of CAI_SYNC_*.
    pub sync_mode: i32,
    /// One of CAI_POINTER_CHECK_*.
    pub pointer_check: i32,
    /// 1: the consumer will write; a read-only array fails with CAI_ERROR_READONLY.
    pub writable: u32,
    /// 1: only native byte order is accepted (as CuPy and mpi4py require).
    pub native_only: u32,
    /// Zero; room for later options without an ABI break.
    pub reserved: [u32; 6],
}

/// Imports `array` as `options` ask; returns what the driver said about its pointer
/// (`checked` 0 when it was not asked).
pub fn import(array: &CaiArray, options: &CaiImportOptions) -> Result<CaiPointerInfo> {
    reserved_are_zero("CaiImportOptions.reserved", &options.reserved)?;
    sync_mode_is_known(options.sync_mode)?;
    let writable = option_is_a_flag("CaiImportOptions.writable", options.writable)?;
    let native_only = option_is_a_flag("CaiImportOptions.native_only", options.native_only)?;
    let validated = validate(array)?;
    writable_access_is_allowed(array, writable)?;
    if native_only {
        byte_order_is_native(array, &validated)?;
    }
    let info = checked_pointer(array, &validated, options.pointer_check)?;
    sync_if_needed(stream_for_version(array), options.consumer_stream, options.sync_mode, info.cu_context())?;
    Ok(info)
}

/// Writing through a read-only descriptor is refused (the spec's read-only flag).
pub fn writable_access_is_allowed(array: &CaiArray, writable: bool) -> Result<()> {
    if writable && array.readonly == 1 {
        Err(Error::new(
            Status::Readonly,
            "writable access was asked for but data is read-only (readonly = 1)",
        ))
    } else {
        Ok(())
    }
}

/// For consumers that cannot swap bytes (CuPy and mpi4py refuse non-native byte orders).
pub fn byte_order_is_native(array: &CaiArray, validated: &Validated) -> Result<()> {
    if validated.dtype.is_native() {
        Ok(())
    } else {
        let typestr = String::from_utf8_lossy(array.typestr_bytes().unwrap_or_default());
        Err(Error::new(
            Status::InvalidTypestr,
            format!(
                "typestr {typestr:?} has byte order '{}', not this host's",
                validated.dtype.byteorder() as char
            ),
        ))
    }
}

/// The pointer check the options ask for. Zero-size arrays never query the driver.
pub fn checked_pointer(array: &CaiArray, validated: &Validated, mode: i32) -> Result<CaiPointerInfo> {
    let wanted = match mode {
        CAI_POINTER_CHECK_DEFAULT => driver_available(),
        CAI_POINTER_CHECK_ALWAYS => true,
        CAI_POINTER_CHECK_NEVER => false,
        other => {
            return Err(Error::new(
                Status::InvalidArgument,
                format!("pointer check {other} is not one of CAI_POINTER_CHECK_*"),
            ))
        }
    };
    if !wanted || validated.element_count == 0 {
        return Ok(CaiPointerInfo::default());
    }
    let info = pointer_info(driver()?, array.data)?;
    extent_within_allocation(array.data, validated.extent, &info)?;
    Ok(info)
}
