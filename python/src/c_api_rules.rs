//! The C-level CAI table's rules on what a description holds (docs/c-level-cai.md section 5)
//! that the rules of the CAI itself (the core's `validate`) do not say: kept by the glue that
//! writes descriptions from a fill (offer/offered.rs) and by the reader of any other type's table
//! (read/c_api.rs).

use cai::{CaiArray, CAI_MAX_MASK_DEPTH, CAI_MEMORY_CUDA};

/// The memory kind of `array` or of a mask in its chain where it is not CUDA's: the C-level
/// table's 1.0 carries CUDA memory only (host memory is CUDA's kind on a CPU device). Checked
/// before anything reads the memory: an OpenCL description is valid to the rules, and a pointer
/// check would hand its data to OpenCL as a cl_mem, which OpenCL reads through. A chain longer
/// than the rules allow is left to them (the walk stops there, so a cycle ends it too).
///
/// # Safety
/// `array`'s masks, to the depth the rules allow, are NULL or readable structs.
pub unsafe fn memory_other_than_cuda(array: &CaiArray) -> Option<u32> {
    let mut current = array;
    for _ in 0..=CAI_MAX_MASK_DEPTH {
        if current.memory != CAI_MEMORY_CUDA {
            return Some(current.memory);
        }
        if current.mask.is_null() {
            return None;
        }
        // SAFETY: the caller's contract.
        current = unsafe { &*current.mask };
    }
    None
}
