//! libcai on NVIDIA's real driver library, libcuda.so.1 from Debian's non-free libcuda1, on a
//! machine without a GPU: it loads, every entry point libcai uses resolves, and cuInit answers
//! CUDA_ERROR_NO_DEVICE. Also the C signatures libcai declares for those entry points, and the
//! cuda.h types and values it declares, compiled against NVIDIA's own cuda.h.
//!
//! CAI_REAL_NVIDIA_DRIVER names the directory scripts/nvidia-driver.sh prints (libcuda.so.1,
//! include/cuda.h, include/cudaTypedefs.h); scripts/test.sh always sets it. Unset, each test
//! prints why it did not run and returns.

mod common;

use std::ffi::{c_void, CString};
use std::io::Write;
use std::os::raw::{c_char, c_int};
use std::path::PathBuf;
use std::sync::Once;

use cai::*;
use common::*;

const API_SOURCE: &str = include_str!("../src/driver/mod.rs");
const CUDA_TYPES_SOURCE: &str = include_str!("../src/driver/cuda.rs");
const CUDA_ERROR_NO_DEVICE: i32 = 100;

/// The fetched driver's directory, with CAI_CUDA_DRIVER pointed at its libcuda.so.1 before
/// libcai's first use of a driver in this process; None (reason printed) when not fetched.
fn real_driver() -> Option<PathBuf> {
    static POINT_LIBCAI_AT_IT: Once = Once::new();
    static SAY_WHY_NOT: Once = Once::new();
    let Some(dir) = std::env::var_os("CAI_REAL_NVIDIA_DRIVER").filter(|d| !d.is_empty()) else {
        // Straight to stderr, past the harness's capture of passing tests' output.
        SAY_WHY_NOT.call_once(|| {
            let why = "driver_real_nvidia: skipped, CAI_REAL_NVIDIA_DRIVER is not set (scripts/test.sh sets it to what scripts/nvidia-driver.sh fetches)\n";
            let _ = std::io::stderr().write_all(why.as_bytes());
        });
        return None;
    };
    let dir = PathBuf::from(dir);
    assert!(dir.join("libcuda.so.1").is_file(), "CAI_REAL_NVIDIA_DRIVER={dir:?} has no libcuda.so.1");
    POINT_LIBCAI_AT_IT.call_once(|| std::env::set_var("CAI_CUDA_DRIVER", dir.join("libcuda.so.1")));
    Some(dir)
}

// ---- The table libcai declares, read from src/driver/ --------------------------------------

/// One entry point as libcai declares it: the Rust signature, the symbol looked up when the
/// driver has no cuGetProcAddress, and the CUDA version cuGetProcAddress is asked for.
struct EntryPoint {
    name: String,
    arguments: Vec<String>,
    result: String,
    fallback_symbol: String,
    cuda_version: i32,
}

fn between<'t>(text: &'t str, start: &str, end: &str) -> &'t str {
    let from = text.find(start).unwrap_or_else(|| panic!("src/driver has no {start:?}")) + start.len();
    let to = text[from..].find(end).unwrap_or_else(|| panic!("no {end:?} after {start:?}")) + from;
    &text[from..to]
}

fn const_value(source: &str, name: &str) -> i32 {
    between(source, &format!("const {name}: c_int = "), ";").trim().parse().unwrap()
}

/// `unsafe extern "C" fn(A, B) -> R` as its argument types and result type.
fn signature(rust: &str) -> (Vec<String>, String) {
    let rust = rust.split_whitespace().collect::<Vec<_>>().join(" ");
    let arguments = between(&rust, "fn(", ")");
    let result = rust.rsplit_once("-> ").expect("a result type").1.trim().to_string();
    // One argument a line too, where rustfmt breaks a long signature (a trailing comma).
    (arguments.split(',').map(str::trim).filter(|a| !a.is_empty()).map(str::to_string).collect(), result)
}

fn api_table() -> Vec<EntryPoint> {
    let proc_address_version = const_value(API_SOURCE, "PROC_ADDRESS_CUDA_VERSION");
    let body = between(API_SOURCE, "pub(crate) struct Api {", "\n}\n");
    let declarations: String =
        body.lines().map(str::trim).filter(|l| !l.starts_with("//")).collect::<Vec<_>>().join(" ");
    let mut table = Vec::new();
    for field in declarations.split("pub ").map(str::trim).filter(|f| !f.is_empty()) {
        let (name, rust_type) = field.trim_end_matches(',').split_once(':').unwrap();
        let name = name.trim().to_string();
        let (fallback_symbol, cuda_version, rust_type) = match rust_type.trim().strip_prefix("Option<") {
            None => {
                let fallback = between(API_SOURCE, &format!("entry!(\"{name}\", \""), "\")").to_string();
                (fallback, proc_address_version, rust_type.trim())
            }
            Some(inner) => {
                let version_name =
                    between(API_SOURCE, &format!("library, \"{name}\", "), ")").trim().to_string();
                (name.clone(), const_value(API_SOURCE, &version_name), inner.strip_suffix('>').unwrap())
            }
        };
        let (arguments, result) = signature(rust_type);
        table.push(EntryPoint { name, arguments, result, fallback_symbol, cuda_version });
    }
    assert!(table.len() >= 15, "read {} entry points from src/driver/mod.rs", table.len());
    table
}

/// C for one of the Rust types src/driver uses: the cuda.h names it declares stand for
/// themselves (their own definitions are checked apart), std's C types for theirs.
fn c_type(rust: &str) -> String {
    if let Some(pointee) = rust.strip_prefix("*mut ") {
        return format!("{} *", c_type(pointee));
    }
    if let Some(pointee) = rust.strip_prefix("*const ") {
        return format!("const {} *", c_type(pointee));
    }
    if rust.ends_with("_st") {
        return format!("struct {rust}"); // the opaque structs behind CUcontext, CUstream, CUevent
    }
    match rust {
        "c_void" => "void",
        "c_char" => "char",
        "c_int" | "i32" => "int",
        "c_uint" | "u32" => "unsigned int",
        "u64" => "unsigned long long",
        "usize" => "size_t",
        cuda if cuda.starts_with("CU") || cuda.starts_with("cu") => cuda,
        other => panic!("no C type for the Rust type {other:?}: add it to c_type"),
    }
    .to_string()
}

fn c_function_pointer(name: &str, arguments: &[String], result: &str) -> String {
    let arguments: Vec<String> = arguments.iter().map(|a| c_type(a)).collect();
    format!("typedef {} (*{name})({});\n", c_type(result), arguments.join(", "))
}

/// The newest `PFN_<name>_v<N>` of cudaTypedefs.h with N at most `cuda_version`: the type of
/// what cuGetProcAddress returns for that name and version (per-thread variants excluded).
fn proc_address_typedef(typedefs: &str, name: &str, cuda_version: i32) -> String {
    let prefix = format!("PFN_{name}_v");
    let newest = typedefs
        .match_indices(&prefix)
        .filter_map(|(at, _)| {
            let rest = &typedefs[at + prefix.len()..];
            let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
            rest[digits.len()..].starts_with(')').then(|| digits.parse::<i32>().unwrap())
        })
        .filter(|&version| version <= cuda_version)
        .max()
        .unwrap_or_else(|| panic!("cudaTypedefs.h has no {prefix}N for CUDA {cuda_version}"));
    format!("{prefix}{newest}")
}

/// A C file that compiles only where every declaration libcai makes matches cuda.h.
fn conformance_check_c(typedefs: &str) -> String {
    let mut c = String::from("#include <stddef.h>\n#include <cuda.h>\n#include <cudaTypedefs.h>\n\n");
    let same = |ours: &str, theirs: &str, what: &str| {
        format!("_Static_assert(__builtin_types_compatible_p({ours}, {theirs}), \"{what}\");\n")
    };
    for entry in api_table() {
        let ours = format!("libcai_{}_t", entry.name);
        c += &c_function_pointer(&ours, &entry.arguments, &entry.result);
        let pfn = proc_address_typedef(typedefs, &entry.name, entry.cuda_version);
        c += &same(
            &ours,
            &pfn,
            &format!(
                "{}: libcai's signature is not {pfn}'s, what cuGetProcAddress returns for CUDA {}",
                entry.name, entry.cuda_version
            ),
        );
        c += &same(
            &ours,
            &format!("__typeof__(&{})", entry.fallback_symbol),
            &format!(
                "{}: libcai's signature is not that of the symbol {}",
                entry.name, entry.fallback_symbol
            ),
        );
    }
    let get_proc_address = between(API_SOURCE, "type CuGetProcAddress =", ";");
    let (arguments, result) = signature(get_proc_address);
    c += &c_function_pointer("libcai_cuGetProcAddress_t", &arguments, &result);
    // libcai looks up the unversioned symbol, the CUDA 11.3 signature.
    c += &same(
        "libcai_cuGetProcAddress_t",
        "PFN_cuGetProcAddress_v11030",
        "cuGetProcAddress: libcai's signature is not PFN_cuGetProcAddress_v11030",
    );
    for line in CUDA_TYPES_SOURCE.lines().map(str::trim) {
        if let Some(alias) = line.strip_prefix("pub(crate) type ") {
            let (name, rust) = alias.trim_end_matches(';').split_once(" = ").unwrap();
            let theirs = c_type(rust);
            c += &format!("_Static_assert(sizeof({name}) == sizeof({theirs}), \"{name}: cuda.h's size is not {rust}'s\");\n");
            if rust.starts_with('*') {
                c += &same(name, &theirs, &format!("{name}: cuda.h's type is not {rust}"));
            }
        } else if let Some(constant) = line.strip_prefix("pub(crate) const ") {
            let (name, value) = constant.trim_end_matches(';').split_once(" = ").unwrap();
            let name = name.split(':').next().unwrap();
            c += &format!("_Static_assert({name} == {value}, \"{name} is not {value} in cuda.h\");\n");
        }
    }
    c
}

#[test]
fn libcai_declarations_match_nvidia_cuda_h_real_nvidia_driver() {
    let Some(dir) = real_driver() else { return };
    let include = dir.join("include");
    let typedefs = std::fs::read_to_string(include.join("cudaTypedefs.h")).expect("include/cudaTypedefs.h");
    let source = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("libcai_matches_cuda_h.c");
    let c = conformance_check_c(&typedefs);
    std::fs::write(&source, &c).unwrap();
    let compiler = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let output = std::process::Command::new(&compiler)
        .args(["-std=gnu11", "-fsyntax-only", "-Werror", "-I"])
        .arg(&include)
        .arg(&source)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {compiler}: {e}"));
    assert!(
        output.status.success(),
        "libcai's driver declarations differ from NVIDIA's cuda.h ({source:?}):\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    // The check covers the whole table: a signature, a version and a symbol per entry point.
    assert_eq!(c.matches("__builtin_types_compatible_p(libcai_").count(), 2 * api_table().len() + 1);
    assert!(c.contains("CU_POINTER_ATTRIBUTE_RANGE_SIZE == 12") && c.contains("sizeof(CUdeviceptr)"));
}

// ---- The real library, loaded ----------------------------------------------------------------

type GetProcAddress = unsafe extern "C" fn(*const c_char, *mut *mut c_void, c_int, u64) -> i32;
type DriverGetVersion = unsafe extern "C" fn(*mut c_int) -> i32;

/// dlopen of the real library, apart from libcai's own.
fn open_real_library(dir: &std::path::Path) -> *mut c_void {
    let path = CString::new(dir.join("libcuda.so.1").to_str().unwrap()).unwrap();
    // SAFETY: a valid C string; the handle is kept for the process.
    let handle = unsafe { libc::dlopen(path.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
    assert!(!handle.is_null(), "the real libcuda.so.1 does not load");
    handle
}

fn symbol(handle: *mut c_void, name: &str) -> *mut c_void {
    let name = CString::new(name).unwrap();
    // SAFETY: a handle from dlopen and a valid C string.
    unsafe { libc::dlsym(handle, name.as_ptr()) }
}

#[test]
fn every_entry_point_libcai_uses_resolves_real_nvidia_driver() {
    let Some(dir) = real_driver() else { return };
    let handle = open_real_library(&dir);
    let get = symbol(handle, "cuGetProcAddress");
    assert!(!get.is_null(), "no cuGetProcAddress");
    // SAFETY: cuGetProcAddress's CUDA 11.3 signature, the unversioned symbol's (checked against
    // cuda.h above).
    let get: GetProcAddress = unsafe { std::mem::transmute::<*mut c_void, GetProcAddress>(get) };
    for entry in api_table() {
        let name = CString::new(entry.name.as_str()).unwrap();
        let mut pointer = std::ptr::null_mut();
        // SAFETY: as above; writes one pointer. Flag 1: CU_GET_PROC_ADDRESS_LEGACY_STREAM.
        let status = unsafe { get(name.as_ptr(), &mut pointer, entry.cuda_version, 1) };
        assert_eq!(status, 0, "cuGetProcAddress({}, CUDA {})", entry.name, entry.cuda_version);
        assert!(!pointer.is_null(), "cuGetProcAddress({}) gave NULL", entry.name);
        assert!(!symbol(handle, &entry.fallback_symbol).is_null(), "no symbol {}", entry.fallback_symbol);
    }
    let version = symbol(handle, "cuDriverGetVersion");
    // SAFETY: cuDriverGetVersion(int *), which needs no cuInit.
    let version: DriverGetVersion = unsafe { std::mem::transmute::<*mut c_void, DriverGetVersion>(version) };
    let mut cuda = 0;
    // SAFETY: writes one int.
    assert_eq!(unsafe { version(&mut cuda) }, 0);
    assert!(cuda >= 12000, "the real driver reports CUDA {cuda}, older than cuCtxGetId");
}

// ---- libcai on it: what needs a device fails, and says how to go on --------------------------

fn assert_no_device(status: i32, e: &CaiError, call: &str) {
    let message = e.message_str();
    assert_eq!(status, CAI_ERROR_NO_DRIVER, "{call}: {message}");
    assert_eq!(e.driver_result, CUDA_ERROR_NO_DEVICE, "{call}: {message}");
    for part in [
        "cuInit failed",
        "libcuda.so.1",
        "(CUDA 12.",
        "CUDA_ERROR_NO_DEVICE (100)",
        "found no CUDA device",
        "sync=False",
        "pointer_check=cai.POINTER_CHECK_NEVER",
        "CAI_SYNC_NONE",
        "CAI_POINTER_CHECK_NEVER",
    ] {
        assert!(message.contains(part), "{call}: {message:?} lacks {part:?}");
    }
}

#[test]
fn driver_status_is_no_driver_with_cuinit_no_device_real_nvidia_driver() {
    if real_driver().is_none() {
        return;
    }
    let mut e = blank_error();
    let mut version = -1;
    // driver_result 100 also says libcai resolved its whole table: it resolves before cuInit,
    // and an entry point it cannot find is CAI_ERROR_NO_DRIVER with driver_result 0.
    // SAFETY: both pointers are live locals.
    assert_no_device(unsafe { cai_driver_status(&mut version, &mut e) }, &e, "cai_driver_status");
    assert_eq!(version, -1, "written on failure");
    let mut info = CaiPointerInfo::default();
    let mut e = blank_error();
    // SAFETY: both out-pointers are live locals.
    assert_no_device(unsafe { cai_pointer_info(DATA, &mut info, &mut e) }, &e, "cai_pointer_info");
}

#[test]
fn import_needing_a_device_fails_and_import_without_succeeds_real_nvidia_driver() {
    if real_driver().is_none() {
        return;
    }
    let a = array(&[4, 3], "<f4");
    let import = |a: &CaiArray, options: CaiImportOptions| {
        let mut info = CaiPointerInfo::default();
        let mut e = blank_error();
        // SAFETY: a valid array and live locals for the options and out-pointers.
        let status = unsafe { cai_import(a, &options, &mut info, &mut e) };
        (status, e, info)
    };
    let always = CaiImportOptions { pointer_check: CAI_POINTER_CHECK_ALWAYS, ..Default::default() };
    let (status, e, _) = import(&a, always);
    assert_no_device(status, &e, "cai_import(pointer_check ALWAYS)");

    // The default check runs only where a driver works: here it is skipped, and an array with
    // no stream needs no sync.
    let (status, e, info) = import(&a, CaiImportOptions::default());
    assert_eq!(status, CAI_OK, "{}", e.message_str());
    assert_eq!(info.checked, 0);

    let mut on_stream = a;
    on_stream.stream = 0x5000;
    let (status, e, _) = import(&on_stream, CaiImportOptions::default());
    assert_no_device(status, &e, "cai_import(stream 0x5000, default sync)");
    let no_sync = CaiImportOptions { sync_mode: CAI_SYNC_NONE, ..Default::default() };
    let (status, e, _) = import(&on_stream, no_sync);
    assert_eq!(status, CAI_OK, "{}", e.message_str());
    let never = CaiImportOptions {
        sync_mode: CAI_SYNC_NONE,
        pointer_check: CAI_POINTER_CHECK_NEVER,
        ..Default::default()
    };
    let (status, e, _) = import(&on_stream, never);
    assert_eq!(status, CAI_OK, "{}", e.message_str());

    let mut e = blank_error();
    let sync = CaiSyncOptions { consumer_stream: 0x6000, ..Default::default() };
    // SAFETY: a valid array and live locals.
    assert_no_device(unsafe { cai_sync(&on_stream, &sync, &mut e) }, &e, "cai_sync");
}

#[test]
fn export_joining_work_streams_fails_and_plain_export_succeeds_real_nvidia_driver() {
    if real_driver().is_none() {
        return;
    }
    let work = [0x7000u64, 0x7100];
    let joined = CaiExportOptions { work_streams: work.as_ptr(), work_stream_count: 2, ..Default::default() };
    let mut a = array(&[8], "<i4");
    let before = a;
    let mut e = blank_error();
    // SAFETY: a valid array; the options point to `work`, alive for the call.
    assert_no_device(unsafe { cai_export(&mut a, &joined, &mut e) }, &e, "cai_export(work streams)");
    assert_eq!(a.stream, before.stream, "rewritten on failure");
    let (status, message) = export(&mut a, 3);
    assert_eq!(status, CAI_OK, "{message}");
}

#[test]
fn dlpack_asking_the_driver_fails_and_a_given_device_succeeds_real_nvidia_driver() {
    if real_driver().is_none() {
        return;
    }
    let mut a = array(&[2, 3], "<f4");
    let mut tensor: *mut CaiDLManagedTensorVersioned = std::ptr::null_mut();
    let mut e = blank_error();
    assert_no_device(
        // SAFETY: a valid array, no device (asked of the driver), live out-pointers.
        unsafe { cai_to_dlpack(&mut a, std::ptr::null(), &mut tensor, &mut e) },
        &e,
        "cai_to_dlpack(device NULL)",
    );
    assert!(tensor.is_null());

    let device = CaiDLDevice { device_type: CAI_DL_CUDA, device_id: 0 };
    let mut e = blank_error();
    // SAFETY: a valid array, a live device and live out-pointers.
    assert_eq!(unsafe { cai_to_dlpack(&mut a, &device, &mut tensor, &mut e) }, CAI_OK, "{}", e.message_str());
    let mut back = CaiArray::zeroed();
    let mut e = blank_error();
    // SAFETY: the tensor cai_to_dlpack just made, handed over once; live out-pointers.
    let status = unsafe { cai_from_dlpack(tensor, std::ptr::null(), &mut back, &mut e) };
    assert_eq!(status, CAI_OK, "{}", e.message_str());
    assert_eq!((back.data, back.shape[1]), (DATA, 3));
    let mut e = blank_error();
    // SAFETY: `back` owns the tensor and is released once.
    assert_eq!(unsafe { cai_release(&mut back, &mut e) }, CAI_OK);
}

/// The descriptor's checksum as CaiIpcDescriptor's header comment defines it, computed here
/// as an oracle: FNV-1a 64 a native word at a time.
fn fnv1a64(bytes: &[u8]) -> u64 {
    bytes.chunks_exact(8).fold(0xcbf2_9ce4_8422_2325, |hash, word| {
        (hash ^ u64::from_ne_bytes(word.try_into().unwrap())).wrapping_mul(0x0100_0000_01b3)
    })
}

#[test]
fn ipc_export_and_open_answer_no_device_cleanly_real_nvidia_driver() {
    if real_driver().is_none() {
        return;
    }
    let a = array(&[4], "<f4");
    let mut desc = CaiIpcDescriptor::zeroed();
    let mut e = blank_error();
    // SAFETY: a live array, a writable descriptor and error.
    assert_no_device(unsafe { cai_ipc_export(&a, &mut desc, &mut e) }, &e, "cai_ipc_export");
    // A zero-size array needs no driver, and its descriptor opens to one with no driver either
    // (here: a copy made to look like another process's).
    let empty = array(&[0], "<f4");
    let mut e = blank_error();
    // SAFETY: as above.
    assert_eq!(unsafe { cai_ipc_export(&empty, &mut desc, &mut e) }, CAI_OK, "{}", e.message_str());
    // Another process's descriptor of a 4-element array: opening it needs the device.
    desc.process_token[0] ^= 0xff;
    desc.kind = CAI_IPC_KIND_LEGACY;
    desc.shape[0] = 4;
    desc.allocation_size = 64;
    desc.checksum = fnv1a64(&desc.as_bytes()[..CAI_IPC_DESCRIPTOR_SIZE - 8]);
    let mut out = CaiArray::zeroed();
    let mut e = blank_error();
    // SAFETY: a readable descriptor, a writable array and error.
    assert_no_device(unsafe { cai_ipc_open(&desc, std::ptr::null(), &mut out, &mut e) }, &e, "cai_ipc_open");
    assert!(out.release.is_none(), "out is written only on success");
}
