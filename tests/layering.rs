//! The module trees keep their layers (pure; reads src/ and python/src/): every `crate::` path
//! in a module names a module of a lower layer, so data flows down and no two modules lean on
//! each other. A module added to src/ or python/src/ must be given a layer here. A module is
//! a first path component under src/ or python/src/, except in python/src's folders whose files
//! sit at layers of their own (`PYTHON_FOLDERS_BY_FILE`), where each file is one.

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

/// The module of a file: its first path component under `src`, or, in a folder of
/// `by_file`, "folder/file" (the folder's mod.rs: "folder").
fn module_of(path: &Path, src: &Path, by_file: &[&str]) -> String {
    let relative = path.strip_prefix(src).unwrap();
    let mut parts =
        relative.components().map(|c| c.as_os_str().to_string_lossy().trim_end_matches(".rs").to_string());
    let first = parts.next().unwrap();
    match parts.next() {
        Some(file) if by_file.contains(&first.as_str()) && file != "mod" => format!("{first}/{file}"),
        _ => first,
    }
}

/// The module a path `crate::<used>` names: its first component, or, for a folder of
/// `by_file`, "folder/file" where that has a layer, else the folder. A brace group or a glob
/// after such a folder (`crate::array::{..}`, `crate::array::*`) names no module (it could
/// hide any of its files): each file's path is named on its own.
fn module_used(used: &str, layers: &BTreeMap<&str, u32>, by_file: &[&str]) -> String {
    fn name(text: &str) -> String {
        text.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect()
    }
    let first = name(used);
    let Some(rest) = used[first.len()..].strip_prefix("::") else { return first };
    if !by_file.contains(&first.as_str()) {
        return first;
    }
    let second = name(rest);
    if second.is_empty() {
        return format!("{first}::{}", rest.chars().next().unwrap_or(' '));
    }
    let file = format!("{first}/{second}");
    if layers.contains_key(file.as_str()) {
        file
    } else {
        first
    }
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
/// and the class queries, the leaves, the cai.Array's state (array/), its objects and the
/// import step, the offered types' records (offer/offered.rs), the protocol readers (read/),
/// the one negotiation, the class as Python sees it (array/methods.rs) and the offers, the
/// entry points (entry/).
const PYTHON_LAYERS: [(&str, u32); 26] = [
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
    ("array/dlpack_export", 3),
    ("array/object", 4),
    ("import", 4),
    ("offer/offered", 5),
    ("release_after", 5),
    ("read", 6),
    ("negotiate", 7),
    ("entry/ipc", 8),
    ("offer/exchange", 8),
    ("array/methods", 9),
    ("offer", 9),
    ("entry/c_api_table", 10),
    ("entry/functions", 10),
    ("entry/from_object", 11),
    ("entry", 12),
];

/// The folders of python/src whose files sit at layers of their own: each file is a module
/// ("folder/file"; its mod.rs, "folder").
const PYTHON_FOLDERS_BY_FILE: [&str; 3] = ["array", "entry", "offer"];

#[test]
fn every_module_uses_only_modules_of_lower_layers() {
    uses_go_down(&LAYERS, "src", &[]);
}

#[test]
fn every_module_of_the_python_binding_uses_only_modules_of_lower_layers() {
    uses_go_down(&PYTHON_LAYERS, "python/src", &PYTHON_FOLDERS_BY_FILE);
}

fn uses_go_down(layers: &[(&str, u32)], dir: &str, by_file: &[&str]) {
    let layers: BTreeMap<&str, u32> = layers.iter().copied().collect();
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join(dir);
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut broken = Vec::new();
    for file in files {
        let module = module_of(&file, &src, by_file);
        if module == "lib" {
            continue;
        }
        let layer = *layers.get(module.as_str()).unwrap_or_else(|| panic!("{dir}/{module} has no layer"));
        let text = std::fs::read_to_string(&file).unwrap();
        for used in text.split("crate::").skip(1) {
            let name = module_used(used, &layers, by_file);
            if name == module {
                continue;
            }
            match layers.get(name.as_str()) {
                Some(&used_layer) if used_layer < layer => {}
                _ => broken.push(format!("{} uses crate::{}", file.display(), name.replace('/', "::"))),
            }
        }
    }
    assert!(broken.is_empty(), "uses that go up or sideways:\n{}", broken.join("\n"));
}
