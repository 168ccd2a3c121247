//! Routing a copy's device calls (`route_device_calls`) after that copy loaded, or tried to
//! load, its own driver is refused: two driver states would exist already.

use cai::*;

#[test]
fn routing_after_this_copy_tried_its_own_driver_is_refused_no_driver() {
    std::env::set_var("CAI_CUDA_DRIVER", "/nonexistent/libcuda.so.1");
    assert_eq!(cai::driver_version().unwrap_err().status(), Status::NoDriver);
    static OWN: DeviceCalls = DeviceCalls {
        import: cai_import,
        sync: cai_sync,
        pointer_info: cai_pointer_info,
        driver_status: cai_driver_status,
        release_after: cai_release_after,
        release_pending: cai_release_pending,
        ipc_export: cai_ipc_export,
        ipc_open: cai_ipc_open,
    };
    // SAFETY: cai.h's own functions, for the whole process.
    let refused = unsafe { route_device_calls(&OWN) }.unwrap_err();
    assert_eq!(refused.status(), Status::InvalidArgument);
    assert!(refused.message().contains("cai_python::import(py) in the module's init"), "{refused}");
    assert!(!device_calls_routed());
}
