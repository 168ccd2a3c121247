//! The few types and values of NVIDIA's `cuda.h` that libcai uses, declared here under their C
//! names rather than taken from a bindings crate: a bindings crate links `-lcuda` at build time,
//! which a crate depending on libcai cannot switch off. tests/driver_real_nvidia.rs compiles each
//! of them, and every entry point's signature in `Api`, against NVIDIA's `cuda.h`: declarations
//! here are `pub(crate) type NAME = TYPE;` and `pub(crate) const NAME: TYPE = VALUE;` with the
//! C names, one a line, which that test reads.

#![allow(non_camel_case_types)]

use std::os::raw::{c_int, c_uint};

/// CUresult: kept a raw integer, as a Rust enum would lack newer codes and reading an unknown
/// value into one is undefined behaviour.
pub(crate) type CUresult = i32;
/// cuda.h's uint64_t, for cuGetProcAddress's flags.
pub(crate) type cuuint64_t = u64;
/// A device address (CUdeviceptr_v2 on 64-bit hosts).
pub(crate) type CUdeviceptr = u64;
/// A device as the driver names it: an ordinal of this process (CUdevice_v1).
pub(crate) type CUdevice = c_int;

/// Opaque driver objects, only ever handled by pointer.
#[repr(C)]
pub(crate) struct CUctx_st {
    _opaque: [u8; 0],
}
#[repr(C)]
pub(crate) struct CUstream_st {
    _opaque: [u8; 0],
}
#[repr(C)]
pub(crate) struct CUevent_st {
    _opaque: [u8; 0],
}
#[repr(C)]
pub(crate) struct CUgraph_st {
    _opaque: [u8; 0],
}
#[repr(C)]
pub(crate) struct CUgraphNode_st {
    _opaque: [u8; 0],
}
pub(crate) type CUcontext = *mut CUctx_st;
pub(crate) type CUstream = *mut CUstream_st;
pub(crate) type CUevent = *mut CUevent_st;
pub(crate) type CUgraph = *mut CUgraph_st;
pub(crate) type CUgraphNode = *mut CUgraphNode_st;

/// Bytes of an IPC handle (CUipcMemHandle, CUipcEventHandle) and of CUmemPoolPtrExportData.
pub(crate) const CU_IPC_HANDLE_SIZE: usize = 64;

/// CUipcMemHandle: an allocation's handle another process opens (cuIpcOpenMemHandle).
#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) struct CUipcMemHandle {
    pub reserved: [u8; CU_IPC_HANDLE_SIZE],
}
/// CUipcEventHandle: an interprocess event's handle another process opens.
#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) struct CUipcEventHandle {
    pub reserved: [u8; CU_IPC_HANDLE_SIZE],
}
/// CUuuid: a device's UUID (cuDeviceGetUuid).
#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) struct CUuuid {
    pub bytes: [u8; 16],
}
/// CUmemPoolPtrExportData: what cuMemPoolExportPointer writes for memory of an IPC-enabled pool.
#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) struct CUmemPoolPtrExportData {
    pub reserved: [u8; CU_IPC_HANDLE_SIZE],
}

/// CUpointer_attribute: an enum in C, passed as an array of them; read as the unsigned int
/// that a C compiler gives an enum of non-negative values.
pub(crate) type CUpointer_attribute = c_uint;

pub(crate) const CUDA_SUCCESS: CUresult = 0;
/// A driver's answer to an attribute it does not know, among others.
pub(crate) const CUDA_ERROR_INVALID_VALUE: CUresult = 1;
/// cuInit's answer where the driver loads but no GPU is there.
pub(crate) const CUDA_ERROR_NO_DEVICE: CUresult = 100;
/// cuEventQuery's answer while the work before the event is still running.
pub(crate) const CUDA_ERROR_NOT_READY: CUresult = 600;
/// cuStreamGetCaptureInfo's answer for the legacy stream while a blocking stream of its
/// context is capturing (the capture is left as it is); any other use of the legacy stream
/// then fails with it too, and invalidates that capture.
pub(crate) const CUDA_ERROR_STREAM_CAPTURE_IMPLICIT: CUresult = 906;

/// CUstreamCaptureStatus: an enum in C, read as the unsigned int a C compiler gives it.
pub(crate) type CUstreamCaptureStatus = c_uint;
pub(crate) const CU_STREAM_CAPTURE_STATUS_NONE: CUstreamCaptureStatus = 0;
pub(crate) const CU_STREAM_CAPTURE_STATUS_ACTIVE: CUstreamCaptureStatus = 1;
pub(crate) const CU_STREAM_CAPTURE_STATUS_INVALIDATED: CUstreamCaptureStatus = 2;

pub(crate) const CU_POINTER_ATTRIBUTE_CONTEXT: CUpointer_attribute = 1;
pub(crate) const CU_POINTER_ATTRIBUTE_MEMORY_TYPE: CUpointer_attribute = 2;
pub(crate) const CU_POINTER_ATTRIBUTE_DEVICE_POINTER: CUpointer_attribute = 3;
pub(crate) const CU_POINTER_ATTRIBUTE_IS_MANAGED: CUpointer_attribute = 8;
pub(crate) const CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL: CUpointer_attribute = 9;
pub(crate) const CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE: CUpointer_attribute = 10;
pub(crate) const CU_POINTER_ATTRIBUTE_RANGE_START_ADDR: CUpointer_attribute = 11;
pub(crate) const CU_POINTER_ATTRIBUTE_RANGE_SIZE: CUpointer_attribute = 12;
pub(crate) const CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE: CUpointer_attribute = 17;

/// CUmemorytype, as CU_POINTER_ATTRIBUTE_MEMORY_TYPE reports it.
pub(crate) const CU_MEMORYTYPE_HOST: u32 = 1;
pub(crate) const CU_MEMORYTYPE_DEVICE: u32 = 2;
pub(crate) const CU_MEMORYTYPE_UNIFIED: u32 = 4;

/// CU_EVENT_DISABLE_TIMING: cheaper events, used only for ordering.
pub(crate) const CU_EVENT_DISABLE_TIMING: c_uint = 2;
/// CU_EVENT_INTERPROCESS: an event another process may open (needs CU_EVENT_DISABLE_TIMING).
pub(crate) const CU_EVENT_INTERPROCESS: c_uint = 4;
/// CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS: cuIpcOpenMemHandle's one flag.
pub(crate) const CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS: c_uint = 1;
/// CU_GET_PROC_ADDRESS_LEGACY_STREAM: default-stream handles are passed explicitly anyway.
pub(crate) const CU_GET_PROC_ADDRESS_LEGACY_STREAM: cuuint64_t = 1;
