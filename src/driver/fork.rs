//! A child process forked after its parent began loading the CUDA driver. CUDA is not usable in
//! a child forked after its parent initialized it, and a load that was under way in another
//! thread at the fork never finishes in the child (that thread is not there): the driver's
//! `OnceLock` would make the child's first device call wait forever. So the first load
//! registers a `pthread_atfork` child handler, and a child forked after the load began is told
//! so at once, by the load's own status (CAI_ERROR_NO_DRIVER), and never touches the parent's
//! driver state.

use std::sync::atomic::{AtomicBool, Ordering};

/// Set, before anything of the driver is loaded, by the first thread to begin a load.
static LOAD_BEGAN: AtomicBool = AtomicBool::new(false);
/// Set in a child process (by `mark_child`) forked after `LOAD_BEGAN` was set.
static FORKED_AFTER_LOAD_BEGAN: AtomicBool = AtomicBool::new(false);
/// Whether a thread has registered `mark_child` (one registration suffices; racing first
/// loads may register it more than once, which changes nothing: it only sets a flag).
static REGISTERED: AtomicBool = AtomicBool::new(false);

/// Runs in the child of every fork, in its only thread, before fork returns there.
extern "C" fn mark_child() {
    if LOAD_BEGAN.load(Ordering::Acquire) {
        FORKED_AFTER_LOAD_BEGAN.store(true, Ordering::Release);
    }
}

/// Called by a thread about to load the driver, before the load's `OnceLock` is touched: once
/// this returns, any fork marks its child (the handler is registered before the flag it reads
/// is set, by this thread or an earlier one).
pub(super) fn note_load_beginning() {
    if !REGISTERED.load(Ordering::Acquire) {
        // SAFETY: registers a handler that takes no argument and only reads and writes atomics
        // (async-signal-safe, as a child handler of a threaded process must be); no prepare or
        // parent handler. glibc ties it to this library (its pthread_atfork passes the
        // library's `__dso_handle`), so unloading the library unregisters it.
        let registered = unsafe { libc::pthread_atfork(None, None, Some(mark_child)) } == 0;
        // Where registration fails (ENOMEM), a child behaves as before: its first device call
        // may wait for a load its parent had under way.
        if registered {
            REGISTERED.store(true, Ordering::Release);
        }
    }
    LOAD_BEGAN.store(true, Ordering::Release);
}

/// Whether this process is a child forked after its parent began loading the driver.
#[inline]
pub(super) fn forked_after_load_began() -> bool {
    FORKED_AFTER_LOAD_BEGAN.load(Ordering::Relaxed)
}
