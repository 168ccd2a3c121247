//! The OpenCL library, opened at run time with dlopen like the CUDA driver (never linked; path
//! override by `CAI_OPENCL_LIBRARY`), for the OpenCL half of the Buffer Interface. No library
//! is a status (CAI_ERROR_NO_DRIVER), never a panic. One typed wrapper per entry point; its
//! error names the call and keeps the raw `cl_int` in `CaiError.driver_result`.

use std::ffi::c_void;
use std::sync::OnceLock;

use super::fork;
use super::library::{path_from, Library};
use crate::config::OPENCL_PATH_ENV;
use crate::status::{Error, Result, Status};

const DEFAULT_LIBRARY: &str = "libOpenCL.so.1";

const CL_SUCCESS: i32 = 0;
const CL_MEM_SIZE: u32 = 0x1102;
const CL_MEM_CONTEXT: u32 = 0x1106;
const CL_QUEUE_CONTEXT: u32 = 0x1090;
const CL_EVENT_CONTEXT: u32 = 0x11D4;

type Handle = *mut c_void;
type GetInfo = unsafe extern "C" fn(Handle, u32, usize, *mut c_void, *mut usize) -> i32;
type Enqueue = unsafe extern "C" fn(Handle, u32, *const Handle, *mut Handle) -> i32;

#[allow(non_snake_case)]
struct Api {
    clGetMemObjectInfo: GetInfo,
    clGetCommandQueueInfo: GetInfo,
    clGetEventInfo: GetInfo,
    clEnqueueMarkerWithWaitList: Enqueue,
    clEnqueueBarrierWithWaitList: Enqueue,
    clFinish: unsafe extern "C" fn(Handle) -> i32,
    clWaitForEvents: unsafe extern "C" fn(u32, *const Handle) -> i32,
    clReleaseEvent: unsafe extern "C" fn(Handle) -> i32,
}

/// A loaded OpenCL library.
pub(crate) struct OpenCl {
    api: Api,
}

// SAFETY: plain function pointers into a library that is never unloaded.
unsafe impl Send for OpenCl {}
// SAFETY: as for Send: nothing in the table changes after it is made.
unsafe impl Sync for OpenCl {}

/// The process's OpenCL library, loaded on first use; refused in a child forked while another
/// thread of its parent was loading it (fork.rs), whose load never finishes there.
pub(crate) fn opencl() -> Result<&'static OpenCl> {
    static OPENCL: OnceLock<std::result::Result<OpenCl, Error>> = OnceLock::new();
    let loaded = match OPENCL.get() {
        Some(loaded) => loaded,
        None if fork::forked_during_opencl_load() => return Err(forked_during_load_error()),
        None => fork::loading_opencl(|| OPENCL.get_or_init(load)),
    };
    loaded.as_ref().map_err(Clone::clone)
}

#[cold]
fn forked_during_load_error() -> Error {
    Error::new(
        Status::NoDriver,
        "this process was forked while another thread of its parent was loading the OpenCL library, a load that cannot finish in the child: load it before forking (any import of OpenCL memory does), or start such processes with spawn (Python: multiprocessing.get_context(\"spawn\"))",
    )
}

fn load() -> std::result::Result<OpenCl, Error> {
    let missing = |(path, why): (String, String)| {
        Error::new(Status::NoDriver, format!("cannot load the OpenCL library {path:?}: {why}"))
    };
    let library = Library::open(path_from(OPENCL_PATH_ENV, DEFAULT_LIBRARY)).map_err(missing)?;
    let symbol = |name: &str| -> std::result::Result<*mut c_void, Error> {
        let pointer = library.symbol(name);
        if pointer.is_null() {
            Err(missing((
                library.path.clone(),
                format!("the library has no entry point {name} (OpenCL 1.2 is needed)"),
            )))
        } else {
            Ok(pointer)
        }
    };
    macro_rules! entry {
        ($name:literal, $type:ty) => {
            // SAFETY: the library's entry point of that name, whose C signature `$type` spells
            // out (OpenCL 1.2).
            unsafe { std::mem::transmute::<*mut c_void, $type>(symbol($name)?) }
        };
    }
    Ok(OpenCl {
        api: Api {
            clGetMemObjectInfo: entry!("clGetMemObjectInfo", GetInfo),
            clGetCommandQueueInfo: entry!("clGetCommandQueueInfo", GetInfo),
            clGetEventInfo: entry!("clGetEventInfo", GetInfo),
            clEnqueueMarkerWithWaitList: entry!("clEnqueueMarkerWithWaitList", Enqueue),
            clEnqueueBarrierWithWaitList: entry!("clEnqueueBarrierWithWaitList", Enqueue),
            clFinish: entry!("clFinish", unsafe extern "C" fn(Handle) -> i32),
            clWaitForEvents: entry!("clWaitForEvents", unsafe extern "C" fn(u32, *const Handle) -> i32),
            clReleaseEvent: entry!("clReleaseEvent", unsafe extern "C" fn(Handle) -> i32),
        },
    })
}

fn handle(value: u64) -> Handle {
    value as usize as Handle
}

impl OpenCl {
    fn check(&self, result: i32, call: impl FnOnce() -> String) -> Result<()> {
        if result == CL_SUCCESS {
            Ok(())
        } else {
            Err(Error::driver(result, format!("{} failed: OpenCL error {result}", call())))
        }
    }

    fn info<T: Default>(&self, get: GetInfo, object: u64, name: u32, call: &str) -> Result<T> {
        let mut value = T::default();
        // SAFETY: asks for one value of the size of T, which the caller names for `name`.
        let result = unsafe {
            get(
                handle(object),
                name,
                std::mem::size_of::<T>(),
                (&mut value as *mut T).cast(),
                std::ptr::null_mut(),
            )
        };
        self.check(result, || format!("{call}({object:#x}, {name:#x})"))?;
        Ok(value)
    }

    /// CL_MEM_SIZE of a buffer (of a sub-buffer: its own size).
    pub(crate) fn mem_size(&self, mem: u64) -> Result<u64> {
        self.info::<usize>(self.api.clGetMemObjectInfo, mem, CL_MEM_SIZE, "clGetMemObjectInfo")
            .map(|s| s as u64)
    }

    /// The cl_context a buffer belongs to.
    pub(crate) fn mem_context(&self, mem: u64) -> Result<u64> {
        self.info::<usize>(self.api.clGetMemObjectInfo, mem, CL_MEM_CONTEXT, "clGetMemObjectInfo")
            .map(|c| c as u64)
    }

    /// The cl_context a command queue belongs to.
    pub(crate) fn queue_context(&self, queue: u64) -> Result<u64> {
        self.info::<usize>(self.api.clGetCommandQueueInfo, queue, CL_QUEUE_CONTEXT, "clGetCommandQueueInfo")
            .map(|c| c as u64)
    }

    /// The cl_context an event belongs to.
    pub(crate) fn event_context(&self, event: u64) -> Result<u64> {
        self.info::<usize>(self.api.clGetEventInfo, event, CL_EVENT_CONTEXT, "clGetEventInfo")
            .map(|c| c as u64)
    }

    /// A marker on `queue` after all its work; the event is the caller's to release.
    pub(crate) fn enqueue_marker(&self, queue: u64) -> Result<u64> {
        let mut event: Handle = std::ptr::null_mut();
        // SAFETY: a queue handle from the producer; writes one event.
        let result =
            unsafe { (self.api.clEnqueueMarkerWithWaitList)(handle(queue), 0, std::ptr::null(), &mut event) };
        self.check(result, || format!("clEnqueueMarkerWithWaitList(queue {queue:#x})"))?;
        Ok(event as u64)
    }

    /// Makes later work on `queue` wait for `event`.
    pub(crate) fn enqueue_barrier(&self, queue: u64, event: u64) -> Result<()> {
        let events = [handle(event)];
        // SAFETY: a queue handle from the consumer and one valid event.
        let result = unsafe {
            (self.api.clEnqueueBarrierWithWaitList)(handle(queue), 1, events.as_ptr(), std::ptr::null_mut())
        };
        self.check(result, || format!("clEnqueueBarrierWithWaitList(queue {queue:#x})"))
    }

    pub(crate) fn finish(&self, queue: u64) -> Result<()> {
        // SAFETY: a queue handle from the producer.
        let result = unsafe { (self.api.clFinish)(handle(queue)) };
        self.check(result, || format!("clFinish(queue {queue:#x})"))
    }

    pub(crate) fn wait_for_event(&self, event: u64) -> Result<()> {
        let events = [handle(event)];
        // SAFETY: one valid event.
        let result = unsafe { (self.api.clWaitForEvents)(1, events.as_ptr()) };
        self.check(result, || format!("clWaitForEvents(event {event:#x})"))
    }

    pub(crate) fn release_event(&self, event: u64) -> Result<()> {
        // SAFETY: an event this library made (a marker) and no longer uses.
        let result = unsafe { (self.api.clReleaseEvent)(handle(event)) };
        self.check(result, || format!("clReleaseEvent(event {event:#x})"))
    }
}
