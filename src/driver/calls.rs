//! One typed wrapper per driver entry point libcai calls. Each is the only place its entry
//! point is called, and its error names the call and its arguments.
//!
//! Stream handles are CAI stream values: 1 and 2 are CU_STREAM_LEGACY and
//! CU_STREAM_PER_THREAD to the driver too, so only 0 ("None") never reaches a call.

use std::ffi::c_void;
use std::os::raw::c_uint;

use super::cuda::{
    CUcontext, CUdevice, CUdeviceptr, CUevent, CUipcEventHandle, CUipcMemHandle, CUmemPoolPtrExportData,
    CUpointer_attribute, CUstream, CUstreamCaptureStatus, CUuuid, CUDA_ERROR_INVALID_VALUE,
    CUDA_ERROR_NOT_READY, CUDA_ERROR_STREAM_CAPTURE_IMPLICIT, CUDA_SUCCESS, CU_EVENT_DISABLE_TIMING,
    CU_EVENT_INTERPROCESS, CU_IPC_HANDLE_SIZE, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS,
    CU_POINTER_ATTRIBUTE_CONTEXT, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, CU_POINTER_ATTRIBUTE_DEVICE_POINTER,
    CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE, CU_POINTER_ATTRIBUTE_IS_MANAGED,
    CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE, CU_POINTER_ATTRIBUTE_RANGE_SIZE,
    CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, CU_STREAM_CAPTURE_STATUS_ACTIVE,
    CU_STREAM_CAPTURE_STATUS_INVALIDATED, CU_STREAM_CAPTURE_STATUS_NONE,
};
use super::Driver;
use crate::status::Result;

/// What cuPointerGetAttributes says of a pointer, as libcai asks for it.
pub(crate) struct PointerAttributes {
    pub context: CUcontext,
    pub memory_type: u32,
    pub device_pointer: u64,
    pub is_managed: u32,
    pub device_ordinal: i32,
    /// Base and size of the allocation holding the pointer, where the driver answered the
    /// range attributes with a non-empty range.
    pub range: Option<(u64, u64)>,
}

/// Whether a stream is capturing a CUDA graph, as cuStreamGetCaptureInfo says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Capture {
    /// Not capturing: work on it runs.
    None,
    /// In the capture sequence of this id (unique in the process for its lifetime).
    Active(u64),
    /// In a capture that an illegal call already invalidated; it fails at its end.
    Invalidated,
    /// The legacy default stream while a stream of its context (a blocking one) is capturing:
    /// any use of it would fail and invalidate that capture (CUDA_ERROR_STREAM_CAPTURE_IMPLICIT).
    LegacyBlocked,
}

fn stream_handle(stream: u64) -> CUstream {
    stream as usize as CUstream
}

impl Driver {
    /// The calling thread's current context (NULL when none).
    pub(crate) fn current_context(&self) -> Result<CUcontext> {
        let mut context: CUcontext = std::ptr::null_mut();
        // SAFETY: writes one handle.
        let status = unsafe { (self.api.cuCtxGetCurrent)(&mut context) };
        self.check(status, || "cuCtxGetCurrent".into())?;
        Ok(context)
    }

    pub(crate) fn push_context(&self, context: CUcontext) -> Result<()> {
        // SAFETY: a context handle the driver gave for a pointer or a stream.
        let status = unsafe { (self.api.cuCtxPushCurrent)(context) };
        self.check(status, || format!("cuCtxPushCurrent(context {context:p})"))
    }

    pub(crate) fn pop_context(&self) -> Result<()> {
        let mut popped: CUcontext = std::ptr::null_mut();
        // SAFETY: writes one handle; the caller pops only what it pushed.
        let status = unsafe { (self.api.cuCtxPopCurrent)(&mut popped) };
        self.check(status, || "cuCtxPopCurrent".into())
    }

    /// The driver's id for `context`, unique for the process's lifetime (a context created
    /// later at the same address gets another); None when the driver predates cuCtxGetId.
    pub(crate) fn context_id(&self, context: CUcontext) -> Result<Option<u64>> {
        let Some(get_id) = self.api.cuCtxGetId else { return Ok(None) };
        let mut id = 0u64;
        // SAFETY: writes one id; NULL asks for the current context's.
        let status = unsafe { get_id(context, &mut id) };
        self.check(status, || format!("cuCtxGetId(context {context:p})"))?;
        Ok(Some(id))
    }

    /// The context a stream handle belongs to.
    pub(crate) fn stream_context(&self, stream: u64) -> Result<CUcontext> {
        let mut context: CUcontext = std::ptr::null_mut();
        // SAFETY: writes one handle.
        let status = unsafe { (self.api.cuStreamGetCtx)(stream_handle(stream), &mut context) };
        self.check(status, || format!("cuStreamGetCtx(stream {stream:#x})"))?;
        Ok(context)
    }

    /// Whether `stream` is capturing, and in which capture; asked in the context whose legacy
    /// and per-thread streams 1 and 2 mean. The query itself changes no capture, of the legacy
    /// stream included (the driver answers CUDA_ERROR_STREAM_CAPTURE_IMPLICIT and leaves the
    /// capture valid).
    pub(crate) fn stream_capture(&self, stream: u64) -> Result<Capture> {
        let mut status: CUstreamCaptureStatus = 0;
        let mut id = 0u64;
        let (graph, dependencies, count) = (std::ptr::null_mut(), std::ptr::null_mut(), std::ptr::null_mut());
        // SAFETY: writes a status and an id; the graph and dependency outputs are optional
        // (NULL: not asked for).
        let result = unsafe {
            (self.api.cuStreamGetCaptureInfo)(
                stream_handle(stream),
                &mut status,
                &mut id,
                graph,
                dependencies,
                count,
            )
        };
        match (result, status) {
            (CUDA_ERROR_STREAM_CAPTURE_IMPLICIT, _) => Ok(Capture::LegacyBlocked),
            (CUDA_SUCCESS, CU_STREAM_CAPTURE_STATUS_ACTIVE) => Ok(Capture::Active(id)),
            (CUDA_SUCCESS, CU_STREAM_CAPTURE_STATUS_NONE) => Ok(Capture::None),
            (CUDA_SUCCESS, CU_STREAM_CAPTURE_STATUS_INVALIDATED) => Ok(Capture::Invalidated),
            // A status newer than this libcai: a capture not to touch either way.
            (CUDA_SUCCESS, _) => Ok(Capture::Invalidated),
            (failed, _) => Err(self.error(failed, &format!("cuStreamGetCaptureInfo(stream {stream:#x})"))),
        }
    }

    pub(crate) fn stream_synchronize(&self, stream: u64) -> Result<()> {
        // SAFETY: a stream handle given by the producer, valid for the array's lifetime (spec).
        let status = unsafe { (self.api.cuStreamSynchronize)(stream_handle(stream)) };
        self.check(status, || format!("cuStreamSynchronize(stream {stream:#x})"))
    }

    pub(crate) fn stream_wait_event(&self, stream: u64, event: CUevent) -> Result<()> {
        // SAFETY: waiting on an event from any context is allowed (cross-device waits).
        let status = unsafe { (self.api.cuStreamWaitEvent)(stream_handle(stream), event, 0) };
        self.check(status, || format!("cuStreamWaitEvent(stream {stream:#x})"))
    }

    /// A new event of the current context, for ordering only (no timing).
    pub(crate) fn event_create(&self) -> Result<CUevent> {
        let mut event: CUevent = std::ptr::null_mut();
        // SAFETY: writes one handle.
        let status = unsafe { (self.api.cuEventCreate)(&mut event, CU_EVENT_DISABLE_TIMING) };
        self.check(status, || "cuEventCreate(CU_EVENT_DISABLE_TIMING)".into())?;
        Ok(event)
    }

    pub(crate) fn event_record(&self, event: CUevent, stream: u64) -> Result<()> {
        // SAFETY: an event of the stream's context (the caller made it current for both).
        let status = unsafe { (self.api.cuEventRecord)(event, stream_handle(stream)) };
        self.check(status, || format!("cuEventRecord(stream {stream:#x})"))
    }

    /// Whether the work an event was recorded after has completed (cuEventQuery): false while
    /// the driver answers CUDA_ERROR_NOT_READY; never waits.
    pub(crate) fn event_completed(&self, event: CUevent) -> Result<bool> {
        // SAFETY: an event libcai created and recorded; a query from any context is allowed.
        match unsafe { (self.api.cuEventQuery)(event) } {
            CUDA_SUCCESS => Ok(true),
            CUDA_ERROR_NOT_READY => Ok(false),
            failed => Err(self.error(failed, &format!("cuEventQuery(event {event:p})"))),
        }
    }

    /// Waits on the host until the work an event was recorded after has completed.
    pub(crate) fn event_synchronize(&self, event: CUevent) -> Result<()> {
        // SAFETY: an event libcai created and recorded; a wait from any context is allowed.
        let status = unsafe { (self.api.cuEventSynchronize)(event) };
        self.check(status, || format!("cuEventSynchronize(event {event:p})"))
    }

    pub(crate) fn event_destroy(&self, event: CUevent) -> Result<()> {
        // SAFETY: an event libcai created and no longer uses.
        let status = unsafe { (self.api.cuEventDestroy)(event) };
        self.check(status, || format!("cuEventDestroy(event {event:p})"))
    }

    /// Context, memory type, device pointer, managed flag, device ordinal and allocation range
    /// of `pointer`, in one call: the range there costs about half a cuMemGetAddressRange (on an
    /// H200, driver 580: 56 ns for all seven attributes, 50 ns for the first five, 49 ns for
    /// cuMemGetAddressRange). A driver that refuses the range attributes (CUDA_ERROR_INVALID_VALUE,
    /// as one older than them would) is asked again for the five alone.
    pub(crate) fn pointer_attributes(&self, pointer: u64) -> Result<PointerAttributes> {
        let mut found = PointerAttributes {
            context: std::ptr::null_mut(),
            memory_type: 0,
            device_pointer: 0,
            is_managed: 0,
            device_ordinal: -1,
            range: None,
        };
        let (mut start, mut size): (CUdeviceptr, usize) = (0, 0);
        let mut attributes: [CUpointer_attribute; 7] = [
            CU_POINTER_ATTRIBUTE_CONTEXT,
            CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
            CU_POINTER_ATTRIBUTE_DEVICE_POINTER,
            CU_POINTER_ATTRIBUTE_IS_MANAGED,
            CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
            CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
            CU_POINTER_ATTRIBUTE_RANGE_SIZE,
        ];
        let mut values: [*mut c_void; 7] = [
            (&mut found.context as *mut CUcontext).cast(),
            (&mut found.memory_type as *mut u32).cast(),
            (&mut found.device_pointer as *mut CUdeviceptr).cast(),
            (&mut found.is_managed as *mut u32).cast(),
            (&mut found.device_ordinal as *mut i32).cast(),
            (&mut start as *mut CUdeviceptr).cast(),
            (&mut size as *mut usize).cast(),
        ];
        let mut ask = |count: usize| {
            // SAFETY: each of the first `count` value slots has the size its attribute writes.
            unsafe {
                (self.api.cuPointerGetAttributes)(
                    count as c_uint,
                    attributes.as_mut_ptr(),
                    values.as_mut_ptr(),
                    pointer,
                )
            }
        };
        let mut status = ask(7);
        let range_asked = status != CUDA_ERROR_INVALID_VALUE;
        if !range_asked {
            status = ask(5);
        }
        self.check(status, || format!("cuPointerGetAttributes(data {pointer:#x})"))?;
        if range_asked && size > 0 {
            found.range = Some((start, size as u64));
        }
        Ok(found)
    }

    /// Base and size of the allocation holding `pointer`, for memory whose range attributes the
    /// driver did not answer (`pointer_attributes`).
    pub(crate) fn allocation_range(&self, pointer: u64) -> Result<(u64, u64)> {
        let (mut base, mut size): (CUdeviceptr, usize) = (0, 0);
        // SAFETY: writes a base and a size.
        let status = unsafe { (self.api.cuMemGetAddressRange)(&mut base, &mut size, pointer) };
        self.check(status, || format!("cuMemGetAddressRange(data {pointer:#x})"))?;
        Ok((base, size as u64))
    }
}

/// What cuPointerGetAttributes says of a pointer's shareability (device/ipc.rs asks it once per
/// export): whether cuIpcGetMemHandle can share its allocation (None: the driver did not
/// answer), and its stream-ordered pool (NULL: none, or not answered).
pub(crate) struct ShareAttributes {
    pub legacy_ipc_capable: Option<bool>,
    pub mempool: *mut c_void,
}

impl Driver {
    /// An optional entry point, or the error naming it for a call that needs it.
    fn needs<F: Copy>(&self, entry: Option<F>, name: &str) -> Result<F> {
        entry.ok_or_else(|| {
            crate::status::Error::new(
                crate::status::Status::NotSupported,
                format!("the CUDA driver (version {}) has no entry point {name}, which arrays across processes need: update the driver", self.version),
            )
        })
    }

    /// A new interprocess event of the current context (CU_EVENT_INTERPROCESS needs
    /// CU_EVENT_DISABLE_TIMING), for a descriptor's pending work.
    pub(crate) fn event_create_interprocess(&self) -> Result<CUevent> {
        let mut event: CUevent = std::ptr::null_mut();
        let flags = CU_EVENT_DISABLE_TIMING | CU_EVENT_INTERPROCESS;
        // SAFETY: writes one handle.
        let status = unsafe { (self.api.cuEventCreate)(&mut event, flags) };
        self.check(status, || "cuEventCreate(CU_EVENT_DISABLE_TIMING | CU_EVENT_INTERPROCESS)".into())?;
        Ok(event)
    }

    /// Whether `pointer`'s allocation is one cuIpcGetMemHandle shares, and its pool; asked in
    /// one call, then the IPC attribute alone for a driver that refuses the pool attribute.
    pub(crate) fn share_attributes(&self, pointer: u64) -> Result<ShareAttributes> {
        let mut capable: c_uint = 0;
        let mut pool: *mut c_void = std::ptr::null_mut();
        let mut attributes =
            [CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE, CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE];
        let mut values: [*mut c_void; 2] =
            [(&mut capable as *mut c_uint).cast(), (&mut pool as *mut *mut c_void).cast()];
        let mut ask = |count: usize| {
            // SAFETY: each of the first `count` value slots has the size its attribute writes
            // (an unsigned int; a CUmemoryPool handle).
            unsafe {
                (self.api.cuPointerGetAttributes)(
                    count as c_uint,
                    attributes.as_mut_ptr(),
                    values.as_mut_ptr(),
                    pointer,
                )
            }
        };
        match ask(2) {
            CUDA_SUCCESS => Ok(ShareAttributes { legacy_ipc_capable: Some(capable != 0), mempool: pool }),
            CUDA_ERROR_INVALID_VALUE => match ask(1) {
                CUDA_SUCCESS => Ok(ShareAttributes {
                    legacy_ipc_capable: Some(capable != 0),
                    mempool: std::ptr::null_mut(),
                }),
                _ => Ok(ShareAttributes { legacy_ipc_capable: None, mempool: std::ptr::null_mut() }),
            },
            failed => {
                Err(self.error(failed, &format!("cuPointerGetAttributes(data {pointer:#x}, IPC attributes)")))
            }
        }
    }

    /// Whether memory of a stream-ordered pool can be exported (cuMemPoolExportPointer
    /// succeeds only for a pool made with a shareable handle type): its export data, or None.
    pub(crate) fn pool_export_pointer(&self, pointer: u64) -> Result<Option<CUmemPoolPtrExportData>> {
        let export = self.needs(self.api.cuMemPoolExportPointer, "cuMemPoolExportPointer")?;
        let mut data = CUmemPoolPtrExportData { reserved: [0; CU_IPC_HANDLE_SIZE] };
        // SAFETY: writes 64 bytes of export data.
        match unsafe { export(&mut data, pointer) } {
            CUDA_SUCCESS => Ok(Some(data)),
            _ => Ok(None),
        }
    }

    /// cuIpcGetMemHandle of the allocation whose base is `base`.
    pub(crate) fn ipc_mem_handle(&self, base: u64) -> Result<CUipcMemHandle> {
        let get = self.needs(self.api.cuIpcGetMemHandle, "cuIpcGetMemHandle")?;
        let mut handle = CUipcMemHandle { reserved: [0; CU_IPC_HANDLE_SIZE] };
        // SAFETY: writes one 64-byte handle.
        let status = unsafe { get(&mut handle, base) };
        self.check(status, || format!("cuIpcGetMemHandle(base {base:#x})"))?;
        Ok(handle)
    }

    /// cuIpcGetEventHandle of an interprocess event.
    pub(crate) fn ipc_event_handle(&self, event: CUevent) -> Result<CUipcEventHandle> {
        let get = self.needs(self.api.cuIpcGetEventHandle, "cuIpcGetEventHandle")?;
        let mut handle = CUipcEventHandle { reserved: [0; CU_IPC_HANDLE_SIZE] };
        // SAFETY: writes one 64-byte handle of an event libcai created interprocess.
        let status = unsafe { get(&mut handle, event) };
        self.check(status, || format!("cuIpcGetEventHandle(event {event:p})"))?;
        Ok(handle)
    }

    /// Maps another process's allocation into the current context (peer access enabled
    /// lazily): its base here.
    pub(crate) fn ipc_open_mem_handle(&self, handle: &CUipcMemHandle) -> Result<u64> {
        let open = self.needs(self.api.cuIpcOpenMemHandle, "cuIpcOpenMemHandle")?;
        let mut base: CUdeviceptr = 0;
        // SAFETY: writes one address; the handle is passed by value, as cuda.h declares.
        let status = unsafe { open(&mut base, *handle, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS) };
        self.check(status, || "cuIpcOpenMemHandle(CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS)".into())?;
        Ok(base)
    }

    /// Unmaps what `ipc_open_mem_handle` mapped at `base`.
    pub(crate) fn ipc_close_mem_handle(&self, base: u64) -> Result<()> {
        let close = self.needs(self.api.cuIpcCloseMemHandle, "cuIpcCloseMemHandle")?;
        // SAFETY: an address cuIpcOpenMemHandle returned, closed once (device/ipc.rs's table).
        let status = unsafe { close(base) };
        self.check(status, || format!("cuIpcCloseMemHandle(base {base:#x})"))
    }

    /// Opens another process's interprocess event in the current context.
    pub(crate) fn ipc_open_event_handle(&self, handle: &CUipcEventHandle) -> Result<CUevent> {
        let open = self.needs(self.api.cuIpcOpenEventHandle, "cuIpcOpenEventHandle")?;
        let mut event: CUevent = std::ptr::null_mut();
        // SAFETY: writes one handle; the event handle is passed by value, as cuda.h declares.
        let status = unsafe { open(&mut event, *handle) };
        self.check(status, || "cuIpcOpenEventHandle".into())?;
        Ok(event)
    }

    /// The UUID of device `device` (an ordinal of this process).
    pub(crate) fn device_uuid(&self, device: CUdevice) -> Result<[u8; 16]> {
        let get = self.needs(self.api.cuDeviceGetUuid, "cuDeviceGetUuid")?;
        let mut uuid = CUuuid { bytes: [0; 16] };
        // SAFETY: writes 16 bytes.
        let status = unsafe { get(&mut uuid, device) };
        self.check(status, || format!("cuDeviceGetUuid(device {device})"))?;
        Ok(uuid.bytes)
    }

    /// How many devices this process sees.
    pub(crate) fn device_count(&self) -> Result<i32> {
        let get = self.needs(self.api.cuDeviceGetCount, "cuDeviceGetCount")?;
        let mut count = 0;
        // SAFETY: writes one int.
        let status = unsafe { get(&mut count) };
        self.check(status, || "cuDeviceGetCount".into())?;
        Ok(count)
    }

    /// The device of ordinal `ordinal`.
    pub(crate) fn device(&self, ordinal: i32) -> Result<CUdevice> {
        let get = self.needs(self.api.cuDeviceGet, "cuDeviceGet")?;
        let mut device: CUdevice = 0;
        // SAFETY: writes one device.
        let status = unsafe { get(&mut device, ordinal) };
        self.check(status, || format!("cuDeviceGet(ordinal {ordinal})"))?;
        Ok(device)
    }

    /// The device of the calling thread's current context (which the caller knows is set).
    pub(crate) fn current_device(&self) -> Result<CUdevice> {
        let get = self.needs(self.api.cuCtxGetDevice, "cuCtxGetDevice")?;
        let mut device: CUdevice = 0;
        // SAFETY: writes one device.
        let status = unsafe { get(&mut device) };
        self.check(status, || "cuCtxGetDevice".into())?;
        Ok(device)
    }

    /// `device`'s primary context, retained (libcai keeps it for the process's lifetime, as a
    /// runtime-API program does).
    pub(crate) fn primary_context(&self, device: CUdevice) -> Result<CUcontext> {
        let retain = self.needs(self.api.cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain")?;
        let mut context: CUcontext = std::ptr::null_mut();
        // SAFETY: writes one handle.
        let status = unsafe { retain(&mut context, device) };
        self.check(status, || format!("cuDevicePrimaryCtxRetain(device {device})"))?;
        Ok(context)
    }
}
