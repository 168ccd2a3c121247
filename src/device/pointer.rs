//! What the driver knows about a data pointer, and the check that an array's bytes lie inside
//! the allocation holding it.

use std::ffi::c_void;
use std::os::raw::c_uint;

use cuda_driver_sys::CUpointer_attribute_enum as Attr;
use cuda_driver_sys::{CUcontext, CUdeviceptr};

use crate::driver::{Driver, CUDA_SUCCESS};
use crate::status::{Error, Result, Status};

const MEMORY_TYPE_HOST: u32 = 1;
const MEMORY_TYPE_DEVICE: u32 = 2;
const MEMORY_TYPE_UNIFIED: u32 = 4;

/// What the driver reports about a data pointer.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CaiPointerInfo {
    /// The pointer as usable in the calling thread's current context.
    pub device_pointer: u64,
    /// Start of the allocation holding the pointer.
    pub allocation_base: u64,
    /// Size in bytes of that allocation.
    pub allocation_size: u64,
    /// CUcontext the allocation belongs to (may be NULL for managed memory).
    pub context: *mut c_void,
    /// Ordinal of the device the allocation belongs to.
    pub device_ordinal: i32,
    /// CUmemorytype: 1 host (pinned and mapped), 2 device, 4 unified.
    pub memory_type: u32,
    /// 1 for managed (cudaMallocManaged) memory.
    pub is_managed: u32,
    /// 1 if the driver was asked; 0 if the check was skipped (zero-size array, no driver, or off).
    pub checked: u32,
}

impl Default for CaiPointerInfo {
    fn default() -> Self {
        CaiPointerInfo {
            device_pointer: 0,
            allocation_base: 0,
            allocation_size: 0,
            context: std::ptr::null_mut(),
            device_ordinal: -1,
            memory_type: 0,
            is_managed: 0,
            checked: 0,
        }
    }
}

impl CaiPointerInfo {
    pub fn cu_context(&self) -> CUcontext {
        self.context.cast()
    }
}

/// Asks the driver about `pointer` in one cuPointerGetAttributes call, then for its
/// allocation range. Fails with NOT_DEVICE_POINTER where the device cannot reach it.
pub fn pointer_info(driver: &Driver, pointer: u64) -> Result<CaiPointerInfo> {
    let mut context: CUcontext = std::ptr::null_mut();
    let mut memory_type: c_uint = 0;
    let mut device_pointer: CUdeviceptr = 0;
    let mut is_managed: c_uint = 0;
    let mut device_ordinal: i32 = -1;
    let mut attributes = [
        Attr::CU_POINTER_ATTRIBUTE_CONTEXT as c_uint,
        Attr::CU_POINTER_ATTRIBUTE_MEMORY_TYPE as c_uint,
        Attr::CU_POINTER_ATTRIBUTE_DEVICE_POINTER as c_uint,
        Attr::CU_POINTER_ATTRIBUTE_IS_MANAGED as c_uint,
        Attr::CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL as c_uint,
    ];
    let mut values: [*mut c_void; 5] = [
        (&mut context as *mut CUcontext).cast(),
        (&mut memory_type as *mut c_uint).cast(),
        (&mut device_pointer as *mut CUdeviceptr).cast(),
        (&mut is_managed as *mut c_uint).cast(),
        (&mut device_ordinal as *mut i32).cast(),
    ];
    // SAFETY: each value slot has the size its attribute writes.
    let status = unsafe {
        (driver.api.cuPointerGetAttributes)(
            attributes.len() as c_uint,
            attributes.as_mut_ptr(),
            values.as_mut_ptr(),
            pointer,
        )
    };
    driver.check(status, || format!("cuPointerGetAttributes(data {pointer:#x})"))?;
    let device_reachable = match memory_type {
        MEMORY_TYPE_DEVICE | MEMORY_TYPE_UNIFIED => true,
        MEMORY_TYPE_HOST => device_pointer != 0,
        _ => false,
    };
    if !device_reachable {
        return Err(Error::new(
            Status::NotDevicePointer,
            format!(
                "data {pointer:#x} is not device-accessible memory (memory type {memory_type}: {})",
                match memory_type {
                    0 => "not known to the driver, e.g. unregistered host memory",
                    MEMORY_TYPE_HOST => "pinned host memory that is not mapped",
                    _ => "a CUDA array, not linear memory",
                }
            ),
        ));
    }
    let (allocation_base, allocation_size) = allocation_range(driver, pointer)?;
    Ok(CaiPointerInfo {
        device_pointer,
        allocation_base,
        allocation_size,
        context: context.cast(),
        device_ordinal,
        memory_type,
        is_managed,
        checked: 1,
    })
}

/// The allocation holding `pointer`: cuMemGetAddressRange, else the pointer's range attributes.
fn allocation_range(driver: &Driver, pointer: u64) -> Result<(u64, u64)> {
    let (mut base, mut size): (CUdeviceptr, usize) = (0, 0);
    // SAFETY: writes a base and a size.
    let status = unsafe { (driver.api.cuMemGetAddressRange)(&mut base, &mut size, pointer) };
    if status == CUDA_SUCCESS {
        return Ok((base, size as u64));
    }
    let mut attributes = [
        Attr::CU_POINTER_ATTRIBUTE_RANGE_START_ADDR as c_uint,
        Attr::CU_POINTER_ATTRIBUTE_RANGE_SIZE as c_uint,
    ];
    let (mut start, mut length): (CUdeviceptr, usize) = (0, 0);
    let mut values: [*mut c_void; 2] =
        [(&mut start as *mut CUdeviceptr).cast(), (&mut length as *mut usize).cast()];
    // SAFETY: each value slot has the size its attribute writes.
    let fallback = unsafe {
        (driver.api.cuPointerGetAttributes)(2, attributes.as_mut_ptr(), values.as_mut_ptr(), pointer)
    };
    if fallback == CUDA_SUCCESS && length > 0 {
        return Ok((start, length as u64));
    }
    Err(driver.error(status, &format!("cuMemGetAddressRange(data {pointer:#x})")))
}

/// The array's bytes [data + begin, data + end) lie inside its allocation, so a descriptor
/// cannot make a consumer touch memory it was not given.
pub fn extent_within_allocation(data: u64, (begin, end): (i64, i64), info: &CaiPointerInfo) -> Result<()> {
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
