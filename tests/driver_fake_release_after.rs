//! Releases after a stream (`cai_release_after`, `cai_release_pending`), against the fake CUDA
//! driver, whose slow kernels take time and whose events complete only once the work before
//! them has: the producer's release runs after the kernel, never before, and never with a
//! host wait in the caller (the fake's call log shows none). The queue is process-wide, so
//! the tests here take turns.

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

/// (owner tag, the fake's clock when the release ran) of every release run.
static RELEASED: Mutex<Vec<(usize, f64)>> = Mutex::new(Vec::new());

unsafe extern "C" fn note_release(array: *mut CaiArray) {
    // SAFETY: the release's contract: called once with the array it was set on.
    let tag = unsafe { (*array).owner } as usize;
    RELEASED.lock().unwrap().push((tag, fake().now()));
}

/// When the array tagged `tag` was released, if it was.
fn released_at(tag: usize) -> Option<f64> {
    RELEASED.lock().unwrap().iter().find(|(t, _)| *t == tag).map(|(_, at)| *at)
}

fn owned_array(f: &Fake, tag: usize) -> CaiArray {
    let mut a = array(&[4], "<f4");
    a.data = f.alloc(4096, MEMORY_DEVICE, 0, 0);
    a.owner = tag as *mut std::ffi::c_void;
    a.release = Some(note_release);
    a
}

fn release_after(a: &mut CaiArray, stream: u64) -> (i32, String) {
    let mut e = blank_error();
    // SAFETY: a live array and error.
    let status = unsafe { cai_release_after(a, stream, &mut e) };
    (status, if status == CAI_OK { String::new() } else { e.message_str() })
}

/// cai_release_pending's status and how many it left queued.
fn pending(mode: i32) -> (i32, u64, String) {
    let (mut left, mut e) = (u64::MAX, blank_error());
    // SAFETY: a writable count and error.
    let status = unsafe { cai_release_pending(mode, &mut left, &mut e) };
    (status, left, if status == CAI_OK { String::new() } else { e.message_str() })
}

fn host_waits(log: &str) -> Vec<&str> {
    log.lines()
        .filter(|l| l.starts_with("cuEventSynchronize") || l.starts_with("cuStreamSynchronize"))
        .collect()
}

#[test]
fn the_fake_driver_completes_an_event_only_once_the_slow_kernel_before_it_finished_fake_driver() {
    let _turn = one_at_a_time();
    let f = fake();
    f.begin(0);
    let (s, t) = (f.stream(0), f.stream(0));
    let held = f.launch_slow(s, -1);
    let (on_s, on_t) = (f.event(), f.event());
    assert_eq!(f.record(on_s, s), 0);
    // Ordered after s's kernel through a wait, t's event waits for it too (vector clocks).
    assert_eq!((f.wait(t, on_s, 0), f.record(on_t, t)), (0, 0));
    assert_eq!(f.query(f.event()), 0, "an event never recorded is complete");
    assert_eq!((f.query(on_s), f.query(on_t)), (CUDA_ERROR_NOT_READY, CUDA_ERROR_NOT_READY));
    assert_eq!(f.slow_finished_at(held), 0.0);
    f.finish_slow(held);
    assert!(f.slow_finished_at(held) > 0.0);
    assert_eq!((f.query(on_s), f.query(on_t)), (0, 0));

    // A timed kernel: the host waits of cuEventSynchronize and cuStreamSynchronize last until
    // it has finished, and a kernel after it on the stream starts only then.
    let begun = f.now();
    // Long enough to outlast the calls before the query, under valgrind too.
    let first = f.launch_slow(s, 300);
    let second = f.launch_slow(s, 300);
    assert_eq!(f.record(on_s, s), 0);
    assert_eq!(f.query(on_s), CUDA_ERROR_NOT_READY);
    assert_eq!(f.event_synchronize(on_s), 0);
    assert!(f.now() - begun >= 0.599, "both kernels ran, one after the other");
    assert!(f.slow_finished_at(second) - f.slow_finished_at(first) >= 0.299);
    let third = f.launch_slow(t, 50);
    assert_eq!(f.synchronize(t), 0);
    assert!(f.slow_finished_at(third) > 0.0, "cuStreamSynchronize waited for it");
}

#[test]
fn a_release_after_a_stream_runs_once_the_kernel_before_it_finished_and_never_waits_fake_driver() {
    let _turn = one_at_a_time();
    let f = fake();
    f.begin(0);
    let s = f.stream(0);
    let kernel = f.launch_slow(s, -1);
    let mut a = owned_array(f, 101);
    assert_eq!(release_after(&mut a, s), (CAI_OK, String::new()));
    assert!(a.release.is_none(), "moved out of the caller's struct");
    assert_eq!(pending(CAI_PENDING_POLL).0, CAI_OK);
    assert_eq!(released_at(101), None, "the kernel still reads the array");
    let log = f.log();
    assert!(log.contains("cuEventRecord") && log.contains("cuEventQuery"), "{log}");
    assert!(host_waits(&log).is_empty(), "no host wait: {log}");

    f.finish_slow(kernel);
    let (status, left, message) = pending(CAI_PENDING_POLL);
    assert_eq!((status, left), (CAI_OK, 0), "{message}");
    let released = released_at(101).expect("released once the kernel finished");
    assert!(released >= f.slow_finished_at(kernel), "released after the kernel, on the fake's clock");
    assert!(host_waits(&f.log()).is_empty(), "{}", f.log());
}

#[test]
fn a_later_release_after_runs_the_releases_that_are_due_fake_driver() {
    let _turn = one_at_a_time();
    let f = fake();
    f.begin(0);
    let (s, t) = (f.stream(0), f.stream(0));
    let kernel = f.launch_slow(s, -1);
    let mut first = owned_array(f, 201);
    assert_eq!(release_after(&mut first, s).0, CAI_OK);
    f.finish_slow(kernel);
    let busy = f.launch_slow(t, -1);
    let mut second = owned_array(f, 202);
    assert_eq!(release_after(&mut second, t).0, CAI_OK);
    assert!(released_at(201).is_some(), "the second call ran the first release, which was due");
    assert_eq!(released_at(202), None, "t's kernel still runs");
    f.finish_slow(busy);
    assert_eq!(pending(CAI_PENDING_POLL).1, 0);
    assert!(released_at(202).is_some());
}

#[test]
fn the_waiting_drain_waits_for_the_kernels_and_leaves_nothing_queued_fake_driver() {
    let _turn = one_at_a_time();
    let f = fake();
    f.begin(0);
    let s = f.stream(0);
    let kernel = f.launch_slow(s, 80);
    let mut a = owned_array(f, 301);
    assert_eq!(release_after(&mut a, CAI_STREAM_PER_THREAD).0, CAI_OK, "nothing before it on stream 2");
    let mut b = owned_array(f, 302);
    assert_eq!(release_after(&mut b, s).0, CAI_OK);
    let (status, left, message) = pending(CAI_PENDING_WAIT);
    assert_eq!((status, left), (CAI_OK, 0), "{message}");
    assert!(released_at(302).expect("drained") >= f.slow_finished_at(kernel));
    assert!(released_at(301).is_some());
    assert!(f.log().contains("cuEventSynchronize"), "{}", f.log());
}

#[test]
fn an_event_of_a_pending_release_is_not_reused_before_it_completed_fake_driver() {
    let _turn = one_at_a_time();
    let f = fake();
    f.begin(0);
    let (s, consumer) = (f.stream(0), f.stream(0));
    let kernel = f.launch_slow(s, -1);
    let mut a = owned_array(f, 401);
    assert_eq!(release_after(&mut a, s).0, CAI_OK);
    let log = f.log();
    let recorded = |log: &str| -> Vec<String> {
        log.lines()
            .filter(|l| l.starts_with("cuEventRecord"))
            .map(|l| l.split(' ').nth(1).unwrap().to_string())
            .collect()
    };
    let pending_event = recorded(&log).pop().expect("an event was recorded");
    // A stream-ordered import meanwhile takes another event from the pool.
    f.begin(0);
    let mut imported = array(&[4], "<f4");
    imported.data = f.alloc(4096, MEMORY_DEVICE, 0, 0);
    imported.stream = f.stream(0);
    let options = CaiImportOptions { consumer_stream: consumer, ..Default::default() };
    let mut e = blank_error();
    // SAFETY: live values of the types the function takes.
    assert_eq!(unsafe { cai_import(&imported, &options, null_mut(), &mut e) }, CAI_OK, "{}", e.message_str());
    let used = recorded(&f.log());
    assert!(!used.is_empty() && !used.contains(&pending_event), "{pending_event} reused: {}", f.log());
    f.finish_slow(kernel);
    assert_eq!(pending(CAI_PENDING_POLL).1, 0);
}

#[test]
fn refusals_take_nothing_fake_driver() {
    let _turn = one_at_a_time();
    let f = fake();
    f.begin(0);
    let mut e = blank_error();
    // SAFETY: a NULL array is what is checked; the error is live.
    assert_eq!(unsafe { cai_release_after(null_mut(), 1, &mut e) }, CAI_ERROR_NULL_ARGUMENT);
    assert!(e.message_str().contains("array is NULL"), "{}", e.message_str());
    assert_eq!(pending(7).0, CAI_ERROR_INVALID_ARGUMENT);
    assert!(pending(7).2.contains("CAI_PENDING_POLL"));

    // A stream the driver does not know: the driver's refusal, the array still the caller's.
    let mut a = owned_array(f, 501);
    let (status, message) = release_after(&mut a, 0xdead_0000);
    assert_eq!(status, CAI_ERROR_DRIVER, "{message}");
    assert!(message.contains("cuStreamGetCtx"), "{message}");
    assert!(a.release.is_some() && released_at(501).is_none());

    // A capturing stream: refused after the capture query, nothing enqueued, capture valid.
    let origin = f.stream(0);
    assert_eq!(f.begin_capture(origin, CAPTURE_MODE_GLOBAL), 0);
    f.begin(0);
    for stream in [origin, CAI_STREAM_LEGACY] {
        let (status, message) = release_after(&mut a, stream);
        assert_eq!(status, CAI_ERROR_STREAM_CAPTURING, "{message}");
        assert!(message.contains("capturing a CUDA graph") && message.contains("still yours"), "{message}");
        assert!(a.release.is_some(), "nothing taken");
    }
    let log = f.log();
    assert!(log.contains("cuStreamGetCaptureInfo"), "{log}");
    assert!(!log.contains("cuEventRecord") && !log.contains("cuEventCreate"), "{log}");
    assert_eq!(f.is_capturing(origin), (0, CAPTURE_STATUS_ACTIVE));
    assert_eq!(f.end_capture(origin), (0, true));

    // Stream 0: released at once; a borrowed array: nothing to do, no driver call.
    f.begin(0);
    assert_eq!(release_after(&mut a, CAI_STREAM_NONE).0, CAI_OK);
    assert!(released_at(501).is_some() && a.release.is_none());
    let mut borrowed = array(&[4], "<f4");
    assert_eq!(release_after(&mut borrowed, 0xdead_0000).0, CAI_OK);
    assert_eq!(f.log(), "", "no driver call");
}

#[test]
fn a_failing_event_query_still_runs_the_release_and_names_the_call_fake_driver() {
    let _turn = one_at_a_time();
    let f = fake();
    for (call, mode) in [("cuEventQuery", CAI_PENDING_POLL), ("cuEventSynchronize", CAI_PENDING_WAIT)] {
        f.begin(0);
        let s = f.stream(0);
        let kernel = f.launch_slow(s, -1);
        let tag = if mode == CAI_PENDING_POLL { 601 } else { 602 };
        let mut a = owned_array(f, tag);
        assert_eq!(release_after(&mut a, s).0, CAI_OK);
        f.fail(call, CUDA_ERROR_LAUNCH_FAILED);
        let (status, left, message) = pending(mode);
        assert_eq!(status, CAI_ERROR_DRIVER, "{call}: {message}");
        assert!(message.contains(call) && message.contains("CUDA_ERROR_LAUNCH_FAILED"), "{message}");
        assert_eq!(left, u64::MAX, "not written on failure");
        assert!(released_at(tag).is_some(), "{call}: no work of a failed context runs any more");
        f.finish_slow(kernel);
    }
    assert_eq!(pending(CAI_PENDING_POLL).1, 0);
}

#[test]
fn a_release_after_that_queued_its_array_succeeds_whatever_the_pass_over_the_queue_meets_fake_driver() {
    let _turn = one_at_a_time();
    let f = fake();
    f.begin(0);
    let s = f.stream(0);
    let kernel = f.launch_slow(s, -1);
    let mut first = owned_array(f, 701);
    assert_eq!(release_after(&mut first, s).0, CAI_OK);
    // The earlier release's query fails during the next call's pass over the queue: that call
    // has moved its own array into the queue all the same, so it must say CAI_OK, never a
    // failure that would tell the caller the array (its release now cleared) is still theirs.
    f.fail("cuEventQuery", CUDA_ERROR_LAUNCH_FAILED);
    let mut second = owned_array(f, 702);
    assert_eq!(release_after(&mut second, s), (CAI_OK, String::new()));
    assert!(second.release.is_none(), "moved into the queue");
    assert!(released_at(701).is_some(), "the failed query still ran the earlier release");
    f.begin(0);
    f.finish_slow(kernel);
    assert_eq!(pending(CAI_PENDING_WAIT).1, 0);
    assert!(released_at(702).is_some());
}

/// A Rust API array of the fake's memory whose release notes `tag`, with a mask whose own
/// release notes `tag + 1`.
fn rust_array(f: &Fake, tag: usize, with_release: bool) -> Array {
    let note = |tag: usize| move || RELEASED.lock().unwrap().push((tag, fake().now()));
    let mask = Array::builder("|b1", &[4], f.alloc(64, MEMORY_DEVICE, 0, 0))
        .on_release(note(tag + 1))
        .build()
        .unwrap();
    let builder = Array::builder("<f4", &[4], f.alloc(4096, MEMORY_DEVICE, 0, 0)).mask(mask);
    if with_release { builder.on_release(note(tag)) } else { builder }.build().unwrap()
}

#[test]
fn a_rust_array_released_after_a_stream_is_dropped_once_the_kernel_finished_fake_driver() {
    let _turn = one_at_a_time();
    let f = fake();
    f.begin(0);
    let s = f.stream(0);
    let kernel = f.launch_slow(s, -1);
    // SAFETY: a stream of the fake, live for the process.
    unsafe { rust_array(f, 801, true).release_after(s) }.map_err(|(_, error)| error).unwrap();
    assert_eq!(release_pending(PendingMode::Poll), Ok(1), "still queued while the kernel runs");
    assert_eq!((released_at(801), released_at(802)), (None, None), "neither the array nor its mask");
    f.finish_slow(kernel);
    assert_eq!(release_pending(PendingMode::Poll), Ok(0));
    let finished = f.slow_finished_at(kernel);
    assert!(
        released_at(801).expect("released") >= finished
            && released_at(802).expect("mask released") >= finished
    );
    assert!(host_waits(&f.log()).is_empty(), "{}", f.log());

    // Only the mask owns something: it is queued all the same, and the waiting drain runs it.
    // Long enough to outlast the calls before the check below, under valgrind too.
    let kernel = f.launch_slow(s, 1500);
    // SAFETY: as above.
    unsafe { rust_array(f, 811, false).release_after(s) }.map_err(|(_, error)| error).unwrap();
    assert_eq!(released_at(812), None);
    assert_eq!(release_pending(PendingMode::Wait), Ok(0));
    assert!(released_at(812).expect("mask released") >= f.slow_finished_at(kernel));
}

#[test]
fn a_refused_rust_release_after_hands_the_array_back_whole_fake_driver() {
    let _turn = one_at_a_time();
    let f = fake();
    f.begin(0);
    let origin = f.stream(0);
    assert_eq!(f.begin_capture(origin, CAPTURE_MODE_GLOBAL), 0);
    let array = rust_array(f, 821, true);
    let data = array.data();
    // SAFETY: a stream of the fake.
    let (array, error) = unsafe { array.release_after(origin) }.unwrap_err();
    assert_eq!(error.status(), Status::StreamCapturing, "{error}");
    assert!(error.message().contains("the array is still yours"), "{error}");
    assert_eq!((array.data(), array.mask().map(|mask| mask.shape().to_vec())), (data, Some(vec![4])));
    assert_eq!((released_at(821), released_at(822)), (None, None));
    assert_eq!(f.end_capture(origin), (0, true), "the capture stayed valid");
    // SAFETY: a handle the fake never made: the driver refuses it.
    let (array, error) = unsafe { array.release_after(0xdead_0000) }.unwrap_err();
    assert_eq!(error.status(), Status::Driver, "{error}");
    drop(array);
    assert!(released_at(821).is_some() && released_at(822).is_some(), "dropped: released once");
    assert_eq!(RELEASED.lock().unwrap().iter().filter(|(tag, _)| *tag == 821).count(), 1);

    // Stream 0 releases at once; an array with nothing to release makes no driver call.
    f.begin(0);
    // SAFETY: stream 0 names no stream.
    unsafe { rust_array(f, 831, true).release_after(CAI_STREAM_NONE) }.map_err(|(_, error)| error).unwrap();
    assert!(released_at(831).is_some() && released_at(832).is_some());
    let nothing = Array::builder("<f4", &[4], 0x1000).build().unwrap();
    f.begin(0);
    // SAFETY: never handed to the driver.
    unsafe { nothing.release_after(0xdead_0000) }.map_err(|(_, error)| error).unwrap();
    assert_eq!(f.log(), "", "no driver call");
}

/// A gate that a release waits at: `entered` once the release has begun, `open` to let it end.
struct Gate {
    state: Mutex<(bool, bool)>,
    changed: std::sync::Condvar,
}

static GATE: Gate = Gate { state: Mutex::new((false, false)), changed: std::sync::Condvar::new() };

impl Gate {
    fn reset(&self) {
        *self.state.lock().unwrap() = (false, false);
    }
    fn until(&self, what: impl Fn(&(bool, bool)) -> bool) {
        let mut state = self.state.lock().unwrap();
        while !what(&state) {
            state = self.changed.wait(state).unwrap();
        }
    }
    fn set(&self, what: impl FnOnce(&mut (bool, bool))) {
        what(&mut self.state.lock().unwrap());
        self.changed.notify_all();
    }
}

/// A release that says it began, waits for the gate to open, then notes itself.
unsafe extern "C" fn gated_release(array: *mut CaiArray) {
    GATE.set(|state| state.0 = true);
    GATE.until(|state| state.1);
    // SAFETY: the release's contract, as for note_release.
    unsafe { note_release(array) };
}

#[test]
fn a_waiting_drain_waits_for_the_releases_another_threads_pass_is_running_fake_driver() {
    let _turn = one_at_a_time();
    let f = fake();
    GATE.reset();
    f.begin(0);
    let (s, idle) = (f.stream(0), f.stream(0));
    let kernel = f.launch_slow(s, -1);
    let mut held = owned_array(f, 901);
    assert_eq!(release_after(&mut held, s).0, CAI_OK);
    // Thread A queues an array whose work is done: its own pass takes both out, keeps the
    // held one and runs the gated release, which waits at the gate.
    let runner = std::thread::spawn(move || {
        fake().begin(0);
        let mut gated = owned_array(fake(), 902);
        gated.release = Some(gated_release);
        release_after(&mut gated, idle)
    });
    GATE.until(|state| state.0);
    f.finish_slow(kernel);
    // Thread B drains, waiting: it runs 901 itself, and must then wait for A's 902.
    let drainer = std::thread::spawn(|| {
        fake().begin(0);
        let drained = pending(CAI_PENDING_WAIT);
        (drained, released_at(902).is_some())
    });
    std::thread::sleep(std::time::Duration::from_millis(200));
    let returned_early = drainer.is_finished();
    GATE.set(|state| state.1 = true);
    assert_eq!(runner.join().unwrap().0, CAI_OK);
    let ((status, left, message), saw_902) = drainer.join().unwrap();
    assert_eq!((status, left), (CAI_OK, 0), "{message}");
    assert!(released_at(901).is_some());
    assert!(!returned_early && saw_902, "the waiting drain returned while thread A still ran 902's release");
}

/// Releases that drain (below) and have begun.
static DRAINING: Mutex<u32> = Mutex::new(0);
static DRAINING_CHANGED: std::sync::Condvar = std::sync::Condvar::new();

/// A release that drains, waiting, from inside the pass that runs it, once `DRAINING` reaches
/// the tag's last digit or half a second passed, and queues another release on the way; it
/// notes `tag + 1000` where its drain had run the release queued before it and the new one.
unsafe extern "C" fn draining_release(array: *mut CaiArray) {
    // SAFETY: the release's contract, as for note_release.
    let tag = unsafe { (*array).owner } as usize;
    let mut count = DRAINING.lock().unwrap();
    *count += 1;
    DRAINING_CHANGED.notify_all();
    let _ = DRAINING_CHANGED
        .wait_timeout_while(count, std::time::Duration::from_millis(500), |count| *count < (tag % 10) as u32)
        .unwrap();
    let mut again = owned_array(fake(), tag + 1);
    assert_eq!(release_after(&mut again, CAI_STREAM_PER_THREAD).0, CAI_OK);
    let (status, _, message) = pending(CAI_PENDING_WAIT);
    assert_eq!(status, CAI_OK, "{message}");
    if released_at(tag - 1).is_some() && released_at(tag + 1).is_some() {
        RELEASED.lock().unwrap().push((tag + 1000, fake().now()));
    }
    // SAFETY: as above.
    unsafe { note_release(array) };
}

#[test]
fn a_waiting_drain_inside_a_release_neither_deadlocks_nor_skips_what_is_queued_fake_driver() {
    let _turn = one_at_a_time();
    let f = fake();
    f.begin(0);
    let (s, idle) = (f.stream(0), f.stream(0));
    *DRAINING.lock().unwrap() = 0;
    // In one thread: the pass keeps 940 (its kernel runs) and runs 941, whose drain must wait
    // for 940 and run the 942 it queued, though its own pass has not finished.
    f.launch_slow(s, 40);
    let mut earlier = owned_array(f, 940);
    assert_eq!(release_after(&mut earlier, s).0, CAI_OK);
    let mut draining = owned_array(f, 941);
    draining.release = Some(draining_release);
    assert_eq!(release_after(&mut draining, idle).0, CAI_OK);
    assert!(released_at(941).is_some() && released_at(1941).is_some(), "the nested drain ran 940 and 942");

    // Two threads at once, each in a release that drains (both begun, the tags' 2): neither
    // may wait for the release the other runs, which waits for it.
    *DRAINING.lock().unwrap() = 0;
    let threads: Vec<_> = [952, 962]
        .into_iter()
        .map(|tag| {
            let mut earlier = owned_array(f, tag - 1);
            assert_eq!(release_after(&mut earlier, idle).0, CAI_OK);
            std::thread::spawn(move || {
                fake().begin(0);
                let mut draining = owned_array(fake(), tag);
                draining.release = Some(draining_release);
                release_after(&mut draining, idle).0
            })
        })
        .collect();
    let (done, finished) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = done.send(threads.into_iter().map(|thread| thread.join().ok()).collect::<Vec<_>>());
    });
    let statuses =
        finished.recv_timeout(std::time::Duration::from_secs(20)).expect("the two drains deadlocked");
    assert_eq!(statuses, [Some(CAI_OK), Some(CAI_OK)]);
    assert!(released_at(952).is_some() && released_at(962).is_some());
    assert_eq!(pending(CAI_PENDING_WAIT).1, 0);
}

fn import_nothing_to_sync(f: &Fake) -> (i32, String) {
    let mut a = array(&[4], "<f4");
    a.data = f.alloc(4096, MEMORY_DEVICE, 0, 0);
    let mut e = blank_error();
    // SAFETY: live values of the types the function takes (default options).
    let status = unsafe { cai_import(&a, std::ptr::null(), null_mut(), &mut e) };
    (status, if status == CAI_OK { String::new() } else { e.message_str() })
}

#[test]
fn a_later_import_or_sync_runs_the_releases_that_are_due_fake_driver() {
    let _turn = one_at_a_time();
    let f = fake();
    f.begin(0);
    let s = f.stream(0);
    // Nothing queued: an import asks the driver nothing about events.
    assert_eq!(import_nothing_to_sync(f).0, CAI_OK);
    assert!(!f.log().contains("cuEvent"), "{}", f.log());

    let kernel = f.launch_slow(s, -1);
    let mut a = owned_array(f, 931);
    assert_eq!(release_after(&mut a, s).0, CAI_OK);
    assert_eq!(import_nothing_to_sync(f).0, CAI_OK);
    assert_eq!(released_at(931), None, "the kernel still reads the array");
    f.finish_slow(kernel);
    assert_eq!(import_nothing_to_sync(f).0, CAI_OK);
    assert!(released_at(931).is_some(), "the import ran the release that was due");

    // cai_sync (a NULL-stream array: nothing to sync) polls too.
    let kernel = f.launch_slow(s, -1);
    let mut b = owned_array(f, 932);
    assert_eq!(release_after(&mut b, s).0, CAI_OK);
    f.finish_slow(kernel);
    let synced = array(&[4], "<f4");
    let mut e = blank_error();
    // SAFETY: live values of the types the function takes (default options).
    assert_eq!(unsafe { cai_sync(&synced, std::ptr::null(), &mut e) }, CAI_OK, "{}", e.message_str());
    assert!(released_at(932).is_some(), "the sync ran the release that was due");

    // A failed query met by an import's poll is not the import's failure; the release runs.
    let kernel = f.launch_slow(s, -1);
    let mut c = owned_array(f, 933);
    assert_eq!(release_after(&mut c, s).0, CAI_OK);
    f.fail("cuEventQuery", CUDA_ERROR_LAUNCH_FAILED);
    assert_eq!(import_nothing_to_sync(f), (CAI_OK, String::new()));
    assert!(released_at(933).is_some());
    f.finish_slow(kernel);
    f.begin(0);
    assert_eq!(pending(CAI_PENDING_POLL), (CAI_OK, 0, String::new()), "the failure was not kept");
}
