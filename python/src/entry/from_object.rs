//! `cai.from_object`'s entry: a plain `extern "C"` function registered with
//! `METH_FASTCALL | METH_KEYWORDS` (cpython/fastcall.rs's `Definition`), which matches its arguments itself
//! (cpython/fastcall.rs: keywords as cheap as positions) and then runs the import body of
//! entry/functions.rs. The audit of what such an entry may do, and why it is sound, is
//! cpython/fastcall.rs's.

use pyo3::exceptions::PySystemError;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyModule};
use pyo3::Borrowed;

use crate::cpython::fastcall::{is_absent_or_small_int, run_assumed, run_attached, Definition, Signature};
use crate::cpython::{CStr, PyObject, Py_ssize_t};
use crate::entry::functions;
use crate::negotiate::type_facts::{read_cleanly, settle_uncounted_run};

/// `from_object(obj, stream=None, sync=None, writable=False, pointer_check=None,
/// allow_host=False)`: any of them by position, `obj` required.
static SIGNATURE: Signature<6> = Signature::new(
    "from_object",
    [c"obj", c"stream", c"sync", c"writable", c"pointer_check", c"allow_host"],
    6,
    1,
);
const WRITABLE: usize = 3;
const ALLOW_HOST: usize = 5;

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

static DEFINITION: Definition = Definition::fast(c"from_object", from_object_fastcall, DOC);

/// Adds `from_object` to the module, and interns the parameter names it matches keywords to.
pub fn add_from_object(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    SIGNATURE.intern(py)?;
    m.add("from_object", DEFINITION.function(m)?)
}

/// `cai.from_object` as CPython calls it (`METH_FASTCALL | METH_KEYWORDS`). A call on an
/// object read by an audited path (`read_cleanly`: a cai.Array, a numpy array by its fields, its
/// type's exchange table, an offered type's fill or a CAI dict, the facts known to this thread),
/// its `stream` None or an int, runs without PyO3's count of the thread (`run_assumed`), and
/// attaches once afterwards if the object took another path after all (`settle_uncounted_run`).
/// `call`'s conversions make a `PyErr` only when they refuse (then a failure, raised counted),
/// but for `stream`: a stream object is read by looking for its attributes, each miss an
/// AttributeError dropped, so such a call runs attached, as does every other.
unsafe extern "C" fn from_object_fastcall(
    _module: *mut PyObject,
    args: *const *mut PyObject,
    nargsf: Py_ssize_t,
    kwnames: *mut PyObject,
) -> *mut PyObject {
    let mut slots = [std::ptr::null_mut(); 6];
    // SAFETY: called by the interpreter, attached, with the vectorcall contract.
    let matched = unsafe { SIGNATURE.match_arguments(args, nargsf, kwnames, &mut slots) };
    let body = |py: Python<'_>| match matched {
        // SAFETY: the slots are the call's arguments, alive for its duration.
        Ok(slots) => unsafe { call(py, slots) },
        Err(mismatch) => Err(SIGNATURE.refusal(py, mismatch)),
    };
    // SAFETY: attached (the interpreter called in); the slots are live arguments or NULL.
    let clean = matched.as_ref().is_ok_and(|slots| unsafe {
        !slots[0].is_null() && is_absent_or_small_int(slots[1]) && read_cleanly(slots[0])
    });
    if clean {
        let result = run_assumed(body);
        if !result.is_null() {
            settle_uncounted_run();
        }
        result
    } else {
        run_attached(body)
    }
}

/// The import, the arguments converted as PyO3's handling of the old signature converted them
/// (in order: `writable` and `allow_host` as bools, None for an absent or None option).
///
/// # Safety
/// Each slot is NULL or an argument of the call, alive for its duration.
unsafe fn call(py: Python<'_>, slots: &[*mut PyObject; 6]) -> PyResult<*mut PyObject> {
    let argument = |index: usize| -> Option<Borrowed<'_, '_, PyAny>> {
        // SAFETY: NULL or a live argument (the caller's contract).
        unsafe { Borrowed::from_ptr_or_opt(py, slots[index]) }
    };
    // Borrowed, as the call holds them: no reference counted per argument.
    let option = |index: usize| argument(index).filter(|value| !value.is_none());
    let flag = |index: usize| -> PyResult<bool> {
        match argument(index) {
            None => Ok(false),
            // The two bools by pointer; anything else converted as PyO3 converts a bool.
            Some(value) if value.is(PyBool::new(py, true)) => Ok(true),
            Some(value) if value.is(PyBool::new(py, false)) => Ok(false),
            Some(value) => {
                value.extract::<bool>().map_err(|error| SIGNATURE.argument_error(py, index, error))
            }
        }
    };
    let obj = argument(0).ok_or_else(|| PySystemError::new_err("from_object: obj missing"))?;
    let stream = option(1);
    let sync = option(2);
    let writable = flag(WRITABLE)?;
    let pointer_check = option(4);
    let allow_host = flag(ALLOW_HOST)?;
    let array = functions::from_object(
        &obj,
        stream.as_deref(),
        sync.as_deref(),
        writable,
        pointer_check.as_deref(),
        allow_host,
    )?;
    Ok(array.into_ptr())
}
