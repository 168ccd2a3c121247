//! docs/conformance.md rows that a CaiArray can express, checked through the C ABI functions.
//! Rows about the dict's Python types (2, 5-8, 17, 40, 41) are the Python binding's to check.

mod common;

use cai::binding::rules::stream_for_version;
use cai::*;
use common::*;

#[test]
fn row_01_minimal_v3_descriptor_is_accepted_and_c_contiguous() {
    let a = array(&[4], "<f4");
    assert_eq!(validate(&a), (CAI_OK, String::new()));
    let l = layout(&a);
    assert_eq!((l.element_count, l.nbytes, l.c_contiguous), (4, 16, 1));
    assert_eq!(stream_for_version(&a), CAI_STREAM_NONE, "no stream: no sync");
}

#[test]
fn row_03_versions_0_to_2_use_their_own_rules() {
    for version in 0..=2 {
        let mut a = array(&[4], "<f4");
        a.version = version;
        assert_eq!(validate(&a).0, CAI_OK, "version {version}");
        a.stream = 7;
        assert_eq!(validate(&a).0, CAI_OK, "a pre-v3 stream is ignored, not an error");
        assert_eq!(stream_for_version(&a), CAI_STREAM_NONE);
    }
    let mask = array(&[4], "|b1");
    let mut v0 = array(&[4], "<f4");
    v0.version = 0;
    v0.mask = &mask;
    assert_rejected(&v0, CAI_ERROR_INVALID_MASK, "version 0");
    v0.version = 1;
    assert_eq!(validate(&v0).0, CAI_OK, "masks came in version 1");
}

#[test]
fn row_04_unknown_versions_are_rejected_naming_the_value() {
    for version in [4, 5, -1, i32::MIN, i32::MAX] {
        let mut a = array(&[4], "<f4");
        a.version = version;
        assert_rejected(&a, CAI_ERROR_INVALID_VERSION, &format!("version {version}"));
    }
}

#[test]
fn row_09_zero_d_array_has_one_element() {
    let a = array(&[], "<f8");
    assert_eq!(validate(&a).0, CAI_OK);
    let l = layout(&a);
    assert_eq!((l.element_count, l.nbytes, l.extent_begin, l.extent_end), (1, 8, 0, 8));
    assert_eq!(validate(&with_strides(array(&[], "<f8"), &[])).0, CAI_OK, "strides ()");
}

#[test]
fn row_10_negative_extents_are_invalid_shape() {
    assert_rejected(&array(&[3, -1], "<f4"), CAI_ERROR_INVALID_SHAPE, "shape[1] is -1");
}

#[test]
fn row_11_ndim_beyond_the_limit_is_invalid_shape_naming_it() {
    let mut a = array(&[2], "<f4");
    for ndim in [65, -1, i32::MAX] {
        a.ndim = ndim;
        assert_rejected(&a, CAI_ERROR_INVALID_SHAPE, "CAI_MAX_NDIM");
    }
    let a = array(&[1; 64], "<f4");
    assert_eq!(validate(&a).0, CAI_OK, "64 dimensions are allowed");
}

#[test]
fn row_12_absent_and_explicit_c_strides_are_the_same_layout_and_export_as_none() {
    let absent = array(&[2, 3], "<f4");
    let mut explicit = with_strides(array(&[2, 3], "<f4"), &[12, 4]);
    assert_eq!(layout(&absent), layout(&explicit));
    assert_eq!(export(&mut explicit, 3).0, CAI_OK);
    assert_eq!(explicit.strides_given, 0, "C-contiguous strides export as None");
    assert_eq!(&explicit.strides[..2], &[0, 0]);
}

#[test]
fn row_13_f_order_is_f_contiguous_not_c() {
    let mut a = with_strides(array(&[2, 3], "<f4"), &[4, 8]);
    let l = layout(&a);
    assert_eq!((l.c_contiguous, l.f_contiguous), (0, 1));
    assert_eq!(export(&mut a, 3).0, CAI_OK);
    assert_eq!(a.strides_given, 1, "F strides are kept on export");
}

#[test]
fn row_14_every_other_element_is_strided_not_contiguous() {
    let l = layout(&with_strides(array(&[5], "<f4"), &[8]));
    assert_eq!((l.c_contiguous, l.f_contiguous), (0, 0));
    assert_eq!((l.extent_begin, l.extent_end), (0, 36));
}

#[test]
fn row_15_negative_strides_extend_below_the_pointer() {
    // a[::-1, :] of a 3x4 float32: pointer at row 2.
    let l = layout(&with_strides(array(&[3, 4], "<f4"), &[-16, 4]));
    assert_eq!((l.extent_begin, l.extent_end), (-32, 16));
    assert_eq!(l.c_contiguous, 0);
}

#[test]
fn row_16_strides_not_a_multiple_of_the_itemsize_are_accepted_and_reported() {
    let a = with_strides(array(&[4], "<f4"), &[6]);
    assert_eq!(validate(&a).0, CAI_OK);
    assert_eq!(layout(&a).strides_itemsize_aligned, 0);
    assert_eq!(layout(&array(&[4], "<f4")).strides_itemsize_aligned, 1);
}

#[test]
fn row_18_overflowing_sizes_are_rejected_not_wrapped() {
    assert_rejected(&array(&[1 << 32, 1 << 32], "|u1"), CAI_ERROR_OVERFLOW, "shape[1]");
    assert_rejected(&array(&[1 << 60], "<f8"), CAI_ERROR_OVERFLOW, "8-byte items");
    // Empty, yet its C strides would not fit (fuzz_validate's first finding; numpy refuses it).
    assert_rejected(&array(&[0, 9_151_315_542_328_475_648], "<f4"), CAI_ERROR_OVERFLOW, "shape[1]");
    let a = with_strides(array(&[4], "<f4"), &[i64::MAX / 2]);
    assert_rejected(&a, CAI_ERROR_OVERFLOW, "strides[0]");
    let mut near_top = array(&[4], "<f4");
    near_top.data = u64::MAX - 8;
    assert_rejected(&near_top, CAI_ERROR_OVERFLOW, "wraps");
    let mut near_zero = with_strides(array(&[4], "<f4"), &[-4]);
    near_zero.data = 4;
    assert_rejected(&near_zero, CAI_ERROR_OVERFLOW, "wraps");
}

#[test]
fn row_19_size_one_dimensions_carry_any_stride() {
    let l = layout(&with_strides(array(&[1, 4, 1], "<f4"), &[-1000, 4, 3]));
    assert_eq!((l.c_contiguous, l.f_contiguous), (1, 1));
}

#[test]
fn row_20_zero_size_with_null_pointer_is_accepted() {
    let mut a = array(&[0, 3], "<f4");
    a.data = 0;
    assert_eq!(validate(&a).0, CAI_OK);
    let l = layout(&a);
    assert_eq!((l.element_count, l.nbytes, l.extent_begin, l.extent_end), (0, 0, 0, 0));
}

#[test]
fn row_21_zero_size_with_a_pointer_is_accepted_and_exported_as_null() {
    let mut a = array(&[3, 0], "<f4");
    assert_eq!(validate(&a).0, CAI_OK);
    assert_eq!(export(&mut a, 3).0, CAI_OK);
    assert_eq!(a.data, 0);
}

#[test]
fn row_22_null_pointer_with_elements_is_invalid_data() {
    let mut a = array(&[2], "<f4");
    a.data = 0;
    assert_rejected(&a, CAI_ERROR_INVALID_DATA, "data is 0");
}

#[test]
fn row_28_numpy_typestrs_are_accepted_with_numpys_itemsize() {
    for (t, itemsize) in [
        ("|b1", 1),
        ("|i1", 1),
        ("<i2", 2),
        ("<i4", 4),
        ("<i8", 8),
        ("|u1", 1),
        ("<u2", 2),
        ("<u4", 4),
        ("<u8", 8),
        ("<f2", 2),
        ("<f4", 4),
        ("<f8", 8),
        ("<c8", 8),
        ("<c16", 16),
        ("=f4", 4),
        ("f4", 4),
    ] {
        let a = array(&[3], t);
        assert_eq!(validate(&a).0, CAI_OK, "{t}");
        assert_eq!(layout(&a).nbytes, 3 * itemsize, "{t}");
    }
}

#[test]
fn row_29_big_endian_is_a_valid_descriptor_reported_as_such() {
    let a = array(&[3], ">i4");
    assert_eq!(validate(&a).0, CAI_OK);
    let mut d = cai::CaiDtype { itemsize: 0, kind: 0, byteorder: 0 };
    // SAFETY: every pointer is NULL or points to a live value of the type the function takes.
    assert_eq!(unsafe { cai::cai_typestr_parse(c">i4".as_ptr(), &mut d, std::ptr::null_mut()) }, CAI_OK);
    assert_eq!((d.itemsize, d.kind as u8, d.byteorder as u8), (4, b'i', b'>'));
}

#[test]
fn row_30_container_types_are_accepted_with_their_itemsize() {
    for (t, itemsize) in [("<M8[ns]", 8), ("<m8[D]", 8), ("|S5", 5), ("<U3", 12), ("|V2", 2)] {
        assert_eq!(layout(&array(&[1], t)).nbytes, itemsize, "{t}");
    }
}

#[test]
fn row_31_bad_typestrs_are_invalid_typestr_quoting_them() {
    for t in ["|O8", "garbage", "", "<f", "|V0", "|S0", " <f4", "<f4 ", "<i3"] {
        assert_rejected(&array(&[1], "|u1").tap_typestr(t), CAI_ERROR_INVALID_TYPESTR, &format!("{t:?}"));
    }
    let mut unterminated = array(&[1], "<f4");
    unterminated.typestr = [b'f' as _; 32];
    assert_rejected(&unterminated, CAI_ERROR_INVALID_TYPESTR, "no terminating NUL");
}

trait TapTypestr {
    fn tap_typestr(self, t: &str) -> Self;
}
impl TapTypestr for CaiArray {
    fn tap_typestr(mut self, t: &str) -> Self {
        assert!(self.set_typestr(t));
        self
    }
}

#[test]
fn row_32_structured_descr_fields_must_add_up() {
    let fields = [
        CaiField::new("x", "<f4", 0).unwrap(),
        CaiField::new("y", "<f4", 4).unwrap(),
        CaiField::new("id", "<i4", 8).unwrap(),
    ];
    let mut a = array(&[10], "|V12");
    a.descr = fields.as_ptr();
    a.descr_count = 3;
    assert_eq!(validate(&a).0, CAI_OK);
    a.descr_count = 2;
    assert_rejected(&a, CAI_ERROR_INVALID_DESCR, "add up to 8");
    a.descr = std::ptr::null();
    assert_rejected(&a, CAI_ERROR_INVALID_DESCR, "NULL");
    a.descr = fields.as_ptr();
    a.descr_count = u32::MAX;
    assert_rejected(&a, CAI_ERROR_INVALID_DESCR, "exceeds the itemsize");
}

#[test]
fn row_33_numpys_default_descr_is_accepted() {
    let field = [CaiField::new("", "<f4", 0).unwrap()];
    let mut a = array(&[10], "<f4");
    a.descr = field.as_ptr();
    a.descr_count = 1;
    assert_eq!(validate(&a).0, CAI_OK);
}

#[test]
fn row_34_no_mask_is_valid() {
    assert!(array(&[4], "<f4").mask.is_null());
    assert_eq!(validate(&array(&[4], "<f4")).0, CAI_OK);
}

#[test]
fn row_35_mask_is_validated_recursively() {
    let mask = array(&[2, 3], "|b1");
    let mut a = array(&[2, 3], "<f4");
    a.mask = &mask;
    assert_eq!(validate(&a).0, CAI_OK);
    let bad_mask = array(&[2, 3], "|O8");
    a.mask = &bad_mask;
    assert_rejected(&a, CAI_ERROR_INVALID_MASK, "mask: typestr \"|O8\"");
}

#[test]
fn row_36_mask_of_another_shape_is_invalid_mask() {
    let mask = array(&[3, 2], "|b1");
    let mut a = array(&[2, 3], "<f4");
    a.mask = &mask;
    assert_rejected(&a, CAI_ERROR_INVALID_MASK, "mask has shape [3, 2] but the array has shape [2, 3]");
}

#[test]
fn row_38_readonly_survives_export() {
    let mut a = array(&[4], "<f4");
    a.readonly = 1;
    assert_eq!(export(&mut a, 3).0, CAI_OK);
    assert_eq!(a.readonly, 1);
    assert_eq!(validate(&a).0, CAI_OK);
}

#[test]
fn row_42_streams_1_and_2_are_kept_as_default_stream_handles() {
    for stream in [1, 2] {
        let mut a = array(&[4], "<f4");
        a.stream = stream;
        assert_eq!(export(&mut a, 3).0, CAI_OK);
        assert_eq!(a.stream, stream);
    }
}

#[test]
fn row_48_export_version_2_drops_the_stream() {
    let mut a = array(&[4], "<f4");
    a.stream = CAI_STREAM_LEGACY;
    assert_eq!(export(&mut a, 2).0, CAI_OK);
    assert_eq!((a.version, a.stream), (2, CAI_STREAM_NONE));
    assert_eq!(export(&mut a, 1).0, CAI_ERROR_INVALID_ARGUMENT, "only 2 and 3 are export versions");
}

#[test]
fn export_writes_numpys_canonical_typestr_and_clears_unused_slots() {
    let mut a = array(&[2], "f4");
    a.shape[5] = 99;
    assert_eq!(export(&mut a, 3).0, CAI_OK);
    assert_eq!(typestr_of(&a), if cfg!(target_endian = "little") { "<f4" } else { ">f4" });
    assert_eq!(a.shape[5], 0);
    assert_eq!(a.version, 3);
}

#[test]
fn export_leaves_the_array_unchanged_when_it_is_invalid() {
    let mut a = array(&[2, -3], "f4");
    let before = format!("{a:?}");
    assert_eq!(export(&mut a, 3).0, CAI_ERROR_INVALID_SHAPE);
    assert_eq!(format!("{a:?}"), before);
}
