//! DLPack in and out: an owned versioned tensor, and an [`Array`] made of one or moved into one.

use std::ptr::NonNull;

use crate::abi::{CaiArray, CaiDLDevice, CaiDLManagedTensorVersioned, CaiDLPackOptions};
use crate::status::Result;

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
    pub fn into_raw(self) -> NonNull<CaiDLManagedTensorVersioned> {
        std::mem::ManuallyDrop::new(self).raw
    }

    /// The tensor, still owned by this value.
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

impl Array {
    /// Takes a DLPack tensor as an array that owns it (`cai_from_dlpack`): its release runs
    /// the tensor's deleter once. CUDA device, pinned and managed memory are taken, and host
    /// (kDLCPU) memory when `allow_host` is true. On failure the tensor has been deleted.
    pub fn from_dlpack(tensor: DlpackTensor, allow_host: bool) -> Result<Array> {
        let options = CaiDLPackOptions { allow_host: allow_host.into(), ..Default::default() };
        let mut taken = CaiArray::zeroed();
        // SAFETY: the tensor is valid and handed over (into_raw): from_dlpack deletes it on
        // failure, and on success `taken` owns it.
        unsafe { crate::dlpack::from_dlpack(tensor.into_raw().as_ptr(), &options, &mut taken)? };
        // SAFETY: the struct from_dlpack made: its pointers are none, its release the deleter's.
        Ok(unsafe { Array::from_raw(taken) })
    }

    /// Moves the array into a DLPack tensor (`cai_to_dlpack`) whose deleter runs the array's
    /// release once. `device` says where the data is; `None` asks the driver. Refused (and the
    /// array released): OpenCL memory, a mask, a typestr DLPack has no dtype for, a byte stride
    /// that is not a whole number of items. No sync is done: import the array first.
    pub fn into_dlpack(mut self, device: Option<CaiDLDevice>) -> Result<DlpackTensor> {
        let raw = crate::dlpack::to_dlpack(self.raw_mut(), device)?;
        // SAFETY: a tensor to_dlpack just made, owned by no one else; `self` owns nothing now
        // (its release was cleared), so dropping it releases nothing.
        Ok(unsafe { DlpackTensor::from_raw(NonNull::new_unchecked(raw)) })
    }
}
