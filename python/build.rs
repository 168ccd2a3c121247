//! Puts libcai's headers (cai.h, cai.hpp, cai_cffi.h, cai_python.h, cai/pybind11.h,
//! cai/nanobind.h), as the core's build made them, into cai/include/, which maturin ships in
//! the wheel: `cai.get_include()` finds them there for compiled extensions and cffi. The folder
//! is a build output (ignored by git). It also passes on the interpreter's build flags as cfgs
//! (`Py_GIL_DISABLED` for a free-threaded CPython).

use std::path::PathBuf;

fn main() {
    pyo3_build_config::use_pyo3_cfgs();
    let generated =
        PathBuf::from(std::env::var("DEP_CAI_INCLUDE").expect("the cai crate's build names its headers"));
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let include = manifest.join("cai").join("include");
    std::fs::create_dir_all(include.join("cai")).expect("cai/include/cai/ is made");
    for header in ["cai.h", "cai.hpp", "cai_cffi.h", "cai_python.h", "cai/pybind11.h", "cai/nanobind.h"] {
        let from = generated.join(header);
        std::fs::copy(&from, include.join(header)).unwrap_or_else(|e| panic!("{}: {e}", from.display()));
        println!("cargo:rerun-if-changed={}", from.display());
    }
    println!("cargo:rerun-if-env-changed=DEP_CAI_INCLUDE");
}
