//! The classifier: which protocols read an object, in docs/design.md's order, from its type's
//! fixed facts alone. The instance is asked only where the protocols make it so, by the last
//! reader of a route (`read_attributes`: `__cuda_array_interface__` before `__dlpack__`, a jax
//! array's device).

use cai::binding::import::ProducerOrdering;
use cai::CAI_DL_CPU;
use pyo3::exceptions::PyTypeError;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::PyDict;

use super::type_facts::{mark_clean, mark_unaudited, remembered_choice, type_facts, Remembered};
use crate::array::object::ArrayObject;
use crate::cpython::{is_exactly, Builtin};
use crate::dlpack::TakenTensor;
use crate::errors::{CaiResult, Failure};
use crate::import::Request;
use crate::read::c_api::CApi;
use crate::read::dict::interface_attribute;
use crate::read::dlpack::{reported_device, take_from_producer, KnownDevice};
use crate::read::exchange::Exchange;
use crate::values::TypeOf;

/// A protocol that reads an object.
pub(super) enum Protocol<'py> {
    /// A CAI dict: the object itself.
    Dict(Bound<'py, PyDict>),
    /// A cai.Array, read from its own struct.
    Array(ArrayObject<'py>),
    /// Its type's C-level CAI table. One libcai's glue offered reads every instance; any other
    /// may decline one (CAI_ERROR_NOT_SUPPORTED), and the route's next protocol reads it.
    CApi(CApi),
    /// Its type's DLPack exchange table.
    Exchange(Exchange),
    /// Exactly a numpy array, read by its fields (read/numpy.rs) where they say what its
    /// `__dlpack__` would; declined where they cannot.
    NumpyFields,
    /// Its attributes, `__cuda_array_interface__` then `__dlpack__` (`read_attributes`).
    Attributes(AttributeFacts),
}

/// What the type says of its instances' attributes (negotiate/type_facts.rs's `TypeFacts`).
#[derive(Clone, Copy)]
pub(super) struct AttributeFacts {
    jax_array: bool,
    may_have_interface: bool,
    type_has_dlpack: bool,
}

/// The protocols that read an object, in order: the first, and where it may decline the
/// object (a C-level table, a numpy array's fields), the one that reads it then.
pub(super) struct Route<'py> {
    pub first: Protocol<'py>,
    pub then: Option<Protocol<'py>>,
    /// Whether the first is the table this thread chose before for the type, marked so then
    /// (`remembered_choice`).
    pub remembered: bool,
}

impl<'py> Route<'py> {
    fn one(protocol: Protocol<'py>) -> Self {
        Route { first: protocol, then: None, remembered: false }
    }

    /// The route of an object whose type this thread read first by `choice` (the facts
    /// unchanged since): that table again, the type's alone deciding it.
    pub(super) fn remembered(choice: Remembered) -> Self {
        let first = match choice {
            Remembered::OfferedCApi(api) => Protocol::CApi(api),
            Remembered::Exchange(exchange) => Protocol::Exchange(exchange),
        };
        Route { first, then: None, remembered: true }
    }
}

/// The route that reads `obj`: a dict and a cai.Array by their type; else, from the type's
/// facts, its C-level table, then its DLPack exchange table, a numpy array's fields, or its
/// attributes, the first present; a C-level table or a numpy array's fields is followed by
/// the next. (No type has both: numpy's ndarray is immutable and offers no C-level table; and
/// a numpy array's attributes read it as its fields do.) Cheapest first: a type's exchange
/// table (looked up once per type) comes before a CAI property that may raise (a CPU tensor's
/// does) and cost an exception per call.
pub(super) fn classify<'py>(obj: &Bound<'py, PyAny>) -> CaiResult<Route<'py>> {
    if let Some(choice) = remembered_choice(obj) {
        return Ok(Route::remembered(choice));
    }
    mark_unaudited();
    // A dict by one compare of its type, a subclass of one by its type's facts (under the
    // limited API a subclass check is a call for the type's flags).
    if is_exactly(obj.as_borrowed(), Builtin::Dict) {
        mark_clean(obj);
        // SAFETY: an exact dict, checked above.
        return Ok(Route::one(Protocol::Dict(unsafe { obj.cast_unchecked::<PyDict>() }.clone())));
    }
    if let Some(array) = ArrayObject::of(obj) {
        mark_clean(obj);
        return Ok(Route::one(Protocol::Array(array)));
    }
    let facts = type_facts(obj)?;
    if facts.dict {
        mark_clean(obj);
        // SAFETY: an instance of a subclass of dict (its type's facts).
        return Ok(Route::one(Protocol::Dict(unsafe { obj.cast_unchecked::<PyDict>() }.clone())));
    }
    let attributes = Protocol::Attributes(AttributeFacts {
        jax_array: facts.jax_array,
        may_have_interface: facts.may_have_interface,
        type_has_dlpack: facts.type_has_dlpack,
    });
    let table_or_attributes = match facts.exchange {
        Some(exchange) => Protocol::Exchange(exchange),
        None => attributes,
    };
    Ok(match facts.c_api {
        Some(api) => Route { first: Protocol::CApi(api), then: Some(table_or_attributes), remembered: false },
        None if facts.numpy_array && facts.exchange.is_none() => {
            Route { first: Protocol::NumpyFields, then: Some(table_or_attributes), remembered: false }
        }
        None => Route::one(table_or_attributes),
    })
}

/// What an object's attributes gave.
pub(super) enum ByAttributes<'py> {
    /// What its `__cuda_array_interface__` gave.
    Dict(Bound<'py, PyDict>),
    /// The tensor its `__dlpack__` gave.
    Taken(TakenTensor),
}

/// `obj` read by its attributes: `__cuda_array_interface__`, else `__dlpack__` (asked for no
/// copy where `no_copy`: a borrowed view's tensor must be the object's own memory). A jax
/// array is read by DLPack where it is host memory, without the interface that raises for it
/// at a cost per call, and by its interface where it is device memory (which says it is
/// read-only, as jax's DLPack cannot). Which it is: where no sync is wanted, the tensor
/// `__dlpack__` gives for None (host memory's stream argument; `__dlpack_device__` costs a jax
/// array about half its `__dlpack__`), a device one let go of; else its device.
pub(super) fn read_attributes<'py>(
    obj: &Bound<'py, PyAny>,
    facts: AttributeFacts,
    request: &Request,
    no_copy: bool,
) -> CaiResult<ByAttributes<'py>> {
    let py = obj.py();
    let (ordering, host) = (request.ordering, request.host);
    let take = |known| {
        take_from_producer(obj, request.options.consumer_stream, ordering, host, known, no_copy)
            .map_err(|failure| failure_unless_dlpack_gone(obj, failure))
    };
    let mut known = KnownDevice::Unknown;
    if facts.jax_array {
        if matches!(ordering, ProducerOrdering::NotWanted) {
            let tensor = take(KnownDevice::HostFirst)?;
            if tensor.device.device_type == CAI_DL_CPU {
                mark_clean(obj);
                return Ok(ByAttributes::Taken(tensor));
            }
            known = KnownDevice::Reported(tensor.device);
        } else {
            let device = reported_device(obj)?;
            if device.device_type == CAI_DL_CPU {
                let tensor = take(KnownDevice::Reported(device))?;
                mark_clean(obj);
                return Ok(ByAttributes::Taken(tensor));
            }
            known = KnownDevice::Reported(device);
        }
    }
    if facts.may_have_interface {
        if let Some(dict) = interface_attribute(obj)? {
            mark_clean(obj);
            return Ok(ByAttributes::Dict(dict));
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
    Ok(ByAttributes::Taken(tensor))
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
