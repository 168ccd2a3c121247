//! Producer side: turn a producer's array into the descriptor consumers receive.

use crate::abi::{
    CaiArray, CaiExportOptions, CaiPointerInfo, CAI_MEMORY_OPENCL, CAI_POINTER_CHECK_ALWAYS,
    CAI_POINTER_CHECK_NEVER, CAI_STREAM_NONE, CAI_SYNC_BLOCKING,
};
use crate::device::opencl::checked_buffer;
use crate::device::pointer::{checked_pointer, HostMemory};
use crate::device::sync::{consumer_sync, exported_stream_value, join_streams};
use crate::driver::driver;
use crate::normalize::{export_version, normalize_for_export};
use crate::status::{Error, Result, Status};
use crate::validate::{option_is_a_flag, reserved_are_zero};

/// Validates and normalizes `array` for export as `options` ask, then, where the producer has
/// work on several streams, joins them into the exported one (spec: "Producers must ensure
/// that ... synchronization on the provided stream is sufficient"). On error `array` is
/// unchanged.
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
    let validated = normalize_for_export(&mut exported, version)?;
    if exported.memory == CAI_MEMORY_OPENCL {
        if !work_streams.is_empty() {
            return Err(Error::new(
                Status::InvalidArgument,
                "work_streams are CUDA streams; OpenCL memory is ordered by its own queue or event (stream)",
            ));
        }
        let (data, offset) = (exported.data, exported.byte_offset);
        let info = checked_buffer(data, offset, validated.extent, validated.element_count, 0, check_pointer)?;
        *array = exported;
        return Ok(info);
    }
    let info = checked_pointer(
        exported.data,
        validated.extent,
        validated.element_count,
        check_pointer,
        HostMemory::Refused,
    )?;
    if exported.stream == CAI_STREAM_NONE && version >= 3 {
        exported.stream = work_streams.first().copied().unwrap_or(CAI_STREAM_NONE);
    }
    if !work_streams.is_empty() {
        let d = driver()?;
        if version >= 3 {
            join_streams(d, exported.stream, &work_streams, info.cu_context())?;
        } else {
            // Version 2 has no stream to join into: the work must be finished before the
            // consumer sees the array, so the host waits for it.
            for &stream in &work_streams {
                consumer_sync(d, stream, CAI_STREAM_NONE, CAI_SYNC_BLOCKING, info.cu_context())?;
            }
        }
    }
    *array = exported;
    Ok(info)
}

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
