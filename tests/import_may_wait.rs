//! When a binding lets go of its interpreter's lock around an import
//! (`cai::binding::import_may_wait`), on the fake CUDA driver (a test double): where the host
//! may wait, a blocking sync or the driver's first load, and never for a stream-ordered sync
//! on a loaded driver, whose calls only enqueue work (letting go costs more than they do).

mod common;

use cai::binding::import::import_may_wait;
use cai::*;
use common::fake_driver::*;
use common::*;

#[test]
fn only_a_host_wait_or_the_drivers_first_load_lets_go_fake_driver() {
    let f = fake();
    f.begin(0);
    let mut a = array(&[4], "<f4");
    a.data = f.alloc(64, MEMORY_DEVICE, 0, 0);
    a.stream = f.stream(0);
    let options = |sync_mode, consumer_stream, pointer_check| CaiImportOptions {
        consumer_stream,
        sync_mode,
        pointer_check,
        ..Default::default()
    };
    let consumer = f.stream(0);
    let ordered = options(CAI_SYNC_STREAM_ORDERED, consumer, CAI_POINTER_CHECK_NEVER);
    let none = options(CAI_SYNC_NONE, 0, CAI_POINTER_CHECK_NEVER);
    let checked = options(CAI_SYNC_NONE, 0, CAI_POINTER_CHECK_ALWAYS);
    // Before libcai has loaded the driver, anything that needs it may wait for the load.
    assert!(import_may_wait(&a, &ordered));
    assert!(import_may_wait(&a, &checked));
    assert!(!import_may_wait(&a, &none));

    // SAFETY: every pointer is NULL or points to a live value of the type the function takes.
    assert_eq!(unsafe { cai_import(&a, &ordered, std::ptr::null_mut(), std::ptr::null_mut()) }, CAI_OK);
    assert!(!import_may_wait(&a, &ordered), "a stream-ordered sync only enqueues");
    assert!(!import_may_wait(&a, &checked));
    assert!(!import_may_wait(&a, &options(CAI_SYNC_STREAM_ORDERED, a.stream, CAI_POINTER_CHECK_NEVER)));
    assert!(import_may_wait(&a, &options(CAI_SYNC_BLOCKING, consumer, CAI_POINTER_CHECK_NEVER)));
    // The default mode without a consumer stream waits on the host.
    assert!(import_may_wait(&a, &options(CAI_SYNC_DEFAULT, 0, CAI_POINTER_CHECK_NEVER)));
}
