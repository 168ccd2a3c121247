//! A Python object as the core's rules see a value (`cai::binding::dict::Value`): ints told
//! from bools, `__index__` honoured, strs borrowed as UTF-8, anything else shown by its type's
//! name. Every reader of Python objects uses it. An error it recovers from is cleared by the
//! interpreter (`PyErr_Clear`), never taken into a `PyErr`: a reading that succeeds drops
//! nothing PyO3 would defer (negotiate/type_facts.rs's `read_cleanly`).

use std::fmt;

use cai::binding::dict::Value;
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyFloat, PyList, PyString, PyTuple};

use crate::classes;

/// An object the rules show by its type's name; the name is looked up only for a message.
#[derive(Clone, Copy)]
pub struct TypeOf<'a, 'py>(Borrowed<'a, 'py, PyAny>);

impl<'a, 'py> TypeOf<'a, 'py> {
    pub fn new(object: &'a Bound<'py, PyAny>) -> TypeOf<'a, 'py> {
        TypeOf(object.as_borrowed())
    }
}

impl fmt::Display for TypeOf<'_, '_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&classes::name(&self.0.get_type()))
    }
}

impl fmt::Debug for TypeOf<'_, '_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

pub type PyValue<'a, 'py> = Value<'a, TypeOf<'a, 'py>>;

/// Whether `object`'s type is exactly `ty` (a builtin type): one compare, where a subclass
/// check under the limited API is a call for the type's flags.
pub fn is_exactly(object: Borrowed<'_, '_, PyAny>, ty: *mut ffi::PyTypeObject) -> bool {
    // SAFETY: a live object's type pointer is read.
    unsafe { ffi::Py_TYPE(object.as_ptr()) == ty }
}

/// A scalar as the rules see it. A tuple or list here is shown by its length, unread.
pub fn scalar<'a, 'py>(object: Borrowed<'a, 'py, PyAny>) -> PyValue<'a, 'py> {
    // Exact ints and strs first (what dicts hold), each by one compare of its type; then
    // every kind in the rules' order (a bool before an int).
    if is_exactly(object, &raw mut ffi::PyLong_Type) {
        return small_or_huge(object);
    }
    if is_exactly(object, &raw mut ffi::PyUnicode_Type) {
        // SAFETY: an exact str, checked above.
        return utf8(unsafe { object.cast_unchecked::<PyString>() })
            .map_or(Value::Other(TypeOf(object)), Value::Str);
    }
    if object.is_none() {
        Value::None
    } else if object.is_instance_of::<PyBool>() {
        // A bool is one of the two singletons (its type cannot be subclassed): told by address,
        // where asking its truth is a call.
        // SAFETY: the address of the interpreter's True, read.
        Value::Bool(object.as_ptr() == unsafe { ffi::Py_True() })
    } else if let Some(value) = integer(object) {
        value
    } else if let Ok(text) = object.cast::<PyString>() {
        utf8(text).map_or(Value::Other(TypeOf(object)), Value::Str)
    } else if let Ok(x) = object.cast::<PyFloat>() {
        Value::Float(x.value())
    } else if let Ok(tuple) = object.cast::<PyTuple>() {
        Value::Seq { list: false, len: tuple.len(), items: &[] }
    } else if let Ok(list) = object.cast::<PyList>() {
        Value::Seq { list: true, len: list.len(), items: &[] }
    } else {
        Value::Other(TypeOf(object))
    }
}

extern "C" {
    /// A function of the stable ABI since CPython 3.8, exported by every build. Declared here:
    /// PyO3 0.28 declares it under PyPy's symbol name when the limited API is used.
    fn PyIndex_Check(object: *mut ffi::PyObject) -> std::os::raw::c_int;
}

/// An int (bools are caught before), or an object with `__index__` (numpy's integers).
fn integer<'a, 'py>(object: Borrowed<'a, 'py, PyAny>) -> Option<PyValue<'a, 'py>> {
    let py = object.py();
    let index;
    // SAFETY: type checks of a live object, borrowed for the calls.
    let is_int = unsafe { ffi::PyLong_Check(object.as_ptr()) } != 0;
    // SAFETY: as above.
    let has_index = || unsafe { PyIndex_Check(object.as_ptr()) } != 0;
    let int = if is_int {
        object
    } else if has_index() {
        // __index__ may run any code: the dict and its values are held by strong references.
        // SAFETY: a live object; PyNumber_Index returns a new reference or NULL with an error,
        // which is cleared here (by the interpreter: no PyO3 value is made and dropped).
        let raw = unsafe { ffi::PyNumber_Index(object.as_ptr()) };
        if raw.is_null() {
            // SAFETY: attached, an error set.
            unsafe { ffi::PyErr_Clear() };
            return None;
        }
        // SAFETY: the new reference PyNumber_Index returned.
        index = unsafe { Bound::from_owned_ptr(py, raw) };
        index.as_borrowed()
    } else {
        return None;
    };
    Some(small_or_huge(int))
}

/// An int's value: an i64, a u64 above i64::MAX, or too large either way.
fn small_or_huge<'a, 'py>(int: Borrowed<'_, 'py, PyAny>) -> PyValue<'a, 'py> {
    let mut overflow = 0;
    // SAFETY: an int; an overflow is reported in `overflow`, without an exception.
    let small = unsafe { ffi::PyLong_AsLongLongAndOverflow(int.as_ptr(), &mut overflow) };
    if overflow == 0 {
        return Value::Int(small);
    }
    if overflow < 0 {
        return Value::HugeInt(true);
    }
    // SAFETY: an int above i64::MAX; past u64::MAX an OverflowError is set, cleared here.
    let large = unsafe { ffi::PyLong_AsUnsignedLongLong(int.as_ptr()) };
    // SAFETY: attached; reads and clears the thread's error indicator.
    if large == u64::MAX && unsafe { !ffi::PyErr_Occurred().is_null() } {
        // SAFETY: as above.
        unsafe { ffi::PyErr_Clear() };
        return Value::HugeInt(false);
    }
    Value::UInt(large)
}

/// A str's UTF-8, borrowed from the str (immutable, and alive for 'a); None for a str that
/// has none (lone surrogates).
fn utf8<'a>(text: Borrowed<'a, '_, PyString>) -> Option<&'a str> {
    let mut size: ffi::Py_ssize_t = 0;
    // SAFETY: a live str; the UTF-8 buffer is cached in it for its lifetime.
    let data = unsafe { ffi::PyUnicode_AsUTF8AndSize(text.as_ptr(), &mut size) };
    if data.is_null() {
        // SAFETY: attached, an error set (cleared by the interpreter, no PyO3 value made).
        unsafe { ffi::PyErr_Clear() };
        return None;
    }
    // SAFETY: `size` bytes of valid UTF-8 at `data`, owned by the str.
    Some(unsafe { std::str::from_utf8_unchecked(std::slice::from_raw_parts(data.cast(), size as usize)) })
}
