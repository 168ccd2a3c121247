//! What the raw `METH_FASTCALL | METH_KEYWORDS` entries share (hot.rs's `cai.from_object`,
//! offer.rs's `__dlpack__` of offered types): a signature that matches a call's arguments
//! itself (keywords as cheap as positions), its TypeErrors in the words PyO3's argument
//! handling uses, and the way into the body, which the DLPack exchange tables' functions
//! (exchange_offered.rs) take too.
//!
//! Why: PyO3's generated argument handling turns each keyword name into UTF-8 and compares
//! strings (about 400 instructions per call with three keywords). Here a keyword name is first
//! compared by pointer with the interned parameter names (what the interpreter passes for a
//! keyword written in source), then by value (a name built at run time, a str subclass).
//!
//! The audit (every `unsafe` below, and why it is sound):
//! - The interpreter calls an entry with an attached thread state, `args` holding `nargs`
//!   positional values followed by one value per entry of `kwnames` (a tuple of str, or NULL),
//!   all borrowed for the call: the matching reads them with `pyo3-ffi` calls that make no
//!   reference and no PyO3 value.
//! - PyO3's own count of attached threads may not know of this thread there (no PyO3
//!   trampoline ran), and a `Py<T>` or `PyErr` dropped while it does not would wait in PyO3's
//!   deferred decref pool. So a body runs inside `Python::attach` (`run_attached`), PyO3's
//!   public, sound way in: the thread is attached already, so it only counts it (about 190
//!   instructions with PyO3's checks), and every drop in the body is immediate. Nothing of PyO3
//!   is made before it or outlives it: the matched arguments stay raw borrowed pointers.
//! - A body whose success path drops no `Py<T>` and no `PyErr` (audited where it is written,
//!   and chosen per call by what the arguments and the object are) runs uncounted instead
//!   (`run_assumed`), on the interpreter's word that the thread is attached; its failure is
//!   raised inside `Python::attach`, which empties PyO3's pool of what the failed body deferred.
//! - A panic in a body is caught (it must not unwind into C) and raised as PyO3's
//!   PanicException, as PyO3's own entry points do. Where `Python::attach` itself refuses (the
//!   interpreter finalizing), the body runs on `Python::assume_attached`: the thread is attached
//!   (the interpreter called in), and a drop that waits in PyO3's pool then is the one cost, at
//!   exit only.
//! - A callback that may run on any thread, attached or not (a DLPack tensor's deleter, a C
//!   consumer's release), runs its body at once where this thread is attached already
//!   (`attachment`: the interpreter's own "thread state attached here" query, found at run
//!   time, compared with this thread's own state), and otherwise attaches with the
//!   interpreter's `PyGILState_Ensure` and `PyGILState_Release` (`with_thread_attached`). Its
//!   body, like `run_assumed`'s, drops no `Py<T>` and no `PyErr`.
//! - Every way of attaching above goes through the PyGILState API, which serves the main
//!   interpreter alone: from a thread attached to a subinterpreter (an extension imported in
//!   the main interpreter and used in a legacy subinterpreter, which shares the main GIL), it
//!   would wait forever for the GIL that thread holds. So where a thread attached to another
//!   interpreter would attach, it does not (`in_a_subinterpreter`): an entry refuses with a
//!   RuntimeError (`refuse_subinterpreter`), a failure is raised as it is, a callback leaks
//!   what it would have let go of (as at exit).
//! - The interned names are made once and kept for the life of the process (a few small
//!   strings), so a pointer read from a signature is always a live str.

use std::ffi::{c_int, c_void, CStr};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr::null_mut;
use std::sync::atomic::{AtomicPtr, Ordering};

use crate::interpreter::{current_thread_state, in_a_subinterpreter, refuse_subinterpreter};
use cai::CaiArray;
use pyo3::exceptions::PyTypeError;
use pyo3::ffi;
use pyo3::panic::PanicException;
use pyo3::prelude::*;
use pyo3::Borrowed;

/// A method definition in static storage: CPython keeps a pointer to it for the life of the
/// function or descriptor made of it.
pub struct Definition(pub ffi::PyMethodDef);
// SAFETY: never written after it is made; its pointers are to static C strings and a function.
unsafe impl Sync for Definition {}

impl Definition {
    /// The pointer CPython's constructors take (they never write through it).
    pub fn as_ptr(&'static self) -> *mut ffi::PyMethodDef {
        &self.0 as *const ffi::PyMethodDef as *mut ffi::PyMethodDef
    }
}

/// A function's parameters: the first `positional` may be given by position, the first
/// `required` must be given.
pub struct Signature<const N: usize> {
    function: &'static str,
    names: [&'static CStr; N],
    positional: usize,
    required: usize,
    interned: [AtomicPtr<ffi::PyObject>; N],
}

/// Why a call's arguments do not match the signature.
#[derive(Clone, Copy)]
pub enum Mismatch {
    TooManyPositional(isize),
    /// A keyword name (borrowed from the call's `kwnames`) no parameter has.
    Unexpected(*mut ffi::PyObject),
    Multiple(usize),
    Missing(usize),
}

impl<const N: usize> Signature<N> {
    pub const fn new(
        function: &'static str,
        names: [&'static CStr; N],
        positional: usize,
        required: usize,
    ) -> Self {
        Signature {
            function,
            names,
            positional,
            required,
            interned: [const { AtomicPtr::new(null_mut()) }; N],
        }
    }

    /// Interns the parameter names (once; a later call finds them made).
    pub fn intern(&self, py: Python<'_>) -> PyResult<()> {
        for (slot, name) in self.interned.iter().zip(self.names) {
            if !slot.load(Ordering::Acquire).is_null() {
                continue;
            }
            // SAFETY: the thread is attached (a Python token exists); a NUL-terminated static string.
            let interned = unsafe { ffi::PyUnicode_InternFromString(name.as_ptr()) };
            if interned.is_null() {
                return Err(PyErr::fetch(py));
            }
            // The reference is kept for the life of the process (see the module's audit); one
            // stored by a racing thread stays alive too.
            slot.store(interned, Ordering::Release);
        }
        Ok(())
    }

    /// The name of parameter `index`.
    pub fn name(&self, index: usize) -> std::borrow::Cow<'static, str> {
        self.names[index].to_string_lossy()
    }

    /// The parameter a keyword name is, by pointer first, then by value.
    ///
    /// # Safety
    /// The thread is attached; `name` is a live str (an entry of a call's `kwnames`).
    unsafe fn parameter_of(&self, name: *mut ffi::PyObject) -> Option<usize> {
        let names = self.interned.each_ref().map(|slot| slot.load(Ordering::Acquire));
        if let Some(index) = names.iter().position(|&interned| interned == name) {
            return Some(index);
        }
        // SAFETY: a live object; PyUnicode_Check reads its type's flags.
        if unsafe { ffi::PyUnicode_Check(name) } == 0 {
            return None;
        }
        names.iter().position(|&interned| {
            // SAFETY: both are live str objects (or subclasses); comparing two str sets no
            // error and runs no Python code (no __eq__ is called).
            !interned.is_null() && unsafe { ffi::PyUnicode_Compare(name, interned) } == 0
        })
    }

    /// The argument of each parameter, NULL where none was given, written into the caller's
    /// `slots` and lent back. (Filled in place: an array returned by value was written a slot
    /// at a time and then copied by wider loads, which the processor cannot forward from the
    /// narrower stores still in flight, a stall of a few nanoseconds per call.)
    ///
    /// # Safety
    /// The vectorcall contract: `args` holds `nargs` positional values (the offset flag
    /// masked off here) then one per entry of `kwnames` (a tuple or NULL), all alive for the
    /// call; the thread is attached.
    pub unsafe fn match_arguments<'s>(
        &self,
        args: *const *mut ffi::PyObject,
        nargsf: ffi::Py_ssize_t,
        kwnames: *mut ffi::PyObject,
        slots: &'s mut [*mut ffi::PyObject; N],
    ) -> Result<&'s [*mut ffi::PyObject; N], Mismatch> {
        // CPython passes the plain count to METH_FASTCALL functions; the offset flag (the sign
        // bit) is masked off all the same.
        let nargs = nargsf & ffi::Py_ssize_t::MAX;
        *slots = [null_mut(); N];
        let positional = usize::try_from(nargs).unwrap_or(0);
        if positional > self.positional {
            return Err(Mismatch::TooManyPositional(nargs));
        }
        for (index, slot) in slots.iter_mut().enumerate().take(positional) {
            // SAFETY: `index < nargs`, inside `args` by the contract.
            *slot = unsafe { *args.add(index) };
        }
        if !kwnames.is_null() {
            // SAFETY: a live tuple by the contract.
            let count = unsafe { ffi::PyTuple_Size(kwnames) };
            for entry in 0..count.max(0) {
                // SAFETY: `entry` is inside the tuple; a borrowed, live str.
                let name = unsafe { ffi::PyTuple_GetItem(kwnames, entry) };
                // SAFETY: `name` is a live str of `kwnames`.
                let Some(index) = (unsafe { self.parameter_of(name) }) else {
                    return Err(Mismatch::Unexpected(name));
                };
                if !slots[index].is_null() {
                    return Err(Mismatch::Multiple(index));
                }
                // SAFETY: the value of keyword `entry` is `args[nargs + entry]` by the contract.
                slots[index] = unsafe { *args.add(positional + entry as usize) };
            }
        }
        match slots[..self.required].iter().position(|slot| slot.is_null()) {
            Some(missing) => Err(Mismatch::Missing(missing)),
            None => Ok(slots),
        }
    }

    /// The TypeError of arguments that do not match the signature.
    #[cold]
    pub fn refusal(&self, py: Python<'_>, mismatch: Mismatch) -> PyErr {
        let function = self.function;
        let message = match mismatch {
            Mismatch::TooManyPositional(given) => {
                let was = if given == 1 { "was" } else { "were" };
                let takes = match (self.required, self.positional) {
                    (low, high) if low == high => format!("{high}"),
                    (low, high) => format!("from {low} to {high}"),
                };
                format!("{function}() takes {takes} positional arguments but {given} {was} given")
            }
            Mismatch::Unexpected(name) => {
                // SAFETY: a live entry of the call's `kwnames`, borrowed for the call.
                let name = unsafe { Borrowed::from_ptr(py, name) };
                let name: &Bound<'_, PyAny> = &name;
                format!("{function}() got an unexpected keyword argument '{name}'")
            }
            Mismatch::Multiple(index) => {
                format!("{function}() got multiple values for argument '{}'", self.name(index))
            }
            Mismatch::Missing(index) => {
                format!("{function}() missing 1 required positional argument: '{}'", self.name(index))
            }
        };
        PyTypeError::new_err(message)
    }

    /// A conversion's TypeError names the parameter, as PyO3's argument handling has it.
    pub fn argument_error(&self, py: Python<'_>, index: usize, error: PyErr) -> PyErr {
        if !error.get_type(py).is(py.get_type::<PyTypeError>()) {
            return error;
        }
        let remapped = PyTypeError::new_err(format!("argument '{}': {}", self.name(index), error.value(py)));
        remapped.set_cause(py, error.cause(py));
        remapped
    }
}

/// Runs an entry's `body` attached through PyO3 (see the module's audit): its result, or NULL
/// with its error (a panic included) raised.
pub fn run_attached(body: impl Fn(Python<'_>) -> PyResult<*mut ffi::PyObject>) -> *mut ffi::PyObject {
    if in_a_subinterpreter() {
        refuse_subinterpreter("a method or function of libcai's (a protocol of an offered type or of cai.Array, cai.from_object)");
        return null_mut();
    }
    let guarded = |py: Python<'_>| {
        let error = match catch_unwind(AssertUnwindSafe(|| body(py))) {
            Ok(Ok(result)) => return result,
            Ok(Err(error)) => error,
            Err(payload) => panic_error(payload),
        };
        error.restore(py);
        null_mut()
    };
    // `Python::attach` panics (before running anything) where PyO3 refuses to attach: while
    // the interpreter finalizes (a `__del__` at exit may call an entry) or in a GC traversal.
    // The thread is attached all the same (the interpreter called the entry), so the body runs
    // then without PyO3's count: a drop it makes waits in PyO3's pool, harmless at exit.
    match catch_unwind(AssertUnwindSafe(|| Python::attach(guarded))) {
        Ok(result) => result,
        // SAFETY: the interpreter called the entry from an attached thread.
        Err(_) => guarded(unsafe { Python::assume_attached() }),
    }
}

/// Runs an entry's `body` on the interpreter's word alone that the thread is attached (it
/// called the entry), without PyO3's count of attached threads: about 190 instructions a call
/// less than `run_attached`. Only for a body whose success path drops no `Py<T>` and no
/// `PyErr` (what PyO3 defers while it does not count the thread; a `Bound` is let go of at once
/// either way), audited where the body is written. A failure or a panic is raised counted
/// (`raise_counted`), and counting the thread first lets go of whatever the failed body
/// deferred: PyO3 empties its pool whenever it attaches a thread it did not count.
pub fn run_assumed(body: impl FnOnce(Python<'_>) -> PyResult<*mut ffi::PyObject>) -> *mut ffi::PyObject {
    assumed(body).unwrap_or(null_mut())
}

/// `run_assumed` for a C function that reports by status, called by a consumer attached to the
/// interpreter (a DLPack exchange table's function, DLPack's rule): 0, or -1 with the failure
/// raised. The same audit of the body's success path applies.
pub fn run_assumed_status(body: impl FnOnce(Python<'_>) -> PyResult<()>) -> c_int {
    match assumed(body) {
        Some(()) => 0,
        None => -1,
    }
}

/// The body's success, or None with its failure (or panic) raised counted.
fn assumed<T>(body: impl FnOnce(Python<'_>) -> PyResult<T>) -> Option<T> {
    // SAFETY: the caller was called from an attached thread (each caller's contract).
    let py = unsafe { Python::assume_attached() };
    let error = match catch_unwind(AssertUnwindSafe(|| body(py))) {
        Ok(Ok(result)) => return Some(result),
        Ok(Err(error)) => error,
        Err(payload) => panic_error(payload),
    };
    raise_counted(error);
    None
}

/// Runs `body` attached to the interpreter from any thread (see the module's audit), without
/// PyO3's count: for a body that lets go of references by `Py_DecRef` or a `Bound`'s drop and
/// drops no `Py<T>` and no `PyErr`. Once the interpreter is no longer initialized nothing may
/// attach: the body does not run, and what it would let go of is leaked on purpose (the process
/// is ending; CPython's own extensions do the same). A panic in the body is swallowed after the
/// thread state is given back: a deleter has no caller to raise it to. Returns whether the body
/// ran to its end.
pub fn with_thread_attached(body: impl FnOnce(Python<'_>)) -> bool {
    // SAFETY: a plain query, callable at any time.
    if unsafe { ffi::Py_IsInitialized() } == 0 {
        return false;
    }
    let attached = attachment();
    if attached == Attachment::Subinterpreter {
        return false;
    }
    if attached == Attachment::Here {
        // The common case (a release or deleter run by the consumer's own Python code): no
        // Ensure/Release pair, which costs about 100 instructions more than the query.
        // SAFETY: this thread is attached (just asked), and stays so for the body: only this
        // thread could detach itself.
        return catch_unwind(AssertUnwindSafe(|| body(unsafe { Python::assume_attached() }))).is_ok();
    }
    // SAFETY: the interpreter is initialized; Ensure attaches this thread (or counts it where
    // it is attached already) and is paired with the Release below, on every path.
    let state = unsafe { ffi::PyGILState_Ensure() };
    // SAFETY: attached by the Ensure above until the Release.
    let ran = catch_unwind(AssertUnwindSafe(|| body(unsafe { Python::assume_attached() }))).is_ok();
    // SAFETY: the state the Ensure above returned, on the same thread.
    unsafe { ffi::PyGILState_Release(state) };
    ran
}

/// Makes `array` own a strong reference to `obj`, let go of by its release
/// (`release_held_reference`), from any thread: what an offered type's `acquire` and DLPack
/// export hand out, and what `cai_python_from_object` holds of an object that keeps its memory
/// alive itself (a numpy array read by its fields, a CAI dict, an offered type).
///
/// # Safety
/// The caller is attached to the interpreter; `obj` is a live object.
pub unsafe fn hold_reference(array: &mut CaiArray, obj: *mut ffi::PyObject) {
    // SAFETY: a live object (the contract); the reference is the struct's from here on.
    unsafe { ffi::Py_IncRef(obj) };
    array.owner = obj.cast::<c_void>();
    array.release = Some(release_held_reference);
}

/// Lets go of the reference `hold_reference` gave a struct, attached to the interpreter from
/// any thread; once the interpreter is finalizing it is leaked on purpose (nothing may attach
/// then).
unsafe extern "C" fn release_held_reference(array: *mut CaiArray) {
    if array.is_null() {
        return;
    }
    // SAFETY: the struct `hold_reference` wrote (cai_release runs this once), its two fields
    // used in place: no reference to the whole struct, whose extents past `ndim` a release may
    // be handed unwritten (a DLPack export's deleter).
    let owner = unsafe {
        std::ptr::addr_of_mut!((*array).release).write(None);
        std::ptr::addr_of_mut!((*array).owner).replace(std::ptr::null_mut())
    }
    .cast::<ffi::PyObject>();
    if owner.is_null() {
        return;
    }
    // SAFETY: the reference `hold_reference` took, let go of once (the owner was cleared above).
    unsafe { let_go_of_reference(owner.cast()) };
}

/// Lets go of a strong reference to a Python object, attached to the interpreter from any
/// thread (`with_thread_attached`: leaked once the interpreter is finalizing); what an export
/// that keeps an object (`Keeper::Object`) calls from the tensor's deleter.
///
/// # Safety
/// `object` is a strong reference the caller owns, given up here.
pub unsafe fn let_go_of_reference(object: *mut c_void) {
    // SAFETY: the caller's reference, let go of once.
    with_thread_attached(|_| unsafe { ffi::Py_DecRef(object.cast()) });
}

/// How the calling thread is attached to the interpreter now (the interpreter is initialized:
/// the caller checked).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Attachment {
    /// With the state the interpreter's GIL-state API keeps for it. Up to 3.11 the query
    /// answers the state that holds the GIL, whichever thread's: only this thread can make its
    /// own state that one, so equality with its own state means this thread holds it. From
    /// 3.12 the query is per thread.
    Here,
    /// To a subinterpreter (see `in_a_subinterpreter`).
    Subinterpreter,
    /// Not attached, attached with another state of the main interpreter, or the query was not
    /// found: attaching by Ensure serves it.
    Otherwise,
}

fn attachment() -> Attachment {
    let Some(current) = current_thread_state() else { return Attachment::Otherwise };
    if current.of_a_subinterpreter() {
        return Attachment::Subinterpreter;
    }
    // SAFETY: a query that may be made from any thread, attached or not, once the interpreter
    // is initialized; it never fails.
    if current.as_ptr() == unsafe { ffi::PyGILState_GetThisThreadState() } {
        Attachment::Here
    } else {
        Attachment::Otherwise
    }
}

/// Lets go of what PyO3 deferred on this thread: attaching a thread PyO3 did not count empties
/// its pool. For an entry that ran uncounted on a path that may have dropped a `PyErr` or a
/// `Py<T>` (see negotiate/type_facts.rs's `settle_uncounted_run`); where PyO3 refuses to attach (the
/// interpreter finalizing) the pool waits, harmless at exit.
pub fn let_go_of_deferred() {
    if !in_a_subinterpreter() {
        let _ = catch_unwind(|| Python::attach(|_| ()));
    }
}

/// Raises `error` inside `Python::attach` (which counts the thread and empties PyO3's pool of
/// deferred drops); where PyO3 refuses to attach (the interpreter finalizing), uncounted.
#[cold]
fn raise_counted(error: PyErr) {
    let mut error = Some(error);
    if !in_a_subinterpreter() {
        let _ = catch_unwind(AssertUnwindSafe(|| {
            Python::attach(|py| {
                if let Some(error) = error.take() {
                    error.restore(py);
                }
            })
        }));
    }
    if let Some(error) = error.take() {
        // SAFETY: the interpreter called the entry from an attached thread.
        error.restore(unsafe { Python::assume_attached() });
    }
}

/// A panic of a body as a PanicException, with its message where it has one.
#[cold]
fn panic_error(payload: Box<dyn std::any::Any + Send>) -> PyErr {
    let message = payload
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| payload.downcast_ref::<&str>().map(|text| (*text).to_owned()))
        .unwrap_or_else(|| "panic from Rust code".to_owned());
    PanicException::new_err(message)
}
