//! `cai.Array`'s objects, on `pyo3-ffi`: the layout, allocation and deallocation, the
//! collector's traversal, the type made from the tables of attributes and methods that
//! python/src/array_methods.rs writes, and what an Array does as an object (its exports, its
//! mask as an Array, its adoption of a C producer's struct). `cai.from_object` makes and frees
//! one per call: here that is CPython's allocation, one write of the Rust struct and its drop,
//! without the layers of a PyO3 class.
//!
//! The audit (every `unsafe` below, and why it is sound):
//! - An object of this type is `ArrayLayout`: CPython's header, the weak reference list, the
//!   Rust `Array`. `ArrayObject::new_with` (behind `new` and `of_read`) has the Array written
//!   into a fresh allocation (or a spare object made new, see `spare`) before anything else
//!   sees the object (a writer that unwinds leaks the object, never handing it out);
//!   `dealloc` drops the Array once, after the collector let go of the object. The
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
use pyo3::types::PyType;

use cai::binding::dlpack::Keeper;
use cai::binding::import::Imported;
use cai::binding::rules::validate;
use cai::{CaiArray, CaiDLDevice, CaiDLTensor, CAI_MAX_NDIM};

use crate::array::{Array, Kept};
use crate::described::Read;
use crate::dlpack::tensor_of;
use crate::errors::CaiResult;
use crate::fastcall::{run_attached, with_thread_attached, Definition};
use crate::pool::Pooled;

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

    /// A new cai.Array holding `array`: a spare object of the type if one is kept (`spare`),
    /// else CPython's allocation.
    pub fn new(py: Python<'py>, array: Array) -> PyResult<ArrayObject<'py>> {
        // SAFETY: the place is written whole.
        unsafe { ArrayObject::new_with(py, |place| place.write(array)) }
    }

    /// A new cai.Array holding the Array of `read` and what its import established
    /// (`Array::new`), written in its object's memory (`Array::write_new`) rather than made and
    /// then copied there.
    pub fn of_read(py: Python<'py>, read: Read, imported: Option<Imported>) -> PyResult<ArrayObject<'py>> {
        // SAFETY: `write_new` writes every field of the place.
        unsafe { ArrayObject::new_with(py, |place| Array::write_new(place, read, imported)) }
    }

    /// A new object of the type, its Array written by `write` (dropped unrun if no object is
    /// made): a spare object if one is kept (`spare`), else CPython's allocation.
    ///
    /// # Safety
    /// `write` writes a whole Array into the place it is given.
    unsafe fn new_with(py: Python<'py>, write: impl FnOnce(*mut Array)) -> PyResult<ArrayObject<'py>> {
        let ty = ARRAY_TYPE.load(Ordering::Acquire);
        if ty.is_null() {
            return Err(PySystemError::new_err("libcai: cai.Array is used before its module made it"));
        }
        let (obj, spare) = match spare::take(py, ty) {
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
        // dead): the Array is written once (the caller's contract for `write`), a spare object
        // is then told to the collector, and the object is handed out as the new reference it
        // is.
        unsafe {
            write(&raw mut (*obj.cast::<ArrayLayout>()).array);
            if spare {
                ffi::PyObject_GC_Track(obj.cast());
            }
            Ok(ArrayObject(Bound::from_owned_ptr(py, obj)))
        }
    }

    /// The object borrowed for a slot's call: `slf` is the object CPython passes to a slot, a
    /// method or an attribute of this type.
    ///
    /// # Safety
    /// `slf` is a live cai.Array (CPython checks a descriptor's object's type before calling).
    pub unsafe fn borrowed(py: Python<'py>, slf: *mut ffi::PyObject) -> ArrayObject<'py> {
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
/// its Array dropped (its producer let go of, its release callback run), its memory kept as a
/// spare (`spare`) or freed, and the reference to its type dropped.
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
        if !spare::keep(obj) {
            ffi::PyObject_GC_Del(obj.cast());
        }
        ffi::Py_DecRef(ty.cast());
    }
}

/// Objects of the type that were let go of, kept for the next `ArrayObject::new`: an import
/// makes and frees one per call, and a spare one skips CPython's allocation, zeroing and the
/// collector's count (as CPython's own tuple and float objects are reused). At most `KEPT`,
/// linked through their weak reference slot (cleared before an object is kept). Only where a
/// GIL serializes every allocation and deallocation of the type, which is the list's lock (one
/// interpreter: PyO3's modules refuse to load in a subinterpreter, so no second GIL exists for
/// them); a free-threaded interpreter allocates each object.
#[cfg(not(Py_GIL_DISABLED))]
mod spare {
    use std::cell::UnsafeCell;
    use std::ptr::null_mut;

    use pyo3::ffi;
    use pyo3::Python;

    use super::ArrayLayout;

    const KEPT: usize = 16;

    struct Spares {
        first: *mut ffi::PyObject,
        count: usize,
    }

    /// The list, touched only by a thread that holds the GIL (`take` takes its token; `keep`
    /// runs in the type's deallocation, which CPython calls attached, so holding the GIL).
    struct GilGuarded(UnsafeCell<Spares>);
    // SAFETY: every access holds the GIL (see above), so no two threads touch it at once.
    unsafe impl Sync for GilGuarded {}

    static SPARES: GilGuarded = GilGuarded(UnsafeCell::new(Spares { first: null_mut(), count: 0 }));

    /// A spare object made an object of `ty` again (its header new: a count of one, the type
    /// referenced), not yet tracked by the collector, its Array to be written; None if none.
    pub(super) fn take(_attached: Python<'_>, ty: *mut ffi::PyTypeObject) -> Option<*mut ffi::PyObject> {
        // SAFETY: the GIL is held (the token); the list holds only objects `keep` took, whose
        // memory is CPython's allocation of this type's size, untracked, with nothing live in
        // it; PyObject_Init writes the header as CPython's own allocation does.
        unsafe {
            let spares = &mut *SPARES.0.get();
            let obj = spares.first;
            if obj.is_null() {
                return None;
            }
            let layout = obj.cast::<ArrayLayout>();
            spares.first = (*layout).weak_references;
            spares.count -= 1;
            (*layout).weak_references = null_mut();
            Some(ffi::PyObject_Init(obj, ty))
        }
    }

    /// Keeps `obj`'s memory for `take`, if fewer than `KEPT` are kept.
    ///
    /// # Safety
    /// Called by the type's deallocation, attached, once the object is untracked, has no weak
    /// reference and its Array was dropped; the caller frees it if this returns false.
    pub(super) unsafe fn keep(obj: *mut ffi::PyObject) -> bool {
        // SAFETY: the GIL is held (the caller's contract); the object is dead memory nothing
        // else reaches.
        unsafe {
            let spares = &mut *SPARES.0.get();
            if spares.count == KEPT {
                return false;
            }
            (*obj.cast::<ArrayLayout>()).weak_references = spares.first;
            spares.first = obj;
            spares.count += 1;
            true
        }
    }
}

/// A free-threaded interpreter keeps no spare object: each is allocated and freed.
#[cfg(Py_GIL_DISABLED)]
mod spare {
    use pyo3::ffi;
    use pyo3::Python;

    pub(super) fn take(_attached: Python<'_>, _ty: *mut ffi::PyTypeObject) -> Option<*mut ffi::PyObject> {
        None
    }

    pub(super) unsafe fn keep(_obj: *mut ffi::PyObject) -> bool {
        false
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
        // (`make_type`), a function pointer of that type.
        let getter = unsafe { std::mem::transmute::<*mut c_void, Getter>(closure) };
        // SAFETY: CPython checked that `slf` is of this type before calling the descriptor.
        let this = unsafe { ArrayObject::borrowed(py, slf) };
        Ok(getter(&this)?.into_ptr())
    })
}

const DOC: &CStr = c"A validated device array. Pass it to C functions as `CaiArray*`: ctypes takes it as is
(`_as_parameter_`), cffi by address (`.ptr`). It keeps its producer alive, and exposes
`__cuda_array_interface__` in libcai's export form.";

/// The type, made once per process from its attributes (name, getter, docstring) and methods:
/// the tables are leaked, as CPython keeps pointers into them.
pub fn array_type<'py>(
    py: Python<'py>,
    getters: &[(&'static CStr, Getter, &'static CStr)],
    methods: &'static [Definition],
) -> PyResult<Bound<'py, PyType>> {
    let mut ty = ARRAY_TYPE.load(Ordering::Acquire);
    if ty.is_null() {
        ty = make_type(py, getters, methods)?;
        ARRAY_TYPE.store(ty, Ordering::Release);
    }
    // SAFETY: the type made above, alive for the process (one reference is never dropped).
    Ok(unsafe { Bound::from_borrowed_ptr(py, ty.cast()) }.cast_into::<PyType>()?)
}

fn make_type(
    py: Python<'_>,
    getters: &[(&'static CStr, Getter, &'static CStr)],
    methods: &'static [Definition],
) -> PyResult<*mut ffi::PyTypeObject> {
    let getset: &'static mut [ffi::PyGetSetDef] = Vec::leak(
        getters
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
        methods.iter().map(|definition| definition.0).chain([ffi::PyMethodDef::zeroed()]).collect(),
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

impl Array {
    /// `slf`'s struct written into `out` as far as the array is defined (`copy_defined_to`:
    /// the extents past its rank left as they are), owning one export, for the reader of a
    /// cai.Array given as input: `out` goes to a Read and then an Array, which are only ever
    /// dropped by an attached thread (array.rs's `Kept`), so its release is
    /// `release_owner_attached`, without the attach a tensor's deleter needs.
    pub(crate) fn export_into(slf: &ArrayObject<'_>, out: &mut CaiArray) -> PyResult<()> {
        slf.get().array().copy_defined_to(out);
        Array::own_export(slf, out)?;
        out.release = Some(release_owner_attached);
        Ok(())
    }

    /// Makes `view`, a copy of `slf`'s struct, own one export of it (see `begin_export`): its
    /// release ends the export and lets go of `slf`. The caller copies the struct where it
    /// keeps it (`let mut view = *array; own_export(..)`): a struct returned by value through
    /// a `PyResult` was copied twice more, 1,160 bytes each.
    pub(crate) fn own_export(slf: &ArrayObject<'_>, view: &mut CaiArray) -> PyResult<()> {
        slf.get().begin_export(slf.py())?;
        view.owner = slf.as_any().clone().into_ptr().cast();
        view.release = Some(release_python_owner);
        Ok(())
    }

    /// A new cai.Array that takes over a C producer's `source` once it validates: its release
    /// then runs when Python lets go of the Array, and `source` no longer owns (its `release`
    /// cleared). On failure `source` is untouched.
    pub(crate) fn adopt(py: Python<'_>, source: &mut CaiArray) -> CaiResult<Py<PyAny>> {
        validate(source)?;
        let adopted =
            ArrayObject::of_read(py, Read::borrowing(Pooled::copy_of(source), None, None, None), None)?
                .unbind();
        source.release = None;
        Ok(adopted)
    }

    /// A DLPack tensor viewing `slf`'s memory on `device`, counted as an export until its
    /// deleter runs, after the consumer's stream (if any) is ordered after the array's.
    pub(crate) fn export_tensor(
        slf: &ArrayObject<'_>,
        device: CaiDLDevice,
        consumer: Option<u64>,
        versioned: bool,
    ) -> CaiResult<*mut std::ffi::c_void> {
        let mut view = *slf.get().array();
        Array::own_export(slf, &mut view)?;
        Ok(tensor_of(&mut view, slf.get().validated().as_ref(), device, consumer, versioned, Keeper::Array)?)
    }

    /// The non-owning DLTensor of this array (valid while it lives): its shape is the struct's,
    /// its strides in elements kept beside it.
    pub(crate) fn dl_tensor_view(slf: &ArrayObject<'_>) -> CaiResult<CaiDLTensor> {
        let this = slf.get();
        this.live(slf.py())?;
        let mut strides = [0i64; CAI_MAX_NDIM];
        let mut tensor =
            cai::binding::dlpack::dl_tensor_of(this.array(), Some(this.dl_device()?), &mut strides)?;
        // The array never changes, so neither do its strides: boxed once, on first use.
        let strides = this.element_strides.get_or_init(|| Box::new(strides));
        tensor.shape = this.array().shape.as_ptr().cast_mut();
        tensor.strides = strides.as_ptr().cast_mut();
        Ok(tensor)
    }

    /// The mask as an Array: a view of the one read at import (its owner the mask's producer),
    /// or of a C producer's (its owner this Array). Made when asked for: an import does not
    /// pay for a Python object it may never need.
    pub(crate) fn mask_array(slf: &ArrayObject<'_>) -> PyResult<Option<Py<PyAny>>> {
        let py = slf.py();
        let this = slf.get();
        if this.array().mask.is_null() {
            return Ok(None);
        }
        // SAFETY: validated: the mask read at import (owned by this Array) or a C producer's,
        // valid while this Array lives, which the view keeps alive.
        let mut view = Pooled::copy_of(unsafe { &*this.array().mask });
        view.release = None; // borrowed: never released from here
        let owner = match this.mask_owners.first() {
            Some(mask_owner) => mask_owner.bind(py).unbind(),
            None => slf.as_any().clone().unbind(),
        };
        let mut array = Array::new(Read::borrowing(view, None, Some(owner), None), None);
        array.keep = Some(Kept::new(slf.as_any().clone().unbind()));
        Ok(Some(ArrayObject::new(py, array)?.unbind()))
    }
}

/// The release of a view handed to a DLPack consumer: ends the export it counted on its
/// cai.Array and drops the reference that kept the array alive. A tensor's deleter may run on
/// any thread, and at any moment of the interpreter's life: once the interpreter is finalizing
/// nothing may attach to it, so the reference is then leaked on purpose (the process is ending;
/// CPython's own extensions do the same).
unsafe extern "C" fn release_python_owner(array: *mut CaiArray) {
    // Attached from any thread, without PyO3's count: the body makes no PyO3 value that
    // defers its drop.
    // SAFETY: attached by with_thread_attached; `array` is the export's struct (the release's
    // contract: called once, with the struct it was set on).
    with_thread_attached(|py| unsafe { end_export(py, array) });
}

/// `release_python_owner` for a struct only a Read or an Array holds (`export_into`): their
/// drops run attached (array.rs's `Kept`), so this runs on that word, with no attach of its own
/// (about 130 instructions less per Array read from a cai.Array).
unsafe extern "C" fn release_owner_attached(array: *mut CaiArray) {
    // SAFETY: attached (the holders' contract above); `array` is the export's struct.
    unsafe { end_export(Python::assume_attached(), array) }
}

/// Ends the export `array` counted on its cai.Array (its `owner`) and lets go of the reference
/// it held: a `Bound`, dropped at once.
///
/// # Safety
/// The thread is attached; `array` is a struct `own_export` made, released once.
unsafe fn end_export(py: Python<'_>, array: *mut CaiArray) {
    // SAFETY: the struct's owner is the strong reference `own_export` took (the caller's
    // contract), handed over to the Bound.
    let owner = unsafe { Bound::from_owned_ptr(py, (*array).owner.cast::<ffi::PyObject>()) };
    if let Some(exported) = ArrayObject::of(&owner) {
        exported.get().export_ended(py);
    }
}
