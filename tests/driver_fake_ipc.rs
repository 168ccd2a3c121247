//! Arrays across processes on the fake CUDA driver (a test double whose device memory lies in a
//! memfd other processes map): `cai_ipc_export` in this process, `cai_ipc_open` in a child (this
//! test binary run again with CAI_IPC_ROLE set, which runs only `ipc_child_role_fake_driver`),
//! the bytes seen and written both ways, a strided view at its offset, the exporter's pending
//! work ordering the importer, and every refusal (docs/conformance.md rows 99 and 100).

mod common;

use std::io::Write;
use std::process::{Child, Command, Stdio};
use std::ptr::null_mut;
use std::time::Duration;

use cai::*;
use common::fake_driver::*;
use common::*;

const ROLE: &str = "CAI_IPC_ROLE";

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(text: &str) -> Vec<u8> {
    (0..text.len()).step_by(2).map(|i| u8::from_str_radix(&text[i..i + 2], 16).unwrap()).collect()
}

fn descriptor_from_hex(text: &str) -> CaiIpcDescriptor {
    let bytes: [u8; CAI_IPC_DESCRIPTOR_SIZE] = unhex(text).try_into().unwrap();
    CaiIpcDescriptor::from_bytes(&bytes)
}

fn export(a: &CaiArray) -> (i32, CaiIpcDescriptor, String) {
    let mut out = CaiIpcDescriptor::zeroed();
    let mut e = blank_error();
    // SAFETY: a live array, a writable descriptor and error.
    let status = unsafe { cai_ipc_export(a, &mut out, &mut e) };
    (status, out, e.message_str())
}

fn exported(a: &CaiArray) -> CaiIpcDescriptor {
    let (status, desc, message) = export(a);
    assert_eq!(status, CAI_OK, "{message}");
    desc
}

fn open(desc: &CaiIpcDescriptor, options: &CaiImportOptions) -> (i32, CaiArray, String) {
    let mut out = CaiArray::zeroed();
    let mut e = blank_error();
    // SAFETY: a readable descriptor and options, a writable array and error.
    let status = unsafe { cai_ipc_open(desc, options, &mut out, &mut e) };
    (status, out, e.message_str())
}

/// A device allocation of `words` u32s, filled with 0, 1, 2, ...
fn device_words(f: &Fake, words: usize) -> u64 {
    let base = f.alloc((words * 4) as u64, MEMORY_DEVICE, 0, 0);
    for i in 0..words {
        // SAFETY: the fake's device memory is this process's memory, `words` u32s long.
        unsafe { *(base as usize as *mut u32).add(i) = i as u32 };
    }
    base
}

fn word(address: u64) -> u32 {
    // SAFETY: an address inside a live fake allocation, 4-byte aligned.
    unsafe { *(address as usize as *const u32) }
}

/// The addresses of a u32 array's elements, in C order (ndim 1 or 2).
fn element_addresses(a: &CaiArray) -> Vec<u64> {
    let ndim = a.ndim as usize;
    let shape: Vec<i64> = a.shape[..ndim].to_vec();
    let strides: Vec<i64> = if a.strides_given == 1 {
        a.strides[..ndim].to_vec()
    } else {
        match ndim {
            1 => vec![4],
            _ => vec![shape[1] * 4, 4],
        }
    };
    let mut out = Vec::new();
    match ndim {
        1 => (0..shape[0]).for_each(|i| out.push((a.data as i64 + i * strides[0]) as u64)),
        _ => {
            for i in 0..shape[0] {
                for j in 0..shape[1] {
                    out.push((a.data as i64 + i * strides[0] + j * strides[1]) as u64);
                }
            }
        }
    }
    out
}

/// Runs this test binary as a child in `role`, with `env`; its stdout lines of the child's
/// answers (`key=value`).
fn spawn(role: &str, env: &[(&str, String)]) -> Child {
    let built = build_once();
    let mut command = Command::new(std::env::current_exe().unwrap());
    command
        .args(["ipc_child_role_fake_driver", "--exact", "--nocapture", "--test-threads=1"])
        .env(ROLE, role)
        .env(BUILT_ENV, built)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    for (key, value) in env {
        command.env(key, value);
    }
    command.spawn().expect("spawn the child")
}

type Answers = std::collections::BTreeMap<String, String>;

/// The child's answer of one line, if it is one (the harness's "test ipc_child_role_fake_driver
/// ... " may begin the first line).
fn answer(line: &str) -> Option<(String, String)> {
    let at = line.find("IPC-CHILD ")?;
    let (key, value) = line[at + "IPC-CHILD ".len()..].split_once('=')?;
    Some((key.to_string(), value.trim_end().to_string()))
}

/// Reads the child's answers, a byte at a time (nothing read ahead is lost), until it gives
/// `key` (the child still running) or ends.
fn answers_until(child: &mut Child, key: &str, into: &mut Answers) {
    use std::io::Read;
    let stdout = child.stdout.as_mut().unwrap();
    let mut line = Vec::new();
    let mut byte = [0u8; 1];
    while stdout.read(&mut byte).unwrap() == 1 {
        if byte[0] != b'\n' {
            line.push(byte[0]);
            continue;
        }
        let text = String::from_utf8_lossy(&line).into_owned();
        line.clear();
        if let Some((k, v)) = answer(&text) {
            let found = k == key;
            into.insert(k, v);
            if found {
                return;
            }
        }
    }
}

fn finish(mut child: Child, mut into: Answers) -> Answers {
    answers_until(&mut child, "", &mut into);
    let status = child.wait().unwrap();
    assert!(status.success(), "the child failed: {into:?}");
    into
}

fn answers(child: Child) -> Answers {
    finish(child, Answers::new())
}

fn run_child(role: &str, env: &[(&str, String)]) -> Answers {
    answers(spawn(role, env))
}

fn build_once() -> String {
    static BUILT: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    BUILT
        .get_or_init(|| {
            fake();
            std::env::var("CAI_CUDA_DRIVER").unwrap()
        })
        .clone()
}

fn say(key: &str, value: impl std::fmt::Display) {
    let mut out = std::io::stdout().lock();
    writeln!(out, "IPC-CHILD {key}={value}").unwrap();
    out.flush().unwrap();
}

fn env_or(key: &str, default: &str) -> String {
    std::env::var(key).unwrap_or_else(|_| default.to_string())
}

/// The child's side. Roles: `open` (open CAI_IPC_DESC with CAI_IPC_SYNC and a consumer stream
/// where CAI_IPC_CONSUMER=stream; read every element, add 1000 to each, release; with
/// CAI_IPC_TWICE open it twice first; with CAI_IPC_FAIL make that entry point fail once;
/// CAI_IPC_DEVICE the current device, -1 none) and `export` (export a fresh allocation, print
/// its descriptor and exit).
#[test]
fn ipc_child_role_fake_driver() {
    let Ok(role) = std::env::var(ROLE) else { return };
    let f = fake();
    let device: i32 = env_or("CAI_IPC_DEVICE", "0").parse().unwrap();
    f.begin(device);
    match role.as_str() {
        "export" => {
            let mut a = array(&[4], "<u4");
            a.data = device_words(f, 4);
            say("desc", hex(exported(&a).as_bytes()));
        }
        "open" => {
            let desc = descriptor_from_hex(&std::env::var("CAI_IPC_DESC").unwrap());
            let consumer = if env_or("CAI_IPC_CONSUMER", "none") == "stream" { f.stream(0) } else { 0 };
            let options = CaiImportOptions {
                consumer_stream: consumer,
                sync_mode: env_or("CAI_IPC_SYNC", "0").parse().unwrap(),
                writable: env_or("CAI_IPC_WRITABLE", "0").parse().unwrap(),
                ..Default::default()
            };
            if let Ok(name) = std::env::var("CAI_IPC_FAIL") {
                f.fail(&name, CUDA_ERROR_LAUNCH_FAILED);
            }
            say("opening", f.now());
            let (status, mut a, message) = open(&desc, &options);
            say("opened_at", f.now());
            say("status", status);
            say("message", &message);
            if status != CAI_OK {
                return;
            }
            if std::env::var("CAI_IPC_TWICE").is_ok() {
                let (again, mut b, message) = open(&desc, &options);
                assert_eq!(again, CAI_OK, "{message}");
                say("same_data", a.data == b.data);
                say("holders", binding::ipc::open_count(&desc));
                // SAFETY: an owning struct cai_ipc_open wrote, released once.
                unsafe { cai_release(&mut b, null_mut()) };
                say("holders_after_one", binding::ipc::open_count(&desc));
            }
            if consumer != 0 {
                // Work after the open on the consumer stream: ordered after the exporter's.
                let kernel = f.launch_slow(consumer, 0);
                assert_eq!(f.synchronize(consumer), 0);
                say("consumer_work_finished_at", f.slow_finished_at(kernel));
            }
            let addresses = element_addresses(&a);
            let read: Vec<String> = addresses.iter().map(|&p| word(p).to_string()).collect();
            say("read", read.join(","));
            for &p in &addresses {
                // SAFETY: an element of the opened array, mapped writable here.
                unsafe { *(p as usize as *mut u32) += 1000 };
            }
            say("readonly", a.readonly);
            // SAFETY: as above.
            unsafe { cai_release(&mut a, null_mut()) };
            say("holders_after_release", binding::ipc::open_count(&desc));
            let log = f.log();
            say("opens", log.matches("cuIpcOpenMemHandle pid").count());
            say("closes", log.matches("cuIpcCloseMemHandle").count());
        }
        "open_rust" => {
            // The safe Rust API: the bytes sent, read back, opened; dropped, the mapping closes.
            let bytes = unhex(&std::env::var("CAI_IPC_DESC").unwrap());
            let descriptor = IpcDescriptor::from_bytes(&bytes).unwrap();
            let opened = Array::ipc_open(&descriptor, &ImportOptions::new()).unwrap();
            let read: Vec<String> =
                element_addresses(opened.as_raw()).iter().map(|&p| word(p).to_string()).collect();
            say("read", read.join(","));
            say("holders", binding::ipc::open_count(descriptor.as_raw()));
            drop(opened);
            say("holders_after_release", binding::ipc::open_count(descriptor.as_raw()));
        }
        other => panic!("unknown role {other}"),
    }
}

fn desc_env(desc: &CaiIpcDescriptor) -> (&'static str, String) {
    ("CAI_IPC_DESC", hex(desc.as_bytes()))
}

#[test]
fn an_array_opened_in_another_process_is_the_same_bytes_both_ways_fake_driver() {
    let f = fake();
    f.begin(0);
    let mut a = array(&[8], "<u4");
    a.data = device_words(f, 8);
    let desc = exported(&a);
    assert_eq!((desc.kind, desc.offset, desc.allocation_size), (CAI_IPC_KIND_LEGACY, 0, 32));
    assert_eq!(desc.flags & CAI_IPC_FLAG_EVENT, 0, "no stream, no event");
    let child = run_child("open", &[desc_env(&desc)]);
    assert_eq!(child["status"], "0", "{}", child["message"]);
    assert_eq!(child["read"], "0,1,2,3,4,5,6,7", "the child reads what this process wrote");
    assert_eq!(child["holders_after_release"], "0");
    assert_eq!(
        (child["opens"].as_str(), child["closes"].as_str()),
        ("1", "1"),
        "the release closed the handle"
    );
    let written: Vec<u32> = (0..8).map(|i| word(a.data + 4 * i)).collect();
    assert_eq!(written, (1000..1008).collect::<Vec<_>>(), "this process sees what the child wrote");
}

#[test]
fn a_strided_view_inside_a_larger_allocation_arrives_at_its_offset_fake_driver() {
    let f = fake();
    f.begin(0);
    // A 6x8 u32 allocation; the view: rows 1..4, every other column from 2: shape (3, 3),
    // strides (32, 8), starting at element (1, 2).
    let base = device_words(f, 48);
    let mut a = with_strides(array(&[3, 3], "<u4"), &[32, 8]);
    a.data = base + 4 * (8 + 2);
    a.readonly = 1;
    let desc = exported(&a);
    assert_eq!((desc.offset, desc.allocation_size), (40, 192));
    assert_ne!(desc.flags & CAI_IPC_FLAG_STRIDES, 0);
    let child = run_child("open", &[desc_env(&desc)]);
    assert_eq!(child["status"], "0", "{}", child["message"]);
    assert_eq!(child["read"], "10,12,14,18,20,22,26,28,30");
    assert_eq!(child["readonly"], "1");
    assert_eq!(word(base + 4 * 10), 1010, "the child wrote at the view's offset");
    assert_eq!(word(base + 4 * 11), 11, "and nowhere between its elements");
    // A writable open of the read-only view is refused, before anything is mapped.
    let child = run_child("open", &[desc_env(&desc), ("CAI_IPC_WRITABLE", "1".into())]);
    assert_eq!(child["status"], CAI_ERROR_READONLY.to_string(), "{}", child["message"]);
}

#[test]
fn a_second_open_in_one_process_shares_the_mapping_and_the_last_release_closes_it_fake_driver() {
    let f = fake();
    f.begin(0);
    let mut a = array(&[4], "<u4");
    a.data = device_words(f, 4);
    let desc = exported(&a);
    // The fake refuses a second cuIpcOpenMemHandle of one handle in a process, so two opens
    // succeed only through libcai's table; one open and one close reach the driver.
    let child = run_child("open", &[desc_env(&desc), ("CAI_IPC_TWICE", "1".into())]);
    assert_eq!(child["status"], "0", "{}", child["message"]);
    assert_eq!(
        (child["same_data"].as_str(), child["holders"].as_str(), child["holders_after_one"].as_str()),
        ("true", "2", "1")
    );
    assert_eq!((child["opens"].as_str(), child["closes"].as_str()), ("1", "1"));
    assert_eq!(child["holders_after_release"], "0");
}

#[test]
fn the_importer_is_ordered_after_the_exporters_held_kernel_fake_driver() {
    let f = fake();
    f.begin(0);
    let stream = f.stream(0);
    let mut a = array(&[4], "<u4");
    a.data = device_words(f, 4);
    for (sync_mode, consumer) in [(CAI_SYNC_BLOCKING, "none"), (CAI_SYNC_STREAM_ORDERED, "stream")] {
        let kernel = f.launch_slow(stream, -1);
        a.stream = stream;
        let desc = exported(&a);
        assert_ne!(desc.flags & CAI_IPC_FLAG_EVENT, 0, "pending work travels as an event");
        let mut child = spawn(
            "open",
            &[
                desc_env(&desc),
                ("CAI_IPC_SYNC", sync_mode.to_string()),
                ("CAI_IPC_CONSUMER", consumer.into()),
            ],
        );
        // Released only once the child is in its open (blocking) or past it (stream-ordered),
        // whatever the machine's load: a blocking open must then wait 300 ms at least.
        let mut seen = Answers::new();
        let awaited = if sync_mode == CAI_SYNC_BLOCKING { "opening" } else { "opened_at" };
        answers_until(&mut child, awaited, &mut seen);
        std::thread::sleep(Duration::from_millis(300));
        let released_at = f.now();
        f.finish_slow(kernel);
        let child = finish(child, seen);
        assert_eq!(child["status"], "0", "{}", child["message"]);
        let opened_at: f64 = child["opened_at"].parse().unwrap();
        let finished = f.slow_finished_at(kernel);
        assert!(finished >= released_at);
        if sync_mode == CAI_SYNC_BLOCKING {
            assert!(
                opened_at >= finished,
                "the blocking open returned at {opened_at}, before the kernel finished at {finished}"
            );
            let opening: f64 = child["opening"].parse().unwrap();
            assert!(opened_at - opening >= 0.29, "the blocking open waited {} s", opened_at - opening);
        } else {
            assert!(opened_at < released_at, "a stream-ordered open does not wait on the host");
            let after: f64 = child["consumer_work_finished_at"].parse().unwrap();
            assert!(
                after >= finished,
                "the consumer's kernel finished at {after}, before the exporter's at {finished}"
            );
        }
    }
}

#[test]
fn an_exported_event_is_recorded_again_only_once_complete_fake_driver() {
    let f = fake();
    f.begin(0);
    let stream = f.stream(0);
    let mut a = array(&[4], "<u4");
    a.data = device_words(f, 4);
    a.stream = stream;
    let held = f.launch_slow(stream, -1);
    let first = exported(&a);
    let second = exported(&a);
    assert_ne!(first.event_handle, second.event_handle, "the first event's work is still running");
    f.finish_slow(held);
    assert_eq!(f.synchronize(stream), 0);
    let third = exported(&a);
    assert!(
        third.event_handle == first.event_handle || third.event_handle == second.event_handle,
        "a completed event is reused"
    );
}

#[test]
fn a_zero_size_array_travels_with_no_handle_fake_driver() {
    let f = fake();
    f.begin(0);
    let a = array(&[0, 3], "<f8");
    let desc = exported(&a);
    assert_eq!((desc.kind, desc.mem_handle), (CAI_IPC_KIND_NONE, [0; 64]));
    let child = run_child("open", &[desc_env(&desc)]);
    assert_eq!(child["status"], "0", "{}", child["message"]);
    assert_eq!(child["read"], "");
}

fn refused(a: &CaiArray, status: i32, part: &str) {
    let (got, _, message) = export(a);
    assert_eq!(got, status, "{message}");
    assert!(message.contains(part), "{message:?} lacks {part:?}");
}

#[test]
fn memory_that_cannot_be_shared_is_refused_naming_why_fake_driver() {
    let f = fake();
    f.begin(0);
    let mut a = array(&[4], "<f4");
    a.data = f.alloc(64, MEMORY_DEVICE, 0, FLAG_MANAGED);
    refused(&a, CAI_ERROR_NOT_SHAREABLE, "managed memory");
    a.data = f.alloc(64, MEMORY_UNIFIED, 0, FLAG_MANAGED);
    refused(&a, CAI_ERROR_NOT_SHAREABLE, "managed memory");
    a.data = f.alloc(64, MEMORY_HOST, 0, 0);
    refused(&a, CAI_ERROR_NOT_SHAREABLE, "pinned host memory");
    let host = [0f32; 4];
    a.data = host.as_ptr() as u64;
    refused(&a, CAI_ERROR_NOT_SHAREABLE, "not memory the CUDA driver knows");
    a.data = f.alloc(64, MEMORY_DEVICE, 0, FLAG_POOL);
    refused(&a, CAI_ERROR_NOT_SHAREABLE, "not IPC-enabled");
    a.data = f.alloc(64, MEMORY_DEVICE, 0, FLAG_IPC_POOL);
    refused(&a, CAI_ERROR_NOT_SHAREABLE, "file descriptor");
    // A failed probe of the pool reads as a pool that cannot be exported.
    f.fail("cuMemPoolExportPointer", CUDA_ERROR_LAUNCH_FAILED);
    refused(&a, CAI_ERROR_NOT_SHAREABLE, "not IPC-enabled");
    a.data = f.alloc(64, MEMORY_DEVICE, 0, 0);
    let mask = array(&[4], "|b1");
    a.mask = &mask;
    refused(&a, CAI_ERROR_NOT_SHAREABLE, "two descriptors");
    a.mask = std::ptr::null();
    let fields = [CaiField::new("x", "<f4", 0).unwrap()];
    let mut structured = a;
    structured.set_typestr("|V4");
    structured.descr = fields.as_ptr();
    structured.descr_count = 1;
    refused(&structured, CAI_ERROR_NOT_SHAREABLE, "without descr");
    // Past its allocation: the core's bounds rule, before any handle.
    a.shape[0] = 17;
    refused(&a, CAI_ERROR_OUT_OF_BOUNDS, "outside its allocation");
    assert!(!f.log().contains("cuIpcGetMemHandle"), "no handle was made for memory refused:\n{}", f.log());
}

#[test]
fn a_capturing_stream_is_refused_before_anything_is_enqueued_fake_driver() {
    let f = fake();
    f.begin(0);
    let stream = f.stream(0);
    let mut a = array(&[4], "<f4");
    a.data = f.alloc(64, MEMORY_DEVICE, 0, 0);
    a.stream = stream;
    assert_eq!(f.begin_capture(stream, CAPTURE_MODE_RELAXED), 0);
    refused(&a, CAI_ERROR_STREAM_CAPTURING, "capturing a CUDA graph");
    assert!(!f.log().contains("cuEventRecord"), "{}", f.log());
    assert_eq!(f.end_capture(stream), (0, true), "the capture is left as it was");
}

/// A descriptor changed after export, checksum made right again where `fix_sum`.
fn changed(desc: &CaiIpcDescriptor, change: impl FnOnce(&mut CaiIpcDescriptor)) -> CaiIpcDescriptor {
    let mut changed = *desc;
    change(&mut changed);
    changed
}

fn open_refused(desc: &CaiIpcDescriptor, status: i32, part: &str) {
    let (got, _, message) = open(desc, &CaiImportOptions::default());
    assert_eq!(got, status, "{message}");
    assert!(message.contains(part), "{message:?} lacks {part:?}");
}

#[test]
fn a_descriptor_opened_in_its_own_process_or_changed_is_refused_before_any_driver_call_fake_driver() {
    let f = fake();
    f.begin(0);
    let mut a = array(&[4], "<f4");
    a.data = f.alloc(64, MEMORY_DEVICE, 0, 0);
    let desc = exported(&a);
    f.begin(0);
    open_refused(&desc, CAI_ERROR_IPC_DESCRIPTOR, "use the array itself");
    // Other versions, magics and sizes: each named; a flipped byte anywhere: the checksum.
    open_refused(&changed(&desc, |d| d.version = 2), CAI_ERROR_IPC_DESCRIPTOR, "descriptor.version is 2");
    open_refused(&changed(&desc, |d| d.magic ^= 1), CAI_ERROR_IPC_DESCRIPTOR, "descriptor.magic");
    open_refused(&changed(&desc, |d| d.size = 1024), CAI_ERROR_IPC_DESCRIPTOR, "descriptor.size is 1024");
    for at in [40, 1060, 1150, 1300, CAI_IPC_DESCRIPTOR_SIZE - 1] {
        let mut bytes = *desc.as_bytes();
        bytes[at] ^= 0x10;
        open_refused(&CaiIpcDescriptor::from_bytes(&bytes), CAI_ERROR_IPC_DESCRIPTOR, "checksum");
    }
    assert!(!f.log().contains("cuIpc"), "no driver call was made:\n{}", f.log());
}

#[test]
fn a_device_the_importer_lacks_is_refused_naming_its_uuid_fake_driver() {
    let f = fake();
    f.begin(0);
    let mut a = array(&[4], "<u4");
    a.data = device_words(f, 4);
    let desc = exported(&a);
    let child = run_child("open", &[desc_env(&desc), ("FAKE_CUDA_UUID_SEED", "7".into())]);
    assert_eq!(child["status"], CAI_ERROR_NOT_SHAREABLE.to_string(), "{}", child["message"]);
    assert!(child["message"].contains("GPU-66616b65-0000-0000-0000-000000000000"), "{}", child["message"]);
    assert!(child["message"].contains("CUDA_VISIBLE_DEVICES"), "{}", child["message"]);
}

#[test]
fn memory_freed_or_an_exporter_gone_before_the_open_is_the_drivers_error_fake_driver() {
    let f = fake();
    f.begin(0);
    let mut a = array(&[4], "<u4");
    a.data = device_words(f, 4);
    let desc = exported(&a);
    assert_eq!(f.mem_free(a.data), 0);
    let child = run_child("open", &[desc_env(&desc)]);
    assert_eq!(child["status"], CAI_ERROR_DRIVER.to_string(), "{}", child["message"]);
    assert!(child["message"].contains("may have freed the memory or exited"), "{}", child["message"]);
    // An exporter that exited: this process opens what a child exported.
    let exporter = run_child("export", &[]);
    let desc = descriptor_from_hex(&exporter["desc"]);
    open_refused(&desc, CAI_ERROR_DRIVER, "CUDA_ERROR_INVALID_HANDLE");
}

#[test]
fn an_importer_with_no_context_uses_the_devices_primary_context_fake_driver() {
    let f = fake();
    f.begin(0);
    let mut a = array(&[4], "<u4");
    a.data = device_words(f, 4);
    let desc = exported(&a);
    let child = run_child("open", &[desc_env(&desc), ("CAI_IPC_DEVICE", "-1".into())]);
    assert_eq!(child["status"], "0", "{}", child["message"]);
    assert_eq!(child["read"], "0,1,2,3");
}

/// Every entry point of arrays across processes made to fail: CAI_ERROR_DRIVER naming it (the
/// walk of tests/driver_failures.rs counts these as tested here).
#[test]
fn each_ipc_entry_point_failing_is_cai_error_driver_naming_it_fake_driver() {
    let f = fake();
    let stream = f.stream(0);
    // Device 1's context has no pooled interprocess event yet (no other test uses it), so the
    // export makes one and asks for its handle, which later exports reuse.
    f.begin(1);
    let mut a = array(&[4], "<u4");
    a.data = f.alloc(16, MEMORY_DEVICE, 1, 0);
    a.stream = f.stream(1);
    f.fail("cuIpcGetEventHandle", CUDA_ERROR_LAUNCH_FAILED);
    refused(&a, CAI_ERROR_DRIVER, "cuIpcGetEventHandle");
    for name in ["cuIpcGetMemHandle", "cuDeviceGetUuid", "cuDeviceGet"] {
        f.begin(0);
        let mut a = array(&[4], "<u4");
        a.data = device_words(f, 4);
        a.stream = stream;
        f.fail(name, CUDA_ERROR_LAUNCH_FAILED);
        let (got, _, message) = export(&a);
        assert_eq!(got, CAI_ERROR_DRIVER, "{name}: {message}\n{}", f.log());
        assert!(message.contains(name), "{message:?} lacks {name:?}");
    }
    f.begin(0);
    let mut a = array(&[4], "<u4");
    a.data = device_words(f, 4);
    a.stream = stream;
    let desc = exported(&a);
    for (name, device) in [
        ("cuIpcOpenMemHandle", 0),
        ("cuIpcOpenEventHandle", 0),
        ("cuDeviceGetCount", 0),
        ("cuCtxGetDevice", 0),
        ("cuDevicePrimaryCtxRetain", -1),
    ] {
        let child = run_child(
            "open",
            &[desc_env(&desc), ("CAI_IPC_FAIL", name.into()), ("CAI_IPC_DEVICE", device.to_string())],
        );
        assert_eq!(child["status"], CAI_ERROR_DRIVER.to_string(), "{name}: {}", child["message"]);
        assert!(child["message"].contains(name), "{name}: {}", child["message"]);
    }
    // A failed close has no status to report (a release): the mapping is let go of all the same.
    let child = run_child("open", &[desc_env(&desc), ("CAI_IPC_FAIL", "cuIpcCloseMemHandle".into())]);
    assert_eq!((child["status"].as_str(), child["holders_after_release"].as_str()), ("0", "0"));
}

#[test]
fn null_arguments_are_refused_fake_driver() {
    let mut e = blank_error();
    let a = array(&[0], "<f4");
    let mut desc = CaiIpcDescriptor::zeroed();
    let mut out = CaiArray::zeroed();
    // SAFETY: NULL where the functions check for it; the rest live.
    unsafe {
        assert_eq!(cai_ipc_export(std::ptr::null(), &mut desc, &mut e), CAI_ERROR_NULL_ARGUMENT);
        assert_eq!(cai_ipc_export(&a, null_mut(), &mut e), CAI_ERROR_NULL_ARGUMENT);
        assert_eq!(
            cai_ipc_open(std::ptr::null(), std::ptr::null(), &mut out, &mut e),
            CAI_ERROR_NULL_ARGUMENT
        );
        assert_eq!(cai_ipc_open(&desc, std::ptr::null(), null_mut(), &mut e), CAI_ERROR_NULL_ARGUMENT);
    }
}

#[test]
fn the_rust_api_exports_and_opens_across_processes_fake_driver() {
    let f = fake();
    f.begin(0);
    let data = device_words(f, 6);
    let array = Array::builder("<u4", &[3], data + 8).build().unwrap();
    let descriptor = array.ipc_export().unwrap();
    assert_eq!(descriptor.as_raw().offset, 8);
    assert!(IpcDescriptor::from_bytes(&descriptor.as_bytes()[..100]).is_err());
    let child = run_child("open_rust", &[("CAI_IPC_DESC", hex(descriptor.as_bytes()))]);
    assert_eq!(child["read"], "2,3,4");
    assert_eq!((child["holders"].as_str(), child["holders_after_release"].as_str()), ("1", "0"));
    let managed = Array::builder("<u4", &[3], f.alloc(64, MEMORY_DEVICE, 0, FLAG_MANAGED)).build().unwrap();
    assert_eq!(managed.ipc_export().unwrap_err().status(), Status::NotShareable);
}
