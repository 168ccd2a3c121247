//! The import for an Array to own (`cai.from_object`): what the chosen protocol reads, kept
//! alive by the Read.

use cai::binding::dlpack::{device_is_cuda_or_allowed_host, AllowHost};
use cai::binding::import::{producer_ordering, Imported};
use cai::CaiImportOptions;
use pyo3::prelude::*;

use super::choose::{choose, Chosen, Holder, Start};
use super::type_facts::{mark_clean, remembered_choice, Remembered};
use super::{import_read, Caller};
use crate::described::Read;
use crate::dlpack::TakenTensor;
use crate::errors::CaiResult;
use crate::offered::Offered;
use crate::pool::Pooled;
use crate::read::array::read_array;
use crate::read::c_api::{call_c_api, request_of, CApi, Called};
use crate::read::dict::read_interface;
use crate::read::exchange::{take_by_exchange, Exchange};
use crate::read::numpy::take_numpy_array;

/// `cai.from_object`'s negotiation and import: what the reader read, and what its import
/// established.
pub fn import_object(
    obj: &Bound<'_, PyAny>,
    options: &CaiImportOptions,
    caller: Caller,
) -> CaiResult<(Read, Imported)> {
    let read = read_object(obj, options, caller.host(options))?;
    let imported = import_read(obj.py(), &read, options)?;
    Ok((read, imported))
}

/// `obj` read by the protocol chosen for it, to be owned.
fn read_object(obj: &Bound<'_, PyAny>, options: &CaiImportOptions, host: AllowHost) -> CaiResult<Read> {
    // The negotiation's first step (`choose`'s), asked here: a loop over one type read by its
    // exchange table makes that choice again with no `Chosen` made and moved.
    let chosen = match remembered_choice(obj) {
        Some(Remembered::Exchange(exchange)) => return read_by_exchange(obj, exchange, options, host),
        Some(Remembered::OfferedCApi(api)) => return read_by_c_api_or_next(obj, api, options, host),
        None => choose(obj, options, Holder::Import, host, Start::PastRemembered)?,
    };
    read_chosen(obj, chosen, options, host)
}

/// `obj` read by its type's exchange table, to be owned.
fn read_by_exchange(
    obj: &Bound<'_, PyAny>,
    exchange: Exchange,
    options: &CaiImportOptions,
    host: AllowHost,
) -> CaiResult<Read> {
    let ordering = producer_ordering(options.consumer_stream, options.sync_mode);
    Ok(taken_from(obj, take_by_exchange(obj, exchange, ordering, host)?))
}

/// `obj` read by the protocol chosen, to be owned: by the next one when its C-level table
/// refuses with CAI_ERROR_NOT_SUPPORTED, or a numpy array's fields decline it.
pub(super) fn read_chosen(
    obj: &Bound<'_, PyAny>,
    chosen: Chosen<'_>,
    options: &CaiImportOptions,
    host: AllowHost,
) -> CaiResult<Read> {
    match chosen {
        Chosen::CApi(api) => read_by_c_api_or_next(obj, api, options, host),
        Chosen::Dict(dict) => Ok(read_interface(obj, &dict)?),
        Chosen::Array(array) => {
            let read = read_array(&array)?;
            if let Some(device) = read.device {
                device_is_cuda_or_allowed_host(device, host)?;
            }
            Ok(read)
        }
        Chosen::Exchange(exchange) => read_by_exchange(obj, exchange, options, host),
        Chosen::Taken(tensor) => Ok(taken_from(obj, tensor)),
        Chosen::NumpyFields => match numpy_fields_or_next(obj, options, host)? {
            Ok(tensor) => Ok(taken_from(obj, tensor)),
            Err(next) => read_chosen(obj, next, options, host),
        },
    }
}

/// A numpy array (`Chosen::NumpyFields`) taken by its fields, its type marked as read by an
/// audited path; or, where the fields decline it, the protocol chosen past them. (The view's
/// twin, in `view_chosen`, reads into its caller's struct: written through one generic reader,
/// the import's larger result cost about 60 instructions a call in moves.)
fn numpy_fields_or_next<'py>(
    obj: &Bound<'py, PyAny>,
    options: &CaiImportOptions,
    host: AllowHost,
) -> CaiResult<Result<TakenTensor, Chosen<'py>>> {
    // SAFETY: an instance of exactly numpy's ndarray (its type's facts), held by the caller.
    Ok(match unsafe { take_numpy_array(obj, host) }? {
        Some(tensor) => {
            mark_clean(obj);
            Ok(tensor)
        }
        None => Err(choose(obj, options, Holder::Import, host, Start::PastNumpyFields)?),
    })
}

/// `obj` read by its type's C-level table, to be owned, or by the protocol after it where the
/// table refuses with CAI_ERROR_NOT_SUPPORTED.
fn read_by_c_api_or_next(
    obj: &Bound<'_, PyAny>,
    api: CApi,
    options: &CaiImportOptions,
    host: AllowHost,
) -> CaiResult<Read> {
    match read_by_c_api(obj, api, options, host)? {
        Some(read) => Ok(read),
        None => read_chosen(obj, choose(obj, options, Holder::Import, host, Start::PastCApi)?, options, host),
    }
}

/// `obj` read by its type's C-level table, to be owned (None: the table refused it with
/// CAI_ERROR_NOT_SUPPORTED). A type libcai's glue offered is described by its fill directly,
/// with the device the fill said and its validation; any other table is asked to `acquire`.
fn read_by_c_api(
    obj: &Bound<'_, PyAny>,
    api: CApi,
    options: &CaiImportOptions,
    host: AllowHost,
) -> CaiResult<Option<Read>> {
    let mut array = Pooled::cleared();
    let keep = Some(obj.clone().unbind());
    if let Some(offered) = Offered::of(api.table()) {
        let described = offered.describe_object(obj, host, &mut array)?;
        return Ok(Some(Read::borrowing(array, described.known_device(), keep, Some(described.validated))));
    }
    Ok(match call_c_api(api, true, obj, &request_of(options), &mut array)? {
        // The struct's release (the producer's) runs with the Read or the Array made of it;
        // `obj` is kept too, for a table whose acquire forgot to.
        Called::Described(validated) => Some(Read::borrowing(array, None, keep, Some(validated))),
        Called::NotSupported => None,
    })
}

/// A description of the tensor taken from `obj`, keeping `obj` alive, with what the core
/// validated of it.
fn taken_from(obj: &Bound<'_, PyAny>, tensor: TakenTensor) -> Read {
    let TakenTensor { taken, device, validated } = tensor;
    Read::borrowing(taken.into_inner(), Some(device), Some(obj.clone().unbind()), Some(validated))
}
