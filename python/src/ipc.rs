//! Arrays across processes from Python: `cai.ipc_export(obj, stream=None)` (the bytes of the
//! core's `CaiIpcDescriptor`) and `cai.ipc_open(descriptor, stream=None, sync=None)` (an owning
//! cai.Array whose release closes the IPC handle).
//!
//! PyO3's safe API only: the core does every driver call and every rule of the descriptor.

use cai::binding::ipc;
use cai::{
    CaiImportOptions, CaiIpcDescriptor, Error, Status, CAI_IPC_DESCRIPTOR_SIZE, CAI_POINTER_CHECK_DEFAULT,
    CAI_SYNC_DEFAULT,
};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::pybacked::PyBackedBytes;
use pyo3::types::{PyByteArray, PyBytes};

use crate::array_object::ArrayObject;
use crate::described::Read;
use crate::errors::Failure;
use crate::negotiate::{import_object, Caller};
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
    let (read, _imported) = import_object(obj, &options, Caller::Python)?;
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
