//! Every raw CPython call of the binding (`pyo3::ffi`), behind small wrappers; the rest of
//! python/src uses PyO3's API and these, and names no `pyo3::ffi` item. Four files: this one
//! (objects, numbers, strs, capsules, errors, type queries), interpreter.rs (which interpreter
//! the thread is attached to), fastcall.rs (the raw `METH_FASTCALL` entries, their argument
//! matching and the ways into a body) and object.rs (`cai.Array`'s type object, made from a
//! spec, with its objects' layout, allocation, spare objects and deallocation).
//!
//! A wrapper is an `#[inline]` function taking PyO3's tokens (`Python`, `Bound`, `Borrowed`)
//! and returning safe values; one that is sound only under a condition the types cannot carry
//! (a raw pointer's liveness, an attached thread without a token, a lock held) is an `unsafe
//! fn` whose `# Safety` says it, and its callers keep their `// SAFETY:` comments.
//!
//! The audit: the patterns allowed here, and why each is sound.
//! - **Queries of a live object.** A `Bound` or `Borrowed` is a live object and a proof that
//!   the thread is attached: reading its type, comparing it with a builtin type or singleton,
//!   asking a type's flags or slot, reading an int or a str's UTF-8 (cached in the str for its
//!   life) are calls CPython allows on any live object. A raw pointer is taken only by an
//!   `unsafe fn` whose contract is that it is live (an argument of the interpreter's call, an
//!   object a C consumer holds).
//! - **Errors cleared where they are raised.** A reading that recovers from a failure (an
//!   absent attribute, an int too large, a str without UTF-8) clears the exception in the
//!   interpreter (`PyErr_Clear`) rather than taking it into a `PyErr`: a reading that succeeds
//!   then drops nothing PyO3 would defer, which is what lets an entry run uncounted
//!   (fastcall.rs's `run_assumed`, negotiate/type_facts.rs's `read_cleanly`).
//! - **References made and let go of by hand.** A new reference CPython returns goes straight
//!   into a `Bound` (`from_owned_ptr_or_err`); `Kept` holds one without PyO3's count and lets go
//!   of it by `Py_DecRef`, for holders that are only dropped attached; `incref`/`decref` are for
//!   references a C struct owns (its `owner`), each paired in its caller's audit.
//! - **Capsules.** A capsule is made of a static table and a static name (never freed, no
//!   destructor), or of a tensor and a destructor that deletes it unless a consumer took it;
//!   a pointer is taken only after the capsule's name is checked.
//! - **Entries** (fastcall.rs):
//!   - The interpreter calls an entry with an attached thread state, `args` holding `nargs`
//!     positional values followed by one value per entry of `kwnames` (a tuple of str, or NULL),
//!     all borrowed for the call: the matching reads them with calls that make no
//!     reference and no PyO3 value.
//!   - PyO3's own count of attached threads may not know of this thread there (no PyO3
//!     trampoline ran), and a `Py<T>` or `PyErr` dropped while it does not would wait in PyO3's
//!     deferred decref pool. So a body runs inside `Python::attach` (`run_attached`), PyO3's
//!     public, sound way in: the thread is attached already, so it only counts it (about 190
//!     instructions with PyO3's checks), and every drop in the body is immediate. Nothing of PyO3
//!     is made before it or outlives it: the matched arguments stay raw borrowed pointers.
//!   - A body whose success path drops no `Py<T>` and no `PyErr` (audited where it is written,
//!     and chosen per call by what the arguments and the object are) runs uncounted instead
//!     (`run_assumed`), on the interpreter's word that the thread is attached; its failure is
//!     raised inside `Python::attach`, which empties PyO3's pool of what the failed body deferred.
//!   - A panic in a body is caught (it must not unwind into C) and raised as PyO3's
//!     PanicException, as PyO3's own entry points do. Where `Python::attach` itself refuses (the
//!     interpreter finalizing), the body runs on `Python::assume_attached`: the thread is attached
//!     (the interpreter called in), and a drop that waits in PyO3's pool then is the one cost, at
//!     exit only.
//!   - A callback that may run on any thread, attached or not (a DLPack tensor's deleter, a C
//!     consumer's release), runs its body at once where this thread is attached already
//!     (`attachment`: the interpreter's own "thread state attached here" query, found at run
//!     time, compared with this thread's own state), and otherwise attaches with the
//!     interpreter's `PyGILState_Ensure` and `PyGILState_Release` (`with_thread_attached`). Its
//!     body, like `run_assumed`'s, drops no `Py<T>` and no `PyErr`.
//!   - Every way of attaching above goes through the PyGILState API, which serves the main
//!     interpreter alone: from a thread attached to a subinterpreter (an extension imported in
//!     the main interpreter and used in a legacy subinterpreter, which shares the main GIL), it
//!     would wait forever for the GIL that thread holds. So where a thread attached to another
//!     interpreter would attach, it does not (`in_a_subinterpreter`): an entry refuses with a
//!     RuntimeError (`refuse_subinterpreter`), a failure is raised as it is, a callback leaks
//!     what it would have let go of (as at exit).
//!   - The interned names are made once and kept for the life of the process (a few small
//!     strings), so a pointer read from a signature is always a live str.
//! - **Type object** (object.rs):
//!   - An object of such a type is `Layout<T>`: CPython's header, the weak reference list, the
//!     value. `Instance::new_with` has the value written into a fresh allocation (or a spare
//!     object made new, see `spare`) before anything else sees the object (a writer that unwinds
//!     leaks the object, never handing it out); `dealloc` drops the value once, after the
//!     collector let go of the object. The type allows no instantiation from Python (`tp_new`
//!     refuses), no subclass (no `Py_TPFLAGS_BASETYPE`) and no attribute of its own (no dict), so
//!     an object whose type is this one always holds a live value.
//!   - The value keeps Python objects only as `Kept` (object.rs), let go of by `Py_DecRef`: dropping
//!     it needs an attached thread, not PyO3's count of it, so the deallocation, which the
//!     interpreter runs attached, lets go of them at once.
//!   - Every slot and method the interpreter calls runs its body through fastcall.rs's
//!     `run_attached` (panics caught, errors raised); the deallocation and the traversal, which
//!     may not raise, catch panics themselves.
//!   - Spare objects are kept only where a GIL serializes every allocation and deallocation of
//!     the type (see `spare`).
//! - **C tables** (the C-level CAI table of an offered type, python/src/offer/offered.rs):
//!   - `view` and `acquire` are called by a consumer attached to the interpreter (the table's
//!     contract), with `obj` a live object it holds, `out` writable and `error` NULL or
//!     writable. They use this module's calls that make no PyO3 value, so nothing waits in PyO3's
//!     deferred-decref pool, and they never unwind (one panic boundary each).
//!   - A record is leaked when its type is offered and never freed: a consumer may have cached
//!     the table's address for as long as the type lives, and the record holds a strong
//!     reference to its type, so the two live as long as the process.
//! - **Fork and subinterpreters.** interpreter.rs: libcai serves the main interpreter alone,
//!   and whatever would attach through the PyGILState API asks first where the thread is.

pub mod fastcall;
pub mod interpreter;
pub mod object;

pub use object::Kept;

use std::ptr::NonNull;

use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString, PyTuple, PyType};
use pyo3::Borrowed;

/// CPython's object header and its types, for signatures the interpreter calls (entries,
/// slots, capsule destructors, C tables) and for layouts that start with a header. Naming them
/// makes no call.
pub use ffi::{PyObject, PyTypeObject, Py_ssize_t};
/// The C types of the boundary, so that the rest of the binding writes `cpython::` for all of C.
pub use std::ffi::{c_char, c_int, c_uint, c_void, CStr, CString};

/// A capsule's destructor, as CPython calls it with the capsule.
pub type CapsuleDestructor = unsafe extern "C" fn(*mut PyObject);

/// The builtin types the readers tell objects apart by, with one compare of the type pointer.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Builtin {
    Int,
    Str,
    Dict,
    Tuple,
    List,
}

#[inline]
fn builtin_type(ty: Builtin) -> *mut PyTypeObject {
    match ty {
        Builtin::Int => &raw mut ffi::PyLong_Type,
        Builtin::Str => &raw mut ffi::PyUnicode_Type,
        Builtin::Dict => &raw mut ffi::PyDict_Type,
        Builtin::Tuple => &raw mut ffi::PyTuple_Type,
        Builtin::List => &raw mut ffi::PyList_Type,
    }
}

/// Whether `object`'s type is exactly `ty`: one compare, where a subclass check under the
/// limited API is a call for the type's flags.
#[inline]
pub fn is_exactly(object: Borrowed<'_, '_, PyAny>, ty: Builtin) -> bool {
    // SAFETY: a live object's type pointer is read.
    unsafe { ffi::Py_TYPE(object.as_ptr()) == builtin_type(ty) }
}

/// The address of `object`'s type, for caches keyed by it (read without a reference).
///
/// # Safety
/// `object` is a live object.
#[inline]
pub unsafe fn type_address(object: *mut PyObject) -> usize {
    // SAFETY: a live object (the contract).
    unsafe { ffi::Py_TYPE(object) as usize }
}

/// Whether `object` is the interpreter's `True` (the bool type cannot be subclassed: a bool is
/// told by address, where asking its truth is a call).
#[inline]
pub fn is_true(object: Borrowed<'_, '_, PyAny>) -> bool {
    // SAFETY: the address of the interpreter's True, read.
    object.as_ptr() == unsafe { ffi::Py_True() }
}

/// Whether `object` is an int or of a subclass of int (its type's flags).
#[inline]
pub fn is_int(object: Borrowed<'_, '_, PyAny>) -> bool {
    // SAFETY: a type check of a live object.
    unsafe { ffi::PyLong_Check(object.as_ptr()) != 0 }
}

extern "C" {
    /// A function of the stable ABI since CPython 3.8, exported by every build. Declared here:
    /// PyO3 0.28 declares it under PyPy's symbol name when the limited API is used.
    fn PyIndex_Check(object: *mut PyObject) -> c_int;
    /// A function of every CPython since 3.9, in the stable ABI since 3.12. Declared here: PyO3
    /// declares it only for 3.12's limited API, and this module's is 3.10's.
    fn PyObject_VectorcallMethod(
        name: *mut PyObject,
        args: *const *mut PyObject,
        nargsf: usize,
        kwnames: *mut PyObject,
    ) -> *mut PyObject;
}

/// Whether `object`'s type has `__index__` (numpy's integers).
#[inline]
pub fn has_index(object: Borrowed<'_, '_, PyAny>) -> bool {
    // SAFETY: a type check of a live object.
    unsafe { PyIndex_Check(object.as_ptr()) != 0 }
}

/// `operator.index(object)`, or None with its error cleared by the interpreter (no `PyErr`
/// made). `__index__` may run any code.
#[inline]
pub fn index_or_clear<'py>(object: Borrowed<'_, 'py, PyAny>) -> Option<Bound<'py, PyAny>> {
    let py = object.py();
    // SAFETY: a live object; a new reference or NULL with an error set.
    let raw = unsafe { ffi::PyNumber_Index(object.as_ptr()) };
    if raw.is_null() {
        clear_error(py);
        return None;
    }
    // SAFETY: the new reference PyNumber_Index returned.
    Some(unsafe { Bound::from_owned_ptr(py, raw) })
}

/// An int's value as an i64, or the side it overflows to (-1 below, 1 above), with no
/// exception set. For an int (another object is read by `__index__`).
#[inline]
pub fn int_as_i64(int: Borrowed<'_, '_, PyAny>) -> Result<i64, c_int> {
    let mut overflow = 0;
    // SAFETY: a live object; an overflow is reported in `overflow`, without an exception.
    let small = unsafe { ffi::PyLong_AsLongLongAndOverflow(int.as_ptr(), &mut overflow) };
    if overflow == 0 {
        Ok(small)
    } else {
        Err(overflow)
    }
}

/// An int above i64::MAX as a u64; None past u64::MAX (its OverflowError cleared).
#[inline]
pub fn int_as_u64_or_clear(int: Borrowed<'_, '_, PyAny>) -> Option<u64> {
    // SAFETY: a live int; past u64::MAX an OverflowError is set, cleared below.
    let large = unsafe { ffi::PyLong_AsUnsignedLongLong(int.as_ptr()) };
    if large == u64::MAX && error_is_set(int.py()) {
        clear_error(int.py());
        return None;
    }
    Some(large)
}

/// An exact int that fits an i64 (an overflow's exception cleared); None for anything else.
///
/// # Safety
/// Attached; `value` is NULL or a live object.
#[inline]
pub unsafe fn exact_small_int(value: *mut PyObject) -> Option<i64> {
    // SAFETY: the caller's contract: a type check and a read of a live object.
    unsafe {
        if value.is_null() || ffi::PyLong_CheckExact(value) == 0 {
            return None;
        }
        let wide = ffi::PyLong_AsLongLong(value);
        if wide == -1 && !ffi::PyErr_Occurred().is_null() {
            ffi::PyErr_Clear();
            return None;
        }
        Some(wide)
    }
}

/// A str's UTF-8, borrowed from the str (immutable, and alive for 'a); None for a str that
/// has none (lone surrogates), its error cleared.
#[inline]
pub fn utf8<'a>(text: Borrowed<'a, '_, PyString>) -> Option<&'a str> {
    let mut size: Py_ssize_t = 0;
    // SAFETY: a live str; the UTF-8 buffer is cached in it for its lifetime.
    let data = unsafe { ffi::PyUnicode_AsUTF8AndSize(text.as_ptr(), &mut size) };
    if data.is_null() {
        clear_error(text.py());
        return None;
    }
    // SAFETY: `size` bytes of valid UTF-8 at `data`, owned by the str.
    Some(unsafe { std::str::from_utf8_unchecked(std::slice::from_raw_parts(data.cast(), size as usize)) })
}

/// Item `i` of a tuple, borrowed for as long as the tuple is (tuples never change); None past
/// the end (the IndexError cleared).
#[inline]
pub fn tuple_item<'a, 'py>(tuple: Borrowed<'a, 'py, PyTuple>, i: usize) -> Option<Borrowed<'a, 'py, PyAny>> {
    // SAFETY: a live tuple; a borrowed reference, or NULL with an IndexError past the end.
    let ptr = unsafe { ffi::PyTuple_GetItem(tuple.as_ptr(), i as Py_ssize_t) };
    if ptr.is_null() {
        clear_error(tuple.py());
        return None;
    }
    // SAFETY: non-NULL, borrowed from the tuple, which outlives 'a.
    Some(unsafe { Borrowed::from_ptr(tuple.py(), ptr) })
}

/// The dict's next key and value from `position` (0 first), borrowed; None at the end.
///
/// # Safety
/// The dict is locked for the whole walk (free-threading: its critical section) or the GIL is
/// held, no Python code runs between the steps, and a borrowed value is taken as a strong
/// reference before the next step if it is kept.
#[inline]
pub unsafe fn dict_next<'a, 'py>(
    dict: &'a Bound<'py, PyDict>,
    position: &mut Py_ssize_t,
) -> Option<(Borrowed<'a, 'py, PyAny>, Borrowed<'a, 'py, PyAny>)> {
    let (mut key, mut value) = (std::ptr::null_mut(), std::ptr::null_mut());
    // SAFETY: a live dict, walked under the caller's contract.
    if unsafe { ffi::PyDict_Next(dict.as_ptr(), position, &mut key, &mut value) } == 0 {
        return None;
    }
    // SAFETY: live entries of the dict, borrowed under the caller's contract.
    unsafe { Some((Borrowed::from_ptr(dict.py(), key), Borrowed::from_ptr(dict.py(), value))) }
}

/// `getattr(object, name)`, or None where it raised AttributeError (cleared by the
/// interpreter: no `PyErr` is made when the attribute is absent).
#[inline]
pub fn getattr_or_none<'py>(
    object: &Bound<'py, PyAny>,
    name: &Bound<'py, PyString>,
) -> PyResult<Option<Bound<'py, PyAny>>> {
    let py = object.py();
    // SAFETY: a live object and a str; a new reference or NULL with an error set.
    let found = unsafe { ffi::PyObject_GetAttr(object.as_ptr(), name.as_ptr()) };
    if found.is_null() {
        // SAFETY: attached, an error set.
        if unsafe { ffi::PyErr_ExceptionMatches(ffi::PyExc_AttributeError) } != 0 {
            clear_error(py);
            return Ok(None);
        }
        return Err(PyErr::fetch(py));
    }
    // SAFETY: the new reference PyObject_GetAttr returned.
    Ok(Some(unsafe { Bound::from_owned_ptr(py, found) }))
}

/// `self_.name(*, **keywords)` by vectorcall: `args` is the object then one value per name of
/// `kwnames` (at most 7); None (the exception left set) on failure, for the caller to match or
/// fetch.
///
/// # Safety
/// `kwnames` is a tuple of exactly `args.len() - 1` strs (CPython reads one value per name).
#[inline]
pub unsafe fn call_method_keywords<'py>(
    name: &Bound<'py, PyString>,
    args: &[Borrowed<'_, 'py, PyAny>],
    kwnames: &Bound<'py, PyTuple>,
) -> Option<Bound<'py, PyAny>> {
    let py = name.py();
    debug_assert_eq!(args.len(), kwnames.len() + 1);
    // A `Borrowed` is one pointer (repr(transparent) over it is not promised): copied out.
    let mut raw = [std::ptr::null_mut(); 8];
    assert!(args.len() <= raw.len(), "call_method_keywords: at most 7 keywords");
    for (slot, arg) in raw.iter_mut().zip(args) {
        *slot = arg.as_ptr();
    }
    // SAFETY: live objects borrowed for the call: the method's self, the one positional
    // argument, then one value per name of `kwnames` (the caller's contract), all inside `raw`
    // (checked above); a new reference or NULL with an exception set comes back.
    let result = unsafe { PyObject_VectorcallMethod(name.as_ptr(), raw.as_ptr(), 1, kwnames.as_ptr()) };
    // SAFETY: a new reference, or NULL.
    unsafe { Bound::from_owned_ptr_or_opt(py, result) }
}

/// Whether the exception set is a TypeError (or a subclass).
#[inline]
pub fn type_error_is_set(_py: Python<'_>) -> bool {
    // SAFETY: attached (the token); a query of this thread's exception.
    unsafe { ffi::PyErr_ExceptionMatches(ffi::PyExc_TypeError) == 1 }
}

/// Whether an exception is set on this thread.
#[inline]
pub fn error_is_set(_py: Python<'_>) -> bool {
    // SAFETY: attached (the token); a query of this thread's exception.
    unsafe { !ffi::PyErr_Occurred().is_null() }
}

/// Clears this thread's exception, in the interpreter (no `PyErr` is made or dropped).
#[inline]
pub fn clear_error(_py: Python<'_>) {
    // SAFETY: attached (the token).
    unsafe { ffi::PyErr_Clear() }
}

/// Raises `exception` (a builtin one) with `message`, with no `PyErr` made, for a C function
/// that reports by status.
///
/// # Safety
/// The thread is attached to the interpreter.
#[inline]
pub unsafe fn set_error(exception: Exception, message: &str) {
    let text = CString::new(message).unwrap_or_default();
    let exception = match exception {
        // SAFETY: builtin exception types, read.
        Exception::System => unsafe { ffi::PyExc_SystemError },
        // SAFETY: as above.
        Exception::Runtime => unsafe { ffi::PyExc_RuntimeError },
    };
    // SAFETY: attached (the contract); a builtin exception type and a C string, copied.
    unsafe { ffi::PyErr_SetString(exception, text.as_ptr()) };
}

/// The builtin exceptions `set_error` raises.
#[derive(Clone, Copy)]
pub enum Exception {
    System,
    Runtime,
}

/// `type.__flags__` has `Py_TPFLAGS_DICT_SUBCLASS`.
#[inline]
pub fn is_dict_subclass(ty: &Bound<'_, PyType>) -> bool {
    // SAFETY: a live type object's flags, read.
    unsafe { ffi::PyType_GetFlags(ty.as_type_ptr()) & ffi::Py_TPFLAGS_DICT_SUBCLASS != 0 }
}

/// `type.__flags__` has `Py_TPFLAGS_IMMUTABLETYPE`: no attribute of the class can change.
#[inline]
pub fn is_immutable_type(ty: &Bound<'_, PyType>) -> bool {
    // SAFETY: a live type object's flags, read.
    unsafe { ffi::PyType_GetFlags(ty.as_type_ptr()) & ffi::Py_TPFLAGS_IMMUTABLETYPE != 0 }
}

/// Whether the type's `tp_getattro` is the generic one (`object.__getattribute__`'s).
#[inline]
pub fn has_generic_getattr(ty: &Bound<'_, PyType>) -> bool {
    // SAFETY: a live type; PyType_GetSlot reads static types too since CPython 3.10.
    let getattro = unsafe { ffi::PyType_GetSlot(ty.as_type_ptr(), ffi::Py_tp_getattro) };
    getattro == ffi::PyObject_GenericGetAttr as *mut c_void
}

/// Whether `object` is an instance of `ty` or of a subclass (`PyObject_TypeCheck`: no
/// `__instancecheck__` runs).
///
/// # Safety
/// Attached; `object` and `ty` are live.
#[inline]
pub unsafe fn type_check(object: *mut PyObject, ty: *mut PyTypeObject) -> bool {
    // SAFETY: the contract.
    unsafe { ffi::PyObject_TypeCheck(object, ty) != 0 }
}

/// `object`'s type.
///
/// # Safety
/// `object` is live.
#[inline]
pub unsafe fn type_of(object: *mut PyObject) -> *mut PyTypeObject {
    // SAFETY: the contract.
    unsafe { ffi::Py_TYPE(object) }
}

/// Whether `sub` is `ty` or a subtype of it (its MRO, no `__subclasscheck__`).
///
/// # Safety
/// Attached; both are live types.
#[inline]
pub unsafe fn is_subtype(sub: *mut PyTypeObject, ty: *mut PyTypeObject) -> bool {
    // SAFETY: the contract.
    unsafe { ffi::PyType_IsSubtype(sub, ty) != 0 }
}

/// Tells `ty` that its dict was changed behind its back (its attribute cache is invalidated).
#[inline]
pub fn type_modified(ty: &Bound<'_, PyType>) {
    // SAFETY: a live type.
    unsafe { ffi::PyType_Modified(ty.as_type_ptr()) }
}

/// Whether `object` is exactly a capsule (by its type).
///
/// # Safety
/// Attached; `object` is live.
#[inline]
pub unsafe fn is_capsule(object: *mut PyObject) -> bool {
    // SAFETY: the contract.
    unsafe { ffi::PyCapsule_CheckExact(object) != 0 }
}

/// A capsule of a static table and a static name, with no destructor: its pointer is the
/// table's address, as the C consumers that read it expect.
#[inline]
pub fn static_capsule<'py, T>(
    py: Python<'py>,
    table: &'static T,
    name: &'static CStr,
) -> PyResult<Bound<'py, PyAny>> {
    let table = table as *const T as *mut c_void;
    // SAFETY: a static table and a static name; neither needs a destructor, nothing writes
    // through the pointer (the capsule only hands it out).
    let capsule = unsafe { ffi::PyCapsule_New(table, name.as_ptr(), None) };
    // SAFETY: a new reference, or NULL with an exception set.
    unsafe { Bound::from_owned_ptr_or_err(py, capsule) }
}

/// A capsule owning `pointer` under `name`, which `destructor` frees unless a consumer took it
/// (renamed it); on failure the pointer is still the caller's.
///
/// # Safety
/// `destructor` frees a pointer of `name` at most once (checking the capsule's name first).
#[inline]
pub unsafe fn owning_capsule<'py>(
    py: Python<'py>,
    pointer: *mut c_void,
    name: &'static CStr,
    destructor: CapsuleDestructor,
) -> PyResult<Bound<'py, PyAny>> {
    // SAFETY: a static name; the destructor's contract is the caller's.
    let capsule = unsafe { ffi::PyCapsule_New(pointer, name.as_ptr(), Some(destructor)) };
    // SAFETY: a new reference, or NULL with an exception set.
    unsafe { Bound::from_owned_ptr_or_err(py, capsule) }
}

/// The pointer of a capsule named `name`, or None (no error set) for any other object or name.
///
/// # Safety
/// Attached; `capsule` is live.
#[inline]
pub unsafe fn capsule_pointer(capsule: *mut PyObject, name: &CStr) -> Option<NonNull<c_void>> {
    // SAFETY: capsule calls on a live object, the name checked first (no error when it differs).
    unsafe {
        if ffi::PyCapsule_IsValid(capsule, name.as_ptr()) != 1 {
            return None;
        }
        NonNull::new(ffi::PyCapsule_GetPointer(capsule, name.as_ptr()))
    }
}

/// The pointer of `capsule` if it is a capsule named `name` (None: numpy's unnamed table), or
/// NULL with the refusal left set, for the caller to clear or fetch.
#[inline]
pub fn capsule_pointer_or_error(capsule: &Bound<'_, PyAny>, name: Option<&CStr>) -> *mut c_void {
    let name = name.map_or(std::ptr::null(), CStr::as_ptr);
    // SAFETY: a live object; PyCapsule_GetPointer checks its type and name (NULL with an
    // exception when either differs).
    unsafe { ffi::PyCapsule_GetPointer(capsule.as_ptr(), name) }
}

/// Takes a capsule's pointer and renames it `used`, if it is named `name`: from then on its
/// destructor (and any other consumer) leaves the pointer alone.
///
/// # Safety
/// Attached; `capsule` is live and locked for the call (its critical section under
/// free-threading) so that no other thread takes the same pointer.
#[inline]
pub unsafe fn take_capsule_pointer(
    capsule: *mut PyObject,
    name: &CStr,
    used: &'static CStr,
) -> Option<*mut c_void> {
    // SAFETY: the contract; the name is checked before the pointer is taken.
    unsafe {
        if ffi::PyCapsule_IsValid(capsule, name.as_ptr()) != 1 {
            return None;
        }
        let pointer = ffi::PyCapsule_GetPointer(capsule, name.as_ptr());
        ffi::PyCapsule_SetName(capsule, used.as_ptr());
        Some(pointer)
    }
}

/// Takes one more strong reference to `object`, which a C struct then owns (its `owner`).
///
/// # Safety
/// Attached; `object` is live. The caller's audit pairs it with a `decref`.
#[inline]
pub unsafe fn incref(object: *mut PyObject) {
    // SAFETY: the contract.
    unsafe { ffi::Py_IncRef(object) }
}

/// Lets go of a strong reference the caller owns.
///
/// # Safety
/// Attached; `object` is a strong reference the caller gives up.
#[inline]
pub unsafe fn decref(object: *mut PyObject) {
    // SAFETY: the contract.
    unsafe { ffi::Py_DecRef(object) }
}
