//! Every driver entry point libcai calls, made to fail in turn (fake CUDA driver, a test
//! double): each failure is CAI_ERROR_DRIVER with the raw CUresult and the call named, and no
//! context is left pushed. The fake offers no cuCtxGetId here (a driver before CUDA 12.0), so
//! events are created and destroyed per sync and both calls are reached in one process.

mod common;

use std::ptr::null_mut;

use cai::*;
use common::fake_driver::*;
use common::*;

/// Entry points whose failure is tested elsewhere: they are called while the driver loads or
/// only where the driver has context ids, and a process loads its driver once.
const TESTED_ELSEWHERE: [(&str, &str); 16] = [
    ("cuInit", include_str!("driver_init_failure.rs")),
    ("cuDriverGetVersion", include_str!("driver_version_failure.rs")),
    ("cuCtxGetId", include_str!("driver_context_recreated.rs")),
    ("cuEventQuery", include_str!("driver_fake_release_after.rs")),
    ("cuEventSynchronize", include_str!("driver_fake_release_after.rs")),
    // Arrays across processes: their failures need an exporter and an importer.
    ("cuIpcGetMemHandle", include_str!("driver_fake_ipc.rs")),
    ("cuIpcOpenMemHandle", include_str!("driver_fake_ipc.rs")),
    ("cuIpcCloseMemHandle", include_str!("driver_fake_ipc.rs")),
    ("cuIpcGetEventHandle", include_str!("driver_fake_ipc.rs")),
    ("cuIpcOpenEventHandle", include_str!("driver_fake_ipc.rs")),
    ("cuDeviceGetUuid", include_str!("driver_fake_ipc.rs")),
    ("cuDeviceGetCount", include_str!("driver_fake_ipc.rs")),
    ("cuDeviceGet", include_str!("driver_fake_ipc.rs")),
    ("cuCtxGetDevice", include_str!("driver_fake_ipc.rs")),
    ("cuDevicePrimaryCtxRetain", include_str!("driver_fake_ipc.rs")),
    ("cuMemPoolExportPointer", include_str!("driver_fake_ipc.rs")),
];

fn setup() -> &'static Fake {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| std::env::set_var("FAKE_CUDA_NO_CONTEXT_ID", "1"));
    fake()
}

/// An array on device 1 with work pending on a device-1 stream, imported from device 0:
/// pointer check, stream contexts, a push of device 1's context, event create, record, pop,
/// wait on the consumer stream, event destroy.
fn import_across_devices(f: &Fake, sync_mode: i32) -> (i32, CaiError) {
    let mut a = array(&[4], "<f4");
    // Its range from cuMemGetAddressRange, so that the walk reaches that call too.
    a.data = f.alloc(64, MEMORY_DEVICE, 1, FLAG_NO_RANGE_ATTRIBUTES);
    a.stream = f.stream(1);
    let options = CaiImportOptions {
        consumer_stream: f.stream(0),
        sync_mode,
        pointer_check: CAI_POINTER_CHECK_ALWAYS,
        ..Default::default()
    };
    let mut e = blank_error();
    // SAFETY: every pointer is NULL or points to a live value of the type the function takes.
    (unsafe { cai_import(&a, &options, null_mut(), &mut e) }, e)
}

/// Failures to inject: the entry point, and how many calls of it pass first.
type Injected = &'static [(&'static str, i32)];

#[test]
fn every_entry_point_failing_is_cai_error_driver_naming_it_fake_driver() {
    let f = setup();
    f.begin(0);
    assert_eq!(import_across_devices(f, CAI_SYNC_DEFAULT).0, CAI_OK, "the scenario works unhurt");

    // The entry point whose failure is checked, the sync mode, and what to make fail.
    let walk: [(&str, i32, Injected); 13] = [
        ("cuPointerGetAttributes", CAI_SYNC_DEFAULT, &[("cuPointerGetAttributes", 0)]),
        // Asked where the range attributes give none, as for the scenario's allocation.
        ("cuMemGetAddressRange", CAI_SYNC_DEFAULT, &[("cuMemGetAddressRange", 0)]),
        ("cuStreamGetCtx", CAI_SYNC_DEFAULT, &[("cuStreamGetCtx", 0)]),
        ("cuStreamGetCaptureInfo", CAI_SYNC_DEFAULT, &[("cuStreamGetCaptureInfo", 0)]),
        ("cuCtxGetCurrent", CAI_SYNC_DEFAULT, &[("cuCtxGetCurrent", 0)]),
        ("cuCtxPushCurrent", CAI_SYNC_DEFAULT, &[("cuCtxPushCurrent", 0)]),
        ("cuEventCreate", CAI_SYNC_DEFAULT, &[("cuEventCreate", 0)]),
        ("cuEventRecord", CAI_SYNC_DEFAULT, &[("cuEventRecord", 0)]),
        ("cuCtxPopCurrent", CAI_SYNC_DEFAULT, &[("cuCtxPopCurrent", 0)]),
        ("cuStreamWaitEvent", CAI_SYNC_DEFAULT, &[("cuStreamWaitEvent", 0)]),
        // After a sync that worked: the wait is in place, the failure is still reported.
        ("cuEventDestroy", CAI_SYNC_DEFAULT, &[("cuEventDestroy", 0)]),
        ("cuStreamSynchronize", CAI_SYNC_BLOCKING, &[("cuStreamSynchronize", 0)]),
        // A failing error-name lookup still reports the failure, with the number only.
        ("cuGetErrorName", CAI_SYNC_DEFAULT, &[("cuEventRecord", 0), ("cuGetErrorName", 0)]),
    ];

    let mut covered: Vec<&str> = walk.iter().map(|(name, ..)| *name).collect();
    for (name, source) in TESTED_ELSEWHERE {
        assert!(source.contains(&format!("\"{name}\"")), "{name}'s failure is tested in its own binary");
        covered.push(name);
    }
    let mut offered = f.entry_points();
    offered.sort();
    covered.sort();
    assert_eq!(covered, offered, "the walk covers every entry point libcai resolves");

    for (name, sync_mode, failures) in walk {
        f.begin(0);
        for &(failing, skip) in failures {
            f.fail_after(failing, skip, CUDA_ERROR_LAUNCH_FAILED);
        }
        let (status, e) = import_across_devices(f, sync_mode);
        let message = e.message_str();
        assert_eq!(status, CAI_ERROR_DRIVER, "{name}: {message}");
        assert_eq!(e.driver_result, CUDA_ERROR_LAUNCH_FAILED, "{name}: {message}");
        let named = if name == "cuGetErrorName" { "cuEventRecord" } else { name };
        assert!(message.contains(named), "{name}: {message}");
        if name == "cuGetErrorName" {
            assert!(message.contains("CUresult 719"), "{message}");
        } else {
            assert!(message.contains("CUDA_ERROR_LAUNCH_FAILED (719)"), "{name}: {message}");
        }
        if name == "cuEventDestroy" {
            assert!(f.log().contains("cuStreamWaitEvent"), "the wait was enqueued before the destroy failed");
        }
        let expected_depth = if name == "cuCtxPopCurrent" { 2 } else { 1 };
        assert_eq!(f.context_depth(), expected_depth, "{name}: contexts pushed and left");
    }
}
