//! `cai.Array`, what it holds: a description (python/src/described.rs, from any reader) with
//! what the import established, the producer kept alive, and the count of its exports. An
//! Array owns its `CaiArray` (and the descr fields and mask it points to) and never changes
//! after it is made, so it is shared freely between threads. By job, each file at its own layer
//! (tests/layering.rs):
//! - `object`: its objects (the type cpython/object.rs makes);
//! - `dlpack_export`: `__dlpack__` as every producer of the module answers it;
//! - `methods`: what Python sees of it (above the negotiation, which reads an Array).

pub mod dlpack_export;
pub mod methods;
pub mod object;

use std::ops::DerefMut;
use std::sync::OnceLock;

use cai::binding::import::Imported;
use cai::binding::rules::{layout_of, typestr_is_a_device_type, Validated};
use cai::binding::Description;
use cai::{CaiArray, CaiDLDevice, CaiField, CaiLayout, CAI_MAX_NDIM};
use pyo3::prelude::*;

use crate::cpython::{c_int, Kept, PyObject};
use crate::described::{Parts, Read};
use crate::dlpack::device_of_array;
use crate::errors::CaiResult;
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

/// A validated device array, held by a `cai.Array` object (python/src/array/object.rs) or by a
/// struct `cai_python_from_object` wrote.
pub struct Array {
    described: Described,
    /// What keeps the memory alive, until `release()` or collection lets go of it.
    held: HoldLock,
    /// The Buffer Interface's `buffer` object (a cl_mem holder), for arrays made from one.
    pub(crate) buffer: Option<Kept>,
    /// The producers of the masks read at import (the mask's first, then its mask's): the
    /// description owns the masks' structs, these keep their memory alive.
    pub(crate) mask_owners: Vec<Kept>,
    /// The Array whose memory this one's pointers refer to, when this one is a view of its mask.
    pub(crate) keep: Option<Kept>,
    pub(crate) as_parameter: OnceLock<Kept>,
    /// The strides in elements a DLTensor view points to (the exchange table's
    /// `dltensor_from_py_object_no_sync`), made on first use.
    pub(crate) element_strides: OnceLock<Box<[i64; CAI_MAX_NDIM]>>,
}

/// The producer object kept alive, and the release callback of an array taken over from C or
/// DLPack; both let go of once, by `release()` or by collection.
struct Held {
    owner: Option<Kept>,
    release: Option<unsafe extern "C" fn(*mut CaiArray)>,
    released: bool,
    /// DLPack tensors made from this array and not yet deleted: `release()` is refused while
    /// any is alive (as memoryview refuses it while buffers are exported), since each views the
    /// memory the release would let go of.
    exports: usize,
}

/// The lock of an Array's hold. Where a GIL exists, the GIL is the lock: every access holds a
/// token of the attached thread (`lock`) or is the collector's (`try_lock`, which runs
/// attached), and no Python code runs while the hold is borrowed (what `Held::take` returns is
/// let go of after), so a `RefCell`, whose borrow is checked without a locked instruction,
/// serves; a mutex's lock and unlock cost two (about 10 ns on the benchmark machine) on every
/// export and every read of a cai.Array. A free-threaded interpreter has a `Mutex`.
#[cfg(not(Py_GIL_DISABLED))]
struct HoldLock(std::cell::RefCell<Held>);

// SAFETY: only threads that hold the GIL borrow the cell (see above): no two at once, each
// borrow's flag written and cleared under the GIL, which orders them. One GIL: PyO3's modules
// refuse to load in a subinterpreter.
#[cfg(not(Py_GIL_DISABLED))]
unsafe impl Sync for HoldLock {}

#[cfg(not(Py_GIL_DISABLED))]
impl HoldLock {
    fn new(held: Held) -> HoldLock {
        HoldLock(std::cell::RefCell::new(held))
    }

    fn lock(&self, _attached: Python<'_>) -> impl DerefMut<Target = Held> + '_ {
        self.0.borrow_mut()
    }

    fn try_lock(&self) -> Option<impl DerefMut<Target = Held> + '_> {
        self.0.try_borrow_mut().ok()
    }

    fn get_mut(&mut self) -> &mut Held {
        self.0.get_mut()
    }
}

#[cfg(Py_GIL_DISABLED)]
struct HoldLock(std::sync::Mutex<Held>);

#[cfg(Py_GIL_DISABLED)]
impl HoldLock {
    fn new(held: Held) -> HoldLock {
        HoldLock(std::sync::Mutex::new(held))
    }

    fn lock(&self, _attached: Python<'_>) -> impl DerefMut<Target = Held> + '_ {
        self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn try_lock(&self) -> Option<impl DerefMut<Target = Held> + '_> {
        self.0.try_lock().ok()
    }

    fn get_mut(&mut self) -> &mut Held {
        self.0.get_mut().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl Held {
    /// Refuses what reaches the memory once `release()` let go of it.
    fn live(&self) -> PyResult<()> {
        if self.released {
            Err(pyo3::exceptions::PyValueError::new_err(
                "the cai.Array was released (release()): its memory may be gone",
            ))
        } else {
            Ok(())
        }
    }

    /// Empties the hold (marking it released) and returns what was in it, to be let go of
    /// outside the lock: dropping an object or running a callback may run Python code.
    fn take(&mut self) -> (Option<Kept>, Option<unsafe extern "C" fn(*mut CaiArray)>) {
        self.released = true;
        (self.owner.take(), self.release.take())
    }
}

/// Runs an array's release callback once, from `release()`, with a copy of its struct (the
/// producer knows it by its `owner`): other threads may still read this Array's metadata, so
/// the callback, which may write to what it is given, must not get the shared struct. A
/// dropped Array, which nothing else reaches, gives its own (see Drop).
pub(crate) fn run_release(release: Option<unsafe extern "C" fn(*mut CaiArray)>, array: &CaiArray) {
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
        let held = self.held.get_mut();
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
        let mut array = std::mem::MaybeUninit::uninit();
        // SAFETY: `write_new` writes every field of the place it is given.
        unsafe {
            Array::write_new(array.as_mut_ptr(), read, imported);
            array.assume_init()
        }
    }

    /// `Array::new(read, imported)` written into `place` field by field: an Array made whole on
    /// the stack and then copied into its object was one 280-byte copy a call, whose wide loads
    /// stalled on the narrower stores that had just written the fields.
    ///
    /// # Safety
    /// `place` is valid for writes of an Array and holds none (what it holds is not dropped).
    pub(crate) unsafe fn write_new(place: *mut Array, read: Read, imported: Option<Imported>) {
        // The struct handed to C (`ptr`) is a borrowed view: its release is held here instead.
        let Parts { description, release, device, owner, mask_owners, buffer } = read.into_parts();
        let held = Held { owner: owner.map(Kept::new), release, released: false, exports: 0 };
        // SAFETY: each field of the place is written once (the caller's contract).
        unsafe {
            (&raw mut (*place).described.description).write(description);
            (&raw mut (*place).described.imported).write(imported);
            (&raw mut (*place).described.device).write(device);
            (&raw mut (*place).held).write(HoldLock::new(held));
            (&raw mut (*place).buffer).write(buffer.map(Kept::new));
            (&raw mut (*place).mask_owners).write(mask_owners.into_iter().map(Kept::new).collect());
            (&raw mut (*place).keep).write(None);
            (&raw mut (*place).as_parameter).write(OnceLock::new());
            (&raw mut (*place).element_strides).write(OnceLock::new());
        }
    }

    /// What the import's validation found of this array's struct (None: not imported).
    pub(crate) fn validated(&self) -> Option<Validated> {
        self.described.imported.as_ref().map(|imported| imported.validated)
    }

    /// The DLPack device of an array taken from a DLPack producer.
    pub(crate) fn dlpack_device(&self) -> Option<CaiDLDevice> {
        self.described.device
    }

    /// The DLPack device of this array's memory.
    pub(crate) fn dl_device(&self) -> CaiResult<CaiDLDevice> {
        device_of_array(self.array(), self.described.device)
    }

    fn held(&self, attached: Python<'_>) -> impl DerefMut<Target = Held> + '_ {
        self.held.lock(attached)
    }

    pub(crate) fn owner_ref(&self, py: Python<'_>) -> Option<Py<PyAny>> {
        self.held(py).owner.as_ref().map(|o| o.bind(py).unbind())
    }

    /// Refuses what reaches the memory once `release()` let go of it.
    pub(crate) fn live(&self, py: Python<'_>) -> PyResult<()> {
        self.held(py).live()
    }

    pub(crate) fn array(&self) -> &CaiArray {
        self.described.description.array()
    }

    /// Counts an export, under the same lock `release()` takes: a released array is refused,
    /// and one with an export alive cannot be released until the export ends.
    pub(crate) fn begin_export(&self, py: Python<'_>) -> PyResult<()> {
        let mut held = self.held(py);
        held.live()?;
        held.exports += 1;
        Ok(())
    }

    /// Ends an export counted by `begin_export` (its tensor was deleted).
    pub(crate) fn export_ended(&self, py: Python<'_>) {
        let mut held = self.held(py);
        held.exports = held.exports.saturating_sub(1);
    }

    pub(crate) fn shape_slice(&self) -> &[i64] {
        &self.array().shape[..self.array().ndim as usize]
    }

    /// The layout, from what the import validated (no second validation); an Array that was
    /// not imported (a mask view, a C producer's) is validated for it.
    pub(crate) fn layout(&self) -> CaiResult<CaiLayout> {
        Ok(match &self.described.imported {
            Some(imported) => layout_of(self.array(), Some(&imported.validated))?,
            None => layout_of(self.array(), None)?,
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
}

impl Array {
    /// `release()`: see array/methods.rs.
    pub(crate) fn release_now(&self, py: Python<'_>) -> PyResult<()> {
        let (owner, release) = self.take_hold(py)?;
        run_release(release, self.array());
        drop(owner);
        Ok(())
    }

    /// What `release()` lets go of (the owner, the release callback), taken out and the Array
    /// marked released; refused while a DLPack export views the memory. release_after.rs
    /// defers letting go of it, and gives it back (`give_back_hold`) when that is refused.
    pub(crate) fn take_hold(
        &self,
        py: Python<'_>,
    ) -> PyResult<(Option<Kept>, Option<unsafe extern "C" fn(*mut CaiArray)>)> {
        let mut held = self.held(py);
        if held.exports > 0 {
            return Err(pyo3::exceptions::PyBufferError::new_err(format!(
                "cai.Array.release(): {} DLPack export(s) of this array are alive and view its memory; let go of them first",
                held.exports
            )));
        }
        Ok(held.take())
    }

    /// Undoes `take_hold`: the Array is live again and owns what it held.
    pub(crate) fn give_back_hold(
        &self,
        py: Python<'_>,
        owner: Option<Kept>,
        release: Option<unsafe extern "C" fn(*mut CaiArray)>,
    ) {
        let mut held = self.held(py);
        (held.owner, held.release, held.released) = (owner, release, false);
    }

    /// Visits what this Array keeps alive, for the collector: `visit`'s first nonzero answer,
    /// else 0.
    pub(crate) fn traverse(&self, mut visit: impl FnMut(*mut PyObject) -> c_int) -> c_int {
        // try_lock: the collector may run while release() lets go of the owner (which is then
        // out of the hold already).
        let held = self.held.try_lock();
        let owner = held.as_ref().and_then(|held| held.owner.as_ref());
        let kept = owner
            .into_iter()
            .chain(&self.buffer)
            .chain(&self.mask_owners)
            .chain(&self.keep)
            .chain(self.as_parameter.get());
        for each in kept {
            let visited = visit(each.as_ptr());
            if visited != 0 {
                return visited;
            }
        }
        0
    }

    pub(crate) fn itemsize_checked(&self) -> CaiResult<u64> {
        Ok(typestr_is_a_device_type(self.array())?.itemsize)
    }

    /// What the import established (None when not imported).
    pub(crate) fn imported(&self) -> Option<&Imported> {
        self.described.imported.as_ref()
    }

    /// Address of the CaiArray, valid while this Array lives.
    pub(crate) fn ptr(&self, py: Python<'_>) -> PyResult<usize> {
        self.live(py)?;
        Ok(self.array() as *const CaiArray as usize)
    }

    pub(crate) fn typestr(&self) -> &str {
        let bytes = self.array().typestr_bytes().unwrap_or_default();
        std::str::from_utf8(bytes).unwrap_or_default()
    }

    /// `repr(a)`.
    pub(crate) fn repr(&self) -> String {
        let array = self.array();
        let extents: Vec<String> = self.shape_slice().iter().map(i64::to_string).collect();
        let shape = match extents.as_slice() {
            [one] => format!("({one},)"),
            all => format!("({})", all.join(", ")),
        };
        format!(
            "cai.Array(shape={shape}, typestr={:?}, data={:#x}, readonly={})",
            self.typestr(),
            array.data,
            if array.readonly == 1 { "True" } else { "False" }
        )
    }
}
