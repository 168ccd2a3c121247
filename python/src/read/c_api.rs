//! The C-level CAI table as a consumer reads it (docs/c-level-cai.md sections 1, 6 and 11):
//! found once per type along the MRO, checked by capsule name and major version, and called
//! per object into a struct the caller owns.

use cai::binding::rules::{validate, Validated};
use cai::{CaiArray, CaiError, CaiImportOptions, Error, Status, CAI_OK};
// The C API table's layout (include/cai_python.h), not CPython's.
use c_api::{
    CaiCApi, CaiCApiHeader, CaiRequest, CAI_C_API_ATTRIBUTE, CAI_C_API_CAPSULE_NAME, CAI_C_API_MAJOR,
    CAI_REQUEST_ALLOW_HOST,
};
use cai_python::ffi as c_api;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyString, PyType};

use crate::c_api_rules::memory_other_than_cuda;
use crate::classes;
use crate::cpython;
use crate::described::Read;
use crate::errors::{CaiResult, Failure};
use crate::import::{import_then_copy, imported_holding_object, owned, Hold, Outcome, Request};
use crate::offer::offered::Offered;
use crate::pool::Pooled;
use crate::values::TypeOf;

/// A type's table of major 1. It lives as long as the type (the proposal's rule), which the
/// negotiation's per-type facts keep alive while they hold this.
#[derive(Clone, Copy)]
pub struct CApi(*const CaiCApi);

// SAFETY: the table is immutable, in storage that outlives the type holding it.
unsafe impl Send for CApi {}
// SAFETY: as for Send.
unsafe impl Sync for CApi {}

impl CApi {
    pub fn table(self) -> *const CaiCApi {
        self.0
    }
}

/// Chains longer than this are taken for a cycle.
const LONGEST_CHAIN: usize = 16;

/// `ty`'s table, if it offers one this consumer reads: the attribute found along the MRO (None
/// there: hidden by a subclass), unless a class nearer in the MRO than the one defining it
/// defines `__cuda_array_interface__` (a subclass that changed the dict), a capsule of the
/// protocol's name, a header chain reaching major 1. A capsule of another name or a chain
/// without major 1 is not offered to this consumer: the object is read by its other protocols.
pub fn lookup_c_api(ty: &Bound<'_, PyType>) -> PyResult<Option<CApi>> {
    let py = ty.py();
    let attribute = PyString::new(py, CAI_C_API_ATTRIBUTE.to_str().unwrap_or_default());
    let Some(capsule) = ty.getattr_opt(&attribute)? else { return Ok(None) };
    if capsule.is_none() || interface_defined_nearer(ty, &attribute)? {
        return Ok(None);
    }
    // NULL with an exception when the type or name differs.
    let mut header = cpython::capsule_pointer_or_error(&capsule, Some(CAI_C_API_CAPSULE_NAME))
        .cast::<CaiCApiHeader>()
        .cast_const();
    if header.is_null() {
        drop(PyErr::take(py));
        return Ok(None);
    }
    for _ in 0..LONGEST_CHAIN {
        if header.is_null() {
            break;
        }
        // SAFETY: a table header in static storage (the protocol's rule), read by value.
        let (major, previous) = unsafe { ((*header).version.major, (*header).prev_api) };
        if major == CAI_C_API_MAJOR {
            return Ok(Some(CApi(header.cast())));
        }
        header = previous;
    }
    Ok(None)
}

/// Whether a class nearer in `ty`'s MRO than the one defining `attribute` (a type-level
/// table) defines `__cuda_array_interface__` itself: a subclass that changed the dict (added a
/// mask, moved the stream), whose instances the inherited table would describe wrongly.
pub fn interface_defined_nearer(ty: &Bound<'_, PyType>, attribute: &Bound<'_, PyString>) -> PyResult<bool> {
    let py = ty.py();
    for class in classes::mro(ty)?.iter() {
        let class = class.cast_into::<PyType>()?;
        if classes::defines(&class, attribute)? {
            return Ok(false);
        }
        if classes::defines(&class, intern!(py, "__cuda_array_interface__"))? {
            return Ok(true);
        }
    }
    Ok(false)
}

/// The request of a libcai consumer: host memory allowed as the options say, and the
/// consumer's stream as the hint.
pub fn request_of(options: &CaiImportOptions) -> CaiRequest {
    CaiRequest {
        flags: if options.allow_host != 0 { CAI_REQUEST_ALLOW_HOST } else { 0 },
        consumer_stream: options.consumer_stream,
        reserved: [0; 2],
    }
}

/// What a table call gave.
pub enum Called {
    /// `out` describes the object (owning, for `acquire`), valid by the rules as validation
    /// found it.
    Described(Validated),
    /// The table refused with CAI_ERROR_NOT_SUPPORTED: read the object by another protocol.
    NotSupported,
}

/// Calls the table's `acquire` (`owning`) or `view` on `obj` into `out`. Its refusals become
/// cai.CaiError with their status and message; CAI_ERROR_PYTHON the exception it set. What it
/// describes is checked here, so that a refusal of it names the table's type (the producer's
/// fault, not the caller's): the table's rules (section 3: a view borrows, an acquire owns;
/// section 5: CUDA memory), then validation; what an acquire handed out is released when
/// refused.
pub fn call_c_api(
    api: CApi,
    owning: bool,
    obj: &Bound<'_, PyAny>,
    request: &CaiRequest,
    out: &mut CaiArray,
) -> CaiResult<Called> {
    let py = obj.py();
    // SAFETY: a live table (see CApi).
    let table = unsafe { &*api.table() };
    let Some(function) = (if owning { table.acquire } else { table.view }) else {
        return Ok(Called::NotSupported);
    };
    let mut error = CaiError { code: 0, driver_result: 0, message: [0; cai::CAI_ERROR_MESSAGE_CAPACITY] };
    // SAFETY: the protocol's call: attached, `obj` held by the caller, `out` and `error`
    // writable for the call.
    let status = unsafe { function(api.table(), obj.as_ptr(), request, out, &mut error) };
    if status == CAI_OK {
        return match described_by_the_rules(out, owning) {
            Ok(validated) => Ok(Called::Described(validated)),
            Err((status, what)) => {
                if owning {
                    // SAFETY: the struct the table's acquire just handed over, touched by
                    // nothing else (a release left NULL is not run).
                    unsafe { cai::binding::release_array(out) };
                }
                Err(refused(obj, status, &what))
            }
        };
    }
    // An exception exists only with CAI_ERROR_PYTHON; one a producer left otherwise is dropped
    // for its status, which is the report.
    let raised = PyErr::take(py);
    let Some(status) = Status::from_code(status) else {
        return Err(refused(obj, Status::InvalidArgument, &format!("returned the unknown status {status}")));
    };
    match status {
        Status::NotSupported => Ok(Called::NotSupported),
        Status::Python => Err(Failure::Python(raised.unwrap_or_else(|| {
            pyo3::exceptions::PySystemError::new_err(format!(
                "the C-level CAI table of '{}' returned CAI_ERROR_PYTHON without an exception set",
                TypeOf::new(obj)
            ))
        }))),
        _ => {
            let message = error.message_str();
            if message.is_empty() {
                Err(refused(obj, status, &format!("returned {} without a message", status.name())))
            } else {
                Err(Failure::Cai(Error { status, driver_result: error.driver_result, message }))
            }
        }
    }
}

/// What a table's `CAI_OK` described, checked: its validation, or the status and what the table
/// did wrong.
fn described_by_the_rules(out: &CaiArray, owning: bool) -> Result<Validated, (Status, String)> {
    match (owning, out.release.is_some()) {
        (false, true) => {
            return Err((
                Status::InvalidArgument,
                "set release in a view; a view is borrowed, its release NULL (docs/c-level-cai.md section 3)"
                    .into(),
            ))
        }
        (true, false) => {
            return Err((
                Status::InvalidArgument,
                "acquired with no release; an acquire hands out a release (docs/c-level-cai.md section 3)"
                    .into(),
            ))
        }
        _ => {}
    }
    // SAFETY: what the table described: its mask chain readable (the protocol's rule).
    if let Some(memory) = unsafe { memory_other_than_cuda(out) } {
        return Err((
            Status::InvalidArgument,
            format!(
                "described memory {memory} (of the array or a mask); the table's 1.0 carries CUDA memory \
                 only, host memory as CUDA's on a CPU device (docs/c-level-cai.md section 5)"
            ),
        ));
    }
    validate(out).map_err(|e| (e.status, format!("described an invalid array: {}", e.message)))
}

fn refused(obj: &Bound<'_, PyAny>, status: Status, what: &str) -> Failure {
    Failure::Cai(Error::new(status, format!("the C-level CAI table of '{}' {what}", TypeOf::new(obj))))
}

/// The type's C-level table. One libcai's glue offered is described by its fill directly,
/// with the device the fill said and its validation: an owning struct holds a reference to
/// `obj` (what the glue's `acquire` holds). Any other table is asked to `acquire` (or, for a
/// borrowed struct, to describe without it); `Outcome::Declined` where it answers
/// CAI_ERROR_NOT_SUPPORTED.
pub fn import_by_c_api(
    obj: &Bound<'_, PyAny>,
    api: CApi,
    request: &Request,
    hold: &mut Hold<'_>,
) -> CaiResult<Outcome> {
    let py = obj.py();
    let keep = || Some(obj.clone().unbind());
    if let Some(offered) = Offered::of(api.table()) {
        // Pooled: only its head is cleared (the fill writes the extents of its rank), where a
        // struct zeroed on the stack costs a 1,160-byte memset.
        let mut array = Pooled::cleared();
        let described = offered.describe_object(obj, request.host, &mut array)?;
        let (validated, device) = (Some(described.validated), described.known_device());
        return Ok(match hold {
            Hold::Own(to_own) => {
                owned(obj, Read::borrowing(array, device, keep(), validated), request, to_own)?
            }
            Hold::OwnInto(out, _) => imported_holding_object(obj, &array, validated, request, device, out)?,
            Hold::Borrow(out) | Hold::BorrowOrOwn(out, _) => {
                import_then_copy(py, &array, validated, *request.options, device, out)?;
                Outcome::Written
            }
        });
    }
    let asked = request_of(request.options);
    match hold {
        Hold::Own(to_own) | Hold::OwnInto(_, to_own) => {
            let mut array = Pooled::cleared();
            Ok(match call_c_api(api, true, obj, &asked, &mut array)? {
                // The struct's release (the producer's) runs with the Read or the Array made of
                // it; `obj` is kept too, for a table whose acquire forgot to.
                Called::Described(validated) => {
                    owned(obj, Read::borrowing(array, None, keep(), Some(validated)), request, to_own)?
                }
                Called::NotSupported => Outcome::Declined,
            })
        }
        Hold::Borrow(out) | Hold::BorrowOrOwn(out, _) => {
            // On the stack: zeroing it costs what taking a pooled one would (both measured).
            let mut array = CaiArray::zeroed();
            Ok(match call_c_api(api, false, obj, &asked, &mut array)? {
                Called::Described(validated) => {
                    import_then_copy(py, &array, Some(validated), *request.options, None, out)?;
                    Outcome::Written
                }
                Called::NotSupported => Outcome::Declined,
            })
        }
    }
}
