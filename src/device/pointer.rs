//! What the driver knows about a data pointer, and the check that an array's bytes lie inside
//! the allocation holding it.

use crate::abi::{
    CaiPointerInfo, CAI_POINTER_CHECK_ALWAYS, CAI_POINTER_CHECK_DEFAULT, CAI_POINTER_CHECK_NEVER,
};
use crate::driver::cuda::{CU_MEMORYTYPE_DEVICE, CU_MEMORYTYPE_HOST, CU_MEMORYTYPE_UNIFIED};
use crate::driver::{driver, driver_available, Driver};
use crate::status::{Error, Result, Status};

/// Asks the driver about `pointer` and its allocation range in one cuPointerGetAttributes call
/// (cuMemGetAddressRange where the range attributes give none). Fails with NOT_DEVICE_POINTER
/// where the device cannot reach it.
pub(crate) fn pointer_info(driver: &Driver, pointer: u64) -> Result<CaiPointerInfo> {
    match device_pointer_info(driver, pointer)? {
        Reach::Device(info) => Ok(info),
        Reach::HostOnly(info) => Err(not_device_reachable(pointer, info.memory_type)),
    }
}

/// What the driver says of a pointer: memory the device reaches (with its allocation), or
/// host memory it cannot (with no allocation asked for).
enum Reach {
    Device(CaiPointerInfo),
    HostOnly(CaiPointerInfo),
}

fn device_pointer_info(driver: &Driver, pointer: u64) -> Result<Reach> {
    let found = driver.pointer_attributes(pointer)?;
    let memory_type = found.memory_type;
    let mut info = CaiPointerInfo {
        device_pointer: found.device_pointer,
        context: found.context.cast(),
        device_ordinal: found.device_ordinal,
        memory_type,
        is_managed: found.is_managed,
        checked: 1,
        ..CaiPointerInfo::default()
    };
    let device_reachable = match memory_type {
        CU_MEMORYTYPE_DEVICE | CU_MEMORYTYPE_UNIFIED => true,
        CU_MEMORYTYPE_HOST => found.device_pointer != 0,
        _ => false,
    };
    if !device_reachable {
        return Ok(Reach::HostOnly(info));
    }
    (info.allocation_base, info.allocation_size) = match found.range {
        Some(range) => range,
        None => driver.allocation_range(pointer)?,
    };
    Ok(Reach::Device(info))
}

fn not_device_reachable(pointer: u64, memory_type: u32) -> Error {
    Error::new(
        Status::NotDevicePointer,
        format!(
            "data {pointer:#x} is not device-accessible memory (memory type {memory_type}: {}); a consumer that reads host memory passes allow_host",
            match memory_type {
                0 => "not known to the driver, e.g. unregistered host memory",
                CU_MEMORYTYPE_HOST => "pinned host memory that is not mapped",
                _ => "a CUDA array, not linear memory",
            }
        ),
    )
}

/// Whether a pointer check in `mode` (a CAI_POINTER_CHECK_* value) is to run: always, never,
/// or by default where `library_loads` (the CUDA driver, or the OpenCL library).
pub(crate) fn check_is_wanted(mode: i32, library_loads: impl FnOnce() -> bool) -> Result<bool> {
    match mode {
        CAI_POINTER_CHECK_DEFAULT => Ok(library_loads()),
        CAI_POINTER_CHECK_ALWAYS => Ok(true),
        CAI_POINTER_CHECK_NEVER => Ok(false),
        other => Err(Error::new(
            Status::InvalidArgument,
            format!("pointer check {other} is not one of CAI_POINTER_CHECK_*"),
        )),
    }
}

/// Whether a pointer check accepts host memory the device cannot reach.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum HostMemory {
    Refused,
    /// Accepted as the driver describes it (`device_pointer` 0, no allocation): a host
    /// allocation is not the driver's to bound.
    Allowed,
}

/// The pointer check `mode` (a CAI_POINTER_CHECK_* value) asks for, of an array whose
/// elements touch [data + begin, data + end). Empty arrays never query the driver.
// Inlined into the import up to the decision: where no check is asked (the hot path's usual
// case) it costs a compare; the driver's part is out of line.
#[inline]
pub(crate) fn checked_pointer(
    data: u64,
    extent: (i64, i64),
    element_count: u64,
    mode: i32,
    host: HostMemory,
) -> Result<CaiPointerInfo> {
    if !check_is_wanted(mode, driver_available)? || element_count == 0 {
        return Ok(CaiPointerInfo::default());
    }
    asked_of_the_driver(data, extent, host)
}

/// `checked_pointer`'s query: what the driver says of `data`, its extent inside the allocation.
#[inline(never)]
fn asked_of_the_driver(data: u64, extent: (i64, i64), host: HostMemory) -> Result<CaiPointerInfo> {
    match device_pointer_info(driver()?, data)? {
        Reach::Device(info) => {
            extent_within_allocation(data, extent, &info)?;
            Ok(info)
        }
        Reach::HostOnly(info) if host == HostMemory::Allowed => Ok(info),
        Reach::HostOnly(info) => Err(not_device_reachable(data, info.memory_type)),
    }
}

/// The array's bytes [data + begin, data + end) lie inside its allocation, so a descriptor
/// cannot make a consumer touch memory it was not given.
pub(crate) fn extent_within_allocation(
    data: u64,
    (begin, end): (i64, i64),
    info: &CaiPointerInfo,
) -> Result<()> {
    let low = i128::from(data) + i128::from(begin);
    let high = i128::from(data) + i128::from(end);
    let alloc_low = i128::from(info.allocation_base);
    let alloc_high = alloc_low + i128::from(info.allocation_size);
    if low >= alloc_low && high <= alloc_high {
        Ok(())
    } else {
        Err(Error::new(
            Status::OutOfBounds,
            format!(
                "data {data:#x} with byte extent [{begin}, {end}) reaches [{low:#x}, {high:#x}), outside its allocation [{alloc_low:#x}, {alloc_high:#x})"
            ),
        ))
    }
}
