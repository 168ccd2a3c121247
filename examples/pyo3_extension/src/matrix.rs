use pyo3::prelude::*;

/// A `rows` x `cols` matrix of f32 in host memory, which numpy, torch, cai and every DLPack
/// consumer read in place: `cai_python::offer` gives the type each protocol, read through `fill`.
#[pyclass]
pub struct Matrix {
    values: Vec<f32>,
    cols: usize,
}

#[pymethods]
impl Matrix {
    #[new]
    fn new(rows: usize, cols: usize) -> Matrix {
        Matrix { values: (0..rows * cols).map(|i| i as f32).collect(), cols }
    }
}

impl cai_python::Offer for Matrix {
    fn fill(&self, out: &mut cai_python::Fill<'_, '_>) -> Result<(), cai_python::OfferError> {
        let rows = self.values.len().checked_div(self.cols).unwrap_or(0) as i64;
        let shape = [rows, self.cols as i64];
        // Device memory: leave out host(), give the stream its pending work is on.
        out.data(self.values.as_ptr() as u64).shape(&shape)?.typestr("<f4")?.host();
        Ok(())
    }
}
