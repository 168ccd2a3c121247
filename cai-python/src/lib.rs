//! libcai for PyO3 extensions: take any array the `cai` package takes (a CUDA Array Interface
//! dict of versions 0-3 or an object exposing one, a `cai.Array`, a DLPack producer), and hand
//! a [`cai::Array`] back to Python as a `cai.Array`.
//!
//! Every call goes through the C API table the installed `cai` package publishes (the capsule
//! `cai._native._C_API`, as `include/cai_python.h` reads it), so that an extension built on
//! this crate links no libcai and no `cai._native`, and a process has one `cai.Array` type, one
//! CUDA driver table and one event pool, whichever extensions it loads.
//!
//! The `cai` crate's own safe device calls are routed there too: once this crate has read the
//! table ([`import`] in the module's init, or any function here), [`cai::ArrayRef::import`],
//! [`cai::ArrayRef::sync`], [`cai::pointer_info`] and [`cai::driver_version`] in the extension
//! run on the package's driver state ([`cai::route_device_calls`]), never on a second one.
//!
//! The other way round, a `#[pyclass]` of the extension becomes a producer with one method:
//! implement [`Offer`] (describe `&self` into a [`Fill`]) and call [`offer`] in the module's
//! init; the type gains `__cuda_array_interface__`, `__dlpack__`, `__dlpack_device__`, DLPack's
//! exchange table and the C-level CAI table, as `cai_python_offer` gives a C type.
//!
//! ```no_run
//! use pyo3::prelude::*;
//!
//! /// The number of bytes any GPU array spans.
//! #[pyfunction]
//! fn nbytes(obj: &Bound<'_, PyAny>) -> PyResult<u64> {
//!     let array = cai_python::view(obj, &cai::ImportOptions::new())?;
//!     array.layout().map(|layout| layout.nbytes).map_err(cai_python::raise)
//! }
//! ```
#![deny(missing_docs)]

use std::ffi::c_void;
use std::marker::PhantomData;
use std::mem::MaybeUninit;
use std::ops::Deref;
use std::sync::atomic::{AtomicPtr, Ordering};
use std::sync::OnceLock;

use cai::{CaiArray, CaiImportOptions, ImportOptions};
use pyo3::exceptions::PyImportError;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyType;

#[cfg(feature = "conversions")]
mod conversions;
pub mod ffi;
mod offered;
// The build script's reading of PyO3's configuration, tested with this crate's unit tests.
#[cfg(test)]
#[path = "../build.rs"]
#[allow(dead_code)]
mod build_script;

pub use offered::{offer, Fill, Offer, OfferError};

use ffi::{CaiPythonApi, FromObject, CAI_PYTHON_API_MAJOR, CAI_PYTHON_API_MINOR, CAI_PYTHON_CAPSULE_NAME};

/// The table `import` read: null until then. Read and written atomically, as threads of a
/// free-threaded interpreter may read it for the first time together (they read the same
/// capsule, so whichever store wins is the same table).
static TABLE: AtomicPtr<CaiPythonApi> = AtomicPtr::new(std::ptr::null_mut());

/// The package's table, read on first use: for calling a function of cai.h through it when
/// neither this crate's functions nor the `cai` crate's safe calls (routed to this table) are
/// enough.
pub fn api(py: Python<'_>) -> PyResult<&'static CaiPythonApi> {
    table(py)
}

/// Reads the table from the installed `cai` package (importing it), once per process, and
/// routes the `cai` crate's safe device calls to it. Call it in the module's init, so that a
/// mismatch fails the module's import and no device call of the extension's can come first;
/// every function here reads the table on first use otherwise. An `ImportError` names both
/// versions when the package's table is not one this crate reads, and the fix when the
/// extension's `cai` crate had already loaded a CUDA driver of its own.
pub fn import(py: Python<'_>) -> PyResult<()> {
    table(py).map(drop)
}

fn table(py: Python<'_>) -> PyResult<&'static CaiPythonApi> {
    let mut api = TABLE.load(Ordering::Acquire);
    if api.is_null() {
        api = read_table(py)?;
        TABLE.store(api, Ordering::Release);
    }
    // SAFETY: a table read_table checked, in a module (`cai._native`) never unloaded.
    Ok(unsafe { &*api })
}

fn read_table(py: Python<'_>) -> PyResult<*mut CaiPythonApi> {
    // SAFETY: attached to the interpreter (`py`); a static, NUL-terminated name.
    let api =
        unsafe { pyo3::ffi::PyCapsule_Import(CAI_PYTHON_CAPSULE_NAME.as_ptr(), 0) }.cast::<CaiPythonApi>();
    if api.is_null() {
        return Err(PyErr::fetch(py));
    }
    // SAFETY: every version of the table begins with these three fields; read by value, no
    // reference to a table that may be shorter than ours.
    let (major, minor, size) = unsafe { ((*api).major, (*api).minor, (*api).size) };
    if major != CAI_PYTHON_API_MAJOR
        || minor < CAI_PYTHON_API_MINOR
        || size < std::mem::size_of::<CaiPythonApi>() as u64
    {
        return Err(PyImportError::new_err(format!(
            "the installed cai package offers C API {major}.{minor}; this extension was built against \
             cai_python.h {CAI_PYTHON_API_MAJOR}.{CAI_PYTHON_API_MINOR} (the cai-python crate) and needs \
             {CAI_PYTHON_API_MAJOR}.{CAI_PYTHON_API_MINOR} or a later minor: install a cai package that \
             matches it, or rebuild the extension against the installed one"
        )));
    }
    // SAFETY: checked above: a table of this layout, in a module never unloaded.
    route_device_calls(unsafe { &*api })?;
    Ok(api)
}

/// Sends the extension's `cai` crate's safe device calls to the package's functions, so that
/// the process has one driver state and one event pool.
fn route_device_calls(api: &'static CaiPythonApi) -> PyResult<()> {
    static CALLS: OnceLock<cai::DeviceCalls> = OnceLock::new();
    let calls = CALLS.get_or_init(|| cai::DeviceCalls {
        import: api.cai_import,
        sync: api.cai_sync,
        pointer_info: api.cai_pointer_info,
        driver_status: api.cai_driver_status,
        release_after: api.cai_release_after,
        release_pending: api.cai_release_pending,
        ipc_export: api.cai_ipc_export,
        ipc_open: api.cai_ipc_open,
    });
    // SAFETY: cai.h's functions as the package publishes them, with cai.h's contracts, in a
    // module never unloaded.
    unsafe { cai::route_device_calls(calls) }.map_err(|error| PyImportError::new_err(error.to_string()))
}

/// Calls one of the table's importers (`cai_python_from_object`, `cai_python_view`, ..): the
/// struct it wrote, or the Python exception it raised (`cai.CaiError` for libcai's refusals,
/// naming the field).
fn read(
    obj: &Bound<'_, PyAny>,
    options: &CaiImportOptions,
    call: impl Fn(&CaiPythonApi) -> FromObject,
) -> PyResult<CaiArray> {
    let py = obj.py();
    let entry = call(table(py)?);
    let mut out = MaybeUninit::<CaiArray>::uninit();
    // SAFETY: attached (`py`); a live object; readable options; `out` writable; a NULL error
    // (the exception carries the message). `out` is written on success only.
    let status = unsafe { entry(obj.as_ptr(), options, out.as_mut_ptr(), std::ptr::null_mut()) };
    if status != cai::CAI_OK {
        return Err(PyErr::fetch(py));
    }
    // SAFETY: written on success.
    Ok(unsafe { out.assume_init() })
}

/// `cai.from_object` from Rust: `obj` negotiated (CAI dict or object, `cai.Array`, DLPack),
/// validated, pointer-checked and synchronized as `options` say, into an owning
/// [`cai::Array`]: it holds a reference to `obj` (and any DLPack tensor taken), or for a type
/// read through its DLPack exchange table only the managed tensor the table gave, let go of
/// when the Array is dropped, on any thread.
pub fn from_object(obj: &Bound<'_, PyAny>, options: &ImportOptions) -> PyResult<cai::Array> {
    let raw = read(obj, options.as_raw(), |api| api.cai_python_from_object)?;
    // SAFETY: the table's struct owns what it points at until its release, which runs once,
    // from any thread (cai_python.h); nothing else releases it.
    Ok(unsafe { cai::Array::from_raw(raw) })
}

/// The borrowed import (`cai_python_view`): the same negotiation, validation, pointer check and
/// synchronization as [`from_object`], but no reference taken and nothing allocated.
///
/// The view borrows `obj`, so the object outlives it: Rust guarantees that much. It does not
/// guarantee the rest of the contract: the struct describes `obj` as it was, and Python code
/// that the caller runs while holding the view (a call into Python, a drop that runs a
/// `__del__`, releasing the GIL to another thread) may change or free what it points at (a
/// dict's `typestr` replaced, a tensor resized). Use a view between taking it and a kernel
/// launch; take [`from_object`] to keep an array.
///
/// A `__dlpack__` producer (numpy, jax) is asked for its own memory (`copy=False`) and its
/// tensor deleted before this returns. Refuses, with `cai.CaiError` naming
/// `cai_python_from_object`, what cannot be borrowed: a dict with a mask or named `descr`
/// fields, and a type whose DLPack exchange table lacks the non-owning DLTensor call.
pub fn view<'a>(obj: &'a Bound<'_, PyAny>, options: &ImportOptions) -> PyResult<ArrayView<'a>> {
    read(obj, options.as_raw(), |api| api.cai_python_view).map(ArrayView::borrowing)
}

/// [`view`] where a borrowed struct can hold the array, else [`from_object`]
/// (`cai_python_view_or_own`): what [`view`] refuses because a struct cannot borrow it (a dict
/// with a mask or named `descr` fields, a type whose exchange table lacks the non-owning
/// DLTensor call) is imported owning and held by the returned view until it is dropped, with no
/// exception raised on the way ([`ArrayView::is_borrowed`] says which). Every failure is
/// [`from_object`]'s. What the [`ArrayView`] argument conversion calls.
pub fn view_or_own<'a>(obj: &'a Bound<'_, PyAny>, options: &ImportOptions) -> PyResult<ArrayView<'a>> {
    let raw = read(obj, options.as_raw(), |api| api.cai_python_view_or_own)?;
    Ok(ArrayView::borrowing_or_owning(raw))
}

/// `cai.from_buffer_interface` from Rust: an object of the OpenCL/CUDA Buffer Interface (or a
/// pyopencl array), checked as a CAI array is and, for OpenCL memory, against its buffer and
/// the consumer queue (`options`' consumer stream, a `cl_command_queue`), into an owning
/// [`cai::Array`] as [`from_object`]'s.
pub fn from_buffer_interface(obj: &Bound<'_, PyAny>, options: &ImportOptions) -> PyResult<cai::Array> {
    let raw = read(obj, options.as_raw(), |api| api.cai_python_from_buffer_interface)?;
    // SAFETY: as from_object's: the table's struct, released once from any thread.
    Ok(unsafe { cai::Array::from_raw(raw) })
}

/// Moves `array` into a new `cai.Array`, which offers the CUDA Array Interface and DLPack and
/// drops `array` (running its release once) when Python lets go of it, on whichever thread
/// holds the last reference: `array`'s release must be callable from any thread (as the
/// builder's `on_release` and [`from_object`]'s are). That drop runs attached to the
/// interpreter through this extension's PyO3, so the Python objects an `on_release` closure
/// drops are let go of then, not deferred (give the closure as [`keep`] makes it all the same:
/// the array may be dropped elsewhere before it reaches Python). The array is validated first;
/// when it is refused, it is dropped and the `cai.CaiError` returned.
pub fn to_object(py: Python<'_>, array: cai::Array) -> PyResult<Bound<'_, PyAny>> {
    let api = table(py)?;
    let mut raw = *array.as_raw();
    raw.owner = Box::into_raw(Box::new(array)).cast::<c_void>();
    raw.release = Some(release_boxed_array);
    // SAFETY: attached (`py`); a valid struct, which the new object takes over on success.
    let made = unsafe { (api.cai_python_to_object)(&mut raw) };
    if made.is_null() {
        // SAFETY: refused: the struct is still ours, released here once.
        unsafe { release_boxed_array(&mut raw) };
        return Err(PyErr::fetch(py));
    }
    // SAFETY: a new reference.
    Ok(unsafe { Bound::from_owned_ptr(py, made) })
}

/// The release of what [`to_object`] hands over: drops the boxed [`cai::Array`] it owns,
/// attached to the interpreter through this extension's PyO3.
///
/// Attached because the caller is usually the package's `cai.Array` deallocation: that thread
/// holds the interpreter, but through the package's copy of PyO3, which this extension's copy
/// does not see; a `Py<T>` the array's `on_release` closure drops would otherwise go to this
/// copy's deferred pool and be let go of only when the extension is next entered. When the
/// interpreter cannot be attached to (finalizing, or gone) the array is dropped unattached, as
/// it was before: whatever Python references it holds are then left to PyO3's pool.
unsafe extern "C" fn release_boxed_array(array: *mut CaiArray) {
    // SAFETY: `owner` is the Box to_object leaked; the release runs once.
    let boxed = unsafe { Box::from_raw((*array).owner.cast::<cai::Array>()) };
    // A producer's release that panics must not unwind into C: it is reported and the rest
    // leaked.
    let dropped = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        if let Err(unattached) = drop_attached(boxed) {
            drop(unattached);
        }
    }));
    if dropped.is_err() {
        eprintln!("cai-python: an array's release panicked; what it held is leaked");
    }
}

/// Drops `value` attached to the interpreter through this extension's PyO3 (attaching the
/// calling thread for the drop when it is not), so that every `Py<T>` it holds is let go of
/// now. Hands `value` back, undropped, when the interpreter cannot be attached to: it is not
/// initialized, or it is finalizing.
fn drop_attached<T>(value: T) -> Result<(), T> {
    let mut value = Some(value);
    match Python::try_attach(|_py| drop(value.take())) {
        Some(()) => Ok(()),
        None => Err(value.take().expect("try_attach did not run the closure, which holds the value")),
    }
}

/// A release that keeps `value` (typically the `Py<PyAny>` whose memory an array describes)
/// alive until the array is released, then drops it attached to the interpreter: for
/// [`cai::ArrayBuilder::on_release`].
///
/// Use it for every Python object an array keeps. A release runs on whichever thread lets go of
/// the array: inside the `cai` package's `cai.Array` deallocation (a thread this extension's
/// PyO3 does not count as attached), in a DLPack consumer's deleter, on a Rust thread the array
/// was sent to, on a thread with no Python thread state at all. A plain `move || drop(source)`
/// is then deferred into PyO3's pool until the extension is next entered; this one attaches
/// first (taking the GIL, or a thread state on the free-threaded build) and lets go of `value`
/// at once. The one exception: once the interpreter is finalizing or gone nothing may touch
/// Python, and `value` is leaked on purpose (the process is ending).
///
/// ```no_run
/// use pyo3::prelude::*;
///
/// /// A cai.Array of `count` floats at `data`, keeping `source` (whose memory it is) alive.
/// #[pyfunction]
/// fn wrap(py: Python<'_>, source: Py<PyAny>, data: u64, count: i64) -> PyResult<Bound<'_, PyAny>> {
///     let array = cai::Array::builder("<f4", &[count], data)
///         .on_release(cai_python::keep(source))
///         .build()
///         .map_err(cai_python::raise)?;
///     cai_python::to_object(py, array)
/// }
/// ```
pub fn keep<T: Send + 'static>(value: T) -> impl FnOnce() + Send + 'static {
    move || {
        if let Err(unattachable) = drop_attached(value) {
            std::mem::forget(unattachable);
        }
    }
}

/// [`cai::Array::release_after`] on the package's queue: hands `array` back to its producer
/// once the GPU has passed the work enqueued on `stream` so far, never waiting on the host
/// (`cai.Array.release(stream=...)` from Rust). The table is read first, so that the array
/// goes to the queue the package drains (later libcai calls, `cai.release_pending`, and the
/// package's exit hook, which runs what is still queued before the interpreter finalizes),
/// never to a queue of the extension's own copy of libcai. On failure the array comes back
/// with the `cai.CaiError` (`CAI_ERROR_STREAM_CAPTURING` for a capturing stream).
///
/// ```no_run
/// use pyo3::prelude::*;
///
/// /// Takes `obj`, enqueues work on `stream` that reads it, and lets go of it without waiting.
/// #[pyfunction]
/// fn consume(obj: &Bound<'_, PyAny>, stream: u64) -> PyResult<()> {
///     // SAFETY (both blocks): the caller's live CUstream.
///     let options = unsafe { cai::ImportOptions::new().consumer_stream(stream) };
///     let array = cai_python::from_object(obj, &options)?;
///     // ... launch a kernel on `stream` that reads array.data() ...
///     unsafe { cai_python::release_after(obj.py(), array, stream) }.map_err(|(_array, error)| error)
/// }
/// ```
///
/// # Safety
/// A `stream` other than 0, 1 and 2 is a live `CUstream`.
pub unsafe fn release_after(
    py: Python<'_>,
    array: cai::Array,
    stream: u64,
) -> Result<(), (cai::Array, PyErr)> {
    if let Err(failed) = table(py) {
        return Err((array, failed));
    }
    // SAFETY: the caller's promise; the call is routed to the package's cai_release_after.
    unsafe { array.release_after(stream) }.map_err(|(array, error)| (array, raise(error)))
}

/// [`cai::release_pending`] on the package's queue (`cai.release_pending`): runs the releases
/// that are due ([`cai::PendingMode::Poll`]) or all of them, waiting for each
/// ([`cai::PendingMode::Wait`]); how many are still queued.
pub fn release_pending(py: Python<'_>, mode: cai::PendingMode) -> PyResult<u64> {
    table(py)?;
    cai::release_pending(mode).map_err(raise)
}

/// `error` (a refusal of libcai's Rust API) as the `cai.CaiError` the package raises for it,
/// with its status, message and driver result: for `.map_err(cai_python::raise)?`.
pub fn raise(error: cai::Error) -> PyErr {
    Python::attach(|py| {
        static CAI_ERROR: PyOnceLock<Py<PyType>> = PyOnceLock::new();
        let made = CAI_ERROR
            .import(py, "cai", "CaiError")
            .and_then(|class| class.call1((error.status().name(), error.message(), error.driver_result())));
        match made {
            Ok(instance) => PyErr::from_value(instance),
            Err(failed) => failed,
        }
    })
}

/// What [`view`] borrowed: the array as the object described it, valid while the object is
/// borrowed (see [`view`] for what that does and does not guarantee); or, from [`view_or_own`]
/// (the argument conversion's), an array imported owning, released when the view is dropped.
/// Dereferences to [`cai::ArrayRef`]; a borrowed view never releases anything.
pub struct ArrayView<'a> {
    held: Held,
    _object: PhantomData<&'a Bound<'a, PyAny>>,
}

/// A view's struct: borrowed from the object, or the owning import of it. The borrowed struct
/// stays inline: a view allocates nothing; the owned import is the rare case.
#[allow(clippy::large_enum_variant)]
enum Held {
    Borrowed(CaiArray),
    Owned(cai::Array),
}

impl ArrayView<'_> {
    fn borrowing(raw: CaiArray) -> Self {
        ArrayView { held: Held::Borrowed(raw), _object: PhantomData }
    }

    /// What `cai_python_view_or_own` wrote: borrowed when it has no release, else owning.
    fn borrowing_or_owning(raw: CaiArray) -> Self {
        if raw.release.is_none() {
            return Self::borrowing(raw);
        }
        // SAFETY: an owning struct of the table (cai_python_from_object's), released once, from
        // any thread; nothing else releases it.
        let owned = unsafe { cai::Array::from_raw(raw) };
        ArrayView { held: Held::Owned(owned), _object: PhantomData }
    }

    /// The array as libcai's own view type.
    pub fn as_view(&self) -> cai::ArrayView<'_> {
        match &self.held {
            // SAFETY: the table wrote the struct; its descr and mask point into the object,
            // which outlives `self`, and its stream is the object's.
            Held::Borrowed(raw) => unsafe { cai::ArrayView::from_raw(raw) },
            Held::Owned(array) => array.view(),
        }
    }

    /// Whether the struct borrows the object (false: the view owns an import of it).
    pub fn is_borrowed(&self) -> bool {
        matches!(self.held, Held::Borrowed(_))
    }
}

impl Deref for ArrayView<'_> {
    type Target = cai::ArrayRef;

    fn deref(&self) -> &cai::ArrayRef {
        self.as_view().array()
    }
}

impl std::fmt::Debug for ArrayView<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.as_view().fmt(f)
    }
}

/// An owning [`cai::Array`] as a PyO3 argument and return value (feature `conversions`): a
/// newtype, as neither PyO3's traits nor `cai::Array` are this crate's.
#[derive(Debug)]
pub struct Array(pub cai::Array);

impl From<cai::Array> for Array {
    fn from(array: cai::Array) -> Array {
        Array(array)
    }
}

impl Array {
    /// [`release_after`] for the newtype: on failure it comes back with the `cai.CaiError`.
    ///
    /// # Safety
    /// As [`release_after`]'s.
    pub unsafe fn release_after(self, py: Python<'_>, stream: u64) -> Result<(), (Array, PyErr)> {
        // SAFETY: the caller's promise.
        unsafe { release_after(py, self.0, stream) }.map_err(|(array, error)| (Array(array), error))
    }
}

impl Deref for Array {
    type Target = cai::Array;

    fn deref(&self) -> &cai::Array {
        &self.0
    }
}
