//! A Python object as the core's rules see a value (`cai::binding::dict::Value`): ints told
//! from bools, `__index__` honoured, strs borrowed as UTF-8, anything else shown by its type's
//! name. Every reader of Python objects uses it. An error it recovers from is cleared by the
//! interpreter (cpython's `clear_error`), never taken into a `PyErr`: a reading that succeeds drops
//! nothing PyO3 would defer (negotiate/type_facts.rs's `read_cleanly`).

use std::fmt;

use cai::binding::dict::Value;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyFloat, PyList, PyString, PyTuple};

use crate::classes;
use crate::cpython::{self, is_exactly, utf8, Builtin};

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

/// A scalar as the rules see it. A tuple or list here is shown by its length, unread.
pub fn scalar<'a, 'py>(object: Borrowed<'a, 'py, PyAny>) -> PyValue<'a, 'py> {
    // Exact ints and strs first (what dicts hold), each by one compare of its type; then
    // every kind in the rules' order (a bool before an int).
    if is_exactly(object, Builtin::Int) {
        return small_or_huge(object);
    }
    if is_exactly(object, Builtin::Str) {
        // SAFETY: an exact str, checked above.
        return utf8(unsafe { object.cast_unchecked::<PyString>() })
            .map_or(Value::Other(TypeOf(object)), Value::Str);
    }
    if object.is_none() {
        Value::None
    } else if object.is_instance_of::<PyBool>() {
        // A bool is one of the two singletons (its type cannot be subclassed): told by address,
        // where asking its truth is a call.
        Value::Bool(cpython::is_true(object))
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

/// An int (bools are caught before), or an object with `__index__` (numpy's integers).
fn integer<'a, 'py>(object: Borrowed<'a, 'py, PyAny>) -> Option<PyValue<'a, 'py>> {
    let index;
    let int = if cpython::is_int(object) {
        object
    } else if cpython::has_index(object) {
        // __index__ may run any code: the dict and its values are held by strong references.
        // Its error is cleared by the interpreter: no PyO3 value is made and dropped.
        index = cpython::index_or_clear(object)?;
        index.as_borrowed()
    } else {
        return None;
    };
    Some(small_or_huge(int))
}

/// An int's value: an i64, a u64 above i64::MAX, or too large either way.
fn small_or_huge<'a, 'py>(int: Borrowed<'_, 'py, PyAny>) -> PyValue<'a, 'py> {
    match cpython::int_as_i64(int) {
        Ok(small) => Value::Int(small),
        Err(overflow) if overflow < 0 => Value::HugeInt(true),
        Err(_) => cpython::int_as_u64_or_clear(int).map_or(Value::HugeInt(false), Value::UInt),
    }
}
