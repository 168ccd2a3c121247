//! Arrays owned and borrowed, and what both read through.

use std::ops::Deref;

use crate::abi::{
    CaiArray, CaiDLDataType, CaiField, CaiSyncOptions, CAI_MAX_NDIM, CAI_MEMORY_OPENCL,
    CAI_OPENCL_STREAM_EVENT, CAI_OPENCL_STREAM_QUEUE, CAI_STREAM_NONE,
};
use crate::description::Description;
use crate::status::{Error, Result, Status};

use super::{Dtype, ImportOptions, Layout, PointerInfo, SyncMode};

/// A described array, read through a reference: what [`Array`] and [`ArrayView`] dereference
/// to. Every method reads the struct; none frees, writes or dereferences the data.
///
/// ```
/// use cai::{ArrayRef, Memory};
/// fn describe(array: &ArrayRef) -> String {
///     format!("{:?} {} {:?} {:?}", array.shape(), array.typestr().unwrap_or("?"), array.strides(), array.memory())
/// }
/// let array = cai::Array::builder("<i8", &[2, 3], 0x7f00_0000_1000).strides(&[8, 16]).readonly(true).build()?;
/// assert_eq!(describe(&array), "[2, 3] <i8 Some([8, 16]) Cuda");
/// assert_eq!((array.version(), array.data(), array.readonly(), array.stream()), (3, 0x7f00_0000_1000, true, 0));
/// assert!(array.fields().is_empty() && array.mask().is_none());
/// array.validate()?;
/// assert_eq!(array.dtype()?.itemsize, 8);
/// assert_eq!(array.memory(), Memory::Cuda);
/// # Ok::<(), cai::Error>(())
/// ```
#[repr(transparent)]
pub struct ArrayRef {
    raw: CaiArray,
}

// SAFETY: an ArrayRef is only ever reached by shared reference (from an Array, a view, or a
// borrowed struct), and every method reads: the struct and what its pointers reach are not
// written while it is borrowed (the constructors' promise), and the core's functions keep no
// thread-local state. Reading plain memory and handing stream handles to the driver is sound
// from any thread (CUDA streams and OpenCL queues are not tied to a host thread).
unsafe impl Sync for ArrayRef {}

impl ArrayRef {
    /// # Safety
    /// As [`ArrayView::from_raw`].
    unsafe fn from_raw(raw: &CaiArray) -> &ArrayRef {
        // SAFETY: ArrayRef is a transparent wrapper of CaiArray; the lifetime carries over.
        unsafe { &*(raw as *const CaiArray).cast::<ArrayRef>() }
    }

    /// The C struct, to hand to a C function that reads it (its `release` is not the caller's
    /// to run).
    pub fn as_raw(&self) -> &CaiArray {
        &self.raw
    }

    /// Checks every rule of the CUDA Array Interface that needs no driver, the mask's included.
    pub fn validate(&self) -> Result<()> {
        crate::validate::validate(&self.raw).map(drop)
    }

    /// Validates the array and reports its layout.
    pub fn layout(&self) -> Result<Layout> {
        crate::validate::layout_of(&self.raw, None).map(Layout::from)
    }

    /// Validates the array and reports its element type.
    pub fn dtype(&self) -> Result<Dtype> {
        crate::validate::validate(&self.raw).map(|validated| validated.dtype.into())
    }

    /// Validates the array and reports its elements' type exactly, as DLPack names it: the
    /// type the struct carries (`dl_dtype`: bfloat16, a float8, ...), else its numeric
    /// typestr's; `None` for a typestr DLPack has no type for (opaque, structured, dates).
    ///
    /// ```
    /// let bf16 = cai::CaiDLDataType { code: cai::CAI_DL_BFLOAT, bits: 16, lanes: 1 };
    /// let array = cai::Array::builder("<V2", &[8], 0x7f00_0000_1000).dl_dtype(bf16).build()?;
    /// assert_eq!(array.element_type()?, Some(bf16));
    /// assert_eq!(array.element_type_name()?.as_deref(), Some("bfloat16"));
    /// # Ok::<(), cai::Error>(())
    /// ```
    pub fn element_type(&self) -> Result<Option<CaiDLDataType>> {
        let validated = crate::validate::validate(&self.raw)?;
        Ok(crate::element_type::element_type(self.raw.dl_dtype, validated.dtype))
    }

    /// The name torch, jax and ml_dtypes share for [`element_type`](Self::element_type)
    /// (`"bfloat16"`, `"float8_e4m3fn"`, `"float32"`), or `None`.
    pub fn element_type_name(&self) -> Result<Option<String>> {
        Ok(self.element_type()?.and_then(crate::element_type::name_of))
    }

    /// Consumer side: validates the array, checks its data with the driver and orders the
    /// consumer after the producer, as `options` say (`cai_import`). Loads the driver only
    /// for a pointer check or a sync.
    pub fn import(&self, options: &ImportOptions) -> Result<PointerInfo> {
        crate::device_calls::import(&self.raw, options.as_raw()).map(PointerInfo::from)
    }

    /// Producer side: the array as an [`IpcDescriptor`](super::IpcDescriptor) another process on this machine opens
    /// ([`Array::ipc_open`]), `cai_ipc_export`: device memory from cuMemAlloc only (managed,
    /// host and pool memory, masks and named fields: [`Status::NotShareable`]); pending work on
    /// the array's stream travels as an interprocess event. Keep the memory (and this process)
    /// alive while any importer uses it. A zero-size array needs no driver.
    pub fn ipc_export(&self) -> Result<super::IpcDescriptor> {
        crate::device_calls::ipc_export(&self.raw).map(super::IpcDescriptor::from_raw)
    }

    /// Orders `consumer_stream` (0 for none) after the array's stream in `mode`, without the
    /// pointer check (`cai_sync`). An array with no stream needs nothing and loads no driver.
    ///
    /// # Safety
    /// A `consumer_stream` other than 0, 1 and 2 is a live `CUstream` (or, for OpenCL memory,
    /// `cl_command_queue`).
    ///
    /// ```
    /// let array = cai::Array::builder("<f4", &[4], 0x7f00_0000_1000).build()?;
    /// // SAFETY: 0 names no stream. The array has none either: nothing to wait for.
    /// unsafe { array.sync(0, cai::SyncMode::Blocking) }?;
    /// # Ok::<(), cai::Error>(())
    /// ```
    pub unsafe fn sync(&self, consumer_stream: u64, mode: SyncMode) -> Result<()> {
        let options = CaiSyncOptions { consumer_stream, sync_mode: mode.code(), ..Default::default() };
        crate::device_calls::sync(&self.raw, &options)
    }

    /// The CUDA Array Interface version the descriptor follows (0 to 3).
    pub fn version(&self) -> i32 {
        self.raw.version
    }

    /// The extents, `ndim` of them (none when `ndim` is out of range).
    pub fn shape(&self) -> &[i64] {
        &self.raw.shape[..self.ndim()]
    }

    /// The byte strides, or `None` for C-contiguous (the dict's absent or `None` strides).
    pub fn strides(&self) -> Option<&[i64]> {
        (self.raw.strides_given == 1).then(|| &self.raw.strides[..self.ndim()])
    }

    fn ndim(&self) -> usize {
        usize::try_from(self.raw.ndim).map_or(0, |ndim| ndim.min(CAI_MAX_NDIM))
    }

    /// The numpy typestr, e.g. `"<f4"` (`None` when the buffer holds no NUL-terminated UTF-8).
    pub fn typestr(&self) -> Option<&str> {
        self.raw.typestr_bytes().and_then(|bytes| std::str::from_utf8(bytes).ok())
    }

    /// The data: a CUDA device pointer, or a `cl_mem` for OpenCL memory; 0 for a zero-size array.
    pub fn data(&self) -> u64 {
        self.raw.data
    }

    /// The data is read-only.
    pub fn readonly(&self) -> bool {
        self.raw.readonly == 1
    }

    /// The producer's stream: for CUDA memory 0 (none), 1, 2 or a `CUstream`; for OpenCL
    /// memory a `cl_command_queue` or `cl_event` (see [`ArrayRef::memory`]).
    pub fn stream(&self) -> u64 {
        self.raw.stream
    }

    /// What the data is.
    pub fn memory(&self) -> Memory {
        match self.raw.memory {
            CAI_MEMORY_OPENCL => Memory::OpenCl {
                byte_offset: self.raw.byte_offset,
                stream_is_event: self.raw.stream_kind == CAI_OPENCL_STREAM_EVENT,
            },
            _ => Memory::Cuda,
        }
    }

    /// The structured type's fields (empty for a plain typestr).
    pub fn fields(&self) -> &[CaiField] {
        match (self.raw.descr.is_null(), self.raw.descr_count) {
            (true, _) | (_, 0) => &[],
            // SAFETY: every way to make an ArrayRef promises `descr` holds `descr_count`
            // fields for as long as the struct is borrowed.
            (false, count) => unsafe { std::slice::from_raw_parts(self.raw.descr, count as usize) },
        }
    }

    /// The mask: true where the data is valid.
    pub fn mask(&self) -> Option<ArrayView<'_>> {
        // SAFETY: every way to make an ArrayRef promises `mask` is NULL or a valid struct for
        // as long as this one is borrowed.
        unsafe { self.raw.mask.as_ref().map(|mask| ArrayView::from_raw(mask)) }
    }
}

impl std::fmt::Debug for ArrayRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Array")
            .field("shape", &self.shape())
            .field("typestr", &self.typestr())
            .field("strides", &self.strides())
            .field("data", &format_args!("{:#x}", self.data()))
            .field("readonly", &self.readonly())
            .field("stream", &self.stream())
            .field("memory", &self.memory())
            .finish()
    }
}

/// What an array's data is.
///
/// ```
/// use cai::{Memory, OpenClStream};
/// // SAFETY: never imported or synced, so the made-up handles are never dereferenced.
/// let array = unsafe { cai::Array::builder("<u1", &[64], 0x5000).opencl(16, OpenClStream::Event(0x6000)) }.build()?;
/// assert_eq!(array.memory(), Memory::OpenCl { byte_offset: 16, stream_is_event: true });
/// assert_eq!(array.stream(), 0x6000);
/// # Ok::<(), cai::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Memory {
    /// A CUDA device pointer (the CUDA Array Interface's own kind).
    Cuda,
    /// An OpenCL `cl_mem` (the Buffer Interface's OpenCL half).
    OpenCl {
        /// Bytes from the start of the buffer to the first element.
        byte_offset: u64,
        /// The stream is a `cl_event` that completes when the data is ready; else a
        /// `cl_command_queue` (or 0).
        stream_is_event: bool,
    },
}

/// What a producer orders its writes to OpenCL memory by.
///
/// ```
/// use cai::{Memory, OpenClStream};
/// // SAFETY: never imported or synced, so the made-up queue is never dereferenced.
/// let array = unsafe { cai::Array::builder("<f4", &[4], 0x5000).opencl(0, OpenClStream::Queue(0x7000)) }.build()?;
/// assert_eq!((array.memory(), array.stream()), (Memory::OpenCl { byte_offset: 0, stream_is_event: false }, 0x7000));
/// # Ok::<(), cai::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum OpenClStream {
    /// Nothing: the data is ready.
    None,
    /// The `cl_command_queue` its writes are on.
    Queue(u64),
    /// A `cl_event` that completes when the data is ready.
    Event(u64),
}

/// An array that owns its description: the struct, its descr fields and its mask, and the
/// producer's `release`, which runs exactly once, when the `Array` is dropped (or, once it
/// has moved into a DLPack tensor, when the tensor's deleter runs).
///
/// ```
/// use std::sync::atomic::{AtomicUsize, Ordering};
/// use std::sync::Arc;
///
/// let releases = Arc::new(AtomicUsize::new(0));
/// let counter = Arc::clone(&releases);
/// let array = cai::Array::builder("<f4", &[2, 3], 0x7f00_0000_1000)
///     .on_release(move || {
///         counter.fetch_add(1, Ordering::SeqCst);
///     })
///     .build()?;
/// let layout = array.layout()?;
/// assert_eq!((layout.element_count, layout.nbytes, layout.c_contiguous), (6, 24, true));
/// assert_eq!(array.dtype()?.itemsize, 4);
/// drop(array);
/// assert_eq!(releases.load(Ordering::SeqCst), 1);
/// # Ok::<(), cai::Error>(())
/// ```
///
/// # Threads
///
/// `Send` and `Sync`. An `Array` may be moved to another thread and dropped there, and its
/// release then runs on that thread: as a DLPack deleter, a release may run on any thread, and
/// every way to make an `Array` promises that much ([`ArrayBuilder::on_release`] takes a
/// `Send` closure; [`Array::from_raw`] and [`DlpackTensor::from_raw`](super::DlpackTensor::from_raw)
/// require it of the producer). Shared references only read the struct: the descriptor,
/// the descr fields and the mask are never written while it is borrowed, and the library's
/// functions keep no thread-local state, so several threads may read, validate and import
/// one array at once.
///
/// ```
/// let array = cai::Array::builder("<f4", &[8], 0x7f00_0000_1000).on_release(|| ()).build()?;
/// let shared = std::sync::Arc::new(array);
/// let reader = std::sync::Arc::clone(&shared);
/// let nbytes = std::thread::spawn(move || reader.layout().map(|layout| layout.nbytes)).join().unwrap()?;
/// assert_eq!(nbytes, shared.layout()?.nbytes);
/// // Moved to another thread, dropped (and released) there.
/// let owned = std::sync::Arc::try_unwrap(shared).unwrap();
/// std::thread::spawn(move || drop(owned)).join().unwrap();
/// # Ok::<(), cai::Error>(())
/// ```
pub struct Array {
    description: Description<Box<CaiArray>>,
    /// The mask the builder was given (boxed: the struct points at it), dropped after this
    /// array's release has run.
    _mask: Option<Box<Array>>,
}

// SAFETY: what an Array holds is its own heap memory (the struct, descr fields, mask) or the
// producer's, which from_raw requires to be usable from any thread; the builder's release is a
// `Send` closure and a raw struct's release may be called on any thread (from_raw's promise).
// Nothing in it is tied to the thread that made it.
unsafe impl Send for Array {}

// SAFETY: `&Array` only reads (through ArrayRef, which is Sync); the release needs `&mut`
// (Drop, into_dlpack), which a shared reference cannot give.
unsafe impl Sync for Array {}

impl Array {
    /// Starts describing `shape` elements of `typestr` at the CUDA device pointer `data`,
    /// version 3, C-contiguous, read-write, with no stream and nothing to release.
    ///
    /// ```
    /// let array = cai::Array::builder("<u2", &[7], 0x7f00_0000_1000).build()?;
    /// assert_eq!((array.version(), array.strides(), array.readonly()), (3, None, false));
    /// # Ok::<(), cai::Error>(())
    /// ```
    pub fn builder(typestr: &str, shape: &[i64], data: u64) -> ArrayBuilder {
        ArrayBuilder::new(typestr, shape, data)
    }

    /// Takes ownership of a producer's struct: its `release` (when set) runs once, when the
    /// `Array` is dropped. The struct is not validated here.
    ///
    /// # Safety
    /// `raw` is a valid `CaiArray` whose `mask` and `descr` (when set) stay valid until its
    /// release runs (or, with no release, for as long as the `Array` lives), readable from any
    /// thread and not written meanwhile; its `release`, when set, may be called once, on any
    /// thread (the `Array` is `Send`), with the struct at another address; its stream and (for
    /// OpenCL) its `cl_mem` are live handles. Nothing else releases it.
    ///
    /// ```
    /// let mut raw = cai::CaiArray { version: 3, ndim: 1, data: 0x7f00_0000_1000, ..cai::CaiArray::zeroed() };
    /// raw.shape[0] = 8;
    /// assert!(raw.set_typestr("<f8"));
    /// // SAFETY: no mask, descr, stream or release: nothing to keep valid.
    /// let array = unsafe { cai::Array::from_raw(raw) };
    /// assert_eq!(array.layout()?.nbytes, 64);
    /// # Ok::<(), cai::Error>(())
    /// ```
    pub unsafe fn from_raw(raw: CaiArray) -> Array {
        Array { description: Description::borrowing(Box::new(raw)), _mask: None }
    }

    /// Consumer side, in another process than the exporter's: the array of `descriptor`,
    /// mapped on the device of its UUID and ordered after the exporter's pending work as
    /// `options` say (`cai_ipc_open`). Dropping it lets go of the mapping (the last array of an
    /// allocation unmaps it). Refused: a corrupt descriptor, another version, or one this
    /// process exported ([`Status::IpcDescriptor`]); a device this process lacks
    /// ([`Status::NotShareable`]); memory its exporter freed ([`Status::Driver`]).
    pub fn ipc_open(descriptor: &super::IpcDescriptor, options: &ImportOptions) -> Result<Array> {
        let raw = crate::device_calls::ipc_open(descriptor.as_raw(), options.as_raw())?;
        // SAFETY: an owning struct cai_ipc_open wrote (no mask, no descr, stream 0), whose
        // release may run once on any thread.
        Ok(unsafe { Array::from_raw(raw) })
    }

    /// Borrows the array for as long as `self` is borrowed.
    ///
    /// ```
    /// let array = cai::Array::builder("<f4", &[3], 0x7f00_0000_1000).build()?;
    /// let view: cai::ArrayView<'_> = array.view();
    /// assert_eq!(view.shape(), array.shape());
    /// # Ok::<(), cai::Error>(())
    /// ```
    pub fn view(&self) -> ArrayView<'_> {
        ArrayView { raw: self }
    }

    /// Consumer side, once the work that reads the array is enqueued: hands the array back to
    /// its producer once the GPU has passed the work enqueued on `stream` so far, never
    /// waiting on the host (`cai_release_after`). The whole `Array` (its release, descr
    /// fields and mask) moves into libcai's queue and is dropped there once an event recorded
    /// on `stream` has completed, from a later `release_after` or
    /// [`release_pending`](super::release_pending) call in any thread. Call
    /// `release_pending(PendingMode::Wait)` before the program exits: what is still queued then
    /// is never released.
    ///
    /// Stream 0 drops the array at once; an array with nothing to release (no `release` and no
    /// mask) is dropped with no driver call. On failure the array comes back with the error:
    /// [`Status::StreamCapturing`] for a stream capturing a CUDA graph (its work is only
    /// recorded, so no event on it says when the memory is free) or the legacy stream during a
    /// capture, [`Status::Driver`] for a stream the driver does not know,
    /// [`Status::NoDriver`] with no driver, [`Status::InvalidArgument`] for OpenCL memory.
    ///
    /// # Safety
    /// A `stream` other than 0, 1 and 2 is a live `CUstream`.
    ///
    /// ```
    /// let array = cai::Array::builder("<f4", &[4], 0x7f00_0000_1000).on_release(|| ()).build()?;
    /// // SAFETY: stream 0 names no stream: nothing to wait for, released at once.
    /// unsafe { array.release_after(cai::CAI_STREAM_NONE) }.map_err(|(_array, error)| error)?;
    /// # Ok::<(), cai::Error>(())
    /// ```
    pub unsafe fn release_after(self, stream: u64) -> std::result::Result<(), (Array, Error)> {
        if self.as_raw().release.is_none() && self._mask.is_none() {
            return Ok(());
        }
        let mut raw = *self.as_raw();
        raw.owner = Box::into_raw(Box::new(self)).cast();
        raw.release = Some(release_boxed_array);
        // SAFETY: a valid struct, ours alone; its pointers reach into the boxed Array, which
        // lives until the release drops it, on any thread (Array is Send); `stream` is the
        // caller's promise.
        match unsafe { crate::device_calls::release_after(&mut raw, stream) } {
            Ok(()) => Ok(()),
            // A failure after the move (release cleared), which libcai's own cai_release_after
            // never reports: the queue owns the Box now, so it is not taken back (that would
            // free it twice).
            Err(_) if raw.release.is_none() => Ok(()),
            Err(error) => {
                // SAFETY: refused, the struct untouched: `owner` is still the Box leaked above,
                // and nothing else will release it.
                let array = unsafe { Box::from_raw(raw.owner.cast::<Array>()) };
                Err((*array, error))
            }
        }
    }

    /// The struct, for the DLPack hand-over, which clears its `release` on success.
    pub(crate) fn raw_mut(&mut self) -> &mut CaiArray {
        self.description.array_mut()
    }
}

impl Deref for Array {
    type Target = ArrayRef;

    fn deref(&self) -> &ArrayRef {
        // SAFETY: the struct's pointers point into this Array's description, or are the
        // producer's, valid until the release that Drop runs (from_raw's promise).
        unsafe { ArrayRef::from_raw(self.description.array()) }
    }
}

impl Drop for Array {
    fn drop(&mut self) {
        // SAFETY: the struct is valid and this Array its only user; `release` clears the
        // callback, so it runs once.
        unsafe { crate::abi::release(self.description.array_mut()) }
    }
}

impl std::fmt::Debug for Array {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        (**self).fmt(f)
    }
}

/// A borrowed array: reads the struct for `'a` and never releases it.
///
/// ```
/// let array = cai::Array::builder("<i8", &[4], 0x7f00_0000_1000).readonly(true).build()?;
/// let view = array.view();
/// assert_eq!((view.shape(), view.readonly()), (&[4i64][..], true));
/// # Ok::<(), cai::Error>(())
/// ```
#[derive(Clone, Copy)]
pub struct ArrayView<'a> {
    raw: &'a ArrayRef,
}

impl<'a> ArrayView<'a> {
    /// Borrows a struct someone else owns: its `release` is never run through the view.
    ///
    /// # Safety
    /// `raw`'s `mask` and `descr` (when set) are valid for `'a`, readable from any thread and
    /// not written meanwhile (a view is `Send` and `Sync`), and its stream and (for OpenCL) its
    /// `cl_mem` are live handles for `'a`.
    ///
    /// ```
    /// let array = cai::Array::builder("<f4", &[3], 0x7f00_0000_1000).build()?;
    /// // SAFETY: a struct `array` owns and keeps valid while it is borrowed.
    /// let view = unsafe { cai::ArrayView::from_raw(array.as_raw()) };
    /// assert_eq!(view.layout()?.nbytes, 12);
    /// # Ok::<(), cai::Error>(())
    /// ```
    pub unsafe fn from_raw(raw: &'a CaiArray) -> ArrayView<'a> {
        // SAFETY: the caller's promise is ArrayRef's.
        ArrayView { raw: unsafe { ArrayRef::from_raw(raw) } }
    }

    /// The array for all of `'a`: what it lends (a shape, a mask) may outlive the view.
    ///
    /// ```
    /// let mask = cai::Array::builder("|b1", &[4], 0x7f00_0000_2000).build()?;
    /// let array = cai::Array::builder("<f4", &[4], 0x7f00_0000_1000).mask(mask).build()?;
    /// // The mask's shape, borrowed from `array` rather than from the temporary view.
    /// let mask_shape: &[i64] = array.mask().unwrap().array().shape();
    /// assert_eq!(mask_shape, &[4]);
    /// # Ok::<(), cai::Error>(())
    /// ```
    pub fn array(self) -> &'a ArrayRef {
        self.raw
    }
}

impl Deref for ArrayView<'_> {
    type Target = ArrayRef;

    fn deref(&self) -> &ArrayRef {
        self.raw
    }
}

impl std::fmt::Debug for ArrayView<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.raw.fmt(f)
    }
}

/// The producer's release as a Rust closure, run by the C callback once.
type ReleaseClosure = Box<dyn FnOnce() + Send>;

/// Runs the closure `owner` holds, once (the callback is cleared before it is called).
unsafe extern "C" fn release_closure(array: *mut CaiArray) {
    // SAFETY: `owner` is the Box<ReleaseClosure> the builder leaked, and the release runs once.
    let closure = unsafe { Box::from_raw((*array).owner.cast::<ReleaseClosure>()) };
    closure();
}

/// The release of what [`Array::release_after`] queued: drops the boxed Array, running its own
/// release once.
unsafe extern "C" fn release_boxed_array(array: *mut CaiArray) {
    // SAFETY: `owner` is the Box release_after leaked; the release runs once.
    drop(unsafe { Box::from_raw((*array).owner.cast::<Array>()) });
}

/// Describes an [`Array`] field by field, for a Rust producer: see [`Array::builder`].
///
/// ```
/// use cai::{Array, CaiField};
/// // A structured element: an x and a y float, 8 bytes.
/// let fields = vec![CaiField::new("x", "<f4", 0).unwrap(), CaiField::new("y", "<f4", 4).unwrap()];
/// let mask = Array::builder("|b1", &[10], 0x7f00_0000_2000).build()?;
/// let points = Array::builder("|V8", &[10], 0x7f00_0000_1000)
///     .fields(fields)
///     .mask(mask)
///     .version(2)
///     .readonly(true)
///     .on_release(|| ())
///     .build()?;
/// assert_eq!((points.fields().len(), points.version(), points.layout()?.nbytes), (2, 2, 80));
/// # Ok::<(), cai::Error>(())
/// ```
pub struct ArrayBuilder {
    raw: CaiArray,
    typestr_fits: bool,
    /// How many strides were given, when that is not one per dimension.
    strides_miscounted: Option<usize>,
    fields: Vec<CaiField>,
    mask: Option<Array>,
    release: Option<ReleaseClosure>,
}

impl ArrayBuilder {
    fn new(typestr: &str, shape: &[i64], data: u64) -> ArrayBuilder {
        let mut raw = CaiArray::zeroed();
        raw.version = 3;
        raw.ndim = i32::try_from(shape.len()).unwrap_or(i32::MAX);
        for (slot, &extent) in raw.shape.iter_mut().zip(shape) {
            *slot = extent;
        }
        let typestr_fits = raw.set_typestr(typestr);
        raw.data = data;
        ArrayBuilder {
            raw,
            typestr_fits,
            strides_miscounted: None,
            fields: Vec::new(),
            mask: None,
            release: None,
        }
    }

    /// Byte strides, one per dimension.
    pub fn strides(mut self, strides: &[i64]) -> ArrayBuilder {
        self.raw.strides_given = 1;
        self.strides_miscounted = (strides.len() != self.raw.ndim as usize).then_some(strides.len());
        for (slot, &stride) in self.raw.strides.iter_mut().zip(strides) {
            *slot = stride;
        }
        self
    }

    /// The elements' DLPack type, where the typestr is opaque bytes of a type DLPack names
    /// (`"<V2"` with bfloat16's `{CAI_DL_BFLOAT, 16, 1}`); `build` checks that they agree.
    pub fn dl_dtype(mut self, dl_dtype: CaiDLDataType) -> ArrayBuilder {
        self.raw.dl_dtype = dl_dtype;
        self
    }

    /// The data is read-only.
    pub fn readonly(mut self, readonly: bool) -> ArrayBuilder {
        self.raw.readonly = readonly.into();
        self
    }

    /// The CUDA Array Interface version the descriptor follows (3 unless set).
    pub fn version(mut self, version: i32) -> ArrayBuilder {
        self.raw.version = version;
        self
    }

    /// The producer's stream: 0 (none, the default), 1 (legacy default), 2 (per-thread
    /// default) or a `CUstream`.
    ///
    /// # Safety
    /// A stream other than 0, 1 and 2 stays live for as long as the array is imported or
    /// synced: the driver is handed it and cannot tell a stale handle from a live one.
    pub unsafe fn stream(mut self, stream: u64) -> ArrayBuilder {
        self.raw.stream = stream;
        self
    }

    /// The data is an OpenCL buffer: `data` is its `cl_mem`, the first element `byte_offset`
    /// bytes into it, and `stream` what orders the producer's writes.
    ///
    /// # Safety
    /// The `cl_mem`, and the queue or event of `stream`, stay live for as long as the array
    /// is imported or synced: the OpenCL library dereferences the handles it is given.
    pub unsafe fn opencl(mut self, byte_offset: u64, stream: OpenClStream) -> ArrayBuilder {
        self.raw.memory = CAI_MEMORY_OPENCL;
        self.raw.byte_offset = byte_offset;
        (self.raw.stream_kind, self.raw.stream) = match stream {
            OpenClStream::None => (CAI_OPENCL_STREAM_QUEUE, CAI_STREAM_NONE),
            OpenClStream::Queue(queue) => (CAI_OPENCL_STREAM_QUEUE, queue),
            OpenClStream::Event(event) => (CAI_OPENCL_STREAM_EVENT, event),
        };
        self
    }

    /// The fields of a structured (`|Vn`) typestr, as numpy's `descr` lists them.
    pub fn fields(mut self, fields: Vec<CaiField>) -> ArrayBuilder {
        self.fields = fields;
        self
    }

    /// A mask of the same shape, true where the data is valid; the array owns it, and drops
    /// it after itself.
    pub fn mask(mut self, mask: Array) -> ArrayBuilder {
        self.mask = Some(mask);
        self
    }

    /// What the array runs once when it is dropped: typically dropping what keeps the data
    /// alive (`move || drop(buffer)`). Runs behind a C callback: a panic in it aborts.
    ///
    /// It runs on whichever thread drops the array, or deletes the DLPack tensor the array
    /// moved into: any thread, hence `Send`. A closure that lets go of Python objects must
    /// attach to the interpreter itself (in a PyO3 extension, give `cai_python::keep(object)`
    /// instead of a closure: the thread may not be attached, and PyO3 would defer the drop).
    pub fn on_release(mut self, release: impl FnOnce() + Send + 'static) -> ArrayBuilder {
        self.release = Some(Box::new(release));
        self
    }

    /// Validates the description and makes the array. On failure the closure given to
    /// [`on_release`](ArrayBuilder::on_release) is dropped uncalled (a mask given is dropped,
    /// which releases it).
    pub fn build(self) -> Result<Array> {
        let ArrayBuilder { raw, typestr_fits, strides_miscounted, fields, mask, release } = self;
        if let Some(count) = strides_miscounted {
            return Err(Error::new(
                Status::InvalidStrides,
                format!("{count} strides were given for {} dimensions: give one per dimension", raw.ndim),
            ));
        }
        if !typestr_fits {
            return Err(Error::new(
                Status::InvalidTypestr,
                "the typestr does not fit in CaiArray.typestr (31 bytes, no NUL inside): use a shorter one",
            ));
        }
        let mask = mask.map(Box::new);
        let mut description = Description::new(Box::new(raw), fields, None);
        description.array_mut().mask = mask.as_ref().map_or(std::ptr::null(), |mask| mask.as_raw());
        crate::validate::validate(description.array())?;
        let mut array = Array { description, _mask: mask };
        if let Some(release) = release {
            let raw = array.description.array_mut();
            raw.owner = Box::into_raw(Box::new(release)).cast();
            raw.release = Some(release_closure);
        }
        Ok(array)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;
    use crate::abi::{CaiDLDevice, CAI_DL_CPU};

    const DATA: u64 = 0x7f00_0000_1000;

    /// An on_release closure that writes `name` into `log`.
    fn logging(log: &Arc<Mutex<Vec<&'static str>>>, name: &'static str) -> impl FnOnce() + Send + 'static {
        let log = Arc::clone(log);
        move || log.lock().unwrap().push(name)
    }

    #[test]
    fn a_mask_given_to_the_builder_is_validated_and_released_after_its_array() {
        let log = Arc::new(Mutex::new(Vec::new()));
        let mask = Array::builder("|b1", &[2, 3], DATA).on_release(logging(&log, "mask")).build().unwrap();
        let array = Array::builder("<f4", &[2, 3], DATA)
            .mask(mask)
            .on_release(logging(&log, "array"))
            .build()
            .unwrap();
        assert_eq!(array.mask().map(|mask| mask.array().typestr()), Some(Some("|b1")));
        drop(array);
        assert_eq!(*log.lock().unwrap(), ["array", "mask"]);

        let mask =
            Array::builder("|b1", &[3], DATA).on_release(logging(&log, "refused mask")).build().unwrap();
        let refused = Array::builder("<f4", &[2], DATA).mask(mask).on_release(logging(&log, "never")).build();
        assert_eq!(refused.unwrap_err().status, Status::InvalidMask);
        assert_eq!(*log.lock().unwrap(), ["array", "mask", "refused mask"]);
    }

    static RAW_RELEASES: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

    unsafe extern "C" fn count_raw_release(_array: *mut CaiArray) {
        RAW_RELEASES.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }

    #[test]
    fn an_array_taken_from_a_raw_struct_runs_its_release_once_on_drop() {
        let mut raw = CaiArray { version: 3, ndim: 1, data: DATA, ..CaiArray::zeroed() };
        raw.shape[0] = 4;
        assert!(raw.set_typestr("<i2"));
        raw.release = Some(count_raw_release);
        // SAFETY: no mask or descr, a release that may run anywhere, no stream.
        let array = unsafe { Array::from_raw(raw) };
        assert_eq!(array.layout().unwrap().nbytes, 8);
        assert_eq!(RAW_RELEASES.load(std::sync::atomic::Ordering::SeqCst), 0);
        drop(array);
        assert_eq!(RAW_RELEASES.load(std::sync::atomic::Ordering::SeqCst), 1);
    }

    #[test]
    fn a_typestr_too_long_or_strides_miscounted_are_refused_naming_the_fix() {
        let error = Array::builder(&"<f4".repeat(20), &[1], DATA).build().unwrap_err();
        assert_eq!(error.status, Status::InvalidTypestr);
        assert!(error.message.contains("31 bytes"), "{error}");
        let error = Array::builder("<f4", &[2, 3], DATA).strides(&[4]).build().unwrap_err();
        assert_eq!(error.status, Status::InvalidStrides);
        assert!(error.message.contains("1 strides were given for 2 dimensions"), "{error}");
    }

    #[test]
    fn a_refused_dlpack_export_hands_the_array_back_unreleased_and_a_refused_import_deletes_the_tensor() {
        let log = Arc::new(Mutex::new(Vec::new()));
        let mask = Array::builder("|b1", &[2], DATA).on_release(logging(&log, "mask")).build().unwrap();
        let masked =
            Array::builder("<f4", &[2], DATA).mask(mask).on_release(logging(&log, "masked")).build().unwrap();
        let cuda = CaiDLDevice { device_type: crate::abi::CAI_DL_CUDA, device_id: 0 };
        let refused = masked.into_dlpack(Some(cuda)).unwrap_err();
        assert_eq!(refused.error.status, Status::InvalidMask);
        assert!(log.lock().unwrap().is_empty(), "refused, and released all the same");
        let masked = refused.array;
        assert_eq!(
            (masked.shape(), masked.mask().map(|mask| mask.shape().to_vec())),
            (&[2i64][..], Some(vec![2]))
        );
        let refused = masked.into_dlpack_legacy(Some(cuda)).unwrap_err();
        assert_eq!(refused.error.status, Status::InvalidMask);
        assert!(log.lock().unwrap().is_empty(), "refused as legacy, and released all the same");
        drop(refused);
        assert_eq!(*log.lock().unwrap(), ["masked", "mask"], "the caller's drop releases it, once");
        log.lock().unwrap().clear();

        let readonly = Array::builder("<f4", &[2], DATA)
            .readonly(true)
            .on_release(logging(&log, "readonly"))
            .build()
            .unwrap();
        let (error, readonly) = readonly.into_dlpack_legacy(Some(cuda)).unwrap_err().into_parts();
        assert_eq!(error.status, Status::Readonly);
        assert!(log.lock().unwrap().is_empty());
        let tensor = readonly.into_dlpack(Some(cuda)).expect("the versioned struct says read-only");
        drop(tensor);
        assert_eq!(*log.lock().unwrap(), ["readonly"]);
        log.lock().unwrap().clear();

        let host = Array::builder("<f4", &[2], DATA).on_release(logging(&log, "host")).build().unwrap();
        let tensor = host.into_dlpack(Some(CaiDLDevice { device_type: CAI_DL_CPU, device_id: 0 })).unwrap();
        assert!(log.lock().unwrap().is_empty(), "the tensor owns the array now");
        let e = Array::from_dlpack(tensor, false).unwrap_err();
        assert_eq!(e.status, Status::HostMemory);
        assert!(
            e.message.ends_with("to take it, pass allow_host = true to Array::from_dlpack"),
            "{}",
            e.message
        );
        assert_eq!(*log.lock().unwrap(), ["host"]);
        log.lock().unwrap().clear();

        let host =
            Array::builder("<f4", &[2], DATA).on_release(logging(&log, "legacy host")).build().unwrap();
        let tensor =
            host.into_dlpack_legacy(Some(CaiDLDevice { device_type: CAI_DL_CPU, device_id: 0 })).unwrap();
        assert!(log.lock().unwrap().is_empty(), "the legacy tensor owns the array now");
        let e = Array::from_dlpack_legacy(tensor, false).unwrap_err();
        assert_eq!(e.status, Status::HostMemory);
        assert!(e.message.ends_with("pass allow_host = true to Array::from_dlpack_legacy"), "{}", e.message);
        assert_eq!(*log.lock().unwrap(), ["legacy host"]);
    }

    #[test]
    fn a_legacy_tensor_round_trip_keeps_the_description_and_releases_once() {
        let log = Arc::new(Mutex::new(Vec::new()));
        let array = Array::builder("<i2", &[3, 4], DATA)
            .strides(&[2, 6])
            .on_release(logging(&log, "array"))
            .build()
            .unwrap();
        let cuda = CaiDLDevice { device_type: crate::abi::CAI_DL_CUDA, device_id: 1 };
        let tensor = array.into_dlpack_legacy(Some(cuda)).unwrap();
        // SAFETY: a valid tensor `tensor` owns, read while it does.
        let (device, strides) = unsafe {
            let dl = &(*tensor.as_ptr()).dl_tensor;
            (dl.device, std::slice::from_raw_parts(dl.strides, 2).to_vec())
        };
        assert_eq!((device.device_type, device.device_id, strides), (cuda.device_type, 1, vec![1, 3]));
        let back = Array::from_dlpack_legacy(tensor, false).unwrap();
        assert_eq!(
            (back.shape(), back.strides(), back.typestr()),
            (&[3i64, 4][..], Some(&[2i64, 6][..]), Some("<i2"))
        );
        assert!(log.lock().unwrap().is_empty());
        drop(back);
        assert_eq!(*log.lock().unwrap(), ["array"]);
    }

    #[test]
    fn a_view_borrows_without_releasing() {
        let log = Arc::new(Mutex::new(Vec::new()));
        let array = Array::builder("<u8", &[5], DATA)
            .strides(&[-8])
            .on_release(logging(&log, "array"))
            .build()
            .unwrap();
        let view = array.view();
        // SAFETY: the struct has no mask or descr, and no stream.
        let raw_view = unsafe { ArrayView::from_raw(array.as_raw()) };
        assert_eq!((view.strides(), raw_view.layout().unwrap().extent), (Some(&[-8i64][..]), (-32, 8)));
        assert!(log.lock().unwrap().is_empty());
        drop(array);
        assert_eq!(*log.lock().unwrap(), ["array"]);
    }
}
