//! A type's name, method resolution order, its classes' own namespaces and its instances' dict
//! offset as CPython keeps them, read through `type`'s own descriptors. A metaclass may define
//! `__name__`, `__mro__`, `__dict__` or `__dictoffset__` for its classes (a property that
//! raises, or gives anything at all); what libcai finds of a type (negotiate/type_facts.rs), which class
//! defines a protocol (read/c_api.rs) and the name a message gives a type (values.rs's
//! `TypeOf`) must not take the metaclass's answer for the type's. Read once per type or for a
//! message, never on a hot path.

use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyString, PyTuple, PyType};

/// `type`'s own descriptor of `name` (a getset of `type`, which no metaclass can replace for
/// `type` itself), applied to `class`.
fn through_type<'py>(class: &Bound<'py, PyType>, name: &Bound<'py, PyString>) -> PyResult<Bound<'py, PyAny>> {
    let py = class.py();
    let descriptor = py.get_type::<PyType>().getattr(intern!(py, "__dict__"))?.get_item(name)?;
    descriptor.call_method1(intern!(py, "__get__"), (class,))
}

/// `ty`'s MRO as the interpreter resolves attributes by: a tuple of types. An error where
/// there is none (a type still being made has no MRO yet).
pub fn mro<'py>(ty: &Bound<'py, PyType>) -> PyResult<Bound<'py, PyTuple>> {
    Ok(through_type(ty, intern!(ty.py(), "__mro__"))?.cast_into::<PyTuple>()?)
}

/// Whether `class`'s own namespace (not its bases', not its metaclass's) defines `name`.
pub fn defines(class: &Bound<'_, PyType>, name: &Bound<'_, PyString>) -> PyResult<bool> {
    through_type(class, intern!(class.py(), "__dict__"))?.contains(name)
}

/// Where `ty`'s instances keep their `__dict__` (0: they have none).
pub fn dict_offset(ty: &Bound<'_, PyType>) -> PyResult<isize> {
    through_type(ty, intern!(ty.py(), "__dictoffset__"))?.extract()
}

/// `ty`'s `__name__`, for messages: "?" where even CPython's own cannot be read.
pub fn name(ty: &Bound<'_, PyType>) -> String {
    through_type(ty, intern!(ty.py(), "__name__"))
        .and_then(|name| name.extract())
        .unwrap_or_else(|_| "?".into())
}
