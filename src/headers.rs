//! The committed headers must equal what cbindgen generates from these sources now.

#[cfg(test)]
mod tests {
    fn assert_fresh(name: &str, generated: &str) {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("include").join(name);
        let committed = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            committed == generated,
            "include/{name} is stale: run scripts/update-headers.sh and commit the result"
        );
    }

    #[test]
    fn committed_c_header_is_fresh() {
        assert_fresh("cai.h", include_str!(concat!(env!("OUT_DIR"), "/cai.h")));
    }

    #[test]
    fn committed_cffi_declarations_are_fresh() {
        assert_fresh("cai_cffi.h", include_str!(concat!(env!("OUT_DIR"), "/cai_cffi.h")));
    }
}
