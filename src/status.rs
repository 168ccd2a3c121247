//! Status codes and the error every libcai function reports through.
//!
//! Codes are plain `i32` constants (cbindgen emits them as `#define`s): cffi cannot parse
//! cbindgen's enum guards, and an out-of-range C enum read into Rust is undefined behaviour.

/// What every status-returning function returns: CAI_OK or one CAI_ERROR_* code.
pub type CaiStatus = i32;

/// Success.
pub const CAI_OK: i32 = 0;
/// A required pointer argument was NULL.
pub const CAI_ERROR_NULL_ARGUMENT: i32 = 1;
/// An option, flag or reserved field holds a value the API does not define.
pub const CAI_ERROR_INVALID_ARGUMENT: i32 = 2;
/// `version` is missing or not one of 0, 1, 2, 3.
pub const CAI_ERROR_INVALID_VERSION: i32 = 3;
/// `ndim` or a `shape` extent is out of range.
pub const CAI_ERROR_INVALID_SHAPE: i32 = 4;
/// `strides` are malformed (wrong count, bad flag).
pub const CAI_ERROR_INVALID_STRIDES: i32 = 5;
/// `typestr` is not a numpy type string a device array can hold.
pub const CAI_ERROR_INVALID_TYPESTR: i32 = 6;
/// `data` is malformed: NULL pointer for a non-empty array, bad read-only flag.
pub const CAI_ERROR_INVALID_DATA: i32 = 7;
/// `stream` is 0, negative or not an integer.
pub const CAI_ERROR_INVALID_STREAM: i32 = 8;
/// `mask` has another shape, points to itself or nests too deeply.
pub const CAI_ERROR_INVALID_MASK: i32 = 9;
/// `descr` fields do not add up to the typestr's itemsize, or are malformed.
pub const CAI_ERROR_INVALID_DESCR: i32 = 10;
/// Element count, byte size or byte extent does not fit in 64 bits.
pub const CAI_ERROR_OVERFLOW: i32 = 11;
/// Writable access was asked for on a read-only array.
pub const CAI_ERROR_READONLY: i32 = 12;
/// The driver library the call needs (libcuda.so.1, or libOpenCL.so.1 for OpenCL memory) could
/// not be loaded, or its initialization failed; the message has the loader's reason. A CUDA
/// driver that loads but finds no GPU is this status too, with cuInit's CUresult in
/// `driver_result` (100, CUDA_ERROR_NO_DEVICE), and so is every CUDA driver call of a process
/// forked after its parent began loading the driver (CUDA does not carry over a fork), and
/// every OpenCL call of one forked while another thread was loading the OpenCL library (a load
/// that cannot finish in the child): either way no pointer check or sync can run.
pub const CAI_ERROR_NO_DRIVER: i32 = 13;
/// A driver call failed; `CaiError.driver_result` holds its raw result (a CUresult, or an OpenCL
/// cl_int for OpenCL memory).
pub const CAI_ERROR_DRIVER: i32 = 14;
/// The data is not memory the consumer can use: a CUDA pointer the device cannot reach (host
/// memory without `allow_host` included), device memory of another device than the one a
/// DLPack tensor names, or an OpenCL buffer of another context than the consumer queue's.
pub const CAI_ERROR_NOT_DEVICE_POINTER: i32 = 15;
/// The array's byte extent runs outside the allocation that holds its data pointer.
pub const CAI_ERROR_OUT_OF_BOUNDS: i32 = 16;
/// A Rust panic was caught at the API boundary (a libcai bug; please report it).
pub const CAI_ERROR_PANIC: i32 = 17;

/// The array's `abi_version` is a layout this libcai cannot read; it may only be released.
pub const CAI_ERROR_ABI_VERSION: i32 = 18;

/// A Python exception stopped `cai_python_from_object` (the object is not an array libcai
/// takes, or its own code raised); the exception is set and its text is the message.
pub const CAI_ERROR_PYTHON: i32 = 19;

/// The data is declared host memory (a kDLCPU DLPack tensor) and the call did not allow it:
/// pass allow_host. (A CUDA pointer the driver does not know, which may be anything, is
/// CAI_ERROR_NOT_DEVICE_POINTER.)
pub const CAI_ERROR_HOST_MEMORY: i32 = 20;

/// An OpenCL buffer or event belongs to another context than the consumer queue's.
pub const CAI_ERROR_WRONG_CONTEXT: i32 = 21;
/// A producer's C-level CAI table cannot describe this object that way (a `view` of an
/// instance that has no storage for its description): try `acquire`, or another protocol.
pub const CAI_ERROR_NOT_SUPPORTED: i32 = 22;
/// A sync was refused because a stream it involves is capturing a CUDA graph (or is the legacy
/// stream while a stream of its context is): the driver would refuse it and invalidate the
/// capture, or it would pull another stream into the capture. Refused before anything was
/// enqueued, so the capture is still valid; the message names the stream and what to pass
/// instead (the capturing stream as the consumer stream, or CAI_SYNC_NONE).
pub const CAI_ERROR_STREAM_CAPTURING: i32 = 23;
/// The memory cannot be carried to another process by an IPC descriptor, or not opened in this
/// one: managed, host or pool memory, memory the driver does not know, or a descriptor naming a
/// device (by UUID) this process lacks. The message names the memory and what to send instead.
pub const CAI_ERROR_NOT_SHAREABLE: i32 = 24;
/// An IPC descriptor that cannot be opened as it is: a wrong magic, size or checksum (corrupt,
/// or not a descriptor), another descriptor version, a reserved field not zero, or a descriptor
/// opened in the process that exported it (use the array itself there).
pub const CAI_ERROR_IPC_DESCRIPTOR: i32 = 25;

/// Kinds of failure, one per `CAI_ERROR_*` code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(i32)]
pub enum Status {
    /// A required pointer argument was NULL.
    NullArgument = CAI_ERROR_NULL_ARGUMENT,
    /// An option, flag or reserved field holds a value the API does not define.
    InvalidArgument = CAI_ERROR_INVALID_ARGUMENT,
    /// `version` is missing or not one of 0, 1, 2, 3.
    InvalidVersion = CAI_ERROR_INVALID_VERSION,
    /// `ndim` or a `shape` extent is out of range.
    InvalidShape = CAI_ERROR_INVALID_SHAPE,
    /// `strides` are malformed (wrong count, bad flag).
    InvalidStrides = CAI_ERROR_INVALID_STRIDES,
    /// `typestr` is not a numpy type string a device array can hold.
    InvalidTypestr = CAI_ERROR_INVALID_TYPESTR,
    /// `data` is malformed: NULL pointer for a non-empty array, bad read-only flag.
    InvalidData = CAI_ERROR_INVALID_DATA,
    /// `stream` is 0, negative or not an integer.
    InvalidStream = CAI_ERROR_INVALID_STREAM,
    /// `mask` has another shape, points to itself or nests too deeply.
    InvalidMask = CAI_ERROR_INVALID_MASK,
    /// `descr` fields do not add up to the typestr's itemsize, or are malformed.
    InvalidDescr = CAI_ERROR_INVALID_DESCR,
    /// Element count, byte size or byte extent does not fit in 64 bits.
    Overflow = CAI_ERROR_OVERFLOW,
    /// Writable access was asked for on a read-only array.
    Readonly = CAI_ERROR_READONLY,
    /// The driver library the call needs (libcuda.so.1, or libOpenCL.so.1 for OpenCL memory) could
    /// not be loaded, or its initialization failed; the message has the loader's reason.
    NoDriver = CAI_ERROR_NO_DRIVER,
    /// A driver call failed; `CaiError.driver_result` holds its raw result (a CUresult, or an OpenCL
    /// cl_int for OpenCL memory).
    Driver = CAI_ERROR_DRIVER,
    /// The data is not memory the consumer can use: a CUDA pointer the device cannot reach (host
    /// memory without `allow_host` included), device memory of another device than the one a
    /// DLPack tensor names, or an OpenCL buffer of another context than the consumer queue's.
    NotDevicePointer = CAI_ERROR_NOT_DEVICE_POINTER,
    /// The array's byte extent runs outside the allocation that holds its data pointer.
    OutOfBounds = CAI_ERROR_OUT_OF_BOUNDS,
    /// A Rust panic was caught at the API boundary (a libcai bug; please report it).
    Panic = CAI_ERROR_PANIC,
    /// The array's `abi_version` is a layout this libcai cannot read; it may only be released.
    AbiVersion = CAI_ERROR_ABI_VERSION,
    /// A Python exception stopped `cai_python_from_object` (the object is not an array libcai
    /// takes, or its own code raised); the exception is set and its text is the message.
    Python = CAI_ERROR_PYTHON,
    /// The data is declared host memory (a kDLCPU DLPack tensor) and the call did not allow it:
    /// pass allow_host. (A CUDA pointer the driver does not know, which may be anything, is
    /// CAI_ERROR_NOT_DEVICE_POINTER.)
    HostMemory = CAI_ERROR_HOST_MEMORY,
    /// An OpenCL buffer or event belongs to another context than the consumer queue's.
    WrongContext = CAI_ERROR_WRONG_CONTEXT,
    /// A producer's C-level CAI table cannot describe the object that way (a `view` it has no
    /// storage for): try `acquire`, or another protocol the object offers.
    NotSupported = CAI_ERROR_NOT_SUPPORTED,
    /// A sync was refused because a stream it involves is capturing a CUDA graph (or is the
    /// legacy stream while a stream of its context is); the capture is still valid.
    StreamCapturing = CAI_ERROR_STREAM_CAPTURING,
    /// The memory cannot be carried to another process by an IPC descriptor, or not opened in
    /// this one (managed, host or pool memory; a device this process lacks).
    NotShareable = CAI_ERROR_NOT_SHAREABLE,
    /// An IPC descriptor that cannot be opened as it is: corrupt, of another version, or opened
    /// in the process that exported it.
    IpcDescriptor = CAI_ERROR_IPC_DESCRIPTOR,
}

impl Status {
    /// Every status, in code order.
    pub const ALL: [Status; 25] = [
        Status::NullArgument,
        Status::InvalidArgument,
        Status::InvalidVersion,
        Status::InvalidShape,
        Status::InvalidStrides,
        Status::InvalidTypestr,
        Status::InvalidData,
        Status::InvalidStream,
        Status::InvalidMask,
        Status::InvalidDescr,
        Status::Overflow,
        Status::Readonly,
        Status::NoDriver,
        Status::Driver,
        Status::NotDevicePointer,
        Status::OutOfBounds,
        Status::Panic,
        Status::AbiVersion,
        Status::Python,
        Status::HostMemory,
        Status::WrongContext,
        Status::NotSupported,
        Status::StreamCapturing,
        Status::NotShareable,
        Status::IpcDescriptor,
    ];

    /// The `CAI_ERROR_*` code.
    pub fn code(self) -> i32 {
        self as i32
    }

    /// The `#define` name, NUL-terminated so the FFI can hand it out as a C string.
    pub fn name_with_nul(self) -> &'static str {
        match self {
            Status::NullArgument => "CAI_ERROR_NULL_ARGUMENT\0",
            Status::InvalidArgument => "CAI_ERROR_INVALID_ARGUMENT\0",
            Status::InvalidVersion => "CAI_ERROR_INVALID_VERSION\0",
            Status::InvalidShape => "CAI_ERROR_INVALID_SHAPE\0",
            Status::InvalidStrides => "CAI_ERROR_INVALID_STRIDES\0",
            Status::InvalidTypestr => "CAI_ERROR_INVALID_TYPESTR\0",
            Status::InvalidData => "CAI_ERROR_INVALID_DATA\0",
            Status::InvalidStream => "CAI_ERROR_INVALID_STREAM\0",
            Status::InvalidMask => "CAI_ERROR_INVALID_MASK\0",
            Status::InvalidDescr => "CAI_ERROR_INVALID_DESCR\0",
            Status::Overflow => "CAI_ERROR_OVERFLOW\0",
            Status::Readonly => "CAI_ERROR_READONLY\0",
            Status::NoDriver => "CAI_ERROR_NO_DRIVER\0",
            Status::Driver => "CAI_ERROR_DRIVER\0",
            Status::NotDevicePointer => "CAI_ERROR_NOT_DEVICE_POINTER\0",
            Status::OutOfBounds => "CAI_ERROR_OUT_OF_BOUNDS\0",
            Status::Panic => "CAI_ERROR_PANIC\0",
            Status::AbiVersion => "CAI_ERROR_ABI_VERSION\0",
            Status::Python => "CAI_ERROR_PYTHON\0",
            Status::HostMemory => "CAI_ERROR_HOST_MEMORY\0",
            Status::WrongContext => "CAI_ERROR_WRONG_CONTEXT\0",
            Status::NotSupported => "CAI_ERROR_NOT_SUPPORTED\0",
            Status::StreamCapturing => "CAI_ERROR_STREAM_CAPTURING\0",
            Status::NotShareable => "CAI_ERROR_NOT_SHAREABLE\0",
            Status::IpcDescriptor => "CAI_ERROR_IPC_DESCRIPTOR\0",
        }
    }

    /// The `#define` name, e.g. `"CAI_ERROR_INVALID_SHAPE"`.
    pub fn name(self) -> &'static str {
        self.name_with_nul().trim_end_matches('\0')
    }

    /// The status of a `CAI_ERROR_*` code; None for CAI_OK and unknown codes.
    pub fn from_code(code: i32) -> Option<Status> {
        Status::ALL.into_iter().find(|s| s.code() == code)
    }
}

/// A failure: its kind, the driver's raw result where a driver call failed (a CUresult or a
/// cl_int; 0 otherwise), and a message that names the offending field and value. Displays as
/// the C API's `CaiError.message` does: `"CAI_ERROR_INVALID_SHAPE: shape[0] is -1 ..."`.
///
/// ```
/// let error = cai::Dtype::parse("<q9").unwrap_err();
/// assert_eq!((error.status(), error.driver_result()), (cai::Status::InvalidTypestr, 0));
/// assert!(error.to_string().starts_with("CAI_ERROR_INVALID_TYPESTR: "), "{error}");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}: {message}", status.name())]
pub struct Error {
    /// What kind of failure.
    pub status: Status,
    /// The raw result of the driver call that failed (a CUresult, or an OpenCL cl_int for
    /// OpenCL memory); 0 when no driver call failed.
    pub driver_result: i32,
    /// What went wrong, naming the field, the value and the fix.
    pub message: String,
}

impl Error {
    /// A failure of `status` with `message` and no driver result.
    pub fn new(status: Status, message: impl Into<String>) -> Error {
        Error { status, driver_result: 0, message: message.into() }
    }

    /// A failed driver call that returned `driver_result`.
    pub fn driver(driver_result: i32, message: impl Into<String>) -> Error {
        Error { status: Status::Driver, driver_result, message: message.into() }
    }

    /// What kind of failure.
    pub fn status(&self) -> Status {
        self.status
    }

    /// The raw result of the driver call that failed; 0 when none did.
    pub fn driver_result(&self) -> i32 {
        self.driver_result
    }

    /// The message, without the status name that `Display` puts first.
    pub fn message(&self) -> &str {
        &self.message
    }
}

/// What every fallible function of the Rust API returns.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The error of a broken rule, built out of line: a rule's passing path stays a few
/// instructions that inline into its caller, and the message is formatted only on failure.
#[cold]
#[inline(never)]
pub(crate) fn fail<T>(status: Status, message: impl FnOnce() -> String) -> Result<T> {
    Err(Error::new(status, message()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_status_round_trips_through_its_code_and_name() {
        for s in Status::ALL {
            assert_eq!(Status::from_code(s.code()), Some(s));
            assert!(s.name().starts_with("CAI_ERROR_"));
            assert!(!s.name().contains('\0'));
        }
        assert_eq!(Status::from_code(CAI_OK), None);
        assert_eq!(Status::from_code(999), None);
        let codes: std::collections::HashSet<i32> = Status::ALL.iter().map(|s| s.code()).collect();
        assert_eq!(codes.len(), Status::ALL.len(), "codes are distinct");
    }
}
