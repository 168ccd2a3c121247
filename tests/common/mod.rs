//! Helpers shared by the integration tests: arrays built as a C caller would build them.
#![allow(dead_code)]

pub mod fake_driver;

use cai::*;

pub const DATA: u64 = 0x7f00_0000_1000;

/// A valid version-3 array of `typestr` with this shape, C-contiguous, strides not given.
pub fn array(shape: &[i64], typestr: &str) -> CaiArray {
    let mut a = CaiArray::zeroed();
    a.version = 3;
    a.ndim = shape.len() as i32;
    a.shape[..shape.len()].copy_from_slice(shape);
    assert!(a.set_typestr(typestr));
    a.data = DATA;
    a
}

pub fn with_strides(mut a: CaiArray, strides: &[i64]) -> CaiArray {
    a.strides_given = 1;
    a.strides[..strides.len()].copy_from_slice(strides);
    a
}

pub fn blank_error() -> CaiError {
    CaiError { code: 0, driver_result: 0, message: [0; cai::CAI_ERROR_MESSAGE_CAPACITY] }
}

/// cai_validate's status and message.
pub fn validate(a: &CaiArray) -> (i32, String) {
    let mut e = blank_error();
    // SAFETY: every pointer is NULL or points to a live value of the type the function takes.
    let status = unsafe { cai::cai_validate(a, &mut e) };
    (status, if status == 0 { String::new() } else { e.message_str() })
}

pub fn assert_rejected(a: &CaiArray, status: i32, message_part: &str) {
    let (got, message) = validate(a);
    assert_eq!(got, status, "status for {message}");
    assert!(message.contains(message_part), "message {message:?} lacks {message_part:?}");
}

pub fn layout(a: &CaiArray) -> CaiLayout {
    let mut out = CaiLayout::default();
    let mut e = blank_error();
    // SAFETY: every pointer is NULL or points to a live value of the type the function takes.
    let status = unsafe { cai::cai_layout(a, &mut out, &mut e) };
    assert_eq!(status, 0, "{}", e.message_str());
    out
}

pub fn export(a: &mut CaiArray, version: i32) -> (i32, String) {
    let options = cai::CaiExportOptions { version, ..Default::default() };
    let mut e = blank_error();
    // SAFETY: every pointer is NULL or points to a live value of the type the function takes.
    let status = unsafe { cai::cai_export(a, &options, &mut e) };
    (status, if status == 0 { String::new() } else { e.message_str() })
}

pub fn typestr_of(a: &CaiArray) -> String {
    String::from_utf8(a.typestr_bytes().unwrap().to_vec()).unwrap()
}
