//! The C API for compiled extensions (include/cai_python.h): a versioned table of function
//! pointers, published as the capsule `cai._native._C_API`, which an extension reads once in
//! its module init (`cai_python_import`), so that it needs no link to libcai: NumPy's C-API
//! capsule and DLPack's exchange table work the same way.
//!
//! The table holds the Python entry points (`cai_python_from_object`, `cai_python_to_object`,
//! from minor 1 `cai_python_view`, from minor 3 `cai_python_view_or_own`) and every function
//! of cai.h, by the names cai_python.h gives them.
//! The layout is fixed per major version; a minor version appends members only.

use cai::{CaiArray, CaiError, CaiImportOptions, Error, Status, CAI_OK};
// The table's layout is defined once, in cai-python (the crate Rust extensions read it with):
// this module fills it, and any drift between the two is a compile error.
// The C API table's layout (include/cai_python.h), not CPython's.
use c_api::{CaiPythonApi as PythonApi, CAI_PYTHON_API_MAJOR, CAI_PYTHON_API_MINOR, CAI_PYTHON_CAPSULE_NAME};
use cai_python::ffi as c_api;
use pyo3::prelude::*;

use crate::array::Array;
use crate::cpython::fastcall::with_thread_attached;
use crate::cpython::interpreter::{in_a_subinterpreter, refuse_subinterpreter};
use crate::cpython::{self, PyObject};
use crate::described::Read;
use crate::errors::{cai_error_type, to_python, BoxedResult, Failure};
use crate::import::{import_read, Caller, Hold, Outcome, ToOwn};
use crate::negotiate::pipeline::{import_object, unexpected_outcome};
use crate::negotiate::type_facts::{cleanliness, settle_uncounted_run, Clean, Remembered};
use crate::read::buffer::read_buffer_interface;

/// The table every extension reads: static, immutable, its members functions of this module.
pub static PYTHON_API: PythonApi = PythonApi {
    major: CAI_PYTHON_API_MAJOR,
    minor: CAI_PYTHON_API_MINOR,
    size: std::mem::size_of::<PythonApi>() as u64,
    cai_python_from_object: python_from_object,
    cai_python_to_object: python_to_object,
    cai_validate: cai::cai_validate,
    cai_layout: cai::cai_layout,
    cai_export: cai::cai_export,
    cai_release: cai::cai_release,
    cai_move: cai::cai_move,
    cai_import: cai::cai_import,
    cai_sync: cai::cai_sync,
    cai_pointer_info: cai::cai_pointer_info,
    cai_driver_status: cai::cai_driver_status,
    cai_from_dlpack: cai::cai_from_dlpack,
    cai_from_dlpack_legacy: cai::cai_from_dlpack_legacy,
    cai_to_dlpack: cai::cai_to_dlpack,
    cai_to_dlpack_legacy: cai::cai_to_dlpack_legacy,
    cai_typestr_parse: cai::cai_typestr_parse,
    cai_status_string: cai::cai_status_string,
    cai_library_version: cai::cai_library_version,
    cai_python_view: python_view,
    cai_python_from_buffer_interface: python_from_buffer_interface,
    cai_python_offer_to: crate::offer::python_offer_to,
    cai_python_view_or_own: python_view_or_own,
    cai_release_after: cai::cai_release_after,
    cai_release_pending: cai::cai_release_pending,
    cai_ipc_export: cai::cai_ipc_export,
    cai_ipc_open: cai::cai_ipc_open,
};

/// The table as the module publishes it: `cai._native._C_API`.
pub fn python_api_capsule(py: Python<'_>) -> PyResult<Py<PyAny>> {
    Ok(cpython::static_capsule(py, &PYTHON_API, CAI_PYTHON_CAPSULE_NAME)?.unbind())
}

/// `cai_python_from_object`: `cai.from_object`'s negotiation and import, into `out`, a struct
/// that owns what keeps the data alive: the managed tensor an exchange table gave, a reference
/// to `obj` (a numpy array read by its fields, a plain CAI dict, a type libcai's glue
/// offered), else the imported Array (and through it `obj` and any DLPack tensor taken). On
/// failure `out` is untouched, `error` written, and a Python exception set: libcai's refusals
/// as cai.CaiError with their status, any other exception as CAI_ERROR_PYTHON.
unsafe extern "C" fn python_from_object(
    obj: *mut PyObject,
    options: *const CaiImportOptions,
    out: *mut CaiArray,
    error: *mut CaiError,
) -> i32 {
    // SAFETY: the caller's arguments, as cai_python.h describes them.
    unsafe {
        object_entry(
            "cai_python_from_object",
            Negotiated::Yes,
            obj,
            options,
            out,
            error,
            |obj, options, out, remembered| owned_for_c(obj, options, out, remembered, false),
        )
    }
}

/// The import for C of a way of holding that may own (`Hold::OwnInto`, or `Hold::BorrowOrOwn`
/// where `view_first`): `out` written by the pipeline, or with the struct that owns what it
/// read.
#[inline(always)]
fn owned_for_c(
    obj: &Bound<'_, PyAny>,
    options: &CaiImportOptions,
    out: &mut CaiArray,
    remembered: Option<Remembered>,
    view_first: bool,
) -> BoxedResult<()> {
    let mut to_own = None;
    let hold = if view_first { Hold::BorrowOrOwn(out, &mut to_own) } else { Hold::OwnInto(out, &mut to_own) };
    let outcome = import_object(obj, options, Caller::CApi, hold, remembered);
    own_outcome(outcome, &mut to_own, out)
}

/// Writes into `out` the struct that owns what the import read (where it did not write it
/// already). Forced inline with the pipeline (negotiate/pipeline.rs's `import_object`).
#[inline(always)]
fn own_outcome(outcome: BoxedResult<Outcome>, to_own: &mut ToOwn, out: &mut CaiArray) -> BoxedResult<()> {
    match outcome? {
        Outcome::Written => Ok(()),
        Outcome::ToOwn => {
            // Taken only here: moved whole (300 bytes) on every call, it cost each owning
            // import about 40 instructions.
            let Some((read, imported)) = to_own.take() else {
                return Err(Box::new(unexpected_outcome("a cai_python.h entry")));
            };
            own(read, imported, out);
            Ok(())
        }
        Outcome::Declined => Err(Box::new(unexpected_outcome("a cai_python.h entry"))),
    }
}

/// `cai_python_from_buffer_interface`: `cai.from_buffer_interface`'s reading and import (the
/// consumer's queue or stream in `options`) into an owning struct, as `python_from_object`.
unsafe extern "C" fn python_from_buffer_interface(
    obj: *mut PyObject,
    options: *const CaiImportOptions,
    out: *mut CaiArray,
    error: *mut CaiError,
) -> i32 {
    // SAFETY: the caller's arguments, as cai_python.h describes them.
    unsafe {
        object_entry(
            "cai_python_from_buffer_interface",
            Negotiated::No,
            obj,
            options,
            out,
            error,
            |obj, options, out, _| {
                let read = read_buffer_interface(obj).map_err(Box::new)?;
                let imported = import_read(obj.py(), &read, options).map_err(Box::new)?;
                own(read, imported, out);
                Ok(())
            },
        )
    }
}

/// Writes into `out` a struct that owns the imported Array (and through it the object).
fn own(read: Read, imported: cai::binding::import::Imported, out: &mut CaiArray) {
    let imported = Box::new(Array::new(read, Some(imported)));
    imported.array().copy_defined_to(out);
    out.owner = Box::into_raw(imported).cast();
    out.release = Some(release_imported);
}

/// `cai_python_view`: the same negotiation and import, borrowed (`Hold::Borrow`): no
/// reference taken, nothing allocated, `release` NULL. On failure as `python_from_object`.
unsafe extern "C" fn python_view(
    obj: *mut PyObject,
    options: *const CaiImportOptions,
    out: *mut CaiArray,
    error: *mut CaiError,
) -> i32 {
    // SAFETY: the caller's arguments, as cai_python.h describes them.
    unsafe {
        // A borrowed import always writes `out` (`Outcome::Written`).
        object_entry(
            "cai_python_view",
            Negotiated::Yes,
            obj,
            options,
            out,
            error,
            |obj, options, out, remembered| {
                own_outcome(
                    import_object(obj, options, Caller::CApi, Hold::Borrow(out), remembered),
                    &mut None,
                    out,
                )
            },
        )
    }
}

/// `cai_python_view_or_own`: `cai_python_view`'s borrowed struct where a borrowed struct
/// can hold what was read; else (`Failure::CannotBorrow`: a mask, named descr fields, an
/// exchange table without the non-owning call) `cai_python_from_object`'s owning one, with
/// no exception raised for the view's refusal on the way. On failure as `python_from_object`.
unsafe extern "C" fn python_view_or_own(
    obj: *mut PyObject,
    options: *const CaiImportOptions,
    out: *mut CaiArray,
    error: *mut CaiError,
) -> i32 {
    // SAFETY: the caller's arguments, as cai_python.h describes them.
    unsafe {
        object_entry(
            "cai_python_view_or_own",
            Negotiated::Yes,
            obj,
            options,
            out,
            error,
            |obj, options, out, remembered| owned_for_c(obj, options, out, remembered, true),
        )
    }
}

/// Whether an entry reads its object through the negotiation (whose audited paths may run
/// uncounted: `cleanliness`), or through one reader not audited for it.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Negotiated {
    Yes,
    No,
}

/// The boundary of the entry points that read an object into `out`: attached to the
/// interpreter, NULL checks, the options (NULL: the defaults), one panic boundary, `out`
/// written only on success, and a failure reported in `error` and as a Python exception.
///
/// # Safety
/// `obj` is NULL or a live object the caller holds; `options` NULL or readable; `out` NULL or
/// writable; `error` NULL or writable; the caller is attached to the interpreter.
unsafe fn object_entry(
    name: &str,
    negotiated: Negotiated,
    obj: *mut PyObject,
    options: *const CaiImportOptions,
    out: *mut CaiArray,
    error: *mut CaiError,
    body: impl FnOnce(&Bound<'_, PyAny>, &CaiImportOptions, &mut CaiArray, Option<Remembered>) -> BoxedResult<()>,
) -> i32 {
    if in_a_subinterpreter() {
        return refused_in_subinterpreter(name, error);
    }
    // The caller is attached (the function's contract). An object read by an audited path
    // (negotiate/type_facts.rs's `cleanliness`, whose success drops nothing PyO3 would defer)
    // runs on that word alone, read by the table its type's mark names where it names one,
    // with no negotiation and nothing to settle after; any other runs inside `Python::attach`,
    // which only counts the thread, so that what is dropped is let go of at once. A failure is
    // reported counted either way (attaching also lets go of whatever the failed run deferred).
    let clean = match negotiated {
        // SAFETY: attached (the contract); `obj` checked non-NULL, a live object.
        Negotiated::Yes if !obj.is_null() => unsafe { cleanliness(obj) },
        _ => Clean::No,
    };
    let (remembered, settle) = match clean {
        Clean::No => {
            return Python::attach(|py| match read_entry(py, name, obj, options, out, None, body) {
                Ok(()) => CAI_OK,
                Err(failure) => report(py, *failure, error),
            })
        }
        Clean::Yes => (None, true),
        Clean::ByRemembered(choice) => (Some(choice), false),
    };
    // SAFETY: attached (the contract).
    match read_entry(unsafe { Python::assume_attached() }, name, obj, options, out, remembered, body) {
        Ok(()) => {
            if settle {
                settle_uncounted_run();
            }
            CAI_OK
        }
        Err(failure) => Python::attach(|py| report(py, *failure, error)),
    }
}

/// The refusal of an entry called from a subinterpreter (cpython/interpreter.rs's `in_a_subinterpreter`):
/// CAI_ERROR_NOT_SUPPORTED in `error`, and a RuntimeError (cai.CaiError is the main
/// interpreter's) raised in the caller's interpreter.
#[cold]
fn refused_in_subinterpreter(name: &str, error: *mut CaiError) -> i32 {
    refuse_subinterpreter(name);
    let written = Error::new(
        Status::NotSupported,
        format!("{name} was called from a subinterpreter; libcai serves the main interpreter only"),
    );
    cai::binding::write_error(error, &written);
    written.status.code()
}

/// `object_entry`'s work, whether the thread is counted or not: NULL checks, the options, one
/// panic boundary. Not inlined: it is called from both ways in, and one copy is cheaper than
/// two.
#[inline(never)]
fn read_entry(
    py: Python<'_>,
    name: &str,
    obj: *mut PyObject,
    options: *const CaiImportOptions,
    out: *mut CaiArray,
    remembered: Option<Remembered>,
    body: impl FnOnce(&Bound<'_, PyAny>, &CaiImportOptions, &mut CaiArray, Option<Remembered>) -> BoxedResult<()>,
) -> BoxedResult<()> {
    // The failure boxed (the pipeline's already is): what crosses the boundary and returns is
    // one word, not the failure's 64 bytes moved through memory (about 40 instructions a call).
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        if obj.is_null() || out.is_null() {
            let which = if obj.is_null() { "obj" } else { "out" };
            return Err(Box::new(Failure::Cai(Error::new(Status::NullArgument, format!("{which} is NULL")))));
        }
        // SAFETY: NULL (the defaults) or the caller's options.
        let options = unsafe { options.as_ref() }.copied().unwrap_or_default();
        // SAFETY: a live object the caller holds (the entry's contract), checked non-NULL.
        let obj = unsafe { pyo3::Borrowed::from_ptr(py, obj) };
        // SAFETY: the caller's out-parameter, checked non-NULL; `body` writes it only on
        // success.
        body(&obj, &options, unsafe { &mut *out }, remembered)
    }));
    match outcome {
        Ok(result) => result,
        Err(_) => Err(Box::new(Failure::Cai(Error::new(
            Status::Panic,
            format!("libcai panicked in {name} (a bug; please report it)"),
        )))),
    }
}

/// Writes `failure` into `error`, raises it as a Python exception, and returns its status.
fn report(py: Python<'_>, failure: Failure, error: *mut CaiError) -> i32 {
    let (written, raised) = match failure {
        Failure::Cai(e) | Failure::CannotBorrow(e) => {
            let raised = to_python(py, &e);
            (e, raised)
        }
        Failure::Python(raised) => (error_of_exception(py, &raised), raised),
    };
    cai::binding::write_error(error, &written);
    raised.restore(py);
    written.status.code()
}

/// The CaiError an exception stands for: a cai.CaiError's own status, code and message;
/// CAI_ERROR_PYTHON with "Type: text" for any other.
fn error_of_exception(py: Python<'_>, raised: &PyErr) -> Error {
    let value = raised.value(py);
    let text = value.str().map(|s| s.to_string()).unwrap_or_default();
    let libcai = cai_error_type(py).is_ok_and(|class| value.is_instance(class).unwrap_or(false));
    if libcai {
        let code = value.getattr("code").and_then(|c| c.extract::<i32>()).unwrap_or(-1);
        if let Some(status) = Status::from_code(code) {
            let message =
                text.strip_prefix(status.name()).and_then(|m| m.strip_prefix(": ")).unwrap_or(&text);
            let driver_result = value.getattr("driver_result").and_then(|c| c.extract::<i32>()).unwrap_or(0);
            return Error { status, driver_result, message: message.to_string() };
        }
    }
    let kind = value.get_type().name().map(|n| n.to_string()).unwrap_or_else(|_| "Exception".into());
    Error::new(Status::Python, format!("{kind}: {text}"))
}

/// The release of a struct `cai_python_from_object` wrote: drops the Array it owns (letting go
/// of the producer and any tensor), attached to the interpreter, on whatever thread the
/// consumer releases it. Once the interpreter is finalizing nothing may attach, so the Array
/// is then leaked on purpose.
unsafe extern "C" fn release_imported(array: *mut CaiArray) {
    // SAFETY: `owner` is the Box this module leaked into the struct; cai_release runs this once.
    let mut imported = Some(unsafe { Box::from_raw((*array).owner.cast::<Array>()) });
    // The Array keeps its objects as `Kept`, which an attached thread lets go of: no count of
    // PyO3's is needed.
    if !with_thread_attached(|_| drop(imported.take())) {
        std::mem::forget(imported.take());
    }
}

/// `cai_python_to_object`: a new cai.Array that takes over `array` (validated first): its
/// release runs when Python lets go of the Array. On failure NULL with an exception set, and
/// `array` untouched (still the caller's).
unsafe extern "C" fn python_to_object(array: *mut CaiArray) -> *mut PyObject {
    if in_a_subinterpreter() {
        refuse_subinterpreter("cai_python_to_object");
        return std::ptr::null_mut();
    }
    // SAFETY: the contract of cai_python_to_object: the caller is attached to the interpreter.
    let py = unsafe { Python::assume_attached() };
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        // SAFETY: NULL or the caller's array, handed over only on success.
        let Some(source) = (unsafe { array.as_mut() }) else {
            return Err(Failure::Cai(Error::new(Status::NullArgument, "array is NULL")));
        };
        Array::adopt(py, source)
    }));
    match outcome {
        Ok(Ok(adopted)) => adopted.into_ptr(),
        Ok(Err(failure)) => {
            PyErr::from(failure).restore(py);
            std::ptr::null_mut()
        }
        Err(_) => {
            pyo3::exceptions::PyRuntimeError::new_err(
                "libcai panicked in cai_python_to_object (a bug; please report it)",
            )
            .restore(py);
            std::ptr::null_mut()
        }
    }
}
