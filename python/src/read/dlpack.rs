//! The reader of a DLPack producer without an exchange table: `__dlpack__` asked for a capsule
//! ordered for the consumer, its tensor taken over by the core.

use cai::binding::dlpack::{device_is_cuda_or_allowed_host, AllowHost};
use cai::binding::import::ProducerOrdering;
use cai::{
    CaiDLDevice, CaiDLPackOptions, CAI_DLPACK_MAJOR_VERSION, CAI_DLPACK_MINOR_VERSION, CAI_DL_CPU,
    CAI_STREAM_NONE,
};
use pyo3::exceptions::{PyAttributeError, PyBufferError, PyTypeError};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBool, PyNone, PyString, PyTuple};
use pyo3::Borrowed;

use crate::cpython;
use crate::dlpack::{device_of_taken, take_capsule, Taken, TakenTensor};
use crate::errors::{CaiResult, Failure};
use crate::import::{borrowed_copy, import_then_copy, owned, taken_from, Hold, Outcome, Request};

/// The `stream` argument of `__dlpack__` for what the consumer needs (the core's
/// `producer_ordering`): -1 when no sync is wanted; None for a consumer without a stream, which
/// is served on the legacy default stream (DLPack's meaning of None); else the consumer's
/// stream (1, 2 or a handle). Host memory always takes None.
fn stream_argument<'py>(
    py: Python<'py>,
    device: CaiDLDevice,
    consumer: u64,
    ordering: ProducerOrdering,
) -> PyResult<Bound<'py, PyAny>> {
    Ok(match ordering {
        _ if device.device_type == CAI_DL_CPU => py.None().into_bound(py),
        ProducerOrdering::NotWanted => (-1i64).into_pyobject(py)?.into_any(),
        ProducerOrdering::OnStream(_) if consumer == CAI_STREAM_NONE => py.None().into_bound(py),
        ProducerOrdering::OnStream(stream) => stream.into_pyobject(py)?.into_any(),
    })
}

/// After the take: the tensor's own device (read by the core) is what counts; a producer whose
/// `__dlpack_device__` said otherwise is refused rather than believed.
fn devices_agree(reported: CaiDLDevice, actual: CaiDLDevice) -> PyResult<()> {
    if reported == actual {
        Ok(())
    } else {
        Err(PyBufferError::new_err(format!(
            "__dlpack_device__() said ({}, {}) but the tensor is on ({}, {}): the producer contradicts itself",
            reported.device_type, reported.device_id, actual.device_type, actual.device_id
        )))
    }
}

/// The device `obj.__dlpack_device__()` reports.
pub fn reported_device(obj: &Bound<'_, PyAny>) -> PyResult<CaiDLDevice> {
    let py = obj.py();
    let reported = obj.call_method0(intern!(py, "__dlpack_device__")).map_err(|error| {
        if !error.is_instance_of::<PyAttributeError>(py) {
            return error;
        }
        // A wrong type of object, not a failure of its own: DLPack's producers have both.
        PyTypeError::new_err(format!(
            "obj has __dlpack__ but no usable __dlpack_device__ ({error}); a DLPack producer has both"
        ))
    })?;
    let (device_type, device_id): (i32, i32) = reported.extract().map_err(|_| {
        PyTypeError::new_err("__dlpack_device__() must return a (device_type, device_id) pair of ints")
    })?;
    Ok(CaiDLDevice { device_type, device_id })
}

/// Takes the tensor of a DLPack producer: asks for a capsule ordered for the consumer (the
/// core's `producer_ordering`), marks the capsule used and hands the tensor to the core, which
/// owns it from then on. The array is on the stream the producer ordered, for the import to
/// finish the sync (nothing more for a consumer on that stream, a host wait for one without).
/// `known` is what the negotiation knows of the device already; `no_copy` asks the producer
/// for its own memory, never a copy (`copy=False`), for a view that lets go of the tensor.
pub fn take_from_producer(
    obj: &Bound<'_, PyAny>,
    consumer: u64,
    ordering: ProducerOrdering,
    host: AllowHost,
    known: KnownDevice,
    no_copy: bool,
) -> CaiResult<TakenTensor> {
    let py = obj.py();
    // A consumer without a stream asks for None whatever the device (None is what host memory
    // takes, and DLPack's legacy default stream for device memory): then `__dlpack_device__` is
    // not called, and the tensor's own device is checked once taken.
    let reported = match (known, ordering) {
        (KnownDevice::Reported(device), _) => Some(device),
        (_, ProducerOrdering::OnStream(_)) if consumer == CAI_STREAM_NONE => None,
        (KnownDevice::HostFirst, ProducerOrdering::NotWanted) => None,
        _ => Some(reported_device(obj)?),
    };
    let stream = match reported {
        // Refused before the producer does any work for a capsule.
        Some(device) => device_is_cuda_or_allowed_host(device, host)
            .map_err(Failure::Cai)
            .and_then(|()| Ok(stream_argument(py, device, consumer, ordering)?))?,
        None => py.None().into_bound(py),
    };
    let capsule = call_dlpack(obj, &stream, no_copy)?;
    let options = CaiDLPackOptions { allow_host: u32::from(host.allowed), ..Default::default() };
    let mut taken = Taken::new();
    let (versioned, validated) = take_capsule(&capsule, &options, host.how, taken.array())?;
    // SAFETY: taken by the core, of the kind `versioned` says.
    let device = unsafe { device_of_taken(taken.array(), versioned) };
    if let Some(reported) = reported {
        devices_agree(reported, device)?;
    }
    if let ProducerOrdering::OnStream(stream) = ordering {
        if device.device_type != CAI_DL_CPU {
            taken.array().stream = stream;
        }
    }
    Ok(TakenTensor { taken, device, validated })
}

/// What the negotiation knows of a producer's device before the take.
#[derive(Clone, Copy)]
pub enum KnownDevice {
    Unknown,
    /// What `__dlpack_device__` said.
    Reported(CaiDLDevice),
    /// Not asked: where no sync is wanted the producer is asked with None, host memory's
    /// stream argument (for device memory, DLPack's legacy default stream), and the tensor's
    /// own device is what counts (a jax array's: see read/attributes.rs).
    HostFirst,
}

/// The keywords `__dlpack__` is called with, from the most to the fewest: each call starts from
/// all four and takes the next set after a TypeError, so that a producer from before a keyword
/// existed is read too (at the cost of a refused call per set it lacks).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum DlpackKeywords {
    /// The array API standard's four: `stream`, `max_version`, and `dl_device=None` and
    /// `copy=None` (or `copy=False`), their defaults spelled out: a `__dlpack__` written in
    /// Python then fills no default from its keyword defaults (a dict lookup each).
    All,
    /// `stream` and `max_version` (and `copy=False` when asked never to copy): a producer that
    /// has `max_version` but not `dl_device`.
    Versioned,
    /// `stream` alone, a producer from before DLPack 1.0 (which never copies): the legacy struct.
    StreamOnly,
}

impl DlpackKeywords {
    /// The next set to try after a TypeError, if any.
    fn fewer(self) -> Option<Self> {
        match self {
            Self::All => Some(Self::Versioned),
            Self::Versioned => Some(Self::StreamOnly),
            Self::StreamOnly => None,
        }
    }
}

/// The constant arguments of `call_dlpack`: `max_version` and each keyword set's names, made
/// once.
struct DlpackArguments {
    max_version: Py<PyTuple>,
    all: Py<PyTuple>,
    versioned: Py<PyTuple>,
    versioned_no_copy: Py<PyTuple>,
    stream_only: Py<PyTuple>,
}

impl DlpackArguments {
    fn get(py: Python<'_>) -> PyResult<&'static DlpackArguments> {
        static ARGUMENTS: PyOnceLock<DlpackArguments> = PyOnceLock::new();
        ARGUMENTS.get_or_try_init(py, || {
            let names = |each: &[&str]| PyTuple::new(py, each.iter().map(|name| PyString::intern(py, name)));
            Ok(DlpackArguments {
                max_version: PyTuple::new(py, [CAI_DLPACK_MAJOR_VERSION, CAI_DLPACK_MINOR_VERSION])?.unbind(),
                all: names(&["stream", "max_version", "dl_device", "copy"])?.unbind(),
                versioned: names(&["stream", "max_version"])?.unbind(),
                versioned_no_copy: names(&["stream", "max_version", "copy"])?.unbind(),
                stream_only: names(&["stream"])?.unbind(),
            })
        })
    }
}

/// `obj.__dlpack__(stream=stream, max_version=(1, n), dl_device=None, copy=None)` (`copy=False`
/// when `no_copy`), called without a keyword dict; on a TypeError again with the fewer keywords
/// of each older producer in turn (`DlpackKeywords`). A failure of every set is the last one's.
fn call_dlpack<'py>(
    obj: &Bound<'py, PyAny>,
    stream: &Bound<'py, PyAny>,
    no_copy: bool,
) -> PyResult<Bound<'py, PyAny>> {
    let py = obj.py();
    let arguments = DlpackArguments::get(py)?;
    let name = intern!(py, "__dlpack__");
    // None and False are borrowed (they live as long as the interpreter, never let go of here).
    let (none, false_) = (PyNone::get(py), PyBool::new(py, false));
    let none = none.as_any().as_borrowed();
    let copy = if no_copy { false_.as_any().as_borrowed() } else { none };
    let max_version = arguments.max_version.bind(py).as_any();
    let (obj, stream, max_version) = (obj.as_borrowed(), stream.as_borrowed(), max_version.as_borrowed());
    let call = |asked: DlpackKeywords| {
        let (args, kwnames): (&[Borrowed<'_, 'py, PyAny>], &Py<PyTuple>) = match asked {
            DlpackKeywords::All => (&[obj, stream, max_version, none, copy], &arguments.all),
            DlpackKeywords::Versioned if no_copy => {
                (&[obj, stream, max_version, copy], &arguments.versioned_no_copy)
            }
            DlpackKeywords::Versioned => (&[obj, stream, max_version], &arguments.versioned),
            DlpackKeywords::StreamOnly => (&[obj, stream], &arguments.stream_only),
        };
        // SAFETY: `obj` first (the method's self, the one positional argument), then one value
        // per name of `kwnames`: each arm pairs a tuple with as many values as it has names.
        unsafe { cpython::call_method_keywords(name, args, kwnames.bind(py)) }
    };
    let mut asked = DlpackKeywords::All;
    loop {
        if let Some(result) = call(asked) {
            return Ok(result);
        }
        // The exception queried is the one the call just raised.
        let refused_keywords = cpython::type_error_is_set(py);
        asked = match asked.fewer() {
            Some(fewer) if refused_keywords => fewer,
            _ => return Err(PyErr::fetch(py)),
        };
        // The exception cleared where it is raised, not taken into a `PyErr`: this path makes
        // no value whose drop PyO3 may defer (negotiate/type_facts.rs's `read_cleanly`).
        cpython::clear_error(py);
    }
}

/// A tensor taken by `__dlpack__`, held as asked: for an Array to own, or borrowed, the struct
/// holding the tensor's shape and strides itself and the tensor (a no-copy view of `obj`'s
/// memory) let go of before returning, the data kept valid by `obj`.
pub fn import_taken_tensor(
    obj: &Bound<'_, PyAny>,
    tensor: TakenTensor,
    request: &Request,
    hold: &mut Hold<'_>,
) -> CaiResult<Outcome> {
    match hold {
        Hold::Own(to_own) | Hold::OwnInto(_, to_own) => owned(obj, taken_from(obj, tensor), request, to_own),
        Hold::Borrow(out) | Hold::BorrowOrOwn(out, _) => {
            let TakenTensor { mut taken, device, validated } = tensor;
            let array = borrowed_copy(taken.array());
            drop(taken);
            import_then_copy(obj.py(), &array, Some(validated), *request.options, Some(device), out)?;
            Ok(Outcome::Written)
        }
    }
}
