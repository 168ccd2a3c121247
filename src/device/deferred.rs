//! Releases deferred until a stream has passed a point (`cai_release_after`): a consumer that
//! launched work reading an array hands the array back at once, and its producer's release
//! runs only once the GPU has done that work, with no host wait in the caller.
//!
//! The array waits in one process-wide queue with an event recorded on the stream. No thread
//! of libcai's and no host callback runs the releases: every `cai_release_after` and every
//! `cai_release_pending`, and every import and sync while something is queued (one relaxed
//! load tells them, so that an import with nothing queued pays only that), asks the queued
//! events (cuEventQuery, which never waits) and runs the releases whose work is done, in the
//! calling thread, outside the queue's lock (a release may queue another, or drain). A pass
//! takes the queue out to ask the driver without the lock; the numbers of what it took stay
//! under the lock, so that `cai_release_pending` in its waiting form, which waits for each
//! event (cuEventSynchronize), also waits, on a condition variable, for the releases other
//! threads' passes hold: it returns once every release queued before it has run. An event goes
//! back to the pool only once it has completed, so no recorded event is ever re-recorded while
//! the work it marks may still run.
//!
//! Inside a CUDA graph capture the stream's work is not scheduled, only recorded into a graph,
//! so no event recorded there could say when the memory is free: a capturing stream is refused
//! (CAI_ERROR_STREAM_CAPTURING) after the capture query and before any other driver call.

use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};

use super::context::ContextGuard;
use super::events::{self, PooledEvent};
use super::sync::event_refused_in_capture;
use crate::abi::{CaiArray, CAI_MEMORY_OPENCL, CAI_STREAM_LEGACY, CAI_STREAM_NONE, CAI_STREAM_PER_THREAD};
use crate::driver::cuda::CUcontext;
use crate::driver::{Capture, Driver};
use crate::status::{Error, Result, Status};

/// An array whose release waits for `event`; `number` says when it was queued.
struct Pending {
    array: CaiArray,
    event: PooledEvent,
    number: u64,
}

// SAFETY: the array's release may be called on any thread (cai_release_after's contract, as
// for cai_release), and event handles are tokens the driver accepts from any thread.
unsafe impl Send for Pending {}

/// The queue, and what passes over it have taken out of it: a waiting drain must wait for
/// those too, or it would return while another thread still runs a release queued before it.
struct Queue {
    /// Waiting for their events, in the order they were queued.
    waiting: Vec<Pending>,
    /// Numbers of those a pass has taken out and is asking the driver about.
    asking: Vec<u64>,
    /// Numbers of those whose releases a pass is running (outside the lock).
    releasing: Vec<u64>,
    /// The number the next queued release gets.
    next: u64,
}

impl Queue {
    /// How many are still queued: waiting, or taken out and not yet found due.
    fn left(&self) -> u64 {
        (self.waiting.len() + self.asking.len()) as u64
    }

    /// Whether a waiting drain that began when `next` was `before` must still wait: a release
    /// queued before it is taken out by a pass (`nested`: one still being asked about only).
    fn unfinished(&self, before: u64, nested: bool) -> bool {
        self.asking.iter().any(|&n| n < before) || (!nested && self.releasing.iter().any(|&n| n < before))
    }
}

static QUEUE: Mutex<Queue> =
    Mutex::new(Queue { waiting: Vec::new(), asking: Vec::new(), releasing: Vec::new(), next: 0 });

/// Signalled whenever a pass puts releases back or has run them.
static CHANGED: Condvar = Condvar::new();

/// `QUEUE.waiting.len()`, written under the lock: what an import reads, with no lock, to know
/// whether there is anything to poll.
static WAITING: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    /// How many passes of this thread are running releases: a waiting drain called from a
    /// release does not wait for releases being run, its own caller's among them.
    static RELEASING_HERE: Cell<u32> = const { Cell::new(0) };
}

fn queue() -> MutexGuard<'static, Queue> {
    QUEUE.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Queues `array`'s release until the work enqueued on `stream` (a CAI stream value) so far
/// has completed, then runs the releases that are due. On success the array is moved out of
/// `*array` (its `release` cleared); on failure `*array` is untouched. A borrowed array
/// (release NULL) owes nothing: Ok, no driver call. Stream 0 (no stream: nothing enqueued to
/// wait for) releases at once.
///
/// # Safety
/// `array` points to a valid CaiArray that nothing else reads or writes during the call; its
/// release, when set, may be called later, on any thread, with the struct at another address.
pub unsafe fn release_after(array: *mut CaiArray, stream: u64) -> Result<()> {
    // SAFETY: the caller's valid array (above), not aliased during the call.
    let owned = unsafe { &*array };
    if owned.release.is_none() {
        return Ok(());
    }
    if stream == CAI_STREAM_NONE {
        // SAFETY: as above; the release runs once (taken by an atomic swap).
        unsafe { crate::abi::release(array) };
        return Ok(());
    }
    if owned.memory == CAI_MEMORY_OPENCL {
        return Err(Error::new(
            Status::InvalidArgument,
            format!("array.memory is CAI_MEMORY_OPENCL ({CAI_MEMORY_OPENCL}): a release after a stream is for CUDA memory, whose stream is a CUstream; release an OpenCL array once its queue has finished (clFinish), with cai_release"),
        ));
    }
    let driver = crate::driver::driver().map_err(|mut failed| {
        // The loader's message speaks of imports: first say what it means for this array.
        failed.message = format!(
            "cai_release_after queued nothing, the array is still yours (with no driver no GPU work reads it: \
             release it now, with cai_release); {}",
            failed.message
        );
        failed
    })?;
    let event = record_on(driver, stream, owned.data)?;
    let moved = *owned;
    // SAFETY: as above: the caller's array, which from here on owns nothing.
    unsafe { (*array).release = None };
    {
        let mut queue = queue();
        let number = queue.next;
        queue.next += 1;
        queue.waiting.push(Pending { array: moved, event, number });
        WAITING.store(queue.waiting.len(), Ordering::Relaxed);
    }
    // The array has moved: whatever the pass over the queue meets, this call succeeded, since a
    // failure here would tell the caller the array is still theirs. A failed query of an
    // earlier release still ran that release (run_completed); cai_release_pending reports its
    // own passes' failures.
    let _ = run_completed(driver, false);
    Ok(())
}

/// Runs the queued releases whose work has completed, or with `wait` all of those queued
/// before this call once it has (waiting on the host, and for other threads' passes to run
/// what they took); returns how many are still queued. An empty queue loads no driver.
pub fn release_pending(wait: bool) -> Result<u64> {
    if wait {
        return wait_for_all();
    }
    if queue().waiting.is_empty() {
        return Ok(queue().left());
    }
    run_completed(crate::driver::driver()?, false)
}

/// Polls the queue where it holds anything: every import and sync calls it first. With
/// nothing queued one relaxed load: no lock, no driver call. A release queued by another
/// thread may be missed until that thread's store is seen, which only delays it.
#[inline(always)]
pub fn run_due_releases() {
    if WAITING.load(Ordering::Relaxed) != 0 {
        run_due_releases_now();
    }
}

/// `run_due_releases` with something queued. A failed query still runs its release (see
/// `run_completed`) and the failure is dropped: it is not the import's, and
/// `cai_release_pending` reports only what its own passes meet.
#[cold]
#[inline(never)]
fn run_due_releases_now() {
    // Something was queued, so the driver loaded: this only reads what it found.
    if let Ok(driver) = crate::driver::driver() {
        let _ = run_completed(driver, false);
    }
}

/// The waiting drain: passes over the queue until none of the releases queued before it is
/// waiting, then waits until no other pass holds one of them. Called from a release (this
/// thread is running releases), it does not wait for releases being run: its own caller's
/// cannot run before it returns, and another thread's may itself be waiting for this one's.
fn wait_for_all() -> Result<u64> {
    let nested = RELEASING_HERE.with(Cell::get) > 0;
    let mut first_failure = None;
    let mut queue = queue();
    let before = queue.next;
    loop {
        if queue.waiting.iter().any(|pending| pending.number < before) {
            drop(queue);
            // Something was queued, so the driver loaded.
            if let Err(failed) = crate::driver::driver().and_then(|driver| run_completed(driver, true)) {
                first_failure.get_or_insert(failed);
            }
            queue = self::queue();
        } else if queue.unfinished(before, nested) {
            queue = CHANGED.wait(queue).unwrap_or_else(PoisonError::into_inner);
        } else {
            break;
        }
    }
    let left = queue.left();
    drop(queue);
    first_failure.map_or(Ok(left), Err)
}

/// An event recorded on `stream`, in the stream's context (for the default streams 1 and 2:
/// the current context, else that of the array's memory at `data`), once the stream is known
/// not to be capturing.
fn record_on(driver: &Driver, stream: u64, data: u64) -> Result<PooledEvent> {
    let context = context_of(driver, stream, data)?;
    let in_context = ContextGuard::enter(driver, context)?;
    match driver.stream_capture(stream)? {
        Capture::None => {}
        capture => {
            return Err(event_refused_in_capture(
                stream,
                capture,
                "stream",
                "say when the memory is free",
                "release after a stream outside capture (one the graph's launch runs on, once launched), or keep the array until the graph's last launch has completed; the array is still yours",
            ))
        }
    }
    let current = if context.is_null() { driver.current_context()? } else { context };
    let event = events::take(driver, current)?;
    if let Err(failed) = driver.event_record(event.handle, stream) {
        // Never recorded: nothing it marks can still run, so the pool may have it back.
        return Err(events::put(driver, event).err().unwrap_or(failed));
    }
    in_context.leave()?;
    Ok(event)
}

fn context_of(driver: &Driver, stream: u64, data: u64) -> Result<CUcontext> {
    if stream != CAI_STREAM_LEGACY && stream != CAI_STREAM_PER_THREAD {
        return driver.stream_context(stream);
    }
    let current = driver.current_context()?;
    if !current.is_null() || data == 0 {
        return Ok(current);
    }
    Ok(driver.pointer_attributes(data)?.context)
}

/// One pass over the queue: the releases that are due run, outside the lock, in the order
/// they were queued; the first failure of a query is returned after every due release ran.
fn run_completed(driver: &Driver, wait: bool) -> Result<u64> {
    let taken = {
        let mut queue = queue();
        let taken = std::mem::take(&mut queue.waiting);
        queue.asking.extend(taken.iter().map(|pending| pending.number));
        WAITING.store(0, Ordering::Relaxed);
        taken
    };
    let asked: Vec<u64> = taken.iter().map(|pending| pending.number).collect();
    let mut kept = Vec::new();
    let mut due = Vec::new();
    let mut first_failure = None;
    for pending in taken {
        let completed = if wait {
            driver.event_synchronize(pending.event.handle).map(|()| true)
        } else {
            driver.event_completed(pending.event.handle)
        };
        match completed {
            Ok(false) => kept.push(pending),
            Ok(true) => {
                // Completed: the event marks nothing that may still run.
                if let Err(failed) = events::put(driver, pending.event) {
                    first_failure.get_or_insert(failed);
                }
                due.push((pending.number, pending.array));
            }
            Err(failed) => {
                // A query fails for a context that is gone or a sticky device error: no work of
                // it runs any more, and the release is due. The event is never reused.
                let _ = events::retire(driver, pending.event);
                first_failure.get_or_insert(failed);
                due.push((pending.number, pending.array));
            }
        }
    }
    let releasing = Releasing::mark(due.iter().map(|(number, _)| *number).collect());
    let left = {
        let mut queue = queue();
        // Put back in the order queued, whatever other passes put back meanwhile.
        queue.waiting.extend(kept);
        queue.waiting.sort_by_key(|pending| pending.number);
        queue.asking.retain(|number| asked.binary_search(number).is_err());
        queue.releasing.extend_from_slice(&releasing.numbers);
        WAITING.store(queue.waiting.len(), Ordering::Relaxed);
        queue.left()
    };
    CHANGED.notify_all();
    for (_, mut array) in due {
        // SAFETY: a struct moved in by `release_after`, released once, here.
        unsafe { crate::abi::release(&mut array) };
    }
    drop(releasing);
    match first_failure {
        Some(failed) => Err(failed),
        None => Ok(left),
    }
}

/// The releases a pass is running: while it lives this thread counts as running releases
/// (`RELEASING_HERE`); dropped, even by a release's panic, it takes their numbers out of the
/// queue's `releasing` and wakes the waiting drains, which would otherwise wait for ever.
struct Releasing {
    numbers: Vec<u64>,
}

impl Releasing {
    fn mark(numbers: Vec<u64>) -> Releasing {
        RELEASING_HERE.with(|here| here.set(here.get() + 1));
        Releasing { numbers }
    }
}

impl Drop for Releasing {
    fn drop(&mut self) {
        RELEASING_HERE.with(|here| here.set(here.get() - 1));
        if self.numbers.is_empty() {
            return;
        }
        queue().releasing.retain(|number| !self.numbers.contains(number));
        CHANGED.notify_all();
    }
}
