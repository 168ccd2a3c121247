//! CAI_ARRAY_INTERFACE_SYNC=0 (row 45) against the fake CUDA driver, a test double: the
//! default mode makes no sync call at all; an explicit mode still syncs.

mod common;

use cai::*;
use common::fake_driver::*;
use common::*;

#[test]
fn row_45_sync_env_zero_turns_the_default_sync_off() {
    std::env::set_var("CAI_ARRAY_INTERFACE_SYNC", "0");
    let f = fake();
    f.begin(0);
    let mut a = array(&[4], "<f4");
    a.data = f.alloc(64, MEMORY_DEVICE, 0, 0);
    a.stream = f.stream(0);
    let options = CaiImportOptions { consumer_stream: f.stream(0), ..Default::default() };
    // SAFETY: every pointer is NULL or points to a live value of the type the function takes.
    assert_eq!(unsafe { cai_import(&a, &options, std::ptr::null_mut(), std::ptr::null_mut()) }, CAI_OK);
    let log = f.log();
    assert!(!log.contains("cuEvent") && !log.contains("cuStream"), "{log}");
    let blocking = CaiImportOptions { sync_mode: CAI_SYNC_BLOCKING, ..options };
    // SAFETY: every pointer is NULL or points to a live value of the type the function takes.
    assert_eq!(unsafe { cai_import(&a, &blocking, std::ptr::null_mut(), std::ptr::null_mut()) }, CAI_OK);
    assert!(f.log().contains("cuStreamSynchronize"), "an explicit mode is honoured");
}
