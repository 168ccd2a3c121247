//! Every environment variable libcai reads, each once per process, at its first use, and kept.
//! The two library paths are read when their library is first opened (once: it stays open).
//! The two defaults likewise: POSIX leaves `getenv` racing with another thread's `setenv` undefined,
//! so a library that read them on every call would race with any host program that sets its
//! environment late; and a default that changes mid-process would make two exports of one array
//! disagree. CuPy reads its own two variables (`CUPY_CUDA_ARRAY_INTERFACE_SYNC`,
//! `CUPY_CUDA_ARRAY_INTERFACE_EXPORT_VERSION`) once as well. Set them before the program
//! starts. A malformed value is refused by every call that needs it, naming the variable.

use std::sync::OnceLock;

use crate::status::{Error, Result, Status};

/// The CUDA driver to open instead of libcuda.so.1 (tests point it at the fake driver).
pub(crate) const DRIVER_PATH_ENV: &str = "CAI_CUDA_DRIVER";

/// The OpenCL library to open instead of libOpenCL.so.1.
pub(crate) const OPENCL_PATH_ENV: &str = "CAI_OPENCL_LIBRARY";

/// "0" turns the default consumer sync off (CAI_SYNC_DEFAULT then syncs nothing).
pub(crate) const SYNC_ENV: &str = "CAI_ARRAY_INTERFACE_SYNC";

/// "2" makes exports default to version 2, without `stream` (as CuPy's
/// CUPY_CUDA_ARRAY_INTERFACE_EXPORT_VERSION does); "3" or unset: version 3.
pub(crate) const EXPORT_VERSION_ENV: &str = "CAI_ARRAY_INTERFACE_EXPORT_VERSION";

/// The variable's value, trimmed; None when unset or empty.
fn read(name: &str) -> Option<String> {
    std::env::var(name).ok().map(|value| value.trim().to_string()).filter(|value| !value.is_empty())
}

/// Whether CAI_ARRAY_INTERFACE_SYNC=0 turned the default sync off.
pub(crate) fn default_sync_disabled() -> bool {
    static DISABLED: OnceLock<bool> = OnceLock::new();
    *DISABLED.get_or_init(|| read(SYNC_ENV).as_deref() == Some("0"))
}

/// The export version CAI_ARRAY_INTERFACE_EXPORT_VERSION asks for, None when unset.
pub(crate) fn export_version_from_environment() -> Result<Option<i32>> {
    static VERSION: OnceLock<std::result::Result<Option<i32>, String>> = OnceLock::new();
    let read = VERSION.get_or_init(|| match read(EXPORT_VERSION_ENV).as_deref() {
        None => Ok(None),
        Some("3") => Ok(Some(3)),
        Some("2") => Ok(Some(2)),
        Some(other) => Err(format!("{EXPORT_VERSION_ENV}={other:?}; it must be 2 or 3")),
    });
    read.clone().map_err(|message| Error::new(Status::InvalidArgument, message))
}
