//! Room reused per thread: heap boxes for CaiArrays (1160 bytes each; an import needs one, and
//! an allocation of that size is past the allocator's fast per-thread cache, so a small pool of
//! our own is the cheaper way), the CaiArray an offered type's fill describes into when the
//! description is not kept, and the CaiError a fill writes (1160 and 512 bytes not zeroed per
//! call).

use std::cell::{Cell, RefCell, UnsafeCell};
use std::ops::{Deref, DerefMut};

use cai::{CaiArray, CaiError, CaiStatus, CAI_ERROR_MESSAGE_CAPACITY, CAI_OK};

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

/// A value kept per thread and lent to one caller at a time (`lent`): a caller that asks while
/// it is lent (a fill that reads another offered object, which asks again on the same thread)
/// gets a fresh value of its own instead. No destructor: nothing to free.
struct Lent<T> {
    lent: Cell<bool>,
    value: UnsafeCell<T>,
}

impl<T> Lent<T> {
    const fn new(value: T) -> Lent<T> {
        Lent { lent: Cell::new(false), value: UnsafeCell::new(value) }
    }

    /// Runs `use_value` with this thread's value where it is free, else with `fresh()`.
    fn lend<R>(&self, fresh: impl FnOnce() -> T, use_value: impl FnOnce(&mut T) -> R) -> R {
        if self.lent.replace(true) {
            return use_value(&mut fresh());
        }
        let _give_back = GiveBack(&self.lent);
        // SAFETY: this thread's value, lent to this call alone until `_give_back` drops
        // (`lent` was false), so no other reference to it exists meanwhile.
        use_value(unsafe { &mut *self.value.get() })
    }
}

/// Gives the lending back when dropped, so that a panic out of the borrower leaves the value
/// lendable (the panic boundary above it returns an error; the thread goes on).
struct GiveBack<'a>(&'a Cell<bool>);

impl Drop for GiveBack<'_> {
    fn drop(&mut self) {
        self.0.set(false);
    }
}

const ZEROED_ERROR: CaiError =
    CaiError { code: 0, driver_result: 0, message: [0; CAI_ERROR_MESSAGE_CAPACITY] };

thread_local! {
    /// The CaiError fills write on failure: zeroed when the thread first uses it; before each
    /// fill its code and the first byte of its message are reset, so that what is read on
    /// failure is the message that fill wrote (up to its NUL, within the buffer).
    static FILL_ERROR: Lent<CaiError> = const { Lent::new(ZEROED_ERROR) };

    /// The CaiArray an offered type's fill describes into when the description is not kept (a
    /// DLPack tensor is made of it, or its device read): zeroed when the thread first uses it;
    /// its head is written before each fill (`write_defaults`), and its extents keep what the
    /// thread's last fill wrote, which a fill overwrites up to its rank and nothing reads past
    /// it, as with a reused `Pooled` box. Zeroing a struct on the stack per call instead cost a
    /// 1,160-byte memset, about 2% of `numpy.from_dlpack` of an offered type
    /// (the Zen 3 machine of docs/performance.md, 2026-11-28).
    static FILL_ARRAY: Lent<CaiArray> = const { Lent::new(CaiArray::zeroed()) };
}

/// Runs `fill` (a call that writes the CaiError it is given only when it fails, and cannot
/// unwind) with a CaiError that reads as fresh; on a status other than CAI_OK, what `refused`
/// makes of that status and the CaiError as the fill left it.
pub fn with_fill_error<E>(
    fill: impl FnOnce(*mut CaiError) -> CaiStatus,
    refused: impl FnOnce(CaiStatus, &CaiError) -> E,
) -> Result<(), E> {
    FILL_ERROR.with(|scratch| {
        scratch.lend(
            || ZEROED_ERROR,
            |error| {
                // Reset as a fresh CaiError reads: no code, an empty message (a message shorter
                // than a stale one ends at its own NUL, and no byte past it is read).
                error.code = 0;
                error.driver_result = 0;
                error.message[0] = 0;
                let status = fill(error);
                if status == CAI_OK {
                    Ok(())
                } else {
                    Err(refused(status, error))
                }
            },
        )
    })
}

/// Runs `describe` with a CaiArray for a fill to describe into (its head unspecified, its
/// extents those of an earlier fill, or zero): this thread's `FILL_ARRAY` where it is free,
/// else one on the stack, zeroed. Nothing may keep a pointer into the array past `describe`.
pub fn with_fill_array<R>(describe: impl FnOnce(&mut CaiArray) -> R) -> R {
    FILL_ARRAY.with(|scratch| scratch.lend(CaiArray::zeroed, describe))
}
