//! DLPack, the other protocol device arrays travel by, onto and off the same `CaiArray`: one
//! function per rule of the mapping, named for it.
//!
//! Ownership both ways: `from_dlpack` always takes the tensor (its deleter runs exactly once,
//! from the array's release on success, at once on failure); `to_dlpack` moves the array into
//! the tensor (the array's release runs exactly once, from the tensor's deleter).

use std::ffi::{c_char, c_void};
use std::mem::MaybeUninit;

use crate::abi::{
    c_chars_until_nul, ArrayHead, CaiArray, CaiDLDataType, CaiDLDevice, CaiDLManagedTensor,
    CaiDLManagedTensorVersioned, CaiDLPackOptions, CaiDLPackVersion, CaiDLTensor, CaiDtype,
    CAI_DLPACK_FLAG_READ_ONLY, CAI_DLPACK_FLAG_SUBBYTE_PADDED, CAI_DLPACK_MAJOR_VERSION,
    CAI_DLPACK_MINOR_VERSION, CAI_DL_CPU, CAI_DL_CUDA, CAI_DL_CUDA_HOST, CAI_DL_CUDA_MANAGED, CAI_MAX_NDIM,
};
use crate::device::memory::kind_of;
use crate::element_type::{described, dl_dtype_of_numeric, typestr_of, SubByte, Typed};
use crate::layout::c_strides;
use crate::status::{Error, Result, Status};
use crate::validate::{
    option_is_a_flag, reserved_are_zero, validate, validate_extents_of_cuda_memory, validate_filled,
    Validated,
};

fn device_name(device_type: i32) -> String {
    let name = match device_type {
        1 => "kDLCPU",
        2 => "kDLCUDA",
        3 => "kDLCUDAHost",
        4 => "kDLOpenCL",
        7 => "kDLVulkan",
        8 => "kDLMetal",
        9 => "kDLVPI",
        10 => "kDLROCM",
        11 => "kDLROCMHost",
        12 => "kDLExtDev",
        13 => "kDLCUDAManaged",
        14 => "kDLOneAPI",
        15 => "kDLWebGPU",
        16 => "kDLHexagon",
        17 => "kDLMAIA",
        _ => return format!("device type {device_type}"),
    };
    format!("{name} ({device_type})")
}

/// A tensor libcai can read: its major version is the one libcai knows (a later major may lay
/// the tensor out differently; only its deleter may be touched).
pub fn major_version_is_known(major: u32, minor: u32) -> Result<()> {
    if major == CAI_DLPACK_MAJOR_VERSION {
        Ok(())
    } else {
        Err(Error::new(
            Status::AbiVersion,
            format!(
                "DLPack version {major}.{minor}: this libcai reads major version {CAI_DLPACK_MAJOR_VERSION} only"
            ),
        ))
    }
}

/// Host memory as a caller allows it: whether it does, and how it would, in the terms of the
/// API it called (a C field, a Rust argument, a Python keyword), which the refusal ends with.
/// The rule is the core's; only the words are the caller's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AllowHost {
    /// Host memory (kDLCPU) is taken.
    pub allowed: bool,
    /// What the caller does to allow it.
    pub how: HostWords,
}

impl AllowHost {
    /// Host memory allowed: the words that would allow it are never read.
    pub const ALLOWED: AllowHost = AllowHost { allowed: true, how: &"" };
}

/// What a caller does to allow host memory, e.g. "set CaiDLPackOptions.allow_host = 1": a
/// thin pointer, so that an `AllowHost` is two words, passed in registers. With the words'
/// own two-word `&str` in it, it was three, passed through memory, and each copy's 8-byte
/// load of `allowed` stalled on the 1-byte store that had just written it (`cai.from_object`
/// of a numpy array took 102-107 ns with it, 95-98 ns without, on the benchmark machine).
pub type HostWords = &'static &'static str;

/// How a caller of `cai_from_dlpack` allows host memory.
// Reached only through the C API (cai_export, cai_from_dlpack): unused without `c-api`.
#[cfg_attr(not(feature = "c-api"), allow(dead_code))]
pub const ALLOW_HOST_C_DLPACK: HostWords = &"set CaiDLPackOptions.allow_host = 1";

/// How a caller of the Rust `Array::from_dlpack` allows host memory.
pub const ALLOW_HOST_RUST_DLPACK: HostWords = &"pass allow_host = true to Array::from_dlpack";

/// How a caller of the Rust `Array::from_dlpack_legacy` allows host memory.
pub const ALLOW_HOST_RUST_DLPACK_LEGACY: HostWords = &"pass allow_host = true to Array::from_dlpack_legacy";

/// CUDA memory is accepted; host memory (kDLCPU) only when the caller asks for it; every
/// other device is refused, named.
#[inline(always)]
pub fn device_is_cuda_or_allowed_host(device: CaiDLDevice, host: AllowHost) -> Result<()> {
    match device.device_type {
        CAI_DL_CUDA | CAI_DL_CUDA_HOST | CAI_DL_CUDA_MANAGED if device.device_id >= 0 => Ok(()),
        CAI_DL_CPU if host.allowed && device.device_id >= 0 => Ok(()),
        _ => Err(device_refused(device, host)),
    }
}

/// Why `device_is_cuda_or_allowed_host` refuses `device`.
#[cold]
fn device_refused(device: CaiDLDevice, host: AllowHost) -> Error {
    if device.device_id < 0 {
        return Error::new(
            Status::InvalidArgument,
            format!("the tensor's device id is {}; a device id is never negative", device.device_id),
        );
    }
    match device.device_type {
        CAI_DL_CPU => Error::new(
            Status::HostMemory,
            format!(
                "the tensor is on {} device {}, host memory; to take it, {}",
                device_name(CAI_DL_CPU),
                device.device_id,
                host.how
            ),
        ),
        other => Error::new(
            Status::NotDevicePointer,
            format!("the tensor is on {} device {}, not CUDA memory", device_name(other), device.device_id),
        ),
    }
}

/// The DLPack dtype of `array`'s elements, given its typestr parsed (`parsed`, what validating
/// `array` found): the type it carries (`dl_dtype`, which validation found to agree with the
/// typestr), else its numeric typestr's, which must be in this host's byte order (DLPack is
/// native-only). The typestr is read again only to name it in a refusal.
fn dl_dtype_of(parsed: CaiDtype, array: &CaiArray) -> Result<CaiDLDataType> {
    if !array.dl_dtype.is_absent() {
        return Ok(array.dl_dtype);
    }
    // Spelled out for a refusal only: a string made per export costs an allocation.
    let typestr =
        || String::from_utf8_lossy(c_chars_until_nul(&array.typestr).unwrap_or_default()).into_owned();
    if !parsed.is_native() {
        return Err(Error::new(
            Status::InvalidTypestr,
            format!(
                "typestr {:?} is not in this host's byte order; DLPack holds native data only",
                typestr()
            ),
        ));
    }
    if let Some(dtype) = dl_dtype_of_numeric(parsed) {
        return Ok(dtype);
    }
    let why = match parsed.kind() {
        b'V' => "is opaque bytes, and the array's dl_dtype does not say what they are (bfloat16, a float8, ...)",
        b'b' | b'i' | b'u' | b'f' | b'c' => {
            // Only what a consumer reads back as the same typestr: DLPack's bits field is one
            // byte (a 32-byte complex would read as 0 bits), and it has no 16-byte float.
            return Err(Error::new(
                Status::InvalidTypestr,
                format!(
                    "typestr {:?} is {} bytes wide, which no DLPack dtype of its kind holds",
                    typestr(),
                    parsed.itemsize
                ),
            ));
        }
        _ => "has no DLPack dtype (DLPack has bool, int, uint, float, complex, bfloat16 and the float8/6/4 types)",
    };
    Err(Error::new(Status::InvalidTypestr, format!("typestr {:?} {why}", typestr())))
}

/// Whether an array of `dtype` in items of `itemsize` bytes pads its sub-byte elements (one
/// a byte, where DLPack's default packs them): the tensor's flag says so.
fn is_padded(dtype: CaiDLDataType, itemsize: u64) -> bool {
    u64::from(dtype.bits) * u64::from(dtype.lanes) < itemsize * 8
}

/// Dimension `i`'s element stride in bytes (DLPack strides count elements, CAI's count bytes),
/// refused where it overflows.
#[inline]
fn stride_in_bytes(i: usize, stride: i64, itemsize: u64) -> Result<i64> {
    stride.checked_mul(itemsize as i64).ok_or_else(|| stride_overflow(i, stride, itemsize))
}

/// The refusal of an element stride whose byte stride overflows, naming a producer's likely
/// slip when the stride is exactly a negative byte stride divided by the itemsize as an
/// unsigned number, (2^64 - |bytes|) / itemsize (seen from CuPy 14.2's `__dlpack__`: -8 bytes
/// of float32 written as 4611686018427387902).
#[cold]
fn stride_overflow(i: usize, stride: i64, itemsize: u64) -> Error {
    let wrapped = stride.wrapping_mul(itemsize as i64);
    let exact = u128::from(stride as u64) * u128::from(itemsize) == u128::from(wrapped as u64);
    let hint = if wrapped < 0 && exact {
        format!(
            "; taken modulo 2^64 it is {wrapped} bytes, as if the producer divided a negative byte stride by \
             the itemsize as an unsigned number: its export of negative strides is broken"
        )
    } else {
        String::new()
    };
    Error::new(
        Status::Overflow,
        format!("strides[{i}] = {stride} elements of {itemsize} bytes overflow 64 bits{hint}"),
    )
}

/// A byte stride goes to DLPack only as a whole number of elements; written into `out`.
pub fn strides_in_elements(strides: &[i64], itemsize: u64, out: &mut [i64]) -> Result<()> {
    for (i, (&s, slot)) in strides.iter().zip(out).enumerate() {
        if s % itemsize as i64 != 0 {
            return Err(Error::new(
                Status::InvalidStrides,
                format!("strides[{i}] = {s} bytes is not a whole number of {itemsize}-byte items; DLPack strides count items"),
            ));
        }
        *slot = s / itemsize as i64;
    }
    Ok(())
}

/// `byte_offset` is folded into the data pointer: CAI's pointer is the first element's.
pub fn data_with_byte_offset(data: *mut c_void, byte_offset: u64) -> Result<u64> {
    (data as u64).checked_add(byte_offset).ok_or_else(|| {
        Error::new(
            Status::Overflow,
            format!("data {data:p} plus byte_offset {byte_offset} overflows 64 bits"),
        )
    })
}

/// What the array of a DLTensor takes from it besides its extents, each field checked by its
/// rule: shared by the two readers below.
struct DlHead {
    ndim: usize,
    typestr: Typed,
    /// The first element's address: `data` plus `byte_offset`.
    data: u64,
}

/// The device, rank, shape pointer, dtype and data of `tensor`, checked.
#[inline(always)]
fn dl_head(tensor: &CaiDLTensor, host: AllowHost, sub_byte: SubByte) -> Result<DlHead> {
    device_is_cuda_or_allowed_host(tensor.device, host)?;
    let ndim = usize::try_from(tensor.ndim).ok().filter(|&n| n <= CAI_MAX_NDIM).ok_or_else(|| {
        Error::new(
            Status::InvalidShape,
            format!("DLPack ndim {} is outside 0 to {CAI_MAX_NDIM}", tensor.ndim),
        )
    })?;
    if ndim > 0 && tensor.shape.is_null() {
        return Err(Error::new(Status::InvalidShape, format!("DLPack shape is NULL with ndim {ndim}")));
    }
    let typestr = typestr_of(tensor.dtype, sub_byte)?;
    let data = data_with_byte_offset(tensor.data, tensor.byte_offset)?;
    Ok(DlHead { ndim, typestr, data })
}

/// Writes `head` into `array`, a cleared struct (`clear_head`ed or zeroed): the fields a
/// DLTensor's array has besides its extents. The stream is CAI's None (cleared): the DLPack
/// exchange did its sync before handing the tensor over.
#[inline(always)]
fn write_head(head: &DlHead, readonly: bool, array: &mut CaiArray) {
    array.version = 3;
    array.ndim = head.ndim as i32;
    array.readonly = readonly.into();
    // Cleared: the buffer is zero past the typestr's bytes, its NUL included; the block is
    // NUL-padded, so copying it whole keeps that.
    for (slot, &byte) in array.typestr.iter_mut().zip(head.typestr.padded_bytes()) {
        *slot = byte as c_char;
    }
    array.dl_dtype = head.typestr.carried;
    array.data = head.data;
}

/// A DLTensor's `ndim` extents and element strides (None where it gives none).
///
/// # Safety
/// As `read_dltensor`'s; `ndim` is the tensor's, checked.
#[inline(always)]
unsafe fn dl_extents(tensor: &CaiDLTensor, ndim: usize) -> (&[i64], Option<&[i64]>) {
    if ndim == 0 {
        return (&[], None);
    }
    // SAFETY: `ndim` extents (and strides, when not NULL): the caller's contract, which DLPack
    // promises of a producer's tensor.
    unsafe {
        let shape = std::slice::from_raw_parts(tensor.shape, ndim);
        (shape, (!tensor.strides.is_null()).then(|| std::slice::from_raw_parts(tensor.strides, ndim)))
    }
}

/// Reads a DLTensor into `array`, a cleared struct (zeroed, or `clear_head`ed: not yet owning
/// anything, no descr, no mask, no placement), and validates it: the reading of
/// `from_dlpack*`, and of a DLTensor nobody hands over (a tensor described from an object's
/// own fields), whose array then owns nothing (`owner` and `release` stay NULL). NULL strides
/// mean C-contiguous (DLPack before 1.2 allowed them). On failure `array` may be part written
/// (a struct of the reader's own); `check_dltensor` is the reading that writes only on success.
/// `sub_byte` says how the tensor lays out a sub-byte type (`SubByte::Packed`, DLPack's
/// default, where nothing says otherwise).
///
/// # Safety
/// `tensor`'s shape, and its strides when not NULL, hold `ndim` values valid for the call.
pub unsafe fn read_dltensor(
    tensor: &CaiDLTensor,
    readonly: bool,
    sub_byte: SubByte,
    host: AllowHost,
    array: &mut CaiArray,
) -> Result<Validated> {
    let head = dl_head(tensor, host, sub_byte)?;
    let dtype = head.typestr.dtype;
    write_head(&head, readonly, array);
    let ndim = head.ndim;
    // SAFETY: the caller's contract.
    let (shape, strides) = unsafe { dl_extents(tensor, ndim) };
    array.shape[..ndim].copy_from_slice(shape);
    if let Some(strides) = strides {
        for (i, (&stride, slot)) in strides.iter().zip(&mut array.strides[..ndim]).enumerate() {
            *slot = stride_in_bytes(i, stride, dtype.itemsize)?;
        }
        array.strides_given = 1;
    }
    // The struct was cleared and every field but the extents and data is written above from
    // what holds by construction: only the rules those can break run (no typestr parsed back).
    let validated = validate_filled(array, dtype)?;
    if validated.element_count == 0 {
        // CAI: "For zero-size arrays, use 0" (an empty extent holds at any address: `validated`
        // stays true of the array).
        array.data = 0;
    }
    Ok(validated)
}

/// A DLTensor whose fields passed every rule the `CaiArray` made of them keeps
/// (`check_dltensor`): what `write_dltensor` writes, once nothing can fail.
pub struct CheckedDlTensor {
    head: DlHead,
    /// What validating the array found, for an import to reuse (`import_described`).
    pub validated: Validated,
}

/// `read_dltensor`'s rules on a DLTensor, with nothing written: for a reader that writes its
/// caller's struct only on success (`write_dltensor` then writes it, and cannot fail).
///
/// # Safety
/// As `read_dltensor`'s.
// Inlined into each reader: its result (the facts and the typestr) is then not moved through
// memory, and the reader's call of it not made (about 70 instructions a view).
#[inline(always)]
pub unsafe fn check_dltensor(
    tensor: &CaiDLTensor,
    sub_byte: SubByte,
    host: AllowHost,
) -> Result<CheckedDlTensor> {
    let mut head = dl_head(tensor, host, sub_byte)?;
    let dtype = head.typestr.dtype;
    // SAFETY: the caller's contract.
    let (shape, strides) = unsafe { dl_extents(tensor, head.ndim) };
    // The byte strides, on the stack for the rules: no struct is written yet.
    let mut byte_strides = [MaybeUninit::<i64>::uninit(); CAI_MAX_NDIM];
    let byte_strides = match strides {
        None => None,
        Some(strides) => {
            for (i, (&stride, slot)) in strides.iter().zip(&mut byte_strides).enumerate() {
                slot.write(stride_in_bytes(i, stride, dtype.itemsize)?);
            }
            // SAFETY: the first `ndim` slots were written just above.
            Some(unsafe { std::slice::from_raw_parts(byte_strides.as_ptr().cast::<i64>(), head.ndim) })
        }
    };
    let validated = validate_extents_of_cuda_memory(shape, byte_strides, head.data, dtype)?;
    if validated.element_count == 0 {
        head.data = 0; // as `read_dltensor`
    }
    Ok(CheckedDlTensor { head, validated })
}

/// Writes the array of a DLTensor that `check_dltensor` passed into `array`, whatever it held:
/// every field (a borrowed array, `owner` and `release` NULL) and the shape and strides of its
/// `ndim` dimensions (zero strides where the tensor gives none).
///
/// # Safety
/// `tensor` is the one checked, unchanged, its shape and strides valid as `check_dltensor` says.
#[inline(always)]
pub unsafe fn write_dltensor(
    tensor: &CaiDLTensor,
    checked: &CheckedDlTensor,
    readonly: bool,
    array: &mut CaiArray,
) {
    let ndim = checked.head.ndim;
    array.clear_head();
    write_head(&checked.head, readonly, array);
    // SAFETY: the caller's contract.
    let (shape, strides) = unsafe { dl_extents(tensor, ndim) };
    let extents = array.shape[..ndim].iter_mut().zip(&mut array.strides[..ndim]).zip(shape);
    // One loop for both (a copy alone becomes a call of memcpy, dear for a few extents).
    match strides {
        Some(strides) => {
            let itemsize = checked.validated.dtype.itemsize as i64;
            for (((shape_slot, stride_slot), &extent), &stride) in extents.zip(strides) {
                *shape_slot = extent;
                *stride_slot = stride.wrapping_mul(itemsize); // checked not to overflow
            }
            array.strides_given = 1;
        }
        None => {
            for ((shape_slot, stride_slot), &extent) in extents {
                *shape_slot = extent;
                *stride_slot = 0;
            }
        }
    }
}

/// Runs the deleter of a tensor (either struct) that is refused before it is read.
///
/// # Safety
/// `tensor` is a valid tensor of that struct, which the caller hands over.
pub unsafe fn discard<T: Managed>(tensor: *mut T) {
    if let Some(deleter) = (*tensor).deleter() {
        deleter(tensor);
    }
}

/// The release of a struct that owns a versioned tensor (`from_dlpack`'s, and any
/// `write_versioned` caller's without a release of its own): runs the tensor's deleter. Rust's
/// only (the C API has no such constant).
/// cbindgen:ignore
pub const RELEASE_VERSIONED: unsafe extern "C" fn(*mut CaiArray) = release_versioned;

// One function per kind of tensor, not one generic: `device_of_taken_tensor` knows a struct
// that owns a tensor by its release, and a generic's copies need not share an address.
/// Releases a CaiArray that owns a versioned tensor: runs its deleter.
unsafe extern "C" fn release_versioned(array: *mut CaiArray) {
    discard::<CaiDLManagedTensorVersioned>((*array).owner.cast());
}

/// Releases a CaiArray that owns a legacy tensor: runs its deleter.
unsafe extern "C" fn release_legacy(array: *mut CaiArray) {
    discard::<CaiDLManagedTensor>((*array).owner.cast());
}

/// The device the DLPack tensor `array` owns names: for a struct `from_dlpack*` wrote (or a
/// `write_versioned` caller with `RELEASE_VERSIONED`), whose import checks that the pointer is
/// on it (`import_described`); None for any other struct.
///
/// # Safety
/// `array` is a valid struct, not released: one whose release is one of these two owns a
/// tensor of that kind as `owner`.
pub unsafe fn device_of_taken_tensor(array: &CaiArray) -> Option<CaiDLDevice> {
    let release = array.release?;
    if std::ptr::fn_addr_eq(release, RELEASE_VERSIONED) {
        Some((*array.owner.cast::<CaiDLManagedTensorVersioned>()).dl_tensor.device)
    } else if std::ptr::fn_addr_eq(release, release_legacy as unsafe extern "C" fn(*mut CaiArray)) {
        Some((*array.owner.cast::<CaiDLManagedTensor>()).dl_tensor.device)
    } else {
        None
    }
}

fn options_of(options: &CaiDLPackOptions) -> Result<bool> {
    reserved_are_zero("CaiDLPackOptions.reserved", &options.reserved)?;
    option_is_a_flag("CaiDLPackOptions.allow_host", options.allow_host)
}

/// Takes a versioned DLPack tensor into `array`, a zeroed struct: on success the array owns
/// it (its release runs the tensor's deleter once) and what validating it found is returned,
/// for an import to reuse (`import_described`); on failure the deleter has run already and
/// `array` holds nothing to release. A tensor of an unknown major version has nothing read but
/// its version and deleter.
///
/// # Safety
/// `tensor` is a valid DLManagedTensorVersioned that the caller hands over. `how_to_allow_host`
/// tells the caller how to allow host memory, in its API's terms (`AllowHost::how`).
pub unsafe fn from_dlpack(
    tensor: *mut CaiDLManagedTensorVersioned,
    options: &CaiDLPackOptions,
    how_to_allow_host: HostWords,
    array: &mut CaiArray,
) -> Result<Validated> {
    let checked = options_of(options)
        .and_then(|allowed| check_versioned(&*tensor, AllowHost { allowed, how: how_to_allow_host }));
    match checked {
        Ok(checked) => {
            write_versioned(tensor, &checked, RELEASE_VERSIONED, array);
            Ok(checked.validated)
        }
        Err(e) => {
            discard(tensor);
            Err(e)
        }
    }
}

/// `from_dlpack`'s rules on a versioned tensor, with nothing written and nothing taken: its
/// major version (of an unknown one nothing else is read), then every rule of its DLTensor
/// (`check_dltensor`). The caller still holds the tensor, and deletes it on a refusal.
///
/// # Safety
/// `tensor` is a valid DLManagedTensorVersioned.
#[inline(always)]
pub unsafe fn check_versioned(
    tensor: &CaiDLManagedTensorVersioned,
    host: AllowHost,
) -> Result<CheckedDlTensor> {
    major_version_is_known(tensor.version.major, tensor.version.minor)?;
    // SAFETY: a valid tensor (the caller's contract), its major version known.
    unsafe { check_dltensor(&tensor.dl_tensor, sub_byte_of(tensor.flags), host) }
}

/// How a versioned tensor with `flags` lays out a sub-byte type.
fn sub_byte_of(flags: u64) -> SubByte {
    if flags & CAI_DLPACK_FLAG_SUBBYTE_PADDED != 0 {
        SubByte::Padded
    } else {
        SubByte::Packed
    }
}

/// Writes the array of a versioned tensor that `check_versioned` passed into `array`, whatever
/// it held, the array owning the tensor: `owner` is the tensor and `release` (which runs its
/// deleter once) the caller's; read-only where the tensor's flags say so.
///
/// # Safety
/// `tensor` is the one checked, unchanged, handed over to `array`.
#[inline(always)]
pub unsafe fn write_versioned(
    tensor: *mut CaiDLManagedTensorVersioned,
    checked: &CheckedDlTensor,
    release: unsafe extern "C" fn(*mut CaiArray),
    array: &mut CaiArray,
) {
    // SAFETY: the caller's contract.
    unsafe {
        let readonly = (*tensor).flags & CAI_DLPACK_FLAG_READ_ONLY != 0;
        write_dltensor(&(*tensor).dl_tensor, checked, readonly, array);
    }
    array.owner = tensor.cast();
    array.release = Some(release);
}

/// Takes a legacy (unversioned) DLPack tensor, as `from_dlpack` does; legacy tensors have no
/// read-only flag, so the array is writable.
///
/// # Safety
/// `tensor` is a valid DLManagedTensor that the caller hands over.
pub unsafe fn from_dlpack_legacy(
    tensor: *mut CaiDLManagedTensor,
    options: &CaiDLPackOptions,
    how_to_allow_host: HostWords,
    array: &mut CaiArray,
) -> Result<Validated> {
    let read = |array: &mut CaiArray| {
        let host = AllowHost { allowed: options_of(options)?, how: how_to_allow_host };
        read_dltensor(&(*tensor).dl_tensor, false, SubByte::Packed, host, array)
    };
    take_tensor(tensor, array, read)
}

/// The ownership sequence of both `from_dlpack`s: `read` the tensor into `array`; on success
/// the array owns it (its release runs the deleter), on failure the deleter runs now.
/// Returns what `read` validated.
///
/// # Safety
/// `tensor` is a valid tensor of struct `T`, handed over.
unsafe fn take_tensor<T: Managed>(
    tensor: *mut T,
    array: &mut CaiArray,
    read: impl FnOnce(&mut CaiArray) -> Result<Validated>,
) -> Result<Validated> {
    let validated = match read(array) {
        Ok(validated) => validated,
        Err(e) => {
            discard(tensor);
            return Err(e);
        }
    };
    array.owner = tensor.cast();
    array.release = Some(T::RELEASE);
    Ok(validated)
}

/// What a tensor made by `to_dlpack` holds besides itself: what it keeps alive (the array it
/// took over, less its extents, or an object), and its extents, sized to its rank. One small
/// allocation (what the allocator's per-thread cache serves) where the full struct's inline
/// extents would take 2 KB for every export; extents past the room of `INLINE_RANK` dimensions
/// spill into a second one.
#[repr(C)]
struct Exported<T> {
    tensor: T,
    kept: Kept,
    extents: Extents,
}

/// What an exported tensor keeps alive until its deleter runs.
#[derive(Clone, Copy, Debug)]
pub enum Keeper {
    /// The array handed over: the deleter runs its release (if any) with the array rebuilt.
    Array,
    /// An object the array borrows from (its owner and release NULL): the tensor keeps nothing
    /// of the array but its extents, and its deleter calls `let_go` (a binding's export of an
    /// object that describes itself, cai-python's offered types).
    Object(KeptObject),
}

/// An object an exported tensor keeps alive (`Keeper::Object`).
#[derive(Clone, Copy, Debug)]
pub struct KeptObject {
    /// A reference the caller took for the tensor.
    pub object: *mut c_void,
    /// Lets go of `object`: called once, by the tensor's deleter, from whatever thread deletes
    /// it; it must not unwind.
    pub let_go: unsafe fn(*mut c_void),
}

/// What an `Exported` holds for its deleter, by its `Keeper`.
enum Kept {
    /// The array less its extents (the tensor's extents hold those).
    Array(ArrayHead),
    Object(KeptObject),
}

/// Ranks whose extents an export keeps in its own allocation (most arrays are matrices,
/// images or batches of them).
const INLINE_RANK: usize = 4;

/// An export's extents, `ndim` each: the DLTensor's shape and its strides (in elements), where
/// the DLTensor points, then the array's own strides (bytes, as given), to hand it back whole.
enum Extents {
    Inline { len: usize, values: [i64; 3 * INLINE_RANK] },
    Spilled(Box<[i64]>),
}

impl Extents {
    /// The extents of `array`'s `ndim` dimensions: its shape twice (the second copy becomes the
    /// strides in elements), then, where `with_strides` (to hand the array back whole), its
    /// strides, in one pass (three slice copies were three memcpy calls of a few words each).
    fn of(array: &CaiArray, ndim: usize, with_strides: bool) -> Extents {
        let len = if with_strides { 3 * ndim } else { 2 * ndim };
        let mut extents = if len <= 3 * INLINE_RANK {
            Extents::Inline { len, values: [0; 3 * INLINE_RANK] }
        } else {
            Extents::Spilled(vec![0; len].into_boxed_slice())
        };
        let (shape, rest) = extents.as_mut_slice().split_at_mut(ndim);
        let (in_elements, strides) = rest.split_at_mut(ndim);
        for (i, (&extent, &stride)) in array.shape[..ndim].iter().zip(&array.strides[..ndim]).enumerate() {
            shape[i] = extent;
            in_elements[i] = extent;
            if with_strides {
                strides[i] = stride;
            }
        }
        extents
    }

    fn as_slice(&self) -> &[i64] {
        match self {
            Extents::Inline { len, values } => &values[..*len],
            Extents::Spilled(values) => values,
        }
    }

    fn as_mut_slice(&mut self) -> &mut [i64] {
        match self {
            Extents::Inline { len, values } => &mut values[..*len],
            Extents::Spilled(values) => values,
        }
    }
}

/// Frees an exported tensor of struct `T`: lets go of what it keeps (once: the array's
/// release, given the array as it was handed over, every field and the extents of its `ndim`
/// dimensions, as a release reads no entry past them, cai.h; or the object's `let_go`), then
/// frees the allocation.
unsafe extern "C" fn delete_exported<T: Managed>(tensor: *mut T) {
    let exported = Box::from_raw((*tensor).manager_context().cast::<Exported<T>>());
    let head = match exported.kept {
        Kept::Object(KeptObject { object, let_go }) => {
            let_go(object);
            return;
        }
        Kept::Array(ref head) => head,
    };
    if let Some(release) = head.release {
        let extents = exported.extents.as_slice();
        let ndim = extents.len() / 3;
        // Not zeroed: the 1,024 bytes of extents past `ndim` are never read, and zeroing them
        // cost a memset per deleted tensor.
        let mut array = std::mem::MaybeUninit::<CaiArray>::uninit();
        let array = array.as_mut_ptr();
        head.write_into(array);
        let shape = std::ptr::addr_of_mut!((*array).shape).cast::<i64>();
        let strides = std::ptr::addr_of_mut!((*array).strides).cast::<i64>();
        for (i, (&extent, &stride)) in extents[..ndim].iter().zip(&extents[2 * ndim..]).enumerate() {
            // SAFETY: entry `i` < ndim <= CAI_MAX_NDIM (validated at export) of the struct's own
            // arrays, which nothing but the release reads, through the raw pointer.
            shape.add(i).write(extent);
            strides.add(i).write(stride);
        }
        // Called directly, not through `abi::release`: the struct is this call's own, so no
        // other release can race for it, and the atomic swap that guards a shared struct costs
        // a locked instruction (about 5 ns on the benchmark machine) per deleted tensor.
        // SAFETY: the struct's own field, cleared as `abi::release` clears it; the callback is
        // the producer's, which it promised may be called once with the array (once: the
        // tensor's deleter runs once, DLPack's rule).
        std::ptr::addr_of_mut!((*array).release).write(None);
        release(array);
    }
}

/// The DLPack device of an array's memory: given by the caller, else asked of the driver
/// (device memory is kDLCUDA, pinned host memory kDLCUDAHost, managed memory kDLCUDAManaged).
/// An empty array has no memory to ask about: kDLCUDA, device 0. OpenCL memory is refused.
pub fn device_of(array: &CaiArray, given: Option<CaiDLDevice>) -> Result<CaiDLDevice> {
    device_of_validated(array, &validate(array)?, given)
}

/// `device_of` for an array validated already: its memory kind's answer.
fn device_of_validated(
    array: &CaiArray,
    validated: &Validated,
    given: Option<CaiDLDevice>,
) -> Result<CaiDLDevice> {
    if let Some(device) = given {
        device_is_cuda_or_allowed_host(device, AllowHost::ALLOWED)?;
    }
    kind_of(array).dl_device(array, validated.touched(), given)
}

/// The two DLPack structs a tensor travels in (versioned and legacy): what libcai reads and
/// writes of either.
pub trait Managed: Sized {
    /// The release of a struct that owns a tensor of this kind.
    const RELEASE: unsafe extern "C" fn(*mut CaiArray);
    /// The DLTensor and the manager context inside the struct.
    fn parts(&mut self) -> (&mut CaiDLTensor, &mut *mut c_void);
    /// The producer's manager context.
    fn manager_context(&self) -> *mut c_void;
    /// The tensor's deleter.
    fn deleter(&self) -> Option<unsafe extern "C" fn(*mut Self)>;
}

impl Managed for CaiDLManagedTensorVersioned {
    const RELEASE: unsafe extern "C" fn(*mut CaiArray) = release_versioned;
    fn parts(&mut self) -> (&mut CaiDLTensor, &mut *mut c_void) {
        (&mut self.dl_tensor, &mut self.manager_ctx)
    }
    fn manager_context(&self) -> *mut c_void {
        self.manager_ctx
    }
    fn deleter(&self) -> Option<unsafe extern "C" fn(*mut Self)> {
        self.deleter
    }
}

impl Managed for CaiDLManagedTensor {
    const RELEASE: unsafe extern "C" fn(*mut CaiArray) = release_legacy;
    fn parts(&mut self) -> (&mut CaiDLTensor, &mut *mut c_void) {
        (&mut self.dl_tensor, &mut self.manager_ctx)
    }
    fn manager_context(&self) -> *mut c_void {
        self.manager_ctx
    }
    fn deleter(&self) -> Option<unsafe extern "C" fn(*mut Self)> {
        self.deleter
    }
}

/// The DLTensor describing `array` on `device` (None: asked of the driver), with its strides in
/// elements (always given) written to `strides`; its shape and strides pointers are left NULL
/// for the caller to point at storage that outlives the tensor. Refused: OpenCL memory, a
/// mask, a dtype DLPack lacks, a byte stride that is not a whole number of items.
pub fn dl_tensor_of(
    array: &CaiArray,
    device: Option<CaiDLDevice>,
    strides: &mut [i64; CAI_MAX_NDIM],
) -> Result<CaiDLTensor> {
    dl_tensor_of_validated(array, &validate(array)?, device, strides)
}

/// `dl_tensor_of` of an array already validated: `validated` is `validate(array)`'s answer;
/// `strides` holds at least `ndim` entries.
fn dl_tensor_of_validated(
    array: &CaiArray,
    validated: &Validated,
    device: Option<CaiDLDevice>,
    strides: &mut [i64],
) -> Result<CaiDLTensor> {
    let device = device_of_validated(array, validated, device)?;
    if !array.mask.is_null() {
        return Err(Error::new(Status::InvalidMask, "the array has a mask, which DLPack cannot carry"));
    }
    let dtype = dl_dtype_of(validated.dtype, array)?;
    let ndim = array.ndim as usize;
    if array.strides_given == 1 {
        strides_in_elements(&array.strides[..ndim], validated.dtype.itemsize, &mut strides[..ndim])?;
    } else {
        c_strides(&array.shape[..ndim], 1, &mut strides[..ndim])?;
    }
    Ok(CaiDLTensor {
        data: array.data as usize as *mut c_void,
        device,
        ndim: array.ndim,
        dtype,
        shape: std::ptr::null_mut(),
        strides: std::ptr::null_mut(),
        byte_offset: 0,
    })
}

/// Moves `array` into a new tensor made by `make` (given the DLTensor, the read-only flag and
/// whether its sub-byte elements are padded),
/// whose shape and strides (in elements, always given) live beside it; the manager context is
/// the allocation holding all of it. On failure `array` is unchanged.
fn export_as<T: Managed>(
    array: &mut CaiArray,
    validated: Option<&Validated>,
    device: Option<CaiDLDevice>,
    keeper: Keeper,
    make: impl FnOnce(CaiDLTensor, bool, bool) -> T,
) -> Result<*mut T> {
    if matches!(keeper, Keeper::Object(_)) && (array.release.is_some() || !array.owner.is_null()) {
        return Err(Error::new(
            Status::InvalidArgument,
            "an export that keeps an object takes an array that owns nothing (owner and release NULL)",
        ));
    }
    let validated = match validated {
        Some(validated) => *validated,
        None => validate(array)?,
    };
    let ndim = array.ndim as usize;
    // Built where it will live, field by field: a struct made on the stack and moved into its
    // box cost a copy of its 330 bytes per export. Every pointer into it derives from `place`.
    let place = Box::into_raw(Box::<Exported<T>>::new_uninit()).cast::<Exported<T>>();
    // SAFETY: the allocation's own field, written before it is borrowed.
    let extents = unsafe {
        std::ptr::addr_of_mut!((*place).extents).write(Extents::of(
            array,
            ndim,
            matches!(keeper, Keeper::Array),
        ));
        &mut *std::ptr::addr_of_mut!((*place).extents)
    };
    let strides = &mut extents.as_mut_slice()[ndim..2 * ndim];
    let dl_tensor = match dl_tensor_of_validated(array, &validated, device, strides) {
        Ok(dl_tensor) => dl_tensor,
        Err(error) => {
            // SAFETY: the one field written is dropped, then the allocation freed as the
            // uninitialized box it was made as.
            unsafe {
                std::ptr::addr_of_mut!((*place).extents).drop_in_place();
                drop(Box::from_raw(place.cast::<std::mem::MaybeUninit<Exported<T>>>()));
            }
            return Err(error);
        }
    };
    let padded = is_padded(dl_tensor.dtype, validated.dtype.itemsize);
    let mut tensor = make(dl_tensor, array.readonly == 1, padded);
    let values = extents.as_mut_slice().as_mut_ptr();
    let (dl_tensor, manager_ctx) = tensor.parts();
    // The tensor points into the extents (inside this allocation, or a heap slice it owns:
    // neither moves) and at the allocation, which live until its deleter frees them.
    dl_tensor.shape = values;
    // SAFETY: `ndim` entries past the start of the 3 * ndim values.
    dl_tensor.strides = unsafe { values.add(ndim) };
    *manager_ctx = place.cast();
    // SAFETY: the remaining fields written in place; every field is then initialized, and the
    // deleter takes the allocation back as a Box<Exported<T>> (the layout it was made with).
    unsafe {
        std::ptr::addr_of_mut!((*place).tensor).write(tensor);
        std::ptr::addr_of_mut!((*place).kept).write(match keeper {
            Keeper::Array => Kept::Array(ArrayHead::of(array)),
            Keeper::Object(object) => Kept::Object(object),
        });
    }
    array.release = None;
    // The tensor is the Exported's first field (repr(C)).
    Ok(place.cast())
}

/// Moves `array` into a new versioned DLPack tensor on `device` (None: asked of the driver),
/// keeping alive what `keeper` names (a `Keeper::Object` export of an array that owns something
/// is refused); `validated` is what validating `array` found, where the caller has it (else it
/// is validated here). On success `array` no longer owns anything (its release is cleared) and
/// the tensor's deleter runs the array's release once; on failure `array` is unchanged.
pub fn to_dlpack(
    array: &mut CaiArray,
    validated: Option<&Validated>,
    device: Option<CaiDLDevice>,
    keeper: Keeper,
) -> Result<*mut CaiDLManagedTensorVersioned> {
    export_as(array, validated, device, keeper, |dl_tensor, readonly, padded| CaiDLManagedTensorVersioned {
        version: CaiDLPackVersion { major: CAI_DLPACK_MAJOR_VERSION, minor: CAI_DLPACK_MINOR_VERSION },
        manager_ctx: std::ptr::null_mut(),
        deleter: Some(delete_exported::<CaiDLManagedTensorVersioned>),
        flags: if readonly { CAI_DLPACK_FLAG_READ_ONLY } else { 0 }
            | if padded { CAI_DLPACK_FLAG_SUBBYTE_PADDED } else { 0 },
        dl_tensor,
    })
}

/// As `to_dlpack`, for consumers of the legacy (unversioned) struct, which has no read-only
/// flag: a read-only array is refused.
pub fn to_dlpack_legacy(
    array: &mut CaiArray,
    validated: Option<&Validated>,
    device: Option<CaiDLDevice>,
    keeper: Keeper,
) -> Result<*mut CaiDLManagedTensor> {
    if array.readonly == 1 {
        return Err(Error::new(
            Status::Readonly,
            "the array is read-only and a legacy DLPack tensor cannot say so; use the versioned one",
        ));
    }
    if !array.dl_dtype.is_absent() && is_padded(array.dl_dtype, 1) {
        return Err(Error::new(
            Status::InvalidTypestr,
            format!(
                "the array's {} elements are padded, one a byte, and a legacy DLPack tensor cannot say so (DLPack \
                 packs sub-byte types by default); use the versioned one",
                described(array.dl_dtype)
            ),
        ));
    }
    export_as(array, validated, device, keeper, |dl_tensor, _, _| CaiDLManagedTensor {
        dl_tensor,
        manager_ctx: std::ptr::null_mut(),
        deleter: Some(delete_exported::<CaiDLManagedTensor>),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::abi::*;

    fn dtype_of_typestr(array: &CaiArray) -> Result<CaiDLDataType> {
        dl_dtype_of(crate::dtype::parse_typestr_buffer(&array.typestr, "typestr")?, array)
    }

    fn dt(code: u8, bits: u8, lanes: u16) -> CaiDLDataType {
        CaiDLDataType { code, bits, lanes }
    }

    #[test]
    fn opencl_memory_is_never_exported_to_dlpack_with_or_without_a_device() {
        let mut array = CaiArray::zeroed();
        array.version = 3;
        array.ndim = 1;
        array.shape[0] = 4;
        array.set_typestr("<f4");
        array.data = 0x1000;
        array.memory = crate::abi::CAI_MEMORY_OPENCL;
        let mut strides = [0; CAI_MAX_NDIM];
        for given in [None, Some(CaiDLDevice { device_type: CAI_DL_CUDA, device_id: 0 })] {
            let refused = dl_tensor_of(&array, given, &mut strides).unwrap_err();
            assert!(refused.message.contains("OpenCL memory"), "{}", refused.message);
            assert!(device_of(&array, given).is_err());
        }
    }

    /// The validation `from_dlpack` returns is the array's (an import reuses it instead of
    /// validating again: `import_described`), strided, empty (whose data becomes 0 after
    /// validation) and 0-d alike.
    #[test]
    fn from_dlpack_returns_what_validating_the_array_finds() {
        let mut shape = [3i64, 4];
        let mut strides = [8i64, 1]; // in elements: a padded row
        for (ndim, rows) in [(2, 3), (2, 0), (0, 3)] {
            shape[0] = rows;
            let mut tensor = CaiDLManagedTensorVersioned {
                version: CaiDLPackVersion { major: CAI_DLPACK_MAJOR_VERSION, minor: 0 },
                manager_ctx: std::ptr::null_mut(),
                deleter: None,
                flags: 0,
                dl_tensor: CaiDLTensor {
                    data: 0x1000 as *mut c_void,
                    device: CaiDLDevice { device_type: CAI_DL_CPU, device_id: 0 },
                    ndim,
                    dtype: dt(2, 32, 1),
                    shape: shape.as_mut_ptr(),
                    strides: strides.as_mut_ptr(),
                    byte_offset: 16,
                },
            };
            let options = CaiDLPackOptions { allow_host: 1, ..Default::default() };
            let mut array = CaiArray::zeroed();
            // SAFETY: a tensor of this frame with no deleter; its shape and strides outlive it.
            let returned =
                unsafe { from_dlpack(&mut tensor, &options, ALLOW_HOST_C_DLPACK, &mut array) }.unwrap();
            assert_eq!(returned, validate(&array).unwrap(), "ndim {ndim}, rows {rows}");
        }
    }

    /// A DLTensor nobody hands over reads as the same tensor taken does (fields, extents and
    /// validation, read-only as the flag says), and the array owns nothing.
    #[test]
    fn read_dltensor_reads_what_from_dlpack_takes_and_owns_nothing() {
        let mut shape = [3i64, 4];
        let mut strides = [8i64, 1];
        for readonly in [false, true] {
            let dl_tensor = CaiDLTensor {
                data: 0x1000 as *mut c_void,
                device: CaiDLDevice { device_type: CAI_DL_CPU, device_id: 0 },
                ndim: 2,
                dtype: dt(2, 32, 1),
                shape: shape.as_mut_ptr(),
                strides: strides.as_mut_ptr(),
                byte_offset: 16,
            };
            let mut tensor = CaiDLManagedTensorVersioned {
                version: CaiDLPackVersion { major: CAI_DLPACK_MAJOR_VERSION, minor: 0 },
                manager_ctx: std::ptr::null_mut(),
                deleter: None,
                flags: if readonly { CAI_DLPACK_FLAG_READ_ONLY } else { 0 },
                dl_tensor,
            };
            let options = CaiDLPackOptions { allow_host: 1, ..Default::default() };
            let host = AllowHost { allowed: true, how: ALLOW_HOST_C_DLPACK };
            let (mut taken, mut read) = (CaiArray::zeroed(), CaiArray::zeroed());
            // SAFETY: tensors of this frame with no deleter; their shape and strides outlive them.
            let took =
                unsafe { from_dlpack(&mut tensor, &options, ALLOW_HOST_C_DLPACK, &mut taken) }.unwrap();
            // SAFETY: as above.
            let found =
                unsafe { read_dltensor(&dl_tensor, readonly, SubByte::Packed, host, &mut read) }.unwrap();
            assert_eq!(found, took);
            assert!(read.owner.is_null() && read.release.is_none());
            assert_eq!(read.readonly, u32::from(readonly));
            taken.owner = std::ptr::null_mut();
            taken.release = None;
            assert_eq!(format!("{read:?}"), format!("{taken:?}"), "readonly {readonly}");
        }
    }

    /// The dtype a made typestr reports is what parsing the typestr finds, for every DLPack
    /// dtype a typestr is made of (code, bits and lanes through all their small values).
    #[test]
    fn a_made_typestrs_dtype_is_what_parsing_it_finds() {
        let mut made = 0;
        for code in 0..=20u8 {
            for bits in 0..=255u8 {
                for lanes in [0u16, 1, 2, 4] {
                    if let Ok(typestr) = typestr_of(dt(code, bits, lanes), SubByte::Packed) {
                        let parsed = crate::dtype::parse_typestr(typestr.as_bytes()).unwrap();
                        assert_eq!(typestr.dtype, parsed, "{:?}", typestr.as_bytes());
                        if typestr.carried.is_absent() {
                            made += 1;
                        } else {
                            assert_eq!(parsed.kind(), b'V', "{:?}", typestr.as_bytes());
                        }
                    }
                }
            }
        }
        assert_eq!(made, 14, "by their typestr alone: b1, i1-8, u1-8, f2-8, c8 and c16");
    }

    /// `read_dltensor` runs only the rules its fields can break (`validate_filled`): on
    /// tensors that break each of them, and on ones that break none, it finds what reading
    /// the fields into a struct and running every rule (`validate`) finds, the same facts or
    /// the same refusal. `check_dltensor` (the same rules before anything is written) finds
    /// the same, and `write_dltensor` then writes what `read_dltensor` wrote into a zeroed
    /// struct, whatever the struct it writes held.
    #[test]
    fn read_dltensor_validates_as_validate_does_on_the_same_fields() {
        let extents: [&[i64]; 7] =
            [&[], &[3, 4], &[0, 5], &[-1, 2], &[i64::MAX, 2], &[1 << 31, 1 << 31, 4], &[2, 3, 4, 5]];
        let strides: [Option<&[i64]>; 6] = [
            None,
            Some(&[4, 1, 1, 1]),
            Some(&[-4, 1, 20, 60]),
            Some(&[1 << 61, 1, 1, 1]),
            Some(&[i64::MAX / 2, 3, 1, 1]),
            Some(&[0, 0, 0, 0]),
        ];
        let datas = [0u64, 0x1000, u64::MAX - 64, 1 << 63];
        let mut compared = (0, 0);
        for shape in extents {
            for &stride in &strides {
                for data in datas {
                    for bits in [8u8, 32, 128] {
                        let mut shape = shape.to_vec();
                        let mut stride = stride.map(|s| s[..shape.len()].to_vec());
                        let dl_tensor = CaiDLTensor {
                            data: data as *mut c_void,
                            device: CaiDLDevice { device_type: CAI_DL_CPU, device_id: 0 },
                            ndim: shape.len() as i32,
                            dtype: dt(
                                match bits {
                                    8 => CAI_DL_INT,
                                    128 => CAI_DL_COMPLEX,
                                    _ => CAI_DL_FLOAT,
                                },
                                bits,
                                1,
                            ),
                            shape: shape.as_mut_ptr(),
                            strides: stride.as_mut().map_or(std::ptr::null_mut(), |s| s.as_mut_ptr()),
                            byte_offset: 0,
                        };
                        let host = AllowHost { allowed: true, how: ALLOW_HOST_C_DLPACK };
                        let mut read = CaiArray::zeroed();
                        // SAFETY: shape and strides of this frame, `ndim` values each.
                        let found =
                            unsafe { read_dltensor(&dl_tensor, false, SubByte::Packed, host, &mut read) };
                        // The reader that checks first finds the same, and writes what the
                        // first wrote into a zeroed struct whatever the struct held.
                        // SAFETY: as above.
                        match (unsafe { check_dltensor(&dl_tensor, SubByte::Packed, host) }, &found) {
                            (Ok(checked), Ok(found)) => {
                                assert_eq!(checked.validated, *found);
                                let mut written = dirty();
                                // SAFETY: the tensor just checked.
                                unsafe { write_dltensor(&dl_tensor, &checked, false, &mut written) };
                                let mut defined = CaiArray::zeroed();
                                written.copy_defined_to(&mut defined);
                                assert_eq!(
                                    format!("{defined:?}"),
                                    format!("{read:?}"),
                                    "{shape:?} {stride:?}"
                                );
                            }
                            (Err(checked), Err(found)) => assert_eq!(checked.message, found.message),
                            (checked, found) => panic!(
                                "check_dltensor {:?}, read_dltensor {found:?}",
                                checked.map(|c| c.validated)
                            ),
                        }
                        // The oracle: the same fields written plainly, every rule run.
                        let mut oracle = CaiArray::zeroed();
                        oracle.version = 3;
                        oracle.ndim = shape.len() as i32;
                        oracle.set_typestr(
                            std::str::from_utf8(
                                typestr_of(dl_tensor.dtype, SubByte::Packed).unwrap().as_bytes(),
                            )
                            .unwrap(),
                        );
                        oracle.shape[..shape.len()].copy_from_slice(&shape);
                        oracle.data = data;
                        let itemsize = i64::from(bits / 8);
                        let overflowing = stride
                            .as_ref()
                            .is_some_and(|s| s.iter().any(|v| v.checked_mul(itemsize).is_none()));
                        if let Some(s) = &stride {
                            oracle.strides_given = 1;
                            for (slot, v) in oracle.strides.iter_mut().zip(s) {
                                *slot = v.wrapping_mul(itemsize);
                            }
                        }
                        match (found, validate(&oracle)) {
                            (Ok(found), Ok(expected)) => {
                                assert_eq!(found, expected, "{shape:?} {stride:?} {data:#x} {bits}");
                                compared.0 += 1;
                            }
                            (Err(found), _) if overflowing => assert_eq!(found.status, Status::Overflow),
                            (Err(found), Err(expected)) => {
                                assert_eq!(found.status, expected.status, "{}: {shape:?} {stride:?}", found.message);
                                compared.1 += 1;
                            }
                            (found, expected) => panic!("{shape:?} {stride:?} {data:#x} {bits}: read {found:?}, validate {expected:?}"),
                        }
                    }
                }
            }
        }
        assert!(compared.0 > 50 && compared.1 > 50, "both kinds compared: {compared:?}");
    }

    /// A struct with every field and extent set to something no read writes.
    fn dirty() -> CaiArray {
        let mut array = CaiArray::zeroed();
        // SAFETY: a struct of integers and pointers, every byte pattern valid for each but
        // `release` (an Option of a function pointer), written below.
        unsafe { std::ptr::write_bytes(&mut array as *mut CaiArray as *mut u8, 0xA5, size_of::<CaiArray>()) };
        array.release = None;
        array
    }

    #[test]
    fn dtypes_map_to_typestrs_and_back() {
        let native = NATIVE_BYTE_ORDER as char;
        for (dtype, typestr) in [
            (dt(CAI_DL_BOOL, 8, 1), "|b1".to_string()),
            (dt(CAI_DL_INT, 8, 1), "|i1".into()),
            (dt(CAI_DL_UINT, 8, 1), "|u1".into()),
            (dt(CAI_DL_INT, 32, 1), format!("{native}i4")),
            (dt(CAI_DL_UINT, 64, 1), format!("{native}u8")),
            (dt(CAI_DL_FLOAT, 16, 1), format!("{native}f2")),
            (dt(CAI_DL_FLOAT, 64, 1), format!("{native}f8")),
            (dt(CAI_DL_COMPLEX, 64, 1), format!("{native}c8")),
            (dt(CAI_DL_COMPLEX, 128, 1), format!("{native}c16")),
        ] {
            assert_eq!(typestr_of(dtype, SubByte::Packed).unwrap().as_bytes(), typestr.as_bytes());
            let mut a = CaiArray::zeroed();
            a.set_typestr(&typestr);
            let back = dtype_of_typestr(&a).unwrap();
            assert_eq!(
                (back.code, back.bits, back.lanes),
                (dtype.code, dtype.bits, dtype.lanes),
                "{typestr}"
            );
        }
    }

    #[test]
    fn dtypes_dlpack_does_not_define_are_refused_by_name() {
        for (dtype, why) in [
            (dt(CAI_DL_INT, 4, 1), "width"),
            (dt(CAI_DL_OPAQUE_HANDLE, 64, 1), "opaque"),
            (dt(CAI_DL_FLOAT, 128, 1), "width"),
            (dt(CAI_DL_BOOL, 16, 1), "width"),
            (dt(CAI_DL_FLOAT4_E2M1FN, 4, 1), "is packed"),
        ] {
            let e = typestr_of(dtype, SubByte::Packed).unwrap_err();
            assert_eq!(e.status, Status::InvalidTypestr);
            assert!(e.message.contains(why), "{}", e.message);
        }
    }

    #[test]
    fn typestrs_without_a_dlpack_dtype_or_in_foreign_byte_order_are_refused() {
        let foreign = if NATIVE_BYTE_ORDER == b'<' { ">f4" } else { "<f4" };
        for (typestr, why) in
            [(foreign, "byte order"), ("<M8[ns]", "no DLPack dtype"), ("|V8", "dl_dtype does not say")]
        {
            let mut a = CaiArray::zeroed();
            a.set_typestr(typestr);
            let e = dtype_of_typestr(&a).unwrap_err();
            assert!(e.message.contains(why), "{typestr}: {}", e.message);
        }
    }

    #[test]
    fn typestrs_wider_than_a_dlpack_dtype_are_refused_not_truncated() {
        for typestr in ["<c32", "<f16"] {
            let mut a = CaiArray::zeroed();
            a.set_typestr(typestr);
            let e = dtype_of_typestr(&a).unwrap_err();
            assert_eq!(e.status, Status::InvalidTypestr);
            assert!(e.message.contains("bytes wide"), "{typestr}: {}", e.message);
        }
    }

    #[test]
    fn a_negative_device_id_is_refused() {
        let e =
            device_is_cuda_or_allowed_host(CaiDLDevice { device_type: CAI_DL_CUDA, device_id: -7 }, REFUSED)
                .unwrap_err();
        assert!(e.message.contains("device id is -7"), "{}", e.message);
    }

    #[test]
    fn strides_convert_between_elements_and_bytes() {
        let mut out = [0i64; 2];
        assert_eq!((stride_in_bytes(0, 3, 4).unwrap(), stride_in_bytes(1, -1, 4).unwrap()), (12, -4));
        strides_in_elements(&[12, -4], 4, &mut out).unwrap();
        assert_eq!(out, [3, -1]);
        let e = strides_in_elements(&[6], 4, &mut out).unwrap_err();
        assert_eq!(e.status, Status::InvalidStrides);
        assert!(e.message.contains("strides[0] = 6 bytes"), "{}", e.message);
        // (2^63 - 1) * 4 is no negative byte stride divided as unsigned: no hint.
        let e = stride_in_bytes(0, i64::MAX, 4).unwrap_err();
        assert_eq!(e.status, Status::Overflow);
        assert!(!e.message.contains("modulo"), "{}", e.message);
    }

    #[test]
    fn a_negative_stride_written_unsigned_is_refused_with_its_likely_cause() {
        // CuPy 14.2's __dlpack__ of a float32 array with byte strides (16, -8), as read on a GPU.
        let e = stride_in_bytes(1, 4_611_686_018_427_387_902, 4).unwrap_err();
        assert_eq!(e.status, Status::Overflow);
        assert!(e
            .message
            .starts_with("strides[1] = 4611686018427387902 elements of 4 bytes overflow 64 bits"));
        assert!(e.message.contains("modulo 2^64 it is -8 bytes"), "{}", e.message);
    }

    #[test]
    fn devices_other_than_cuda_are_refused_by_name_and_host_only_when_asked() {
        let device = |device_type| CaiDLDevice { device_type, device_id: 0 };
        let allowed = AllowHost { allowed: true, ..REFUSED };
        assert!(device_is_cuda_or_allowed_host(device(CAI_DL_CUDA), REFUSED).is_ok());
        assert!(device_is_cuda_or_allowed_host(device(CAI_DL_CUDA_MANAGED), REFUSED).is_ok());
        let e = device_is_cuda_or_allowed_host(device(CAI_DL_CPU), REFUSED).unwrap_err();
        assert!(e.message.contains("kDLCPU (1)") && e.message.contains("allow_host"), "{}", e.message);
        assert!(device_is_cuda_or_allowed_host(device(CAI_DL_CPU), allowed).is_ok());
        let e = device_is_cuda_or_allowed_host(device(10), allowed).unwrap_err();
        assert!(e.message.contains("kDLROCM (10)"), "{}", e.message);
    }

    const REFUSED: AllowHost = AllowHost { allowed: false, how: ALLOW_HOST_C_DLPACK };

    #[test]
    fn host_memory_is_refused_in_the_terms_of_the_callers_api_alone() {
        let cpu = CaiDLDevice { device_type: CAI_DL_CPU, device_id: 0 };
        for how in [ALLOW_HOST_C_DLPACK, ALLOW_HOST_RUST_DLPACK, &"pass allow_host=True"] {
            let e = device_is_cuda_or_allowed_host(cpu, AllowHost { allowed: false, how }).unwrap_err();
            assert_eq!(e.status, Status::HostMemory);
            assert_eq!(
                e.message,
                format!("the tensor is on kDLCPU (1) device 0, host memory; to take it, {how}")
            );
        }
    }

    #[test]
    fn the_byte_offset_is_folded_into_the_pointer() {
        assert_eq!(data_with_byte_offset(0x1000 as *mut c_void, 24).unwrap(), 0x1018);
        assert_eq!(data_with_byte_offset(usize::MAX as *mut c_void, 1).unwrap_err().status, Status::Overflow);
    }

    /// A v3 `<f4` array of `ndim` dimensions at 0x1000 (extents 1, 2, 1, ...; strides, given
    /// or not, of a C-contiguous layout).
    fn f4_array_of_rank(ndim: usize, strides_given: u32) -> CaiArray {
        let mut array = CaiArray::zeroed();
        array.version = 3;
        array.ndim = ndim as i32;
        array.set_typestr("<f4");
        array.data = 0x1000;
        array.strides_given = strides_given;
        for i in 0..ndim {
            array.shape[i] = 1 + (i % 2) as i64;
            array.strides[i] = 4 << (ndim - 1 - i);
        }
        array
    }

    /// An export holds the array less its extents, sized to its rank: the tensor reads the
    /// shape and the strides in elements, and the release is handed the array as it was given
    /// (every field, its shape and its byte strides), strided or not, from 0-d to the widest.
    #[test]
    fn an_exported_array_reaches_its_release_as_it_was_handed_over() {
        use std::sync::Mutex;
        /// What a release saw: ndim, shape, strides, data, stream, owner.
        type Seen = (i32, Vec<i64>, Vec<i64>, u64, u64, usize);
        static SEEN: Mutex<Vec<Seen>> = Mutex::new(Vec::new());
        // Fields read in place, and extents only within the rank: past it they are unwritten.
        unsafe extern "C" fn record(array: *mut CaiArray) {
            let n = (*array).ndim as usize;
            let extents = |first: *const [i64; CAI_MAX_NDIM]| {
                std::slice::from_raw_parts(first.cast::<i64>(), n).to_vec()
            };
            SEEN.lock().unwrap().push((
                (*array).ndim,
                extents(std::ptr::addr_of!((*array).shape)),
                extents(std::ptr::addr_of!((*array).strides)),
                (*array).data,
                (*array).stream,
                (*array).owner as usize,
            ));
        }
        let host = CaiDLDevice { device_type: CAI_DL_CPU, device_id: 0 };
        // Ranks on both sides of INLINE_RANK: extents inside the export, and spilled.
        for (ndim, strides_given) in
            [(0usize, 0u32), (2, 1), (3, 0), (INLINE_RANK, 1), (INLINE_RANK + 1, 0), (CAI_MAX_NDIM, 1)]
        {
            let mut array = f4_array_of_rank(ndim, strides_given);
            array.stream = 7;
            array.owner = 0x55 as *mut c_void;
            array.release = Some(record);
            let given = array;
            let tensor = to_dlpack(&mut array, None, Some(host), Keeper::Array).unwrap();
            assert!(array.release.is_none(), "the tensor owns the array now");
            // SAFETY: the tensor just made; its shape and strides hold ndim entries each.
            unsafe {
                let dl = &(*tensor).dl_tensor;
                assert_eq!(std::slice::from_raw_parts(dl.shape, ndim), &given.shape[..ndim]);
                let elements: Vec<i64> = if strides_given == 1 {
                    given.strides[..ndim].iter().map(|s| s / 4).collect()
                } else {
                    let mut c = vec![0; ndim];
                    c_strides(&given.shape[..ndim], 1, &mut c).unwrap();
                    c
                };
                assert_eq!(std::slice::from_raw_parts(dl.strides, ndim), &elements[..]);
                ((*tensor).deleter.unwrap())(tensor);
            }
            let seen = SEEN.lock().unwrap().pop().expect("the release ran");
            let expected =
                (given.ndim, given.shape[..ndim].to_vec(), given.strides[..ndim].to_vec(), 0x1000, 7, 0x55);
            assert_eq!(seen, expected);
        }
    }

    #[test]
    fn an_export_that_keeps_an_object_lets_go_of_it_once_and_refuses_an_owning_array() {
        use std::sync::Mutex;
        static LET_GO: Mutex<Vec<usize>> = Mutex::new(Vec::new());
        unsafe fn let_go(object: *mut c_void) {
            LET_GO.lock().unwrap().push(object as usize);
        }
        unsafe extern "C" fn never(_: *mut CaiArray) {
            panic!("a borrowed array has no release to run");
        }
        let host = CaiDLDevice { device_type: CAI_DL_CPU, device_id: 0 };
        // Ranks on both sides of what the export holds inline (two extents a dimension here).
        for ndim in [0usize, 2, INLINE_RANK, 3 * INLINE_RANK / 2, 3 * INLINE_RANK / 2 + 1, CAI_MAX_NDIM] {
            let mut array = f4_array_of_rank(ndim, 1);
            let object = 0x77 + ndim;
            let keeper = Keeper::Object(KeptObject { object: object as *mut c_void, let_go });
            let tensor = to_dlpack(&mut array, None, Some(host), keeper).unwrap();
            // SAFETY: the tensor just made; its shape and strides hold ndim entries each.
            unsafe {
                let dl = &(*tensor).dl_tensor;
                assert_eq!(std::slice::from_raw_parts(dl.shape, ndim), &array.shape[..ndim]);
                let elements: Vec<i64> = array.strides[..ndim].iter().map(|s| s / 4).collect();
                assert_eq!(std::slice::from_raw_parts(dl.strides, ndim), &elements[..]);
                assert!(LET_GO.lock().unwrap().is_empty(), "kept until the deleter runs");
                ((*tensor).deleter.unwrap())(tensor);
            }
            assert_eq!(std::mem::take(&mut *LET_GO.lock().unwrap()), vec![object], "let go of once");
        }
        // An array that owns something would have its release never run: refused, nothing kept.
        let mut owning = CaiArray::zeroed();
        owning.version = 3;
        owning.set_typestr("<f4");
        owning.release = Some(never);
        let keeper = Keeper::Object(KeptObject { object: 0x99 as *mut c_void, let_go });
        let refused = to_dlpack_legacy(&mut owning, None, Some(host), keeper).unwrap_err();
        assert_eq!(refused.status, Status::InvalidArgument);
        assert!(refused.message.contains("owns nothing"), "{}", refused.message);
        assert!(owning.release.is_some(), "the refused array still owns what it owned");
        assert!(LET_GO.lock().unwrap().is_empty());
    }
}
