//! Arrays cross threads, as a crate depending on `cai` uses them: an `Array` moved into a
//! `std::thread::spawn` closure (and released on that thread), shared through an `Arc`, viewed
//! from scoped threads; a DLPack tensor moved to the thread that deletes it. Before `Array`
//! was `Send` and `Sync` this file did not compile.

use std::sync::{Arc, Mutex};
use std::thread::{self, ThreadId};

use cai::{Array, CaiDLDevice, CAI_DL_CUDA};

const DATA: u64 = 0x7f00_0000_1000;

/// An array whose release writes the id of the thread it ran on into `log`.
fn logged(log: &Arc<Mutex<Vec<ThreadId>>>) -> Array {
    let log = Arc::clone(log);
    Array::builder("<f4", &[4, 2], DATA)
        .on_release(move || log.lock().unwrap().push(thread::current().id()))
        .build()
        .unwrap()
}

#[test]
fn an_array_moved_into_a_spawned_thread_is_released_there() {
    let log = Arc::new(Mutex::new(Vec::new()));
    let array = logged(&log);
    let spawned = thread::spawn(move || {
        assert_eq!(array.layout().unwrap().nbytes, 32);
        drop(array);
        thread::current().id()
    });
    let released_on = spawned.join().unwrap();
    assert_eq!(*log.lock().unwrap(), [released_on]);
    assert_ne!(released_on, thread::current().id());
}

#[test]
fn an_array_shared_by_threads_is_read_by_all_and_released_once_by_the_last() {
    let log = Arc::new(Mutex::new(Vec::new()));
    let shared = Arc::new(logged(&log));
    let readers: Vec<_> = (0..4)
        .map(|_| {
            let array = Arc::clone(&shared);
            thread::spawn(move || (array.shape().to_vec(), array.layout().unwrap().c_contiguous))
        })
        .collect();
    for reader in readers {
        assert_eq!(reader.join().unwrap(), (vec![4, 2], true));
    }
    assert!(log.lock().unwrap().is_empty(), "released while shared");
    drop(shared);
    assert_eq!(*log.lock().unwrap(), [thread::current().id()]);
}

#[test]
fn views_of_one_array_are_read_from_scoped_threads() {
    let array = Array::builder("<i2", &[3, 5], DATA).build().unwrap();
    let view = array.view();
    let element_counts: Vec<u64> = thread::scope(|scope| {
        let handles: Vec<_> =
            (0..3).map(|_| scope.spawn(move || view.layout().unwrap().element_count)).collect();
        handles.into_iter().map(|handle| handle.join().unwrap()).collect()
    });
    assert_eq!(element_counts, [15, 15, 15]);
}

#[test]
fn a_dlpack_tensor_moved_to_another_thread_runs_the_release_there() {
    let log = Arc::new(Mutex::new(Vec::new()));
    let device = CaiDLDevice { device_type: CAI_DL_CUDA, device_id: 0 };
    let tensor = logged(&log).into_dlpack(Some(device)).unwrap();
    let deleted_on = thread::spawn(move || {
        drop(tensor);
        thread::current().id()
    })
    .join()
    .unwrap();
    assert_eq!(*log.lock().unwrap(), [deleted_on]);
}
