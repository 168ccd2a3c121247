//! What a reader hands the negotiation: a producer's description (the struct, its descr fields
//! and mask, wired by the core) and what keeps the memory it describes alive. Never a
//! cai.Array: the class wraps one of these (python/src/array/mod.rs).

use std::mem::ManuallyDrop;

use cai::binding::rules::Validated;
use cai::binding::{release_array, Description};
use cai::{CaiArray, CaiDLDevice};
use pyo3::prelude::*;

use crate::pool::Pooled;

/// The struct's release (a taken tensor's deleter, an export's end) runs if the Read is dropped
/// before a cai.Array takes it over (`into_parts`): a failure after the read leaks nothing.
// Aligned to a cache line: a Read is moved through the readers by memcpy's 64-byte loads,
// and on frames aligned to 16 bytes their speed depended on where the process's stack
// started: `cai.from_object` of a cai.Array took 105-113 ns in some processes and 124-135 ns
// in others on the benchmark machine (the slow ones a stack start 32 bytes past a line's),
// and 100-104 ns in all ten with the alignment (likely the loads split across lines).
#[repr(align(64))]
pub struct Read {
    pub description: Description<Pooled>,
    /// The DLPack device, for a tensor taken from a DLPack producer.
    pub device: Option<CaiDLDevice>,
    /// The producer object to keep alive (None: the struct's own release keeps it).
    pub owner: Option<Py<PyAny>>,
    /// The producers of the masks read (the mask's first, then its mask's): the description
    /// owns the masks' structs, these keep their memory alive.
    pub mask_owners: Vec<Py<PyAny>>,
    /// The Buffer Interface's `buffer` object (a cl_mem holder), for OpenCL memory.
    pub buffer: Option<Py<PyAny>>,
    /// What validation found of the struct as it is (None: not validated yet), for the import
    /// to reuse.
    pub validated: Option<Validated>,
}

impl Read {
    /// A struct whose pointers, if any, point into memory someone else keeps valid (a taken
    /// tensor's, a C producer's), kept alive by `owner` or by the struct's own release, with
    /// what validating it found, if it was validated (for the import to reuse).
    pub fn borrowing(
        array: Pooled,
        device: Option<CaiDLDevice>,
        owner: Option<Py<PyAny>>,
        validated: Option<Validated>,
    ) -> Read {
        Read {
            description: Description::borrowing(array),
            device,
            owner,
            mask_owners: Vec::new(),
            buffer: None,
            validated,
        }
    }
}

/// A Read's parts, its struct's release moved out of the struct for the new owner to hold.
pub struct Parts {
    pub description: Description<Pooled>,
    pub release: Option<unsafe extern "C" fn(*mut CaiArray)>,
    pub device: Option<CaiDLDevice>,
    pub owner: Option<Py<PyAny>>,
    pub mask_owners: Vec<Py<PyAny>>,
    pub buffer: Option<Py<PyAny>>,
}

impl Read {
    pub fn array(&self) -> &CaiArray {
        self.description.array()
    }

    /// Hands the parts over to their new owner, which then runs the release.
    pub fn into_parts(self) -> Parts {
        let mut read = ManuallyDrop::new(self);
        let release = read.description.array_mut().release.take();
        // SAFETY: each field is read out once, and `read` is never dropped or used again.
        unsafe {
            Parts {
                description: std::ptr::read(&read.description),
                release,
                device: read.device,
                owner: std::ptr::read(&read.owner),
                mask_owners: std::ptr::read(&read.mask_owners),
                buffer: std::ptr::read(&read.buffer),
            }
        }
    }
}

impl Drop for Read {
    fn drop(&mut self) {
        // SAFETY: the struct owns what its release lets go of (a tensor, an export), released
        // once: release_array clears the callback.
        unsafe { release_array(self.description.array_mut()) };
    }
}
