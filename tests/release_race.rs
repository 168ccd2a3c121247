//! cai_release raced on one array from many threads runs the callback exactly once per array
//! (the callback is taken by an atomic swap), and cai_move leaves exactly one owner.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Barrier;

use cai::*;

static RELEASES: AtomicUsize = AtomicUsize::new(0);
static MOVED_RELEASES: AtomicUsize = AtomicUsize::new(0);

unsafe extern "C" fn count(_array: *mut CaiArray) {
    RELEASES.fetch_add(1, Ordering::SeqCst);
}

unsafe extern "C" fn count_moved(_array: *mut CaiArray) {
    MOVED_RELEASES.fetch_add(1, Ordering::SeqCst);
}

struct Shared(*mut CaiArray);
// SAFETY: the threads only call cai_release on it, which is safe to race with itself.
unsafe impl Send for Shared {}
// SAFETY: as for Send.
unsafe impl Sync for Shared {}

impl Shared {
    fn ptr(&self) -> *mut CaiArray {
        self.0
    }
}

#[test]
fn racing_releases_run_the_callback_exactly_once() {
    const ROUNDS: usize = 500;
    const THREADS: usize = 8;
    for round in 0..ROUNDS {
        let mut array = CaiArray { release: Some(count), ..CaiArray::zeroed() };
        let shared = Shared(&mut array);
        let start = Barrier::new(THREADS);
        std::thread::scope(|scope| {
            for _ in 0..THREADS {
                scope.spawn(|| {
                    start.wait();
                    // SAFETY: the array is live, and only cai_release calls touch it meanwhile.
                    assert_eq!(unsafe { cai_release(shared.ptr(), std::ptr::null_mut()) }, 0);
                });
            }
        });
        assert_eq!(RELEASES.load(Ordering::SeqCst), round + 1, "round {round}");
        assert!(array.release.is_none());
    }
}

#[test]
fn a_moved_array_has_one_owner() {
    let mut src = CaiArray { release: Some(count_moved), version: 3, ..CaiArray::zeroed() };
    let mut dst = CaiArray::zeroed();
    // SAFETY: the array is live, and only cai_release calls touch it meanwhile.
    assert_eq!(unsafe { cai_move(&mut dst, &mut src, std::ptr::null_mut()) }, 0);
    assert!(src.release.is_none() && dst.release.is_some() && dst.version == 3);
    // SAFETY: the array is live, and only cai_release calls touch it meanwhile.
    assert_eq!(unsafe { cai_release(&mut src, std::ptr::null_mut()) }, 0);
    assert_eq!(MOVED_RELEASES.load(Ordering::SeqCst), 0, "the moved-from array owns nothing");
    // SAFETY: the array is live, and only cai_release calls touch it meanwhile.
    assert_eq!(unsafe { cai_release(&mut dst, std::ptr::null_mut()) }, 0);
    // SAFETY: the array is live, and only cai_release calls touch it meanwhile.
    assert_eq!(unsafe { cai_release(&mut dst, std::ptr::null_mut()) }, 0);
    assert_eq!(MOVED_RELEASES.load(Ordering::SeqCst), 1);
}
