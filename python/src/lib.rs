//! `cai._native`: the CPython extension module of the `cai` package, built from libcai's Rust
//! core (no ctypes hop, no copy of any rule). python/cai re-exports what users call.
//!
//! The module also carries libcai's C API (the `cai_*` functions of include/cai.h, linked in
//! from the core): ctypes and cffi users load this same file (`cai.library_path()`), so the
//! extension and their calls share one copy of the driver state (driver table, event pool).

// Every unsafe block says why it is sound.
#![deny(clippy::undocumented_unsafe_blocks)]

// The modules, top down (data flows down only; tests/layering.rs keeps it so):
// the entry points, the class, the negotiation, its readers, the import step, the leaves.
// A folder stands where its mod.rs's layer puts it, and each of its files keeps its own layer:
// entry/ holds the entry points; offer/ the offers, its records (offered.rs) below the
// negotiation; array/ the cai.Array's state (mod.rs, below the import step), its objects, its
// DLPack export, and the class as Python sees it (methods.rs), above the negotiation.
mod entry;

mod offer;
mod release_after;

mod negotiate;

mod read;

mod import;

mod array;

mod described;
mod dlpack;
mod options;

mod c_api_rules;
mod errors;
mod exchange_api;
mod pool;
mod values;

mod classes;
mod cpython;

use pyo3::exceptions::PyImportError;
use pyo3::prelude::*;
use pyo3::types::PyDict;

// The C API (functions, and the constants used below), kept in the module's exported symbols
// for ctypes and cffi.
pub use cai::*;

/// Declared free-threading safe: no dict or list is read without a strong reference or a
/// copy, and an Array never changes once made.
#[pymodule(gil_used = false)]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    refuse_subinterpreters(py)?;
    array::methods::add_array_type(m)?;
    entry::from_object::add_from_object(m)?;
    release_after::add_to_module(m)?;
    #[cfg(feature = "test-oracle")]
    m.add_function(wrap_pyfunction!(entry::functions::from_object, m)?)?;
    m.add_function(wrap_pyfunction!(entry::functions::from_buffer_interface, m)?)?;
    m.add_function(wrap_pyfunction!(entry::functions::validate_interface, m)?)?;
    m.add_function(wrap_pyfunction!(entry::functions::read_protocol, m)?)?;
    m.add_function(wrap_pyfunction!(entry::ipc::ipc_export, m)?)?;
    m.add_function(wrap_pyfunction!(entry::ipc::ipc_open, m)?)?;
    m.add_function(wrap_pyfunction!(entry::ipc::ipc_rebuild, m)?)?;
    m.add("SYNC_DEFAULT", CAI_SYNC_DEFAULT)?;
    m.add("SYNC_STREAM_ORDERED", CAI_SYNC_STREAM_ORDERED)?;
    m.add("SYNC_BLOCKING", CAI_SYNC_BLOCKING)?;
    m.add("SYNC_NONE", CAI_SYNC_NONE)?;
    m.add("POINTER_CHECK_DEFAULT", CAI_POINTER_CHECK_DEFAULT)?;
    m.add("POINTER_CHECK_ALWAYS", CAI_POINTER_CHECK_ALWAYS)?;
    m.add("POINTER_CHECK_NEVER", CAI_POINTER_CHECK_NEVER)?;
    let codes = PyDict::new(py);
    for status in Status::ALL {
        codes.set_item(status.name(), status.code())?;
    }
    m.add("STATUS_CODES", codes)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    // The C API for compiled extensions (include/cai_python.h).
    m.add("_C_API", entry::c_api_table::python_api_capsule(py)?)?;
    Ok(())
}

/// Refuses to load in any interpreter but the main one, before anything of the module is made.
/// The module's state is one per process (the cai.Array type, the interned names, the caches
/// of type facts, the C API table), and an entry that must count its thread in attaches
/// through PyO3, by the PyGILState API, which serves the main interpreter alone: in a
/// subinterpreter that call waited forever for the GIL its own thread held.
fn refuse_subinterpreters(py: Python<'_>) -> PyResult<()> {
    match cpython::interpreter::main_interpreter_id(py) {
        // CPython numbers the main interpreter 0, the others from 1.
        0 => Ok(()),
        -1 => Err(PyErr::fetch(py)),
        id => Err(PyImportError::new_err(format!(
            "cai: libcai's extension module (cai._native) loads only in the main interpreter, and this is subinterpreter {id}: its types, caches and C API table are one per process, and its threads attach through the PyGILState API, which serves the main interpreter alone. Import cai in the main interpreter (under mod_wsgi: WSGIApplicationGroup %{{GLOBAL}})"
        ))),
    }
}
