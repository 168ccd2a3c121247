//! The device half (pointer checks, sync, export joins) against the fake CUDA driver, a test
//! double: docs/conformance.md rows 24-27, 37, 43-47 and failure injection. The GPU suite
//! (scripts/gpu-check.sh) runs the same paths on a real driver.

mod common;

use std::ptr::null_mut;

use cai::binding::EVENT_POOL_CAPACITY;
use cai::*;

use common::fake_driver::*;
use common::*;

fn device_array(f: &Fake, shape: &[i64], typestr: &str, device: i32) -> CaiArray {
    let mut a = array(shape, typestr);
    a.data = f.alloc(4096, MEMORY_DEVICE, device, 0);
    a
}

fn import_with(a: &CaiArray, options: CaiImportOptions) -> (i32, String, CaiPointerInfo) {
    let mut info = CaiPointerInfo::default();
    let mut e = blank_error();
    // SAFETY: every pointer is NULL or points to a live value of the type the function takes.
    let status = unsafe { cai_import(a, &options, &mut info, &mut e) };
    (status, if status == CAI_OK { String::new() } else { e.message_str() }, info)
}

fn import_default(a: &CaiArray) -> (i32, String, CaiPointerInfo) {
    import_with(a, CaiImportOptions::default())
}

/// A device-0 array on a new producer stream, and options naming a new consumer stream:
/// (array, options, producer, consumer), device 0 current.
fn array_on_a_producer_stream(f: &Fake) -> (CaiArray, CaiImportOptions, u64, u64) {
    f.begin(0);
    let (producer, consumer) = (f.stream(0), f.stream(0));
    let mut a = device_array(f, &[4], "<f4", 0);
    a.stream = producer;
    (a, CaiImportOptions { consumer_stream: consumer, ..Default::default() }, producer, consumer)
}

fn lines(log: &str, prefix: &str) -> Vec<String> {
    log.lines().filter(|l| l.starts_with(prefix)).map(String::from).collect()
}

#[test]
fn fake_driver_loads_through_cuda_driver_env_and_reports_its_version() {
    let _ = fake();
    let mut version = 0;
    // SAFETY: every pointer is NULL or points to a live value of the type the function takes.
    assert_eq!(unsafe { cai_driver_status(&mut version, null_mut()) }, CAI_OK);
    assert_eq!(version, 12040);
    assert!(fake().proc_address_lookups() >= 15, "entry points came through cuGetProcAddress");
}

#[test]
fn row_01_import_of_a_device_array_checks_the_pointer_and_does_not_sync() {
    let f = fake();
    f.begin(0);
    let a = device_array(f, &[4], "<f4", 0);
    let (status, message, info) = import_default(&a);
    assert_eq!(status, CAI_OK, "{message}");
    assert_eq!((info.checked, info.memory_type, info.device_ordinal), (1, MEMORY_DEVICE, 0));
    assert_eq!((info.device_pointer, info.allocation_base, info.allocation_size), (a.data, a.data, 4096));
    let log = f.log();
    assert_eq!(lines(&log, "cuPointerGetAttributes").len(), 1, "{log}");
    assert!(lines(&log, "cuStream").is_empty() && lines(&log, "cuEvent").is_empty(), "{log}");
}

#[test]
fn row_20_21_zero_size_arrays_never_query_the_driver() {
    let f = fake();
    f.begin(0);
    let mut a = array(&[0, 4], "<f4");
    a.data = 0;
    assert_eq!(import_default(&a).0, CAI_OK);
    a.data = 0xdead_0000;
    let (status, _, info) = import_default(&a);
    assert_eq!((status, info.checked), (CAI_OK, 0));
    assert_eq!(f.log(), "", "no driver call at all");
}

#[test]
fn row_24_unregistered_host_memory_is_not_a_device_pointer() {
    let f = fake();
    f.begin(0);
    let host = [0u8; 64];
    let mut a = array(&[4], "<f4");
    a.data = host.as_ptr() as u64;
    let (status, message, _) = import_default(&a);
    assert_eq!(status, CAI_ERROR_NOT_DEVICE_POINTER);
    assert!(message.contains(&format!("{:#x}", a.data)), "{message}");
    let mut unmapped = array(&[4], "<f4");
    unmapped.data = f.alloc(64, MEMORY_HOST, 0, FLAG_UNMAPPED);
    let (status, message, _) = import_default(&unmapped);
    assert_eq!(status, CAI_ERROR_NOT_DEVICE_POINTER);
    assert!(message.contains("not mapped"), "{message}");
}

#[test]
fn allow_host_accepts_host_memory_the_device_cannot_reach_on_the_fake_driver() {
    let f = fake();
    f.begin(0);
    let host = [0u8; 64];
    let allow_host = CaiImportOptions { allow_host: 1, ..CaiImportOptions::default() };
    let mut pageable = array(&[4], "<f4");
    pageable.data = host.as_ptr() as u64;
    let (status, message, info) = import_with(&pageable, allow_host);
    assert_eq!(status, CAI_OK, "{message}");
    assert_eq!((info.checked, info.memory_type, info.device_pointer, info.allocation_size), (1, 0, 0, 0));
    let mut unmapped = array(&[4], "<f4");
    unmapped.data = f.alloc(64, MEMORY_HOST, 0, FLAG_UNMAPPED);
    let (status, message, info) = import_with(&unmapped, allow_host);
    assert_eq!((status, info.memory_type), (CAI_OK, MEMORY_HOST), "{message}");
    // Device memory is still bounded by its allocation.
    let mut beyond = device_array(f, &[2048], "<f4", 0);
    beyond.data += 16;
    let (status, _, _) = import_with(&beyond, allow_host);
    assert_eq!(status, CAI_ERROR_OUT_OF_BOUNDS);
    let (status, message, _) = import_with(&pageable, CaiImportOptions { allow_host: 2, ..allow_host });
    assert_eq!(status, CAI_ERROR_INVALID_ARGUMENT);
    assert!(message.contains("allow_host"), "{message}");
}

#[test]
fn row_25_managed_and_pinned_mapped_memory_are_accepted_and_reported() {
    let f = fake();
    f.begin(0);
    let mut managed = array(&[4], "<f4");
    managed.data = f.alloc(64, MEMORY_UNIFIED, 0, FLAG_MANAGED);
    let (status, _, info) = import_default(&managed);
    assert_eq!((status, info.memory_type, info.is_managed), (CAI_OK, MEMORY_UNIFIED, 1));
    let mut pinned = array(&[4], "<f4");
    pinned.data = f.alloc(64, MEMORY_HOST, 0, 0);
    let (status, _, info) = import_default(&pinned);
    assert_eq!((status, info.memory_type, info.is_managed), (CAI_OK, MEMORY_HOST, 0));
}

#[test]
fn row_26_extent_past_the_allocation_is_out_of_bounds() {
    let f = fake();
    f.begin(0);
    let mut a = array(&[17], "<f4");
    a.data = f.alloc(64, MEMORY_DEVICE, 0, 0);
    let (status, message, _) = import_default(&a);
    assert_eq!(status, CAI_ERROR_OUT_OF_BOUNDS);
    assert!(message.contains("outside its allocation"), "{message}");
    a.shape[0] = 16;
    assert_eq!(import_default(&a).0, CAI_OK, "exactly the allocation is fine");
    // Negative stride reaching below the allocation.
    let mut flipped = with_strides(array(&[4], "<f4"), &[-4]);
    flipped.data = f.alloc(64, MEMORY_DEVICE, 0, 0) + 8;
    assert_eq!(import_default(&flipped).0, CAI_ERROR_OUT_OF_BOUNDS);
    flipped.data += 4;
    assert_eq!(import_default(&flipped).0, CAI_OK);
}

#[test]
fn row_26_bounds_come_with_the_pointer_attributes_in_one_driver_call_fake_driver() {
    let f = fake();
    f.begin(0);
    let a = device_array(f, &[4], "<f4", 0);
    let (status, message, info) = import_default(&a);
    assert_eq!(status, CAI_OK, "{message}");
    assert_eq!((info.allocation_base, info.allocation_size), (a.data, 4096));
    let log = f.log();
    assert_eq!(log.matches("cuPointerGetAttributes").count(), 1, "{log}");
    assert!(!log.contains("cuMemGetAddressRange"), "{log}");
    // The bound is the range the attributes gave: one element past it is refused.
    let mut past = a;
    past.shape[0] = 1025;
    assert_eq!(import_default(&past).0, CAI_ERROR_OUT_OF_BOUNDS);
}

#[test]
fn row_26_bounds_come_from_get_address_range_where_the_range_attributes_give_none_fake_driver() {
    let f = fake();
    f.begin(0);
    let mut a = array(&[4], "<f4");
    a.data = f.alloc(64, MEMORY_DEVICE, 0, FLAG_NO_RANGE_ATTRIBUTES);
    let (status, message, info) = import_default(&a);
    assert_eq!(status, CAI_OK, "{message}");
    assert_eq!((info.allocation_base, info.allocation_size), (a.data, 64));
    assert!(f.log().contains("cuMemGetAddressRange"), "{}", f.log());
    a.shape[0] = 17;
    assert_eq!(import_default(&a).0, CAI_ERROR_OUT_OF_BOUNDS);
}

#[test]
fn row_26_a_driver_refusing_the_range_attributes_is_asked_again_without_them_fake_driver() {
    let f = fake();
    f.begin(0);
    f.refuse_range_attributes(true);
    let a = device_array(f, &[4], "<f4", 0);
    let (status, message, info) = import_default(&a);
    let log = f.log();
    f.refuse_range_attributes(false);
    assert_eq!(status, CAI_OK, "{message}");
    assert_eq!((info.allocation_base, info.allocation_size, info.device_ordinal), (a.data, 4096, 0));
    assert_eq!(log.matches("cuPointerGetAttributes").count(), 2, "{log}");
    assert!(log.contains("cuMemGetAddressRange"), "{log}");
}

#[test]
fn row_27_pointer_on_device_1_reports_ordinal_1_from_either_context() {
    let f = fake();
    for current in [0, 1] {
        f.begin(current);
        let a = device_array(f, &[4], "<f4", 1);
        let (status, _, info) = import_default(&a);
        assert_eq!((status, info.device_ordinal), (CAI_OK, 1));
    }
}

#[test]
fn a_named_device_that_is_not_the_pointers_is_refused_before_the_sync_fake_driver() {
    use cai::binding::import::import_described;
    let f = fake();
    let (a, options, _, _) = array_on_a_producer_stream(f);
    let named = |device_id| CaiDLDevice { device_type: CAI_DL_CUDA, device_id };
    f.begin(0);
    let refused = import_described(&a, None, &options, Some(named(1))).unwrap_err();
    assert_eq!(refused.status, Status::NotDevicePointer);
    assert!(
        refused.message.contains("CUDA device 1") && refused.message.contains("memory of device 0"),
        "{}",
        refused.message
    );
    assert!(lines(&f.log(), "cuEventRecord").is_empty(), "refused before the sync: {}", f.log());
    let imported = import_described(&a, None, &options, Some(named(0))).unwrap();
    assert_eq!(imported.info.device_ordinal, 0);
    assert_eq!(lines(&f.log(), "cuStreamWaitEvent").len(), 1, "then synchronized: {}", f.log());
    let unchecked = CaiImportOptions { pointer_check: CAI_POINTER_CHECK_NEVER, ..options };
    assert!(
        import_described(&a, None, &unchecked, Some(named(1))).is_ok(),
        "no pointer asked: nothing to contradict"
    );
    let host = CaiDLDevice { device_type: CAI_DL_CUDA_HOST, device_id: 3 };
    assert!(
        import_described(&a, None, &options, Some(host)).is_ok(),
        "only kDLCUDA names a device of device memory"
    );
}

#[test]
fn cai_import_of_a_taken_tensor_compares_its_device_with_the_pointers_fake_driver() {
    let f = fake();
    f.begin(0);
    for (named, expected) in [(1, CAI_ERROR_NOT_DEVICE_POINTER), (0, CAI_OK)] {
        for legacy in [false, true] {
            let mut a = device_array(f, &[4], "<f4", 0);
            let device = CaiDLDevice { device_type: CAI_DL_CUDA, device_id: named };
            let (mut taken, mut e) = (CaiArray::zeroed(), blank_error());
            // SAFETY: live arrays and a tensor handed from the export to the take; the taken
            // array is released once.
            unsafe {
                let status = if legacy {
                    let mut tensor = null_mut();
                    assert_eq!(cai_to_dlpack_legacy(&mut a, &device, &mut tensor, &mut e), CAI_OK);
                    cai_from_dlpack_legacy(tensor, std::ptr::null(), &mut taken, &mut e)
                } else {
                    let mut tensor = null_mut();
                    assert_eq!(cai_to_dlpack(&mut a, &device, &mut tensor, &mut e), CAI_OK);
                    cai_from_dlpack(tensor, std::ptr::null(), &mut taken, &mut e)
                };
                assert_eq!(status, CAI_OK, "{}", e.message_str());
                let (status, message, _) = import_default(&taken);
                assert_eq!(status, expected, "legacy {legacy}: {message}");
                if status != CAI_OK {
                    assert!(
                        message.contains("CUDA device 1") && message.contains("memory of device 0"),
                        "{message}"
                    );
                }
                assert_eq!(cai_release(&mut taken, &mut e), CAI_OK);
            }
        }
    }
}

#[test]
fn row_27_sync_on_device_1_stream_runs_in_its_context_and_restores_the_current_one() {
    let f = fake();
    f.begin(0);
    let producer = f.stream(1);
    let consumer = f.stream(0);
    let mut a = device_array(f, &[4], "<f4", 1);
    a.stream = producer;
    let (status, message, _) =
        import_with(&a, CaiImportOptions { consumer_stream: consumer, ..Default::default() });
    assert_eq!(status, CAI_OK, "{message}");
    let log = f.log();
    let (p, c) = (f.stream_name(producer), f.stream_name(consumer));
    assert!(log.contains("cuCtxPushCurrent C1"), "{log}");
    assert!(lines(&log, "cuEventRecord").iter().any(|l| l.ends_with(&format!(" {p}"))), "{log}");
    assert!(
        lines(&log, "cuStreamWaitEvent").iter().any(|l| l.starts_with(&format!("cuStreamWaitEvent {c} "))),
        "{log}"
    );
    assert_eq!(f.context_depth(), 1, "the pushed context was popped");
}

#[test]
fn row_37_writable_import_of_read_only_data_is_readonly() {
    let f = fake();
    f.begin(0);
    let mut a = device_array(f, &[4], "<f4", 0);
    a.readonly = 1;
    let (status, message, _) = import_with(&a, CaiImportOptions { writable: 1, ..Default::default() });
    assert_eq!(status, CAI_ERROR_READONLY);
    assert!(message.contains("read-only"), "{message}");
    assert_eq!(import_default(&a).0, CAI_OK, "reading read-only data is fine");
}

#[test]
fn row_29_native_only_import_rejects_big_endian() {
    let f = fake();
    f.begin(0);
    let a = device_array(f, &[4], ">i4", 0);
    assert_eq!(import_default(&a).0, CAI_OK);
    let (status, message, _) = import_with(&a, CaiImportOptions { native_only: 1, ..Default::default() });
    assert_eq!(status, CAI_ERROR_INVALID_TYPESTR);
    assert!(message.contains("'>'"), "{message}");
}

#[test]
fn row_43_stream_ordered_sync_records_on_the_producer_and_waits_on_the_consumer() {
    let f = fake();
    let (a, options, producer, consumer) = array_on_a_producer_stream(f);
    assert_eq!(import_with(&a, options).0, CAI_OK);
    let log = f.log();
    let record = lines(&log, "cuEventRecord");
    let wait = lines(&log, "cuStreamWaitEvent");
    assert_eq!((record.len(), wait.len()), (1, 1), "{log}");
    let event = record[0].split(' ').nth(1).unwrap().to_string();
    assert_eq!(record[0], format!("cuEventRecord {event} {}", f.stream_name(producer)));
    assert_eq!(wait[0], format!("cuStreamWaitEvent {} {event} flags=0", f.stream_name(consumer)));
    assert!(lines(&log, "cuStreamSynchronize").is_empty(), "the host is not blocked: {log}");
    assert!(
        log.lines().all(|l| !l.starts_with("cuEventCreate") || l.ends_with("flags=2")),
        "DISABLE_TIMING: {log}"
    );
}

#[test]
fn row_43_same_stream_needs_no_sync() {
    let f = fake();
    f.begin(0);
    let stream = f.stream(0);
    let mut a = device_array(f, &[4], "<f4", 0);
    a.stream = stream;
    assert_eq!(import_with(&a, CaiImportOptions { consumer_stream: stream, ..Default::default() }).0, CAI_OK);
    let log = f.log();
    assert!(lines(&log, "cuEvent").is_empty() && lines(&log, "cuStream").is_empty(), "{log}");
}

#[test]
fn row_44_blocking_sync_synchronizes_the_producer_stream() {
    let f = fake();
    f.begin(0);
    let producer = f.stream(0);
    let mut a = device_array(f, &[4], "<f4", 0);
    a.stream = producer;
    let consumer = f.stream(0);
    let options =
        CaiImportOptions { consumer_stream: consumer, sync_mode: CAI_SYNC_BLOCKING, ..Default::default() };
    assert_eq!(import_with(&a, options).0, CAI_OK);
    assert_eq!(
        lines(&f.log(), "cuStreamSynchronize"),
        vec![format!("cuStreamSynchronize {}", f.stream_name(producer))]
    );
    f.begin(0);
    assert_eq!(import_default(&a).0, CAI_OK, "no consumer stream: blocking");
    assert_eq!(lines(&f.log(), "cuStreamSynchronize").len(), 1);
}

#[test]
fn row_45_sync_none_makes_no_sync_call() {
    let f = fake();
    f.begin(0);
    let mut a = device_array(f, &[4], "<f4", 0);
    a.stream = f.stream(0);
    let options =
        CaiImportOptions { consumer_stream: f.stream(0), sync_mode: CAI_SYNC_NONE, ..Default::default() };
    assert_eq!(import_with(&a, options).0, CAI_OK);
    let log = f.log();
    assert!(lines(&log, "cuEvent").is_empty() && lines(&log, "cuStream").is_empty(), "{log}");
}

#[test]
fn row_03_a_version_2_stream_is_ignored_by_import() {
    let f = fake();
    f.begin(0);
    let mut a = device_array(f, &[4], "<f4", 0);
    a.version = 2;
    a.stream = f.stream(0);
    assert_eq!(import_default(&a).0, CAI_OK);
    assert!(lines(&f.log(), "cuStream").is_empty());
}

#[test]
fn row_42_default_stream_values_sync_as_legacy_and_per_thread_handles() {
    let f = fake();
    for (value, name) in [(CAI_STREAM_LEGACY, "legacy"), (CAI_STREAM_PER_THREAD, "per-thread")] {
        f.begin(0);
        let mut a = device_array(f, &[4], "<f4", 0);
        a.stream = value;
        assert_eq!(import_default(&a).0, CAI_OK);
        assert_eq!(lines(&f.log(), "cuStreamSynchronize"), vec![format!("cuStreamSynchronize {name}")]);
    }
}

#[test]
fn row_46_export_joins_work_on_several_streams_into_the_exported_one() {
    let f = fake();
    f.begin(0);
    let (s7, s9, s15, s3) = (f.stream(0), f.stream(0), f.stream(0), f.stream(0));
    let mut a = device_array(f, &[4], "<f4", 0);
    a.stream = s3;
    let work = [s7, s9, s15];
    let options =
        CaiExportOptions { work_streams: work.as_ptr(), work_stream_count: 3, ..Default::default() };
    // SAFETY: every pointer is NULL or points to a live value of the type the function takes.
    assert_eq!(unsafe { cai_export(&mut a, &options, null_mut()) }, CAI_OK);
    assert_eq!(a.stream, s3);
    let log = f.log();
    let records = lines(&log, "cuEventRecord");
    let waits = lines(&log, "cuStreamWaitEvent");
    assert_eq!((records.len(), waits.len()), (3, 3), "{log}");
    for (i, s) in work.iter().enumerate() {
        assert!(records[i].ends_with(&format!(" {}", f.stream_name(*s))), "{log}");
        assert!(waits[i].starts_with(&format!("cuStreamWaitEvent {} ", f.stream_name(s3))), "{log}");
    }
}

#[test]
fn row_47_export_from_the_null_stream_exports_1_or_2_never_0() {
    let f = fake();
    f.begin(0);
    let null_stream = [0u64];
    for (per_thread, expected) in [(0, CAI_STREAM_LEGACY), (1, CAI_STREAM_PER_THREAD)] {
        let mut a = device_array(f, &[4], "<f4", 0);
        let options = CaiExportOptions {
            work_streams: null_stream.as_ptr(),
            work_stream_count: 1,
            per_thread_default_stream: per_thread,
            ..Default::default()
        };
        // SAFETY: every pointer is NULL or points to a live value of the type the function takes.
        assert_eq!(unsafe { cai_export(&mut a, &options, null_mut()) }, CAI_OK);
        assert_eq!(a.stream, expected);
    }
}

#[test]
fn export_version_2_with_work_streams_blocks_on_them() {
    let f = fake();
    f.begin(0);
    let s = f.stream(0);
    let mut a = device_array(f, &[4], "<f4", 0);
    let work = [s];
    let options = CaiExportOptions {
        work_streams: work.as_ptr(),
        work_stream_count: 1,
        version: 2,
        ..Default::default()
    };
    // SAFETY: every pointer is NULL or points to a live value of the type the function takes.
    assert_eq!(unsafe { cai_export(&mut a, &options, null_mut()) }, CAI_OK);
    assert_eq!((a.version, a.stream), (2, 0));
    assert_eq!(
        lines(&f.log(), "cuStreamSynchronize"),
        vec![format!("cuStreamSynchronize {}", f.stream_name(s))]
    );
}

#[test]
fn export_checks_the_pointer_when_asked() {
    let f = fake();
    f.begin(0);
    let mut a = array(&[4], "<f4");
    let host = [0u8; 16];
    a.data = host.as_ptr() as u64;
    let options = CaiExportOptions { check_pointer: 1, ..Default::default() };
    let before = format!("{a:?}");
    // SAFETY: every pointer is NULL or points to a live value of the type the function takes.
    assert_eq!(unsafe { cai_export(&mut a, &options, null_mut()) }, CAI_ERROR_NOT_DEVICE_POINTER);
    assert_eq!(format!("{a:?}"), before, "unchanged on failure");
    // SAFETY: every pointer is NULL or points to a live value of the type the function takes.
    assert_eq!(unsafe { cai_export(&mut a, std::ptr::null(), null_mut()) }, CAI_OK, "unchecked by default");
}

#[test]
fn unknown_cuda_results_are_named_by_number() {
    let f = fake();
    f.begin(0);
    let a = device_array(f, &[4], "<f4", 0);
    f.fail("cuPointerGetAttributes", 12345);
    let (status, message, _) = import_default(&a);
    assert_eq!(status, CAI_ERROR_DRIVER);
    assert!(message.contains("CUresult 12345"), "{message}");
}

#[test]
fn cai_sync_and_pointer_info_work_on_their_own() {
    let f = fake();
    f.begin(0);
    let mut a = device_array(f, &[4], "<f4", 0);
    a.stream = f.stream(0);
    let consumer = f.stream(0);
    let options = CaiSyncOptions { consumer_stream: consumer, ..Default::default() };
    // SAFETY: every pointer is NULL or points to a live value of the type the function takes.
    assert_eq!(unsafe { cai_sync(&a, &options, null_mut()) }, CAI_OK);
    assert_eq!(lines(&f.log(), "cuStreamWaitEvent").len(), 1);
    assert_eq!(
        // SAFETY: every pointer is NULL or points to a live value of the type the function takes.
        unsafe { cai_sync(&a, &CaiSyncOptions { sync_mode: 9, ..options }, null_mut()) },
        CAI_ERROR_INVALID_ARGUMENT
    );
    let reserved = CaiSyncOptions { reserved: [0, 0, 1, 0, 0], ..options };
    // SAFETY: every pointer is NULL or points to a live value of the type the function takes.
    assert_eq!(unsafe { cai_sync(&a, &reserved, null_mut()) }, CAI_ERROR_INVALID_ARGUMENT);
    f.begin(0);
    // NULL options: no consumer stream, the default mode: the host waits for the producer.
    // SAFETY: every pointer is NULL or points to a live value of the type the function takes.
    assert_eq!(unsafe { cai_sync(&a, std::ptr::null(), null_mut()) }, CAI_OK);
    assert!(f.log().contains("cuStreamSynchronize") || f.log().contains("cuEventSynchronize"), "{}", f.log());
    let mut info = CaiPointerInfo::default();
    // SAFETY: every pointer is NULL or points to a live value of the type the function takes.
    assert_eq!(unsafe { cai_pointer_info(a.data, &mut info, null_mut()) }, CAI_OK);
    assert_eq!(info.allocation_size, 4096);
    // SAFETY: every pointer is NULL or points to a live value of the type the function takes.
    assert_eq!(unsafe { cai_pointer_info(a.data, null_mut(), null_mut()) }, CAI_ERROR_NULL_ARGUMENT);
}

#[test]
fn bad_import_options_are_invalid_argument() {
    let f = fake();
    f.begin(0);
    let a = device_array(f, &[4], "<f4", 0);
    for options in [
        CaiImportOptions { sync_mode: 7, ..Default::default() },
        CaiImportOptions { pointer_check: 3, ..Default::default() },
        CaiImportOptions { writable: 2, ..Default::default() },
        CaiImportOptions { reserved: [0, 1, 0, 0, 0], ..Default::default() },
    ] {
        assert_eq!(import_with(&a, options).0, CAI_ERROR_INVALID_ARGUMENT, "{options:?}");
    }
}

static CONCURRENT_RELEASES: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

unsafe extern "C" fn count_concurrent_release(_: *mut CaiArray) {
    CONCURRENT_RELEASES.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
}

#[test]
fn many_threads_import_sync_and_release_at_once_and_the_event_pool_stays_bounded() {
    let f = fake();
    let threads: Vec<_> = (0..8)
        .map(|t| {
            std::thread::spawn(move || {
                let f = fake();
                let device = t % 2;
                f.begin(device);
                let mut a = device_array(f, &[4], "<f4", device);
                a.stream = f.stream(device);
                let options = CaiImportOptions { consumer_stream: f.stream(device), ..Default::default() };
                for _ in 0..500 {
                    let mut owned = a;
                    owned.release = Some(count_concurrent_release);
                    let (status, message, _) = import_with(&owned, options);
                    assert_eq!(status, CAI_OK, "{message}");
                    // SAFETY: every pointer is NULL or points to a live value of the type the function takes.
                    assert_eq!(unsafe { cai_release(&mut owned, null_mut()) }, CAI_OK);
                    assert_eq!(
                        // SAFETY: every pointer is NULL or points to a live value of the type the function takes.
                        unsafe { cai_release(&mut owned, null_mut()) },
                        CAI_OK,
                        "a second release is a no-op"
                    );
                    f.begin(device);
                }
            })
        })
        .collect();
    for t in threads {
        t.join().expect("no thread failed");
    }
    assert_eq!(
        CONCURRENT_RELEASES.load(std::sync::atomic::Ordering::SeqCst),
        8 * 500,
        "each array released once"
    );
    // 4,000 stream-ordered imports: without reuse there would be 4,000 live events. Other
    // tests run alongside, so allow one in-flight event per test thread beyond the pool.
    assert!((f.live_events() as usize) <= EVENT_POOL_CAPACITY + 64, "events are reused, not leaked");
}
