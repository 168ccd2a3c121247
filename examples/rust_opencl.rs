//! The OpenCL half of the OpenCL/CUDA Buffer Interface from Rust, through the `cai` crate: a
//! producer hands over a view of an OpenCL buffer (the `cl_mem`, a byte offset, shape,
//! strides, and the queue its writes are on); libcai checks that the view lies inside the
//! buffer and belongs to the consumer queue's context, and orders the consumer queue after the
//! producer's. Runs on any OpenCL driver (PoCL on a CPU will do). libcai opens libOpenCL.so.1
//! itself; this program opens it too, for its own setup. Exits non-zero when a check fails or
//! no OpenCL device is found.

use std::ffi::{c_void, CStr};
use std::process::ExitCode;

use cai::{Array, ImportOptions, Memory, OpenClStream, Status, SyncMode};

type Handle = *mut c_void;

/// The few OpenCL 1.2 entry points the setup needs, from libOpenCL.so.1.
struct OpenCl {
    get_platform_ids: unsafe extern "C" fn(u32, *mut Handle, *mut u32) -> i32,
    get_device_ids: unsafe extern "C" fn(Handle, u64, u32, *mut Handle, *mut u32) -> i32,
    create_context:
        unsafe extern "C" fn(*const isize, u32, *const Handle, Handle, Handle, *mut i32) -> Handle,
    create_command_queue: unsafe extern "C" fn(Handle, Handle, u64, *mut i32) -> Handle,
    create_buffer: unsafe extern "C" fn(Handle, u64, usize, Handle, *mut i32) -> Handle,
    enqueue_write_buffer:
        unsafe extern "C" fn(Handle, Handle, u32, usize, usize, *const c_void, u32, Handle, Handle) -> i32,
    enqueue_read_buffer:
        unsafe extern "C" fn(Handle, Handle, u32, usize, usize, *mut c_void, u32, Handle, Handle) -> i32,
}

/// The function `name` of `library`, as the function pointer type `F`.
///
/// # Safety
/// `library` is a handle dlopen returned, and `F` the function pointer type of `name`'s C
/// signature.
unsafe fn function<F: Copy>(library: Handle, name: &CStr) -> F {
    // SAFETY: the caller's handle and a NUL-terminated name.
    let found = unsafe { libc::dlsym(library, name.as_ptr()) };
    assert!(!found.is_null(), "libOpenCL.so.1 lacks {name:?}");
    assert_eq!(std::mem::size_of::<F>(), std::mem::size_of::<Handle>());
    // SAFETY: a non-NULL function address, read as the pointer type the caller names.
    unsafe { std::mem::transmute_copy(&found) }
}

const CL_DEVICE_TYPE_ALL: u64 = 0xFFFF_FFFF;
const CL_MEM_READ_WRITE: u64 = 1;
const CL_TRUE: u32 = 1;

impl OpenCl {
    fn open() -> Option<OpenCl> {
        // SAFETY: a NUL-terminated library name; the ICD loader's initializers need nothing.
        let library = unsafe { libc::dlopen(c"libOpenCL.so.1".as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
        if library.is_null() {
            return None;
        }
        // SAFETY: each symbol is the OpenCL 1.2 function of that name, whose C signature the
        // field's type spells (cl_uint u32, cl_bitfield u64, size_t usize, handles pointers).
        unsafe {
            Some(OpenCl {
                get_platform_ids: function(library, c"clGetPlatformIDs"),
                get_device_ids: function(library, c"clGetDeviceIDs"),
                create_context: function(library, c"clCreateContext"),
                create_command_queue: function(library, c"clCreateCommandQueue"),
                create_buffer: function(library, c"clCreateBuffer"),
                enqueue_write_buffer: function(library, c"clEnqueueWriteBuffer"),
                enqueue_read_buffer: function(library, c"clEnqueueReadBuffer"),
            })
        }
    }
}

fn main() -> ExitCode {
    let Some(cl) = OpenCl::open() else {
        eprintln!("libOpenCL.so.1 does not load: install an OpenCL driver (pocl-opencl-icd)");
        return ExitCode::from(2);
    };
    let (mut platform, mut device, mut err): (Handle, Handle, i32) =
        (std::ptr::null_mut(), std::ptr::null_mut(), 0);
    // SAFETY: out-pointers to live locals, one entry each.
    let found = unsafe {
        (cl.get_platform_ids)(1, &mut platform, std::ptr::null_mut()) == 0
            && (cl.get_device_ids)(platform, CL_DEVICE_TYPE_ALL, 1, &mut device, std::ptr::null_mut()) == 0
    };
    if !found {
        eprintln!("no OpenCL device: install one (pocl-opencl-icd)");
        return ExitCode::from(2);
    }
    // The producer: 16 floats written on its own queue, not waited for. The handles live until
    // the process ends (never released: the program is short).
    let values: Vec<f32> = (0..16).map(|i| i as f32).collect();
    // SAFETY: a device found above; out-pointers to live locals; `values` outlives the blocking
    // read below, which the consumer queue orders after this write.
    let (context, producer, consumer, buffer) = unsafe {
        let context = (cl.create_context)(
            std::ptr::null(),
            1,
            &device,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            &mut err,
        );
        let producer = (cl.create_command_queue)(context, device, 0, &mut err);
        let consumer = (cl.create_command_queue)(context, device, 0, &mut err);
        let buffer = (cl.create_buffer)(context, CL_MEM_READ_WRITE, 64, std::ptr::null_mut(), &mut err);
        let write = (cl.enqueue_write_buffer)(
            producer,
            buffer,
            0,
            0,
            64,
            values.as_ptr().cast(),
            0,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
        );
        assert_eq!(write, 0, "clEnqueueWriteBuffer");
        (context, producer, consumer, buffer)
    };
    assert!(!context.is_null() && !buffer.is_null(), "OpenCL setup failed: {err}");
    let (mut passed, mut failed) = (0, 0);
    let mut check = |what: &str, ok: bool| {
        if ok {
            passed += 1;
        } else {
            failed += 1;
            eprintln!("FAILED: {what}");
        }
    };

    // What the producer hands over: a 2x3 view starting at element 4, rows 4 elements apart.
    let describe = |rows: i64| {
        // SAFETY: the buffer and the producer's queue live until the process ends.
        unsafe {
            Array::builder("<f4", &[rows, 3], buffer as u64).opencl(16, OpenClStream::Queue(producer as u64))
        }
        .strides(&[16, 4])
        .build()
    };
    let view = describe(2).expect("a valid description");
    check(
        "the view is OpenCL memory at byte 16",
        view.memory() == Memory::OpenCl { byte_offset: 16, stream_is_event: false },
    );

    // The consumer: bounds and context checked, its queue ordered after the producer's.
    // SAFETY: the consumer's queue lives until the process ends.
    let options =
        unsafe { ImportOptions::new().consumer_stream(consumer as u64) }.sync(SyncMode::StreamOrdered);
    match view.import(&options) {
        Ok(info) => check("the buffer's size is checked", info.checked && info.allocation_size == 64),
        Err(error) => check(&format!("import: {error}"), false),
    }
    let mut rows = [[0f32; 3]; 2];
    for (i, row) in rows.iter_mut().enumerate() {
        // SAFETY: a blocking read of 12 bytes inside the 64-byte buffer into a live row.
        let read = unsafe {
            (cl.enqueue_read_buffer)(
                consumer,
                buffer,
                CL_TRUE,
                16 + 16 * i,
                12,
                row.as_mut_ptr().cast(),
                0,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
            )
        };
        check("clEnqueueReadBuffer", read == 0);
    }
    println!("rows read on the consumer queue: {rows:?}");
    check("the consumer reads the producer's writes", rows == [[4.0, 5.0, 6.0], [8.0, 9.0, 10.0]]);

    // A view that reaches past the buffer is refused before anything reads it.
    let past = describe(4).expect("valid until the buffer's size is asked").import(&options);
    check(
        "a view past the buffer is OUT_OF_BOUNDS",
        past.as_ref().is_err_and(|e| e.status() == Status::OutOfBounds),
    );
    if let Err(error) = past {
        println!("refused as it should be: {error}");
    }
    println!("rust_opencl (OpenCL): {passed} passed, {failed} failed");
    if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
