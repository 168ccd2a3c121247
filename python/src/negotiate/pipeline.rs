//! The import pipeline: an object classified (classify.rs), read by the first protocol of its
//! route that takes it (python/src/read/, each reader holding what it read as the caller
//! asked, through crate::import). Python (`cai.from_object`), the C API's table
//! (`cai_python_from_object`, `cai_python_view`, `cai_python_view_or_own`) and through it the
//! casters all run `import_object`; its one dispatch is `read_by`'s.

use cai::{CaiImportOptions, Error, Status};
use pyo3::prelude::*;

use super::classify::{classify, Protocol, Route};
use super::type_facts::{mark_clean, mark_clean_with, Remembered};
use crate::errors::{BoxedResult, Failure};
use crate::import::{Caller, Hold, Outcome, Request};
use crate::offer::offered::Offered;
use crate::read::array::import_by_array;
use crate::read::attributes::{not_an_array, read_attributes, Attributes, ByAttributes};
use crate::read::c_api::import_by_c_api;
use crate::read::dict::import_by_dict;
use crate::read::dlpack::import_taken_tensor;
use crate::read::exchange::import_by_exchange;
use crate::read::numpy::import_by_numpy_fields;

/// `obj` classified, read by the first protocol of its route that takes it, imported, and held
/// as `hold` says (never `Outcome::Declined`); the caller's struct is written only on success.
/// Where `Hold::BorrowOrOwn` cannot borrow, `obj` is negotiated again for `Hold::OwnInto`.
/// `remembered` is the table the entry found this thread chose first for `obj`'s type
/// (type_facts.rs's `cleanliness`), which reads it with no negotiation.
// Forced inline, with `read_by_route` and `read_by`, into each of its four callers, whose way
// of holding then picks each reader's arm at compile time: out of line, the pipeline cost a
// torch tensor's `cai_python_view` about 115 instructions a call and `cai.from_object` of a
// numpy array about 30 (callgrind); the library grew 19 KB.
#[inline(always)]
pub fn import_object(
    obj: &Bound<'_, PyAny>,
    options: &CaiImportOptions,
    caller: Caller,
    mut hold: Hold<'_>,
    remembered: Option<Remembered>,
) -> BoxedResult<Outcome> {
    let request = Request::new(options, caller);
    let route = match remembered {
        Some(choice) => Route::remembered(choice),
        None => classify(obj).map_err(Box::new)?,
    };
    let outcome = read_by_route(obj, route, &request, &mut hold);
    match hold {
        Hold::BorrowOrOwn(out, to_own) if cannot_borrow(&outcome) => {
            let route = classify(obj).map_err(Box::new)?;
            read_by_route(obj, route, &request, &mut Hold::OwnInto(out, to_own))
        }
        _ => outcome,
    }
}

/// Whether `outcome` is a borrowed view's refusal of what only an owning import holds.
fn cannot_borrow(outcome: &BoxedResult<Outcome>) -> bool {
    matches!(outcome, Err(failure) if matches!(**failure, Failure::CannotBorrow(_)))
}

/// The refusal of an outcome a caller cannot hold (`import_object` never gives
/// `Outcome::Declined`, and for `Hold::Own` always fills its `ToOwn`): a bug, said as one.
#[cold]
pub fn unexpected_outcome(caller: &str) -> Failure {
    Failure::Cai(Error::new(
        Status::Panic,
        format!("libcai's import gave {caller} an outcome it cannot hold (a bug; please report it)"),
    ))
}

/// `obj` read by its route: the first protocol, and the next where the first declines it.
#[inline(always)]
fn read_by_route(
    obj: &Bound<'_, PyAny>,
    route: Route<'_>,
    request: &Request,
    hold: &mut Hold<'_>,
) -> BoxedResult<Outcome> {
    let position = if route.remembered { Position::Remembered } else { Position::First };
    match read_by(obj, route.first, position, request, hold) {
        Ok(Outcome::Declined) => {}
        outcome => return outcome,
    }
    let Some(then) = route.then else { return Err(Box::new(not_an_array(obj).into())) };
    match read_by(obj, then, Position::Next, request, hold) {
        Ok(Outcome::Declined) => Err(Box::new(not_an_array(obj).into())),
        outcome => outcome,
    }
}

/// Where in its route a protocol reads an object.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Position {
    /// The table this thread chose before for the type (marked already).
    Remembered,
    First,
    /// After the first declined it.
    Next,
}

/// The one dispatch: `obj` read by `protocol`, held as asked. It marks the way an object was
/// read for the entries that run uncounted (type_facts.rs's `read_cleanly`): a table chosen
/// first is its type's choice.
#[inline(always)]
fn read_by(
    obj: &Bound<'_, PyAny>,
    protocol: Protocol<'_>,
    position: Position,
    request: &Request,
    hold: &mut Hold<'_>,
) -> BoxedResult<Outcome> {
    let read = match protocol {
        Protocol::Dict(dict) => import_by_dict(obj, &dict, request, hold),
        Protocol::Array(array) => import_by_array(obj, &array, request, hold),
        Protocol::CApi(api) => {
            if position == Position::First && Offered::of(api.table()).is_some() {
                mark_clean_with(obj, Some(Remembered::OfferedCApi(api)));
            }
            import_by_c_api(obj, api, request, hold)
        }
        Protocol::Exchange(exchange) => {
            match position {
                Position::Remembered => {}
                Position::First => mark_clean_with(obj, Some(Remembered::Exchange(exchange))),
                Position::Next => mark_clean_with(obj, None),
            }
            import_by_exchange(obj, exchange, request, hold)
        }
        Protocol::NumpyFields => {
            let read = import_by_numpy_fields(obj, request, hold);
            if !matches!(read, Ok(Outcome::Declined)) {
                mark_clean(obj);
            }
            read
        }
        Protocol::Attributes(facts) => match read_attributes(obj, facts, request, hold.borrows()) {
            Ok(Attributes { found, audited }) => {
                if audited {
                    mark_clean(obj);
                }
                match found {
                    ByAttributes::Dict(dict) => import_by_dict(obj, &dict, request, hold),
                    ByAttributes::Taken(tensor) => import_taken_tensor(obj, tensor, request, hold),
                }
            }
            Err(failure) => Err(failure),
        },
    };
    read.map_err(Box::new)
}
