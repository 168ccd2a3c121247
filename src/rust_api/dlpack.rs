//! DLPack in and out: owned tensors (versioned and legacy), and an [`Array`] made of one or
//! moved into one.

use std::ptr::NonNull;

use crate::abi::{CaiArray, CaiDLDevice, CaiDLManagedTensor, CaiDLManagedTensorVersioned, CaiDLPackOptions};
use crate::dlpack::Keeper;
use crate::status::{Error, Result};
use crate::validate::Validated;

use super::Array;

/// A `DLManagedTensorVersioned` this value owns: dropping it runs its deleter once, and
/// [`into_raw`](DlpackTensor::into_raw) hands it to a DLPack consumer instead.
///
/// ```
/// use cai::{Array, CaiDLDevice, CAI_DL_CUDA, DlpackTensor};
/// let array = Array::builder("<f8", &[3, 2], 0x7f00_0000_1000).readonly(true).build()?;
/// let tensor: DlpackTensor = array.into_dlpack(Some(CaiDLDevice { device_type: CAI_DL_CUDA, device_id: 0 }))?;
/// let back = Array::from_dlpack(tensor, false)?;
/// assert_eq!((back.shape(), back.typestr(), back.readonly()), (&[3i64, 2][..], Some("<f8"), true));
/// # Ok::<(), cai::Error>(())
/// ```
#[derive(Debug)]
pub struct DlpackTensor {
    raw: NonNull<CaiDLManagedTensorVersioned>,
}

// SAFETY: the tensor is heap memory the producer hands over, and its deleter may run on any
// thread (from_raw's promise); nothing in it is tied to the thread that made it.
unsafe impl Send for DlpackTensor {}

// SAFETY: a shared reference gives only the pointer (`as_ptr`), which is unsafe to use.
unsafe impl Sync for DlpackTensor {}

impl DlpackTensor {
    /// Takes ownership of a producer's tensor.
    ///
    /// # Safety
    /// `raw` is a valid `DLManagedTensorVersioned` (cast to libcai's mirror of it) that the
    /// caller hands over: nothing else runs its deleter, which may be called on any thread
    /// (DLPack's rule; the tensor is `Send`).
    ///
    /// ```
    /// # use cai::{Array, CaiDLDevice, CAI_DL_CUDA};
    /// let array = Array::builder("<f4", &[2], 0x7f00_0000_1000).build()?;
    /// let raw = array.into_dlpack(Some(CaiDLDevice { device_type: CAI_DL_CUDA, device_id: 0 }))?.into_raw();
    /// // SAFETY: the tensor into_raw handed out, taken back once.
    /// let tensor = unsafe { cai::DlpackTensor::from_raw(raw) };
    /// // SAFETY: a valid tensor `tensor` owns, read while it does.
    /// assert_eq!(unsafe { (*tensor.as_ptr()).dl_tensor.ndim }, 1);
    /// drop(tensor); // the deleter runs once
    /// # Ok::<(), cai::Error>(())
    /// ```
    pub unsafe fn from_raw(raw: NonNull<CaiDLManagedTensorVersioned>) -> DlpackTensor {
        DlpackTensor { raw }
    }

    /// Hands the tensor to a consumer, which runs its deleter once.
    ///
    /// ```
    /// # use cai::{Array, CaiDLDevice, CAI_DL_CUDA};
    /// let array = Array::builder("<f4", &[2], 0x7f00_0000_1000).build()?;
    /// let raw = array.into_dlpack(Some(CaiDLDevice { device_type: CAI_DL_CUDA, device_id: 0 }))?.into_raw();
    /// // A consumer's part: read the tensor, then run its deleter once.
    /// // SAFETY: the tensor into_raw handed out, deleted once.
    /// unsafe {
    ///     assert_eq!((*raw.as_ptr()).dl_tensor.ndim, 1);
    ///     ((*raw.as_ptr()).deleter.unwrap())(raw.as_ptr());
    /// }
    /// # Ok::<(), cai::Error>(())
    /// ```
    pub fn into_raw(self) -> NonNull<CaiDLManagedTensorVersioned> {
        std::mem::ManuallyDrop::new(self).raw
    }

    /// The tensor, still owned by this value (see [`from_raw`](DlpackTensor::from_raw) for an
    /// example).
    pub fn as_ptr(&self) -> *mut CaiDLManagedTensorVersioned {
        self.raw.as_ptr()
    }
}

impl Drop for DlpackTensor {
    fn drop(&mut self) {
        // SAFETY: a valid tensor this value owns (from_raw's promise), deleted once.
        unsafe { crate::dlpack::discard(self.raw.as_ptr()) }
    }
}

/// A legacy (unversioned) `DLManagedTensor` this value owns, for consumers and producers that
/// predate DLPack 1.0: dropping it runs its deleter once, and
/// [`into_raw`](LegacyDlpackTensor::into_raw) hands it to a consumer instead. The legacy struct
/// has no read-only flag: a read-only array is refused on the way out, and an array taken in is
/// writable.
///
/// ```
/// use cai::{Array, CaiDLDevice, CAI_DL_CUDA, LegacyDlpackTensor, Status};
/// let cuda = CaiDLDevice { device_type: CAI_DL_CUDA, device_id: 0 };
/// let array = Array::builder("<i4", &[5], 0x7f00_0000_1000).build()?;
/// let tensor: LegacyDlpackTensor = array.into_dlpack_legacy(Some(cuda))?;
/// let back = Array::from_dlpack_legacy(tensor, false)?;
/// assert_eq!((back.shape(), back.typestr(), back.readonly()), (&[5i64][..], Some("<i4"), false));
///
/// let readonly = Array::builder("<i4", &[5], 0x7f00_0000_1000).readonly(true).build()?;
/// let refused = readonly.into_dlpack_legacy(Some(cuda)).unwrap_err();
/// assert_eq!(refused.error.status, Status::Readonly);
/// assert!(refused.array.readonly(), "the refused array is handed back");
/// # Ok::<(), cai::Error>(())
/// ```
#[derive(Debug)]
pub struct LegacyDlpackTensor {
    raw: NonNull<CaiDLManagedTensor>,
}

// SAFETY: as DlpackTensor's: heap memory handed over, a deleter callable on any thread.
unsafe impl Send for LegacyDlpackTensor {}

// SAFETY: a shared reference gives only the pointer (`as_ptr`), which is unsafe to use.
unsafe impl Sync for LegacyDlpackTensor {}

impl LegacyDlpackTensor {
    /// Takes ownership of a producer's legacy tensor.
    ///
    /// # Safety
    /// `raw` is a valid `DLManagedTensor` (cast to libcai's mirror of it) that the caller hands
    /// over: nothing else runs its deleter, which may be called on any thread.
    pub unsafe fn from_raw(raw: NonNull<CaiDLManagedTensor>) -> LegacyDlpackTensor {
        LegacyDlpackTensor { raw }
    }

    /// Hands the tensor to a consumer, which runs its deleter once.
    ///
    /// ```
    /// # use cai::{Array, CaiDLDevice, CAI_DL_CUDA};
    /// let array = Array::builder("<f4", &[2], 0x7f00_0000_1000).build()?;
    /// let tensor = array.into_dlpack_legacy(Some(CaiDLDevice { device_type: CAI_DL_CUDA, device_id: 0 }))?;
    /// let raw = tensor.into_raw();
    /// // SAFETY: the pointer into_raw gave, handed back once.
    /// let tensor = unsafe { cai::LegacyDlpackTensor::from_raw(raw) };
    /// drop(tensor); // its deleter runs once
    /// # Ok::<(), cai::Error>(())
    /// ```
    pub fn into_raw(self) -> NonNull<CaiDLManagedTensor> {
        std::mem::ManuallyDrop::new(self).raw
    }

    /// The tensor, still owned by this value.
    ///
    /// ```
    /// # use cai::{Array, CaiDLDevice, CAI_DL_CUDA};
    /// let array = Array::builder("<f4", &[2, 3], 0x7f00_0000_1000).build()?;
    /// let tensor = array.into_dlpack_legacy(Some(CaiDLDevice { device_type: CAI_DL_CUDA, device_id: 0 }))?;
    /// // SAFETY: a valid tensor, owned by `tensor` for this read.
    /// let ndim = unsafe { (*tensor.as_ptr()).dl_tensor.ndim };
    /// assert_eq!(ndim, 2);
    /// # Ok::<(), cai::Error>(())
    /// ```
    pub fn as_ptr(&self) -> *mut CaiDLManagedTensor {
        self.raw.as_ptr()
    }
}

impl Drop for LegacyDlpackTensor {
    fn drop(&mut self) {
        // SAFETY: a valid tensor this value owns (from_raw's promise), deleted once.
        unsafe { crate::dlpack::discard(self.raw.as_ptr()) }
    }
}

/// A refused [`Array::into_dlpack`] (or [`Array::into_dlpack_legacy`]): why, and the array,
/// handed back unchanged with its release not run, as the C functions leave theirs.
///
/// Converts into [`Error`] (dropping, and so releasing, the array), so that `?` works in a
/// function returning [`cai::Result`](crate::status::Result).
///
/// ```
/// use cai::{Array, CaiDLDevice, CAI_DL_CUDA, Status};
/// let cuda = CaiDLDevice { device_type: CAI_DL_CUDA, device_id: 0 };
/// let mask = Array::builder("|b1", &[3], 0x7f00_0000_2000).build()?;
/// let masked = Array::builder("<f4", &[3], 0x7f00_0000_1000).mask(mask).build()?;
/// let refused = masked.into_dlpack(Some(cuda)).unwrap_err();
/// assert_eq!(refused.error.status, Status::InvalidMask);
/// let (error, array) = refused.into_parts();
/// assert!(array.mask().is_some() && error.message.contains("mask"));
/// # Ok::<(), cai::Error>(())
/// ```
#[derive(Debug)]
pub struct IntoDlpackError {
    /// Why the array was refused.
    pub error: Error,
    /// The array, still the caller's.
    pub array: Array,
}

impl IntoDlpackError {
    /// The reason and the array (see [`IntoDlpackError`] for an example).
    pub fn into_parts(self) -> (Error, Array) {
        (self.error, self.array)
    }
}

impl std::fmt::Display for IntoDlpackError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.error.fmt(f)
    }
}

impl std::error::Error for IntoDlpackError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.error)
    }
}

impl From<IntoDlpackError> for Error {
    fn from(refused: IntoDlpackError) -> Error {
        refused.error
    }
}

impl Array {
    /// Takes a DLPack tensor as an array that owns it (`cai_from_dlpack`): its release runs
    /// the tensor's deleter once. CUDA device, pinned and managed memory are taken, and host
    /// (kDLCPU) memory when `allow_host` is true. On failure the tensor has been deleted.
    ///
    /// ```
    /// use cai::{Array, CaiDLDevice, CAI_DL_CPU, Status};
    /// let host = CaiDLDevice { device_type: CAI_DL_CPU, device_id: 0 };
    /// let tensor = Array::builder("<u1", &[16], 0x7f00_0000_1000).build()?.into_dlpack(Some(host))?;
    /// assert_eq!(Array::from_dlpack(tensor, false).unwrap_err().status, Status::HostMemory);
    /// let tensor = Array::builder("<u1", &[16], 0x7f00_0000_1000).build()?.into_dlpack(Some(host))?;
    /// assert_eq!(Array::from_dlpack(tensor, true)?.layout()?.nbytes, 16);
    /// # Ok::<(), cai::Error>(())
    /// ```
    pub fn from_dlpack(tensor: DlpackTensor, allow_host: bool) -> Result<Array> {
        let options = CaiDLPackOptions { allow_host: allow_host.into(), ..Default::default() };
        let mut taken = CaiArray::zeroed();
        // SAFETY: the tensor is valid and handed over (into_raw): from_dlpack deletes it on
        // failure, and on success `taken` owns it.
        unsafe {
            crate::dlpack::from_dlpack(
                tensor.into_raw().as_ptr(),
                &options,
                crate::dlpack::ALLOW_HOST_RUST_DLPACK,
                &mut taken,
            )?
        };
        // SAFETY: the struct from_dlpack made: its pointers are none, its release the deleter's.
        Ok(unsafe { Array::from_raw(taken) })
    }

    /// Takes a legacy DLPack tensor (`cai_from_dlpack_legacy`), as [`from_dlpack`](Array::from_dlpack)
    /// takes a versioned one; the array is writable (the legacy struct cannot say read-only).
    /// On failure the tensor has been deleted. See [`LegacyDlpackTensor`] for an example.
    pub fn from_dlpack_legacy(tensor: LegacyDlpackTensor, allow_host: bool) -> Result<Array> {
        let options = CaiDLPackOptions { allow_host: allow_host.into(), ..Default::default() };
        let mut taken = CaiArray::zeroed();
        // SAFETY: as from_dlpack's: a valid tensor handed over, deleted on failure, owned by
        // `taken` on success.
        unsafe {
            crate::dlpack::from_dlpack_legacy(
                tensor.into_raw().as_ptr(),
                &options,
                crate::dlpack::ALLOW_HOST_RUST_DLPACK_LEGACY,
                &mut taken,
            )?
        };
        // SAFETY: the struct from_dlpack_legacy made: no pointers, its release the deleter's.
        Ok(unsafe { Array::from_raw(taken) })
    }

    /// Moves the array into a DLPack tensor (`cai_to_dlpack`) whose deleter runs the array's
    /// release once. `device` says where the data is; `None` asks the driver. Refused, with
    /// the array handed back in the error, its release not run: OpenCL memory, a mask, a
    /// typestr DLPack has no dtype for, a byte stride that is not a whole number of items. No
    /// sync is done: import the array first. See [`DlpackTensor`] and [`IntoDlpackError`] for
    /// examples.
    pub fn into_dlpack(
        self,
        device: Option<CaiDLDevice>,
    ) -> std::result::Result<DlpackTensor, IntoDlpackError> {
        self.export(device, crate::dlpack::to_dlpack).map(|raw| DlpackTensor { raw })
    }

    /// Moves the array into a legacy DLPack tensor (`cai_to_dlpack_legacy`), as
    /// [`into_dlpack`](Array::into_dlpack) does; a read-only array is refused too
    /// ([`Status::Readonly`](crate::status::Status::Readonly)), the legacy struct having no flag for it.
    /// See [`LegacyDlpackTensor`] for an example.
    pub fn into_dlpack_legacy(
        self,
        device: Option<CaiDLDevice>,
    ) -> std::result::Result<LegacyDlpackTensor, IntoDlpackError> {
        self.export(device, crate::dlpack::to_dlpack_legacy).map(|raw| LegacyDlpackTensor { raw })
    }

    /// Runs one of the core's exports on the struct: the tensor it made (the array then owns
    /// nothing), or the refusal with the array, unchanged (the core leaves it so on failure).
    fn export<T>(
        mut self,
        device: Option<CaiDLDevice>,
        to_tensor: fn(&mut CaiArray, Option<&Validated>, Option<CaiDLDevice>, Keeper) -> Result<*mut T>,
    ) -> std::result::Result<NonNull<T>, IntoDlpackError> {
        match to_tensor(self.raw_mut(), None, device, Keeper::Array) {
            // `self` owns nothing now (its release was cleared): dropping it releases nothing.
            Ok(raw) => Ok(NonNull::new(raw).expect("the core's export returned a NULL tensor on success")),
            Err(error) => Err(IntoDlpackError { error, array: self }),
        }
    }
}
