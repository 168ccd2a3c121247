//! The Rust API: the same core as the C functions, with ownership and lifetimes the compiler
//! checks. An [`Array`] owns its description and runs the producer's release once, when it is
//! dropped; an [`ArrayView`] borrows one; both read through [`ArrayRef`]. Everything here is
//! safe except what hands libcai a pointer or a driver handle it cannot check (a raw struct, a
//! DLPack tensor, a stream, an OpenCL object): those constructors are `unsafe` and say what
//! they need.

mod array;
mod dlpack;
mod ipc;
mod options;

pub use array::{Array, ArrayBuilder, ArrayRef, ArrayView, Memory, OpenClStream};
pub use dlpack::{DlpackTensor, IntoDlpackError, LegacyDlpackTensor};
pub use ipc::IpcDescriptor;
pub use options::{ImportOptions, PendingMode, PointerCheck, SyncMode};

use std::ffi::c_void;

use crate::abi::{CaiDtype, CaiLayout, CaiPointerInfo};
use crate::status::Result;

/// What a typestr describes, as numpy's dtype reports it.
///
/// ```
/// let dtype = cai::Dtype::parse("<c16")?;
/// assert_eq!((dtype.itemsize, dtype.kind, dtype.byte_order), (16, 'c', '<'));
/// assert!(cai::Dtype::parse("<f3").is_err());
/// # Ok::<(), cai::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Dtype {
    /// Bytes per element.
    pub itemsize: u64,
    /// numpy's kind: one of `b i u f c m M S U V`.
    pub kind: char,
    /// `<` little-endian, `>` big-endian, `|` not applicable; the host's order is resolved.
    pub byte_order: char,
}

impl Dtype {
    /// Parses a numpy typestr (e.g. `"<f4"`, `"|V12"`, `"<M8[ns]"`) as numpy would.
    ///
    /// ```
    /// let datetime = cai::Dtype::parse("<M8[ns]")?;
    /// assert_eq!((datetime.kind, datetime.itemsize), ('M', 8));
    /// assert_eq!(cai::Dtype::parse("<f5").unwrap_err().status, cai::Status::InvalidTypestr);
    /// # Ok::<(), cai::Error>(())
    /// ```
    pub fn parse(typestr: &str) -> Result<Dtype> {
        crate::dtype::parse_typestr(typestr.as_bytes()).map(Dtype::from)
    }

    /// True when elements can be read without swapping bytes on this host.
    ///
    /// ```
    /// let (little, big, bytes) = (cai::Dtype::parse("<i4")?, cai::Dtype::parse(">i4")?, cai::Dtype::parse("|u1")?);
    /// assert_eq!((little.is_native(), big.is_native()), (cfg!(target_endian = "little"), cfg!(target_endian = "big")));
    /// assert!(bytes.is_native());
    /// # Ok::<(), cai::Error>(())
    /// ```
    pub fn is_native(&self) -> bool {
        CaiDtype::from(*self).is_native()
    }
}

impl From<CaiDtype> for Dtype {
    fn from(raw: CaiDtype) -> Dtype {
        Dtype { itemsize: raw.itemsize, kind: raw.kind() as char, byte_order: raw.byteorder() as char }
    }
}

impl From<Dtype> for CaiDtype {
    fn from(dtype: Dtype) -> CaiDtype {
        CaiDtype {
            itemsize: dtype.itemsize,
            kind: dtype.kind as u8 as std::os::raw::c_char,
            byteorder: dtype.byte_order as u8 as std::os::raw::c_char,
        }
    }
}

/// Layout facts about a valid array, as `cai_layout` reports them.
///
/// ```
/// // 3 rows of 4 floats, every other row: 32-byte rows.
/// let array = cai::Array::builder("<f4", &[3, 4], 0x7f00_0000_1000).strides(&[32, 4]).build()?;
/// let layout: cai::Layout = array.layout()?;
/// assert_eq!((layout.element_count, layout.nbytes, layout.extent), (12, 48, (0, 80)));
/// assert!(!layout.c_contiguous && !layout.f_contiguous && layout.strides_itemsize_aligned);
/// # Ok::<(), cai::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Layout {
    /// Number of elements (1 for a 0-d array, 0 when any extent is 0).
    pub element_count: u64,
    /// `element_count` times the itemsize.
    pub nbytes: u64,
    /// Byte offsets from `data`, `[begin, end)`, that the elements touch (begin <= 0 with
    /// negative strides; both 0 for a zero-size array).
    pub extent: (i64, i64),
    /// The elements are laid out in C order with no gaps (size-1 dimensions ignored).
    pub c_contiguous: bool,
    /// The elements are laid out in Fortran order with no gaps (size-1 dimensions ignored).
    pub f_contiguous: bool,
    /// Every stride is a multiple of the itemsize.
    pub strides_itemsize_aligned: bool,
}

impl From<CaiLayout> for Layout {
    fn from(raw: CaiLayout) -> Layout {
        Layout {
            element_count: raw.element_count,
            nbytes: raw.nbytes,
            extent: (raw.extent_begin, raw.extent_end),
            c_contiguous: raw.c_contiguous == 1,
            f_contiguous: raw.f_contiguous == 1,
            strides_itemsize_aligned: raw.strides_itemsize_aligned == 1,
        }
    }
}

/// What the driver reports about a data pointer (CUDA) or buffer (OpenCL: `device_pointer`
/// and `allocation_base` the `cl_mem`, `allocation_size` its size, `context` its
/// `cl_context`, `device_ordinal` -1).
///
/// ```
/// use cai::{ImportOptions, PointerCheck};
/// let array = cai::Array::builder("<f4", &[4], 0x7f00_0000_1000).build()?;
/// // Not asked of the driver: `checked` false, and the other fields say nothing.
/// let info: cai::PointerInfo = array.import(&ImportOptions::new().pointer_check(PointerCheck::Never))?;
/// assert!(!info.checked);
/// # Ok::<(), cai::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PointerInfo {
    /// The pointer as usable in the calling thread's current context.
    pub device_pointer: u64,
    /// Start of the allocation holding the pointer.
    pub allocation_base: u64,
    /// Size in bytes of that allocation.
    pub allocation_size: u64,
    /// The allocation's `CUcontext` (may be NULL for managed memory), or the buffer's
    /// `cl_context`. A handle to compare, never dereferenced by libcai.
    pub context: *mut c_void,
    /// Ordinal of the device the allocation belongs to (-1 for OpenCL).
    pub device_ordinal: i32,
    /// `CUmemorytype`: 1 host (pinned and mapped), 2 device, 4 unified; 0 for OpenCL.
    pub memory_type: u32,
    /// Managed (`cudaMallocManaged`) memory.
    pub is_managed: bool,
    /// The driver was asked; false when the check was skipped (zero-size array, no driver, or
    /// [`PointerCheck::Never`]), and then the other fields say nothing.
    pub checked: bool,
}

impl From<CaiPointerInfo> for PointerInfo {
    fn from(raw: CaiPointerInfo) -> PointerInfo {
        PointerInfo {
            device_pointer: raw.device_pointer,
            allocation_base: raw.allocation_base,
            allocation_size: raw.allocation_size,
            context: raw.context,
            device_ordinal: raw.device_ordinal,
            memory_type: raw.memory_type,
            is_managed: raw.is_managed == 1,
            checked: raw.checked == 1,
        }
    }
}

/// Asks the CUDA driver about a data pointer, loading the driver if need be. Fails with
/// [`Status::NotDevicePointer`](crate::status::Status::NotDevicePointer) for memory the device cannot
/// reach, [`Status::NoDriver`](crate::status::Status::NoDriver) when no driver loads.
///
/// ```
/// use cai::Status;
/// // An address no allocation of the driver's holds (or no driver on this machine).
/// let refused = cai::pointer_info(0x10).unwrap_err();
/// assert!(matches!(refused.status, Status::NotDevicePointer | Status::NoDriver), "{refused}");
/// ```
pub fn pointer_info(pointer: u64) -> Result<PointerInfo> {
    crate::device_calls::pointer_info(pointer).map(PointerInfo::from)
}

/// Loads the CUDA driver if it is not loaded yet: its version (e.g. 12040), or
/// [`Status::NoDriver`](crate::status::Status::NoDriver) with the loader's message.
///
/// ```
/// match cai::driver_version() {
///     Ok(version) => assert!(version >= 1000, "CUDA versions are 1000 * major + 10 * minor"),
///     Err(error) => assert_eq!(error.status, cai::Status::NoDriver, "{error}"),
/// }
/// ```
pub fn driver_version() -> Result<i32> {
    crate::device_calls::driver_version()
}

/// Runs the releases [`Array::release_after`] queued whose work has completed
/// ([`PendingMode::Poll`], never waits), or all of them, waiting on the host for each
/// ([`PendingMode::Wait`]: what a program calls before it exits, as libcai runs nothing at
/// exit), in the calling thread (`cai_release_pending`). Returns how many are still queued.
/// With nothing queued no driver is loaded. A query the driver fails still runs that release;
/// the first such failure is returned once every due release has run.
///
/// ```
/// // Nothing was queued: nothing to run, and no driver is asked.
/// assert_eq!(cai::release_pending(cai::PendingMode::Wait)?, 0);
/// # Ok::<(), cai::Error>(())
/// ```
pub fn release_pending(mode: PendingMode) -> Result<u64> {
    crate::device_calls::release_pending(mode == PendingMode::Wait)
}
