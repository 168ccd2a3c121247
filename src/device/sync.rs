//! Stream synchronization (spec "Synchronization"): a consumer waits for the producer's
//! stream, and a producer joins its work streams into the one it exports.
//!
//! CAI stream values double as CUstream handles: 1 is CU_STREAM_LEGACY and 2 is
//! CU_STREAM_PER_THREAD in the driver too, so only 0 ("None") needs a rule of its own.
//!
//! CUDA graph capture: a sync that is planned first asks the driver whether the streams it
//! would touch are capturing (cuStreamGetCaptureInfo, one call a stream; never asked when
//! nothing is synced). Outside capture the sync runs as always. Both streams in one capture:
//! the event record and the wait are legal there and become an edge of the user's graph (the
//! event, recorded in the capture, is then destroyed, never pooled: `events::retire`). Any
//! other sync would be refused by the driver and invalidate the capture, or change it: a host
//! wait on a capturing stream (CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED), a wait that pulls a
//! stream outside the capture into it (the capture's end then fails as unjoined), a captured
//! wait on an event recorded outside capture (CUDA_ERROR_STREAM_CAPTURE_ISOLATION; legal only
//! as an external event node, whose event libcai would have to keep alive for every launch of
//! the graph, which it cannot know), a wait joining two captures (..._MERGE), and any use of
//! the legacy stream while a blocking stream of its context is capturing, whatever the capture's
//! mode (..._IMPLICIT). Those are refused with CAI_ERROR_STREAM_CAPTURING before any call that
//! enqueues anything, and the capture stays as it was.

use crate::config::default_sync_disabled;

use super::context::ContextGuard;
use super::events;
use crate::abi::{
    CAI_STREAM_LEGACY, CAI_STREAM_NONE, CAI_STREAM_PER_THREAD, CAI_SYNC_BLOCKING, CAI_SYNC_DEFAULT,
    CAI_SYNC_NONE,
};
use crate::driver::cuda::{CUcontext, CUevent};
use crate::driver::{Capture, Driver};
use crate::status::{Error, Result, Status};

/// What a consumer sync does, as `planned_action` decides it before any driver call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SyncAction {
    Nothing,
    StreamOrdered,
    Blocked,
}

/// Checks a sync mode value from C.
#[inline(always)]
pub(crate) fn sync_mode_is_known(mode: i32) -> Result<()> {
    if (CAI_SYNC_DEFAULT..=CAI_SYNC_NONE).contains(&mode) {
        Ok(())
    } else {
        Err(Error::new(Status::InvalidArgument, format!("sync mode {mode} is not one of CAI_SYNC_*")))
    }
}

/// The sync a consumer owes before touching data produced on `producer` (a CAI stream
/// value), from `consumer` (a CAI stream value; 0 for none).
#[inline]
pub fn planned_action(producer: u64, consumer: u64, mode: i32) -> SyncAction {
    if producer == CAI_STREAM_NONE {
        return SyncAction::Nothing;
    }
    action_after_work(consumer, mode, consumer == producer)
}

/// The sync a consumer on `consumer` owes work it must follow, in `mode`: nothing where the
/// work is on the consumer's own stream (`same_stream`) or no sync is wanted.
#[inline(always)]
fn action_after_work(consumer: u64, mode: i32, same_stream: bool) -> SyncAction {
    match effective_mode(mode) {
        CAI_SYNC_NONE => SyncAction::Nothing,
        CAI_SYNC_BLOCKING => SyncAction::Blocked,
        _ if consumer == CAI_STREAM_NONE => SyncAction::Blocked,
        _ if same_stream => SyncAction::Nothing,
        _ => SyncAction::StreamOrdered,
    }
}

/// Consumer sync after work another process marked with `event` (an IPC event this process
/// opened): the import's modes, the producer being the event instead of a stream of this
/// process (never the consumer's own): stream-ordered, `consumer` waits on the event; blocking
/// (or no consumer stream), the host waits for it; CAI_SYNC_NONE, nothing. A capturing consumer
/// stream is refused before anything is enqueued: a captured wait on an event recorded outside
/// the capture is refused by the driver, and invalidates the capture.
pub(crate) fn wait_for_event(
    driver: &Driver,
    event: CUevent,
    consumer: u64,
    mode: i32,
    array_context: CUcontext,
) -> Result<()> {
    match action_after_work(consumer, mode, false) {
        SyncAction::Nothing => Ok(()),
        SyncAction::Blocked => driver.event_synchronize(event),
        SyncAction::StreamOrdered => {
            let consumer_context = stream_context(driver, consumer, array_context)?;
            match capture_of(driver, consumer, consumer_context)? {
                Capture::None => {}
                capture => return Err(event_wait_refused(capture, consumer)),
            }
            let in_consumer_context = ContextGuard::enter(driver, consumer_context)?;
            driver.stream_wait_event(consumer, event)?;
            in_consumer_context.leave()
        }
    }
}

/// The refusal of a stream-ordered wait on another process's event by a capturing stream.
#[cold]
#[inline(never)]
fn event_wait_refused(capture: Capture, consumer: u64) -> Error {
    let waiter = "the consumer's stream";
    let why = match capture {
        Capture::Active(id) => format!(
            "{waiter} {consumer:#x} is capturing a CUDA graph (capture {id}): the driver refuses a captured wait on the exporting process's event, recorded outside the capture, and invalidates it (CUDA_ERROR_STREAM_CAPTURE_ISOLATION)"
        ),
        Capture::LegacyBlocked => legacy_stream_blocked(waiter),
        Capture::Invalidated | Capture::None => invalidated_capture(waiter, consumer),
    };
    Error::new(
        Status::StreamCapturing,
        format!("{why}: open the descriptor before the capture begins, or pass CAI_SYNC_BLOCKING (Python: sync=True without a stream) to wait on the host; {CAPTURE_KEPT}"),
    )
}

/// What a consumer asks of a producer that orders its own work before handing an array over
/// (DLPack's `__dlpack__(stream=...)`), decided from the consumer's stream and sync mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProducerOrdering {
    /// No sync is wanted: the producer is told not to order anything (DLPack's -1), and the
    /// consumer does nothing either.
    NotWanted,
    /// The producer makes this stream (a CAI value: 1, 2 or a handle) wait for its work. The
    /// array it hands over is then on this stream, and the consumer's import does what is left
    /// by `planned_action`: nothing on that same stream, a host wait for a consumer without a
    /// stream (it asked for the legacy default stream) or in blocking mode.
    OnStream(u64),
}

/// The ordering a consumer on `consumer` (a CAI stream value; 0 for none) in sync `mode` needs
/// from a producer. A consumer without a stream is served on the legacy default stream, which
/// its import then waits for on the host: the producer's word alone orders no host read.
pub fn producer_ordering(consumer: u64, mode: i32) -> ProducerOrdering {
    if effective_mode(mode) == CAI_SYNC_NONE {
        ProducerOrdering::NotWanted
    } else if consumer == CAI_STREAM_NONE {
        ProducerOrdering::OnStream(CAI_STREAM_LEGACY)
    } else {
        ProducerOrdering::OnStream(consumer)
    }
}

/// `mode` with the process-wide opt-out applied: the default sync is off under
/// CAI_ARRAY_INTERFACE_SYNC=0.
fn effective_mode(mode: i32) -> i32 {
    if mode == CAI_SYNC_DEFAULT && default_sync_disabled() {
        CAI_SYNC_NONE
    } else {
        mode
    }
}

/// Consumer sync as `mode` plans it, loading the driver only when there is something to do
/// (so that an array with no stream imports on machines without one).
#[inline]
pub(crate) fn sync_if_needed(
    producer: u64,
    consumer: u64,
    mode: i32,
    array_context: CUcontext,
) -> Result<()> {
    match planned_action(producer, consumer, mode) {
        SyncAction::Nothing => Ok(()),
        action => perform(crate::driver::driver()?, action, producer, consumer, array_context, Roles::Import),
    }
}

/// Consumer sync: makes work on `consumer` (or the host) wait for `producer`. `array_context`
/// is the context of the array's memory, used for the default-stream handles 1 and 2.
// Reached only through the C API (cai_export, cai_from_dlpack): unused without `c-api`.
#[cfg_attr(not(feature = "c-api"), allow(dead_code))]
pub(crate) fn consumer_sync(
    driver: &Driver,
    producer: u64,
    consumer: u64,
    mode: i32,
    array_context: CUcontext,
) -> Result<()> {
    let action = planned_action(producer, consumer, mode);
    perform(driver, action, producer, consumer, array_context, Roles::Export)
}

fn perform(
    driver: &Driver,
    action: SyncAction,
    producer: u64,
    consumer: u64,
    array_context: CUcontext,
    roles: Roles,
) -> Result<()> {
    match action {
        SyncAction::Nothing => Ok(()),
        SyncAction::Blocked => {
            let in_context = ContextGuard::enter(driver, stream_context(driver, producer, array_context)?)?;
            // In the stream's context, where the handles 1 and 2 are asked of.
            match driver.stream_capture(producer)? {
                Capture::None => driver.stream_synchronize(producer)?,
                capture => return Err(host_wait_refused(capture, producer, roles)),
            }
            in_context.leave()
        }
        SyncAction::StreamOrdered => record_and_wait(driver, producer, consumer, array_context, roles),
    }
}

/// Producer join: makes `target` wait for the work on each of `work_streams` (CAI values).
// Reached only through the C API (cai_export, cai_from_dlpack): unused without `c-api`.
#[cfg_attr(not(feature = "c-api"), allow(dead_code))]
pub(crate) fn join_streams(
    driver: &Driver,
    target: u64,
    work_streams: &[u64],
    array_context: CUcontext,
) -> Result<()> {
    for &work in work_streams.iter().filter(|&&w| w != target) {
        record_and_wait(driver, work, target, array_context, Roles::Export)?;
    }
    Ok(())
}

/// The CAI value a producer's raw CUstream has when exported: the NULL stream is never 0 but
/// the default stream it stands for.
// Reached only through the C API (cai_export, cai_from_dlpack): unused without `c-api`.
#[cfg_attr(not(feature = "c-api"), allow(dead_code))]
pub(crate) fn exported_stream_value(raw: u64, per_thread_default_stream: bool) -> u64 {
    match raw {
        0 if per_thread_default_stream => CAI_STREAM_PER_THREAD,
        0 => CAI_STREAM_LEGACY,
        other => other,
    }
}

/// The context a stream belongs to: asked of the driver for real handles; for the default
/// handles, the array's context (NULL: the current one).
fn stream_context(driver: &Driver, stream: u64, array_context: CUcontext) -> Result<CUcontext> {
    if stream == CAI_STREAM_LEGACY || stream == CAI_STREAM_PER_THREAD {
        Ok(array_context)
    } else {
        driver.stream_context(stream)
    }
}

/// Records a pooled event on `producer` (in its context) and makes `consumer` wait on it,
/// once both streams are known to be outside capture or in one capture (else refused before
/// anything is enqueued). The event goes back to the pool either way, but for one recorded
/// in a capture, which is destroyed; a failure to return it after a wait that succeeded is
/// reported (the wait itself is in place).
fn record_and_wait(
    driver: &Driver,
    producer: u64,
    consumer: u64,
    array_context: CUcontext,
    roles: Roles,
) -> Result<()> {
    let producer_context = stream_context(driver, producer, array_context)?;
    let consumer_context = stream_context(driver, consumer, array_context)?;
    let in_one_capture =
        ordering_in_capture(driver, (producer, producer_context), (consumer, consumer_context), roles)?;
    let in_producer_context = ContextGuard::enter(driver, producer_context)?;
    // Entered, the producer's context is current; NULL left whatever was current in place.
    let current = if producer_context.is_null() { driver.current_context()? } else { producer_context };
    let event = events::take(driver, current)?;
    let recorded = driver.event_record(event.handle, producer).and_then(|()| in_producer_context.leave());
    let waited = recorded.and_then(|()| {
        let in_consumer_context = ContextGuard::enter(driver, consumer_context)?;
        driver.stream_wait_event(consumer, event.handle)?;
        in_consumer_context.leave()
    });
    // The wait captured the event's state when it was enqueued: the event can be re-recorded
    // at once, so it goes back to the pool now; but one recorded in a capture stands for
    // captured work until that capture ends, which libcai does not see: it is destroyed.
    let returned = match in_one_capture {
        None => events::put(driver, event),
        Some(_) => events::retire(driver, event),
    };
    waited.and(returned)
}

/// The capture state of `stream`; the default handles 1 and 2 are asked in `context` (the
/// array's), whose legacy and per-thread streams they mean.
fn capture_of(driver: &Driver, stream: u64, context: CUcontext) -> Result<Capture> {
    if stream != CAI_STREAM_LEGACY && stream != CAI_STREAM_PER_THREAD {
        return driver.stream_capture(stream);
    }
    let in_context = ContextGuard::enter(driver, context)?;
    let capture = driver.stream_capture(stream)?;
    in_context.leave()?;
    Ok(capture)
}

/// Whether `producer`'s work may be ordered before `consumer`'s with an event: Ok(None) when
/// neither stream is capturing, Ok(Some(id)) when both are in capture `id` (the record and the
/// wait then become an edge of that graph), else the refusal.
fn ordering_in_capture(
    driver: &Driver,
    (producer, producer_context): (u64, CUcontext),
    (consumer, consumer_context): (u64, CUcontext),
    roles: Roles,
) -> Result<Option<u64>> {
    let from = capture_of(driver, producer, producer_context)?;
    let to = capture_of(driver, consumer, consumer_context)?;
    match (from, to) {
        (Capture::None, Capture::None) => Ok(None),
        (Capture::Active(a), Capture::Active(b)) if a == b => Ok(Some(a)),
        _ => Err(ordering_refused(from, to, producer, consumer, roles)),
    }
}

/// Which sync a refusal is about, for its message: a consumer's import (producer and consumer
/// streams) or a producer's export (work streams joined into the exported one).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Roles {
    Import,
    Export,
}

impl Roles {
    /// The names of the stream waited for and the stream (or host) that waits.
    fn names(self) -> (&'static str, &'static str) {
        match self {
            Roles::Import => ("the producer's stream", "the consumer's stream"),
            Roles::Export => ("the work stream", "the exported stream"),
        }
    }

    /// What to do instead where the stream waited for is capturing and the waiter is not.
    fn instead_of_waiting_on_a_capture(self, capturing: u64) -> String {
        match self {
            Roles::Import => format!(
                "pass the capturing stream as the consumer stream (consumer_stream={capturing:#x}: no sync is then needed) or sync=False (C: CAI_SYNC_NONE)"
            ),
            Roles::Export => format!(
                "export on the capturing stream {capturing:#x}, or join the work before the capture begins"
            ),
        }
    }

    /// What to do instead where the waiter is capturing and the stream waited for is not, or
    /// where the legacy stream cannot be used.
    fn instead_of_waiting_outside(self) -> &'static str {
        match self {
            Roles::Import => "let the producer's work finish before the capture begins and pass sync=False (C: CAI_SYNC_NONE)",
            Roles::Export => "let the work finish before the capture begins and export without work streams",
        }
    }
}

const END_IT: &str = "end that capture (cuStreamEndCapture) first, or pass sync=False (C: CAI_SYNC_NONE)";
const CAPTURE_KEPT: &str = "nothing was enqueued, the capture is left as it was";

/// The refusal of a host wait on `stream`, which is capturing (or the legacy stream during a
/// capture in its context).
#[cold]
#[inline(never)]
fn host_wait_refused(capture: Capture, stream: u64, roles: Roles) -> Error {
    let who = roles.names().0;
    let why = match capture {
        Capture::Active(id) => format!(
            "{who} {stream:#x} is capturing a CUDA graph (capture {id}): the driver refuses a host wait on it (cuStreamSynchronize) and invalidates the capture"
        ),
        Capture::LegacyBlocked => legacy_stream_blocked(who),
        Capture::Invalidated | Capture::None => invalidated_capture(who, stream),
    };
    let instead = match capture {
        Capture::Active(_) => roles.instead_of_waiting_on_a_capture(stream),
        Capture::LegacyBlocked => roles.instead_of_waiting_outside().to_string(),
        Capture::Invalidated | Capture::None => END_IT.to_string(),
    };
    Error::new(Status::StreamCapturing, format!("{why}: {instead}; {CAPTURE_KEPT}"))
}

/// The refusal of a stream-ordered sync between streams that are not both outside capture or
/// both in one capture.
#[cold]
#[inline(never)]
fn ordering_refused(from: Capture, to: Capture, producer: u64, consumer: u64, roles: Roles) -> Error {
    let (waited_for, waiter) = roles.names();
    let (why, instead) = match (from, to) {
        (Capture::LegacyBlocked, _) => (legacy_stream_blocked(waited_for), roles.instead_of_waiting_outside().to_string()),
        (_, Capture::LegacyBlocked) => (legacy_stream_blocked(waiter), roles.instead_of_waiting_outside().to_string()),
        (Capture::Invalidated, _) => (invalidated_capture(waited_for, producer), END_IT.to_string()),
        (_, Capture::Invalidated) => (invalidated_capture(waiter, consumer), END_IT.to_string()),
        (Capture::Active(a), Capture::Active(b)) => (
            format!("{waited_for} {producer:#x} and {waiter} {consumer:#x} are capturing two CUDA graphs (captures {a} and {b}): the driver refuses a wait merging them and invalidates both (CUDA_ERROR_STREAM_CAPTURE_MERGE)"),
            "pass sync=False (C: CAI_SYNC_NONE) and order the graphs' launches".to_string(),
        ),
        (Capture::Active(a), _) => (
            format!("{waited_for} {producer:#x} is capturing a CUDA graph (capture {a}) and {waiter} {consumer:#x} is not: a wait would pull it into the capture, whose end then fails (CUDA_ERROR_STREAM_CAPTURE_UNJOINED)"),
            roles.instead_of_waiting_on_a_capture(producer),
        ),
        (_, Capture::Active(b)) => (
            format!("{waiter} {consumer:#x} is capturing a CUDA graph (capture {b}) and {waited_for} {producer:#x} is not: the driver refuses a captured wait on work outside the capture and invalidates it (CUDA_ERROR_STREAM_CAPTURE_ISOLATION)"),
            roles.instead_of_waiting_outside().to_string(),
        ),
        (Capture::None, Capture::None) => ("neither stream is capturing".to_string(), String::new()),
    };
    Error::new(Status::StreamCapturing, format!("{why}: {instead}; {CAPTURE_KEPT}"))
}

/// The refusal of an event to be recorded on `stream` while it is in a capture (`capture`, not
/// `Capture::None`): its work is recorded into the graph, not run, so the event could not say
/// `what` (when the memory is free, when the data is ready); `instead` is the caller's way out.
/// `who` names the stream in the message.
#[cold]
#[inline(never)]
pub(crate) fn event_refused_in_capture(
    stream: u64,
    capture: Capture,
    who: &str,
    what: &str,
    instead: &str,
) -> Error {
    let why = match capture {
        Capture::Active(id) => format!("{who} {stream:#x} is capturing a CUDA graph (capture {id})"),
        Capture::LegacyBlocked => {
            format!("{who} {stream:#x} is the legacy default stream and a stream of its context is capturing a CUDA graph")
        }
        Capture::Invalidated | Capture::None => {
            format!("{who} {stream:#x} is in a CUDA graph capture that an earlier call invalidated")
        }
    };
    Error::new(
        Status::StreamCapturing,
        format!("{why}: its work is recorded into the graph, not run, so no event on it can {what}; {instead}; nothing was enqueued, the capture is left as it was"),
    )
}

fn legacy_stream_blocked(who: &str) -> String {
    format!("{who} is the legacy default stream (1) and a stream of its context is capturing a CUDA graph: the driver refuses any use of it then and invalidates the capture (CUDA_ERROR_STREAM_CAPTURE_IMPLICIT)")
}

fn invalidated_capture(who: &str, stream: u64) -> String {
    format!("{who} {stream:#x} is capturing a CUDA graph whose capture an earlier call invalidated")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::abi::CAI_SYNC_STREAM_ORDERED;

    const HANDLE: u64 = 0x5000;

    #[test]
    fn a_consumer_that_wants_no_sync_asks_for_none() {
        assert_eq!(producer_ordering(HANDLE, CAI_SYNC_NONE), ProducerOrdering::NotWanted);
        assert_eq!(producer_ordering(CAI_STREAM_LEGACY, CAI_SYNC_NONE), ProducerOrdering::NotWanted);
        assert_eq!(producer_ordering(CAI_STREAM_NONE, CAI_SYNC_NONE), ProducerOrdering::NotWanted);
    }

    #[test]
    fn a_consumer_on_a_default_stream_asks_for_that_stream_never_for_no_sync() {
        for mode in [CAI_SYNC_DEFAULT, CAI_SYNC_STREAM_ORDERED, CAI_SYNC_BLOCKING] {
            for consumer in [CAI_STREAM_LEGACY, CAI_STREAM_PER_THREAD, HANDLE] {
                assert_eq!(producer_ordering(consumer, mode), ProducerOrdering::OnStream(consumer), "{mode}");
            }
        }
    }

    #[test]
    fn a_consumer_without_a_stream_is_served_on_the_legacy_stream_and_then_waits_on_the_host() {
        for mode in [CAI_SYNC_DEFAULT, CAI_SYNC_STREAM_ORDERED, CAI_SYNC_BLOCKING] {
            let ProducerOrdering::OnStream(stream) = producer_ordering(CAI_STREAM_NONE, mode) else {
                panic!("mode {mode}: a sync is wanted");
            };
            assert_eq!(stream, CAI_STREAM_LEGACY);
            assert_eq!(planned_action(stream, CAI_STREAM_NONE, mode), SyncAction::Blocked);
        }
    }

    #[test]
    fn after_the_producer_ordered_the_consumers_stream_only_a_blocking_mode_waits() {
        for consumer in [CAI_STREAM_LEGACY, CAI_STREAM_PER_THREAD, HANDLE] {
            let ProducerOrdering::OnStream(stream) = producer_ordering(consumer, CAI_SYNC_DEFAULT) else {
                panic!("a sync is wanted");
            };
            assert_eq!(planned_action(stream, consumer, CAI_SYNC_DEFAULT), SyncAction::Nothing);
            assert_eq!(planned_action(stream, consumer, CAI_SYNC_BLOCKING), SyncAction::Blocked);
        }
    }
}
