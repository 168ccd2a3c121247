//! Children of `fork` and the driver libraries. CUDA is not usable in a child forked after
//! its parent initialized it, and a load that was under way in another thread at the fork
//! never finishes in the child (that thread is not there): a `OnceLock` would make the child's
//! first call that needs the library wait forever. So the first load of either library
//! registers a `pthread_atfork` child handler, which marks the child: one forked after the CUDA
//! driver's load began is told so at once, by the load's own status (CAI_ERROR_NO_DRIVER), and
//! never touches the parent's driver state; one forked while another thread was inside the
//! OpenCL library's first load is refused OpenCL the same way (a load that had finished serves
//! the child: it is a `dlopen` and symbol lookups, no state of OpenCL's own).

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// Set, before anything of the driver is loaded, by the first thread to begin a load.
static LOAD_BEGAN: AtomicBool = AtomicBool::new(false);
/// Set in a child process (by `mark_child`) forked after `LOAD_BEGAN` was set.
static FORKED_AFTER_LOAD_BEGAN: AtomicBool = AtomicBool::new(false);
/// How many threads are inside the OpenCL library's first load (`loading_opencl`).
static OPENCL_LOADS: AtomicUsize = AtomicUsize::new(0);
/// Set in a child process (by `mark_child`) forked while `OPENCL_LOADS` was not 0.
static FORKED_DURING_OPENCL_LOAD: AtomicBool = AtomicBool::new(false);
/// Whether a thread has registered `mark_child` (one registration suffices; racing first
/// loads may register it more than once, which changes nothing: it only sets flags).
static REGISTERED: AtomicBool = AtomicBool::new(false);

/// Runs in the child of every fork, in its only thread, before fork returns there.
extern "C" fn mark_child() {
    if LOAD_BEGAN.load(Ordering::Acquire) {
        FORKED_AFTER_LOAD_BEGAN.store(true, Ordering::Release);
    }
    if OPENCL_LOADS.load(Ordering::Acquire) != 0 {
        FORKED_DURING_OPENCL_LOAD.store(true, Ordering::Release);
    }
}

/// Called by a thread about to load the driver, before the load's `OnceLock` is touched: once
/// this returns, any fork marks its child (the handler is registered before the flag it reads
/// is set, by this thread or an earlier one).
pub(super) fn note_load_beginning() {
    register_child_handler();
    LOAD_BEGAN.store(true, Ordering::Release);
}

/// Runs `load` (a call into the OpenCL library's `OnceLock`) counted as a load under way: a
/// fork before it returns marks its child. Counted until the `OnceLock` holds its value, so no
/// child finds the lock still running unmarked.
pub(super) fn loading_opencl<T>(load: impl FnOnce() -> T) -> T {
    /// Uncounts the load when dropped, so that a panic out of it leaves no count behind.
    struct Loaded;
    impl Drop for Loaded {
        fn drop(&mut self) {
            OPENCL_LOADS.fetch_sub(1, Ordering::AcqRel);
        }
    }
    register_child_handler();
    OPENCL_LOADS.fetch_add(1, Ordering::AcqRel);
    let _loaded = Loaded;
    load()
}

/// Whether this process is a child forked while another thread of its parent was inside the
/// OpenCL library's first load.
#[inline]
pub(super) fn forked_during_opencl_load() -> bool {
    FORKED_DURING_OPENCL_LOAD.load(Ordering::Relaxed)
}

/// Registers `mark_child` where no thread has yet.
fn register_child_handler() {
    if !REGISTERED.load(Ordering::Acquire) {
        // SAFETY: registers a handler that takes no argument and only reads and writes atomics
        // (async-signal-safe, as a child handler of a threaded process must be); no prepare or
        // parent handler. glibc ties it to this library (its pthread_atfork passes the
        // library's `__dso_handle`), so unloading the library unregisters it.
        let registered = unsafe { libc::pthread_atfork(None, None, Some(mark_child)) } == 0;
        // Where registration fails (ENOMEM), a child behaves as before: its first call that
        // needs a library may wait for a load its parent had under way.
        if registered {
            REGISTERED.store(true, Ordering::Release);
        }
    }
}

/// Whether this process is a child forked after its parent began loading the driver.
#[inline]
pub(super) fn forked_after_load_began() -> bool {
    FORKED_AFTER_LOAD_BEGAN.load(Ordering::Relaxed)
}
