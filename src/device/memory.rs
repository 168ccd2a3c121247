//! The seam between memory kinds. What libcai does with an array's data depends on where the
//! data lies: a CUDA pointer is checked against its allocation and ordered with CUDA events; an
//! OpenCL buffer against its size and the consumer queue's context, with markers and barriers.
//! Each kind (a CAI_MEMORY_* value) answers every such question here, the spec's pure rules on
//! where its data may lie included, so validate, import, export and DLPack ask the kind instead
//! of branching, and a new kind is one more implementation.

use super::opencl::{checked_buffer, opencl_sync};
use super::pointer::{checked_pointer, HostMemory};
use super::sync::{consumer_sync, join_streams, sync_if_needed};
use crate::abi::{
    CaiArray, CaiDLDevice, CaiPointerInfo, CAI_DL_CUDA, CAI_DL_CUDA_HOST, CAI_DL_CUDA_MANAGED,
    CAI_MEMORY_CUDA, CAI_MEMORY_OPENCL, CAI_OPENCL_STREAM_EVENT, CAI_OPENCL_STREAM_QUEUE,
    CAI_POINTER_CHECK_ALWAYS, CAI_STREAM_NONE, CAI_SYNC_BLOCKING,
};
use crate::driver::cuda::{CU_MEMORYTYPE_DEVICE, CU_MEMORYTYPE_HOST};
use crate::driver::driver;
use crate::status::{fail, Error, Result, Status};

/// The bytes an array's elements touch: [begin, end) from its data, and how many elements.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Extent {
    pub bytes: (i64, i64),
    pub element_count: u64,
}

/// What one memory kind does with an array's data.
pub(crate) trait MemoryKind: Sync {
    /// Checks, as `mode` (a CAI_POINTER_CHECK_* value) asks, that the data is memory a
    /// consumer on `consumer_stream` can use, every byte of `extent` inside its allocation.
    fn check(
        &self,
        array: &CaiArray,
        extent: Extent,
        consumer_stream: u64,
        mode: i32,
        host: HostMemory,
    ) -> Result<CaiPointerInfo>;

    /// Orders `consumer_stream` after `producer_stream` as `sync_mode` says; `info` is what the
    /// check learnt (all zero when there was none).
    fn sync(
        &self,
        array: &CaiArray,
        producer_stream: u64,
        consumer_stream: u64,
        sync_mode: i32,
        info: &CaiPointerInfo,
    ) -> Result<()>;

    /// Makes the exported array's stream (or, in `version` 2, the host) wait for the producer's
    /// other `work_streams`.
    // Reached only through the C API (cai_export, cai_from_dlpack): unused without `c-api`.
    #[cfg_attr(not(feature = "c-api"), allow(dead_code))]
    fn join_work_streams(
        &self,
        exported: &mut CaiArray,
        version: i32,
        work_streams: &[u64],
        info: &CaiPointerInfo,
    ) -> Result<()>;

    /// The spec's rule on which stream kinds and byte offsets an array of this kind has (pure).
    fn placement_is_valid(&self, array: &CaiArray) -> Result<()>;

    /// The spec's rule on where the bytes the elements touch (`extent`, from the first
    /// element) may lie for this kind (pure: the allocation is the driver's to say).
    fn extent_is_addressable(&self, array: &CaiArray, extent: (i64, i64)) -> Result<()>;

    /// The DLPack device of the data: `given` (a device the caller named) or asked of the
    /// driver; refused where DLPack cannot carry the memory.
    fn dl_device(&self, array: &CaiArray, extent: Extent, given: Option<CaiDLDevice>) -> Result<CaiDLDevice>;
}

/// The spec's rule of `array`'s memory kind on its stream kind and byte offset, `memory` itself
/// checked first. Validation's hot path: dispatched statically, each kind's method inlined.
#[inline]
pub(crate) fn placement_is_valid(array: &CaiArray) -> Result<()> {
    match array.memory {
        CAI_MEMORY_CUDA => Cuda.placement_is_valid(array),
        CAI_MEMORY_OPENCL => OpenCl.placement_is_valid(array),
        other => fail(Status::InvalidArgument, move || {
            format!("memory is {other}; it must be CAI_MEMORY_CUDA (0) or CAI_MEMORY_OPENCL (1)")
        }),
    }
}

/// The spec's rule of `array`'s memory kind (known: `placement_is_valid` passed) on where the
/// bytes its elements touch may lie. Dispatched statically, as above.
#[inline]
pub(crate) fn extent_is_addressable(array: &CaiArray, extent: (i64, i64)) -> Result<()> {
    match array.memory {
        CAI_MEMORY_OPENCL => OpenCl.extent_is_addressable(array, extent),
        _ => Cuda.extent_is_addressable(array, extent),
    }
}

/// The import's pointer check (as `mode` asks) and then its sync of `consumer_stream` after
/// `producer_stream` (as `sync_mode` says), for `array`'s memory kind (validated): what the
/// check learnt. `stated` is the device a DLPack tensor (or a producer's own word) names for
/// the data, which the check's answer must not contradict (`pointer_is_on_the_stated_device`),
/// before anything is synchronized. Dispatched statically, as validation's rules are, so that
/// an import that asks neither (no check, nothing to sync) costs a few compares: every import
/// runs it.
#[inline]
pub(crate) fn check_then_sync(
    array: &CaiArray,
    extent: Extent,
    streams: (u64, u64),
    modes: (i32, i32),
    host: HostMemory,
    stated: Option<CaiDLDevice>,
) -> Result<CaiPointerInfo> {
    #[inline]
    fn on(
        kind: &impl MemoryKind,
        array: &CaiArray,
        extent: Extent,
        (producer_stream, consumer_stream): (u64, u64),
        (mode, sync_mode): (i32, i32),
        host: HostMemory,
        stated: Option<CaiDLDevice>,
    ) -> Result<CaiPointerInfo> {
        let info = kind.check(array, extent, consumer_stream, mode, host)?;
        if let Some(stated) = stated {
            pointer_is_on_the_stated_device(stated, array.data, &info)?;
        }
        kind.sync(array, producer_stream, consumer_stream, sync_mode, &info)?;
        Ok(info)
    }
    match array.memory {
        CAI_MEMORY_OPENCL => on(&OpenCl, array, extent, streams, modes, host, stated),
        _ => on(&Cuda, array, extent, streams, modes, host, stated),
    }
}

/// DLPack's rule that a tensor's device is where its data is: a kDLCUDA tensor whose pointer
/// the driver places in device memory of another device than the one the tensor names is
/// refused, since its consumer would run on the device named. Only what the check learnt of
/// device memory is compared: managed and pinned host memory belong to no one device, and an
/// unchecked pointer (`checked` 0) says nothing.
pub(crate) fn pointer_is_on_the_stated_device(
    stated: CaiDLDevice,
    data: u64,
    info: &CaiPointerInfo,
) -> Result<()> {
    let device_memory = info.checked == 1 && info.is_managed == 0 && info.memory_type == CU_MEMORYTYPE_DEVICE;
    if stated.device_type != CAI_DL_CUDA || !device_memory || info.device_ordinal == stated.device_id {
        return Ok(());
    }
    let found = info.device_ordinal;
    fail(Status::NotDevicePointer, move || {
        format!(
            "the producer says the data is on CUDA device {} but the driver places its pointer {data:#x} in the memory of device {found}; the tensor's device is wrong",
            stated.device_id
        )
    })
}

/// The kind of `array`'s memory (validated: `memory` is one libcai knows).
pub(crate) fn kind_of(array: &CaiArray) -> &'static dyn MemoryKind {
    match array.memory {
        CAI_MEMORY_OPENCL => &OpenCl,
        _ => &Cuda,
    }
}

/// CUDA memory: a pointer the driver knows, CUDA streams.
struct Cuda;

impl MemoryKind for Cuda {
    /// CUDA memory has no offset and no stream kind: the pointer is the first element's, the
    /// stream a CUstream.
    fn placement_is_valid(&self, array: &CaiArray) -> Result<()> {
        match (array.stream_kind, array.byte_offset) {
            (0, 0) => Ok(()),
            (0, offset) => fail(Status::InvalidArgument, move || {
                format!("byte_offset is {offset} for CUDA memory, whose data points at the first element; it must be 0")
            }),
            (kind, _) => fail(Status::InvalidArgument, move || {
                format!("stream_kind is {kind} for CUDA memory; it must be 0")
            }),
        }
    }

    fn extent_is_addressable(&self, array: &CaiArray, extent: (i64, i64)) -> Result<()> {
        extent_stays_in_address_space(array.data, extent)
    }

    #[inline]
    fn check(
        &self,
        array: &CaiArray,
        extent: Extent,
        _: u64,
        mode: i32,
        host: HostMemory,
    ) -> Result<CaiPointerInfo> {
        checked_pointer(array.data, extent.bytes, extent.element_count, mode, host)
    }

    #[inline]
    fn sync(
        &self,
        _: &CaiArray,
        producer: u64,
        consumer: u64,
        mode: i32,
        info: &CaiPointerInfo,
    ) -> Result<()> {
        sync_if_needed(producer, consumer, mode, info.context.cast())
    }

    fn join_work_streams(
        &self,
        exported: &mut CaiArray,
        version: i32,
        work_streams: &[u64],
        info: &CaiPointerInfo,
    ) -> Result<()> {
        if exported.stream == CAI_STREAM_NONE && version >= 3 {
            exported.stream = work_streams.first().copied().unwrap_or(CAI_STREAM_NONE);
        }
        if work_streams.is_empty() {
            return Ok(());
        }
        let d = driver()?;
        let context = info.context.cast();
        if version >= 3 {
            return join_streams(d, exported.stream, work_streams, context);
        }
        // Version 2 has no stream to join into: the work must be finished before the consumer
        // sees the array, so the host waits for it.
        for &stream in work_streams {
            consumer_sync(d, stream, CAI_STREAM_NONE, CAI_SYNC_BLOCKING, context)?;
        }
        Ok(())
    }

    /// Device memory is kDLCUDA, pinned host memory kDLCUDAHost, managed memory
    /// kDLCUDAManaged, as the driver says; an empty array has no memory to ask about: kDLCUDA 0.
    fn dl_device(&self, array: &CaiArray, extent: Extent, given: Option<CaiDLDevice>) -> Result<CaiDLDevice> {
        if let Some(device) = given {
            return Ok(device);
        }
        if extent.element_count == 0 {
            return Ok(CaiDLDevice { device_type: CAI_DL_CUDA, device_id: 0 });
        }
        let info =
            self.check(array, extent, CAI_STREAM_NONE, CAI_POINTER_CHECK_ALWAYS, HostMemory::Refused)?;
        let device_type = if info.is_managed == 1 {
            CAI_DL_CUDA_MANAGED
        } else if info.memory_type == CU_MEMORYTYPE_HOST {
            CAI_DL_CUDA_HOST
        } else {
            CAI_DL_CUDA
        };
        let device_id = if device_type == CAI_DL_CUDA_HOST { 0 } else { info.device_ordinal };
        Ok(CaiDLDevice { device_type, device_id })
    }
}

/// OpenCL memory: a cl_mem and a byte offset in it, a queue or an event to order against.
struct OpenCl;

impl MemoryKind for OpenCl {
    /// OpenCL memory names what its stream is: a queue or an event.
    fn placement_is_valid(&self, array: &CaiArray) -> Result<()> {
        match array.stream_kind {
            CAI_OPENCL_STREAM_QUEUE | CAI_OPENCL_STREAM_EVENT => Ok(()),
            kind => fail(Status::InvalidArgument, move || {
                format!("stream_kind is {kind}; it must be CAI_OPENCL_STREAM_QUEUE (0) or _EVENT (1)")
            }),
        }
    }

    fn extent_is_addressable(&self, array: &CaiArray, extent: (i64, i64)) -> Result<()> {
        extent_starts_inside_the_buffer(array.byte_offset, extent)
    }

    fn check(
        &self,
        array: &CaiArray,
        extent: Extent,
        consumer: u64,
        mode: i32,
        _: HostMemory,
    ) -> Result<CaiPointerInfo> {
        checked_buffer(array.data, array.byte_offset, extent.bytes, extent.element_count, consumer, mode)
    }

    fn sync(
        &self,
        array: &CaiArray,
        producer: u64,
        consumer: u64,
        mode: i32,
        _: &CaiPointerInfo,
    ) -> Result<()> {
        opencl_sync(producer, array.stream_kind, consumer, mode)
    }

    fn join_work_streams(
        &self,
        _: &mut CaiArray,
        _: i32,
        work_streams: &[u64],
        _: &CaiPointerInfo,
    ) -> Result<()> {
        if work_streams.is_empty() {
            Ok(())
        } else {
            Err(Error::new(
                Status::InvalidArgument,
                "work_streams are CUDA streams; OpenCL memory is ordered by its own queue or event (stream)",
            ))
        }
    }

    fn dl_device(&self, _: &CaiArray, _: Extent, _: Option<CaiDLDevice>) -> Result<CaiDLDevice> {
        Err(Error::new(
            Status::InvalidArgument,
            "the array is OpenCL memory; libcai exchanges CUDA and host memory through DLPack",
        ))
    }
}

/// The bytes the elements touch lie between address 0 and 2^64: CUDA memory's rule.
#[inline]
pub(crate) fn extent_stays_in_address_space(data: u64, (begin, end): (i64, i64)) -> Result<()> {
    debug_assert!(begin <= 0 && end >= 0);
    // begin <= 0 <= end: the lowest byte is data - |begin|, one past the highest data + end.
    let low_fits = data >= begin.unsigned_abs();
    let high_fits = data.checked_add(end as u64).is_some() || data.wrapping_add(end as u64) == 0;
    if begin == end || (low_fits && high_fits) {
        return Ok(());
    }
    fail(Status::Overflow, move || {
        format!("data {data:#x} with byte extent [{begin}, {end}) wraps around the address space")
    })
}

/// An OpenCL array's elements start inside its buffer: `byte_offset` plus the lowest byte
/// reached (below the first element with negative strides) is not before the buffer's start,
/// and the highest fits in 63 bits. The buffer's end is the driver's to say (import).
#[inline]
fn extent_starts_inside_the_buffer(byte_offset: u64, (begin, end): (i64, i64)) -> Result<()> {
    let low = i128::from(byte_offset) + i128::from(begin);
    let high = i128::from(byte_offset) + i128::from(end);
    if begin == end || (low >= 0 && high <= i128::from(i64::MAX)) {
        return Ok(());
    }
    fail(Status::OutOfBounds, move || {
        format!("byte_offset {byte_offset} with byte extent [{begin}, {end}) reaches [{low}, {high}), outside the buffer's start or 63 bits")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn device_memory_of(ordinal: i32) -> CaiPointerInfo {
        CaiPointerInfo {
            checked: 1,
            memory_type: CU_MEMORYTYPE_DEVICE,
            device_ordinal: ordinal,
            ..Default::default()
        }
    }

    #[test]
    fn a_cuda_device_named_is_compared_with_where_the_driver_places_device_memory() {
        let cuda = |device_id| CaiDLDevice { device_type: CAI_DL_CUDA, device_id };
        let refused = pointer_is_on_the_stated_device(cuda(1), 0x1000, &device_memory_of(0)).unwrap_err();
        assert_eq!(refused.status, Status::NotDevicePointer);
        assert!(refused
            .message
            .contains("CUDA device 1 but the driver places its pointer 0x1000 in the memory of device 0"));
        assert!(pointer_is_on_the_stated_device(cuda(2), 0x1000, &device_memory_of(2)).is_ok());
        let unchecked = CaiPointerInfo { checked: 0, ..device_memory_of(0) };
        let managed = CaiPointerInfo { is_managed: 1, ..device_memory_of(0) };
        let pinned = CaiPointerInfo { memory_type: CU_MEMORYTYPE_HOST, ..device_memory_of(0) };
        for info in [unchecked, managed, pinned] {
            assert!(pointer_is_on_the_stated_device(cuda(1), 0x1000, &info).is_ok());
        }
        for device_type in [CAI_DL_CUDA_HOST, CAI_DL_CUDA_MANAGED] {
            let named = CaiDLDevice { device_type, device_id: 1 };
            assert!(pointer_is_on_the_stated_device(named, 0x1000, &device_memory_of(0)).is_ok());
        }
    }
}
