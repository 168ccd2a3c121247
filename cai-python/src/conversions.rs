//! PyO3's conversions: [`Array`] and [`ArrayView`] as function arguments (default options:
//! device memory only, no pointer check beyond the defaults, no sync), [`Array`] as a return
//! value. An [`ArrayView`] argument borrows where a struct can hold the array, else owns an import
//! of it for the call ([`crate::view_or_own`]). Take [`crate::from_object`], [`crate::view`] or
//! [`crate::view_or_own`] for other options.

use pyo3::prelude::*;
use pyo3::Borrowed;

use crate::{Array, ArrayView};

impl<'a, 'py> FromPyObject<'a, 'py> for Array {
    type Error = PyErr;

    fn extract(obj: Borrowed<'a, 'py, PyAny>) -> PyResult<Array> {
        crate::from_object(&obj, &cai::ImportOptions::new()).map(Array)
    }
}

impl<'a, 'py> FromPyObject<'a, 'py> for ArrayView<'a> {
    type Error = PyErr;

    fn extract(obj: Borrowed<'a, 'py, PyAny>) -> PyResult<ArrayView<'a>> {
        // Borrowed where a struct can hold the array (it borrows `obj`, which PyO3 lends for
        // 'a), else owned for the call, as the pybind11 and nanobind casters do.
        let raw = crate::read(&obj, cai::ImportOptions::new().as_raw(), |api| api.cai_python_view_or_own)?;
        Ok(ArrayView::borrowing_or_owning(raw))
    }
}

impl<'py> IntoPyObject<'py> for Array {
    type Target = PyAny;
    type Output = Bound<'py, PyAny>;
    type Error = PyErr;

    fn into_pyobject(self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        crate::to_object(py, self.0)
    }
}
