//! A failing cuEventCreate (fake CUDA driver, a test double), in a test binary of its own so
//! that the process-wide event pool is empty and the driver must be asked for an event.

mod common;

use std::ptr::null_mut;

use cai::ffi::cai_import;
use cai::import::CaiImportOptions;
use cai::status::CAI_ERROR_DRIVER;
use common::fake_driver::*;
use common::*;

#[test]
fn failing_event_create_is_cai_error_driver_and_pops_the_context() {
    let f = fake();
    f.begin(0);
    let mut a = array(&[4], "<f4");
    a.data = f.alloc(64, MEMORY_DEVICE, 1, 0);
    a.stream = f.stream(1);
    f.fail("cuEventCreate", CUDA_ERROR_LAUNCH_FAILED);
    let options = CaiImportOptions { consumer_stream: f.stream(0), ..Default::default() };
    let mut e = blank_error();
    assert_eq!(cai_import(&a, &options, null_mut(), &mut e), CAI_ERROR_DRIVER);
    assert!(e.message_str().contains("cuEventCreate"), "{}", e.message_str());
    assert_eq!(e.cu_result, CUDA_ERROR_LAUNCH_FAILED);
    assert_eq!(f.context_depth(), 1, "the pushed device-1 context was popped");
    assert_eq!(f.live_events(), 0);
}
