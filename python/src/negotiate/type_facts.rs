//! What libcai knows of a producer's type, found once per type and kept: fixed facts only
//! (its tables, dict-ness, immutability, numpy's and jax's array types by identity), and this
//! thread's record of the type it last read by an audited path (see `read_cleanly`).

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};

use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::PyType;

use crate::classes;
use crate::cpython::fastcall::let_go_of_deferred;
use crate::cpython::{self, PyObject};
use crate::read::c_api::{interface_defined_nearer, lookup_c_api, CApi};
use crate::read::exchange::{lookup_exchange_api, Exchange};
use crate::read::numpy::is_numpy_array_type;

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
    /// Whether the type is numpy's ndarray, read by numpy's C ABI (read/numpy.rs).
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
/// table the pipeline chose for it first, when that was one (see `Remembered`),
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
/// and import uncounted (cpython/fastcall.rs's `run_assumed`, entry/c_api_table.rs's entries):
/// its type is the one this thread last read by such a path (the negotiation marks it:
/// `mark_clean`), the remembered facts unchanged since. Such a path is its type's DLPack
/// exchange table, a C-level table libcai's glue offered, a CAI dict (the object itself, or
/// what its `__cuda_array_interface__` gave), a cai.Array (read_array: its export counted, the
/// one new `Py<PyAny>` moved into the Read), or a numpy array read by its fields
/// (read/numpy.rs: no Python call; an import's struct keeps a raw reference, a view none).
///
/// The audit of those paths' success: the facts come from this thread's copy; the table's
/// call, the dict's reading (values.rs and read/dict.rs clear the errors they recover from by
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
pub unsafe fn read_cleanly(obj: *mut PyObject) -> bool {
    // SAFETY: the caller's contract.
    !matches!(unsafe { cleanliness(obj) }, Clean::No)
}

/// Whether `obj` is read by an audited path (`read_cleanly`), and where that path is the table
/// this thread chose first for its type, which table (`remembered_choice`'s answer, found
/// in the same read of this thread's record): an entry then hands it to the pipeline, which
/// reads `obj` by it with no negotiation, and needs no settling after.
pub enum Clean {
    No,
    Yes,
    ByRemembered(Remembered),
}

/// `obj`'s `Clean`.
///
/// # Safety
/// `obj` is a live object.
pub unsafe fn cleanliness(obj: *mut PyObject) -> Clean {
    // SAFETY: a live object (the caller's contract).
    let ty = unsafe { cpython::type_address(obj) };
    let generation = FACTS_GENERATION.load(Ordering::Acquire);
    match THREAD_MEMORY.try_with(|memory| memory.clean.get()) {
        Ok(marked) if (marked.ty, marked.generation) == (ty, generation) => {
            marked.choice.map_or(Clean::Yes, Clean::ByRemembered)
        }
        _ => Clean::No,
    }
}

/// Marks `obj`'s type as read by an audited path (see `read_cleanly`), and this negotiation as
/// audited.
pub(super) fn mark_clean(obj: &Bound<'_, PyAny>) {
    mark_clean_with(obj, None);
}

/// Marks this thread's negotiation as one that has chosen no audited path yet (see
/// `settle_uncounted_run`).
pub(super) fn mark_unaudited() {
    let _ = THREAD_MEMORY.try_with(|memory| memory.audited.set(false));
}

/// `mark_clean`, remembering the type's `choice` of one of its tables.
pub(super) fn mark_clean_with(obj: &Bound<'_, PyAny>, choice: Option<Remembered>) {
    let ty = obj.get_type_ptr() as usize;
    let marked = CleanMark { ty, generation: FACTS_GENERATION.load(Ordering::Acquire), choice };
    let _ = THREAD_MEMORY.try_with(|memory| {
        memory.clean.set(marked);
        memory.audited.set(true);
    });
}

/// The table the pipeline chose first for the type this thread last read by an
/// audited path, when `obj` is of that type and the facts have not changed since: the choice
/// then is the same (a dict, a cai.Array and the routes before the table are told by the type
/// alone), so it is made again without asking. Marks the negotiation audited.
pub(super) fn remembered_choice(obj: &Bound<'_, PyAny>) -> Option<Remembered> {
    let ty = obj.get_type_ptr() as usize;
    let generation = FACTS_GENERATION.load(Ordering::Acquire);
    let marked = THREAD_MEMORY.try_with(|memory| memory.clean.get()).ok()?;
    let choice = marked.choice.filter(|_| (marked.ty, marked.generation) == (ty, generation))?;
    let _ = THREAD_MEMORY.try_with(|memory| memory.audited.set(true));
    Some(choice)
}

/// After an entry ran uncounted on `read_cleanly`'s word and succeeded: if this thread's last
/// negotiation did not choose an audited path after all (an instance its type's mark did not
/// foresee), attaches once, which lets go of what that path dropped (cpython/fastcall.rs's
/// `let_go_of_deferred`). A failure needs none of this: it is raised counted.
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
    let found = if cpython::is_dict_subclass(&ty) { TypeFacts::DICT } else { looked_up_facts(&ty)? };
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
pub(super) fn may_have_interface(ty: &Bound<'_, PyType>) -> PyResult<bool> {
    let py = ty.py();
    if ty.hasattr(intern!(py, "__cuda_array_interface__"))? || !classes_fixed(ty) {
        return Ok(true);
    }
    let dict_offset = classes::dict_offset(ty)?;
    Ok(dict_offset != 0 || !cpython::has_generic_getattr(ty))
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
        if !cpython::is_immutable_type(&class) {
            return false;
        }
    }
    true
}
