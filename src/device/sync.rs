//! Stream synchronization (spec "Synchronization"): a consumer waits for the producer's
//! stream, and a producer joins its work streams into the one it exports.
//!
//! CAI stream values double as CUstream handles: 1 is CU_STREAM_LEGACY and 2 is
//! CU_STREAM_PER_THREAD in the driver too, so only 0 ("None") needs a rule of its own.

use crate::config::default_sync_disabled;

use super::context::ContextGuard;
use super::events;
use crate::abi::{
    CAI_STREAM_LEGACY, CAI_STREAM_NONE, CAI_STREAM_PER_THREAD, CAI_SYNC_BLOCKING, CAI_SYNC_DEFAULT,
    CAI_SYNC_NONE,
};
use crate::driver::cuda::CUcontext;
use crate::driver::Driver;
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
    match effective_mode(mode) {
        CAI_SYNC_NONE => SyncAction::Nothing,
        CAI_SYNC_BLOCKING => SyncAction::Blocked,
        _ if consumer == CAI_STREAM_NONE => SyncAction::Blocked,
        _ if consumer == producer => SyncAction::Nothing,
        _ => SyncAction::StreamOrdered,
    }
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
        action => perform(crate::driver::driver()?, action, producer, consumer, array_context),
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
    perform(driver, planned_action(producer, consumer, mode), producer, consumer, array_context)
}

fn perform(
    driver: &Driver,
    action: SyncAction,
    producer: u64,
    consumer: u64,
    array_context: CUcontext,
) -> Result<()> {
    match action {
        SyncAction::Nothing => Ok(()),
        SyncAction::Blocked => {
            let in_context = ContextGuard::enter(driver, stream_context(driver, producer, array_context)?)?;
            driver.stream_synchronize(producer)?;
            in_context.leave()
        }
        SyncAction::StreamOrdered => record_and_wait(driver, producer, consumer, array_context),
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
        record_and_wait(driver, work, target, array_context)?;
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

/// Records a pooled event on `producer` (in its context) and makes `consumer` wait on it.
/// The event goes back to the pool either way; a failure to return it after a wait that
/// succeeded is reported (the wait itself is in place).
fn record_and_wait(driver: &Driver, producer: u64, consumer: u64, array_context: CUcontext) -> Result<()> {
    let producer_context = stream_context(driver, producer, array_context)?;
    let consumer_context = stream_context(driver, consumer, array_context)?;
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
    // at once, so it goes back to the pool now.
    let returned = events::put(driver, event);
    waited.and(returned)
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
