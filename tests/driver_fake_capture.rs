//! Imports during CUDA graph capture, against the fake CUDA driver (a test double that models
//! NVIDIA's capture rules and error codes): docs/conformance.md rows 91 and 92. Every import
//! either succeeds with the user's capture still valid (cuStreamEndCapture succeeds, and no
//! other stream is left in it) or is refused with CAI_ERROR_STREAM_CAPTURING before any call
//! that would break the capture (the fake's call log shows none).
//!
//! Captures are process-wide in the fake, as in a driver (the legacy stream of a context is
//! unusable while any stream of it captures), so the tests here take turns.

mod common;

use std::ptr::null_mut;
use std::sync::{Mutex, MutexGuard};

use cai::*;

use common::fake_driver::*;
use common::*;

fn one_at_a_time() -> MutexGuard<'static, ()> {
    static TURN: Mutex<()> = Mutex::new(());
    TURN.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn device_array(f: &Fake, device: i32, stream: u64) -> CaiArray {
    let mut a = array(&[4], "<f4");
    a.data = f.alloc(4096, MEMORY_DEVICE, device, 0);
    a.stream = stream;
    a
}

fn import(a: &CaiArray, consumer_stream: u64, sync_mode: i32) -> (i32, String) {
    let options = CaiImportOptions { consumer_stream, sync_mode, ..Default::default() };
    let mut e = blank_error();
    // SAFETY: every pointer is NULL or points to a live value of the type the function takes.
    let status = unsafe { cai_import(a, &options, null_mut(), &mut e) };
    (status, if status == CAI_OK { String::new() } else { e.message_str() })
}

/// The calls in the log that enqueue or wait, any of which a refusal must not have made.
fn enqueued(log: &str) -> Vec<&str> {
    log.lines()
        .filter(|l| {
            l.starts_with("cuEventRecord")
                || l.starts_with("cuStreamWaitEvent")
                || l.starts_with("cuStreamSynchronize")
        })
        .collect()
}

/// A refusal with the new status, its message naming capture, the stream and the way on, and
/// nothing enqueued since `begin`.
fn assert_refused_before_any_enqueue(f: &Fake, (status, message): (i32, String), stream: &str) {
    let log = f.log();
    assert_eq!(status, CAI_ERROR_STREAM_CAPTURING, "{message}\n{log}");
    assert!(message.starts_with("CAI_ERROR_STREAM_CAPTURING: "), "{message}");
    assert!(message.contains("capturing") && message.contains(stream), "{message}");
    assert!(message.contains("CAI_SYNC_NONE") || message.contains("consumer stream"), "{message}");
    assert!(message.contains("the capture is left as it was"), "{message}");
    assert!(log.contains("cuStreamGetCaptureInfo"), "asked before refusing: {log}");
    assert!(enqueued(&log).is_empty(), "refused before any enqueue: {log}");
}

/// The capture begun on `origin` is still active with `streams` streams in it, and ends with
/// a graph.
fn assert_capture_ends_well(f: &Fake, origin: u64, streams: i32) {
    assert_eq!(f.is_capturing(origin), (0, CAPTURE_STATUS_ACTIVE), "the capture is still valid");
    assert_eq!(f.capture_streams(origin), streams, "no other stream was pulled into the capture");
    assert_eq!(f.end_capture(origin), (0, true), "cuStreamEndCapture succeeds: {}", f.log());
}

#[test]
fn the_fake_driver_models_capture_as_nvidia_documents_it_fake_driver() {
    let _turn = one_at_a_time();
    let f = fake();
    f.begin(0);
    let (origin, side, outside) = (f.stream(0), f.stream(0), f.stream(0));
    assert_eq!(f.begin_capture(origin, CAPTURE_MODE_GLOBAL), 0);
    assert_eq!(f.is_capturing(origin), (0, CAPTURE_STATUS_ACTIVE));
    // A wait on an event recorded in the capture joins the waiting stream to it...
    let fork = f.event();
    assert_eq!(f.record(fork, origin), 0);
    assert_eq!(f.wait(side, fork, 0), 0);
    assert_eq!((f.is_capturing(side), f.capture_streams(origin)), ((0, CAPTURE_STATUS_ACTIVE), 2));
    // ... and the end fails unless the origin joined it back.
    assert_eq!(f.end_capture(origin), (CUDA_ERROR_STREAM_CAPTURE_UNJOINED, false));
    assert_eq!(f.is_capturing(side), (0, CAPTURE_STATUS_NONE), "the failed end took every stream out");
    assert_eq!(f.begin_capture(origin, CAPTURE_MODE_GLOBAL), 0);
    assert_eq!((f.record(fork, origin), f.wait(side, fork, 0)), (0, 0));
    let join = f.event();
    assert_eq!((f.record(join, side), f.wait(origin, join, 0)), (0, 0));
    assert_eq!(f.end_capture(origin), (0, true), "forked and joined back");

    // A capturing stream's wait on an event recorded outside capture: legal only as an
    // external node (CU_EVENT_WAIT_EXTERNAL), else refused and the capture invalidated.
    let before = f.event();
    assert_eq!(f.record(before, outside), 0);
    assert_eq!(f.wait(outside, before, 1), CUDA_ERROR_INVALID_VALUE, "the flag is for capture only");
    assert_eq!(f.begin_capture(origin, CAPTURE_MODE_RELAXED), 0);
    assert_eq!(f.wait(origin, before, 1), 0);
    assert_eq!(f.is_capturing(origin), (0, CAPTURE_STATUS_ACTIVE));
    assert_eq!(f.wait(origin, before, 0), CUDA_ERROR_STREAM_CAPTURE_ISOLATION);
    assert_eq!(f.is_capturing(origin), (0, CAPTURE_STATUS_INVALIDATED));
    assert_eq!(f.end_capture(origin), (CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, false));

    // A host wait on a capturing stream: refused, the capture invalidated.
    assert_eq!(f.begin_capture(origin, CAPTURE_MODE_THREAD_LOCAL), 0);
    assert_eq!(f.synchronize(origin), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    assert_eq!(f.end_capture(origin), (CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, false));

    // The legacy stream of the capture's context, in any mode: asked about, it answers
    // CUDA_ERROR_STREAM_CAPTURE_IMPLICIT and the capture stays valid; used, it invalidates it.
    // Another context's legacy stream is free.
    for mode in CAPTURE_MODES {
        assert_eq!(f.begin_capture(origin, mode), 0);
        assert_eq!(f.is_capturing(CAI_STREAM_LEGACY), (CUDA_ERROR_STREAM_CAPTURE_IMPLICIT, -1));
        assert_eq!(f.is_capturing(origin), (0, CAPTURE_STATUS_ACTIVE), "mode {mode}");
        f.begin(1);
        assert_eq!(f.synchronize(CAI_STREAM_LEGACY), 0, "device 1's legacy stream");
        f.begin(0);
        assert_eq!(f.synchronize(CAI_STREAM_LEGACY), CUDA_ERROR_STREAM_CAPTURE_IMPLICIT, "mode {mode}");
        assert_eq!(f.end_capture(origin), (CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, false), "mode {mode}");
    }

    // Two captures cannot be merged by a wait; a capture not begun relaxed ends on its thread.
    let other = f.stream(0);
    assert_eq!(
        (f.begin_capture(origin, CAPTURE_MODE_GLOBAL), f.begin_capture(other, CAPTURE_MODE_GLOBAL)),
        (0, 0)
    );
    assert_eq!(f.record(fork, origin), 0);
    assert_eq!(f.wait(other, fork, 0), CUDA_ERROR_STREAM_CAPTURE_MERGE);
    assert_eq!(f.end_capture(other), (CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, false));
    let elsewhere = std::thread::spawn(move || fake().end_capture(origin)).join().unwrap();
    assert_eq!(elsewhere, (CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD, false));
    assert_eq!(f.end_capture(origin), (CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, false));
}

#[test]
fn row_91_producer_capturing_consumer_not_is_refused_and_the_capture_stays_valid_fake_driver() {
    let _turn = one_at_a_time();
    let f = fake();
    for mode in CAPTURE_MODES {
        for sync_mode in [CAI_SYNC_DEFAULT, CAI_SYNC_STREAM_ORDERED, CAI_SYNC_BLOCKING] {
            // With a consumer stream (a wait would pull it into the capture; or, blocking, a host
            // wait on the capturing stream), and without one (a host wait).
            for with_consumer in [true, false] {
                f.begin(0);
                let (producer, consumer) = (f.stream(0), f.stream(0));
                assert_eq!(f.begin_capture(producer, mode), 0);
                let a = device_array(f, 0, producer);
                let consumer = if with_consumer { consumer } else { 0 };
                let refused = import(&a, consumer, sync_mode);
                let name = format!("{producer:#x}");
                assert_refused_before_any_enqueue(f, refused.clone(), &name);
                assert!(refused.1.contains(&format!("consumer_stream={name}")), "{}", refused.1);
                assert_capture_ends_well(f, producer, 1);
            }
        }
    }
}

#[test]
fn row_91_consumer_capturing_producer_not_is_refused_and_the_capture_stays_valid_fake_driver() {
    let _turn = one_at_a_time();
    let f = fake();
    for mode in CAPTURE_MODES {
        for sync_mode in [CAI_SYNC_DEFAULT, CAI_SYNC_STREAM_ORDERED] {
            f.begin(0);
            let (producer, consumer) = (f.stream(0), f.stream(0));
            assert_eq!(f.begin_capture(consumer, mode), 0);
            let a = device_array(f, 0, producer);
            let refused = import(&a, consumer, sync_mode);
            assert_refused_before_any_enqueue(f, refused.clone(), &format!("{consumer:#x}"));
            assert!(refused.1.contains("before the capture begins"), "{}", refused.1);
            assert_capture_ends_well(f, consumer, 1);
        }
        // Blocking mode waits on the host for the producer, which is not capturing: legal,
        // and the consumer's capture is not touched.
        f.begin(0);
        let (producer, consumer) = (f.stream(0), f.stream(0));
        assert_eq!(f.begin_capture(consumer, mode), 0);
        let a = device_array(f, 0, producer);
        assert_eq!(import(&a, consumer, CAI_SYNC_BLOCKING), (CAI_OK, String::new()));
        assert_eq!(enqueued(&f.log()), vec![format!("cuStreamSynchronize {}", f.stream_name(producer))]);
        assert_capture_ends_well(f, consumer, 1);
    }
}

#[test]
fn row_91_both_in_one_capture_are_ordered_inside_it_and_its_event_is_never_pooled_fake_driver() {
    let _turn = one_at_a_time();
    let f = fake();
    for mode in CAPTURE_MODES {
        f.begin(0);
        // The user's capture on the consumer's stream, forked into a producer stream that works
        // in it; libcai's sync is then the join back, which the end needs.
        let (consumer, producer) = (f.stream(0), f.stream(0));
        assert_eq!(f.begin_capture(consumer, mode), 0);
        let fork = f.event();
        assert_eq!((f.record(fork, consumer), f.wait(producer, fork, 0)), (0, 0));
        assert_eq!(f.capture_streams(consumer), 2);
        let a = device_array(f, 0, producer);
        f.begin(0);
        assert_eq!(import(&a, consumer, CAI_SYNC_DEFAULT), (CAI_OK, String::new()));
        let log = f.log();
        let (p, c) = (f.stream_name(producer), f.stream_name(consumer));
        let records: Vec<&str> = log.lines().filter(|l| l.starts_with("cuEventRecord")).collect();
        assert_eq!(records.len(), 1, "{log}");
        assert!(records[0].ends_with(&format!(" {p} captured")), "recorded in the capture: {log}");
        let event = records[0].split(' ').nth(1).unwrap();
        assert!(log.contains(&format!("cuStreamWaitEvent {c} {event} flags=0\n")), "{log}");
        assert!(log.contains(&format!("cuEventDestroy {event}\n")), "destroyed, not pooled: {log}");
        assert!(!log.contains("cuStreamSynchronize"), "{log}");
        // The event is gone: the next stream-ordered sync outside capture never gets it back.
        let (s1, s2) = (f.stream(0), f.stream(0));
        f.begin(0);
        assert_eq!(import(&device_array(f, 0, s1), s2, CAI_SYNC_DEFAULT).0, CAI_OK);
        assert!(!f.log().contains(&format!("cuEventRecord {event} ")), "{}", f.log());
        // The producer stream stays in the capture (the user forked it), joined back by the
        // import: the end succeeds and takes both out.
        assert_eq!(f.capture_streams(consumer), 2);
        assert_eq!(f.end_capture(consumer), (0, true), "joined back by the import's ordering");
        assert_eq!(f.is_capturing(producer), (0, CAPTURE_STATUS_NONE));
    }
}

#[test]
fn row_91_the_capturing_stream_as_both_needs_nothing_fake_driver() {
    let _turn = one_at_a_time();
    let f = fake();
    f.begin(0);
    let stream = f.stream(0);
    assert_eq!(f.begin_capture(stream, CAPTURE_MODE_GLOBAL), 0);
    let a = device_array(f, 0, stream);
    assert_eq!(import(&a, stream, CAI_SYNC_DEFAULT), (CAI_OK, String::new()));
    assert!(!f.log().contains("cuStreamGetCaptureInfo"), "no sync planned, no query: {}", f.log());
    assert_capture_ends_well(f, stream, 1);
}

#[test]
fn row_91_two_captures_are_never_merged_fake_driver() {
    let _turn = one_at_a_time();
    let f = fake();
    f.begin(0);
    let (producer, consumer) = (f.stream(0), f.stream(0));
    assert_eq!(
        (f.begin_capture(producer, CAPTURE_MODE_RELAXED), f.begin_capture(consumer, CAPTURE_MODE_RELAXED)),
        (0, 0)
    );
    let refused = import(&device_array(f, 0, producer), consumer, CAI_SYNC_DEFAULT);
    assert_refused_before_any_enqueue(f, refused.clone(), &format!("{producer:#x}"));
    assert!(refused.1.contains("two CUDA graphs"), "{}", refused.1);
    assert_capture_ends_well(f, producer, 1);
    assert_capture_ends_well(f, consumer, 1);
}

#[test]
fn row_91_a_capture_already_invalidated_is_not_touched_fake_driver() {
    let _turn = one_at_a_time();
    let f = fake();
    f.begin(0);
    let (producer, consumer) = (f.stream(0), f.stream(0));
    assert_eq!(f.begin_capture(producer, CAPTURE_MODE_GLOBAL), 0);
    assert_eq!(f.synchronize(producer), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    f.begin(0);
    let refused = import(&device_array(f, 0, producer), consumer, CAI_SYNC_DEFAULT);
    assert_refused_before_any_enqueue(f, refused.clone(), &format!("{producer:#x}"));
    assert!(refused.1.contains("invalidated"), "{}", refused.1);
    assert_eq!(f.end_capture(producer), (CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, false));
}

#[test]
fn row_92_the_legacy_stream_during_a_capture_in_its_context_is_refused_fake_driver() {
    let _turn = one_at_a_time();
    let f = fake();
    for mode in CAPTURE_MODES {
        f.begin(0);
        let (capturing, other) = (f.stream(0), f.stream(0));
        assert_eq!(f.begin_capture(capturing, mode), 0);
        // The array on the legacy stream: with no consumer stream (a host wait), or another.
        for consumer in [0, other] {
            f.begin(0);
            let refused = import(&device_array(f, 0, CAI_STREAM_LEGACY), consumer, CAI_SYNC_DEFAULT);
            assert_refused_before_any_enqueue(f, refused.clone(), "legacy default stream (1)");
        }
        // The legacy stream as the consumer's.
        f.begin(0);
        let refused = import(&device_array(f, 0, other), CAI_STREAM_LEGACY, CAI_SYNC_DEFAULT);
        assert_refused_before_any_enqueue(f, refused, "legacy default stream (1)");
        // The per-thread default stream is not the legacy one: ordered as always.
        f.begin(0);
        assert_eq!(import(&device_array(f, 0, other), CAI_STREAM_PER_THREAD, CAI_SYNC_DEFAULT).0, CAI_OK);
        // Device 1's legacy stream, while only device 0 captures: synced as always.
        f.begin(1);
        assert_eq!(import(&device_array(f, 1, CAI_STREAM_LEGACY), 0, CAI_SYNC_DEFAULT).0, CAI_OK);
        assert_eq!(enqueued(&f.log()), vec!["cuStreamSynchronize legacy"]);
        f.begin(0);
        assert_capture_ends_well(f, capturing, 1);
    }
}

#[test]
fn row_92_a_global_capture_begun_on_another_thread_blocks_this_threads_legacy_stream_fake_driver() {
    let _turn = one_at_a_time();
    let f = fake();
    f.begin(0);
    let capturing = f.stream(0);
    let (begun_tx, begun_rx) = std::sync::mpsc::channel();
    let (imported_tx, imported_rx) = std::sync::mpsc::channel::<()>();
    let capturer = std::thread::spawn(move || {
        let f = fake();
        f.begin(0);
        begun_tx.send(f.begin_capture(capturing, CAPTURE_MODE_GLOBAL)).unwrap();
        imported_rx.recv().unwrap();
        (f.is_capturing(capturing), f.capture_streams(capturing), f.end_capture(capturing))
    });
    assert_eq!(begun_rx.recv().unwrap(), 0);
    let refused = import(&device_array(f, 0, CAI_STREAM_LEGACY), 0, CAI_SYNC_BLOCKING);
    assert_refused_before_any_enqueue(f, refused, "legacy default stream (1)");
    imported_tx.send(()).unwrap();
    assert_eq!(capturer.join().unwrap(), ((0, CAPTURE_STATUS_ACTIVE), 1, (0, true)));
}

#[test]
fn no_capture_query_is_made_when_no_sync_is_planned_fake_driver() {
    let _turn = one_at_a_time();
    let f = fake();
    f.begin(0);
    let (producer, consumer) = (f.stream(0), f.stream(0));
    // Sync off; the consumer's own stream; no stream at all.
    for (stream, consumer, sync_mode) in [
        (producer, consumer, CAI_SYNC_NONE),
        (producer, producer, CAI_SYNC_DEFAULT),
        (0, consumer, CAI_SYNC_DEFAULT),
    ] {
        f.begin(0);
        assert_eq!(import(&device_array(f, 0, stream), consumer, sync_mode).0, CAI_OK);
        let log = f.log();
        assert!(log.contains("cuPointerGetAttributes"), "the import ran: {log}");
        assert!(!log.contains("cuStreamGetCaptureInfo"), "no sync planned, no capture query: {log}");
    }
    // A sync asks once a stream: twice for a stream-ordered sync, once for a host wait.
    f.begin(0);
    assert_eq!(import(&device_array(f, 0, producer), consumer, CAI_SYNC_DEFAULT).0, CAI_OK);
    assert_eq!(f.log().matches("cuStreamGetCaptureInfo").count(), 2, "{}", f.log());
    f.begin(0);
    assert_eq!(import(&device_array(f, 0, producer), 0, CAI_SYNC_DEFAULT).0, CAI_OK);
    assert_eq!(f.log().matches("cuStreamGetCaptureInfo").count(), 1, "{}", f.log());
}

#[test]
fn cai_sync_and_export_joins_refuse_the_same_way_fake_driver() {
    let _turn = one_at_a_time();
    let f = fake();
    f.begin(0);
    let (producer, consumer) = (f.stream(0), f.stream(0));
    assert_eq!(f.begin_capture(producer, CAPTURE_MODE_GLOBAL), 0);
    let mut a = device_array(f, 0, producer);
    let options = CaiSyncOptions { consumer_stream: consumer, ..Default::default() };
    let mut e = blank_error();
    // SAFETY: every pointer is NULL or points to a live value of the type the function takes.
    let status = unsafe { cai_sync(&a, &options, &mut e) };
    assert_refused_before_any_enqueue(f, (status, e.message_str()), &format!("{producer:#x}"));
    // An export joining the capturing stream into one outside the capture.
    f.begin(0);
    a.stream = consumer;
    let work = [producer];
    let export = CaiExportOptions { work_streams: work.as_ptr(), work_stream_count: 1, ..Default::default() };
    let mut e = blank_error();
    // SAFETY: as above; `work` outlives the call.
    let status = unsafe { cai_export(&mut a, &export, &mut e) };
    let message = e.message_str();
    assert_eq!(status, CAI_ERROR_STREAM_CAPTURING, "{message}");
    assert!(message.contains("the work stream") && message.contains("the exported stream"), "{message}");
    assert!(enqueued(&f.log()).is_empty(), "{}", f.log());
    assert_capture_ends_well(f, producer, 1);
}
