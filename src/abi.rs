//! Every `#[repr(C)]` type of the C API and the constants their fields take, in one place,
//! each with its offsets asserted here and in c_tests/test_core.c.
//!
//! ABI evolution (see docs/robustness.md): `CaiArray` begins with a prefix that never moves,
//! `abi_version`, `owner`, `release`, so that a consumer can always tell which layout it was
//! handed and always release it. Fields are added only in reserved words, which producers
//! zero: zero means "absent", and a consumer that does not know a field refuses a non-zero
//! value rather than misread the array. `abi_version` rises only for a layout that cannot be
//! read that way; a consumer handed a newer one may only release it.

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
/// Layout of `CaiArray` this header describes. Zero, so that a zero-initialized struct is
/// this layout; a later layout that older readers cannot read takes the next number.
pub const CAI_ABI_VERSION: u32 = 0;
/// Deepest chain of masks accepted (a mask of a mask of ...); deeper chains are taken for cycles.
pub const CAI_MAX_MASK_DEPTH: usize = 4;
/// Byte order numpy writes for the host: typestrs without one, or with `=`, mean this.
pub(crate) const NATIVE_BYTE_ORDER: u8 = if cfg!(target_endian = "little") { b'<' } else { b'>' };
/// Number of reserved words at the end of `CaiArray`; they must be zero.
pub const CAI_ARRAY_RESERVED_WORDS: usize = 1;
/// Fields `CaiArray`'s reserved words have become within `CAI_ABI_VERSION` 0, each zero when
/// absent: 1, `dl_dtype`. A producer that fills one checks this at compile time.
pub const CAI_ABI_MINOR: u32 = 1;

/// `data` is a CUDA device pointer: the CUDA Array Interface's own kind (and the CUDA half of
/// the OpenCL/CUDA Buffer Interface, whose offset is always 0).
pub const CAI_MEMORY_CUDA: u32 = 0;
/// `data` is an OpenCL `cl_mem` and the first element is `byte_offset` bytes into it (the
/// OpenCL half of the Buffer Interface).
pub const CAI_MEMORY_OPENCL: u32 = 1;
/// For OpenCL memory: `stream` is the producer's `cl_command_queue`.
pub const CAI_OPENCL_STREAM_QUEUE: u32 = 0;
/// For OpenCL memory: `stream` is a `cl_event` that completes when the data is ready.
pub const CAI_OPENCL_STREAM_EVENT: u32 = 1;

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
    /// Layout of this struct: CAI_ABI_VERSION. This and `owner` and `release` never move.
    pub abi_version: u32,
    /// CAI version the descriptor follows, 0 to 3.
    pub version: i32,
    /// Producer's private handle, passed back through `release`; libcai never reads it.
    pub owner: *mut c_void,
    /// NULL for a borrowed array; else called exactly once by `cai_release`, with the array
    /// where it then lies: arrays move (cai_move, cai.Array), so it finds its state by `owner`,
    /// never by the address it filled, and reads no extent past `ndim` (those may be unwritten).
    pub release: Option<unsafe extern "C" fn(array: *mut CaiArray)>,
    /// Number of dimensions, 0 to CAI_MAX_NDIM.
    pub ndim: i32,
    /// 1 if the data is read-only (the second item of `data`), else 0.
    pub readonly: u32,
    /// 1 if `strides` holds the strides; 0 for the dict's "absent or None" (C-contiguous).
    pub strides_given: u32,
    /// Number of entries in `descr`; 0 when `descr` is NULL.
    pub descr_count: u32,
    /// Device pointer of the first element; 0 only for zero-size arrays.
    pub data: u64,
    /// 0: no sync needed (`None`); 1: legacy default stream; 2: per-thread default stream; else a CUstream.
    pub stream: u64,
    /// NUL-terminated numpy typestr, e.g. "<f4".
    pub typestr: [c_char; CAI_TYPESTR_CAPACITY],
    /// Extent of each of the first `ndim` dimensions.
    pub shape: [i64; CAI_MAX_NDIM],
    /// Byte stride of each of the first `ndim` dimensions, read only when `strides_given` is 1.
    pub strides: [i64; CAI_MAX_NDIM],
    /// NULL, or a borrowed array of the same shape whose elements are true where `data` is valid.
    pub mask: *const CaiArray,
    /// NULL, or `descr_count` borrowed structured-type fields.
    pub descr: *const CaiField,
    /// What `data` is: CAI_MEMORY_CUDA (0) or CAI_MEMORY_OPENCL.
    pub memory: u32,
    /// For OpenCL memory, what `stream` is: CAI_OPENCL_STREAM_QUEUE (0) or _EVENT; 0 for CUDA.
    pub stream_kind: u32,
    /// For OpenCL memory, bytes from the start of the `cl_mem` to the first element; 0 for CUDA.
    pub byte_offset: u64,
    /// DLPack's type of the elements where the typestr cannot say it (bfloat16, the float8,
    /// float6 and float4 types, vector lanes; the typestr is then `V` of the item's size, "<V2"
    /// for bfloat16); all zero: the typestr says it all. Since CAI_ABI_MINOR 1.
    pub dl_dtype: CaiDLDataType,
    /// Zero; a later 32-bit field goes here.
    pub reserved_half: u32,
    /// Zero; later fields go here, zero meaning absent (see CAI_ABI_VERSION).
    pub reserved: [u64; CAI_ARRAY_RESERVED_WORDS],
}

impl CaiArray {
    /// An all-zero array: version 0, 0-d, no typestr. The starting point for filling one in.
    pub const fn zeroed() -> CaiArray {
        CaiArray {
            abi_version: CAI_ABI_VERSION,
            version: 0,
            owner: std::ptr::null_mut(),
            release: None,
            ndim: 0,
            readonly: 0,
            strides_given: 0,
            descr_count: 0,
            data: 0,
            stream: CAI_STREAM_NONE,
            typestr: [0; CAI_TYPESTR_CAPACITY],
            shape: [0; CAI_MAX_NDIM],
            strides: [0; CAI_MAX_NDIM],
            mask: std::ptr::null(),
            descr: std::ptr::null(),
            memory: CAI_MEMORY_CUDA,
            stream_kind: 0,
            byte_offset: 0,
            dl_dtype: CaiDLDataType::absent(),
            reserved_half: 0,
            reserved: [0; CAI_ARRAY_RESERVED_WORDS],
        }
    }

    /// Writes this array into `out` as far as it is defined: every field, and the shape and
    /// strides of its `ndim` dimensions; `out`'s extents past them are left as they are (never
    /// read). An entry point's "out is written only on success" at a rank's worth of extents
    /// instead of the whole 1,160-byte struct.
    #[inline(always)]
    pub fn copy_defined_to(&self, out: &mut CaiArray) {
        ArrayHead::of(self).write_to(out);
        let rank = self.rank();
        out.shape[..rank].copy_from_slice(&self.shape[..rank]);
        out.strides[..rank].copy_from_slice(&self.strides[..rank]);
    }

    /// Sets every field but the shape and strides to a zeroed struct's: a reused struct made
    /// ready for a fill, which writes the extents of the rank it fills; those past it are left
    /// as they are (never read), so that no 1,024 bytes of extents are zeroed per fill.
    pub fn clear_head(&mut self) {
        ArrayHead::of(&CaiArray::zeroed()).write_to(self);
    }

    /// `ndim` as a count of extents: 0 for a negative one, at most CAI_MAX_NDIM.
    pub(crate) fn rank(&self) -> usize {
        usize::try_from(self.ndim).unwrap_or(0).min(CAI_MAX_NDIM)
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

/// A `CaiArray`'s fields but its shape and strides: what a copy sized to the array's rank
/// (a DLPack export, an output written as far as defined) carries beside its extents.
#[derive(Clone, Copy)]
pub(crate) struct ArrayHead {
    abi_version: u32,
    version: i32,
    owner: *mut c_void,
    pub(crate) release: Option<unsafe extern "C" fn(array: *mut CaiArray)>,
    ndim: i32,
    readonly: u32,
    strides_given: u32,
    descr_count: u32,
    data: u64,
    stream: u64,
    typestr: [c_char; CAI_TYPESTR_CAPACITY],
    mask: *const CaiArray,
    descr: *const CaiField,
    memory: u32,
    stream_kind: u32,
    byte_offset: u64,
    dl_dtype: CaiDLDataType,
    reserved_half: u32,
    reserved: [u64; CAI_ARRAY_RESERVED_WORDS],
}

impl ArrayHead {
    // Inlined: `copy_defined_to` is `of` then `write_to`, which then fold into field stores.
    #[inline(always)]
    pub(crate) fn of(array: &CaiArray) -> ArrayHead {
        // Every field named: one added to CaiArray does not compile here until it is kept.
        let CaiArray {
            abi_version,
            version,
            owner,
            release,
            ndim,
            readonly,
            strides_given,
            descr_count,
            data,
            stream,
            typestr,
            shape: _,
            strides: _,
            mask,
            descr,
            memory,
            stream_kind,
            byte_offset,
            dl_dtype,
            reserved_half,
            reserved,
        } = *array;
        ArrayHead {
            abi_version,
            version,
            owner,
            release,
            ndim,
            readonly,
            strides_given,
            descr_count,
            data,
            stream,
            typestr,
            mask,
            descr,
            memory,
            stream_kind,
            byte_offset,
            dl_dtype,
            reserved_half,
            reserved,
        }
    }

    /// Writes these fields into `out`, its extents untouched.
    #[inline(always)]
    pub(crate) fn write_to(&self, out: &mut CaiArray) {
        // SAFETY: a reference is valid for writes.
        unsafe { self.write_into(out) }
    }

    /// `write_to` a struct that may be uninitialized: each field written in place, none read
    /// (the extents are left as they are).
    ///
    /// # Safety
    /// `out` is valid for writes of a CaiArray.
    #[inline(always)]
    pub(crate) unsafe fn write_into(&self, out: *mut CaiArray) {
        use std::ptr::addr_of_mut;
        // SAFETY: each place is a field of the struct the caller lends for writing.
        unsafe {
            addr_of_mut!((*out).abi_version).write(self.abi_version);
            addr_of_mut!((*out).version).write(self.version);
            addr_of_mut!((*out).owner).write(self.owner);
            addr_of_mut!((*out).release).write(self.release);
            addr_of_mut!((*out).ndim).write(self.ndim);
            addr_of_mut!((*out).readonly).write(self.readonly);
            addr_of_mut!((*out).strides_given).write(self.strides_given);
            addr_of_mut!((*out).descr_count).write(self.descr_count);
            addr_of_mut!((*out).data).write(self.data);
            addr_of_mut!((*out).stream).write(self.stream);
            addr_of_mut!((*out).typestr).write(self.typestr);
            addr_of_mut!((*out).mask).write(self.mask);
            addr_of_mut!((*out).descr).write(self.descr);
            addr_of_mut!((*out).memory).write(self.memory);
            addr_of_mut!((*out).stream_kind).write(self.stream_kind);
            addr_of_mut!((*out).byte_offset).write(self.byte_offset);
            addr_of_mut!((*out).dl_dtype).write(self.dl_dtype);
            addr_of_mut!((*out).reserved_half).write(self.reserved_half);
            addr_of_mut!((*out).reserved).write(self.reserved);
        }
    }
}

impl CaiField {
    /// A field named `name` of type `typestr` at byte `offset` of the item; None when either
    /// string does not fit its buffer with its NUL (or holds one).
    pub fn new(name: &str, typestr: &str, offset: u64) -> Option<CaiField> {
        let mut field =
            CaiField { name: [0; CAI_FIELD_NAME_CAPACITY], typestr: [0; CAI_TYPESTR_CAPACITY], offset };
        (copy_into_c_chars(&mut field.name, name.as_bytes())
            && copy_into_c_chars(&mut field.typestr, typestr.as_bytes()))
        .then_some(field)
    }
}

/// What a typestr describes, as numpy's dtype reports it.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CaiDtype {
    /// Bytes per element.
    pub itemsize: u64,
    /// numpy kind: one of `b i u f c m M S U V`.
    pub kind: c_char,
    /// `<` little-endian, `>` big-endian, `|` byte order does not apply; native is resolved.
    pub byteorder: c_char,
}

impl CaiDtype {
    /// numpy's kind as a byte (`b'f'`, ...).
    pub fn kind(&self) -> u8 {
        self.kind as u8
    }

    /// The byte order as a byte (`b'<'`, `b'>'`, `b'|'`).
    pub fn byteorder(&self) -> u8 {
        self.byteorder as u8
    }

    /// True when elements can be read without swapping bytes on this host.
    pub fn is_native(&self) -> bool {
        self.byteorder() == b'|' || self.byteorder() == NATIVE_BYTE_ORDER
    }
}

/// Number of reserved words at the end of `CaiLayout`; libcai writes them zero.
pub const CAI_LAYOUT_RESERVED_WORDS: usize = 5;

/// Layout facts about a valid array, as `cai_layout` reports them.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CaiLayout {
    /// Number of elements (1 for a 0-d array, 0 when any extent is 0).
    pub element_count: u64,
    /// element_count * itemsize.
    pub nbytes: u64,
    /// Offset from `data` of the lowest byte any element touches (<= 0 with negative strides).
    pub extent_begin: i64,
    /// Offset from `data` one past the highest byte any element touches (0 for zero-size arrays).
    pub extent_end: i64,
    /// 1 if the elements are laid out in C order with no gaps (size-1 dimensions ignored).
    pub c_contiguous: u32,
    /// 1 if the elements are laid out in Fortran order with no gaps (size-1 dimensions ignored).
    pub f_contiguous: u32,
    /// 1 if every stride is a multiple of the itemsize (numpy's "aligned" needs this).
    pub strides_itemsize_aligned: u32,
    /// Zero; later facts go here.
    pub reserved: [u32; CAI_LAYOUT_RESERVED_WORDS],
}

/// Bytes in `CaiError.message`, the terminating NUL included.
pub const CAI_ERROR_MESSAGE_CAPACITY: usize = 512;

/// Details of a failure, filled in by any function given a non-NULL `CaiError*`.
/// Caller-owned; written only when the function fails, so one can serve many calls.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct CaiError {
    /// The CAI_ERROR_* status the function returned.
    pub code: i32,
    /// The raw result of the driver call that failed: a CUresult, or an OpenCL cl_int for
    /// OpenCL memory; 0 when no driver call failed.
    pub driver_result: i32,
    /// NUL-terminated message naming the field and value at fault; truncated to fit.
    pub message: [c_char; CAI_ERROR_MESSAGE_CAPACITY],
}

impl CaiError {
    /// The message, up to its NUL, invalid UTF-8 replaced.
    pub fn message_str(&self) -> String {
        let bytes = c_chars_until_nul(&self.message).unwrap_or_default();
        String::from_utf8_lossy(bytes).into_owned()
    }
}

/// Number of reserved words at the end of `CaiPointerInfo`; libcai writes them zero.
pub const CAI_POINTER_INFO_RESERVED_WORDS: usize = 2;

/// What the driver reports about a data pointer (CUDA) or buffer (OpenCL: `device_pointer`
/// and `allocation_base` the cl_mem, `allocation_size` its CL_MEM_SIZE, `context` its
/// cl_context, `device_ordinal` -1, `memory_type` 0).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CaiPointerInfo {
    /// The pointer as usable in the calling thread's current context.
    pub device_pointer: u64,
    /// Start of the allocation holding the pointer.
    pub allocation_base: u64,
    /// Size in bytes of that allocation.
    pub allocation_size: u64,
    /// The context the allocation belongs to: a CUcontext (may be NULL for managed memory), or
    /// the buffer's cl_context.
    pub context: *mut c_void,
    /// Ordinal of the device the allocation belongs to.
    pub device_ordinal: i32,
    /// CUmemorytype: 1 host (pinned and mapped), 2 device, 4 unified.
    pub memory_type: u32,
    /// 1 for managed (cudaMallocManaged) memory.
    pub is_managed: u32,
    /// 1 if the driver was asked; 0 if the check was skipped (zero-size array, no driver, or off).
    pub checked: u32,
    /// Zero; later facts go here.
    pub reserved: [u64; CAI_POINTER_INFO_RESERVED_WORDS],
}

impl Default for CaiPointerInfo {
    fn default() -> Self {
        CaiPointerInfo {
            device_pointer: 0,
            allocation_base: 0,
            allocation_size: 0,
            context: std::ptr::null_mut(),
            device_ordinal: -1,
            memory_type: 0,
            is_managed: 0,
            checked: 0,
            reserved: [0; CAI_POINTER_INFO_RESERVED_WORDS],
        }
    }
}

/// Check the pointer when a driver can be loaded; skip it when none can: `cai_import`'s
/// CaiPointerInfo.checked is then 0 (Python's cai.from_object warns: PointerNotCheckedWarning).
pub const CAI_POINTER_CHECK_DEFAULT: i32 = 0;
/// Always check the pointer; fail with CAI_ERROR_NO_DRIVER when no driver can be loaded.
pub const CAI_POINTER_CHECK_ALWAYS: i32 = 1;
/// Never ask the driver about the pointer.
pub const CAI_POINTER_CHECK_NEVER: i32 = 2;

/// How `cai_import` accepts an array. Zero-initialized means the defaults.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct CaiImportOptions {
    /// The consumer's stream: for CUDA memory a CAI stream value (0: none, 1 legacy, 2
    /// per-thread, else a CUstream); for OpenCL memory 0 (none) or a cl_command_queue.
    pub consumer_stream: u64,
    /// One of CAI_SYNC_*.
    pub sync_mode: i32,
    /// One of CAI_POINTER_CHECK_*.
    pub pointer_check: i32,
    /// 1: the consumer will write; a read-only array fails with CAI_ERROR_READONLY.
    pub writable: u32,
    /// 1: only native byte order is accepted (as CuPy and mpi4py require).
    pub native_only: u32,
    /// 1: host memory the device cannot reach (pageable, or pinned and unmapped) passes the
    /// pointer check, unchecked against an allocation; 0: it fails with NOT_DEVICE_POINTER.
    pub allow_host: u32,
    /// Zero; later options go here, zero meaning their default.
    pub reserved: [u32; CAI_IMPORT_OPTIONS_RESERVED_WORDS],
}

/// Number of reserved words at the end of `CaiImportOptions`; they must be zero.
pub const CAI_IMPORT_OPTIONS_RESERVED_WORDS: usize = 5;

/// Number of reserved words at the end of `CaiSyncOptions`; they must be zero.
pub const CAI_SYNC_OPTIONS_RESERVED_WORDS: usize = 5;

/// How `cai_sync` orders the consumer after the producer. Zero-initialized (or NULL) means
/// the defaults: no consumer stream, CAI_SYNC_DEFAULT (the host waits).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct CaiSyncOptions {
    /// The consumer's stream, as in `CaiImportOptions.consumer_stream`.
    pub consumer_stream: u64,
    /// One of CAI_SYNC_*.
    pub sync_mode: i32,
    /// Zero; later options go here, zero meaning their default.
    pub reserved: [u32; CAI_SYNC_OPTIONS_RESERVED_WORDS],
}

/// Number of reserved words at the end of `CaiExportOptions`; they must be zero.
pub const CAI_EXPORT_OPTIONS_RESERVED_WORDS: usize = 5;

/// How `cai_export` writes a descriptor. Zero-initialized means the defaults.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct CaiExportOptions {
    /// NULL, or `work_stream_count` raw CUstreams (0 = the NULL stream) with pending work on the data.
    pub work_streams: *const u64,
    /// Number of entries in `work_streams`.
    pub work_stream_count: u64,
    /// CAI version to write: 3, or 2 (no `stream`); 0 means CAI_ARRAY_INTERFACE_EXPORT_VERSION, else 3.
    pub version: i32,
    /// 1: check through the driver that `data` is device memory holding the whole extent.
    pub check_pointer: u32,
    /// 1: the producer's NULL stream is the per-thread default stream (exported as 2, not 1).
    pub per_thread_default_stream: u32,
    /// Zero; later options go here, zero meaning their default.
    pub reserved: [u32; CAI_EXPORT_OPTIONS_RESERVED_WORDS],
}

impl Default for CaiExportOptions {
    fn default() -> Self {
        CaiExportOptions {
            work_streams: std::ptr::null(),
            work_stream_count: 0,
            version: 0,
            check_pointer: 0,
            per_thread_default_stream: 0,
            reserved: [0; CAI_EXPORT_OPTIONS_RESERVED_WORDS],
        }
    }
}

/// Stream-ordered when the consumer names a stream, else blocking; off when
/// CAI_ARRAY_INTERFACE_SYNC=0. During CUDA graph capture, as those modes are.
///
/// Capture: a sync that is planned (never one that is not) first asks the driver whether its
/// streams are capturing (cuStreamGetCaptureInfo). A sync the driver would refuse, or that
/// would change the user's capture, is refused with CAI_ERROR_STREAM_CAPTURING before anything
/// is enqueued, and the capture stays valid. The legacy stream (1), as either stream, while a
/// stream of its context is capturing, is refused so wherever a sync would use it.
pub const CAI_SYNC_DEFAULT: i32 = 0;
/// The consumer's stream waits on an event recorded on the producer's stream; the host does
/// not block. Without a consumer stream, blocking. Nothing when the streams are the same (the
/// capturing stream passed as the consumer's, during capture). During capture: both streams
/// in one capture are ordered inside it (an edge of the graph); one capturing and the other
/// not, or two captures, is refused (CAI_ERROR_STREAM_CAPTURING).
pub const CAI_SYNC_STREAM_ORDERED: i32 = 1;
/// The host waits for the producer's stream (cuStreamSynchronize). During capture: refused
/// (CAI_ERROR_STREAM_CAPTURING) where the producer's stream is capturing; a producer stream
/// outside capture is waited for as always.
pub const CAI_SYNC_BLOCKING: i32 = 2;
/// No synchronization: the caller takes responsibility (spec: "User ... override"). No driver
/// call, during capture too.
pub const CAI_SYNC_NONE: i32 = 3;

/// `cai_release_pending`: runs the deferred releases whose work has completed, never waits.
pub const CAI_PENDING_POLL: i32 = 0;
/// `cai_release_pending`: waits on the host for each deferred release's work, runs them all,
/// and leaves none queued: for a program's exit or a library's unload.
pub const CAI_PENDING_WAIT: i32 = 1;

/// DLPack major version libcai reads and writes.
pub const CAI_DLPACK_MAJOR_VERSION: u32 = 1;
/// DLPack minor version libcai writes (the struct is the same across 1.x).
pub const CAI_DLPACK_MINOR_VERSION: u32 = 1;
/// DLPACK_FLAG_BITMASK_READ_ONLY: the tensor's data must not be written.
pub const CAI_DLPACK_FLAG_READ_ONLY: u64 = 1;
/// DLPack's flag that a sub-byte type's elements are padded to a byte each (its default is
/// packed, little bit-endian); libcai takes and writes padded ones only with lanes 1.
pub const CAI_DLPACK_FLAG_SUBBYTE_PADDED: u64 = 4;

/// kDLCPU: host memory.
pub const CAI_DL_CPU: i32 = 1;
/// kDLCUDA: memory of a CUDA device.
pub const CAI_DL_CUDA: i32 = 2;
/// kDLCUDAHost: pinned host memory (cudaMallocHost).
pub const CAI_DL_CUDA_HOST: i32 = 3;
/// kDLCUDAManaged: CUDA managed memory (cudaMallocManaged).
pub const CAI_DL_CUDA_MANAGED: i32 = 13;

/// dlpack.h's DLPackVersion.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CaiDLPackVersion {
    /// Changes when the layout does: a reader refuses a major it does not know.
    pub major: u32,
    /// Additions within a major.
    pub minor: u32,
}

/// dlpack.h's DLDevice: a DLDeviceType (kDLCUDA = 2, ...) and the device's ordinal.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CaiDLDevice {
    /// A DLDeviceType: CAI_DL_CPU, CAI_DL_CUDA, CAI_DL_CUDA_HOST, CAI_DL_CUDA_MANAGED, ...
    pub device_type: i32,
    /// The device's ordinal (0 for host memory).
    pub device_id: i32,
}

/// dlpack.h's DLDataType: a DLDataTypeCode, the bits of one lane, the lanes.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CaiDLDataType {
    /// A DLDataTypeCode: CAI_DL_INT (0), CAI_DL_UINT, CAI_DL_FLOAT, CAI_DL_BFLOAT, ...
    pub code: u8,
    /// Bits of one lane.
    pub bits: u8,
    /// Lanes of a vector type; 1 for scalars.
    pub lanes: u16,
}

impl CaiDLDataType {
    /// All zero: in `CaiArray.dl_dtype`, "the typestr says it all" (no DLPack type has 0 bits).
    pub const fn absent() -> CaiDLDataType {
        CaiDLDataType { code: 0, bits: 0, lanes: 0 }
    }

    /// Whether this is `absent()`.
    pub fn is_absent(&self) -> bool {
        *self == CaiDLDataType::absent()
    }
}

/// DLPack's type codes (DLDataTypeCode, DLPack 1.3), for `CaiDLDataType.code`.
/// kDLInt: signed integer.
pub const CAI_DL_INT: u8 = 0;
/// kDLUInt: unsigned integer.
pub const CAI_DL_UINT: u8 = 1;
/// kDLFloat: IEEE floating point.
pub const CAI_DL_FLOAT: u8 = 2;
/// kDLOpaqueHandle: reserved for testing; refused.
pub const CAI_DL_OPAQUE_HANDLE: u8 = 3;
/// kDLBfloat: bfloat16 (bits 16).
pub const CAI_DL_BFLOAT: u8 = 4;
/// kDLComplex: complex of two floats.
pub const CAI_DL_COMPLEX: u8 = 5;
/// kDLBool: bool (bits 8).
pub const CAI_DL_BOOL: u8 = 6;
/// kDLFloat8_e3m4 (bits 8).
pub const CAI_DL_FLOAT8_E3M4: u8 = 7;
/// kDLFloat8_e4m3 (bits 8).
pub const CAI_DL_FLOAT8_E4M3: u8 = 8;
/// kDLFloat8_e4m3b11fnuz (bits 8).
pub const CAI_DL_FLOAT8_E4M3B11FNUZ: u8 = 9;
/// kDLFloat8_e4m3fn (bits 8).
pub const CAI_DL_FLOAT8_E4M3FN: u8 = 10;
/// kDLFloat8_e4m3fnuz (bits 8).
pub const CAI_DL_FLOAT8_E4M3FNUZ: u8 = 11;
/// kDLFloat8_e5m2 (bits 8).
pub const CAI_DL_FLOAT8_E5M2: u8 = 12;
/// kDLFloat8_e5m2fnuz (bits 8).
pub const CAI_DL_FLOAT8_E5M2FNUZ: u8 = 13;
/// kDLFloat8_e8m0fnu (bits 8).
pub const CAI_DL_FLOAT8_E8M0FNU: u8 = 14;
/// kDLFloat6_e2m3fn (bits 6).
pub const CAI_DL_FLOAT6_E2M3FN: u8 = 15;
/// kDLFloat6_e3m2fn (bits 6).
pub const CAI_DL_FLOAT6_E3M2FN: u8 = 16;
/// kDLFloat4_e2m1fn (bits 4).
pub const CAI_DL_FLOAT4_E2M1FN: u8 = 17;

/// dlpack.h's DLTensor. Strides count elements; NULL strides (before DLPack 1.2) mean
/// C-contiguous.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct CaiDLTensor {
    /// Start of the allocation (or the data; see `byte_offset`).
    pub data: *mut c_void,
    /// Where the memory is.
    pub device: CaiDLDevice,
    /// Number of dimensions.
    pub ndim: i32,
    /// Type of the elements.
    pub dtype: CaiDLDataType,
    /// `ndim` extents.
    pub shape: *mut i64,
    /// `ndim` strides in elements, or NULL for C-contiguous.
    pub strides: *mut i64,
    /// Bytes from `data` to the first element.
    pub byte_offset: u64,
}

/// dlpack.h's DLManagedTensor (the legacy, unversioned struct), field for field: cast a
/// `DLManagedTensor *` to it.
#[repr(C)]
#[derive(Debug)]
pub struct CaiDLManagedTensor {
    /// The tensor.
    pub dl_tensor: CaiDLTensor,
    /// The producer's private state.
    pub manager_ctx: *mut c_void,
    /// Frees the tensor; called once by its consumer. May be NULL.
    pub deleter: Option<unsafe extern "C" fn(tensor: *mut CaiDLManagedTensor)>,
}

/// dlpack.h's DLManagedTensorVersioned, field for field: cast a `DLManagedTensorVersioned *`
/// to it. `version`, `manager_ctx` and `deleter` come first in every DLPack version.
#[repr(C)]
#[derive(Debug)]
pub struct CaiDLManagedTensorVersioned {
    /// The DLPack version the producer follows.
    pub version: CaiDLPackVersion,
    /// The producer's private state.
    pub manager_ctx: *mut c_void,
    /// Frees the tensor; called once by its consumer. May be NULL.
    pub deleter: Option<unsafe extern "C" fn(tensor: *mut CaiDLManagedTensorVersioned)>,
    /// CAI_DLPACK_FLAG_READ_ONLY and DLPack's other flag bits.
    pub flags: u64,
    /// The tensor.
    pub dl_tensor: CaiDLTensor,
}

/// Number of reserved words at the end of `CaiDLPackOptions`; they must be zero.
pub const CAI_DLPACK_OPTIONS_RESERVED_WORDS: usize = 7;

/// How `cai_from_dlpack` takes a tensor. Zero-initialized means the defaults.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct CaiDLPackOptions {
    /// 1: a tensor in host memory (kDLCPU) is taken too; else it is refused.
    pub allow_host: u32,
    /// Zero; later options go here, zero meaning their default.
    pub reserved: [u32; CAI_DLPACK_OPTIONS_RESERVED_WORDS],
}

/// Bytes in a `CaiIpcDescriptor`, whatever its version: a descriptor is sent as this many bytes.
pub const CAI_IPC_DESCRIPTOR_SIZE: usize = 1536;
/// Layout of `CaiIpcDescriptor` this header writes and reads.
pub const CAI_IPC_DESCRIPTOR_VERSION: u32 = 1;
/// `CaiIpcDescriptor.magic`: the bytes "CAIipc\0\x01" read as a native-endian 64-bit word.
pub const CAI_IPC_DESCRIPTOR_MAGIC: u64 = 0x0100_6370_6949_4143;
/// No handle: a zero-size array, which has no allocation; it opens to a zero-size array.
pub const CAI_IPC_KIND_NONE: u32 = 0;
/// `mem_handle` is cuIpcGetMemHandle's handle of the `cuMemAlloc` allocation holding the data.
pub const CAI_IPC_KIND_LEGACY: u32 = 1;
/// Reserved for memory of an IPC-enabled stream-ordered pool (cuMemPoolExportPointer); not
/// written by this version: the pool's own handle is a file descriptor on Linux, which plain
/// bytes cannot carry (see docs/policies.md, "Arrays across processes").
pub const CAI_IPC_KIND_POOL: u32 = 2;
/// `CaiIpcDescriptor.flags`: `event_handle` holds an IPC event the importer waits on.
pub const CAI_IPC_FLAG_EVENT: u32 = 1;
/// `CaiIpcDescriptor.flags`: the array is read-only (its `readonly` was 1).
pub const CAI_IPC_FLAG_READONLY: u32 = 2;
/// `CaiIpcDescriptor.flags`: `strides` holds the strides (else C-contiguous).
pub const CAI_IPC_FLAG_STRIDES: u32 = 4;
/// Every flag this version defines (EVENT | READONLY | STRIDES, a literal so that cffi reads
/// it); the others must be zero.
pub const CAI_IPC_FLAGS_KNOWN: u32 = 7;
const _: () =
    assert!(CAI_IPC_FLAGS_KNOWN == CAI_IPC_FLAG_EVENT | CAI_IPC_FLAG_READONLY | CAI_IPC_FLAG_STRIDES);
/// Bytes of a CUipcMemHandle and of a CUipcEventHandle (cuda.h's CU_IPC_HANDLE_SIZE).
pub const CAI_IPC_HANDLE_SIZE: usize = 64;
/// Number of reserved words before `checksum`; they must be zero.
pub const CAI_IPC_DESCRIPTOR_RESERVED_WORDS: usize = 32;

/// A device array as plain bytes another process on the same machine opens (`cai_ipc_open`):
/// no pointers, native byte order, `CAI_IPC_DESCRIPTOR_SIZE` bytes sent as they are by any
/// channel (a pipe, a socket, pickle, an object store). Written by `cai_ipc_export`.
///
/// LIFETIME RULE: the exporting process keeps the memory allocated (and itself alive) while
/// any importer uses it; libcai cannot see another process's use. An importer that opens a
/// descriptor whose memory was freed, or whose exporter exited, gets the driver's error
/// (CAI_ERROR_DRIVER) where the driver reports one; what it reads from memory freed after it
/// opened it is undefined, as for any use after free.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct CaiIpcDescriptor {
    /// CAI_IPC_DESCRIPTOR_MAGIC.
    pub magic: u64,
    /// CAI_IPC_DESCRIPTOR_VERSION.
    pub version: u32,
    /// CAI_IPC_DESCRIPTOR_SIZE.
    pub size: u32,
    /// CAI_IPC_KIND_NONE (zero-size array) or CAI_IPC_KIND_LEGACY.
    pub kind: u32,
    /// CAI_IPC_FLAG_* bits.
    pub flags: u32,
    /// Number of dimensions, 0 to CAI_MAX_NDIM.
    pub ndim: i32,
    /// Zero; a later 32-bit field goes here.
    pub reserved_head: u32,
    /// Extent of each of the first `ndim` dimensions; the rest zero.
    pub shape: [i64; CAI_MAX_NDIM],
    /// Byte strides of the first `ndim` dimensions with CAI_IPC_FLAG_STRIDES; the rest zero.
    pub strides: [i64; CAI_MAX_NDIM],
    /// NUL-terminated numpy typestr, the rest of the buffer zero.
    pub typestr: [c_char; CAI_TYPESTR_CAPACITY],
    /// DLPack's type of the elements where the typestr cannot say it (as `CaiArray.dl_dtype`).
    pub dl_dtype: CaiDLDataType,
    /// Zero.
    pub reserved_half: u32,
    /// Bytes from the allocation's base to the array's `data` (its first element).
    pub offset: u64,
    /// Bytes of the allocation (cuMemGetAddressRange); the array's extent lies inside it.
    pub allocation_size: u64,
    /// The device's UUID (cuDeviceGetUuid_v2): ordinals differ between processes.
    pub device_uuid: [u8; 16],
    /// Random, made once per exporting process: a descriptor opened by its own process is refused.
    pub process_token: [u8; 16],
    /// The CUipcMemHandle of the allocation (zero for CAI_IPC_KIND_NONE).
    pub mem_handle: [u8; CAI_IPC_HANDLE_SIZE],
    /// The CUipcEventHandle of an event recorded after the producer's pending work, with
    /// CAI_IPC_FLAG_EVENT; else zero.
    pub event_handle: [u8; CAI_IPC_HANDLE_SIZE],
    /// Zero; later fields go here.
    pub reserved: [u64; CAI_IPC_DESCRIPTOR_RESERVED_WORDS],
    /// FNV-1a 64 taken a native 64-bit word at a time over every word before this field
    /// (hash = (hash ^ word) * 0x100000001b3 from 0xcbf29ce484222325): a corrupt one is refused.
    pub checksum: u64,
}

impl CaiIpcDescriptor {
    /// An all-zero descriptor (not one that opens: its magic is zero).
    pub const fn zeroed() -> CaiIpcDescriptor {
        CaiIpcDescriptor {
            magic: 0,
            version: 0,
            size: 0,
            kind: 0,
            flags: 0,
            ndim: 0,
            reserved_head: 0,
            shape: [0; CAI_MAX_NDIM],
            strides: [0; CAI_MAX_NDIM],
            typestr: [0; CAI_TYPESTR_CAPACITY],
            dl_dtype: CaiDLDataType::absent(),
            reserved_half: 0,
            offset: 0,
            allocation_size: 0,
            device_uuid: [0; 16],
            process_token: [0; 16],
            mem_handle: [0; CAI_IPC_HANDLE_SIZE],
            event_handle: [0; CAI_IPC_HANDLE_SIZE],
            reserved: [0; CAI_IPC_DESCRIPTOR_RESERVED_WORDS],
            checksum: 0,
        }
    }

    /// The descriptor's bytes, as they are sent.
    pub fn as_bytes(&self) -> &[u8; CAI_IPC_DESCRIPTOR_SIZE] {
        // SAFETY: repr(C), exactly CAI_IPC_DESCRIPTOR_SIZE bytes with no padding (the asserts
        // below), every byte initialized; u8 has alignment 1.
        unsafe { &*(self as *const CaiIpcDescriptor).cast::<[u8; CAI_IPC_DESCRIPTOR_SIZE]>() }
    }

    /// A descriptor read from `bytes` as they were sent (any bytes: `cai_ipc_open` checks them).
    pub fn from_bytes(bytes: &[u8; CAI_IPC_DESCRIPTOR_SIZE]) -> CaiIpcDescriptor {
        let mut out = CaiIpcDescriptor::zeroed();
        // SAFETY: every bit pattern is a valid descriptor (integers and byte arrays only);
        // the sizes are equal (asserted below) and the two do not overlap.
        unsafe {
            std::ptr::copy_nonoverlapping(
                bytes.as_ptr(),
                (&mut out as *mut CaiIpcDescriptor).cast::<u8>(),
                CAI_IPC_DESCRIPTOR_SIZE,
            )
        };
        out
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

/// Moves what `src` owns into `dst`: a bitwise copy, then `src`'s release cleared. Refused
/// when the two are the same array, or while `dst` still owns one (it would leak).
///
/// # Safety
/// `dst` and `src` point to valid CaiArrays that nothing else touches meanwhile.
pub unsafe fn move_array(dst: *mut CaiArray, src: *mut CaiArray) -> Result<()> {
    if std::ptr::eq(dst, src) {
        return Err(Error::new(Status::InvalidArgument, "dst and src are the same array"));
    }
    if (*dst).release.is_some() {
        return Err(Error::new(
            Status::InvalidArgument,
            "dst still owns an array (its release is set): release it before moving into it",
        ));
    }
    *dst = *src;
    (*src).release = None;
    Ok(())
}

pub(crate) fn c_chars_until_nul(buffer: &[c_char]) -> Option<&[u8]> {
    // SAFETY: c_char is i8 or u8 depending on the target; both have the layout of u8, and the
    // slice keeps the buffer's length and lifetime.
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

// The C tests assert the same numbers with _Static_assert(offsetof(...)) (c_tests/test_core.c),
// so the Rust and C views of these structs cannot drift apart unnoticed.
#[cfg(target_pointer_width = "64")]
const _: () = {
    use std::mem::{offset_of, size_of};
    // The prefix that never moves (see CAI_ABI_VERSION).
    assert!(offset_of!(CaiArray, abi_version) == 0);
    assert!(offset_of!(CaiArray, version) == 4);
    assert!(offset_of!(CaiArray, owner) == 8);
    assert!(offset_of!(CaiArray, release) == 16);
    assert!(offset_of!(CaiArray, ndim) == 24);
    assert!(offset_of!(CaiArray, readonly) == 28);
    assert!(offset_of!(CaiArray, strides_given) == 32);
    assert!(offset_of!(CaiArray, descr_count) == 36);
    assert!(offset_of!(CaiArray, data) == 40);
    assert!(offset_of!(CaiArray, stream) == 48);
    assert!(offset_of!(CaiArray, typestr) == 56);
    assert!(offset_of!(CaiArray, shape) == 88);
    assert!(offset_of!(CaiArray, strides) == 600);
    assert!(offset_of!(CaiArray, mask) == 1112);
    assert!(offset_of!(CaiArray, descr) == 1120);
    assert!(offset_of!(CaiArray, memory) == 1128);
    assert!(offset_of!(CaiArray, stream_kind) == 1132);
    assert!(offset_of!(CaiArray, byte_offset) == 1136);
    assert!(offset_of!(CaiArray, dl_dtype) == 1144);
    assert!(offset_of!(CaiArray, reserved_half) == 1148);
    assert!(offset_of!(CaiArray, reserved) == 1152);
    assert!(size_of::<CaiArray>() == 1160);

    assert!(offset_of!(CaiField, name) == 0);
    assert!(offset_of!(CaiField, typestr) == 64);
    assert!(offset_of!(CaiField, offset) == 96);
    assert!(size_of::<CaiField>() == 104);

    assert!(offset_of!(CaiDtype, itemsize) == 0);
    assert!(offset_of!(CaiDtype, kind) == 8);
    assert!(offset_of!(CaiDtype, byteorder) == 9);
    assert!(size_of::<CaiDtype>() == 16);

    assert!(offset_of!(CaiLayout, element_count) == 0);
    assert!(offset_of!(CaiLayout, nbytes) == 8);
    assert!(offset_of!(CaiLayout, extent_begin) == 16);
    assert!(offset_of!(CaiLayout, extent_end) == 24);
    assert!(offset_of!(CaiLayout, c_contiguous) == 32);
    assert!(offset_of!(CaiLayout, f_contiguous) == 36);
    assert!(offset_of!(CaiLayout, strides_itemsize_aligned) == 40);
    assert!(offset_of!(CaiLayout, reserved) == 44);
    assert!(size_of::<CaiLayout>() == 64);

    assert!(offset_of!(CaiError, code) == 0);
    assert!(offset_of!(CaiError, driver_result) == 4);
    assert!(offset_of!(CaiError, message) == 8);
    assert!(size_of::<CaiError>() == 520);

    assert!(offset_of!(CaiPointerInfo, device_pointer) == 0);
    assert!(offset_of!(CaiPointerInfo, allocation_base) == 8);
    assert!(offset_of!(CaiPointerInfo, allocation_size) == 16);
    assert!(offset_of!(CaiPointerInfo, context) == 24);
    assert!(offset_of!(CaiPointerInfo, device_ordinal) == 32);
    assert!(offset_of!(CaiPointerInfo, memory_type) == 36);
    assert!(offset_of!(CaiPointerInfo, is_managed) == 40);
    assert!(offset_of!(CaiPointerInfo, checked) == 44);
    assert!(offset_of!(CaiPointerInfo, reserved) == 48);
    assert!(size_of::<CaiPointerInfo>() == 64);

    assert!(offset_of!(CaiImportOptions, consumer_stream) == 0);
    assert!(offset_of!(CaiImportOptions, sync_mode) == 8);
    assert!(offset_of!(CaiImportOptions, pointer_check) == 12);
    assert!(offset_of!(CaiImportOptions, writable) == 16);
    assert!(offset_of!(CaiImportOptions, native_only) == 20);
    assert!(offset_of!(CaiImportOptions, allow_host) == 24);
    assert!(offset_of!(CaiImportOptions, reserved) == 28);
    assert!(size_of::<CaiImportOptions>() == 48);

    assert!(offset_of!(CaiSyncOptions, consumer_stream) == 0);
    assert!(offset_of!(CaiSyncOptions, sync_mode) == 8);
    assert!(offset_of!(CaiSyncOptions, reserved) == 12);
    assert!(size_of::<CaiSyncOptions>() == 32);

    assert!(offset_of!(CaiExportOptions, work_streams) == 0);
    assert!(offset_of!(CaiExportOptions, work_stream_count) == 8);
    assert!(offset_of!(CaiExportOptions, version) == 16);
    assert!(offset_of!(CaiExportOptions, check_pointer) == 20);
    assert!(offset_of!(CaiExportOptions, per_thread_default_stream) == 24);
    assert!(offset_of!(CaiExportOptions, reserved) == 28);
    assert!(size_of::<CaiExportOptions>() == 48);

    // dlpack.h's layout (c_tests/test_dlpack.c compares with a real dlpack.h where installed).
    assert!(size_of::<CaiDLPackVersion>() == 8);
    assert!(offset_of!(CaiDLDevice, device_id) == 4);
    assert!(size_of::<CaiDLDevice>() == 8);
    assert!(offset_of!(CaiDLDataType, bits) == 1);
    assert!(offset_of!(CaiDLDataType, lanes) == 2);
    assert!(size_of::<CaiDLDataType>() == 4);
    assert!(offset_of!(CaiDLTensor, data) == 0);
    assert!(offset_of!(CaiDLTensor, device) == 8);
    assert!(offset_of!(CaiDLTensor, ndim) == 16);
    assert!(offset_of!(CaiDLTensor, dtype) == 20);
    assert!(offset_of!(CaiDLTensor, shape) == 24);
    assert!(offset_of!(CaiDLTensor, strides) == 32);
    assert!(offset_of!(CaiDLTensor, byte_offset) == 40);
    assert!(size_of::<CaiDLTensor>() == 48);
    assert!(offset_of!(CaiDLManagedTensor, manager_ctx) == 48);
    assert!(offset_of!(CaiDLManagedTensor, deleter) == 56);
    assert!(size_of::<CaiDLManagedTensor>() == 64);
    assert!(offset_of!(CaiDLManagedTensorVersioned, version) == 0);
    assert!(offset_of!(CaiDLManagedTensorVersioned, manager_ctx) == 8);
    assert!(offset_of!(CaiDLManagedTensorVersioned, deleter) == 16);
    assert!(offset_of!(CaiDLManagedTensorVersioned, flags) == 24);
    assert!(offset_of!(CaiDLManagedTensorVersioned, dl_tensor) == 32);
    assert!(size_of::<CaiDLManagedTensorVersioned>() == 80);
    assert!(offset_of!(CaiDLPackOptions, reserved) == 4);
    assert!(size_of::<CaiDLPackOptions>() == 32);

    assert!(offset_of!(CaiIpcDescriptor, magic) == 0);
    assert!(offset_of!(CaiIpcDescriptor, version) == 8);
    assert!(offset_of!(CaiIpcDescriptor, size) == 12);
    assert!(offset_of!(CaiIpcDescriptor, kind) == 16);
    assert!(offset_of!(CaiIpcDescriptor, flags) == 20);
    assert!(offset_of!(CaiIpcDescriptor, ndim) == 24);
    assert!(offset_of!(CaiIpcDescriptor, reserved_head) == 28);
    assert!(offset_of!(CaiIpcDescriptor, shape) == 32);
    assert!(offset_of!(CaiIpcDescriptor, strides) == 544);
    assert!(offset_of!(CaiIpcDescriptor, typestr) == 1056);
    assert!(offset_of!(CaiIpcDescriptor, dl_dtype) == 1088);
    assert!(offset_of!(CaiIpcDescriptor, reserved_half) == 1092);
    assert!(offset_of!(CaiIpcDescriptor, offset) == 1096);
    assert!(offset_of!(CaiIpcDescriptor, allocation_size) == 1104);
    assert!(offset_of!(CaiIpcDescriptor, device_uuid) == 1112);
    assert!(offset_of!(CaiIpcDescriptor, process_token) == 1128);
    assert!(offset_of!(CaiIpcDescriptor, mem_handle) == 1144);
    assert!(offset_of!(CaiIpcDescriptor, event_handle) == 1208);
    assert!(offset_of!(CaiIpcDescriptor, reserved) == 1272);
    assert!(offset_of!(CaiIpcDescriptor, checksum) == 1528);
    assert!(size_of::<CaiIpcDescriptor>() == CAI_IPC_DESCRIPTOR_SIZE);
};

#[cfg(test)]
mod tests {
    use super::*;

    /// `copy_defined_to` writes every field and the extents of `ndim` dimensions, and leaves
    /// the extents past them as `out` had them: the same array as a whole-struct copy, read
    /// within its rank. `clear_head` makes every field a zeroed struct's and leaves the extents.
    #[test]
    fn a_defined_copy_is_the_array_within_its_rank_and_leaves_the_rest() {
        for ndim in [0usize, 1, 3, CAI_MAX_NDIM] {
            let mut array = CaiArray::zeroed();
            array.version = 3;
            array.owner = 0x10 as *mut c_void;
            array.ndim = ndim as i32;
            array.readonly = 1;
            array.strides_given = 1;
            array.descr_count = 2;
            array.data = 0x1000;
            array.stream = 9;
            array.set_typestr("<f8");
            array.mask = 0x20 as *const CaiArray;
            array.descr = 0x30 as *const CaiField;
            array.memory = CAI_MEMORY_OPENCL;
            array.stream_kind = CAI_OPENCL_STREAM_EVENT;
            array.byte_offset = 16;
            array.dl_dtype = CaiDLDataType { code: CAI_DL_BFLOAT, bits: 16, lanes: 1 };
            array.reserved_half = 5;
            array.reserved = [6];
            for i in 0..ndim {
                array.shape[i] = i as i64 + 2;
                array.strides[i] = -(i as i64) - 8;
            }
            let mut out = CaiArray::zeroed();
            out.shape = [-1; CAI_MAX_NDIM];
            out.strides = [-2; CAI_MAX_NDIM];
            array.copy_defined_to(&mut out);
            let mut whole = array;
            whole.shape[ndim..].fill(-1);
            whole.strides[ndim..].fill(-2);
            // SAFETY: a live struct read as its bytes (repr(C) with no padding: its fields pair
            // up to 8-byte words), as a C consumer reads it.
            let bytes = |a: &CaiArray| unsafe {
                std::slice::from_raw_parts(
                    (a as *const CaiArray).cast::<u8>(),
                    std::mem::size_of::<CaiArray>(),
                )
                .to_vec()
            };
            assert!(bytes(&out) == bytes(&whole), "ndim {ndim}: the copy differs from the array");
            // Cleared for a new fill: every field a zeroed struct's, the extents as they were.
            let mut cleared = array;
            cleared.clear_head();
            let mut expected = CaiArray::zeroed();
            expected.shape = array.shape;
            expected.strides = array.strides;
            assert!(
                bytes(&cleared) == bytes(&expected),
                "ndim {ndim}: clear_head left a field or moved an extent"
            );
        }
    }
}
