//! Idle events, reused across calls and threads, each kept under the driver's id of the
//! context it was created in.
//!
//! The key is the context id (cuCtxGetId), never the CUcontext address: a context destroyed
//! and another created at the same address get different ids, so an event of a dead context
//! is never handed out again. Events of a context that is gone stay idle until the process
//! ends (at most EVENT_POOL_CAPACITY of them, all told). A driver without cuCtxGetId (before
//! CUDA 12.0) gives no such id: its events are created for one sync and destroyed after it.
//!
//! An event recorded inside a CUDA graph capture never comes back here: `sync` hands it to
//! `retire`, not `put`, once its wait is enqueued. Recorded in a capture, it stands for
//! captured work (graph nodes) until that capture ends, which libcai does not see; taken from
//! the pool in that time, a wait on it by a stream outside the capture would pull that stream
//! into the capture. Destroyed at once, it can never be handed out again; the wait already
//! took its nodes into the waiting stream's dependencies, so the graph keeps no reference to it.

use std::sync::{Mutex, OnceLock};

use crate::driver::cuda::{CUcontext, CUevent};
use crate::driver::Driver;
use crate::status::Result;

/// Idle events kept for reuse; more are destroyed when returned.
pub const EVENT_POOL_CAPACITY: usize = 64;

/// An event, and the id of its context where the driver gives one.
pub(crate) struct PooledEvent {
    pub handle: CUevent,
    context_id: Option<u64>,
}

struct IdleEvent {
    handle: CUevent,
    context_id: u64,
}

// SAFETY: event handles are plain tokens the driver accepts from any thread.
unsafe impl Send for IdleEvent {}

static IDLE: OnceLock<Mutex<Vec<IdleEvent>>> = OnceLock::new();

fn idle() -> std::sync::MutexGuard<'static, Vec<IdleEvent>> {
    let pool = IDLE.get_or_init(|| Mutex::new(Vec::with_capacity(EVENT_POOL_CAPACITY)));
    pool.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// An idle event of `context`, the current one, or a new one.
pub(crate) fn take(driver: &Driver, context: CUcontext) -> Result<PooledEvent> {
    let context_id = driver.context_id(context)?;
    if let Some(id) = context_id {
        let mut idle = idle();
        if let Some(i) = idle.iter().position(|e| e.context_id == id) {
            return Ok(PooledEvent { handle: idle.swap_remove(i).handle, context_id });
        }
    }
    Ok(PooledEvent { handle: driver.event_create()?, context_id })
}

/// Destroys an event that must not be reused: one recorded in a capture (see the module's
/// comment); a failed destroy is the caller's error to report.
pub(crate) fn retire(driver: &Driver, event: PooledEvent) -> Result<()> {
    driver.event_destroy(event.handle)
}

/// Returns an event for reuse, or destroys it when it cannot be pooled; a failed destroy is
/// the caller's error to report.
pub(crate) fn put(driver: &Driver, event: PooledEvent) -> Result<()> {
    if let Some(context_id) = event.context_id {
        let mut idle = idle();
        if idle.len() < EVENT_POOL_CAPACITY {
            idle.push(IdleEvent { handle: event.handle, context_id });
            return Ok(());
        }
    }
    driver.event_destroy(event.handle)
}
