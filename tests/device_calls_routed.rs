//! A copy of libcai whose safe device calls are routed to another copy's C functions
//! (`route_device_calls`, as cai-python does in a PyO3 extension): each call reaches them,
//! their errors come back whole, and this copy never loads a driver of its own. (The PyO3
//! test extension shows the same on the package's table: python/tests/test_extensions.py.)

use std::os::raw::c_char;
use std::sync::atomic::{AtomicUsize, Ordering};

use cai::*;

static REACHED: AtomicUsize = AtomicUsize::new(0);

/// Refuses as another copy's cai_import would, writing its error as the C API does.
unsafe extern "C" fn import(
    _array: *const CaiArray,
    _options: *const CaiImportOptions,
    _info: *mut CaiPointerInfo,
    error: *mut CaiError,
) -> CaiStatus {
    REACHED.fetch_add(1, Ordering::SeqCst);
    let text = b"CAI_ERROR_OUT_OF_BOUNDS: data 0x1000 + 16 bytes runs past its allocation (routed)\0";
    // SAFETY: cai_import's contract: a writable error.
    let error = unsafe { &mut *error };
    error.code = CAI_ERROR_OUT_OF_BOUNDS;
    error.driver_result = 7;
    for (slot, &byte) in error.message.iter_mut().zip(text) {
        *slot = byte as c_char;
    }
    CAI_ERROR_OUT_OF_BOUNDS
}

unsafe extern "C" fn sync(
    _array: *const CaiArray,
    options: *const CaiSyncOptions,
    _error: *mut CaiError,
) -> CaiStatus {
    // SAFETY: cai_sync's contract: valid options.
    assert_eq!(unsafe { (*options).consumer_stream }, 2, "the consumer stream reaches the other copy");
    REACHED.fetch_add(1, Ordering::SeqCst);
    CAI_OK
}

unsafe extern "C" fn pointer_info(
    pointer: u64,
    info: *mut CaiPointerInfo,
    _error: *mut CaiError,
) -> CaiStatus {
    REACHED.fetch_add(1, Ordering::SeqCst);
    let found = CaiPointerInfo {
        device_pointer: pointer,
        allocation_base: pointer,
        allocation_size: 64,
        context: std::ptr::null_mut(),
        device_ordinal: 0,
        memory_type: 2,
        is_managed: 0,
        checked: 1,
        reserved: [0; CAI_POINTER_INFO_RESERVED_WORDS],
    };
    // SAFETY: cai_pointer_info's contract: a writable info, written whole on success.
    unsafe { info.write(found) };
    CAI_OK
}

unsafe extern "C" fn driver_status(version: *mut i32, _error: *mut CaiError) -> CaiStatus {
    REACHED.fetch_add(1, Ordering::SeqCst);
    // SAFETY: cai_driver_status's contract: a writable version.
    unsafe { *version = 13010 };
    CAI_OK
}

/// Takes the array into the other copy's queue (its release cleared) for stream 0x5000, and
/// refuses stream 0x6000 as a capturing one, leaving the array as it was.
unsafe extern "C" fn release_after(array: *mut CaiArray, stream: u64, error: *mut CaiError) -> CaiStatus {
    REACHED.fetch_add(1, Ordering::SeqCst);
    if stream == 0x6000 {
        let text = b"CAI_ERROR_STREAM_CAPTURING: stream 0x6000 is capturing a CUDA graph (routed)\0";
        // SAFETY: cai_release_after's contract: a writable error.
        let error = unsafe { &mut *error };
        error.code = CAI_ERROR_STREAM_CAPTURING;
        for (slot, &byte) in error.message.iter_mut().zip(text) {
            *slot = byte as c_char;
        }
        return CAI_ERROR_STREAM_CAPTURING;
    }
    assert_eq!(stream, 0x5000, "the stream reaches the other copy");
    // SAFETY: cai_release_after's contract: a valid array, moved into the queue: here it is
    // released at once, as if its event had completed.
    unsafe { cai_release(array, std::ptr::null_mut()) };
    CAI_OK
}

unsafe extern "C" fn release_pending(mode: i32, left: *mut u64, _error: *mut CaiError) -> CaiStatus {
    REACHED.fetch_add(1, Ordering::SeqCst);
    assert_eq!(mode, CAI_PENDING_WAIT, "the mode reaches the other copy");
    // SAFETY: cai_release_pending's contract: a writable count.
    unsafe { *left = 3 };
    CAI_OK
}

/// Writes a descriptor whose offset says it came from the other copy.
unsafe extern "C" fn ipc_export(
    _array: *const CaiArray,
    out: *mut CaiIpcDescriptor,
    _error: *mut CaiError,
) -> CaiStatus {
    REACHED.fetch_add(1, Ordering::SeqCst);
    let mut written = CaiIpcDescriptor::zeroed();
    written.offset = 0x77;
    // SAFETY: cai_ipc_export's contract: a writable descriptor.
    unsafe { out.write(written) };
    CAI_OK
}

/// Opens every descriptor as a 0-d borrowed array at its offset.
unsafe extern "C" fn ipc_open(
    desc: *const CaiIpcDescriptor,
    _options: *const CaiImportOptions,
    out: *mut CaiArray,
    _error: *mut CaiError,
) -> CaiStatus {
    REACHED.fetch_add(1, Ordering::SeqCst);
    let mut opened = CaiArray::zeroed();
    opened.version = 3;
    opened.set_typestr("<f4");
    // SAFETY: cai_ipc_open's contract: a readable descriptor, a writable array.
    unsafe {
        opened.data = (*desc).offset;
        out.write(opened);
    }
    CAI_OK
}

static OTHER_COPY: DeviceCalls = DeviceCalls {
    import,
    sync,
    pointer_info,
    driver_status,
    release_after,
    release_pending,
    ipc_export,
    ipc_open,
};
static ANOTHER: DeviceCalls = DeviceCalls {
    import,
    sync,
    pointer_info,
    driver_status,
    release_after,
    release_pending,
    ipc_export,
    ipc_open,
};

#[test]
fn routed_device_calls_reach_the_other_copy_and_this_copy_loads_no_driver_no_driver() {
    // A driver this copy tried to load would fail, and be remembered as tried.
    std::env::set_var("CAI_CUDA_DRIVER", "/nonexistent/libcuda.so.1");
    // SAFETY: functions with cai.h's contracts, for the whole process.
    unsafe { route_device_calls(&OTHER_COPY) }.unwrap();
    assert!(device_calls_routed());
    // SAFETY: as above.
    unsafe { route_device_calls(&OTHER_COPY) }.expect("the same calls again are Ok");
    // SAFETY: as above.
    let refused = unsafe { route_device_calls(&ANOTHER) }.unwrap_err();
    assert_eq!(refused.status(), Status::InvalidArgument);
    assert!(refused.message().contains("routed once"), "{refused}");

    let array = Array::builder("<f4", &[4], 0x1000).build().unwrap();
    let error = array.import(&ImportOptions::new().pointer_check(PointerCheck::Always)).unwrap_err();
    assert_eq!((error.status(), error.driver_result()), (Status::OutOfBounds, 7));
    assert_eq!(error.message(), "data 0x1000 + 16 bytes runs past its allocation (routed)");
    // SAFETY: 2, the per-thread default stream, is not a handle.
    unsafe { array.sync(2, SyncMode::StreamOrdered) }.unwrap();
    let info = cai::pointer_info(0x2000).unwrap();
    assert_eq!((info.allocation_base, info.allocation_size), (0x2000, 64));
    assert_eq!(cai::driver_version(), Ok(13010));
    assert_eq!(REACHED.load(Ordering::SeqCst), 4);

    // Releases after a stream go to the other copy's queue too: taken there, or refused there
    // and handed back whole.
    let released = std::sync::Arc::new(AtomicUsize::new(0));
    let counter = std::sync::Arc::clone(&released);
    let owned = Array::builder("<f4", &[4], 0x1000)
        .on_release(move || {
            counter.fetch_add(1, Ordering::SeqCst);
        })
        .build()
        .unwrap();
    // SAFETY: the other copy's stand-in never dereferences the stream.
    let (owned, error) = unsafe { owned.release_after(0x6000) }.unwrap_err();
    assert_eq!(error.status(), Status::StreamCapturing);
    assert_eq!(error.message(), "stream 0x6000 is capturing a CUDA graph (routed)");
    assert_eq!(released.load(Ordering::SeqCst), 0, "refused: still the caller's");
    // SAFETY: as above.
    unsafe { owned.release_after(0x5000) }.map_err(|(_, error)| error).unwrap();
    assert_eq!(released.load(Ordering::SeqCst), 1, "released by the other copy's queue");
    assert_eq!(cai::release_pending(PendingMode::Wait), Ok(3));
    assert_eq!(REACHED.load(Ordering::SeqCst), 7);
    // Arrays across processes too: the other copy pools the events and holds the mappings.
    let descriptor = Array::builder("<f4", &[4], 0x1000).build().unwrap().ipc_export().unwrap();
    assert_eq!(descriptor.as_raw().offset, 0x77);
    let opened = Array::ipc_open(&descriptor, &ImportOptions::new()).unwrap();
    assert_eq!(opened.data(), 0x77);
    assert_eq!(REACHED.load(Ordering::SeqCst), 9);
    // This copy's own C function still uses this copy's driver, which would not load.
    let mut version = 0;
    // SAFETY: a writable version, a NULL error.
    assert_eq!(unsafe { cai_driver_status(&mut version, std::ptr::null_mut()) }, CAI_ERROR_NO_DRIVER);
}
