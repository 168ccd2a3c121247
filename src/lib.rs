//! libcai: the C side of the CUDA Array Interface.
//!
//! The module tree follows the layers of the design, data flowing down and never up:
//!
//! - `ffi`: the `extern "C"` surface cbindgen turns into `include/cai.h`; NULL checks, the
//!   panic boundary and status codes only.
//! - `import`, `export`: the consumer's and the producer's sequence of steps; `dlpack`: the
//!   same struct to and from DLPack tensors.
//! - core, pure: `validate` (one function per spec rule) over `layout` and `dtype`;
//!   `normalize` (the export form); `dict` (the dict's rules, for bindings that read one).
//! - `device`: pointer checks, stream sync and the event pool, through `driver`'s typed calls,
//!   behind `device::memory`, the one seam per memory kind that validate, import, export and
//!   DLPack ask (validate only its pure rules: where a kind's data may lie).
//! - `driver`: libcuda opened at run time, every entry point wrapped once, and in
//!   `driver::opencl` the same for libOpenCL (the Buffer Interface's OpenCL half); both open
//!   their library through `driver::library`.
//! - `abi` and `status`: the C types and codes every layer shares; `config`: the environment
//!   variables, read once.
//!
//! The crate root is the C API as Rust sees it. `internal` holds what libcai's own Python
//! extension, benches and tests need besides; it is not a stable Rust API.

// Every unsafe block says why it is sound.
#![deny(clippy::undocumented_unsafe_blocks)]

mod abi;
mod config;
mod device;
mod dict;
mod dlpack;
mod driver;
mod dtype;
mod export;
mod ffi;
mod headers;
mod import;
mod layout;
mod normalize;
mod status;
mod validate;

pub use abi::*;
pub use ffi::*;
pub use status::*;

/// The core's Rust functions, for libcai's Python extension, benches and tests only.
#[doc(hidden)]
pub mod internal {
    pub use crate::abi::release as release_array;
    pub use crate::device::events::EVENT_POOL_CAPACITY;
    pub use crate::device::sync::{producer_ordering, ProducerOrdering};
    pub use crate::dict::{
        array_from_dict, consumer_stream_is_a_handle, stream_object_handle_is_a_handle, DictValues, Limits,
        Repr, Value, KEYS,
    };
    pub use crate::dlpack::{
        device_is_cuda_or_allowed_host, device_of, discard, dl_tensor_of, from_dlpack, from_dlpack_legacy,
        to_dlpack, to_dlpack_legacy,
    };
    pub use crate::import::{import, import_may_wait, sync};
    pub use crate::layout::c_strides;
    pub use crate::normalize::{export_version, normalize_for_export};
    pub use crate::validate::{
        in_mask, layout_of, mask_depth_is_within_limit, stream_for_version, typestr_is_a_device_type,
        validate, Validated,
    };

    /// Writes `error` into `out` (NULL: nothing) as every C function does.
    pub fn write_error(out: *mut crate::CaiError, error: &crate::Error) {
        crate::ffi::write_error(out, error)
    }
}
