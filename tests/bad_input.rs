//! Hostile input from C at every entry point: a status and a message, never a crash.

mod common;

use std::ptr::{null, null_mut};
use std::sync::atomic::{AtomicUsize, Ordering};

use cai::*;
use common::*;

#[test]
fn null_arguments_are_null_argument_errors_naming_the_argument() {
    let mut e = blank_error();
    // SAFETY: every pointer is NULL (the refusal under test) or points to a live value of its type.
    assert_eq!(unsafe { cai_validate(null(), &mut e) }, CAI_ERROR_NULL_ARGUMENT);
    assert!(e.message_str().contains("array is NULL"), "{}", e.message_str());
    // SAFETY: every pointer is NULL (the refusal under test) or points to a live value of its type.
    assert_eq!(unsafe { cai_layout(null(), null_mut(), null_mut()) }, CAI_ERROR_NULL_ARGUMENT);
    let a = array(&[2], "<f4");
    // SAFETY: every pointer is NULL (the refusal under test) or points to a live value of its type.
    assert_eq!(unsafe { cai_layout(&a, null_mut(), &mut e) }, CAI_ERROR_NULL_ARGUMENT);
    assert!(e.message_str().contains("layout is NULL"));
    // SAFETY: every pointer is NULL (the refusal under test) or points to a live value of its type.
    assert_eq!(unsafe { cai_export(null_mut(), null(), null_mut()) }, CAI_ERROR_NULL_ARGUMENT);
    // SAFETY: every pointer is NULL (the refusal under test) or points to a live value of its type.
    assert_eq!(unsafe { cai_release(null_mut(), null_mut()) }, CAI_ERROR_NULL_ARGUMENT);
    let mut d = CaiDtype { itemsize: 0, kind: 0, byteorder: 0 };
    // SAFETY: every pointer is NULL (the refusal under test) or points to a live value of its type.
    assert_eq!(unsafe { cai_typestr_parse(null(), &mut d, null_mut()) }, CAI_ERROR_NULL_ARGUMENT);
    assert_eq!(
        // SAFETY: every pointer is NULL (the refusal under test) or points to a live value of its type.
        unsafe { cai_typestr_parse(c"<f4".as_ptr(), null_mut(), null_mut()) },
        CAI_ERROR_NULL_ARGUMENT
    );
}

#[test]
fn outputs_are_untouched_on_failure() {
    let a = array(&[-1], "<f4");
    let mut l = CaiLayout { element_count: 77, ..Default::default() };
    // SAFETY: every pointer is NULL (the refusal under test) or points to a live value of its type.
    assert_eq!(unsafe { cai_layout(&a, &mut l, null_mut()) }, CAI_ERROR_INVALID_SHAPE);
    assert_eq!(l.element_count, 77);
    let mut d = CaiDtype { itemsize: 5, kind: 0, byteorder: 0 };
    // SAFETY: every pointer is NULL (the refusal under test) or points to a live value of its type.
    assert_eq!(unsafe { cai_typestr_parse(c"<f".as_ptr(), &mut d, null_mut()) }, CAI_ERROR_INVALID_TYPESTR);
    assert_eq!(d.itemsize, 5);
}

#[test]
fn garbage_flags_and_reserved_words_are_rejected() {
    let mut a = array(&[2], "<f4");
    a.readonly = 2;
    assert_rejected(&a, CAI_ERROR_INVALID_DATA, "readonly is 2");
    let mut a = array(&[2], "<f4");
    a.strides_given = 0xdead;
    assert_rejected(&a, CAI_ERROR_INVALID_STRIDES, "strides_given is 57005");
    let mut a = array(&[2], "<f4");
    a.reserved[0] = 1;
    assert_rejected(&a, CAI_ERROR_INVALID_ARGUMENT, "reserved[0]");
    let mut a = array(&[2], "<f4");
    a.reserved_half = 1;
    assert_rejected(&a, CAI_ERROR_INVALID_ARGUMENT, "reserved_half[0]");
    let mut a = array(&[2], "<f4");
    let options = cai::CaiExportOptions { version: 3, reserved: [0, 0, 9, 0, 0], ..Default::default() };
    // SAFETY: every pointer is NULL (the refusal under test) or points to a live value of its type.
    assert_eq!(unsafe { cai_export(&mut a, &options, null_mut()) }, CAI_ERROR_INVALID_ARGUMENT);
    for options in [
        cai::CaiExportOptions { check_pointer: 2, ..Default::default() },
        cai::CaiExportOptions { per_thread_default_stream: 7, ..Default::default() },
    ] {
        let mut e = blank_error();
        assert_eq!(
            // SAFETY: every pointer is NULL (the refusal under test) or points to a live value of its type.
            unsafe { cai_export(&mut a, &options, &mut e) },
            CAI_ERROR_INVALID_ARGUMENT,
            "{options:?}"
        );
        assert!(e.message_str().contains("it must be 0 or 1"), "{}", e.message_str());
    }
}

#[test]
fn a_mask_pointing_to_itself_or_a_cycle_is_invalid_mask() {
    let mut a = array(&[2], "<f4");
    a.mask = &a;
    assert_rejected(&a, CAI_ERROR_INVALID_MASK, "itself");

    // a -> b -> a: caught by the depth limit.
    let mut pair = [array(&[2], "<f4"), array(&[2], "|b1")];
    let base = pair.as_mut_ptr();
    // SAFETY: `base` points at the two live arrays of `pair`.
    unsafe {
        (*base).mask = base.add(1);
        (*base.add(1)).mask = base;
    }
    assert_rejected(&pair[0], CAI_ERROR_INVALID_MASK, "CAI_MAX_MASK_DEPTH");
}

#[test]
fn a_chain_of_cai_max_mask_depth_masks_is_accepted_and_one_more_is_not() {
    // chain[0] is the array; chain[k] is the mask k levels below it.
    let chain_of = |masks: usize| {
        let mut chain: Vec<CaiArray> =
            (0..=masks).map(|k| array(&[2], if k == 0 { "<f4" } else { "|b1" })).collect();
        let base = chain.as_mut_ptr();
        for k in 0..masks {
            // SAFETY: both indexes are inside `chain`, which is not moved afterwards.
            unsafe { (*base.add(k)).mask = base.add(k + 1) };
        }
        chain
    };
    let depth = cai::CAI_MAX_MASK_DEPTH;
    assert_eq!(validate(&chain_of(depth)[0]).0, CAI_OK, "{depth} masks, as the header says");
    assert_rejected(&chain_of(depth + 1)[0], CAI_ERROR_INVALID_MASK, "CAI_MAX_MASK_DEPTH");
}

#[test]
fn arbitrary_bytes_as_an_array_never_crash() {
    // Deterministic xorshift bytes reinterpreted as a CaiArray, pointers cleared as the API
    // requires (NULL or valid). Every outcome must be a defined status.
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    for _ in 0..20_000 {
        let mut bytes = [0u8; std::mem::size_of::<CaiArray>()];
        for b in bytes.iter_mut() {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            *b = state as u8;
        }
        // SAFETY: every field is an integer, an array of them, a raw pointer or a nullable
        // function pointer; the pointers are cleared before anything reads them.
        let mut a: CaiArray = unsafe { std::mem::transmute(bytes) };
        a.mask = null();
        a.descr = null();
        a.release = None;
        // Bias toward valid values so that deeper rules run too.
        a.version = a.version.rem_euclid(5);
        a.ndim = a.ndim.rem_euclid(70);
        a.readonly &= 1;
        a.strides_given &= 1;
        a.descr_count = 0;
        if state.is_multiple_of(2) {
            a.reserved = [0; CAI_ARRAY_RESERVED_WORDS];
            a.abi_version = CAI_ABI_VERSION;
            a.memory &= 1;
        }
        // SAFETY: every pointer is NULL (the refusal under test) or points to a live value of its type.
        let status = unsafe { cai_validate(&a, null_mut()) };
        assert!(status == CAI_OK || cai::Status::from_code(status).is_some(), "status {status}");
        assert_ne!(status, CAI_ERROR_PANIC);
    }
}

static RELEASES: AtomicUsize = AtomicUsize::new(0);

unsafe extern "C" fn count_release(array: *mut CaiArray) {
    RELEASES.fetch_add(1, Ordering::SeqCst);
    // SAFETY: cai_release passes the live array it releases.
    assert_eq!(unsafe { (*array).owner } as usize, 0xabc);
}

#[test]
fn release_runs_exactly_once_and_never_on_a_borrowed_array() {
    let mut a = array(&[2], "<f4");
    a.owner = 0xabc as *mut _;
    a.release = Some(count_release);
    // SAFETY: every pointer is NULL (the refusal under test) or points to a live value of its type.
    assert_eq!(unsafe { cai_release(&mut a, null_mut()) }, CAI_OK);
    // SAFETY: every pointer is NULL (the refusal under test) or points to a live value of its type.
    assert_eq!(unsafe { cai_release(&mut a, null_mut()) }, CAI_OK);
    assert_eq!(RELEASES.load(Ordering::SeqCst), 1);
    assert!(a.release.is_none());
    let mut borrowed = array(&[2], "<f4");
    // SAFETY: every pointer is NULL (the refusal under test) or points to a live value of its type.
    assert_eq!(unsafe { cai_release(&mut borrowed, null_mut()) }, CAI_OK);
    assert_eq!(RELEASES.load(Ordering::SeqCst), 1);
}

#[test]
fn status_strings_name_every_code() {
    // SAFETY: cai_status_string returns a static NUL-terminated string.
    let name = |code| unsafe { std::ffi::CStr::from_ptr(cai_status_string(code)) }.to_str().unwrap();
    assert_eq!(name(CAI_OK), "CAI_OK");
    assert_eq!(name(CAI_ERROR_OVERFLOW), "CAI_ERROR_OVERFLOW");
    assert_eq!(name(-5), "CAI_ERROR_UNKNOWN");
    assert_eq!(name(1000), "CAI_ERROR_UNKNOWN");
    // SAFETY: cai_library_version returns a static NUL-terminated string.
    let version = unsafe { std::ffi::CStr::from_ptr(cai_library_version()) }.to_str().unwrap();
    assert_eq!(version, env!("CARGO_PKG_VERSION"));
}

#[test]
fn an_extent_wider_than_i64_max_is_valid_and_reported_in_bounds() {
    // Found by fuzz_validate (fuzz/corpus/validate/regression_extent_wider_than_i64): a stride
    // of i64::MIN from a pointer above 2^63 reaches 2^63 bytes below it. Valid (inside the
    // address space); its width only fits in unsigned arithmetic.
    let mut a = with_strides(array(&[2], "<f4"), &[i64::MIN]);
    a.data = (1u64 << 63) + 0x1000;
    let l = layout(&a);
    assert_eq!((l.extent_begin, l.extent_end), (i64::MIN, 4));
    assert_eq!((l.extent_end as u64).wrapping_sub(l.extent_begin as u64), (1u64 << 63) + 4);
    a.data = (1u64 << 63) - 1; // one byte short: the first element would sit below address 0
    assert_rejected(&a, CAI_ERROR_OVERFLOW, "wraps around the address space");
}
