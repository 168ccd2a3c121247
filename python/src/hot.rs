//! `cai.from_object`'s entry: a plain `extern "C"` function registered with
//! `METH_FASTCALL | METH_KEYWORDS` on `pyo3-ffi`, which matches its arguments itself
//! (keywords as cheap as positions) and then runs the import body of functions.rs.
//!
//! Why: PyO3's generated argument handling turns each keyword name into UTF-8 and compares
//! strings (about 400 instructions per call with three keywords). Here a keyword name is first
//! compared by pointer with the interned parameter names (what the interpreter passes for a
//! keyword written in source), then by value (a name built at run time, a str subclass).
//!
//! The audit (every `unsafe` below, and why it is sound):
//! - The interpreter calls `from_object_fastcall` with an attached thread state, `args` holding
//!   `nargs` positional values followed by one value per entry of `kwnames` (a tuple of str, or
//!   NULL), all borrowed for the call: the matching reads them with `pyo3-ffi` calls that make
//!   no reference and no PyO3 value.
//! - PyO3's own count of attached threads may not know of this thread here (no PyO3 trampoline
//!   ran), and a `Py<T>` or `PyErr` dropped while it does not would wait in PyO3's deferred
//!   decref pool. So the body runs inside `Python::attach`, PyO3's public, sound way in: the
//!   thread is attached already, so it only counts it (`PyGILState_Ensure` on the attached
//!   thread only increments its counter, about 190 instructions with PyO3's checks), and every
//!   drop in the body is immediate. Nothing of PyO3 is made
//!   before it or outlives it: the matched arguments stay raw borrowed pointers until then.
//! - A panic in the body is caught here (it must not unwind into C) and raised as PyO3's
//!   PanicException, as PyO3's own entry points do. Where `Python::attach` itself refuses
//!   (the interpreter finalizing), the body runs on `Python::assume_attached`: the thread is
//!   attached (the interpreter called in), and a drop that waits in PyO3's pool then is the
//!   one cost, at exit only.
//! - The interned names are made once at module creation and kept for the life of the
//!   process (six small strings), so a pointer read from `NAMES` is always a live str.

use std::ffi::CStr;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr::null_mut;
use std::sync::atomic::{AtomicPtr, Ordering};

use pyo3::exceptions::{PySystemError, PyTypeError};
use pyo3::ffi;
use pyo3::panic::PanicException;
use pyo3::prelude::*;
use pyo3::types::PyModule;
use pyo3::Borrowed;

use crate::functions;

/// The parameters, in order, as `from_object(obj, stream=None, sync=None, writable=False,
/// pointer_check=None, allow_host=False)` names them.
const PARAMETERS: [&CStr; 6] = [c"obj", c"stream", c"sync", c"writable", c"pointer_check", c"allow_host"];
const WRITABLE: usize = 3;
const ALLOW_HOST: usize = 5;

/// The parameter names, interned (the str objects keyword arguments written in source are).
static NAMES: [AtomicPtr<ffi::PyObject>; 6] = [const { AtomicPtr::new(null_mut()) }; 6];

/// The docstring, with the signature CPython reads into `__text_signature__` (the line before
/// the `--`), as `inspect.signature` shows it.
const DOC: &CStr =
    c"from_object(obj, stream=None, sync=None, writable=False, pointer_check=None, allow_host=False)
--

Imports `obj.__cuda_array_interface__` (or a dict): validates it by every rule of the spec,
checks the pointer where a driver loads (`pointer_check`: a cai.POINTER_CHECK_* mode; where
none loads, the default check is skipped with a cai.PointerNotCheckedWarning),
synchronizes with the producer's stream (stream-ordered on `stream` if given, else
blocking; `sync=False` skips it), keeps `obj` alive, and returns a cai.Array. Raises
cai.CaiError (a ValueError) naming the rule broken. The GIL is released while the import
may wait.

An object without `__cuda_array_interface__` but with `__dlpack__` is taken by DLPack: its
producer is passed the consumer's `stream` (-1 when `sync=False`) and orders its work
before it; CUDA memory is taken, host memory only with `allow_host=True`.";

/// The method's definition: CPython keeps a pointer to it for the life of the function.
struct Definition(ffi::PyMethodDef);
// SAFETY: never written after it is made; its pointers are to static C strings and a function.
unsafe impl Sync for Definition {}

static DEFINITION: Definition = Definition(ffi::PyMethodDef {
    ml_name: c"from_object".as_ptr(),
    ml_meth: ffi::PyMethodDefPointer { PyCFunctionFastWithKeywords: from_object_fastcall },
    ml_flags: ffi::METH_FASTCALL | ffi::METH_KEYWORDS,
    ml_doc: DOC.as_ptr(),
});

/// Adds `from_object` to the module, and interns the parameter names it matches keywords to.
pub fn add_from_object(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    for (slot, name) in NAMES.iter().zip(PARAMETERS) {
        // SAFETY: the thread is attached (module creation); a NUL-terminated static string.
        let interned = unsafe { ffi::PyUnicode_InternFromString(name.as_ptr()) };
        if interned.is_null() {
            return Err(PyErr::fetch(py));
        }
        // The reference is kept for the life of the process (see the module's audit); one made
        // by an earlier creation of the module stays alive too.
        slot.store(interned, Ordering::Release);
    }
    let module_name = m.name()?;
    // SAFETY: the definition is static; the module and its name are live objects, borrowed
    // for the call (PyCFunction_NewEx takes references of its own).
    let function = unsafe {
        ffi::PyCFunction_NewEx(
            &DEFINITION.0 as *const ffi::PyMethodDef as *mut ffi::PyMethodDef,
            m.as_ptr(),
            module_name.as_ptr(),
        )
    };
    // SAFETY: a new reference or NULL with an exception set.
    let function = unsafe { Bound::from_owned_ptr_or_err(py, function)? };
    m.add("from_object", function)
}

/// Why the arguments do not match the signature: raised as PyO3's argument handling raises
/// it, with the same words.
#[derive(Clone, Copy)]
enum Mismatch {
    TooManyPositional(isize),
    /// A keyword name (borrowed from the call's `kwnames`) no parameter has.
    Unexpected(*mut ffi::PyObject),
    Multiple(usize),
    MissingObj,
}

/// The parameter a keyword name is, by pointer first, then by value.
///
/// # Safety
/// The thread is attached; `name` is a live str (an entry of a call's `kwnames`).
unsafe fn parameter_of(name: *mut ffi::PyObject) -> Option<usize> {
    let names = NAMES.each_ref().map(|slot| slot.load(Ordering::Acquire));
    if let Some(index) = names.iter().position(|&interned| interned == name) {
        return Some(index);
    }
    // SAFETY: a live object; PyUnicode_Check reads its type's flags.
    if unsafe { ffi::PyUnicode_Check(name) } == 0 {
        return None;
    }
    names.iter().position(|&interned| {
        // SAFETY: both are live str objects (or subclasses); comparing two str sets no error
        // and runs no Python code (no __eq__ is called).
        !interned.is_null() && unsafe { ffi::PyUnicode_Compare(name, interned) } == 0
    })
}

/// The argument of each parameter, NULL where none was given.
///
/// # Safety
/// The vectorcall contract: `args` holds `nargs` positional values then one per entry of
/// `kwnames` (a tuple or NULL), all alive for the call; the thread is attached.
unsafe fn match_arguments(
    args: *const *mut ffi::PyObject,
    nargs: ffi::Py_ssize_t,
    kwnames: *mut ffi::PyObject,
) -> Result<[*mut ffi::PyObject; 6], Mismatch> {
    let mut slots = [null_mut(); 6];
    let positional = usize::try_from(nargs).unwrap_or(0);
    if positional > slots.len() {
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
            let Some(index) = (unsafe { parameter_of(name) }) else {
                return Err(Mismatch::Unexpected(name));
            };
            if !slots[index].is_null() {
                return Err(Mismatch::Multiple(index));
            }
            // SAFETY: the value of keyword `entry` is `args[nargs + entry]` by the contract.
            slots[index] = unsafe { *args.add(positional + entry as usize) };
        }
    }
    if slots[0].is_null() {
        return Err(Mismatch::MissingObj);
    }
    Ok(slots)
}

/// `cai.from_object` as CPython calls it (`METH_FASTCALL | METH_KEYWORDS`).
unsafe extern "C" fn from_object_fastcall(
    _module: *mut ffi::PyObject,
    args: *const *mut ffi::PyObject,
    nargsf: ffi::Py_ssize_t,
    kwnames: *mut ffi::PyObject,
) -> *mut ffi::PyObject {
    // CPython passes the plain count to METH_FASTCALL functions; the offset flag (the sign
    // bit) is masked off all the same.
    let nargs = nargsf & ffi::Py_ssize_t::MAX;
    // SAFETY: called by the interpreter, attached, with the vectorcall contract.
    let matched = unsafe { match_arguments(args, nargs, kwnames) };
    let body = |py: Python<'_>| {
        let outcome = catch_unwind(AssertUnwindSafe(|| match matched {
            // SAFETY: the slots are the call's arguments, alive for its duration.
            Ok(slots) => unsafe { call(py, &slots) },
            Err(mismatch) => Err(refusal(py, mismatch)),
        }));
        let error = match outcome {
            Ok(Ok(array)) => return array,
            Ok(Err(error)) => error,
            Err(payload) => panic_error(payload),
        };
        error.restore(py);
        null_mut()
    };
    // `Python::attach` panics (before running anything) where PyO3 refuses to attach: while
    // the interpreter finalizes (a `__del__` at exit may call this) or in a GC traversal. The
    // thread is attached all the same (the interpreter called this function), so the body
    // runs then without PyO3's count: a drop it makes waits in PyO3's pool, harmless at exit.
    match catch_unwind(AssertUnwindSafe(|| Python::attach(body))) {
        Ok(result) => result,
        // SAFETY: the interpreter called this function from an attached thread.
        Err(_) => body(unsafe { Python::assume_attached() }),
    }
}

/// The import, the arguments converted as PyO3's handling of the old signature converted them
/// (in order: `writable` and `allow_host` as bools, None for an absent or None option).
///
/// # Safety
/// Each slot is NULL or an argument of the call, alive for its duration.
unsafe fn call(py: Python<'_>, slots: &[*mut ffi::PyObject; 6]) -> PyResult<*mut ffi::PyObject> {
    let argument = |index: usize| -> Option<Borrowed<'_, '_, PyAny>> {
        // SAFETY: NULL or a live argument (the caller's contract).
        unsafe { Borrowed::from_ptr_or_opt(py, slots[index]) }
    };
    let option =
        |index: usize| argument(index).filter(|value| !value.is_none()).map(|value| value.to_owned());
    let flag = |index: usize| -> PyResult<bool> {
        match argument(index) {
            None => Ok(false),
            Some(value) => value.extract::<bool>().map_err(|error| extraction_error(py, index, error)),
        }
    };
    let obj = argument(0).ok_or_else(|| PySystemError::new_err("from_object: obj missing"))?.to_owned();
    let stream = option(1);
    let sync = option(2);
    let writable = flag(WRITABLE)?;
    let pointer_check = option(4);
    let allow_host = flag(ALLOW_HOST)?;
    let array = functions::from_object(
        &obj,
        stream.as_ref(),
        sync.as_ref(),
        writable,
        pointer_check.as_ref(),
        allow_host,
    )?;
    Ok(array.into_ptr())
}

/// A conversion's TypeError names the parameter, as PyO3's argument handling has it.
fn extraction_error(py: Python<'_>, index: usize, error: PyErr) -> PyErr {
    if !error.get_type(py).is(py.get_type::<PyTypeError>()) {
        return error;
    }
    let name = PARAMETERS[index].to_string_lossy();
    let remapped = PyTypeError::new_err(format!("argument '{name}': {}", error.value(py)));
    remapped.set_cause(py, error.cause(py));
    remapped
}

/// The TypeError of arguments that do not match the signature.
#[cold]
fn refusal(py: Python<'_>, mismatch: Mismatch) -> PyErr {
    let message = match mismatch {
        Mismatch::TooManyPositional(given) => {
            let was = if given == 1 { "was" } else { "were" };
            format!("from_object() takes from 1 to 6 positional arguments but {given} {was} given")
        }
        Mismatch::Unexpected(name) => {
            // SAFETY: a live entry of the call's `kwnames`, borrowed for the call.
            let name = unsafe { Borrowed::from_ptr(py, name) };
            let name: &Bound<'_, PyAny> = &name;
            format!("from_object() got an unexpected keyword argument '{name}'")
        }
        Mismatch::Multiple(index) => format!(
            "from_object() got multiple values for argument '{}'",
            PARAMETERS[index].to_string_lossy()
        ),
        Mismatch::MissingObj => "from_object() missing 1 required positional argument: 'obj'".to_owned(),
    };
    PyTypeError::new_err(message)
}

/// A panic of the body as a PanicException, with its message where it has one.
#[cold]
fn panic_error(payload: Box<dyn std::any::Any + Send>) -> PyErr {
    let message = payload
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| payload.downcast_ref::<&str>().map(|text| (*text).to_owned()))
        .unwrap_or_else(|| "panic from Rust code".to_owned());
    PanicException::new_err(message)
}
