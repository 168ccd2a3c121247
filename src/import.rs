//! Consumer side: accept a descriptor for use: validate it, check its pointer with the driver,
//! and synchronize with the producer's stream.

use crate::abi::{
    CaiArray, CaiDLDevice, CaiImportOptions, CaiPointerInfo, CaiSyncOptions, CAI_MEMORY_CUDA,
    CAI_POINTER_CHECK_NEVER,
};
use crate::device::deferred::run_due_releases;
use crate::device::memory::{check_then_sync, kind_of};
use crate::device::pointer::HostMemory;
use crate::device::sync::{planned_action, sync_mode_is_known, SyncAction};
use crate::status::{Error, Result, Status};
use crate::validate::{option_is_a_flag, reserved_are_zero, stream_for_version, validate, Validated};

/// What an import established: the array's validated facts (so that no later step validates
/// again) and what the driver said of its data (`checked` 0 when it was not asked).
#[derive(Clone, Copy, Debug)]
pub struct Imported {
    /// What validation found.
    pub validated: Validated,
    /// What the driver said of the data.
    pub info: CaiPointerInfo,
}

/// Imports `array` as `options` ask.
pub fn import(array: &CaiArray, options: &CaiImportOptions) -> Result<Imported> {
    import_validating(array, options, None)
}

/// `import`, the pointer checked against the `device` a producer names, if any. The one place
/// an import validates: one out-of-line copy of validation here, where a second, inlined into
/// `import_described`, took validation out of line for the readers that inline it (an
/// offered type's C view, 46 instructions a call).
fn import_validating(
    array: &CaiArray,
    options: &CaiImportOptions,
    device: Option<CaiDLDevice>,
) -> Result<Imported> {
    let wanted = wanted(options)?;
    let validated = validate(array)?;
    import_with(array, validated, &wanted, options, device)
}

/// The import of an array a reader described: `validated` is what validating it found, if
/// that ran (None: validated here), and `device` the device its producer names, if any (a
/// DLPack tensor's, an offered type's fill's), where the pointer, when checked, must be
/// (`pointer_is_on_the_stated_device`: else the import fails before any sync). A validated
/// array whose import has nothing to do (`import_of_array_is_inert`) is answered at once, so
/// that no rule runs twice per import. One function for every reader, so that its result is
/// moved once.
#[inline(always)]
pub fn import_described(
    array: &CaiArray,
    validated: Option<Validated>,
    options: &CaiImportOptions,
    device: Option<CaiDLDevice>,
) -> Result<Imported> {
    // Releases queued after a stream run from later imports too (with nothing queued: one load).
    run_due_releases();
    let Some(validated) = validated else { return import_validating(array, options, device) };
    if import_of_array_is_inert(array, options) {
        return Ok(Imported { validated, info: CaiPointerInfo::default() });
    }
    import_with(array, validated, &wanted(options)?, options, device)
}

/// Whether `import_described` of a validated CUDA-memory array whose stream (as its version
/// reads it) is `producer_stream` would accept `options` and do nothing more: every option
/// valid, no access or byte-order rule asked (`writable`, `native_only`), no pointer check,
/// nothing to sync. A reader that writes its caller's struct only once nothing can fail skips
/// such an import; any other (an invalid option too, which the import then reports) it runs
/// on a struct of its own. False is always a safe answer.
#[inline(always)]
pub fn import_is_inert(options: &CaiImportOptions, producer_stream: u64) -> bool {
    // The cheap tests first: an import that checks a pointer is told by one compare.
    options.pointer_check == CAI_POINTER_CHECK_NEVER
        && planned_action(producer_stream, options.consumer_stream, options.sync_mode) == SyncAction::Nothing
        && wanted(options).is_ok_and(|wanted| !wanted.writable && !wanted.native_only)
}

/// `import_is_inert` of a validated array as it is (CUDA memory; its stream as its version
/// reads it): where true, `import_described` of it returns `validated` and no pointer facts.
#[inline(always)]
fn import_of_array_is_inert(array: &CaiArray, options: &CaiImportOptions) -> bool {
    array.memory == CAI_MEMORY_CUDA && import_is_inert(options, stream_for_version(array))
}

/// What the options ask of an import, each checked to be a known value.
struct Wanted {
    writable: bool,
    native_only: bool,
    host: HostMemory,
}

// Inlined into every import (and `import_is_inert`): out of line it costs each import 30
// instructions.
#[inline(always)]
fn wanted(options: &CaiImportOptions) -> Result<Wanted> {
    reserved_are_zero("CaiImportOptions.reserved", &options.reserved)?;
    sync_mode_is_known(options.sync_mode)?;
    Ok(Wanted {
        writable: option_is_a_flag("CaiImportOptions.writable", options.writable)?,
        native_only: option_is_a_flag("CaiImportOptions.native_only", options.native_only)?,
        host: match option_is_a_flag("CaiImportOptions.allow_host", options.allow_host)? {
            true => HostMemory::Allowed,
            false => HostMemory::Refused,
        },
    })
}

/// The import's steps after validation: access, byte order, the pointer check (against the
/// `stated` device, where a producer names one), the sync.
fn import_with(
    array: &CaiArray,
    validated: Validated,
    wanted: &Wanted,
    options: &CaiImportOptions,
    stated: Option<CaiDLDevice>,
) -> Result<Imported> {
    writable_access_is_allowed(array, wanted.writable)?;
    if wanted.native_only {
        byte_order_is_native(array, &validated)?;
    }
    let info = check_then_sync(
        array,
        validated.touched(),
        (stream_for_version(array), options.consumer_stream),
        (options.pointer_check, options.sync_mode),
        wanted.host,
        stated,
    )?;
    Ok(Imported { validated, info })
}

/// Whether `import(array, options)` may make the host wait: a blocking sync it plans, or the
/// first load of the driver (for a pointer check or a sync). A binding lets go of its
/// interpreter's lock around such an import, and only then: a stream-ordered sync only enqueues
/// an event record and a wait (about 0.4 us on an H200), and letting go around it made
/// `cai.from_object` 0.1-0.3 us slower there (docs/performance.md, "On the GPU").
#[inline(always)]
pub fn import_may_wait(array: &CaiArray, options: &CaiImportOptions) -> bool {
    let action = planned_action(stream_for_version(array), options.consumer_stream, options.sync_mode);
    let needs_the_driver = action != SyncAction::Nothing || options.pointer_check != CAI_POINTER_CHECK_NEVER;
    action == SyncAction::Blocked || (needs_the_driver && !crate::driver::driver_load_attempted())
}

/// What the driver says of `pointer`, loading it if need be.
pub(crate) fn pointer_info(pointer: u64) -> Result<CaiPointerInfo> {
    crate::device::pointer::pointer_info(crate::driver::driver()?, pointer)
}

/// Synchronizes with `array`'s stream as `options` say, without the pointer check: the
/// default-stream handles 1 and 2 then mean the current context's.
pub fn sync(array: &CaiArray, options: &CaiSyncOptions) -> Result<()> {
    run_due_releases();
    reserved_are_zero("CaiSyncOptions.reserved", &options.reserved)?;
    let (consumer_stream, sync_mode) = (options.consumer_stream, options.sync_mode);
    sync_mode_is_known(sync_mode)?;
    validate(array)?;
    // No pointer query names the array's context: the current one's default streams are meant.
    let unchecked = CaiPointerInfo::default();
    kind_of(array).sync(array, stream_for_version(array), consumer_stream, sync_mode, &unchecked)
}

/// Writing through a read-only descriptor is refused (the spec's read-only flag).
pub(crate) fn writable_access_is_allowed(array: &CaiArray, writable: bool) -> Result<()> {
    if writable && array.readonly == 1 {
        Err(Error::new(
            Status::Readonly,
            "writable access was asked for but data is read-only (readonly = 1)",
        ))
    } else {
        Ok(())
    }
}

/// For consumers that cannot swap bytes (CuPy and mpi4py refuse non-native byte orders).
pub(crate) fn byte_order_is_native(array: &CaiArray, validated: &Validated) -> Result<()> {
    if validated.dtype.is_native() {
        Ok(())
    } else {
        let typestr = String::from_utf8_lossy(array.typestr_bytes().unwrap_or_default());
        Err(Error::new(
            Status::InvalidTypestr,
            format!(
                "typestr {typestr:?} has byte order '{}', not this host's",
                validated.dtype.byteorder() as char
            ),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::abi::{
        CAI_IMPORT_OPTIONS_RESERVED_WORDS, CAI_POINTER_CHECK_ALWAYS, CAI_POINTER_CHECK_DEFAULT,
        CAI_POINTER_CHECK_NEVER, CAI_STREAM_NONE, CAI_SYNC_BLOCKING, CAI_SYNC_DEFAULT, CAI_SYNC_NONE,
        CAI_SYNC_STREAM_ORDERED,
    };

    /// An import given the array's validation finds what one that validates finds, and still
    /// applies the options (a writable import of a read-only array is refused either way).
    #[test]
    fn import_described_of_a_validated_array_agrees_with_import() {
        let mut array = CaiArray::zeroed();
        array.version = 3;
        array.ndim = 2;
        array.shape[..2].copy_from_slice(&[3, 4]);
        array.set_typestr("<f4");
        array.data = 0x1000;
        let options = CaiImportOptions {
            allow_host: 1,
            pointer_check: CAI_POINTER_CHECK_NEVER,
            sync_mode: CAI_SYNC_NONE,
            ..Default::default()
        };
        let validated = validate(&array).unwrap();
        assert_eq!(
            import_described(&array, Some(validated), &options, None).unwrap().validated,
            import(&array, &options).unwrap().validated
        );
        array.readonly = 1;
        let writable = CaiImportOptions { writable: 1, ..options };
        let refused = import_described(&array, Some(validated), &writable, None).unwrap_err();
        assert_eq!(refused.status, import(&array, &writable).unwrap_err().status);
    }

    /// Where `import_is_inert` says an import does nothing, the import's steps on a read-only,
    /// byte-swapped array (which writable or native_only would refuse) succeed with nothing
    /// asked of a driver, whatever the options' other values, and return what
    /// `import_described` answers at once in their place (the validation, no pointer facts);
    /// every cause of an act or a refusal makes it say no. `import_of_array_is_inert` says the
    /// same of the array, and no of OpenCL memory (whose import this does not foresee).
    #[test]
    fn an_import_said_inert_accepts_and_asks_no_driver() {
        let mut array = CaiArray::zeroed();
        array.version = 3;
        array.ndim = 1;
        array.shape[0] = 5;
        array.set_typestr(if cfg!(target_endian = "little") { ">f4" } else { "<f4" });
        array.readonly = 1;
        array.data = 0x1000;
        let validated = validate(&array).unwrap();
        let mut inert = 0;
        for writable in [0, 1, 2] {
            for native_only in [0, 1] {
                for pointer_check in
                    [CAI_POINTER_CHECK_DEFAULT, CAI_POINTER_CHECK_ALWAYS, CAI_POINTER_CHECK_NEVER, 7]
                {
                    for sync_mode in
                        [CAI_SYNC_DEFAULT, CAI_SYNC_STREAM_ORDERED, CAI_SYNC_BLOCKING, CAI_SYNC_NONE, 9]
                    {
                        for (producer, consumer) in
                            [(CAI_STREAM_NONE, 0), (1, 0), (0x1234, 0x1234), (0x1234, 2)]
                        {
                            for reserved in [0, 1] {
                                let options = CaiImportOptions {
                                    writable,
                                    native_only,
                                    pointer_check,
                                    sync_mode,
                                    consumer_stream: consumer,
                                    reserved: [reserved; CAI_IMPORT_OPTIONS_RESERVED_WORDS],
                                    ..Default::default()
                                };
                                array.stream = producer;
                                assert_eq!(
                                    import_of_array_is_inert(&array, &options),
                                    import_is_inert(&options, producer)
                                );
                                if import_is_inert(&options, producer) {
                                    // The steps the answer at once stands for, run.
                                    let wanted = wanted(&options).unwrap();
                                    let stepped =
                                        import_with(&array, validated, &wanted, &options, None).unwrap();
                                    let answered =
                                        import_described(&array, Some(validated), &options, None).unwrap();
                                    assert_eq!(
                                        (stepped.validated, stepped.info),
                                        (validated, CaiPointerInfo::default())
                                    );
                                    assert_eq!(
                                        (answered.validated, answered.info),
                                        (stepped.validated, stepped.info)
                                    );
                                    inert += 1;
                                }
                            }
                        }
                    }
                }
            }
        }
        // writable 0, native_only 0, NEVER, unreserved: no stream (4 modes), or a stream with
        // sync mode NONE (3), or the consumer's own stream in default and stream-ordered mode (2).
        assert_eq!(inert, 4 + 3 + 2);
        array.memory = crate::abi::CAI_MEMORY_OPENCL;
        array.stream = CAI_STREAM_NONE;
        let inert_options = CaiImportOptions { pointer_check: CAI_POINTER_CHECK_NEVER, ..Default::default() };
        assert!(
            import_is_inert(&inert_options, CAI_STREAM_NONE)
                && !import_of_array_is_inert(&array, &inert_options)
        );
    }
}
