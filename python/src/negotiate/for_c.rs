//! The owning import for C (`cai_python_from_object`): written into the caller's struct where
//! it can hold what keeps the data alive, else read for an Array to own.

use cai::binding::dlpack::{check_dltensor, write_dltensor, AllowHost, SubByte};
use cai::binding::import::{producer_ordering, Imported};
use cai::binding::rules::Validated;
use cai::{CaiArray, CaiDLDevice, CaiDLTensor, CaiImportOptions, CAI_STREAM_NONE};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use super::choose::{choose, Chosen, Holder, Start};
use super::own::read_chosen;
use super::type_facts::mark_clean;
use super::{import_read, import_then_copy, written, Caller, HOST};
use crate::cpython::fastcall::hold_reference;
use crate::described::Read;
use crate::errors::CaiResult;
use crate::offered::Offered;
use crate::pool::Pooled;
use crate::read::c_api::CApi;
use crate::read::dict::{interface_read, read_dict_pooled};
use crate::read::exchange::{own_by_exchange, Exchange};
use crate::read::numpy::with_numpy_tensor;

/// What `import_for_c` hands a C caller to own.
// Returned once per import and taken apart at once: boxing the larger variant would allocate
// per import, the cost this type exists to avoid.
#[allow(clippy::large_enum_variant)]
pub enum ForC {
    /// Written into the caller's struct already, holding what keeps the data alive: the managed
    /// tensor its type's DLPack exchange table gave, imported, or a reference to the object
    /// itself (a numpy array read by its fields, a plain CAI dict, a type libcai's glue
    /// offered: `hold_reference`); nothing else is kept and nothing allocated.
    Written,
    /// What the reader read and its import, for an Array to own (the object kept alive).
    Read(Read, Imported),
}

/// `import_object` for `cai_python_from_object`: an object read through its type's DLPack
/// exchange table is handed over as the table gave it (the managed tensor, imported in
/// place), as any DLPack consumer holds it, written into `out` (`own_by_exchange_table`); a
/// numpy array read by its fields written into `out` with a reference to the array
/// (`import_numpy_for_c`); any other as `import_object` reads it. `release_tensor` (capi.rs's)
/// is the release of a struct that owns a managed tensor.
pub fn import_for_c(
    obj: &Bound<'_, PyAny>,
    options: CaiImportOptions,
    release_tensor: unsafe extern "C" fn(*mut CaiArray),
    out: &mut CaiArray,
) -> CaiResult<ForC> {
    let host = Caller::CApi.host(&options);
    match choose(obj, &options, Holder::Import, host, Start::First)? {
        Chosen::Exchange(exchange) => {
            own_by_exchange_table(obj, exchange, options, release_tensor, out)?;
            Ok(ForC::Written)
        }
        Chosen::NumpyFields => import_numpy_for_c(obj, options, host, out),
        Chosen::Dict(dict) => dict_for_c(obj, &dict, options, Holder::Import, out),
        Chosen::CApi(api) => import_c_api_for_c(obj, api, options, out),
        chosen => import_read_for_c(obj, chosen, options, host),
    }
}

/// `import_for_c` of an object whose type's C-level table the negotiation chose (or this
/// thread chose before: `remembered_table`). A table libcai's glue offered: the fill's
/// description, every rule checked, imported and written into `out` holding a reference to
/// `obj` of its own (`hold_reference`, what the glue's `acquire` holds), with no Array made for
/// it; `out` is written only on success. Any other table's acquire is read
/// for an Array to own.
#[inline(never)]
pub fn import_c_api_for_c(
    obj: &Bound<'_, PyAny>,
    api: CApi,
    options: CaiImportOptions,
    out: &mut CaiArray,
) -> CaiResult<ForC> {
    let host = Caller::CApi.host(&options);
    let Some(offered) = Offered::of(api.table()) else {
        return import_read_for_c(obj, Chosen::CApi(api), options, host);
    };
    let mut array = Pooled::cleared();
    let described = offered.describe_object(obj, host, &mut array)?;
    imported_holding_object(obj, &array, Some(described.validated), options, described.known_device(), out)
}

/// `import_for_c` of an object whose type the negotiation chose (or chose before:
/// `remembered_table`) its exchange table for: the managed tensor the table gives, every
/// rule checked, written into `out`, which owns it (`release` runs its deleter; see
/// `written`). `out` is written only on success; a refused tensor is deleted.
pub fn own_by_exchange_table(
    obj: &Bound<'_, PyAny>,
    exchange: Exchange,
    options: CaiImportOptions,
    release: unsafe extern "C" fn(*mut CaiArray),
    out: &mut CaiArray,
) -> CaiResult<()> {
    let allow = Caller::CApi.host(&options);
    let ordering = producer_ordering(options.consumer_stream, options.sync_mode);
    let tensor = own_by_exchange(obj, exchange, ordering, allow)?;
    let (named, validated, stream) = (Some(tensor.device()), tensor.validated(), tensor.stream());
    written(obj.py(), |array| tensor.write(release, array), validated, named, stream, options, out)
}

/// `import_for_c` of a numpy array by its fields, every rule checked on them, written into
/// `out` holding a reference to the array of its own (`hold_reference`; numpy's in-place
/// `resize` then refuses, as for its own DLPack export: see `take_numpy_array`), through
/// `written`; or by the next protocol where the fields decline it.
fn import_numpy_for_c(
    obj: &Bound<'_, PyAny>,
    options: CaiImportOptions,
    host: AllowHost,
    out: &mut CaiArray,
) -> CaiResult<ForC> {
    let import = |tensor: &CaiDLTensor, read_only| {
        // SAFETY: the array's tensor, valid while this runs (`with_numpy_tensor`).
        let checked = unsafe { check_dltensor(tensor, SubByte::Padded, host) }?;
        mark_clean(obj);
        let write = |array: &mut CaiArray| {
            // SAFETY: the tensor just checked; it is not read after this write.
            unsafe { write_dltensor(tensor, &checked, read_only, array) };
            // SAFETY: attached (a Bound exists); `obj` is live.
            unsafe { hold_reference(array, obj.as_ptr()) };
        };
        written(obj.py(), write, checked.validated, Some(HOST), CAI_STREAM_NONE, options, out)
    };
    // SAFETY: an instance of exactly numpy's ndarray (its type's facts), held by the caller.
    if unsafe { with_numpy_tensor(obj, import) }?.is_some() {
        return Ok(ForC::Written);
    }
    let next = choose(obj, &options, Holder::Import, host, Start::PastNumpyFields)?;
    import_read_for_c(obj, next, options, host)
}

/// `import_for_c` (`Holder::Import`) or `view_or_own_object` (`Holder::View`) of a CAI dict
/// (the object, or what its `__cuda_array_interface__` gave), read once: one with neither a
/// mask nor named descr fields (every framework's) is written into `out`, an import's holding
/// a reference to `obj` of its own, as a numpy array read by its fields is, with no Array made
/// for it (a box, 280 bytes moved, its drop), a view's borrowed; any other is described from
/// what was read, for an Array to own. `out` is written only on success.
pub(super) fn dict_for_c(
    obj: &Bound<'_, PyAny>,
    dict: &Bound<'_, PyDict>,
    options: CaiImportOptions,
    holder: Holder,
    out: &mut CaiArray,
) -> CaiResult<ForC> {
    let (array, fields, mask) = read_dict_pooled(dict)?;
    if mask.is_some() || !fields.is_empty() {
        let read = interface_read(obj, array, fields, mask)?;
        let imported = import_read(obj.py(), &read, &options)?;
        return Ok(ForC::Read(read, imported));
    }
    // No device is read with a dict: its memory is pointer-checked as the options say, as
    // `import_read` does for a dict's Read.
    match holder {
        Holder::Import => imported_holding_object(obj, &array, None, options, None, out),
        Holder::View => {
            import_then_copy(obj.py(), &array, None, options, None, out)?;
            Ok(ForC::Written)
        }
    }
}

/// `array` (what `validated` says of it, if known) imported and copied into `out`, which then
/// holds a reference to `obj` of its own (`hold_reference`): for what lives as long as the
/// object does, with no Array made for it. `out` is written only on success.
fn imported_holding_object(
    obj: &Bound<'_, PyAny>,
    array: &CaiArray,
    validated: Option<Validated>,
    options: CaiImportOptions,
    named: Option<CaiDLDevice>,
    out: &mut CaiArray,
) -> CaiResult<ForC> {
    import_then_copy(obj.py(), array, validated, options, named, out)?;
    // SAFETY: attached (a Bound exists); `obj` is live.
    unsafe { hold_reference(out, obj.as_ptr()) };
    Ok(ForC::Written)
}

/// `import_for_c` of what a reader reads, for an Array to own.
fn import_read_for_c(
    obj: &Bound<'_, PyAny>,
    chosen: Chosen<'_>,
    options: CaiImportOptions,
    host: AllowHost,
) -> CaiResult<ForC> {
    let read = read_chosen(obj, chosen, &options, host)?;
    let imported = import_read(obj.py(), &read, &options)?;
    Ok(ForC::Read(read, imported))
}
