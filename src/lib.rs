//! libcai: the C side of the CUDA Array Interface.
//!
//! The module tree follows the layers of the design, data flowing down and never up:
//!
//! - `ffi`: the `extern "C"` surface cbindgen turns into `include/cai.h`; NULL checks, the
//!   panic boundary and status codes only.
//! - `import`, `export`: the consumer's and the producer's sequence of steps; `dlpack`: the
//!   same struct to and from DLPack tensors.
//! - core, pure: `validate` (one function per spec rule) over `layout`, `dtype` and
//!   `element_type` (DLPack's types beside the typestr: bfloat16, float8, ...);
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
//! - `rust_api`: the safe Rust API over the same core (beside `ffi`, never under it).
//!
//! # The Rust API
//!
//! [`Array`] owns a described device array and runs its producer's release exactly once, when
//! dropped; [`ArrayView`] borrows one; both read through [`ArrayRef`] (validation,
//! [`Layout`], [`Dtype`], [`import`](ArrayRef::import) with [`ImportOptions`],
//! [`sync`](ArrayRef::sync)). DLPack goes both ways through [`DlpackTensor`] (and the legacy,
//! unversioned struct through [`LegacyDlpackTensor`]); a refused export hands the array back
//! ([`IntoDlpackError`]). Every failure is one [`Error`]: its [`Status`], the driver's raw
//! result and a message naming the field.
//! The CUDA driver (and libOpenCL, for OpenCL memory) is opened at run time, on first use, so
//! a program using this crate builds and runs where no CUDA is installed.
//!
//! ```
//! let array = cai::Array::builder("<f4", &[4, 4], 0x7f00_0000_1000).strides(&[32, 8]).build()?;
//! assert!(!array.layout()?.c_contiguous);
//! let rejected = cai::Array::builder("<f4", &[-1], 0x7f00_0000_1000).build().unwrap_err();
//! assert_eq!(rejected.status(), cai::Status::InvalidShape);
//! # Ok::<(), cai::Error>(())
//! ```
//!
//! Unsafe are only what hands libcai something it cannot check: a raw struct or DLPack tensor
//! (its pointers and deleter), and driver handles (a stream, an OpenCL object), which the
//! driver would dereference. The `extern "C"` functions are the C API: `unsafe` to Rust
//! callers, each with the pointer contract in its `# Safety` section.
//!
//! # Threads and releases
//!
//! [`Array`], [`ArrayView`], [`DlpackTensor`] and [`LegacyDlpackTensor`] are `Send` and `Sync`.
//! A release runs exactly once, on whichever thread drops the array (or deletes the DLPack
//! tensor it moved into): any thread, as DLPack's deleters may. So an
//! [`on_release`](ArrayBuilder::on_release) closure is `Send`, and a struct or tensor handed
//! over raw must have a release callable from any thread. A release that lets go of Python
//! objects attaches to the interpreter itself: in a PyO3 extension, `cai_python::keep` does.
//!
//! # Cargo features and crate types
//!
//! One feature, `c-api` (on by default): the C API, cai.h's `extern "C"` functions exported
//! under their C names (the `cdylib` and `staticlib` the build also makes need it). A crate
//! that wants only the Rust API turns it off (`default-features = false`), as a PyO3
//! extension on `cai-python` does, so that its module exports no `cai_*` symbol of its own
//! next to the `cai` package's. The Rust API and both drivers' loaders are always built, and
//! nothing is linked at build time (libcuda and libOpenCL are opened at run time).
//! Its minimum Rust is the `rust-version` of its `Cargo.toml`.
//!
//! `binding` (hidden) is the core's Rust API for bindings (libcai's Python extension first);
//! it is not a stable Rust API.

#![deny(missing_docs)]

mod abi;
mod config;
mod description;
mod device;
mod device_calls;
mod dict;
mod dlpack;
mod driver;
mod dtype;
mod element_type;
mod export;
#[cfg(feature = "c-api")]
mod ffi;
mod headers;
mod import;
mod ipc;
mod layout;
mod normalize;
mod rust_api;
mod status;
mod validate;

pub use abi::*;
pub use device_calls::{device_calls_routed, route_device_calls, DeviceCalls};
#[cfg(feature = "c-api")]
pub use ffi::*;
pub use rust_api::*;
pub use status::*;

/// The core's Rust API for bindings: libcai's Python extension is its first client (benches
/// and tests use it too). Grouped by what a binding does; the types say what each step
/// established (`Imported`, `Validated`) or owns (`Description`). Not a stable Rust API.
#[doc(hidden)]
pub mod binding {
    pub use crate::description::Description;

    /// The spec's rules on a struct, and the facts they establish.
    pub mod rules {
        pub use crate::layout::c_strides;
        pub use crate::validate::{
            in_mask, layout_of, mask_depth_is_within_limit, stream_for_version, typestr_is_a_device_type,
            validate, Validated,
        };
    }

    /// Reading a producer's dict by the dict's rules (a binding supplies the values it found).
    pub mod dict {
        pub use crate::dict::{
            array_from_dict, consumer_stream_is_a_handle, stream_object_handle_is_a_handle, DictValues,
            Limits, Repr, Value, KEYS,
        };
    }

    /// The consumer's side: import (validate, check, sync) and what it established.
    pub mod import {
        pub use crate::device::deferred::run_due_releases;
        pub use crate::device::sync::{producer_ordering, ProducerOrdering};
        pub use crate::import::{import, import_described, import_is_inert, import_may_wait, sync, Imported};
    }

    /// The producer's side: the export form of a struct.
    pub mod export {
        pub use crate::normalize::{export_version, normalize_for_export};
    }

    /// DLPack tensors to and from structs.
    pub mod dlpack {
        pub use crate::dlpack::{
            check_dltensor, check_versioned, device_is_cuda_or_allowed_host, device_of, discard,
            dl_tensor_of, from_dlpack, from_dlpack_legacy, read_dltensor, to_dlpack, to_dlpack_legacy,
            write_dltensor, write_versioned, AllowHost, CheckedDlTensor, HostWords, Keeper, KeptObject,
            RELEASE_VERSIONED,
        };
        pub use crate::element_type::SubByte;
    }

    /// Arrays across processes: a device array into an IPC descriptor (`export`), and a
    /// descriptor another process exported into an owning array (`open`, released by the
    /// array's release); `open_count` is how many arrays of this process hold the allocation.
    pub mod ipc {
        pub use crate::ipc::{export, open, open_count};
    }

    /// Element types beside the typestr (bfloat16, float8, ...): names and DLPack types.
    pub mod element_type {
        pub use crate::element_type::{dl_dtype_named, element_type, name_of, names_beyond_numpy};
    }

    pub use crate::abi::release as release_array;
    /// `cai_release_after` and `cai_release_pending` of this copy of libcai, whose queue the
    /// package's atexit hook drains.
    pub use crate::device::deferred::{release_after, release_pending};
    pub use crate::device::events::EVENT_POOL_CAPACITY;

    /// Writes `error` into `out` (NULL: nothing) as every C function does.
    #[cfg(feature = "c-api")]
    pub fn write_error(out: *mut crate::CaiError, error: &crate::Error) {
        crate::ffi::write_error(out, error)
    }
}

/// The README's Rust blocks, run as doctests so that they cannot drift from the API.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
