//! `cai.Array`'s type object, on `pyo3-ffi`: the object's layout, its allocation and
//! deallocation, the collector's traversal, and the tables of its attributes and methods, whose
//! bodies are python/src/array_methods.rs's. `cai.from_object` makes and frees one per call:
//! here that is CPython's allocation, one write of the Rust struct and its drop, without the
//! layers of a PyO3 class (about 300 instructions a call).
//!
//! The audit (every `unsafe` below, and why it is sound):
//! - An object of this type is `ArrayLayout`: CPython's header, the weak reference list, the
//!   Rust `Array`. `new_array` writes the Array into a fresh allocation before anything else
//!   sees the object; `dealloc` drops it once, after the collector let go of the object. The
//!   type allows no instantiation from Python (`tp_new` refuses), no subclass (no
//!   `Py_TPFLAGS_BASETYPE`) and no attribute of its own (no dict), so an object whose type is
//!   this one always holds a live Array.
//! - The Array keeps Python objects only as `Kept` (python/src/array.rs), let go of by
//!   `Py_DecRef`: dropping it needs an attached thread, not PyO3's count of it, so the
//!   deallocation, which the interpreter runs attached, lets go of them at once.
//! - Every slot and method the interpreter calls runs its body through fastcall.rs's
//!   `run_attached` (panics caught, errors raised); the deallocation and the traversal, which
//!   may not raise, catch panics themselves.

use std::ffi::{c_int, c_void, CStr};
use std::mem::offset_of;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr::null_mut;
use std::sync::atomic::{AtomicPtr, Ordering};

use pyo3::exceptions::{PySystemError, PyTypeError};
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::PyModule;

use crate::array::Array;
use crate::array_methods::{FROM_C_SIGNATURE, GETTERS, METHODS};
use crate::dlpack_export::DLPACK_SIGNATURE;
use crate::exchange_offered::exchange_api_capsule;
use crate::fastcall::run_attached;

/// A cai.Array object as CPython lays it out.
#[repr(C)]
struct ArrayLayout {
    header: ffi::PyObject,
    /// CPython's list of weak references to the object (`__weaklistoffset__`).
    weak_references: *mut ffi::PyObject,
    array: Array,
}

/// The type, made once when the module is first imported and kept for the process's life.
static ARRAY_TYPE: AtomicPtr<ffi::PyTypeObject> = AtomicPtr::new(null_mut());

/// A cai.Array object: a Python object whose type is `cai.Array`, so that it holds an `Array`.
#[derive(Clone)]
pub struct ArrayObject<'py>(Bound<'py, PyAny>);

impl<'py> ArrayObject<'py> {
    /// `obj` as a cai.Array, if it is one.
    pub fn of(obj: &Bound<'py, PyAny>) -> Option<ArrayObject<'py>> {
        is_array(obj.as_ptr()).then(|| ArrayObject(obj.clone()))
    }

    /// A new cai.Array holding `array`.
    pub fn new(py: Python<'py>, array: Array) -> PyResult<ArrayObject<'py>> {
        let ty = ARRAY_TYPE.load(Ordering::Acquire);
        if ty.is_null() {
            return Err(PySystemError::new_err("libcai: cai.Array is used before its module made it"));
        }
        // SAFETY: a ready heap type; GenericAlloc returns a zeroed object of its basic size
        // (referencing the type), or NULL with an exception set.
        let obj = unsafe { ffi::PyType_GenericAlloc(ty, 0) };
        if obj.is_null() {
            return Err(PyErr::fetch(py));
        }
        // SAFETY: `obj` is a fresh ArrayLayout that nothing else has seen: its Array is written
        // once, before the object is handed out.
        unsafe { std::ptr::write(&raw mut (*obj.cast::<ArrayLayout>()).array, array) };
        // SAFETY: the new reference GenericAlloc returned.
        Ok(ArrayObject(unsafe { Bound::from_owned_ptr(py, obj) }))
    }

    /// The object borrowed for a slot's call: `slf` is the object CPython passes to a method or
    /// attribute of this type.
    ///
    /// # Safety
    /// `slf` is a live cai.Array (CPython checks a descriptor's object's type before calling).
    unsafe fn borrowed(py: Python<'py>, slf: *mut ffi::PyObject) -> ArrayObject<'py> {
        // SAFETY: as the function's contract says.
        ArrayObject(unsafe { Bound::from_borrowed_ptr(py, slf) })
    }

    /// The Rust struct the object holds.
    pub fn get(&self) -> &Array {
        // SAFETY: the type was checked when this was made (`of`, `new`, `borrowed`); the Array
        // lives as long as the object, which `self` holds.
        unsafe { &(*self.0.as_ptr().cast::<ArrayLayout>()).array }
    }

    pub fn as_any(&self) -> &Bound<'py, PyAny> {
        &self.0
    }

    pub fn py(&self) -> Python<'py> {
        self.0.py()
    }

    pub fn into_any(self) -> Bound<'py, PyAny> {
        self.0
    }

    pub fn unbind(self) -> Py<PyAny> {
        self.0.unbind()
    }
}

/// Whether `obj` is a cai.Array (the type has no subclass: one compare).
fn is_array(obj: *mut ffi::PyObject) -> bool {
    let ty = ARRAY_TYPE.load(Ordering::Acquire);
    // SAFETY: a live object's type pointer is read.
    !ty.is_null() && unsafe { ffi::Py_TYPE(obj) } == ty
}

/// Frees a cai.Array: the collector first lets go of it, then its weak references are cleared,
/// its Array dropped (its producer let go of, its release callback run), its memory freed and
/// the reference to its type dropped.
unsafe extern "C" fn dealloc(obj: *mut ffi::PyObject) {
    // SAFETY: CPython calls this once, attached, on an object of this type whose count fell
    // to zero; the object is never used after its memory is freed.
    unsafe {
        let ty = ffi::Py_TYPE(obj);
        ffi::PyObject_GC_UnTrack(obj.cast());
        let layout = obj.cast::<ArrayLayout>();
        if !(*layout).weak_references.is_null() {
            ffi::PyObject_ClearWeakRefs(obj);
        }
        // A panic must not unwind into CPython: what is left of the Array is then leaked.
        let _ = catch_unwind(AssertUnwindSafe(|| std::ptr::drop_in_place(&raw mut (*layout).array)));
        ffi::PyObject_GC_Del(obj.cast());
        ffi::Py_DecRef(ty.cast());
    }
}

/// The collector's traversal: the type (as every heap type's instance visits it) and the
/// objects the Array keeps.
unsafe extern "C" fn traverse(obj: *mut ffi::PyObject, visit: ffi::visitproc, arg: *mut c_void) -> c_int {
    // SAFETY: CPython passes a live object of this type and its visitor.
    unsafe {
        let visited = visit(ffi::Py_TYPE(obj).cast(), arg);
        if visited != 0 {
            return visited;
        }
        let array = &(*obj.cast::<ArrayLayout>()).array;
        catch_unwind(AssertUnwindSafe(|| array.traverse(|kept| visit(kept, arg)))).unwrap_or(0)
    }
}

/// `repr(a)`.
unsafe extern "C" fn repr(obj: *mut ffi::PyObject) -> *mut ffi::PyObject {
    run_attached(|py| {
        // SAFETY: CPython passes a live object of this type.
        let this = unsafe { ArrayObject::borrowed(py, obj) };
        Ok(this.get().repr().into_pyobject(py)?.into_ptr())
    })
}

/// `cai.Array(...)`: refused; arrays come from the functions that read them.
unsafe extern "C" fn refuse_new(
    _type: *mut ffi::PyTypeObject,
    _args: *mut ffi::PyObject,
    _kwargs: *mut ffi::PyObject,
) -> *mut ffi::PyObject {
    run_attached(|_| {
        Err(PyTypeError::new_err(
            "cai.Array cannot be made directly: use cai.from_object, cai.from_buffer_interface or cai.Array.from_c",
        ))
    })
}

/// An attribute's value, from the Array object it is read on.
pub type Getter = for<'py> fn(&ArrayObject<'py>) -> PyResult<Py<PyAny>>;

/// Every attribute of the type: CPython passes the attribute's `Getter` as the closure.
unsafe extern "C" fn get_attribute(slf: *mut ffi::PyObject, closure: *mut c_void) -> *mut ffi::PyObject {
    run_attached(|py| {
        // SAFETY: the closure is the `Getter` written into this attribute's definition
        // (`add_array_type`), a function pointer of that type.
        let getter = unsafe { std::mem::transmute::<*mut c_void, Getter>(closure) };
        // SAFETY: CPython checked that `slf` is of this type before calling the descriptor.
        let this = unsafe { ArrayObject::borrowed(py, slf) };
        Ok(getter(&this)?.into_ptr())
    })
}

/// The object a method of this type is called on.
///
/// # Safety
/// `slf` is the `self` CPython passes to a method of this type (checked by its descriptor).
pub unsafe fn method_self<'py>(py: Python<'py>, slf: *mut ffi::PyObject) -> ArrayObject<'py> {
    // SAFETY: as the contract says.
    unsafe { ArrayObject::borrowed(py, slf) }
}

const DOC: &CStr = c"A validated device array. Pass it to C functions as `CaiArray*`: ctypes takes it as is
(`_as_parameter_`), cffi by address (`.ptr`). It keeps its producer alive, and exposes
`__cuda_array_interface__` in libcai's export form.";

/// Makes the type (once per process) and adds it to the module as `Array`.
pub fn add_array_type(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    DLPACK_SIGNATURE.intern(py)?;
    FROM_C_SIGNATURE.intern(py)?;
    let mut ty = ARRAY_TYPE.load(Ordering::Acquire);
    if ty.is_null() {
        ty = make_type(py)?;
        ARRAY_TYPE.store(ty, Ordering::Release);
    }
    // SAFETY: the type made above, alive for the process (one reference is never dropped).
    let type_object = unsafe { Bound::from_borrowed_ptr(py, ty.cast()) };
    type_object.setattr("__dlpack_c_exchange_api__", exchange_api_capsule(py)?)?;
    m.add("Array", type_object)
}

/// The type, from a spec whose tables are leaked (CPython keeps pointers into them).
fn make_type(py: Python<'_>) -> PyResult<*mut ffi::PyTypeObject> {
    let getset: &'static mut [ffi::PyGetSetDef] = Vec::leak(
        GETTERS
            .iter()
            .map(|(name, getter, doc)| ffi::PyGetSetDef {
                name: name.as_ptr(),
                get: Some(get_attribute),
                set: None,
                doc: doc.as_ptr(),
                closure: *getter as *mut c_void,
            })
            .chain([ffi::PyGetSetDef::default()])
            .collect(),
    );
    let methods: &'static mut [ffi::PyMethodDef] = Vec::leak(
        METHODS.iter().map(|definition| definition.0).chain([ffi::PyMethodDef::zeroed()]).collect(),
    );
    let members: &'static mut [ffi::PyMemberDef] = Vec::leak(vec![
        ffi::PyMemberDef {
            name: c"__weaklistoffset__".as_ptr(),
            type_code: ffi::Py_T_PYSSIZET,
            offset: offset_of!(ArrayLayout, weak_references) as ffi::Py_ssize_t,
            flags: ffi::Py_READONLY,
            doc: std::ptr::null(),
        },
        ffi::PyMemberDef::default(),
    ]);
    let slots: &'static mut [ffi::PyType_Slot] = Vec::leak(vec![
        ffi::PyType_Slot { slot: ffi::Py_tp_doc, pfunc: DOC.as_ptr().cast_mut().cast() },
        ffi::PyType_Slot { slot: ffi::Py_tp_dealloc, pfunc: dealloc as *mut c_void },
        ffi::PyType_Slot { slot: ffi::Py_tp_traverse, pfunc: traverse as *mut c_void },
        ffi::PyType_Slot { slot: ffi::Py_tp_repr, pfunc: repr as *mut c_void },
        ffi::PyType_Slot { slot: ffi::Py_tp_new, pfunc: refuse_new as *mut c_void },
        ffi::PyType_Slot { slot: ffi::Py_tp_getset, pfunc: getset.as_mut_ptr().cast() },
        ffi::PyType_Slot { slot: ffi::Py_tp_methods, pfunc: methods.as_mut_ptr().cast() },
        ffi::PyType_Slot { slot: ffi::Py_tp_members, pfunc: members.as_mut_ptr().cast() },
        ffi::PyType_Slot { slot: 0, pfunc: null_mut() },
    ]);
    let spec = Box::leak(Box::new(ffi::PyType_Spec {
        name: c"cai.Array".as_ptr(),
        basicsize: c_int::try_from(size_of::<ArrayLayout>()).expect("a small struct"),
        itemsize: 0,
        flags: (ffi::Py_TPFLAGS_DEFAULT | ffi::Py_TPFLAGS_HAVE_GC) as std::ffi::c_uint,
        slots: slots.as_mut_ptr(),
    }));
    // SAFETY: a complete spec whose tables live for the process; a new reference or NULL with
    // an exception set comes back, and the reference is kept for the process.
    let ty = unsafe { ffi::PyType_FromSpec(spec) };
    if ty.is_null() {
        return Err(PyErr::fetch(py));
    }
    Ok(ty.cast())
}
