//! `cai.Array`: what every import makes (python/src/import.rs for dicts, objects and DLPack,
//! python/src/buffer_interface.rs for the Buffer Interface). An Array owns its `CaiArray` (and
//! the descr fields and mask it points to), keeps its producer alive, and never changes after
//! it is made, so it is shared freely between threads.

use cai::binding::dict::Repr;
use cai::binding::export::{export_version, normalize_for_export, normalize_validated_for_export};
use cai::binding::import::Imported;
use cai::binding::rules::{
    c_strides, layout_of, layout_of_validated, stream_for_version, typestr_is_a_device_type, validate,
};
use cai::binding::Description;
use cai::{
    CaiArray, CaiDLDevice, CaiDLTensor, CaiField, CaiLayout, Error, Status, CAI_DL_CPU, CAI_MAX_NDIM,
    CAI_MEMORY_CUDA, CAI_STREAM_LEGACY,
};
use pyo3::exceptions::PyAttributeError;
use pyo3::gc::{PyTraverseError, PyVisit};
use pyo3::intern;
use pyo3::prelude::*;
use std::sync::Mutex;

use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyList, PyTuple};

use crate::errors::{CaiResult, Failure};
use crate::import::consumer_stream;
use crate::pool::Pooled;
use crate::read::scalar;

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

impl Described {
    fn new(description: Description<Pooled>, device: Option<CaiDLDevice>) -> Described {
        Described { description, imported: None, device }
    }

    /// A struct whose pointers, if any, point into memory someone else keeps valid.
    fn borrowing(array: Pooled, device: Option<CaiDLDevice>) -> Described {
        Described::new(Description::borrowing(array), device)
    }
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
    buffer: Option<Py<PyAny>>,
    /// The producers of the masks read at import (the mask's first, then its mask's): the
    /// description owns the masks' structs, these keep their memory alive.
    mask_owners: Vec<Py<PyAny>>,
    /// The Array whose memory this one's pointers refer to, when this one is a view of its mask.
    keep: Option<Py<Array>>,
    as_parameter: PyOnceLock<Py<PyAny>>,
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
    fn new(mut described: Described, owner: Option<Py<PyAny>>, mask_owners: Vec<Py<PyAny>>) -> Array {
        // The struct handed to C (`ptr`) is a borrowed view: its release is held here instead.
        let release = described.description.array_mut().release.take();
        let held = Mutex::new(Held { owner, release, released: false, exports: 0 });
        Array {
            described,
            held,
            buffer: None,
            mask_owners,
            keep: None,
            as_parameter: PyOnceLock::new(),
            element_strides: std::sync::OnceLock::new(),
        }
    }

    /// A new Array over `source`'s struct, its own stream and descr included, with no copy of
    /// the producer's description: counted as an export of `source`, which it keeps alive.
    pub(crate) fn view_of(source: &Bound<'_, Array>) -> PyResult<Array> {
        let view = Array::exported_view(source)?;
        let described = Described::borrowing(Pooled::copy_of(&view), source.get().described.device);
        Ok(Array::new(described, None, Vec::new()))
    }

    /// An Array over a tensor just taken (DLPack), on `device`, keeping `owner` alive.
    pub(crate) fn from_taken(
        taken: crate::dlpack::Taken,
        device: CaiDLDevice,
        owner: Option<Py<PyAny>>,
    ) -> Array {
        Array::new(Described::borrowing(taken.into_inner(), Some(device)), owner, Vec::new())
    }

    /// A view of `slf`'s struct that owns one export of it (see `begin_export`): its release
    /// ends the export and lets go of `slf`.
    fn exported_view(slf: &Bound<'_, Array>) -> PyResult<CaiArray> {
        slf.get().begin_export()?;
        Ok(crate::dlpack::export_view(slf))
    }

    /// An Array over a description read from `owner` (a dict's fields, mask and all), kept
    /// alive with it and with its masks' producers; not yet imported.
    pub(crate) fn from_description(
        description: Description<Pooled>,
        owner: &Bound<'_, PyAny>,
        mask_owners: Vec<Py<PyAny>>,
    ) -> Array {
        Array::new(Described::new(description, None), Some(owner.clone().unbind()), mask_owners)
    }

    /// An Array over a Buffer Interface object `owner`, its `buffer` (the cl_mem holder) kept
    /// for OpenCL memory; not yet imported.
    pub(crate) fn from_buffer_interface(
        array: Pooled,
        buffer: Option<Py<PyAny>>,
        owner: &Bound<'_, PyAny>,
    ) -> Array {
        let mut made =
            Array::new(Described::borrowing(array, None), Some(owner.clone().unbind()), Vec::new());
        made.buffer = buffer;
        made
    }

    /// The DLPack device of an array taken from a DLPack producer.
    pub(crate) fn dlpack_device(&self) -> Option<CaiDLDevice> {
        self.described.device
    }

    /// Records what the import established.
    pub(crate) fn set_imported(&mut self, imported: Imported) {
        self.described.imported = Some(imported);
    }

    /// A new cai.Array that takes over a C producer's `source` once it validates: its release
    /// then runs when Python lets go of the Array, and `source` no longer owns (its `release`
    /// cleared). On failure `source` is untouched.
    pub(crate) fn adopt(py: Python<'_>, source: &mut CaiArray) -> CaiResult<Py<Array>> {
        validate(source)?;
        let mut array = Pooled::copy_of(source);
        let release = array.release.take();
        let adopted = Py::new(py, Array::new(Described::borrowing(array, None), None, Vec::new()))?;
        adopted.get().held().release = release;
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
        let view = Array::exported_view(slf)?;
        Ok(crate::dlpack::tensor_of(view, device, consumer, versioned)?)
    }

    /// The DLPack device of this array's memory.
    pub(crate) fn dl_device(&self) -> CaiResult<CaiDLDevice> {
        crate::dlpack::device_of_array(self.array(), self.described.device)
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

    fn owner_ref(&self, py: Python<'_>) -> Option<Py<PyAny>> {
        self.held().owner.as_ref().map(|o| o.clone_ref(py))
    }

    /// Refuses what reaches the memory once `release()` let go of it.
    fn live(&self) -> PyResult<()> {
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
    fn begin_export(&self) -> PyResult<()> {
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

    fn shape_slice(&self) -> &[i64] {
        &self.array().shape[..self.array().ndim as usize]
    }

    /// The layout, from what the import validated (no second validation); an Array that was
    /// not imported (a mask view, a C producer's) is validated for it.
    fn layout(&self) -> CaiResult<CaiLayout> {
        Ok(match &self.described.imported {
            Some(imported) => layout_of_validated(self.array(), &imported.validated)?,
            None => layout_of(self.array())?,
        })
    }

    /// The descr fields the struct points to (this Array's own, or a C producer's).
    fn fields(&self) -> &[CaiField] {
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
    fn mask_array(slf: &Bound<'_, Array>) -> PyResult<Option<Py<Array>>> {
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
        let mut array = Array::new(Described::borrowing(view, None), Some(owner), Vec::new());
        array.keep = Some(slf.clone().unbind());
        Ok(Some(Py::new(py, array)?))
    }
}

#[pymethods]
impl Array {
    /// Takes over a CaiArray made in C (a ctypes pointer, `byref`, struct, or an address): its
    /// release callback runs exactly once, when this Array is garbage-collected. The C
    /// struct's `release` is cleared, so the C side cannot release it twice.
    #[classmethod]
    fn from_c(_class: &Bound<'_, pyo3::types::PyType>, pointer: &Bound<'_, PyAny>) -> PyResult<Py<Array>> {
        let py = pointer.py();
        let address: usize = match pointer.extract::<usize>() {
            Ok(address) => address,
            Err(_) => helper(py, "address_of")?.call1((pointer,))?.extract()?,
        };
        if address == 0 {
            return Err(Failure::Cai(Error::new(Status::NullArgument, "pointer is NULL")).into());
        }
        let source = address as *mut CaiArray;
        // SAFETY: the caller hands over a readable, writable CaiArray at `address`.
        let array = Pooled::copy_of(unsafe { &*source });
        // SAFETY: as above; ownership moves here, so the source can no longer release.
        unsafe { (*source).release = None };
        // Owned from here on: if validation fails, dropping it releases it.
        let taken = Array::new(Described::borrowing(array, None), None, Vec::new());
        validate(taken.array()).map_err(Failure::Cai)?;
        Py::new(py, taken)
    }

    /// Address of the CaiArray, valid while this Array lives.
    #[getter]
    fn ptr(&self) -> PyResult<usize> {
        self.live()?;
        Ok(self.array() as *const CaiArray as usize)
    }

    /// The Buffer Interface's `buffer`: the object holding the `cl_mem` (its `int_ptr`) for
    /// OpenCL memory, the device pointer as an int for CUDA memory.
    #[getter]
    fn buffer(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        self.live()?;
        match &self.buffer {
            Some(buffer) => Ok(buffer.clone_ref(py)),
            None => Ok(self.array().data.into_pyobject(py)?.into_any().unbind()),
        }
    }

    /// The Buffer Interface's `offset`: bytes from the start of `buffer` to the first element
    /// (always 0 for CUDA memory).
    #[getter]
    fn offset(&self) -> u64 {
        self.array().byte_offset
    }

    /// Lets go of the memory now: the producer object is no longer kept alive, and the release
    /// callback of an array taken over from C or DLPack runs (once). Safe to call twice; garbage
    /// collection does the same. Afterwards what reaches the memory (`ptr`, `buffer`, the
    /// interfaces) raises ValueError; the metadata stays readable. While a DLPack tensor made
    /// from this array (`__dlpack__`, `numpy.from_dlpack(a)`, ...) is alive, BufferError: the
    /// consumer still views the memory.
    fn release(&self) -> PyResult<()> {
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

    /// What ctypes passes for this Array: a `CaiArray*` (made on first use).
    #[getter]
    fn _as_parameter_(slf: &Bound<'_, Array>) -> PyResult<Py<PyAny>> {
        let py = slf.py();
        let this = slf.get();
        this.live()?;
        this.as_parameter
            .get_or_try_init(py, || Ok(helper(py, "as_parameter")?.call1((this.ptr()?,))?.unbind()))
            .map(|p| p.clone_ref(py))
    }

    #[getter]
    fn shape<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, self.shape_slice())
    }

    #[getter]
    fn ndim(&self) -> i32 {
        self.array().ndim
    }

    /// The typestr as the producer wrote it (`__cuda_array_interface__` has the canonical one).
    #[getter]
    fn typestr(&self) -> &str {
        let bytes = self.array().typestr_bytes().unwrap_or_default();
        std::str::from_utf8(bytes).unwrap_or_default()
    }

    #[getter]
    fn itemsize(&self) -> PyResult<u64> {
        Ok(self.itemsize_checked()?)
    }

    /// numpy's dtype for the typestr (needs numpy).
    #[getter]
    fn dtype<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        py.import("numpy")?.getattr("dtype")?.call1((self.typestr(),))
    }

    /// Byte strides; C-contiguous ones when the descriptor gave none.
    #[getter]
    fn strides<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        let array = self.array();
        let ndim = array.ndim as usize;
        if array.strides_given == 1 {
            return PyTuple::new(py, &array.strides[..ndim]);
        }
        let mut strides = [0i64; CAI_MAX_NDIM];
        c_strides(self.shape_slice(), self.itemsize_checked()?, &mut strides[..ndim])
            .map_err(Failure::Cai)?;
        PyTuple::new(py, &strides[..ndim])
    }

    #[getter]
    fn size(&self) -> PyResult<u64> {
        Ok(self.layout()?.element_count)
    }

    #[getter]
    fn nbytes(&self) -> PyResult<u64> {
        Ok(self.layout()?.nbytes)
    }

    #[getter]
    fn readonly(&self) -> bool {
        self.array().readonly == 1
    }

    #[getter]
    fn is_c_contiguous(&self) -> PyResult<bool> {
        Ok(self.layout()?.c_contiguous == 1)
    }

    #[getter]
    fn is_f_contiguous(&self) -> PyResult<bool> {
        Ok(self.layout()?.f_contiguous == 1)
    }

    #[getter]
    fn data_ptr(&self) -> u64 {
        self.array().data
    }

    /// The producer's stream (None, 1, 2 or a handle).
    #[getter]
    fn stream(&self) -> Option<u64> {
        Some(stream_for_version(self.array())).filter(|&s| s != 0)
    }

    /// What the driver said about the data pointer at import, or None if it was not asked.
    #[getter]
    fn pointer_info<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyDict>>> {
        let Some(info) =
            self.described.imported.map(|imported| imported.info).filter(|info| info.checked != 0)
        else {
            return Ok(None);
        };
        let dict = PyDict::new(py);
        dict.set_item("device_pointer", info.device_pointer)?;
        dict.set_item("allocation_base", info.allocation_base)?;
        dict.set_item("allocation_size", info.allocation_size)?;
        dict.set_item("context", info.context as usize)?;
        dict.set_item("device_ordinal", info.device_ordinal)?;
        dict.set_item("memory_type", info.memory_type)?;
        dict.set_item("is_managed", info.is_managed)?;
        Ok(Some(dict))
    }

    /// The object this Array keeps alive (the producer), or None.
    #[getter]
    fn owner(&self, py: Python<'_>) -> Option<Py<PyAny>> {
        self.owner_ref(py)
    }

    /// The mask as a cai.Array, or None.
    #[getter]
    fn mask(slf: &Bound<'_, Array>) -> PyResult<Option<Py<Array>>> {
        Array::mask_array(slf)
    }

    /// The interface in libcai's export form, as `cai_export` writes it: canonical typestr,
    /// version 3 (2 under CAI_ARRAY_INTERFACE_EXPORT_VERSION=2, then without stream),
    /// strides None when C-contiguous, data 0 when empty.
    #[getter]
    fn __cuda_array_interface__<'py>(slf: &Bound<'py, Array>) -> PyResult<Bound<'py, PyDict>> {
        let py = slf.py();
        let this = slf.get();
        this.live()?;
        // Absent, not failing: hasattr() tells CUDA consumers this is not for them.
        if this.array().memory != CAI_MEMORY_CUDA {
            return Err(PyAttributeError::new_err(
                "the array is OpenCL memory, which __cuda_array_interface__ cannot describe",
            ));
        }
        if this.described.device.is_some_and(|device| device.device_type == CAI_DL_CPU) {
            return Err(PyAttributeError::new_err(
                "the array is host memory (kDLCPU, taken with allow_host=True), which __cuda_array_interface__ cannot describe; use DLPack",
            ));
        }
        let mut exported = Pooled::copy_of(this.array());
        let version = export_version(0).map_err(Failure::Cai)?;
        // What the import validated holds for the copy: no second validation.
        match &this.described.imported {
            Some(imported) => normalize_validated_for_export(&mut exported, version, &imported.validated),
            None => normalize_for_export(&mut exported, version).map(drop),
        }
        .map_err(Failure::Cai)?;
        let ndim = exported.ndim as usize;
        let dict = PyDict::new(py);
        dict.set_item(intern!(py, "shape"), PyTuple::new(py, &exported.shape[..ndim])?)?;
        let typestr = std::str::from_utf8(exported.typestr_bytes().unwrap_or_default()).unwrap_or_default();
        dict.set_item(intern!(py, "typestr"), typestr)?;
        dict.set_item(intern!(py, "data"), (exported.data, exported.readonly == 1))?;
        dict.set_item(intern!(py, "version"), exported.version)?;
        if exported.strides_given == 1 {
            dict.set_item(intern!(py, "strides"), PyTuple::new(py, &exported.strides[..ndim])?)?;
        } else {
            dict.set_item(intern!(py, "strides"), py.None())?;
        }
        let fields = this.fields();
        if !fields.is_empty() {
            let descr = PyList::empty(py);
            for field in fields {
                descr.append((c_text(&field.name), c_text(&field.typestr)))?;
            }
            dict.set_item(intern!(py, "descr"), descr)?;
        }
        if let Some(mask) = Array::mask_array(slf)? {
            dict.set_item(intern!(py, "mask"), mask)?;
        }
        if version >= 3 {
            let stream = Some(exported.stream).filter(|&s| s != 0);
            dict.set_item(intern!(py, "stream"), stream)?;
        }
        Ok(dict)
    }

    /// DLPack's `(device_type, device_id)` of the memory: the DLPack producer's, else asked of
    /// the driver (device memory kDLCUDA, pinned host memory kDLCUDAHost, managed kDLCUDAManaged).
    fn __dlpack_device__(&self) -> PyResult<(i32, i32)> {
        let device = self.dl_device()?;
        Ok((device.device_type, device.device_id))
    }

    /// A DLPack capsule viewing this array's memory (the array stays alive while the tensor
    /// does). The consumer's `stream` (None: the legacy default stream; -1: no sync) is made to
    /// wait for the array's stream, stream-ordered. `max_version` (1, n) or above gives the
    /// versioned struct (with the read-only flag), else the legacy one. Never copies:
    /// `copy=True`, or a `dl_device` other than the array's, raise BufferError.
    #[pyo3(signature = (*, stream=None, max_version=None, dl_device=None, copy=None))]
    fn __dlpack__(
        slf: &Bound<'_, Array>,
        stream: Option<&Bound<'_, PyAny>>,
        max_version: Option<(u32, u32)>,
        dl_device: Option<(i32, i32)>,
        copy: Option<bool>,
    ) -> PyResult<Py<PyAny>> {
        let py = slf.py();
        let this = slf.get();
        this.live()?;
        let device = this.dl_device()?;
        crate::dlpack::export_arguments_allowed(device, dl_device, copy)?;
        // The arguments first: reading them may run Python code (a stream's __index__), which
        // may release this array; from the export on, release() is refused instead.
        let consumer = match stream {
            Some(s) if s.extract::<i64>().ok() == Some(-1) => None,
            None if device.device_type == CAI_DL_CPU => None,
            None => Some(CAI_STREAM_LEGACY),
            Some(s) if device.device_type == CAI_DL_CPU => {
                return Err(pyo3::exceptions::PyBufferError::new_err(format!(
                    "stream must be None for host memory, not {}",
                    Repr(&scalar(s.as_borrowed()))
                )))
            }
            Some(s) => Some(consumer_stream(Some(s))?),
        };
        let versioned = max_version.is_some_and(|(major, _)| major >= 1);
        let tensor = Array::export_tensor(slf, device, consumer, versioned)?;
        Ok(crate::dlpack::capsule_of(py, tensor, versioned)?)
    }

    /// DLPack 1.3's C exchange table (a capsule named "dlpack_exchange_api"): consumers that
    /// read it take a cai.Array's tensor without calling `__dlpack__`.
    #[classattr]
    fn __dlpack_c_exchange_api__(py: Python<'_>) -> PyResult<Py<PyAny>> {
        crate::exchange::exchange_api_capsule(py)
    }

    fn __repr__(&self) -> String {
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

    fn __traverse__(&self, visit: PyVisit<'_>) -> Result<(), PyTraverseError> {
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
}

impl Array {
    fn itemsize_checked(&self) -> CaiResult<u64> {
        Ok(typestr_is_a_device_type(self.array())?.itemsize)
    }
}

fn c_text(buffer: &[std::os::raw::c_char]) -> String {
    let bytes: Vec<u8> = buffer.iter().take_while(|&&c| c != 0).map(|&c| c as u8).collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// A helper of python/cai/_ctypes.py (the ctypes side stays in Python).
fn helper<'py>(py: Python<'py>, name: &str) -> PyResult<Bound<'py, PyAny>> {
    static MODULE: PyOnceLock<Py<PyModule>> = PyOnceLock::new();
    MODULE.get_or_try_init(py, || Ok::<_, PyErr>(py.import("cai._ctypes")?.unbind()))?.bind(py).getattr(name)
}
