//! No OpenCL library (CAI_OPENCL_LIBRARY names a missing file): an OpenCL array validates,
//! imports when nothing needs the library, and is CAI_ERROR_NO_DRIVER naming the library when
//! a bounds check or a sync does. No driver of any kind is used.

mod common;

use std::ptr::null_mut;

use cai::*;
use common::*;

fn without_opencl() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| std::env::set_var("CAI_OPENCL_LIBRARY", "/nonexistent/libOpenCL.so.1"));
}

fn opencl_array() -> CaiArray {
    let mut a = array(&[4, 8], "<f4");
    a.memory = CAI_MEMORY_OPENCL;
    a.data = 0x1234_5000; // a cl_mem handle, never dereferenced by libcai
    a.byte_offset = 64;
    a
}

#[test]
fn an_opencl_array_needs_the_library_only_for_a_check_or_a_sync_no_driver() {
    without_opencl();
    let a = opencl_array();
    assert_eq!(validate(&a).0, CAI_OK);
    let mut e = blank_error();
    assert_eq!(
        // SAFETY: every pointer is NULL or points to a live value of the type the function takes.
        unsafe { cai_import(&a, std::ptr::null(), null_mut(), &mut e) },
        CAI_OK,
        "default check skipped quietly"
    );

    let always = CaiImportOptions { pointer_check: CAI_POINTER_CHECK_ALWAYS, ..Default::default() };
    // SAFETY: every pointer is NULL or points to a live value of the type the function takes.
    assert_eq!(unsafe { cai_import(&a, &always, null_mut(), &mut e) }, CAI_ERROR_NO_DRIVER);
    assert!(
        e.message_str().contains("OpenCL library") && e.message_str().contains("/nonexistent"),
        "{}",
        e.message_str()
    );

    let mut streamed = a;
    streamed.stream = 0x9000; // the producer's cl_command_queue
    let options = CaiImportOptions { consumer_stream: 0xa000, ..Default::default() };
    // SAFETY: every pointer is NULL or points to a live value of the type the function takes.
    assert_eq!(unsafe { cai_import(&streamed, &options, null_mut(), &mut e) }, CAI_ERROR_NO_DRIVER);
    let none = CaiImportOptions { consumer_stream: 0xa000, sync_mode: CAI_SYNC_NONE, ..Default::default() };
    assert_eq!(
        // SAFETY: every pointer is NULL or points to a live value of the type the function takes.
        unsafe { cai_import(&streamed, &none, null_mut(), &mut e) },
        CAI_OK,
        "no sync asked: nothing to load"
    );
}

#[test]
fn opencl_fields_are_validated_without_the_library_no_driver() {
    without_opencl();
    let mut a = opencl_array();
    a.stream_kind = 2;
    assert_rejected(&a, CAI_ERROR_INVALID_ARGUMENT, "stream_kind is 2");
    let mut a = opencl_array();
    a.memory = 7;
    assert_rejected(&a, CAI_ERROR_INVALID_ARGUMENT, "memory is 7");
    let mut a = with_strides(opencl_array(), &[-128, 4]);
    a.byte_offset = 64; // row 1 would start 64 bytes before the buffer
    assert_rejected(&a, CAI_ERROR_OUT_OF_BOUNDS, "outside the buffer's start");
    let mut a = opencl_array();
    a.byte_offset = u64::MAX;
    assert_rejected(&a, CAI_ERROR_OUT_OF_BOUNDS, "63 bits");
    let mut a = array(&[4], "<f4");
    a.stream_kind = 1;
    assert_rejected(&a, CAI_ERROR_INVALID_ARGUMENT, "stream_kind is 1 for CUDA memory");
}
