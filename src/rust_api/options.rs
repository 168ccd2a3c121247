//! How an import checks and orders: the typed form of `CaiImportOptions`.

use crate::abi::{
    CaiImportOptions, CAI_POINTER_CHECK_ALWAYS, CAI_POINTER_CHECK_DEFAULT, CAI_POINTER_CHECK_NEVER,
    CAI_SYNC_BLOCKING, CAI_SYNC_DEFAULT, CAI_SYNC_NONE, CAI_SYNC_STREAM_ORDERED,
};

/// How the consumer is ordered after the producer's stream (`CAI_SYNC_*`).
///
/// ```
/// use cai::{ImportOptions, SyncMode};
/// assert_eq!(SyncMode::default(), SyncMode::Default);
/// let options = ImportOptions::new().sync(SyncMode::None);
/// assert_eq!(options.as_raw().sync_mode, cai::CAI_SYNC_NONE);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum SyncMode {
    /// Stream-ordered when the consumer names a stream, else blocking; off when the environment
    /// sets `CAI_ARRAY_INTERFACE_SYNC=0`.
    #[default]
    Default,
    /// The consumer's stream waits on an event recorded on the producer's; the host does not
    /// block. Without a consumer stream, blocking.
    StreamOrdered,
    /// The host waits for the producer's stream.
    Blocking,
    /// No synchronization: the caller orders the work itself.
    None,
}

impl SyncMode {
    pub(crate) fn code(self) -> i32 {
        match self {
            SyncMode::Default => CAI_SYNC_DEFAULT,
            SyncMode::StreamOrdered => CAI_SYNC_STREAM_ORDERED,
            SyncMode::Blocking => CAI_SYNC_BLOCKING,
            SyncMode::None => CAI_SYNC_NONE,
        }
    }
}

/// Whether an import asks the driver about the data pointer (`CAI_POINTER_CHECK_*`).
///
/// ```
/// use cai::{ImportOptions, PointerCheck};
/// let array = cai::Array::builder("<f4", &[4], 0x7f00_0000_1000).build()?;
/// let info = array.import(&ImportOptions::new().pointer_check(PointerCheck::Never))?;
/// assert!(!info.checked, "the driver was not asked");
/// # Ok::<(), cai::Error>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum PointerCheck {
    /// Check when a driver loads; skip quietly when none does.
    #[default]
    IfDriverLoads,
    /// Always check; fail with [`Status::NoDriver`](crate::status::Status::NoDriver) when no driver loads.
    Always,
    /// Never ask the driver.
    Never,
}

impl PointerCheck {
    fn code(self) -> i32 {
        match self {
            PointerCheck::IfDriverLoads => CAI_POINTER_CHECK_DEFAULT,
            PointerCheck::Always => CAI_POINTER_CHECK_ALWAYS,
            PointerCheck::Never => CAI_POINTER_CHECK_NEVER,
        }
    }
}

/// How [`ArrayRef::import`](super::ArrayRef::import) accepts an array; `default()` is what
/// `cai_import` does with NULL options.
///
/// ```
/// use cai::{ImportOptions, PointerCheck, SyncMode};
/// let options = ImportOptions::new().writable(true).pointer_check(PointerCheck::Always).sync(SyncMode::Blocking);
/// assert_eq!(options.as_raw().writable, 1);
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct ImportOptions {
    raw: CaiImportOptions,
}

impl ImportOptions {
    /// The defaults: no consumer stream, [`SyncMode::Default`], [`PointerCheck::IfDriverLoads`],
    /// read-only access, any byte order, device memory only.
    pub fn new() -> ImportOptions {
        ImportOptions::default()
    }

    /// The consumer's stream: for CUDA memory 0 (none), 1 (legacy default), 2 (per-thread
    /// default) or a `CUstream`; for OpenCL memory 0 or a `cl_command_queue`.
    ///
    /// # Safety
    /// A handle other than 0, 1 and 2 is live (not destroyed) for every import made with these
    /// options: the driver is handed it and cannot tell a stale handle from a live one.
    ///
    /// ```
    /// // SAFETY: 2 is the per-thread default stream, not a handle.
    /// let options = unsafe { cai::ImportOptions::new().consumer_stream(2) };
    /// assert_eq!(options.as_raw().consumer_stream, 2);
    /// ```
    pub unsafe fn consumer_stream(mut self, stream: u64) -> ImportOptions {
        self.raw.consumer_stream = stream;
        self
    }

    /// How the consumer is ordered after the producer.
    pub fn sync(mut self, mode: SyncMode) -> ImportOptions {
        self.raw.sync_mode = mode.code();
        self
    }

    /// Whether the driver is asked about the data pointer.
    pub fn pointer_check(mut self, check: PointerCheck) -> ImportOptions {
        self.raw.pointer_check = check.code();
        self
    }

    /// The consumer will write: a read-only array fails with [`Status::Readonly`](crate::status::Status::Readonly).
    ///
    /// ```
    /// use cai::{ImportOptions, PointerCheck, Status};
    /// let array = cai::Array::builder("<f4", &[4], 0x7f00_0000_1000).readonly(true).build()?;
    /// let options = ImportOptions::new().pointer_check(PointerCheck::Never);
    /// assert_eq!(array.import(&options.writable(true)).unwrap_err().status, Status::Readonly);
    /// array.import(&options)?;
    /// # Ok::<(), cai::Error>(())
    /// ```
    pub fn writable(mut self, writable: bool) -> ImportOptions {
        self.raw.writable = writable.into();
        self
    }

    /// Only this host's byte order is accepted (as CuPy and mpi4py require).
    ///
    /// ```
    /// use cai::{ImportOptions, PointerCheck};
    /// let foreign = if cfg!(target_endian = "little") { ">f4" } else { "<f4" };
    /// let array = cai::Array::builder(foreign, &[4], 0x7f00_0000_1000).build()?;
    /// let options = ImportOptions::new().pointer_check(PointerCheck::Never);
    /// assert!(array.import(&options.native_only(true)).is_err());
    /// array.import(&options)?;
    /// # Ok::<(), cai::Error>(())
    /// ```
    pub fn native_only(mut self, native_only: bool) -> ImportOptions {
        self.raw.native_only = native_only.into();
        self
    }

    /// Host memory the device cannot reach passes the pointer check.
    ///
    /// ```
    /// assert_eq!(cai::ImportOptions::new().allow_host(true).as_raw().allow_host, 1);
    /// ```
    pub fn allow_host(mut self, allow_host: bool) -> ImportOptions {
        self.raw.allow_host = allow_host.into();
        self
    }

    /// The C struct these options fill.
    pub fn as_raw(&self) -> &CaiImportOptions {
        &self.raw
    }
}

/// How [`release_pending`](super::release_pending) runs the releases
/// [`Array::release_after`](super::Array::release_after) queued (`CAI_PENDING_*`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum PendingMode {
    /// Runs those whose work has completed; never waits (`CAI_PENDING_POLL`).
    #[default]
    Poll,
    /// Waits on the host for each one's work, runs them all and leaves none queued
    /// (`CAI_PENDING_WAIT`): before the program exits.
    Wait,
}
