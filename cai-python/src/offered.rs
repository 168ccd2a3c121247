//! The PyO3 route of `cai_python_offer` (include/cai_python.h): a `#[pyclass]` implements
//! [`Offer`] and [`offer`] gives its type every producer protocol, each read through the one
//! `fill` method by the package's glue (the table's `cai_python_offer_to`).
//!
//! The audit (every `unsafe` below, and why it is sound):
//! - The trampoline is called by the package's glue as a `CaiPythonFill`: attached to the
//!   interpreter, `self` a live instance of the offered type (or of a subclass), `out`,
//!   `device` and `error` writable. It never unwinds (one panic boundary around everything).
//! - It attaches through this extension's PyO3 first (the caller is attached through the
//!   package's copy, which this one does not see), so that a `Py<T>` the author's fill drops is
//!   let go of at once, never left in this PyO3's deferred pool. Where PyO3 refuses to attach
//!   (the interpreter finalizing) the caller's attachment is assumed, as the contract says it is.
//! - `self` is borrowed from the raw pointer (`Borrowed::from_ptr`, no reference taken), checked
//!   to be a `T` and borrowed through PyO3's borrow checker: a failed check or borrow is a
//!   status with a message, never a panic or a `&T` aliasing a `&mut T`.

use std::any::Any;
use std::ffi::{c_char, c_ulong};
use std::panic::{catch_unwind, AssertUnwindSafe};

use cai::{CaiArray, CaiDLDevice, CaiError, CaiStatus, Status, CAI_DL_CPU, CAI_DL_CUDA, CAI_OK};
use pyo3::prelude::*;
use pyo3::types::PyType;
use pyo3::{ffi, PyClass};

use crate::table;

/// A `#[pyclass]` whose instances describe an array: [`offer`] gives its type
/// `__cuda_array_interface__` (v3), `__dlpack__` and `__dlpack_device__`, DLPack's exchange
/// table and the C-level CAI table, each read through [`Offer::fill`].
///
/// The fill describes `&self` into a [`Fill`], which starts as a 0-d, writable, C-contiguous
/// `|u1` CUDA array at data 0 with stream 0 (no pending work): set what differs. The memory
/// must stay valid, and unchanged in layout, while Python holds `self` (a DLPack capsule, a
/// `cai.Array` or an acquired struct keeps `self` alive, not the memory itself: keep the
/// memory's owner in a field). The fill runs attached to the interpreter, on any thread of a
/// free-threaded build, once per protocol use; it must not run Python code that could change
/// `self`. An `Err` reaches Python as `cai.CaiError` (its status and message, prefixed with
/// the type's name), or as the Python exception it carries; libcai then validates what was
/// written, and refuses an invalid description naming the type and the field.
///
/// ```no_run
/// use pyo3::prelude::*;
///
/// /// A grayscale image in host memory.
/// #[pyclass]
/// struct Image {
///     pixels: Vec<u8>,
///     width: usize,
/// }
///
/// impl cai_python::Offer for Image {
///     fn fill(&self, out: &mut cai_python::Fill<'_, '_>) -> Result<(), cai_python::OfferError> {
///         let height = (self.pixels.len() / self.width) as i64;
///         out.data(self.pixels.as_ptr() as u64).shape(&[height, self.width as i64])?.host();
///         Ok(())
///     }
/// }
///
/// #[pymodule]
/// fn images(module: &Bound<'_, PyModule>) -> PyResult<()> {
///     module.add_class::<Image>()?;
///     cai_python::offer::<Image>(module.py())
/// }
/// ```
pub trait Offer: PyClass {
    /// Describes `self` into `out`; see the trait.
    fn fill(&self, out: &mut Fill<'_, '_>) -> Result<(), OfferError>;
}

/// What an [`Offer::fill`] failed with.
#[derive(Debug)]
pub enum OfferError {
    /// A refusal: its status and a message naming the field and the fix (the type's name is
    /// prefixed by libcai). Raised in Python as `cai.CaiError`, reported to a C consumer as the
    /// status and its `CaiError`.
    Cai(cai::Error),
    /// A Python exception, raised as it is (a note names the offered type).
    Python(PyErr),
}

impl OfferError {
    /// A refusal of `status` with `message` (naming the field).
    pub fn new(status: Status, message: impl Into<String>) -> OfferError {
        OfferError::Cai(cai::Error::new(status, message))
    }
}

impl From<cai::Error> for OfferError {
    fn from(error: cai::Error) -> OfferError {
        OfferError::Cai(error)
    }
}

impl From<PyErr> for OfferError {
    fn from(error: PyErr) -> OfferError {
        OfferError::Python(error)
    }
}

impl std::fmt::Display for OfferError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            OfferError::Cai(error) => error.fmt(f),
            OfferError::Python(error) => error.fmt(f),
        }
    }
}

impl std::error::Error for OfferError {}

/// The description an [`Offer::fill`] writes: a borrowed `CaiArray` and the array's DLPack
/// device, preset as [`Offer`] says (the device preset to CUDA, its ordinal found from the
/// pointer). Setters of one field return `&mut Self`; those that can refuse what they are
/// given return a `Result` whose error names the field.
pub struct Fill<'a, 'py> {
    py: Python<'py>,
    out: &'a mut CaiArray,
    device: &'a mut CaiDLDevice,
}

impl<'py> Fill<'_, 'py> {
    /// The interpreter, attached: for making a `PyErr`, or reading `Py<T>` fields.
    pub fn py(&self) -> Python<'py> {
        self.py
    }

    /// The address of the first element.
    pub fn data(&mut self, data: u64) -> &mut Self {
        self.out.data = data;
        self
    }

    /// The extents (ndim is their count, at most `cai::CAI_MAX_NDIM`); the strides, if given
    /// before, are dropped.
    pub fn shape(&mut self, shape: &[i64]) -> Result<&mut Self, cai::Error> {
        if shape.len() > cai::CAI_MAX_NDIM {
            return Err(cai::Error::new(
                Status::InvalidShape,
                format!(
                    "shape has {} dimensions; at most CAI_MAX_NDIM ({}) are allowed",
                    shape.len(),
                    cai::CAI_MAX_NDIM
                ),
            ));
        }
        self.out.ndim = shape.len() as i32;
        self.out.shape[..shape.len()].copy_from_slice(shape);
        self.out.strides_given = 0;
        Ok(self)
    }

    /// Byte strides, one per dimension of the shape set before (else C-contiguous).
    pub fn strides(&mut self, strides: &[i64]) -> Result<&mut Self, cai::Error> {
        let ndim = self.out.ndim as usize;
        if strides.len() != ndim {
            return Err(cai::Error::new(
                Status::InvalidStrides,
                format!(
                    "strides has {} entries for a shape of {ndim} dimensions: set the shape first",
                    strides.len()
                ),
            ));
        }
        self.out.strides[..ndim].copy_from_slice(strides);
        self.out.strides_given = 1;
        Ok(self)
    }

    /// The numpy type string, e.g. `"<f4"` (checked by libcai after the fill).
    pub fn typestr(&mut self, typestr: &str) -> Result<&mut Self, cai::Error> {
        let bytes = typestr.as_bytes();
        if bytes.len() >= cai::CAI_TYPESTR_CAPACITY || bytes.contains(&0) {
            return Err(cai::Error::new(
                Status::InvalidTypestr,
                format!(
                    "typestr {typestr:?} is not a type string of at most {} bytes without NUL",
                    cai::CAI_TYPESTR_CAPACITY - 1
                ),
            ));
        }
        for (slot, byte) in self.out.typestr.iter_mut().zip(bytes.iter().chain([&0])) {
            *slot = *byte as c_char;
        }
        Ok(self)
    }

    /// Whether consumers must not write the data.
    pub fn readonly(&mut self, readonly: bool) -> &mut Self {
        self.out.readonly = u32::from(readonly);
        self
    }

    /// The CUDA stream the data's pending work is on, in the CUDA Array Interface's encoding
    /// (0: none pending; 1: the legacy default stream; 2: the per-thread one; else a CUstream):
    /// consumers order their work after it.
    pub fn stream(&mut self, stream: u64) -> &mut Self {
        self.out.stream = stream;
        self
    }

    /// The data is host memory (DLPack's kDLCPU): DLPack consumers take it; the
    /// `__cuda_array_interface__` dict is then absent, as for a CPU tensor.
    pub fn host(&mut self) -> &mut Self {
        *self.device = CaiDLDevice { device_type: CAI_DL_CPU, device_id: 0 };
        self
    }

    /// The data is memory of CUDA device `ordinal`, 0 or more, used without asking the driver
    /// (by default the ordinal is asked of the driver from the pointer; a negative one other
    /// than that default's -1 is refused by every protocol, naming the type). A libcai reader
    /// that checks the pointer refuses an ordinal the driver contradicts.
    pub fn cuda_device(&mut self, ordinal: i32) -> &mut Self {
        *self.device = CaiDLDevice { device_type: CAI_DL_CUDA, device_id: ordinal };
        self
    }

    /// The description as written so far.
    pub fn raw(&self) -> &CaiArray {
        self.out
    }

    /// The description itself, for what the setters do not cover (a `mask`, `descr` fields).
    ///
    /// # Safety
    /// `mask` and `descr` (with `descr_count`) point at memory that `self` (the instance) keeps
    /// alive and unchanged while it is described; `owner` and `release` stay NULL (libcai owns
    /// what it hands out); `shape`, `strides` and `typestr` as cai.h says.
    pub unsafe fn raw_mut(&mut self) -> &mut CaiArray {
        self.out
    }
}

/// Gives `T`'s type (added to a module or not) every producer protocol, each read through
/// [`Offer::fill`]: `__cuda_array_interface__` (v3, built when read; absent for host memory),
/// `__dlpack__` and `__dlpack_device__` (the producer's stream ordered before the consumer's,
/// the instance kept alive until the capsule's deleter runs), DLPack's exchange table
/// `__dlpack_c_exchange_api__` and the C-level CAI table `__cuda_array_interface_c_api__`.
/// Python subclasses inherit them. Call it once, in the module's init.
///
/// A `TypeError` when the type defines one of those itself (or was offered already), or when
/// it is an immutable type (`#[pyclass(immutable_type)]`) under PyO3's `abi3` feature, whose
/// type dict the limited API cannot write: an immutable type is given the attributes through
/// its dict otherwise, as `cai_python_offer` does.
///
/// ```no_run
/// # use pyo3::prelude::*;
/// # #[pyclass]
/// # struct Image;
/// # impl cai_python::Offer for Image {
/// #     fn fill(&self, _: &mut cai_python::Fill<'_, '_>) -> Result<(), cai_python::OfferError> { Ok(()) }
/// # }
/// #[pymodule]
/// fn images(module: &Bound<'_, PyModule>) -> PyResult<()> {
///     module.add_class::<Image>()?;
///     cai_python::offer::<Image>(module.py())
/// }
/// ```
pub fn offer<T: Offer>(py: Python<'_>) -> PyResult<()> {
    let api = table(py)?;
    let ty = T::type_object(py);
    let type_dict = dict_to_write(&ty)?;
    // SAFETY: attached (`py`); a live, ready type (held by `ty`), its own dict or NULL; the
    // trampoline has CaiPythonFill's signature and contract, and this module is never unloaded.
    let status =
        unsafe { (api.cai_python_offer_to)(ty.as_type_ptr(), Some(fill_trampoline::<T>), type_dict) };
    if status != 0 {
        return Err(PyErr::fetch(py));
    }
    Ok(())
}

/// Py_TPFLAGS_IMMUTABLETYPE (CPython 3.10; the bit was unused before).
const IMMUTABLE_TYPE: c_ulong = 1 << 8;

/// As cai_python_offer decides: NULL (set the attributes) for a mutable heap type, which a
/// PyO3 class is unless `immutable_type`; else the type's own dict.
fn dict_to_write(ty: &Bound<'_, PyType>) -> PyResult<*mut ffi::PyObject> {
    // SAFETY: a live type.
    let flags = unsafe { ffi::PyType_GetFlags(ty.as_type_ptr()) };
    if flags & ffi::Py_TPFLAGS_HEAPTYPE != 0 && flags & IMMUTABLE_TYPE == 0 {
        return Ok(std::ptr::null_mut());
    }
    #[cfg(not(Py_LIMITED_API))]
    {
        // SAFETY: a live, ready type: its tp_dict is its own dict (a heap type's, never NULL).
        Ok(unsafe { (*ty.as_type_ptr()).tp_dict })
    }
    #[cfg(Py_LIMITED_API)]
    {
        let name = ty.qualname().map(|name| name.to_string()).unwrap_or_else(|_| "?".into());
        Err(pyo3::exceptions::PyTypeError::new_err(format!(
            "cai_python::offer: '{name}' is an immutable type, whose dict the limited API (PyO3's abi3 feature) \
             cannot write: drop #[pyclass(immutable_type)], or build the extension without abi3"
        )))
    }
}

/// The `CaiPythonFill` of `T`: one per offered type (a generic function, no closure).
///
/// # Safety
/// cai_python.h's contract for a fill: the caller is attached to the interpreter; `slf` is a
/// live instance of the offered type; `out`, `device` and `error` NULL or writable.
unsafe extern "C" fn fill_trampoline<T: Offer>(
    slf: *mut ffi::PyObject,
    out: *mut CaiArray,
    device: *mut CaiDLDevice,
    error: *mut CaiError,
) -> CaiStatus {
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: the caller's arguments, as the contract says.
        let run = move |py: Python<'_>| unsafe { fill_attached::<T>(py, slf, out, device, error) };
        match Python::try_attach(run) {
            Some(status) => status,
            // SAFETY: the caller is attached (the contract); PyO3 refuses only to attach anew.
            None => run(unsafe { Python::assume_attached() }),
        }
    }));
    outcome.unwrap_or_else(|payload| {
        let message = format!("its fill panicked: {}", panic_message(payload.as_ref()));
        report(error, &cai::Error::new(Status::Panic, message))
    })
}

/// The trampoline's body, attached through this PyO3.
///
/// # Safety
/// As `fill_trampoline`.
unsafe fn fill_attached<T: Offer>(
    py: Python<'_>,
    slf: *mut ffi::PyObject,
    out: *mut CaiArray,
    device: *mut CaiDLDevice,
    error: *mut CaiError,
) -> CaiStatus {
    if slf.is_null() || out.is_null() || device.is_null() {
        return report(
            error,
            &cai::Error::new(Status::NullArgument, "self, out and device must not be NULL"),
        );
    }
    // SAFETY: a live object the caller holds, borrowed for this call (no reference taken).
    let object = unsafe { pyo3::Borrowed::from_ptr(py, slf) };
    let Ok(instance) = object.cast::<T>() else {
        let message = "self is not an instance of the offered #[pyclass] (nor of a subclass)";
        return report(error, &cai::Error::new(Status::InvalidArgument, message));
    };
    let Ok(this) = instance.try_borrow() else {
        let message =
            "self is mutably borrowed (a method taking &mut self is running): it can be described once \
                       that method returns";
        return report(error, &cai::Error::new(Status::InvalidArgument, message));
    };
    // SAFETY: checked non-NULL; the caller's writable structs, not otherwise referenced here.
    let (out, device) = unsafe { (&mut *out, &mut *device) };
    let mut fill = Fill { py, out, device };
    match this.fill(&mut fill) {
        Ok(()) => CAI_OK,
        Err(OfferError::Cai(refusal)) => report(error, &refusal),
        Err(OfferError::Python(exception)) => {
            note_the_type(py, &exception, &object.get_type());
            exception.restore(py);
            Status::Python.code()
        }
    }
}

/// Adds a note (PEP 678, Python 3.11 and later) to an exception the fill raised, naming the
/// type it described; the exception itself is the fill's.
fn note_the_type(py: Python<'_>, exception: &PyErr, ty: &Bound<'_, PyType>) {
    let name = ty.qualname().map(|name| name.to_string()).unwrap_or_else(|_| "?".into());
    let note = format!("raised by the fill of '{name}' (cai_python::Offer), describing it for libcai");
    let value = exception.value(py);
    if value.hasattr("add_note").unwrap_or(false) {
        // A failed note is dropped: the fill's own exception is what matters.
        let _ = value.call_method1("add_note", (note,));
    }
}

/// Writes `refusal` into `error` (NULL: nothing) as cai.h's functions do, the message
/// truncated at a character boundary to fit; returns its status.
fn report(error: *mut CaiError, refusal: &cai::Error) -> CaiStatus {
    // SAFETY: NULL or the caller's writable CaiError.
    if let Some(error) = unsafe { error.as_mut() } {
        error.code = refusal.status().code();
        error.driver_result = refusal.driver_result();
        let mut end = refusal.message().len().min(cai::CAI_ERROR_MESSAGE_CAPACITY - 1);
        while !refusal.message().is_char_boundary(end) {
            end -= 1;
        }
        for (slot, byte) in
            error.message.iter_mut().zip(refusal.message().as_bytes()[..end].iter().chain([&0]))
        {
            *slot = *byte as c_char;
        }
    }
    refusal.status().code()
}

/// A panic's message, when it has one.
fn panic_message(payload: &(dyn Any + Send)) -> &str {
    payload
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("(no message)")
}
