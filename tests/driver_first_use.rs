//! The driver's first use raced from many threads, on a driver without cuGetProcAddress (fake
//! CUDA driver, a test double): loaded once, entry points found through dlsym.

mod common;

use cai::*;
use common::fake_driver::fake;

#[test]
fn first_use_from_many_threads_loads_once_through_dlsym() {
    std::env::set_var("FAKE_CUDA_NO_PROC_ADDRESS", "1");
    let f = fake();
    let barrier = std::sync::Arc::new(std::sync::Barrier::new(16));
    let threads: Vec<_> = (0..16)
        .map(|_| {
            let barrier = barrier.clone();
            std::thread::spawn(move || {
                barrier.wait();
                let mut version = 0;
                // SAFETY: every pointer is NULL or points to a live value of the type the function takes.
                (unsafe { cai_driver_status(&mut version, std::ptr::null_mut()) }, version)
            })
        })
        .collect();
    for t in threads {
        assert_eq!(t.join().unwrap(), (CAI_OK, 12040));
    }
    assert_eq!(f.proc_address_lookups(), 0, "cuGetProcAddress found nothing; dlsym did the work");
}
