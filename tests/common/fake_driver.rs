//! The fake CUDA driver (tests/fake_cuda/fake_cuda.c, a test double): compiled once per test
//! binary, handed to libcai through CAI_CUDA_DRIVER, and driven through its fake_cuda_* controls.

use std::ffi::{c_char, c_void, CStr, CString};
use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;

pub const CUDA_ERROR_INVALID_VALUE: i32 = 1;
pub const CUDA_ERROR_NOT_FOUND: i32 = 500;
pub const CUDA_ERROR_NOT_READY: i32 = 600;
pub const CUDA_ERROR_LAUNCH_FAILED: i32 = 719;
pub const CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED: i32 = 900;
pub const CUDA_ERROR_STREAM_CAPTURE_INVALIDATED: i32 = 901;
pub const CUDA_ERROR_STREAM_CAPTURE_MERGE: i32 = 902;
pub const CUDA_ERROR_STREAM_CAPTURE_UNJOINED: i32 = 904;
pub const CUDA_ERROR_STREAM_CAPTURE_ISOLATION: i32 = 905;
pub const CUDA_ERROR_STREAM_CAPTURE_IMPLICIT: i32 = 906;
pub const CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD: i32 = 908;
/// CUstreamCaptureMode.
pub const CAPTURE_MODE_GLOBAL: i32 = 0;
pub const CAPTURE_MODE_THREAD_LOCAL: i32 = 1;
pub const CAPTURE_MODE_RELAXED: i32 = 2;
pub const CAPTURE_MODES: [i32; 3] = [CAPTURE_MODE_GLOBAL, CAPTURE_MODE_THREAD_LOCAL, CAPTURE_MODE_RELAXED];
/// CUstreamCaptureStatus.
pub const CAPTURE_STATUS_NONE: i32 = 0;
pub const CAPTURE_STATUS_ACTIVE: i32 = 1;
pub const CAPTURE_STATUS_INVALIDATED: i32 = 2;
pub const MEMORY_HOST: u32 = 1;
pub const MEMORY_DEVICE: u32 = 2;
pub const MEMORY_UNIFIED: u32 = 4;
pub const FLAG_MANAGED: u32 = 1;
pub const FLAG_UNMAPPED: u32 = 2;
/// The allocation's range attributes answer none: only cuMemGetAddressRange gives its range.
pub const FLAG_NO_RANGE_ATTRIBUTES: u32 = 4;
/// Memory of a stream-ordered pool that is not IPC-enabled.
pub const FLAG_POOL: u32 = 8;
/// Memory of an IPC-enabled stream-ordered pool.
pub const FLAG_IPC_POOL: u32 = 16;
/// Where a test process that spawns others has its fake driver: they load the same file
/// instead of building their own.
pub const BUILT_ENV: &str = "CAI_TEST_FAKE_CUDA_BUILT";

pub struct Fake {
    handle: *mut c_void,
}

// SAFETY: the library's controls are thread-safe (their state is per thread or locked).
unsafe impl Send for Fake {}
// SAFETY: as for Send: the controls lock or keep per-thread state.
unsafe impl Sync for Fake {}

/// Builds the fake driver into the test's target tmpdir (atomically, so parallel test binaries
/// do not see a half-written file) and returns its path.
pub fn build() -> PathBuf {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let source = root.join("tests/fake_cuda/fake_cuda.c");
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let target = dir.join("libfake_cuda.so");
    let partial = dir.join(format!("libfake_cuda.so.{}", std::process::id()));
    let status = Command::new(std::env::var("CC").unwrap_or_else(|_| "cc".into()))
        .args(["-std=c11", "-O1", "-g", "-Wall", "-Wextra", "-Werror", "-shared", "-fPIC", "-pthread"])
        .arg(&source)
        .arg("-o")
        .arg(&partial)
        .status()
        .expect("a C compiler (cc) is needed to build the fake driver");
    assert!(status.success(), "building {source:?} failed");
    std::fs::rename(&partial, &target).expect("move the fake driver into place");
    target
}

/// Points libcai at the fake driver (before its first driver use) and opens the same
/// library instance for the test controls.
pub fn fake() -> &'static Fake {
    static FAKE: OnceLock<Fake> = OnceLock::new();
    FAKE.get_or_init(|| {
        let path = std::env::var_os(BUILT_ENV).map(PathBuf::from).unwrap_or_else(build);
        std::env::set_var("CAI_CUDA_DRIVER", &path);
        let c_path = CString::new(path.to_str().unwrap()).unwrap();
        // SAFETY: a NUL-terminated path to the library just built.
        let handle = unsafe { libc::dlopen(c_path.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
        assert!(!handle.is_null(), "dlopen of the fake driver failed");
        Fake { handle }
    })
}

impl Fake {
    fn symbol<T: Copy>(&self, name: &str) -> T {
        let c_name = CString::new(name).unwrap();
        // SAFETY: a handle dlopen returned and a NUL-terminated name.
        let pointer = unsafe { libc::dlsym(self.handle, c_name.as_ptr()) };
        assert!(!pointer.is_null(), "fake driver lacks {name}");
        assert_eq!(std::mem::size_of::<T>(), std::mem::size_of::<*mut c_void>());
        // SAFETY: T is the control's function pointer type (of the pointer's size, checked),
        // which the caller names as fake_cuda.c declares it.
        unsafe { std::mem::transmute_copy(&pointer) }
    }

    /// Makes `device` this thread's only current context (-1: none) and clears the thread's
    /// call log and pending failures.
    pub fn begin(&self, device: i32) {
        let set: extern "C" fn(i32) = self.symbol("fake_cuda_set_device");
        let clear: extern "C" fn() = self.symbol("fake_cuda_log_clear");
        set(device);
        clear();
    }

    pub fn alloc(&self, size: u64, memory_type: u32, device: i32, flags: u32) -> u64 {
        let f: extern "C" fn(u64, u32, i32, u32) -> u64 = self.symbol("fake_cuda_alloc");
        f(size, memory_type, device, flags)
    }

    /// cuMemFree of an allocation's base: its result.
    pub fn mem_free(&self, pointer: u64) -> i32 {
        let f: extern "C" fn(u64) -> i32 = self.symbol("cuMemFree_v2");
        f(pointer)
    }

    pub fn stream(&self, device: i32) -> u64 {
        let f: extern "C" fn(i32) -> u64 = self.symbol("fake_cuda_stream_create");
        f(device)
    }

    /// The next call of `name` on this thread returns `result`.
    pub fn fail(&self, name: &str, result: i32) {
        let f: extern "C" fn(*const c_char, i32) = self.symbol("fake_cuda_fail");
        let c_name = CString::new(name).unwrap();
        f(c_name.as_ptr(), result);
    }

    /// On this thread, cuPointerGetAttributes refuses the range attributes as a driver from
    /// before them would (CUDA_ERROR_INVALID_VALUE), or answers them again.
    pub fn refuse_range_attributes(&self, refuse: bool) {
        let f: extern "C" fn(i32) = self.symbol("fake_cuda_refuse_range_attributes");
        f(refuse.into());
    }

    /// The call of `name` on this thread after `skip` more that succeed returns `result`.
    pub fn fail_after(&self, name: &str, skip: i32, result: i32) {
        let f: extern "C" fn(*const c_char, i32, i32) = self.symbol("fake_cuda_fail_after");
        let c_name = CString::new(name).unwrap();
        f(c_name.as_ptr(), skip, result);
    }

    /// Every entry point the fake offers libcai, by name.
    pub fn entry_points(&self) -> Vec<String> {
        let f: extern "C" fn(i32) -> *const c_char = self.symbol("fake_cuda_entry_point");
        (0..)
            .map(|i| f(i))
            .take_while(|name| !name.is_null())
            // SAFETY: the fake returns static NUL-terminated names until the NULL that ends them.
            .map(|name| unsafe { CStr::from_ptr(name) }.to_string_lossy().into_owned())
            .collect()
    }

    /// Destroys `device`'s context and creates another at the same address (a new id).
    pub fn recreate_context(&self, device: i32) {
        let f: extern "C" fn(i32) = self.symbol("fake_cuda_recreate_context");
        f(device)
    }

    /// This thread's calls since `begin`, one per line.
    pub fn log(&self) -> String {
        let f: extern "C" fn() -> *const c_char = self.symbol("fake_cuda_log");
        // SAFETY: the fake returns its per-thread log, NUL-terminated, valid until the next call.
        unsafe { CStr::from_ptr(f()) }.to_string_lossy().into_owned()
    }

    pub fn context_depth(&self) -> i32 {
        let f: extern "C" fn() -> i32 = self.symbol("fake_cuda_context_depth");
        f()
    }

    pub fn live_events(&self) -> i32 {
        let f: extern "C" fn() -> i32 = self.symbol("fake_cuda_live_events");
        f()
    }

    pub fn proc_address_lookups(&self) -> i32 {
        let f: extern "C" fn() -> i32 = self.symbol("fake_cuda_proc_address_lookups");
        f()
    }

    /// cuStreamBeginCapture_v2(stream, mode).
    pub fn begin_capture(&self, stream: u64, mode: i32) -> i32 {
        let f: extern "C" fn(u64, i32) -> i32 = self.symbol("cuStreamBeginCapture_v2");
        f(stream, mode)
    }

    /// cuStreamEndCapture(stream, &graph): its result, and whether a graph came back.
    pub fn end_capture(&self, stream: u64) -> (i32, bool) {
        let f: extern "C" fn(u64, *mut *mut c_void) -> i32 = self.symbol("cuStreamEndCapture");
        let mut graph = std::ptr::null_mut();
        let result = f(stream, &mut graph);
        (result, !graph.is_null())
    }

    /// cuStreamIsCapturing(stream, &status): its result and the status (-1 where it failed).
    pub fn is_capturing(&self, stream: u64) -> (i32, i32) {
        let f: extern "C" fn(u64, *mut i32) -> i32 = self.symbol("cuStreamIsCapturing");
        let mut status = -1;
        let result = f(stream, &mut status);
        (result, if result == 0 { status } else { -1 })
    }

    /// The number of streams in the capture `stream` is in, its origin included (0: none).
    pub fn capture_streams(&self, stream: u64) -> i32 {
        let f: extern "C" fn(u64) -> i32 = self.symbol("fake_cuda_capture_streams");
        f(stream)
    }

    /// cuEventCreate on this thread's current context (flags 2, DISABLE_TIMING).
    pub fn event(&self) -> u64 {
        let f: extern "C" fn(*mut u64, u32) -> i32 = self.symbol("cuEventCreate");
        let mut event = 0;
        assert_eq!(f(&mut event, 2), 0, "cuEventCreate");
        event
    }

    /// cuEventRecord(event, stream).
    pub fn record(&self, event: u64, stream: u64) -> i32 {
        let f: extern "C" fn(u64, u64) -> i32 = self.symbol("cuEventRecord");
        f(event, stream)
    }

    /// cuStreamWaitEvent(stream, event, flags).
    pub fn wait(&self, stream: u64, event: u64, flags: u32) -> i32 {
        let f: extern "C" fn(u64, u64, u32) -> i32 = self.symbol("cuStreamWaitEvent");
        f(stream, event, flags)
    }

    /// cuStreamSynchronize(stream).
    pub fn synchronize(&self, stream: u64) -> i32 {
        let f: extern "C" fn(u64) -> i32 = self.symbol("cuStreamSynchronize");
        f(stream)
    }

    /// fake_cuda_launch_slow: a kernel on `stream` that runs `ms` milliseconds once the work it
    /// is ordered after has finished (ms < 0: until `finish_slow`); its id.
    pub fn launch_slow(&self, stream: u64, ms: i32) -> i32 {
        let f: extern "C" fn(u64, i32) -> i32 = self.symbol("fake_cuda_launch_slow");
        f(stream, ms)
    }

    /// Lets the held slow kernel `id` finish.
    pub fn finish_slow(&self, id: i32) {
        let f: extern "C" fn(i32) = self.symbol("fake_cuda_finish_slow");
        f(id)
    }

    /// When slow kernel `id` finished on the fake's clock (`now`), or 0 while it runs.
    pub fn slow_finished_at(&self, id: i32) -> f64 {
        let f: extern "C" fn(i32) -> f64 = self.symbol("fake_cuda_slow_finished_at");
        f(id)
    }

    /// The fake's clock, in seconds.
    pub fn now(&self) -> f64 {
        let f: extern "C" fn() -> f64 = self.symbol("fake_cuda_now");
        f()
    }

    /// cuEventQuery(event).
    pub fn query(&self, event: u64) -> i32 {
        let f: extern "C" fn(u64) -> i32 = self.symbol("cuEventQuery");
        f(event)
    }

    /// cuEventSynchronize(event).
    pub fn event_synchronize(&self, event: u64) -> i32 {
        let f: extern "C" fn(u64) -> i32 = self.symbol("cuEventSynchronize");
        f(event)
    }

    /// The name of a fake stream handle in the log ("S3").
    pub fn stream_name(&self, handle: u64) -> String {
        // Stream handles point into the fake's table; ids are assigned in creation order, and
        // the first field of each slot is its id.
        // SAFETY: (above) a handle the fake made points at its live slot, an i32 first.
        format!("S{}", unsafe { *(handle as usize as *const i32) })
    }
}
