//! libcai: the C side of the CUDA Array Interface.
//!
//! `CaiArray` mirrors the `__cuda_array_interface__` dict as a `#[repr(C)]` struct. The core
//! modules (`dtype`, `layout`, `validate`, `normalize`, and `dict` for the dict form) are
//! pure; `ffi` is the thin C surface that cbindgen turns into `include/cai.h`. The Python
//! extension (python/src) calls the core directly; this library carries no CPython code.

pub mod array;
pub mod device;
pub mod dict;
pub mod driver;
pub mod dtype;
pub mod export;
pub mod ffi;
mod headers;
pub mod import;
pub mod layout;
pub mod normalize;
pub mod status;
pub mod validate;

pub use array::{CaiArray, CaiField, CAI_MAX_NDIM};
pub use dtype::CaiDtype;
pub use ffi::CaiError;
pub use layout::CaiLayout;
pub use status::{Error, Result, Status};
pub use validate::{validate, Validated};
