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

/// The C header's sections, each headed by one line before the first item that opens it (its
/// doc comment included), so that a reader finds constants, statuses, types and each area's
/// functions in that order.
const SECTIONS: [(&str, &str); 7] = [
    ("#define CAI_MAX_NDIM ", "Constants: limits, versions, the values fields and options take"),
    ("#define CAI_OK ", "Statuses: what every function returns"),
    ("typedef struct CaiField ", "Types"),
    ("CaiStatus cai_validate(", "Arrays: validate, lay out, export, release, move"),
    ("CaiStatus cai_import(", "Consumers and the driver: import, sync, pointer queries"),
    ("CaiStatus cai_from_dlpack(", "DLPack: tensors in and out"),
    ("CaiStatus cai_typestr_parse(", "Typestrs, status names, the library's version"),
];

/// `header` with a heading line before each section, and no run of blank lines longer than one.
fn with_section_headings(header: &str) -> String {
    let mut lines: Vec<String> = header.lines().map(str::to_string).collect();
    for (anchor, title) in SECTIONS {
        let at = lines.iter().position(|line| line.starts_with(anchor)).unwrap_or_else(|| panic!("{anchor}"));
        let mut start = at;
        while start > 0 && lines[start - 1].starts_with("//") {
            start -= 1;
        }
        let rule = "-".repeat(96usize.saturating_sub(title.len() + 7));
        lines.insert(start, format!("// ---- {title} {rule}"));
        lines.insert(start + 1, String::new());
    }
    let mut text = String::new();
    for line in lines {
        if line.is_empty() && text.ends_with("\n\n") {
            continue;
        }
        text.push_str(&line);
        text.push('\n');
    }
    text
}

fn generate(crate_dir: &str, config_file: &str, out: &PathBuf) {
    let mut config = cbindgen::Config::from_file(PathBuf::from(crate_dir).join(config_file))
        .unwrap_or_else(|e| panic!("{config_file}: {e}"));
    config.after_includes = Some(version_macros(config.documentation));
    let documented = config.documentation;
    let mut written = Vec::new();
    cbindgen::Builder::new()
        .with_crate(crate_dir)
        .with_config(config)
        .generate()
        .unwrap_or_else(|e| panic!("cbindgen with {config_file}: {e}"))
        .write(&mut written);
    let header = String::from_utf8(written).expect("cbindgen writes UTF-8");
    // cffi's parser takes no comments: its header stays as cbindgen writes it.
    let header = if documented { with_section_headings(&header) } else { header };
    std::fs::write(out, header).unwrap_or_else(|e| panic!("{}: {e}", out.display()));
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
