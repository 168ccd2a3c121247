//! The C-ABI structs: `CaiArray` mirrors the `__cuda_array_interface__` dict key for key.

use std::ffi::c_void;
use std::os::raw::c_char;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::status::{Error, Result, Status};

/// Most dimensions an array may have (NumPy 2, PEP 3118).
pub const CAI_MAX_NDIM: usize = 64;
/// Bytes in a typestr buffer, the terminating NUL included.
pub const CAI_TYPESTR_CAPACITY: usize = 32;
/// Bytes in a descr field name buffer, the terminating NUL included.
pub const CAI_FIELD_NAME_CAPACITY: usize = 64;
/// Deepest chain of masks accepted (a mask of a mask of ...); deeper chains are taken for cycles.
pub const CAI_MAX_MASK_DEPTH: usize = 4;
/// Number of reserved words at the end of `CaiArray`; they must be zero.
pub const CAI_ARRAY_RESERVED_WORDS: usize = 4;

/// The dict's `stream: None` (no synchronization needed).
pub const CAI_STREAM_NONE: u64 = 0;
/// The CUDA legacy default stream.
pub const CAI_STREAM_LEGACY: u64 = 1;
/// The CUDA per-thread default stream.
pub const CAI_STREAM_PER_THREAD: u64 = 2;

/// One field of a structured (`|Vn`) type, as one entry of numpy's `descr` list.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct CaiField {
    /// NUL-terminated field name; empty for padding (numpy writes `''`).
    pub name: [c_char; CAI_FIELD_NAME_CAPACITY],
    /// NUL-terminated typestr of the field.
    pub typestr: [c_char; CAI_TYPESTR_CAPACITY],
    /// Byte offset of the field in the item: the sum of the itemsizes of the fields before it.
    pub offset: u64,
}

/// A device array as described by `__cuda_array_interface__`.
///
/// Zero-initialize it, fill the fields, then call `cai_validate`. Pointers in it (`mask`,
/// `descr`) are borrowed: they stay owned by whoever filled the struct.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct CaiArray {
    /// CAI version the descriptor follows, 0 to 3.
    pub version: i32,
    /// Number of dimensions, 0 to CAI_MAX_NDIM.
    pub ndim: i32,
    /// 1 if the data is read-only (the second item of `data`), else 0.
    pub readonly: u32,
    /// 1 if `strides` holds the strides; 0 for the dict's "absent or None" (C-contiguous).
    pub strides_given: u32,
    /// NUL-terminated numpy typestr, e.g. "<f4".
    pub typestr: [c_char; CAI_TYPESTR_CAPACITY],
    /// Device pointer of the first element; 0 only for zero-size arrays.
    pub data: u64,
    /// 0: no sync needed (`None`); 1: legacy default stream; 2: per-thread default stream; else a CUstream.
    pub stream: u64,
    /// Extent of each of the first `ndim` dimensions.
    pub shape: [i64; CAI_MAX_NDIM],
    /// Byte stride of each of the first `ndim` dimensions, read only when `strides_given` is 1.
    pub strides: [i64; CAI_MAX_NDIM],
    /// NULL, or a borrowed array of the same shape whose elements are true where `data` is valid.
    pub mask: *const CaiArray,
    /// NULL, or `descr_count` borrowed structured-type fields.
    pub descr: *const CaiField,
    /// Number of entries in `descr`; 0 when `descr` is NULL.
    pub descr_count: u64,
    /// Producer's private handle, passed back through `release`; libcai never reads it.
    pub owner: *mut c_void,
    /// NULL for a borrowed array; else called exactly once by `cai_release`.
    pub release: Option<unsafe extern "C" fn(array: *mut CaiArray)>,
    /// Zero; room for later fields without an ABI break.
    pub reserved: [u64; CAI_ARRAY_RESERVED_WORDS],
}

impl CaiArray {
    /// An all-zero array: version 0, 0-d, no typestr. The starting point for filling one in.
    pub const fn zeroed() -> CaiArray {
        CaiArray {
            version: 0,
            ndim: 0,
            readonly: 0,
            strides_given: 0,
            typestr: [0; CAI_TYPESTR_CAPACITY],
            data: 0,
            stream: CAI_STREAM_NONE,
            shape: [0; CAI_MAX_NDIM],
            strides: [0; CAI_MAX_NDIM],
            mask: std::ptr::null(),
            descr: std::ptr::null(),
            descr_count: 0,
            owner: std::ptr::null_mut(),
            release: None,
            reserved: [0; CAI_ARRAY_RESERVED_WORDS],
        }
    }

    /// The typestr bytes before the first NUL, or None when the buffer holds no NUL.
    pub fn typestr_bytes(&self) -> Option<&[u8]> {
        c_chars_until_nul(&self.typestr)
    }

    /// Copies `typestr` into the buffer; false (buffer untouched) when it does not fit with its NUL.
    pub fn set_typestr(&mut self, typestr: &str) -> bool {
        copy_into_c_chars(&mut self.typestr, typestr.as_bytes())
    }
}

impl Default for CaiArray {
    fn default() -> Self {
        CaiArray::zeroed()
    }
}

impl CaiField {
    pub fn new(name: &str, typestr: &str, offset: u64) -> Option<CaiField> {
        let mut field =
            CaiField { name: [0; CAI_FIELD_NAME_CAPACITY], typestr: [0; CAI_TYPESTR_CAPACITY], offset };
        (copy_into_c_chars(&mut field.name, name.as_bytes())
            && copy_into_c_chars(&mut field.typestr, typestr.as_bytes()))
        .then_some(field)
    }
}

/// Runs `array`'s release callback if it is set and clears it, exactly once even when calls
/// race on the same array: the callback is taken by an atomic swap.
///
/// # Safety
/// `array` points to a valid CaiArray; nothing else reads or writes it meanwhile but other
/// calls of this function.
pub unsafe fn release(array: *mut CaiArray) {
    // The field is one nullable function pointer: read and cleared through an atomic of the
    // same size and alignment, without forming a reference another call could alias.
    let slot = std::ptr::addr_of_mut!((*array).release).cast::<usize>();
    let taken = AtomicUsize::from_ptr(slot).swap(0, Ordering::AcqRel);
    if taken != 0 {
        // SAFETY: a non-zero value of the field is the producer's callback, which it promised
        // may be called with the array.
        let callback: unsafe extern "C" fn(*mut CaiArray) = std::mem::transmute(taken);
        callback(array);
    }
}

/// The array `src` owns, to be written into `dst`, with `src`'s release cleared; refused while
/// `dst` still owns an array (it would leak).
pub fn take_for_move(dst: &CaiArray, src: &mut CaiArray) -> Result<CaiArray> {
    if dst.release.is_some() {
        return Err(Error::new(
            Status::InvalidArgument,
            "dst still owns an array (its release is set): release it before moving into it",
        ));
    }
    let moved = *src;
    src.release = None;
    Ok(moved)
}

pub(crate) fn c_chars_until_nul(buffer: &[c_char]) -> Option<&[u8]> {
    // c_char is i8 or u8 depending on the target; both have the layout of u8.
    let bytes = unsafe { std::slice::from_raw_parts(buffer.as_ptr().cast::<u8>(), buffer.len()) };
    bytes.iter().position(|&b| b == 0).map(|end| &bytes[..end])
}

pub(crate) fn copy_into_c_chars(buffer: &mut [c_char], text: &[u8]) -> bool {
    if text.len() >= buffer.len() || text.contains(&0) {
        return false;
    }
    for (slot, &byte) in buffer.iter_mut().zip(text) {
        *slot = byte as c_char;
    }
    buffer[text.len()..].fill(0);
    true
}

// The release field is read and cleared as an atomic word (`release`).
const _: () = assert!(
    std::mem::size_of::<Option<unsafe extern "C" fn(*mut CaiArray)>>() == std::mem::size_of::<usize>()
);

// The C tests assert the same numbers with _Static_assert(offsetof(...)), so the Rust and C
// views of these structs cannot drift apart unnoticed.
#[cfg(target_pointer_width = "64")]
const _: () = {
    use std::mem::{offset_of, size_of};
    assert!(offset_of!(CaiArray, version) == 0);
    assert!(offset_of!(CaiArray, ndim) == 4);
    assert!(offset_of!(CaiArray, readonly) == 8);
    assert!(offset_of!(CaiArray, strides_given) == 12);
    assert!(offset_of!(CaiArray, typestr) == 16);
    assert!(offset_of!(CaiArray, data) == 48);
    assert!(offset_of!(CaiArray, stream) == 56);
    assert!(offset_of!(CaiArray, shape) == 64);
    assert!(offset_of!(CaiArray, strides) == 576);
    assert!(offset_of!(CaiArray, mask) == 1088);
    assert!(offset_of!(CaiArray, descr) == 1096);
    assert!(offset_of!(CaiArray, descr_count) == 1104);
    assert!(offset_of!(CaiArray, owner) == 1112);
    assert!(offset_of!(CaiArray, release) == 1120);
    assert!(offset_of!(CaiArray, reserved) == 1128);
    assert!(size_of::<CaiArray>() == 1160);
    assert!(offset_of!(CaiField, name) == 0);
    assert!(offset_of!(CaiField, typestr) == 64);
    assert!(offset_of!(CaiField, offset) == 96);
    assert!(size_of::<CaiField>() == 104);
};
