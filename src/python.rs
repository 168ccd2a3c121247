//! A fast path for the Python binding: reads a `__cuda_array_interface__` dict straight into a
//! CaiArray with CPython's C API, resolved at run time (dlsym in the running interpreter), so
//! libcai needs no Python headers to build and no Python to load.
//!
//! It takes only the plainly valid common case: an exact dict whose values are exact ints,
//! tuples or lists, a str and bools, with no descr and no mask. Anything else, including every
//! invalid descriptor, is left to the binding's Python rules (python/cai/_convert.py), which
//! decide and word the error: the rules are not written twice. No Python code runs here (no
//! `__index__`, `__repr__` or `__eq__` of user objects), so borrowed references stay valid.

use std::ffi::{c_char, c_int, c_void, CString};
use std::sync::OnceLock;

use crate::array::{CaiArray, CAI_MAX_NDIM};

type Object = *mut c_void;

/// The dict keys read, as interned str objects made once.
struct Keys {
    version: Object,
    shape: Object,
    typestr: Object,
    data: Object,
    strides: Object,
    stream: Object,
    descr: Object,
    mask: Object,
}

#[allow(non_snake_case)]
struct Api {
    PyDict_GetItem: unsafe extern "C" fn(Object, Object) -> Object,
    PyObject_Type: unsafe extern "C" fn(Object) -> Object,
    Py_DecRef: unsafe extern "C" fn(Object),
    PyLong_AsLongLongAndOverflow: unsafe extern "C" fn(Object, *mut c_int) -> i64,
    PyLong_AsUnsignedLongLong: unsafe extern "C" fn(Object) -> u64,
    PyErr_Occurred: unsafe extern "C" fn() -> Object,
    PyErr_Clear: unsafe extern "C" fn(),
    PyTuple_Size: unsafe extern "C" fn(Object) -> isize,
    PyTuple_GetItem: unsafe extern "C" fn(Object, isize) -> Object,
    PyList_Size: unsafe extern "C" fn(Object) -> isize,
    PyList_GetItem: unsafe extern "C" fn(Object, isize) -> Object,
    PyUnicode_AsUTF8AndSize: unsafe extern "C" fn(Object, *mut isize) -> *const c_char,
    none: Object,
    true_: Object,
    false_: Object,
    dict_type: Object,
    int_type: Object,
    tuple_type: Object,
    list_type: Object,
    str_type: Object,
    keys: Keys,
    /// Offset of `ob_type` in an object header, where the interpreter's layout was confirmed
    /// at start-up (8 on standard builds); None: ask PyObject_Type.
    type_offset: Option<usize>,
}

// SAFETY: addresses inside the interpreter, used only with the GIL held.
unsafe impl Send for Api {}
unsafe impl Sync for Api {}

fn api() -> Option<&'static Api> {
    static API: OnceLock<Option<Api>> = OnceLock::new();
    API.get_or_init(|| {
        let symbol = |name: &str| -> Option<*mut c_void> {
            let c_name = CString::new(name).ok()?;
            // SAFETY: a lookup in the global scope of the running process.
            let address = unsafe { libc::dlsym(libc::RTLD_DEFAULT, c_name.as_ptr()) };
            (!address.is_null()).then_some(address)
        };
        macro_rules! function {
            ($name:literal) => {
                // SAFETY: CPython's function of that name, with the C signature of the field.
                unsafe { std::mem::transmute_copy::<*mut c_void, _>(&symbol($name)?) }
            };
        }
        let intern: unsafe extern "C" fn(*const c_char) -> Object = function!("PyUnicode_InternFromString");
        let key = |name: &std::ffi::CStr| {
            // SAFETY: makes an immortal-for-our-purposes interned str; the reference is kept.
            let object = unsafe { intern(name.as_ptr()) };
            (!object.is_null()).then_some(object)
        };
        let keys = Keys {
            version: key(c"version")?,
            shape: key(c"shape")?,
            typestr: key(c"typestr")?,
            data: key(c"data")?,
            strides: key(c"strides")?,
            stream: key(c"stream")?,
            descr: key(c"descr")?,
            mask: key(c"mask")?,
        };
        let mut api = Api {
            PyDict_GetItem: function!("PyDict_GetItem"),
            PyObject_Type: function!("PyObject_Type"),
            Py_DecRef: function!("Py_DecRef"),
            PyLong_AsLongLongAndOverflow: function!("PyLong_AsLongLongAndOverflow"),
            PyLong_AsUnsignedLongLong: function!("PyLong_AsUnsignedLongLong"),
            PyErr_Occurred: function!("PyErr_Occurred"),
            PyErr_Clear: function!("PyErr_Clear"),
            PyTuple_Size: function!("PyTuple_Size"),
            PyTuple_GetItem: function!("PyTuple_GetItem"),
            PyList_Size: function!("PyList_Size"),
            PyList_GetItem: function!("PyList_GetItem"),
            PyUnicode_AsUTF8AndSize: function!("PyUnicode_AsUTF8AndSize"),
            none: symbol("_Py_NoneStruct")?,
            true_: symbol("_Py_TrueStruct")?,
            false_: symbol("_Py_FalseStruct")?,
            dict_type: symbol("PyDict_Type")?,
            int_type: symbol("PyLong_Type")?,
            tuple_type: symbol("PyTuple_Type")?,
            list_type: symbol("PyList_Type")?,
            str_type: symbol("PyUnicode_Type")?,
            keys,
            type_offset: None,
        };
        api.type_offset = api.confirmed_type_offset();
        Some(api)
    })
    .as_ref()
}

impl Api {
    fn type_by_call(&self, object: Object) -> Object {
        // SAFETY: a live object; the new reference to its type is dropped at once (types
        // outlive their instances), only its address is compared.
        unsafe {
            let t = (self.PyObject_Type)(object);
            (self.Py_DecRef)(t);
            t
        }
    }

    /// Finds where this interpreter keeps `ob_type` by checking candidate offsets against
    /// PyObject_Type on objects of five known types; None when no offset agrees on all.
    fn confirmed_type_offset(&self) -> Option<usize> {
        let samples = [self.none, self.true_, self.keys.version, self.dict_type, self.int_type];
        [8usize, 24].into_iter().find(|&offset| {
            samples.iter().all(|&object| {
                // SAFETY: reads one pointer inside a live object's header.
                let direct = unsafe { *(object.cast::<u8>().add(offset).cast::<Object>()) };
                direct == self.type_by_call(object)
            })
        })
    }

    fn type_of(&self, object: Object) -> Object {
        match self.type_offset {
            // SAFETY: the offset was confirmed for this interpreter's object header.
            Some(offset) => unsafe { *(object.cast::<u8>().add(offset).cast::<Object>()) },
            None => self.type_by_call(object),
        }
    }

    fn get(&self, dict: Object, key: Object) -> Option<Object> {
        // SAFETY: an exact dict and an interned str key: no Python code runs, no error is set.
        let value = unsafe { (self.PyDict_GetItem)(dict, key) };
        (!value.is_null()).then_some(value)
    }

    /// An exact int that fits in i64.
    fn int64(&self, object: Object) -> Option<i64> {
        if self.type_of(object) != self.int_type {
            return None;
        }
        let mut overflow = 0;
        // SAFETY: an exact int; an overflow is reported in `overflow`, without an exception.
        let value = unsafe { (self.PyLong_AsLongLongAndOverflow)(object, &mut overflow) };
        (overflow == 0).then_some(value)
    }

    /// An exact int in 0..2^64.
    fn uint64(&self, object: Object) -> Option<u64> {
        if self.type_of(object) != self.int_type {
            return None;
        }
        // SAFETY: an exact int; a negative or too large one sets an exception, cleared here.
        unsafe {
            let value = (self.PyLong_AsUnsignedLongLong)(object);
            if value == u64::MAX && !(self.PyErr_Occurred)().is_null() {
                (self.PyErr_Clear)();
                return None;
            }
            Some(value)
        }
    }

    /// The items of an exact tuple or list (borrowed), at most `limit` of them.
    fn items(&self, object: Object, limit: usize, out: &mut [Object; CAI_MAX_NDIM]) -> Option<usize> {
        let t = self.type_of(object);
        // SAFETY: exact tuples and lists; indexes below their size.
        unsafe {
            let (size, get): (isize, unsafe extern "C" fn(Object, isize) -> Object) = if t == self.tuple_type
            {
                ((self.PyTuple_Size)(object), self.PyTuple_GetItem)
            } else if t == self.list_type {
                ((self.PyList_Size)(object), self.PyList_GetItem)
            } else {
                return None;
            };
            let size = usize::try_from(size).ok().filter(|&n| n <= limit)?;
            for (i, slot) in out.iter_mut().enumerate().take(size) {
                *slot = get(object, i as isize);
            }
            Some(size)
        }
    }
}

/// Fills `out` (zeroed by the caller) from `dict` when it is the common, plainly valid case;
/// false otherwise, with `out` in an unspecified state.
///
/// SAFETY: call with the GIL held, `dict` a live object, `out` writable.
pub unsafe fn fill_from_dict(dict: Object, out: &mut CaiArray) -> bool {
    let Some(api) = api() else { return false };
    fill(api, dict, out).is_some()
}

fn fill(api: &Api, dict: Object, out: &mut CaiArray) -> Option<()> {
    if api.type_of(dict) != api.dict_type {
        return None;
    }
    let absent_or_none = |key: Object| api.get(dict, key).map_or(true, |v| v == api.none);
    if !absent_or_none(api.keys.descr) || !absent_or_none(api.keys.mask) {
        return None;
    }
    let version = api.int64(api.get(dict, api.keys.version)?).filter(|v| (0..=3).contains(v))?;
    out.version = version as i32;

    let mut items = [std::ptr::null_mut(); CAI_MAX_NDIM];
    let ndim = api.items(api.get(dict, api.keys.shape)?, CAI_MAX_NDIM, &mut items)?;
    out.ndim = ndim as i32;
    for (slot, &item) in out.shape.iter_mut().zip(&items[..ndim]) {
        *slot = api.int64(item).filter(|&e| e >= 0)?;
    }

    let typestr = api.get(dict, api.keys.typestr)?;
    if api.type_of(typestr) != api.str_type {
        return None;
    }
    let mut length: isize = 0;
    // SAFETY: an exact str; the UTF-8 buffer is cached in it and borrowed.
    let text = unsafe { (api.PyUnicode_AsUTF8AndSize)(typestr, &mut length) };
    if text.is_null() {
        // SAFETY: clears the encoding error (lone surrogates); the Python path reports it.
        unsafe { (api.PyErr_Clear)() };
        return None;
    }
    // SAFETY: `length` bytes at `text`, owned by the str.
    let bytes = unsafe { std::slice::from_raw_parts(text.cast::<u8>(), length as usize) };
    if bytes.contains(&0) || !out.set_typestr(std::str::from_utf8(bytes).ok()?) {
        return None;
    }

    let mut pair = [std::ptr::null_mut(); CAI_MAX_NDIM];
    if api.items(api.get(dict, api.keys.data)?, 2, &mut pair)? != 2 {
        return None;
    }
    out.data = api.uint64(pair[0])?;
    out.readonly = match pair[1] {
        flag if flag == api.true_ => 1,
        flag if flag == api.false_ => 0,
        _ => return None,
    };

    if let Some(strides) = api.get(dict, api.keys.strides).filter(|&s| s != api.none) {
        if api.items(strides, CAI_MAX_NDIM, &mut items)? != ndim {
            return None;
        }
        for (slot, &item) in out.strides.iter_mut().zip(&items[..ndim]) {
            *slot = api.int64(item)?;
        }
        out.strides_given = 1;
    }

    if version >= 3 {
        if let Some(stream) = api.get(dict, api.keys.stream).filter(|&s| s != api.none) {
            out.stream = api.uint64(stream).filter(|&s| s != 0)?;
        }
    }
    Some(())
}
