//! The CUDA driver, opened at run time with dlopen (never linked), its entry points resolved
//! once per process. No driver is a status (CAI_ERROR_NO_DRIVER), never a panic.
//!
//! Every entry point is called in one place, `calls.rs`, through a typed wrapper that names
//! the call in its error; nothing above this module holds an `unsafe` driver call. The C types
//! they take are declared in `cuda.rs`.

use std::ffi::{c_void, CStr, CString};
use std::os::raw::{c_char, c_int, c_uint};
use std::sync::OnceLock;

use crate::status::{Error, Result, Status};

mod calls;
pub(crate) use calls::Capture;
pub(crate) mod cuda;
mod fork;
mod library;
pub(crate) mod opencl;

use crate::config::DRIVER_PATH_ENV;
use cuda::{
    cuuint64_t, CUcontext, CUdevice, CUdeviceptr, CUevent, CUgraph, CUgraphNode, CUipcEventHandle,
    CUipcMemHandle, CUmemPoolPtrExportData, CUpointer_attribute, CUresult, CUstream, CUstreamCaptureStatus,
    CUuuid, CUDA_ERROR_NO_DEVICE, CUDA_SUCCESS, CU_GET_PROC_ADDRESS_LEGACY_STREAM,
};
use library::{path_from, Library};

const DEFAULT_DRIVER: &str = "libcuda.so.1";

/// CUDA version whose ABI cuGetProcAddress is asked for: every entry point below exists in it.
const PROC_ADDRESS_CUDA_VERSION: c_int = 11030;
/// CUDA version that brought cuCtxGetId, the one entry point libcai can do without.
const CONTEXT_ID_CUDA_VERSION: c_int = 12000;
/// CUDA version the IPC and device entry points are asked for (cuIpcOpenMemHandle_v2's ABI).
const IPC_CUDA_VERSION: c_int = 11030;
/// CUDA version that brought cuDeviceGetUuid_v2 (a MIG instance's own UUID).
const DEVICE_UUID_CUDA_VERSION: c_int = 11040;
/// CUDA version whose stream-ordered pools have cuMemPoolExportPointer.
const POOL_EXPORT_CUDA_VERSION: c_int = 11020;

type CuGetProcAddress = unsafe extern "C" fn(*const c_char, *mut *mut c_void, c_int, cuuint64_t) -> CUresult;

/// The entry points libcai uses, as the driver exports them. tests/driver_real_nvidia.rs reads
/// this table (one `pub name: type,` a field) and checks it against NVIDIA's cuda.h.
#[allow(non_snake_case)]
pub(crate) struct Api {
    pub cuInit: unsafe extern "C" fn(c_uint) -> CUresult,
    pub cuDriverGetVersion: unsafe extern "C" fn(*mut c_int) -> CUresult,
    pub cuGetErrorName: unsafe extern "C" fn(CUresult, *mut *const c_char) -> CUresult,
    pub cuPointerGetAttributes:
        unsafe extern "C" fn(c_uint, *mut CUpointer_attribute, *mut *mut c_void, CUdeviceptr) -> CUresult,
    pub cuMemGetAddressRange: unsafe extern "C" fn(*mut CUdeviceptr, *mut usize, CUdeviceptr) -> CUresult,
    pub cuCtxGetCurrent: unsafe extern "C" fn(*mut CUcontext) -> CUresult,
    pub cuCtxPushCurrent: unsafe extern "C" fn(CUcontext) -> CUresult,
    pub cuCtxPopCurrent: unsafe extern "C" fn(*mut CUcontext) -> CUresult,
    pub cuStreamGetCtx: unsafe extern "C" fn(CUstream, *mut CUcontext) -> CUresult,
    pub cuStreamSynchronize: unsafe extern "C" fn(CUstream) -> CUresult,
    pub cuStreamWaitEvent: unsafe extern "C" fn(CUstream, CUevent, c_uint) -> CUresult,
    pub cuEventCreate: unsafe extern "C" fn(*mut CUevent, c_uint) -> CUresult,
    pub cuEventRecord: unsafe extern "C" fn(CUevent, CUstream) -> CUresult,
    pub cuEventDestroy: unsafe extern "C" fn(CUevent) -> CUresult,
    pub cuEventQuery: unsafe extern "C" fn(CUevent) -> CUresult,
    pub cuEventSynchronize: unsafe extern "C" fn(CUevent) -> CUresult,
    /// CUDA 11.3's form (cuda.h's cuStreamGetCaptureInfo_v2), which every driver libcai loads
    /// has: the CUDA 12.3 form (_v3, with edge data) is missing from drivers before 545.
    pub cuStreamGetCaptureInfo: unsafe extern "C" fn(
        CUstream,
        *mut CUstreamCaptureStatus,
        *mut cuuint64_t,
        *mut CUgraph,
        *mut *const CUgraphNode,
        *mut usize,
    ) -> CUresult,
    /// CUDA 12.0+; None on older drivers (events are then not pooled, see device/events.rs).
    pub cuCtxGetId: Option<unsafe extern "C" fn(CUcontext, *mut u64) -> CUresult>,
    // The entry points of arrays across processes (device/ipc.rs): optional, so that a driver
    // without one still loads; the call that needs it fails naming it.
    pub cuIpcGetMemHandle: Option<unsafe extern "C" fn(*mut CUipcMemHandle, CUdeviceptr) -> CUresult>,
    pub cuIpcOpenMemHandle:
        Option<unsafe extern "C" fn(*mut CUdeviceptr, CUipcMemHandle, c_uint) -> CUresult>,
    pub cuIpcCloseMemHandle: Option<unsafe extern "C" fn(CUdeviceptr) -> CUresult>,
    pub cuIpcGetEventHandle: Option<unsafe extern "C" fn(*mut CUipcEventHandle, CUevent) -> CUresult>,
    pub cuIpcOpenEventHandle: Option<unsafe extern "C" fn(*mut CUevent, CUipcEventHandle) -> CUresult>,
    pub cuDeviceGetUuid: Option<unsafe extern "C" fn(*mut CUuuid, CUdevice) -> CUresult>,
    pub cuDeviceGetCount: Option<unsafe extern "C" fn(*mut c_int) -> CUresult>,
    pub cuDeviceGet: Option<unsafe extern "C" fn(*mut CUdevice, c_int) -> CUresult>,
    pub cuCtxGetDevice: Option<unsafe extern "C" fn(*mut CUdevice) -> CUresult>,
    pub cuDevicePrimaryCtxRetain: Option<unsafe extern "C" fn(*mut CUcontext, CUdevice) -> CUresult>,
    pub cuMemPoolExportPointer:
        Option<unsafe extern "C" fn(*mut CUmemPoolPtrExportData, CUdeviceptr) -> CUresult>,
}

/// A loaded, initialized driver.
pub(crate) struct Driver {
    api: Api,
    version: i32,
}

// SAFETY: the table holds plain function pointers into a library that is never unloaded.
unsafe impl Send for Driver {}
// SAFETY: as for Send: nothing in the table changes after it is loaded.
unsafe impl Sync for Driver {}

static DRIVER: OnceLock<std::result::Result<Driver, Error>> = OnceLock::new();

/// The process's driver, loaded and cuInit-ed on first use from any thread.
pub(crate) fn driver() -> Result<&'static Driver> {
    if fork::forked_after_load_began() {
        return Err(forked_child_error());
    }
    loaded().as_ref().map_err(Clone::clone)
}

/// What loading the driver gave, loading it on first use. Not for a child forked after its
/// parent began loading it (fork.rs), whose load is its parent's.
fn loaded() -> &'static std::result::Result<Driver, Error> {
    if let Some(loaded) = DRIVER.get() {
        return loaded;
    }
    fork::note_load_beginning();
    DRIVER.get_or_init(load)
}

/// The status of every driver call in a child forked after its parent began loading the
/// driver: the parent's failure where its load failed, else a refusal naming the fork (the
/// parent's driver, loaded or still loading when it forked, is not this process's). Made per
/// call, never kept: a fork of this child must not find it half made.
#[cold]
fn forked_child_error() -> Error {
    match DRIVER.get() {
        Some(Err(failed)) => failed.clone(),
        _ => Error::new(
            Status::NoDriver,
            format!("this process was forked from one that had loaded the CUDA driver (or was loading it), and CUDA cannot be used in a child forked after its parent initialized it: start such processes with spawn (Python: multiprocessing.get_context(\"spawn\")), or load the driver only in the children; without a driver no pointer check or sync can run: {SKIP_DEVICE_WORK}"),
        ),
    }
}

/// The loaded driver's cuDriverGetVersion, loading it if need be.
pub(crate) fn driver_version() -> Result<i32> {
    driver().map(|d| d.version)
}

/// True once loading the driver has been tried, whatever came of it: from then on `driver()`
/// returns at once.
pub fn driver_load_attempted() -> bool {
    fork::forked_after_load_began() || DRIVER.get().is_some()
}

/// True when a driver is loaded or can be: the import's default pointer check runs only then.
pub(crate) fn driver_available() -> bool {
    !fork::forked_after_load_began() && loaded().is_ok() // not driver(): no copy of the error
}

/// How to go on without a driver or a device, named for Python and C callers alike.
const SKIP_DEVICE_WORK: &str = "pass sync=False and pointer_check=cai.POINTER_CHECK_NEVER (from C: CAI_SYNC_NONE, CAI_POINTER_CHECK_NEVER) to skip them";

fn load() -> std::result::Result<Driver, Error> {
    let no_driver = |(path, why): (String, String)| {
        Error::new(
            Status::NoDriver,
            format!("cannot load the CUDA driver {path:?}: {why}; without a driver no pointer check or sync can run: {SKIP_DEVICE_WORK}"),
        )
    };
    let library = Library::open(path_from(DRIVER_PATH_ENV, DEFAULT_DRIVER)).map_err(no_driver)?;
    let path = library.path.clone();
    let api = resolve_all(&library).map_err(|why| no_driver((path.clone(), why)))?;
    // SAFETY: entry points resolved from the driver with their documented signatures.
    let init = unsafe { (api.cuInit)(0) };
    if init != CUDA_SUCCESS {
        return Err(Error {
            status: Status::NoDriver,
            driver_result: init,
            message: init_failure(&api, &path, init),
        });
    }
    let mut version = 0;
    // SAFETY: as above.
    let queried = unsafe { (api.cuDriverGetVersion)(&mut version) };
    let driver = Driver { api, version };
    // A driver that cannot say its version is not one to trust with the rest.
    driver.check(queried, || format!("cuDriverGetVersion in {path:?}"))?;
    Ok(driver)
}

fn resolve_all(library: &Library) -> std::result::Result<Api, String> {
    // SAFETY: a symbol address (or NULL) as an optional function pointer of the same size; the
    // driver's cuGetProcAddress has this signature.
    let get_proc_address: Option<CuGetProcAddress> = unsafe {
        std::mem::transmute::<*mut c_void, Option<CuGetProcAddress>>(library.symbol("cuGetProcAddress"))
    };
    let resolve = |name: &str, versioned: &str| -> std::result::Result<*mut c_void, String> {
        if let Some(get) = get_proc_address {
            let c_name = CString::new(name).expect("entry point names have no NUL");
            let mut pointer = std::ptr::null_mut();
            // SAFETY: cuGetProcAddress (CUDA 11.3+) with its documented signature.
            let status = unsafe {
                get(
                    c_name.as_ptr(),
                    &mut pointer,
                    PROC_ADDRESS_CUDA_VERSION,
                    CU_GET_PROC_ADDRESS_LEGACY_STREAM,
                )
            };
            if status == CUDA_SUCCESS && !pointer.is_null() {
                return Ok(pointer);
            }
        }
        let pointer = library.symbol(versioned);
        if pointer.is_null() {
            Err(format!("the driver has no entry point {versioned}"))
        } else {
            Ok(pointer)
        }
    };
    macro_rules! entry {
        ($name:literal, $versioned:literal) => {
            // SAFETY: the symbol is the driver's entry point of that name, whose C signature
            // the field's type spells out.
            unsafe { as_fn(resolve($name, $versioned)?) }
        };
    }
    // The optional entry points, each asked for the CUDA version named.
    macro_rules! optional {
        (library, $name:literal, $version:ident) => {
            optional_entry_point(get_proc_address, library, $name, $version)
        };
    }
    Ok(Api {
        cuInit: entry!("cuInit", "cuInit"),
        cuDriverGetVersion: entry!("cuDriverGetVersion", "cuDriverGetVersion"),
        cuGetErrorName: entry!("cuGetErrorName", "cuGetErrorName"),
        cuPointerGetAttributes: entry!("cuPointerGetAttributes", "cuPointerGetAttributes"),
        cuMemGetAddressRange: entry!("cuMemGetAddressRange", "cuMemGetAddressRange_v2"),
        cuCtxGetCurrent: entry!("cuCtxGetCurrent", "cuCtxGetCurrent"),
        cuCtxPushCurrent: entry!("cuCtxPushCurrent", "cuCtxPushCurrent_v2"),
        cuCtxPopCurrent: entry!("cuCtxPopCurrent", "cuCtxPopCurrent_v2"),
        cuStreamGetCtx: entry!("cuStreamGetCtx", "cuStreamGetCtx"),
        cuStreamSynchronize: entry!("cuStreamSynchronize", "cuStreamSynchronize"),
        cuStreamWaitEvent: entry!("cuStreamWaitEvent", "cuStreamWaitEvent"),
        cuEventCreate: entry!("cuEventCreate", "cuEventCreate"),
        cuEventRecord: entry!("cuEventRecord", "cuEventRecord"),
        cuEventDestroy: entry!("cuEventDestroy", "cuEventDestroy_v2"),
        cuEventQuery: entry!("cuEventQuery", "cuEventQuery"),
        cuEventSynchronize: entry!("cuEventSynchronize", "cuEventSynchronize"),
        cuStreamGetCaptureInfo: entry!("cuStreamGetCaptureInfo", "cuStreamGetCaptureInfo_v2"),
        cuCtxGetId: optional_entry_point(get_proc_address, library, "cuCtxGetId", CONTEXT_ID_CUDA_VERSION),
        cuIpcGetMemHandle: optional!(library, "cuIpcGetMemHandle", IPC_CUDA_VERSION),
        cuIpcOpenMemHandle: optional!(library, "cuIpcOpenMemHandle", IPC_CUDA_VERSION),
        cuIpcCloseMemHandle: optional!(library, "cuIpcCloseMemHandle", IPC_CUDA_VERSION),
        cuIpcGetEventHandle: optional!(library, "cuIpcGetEventHandle", IPC_CUDA_VERSION),
        cuIpcOpenEventHandle: optional!(library, "cuIpcOpenEventHandle", IPC_CUDA_VERSION),
        cuDeviceGetUuid: optional!(library, "cuDeviceGetUuid", DEVICE_UUID_CUDA_VERSION),
        cuDeviceGetCount: optional!(library, "cuDeviceGetCount", IPC_CUDA_VERSION),
        cuDeviceGet: optional!(library, "cuDeviceGet", IPC_CUDA_VERSION),
        cuCtxGetDevice: optional!(library, "cuCtxGetDevice", IPC_CUDA_VERSION),
        cuDevicePrimaryCtxRetain: optional!(library, "cuDevicePrimaryCtxRetain", IPC_CUDA_VERSION),
        cuMemPoolExportPointer: optional!(library, "cuMemPoolExportPointer", POOL_EXPORT_CUDA_VERSION),
    })
}

/// An entry point newer than PROC_ADDRESS_CUDA_VERSION that libcai can do without. Where the
/// driver has cuGetProcAddress, its answer stands (a driver that does not offer the entry point
/// for that CUDA version does not have it); only a driver without it is searched by name.
fn optional_entry_point<F: Copy>(
    get_proc_address: Option<CuGetProcAddress>,
    library: &Library,
    name: &str,
    cuda_version: c_int,
) -> Option<F> {
    let pointer = match get_proc_address {
        Some(get) => {
            let c_name = CString::new(name).expect("entry point names have no NUL");
            let mut pointer = std::ptr::null_mut();
            // SAFETY: cuGetProcAddress (CUDA 11.3+) with its documented signature.
            let status = unsafe {
                get(c_name.as_ptr(), &mut pointer, cuda_version, CU_GET_PROC_ADDRESS_LEGACY_STREAM)
            };
            if status == CUDA_SUCCESS {
                pointer
            } else {
                std::ptr::null_mut()
            }
        }
        None => library.symbol(name),
    };
    // SAFETY: the symbol is the driver's entry point of that name, whose C signature `F`
    // spells out; a NULL address reads as None.
    (!pointer.is_null()).then(|| unsafe { as_fn(pointer) })
}

/// Reads a symbol address as a function pointer.
///
/// SAFETY: `F` must be the function-pointer type matching the symbol's C signature.
unsafe fn as_fn<F: Copy>(pointer: *mut c_void) -> F {
    assert_eq!(std::mem::size_of::<F>(), std::mem::size_of::<*mut c_void>());
    std::mem::transmute_copy(&pointer)
}

/// Why cuInit failed, with the driver's CUDA version (known before cuInit) and the way on.
/// CUDA_ERROR_NO_DEVICE is the common case: a container or CI runner given the driver's
/// libraries but no GPU.
fn init_failure(api: &Api, path: &str, init: CUresult) -> String {
    let mut version = 0;
    // SAFETY: writes one int; cuDriverGetVersion needs no cuInit.
    let cuda = match unsafe { (api.cuDriverGetVersion)(&mut version) } {
        CUDA_SUCCESS => format!(" (CUDA {}.{})", version / 1000, version % 1000 / 10),
        _ => String::new(),
    };
    let (found, missing) = match init {
        CUDA_ERROR_NO_DEVICE => (": the driver loaded but found no CUDA device", "a device"),
        _ => ("", "a working driver"),
    };
    let name = error_name(api, init);
    format!("cuInit failed in {path:?}{cuda}: {name} ({init}){found}; without {missing} no pointer check or sync can run: {SKIP_DEVICE_WORK}")
}

/// The driver's name for a CUresult ("CUDA_ERROR_INVALID_VALUE"), or "CUresult N" if unknown.
fn error_name(api: &Api, result: CUresult) -> String {
    let mut name: *const c_char = std::ptr::null();
    // SAFETY: cuGetErrorName writes a pointer to a static string, or fails.
    let status = unsafe { (api.cuGetErrorName)(result, &mut name) };
    if status == CUDA_SUCCESS && !name.is_null() {
        // SAFETY: not NULL: the driver's static NUL-terminated name for the result.
        unsafe { CStr::from_ptr(name) }.to_string_lossy().into_owned()
    } else {
        format!("CUresult {result}")
    }
}

impl Driver {
    /// A CAI_ERROR_DRIVER naming the call and the CUresult it returned.
    pub(crate) fn error(&self, result: CUresult, call: &str) -> Error {
        let name = error_name(&self.api, result);
        Error::driver(result, format!("{call} failed: {name} ({result})"))
    }

    /// Turns a CUresult into Ok, or the error naming the call.
    pub(crate) fn check(&self, result: CUresult, call: impl FnOnce() -> String) -> Result<()> {
        if result == CUDA_SUCCESS {
            Ok(())
        } else {
            Err(self.error(result, &call()))
        }
    }
}
