//! `cai.Array`, what it holds: a description (python/src/described.rs, from any reader) with
//! what the import established, the producer kept alive, and the count of its exports. An
//! Array owns its `CaiArray` (and the descr fields and mask it points to) and never changes
//! after it is made, so it is shared freely between threads. What Python sees of it is in
//! python/src/array_methods.rs.

use std::sync::Mutex;

use cai::binding::import::Imported;
use cai::binding::rules::{layout_of, layout_of_validated, typestr_is_a_device_type, validate, Validated};
use cai::binding::Description;
use cai::{CaiArray, CaiDLDevice, CaiDLTensor, CaiField, CaiLayout, CAI_MAX_NDIM};
use pyo3::gc::{PyTraverseError, PyVisit};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;

use crate::described::{Parts, Read};
use crate::dlpack::{device_of_array, tensor_of};
use crate::errors::CaiResult;
use crate::fastcall::with_thread_attached;
use crate::pool::Pooled;

/// The struct and what its pointers point into. Never changed once made: the raw pointers in
/// it refer to memory the description owns (its fields, its mask's struct, wired by the core)
/// or that a C producer keeps valid until its release callback runs, which only this Array's
/// drop calls.
struct Described {
    description: Description<Pooled>,
    /// What the import established (None: not imported, e.g. a mask view or a C producer's).
    imported: Option<Imported>,
    /// The DLPack device, for an array taken from a DLPack producer.
    device: Option<CaiDLDevice>,
}

// SAFETY: read-only after construction; see the type's comment for what the pointers refer to.
unsafe impl Send for Described {}
// SAFETY: as for Send: nothing writes through the pointers once the Array is made.
unsafe impl Sync for Described {}

/// A validated device array. Pass it to C functions as `CaiArray*`: ctypes takes it as is
/// (`_as_parameter_`), cffi by address (`.ptr`). It keeps its producer alive, and exposes
/// `__cuda_array_interface__` in libcai's export form.
#[pyclass(module = "cai", name = "Array", frozen, weakref)]
pub struct Array {
    described: Described,
    /// What keeps the memory alive, until `release()` or collection lets go of it.
    held: Mutex<Held>,
    /// The Buffer Interface's `buffer` object (a cl_mem holder), for arrays made from one.
    pub(crate) buffer: Option<Py<PyAny>>,
    /// The producers of the masks read at import (the mask's first, then its mask's): the
    /// description owns the masks' structs, these keep their memory alive.
    mask_owners: Vec<Py<PyAny>>,
    /// The Array whose memory this one's pointers refer to, when this one is a view of its mask.
    keep: Option<Py<Array>>,
    pub(crate) as_parameter: PyOnceLock<Py<PyAny>>,
    /// The strides in elements a DLTensor view points to (the exchange table's
    /// `dltensor_from_py_object_no_sync`), made on first use.
    element_strides: std::sync::OnceLock<Box<[i64; CAI_MAX_NDIM]>>,
}

/// The producer object kept alive, and the release callback of an array taken over from C or
/// DLPack; both let go of once, by `release()` or by collection.
struct Held {
    owner: Option<Py<PyAny>>,
    release: Option<unsafe extern "C" fn(*mut CaiArray)>,
    released: bool,
    /// DLPack tensors made from this array and not yet deleted: `release()` is refused while
    /// any is alive (as memoryview refuses it while buffers are exported), since each views the
    /// memory the release would let go of.
    exports: usize,
}

impl Held {
    /// Empties the hold (marking it released) and returns what was in it, to be let go of
    /// outside the lock: dropping an object or running a callback may run Python code.
    fn take(&mut self) -> (Option<Py<PyAny>>, Option<unsafe extern "C" fn(*mut CaiArray)>) {
        self.released = true;
        (self.owner.take(), self.release.take())
    }
}

/// Runs an array's release callback once, from `release()`, with a copy of its struct (the
/// producer knows it by its `owner`): other threads may still read this Array's metadata, so
/// the callback, which may write to what it is given, must not get the shared struct. A
/// dropped Array, which nothing else reaches, gives its own (see Drop).
fn run_release(release: Option<unsafe extern "C" fn(*mut CaiArray)>, array: &CaiArray) {
    if let Some(release) = release {
        let mut given = *array;
        given.release = Some(release);
        // SAFETY: the producer that set `release` promised it may be called with the array;
        // `given` is the array, field for field.
        unsafe { release(&mut given) };
    }
}

impl Drop for Array {
    fn drop(&mut self) {
        let held = self.held.get_mut().unwrap_or_else(|poisoned| poisoned.into_inner());
        if let (_, Some(release)) = held.take() {
            // Nothing else can reach the struct any more: the callback is given it in place,
            // with no copy.
            let array: &mut CaiArray = self.described.description.array_mut();
            array.release = Some(release);
            // SAFETY: the producer that set `release` promised it may be called with the array.
            unsafe { release(array) };
        }
    }
}

impl Array {
    /// An Array over what a reader read, and what its import established (None: not imported:
    /// a mask view, a C producer's struct, a tensor a consumer handed over).
    pub(crate) fn new(read: Read, imported: Option<Imported>) -> Array {
        // The struct handed to C (`ptr`) is a borrowed view: its release is held here instead.
        let Parts { description, release, device, owner, mask_owners, buffer } = read.into_parts();
        let held = Mutex::new(Held { owner, release, released: false, exports: 0 });
        Array {
            described: Described { description, imported, device },
            held,
            buffer,
            mask_owners,
            keep: None,
            as_parameter: PyOnceLock::new(),
            element_strides: std::sync::OnceLock::new(),
        }
    }

    /// A view of `slf`'s struct that owns one export of it (see `begin_export`): its release
    /// ends the export and lets go of `slf`.
    pub(crate) fn exported_view(slf: &Bound<'_, Array>) -> PyResult<CaiArray> {
        slf.get().begin_export()?;
        let mut view = *slf.get().array();
        view.owner = slf.clone().into_ptr().cast();
        view.release = Some(release_python_owner);
        Ok(view)
    }

    /// What the import's validation found of this array's struct (None: not imported).
    pub(crate) fn validated(&self) -> Option<Validated> {
        self.described.imported.as_ref().map(|imported| imported.validated)
    }

    /// The DLPack device of an array taken from a DLPack producer.
    pub(crate) fn dlpack_device(&self) -> Option<CaiDLDevice> {
        self.described.device
    }

    /// A new cai.Array that takes over a C producer's `source` once it validates: its release
    /// then runs when Python lets go of the Array, and `source` no longer owns (its `release`
    /// cleared). On failure `source` is untouched.
    pub(crate) fn adopt(py: Python<'_>, source: &mut CaiArray) -> CaiResult<Py<Array>> {
        validate(source)?;
        let adopted = Py::new(py, Array::new(Read::borrowing(Pooled::copy_of(source), None, None), None))?;
        source.release = None;
        Ok(adopted)
    }

    /// A DLPack tensor viewing `slf`'s memory on `device`, counted as an export until its
    /// deleter runs, after the consumer's stream (if any) is ordered after the array's.
    pub(crate) fn export_tensor(
        slf: &Bound<'_, Array>,
        device: CaiDLDevice,
        consumer: Option<u64>,
        versioned: bool,
    ) -> CaiResult<*mut std::ffi::c_void> {
        let mut view = Array::exported_view(slf)?;
        Ok(tensor_of(&mut view, slf.get().validated().as_ref(), device, consumer, versioned)?)
    }

    /// The DLPack device of this array's memory.
    pub(crate) fn dl_device(&self) -> CaiResult<CaiDLDevice> {
        device_of_array(self.array(), self.described.device)
    }

    /// The non-owning DLTensor of this array (valid while it lives): its shape is the struct's,
    /// its strides in elements kept beside it.
    pub(crate) fn dl_tensor_view(slf: &Bound<'_, Array>) -> CaiResult<CaiDLTensor> {
        let this = slf.get();
        this.live()?;
        let mut strides = [0i64; CAI_MAX_NDIM];
        let mut tensor =
            cai::binding::dlpack::dl_tensor_of(this.array(), Some(this.dl_device()?), &mut strides)?;
        // The array never changes, so neither do its strides: boxed once, on first use.
        let strides = this.element_strides.get_or_init(|| Box::new(strides));
        tensor.shape = this.array().shape.as_ptr().cast_mut();
        tensor.strides = strides.as_ptr().cast_mut();
        Ok(tensor)
    }

    fn held(&self) -> std::sync::MutexGuard<'_, Held> {
        self.held.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    pub(crate) fn owner_ref(&self, py: Python<'_>) -> Option<Py<PyAny>> {
        self.held().owner.as_ref().map(|o| o.clone_ref(py))
    }

    /// Refuses what reaches the memory once `release()` let go of it.
    pub(crate) fn live(&self) -> PyResult<()> {
        if self.held().released {
            Err(pyo3::exceptions::PyValueError::new_err(
                "the cai.Array was released (release()): its memory may be gone",
            ))
        } else {
            Ok(())
        }
    }

    pub(crate) fn array(&self) -> &CaiArray {
        self.described.description.array()
    }

    /// Counts an export, under the same lock `release()` takes: a released array is refused,
    /// and one with an export alive cannot be released until the export ends.
    pub(crate) fn begin_export(&self) -> PyResult<()> {
        let mut held = self.held();
        if held.released {
            return Err(pyo3::exceptions::PyValueError::new_err(
                "the cai.Array was released (release()): its memory may be gone",
            ));
        }
        held.exports += 1;
        Ok(())
    }

    /// Ends an export counted by `begin_export` (its tensor was deleted).
    pub(crate) fn export_ended(&self) {
        let mut held = self.held();
        held.exports = held.exports.saturating_sub(1);
    }

    pub(crate) fn shape_slice(&self) -> &[i64] {
        &self.array().shape[..self.array().ndim as usize]
    }

    /// The layout, from what the import validated (no second validation); an Array that was
    /// not imported (a mask view, a C producer's) is validated for it.
    pub(crate) fn layout(&self) -> CaiResult<CaiLayout> {
        Ok(match &self.described.imported {
            Some(imported) => layout_of_validated(self.array(), &imported.validated)?,
            None => layout_of(self.array())?,
        })
    }

    /// The descr fields the struct points to (this Array's own, or a C producer's).
    pub(crate) fn fields(&self) -> &[CaiField] {
        let array = self.array();
        let owned = self.described.description.fields();
        if !owned.is_empty() || array.descr.is_null() {
            return owned;
        }
        // SAFETY: validated: `descr` points to `descr_count` fields that outlive this Array.
        unsafe { std::slice::from_raw_parts(array.descr, array.descr_count as usize) }
    }

    /// The mask as an Array: a view of the one read at import (its owner the mask's producer),
    /// or of a C producer's (its owner this Array). Made when asked for: an import does not
    /// pay for a Python object it may never need.
    pub(crate) fn mask_array(slf: &Bound<'_, Array>) -> PyResult<Option<Py<Array>>> {
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
            Some(mask_owner) => mask_owner.clone_ref(py),
            None => slf.clone().into_any().unbind(),
        };
        let mut array = Array::new(Read::borrowing(view, None, Some(owner)), None);
        array.keep = Some(slf.clone().unbind());
        Ok(Some(Py::new(py, array)?))
    }
}

impl Array {
    /// `release()`: see array_methods.rs.
    pub(crate) fn release_now(&self) -> PyResult<()> {
        let (owner, release) = {
            let mut held = self.held();
            if held.exports > 0 {
                return Err(pyo3::exceptions::PyBufferError::new_err(format!(
                    "cai.Array.release(): {} DLPack export(s) of this array are alive and view its memory; let go of them first",
                    held.exports
                )));
            }
            held.take()
        };
        run_release(release, self.array());
        drop(owner);
        Ok(())
    }

    /// What this Array keeps alive, for the collector.
    pub(crate) fn traverse(&self, visit: PyVisit<'_>) -> Result<(), PyTraverseError> {
        // try_lock: the collector may run while release() lets go of the owner (which is then
        // out of the hold already).
        if let Ok(held) = self.held.try_lock() {
            if let Some(owner) = &held.owner {
                visit.call(owner)?;
            }
        }
        for kept in self.buffer.iter().chain(&self.mask_owners) {
            visit.call(kept)?;
        }
        if let Some(keep) = &self.keep {
            visit.call(keep)?;
        }
        Ok(())
    }

    pub(crate) fn itemsize_checked(&self) -> CaiResult<u64> {
        Ok(typestr_is_a_device_type(self.array())?.itemsize)
    }

    /// What the import established (None when not imported).
    pub(crate) fn imported(&self) -> Option<&Imported> {
        self.described.imported.as_ref()
    }
}

/// The release of a view handed to a DLPack consumer: ends the export it counted on its
/// cai.Array and drops the reference that kept the array alive. A tensor's deleter may run on
/// any thread, and at any moment of the interpreter's life: once the interpreter is finalizing
/// nothing may attach to it, so the reference is then leaked on purpose (the process is ending;
/// CPython's own extensions do the same).
unsafe extern "C" fn release_python_owner(array: *mut CaiArray) {
    let owner = (*array).owner.cast::<pyo3::ffi::PyObject>();
    // Attached from any thread, without PyO3's count: the body's one reference is a `Bound`,
    // let go of at once.
    with_thread_attached(|py| {
        let owner = Bound::from_owned_ptr(py, owner);
        if let Ok(exported) = owner.cast::<Array>() {
            exported.get().export_ended();
        }
    });
}
