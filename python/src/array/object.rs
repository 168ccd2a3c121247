//! `cai.Array`'s objects: the type (cpython/object.rs's, made from the tables of attributes
//! and methods that python/src/array/methods.rs writes) and what an Array does as an object
//! (its exports, its mask as an Array, its adoption of a C producer's struct).

use pyo3::prelude::*;
use pyo3::types::PyType;

use cai::binding::dlpack::Keeper;
use cai::binding::import::Imported;
use cai::binding::rules::validate;
use cai::{CaiArray, CaiDLDevice, CaiDLTensor, CAI_MAX_NDIM};

use crate::array::Array;
use crate::cpython::fastcall::{with_thread_attached, Definition};
use crate::cpython::object::{self, HeapType, Instance, Payload};
use crate::cpython::CStr;
use crate::cpython::{c_int, c_void, Kept, PyObject};
use crate::described::Read;
use crate::dlpack::tensor_of;
use crate::errors::CaiResult;
use crate::pool::Pooled;

/// A cai.Array object: a Python object whose type is `cai.Array`, so that it holds an `Array`.
pub type ArrayObject<'py> = Instance<'py, Array>;

/// An attribute's value, from the Array object it is read on.
pub type Getter = object::Getter<Array>;

/// The type, made once when the module is first imported and kept for the process's life.
static ARRAY_TYPE: HeapType<Array> = HeapType::new();

impl Payload for Array {
    const NAME: &'static CStr = c"cai.Array";
    const DOC: &'static CStr =
        c"A validated device array. Pass it to C functions as `CaiArray*`: ctypes takes it as is
(`_as_parameter_`), cffi by address (`.ptr`). It keeps its producer alive, and exposes
`__cuda_array_interface__` in libcai's export form.";
    const REFUSE_NEW: &'static str =
        "cai.Array cannot be made directly: use cai.from_object, cai.from_buffer_interface or cai.Array.from_c";

    fn heap_type() -> &'static HeapType<Array> {
        &ARRAY_TYPE
    }

    fn traverse(&self, visit: impl FnMut(*mut PyObject) -> c_int) -> c_int {
        Array::traverse(self, visit)
    }

    fn repr(&self) -> String {
        Array::repr(self)
    }
}

/// A new cai.Array holding the Array of `read` and what its import established
/// (`Array::new`), written in its object's memory (`Array::write_new`) rather than made and
/// then copied there.
impl<'py> Instance<'py, Array> {
    pub fn of_read(py: Python<'py>, read: Read, imported: Option<Imported>) -> PyResult<ArrayObject<'py>> {
        // SAFETY: `write_new` writes every field of the place.
        unsafe { ArrayObject::new_with(py, |place| Array::write_new(place, read, imported)) }
    }
}

/// The type, made once per process from its attributes (name, getter, docstring) and methods.
pub fn array_type<'py>(
    py: Python<'py>,
    getters: &[(&'static CStr, Getter, &'static CStr)],
    methods: &'static [Definition],
) -> PyResult<Bound<'py, PyType>> {
    object::type_object(py, getters, methods)
}

impl Array {
    /// `slf`'s struct written into `out` as far as the array is defined (`copy_defined_to`:
    /// the extents past its rank left as they are), owning one export, for the reader of a
    /// cai.Array given as input: `out` goes to a Read and then an Array, which are only ever
    /// dropped by an attached thread (cpython's `Kept`), so its release is
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
    ) -> CaiResult<*mut c_void> {
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
/// drops run attached (cpython's `Kept`), so this runs on that word, with no attach of its own
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
    let owner = unsafe { Bound::from_owned_ptr(py, (*array).owner.cast::<PyObject>()) };
    if let Some(exported) = ArrayObject::of(&owner) {
        exported.get().export_ended(py);
    }
}
