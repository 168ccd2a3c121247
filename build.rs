//! Generates include/cai.h and include/cai_cffi.h from the Rust sources into OUT_DIR. The
//! committed copies in include/ are checked against these by a test (src/headers.rs);
//! scripts/update-headers.sh copies them over.

use std::path::PathBuf;

fn generate(crate_dir: &str, config_file: &str, out: &PathBuf) {
    let config = cbindgen::Config::from_file(PathBuf::from(crate_dir).join(config_file))
        .unwrap_or_else(|e| panic!("{config_file}: {e}"));
    cbindgen::Builder::new()
        .with_crate(crate_dir)
        .with_config(config)
        .generate()
        .unwrap_or_else(|e| panic!("cbindgen with {config_file}: {e}"))
        .write_to_file(out);
}

fn main() {
    let crate_dir = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    let out_dir = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    generate(&crate_dir, "cbindgen.toml", &out_dir.join("cai.h"));
    generate(&crate_dir, "cbindgen-cffi.toml", &out_dir.join("cai_cffi.h"));
    // A versioned SONAME (libcai.so.MAJOR), so that installed copies can sit side by side.
    if std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux") {
        let major = std::env::var("CARGO_PKG_VERSION_MAJOR").expect("cargo sets the version");
        println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libcai.so.{major}");
    }
    println!("cargo:rerun-if-changed=src");
    println!("cargo:rerun-if-changed=cbindgen.toml");
    println!("cargo:rerun-if-changed=cbindgen-cffi.toml");
}
