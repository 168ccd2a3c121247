//! How the binding imports what a reader read (python/src/read/), and holds it as its caller
//! asked: the request every reader is given, the ways of holding (`Hold`), and the import step
//! (the core's validation, pointer check and sync, `import_described`, with the GIL released
//! where the host may wait). Below the readers and the negotiation, which both call it.

use cai::binding::dlpack::{AllowHost, HostWords};
use cai::binding::import::{
    import_described, import_is_inert, import_may_wait, producer_ordering, run_due_releases, Imported,
    ProducerOrdering,
};
use cai::binding::rules::Validated;
use cai::{CaiArray, CaiDLDevice, CaiImportOptions, Error, Status, CAI_DL_CPU, CAI_POINTER_CHECK_NEVER};
use pyo3::prelude::*;

use crate::cpython::fastcall::hold_reference;
use crate::described::Read;
use crate::dlpack::{Taken, TakenTensor};
use crate::errors::{CaiResult, Failure};

/// Who called an import: host memory is refused in its API's terms.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Caller {
    /// `cai.from_object` and the other Python functions.
    Python,
    /// The C API's table (`cai_python_from_object`...), which the Rust crate cai-python calls too.
    CApi,
}

impl Caller {
    /// `options.allow_host` with the words that allow host memory in this caller's terms.
    fn host(self, options: &CaiImportOptions) -> AllowHost {
        let how: HostWords = match self {
            Caller::Python => &"pass allow_host=True",
            Caller::CApi => {
                &"set CaiImportOptions.allow_host = 1 (from the Rust crate cai-python: ImportOptions::new().allow_host(true))"
            }
        };
        AllowHost { allowed: options.allow_host != 0, how }
    }
}

/// Where an import for an Array to own leaves what the reader read and its import: filled by
/// the reader itself, so that the 300-byte description is moved once, not through each return.
pub type ToOwn = Option<(Read, Imported)>;

/// How the caller holds what is imported.
pub enum Hold<'a> {
    /// As a cai.Array's: what was read and its import, in the caller's `ToOwn`
    /// (`cai.from_object`).
    Own(&'a mut ToOwn),
    /// Written into the caller's struct, which owns what keeps the data alive: the managed
    /// tensor an exchange table gave, or a reference to the object itself (a numpy array read
    /// by its fields, a plain CAI dict, a type libcai's glue offered); else in the `ToOwn`, for
    /// an Array the struct owns (`cai_python_from_object`).
    OwnInto(&'a mut CaiArray, &'a mut ToOwn),
    /// Written into the caller's struct with no reference kept and nothing allocated that
    /// outlives the call, `release` NULL; what a struct cannot hold without memory of its own
    /// is refused (`Failure::CannotBorrow`: a mask, named descr fields, an exchange table
    /// without the non-owning DLTensor call) (`cai_python_view`).
    Borrow(&'a mut CaiArray),
    /// `Borrow` where a borrowed struct can hold what is read, else `OwnInto`, with no second
    /// reading of a dict (`cai_python_view_or_own`).
    BorrowOrOwn(&'a mut CaiArray, &'a mut ToOwn),
}

impl Hold<'_> {
    /// Whether a tensor taken by `__dlpack__` is let go of before returning: it must then be
    /// the object's own memory, never a copy.
    pub fn borrows(&self) -> bool {
        matches!(self, Hold::Borrow(_) | Hold::BorrowOrOwn(..))
    }
}

/// What an import did with what it read.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The caller's struct is written.
    Written,
    /// What was read and its import are in the caller's `ToOwn`, for an Array to own.
    ToOwn,
    /// A reader declined the object (a C-level table answered CAI_ERROR_NOT_SUPPORTED; a
    /// numpy array's fields cannot say what its `__dlpack__` would): the route's next protocol
    /// reads it. The pipeline never returns it.
    Declined,
}

/// What every reader is asked: the caller's options, with host memory allowed in its terms,
/// and what the producer is asked to order.
pub struct Request<'a> {
    pub options: &'a CaiImportOptions,
    pub host: AllowHost,
    pub ordering: ProducerOrdering,
}

impl<'a> Request<'a> {
    /// What `caller` asks with `options`.
    pub fn new(options: &'a CaiImportOptions, caller: Caller) -> Request<'a> {
        Request {
            options,
            host: caller.host(options),
            ordering: producer_ordering(options.consumer_stream, options.sync_mode),
        }
    }
}

/// What a reader read, imported, for an Array to own.
pub fn owned(
    obj: &Bound<'_, PyAny>,
    read: Read,
    request: &Request,
    to_own: &mut ToOwn,
) -> CaiResult<Outcome> {
    let imported = import_read(obj.py(), &read, request.options)?;
    *to_own = Some((read, imported));
    Ok(Outcome::ToOwn)
}

/// `array` (what `validated` says of it, if known) imported and copied into `out`, which then
/// holds a reference to `obj` of its own (`hold_reference`): for what lives as long as the
/// object does, with no Array made for it. `out` is written only on success.
pub fn imported_holding_object(
    obj: &Bound<'_, PyAny>,
    array: &CaiArray,
    validated: Option<Validated>,
    request: &Request,
    named: Option<CaiDLDevice>,
    out: &mut CaiArray,
) -> CaiResult<Outcome> {
    import_then_copy(obj.py(), array, validated, *request.options, named, out)?;
    // SAFETY: attached (a Bound exists); `obj` is live.
    unsafe { hold_reference(out, obj.as_ptr()) };
    Ok(Outcome::Written)
}

/// A description of the tensor taken from `obj`, keeping `obj` alive, with what the core
/// validated of it.
pub fn taken_from(obj: &Bound<'_, PyAny>, tensor: TakenTensor) -> Read {
    let TakenTensor { taken, device, validated } = tensor;
    Read::borrowing(taken.into_inner(), Some(device), Some(obj.clone().unbind()), Some(validated))
}

/// `source`'s description with nothing of its own to release (`owner` and `release` NULL):
/// what a borrowed struct holds, whoever keeps the memory alive.
pub fn borrowed_copy(source: &CaiArray) -> CaiArray {
    CaiArray { owner: std::ptr::null_mut(), release: None, ..*source }
}

/// The refusal of what a borrowed struct cannot hold without memory or a reference of its own.
pub fn cannot_borrow(what: &str) -> Failure {
    Failure::CannotBorrow(Error::new(
        Status::InvalidArgument,
        format!(
            "cai_python_view cannot borrow {what}; cai_python_from_object takes it (it owns what it holds)"
        ),
    ))
}

/// A view's or an owning import's last step where every rule was checked before anything was
/// written (`write` then writes the whole array, an owning import's owner and release
/// included, and cannot fail): where the import has nothing to do, `out` is written at once,
/// with no struct of the call's own cleared and copied (1,160 bytes); else a pooled struct
/// is, which owns what `write` handed it (released should the import refuse; a view hands it
/// nothing to own), is imported, then copied into `out`.
pub fn written(
    py: Python<'_>,
    write: impl FnOnce(&mut CaiArray),
    validated: Validated,
    named: Option<CaiDLDevice>,
    stream: u64,
    options: CaiImportOptions,
    out: &mut CaiArray,
) -> CaiResult<()> {
    let options = options_for_memory(options, named);
    if import_is_inert(&options, stream) {
        // The core's import, skipped here, would run the releases that are due.
        run_due_releases();
        write(out);
        return Ok(());
    }
    let mut taken = Taken::new();
    write(taken.array());
    import_struct(py, taken.array(), Some(validated), &options, named)?;
    taken.into_inner().copy_defined_to(out);
    Ok(())
}

/// Moves what the import reads to the thread that runs it with the GIL released.
struct Unshared<T>(T);
// SAFETY: the import only reads the struct and the memory it points to, all owned by the
// caller's stack or by objects nothing else can reach until the import returns.
unsafe impl<T> Send for Unshared<T> {}

impl<T> Unshared<T> {
    /// Taken whole, so that a closure captures the wrapper, not the field inside it.
    fn into_inner(self) -> T {
        self.0
    }
}

/// Imports what a reader read, with the GIL released where the host may wait (a sync the core
/// plans, or the first load of the driver).
pub fn import_read(py: Python<'_>, read: &Read, options: &CaiImportOptions) -> CaiResult<Imported> {
    import_struct(py, read.array(), read.validated, options, read.device)
}

/// Imports `array` as `options` say, with the GIL released where the host may wait; `named`
/// is the device its producer names, if any (a DLPack tensor's, a fill's): host memory, taken
/// with allow_host, has no pointer check; a CUDA device must be where the check finds the data
/// (the core's `import_described`). `validated` (what validation found of `array` as it is)
/// spares validating it again.
pub fn import_struct(
    py: Python<'_>,
    array: &CaiArray,
    validated: Option<Validated>,
    options: &CaiImportOptions,
    named: Option<CaiDLDevice>,
) -> CaiResult<Imported> {
    let options = options_for_memory(*options, named);
    let outcome = if import_may_wait(array, &options) {
        let job = Unshared((array as *const CaiArray, &options));
        py.detach(move || {
            let (array, options) = job.into_inner();
            // SAFETY: `array` is the caller's, alive and unchanged until this returns.
            Unshared(import_described(unsafe { &*array }, validated, options, named))
        })
        .into_inner()
    } else {
        import_described(array, validated, &options, named)
    };
    Ok(outcome?)
}

/// The host memory of a DLPack producer, which names no device id that matters.
pub const HOST: CaiDLDevice = CaiDLDevice { device_type: CAI_DL_CPU, device_id: 0 };

/// The options an import of memory on the `named` device runs with: for host memory, no
/// pointer check (the memory was taken with allow_host; no driver is asked about a host
/// address).
fn options_for_memory(mut options: CaiImportOptions, named: Option<CaiDLDevice>) -> CaiImportOptions {
    if named.is_some_and(|device| device.device_type == CAI_DL_CPU) {
        options.pointer_check = CAI_POINTER_CHECK_NEVER;
    }
    options
}

/// A view's last step where it read into a struct of its own: the import, then `out` written
/// as far as the array is defined.
pub fn import_then_copy(
    py: Python<'_>,
    array: &CaiArray,
    validated: Option<Validated>,
    options: CaiImportOptions,
    named: Option<CaiDLDevice>,
    out: &mut CaiArray,
) -> CaiResult<()> {
    import_struct(py, array, validated, &options, named)?;
    array.copy_defined_to(out);
    Ok(())
}
