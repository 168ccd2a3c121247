//! Device work of arrays across processes (`cai_ipc_export`, `cai_ipc_open`): what memory can
//! be shared and its handles, the interprocess events that carry pending work, the devices
//! found by UUID, and the per-process table of opened allocations.
//!
//! Opened allocations are counted per handle: a second open of one allocation in a process
//! reuses the first mapping (the driver maps an allocation once per context and process, and
//! drivers differ on a second cuIpcOpenMemHandle of one handle), and the last release closes it.
//!
//! Interprocess events are pooled per context and never destroyed while the process lives: an
//! importer may open a descriptor's event handle at any time, and a destroyed event's handle
//! would fail, or name an event made later at its place. One is recorded again only once
//! cuEventQuery says the work it marked has completed. That is safe: an importer waits for the
//! event's latest record when it waits, so a late importer of an event recorded again waits for
//! that later work, never for less than its own descriptor's, which had completed already; it
//! may wait longer (for the later work), never too short.

use std::sync::{Mutex, MutexGuard, PoisonError};

use super::context::ContextGuard;
use super::memory::Extent;
use super::pointer::extent_within_allocation;
use crate::abi::{
    CaiPointerInfo, CAI_IPC_HANDLE_SIZE, CAI_STREAM_LEGACY, CAI_STREAM_NONE, CAI_STREAM_PER_THREAD,
};
use crate::driver::cuda::{
    CUcontext, CUdevice, CUevent, CUipcEventHandle, CUipcMemHandle, CU_MEMORYTYPE_DEVICE, CU_MEMORYTYPE_HOST,
    CU_MEMORYTYPE_UNIFIED,
};
use crate::driver::{Capture, Driver};
use crate::status::{Error, Result, Status};

/// What an export found: the allocation's handle, the array's place in it, its device, and
/// the handle of an event recorded after the pending work (where the array has a stream).
pub(crate) struct Exported {
    pub mem_handle: [u8; CAI_IPC_HANDLE_SIZE],
    pub offset: u64,
    pub allocation_size: u64,
    pub device_uuid: [u8; 16],
    pub event_handle: Option<[u8; CAI_IPC_HANDLE_SIZE]>,
}

/// The handles of device memory at `data` whose elements touch `extent`, pending work on
/// `stream` (a CAI stream value; 0: none) marked by an interprocess event. Refused, before any
/// handle is made, for memory no other process can map.
pub(crate) fn export(driver: &Driver, data: u64, extent: Extent, stream: u64) -> Result<Exported> {
    let found = driver.pointer_attributes(data)?;
    shareable_kind(data, found.memory_type, found.is_managed)?;
    let (base, size) = match found.range {
        Some(range) => range,
        None => driver.allocation_range(data)?,
    };
    let info = CaiPointerInfo { allocation_base: base, allocation_size: size, ..CaiPointerInfo::default() };
    extent_within_allocation(data, extent.bytes, &info)?;
    let share = driver.share_attributes(data)?;
    if !share.mempool.is_null() {
        return Err(pool_memory(driver, data)?);
    }
    if share.legacy_ipc_capable == Some(false) {
        return Err(Error::new(
            Status::NotShareable,
            format!("data {data:#x} is device memory that cuIpcGetMemHandle cannot share (the driver says it is not legacy-IPC capable: memory of the virtual memory management API, cuMemCreate and cuMemMap, or of a driver or platform without IPC): allocate the array with cuMemAlloc (cudaMalloc), or copy it into such memory, and export that"),
        ));
    }
    let in_context = ContextGuard::enter(driver, found.context)?;
    let device_uuid = driver.device_uuid(driver.device(found.device_ordinal)?)?;
    let mem_handle = driver.ipc_mem_handle(base)?.reserved;
    in_context.leave()?;
    let event_handle = match stream {
        CAI_STREAM_NONE => None,
        stream => Some(record_pending_work(driver, stream, found.context)?),
    };
    Ok(Exported { mem_handle, offset: data - base, allocation_size: size, device_uuid, event_handle })
}

/// Managed, host and unknown memory are refused, each naming what to send instead.
fn shareable_kind(data: u64, memory_type: u32, is_managed: u32) -> Result<()> {
    let why = match (memory_type, is_managed) {
        (_, managed) if managed != 0 => "is managed memory (cudaMallocManaged), which the driver cannot share with another process: copy it into device memory from cuMemAlloc (cudaMalloc) and export that",
        (CU_MEMORYTYPE_DEVICE, _) => return Ok(()),
        (CU_MEMORYTYPE_HOST, _) => "is pinned host memory, which has no CUDA IPC handle: share host memory through the operating system (shared memory, a file), or copy it to the device first",
        (CU_MEMORYTYPE_UNIFIED, _) => "is unified memory, which the driver cannot share with another process: copy it into device memory from cuMemAlloc (cudaMalloc) and export that",
        (0, _) => "is not memory the CUDA driver knows (host memory from malloc, or another library's): only device memory from cuMemAlloc (cudaMalloc) can be exported; for host memory, use the operating system's shared memory",
        _ => "is not linear device memory (a CUDA array?): only device memory from cuMemAlloc (cudaMalloc) can be exported",
    };
    Err(Error::new(Status::NotShareable, format!("data {data:#x} {why}")))
}

/// The refusal of memory of a stream-ordered pool, saying whether the pool is IPC-enabled.
#[cold]
fn pool_memory(driver: &Driver, data: u64) -> Result<Error> {
    let exportable = driver.pool_export_pointer(data).map(|exported| exported.is_some()).unwrap_or(false);
    let why = if exportable {
        "memory of an IPC-enabled stream-ordered pool: its pointer can be exported (cuMemPoolExportPointer), but the importer must first import the pool itself from its shareable handle, which on Linux is a file descriptor (passed over a Unix socket), not bytes a descriptor can carry; descriptor version 1 does not carry pool memory (CAI_IPC_KIND_POOL is reserved)"
    } else {
        "memory of a stream-ordered pool (cuMemAllocAsync, cuMemAllocFromPoolAsync) that is not IPC-enabled (made without a shareable handle type): no other process can map it"
    };
    Ok(Error::new(
        Status::NotShareable,
        format!("data {data:#x} is {why}: allocate the array with cuMemAlloc (cudaMalloc; for CuPy, its default memory pool; for torch, its caching allocator), or copy it into such memory, and export that"),
    ))
}

/// An interprocess event recorded after the work enqueued so far on `stream`, in the stream's
/// context (for the default streams 1 and 2, the memory's), once the stream is known not to be
/// capturing: its handle.
fn record_pending_work(
    driver: &Driver,
    stream: u64,
    memory_context: CUcontext,
) -> Result<[u8; CAI_IPC_HANDLE_SIZE]> {
    let context = match stream {
        CAI_STREAM_LEGACY | CAI_STREAM_PER_THREAD => memory_context,
        _ => driver.stream_context(stream)?,
    };
    let in_context = ContextGuard::enter(driver, context)?;
    match driver.stream_capture(stream)? {
        Capture::None => {}
        capture => {
            return Err(super::sync::event_refused_in_capture(
                stream,
                capture,
                "the array's stream",
                "tell another process when the data is ready",
                "export once the graph's launch has run (on a stream outside capture), or export with no stream (0) once the work is done",
            ))
        }
    }
    let current = if context.is_null() { driver.current_context()? } else { context };
    let handle = with_idle_event(driver, current, |event| driver.event_record(event, stream))?;
    in_context.leave()?;
    Ok(handle)
}

/// A pooled interprocess event, its handle, and the driver's id of its context (None where the
/// driver has no cuCtxGetId: the context's address then keys it).
struct IpcEvent {
    event: CUevent,
    handle: [u8; CAI_IPC_HANDLE_SIZE],
    context: CUcontext,
    context_id: Option<u64>,
    /// False once a query failed (a context that is gone): never used again.
    usable: bool,
}

// SAFETY: event and context handles are plain tokens the driver accepts from any thread.
unsafe impl Send for IpcEvent {}

static IPC_EVENTS: Mutex<Vec<IpcEvent>> = Mutex::new(Vec::new());

fn ipc_events() -> MutexGuard<'static, Vec<IpcEvent>> {
    IPC_EVENTS.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Runs `record` on an idle interprocess event of `context` (one whose last recorded work has
/// completed, or a new one), under the pool's lock so that no two exports record one event at
/// once: the event's handle.
fn with_idle_event(
    driver: &Driver,
    context: CUcontext,
    record: impl FnOnce(CUevent) -> Result<()>,
) -> Result<[u8; CAI_IPC_HANDLE_SIZE]> {
    let context_id = driver.context_id(context)?;
    let mut pool = ipc_events();
    let mut idle = None;
    for (i, pooled) in pool.iter_mut().enumerate() {
        let same_context = match (context_id, pooled.context_id) {
            (Some(a), Some(b)) => a == b,
            (None, None) => pooled.context == context,
            _ => false,
        };
        if !pooled.usable || !same_context {
            continue;
        }
        match driver.event_completed(pooled.event) {
            Ok(true) => {
                idle = Some(i);
                break;
            }
            Ok(false) => {}
            Err(_) => pooled.usable = false,
        }
    }
    let i = match idle {
        Some(i) => i,
        None => {
            let event = driver.event_create_interprocess()?;
            let handle = match driver.ipc_event_handle(event) {
                Ok(handle) => handle.reserved,
                Err(failed) => {
                    let _ = driver.event_destroy(event);
                    return Err(failed);
                }
            };
            pool.push(IpcEvent { event, handle, context, context_id, usable: true });
            pool.len() - 1
        }
    };
    record(pool[i].event)?;
    Ok(pool[i].handle)
}

/// The ordinal-independent name of a device, as nvidia-smi prints it: GPU-xxxxxxxx-xxxx-...
pub(crate) fn uuid_text(uuid: &[u8; 16]) -> String {
    let hex: String = uuid.iter().map(|b| format!("{b:02x}")).collect();
    format!("GPU-{}-{}-{}-{}-{}", &hex[0..8], &hex[8..12], &hex[12..16], &hex[16..20], &hex[20..32])
}

/// The device of this process whose UUID is `uuid`, and the context to open memory in: the
/// current one where it is on that device, else the device's primary context.
fn device_with_uuid(driver: &Driver, uuid: &[u8; 16]) -> Result<(CUdevice, CUcontext)> {
    let count = driver.device_count()?;
    let mut seen = Vec::new();
    for ordinal in 0..count {
        let device = driver.device(ordinal)?;
        let found = driver.device_uuid(device)?;
        if &found == uuid {
            let current = driver.current_context()?;
            if !current.is_null() && driver.current_device()? == device {
                return Ok((device, current));
            }
            return Ok((device, primary_context(driver, device)?));
        }
        seen.push(uuid_text(&found));
    }
    Err(Error::new(
        Status::NotShareable,
        format!(
            "the descriptor's device {} is not one of this process's {count} devices ({}): open it in a process that sees that GPU (check CUDA_VISIBLE_DEVICES, which may hide it, and that both processes run on one machine)",
            uuid_text(uuid),
            if seen.is_empty() { "none".to_string() } else { seen.join(", ") }
        ),
    ))
}

/// Primary contexts libcai retained, per device, kept for the process's lifetime.
static PRIMARY: Mutex<Vec<(CUdevice, usize)>> = Mutex::new(Vec::new());

fn primary_context(driver: &Driver, device: CUdevice) -> Result<CUcontext> {
    let mut retained = PRIMARY.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(&(_, context)) = retained.iter().find(|(d, _)| *d == device) {
        return Ok(context as CUcontext);
    }
    let context = driver.primary_context(device)?;
    retained.push((device, context as usize));
    Ok(context)
}

/// An allocation this process opened, by its handle's bytes: where it is mapped, in which
/// context, and how many arrays hold it.
struct OpenedAllocation {
    handle: [u8; CAI_IPC_HANDLE_SIZE],
    base: u64,
    context: usize,
    holders: u64,
}

static OPENED: Mutex<Vec<OpenedAllocation>> = Mutex::new(Vec::new());

fn opened() -> MutexGuard<'static, Vec<OpenedAllocation>> {
    OPENED.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Maps the allocation of `mem_handle` on the device of `uuid`, or takes one more hold on its
/// mapping where this process has it open already: its base here, to let go of with `close`
/// exactly once. Then, with an event handle, orders
/// `consumer` (or the host) after the exporter's work as `sync_mode` says (`sync::wait_for_event`);
/// a failed wait lets go of the mapping again.
pub(crate) fn open(
    driver: &Driver,
    uuid: &[u8; 16],
    mem_handle: &[u8; CAI_IPC_HANDLE_SIZE],
    event_handle: Option<&[u8; CAI_IPC_HANDLE_SIZE]>,
    (consumer, sync_mode): (u64, i32),
) -> Result<u64> {
    let (_, context) = device_with_uuid(driver, uuid)?;
    let in_context = ContextGuard::enter(driver, context)?;
    let base = hold(driver, mem_handle, context).map_err(freed_or_exited)?;
    let waited = match event_handle {
        None => Ok(()),
        Some(handle) => wait_for_exporter(driver, handle, consumer, sync_mode, context),
    };
    let left = in_context.leave();
    if let Err(failed) = waited.and(left) {
        close(mem_handle);
        return Err(failed);
    }
    Ok(base)
}

fn wait_for_exporter(
    driver: &Driver,
    handle: &[u8; CAI_IPC_HANDLE_SIZE],
    consumer: u64,
    sync_mode: i32,
    context: CUcontext,
) -> Result<()> {
    let event = driver.ipc_open_event_handle(&CUipcEventHandle { reserved: *handle })?;
    let waited = super::sync::wait_for_event(driver, event, consumer, sync_mode, context);
    // The wait took the event's state when it was enqueued: the opened event can go now.
    let destroyed = driver.event_destroy(event);
    waited.and(destroyed)
}

/// The driver's refusal of an open, with what it most likely means.
fn freed_or_exited(mut failed: Error) -> Error {
    if failed.status == Status::Driver {
        failed.message = format!(
            "{}: the exporting process may have freed the memory or exited (the lifetime rule: the exporter keeps the memory, and itself, alive while importers use it), or the driver cannot map it here",
            failed.message
        );
    }
    failed
}

fn hold(driver: &Driver, mem_handle: &[u8; CAI_IPC_HANDLE_SIZE], context: CUcontext) -> Result<u64> {
    let mut table = opened();
    if let Some(open) = table.iter_mut().find(|o| &o.handle == mem_handle) {
        open.holders += 1;
        return Ok(open.base);
    }
    // Under the table's lock: two threads opening one handle map it once.
    let base = driver.ipc_open_mem_handle(&CUipcMemHandle { reserved: *mem_handle })?;
    table.push(OpenedAllocation { handle: *mem_handle, base, context: context as usize, holders: 1 });
    Ok(base)
}

/// Lets go of one hold on the allocation of `mem_handle`; the last closes it
/// (cuIpcCloseMemHandle, in the context it was opened in). Called from a release, which has no
/// error to report: a failed close leaves the mapping as the driver left it.
pub(crate) fn close(mem_handle: &[u8; CAI_IPC_HANDLE_SIZE]) {
    let mut table = opened();
    let Some(i) = table.iter().position(|o| &o.handle == mem_handle) else { return };
    table[i].holders -= 1;
    if table[i].holders > 0 {
        return;
    }
    let last = table.swap_remove(i);
    // Opened, so the driver loaded.
    if let Ok(driver) = crate::driver::driver() {
        if let Ok(in_context) = ContextGuard::enter(driver, last.context as CUcontext) {
            let _ = driver.ipc_close_mem_handle(last.base);
            let _ = in_context.leave();
        }
    }
}

/// How many arrays hold the allocation of `mem_handle` in this process (0: not open).
pub(crate) fn holders(mem_handle: &[u8; CAI_IPC_HANDLE_SIZE]) -> u64 {
    opened().iter().find(|o| &o.handle == mem_handle).map_or(0, |o| o.holders)
}
