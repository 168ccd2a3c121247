//! Runs one driver path of libcai in a loop against the fake CUDA driver (a test double), for
//! instruction counts under callgrind: benchmarks/sync_instructions.sh runs each case and
//! prints instructions per call. The cases are the host cost of the call path: the import with
//! a pointer query and nothing to sync (a per-argument row), and the syncs that ask whether
//! their streams are capturing a CUDA graph (stream-ordered: two questions; blocking: one).
//! `log-reset` is what every sync case also does per call (the fake's call log cleared), to
//! subtract.
//!
//! sync_instructions (import-no-sync|sync-stream-ordered|sync-blocking|log-reset) CALLS

#[path = "../tests/common/fake_driver.rs"]
#[allow(dead_code)]
mod fake_driver;
#[allow(dead_code)]
mod support;

use std::hint::black_box;
use std::ptr::null_mut;

use cai::*;

fn main() {
    let args: Vec<String> = std::env::args().filter(|a| a != "--bench").collect();
    let [_, case, calls] = &args[..] else {
        panic!("usage: sync_instructions (import-no-sync|sync-stream-ordered|sync-blocking|log-reset) CALLS")
    };
    let calls: u64 = calls.parse().expect("CALLS is a number");
    let f = fake_driver::fake();
    f.begin(0);
    let data = f.alloc(64 * 128 * 256 * 4, fake_driver::MEMORY_DEVICE, 0, 0);
    let (producer, consumer) = (f.stream(0), f.stream(0));
    let mut a = support::array(&[64, 128, 256], "<f4", data);
    a.stream = producer;
    let no_sync = CaiImportOptions {
        consumer_stream: consumer,
        pointer_check: CAI_POINTER_CHECK_ALWAYS,
        sync_mode: CAI_SYNC_NONE,
        ..Default::default()
    };
    let stream_ordered = CaiSyncOptions {
        consumer_stream: consumer,
        sync_mode: CAI_SYNC_STREAM_ORDERED,
        ..Default::default()
    };
    let blocking = CaiSyncOptions { sync_mode: CAI_SYNC_BLOCKING, ..Default::default() };
    let mut info = CaiPointerInfo::default();
    // The driver loaded (and the event pool filled) before the counted calls.
    // SAFETY: every pointer is NULL or points to a live value of the type the function takes.
    assert_eq!(unsafe { cai_sync(&a, &stream_ordered, null_mut()) }, CAI_OK);
    f.begin(0);
    let mut failures = 0;
    for _ in 0..calls {
        failures += match case.as_str() {
            // SAFETY: every pointer is NULL or points to a live value of the type the function takes.
            "import-no-sync" => unsafe { cai_import(black_box(&a), &no_sync, &mut info, null_mut()) },
            // SAFETY: as above.
            "sync-stream-ordered" => unsafe { cai_sync(black_box(&a), &stream_ordered, null_mut()) },
            // SAFETY: as above.
            "sync-blocking" => unsafe { cai_sync(black_box(&a), &blocking, null_mut()) },
            "log-reset" => 0,
            other => panic!("unknown case {other}"),
        };
        if case != "import-no-sync" {
            f.begin(0); // keeps the fake's per-thread call log from filling up
        }
    }
    assert_eq!(failures, 0);
}
