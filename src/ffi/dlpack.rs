//! DLPack tensors to and from CaiArrays.

use super::{guard, optional, required_mut};
use crate::abi::{
    CaiArray, CaiDLDevice, CaiDLManagedTensor, CaiDLManagedTensorVersioned, CaiDLPackOptions, CaiError,
};
use crate::dlpack::Keeper;
use crate::status::{CaiStatus, Error, Status};
use crate::validate::Validated;

/// Takes a DLPack tensor (cast a `DLManagedTensorVersioned *` to this type) as a CaiArray
/// that owns it: `*out`'s release runs the tensor's deleter exactly once. Accepts kDLCUDA,
/// kDLCUDAHost and kDLCUDAManaged memory, and kDLCPU when `options->allow_host` is 1; strides
/// become bytes, `byte_offset` is folded into `data`, the read-only flag carries over, NULL
/// strides mean C-contiguous. `options` may be NULL for the defaults.
///
/// A non-NULL `tensor` is always taken: on failure its deleter has run, and of a tensor whose
/// major version libcai does not know (CAI_ERROR_ABI_VERSION) nothing but the version and the
/// deleter is read. `*out` is written only on success (overwritten: release what it owned
/// first). The array has no stream: the DLPack exchange orders the data before handing it over.
///
/// # Safety
/// `tensor` is NULL or a valid `DLManagedTensorVersioned` the caller hands over (it is not used
/// after the call); `options` is NULL or points to a valid `CaiDLPackOptions`; `out` is NULL or
/// points to a writable `CaiArray`; `error` is NULL or points to a writable `CaiError`.
#[no_mangle]
pub unsafe extern "C" fn cai_from_dlpack(
    tensor: *mut CaiDLManagedTensorVersioned,
    options: *const CaiDLPackOptions,
    out: *mut CaiArray,
    error: *mut CaiError,
) -> CaiStatus {
    // SAFETY: a tensor the caller hands over, of the kind these two functions expect.
    guard(error, || unsafe { take(tensor, options, out, crate::dlpack::from_dlpack) })
}

/// As `cai_from_dlpack`, for the legacy struct (cast a `DLManagedTensor *`), which has no
/// version and no read-only flag: the array is writable.
///
/// # Safety
/// `tensor` is NULL or a valid `DLManagedTensor` the caller hands over (it is not used after the
/// call); `options` is NULL or points to a valid `CaiDLPackOptions`; `out` is NULL or points to a
/// writable `CaiArray`; `error` is NULL or points to a writable `CaiError`.
#[no_mangle]
pub unsafe extern "C" fn cai_from_dlpack_legacy(
    tensor: *mut CaiDLManagedTensor,
    options: *const CaiDLPackOptions,
    out: *mut CaiArray,
    error: *mut CaiError,
) -> CaiStatus {
    // SAFETY: a tensor the caller hands over, of the kind these two functions expect.
    guard(error, || unsafe { take(tensor, options, out, crate::dlpack::from_dlpack_legacy) })
}

/// The arguments of both `cai_from_dlpack`s: a NULL `tensor` is refused as is; a non-NULL one
/// is taken whatever happens (a NULL `out` releases it), and `*out` is written only on success.
///
/// # Safety
/// A non-NULL `tensor` is valid, of the struct `from` expects, and handed over.
unsafe fn take<T: crate::dlpack::Managed>(
    tensor: *mut T,
    options: *const CaiDLPackOptions,
    out: *mut CaiArray,
    from: unsafe fn(
        *mut T,
        &CaiDLPackOptions,
        crate::dlpack::HostWords,
        &mut CaiArray,
    ) -> crate::status::Result<Validated>,
) -> crate::status::Result<()> {
    if tensor.is_null() {
        return Err(Error::new(Status::NullArgument, "tensor is NULL"));
    }
    let options = optional(options).copied().unwrap_or_default();
    let Some(out) = super::optional_mut(out) else {
        crate::dlpack::discard(tensor);
        return Err(Error::new(Status::NullArgument, "out is NULL"));
    };
    let mut taken = CaiArray::zeroed();
    from(tensor, &options, crate::dlpack::ALLOW_HOST_C_DLPACK, &mut taken)?;
    taken.copy_defined_to(out);
    Ok(())
}

/// Moves `array` into a new DLPack tensor (a `DLManagedTensorVersioned *` once cast), whose
/// deleter runs the array's release exactly once and frees the tensor. `device` says where the
/// data is; NULL asks the driver (device memory is kDLCUDA, pinned host memory kDLCUDAHost,
/// managed memory kDLCUDAManaged). Strides become element counts (a byte stride that is not a
/// whole number of items is CAI_ERROR_INVALID_STRIDES), always given; a read-only array sets
/// the read-only flag. Refused: a typestr with no DLPack dtype or in a foreign byte order, a
/// mask. No sync is done: import the array on the consumer's stream first.
///
/// On success `*out` is the tensor and `array` owns nothing (its release is cleared); on
/// failure both are unchanged.
///
/// # Safety
/// `array` is NULL or points to a valid `CaiArray` (its `mask` and `descr`, when set, point to what
/// its fields say), which nothing else reads or writes during the call; `device` is NULL or points
/// to a valid `CaiDLDevice`; `out` is NULL or points to a writable pointer; `error` is NULL or
/// points to a writable `CaiError`.
#[no_mangle]
pub unsafe extern "C" fn cai_to_dlpack(
    array: *mut CaiArray,
    device: *const CaiDLDevice,
    out: *mut *mut CaiDLManagedTensorVersioned,
    error: *mut CaiError,
) -> CaiStatus {
    guard(error, || export(array, device, out, crate::dlpack::to_dlpack))
}

/// As `cai_to_dlpack`, as the legacy struct (a `DLManagedTensor *` once cast), which cannot
/// say read-only: a read-only array is CAI_ERROR_READONLY.
///
/// # Safety
/// `array` is NULL or points to a valid `CaiArray` (its `mask` and `descr`, when set, point to what
/// its fields say), which nothing else reads or writes during the call; `device` is NULL or points
/// to a valid `CaiDLDevice`; `out` is NULL or points to a writable pointer; `error` is NULL or
/// points to a writable `CaiError`.
#[no_mangle]
pub unsafe extern "C" fn cai_to_dlpack_legacy(
    array: *mut CaiArray,
    device: *const CaiDLDevice,
    out: *mut *mut CaiDLManagedTensor,
    error: *mut CaiError,
) -> CaiStatus {
    guard(error, || export(array, device, out, crate::dlpack::to_dlpack_legacy))
}

/// One of the core's two exports (`to_dlpack`, `to_dlpack_legacy`).
type Export<T> =
    fn(&mut CaiArray, Option<&Validated>, Option<CaiDLDevice>, Keeper) -> crate::status::Result<*mut T>;

/// The arguments of both `cai_to_dlpack`s: `array` and `out` required, `device` optional;
/// `*out` written only on success.
fn export<T>(
    array: *mut CaiArray,
    device: *const CaiDLDevice,
    out: *mut *mut T,
    to: Export<T>,
) -> crate::status::Result<()> {
    let array = required_mut(array, "array")?;
    let out = required_mut(out, "out")?;
    *out = to(array, None, optional(device).copied(), Keeper::Array)?;
    Ok(())
}
