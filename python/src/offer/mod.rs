//! `cai_python_offer`: a type's author supplies one fill function and the type gains every
//! producer protocol, each read through the fill (python/src/offer/offered.rs) and exported by the
//! same code as a cai.Array's:
//! - `__cuda_array_interface__`, a descriptor building the v3 dict when read;
//! - `__dlpack__` and `__dlpack_device__`, methods (descriptors CPython makes of a static
//!   definition) whose keywords cpython/fastcall.rs matches;
//! - `__dlpack_c_exchange_api__`, DLPack's exchange table for offered types;
//! - `__cuda_array_interface_c_api__`, the type's C-level CAI table.
//!
//! Each protocol describes the object when used, never when looked up: `hasattr` runs no fill.
//!
//! By job, each file at its own layer (tests/layering.rs):
//! - `offered`: an offered type's record and the one description routine (below the
//!   negotiation, which reads an offered type's table);
//! - `exchange`: the DLPack exchange tables, cai.Array's and the offered types'.

pub mod exchange;
pub mod offered;

// The C API table's layout (include/cai_python.h), not CPython's.
use c_api::{CaiPythonFill, CAI_C_API_CAPSULE_NAME};
use cai_python::ffi as c_api;
use pyo3::exceptions::{PySystemError, PyTypeError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyType};

use cai::binding::dlpack::AllowHost;

use crate::array::dlpack_export::{plain_arguments, DlpackArguments, DLPACK_SIGNATURE};
use crate::cpython::fastcall::{run_assumed, run_attached, Definition};
use crate::cpython::interpreter::{in_a_subinterpreter, refuse_subinterpreter};
use crate::cpython::{self, PyObject, PyTypeObject, Py_ssize_t};
use crate::dlpack::capsule_of;
use crate::offer::exchange::offered_exchange_api_capsule;
use crate::offer::offered::Offered;
use crate::pool::with_fill_array;

/// The attributes an offer gives a type, in the order they are set.
const ATTRIBUTES: [&str; 5] = [
    "__cuda_array_interface__",
    "__dlpack__",
    "__dlpack_device__",
    "__dlpack_c_exchange_api__",
    "__cuda_array_interface_c_api__",
];

/// `__cuda_array_interface__` of an offered type: a descriptor building the v3 dict when read.
#[pyclass(module = "cai", name = "_OfferedInterface", frozen)]
struct OfferedInterface {
    offered: &'static Offered,
}

#[pymethods]
impl OfferedInterface {
    /// On the class: the descriptor itself. On an instance: the v3 dict (raising
    /// AttributeError for host memory, which the CAI cannot describe).
    fn __get__(
        slf: &Bound<'_, Self>,
        instance: Option<&Bound<'_, PyAny>>,
        _owner: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        let py = slf.py();
        let Some(instance) = instance.filter(|i| !i.is_none()) else {
            return Ok(slf.clone().into_any().unbind());
        };
        let array = slf.get().offered.array_of(instance)?;
        Ok(array.as_any().getattr(pyo3::intern!(py, "__cuda_array_interface__"))?.unbind())
    }

    fn __repr__(&self) -> String {
        format!("<libcai's __cuda_array_interface__ of '{}'>", self.offered.name)
    }
}

/// `__dlpack__` and `__dlpack_device__` of every offered type: plain methods (a method
/// descriptor per type, made by `PyDescr_NewMethod`), so that `obj.__dlpack__(...)` makes no
/// bound object and its keywords are matched by cpython/fastcall.rs. The descriptor checks that `self`
/// is an instance of the offered type before the function runs.
static DLPACK: Definition = Definition::fast(
    c"__dlpack__",
    dlpack_fastcall,
    c"__dlpack__($self, /, *, stream=None, max_version=None, dl_device=None, copy=None)
--

A DLPack capsule of the array the type's fill describes, owning a reference to self: versioned
when max_version is (1, x) or later, else legacy; the producer's stream ordered before the
consumer's `stream` (None: the legacy default stream; -1: no ordering; host memory takes None).",
);

static DLPACK_DEVICE: Definition = Definition::no_arguments(
    c"__dlpack_device__",
    dlpack_device_call,
    c"__dlpack_device__($self, /)
--

The (device type, device id) of the array: the fill's word, else the driver's for the pointer.",
);

/// The record of `slf`'s offered type, and `slf` borrowed.
///
/// # Safety
/// `slf` is the `self` an offered type's method descriptor passed (checked by it to be an
/// instance of that type), alive for the call; the thread is attached.
unsafe fn offered_self<'a, 'py>(
    py: Python<'py>,
    slf: *mut PyObject,
) -> PyResult<(&'static Offered, pyo3::Borrowed<'a, 'py, PyAny>)> {
    // SAFETY: a live object held by the call (the caller's contract).
    let instance = unsafe { pyo3::Borrowed::from_ptr(py, slf) };
    // SAFETY: as above.
    let offered = unsafe { Offered::of_object(slf) }.ok_or_else(|| {
        PySystemError::new_err("libcai: an offered method called on an object of no offered type")
    })?;
    Ok((offered, instance))
}

/// `obj.__dlpack__(...)` of an offered type, as CPython calls a `METH_FASTCALL |
/// METH_KEYWORDS` method.
///
/// With plain arguments (`plain_arguments`) the body runs without PyO3's count of the thread
/// (`run_assumed`). The audit of its success path, which drops no `Py<T>` and no `PyErr`:
/// the arguments are read without a failing conversion (`copy` a bool, the pairs read once by
/// `plain_arguments`, `stream` an int compared with -1 and read by `consumer_stream`'s integer
/// path); `offered_self` borrows; the fill and its validation write a struct (a fill's own
/// Python errors are failures); the device, the export and the tensor are the core's; the
/// capsule is handed out as a raw pointer. Any other call runs attached.
unsafe extern "C" fn dlpack_fastcall(
    slf: *mut PyObject,
    args: *const *mut PyObject,
    nargsf: Py_ssize_t,
    kwnames: *mut PyObject,
) -> *mut PyObject {
    let mut slots = [std::ptr::null_mut(); 4];
    // SAFETY: called by the interpreter, attached, with the vectorcall contract.
    let matched = unsafe { DLPACK_SIGNATURE.match_arguments(args, nargsf, kwnames, &mut slots) };
    // SAFETY: attached (the interpreter called in); the slots are the call's arguments.
    let plain = matched.as_ref().ok().and_then(|slots| unsafe { plain_arguments(slots) });
    let body = |py: Python<'_>| {
        let slots = matched.map_err(|mismatch| DLPACK_SIGNATURE.refusal(py, mismatch))?;
        // SAFETY: the descriptor's `self`, alive for the call.
        let (offered, instance) = unsafe { offered_self(py, slf) }?;
        // SAFETY: attached; the slots are the call's arguments, alive for its duration.
        let arguments = unsafe { DlpackArguments::of_call(py, slots, plain) }?;
        with_fill_array(|array| {
            let mut found = None;
            let (request, device) = arguments.read(|| {
                let described = offered.describe_object(&instance, AllowHost::ALLOWED, array)?;
                let device = Offered::device_of(&described, array)?;
                found = Some(described);
                Ok(device)
            })?;
            let described =
                found.ok_or_else(|| PySystemError::new_err("libcai: __dlpack__ described nothing"))?;
            let tensor = Offered::export_described(
                &instance,
                array,
                &described,
                device,
                request.consumer,
                request.versioned,
            )?;
            Ok(capsule_of(py, tensor, request.versioned)?.into_ptr())
        })
    };
    if plain.is_some() {
        run_assumed(body)
    } else {
        run_attached(body)
    }
}

/// `obj.__dlpack_device__()` of an offered type (`METH_NOARGS`), run without PyO3's count of
/// the thread (`run_assumed`): its success path borrows `self`, describes into a struct and
/// hands out a new tuple, dropping no `Py<T>` and no `PyErr`.
unsafe extern "C" fn dlpack_device_call(slf: *mut PyObject, _unused: *mut PyObject) -> *mut PyObject {
    run_assumed(|py| {
        // SAFETY: the descriptor's `self`, alive for the call.
        let (offered, instance) = unsafe { offered_self(py, slf) }?;
        let device = with_fill_array(|array| {
            let described = offered.describe_object(&instance, AllowHost::ALLOWED, array)?;
            Offered::device_of(&described, array)
        })?;
        Ok((device.device_type, device.device_id).into_pyobject(py)?.into_ptr())
    })
}

/// `cai_python_offer_to`: 0, or -1 with an exception set.
///
/// # Safety
/// The caller is attached to the interpreter; `type_object` NULL or a live type, ready;
/// `type_dict` NULL or that type's own dict.
pub unsafe extern "C" fn python_offer_to(
    type_object: *mut PyTypeObject,
    fill: Option<CaiPythonFill>,
    type_dict: *mut PyObject,
) -> i32 {
    if in_a_subinterpreter() {
        refuse_subinterpreter("cai_python_offer");
        return -1;
    }
    // SAFETY: the caller is attached (the function's contract); attaching again only counts it.
    Python::attach(|py| {
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            // SAFETY: the caller's arguments, as above.
            unsafe { offer(py, type_object, fill, type_dict) }
        }));
        let failure = match outcome {
            Ok(Ok(())) => return 0,
            Ok(Err(error)) => error,
            Err(_) => pyo3::exceptions::PyRuntimeError::new_err(
                "libcai panicked in cai_python_offer (a bug; please report it)",
            ),
        };
        failure.restore(py);
        -1
    })
}

/// Gives the type its five attributes.
///
/// # Safety
/// As `python_offer_to`.
unsafe fn offer(
    py: Python<'_>,
    type_object: *mut PyTypeObject,
    fill: Option<CaiPythonFill>,
    type_dict: *mut PyObject,
) -> PyResult<()> {
    let (Some(fill), false) = (fill, type_object.is_null()) else {
        return Err(PyTypeError::new_err("cai_python_offer: type and fill must not be NULL"));
    };
    // SAFETY: a live type (the contract), borrowed for the call.
    let ty = unsafe { pyo3::Borrowed::from_ptr(py, type_object.cast()) }.cast::<PyType>()?.to_owned();
    let name = ty.qualname().map(|n| n.to_string()).unwrap_or_else(|_| "?".into());
    let own = ty.getattr(pyo3::intern!(py, "__dict__"))?;
    for attribute in ATTRIBUTES {
        if own.contains(attribute)? {
            return Err(PyTypeError::new_err(format!(
                "cai_python_offer: '{name}' defines {attribute} itself (or was offered already); the offer gives \
                 the type every protocol from its fill function: remove the type's own {attribute}"
            )));
        }
    }
    // SAFETY: a live, ready type; the record references it for ever.
    let offered = unsafe { Offered::leak(type_object, fill, name) };
    // A table in a leaked record (never freed).
    let capsule = cpython::static_capsule(py, offered.api(), CAI_C_API_CAPSULE_NAME)?;
    DLPACK_SIGNATURE.intern(py)?;
    let method = |definition: &'static Definition| definition.method(&ty).map(Bound::unbind);
    let values: [Py<PyAny>; 5] = [
        Py::new(py, OfferedInterface { offered })?.into_any(),
        method(&DLPACK)?,
        method(&DLPACK_DEVICE)?,
        offered_exchange_api_capsule(py)?,
        capsule.unbind(),
    ];
    if type_dict.is_null() {
        for (attribute, value) in ATTRIBUTES.iter().zip(values) {
            ty.setattr(*attribute, value)?;
        }
        return Ok(());
    }
    // SAFETY: the type's own dict (the contract), borrowed for the call.
    let dict = unsafe { pyo3::Borrowed::from_ptr(py, type_dict) }.cast::<PyDict>()?.to_owned();
    for (attribute, value) in ATTRIBUTES.iter().zip(values) {
        dict.set_item(*attribute, value)?;
    }
    // The type's dict changed: its attribute cache is invalidated.
    cpython::type_modified(&ty);
    Ok(())
}
