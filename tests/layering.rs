//! The module trees keep their layers (pure; reads src/ and python/src/): every `crate::` path
//! in a module names a module of a lower layer, so data flows down and no two modules lean on
//! each other. A module added to src/ or python/src/ must be given a layer here.

use std::collections::BTreeMap;
use std::path::Path;

/// Layers, lowest first.
const LAYERS: [(&str, u32); 20] = [
    ("status", 0),
    ("abi", 1),
    ("config", 1),
    ("description", 2),
    ("driver", 2),
    ("dtype", 2),
    ("layout", 2),
    ("device", 3),
    ("element_type", 3),
    ("validate", 4),
    ("dict", 5),
    ("normalize", 5),
    ("import", 6),
    ("export", 6),
    ("dlpack", 6),
    ("ipc", 7),
    ("ffi", 8),
    ("headers", 8),
    ("device_calls", 8),
    ("rust_api", 9),
];

fn module_of(path: &Path, src: &Path) -> String {
    let relative = path.strip_prefix(src).unwrap();
    let first = relative.components().next().unwrap().as_os_str().to_string_lossy().into_owned();
    first.trim_end_matches(".rs").to_string()
}

fn rust_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The Python binding's layers (python/src), lowest first: every raw CPython call (cpython/)
/// and the class queries, the leaves, the cai.Array's state, its objects and the import step,
/// the protocol readers (read/), the one negotiation, the class as Python sees it, the entry
/// points.
const PYTHON_LAYERS: [(&str, u32); 25] = [
    ("cpython", 0),
    ("classes", 0),
    ("c_api_rules", 1),
    ("errors", 1),
    ("exchange_api", 1),
    ("pool", 1),
    ("values", 1),
    ("described", 2),
    ("dlpack", 2),
    ("options", 2),
    ("array", 3),
    ("dlpack_export", 3),
    ("array_object", 4),
    ("import", 4),
    ("offered", 5),
    ("release_after", 5),
    ("read", 6),
    ("negotiate", 7),
    ("exchange_offered", 8),
    ("ipc", 8),
    ("array_methods", 9),
    ("offer", 9),
    ("capi", 10),
    ("functions", 10),
    ("hot", 11),
];

#[test]
fn every_module_uses_only_modules_of_lower_layers() {
    uses_go_down(&LAYERS, "src");
}

#[test]
fn every_module_of_the_python_binding_uses_only_modules_of_lower_layers() {
    uses_go_down(&PYTHON_LAYERS, "python/src");
}

fn uses_go_down(layers: &[(&str, u32)], dir: &str) {
    let layers: BTreeMap<&str, u32> = layers.iter().copied().collect();
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join(dir);
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut broken = Vec::new();
    for file in files {
        let module = module_of(&file, &src);
        if module == "lib" {
            continue;
        }
        let layer = *layers.get(module.as_str()).unwrap_or_else(|| panic!("{dir}/{module} has no layer"));
        let text = std::fs::read_to_string(&file).unwrap();
        for used in text.split("crate::").skip(1) {
            let name: String = used.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
            if name == module {
                continue;
            }
            match layers.get(name.as_str()) {
                Some(&used_layer) if used_layer < layer => {}
                _ => broken.push(format!("{} uses crate::{name}", file.display())),
            }
        }
    }
    assert!(broken.is_empty(), "uses that go up or sideways:\n{}", broken.join("\n"));
}
