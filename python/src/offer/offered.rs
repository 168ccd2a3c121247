//! A type offered by `cai_python_offer`: its record (the C-level CAI table, followed by the
//! author's fill function), the one description routine every protocol of the type reads
//! through, and the table's `view` and `acquire` (docs/c-level-cai.md sections 3 and 6). Why
//! its `unsafe` is sound is the "C tables" part of cpython/mod.rs's audit.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicPtr, Ordering};
use std::sync::Mutex;

use cai::binding::dlpack::{AllowHost, Keeper, KeptObject};
use cai::binding::rules::{validate, Validated};
use cai::{
    CaiArray, CaiDLDataType, CaiDLDevice, CaiError, CaiStatus, Error, Status, CAI_DL_CPU, CAI_DL_CUDA,
    CAI_MEMORY_CUDA, CAI_OK,
};
// The C API table's layout (include/cai_python.h), not CPython's.
use c_api::{
    CaiCApi, CaiCApiHeader, CaiCApiVersion, CaiPythonFill, CaiRequest, CAI_C_API_MAJOR, CAI_C_API_MINOR,
    CAI_REQUEST_ALLOW_HOST, CAI_REQUEST_MUST_UNDERSTAND,
};
use cai_python::ffi as c_api;
use pyo3::prelude::*;

use crate::array::object::ArrayObject;
use crate::c_api_rules::memory_other_than_cuda;
use crate::cpython::fastcall::{hold_reference, let_go_of_reference};
use crate::cpython::{self, c_void, PyObject, PyTypeObject};
use crate::described::Read;
use crate::dlpack::{device_of_array, tensor_of};
use crate::errors::{CaiResult, Failure};
use crate::pool::{with_fill_error, Pooled};

/// One offered type: the table first, so that the `api` a consumer passes back is the
/// record's address.
#[repr(C)]
pub struct Offered {
    api: CaiCApi,
    fill: CaiPythonFill,
    /// The offered type (a strong reference, never let go of).
    type_object: *mut PyTypeObject,
    /// The type's name, for messages.
    pub name: String,
}

/// Every record, in the order its type was offered: DLPack's exchange table is called with the
/// object alone, and finds the record of the object's type here (`Offered::of_object`). Read
/// without a lock, by one acquire load (`records`), since every export of an offered type reads
/// it, and an uncontended lock's two locked instructions cost about 10 ns a read on the
/// benchmark machine: an offer publishes a new list, the last one and its record, under
/// `OFFERING`, and leaks the last one, which a reader may still be walking (a few words per
/// offered type, once per offer).
static RECORDS: AtomicPtr<Vec<&'static Offered>> = AtomicPtr::new(std::ptr::null_mut());
static OFFERING: Mutex<()> = Mutex::new(());

/// The records published so far.
fn records() -> &'static [&'static Offered] {
    let list = RECORDS.load(Ordering::Acquire);
    // SAFETY: NULL, or a list `publish` leaked, never written or freed after it was stored.
    unsafe { list.as_ref() }.map_or(&[], |list| list.as_slice())
}

/// Publishes a list of the records so far and `record`.
fn publish(record: &'static Offered) {
    let _offering = OFFERING.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let mut list = records().to_vec();
    list.push(record);
    RECORDS.store(Box::into_raw(Box::new(list)), Ordering::Release);
}

// SAFETY: never written after it is made; the type pointer is only compared and passed to
// PyObject_TypeCheck by threads attached to the interpreter.
unsafe impl Sync for Offered {}
// SAFETY: as for Sync.
unsafe impl Send for Offered {}

/// What a description failed with.
pub enum Refusal {
    /// libcai's or the fill's own refusal, with a message naming the type and the field.
    Cai(Error),
    /// The fill (or a Python API call) raised: the exception is set.
    Python,
}

/// What the fill described, validated.
pub struct Described {
    /// CUDA with ordinal -1 when the fill left it: the device is found from the pointer.
    pub device: CaiDLDevice,
    pub validated: Validated,
}

impl Described {
    /// The device, when the fill said it (host memory, or a CUDA ordinal).
    pub fn known_device(&self) -> Option<CaiDLDevice> {
        (self.device.device_type != CAI_DL_CUDA || self.device.device_id >= 0).then_some(self.device)
    }
}

impl Offered {
    /// A new record for `type_object`, leaked (see cpython/mod.rs's audit, "C tables"). The caller holds a
    /// reference to the type, and this takes one more.
    ///
    /// # Safety
    /// `type_object` is a live type; the caller is attached to the interpreter.
    pub unsafe fn leak(
        type_object: *mut PyTypeObject,
        fill: CaiPythonFill,
        name: String,
    ) -> &'static Offered {
        // SAFETY: a live type (the caller's contract), referenced for ever from here on.
        unsafe { cpython::incref(type_object.cast()) };
        let record: &'static Offered = Box::leak(Box::new(Offered {
            api: CaiCApi {
                header: CaiCApiHeader {
                    version: CaiCApiVersion { major: CAI_C_API_MAJOR, minor: CAI_C_API_MINOR },
                    prev_api: std::ptr::null(),
                },
                view: Some(view),
                acquire: Some(acquire),
                current_stream: None,
            },
            fill,
            type_object,
            name,
        }));
        publish(record);
        record
    }

    /// The record of `obj`'s type: its own offer, else that of the nearest offered class in its
    /// MRO. Found without an attribute lookup, so a subclass that hides an inherited table
    /// (`__cuda_array_interface_c_api__ = None`) is still served by the tables it keeps.
    ///
    /// # Safety
    /// The caller is attached to the interpreter and holds `obj`, a live object.
    pub unsafe fn of_object(obj: *mut PyObject) -> Option<&'static Offered> {
        let records = records();
        // SAFETY: a live object (the caller's contract).
        let own_type = unsafe { cpython::type_of(obj) };
        if let Some(record) = records.iter().find(|r| r.type_object == own_type) {
            return Some(record);
        }
        let mut nearest: Option<&'static Offered> = None;
        for &record in records.iter() {
            // SAFETY: a live object and live types (records reference theirs for ever).
            let instance = unsafe { cpython::type_check(obj, record.type_object) };
            // SAFETY: as above; a type nearer in the MRO is a subtype of one farther.
            let nearer =
                nearest.is_none_or(|n| unsafe { cpython::is_subtype(record.type_object, n.type_object) });
            if instance && nearer {
                nearest = Some(record);
            }
        }
        nearest
    }

    /// The table, as a capsule publishes it.
    pub fn api(&'static self) -> &'static CaiCApi {
        &self.api
    }

    /// The record behind `api`, when `api` is a table this module made (any other table is
    /// a producer's own).
    pub fn of(api: *const CaiCApi) -> Option<&'static Offered> {
        // SAFETY: `api` is a live table (a consumer found it in a capsule); its `view` is read,
        // and only a table whose `view` is this module's is a record's first field. (Another
        // library's function cannot share this address; were this one's address to differ
        // between codegen units, a record would be taken for a foreign table and read by its
        // `acquire`, which is correct too.)
        let view_of_api = unsafe { (*api).view };
        let ours = view_of_api.is_some_and(|f| std::ptr::fn_addr_eq(f, view as c_api::CaiCApiDescribe));
        // SAFETY: checked: `api` is the first field of a leaked, never-freed record.
        ours.then(|| unsafe { &*api.cast::<Offered>() })
    }

    /// Describes `obj` into `out` through the author's fill, validated: the constant fields and
    /// defaults first, then the fill, then every rule of the spec. `out` is unspecified on
    /// failure. `allow_host`: whether a host array is described (else CAI_ERROR_HOST_MEMORY).
    ///
    /// # Safety
    /// The caller is attached to the interpreter and holds `obj`, a live object.
    pub unsafe fn describe(
        &self,
        obj: *mut PyObject,
        allow_host: bool,
        out: &mut CaiArray,
    ) -> Result<Described, Refusal> {
        // SAFETY: a live object and a live type (the caller's contract; the record's own).
        if !unsafe { cpython::type_check(obj, self.type_object) } {
            return Err(Refusal::Cai(Error::new(
                Status::InvalidArgument,
                format!("obj is not a '{}' (nor of a subclass): the table describes only those", self.name),
            )));
        }
        write_defaults(out);
        let mut device = CaiDLDevice { device_type: CAI_DL_CUDA, device_id: -1 };
        // SAFETY: the caller's contract (attached, a live `obj`); `out` and `device` writable.
        let filled = unsafe { self.call_fill(obj, out, &mut device) };
        // SAFETY: attached (the caller's contract); a query of this thread's exception state.
        let raised = cpython::error_is_set(unsafe { Python::assume_attached() });
        if raised {
            return Err(Refusal::Python);
        }
        if let Err(error) = filled {
            if error.status != Status::Python {
                return Err(Refusal::Cai(error));
            }
            let message = format!(
                "the fill function of '{}' returned CAI_ERROR_PYTHON without an exception set",
                self.name
            );
            set_system_error(&message);
            return Err(Refusal::Python);
        }
        if !out.owner.is_null() || out.release.is_some() {
            return Err(self.invalid(
                Status::InvalidArgument,
                "set owner or release; a fill describes a borrowed view (the glue owns what acquire hands out)",
            ));
        }
        let validated = validate(out).map_err(|e| Refusal::Cai(self.wrote_invalid(e)))?;
        // SAFETY: validated: a readable mask chain (the fill's contract) of bounded depth.
        if let Some(memory) = unsafe { memory_other_than_cuda(out) } {
            return Err(self.invalid(
                Status::InvalidArgument,
                &format!(
                    "set memory {memory} (of the array or a mask); a fill describes CUDA memory \
                     (CAI_MEMORY_CUDA, as preset) or, with device kDLCPU, host memory: the C-level \
                     table's 1.0 carries no other kind"
                ),
            ));
        }
        match (device.device_type, device.device_id) {
            (CAI_DL_CUDA, -1..) => {}
            (CAI_DL_CUDA, id) => {
                return Err(self.invalid(
                    Status::InvalidArgument,
                    &format!("set device (kDLCUDA, {id}); a CUDA ordinal is 0 or more, or -1 (as preset) to find it from the pointer"),
                ))
            }
            (CAI_DL_CPU, id) if id != 0 => {
                return Err(self.invalid(
                    Status::InvalidArgument,
                    &format!("set device (kDLCPU, {id}); host memory is device (kDLCPU, 0), as DLPack says"),
                ))
            }
            (CAI_DL_CPU, _) if allow_host => {}
            (CAI_DL_CPU, _) => {
                return Err(Refusal::Cai(Error::new(
                    Status::HostMemory,
                    format!(
                    "the '{}' is host memory (its fill set device kDLCPU), and host memory was not allowed",
                    self.name
                ),
                )))
            }
            (other, _) => {
                return Err(self.invalid(
                    Status::InvalidArgument,
                    &format!("set device type {other}; a fill sets CAI_DL_CUDA (2) or CAI_DL_CPU (1)"),
                ))
            }
        }
        Ok(Described { device, validated })
    }

    /// `describe` of a Python object, its refusals as failures: a host array refused in the
    /// caller's terms (`host.how`).
    pub fn describe_object(
        &self,
        obj: &Bound<'_, PyAny>,
        host: AllowHost,
        out: &mut CaiArray,
    ) -> CaiResult<Described> {
        // SAFETY: attached (a Bound exists), `obj` held by the caller.
        match unsafe { self.describe(obj.as_ptr(), host.allowed, out) } {
            Ok(described) => Ok(described),
            Err(Refusal::Python) => Err(Failure::Python(PyErr::fetch(obj.py()))),
            Err(Refusal::Cai(mut error)) => {
                if error.status == Status::HostMemory {
                    error.message = format!("{}: {}", error.message, host.how);
                }
                Err(Failure::Cai(error))
            }
        }
    }

    /// A new cai.Array of `obj`'s description, keeping `obj` alive: what the type's Python
    /// protocols (`__cuda_array_interface__`, `__dlpack__`, the exchange table) export.
    pub fn array_of<'py>(&self, obj: &Bound<'py, PyAny>) -> CaiResult<ArrayObject<'py>> {
        let mut array = Pooled::cleared();
        let host = AllowHost::ALLOWED;
        let described = self.describe_object(obj, host, &mut array)?;
        let read = Read::borrowing(
            array,
            described.known_device(),
            Some(obj.clone().unbind()),
            Some(described.validated),
        );
        Ok(ArrayObject::of_read(obj.py(), read, None)?)
    }

    /// A DLPack tensor of `obj`'s description (`array`, as `describe_object` wrote it, and
    /// what it found), owning a reference to `obj` until the tensor's deleter runs; the
    /// consumer's stream (if any) ordered after the producer's. The struct goes straight from
    /// the description to the tensor, never copied whole, and the tensor keeps the object, not
    /// the array (its deleter has no array to rebuild); on failure nothing is held.
    pub fn export_described(
        obj: &Bound<'_, PyAny>,
        array: &mut CaiArray,
        described: &Described,
        device: CaiDLDevice,
        consumer: Option<u64>,
        versioned: bool,
    ) -> CaiResult<*mut c_void> {
        let keeper = Keeper::Object(KeptObject { object: obj.as_ptr().cast(), let_go: let_go_of_reference });
        let tensor = tensor_of(array, Some(&described.validated), device, consumer, versioned, keeper)?;
        // SAFETY: attached (a Bound exists); `obj` is live. The reference the tensor keeps,
        // taken once it exists: its deleter lets go of it once.
        unsafe { cpython::incref(obj.as_ptr()) };
        Ok(tensor)
    }

    /// The DLPack device of what `describe` wrote: the fill's word, else asked of the driver.
    pub fn device_of(described: &Described, array: &CaiArray) -> CaiResult<CaiDLDevice> {
        device_of_array(array, described.known_device())
    }

    /// Calls the author's fill; on a status other than CAI_OK, the error its `CaiError` says.
    /// The CaiError is this thread's (`with_fill_error`), not one zeroed per call.
    ///
    /// # Safety
    /// As `describe`'s.
    unsafe fn call_fill(
        &self,
        obj: *mut PyObject,
        out: &mut CaiArray,
        device: &mut CaiDLDevice,
    ) -> Result<(), Error> {
        // SAFETY: the author's function, called as cai_python.h's CaiPythonFill says: attached,
        // a live `self`, writable out-parameters.
        with_fill_error(
            |error| unsafe { (self.fill)(obj, out, device, error) },
            |status, error| self.fill_refused(status, error),
        )
    }

    /// The fill's own refusal, its message prefixed with the type (or made, when it wrote none).
    #[cold]
    fn fill_refused(&self, status: CaiStatus, error: &CaiError) -> Error {
        let status = Status::from_code(status).unwrap_or(Status::InvalidArgument);
        let written = error.message_str();
        let message = if written.is_empty() {
            format!("the fill function of '{}' returned {} without a message", self.name, status.name())
        } else {
            format!("'{}': {written}", self.name)
        };
        Error { status, driver_result: error.driver_result, message }
    }

    fn invalid(&self, status: Status, what: &str) -> Refusal {
        Refusal::Cai(Error::new(status, format!("the fill function of '{}' {what}", self.name)))
    }

    fn wrote_invalid(&self, error: Error) -> Error {
        Error {
            message: format!(
                "the fill function of '{}' described an invalid array: {}",
                self.name, error.message
            ),
            ..error
        }
    }
}

/// What the glue writes before the fill: a 0-d, writable, C-contiguous "|u1" CUDA array at data
/// 0, no mask, no descr, no pending work. Shape and strides beyond ndim, and the typestr's
/// bytes after its NUL, are left as they are (never read).
fn write_defaults(out: &mut CaiArray) {
    out.abi_version = 0;
    out.version = 3;
    out.owner = std::ptr::null_mut();
    out.release = None;
    out.ndim = 0;
    out.readonly = 0;
    out.strides_given = 0;
    out.descr_count = 0;
    out.data = 0;
    out.stream = 0;
    out.typestr[..4].copy_from_slice(&[b'|' as _, b'u' as _, b'1' as _, 0]);
    out.mask = std::ptr::null();
    out.descr = std::ptr::null();
    out.memory = CAI_MEMORY_CUDA;
    out.stream_kind = 0;
    out.byte_offset = 0;
    out.dl_dtype = CaiDLDataType::absent();
    out.reserved_half = 0;
    out.reserved = Default::default();
}

/// Raises SystemError with `message`.
fn set_system_error(message: &str) {
    // SAFETY: attached (the callers' contract).
    unsafe { cpython::set_error(cpython::Exception::System, message) };
}

/// Whether a request asks for something this table does not understand, and host memory is
/// allowed.
fn read_request(request: *const CaiRequest) -> Result<bool, Refusal> {
    // SAFETY: NULL (all zero) or the consumer's request.
    let request = unsafe { request.as_ref() }.copied().unwrap_or_default();
    let unknown = request.flags & CAI_REQUEST_MUST_UNDERSTAND & !CAI_REQUEST_ALLOW_HOST;
    if unknown != 0 {
        return Err(Refusal::Cai(Error::new(
            Status::NotSupported,
            format!("request flags {unknown:#x} are not understood by this table (version 1.0)"),
        )));
    }
    Ok(request.flags & CAI_REQUEST_ALLOW_HOST != 0)
}

/// The status of a refusal, its error written (a Python exception stays set).
fn report(refusal: Refusal, error: *mut CaiError) -> CaiStatus {
    let written = match refusal {
        Refusal::Cai(e) => e,
        Refusal::Python => Error::new(Status::Python, "a Python exception is set"),
    };
    cai::binding::write_error(error, &written);
    written.status.code()
}

/// The table's body: the record, the request, the description; a panic is CAI_ERROR_PANIC.
fn table_entry(
    api: *const CaiCApi,
    obj: *mut PyObject,
    request: *const CaiRequest,
    out: *mut CaiArray,
    error: *mut CaiError,
    owning: bool,
) -> CaiStatus {
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        if api.is_null() || obj.is_null() || out.is_null() {
            let which = if api.is_null() {
                "api"
            } else if obj.is_null() {
                "obj"
            } else {
                "out"
            };
            return Err(Refusal::Cai(Error::new(Status::NullArgument, format!("{which} is NULL"))));
        }
        let Some(record) = Offered::of(api) else {
            return Err(Refusal::Cai(Error::new(Status::InvalidArgument, "api is not a table libcai made")));
        };
        let allow_host = read_request(request)?;
        // SAFETY: checked non-NULL; the consumer's writable struct.
        let out = unsafe { &mut *out };
        // SAFETY: the table's contract: attached, `obj` held.
        unsafe { record.describe(obj, allow_host, out) }?;
        if owning {
            // SAFETY: attached (the table's contract); `obj` is live.
            unsafe { hold_reference(out, obj) };
        }
        Ok(())
    }));
    match outcome {
        Ok(Ok(())) => CAI_OK,
        Ok(Err(refusal)) => report(refusal, error),
        Err(_) => report(
            Refusal::Cai(Error::new(
                Status::Panic,
                "libcai panicked in an offered type's table (a bug; please report it)",
            )),
            error,
        ),
    }
}

/// The table's `view`: the fill's description, borrowed (nothing to release).
unsafe extern "C" fn view(
    api: *const CaiCApi,
    obj: *mut PyObject,
    request: *const CaiRequest,
    out: *mut CaiArray,
    error: *mut CaiError,
) -> CaiStatus {
    table_entry(api, obj, request, out, error, false)
}

/// The table's `acquire`: the description, owning a reference to `obj` until its release.
unsafe extern "C" fn acquire(
    api: *const CaiCApi,
    obj: *mut PyObject,
    request: *const CaiRequest,
    out: *mut CaiArray,
    error: *mut CaiError,
) -> CaiStatus {
    table_entry(api, obj, request, out, error, true)
}
