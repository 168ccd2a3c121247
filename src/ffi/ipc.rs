//! Arrays across processes: `cai_ipc_export` writes a device array into a descriptor of plain
//! bytes, `cai_ipc_open` opens one exported by another process.

use super::{guard, optional, required, required_mut};
use crate::abi::{CaiArray, CaiError, CaiImportOptions, CaiIpcDescriptor};
use crate::status::CaiStatus;

/// Producer side: writes `array` (validated first; any producer's struct) into `*out`, a
/// descriptor another process on this machine opens with `cai_ipc_open`. The data must be
/// device memory from cuMemAlloc (cudaMalloc, and the allocators of CuPy and torch): managed,
/// host and unified memory, memory the driver does not know and memory of a stream-ordered pool
/// are refused with CAI_ERROR_NOT_SHAREABLE, as are OpenCL memory, a mask and named descr
/// fields (the message says what to send instead). The descriptor holds the allocation's IPC
/// handle, the array's offset in it, the device's UUID and, where `array->stream` is not 0, an
/// interprocess event recorded on that stream after the work enqueued so far, which the
/// importer waits on; a capturing stream is refused with CAI_ERROR_STREAM_CAPTURING before
/// anything is enqueued. A zero-size array needs no driver: its descriptor has no handle.
///
/// The lifetime rule (see `CaiIpcDescriptor`): the caller keeps the memory allocated, and its
/// process alive, while any importer uses it. `array` stays the caller's; `*out` is written
/// only on success.
///
/// # Safety
/// `array` is NULL or points to a valid `CaiArray` whose `data` and `stream` are live handles;
/// `out` is NULL or points to a writable `CaiIpcDescriptor`; `error` is NULL or points to a
/// writable `CaiError`.
#[no_mangle]
pub unsafe extern "C" fn cai_ipc_export(
    array: *const CaiArray,
    out: *mut CaiIpcDescriptor,
    error: *mut CaiError,
) -> CaiStatus {
    guard(error, || {
        let array = required(array, "array")?;
        let out = required_mut(out, "out")?;
        *out = crate::ipc::export(array)?;
        Ok(())
    })
}

/// Consumer side, in another process: checks `desc` (its magic, version, size and checksum,
/// each refused with CAI_ERROR_IPC_DESCRIPTOR naming the field; so is a descriptor opened in
/// the process that exported it, before any driver call: use the array itself there), finds the
/// device with the descriptor's UUID (none: CAI_ERROR_NOT_SHAREABLE naming it), maps the
/// allocation (cuIpcOpenMemHandle, in the current context where it is on that device, else in
/// the device's primary context; a second open of one allocation in this process shares the
/// first mapping) and writes into `*out` an owning array at the exporter's offset in it: the
/// same shape, strides, element type and read-only flag, `stream` 0. Where the exporter had
/// pending work, the consumer is ordered after it as `cai_import` orders it after a producer's
/// stream (`options`: NULL for the defaults; `consumer_stream` and `sync_mode`, and the
/// import's `writable`, `native_only` and pointer check, which runs on the mapped memory).
///
/// `*out` is written only on success; release it with `cai_release` (any thread): the last
/// release of an allocation's arrays unmaps it (cuIpcCloseMemHandle). Memory the exporter freed
/// or a process that exited is the driver's error (CAI_ERROR_DRIVER) where it reports one.
///
/// # Safety
/// `desc` is NULL or points to a readable `CaiIpcDescriptor` (any bytes); `options` is NULL or
/// points to a valid `CaiImportOptions`; `out` is NULL or points to a writable `CaiArray`;
/// `error` is NULL or points to a writable `CaiError`.
#[no_mangle]
pub unsafe extern "C" fn cai_ipc_open(
    desc: *const CaiIpcDescriptor,
    options: *const CaiImportOptions,
    out: *mut CaiArray,
    error: *mut CaiError,
) -> CaiStatus {
    guard(error, || {
        let desc = required(desc, "desc")?;
        let out = required_mut(out, "out")?;
        let options = optional(options).copied().unwrap_or_default();
        *out = crate::ipc::open(desc, &options)?;
        Ok(())
    })
}
