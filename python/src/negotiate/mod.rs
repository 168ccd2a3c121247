//! The negotiation: which protocol an object is read by (a dict, a cai.Array, its type's
//! C-level CAI table, its type's DLPack exchange table, `__cuda_array_interface__`,
//! `__dlpack__`), and the one import (validate, pointer check, sync) of what the reader read.
//! Python (`cai.from_object`) and C (`cai_python_from_object`, `cai_python_view`,
//! `cai_python_view_or_own`) all run it. By job:
//! - `type_facts`: what is known of a type, found once per type (fixed facts only);
//! - `choose`: the protocol chosen for an object, in docs/design.md's order;
//! - `own`: read for an Array to own (`cai.from_object`);
//! - `for_c`: the owning import for C, written into the caller's struct where it can be;
//! - `view`: the borrowed view for C, and the view that owns where it cannot borrow;
//! - here: the import step they share (with the GIL released where it may wait).

mod choose;
mod for_c;
mod own;
mod type_facts;
mod view;

use cai::binding::dlpack::{AllowHost, HostWords};
use cai::binding::import::{import_described, import_is_inert, import_may_wait, run_due_releases, Imported};
use cai::binding::rules::Validated;
use cai::{CaiArray, CaiDLDevice, CaiImportOptions, CAI_DL_CPU, CAI_POINTER_CHECK_NEVER};
use pyo3::prelude::*;

use crate::described::Read;
use crate::dlpack::Taken;
use crate::errors::CaiResult;

pub use self::for_c::{import_c_api_for_c, import_for_c, own_by_exchange_table, ForC};
pub use self::own::import_object;
pub use self::type_facts::{read_cleanly, remembered_table, settle_uncounted_run, Remembered};
pub use self::view::{view_by_exchange_table, view_object, view_offered, view_or_own_object};

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
    pub fn host(self, options: &CaiImportOptions) -> AllowHost {
        let how: HostWords = match self {
            Caller::Python => &"pass allow_host=True",
            Caller::CApi => {
                &"set CaiImportOptions.allow_host = 1 (from the Rust crate cai-python: ImportOptions::new().allow_host(true))"
            }
        };
        AllowHost { allowed: options.allow_host != 0, how }
    }
}

/// A view's or an owning import's last step where every rule was checked before anything was
/// written (`write` then writes the whole array, an owning import's owner and release
/// included, and cannot fail): where the import has nothing to do, `out` is written at once,
/// with no struct of the call's own cleared and copied (1,160 bytes); else a pooled struct
/// is, which owns what `write` handed it (released should the import refuse; a view hands it
/// nothing to own), is imported, then copied into `out`.
pub(super) fn written(
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
pub(super) fn import_struct(
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
pub(super) const HOST: CaiDLDevice = CaiDLDevice { device_type: CAI_DL_CPU, device_id: 0 };

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
pub(super) fn import_then_copy(
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
