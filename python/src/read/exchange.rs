//! The reader of a producer whose type offers DLPack's C exchange table: the tensor taken with
//! no Python call, and the producer's work stream asked for when a sync is wanted.

use cai::binding::dlpack::{
    check_dltensor, check_versioned, discard, write_dltensor, write_versioned, AllowHost, CheckedDlTensor,
    SubByte, RELEASE_VERSIONED,
};
use cai::binding::import::ProducerOrdering;
use cai::binding::rules::Validated;
use cai::{
    CaiArray, CaiDLDevice, CaiDLManagedTensorVersioned, CaiDLTensor, CAI_DLPACK_MAJOR_VERSION, CAI_DL_CPU,
    CAI_STREAM_LEGACY, CAI_STREAM_NONE,
};
use pyo3::exceptions::PyTypeError;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyInt, PyType};

use crate::classes;
use crate::cpython::fastcall::with_thread_attached;
use crate::cpython::{self, c_void};
use crate::dlpack::{Taken, TakenTensor};
use crate::errors::CaiResult;
use crate::exchange_api::{
    CurrentWorkStream, DlTensorFromPyObject, ExchangeApi, ExchangeApiHeader, FromPyObject, EXCHANGE_API,
};
use crate::import::{cannot_borrow, owned, taken_from, written, Hold, Outcome, Request};
use crate::values::TypeOf;

/// The two functions libcai calls from a producer type's exchange table.
#[derive(Clone, Copy)]
pub struct Exchange {
    from_py_object: FromPyObject,
    current_work_stream: CurrentWorkStream,
    /// The non-owning DLTensor call, for borrowed views (`cai_python_view`), where offered.
    pub dltensor_from_py_object: Option<DlTensorFromPyObject>,
}

// SAFETY: function pointers into a producer's library, which stays loaded with its type.
unsafe impl Send for Exchange {}

/// Exchange table headers followed at most: DLPack has one major version so far, so a longer
/// chain is a broken (or cyclic) table.
const EXCHANGE_CHAIN_LIMIT: usize = 16;

pub fn lookup_exchange_api(ty: &Bound<'_, PyType>) -> PyResult<Option<Exchange>> {
    let py = ty.py();
    let mut table: *const ExchangeApi = std::ptr::null();
    if let Ok(capsule) = ty.getattr(intern!(py, "__dlpack_c_exchange_api__")) {
        // SAFETY: attached (a Bound exists) with a live object; the name is checked first.
        if let Some(pointer) = unsafe { cpython::capsule_pointer(capsule.as_ptr(), EXCHANGE_API) } {
            table = pointer.as_ptr().cast();
        }
    } else if let Ok(address) = ty.getattr(intern!(py, "__c_dlpack_exchange_api__")) {
        if !address.is_exact_instance_of::<PyInt>() {
            return Err(PyTypeError::new_err(format!(
                "{}.__c_dlpack_exchange_api__ must be an int (the table's address), not {}",
                classes::name(ty),
                TypeOf::new(&address)
            )));
        }
        table = address.extract::<usize>()? as *const ExchangeApi;
    }
    let mut header: *const ExchangeApiHeader = table.cast();
    for _ in 0..EXCHANGE_CHAIN_LIMIT {
        // SAFETY: the producer publishes a table that lives as long as its type; each header
        // points to the previous version's table or is NULL.
        let Some(current) = (unsafe { header.as_ref() }) else { return Ok(None) };
        if current.version.major == CAI_DLPACK_MAJOR_VERSION {
            // SAFETY: a table of major version 1 has DLPackExchangeAPI's layout.
            let api = unsafe { &*header.cast::<ExchangeApi>() };
            return Ok(api.managed_tensor_from_py_object_no_sync.zip(api.current_work_stream).map(
                |(from_py_object, current_work_stream)| Exchange {
                    from_py_object,
                    current_work_stream,
                    dltensor_from_py_object: api.dltensor_from_py_object_no_sync,
                },
            ));
        }
        header = current.prev_version_api;
    }
    Err(PyTypeError::new_err(format!(
        "{}'s DLPack exchange table chains more than {EXCHANGE_CHAIN_LIMIT} versions through prev_version_api (a cycle?)",
        classes::name(ty)
    )))
}

/// Takes the tensor of `obj` through its type's exchange table into a pooled struct that owns
/// it (its release runs the tensor's deleter). When the consumer wants a sync, the array's
/// stream is the producer's current work stream on the tensor's device, so that the import
/// orders the consumer after it (the table's calls do no sync).
pub fn take_by_exchange(
    obj: &Bound<'_, PyAny>,
    exchange: Exchange,
    ordering: ProducerOrdering,
    host: AllowHost,
) -> CaiResult<TakenTensor> {
    let tensor = own_by_exchange(obj, exchange, ordering, host)?;
    let (device, validated) = (tensor.device(), tensor.validated());
    let mut taken = Taken::new();
    // The struct of an Array, released by an attached thread only (see array/mod.rs's `Kept`), as
    // any deleter may want.
    tensor.write(RELEASE_VERSIONED, taken.array());
    Ok(TakenTensor { taken, device, validated })
}

/// The managed tensor the table's call gives for `obj`, handed over to the caller.
fn managed_tensor(obj: &Bound<'_, PyAny>, exchange: Exchange) -> CaiResult<*mut CaiDLManagedTensorVersioned> {
    let mut tensor: *mut CaiDLManagedTensorVersioned = std::ptr::null_mut();
    // SAFETY: the producer's function, given the object it was looked up for.
    if unsafe { (exchange.from_py_object)(obj.as_ptr().cast(), &mut tensor) } != 0 || tensor.is_null() {
        return Err(PyErr::take(obj.py())
            .unwrap_or_else(|| PyTypeError::new_err("the DLPack exchange table gave no tensor"))
            .into());
    }
    Ok(tensor)
}

/// `obj`'s managed tensor as the table gives it, every rule checked (`check_versioned`), and
/// the stream the import orders the consumer after: what an owning import writes, once nothing
/// can fail (`write`). Deleted when dropped unwritten.
pub struct ExchangeTensor {
    tensor: *mut CaiDLManagedTensorVersioned,
    checked: CheckedDlTensor,
    stream: u64,
}

impl ExchangeTensor {
    /// The tensor's device.
    pub fn device(&self) -> CaiDLDevice {
        // SAFETY: the tensor is held until written or dropped.
        unsafe { (*self.tensor).dl_tensor.device }
    }

    /// What validating the array found.
    pub fn validated(&self) -> Validated {
        self.checked.validated
    }

    /// The array's stream (CAI's None where no sync is wanted or the memory is the host's).
    pub fn stream(&self) -> u64 {
        self.stream
    }

    /// Writes the array into `array` (every field, the extents of its rank), which owns the
    /// tensor from then on: `release` runs its deleter once.
    pub fn write(self, release: unsafe extern "C" fn(*mut CaiArray), array: &mut CaiArray) {
        let this = std::mem::ManuallyDrop::new(self);
        // SAFETY: the tensor checked, handed over to `array` (not deleted here: ManuallyDrop).
        unsafe { write_versioned(this.tensor, &this.checked, release, array) };
        array.stream = this.stream;
    }
}

/// The release of a struct that owns a managed tensor an exchange table gave
/// (`ExchangeTensor::write`): runs the tensor's deleter attached to the interpreter, on
/// whatever thread the consumer releases it (a deleter that needs the interpreter then has
/// it). Once the interpreter is finalizing nothing may attach, so the tensor is then leaked on
/// purpose.
pub unsafe extern "C" fn release_exchange_tensor(array: *mut CaiArray) {
    // SAFETY: `owner` is the managed tensor the import handed over; cai_release runs this once.
    let tensor = unsafe { (*array).owner.cast::<CaiDLManagedTensorVersioned>() };
    // SAFETY: the tensor the producer handed over, deleted once, here.
    with_thread_attached(|_| unsafe { discard(tensor) });
}

impl Drop for ExchangeTensor {
    fn drop(&mut self) {
        // SAFETY: the tensor the producer handed over, unwritten: deleted once, here.
        unsafe { discard(self.tensor) };
    }
}

/// Takes `obj`'s managed tensor through the table's call, checking every rule before anything
/// is written (see `ExchangeTensor`); a refused tensor is deleted at once.
pub fn own_by_exchange(
    obj: &Bound<'_, PyAny>,
    exchange: Exchange,
    ordering: ProducerOrdering,
    host: AllowHost,
) -> CaiResult<ExchangeTensor> {
    let tensor = managed_tensor(obj, exchange)?;
    // SAFETY: a tensor the producer handed over, valid until its deleter runs.
    let checked = match unsafe { check_versioned(&*tensor, host) } {
        Ok(checked) => checked,
        Err(refused) => {
            // SAFETY: handed over, and refused: deleted once, here.
            unsafe { discard(tensor) };
            return Err(refused.into());
        }
    };
    let mut taken = ExchangeTensor { tensor, checked, stream: CAI_STREAM_NONE };
    // SAFETY: the tensor held by `taken` (which deletes it should the stream be refused).
    let device = unsafe { (*tensor).dl_tensor.device };
    taken.stream = work_stream(obj.py(), exchange, ordering, device)?.unwrap_or(CAI_STREAM_NONE);
    Ok(taken)
}

/// The producer's current work stream on `device`, for the import to order the consumer after
/// (the table's calls do no sync); None when no sync is wanted or the memory is the host's.
fn work_stream(
    py: Python<'_>,
    exchange: Exchange,
    ordering: ProducerOrdering,
    device: CaiDLDevice,
) -> PyResult<Option<u64>> {
    if ordering == ProducerOrdering::NotWanted || device.device_type == CAI_DL_CPU {
        return Ok(None);
    }
    let mut stream: *mut c_void = std::ptr::null_mut();
    // SAFETY: the producer's function, for the tensor's device.
    if unsafe { (exchange.current_work_stream)(device.device_type, device.device_id, &mut stream) } != 0 {
        return Err(PyErr::take(py)
            .unwrap_or_else(|| PyTypeError::new_err("the DLPack exchange table gave no work stream")));
    }
    // The NULL stream is the legacy default stream (CAI's 1), never "no sync" (0).
    Ok(Some(if stream.is_null() { CAI_STREAM_LEGACY } else { stream as u64 }))
}

/// `obj`'s tensor as the table's non-owning DLTensor call gives it, every rule checked
/// (`check_dltensor`), and the stream the import orders the consumer after: what a borrowed
/// view writes, once nothing can fail. Nothing taken, nothing to release; valid while the
/// caller holds `obj` and runs no Python code (none runs in the read).
pub struct ExchangeView {
    tensor: CaiDLTensor,
    checked: CheckedDlTensor,
    stream: u64,
}

impl ExchangeView {
    /// The tensor's device.
    pub fn device(&self) -> CaiDLDevice {
        self.tensor.device
    }

    /// What validating the array found.
    pub fn validated(&self) -> Validated {
        self.checked.validated
    }

    /// The array's stream (CAI's None where no sync is wanted or the memory is the host's).
    pub fn stream(&self) -> u64 {
        self.stream
    }

    /// Writes the array into `array` (every field, the extents of its rank). Not read-only:
    /// the table's DLTensor has no flags.
    pub fn write(&self, array: &mut CaiArray) {
        // SAFETY: the tensor checked, its shape and strides the producer's, valid while the
        // caller holds `obj` and runs no Python code (the type's contract).
        unsafe { write_dltensor(&self.tensor, &self.checked, false, array) };
        array.stream = self.stream;
    }
}

/// Reads `obj`'s tensor through the table's non-owning DLTensor call, checking every rule
/// before anything is written (see `ExchangeView`).
pub fn view_by_exchange(
    obj: &Bound<'_, PyAny>,
    exchange: Exchange,
    dltensor_from_py_object: DlTensorFromPyObject,
    ordering: ProducerOrdering,
    host: AllowHost,
) -> CaiResult<ExchangeView> {
    // SAFETY: a DLTensor of integers and pointers, for which all zeros is a valid value.
    let mut tensor = unsafe { std::mem::zeroed::<CaiDLTensor>() };
    // SAFETY: the producer's function, given the object it was looked up for, and a DLTensor
    // to write.
    if unsafe { dltensor_from_py_object(obj.as_ptr().cast(), &mut tensor) } != 0 {
        return Err(PyErr::take(obj.py())
            .unwrap_or_else(|| PyTypeError::new_err("the DLPack exchange table gave no DLTensor"))
            .into());
    }
    // SAFETY: the producer's view of `obj`, valid while the caller holds it and runs no Python
    // code (none runs in the read).
    let checked = unsafe { check_dltensor(&tensor, SubByte::Packed, host) }?;
    let stream = work_stream(obj.py(), exchange, ordering, tensor.device)?.unwrap_or(CAI_STREAM_NONE);
    Ok(ExchangeView { tensor, checked, stream })
}

/// The type's DLPack exchange table: the managed tensor it gives, every rule checked before
/// anything is written; an owning struct owns the tensor as the table gave it (imported in
/// place, as any DLPack consumer holds it: `release_exchange_tensor` runs its deleter), a
/// borrowed one takes the table's non-owning DLTensor (refused where the table has none).
pub fn import_by_exchange(
    obj: &Bound<'_, PyAny>,
    exchange: Exchange,
    request: &Request,
    hold: &mut Hold<'_>,
) -> CaiResult<Outcome> {
    let py = obj.py();
    let (host, ordering, options) = (request.host, request.ordering, *request.options);
    match hold {
        Hold::Own(to_own) => {
            owned(obj, taken_from(obj, take_by_exchange(obj, exchange, ordering, host)?), request, to_own)
        }
        Hold::OwnInto(out, _) => {
            let tensor = own_by_exchange(obj, exchange, ordering, host)?;
            let (named, validated, stream) = (Some(tensor.device()), tensor.validated(), tensor.stream());
            let write = |array: &mut CaiArray| tensor.write(release_exchange_tensor, array);
            written(py, write, validated, named, stream, options, out)?;
            Ok(Outcome::Written)
        }
        Hold::Borrow(out) | Hold::BorrowOrOwn(out, _) => {
            let Some(dltensor) = exchange.dltensor_from_py_object else {
                return Err(cannot_borrow(
                    "a tensor of a DLPack exchange table without dltensor_from_py_object_no_sync",
                ));
            };
            let view = view_by_exchange(obj, exchange, dltensor, ordering, host)?;
            let write = |array: &mut CaiArray| view.write(array);
            written(py, write, view.validated(), Some(view.device()), view.stream(), options, out)?;
            Ok(Outcome::Written)
        }
    }
}
