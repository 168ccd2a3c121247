//! The reader of an object by its attributes, the last of a route: `__cuda_array_interface__`,
//! else `__dlpack__`, with a jax array asked its device first. What it finds is read by the
//! dict reader (read/dict.rs) or taken by the DLPack one (read/dlpack.rs).

use cai::binding::import::ProducerOrdering;
use cai::CAI_DL_CPU;
use pyo3::exceptions::PyTypeError;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::dlpack::TakenTensor;
use crate::errors::{CaiResult, Failure};
use crate::import::Request;
use crate::read::dict::interface_attribute;
use crate::read::dlpack::{reported_device, take_from_producer, KnownDevice};
use crate::values::TypeOf;

/// What the type says of its instances' attributes (negotiate/type_facts.rs's `TypeFacts`).
#[derive(Clone, Copy)]
pub struct AttributeFacts {
    pub jax_array: bool,
    pub may_have_interface: bool,
    pub type_has_dlpack: bool,
}

/// What an object's attributes gave.
pub enum ByAttributes<'py> {
    /// What its `__cuda_array_interface__` gave.
    Dict(Bound<'py, PyDict>),
    /// The tensor its `__dlpack__` gave.
    Taken(TakenTensor),
}

/// What `read_attributes` found, and whether the way there was audited: it called no
/// `hasattr` and dropped no error, so the type may be marked for the entries that run
/// uncounted (negotiate/type_facts.rs's `read_cleanly`).
pub struct Attributes<'py> {
    pub found: ByAttributes<'py>,
    pub audited: bool,
}

/// `obj` read by its attributes: `__cuda_array_interface__`, else `__dlpack__` (asked for no
/// copy where `no_copy`: a borrowed view's tensor must be the object's own memory). A jax
/// array is read by DLPack where it is host memory, without the interface that raises for it
/// at a cost per call, and by its interface where it is device memory (which says it is
/// read-only, as jax's DLPack cannot). Which it is: where no sync is wanted, the tensor
/// `__dlpack__` gives for None (host memory's stream argument; `__dlpack_device__` costs a jax
/// array about half its `__dlpack__`), a device one let go of; else its device.
pub fn read_attributes<'py>(
    obj: &Bound<'py, PyAny>,
    facts: AttributeFacts,
    request: &Request,
    no_copy: bool,
) -> CaiResult<Attributes<'py>> {
    let py = obj.py();
    let (ordering, host) = (request.ordering, request.host);
    let take = |known| {
        take_from_producer(obj, request.options.consumer_stream, ordering, host, known, no_copy)
            .map_err(|failure| failure_unless_dlpack_gone(obj, failure))
    };
    let audited = |found| Ok(Attributes { found, audited: true });
    let mut known = KnownDevice::Unknown;
    if facts.jax_array {
        if matches!(ordering, ProducerOrdering::NotWanted) {
            let tensor = take(KnownDevice::HostFirst)?;
            if tensor.device.device_type == CAI_DL_CPU {
                return audited(ByAttributes::Taken(tensor));
            }
            known = KnownDevice::Reported(tensor.device);
        } else {
            let device = reported_device(obj)?;
            if device.device_type == CAI_DL_CPU {
                return audited(ByAttributes::Taken(take(KnownDevice::Reported(device))?));
            }
            known = KnownDevice::Reported(device);
        }
    }
    if facts.may_have_interface {
        if let Some(dict) = interface_attribute(obj)? {
            return audited(ByAttributes::Dict(dict));
        }
    }
    if !facts.type_has_dlpack && !obj.hasattr(intern!(py, "__dlpack__"))? {
        return Err(not_an_array(obj).into());
    }
    let tensor = take(known)?;
    // Audited where the type had `__dlpack__`: the way here called no `hasattr` and dropped no
    // error (`interface_attribute` and the take clear what they recover from).
    Ok(Attributes { found: ByAttributes::Taken(tensor), audited: facts.type_has_dlpack })
}

/// The error of an object no reader takes: a TypeError naming the parameter and what it takes
/// (built only on failure).
pub fn not_an_array(object: &Bound<'_, PyAny>) -> PyErr {
    PyTypeError::new_err(format!(
        "obj must be an object with __cuda_array_interface__ (or such a dict), a DLPack producer (__dlpack__) \
         or a cai.Array, not a '{}' (it has neither '__cuda_array_interface__' nor '__dlpack__')",
        TypeOf::new(object)
    ))
}

/// `failure`, a take's, unless `obj` has no `__dlpack__` now (its class lost it after its
/// type's facts were found): then the refusal of an object no route takes, as for a type found
/// without one.
#[cold]
#[inline(never)]
fn failure_unless_dlpack_gone(obj: &Bound<'_, PyAny>, failure: Failure) -> Failure {
    if obj.hasattr(intern!(obj.py(), "__dlpack__")).unwrap_or(true) {
        return failure;
    }
    not_an_array(obj).into()
}
