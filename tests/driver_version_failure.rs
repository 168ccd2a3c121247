//! A driver whose cuDriverGetVersion fails (fake CUDA driver, a test double): the load fails
//! with CAI_ERROR_DRIVER naming the call and the CUresult, not CAI_OK with version 0.

mod common;

use cai::*;
use common::*;

#[test]
fn failing_version_query_is_a_driver_error_naming_the_call() {
    let f = fake_driver::fake();
    f.fail("cuDriverGetVersion", 999); // CUDA_ERROR_UNKNOWN, before the driver's first use
    let mut e = blank_error();
    let mut version = -1;
    // SAFETY: every pointer is NULL or points to a live value of the type the function takes.
    assert_eq!(unsafe { cai_driver_status(&mut version, &mut e) }, CAI_ERROR_DRIVER);
    assert_eq!(e.driver_result, 999);
    assert!(e.message_str().contains("cuDriverGetVersion"), "{}", e.message_str());
    assert_eq!(version, -1, "outputs are written only on success");
}
