//! The Python binding's native half: CPython's C API resolved at run time (dlsym in the running
//! interpreter), so libcai needs no Python headers to build and no Python to load.
//!
//! `dict` reads a `__cuda_array_interface__` dict straight into a CaiArray, taking only the
//! plainly valid common case; `functions` offers it and the import to Python as builtin
//! functions, which Python calls far more cheaply than a ctypes foreign function.

use std::ffi::{c_char, c_int, c_long, c_void, CString};
use std::sync::OnceLock;

mod dict;
mod functions;

pub use functions::python_functions;

type Object = *mut c_void;
type FastMethod = unsafe extern "C" fn(Object, *const Object, isize) -> Object;

/// The dict keys read, in the order of `dict::Key`.
const KEY_NAMES: [&std::ffi::CStr; KEYS] =
    [c"version", c"shape", c"typestr", c"data", c"strides", c"stream", c"descr", c"mask"];
const KEYS: usize = 8;

#[allow(non_snake_case)]
struct Api {
    PyDict_GetItem: unsafe extern "C" fn(Object, Object) -> Object,
    PyDict_Next: unsafe extern "C" fn(Object, *mut isize, *mut Object, *mut Object) -> c_int,
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
    PyObject_GetBuffer: unsafe extern "C" fn(Object, *mut functions::Buffer, c_int) -> c_int,
    PyBuffer_Release: unsafe extern "C" fn(*mut functions::Buffer),
    PyLong_FromLong: unsafe extern "C" fn(c_long) -> Object,
    PyBytes_FromStringAndSize: unsafe extern "C" fn(*const c_char, isize) -> Object,
    Py_IncRef: unsafe extern "C" fn(Object),
    PyCFunction_NewEx: unsafe extern "C" fn(*const functions::MethodDef, Object, Object) -> Object,
    PyTuple_New: unsafe extern "C" fn(isize) -> Object,
    PyTuple_SetItem: unsafe extern "C" fn(Object, isize, Object) -> c_int,
    PyEval_SaveThread: unsafe extern "C" fn() -> *mut c_void,
    PyEval_RestoreThread: unsafe extern "C" fn(*mut c_void),
    PyErr_SetString: unsafe extern "C" fn(Object, *const c_char),
    type_error: Object,
    none: Object,
    true_: Object,
    false_: Object,
    dict_type: Object,
    int_type: Object,
    tuple_type: Object,
    list_type: Object,
    str_type: Object,
    /// KEY_NAMES as interned str objects, made once and kept.
    keys: [Object; KEYS],
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
        let mut keys = [std::ptr::null_mut(); KEYS];
        for (slot, name) in keys.iter_mut().zip(KEY_NAMES) {
            // SAFETY: makes an interned str; the reference is kept for the process's life.
            *slot = unsafe { intern(name.as_ptr()) };
            if slot.is_null() {
                return None;
            }
        }
        let mut api = Api {
            PyDict_GetItem: function!("PyDict_GetItem"),
            PyDict_Next: function!("PyDict_Next"),
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
            PyObject_GetBuffer: function!("PyObject_GetBuffer"),
            PyBuffer_Release: function!("PyBuffer_Release"),
            PyLong_FromLong: function!("PyLong_FromLong"),
            PyBytes_FromStringAndSize: function!("PyBytes_FromStringAndSize"),
            Py_IncRef: function!("Py_IncRef"),
            PyCFunction_NewEx: function!("PyCFunction_NewEx"),
            PyTuple_New: function!("PyTuple_New"),
            PyTuple_SetItem: function!("PyTuple_SetItem"),
            PyEval_SaveThread: function!("PyEval_SaveThread"),
            PyEval_RestoreThread: function!("PyEval_RestoreThread"),
            PyErr_SetString: function!("PyErr_SetString"),
            // SAFETY: PyExc_TypeError is a variable holding the exception type.
            type_error: unsafe { *symbol("PyExc_TypeError")?.cast::<Object>() },
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
        let samples = [self.none, self.true_, self.keys[0], self.dict_type, self.int_type];
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

    /// The values of KEY_NAMES in an exact dict (borrowed; None where absent). One pass over
    /// the dict when all its keys are our interned strs, as literal keys in Python source are;
    /// a lookup per key otherwise.
    fn values(&self, dict: Object) -> [Option<Object>; KEYS] {
        let mut found = [None; KEYS];
        let (mut position, mut key, mut value) = (0isize, std::ptr::null_mut(), std::ptr::null_mut());
        // SAFETY: an exact dict, unchanged during the pass: no Python code runs here.
        while unsafe { (self.PyDict_Next)(dict, &mut position, &mut key, &mut value) } != 0 {
            match self.keys.iter().position(|&known| known == key) {
                Some(i) => found[i] = Some(value),
                None => return std::array::from_fn(|i| self.get(dict, self.keys[i])),
            }
        }
        found
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

    /// An exact tuple or list of at most `limit` items.
    fn sequence(&self, object: Object, limit: usize) -> Option<Sequence> {
        let t = self.type_of(object);
        // SAFETY: exact tuples and lists.
        let (len, get): (isize, unsafe extern "C" fn(Object, isize) -> Object) = unsafe {
            if t == self.tuple_type {
                ((self.PyTuple_Size)(object), self.PyTuple_GetItem)
            } else if t == self.list_type {
                ((self.PyList_Size)(object), self.PyList_GetItem)
            } else {
                return None;
            }
        };
        let len = usize::try_from(len).ok().filter(|&n| n <= limit)?;
        Some(Sequence { object, len, get })
    }
}

/// The items of an exact tuple or list, borrowed.
struct Sequence {
    object: Object,
    len: usize,
    get: unsafe extern "C" fn(Object, isize) -> Object,
}

impl Sequence {
    fn items(&self) -> impl Iterator<Item = Object> + '_ {
        // SAFETY: indexes below the length of a tuple or list that no Python code can change.
        (0..self.len).map(|i| unsafe { (self.get)(self.object, i as isize) })
    }
}
