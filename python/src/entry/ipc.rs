//! Arrays across processes from Python: `cai.ipc_export(obj, stream=None)` (the bytes of the
//! core's `CaiIpcDescriptor`), `cai.ipc_open(descriptor, stream=None, sync=None)` (an owning
//! cai.Array whose release closes the IPC handle), and a cai.Array's pickling through the
//! descriptor: `__reduce__`'s body is here, its entry in the type's table array/methods.rs's
//! (the type is made from a static table of `PyMethodDef`s, not by `#[pymethods]`).
//!
//! PyO3's safe API only: the core does every driver call and every rule of the descriptor.

use cai::binding::ipc;
use cai::{
    CaiImportOptions, CaiIpcDescriptor, Error, Status, CAI_IPC_DESCRIPTOR_SIZE, CAI_POINTER_CHECK_DEFAULT,
    CAI_SYNC_DEFAULT,
};
use pyo3::exceptions::PyTypeError;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::pybacked::PyBackedBytes;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyByteArray, PyBytes, PyDict};
use pyo3::IntoPyObjectExt;

use crate::array::object::ArrayObject;
use crate::described::Read;
use crate::errors::Failure;
use crate::import::{Caller, Hold};
use crate::negotiate::pipeline::{import_object, unexpected_outcome};
use crate::options::{consumer_stream, sync_mode};
use crate::pool::Pooled;
use crate::values::TypeOf;

/// The legacy default stream (CAI's and DLPack's `1`), where an export with no `stream` records
/// its event: every blocking stream's work before it precedes it.
const LEGACY_DEFAULT_STREAM: u64 = 1;

/// Exports `obj` (anything `cai.from_object` reads) to another process on this machine: the
/// bytes of a `CaiIpcDescriptor`, which `cai.ipc_open` opens there. The producer's work on the
/// array is ordered before `stream` (None: the legacy default stream), never with a host wait,
/// and the descriptor carries an event recorded there that the importer waits on. `obj` (its
/// memory) must stay alive while the other process uses the array: the descriptor keeps
/// nothing alive. Raises cai.CaiError naming what cannot be shared (host or managed memory,
/// memory of a pool that is not IPC-enabled).
#[pyfunction]
#[pyo3(signature = (obj, stream=None))]
pub fn ipc_export<'py>(
    obj: &Bound<'py, PyAny>,
    stream: Option<&Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyBytes>> {
    let py = obj.py();
    let given = consumer_stream(stream.filter(|s| !s.is_none()))?;
    let recorded_on = if given == 0 { LEGACY_DEFAULT_STREAM } else { given };
    let options = CaiImportOptions {
        consumer_stream: recorded_on,
        sync_mode: CAI_SYNC_DEFAULT,
        pointer_check: CAI_POINTER_CHECK_DEFAULT,
        // Host memory is read (not refused with the import's "pass allow_host=True", which is
        // no fix here) and then refused by the export, which names why.
        allow_host: 1,
        ..CaiImportOptions::default()
    };
    let mut to_own = None;
    import_object(obj, &options, Caller::Python, Hold::Own(&mut to_own), None)?;
    let Some((read, _)) = to_own else { return Err(unexpected_outcome("cai.ipc_export").into()) };
    let mut view = *read.array();
    // The copy owns nothing: `read` releases what it holds once the descriptor is made.
    view.release = None;
    view.owner = std::ptr::null_mut();
    view.stream = recorded_on;
    let descriptor = ipc::export(&view).map_err(Failure::Cai)?;
    drop(read);
    Ok(PyBytes::new(py, descriptor.as_bytes()))
}

/// Opens, in this process, an array another process exported (`descriptor`: the bytes
/// `cai.ipc_export` or a pickled cai.Array gave): a cai.Array viewing the same memory, on the
/// device with the exporter's UUID, whose release (`release()` or collection) closes the IPC
/// handle. Ordered after the exporter's work as imports are: stream-ordered on `stream` if
/// given, else a host wait; `sync=False` skips it. Raises cai.CaiError naming the reason for a
/// descriptor that cannot be opened here (the exporting process itself, another version, a
/// corrupt one, a device this process lacks).
#[pyfunction]
#[pyo3(signature = (descriptor, stream=None, sync=None))]
pub fn ipc_open<'py>(
    descriptor: &Bound<'py, PyAny>,
    stream: Option<&Bound<'py, PyAny>>,
    sync: Option<&Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyAny>> {
    let options = CaiImportOptions {
        consumer_stream: consumer_stream(stream)?,
        sync_mode: sync_mode(sync)?,
        pointer_check: CAI_POINTER_CHECK_DEFAULT,
        ..CaiImportOptions::default()
    };
    open_bytes(descriptor, &options)
}

/// `cai._native._ipc_rebuild(descriptor)`: what a pickled cai.Array calls when it is loaded.
/// In the process that pickled it, the Array itself while it lives (`pickled`): the driver opens
/// no IPC handle in its own process, and a pickle loaded there (Dask's scheduler in a
/// `LocalCluster`, which unpickles a task's arguments in the client's process; `copy.copy`)
/// gets the same view of the same memory another process gets. (`copy.deepcopy` never comes
/// here: `__deepcopy__` refuses it.) Elsewhere `cai.ipc_open` with its defaults.
#[pyfunction]
#[pyo3(name = "_ipc_rebuild")]
pub fn ipc_rebuild<'py>(descriptor: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
    let py = descriptor.py();
    if descriptor.is_instance_of::<PyBytes>() {
        let found = pickled(py)?.call_method1(intern!(py, "get"), (descriptor,))?;
        if !found.is_none() {
            return Ok(found);
        }
    }
    open_bytes(descriptor, &CaiImportOptions::default()).map_err(|error| {
        with_note(
            py,
            error,
            "while unpickling a cai.Array: it pickles to a CUDA IPC descriptor, which opens in another process, or in the process that pickled it while that cai.Array is alive (it is given back itself)",
        )
    })
}

/// The cai.Arrays this process pickled, by their descriptor's bytes, held weakly
/// (`weakref.WeakValueDictionary`); emptied in a forked child, whose descriptors are its own.
fn pickled(py: Python<'_>) -> PyResult<&Bound<'_, PyAny>> {
    static PICKLED: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
    PICKLED
        .get_or_try_init(py, || {
            let made = py.import("weakref")?.getattr("WeakValueDictionary")?.call0()?;
            let kwargs = PyDict::new(py);
            kwargs.set_item("after_in_child", made.getattr("clear")?)?;
            py.import("os")?.getattr("register_at_fork")?.call((), Some(&kwargs))?;
            Ok::<_, PyErr>(made.unbind())
        })
        .map(|made| made.bind(py))
}

/// `a.__reduce__()` (array/methods.rs's entry): `(cai._native._ipc_rebuild, (descriptor,))`
/// for an array over device memory, exported as `cai.ipc_export(a)` exports it and remembered
/// for a load in this process (`ipc_rebuild`); a cai.CaiError naming the reason for what cannot
/// be shared (host memory, OpenCL memory, a mask, a released array).
pub(crate) fn reduce(slf: &ArrayObject<'_>) -> PyResult<Py<PyAny>> {
    let py = slf.py();
    static REBUILD: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
    let rebuild = REBUILD.get_or_try_init(py, || {
        Ok::<_, PyErr>(py.import("cai._native")?.getattr("_ipc_rebuild")?.unbind())
    })?;
    let descriptor = ipc_export(slf.as_any(), None).map_err(|error| pickling_refusal(py, error))?;
    pickled(py)?.set_item(&descriptor, slf.as_any())?;
    (rebuild.bind(py), (descriptor,)).into_py_any(py)
}

/// `a.__deepcopy__(memo)`'s TypeError: a deep copy would be this same view (its pickle loads
/// as the Array itself in this process), so writes through the "copy" would change the
/// original; the memory is the producer's to copy.
pub(crate) fn refuse_deepcopy(slf: &ArrayObject<'_>) -> PyErr {
    let what = if slf.get().dlpack_device().is_some_and(|device| device.device_type == cai::CAI_DL_CPU) {
        "host memory"
    } else {
        "device memory"
    };
    PyTypeError::new_err(format!(
        "copy.deepcopy of a cai.Array: it is a view of {what} it does not own, and libcai copies no memory (a deep copy would be this same view, so writes through it would change the original); copy the memory with its producer (cupy.array(a), torch.as_tensor(a).clone(), numpy.array(a) for host memory), or use copy.copy(a) for the same view"
    ))
}

/// A refusal of `__reduce__`, with a note saying what pickling a cai.Array does.
fn pickling_refusal(py: Python<'_>, error: PyErr) -> PyErr {
    let status = error.value(py).getattr("status").ok().and_then(|status| status.extract::<String>().ok());
    let note = if status.as_deref() == Some(Status::NotShareable.name()) {
        "while pickling a cai.Array: it pickles to a CUDA IPC descriptor (cai.ipc_export), so only device memory from cuMemAlloc pickles; send host memory as a numpy array (numpy.from_dlpack(a))"
    } else {
        "while pickling a cai.Array: it pickles to a CUDA IPC descriptor (cai.ipc_export)"
    };
    with_note(py, error, note)
}

/// `error` with `note` added (`BaseException.add_note`, CPython 3.11 and later; as it is before).
fn with_note(py: Python<'_>, error: PyErr, note: &str) -> PyErr {
    if error.value(py).hasattr(intern!(py, "add_note")).unwrap_or(false) {
        let _ = error.value(py).call_method1(intern!(py, "add_note"), (note,));
    }
    error
}

/// `descriptor` (bytes or a bytearray of exactly a descriptor's size) opened with `options`.
fn open_bytes<'py>(
    descriptor: &Bound<'py, PyAny>,
    options: &CaiImportOptions,
) -> PyResult<Bound<'py, PyAny>> {
    let py = descriptor.py();
    if !descriptor.is_instance_of::<PyBytes>() && !descriptor.is_instance_of::<PyByteArray>() {
        return Err(PyTypeError::new_err(format!(
            "descriptor must be the bytes cai.ipc_export returned, not a '{}'",
            TypeOf::new(descriptor)
        )));
    }
    let bytes: PyBackedBytes = descriptor.extract()?;
    let Ok(sent) = <&[u8; CAI_IPC_DESCRIPTOR_SIZE]>::try_from(&*bytes) else {
        return Err(Failure::Cai(Error::new(
            Status::IpcDescriptor,
            format!(
                "descriptor is {} bytes; a CaiIpcDescriptor is {CAI_IPC_DESCRIPTOR_SIZE}: pass the bytes cai.ipc_export returned, whole and unchanged",
                bytes.len()
            ),
        ))
        .into());
    };
    let descriptor = CaiIpcDescriptor::from_bytes(sent);
    let options = *options;
    let opened = py.detach(move || Sendable(ipc::open(&descriptor, &options).map(Sendable))).0;
    let array = opened.map_err(Failure::Cai)?.0;
    // The cai.Array owns the opened struct from here on: its release closes the handle.
    Ok(ArrayObject::of_read(py, Read::borrowing(Pooled::copy_of(&array), None, None, None), None)?.into_any())
}

/// A value carried across `py.detach`: the opened struct and its outcome.
struct Sendable<T>(T);
// SAFETY: the struct's pointers (its shape and strides are inline; its owner the core's) are
// handed from the thread that ran the open back to the same thread, which owns them after.
unsafe impl<T> Send for Sendable<T> {}
