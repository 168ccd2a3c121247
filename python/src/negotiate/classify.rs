//! The classifier: which protocols read an object, in docs/design.md's order, from its type's
//! fixed facts alone. The instance is asked only where the protocols make it so, by the last
//! reader of a route (read/attributes.rs: `__cuda_array_interface__` before `__dlpack__`, a
//! jax array's device).

use pyo3::prelude::*;
use pyo3::types::PyDict;

use super::type_facts::{mark_clean, mark_unaudited, remembered_choice, type_facts, Remembered};
use crate::array::object::ArrayObject;
use crate::cpython::{is_exactly, Builtin};
use crate::errors::CaiResult;
use crate::read::attributes::AttributeFacts;
use crate::read::c_api::CApi;
use crate::read::exchange::Exchange;

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
    /// Its attributes, `__cuda_array_interface__` then `__dlpack__` (read/attributes.rs).
    Attributes(AttributeFacts),
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
