//! Which interpreter the calling thread is attached to. libcai's state is one per process and
//! serves the main interpreter alone (lib.rs refuses to load in any other); an extension
//! imported in the main interpreter may still call in from a legacy subinterpreter, whose
//! thread holds the GIL the main interpreter shares, and attaching through the PyGILState API
//! there waits forever. So whatever would attach asks here first (fastcall.rs's audit).
//!
//! The main interpreter is the one the module's exec ran in (`main_interpreter_id`, called by
//! lib.rs before anything of the module is made).

use std::ptr::{null_mut, NonNull};
use std::sync::atomic::{AtomicPtr, Ordering};

use pyo3::ffi;
use pyo3::prelude::*;

/// The interpreter's query for the thread state attached on the calling thread, NULL where
/// none is, never a fatal error: `PyThreadState_GetUnchecked` (CPython 3.13 and later) or
/// `_PyThreadState_UncheckedGet` (3.5 to 3.12). Neither is in the limited API, so the abi3
/// module finds it in the process at run time; None where it cannot (an interpreter loaded
/// with `RTLD_LOCAL` by an embedding program), and every callback then attaches by Ensure.
type CurrentThreadState = unsafe extern "C" fn() -> *mut ffi::PyThreadState;

fn current_thread_state_query() -> Option<CurrentThreadState> {
    static QUERY: std::sync::OnceLock<Option<CurrentThreadState>> = std::sync::OnceLock::new();
    *QUERY.get_or_init(|| {
        [c"PyThreadState_GetUnchecked", c"_PyThreadState_UncheckedGet"].into_iter().find_map(|name| {
            // SAFETY: dlsym in the process's global scope with a NUL-terminated name.
            let address = unsafe { libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr()) };
            // SAFETY: both names are CPython's `PyThreadState *(void)` functions.
            (!address.is_null())
                .then(|| unsafe { std::mem::transmute::<*mut libc::c_void, CurrentThreadState>(address) })
        })
    })
}

/// The main interpreter, as the module's exec found it (lib.rs refuses any other).
static MAIN_INTERPRETER: AtomicPtr<ffi::PyInterpreterState> = AtomicPtr::new(null_mut());

/// The number CPython gives the interpreter the module's exec runs in (0 for the main one,
/// from 1 for the others), which is remembered where it is the main one (again after the
/// interpreter is finalized and initialized anew); -1 with an exception set on failure.
pub fn main_interpreter_id(_py: Python<'_>) -> i64 {
    // SAFETY: the module's exec runs attached (the token); both are queries of the current
    // interpreter.
    let (current, id) = unsafe {
        let current = ffi::PyInterpreterState_Get();
        (current, ffi::PyInterpreterState_GetID(current))
    };
    if id == 0 {
        MAIN_INTERPRETER.store(current, Ordering::Release);
    }
    id
}

/// The thread state attached on the calling thread, as `current_thread_state` found it (the
/// only way to make one): live while the thread stays attached with it.
#[derive(Clone, Copy)]
pub struct CurrentState(NonNull<ffi::PyThreadState>);

impl CurrentState {
    pub fn as_ptr(self) -> *mut ffi::PyThreadState {
        self.0.as_ptr()
    }

    /// Whether the state belongs to an interpreter other than the main one.
    pub fn of_a_subinterpreter(self) -> bool {
        // SAFETY: the calling thread's current state (how it was made), live while attached.
        unsafe {
            ffi::PyThreadState_GetInterpreter(self.as_ptr()) != MAIN_INTERPRETER.load(Ordering::Acquire)
        }
    }
}

/// The thread state attached on the calling thread; None where none is, or where the
/// interpreter's query was not found.
pub fn current_thread_state() -> Option<CurrentState> {
    let current = current_thread_state_query()?;
    // SAFETY: the query may be made from any thread, attached or not, once the interpreter is
    // initialized (every caller runs inside a call from it, or checked it is initialized).
    NonNull::new(unsafe { current() }).map(CurrentState)
}

/// Whether the calling thread is attached to an interpreter other than the main one, where
/// attaching through the PyGILState API would wait forever (see fastcall.rs's audit). False
/// where the thread is attached to none, or the interpreter's query was not found.
pub fn in_a_subinterpreter() -> bool {
    current_thread_state().is_some_and(CurrentState::of_a_subinterpreter)
}

/// Runs `body` inside `Python::attach`, or, on a thread attached to a subinterpreter (where
/// that would wait forever: `in_a_subinterpreter`), on the thread's own attachment, its drops
/// then waiting in PyO3's pool. For a failure's conversion, which a body running uncounted
/// makes.
pub fn attach_where_served<T>(body: impl FnOnce(Python<'_>) -> T) -> T {
    if in_a_subinterpreter() {
        // SAFETY: the thread is attached (to a subinterpreter: just asked).
        body(unsafe { Python::assume_attached() })
    } else {
        Python::attach(body)
    }
}

/// Raises the RuntimeError of a call from a subinterpreter (see `in_a_subinterpreter`), where
/// `what` was called, on the calling thread (attached to that interpreter).
#[cold]
pub fn refuse_subinterpreter(what: &str) {
    // SAFETY: the thread is attached to its current interpreter; both are queries of it.
    let id = unsafe { ffi::PyInterpreterState_GetID(ffi::PyInterpreterState_Get()) };
    let message = format!(
        "{what} was called from subinterpreter {id}, and libcai serves the main interpreter only (its module, types and C API table are one per process, and it attaches through the PyGILState API, which serves the main interpreter alone): call it from the main interpreter (under mod_wsgi: WSGIApplicationGroup %{{GLOBAL}})"
    );
    // SAFETY: attached (above).
    unsafe { super::set_error(super::Exception::Runtime, &message) };
}
