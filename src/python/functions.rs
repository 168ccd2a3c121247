//! The binding's native functions, made at run time as CPython builtins (PyCFunction_NewEx
//! with METH_FASTCALL). Python calls a builtin for tens of nanoseconds where a ctypes foreign
//! call spends most of a microsecond converting its arguments; ctypes structs arrive through
//! the buffer protocol.
//!
//! - `fill(desc, array) -> bool`: the dict reader alone (see `dict`).
//! - `import_dict(desc, array, options, error) -> bytes | int`: the reader, then `cai_import`.
//!   On success the CaiPointerInfo as bytes (empty when the pointer was not checked, which
//!   spares making a ctypes struct per import); -1 (CAI_PYTHON_NOT_HANDLED) when the dict
//!   needs the Python rules; else the failing status, with `error` filled in.
//!   The GIL is released around the import whenever it can wait on the host: a producer
//!   stream to sync with, or a driver not loaded yet (dlopen and cuInit).
//!
//! Wrong arguments raise TypeError; nothing here runs Python code or panics into Python.

use std::ffi::{c_char, c_int, c_long, c_void};
use std::panic::{catch_unwind, AssertUnwindSafe};

use super::dict::fill_from_dict;
use super::{api, Api, FastMethod, Object};
use crate::array::CaiArray;
use crate::device::pointer::CaiPointerInfo;
use crate::ffi::{cai_import, CaiError};
use crate::import::CaiImportOptions;
use crate::status::CAI_OK;

/// `import_dict`'s answer when the dict needs the binding's Python rules.
pub const CAI_PYTHON_NOT_HANDLED: i32 = -1;

const METH_FASTCALL: c_int = 0x80;
const PYBUF_WRITABLE: c_int = 0x1;

/// CPython's PyMethodDef.
#[repr(C)]
pub struct MethodDef {
    name: *const c_char,
    method: FastMethod,
    flags: c_int,
    doc: *const c_char,
}

/// CPython's Py_buffer (frozen: part of the stable ABI since 3.11, unchanged since 3.3).
#[repr(C)]
pub struct Buffer {
    buf: *mut c_void,
    obj: Object,
    len: isize,
    itemsize: isize,
    readonly: c_int,
    ndim: c_int,
    format: *mut c_char,
    shape: *mut isize,
    strides: *mut isize,
    suboffsets: *mut isize,
    internal: *mut c_void,
}

struct Methods([MethodDef; 2]);
// SAFETY: constant definitions that CPython only reads.
unsafe impl Sync for Methods {}

static METHODS: Methods = Methods([
    MethodDef {
        name: c"fill".as_ptr(),
        method: fill,
        flags: METH_FASTCALL,
        doc: c"fill(desc, array): reads a plain valid CAI dict into a ctypes CaiArray; False if it leaves it to the Python rules".as_ptr(),
    },
    MethodDef {
        name: c"import_dict".as_ptr(),
        method: import_dict,
        flags: METH_FASTCALL,
        doc: c"import_dict(desc, array, options, error): fill, then cai_import; the pointer info as bytes on success, -1 if it leaves the dict to the Python rules, else the status".as_ptr(),
    },
]);

/// A new reference to the tuple `(fill, import_dict)`, or NULL when this process has no
/// CPython to resolve (then nothing is raised and the binding uses its Python rules alone).
/// Call with the GIL held.
pub fn python_functions() -> Object {
    let Some(api) = api() else { return std::ptr::null_mut() };
    // SAFETY: the GIL is held (the caller's promise); each new reference is handed to the tuple.
    unsafe {
        let tuple = (api.PyTuple_New)(METHODS.0.len() as isize);
        if tuple.is_null() {
            return tuple;
        }
        for (i, def) in METHODS.0.iter().enumerate() {
            let function = (api.PyCFunction_NewEx)(def, std::ptr::null_mut(), std::ptr::null_mut());
            if function.is_null() || (api.PyTuple_SetItem)(tuple, i as isize, function) != 0 {
                (api.Py_DecRef)(tuple);
                return std::ptr::null_mut();
            }
        }
        tuple
    }
}

/// A Python exception to raise: the message of a TypeError.
struct Raise(&'static std::ffi::CStr);

/// Runs a builtin's body with the GIL held: a result becomes a new reference, a `Raise` a
/// TypeError, a panic a TypeError naming it as a bug.
fn builtin(body: impl FnOnce(&'static Api) -> Result<Object, Raise>) -> Object {
    // The functions exist only once `api()` has resolved.
    let Some(api) = api() else { return std::ptr::null_mut() };
    let outcome = catch_unwind(AssertUnwindSafe(|| body(api)))
        .unwrap_or(Err(Raise(c"libcai panicked in its Python fast path (a bug; please report it)")));
    match outcome {
        Ok(object) => object,
        Err(Raise(message)) => {
            // SAFETY: the GIL is held; TypeError and the message outlive the call.
            unsafe { (api.PyErr_SetString)(api.type_error, message.as_ptr()) };
            std::ptr::null_mut()
        }
    }
}

fn arguments<'a, const N: usize>(
    args: *const Object,
    nargs: isize,
    usage: &'static std::ffi::CStr,
) -> Result<&'a [Object; N], Raise> {
    if nargs != N as isize {
        return Err(Raise(usage));
    }
    // SAFETY: CPython passes `nargs` live arguments.
    Ok(unsafe { &*args.cast::<[Object; N]>() })
}

/// A ctypes struct's memory, seen as a `T`, held through the buffer protocol until dropped.
struct Borrowed<'a, T> {
    api: &'a Api,
    view: Buffer,
    _type: std::marker::PhantomData<T>,
}

impl<'a, T> Borrowed<'a, T> {
    /// Fails unless `object` exports a buffer of exactly `T`'s size and alignment.
    fn new(
        api: &'a Api,
        object: Object,
        writable: bool,
        wrong: &'static std::ffi::CStr,
    ) -> Result<Self, Raise> {
        // SAFETY: an all-zero Py_buffer is a valid "empty" value for CPython to fill.
        let mut view: Buffer = unsafe { std::mem::zeroed() };
        let flags = if writable { PYBUF_WRITABLE } else { 0 };
        // SAFETY: the GIL is held and `object` is live; on failure CPython set an exception,
        // which is replaced by our TypeError.
        if unsafe { (api.PyObject_GetBuffer)(object, &mut view, flags) } != 0 {
            // SAFETY: as above.
            unsafe { (api.PyErr_Clear)() };
            return Err(Raise(wrong));
        }
        let borrowed = Borrowed { api, view, _type: std::marker::PhantomData };
        let fits = borrowed.view.len == std::mem::size_of::<T>() as isize
            && (borrowed.view.buf as usize) % std::mem::align_of::<T>() == 0
            && (!writable || borrowed.view.readonly == 0);
        if fits {
            Ok(borrowed)
        } else {
            Err(Raise(wrong))
        }
    }

    fn ptr(&self) -> *mut T {
        self.view.buf.cast()
    }
}

impl<T> Drop for Borrowed<'_, T> {
    fn drop(&mut self) {
        // SAFETY: a view obtained by PyObject_GetBuffer, released once, with the GIL held.
        unsafe { (self.api.PyBuffer_Release)(&mut self.view) };
    }
}

fn bool_object(api: &Api, value: bool) -> Object {
    let object = if value { api.true_ } else { api.false_ };
    // SAFETY: the GIL is held; returns a new reference to an immortal singleton.
    unsafe { (api.Py_IncRef)(object) };
    object
}

fn int_object(api: &Api, value: i32) -> Object {
    // SAFETY: the GIL is held.
    unsafe { (api.PyLong_FromLong)(value as c_long) }
}

/// `info` as bytes; empty when the driver was not asked.
fn info_object(api: &Api, info: &CaiPointerInfo) -> Object {
    let bytes: &[u8] = match info.checked {
        0 => &[],
        // SAFETY: a plain-data repr(C) struct, viewed as its bytes.
        _ => unsafe {
            std::slice::from_raw_parts(
                (info as *const CaiPointerInfo).cast(),
                std::mem::size_of::<CaiPointerInfo>(),
            )
        },
    };
    // SAFETY: the GIL is held; CPython copies the bytes.
    unsafe { (api.PyBytes_FromStringAndSize)(bytes.as_ptr().cast(), bytes.len() as isize) }
}

unsafe extern "C" fn fill(_module: Object, args: *const Object, nargs: isize) -> Object {
    builtin(|api| {
        let [desc, array] = *arguments::<2>(args, nargs, c"fill(desc, array) takes 2 arguments")?;
        let array = Borrowed::<CaiArray>::new(api, array, true, c"fill: array must be a ctypes CaiArray")?;
        // SAFETY: the buffer is a writable, aligned CaiArray, held until `array` drops.
        let out = unsafe { &mut *array.ptr() };
        Ok(bool_object(api, fill_from_dict(api, desc, out)))
    })
}

unsafe extern "C" fn import_dict(_module: Object, args: *const Object, nargs: isize) -> Object {
    builtin(|api| {
        let [desc, array, options, error] =
            *arguments::<4>(args, nargs, c"import_dict(desc, array, options, error) takes 4 arguments")?;
        let array =
            Borrowed::<CaiArray>::new(api, array, true, c"import_dict: array must be a ctypes CaiArray")?;
        let options = if options == api.none {
            None
        } else {
            Some(Borrowed::<CaiImportOptions>::new(
                api,
                options,
                false,
                c"import_dict: options must be None or a ctypes CaiImportOptions",
            )?)
        };
        let error =
            Borrowed::<CaiError>::new(api, error, true, c"import_dict: error must be a ctypes CaiError")?;
        // SAFETY: a writable, aligned CaiArray, held until `array` drops.
        if !fill_from_dict(api, desc, unsafe { &mut *array.ptr() }) {
            return Ok(int_object(api, CAI_PYTHON_NOT_HANDLED));
        }
        let options = options.as_ref().map_or(std::ptr::null(), |o| o.ptr().cast_const());
        let mut info = CaiPointerInfo::default();
        let (out, error) = (array.ptr(), error.ptr());
        // SAFETY: `out` is a filled CaiArray, read-only from here on.
        let may_wait = unsafe { (*out).stream } != 0 || !crate::driver::driver_load_attempted();
        let status = if may_wait {
            // SAFETY: no Python object is touched between releasing and taking back the GIL;
            // the buffers stay exported (their objects referenced) meanwhile.
            unsafe {
                let state = (api.PyEval_SaveThread)();
                let status = cai_import(out, options, &mut info, error);
                (api.PyEval_RestoreThread)(state);
                status
            }
        } else {
            cai_import(out, options, &mut info, error)
        };
        Ok(match status {
            CAI_OK => info_object(api, &info),
            failed => int_object(api, failed),
        })
    })
}
