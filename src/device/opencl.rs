//! The OpenCL half of the Buffer Interface: a `cl_mem`'s bounds and context, and a consumer
//! queue's sync with the producer's queue or event (a marker and a barrier: the host does not
//! block), through the OpenCL library's typed calls.

use super::pointer::check_is_wanted;
use super::sync::{planned_action, SyncAction};
use crate::abi::{CaiPointerInfo, CAI_OPENCL_STREAM_EVENT, CAI_POINTER_INFO_RESERVED_WORDS};
use crate::driver::opencl::opencl;
use crate::status::{Error, Result, Status};

/// The check `mode` (a CAI_POINTER_CHECK_* value) asks for of an OpenCL array whose elements
/// touch bytes [byte_offset + begin, byte_offset + end) of buffer `mem`: inside its
/// CL_MEM_SIZE and, where a consumer queue is named, in that queue's context. Empty arrays and
/// the default mode with no OpenCL library ask nothing.
pub(crate) fn checked_buffer(
    mem: u64,
    byte_offset: u64,
    (begin, end): (i64, i64),
    element_count: u64,
    consumer_queue: u64,
    mode: i32,
) -> Result<CaiPointerInfo> {
    if !check_is_wanted(mode, || opencl().is_ok())? || element_count == 0 {
        return Ok(CaiPointerInfo::default());
    }
    let cl = opencl()?;
    let size = cl.mem_size(mem)?;
    // Validation kept byte_offset + end within 63 bits.
    let high = byte_offset as i128 + i128::from(end);
    if high > i128::from(size) {
        return Err(Error::new(
            Status::OutOfBounds,
            format!(
                "byte_offset {byte_offset} with byte extent [{begin}, {end}) reaches byte {high} of buffer {mem:#x}, which has {size} bytes (CL_MEM_SIZE)"
            ),
        ));
    }
    let context = cl.mem_context(mem)?;
    if consumer_queue != 0 {
        let queue_context = cl.queue_context(consumer_queue)?;
        if queue_context != context {
            return Err(Error::new(
                Status::WrongContext,
                format!(
                    "buffer {mem:#x} belongs to OpenCL context {context:#x}, the consumer queue {consumer_queue:#x} to {queue_context:#x}"
                ),
            ));
        }
    }
    Ok(CaiPointerInfo {
        device_pointer: mem,
        allocation_base: mem,
        allocation_size: size,
        context: context as usize as *mut std::ffi::c_void,
        device_ordinal: -1,
        memory_type: 0,
        is_managed: 0,
        checked: 1,
        reserved: [0; CAI_POINTER_INFO_RESERVED_WORDS],
    })
}

/// Consumer sync for OpenCL memory, as `mode` plans it: stream-ordered, the consumer queue
/// gets a barrier on the producer's event (or on a marker enqueued after the producer queue's
/// work); blocking, the host waits for the event (or finishes the queue).
pub(crate) fn opencl_sync(producer: u64, stream_kind: u32, consumer_queue: u64, mode: i32) -> Result<()> {
    let is_event = stream_kind == CAI_OPENCL_STREAM_EVENT;
    match planned_action(producer, consumer_queue, mode) {
        SyncAction::Nothing => Ok(()),
        SyncAction::Blocked if is_event => opencl()?.wait_for_event(producer),
        SyncAction::Blocked => opencl()?.finish(producer),
        SyncAction::StreamOrdered => {
            let cl = opencl()?;
            if is_event {
                let (event_context, queue_context) =
                    (cl.event_context(producer)?, cl.queue_context(consumer_queue)?);
                if event_context != queue_context {
                    return Err(Error::new(
                        Status::WrongContext,
                        format!(
                            "event {producer:#x} belongs to OpenCL context {event_context:#x}, the consumer queue to {queue_context:#x}"
                        ),
                    ));
                }
                return cl.enqueue_barrier(consumer_queue, producer);
            }
            let marker = cl.enqueue_marker(producer)?;
            let waited = cl.enqueue_barrier(consumer_queue, marker);
            // The barrier holds its own reference to the marker.
            waited.and(cl.release_event(marker))
        }
    }
}
