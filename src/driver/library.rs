//! The one way libcai opens a driver library (libcuda, libOpenCL): never linked, opened at run
//! time with dlopen for the process's lifetime, at the path an environment variable names (read
//! when the library is first needed, once: src/config.rs lists them) or the default soname; a library
//! that does not open is a reason in words, never a panic.

use std::ffi::{c_void, CStr, CString};

/// An opened library, never closed: the function pointers taken from it stay valid.
pub(crate) struct Library {
    handle: *mut c_void,
    /// The path it was opened by, for messages.
    pub path: String,
}

/// The path to open: `env`'s value when set and not empty, else `default`.
pub(crate) fn path_from(env: &str, default: &str) -> String {
    std::env::var(env).ok().filter(|path| !path.is_empty()).unwrap_or_else(|| default.to_string())
}

impl Library {
    /// Opens `path` (RTLD_NOW | RTLD_LOCAL); Err names why, as the loader says it.
    pub(crate) fn open(path: String) -> Result<Library, (String, String)> {
        let Ok(c_path) = CString::new(path.as_str()) else {
            return Err((path, "the path contains a NUL byte".into()));
        };
        // SAFETY: dlopen with a valid C string; the handle is kept for the process's lifetime.
        let handle = unsafe { libc::dlopen(c_path.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
        if handle.is_null() {
            return Err((path, dl_error()));
        }
        Ok(Library { handle, path })
    }

    /// The address of `name` in the library, or NULL.
    pub(crate) fn symbol(&self, name: &str) -> *mut c_void {
        let c_name = CString::new(name).expect("symbol names have no NUL");
        // SAFETY: a handle from dlopen and a valid C string.
        unsafe { libc::dlsym(self.handle, c_name.as_ptr()) }
    }
}

fn dl_error() -> String {
    // SAFETY: dlerror returns NULL or a NUL-terminated string owned by libc.
    let message = unsafe { libc::dlerror() };
    if message.is_null() {
        "unknown dlopen error".into()
    } else {
        // SAFETY: not NULL: the NUL-terminated string dlerror returned, read at once.
        unsafe { CStr::from_ptr(message) }.to_string_lossy().into_owned()
    }
}
