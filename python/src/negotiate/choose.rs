//! The negotiation's choice: which protocol reads an object, from its type's facts and, where
//! the protocols make it so, from the instance (its interface, its device).

use cai::binding::dlpack::AllowHost;
use cai::binding::import::{producer_ordering, ProducerOrdering};
use cai::{CaiImportOptions, CAI_DL_CPU};
use pyo3::exceptions::PyTypeError;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::PyDict;

use super::type_facts::{
    mark_clean, mark_clean_with, mark_unaudited, remembered_choice, type_facts, Remembered,
};
use crate::array_object::ArrayObject;
use crate::cpython::{is_exactly, Builtin};
use crate::dlpack::TakenTensor;
use crate::errors::{CaiResult, Failure};
use crate::offered::Offered;
use crate::read::c_api::CApi;
use crate::read::dict::interface_attribute;
use crate::read::dlpack::{reported_device, take_from_producer, KnownDevice};
use crate::read::exchange::Exchange;
use crate::values::TypeOf;

/// The error of an object no reader takes: a TypeError naming the parameter and what it takes
/// (built only on failure).
pub fn not_an_array(object: &Bound<'_, PyAny>) -> PyErr {
    PyTypeError::new_err(format!(
        "obj must be an object with __cuda_array_interface__ (or such a dict), a DLPack producer (__dlpack__) \
         or a cai.Array, not a '{}' (it has neither '__cuda_array_interface__' nor '__dlpack__')",
        TypeOf::new(object)
    ))
}

/// The protocol the negotiation chose for an object.
pub(super) enum Chosen<'py> {
    /// Its type's C-level CAI table.
    CApi(CApi),
    /// A CAI dict: the object itself, or what its `__cuda_array_interface__` gave.
    Dict(Bound<'py, PyDict>),
    /// A cai.Array, read from its own struct.
    Array(ArrayObject<'py>),
    /// Its type's DLPack exchange table.
    Exchange(Exchange),
    /// `__dlpack__`, the tensor taken already (what the take showed is learned of the type).
    Taken(TakenTensor),
    /// Exactly a numpy array, to be read by its fields (read/numpy.rs) where they say what its
    /// `__dlpack__` would: by the holder, into the struct it reads into.
    NumpyFields,
}

/// Where a negotiation starts: at the first route, or past one that declined the object (its
/// type's C-level table refused it with CAI_ERROR_NOT_SUPPORTED; a numpy array's fields could
/// not say what its `__dlpack__` would), the routes tried in this order.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Start {
    First,
    /// The first route, this thread's remembered choice for the type asked already (none).
    PastRemembered,
    PastCApi,
    PastNumpyFields,
}

/// Who holds what is read: an import keeps the producer's tensor; a borrowed view lets go of
/// it before returning, so the tensor must be the object's own memory, never a copy.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Holder {
    Import,
    View,
}

/// The negotiation, shared by the import and the view: the protocol chosen for `obj`, from
/// `start` on.
pub(super) fn choose<'py>(
    obj: &Bound<'py, PyAny>,
    options: &CaiImportOptions,
    holder: Holder,
    host: AllowHost,
    start: Start,
) -> CaiResult<Chosen<'py>> {
    if start == Start::First {
        match remembered_choice(obj) {
            Some(Remembered::OfferedCApi(api)) => return Ok(Chosen::CApi(api)),
            Some(Remembered::Exchange(exchange)) => return Ok(Chosen::Exchange(exchange)),
            None => {}
        }
    }
    let py = obj.py();
    mark_unaudited();
    // Cheapest first: a dict; a type's DLPack exchange table (looked up once per type), before
    // a CAI property that may raise (a CPU tensor's does) and cost an exception per call. A
    // dict by one compare of its type, a subclass of one by its type's facts (under the limited
    // API a subclass check is a call for the type's flags).
    if is_exactly(obj.as_borrowed(), Builtin::Dict) {
        mark_clean(obj);
        // SAFETY: an exact dict, checked above.
        return Ok(Chosen::Dict(unsafe { obj.cast_unchecked::<PyDict>() }.clone()));
    }
    if let Some(array) = ArrayObject::of(obj) {
        mark_clean(obj);
        return Ok(Chosen::Array(array));
    }
    let facts = type_facts(obj)?;
    if facts.dict {
        mark_clean(obj);
        // SAFETY: an instance of a subclass of dict (its type's facts).
        return Ok(Chosen::Dict(unsafe { obj.cast_unchecked::<PyDict>() }.clone()));
    }
    if let Some(api) = facts.c_api.filter(|_| start < Start::PastCApi) {
        // From the first route on (none comes before the C-level table but the type's own).
        if Offered::of(api.table()).is_some() {
            mark_clean_with(obj, Some(Remembered::OfferedCApi(api)));
        }
        return Ok(Chosen::CApi(api));
    }
    if let Some(exchange) = facts.exchange {
        // From the first route on: the type has no C-level table, so the table is its choice.
        mark_clean_with(obj, Some(Remembered::Exchange(exchange)).filter(|_| start <= Start::PastRemembered));
        return Ok(Chosen::Exchange(exchange));
    }
    if facts.numpy_array && start < Start::PastNumpyFields {
        return Ok(Chosen::NumpyFields);
    }
    let ordering = producer_ordering(options.consumer_stream, options.sync_mode);
    let no_copy = holder == Holder::View;
    let take = |known| {
        take_from_producer(obj, options.consumer_stream, ordering, host, known, no_copy)
            .map_err(|failure| failure_unless_dlpack_gone(obj, failure))
    };
    // A jax array is read by DLPack where it is host memory, without the interface that
    // raises for it at a cost per call, and by its interface where it is device memory (which
    // says it is read-only, as jax's DLPack cannot). Which it is: where no sync is wanted, the
    // tensor `__dlpack__` gives for None (host memory's stream argument; `__dlpack_device__`
    // costs a jax array about half its `__dlpack__`), a device one let go of; else its device.
    let mut known = KnownDevice::Unknown;
    if facts.jax_array {
        if matches!(ordering, ProducerOrdering::NotWanted) {
            let tensor = take(KnownDevice::HostFirst)?;
            if tensor.device.device_type == CAI_DL_CPU {
                mark_clean(obj);
                return Ok(Chosen::Taken(tensor));
            }
            known = KnownDevice::Reported(tensor.device);
        } else {
            let device = reported_device(obj)?;
            if device.device_type == CAI_DL_CPU {
                let tensor = take(KnownDevice::Reported(device))?;
                mark_clean(obj);
                return Ok(Chosen::Taken(tensor));
            }
            known = KnownDevice::Reported(device);
        }
    }
    if facts.may_have_interface {
        if let Some(dict) = interface_attribute(obj)? {
            mark_clean(obj);
            return Ok(Chosen::Dict(dict));
        }
    }
    if !facts.type_has_dlpack && !obj.hasattr(intern!(py, "__dlpack__"))? {
        return Err(not_an_array(obj).into());
    }
    let tensor = take(known)?;
    if facts.type_has_dlpack {
        // Audited: the way here called no `hasattr` and dropped no error (`interface_attribute`
        // and the take clear what they recover from).
        mark_clean(obj);
    }
    Ok(Chosen::Taken(tensor))
}

/// `failure`, a take's, unless `obj` has no `__dlpack__` now (its class lost it after its
/// type's facts were found): then the refusal of an object no route takes, as for a type found
/// without one.
#[cold]
#[inline(never)]
pub(super) fn failure_unless_dlpack_gone(obj: &Bound<'_, PyAny>, failure: Failure) -> Failure {
    if obj.hasattr(intern!(obj.py(), "__dlpack__")).unwrap_or(true) {
        return failure;
    }
    not_an_array(obj).into()
}
