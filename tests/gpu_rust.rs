//! The Rust API on a real GPU and NVIDIA's driver: `ArrayRef::import` (pointer check and
//! sync) and `ArrayRef::sync`. Ignored where it is built (CI has no GPU): scripts/gpu-build.sh
//! builds it, scripts/gpu-check.sh runs it with `--ignored` on a GPU machine.
//!
//! The producer's stream is held back by a host function that sleeps 50 ms before a memset on
//! it: a consumer that skips the sync reads the old values (the control), one that syncs reads
//! the new ones.

use std::ffi::{c_char, c_int, c_uint, c_void, CString};
use std::ptr::null_mut;

use cai::{Array, ImportOptions, PointerCheck, Status, SyncMode};

type CuResult = c_int;
type HostFn = unsafe extern "C" fn(*mut c_void);

/// The driver calls this test makes itself, looked up in libcuda.so.1.
struct Driver {
    init: unsafe extern "C" fn(c_uint) -> CuResult,
    primary_context_retain: unsafe extern "C" fn(*mut *mut c_void, c_int) -> CuResult,
    context_set_current: unsafe extern "C" fn(*mut c_void) -> CuResult,
    mem_alloc: unsafe extern "C" fn(*mut u64, usize) -> CuResult,
    mem_alloc_managed: unsafe extern "C" fn(*mut u64, usize, c_uint) -> CuResult,
    stream_create: unsafe extern "C" fn(*mut *mut c_void, c_uint) -> CuResult,
    stream_synchronize: unsafe extern "C" fn(*mut c_void) -> CuResult,
    launch_host_function: unsafe extern "C" fn(*mut c_void, HostFn, *mut c_void) -> CuResult,
    memset_async: unsafe extern "C" fn(u64, c_uint, usize, *mut c_void) -> CuResult,
    copy_to_host_async: unsafe extern "C" fn(*mut c_void, u64, usize, *mut c_void) -> CuResult,
}

fn symbol<T: Copy>(library: *mut c_void, name: &str) -> T {
    let c_name = CString::new(name).unwrap();
    // SAFETY: a handle dlopen returned and a NUL-terminated name.
    let pointer = unsafe { libc::dlsym(library, c_name.as_ptr() as *const c_char) };
    assert!(!pointer.is_null(), "libcuda.so.1 has no {name}");
    assert_eq!(std::mem::size_of::<T>(), std::mem::size_of::<*mut c_void>());
    // SAFETY: the driver's entry point of that name, whose C signature T spells out.
    unsafe { std::mem::transmute_copy(&pointer) }
}

fn driver() -> Driver {
    let path = CString::new("libcuda.so.1").unwrap();
    // SAFETY: a NUL-terminated library name.
    let library = unsafe { libc::dlopen(path.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
    assert!(!library.is_null(), "libcuda.so.1 does not load");
    Driver {
        init: symbol(library, "cuInit"),
        primary_context_retain: symbol(library, "cuDevicePrimaryCtxRetain"),
        context_set_current: symbol(library, "cuCtxSetCurrent"),
        mem_alloc: symbol(library, "cuMemAlloc_v2"),
        mem_alloc_managed: symbol(library, "cuMemAllocManaged"),
        stream_create: symbol(library, "cuStreamCreate"),
        stream_synchronize: symbol(library, "cuStreamSynchronize"),
        launch_host_function: symbol(library, "cuLaunchHostFunc"),
        memset_async: symbol(library, "cuMemsetD32Async"),
        copy_to_host_async: symbol(library, "cuMemcpyDtoHAsync_v2"),
    }
}

fn cu(result: CuResult, what: &str) {
    assert_eq!(result, 0, "{what} failed with CUresult {result}");
}

unsafe extern "C" fn sleep_50_ms(_: *mut c_void) {
    std::thread::sleep(std::time::Duration::from_millis(50));
}

const N: usize = 1 << 20;

#[test]
#[ignore = "needs a GPU: scripts/gpu-check.sh runs it"]
fn rust_api_checks_pointers_and_orders_streams_real_gpu() {
    let d = driver();
    let mut context = null_mut();
    let (mut data, mut managed) = (0u64, 0u64);
    let (mut producer, mut consumer) = (null_mut(), null_mut());
    // SAFETY: the driver's calls with the arguments they document, on live out-parameters.
    unsafe {
        cu((d.init)(0), "cuInit");
        cu((d.primary_context_retain)(&mut context, 0), "cuDevicePrimaryCtxRetain");
        cu((d.context_set_current)(context), "cuCtxSetCurrent");
        cu((d.mem_alloc)(&mut data, N * 4), "cuMemAlloc");
        cu((d.mem_alloc_managed)(&mut managed, 4096, 1), "cuMemAllocManaged");
        cu((d.stream_create)(&mut producer, 1), "cuStreamCreate");
        cu((d.stream_create)(&mut consumer, 1), "cuStreamCreate");
    }
    let checked = ImportOptions::new().pointer_check(PointerCheck::Always).sync(SyncMode::None);

    // The pointer check: device memory with its allocation, one element past it refused,
    // managed memory, host memory the device cannot reach.
    let array = Array::builder("<u4", &[N as i64], data).build().unwrap();
    let info = array.import(&checked).unwrap();
    assert!(info.checked && info.memory_type == 2 && info.device_ordinal == 0, "{info:?}");
    assert_eq!((info.allocation_base, info.allocation_size), (data, (N * 4) as u64));
    let past = Array::builder("<u4", &[N as i64 + 1], data).build().unwrap();
    assert_eq!(past.import(&checked).unwrap_err().status, Status::OutOfBounds);
    let info = Array::builder("<f4", &[1024], managed).build().unwrap().import(&checked).unwrap();
    assert!(info.is_managed, "{info:?}");
    let host = [0u32; 16];
    let on_host = Array::builder("<u4", &[16], host.as_ptr() as u64).build().unwrap();
    assert_eq!(on_host.import(&checked).unwrap_err().status, Status::NotDevicePointer);

    // The stream rules: `value` is written on the producer's stream 50 ms late; what the
    // consumer's stream copies out after `take` says whether it waited.
    let mut seen = vec![0u32; N];
    let mut read_after = |value: u32, take: &dyn Fn(&Array)| -> usize {
        // SAFETY: live streams and allocations; `seen` holds N values; the callback only sleeps.
        unsafe {
            cu((d.memset_async)(data, 0, N, producer), "cuMemsetD32Async");
            cu((d.stream_synchronize)(producer), "cuStreamSynchronize");
            cu((d.launch_host_function)(producer, sleep_50_ms, null_mut()), "cuLaunchHostFunc");
            cu((d.memset_async)(data, value, N, producer), "cuMemsetD32Async");
        }
        // SAFETY: `producer` is a live stream for as long as the array is imported.
        let array =
            unsafe { Array::builder("<u4", &[N as i64], data).stream(producer as u64) }.build().unwrap();
        take(&array);
        // SAFETY: as above.
        unsafe {
            cu((d.copy_to_host_async)(seen.as_mut_ptr().cast(), data, N * 4, consumer), "cuMemcpyDtoHAsync");
            cu((d.stream_synchronize)(consumer), "cuStreamSynchronize");
            cu((d.stream_synchronize)(producer), "cuStreamSynchronize");
        }
        seen.iter().filter(|&&v| v == value).count()
    };
    // `consumer` is a live stream: a consumer stream the driver may be handed.
    // SAFETY: as said above.
    let no_sync = unsafe { ImportOptions::new().consumer_stream(consumer as u64) }.sync(SyncMode::None);
    let unsynced = read_after(7, &|a| {
        a.import(&no_sync).unwrap();
    });
    assert!(unsynced < N, "control: without a sync the consumer's copy overtakes the producer");
    let ordered = read_after(8, &|a| {
        a.import(&no_sync.sync(SyncMode::StreamOrdered)).unwrap();
    });
    assert_eq!(ordered, N, "stream-ordered import");
    let synced = read_after(9, &|a| {
        // SAFETY: `consumer` is a live stream.
        unsafe { a.sync(consumer as u64, SyncMode::StreamOrdered) }.unwrap();
    });
    assert_eq!(synced, N, "ArrayRef::sync, stream-ordered");
    let blocked = read_after(10, &|a| {
        let start = std::time::Instant::now();
        // SAFETY: 0 names no stream.
        unsafe { a.sync(0, SyncMode::Blocking) }.unwrap();
        assert!(start.elapsed() >= std::time::Duration::from_millis(40), "the host waited for the producer");
    });
    assert_eq!(blocked, N, "ArrayRef::sync, blocking");
}
