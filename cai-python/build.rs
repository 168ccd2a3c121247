//! The one PyO3 cfg this crate's code reads, `Py_LIMITED_API` (abi3: an immutable type's dict is
//! out of reach), taken from the extension's own PyO3: pyo3-ffi (`links = "python"`, so one per
//! dependency graph, whichever PyO3 0.28-0.30 the extension picked) hands its interpreter
//! configuration to the build scripts of the crates that depend on it directly, as
//! `DEP_PYTHON_PYO3_CONFIG`. No pyo3-build-config of this crate's own: a fresh resolution could
//! pick one of another version than the extension's PyO3 (0.30's refuses to run beside a 0.28
//! pyo3-ffi).

use std::process::ExitCode;

/// The metadata's variable: pyo3-ffi's `cargo:PYO3_CONFIG=...`, as cargo names it for dependents.
const CONFIG_VAR: &str = "DEP_PYTHON_PYO3_CONFIG";

fn main() -> ExitCode {
    println!("cargo::rustc-check-cfg=cfg(Py_LIMITED_API)");
    println!("cargo::rerun-if-env-changed={CONFIG_VAR}");
    let Ok(encoded) = std::env::var(CONFIG_VAR) else {
        eprintln!(
            "cai-python: {CONFIG_VAR} is not set: the interpreter configuration that pyo3-ffi (0.28 to 0.30) \
             hands its direct dependents is missing. cai-python depends on pyo3-ffi directly for it; a build \
             that reaches this crate without running pyo3-ffi's build script cannot say whether PyO3 builds \
             for the limited API (abi3)"
        );
        return ExitCode::FAILURE;
    };
    match limited_api(&encoded) {
        Ok(true) => println!("cargo::rustc-cfg=Py_LIMITED_API"),
        Ok(false) => {}
        Err(message) => {
            eprintln!("cai-python: {CONFIG_VAR} cannot be read: {message}");
            return ExitCode::FAILURE;
        }
    }
    ExitCode::SUCCESS
}

/// Whether PyO3 builds for the limited API, from pyo3-ffi's metadata: hex-encoded `key=value`
/// lines. PyO3 0.28 writes `abi3=true` or `abi3=false`; 0.29 and 0.30 write `target_abi=` an
/// implementation, a kind and a version joined by `-` (`CPython-abi3-3.10`), the kinds `abi3`
/// and `abi3t` being the limited API's (0.30 sets `Py_LIMITED_API` for both).
fn limited_api(encoded: &str) -> Result<bool, String> {
    let config = decode_hex(encoded)?;
    let mut found = None;
    for line in config.lines() {
        let Some((key, value)) = line.split_once('=') else { continue };
        let limited = match key {
            "abi3" => match value.trim() {
                "true" => true,
                "false" => false,
                other => return Err(format!("abi3={other}, neither true nor false")),
            },
            "target_abi" => match value.trim().split('-').nth(1) {
                Some("abi3" | "abi3t") => true,
                Some("gil_enabled" | "free_threaded") => false,
                _ => return Err(format!("target_abi={value}, not an implementation-kind-version")),
            },
            _ => continue,
        };
        if found.is_some_and(|seen| seen != limited) {
            return Err("its abi3 and target_abi lines disagree".into());
        }
        found = Some(limited);
    }
    found.ok_or_else(|| "it has neither an abi3 nor a target_abi line".into())
}

/// Two lower-case hex digits per byte, as pyo3-build-config escapes the configuration.
fn decode_hex(encoded: &str) -> Result<String, String> {
    let digits = encoded.trim().as_bytes();
    if !digits.len().is_multiple_of(2) {
        return Err("an odd number of hex digits".into());
    }
    let digit =
        |d: u8| char::from(d).to_digit(16).ok_or_else(|| format!("'{}' is not a hex digit", char::from(d)));
    let bytes = digits
        .chunks_exact(2)
        .map(|pair| Ok((digit(pair[0])? * 16 + digit(pair[1])?) as u8))
        .collect::<Result<Vec<u8>, String>>()?;
    String::from_utf8(bytes).map_err(|_| "not UTF-8 once decoded".into())
}

#[cfg(test)]
mod tests {
    use super::limited_api;

    fn encode(config: &str) -> String {
        config.bytes().map(|byte| format!("{byte:02x}")).collect()
    }

    #[test]
    fn pyo3_028_config_says_abi3_true_or_false() {
        let config = "implementation=CPython\nversion=3.10\nshared=true\nabi3=true\nbuild_flags=\n\
                      suppress_build_script_link_lines=false\n";
        assert_eq!(limited_api(&encode(config)), Ok(true));
        assert_eq!(limited_api(&encode(&config.replace("abi3=true", "abi3=false"))), Ok(false));
    }

    #[test]
    fn pyo3_030_config_says_target_abi() {
        let config =
            |abi: &str| format!("implementation=CPython\nversion=3.13\nshared=true\ntarget_abi={abi}\n");
        assert_eq!(limited_api(&encode(&config("CPython-abi3-3.10"))), Ok(true));
        assert_eq!(limited_api(&encode(&config("CPython-abi3t-3.15"))), Ok(true));
        assert_eq!(limited_api(&encode(&config("CPython-gil_enabled-3.13"))), Ok(false));
        assert_eq!(limited_api(&encode(&config("CPython-free_threaded-3.13-debug"))), Ok(false));
    }

    #[test]
    fn unreadable_config_is_an_error() {
        assert!(limited_api("4").unwrap_err().contains("odd"));
        assert!(limited_api("zz").unwrap_err().contains("hex digit"));
        assert!(limited_api(&encode("version=3.13\n")).unwrap_err().contains("neither"));
        assert!(limited_api(&encode("target_abi=3.13\n")).unwrap_err().contains("target_abi"));
    }
}
