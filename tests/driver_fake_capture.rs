//! The fake CUDA driver's model of CUDA graph capture (a test double): NVIDIA's rules and error
//! codes, as the CUDA Programming Guide ("Prohibited and Unhandled Operations", "Invalidation")
//! and the driver API's stream capture functions state them.
//!
//! Captures are process-wide in the fake, as in a driver (the legacy stream of a context is
//! unusable while any stream of it captures), so the tests here take turns.

mod common;

use std::sync::{Mutex, MutexGuard};

use cai::*;

use common::fake_driver::*;

fn one_at_a_time() -> MutexGuard<'static, ()> {
    static TURN: Mutex<()> = Mutex::new(());
    TURN.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
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
