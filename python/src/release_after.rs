//! `cai.Array.release(stream=None)` and `cai.release_pending(wait=False)`: a release deferred
//! until a stream has passed the work enqueued on it so far (the core's `cai_release_after`).
//!
//! The Array is marked released at once; what it kept alive (the producer object, a C
//! producer's release) moves into the core's queue, with a strong reference to the Array (its
//! struct, descr and mask stay where the release finds them). The queued release attaches to
//! the interpreter from whichever thread runs it (a later import may, with the GIL released:
//! `with_thread_attached`, which never attaches after finalization), runs the producer's
//! callback and lets go of the references. An atexit hook,
//! registered when the module loads, drains the queue (waiting for the events) while the
//! interpreter still runs; a release asked for after it is drained at once, waiting, so that
//! nothing of Python's is queued once finalization begins.

use std::sync::atomic::{AtomicBool, Ordering};

use cai::binding::{release_after, release_pending as run_pending};
use cai::CaiArray;
use pyo3::prelude::*;

use crate::array::object::ArrayObject;
use crate::array::run_release;
use crate::cpython::fastcall::{run_attached, with_thread_attached, Signature};
use crate::cpython::Kept;
use crate::cpython::{c_void, PyObject, Py_ssize_t};
use crate::errors::Failure;
use crate::options::consumer_stream;

/// Set by the atexit hook: from then on a deferred release is drained at once.
static EXIT_DRAINED: AtomicBool = AtomicBool::new(false);

/// What a deferred release lets go of, behind the queued struct's `owner`.
struct Deferred {
    /// The cai.Array, kept alive for its struct (given to the producer's release).
    array: Kept,
    owner: Option<Kept>,
    release: Option<unsafe extern "C" fn(*mut CaiArray)>,
}

/// `release`'s one keyword.
static RELEASE_SIGNATURE: Signature<1> = Signature::new("release", [c"stream"], 0, 0);

/// `a.release(*, stream=None)`: see its docstring (array/methods.rs).
pub(crate) unsafe extern "C" fn release(
    slf: *mut PyObject,
    args: *const *mut PyObject,
    nargsf: Py_ssize_t,
    kwnames: *mut PyObject,
) -> *mut PyObject {
    let mut slots = [std::ptr::null_mut(); 1];
    // SAFETY: called by the interpreter, attached, with the vectorcall contract.
    let matched = unsafe { RELEASE_SIGNATURE.match_arguments(args, nargsf, kwnames, &mut slots) };
    run_attached(|py| {
        let slots = matched.map_err(|mismatch| RELEASE_SIGNATURE.refusal(py, mismatch))?;
        // SAFETY: the method's `self`, checked by its descriptor.
        let this = unsafe { ArrayObject::borrowed(py, slf) };
        // SAFETY: an argument of the call (or NULL: not given), alive for its duration.
        let stream = (!slots[0].is_null()).then(|| unsafe { Bound::from_borrowed_ptr(py, slots[0]) });
        let stream = match stream.filter(|s| !s.is_none()) {
            None => return this.get().release_now(py).map(|()| py.None().into_ptr()),
            Some(stream) => consumer_stream(Some(&stream)).map_err(PyErr::from)?,
        };
        let (owner, release) = this.get().take_hold(py)?;
        if owner.is_none() && release.is_none() {
            return Ok(py.None().into_ptr()); // released already, or nothing was kept
        }
        // SAFETY: `slf` is a live cai.Array; the Kept takes a reference of its own.
        let array = Kept::new(unsafe { Bound::from_borrowed_ptr(py, slf) }.unbind());
        let deferred = Box::into_raw(Box::new(Deferred { array, owner, release }));
        let mut queued = CaiArray {
            owner: deferred.cast::<c_void>(),
            release: Some(release_deferred),
            ..*this.get().array()
        };
        // The core reads only the data, memory kind and stream of what it queues.
        (queued.mask, queued.descr, queued.descr_count) = (std::ptr::null(), std::ptr::null(), 0);
        // SAFETY: a valid struct, which releases what `deferred` holds, once, from any thread.
        // Attached: the call never waits (cuEventQuery), and the releases that are due attach.
        if let Err(refused) = unsafe { release_after(&mut queued, stream) } {
            // Nothing was taken: the Array owns what it held again.
            // SAFETY: `deferred` came from Box::into_raw above and was not released.
            let deferred = unsafe { Box::from_raw(deferred) };
            let Deferred { array, owner, release } = *deferred;
            this.get().give_back_hold(py, owner, release);
            drop(array);
            return Err(Failure::Cai(refused).into());
        }
        if EXIT_DRAINED.load(Ordering::Acquire) {
            drain(py, true)?;
        }
        Ok(py.None().into_ptr())
    })
}

/// The queued struct's release: attached, the producer's callback runs with the Array's
/// struct, then the references go. After finalization nothing attaches and they are leaked
/// (`with_thread_attached`); the atexit hook drains the queue before that.
unsafe extern "C" fn release_deferred(queued: *mut CaiArray) {
    // SAFETY: the struct `release` queued, released once: its owner is the Box made there.
    let deferred = unsafe { Box::from_raw((*queued).owner.cast::<Deferred>()) };
    let ran = with_thread_attached(|py| {
        let Deferred { array, owner, release } = *deferred;
        // SAFETY: `array` holds a live cai.Array.
        let object = unsafe { ArrayObject::borrowed(py, array.as_ptr()) };
        run_release(release, object.get().array());
        drop(owner);
        drop(array);
    });
    let _ = ran; // not run: the interpreter is gone, and what it held leaks on purpose
}

/// Runs the deferred releases that are due (all of them with `wait`, waiting detached); how
/// many are still queued.
fn drain(py: Python<'_>, wait: bool) -> PyResult<u64> {
    // Detached: the waiting drain waits on the host, and the releases attach themselves.
    Ok(py.detach(|| run_pending(wait)).map_err(Failure::Cai)?)
}

/// `cai.release_pending(wait=False)`: runs the releases `Array.release(stream=...)` (and C's
/// `cai_release_after`) deferred whose stream has passed the point (with `wait=True`: all of
/// them, waiting for their streams); returns how many are still pending.
#[pyfunction]
#[pyo3(signature = (wait = false))]
pub(crate) fn release_pending(py: Python<'_>, wait: bool) -> PyResult<u64> {
    drain(py, wait)
}

/// The atexit hook: drains the queue while the interpreter runs, and from then on has a
/// deferred release drained at once.
#[pyfunction]
fn _release_pending_at_exit(py: Python<'_>) -> PyResult<u64> {
    EXIT_DRAINED.store(true, Ordering::Release);
    drain(py, true)
}

/// Adds `release_pending`, registers the atexit hook, and interns `release`'s keyword.
pub(crate) fn add_to_module(m: &Bound<'_, PyModule>) -> PyResult<()> {
    RELEASE_SIGNATURE.intern(m.py())?;
    m.add_function(wrap_pyfunction!(release_pending, m)?)?;
    let hook = wrap_pyfunction!(_release_pending_at_exit, m)?;
    m.add_function(hook.clone())?;
    m.py().import("atexit")?.call_method1("register", (hook,))?;
    Ok(())
}
