//! The event pool is keyed by the driver's context id, not the CUcontext address (fake CUDA
//! driver, a test double): a context destroyed and re-created at the same address gets new
//! events. In a binary of its own, since re-creating a context breaks other tests' work on it.

mod common;

use std::ptr::null_mut;

use cai::*;
use common::fake_driver::*;
use common::*;

/// Device `device`'s array with work on one of its streams, imported from another of them.
fn stream_ordered_import(f: &Fake, device: i32) -> (i32, CaiError) {
    let mut a = array(&[4], "<f4");
    a.data = f.alloc(64, MEMORY_DEVICE, device, 0);
    a.stream = f.stream(device);
    let options = CaiImportOptions { consumer_stream: f.stream(device), ..Default::default() };
    let mut e = blank_error();
    // SAFETY: every pointer is NULL or points to a live value of the type the function takes.
    (unsafe { cai_import(&a, &options, null_mut(), &mut e) }, e)
}

fn event_creations(log: &str) -> usize {
    log.lines().filter(|l| l.starts_with("cuEventCreate")).count()
}

#[test]
fn a_context_re_created_at_the_same_address_never_gets_the_old_contexts_events_fake_driver() {
    let f = fake();
    f.begin(0);
    let (status, e) = stream_ordered_import(f, 0);
    assert_eq!(status, CAI_OK, "{}", e.message_str());
    assert_eq!(event_creations(&f.log()), 1);

    f.begin(0);
    assert_eq!(stream_ordered_import(f, 0).0, CAI_OK);
    assert_eq!(event_creations(&f.log()), 0, "the idle event of the same context is reused");

    f.recreate_context(0);
    f.begin(0);
    let (status, e) = stream_ordered_import(f, 0);
    assert_eq!(status, CAI_OK, "an event of the destroyed context was handed out: {}", e.message_str());
    assert_eq!(event_creations(&f.log()), 1, "the new context gets an event of its own");
}

#[test]
fn failing_context_id_query_is_cai_error_driver_naming_it_fake_driver() {
    let f = fake();
    f.begin(1); // device 0's context is re-created by the test beside this one
    f.fail("cuCtxGetId", CUDA_ERROR_LAUNCH_FAILED);
    let (status, e) = stream_ordered_import(f, 1);
    assert_eq!(status, CAI_ERROR_DRIVER, "{}", e.message_str());
    assert_eq!(e.driver_result, CUDA_ERROR_LAUNCH_FAILED);
    assert!(e.message_str().contains("cuCtxGetId"), "{}", e.message_str());
    assert_eq!(f.context_depth(), 1);
}
