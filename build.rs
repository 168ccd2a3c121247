//! Generates include/cai.h and include/cai_cffi.h from the Rust sources into OUT_DIR (with
//! include/cai.hpp beside them, for the Python package's wheel). The committed copies in
//! include/ are checked against these by a test (src/headers.rs); scripts/update-headers.sh
//! copies them over.

use std::path::PathBuf;

/// libcai's version from Cargo.toml as macros, so that C code can test it at compile time
/// (`#if CAI_VERSION_MAJOR >= 1`); cffi's variant carries no comment (its parser takes none).
fn version_macros(with_comment: bool) -> String {
    let part = |name: &str| std::env::var(name).expect("cargo sets the package version");
    let comment = if with_comment {
        "\n// libcai's version (its Cargo.toml), for compile-time checks.\n"
    } else {
        "\n"
    };
    format!(
        "{comment}#define CAI_VERSION_MAJOR {}\n#define CAI_VERSION_MINOR {}\n#define CAI_VERSION_PATCH {}",
        part("CARGO_PKG_VERSION_MAJOR"),
        part("CARGO_PKG_VERSION_MINOR"),
        part("CARGO_PKG_VERSION_PATCH")
    )
}

fn generate(crate_dir: &str, config_file: &str, out: &PathBuf) {
    let mut config = cbindgen::Config::from_file(PathBuf::from(crate_dir).join(config_file))
        .unwrap_or_else(|e| panic!("{config_file}: {e}"));
    config.after_includes = Some(version_macros(config.documentation));
    cbindgen::Builder::new()
        .with_crate(crate_dir)
        .with_config(config)
        .generate()
        .unwrap_or_else(|e| panic!("cbindgen with {config_file}: {e}"))
        .write_to_file(out);
}

/// The headers in include/ that no generator writes.
const HAND_WRITTEN_HEADERS: [&str; 4] = ["cai.hpp", "cai_python.h", "cai/pybind11.h", "cai/nanobind.h"];

fn main() {
    let crate_dir = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    let out_dir = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    generate(&crate_dir, "cbindgen.toml", &out_dir.join("cai.h"));
    generate(&crate_dir, "cbindgen-cffi.toml", &out_dir.join("cai_cffi.h"));
    // The hand-written headers beside them (the C++ wrapper, the Python extensions' C API and
    // its pybind11 and nanobind casters), and the folder for dependents (the Python package).
    std::fs::create_dir_all(out_dir.join("cai")).expect("OUT_DIR/cai is made");
    for header in HAND_WRITTEN_HEADERS {
        std::fs::copy(PathBuf::from(&crate_dir).join("include").join(header), out_dir.join(header))
            .unwrap_or_else(|e| panic!("include/{header} is copied beside the generated headers: {e}"));
        println!("cargo:rerun-if-changed=include/{header}");
    }
    println!("cargo:include={}", out_dir.display());
    // The install (CMake) asks for a versioned SONAME, libcai.so.MAJOR, so that installed
    // copies can sit side by side, and makes the files it names. A plain cargo build sets
    // none: a program linked with -lcai then asks for libcai.so, the file cargo makes.
    println!("cargo:rerun-if-env-changed=CAI_SONAME");
    if let Ok(soname) = std::env::var("CAI_SONAME") {
        if std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux") {
            println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,{soname}");
        }
    }
    println!("cargo:rerun-if-changed=src");
    println!("cargo:rerun-if-changed=cbindgen.toml");
    println!("cargo:rerun-if-changed=cbindgen-cffi.toml");
}
