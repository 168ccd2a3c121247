//! Stream synchronization (spec "Synchronization"): a consumer waits for the producer's
//! stream, and a producer joins its work streams into the one it exports.
//!
//! CAI stream values double as CUstream handles: 1 is CU_STREAM_LEGACY and 2 is
//! CU_STREAM_PER_THREAD in the driver too, so only 0 ("None") needs a rule of its own.

use std::sync::{Mutex, OnceLock};

use cuda_driver_sys::{CUcontext, CUevent, CUstream};

use super::context::ContextGuard;
use crate::array::{CAI_STREAM_LEGACY, CAI_STREAM_NONE, CAI_STREAM_PER_THREAD};
use crate::driver::Driver;
use crate::status::{Error, Result, Status};

/// Stream-ordered when the consumer names a stream, else blocking; off when
/// CAI_ARRAY_INTERFACE_SYNC=0.
pub const CAI_SYNC_DEFAULT: i32 = 0;
/// The consumer's stream waits on an event recorded on the producer's stream; the host does
/// not block. Without a consumer stream, blocking.
pub const CAI_SYNC_STREAM_ORDERED: i32 = 1;
/// The host waits for the producer's stream (cuStreamSynchronize).
pub const CAI_SYNC_BLOCKING: i32 = 2;
/// No synchronization: the caller takes responsibility (spec: "User ... override").
pub const CAI_SYNC_NONE: i32 = 3;

/// Environment variable that turns the default sync off when "0" (read once per process).
pub(crate) const SYNC_ENV: &str = "CAI_ARRAY_INTERFACE_SYNC";

/// CU_EVENT_DISABLE_TIMING: cheaper events, used only for ordering.
const EVENT_DISABLE_TIMING: u32 = 2;
/// Idle events kept for reuse; more are destroyed when returned.
const EVENT_POOL_CAPACITY: usize = 64;

/// What a sync call did, for tests and callers that want to know.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SyncAction {
    Nothing,
    StreamOrdered,
    Blocked,
}

fn default_sync_disabled() -> bool {
    static DISABLED: OnceLock<bool> = OnceLock::new();
    *DISABLED.get_or_init(|| std::env::var(SYNC_ENV).map(|v| v.trim() == "0").unwrap_or(false))
}

/// Checks a sync mode value from C.
pub fn sync_mode_is_known(mode: i32) -> Result<()> {
    if (CAI_SYNC_DEFAULT..=CAI_SYNC_NONE).contains(&mode) {
        Ok(())
    } else {
        Err(Error::new(Status::InvalidArgument, format!("sync mode {mode} is not one of CAI_SYNC_*")))
    }
}

/// The sync a consumer owes before touching data produced on `producer` (a CAI stream
/// value), from `consumer` (a CAI stream value; 0 for none).
pub fn planned_action(producer: u64, consumer: u64, mode: i32) -> SyncAction {
    let mode = if mode == CAI_SYNC_DEFAULT && default_sync_disabled() { CAI_SYNC_NONE } else { mode };
    match mode {
        _ if producer == CAI_STREAM_NONE => SyncAction::Nothing,
        CAI_SYNC_NONE => SyncAction::Nothing,
        CAI_SYNC_BLOCKING => SyncAction::Blocked,
        _ if consumer == CAI_STREAM_NONE => SyncAction::Blocked,
        _ if consumer == producer => SyncAction::Nothing,
        _ => SyncAction::StreamOrdered,
    }
}

/// Consumer sync as `mode` plans it, loading the driver only when there is something to do
/// (so that an array with no stream imports on machines without one).
pub fn sync_if_needed(
    producer: u64,
    consumer: u64,
    mode: i32,
    array_context: CUcontext,
) -> Result<SyncAction> {
    match planned_action(producer, consumer, mode) {
        SyncAction::Nothing => Ok(SyncAction::Nothing),
        action => perform(crate::driver::driver()?, action, producer, consumer, array_context),
    }
}

/// Consumer sync: makes work on `consumer` (or the host) wait for `producer`. `array_context`
/// is the context of the array's memory, used for the default-stream handles 1 and 2.
pub fn consumer_sync(
    driver: &Driver,
    producer: u64,
    consumer: u64,
    mode: i32,
    array_context: CUcontext,
) -> Result<SyncAction> {
    perform(driver, planned_action(producer, consumer, mode), producer, consumer, array_context)
}

fn perform(
    driver: &Driver,
    action: SyncAction,
    producer: u64,
    consumer: u64,
    array_context: CUcontext,
) -> Result<SyncAction> {
    match action {
        SyncAction::Nothing => {}
        SyncAction::Blocked => {
            let in_context = ContextGuard::enter(driver, stream_context(driver, producer, array_context)?)?;
            // SAFETY: a stream handle given by the producer, valid for the array's lifetime (spec).
            let status = unsafe { (driver.api.cuStreamSynchronize)(handle(producer)) };
            driver.check(status, || format!("cuStreamSynchronize(stream {producer:#x})"))?;
            in_context.leave()?;
        }
        SyncAction::StreamOrdered => record_and_wait(driver, producer, consumer, array_context)?,
    }
    Ok(action)
}

/// Producer join: makes `target` wait for the work on each of `work_streams` (CAI values).
pub fn join_streams(
    driver: &Driver,
    target: u64,
    work_streams: &[u64],
    array_context: CUcontext,
) -> Result<()> {
    for &work in work_streams.iter().filter(|&&w| w != target) {
        record_and_wait(driver, work, target, array_context)?;
    }
    Ok(())
}

/// The CAI value a producer's raw CUstream has when exported: the NULL stream is never 0 but
/// the default stream it stands for.
pub fn exported_stream_value(raw: u64, per_thread_default_stream: bool) -> u64 {
    match raw {
        0 if per_thread_default_stream => CAI_STREAM_PER_THREAD,
        0 => CAI_STREAM_LEGACY,
        other => other,
    }
}

fn handle(stream: u64) -> CUstream {
    stream as usize as CUstream
}

/// The context a stream belongs to: asked of the driver for real handles; for the default
/// handles, the array's context (NULL: the current one).
fn stream_context(driver: &Driver, stream: u64, array_context: CUcontext) -> Result<CUcontext> {
    if stream == CAI_STREAM_LEGACY || stream == CAI_STREAM_PER_THREAD {
        return Ok(array_context);
    }
    let mut context: CUcontext = std::ptr::null_mut();
    // SAFETY: writes one handle.
    let status = unsafe { (driver.api.cuStreamGetCtx)(handle(stream), &mut context) };
    driver.check(status, || format!("cuStreamGetCtx(stream {stream:#x})"))?;
    Ok(context)
}

/// Records a pooled event on `producer` (in its context) and makes `consumer` wait on it.
fn record_and_wait(driver: &Driver, producer: u64, consumer: u64, array_context: CUcontext) -> Result<()> {
    let producer_context = stream_context(driver, producer, array_context)?;
    let consumer_context = stream_context(driver, consumer, array_context)?;
    let event = {
        let in_context = ContextGuard::enter(driver, producer_context)?;
        let event = EventPool::global().take(driver)?;
        // SAFETY: an event of the current context and a stream of the same context.
        let status = unsafe { (driver.api.cuEventRecord)(event.handle, handle(producer)) };
        if let Err(e) =
            driver.check(status, || format!("cuEventRecord(stream {producer:#x})")).and(in_context.leave())
        {
            EventPool::global().put(driver, event);
            return Err(e);
        }
        event
    };
    let waited = ContextGuard::enter(driver, consumer_context).and_then(|in_context| {
        // SAFETY: waiting on an event from any context is allowed (cross-device waits).
        let status = unsafe { (driver.api.cuStreamWaitEvent)(handle(consumer), event.handle, 0) };
        driver.check(status, || format!("cuStreamWaitEvent(stream {consumer:#x})"))?;
        in_context.leave()
    });
    // The wait captured the event's state when it was enqueued: the event can be re-recorded
    // at once, so it goes back to the pool now.
    EventPool::global().put(driver, event);
    waited
}

/// An event and the context it was created in (events are recorded only on streams of their
/// own context).
#[derive(Clone, Copy)]
struct PooledEvent {
    handle: CUevent,
    context: CUcontext,
}

// SAFETY: event and context handles are plain tokens the driver accepts from any thread.
unsafe impl Send for PooledEvent {}

/// Idle events, reused across calls and threads; at most EVENT_POOL_CAPACITY are kept.
pub struct EventPool {
    idle: Mutex<Vec<PooledEvent>>,
}

impl EventPool {
    /// Most idle events kept for reuse.
    pub fn capacity() -> usize {
        EVENT_POOL_CAPACITY
    }

    fn global() -> &'static EventPool {
        static POOL: OnceLock<EventPool> = OnceLock::new();
        POOL.get_or_init(|| EventPool { idle: Mutex::new(Vec::with_capacity(EVENT_POOL_CAPACITY)) })
    }

    /// An idle event of the current context, or a new one.
    fn take(&self, driver: &Driver) -> Result<PooledEvent> {
        let context = super::context::current(driver)?;
        {
            let mut idle = self.idle.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            if let Some(i) = idle.iter().position(|e| e.context == context) {
                return Ok(idle.swap_remove(i));
            }
        }
        let mut handle: CUevent = std::ptr::null_mut();
        // SAFETY: writes one handle.
        let status = unsafe { (driver.api.cuEventCreate)(&mut handle, EVENT_DISABLE_TIMING) };
        driver.check(status, || "cuEventCreate(CU_EVENT_DISABLE_TIMING)".into())?;
        Ok(PooledEvent { handle, context })
    }

    fn put(&self, driver: &Driver, event: PooledEvent) {
        let mut idle = self.idle.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if idle.len() < EVENT_POOL_CAPACITY {
            idle.push(event);
        } else {
            drop(idle);
            // SAFETY: an event this pool created and no longer holds.
            unsafe { (driver.api.cuEventDestroy)(event.handle) };
        }
    }
}
