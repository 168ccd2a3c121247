//! Each function takes one argument and returns its data pointer, so that the work after the
//! argument is taken is the same everywhere; `baseline` takes nothing apart and measures PyO3's
//! call itself.

use dlpark::ffi::DLManagedTensorVersioned;
use dlpark::ManagedBox;
use numpy::{PyArrayDyn, PyArrayMethods, PyReadonlyArrayDyn};
use pyo3::prelude::*;

/// Host memory allowed (the arguments are CPU tensors and CAI dicts over host memory), no
/// stream ordering and no pointer check: dlpark and rust-numpy do neither.
fn options() -> cai::ImportOptions {
    cai::ImportOptions::new()
        .allow_host(true)
        .sync(cai::SyncMode::None)
        .pointer_check(cai::PointerCheck::Never)
}

#[pyfunction]
fn baseline(_x: &Bound<'_, PyAny>) -> u64 {
    0
}

/// cai-python's borrowed view with this module's options.
#[pyfunction]
fn cai_view(x: &Bound<'_, PyAny>) -> PyResult<u64> {
    Ok(cai_python::view(x, &options())?.data())
}

/// The borrowed view as the argument's type (its `FromPyObject`: device memory only, the
/// default sync and pointer check).
#[pyfunction]
fn cai_view_arg(x: cai_python::ArrayView<'_>) -> u64 {
    x.data()
}

/// cai-python's owning array with this module's options.
#[pyfunction]
fn cai_owned(x: &Bound<'_, PyAny>) -> PyResult<u64> {
    Ok(cai_python::from_object(x, &options())?.data())
}

/// dlpark's owning DLPack tensor as the argument's type: the C exchange table when the type has
/// one, otherwise `__dlpack__(max_version=...)` and its capsule.
#[pyfunction]
fn dlpark_tensor(x: ManagedBox<DLManagedTensorVersioned>) -> u64 {
    x.tensor().data as u64
}

/// rust-numpy's read-only borrow of a float32 numpy array (type check, dtype check, the shared
/// borrow flag taken and released).
#[pyfunction]
fn numpy_array(x: PyReadonlyArrayDyn<'_, f32>) -> u64 {
    x.data() as u64
}

/// rust-numpy's array without the borrow flag (type and dtype checks only).
#[pyfunction]
fn numpy_bound(x: Bound<'_, PyArrayDyn<f32>>) -> u64 {
    x.data() as u64
}

#[pymodule]
fn cai_pyo3_peers(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(baseline, m)?)?;
    m.add_function(wrap_pyfunction!(cai_view, m)?)?;
    m.add_function(wrap_pyfunction!(cai_view_arg, m)?)?;
    m.add_function(wrap_pyfunction!(cai_owned, m)?)?;
    m.add_function(wrap_pyfunction!(dlpark_tensor, m)?)?;
    m.add_function(wrap_pyfunction!(numpy_array, m)?)?;
    m.add_function(wrap_pyfunction!(numpy_bound, m)?)?;
    Ok(())
}
