//! The cost of exchanging an array through libcai's C ABI: typestr parse, validation, export
//! normalization, import, and sync. Driver paths run against the fake CUDA driver (a test
//! double), so they measure libcai's host-side call path, not a GPU. `copy_struct` (copying one
//! CaiArray) is the in-run baseline the others are read against.
//!
//! `validate vs floor` sets cai_validate beside benches/minimal_validator.c, the same
//! plain-array rules in terse C with no messages, built with the system C compiler at -O2.
//!
//! cargo bench --bench exchange

#[path = "../tests/common/fake_driver.rs"]
#[allow(dead_code)]
mod fake_driver;
mod support;

use std::hint::black_box;
use std::ptr::null_mut;

use cai::*;
use criterion::{criterion_group, criterion_main, Criterion};
use support::{array, floor_cases, many_fields, minimal_validator, with_descr};

fn pure(c: &mut Criterion) {
    let mut g = c.benchmark_group("pure");
    let a3 = array(&[64, 128, 256], "<f4", 0x10000);
    g.bench_function("copy_struct (baseline)", |b| b.iter(|| black_box(*black_box(&a3))));

    let mut dtype = CaiDtype { itemsize: 0, kind: 0, byteorder: 0 };
    for t in [c"<f4", c"<M8[ns]", c"|V12"] {
        g.bench_function(format!("typestr_parse {}", t.to_str().unwrap()), |b| {
            // SAFETY: every pointer is NULL or points to a live value of the type the function takes.
            b.iter(|| unsafe { cai_typestr_parse(black_box(t.as_ptr()), &mut dtype, null_mut()) })
        });
    }

    let a1 = array(&[1 << 20], "<f4", 0x10000);
    let a8 = array(&[2; 8], "<f8", 0x10000);
    let mut strided = array(&[64, 128, 256], "<f4", 0x10000);
    strided.strides_given = 1;
    strided.strides[..3].copy_from_slice(&[-262144, 2048, 8]);
    strided.data = 1 << 40;
    let mask = array(&[64, 128, 256], "|b1", 0x20000);
    let mut masked = a3;
    masked.mask = &mask;
    for (name, a) in
        [("1-D", &a1), ("3-D", &a3), ("8-D", &a8), ("3-D strided", &strided), ("3-D with mask", &masked)]
    {
        g.bench_function(format!("validate {name}"), |b| {
            // SAFETY: every pointer is NULL or points to a live value of the type the function takes.
            b.iter(|| unsafe { cai_validate(black_box(a), null_mut()) })
        });
    }
    let fields = [CaiField::new("x", "<f4", 0).unwrap(), CaiField::new("n", "<i8", 4).unwrap()];
    let mut structured = array(&[1024], "|V12", 0x10000);
    structured.descr = fields.as_ptr();
    structured.descr_count = 2;
    g.bench_function("validate 1-D with 2-field descr", |b| {
        // SAFETY: every pointer is NULL or points to a live value of the type the function takes.
        b.iter(|| unsafe { cai_validate(black_box(&structured), null_mut()) })
    });
    let many = many_fields(100_000);
    let wide = with_descr(&many);
    g.bench_function("validate 1-D with 100,000-field descr", |b| {
        // SAFETY: every pointer is NULL or points to a live value of the type the function takes.
        b.iter(|| unsafe { cai_validate(black_box(&wide), null_mut()) })
    });

    // DLPack: a 3-D tensor taken as a CaiArray and released (its deleter a no-op), next to
    // validating the same array (which the taking includes).
    unsafe extern "C" fn keep(_: *mut CaiDLManagedTensorVersioned) {}
    let mut shape = [64i64, 128, 256];
    let mut tensor = CaiDLManagedTensorVersioned {
        version: CaiDLPackVersion { major: 1, minor: 1 },
        manager_ctx: null_mut(),
        deleter: Some(keep),
        flags: 0,
        dl_tensor: CaiDLTensor {
            data: 0x10000 as *mut _,
            device: CaiDLDevice { device_type: CAI_DL_CUDA, device_id: 0 },
            ndim: 3,
            dtype: CaiDLDataType { code: 2, bits: 32, lanes: 1 },
            shape: shape.as_mut_ptr(),
            strides: null_mut(),
            byte_offset: 0,
        },
    };
    let mut taken = CaiArray::zeroed();
    g.bench_function("cai_from_dlpack 3-D + cai_release", |b| {
        b.iter(|| {
            // SAFETY: the tensor is a live one handed over, and every other pointer NULL or to a live value of its type.
            let status =
                unsafe { cai_from_dlpack(black_box(&mut tensor), std::ptr::null(), &mut taken, null_mut()) };
            // SAFETY: every pointer is NULL or points to a live value of the type the function takes.
            unsafe { cai_release(&mut taken, null_mut()) };
            status
        })
    });

    let mut explicit = array(&[64, 128, 256], "f4", 0x10000);
    explicit.strides_given = 1;
    explicit.strides[..3].copy_from_slice(&[131072, 1024, 4]);
    let options = CaiExportOptions { version: 3, ..Default::default() };
    g.bench_function("export normalization 3-D", |b| {
        b.iter(|| {
            let mut copy = explicit;
            // SAFETY: every pointer is NULL or points to a live value of the type the function takes.
            unsafe { cai_export(&mut copy, &options, null_mut()) }
        })
    });
    let no_check = CaiImportOptions {
        pointer_check: CAI_POINTER_CHECK_NEVER,
        sync_mode: CAI_SYNC_NONE,
        ..Default::default()
    };
    g.bench_function("import 3-D, no pointer check, no sync", |b| {
        // SAFETY: every pointer is NULL or points to a live value of the type the function takes.
        b.iter(|| unsafe { cai_import(black_box(&a3), &no_check, null_mut(), null_mut()) })
    });
    g.finish();
}

fn validate_vs_floor(c: &mut Criterion) {
    let floor = minimal_validator();
    let mut g = c.benchmark_group("validate vs floor");
    for (name, a) in floor_cases() {
        assert_eq!(floor(&a), 0, "the floor accepts {name}");
        g.bench_function(format!("floor {name}"), |b| b.iter(|| floor(black_box(&a))));
        g.bench_function(format!("cai_validate {name}"), |b| {
            // SAFETY: every pointer is NULL or points to a live value of the type the function takes.
            b.iter(|| unsafe { cai_validate(black_box(&a), null_mut()) })
        });
    }
    g.finish();
}

fn fake_driver_paths(c: &mut Criterion) {
    let f = fake_driver::fake();
    f.begin(0);
    let mut g = c.benchmark_group("fake driver (host cost of the call path)");
    let data = f.alloc(64 * 128 * 256 * 4, fake_driver::MEMORY_DEVICE, 0, 0);
    let a = array(&[64, 128, 256], "<f4", data);
    let checked = CaiImportOptions { pointer_check: CAI_POINTER_CHECK_ALWAYS, ..Default::default() };
    let mut info = cai::CaiPointerInfo::default();
    g.bench_function("import 3-D with pointer query, no sync", |b| {
        // SAFETY: every pointer is NULL or points to a live value of the type the function takes.
        b.iter(|| unsafe { cai_import(black_box(&a), &checked, &mut info, null_mut()) })
    });
    let (producer, consumer) = (f.stream(0), f.stream(0));
    let mut streamed = a;
    streamed.stream = producer;
    g.bench_function("sync stream-ordered (event record + wait)", |b| {
        b.iter(|| {
            let options = CaiSyncOptions {
                consumer_stream: consumer,
                sync_mode: CAI_SYNC_STREAM_ORDERED,
                ..Default::default()
            };
            // SAFETY: every pointer is NULL or points to a live value of the type the function takes.
            let status = unsafe { cai_sync(black_box(&streamed), &options, null_mut()) };
            f.begin(0); // keeps the fake's per-thread call log from filling up
            status
        })
    });
    g.bench_function("fake log reset (subtract from the line above)", |b| b.iter(|| f.begin(0)));
    let export_streams = [f.stream(0)];
    let export_options = CaiExportOptions {
        work_streams: export_streams.as_ptr(),
        work_stream_count: 1,
        ..Default::default()
    };
    g.bench_function("export 3-D joining one work stream", |b| {
        b.iter(|| {
            let mut copy = streamed;
            // SAFETY: every pointer is NULL or points to a live value of the type the function takes.
            let status = unsafe { cai_export(&mut copy, &export_options, null_mut()) };
            f.begin(0);
            status
        })
    });
    g.finish();
}

criterion_group!(benches, validate_vs_floor, pure, fake_driver_paths);
criterion_main!(benches);
