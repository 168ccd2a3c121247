//! `cai_python_offer`: a type's author supplies one fill function and the type gains every
//! producer protocol, each read through the fill (python/src/offered.rs) and exported by the
//! same code as a cai.Array's:
//! - `__cuda_array_interface__`, a descriptor building the v3 dict when read;
//! - `__dlpack__` and `__dlpack_device__`, descriptors giving a bound callable;
//! - `__dlpack_c_exchange_api__`, DLPack's exchange table for offered types;
//! - `__cuda_array_interface_c_api__`, the type's C-level CAI table.
//!
//! Each protocol describes the object when used, never when looked up: `hasattr` runs no fill.

use std::ffi::c_void;

use cai_python::ffi::{CaiPythonFill, CAI_C_API_CAPSULE_NAME};
use pyo3::exceptions::PyTypeError;
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyType};

use cai::binding::dlpack::AllowHost;
use cai::CaiArray;

use crate::dlpack_export::{dlpack_capsule, DlpackArguments};
use crate::exchange_offered::offered_exchange_api_capsule;
use crate::offered::Offered;

/// The attributes an offer gives a type, in the order they are set.
const ATTRIBUTES: [&str; 5] = [
    "__cuda_array_interface__",
    "__dlpack__",
    "__dlpack_device__",
    "__dlpack_c_exchange_api__",
    "__cuda_array_interface_c_api__",
];

/// Which protocol a descriptor serves.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Protocol {
    Interface,
    Dlpack,
    DlpackDevice,
}

/// The descriptor of one protocol of an offered type.
#[pyclass(module = "cai", name = "_OfferedProtocol", frozen)]
struct OfferedProtocol {
    offered: &'static Offered,
    protocol: Protocol,
}

#[pymethods]
impl OfferedProtocol {
    /// On the class: the descriptor itself. On an instance: the v3 dict (raising
    /// AttributeError for host memory, which the CAI cannot describe), or the bound method.
    fn __get__(
        slf: &Bound<'_, Self>,
        instance: Option<&Bound<'_, PyAny>>,
        _owner: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        let py = slf.py();
        let Some(instance) = instance.filter(|i| !i.is_none()) else {
            return Ok(slf.clone().into_any().unbind());
        };
        let this = slf.get();
        match this.protocol {
            Protocol::Interface => {
                let array = this.offered.array_of(instance)?;
                Ok(array.getattr(pyo3::intern!(py, "__cuda_array_interface__"))?.unbind())
            }
            Protocol::Dlpack => {
                let bound = BoundDlpack { offered: this.offered, instance: instance.clone().unbind() };
                Ok(Py::new(py, bound)?.into_any())
            }
            Protocol::DlpackDevice => {
                let bound = BoundDlpackDevice { offered: this.offered, instance: instance.clone().unbind() };
                Ok(Py::new(py, bound)?.into_any())
            }
        }
    }

    fn __repr__(&self) -> String {
        format!("<libcai's {} of '{}'>", self.protocol.name(), self.offered.name)
    }
}

impl Protocol {
    fn name(self) -> &'static str {
        match self {
            Protocol::Interface => "__cuda_array_interface__",
            Protocol::Dlpack => "__dlpack__",
            Protocol::DlpackDevice => "__dlpack_device__",
        }
    }
}

/// `instance.__dlpack__`: called, it describes the instance and exports a capsule owning a
/// reference to it, checked and ordered as a cai.Array's export is (python/src/dlpack_export.rs).
#[pyclass(module = "cai", name = "_OfferedDlpack", frozen)]
struct BoundDlpack {
    offered: &'static Offered,
    instance: Py<PyAny>,
}

#[pymethods]
impl BoundDlpack {
    #[pyo3(signature = (*, stream=None, max_version=None, dl_device=None, copy=None))]
    fn __call__(
        &self,
        py: Python<'_>,
        stream: Option<&Bound<'_, PyAny>>,
        max_version: Option<&Bound<'_, PyAny>>,
        dl_device: Option<&Bound<'_, PyAny>>,
        copy: Option<bool>,
    ) -> PyResult<Py<PyAny>> {
        let instance = self.instance.bind(py);
        let mut acquired = None;
        let arguments = DlpackArguments { stream, max_version, dl_device, copy };
        let (request, device) = arguments.read(|| {
            let (view, described) = self.offered.acquire_object(instance)?;
            let device = Offered::device_of(&described, view.array())?;
            acquired = Some(view);
            Ok(device)
        })?;
        let view = acquired.expect("read() found the device by acquiring").into_view();
        Ok(dlpack_capsule(py, view, device, &request)?)
    }

    fn __repr__(&self) -> String {
        format!("<libcai's __dlpack__ of a '{}'>", self.offered.name)
    }
}

/// `instance.__dlpack_device__`: the device the fill says, else the driver's answer for the
/// pointer.
#[pyclass(module = "cai", name = "_OfferedDlpackDevice", frozen)]
struct BoundDlpackDevice {
    offered: &'static Offered,
    instance: Py<PyAny>,
}

#[pymethods]
impl BoundDlpackDevice {
    fn __call__(&self, py: Python<'_>) -> PyResult<(i32, i32)> {
        let mut array = CaiArray::zeroed();
        let host = AllowHost { allowed: true, how: "" };
        let described = self.offered.describe_object(self.instance.bind(py), host, &mut array)?;
        let device = Offered::device_of(&described, &array)?;
        Ok((device.device_type, device.device_id))
    }

    fn __repr__(&self) -> String {
        format!("<libcai's __dlpack_device__ of a '{}'>", self.offered.name)
    }
}

/// `cai_python_offer_to`: 0, or -1 with an exception set.
///
/// # Safety
/// The caller is attached to the interpreter; `type_object` NULL or a live type, ready;
/// `type_dict` NULL or that type's own dict.
pub unsafe extern "C" fn python_offer_to(
    type_object: *mut ffi::PyTypeObject,
    fill: Option<CaiPythonFill>,
    type_dict: *mut ffi::PyObject,
) -> i32 {
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
    type_object: *mut ffi::PyTypeObject,
    fill: Option<CaiPythonFill>,
    type_dict: *mut ffi::PyObject,
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
    let table = offered.api() as *mut c_void;
    // SAFETY: a table in a leaked record (never freed) and a static name; no destructor.
    let capsule = unsafe { ffi::PyCapsule_New(table, CAI_C_API_CAPSULE_NAME.as_ptr(), None) };
    // SAFETY: a new reference, or NULL with an exception set.
    let capsule = unsafe { Bound::from_owned_ptr_or_err(py, capsule) }?;
    let descriptor = |protocol| Py::new(py, OfferedProtocol { offered, protocol }).map(Py::into_any);
    let values: [Py<PyAny>; 5] = [
        descriptor(Protocol::Interface)?,
        descriptor(Protocol::Dlpack)?,
        descriptor(Protocol::DlpackDevice)?,
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
    // SAFETY: a live type whose dict changed: its attribute cache is invalidated.
    unsafe { ffi::PyType_Modified(type_object) };
    Ok(())
}
