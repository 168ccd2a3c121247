//! PyO3's cfgs (`Py_LIMITED_API`, `Py_3_*`) for this crate's own code, as PyO3 resolves them.

fn main() {
    pyo3_build_config::use_pyo3_cfgs();
}
