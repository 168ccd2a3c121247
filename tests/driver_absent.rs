//! No CUDA driver (CAI_CUDA_DRIVER names a missing file): pure functions work, a device
//! function that needs the driver says CAI_ERROR_NO_DRIVER with the loader's reason.

mod common;

use std::ptr::null_mut;

use cai::*;

use common::*;

fn without_driver() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| std::env::set_var("CAI_CUDA_DRIVER", "/nonexistent/libcuda.so.1"));
}

#[test]
fn driver_status_is_no_driver_with_the_dlopen_message() {
    without_driver();
    let mut e = blank_error();
    let mut version = -1;
    // SAFETY: every pointer is NULL or points to a live value of the type the function takes.
    assert_eq!(unsafe { cai_driver_status(&mut version, &mut e) }, CAI_ERROR_NO_DRIVER);
    assert_eq!(version, -1, "output untouched on failure");
    assert!(e.message_str().contains("/nonexistent/libcuda.so.1"), "{}", e.message_str());
    assert!(e.message_str().contains("No such file"), "{}", e.message_str());
}

#[test]
fn import_with_nothing_to_sync_succeeds_without_a_driver() {
    without_driver();
    let mut info = cai::CaiPointerInfo { checked: 7, ..Default::default() };
    // SAFETY: every pointer is NULL or points to a live value of the type the function takes.
    assert_eq!(unsafe { cai_import(&array(&[4], "<f4"), std::ptr::null(), &mut info, null_mut()) }, CAI_OK);
    assert_eq!(info.checked, 0, "the default pointer check is skipped without a driver");
}

#[test]
fn an_explicit_pointer_check_without_a_driver_is_no_driver() {
    without_driver();
    let options = CaiImportOptions { pointer_check: CAI_POINTER_CHECK_ALWAYS, ..Default::default() };
    assert_eq!(
        // SAFETY: every pointer is NULL or points to a live value of the type the function takes.
        unsafe { cai_import(&array(&[4], "<f4"), &options, null_mut(), null_mut()) },
        CAI_ERROR_NO_DRIVER
    );
    let mut empty = array(&[0], "<f4");
    empty.data = 0;
    assert_eq!(
        // SAFETY: every pointer is NULL or points to a live value of the type the function takes.
        unsafe { cai_import(&empty, &options, null_mut(), null_mut()) },
        CAI_OK,
        "zero-size: nothing to check"
    );
}

#[test]
fn an_import_that_must_sync_without_a_driver_is_no_driver() {
    without_driver();
    let mut a = array(&[4], "<f4");
    a.stream = 1;
    // SAFETY: every pointer is NULL or points to a live value of the type the function takes.
    assert_eq!(unsafe { cai_import(&a, std::ptr::null(), null_mut(), null_mut()) }, CAI_ERROR_NO_DRIVER);
    let off = CaiImportOptions { sync_mode: cai::CAI_SYNC_NONE, ..Default::default() };
    assert_eq!(
        // SAFETY: every pointer is NULL or points to a live value of the type the function takes.
        unsafe { cai_import(&a, &off, null_mut(), null_mut()) },
        CAI_OK,
        "sync turned off: no driver needed"
    );
    // SAFETY: every pointer is NULL or points to a live value of the type the function takes.
    assert_eq!(unsafe { cai_validate(&a, null_mut()) }, CAI_OK, "pure functions keep working");
}
