//! Producer side: turn a producer's array into the descriptor consumers receive.

use crate::abi::{
    CaiArray, CaiExportOptions, CaiPointerInfo, CAI_POINTER_CHECK_ALWAYS, CAI_POINTER_CHECK_NEVER,
    CAI_STREAM_NONE,
};
use crate::device::memory::kind_of;
use crate::device::pointer::HostMemory;
use crate::device::sync::exported_stream_value;
use crate::normalize::{export_version, normalize_for_export};
use crate::status::{Error, Result, Status};
use crate::validate::{option_is_a_flag, reserved_are_zero};

/// Validates and normalizes `array` for export as `options` ask, then, where the producer has
/// work on several streams, joins them into the exported one (spec: "Producers must ensure
/// that ... synchronization on the provided stream is sufficient"). On error `array` is
/// unchanged.
// Reached only through the C API (cai_export, cai_from_dlpack): unused without `c-api`.
#[cfg_attr(not(feature = "c-api"), allow(dead_code))]
pub fn export(array: &mut CaiArray, options: &CaiExportOptions) -> Result<CaiPointerInfo> {
    reserved_are_zero("CaiExportOptions.reserved", &options.reserved)?;
    let version = export_version(options.version)?;
    let check_pointer = if option_is_a_flag("CaiExportOptions.check_pointer", options.check_pointer)? {
        CAI_POINTER_CHECK_ALWAYS
    } else {
        CAI_POINTER_CHECK_NEVER
    };
    let per_thread =
        option_is_a_flag("CaiExportOptions.per_thread_default_stream", options.per_thread_default_stream)?;
    let work_streams: Vec<u64> =
        work_streams(options)?.iter().map(|&raw| exported_stream_value(raw, per_thread)).collect();

    let mut exported = *array;
    let validated = normalize_for_export(&mut exported, version, None)?;
    let kind = kind_of(&exported);
    let info =
        kind.check(&exported, validated.touched(), CAI_STREAM_NONE, check_pointer, HostMemory::Refused)?;
    kind.join_work_streams(&mut exported, version, &work_streams, &info)?;
    *array = exported;
    Ok(info)
}

// Reached only through the C API (cai_export, cai_from_dlpack): unused without `c-api`.
#[cfg_attr(not(feature = "c-api"), allow(dead_code))]
fn work_streams(options: &CaiExportOptions) -> Result<&[u64]> {
    match (options.work_streams.is_null(), options.work_stream_count) {
        (_, 0) => Ok(&[]),
        (true, n) => Err(Error::new(
            Status::NullArgument,
            format!("CaiExportOptions.work_streams is NULL but work_stream_count is {n}"),
        )),
        // SAFETY: the API promises `work_streams` holds `work_stream_count` entries.
        (false, n) => Ok(unsafe { std::slice::from_raw_parts(options.work_streams, n as usize) }),
    }
}
