//! A driver whose cuInit fails (fake CUDA driver, a test double): NO_DRIVER with the CUresult.

mod common;

use cai::*;
use common::*;

#[test]
fn failing_cuinit_is_no_driver_naming_the_result() {
    let f = fake_driver::fake();
    f.fail("cuInit", 100); // CUDA_ERROR_NO_DEVICE, before the driver's first use
    let mut e = blank_error();
    // SAFETY: every pointer is NULL or points to a live value of the type the function takes.
    assert_eq!(unsafe { cai_driver_status(std::ptr::null_mut(), &mut e) }, CAI_ERROR_NO_DRIVER);
    assert_eq!(e.driver_result, 100);
    assert!(e.message_str().contains("cuInit failed"), "{}", e.message_str());
}
