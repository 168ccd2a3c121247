//! What the raw `METH_FASTCALL | METH_KEYWORDS` entries share (entry/from_object.rs's
//! `cai.from_object`, offer/mod.rs's `__dlpack__` of offered types, array/methods.rs's
//! methods): their definitions (`Definition`) and how one becomes a function or a method
//! descriptor, a signature that matches a call's arguments itself (keywords as cheap as
//! positions), its TypeErrors in the words PyO3's argument handling uses, and the way into the
//! body, which the DLPack exchange tables' functions (offer/exchange.rs) take too. What an
//! entry and a body may do, and why it is sound, is the "Entries" part of mod.rs's audit.
//!
//! Why: PyO3's generated argument handling turns each keyword name into UTF-8 and compares
//! strings (about 400 instructions per call with three keywords). Here a keyword name is first
//! compared by pointer with the interned parameter names (what the interpreter passes for a
//! keyword written in source), then by value (a name built at run time, a str subclass).
//!

use std::ffi::{c_int, c_void, CStr};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr::null_mut;
use std::sync::atomic::{AtomicPtr, Ordering};

use super::interpreter::{current_thread_state, in_a_subinterpreter, refuse_subinterpreter};
use cai::CaiArray;
use pyo3::exceptions::PyTypeError;
use pyo3::ffi;
use pyo3::panic::PanicException;
use pyo3::prelude::*;
use pyo3::types::{PyModule, PyType};
use pyo3::Borrowed;

/// An entry as CPython calls a `METH_FASTCALL | METH_KEYWORDS` function or method: `self` (the
/// module, the object, or the class of a class method), the arguments, their count, the
/// keyword names.
pub type FastWithKeywords = unsafe extern "C" fn(
    *mut ffi::PyObject,
    *const *mut ffi::PyObject,
    ffi::Py_ssize_t,
    *mut ffi::PyObject,
) -> *mut ffi::PyObject;

/// An entry as CPython calls a `METH_NOARGS` method: `self`, and NULL.
pub type NoArguments = unsafe extern "C" fn(*mut ffi::PyObject, *mut ffi::PyObject) -> *mut ffi::PyObject;

/// A method definition in static storage: CPython keeps a pointer to it for the life of the
/// function or descriptor made of it.
pub struct Definition(pub(super) ffi::PyMethodDef);
// SAFETY: never written after it is made; its pointers are to static C strings and a function.
unsafe impl Sync for Definition {}

impl Definition {
    /// A `METH_FASTCALL | METH_KEYWORDS` function or method; its docstring may start with the
    /// signature CPython reads into `__text_signature__` (the line before a `--`).
    pub const fn fast(name: &'static CStr, entry: FastWithKeywords, doc: &'static CStr) -> Definition {
        Definition(ffi::PyMethodDef {
            ml_name: name.as_ptr(),
            ml_meth: ffi::PyMethodDefPointer { PyCFunctionFastWithKeywords: entry },
            ml_flags: ffi::METH_FASTCALL | ffi::METH_KEYWORDS,
            ml_doc: doc.as_ptr(),
        })
    }

    /// A class method, as `fast` (its `self` is the class).
    pub const fn fast_class(name: &'static CStr, entry: FastWithKeywords, doc: &'static CStr) -> Definition {
        Definition(ffi::PyMethodDef {
            ml_name: name.as_ptr(),
            ml_meth: ffi::PyMethodDefPointer { PyCFunctionFastWithKeywords: entry },
            ml_flags: ffi::METH_FASTCALL | ffi::METH_KEYWORDS | ffi::METH_CLASS,
            ml_doc: doc.as_ptr(),
        })
    }

    /// A method of no argument (`METH_NOARGS`).
    pub const fn no_arguments(name: &'static CStr, entry: NoArguments, doc: &'static CStr) -> Definition {
        Definition(ffi::PyMethodDef {
            ml_name: name.as_ptr(),
            ml_meth: ffi::PyMethodDefPointer { PyCFunction: entry },
            ml_flags: ffi::METH_NOARGS,
            ml_doc: doc.as_ptr(),
        })
    }

    /// A method of one positional argument (`METH_O`): CPython passes it as the entry's second
    /// argument, borrowed for the call.
    pub const fn one_argument(name: &'static CStr, entry: NoArguments, doc: &'static CStr) -> Definition {
        Definition(ffi::PyMethodDef {
            ml_name: name.as_ptr(),
            ml_meth: ffi::PyMethodDefPointer { PyCFunction: entry },
            ml_flags: ffi::METH_O,
            ml_doc: doc.as_ptr(),
        })
    }

    /// The pointer CPython's constructors take (they never write through it).
    fn as_ptr(&'static self) -> *mut ffi::PyMethodDef {
        &self.0 as *const ffi::PyMethodDef as *mut ffi::PyMethodDef
    }

    /// The definition as a function of module `m` (what `m.add` then names).
    pub fn function<'py>(&'static self, m: &Bound<'py, PyModule>) -> PyResult<Bound<'py, PyAny>> {
        let module_name = m.name()?;
        // SAFETY: the definition is static; the module and its name are live objects, borrowed
        // for the call (PyCFunction_NewEx takes references of its own).
        let function = unsafe { ffi::PyCFunction_NewEx(self.as_ptr(), m.as_ptr(), module_name.as_ptr()) };
        // SAFETY: a new reference or NULL with an exception set.
        unsafe { Bound::from_owned_ptr_or_err(m.py(), function) }
    }

    /// The definition as a method descriptor of `ty` (what its dict then holds).
    pub fn method<'py>(&'static self, ty: &Bound<'py, PyType>) -> PyResult<Bound<'py, PyAny>> {
        // SAFETY: a live, ready type and a static definition (PyDescr_NewMethod keeps a
        // pointer to it and a reference to the type).
        let descriptor = unsafe { ffi::PyDescr_NewMethod(ty.as_type_ptr(), self.as_ptr()) };
        // SAFETY: a new reference, or NULL with an exception set.
        unsafe { Bound::from_owned_ptr_or_err(ty.py(), descriptor) }
    }
}

/// The argument values consumers pass most (None, an int, a pair of ints, a bool), recognized
/// with calls that make no reference and no PyO3 value and raise nothing: a body that reads
/// only such values makes no `PyErr` to drop (`run_assumed`). Anything else is left to the full
/// readings, which name what is wrong.
///
/// # Safety
/// Attached; `value` is NULL (not given) or a live object. The same for the ones below.
#[inline]
pub unsafe fn is_absent(value: *mut ffi::PyObject) -> bool {
    // SAFETY: a pointer compare with the None singleton.
    value.is_null() || value == unsafe { ffi::Py_None() }
}

/// Absent, None, or an exact int that fits an i64.
///
/// # Safety
/// As `is_absent`'s.
#[inline]
pub unsafe fn is_absent_or_small_int(value: *mut ffi::PyObject) -> bool {
    // SAFETY: the caller's contract.
    unsafe { is_absent(value) || super::exact_small_int(value).is_some() }
}

/// Absent, None, or a bool.
///
/// # Safety
/// As `is_absent`'s.
#[inline]
pub unsafe fn is_absent_or_bool(value: *mut ffi::PyObject) -> bool {
    // SAFETY: the caller's contract: a type check of a live object.
    unsafe { is_absent(value) || ffi::PyBool_Check(value) != 0 }
}

/// The two ints of an exact 2-tuple of exact ints that fit an i64 (what consumers pass as
/// `max_version` and `dl_device`).
///
/// # Safety
/// As `is_absent`'s.
#[inline]
pub unsafe fn exact_int_pair(value: *mut ffi::PyObject) -> Option<(i64, i64)> {
    // SAFETY: the caller's contract; the items are borrowed while the tuple, which cannot
    // change, is held by the caller.
    unsafe {
        if value.is_null() || ffi::PyTuple_CheckExact(value) == 0 || ffi::PyTuple_Size(value) != 2 {
            return None;
        }
        Some((
            super::exact_small_int(ffi::PyTuple_GetItem(value, 0))?,
            super::exact_small_int(ffi::PyTuple_GetItem(value, 1))?,
        ))
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
            // The reference is kept for the life of the process (see mod.rs's audit, "Entries"); one
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

/// Runs an entry's `body` attached through PyO3 (see mod.rs's audit, "Entries"): its result, or NULL
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

/// Runs `body` attached to the interpreter from any thread (see mod.rs's audit, "Entries"), without
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
