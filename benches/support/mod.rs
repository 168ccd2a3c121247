//! What the criterion benches and the instruction-count loop share: the arrays, and the
//! floor validator (benches/minimal_validator.c) built for the run.

use cai::*;

pub fn array(shape: &[i64], typestr: &str, data: u64) -> CaiArray {
    let mut a = CaiArray::zeroed();
    a.version = 3;
    a.ndim = shape.len() as i32;
    a.shape[..shape.len()].copy_from_slice(shape);
    a.set_typestr(typestr);
    a.data = data;
    a
}

/// benches/minimal_validator.c, compiled for this run; its `minimal_validate`.
pub fn minimal_validator() -> extern "C" fn(*const CaiArray) -> i32 {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let library = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("libminimal_validator.so");
    let status = std::process::Command::new(std::env::var("CC").unwrap_or_else(|_| "cc".into()))
        .args(["-std=c11", "-O2", "-shared", "-fPIC", "-Wall", "-Werror"])
        .arg(root.join("include").to_str().map(|i| format!("-I{i}")).unwrap())
        .arg(root.join("benches/minimal_validator.c"))
        .arg("-o")
        .arg(&library)
        .status()
        .expect("a C compiler (cc) builds the floor");
    assert!(status.success(), "building benches/minimal_validator.c failed");
    let path = std::ffi::CString::new(library.to_str().unwrap()).unwrap();
    // SAFETY: dlopen and dlsym of the library just built, whose function has this signature.
    unsafe {
        let handle = libc::dlopen(path.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL);
        assert!(!handle.is_null(), "dlopen of the floor failed");
        let symbol = libc::dlsym(handle, c"minimal_validate".as_ptr());
        assert!(!symbol.is_null());
        std::mem::transmute::<*mut libc::c_void, extern "C" fn(*const CaiArray) -> i32>(symbol)
    }
}

/// `count` fields named f0, f1, ... of type <f4, one after another.
pub fn many_fields(count: usize) -> Vec<CaiField> {
    (0..count).map(|i| CaiField::new(&format!("f{i}"), "<f4", 4 * i as u64).unwrap()).collect()
}

/// A 1-D array of 16 structured items described by `fields` (borrowed: keep them alive).
pub fn with_descr(fields: &[CaiField]) -> CaiArray {
    let mut a = array(&[16], &format!("|V{}", 4 * fields.len()), 0x10000);
    a.descr = fields.as_ptr();
    a.descr_count = fields.len() as u32;
    a
}

/// The arrays the floor and cai_validate are compared on: contiguous 1-D, 3-D and 8-D.
pub fn floor_cases() -> [(&'static str, CaiArray); 3] {
    [
        ("1-D", array(&[1 << 20], "<f4", 0x10000)),
        ("3-D", array(&[64, 128, 256], "<f4", 0x10000)),
        ("8-D", array(&[2; 8], "<f8", 0x10000)),
    ]
}
