//! How failures reach Python: a core `cai::Error` becomes `cai.CaiError` (a ValueError
//! subclass defined in python/cai/_errors.py) carrying the status name, its code, the raw
//! CUresult and the message; an exception raised by the user's objects passes through as is.

use crate::cpython::interpreter::attach_where_served;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyType;

/// A failure on the way: libcai's, or a Python exception already raised.
pub enum Failure {
    Cai(cai::Error),
    Python(PyErr),
    /// A borrowed view's refusal of what only an owning import holds (a mask, named descr
    /// fields, an exchange table's tensor without the non-owning call): raised as `Cai`, and
    /// taken by the owning import instead where the caller asked for that
    /// (`cai_python_view_or_own`).
    CannotBorrow(cai::Error),
}

pub type CaiResult<T> = Result<T, Failure>;

/// A result whose failure is boxed: one word, so that what the import pipeline returns through
/// its levels moves in registers, not as the failure's 64 bytes (about 25 instructions a call
/// on an owning import from C).
pub type BoxedResult<T> = Result<T, Box<Failure>>;

impl From<PyErr> for Failure {
    fn from(error: PyErr) -> Failure {
        Failure::Python(error)
    }
}

impl From<cai::Error> for Failure {
    fn from(error: cai::Error) -> Failure {
        Failure::Cai(error)
    }
}

impl From<Box<Failure>> for PyErr {
    fn from(failure: Box<Failure>) -> PyErr {
        (*failure).into()
    }
}

impl From<Failure> for PyErr {
    fn from(failure: Failure) -> PyErr {
        match failure {
            Failure::Python(error) => error,
            Failure::Cai(error) | Failure::CannotBorrow(error) => {
                attach_where_served(|py| to_python(py, &error))
            }
        }
    }
}

/// cai.CaiError, the exception class of libcai's refusals.
pub fn cai_error_type(py: Python<'_>) -> PyResult<&Bound<'_, PyType>> {
    static CAI_ERROR: PyOnceLock<Py<PyType>> = PyOnceLock::new();
    CAI_ERROR.import(py, "cai._errors", "CaiError")
}

/// `error` as the cai.CaiError it raises.
pub fn to_python(py: Python<'_>, error: &cai::Error) -> PyErr {
    let made = cai_error_type(py)
        .and_then(|class| class.call1((error.status.name(), error.message.as_str(), error.driver_result)));
    match made {
        Ok(instance) => PyErr::from_value(instance),
        Err(failed) => failed,
    }
}
