//! `cai.Array`, what Python sees of it: its attributes, the CAI it exports, and DLPack
//! (`__dlpack__`, `__dlpack_device__`, and the exchange table of python/src/offer/exchange.rs).
//! The type object that serves them is cpython/object.rs's (array/object.rs): each attribute
//! is a `Getter` of `GETTERS`, each method a definition of `METHODS`.

use cai::binding::dict::Repr;
use cai::binding::export::{export_version, normalize_for_export};
use cai::binding::rules::{c_strides, stream_for_version, typestr_is_a_device_type, validate};
use cai::{CaiArray, Error, Status, CAI_DL_CPU, CAI_MAX_NDIM, CAI_MEMORY_CUDA};
use pyo3::exceptions::PyAttributeError;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBool, PyDict, PyInt, PyList, PyModule, PyTuple};
use pyo3::{Borrowed, IntoPyObjectExt};

use crate::array::dlpack_export::{dlpack_capsule, plain_arguments, DlpackArguments, DLPACK_SIGNATURE};
use crate::array::object::{array_type, ArrayObject, Getter};
use crate::array::Array;
use crate::cpython::fastcall::{run_assumed, run_attached, Definition, Signature};
use crate::cpython::Kept;
use crate::cpython::{CStr, PyObject, Py_ssize_t};
use crate::described::Read;
use crate::errors::Failure;
use crate::offer::exchange::exchange_api_capsule;
use crate::pool::Pooled;
use crate::values::scalar;

/// Makes the type (once per process) and adds it to the module as `Array`.
pub fn add_array_type(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    DLPACK_SIGNATURE.intern(py)?;
    FROM_C_SIGNATURE.intern(py)?;
    let ty = array_type(py, &GETTERS, &METHODS)?;
    ty.setattr("__dlpack_c_exchange_api__", exchange_api_capsule(py)?)?;
    m.add("Array", ty)
}

/// Every attribute: its name, its getter and its docstring.
pub static GETTERS: [(&CStr, Getter, &CStr); 22] = [
    (c"ptr", ptr, c"Address of the CaiArray, valid while this Array lives."),
    (
        c"buffer",
        buffer,
        c"The Buffer Interface's `buffer`: the object holding the `cl_mem` (its `int_ptr`) for
OpenCL memory, the device pointer as an int for CUDA memory.",
    ),
    (
        c"offset",
        offset,
        c"The Buffer Interface's `offset`: bytes from the start of `buffer` to the first element
(always 0 for CUDA memory).",
    ),
    (
        c"_as_parameter_",
        as_parameter,
        c"What ctypes passes for this Array: a `CaiArray*` (made on first use).",
    ),
    (c"shape", shape, c"The extent of each dimension, as a tuple of ints (`()` for a 0-d array)."),
    (c"ndim", ndim, c"The number of dimensions (`len(shape)`), 0 to 64."),
    (
        c"typestr",
        typestr,
        c"The struct's typestr: numpy's canonical spelling (`dtype.str`, byte order written) for
what was read from a dict or DLPack, as a C producer wrote it for `from_c` and
`cai_python_to_object` (`__cuda_array_interface__` always has the canonical one).",
    ),
    (c"itemsize", itemsize, c"Bytes per element, from the typestr (`'<f4'`: 4)."),
    (c"dtype", dtype, c"numpy's dtype for the typestr (needs numpy)."),
    (
        c"element_type",
        element_type,
        c"The elements' type by the name torch, jax and ml_dtypes share ('bfloat16',
'float8_e4m3fn', 'float32'), exact where the producer said it (DLPack, a numpy array of an
ml_dtypes type); None for a typestr that names no such type (opaque bytes a CAI dict gave
alone, structured types, strings, dates).",
    ),
    (c"strides", strides, c"Byte strides; C-contiguous ones when the descriptor gave none."),
    (c"size", size, c"The number of elements: the product of `shape` (1 for a 0-d array)."),
    (c"nbytes", nbytes, c"Bytes the elements occupy: `size * itemsize` (not the span of a strided array)."),
    (
        c"readonly",
        readonly,
        c"True when the producer marked the data read-only (the second item of the interface's
`data`, DLPack's read-only flag); import with `writable=True` to refuse such an array.",
    ),
    (
        c"is_c_contiguous",
        is_c_contiguous,
        c"True when the elements lie in row-major order with no gaps (numpy's `C_CONTIGUOUS`).",
    ),
    (
        c"is_f_contiguous",
        is_f_contiguous,
        c"True when the elements lie in column-major order with no gaps (numpy's `F_CONTIGUOUS`).",
    ),
    (
        c"data_ptr",
        data_ptr,
        c"The address of the first element as an int (the interface's `data` pointer; 0 for an
empty array). Readable after `release()`, but the memory is no longer kept alive then.",
    ),
    (c"stream", stream, c"The producer's stream (None, 1, 2 or a handle)."),
    (
        c"pointer_info",
        pointer_info,
        c"What the driver said about the data pointer at import (`device_pointer`,
`allocation_base`, `allocation_size`, `context`, `device_ordinal`, `memory_type`,
`is_managed`), or None when it was not asked: the pointer was not checked. That is so for
an empty array, with `pointer_check=cai.POINTER_CHECK_NEVER`, for an Array that was not
imported (`Array.from_c`), and with the default check when no CUDA driver could be loaded
(`cai.from_object` then warns: `cai.PointerNotCheckedWarning`).",
    ),
    (c"owner", owner, c"The object this Array keeps alive (the producer), or None."),
    (c"mask", mask, c"The mask as a cai.Array, or None."),
    (
        c"__cuda_array_interface__",
        cuda_array_interface,
        c"The interface in libcai's export form, as `cai_export` writes it: canonical typestr,
version 3 (2 under CAI_ARRAY_INTERFACE_EXPORT_VERSION=2, then without stream),
strides None when C-contiguous, data 0 when empty.",
    ),
];

/// Every method.
pub static METHODS: [Definition; 6] = [
    Definition::fast_class(
        c"from_c",
        from_c,
        c"from_c($type, pointer)
--

Takes over a CaiArray made in C: `pointer` is a ctypes `POINTER(cai.CaiArray)`,
`ctypes.byref(struct)`, a `cai.CaiArray` struct, a `ctypes.c_void_p`, or an int address
(unsafe: a wrong address is read and written as a CaiArray). Its release callback runs
exactly once, when this Array is garbage-collected. The C struct's `release` is
cleared, so the C side cannot release it twice. Anything else is a TypeError.",
    ),
    Definition::fast(
        c"release",
        crate::release_after::release,
        c"release($self, /, *, stream=None)
--

Lets go of the memory now: the producer object is no longer kept alive, and the release
callback of an array taken over from C or DLPack runs (once). Safe to call twice; garbage
collection does the same. Afterwards what reaches the memory (`ptr`, `buffer`, the
interfaces) raises ValueError; the metadata stays readable. While a DLPack tensor made
from this array (`__dlpack__`, `numpy.from_dlpack(a)`, ...) is alive, BufferError: the
consumer still views the memory.

With `stream` (1, 2, a CUstream int or a stream object), the Array is released at once but
what it keeps alive is let go of only once the GPU has passed the work enqueued on `stream`
so far (an event, never a host wait): a kernel launched there may still read the memory.
That release runs from a later `release(stream=...)` or `cai.release_pending()`, and at
interpreter exit (an atexit hook waits for it). A stream capturing a CUDA graph raises
cai.CaiError (CAI_ERROR_STREAM_CAPTURING) and the Array stays as it was.",
    ),
    Definition::no_arguments(
        c"__dlpack_device__",
        dlpack_device,
        c"__dlpack_device__($self, /)
--

DLPack's `(device_type, device_id)` of the memory: the DLPack producer's, else asked of
the driver (device memory kDLCUDA, pinned host memory kDLCUDAHost, managed kDLCUDAManaged).",
    ),
    Definition::fast(
        c"__dlpack__",
        dlpack,
        c"__dlpack__($self, /, *, stream=None, max_version=None, dl_device=None, copy=None)
--

A DLPack capsule viewing this array's memory (the array stays alive while the tensor
does). The consumer's `stream` (None: the legacy default stream; -1: no sync) is made to
wait for the array's stream, stream-ordered. `max_version` (1, n) or above gives the
versioned struct (with the read-only flag), else the legacy one. Never copies:
`copy=True`, or a `dl_device` other than the array's, raise BufferError.",
    ),
    Definition::no_arguments(
        c"__reduce__",
        reduce,
        c"__reduce__($self, /)
--

Pickles an array over CUDA device memory to its IPC descriptor (`cai.ipc_export(a)`): loaded
in another process on this machine, it is `cai.ipc_open` of it there, a view of the same
memory (no copy), which this Array must keep alive while it is used. Loaded in this process
(`pickle.loads` here, `copy.copy`), it is this Array itself while it lives, as the driver
opens no IPC handle in its own process. Host and OpenCL memory raise cai.CaiError naming why.",
    ),
    Definition::one_argument(
        c"__deepcopy__",
        deepcopy,
        c"__deepcopy__($self, memo, /)
--

Raises TypeError: a cai.Array views memory it does not own, and copy.deepcopy can copy no
device memory (it would give this same view, and writes through the copy would change the
original). Copy the memory with its producer (`cupy.array(a)`, `torch.as_tensor(a).clone()`);
`copy.copy(a)` gives the same view.",
    ),
];

/// `from_c`'s one parameter.
static FROM_C_SIGNATURE: Signature<1> = Signature::new("from_c", [c"pointer"], 1, 1);

/// `Array.from_c(pointer)` (a class method).
unsafe extern "C" fn from_c(
    _class: *mut PyObject,
    args: *const *mut PyObject,
    nargsf: Py_ssize_t,
    kwnames: *mut PyObject,
) -> *mut PyObject {
    let mut slots = [std::ptr::null_mut(); 1];
    // SAFETY: called by the interpreter, attached, with the vectorcall contract.
    let matched = unsafe { FROM_C_SIGNATURE.match_arguments(args, nargsf, kwnames, &mut slots) };
    run_attached(|py| {
        let slots = matched.map_err(|mismatch| FROM_C_SIGNATURE.refusal(py, mismatch))?;
        // SAFETY: a required argument of the call, alive for its duration.
        let pointer = unsafe { Borrowed::from_ptr(py, slots[0]) };
        Ok(take_over_c_array(&pointer)?.into_ptr())
    })
}

/// A new cai.Array taking over the CaiArray at `pointer` (see `from_c`'s docstring).
fn take_over_c_array<'py>(pointer: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
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
    let taken = Array::new(Read::borrowing(array, None, None, None), None);
    validate(taken.array()).map_err(Failure::Cai)?;
    Ok(ArrayObject::new(py, taken)?.into_any())
}

/// `a.__dlpack_device__()`, run without PyO3's count of the thread (`run_assumed`): its success
/// path borrows `self` and hands out a new tuple of the device the array holds or the driver
/// names, dropping no `Py<T>` and no `PyErr`.
unsafe extern "C" fn dlpack_device(slf: *mut PyObject, _unused: *mut PyObject) -> *mut PyObject {
    run_assumed(|py| {
        // SAFETY: the method's `self`, checked by its descriptor.
        let this = unsafe { ArrayObject::borrowed(py, slf) };
        let device = this.get().dl_device()?;
        Ok((device.device_type, device.device_id).into_pyobject(py)?.into_ptr())
    })
}

/// `a.__dlpack__(*, stream=None, max_version=None, dl_device=None, copy=None)`.
///
/// With plain arguments (`plain_arguments`) the body runs without PyO3's count of the thread
/// (`run_assumed`), as an offered type's `__dlpack__` does (offer/mod.rs). The audit of its success
/// path, which drops no `Py<T>` and no `PyErr`: the arguments are read without a failing
/// conversion; `self` is borrowed; `live`, the device, the export's count and the tensor return
/// their values; the capsule is handed out as a raw pointer. Any other call runs attached.
unsafe extern "C" fn dlpack(
    slf: *mut PyObject,
    args: *const *mut PyObject,
    nargsf: Py_ssize_t,
    kwnames: *mut PyObject,
) -> *mut PyObject {
    let mut slots = [std::ptr::null_mut(); 4];
    // SAFETY: called by the interpreter, attached, with the vectorcall contract.
    let matched = unsafe { DLPACK_SIGNATURE.match_arguments(args, nargsf, kwnames, &mut slots) };
    // SAFETY: attached (the interpreter called in); the slots are the call's arguments.
    let plain = matched.as_ref().ok().and_then(|slots| unsafe { plain_arguments(slots) });
    let body = |py: Python<'_>| {
        let slots = matched.map_err(|mismatch| DLPACK_SIGNATURE.refusal(py, mismatch))?;
        // SAFETY: the method's `self`, checked by its descriptor.
        let slf = unsafe { ArrayObject::borrowed(py, slf) };
        let this = slf.get();
        // The arguments first: reading them may run Python code (a stream's __index__), which
        // may release this array; from the export on, release() is refused instead.
        // SAFETY: attached; the slots are the call's arguments, alive for its duration.
        let arguments = unsafe { DlpackArguments::of_call(py, slots, plain) }?;
        let (request, device) = arguments.read(|| {
            this.live(py)?;
            Ok(this.dl_device()?)
        })?;
        let mut view = *this.array();
        Array::own_export(&slf, &mut view)?;
        Ok(dlpack_capsule(py, &mut view, this.validated().as_ref(), device, &request)?.into_ptr())
    };
    if plain.is_some() {
        run_assumed(body)
    } else {
        run_attached(body)
    }
}

/// `a.__reduce__()`: its body is python/src/entry/ipc.rs's.
unsafe extern "C" fn reduce(slf: *mut PyObject, _unused: *mut PyObject) -> *mut PyObject {
    run_attached(|py| {
        // SAFETY: the method's `self`, checked by its descriptor.
        let this = unsafe { ArrayObject::borrowed(py, slf) };
        Ok(crate::entry::ipc::reduce(&this)?.into_ptr())
    })
}

/// `a.__deepcopy__(memo)`: refused, with the message python/src/entry/ipc.rs writes.
unsafe extern "C" fn deepcopy(slf: *mut PyObject, _memo: *mut PyObject) -> *mut PyObject {
    run_attached(|py| {
        // SAFETY: the method's `self`, checked by its descriptor.
        let this = unsafe { ArrayObject::borrowed(py, slf) };
        Err(crate::entry::ipc::refuse_deepcopy(&this))
    })
}

fn ptr(this: &ArrayObject<'_>) -> PyResult<Py<PyAny>> {
    this.get().ptr(this.py())?.into_py_any(this.py())
}

fn buffer(this: &ArrayObject<'_>) -> PyResult<Py<PyAny>> {
    let py = this.py();
    let this = this.get();
    this.live(py)?;
    match &this.buffer {
        Some(buffer) => Ok(buffer.bind(py).unbind()),
        None => this.array().data.into_py_any(py),
    }
}

fn offset(this: &ArrayObject<'_>) -> PyResult<Py<PyAny>> {
    this.get().array().byte_offset.into_py_any(this.py())
}

fn as_parameter(slf: &ArrayObject<'_>) -> PyResult<Py<PyAny>> {
    let py = slf.py();
    let this = slf.get();
    this.live(py)?;
    if let Some(made) = this.as_parameter.get() {
        return Ok(made.bind(py).unbind());
    }
    let made = helper(py, "as_parameter")?.call1((this.ptr(py)?,))?;
    // Two threads may both make one: the first kept is the one every later read gets.
    let _ = this.as_parameter.set(Kept::new(made.unbind()));
    Ok(this.as_parameter.get().expect("set above").bind(py).unbind())
}

fn shape(this: &ArrayObject<'_>) -> PyResult<Py<PyAny>> {
    PyTuple::new(this.py(), this.get().shape_slice())?.into_py_any(this.py())
}

fn ndim(this: &ArrayObject<'_>) -> PyResult<Py<PyAny>> {
    this.get().array().ndim.into_py_any(this.py())
}

fn typestr(this: &ArrayObject<'_>) -> PyResult<Py<PyAny>> {
    this.get().typestr().into_py_any(this.py())
}

fn itemsize(this: &ArrayObject<'_>) -> PyResult<Py<PyAny>> {
    this.get().itemsize_checked()?.into_py_any(this.py())
}

fn dtype(this: &ArrayObject<'_>) -> PyResult<Py<PyAny>> {
    let py = this.py();
    Ok(py.import("numpy")?.getattr("dtype")?.call1((this.get().typestr(),))?.unbind())
}

fn element_type(this: &ArrayObject<'_>) -> PyResult<Py<PyAny>> {
    let array = this.get().array();
    let parsed = typestr_is_a_device_type(array).map_err(Failure::Cai)?;
    let exact = cai::binding::element_type::element_type(array.dl_dtype, parsed);
    exact.and_then(cai::binding::element_type::name_of).into_py_any(this.py())
}

fn strides(this: &ArrayObject<'_>) -> PyResult<Py<PyAny>> {
    let py = this.py();
    let this = this.get();
    let array = this.array();
    let ndim = array.ndim as usize;
    if array.strides_given == 1 {
        return PyTuple::new(py, &array.strides[..ndim])?.into_py_any(py);
    }
    let mut strides = [0i64; CAI_MAX_NDIM];
    c_strides(this.shape_slice(), this.itemsize_checked()?, &mut strides[..ndim]).map_err(Failure::Cai)?;
    PyTuple::new(py, &strides[..ndim])?.into_py_any(py)
}

fn size(this: &ArrayObject<'_>) -> PyResult<Py<PyAny>> {
    this.get().layout()?.element_count.into_py_any(this.py())
}

fn nbytes(this: &ArrayObject<'_>) -> PyResult<Py<PyAny>> {
    this.get().layout()?.nbytes.into_py_any(this.py())
}

fn readonly(this: &ArrayObject<'_>) -> PyResult<Py<PyAny>> {
    (this.get().array().readonly == 1).into_py_any(this.py())
}

fn is_c_contiguous(this: &ArrayObject<'_>) -> PyResult<Py<PyAny>> {
    (this.get().layout()?.c_contiguous == 1).into_py_any(this.py())
}

fn is_f_contiguous(this: &ArrayObject<'_>) -> PyResult<Py<PyAny>> {
    (this.get().layout()?.f_contiguous == 1).into_py_any(this.py())
}

fn data_ptr(this: &ArrayObject<'_>) -> PyResult<Py<PyAny>> {
    this.get().array().data.into_py_any(this.py())
}

fn stream(this: &ArrayObject<'_>) -> PyResult<Py<PyAny>> {
    let stream = Some(stream_for_version(this.get().array())).filter(|&s| s != 0);
    stream.into_py_any(this.py())
}

fn pointer_info(this: &ArrayObject<'_>) -> PyResult<Py<PyAny>> {
    let py = this.py();
    let Some(info) = this.get().imported().map(|imported| imported.info).filter(|info| info.checked != 0)
    else {
        return Ok(py.None());
    };
    let dict = PyDict::new(py);
    dict.set_item("device_pointer", info.device_pointer)?;
    dict.set_item("allocation_base", info.allocation_base)?;
    dict.set_item("allocation_size", info.allocation_size)?;
    dict.set_item("context", info.context as usize)?;
    dict.set_item("device_ordinal", info.device_ordinal)?;
    dict.set_item("memory_type", info.memory_type)?;
    dict.set_item("is_managed", info.is_managed)?;
    dict.into_py_any(py)
}

fn owner(this: &ArrayObject<'_>) -> PyResult<Py<PyAny>> {
    let py = this.py();
    this.get().owner_ref(py).into_py_any(py)
}

fn mask(this: &ArrayObject<'_>) -> PyResult<Py<PyAny>> {
    Array::mask_array(this)?.into_py_any(this.py())
}

fn cuda_array_interface(slf: &ArrayObject<'_>) -> PyResult<Py<PyAny>> {
    let py = slf.py();
    let this = slf.get();
    this.live(py)?;
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
        Some(imported) => normalize_for_export(&mut exported, version, Some(&imported.validated)).map(drop),
        None => normalize_for_export(&mut exported, version, None).map(drop),
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
    Ok(dict.into_any().unbind())
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
