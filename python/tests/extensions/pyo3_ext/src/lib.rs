//! The PyO3 test extension: each function as the C, pybind11, nanobind and Cython modules
//! have it (python/tests/extensions/checks.py compares them with cai.from_object).

use std::ffi::CStr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use pyo3::prelude::*;
use pyo3::types::{PyList, PyTuple};

/// What an extension saw of an array (description.h's tuple): (version, ndim, shape, strides
/// or None, typestr, data, readonly, stream, memory, descr, mask's description or None).
fn described<'py>(py: Python<'py>, array: &cai::ArrayRef) -> PyResult<Bound<'py, PyTuple>> {
    let raw = array.as_raw();
    let ndim = raw.ndim as usize;
    let strides = (raw.strides_given != 0).then(|| PyTuple::new(py, &raw.strides[..ndim])).transpose()?;
    let descr = PyList::empty(py);
    for field in array.fields() {
        // SAFETY: the struct's field names and typestrs are NUL-terminated.
        let (name, typestr) =
            unsafe { (CStr::from_ptr(field.name.as_ptr()), CStr::from_ptr(field.typestr.as_ptr())) };
        descr.append((name.to_string_lossy(), typestr.to_string_lossy(), field.offset))?;
    }
    let mask = array.mask().map(|mask| described(py, &mask)).transpose()?;
    // SAFETY: a valid struct's typestr is NUL-terminated.
    let typestr = unsafe { CStr::from_ptr(raw.typestr.as_ptr()) }.to_string_lossy();
    let head = (raw.version, raw.ndim, PyTuple::new(py, &raw.shape[..ndim])?, strides, typestr, raw.data);
    let dl_dtype = (raw.dl_dtype.code, raw.dl_dtype.bits, raw.dl_dtype.lanes);
    let tail = (raw.readonly, raw.stream, raw.memory, descr, mask, dl_dtype);
    let head = head.into_pyobject(py)?;
    let tail = tail.into_pyobject(py)?;
    let items: Vec<_> = head.iter().chain(tail.iter()).collect();
    PyTuple::new(py, items)
}

#[pyfunction]
fn describe<'py>(py: Python<'py>, array: cai_python::Array) -> PyResult<Bound<'py, PyTuple>> {
    described(py, &array)
}

#[pyfunction]
fn describe_host<'py>(obj: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyTuple>> {
    let array = cai_python::from_object(obj, &cai::ImportOptions::new().allow_host(true))?;
    described(obj.py(), &array)
}

#[pyfunction]
fn describe_buffer_interface<'py>(obj: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyTuple>> {
    let array = cai_python::from_buffer_interface(obj, &cai::ImportOptions::new())?;
    described(obj.py(), &array)
}

#[pyfunction]
fn describe_view<'py>(py: Python<'py>, array: cai_python::ArrayView<'_>) -> PyResult<Bound<'py, PyTuple>> {
    described(py, &array)
}

#[pyfunction]
fn view_describe<'py>(obj: &Bound<'py, PyAny>, allow_host: bool) -> PyResult<Bound<'py, PyTuple>> {
    let view = cai_python::view(obj, &cai::ImportOptions::new().allow_host(allow_host))?;
    described(obj.py(), &view)
}

/// (what `cai_python::view_or_own` saw, whether it owns an import): the C module's
/// `view_or_own_describe`.
#[pyfunction]
fn view_or_own_describe<'py>(
    obj: &Bound<'py, PyAny>,
    allow_host: bool,
) -> PyResult<(Bound<'py, PyTuple>, bool)> {
    let view = cai_python::view_or_own(obj, &cai::ImportOptions::new().allow_host(allow_host))?;
    Ok((described(obj.py(), &view)?, !view.is_borrowed()))
}

#[pyfunction]
fn hand_back(array: cai_python::Array) -> cai_python::Array {
    array
}

/// `count` imports of `obj`, owning (each dropped at once) or borrowed (`view`).
#[pyfunction]
#[pyo3(signature = (obj, count, allow_host, view = false))]
fn import_many(obj: &Bound<'_, PyAny>, count: usize, allow_host: bool, view: bool) -> PyResult<()> {
    let options = cai::ImportOptions::new().allow_host(allow_host);
    for _ in 0..count {
        if view {
            cai_python::view(obj, &options)?;
        } else {
            drop(cai_python::from_object(obj, &options)?);
        }
    }
    Ok(())
}

static RELEASED: AtomicUsize = AtomicUsize::new(0);

/// A Rust producer's array of `count` floats at a made-up device address, its release counted.
fn made(count: i64, shape_of: impl FnOnce(i64) -> Vec<i64>) -> cai::Result<cai::Array> {
    cai::Array::builder("<f4", &shape_of(count), 0x7f00_0000_1000)
        .on_release(|| {
            RELEASED.fetch_add(1, Ordering::SeqCst);
        })
        .build()
}

#[pyfunction]
fn produce(py: Python<'_>, count: i64) -> PyResult<Bound<'_, PyAny>> {
    cai_python::to_object(py, made(count, |n| vec![n]).map_err(cai_python::raise)?)
}

unsafe extern "C" fn count_release(_array: *mut cai::CaiArray) {
    RELEASED.fetch_add(1, Ordering::SeqCst);
}

/// An array the table refuses (ndim 99): (the exception, how many releases ran meanwhile: 1,
/// as to_object drops what it could not hand over).
#[pyfunction]
fn produce_invalid(py: Python<'_>) -> PyResult<(PyErr, usize)> {
    let before = RELEASED.load(Ordering::SeqCst);
    let mut raw = cai::CaiArray::zeroed();
    raw.ndim = 99;
    raw.release = Some(count_release);
    // SAFETY: a struct pointing at nothing, its release callable once from any thread.
    let invalid = unsafe { cai::Array::from_raw(raw) };
    let refused = cai_python::to_object(py, invalid).expect_err("an ndim of 99 is refused");
    Ok((refused, RELEASED.load(Ordering::SeqCst) - before))
}

#[pyfunction]
fn released_count() -> usize {
    RELEASED.load(Ordering::SeqCst)
}

/// A cai.Array of made-up memory that keeps `source` alive until Python lets go of it: its
/// release given as `cai_python::keep(source)` (`helper`), or as the plain closure that drops
/// it (what the README taught before cai-python's release attached).
#[pyfunction]
fn keeping(py: Python<'_>, source: Py<PyAny>, helper: bool) -> PyResult<Bound<'_, PyAny>> {
    let builder = cai::Array::builder("<f4", &[4], 0x7f00_0000_1000);
    let builder = if helper {
        builder.on_release(cai_python::keep(source))
    } else {
        builder.on_release(move || drop(source))
    };
    cai_python::to_object(py, builder.build().map_err(cai_python::raise)?)
}

/// An array keeping `source` (through `cai_python::keep`) moved to a new Rust thread, one with
/// no Python thread state, and dropped there; the thread is not joined, so that the caller can
/// see when `source` goes without entering this module again.
#[pyfunction]
fn drop_on_a_rust_thread(source: Py<PyAny>) -> PyResult<()> {
    let array = cai::Array::builder("<f4", &[4], 0x7f00_0000_1000)
        .on_release(cai_python::keep(source))
        .build()
        .map_err(cai_python::raise)?;
    std::thread::spawn(move || drop(array));
    Ok(())
}

/// (size of cai-python's table struct, the size the package's table says it has, offset of
/// cai-python's last member): equal sizes, and the last member at the end, when the Rust
/// layout is the header's.
#[pyfunction]
fn table_layout(py: Python<'_>) -> PyResult<(usize, u64, usize)> {
    use cai_python::ffi::CaiPythonApi;
    let api = cai_python::api(py)?;
    Ok((
        std::mem::size_of::<CaiPythonApi>(),
        api.size,
        std::mem::offset_of!(CaiPythonApi, cai_ipc_open),
    ))
}

/// The `cai` crate's own safe device calls, as an author writes them in an extension: `obj`
/// read with no check and no sync (through the table), then `ArrayRef::import` with a pointer
/// check and `ArrayRef::sync` stream-ordered onto `consumer_stream`, in this module's copy of
/// the crate. The driver they run on is the package's (cai-python routes them): the fake
/// driver's log shows one cuInit and one event pool per process.
#[pyfunction]
fn import_and_sync(obj: &Bound<'_, PyAny>, consumer_stream: u64) -> PyResult<(u64, u64)> {
    let unchecked =
        cai::ImportOptions::new().sync(cai::SyncMode::None).pointer_check(cai::PointerCheck::Never);
    let array = cai_python::from_object(obj, &unchecked)?;
    let info = array
        .import(&cai::ImportOptions::new().sync(cai::SyncMode::None).pointer_check(cai::PointerCheck::Always))
        .map_err(cai_python::raise)?;
    // SAFETY: the consumer stream is one of the fake driver's live streams (checks.py).
    unsafe { array.sync(consumer_stream, cai::SyncMode::StreamOrdered) }.map_err(cai_python::raise)?;
    Ok((info.allocation_base, cai::driver_version().map_err(cai_python::raise)? as u64))
}

/// How an `Image`'s fill breaks (test_offer_pyo3.py): each a fault the glue must report as a
/// Python error naming the type and the field, never a crash.
const FAULT_NONE: u32 = 0;
/// Refuses with a status and a message naming the field.
const FAULT_REFUSES: u32 = 1;
/// Raises a Python exception.
const FAULT_RAISES: u32 = 2;
/// Describes an invalid layout (a negative extent), which libcai's validation refuses.
const FAULT_NEGATIVE_SHAPE: u32 = 3;
/// Panics.
const FAULT_PANICS: u32 = 4;
/// Gives a typestr too long for the struct (the setter refuses it).
const FAULT_LONG_TYPESTR: u32 = 5;

/// An image-like producer offered through `cai_python::offer`: `height` x `width` elements of
/// `typestr` at `data` (host memory when `host`, else CUDA memory on stream `stream`), with
/// byte `strides` when given, its memory kept alive by `base`; offer_ext.c's Image's
/// constructor, and `strides`. `calls` counts the fills; `fault` makes the fill break one way.
#[pyclass(module = "cai_pyo3_ext", subclass, weakref)]
struct Image {
    data: u64,
    height: i64,
    width: i64,
    typestr: String,
    strides: Option<Vec<i64>>,
    stream: u64,
    readonly: bool,
    host: bool,
    fault: u32,
    #[allow(dead_code)] // only kept: the memory's owner
    base: Py<PyAny>,
    calls: AtomicU64,
}

#[pymethods]
impl Image {
    #[new]
    #[allow(clippy::too_many_arguments)]
    #[pyo3(signature = (data, height, width, typestr = "|u1".to_owned(), stream = 0, readonly = false, host = false,
                        fault = FAULT_NONE, base = None, strides = None))]
    fn new(
        py: Python<'_>,
        data: u64,
        height: i64,
        width: i64,
        typestr: String,
        stream: u64,
        readonly: bool,
        host: bool,
        fault: u32,
        base: Option<Py<PyAny>>,
        strides: Option<Vec<i64>>,
    ) -> Image {
        let base = base.unwrap_or_else(|| py.None());
        Image {
            data,
            height,
            width,
            typestr,
            strides,
            stream,
            readonly,
            host,
            fault,
            base,
            calls: AtomicU64::new(0),
        }
    }

    /// How often the fill ran.
    #[getter]
    fn calls(&self) -> u64 {
        self.calls.load(Ordering::SeqCst)
    }

    /// Calls `callback` while `self` is mutably borrowed (as a `&mut self` method that calls
    /// back into Python is): a fill asked for meanwhile cannot borrow `self`.
    fn while_mutably_borrowed(&mut self, py: Python<'_>, callback: Py<PyAny>) -> PyResult<Py<PyAny>> {
        callback.call0(py)
    }
}

impl cai_python::Offer for Image {
    fn fill(&self, out: &mut cai_python::Fill<'_, '_>) -> Result<(), cai_python::OfferError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        let height = if self.fault == FAULT_NEGATIVE_SHAPE { -3 } else { self.height };
        out.data(self.data).shape(&[height, self.width])?.readonly(self.readonly).stream(self.stream);
        let typestr = if self.fault == FAULT_LONG_TYPESTR { "<f4".repeat(20) } else { self.typestr.clone() };
        out.typestr(&typestr)?;
        if let Some(strides) = &self.strides {
            out.strides(strides)?;
        }
        if self.host {
            out.host();
        }
        match self.fault {
            FAULT_REFUSES => Err(cai_python::OfferError::new(
                cai::Status::InvalidShape,
                "height is not set yet (call load() first)",
            )),
            FAULT_RAISES => Err(pyo3::exceptions::PyRuntimeError::new_err("the image was closed").into()),
            FAULT_PANICS => panic!("the image's pixels are gone"),
            _ => Ok(()),
        }
    }
}

/// A frozen, immutable type owning its memory: `values` as a 1-d `<u2` host array. Offered
/// through its type's dict (an immutable type's attributes cannot be set), and borrowed by
/// the fill without PyO3's borrow flag (a frozen class has none).
#[pyclass(module = "cai_pyo3_ext", frozen, immutable_type)]
struct Constant {
    values: Vec<u16>,
}

#[pymethods]
impl Constant {
    #[new]
    fn new(values: Vec<u16>) -> Constant {
        Constant { values }
    }
}

impl cai_python::Offer for Constant {
    fn fill(&self, out: &mut cai_python::Fill<'_, '_>) -> Result<(), cai_python::OfferError> {
        out.data(self.values.as_ptr() as u64).shape(&[self.values.len() as i64])?.typestr("<u2")?;
        out.readonly(true).host();
        Ok(())
    }
}

#[pymodule(gil_used = false)]
fn cai_pyo3_ext(module: &Bound<'_, PyModule>) -> PyResult<()> {
    cai_python::import(module.py())?;
    module.add_function(wrap_pyfunction!(describe, module)?)?;
    module.add_function(wrap_pyfunction!(describe_host, module)?)?;
    module.add_function(wrap_pyfunction!(describe_view, module)?)?;
    module.add_function(wrap_pyfunction!(describe_buffer_interface, module)?)?;
    module.add_function(wrap_pyfunction!(view_describe, module)?)?;
    module.add_function(wrap_pyfunction!(view_or_own_describe, module)?)?;
    module.add_function(wrap_pyfunction!(hand_back, module)?)?;
    module.add_function(wrap_pyfunction!(import_many, module)?)?;
    module.add_function(wrap_pyfunction!(produce, module)?)?;
    module.add_function(wrap_pyfunction!(produce_invalid, module)?)?;
    module.add_function(wrap_pyfunction!(released_count, module)?)?;
    module.add_function(wrap_pyfunction!(table_layout, module)?)?;
    module.add_function(wrap_pyfunction!(import_and_sync, module)?)?;
    module.add_function(wrap_pyfunction!(keeping, module)?)?;
    module.add_function(wrap_pyfunction!(drop_on_a_rust_thread, module)?)?;
    module.add_class::<Image>()?;
    cai_python::offer::<Image>(module.py())?;
    module.add_class::<Constant>()?;
    cai_python::offer::<Constant>(module.py())?;
    for (name, fault) in [
        ("FAULT_REFUSES", FAULT_REFUSES),
        ("FAULT_RAISES", FAULT_RAISES),
        ("FAULT_NEGATIVE_SHAPE", FAULT_NEGATIVE_SHAPE),
        ("FAULT_PANICS", FAULT_PANICS),
        ("FAULT_LONG_TYPESTR", FAULT_LONG_TYPESTR),
    ] {
        module.add(name, fault)?;
    }
    Ok(())
}
