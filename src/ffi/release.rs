//! Releases deferred until a stream has passed a point: `cai_release_after` queues one,
//! `cai_release_pending` runs those that are due.

use super::{guard, optional_mut, required_mut};
use crate::abi::{CaiArray, CaiError, CAI_PENDING_POLL, CAI_PENDING_WAIT};
use crate::device::deferred::{release_after, release_pending};
use crate::status::{CaiStatus, Error, Status};

/// Consumer side: hands `array` back to its producer once the GPU has passed the work
/// enqueued on `stream` so far, never waiting on the host. An event is recorded on `stream`
/// (1: legacy default stream, 2: per-thread default stream, else a CUstream, in its context;
/// for 1 and 2 the current context, else the context of the array's memory) and the array
/// queued; its `release` runs later, once that event has completed, from a later
/// `cai_release_after`, `cai_release_pending`, `cai_import` or `cai_sync` call in any thread
/// (each runs the releases that are due; an import or sync with nothing queued pays one
/// atomic load), never from a thread or callback of libcai's.
///
/// Ownership: on CAI_OK the array has moved into libcai's queue (`array->release` cleared;
/// the struct's memory is the caller's again at once); on failure `*array` is untouched and
/// still the caller's to release (a failed query of an earlier release that this call meets
/// on its pass over the queue runs that release and does not fail this call, the array having
/// moved). A borrowed array (release NULL) owes nothing: CAI_OK, no
/// driver call. `stream` 0 (CAI_STREAM_NONE: no work to wait for) releases at once, as
/// `cai_release` does.
///
/// Before the process exits or the library is unloaded, call
/// `cai_release_pending(CAI_PENDING_WAIT, ...)`: libcai never runs releases at exit by
/// itself (the CUDA driver and the producers may be torn down by then), and what is still
/// queued at exit is never released.
///
/// During CUDA graph capture: a capturing `stream` (or the legacy stream while a stream of
/// its context is capturing) is refused with CAI_ERROR_STREAM_CAPTURING after the capture
/// query (cuStreamGetCaptureInfo) and before any other driver call; the capture stays valid.
/// Its work is only recorded into a graph, so no event on it marks when the memory is free:
/// release after a stream the graph is launched on, after the launch. OpenCL memory is refused
/// (CAI_ERROR_INVALID_ARGUMENT); a stream the driver does not know is CAI_ERROR_DRIVER.
///
/// # Safety
/// `array` is NULL or points to a valid `CaiArray` that nothing else reads or writes during
/// the call; its `release`, when set, may be called later on any thread, with the struct at
/// another address (so its `mask` and `descr`, when set, stay valid until then); `stream` is
/// a live stream handle. `error` is NULL or points to a writable `CaiError`.
#[no_mangle]
pub unsafe extern "C" fn cai_release_after(
    array: *mut CaiArray,
    stream: u64,
    error: *mut CaiError,
) -> CaiStatus {
    guard(error, || {
        required_mut(array, "array")?;
        // SAFETY: checked non-NULL; the caller promises a valid array, not aliased meanwhile.
        unsafe { release_after(array, stream) }
    })
}

/// Runs the releases `cai_release_after` queued whose work has completed (`mode`
/// CAI_PENDING_POLL: asks each event, never waits), or all of them (CAI_PENDING_WAIT: waits
/// on the host for each, then runs it), in the calling thread, in the order they were queued.
/// `*left` (may be NULL) is set to how many are still queued (0 after CAI_PENDING_WAIT, but
/// for those queued by other threads meanwhile). With nothing queued no driver is loaded.
///
/// CAI_PENDING_WAIT returns only once every release queued before the call has run, whichever
/// thread runs it: it also waits for those another thread's call (a poll, an import) has taken
/// out and is running. Called from inside a release (a `release` callback that drains), it
/// waits for every other one but those being run at that moment, by this thread or another:
/// its caller's own release cannot end before it returns, and another thread's may be waiting
/// in the same way. A thread that holds a lock a release needs (a Python thread attached to
/// the interpreter, whose keepers' releases attach) must let go of it before waiting.
///
/// A query the driver fails (a destroyed context, a sticky device error) still runs that
/// release, no work of it being left to run, and the first such failure is returned after
/// every due release has run.
///
/// # Safety
/// `left` is NULL or points to a writable `uint64_t`; `error` is NULL or points to a writable
/// `CaiError`.
#[no_mangle]
pub unsafe extern "C" fn cai_release_pending(mode: i32, left: *mut u64, error: *mut CaiError) -> CaiStatus {
    guard(error, || {
        let wait = match mode {
            CAI_PENDING_POLL => false,
            CAI_PENDING_WAIT => true,
            other => {
                return Err(Error::new(
                    Status::InvalidArgument,
                    format!("mode is {other}: pass CAI_PENDING_POLL ({CAI_PENDING_POLL}) or CAI_PENDING_WAIT ({CAI_PENDING_WAIT})"),
                ))
            }
        };
        let still_queued = release_pending(wait)?;
        if let Some(left) = optional_mut(left) {
            *left = still_queued;
        }
        Ok(())
    })
}
