//! `cai.Array`, what Python sees of it: its attributes, the CAI it exports, and DLPack
//! (`__dlpack__`, `__dlpack_device__`, and the exchange table of python/src/exchange_offered.rs).

use cai::binding::dict::Repr;
use cai::binding::export::{export_version, normalize_for_export, normalize_validated_for_export};
use cai::binding::rules::{c_strides, stream_for_version, validate};
use cai::{CaiArray, Error, Status, CAI_DL_CPU, CAI_MAX_NDIM, CAI_MEMORY_CUDA};
use pyo3::exceptions::PyAttributeError;
use pyo3::gc::{PyTraverseError, PyVisit};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBool, PyDict, PyInt, PyList, PyTuple};

use crate::array::Array;
use crate::described::Read;
use crate::dlpack_export::{dlpack_capsule, DlpackArguments};
use crate::errors::Failure;
use crate::exchange_offered::exchange_api_capsule;
use crate::pool::Pooled;
use crate::values::scalar;

#[pymethods]
impl Array {
    /// Takes over a CaiArray made in C: `pointer` is a ctypes `POINTER(cai.CaiArray)`,
    /// `ctypes.byref(struct)`, a `cai.CaiArray` struct, a `ctypes.c_void_p`, or an int address
    /// (unsafe: a wrong address is read and written as a CaiArray). Its release callback runs
    /// exactly once, when this Array is garbage-collected. The C struct's `release` is
    /// cleared, so the C side cannot release it twice. Anything else is a TypeError.
    #[classmethod]
    fn from_c(_class: &Bound<'_, pyo3::types::PyType>, pointer: &Bound<'_, PyAny>) -> PyResult<Py<Array>> {
        let py = pointer.py();
        // Only a real int is an address (not a bool, nor whatever has __index__); the ctypes
        // objects are told apart in Python, which refuses every other type.
        let address: usize = if pointer.is_instance_of::<PyInt>() && !pointer.is_instance_of::<PyBool>() {
            pointer.extract::<usize>().map_err(|_| {
                Failure::Cai(Error::new(
                    Status::InvalidArgument,
                    format!(
                        "pointer is the int {}, which is no address (0..2**64); pass a CaiArray's address",
                        Repr(&scalar(pointer.as_borrowed()))
                    ),
                ))
            })?
        } else {
            helper(py, "address_of")?.call1((pointer,))?.extract()?
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
        let taken = Array::new(Read::borrowing(array, None, None), None);
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
        self.release_now()
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

    /// The extent of each dimension, as a tuple of ints (`()` for a 0-d array).
    #[getter]
    fn shape<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, self.shape_slice())
    }

    /// The number of dimensions (`len(shape)`), 0 to 64.
    #[getter]
    fn ndim(&self) -> i32 {
        self.array().ndim
    }

    /// The struct's typestr: numpy's canonical spelling (`dtype.str`, byte order written) for
    /// what was read from a dict or DLPack, as a C producer wrote it for `from_c` and
    /// `cai_python_to_object` (`__cuda_array_interface__` always has the canonical one).
    #[getter]
    fn typestr(&self) -> &str {
        let bytes = self.array().typestr_bytes().unwrap_or_default();
        std::str::from_utf8(bytes).unwrap_or_default()
    }

    /// Bytes per element, from the typestr (`'<f4'`: 4).
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

    /// The number of elements: the product of `shape` (1 for a 0-d array).
    #[getter]
    fn size(&self) -> PyResult<u64> {
        Ok(self.layout()?.element_count)
    }

    /// Bytes the elements occupy: `size * itemsize` (not the span of a strided array).
    #[getter]
    fn nbytes(&self) -> PyResult<u64> {
        Ok(self.layout()?.nbytes)
    }

    /// True when the producer marked the data read-only (the second item of the interface's
    /// `data`, DLPack's read-only flag); import with `writable=True` to refuse such an array.
    #[getter]
    fn readonly(&self) -> bool {
        self.array().readonly == 1
    }

    /// True when the elements lie in row-major order with no gaps (numpy's `C_CONTIGUOUS`).
    #[getter]
    fn is_c_contiguous(&self) -> PyResult<bool> {
        Ok(self.layout()?.c_contiguous == 1)
    }

    /// True when the elements lie in column-major order with no gaps (numpy's `F_CONTIGUOUS`).
    #[getter]
    fn is_f_contiguous(&self) -> PyResult<bool> {
        Ok(self.layout()?.f_contiguous == 1)
    }

    /// The address of the first element as an int (the interface's `data` pointer; 0 for an
    /// empty array). Readable after `release()`, but the memory is no longer kept alive then.
    #[getter]
    fn data_ptr(&self) -> u64 {
        self.array().data
    }

    /// The producer's stream (None, 1, 2 or a handle).
    #[getter]
    fn stream(&self) -> Option<u64> {
        Some(stream_for_version(self.array())).filter(|&s| s != 0)
    }

    /// What the driver said about the data pointer at import (`device_pointer`,
    /// `allocation_base`, `allocation_size`, `context`, `device_ordinal`, `memory_type`,
    /// `is_managed`), or None when it was not asked: the pointer was not checked. That is so for
    /// an empty array, with `pointer_check=cai.POINTER_CHECK_NEVER`, for an Array that was not
    /// imported (`Array.from_c`), and with the default check when no CUDA driver could be loaded
    /// (`cai.from_object` then warns: `cai.PointerNotCheckedWarning`).
    #[getter]
    fn pointer_info<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyDict>>> {
        let Some(info) = self.imported().map(|imported| imported.info).filter(|info| info.checked != 0)
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
        if this.dlpack_device().is_some_and(|device| device.device_type == CAI_DL_CPU) {
            return Err(PyAttributeError::new_err(
                "the array is host memory (kDLCPU, taken with allow_host=True), which __cuda_array_interface__ cannot describe; use DLPack",
            ));
        }
        let mut exported = Pooled::copy_of(this.array());
        let version = export_version(0).map_err(Failure::Cai)?;
        // What the import validated holds for the copy: no second validation.
        match this.imported() {
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
        max_version: Option<&Bound<'_, PyAny>>,
        dl_device: Option<&Bound<'_, PyAny>>,
        copy: Option<bool>,
    ) -> PyResult<Py<PyAny>> {
        let this = slf.get();
        // The arguments first: reading them may run Python code (a stream's __index__), which
        // may release this array; from the export on, release() is refused instead.
        let arguments = DlpackArguments::new(stream, max_version, dl_device, copy)?;
        let (request, device) = arguments.read(|| {
            this.live()?;
            Ok(this.dl_device()?)
        })?;
        let mut view = Array::exported_view(slf)?;
        Ok(dlpack_capsule(slf.py(), &mut view, this.validated().as_ref(), device, &request)?)
    }

    /// DLPack 1.3's C exchange table (a capsule named "dlpack_exchange_api"): consumers that
    /// read it take a cai.Array's tensor without calling `__dlpack__`.
    #[classattr]
    fn __dlpack_c_exchange_api__(py: Python<'_>) -> PyResult<Py<PyAny>> {
        exchange_api_capsule(py)
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
        self.traverse(visit)
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
