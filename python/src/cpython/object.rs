//! A type object made from a spec whose objects hold one Rust value each (`cai.Array`'s, whose
//! value is python/src/array/mod.rs's `Array`): the layout, allocation and deallocation, spare
//! objects, the collector's traversal, `repr`, and attributes read by plain functions. An
//! import makes and frees one per call: here that is CPython's allocation, one write of the
//! Rust value and its drop, without the layers of a PyO3 class. Why it is sound is the "Type
//! object" part of mod.rs's audit.

use std::ffi::{c_int, c_void, CStr};
use std::marker::PhantomData;
use std::mem::offset_of;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr::{null_mut, NonNull};
use std::sync::atomic::{AtomicPtr, Ordering};

use pyo3::exceptions::{PySystemError, PyTypeError};
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::PyType;

use super::fastcall::{run_attached, Definition};

/// What an object of such a type holds, and what the type says of itself.
pub trait Payload: Sized + 'static {
    /// The type's name (`module.Name`) and docstring.
    const NAME: &'static CStr;
    const DOC: &'static CStr;
    /// The TypeError of `Type(...)`: objects come from the functions that make them.
    const REFUSE_NEW: &'static str;
    /// The type's storage: one static per payload.
    fn heap_type() -> &'static HeapType<Self>;
    /// Visits what the value keeps alive, for the collector: `visit`'s first nonzero answer,
    /// else 0.
    fn traverse(&self, visit: impl FnMut(*mut ffi::PyObject) -> c_int) -> c_int;
    /// `repr(obj)`.
    fn repr(&self) -> String;
}

/// The head of every object of such a type.
#[repr(C)]
struct Head {
    header: ffi::PyObject,
    /// CPython's list of weak references to the object (`__weaklistoffset__`).
    weak_references: *mut ffi::PyObject,
}

/// An object as CPython lays it out.
#[repr(C)]
struct Layout<T> {
    head: Head,
    value: T,
}

/// The type, made once when the module is first imported and kept for the process's life, and
/// its spare objects.
pub struct HeapType<T> {
    ty: AtomicPtr<ffi::PyTypeObject>,
    spares: spare::Spares,
    _value: PhantomData<fn() -> T>,
}

impl<T: Payload> HeapType<T> {
    pub const fn new() -> HeapType<T> {
        HeapType { ty: AtomicPtr::new(null_mut()), spares: spare::Spares::new(), _value: PhantomData }
    }
}

/// An object whose type is `T`'s, so that it holds a `T`.
pub struct Instance<'py, T>(Bound<'py, PyAny>, PhantomData<&'py T>);

impl<T> Clone for Instance<'_, T> {
    fn clone(&self) -> Self {
        Instance(self.0.clone(), PhantomData)
    }
}

impl<'py, T: Payload> Instance<'py, T> {
    /// `obj` as an object of the type, if it is one (the type has no subclass: one compare).
    #[inline]
    pub fn of(obj: &Bound<'py, PyAny>) -> Option<Instance<'py, T>> {
        let ty = T::heap_type().ty.load(Ordering::Acquire);
        // SAFETY: a live object's type pointer is read.
        let is = !ty.is_null() && unsafe { ffi::Py_TYPE(obj.as_ptr()) } == ty;
        is.then(|| Instance(obj.clone(), PhantomData))
    }

    /// A new object holding `value`.
    #[inline]
    pub fn new(py: Python<'py>, value: T) -> PyResult<Instance<'py, T>> {
        // SAFETY: the place is written whole.
        unsafe { Instance::new_with(py, |place: *mut T| place.write(value)) }
    }

    /// A new object of the type, its value written by `write` (dropped unrun if no object is
    /// made): a spare object if one is kept (`spare`), else CPython's allocation.
    ///
    /// # Safety
    /// `write` writes a whole `T` into the place it is given.
    #[inline]
    pub unsafe fn new_with(py: Python<'py>, write: impl FnOnce(*mut T)) -> PyResult<Instance<'py, T>> {
        let heap_type = T::heap_type();
        let ty = heap_type.ty.load(Ordering::Acquire);
        if ty.is_null() {
            return Err(PySystemError::new_err(format!(
                "libcai: {} is used before its module made it",
                T::NAME.to_string_lossy()
            )));
        }
        let (obj, spare) = match heap_type.spares.take(py, ty) {
            Some(obj) => (obj, true),
            // SAFETY: a ready heap type; GenericAlloc returns a zeroed, tracked object of its
            // basic size (referencing the type), or NULL with an exception set.
            None => (unsafe { ffi::PyType_GenericAlloc(ty, 0) }, false),
        };
        if obj.is_null() {
            return Err(PyErr::fetch(py));
        }
        // SAFETY: `obj` is memory of this type's size that nothing else has seen (a fresh
        // allocation, or a spare object whose header `take` made new and whose other fields are
        // dead): the value is written once (the caller's contract for `write`), a spare object
        // is then told to the collector, and the object is handed out as the new reference it
        // is.
        unsafe {
            write(&raw mut (*obj.cast::<Layout<T>>()).value);
            if spare {
                ffi::PyObject_GC_Track(obj.cast());
            }
            Ok(Instance(Bound::from_owned_ptr(py, obj), PhantomData))
        }
    }

    /// The object borrowed for a slot's call: `slf` is the object CPython passes to a slot, a
    /// method or an attribute of this type.
    ///
    /// # Safety
    /// `slf` is a live object of the type (CPython checks a descriptor's object's type before
    /// calling).
    #[inline]
    pub unsafe fn borrowed(py: Python<'py>, slf: *mut ffi::PyObject) -> Instance<'py, T> {
        // SAFETY: as the function's contract says.
        Instance(unsafe { Bound::from_borrowed_ptr(py, slf) }, PhantomData)
    }

    /// The Rust value the object holds.
    #[inline]
    pub fn get(&self) -> &T {
        // SAFETY: the type was checked when this was made (`of`, `new`, `borrowed`); the value
        // lives as long as the object, which `self` holds.
        unsafe { &(*self.0.as_ptr().cast::<Layout<T>>()).value }
    }

    #[inline]
    pub fn as_any(&self) -> &Bound<'py, PyAny> {
        &self.0
    }

    #[inline]
    pub fn py(&self) -> Python<'py> {
        self.0.py()
    }

    #[inline]
    pub fn into_any(self) -> Bound<'py, PyAny> {
        self.0
    }

    #[inline]
    pub fn unbind(self) -> Py<PyAny> {
        self.0.unbind()
    }
}

/// Frees an object: the collector first lets go of it, then its weak references are cleared,
/// its value dropped, its memory kept as a spare (`spare`) or freed, and the reference to its
/// type dropped.
unsafe extern "C" fn dealloc<T: Payload>(obj: *mut ffi::PyObject) {
    // SAFETY: CPython calls this once, attached, on an object of this type whose count fell
    // to zero; the object is never used after its memory is freed.
    unsafe {
        let ty = ffi::Py_TYPE(obj);
        ffi::PyObject_GC_UnTrack(obj.cast());
        let layout = obj.cast::<Layout<T>>();
        if !(*layout).head.weak_references.is_null() {
            ffi::PyObject_ClearWeakRefs(obj);
        }
        // A panic must not unwind into CPython: what is left of the value is then leaked.
        let _ = catch_unwind(AssertUnwindSafe(|| std::ptr::drop_in_place(&raw mut (*layout).value)));
        if !T::heap_type().spares.keep(obj) {
            ffi::PyObject_GC_Del(obj.cast());
        }
        ffi::Py_DecRef(ty.cast());
    }
}

/// Objects of the type that were let go of, kept for the next `Instance::new`: an import
/// makes and frees one per call, and a spare one skips CPython's allocation, zeroing and the
/// collector's count (as CPython's own tuple and float objects are reused). At most `KEPT`,
/// linked through their weak reference slot (cleared before an object is kept). Only where a
/// GIL serializes every allocation and deallocation of the type, which is the list's lock (one
/// interpreter: the module refuses to load in a subinterpreter, so no second GIL exists for
/// it); a free-threaded interpreter allocates each object.
#[cfg(not(Py_GIL_DISABLED))]
mod spare {
    use std::cell::UnsafeCell;
    use std::ptr::null_mut;

    use pyo3::ffi;
    use pyo3::Python;

    use super::Head;

    const KEPT: usize = 16;

    struct List {
        first: *mut ffi::PyObject,
        count: usize,
    }

    /// The list, touched only by a thread that holds the GIL (`take` takes its token; `keep`
    /// runs in the type's deallocation, which CPython calls attached, so holding the GIL).
    pub struct Spares(UnsafeCell<List>);
    // SAFETY: every access holds the GIL (see above), so no two threads touch it at once.
    unsafe impl Sync for Spares {}

    impl Spares {
        pub const fn new() -> Spares {
            Spares(UnsafeCell::new(List { first: null_mut(), count: 0 }))
        }

        /// A spare object made an object of `ty` again (its header new: a count of one, the
        /// type referenced), not yet tracked by the collector, its value to be written; None if
        /// none.
        #[inline]
        pub fn take(&self, _attached: Python<'_>, ty: *mut ffi::PyTypeObject) -> Option<*mut ffi::PyObject> {
            // SAFETY: the GIL is held (the token); the list holds only objects `keep` took,
            // whose memory is CPython's allocation of this type's size, untracked, with nothing
            // live in it; PyObject_Init writes the header as CPython's own allocation does.
            unsafe {
                let spares = &mut *self.0.get();
                let obj = spares.first;
                if obj.is_null() {
                    return None;
                }
                let head = obj.cast::<Head>();
                spares.first = (*head).weak_references;
                spares.count -= 1;
                (*head).weak_references = null_mut();
                Some(ffi::PyObject_Init(obj, ty))
            }
        }

        /// Keeps `obj`'s memory for `take`, if fewer than `KEPT` are kept.
        ///
        /// # Safety
        /// Called by the type's deallocation, attached, once the object is untracked, has no
        /// weak reference and its value was dropped; the caller frees it if this returns false.
        #[inline]
        pub unsafe fn keep(&self, obj: *mut ffi::PyObject) -> bool {
            // SAFETY: the GIL is held (the caller's contract); the object is dead memory
            // nothing else reaches.
            unsafe {
                let spares = &mut *self.0.get();
                if spares.count == KEPT {
                    return false;
                }
                (*obj.cast::<Head>()).weak_references = spares.first;
                spares.first = obj;
                spares.count += 1;
                true
            }
        }
    }
}

/// A free-threaded interpreter keeps no spare object: each is allocated and freed.
#[cfg(Py_GIL_DISABLED)]
mod spare {
    use pyo3::ffi;
    use pyo3::Python;

    pub struct Spares;

    impl Spares {
        pub const fn new() -> Spares {
            Spares
        }

        #[inline]
        pub fn take(&self, _attached: Python<'_>, _ty: *mut ffi::PyTypeObject) -> Option<*mut ffi::PyObject> {
            None
        }

        #[inline]
        pub unsafe fn keep(&self, _obj: *mut ffi::PyObject) -> bool {
            false
        }
    }
}

/// The collector's traversal: the type (as every heap type's instance visits it) and the
/// objects the value keeps.
unsafe extern "C" fn traverse<T: Payload>(
    obj: *mut ffi::PyObject,
    visit: ffi::visitproc,
    arg: *mut c_void,
) -> c_int {
    // SAFETY: CPython passes a live object of this type and its visitor.
    unsafe {
        let visited = visit(ffi::Py_TYPE(obj).cast(), arg);
        if visited != 0 {
            return visited;
        }
        let value = &(*obj.cast::<Layout<T>>()).value;
        catch_unwind(AssertUnwindSafe(|| value.traverse(|kept| visit(kept, arg)))).unwrap_or(0)
    }
}

/// `repr(obj)`.
unsafe extern "C" fn repr<T: Payload>(obj: *mut ffi::PyObject) -> *mut ffi::PyObject {
    run_attached(|py| {
        // SAFETY: CPython passes a live object of this type.
        let this = unsafe { Instance::<T>::borrowed(py, obj) };
        Ok(this.get().repr().into_pyobject(py)?.into_ptr())
    })
}

/// `Type(...)`: refused.
unsafe extern "C" fn refuse_new<T: Payload>(
    _type: *mut ffi::PyTypeObject,
    _args: *mut ffi::PyObject,
    _kwargs: *mut ffi::PyObject,
) -> *mut ffi::PyObject {
    run_attached(|_| Err(PyTypeError::new_err(T::REFUSE_NEW)))
}

/// An attribute's value, from the object it is read on.
pub type Getter<T> = for<'py> fn(&Instance<'py, T>) -> PyResult<Py<PyAny>>;

/// Every attribute of the type: CPython passes the attribute's `Getter` as the closure.
unsafe extern "C" fn get_attribute<T: Payload>(
    slf: *mut ffi::PyObject,
    closure: *mut c_void,
) -> *mut ffi::PyObject {
    run_attached(|py| {
        // SAFETY: the closure is the `Getter<T>` written into this attribute's definition
        // (`make_type`), a function pointer of that type.
        let getter = unsafe { std::mem::transmute::<*mut c_void, Getter<T>>(closure) };
        // SAFETY: CPython checked that `slf` is of this type before calling the descriptor.
        let this = unsafe { Instance::<T>::borrowed(py, slf) };
        Ok(getter(&this)?.into_ptr())
    })
}

/// The type, made once per process from its attributes (name, getter, docstring) and methods:
/// the tables are leaked, as CPython keeps pointers into them.
pub fn type_object<'py, T: Payload>(
    py: Python<'py>,
    getters: &[(&'static CStr, Getter<T>, &'static CStr)],
    methods: &'static [Definition],
) -> PyResult<Bound<'py, PyType>> {
    let heap_type = T::heap_type();
    let mut ty = heap_type.ty.load(Ordering::Acquire);
    if ty.is_null() {
        ty = make_type(py, getters, methods)?;
        heap_type.ty.store(ty, Ordering::Release);
    }
    // SAFETY: the type made above, alive for the process (one reference is never dropped).
    Ok(unsafe { Bound::from_borrowed_ptr(py, ty.cast()) }.cast_into::<PyType>()?)
}

fn make_type<T: Payload>(
    py: Python<'_>,
    getters: &[(&'static CStr, Getter<T>, &'static CStr)],
    methods: &'static [Definition],
) -> PyResult<*mut ffi::PyTypeObject> {
    let getset: &'static mut [ffi::PyGetSetDef] = Vec::leak(
        getters
            .iter()
            .map(|(name, getter, doc)| ffi::PyGetSetDef {
                name: name.as_ptr(),
                get: Some(get_attribute::<T>),
                set: None,
                doc: doc.as_ptr(),
                closure: *getter as *mut c_void,
            })
            .chain([ffi::PyGetSetDef::default()])
            .collect(),
    );
    let methods: &'static mut [ffi::PyMethodDef] = Vec::leak(
        methods.iter().map(|definition| definition.0).chain([ffi::PyMethodDef::zeroed()]).collect(),
    );
    let members: &'static mut [ffi::PyMemberDef] = Vec::leak(vec![
        ffi::PyMemberDef {
            name: c"__weaklistoffset__".as_ptr(),
            type_code: ffi::Py_T_PYSSIZET,
            offset: offset_of!(Head, weak_references) as ffi::Py_ssize_t,
            flags: ffi::Py_READONLY,
            doc: std::ptr::null(),
        },
        ffi::PyMemberDef::default(),
    ]);
    let slots: &'static mut [ffi::PyType_Slot] = Vec::leak(vec![
        ffi::PyType_Slot { slot: ffi::Py_tp_doc, pfunc: T::DOC.as_ptr().cast_mut().cast() },
        ffi::PyType_Slot { slot: ffi::Py_tp_dealloc, pfunc: dealloc::<T> as *mut c_void },
        ffi::PyType_Slot { slot: ffi::Py_tp_traverse, pfunc: traverse::<T> as *mut c_void },
        ffi::PyType_Slot { slot: ffi::Py_tp_repr, pfunc: repr::<T> as *mut c_void },
        ffi::PyType_Slot { slot: ffi::Py_tp_new, pfunc: refuse_new::<T> as *mut c_void },
        ffi::PyType_Slot { slot: ffi::Py_tp_getset, pfunc: getset.as_mut_ptr().cast() },
        ffi::PyType_Slot { slot: ffi::Py_tp_methods, pfunc: methods.as_mut_ptr().cast() },
        ffi::PyType_Slot { slot: ffi::Py_tp_members, pfunc: members.as_mut_ptr().cast() },
        ffi::PyType_Slot { slot: 0, pfunc: null_mut() },
    ]);
    let spec = Box::leak(Box::new(ffi::PyType_Spec {
        name: T::NAME.as_ptr(),
        basicsize: c_int::try_from(size_of::<Layout<T>>()).expect("a small struct"),
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

/// A strong reference held without PyO3's count of the thread and let go of by `Py_DecRef`:
/// for holders that are only ever dropped by an attached thread (an object's deallocation, the
/// interpreter's call; a C consumer's release, which attaches first), which is all `Py_DecRef`
/// needs, so the reference never waits in PyO3's deferred pool as a `Py<T>` dropped outside
/// PyO3's count would.
pub struct Kept(NonNull<ffi::PyObject>);

// SAFETY: a reference count, changed only by attached threads (as `Py<T>`'s).
unsafe impl Send for Kept {}
// SAFETY: as for Send; shared access only reads the pointer.
unsafe impl Sync for Kept {}

impl Kept {
    #[inline]
    pub fn new<T>(object: Py<T>) -> Kept {
        // SAFETY: `into_ptr` hands over a strong reference to a live object (never NULL).
        Kept(unsafe { NonNull::new_unchecked(object.into_ptr()) })
    }

    #[inline]
    pub fn bind<'py>(&self, py: Python<'py>) -> Bound<'py, PyAny> {
        // SAFETY: a live object this Kept holds a reference to; the Bound takes one of its own.
        unsafe { Bound::from_borrowed_ptr(py, self.0.as_ptr()) }
    }

    #[inline]
    pub fn as_ptr(&self) -> *mut ffi::PyObject {
        self.0.as_ptr()
    }
}

impl Drop for Kept {
    #[inline]
    fn drop(&mut self) {
        // SAFETY: the reference this Kept holds, let go of once, by an attached thread (the
        // type's comment says why every drop is).
        unsafe { ffi::Py_DecRef(self.0.as_ptr()) };
    }
}
