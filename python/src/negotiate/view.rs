//! The borrowed view for C (`cai_python_view`, `cai_python_view_or_own`): written into the
//! caller's struct with no reference kept and nothing allocated that outlives the call.

use cai::binding::dlpack::{
    check_dltensor, device_is_cuda_or_allowed_host, read_dltensor, write_dltensor, AllowHost, SubByte,
};
use cai::binding::import::producer_ordering;
use cai::binding::rules::Validated;
use cai::{CaiArray, CaiDLDevice, CaiDLTensor, CaiImportOptions, Error, Status, CAI_STREAM_NONE};
use pyo3::prelude::*;

use super::choose::{choose, Chosen, Holder, Start};
use super::for_c::{dict_for_c, import_for_c, ForC};
use super::type_facts::mark_clean;
use super::{import_then_copy, written, Caller, HOST};
use crate::dlpack::TakenTensor;
use crate::errors::{CaiResult, Failure};
use crate::offered::Offered;
use crate::pool::Pooled;
use crate::read::c_api::{call_c_api, request_of, CApi, Called};
use crate::read::dict::read_dict;
use crate::read::exchange::{view_by_exchange, Exchange, ExchangeView};
use crate::read::numpy::with_numpy_tensor;

/// `source`'s description with nothing of its own to release (`owner` and `release` NULL):
/// what a view hands out, whoever keeps the memory alive.
fn borrowed_copy(source: &CaiArray) -> CaiArray {
    CaiArray { owner: std::ptr::null_mut(), release: None, ..*source }
}

/// The refusal of what a borrowed view cannot hold without memory or a reference of its own.
fn cannot_borrow(what: &str) -> Failure {
    Failure::CannotBorrow(Error::new(
        Status::InvalidArgument,
        format!(
            "cai_python_view cannot borrow {what}; cai_python_from_object takes it (it owns what it holds)"
        ),
    ))
}

/// `cai_python_view`: the negotiation and import of `import_object`, borrowed: `obj`'s
/// description written into `out` with no reference kept and nothing allocated that outlives
/// the call, its `release` NULL; `out` is written only on success. A tensor taken by
/// `__dlpack__` (asked for with `copy=False`: the object's own memory) is deleted before
/// returning; the data stays valid while the caller holds `obj`. What a struct cannot hold
/// without memory of its own is refused (see cai_python.h): a dict with a mask or named descr
/// fields, a tensor of an exchange table without the non-owning DLTensor call.
pub fn view_object(obj: &Bound<'_, PyAny>, options: CaiImportOptions, out: &mut CaiArray) -> CaiResult<()> {
    let allow = Caller::CApi.host(&options);
    let chosen = choose(obj, &options, Holder::View, allow, Start::First)?;
    view_chosen_into(obj, chosen, options, allow, out)
}

/// `cai_python_view_or_own`: `view_object` where a borrowed struct can hold what is read, else
/// `import_for_c`, with no second reading of a dict: one found to have a mask or named descr
/// fields is imported from that reading. What another route refuses to borrow (an exchange
/// table without the non-owning call, a dict found past a C-level table's refusal) is then
/// negotiated again for the owning import.
pub fn view_or_own_object(
    obj: &Bound<'_, PyAny>,
    options: CaiImportOptions,
    release_tensor: unsafe extern "C" fn(*mut CaiArray),
    out: &mut CaiArray,
) -> CaiResult<ForC> {
    let allow = Caller::CApi.host(&options);
    let viewed = match choose(obj, &options, Holder::View, allow, Start::First)? {
        Chosen::Dict(dict) => return dict_for_c(obj, &dict, options, Holder::View, out),
        chosen => view_chosen_into(obj, chosen, options, allow, out),
    };
    match viewed {
        Ok(()) => Ok(ForC::Written),
        Err(Failure::CannotBorrow(_)) => import_for_c(obj, options, release_tensor, out),
        Err(failure) => Err(failure),
    }
}

/// `view_object` of what the negotiation chose.
fn view_chosen_into(
    obj: &Bound<'_, PyAny>,
    chosen: Chosen<'_>,
    options: CaiImportOptions,
    allow: AllowHost,
    out: &mut CaiArray,
) -> CaiResult<()> {
    match chosen {
        Chosen::Exchange(exchange) => view_by_exchange_table(obj, exchange, options, out),
        Chosen::NumpyFields => {
            if view_numpy_array(obj, options, allow, out)? {
                return Ok(());
            }
            let next = choose(obj, &options, Holder::View, allow, Start::PastNumpyFields)?;
            view_in_own_struct(obj, next, options, allow, out)
        }
        chosen => view_in_own_struct(obj, chosen, options, allow, out),
    }
}

/// `view_object` of an object whose type's offered C-level table this thread chose before
/// (`remembered_table`): what the negotiation would do, without it.
#[inline(never)]
pub fn view_offered(
    obj: &Bound<'_, PyAny>,
    api: CApi,
    options: CaiImportOptions,
    out: &mut CaiArray,
) -> CaiResult<()> {
    let allow = Caller::CApi.host(&options);
    // A remembered C-level table is one libcai's glue offered (`choose` remembers no other):
    // described by its fill straight, as `view_chosen` would.
    let Some(offered) = Offered::of(api.table()) else {
        return view_in_own_struct(obj, Chosen::CApi(api), options, allow, out);
    };
    // Pooled: only its head is cleared (the fill writes the extents of its rank), where a
    // struct zeroed on the stack costs a 1,160-byte memset.
    let mut array = Pooled::cleared();
    let described = offered.describe_object(obj, allow, &mut array)?;
    import_then_copy(obj.py(), &array, Some(described.validated), options, described.known_device(), out)
}

/// `view_object` of an object whose type the negotiation chose (or chose before:
/// `remembered_table`) its exchange table for: the table's non-owning DLTensor, every rule
/// checked, written into `out` (refused where the table has no such call).
pub fn view_by_exchange_table(
    obj: &Bound<'_, PyAny>,
    exchange: Exchange,
    options: CaiImportOptions,
    out: &mut CaiArray,
) -> CaiResult<()> {
    let allow = Caller::CApi.host(&options);
    let view = exchange_view(obj, exchange, &options, allow)?;
    let write = |array: &mut CaiArray| view.write(array);
    written(obj.py(), write, view.validated(), Some(view.device()), view.stream(), options, out)
}

/// `view_object` of a numpy array by its own fields (`with_numpy_tensor`); false (nothing
/// written) where its reader declines. Out of line: inlined, it made the other paths' entry
/// dearer (90 instructions on a torch tensor's view).
#[inline(never)]
fn view_numpy_array(
    obj: &Bound<'_, PyAny>,
    options: CaiImportOptions,
    allow: AllowHost,
    out: &mut CaiArray,
) -> CaiResult<bool> {
    let py = obj.py();
    let view = |tensor: &CaiDLTensor, read_only| {
        // SAFETY: the array's tensor, valid for this call (`with_numpy_tensor`).
        let checked = unsafe { check_dltensor(tensor, SubByte::Padded, allow) }?;
        // SAFETY: the tensor just checked.
        let write = |array: &mut CaiArray| unsafe { write_dltensor(tensor, &checked, read_only, array) };
        written(py, write, checked.validated, Some(HOST), CAI_STREAM_NONE, options, out)
    };
    // SAFETY: an instance of exactly numpy's ndarray (its type's facts), held by the caller.
    if unsafe { with_numpy_tensor(obj, view) }?.is_none() {
        return Ok(false);
    }
    mark_clean(obj);
    Ok(true)
}

/// `view_object` by a reader that writes a struct of the call's own (zeroed), then imported and
/// copied into `out` as far as defined.
fn view_in_own_struct(
    obj: &Bound<'_, PyAny>,
    chosen: Chosen<'_>,
    options: CaiImportOptions,
    allow: AllowHost,
    out: &mut CaiArray,
) -> CaiResult<()> {
    // On the stack: zeroing it costs what taking a pooled one would (both measured).
    let mut array = CaiArray::zeroed();
    let (named, validated) = view_chosen(obj, chosen, &options, allow, &mut array)?;
    import_then_copy(obj.py(), &array, validated, options, named, out)
}

/// `obj`'s tensor through its type's exchange table, borrowed (the table's non-owning DLTensor
/// call; refused where the table has none), every rule checked.
fn exchange_view(
    obj: &Bound<'_, PyAny>,
    exchange: Exchange,
    options: &CaiImportOptions,
    allow: AllowHost,
) -> CaiResult<ExchangeView> {
    let Some(dltensor) = exchange.dltensor_from_py_object else {
        return Err(cannot_borrow(
            "a tensor of a DLPack exchange table without dltensor_from_py_object_no_sync",
        ));
    };
    let ordering = producer_ordering(options.consumer_stream, options.sync_mode);
    view_by_exchange(obj, exchange, dltensor, ordering, allow)
}

/// `obj` read borrowed into `array` by the protocol chosen (by the next one when its C-level
/// table refuses): whether it is host memory, and what validation found, if it ran.
pub(super) fn view_chosen(
    obj: &Bound<'_, PyAny>,
    chosen: Chosen<'_>,
    options: &CaiImportOptions,
    allow: AllowHost,
    array: &mut CaiArray,
) -> CaiResult<(Option<CaiDLDevice>, Option<Validated>)> {
    Ok(match chosen {
        Chosen::CApi(api) => {
            if let Some(offered) = Offered::of(api.table()) {
                let described = offered.describe_object(obj, allow, array)?;
                return Ok((described.known_device(), Some(described.validated)));
            }
            match call_c_api(api, false, obj, &request_of(options), array)? {
                Called::Described(validated) => (None, Some(validated)),
                Called::NotSupported => {
                    let next = choose(obj, options, Holder::View, allow, Start::PastCApi)?;
                    return view_chosen(obj, next, options, allow, array);
                }
            }
        }
        Chosen::Array(source) => {
            let source = source.get();
            source.live(obj.py())?;
            let device = source.dlpack_device();
            if let Some(device) = device {
                device_is_cuda_or_allowed_host(device, allow)?;
            }
            // Its own struct: its descr and mask point into memory the cai.Array owns.
            *array = borrowed_copy(source.array());
            (device, source.imported().map(|i| i.validated))
        }
        Chosen::Exchange(exchange) => {
            let view = exchange_view(obj, exchange, options, allow)?;
            view.write(array);
            (Some(view.device()), Some(view.validated()))
        }
        Chosen::Taken(TakenTensor { mut taken, device, validated }) => {
            // The struct holds the shape and strides itself; the tensor (a no-copy view of
            // `obj`'s memory) is let go of here, the data kept valid by `obj`.
            *array = borrowed_copy(taken.array());
            drop(taken);
            (Some(device), Some(validated))
        }
        // SAFETY: an instance of exactly numpy's ndarray (its type's facts), held by the caller;
        // the tensor is read at once.
        Chosen::NumpyFields => match unsafe {
            with_numpy_tensor(obj, |tensor, read_only| {
                Ok(read_dltensor(tensor, read_only, SubByte::Padded, allow, array)?)
            })
        }? {
            Some(validated) => {
                mark_clean(obj);
                (Some(HOST), Some(validated))
            }
            None => {
                let next = choose(obj, options, Holder::View, allow, Start::PastNumpyFields)?;
                return view_chosen(obj, next, options, allow, array);
            }
        },
        Chosen::Dict(dict) => {
            let mut fields = Vec::new();
            if read_dict(&dict, array, &mut fields)?.is_some() {
                return Err(cannot_borrow("a mask (its struct would need memory of its own)"));
            }
            if !fields.is_empty() {
                return Err(cannot_borrow(
                    "named descr fields (their CaiFields would need memory of their own)",
                ));
            }
            (None, None)
        }
    })
}
