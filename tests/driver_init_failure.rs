//! A driver whose cuInit fails (fake CUDA driver, a test double): NO_DRIVER with the CUresult.

mod common;

use cai::ffi::cai_driver_status;
use cai::status::CAI_ERROR_NO_DRIVER;
use common::*;

#[test]
fn failing_cuinit_is_no_driver_naming_the_result() {
    std::env::set_var("FAKE_CUDA_INIT_RESULT", "100"); // CUDA_ERROR_NO_DEVICE
    let _ = fake_driver::fake();
    let mut e = blank_error();
    assert_eq!(cai_driver_status(std::ptr::null_mut(), &mut e), CAI_ERROR_NO_DRIVER);
    assert_eq!(e.cu_result, 100);
    assert!(e.message_str().contains("cuInit failed"), "{}", e.message_str());
}
