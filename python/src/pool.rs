//! Heap room for CaiArrays (1160 bytes each), reused per thread: an import needs one, and an
//! allocation of that size is past the allocator's fast per-thread cache, so a small pool of
//! our own is the cheaper way.

use std::cell::RefCell;
use std::ops::{Deref, DerefMut};

use cai::CaiArray;

/// Boxes kept for reuse per thread, at most.
const KEPT: usize = 32;

thread_local! {
    // Boxes, not values: the pool hands out the boxes themselves, whose addresses must not move.
    #[allow(clippy::vec_box)]
    static FREE: RefCell<Vec<Box<CaiArray>>> = const { RefCell::new(Vec::new()) };
}

/// A CaiArray on the heap (a stable address for the pointers into it) whose box goes back to
/// this thread's pool when dropped.
pub struct Pooled(Option<Box<CaiArray>>);

impl Pooled {
    /// A CaiArray ready for a fill: every field a zeroed struct's (NULL pointers, no release
    /// callback), the extents too for a new box; a reused box keeps the extents its last fill
    /// wrote, which a fill overwrites up to its rank and nothing reads past it (cai.h).
    pub fn cleared() -> Pooled {
        Pooled::with(CaiArray::clear_head)
    }

    pub fn copy_of(source: &CaiArray) -> Pooled {
        Pooled::with(|array| *array = *source)
    }

    fn with(set: impl FnOnce(&mut CaiArray)) -> Pooled {
        let reused = FREE.try_with(|free| free.borrow_mut().pop()).ok().flatten();
        let mut array = reused.unwrap_or_else(|| Box::new(CaiArray::zeroed()));
        set(&mut array);
        Pooled(Some(array))
    }
}

impl Drop for Pooled {
    fn drop(&mut self) {
        if let Some(array) = self.0.take() {
            // A thread that is exiting has no pool left: the box is then simply freed.
            let _ = FREE.try_with(|free| {
                let mut free = free.borrow_mut();
                if free.len() < KEPT {
                    free.push(array);
                }
            });
        }
    }
}

impl Deref for Pooled {
    type Target = CaiArray;

    fn deref(&self) -> &CaiArray {
        self.0.as_deref().expect("present until dropped")
    }
}

impl DerefMut for Pooled {
    fn deref_mut(&mut self) -> &mut CaiArray {
        self.0.as_deref_mut().expect("present until dropped")
    }
}
