use pyo3::prelude::*;

mod matrix;

/// The first `rows` rows of any GPU array (a CAI dict or object, a DLPack producer, a
/// cai.Array), as a new cai.Array that keeps `source` alive until Python lets go of it.
#[pyfunction]
fn head(py: Python<'_>, source: Py<PyAny>, rows: i64) -> PyResult<cai_python::Array> {
    let array = cai_python::view(source.bind(py), &cai::ImportOptions::new())?;
    let mut shape = array.shape().to_vec();
    if let Some(first) = shape.first_mut() {
        *first = rows.clamp(0, *first);
    }
    let mut made = cai::Array::builder(array.typestr().unwrap_or_default(), &shape, array.data());
    if let Some(strides) = array.strides() {
        made = made.strides(strides);
    }
    // keep: `source` is dropped when the array is released, attached to the interpreter, on
    // whichever thread lets go of it.
    let made = made.readonly(array.readonly()).on_release(cai_python::keep(source));
    Ok(made.build().map_err(cai_python::raise)?.into())
}

#[pymodule]
fn gpu_head(module: &Bound<'_, PyModule>) -> PyResult<()> {
    cai_python::import(module.py())?;
    module.add_function(wrap_pyfunction!(head, module)?)?;
    module.add_class::<matrix::Matrix>()?;
    cai_python::offer::<matrix::Matrix>(module.py())
}
