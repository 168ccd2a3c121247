//! Arrays across processes against the fake CUDA driver (a test double), each call beside the
//! raw driver calls it makes (the floor): benchmarks/ipc_instructions.sh runs each case under
//! callgrind and prints instructions per call; run alone, each case prints its wall time per
//! call on stderr.
//!
//! - `export`: cai_ipc_export of a 64x128 float array with no stream; `export-floor`: its
//!   driver calls (cuPointerGetAttributes twice, cuCtxGetCurrent, cuDeviceGet, cuDeviceGetUuid,
//!   cuIpcGetMemHandle).
//! - `open`: cai_ipc_open then cai_release of a descriptor a child process exported (mapped
//!   and unmapped each time); `open-floor`: its driver calls (cuDeviceGetCount, cuDeviceGet,
//!   cuDeviceGetUuid, cuCtxGetCurrent, cuCtxGetDevice, cuIpcOpenMemHandle, the import's
//!   cuPointerGetAttributes, cuIpcCloseMemHandle).
//! - `log-reset`: the fake's call log cleared, which every case does per call, to subtract.
//!
//! ipc_instructions (export|export-floor|open|open-floor|log-reset) CALLS

#[path = "../tests/common/fake_driver.rs"]
#[allow(dead_code)]
mod fake_driver;
#[allow(dead_code)]
mod support;

use std::ffi::{c_void, CString};
use std::hint::black_box;
use std::io::{BufRead, Write};
use std::process::{Command, Stdio};
use std::ptr::null_mut;
use std::time::Instant;

use cai::*;

/// The exporter: exports an array, prints its descriptor, and keeps it alive until stdin closes.
fn exporter() {
    let f = fake_driver::fake();
    f.begin(0);
    let data = f.alloc(64 * 128 * 4, fake_driver::MEMORY_DEVICE, 0, 0);
    let array = support::array(&[64, 128], "<f4", data);
    let mut desc = CaiIpcDescriptor::zeroed();
    // SAFETY: a live array, a writable descriptor.
    assert_eq!(unsafe { cai_ipc_export(&array, &mut desc, null_mut()) }, CAI_OK);
    let hex: String = desc.as_bytes().iter().map(|b| format!("{b:02x}")).collect();
    println!("{hex}");
    std::io::stdout().flush().unwrap();
    let mut line = String::new();
    let _ = std::io::stdin().read_line(&mut line);
}

/// A driver entry point of the fake, by name.
fn entry<F: Copy>(name: &str) -> F {
    let path = CString::new(std::env::var("CAI_CUDA_DRIVER").unwrap()).unwrap();
    let name = CString::new(name).unwrap();
    // SAFETY: the fake driver the process already loaded, and a NUL-terminated name.
    let pointer = unsafe { libc::dlsym(libc::dlopen(path.as_ptr(), libc::RTLD_NOW), name.as_ptr()) };
    assert!(!pointer.is_null());
    // SAFETY: F is the entry point's C signature, as the calls below spell it.
    unsafe { std::mem::transmute_copy::<*mut c_void, F>(&pointer) }
}

type Attributes = extern "C" fn(u32, *mut u32, *mut *mut c_void, u64) -> i32;

fn main() {
    let args: Vec<String> = std::env::args().filter(|a| a != "--bench").collect();
    if args.get(1).map(String::as_str) == Some("exporter") {
        return exporter();
    }
    let [_, case, calls] = &args[..] else {
        panic!("usage: ipc_instructions (export|export-floor|open|open-floor|log-reset) CALLS")
    };
    let calls: u64 = calls.parse().expect("CALLS is a number");
    let f = fake_driver::fake();
    f.begin(0);
    let data = f.alloc(64 * 128 * 4, fake_driver::MEMORY_DEVICE, 0, 0);
    let array = support::array(&[64, 128], "<f4", data);
    let mut desc = CaiIpcDescriptor::zeroed();
    let mut child = None;
    if case.starts_with("open") {
        let mut spawned = Command::new(std::env::current_exe().unwrap())
            .arg("exporter")
            .env(fake_driver::BUILT_ENV, std::env::var("CAI_CUDA_DRIVER").unwrap())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufReader::new(spawned.stdout.take().unwrap()).read_line(&mut line).unwrap();
        let bytes: Vec<u8> = (0..line.trim().len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&line[i..i + 2], 16).unwrap())
            .collect();
        desc = CaiIpcDescriptor::from_bytes(&bytes.try_into().unwrap());
        child = Some(spawned);
    }
    // The driver loaded before the counted calls.
    // SAFETY: a live array, a writable descriptor.
    assert_eq!(unsafe { cai_ipc_export(&array, &mut CaiIpcDescriptor::zeroed(), null_mut()) }, CAI_OK);
    let attributes: Attributes = entry("cuPointerGetAttributes");
    let context_current: extern "C" fn(*mut *mut c_void) -> i32 = entry("cuCtxGetCurrent");
    let context_device: extern "C" fn(*mut i32) -> i32 = entry("cuCtxGetDevice");
    let device_count: extern "C" fn(*mut i32) -> i32 = entry("cuDeviceGetCount");
    let device_get: extern "C" fn(*mut i32, i32) -> i32 = entry("cuDeviceGet");
    let uuid: extern "C" fn(*mut [u8; 16], i32) -> i32 = entry("cuDeviceGetUuid");
    let get_handle: extern "C" fn(*mut [u8; 64], u64) -> i32 = entry("cuIpcGetMemHandle");
    let open_handle: extern "C" fn(*mut u64, [u8; 64], u32) -> i32 = entry("cuIpcOpenMemHandle");
    let close_handle: extern "C" fn(u64) -> i32 = entry("cuIpcCloseMemHandle");
    let ask = |pointer: u64, count: usize| {
        let mut words = [0u64; 7];
        let mut keys: [u32; 7] = [1, 2, 3, 8, 9, 11, 12];
        let mut values: [*mut c_void; 7] = std::array::from_fn(|i| (&mut words[i] as *mut u64).cast());
        attributes(count as u32, keys.as_mut_ptr(), values.as_mut_ptr(), pointer)
    };
    let share = |pointer: u64| {
        let mut words = [0u64; 2];
        let mut keys: [u32; 2] = [10, 17];
        let mut values: [*mut c_void; 2] = std::array::from_fn(|i| (&mut words[i] as *mut u64).cast());
        attributes(2, keys.as_mut_ptr(), values.as_mut_ptr(), pointer)
    };
    let options = CaiImportOptions::default();
    let started = Instant::now();
    let mut failures = 0;
    for _ in 0..calls {
        failures += match case.as_str() {
            "export" => {
                let mut out = CaiIpcDescriptor::zeroed();
                // SAFETY: a live array, a writable descriptor.
                unsafe { cai_ipc_export(black_box(&array), &mut out, null_mut()) }
            }
            "export-floor" => {
                let (mut context, mut device, mut id, mut handle) = (null_mut(), 0, [0u8; 16], [0u8; 64]);
                ask(data, 7)
                    + share(data)
                    + context_current(&mut context)
                    + device_get(&mut device, 0)
                    + uuid(&mut id, device)
                    + get_handle(&mut handle, black_box(data))
            }
            "open" => {
                let mut out = CaiArray::zeroed();
                // SAFETY: a readable descriptor and options, a writable array.
                let opened = unsafe { cai_ipc_open(black_box(&desc), &options, &mut out, null_mut()) };
                // SAFETY: the owning struct just opened.
                opened + unsafe { cai_release(&mut out, null_mut()) }
            }
            "open-floor" => {
                let (mut count, mut device, mut id, mut context, mut base) =
                    (0, 0, [0u8; 16], null_mut(), 0u64);
                let mut result =
                    device_count(&mut count) + device_get(&mut device, 0) + uuid(&mut id, device);
                result += context_current(&mut context) + context_device(&mut device);
                result += open_handle(&mut base, black_box(desc.mem_handle), 1);
                result + ask(base, 7) + close_handle(base)
            }
            "log-reset" => 0,
            other => panic!("unknown case {other}"),
        };
        f.begin(0); // keeps the fake's per-thread call log from filling up
    }
    let elapsed = started.elapsed();
    assert_eq!(failures, 0);
    if calls > 0 {
        eprintln!("{case}: {:.0} ns/call", elapsed.as_nanos() as f64 / calls as f64);
    }
    if let Some(mut child) = child {
        drop(child.stdin.take());
        child.wait().unwrap();
    }
}
