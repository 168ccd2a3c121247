//! cai_validate allocates nothing on success, also for a structured type with up to 256 named
//! fields (pure; no driver). Counted per thread by a global allocator wrapping the system's,
//! so that the tests beside it do not add to the count.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use cai::*;

struct Counting;

thread_local! {
    static ALLOCATIONS: Cell<usize> = const { Cell::new(0) };
}

fn allocations() -> usize {
    ALLOCATIONS.with(Cell::get)
}

// SAFETY: every call is forwarded to the system allocator; counting adds no allocation.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.with(|count| count.set(count.get() + 1));
        System.alloc(layout)
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout)
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn structured(fields: &[CaiField]) -> CaiArray {
    let mut a = CaiArray::zeroed();
    a.version = 3;
    a.ndim = 1;
    a.shape[0] = 1000;
    a.set_typestr(&format!("|V{}", fields.len() * 4));
    a.data = 0x10000;
    a.descr = fields.as_ptr();
    a.descr_count = fields.len() as u32;
    a
}

#[test]
fn validating_arrays_and_descrs_up_to_256_fields_allocates_nothing() {
    for count in [1, 2, 16, 17, 100, 256] {
        let fields: Vec<CaiField> =
            (0..count).map(|i| CaiField::new(&format!("field_{i}"), "<f4", 4 * i as u64).unwrap()).collect();
        let a = structured(&fields);
        // SAFETY: every pointer is NULL or points to a live value of the type the function takes.
        unsafe { cai_validate(&a, std::ptr::null_mut()) }; // what the process sets up once is not counted
        let before = allocations();
        // SAFETY: every pointer is NULL or points to a live value of the type the function takes.
        let status = unsafe { cai_validate(&a, std::ptr::null_mut()) };
        let allocated = allocations() - before;
        assert_eq!(status, CAI_OK, "{count} fields");
        assert_eq!(allocated, 0, "{count} fields: {allocated} allocations");
    }
}

#[test]
fn a_failing_validate_allocates_its_message_so_the_counter_sees_allocations() {
    // The control: the counter is live in this binary (a refused array formats its message).
    let fields = [CaiField::new("x", "<f4", 0).unwrap(), CaiField::new("x", "<f4", 4).unwrap()];
    let a = structured(&fields);
    let before = allocations();
    // SAFETY: every pointer is NULL or points to a live value of the type the function takes.
    assert_eq!(unsafe { cai_validate(&a, std::ptr::null_mut()) }, CAI_ERROR_INVALID_DESCR);
    assert!(allocations() > before);
}
