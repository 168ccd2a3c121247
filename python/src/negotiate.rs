//! The negotiation: which protocol an object is read by (a dict, a cai.Array, its type's
//! C-level CAI table, its type's DLPack exchange table, `__cuda_array_interface__`,
//! `__dlpack__`), what libcai knows of its type,
//! and the one import (validate, pointer check, sync) of what the reader read. Python
//! (`cai.from_object`) and C (`cai_python_from_object`) both run it.

use std::cell::Cell;
use std::ffi::c_void;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};

use cai::binding::dlpack::{
    check_dltensor, device_is_cuda_or_allowed_host, read_dltensor, write_dltensor, AllowHost, HostWords,
    SubByte,
};
use cai::binding::import::{
    import_described, import_is_inert, import_may_wait, producer_ordering, Imported, ProducerOrdering,
};
use cai::binding::rules::Validated;
use cai::{
    CaiArray, CaiDLDevice, CaiDLTensor, CaiImportOptions, Error, Status, CAI_DL_CPU, CAI_POINTER_CHECK_NEVER,
    CAI_STREAM_NONE,
};
use pyo3::exceptions::PyTypeError;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyType};

use crate::array_object::ArrayObject;
use crate::classes;
use crate::described::Read;
use crate::dlpack::{Taken, TakenTensor};
use crate::errors::{CaiResult, Failure};
use crate::fastcall::{hold_reference, let_go_of_deferred};
use crate::offered::Offered;
use crate::pool::Pooled;
use crate::read_array::read_array;
use crate::read_c_api::{call_c_api, interface_defined_nearer, lookup_c_api, request_of, CApi, Called};
use crate::read_dict::{interface_attribute, interface_read, read_dict, read_dict_pooled, read_interface};
use crate::read_dlpack::{reported_device, take_from_producer, KnownDevice};
use crate::read_exchange::{
    lookup_exchange_api, own_by_exchange, take_by_exchange, view_by_exchange, Exchange, ExchangeView,
};
use crate::read_numpy::{is_numpy_array_type, take_numpy_array, with_numpy_tensor};
use crate::values::{is_exactly, TypeOf};

/// What libcai needs to know of a producer's type, found once per type.
#[derive(Clone, Copy)]
pub struct TypeFacts {
    /// Whether the type is a subclass of dict: its instances are interface dicts.
    pub dict: bool,
    /// The type's C-level CAI table (docs/c-level-cai.md), if it offers one.
    pub c_api: Option<CApi>,
    /// The type's DLPack exchange table, if it offers one.
    pub exchange: Option<Exchange>,
    /// Whether its instances can have a `__cuda_array_interface__` attribute at all: false for
    /// a type that defines none, whose instances have no `__dict__` and no `__getattr__`, and
    /// whose classes are all immutable (numpy's ndarray), so that no AttributeError is built and
    /// discarded per call.
    pub may_have_interface: bool,
    /// Whether the type had `__dlpack__` when its facts were found: a hint that spares a
    /// `hasattr` per call, never an answer (a take from a class that lost it is refused as one
    /// without it: `failure_unless_dlpack_gone`).
    pub type_has_dlpack: bool,
    /// Whether the type is numpy's ndarray, read by numpy's C ABI (read_numpy.rs).
    pub numpy_array: bool,
    /// Whether the type is jax's array (`jax.Array` in its MRO, compared by identity): its
    /// interface exists for device arrays only and raises for host ones, at a cost per call,
    /// so an instance is asked its device first (`__dlpack_device__`, DLPack's question).
    pub jax_array: bool,
}

impl TypeFacts {
    /// A subclass of dict's: read as a dict, nothing else looked up.
    const DICT: TypeFacts = TypeFacts {
        dict: true,
        c_api: None,
        exchange: None,
        may_have_interface: false,
        type_has_dlpack: false,
        numpy_array: false,
        jax_array: false,
    };
}

/// Types seen, with what was found of them: looked up on the type once per type (DLPack's rule
/// for the table), and the types are kept alive so that an address is never reused.
static FACTS_BY_TYPE: Mutex<Vec<(Py<PyType>, TypeFacts)>> = Mutex::new(Vec::new());
/// Types remembered at most; beyond, the one remembered longest is forgotten.
const TYPES_KEPT: usize = 64;
/// Counts the changes to what is remembered (a fact learned, a type forgotten): a thread's copy
/// of the facts it used last is current while this has not moved since it was made.
static FACTS_GENERATION: AtomicU64 = AtomicU64::new(0);

/// What this thread remembers of its negotiations, in one thread-local record (one lookup of
/// its address per function that reads it).
struct ThreadMemory {
    /// The facts this thread used last, with their type's address and the generation they
    /// were read at: a loop over one type finds them without taking the lock that the
    /// remembered types are under (which threads of a free-threaded interpreter would
    /// contend for). The address cannot be reused while the generation stands: a forgotten
    /// type is let go of only after the generation moved.
    facts: Cell<Option<(usize, u64, TypeFacts)>>,
    /// The type this thread last read by an audited path (see `read_cleanly`), and its choice
    /// when that was one of its tables (see `remembered_choice`).
    clean: Cell<CleanMark>,
    /// Whether this thread's last negotiation chose an audited path (see
    /// `settle_uncounted_run`).
    audited: Cell<bool>,
}

thread_local! {
    static THREAD_MEMORY: ThreadMemory = const {
        ThreadMemory {
            facts: Cell::new(None),
            clean: Cell::new(CleanMark { ty: 0, generation: u64::MAX, choice: None }),
            audited: Cell::new(false),
        }
    };
}

/// A type read by an audited path: its address, the generation of the facts then, and the
/// table `choose` chose for it from the first route on, when that was one (see `Remembered`),
/// which it then chooses again for every instance while the generation stands.
#[derive(Clone, Copy)]
struct CleanMark {
    ty: usize,
    generation: u64,
    choice: Option<Remembered>,
}

/// A type's choice that holds for all its instances: the C-level table libcai's glue offered
/// (which reads every instance, refusing none to the next route), or the DLPack exchange table
/// of a type that offers no C-level table. Both are found on the type, after only the dict and
/// cai.Array checks, which the type decides too.
#[derive(Clone, Copy)]
pub enum Remembered {
    OfferedCApi(CApi),
    Exchange(Exchange),
}

/// What libcai knows of `obj`'s type. The exchange table is `__dlpack_c_exchange_api__` (a
/// PyCapsule named "dlpack_exchange_api") or `__c_dlpack_exchange_api__` (an int address),
/// whose header (or a previous version's, down the chain) has DLPack major version 1.
pub fn type_facts(obj: &Bound<'_, PyAny>) -> PyResult<TypeFacts> {
    let address = obj.get_type_ptr() as usize;
    let generation = FACTS_GENERATION.load(Ordering::Acquire);
    if let Ok(Some((seen, at, facts))) = THREAD_MEMORY.try_with(|memory| memory.facts.get()) {
        if seen == address && at == generation {
            return Ok(facts);
        }
    }
    let found = remembered_facts(obj)?;
    // Tagged with the generation read before the lock: a change since makes it stale, at worst
    // read again on the next call.
    let _ = THREAD_MEMORY.try_with(|memory| memory.facts.set(Some((address, generation, found))));
    Ok(found)
}

/// Whether `obj` is read by a path whose success drops no `Py<T>` and no `PyErr` (the values
/// PyO3 defers while it does not count the thread), so that an entry may run its negotiation
/// and import uncounted (fastcall.rs's `run_assumed`, capi.rs's entries): its type is the one
/// this thread last read by such a path (the negotiation marks it: `mark_clean`), the
/// remembered facts unchanged since. Such a path is its type's DLPack exchange table, a C-level
/// table libcai's glue offered, a CAI dict (the object itself, or what its
/// `__cuda_array_interface__` gave), a cai.Array (read_array: its export counted, the one new
/// `Py<PyAny>` moved into the Read), or a numpy array read by its fields (read_numpy.rs: no
/// Python call; an import's struct keeps a raw reference, a view none).
///
/// The audit of those paths' success: the facts come from this thread's copy; the table's
/// call, the dict's reading (values.rs and read_dict.rs clear the errors they recover from by
/// `PyErr_Clear`, making no `PyErr`), the core's reading and validation, the import and the
/// cai.Array's creation make `Bound`s (let go of at once) and move the one `Py<PyAny>` (the
/// owner) into the Array. An instance its type's mark did not foresee (one that lacks the
/// interface the type's others have, taken by `__dlpack__`) takes another path, which may drop
/// errors it recovers from: the entry then attaches once afterwards (`settle_uncounted_run`),
/// which lets go of them. Should another thread change the
/// remembered facts in between, the negotiation looks the type up again, and what that drops
/// waits until PyO3 next attaches a thread it did not count (an attached entry does): late,
/// never lost.
///
/// # Safety
/// `obj` is a live object.
#[inline(always)]
pub unsafe fn read_cleanly(obj: *mut pyo3::ffi::PyObject) -> bool {
    // SAFETY: a live object (the caller's contract).
    let ty = unsafe { pyo3::ffi::Py_TYPE(obj) } as usize;
    let generation = FACTS_GENERATION.load(Ordering::Acquire);
    THREAD_MEMORY
        .try_with(|memory| memory.clean.get())
        .is_ok_and(|marked| (marked.ty, marked.generation) == (ty, generation))
}

/// Marks `obj`'s type as read by an audited path (see `read_cleanly`), and this negotiation as
/// audited.
fn mark_clean(obj: &Bound<'_, PyAny>) {
    mark_clean_with(obj, None);
}

/// `mark_clean`, remembering the type's `choice` of one of its tables.
fn mark_clean_with(obj: &Bound<'_, PyAny>, choice: Option<Remembered>) {
    let ty = obj.get_type_ptr() as usize;
    let marked = CleanMark { ty, generation: FACTS_GENERATION.load(Ordering::Acquire), choice };
    let _ = THREAD_MEMORY.try_with(|memory| {
        memory.clean.set(marked);
        memory.audited.set(true);
    });
}

/// The table `choose` chose, from the first route on, for the type this thread last read by an
/// audited path, when `obj` is of that type and the facts have not changed since: the choice
/// then is the same (a dict, a cai.Array and the routes before the table are told by the type
/// alone), so it is made again without asking. Marks the negotiation audited.
fn remembered_choice(obj: &Bound<'_, PyAny>) -> Option<Remembered> {
    let ty = obj.get_type_ptr() as usize;
    let generation = FACTS_GENERATION.load(Ordering::Acquire);
    let marked = THREAD_MEMORY.try_with(|memory| memory.clean.get()).ok()?;
    let choice = marked.choice.filter(|_| (marked.ty, marked.generation) == (ty, generation))?;
    let _ = THREAD_MEMORY.try_with(|memory| memory.audited.set(true));
    Some(choice)
}

/// The table this thread chose last, from the first route on, for `obj`'s type, while the
/// facts stand (`remembered_choice`'s answer, asked without a `Bound` and without marking the
/// negotiation audited: a caller that takes it runs no negotiation and settles nothing, its
/// reader being audited: see `read_cleanly`). The negotiation would choose it again.
///
/// # Safety
/// `obj` is a live object.
#[inline(always)]
pub unsafe fn remembered_table(obj: *mut pyo3::ffi::PyObject) -> Option<Remembered> {
    // SAFETY: a live object (the caller's contract).
    let ty = unsafe { pyo3::ffi::Py_TYPE(obj) } as usize;
    let generation = FACTS_GENERATION.load(Ordering::Acquire);
    let marked = THREAD_MEMORY.try_with(|memory| memory.clean.get()).ok()?;
    marked.choice.filter(|_| (marked.ty, marked.generation) == (ty, generation))
}

/// After an entry ran uncounted on `read_cleanly`'s word and succeeded: if this thread's last
/// negotiation did not choose an audited path after all (an instance its type's mark did not
/// foresee), attaches once, which lets go of what that path dropped (fastcall.rs's
/// `let_go_of_deferred`). A failure needs none of this: it is raised counted. Inlined, as
/// `read_cleanly` is, into the entry that calls both: the thread-local record's address is
/// then looked up once per call, not twice.
#[inline(always)]
pub fn settle_uncounted_run() {
    if !THREAD_MEMORY.try_with(|memory| memory.audited.get()).unwrap_or(false) {
        let_go_of_deferred();
    }
}

/// The facts of `obj`'s type from the remembered types, found and remembered if new.
fn remembered_facts(obj: &Bound<'_, PyAny>) -> PyResult<TypeFacts> {
    let py = obj.py();
    let ty = obj.get_type();
    let cached = |cache: &Vec<(Py<PyType>, TypeFacts)>| {
        cache.iter().find(|(seen, _)| seen.bind(py).is(&ty)).map(|(_, found)| *found)
    };
    if let Some(found) = cached(&lock_facts()) {
        return Ok(found);
    }
    // A dict type's instances are read as dicts whatever else the type has, so nothing is
    // looked up on it (a lookup may run Python code, or fail). Its flags: no code runs.
    // SAFETY: a live type object.
    let flags = unsafe { pyo3::ffi::PyType_GetFlags(ty.as_type_ptr()) };
    let found = if flags & pyo3::ffi::Py_TPFLAGS_DICT_SUBCLASS != 0 {
        TypeFacts::DICT
    } else {
        looked_up_facts(&ty)?
    };
    let mut cache = lock_facts();
    let mut evicted = None;
    if cached(&cache).is_none() {
        if cache.len() == TYPES_KEPT {
            evicted = Some(cache.remove(0));
            // Before the type is let go of (below), so that no thread's copy outlives it.
            FACTS_GENERATION.fetch_add(1, Ordering::Release);
        }
        cache.push((ty.unbind(), found));
    }
    drop(cache);
    // Let go of outside the lock: dropping a type may run Python code.
    drop(evicted);
    Ok(found)
}

/// The facts of a type that is no dict, looked up on it (with the lock released: an attribute
/// lookup may run Python code).
fn looked_up_facts(ty: &Bound<'_, PyType>) -> PyResult<TypeFacts> {
    let py = ty.py();
    Ok(TypeFacts {
        dict: false,
        c_api: lookup_c_api(ty)?,
        exchange: if exchange_hidden(ty)? { None } else { lookup_exchange_api(ty)? },
        may_have_interface: may_have_interface(ty)?,
        type_has_dlpack: ty.hasattr(intern!(py, "__dlpack__"))?,
        numpy_array: is_numpy_array_type(ty),
        jax_array: is_jax_array_type(ty),
    })
}

/// Whether `ty` inherits a DLPack exchange table from a class farther in its MRO than one that
/// defines `__cuda_array_interface__`: its instances are read by that dict, not the table.
fn exchange_hidden(ty: &Bound<'_, PyType>) -> PyResult<bool> {
    let py = ty.py();
    for name in [intern!(py, "__dlpack_c_exchange_api__"), intern!(py, "__c_dlpack_exchange_api__")] {
        if ty.hasattr(name)? {
            return interface_defined_nearer(ty, name);
        }
    }
    Ok(false)
}

fn lock_facts() -> MutexGuard<'static, Vec<(Py<PyType>, TypeFacts)>> {
    FACTS_BY_TYPE.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Whether `ty` is jax's array type: `jax.Array` (looked up where jax is imported already; a
/// jax array's type exists only then) is in its MRO, compared by identity, so that no
/// `__subclasscheck__` runs. Found once per type, with the type's other facts.
fn is_jax_array_type(ty: &Bound<'_, PyType>) -> bool {
    let py = ty.py();
    let jax_array = py
        .import(intern!(py, "sys"))
        .and_then(|sys| sys.getattr(intern!(py, "modules")))
        .and_then(|modules| modules.get_item(intern!(py, "jax")))
        .and_then(|jax| jax.getattr(intern!(py, "Array")));
    let (Ok(jax_array), Ok(mro)) = (jax_array, classes::mro(ty)) else { return false };
    mro.iter().any(|class| class.is(&jax_array))
}

/// Whether an instance of `ty` can have a `__cuda_array_interface__` attribute, now or later:
/// the type (or a base) defines one, instances can add attributes (an instance `__dict__`, or
/// attribute lookup other than the generic one, such as a `__getattr__`), or a class in its MRO
/// can still be given one (a class Python may change: the facts outlive the lookup).
fn may_have_interface(ty: &Bound<'_, PyType>) -> PyResult<bool> {
    let py = ty.py();
    if ty.hasattr(intern!(py, "__cuda_array_interface__"))? || !classes_fixed(ty) {
        return Ok(true);
    }
    let dict_offset = classes::dict_offset(ty)?;
    // SAFETY: a live type; PyType_GetSlot reads static types too since CPython 3.10.
    let getattro = unsafe { pyo3::ffi::PyType_GetSlot(ty.as_type_ptr(), pyo3::ffi::Py_tp_getattro) };
    let generic = pyo3::ffi::PyObject_GenericGetAttr as *mut c_void;
    Ok(dict_offset != 0 || getattro != generic)
}

/// Whether no class in `ty`'s MRO can gain an attribute: each is flagged immutable (static
/// types, numpy's ndarray among them, and heap types made so), where a class statement's can be
/// given one at any time. The MRO is CPython's, whatever a metaclass's own `__mro__` says
/// (classes.rs); a type without one yet counts as changeable, the answer that costs a lookup,
/// never a wrong read.
fn classes_fixed(ty: &Bound<'_, PyType>) -> bool {
    let Ok(mro) = classes::mro(ty) else { return false };
    for class in mro.iter() {
        let Ok(class) = class.cast_into::<PyType>() else { return false };
        // SAFETY: a live type object.
        let flags = unsafe { pyo3::ffi::PyType_GetFlags(class.as_type_ptr()) };
        if flags & pyo3::ffi::Py_TPFLAGS_IMMUTABLETYPE == 0 {
            return false;
        }
    }
    true
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

/// Who called an import: host memory is refused in its API's terms.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Caller {
    /// `cai.from_object` and the other Python functions.
    Python,
    /// The C API's table (`cai_python_from_object`...), which the Rust crate cai-python calls too.
    CApi,
}

impl Caller {
    /// `options.allow_host` with the words that allow host memory in this caller's terms.
    pub fn host(self, options: &CaiImportOptions) -> AllowHost {
        let how: HostWords = match self {
            Caller::Python => &"pass allow_host=True",
            Caller::CApi => {
                &"set CaiImportOptions.allow_host = 1 (from the Rust crate cai-python: ImportOptions::new().allow_host(true))"
            }
        };
        AllowHost { allowed: options.allow_host != 0, how }
    }
}

/// `cai.from_object`'s negotiation and import: what the reader read, and what its import
/// established.
#[inline(always)]
pub fn import_object(
    obj: &Bound<'_, PyAny>,
    options: &CaiImportOptions,
    caller: Caller,
) -> CaiResult<(Read, Imported)> {
    let read = read_object(obj, options, caller.host(options))?;
    let imported = import_read(obj.py(), &read, options)?;
    Ok((read, imported))
}

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
#[inline(always)]
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
fn dict_for_c(
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
/// Inlined: called out of line, it cost about 35 instructions a call in moved arguments.
#[inline(always)]
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

/// A view's or an owning import's last step where every rule was checked before anything was
/// written (`write` then writes the whole array, an owning import's owner and release
/// included, and cannot fail): where the import has nothing to do, `out` is written at once,
/// with no struct of the call's own cleared and copied (1,160 bytes); else a pooled struct
/// is, which owns what `write` handed it (released should the import refuse; a view hands it
/// nothing to own), is imported, then copied into `out`.
#[inline(always)]
fn written(
    py: Python<'_>,
    write: impl FnOnce(&mut CaiArray),
    validated: Validated,
    named: Option<CaiDLDevice>,
    stream: u64,
    options: CaiImportOptions,
    out: &mut CaiArray,
) -> CaiResult<()> {
    let options = options_for_memory(options, named);
    if import_is_inert(&options, stream) {
        write(out);
        return Ok(());
    }
    let mut taken = Taken::new();
    write(taken.array());
    import_struct(py, taken.array(), Some(validated), &options, named)?;
    taken.into_inner().copy_defined_to(out);
    Ok(())
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

/// The protocol the negotiation chose for an object.
enum Chosen<'py> {
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
    /// Exactly a numpy array, to be read by its fields (read_numpy.rs) where they say what its
    /// `__dlpack__` would: by the holder, into the struct it reads into.
    NumpyFields,
}

/// Where a negotiation starts: at the first route, or past one that declined the object (its
/// type's C-level table refused it with CAI_ERROR_NOT_SUPPORTED; a numpy array's fields could
/// not say what its `__dlpack__` would), the routes tried in this order.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Start {
    First,
    /// The first route, this thread's remembered choice for the type asked already (none).
    PastRemembered,
    PastCApi,
    PastNumpyFields,
}

/// Who holds what is read: an import keeps the producer's tensor; a borrowed view lets go of
/// it before returning, so the tensor must be the object's own memory, never a copy.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Holder {
    Import,
    View,
}

/// The negotiation, shared by the import and the view: the protocol chosen for `obj`, from
/// `start` on.
fn choose<'py>(
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
    let _ = THREAD_MEMORY.try_with(|memory| memory.audited.set(false));
    // Cheapest first: a dict; a type's DLPack exchange table (looked up once per type), before
    // a CAI property that may raise (a CPU tensor's does) and cost an exception per call. A
    // dict by one compare of its type, a subclass of one by its type's facts (under the limited
    // API a subclass check is a call for the type's flags).
    if is_exactly(obj.as_borrowed(), &raw mut pyo3::ffi::PyDict_Type) {
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
fn failure_unless_dlpack_gone(obj: &Bound<'_, PyAny>, failure: Failure) -> Failure {
    if obj.hasattr(intern!(obj.py(), "__dlpack__")).unwrap_or(true) {
        return failure;
    }
    not_an_array(obj).into()
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
#[inline(always)]
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
/// refuses with CAI_ERROR_NOT_SUPPORTED, or a numpy array's fields decline it (`read_next`).
/// Inlined into its callers, the import's: out of line, the `Read` it returned was copied
/// into the caller's frame, and the `Chosen` given it before, each copy's wide loads stalled
/// on the narrower stores that had just written it.
#[inline(always)]
fn read_chosen(
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
            Err(next) => read_next(obj, next, options, host),
        },
    }
}

/// `read_chosen` of a protocol chosen past a refusal: out of line, which ends the recursion
/// of the inlined reader.
#[inline(never)]
fn read_next(
    obj: &Bound<'_, PyAny>,
    chosen: Chosen<'_>,
    options: &CaiImportOptions,
    host: AllowHost,
) -> CaiResult<Read> {
    read_chosen(obj, chosen, options, host)
}

/// A numpy array (`Chosen::NumpyFields`) taken by its fields, its type marked as read by an
/// audited path; or, where the fields decline it, the protocol chosen past them. (The view's
/// twin, in `view_chosen`, reads into its caller's struct: written through one generic reader,
/// the import's larger result cost about 60 instructions a call in moves.)
// Inlined into both its callers, as `take_numpy_array` is into it (one call less each).
#[inline(always)]
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
/// table refuses with CAI_ERROR_NOT_SUPPORTED. Inlined with `read_by_c_api` into both callers:
/// the read goes to its use without an `Option<Read>` and a `Chosen` copied in turn (each copy's
/// wide loads stalled on the narrower stores that had just written it).
#[inline(always)]
fn read_by_c_api_or_next(
    obj: &Bound<'_, PyAny>,
    api: CApi,
    options: &CaiImportOptions,
    host: AllowHost,
) -> CaiResult<Read> {
    match read_by_c_api(obj, api, options, host)? {
        Some(read) => Ok(read),
        None => read_next(obj, choose(obj, options, Holder::Import, host, Start::PastCApi)?, options, host),
    }
}

/// `obj` read by its type's C-level table, to be owned (None: the table refused it with
/// CAI_ERROR_NOT_SUPPORTED). A type libcai's glue offered is described by its fill directly,
/// with the device the fill said and its validation; any other table is asked to `acquire`.
#[inline(always)]
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
        return Ok(Some(Read::borrowing_validated(
            array,
            described.known_device(),
            keep,
            described.validated,
        )));
    }
    Ok(match call_c_api(api, true, obj, &request_of(options), &mut array)? {
        // The struct's release (the producer's) runs with the Read or the Array made of it;
        // `obj` is kept too, for a table whose acquire forgot to.
        Called::Described(validated) => Some(Read::borrowing_validated(array, None, keep, validated)),
        Called::NotSupported => None,
    })
}

/// A description of the tensor taken from `obj`, keeping `obj` alive, with what the core
/// validated of it.
fn taken_from(obj: &Bound<'_, PyAny>, tensor: TakenTensor) -> Read {
    let TakenTensor { taken, device, validated } = tensor;
    Read::borrowing_validated(taken.into_inner(), Some(device), Some(obj.clone().unbind()), validated)
}

/// Moves what the import reads to the thread that runs it with the GIL released.
struct Unshared<T>(T);
// SAFETY: the import only reads the struct and the memory it points to, all owned by the
// caller's stack or by objects nothing else can reach until the import returns.
unsafe impl<T> Send for Unshared<T> {}

impl<T> Unshared<T> {
    /// Taken whole, so that a closure captures the wrapper, not the field inside it.
    fn into_inner(self) -> T {
        self.0
    }
}

/// Imports what a reader read, with the GIL released where the host may wait (a sync the core
/// plans, or the first load of the driver).
#[inline(always)]
pub fn import_read(py: Python<'_>, read: &Read, options: &CaiImportOptions) -> CaiResult<Imported> {
    import_struct(py, read.array(), read.validated, options, read.device)
}

/// Imports `array` as `options` say, with the GIL released where the host may wait; `named`
/// is the device its producer names, if any (a DLPack tensor's, a fill's): host memory, taken
/// with allow_host, has no pointer check; a CUDA device must be where the check finds the data
/// (the core's `import_described`). `validated` (what validation found of `array` as it is)
/// spares validating it again.
#[inline(always)]
fn import_struct(
    py: Python<'_>,
    array: &CaiArray,
    validated: Option<Validated>,
    options: &CaiImportOptions,
    named: Option<CaiDLDevice>,
) -> CaiResult<Imported> {
    let options = options_for_memory(*options, named);
    let outcome = if import_may_wait(array, &options) {
        let job = Unshared((array as *const CaiArray, &options));
        py.detach(move || {
            let (array, options) = job.into_inner();
            // SAFETY: `array` is the caller's, alive and unchanged until this returns.
            Unshared(import_described(unsafe { &*array }, validated, options, named))
        })
        .into_inner()
    } else {
        import_described(array, validated, &options, named)
    };
    Ok(outcome?)
}

/// The host memory of a DLPack producer, which names no device id that matters.
const HOST: CaiDLDevice = CaiDLDevice { device_type: CAI_DL_CPU, device_id: 0 };

/// The options an import of memory on the `named` device runs with: for host memory, no
/// pointer check (the memory was taken with allow_host; no driver is asked about a host
/// address).
#[inline(always)]
fn options_for_memory(mut options: CaiImportOptions, named: Option<CaiDLDevice>) -> CaiImportOptions {
    if named.is_some_and(|device| device.device_type == CAI_DL_CPU) {
        options.pointer_check = CAI_POINTER_CHECK_NEVER;
    }
    options
}

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
#[inline(always)]
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
#[inline(always)]
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
#[inline(always)]
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

/// A view's last step where it read into a struct of its own: the import, then `out` written
/// as far as the array is defined.
#[inline(always)]
fn import_then_copy(
    py: Python<'_>,
    array: &CaiArray,
    validated: Option<Validated>,
    options: CaiImportOptions,
    named: Option<CaiDLDevice>,
    out: &mut CaiArray,
) -> CaiResult<()> {
    import_struct(py, array, validated, &options, named)?;
    array.copy_defined_to(out);
    Ok(())
}

/// `obj`'s tensor through its type's exchange table, borrowed (the table's non-owning DLTensor
/// call; refused where the table has none), every rule checked. Inlined into the view: its
/// result is then not moved through memory.
#[inline(always)]
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
fn view_chosen(
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
