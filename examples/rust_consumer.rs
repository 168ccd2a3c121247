//! A Rust producer and consumer of the CUDA Array Interface through the `cai` crate, run on
//! libcai's fake CUDA driver (tests/fake_cuda, a test double that hands out device pointers
//! and streams without a GPU): `CAI_CUDA_DRIVER` names its library, which libcai opens at
//! run time as it would open libcuda.so.1. scripts/test.sh builds the fake and runs this
//! program as a crate that depends on `cai` by path (tests/dependent).
//!
//! The producer describes device memory written on its stream as a `cai::Array` whose release
//! it counts; the consumer imports it (the pointer checked against its allocation, its stream
//! ordered after the producer's), reads its layout and hands it on as DLPack; the release runs
//! exactly once. Exits non-zero when any check fails.

use std::ffi::{c_char, c_void, CStr, CString};
use std::process::ExitCode;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use cai::{Array, CaiDLDevice, ImportOptions, PointerCheck, Status, SyncMode, CAI_DL_CUDA};

/// The fake driver's own controls (fake_cuda.c), reached in the library libcai opens.
struct FakeDriver {
    handle: *mut c_void,
}

impl FakeDriver {
    fn open(path: &str) -> FakeDriver {
        let path = CString::new(path).expect("CAI_CUDA_DRIVER holds no NUL");
        // SAFETY: a NUL-terminated path; the fake's initializers have no preconditions.
        let handle = unsafe { libc::dlopen(path.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
        assert!(!handle.is_null(), "dlopen of {path:?} failed: is it tests/fake_cuda's library?");
        FakeDriver { handle }
    }

    fn symbol(&self, name: &CStr) -> *mut c_void {
        // SAFETY: a handle dlopen returned and a NUL-terminated name.
        let symbol = unsafe { libc::dlsym(self.handle, name.as_ptr()) };
        assert!(!symbol.is_null(), "the fake driver lacks {name:?}");
        symbol
    }

    /// Makes device 0's context current on this thread and clears the thread's call log.
    fn begin(&self) {
        // SAFETY: fake_cuda.c defines `void fake_cuda_set_device(int)` and `void
        // fake_cuda_log_clear(void)`.
        unsafe {
            let set_device: extern "C" fn(i32) = std::mem::transmute(self.symbol(c"fake_cuda_set_device"));
            let clear: extern "C" fn() = std::mem::transmute(self.symbol(c"fake_cuda_log_clear"));
            set_device(0);
            clear();
        }
    }

    /// `size` bytes of device memory on device 0 (cuMemAlloc's stand-in).
    fn alloc(&self, size: u64) -> u64 {
        const MEMORY_DEVICE: u32 = 2;
        // SAFETY: fake_cuda.c defines `uint64_t fake_cuda_alloc(uint64_t, unsigned, int, unsigned)`.
        let alloc: extern "C" fn(u64, u32, i32, u32) -> u64 =
            unsafe { std::mem::transmute(self.symbol(c"fake_cuda_alloc")) };
        alloc(size, MEMORY_DEVICE, 0, 0)
    }

    /// A new stream on device 0, live until the process ends (cuStreamCreate's stand-in).
    fn stream(&self) -> u64 {
        // SAFETY: fake_cuda.c defines `uint64_t fake_cuda_stream_create(int)`.
        let create: extern "C" fn(i32) -> u64 =
            unsafe { std::mem::transmute(self.symbol(c"fake_cuda_stream_create")) };
        create(0)
    }

    /// This thread's driver calls since `begin`, one per line.
    fn log(&self) -> String {
        // SAFETY: fake_cuda.c defines `const char *fake_cuda_log(void)`, NUL-terminated.
        unsafe {
            let log: extern "C" fn() -> *const c_char = std::mem::transmute(self.symbol(c"fake_cuda_log"));
            CStr::from_ptr(log()).to_string_lossy().into_owned()
        }
    }
}

/// Counts checks and says which failed.
#[derive(Default)]
struct Checks {
    passed: usize,
    failed: usize,
}

impl Checks {
    fn check(&mut self, what: &str, ok: bool) {
        if ok {
            self.passed += 1;
        } else {
            self.failed += 1;
            eprintln!("FAILED: {what}");
        }
    }
}

fn main() -> ExitCode {
    let Ok(path) = std::env::var("CAI_CUDA_DRIVER") else {
        eprintln!("set CAI_CUDA_DRIVER to tests/fake_cuda's library (scripts/test.sh builds it)");
        return ExitCode::from(2);
    };
    let fake = FakeDriver::open(&path);
    fake.begin();
    let mut checks = Checks::default();

    // The producer: 4x6 float32 in a 256-byte allocation, written on its stream.
    let (data, producer_stream, consumer_stream) = (fake.alloc(256), fake.stream(), fake.stream());
    let releases = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&releases);
    // SAFETY: the fake's streams live until the process ends.
    let array = unsafe { Array::builder("<f4", &[4, 6], data).stream(producer_stream) }
        .on_release(move || {
            counter.fetch_add(1, Ordering::SeqCst);
        })
        .build()
        .expect("a valid description");

    // Validation and layout: pure, no driver needed.
    let layout = array.layout().expect("a valid array has a layout");
    checks.check("layout: 24 elements, 96 bytes, C-contiguous", {
        (layout.element_count, layout.nbytes, layout.c_contiguous) == (24, 96, true)
    });
    checks.check("dtype: 4-byte floats", array.dtype().is_ok_and(|dtype| dtype.itemsize == 4));

    // The consumer: the pointer checked (always), its stream ordered after the producer's.
    // SAFETY: the consumer's stream lives until the process ends.
    let options = unsafe { ImportOptions::new().consumer_stream(consumer_stream) }
        .pointer_check(PointerCheck::Always)
        .sync(SyncMode::StreamOrdered);
    match array.import(&options) {
        Ok(info) => {
            checks.check("the driver was asked about the pointer", info.checked);
            checks.check(
                "the allocation is the producer's",
                (info.allocation_base, info.allocation_size) == (data, 256),
            );
            checks.check(
                "the consumer's stream waits on the producer's",
                fake.log().contains("cuStreamWaitEvent"),
            );
        }
        Err(error) => checks.check(&format!("import: {error}"), false),
    }

    // A view that runs past its allocation is refused, naming the fix; dropping it releases it.
    let view_releases = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&view_releases);
    let too_long = Array::builder("<f4", &[4, 100], data)
        .on_release(move || {
            counter.fetch_add(1, Ordering::SeqCst);
        })
        .build()
        .expect("valid until the driver is asked");
    let refused = too_long.import(&ImportOptions::new().pointer_check(PointerCheck::Always));
    checks.check(
        "a view past its allocation is OUT_OF_BOUNDS",
        refused.as_ref().is_err_and(|error| error.status() == Status::OutOfBounds),
    );
    if let Err(error) = &refused {
        println!("refused as it should be: {error}");
    }
    drop(too_long);
    checks.check("Drop released the refused view once", view_releases.load(Ordering::SeqCst) == 1);

    // Handed on as DLPack: the release moves with the tensor and runs once, when it is deleted.
    let device = CaiDLDevice { device_type: CAI_DL_CUDA, device_id: 0 };
    match array.into_dlpack(Some(device)) {
        Ok(tensor) => {
            checks.check("no release while the tensor lives", releases.load(Ordering::SeqCst) == 0);
            drop(tensor);
        }
        Err(error) => checks.check(&format!("into_dlpack: {error}"), false),
    }
    checks.check("the producer's release ran exactly once", releases.load(Ordering::SeqCst) == 1);

    println!("rust_consumer (fake CUDA driver): {} passed, {} failed", checks.passed, checks.failed);
    if checks.failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
