//! Where the safe Rust calls that use a GPU driver go: this copy of libcai's own driver, or the
//! C functions of another copy that the process already uses (one driver per process).
//!
//! A Python extension built on the `cai-python` crate links a copy of this crate of its own,
//! next to the copy inside the `cai` package. Left to itself, that copy would load the driver a
//! second time and keep a second event pool. `cai-python` routes it, once, to the package's C
//! API table, so that `ArrayRef::import`, `ArrayRef::sync`, `pointer_info`, `driver_version`,
//! `Array::release_after` and `release_pending` run on the package's driver state and queue.

use std::mem::MaybeUninit;
use std::sync::OnceLock;

use crate::abi::{CaiArray, CaiError, CaiImportOptions, CaiIpcDescriptor, CaiPointerInfo, CaiSyncOptions};
use crate::status::{CaiStatus, Error, Result, Status, CAI_OK};

/// The eight C functions of cai.h that use a driver, as another copy of libcai in the process
/// exports them (for a Python extension: the `cai` package's C API table, `cai_python.h`).
/// Each has the contract of the C function of the same name.
#[derive(Clone, Copy, Debug)]
pub struct DeviceCalls {
    /// `cai_import`.
    pub import: unsafe extern "C" fn(
        *const CaiArray,
        *const CaiImportOptions,
        *mut CaiPointerInfo,
        *mut CaiError,
    ) -> CaiStatus,
    /// `cai_sync`.
    pub sync: unsafe extern "C" fn(*const CaiArray, *const CaiSyncOptions, *mut CaiError) -> CaiStatus,
    /// `cai_pointer_info`.
    pub pointer_info: unsafe extern "C" fn(u64, *mut CaiPointerInfo, *mut CaiError) -> CaiStatus,
    /// `cai_driver_status`.
    pub driver_status: unsafe extern "C" fn(*mut i32, *mut CaiError) -> CaiStatus,
    /// `cai_release_after`: the other copy's queue holds what `Array::release_after` hands
    /// over, so that its drain (the `cai` package's, at interpreter exit) runs it.
    pub release_after: unsafe extern "C" fn(*mut CaiArray, u64, *mut CaiError) -> CaiStatus,
    /// `cai_release_pending`.
    pub release_pending: unsafe extern "C" fn(i32, *mut u64, *mut CaiError) -> CaiStatus,
    /// `cai_ipc_export`: its interprocess events are pooled in the other copy.
    pub ipc_export: unsafe extern "C" fn(*const CaiArray, *mut CaiIpcDescriptor, *mut CaiError) -> CaiStatus,
    /// `cai_ipc_open`: the other copy's table of opened allocations holds the mapping, so that
    /// one allocation is mapped once per process.
    pub ipc_open: unsafe extern "C" fn(
        *const CaiIpcDescriptor,
        *const CaiImportOptions,
        *mut CaiArray,
        *mut CaiError,
    ) -> CaiStatus,
}

static ROUTED: OnceLock<&'static DeviceCalls> = OnceLock::new();

/// Sends this copy's safe device calls (`ArrayRef::import`, `ArrayRef::sync`, `pointer_info`,
/// `driver_version`, `Array::release_after`, `release_pending`, `ArrayRef::ipc_export`,
/// `Array::ipc_open`) to `calls` from now on, for the process's lifetime, so that this copy never
/// loads a driver of its own. `cai-python` does this when it first reads the package's table; a
/// Rust-only program has no reason to.
///
/// Refused with [`Status::InvalidArgument`] when this copy has already loaded (or tried to
/// load) its own driver, since a second driver state would then exist already, and when other
/// calls were routed before. Routing the same calls again is `Ok`.
///
/// ```
/// // This copy has loaded no driver yet, so its calls can still be routed; the C functions of
/// // this very copy stand in here for another copy's.
/// static OWN: cai::DeviceCalls = cai::DeviceCalls {
///     import: cai::cai_import,
///     sync: cai::cai_sync,
///     pointer_info: cai::cai_pointer_info,
///     driver_status: cai::cai_driver_status,
///     release_after: cai::cai_release_after,
///     release_pending: cai::cai_release_pending,
///     ipc_export: cai::cai_ipc_export,
///     ipc_open: cai::cai_ipc_open,
/// };
/// // SAFETY: cai.h's own functions, with cai.h's contracts, alive for the process.
/// unsafe { cai::route_device_calls(&OWN) }.unwrap();
/// assert!(cai::device_calls_routed());
/// ```
///
/// # Safety
/// Each function of `calls` keeps the contract of cai.h's function of the same name and stays
/// callable for the rest of the process (a module that is never unloaded).
pub unsafe fn route_device_calls(calls: &'static DeviceCalls) -> Result<()> {
    if ROUTED.get().is_none() && crate::driver::driver_load_attempted() {
        return Err(Error::new(
            Status::InvalidArgument,
            "route_device_calls: this copy of libcai has already loaded its own CUDA driver, so the process \
             has two driver states; route before any driver call (for a PyO3 extension: call \
             cai_python::import(py) in the module's init)",
        ));
    }
    let installed = *ROUTED.get_or_init(|| calls);
    if std::ptr::eq(installed, calls) {
        Ok(())
    } else {
        Err(Error::new(
            Status::InvalidArgument,
            "route_device_calls: this copy's device calls already go to another table; they are routed once",
        ))
    }
}

/// Whether this copy's safe device calls go to another copy's functions
/// ([`route_device_calls`]).
pub fn device_calls_routed() -> bool {
    ROUTED.get().is_some()
}

/// The error another copy wrote, as this copy's [`Error`]: the status from its code, the
/// message without the status name the C message starts with.
fn error_from(status: CaiStatus, written: &CaiError) -> Error {
    let status = Status::from_code(status).unwrap_or(Status::Panic);
    let message = written.message_str();
    let prefix = format!("{}: ", status.name());
    let message = message.strip_prefix(&prefix).map(str::to_string).unwrap_or(message);
    Error { status, driver_result: written.driver_result, message }
}

/// Runs a routed C call with an error struct of its own, into a Result.
fn routed(call: impl FnOnce(*mut CaiError) -> CaiStatus) -> Result<()> {
    let mut error =
        CaiError { code: 0, driver_result: 0, message: [0; crate::abi::CAI_ERROR_MESSAGE_CAPACITY] };
    match call(&mut error) {
        CAI_OK => Ok(()),
        status => Err(error_from(status, &error)),
    }
}

/// `cai_import` of this copy, or of the routed one.
pub(crate) fn import(array: &CaiArray, options: &CaiImportOptions) -> Result<CaiPointerInfo> {
    let Some(calls) = ROUTED.get() else {
        // SAFETY: a valid struct (the caller's), which owns what its release says.
        let device = unsafe { crate::dlpack::device_of_taken_tensor(array) };
        return crate::import::import_described(array, None, options, device).map(|imported| imported.info);
    };
    let mut info = MaybeUninit::<CaiPointerInfo>::uninit();
    // SAFETY: cai_import's contract (route_device_calls): a valid array and options, a writable
    // info and error; the info is written on success only, and read only then.
    routed(|error| unsafe { (calls.import)(array, options, info.as_mut_ptr(), error) })?;
    // SAFETY: written, as the call succeeded.
    Ok(unsafe { info.assume_init() })
}

/// `cai_sync` of this copy, or of the routed one.
pub(crate) fn sync(array: &CaiArray, options: &CaiSyncOptions) -> Result<()> {
    match ROUTED.get() {
        // SAFETY: cai_sync's contract (route_device_calls): a valid array and options, a
        // writable error.
        Some(calls) => routed(|error| unsafe { (calls.sync)(array, options, error) }),
        None => crate::import::sync(array, options),
    }
}

/// `cai_pointer_info` of this copy, or of the routed one.
pub(crate) fn pointer_info(pointer: u64) -> Result<CaiPointerInfo> {
    let Some(calls) = ROUTED.get() else { return crate::import::pointer_info(pointer) };
    let mut info = MaybeUninit::<CaiPointerInfo>::uninit();
    // SAFETY: cai_pointer_info's contract: a writable info and error; info written on success.
    routed(|error| unsafe { (calls.pointer_info)(pointer, info.as_mut_ptr(), error) })?;
    // SAFETY: written, as the call succeeded.
    Ok(unsafe { info.assume_init() })
}

/// `cai_driver_status` of this copy, or of the routed one: the driver's version.
pub(crate) fn driver_version() -> Result<i32> {
    let Some(calls) = ROUTED.get() else { return crate::driver::driver_version() };
    let mut version = 0;
    // SAFETY: cai_driver_status's contract: a writable version and error.
    routed(|error| unsafe { (calls.driver_status)(&mut version, error) })?;
    Ok(version)
}

/// `cai_release_after` of this copy, or of the routed one: on success the array has moved into
/// the queue (its `release` cleared); on failure `*array` is untouched.
///
/// # Safety
/// `cai_release_after`'s: a valid array nothing else touches during the call, whose release may
/// run later on any thread with the struct at another address; a live stream.
pub(crate) unsafe fn release_after(array: &mut CaiArray, stream: u64) -> Result<()> {
    match ROUTED.get() {
        // SAFETY: cai_release_after's contract, which the caller keeps; a writable error.
        Some(calls) => routed(|error| unsafe { (calls.release_after)(array, stream, error) }),
        // SAFETY: as above.
        None => unsafe { crate::device::deferred::release_after(array, stream) },
    }
}

/// `cai_release_pending` of this copy, or of the routed one: how many are still queued.
pub(crate) fn release_pending(wait: bool) -> Result<u64> {
    let Some(calls) = ROUTED.get() else { return crate::device::deferred::release_pending(wait) };
    let mode = if wait { crate::abi::CAI_PENDING_WAIT } else { crate::abi::CAI_PENDING_POLL };
    let mut left = 0;
    // SAFETY: cai_release_pending's contract: a known mode, a writable count and error.
    routed(|error| unsafe { (calls.release_pending)(mode, &mut left, error) })?;
    Ok(left)
}

/// `cai_ipc_export` of this copy, or of the routed one.
pub(crate) fn ipc_export(array: &CaiArray) -> Result<CaiIpcDescriptor> {
    let Some(calls) = ROUTED.get() else { return crate::ipc::export(array) };
    let mut out = CaiIpcDescriptor::zeroed();
    // SAFETY: cai_ipc_export's contract: a valid array, a writable descriptor and error.
    routed(|error| unsafe { (calls.ipc_export)(array, &mut out, error) })?;
    Ok(out)
}

/// `cai_ipc_open` of this copy, or of the routed one: an owning struct.
pub(crate) fn ipc_open(descriptor: &CaiIpcDescriptor, options: &CaiImportOptions) -> Result<CaiArray> {
    let Some(calls) = ROUTED.get() else { return crate::ipc::open(descriptor, options) };
    let mut out = MaybeUninit::<CaiArray>::uninit();
    // SAFETY: cai_ipc_open's contract: a readable descriptor and options, a writable array and
    // error; `out` is written on success only, and read only then.
    routed(|error| unsafe { (calls.ipc_open)(descriptor, options, out.as_mut_ptr(), error) })?;
    // SAFETY: written, as the call succeeded.
    Ok(unsafe { out.assume_init() })
}
